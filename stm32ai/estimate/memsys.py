"""The board's memory system as the core sees it: which region an address falls in, what an
instruction fetch or a data access costs beyond a zero-wait access, and how many bytes were read
from each region.

The description is the `memsys:` section of the SoC file (boards/soc/*.yaml, inherited by its
boards; schema in docs/estimate.md), every value cited to the reference manual there. Flash wait
states are not in it: they are the board's `clock.flash_latency` (what the clock bring-up writes
to FLASH_ACR.LATENCY at the board's clock).

Implemented here: the STM32F4/L4/L4+ embedded flash behind the ART accelerator (instruction
cache, data cache, sequential prefetch) and zero-wait SRAMs, i.e. every Cortex-M4 board. The
Cortex-M7 parts' L1 caches and TCMs are described by the same schema (`l1:`, `tcm:`) and are
implemented in cache.py, registered below for cortex-m7; the Cortex-M33 parts (STM32U5/H5)
have one ICACHE on the code bus for fetches and flash data reads (CodeBusCacheMemory).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stm32ai.boards import Board, parse_size
from stm32ai.errors import Stm32aiError

_PAGE_SHIFT = 12            # region lookup granularity: every region is a multiple of 4 KiB


@dataclass(frozen=True)
class CacheSpec:
    lines: int              # number of lines (fully associative, LRU: see docs/estimate.md)
    line_bytes: int


@dataclass(frozen=True)
class L1Spec:
    size: int
    ways: int
    line_bytes: int


@dataclass(frozen=True)
class FlashSpec:
    regions: tuple[str, ...]   # board memory regions that are this flash
    read_bytes: int            # one flash read (64 bits on L4, 128 on F4, 256 on F7/H7)
    wait_states: int           # from clock.flash_latency
    prefetch: bool
    icache: CacheSpec | None
    dcache: CacheSpec | None
    art: CacheSpec | None      # Cortex-M7 parts: the ART on the ITCM flash interface


@dataclass(frozen=True)
class MemsysSpec:
    board: str
    flash: FlashSpec | None
    wait_states: dict[str, int]     # other regions' extra cycles per access (0: zero-wait SRAM)
    l1_icache: L1Spec | None        # Cortex-M7 L1 caches (cache.py)
    l1_dcache: L1Spec | None
    tcm: tuple[str, ...]            # regions on the M7's TCM interfaces

    def describe(self) -> str:
        """The memory side of the model's name, e.g. 'flash 5 WS + ART (prefetch, I/D cache)'."""
        if self.flash is None:
            return "zero-wait memories"
        f = self.flash
        if self.l1_icache is not None and self.l1_dcache is not None:   # Cortex-M7: L1 caches, no ART on AXIM
            return (f"flash {f.wait_states} WS on AXIM + L1 {self.l1_icache.size // 1024} KB I / "
                    f"{self.l1_dcache.size // 1024} KB D cache, {'/'.join(self.tcm) or 'no'} TCM")
        parts = [p for p, on in (("prefetch", f.prefetch), ("I-cache", f.icache), ("D-cache", f.dcache)) if on]
        return f"flash {f.wait_states} WS + ART ({', '.join(parts) or 'off'})"


def _fail(board: Board, key: str, msg: str) -> Stm32aiError:
    where = f"boards/soc/{board.soc}.yaml" if board.soc else (str(board.path) if board.path else board.id)
    return Stm32aiError(f"{where}: memsys.{key}: {msg}")


def _int(board: Board, d: dict[str, Any], key: str, path: str, lo: int = 0, required: bool = True) -> int | None:
    v = d.get(key)
    if v is None:
        if required:
            raise _fail(board, f"{path}{key}", "missing (required)")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise _fail(board, f"{path}{key}", f"expected an integer >= {lo}, got {v!r}")
    return v


def _keys(board: Board, d: Any, allowed: set[str], path: str) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise _fail(board, path.rstrip(".") or "", f"expected a mapping, got {type(d).__name__}")
    extra = sorted(set(d) - allowed)
    if extra:
        raise _fail(board, path + extra[0], f"unknown key (allowed: {', '.join(sorted(allowed))})")
    return d


def _cache(board: Board, d: Any, path: str) -> CacheSpec | None:
    if d is None or d is False:
        return None
    d = _keys(board, d, {"lines", "line_bytes", "note"}, path + ".")
    return CacheSpec(lines=_int(board, d, "lines", path + ".", 1) or 1,
                     line_bytes=_int(board, d, "line_bytes", path + ".", 4) or 4)


def _l1(board: Board, d: Any, path: str) -> L1Spec | None:
    if d is None:
        return None
    d = _keys(board, d, {"size", "ways", "line_bytes", "note"}, path + ".")
    try:
        size = parse_size(d.get("size"), f"memsys.{path}.size")
    except Stm32aiError as e:
        raise _fail(board, f"{path}.size", str(e)) from None
    return L1Spec(size=size, ways=_int(board, d, "ways", path + ".", 1) or 1,
                  line_bytes=_int(board, d, "line_bytes", path + ".", 4) or 4)


def load_spec(board: Board) -> MemsysSpec:
    """The board's `memsys:` section, checked (one-line errors naming the file and key)."""
    raw = board.memsys
    if raw is None:
        raise Stm32aiError(f"board {board.id} has no memsys: section (the cycle estimator's memory system; "
                           "add one to its SoC file, see docs/estimate.md)")
    d = _keys(board, raw, {"flash", "wait_states", "l1", "tcm", "note"}, "")
    names = {r.name for r in board.memory}
    flash = None
    if d.get("flash") is not None:
        f = _keys(board, d["flash"], {"regions", "read_bytes", "prefetch", "icache", "dcache", "art", "note"},
                  "flash.")
        regions = f.get("regions")
        if not isinstance(regions, list) or not regions or not all(isinstance(x, str) for x in regions):
            raise _fail(board, "flash.regions", "expected a list of memory region names")
        for rn in regions:
            if rn not in names:
                raise _fail(board, "flash.regions", f"no memory region named '{rn}'")
        read_bytes = _int(board, f, "read_bytes", "flash.", 4) or 4
        if read_bytes & (read_bytes - 1):
            raise _fail(board, "flash.read_bytes", f"{read_bytes} is not a power of two")
        prefetch = f.get("prefetch", False)
        if not isinstance(prefetch, bool):
            raise _fail(board, "flash.prefetch", f"expected true or false, got {prefetch!r}")
        icache, dcache = _cache(board, f.get("icache"), "flash.icache"), _cache(board, f.get("dcache"), "flash.dcache")
        for c, k in ((icache, "icache"), (dcache, "dcache")):
            if c is not None and (c.line_bytes % read_bytes or c.line_bytes & (c.line_bytes - 1)):
                raise _fail(board, f"flash.{k}.line_bytes",
                            f"{c.line_bytes} is not a power-of-two multiple of read_bytes {read_bytes}")
        flash = FlashSpec(regions=tuple(regions), read_bytes=read_bytes, wait_states=board.clock.flash_latency,
                          prefetch=prefetch, icache=icache, dcache=dcache, art=_cache(board, f.get("art"), "flash.art"))
    ws_raw = _keys(board, d.get("wait_states") or {}, set(d.get("wait_states") or {}), "wait_states.")
    # a SoC file may name regions a board omits (omit_memory): those entries do not apply
    ws = {k: _int(board, ws_raw, k, "wait_states.") or 0 for k in ws_raw if k in names}
    l1 = _keys(board, d.get("l1") or {}, {"icache", "dcache", "note"}, "l1.")
    tcm = d.get("tcm") or []
    if not isinstance(tcm, list) or not all(isinstance(x, str) and x in names for x in tcm):
        raise _fail(board, "tcm", f"expected a list of memory region names, got {tcm!r}")
    return MemsysSpec(board=board.id, flash=flash, wait_states=ws, l1_icache=_l1(board, l1.get("icache"), "l1.icache"),
                      l1_dcache=_l1(board, l1.get("dcache"), "l1.dcache"), tcm=tuple(tcm))


class _LruCache:
    """A fully associative cache of `lines` lines of `line_bytes`, each line holding
    line_bytes / read_bytes sub-blocks filled one flash read at a time (valid bits)."""

    __slots__ = ("lines", "shift", "sub_shift", "sub_mask", "tags")

    def __init__(self, spec: CacheSpec, read_bytes: int):
        self.lines = spec.lines
        self.shift = spec.line_bytes.bit_length() - 1
        self.sub_shift = read_bytes.bit_length() - 1
        self.sub_mask = (spec.line_bytes // read_bytes) - 1
        self.tags: dict[int, int] = {}          # line -> valid sub-block mask, in LRU order

    def lookup(self, unit: int) -> bool:
        """`unit` = address >> log2(read_bytes). True on a hit (and marks the line recently used)."""
        line = unit >> (self.shift - self.sub_shift)
        bit = 1 << (unit & self.sub_mask)
        tags = self.tags
        v = tags.pop(line, None)
        if v is None:
            if len(tags) >= self.lines:
                del tags[next(iter(tags))]      # least recently used
            tags[line] = bit
            return False
        tags[line] = v | bit
        return bool(v & bit)

    def contains(self, unit: int) -> bool:
        v = self.tags.get(unit >> (self.shift - self.sub_shift))
        return v is not None and bool(v & (1 << (unit & self.sub_mask)))


class FlashArtMemory:
    """STM32F4 / L4 / L4+ memory system: the embedded flash behind the ART accelerator, every
    other region at its `wait_states` (0 for the SRAMs).

    Instruction side (RM0090 §3.5.2, RM0351/RM0432 §3.3.4): the fetch unit holds the current
    flash line (`read_bytes`); a fetch from it costs nothing. With prefetch on, the next
    sequential line is read while the current one executes: it is ready `wait_states + 1`
    cycles after the current line became current, and a fetch from it waits only for what is
    left. Otherwise the I-cache is looked up (hit: no wait); a miss reads the line from flash
    (`wait_states` extra cycles) and copies it into the I-cache ("each time a miss occurs ...
    the line read is copied into the instruction cache memory"). A line the core executed from
    the prefetch buffer is copied too: the manual's wording would leave it out, which makes
    every loop longer than one line wait on the prefetch on each iteration, far slower than
    the published CoreMark/MHz of these parts (docs/estimate.md, calibration).
    Data side: a read from flash hits the D-cache (no wait) or costs `wait_states` and fills it.
    Approximations (docs/estimate.md): caches fully associative with LRU replacement; the
    I-code/D-code arbitration at the flash interface is not modelled.

    `now` is the core's cycle count before the instruction being fetched; the trace sets it.
    """

    def __init__(self, board: Board, spec: MemsysSpec):
        if spec.l1_icache or spec.l1_dcache or spec.tcm or (spec.flash and spec.flash.art):
            raise Stm32aiError(f"board {board.id}: its memory system (L1 caches/TCM/ART on ITCM) is not "
                               "modelled yet (Cortex-M7 parts)")
        self.spec = spec
        self.now = 0
        self._names: list[str] = []
        self._page: dict[int, int] = {}         # address >> 12 -> region index
        self._ws: list[int] = []
        self._is_flash: list[bool] = []
        flash_regions = spec.flash.regions if spec.flash else ()
        for r in board.memory:
            idx = len(self._names)
            self._names.append(r.name)
            self._is_flash.append(r.name in flash_regions)
            self._ws.append(spec.wait_states.get(r.name, 0))
            for p in range(r.origin >> _PAGE_SHIFT, (r.origin + r.length + (1 << _PAGE_SHIFT) - 1) >> _PAGE_SHIFT):
                self._page.setdefault(p, idx)
        self._other = len(self._names)          # peripherals, system space, aliases
        self._names.append("other")
        self._ws.append(0)
        self._is_flash.append(False)
        self._read = [0] * len(self._names)
        self._fetched = [0] * len(self._names)
        f = spec.flash
        self.wait = f.wait_states if f else 0
        self._unit_shift = (f.read_bytes.bit_length() - 1) if f else 3
        self._prefetch = bool(f and f.prefetch)
        self._ic = _LruCache(f.icache, f.read_bytes) if f and f.icache else None
        self._dc = _LruCache(f.dcache, f.read_bytes) if f and f.dcache else None
        self._cur = -1            # flash line held by the fetch unit
        self._pf = -1             # line in the prefetch buffer ...
        self._pf_ready = 0        # ... and the cycle it arrives
        self.flash_fetch_misses = 0
        self.flash_data_misses = 0

    def region_of(self, addr: int) -> str:
        return self._names[self._page.get(addr >> _PAGE_SHIFT, self._other)]

    def _fetch_unit(self, unit: int) -> int:
        if unit == self._cur:
            return 0
        now = self.now
        ic = self._ic
        if self._prefetch and unit == self._pf:
            stall = max(0, self._pf_ready - now)
            if ic is not None:
                ic.lookup(unit)          # a line the core executed from the prefetch buffer is kept too
        elif ic is not None and ic.lookup(unit):
            stall = 0
        else:
            stall = self.wait
            self.flash_fetch_misses += 1
        self._cur = unit
        if self._prefetch:
            nxt = unit + 1
            if ic is not None and ic.contains(nxt):
                self._pf = -1
            else:
                self._pf = nxt
                self._pf_ready = now + stall + self.wait + 1
        return stall

    def fetch(self, addr: int, size: int) -> int:
        idx = self._page.get(addr >> _PAGE_SHIFT, self._other)
        self._fetched[idx] += size
        if not self._is_flash[idx]:
            return self._ws[idx]
        sh = self._unit_shift
        first, last = addr >> sh, (addr + size - 1) >> sh
        stall = self._fetch_unit(first)
        if last != first:
            self.now += stall
            stall += self._fetch_unit(last)
        return stall

    def read(self, addr: int, size: int) -> int:
        idx = self._page.get(addr >> _PAGE_SHIFT, self._other)
        self._read[idx] += size
        if not self._is_flash[idx]:
            return self._ws[idx]
        sh = self._unit_shift
        stall = 0
        for unit in range(addr >> sh, ((addr + size - 1) >> sh) + 1):   # a VLDR.64 may span two reads
            if self._dc is None or not self._dc.lookup(unit):
                self.flash_data_misses += 1
                stall += self.wait
        return stall

    def write(self, addr: int, size: int) -> int:
        return self._ws[self._page.get(addr >> _PAGE_SHIFT, self._other)]

    def bytes_read(self, region: str) -> int:
        return self._read[self._names.index(region)] if region in self._names else 0

    def read_counters(self) -> list[int]:
        """Data bytes read per region (index = `regions()`), a copy: the trace diffs them per layer."""
        return list(self._read)

    def regions(self) -> list[str]:
        return list(self._names)

    def flash_regions(self) -> tuple[str, ...]:
        return self.spec.flash.regions if self.spec.flash else ()


class ZeroWaitMemory(FlashArtMemory):
    """Every access zero-wait (the core model's micro-benchmarks): same counters, no stalls."""

    def __init__(self, board: Board):
        super().__init__(board, MemsysSpec(board=board.id, flash=None, wait_states={}, l1_icache=None,
                                           l1_dcache=None, tcm=()))


# core -> the memory-system model of its parts; the Cortex-M7 one (L1 caches, TCMs) lives in
# cache.py, imported on use (cache.py must not import this module: no import cycle)
def _cortex_m7(board: Board, spec: MemsysSpec) -> Any:
    from stm32ai.estimate.cache import build  # L1 caches, TCMs, AXI memories (cache.py)

    return build(board, spec)


class CodeBusCacheMemory(FlashArtMemory):
    """STM32U5 / H5 memory system (Cortex-M33): the embedded flash behind the ICACHE, every other
    region at its `wait_states`.

    The ICACHE sits on the Cortex-M33's C-AHB code bus (RM0456 §8.3, RM0481 §8.3), which carries
    the core's instruction fetches *and* its data reads from the code region (Cortex-M33 TRM §2.1,
    the Harvard code interface): so one cache (`flash.icache`) serves both, and weights read
    from flash compete with the code for its lines. A miss costs the flash wait states (one
    128-bit read refills a 16-byte line). No DCACHE: the parts' DCACHE1 is on the S-AHB for
    external memories only. Approximations as FlashArtMemory: fully associative, LRU."""

    def __init__(self, board: Board, spec: MemsysSpec):
        super().__init__(board, spec)
        if spec.flash is not None and spec.flash.dcache is None:
            self._dc = self._ic


MEMORY_SYSTEMS: dict[str, Callable[[Board, MemsysSpec], Any]] = {"cortex-m4": FlashArtMemory,
                                                                 "cortex-m7": _cortex_m7,
                                                                 "cortex-m33": CodeBusCacheMemory}
# STM32G0/C0: the embedded flash with its prefetch (and an instruction cache whose size is not
# described yet), zero-wait SRAM: the same model as the Cortex-M4 parts' flash interface
MEMORY_SYSTEMS["cortex-m0plus"] = FlashArtMemory


def build_memory_system(board: Board) -> Any:
    """The memory-system model of a board (its SoC's `memsys:` section)."""
    spec = load_spec(board)
    factory = MEMORY_SYSTEMS.get(board.core)
    if factory is None:
        raise Stm32aiError(f"board {board.id}: no memory-system model for {board.core} yet "
                           f"(modelled: {', '.join(sorted(MEMORY_SYSTEMS))})")
    return factory(board, spec)
