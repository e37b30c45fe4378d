"""Cortex-M7 core timing: an in-order dual-issue scoreboard (docs/estimate.md, "Cortex-M7").

Arm publishes no cycle table for the Cortex-M7. What this model uses, and where it comes from:

* Cortex-M7 TRM (DDI 0489, r1p2) §1.2/§1.3: six-stage in-order superscalar pipeline that issues
  up to two instructions per cycle; 64-bit instruction fetch; 64-bit AXIM, ITCM and DTCM (DTCM
  as two 32-bit banks) interfaces; dynamic branch prediction with a branch target address cache
  (BTAC); a store buffer.
* LLVM's Cortex-M7 scheduling model (llvm/lib/Target/ARM/ARMScheduleM7.td, contributed by Arm):
  two ALU pipes, two load pipes, one store, one MAC, one branch and one FP pipe; EX1 address
  generation and shift, EX2 ALU and fast load data, EX3 slow (byte/halfword) load data; result
  latencies (ALU 1, word load 1, byte/halfword load 2, MUL/MAC 2 with the accumulator read one
  stage late, SDIV/UDIV 7, FP 3, VMLA/VFMA 6); address and shifted operands read one cycle early
  (at issue); LDRD/STRD, LDM/STM, TBB/TBH and system instructions single-issue; SIMD/extend/
  bitfield instructions only as the older of a pair; mispredict 6 cycles (forward branch).
* Published measurements on silicon: quinapalus.com "Cortex-M7 instruction cycle counts, timings,
  and dual-issue combinations" (STM32H730) and the M7 notes of github.com/jnk0le's in-order
  pipeline templates (STM32H743): one shifted-operand/"hard" modified-immediate instruction per
  cycle; DSP/bitfield ops pair only as the older instruction; no NOP elimination.

Assumptions the sources do not settle (stated in docs/estimate.md): two loads may pair (two load
pipes; DTCM banks and the 64-bit AXI read port serve them); LDRD and LDM move 64 bits per cycle
when 8-byte aligned; the BTAC holds 64 direct-mapped entries and a 2-bit counter per branch gives
the direction; a taken branch the BTAC misses but the decoder sees costs 2 cycles; there is no
return stack (a return hits only if the BTAC holds its last target); a conditional branch may
pair with the instruction setting its flags; memory stalls of loads and fetches block the
in-order pipeline, store stalls are hidden by a 4-entry store buffer until it is full.

`cycles(step)` returns how far the issue cycle advanced with this instruction, so the sum over a
trace is the cycle of the last issue (plus stalls), i.e. the estimated cycles of the run.
"""

from __future__ import annotations

import re

from stm32ai.estimate.isa import Cls, Insn
from stm32ai.estimate.model import Step

# Read stages relative to EX2 (LLVM's ReadAdvance): -1 issue/EX1 (addresses, shifted operands),
# 0 EX2 (ALU inputs), +1 EX3 (MAC accumulator, store data).
ISS, EX2, LATE = -1, 0, 1

MISPREDICT_PENALTY = 6      # ARMScheduleM7.td: "Mispredict cost for forward branches is 6"; jnk0le: 6
MISPREDICT_LATE_FLAGS = 8   # jnk0le (H743): 8 when the flags were set < 3 cycles before the branch
DECODE_REDIRECT = 2         # assumption: taken branch the BTAC missed, found at decode
BTAC_ENTRIES = 64           # assumption (TRM names the BTAC, not its size here)
STORE_BUFFER_SLACK = 4      # assumption: store stalls hidden until 4 are outstanding
DIV_CYCLES = 7              # ARMScheduleM7.td WriteDIV latency (single issue, stalls for it)
FP_DIV_CYCLES = 16          # ARMScheduleM7.td WriteFPDIV32 / WriteFPSQRT32

# Instructions that need the SIMD/bitfield unit (slot 0 only, one per cycle).
_SIMD = re.compile(r"^(?:[su]xt(?:a)?(?:b|h|b16)|[su]bfx|bfi|bfc|rev(?:16|sh)?|rbit|clz|pkh(?:bt|tb)|"
                   r"(?:[su]|sh|uh|q|uq)(?:add|sub)(?:8|16)|(?:[su]|sh|uh|q|uq)(?:asx|sax)|sel|"
                   r"q(?:d)?(?:add|sub)|[su]sat(?:16)?|usada?8)$")
_BYTE_HALF_LOAD = re.compile(r"^ldr(?:s?b|s?h|exb|exh)(?:t)?$")
_SHIFT_OPERAND = re.compile(r",\s*(?:lsl|lsr|asr|ror)\s+#|,\s*rrx\b")
_SHIFT_MNEMONICS = {"lsl", "lsr", "asr", "ror", "rrx"}
_IMM = re.compile(r"#(-?(?:0x[0-9a-f]+|\d+))\s*$")
_PLAIN_IMM_OK = {"movw", "movt", "mov", "mvn"}

# units: indices into the per-cycle resource vector
_ALU, _LOAD, _STORE, _MAC, _BRANCH, _SHIFT, _SIMD_U, _FP = range(8)
_CAPACITY = (2, 2, 1, 1, 1, 1, 1, 1)


class _Info:
    """Everything the scoreboard needs about one instruction, computed once per address."""

    __slots__ = ("units", "latency", "reads", "writes", "wb", "single", "older_only", "occupancy",
                 "is_branch", "cond", "sets_flags", "reads_flags", "flags_adv", "mem_beats", "load",
                 "store", "mac", "mul_ops")

    def __init__(self, insn: Insn) -> None:
        m, cls, ops = insn.mnemonic, insn.cls, insn.op_str.lower()
        self.units: tuple[int, ...] = ()
        self.latency = 1
        self.single = False
        self.older_only = False
        self.occupancy = 1           # cycles the issue stage is held (LDM beats, DIV)
        self.is_branch = insn.writes_pc
        self.cond = insn.conditional
        self.sets_flags = insn.sets_flags or m in ("cmp", "cmn", "tst", "teq")
        self.reads_flags = self.cond or m in ("adc", "sbc", "rrx")
        self.flags_adv = EX2
        self.mem_beats = 0           # 64-bit beats of LDRD/LDM/STRD/STM (alignment decides)
        self.load = False
        self.store = False
        self.mac = False
        self.mul_ops: tuple[str, ...] = ()   # MAC operands that cannot take a load result a cycle old
        addr_regs = {r for r in (insn.base, insn.index) if r}
        reads: dict[str, int] = {r: EX2 for r in insn.reads if r != "pc"}
        self.wb = False              # base register write-back (bypassed out of EX1)
        if cls in (Cls.ALU, Cls.NOP, Cls.IT):
            if cls is Cls.ALU:
                self.units = (_ALU,)
                if _SIMD.match(m):
                    self.units = (_ALU, _SIMD_U)
                    self.older_only = True
                    if m.startswith(("q", "uq", "usad")) or "sat" in m:
                        self.latency = 2
                    if m.startswith(("rev", "rbit", "ubfx", "sbfx", "ssat", "usat", "qd")):
                        reads = {r: ISS for r in reads}
                elif m in ("bfi", "bfc"):
                    self.units = (_ALU, _SHIFT)
                    self.older_only = True
                elif _SHIFT_OPERAND.search(ops) and m not in _SHIFT_MNEMONICS:
                    self.units = (_ALU, _SHIFT)
                    shifted = _shifted_register(ops)
                    if shifted in reads:
                        reads[shifted] = ISS
                    if m in ("cmp", "cmn", "tst", "teq"):
                        self.latency = 2
                elif m not in _PLAIN_IMM_OK and _hard_immediate(ops):
                    self.units = (_ALU, _SHIFT)
        elif cls is Cls.MUL or cls is Cls.MUL64:
            self.units = (_MAC,)
            self.mac = True
            self.latency = 2
            acc = _accumulators(insn, m)
            for r in acc:
                reads[r] = LATE
            self.mul_ops = tuple(r for r in reads if r not in acc)
        elif cls is Cls.DIV:
            self.units = (_ALU,)
            self.single = True
            self.occupancy = DIV_CYCLES
            self.latency = DIV_CYCLES
        elif cls in (Cls.LOAD, Cls.LOAD_DOUBLE, Cls.LOAD_MULTIPLE, Cls.TABLE_BRANCH, Cls.FP_LOAD,
                     Cls.FP_LOAD_MULTIPLE):
            self.load = True
            self.units = (_LOAD,)
            self.latency = 2 if _BYTE_HALF_LOAD.match(m) else 1
            for r in addr_regs:
                reads[r] = ISS
            if cls in (Cls.LOAD_DOUBLE, Cls.LOAD_MULTIPLE, Cls.FP_LOAD_MULTIPLE):
                self.single = True
                self.mem_beats = max(1, (insn.transfers + 1) // 2)
            elif cls is Cls.TABLE_BRANCH:
                self.single = True
                self.occupancy = 2   # ARMScheduleM7.td: TBB/TBH take two cycles to issue
                self.latency = 2
            elif cls is Cls.FP_LOAD:
                self.units = (_LOAD, _FP)
        elif cls in (Cls.STORE, Cls.STORE_DOUBLE, Cls.STORE_MULTIPLE, Cls.FP_STORE, Cls.FP_STORE_MULTIPLE):
            self.units = (_STORE,)
            self.store = True
            self.latency = 1
            for r in reads:
                reads[r] = ISS if r in addr_regs else LATE
            if cls in (Cls.STORE_DOUBLE, Cls.STORE_MULTIPLE, Cls.FP_STORE_MULTIPLE):
                self.single = True
                self.mem_beats = max(1, (insn.transfers + 1) // 2)
            elif cls is Cls.FP_STORE:
                self.units = (_STORE, _FP)
        elif cls is Cls.BRANCH:
            self.units = (_BRANCH,)
            self.flags_adv = LATE    # assumption: CMP/SUBS + Bcc pair (the branch resolves later)
            if m in ("bx", "blx") or m in ("cbz", "cbnz"):
                reads = {r: ISS for r in reads}
        elif cls in (Cls.FP_ALU, Cls.FP_MUL, Cls.FP_MOVE):
            self.units = (_FP,)
            self.latency = 3
        elif cls is Cls.FP_MAC:
            self.units = (_FP,)
            self.latency = 6
        elif cls is Cls.FP_DIV:
            self.units = (_FP,)
            self.single = True
            self.latency = FP_DIV_CYCLES
        elif cls is Cls.SYSTEM:
            self.single = True
            self.latency = 3         # ARMScheduleM7.td M7NonGeneralPurpose
        if insn.is_memory and insn.base and insn.base in insn.writes and (
                "!" in ops or cls in (Cls.LOAD_MULTIPLE, Cls.STORE_MULTIPLE, Cls.FP_LOAD_MULTIPLE,
                                      Cls.FP_STORE_MULTIPLE) or re.search(r"\],\s*#", ops)):
            self.wb = True
        if self.is_branch and cls is not Cls.BRANCH:
            self.units = (*self.units, _BRANCH)
        self.reads = tuple(reads.items())
        self.writes = tuple(insn.writes)


_ALIASES = {"sb": "r9", "sl": "r10", "fp": "r11", "ip": "r12"}   # capstone's op_str names; Insn uses r9-r12


def _regs(text: str) -> list[str]:
    """Core registers named in (part of) an operand string, in order, as Insn names them."""
    return [_ALIASES.get(r, r) for r in re.findall(r"\b(r\d+|sp|lr|ip|fp|sb|sl)\b", text)]


def _shifted_register(ops: str) -> str | None:
    """'r0, r1, r2, lsl #2' -> 'r2': the register operand the barrel shifter takes."""
    regs = _regs(_SHIFT_OPERAND.split(ops)[0])
    return regs[-1] if regs else None


def _hard_immediate(ops: str) -> bool:
    """A Thumb-2 modified immediate that is neither 8 bits nor a replicated byte pattern needs the
    shifter (published M7 measurements: it pairs like a shifted operand)."""
    mm = _IMM.search(ops)
    if not mm:
        return False
    v = int(mm.group(1), 0) & 0xFFFFFFFF
    if v <= 0xFF:
        return False
    b0, b1 = v & 0xFF, (v >> 8) & 0xFF
    return v not in (b0 * 0x00010001, b0 * 0x01010101, (b1 << 8) * 0x00010001)


def _accumulators(insn: Insn, m: str) -> tuple[str, ...]:
    """Registers a MAC reads as its accumulator (read one stage late)."""
    regs = _regs(insn.op_str.lower())
    if m in ("mla", "mls", "smlad", "smladx", "smlsd", "smlsdx", "smmla", "smmlar", "smmls", "smmlsr",
             "smlawb", "smlawt", "usada8") or (m.startswith("smla") and len(m) == 6):
        return (regs[-1],) if len(regs) == 4 else ()
    if m in ("smlal", "umlal", "umaal", "smlald", "smlaldx", "smlsld", "smlsldx") or (
            m.startswith("smlal") and len(m) == 7):
        return tuple(regs[:2])
    return ()


class CortexM7:
    """Cortex-M7 timing (the `CoreModel` contract of model.py)."""

    name = "cortex-m7"

    def __init__(self, btac_entries: int = BTAC_ENTRIES, mispredict: int = MISPREDICT_PENALTY) -> None:
        self.btac_entries = btac_entries
        self.mispredict = mispredict
        self._info: dict[int, _Info] = {}
        self.reset()

    def reset(self) -> None:
        self.t = -1                       # issue cycle of the current group
        self.slots = 0                    # instructions in the current group
        self.used = [0] * 8               # units used in the current group
        self.closed = True                # the current group takes no more instructions
        self.hold = 0                     # earliest issue cycle (occupancy, stalls, redirects)
        self.ready: dict[str, int] = {}   # register -> cycle its value reaches EX2 consumers
        self.pending: tuple[Insn, bool, int] | None = None   # branch awaiting its successor
        self.counters: dict[int, int] = {}
        self.btac: dict[int, tuple[int, int]] = {}
        self.store_busy = 0
        self.flags_set = -99              # issue cycle of the last flag-setting instruction
        self.from_load: set[str] = set()  # registers whose last writer was a load
        self.group_bank = -1              # word bank (address bit 2) of a load in the group
        self.group_mac = self.group_store = False
        self.branch_slot = 0
        self.stats_detail: dict[str, int] | None = None   # set to {} for a breakdown (slower)
        self.stats = {"mispredicts": 0, "redirects": 0, "branches": 0, "dual": 0, "stall_mem": 0}

    # -- branch prediction -------------------------------------------------------------------
    def _resolve(self, target: int) -> None:
        """The instruction after a branch arrived: was the branch predicted?"""
        insn, taken, t_branch = self.pending
        self.pending = None
        self.stats["branches"] += 1
        a = insn.addr
        conditional = insn.conditional or insn.mnemonic in ("cbz", "cbnz")
        direct = insn.mnemonic in ("b", "bl", "cbz", "cbnz")
        idx = (a >> 1) % self.btac_entries
        entry = self.btac.get(idx)
        btac_target = entry[1] if entry is not None and entry[0] == a else None
        if conditional:
            c = self.counters.get(a)
            if c is None:
                c = 2 if (direct and _branch_offset_backward(insn)) else 1
            predict_taken = c >= 2
            self.counters[a] = min(c + 1, 3) if taken else max(c - 1, 0)
        else:
            predict_taken = True
        penalty = 0
        if taken:
            if predict_taken and btac_target == target:
                penalty = 0
            elif direct and (predict_taken or not conditional):
                penalty = DECODE_REDIRECT        # the decoder knows the target
                self.stats["redirects"] += 1
            else:
                penalty = self._mispredict(conditional, t_branch)
            self.btac[idx] = (a, target)
        elif predict_taken and btac_target is not None:
            penalty = self._mispredict(conditional, t_branch)   # fetched the predicted target for nothing
        if taken and penalty == 0 and self.branch_slot == 1 and self.t == t_branch:
            # a predicted taken branch pairs with one instruction at its target (jnk0le, H743)
            self.closed = False
            return
        self.hold = max(self.hold, t_branch + 1 + penalty)
        if taken:
            self.closed = True

    def _mispredict(self, conditional: bool, t_branch: int) -> int:
        self.stats["mispredicts"] += 1
        if conditional and t_branch - self.flags_set < 3:
            return max(self.mispredict, MISPREDICT_LATE_FLAGS)
        return self.mispredict

    # -- the scoreboard ----------------------------------------------------------------------
    def cycles(self, step: Step) -> int:
        insn = step.insn
        info = self._info.get(insn.addr)
        if info is None:
            info = self._info[insn.addr] = _Info(insn)
        if self.pending is not None:
            p = self.pending
            self._resolve(insn.addr if p[1] else p[0].addr + p[0].size)
        t0 = self.t
        ready = self.ready
        earliest = self.hold
        for r, adv in info.reads:
            e = ready.get(r, -99) - adv
            if e > earliest:
                earliest = e
        if info.mul_ops:
            for r in info.mul_ops:
                if r in self.from_load:
                    e = ready.get(r, -99) + 1
                    if e > earliest:
                        earliest = e
        if info.reads_flags:
            e = ready.get("flags", -99) - info.flags_adv
            if e > earliest:
                earliest = e
        if step.fetch_stall:
            earliest = max(earliest, self.t + 1) + step.fetch_stall
        can_pair = (not self.closed and self.slots == 1 and not info.single and not info.older_only
                    and earliest <= self.t)
        bank = -1
        if info.load and step.accesses:
            bank = (step.accesses[0].addr >> 2) & 1
        if can_pair:
            used = self.used
            for u in info.units:
                if used[u] >= _CAPACITY[u]:
                    can_pair = False
                    break
            # two loads only to different word banks (DTCM/D-cache even/odd words); a MAC never
            # pairs with a store (jnk0le, H743)
            if (bank >= 0 and bank == self.group_bank) or (info.mac and self.group_store) or \
                    (info.store and self.group_mac):
                can_pair = False
        if can_pair:
            t = self.t
            self.slots = 2
            self.stats["dual"] += 1
        else:
            t = max(self.t + 1, earliest)
            self.group_bank = -1
            self.group_mac = self.group_store = False
            if self.stats_detail is not None:
                d = self.stats_detail
                why = ("gap" if earliest > self.t + 1 else "closed" if self.closed or self.slots != 1 else
                       "single" if info.single else "older_only" if info.older_only else
                       "dep" if earliest > self.t else "unit")
                d[why] = d.get(why, 0) + 1
                if earliest > self.t + 1:
                    key = f"gap:{insn.cls.value}"
                    d[key] = d.get(key, 0) + earliest - self.t - 1
            self.t = t
            self.slots = 1
            self.used = [0] * 8
        for u in info.units:
            self.used[u] += 1
        if bank >= 0:
            self.group_bank = bank
        self.group_mac |= info.mac
        self.group_store |= info.store
        self.closed = info.single or self.slots == 2
        # memory: beats of LDRD/LDM/STRD/STM, stalls from the memory system
        occ = info.occupancy
        stall = 0
        if step.accesses:
            if info.mem_beats:
                a0 = step.accesses[0].addr
                nbytes = sum(a.size for a in step.accesses)
                occ = max(occ, ((a0 & 7) + nbytes + 7) // 8)
            if info.load or not step.accesses[0].write:
                stall = sum(a.stall for a in step.accesses if not a.write)
                wstall = sum(a.stall for a in step.accesses if a.write)
            else:
                wstall = sum(a.stall for a in step.accesses)
            if wstall:
                self.store_busy = max(self.store_busy, t) + wstall
                over = self.store_busy - t - STORE_BUFFER_SLACK
                if over > 0:
                    stall += over
        if stall:
            self.stats["stall_mem"] += stall
        if occ > 1 or stall:
            self.hold = max(self.hold, t + occ + stall)
            self.closed = True
        if step.executed:
            done = t + info.latency + (occ - 1 if info.load else 0) + stall
            for r in info.writes:
                ready[r] = done
            if info.load:
                self.from_load.update(info.writes)
            elif self.from_load:
                self.from_load.difference_update(info.writes)
            if info.wb and insn.base:
                ready[insn.base] = t + 1       # base update bypassed out of EX1
            if info.sets_flags:
                ready["flags"] = t + info.latency
                self.flags_set = t
        if info.is_branch:
            self.pending = (insn, step.taken, t + (occ - 1 if info.load else 0) + stall)
            self.branch_slot = self.slots
            self.closed = True
        return self.t - t0 if self.t > t0 else 0

    def finish(self) -> int:
        """Cycles still owed at the end of a trace (a branch without successor, an occupied
        issue stage); the trace runner adds them once."""
        return max(0, self.hold - 1 - self.t)


def _branch_offset_backward(insn: Insn) -> bool:
    mm = re.search(r"#(0x[0-9a-f]+|\d+)\s*$", insn.op_str.lower())
    return bool(mm) and int(mm.group(1), 0) < insn.addr
