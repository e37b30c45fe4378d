"""External memories (stm32ai/extmem.py, docs/external_memory.md): the Discovery kits' SDRAM
and QUADSPI flash, brought up by the generated firmware.

* every register value is checked against a value worked out by hand here from the parts'
  datasheet figures and the reference manual's field layout (not against extmem's output);
* a board file with a wrong part description is refused in one line naming the key;
* placement: pools go external only when asked or when the internal memories cannot hold them
  (activations split, the hottest buffers kept inside), weights never into external RAM;
* the image: the weights in QSPI flash are their own image, left out of the internal .bin, and
  `stm32ai flash --dry-run` prints the commands that program both, with no programmer installed;
* on QEMU's b-l475e-iot01a (no QUADSPI model) the bring-up fails within its timeouts and the
  demo reports it (`result: error`) instead of hanging.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, ROOT, assert_one_line_error, shared_model, stm32ai_cli

from stm32ai.boards import load_board
from stm32ai.errors import Stm32aiError
from stm32ai.extmem import (
    ExternalError,
    mpu_regions,
    octospi_registers,
    psram_registers,
    qspi_registers,
    sdram_registers,
)
from stm32ai.project.generator import plan_placement

SMALL = FIXTURES / "classifier_softmax_int8.tflite"
needs_arm = pytest.mark.skipif(not all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make")),
                               reason="arm-none-eabi-gcc/make not installed")


# ---------------------------------------------------------------------------------------------
# Register values, worked out by hand
# ---------------------------------------------------------------------------------------------
def test_f746_sdram_registers_at_216_mhz():
    """MT48LC4M32B2-6A on a 16-bit bus, HCLK 216 MHz, SDCLK = HCLK/2 = 108 MHz (tCK 9.26 ns)."""
    part = load_board("disco-f746").external["sdram"]
    r = sdram_registers(part, 216_000_000)
    # CAS 2 needs tCK >= 10 ns: 9.26 ns is faster, so CAS 3 (tCK >= 6 ns)
    assert r["CAS"] == 3
    # cycles = ceil(ns / 9.26): tRCD 18 -> 2, tRP 18 -> 2, tRAS 42 -> 5, tRC 60 -> 7, tXSR 70 -> 8,
    # tWR 12 -> 2 raised to max(TRAS - TRCD, TRC - TRCD - TRP) = 3; tMRD 2 clocks
    # SDCR: NC=0 (8 col) | NR=1<<2 (12 rows) | MWID=1<<4 (16 bit) | NB=1<<6 (4 banks)
    #       | CAS=3<<7 | SDCLK=2<<10 | RBURST=1<<12
    assert r["SDCR"] == 0x0 | 0x4 | 0x10 | 0x40 | 0x180 | 0x800 | 0x1000 == 0x19D4
    # SDTR: (TMRD-1) | (TXSR-1)<<4 | (TRAS-1)<<8 | (TRC-1)<<12 | (TWR-1)<<16 | (TRP-1)<<20 | (TRCD-1)<<24
    assert r["SDTR"] == 1 | 7 << 4 | 4 << 8 | 6 << 12 | 2 << 16 | 1 << 20 | 1 << 24 == 0x01126471
    # refresh: 64 ms / 4096 rows = 15.625 us = 1687.5 SDCLK cycles -> 1687 - 20 = 1667, at bit 1
    assert r["SDRTR"] == 1667 << 1
    # commands to bank 1 (CTB1 = bit 4): mode 1 clock enable, 2 precharge all, 3 auto-refresh
    # with NRFS = 8 - 1 at bit 5, 4 load mode with MRD = CAS 3 << 4 | write burst single (bit 9)
    assert (r["CMD_CLK_ENABLE"], r["CMD_PALL"]) == (0x11, 0x12)
    assert r["CMD_AUTOREFRESH"] == 3 | 0x10 | 7 << 5
    assert r["CMD_LOAD_MODE"] == 4 | 0x10 | (3 << 4 | 1 << 9) << 9


def test_sdram_at_100_mhz_takes_cas_2_and_refuses_a_clock_too_fast():
    part = load_board("disco-f746").external["sdram"]
    r = sdram_registers(part, 200_000_000)            # SDCLK 100 MHz: tCK exactly 10 ns
    assert r["CAS"] == 2
    # tRC 60 -> 6, tRAS 42 -> 5, tXSR 70 -> 7, TWR = max(2, 5 - 2, 6 - 2 - 2) = 3
    assert (r["T_TRC"], r["T_TRAS"], r["T_TXSR"], r["T_TWR"]) == (6, 5, 7, 3)
    assert r["SDRTR"] >> 1 == 1562 - 20               # 15.625 us x 100 MHz
    with pytest.raises(ExternalError, match="faster than any CAS latency"):
        sdram_registers(part, 400_000_000)            # SDCLK 200 MHz: tCK 5 ns < 6 ns


def test_qspi_registers_of_the_three_kits():
    b = load_board("disco-f746")
    q = qspi_registers(b.external["qspi"], b.hclk_hz)
    # N25Q128A up to 108 MHz: 216 / (1 + 1); CS high 50 ns = 5.4 -> 6 cycles (CSHT = 5);
    # 16 MiB = 2^(23 + 1): FSIZE 23
    assert (q["PRESCALER"], q["QSPI_HZ"], q["CSHT"], q["FSIZE"]) == (1, 108_000_000, 5, 23)
    assert q["CR"] == 1 << 24 | 3 << 8 | 1 << 4 and q["DCR"] == 23 << 16 | 5 << 8
    # memory-mapped (FMODE 3), data on 4 lines, 8 dummy clocks, 3-byte address on 1 line,
    # instruction on 1 line: QUAD OUTPUT FAST READ 0x6B
    assert q["CCR_MEMORY_MAPPED"] == 3 << 26 | 3 << 24 | 8 << 18 | 2 << 12 | 1 << 10 | 1 << 8 | 0x6B
    # JEDEC READ ID: indirect read (FMODE 1), data on 1 line, no address
    assert q["CCR_READ_ID"] & ~(3 << 12) == 1 << 26 | 1 << 24 | 1 << 8 | 0x9F

    b = load_board("disco-l475-iot01")                 # MX25R6435F at 33 MHz max, HCLK 80 MHz
    q = qspi_registers(b.external["qspi"], b.hclk_hz)
    assert (q["PRESCALER"], q["FSIZE"]) == (2, 22)      # 80 / 3 = 26.7 MHz; 8 MiB
    assert q["CSHT"] == 0                               # 30 ns at 26.7 MHz: 0.8 -> 1 cycle

    b = load_board("disco-f769")                       # MX25L51245G, 64 MiB: 4-byte addresses
    q = qspi_registers(b.external["qspi"], b.hclk_hz)
    assert (q["CCR_MEMORY_MAPPED"] >> 12) & 3 == 3 and q["CCR_MEMORY_MAPPED"] & 0xFF == 0x6C
    assert q["FSIZE"] == 25 and q["PRESCALER"] == 2     # 216 / 3 = 72 MHz <= 104 MHz


def test_h747_sdram_bank_2_at_200_mhz():
    """IS42S32800J-6 on a 32-bit bus at FMC SDRAM bank 2; the FMC kernel clock is HCLK3 200 MHz,
    SDCLK = 200 / 2 = 100 MHz (tCK 10 ns)."""
    b = load_board("disco-h747i")
    assert b.hclk_hz == 200_000_000
    part = b.external["sdram"]
    r = sdram_registers(part, b.hclk_hz)
    assert r["CAS"] == 2                                # CAS 2 needs tCK >= 10 ns: met exactly
    # tRCD 18 -> 2, tRP 18 -> 2, tRAS 42 -> 5, tRC 60 -> 6, tXSR 70 -> 7, tWR 12 -> 2 raised to
    # max(TRAS - TRCD = 3, TRC - TRCD - TRP = 2) = 3, tMRD 2
    assert r["SDTR"] == 1 | 6 << 4 | 4 << 8 | 5 << 12 | 2 << 16 | 1 << 20 | 1 << 24 == 0x01125461
    # SDCR: NC=1 (9 col) | NR=1<<2 (12 rows) | MWID=2<<4 (32 bit) | NB=1<<6 | CAS=2<<7 | SDCLK=2<<10 | RBURST
    assert r["SDCR"] == 1 | 4 | 0x20 | 0x40 | 0x100 | 0x800 | 0x1000 == 0x1965
    # 64 ms / 4096 rows = 15.625 us x 100 MHz = 1562 - 20
    assert r["SDRTR"] == 1542 << 1
    # commands go to bank 2: CTB2 = bit 3
    assert (r["CMD_CLK_ENABLE"], r["CMD_PALL"]) == (0x09, 0x0A)
    assert r["CMD_AUTOREFRESH"] == 3 | 0x08 | 7 << 5
    assert r["CMD_LOAD_MODE"] == 4 | 0x08 | (2 << 4 | 1 << 9) << 9


def test_h747_dual_flash_quadspi():
    """Two MT25QL512ABB (64 MiB each) read together: 128 MiB, QUADSPI_CR.DFM (bit 6)."""
    b = load_board("disco-h747i")
    q = qspi_registers(b.external["qspi"], b.hclk_hz)
    # 133 MHz max: 200 / 2 = 100 MHz (PRESCALER 1); tSHSL 50 ns = 5 cycles (CSHT 4);
    # 128 MiB = 2^(26 + 1): FSIZE 26 (both parts)
    assert (q["PRESCALER"], q["QSPI_HZ"], q["CSHT"], q["FSIZE"]) == (1, 100_000_000, 4, 26)
    assert q["CR"] == 1 << 24 | 3 << 8 | 1 << 6 | 1 << 4 and q["DCR"] == 26 << 16 | 4 << 8
    # 0x6C 4-byte quad output read: FMODE 3, DMODE 4 lines, 8 dummy, ADSIZE 32 bit, ADMODE 1, IMODE 1
    assert q["CCR_MEMORY_MAPPED"] == 3 << 26 | 3 << 24 | 8 << 18 | 3 << 12 | 1 << 10 | 1 << 8 | 0x6C
    # single-part kits keep DFM clear
    f7 = load_board("disco-f769")
    assert not qspi_registers(f7.external["qspi"], f7.hclk_hz)["CR"] & 1 << 6


def test_u585_octal_flash_octospi_registers():
    """MX25LM51245G on OCTOSPI2, read in SPI mode (FAST_READ4B 0x0C, 8 dummy) at SYSCLK 160 MHz."""
    b = load_board("b-u585i-iot02a")
    q = octospi_registers(b.external["ospi"], b.sysclk_hz)
    # 133 MHz max: 160 / (1 + 1) = 80 MHz; tSHSL 30 ns x 80 MHz = 2.4 -> 3 cycles (CSHT 2);
    # 64 MiB = 2^(25 + 1): DEVSIZE 25
    assert (q["PRESCALER"], q["OSPI_HZ"], q["CSHT"], q["DEVSIZE"]) == (1, 80_000_000, 2, 25)
    # DCR1: MTYP 010 (standard) << 24 | DEVSIZE << 16 | CSHT << 8 | DLYBYP (bit 3)
    assert q["DCR1"] == 2 << 24 | 25 << 16 | 2 << 8 | 1 << 3 == 0x02190208
    assert q["CR_MEMORY_MAPPED"] == 3 << 28 and q["CR_INDIRECT_READ"] == 1 << 28
    # memory-mapped CCR: DMODE 001 (bit 24), ADSIZE 32-bit (3 << 12), ADMODE 001 (bit 8), IMODE 001
    assert q["CCR_MEMORY_MAPPED"] == 1 << 24 | 3 << 12 | 1 << 8 | 1 and q["IR_MEMORY_MAPPED"] == 0x0C
    assert q["TCR_MEMORY_MAPPED"] == 1 << 30 | 8                        # SSHIFT, 8 dummy clocks
    # octal reset commands: IMODE 100 (8 lines), ISIZE 01 (16 bit: opcode + complement), IDTR bit 3
    assert q["CCR_RESET_OPI_STR"] & 0x3F == 4 | 1 << 4 and q["CCR_RESET_OPI_DTR"] & 0x3F == 4 | 1 << 4 | 1 << 3
    assert (q["IR_RESET_ENABLE_OPI"], q["IR_RESET_OPI"]) == (0x6699, 0x9966)
    # OCTOSPIM_PCR2 (0x420C4008): CLK, DQS, NCS from OCTOSPI2 (SRC bits 1, 5, 9), IO[3:0] from
    # OCTOSPI2 IO[3:0] (IOLSRC 10), IO[7:4] from OCTOSPI2 IO[7:4] (IOHSRC 11), all enabled
    assert q["PCR_ADDR"] == 0x420C4008 and q["PCR"] == 0x07050333
    assert (q["BASE"], q["WINDOW"]) == (0x420D2400, 0x70000000)


def test_u585_octal_psram_registers():
    """APS6408L on OCTOSPI1 in octal DTR, at SYSCLK 160 MHz. Datasheet figures (board file):
    133 MHz max, latency code 3/4/5 up to 66/109/133 MHz, tCEM 4 us, tCPH 24 ns, 1 KiB pages."""
    b = load_board("b-u585i-iot02a")
    r = psram_registers(b.external["psram"], b.sysclk_hz)
    # 160 / 133 -> divide by 2: PRESCALER 1, 80 MHz; 80 <= 109 MHz: latency code 4
    assert (r["PRESCALER"], r["OSPI_HZ"], r["LATENCY"]) == (1, 80_000_000, 4)
    # fixed latency: reads wait 2 x 4 clocks, writes 4
    assert (r["READ_DCYC"], r["WRITE_DCYC"]) == (8, 4)
    # tCPH 24 ns x 80 MHz = 1.92 -> 2 cycles high (CSHT 1); tCEM 4 us x 80 MHz = 320 cycles, a
    # read releases nCS every REFRESH + 4: REFRESH 316; 8 MiB = 2^(22 + 1): DEVSIZE 22; 1 KiB: CSBOUND 10
    assert (r["CSHT"], r["REFRESH"], r["DEVSIZE"], r["CSBOUND"]) == (1, 316, 22, 10)
    # DCR1: MTYP 010 (AP Memory) << 24 | DEVSIZE << 16 | CSHT << 8, delay block in use (DLYBYP 0)
    assert r["DCR1"] == 2 << 24 | 22 << 16 | 1 << 8 == 0x02160100
    assert r["DCR1_FRCK"] == r["DCR1"] | 1 << 1
    assert (r["DCR2"], r["DCR3"], r["DCR4"]) == (1, 10 << 16, 316)
    # MR0: LT fixed (bit 5) | read latency code 4 - 3 = 001 << 2 | drive full 00
    assert r["MR0"] == 0x24
    # MR4: write latency 4 -> code 100 (bits 7:5), refresh 00, PASR 000; MR8: BL 11 (2K) | RBX (bit 3)
    assert (r["MR4"], r["MR8"]) == (0x80, 0x0B)
    # memory-mapped read: IMODE 100 | ADMODE 100 << 8 | ADDTR << 11 | ADSIZE 11 << 12 | DMODE 100 << 24
    # | DDTR << 27 | DQSE << 29; TCR: DHQC (bit 28) | 8 dummy; instruction 0x00 (read), 0x80 (write)
    ccr = 4 | 4 << 8 | 1 << 11 | 3 << 12 | 4 << 24 | 1 << 27 | 1 << 29
    assert r["CCR_READ"] == r["WCCR"] == ccr == 0x2C003C04
    assert (r["TCR_READ"], r["WTCR"]) == (1 << 28 | 8, 1 << 28 | 4)
    assert (r["IR_READ"], r["WIR"], r["IR_MRW"], r["IR_RESET"]) == (0x00, 0x80, 0xC0, 0xFF)
    assert r["CCR_MRW"] == ccr & ~(1 << 29)            # register write: no DQS
    assert r["CCR_RESET"] == 4 | 4 << 8 | 2 << 12       # 0xFF on 8 lines, 3 address bytes, no data
    # CR: FMODE 11 (memory-mapped) | TCEN (bit 3) | EN
    assert r["CR_MEMORY_MAPPED"] == 3 << 28 | 1 << 3 | 1
    # OCTOSPIM_PCR1 (0x420C4004): port 1 from OCTOSPI1, all enabled (its reset value, 0x03010111)
    assert (r["PCR_ADDR"], r["PCR"]) == (0x420C4004, 0x03010111)
    assert (r["BASE"], r["WINDOW"], r["EN_BIT"], r["DLYB"]) == (0x420D1400, 0x90000000, 1 << 4, 0x420CF000)


def test_psram_timings_follow_the_clock():
    from dataclasses import replace

    part = load_board("b-u585i-iot02a").external["psram"]
    r = psram_registers(part, 100_000_000)             # no division: 100 MHz, still latency 4
    # tCEM 4 us x 100 MHz = 400 - 4; tCPH 24 ns x 100 MHz = 2.4 -> 3 cycles
    assert (r["PRESCALER"], r["LATENCY"], r["REFRESH"], r["CSHT"]) == (0, 4, 396, 2)
    r = psram_registers(part, 266_000_000)             # / 2 = 133 MHz: latency 5, reads wait 10
    assert (r["OSPI_HZ"], r["LATENCY"], r["READ_DCYC"], r["MR0"], r["MR4"]) == (133_000_000, 5, 10, 0x28, 0x40)
    with pytest.raises(ExternalError, match="faster than any latency code"):
        psram_registers(replace(part, latency_max_mhz={3: 66.0}), 160_000_000)
    with pytest.raises(ExternalError, match="do not fit OCTOSPI_DCR1/DCR4"):
        psram_registers(replace(part, cem_ns=100.0), 160_000_000)   # 8 cycles: not even one command


def test_mpu_closes_the_external_banks_then_opens_the_parts():
    b = load_board("disco-f746")
    regs = mpu_regions(b.external, {"sdram": 8 << 20, "qspi": 16 << 20})
    # RASR: XN bit 28, AP 26:24, TEX 21:19, C 17, B 16, SIZE 5:1 (2^(SIZE+1) bytes), ENABLE 0
    assert [(rbar, rasr) for rbar, rasr, _ in regs] == [
        (0x60000000, 1 << 28 | 27 << 1 | 1),                          # 256 MiB strongly-ordered, no access
        (0x90000000, 1 << 28 | 27 << 1 | 1),
        (0x90000000, 6 << 24 | 1 << 17 | 23 << 1 | 1),                # 16 MiB read-only, write-through
        (0xC0000000, 1 << 28 | 3 << 24 | 1 << 19 | 1 << 17 | 1 << 16 | 22 << 1 | 1),  # 8 MiB write-back
    ]
    h7 = load_board("disco-h747i")                     # SDRAM bank 2 (0xD0000000, 32 MiB), 128 MiB flash
    regs = mpu_regions(h7.external, {"sdram": 32 << 20, "qspi": 128 << 20})
    assert [(rbar, rasr) for rbar, rasr, _ in regs][2:] == [
        (0x90000000, 6 << 24 | 1 << 17 | 26 << 1 | 1),
        (0xD0000000, 1 << 28 | 3 << 24 | 1 << 19 | 1 << 17 | 1 << 16 | 24 << 1 | 1),
    ]


# ---------------------------------------------------------------------------------------------
# Board files
# ---------------------------------------------------------------------------------------------
def _board_variant(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load((ROOT / "boards" / "disco-f746.yaml").read_text())
    edit(data["external"])
    p = tmp_path / "disco-f746.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize("edit, words", [
    (lambda e: e["sdram"].update(data_bits=24), "external.sdram.data_bits: 24 is not 8, 16 or 32"),
    (lambda e: e["sdram"].update(controller="quadspi"), "external.sdram.controller: 'quadspi' but region"),
    (lambda e: e["qspi"]["pins"].append({"pin": "PZ3", "af": 9}), "external.qspi.pins[6]"),
    (lambda e: e["qspi"].update(ncs="PA1"), "external.qspi.ncs: 'PA1' is not one of the pins"),
    (lambda e: e["qspi"].pop("jedec_id"), "external.qspi: missing jedec_id"),
    (lambda e: e.update(nowhere={"controller": "quadspi"}), "external.nowhere: no memory region"),
    (lambda e: e["sdram"].update(part='X*/ "evil'), "external.sdram.part: 'X*/ \"evil' is not a plain"),
    (lambda e: e["qspi"].update(stldr="a b;rm"), "external.qspi.stldr: 'a b;rm' is not a plain"),
    (lambda e: e["sdram"].update(bank=2), "external.sdram: FMC SDRAM bank 2 is at 0xD0000000, the region at 0xC"),
    (lambda e: e["qspi"].update(dual=True), "external.qspi.pins: dual-flash mode needs CLK, NCS and both"),
    (lambda e: e["qspi"].update(dual="yes"), "external.qspi.dual: expected true or false"),
])
def test_bad_part_description_is_one_line(tmp_path, edit, words):
    with pytest.raises(Stm32aiError, match=re.escape(words)):
        load_board(_board_variant(tmp_path, edit))


@pytest.mark.parametrize("edit, words", [
    (lambda e: e["psram"].update(drive="strong"), "external.psram.drive: 'strong' is not one of full"),
    (lambda e: e["psram"]["pins"].pop(), "external.psram.pins: an octal PSRAM needs CLK, NCS, DQS and IO0-IO7"),
    (lambda e: e["psram"].update(latency_max_mhz={9: 300}), "external.psram.latency_max_mhz: expected"),
    (lambda e: e["psram"].update(octospi=2), "external.psram: OCTOSPI2's memory-mapped space is at 0x70000000"),
    (lambda e: e["psram"].update(page_bytes=1000), "external.psram.page_bytes: 1000 is not a power of two"),
    (lambda e: e["psram"].pop("cem_ns"), "external.psram: missing cem_ns"),
])
def test_bad_psram_description_is_one_line(tmp_path, edit, words):
    data = yaml.safe_load((ROOT / "boards" / "b-u585i-iot02a.yaml").read_text())
    edit(data["external"])
    p = tmp_path / "b-u585i-iot02a.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(Stm32aiError, match=re.escape(words)):
        load_board(p)


# ---------------------------------------------------------------------------------------------
# Placement
# ---------------------------------------------------------------------------------------------
def test_external_only_for_what_the_chip_cannot_hold():
    b = load_board("disco-f746")
    small = plan_placement(b, activations_bytes=20_000, weights_bytes=50_000)
    assert (small.activations_region, small.weights_region) == ("dtcm", "flash")
    big = plan_placement(b, activations_bytes=20_000, weights_bytes=3 << 20)   # > 1 MiB of flash
    assert (big.weights_region, big.weights_copied) == ("qspi", False)


def test_u585_activations_go_to_the_psram_only_when_the_srams_cannot_hold_them():
    """The kit's activation list ends with the PSRAM: a pool that fits an SRAM stays there; one
    that does not (palm_detection_full_192: 591 KB, buffers of 295 KB alive together) is split,
    the hottest buffers in SRAM3 and the rest in the PSRAM; --activations-pool psram asks for it."""
    b = load_board("b-u585i-iot02a")
    assert b.activations_pool[-1] == "psram"
    assert plan_placement(b, activations_bytes=400_000, weights_bytes=50_000).activations_region == "sram3"
    p = plan_placement(b, activations_bytes=20_000, weights_bytes=50_000, activations_pool=["psram"])
    assert p.activations_region == "psram"
    # never weights in the PSRAM (it is up only after the reset-time copy)
    with pytest.raises(Stm32aiError, match="psram is external RAM"):
        plan_placement(b, activations_bytes=20_000, weights_bytes=50_000, weights_pool=["psram"])


def test_palm_detection_is_split_into_the_u585_psram():
    from stm32ai.pipeline import compile_model
    from stm32ai.project.build import place_model

    c = compile_model(shared_model("openmv/palm_detection_full_192.tflite"), "network")
    p = place_model(load_board("b-u585i-iot02a"), c, None, None)
    regions = [q["region"] for q in p.activation_pools]
    assert regions[0] == "sram3" and "psram" in regions and p.weights_region == "flash"


def test_boot_copy_of_the_weights():
    """--weights-copy ram (pool entry ram@qspi): the image in the QSPI flash, run from RAM: the
    internal RAMs of the activation list last first, then the SDRAM; activations placed after."""
    from stm32ai.placement import boot_copy_targets

    b = load_board("disco-h747i")
    assert boot_copy_targets(b) == ["sram123", "axi_sram", "dtcm", "sdram"]
    small = plan_placement(b, activations_bytes=20_000, weights_bytes=200_000, weights_pool=["ram@qspi"])
    assert (small.weights_region, small.weights_load, small.weights_copied) == ("sram123", "qspi", False)
    assert small.activations_region == "dtcm"
    # 400 KB: not in sram123 (288K), in axi_sram (512K); 3 MB: only the SDRAM holds it
    assert plan_placement(b, activations_bytes=20_000, weights_bytes=400_000,
                          weights_pool=["ram@qspi"]).weights_region == "axi_sram"
    big = plan_placement(b, activations_bytes=20_000, weights_bytes=3 << 20, weights_pool=["ram@qspi"])
    assert (big.weights_region, big.weights_load) == ("sdram", "qspi")
    assert plan_placement(b, activations_bytes=20_000, weights_bytes=3 << 20,
                          weights_pool=["sdram@qspi"]).weights_region == "sdram"
    with pytest.raises(Stm32aiError, match="axi_sram has"):
        plan_placement(b, activations_bytes=20_000, weights_bytes=3 << 20, weights_pool=["axi_sram@qspi"])
    with pytest.raises(Stm32aiError, match="flash is not an external flash"):
        plan_placement(b, activations_bytes=20_000, weights_bytes=1000, weights_pool=["ram@flash"])
    with pytest.raises(Stm32aiError, match="must be the only entry"):
        plan_placement(b, activations_bytes=20_000, weights_bytes=1000, weights_pool=["ram@qspi", "flash"])


def test_weights_copy_option_is_refused_in_one_line_where_it_cannot_work():
    assert_one_line_error(stm32ai_cli("generate", str(SMALL), "--board", "nucleo-f401re", "--weights-copy", "ram",
                                      "-o", "/nonexistent/x", cwd=ROOT),
                          "--weights-copy: board nucleo-f401re has no external flash")


def test_weights_larger_than_the_flash_go_to_the_qspi_flash():
    """AD float (1.06 MB of weights) on the L475 kit (1 MiB flash): weights to the QSPI flash."""
    from stm32ai.pipeline import compile_model
    from stm32ai.project.build import place_model

    c = compile_model(shared_model("mlperf_tiny/ad01_fp32.tflite"), "network")
    p = place_model(load_board("disco-l475-iot01"), c, None, None)
    assert p.weights_region == "qspi" and p.activations_region in ("sram1", "sram2")


# ---------------------------------------------------------------------------------------------
# The generated project
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def external_project(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ext") / "p"
    r = stm32ai_cli("generate", str(SMALL), "--board", "disco-f746", "-o", str(out),
                    "--weights-pool", "qspi", "--activations-pool", "sdram", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return out


def test_bring_up_code_and_linker_script(external_project):
    p = external_project
    lds = (p / "disco-f746.ld").read_text()
    assert re.search(r"\.nn_weights : ALIGN\(8\)\s*\{[^}]*\}\s*> QSPI", lds)
    assert re.search(r"\.nn_activations \(NOLOAD\) : ALIGN\(8\)\s*\{[^}]*\}\s*> SDRAM", lds)
    src = (p / "Core/Src/extmem.c").read_text()
    for line in ("REG32(FMC_SDCR1) = 0x000019D4u;", "REG32(FMC_SDTR1) = 0x01126471u;",
                 "REG32(FMC_SDRTR) = 0x00000D06u;", "REG32(QSPI_CCR) = 0x0F20256Bu;",
                 "REG32(0xE000EDA0u) = 0x130B002Du;"):
        assert line in src, line
    # every wait is bounded; a failure is reported, not hung on
    assert "while (1)" not in src and "for (;;)" not in src
    assert "EXTMEM_WAIT_LOOPS" in src
    main = (p / "Core/Src/main.c").read_text()
    assert main.index("extmem_report()") < main.index("ai_create(")
    system = (p / "Core/Src/system.c").read_text()
    assert system.index("extmem_init();") < system.index("cache_enable();\n#endif\n}")


def test_h747_bring_up_code_and_boot_copy(tmp_path):
    """STM32H747I-DISCO: SDRAM bank 2 (SDCR/SDTR written to both banks' registers, FMCEN), the
    dual-flash id check, and the weights copied from the QSPI flash into the SDRAM at boot."""
    out = tmp_path / "p"
    r = stm32ai_cli("generate", str(SMALL), "--board", "disco-h747i", "-o", str(out), "--weights-pool",
                    "sdram@qspi", "--activations-pool", "sdram", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    src = (out / "Core/Src/extmem.c").read_text()
    for line in ("REG32(FMC_SDCR2) = 0x00001965u;", "REG32(FMC_SDTR2) = 0x01125461u;",
                 "REG32(FMC_BCR1) |= 0x80000000u;", "#define FMC_SDCR2 (0x52004000u + 0x144u)",
                 "REG32(QSPI_CR) = 0x01000350u;", "REG32(QSPI_DCR) = 0x001A0400u;",
                 "k_qspi_id[QSPI_ID_BYTES] = {0x20u, 0x20u, 0xBAu, 0xBAu, 0x20u, 0x20u};",
                 "REG32(0xE000ED9Cu) = 0xD0000000u;", "g_copy_status = weights_copy();"):
        assert line in src, line
    assert src.index("mpu_configure();\n  g_copy_status") > 0   # the copy runs after the bring-up
    lds = (out / "disco-h747i.ld").read_text()
    assert re.search(r"\.nn_weights : ALIGN\(8\)\s*\{[^}]*\}\s*> SDRAM AT > QSPI", lds)
    copy_table = lds[lds.index(".copy_table"):lds.index("__copy_table_end")]
    assert "nn_weights" not in copy_table                 # not copied at reset: the QSPI is not up yet


@needs_arm
@pytest.mark.slow
def test_h747_images_and_flash_dry_run(tmp_path):
    out = tmp_path / "p"
    r = stm32ai_cli("generate", str(SMALL), "--board", "disco-h747i", "-o", str(out), "--weights-copy", "ram",
                    "--activations-pool", "sdram", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["make", "-C", str(out), "-j2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "warning" not in (r.stdout + r.stderr).lower()
    hdr = subprocess.run(["arm-none-eabi-objdump", "-h", str(out / "build/firmware.elf")], capture_output=True,
                         text=True).stdout
    row = next(ln.split() for ln in hdr.splitlines() if ".nn_weights" in ln)
    size, vma, lma = int(row[2], 16), int(row[3], 16), int(row[4], 16)
    assert (vma, lma) == (0x30000000, 0x90000000)      # run in sram123, loaded from the QSPI flash
    assert (out / "build/firmware_qspi.bin").stat().st_size == size
    assert (out / "build/firmware.bin").stat().st_size < 1 << 20
    r = stm32ai_cli("flash", str(out), "--dry-run", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "external flash: qspi (0x90000000)" in r.stdout
    if not (shutil.which("openocd") or shutil.which("STM32_Programmer_CLI")):
        assert "openocd -f board/stm32h747i-disco.cfg -c 'program" in r.stdout
        assert "ExternalLoader/MT25TL01G_STM32H747I-DISCO.stldr" in r.stdout


def test_u585_psram_bring_up_code(tmp_path):
    """--activations-pool psram: extmem.c writes the values of test_u585_octal_psram_registers in
    the order of docs/external_memory.md and checks a written pattern before the model runs."""
    out = tmp_path / "p"
    r = stm32ai_cli("generate", str(SMALL), "--board", "b-u585i-iot02a", "-o", str(out), "--activations-pool",
                    "psram", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    lds = (out / "b-u585i-iot02a.ld").read_text()
    assert re.search(r"\.nn_activations \(NOLOAD\) : ALIGN\(8\)\s*\{[^}]*\}\s*> PSRAM", lds)
    src = (out / "Core/Src/extmem.c").read_text()
    order = ["REG32(0x420C4004u) = 0x03010111u;", "REG32(PSR_DCR1) = 0x02160100u;", "REG32(PSR_DCR2) = 0x00000001u;",
             "REG32(PSR_DCR3) = 0x000A0000u;", "REG32(PSR_DCR4) = 0x0000013Cu;", "psram_delay_block();",
             "psram_command(0x00002404u, 0u, 0x000000FFu, 0u, 0, 0u)",
             "{0x00u, 0x00000024u}, {0x04u, 0x00000080u}, {0x08u, 0x0000000Bu}",
             "REG32(PSR_WCCR) = 0x2C003C04u;", "REG32(PSR_WTCR) = 0x10000004u;", "REG32(PSR_WIR) = 0x00000080u;",
             "REG32(PSR_CCR) = 0x2C003C04u;", "REG32(PSR_TCR) = 0x10000008u;", "REG32(PSR_IR) = 0x00000000u;",
             "| 0x30000009u;", "return psram_check();"]
    init = src[src.index("static const char *psram_init(void)"):]
    at = [init.find(line) for line in order]
    assert all(i >= 0 for i in at), [line for line, i in zip(order, at, strict=True) if i < 0]
    assert at == sorted(at)
    assert "#define DLYB_CR (0x420CF000u + 0x0u)" in src and "#define PSR_BASE 0x420D1400u" in src
    assert "while (1)" not in src and "for (;;)" not in src
    assert '"extmem: psram ok (APS6408L-3OBM, 8388608 B, 80000000 Hz octal DTR, latency 4)\\n"' in src
    main = (out / "Core/Src/main.c").read_text()
    assert main.index("extmem_report()") < main.index("ai_create(")


def test_u585_boot_copy_into_the_psram_waits_for_its_check(tmp_path):
    """--weights-pool psram@ospi: the weights' image in the octal flash, copied into the PSRAM
    only when the PSRAM passed its read-back check (not the SDRAM status of the F7/H7 kits)."""
    out = tmp_path / "p"
    r = stm32ai_cli("generate", str(SMALL), "--board", "b-u585i-iot02a", "-o", str(out), "--weights-pool",
                    "psram@ospi", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    src = (out / "Core/Src/extmem.c").read_text()
    copy = src[src.index("static const char *weights_copy(void)"):]
    copy = copy[:copy.index("\n}\n")]
    assert 'if (g_psram_status != 0) {\n    return "psram is not up";' in copy and "g_sdram_status" not in copy
    assert src.index("g_psram_status = psram_init();") < src.index("g_copy_status = weights_copy();")
    lds = (out / "b-u585i-iot02a.ld").read_text()
    assert re.search(r"\.nn_weights : ALIGN\(8\)\s*\{[^}]*\}\s*> PSRAM AT > OSPI", lds)


@needs_arm
@pytest.mark.slow
def test_u585_octal_flash_and_psram_build_and_flash_dry_run(tmp_path):
    """Weights in the octal flash (OCTOSPI2) and activations in the octal PSRAM (OCTOSPI1): both
    bring-ups in one firmware, built warning-free; the dry run programs internal + external flash."""
    out = tmp_path / "p"
    r = stm32ai_cli("generate", str(SMALL), "--board", "b-u585i-iot02a", "-o", str(out), "--weights-pool", "ospi",
                    "--activations-pool", "psram", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    src = (out / "Core/Src/extmem.c").read_text()
    for line in ("REG32(OSPI_DCR1) = 0x02190208u;", "REG32(0x420C4008u) = 0x07050333u;",
                 "REG32(OSPI_TCR) = 0x40000008u;", "k_ospi_id[3] = {0xC2u, 0x85u, 0x3Au};",
                 "REG32(PSR_DCR1) = 0x02160100u;", "REG32(0x420C4004u) = 0x03010111u;"):
        assert line in src, line
    assert "while (1)" not in src and "for (;;)" not in src
    r = subprocess.run(["make", "-C", str(out), "-j2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "warning" not in (r.stdout + r.stderr).lower()
    hdr = subprocess.run(["arm-none-eabi-objdump", "-h", str(out / "build/firmware.elf")], capture_output=True,
                         text=True).stdout
    row = next(ln.split() for ln in hdr.splitlines() if ".nn_weights" in ln)
    assert int(row[3], 16) == 0x70000000 and (out / "build/firmware_ospi.bin").stat().st_size == int(row[2], 16)
    r = stm32ai_cli("flash", str(out), "--dry-run", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "external flash: ospi (0x70000000)" in r.stdout
    if not shutil.which("STM32_Programmer_CLI"):
        assert "ExternalLoader/MX25LM51245G_STM32U585I-IOT02A.stldr" in r.stdout
    assert "openocd" not in r.stdout.replace("STM32_Programmer_CLI", "")   # no OpenOCD config has the bank
    assert_one_line_error(stm32ai_cli("flash", str(out), "--dry-run", "--programmer", "openocd", cwd=ROOT),
                          "declares no OCTOSPI flash bank")


@needs_arm
@pytest.mark.slow
def test_images_and_flash_dry_run(external_project):
    p = external_project
    r = subprocess.run(["make", "-C", str(p), "-j2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "warning" not in (r.stdout + r.stderr).lower()
    internal, qspi = p / "build/firmware.bin", p / "build/firmware_qspi.bin"
    assert internal.stat().st_size < 1 << 20          # the 0x90000000 section is not in it
    nm = subprocess.run(["arm-none-eabi-objdump", "-h", str(p / "build/firmware.elf")], capture_output=True,
                        text=True).stdout
    size = next(int(ln.split()[2], 16) for ln in nm.splitlines() if ".nn_weights" in ln)
    vma = next(int(ln.split()[3], 16) for ln in nm.splitlines() if ".nn_weights" in ln)
    assert vma == 0x90000000 and qspi.stat().st_size == size
    r = stm32ai_cli("flash", str(p), "--dry-run", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "external flash: qspi (0x90000000)" in r.stdout
    if not (shutil.which("openocd") or shutil.which("STM32_Programmer_CLI")):
        # no programmer that can write the QSPI flash installed: the commands of both are printed
        assert "openocd -f board/stm32f746g-disco.cfg -c 'program" in r.stdout
        assert "-el '<STM32CubeProgrammer>/bin/ExternalLoader/N25Q128A_STM32F746G-DISCO.stldr'" in r.stdout
    assert_one_line_error(stm32ai_cli("flash", str(p), "--dry-run", "--programmer", "st-flash", cwd=ROOT),
                          "st-flash cannot program the external flash")


def _has_l475_machine() -> bool:
    if not all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm")):
        return False
    out = subprocess.run(["qemu-system-arm", "-M", "help"], capture_output=True, text=True).stdout
    return any(ln.split()[:1] == ["b-l475e-iot01a"] for ln in out.splitlines())


@pytest.mark.slow
@pytest.mark.skipif(not _has_l475_machine(), reason="qemu-system-arm lacks machine b-l475e-iot01a")
@pytest.mark.parametrize("option", [["--weights-pool", "qspi"], ["--weights-copy", "ram"]])
def test_failed_bring_up_is_reported_not_hung_on(tmp_path, option):
    """QEMU 10's b-l475e-iot01a models no QUADSPI: the JEDEC id command never completes. The
    bounded waits give up, the demo says so and does not run the model; with the boot copy,
    the copy is not attempted from an unmapped flash and says so too."""
    from stm32ai.project.run import build_project, run_qemu

    out = tmp_path / "p"
    r = stm32ai_cli("generate", str(SMALL), "--board", "disco-l475-iot01", "-o", str(out), *option, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    build_project(out)
    code, text = run_qemu(out, load_board("disco-l475-iot01"), timeout_s=120, stop_on_done=True)
    assert re.search(r"^extmem: qspi failed \(.+\)$", text, re.M), text
    if option[0] == "--weights-copy":
        assert re.search(r"^extmem: weights copy qspi -> sram\d failed \(qspi is not memory-mapped\)$", text, re.M)
    assert "result: error" in text and "done: 1" in text and code == 1
