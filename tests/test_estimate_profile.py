"""estimate/profile.py: the per-(context, function) attribution adds up to the trace's totals and
names a kernel call's context after the params object its r0 points into (hand-counted)."""

from __future__ import annotations

import shutil

import pytest
from test_estimate_core_m4 import BOARD, _build

from stm32ai.estimate.core_m4 import CortexM4
from stm32ai.estimate.memsys import build_memory_system
from stm32ai.estimate.profile import kernel_profile
from stm32ai.estimate.trace import Trace, board_regions

pytestmark = pytest.mark.skipif(shutil.which("arm-none-eabi-as") is None, reason="arm-none-eabi binutils missing")

BODY = """
        ldr r0, =kp
        bl ai_k
        ldr r0, =buf
        bl ai_k
        nop
        b 1f
        .type ai_k, %function
        .thumb_func
ai_k:
        ldr r4, [r0]
        adds r4, #1
        bx lr
        .ltorg
1:
"""
DATA = """
        .type kp, %object
kp:     .word 7, 8
        .size kp, 8
"""


def test_profile_contexts_hand_counted(tmp_path):
    elf = _build(tmp_path, BODY, data=DATA)
    tr = Trace(elf, board_regions(BOARD))
    tr.start(pc=tr.symbol("bench"), sp=0x20010000)
    prof = kernel_profile(elf)
    r = tr.measure(CortexM4(), build_memory_system(BOARD), stop=tr.symbol("bench_end"), profile=prof)
    t = prof.table
    # call 1: r0 = &kp -> context "kp"; call 2: r0 = buf (no sized object) -> the function's name
    assert t[("kp", "ai_k")][1] == 3 and t[("ai_k", "ai_k")][1] == 3
    # the caller: 2 x (LDR literal + BL), NOP, B
    assert sum(v[1] for (c, _), v in t.items() if c == "-") == 6
    assert sum(v[1] for v in t.values()) == r.instructions == 12
    assert sum(v[0] for v in t.values()) == r.cycles
    assert sum(v[2] for v in t.values()) == r.fetch_stall_cycles
    assert sum(v[3] for v in t.values()) == r.data_stall_cycles
