"""Cortex-M7 core model (stm32ai/estimate/core_m7.py) on micro-benchmarks assembled with
arm-none-eabi-as. Expected counts follow from the documented M7 pipeline, not from the model:
dual issue of independent ALU pairs (TRM r1p2 §1.2: two instructions per cycle), one-cycle ALU
and word-load results, two-cycle byte/halfword loads and MACs with the accumulator read a stage
late (LLVM ARMScheduleM7.td, contributed by Arm), address operands needed at issue, LDRD/LDM
moving 64 bits per cycle, a predicted loop branch that costs nothing beyond its issue slot and a
6-cycle mispredict (ARMScheduleM7.td). The driver here steps straight-line code and loops;
the unicorn trace runner drives the same model on real firmware."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from stm32ai.estimate.core_m7 import MISPREDICT_LATE_FLAGS, CortexM7
from stm32ai.estimate.isa import Insn, decode
from stm32ai.estimate.model import Access, Step

HAVE_AS = all(shutil.which(t) for t in ("arm-none-eabi-as", "arm-none-eabi-objcopy"))
pytestmark = pytest.mark.skipif(not HAVE_AS, reason="arm-none-eabi binutils not installed")


def assemble(src: str, tmp_path) -> list[Insn]:
    s, o, b = tmp_path / "t.s", tmp_path / "t.o", tmp_path / "t.bin"
    s.write_text(".syntax unified\n.thumb\n.text\n" + src + "\n")
    subprocess.run(["arm-none-eabi-as", "-mcpu=cortex-m7", "-mthumb", "-o", str(o), str(s)], check=True)
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".text", str(o), str(b)], check=True)
    return decode(b.read_bytes(), 0)


def run(insns: list[Insn], iterations: int = 1, addrs: dict[int, list[Access]] | None = None) -> int:
    """Estimated cycles of `insns` executed `iterations` times; with iterations > 1 the last
    instruction is the loop's backward branch (taken on all but the last pass)."""
    core = CortexM7()
    total = 0
    for it in range(iterations):
        for k, insn in enumerate(insns):
            last = k == len(insns) - 1
            taken = last and iterations > 1 and it < iterations - 1
            total += core.cycles(Step(insn, taken=taken, accesses=list((addrs or {}).get(insn.addr, []))))
    return total + core.finish()


def per_iteration(insns: list[Insn], **kw) -> float:
    """Steady-state cycles per loop iteration (difference of two loop lengths)."""
    return (run(insns, 60, **kw) - run(insns, 20, **kw)) / 40


def test_independent_alu_pairs_dual_issue(tmp_path):
    code = assemble("".join(f"add r{2 * i}, r{2 * i + 1}, #1\n" for i in range(4)) * 2, tmp_path)
    assert len(code) == 8 and run(code) == 4          # 0.5 cycle each


def test_dependent_alu_chain_one_per_cycle(tmp_path):
    assert run(assemble("add.w r0, r0, #1\n" * 8, tmp_path)) == 8


def test_smlad_chain_on_one_accumulator_one_per_cycle(tmp_path):
    # one MAC pipe (no pairing of two MACs) and the accumulator forwarded into EX3: 1 cycle each
    assert run(assemble("smlad r0, r1, r2, r0\n" * 8, tmp_path)) == 8


def test_mac_result_used_as_operand_waits_two_cycles(tmp_path):
    # MUL latency 2: the dependent ADD issues two cycles after the MUL
    assert run(assemble("mul r0, r1, r2\nadd r3, r0, #1", tmp_path)) == 3


def test_load_then_dependent_alu_no_stall(tmp_path):
    # word load data arrives in EX2: an ALU consumer issues the next cycle (they do not pair)
    assert run(assemble("ldr r0, [r1]\nadd r2, r0, #1", tmp_path)) == 2


def test_load_then_dependent_address_stalls_one(tmp_path):
    # the address is needed at issue, a cycle before EX2: one stall
    assert run(assemble("ldr r0, [r1]\nldr r2, [r0]", tmp_path)) == 3


def test_byte_load_then_dependent_alu_stalls_one(tmp_path):
    assert run(assemble("ldrb r0, [r1]\nadd r2, r0, #1", tmp_path)) == 3


def test_load_pairs_with_alu_and_two_loads_pair(tmp_path):
    assert run(assemble("ldr r0, [r1]\nadd r2, r3, #1\nldr r4, [r5]\nldr r6, [r7]", tmp_path)) == 2


def test_ldrd_and_ldm_move_64_bits_per_cycle(tmp_path):
    code = assemble("ldrd r2, r3, [r0]\nldm r1, {r4, r5, r6, r7}\nnop.w", tmp_path)
    aligned = {0: [Access(0x20000000, 4, False), Access(0x20000004, 4, False)],
               4: [Access(0x20000100 + 4 * i, 4, False) for i in range(4)]}
    # LDRD 1 cycle, LDM of 4 words 2 beats, the NOP issues after it: 1 + 2 + 1
    assert run(code, addrs=aligned) == 4
    odd = {0: aligned[0], 4: [Access(0x20000104 + 4 * i, 4, False) for i in range(4)]}
    assert run(code, addrs=odd) == 5                   # 4 words over 3 doublewords


def test_one_shifted_operand_per_cycle(tmp_path):
    # two shifted-register operands cannot pair (one EX1 shifter); plain ALU ops can
    assert run(assemble("add r0, r1, r2, lsl #2\nadd r3, r4, r5, lsl #2", tmp_path)) == 2
    assert run(assemble("add r0, r1, r2, lsl #2\nadd r3, r4, r5", tmp_path)) == 1


def test_simd_only_as_older_of_a_pair(tmp_path):
    assert run(assemble("uxtb r0, r1\nadd r2, r3, #1", tmp_path)) == 1
    assert run(assemble("add r2, r3, #1\nuxtb r0, r1", tmp_path)) == 2


def test_predicted_loop_branch_costs_its_slot_only(tmp_path):
    # add/add pair, subs/bne pair: 2 cycles per iteration once the BTAC holds the branch
    code = assemble("1:\nadd r1, r1, #1\nadd r2, r2, #1\nsubs r0, r0, #1\nbne 1b", tmp_path)
    assert per_iteration(code) == 2


def test_loop_exit_mispredict_costs_the_pipeline_refill(tmp_path):
    code = assemble("1:\nadd r1, r1, #1\nadd r2, r2, #1\nsubs r0, r0, #1\nbne 1b\nnop", tmp_path)
    body = code[:-1]
    # the exit: predicted taken, not taken -> the fall-through NOP waits the mispredict
    core = CortexM7()
    total = 0
    for it in range(10):
        for k, insn in enumerate(body):
            total += core.cycles(Step(insn, taken=(k == 3 and it < 9)))
    before = core.t
    core.cycles(Step(code[-1]))
    # SUBS sets the flags in the same cycle as BNE issues: the late-flags penalty (jnk0le, H743)
    assert core.t - before == 1 + MISPREDICT_LATE_FLAGS
    assert core.stats["mispredicts"] == 1


def test_conditional_false_instruction_still_issues(tmp_path):
    code = assemble("cmp r0, #0\nit eq\naddeq r1, r1, #1\nadd r2, r2, #1", tmp_path)
    core = CortexM7()
    n = sum(core.cycles(Step(i, executed=(i.mnemonic != "add" or i.op_str != "r1, r1, #1"))) for i in code)
    assert n >= 1 and core.t >= 1


def test_memory_stall_of_a_load_blocks_the_pipeline(tmp_path):
    code = assemble("ldr r0, [r1]\nadd r2, r3, #1\nadd r4, r5, #1", tmp_path)
    miss = {0: [Access(0x24000000, 4, False, stall=10)]}
    assert run(code) == 2                          # LDR + ADD pair, then the ADD
    assert run(code, addrs=miss) == 1 + 10 + 1     # the LDR alone, 10 stalled, the two ADDs pair


def test_store_stall_hidden_by_store_buffer(tmp_path):
    code = assemble("str r0, [r1]\nadd r2, r3, #1\nadd r4, r5, #1\nadd r6, r7, #1", tmp_path)
    slow = {0: [Access(0x24000000, 4, True, stall=3)]}
    assert run(code, addrs=slow) == run(code)


def test_high_registers_named_like_the_decoder(tmp_path):
    # capstone prints r9-r12 as sb/sl/fp/ip; Insn names them r9-r12: the accumulator and the
    # shifted operand must still be recognised (SMLAD chain on r9: 1 per cycle)
    assert run(assemble("smlad r9, r10, r11, r9\n" * 4, tmp_path)) == 4
    assert run(assemble("add.w r12, r12, #1\nadd r0, r1, r12, lsl #2", tmp_path)) == 3
