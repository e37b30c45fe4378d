"""Register values for the clock bring-up, computed from a board's clock factors.

The C bring-up (project_templates/.../Core/Src/system.c) runs the sequence the reference
manual prescribes for its family and writes the values computed here; every field encoding is
cited next to its computation. Keeping the encodings in Python makes them unit-testable and
keeps the C free of per-board arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stm32ai.boards import Board, _limits_key

# AHB prescaler field encoding (HPRE, H7 D1CPRE): RM0090 §7.3.3, RM0385 §5.3.3, RM0433 §8.7.7,
# RM0351 §6.4.3: 0xxx = /1, 1000 = /2, 1001 = /4 ... 1111 = /512 (no /32).
_AHB = {1: 0b0000, 2: 0b1000, 4: 0b1001, 8: 0b1010, 16: 0b1011, 64: 0b1100, 128: 0b1101,
        256: 0b1110, 512: 0b1111}
# APB prescaler field encoding (PPRE1/2, H7 D1PPRE/D2PPRE1/2/D3PPRE): 0xx = /1, 100 = /2 ... 111 = /16.
_APB = {1: 0b000, 2: 0b100, 4: 0b101, 8: 0b110, 16: 0b111}


@dataclass
class ClockRegs:
    """C macro name -> (value, comment). Rendered as `#define NAME 0x...u /* comment */`."""

    defs: dict[str, tuple[int, str]] = field(default_factory=dict)

    def add(self, name: str, value: int, comment: str = "") -> None:
        self.defs[name] = (value & 0xFFFFFFFF, comment)

    def lines(self) -> list[str]:
        out = []
        for k, (v, c) in self.defs.items():
            out.append(f"#define {k} 0x{v:08X}u" + (f" /* {c} */" if c else ""))
        return out

    def __getitem__(self, k: str) -> int:
        return self.defs[k][0]


def _vos_f4(board: Board) -> tuple[int, int]:
    """(mask, value) of the VOS field in PWR_CR."""
    vs = board.clock.voltage_scale or 1
    if board.mcu.upper().startswith("STM32F401"):
        # RM0368 §5.4.1 PWR_CR.VOS[15:14]: 01 = scale 3, 10 = scale 2
        return 3 << 14, {3: 1, 2: 2}[vs] << 14
    # RM0090 §5.4.1 PWR_CR.VOS (bit 14): 1 = scale 1, 0 = scale 2
    return 1 << 14, (1 if vs == 1 else 0) << 14


def _vos_3level(vs: int) -> int:
    # RM0385 §4.4.1 PWR_CR1.VOS / RM0433 §6.8.6 PWR_D3CR.VOS: 01 scale 3, 10 scale 2, 11 scale 1
    return {1: 3, 2: 2, 3: 1}[vs]


def _vos_4level(vs: int) -> int:
    # RM0455 §6.8.6 PWR_SRDCR.VOS / RM0481 §10.11.4 PWR_VOSCR.VOS: 00 scale 3, 01 scale 2,
    # 10 scale 1, 11 scale 0
    return {0: 3, 1: 2, 2: 1, 3: 0}[vs]


def _pll_rge(fin: float) -> int:
    # RM0433 §8.7.12 / RM0455 / RM0481 §11.8.x PLL1RGE: 00 1-2 MHz, 01 2-4, 10 4-8, 11 8-16
    return 0 if fin < 2e6 else 1 if fin < 4e6 else 2 if fin < 8e6 else 3


def _pll1divr(p: Any) -> tuple[int, str]:
    # RCC_PLL1DIVR (RM0433 §8.7.13, RM0455, RM0456 §11.8.x, RM0481 §11.8.x, one layout):
    # PLL1N[8:0] = N-1, PLL1P[15:9] = P-1, PLL1Q[22:16] = Q-1, PLL1R[30:24] = R-1
    n, pp, q, r = (getattr(p, k) for k in "npqr")
    return ((n - 1) | (((pp or 2) - 1) << 9) | (((q or 2) - 1) << 16) | (((r or 2) - 1) << 24),
            f"N={n} P={pp} Q={q} R={r}")


# RM0456 §11.8.x RCC_PLL1CFGR.PLL1MBOOST: EPOD booster clock prescaler, 0000 /1, 0001 /2,
# 0010 /4 ... 1000 /16 (divide by 2 x code above 1)
_MBOOST = {1: 0, 2: 1, 4: 2, 6: 3, 8: 4, 10: 5, 12: 6, 14: 7, 16: 8}


def _u5_mboost(source_hz: int) -> int:
    """The PLL1MBOOST divider: the PLL1 source brought into the EPOD booster's input range
    (RM0456 §10.5.4 / §11.4.x "EPOD booster": 4 to 16 MHz), at 8 MHz or below when that stays
    >= 4 MHz (margin on both sides)."""
    for d in sorted(_MBOOST):
        if 4e6 <= source_hz / d <= 8e6:
            return d
    return next(d for d in sorted(_MBOOST) if source_hz / d <= 16e6)


def clock_registers(board: Board) -> ClockRegs:
    """All register values the bring-up of `board` writes (empty for fixed/emulated clocks)."""
    ck = board.clock
    r = ClockRegs()
    if board.family in ("stm32g0", "stm32c0") and ck.source != "fixed":
        return _armv6m_clock_registers(board, r)
    if ck.source == "fixed" or ck.pll is None:
        return r
    p = ck.pll
    fam = board.family
    hse = ck.source == "hse"
    if fam in ("stm32f4", "stm32f7"):
        # RM0090 §7.3.2 / RM0385 §5.3.2 RCC_PLLCFGR: PLLM[5:0], PLLN[14:6], PLLP[17:16] = P/2-1,
        # PLLSRC bit 22 (1 = HSE), PLLQ[27:24].
        mask = 0x3F | (0x1FF << 6) | (3 << 16) | (1 << 22) | (0xF << 24)
        val = p.m | (p.n << 6) | (((p.p or 2) // 2 - 1) << 16) | ((1 if hse else 0) << 22) \
            | ((p.q or 2) << 24)
        if p.r is not None and fam == "stm32f7":
            mask |= 7 << 28          # RM0410 §5.3.2 PLLR[30:28]
            val |= p.r << 28
        r.add("CLK_PLLCFGR_MASK", mask, "RCC_PLLCFGR fields written")
        r.add("CLK_PLLCFGR_VAL", val, f"M={p.m} N={p.n} P={p.p} Q={p.q} src={'HSE' if hse else 'HSI'}")
        # RCC_CFGR: HPRE[7:4], PPRE1[12:10], PPRE2[15:13] (RM0090 §7.3.3, RM0385 §5.3.3)
        r.add("CLK_CFGR_PRE_MASK", (0xF << 4) | (7 << 10) | (7 << 13), "HPRE, PPRE1, PPRE2")
        r.add("CLK_CFGR_PRE_VAL", (_AHB[ck.ahb_div] << 4) | (_APB[ck.apb1_div] << 10)
              | (_APB[ck.apb2_div] << 13), f"AHB /{ck.ahb_div}, APB1 /{ck.apb1_div}, APB2 /{ck.apb2_div}")
        if fam == "stm32f4":
            m, v = _vos_f4(board)
            r.add("CLK_VOS_MASK", m, "PWR_CR.VOS")
            r.add("CLK_VOS_VAL", v, f"voltage scale {ck.voltage_scale or 1}")
            # FLASH_ACR: LATENCY[3:0], PRFTEN 8, ICEN 9, DCEN 10 (RM0090 §3.9.1, RM0368 §3.8.1)
            r.add("CLK_FLASH_ACR_VAL", ck.flash_latency | (1 << 8) | (1 << 9) | (1 << 10),
                  f"{ck.flash_latency} WS, prefetch, I-cache, D-cache")
        else:
            r.add("CLK_VOS_MASK", 3 << 14, "PWR_CR1.VOS")
            r.add("CLK_VOS_VAL", _vos_3level(ck.voltage_scale or 1) << 14,
                  f"voltage scale {ck.voltage_scale or 1}")
            # FLASH_ACR: LATENCY[3:0], PRFTEN 8, ARTEN 9 (RM0385 §3.7.1)
            r.add("CLK_FLASH_ACR_VAL", ck.flash_latency | (1 << 8) | (1 << 9),
                  f"{ck.flash_latency} WS, prefetch, ART accelerator")
        r.add("CLK_FLASH_LATENCY_MASK", 0xF, "FLASH_ACR.LATENCY")
    elif fam == "stm32h7":
        # RM0433 §8.7.11 RCC_PLLCKSELR: PLLSRC[1:0] (00 HSI, 10 HSE), DIVM1[9:4]
        r.add("CLK_PLLCKSELR_MASK", 3 | (0x3F << 4), "PLLSRC, DIVM1")
        r.add("CLK_PLLCKSELR_VAL", (2 if hse else 0) | (p.m << 4), f"src={'HSE' if hse else 'HSI'} M={p.m}")
        fin = ck.pll_input_hz or 0
        rge = 0 if fin < 2e6 else 1 if fin < 4e6 else 2 if fin < 8e6 else 3
        # RM0433 §8.7.12 RCC_PLLCFGR: PLL1FRACEN 0, PLL1VCOSEL 1 (0 = wide), PLL1RGE[3:2],
        # DIVP1EN 16, DIVQ1EN 17, DIVR1EN 18
        en = (1 << 16) | ((1 if p.q else 0) << 17) | ((1 if p.r else 0) << 18)
        r.add("CLK_PLLCFGR_MASK", 0xF | (7 << 16), "PLL1 FRACEN, VCOSEL, RGE, DIVxEN")
        r.add("CLK_PLLCFGR_VAL", (rge << 2) | en, f"input range {rge}, wide VCO, P/Q/R enabled")
        # RM0433 §8.7.13 RCC_PLL1DIVR: DIVN1[8:0] = N-1, DIVP1[15:9] = P-1, DIVQ1[22:16] = Q-1,
        # DIVR1[30:24] = R-1
        r.add("CLK_PLL1DIVR_VAL", (p.n - 1) | (((p.p or 2) - 1) << 9) | (((p.q or 2) - 1) << 16)
              | (((p.r or 2) - 1) << 24), f"N={p.n} P={p.p} Q={p.q} R={p.r}")
        # RM0433 §8.7.7-9: D1CFGR D1CPRE[11:8] D1PPRE[6:4] HPRE[3:0]; D2CFGR D2PPRE2[10:8]
        # D2PPRE1[6:4]; D3CFGR D3PPRE[6:4]
        r.add("CLK_D1CFGR_VAL", (_AHB[ck.cpu_div] << 8) | (_APB[ck.apb3_div] << 4) | _AHB[ck.ahb_div],
              f"D1CPRE /{ck.cpu_div}, D1PPRE /{ck.apb3_div}, HPRE /{ck.ahb_div}")
        r.add("CLK_D2CFGR_VAL", (_APB[ck.apb2_div] << 8) | (_APB[ck.apb1_div] << 4),
              f"D2PPRE2 /{ck.apb2_div}, D2PPRE1 /{ck.apb1_div}")
        r.add("CLK_D3CFGR_VAL", _APB[ck.apb4_div] << 4, f"D3PPRE /{ck.apb4_div}")
        vs = ck.voltage_scale if ck.voltage_scale is not None else 1
        if _limits_key(fam, board.mcu) == "stm32h7a3":
            r.add("CLK_VOS_VAL", _vos_4level(vs) << 14, f"PWR_SRDCR.VOS: scale {vs} (RM0455 §6.8.6)")
        else:
            r.add("CLK_VOS_VAL", _vos_3level(vs) << 14, f"PWR_D3CR.VOS: scale {vs}")
        # PWR_CR3 supply configuration, written once after power-on (RM0433 §6.8.4; RM0399 §7.8.4 and
        # RM0455 §6.8.4 for the SMPS parts: BYPASS 0, LDOEN 1, SDEN/SMPSEN 2, SDEXTHP 3, SDLEVEL[5:4]).
        if ck.supply == "smps_direct":
            r.add("CLK_PWR_CR3_MASK", 0x3F, "SDLEVEL, SDEXTHP, SDEN, LDOEN, BYPASS")
            r.add("CLK_PWR_CR3_VAL", 1 << 2, "direct SMPS supply: SDEN=1, LDOEN=0, BYPASS=0")
        else:
            r.add("CLK_PWR_CR3_MASK", 0x7, "SCUEN/SDEN, LDOEN, BYPASS")
            r.add("CLK_PWR_CR3_VAL", 1 << 1, "LDO supply: LDOEN=1, BYPASS=0")
        # RM0433 §4.9.1 FLASH_ACR: LATENCY[3:0], WRHIGHFREQ[5:4] (Table 17)
        mhz = ck.hclk_hz / 1e6
        wrh = 0 if mhz <= 70 else 1 if mhz <= 185 else 2
        r.add("CLK_FLASH_ACR_VAL", ck.flash_latency | (wrh << 4),
              f"{ck.flash_latency} WS, WRHIGHFREQ {wrh}")
        r.add("CLK_FLASH_LATENCY_MASK", 0xF, "FLASH_ACR.LATENCY")
    elif fam in ("stm32l4", "stm32l4plus"):
        src = {"msi": 1, "hsi": 2, "hse": 3}[ck.source]
        # RM0351 §6.4.4 / RM0432 §6.4.4 RCC_PLLCFGR: PLLSRC[1:0], PLLM (M-1) at bit 4 (3 bits on L4,
        # 4 bits on L4+), PLLN[14:8], PLLQEN 20, PLLQ[22:21] = Q/2-1, PLLREN 24, PLLR[26:25] = R/2-1
        mbits = 0xF if fam == "stm32l4plus" else 0x7
        mask = 3 | (mbits << 4) | (0x7F << 8) | (1 << 16) | (1 << 20) | (3 << 21) | (1 << 24) | (3 << 25)
        val = src | ((p.m - 1) << 4) | (p.n << 8) | (1 << 24) | ((((p.r or 2) // 2) - 1) << 25)
        if p.q:
            val |= (1 << 20) | (((p.q // 2) - 1) << 21)
        r.add("CLK_PLLCFGR_MASK", mask, "RCC_PLLCFGR fields written")
        r.add("CLK_PLLCFGR_VAL", val, f"src={ck.source.upper()} M={p.m} N={p.n} R={p.r} Q={p.q}")
        # RCC_CFGR: HPRE[7:4], PPRE1[10:8], PPRE2[13:11] (RM0351 §6.4.3)
        r.add("CLK_CFGR_PRE_MASK", (0xF << 4) | (7 << 8) | (7 << 11), "HPRE, PPRE1, PPRE2")
        r.add("CLK_CFGR_PRE_VAL", (_AHB[ck.ahb_div] << 4) | (_APB[ck.apb1_div] << 8)
              | (_APB[ck.apb2_div] << 11), f"AHB /{ck.ahb_div}, APB1 /{ck.apb1_div}, APB2 /{ck.apb2_div}")
        # PWR_CR1.VOS[10:9]: 01 range 1, 10 range 2 (RM0351 §5.4.1); range 1 boost is range 1
        # with PWR_CR5.R1MODE = 0 (RM0432 §5.4.19)
        vs = ck.voltage_scale if ck.voltage_scale is not None else 1
        r.add("CLK_VOS_VAL", (1 if vs in (0, 1) else 2) << 9, f"PWR_CR1.VOS: range {max(vs, 1)}")
        r.add("CLK_BOOST", 1 if vs == 0 else 0, "Range 1 boost mode (L4+)")
        # FLASH_ACR: LATENCY[3:0], PRFTEN 8, ICEN 9, DCEN 10 (RM0351 §3.7.1)
        r.add("CLK_FLASH_ACR_VAL", ck.flash_latency | (1 << 8) | (1 << 9) | (1 << 10),
              f"{ck.flash_latency} WS, prefetch, I-cache, D-cache")
        r.add("CLK_FLASH_LATENCY_MASK", 0xF, "FLASH_ACR.LATENCY")
    elif fam == "stm32u5":
        src = {"msi": 1, "hsi": 2, "hse": 3}[ck.source]
        fin = ck.pll_input_hz or 0
        boost = _u5_mboost(ck.oscillator_hz)
        # RM0456 §11.8.x RCC_PLL1CFGR: PLL1SRC[1:0] (01 MSIS, 10 HSI16, 11 HSE), PLL1RGE[3:2]
        # (00 4-8 MHz, 11 8-16 MHz), PLL1FRACEN 4, PLL1M[11:8] = M-1, PLL1MBOOST[15:12],
        # PLL1PEN 16, PLL1QEN 17, PLL1REN 18
        rge = 0 if fin <= 8e6 else 3
        en = ((1 if p.p else 0) << 16) | ((1 if p.q else 0) << 17) | (1 << 18)
        r.add("CLK_PLL1CFGR_MASK", 3 | (3 << 2) | (1 << 4) | (0xF << 8) | (0xF << 12) | (7 << 16),
              "PLL1SRC, PLL1RGE, PLL1FRACEN, PLL1M, PLL1MBOOST, PLL1xEN")
        r.add("CLK_PLL1CFGR_VAL", src | (rge << 2) | ((p.m - 1) << 8) | (_MBOOST[boost] << 12) | en,
              f"src={ck.source.upper()} M={p.m} input range {rge} MBOOST /{boost}")
        r.add("CLK_PLL1DIVR_VAL", *_pll1divr(p))
        # RM0456 §11.8.x RCC_CFGR2: HPRE[3:0], PPRE1[6:4], PPRE2[10:8]
        r.add("CLK_CFGR2_MASK", 0xF | (7 << 4) | (7 << 8), "HPRE, PPRE1, PPRE2")
        r.add("CLK_CFGR2_VAL", _AHB[ck.ahb_div] | (_APB[ck.apb1_div] << 4) | (_APB[ck.apb2_div] << 8),
              f"AHB /{ck.ahb_div}, APB1 /{ck.apb1_div}, APB2 /{ck.apb2_div}")
        # RM0456 §10.10.4 PWR_VOSR.VOS[17:16]: 00 range 4, 01 range 3, 10 range 2, 11 range 1
        vs = ck.voltage_scale if ck.voltage_scale is not None else 1
        r.add("CLK_VOS_VAL", (4 - vs) << 16, f"PWR_VOSR.VOS: range {vs}")
        # RM0456 §10.5.4: the EPOD booster (BOOSTEN) must be on in range 1 and 2 before SYSCLK
        # goes above 55 MHz
        r.add("CLK_BOOST", 1 if vs in (1, 2) and ck.sysclk_hz > 55_000_000 else 0, "EPOD booster")
        # RM0456 §7.9.1 FLASH_ACR: LATENCY[3:0], PRFTEN 8 (off: the ICACHE serves the core)
        r.add("CLK_FLASH_ACR_VAL", ck.flash_latency, f"{ck.flash_latency} WS")
        r.add("CLK_FLASH_LATENCY_MASK", 0xF, "FLASH_ACR.LATENCY")
        # HCLK /2 while SYSCLK switches to a PLL above 80 MHz, >= 1 us, then the target
        # (RM0456 §11.4.x, "clock switch": the transition ST's HAL makes)
        r.add("CLK_AHB_STEP", 1 if ck.sysclk_hz > 80_000_000 and ck.ahb_div == 1 else 0,
              "HPRE /2 during the switch")
    elif fam == "stm32h5":
        src = {"hsi": 1, "hse": 3}[ck.source]
        # RM0481 §11.8.x RCC_PLL1CFGR: PLL1SRC[1:0] (01 HSI, 10 CSI, 11 HSE), PLL1RGE[3:2],
        # PLL1FRACEN 4, PLL1VCOSEL 5 (0 = wide 192-836 MHz), PLL1M[13:8], PLL1PEN 16, PLL1QEN 17,
        # PLL1REN 18
        rge = _pll_rge(ck.pll_input_hz or 0)
        en = (1 << 16) | ((1 if p.q else 0) << 17) | ((1 if p.r else 0) << 18)
        r.add("CLK_PLL1CFGR_MASK", 3 | (3 << 2) | (3 << 4) | (0x3F << 8) | (7 << 16),
              "PLL1SRC, PLL1RGE, PLL1FRACEN, PLL1VCOSEL, PLL1M, PLL1xEN")
        r.add("CLK_PLL1CFGR_VAL", src | (rge << 2) | (p.m << 8) | en,
              f"src={ck.source.upper()} M={p.m} input range {rge}, wide VCO")
        r.add("CLK_PLL1DIVR_VAL", *_pll1divr(p))
        # RM0481 §11.8.x RCC_CFGR2: HPRE[3:0], PPRE1[6:4], PPRE2[10:8], PPRE3[14:12] (APB3 = APB2's)
        r.add("CLK_CFGR2_MASK", 0xF | (7 << 4) | (7 << 8) | (7 << 12), "HPRE, PPRE1, PPRE2, PPRE3")
        r.add("CLK_CFGR2_VAL", _AHB[ck.ahb_div] | (_APB[ck.apb1_div] << 4) | (_APB[ck.apb2_div] << 8)
              | (_APB[ck.apb2_div] << 12), f"AHB /{ck.ahb_div}, APB1 /{ck.apb1_div}, APB2/3 /{ck.apb2_div}")
        vs = ck.voltage_scale if ck.voltage_scale is not None else 0
        r.add("CLK_VOS_VAL", _vos_4level(vs) << 4, f"PWR_VOSCR.VOS: VOS{vs}")
        # RM0481 §7.11.1 FLASH_ACR: LATENCY[3:0], WRHIGHFREQ[5:4] (Table 37: 2 above 168 MHz at VOS0),
        # PRFTEN 8 (off: the ICACHE serves the core)
        mhz = ck.hclk_hz / 1e6
        wrh = 0 if mhz <= 84 else 1 if mhz <= 168 else 2
        r.add("CLK_FLASH_ACR_VAL", ck.flash_latency | (wrh << 4), f"{ck.flash_latency} WS, WRHIGHFREQ {wrh}")
        r.add("CLK_FLASH_LATENCY_MASK", 0x3F, "FLASH_ACR.LATENCY, WRHIGHFREQ")
    return r


def _armv6m_clock_registers(board: Board, r: ClockRegs) -> ClockRegs:
    """STM32G0 (RM0444) and STM32C0 (RM0490): one APB prescaler; G0 PLL R output as SYSCLK, C0
    HSISYS = HSI48 / HSIDIV (no PLL)."""
    ck = board.clock
    # RCC_CFGR: HPRE[11:8], PPRE[14:12], same encodings as above (RM0444 §5.4.3, RM0490 RCC_CFGR)
    r.add("CLK_CFGR_PRE_MASK", (0xF << 8) | (7 << 12), "HPRE, PPRE")
    r.add("CLK_CFGR_PRE_VAL", (_AHB[ck.ahb_div] << 8) | (_APB[ck.apb1_div] << 12),
          f"AHB /{ck.ahb_div}, APB /{ck.apb1_div}")
    # FLASH_ACR: LATENCY[2:0], PRFTEN 8, ICEN 9 (RM0444 §3.7.1, RM0490 FLASH_ACR). Written by
    # read-modify-write: the register also holds DBG_SWEN (bit 18, reset 1), which must stay set
    # or the debugger (and `stm32ai flash`) loses the part until the next reset.
    r.add("CLK_FLASH_ACR_MASK", 0x7 | (1 << 8) | (1 << 9), "FLASH_ACR.LATENCY, PRFTEN, ICEN")
    r.add("CLK_FLASH_ACR_VAL", ck.flash_latency | (1 << 8) | (1 << 9),
          f"{ck.flash_latency} WS, prefetch, instruction cache")
    r.add("CLK_FLASH_LATENCY_MASK", 0x7, "FLASH_ACR.LATENCY")
    if board.family == "stm32c0":
        # RCC_CR.HSIDIV[13:11]: 000 = /1 (RM0490 RCC_CR); HSISYS = 48 MHz
        div = ck.oscillator_hz // ck.sysclk_hz
        r.add("CLK_HSIDIV_MASK", 7 << 11, "RCC_CR.HSIDIV")
        r.add("CLK_HSIDIV_VAL", {1: 0, 2: 1, 4: 2, 8: 3, 16: 4, 32: 5, 64: 6, 128: 7}[div] << 11,
              f"HSI48 /{div}")
        return r
    p = ck.pll
    assert p is not None
    # RM0444 §5.4.4 RCC_PLLCFGR: PLLSRC[1:0] (10 HSI16, 11 HSE), PLLM[6:4] = M-1, PLLN[14:8],
    # PLLPEN 16, PLLP[21:17] = P-1, PLLQEN 24, PLLQ[27:25] = Q-1, PLLREN 28, PLLR[31:29] = R-1
    src = 3 if ck.source == "hse" else 2
    val = src | ((p.m - 1) << 4) | (p.n << 8) | (1 << 28) | (((p.r or 2) - 1) << 29)
    # unused P/Q outputs stay disabled with a valid divider (/2) rather than the reserved 0
    val |= (((p.p or 2) - 1) << 17) | (((p.q or 2) - 1) << 25)
    if p.p:
        val |= 1 << 16
    if p.q:
        val |= 1 << 24
    r.add("CLK_PLLCFGR_MASK", 0xFFFFFFFF, "RCC_PLLCFGR (every field)")
    r.add("CLK_PLLCFGR_VAL", val, f"src={ck.source.upper()} M={p.m} N={p.n} R={p.r}")
    return r
