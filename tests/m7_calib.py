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

from stm32ai.estimate.core_m7 import CortexM7

COREMARK = Path(os.environ.get("STM32AI_COREMARK_DIR", "/work/shared/calibration/coremark"))
FIXTURE = Path(__file__).parent / "fixtures" / "coremark_m7"
M7_FLAGS = ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"]
# ST's published CoreMark/MHz (README of the calibration folder: AN4667 Introduction for the
# F746 at 216 MHz; ST's H743 page, 2424 at 480 MHz)
PUBLISHED = {"disco-f746": 1082 / 216, "nucleo-h743zi": 2424 / 480}


CPU_FLAGS = {"cortex-m7": M7_FLAGS,
             "cortex-m33": ["-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"]}


def build(board, out: Path, data_region: str = "dtcm", iterations: int = 3, core: str = "cortex-m7") -> Path:
    regions = {r.name: r for r in board.memory}
    return build_at(out, (regions["flash"].origin, regions["flash"].length),
                    (regions[data_region].origin, regions[data_region].length), data_region, iterations, core)


def build_at(out: Path, text: tuple[int, int], data: tuple[int, int], data_name: str, iterations: int,
             core: str) -> Path:
    from types import SimpleNamespace

    flash, data = SimpleNamespace(origin=text[0], length=text[1]), SimpleNamespace(origin=data[0], length=data[1])
    data_region = data_name
    ld = (FIXTURE / "coremark.ld.in").read_text()
    for k, v in {"TEXT_ORIGIN": flash.origin, "TEXT_LENGTH": flash.length, "DATA_ORIGIN": data.origin,
                 "DATA_LENGTH": data.length}.items():
        ld = ld.replace(f"@{k}@", hex(v))
    ld = ld.replace("@DATA@", data_region)
    out.mkdir(parents=True, exist_ok=True)
    (out / "coremark.ld").write_text(ld)
    elf = out / f"coremark_{core}.elf"
    subprocess.run(["arm-none-eabi-gcc", *CPU_FLAGS[core], "-O2", "-ffreestanding", "-nostartfiles", "-nostdlib",
                    f"-DITERATIONS={iterations}", f"-I{COREMARK / 'include'}", "-T", str(out / "coremark.ld"),
                    "-Wl,--gc-sections", str(FIXTURE / "startup.c"), f"-L{COREMARK / 'lib'}",
                    f"-lcoremark_{core}", "-lgcc", "-o", str(elf)], check=True)
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
    """CoreMark's timed region (coremark_timed_begin .. coremark_timed_end) through the
    estimator's trace runner, the Cortex-M7 model and the board's memory system; then the rest
    of the run untraced, for CoreMark's own CRC verdict (g_rc)."""
    from dataclasses import replace

    from unicorn import UC_HOOK_CODE

    from stm32ai.estimate.memsys import build_memory_system
    from stm32ai.estimate.trace import Trace, board_regions

    mem = build_memory_system(board)
    if caches is not None:
        mem = type(mem)(replace(mem.cfg, caches_on=caches))
    core = CortexM7()
    t = Trace(elf, board_regions(board), core="cortex-m7")
    flash = next(r for r in board.memory if r.name == "flash")
    t.start(pc=t.symbol("Reset_Handler"), sp=int.from_bytes(t.uc.mem_read(flash.origin, 4), "little"))
    t.run_to(t.symbol("coremark_timed_begin"))
    r = t.measure(core, mem, stop=t.symbol("coremark_timed_end"))
    cycles = r.cycles + core.finish()

    def stop_at_bkpt(uc, addr, size, _):
        if uc.mem_read(addr, 2)[1] == 0xBE:      # the harness's BKPT after coremark_run returned
            uc.emu_stop()

    t.uc.hook_add(UC_HOOK_CODE, stop_at_bkpt)
    t._emu(50_000_000)
    rc = int.from_bytes(t.uc.mem_read(t.symbol("g_rc"), 4), "little", signed=True)
    return Result(cycles, r.instructions, iterations, rc, dict(core.stats), mem.icache.misses, mem.dcache.misses)


class ZeroWait:
    """Every access zero-wait (a core model alone): the memory-system contract's counters."""

    now = 0

    def fetch(self, addr: int, size: int) -> int:
        return 0

    def read(self, addr: int, size: int) -> int:
        return 0

    def write(self, addr: int, size: int) -> int:
        return 0

    def bytes_read(self, region: str) -> int:
        return 0

    def regions(self) -> list[str]:
        return ["all"]

    def read_counters(self) -> list[int]:
        return [0]


def trace_m33(out: Path, iterations: int = 2) -> Result:
    """CoreMark for the Cortex-M33 (libcoremark_cortex-m33.a) on a zero-wait memory map (flash at
    0x08000000, SRAM at 0x20000000, as an STM32U5/H5 with its ICACHE hitting)."""
    from unicorn import UC_HOOK_CODE

    from stm32ai.estimate.core_m33 import CortexM33
    from stm32ai.estimate.trace import Trace

    text, data = (0x08000000, 1 << 20), (0x20000000, 256 << 10)
    elf = build_at(out, text, data, "sram", iterations, "cortex-m33")
    t = Trace(elf, [text, data], core="cortex-m33")
    t.start(pc=t.symbol("Reset_Handler"), sp=int.from_bytes(t.uc.mem_read(text[0], 4), "little"))
    t.run_to(t.symbol("coremark_timed_begin"))
    core = CortexM33()
    r = t.measure(core, ZeroWait(), stop=t.symbol("coremark_timed_end"))

    def stop_at_bkpt(uc, addr, size, _):
        if uc.mem_read(addr, 2)[1] == 0xBE:
            uc.emu_stop()

    t.uc.hook_add(UC_HOOK_CODE, stop_at_bkpt)
    t._emu(50_000_000)
    rc = int.from_bytes(t.uc.mem_read(t.symbol("g_rc"), 4), "little", signed=True)
    return Result(r.cycles, r.instructions, iterations, rc, dict(core.stats), 0, 0)
