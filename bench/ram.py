"""The RAM-mode table of `make bench` (docs/bench.md, docs/stripes.md): per MLPerf Tiny model, the
activation pool in `--optimization balanced`, in `ram` without stripes and in `ram` (stripes,
band heights chosen by passes/stripe_bands.py); the ram firmware run on the emulated board
(QEMU -icount instructions, its output checked against TFLite Micro like every bench run); and
estimated cycles on NUCLEO-L4R5ZI (`analyze --estimate`) for balanced, ram without stripes and
ram, with the cost of the mode and of its stripes.

Cheap by reuse: the balanced pool, instructions and estimate come from the model's main bench
row; the ram firmware without stripes is estimated only when it differs from the ram one (a
model where no stripe pays runs the same code twice otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

RAM_BOARD = "nucleo-l4r5zi"  # the estimated board (BASELINES.md's Cortex-M4 reference board)


def _estimate(path: Path, workdir: Path, stripes: bool) -> dict[str, Any]:
    """Estimated cycles of the `generate --board nucleo-l4r5zi --optimization ram` firmware."""
    from stm32ai.boards import load_board
    from stm32ai.errors import Stm32aiError
    from stm32ai.estimate.estimate import estimate_project
    from stm32ai.pipeline import compile_for_board
    from stm32ai.project.build import generate_firmware_project
    from stm32ai.project.spec import Pools, ProjectModel
    from stm32ai.validate.vectors import test_vector

    board = load_board(RAM_BOARD)
    try:
        c = compile_for_board(path, "network", RAM_BOARD, optimization="ram", stripes=None if stripes else False)
        proj = workdir / f"ram-est-{int(stripes)}"
        generate_firmware_project(proj, board, [ProjectModel("network", c, test_vector(path, c, expected=False),
                                                             path.name)], Pools(None, c.weights_pool or None))
        est = estimate_project(proj, board)
    except Stm32aiError as ex:
        return {"status": f"error: {ex}"}
    return {"pool_bytes": c.plan.pool_size, "estimated_cycles": est.cycles, "instructions": est.instructions,
            "flash_bytes_read": est.flash_bytes_read, "model": est.model,
            "bands": [st["band"] for st in _stripes(c)]}


def _stripes(c: Any) -> list[dict[str, Any]]:
    from stm32ai.passes.stripes import summary

    return summary(c.graph)


def bench_ram(row: dict[str, Any], path: Path, workdir: Path, build_run: Callable[..., Any], board: Any,
              estimate: bool = True) -> None:
    """Adds row["ram"]: pools, the ram firmware's instructions and result, the estimates."""
    from stm32ai.errors import Stm32aiError
    from stm32ai.pipeline import compile_model

    r: dict[str, Any] = {"pool_balanced": row.get("pool_bytes")}
    try:
        ram = compile_model(path, "network", optimization="ram")
        flat = compile_model(path, "network", optimization="ram", stripes=False)
        # --input-rows: the inputs a stripe reads arrive in rows (not in the pool; docs/stripes.md)
        rows = compile_model(path, "network", optimization="ram", input_rows=True)
    except Stm32aiError as e:
        row["ram"] = {"status": f"unsupported: {e}"}
        return
    sts = _stripes(ram)
    fed = any(st["sources"] for op in rows.graph.ops if op.kernel == "stripe" for st in [op.attrs["stripe"]])
    r.update(pool_ram_no_stripes=flat.plan.pool_size, pool_ram=ram.plan.pool_size,
             pool_ram_rows=rows.plan.pool_size if fed else None,
             bands=[st["band"] for st in sts], calls=[st["calls"] for st in sts],
             dw2=[any("_g2_" in m for m in st["members"]) for st in sts])  # 2-channel depthwise members
    args = SimpleNamespace(model=str(path), board=board.id, name="network", activations_pool=None,
                           weights_pool=None, profile=False)
    try:
        _, out = build_run(args, ram, workdir / "ram", board)
        r["result"] = out.result
        if out.unit == "instructions" and out.count:
            r["instructions"] = out.count
    except Stm32aiError as e:
        r["result"] = f"build failed: {e}"
    if sts:  # the stripes' cost in instructions: the same firmware without them
        try:
            _, out = build_run(args, flat, workdir / "ram-flat", board)
            if out.unit == "instructions" and out.count:
                r["instructions_no_stripes"] = out.count
        except Stm32aiError:
            pass
    else:
        r["instructions_no_stripes"] = r.get("instructions")
    if estimate:
        bal = next((e for e in row.get("estimates", []) if e.get("board") == RAM_BOARD and not e.get("autotuned")
                    and "estimated_cycles" in e), None)
        r["est_balanced"] = bal["estimated_cycles"] if bal else None
        e_ram = _estimate(path, workdir, True)
        r["est_ram"] = e_ram.get("estimated_cycles")
        r["est_model"] = e_ram.get("model")
        r["est_bands"] = e_ram.get("bands")
        if e_ram.get("bands"):
            r["est_ram_no_stripes"] = _estimate(path, workdir, False).get("estimated_cycles")
        else:
            r["est_ram_no_stripes"] = r["est_ram"]
        if "status" in e_ram:
            r["est_status"] = e_ram["status"]
    row["ram"] = r


def _pct(a: int | None, b: int | None) -> str:
    return f"{a / b - 1:+.1%}" if a and b else "—"


def ram_table(rows: list[dict[str, Any]]) -> str:
    """The RAM-mode table (markdown), empty when no row has one."""
    rs = [r for r in rows if r.get("ram") and "pool_ram" in r["ram"]]
    if not rs:
        return ""

    def f(v: Any) -> str:
        return "—" if v is None else format(v, ",")

    out = ["\n### `--optimization ram`: pool, instructions and estimated cycles\n",
           "| model | pool balanced | ram, no stripes | ram (stripes) | ram --input-rows | band heights | result "
           "| QEMU instr ram | QEMU instr ram, no stripes "
           "| vs balanced | stripes vs no stripes (instr) | est. cycles balanced | est. ram, no stripes | est. ram "
           "| ram vs balanced | stripes vs no stripes |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        x = r["ram"]
        bands = ", ".join(f"{b}{' (2-ch dw)' if n else ''}"
                          for b, n in zip(x["bands"], x.get("dw2", [False] * len(x["bands"])), strict=True)) \
            or "no stripe"
        out.append(f"| {r['stem']} | {f(x['pool_balanced'])} | {f(x['pool_ram_no_stripes'])} | {f(x['pool_ram'])} "
                   f"| {f(x.get('pool_ram_rows'))} | {bands} | {x.get('result', '—')} | {f(x.get('instructions'))} "
                   f"| {f(x.get('instructions_no_stripes'))} "
                   f"| {_pct(x.get('instructions'), r.get('instructions'))} "
                   f"| {_pct(x.get('instructions'), x.get('instructions_no_stripes'))} | {f(x.get('est_balanced'))} "
                   f"| {f(x.get('est_ram_no_stripes'))} | {f(x.get('est_ram'))} "
                   f"| {_pct(x.get('est_ram'), x.get('est_balanced'))} "
                   f"| {_pct(x.get('est_ram'), x.get('est_ram_no_stripes'))} |")
    model = next((r["ram"].get("est_model") for r in rs if r["ram"].get("est_model")), None)
    out.append(f"\nPools: bytes of the activation pool (I/O inside; with --input-rows the row-fed input is not in "
               f"it: the application hands it over in rows, '—' when no stripe reads an input), compiled for the "
               f"emulated board. Instructions: "
               f"the ram firmware on the emulated board (QEMU -icount), its output checked against TFLite Micro "
               f"(result), and the same firmware without stripes (`--no-stripes`); 'vs balanced': against the headline "
               f"row's instructions. Estimated: `stm32ai analyze "
               f"--board {RAM_BOARD} --estimate` of the `--optimization ram` firmware (and `--no-stripes`)"
               + (f", model {model}" if model else "") + "; the ram pool on that board can differ from the emulated "
               "board's (weights staging). docs/stripes.md explains the cost.\n")
    return "\n".join(out) + "\n"
