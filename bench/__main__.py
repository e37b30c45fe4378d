"""`make bench` / `python -m bench`: memory, code size and speed of generated firmware (DESIGN §8).

For every model in ../shared/models (when present) and a few project fixtures:
  * activation pool bytes vs the schedule's lower bound vs the TFLite Micro arena
    (tflite-micro pip, measured in this run);
  * weights bytes, runtime + kernel code bytes (the model's and runtime's .text/.rodata kept
    in the linked firmware, from the linker map);
  * instructions per inference on the emulated Cortex-M4 (QEMU -icount shift=0: one
    instruction per virtual ns, so instructions = SysTick ticks * 1e9 / SysTick Hz),
    MACs per instruction, and the ratio to TFLM + CMSIS-NN from ../shared/BASELINES.md;
  * compile + emit time.
Writes bench/results/bench.json and bench/results/bench.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
FIXTURES = ["conv_stride2_same_int8", "dwconv_dm2_valid_int8", "dense_relu_int8", "add_residual_int8"]
EMULATED = ["qemu-netduinoplus2", "qemu-mps2-an386"]


def baselines() -> dict[str, dict[str, int]]:
    """TFLM + CMSIS-NN figures per model stem from ../shared/BASELINES.md."""
    path = SHARED / "BASELINES.md"
    out: dict[str, dict[str, int]] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and "/" in cells[0] and cells[1].replace(",", "").isdigit():
            num = [int(c.replace(",", "")) if c.replace(",", "").isdigit() else None for c in cells]
            out[cells[0].split("/")[-1]] = {"macs": num[1], "cmsis_instructions": num[2],
                                            "ref_instructions": num[4], "tflm_arena": num[5]}
    return out


_SECTION = re.compile(r"^ (\.\S+)?\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S+\.o)\s*$")


def model_code_bytes(map_file: Path) -> int:
    """Bytes of .text/.rodata kept from the model and runtime objects (Model/...)."""
    text = map_file.read_text(errors="replace")
    text = text[text.find("Linker script and memory map"):]
    total, pending = 0, None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            name = m.group(1) or pending
            pending = None
            if name and "/Model/" in m.group(4) and name.startswith((".text", ".rodata")):
                total += int(m.group(3), 16)
        elif re.match(r"^ \.\S+\s*$", line):
            pending = line.strip()
        else:
            pending = None
    return total


def bench_model(path: Path, base: dict[str, int] | None, workdir: Path) -> dict[str, Any]:
    from stm32ai.boards import load_board
    from stm32ai.emitter import emit_c
    from stm32ai.errors import Stm32aiError
    from stm32ai.pipeline import compile_model
    from stm32ai.project.build import generate_firmware_project
    from stm32ai.project.generator import plan_placement
    from stm32ai.project.run import build_project, run_qemu
    from stm32ai.validate.reference import ReferenceUnavailable, tflm_arena_bytes

    row: dict[str, Any] = {"model": str(path.relative_to(path.parents[1])), "stem": path.stem}
    t0 = time.perf_counter()
    try:
        c = compile_model(path, "network")
        emit_c(c.doc, c.params, "network", workdir / "c_only")
    except Stm32aiError as e:
        row["status"] = f"unsupported: {e}"
        return row
    row["generate_s"] = round(time.perf_counter() - t0, 3)
    pools = {p["name"]: p for p in c.doc["stm32ai"]["pools"]}
    row.update(pool_bytes=pools["activations"]["size"], lower_bound_bytes=pools["activations"]["lower_bound"],
               weights_bytes=pools["weights"]["size"], macc=sum(op.macc for op in c.graph.ops))
    try:
        row["tflm_arena_bytes"] = tflm_arena_bytes(path)
        row["pool_vs_tflm_arena"] = round(row["pool_bytes"] / row["tflm_arena_bytes"], 3)
    except ReferenceUnavailable as e:
        row["tflm_arena_bytes"] = None
        row["tflm_note"] = e.reason[:120]
    board = None
    for bid in EMULATED:
        b = load_board(bid)
        try:
            plan_placement(b, activations_bytes=row["pool_bytes"], weights_bytes=row["weights_bytes"])
            board = b
            break
        except Stm32aiError:
            continue
    if board is None:
        row["status"] = "does not fit the emulated boards"
        return row
    row["board"] = board.id
    proj = workdir / "proj"
    args = SimpleNamespace(model=str(path), board=board.id, name="network", activations_pool=None,
                           weights_pool=None)
    try:
        generate_firmware_project(args, c, proj)
        elf = build_project(proj)
    except Stm32aiError as e:
        row["status"] = f"build failed: {e}"
        return row
    row["code_bytes"] = model_code_bytes(proj / "build" / "firmware.map")
    code, uart = run_qemu(elf, board, timeout_s=900.0)
    fields = dict(re.findall(r"^(\w+): (.*)$", uart, re.M))
    row["result"] = fields.get("result", f"no result (exit {code})")
    if "cycles" in fields and fields.get("cycle_counter") == "systick":
        hz = int(fields.get("sysclk_hz", board.summary()["sysclk_hz"]))
        instr = round(int(fields["cycles"]) * 1e9 / hz)
        row["instructions"] = instr
        macs = (base or {}).get("macs") or row["macc"]
        row["macs_per_instruction"] = round(macs / instr, 3) if instr else None
        if base and base.get("cmsis_instructions"):
            row["tflm_cmsis_instructions"] = base["cmsis_instructions"]
            row["instr_vs_tflm_cmsis"] = round(instr / base["cmsis_instructions"], 3)
    row["status"] = {"match": "ok", "no-reference": "no reference"}.get(row["result"], "mismatch")
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    def f(v: Any, spec: str = ",") -> str:
        return "—" if v is None else format(v, spec) if isinstance(v, (int, float)) else str(v)

    head = ("| model | status | pool B | lower bound B | TFLM arena B | pool/arena | weights B | code B "
            "| instructions | MACs/instr | ours/TFLM+CMSIS-NN | compile s |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        status = r.get("status", "?")
        if status.startswith("unsupported"):
            status = "unsupported"
        lines.append(
            f"| {r['model']} | {status} | {f(r.get('pool_bytes'))} | {f(r.get('lower_bound_bytes'))} "
            f"| {f(r.get('tflm_arena_bytes'))} | {f(r.get('pool_vs_tflm_arena'), '.3f')} "
            f"| {f(r.get('weights_bytes'))} | {f(r.get('code_bytes'))} | {f(r.get('instructions'))} "
            f"| {f(r.get('macs_per_instruction'), '.3f')} | {f(r.get('instr_vs_tflm_cmsis'), '.3f')} "
            f"| {f(r.get('generate_s'), '.2f')} |")
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench")
    ap.add_argument("models", nargs="*", help="model files (default: ../shared/models and fixtures)")
    ap.add_argument("-o", "--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args(argv)
    if args.models:
        models = [Path(m) for m in args.models]
    else:
        models = sorted((SHARED / "models").glob("*/*.tflite"))
        models += [ROOT / "tests" / "fixtures" / "models" / f"{s}.tflite" for s in FIXTURES]
    base = baselines()
    rows = []
    for m in models:
        print(f"bench: {m.name} ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="stm32ai-bench-") as tmp:
            try:
                row = bench_model(m, base.get(m.stem), Path(tmp))
            except Exception as e:  # one model's failure must not hide the others' figures
                row = {"model": m.name, "stem": m.stem, "status": f"error: {type(e).__name__}: {e}"}
        print(f"bench: {m.name}: {json.dumps(row)}", file=sys.stderr, flush=True)
        rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(rows, indent=1) + "\n")
    md = markdown(rows)
    (out / "bench.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
