"""Cortex-M7 memory system: L1 I/D caches, TCMs and the AXI-side memories (docs/estimate.md,
"Cortex-M7 memory system"). Implements the `MemorySystem` contract of model.py.

What the generated firmware runs with (stm32ai/project, Core/Src/system.c): on a board with
`cache: true` SystemInit invalidates and enables both L1 caches (CCR.IC, CCR.DC); the MPU is not
programmed, so the ARMv7-M default memory map applies (ARMv7-M ARM B3.1, Table B3-1): the Code
region (0x0-0x1FFFFFFF: flash, ITCM alias) is Normal write-through cacheable, the SRAM region
(0x20000000-0x3FFFFFFF) Normal write-back write-allocate, peripherals Device (never cached).
Code and weights are linked at 0x08000000, the flash on the AXIM bus: the F7's ART accelerator
serves only the ITCM-bus alias (0x00200000, RM0385 §2.3/§3.3), so the L1 caches, not the ART,
stand between the core and flash wait states.

Geometry (Cortex-M7 TRM r1p2 §5 "Memory system"/§1.2 configuration; part datasheets): 32-byte
lines, I-cache 2-way, D-cache 4-way, LRU here (the TRM's pseudo-random replacement for the
D-cache is not modelled). A miss costs the bus latency to the critical word: the region's first
access latency in bus cycles (flash: wait states + 1) times the core/bus clock ratio, plus a
fixed AXI round trip in core cycles (assumption, docs). TCMs answer with no wait state.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

LINE = 32
AXI_OVERHEAD = 2          # assumption: AXIM request/response pipeline in core cycles beyond the memory


class Cache:
    """A set-associative cache with LRU replacement; tracks dirty lines for write-back."""

    def __init__(self, size: int, ways: int, line: int = LINE) -> None:
        self.size, self.ways, self.line = size, ways, line
        self.sets = size // (line * ways)
        if self.sets < 1 or self.sets & (self.sets - 1):
            raise ValueError(f"cache of {size} B, {ways} ways: sets must be a power of two")
        self._tags: list[list[int]] = [[] for _ in range(self.sets)]   # MRU first
        self._dirty: set[int] = set()
        self.hits = self.misses = self.writebacks = 0

    def access(self, addr: int, write: bool = False, allocate: bool = True) -> bool:
        """True on a hit. A miss allocates the line (unless `allocate` is false) and evicts the
        least recently used way, counting a write-back if it was dirty."""
        ln = addr // self.line
        s = self._tags[ln & (self.sets - 1)]
        if s and s[0] == ln:
            self.hits += 1
            if write:
                self._dirty.add(ln)
            return True
        if ln in s:
            s.remove(ln)
            s.insert(0, ln)
            self.hits += 1
            if write:
                self._dirty.add(ln)
            return True
        self.misses += 1
        if allocate:
            s.insert(0, ln)
            if len(s) > self.ways:
                old = s.pop()
                if old in self._dirty:
                    self._dirty.discard(old)
                    self.writebacks += 1
            if write:
                self._dirty.add(ln)
        return False


@dataclass(frozen=True)
class Memory:
    """One region as the core sees it."""

    name: str
    origin: int
    length: int
    kind: str            # tcm | flash | sram | external | device
    latency: int         # core cycles to the first data of a bus access (0: TCM)
    cacheable: bool      # by the default memory map
    write_back: bool     # SRAM region: write-back write-allocate; Code region: write-through


@dataclass(frozen=True)
class M7MemoryConfig:
    soc: str
    icache: int
    dcache: int
    memories: tuple[Memory, ...]
    caches_on: bool
    note: str = ""
    icache_ways: int = 2
    dcache_ways: int = 4


def config_for(board, spec) -> M7MemoryConfig:
    """The memory system of a Cortex-M7 board: `spec` is the SoC file's `memsys:` as
    memsys.load_spec reads it (L1 geometry, TCM and flash regions, other regions' wait states);
    the board gives the clocks and flash wait states. (memsys.build_memory_system calls this.)"""
    if board.core != "cortex-m7":
        raise ValueError(f"board {board.id}: {board.core} has no Cortex-M7 L1/TCM memory system")
    if spec.l1_icache is None or spec.l1_dcache is None or spec.flash is None:
        raise ValueError(f"board {board.id}: memsys needs l1.icache, l1.dcache and flash for a Cortex-M7")
    for c in (spec.l1_icache, spec.l1_dcache):
        if c.line_bytes != LINE:
            raise ValueError(f"board {board.id}: Cortex-M7 L1 lines are {LINE} bytes, not {c.line_bytes}")
    ratio = max(1, round(board.cpu_hz / board.hclk_hz))    # core cycles per AXI/AHB cycle
    ws = spec.flash.wait_states
    mems: list[Memory] = []
    for r in board.memory:
        extra = spec.wait_states.get(r.name, 0)
        if r.name in spec.tcm:
            mems.append(Memory(r.name, r.origin, r.length, "tcm", 0, False, False))
        elif r.name in spec.flash.regions:
            mems.append(Memory(r.name, r.origin, r.length, "flash", (ws + 1) * ratio + AXI_OVERHEAD, True, False))
        elif r.origin >= 0x60000000:
            # FMC / QSPI (not used by our pools). Default map: 0x6-0x7 WBWA RAM, 0x8-0x9
            # write-through RAM, 0xA-0xD Device (SDRAM at 0xC0000000 uncached without the MPU)
            mems.append(Memory(r.name, r.origin, r.length, "external", (1 + extra) * ratio + AXI_OVERHEAD,
                               r.origin < 0xA0000000, r.origin < 0x80000000))
        else:   # on-chip SRAMs behind the AXI (wait_states: extra bus cycles, e.g. an AHB bridge)
            mems.append(Memory(r.name, r.origin, r.length, "sram", (1 + extra) * ratio + AXI_OVERHEAD, True,
                               r.origin >= 0x20000000))
    ic, dc = spec.l1_icache, spec.l1_dcache
    return M7MemoryConfig(
        soc=board.soc, icache=ic.size, dcache=dc.size, icache_ways=ic.ways, dcache_ways=dc.ways,
        memories=tuple(mems), caches_on=bool(board.cache),
        note=f"flash {ws} WS on AXIM at {board.hclk_hz / 1e6:g} MHz, L1 {ic.size // 1024} KB I + "
             f"{dc.size // 1024} KB D {'on' if board.cache else 'off'}, TCM zero wait")


@dataclass
class M7MemorySystem:
    """L1 caches in front of the AXI memories, TCMs beside them (the `MemorySystem` contract)."""

    cfg: M7MemoryConfig
    icache: Cache = field(init=False)
    dcache: Cache = field(init=False)

    def __post_init__(self) -> None:
        self.icache = Cache(self.cfg.icache, self.cfg.icache_ways)
        self.dcache = Cache(self.cfg.dcache, self.cfg.dcache_ways)
        mems = sorted(self.cfg.memories, key=lambda m: m.origin)
        self._starts = [m.origin for m in mems]
        self._mems = mems
        self._read: dict[str, int] = {}
        self._filled: dict[str, int] = {}
        self._last_fetch_line = -1
        self._device = Memory("device", 0x40000000, 0x20000000, "device", 4, False, False)
        self._names = [m.name for m in self.cfg.memories]
        self.flash_fetch_misses = 0   # L1 I-cache line fills from flash
        self.flash_data_misses = 0    # L1 D-cache line fills from flash
        self.now = 0              # the trace's cycle count (unused: no timed prefetch on the M7 side)

    @property
    def description(self) -> str:
        return self.cfg.note

    def describe(self) -> str:
        """The memory side of the model's name, e.g. 'stm32h743xi (flash 4 WS on AXIM ...)'."""
        return f"{self.cfg.soc} ({self.cfg.note})"

    def region(self, addr: int) -> Memory:
        i = bisect_right(self._starts, addr) - 1
        if i >= 0:
            m = self._mems[i]
            if addr < m.origin + m.length:
                return m
        return self._device

    def _miss(self, m: Memory) -> int:
        self._filled[m.name] = self._filled.get(m.name, 0) + LINE
        return m.latency

    def fetch(self, addr: int, size: int) -> int:
        ln = addr >> 5
        if ln == self._last_fetch_line:   # same line as the previous fetch: the fetch buffer has it
            return 0
        self._last_fetch_line = ln
        m = self.region(addr)
        if m.kind == "tcm":
            return 0
        if self.cfg.caches_on and m.cacheable:
            if self.icache.access(addr):
                return 0
            self.flash_fetch_misses += m.kind == "flash"
            return self._miss(m)
        return m.latency

    def read(self, addr: int, size: int) -> int:
        m = self.region(addr)
        self._read[m.name] = self._read.get(m.name, 0) + size
        if m.kind == "tcm":
            return 0
        if self.cfg.caches_on and m.cacheable:
            if self.dcache.access(addr):
                return 0
            self.flash_data_misses += m.kind == "flash"
            return self._miss(m)
        return m.latency

    def write(self, addr: int, size: int) -> int:
        m = self.region(addr)
        if m.kind == "tcm":
            return 0
        if self.cfg.caches_on and m.cacheable:
            if m.write_back:
                return 0 if self.dcache.access(addr, write=True) else self._miss(m)
            self.dcache.access(addr, write=False, allocate=False)   # write-through, no allocate
            return m.latency
        return m.latency

    def bytes_read(self, region: str) -> int:
        """Bytes the core read from `region` (cache hits included)."""
        return self._read.get(region, 0)

    def regions(self) -> list[str]:
        return list(self._names)

    def read_counters(self) -> list[int]:
        """Data bytes read per region (index = `regions()`), a copy: the trace diffs them per layer."""
        return [self._read.get(n, 0) for n in self._names]

    def flash_regions(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.cfg.memories if m.kind == "flash")

    def bytes_filled(self, region: str) -> int:
        """Bytes the L1 caches fetched from `region` (line fills): the region's real traffic."""
        return self._filled.get(region, 0)


def build(board, spec) -> M7MemorySystem:
    """memsys.MEMORY_SYSTEMS factory for Cortex-M7 boards."""
    return M7MemorySystem(config_for(board, spec))
