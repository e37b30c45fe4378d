"""Cortex-M4 core timing, from the Cortex-M4 Technical Reference Manual (Arm DDI 0439B, r0p1):
§3.3.1 "Cortex-M4 instruction timings" (Table 3-1), §3.3.2 "Load/store timings", and §7.2.3
"FPU instruction timings" (Table 7-1 of the FPU chapter).

What it charges (cycles at zero wait states; memory stalls come on top, see `cycles`):
- data processing, moves, shifts, extends, saturation, SIMD add/sub, IT, NOP: 1. Writing the
  PC (MOV/ADD pc): 1 + P.
- MUL, MLA, MLS, the DSP multiplies and MACs (SMLAD, SMLABB, SMULWB, ...) and the 64-bit
  multiplies (UMULL, SMLAL, SMLALD, ...): 1 (Table 3-1: the M4's single-cycle MAC).
- SDIV/UDIV: 2 to 12 (Table 3-1), early termination on the operands: here 2 + ceil(10 q / 32)
  with q the quotient's significant bits, so 2 when |Rn| < |Rm| and 12 for a 32-bit quotient
  (an approximation between the TRM's end points; docs/estimate.md).
- a single load (LDR, LDRB/H, LDRSB/SH, LDREX): 2; pipelined to 1 when it follows a single
  load and its address registers do not use that load's results (§3.3.2: "if the next
  instruction is an LDR or STR, and the destination of the first LDR is not used to compute
  the address for the next instruction, then one cycle is removed"). LDR into the PC: 2 + 3.
- a single store: STR with an immediate offset 1 (§3.3.2: "STR Rx,[Ry,#imm] is always one
  cycle"); with a register offset 2, or 1 when pipelined after a load; nothing pipelines after
  a store (§3.3.2).
- LDRD/STRD: 3 ("the two words are pipelined together ... three cycles when not stalled"),
  never pipelined with neighbours. LDM/STM/PUSH/POP: 1 + N ("a three element LDM takes
  2+1+1"), never pipelined with neighbours; with the PC in the list: + 3.
- unaligned accesses (§3.3.2): halfword-aligned word + 1, byte-aligned word + 2, byte-aligned
  halfword + 1.
- branches: taken B, BL, BX, BLX, CBZ/CBNZ, Bcc: 1 + P; not taken: 1. P is the pipeline
  refill, "1 to 3 depending on the alignment and width of the target instruction, and whether
  the processor manages to speculate the address early". Which branches are speculated early
  is the Cortex-M3 TRM's (DDI 0337G) Table 15-3, "Branches and stages evaluated by the
  processor" (the M4 has the same 3-stage pipeline with branch speculation): B, B<cond>, BL,
  and BX/BLX/MOV PC from LR when the previous instruction does not write LR issue their target
  at decode: P = 1; BX/BLX Rm, CBZ/CBNZ, ADD/MOV PC at execute: P = 2. One more when the target
  is a 32-bit instruction at a halfword (not word) address (two fetches). A load into
  the PC refills in 3 (§3.3.2: LDR PC "at least two cycles for the load, and three cycles for
  the pipeline reload"). TBB/TBH: 6 (§3.3.2: "two cycles for the load, one cycle for the add,
  and three cycles for the pipeline reload").
- an instruction whose condition fails: 1.
- FPU (Table 7-1): VADD/VSUB/VMUL/VNMUL/VABS/VNEG/VCMP/VCVT/VMOV: 1; VMLA/VMLS/VNMLA/VNMLS
  and VFMA/VFMS/VFNMA/VFNMS: 3; VDIV/VSQRT: 14; VLDR/VSTR: 2; VLDM/VSTM/VPUSH/VPOP: 1 + N;
  VMOV between core and FP registers, VMRS/VMSR: 1 (two core registers: 2).
- barriers (DMB/DSB/ISB: 1 + B) 2; other system instructions 1.
Memory: the fetch stall and every data-read stall the memory system returns are added (the
M4 waits on its AHB data phase); write stalls are not (the store buffer, §3.3.2 "A STR or STRH
cannot delay the processor because of the store buffer").
Not modelled: "LDR Rx,[PC,#imm] might add a cycle because of contention with the fetch unit";
the early-speculation case P = 1; interrupt continuation of LDM/STM.
"""

from __future__ import annotations

from stm32ai.estimate.isa import Cls, Insn
from stm32ai.estimate.model import Step

P_DECODE = 1          # refill after a branch whose target is issued at decode (B, Bcc, BL, BX LR)
P_EXECUTE = 2         # refill after a branch resolved in execute (BX Rm, BLX Rm, CBZ, ADD/MOV pc)
P_LOAD_PC = 3         # refill after a load into the PC (LDR pc, POP {..pc}, LDM {..pc})

# per-instruction kinds (precomputed once per address)
_K_FIXED, _K_LOAD, _K_STORE, _K_DOUBLE, _K_MULTIPLE, _K_BRANCH, _K_TABLE, _K_DIV, _K_FP_MULTIPLE = range(9)

_FIXED: dict[Cls, int] = {
    Cls.ALU: 1, Cls.MUL: 1, Cls.MUL64: 1, Cls.IT: 1, Cls.NOP: 1, Cls.SYSTEM: 1,
    Cls.FP_ALU: 1, Cls.FP_MUL: 1, Cls.FP_MAC: 3, Cls.FP_DIV: 14, Cls.FP_LOAD: 2, Cls.FP_STORE: 2,
    Cls.FP_MOVE: 1,
}
_BARRIERS = {"dmb", "dsb", "isb"}


def div_cycles(n: int, m: int, signed: bool) -> int:
    """SDIV/UDIV cycles from the operands (2..12, Cortex-M4 TRM Table 3-1; early termination
    modelled as linear in the quotient's significant bits)."""
    if signed:
        n = abs(n - (1 << 32) if n & 0x80000000 else n)
        m = abs(m - (1 << 32) if m & 0x80000000 else m)
    if m == 0 or n < m:
        return 2
    q = n.bit_length() - m.bit_length() + 1
    return 2 + -(-10 * q // 32)


class CortexM4:
    """Cortex-M4 timing (module docstring). Stateful: load pipelining looks at the previous
    instruction."""

    name = "cortex-m4"

    def __init__(self) -> None:
        self._info: dict[int, tuple[int, int, frozenset[str], frozenset[str] | None, int, bool]] = {}
        self.reset()

    def reset(self) -> None:
        self._prev_load: frozenset[str] | None = None   # registers written by a pipelinable previous load
        self._prev_writes_lr = False
        self._info.clear()                              # per-address precomputation (a new image may follow)

    def _precompute(self, insn: Insn) -> tuple[int, int, frozenset[str], frozenset[str] | None, int, bool]:
        """(kind, base cycles, address registers, registers a pipelinable load writes, taken
        penalty, store has an immediate offset)."""
        cls, m = insn.cls, insn.mnemonic
        addr_regs = frozenset(r for r in (insn.base, insn.index) if r)
        pc_pen = P_LOAD_PC if insn.writes_pc else 0
        if cls == Cls.LOAD:
            if insn.transfers == 0:                      # PLD/PLI: a hint, one cycle
                return (_K_FIXED, 1, addr_regs, None, 0, False)
            return (_K_LOAD, 2, addr_regs, insn.writes, pc_pen, False)
        if cls == Cls.STORE:
            pipelinable = m.startswith("strex")          # STREX is pipelined like an LDR (§3.3.2)
            return (_K_STORE, 2 if insn.index else 1, addr_regs, insn.writes if pipelinable else None, 0,
                    insn.index is None)
        if cls in (Cls.LOAD_DOUBLE, Cls.STORE_DOUBLE):
            return (_K_DOUBLE, 3, addr_regs, None, 0, False)
        if cls in (Cls.LOAD_MULTIPLE, Cls.STORE_MULTIPLE):
            return (_K_MULTIPLE, 1 + insn.transfers, addr_regs, None, pc_pen, False)
        if cls in (Cls.FP_LOAD_MULTIPLE, Cls.FP_STORE_MULTIPLE):
            return (_K_FP_MULTIPLE, 1 + insn.transfers, addr_regs, None, 0, False)
        if cls == Cls.BRANCH:
            # Cortex-M3 TRM (DDI 0337G) Table 15-3, the front end the M4 shares: B, B<cond>, BL
            # issue their target at decode; BX/BLX LR too unless the previous instruction writes
            # LR (flag: True); BX/BLX Rm and CBZ/CBNZ at execute
            if m in ("b", "bl"):
                return (_K_BRANCH, 1, addr_regs, None, P_DECODE, False)
            if m in ("bx", "blx") and insn.op_str.strip() == "lr":
                return (_K_BRANCH, 1, addr_regs, None, P_DECODE, True)
            return (_K_BRANCH, 1, addr_regs, None, P_EXECUTE, False)
        if cls == Cls.TABLE_BRANCH:
            return (_K_TABLE, 6, addr_regs, None, 0, False)
        if cls == Cls.DIV:
            return (_K_DIV, 2, addr_regs, None, 0, m == "sdiv")
        if cls == Cls.SYSTEM and m in _BARRIERS:
            return (_K_FIXED, 2, addr_regs, None, 0, False)
        if cls == Cls.FP_MOVE and insn.op_str.count("r") >= 2 and m == "vmov" and len(insn.writes | insn.reads) >= 2:
            return (_K_FIXED, 2, addr_regs, None, 0, False)   # VMOV two core registers <-> D/S pair
        if cls in (Cls.FP_LOAD, Cls.FP_STORE) and ".64" in insn.op_str or (cls in (Cls.FP_LOAD, Cls.FP_STORE)
                                                                          and insn.op_str.lstrip().startswith("d")):
            return (_K_FIXED, 3, addr_regs, None, 0, False)   # VLDR.64/VSTR.64: two words
        base = _FIXED.get(cls, 1)
        if cls == Cls.ALU and insn.writes_pc:
            if m == "mov" and insn.op_str.replace(" ", "") == "pc,lr":       # Table 15-3: decode
                return (_K_BRANCH, 1, addr_regs, None, P_DECODE, True)
            return (_K_BRANCH, 1, addr_regs, None, P_EXECUTE, False)
        return (_K_FIXED, base, addr_regs, None, 0, False)

    def cycles(self, step: Step) -> int:
        insn = step.insn
        info = self._info.get(insn.addr)
        if info is None:
            info = self._info[insn.addr] = self._precompute(insn)
        kind, c, addr_regs, load_dest, pen, flag = info
        prev = self._prev_load
        self._prev_load = None
        prev_lr = self._prev_writes_lr
        self._prev_writes_lr = "lr" in insn.writes
        c += step.fetch_stall
        if not step.executed:
            return 1 + step.fetch_stall
        if kind == _K_FIXED:
            pass
        elif kind == _K_LOAD:
            if prev is not None and not (addr_regs & prev):
                c -= 1
            self._prev_load = load_dest
            if step.taken:
                c += pen
            for a in step.accesses:
                c += a.stall + _unaligned(a.addr, a.size)
        elif kind == _K_STORE:
            if prev is not None and not flag and not (addr_regs & prev):
                c -= 1
            self._prev_load = load_dest
            for a in step.accesses:
                c += _unaligned(a.addr, a.size)
        elif kind == _K_BRANCH:
            if step.taken:
                if flag and prev_lr:                  # BX LR right after an LR write: execute time
                    pen = P_EXECUTE
                c += pen + (step.next_size == 4 and step.next_addr & 2 == 2)
        elif kind in (_K_DOUBLE, _K_MULTIPLE, _K_FP_MULTIPLE):
            for a in step.accesses:
                if not a.write:
                    c += a.stall
            if step.taken:
                c += pen
        elif kind == _K_TABLE:
            for a in step.accesses:
                c += a.stall
        elif kind == _K_DIV:
            if len(step.values) == 2:
                c = div_cycles(step.values[0], step.values[1], flag) + step.fetch_stall
        if kind == _K_FIXED and step.accesses:              # FP loads/stores
            for a in step.accesses:
                if not a.write:
                    c += a.stall
        return c


def _unaligned(addr: int, size: int) -> int:
    if size == 4:
        return 0 if not addr & 3 else (1 if not addr & 1 else 2)
    if size == 2:
        return addr & 1
    return 0
