"""Cortex-M7 calibration against silicon: the CoreMark library of /work/shared/calibration/coremark
(GCC 12.2 -O2) through the trace runner, the Cortex-M7 model and the board's memory system,
against ST's published CoreMark/MHz (docs/estimate.md, "Cortex-M7 calibration").

ST's figures come from a different compiler set-up (IAR/Keil, flags not published). How much
that alone moves CoreMark/MHz is taken from an independent silicon measurement on the same core
family: an STM32F405 at 168 MHz, code in flash behind the ART, scored 436.68 CoreMark (2.60
CM/MHz, Keil MDK -O3; github XIVN1987/MCUCode) where ST publishes 566 (3.37): ST's set-up is 1.30x
a plain optimising build. The band (+-15 %) is asserted on the published figure divided by that
factor; the raw difference is printed and documented."""

from __future__ import annotations

import shutil

import pytest

from stm32ai.boards import load_board

pytest.importorskip("unicorn")
m7_calib = pytest.importorskip("m7_calib")

COMPILER_FACTOR = 566 / 436.68      # ST's F405 figure / Keil -O3 measured on an F405 (README)
HAVE = shutil.which("arm-none-eabi-gcc") and (m7_calib.COREMARK / "lib" / "libcoremark_cortex-m7.a").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not HAVE, reason="arm-none-eabi-gcc or the CoreMark calibration library missing")
@pytest.mark.parametrize("board_id", ["disco-f746", "nucleo-h743zi"])
def test_coremark_per_mhz_within_band_of_st_figure(tmp_path, board_id):
    board = load_board(board_id)
    elf = m7_calib.build(board, tmp_path, data_region="dtcm", iterations=2)
    r = m7_calib.trace(elf, board, iterations=2)
    assert r.rc == 0                                  # CoreMark's own CRC checks passed
    assert 280_000 < r.instructions / r.iterations < 292_000     # README: 290 098 / iteration (QEMU)
    published = m7_calib.PUBLISHED[board_id]
    raw = r.coremark_per_mhz / published - 1
    normalised = r.coremark_per_mhz / (published / COMPILER_FACTOR) - 1
    print(f"{board_id}: {r.coremark_per_mhz:.3f} CM/MHz estimated, {published:.3f} published "
          f"({raw:+.1%}; {normalised:+.1%} after the compiler factor {COMPILER_FACTOR:.2f})")
    assert abs(normalised) < 0.15
    assert r.icache_misses < 200                       # CoreMark (7 KB) fits the L1 I-cache
