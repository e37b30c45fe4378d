"""Cortex-M0+ core timing, from the Cortex-M0+ Technical Reference Manual (Arm DDI 0484C) §3.3,
"Instruction set summary" (Table 3-1, the cycle count of every Armv6-M instruction), for the
STM32G0/C0 configuration: the single-cycle multiplier (the G0/C0 reference manuals and the issue
name it) and a two-stage pipeline with one AHB-Lite master.

What it charges (cycles at zero wait states):
- data processing, moves, shifts, extends, REV, ADR, CPS, NOP, SEV, YIELD: 1; MULS: 1 (the fast
  multiplier; 32 with the small one, which these parts do not use); ADD/MOV to the PC: 2.
- loads and stores of one register (LDR/LDRB/LDRH/LDRSB/LDRSH/STR/STRB/STRH, literal loads
  included): 2. LDM/STM, PUSH: 1 + N; POP: 1 + N, 3 + N when it loads the PC.
- branches: B<cond> 1 when not taken, 2 when taken; B 2; BL 3; BX, BLX 2.
- MRS, MSR, DMB, DSB, ISB: 3 (Table 3-1, "4" for MSR on some revisions: not on the hot path);
  WFI, WFE: 2; other system instructions 1.
Memory: the M0+ has one bus for fetches and data and no store buffer, so the fetch stall and
every data stall the memory system returns (reads and writes) add to the instruction.
Not modelled: the fetch of two 16-bit instructions per 32-bit word (the memory system charges
fetches per flash line); the I/O port's single-cycle accesses (not used by the kernels).
"""

from __future__ import annotations

from stm32ai.estimate.isa import Cls, Insn
from stm32ai.estimate.model import Step

_SYSTEM_3 = {"mrs", "msr", "dmb", "dsb", "isb"}
_SYSTEM_2 = {"wfi", "wfe"}


def base_cycles(insn: Insn, taken: bool) -> int:
    """Table 3-1's cycles for one executed instruction (zero wait states)."""
    cls, m = insn.cls, insn.mnemonic
    if cls in (Cls.LOAD, Cls.STORE):
        return 2
    if cls in (Cls.LOAD_MULTIPLE, Cls.STORE_MULTIPLE):
        return (3 if insn.writes_pc else 1) + insn.transfers
    if cls == Cls.BRANCH:
        if m == "bl":
            return 3
        if m in ("bx", "blx") or (m == "b" and not insn.conditional):
            return 2
        return 2 if taken else 1                  # B<cond>
    if cls == Cls.SYSTEM:
        return 3 if m in _SYSTEM_3 else 2 if m in _SYSTEM_2 else 1
    if cls == Cls.ALU and insn.writes_pc:
        return 2
    return 1                                      # ALU, MULS (single-cycle), NOP


class CortexM0Plus:
    """Cortex-M0+ timing (module docstring). Stateless apart from a per-address cache."""

    name = "cortex-m0plus"

    def __init__(self) -> None:
        self._fixed: dict[int, int] = {}
        self.reset()

    def reset(self) -> None:
        self._fixed.clear()

    def cycles(self, step: Step) -> int:
        insn = step.insn
        if not step.executed:                    # a failed B<cond>
            return 1 + step.fetch_stall
        if insn.cls == Cls.BRANCH:
            c = base_cycles(insn, step.taken)
        else:
            c = self._fixed.get(insn.addr)
            if c is None:
                c = self._fixed[insn.addr] = base_cycles(insn, False)
        c += step.fetch_stall
        for a in step.accesses:                  # one AHB-Lite master, no store buffer
            c += a.stall
        return c
