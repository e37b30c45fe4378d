"""Board files: derived clocks, UART divisors and memory maps against the vendor manuals, and the
loader's one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stm32ai.boards import ARMV6M_CORES, Board, list_boards, load_board, parse_size, uart_divisor
from stm32ai.errors import Stm32aiError
from stm32ai.project.clockregs import clock_registers

K, M = 1024, 1024 * 1024
MHZ = 1_000_000

ALL = ["disco-f746", "disco-f769", "disco-l475-iot01", "nucleo-f401re", "nucleo-f746zg",
       "nucleo-h743zi", "nucleo-l4r5zi", "qemu-mps2-an386", "qemu-mps2-an500", "qemu-netduinoplus2"]
# issue 22, Cortex-M33 and new Cortex-M7 boards
ALL_M33_M7 = ["b-u585i-iot02a", "disco-h747i", "nucleo-h563zi", "nucleo-h7a3zi-q", "nucleo-u575zi-q",
              "qemu-mps2-an505"]
ALL = sorted(ALL + ["nucleo-c031c6", "nucleo-g071rb", "nucleo-g0b1re", "qemu-microbit"])  # Armv6-M (issue 22)


def test_list_boards_has_every_board_sorted():
    ids = [b.id for b in list_boards()]
    assert ids == sorted(ids)
    assert set(ALL) | set(ALL_M33_M7) <= set(ids)


# (board, core clock, HCLK, PCLK1, PCLK2) in MHz. Maxima from the datasheets: F746/F769 216 MHz
# (APB1 54, APB2 108, RM0385/RM0410 RCC); H743 400 MHz at VOS1 with AXI 200, APB 100 (RM0433);
# L4R5 120 MHz (Range 1 boost, RM0432); L475 80 MHz (RM0351); F401 84 MHz (APB1 42, RM0368);
# the QEMU netduinoplus2 runs its F405 at a fixed 168 MHz; mps2 at 25 MHz.
CLOCKS = [
    ("disco-f746", 216, 216, 54, 108),
    ("disco-f769", 216, 216, 54, 108),
    ("nucleo-f746zg", 216, 216, 54, 108),
    ("nucleo-h743zi", 400, 200, 100, 100),
    ("nucleo-l4r5zi", 120, 120, 120, 120),
    ("disco-l475-iot01", 80, 80, 80, 80),
    ("nucleo-f401re", 84, 84, 42, 84),
    ("qemu-netduinoplus2", 168, 168, 42, 84),
    ("qemu-mps2-an386", 25, 25, 25, 25),
    ("qemu-mps2-an500", 25, 25, 25, 25),
    # U575/U585 160 MHz at range 1 (RM0456, DS13737/DS13086); H563 250 MHz at VOS0 (RM0481,
    # DS14258); H7A3 280 MHz at VOS0 with AXI 280, APB 140 (RM0455, DS13195); H747 CM7 400 MHz at
    # VOS1, AXI 200, APB 100 (RM0399, DS12930); the QEMU AN505 at 20 MHz
    ("nucleo-u575zi-q", 160, 160, 160, 160),
    ("b-u585i-iot02a", 160, 160, 160, 160),
    ("nucleo-h563zi", 250, 250, 250, 250),
    ("nucleo-h7a3zi-q", 280, 280, 140, 140),
    ("disco-h747i", 400, 200, 100, 100),
    ("qemu-mps2-an505", 20, 20, 20, 20),
]


@pytest.mark.parametrize("bid,cpu,hclk,pclk1,pclk2", CLOCKS)
def test_derived_clocks(bid, cpu, hclk, pclk1, pclk2):
    b = load_board(bid)
    assert b.cpu_hz == cpu * MHZ
    assert b.sysclk_hz == cpu * MHZ  # no board divides SYSCLK before the core
    assert b.hclk_hz == hclk * MHZ
    assert b.pclk1_hz == pclk1 * MHZ
    assert b.pclk2_hz == pclk2 * MHZ


def test_pll_intermediate_frequencies():
    f7 = load_board("disco-f746").clock
    assert f7.pll_input_hz == 1 * MHZ and f7.vco_hz == 432 * MHZ and f7.pll_q_hz == 48 * MHZ
    nf7 = load_board("nucleo-f746zg").clock
    assert nf7.oscillator_hz == 8 * MHZ and nf7.hse_bypass and nf7.vco_hz == 432 * MHZ
    h7 = load_board("nucleo-h743zi").clock
    assert h7.pll_input_hz == 2 * MHZ and h7.vco_hz == 800 * MHZ and h7.pll_q_hz == 200 * MHZ
    l4p = load_board("nucleo-l4r5zi").clock
    assert l4p.oscillator_hz == 16 * MHZ and l4p.vco_hz == 240 * MHZ
    f401 = load_board("nucleo-f401re").clock
    assert f401.vco_hz == 336 * MHZ and f401.pll_q_hz == 48 * MHZ  # USB 48 MHz


# UART divisors at the target clocks, 115200 baud. USART oversampling 16: BRR = f/baud rounded
# (RM0385 §31.5.4, RM0090 §30.3.4); LPUART: 256 f/baud (RM0432 §53.4.7); CMSDK: f // baud.
UARTS = [
    ("disco-f746", "USART1", 0x40011000, 938),        # 108 MHz / 115200 = 937.5
    ("disco-f769", "USART1", 0x40011000, 938),
    ("nucleo-f746zg", "USART3", 0x40004800, 469),     # 54 MHz
    ("nucleo-h743zi", "USART3", 0x40004800, 868),     # 100 MHz
    ("nucleo-l4r5zi", "LPUART1", 0x40008000, 266667),  # 256 * 120 MHz / 115200
    ("disco-l475-iot01", "USART1", 0x40013800, 694),  # 80 MHz
    ("nucleo-f401re", "USART2", 0x40004400, 365),     # 42 MHz
    ("qemu-netduinoplus2", "USART1", 0x40011000, 729),  # 84 MHz (QEMU ignores BRR)
    ("qemu-mps2-an386", "UART0", 0x40004000, 217),    # 25 MHz
    ("qemu-mps2-an500", "UART0", 0x40004000, 217),    # 25 MHz
    ("nucleo-u575zi-q", "USART1", 0x40013800, 1389),  # 160 MHz
    ("b-u585i-iot02a", "USART1", 0x40013800, 1389),
    ("nucleo-h563zi", "USART3", 0x40004800, 2170),    # 250 MHz
    ("nucleo-h7a3zi-q", "USART3", 0x40004800, 1215),  # 140 MHz
    ("disco-h747i", "USART1", 0x40011000, 868),       # 100 MHz
    ("qemu-mps2-an505", "UART0", 0x50200000, 173),    # 20 MHz, secure alias
]


@pytest.mark.parametrize("bid,inst,base,div", UARTS)
def test_console_uart(bid, inst, base, div):
    b = load_board(bid)
    assert b.console.instance == inst
    assert b.console.base == base
    assert b.uart_divisor == div
    # the CMSDK UART's integer divisor at 20 MHz (AN505) is 0.35 % off; QEMU ignores it anyway
    assert abs(b.uart_actual_baud - 115200) / 115200 < (0.004 if b.console.kind == "cmsdk" else 0.002)


def test_console_pins_match_the_board_manuals():
    pins = {bid: (str(load_board(bid).console.tx), str(load_board(bid).console.rx)) for bid in ALL
            if load_board(bid).console.tx}
    assert pins["disco-f746"] == ("PA9 AF7", "PB7 AF7")         # UM1907 ST-LINK VCP
    assert pins["disco-f769"] == ("PA9 AF7", "PA10 AF7")        # UM2033
    assert pins["nucleo-f746zg"] == ("PD8 AF7", "PD9 AF7")      # UM1974
    assert pins["nucleo-h743zi"] == ("PD8 AF7", "PD9 AF7")
    assert pins["nucleo-l4r5zi"] == ("PG7 AF8", "PG8 AF8")      # UM2179 (LPUART1)
    assert pins["disco-l475-iot01"] == ("PB6 AF7", "PB7 AF7")   # UM2153
    assert pins["nucleo-f401re"] == ("PA2 AF7", "PA3 AF7")      # UM1724
    assert load_board("nucleo-l4r5zi").pre_init[-1].reg == 0x40007004  # PWR_CR2.IOSV for port G
    new = {bid: (str(load_board(bid).console.tx), str(load_board(bid).console.rx)) for bid in ALL_M33_M7
           if load_board(bid).console.tx}
    assert new["nucleo-u575zi-q"] == ("PA9 AF7", "PA10 AF7")    # UM2861 ST-LINK VCP
    assert new["b-u585i-iot02a"] == ("PA9 AF7", "PA10 AF7")     # UM2839
    assert new["nucleo-h563zi"] == ("PD8 AF7", "PD9 AF7")       # UM3115
    assert new["nucleo-h7a3zi-q"] == ("PD8 AF7", "PD9 AF7")     # UM2408
    assert new["disco-h747i"] == ("PA9 AF7", "PA10 AF7")        # UM2411


def test_uart_divisor_formulas():
    assert uart_divisor("usart", 16_000_000, 115200) == 139
    assert uart_divisor("lpuart", 16_000_000, 9600) == 426667
    assert uart_divisor("cmsdk", 25_000_000, 115200) == 217


# Memory maps (RM0385 / RM0410 / RM0433 / RM0432 / RM0351 / RM0368 memory map sections,
# QEMU 7.2 for the emulated boards).
REGIONS = {
    "disco-f746": {"flash": (0x08000000, 1 * M), "dtcm": (0x20000000, 64 * K),
                   "sram1": (0x20010000, 240 * K), "sram2": (0x2004C000, 16 * K),
                   "itcm": (0x00000000, 16 * K), "sdram": (0xC0000000, 8 * M),
                   "qspi": (0x90000000, 16 * M)},
    "disco-f769": {"flash": (0x08000000, 2 * M), "dtcm": (0x20000000, 128 * K),
                   "sram1": (0x20020000, 368 * K), "sram2": (0x2007C000, 16 * K),
                   "itcm": (0x00000000, 16 * K), "sdram": (0xC0000000, 16 * M), "qspi": (0x90000000, 64 * M)},
    "nucleo-f746zg": {"flash": (0x08000000, 1 * M), "dtcm": (0x20000000, 64 * K),
                      "sram1": (0x20010000, 240 * K), "sram2": (0x2004C000, 16 * K),
                      "itcm": (0x00000000, 16 * K)},
    "nucleo-h743zi": {"flash": (0x08000000, 2 * M), "dtcm": (0x20000000, 128 * K),
                      "axi_sram": (0x24000000, 512 * K), "sram123": (0x30000000, 288 * K),
                      "sram4": (0x38000000, 64 * K), "itcm": (0x00000000, 64 * K)},
    "nucleo-l4r5zi": {"flash": (0x08000000, 2 * M), "sram1": (0x20000000, 192 * K),
                      "sram2": (0x10000000, 64 * K), "sram3": (0x20040000, 384 * K)},
    "disco-l475-iot01": {"flash": (0x08000000, 1 * M), "sram1": (0x20000000, 96 * K),
                         "sram2": (0x10000000, 32 * K), "qspi": (0x90000000, 8 * M)},
    "nucleo-f401re": {"flash": (0x08000000, 512 * K), "sram": (0x20000000, 96 * K)},
    "qemu-netduinoplus2": {"flash": (0x08000000, 1 * M), "sram": (0x20000000, 128 * K)},
    "qemu-mps2-an386": {"code": (0x0, 4 * M), "sram": (0x20000000, 4 * M),
                        "psram": (0x21000000, 16 * M)},
    "qemu-mps2-an500": {"code": (0x0, 4 * M), "sram": (0x20000000, 4 * M),
                        "psram": (0x21000000, 16 * M)},
    # RM0456 §2.3.2; RM0481 §2.3.2; RM0455 §2.3.2; RM0399 §2.3.2 (CM7 view, flash bank 1);
    # QEMU 10 mps2-tz.c AN505 (secure aliases)
    "nucleo-u575zi-q": {"flash": (0x08000000, 2 * M), "sram1": (0x20000000, 192 * K),
                        "sram2": (0x20030000, 64 * K), "sram3": (0x20040000, 512 * K),
                        "sram4": (0x28000000, 16 * K)},
    "b-u585i-iot02a": {"flash": (0x08000000, 2 * M), "sram1": (0x20000000, 192 * K),
                       "sram2": (0x20030000, 64 * K), "sram3": (0x20040000, 512 * K),
                       "sram4": (0x28000000, 16 * K), "ospi": (0x70000000, 64 * M),
                       "psram": (0x90000000, 8 * M)},
    "nucleo-h563zi": {"flash": (0x08000000, 2 * M), "sram1": (0x20000000, 256 * K),
                      "sram2": (0x20040000, 64 * K), "sram3": (0x20050000, 320 * K)},
    "nucleo-h7a3zi-q": {"itcm": (0, 64 * K), "flash": (0x08000000, 2 * M), "dtcm": (0x20000000, 128 * K),
                        "axi_sram": (0x24000000, 1 * M), "ahb_sram": (0x30000000, 128 * K),
                        "srd_sram": (0x38000000, 32 * K)},
    "disco-h747i": {"itcm": (0, 64 * K), "flash": (0x08000000, 1 * M), "dtcm": (0x20000000, 128 * K),
                    "axi_sram": (0x24000000, 512 * K), "sram123": (0x30000000, 288 * K),
                    "sram4": (0x38000000, 64 * K), "qspi": (0x90000000, 128 * M), "sdram": (0xD0000000, 32 * M)},
    "qemu-mps2-an505": {"code": (0x10000000, 4 * M), "sram": (0x38000000, 4 * M), "isram": (0x30000000, 128 * K)},
}


@pytest.mark.parametrize("bid", sorted(REGIONS))
def test_memory_regions(bid):
    b = load_board(bid)
    got = {r.name: (r.origin, r.length) for r in b.memory}
    assert got == REGIONS[bid]


def test_ram_totals():
    def ram(bid, names):
        b = load_board(bid)
        return sum(b.region(n).length for n in names)
    assert ram("disco-f746", ["dtcm", "sram1", "sram2"]) == 320 * K      # DS10916: 320 KB SRAM
    assert ram("disco-f769", ["dtcm", "sram1", "sram2"]) == 512 * K      # DS11532: 512 KB
    assert ram("nucleo-l4r5zi", ["sram1", "sram2", "sram3"]) == 640 * K  # DS12023: 640 KB
    assert ram("disco-l475-iot01", ["sram1", "sram2"]) == 128 * K        # DS10969: 128 KB
    h7 = load_board("nucleo-h743zi")
    assert h7.region("sram123").enable.mask == 0xE0000000  # RCC_AHB2ENR.SRAM1/2/3EN
    assert load_board("disco-f746").region("sdram").needs_init == "fmc_sdram"
    assert ram("nucleo-u575zi-q", ["sram1", "sram2", "sram3", "sram4"]) == 784 * K   # DS13737: 786 KB incl. 2 KB backup
    assert ram("nucleo-h563zi", ["sram1", "sram2", "sram3"]) == 640 * K           # DS14258: 640 KB
    assert ram("nucleo-h7a3zi-q", ["itcm", "dtcm", "axi_sram", "ahb_sram", "srd_sram"]) == 1376 * K  # DS13195: 1.4 MB


ARCH = {
    "disco-f746": ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"],
    "disco-f769": ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"],
    "nucleo-h743zi": ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"],
    "nucleo-l4r5zi": ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"],
    "qemu-netduinoplus2": ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"],
    # Armv8-M Mainline with DSP (gcc's cortex-m33 has +dsp) and the single-precision FPv5
    "nucleo-u575zi-q": ["-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"],
    "nucleo-h563zi": ["-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"],
    "qemu-mps2-an505": ["-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"],
    "nucleo-h7a3zi-q": ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"],
    "disco-h747i": ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"],
}


@pytest.mark.parametrize("bid", sorted(ARCH))
def test_gcc_flags(bid):
    assert load_board(bid).arch_flags == ARCH[bid]


def test_cycle_counter_and_emulation():
    for b in list_boards():
        if b.is_emulated:
            assert b.cycle_counter == "systick" and not b.emulation.rcc_modelled
            assert b.clock.source == "fixed"
        else:   # Armv6-M has no DWT cycle counter: SysTick at the core clock
            assert b.cycle_counter == ("systick" if b.core in ARMV6M_CORES else "dwt")
            assert b.clock.source != "fixed"
    nd = load_board("qemu-netduinoplus2")
    assert nd.emulation.qemu_machine == "netduinoplus2" and nd.emulation.cpu_hz == 168 * MHZ
    assert load_board("qemu-mps2-an386").console.driver == "cmsdk_uart"


def test_summary_for_the_cli():
    s = load_board("disco-f746").summary()
    for k in ("id", "name", "mcu", "core", "sysclk_hz", "memory", "console"):
        assert k in s
    assert s["sysclk_hz"] == 216 * MHZ
    # flash = the program region, RAM = the other on-chip writable regions (SDRAM/QSPI excluded)
    assert (s["flash_bytes"], s["ram_bytes"]) == (1 * M, 336 * K)
    u5 = load_board("nucleo-u575zi-q").summary()
    assert (u5["core"], u5["cpu_hz"], u5["flash_bytes"], u5["ram_bytes"]) == ("cortex-m33", 160 * MHZ, 2 * M, 784 * K)
    assert load_board("disco-h747i").summary()["flash_bytes"] == 1 * M     # the CM7's bank 1


def test_boards_cli_lists_core_clock_flash_ram(capsys):
    from stm32ai.cli import main

    assert main(["boards"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("nucleo-h563zi "))
    assert line.split()[:9] == ["nucleo-h563zi", "STM32H563ZIT6", "cortex-m33", "250.0", "MHz", "flash", "2",
                                "MiB", "RAM"] and "640 KiB" in line


# ---- register values of the clock bring-up (field encodings, cited in clockregs.py) ----
def test_clock_registers_f7():
    r = clock_registers(load_board("disco-f746"))
    # PLLM=25, PLLN=432 << 6, PLLP=/2 -> 00, PLLSRC=HSE (bit 22), PLLQ=9 << 24
    assert r["CLK_PLLCFGR_VAL"] == 25 | (432 << 6) | (1 << 22) | (9 << 24) == 0x09406C19
    assert r["CLK_CFGR_PRE_VAL"] == (0b101 << 10) | (0b100 << 13)   # APB1 /4, APB2 /2
    assert r["CLK_FLASH_ACR_VAL"] & 0xF == 7
    assert r["CLK_VOS_VAL"] == 3 << 14


def test_clock_registers_f401_hsi_and_vos():
    r = clock_registers(load_board("nucleo-f401re"))
    assert r["CLK_PLLCFGR_VAL"] == 16 | (336 << 6) | (1 << 16) | (7 << 24)  # P=/4 -> 01, HSI src
    assert r["CLK_VOS_VAL"] == 2 << 14 and r["CLK_VOS_MASK"] == 3 << 14     # scale 2


def test_clock_registers_h7():
    r = clock_registers(load_board("nucleo-h743zi"))
    assert r["CLK_PLLCKSELR_VAL"] == 2 | (4 << 4)                      # HSE, DIVM1 = 4
    assert r["CLK_PLL1DIVR_VAL"] == 399 | (1 << 9) | (3 << 16) | (1 << 24)
    assert r["CLK_PLLCFGR_VAL"] == (1 << 2) | (7 << 16)                # 2-4 MHz range, P/Q/R on
    assert r["CLK_D1CFGR_VAL"] == 0b1000 | (0b100 << 4)                 # HPRE /2, D1PPRE /2
    assert r["CLK_FLASH_ACR_VAL"] == 4 | (2 << 4)                       # 4 WS (ST's margin), WRHIGHFREQ 2


def test_clock_registers_l4_plus():
    r = clock_registers(load_board("nucleo-l4r5zi"))
    # HSI16 src (10), PLLM-1 = 1, PLLN = 30, PLLREN, PLLR /2 -> 00; PLLQEN and PLLPEN cleared
    assert r["CLK_PLLCFGR_VAL"] == 2 | (1 << 4) | (30 << 8) | (1 << 24)
    assert r["CLK_PLLCFGR_MASK"] & ((1 << 16) | (1 << 20)) == (1 << 16) | (1 << 20)
    assert r["CLK_BOOST"] == 1 and r["CLK_FLASH_ACR_VAL"] & 0xF == 5
    assert clock_registers(load_board("qemu-netduinoplus2")).defs == {}


def test_clock_registers_u5():
    b = load_board("nucleo-u575zi-q")
    assert b.clock.pll_input_hz == 16 * MHZ and b.clock.vco_hz == 320 * MHZ
    r = clock_registers(b)
    # PLL1SRC HSI16 (10), PLL1RGE 8-16 MHz (11), PLL1M-1 = 0, PLL1MBOOST /2 (0001), PLL1REN only
    assert r["CLK_PLL1CFGR_VAL"] == 0b10 | (0b11 << 2) | (0 << 8) | (1 << 12) | (1 << 18)
    assert r["CLK_PLL1DIVR_VAL"] & 0x1FF == 19 and (r["CLK_PLL1DIVR_VAL"] >> 24) & 0x7F == 1   # N=20, R=2
    assert r["CLK_VOS_VAL"] == 0b11 << 16 and r["CLK_BOOST"] == 1           # range 1, EPOD booster
    assert r["CLK_FLASH_ACR_VAL"] == 4 and r["CLK_AHB_STEP"] == 1 and r["CLK_CFGR2_VAL"] == 0


def test_clock_registers_h5():
    b = load_board("nucleo-h563zi")
    assert b.clock.oscillator_hz == 32 * MHZ and b.clock.pll_input_hz == 2 * MHZ and b.clock.vco_hz == 500 * MHZ
    r = clock_registers(b)
    assert r["CLK_PLL1CFGR_VAL"] == 0b01 | (0b01 << 2) | (16 << 8) | (7 << 16)   # HSI, 2-4 MHz, M=16, P/Q/R on
    assert r["CLK_PLL1DIVR_VAL"] == 249 | (1 << 9) | (3 << 16) | (1 << 24)
    assert r["CLK_VOS_VAL"] == 0b11 << 4 and r["CLK_FLASH_ACR_VAL"] == 5 | (2 << 4)   # VOS0, 5 WS, WRHIGHFREQ 2


def test_clock_registers_h7_smps_boards():
    h7a3, h747, h743 = (clock_registers(load_board(b)) for b in ("nucleo-h7a3zi-q", "disco-h747i", "nucleo-h743zi"))
    # direct SMPS (SDEN/SMPSEN bit 2 only, the whole supply field written) vs the H743's LDO
    assert (h7a3["CLK_PWR_CR3_VAL"], h7a3["CLK_PWR_CR3_MASK"]) == (h747["CLK_PWR_CR3_VAL"], h747["CLK_PWR_CR3_MASK"]) \
        == (0x4, 0x3F)
    assert (h743["CLK_PWR_CR3_VAL"], h743["CLK_PWR_CR3_MASK"]) == (0x2, 0x7)
    assert h7a3["CLK_VOS_VAL"] == 0b11 << 14             # RM0455 PWR_SRDCR.VOS = 11: VOS0
    assert h747["CLK_VOS_VAL"] == 0b11 << 14             # RM0399 PWR_D3CR.VOS = 11: scale 1
    assert h7a3["CLK_FLASH_ACR_VAL"] & 0xF == 6 and h747["CLK_FLASH_ACR_VAL"] & 0xF == 4
    assert h747["CLK_PLLCKSELR_VAL"] == 2 | (5 << 4) and h747["CLK_PLLCFGR_VAL"] == (2 << 2) | (7 << 16)   # 4-8 MHz


def test_parse_size():
    assert parse_size("64K") == 65536 and parse_size("1M") == 1 << 20 and parse_size(4096) == 4096
    assert parse_size("0x8000") == 0x8000
    with pytest.raises(ValueError):
        parse_size("lots")


# ---- validation: one clear line naming the file and key ----
def _variant(tmp_path: Path, base: str, edit) -> Path:
    data = yaml.safe_load((Path(load_board(base).path)).read_text())
    edit(data)
    p = tmp_path / f"{data.get('id', 'x')}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def _err(tmp_path, base, edit) -> str:
    p = _variant(tmp_path, base, edit)
    with pytest.raises(Stm32aiError) as e:
        load_board(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg
    return msg


def test_board_file_variant_loads(tmp_path):
    p = _variant(tmp_path, "disco-f746", lambda d: None)
    assert isinstance(load_board(p), Board)


@pytest.mark.parametrize("base,edit,expect", [
    ("disco-f746", lambda d: d["clock"]["pll"].update(n=500), "clock.pll: n = 500 is out of range"),
    ("disco-f746", lambda d: d["clock"]["pll"].update(n=500, m=50), "clock.pll"),
    ("disco-f746", lambda d: d["clock"].update(apb2_div=1), "PCLK2 216 MHz exceeds the 108 MHz"),
    ("disco-f746", lambda d: d["clock"].update(flash_latency=5), "at least 7"),
    ("disco-f746", lambda d: d["clock"].update(overdrive=False), "over-drive"),
    ("disco-f746", lambda d: d.update(fpu="fpv4-sp-d16"), "cannot have FPU"),
    ("disco-f746", lambda d: d.update(colour="blue"), "unknown key(s) colour"),
    ("disco-f746", lambda d: d.pop("mcu"), "mcu: missing"),
    ("disco-f746", lambda d: d["memory"].append(   # a board region over the SoC's DTCM
        {"name": "extra", "origin": 0x20008000, "length": "4K", "access": "rw"}), "overlap"),
    ("disco-f746", lambda d: d["layout"].update(data="ccm"), "no memory region named 'ccm'"),
    ("disco-f746", lambda d: d["pools"].update(activations=["flash"]), "not writable"),
    ("disco-f746", lambda d: d["console"].update(baud=300), "baud"),
    ("disco-f746", lambda d: d["console"].update(regs="fancy"), "console: unknown key(s) regs"),  # SoC fact
    ("nucleo-l4r5zi", lambda d: d["clock"].update(voltage_scale=1), "boost"),
    ("nucleo-h743zi", lambda d: d["clock"].update(ahb_div=1), "HCLK 400 MHz exceeds"),
    ("nucleo-f401re", lambda d: d["clock"]["pll"].update(n=168), "n = 168 is out of range 192..432"),
    ("nucleo-u575zi-q", lambda d: d["clock"].update(flash_latency=3), "at least 4"),
    ("nucleo-u575zi-q", lambda d: d["clock"].update(voltage_scale=2), "above what voltage scale 2 allows"),
    ("nucleo-h563zi", lambda d: d["clock"].update(voltage_scale=1), "above what voltage scale 1 allows"),
    ("nucleo-h7a3zi-q", lambda d: d["clock"].update(apb1_div=1), "PCLK1 280 MHz exceeds the 140 MHz"),
    ("disco-h747i", lambda d: d["clock"].update(voltage_scale=0), "VOS0 is not available"),
    ("nucleo-h743zi", lambda d: d["clock"].update(supply="smps_direct"), "needs an STM32H7 with an SMPS"),
    ("qemu-netduinoplus2", lambda d: d["emulation"].update(cpu_hz=16000000), "cpu_hz"),
    ("qemu-netduinoplus2", lambda d: d.update(clock={
        "source": "hse", "hse_hz": 8000000, "pll": {"m": 8, "n": 336, "p": 2, "q": 7},
        "apb1_div": 4, "apb2_div": 2, "flash_latency": 5, "voltage_scale": 1}),
     "does not model the RCC"),
])
def test_board_errors(tmp_path, base, edit, expect):
    assert expect in _err(tmp_path, base, edit)


def test_unknown_board_and_bad_yaml(tmp_path):
    with pytest.raises(Stm32aiError, match="unknown board 'disco-f999'.*disco-f746"):
        load_board("disco-f999")
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: [unclosed\n")
    with pytest.raises(Stm32aiError, match="invalid YAML at line"):
        load_board(bad)
    with pytest.raises(Stm32aiError, match="not found"):
        load_board(tmp_path / "missing.yaml")


def test_id_must_match_file_name(tmp_path):
    import shutil

    src = Path(load_board("nucleo-f401re").path)
    boards = tmp_path / "boards"
    boards.mkdir()
    shutil.copy(src, boards / "nucleo-f401re.yaml")
    assert load_board(boards / "nucleo-f401re.yaml").id == "nucleo-f401re"
