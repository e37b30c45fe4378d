"""Contracts between the three parts of the estimator.

    trace (emulator)  --Step-->  CoreModel.cycles()   (core timing: TRM cycle tables, pairing, ...)
          |                          ^
          +--addresses--> MemorySystem (flash wait states, ART, L1 caches, TCMs): stall cycles

The trace runs the firmware, decodes each executed instruction once (isa.Insn), asks the memory
system what each instruction fetch and data access costs beyond a zero-wait access, and hands the
core model one `Step` per executed (or condition-failed) instruction. The core model returns the
cycles that instruction adds; it decides how memory stalls overlap with the pipeline (a store
buffer hides a write stall on one core and not on another).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from stm32ai.estimate.isa import Insn


@dataclass(slots=True)
class Access:
    """One data-side bus transfer an instruction made (LDM/POP make several)."""

    addr: int
    size: int
    write: bool
    stall: int = 0          # cycles beyond a zero-wait access, from the memory system


@dataclass(slots=True)
class Step:
    insn: Insn
    executed: bool = True   # False: its condition (IT block / Bcc) failed; it still occupies issue
    taken: bool = False     # the next instruction is not insn.addr + insn.size (branch, PC load)
    fetch_stall: int = 0    # cycles the instruction fetch waited on the memory system
    accesses: list[Access] = field(default_factory=list)
    next_addr: int = 0      # where control went when taken, and the size of the instruction there
    next_size: int = 0      # (a refill fetching a 32-bit instruction at a halfword address costs more)
    values: tuple[int, ...] = ()   # source operand values where timing depends on them (SDIV/UDIV: Rn, Rm)


class CoreModel(Protocol):
    """Timing of one core (Cortex-M4, M7, M33, M0+). Stateful: pairing, load pipelining and
    register dependencies look at the previous instructions. `reset()` forgets them."""

    name: str

    def cycles(self, step: Step) -> int: ...

    def reset(self) -> None: ...


class MemorySystem(Protocol):
    """The board's memories seen from the core: region latencies, flash accelerator, caches.
    Returns stall cycles beyond a zero-wait access and keeps per-region byte counters."""

    def fetch(self, addr: int, size: int) -> int: ...

    def read(self, addr: int, size: int) -> int: ...

    def write(self, addr: int, size: int) -> int: ...

    def bytes_read(self, region: str) -> int: ...

    # what the trace also uses: the core's cycle count before the instruction being fetched
    # (prefetch timing), the region names and a copy of the per-region read counters (per layer)
    now: int

    def regions(self) -> list[str]: ...

    def read_counters(self) -> list[int]: ...
