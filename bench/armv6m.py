"""The Armv6-M part of `make bench`: instructions on the emulated Cortex-M0 (QEMU `microbit`,
board qemu-microbit) for the models that fit its 256 KiB flash and 16 KiB RAM, beside the
published NUCLEO-G0B1RE (Cortex-M0+, 64 MHz) cycles of ../shared/BASELINES.md (Bosch, MLPerf
Tiny v1.2). QEMU counts instructions, not cycles: a Cortex-M0+ needs at least one cycle per
instruction (two for loads/stores and taken branches), so instructions under the published
cycles are necessary, not sufficient, to beat them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

M0_BOARD = "qemu-microbit"
M0_PUBLISHED_ROW = "NUCLEO-G0B1RE (M0+, 64)"
MLPERF_COLUMNS = ["pretrainedResnet_quant", "kws_ref_model", "vww_96_int8", "ad01_int8"]   # IC KWS VWW AD


def published_m0(text: str) -> dict[str, dict[str, Any]]:
    """BASELINES.md's row for NUCLEO-G0B1RE: per model stem, cycles and submitter."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] == M0_PUBLISHED_ROW:
            out = {}
            for stem, cell in zip(MLPERF_COLUMNS, cells[2:], strict=True):
                v = cell.split("(")[0].strip().rstrip("M").strip()
                try:
                    out[stem] = {"cycles": round(float(v) * 1e6), "by": cells[1]}
                except ValueError:
                    continue
            return out
    return {}


def bench_m0(row: dict[str, Any], path: Path, workdir: Path, build_run: Any,
             published: dict[str, dict[str, Any]]) -> None:
    """The model compiled for qemu-microbit (its flash budget drives the weight layouts, as
    `generate --board qemu-microbit` does), built for -mcpu=cortex-m0, run; verdict and count."""
    from stm32ai.boards import load_board
    from stm32ai.errors import Stm32aiError
    from stm32ai.pipeline import compile_model, weights_budget_for
    from stm32ai.project.generator import plan_placement

    board = load_board(M0_BOARD)
    pub = published.get(path.stem)
    if pub:
        row.update(m0_published_cycles=pub["cycles"], m0_published_by=pub["by"])
    try:
        c = compile_model(path, "network", weights_budget=weights_budget_for(M0_BOARD))
        pools = {p["name"]: p for p in c.doc["stm32ai"]["pools"]}
        plan_placement(board, activations_bytes=pools["activations"]["size"],
                       weights_bytes=pools["weights"]["size"])
    except Stm32aiError as e:
        row["m0_result"] = "does not fit" if "do not fit" in str(e) else f"unsupported: {e}"
        row["m0_note"] = str(e)[:200]
        return
    args = SimpleNamespace(model=str(path), board=board.id, name="network", activations_pool=None,
                           weights_pool=None, profile=False)
    try:
        _, out = build_run(args, c, workdir, board)
    except Stm32aiError as e:
        row["m0_result"] = f"build failed: {e}"
        return
    row["m0_result"] = out.result
    if out.unit == "instructions" and out.count:
        row["m0_instructions"] = out.count
        if pub:
            row["m0_instr_vs_published_cycles"] = round(out.count / pub["cycles"], 3)


def m0_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: emulated Cortex-M0 instructions beside the published NUCLEO-G0B1RE cycles."""
    sel = [r for r in rows if r.get("m0_result")]
    if not sel:
        return ""
    out = ["\n### Emulated Cortex-M0 (qemu-microbit) vs published NUCLEO-G0B1RE (Cortex-M0+) cycles\n",
           "| model | result | M0 instructions | published G0B1RE cycles (by) | instr / published cycles |",
           "|---|---|---|---|---|"]
    for r in sel:
        n = f"{r['m0_instructions']:,}" if r.get("m0_instructions") and r["m0_result"] == "match" else "—"
        pub = (f"{r['m0_published_cycles']:,} ({r['m0_published_by']})" if r.get("m0_published_cycles")
               else "—")
        ratio = f"{r['m0_instr_vs_published_cycles']:.3f}" if r.get("m0_instr_vs_published_cycles") else "—"
        out.append(f"| {r['stem']} | {r['m0_result']} | {n} | {pub} | {ratio} |")
    out.append("\nM0 instructions: the plain demo firmware built for -mcpu=cortex-m0 (Armv6-M: no DSP, "
               "unaligned accesses fault) on QEMU `microbit` with `-icount shift=0` (SysTick at 16 MHz: "
               "one tick = 62.5 instructions), output checked against the reference. Published: Bosch, "
               "MLPerf Tiny v1.2, real NUCLEO-G0B1RE at 64 MHz (cycles = latency x clock). Instructions "
               "are not cycles: a Cortex-M0+ takes 2 cycles per load, store and taken branch.\n")
    return "\n".join(out) + "\n"
