"""Cortex-M33 core timing (docs/estimate.md, "Cortex-M33"): a single-issue in-order scoreboard
with the M33's limited dual issue of 16-bit instructions.

Sources: Cortex-M33 TRM (Arm DDI 0630) §1: three-stage pipeline (fetch, decode, execute), limited
dual issue; the published per-instruction measurements of github.com/jnk0le "pipeline cycle
test" (Cortex-M33 r1p0, RP2350), which give:

* ALU 1 cycle; operand2 with a shifted register or shifted constant, and SXTA/UXTA, have a
  2-cycle result latency; a flag-setting shifted-constant or MULS.N instruction takes 2 cycles.
* MUL/MAC: 2-cycle result latency; an accumulate chain runs one per cycle (accumulator read late).
* Loads: load-to-use 2 cycles (a dependent instruction right after waits 1); a load result can be
  stored, or used as a MAC accumulator, the next cycle. LDRD/STRD 2 cycles; LDM/STM of n
  registers n cycles.
* Dual issue only of two 16-bit instructions: a NOP with an arithmetic or load/store one; a
  16-bit not-taken branch with the instruction before it (0 cycles); a 16-bit taken branch after
  a 16-bit instruction that sets no flags (1 cycle, else 2); IT with the instruction before it.
* A condition-failed instruction in an IT block executes as a NOP (1 cycle, no hazards).

Assumptions (not measured there): SDIV/UDIV as the Cortex-M4 (core_m4.div_cycles: Arm documents
2-12 cycles with early termination for both); a taken 32-bit branch (B.W, BL) 2 cycles; an
indirect branch (BX, BLX, POP/LDR to PC) one more, its target being known only at execute;
memory stalls from the memory system add to the instruction that made them.
"""

from __future__ import annotations

import re

from stm32ai.estimate.core_m4 import div_cycles
from stm32ai.estimate.core_m7 import _regs
from stm32ai.estimate.isa import Cls, Insn
from stm32ai.estimate.model import Step

_SHIFT_OPERAND = re.compile(r",\s*(?:lsl|lsr|asr|ror)\s+#|,\s*rrx\b")
_EXTEND_ACC = re.compile(r"^[su]xta(?:b|h|b16)$")
_IMM = re.compile(r"#(-?(?:0x[0-9a-f]+|\d+))\s*$")
_ACC_MACS = re.compile(r"^(?:mla|mls|smla.*|smlsd.*|smmla.*|smmls.*|usada8|umlal|smlal.*|umaal|smlsld.*)$")


def _shifted_constant(m: str, ops: str) -> bool:
    mm = _IMM.search(ops)
    if not mm or m in ("mov", "movw", "movt", "mvn"):
        return False
    v = int(mm.group(1), 0) & 0xFFFFFFFF
    if v <= 0xFF or (m in ("add", "sub") and v <= 0xFFF):
        return False
    b0, b1 = v & 0xFF, (v >> 8) & 0xFF
    return v not in (b0 * 0x00010001, b0 * 0x01010101, (b1 << 8) * 0x00010001)


class _Info:
    __slots__ = ("issue", "latency", "reads", "late", "writes", "sets_flags", "reads_flags", "narrow",
                 "kind", "flags_late", "div")

    def __init__(self, insn: Insn) -> None:
        m, cls, ops = insn.mnemonic, insn.cls, insn.op_str.lower()
        self.issue = 1
        self.latency = 1
        self.narrow = insn.size == 2
        self.kind = "alu"
        self.flags_late = False
        self.div = cls is Cls.DIV
        self.sets_flags = insn.sets_flags or m in ("cmp", "cmn", "tst", "teq")
        self.reads_flags = insn.conditional or m in ("adc", "sbc")
        late: set[str] = set()                      # operands read a cycle late (MAC accumulator, store data)
        if cls is Cls.ALU:
            shifted = bool(_SHIFT_OPERAND.search(ops)) and m not in ("lsl", "lsr", "asr", "ror", "rrx")
            if shifted or _shifted_constant(m, ops) or _EXTEND_ACC.match(m):
                self.latency = 2
                if shifted:
                    self.flags_late = True
                if self.sets_flags and not shifted and not m.startswith("mov"):
                    self.issue = 2                  # flag-setting shifted constant: both stages
        elif cls in (Cls.MUL, Cls.MUL64):
            self.kind = "mac"
            self.latency = 2
            if m == "mul" and self.sets_flags and self.narrow:
                self.issue = 2                      # MULS.N
            if _ACC_MACS.match(m):
                regs = _regs(ops)
                late |= set(regs[:2]) if cls is Cls.MUL64 else ({regs[-1]} if len(regs) == 4 else set())
        elif cls in (Cls.LOAD, Cls.FP_LOAD):
            self.kind = "load"
            self.latency = 2
        elif cls in (Cls.LOAD_DOUBLE, Cls.LOAD_MULTIPLE, Cls.FP_LOAD_MULTIPLE):
            self.kind = "load"
            self.issue = 2 if cls is Cls.LOAD_DOUBLE else max(1, insn.transfers)
            self.latency = 2
        elif cls in (Cls.STORE, Cls.FP_STORE):
            self.kind = "store"
            late |= {r for r in insn.reads if r not in (insn.base, insn.index)}
        elif cls in (Cls.STORE_DOUBLE, Cls.STORE_MULTIPLE, Cls.FP_STORE_MULTIPLE):
            self.kind = "store"
            self.issue = 2 if cls is Cls.STORE_DOUBLE else max(1, insn.transfers)
            late |= {r for r in insn.reads if r not in (insn.base, insn.index)}
        elif cls in (Cls.BRANCH, Cls.TABLE_BRANCH):
            self.kind = "branch"
            if cls is Cls.TABLE_BRANCH:
                self.issue = 2
        elif cls is Cls.IT:
            self.kind = "it"
        elif cls is Cls.NOP:
            self.kind = "nop"
        elif cls in (Cls.FP_ALU, Cls.FP_MUL, Cls.FP_MAC, Cls.FP_MOVE):
            self.latency = 3 if cls is not Cls.FP_MOVE else 1
        elif cls is Cls.FP_DIV:
            self.issue = 14
            self.latency = 14
        elif cls is Cls.SYSTEM:
            self.issue = 2
        if insn.writes_pc and cls not in (Cls.BRANCH, Cls.TABLE_BRANCH):
            self.kind = "pc_load"
        self.reads = tuple(r for r in insn.reads if r != "pc" and r not in late)
        self.late = tuple(late)
        self.writes = tuple(insn.writes)


class CortexM33:
    """Cortex-M33 timing (the `CoreModel` contract of model.py)."""

    name = "cortex-m33"

    def __init__(self) -> None:
        self._info: dict[int, _Info] = {}
        self.reset()

    def reset(self) -> None:
        self.t = 0                          # cycle at which the next instruction may issue
        self.ready: dict[str, int] = {}     # register -> first cycle a consumer may issue
        self.load_ready: dict[str, int] = {}   # load results: a store or MAC accumulator takes them a cycle early
        self.flags_ready = 0
        self.prev_pairable = False          # the previous instruction was 16-bit and left a slot
        self.prev_sets_flags = False
        self.stats = {"dual": 0, "taken": 0}

    def cycles(self, step: Step) -> int:
        insn = step.insn
        info = self._info.get(insn.addr)
        if info is None:
            info = self._info[insn.addr] = _Info(insn)
        t0 = self.t
        if not step.executed and info.kind != "branch":
            # predicated out: a NOP (no operand hazards, no result)
            self.t += 1 + step.fetch_stall
            self.prev_pairable = info.narrow
            self.prev_sets_flags = False
            return self.t - t0
        start = self.t + step.fetch_stall
        ready = self.ready
        for r in info.reads:
            e = ready.get(r, 0)
            if e > start:
                start = e
        for r in info.late:
            e = self.load_ready.get(r, ready.get(r, 0) - 1)
            if e > start:
                start = e
        if info.reads_flags and self.flags_ready > start:
            start = self.flags_ready
        # limited dual issue: the instruction rides in the previous 16-bit instruction's cycle
        kind = info.kind
        paired = False
        if self.prev_pairable and info.narrow and start == self.t:
            if kind == "it" or kind == "nop":
                paired = True
            elif kind == "branch" and not step.taken:
                paired = True
        cost = info.issue
        if kind == "it":
            paired = True                   # IT dual issues with the instruction before it
        if kind in ("branch", "pc_load") and step.taken:
            self.stats["taken"] += 1
            if kind == "branch" and info.narrow and self.prev_pairable and not self.prev_sets_flags \
                    and insn.mnemonic in ("b",):
                cost = 1                    # taken 16-bit branch paired after a flag-free 16-bit op
            else:
                cost = info.issue + 1       # pipeline refill
            if insn.mnemonic in ("bx", "blx") or kind == "pc_load":
                cost += 1                   # indirect: target known at execute
        if info.div and step.values:
            cost = div_cycles(step.values[0], step.values[1], insn.mnemonic == "sdiv")
        stall = sum(a.stall for a in step.accesses)
        if paired and cost <= 1:
            self.stats["dual"] += 1
            t_issue = start
            self.t = start
            self.prev_pairable = False
        else:
            t_issue = start
            self.t = start + cost + stall
            self.prev_pairable = info.narrow and kind not in ("branch", "pc_load") and cost == 1 and not stall
        if step.executed:
            done = t_issue + cost - 1 + info.latency + stall
            for r in info.writes:
                ready[r] = done
                if kind == "load":
                    self.load_ready[r] = done - 1
                else:
                    self.load_ready.pop(r, None)
            if info.sets_flags:
                self.flags_ready = t_issue + cost - 1 + info.latency + (1 if info.flags_late else 0)
        self.prev_sets_flags = info.sets_flags
        return self.t - t0

    def finish(self) -> int:
        return 0
