"""isa.data_accesses (data addresses computed from register values, for traces that cannot use
unicorn's memory hooks) against the addresses unicorn itself reports executing the same
instructions, one at a time."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from stm32ai.estimate.isa import data_accesses, decode

pytestmark = pytest.mark.skipif(not shutil.which("arm-none-eabi-as"), reason="arm-none-eabi binutils missing")

CODE = """
ldr r0, [r1, #-66]
ldr r0, [r1], #4
ldr r0, [r1, #8]!
ldr.w r0, [r1, r2, lsl #2]
ldrh r0, [r1, #-62]
ldrsb r0, [r1, r2]
ldrd r4, r5, [r1], #8
ldrd r4, r5, [r1, #-8]
ldr r0, [pc, #8]
ldm r1!, {r4, r5, r6}
ldmdb r1, {r4, r5}
push {r4, r5, lr}
pop {r4, r5}
strb r0, [r1], #-1
strh r0, [r1, #6]
strd r4, r5, [r1, #16]!
stmdb r1!, {r4, r5, r6}
tbb [r1, r2]
vldr s0, [r1, #8]
vstr d1, [r1, #-16]
vpush {d8, d9}
vpop {s16, s17}
"""


def test_addresses_match_unicorn(tmp_path):
    from unicorn import UC_ARCH_ARM, UC_HOOK_MEM_READ, UC_HOOK_MEM_WRITE, UC_MODE_MCLASS, UC_MODE_THUMB, Uc
    from unicorn import arm_const as C

    s, o, b = tmp_path / "t.s", tmp_path / "t.o", tmp_path / "t.bin"
    s.write_text(".syntax unified\n.thumb\n.text\n.balign 4\n" + CODE)
    subprocess.run(["arm-none-eabi-as", "-mcpu=cortex-m7", "-mfpu=fpv5-d16", "-mthumb", "-o", str(o), str(s)],
                   check=True)
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".text", str(o), str(b)], check=True)
    code = b.read_bytes()
    base = 0x08000000
    insns = decode(code, base)
    assert len(insns) == len([x for x in CODE.splitlines() if x.strip()])
    uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
    uc.mem_map(base, 0x10000)
    uc.mem_map(0x20000000, 0x10000)
    uc.mem_map(0xE0000000, 0x100000)
    uc.mem_write(base, code)
    uc.mem_write(0xE000ED88, (0xF << 20).to_bytes(4, "little"))      # CPACR: FPU on
    seen: list[tuple[int, int, bool]] = []
    uc.hook_add(UC_HOOK_MEM_READ, lambda u, a, addr, size, v, d: seen.append((addr, size, False)))
    uc.hook_add(UC_HOOK_MEM_WRITE, lambda u, a, addr, size, v, d: seen.append((addr, size, True)))
    regs = {"r1": 0x20008000, "r2": 3, "sp": 0x2000F000}
    ids = {f"r{i}": getattr(C, f"UC_ARM_REG_R{i}") for i in range(13)} | {"sp": C.UC_ARM_REG_SP,
                                                                         "lr": C.UC_ARM_REG_LR}
    for insn in insns:
        for r, v in regs.items():
            uc.reg_write(ids[r], v)
        uc.reg_write(C.UC_ARM_REG_R0, 0)
        want = data_accesses(insn, lambda name: int(uc.reg_read(ids[name])))
        seen.clear()
        uc.emu_start(insn.addr | 1, 0, count=1)
        assert sorted(seen) == sorted(want), (insn.mnemonic, insn.op_str, seen, want)
