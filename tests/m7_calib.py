"""Cortex-M7 CoreMark calibration: builds the calibration library (/work/shared/calibration/
coremark, libcoremark_cortex-m7.a) into a bare-metal ELF laid out like a board file says, and
runs its timed region (coremark_timed_begin .. coremark_timed_end) through unicorn into the
Cortex-M7 core model and the board's M7 memory system.

The trace loop here is a minimal driver for the calibration of the M7 model only (one Step per
executed instruction, data accesses from the memory hooks, IT-block conditions from the flags);
the estimator's trace runner (stm32ai/estimate/trace.py) is the general one.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from stm32ai.estimate.cache import M7MemorySystem, config_for
from stm32ai.estimate.core_m7 import CortexM7
from stm32ai.estimate.isa import data_accesses, decode_elf
from stm32ai.estimate.model import Access, Step

COREMARK = Path(os.environ.get("STM32AI_COREMARK_DIR", "/work/shared/calibration/coremark"))
FIXTURE = Path(__file__).parent / "fixtures" / "coremark_m7"
M7_FLAGS = ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"]
# ST's published CoreMark/MHz (README of the calibration folder: AN4667 Introduction for the
# F746 at 216 MHz; ST's H743 page, 2424 at 480 MHz)
PUBLISHED = {"disco-f746": 1082 / 216, "nucleo-h743zi": 2424 / 480}


def build(board, out: Path, data_region: str = "dtcm", iterations: int = 3) -> Path:
    regions = {r.name: r for r in board.memory}
    flash, data = regions["flash"], regions[data_region]
    ld = (FIXTURE / "coremark.ld.in").read_text()
    for k, v in {"TEXT_ORIGIN": flash.origin, "TEXT_LENGTH": flash.length, "DATA_ORIGIN": data.origin,
                 "DATA_LENGTH": data.length}.items():
        ld = ld.replace(f"@{k}@", hex(v))
    ld = ld.replace("@DATA@", data_region)
    out.mkdir(parents=True, exist_ok=True)
    (out / "coremark.ld").write_text(ld)
    elf = out / "coremark_m7.elf"
    subprocess.run(["arm-none-eabi-gcc", *M7_FLAGS, "-O2", "-ffreestanding", "-nostartfiles", "-nostdlib",
                    f"-DITERATIONS={iterations}", f"-I{COREMARK / 'include'}", "-T", str(out / "coremark.ld"),
                    "-Wl,--gc-sections", str(FIXTURE / "startup.c"), f"-L{COREMARK / 'lib'}",
                    "-lcoremark_cortex-m7", "-lgcc", "-o", str(elf)], check=True)
    return elf


@dataclass
class Result:
    cycles: int
    instructions: int
    iterations: int
    rc: int
    stats: dict
    icache_misses: int
    dcache_misses: int

    @property
    def cycles_per_iteration(self) -> float:
        return self.cycles / self.iterations

    @property
    def coremark_per_mhz(self) -> float:
        return 1e6 / self.cycles_per_iteration


def trace(elf: Path, board, iterations: int, caches: bool | None = None) -> Result:
    from elftools.elf.elffile import ELFFile
    from unicorn import UC_ARCH_ARM, UC_HOOK_CODE, UC_MODE_MCLASS, UC_MODE_THUMB, Uc
    from unicorn import arm_const as uc_arm

    cfg = config_for(board)
    if caches is not None:
        from dataclasses import replace
        cfg = replace(cfg, caches_on=caches)
    mem = M7MemorySystem(cfg)
    core = CortexM7()
    table = decode_elf(elf)
    uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
    uc.ctl_set_cpu_model(uc_arm.UC_CPU_ARM_CORTEX_M7)
    for r in board.memory:
        if r.origin < 0x60000000:
            uc.mem_map(r.origin, (r.length + 0xFFF) & ~0xFFF)
    with open(elf, "rb") as f:
        e = ELFFile(f)
        for seg in e.iter_segments():
            if seg["p_type"] == "PT_LOAD" and seg["p_filesz"]:
                uc.mem_write(int(seg["p_paddr"]), seg.data())
        syms = {s.name: int(s["st_value"]) & ~1 for s in e.get_section_by_name(".symtab").iter_symbols()}
    begin, end = syms["coremark_timed_begin"], syms["coremark_timed_end"]
    sp = int.from_bytes(uc.mem_read(board.memory[[r.name for r in board.memory].index("flash")].origin, 4), "little")
    entry = syms["Reset_Handler"]
    uc.reg_write(uc_arm.UC_ARM_REG_SP, sp)

    reg_ids = {**{f"r{i}": getattr(uc_arm, f"UC_ARM_REG_R{i}") for i in range(13)}, "sp": uc_arm.UC_ARM_REG_SP,
               "lr": uc_arm.UC_ARM_REG_LR, "pc": uc_arm.UC_ARM_REG_PC, "sb": uc_arm.UC_ARM_REG_R9,
               "sl": uc_arm.UC_ARM_REG_R10, "fp": uc_arm.UC_ARM_REG_R11, "ip": uc_arm.UC_ARM_REG_R12}

    def reg(name: str) -> int:
        return uc.reg_read(reg_ids[name])

    st = {"on": False, "step": None, "cycles": 0, "n": 0, "done": False}

    def on_code(uc_, addr, size, _):
        if st["done"]:
            if uc_.mem_read(addr, 2)[1] == 0xBE:      # BKPT: the harness finished
                uc_.emu_stop()
            return
        if addr == begin:
            st["on"] = True
        elif addr == end:
            st["on"], st["done"] = False, True
        prev = st["step"]
        if prev is not None:
            nxt = prev.insn.addr + prev.insn.size
            prev.taken = addr != nxt
            if prev.taken and not prev.insn.writes_pc and nxt < addr <= nxt + 12:
                # unicorn does not call the code hook for an IT-block instruction whose condition
                # failed; they still occupy issue slots (and QEMU's instruction counts include them)
                prev.taken = False
                st["cycles"] += core.cycles(prev)
                while nxt < addr and nxt in table:
                    skipped = table[nxt]
                    st["cycles"] += core.cycles(Step(skipped, executed=False, fetch_stall=mem.fetch(nxt, skipped.size)))
                    st["n"] += 1
                    nxt += skipped.size
            else:
                st["cycles"] += core.cycles(prev)
            st["step"] = None
        if not st["on"]:
            return
        insn = table.get(addr)
        if insn is None:
            raise RuntimeError(f"no decoded instruction at {addr:#x}")
        step = st["step"] = Step(insn, fetch_stall=mem.fetch(addr, size))
        if insn.transfers:
            for a, n, w in data_accesses(insn, reg):
                step.accesses.append(Access(a, n, w, mem.write(a, n) if w else mem.read(a, n)))
        st["n"] += 1

    uc.hook_add(UC_HOOK_CODE, on_code)
    uc.emu_start(entry | 1, 0, count=50_000_000)
    rc = int.from_bytes(uc.mem_read(syms["g_rc"], 4), "little", signed=True)   # CoreMark's own verdict
    return Result(st["cycles"] + core.finish(), st["n"], iterations, rc, dict(core.stats), mem.icache.misses,
                  mem.dcache.misses)
