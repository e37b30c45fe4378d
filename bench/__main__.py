"""`make bench` / `python -m bench`: memory, code size and speed of generated firmware (docs/bench.md).

For every model in ../shared/models (when present) and a few project fixtures:
  * activation pool bytes vs the schedule's lower bound vs the TFLite Micro arena
    (tflite-micro pip, measured in this run);
  * weights bytes, runtime + kernel code bytes (the model's and runtime's .text/.rodata kept
    in the linked firmware, from the linker map);
  * instructions per inference on the emulated Cortex-M4 (QEMU -icount shift=0; the demo
    prints `instructions:`, converted from SysTick by the board file's icount_shift), MACs per
    instruction, the ratio to TFLM + CMSIS-NN (first table of ../shared/BASELINES.md) and to the
    best published Cortex-M4 cycles (second table: X-CUBE-AI 9.0, Plumerai for AD), where a
    model has them;
  * instructions on the emulated Cortex-M7 (QEMU mps2-an500, kernels built for cortex-m7);
  * instructions on the emulated Cortex-M33 (QEMU mps2-an505, kernels built for cortex-m33 with
    DSP) beside the published NUCLEO-U575ZI-Q cycles (BASELINES.md's third table);
  * a per-layer table per model (kernel, shapes, MACC, instructions, instr/MAC, share), from a
    second firmware built with --profile; the headline figure comes from the plain firmware, so
    it carries no profiling overhead;
  * for the MLPerf Tiny models, the `--optimization ram` table (bench/ram.py): pools balanced /
    ram without / with stripes, the ram firmware's instructions and verdict, estimated cycles on
    NUCLEO-L4R5ZI and the cost of the mode;
  * compile + emit time.
Writes bench/results/bench.json and bench/results/bench.md.

    python -m bench                          # everything (make bench; not in CI: it takes a while)
    python -m bench --only kws,vww           # models whose file stem contains one of these
    python -m bench path/to/model.tflite     # given files
    python -m bench --only ad01_int8 --no-profile   # headline numbers only (one firmware per model)
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

from bench.armv6m import bench_m0, m0_table, published_m0
from bench.ram import bench_ram, ram_table

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
FIXTURES = ["conv_stride2_same_int8", "dwconv_dm2_valid_int8", "dense_relu_int8", "add_residual_int8"]
EMULATED = ["qemu-netduinoplus2", "qemu-mps2-an386"]
M7_BOARD = "qemu-mps2-an500"      # emulated Cortex-M7: the same kernels built for -mcpu=cortex-m7
M33_BOARD = "qemu-mps2-an505"     # emulated Cortex-M33 (Armv8-M Mainline + DSP): -mcpu=cortex-m33
M33_SILICON = "nucleo-u575zi-q"   # the published M33 figures the emulated M33's instructions stand beside


# Boards the estimator runs on (`analyze --estimate`), by the row label of BASELINES.md's third
# table (published MLPerf Tiny cycles per board). A board is estimated when the estimator has a
# model of its core (stm32ai.estimate.estimate.CORE_MODELS: M4, M7, M33). B-U585I-IOT02A is left
# out: the same SoC, clock and memory system as NUCLEO-U575ZI-Q, so the same estimate.
ESTIMATE_BOARDS = {"NUCLEO-L4R5ZI (M4, 120)": "nucleo-l4r5zi", "DISCO-F746NG (M7, 216)": "disco-f746",
                   "NUCLEO-H7A3ZI-Q (M7, 280)": "nucleo-h7a3zi-q",
                   "NUCLEO-U575ZI-Q (M33, 160)": "nucleo-u575zi-q"}
MLPERF_COLUMNS = ["pretrainedResnet_quant", "kws_ref_model", "vww_96_int8", "ad01_int8"]   # IC KWS VWW AD
ESTIMATE_BOARDS["NUCLEO-G0B1RE (M0+, 64)"] = "nucleo-g0b1re"   # Cortex-M0+ (core_m0plus.py, uncalibrated)


def published_per_board(text: str | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """BASELINES.md's third table: per board id, per model stem, X-CUBE-AI's cycles (ST's most
    recent round, listed first) and the best published cycles with their submitter."""
    path = SHARED / "BASELINES.md"
    if text is None:
        if not path.exists():
            return {}
        text = path.read_text()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for line in text.splitlines():
        cells = _cells(line)
        if len(cells) != 6 or cells[0] not in ESTIMATE_BOARDS:
            continue
        bid, who = ESTIMATE_BOARDS[cells[0]], cells[1]
        for stem, cell in zip(MLPERF_COLUMNS, cells[2:], strict=True):
            cyc = _mega(cell.split("(")[0])
            if cyc is None:
                continue
            d = out.setdefault(bid, {}).setdefault(stem, {})
            if who.startswith("STMicroelectronics") and "xcube_cycles" not in d:
                d.update(xcube_cycles=cyc, xcube_by=who)
            if "best_cycles" not in d or cyc < d["best_cycles"]:
                d.update(best_cycles=cyc, best_by=who)
    return out


def bench_estimates(row: dict[str, Any], path: Path, c: Any, workdir: Path,
                    published: dict[str, dict[str, dict[str, Any]]], autotune: bool = False) -> None:
    """Estimated cycles (stm32ai.estimate: the real firmware through the board's core and memory
    model) on every board with published figures for this model and a core model, with ratios.
    autotune: also a row for the firmware compiled with the tuner's table for that board
    (stm32ai tune, cached per layer signature; docs/tuning.md)."""
    from stm32ai.boards import load_board
    from stm32ai.errors import Stm32aiError
    from stm32ai.estimate.estimate import CORE_MODELS

    for bid, per_model in published.items():
        pub = per_model.get(path.stem)
        if not pub:
            continue
        try:
            board = load_board(bid)
        except Stm32aiError:
            continue                                  # no board file yet (NUCLEO-H7A3ZI-Q)
        if board.core not in CORE_MODELS:
            continue
        for tuned in (False, True) if autotune else (False,):
            row.setdefault("estimates", []).append(_estimate_row(path, c, workdir, board, pub, tuned))


def _estimate_row(path: Path, c: Any, workdir: Path, board: Any, pub: dict[str, Any], tuned: bool) -> dict[str, Any]:
    from stm32ai.errors import Stm32aiError
    from stm32ai.estimate.estimate import estimate_project
    from stm32ai.pipeline import compile_for_board
    from stm32ai.project.build import generate_firmware_project
    from stm32ai.project.spec import Pools, ProjectModel
    from stm32ai.validate.vectors import test_vector

    bid = board.id
    e: dict[str, Any] = {"board": bid, **pub}
    try:
        tuning = None
        if tuned:
            from stm32ai.tune import tune

            table = tune(path, bid, progress=lambda s: print(f"bench: {s}", file=sys.stderr, flush=True)).table
            tuning = table.choices()
            e.update(autotuned=True, choices=tuning)
        # the firmware `generate --board B` makes: weights staged for B's flash, or copied to RAM
        # at boot where that pays (pipeline.compile_for_board, docs/flash_staging.md)
        cb = compile_for_board(path, "network", bid, tuning=tuning)
        proj = workdir / f"est-{bid}{'-tuned' if tuned else ''}"
        generate_firmware_project(proj, board, [ProjectModel("network", cb, test_vector(path, cb, expected=False),
                                                             path.name)], Pools(None, cb.weights_pool or None))
        est = estimate_project(proj, board)
    except Stm32aiError as ex:
        e["status"] = f"error: {ex}"
        return e
    e.update(estimated_cycles=est.cycles, estimated_ms=round(est.ms, 3), cpi=round(est.cpi, 3),
             instructions=est.instructions, flash_bytes_read=est.flash_bytes_read, model=est.model,
             uncertainty=est.uncertainty, trace_s=round(est.trace_seconds, 1),
             est_vs_xcube=round(est.cycles / pub["xcube_cycles"], 3) if pub.get("xcube_cycles") else None,
             est_vs_best=round(est.cycles / pub["best_cycles"], 3))
    return e


# Rows of BASELINES.md's second table (published results on real STM32 hardware) -> model stem.
PUBLISHED_ROWS = {"IC ResNet-8": "pretrainedResnet_quant", "KWS DS-CNN": "kws_ref_model",
                  "VWW MobileNetV1-0.25": "vww_96_int8", "AD FC autoencoder": "ad01_int8"}


def _baselines_text() -> str:
    path = SHARED / "BASELINES.md"
    return path.read_text() if path.exists() else ""


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _mega(cell: str) -> int | None:
    """"19.8 M" -> 19800000."""
    m = re.fullmatch(r"([\d.]+)\s*M", cell.strip())
    return round(float(m.group(1)) * 1e6) if m else None


def baselines(text: str | None = None) -> dict[str, dict[str, Any]]:
    """Per model stem: TFLM + CMSIS-NN figures (first table of ../shared/BASELINES.md) and the
    best published real-M4 result (second table: cycles, and whose result it is)."""
    path = SHARED / "BASELINES.md"
    if text is None:
        if not path.exists():
            return {}
        text = path.read_text()
    out: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        cells = _cells(line)
        if len(cells) >= 6 and "/" in cells[0] and cells[1].replace(",", "").isdigit():
            num = [int(c.replace(",", "")) if c.replace(",", "").isdigit() else None for c in cells]
            out.setdefault(cells[0].split("/")[-1], {}).update(
                macs=num[1], cmsis_instructions=num[2], ref_instructions=num[4], tflm_arena=num[5])
        elif len(cells) >= 3 and cells[0] in PUBLISHED_ROWS and _mega(cells[2]) is not None:
            out.setdefault(PUBLISHED_ROWS[cells[0]], {}).update(
                published_cycles=_mega(cells[2]), published_by=cells[1].split(":")[0].strip())
            ram = re.fullmatch(r"([\d,]+) B", cells[3]) if len(cells) >= 4 else None
            if ram:  # the table's RAM column is X-CUBE-AI 9.0's activation RAM (I/O inside), every row
                out[PUBLISHED_ROWS[cells[0]]]["xcube_ram"] = int(ram.group(1).replace(",", ""))
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


def _shape_of(doc: dict[str, Any], node: int, idx: int = 0) -> list[int]:
    return doc["attrs"]["shape"][1][doc["node_row_ptr"][node] + idx]


def layer_rows(doc: dict[str, Any], params: Any, layers: list[Any]) -> list[dict[str, Any]]:
    """Per-layer table rows: the firmware's counts joined with graph.json (kernel, shapes, MACC)."""
    nodes = doc["nodes"]
    total = sum(x.count for x in layers) or 1
    rows = []
    for x in layers:
        node = nodes[x.node] if 0 <= x.node < len(nodes) else {"attrs": {}, "inputs": []}
        a = node.get("attrs", {})
        ins = [_shape_of(doc, i[0], i[1]) for i in node.get("inputs", []) if i is not None
               and not (nodes[i[0]]["op"] == "null" and nodes[i[0]]["name"] in params)]
        outs = [_shape_of(doc, x.node, k) for k in range(int(a.get("num_outputs", 1)))]
        macc = int(a.get("macc", 0))
        rows.append({"node": x.node, "kernel": x.kernel, "source_op": a.get("source_op"),
                     "source_index": a.get("source_index"),
                     "in_shapes": ins, "out_shapes": outs, "macc": macc, "instructions": x.count,
                     "instr_per_mac": round(x.count / macc, 2) if macc else None,
                     "share": round(x.count / total, 4)})
    return rows


def _build_run(args: SimpleNamespace, c: Any, proj: Path, board: Any) -> tuple[Path, Any]:
    from stm32ai.project.build import generate_firmware_project
    from stm32ai.project.demo_output import parse_demo_output
    from stm32ai.project.run import build_project, run_qemu
    from stm32ai.project.spec import Pools, ProjectModel
    from stm32ai.validate.vectors import test_vector

    model = Path(args.model)
    generate_firmware_project(proj, board, [ProjectModel(args.name, c, test_vector(model, c), model.name)],
                              Pools(), profile=bool(args.profile))
    elf = build_project(proj)
    code, uart = run_qemu(elf, board, timeout_s=1800.0)
    out = parse_demo_output(uart, legacy_board=board)
    if out.result is None:
        out.fields["result"] = f"no result (exit {code})"
    return elf, out


def bench_model(path: Path, base: dict[str, Any] | None, workdir: Path, profile: bool = True,
                boards: list[str] | None = None, m7: bool = True, m33: bool = True,
                published: dict[str, dict[str, dict[str, Any]]] | None = None,
                memory_of: str | None = None, m0: dict[str, dict[str, Any]] | None = None,
                autotune: bool = False, ram: bool = True) -> dict[str, Any]:
    """memory_of: compile as for that board's flash (staging choices, weights budget).
    ram: the RAM-mode row of the MLPerf models (bench/ram.py)."""
    from stm32ai.boards import load_board
    from stm32ai.emitter import emit_c
    from stm32ai.errors import Stm32aiError
    from stm32ai.passes.staging import flash_reads
    from stm32ai.pipeline import compile_model, flash_model_for, weights_budget_for
    from stm32ai.project.generator import plan_placement
    from stm32ai.validate.reference import ReferenceUnavailable, tflm_arena_bytes

    row: dict[str, Any] = {"model": str(path.relative_to(path.parents[1])), "stem": path.stem}
    t0 = time.perf_counter()
    try:
        # the core's kernel choices (Winograd by default per core, docs/kernels_conv_wino.md) as
        # `generate --board` makes them: the emulated M4 boards', or memory_of's core
        core = load_board(memory_of or (boards or EMULATED)[0]).core
        compile_kw = dict(flash=flash_model_for(memory_of), weights_budget=weights_budget_for(memory_of))
        c = compile_model(path, "network", core=core, **compile_kw)
        emit_c(c.doc, c.params, "network", workdir / "c_only")
    except Stm32aiError as e:
        row["status"] = f"unsupported: {e}"
        return row
    row["generate_s"] = round(time.perf_counter() - t0, 3)
    if memory_of:
        row["memory_of"] = memory_of
    row["flash_reads_bytes"] = sum(flash_reads(op, c.graph) for op in c.graph.ops)
    pools = {p["name"]: p for p in c.doc["stm32ai"]["pools"]}
    row.update(pool_bytes=pools["activations"]["size"], lower_bound_bytes=pools["activations"]["lower_bound"],
               weights_bytes=pools["weights"]["size"], macc=sum(op.macc for op in c.graph.ops))
    # the bound offset assignment can reach (planned buffers, in-place and scratch included)
    row.update(planned_bound_bytes=c.plan.planned_bound, converter_order_bound_bytes=c.plan.converter_order_bound)
    try:
        row["tflm_arena_bytes"] = tflm_arena_bytes(path)
        row["pool_vs_tflm_arena"] = round(row["pool_bytes"] / row["tflm_arena_bytes"], 3)
    except ReferenceUnavailable as e:
        row["tflm_arena_bytes"] = None
        row["tflm_note"] = e.reason[:120]
    if base and base.get("xcube_ram"):
        row["xcube_ram_bytes"] = base["xcube_ram"]
        row["pool_vs_xcube_ram"] = round(row["pool_bytes"] / base["xcube_ram"], 3)
    board = None
    for bid in boards or EMULATED:
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
                           weights_pool=None, profile=False, compile_kw=compile_kw)
    try:
        _, out = _build_run(args, c, proj, board)
    except Stm32aiError as e:
        row["status"] = f"build failed: {e}"
        return row
    row["code_bytes"] = model_code_bytes(proj / "build" / "firmware.map")
    row["result"] = out.result
    row["core"] = board.core
    if out.unit == "instructions" and out.count:
        add_ratios(row, out.count, base)
    row["status"] = {"match": "ok", "no-reference": "no reference"}.get(row["result"], "mismatch")
    if m7:
        bench_m7(row, args, c, workdir / "m7")
    if m33:
        bench_m33(row, args, c, workdir / "m33", published_per_board() if published is None else published)
    if m0 is not None:   # the emulated Cortex-M0 (bench/armv6m.py); m0 = published G0B1RE cycles
        bench_m0(row, path, workdir / "m0", _build_run, m0)
    if published:
        bench_estimates(row, path, c, workdir, published, autotune)
    if ram and path.stem in MLPERF_COLUMNS and not memory_of:
        bench_ram(row, path, workdir, _build_run, board, estimate=bool(published))
    if profile and row["status"] == "ok":
        try:
            _, pout = _build_run(SimpleNamespace(**{**vars(args), "profile": True}), c, workdir / "prof", board)
        except Stm32aiError as e:
            row["profile_status"] = f"build failed: {e}"
            return row
        if pout.result != "match" or not pout.layers:
            row["profile_status"] = f"profiled firmware: {pout.result}, {len(pout.layers)} layers"
            return row
        row["profile_unit"] = pout.unit
        row["profile_total"] = sum(x.count for x in pout.layers)
        row["layers"] = layer_rows(c.doc, c.params, pout.layers)
    return row


def _for_core(args: SimpleNamespace, c: Any, core: str) -> Any:
    """The model compiled for another core's kernel choices (as `generate --board` does for it)."""
    from stm32ai.pipeline import compile_model

    if getattr(c.graph, "core", None) == core:
        return c
    return compile_model(args.model, "network", core=core, **getattr(args, "compile_kw", {}))


def bench_m7(row: dict[str, Any], args: SimpleNamespace, c: Any, proj: Path) -> None:
    """The plain firmware built for the emulated Cortex-M7: its verdict and instruction count
    (QEMU counts instructions; it models neither the M7's dual issue nor its caches)."""
    from stm32ai.boards import load_board
    from stm32ai.errors import Stm32aiError

    board = load_board(M7_BOARD)
    try:
        c = _for_core(args, c, board.core)
        _, out = _build_run(SimpleNamespace(**{**vars(args), "board": board.id}), c, proj, board)
    except Stm32aiError as e:
        row["m7_result"] = f"build failed: {e}"
        return
    row["m7_result"] = out.result
    if out.unit == "instructions" and out.count:
        row["m7_instructions"] = out.count


def bench_m33(row: dict[str, Any], args: SimpleNamespace, c: Any, proj: Path,
              published: dict[str, dict[str, dict[str, Any]]]) -> None:
    """The plain firmware on the emulated Cortex-M33 (QEMU mps2-an505): verdict, instructions, and
    the published NUCLEO-U575ZI-Q cycles for the model (X-CUBE-AI's latest round, the best) with
    the ratios instructions / cycles (QEMU counts instructions; an M33 retires at most about one
    per cycle, its dual issue being limited to pairs of 16-bit instructions)."""
    from stm32ai.boards import load_board
    from stm32ai.errors import Stm32aiError

    board = load_board(M33_BOARD)
    try:
        c = _for_core(args, c, board.core)
        _, out = _build_run(SimpleNamespace(**{**vars(args), "board": board.id}), c, proj, board)
    except Stm32aiError as e:
        row["m33_result"] = f"build failed: {e}"
        return
    row["m33_result"] = out.result
    if out.unit != "instructions" or not out.count:
        return
    row["m33_instructions"] = n = out.count
    pub = published.get(M33_SILICON, {}).get(row.get("stem", ""))
    if pub:
        row["m33_published"] = {**pub, "board": M33_SILICON}
        if pub.get("xcube_cycles"):
            row["m33_instr_vs_xcube"] = round(n / pub["xcube_cycles"], 3)
        row["m33_instr_vs_best"] = round(n / pub["best_cycles"], 3)


def m33_table(rows: list[dict[str, Any]]) -> str:
    """Emulated Cortex-M33 instructions beside the published NUCLEO-U575ZI-Q cycles, and the
    estimated U575 cycles where the estimator ran (estimate_table has the details)."""
    got = [r for r in rows if r.get("m33_instructions") is not None or r.get("m33_result")]
    if not got:
        return ""
    out = [f"\n### Emulated Cortex-M33 ({M33_BOARD}) vs published NUCLEO-U575ZI-Q cycles\n",
           "| model | result | M33 instructions | X-CUBE-AI cycles | instr / X-CUBE-AI | best published (by) "
           "| instr / best | estimated U575 cycles |",
           "|---|---|---|---|---|---|---|---|"]
    for r in got:
        pub = r.get("m33_published") or {}
        est = next((e for e in r.get("estimates", []) if e.get("board") == M33_SILICON
                    and "estimated_cycles" in e), None)
        n = r.get("m33_instructions")
        best = f"{pub['best_cycles']:,} ({pub['best_by']})" if pub else "—"
        out.append(
            f"| {r['stem']} | {r.get('m33_result', '—')} | {f'{n:,}' if n else '—'} "
            f"| {format(pub['xcube_cycles'], ',') if pub.get('xcube_cycles') else '—'} "
            f"| {format(r['m33_instr_vs_xcube'], '.3f') if r.get('m33_instr_vs_xcube') else '—'} "
            f"| {best} "
            f"| {format(r['m33_instr_vs_best'], '.3f') if r.get('m33_instr_vs_best') else '—'} "
            f"| {format(est['estimated_cycles'], ',') if est else '—'} |")
    out.append(f"\nM33 instructions: the plain firmware on QEMU {M33_BOARD} (Cortex-M33 with DSP and FPv5-SP, "
               "`-mcpu=cortex-m33`), `-icount shift=0`, output checked against the reference. Instructions, "
               "not cycles: QEMU has no timing model. Published: NUCLEO-U575ZI-Q silicon (160 MHz, MLPerf Tiny, "
               "../shared/BASELINES.md third table). Estimated U575 cycles: `analyze --estimate` on "
               f"{M33_SILICON} (Cortex-M33 core model + ICACHE/flash model, see the estimated-cycles table).\n")
    return "\n".join(out) + "\n"


def add_ratios(row: dict[str, Any], instr: int, base: dict[str, Any] | None) -> None:
    """Headline instructions and the ratios to the baselines that apply to this model."""
    row["instructions"] = instr
    macs = (base or {}).get("macs") or row.get("macc")
    row["macs_per_instruction"] = round(macs / instr, 3) if instr and macs else None
    if base and base.get("cmsis_instructions"):
        row["tflm_cmsis_instructions"] = base["cmsis_instructions"]
        row["instr_vs_tflm_cmsis"] = round(instr / base["cmsis_instructions"], 3)
    if base and base.get("published_cycles"):
        # instructions vs real-M4 cycles: an M4 retires at most one instruction per cycle
        row["published_cycles"] = base["published_cycles"]
        row["published_by"] = base["published_by"]
        row["instr_vs_published_cycles"] = round(instr / base["published_cycles"], 3)


def markdown(rows: list[dict[str, Any]]) -> str:
    def f(v: Any, spec: str = ",") -> str:
        return "—" if v is None else format(v, spec) if isinstance(v, (int, float)) else str(v)

    head = ("| model | status | pool B | lower bound B | TFLM arena B | pool/arena | X-CUBE-AI RAM B "
            "| pool/X-CUBE-AI | weights B | code B "
            "| instructions | MACs/instr | TFLM+CMSIS-NN instr | ours/TFLM+CMSIS-NN "
            "| published M4 cycles | ours instr / published cycles | M7 instructions | compile s |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        status = r.get("status", "?")
        if status.startswith("unsupported"):
            status = "unsupported"
        pub = f"{f(r.get('published_cycles'))} ({r['published_by']})" if r.get("published_cycles") else "—"
        lines.append(
            f"| {r['model']} | {status} | {f(r.get('pool_bytes'))} | {f(r.get('lower_bound_bytes'))} "
            f"| {f(r.get('tflm_arena_bytes'))} | {f(r.get('pool_vs_tflm_arena'), '.3f')} "
            f"| {f(r.get('xcube_ram_bytes'))} | {f(r.get('pool_vs_xcube_ram'), '.3f')} "
            f"| {f(r.get('weights_bytes'))} | {f(r.get('code_bytes'))} | {f(r.get('instructions'))} "
            f"| {f(r.get('macs_per_instruction'), '.3f')} | {f(r.get('tflm_cmsis_instructions'))} "
            f"| {f(r.get('instr_vs_tflm_cmsis'), '.3f')} | {pub} "
            f"| {f(r.get('instr_vs_published_cycles'), '.3f')} | {_m7(r)} | {f(r.get('generate_s'), '.2f')} |")
    notes = ("\nInstructions: QEMU netduinoplus2 / mps2-an386 (Cortex-M4), `-icount shift=0`, from the "
             "plain firmware (no profiling). TFLM + CMSIS-NN: same emulator, ../shared/BASELINES.md. "
             "Published M4 cycles: real hardware (NUCLEO-L4R5ZI), BASELINES.md's second table; a "
             "Cortex-M4 retires at most one instruction per cycle, so a ratio below 1 means fewer "
             "instructions than their cycles. M7 instructions: the plain firmware for QEMU mps2-an500 "
             "(Cortex-M7, -mcpu=cortex-m7), output checked against the reference; QEMU models neither "
             "dual issue nor caches, so this is not an M7 cycle count.\n")
    return (head + "\n".join(lines) + "\n" + notes + m33_table(rows) + estimate_table(rows) + ram_table(rows)
            + m0_table(rows)
            + "".join(layer_table(r) for r in rows if r.get("layers")))


def estimate_table(rows: list[dict[str, Any]]) -> str:
    """Estimated cycles beside X-CUBE-AI's and the best published cycles (BASELINES.md, third table)."""
    est = [(r, e) for r in rows for e in r.get("estimates", [])]
    if not est:
        return ""
    out = ["\n### Estimated cycles per inference vs published silicon cycles\n",
           "| model | board | estimated cycles | est. ms | CPI | flash bytes read | X-CUBE-AI cycles "
           "| ours/X-CUBE-AI | best published (by) | ours/best | trace s |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r, e in est:
        if "estimated_cycles" not in e:
            out.append(f"| {_est_label(r, e)} | {e['board']} | {e.get('status', '?')} | | | | | | | | |")
            continue
        xc = f"{e['xcube_cycles']:,}" if e.get("xcube_cycles") else "—"
        vs = f"{e['est_vs_xcube']:.3f}" if e.get("est_vs_xcube") else "—"
        out.append(f"| {_est_label(r, e)} | {e['board']} | {e['estimated_cycles']:,} | {e['estimated_ms']:.2f} "
                   f"| {e['cpi']:.2f} | {e['flash_bytes_read']:,} | {xc} | {vs} "
                   f"| {e['best_cycles']:,} ({e['best_by']}) | {e['est_vs_best']:.3f} | {e['trace_s']} |")
    # every board's model by name (each core has its own model and stated uncertainty)
    models = {e["board"]: f"{e['board']}: {e.get('model', '')}, +-{100 * e.get('uncertainty', 0):.0f} %"
              for _, e in est if "estimated_cycles" in e}
    out.append(f"\nEstimated: `stm32ai analyze --estimate`, the plain demo firmware's measured inference through "
               f"the board's core and memory-system model ({'; '.join(models.values())}; docs/estimate.md). "
               "Published: real silicon, ../shared/BASELINES.md third table (MLPerf Tiny results, cycles = "
               "latency x clock).\n")
    return "\n".join(out) + "\n"


def _est_label(r: dict[str, Any], e: dict[str, Any]) -> str:
    if not e.get("autotuned"):
        return str(r["stem"])
    picks = sorted(set(e.get("choices", {}).values()))
    return f"{r['stem']} autotuned ({', '.join(picks) or 'nothing tunable'})"


def _m7(r: dict[str, Any]) -> str:
    if r.get("m7_instructions") is not None and r.get("m7_result") == "match":
        return f"{r['m7_instructions']:,}"
    return r.get("m7_result") or "—"


def _op(x: dict[str, Any]) -> str:
    """The tflite operator a kernel call comes from, with its index in the .tflite file."""
    op = x.get("source_op") or "—"
    return f"{op} (#{x['source_index']})" if x.get("source_index") is not None else op


def _shape(s: list[list[int]]) -> str:
    return ", ".join("x".join(str(d) for d in x) for x in s) or "—"


def layer_table(r: dict[str, Any]) -> str:
    """The per-layer markdown table of one model (from the --profile firmware)."""
    unit = r.get("profile_unit", "instructions")
    head = (f"\n### {r['model']}: per layer ({unit}, --profile firmware, total {r['profile_total']:,})\n\n"
            f"| node | kernel | tflite op (#) | input shapes | output shapes | MACC | {unit} | instr/MAC "
            "| share |\n|---|---|---|---|---|---|---|---|---|\n")
    body = "".join(
        f"| {x['node']} | {x['kernel']} | {_op(x)} | {_shape(x['in_shapes'])} "
        f"| {_shape(x['out_shapes'])} | {x['macc']:,} | {x['instructions']:,} "
        f"| {'—' if x['instr_per_mac'] is None else format(x['instr_per_mac'], '.2f')} "
        f"| {100 * x['share']:.1f} % |\n" for x in r["layers"])
    return head + body


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench")
    ap.add_argument("models", nargs="*", help="model files (default: ../shared/models and fixtures)")
    ap.add_argument("-o", "--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--only", help="comma-separated substrings: bench only the models whose file stem "
                                   "contains one (e.g. kws,vww,resnet_quant)")
    ap.add_argument("--no-profile", action="store_true",
                    help="skip the per-layer (--profile) firmware: headline figures only")
    ap.add_argument("--no-m7", action="store_true", help="skip the Cortex-M7 (qemu-mps2-an500) run")
    ap.add_argument("--no-m33", action="store_true", help="skip the Cortex-M33 (qemu-mps2-an505) run")
    ap.add_argument("--no-m0", action="store_true", help="skip the Cortex-M0 (qemu-microbit) run")
    ap.add_argument("--no-estimate", action="store_true",
                    help="skip the estimated cycles (analyze --estimate) on the boards with published figures")
    ap.add_argument("--no-ram", action="store_true",
                    help="skip the --optimization ram table (bench/ram.py: one more firmware run and up to two "
                         "estimates per MLPerf model)")
    ap.add_argument("--autotune", action="store_true",
                    help="with the estimates: also an autotuned row per board (stm32ai tune's table, docs/tuning.md; "
                         "three more firmware builds and traces per model and board on a cold cache)")
    ap.add_argument("--memory-of", metavar="BOARD",
                    help="compile the models as for BOARD's flash (weights staging, docs/flash_staging.md) and "
                         "run that code on the emulated board: the instructions of BOARD's choices")
    args = ap.parse_args(argv)
    if args.models:
        models = [Path(m) for m in args.models]
    else:
        models = sorted((SHARED / "models").glob("*/*.tflite"))
        models += [ROOT / "tests" / "fixtures" / "models" / f"{s}.tflite" for s in FIXTURES]
    if args.only:
        keys = [k.strip().lower() for k in args.only.split(",") if k.strip()]
        models = [m for m in models if any(k in m.stem.lower() for k in keys)]
        if not models:
            print(f"bench: no model matches --only {args.only}", file=sys.stderr)
            return 2
    base = baselines()
    published = {} if args.no_estimate else published_per_board()
    rows = []
    for m in models:
        print(f"bench: {m.name} ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="stm32ai-bench-") as tmp:
            try:
                row = bench_model(m, base.get(m.stem), Path(tmp), profile=not args.no_profile,
                                  m7=not args.no_m7, m33=not args.no_m33, published=published, memory_of=args.memory_of,
                                  m0=None if args.no_m0 else published_m0(_baselines_text()),
                                  autotune=args.autotune, ram=not args.no_ram)
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
