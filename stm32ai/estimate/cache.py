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


# Per part: cache sizes and what each region's bus is (sources in the comments).
_PARTS: dict[str, dict] = {
    # RM0385 §2.1 Figure 1 (F74x/F75x bus matrix): flash on AXIM (ART only on the ITCM path),
    # SRAM1/SRAM2 on the AXIM through the bus matrix, DTCM 64 KB, ITCM 16 KB; L1 4 KB I + 4 KB D
    # (DS10916 §2.1). Flash reads are 256 bits (RM0385 §3.3: one read fills a 32-byte line).
    "stm32f746xg": {"icache": 4096, "dcache": 4096, "sram_bus_cycles": 1},
    # RM0410: F76x/F77x, same bus structure, 16 KB I + 16 KB D (DS11532 §2.1).
    "stm32f769xi": {"icache": 16384, "dcache": 16384, "sram_bus_cycles": 1},
    # RM0433 §2.1 Figure 1: flash and AXI SRAM on the 64-bit AXI (D1 domain, HCLK = AXI clock),
    # SRAM1-3 (D2) and SRAM4 (D3) further through AHB bridges; 16 KB I + 16 KB D (DS12110 §3.3).
    "stm32h743xi": {"icache": 16384, "dcache": 16384, "sram_bus_cycles": 1, "ahb_sram_bus_cycles": 2},
}


def config_for(board) -> M7MemoryConfig:
    """The memory system of a Cortex-M7 board (boards/*.yaml): regions, clocks, wait states."""
    part = _PARTS.get(board.soc)
    if board.core != "cortex-m7" or part is None:
        known = ", ".join(sorted(_PARTS))
        raise ValueError(f"no Cortex-M7 memory model for SoC '{board.soc}' (known: {known})")
    ratio = max(1, round(board.cpu_hz / board.hclk_hz))    # core cycles per AXI/AHB cycle
    ws = board.clock.flash_latency
    mems: list[Memory] = []
    for r in board.memory:
        n = r.name
        if n in ("itcm", "dtcm"):
            mems.append(Memory(n, r.origin, r.length, "tcm", 0, False, False))
        elif n == "flash":
            mems.append(Memory(n, r.origin, r.length, "flash", (ws + 1) * ratio + AXI_OVERHEAD, True, False))
        elif n in ("sram123", "sram4"):
            lat = part.get("ahb_sram_bus_cycles", 2) * ratio + AXI_OVERHEAD
            mems.append(Memory(n, r.origin, r.length, "sram", lat, True, True))
        elif r.origin >= 0x60000000:   # FMC / QSPI: external memories (not used by our pools)
            # default map: 0x6-0x7 WBWA RAM, 0x8-0x9 write-through RAM, 0xA-0xD Device (SDRAM at
            # 0xC0000000 is uncached unless the MPU or FMC bank swap says otherwise)
            mems.append(Memory(n, r.origin, r.length, "external", 20 * ratio, r.origin < 0xA0000000,
                               r.origin < 0x80000000))
        else:
            lat = part["sram_bus_cycles"] * ratio + AXI_OVERHEAD
            mems.append(Memory(n, r.origin, r.length, "sram", lat, True, r.origin >= 0x20000000))
    return M7MemoryConfig(
        soc=board.soc, icache=part["icache"], dcache=part["dcache"], memories=tuple(mems),
        caches_on=bool(board.cache),
        note=f"{board.soc}: flash {ws} WS at {board.hclk_hz / 1e6:g} MHz AXI (core {board.cpu_hz / 1e6:g} MHz), "
             f"L1 {part['icache'] // 1024} KB I + {part['dcache'] // 1024} KB D "
             f"{'on' if board.cache else 'off'}, ITCM/DTCM zero wait")


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

    @property
    def description(self) -> str:
        return self.cfg.note

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
            return 0 if self.icache.access(addr) else self._miss(m)
        return m.latency

    def read(self, addr: int, size: int) -> int:
        m = self.region(addr)
        self._read[m.name] = self._read.get(m.name, 0) + size
        if m.kind == "tcm":
            return 0
        if self.cfg.caches_on and m.cacheable:
            return 0 if self.dcache.access(addr) else self._miss(m)
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

    def bytes_filled(self, region: str) -> int:
        """Bytes the L1 caches fetched from `region` (line fills): the region's real traffic."""
        return self._filled.get(region, 0)
