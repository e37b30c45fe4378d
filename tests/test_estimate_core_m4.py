"""Cortex-M4 core model: micro-benchmarks whose cycle counts the Cortex-M4 TRM (DDI 0439B)
states, assembled with arm-none-eabi-as and run through the trace with a zero-wait memory
system; and flash/ART access patterns whose hits and misses are computed by hand."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from stm32ai.boards import load_board
from stm32ai.estimate.core_m4 import CortexM4, div_cycles
from stm32ai.estimate.memsys import ZeroWaitMemory, build_memory_system
from stm32ai.estimate.trace import Trace, board_regions

pytestmark = pytest.mark.skipif(shutil.which("arm-none-eabi-as") is None, reason="arm-none-eabi binutils missing")

BOARD = load_board("nucleo-l4r5zi")          # flash 0x08000000, SRAM1 0x20000000; 5 WS, 64-bit ART


def _build(tmp: Path, body: str, text: int = 0x08000000, data: str = "") -> Path:
    src = tmp / "bench.s"
    src.write_text(f"""
        .syntax unified
        .cpu cortex-m4
        .fpu fpv4-sp-d16
        .thumb
        .text
        .global bench
        .thumb_func
bench:
{body}
        .global bench_end
bench_end:
0:      b.n 0b
        .data
        .align 3
buf:
        .rept 16
        .word buf
        .endr
{data}
""")
    obj, elf = tmp / "bench.o", tmp / "bench.elf"
    subprocess.run(["arm-none-eabi-as", "-o", str(obj), str(src)], check=True)
    subprocess.run(["arm-none-eabi-ld", "-e", "bench", "-o", str(elf), f"-Ttext=0x{text:08x}",
                    "-Tdata=0x20004000", str(obj)], check=True)
    return elf


def _cycles(tmp: Path, body: str, mem: str = "zero", text: int = 0x08000000, regs: dict[str, int] | None = None
            ) -> tuple[int, int]:
    """(cycles, instructions) of the code between bench and bench_end."""
    from unicorn import arm_const as C

    elf = _build(tmp, body, text)
    tr = Trace(elf, board_regions(BOARD))
    tr.start(pc=tr.symbol("bench"), sp=0x20010000)
    for name, v in {"r1": 0x20004000, "r2": 0x20004008, "r3": 0x20004010, "r5": 4, **(regs or {})}.items():
        tr.uc.reg_write(getattr(C, f"UC_ARM_REG_{name.upper()}"), v)
    memsys = ZeroWaitMemory(BOARD) if mem == "zero" else build_memory_system(BOARD)
    r = tr.measure(CortexM4(), memsys, stop=tr.symbol("bench_end"))
    return r.cycles, r.instructions


# (body, TRM cycles, why)
TRM_CASES = [
    ("ldr r0, [r1]\n ldr r4, [r2]", 3, "§3.3.2: LDR R0,[R1]; LDR R1,[R2] - normally three cycles total"),
    ("ldr r0, [r1, r5]\n str r0, [r3, #20]", 3, "§3.3.2: LDR R0,[R1,R2]; STR R0,[R3,#20] - three cycles"),
    ("ldr r0, [r1, r5]\n str r4, [r3, r5]", 3, "§3.3.2: LDR R0,[R1,R2]; STR R1,[R3,R2] - three cycles"),
    ("ldr r0, [r1, r5]\n ldr r4, [r2]\n ldr r6, [r3, #4]", 4, "§3.3.2: three pipelined LDRs - four cycles"),
    ("ldr r0, [r1]\n ldr r4, [r0]", 4, "§3.3.2: the second address depends on the first load: no pipelining"),
    ("ldr r1, [r1]\n ldr r4, [r2]", 3, "a load that overwrites its own base does not hold up an independent one"),
    ("ldr r0, [r1]\n ldr r4, [r0, r5]", 4, "index register from the previous load: no pipelining"),
    ("ldm r1, {r0, r4, r6}", 4, "Table 3-1 LDM 1+N (§3.3.2: a three element LDM takes 2+1+1)"),
    ("stmia r1!, {r0, r4, r6, r7, r8, r9, r10, r11}", 9, "§3.3.2: an eight element store takes nine cycles"),
    ("ldrd r0, r4, [r1]", 3, "§3.3.2: LDRD requires three cycles when not stalled"),
    ("ldrd r0, r4, [r1]\n ldr r6, [r2]", 5, "§3.3.2: LDRD cannot be pipelined with the following LDR"),
    ("ldr r6, [r2]\n ldrd r0, r4, [r1]", 5, "§3.3.2: LDRD cannot be pipelined with the preceding LDR"),
    ("ldm r1, {r0, r4}\n ldr r6, [r2]", 5, "§3.3.2: LDM cannot be pipelined with the following LDR"),
    ("push {r4, r5, r6, lr}\n pop {r4, r5, r6, r7}", 10, "Table 3-1 PUSH/POP 1+N"),
    ("str r0, [r1, #4]", 1, "§3.3.2: STR Rx,[Ry,#imm] is always one cycle"),
    ("str r0, [r1, r5]", 2, "Table 3-1 STR 2 (register offset, not pipelined)"),
    ("str r0, [r1, #4]\n ldr r4, [r2]", 3, "§3.3.2: nothing can be pipelined after the store"),
    ("ldr r0, [r1, #2]", 3, "§3.3.2: a halfword-aligned word load adds one cycle"),
    ("ldrh r0, [r1, #1]", 3, "§3.3.2: a byte-aligned halfword load adds one cycle"),
    ("ldr r0, [r1, #1]", 4, "§3.3.2: a byte-aligned word load adds two cycles"),
    ("smlad r0, r1, r2, r0\n smlad r0, r3, r4, r0\n smlad r0, r5, r6, r0\n smlad r0, r7, r8, r0", 4,
     "Table 3-1: single-cycle dual 16-bit MAC, back to back on the accumulator"),
    ("mla r0, r1, r2, r0\n smlal r0, r4, r1, r2\n umull r6, r7, r1, r2\n mul r8, r1, r2", 4,
     "Table 3-1 MUL/MLA/SMLAL/UMULL 1"),
    ("adds r0, r1, r2\n lsls r0, r0, #3\n sxtb16 r4, r0\n uxtah r6, r4, r0\n ssat r7, #8, r6", 5, "Table 3-1 ALU 1"),
    ("b 1f\n nop\n1:", 2, "Table 3-1 B 1+P, P = 1: target issued at decode (M3 TRM Table 15-3)"),
    ("b.w 1f\n nop\n .align 2\n1: nop", 3, "B.W 1+P, P = 1, + the NOP"),
    ("b 1f\n .align 2\n nop\n1: add.w r0, r0, #1", 4,
     "B 1+P, P = 2 for a 32-bit target at a halfword address (+ ADD 1)"),
    ("movs r0, #3\n1: subs r0, #1\n bne 1b", 1 + 3 * 1 + 2 * 2 + 1, "SUBS 1; BNE taken 1+P = 2, not taken 1"),
    ("movs r0, #0\n cbz r0, 1f\n nop\n1:", 1 + 3, "CBZ taken 1+P, P = 2: resolved in execute (Table 15-3)"),
    ("adr r0, 1f\n mov lr, r0\n adds lr, #1\n bx lr\n .align 2\n1:", 1 + 1 + 1 + 3,
     "BX LR right after LR is written: execute time, P = 2"),
    ("adr r0, 1f\n adds r0, #1\n mov lr, r0\n nop\n bx lr\n .align 2\n1:", 1 + 1 + 1 + 1 + 2,
     "BX LR with LR written earlier: decode time, P = 1"),
    ("movs r0, #1\n cbz r0, 1f\n nop\n1:", 1 + 1 + 1, "CBZ not taken 1"),
    ("movs r0, #1\n cmp r0, #1\n ite eq\n addeq r0, #1\n addne r0, #2", 5, "IT 1; the failed ADDNE still takes 1"),
    ("movs r0, #1\n cmp r0, #2\n ite eq\n ldreq r4, [r1]\n addne r0, #2", 5, "a failed LDREQ takes 1, not 2"),
    ("movs r0, #1\n cmp r0, #2\n itt eq\n ldreq r4, [r1]\n ldreq r6, [r2]", 5, "both failed: 1 each"),
    ("movs r0, #1\n cmp r0, #1\n itt eq\n ldreq r4, [r1]\n ldreq r6, [r2]", 3 + 2 + 1, "both pass: pipelined"),
    ("adr r0, 1f\n adds r0, #1\n bx r0\n .align 2\n1:", 1 + 1 + 3, "BX Rm 1+P, P = 2 (execute)"),
    ("movs r0, #1\n tbb [pc, r0]\n2: .byte 0, (1f-2b)/2\n .align 1\n1:", 1 + 6, "§3.3.2: TBB at least six cycles"),
    ("adr r0, 1f\n adds r0, #1\n str r0, [r1]\n ldr pc, [r1]\n .align 2\n1:", 1 + 1 + 1 + 5,
     "§3.3.2: LDR PC at least five cycles"),
    ("vmla.f32 s0, s1, s2\n vadd.f32 s3, s4, s5\n vdiv.f32 s6, s7, s8\n vsqrt.f32 s9, s10", 3 + 1 + 14 + 14,
     "Table 7-1 VMLA 3, VADD 1, VDIV 14, VSQRT 14"),
    ("vldr s0, [r1]\n vstr s0, [r1, #4]\n vldmia r1, {s0-s3}", 2 + 2 + 5, "Table 7-1 VLDR 2, VSTR 2, VLDM 1+N"),
]


@pytest.mark.parametrize("body,expected,why", TRM_CASES, ids=[c[2][:60] for c in TRM_CASES])
def test_trm_microbenchmark(tmp_path, body, expected, why):
    cycles, _ = _cycles(tmp_path, body)
    assert cycles == expected, why


def test_udiv_early_termination(tmp_path):
    """SDIV/UDIV 2..12 (Table 3-1): 2 when the dividend is below the divisor, 12 for a 32-bit quotient."""
    assert div_cycles(3, 7, signed=False) == 2
    assert div_cycles(0xFFFFFFFF, 1, signed=False) == 12
    assert div_cycles(0xFFFFFFF0, 3, signed=True) == 4         # -16 / 3: 5 - 2 + 1 = 4 quotient bit positions
    cycles, _ = _cycles(tmp_path, "udiv r0, r1, r2", regs={"r1": 0xFFFFFFFF, "r2": 1})
    assert cycles == 12
    cycles, _ = _cycles(tmp_path, "udiv r0, r1, r2", regs={"r1": 5, "r2": 7})
    assert cycles == 2


def test_flash_data_reads_through_art_dcache(tmp_path):
    """Code in SRAM (zero wait), loads from flash through the ART D-cache (RM0432 §3.3.4): 64-bit
    reads, 8 lines of 4 x 64 bits, 5 wait states at 120 MHz. Hand count:
    LDR [F+0]  miss  2 + 5;  LDR [F+4]  same 64-bit read: hit, pipelined 1;
    LDR [F+8]  next 64-bit read of the same line: miss, pipelined 1 + 5;  LDR [F+0] again: hit 1."""
    body = "ldr r0, [r7]\n ldr r4, [r7, #4]\n ldr r6, [r7, #8]\n ldr r0, [r7]"
    cycles, _ = _cycles(tmp_path, body, mem="board", text=0x20000000, regs={"r7": 0x08000100})
    assert cycles == 7 + 1 + 6 + 1


def test_flash_dcache_lru_eviction(tmp_path):
    """9 loads from 9 different 32-byte lines (each a miss: LDR 2 + 5, the later ones pipelined
    1 + 5), then the first line again: the 8-line D-cache evicted it (LRU), so it misses too."""
    body = "\n ".join(f"ldr r0, [r7, #{32 * k}]" for k in range(9)) + "\n ldr r0, [r7]"
    cycles, _ = _cycles(tmp_path, body, mem="board", text=0x20000000, regs={"r7": 0x08000100})
    assert cycles == 7 + 9 * 6


def test_flash_fetch_sequential_prefetch(tmp_path):
    """24 16-bit NOPs from flash, starting on a 64-bit boundary: the first fetch misses (5 WS);
    each next 64-bit read is prefetched, ready 6 cycles after its predecessor became current,
    while 4 NOPs take 4: so every further read costs 2 stall cycles. 6 + 3 + 5 * (3 + 2 + 1)."""
    body = "\n".join(" nop" for _ in range(24))      # bench is at 0x08000000, 64-bit aligned
    cycles, n = _cycles(tmp_path, body, mem="board")
    assert n == 24
    assert cycles == 6 + 3 + 5 * 6


def test_flash_fetch_loop_hits_icache(tmp_path):
    """A 3-line loop runs from the ART I-cache after its first pass: the second pass has no stall."""
    body = (" movs r0, #2\n .balign 8\n1:\n" + "\n".join(" nop" for _ in range(10))
            + "\n subs r0, #1\n bne 1b")
    cycles_two, _ = _cycles(tmp_path, body, mem="board")
    zero_two, _ = _cycles(tmp_path, body, mem="zero")
    body3 = body.replace("movs r0, #2", "movs r0, #3")
    cycles_three, _ = _cycles(tmp_path, body3, mem="board")
    zero_three, _ = _cycles(tmp_path, body3, mem="zero")
    # the third pass costs exactly what it costs at zero wait states
    assert cycles_three - cycles_two == zero_three - zero_two
    assert cycles_two > zero_two


def test_runaway_code_stops_with_one_clear_error(tmp_path):
    from stm32ai.estimate.trace import TraceError

    elf = _build(tmp_path, "1: b 1b")
    tr = Trace(elf, board_regions(BOARD))
    tr.start(pc=tr.symbol("bench"), sp=0x20010000)
    with pytest.raises(TraceError, match="did not end at 0x.* within 1000 instructions"):
        tr.measure(CortexM4(), ZeroWaitMemory(BOARD), stop=tr.symbol("bench_end"), budget=1000)


def test_memsys_schema_errors_name_file_and_key():
    import dataclasses

    from stm32ai.errors import Stm32aiError
    from stm32ai.estimate.memsys import load_spec

    good = BOARD.memsys
    cases = [
        ({**good, "flash": {**good["flash"], "regions": ["nor"]}},
         "memsys.flash.regions: no memory region named 'nor'"),
        ({**good, "flash": {**good["flash"], "read_bytes": 12}}, "memsys.flash.read_bytes: 12 is not a power of two"),
        ({**good, "flash": {**good["flash"], "icache": {"lines": 32, "line_bytes": 4}}},
         "memsys.flash.icache.line_bytes: 4 is not a power-of-two multiple of read_bytes 8"),
        ({**good, "bogus": 1}, "memsys.bogus: unknown key"),
        ({**good, "tcm": ["nope"]}, "memsys.tcm: expected a list of memory region names"),
    ]
    for raw, msg in cases:
        with pytest.raises(Stm32aiError, match=re.escape(msg)) as e:
            load_spec(dataclasses.replace(BOARD, memsys=raw))
        assert str(e.value).startswith("boards/soc/stm32l4r5xi.yaml: ")
    with pytest.raises(Stm32aiError, match="has no memsys: section"):
        load_spec(dataclasses.replace(BOARD, memsys=None))


def test_stale_it_state_after_a_block_is_cleared_not_obeyed(tmp_path):
    """unicorn 2.1 can leave an IT block's state behind when its memory hooks fire inside the
    block (unicorn-engine/unicorn#2309); the instruction after the block then runs as if
    conditional and is skipped when the condition fails. The trace clears that state: here the
    core starts right after an `it mi` block with its IT bits still set and N clear, and the
    following MOVS must still execute (7 in r0), as on silicon."""
    from unicorn import arm_const as C

    elf = _build(tmp_path, "it mi\n strmi r3, [r1]\n .global post\npost:\n movs r0, #7\n adds r0, r0, #1")
    tr = Trace(elf, board_regions(BOARD))
    tr.start(pc=tr.symbol("post"), sp=0x20010000)
    tr.uc.reg_write(C.UC_ARM_REG_R0, 0)
    tr.uc.reg_write(C.UC_ARM_REG_XPSR, (1 << 24) | 0x4800)    # Thumb, IT = MI with one slot, N = 0
    r = tr.measure(CortexM4(), ZeroWaitMemory(BOARD), stop=tr.symbol("bench_end"))
    assert tr.uc.reg_read(C.UC_ARM_REG_R0) == 8 and r.instructions == 2 and tr.it_repairs == 1
