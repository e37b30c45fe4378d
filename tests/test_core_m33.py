"""Cortex-M33 core model (stm32ai/estimate/core_m33.py) on micro-benchmarks whose counts were
measured on a Cortex-M33 r1p0 (github jnk0le "pipeline cycle test", RP2350), assembled with
arm-none-eabi-as and stepped through the model; and CoreMark through the trace runner."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from stm32ai.estimate.core_m33 import CortexM33
from stm32ai.estimate.isa import Insn, decode
from stm32ai.estimate.model import Step

HAVE_AS = shutil.which("arm-none-eabi-as") is not None


def assemble(src: str, tmp_path) -> list[Insn]:
    s, o, b = tmp_path / "t.s", tmp_path / "t.o", tmp_path / "t.bin"
    s.write_text(".syntax unified\n.thumb\n.text\n" + src + "\n")
    subprocess.run(["arm-none-eabi-as", "-mcpu=cortex-m33", "-mthumb", "-o", str(o), str(s)], check=True)
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".text", str(o), str(b)], check=True)
    return decode(b.read_bytes(), 0)


def run(insns, taken=(), executed=None) -> int:
    core = CortexM33()
    return sum(core.cycles(Step(i, taken=k in taken, executed=(executed or {}).get(k, True)))
               for k, i in enumerate(insns))


pytestmark = pytest.mark.skipif(not HAVE_AS, reason="arm-none-eabi binutils missing")


def test_alu_one_cycle_each_no_alu_pairs(tmp_path):
    assert run(assemble("adds r0, r1\nadds r2, r3\nadds r4, r5\nadds r6, r7", tmp_path)) == 4


def test_load_to_use_two_cycles(tmp_path):
    assert run(assemble("ldr r0, [r1]\nadds r2, r0, #1", tmp_path)) == 3
    assert run(assemble("ldr r0, [r1]\nadds r2, r3, #1", tmp_path)) == 2
    assert run(assemble("ldr r0, [r1]\nstr r0, [r2]", tmp_path)) == 2          # load to store: 1


def test_mac_chain_one_per_cycle_result_two(tmp_path):
    assert run(assemble("smlad r0, r1, r2, r0\n" * 4, tmp_path)) == 4
    assert run(assemble("mul r0, r1, r2\nadds r3, r0, #1", tmp_path)) == 3


def test_shifted_operand_result_latency_two(tmp_path):
    assert run(assemble("add.w r0, r1, r2, lsl #2\nadds r3, r0, #1", tmp_path)) == 3


def test_ldrd_two_ldm_n(tmp_path):
    assert run(assemble("ldrd r2, r3, [r0]\nldm r1, {r4, r5, r6, r7}", tmp_path)) == 2 + 4


def test_branches(tmp_path):
    # subs.n; bne.n taken: 1 + 2; not taken: 1 + 0 (pairs)
    code = assemble("1:\nsubs r7, #1\nbne 1b", tmp_path)
    assert run(code, taken={1}) == 3
    assert run(code) == 1
    # a flag-free 16-bit instruction before a taken 16-bit branch: the branch costs 1
    code = assemble("1:\nsubs r7, #1\nadd r0, r1\nbne 1b", tmp_path)
    assert run(code, taken={2}) == 3


def test_it_pairs_and_predicated_out_is_a_nop(tmp_path):
    code = assemble("cmp r0, #0\nit eq\naddeq r1, r1, #1\nadds r2, r2, #1", tmp_path)
    assert run(code) == 3
    assert run(code, executed={2: False}) == 3

