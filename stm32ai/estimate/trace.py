"""Run a built firmware ELF under unicorn and drive a core model and a memory system with its
instruction and data-address stream.

How the real demo firmware is run (docs/estimate.md, "Trace"):
- The ELF's PT_LOAD segments are written at their load addresses into the board's memory
  regions (mapped from the board file); the core starts at the reset vector with the initial SP,
  so the firmware's own Reset_Handler does the .data copy, .bss zeroing, FPU enable, clock and
  UART bring-up and runs `main`.
- The System Control Space (0xE0000000-0xE00FFFFF) is plain RAM (CPACR, VTOR, DWT, SysTick
  writes land there; nothing ticks). The peripheral space (0x40000000-0x5FFFFFFF) is a tiny
  model whose every register reads all ones: ready flags are set (UART TXE, HSIRDY, PLLRDY),
  so bring-up finishes at once or takes its timeout fallback; writes are dropped.
- Up to the region to estimate, unicorn runs without hooks (fast). The region is then traced
  instruction by instruction: for the demo, the *second* call of `ai_run` (the warm-up is the
  first; the demo times the second between two cycles_now() reads), from its entry to its
  return.

Per instruction the trace hands the core model a `Step`: the decoded `Insn` (static, from
isa.decode_elf), whether its condition passed (IT blocks: unicorn, like QEMU, calls the code
hook for an IT-block instruction only when its condition passes, so the block's instructions
that were not hooked are the failed ones and are charged as such; conditional branches: whether
they were taken), whether control went elsewhere than the next
instruction, the instruction-fetch stall and the data accesses with their stalls (unicorn memory
hooks, asked of the memory system). Everything that does not depend on run-time values is
precomputed once per address. The Step object of an address is reused from one execution to the
next: a core model must not keep it past `cycles()`.

Cycles, instructions and data bytes read per memory region are attributed to buckets (layers)
switched at given addresses (`Buckets`): see layers.py for the model's kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unicorn import (
    UC_ARCH_ARM,
    UC_HOOK_BLOCK,
    UC_HOOK_CODE,
    UC_HOOK_MEM_READ,
    UC_HOOK_MEM_WRITE,
    UC_MODE_MCLASS,
    UC_MODE_THUMB,
    Uc,
    UcError,
)
from unicorn import arm_const as C

from stm32ai.errors import Stm32aiError
from stm32ai.estimate.isa import Cls, Insn, decode_elf
from stm32ai.estimate.model import Access, CoreModel, Step

_CPU_MODELS = {"cortex-m4": C.UC_CPU_ARM_CORTEX_M4, "cortex-m7": C.UC_CPU_ARM_CORTEX_M7,
               "cortex-m33": C.UC_CPU_ARM_CORTEX_M33, "cortex-m0plus": C.UC_CPU_ARM_CORTEX_M0}
_SCS = (0xE0000000, 0x00100000)
_PERIPH = (0x40000000, 0x20000000)
DEFAULT_BUDGET = 200_000_000        # instructions, for any one run (a runaway firmware stops here)
_IT_BITS = 0x0600FC00               # xPSR IT[1:0] (bits 26:25) and IT[7:2] (bits 15:10), ARMv7-M ARM B1.4.2

_REG = {**{f"r{i}": getattr(C, f"UC_ARM_REG_R{i}") for i in range(13)}, "sb": C.UC_ARM_REG_R9,
        "sl": C.UC_ARM_REG_R10, "fp": C.UC_ARM_REG_R11, "ip": C.UC_ARM_REG_R12, "sp": C.UC_ARM_REG_SP,
        "lr": C.UC_ARM_REG_LR}


class TraceError(Stm32aiError):
    """The firmware did not reach or finish the region to estimate (one line, exit 2)."""


@dataclass
class Bucket:
    """Cost of one part of the traced region (a layer's kernel call, or the runtime around them)."""

    name: str
    cycles: int = 0
    instructions: int = 0
    bytes_read: dict[str, int] = field(default_factory=dict)   # data bytes read per memory region


@dataclass
class TraceResult:
    cycles: int
    instructions: int                # instructions issued (condition-failed ones included)
    taken_branches: int
    fetch_stall_cycles: int          # sum of the memory system's fetch stalls handed to the core
    data_stall_cycles: int           # sum of the data-access stalls handed to the core
    bytes_read: dict[str, int]       # data bytes read per memory region
    buckets: list[Bucket]

    @property
    def cpi(self) -> float:
        return self.cycles / self.instructions if self.instructions else 0.0


@dataclass(frozen=True)
class Buckets:
    """Where the traced region's cost goes: `names[0]` until the first switch; executing the
    instruction at an address of `switch` makes its bucket current (before it is charged)."""

    names: Sequence[str]
    switch: dict[int, int]


@dataclass
class Profile:
    """Optional attribution finer than `Buckets` (estimate/profile.py): every traced instruction's
    cycles, count and stalls go to (context, function). `functions`: sorted (start address, name)
    of the ELF's functions. `entries`: function entry address -> a callable naming the context
    from the core's registers at the entry (e.g. the kernel's params struct in r0), or None to
    keep the current one; a context named there holds until that call returns (its LR), nested
    entries inside it keep it. `table`: (context, function) -> [cycles, instructions, fetch
    stall cycles, data stall cycles], filled by `Trace.measure`."""

    functions: Sequence[tuple[int, str]]
    entries: dict[int, Callable[[Uc], str | None]]
    table: dict[tuple[str, str], list[int]] = field(default_factory=dict)


class Trace:
    """One firmware image in one emulated core. `run_to` advances fast (no hooks); `measure`
    traces a region through a core model and a memory system."""

    def __init__(self, elf: Path, regions: Sequence[tuple[int, int]], core: str = "cortex-m4",
                 insns: dict[int, Insn] | None = None):
        from elftools.elf.elffile import ELFFile

        self.elf = Path(elf)
        if core not in _CPU_MODELS:
            raise TraceError(f"no emulator CPU model for {core} (known: {', '.join(_CPU_MODELS)})")
        self.uc = uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
        uc.ctl_set_cpu_model(_CPU_MODELS[core])
        mapped: list[tuple[int, int]] = []
        for origin, length in [*regions, _SCS]:
            lo, hi = origin & ~0xFFF, (origin + length + 0xFFF) & ~0xFFF
            for mlo, mhi in mapped:          # regions never overlap in a valid board; aliases might
                lo, hi = (mhi, hi) if mlo <= lo < mhi else (lo, hi)
            if hi > lo:
                uc.mem_map(lo, hi - lo)
                mapped.append((lo, hi))
        uc.mmio_map(_PERIPH[0], _PERIPH[1], self._periph_read, None, self._periph_write, None)
        self.symbols: dict[str, tuple[int, int]] = {}
        with open(self.elf, "rb") as f:
            e = ELFFile(f)
            for seg in e.iter_segments():
                if seg["p_type"] != "PT_LOAD" or not seg["p_filesz"]:
                    continue
                addr, data = int(seg["p_paddr"]), seg.data()
                if not any(lo <= addr and addr + len(data) <= hi for lo, hi in mapped):
                    raise TraceError(f"{self.elf.name}: segment at 0x{addr:08x} ({len(data)} B) is outside "
                                     "the board's memory regions")
                uc.mem_write(addr, data)
            symtab = e.get_section_by_name(".symtab")
            if symtab is not None:
                for s in symtab.iter_symbols():
                    if s.name and s["st_info"]["type"] in ("STT_FUNC", "STT_NOTYPE", "STT_OBJECT"):
                        self.symbols.setdefault(s.name, (int(s["st_value"]), int(s["st_size"])))
            vec = e.get_section_by_name(".isr_vector")
            self._vectors = int(vec["sh_addr"]) if vec is not None else None
        self.insns = insns if insns is not None else decode_elf(self.elf)
        self._started = False
        self.it_repairs = 0    # stale IT states cleared by `measure` (unicorn#2309)

    # ---- the peripheral model: every register reads all ones, writes are dropped ----------
    @staticmethod
    def _periph_read(uc: Uc, offset: int, size: int, data: Any) -> int:
        return (1 << (8 * size)) - 1

    @staticmethod
    def _periph_write(uc: Uc, offset: int, size: int, value: int, data: Any) -> None:
        return None

    def _it_block_addresses(self) -> set[int]:
        """Every instruction inside an IT block (the only places the IT state may be set)."""
        out: set[int] = set()
        for addr, insn in self.insns.items():
            if insn.cls == Cls.IT:
                a = addr + insn.size
                for _ in range(len(insn.mnemonic) - 1):
                    nxt = self.insns.get(a)
                    if nxt is None:
                        break
                    out.add(a)
                    a += nxt.size
        return out

    def symbol(self, name: str) -> int:
        """Address of a symbol (Thumb bit cleared)."""
        if name not in self.symbols:
            raise TraceError(f"{self.elf.name} has no symbol '{name}'")
        return self.symbols[name][0] & ~1

    def function_range(self, name: str) -> tuple[int, int]:
        addr, size = self.symbols.get(name, (0, 0))
        if not size:
            raise TraceError(f"{self.elf.name} has no function '{name}'")
        return addr & ~1, (addr & ~1) + size

    @property
    def pc(self) -> int:
        return int(self.uc.reg_read(C.UC_ARM_REG_PC))

    def start(self, pc: int | None = None, sp: int | None = None) -> None:
        """Set the core to run from `pc` (default: the reset vector, SP from vector 0)."""
        if pc is None:
            if self._vectors is None:
                raise TraceError(f"{self.elf.name} has no .isr_vector section: give a start address")
            words = self.uc.mem_read(self._vectors, 8)
            sp, pc = int.from_bytes(words[:4], "little"), int.from_bytes(words[4:], "little") & ~1
        if sp is not None:
            self.uc.reg_write(C.UC_ARM_REG_SP, sp)
        self.uc.reg_write(C.UC_ARM_REG_PC, pc | 1)
        self._started = True

    def _emu(self, budget: int) -> None:
        try:
            self.uc.emu_start(self.pc | 1, 0xFFFFFFFF, count=budget)
        except UcError as e:
            raise TraceError(f"{self.elf.name}: emulation stopped at 0x{self.pc:08x}: {e} "
                             "(an access outside the board's memory regions?)") from None

    def run_to(self, addr: int, occurrence: int = 1, budget: int = DEFAULT_BUDGET) -> None:
        """Run without tracing until the instruction at `addr` is about to execute for the
        `occurrence`-th time (counted from now)."""
        if not self._started:
            self.start()
        hits = [0]

        def hook(uc: Uc, a: int, size: int, _: Any) -> None:
            hits[0] += 1
            if hits[0] >= occurrence:
                uc.emu_stop()

        h = self.uc.hook_add(UC_HOOK_CODE, hook, None, addr, addr)
        self.uc.ctl_flush_tb()
        try:
            self._emu(budget)
        finally:
            self.uc.hook_del(h)
        if hits[0] < occurrence or self.pc != addr:
            raise TraceError(f"{self.elf.name}: 0x{addr:08x} reached {hits[0]} of {occurrence} times within "
                             f"{budget} instructions (stopped at 0x{self.pc:08x})")

    def measure(self, core: CoreModel, mem: Any, stop: int | None = None, buckets: Buckets | None = None,
                budget: int = DEFAULT_BUDGET, progress: Callable[[int], None] | None = None,
                profile: Profile | None = None) -> TraceResult:
        """Trace from the current PC until the instruction at `stop` is about to execute
        (default: the return address in LR, i.e. the current function's return)."""
        uc = self.uc
        import bisect

        p_starts = [a for a, _ in profile.functions] if profile else []
        p_names = [n for _, n in profile.functions] if profile else []
        p_entries = profile.entries if profile else {}
        p_table = profile.table if profile else {}
        p_ctx: list[tuple[str, int]] = [("-", -1)]     # (context, return address) stack
        if stop is None:
            stop = int(uc.reg_read(C.UC_ARM_REG_LR)) & ~1
        core.reset()
        insns = self.insns
        recs: dict[int, list[Any]] = {}
        names = list(buckets.names) if buckets else ["all"]
        switch = buckets.switch if buckets else {}
        regions = mem.regions()
        n_regions = len(regions)
        acc_cycles = [0] * len(names)
        acc_insns = [0] * len(names)
        acc_bytes = [[0] * n_regions for _ in names]
        # mutable trace state (closures over a list are faster than attributes)
        in_it: dict[int, bool] = {}        # addresses inside an IT block (from their IT's record)
        st = {"it": None, "cycles": 0, "n": 0, "taken": 0, "fstall": 0, "dstall": 0, "cur": None,
              "bucket": 0, "b_cycles": 0, "b_n": 0, "b_bytes": mem.read_counters()}
        reg_read = uc.reg_read
        mem_fetch, mem_read, mem_write = mem.fetch, mem.read, mem.write
        core_cycles = core.cycles

        def record(addr: int) -> list[Any]:
            insn = insns.get(addr)
            if insn is None:
                raise TraceError(f"{self.elf.name}: no decoded instruction at 0x{addr:08x} (code outside "
                                 "the ELF's $t ranges?)")
            if insn.cls == Cls.BRANCH and insn.conditional and not in_it.get(addr):
                kind = 1                     # Bcc: executed exactly when taken
            elif insn.conditional:
                kind = 2                     # in an IT block: hooked only when its condition passed
            else:
                kind = 0
            # operand registers whose values the timing needs (SDIV/UDIV Rn, Rm: the last two)
            vals = [_REG[r] for r in insn.op_str.replace(" ", "").split(",")[-2:]] if insn.cls == Cls.DIV else []
            # an IT instruction: the addresses of the block it opens (1-4 instructions, "itte" = 3)
            block: list[int] = []
            if insn.cls == Cls.IT:
                a = addr + insn.size
                for _ in range(len(insn.mnemonic) - 1):
                    nxt = insns.get(a)
                    if nxt is None:
                        break
                    block.append(a)
                    in_it[a] = True
                    a += nxt.size
            fname = "?"
            if profile is not None:
                i = bisect.bisect_right(p_starts, addr) - 1
                fname = p_names[i] if i >= 0 else "?"
            rec = [insn, Step(insn), addr + insn.size, kind, None, switch.get(addr), vals, block, fname]
            recs[addr] = rec
            return rec

        def close_bucket(new: int) -> None:
            b = st["bucket"]
            acc_cycles[b] += st["cycles"] - st["b_cycles"]
            acc_insns[b] += st["n"] - st["b_n"]
            now = mem.read_counters()
            prev = st["b_bytes"]
            row = acc_bytes[b]
            for i in range(n_regions):
                row[i] += now[i] - prev[i]
            st.update(bucket=new, b_cycles=st["cycles"], b_n=st["n"], b_bytes=now)

        def finish(cur: list[Any], next_addr: int) -> None:
            step: Step = cur[1]
            taken = next_addr != cur[2]
            if cur[3] == 1:
                step.executed = taken
            step.taken = taken
            if taken:
                st["taken"] += 1
                step.next_addr = next_addr
                nxt = insns.get(next_addr)
                step.next_size = nxt.size if nxt is not None else 2
            c = core_cycles(step)
            st["cycles"] += c
            st["n"] += 1
            if profile is not None:
                key = (p_ctx[-1][0], cur[8])
                row = p_table.get(key)
                if row is None:
                    row = p_table[key] = [0, 0, 0, 0]
                row[0] += c
                row[1] += 1
                row[2] += step.fetch_stall
                row[3] += sum(a.stall for a in step.accesses)

        in_block = self._it_block_addresses()

        def on_block(uc: Uc, addr: int, size: int, _: Any) -> None:
            # unicorn 2.1 (unicorn-engine/unicorn#2309): with memory hooks on, a load/store in an
            # IT block can leave the block's IT state behind for the next translation block, whose
            # instructions then run as if conditional (skipped when the condition fails: wrong
            # results, a wild branch). A block that starts outside every IT block must start with
            # the IT state clear: stop before it; the loop below clears the bits and resumes.
            if addr not in in_block and reg_read(C.UC_ARM_REG_XPSR) & _IT_BITS:
                st["repair"] = addr
                uc.emu_stop()

        def on_code(uc: Uc, addr: int, size: int, _: Any) -> None:
            if st["repair"] is not None:
                return                      # stopping before this block (on_block)
            cur = st["cur"]
            block = st["it"]
            if block is not None:
                # unicorn (like QEMU) skips an IT-block instruction whose condition fails without
                # calling the hook: those still issue (executed=False), charge them here
                if addr in block:
                    k = block.index(addr)
                    skipped, rest = block[:k], block[k + 1:]
                else:
                    skipped, rest = block, []
                st["it"] = rest or None
                for a in skipped:
                    r2 = recs.get(a) or record(a)
                    if cur is not None:
                        finish(cur, a)
                    s2: Step = r2[1]
                    s2.accesses = []
                    s2.executed = False
                    mem.now = st["cycles"]
                    s2.fetch_stall = mem_fetch(a, r2[0].size)
                    st["fstall"] += s2.fetch_stall
                    cur = r2
            if addr == stop:
                if cur is not None:
                    finish(cur, addr)
                st["cur"] = None
                uc.emu_stop()
                return
            rec = recs.get(addr) or record(addr)
            if cur is not None:
                finish(cur, addr)
            if rec[5] is not None:
                close_bucket(rec[5])
            if profile is not None:
                if addr == p_ctx[-1][1]:
                    p_ctx.pop()
                if len(p_ctx) == 1 and addr in p_entries:
                    name = p_entries[addr](uc)
                    if name is not None:
                        p_ctx.append((name, int(reg_read(C.UC_ARM_REG_LR)) & ~1))
            step: Step = rec[1]
            step.accesses = []
            mem.now = st["cycles"]
            fs = mem_fetch(addr, size)
            step.fetch_stall = fs
            st["fstall"] += fs
            if rec[3] == 2:
                step.executed = True
            if rec[7]:
                st["it"] = list(rec[7])
            if rec[6]:
                step.values = tuple(int(reg_read(r)) for r in rec[6])
            st["cur"] = rec
            if progress is not None and not st["n"] & 0xFFFFF:
                progress(st["n"])

        def on_read(uc: Uc, access: int, addr: int, size: int, value: int, _: Any) -> None:
            s = mem_read(addr, size)
            st["dstall"] += s
            st["cur"][1].accesses.append(Access(addr, size, False, s))

        def on_write(uc: Uc, access: int, addr: int, size: int, value: int, _: Any) -> None:
            s = mem_write(addr, size)
            st["cur"][1].accesses.append(Access(addr, size, True, s))

        hooks = [uc.hook_add(UC_HOOK_BLOCK, on_block), uc.hook_add(UC_HOOK_CODE, on_code),
                 uc.hook_add(UC_HOOK_MEM_READ, on_read),
                 uc.hook_add(UC_HOOK_MEM_WRITE, on_write)]
        uc.ctl_flush_tb()       # code translated before the hooks existed would not call them
        try:
            while True:
                st["repair"] = None
                self._emu(budget)
                if st["repair"] is None or self.pc != st["repair"]:
                    break
                uc.reg_write(C.UC_ARM_REG_XPSR, int(reg_read(C.UC_ARM_REG_XPSR)) & ~_IT_BITS)
                uc.ctl_flush_tb()   # blocks translated with the stale IT state
                self.it_repairs += 1
        finally:
            for h in hooks:
                uc.hook_del(h)
            uc.ctl_flush_tb()
        if self.pc != stop or st["cur"] is not None:
            raise TraceError(f"{self.elf.name}: the traced region did not end at 0x{stop:08x} within {budget} "
                             f"instructions (stopped at 0x{self.pc:08x})")
        close_bucket(0)
        bytes_read = {r: sum(row[i] for row in acc_bytes) for i, r in enumerate(regions)}
        out = [Bucket(n, acc_cycles[i], acc_insns[i], {r: acc_bytes[i][j] for j, r in enumerate(regions)})
               for i, n in enumerate(names)]
        return TraceResult(cycles=st["cycles"], instructions=st["n"], taken_branches=st["taken"],
                           fetch_stall_cycles=st["fstall"], data_stall_cycles=st["dstall"], bytes_read=bytes_read,
                           buckets=out)


def board_regions(board: Any) -> list[tuple[int, int]]:
    """(origin, length) of every memory region of a board, for `Trace`."""
    return [(r.origin, r.length) for r in board.memory]
