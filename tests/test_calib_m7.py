"""Cortex-M7 and Cortex-M33 calibration against silicon: the CoreMark libraries of
../shared/calibration/coremark (GCC 12.2 -O2) through the estimator (stm32ai.estimate.coremark),
beside ST's published CoreMark/MHz (docs/estimate.md, "Cortex-M7 calibration").

ST's figures come from its own compiler set-up (IAR/Keil, flags not published). How much that
alone moves CoreMark/MHz is measured on silicon of the same family: an STM32F405 at 168 MHz,
code in flash behind the ART, scored 436.68 CoreMark (2.60 CM/MHz, Keil MDK -O3; README "Extra
data points") where ST publishes 566 (3.37): ST's set-up is 1.30x a plain optimising build. The
band (+-15 %) is asserted on the published figure divided by that factor; the raw difference is
in docs/estimate.md. References independent of the estimator: QEMU's instruction count for the
same library (README: 290,098 per iteration on the M7, 293,413 on the M33) and ST's figures."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from stm32ai.boards import load_board
from stm32ai.estimate.coremark import COREMARK_DIR, PUBLISHED, build_coremark, estimate_coremark

COMPILER_FACTOR = 566 / 436.68      # ST's F405 figure / Keil -O3 measured on an F405
pytestmark = [
    pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="no arm-none-eabi-gcc"),
    pytest.mark.skipif(not (COREMARK_DIR / "lib" / "libcoremark_cortex-m7.a").is_file(),
                       reason="../shared/calibration/coremark not present"),
]


@pytest.mark.slow
@pytest.mark.parametrize("board_id", ["disco-f746", "nucleo-h743zi"])
def test_m7_coremark_within_band_of_st_figure(board_id):
    e = estimate_coremark(load_board(board_id), iterations=2)
    # QEMU mps2-an500, iterations 1 and 2: 290,096 + 290,131 (the hooks differ by a few)
    assert abs(e.instructions - (290_096 + 290_131)) <= 20
    target = PUBLISHED[board_id].cm_per_mhz / COMPILER_FACTOR
    assert abs(e.cm_per_mhz / target - 1) < 0.15, (e.cm_per_mhz, target)
    assert -0.35 < e.difference < 0                   # below ST's headline by about the compiler gap


class _ZeroWait:
    """Every access zero-wait (a core model on its own), with the memory-system counters."""

    now = 0

    def fetch(self, addr: int, size: int) -> int:
        return 0

    read = write = fetch

    def bytes_read(self, region: str) -> int:
        return 0

    def regions(self) -> list[str]:
        return ["all"]

    def read_counters(self) -> list[int]:
        return [0]


@pytest.mark.slow
def test_m33_coremark_within_band_of_st_figure(tmp_path):
    """No board file has a Cortex-M33 yet: the library at an STM32U5-like map (flash 0x08000000,
    SRAM 0x20000000), every access zero-wait (the U5's ICACHE hitting), against ST's STM32U575
    figure (651 CoreMark at 160 MHz = 4.07, datasheet cover page)."""
    from stm32ai.estimate.core_m33 import CortexM33
    from stm32ai.estimate.trace import Trace

    regions = {"flash": SimpleNamespace(origin=0x08000000, length=1 << 20),
               "sram": SimpleNamespace(origin=0x20000000, length=256 << 10)}
    board = SimpleNamespace(core="cortex-m33", text_region="flash", data_region="sram", region=regions.__getitem__,
                            arch_flags=["-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"])
    elf = build_coremark(board, tmp_path, iterations=2)
    t = Trace(elf, [(r.origin, r.length) for r in regions.values()], core="cortex-m33")
    t.run_to(t.symbol("coremark_timed_begin"))
    r = t.measure(CortexM33(), _ZeroWait(), stop=t.symbol("coremark_timed_end"))
    t.run_to(t.symbol("harness_done"))
    assert int.from_bytes(t.uc.mem_read(t.symbol("g_rc"), 4), "little", signed=True) == 0
    assert abs(r.instructions - (293_414 + 293_448)) <= 20
    cm_per_mhz = 1e6 / (r.cycles / 2)
    assert abs(cm_per_mhz / ((651 / 160) / COMPILER_FACTOR) - 1) < 0.15, cm_per_mhz
