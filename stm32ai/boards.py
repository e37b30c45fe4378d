"""Boards as data: `boards/<id>.yaml` is the single source of truth for a board (docs/boards.md).

A board file gives the MCU, core and FPU, the clock tree *factors* (oscillator, PLL M/N/P/Q/R,
bus prescalers, flash wait states, voltage scaling), the memory regions, the console UART and
its pins, and the cycle counter. Everything the firmware needs that follows from those factors
(SYSCLK, HCLK, PCLK1/2, the UART baud divisor, gcc's -mcpu/-mfpu) is *derived* here, never
written twice. The schema is documented in docs/boards.md.

Every problem in a board file is reported as one line naming the file, the key and what is
wrong (raised as Stm32aiError, exit code 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stm32ai.errors import Stm32aiError
from stm32ai.resources import data_dir

__all__ = [
    "EMULATED_FIRMWARE", "Board", "ClockTree", "Console", "Emulation", "Pin", "Pll", "Region", "RegBit",
    "boards_dir", "list_boards", "load_board", "parse_size",
]

CORES = ("cortex-m4", "cortex-m7", "cortex-m33")
FPUS = ("none", "fpv4-sp-d16", "fpv5-d16", "fpv5-sp-d16")
FAMILIES = ("stm32f4", "stm32f7", "stm32h7", "stm32l4", "stm32l4plus", "mps2", "stm32u5", "stm32h5")
CLOCK_SOURCES = ("hse", "hsi", "msi", "fixed")
UART_DRIVERS = ("stm32_usart", "cmsdk_uart")
# Core supply of the STM32H7 parts with an SMPS (H7A3/H7B3 RM0455 §6.4, H745/H747 RM0399 §7.4):
# how the board is wired decides, and a wrong choice locks the part until it is recovered.
SUPPLIES = ("ldo", "smps_direct")
CYCLE_COUNTERS = ("dwt", "systick")
ACCESS = re.compile(r"^r?w?x?$")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_REGION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

# Which FPUs each core can have (Arm TRMs: Cortex-M4 FPv4-SP, Cortex-M7 FPv5 SP or DP,
# Cortex-M33 FPv5-SP).
_CORE_FPUS = {
    "cortex-m4": ("none", "fpv4-sp-d16"),
    "cortex-m7": ("none", "fpv5-sp-d16", "fpv5-d16"),
    "cortex-m33": ("none", "fpv5-sp-d16"),
}


# ---------------------------------------------------------------------------------------------
# Per-family electrical limits, from the reference manuals (2.7-3.6 V supply). Used to refuse a
# board file whose factors would overclock a bus or put the PLL out of its lock range.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Limits:
    ref: str                                  # manual section the numbers come from
    pll_in: tuple[float, float]               # PLL input (after M) range, Hz
    vco: tuple[float, float]                  # VCO output range, Hz
    m: tuple[int, int]
    n: tuple[int, int]
    p: tuple[int, ...]                        # allowed P (sysclk) dividers
    q: tuple[int, ...]
    r: tuple[int, ...]
    cpu_max: float
    hclk_max: float
    pclk1_max: float
    pclk2_max: float
    # Flash wait states: upper HCLK bound (Hz) of 0, 1, 2... WS, per voltage scale/range.
    ws: dict[int, tuple[float, ...]]
    sys_from: str = "p"                       # PLL output that feeds SYSCLK ("p" or "r")


_MHZ = 1e6
_LIMITS: dict[str, _Limits] = {
    # RM0090 §6.3.2 (RCC_PLLCFGR), §3.5.1 Table 10, DS8626 §6.3 (F405/F407, 168 MHz).
    "stm32f405": _Limits(
        "RM0090 §6.3.2, Table 10", (0.95 * _MHZ, 2.1 * _MHZ), (100 * _MHZ, 432 * _MHZ),
        (2, 63), (50, 432), (2, 4, 6, 8), tuple(range(2, 16)), (), 168 * _MHZ, 168 * _MHZ,
        42 * _MHZ, 84 * _MHZ,
        {1: tuple(x * _MHZ for x in (30, 60, 90, 120, 150, 168)),
         2: tuple(x * _MHZ for x in (30, 60, 90, 120, 144))}),
    # RM0368 §6.3.2 (RCC_PLLCFGR: 192 <= VCO <= 432 MHz), §3.4 Table 6 (F401, 84 MHz).
    "stm32f401": _Limits(
        "RM0368 §6.3.2, Table 6", (0.95 * _MHZ, 2.1 * _MHZ), (192 * _MHZ, 432 * _MHZ),
        (2, 63), (192, 432), (2, 4, 6, 8), tuple(range(2, 16)), (), 84 * _MHZ, 84 * _MHZ,
        42 * _MHZ, 84 * _MHZ,
        {2: tuple(x * _MHZ for x in (30, 64, 84)), 3: tuple(x * _MHZ for x in (30, 60))}),
    # RM0385 §5.3.2 (RCC_PLLCFGR), §3.3.2 Table 5, DS10916 (F746, 216 MHz with over-drive).
    # RM0410 has the same figures for F76x/F77x.
    "stm32f7": _Limits(
        "RM0385 §5.3.2, Table 5", (0.95 * _MHZ, 2.1 * _MHZ), (100 * _MHZ, 432 * _MHZ),
        (2, 63), (50, 432), (2, 4, 6, 8), tuple(range(2, 16)), tuple(range(2, 8)),
        216 * _MHZ, 216 * _MHZ, 54 * _MHZ, 108 * _MHZ,
        {1: tuple(x * _MHZ for x in (30, 60, 90, 120, 150, 180, 210, 216)),
         2: tuple(x * _MHZ for x in (30, 60, 90, 120, 150, 180)),
         3: tuple(x * _MHZ for x in (30, 60, 90, 120, 144))}),
    # RM0433 §8.7.13 (DIVM 1..63), §8.7.12/8.7.11 (wide VCO 192..836 MHz, input 2..16 MHz),
    # §4.3.8 Table 17 (flash wait states by AXI/HCLK), DS12110 (400 MHz at VOS1 for rev Y and V).
    "stm32h7": _Limits(
        "RM0433 §8.7, Table 17", (2 * _MHZ, 16 * _MHZ), (192 * _MHZ, 836 * _MHZ),
        (1, 63), (4, 512), tuple(range(2, 129, 2)), tuple(range(1, 129)), tuple(range(1, 129)),
        400 * _MHZ, 200 * _MHZ, 100 * _MHZ, 100 * _MHZ,
        {1: tuple(x * _MHZ for x in (70, 140, 210)),
         2: tuple(x * _MHZ for x in (55, 110, 165, 225)),
         3: tuple(x * _MHZ for x in (45, 90, 135, 180, 225))}),
    # RM0351 §6.4.4 (RCC_PLLCFGR: M 1..8, N 8..86, VCO 64..344 MHz, input 4..16 MHz),
    # §3.3.3 Table 11 (Range 1: 16 MHz per wait state up to 80 MHz).
    "stm32l4": _Limits(
        "RM0351 §6.4.4, Table 11", (4 * _MHZ, 16 * _MHZ), (64 * _MHZ, 344 * _MHZ),
        (1, 8), (8, 86), (7, 17), (2, 4, 6, 8), (2, 4, 6, 8), 80 * _MHZ, 80 * _MHZ,
        80 * _MHZ, 80 * _MHZ,
        {1: tuple(x * _MHZ for x in (16, 32, 48, 64, 80)), 2: tuple(x * _MHZ for x in (6, 12, 18, 26))},
        sys_from="r"),
    # RM0432 §6.4.4 (RCC_PLLCFGR: M 1..16, N 8..127, input 2.66..16 MHz), §3.3.3 Table 12
    # (Range 1 boost: 20 MHz per wait state up to 120 MHz). Range 1 "boost" is scale 0 here.
    "stm32l4plus": _Limits(
        "RM0432 §6.4.4, Table 12", (2.66 * _MHZ, 16 * _MHZ), (64 * _MHZ, 344 * _MHZ),
        (1, 16), (8, 127), (2, 7, 17), (2, 4, 6, 8), (2, 4, 6, 8), 120 * _MHZ, 120 * _MHZ,
        120 * _MHZ, 120 * _MHZ,
        {0: tuple(x * _MHZ for x in (20, 40, 60, 80, 100, 120)),
         1: tuple(x * _MHZ for x in (20, 40, 60, 80)),
         2: tuple(x * _MHZ for x in (8, 16, 26))},
        sys_from="r"),
    # STM32H7A3/B3 (RM0455): §8.7 RCC PLL (DIVM1 1..63, input 1..16 MHz, wide VCO 192..836 MHz),
    # DS13195 §6.3.1 (280 MHz core and AXI at VOS0, APB 140 MHz), RM0455 §4.3.8 Table 16
    # (flash wait states by AXI clock and VOS). Voltage scale 0 is VOS0 (PWR_SRDCR.VOS = 11).
    "stm32h7a3": _Limits(
        "RM0455 §8.7, Table 16", (1 * _MHZ, 16 * _MHZ), (192 * _MHZ, 836 * _MHZ),
        (1, 63), (4, 512), (1, *range(2, 129, 2)), tuple(range(1, 129)), tuple(range(1, 129)),
        280 * _MHZ, 280 * _MHZ, 140 * _MHZ, 140 * _MHZ,
        {0: tuple(x * _MHZ for x in (42, 84, 126, 168, 210, 252, 280)),
         1: tuple(x * _MHZ for x in (38, 76, 114, 152, 190, 225)),
         2: tuple(x * _MHZ for x in (34, 68, 102, 136, 160)),
         3: tuple(x * _MHZ for x in (22, 44, 66, 88))}),
    # STM32H745/H747 (RM0399): the CM7 as the H743 (§8.7 RCC, 400 MHz at VOS1, AXI 200 MHz),
    # §4.3.8 Table 13 (flash wait states, VOS1: 70/140/185/210/225 MHz).
    "stm32h747": _Limits(
        "RM0399 §8.7, Table 13", (2 * _MHZ, 16 * _MHZ), (192 * _MHZ, 836 * _MHZ),
        (1, 63), (4, 512), tuple(range(2, 129, 2)), tuple(range(1, 129)), tuple(range(1, 129)),
        400 * _MHZ, 200 * _MHZ, 100 * _MHZ, 100 * _MHZ,
        {1: tuple(x * _MHZ for x in (70, 140, 185, 210, 225)),
         2: tuple(x * _MHZ for x in (55, 110, 165, 225)),
         3: tuple(x * _MHZ for x in (45, 90, 135, 180, 225))}),
    # STM32U5 (RM0456): §11.8.x RCC_PLL1CFGR/PLL1DIVR (PLL1M 1..16, input 4..16 MHz, VCO
    # 128..544 MHz, N 4..512, P/Q/R 1..128), §7.3.3 Table 54 (flash wait states per range:
    # range 1 up to 160 MHz, 32 MHz per wait state), DS13737 (160 MHz, APB 160 MHz).
    "stm32u5": _Limits(
        "RM0456 §11.8, §7.3.3", (4 * _MHZ, 16 * _MHZ), (128 * _MHZ, 544 * _MHZ),
        (1, 16), (4, 512), tuple(range(1, 129)), tuple(range(1, 129)), tuple(range(1, 129)),
        160 * _MHZ, 160 * _MHZ, 160 * _MHZ, 160 * _MHZ,
        {1: tuple(x * _MHZ for x in (32, 64, 96, 128, 160)),
         2: tuple(x * _MHZ for x in (30, 60, 90, 110)),
         3: tuple(x * _MHZ for x in (24, 48, 55)),
         4: tuple(x * _MHZ for x in (12, 25))},
        sys_from="r"),
    # STM32H5 (RM0481): §11.8 RCC_PLL1CFGR/PLL1DIVR (PLL1M 1..63, input 1..16 MHz, wide VCO
    # 192..836 MHz, P even), §7.3.4 Table 37 (flash wait states by HCLK and VOS; VOS0 up to
    # 250 MHz), DS14258 (250 MHz core, AHB and APB).
    "stm32h5": _Limits(
        "RM0481 §11.8, Table 37", (1 * _MHZ, 16 * _MHZ), (192 * _MHZ, 836 * _MHZ),
        (1, 63), (4, 512), tuple(range(2, 129, 2)), tuple(range(1, 129)), tuple(range(1, 129)),
        250 * _MHZ, 250 * _MHZ, 250 * _MHZ, 250 * _MHZ,
        {0: tuple(x * _MHZ for x in (42, 84, 126, 168, 210, 250)),
         1: tuple(x * _MHZ for x in (34, 68, 102, 136, 170, 200)),
         2: tuple(x * _MHZ for x in (30, 60, 90, 120, 150)),
         3: tuple(x * _MHZ for x in (20, 40, 60, 80, 100))}),
}

# Reset clock of each family: what the core runs on before (or after a failed) bring-up.
RESET_CLOCK = {
    "stm32f4": ("hsi", 16_000_000),   # RM0090 §6.2.2 / RM0368 §6.2.2: HSI 16 MHz
    "stm32f7": ("hsi", 16_000_000),   # RM0385 §5.2.2
    "stm32h7": ("hsi", 64_000_000),   # RM0433 §8.5.2: HSI 64 MHz (HSIDIV = 1)
    "stm32l4": ("msi", 4_000_000),    # RM0351 §6.2.3: MSI range 6 = 4 MHz
    "stm32l4plus": ("msi", 4_000_000),  # RM0432 §6.2.3
    "mps2": ("fixed", 25_000_000),
    "stm32u5": ("msi", 4_000_000),    # RM0456 §11.4.4: MSIS 4 MHz after reset
    "stm32h5": ("hsi", 32_000_000),   # RM0481 §11.4.2: HSI 64 MHz, HSIDIV = /2 at reset
}
HSI_HZ = {"stm32f4": 16_000_000, "stm32f7": 16_000_000, "stm32h7": 64_000_000,
          "stm32l4": 16_000_000, "stm32l4plus": 16_000_000,
          "stm32u5": 16_000_000,       # HSI16 (RM0456 §11.4.3)
          "stm32h5": 32_000_000}       # hsi_ck = HSI 64 MHz / HSIDIV, reset /2, left as is (RM0481 §11.4.2)

# ---- Armv6-M parts (issue 22): Cortex-M0 (QEMU microbit's nRF51822) and Cortex-M0+ (STM32G0,
# STM32C0). Kept in one block, appended to the shared tables above. ----
CORES += ("cortex-m0", "cortex-m0plus")
_CORE_FPUS.update({"cortex-m0": ("none",), "cortex-m0plus": ("none",)})   # Armv6-M: no FPU
FAMILIES += ("nrf51", "stm32g0", "stm32c0")
UART_DRIVERS += ("nrf51_uart",)
ARMV6M_CORES = ("cortex-m0", "cortex-m0plus")
# RM0444 §5.4.4 (RCC_PLLCFGR: M 1..8, N 8..86, R 2..8, PLL input 2.66..16 MHz, VCO 64..344 MHz),
# §3.3.4 (read access latency; Range 1: 0 WS <= 24 MHz, 1 WS <= 48 MHz, 2 WS <= 64 MHz; Range 2: 0 WS <= 8 MHz,
# 1 WS <= 16 MHz), DS13560 (STM32G0B1, 64 MHz). One APB prescaler: PCLK1 = PCLK2 (apb1_div).
_LIMITS["stm32g0"] = _Limits(
    "RM0444 §5.4.4, §3.3.4", (2.66 * _MHZ, 16 * _MHZ), (64 * _MHZ, 344 * _MHZ),
    (1, 8), (8, 86), tuple(range(2, 33)), tuple(range(2, 9)), tuple(range(2, 9)),
    64 * _MHZ, 64 * _MHZ, 64 * _MHZ, 64 * _MHZ,
    {1: tuple(x * _MHZ for x in (24, 48, 64)), 2: tuple(x * _MHZ for x in (8, 16))},
    sys_from="r")
# RM0490 (STM32C0): no PLL; SYSCLK from HSISYS = HSI48 / HSIDIV (RCC chapter, "Clocks": HSI48 and HSISYS). Flash:
# 0 WS <= 24 MHz, 1 WS <= 48 MHz (§3.3.4, read access latency). 48 MHz maximum (DS13944, STM32C031).
_LIMITS["stm32c0"] = _Limits(
    "RM0490 RCC clocks, FLASH read access latency", (0.0, 0.0), (0.0, 0.0), (1, 1), (1, 1), (), (), (),
    48 * _MHZ, 48 * _MHZ, 48 * _MHZ, 48 * _MHZ,
    {1: tuple(x * _MHZ for x in (24, 48))})
RESET_CLOCK.update({
    "nrf51": ("fixed", 16_000_000),     # nRF51 RM §13 (CLOCK): HFCLK 16 MHz; QEMU nrf51_soc.c HCLK_FRQ
    "stm32g0": ("hsi", 16_000_000),     # RM0444 §5.2.2: HSISYS = HSI16 / 1 after reset
    "stm32c0": ("hsi", 12_000_000),     # RM0490 RCC_CR reset value: HSISYS = HSI48 / 4 (HSIDIV = 4)
})
HSI_HZ.update({"stm32g0": 16_000_000,
               "stm32c0": 48_000_000})  # HSI48, divided by HSIDIV (1 on our boards: 48 MHz HSISYS)
# families whose clock tree has no PLL: SYSCLK is the oscillator itself
_NO_PLL_FAMILIES = ("stm32c0",)
# families with a single APB prescaler (PCLK1 = PCLK2): RM0444 §5.4.3, RM0490 RCC_CFGR (PPRE)
_ONE_APB_FAMILIES = ("stm32g0", "stm32c0")


def parse_size(v: Any, where: str = "size") -> int:
    """An int, or a string like "64K", "1M", "0x4000", "512" (K = 1024)."""
    if isinstance(v, bool):
        raise ValueError(f"{where}: expected a size, got {v!r}")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        s = v.strip().upper().replace("_", "")
        m = re.fullmatch(r"(0X[0-9A-F]+|\d+)\s*([KMG]?)I?B?", s)
        if m:
            base = int(m.group(1), 0)
            return base * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
    raise ValueError(f"{where}: expected a size such as 65536, \"64K\" or \"1M\", got {v!r}")


def _fmt_size(n: int) -> str:
    if n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


# ---------------------------------------------------------------------------------------------
# Data model
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RegBit:
    """Enable bit(s) in one register: `*(uint32_t *)reg |= mask`."""

    reg: int
    bits: tuple[int, ...]

    @property
    def bit(self) -> int:
        return self.bits[0]

    @property
    def mask(self) -> int:
        m = 0
        for b in self.bits:
            m |= 1 << b
        return m


@dataclass(frozen=True)
class Region:
    name: str
    origin: int
    length: int
    access: str                 # "rwx", "rx", "rw"...
    needs_init: str | None = None   # bring-up this region needs first ("fmc_sdram", "quadspi"...)
    enable: RegBit | None = None    # a clock-enable bit set by the startup code before use
    note: str = ""

    @property
    def end(self) -> int:
        return self.origin + self.length

    @property
    def writable(self) -> bool:
        return "w" in self.access


@dataclass(frozen=True)
class Pll:
    m: int
    n: int
    p: int | None = None
    q: int | None = None
    r: int | None = None


@dataclass(frozen=True)
class ClockTree:
    family: str
    source: str                 # hse | hsi | msi | fixed
    hse_hz: int | None
    hse_bypass: bool
    fixed_hz: int | None        # source "fixed": the core clock an emulator runs at
    msi_hz: int | None
    pll: Pll | None
    cpu_div: int                # H7 D1CPRE (1 elsewhere)
    ahb_div: int                # HPRE
    apb1_div: int
    apb2_div: int
    apb3_div: int               # H7 D1PPRE
    apb4_div: int               # H7 D3PPRE
    flash_latency: int
    voltage_scale: int | None   # 1, 2, 3 (L4+: 0 = range 1 boost)
    overdrive: bool             # F7 over-drive (above 180 MHz)
    supply: str = "ldo"         # H7 core supply as the board is wired: ldo | smps_direct

    @property
    def oscillator_hz(self) -> int:
        if self.source == "hse":
            return int(self.hse_hz or 0)
        if self.source == "hsi":
            return HSI_HZ[self.family]
        if self.source == "msi":
            return int(self.msi_hz or 4_000_000)
        return int(self.fixed_hz or 0)

    @property
    def pll_input_hz(self) -> float | None:
        return None if self.pll is None else self.oscillator_hz / self.pll.m

    @property
    def vco_hz(self) -> float | None:
        return None if self.pll is None else self.oscillator_hz / self.pll.m * self.pll.n

    def _pll_out(self, div: int | None) -> int | None:
        if self.pll is None or div is None:
            return None
        num = self.oscillator_hz * self.pll.n
        den = self.pll.m * div
        return num // den if num % den == 0 else round(num / den)

    @property
    def sysclk_hz(self) -> int:
        """SYSCLK: the PLL's P (F4/F7/H7) or R (L4) output, or the oscillator itself."""
        if self.source == "fixed" or self.pll is None:
            return self.oscillator_hz
        lim = _LIMITS.get(_limits_key(self.family, ""), None)
        out = self.pll.r if (lim is not None and lim.sys_from == "r") else self.pll.p
        return int(self._pll_out(out) or 0)

    @property
    def pll_q_hz(self) -> int | None:
        return self._pll_out(self.pll.q) if self.pll else None

    @property
    def cpu_hz(self) -> int:
        """The core clock (what the cycle counter counts)."""
        if self.family == "stm32h7":
            return self.sysclk_hz // self.cpu_div        # sys_d1cpre_ck, RM0433 §8.5.6
        return self.sysclk_hz // self.ahb_div            # HCLK is the core clock elsewhere

    @property
    def hclk_hz(self) -> int:
        if self.family == "stm32h7":
            return self.cpu_hz // self.ahb_div           # rcc_hclk1 (AXI), RM0433 Figure 49
        return self.cpu_hz

    @property
    def pclk1_hz(self) -> int:
        return self.hclk_hz // self.apb1_div

    @property
    def pclk2_hz(self) -> int:
        if self.family in _ONE_APB_FAMILIES:
            return self.pclk1_hz                         # one APB bus (RM0444 §5.4.3 PPRE)
        return self.hclk_hz // self.apb2_div

    def clock_hz(self, name: str) -> int:
        return {"sysclk": self.sysclk_hz, "hclk": self.hclk_hz, "pclk1": self.pclk1_hz,
                "pclk2": self.pclk2_hz, "cpu": self.cpu_hz}[name]

    @property
    def reset_hz(self) -> int:
        """The core clock right after reset, and after a failed bring-up."""
        if self.source == "fixed":
            return self.cpu_hz
        return RESET_CLOCK[self.family][1]


@dataclass(frozen=True)
class Pin:
    port: str       # "A".."K"
    pin: int        # 0..15
    af: int         # alternate function number

    @property
    def port_index(self) -> int:
        return ord(self.port) - ord("A")

    def __str__(self) -> str:
        return f"P{self.port}{self.pin} AF{self.af}"


@dataclass(frozen=True)
class Console:
    driver: str             # stm32_usart | cmsdk_uart
    instance: str           # USART1, LPUART1, UART0...
    base: int
    kind: str               # usart | lpuart | cmsdk
    regs: str               # sr_dr (F1/F2/F4 USART) | isr_tdr (F7/H7/L4 USART, LPUART) | cmsdk
    clock: str              # the bus clock feeding the kernel clock: pclk1 | pclk2 | sysclk
    enable: RegBit | None
    tx: Pin | None
    rx: Pin | None
    baud: int
    vcp: str                # how it reaches the host (ST-LINK VCP, QEMU -serial...)
    # nRF51 UART: the GPIO numbers PSELTXD/PSELRXD select (nRF51 RM §29.10.3-4); None elsewhere
    psel_txd: int | None = None
    psel_rxd: int | None = None


@dataclass(frozen=True)
class Gpio:
    base: int               # GPIOA
    stride: int             # distance between ports
    enable_reg: int         # RCC register whose bit n enables port n (A = bit 0)


@dataclass(frozen=True)
class RegWrite:
    """A register read-modify-write the bring-up does before the console (e.g. VDDIO2)."""

    reg: int
    set: int
    note: str = ""


EMULATED_FIRMWARE = ("emulator", "hardware")


@dataclass(frozen=True)
class Emulation:
    qemu_machine: str
    rcc_modelled: bool       # False: bring-up must not touch RCC (QEMU ignores it)
    # The clock the emulator runs the core (and SysTick) at; 0 when the emulator models the RCC
    # and the clock is whatever the firmware's bring-up reaches (it reports it: `sysclk_hz:`).
    cpu_hz: int
    serial_index: int = 0    # which -serial the console UART is wired to
    note: str = ""
    # QEMU `-icount shift=N`: every instruction takes 2^N ns of virtual time, so the board's
    # counter (SysTick at cpu_hz) counts instructions * cpu_hz * 2^N / 1e9. The firmware then
    # reports instructions, never "cycles" (QEMU has no cycle model).
    icount_shift: int = 0
    # "emulator": a board that exists only in QEMU, its firmware built for it (semihosting exit,
    # `instructions:`). "hardware": QEMU emulates a real board and runs its unchanged firmware
    # (which reports SysTick ticks as `cycles:`; the host converts them to instructions).
    firmware: str = "emulator"
    # QEMU 10.0's stm32l4x5 USART does not tell the chardev it can take the next byte after a
    # read of RDR (no qemu_chr_fe_accept_input): input stalls until QEMU's main loop wakes for
    # another reason. The host then wakes it through a QMP socket while it talks to the board.
    serial_rx_kick: bool = False

    @property
    def ns_per_instruction(self) -> int:
        return 1 << self.icount_shift

    def ticks_to_instructions(self, ticks: int, clock_hz: int | None = None) -> int:
        """Counter ticks at `clock_hz` (default cpu_hz) -> instructions, rounded to nearest (as
        the demo computes it)."""
        den = (clock_hz or self.cpu_hz) * self.ns_per_instruction
        return (ticks * 1_000_000_000 + den // 2) // den if den else 0


def _clock_hz(name: str) -> Any:
    """A read-only Board attribute that is its clock tree's of the same name."""
    return property(lambda self: getattr(self.clock, name), doc=f"clock.{name} (Hz)")


@dataclass(frozen=True)
class Board:
    id: str
    name: str
    mcu: str
    family: str
    core: str
    fpu: str
    clock: ClockTree
    memory: tuple[Region, ...]
    text_region: str
    data_region: str
    stack_region: str
    stack_size: int
    heap_size: int
    activations_pool: tuple[str, ...]
    weights_pool: tuple[str, ...]
    console: Console
    gpio: Gpio | None
    cycle_counter: str
    cache: bool
    irq_count: int
    pre_init: tuple[RegWrite, ...]
    emulation: Emulation | None
    cubeide_mcu: str
    cubeide_board: str
    openocd: str | None
    references: dict[str, str] = field(default_factory=dict)
    path: Path | None = None
    soc: str = ""               # boards/soc/<soc>.yaml the board file builds on ("" if flat)
    # the memory system as the cycle estimator sees it (flash accelerator, caches, TCMs, region
    # latencies): kept as written; stm32ai/estimate/memsys.py reads and checks it (docs/estimate.md)
    memsys: dict[str, Any] | None = None
    # external memories stm32ai brings up (region name -> part: stm32ai/extmem.py)
    external: dict[str, Any] = field(default_factory=dict)

    # ---- derived --------------------------------------------------------------------------
    # the clock tree's frequencies (Hz), read through: board.cpu_hz is board.clock.cpu_hz
    sysclk_hz = _clock_hz("sysclk_hz")
    cpu_hz = _clock_hz("cpu_hz")
    hclk_hz = _clock_hz("hclk_hz")
    pclk1_hz = _clock_hz("pclk1_hz")
    pclk2_hz = _clock_hz("pclk2_hz")

    @property
    def uart_clock_hz(self) -> int:
        return self.clock.clock_hz(self.console.clock)

    @property
    def uart_divisor(self) -> int:
        """The value the console driver writes to BRR (or CMSDK BAUDDIV) at the target clock."""
        return uart_divisor(self.console.kind, self.uart_clock_hz, self.console.baud)

    @property
    def uart_actual_baud(self) -> float:
        return uart_baud(self.console.kind, self.uart_clock_hz, self.uart_divisor)

    @property
    def is_emulated(self) -> bool:
        """A board that exists only in an emulator (its firmware is built for QEMU). A real board
        that QEMU also emulates (emulation.firmware == "hardware") is not."""
        return self.emulation is not None and self.emulation.firmware == "emulator"

    @property
    def qemu_machine(self) -> str | None:
        """The QEMU machine that runs this board's firmware (`stm32ai run`, validate), if any."""
        return self.emulation.qemu_machine if self.emulation else None

    @property
    def mcpu(self) -> str:
        return self.core

    @property
    def mfpu(self) -> str | None:
        return None if self.fpu == "none" else self.fpu

    @property
    def mfloat_abi(self) -> str:
        return "soft" if self.fpu == "none" else "hard"

    @property
    def arch_flags(self) -> list[str]:
        """gcc flags selecting the core, FPU and float ABI (all C and link steps use them)."""
        flags = [f"-mcpu={self.mcpu}", "-mthumb"]
        if self.mfpu:
            flags.append(f"-mfpu={self.mfpu}")
        flags.append(f"-mfloat-abi={self.mfloat_abi}")
        return flags

    def ready(self, name: str) -> bool:
        """A region the firmware can use: no bring-up needed, or one stm32ai generates."""
        r = self.region(name)
        return r.needs_init is None or name in self.external

    def region(self, name: str) -> Region:
        for r in self.memory:
            if r.name == name:
                return r
        raise Stm32aiError(f"board {self.id} has no memory region '{name}' "
                           f"(regions: {', '.join(r.name for r in self.memory)})")

    def summary(self) -> dict[str, Any]:
        """One row of `stm32ai boards` (also its --json form)."""
        return {
            "id": self.id, "name": self.name, "mcu": self.mcu, "core": self.core, "fpu": self.fpu,
            "sysclk_hz": self.sysclk_hz, "cpu_hz": self.cpu_hz, "hclk_hz": self.hclk_hz,
            "pclk1_hz": self.pclk1_hz, "pclk2_hz": self.pclk2_hz,
            "memory": {r.name: {"origin": r.origin, "length": r.length, "access": r.access,
                                "needs_init": r.needs_init} for r in self.memory},
            "activations_pool": list(self.activations_pool),
            "weights_pool": list(self.weights_pool),
            "console": f"{self.console.instance} {self.console.baud} baud ({self.console.vcp})",
            "cycle_counter": self.cycle_counter,
            "emulated": self.emulation.qemu_machine if self.is_emulated and self.emulation else None,
            "qemu_machine": self.qemu_machine,
            # what the demo's counter measures: instructions under QEMU -icount, else core cycles
            "counter_unit": "instructions" if self.is_emulated else "cycles",
            # program memory (the text region) and on-chip RAM (every other writable region that
            # needs no bring-up: external SDRAM/QSPI are not counted)
            "flash_bytes": self.region(self.text_region).length,
            "ram_bytes": sum(r.length for r in self.memory
                             if r.writable and not r.needs_init and r.name != self.text_region),
        }


def uart_divisor(kind: str, clock_hz: int, baud: int) -> int:
    """BRR / BAUDDIV for a baud rate, rounded to nearest as the C driver computes it."""
    if kind == "lpuart":
        # RM0432 §53.4.7 / RM0351 §41.4.4: LPUART baud = 256 * f_ck / LPUARTDIV
        return (256 * clock_hz + baud // 2) // baud
    if kind == "cmsdk":
        # Arm CMSDK APB UART (DDI0479 §4.3): baud = PCLK / BAUDDIV, integer divisor, >= 16
        return clock_hz // baud
    if kind == "nrf51":
        # nRF51 Series Reference Manual v3.0 §29.10.8 (UART BAUDRATE): the register is
        # baud * 2^32 / 16 MHz with its low 12 bits clear (115200 -> 0x01D7E000, 9600 -> 0x00275000,
        # 1M -> 0x10000000, every value of the manual's table). `clock_hz` is the 16 MHz HFCLK.
        return ((baud << 32) // clock_hz + 0x800) & ~0xFFF
    # USART, oversampling by 16: RM0385 §31.5.4 "BRR = USARTDIV"; RM0090 §30.3.4 (mantissa and
    # 4-bit fraction of USARTDIV, which is the same 16-bit value).
    return (clock_hz + baud // 2) // baud


def uart_baud(kind: str, clock_hz: int, div: int) -> float:
    if div <= 0:
        return 0.0
    if kind == "lpuart":
        return 256 * clock_hz / div
    if kind == "nrf51":
        return div * clock_hz / (1 << 32)
    return clock_hz / div


def _limits_key(family: str, mcu: str) -> str:
    if family == "stm32f4":
        return "stm32f401" if mcu.upper().startswith("STM32F401") else "stm32f405"
    if family == "stm32h7" and mcu.upper().startswith(("STM32H7A3", "STM32H7B3", "STM32H7B0")):
        return "stm32h7a3"
    if family == "stm32h7" and mcu.upper().startswith(("STM32H745", "STM32H747", "STM32H755", "STM32H757")):
        return "stm32h747"
    return family


# ---------------------------------------------------------------------------------------------
# Loading and validation
# ---------------------------------------------------------------------------------------------
class _Reader:
    """Typed access to a YAML mapping that reports the key path and file on every error."""

    def __init__(self, src: str, data: Any, path: str = ""):
        self.src, self.data, self.path = src, data, path
        if not isinstance(data, dict):
            self.fail(f"expected a mapping, got {type(data).__name__}")

    def fail(self, msg: str, key: str | None = None) -> None:
        where = ".".join(p for p in (self.path, key) if p)
        raise Stm32aiError(f"board file {self.src}: {where + ': ' if where else ''}{msg}")

    def _get(self, key: str, required: bool) -> Any:
        if key not in self.data or self.data[key] is None:
            if required:
                self.fail("missing (required)", key)
            return None
        return self.data[key]

    def sub(self, key: str, required: bool = True) -> _Reader | None:
        v = self._get(key, required)
        if v is None:
            return None
        return _Reader(self.src, v, ".".join(p for p in (self.path, key) if p))

    def str(self, key: str, required: bool = True, choices: tuple[str, ...] | None = None,
            default: str | None = None) -> str | None:
        v = self._get(key, required)
        if v is None:
            return default
        if not isinstance(v, str):
            self.fail(f"expected a string, got {v!r}", key)
        if choices is not None and v not in choices:
            self.fail(f"'{v}' is not one of {', '.join(choices)}", key)
        return v

    def int(self, key: str, required: bool = True, lo: int | None = None, hi: int | None = None,
            default: int | None = None) -> int | None:
        v = self._get(key, required)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(f"expected an integer, got {v!r}", key)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            self.fail(f"{v} is out of range {lo}..{hi}", key)
        return v

    def size(self, key: str, required: bool = True, default: int | None = None) -> int | None:
        v = self._get(key, required)
        if v is None:
            return default
        try:
            return parse_size(v, key)
        except ValueError as e:
            self.fail(str(e).split(": ", 1)[1], key)
        return None

    def bool(self, key: str, default: bool = False) -> bool:
        v = self._get(key, False)
        if v is None:
            return default
        if not isinstance(v, bool):
            self.fail(f"expected true or false, got {v!r}", key)
        return v

    def list_str(self, key: str, required: bool = True) -> tuple[str, ...]:
        v = self._get(key, required)
        if v is None:
            return ()
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v) or not v:
            self.fail(f"expected a non-empty list of names, got {v!r}", key)
        return tuple(v)

    def list(self, key: str, required: bool = False) -> list[_Reader]:
        v = self._get(key, required)
        if v is None:
            return []
        if not isinstance(v, list):
            self.fail(f"expected a list, got {type(v).__name__}", key)
        base = ".".join(p for p in (self.path, key) if p)
        return [_Reader(self.src, x, f"{base}[{i}]") for i, x in enumerate(v)]

    def unknown_keys(self, known: set[str]) -> None:
        extra = sorted(set(self.data) - known)
        if extra:
            self.fail(f"unknown key(s) {', '.join(extra)} (allowed: {', '.join(sorted(known))})")


# ---------------------------------------------------------------------------------------------
# The schema, declared once: every key of every section, its type, whether it is required, its
# allowed values or range and its default. _read() applies it (types, ranges, unknown keys);
# _parse() builds the dataclasses from what it returns and adds the checks that span several
# keys (clock limits, layout, pools, console divisor). docs/boards.md documents the same keys
# (tests/test_boards_soc.py checks that it names every one).
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    kind: str                       # str | int | size | bool | names | section | list | map | any
    required: bool = False
    choices: tuple[str, ...] | None = None
    lo: int | None = None
    hi: int | None = None
    default: Any = None


_U32 = {"lo": 0, "hi": 0xFFFFFFFF}
SCHEMA: dict[str, dict[str, Field]] = {
    "board": {
        "id": Field("str", True), "name": Field("str", True), "mcu": Field("str", True),
        "family": Field("str", True, FAMILIES), "core": Field("str", True, CORES),
        "fpu": Field("str", True, FPUS), "references": Field("map"), "clock": Field("section", True),
        "memory": Field("list", True), "layout": Field("section", True), "pools": Field("section", True),
        "console": Field("section", True), "gpio": Field("section"), "pre_init": Field("list"),
        "cycle_counter": Field("str", True, CYCLE_COUNTERS), "cache": Field("bool", default=False),
        "irq_count": Field("int", True, lo=1, hi=496), "emulation": Field("section"),
        "cubeide": Field("section"), "openocd": Field("str"),
        "memsys": Field("map"),     # the estimator's memory-system description (stm32ai/estimate/memsys.py)
        "external": Field("map"),   # external memory parts and their bring-up (stm32ai/extmem.py)
    },
    "clock": {
        "source": Field("str", True, CLOCK_SOURCES),
        "hse_hz": Field("int", lo=1_000_000, hi=50_000_000), "hse_bypass": Field("bool", default=False),
        "msi_hz": Field("int", default=4_000_000), "fixed_hz": Field("int", lo=1_000_000, hi=1_000_000_000),
        "pll": Field("section"),
        **{k: Field("int", default=1) for k in ("cpu_div", "ahb_div", "apb1_div", "apb2_div", "apb3_div",
                                                 "apb4_div")},
        "flash_latency": Field("int", lo=0, hi=15, default=0), "voltage_scale": Field("int", lo=0, hi=3),
        "overdrive": Field("bool", default=False),
        "supply": Field("str", choices=SUPPLIES, default="ldo"),
    },
    "pll": {"m": Field("int", True), "n": Field("int", True), "p": Field("int"), "q": Field("int"),
            "r": Field("int")},
    "region": {"name": Field("str", True), "origin": Field("int", True, **_U32), "length": Field("size", True),
               "access": Field("str", True), "needs_init": Field("str"), "enable": Field("section"),
               "note": Field("str", default="")},
    "layout": {"text": Field("str", True), "data": Field("str", True), "stack": Field("str"),
               "stack_size": Field("size", default=8192), "heap_size": Field("size", default=0)},
    "pools": {"activations": Field("names", True), "weights": Field("names", True)},
    "console": {
        "driver": Field("str", True, UART_DRIVERS), "instance": Field("str", True),
        "base": Field("int", True, **_U32), "kind": Field("str"), "regs": Field("str"),
        "clock": Field("str", True, ("pclk1", "pclk2", "sysclk", "hclk")), "enable": Field("section"),
        "tx": Field("section"), "rx": Field("section"), "baud": Field("int", lo=1200, hi=12_000_000, default=115200),
        "vcp": Field("str", default=""),
        "psel_txd": Field("int", lo=0, hi=31), "psel_rxd": Field("int", lo=0, hi=31),   # nrf51_uart only
    },
    "gpio": {"base": Field("int", True, **_U32), "stride": Field("int", default=0x400),
             "enable_reg": Field("int", True, **_U32)},
    "pre_init": {"reg": Field("int", True, **_U32), "set": Field("int", True, lo=1, hi=0xFFFFFFFF),
                 "note": Field("str", default="")},
    "emulation": {
        "qemu_machine": Field("str", True), "firmware": Field("str", choices=EMULATED_FIRMWARE, default="emulator"),
        "rcc_modelled": Field("bool", default=False), "cpu_hz": Field("int", lo=1_000_000, default=0),
        "serial_index": Field("int", lo=0, hi=7, default=0), "icount_shift": Field("int", lo=0, hi=10, default=0),
        "serial_rx_kick": Field("bool", default=False), "note": Field("str", default=""),
    },
    "cubeide": {"mcu": Field("str"), "board": Field("str")},
    "regbit": {"reg": Field("int", True, **_U32), "bit": Field("int", lo=0, hi=31), "bits": Field("any")},
    "pin": {"port": Field("str", True), "pin": Field("int", True, lo=0, hi=15), "af": Field("int", True, lo=0, hi=15)},
    # layered files (boards/soc/<soc>.yaml and what a board file adds to it)
    "soc": {"soc": Field("str", True), "family": Field("str", True, FAMILIES), "core": Field("str", True, CORES),
            "fpu": Field("str", True, FPUS), "references": Field("map"), "memory": Field("list", True),
            "uart_regs": Field("str", True, ("sr_dr", "isr_tdr")), "uarts": Field("map", True),
            "gpio": Field("section"), "pre_init": Field("list"), "irq_count": Field("int", True, lo=1, hi=496),
            "cycle_counter": Field("str", choices=CYCLE_COUNTERS), "cache": Field("bool", default=False),
            "memsys": Field("map")},
    "uart": {"base": Field("int", True, **_U32), "clock": Field("str", True, ("pclk1", "pclk2", "sysclk", "hclk")),
             "enable": Field("section"), "kind": Field("str", choices=("usart", "lpuart")),
             "driver": Field("str", choices=UART_DRIVERS), "tx": Field("map", True), "rx": Field("map", True)},
    "board_console": {"instance": Field("str", True), "tx": Field("str", True), "rx": Field("str", True),
                      "baud": Field("int"), "vcp": Field("str")},
}
# keys a layered board file has besides the merged description's
LAYERED_KEYS = {"soc": Field("str", True), "omit_memory": Field("names")}


def _read(r: _Reader, section: str, required: dict[str, bool] | None = None,
          extra: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every key of `section` from `r`, checked as SCHEMA says; `required` overrides keys whose
    presence depends on another key (e.g. hse_hz when source is hse). Sections and lists come
    back as readers for the caller; unknown keys (beyond `extra`) are errors."""
    spec = SCHEMA[section]
    r.unknown_keys(set(spec) | set(extra))
    out: dict[str, Any] = {}
    for key, f in spec.items():
        req = (required or {}).get(key, f.required)
        if f.kind == "str":
            out[key] = r.str(key, required=req, choices=f.choices, default=f.default)
        elif f.kind == "int":
            out[key] = r.int(key, required=req, lo=f.lo, hi=f.hi, default=f.default)
        elif f.kind == "size":
            out[key] = r.size(key, required=req, default=f.default)
        elif f.kind == "bool":
            out[key] = r.bool(key, default=bool(f.default))
        elif f.kind == "names":
            out[key] = r.list_str(key, required=req)
        elif f.kind == "section":
            out[key] = r.sub(key, required=req)
        elif f.kind == "list":
            out[key] = r.list(key, required=req)
        elif f.kind == "map":
            v = r._get(key, req)
            if v is not None and not isinstance(v, dict):
                r.fail(f"expected a mapping, got {type(v).__name__}", key)
            out[key] = v
        else:
            out[key] = r._get(key, req)
    return out


def _regbit(r: _Reader | None) -> RegBit | None:
    if r is None:
        return None
    v = _read(r, "regbit")
    if v["bits"] is not None:
        bits = v["bits"]
        if (not isinstance(bits, list) or not bits
                or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 31 for x in bits)):
            r.fail(f"expected a list of bit numbers 0..31, got {bits!r}", "bits")
        return RegBit(reg=v["reg"], bits=tuple(bits))
    return RegBit(reg=v["reg"], bits=(r.int("bit", lo=0, hi=31) or 0,))


def _pin(r: _Reader | None) -> Pin | None:
    if r is None:
        return None
    v = _read(r, "pin")
    if not re.fullmatch(r"[A-K]", v["port"]):
        r.fail(f"'{v['port']}' is not a GPIO port letter A..K", "port")
    return Pin(port=v["port"], pin=v["pin"], af=v["af"])


def _parse_clock(c: _Reader, family: str, mcu: str) -> ClockTree:
    source = c.str("source", choices=CLOCK_SOURCES) or ""
    v = _read(c, "clock", required={"hse_hz": source == "hse", "fixed_hz": source == "fixed",
                                    "flash_latency": source != "fixed"})
    if family in ("mps2", "nrf51") and source != "fixed":
        c.fail(f"an {family} board has no STM32 RCC: use source: fixed", "source")
    if family in _ONE_APB_FAMILIES and c.data.get("apb2_div", 1) != 1:
        c.fail(f"{family} has one APB prescaler (PPRE): set apb1_div, not apb2_div", "apb2_div")
    if family in _NO_PLL_FAMILIES and c.data.get("pll") is not None:
        c.fail(f"{family} has no PLL: SYSCLK is HSISYS (leave pll out)", "pll")
    if source == "msi" and family not in ("stm32l4", "stm32l4plus"):
        c.fail(f"MSI exists only on STM32L4 parts, not {family}", "source")
    if v["supply"] != "ldo" and _limits_key(family, mcu) not in ("stm32h7a3", "stm32h747"):
        c.fail(f"supply {v['supply']} needs an STM32H7 with an SMPS (H7A3/B3, H745/H747)", "supply")
    pll = None
    if v["pll"] is not None:
        pv = _read(v["pll"], "pll")
        pll = Pll(m=pv["m"], n=pv["n"], p=pv["p"], q=pv["q"], r=pv["r"])
    if source == "fixed" and pll is not None:
        c.fail("a fixed (emulated) clock has no PLL", "pll")
    divs = {k: v[k] for k in ("cpu_div", "ahb_div", "apb1_div", "apb2_div", "apb3_div", "apb4_div")}
    for k in ("ahb_div", "cpu_div"):
        if divs[k] not in (1, 2, 4, 8, 16, 64, 128, 256, 512):
            c.fail(f"{divs[k]} is not an AHB prescaler (1, 2, 4, 8, 16, 64, 128, 256, 512)", k)
    for k in ("apb1_div", "apb2_div", "apb3_div", "apb4_div"):
        if divs[k] not in (1, 2, 4, 8, 16):
            c.fail(f"{divs[k]} is not an APB prescaler (1, 2, 4, 8, 16)", k)
    if family != "stm32h7" and (divs["cpu_div"], divs["apb3_div"], divs["apb4_div"]) != (1, 1, 1):
        c.fail("cpu_div/apb3_div/apb4_div exist only on STM32H7")
    clock = ClockTree(family=family, source=source, hse_hz=v["hse_hz"], hse_bypass=v["hse_bypass"],
                      fixed_hz=v["fixed_hz"], msi_hz=v["msi_hz"], pll=pll, flash_latency=v["flash_latency"],
                      voltage_scale=v["voltage_scale"], overdrive=v["overdrive"], supply=v["supply"], **divs)
    _check_clock(c, clock, mcu)
    return clock


def _parse_memory(b: _Reader, items: list[_Reader]) -> list[Region]:
    regions: list[Region] = []
    for r in items:
        v = _read(r, "region")
        name, access, origin, length = v["name"], v["access"], v["origin"], v["length"]
        if not _REGION_NAME.match(name):
            r.fail(f"'{name}' is not a valid region name (lower-case, digits, '_')", "name")
        if any(x.name == name for x in regions):
            r.fail(f"duplicate region '{name}'", "name")
        if not access or not ACCESS.match(access):
            r.fail(f"'{access}' is not an access spec such as rx, rw, rwx", "access")
        if length <= 0 or origin + length > 1 << 32:
            r.fail(f"length {length} does not fit the 4 GiB address space at 0x{origin:08x}", "length")
        if origin % 4:
            r.fail(f"origin 0x{origin:08x} is not word-aligned", "origin")
        regions.append(Region(name=name, origin=origin, length=length, access=access,
                              needs_init=v["needs_init"], enable=_regbit(v["enable"]), note=v["note"]))
    for i, x in enumerate(regions):
        for y in regions[i + 1:]:
            if x.origin < y.end and y.origin < x.end:
                b.fail(f"regions '{x.name}' and '{y.name}' overlap", "memory")
    return regions


def _parse_console(u: _Reader) -> Console:
    driver = u.str("driver", choices=UART_DRIVERS) or ""
    usart = driver == "stm32_usart"
    v = _read(u, "console", required={"enable": usart, "tx": usart, "rx": usart, "regs": usart})
    if driver == "cmsdk_uart":
        kind = u.str("kind", required=False, choices=("cmsdk",), default="cmsdk") or "cmsdk"
        regs = u.str("regs", required=False, choices=("cmsdk",), default="cmsdk") or "cmsdk"
    elif driver == "nrf51_uart":
        kind = u.str("kind", required=False, choices=("nrf51",), default="nrf51") or "nrf51"
        regs = u.str("regs", required=False, choices=("nrf51",), default="nrf51") or "nrf51"
    else:
        kind = u.str("kind", required=False, choices=("usart", "lpuart"), default="usart") or "usart"
        regs = u.str("regs", choices=("sr_dr", "isr_tdr")) or ""
        if kind == "lpuart" and regs != "isr_tdr":
            u.fail("an LPUART has the ISR/TDR register layout (regs: isr_tdr)", "regs")
    return Console(driver=driver, instance=v["instance"], base=v["base"], kind=kind, regs=regs,
                   clock=v["clock"], enable=_regbit(v["enable"]), tx=_pin(v["tx"]), rx=_pin(v["rx"]),
                   baud=v["baud"], vcp=v["vcp"], psel_txd=v["psel_txd"], psel_rxd=v["psel_rxd"])


def _parse_emulation(e: _Reader, clock: ClockTree) -> Emulation:
    rcc = e.bool("rcc_modelled")
    v = _read(e, "emulation", required={"cpu_hz": not rcc})
    emu = Emulation(qemu_machine=v["qemu_machine"], rcc_modelled=rcc, cpu_hz=v["cpu_hz"],
                    serial_index=v["serial_index"], note=v["note"], icount_shift=v["icount_shift"],
                    firmware=v["firmware"], serial_rx_kick=v["serial_rx_kick"])
    if emu.firmware == "hardware" and not rcc:
        e.fail("a real board's firmware brings up its clock tree: the emulator must model the "
               "RCC (rcc_modelled: true)", "firmware")
    if not emu.rcc_modelled and clock.source != "fixed":
        e.fail("the emulator does not model the RCC: the board must keep its reset clock "
               "(clock.source: fixed)", "rcc_modelled")
    if clock.source == "fixed" and emu.cpu_hz != clock.cpu_hz:
        e.fail(f"cpu_hz {emu.cpu_hz} differs from the derived core clock {clock.cpu_hz}", "cpu_hz")
    return emu


def _parse(src: str, data: Any, stem: str | None) -> Board:
    b = _Reader(src, data)
    core = b.str("core", choices=CORES) or ""     # the FPU check below needs it first
    v = _read(b, "board")
    bid, family, fpu, mcu = v["id"], v["family"], v["fpu"], v["mcu"]
    if not _ID.match(bid):
        b.fail(f"'{bid}' is not a valid board id (lower-case letters, digits, '-')", "id")
    if stem is not None and stem != bid:
        b.fail(f"id '{bid}' does not match the file name '{stem}.yaml'", "id")
    if fpu not in _CORE_FPUS[core]:
        b.fail(f"a {core} cannot have FPU '{fpu}' (possible: {', '.join(_CORE_FPUS[core])})", "fpu")
    refs = {str(k): str(x) for k, x in (v["references"] or {}).items()}
    clock = _parse_clock(v["clock"], family, mcu)
    regions = _parse_memory(b, v["memory"])
    names = {r.name for r in regions}
    by_name = {r.name: r for r in regions}

    lay = v["layout"]
    lv = _read(lay, "layout")
    text_region, data_region = lv["text"], lv["data"]
    stack_region = lv["stack"] or data_region
    for key, rn in (("text", text_region), ("data", data_region), ("stack", stack_region)):
        if rn not in names:
            lay.fail(f"no memory region named '{rn}' (regions: {', '.join(sorted(names))})", key)
    if "x" not in by_name[text_region].access:
        lay.fail(f"region '{text_region}' is not executable", "text")
    for key, rn in (("data", data_region), ("stack", stack_region)):
        reg = by_name[rn]
        if not reg.writable or reg.needs_init:
            lay.fail(f"region '{rn}' cannot hold {key} (not writable or needs bring-up first)", key)
    stack_size, heap_size = lv["stack_size"], lv["heap_size"]
    if stack_size % 8 or stack_size < 1024:
        lay.fail(f"{stack_size} must be a multiple of 8 and at least 1024", "stack_size")

    pools = v["pools"]
    pv = _read(pools, "pools")
    act_pool, w_pool = pv["activations"], pv["weights"]
    for key, lst in (("activations", act_pool), ("weights", w_pool)):
        for rn in lst:
            if rn not in names:
                pools.fail(f"no memory region named '{rn}' (regions: {', '.join(sorted(names))})", key)
    for rn in act_pool:
        if not by_name[rn].writable:
            pools.fail(f"region '{rn}' is not writable: it cannot hold activations", "activations")

    console = _parse_console(v["console"])
    if v["gpio"] is None and console.driver == "stm32_usart":
        b.fail("missing (required)", "gpio")
    gpio = None
    if v["gpio"] is not None:
        gv = _read(v["gpio"], "gpio")
        gpio = Gpio(base=gv["base"], stride=gv["stride"], enable_reg=gv["enable_reg"])
    pre = [RegWrite(**_read(w, "pre_init")) for w in v["pre_init"]]

    emu = None
    if v["emulation"] is not None:
        emu = _parse_emulation(v["emulation"], clock)
    elif clock.source == "fixed":
        b.fail("clock.source: fixed is only for emulated boards (add an emulation: section)", "clock")

    ide = _read(v["cubeide"], "cubeide") if v["cubeide"] is not None else {"mcu": None, "board": None}
    board = Board(
        id=bid, name=v["name"], mcu=mcu, family=family, core=core, fpu=fpu, clock=clock,
        memory=tuple(regions), text_region=text_region, data_region=data_region,
        stack_region=stack_region, stack_size=stack_size, heap_size=heap_size,
        activations_pool=act_pool, weights_pool=w_pool, console=console, gpio=gpio,
        cycle_counter=v["cycle_counter"], cache=v["cache"], pre_init=tuple(pre), emulation=emu,
        irq_count=v["irq_count"], cubeide_mcu=ide["mcu"] or mcu, cubeide_board=ide["board"] or "",
        openocd=v["openocd"], references=refs, memsys=v["memsys"],
        external=_external(b, v["external"], regions, family))
    if board.cache and core != "cortex-m7":
        b.fail("cache: true needs a Cortex-M7 (L1 caches)", "cache")
    _check_console(v["console"], board)
    return board


def _external(b: _Reader, data: Any, regions: list[Region], family: str) -> dict[str, Any]:
    from stm32ai.extmem import ExternalError, parse_external

    try:
        return parse_external(data, {r.name: (r.origin, r.length, r.needs_init) for r in regions}, family)
    except ExternalError as e:
        b.fail(str(e))
        raise  # unreachable: fail() raises


def _check_clock(c: _Reader, ck: ClockTree, mcu: str) -> None:
    if ck.source == "fixed":
        return
    lim = _LIMITS[_limits_key(ck.family, mcu)]
    if ck.family in _NO_PLL_FAMILIES:
        _check_clock_limits(c, ck, lim, mcu)
        return
    if ck.pll is None:
        c.fail("a PLL (m, n and the SYSCLK output divider) is required", "pll")
    assert ck.pll is not None
    p = ck.pll
    if not lim.m[0] <= p.m <= lim.m[1]:
        c.fail(f"m = {p.m} is out of range {lim.m[0]}..{lim.m[1]} ({lim.ref})", "pll")
    if not lim.n[0] <= p.n <= lim.n[1]:
        c.fail(f"n = {p.n} is out of range {lim.n[0]}..{lim.n[1]} ({lim.ref})", "pll")
    for key, allowed in (("p", lim.p), ("q", lim.q), ("r", lim.r)):
        v = getattr(p, key)
        if v is not None and v not in allowed:
            c.fail(f"{key} = {v} is not an allowed divider ({lim.ref})", "pll")
    sysdiv = p.r if lim.sys_from == "r" else p.p
    if sysdiv is None:
        c.fail(f"pll.{lim.sys_from} (the SYSCLK output divider) is required for {ck.family}", "pll")
    fin = ck.pll_input_hz or 0
    if not lim.pll_in[0] <= fin <= lim.pll_in[1]:
        c.fail(f"PLL input {fin / _MHZ:g} MHz (oscillator / m) is outside "
               f"{lim.pll_in[0] / _MHZ:g}..{lim.pll_in[1] / _MHZ:g} MHz ({lim.ref})", "pll")
    vco = ck.vco_hz or 0
    if not lim.vco[0] <= vco <= lim.vco[1]:
        c.fail(f"VCO {vco / _MHZ:g} MHz is outside {lim.vco[0] / _MHZ:g}..{lim.vco[1] / _MHZ:g} MHz "
               f"({lim.ref})", "pll")
    _check_clock_limits(c, ck, lim, mcu)


def _check_clock_limits(c: _Reader, ck: ClockTree, lim: _Limits, mcu: str) -> None:
    """Bus maxima, over-drive/boost and the minimum flash wait states for HCLK."""
    for what, hz, mx in (("core clock", ck.cpu_hz, lim.cpu_max), ("HCLK", ck.hclk_hz, lim.hclk_max),
                         ("PCLK1", ck.pclk1_hz, lim.pclk1_max), ("PCLK2", ck.pclk2_hz, lim.pclk2_max)):
        if hz > mx:
            c.fail(f"derived {what} {hz / _MHZ:g} MHz exceeds the {mx / _MHZ:g} MHz maximum "
                   f"({lim.ref})")
    if ck.family == "stm32f7" and ck.hclk_hz > 180 * _MHZ and not ck.overdrive:
        c.fail("HCLK above 180 MHz needs over-drive (overdrive: true, RM0385 §4.1.4)", "overdrive")
    if (_limits_key(ck.family, mcu) == "stm32h747" and ck.supply == "smps_direct"
            and ck.voltage_scale is not None and ck.voltage_scale < 1):
        c.fail("VOS0 is not available with the SMPS supplying the core directly (RM0399 §7.4)", "voltage_scale")
    if ck.family == "stm32l4plus" and ck.cpu_hz > 80 * _MHZ and ck.voltage_scale != 0:
        c.fail("above 80 MHz the L4+ needs Range 1 boost mode (voltage_scale: 0, RM0432 §5.1.8)",
               "voltage_scale")
    vs = ck.voltage_scale if ck.voltage_scale is not None else (1 if ck.family != "stm32l4plus" else 0)
    table = lim.ws.get(vs)
    if table is None:
        c.fail(f"voltage scale {vs} is not valid for {ck.family} (one of {sorted(lim.ws)})",
               "voltage_scale")
    assert table is not None
    need = next((i for i, top in enumerate(table) if ck.hclk_hz <= top), None)
    if need is None:
        c.fail(f"HCLK {ck.hclk_hz / _MHZ:g} MHz is above what voltage scale {vs} allows "
               f"({table[-1] / _MHZ:g} MHz, {lim.ref})", "voltage_scale")
    assert need is not None
    if ck.flash_latency < need:
        c.fail(f"{ck.flash_latency} wait states are too few for HCLK {ck.hclk_hz / _MHZ:g} MHz: "
               f"at least {need} ({lim.ref})", "flash_latency")


def _check_console(u: _Reader, b: Board) -> None:
    con = b.console
    hz = b.uart_clock_hz
    div = b.uart_divisor
    if con.kind == "lpuart":
        # RM0432 §53.4.7: LPUARTDIV must be >= 0x300 and < 2^20; f_ck in [3 x baud, 4096 x baud].
        if not 0x300 <= div < 1 << 20 or not 3 * con.baud <= hz <= 4096 * con.baud:
            u.fail(f"{con.baud} baud cannot be generated from {hz} Hz by an LPUART", "baud")
    elif con.kind == "nrf51":
        if not 0 < div < 1 << 32:
            u.fail(f"{con.baud} baud cannot be generated by the nRF51 UART", "baud")
    elif con.kind == "cmsdk":
        if div < 16:
            u.fail(f"BAUDDIV {div} < 16: {con.baud} baud is too fast for a {hz} Hz PCLK", "baud")
    elif div < 16 or div > 0xFFFF:
        u.fail(f"BRR {div} is outside 16..65535 for {con.baud} baud at {hz} Hz", "baud")
    err = abs(b.uart_actual_baud - con.baud) / con.baud
    if err > 0.02:
        u.fail(f"{con.baud} baud from {hz} Hz is off by {err:.1%} (more than 2%)", "baud")


def boards_dir() -> Path:
    return data_dir("boards")


# ---------------------------------------------------------------------------------------------
# SoC layer (Zephyr-like): boards/soc/<soc>.yaml holds what every board with that part shares
# (family, core, FPU, memory map, UART instances with their registers and pin alternate
# functions, GPIO, vector count); a board file names its `soc:` and adds what the board makes of
# it (clock source and PLL, console instance and pins, external memories, pools, emulator).
# The two are merged into one board description, which _parse validates like a flat file.
# ---------------------------------------------------------------------------------------------
_SOC_INHERITED = ("family", "core", "fpu", "gpio", "pre_init", "irq_count", "cycle_counter", "cache",
                  "memsys")
_PIN = re.compile(r"^P([A-K])(\d{1,2})$")


def soc_dir() -> Path:
    return boards_dir() / "soc"


def _soc_file(name: str, board_path: Path | None) -> Path:
    """A board file's SoC: next to it (boards of the user's own: ./soc/<name>.yaml) or shipped."""
    for d in ([board_path.parent / "soc"] if board_path else []) + [soc_dir()]:
        f = d / f"{name}.yaml"
        if f.is_file():
            return f
    known = ", ".join(sorted(x.stem for x in soc_dir().glob("*.yaml")))
    raise Stm32aiError(f"unknown SoC '{name}' (known: {known}; add boards/soc/{name}.yaml)")


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise Stm32aiError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise Stm32aiError(f"{path}: invalid YAML{at}: {problem}") from None


def _console_from_soc(b: _Reader, soc: _Reader, con: dict[str, Any]) -> dict[str, Any]:
    """Board console {instance, tx: "PB6", rx: "PB7", baud, vcp} + the SoC's UART table ->
    the full console description (base, registers, clock, enable bit, pins with their AF)."""
    c = _Reader(b.src, con, "console")
    cv = _read(c, "board_console")
    inst = cv["instance"]
    uarts = soc.sub("uarts")
    assert uarts is not None
    if inst not in uarts.data:
        c.fail(f"{soc.src} has no UART '{inst}' (one of {', '.join(uarts.data)})", "instance")
    u = uarts.sub(inst)
    assert u is not None
    _read(u, "uart")
    out: dict[str, Any] = {k: v for k, v in u.data.items() if k not in ("tx", "rx")}
    out.setdefault("driver", "stm32_usart")
    out["regs"] = soc.str("uart_regs")
    out["instance"] = inst
    for key in ("baud", "vcp"):
        if key in con:
            out[key] = con[key]
    for key in ("tx", "rx"):
        pin = cv[key]
        m = _PIN.match(pin)
        if not m:
            c.fail(f"'{pin}' is not a pin name such as PA9", key)
        table = u.sub(key)
        assert table is not None
        if pin not in table.data:
            c.fail(f"{pin} is not a {inst} {key.upper()} pin on {soc.data.get('soc')} "
                   f"(one of {', '.join(map(str, table.data))})", key)
        af = table.int(pin, lo=0, hi=15)
        out[key] = {"port": m.group(1), "pin": int(m.group(2)), "af": af}
    return out


def _apply_soc(src: str, data: Any, path: Path | None) -> tuple[Any, str]:
    """A board file naming `soc:` merged with its SoC file; other files are returned as they are."""
    if not isinstance(data, dict) or "soc" not in data:
        return data, ""
    b = _Reader(src, data)
    name = b.str("soc") or ""
    soc_path = _soc_file(name, path)
    soc = _Reader(str(soc_path), _read_yaml(soc_path))
    _read(soc, "soc")
    b.unknown_keys(set(SCHEMA["board"]) | set(LAYERED_KEYS))
    if soc.str("soc") != soc_path.stem:
        soc.fail(f"soc '{soc.data.get('soc')}' does not match the file name '{soc_path.stem}.yaml'", "soc")
    merged: dict[str, Any] = {k: v for k, v in data.items() if k not in ("soc", "omit_memory")}
    for key in _SOC_INHERITED:
        if key in soc.data and key not in data:
            merged[key] = soc.data[key]
    merged["references"] = {**(soc.data.get("references") or {}), **(data.get("references") or {})}
    omit = set(b.list_str("omit_memory", required=False))
    soc_regions = [r for r in soc.data.get("memory") or [] if isinstance(r, dict)]
    unknown = omit - {r.get("name") for r in soc_regions}
    if unknown:
        b.fail(f"{', '.join(sorted(unknown))} is not a memory region of {name}", "omit_memory")
    board_regions = data.get("memory") or []
    if not isinstance(board_regions, list):
        b.fail("expected a list of the regions the board adds (external memories)", "memory")
    own = {r.get("name") for r in board_regions if isinstance(r, dict)}
    merged["memory"] = ([r for r in soc_regions if r.get("name") not in omit | own] + list(board_regions))
    con = data.get("console")
    if isinstance(con, dict) and "instance" in con and "base" not in con:
        merged["console"] = _console_from_soc(b, soc, con)
    return merged, name


_CACHE: dict[tuple[str, int, int, bool, int], Board] = {}


def _load_file(path: Path, check_stem: bool) -> Board:
    src = str(path)
    try:
        st = path.stat()
        # an edited SoC file must be seen too
        socs = max((f.stat().st_mtime_ns for f in soc_dir().glob("*.yaml")), default=0)
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size, check_stem, socs)
        if key in _CACHE:
            return _CACHE[key]
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise Stm32aiError(f"cannot read board file {src}: {e.strerror or e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise Stm32aiError(f"board file {src}: invalid YAML{at}: {problem}") from None
    data, soc = _apply_soc(src, data, path)
    board = _parse(src, data, path.stem if check_stem else None)
    object.__setattr__(board, "path", path)
    object.__setattr__(board, "soc", soc)
    _CACHE[key] = board    # Board is frozen: safe to share
    return board


def load_board(id_or_path: str | Path) -> Board:
    """A board by id (`disco-f746`) or by the path of a YAML file."""
    s = str(id_or_path)
    p = Path(s)
    if s.endswith((".yaml", ".yml")) or p.is_file() or "/" in s:
        if not p.is_file():
            raise Stm32aiError(f"board file '{s}' not found")
        return _load_file(p, check_stem=False)
    f = boards_dir() / f"{s}.yaml"
    if not f.is_file():
        known = ", ".join(sorted(x.stem for x in boards_dir().glob("*.yaml")))
        raise Stm32aiError(f"unknown board '{s}' (known boards: {known}; see `stm32ai boards`)")
    return _load_file(f, check_stem=True)


def list_boards() -> list[Board]:
    """All boards shipped in boards/, sorted by id."""
    return [_load_file(f, check_stem=True) for f in sorted(boards_dir().glob("*.yaml"))]


def describe_size(n: int) -> str:
    return _fmt_size(n)
