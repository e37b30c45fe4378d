"""The tuner stage: per-layer kernel variants chosen by estimated cycles (docs/tuning.md).

`stm32ai tune MODEL --board B -o table.json` (and `generate --autotune`): for each variant of
stm32ai.tuning.CONV_VARIANTS it compiles the model with that variant forced on every layer that
admits it (a forced tuning table: the compiler's only way in), generates and builds the
firmware, runs the cycle estimator (stm32ai.estimate) and reads each layer's estimated cycles.
Per layer key the fastest variant wins (ties: smaller weights). Measurements are cached per
layer signature (board, core, variant set, tool hash) so a second run builds nothing.

This stage runs after the project generator and the estimator; nothing in the compiler imports
it (tests/test_structure.py). The compiler reads only the table file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stm32ai.boards import load_board
from stm32ai.errors import Stm32aiError
from stm32ai.pipeline import Compiled, compile_for_board
from stm32ai.tuning import CONV_VARIANTS, Measured, TuningTable, cache_dir, choose, forced, signature, tool_hash


def conv_variant(op: Any, g: Any) -> str | None:
    """The variant a compiled layer runs (None: not a tunable layer)."""
    if op.tune_key is None:
        return None
    if op.kernel == "conv2d_wino_s8":
        return "wino"
    if op.kernel in ("conv2d_smallk_s8", "conv2d_smallk_win_s8"):
        return "smallk"
    if op.kernel == "conv2d_s8":
        return "int16" if int(op.attrs.get("w16", 0)) else "int8"
    return None


def _weights_bytes(op: Any, g: Any) -> int:
    t = g.tensors[op.inputs[1]]
    return int(t.data.nbytes) if t.data is not None else 0


@dataclass
class Candidate:
    """One candidate build: the variant forced, how many layers took it, its whole-model figures."""

    variant: str
    layers: int
    cycles: int | None = None
    instructions: int | None = None
    skipped: str = ""


@dataclass
class TuneResult:
    table: TuningTable
    candidates: list[Candidate] = field(default_factory=list)
    cached: bool = False


def _measure(path: Path, board_id: str, c: Compiled, variant: str, optimization: str
             ) -> tuple[dict[str, Measured], int, int]:
    """Build and estimate the firmware of `c`; per layer key running `variant`, the summed
    estimated cycles / instructions / weights bytes of its layers; the model's total cycles
    and instructions."""
    from stm32ai.estimate.estimate import estimate_elf
    from stm32ai.project.build import generate_firmware_project, pool_list
    from stm32ai.project.run import build_project
    from stm32ai.project.spec import Pools, ProjectModel
    from stm32ai.validate.vectors import test_vector

    board = load_board(board_id)
    by_index = {op.index: op for op in c.graph.ops if op.tune_key is not None}
    with tempfile.TemporaryDirectory(prefix="stm32ai-tune-") as tmp:
        proj = Path(tmp) / "project"
        model = ProjectModel("network", c, test_vector(path, c, expected=False), path.name)
        with contextlib.redirect_stderr(io.StringIO()):     # generate's "test vector: ..." note
            generate_firmware_project(proj, board, [model], Pools(pool_list(None), pool_list(None), False))
        elf = build_project(proj)
        est = estimate_elf(elf, board, proj / "Model" / "network.c")
    out: dict[str, Measured] = {}
    nodes = c.doc["nodes"]
    for layer in est.layers:
        if layer.node is None:
            continue
        attrs = nodes[layer.node].get("attrs", {})
        op = by_index.get(attrs.get("source_index"))
        # the node must be the layer's kernel call itself (an output copy shares its index)
        if op is None or attrs.get("func_name") != op.kernel or conv_variant(op, c.graph) != variant:
            continue
        m = out.setdefault(op.tune_key, Measured(0, 0, 0, 0))
        m.cycles += layer.cycles
        m.instructions += layer.instructions
        m.weights_bytes += _weights_bytes(op, c.graph)
        m.count += 1
    return out, est.cycles, est.instructions


def _fits(board_id: str, c: Compiled) -> str:
    """'' when the compiled model fits the board, else why not."""
    from stm32ai.project.build import fits_report, pool_list
    from stm32ai.project.spec import Pools

    r = fits_report(load_board(board_id), [c], Pools(pool_list(None), pool_list(None), False))
    return "" if r["ok"] else str(r["summary"])


def _cache_file(cache: Path, sig: str) -> Path:
    return cache / f"{sig}.json"


def _read_cache(cache: Path | None, sig: str) -> dict[str, Measured] | None:
    if cache is None:
        return None
    try:
        doc = json.loads(_cache_file(cache, sig).read_text())
        return {v: Measured(**m) for v, m in doc["measured"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None     # absent or unreadable: measured again


def _write_cache(cache: Path | None, sig: str, key: str, measured: dict[str, Measured]) -> None:
    """Atomic (rename of a complete file); an unwritable cache only costs the next run time."""
    if cache is None:
        return
    f = _cache_file(cache, sig)
    tmp = f.with_name(f".{f.name}.tmp{os.getpid()}")
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"key": key, "measured": {v: asdict(m) for v, m in sorted(measured.items())}},
                                  indent=1) + "\n")
        tmp.replace(f)
    except OSError:
        pass


def tune(path: Path, board_id: str, *, optimization: str = "balanced",
         variants: tuple[str, ...] = CONV_VARIANTS, cache: Path | None = None,
         progress: Callable[[str], None] = lambda s: None,
         measure: Callable[..., tuple[dict[str, Measured], int, int]] | None = None) -> TuneResult:
    """The tuning table of the model at `path` on `board_id` (see the module docstring).
    `measure` is the build-and-estimate step (default `_measure`; a test may give a fake one)."""
    board = load_board(board_id)
    if measure is None:     # refuse a board without a core/memory model before any build (one line)
        from stm32ai.estimate.estimate import check_estimable
        from stm32ai.project.run import check_toolchain

        check_estimable(board)
        check_toolchain()
        measure = _measure
    if optimization == "ram":
        raise Stm32aiError("tune: --optimization ram keeps int8 weights on every layer (nothing to tune)")
    cache = cache_dir() if cache is None else cache      # still None: STM32AI_CACHE_DIR=off
    base = compile_for_board(path, "network", board_id, optimization=optimization)
    keys = sorted({op.tune_key for op in base.graph.ops if op.tune_key is not None})
    table = TuningTable(board=board.id, core=board.core, tool=tool_hash(), variants=variants,
                        source=path.name)
    result = TuneResult(table)
    if not keys:
        progress("tune: no tunable layer (int8 convolutions) in the model")
        return result
    sigs = {k: signature(k, board.id, board.core, variants) for k in keys}
    measured: dict[str, dict[str, Measured]] = {}
    for k in keys:
        got = _read_cache(cache, sigs[k])
        if got is not None:
            measured[k] = got
    todo = [k for k in keys if k not in measured]
    if not todo:
        progress(f"tune: all {len(keys)} layer signatures cached in {cache}")
        result.cached = True
    else:
        fresh: dict[str, dict[str, Measured]] = {k: {} for k in todo}
        for i, v in enumerate(variants, 1):
            c = compile_for_board(path, "network", board_id, optimization=optimization,
                                  tuning=forced(v, todo, board.id, board.core).choices())
            took = [op for op in c.graph.ops if op.tune_key in fresh and conv_variant(op, c.graph) == v]
            cand = Candidate(v, len(took))
            result.candidates.append(cand)
            if not took:
                cand.skipped = "no layer admits it"
                progress(f"tune [{i}/{len(variants)}] {v}: no layer admits it, skipped")
                continue
            why = _fits(board_id, c)
            if why:
                cand.skipped = f"does not fit {board_id}: {why}"
                progress(f"tune [{i}/{len(variants)}] {v}: does not fit {board_id}, skipped")
                continue
            progress(f"tune [{i}/{len(variants)}] {v} on {len(took)} layers: building and estimating "
                     f"on {board.id}")
            per_key, cand.cycles, cand.instructions = measure(path, board_id, c, v, optimization)
            progress(f"tune [{i}/{len(variants)}] {v}: {cand.cycles:,} estimated cycles in all")
            for k, m in per_key.items():
                if k in fresh:
                    fresh[k][v] = m
        for k in todo:
            if not fresh[k]:
                raise Stm32aiError(f"tune: no variant of layer {k} could be measured")
            _write_cache(cache, sigs[k], k, fresh[k])
            measured[k] = fresh[k]
    for k in keys:
        m = measured[k]
        table.layers[k] = {"variant": choose(m),
                           "measured": {v: asdict(x) for v, x in sorted(m.items())}}
    _keep_within_flash(path, board_id, optimization, table, progress)
    return result


def _keep_within_flash(path: Path, board_id: str, optimization: str, table: TuningTable,
                       progress: Callable[[str], None]) -> None:
    """balanced must fit the board: while the tuned model does not, the chosen flash-growing
    variant that saves the fewest estimated cycles per extra weight byte goes back to int8."""
    while True:
        c = compile_for_board(path, "network", board_id, optimization=optimization, tuning=table.choices())
        why = _fits(board_id, c)
        if not why:
            return
        grown = []
        for k, e in table.layers.items():
            m = e["measured"]
            if e["variant"] != "int8" and "int8" in m:
                saved = m["int8"]["cycles"] - m[e["variant"]]["cycles"]
                extra = max(1, m[e["variant"]]["weights_bytes"] - m["int8"]["weights_bytes"])
                grown.append((saved / extra, k))
        if not grown:
            raise Stm32aiError(f"tune: the model does not fit {board_id}: {why}")
        _, k = min(grown)
        progress(f"tune: {k} back to int8 (the tuned model does not fit {board_id})")
        table.layers[k]["variant"] = "int8"
        table.layers[k]["demoted"] = "flash"


def render_choices(table: TuningTable, g: Any | None = None) -> list[str]:
    """Per layer key: the chosen variant and the measured alternatives (analyze --tuning)."""
    lines = [f"tuning table ({table.board}, {table.core}, tool {table.tool}): estimated cycles per layer "
             f"by variant, chosen *"]
    count = {}
    if g is not None:
        for op in g.ops:
            if op.tune_key is not None:
                count.setdefault(op.tune_key, []).append((op.index, conv_variant(op, g)))
    for k, e in sorted(table.layers.items()):
        alts = []
        for v, m in sorted(e["measured"].items(), key=lambda vm: CONV_VARIANTS.index(vm[0])):
            n = max(int(m.get("count", 1)), 1)
            alts.append(f"{'*' if v == e['variant'] else ' '}{v} {int(m['cycles']) // n:,}")
        ops = count.get(k)
        where = "" if ops is None else " ops " + ",".join(f"#{i}:{v}" for i, v in ops)
        lines.append(f"  {k}{where}: " + "  ".join(alts))
    return lines
