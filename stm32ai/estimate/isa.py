"""Static decode of Thumb/Thumb-2 code (ARMv6-M, ARMv7E-M, ARMv8-M Mainline) into `Insn` records.

Everything a timing model needs that does not depend on register values is computed here once
per address: the timing class, the registers read and written, the address registers of a
memory instruction and how many words it moves. The firmware's ELF is decoded region by region
from its `$t`/`$d` mapping symbols, so literal pools are never read as code and IT blocks are
decoded in sequence (capstone tracks the IT state and gives each instruction its condition).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import capstone
from capstone import arm as A


class Cls(str, Enum):
    """Timing classes (the rows of the cores' instruction timing tables)."""

    ALU = "alu"                  # data processing, moves, shifts, extends, saturation, SIMD add/sub
    MUL = "mul"                  # 32-bit result multiplies and MACs (MUL, MLA, SMLAD, SMULBB, ...)
    MUL64 = "mul64"              # 64-bit result multiplies (UMULL, SMLAL, SMLALD, UMAAL, ...)
    DIV = "div"                  # SDIV, UDIV
    LOAD = "load"                # single load (LDR, LDRB, LDRSH, LDREX, ...)
    STORE = "store"              # single store
    LOAD_DOUBLE = "load_double"  # LDRD
    STORE_DOUBLE = "store_double"  # STRD
    LOAD_MULTIPLE = "load_multiple"    # LDM, POP
    STORE_MULTIPLE = "store_multiple"  # STM, PUSH
    BRANCH = "branch"            # B, BL, BX, BLX, CBZ, CBNZ
    TABLE_BRANCH = "table_branch"  # TBB, TBH (a load and a branch)
    IT = "it"
    NOP = "nop"
    FP_ALU = "fp_alu"            # VADD, VSUB, VABS, VNEG, VCMP, VCVT, VMOV between FP registers
    FP_MUL = "fp_mul"            # VMUL, VNMUL
    FP_MAC = "fp_mac"            # VMLA, VMLS, VFMA, VFMS, ...
    FP_DIV = "fp_div"            # VDIV, VSQRT
    FP_LOAD = "fp_load"          # VLDR
    FP_STORE = "fp_store"        # VSTR
    FP_LOAD_MULTIPLE = "fp_load_multiple"    # VLDM, VPOP
    FP_STORE_MULTIPLE = "fp_store_multiple"  # VSTM, VPUSH
    FP_MOVE = "fp_move"          # VMOV core <-> FP, VMRS, VMSR
    SYSTEM = "system"            # MRS, MSR, CPS, barriers, WFI, SVC, BKPT, ...


@dataclass(frozen=True, slots=True)
class Insn:
    addr: int
    size: int                    # 2 or 4 bytes
    mnemonic: str                # base mnemonic, lower case, no condition or .w/.n suffix ("ldr", "smlad")
    op_str: str
    cls: Cls
    reads: frozenset[str]        # core registers read ("r0".."r12", "sp", "lr", "pc")
    writes: frozenset[str]       # core registers written
    base: str | None = None      # address base register of a memory instruction
    index: str | None = None     # address offset register, if any
    transfers: int = 0           # words (or FP registers) moved by a memory instruction
    writes_pc: bool = False      # a branch, or a load/pop into pc
    cond: int = A.ARM_CC_AL      # capstone condition code; A.ARM_CC_AL when unconditional
    sets_flags: bool = False

    @property
    def conditional(self) -> bool:
        return self.cond not in (A.ARM_CC_AL, A.ARM_CC_INVALID)

    @property
    def is_memory(self) -> bool:
        return self.transfers > 0


_MUL = {"mul", "mla", "mls", "smmul", "smmulr", "smmla", "smmlar", "smmls", "smmlsr", "smuad", "smuadx",
        "smusd", "smusdx", "smlad", "smladx", "smlsd", "smlsdx", "smlawb", "smlawt", "smulwb", "smulwt",
        "usad8", "usada8"}
_MUL_XY = ("smul", "smla")  # SMULBB.., SMLABB.. (16x16) are 32-bit result multiplies
_MUL64 = {"umull", "smull", "umlal", "smlal", "umaal", "smlald", "smlaldx", "smlsld", "smlsldx",
          "smlalbb", "smlalbt", "smlaltb", "smlaltt"}
_DIV = {"sdiv", "udiv"}
_BRANCH = {"b", "bl", "bx", "blx", "cbz", "cbnz"}
_TABLE_BRANCH = {"tbb", "tbh"}
_LOAD_MULTIPLE = {"ldm", "ldmia", "ldmdb", "ldmfd", "ldmea", "pop"}
_STORE_MULTIPLE = {"stm", "stmia", "stmdb", "stmea", "stmfd", "push"}
_FP_MUL = {"vmul", "vnmul"}
_FP_MAC = {"vmla", "vmls", "vnmla", "vnmls", "vfma", "vfms", "vfnma", "vfnms"}
_FP_DIV = {"vdiv", "vsqrt"}
_FP_LOAD_MULTIPLE = {"vldm", "vldmia", "vldmdb", "vpop"}
_FP_STORE_MULTIPLE = {"vstm", "vstmia", "vstmdb", "vpush"}
_FP_MOVE = {"vmrs", "vmsr"}
_SYSTEM = {"mrs", "msr", "cpsie", "cpsid", "dsb", "dmb", "isb", "wfi", "wfe", "sev", "svc", "bkpt", "udf",
           "yield", "clrex"}
_CORE_REGS = {f"r{i}" for i in range(13)} | {"sp", "lr", "pc"}
# capstone names r9-r12 by their APCS roles; Insn always uses r9..r12
_ALIASES = {"sb": "r9", "sl": "r10", "fp": "r11", "ip": "r12"}


def _reg(ci: capstone.CsInsn, reg: int) -> str:
    name = ci.reg_name(reg)
    return _ALIASES.get(name, name)


def _base_mnemonic(m: str) -> str:
    m = m.lower()
    for suffix in (".w", ".n"):
        if m.endswith(suffix):
            m = m[: -len(suffix)]
    if m.startswith("v"):        # "vadd.f32" -> "vadd", "vldr.32"... keep the operation only
        m = m.split(".", 1)[0]
    return m


def _strip_cond(m: str, cc: int) -> str:
    """capstone writes the condition into the mnemonic ("addeq", "bne"): drop it."""
    if cc in (A.ARM_CC_AL, A.ARM_CC_INVALID):
        return m
    for code in ("eq", "ne", "hs", "cs", "lo", "cc", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le"):
        if m.endswith(code) and len(m) > len(code):
            return m[: -len(code)]
    return m


def _classify(m: str, is_fp_reg_mem: bool) -> Cls:
    if m in _BRANCH:
        return Cls.BRANCH
    if m in _TABLE_BRANCH:
        return Cls.TABLE_BRANCH
    if m == "it" or (m.startswith("it") and set(m[2:]) <= {"t", "e"}):
        return Cls.IT
    if m == "nop":
        return Cls.NOP
    if m in _SYSTEM:
        return Cls.SYSTEM
    if m.startswith("v"):
        if m in ("vldr",):
            return Cls.FP_LOAD
        if m in ("vstr",):
            return Cls.FP_STORE
        if m in _FP_LOAD_MULTIPLE:
            return Cls.FP_LOAD_MULTIPLE
        if m in _FP_STORE_MULTIPLE:
            return Cls.FP_STORE_MULTIPLE
        if m in _FP_MAC:
            return Cls.FP_MAC
        if m in _FP_MUL:
            return Cls.FP_MUL
        if m in _FP_DIV:
            return Cls.FP_DIV
        if m in _FP_MOVE or (m == "vmov" and is_fp_reg_mem):
            return Cls.FP_MOVE
        return Cls.FP_ALU
    if m in _LOAD_MULTIPLE:
        return Cls.LOAD_MULTIPLE
    if m in _STORE_MULTIPLE:
        return Cls.STORE_MULTIPLE
    if m.startswith("ldrd") or m == "ldrexd":
        return Cls.LOAD_DOUBLE
    if m.startswith("strd") or m == "strexd":
        return Cls.STORE_DOUBLE
    if m.startswith("ldr") or m.startswith("lda"):
        return Cls.LOAD
    if m.startswith("str") or m.startswith("stl"):
        return Cls.STORE
    if m.startswith("pld") or m.startswith("pli"):
        return Cls.LOAD
    if m in _DIV:
        return Cls.DIV
    if m in _MUL64:
        return Cls.MUL64
    if m in _MUL or (m[:4] in _MUL_XY and len(m) == 6 and set(m[4:]) <= {"b", "t"}):
        return Cls.MUL
    return Cls.ALU


def _make_disassembler() -> capstone.Cs:
    md = capstone.Cs(capstone.CS_ARCH_ARM, capstone.CS_MODE_THUMB | capstone.CS_MODE_MCLASS)
    md.detail = True
    return md


def _insn(ci: capstone.CsInsn) -> Insn:
    cc = ci.cc
    m = _strip_cond(_base_mnemonic(ci.mnemonic), cc)
    reads_raw, writes_raw = ci.regs_access()
    reads = frozenset(r for r in (_reg(ci, x) for x in reads_raw) if r in _CORE_REGS)
    writes = frozenset(r for r in (_reg(ci, x) for x in writes_raw) if r in _CORE_REGS)
    base = index = None
    fp_core_move = False
    n_reg_ops = 0
    n_fp_ops = 0
    for op in ci.operands:
        if op.type == A.ARM_OP_MEM:
            if op.mem.base:
                base = _reg(ci, op.mem.base)
            if op.mem.index:
                index = _reg(ci, op.mem.index)
        elif op.type == A.ARM_OP_REG:
            name = _reg(ci, op.reg)
            if name in _CORE_REGS:
                n_reg_ops += 1
            else:
                n_fp_ops += 1
    if m == "vmov":
        fp_core_move = n_reg_ops > 0
    cls = _classify(m, fp_core_move)
    if cls in (Cls.LOAD_MULTIPLE, Cls.STORE_MULTIPLE):
        transfers = max(n_reg_ops - (0 if m in ("push", "pop") else 1), 1)
        if base is None and m not in ("push", "pop"):
            base = next((_reg(ci, op.reg) for op in ci.operands if op.type == A.ARM_OP_REG), None)
        if m in ("push", "pop"):
            base = "sp"
    elif cls in (Cls.FP_LOAD_MULTIPLE, Cls.FP_STORE_MULTIPLE):
        transfers = max(n_fp_ops, 1)
        if m in ("vpush", "vpop"):
            base = "sp"
        elif base is None:
            base = next((_reg(ci, op.reg) for op in ci.operands if op.type == A.ARM_OP_REG
                         and _reg(ci, op.reg) in _CORE_REGS), None)
    elif cls in (Cls.LOAD_DOUBLE, Cls.STORE_DOUBLE):
        transfers = 2
    elif cls in (Cls.LOAD, Cls.STORE, Cls.FP_LOAD, Cls.FP_STORE, Cls.TABLE_BRANCH):
        transfers = 0 if m.startswith(("pld", "pli")) else 1
    else:
        transfers = 0
    writes_pc = "pc" in writes or cls in (Cls.BRANCH, Cls.TABLE_BRANCH)
    return Insn(addr=ci.address, size=ci.size, mnemonic=m, op_str=ci.op_str, cls=cls, reads=reads,
                writes=writes - {"pc"}, base=base, index=index, transfers=transfers, writes_pc=writes_pc,
                cond=cc, sets_flags=bool(ci.update_flags))


def decode(code: bytes, addr: int) -> list[Insn]:
    """Decode a run of Thumb code starting at `addr` (in sequence, so IT blocks get their
    conditions). Stops at the first undecodable halfword."""
    return [_insn(ci) for ci in _make_disassembler().disasm(code, addr)]


def code_ranges(elf: Path) -> list[tuple[int, int]]:
    """[start, end) address ranges of Thumb code in the ELF's executable sections, from the
    `$t`/`$d` mapping symbols (AAELF32 §5.5.5); a section without mapping symbols is all code."""
    from elftools.elf.elffile import ELFFile

    out: list[tuple[int, int]] = []
    with open(elf, "rb") as f:
        e = ELFFile(f)
        symtab = e.get_section_by_name(".symtab")
        marks: list[tuple[int, str]] = []
        if symtab is not None:
            for s in symtab.iter_symbols():
                if s.name in ("$t", "$d", "$a") or s.name.startswith(("$t.", "$d.", "$a.")):
                    marks.append((int(s["st_value"]) & ~1, s.name[:2]))
        for sec in e.iter_sections():
            if not sec["sh_flags"] & 0x4 or sec["sh_type"] != "SHT_PROGBITS":  # SHF_EXECINSTR
                continue
            lo, hi = int(sec["sh_addr"]), int(sec["sh_addr"]) + int(sec["sh_size"])
            inside = sorted({m for m in marks if lo <= m[0] < hi})
            if not inside:
                out.append((lo, hi))
                continue
            if inside[0][0] > lo:  # code before the first mapping symbol (vector table is $d)
                inside.insert(0, (lo, "$d"))
            for (a, kind), nxt in zip(inside, [*inside[1:], (hi, "$d")], strict=True):
                if kind == "$t" and nxt[0] > a:
                    out.append((a, nxt[0]))
    return out


def _segments(elf: Path) -> Iterable[tuple[int, bytes]]:
    from elftools.elf.elffile import ELFFile

    with open(elf, "rb") as f:
        e = ELFFile(f)
        for sec in e.iter_sections():
            if sec["sh_flags"] & 0x4 and sec["sh_type"] == "SHT_PROGBITS":
                yield int(sec["sh_addr"]), sec.data()


def decode_elf(elf: Path) -> dict[int, Insn]:
    """Every Thumb instruction of the ELF's code, by address."""
    segs = list(_segments(elf))
    table: dict[int, Insn] = {}
    md = _make_disassembler()
    for lo, hi in code_ranges(elf):
        for base, data in segs:
            if base <= lo and hi <= base + len(data):
                chunk = data[lo - base: hi - base]
                pos = lo
                while pos < hi:  # resume after an undecodable halfword (not seen in compiled code)
                    for ci in md.disasm(chunk[pos - lo:], pos):
                        table[ci.address] = _insn(ci)
                        pos = ci.address + ci.size
                    else:
                        pos += 2 if pos < hi else 0
                break
    return table
