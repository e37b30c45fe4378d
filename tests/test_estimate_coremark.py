"""CoreMark through the estimator (calibration against silicon, docs/estimate.md).

References, all independent of the estimator: QEMU's instruction count for the same library
(../shared/calibration/coremark/README.md: 293,412 instructions per iteration on the Cortex-M4,
iteration 1 / 2 = 293,413 / 293,447) and the CoreMark/MHz measured on real STM32F405 silicon
with code in flash (Keil MDK -O3: 2.60, README "Extra data points"). ST's headline figures
(3.37-3.42) come from a different compiler; the docs table puts the estimate beside them and
explains the gap."""

from __future__ import annotations

import shutil

import pytest

from stm32ai.boards import load_board
from stm32ai.estimate.coremark import COREMARK_DIR, PUBLISHED, estimate_coremark

pytestmark = [
    pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="no arm-none-eabi-gcc"),
    pytest.mark.skipif(not (COREMARK_DIR / "lib" / "libcoremark_cortex-m4.a").is_file(),
                       reason="../shared/calibration/coremark not present"),
]


@pytest.fixture(scope="module")
def f405():
    return estimate_coremark(load_board("qemu-netduinoplus2"), iterations=2)


def test_trace_runs_the_instructions_qemu_counts(f405):
    # iterations 1 and 2 under QEMU: 293,413 + 293,447 (the hooks' own instructions differ by a few)
    assert abs(f405.instructions - (293_413 + 293_447)) <= 20


def test_coremark_within_band_of_f405_silicon(f405):
    """STM32F405 @ 168 MHz, 5 WS + ART, code in flash, a non-ST build (Keil -O3): 2.60 CoreMark/MHz."""
    assert f405.cm_per_mhz == pytest.approx(2.60, rel=0.15)


def test_coremark_versus_st_published_figure(f405):
    """ST's headline (3.37 on the F407, another compiler): the estimate for our GCC -O2 build is
    below it by the compiler gap docs/estimate.md explains, and never above it."""
    d = f405.difference
    assert d is not None and PUBLISHED["qemu-netduinoplus2"].cm_per_mhz == 3.37
    assert -0.30 <= d <= 0.0


def test_flash_wait_states_cost_little_with_the_art():
    """CoreMark's hot loops run from the ART I-cache: 5 WS at 120 MHz (L4R5) costs under 2 % over
    2 WS at 84 MHz (F401), as ST's near-equal CoreMark/MHz across these parts say."""
    l4 = estimate_coremark(load_board("nucleo-l4r5zi"), iterations=1)
    f401 = estimate_coremark(load_board("nucleo-f401re"), iterations=1)
    assert l4.instructions == f401.instructions
    assert 1.0 < l4.cycles / f401.cycles < 1.02
