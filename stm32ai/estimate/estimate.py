"""Orchestration: a built firmware (or a generated project) + its board -> estimated cycles per
inference, per layer and in total, with the flash bytes read and the stated uncertainty.

The CLI (`stm32ai analyze MODEL --board B --estimate`) generates the project with the usual
project functions, then calls `estimate_project`; bench does the same. Everything here names its
figures *estimated* and says which model produced them (`Estimate.model`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stm32ai.boards import Board
from stm32ai.errors import Stm32aiError
from stm32ai.estimate.core_m0plus import CortexM0Plus
from stm32ai.estimate.core_m4 import CortexM4
from stm32ai.estimate.core_m7 import CortexM7
from stm32ai.estimate.core_m33 import CortexM33
from stm32ai.estimate.layers import layer_buckets
from stm32ai.estimate.memsys import build_memory_system, load_spec
from stm32ai.estimate.trace import Trace, board_regions

# core -> timing model (the M33 has no board file with a memory system yet: refused there)
CORE_MODELS: dict[str, Callable[[], Any]] = {"cortex-m4": CortexM4, "cortex-m7": CortexM7,
                                             "cortex-m33": CortexM33}
CORE_MODELS["cortex-m0plus"] = CortexM0Plus      # STM32G0/C0 (core_m0plus.py; no calibration yet)

# Stated uncertainty per core: the CoreMark calibration (docs/estimate.md), the estimate of the
# GCC 12.2 -O2 library against CoreMark/MHz measured on silicon of the same core built with GCC
# 12.2 -O2 from zero-wait TCM (github Masmiseim36/Coremark_iMXRT). Set from that table.
UNCERTAINTY: dict[str, tuple[float, str]] = {
    "cortex-m4": (0.15, "CoreMark calibration, docs/estimate.md: +0.1..+1.0 % vs GCC 12.2 -O2 Cortex-M4 silicon "
                        "(2.52 CoreMark/MHz); ST's headline (3.37-3.42) comes from ST's own compiler set-up, "
                        "1.33-1.35x that silicon figure"),
    "cortex-m7": (0.15, "CoreMark calibration, docs/estimate.md: -11 % vs GCC 12.2 -O2 Cortex-M7 silicon "
                        "(4.04 CoreMark/MHz; the model is pessimistic there); ST's headline (5.01-5.05) comes "
                        "from ST's own compiler set-up, 1.24-1.25x that silicon figure"),
}


@dataclass
class LayerEstimate:
    node: int | None            # graph.json node; None for the runtime around the kernel calls
    op: str
    kernel: str
    cycles: int
    instructions: int
    flash_bytes: int            # data bytes read from flash (weights, tables, literal pools)


@dataclass
class Estimate:
    board: str
    core: str
    model: str                  # "cortex-m4 + stm32l4r5xi flash 5 WS + ART (...)": what produced the figures
    cpu_hz: int
    cycles: int
    instructions: int
    taken_branches: int
    fetch_stall_cycles: int
    data_stall_cycles: int
    flash_bytes_read: int
    bytes_read: dict[str, int]
    layers: list[LayerEstimate]
    uncertainty: float          # relative, e.g. 0.15 = +-15 %
    uncertainty_basis: str
    trace_seconds: float
    weights_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ms(self) -> float:
        return self.cycles / self.cpu_hz * 1e3

    @property
    def cpi(self) -> float:
        return self.cycles / self.instructions if self.instructions else 0.0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(estimated_cycles=self.cycles, estimated_ms=round(self.ms, 4), cpi=round(self.cpi, 4))
        if self.weights_bytes:
            d["flash_reads_per_weight_byte"] = round(self.flash_bytes_read / self.weights_bytes, 2)
        return d


def core_model(board: Board) -> Any:
    factory = CORE_MODELS.get(board.core)
    if factory is None:
        raise Stm32aiError(f"no cycle model for {board.core} yet (board {board.id}; modelled cores: "
                           f"{', '.join(sorted(CORE_MODELS))})")
    return factory()


def check_estimable(board: Board) -> None:
    """Refuse (one line) a board whose core or memory system has no model, before any work."""
    core_model(board)
    spec = load_spec(board)
    from stm32ai.estimate.memsys import MEMORY_SYSTEMS

    if board.core not in MEMORY_SYSTEMS:
        raise Stm32aiError(f"board {board.id}: no memory-system model for {board.core} yet")
    del spec


def model_name(board: Board) -> str:
    spec = load_spec(board)
    f = spec.flash
    if board.core == "cortex-m33" and f is not None:   # one ICACHE on the code bus (memsys.CodeBusCacheMemory)
        cache = f"{f.icache.lines * f.icache.line_bytes // 1024} KB ICACHE (fetch + data)" if f.icache else "no cache"
        return f"{board.core} + {board.soc or board.id} flash {f.wait_states} WS + {cache}"
    return f"{board.core} + {board.soc or board.id} {spec.describe()}"


def estimate_elf(elf: Path, board: Board, model_c: Path | None = None, name: str = "network",
                 entry: str = "ai_run", occurrence: int = 2,
                 progress: Callable[[int], None] | None = None) -> Estimate:
    """Estimate the `occurrence`-th call of `entry` in a firmware built for `board` (the demo's
    measured inference), per layer when `model_c` (the generated `<name>.c`) is given."""
    t0 = time.monotonic()
    core = core_model(board)
    mem = build_memory_system(board)
    tr = Trace(elf, board_regions(board), core=board.core)
    buckets, layers = None, [None]
    if model_c is not None:
        buckets, layers = layer_buckets(elf, model_c, tr.function_range(f"{name}_run_ctx"), tr.insns)
    tr.run_to(tr.symbol(entry), occurrence)
    r = tr.measure(core, mem, buckets=buckets, progress=progress)
    flash = mem.flash_regions()
    rows = []
    for layer, b in zip(layers, r.buckets, strict=True):
        fb = sum(b.bytes_read.get(f, 0) for f in flash)
        if layer is None:
            rows.append(LayerEstimate(None, "runtime", "(ai_run, argument set-up)", b.cycles, b.instructions, fb))
        else:
            rows.append(LayerEstimate(layer.node, layer.op, layer.kernel, b.cycles, b.instructions, fb))
    unc, basis = UNCERTAINTY.get(board.core, (0.3, "no calibration for this core"))
    return Estimate(board=board.id, core=board.core, model=model_name(board), cpu_hz=board.cpu_hz, cycles=r.cycles,
                    instructions=r.instructions, taken_branches=r.taken_branches,
                    fetch_stall_cycles=r.fetch_stall_cycles, data_stall_cycles=r.data_stall_cycles,
                    flash_bytes_read=sum(r.bytes_read.get(f, 0) for f in flash), bytes_read=r.bytes_read,
                    layers=rows, uncertainty=unc, uncertainty_basis=basis, trace_seconds=time.monotonic() - t0,
                    extra={"flash_fetch_misses": getattr(mem, "flash_fetch_misses", None),
                           "flash_data_misses": getattr(mem, "flash_data_misses", None)})


def estimate_project(project: Path, board: Board, name: str = "network",
                     progress: Callable[[int], None] | None = None) -> Estimate:
    """Build a generated project (arm-none-eabi-gcc) and estimate its demo's measured inference."""
    from stm32ai.project.run import build_project

    elf = build_project(project)
    model_c = project / "Model" / f"{name}.c"
    return estimate_elf(elf, board, model_c if model_c.is_file() else None, name=name, progress=progress)


def render_text(est: Estimate) -> list[str]:
    """The plain-text report: per-layer table, then the totals (`estimated_cycles: N` ...)."""
    total = est.cycles or 1
    lines = [f"estimated on {est.model} model, {est.cpu_hz / 1e6:g} MHz",
             f"{'node':>5} {'op':<22} {'kernel':<34} {'est. cycles':>12} {'share':>6} {'instr':>10} "
             f"{'CPI':>5} {'flash B read':>13}"]
    for x in est.layers:
        node = "-" if x.node is None else str(x.node)
        cpi = x.cycles / x.instructions if x.instructions else 0.0
        lines.append(f"{node:>5} {x.op[:22]:<22} {x.kernel[:34]:<34} {x.cycles:>12,} {100 * x.cycles / total:>5.1f}% "
                     f"{x.instructions:>10,} {cpi:>5.2f} {x.flash_bytes:>13,}")
    lines += [
        f"estimated_cycles: {est.cycles}",
        f"estimated_ms: {est.ms:.3f}",
        f"instructions: {est.instructions}",
        f"estimated_cpi: {est.cpi:.3f}",
        f"flash_bytes_read: {est.flash_bytes_read}"
        + (f" ({est.flash_bytes_read / est.weights_bytes:.1f}x the {est.weights_bytes:,} weight bytes)"
           if est.weights_bytes else ""),
        f"stall_cycles: fetch {est.fetch_stall_cycles}, data {est.data_stall_cycles}",
        f"estimate_model: {est.model}",
        f"estimate_uncertainty: +-{100 * est.uncertainty:.0f}% ({est.uncertainty_basis})",
    ]
    return lines
