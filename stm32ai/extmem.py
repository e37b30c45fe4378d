"""External memories a board carries: an SDRAM on the FMC, a NOR flash on the QUADSPI or
(STM32U5) the OCTOSPI, and (STM32U5) an octal DDR PSRAM on the OCTOSPI.

The board file gives each part's datasheet figures under `external:` (keyed by the memory
region they back); this module checks them and derives the controller register values at the
clock the firmware reaches, so the generated C only writes constants (docs/external_memory.md).

Register layouts (bit positions) are those of the STM32 reference manuals:
- FMC SDRAM controller: RM0385 (STM32F74x/75x) §13.7.5 "SDRAM controller registers" (FMC_SDCRx,
  FMC_SDTRx, FMC_SDCMR, FMC_SDRTR, FMC_SDSR); RM0410 (F76x/77x) has the same block.
- QUADSPI: RM0385 §14.5 "QUADSPI registers", RM0351 (STM32L4x5/L4x6) §15.5, identical layout:
  CR (PRESCALER 31:24, FTHRES 11:8, SSHIFT 4, EN 0), DCR (FSIZE 20:16, CSHT 10:8), SR (BUSY 5,
  TCF 1, TEF 0), CCR (FMODE 27:26, DMODE 25:24, DCYC 22:18, ADSIZE 13:12, ADMODE 11:10,
  IMODE 9:8, INSTRUCTION 7:0).
- OCTOSPI (STM32U5): RM0456 OCTOSPI chapter, "OCTOSPI registers": CR (FMODE 29:28, FTHRES 12:8,
  EN 0), DCR1 (MTYP 26:24, DEVSIZE 20:16, CSHT 13:8, DLYBYP 3), DCR2 (PRESCALER 7:0), SR (BUSY 5,
  TCF 1, TEF 0), CCR (DMODE 26:24, ADSIZE 13:12, ADMODE 10:8, ISIZE 5:4, IDTR 3, IMODE 2:0),
  TCR (SSHIFT 30, DCYC 4:0), IR; the I/O manager OCTOSPIM_PCRn (IOHSRC 26:25, IOHEN 24,
  IOLSRC 18:17, IOLEN 16, NCSSRC 9, NCSEN 8, DQSSRC 5, DQSEN 4, CLKSRC 1, CLKEN 0).
  For the PSRAM also: CR TCEN 3 (timeout counter, memory-mapped), DCR1 FRCK 1, DCR3 CSBOUND 20:16,
  DCR4 REFRESH 31:0, LPTR TIMEOUT 15:0, CCR DQSE 29, DDTR 27, ADDTR 11, TCR DHQC 28, and the
  write-side WCCR/WTCR/WIR (offsets 0x180/0x188/0x190), same layouts as CCR/TCR/IR.
- Delay block (DLYB, RM0456 DLYB chapter): CR (SEN 1, DEN 0), CFGR (LNGF 31, LNG 27:16, UNIT 14:8,
  SEL 3:0).
- Cortex-M7 MPU: Armv7-M ARM B3.5 (MPU_RBAR/MPU_RASR: XN 28, AP 26:24, TEX 21:19, S 18, C 17,
  B 16, SIZE 5:1, ENABLE 0); the attributes follow ST's AN4838 / AN4839 guidance for external
  memories (see `mpu_regions`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["FAMILY_REGS", "SDRAM_BANK_ORIGIN", "ExternalError", "OctalPsram", "QspiFlash", "SdramPart", "mpu_regions",
           "octospi_registers", "parse_external", "psram_registers", "qspi_registers", "sdram_registers",
           "supported_controllers"]


class ExternalError(ValueError):
    """A board file's `external:` entry that cannot be used (one line, names the key)."""


# Per family: where the controllers and their clock enables are.
#   F7: RM0385 §2.2.2 memory map (FMC control registers 0xA000 0000, QUADSPI 0xA000 1000) and
#       RCC_AHB3ENR at RCC + 0x38 (FMCEN bit 0, QSPIEN bit 1), RM0385 §5.3.12.
#   L4: RM0351 §2.2.2 memory map (same addresses) and RCC_AHB3ENR at RCC + 0x50 (FMCEN bit 0,
#       QSPIEN bit 8), RM0351 §6.4.19.
#   H7: RM0399 §2.3.2 memory map (FMC 0x5200 4000, QUADSPI 0x5200 5000, both in D1 on AHB3) and
#       RCC_AHB3ENR at RCC 0x5802 4400 + 0xD4 (FMCEN bit 12, QSPIEN bit 14), RM0399 §9.7.x. The
#       H7 FMC also has a global enable, FMC_BCR1.FMCEN (bit 31, RM0399 FMC_BCRx): `bcr1_fmcen`.
#       Their kernel clocks stay at the reset selection rcc_hclk3 (RCC_D1CCIPR FMCSEL = QSPISEL
#       = 00), which is the board's HCLK (Board.hclk_hz).
FAMILY_REGS: dict[str, dict[str, int]] = {
    "stm32f7": {"fmc": 0xA0000000, "quadspi": 0xA0001000, "ahb3enr": 0x40023838,
                "fmcen": 1 << 0, "qspien": 1 << 1, "bcr1_fmcen": 0},
    "stm32l4": {"fmc": 0xA0000000, "quadspi": 0xA0001000, "ahb3enr": 0x40021050,
                "fmcen": 1 << 0, "qspien": 1 << 8, "bcr1_fmcen": 0},
    "stm32h7": {"fmc": 0x52004000, "quadspi": 0x52005000, "ahb3enr": 0x580244D4,
                "fmcen": 1 << 12, "qspien": 1 << 14, "bcr1_fmcen": 1 << 31},
}

# STM32U5 OCTOSPI (RM0456 §2.3.2 memory map, non-secure aliases; RCC §11.8.x): instance ->
# registers, memory-mapped window, RCC_AHB2ENR2 enable bit. Both run from the reset kernel clock
# selection RCC_CCIPR2.OCTOSPISEL = 00: SYSCLK. The I/O manager OCTOSPIM (0x420C 4000, clock
# RCC_AHB2ENR1.OCTOSPIMEN bit 21) routes port n to OCTOSPIn.
OCTOSPI_U5 = {1: {"base": 0x420D1400, "window": 0x90000000, "en_bit": 1 << 4},
              2: {"base": 0x420D2400, "window": 0x70000000, "en_bit": 1 << 8}}
U5_OCTOSPIM = 0x420C4000
U5_AHB2ENR1, U5_AHB2ENR2, U5_OCTOSPIMEN = 0x46020C8C, 0x46020C90, 1 << 21
# The OCTOSPIs' delay blocks (DQS delay for DTR reads): DLYB_OCTOSPI1/2 at AHB2 + 0xAF000/0xAF400
# (RM0456 §2.3.2 memory map, non-secure aliases); clocked with their OCTOSPI.
U5_DLYB = {1: 0x420CF000, 2: 0x420CF400}

# FMC SDRAM bank -> its address (RM0385 §13.7.1 / RM0399 FMC SDRAM banks, default mapping)
SDRAM_BANK_ORIGIN = {1: 0xC0000000, 2: 0xD0000000}


def supported_controllers(family: str) -> set[str]:
    """The `needs_init` kinds stm32ai brings up on this family."""
    if family in ("stm32f7", "stm32h7"):
        return {"fmc_sdram", "quadspi"}
    if family == "stm32l4":
        return {"quadspi"}
    if family == "stm32u5":
        return {"octospi", "octospi_psram"}
    return set()


@dataclass(frozen=True)
class ExtPin:
    port: str        # "A".."K"
    pin: int
    af: int


@dataclass(frozen=True)
class SdramPart:
    region: str
    part: str
    bank: int                    # FMC SDRAM bank 1 (SDNE0/SDCKE0, 0xC0000000) or 2 (SDNE1/SDCKE1, 0xD0000000)
    data_bits: int               # 8, 16, 32: the bus as the board wires it
    row_bits: int
    col_bits: int
    internal_banks: int          # 2 or 4
    sdclk_div: int               # SDCLK = HCLK / 2 or / 3
    cas_tck_min_ns: dict[int, float]   # CAS latency -> the part's minimum clock period for it
    tmrd_clk: int                # load-mode-register to active, in clocks
    txsr_ns: float
    tras_ns: float
    trc_ns: float
    twr_ns: float
    trp_ns: float
    trcd_ns: float
    refresh_ms: float
    refresh_rows: int
    powerup_us: float
    autorefresh: int             # auto-refresh commands of the init sequence
    pins: tuple[ExtPin, ...]
    datasheet: str


@dataclass(frozen=True)
class QspiFlash:
    region: str
    part: str
    size: int                    # bytes
    jedec_id: tuple[int, int, int]
    max_hz: int                  # fastest clock of the read command used
    cs_high_ns: float            # the part's minimum chip-select high time (tSHSL)
    read_cmd: int
    addr_bytes: int              # 3 or 4
    dummy: int                   # dummy clocks of read_cmd
    quad_enable: str             # "none" or "sr_bit6" (Macronix: QE in the status register)
    pins: tuple[ExtPin, ...]
    ncs: str                     # the chip-select pin (pulled up while idle)
    stldr: str                   # STM32CubeProgrammer's external loader for this board
    datasheet: str
    dual: bool = False           # two identical parts in dual-flash mode (QUADSPI_CR.DFM); size is their sum
    octospi: int = 0             # controller "octospi": the OCTOSPI instance (1, 2); the read is SPI 1-1-1


@dataclass(frozen=True)
class OctalPsram:
    """An octal DDR PSRAM (AP Memory APS6408L-style command set) on a STM32U5 OCTOSPI, read and
    written memory-mapped in octal DTR with DQS (docs/external_memory.md, "Octal PSRAM")."""
    region: str
    part: str
    octospi: int                 # the OCTOSPI instance (1, 2) and OCTOSPIM port
    size: int                    # bytes
    max_hz: int                  # the part's fastest clock
    latency_max_mhz: dict[int, float]   # latency code (clocks) -> the fastest clock it allows
    cem_ns: float                # tCEM: longest CE# low time (the part refreshes while CE# is high)
    cph_ns: float                # tCPH: shortest CE# high time between two bursts
    page_bytes: int              # row (page) size: no burst crosses it (OCTOSPI_DCR3 CSBOUND)
    drive: str                   # output drive strength: full, half, quarter, eighth (MR0[1:0])
    pins: tuple[ExtPin, ...]
    ncs: str
    datasheet: str


_PIN = re.compile(r"P([A-K])(1[0-5]|[0-9])")
# part and loader names reach generated C strings/comments and command lines: plain names only
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")


def _name(d: dict, key: str, where: str) -> str:
    v = str(d[key])
    if not _NAME.fullmatch(v):
        raise ExternalError(f"{where}.{key}: '{v[:40]}' is not a plain part/file name (letters, digits, _ . + -)")
    return v


def _pins(v: Any, where: str) -> tuple[ExtPin, ...]:
    if not isinstance(v, list) or not v:
        raise ExternalError(f"{where}.pins: expected a list of {{pin: PXn, af: N}}")
    out = []
    for i, p in enumerate(v):
        if not isinstance(p, dict) or set(p) != {"pin", "af"}:
            raise ExternalError(f"{where}.pins[{i}]: expected {{pin: PXn, af: N}}")
        m = _PIN.fullmatch(str(p["pin"]))
        af = p["af"]
        if m is None or not isinstance(af, int) or isinstance(af, bool) or not 0 <= af <= 15:
            raise ExternalError(f"{where}.pins[{i}]: '{p['pin']}' / af {af!r} is not a GPIO pin PA0..PK15 "
                                "with af 0..15")
        out.append(ExtPin(m.group(1), int(m.group(2)), af))
    if len({(p.port, p.pin) for p in out}) != len(out):
        raise ExternalError(f"{where}.pins: a pin is listed twice")
    return tuple(out)


def _size(v: Any, where: str) -> int:
    """An int or "16M" / "512K" (the board files' notation)."""
    m = re.fullmatch(r"(\d+)([KM]?)", str(v).strip().upper()) if not isinstance(v, bool) else None
    n = int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20}[m.group(2)] if m else 0
    if not (1 << 16) <= n <= (1 << 32):
        raise ExternalError(f"{where}: expected a size of 64K..4096M, got {v!r}")
    return n


def _num(d: dict, key: str, where: str, lo: float, hi: float, kind: type = float) -> Any:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
        raise ExternalError(f"{where}.{key}: expected {'a number' if kind is float else 'an integer'}")
    if not lo <= v <= hi:
        raise ExternalError(f"{where}.{key}: {v} is outside {lo}..{hi}")
    return kind(v)


_SDRAM_KEYS = {"controller", "part", "bank", "data_bits", "row_bits", "col_bits", "internal_banks", "sdclk_div",
               "cas_tck_min_ns", "tmrd_clk", "txsr_ns", "tras_ns", "trc_ns", "twr_ns", "trp_ns", "trcd_ns",
               "refresh_ms", "refresh_rows", "powerup_us", "autorefresh", "pins", "datasheet"}
_QSPI_KEYS = {"controller", "part", "size", "jedec_id", "max_hz", "cs_high_ns", "read_cmd", "addr_bytes", "dummy",
              "quad_enable", "pins", "ncs", "stldr", "datasheet"}
_QSPI_OPTIONAL = {"dual", "octospi"}


def _check_keys(d: dict, required: set[str], optional: set[str], where: str) -> None:
    """One line naming the unknown or missing keys of a memory part's board entry."""
    if set(d) - required - optional:
        raise ExternalError(f"{where}: unknown key(s) {', '.join(sorted(set(d) - required - optional))}")
    missing = required - set(d)
    if missing:
        raise ExternalError(f"{where}: missing {', '.join(sorted(missing))}")


def _pow2_size(d: dict, where: str) -> int:
    size = _size(d["size"], f"{where}.size")
    if size & (size - 1):
        raise ExternalError(f"{where}.size: {size} is not a power of two")
    return size


def _sdram(name: str, d: dict, where: str) -> SdramPart:
    _check_keys(d, _SDRAM_KEYS, set(), where)
    cas = d["cas_tck_min_ns"]
    if (not isinstance(cas, dict) or not cas
            or not all(isinstance(k, int) and k in (1, 2, 3) and isinstance(x, (int, float)) and x > 0
                       for k, x in cas.items())):
        raise ExternalError(f"{where}.cas_tck_min_ns: expected {{CAS latency 1..3: minimum tCK in ns}}")
    data_bits = _num(d, "data_bits", where, 8, 32, int)
    if data_bits not in (8, 16, 32):
        raise ExternalError(f"{where}.data_bits: {data_bits} is not 8, 16 or 32")
    banks = _num(d, "internal_banks", where, 2, 4, int)
    if banks not in (2, 4):
        raise ExternalError(f"{where}.internal_banks: {banks} is not 2 or 4")
    return SdramPart(
        region=name, part=_name(d, "part", where), bank=_num(d, "bank", where, 1, 2, int), data_bits=data_bits,
        row_bits=_num(d, "row_bits", where, 11, 13, int), col_bits=_num(d, "col_bits", where, 8, 11, int),
        internal_banks=banks, sdclk_div=_num(d, "sdclk_div", where, 2, 3, int),
        cas_tck_min_ns={int(k): float(x) for k, x in cas.items()},
        tmrd_clk=_num(d, "tmrd_clk", where, 1, 16, int),
        **{k: _num(d, k, where, 0.1, 1000.0) for k in ("txsr_ns", "tras_ns", "trc_ns", "twr_ns", "trp_ns",
                                                        "trcd_ns")},
        refresh_ms=_num(d, "refresh_ms", where, 1, 1000), refresh_rows=_num(d, "refresh_rows", where, 1024, 16384, int),
        powerup_us=_num(d, "powerup_us", where, 1, 10000), autorefresh=_num(d, "autorefresh", where, 1, 16, int),
        pins=_pins(d["pins"], where), datasheet=str(d["datasheet"]))


def _qspi(name: str, d: dict, where: str) -> QspiFlash:
    _check_keys(d, _QSPI_KEYS, _QSPI_OPTIONAL, where)
    size = _pow2_size(d, where)
    jid = d["jedec_id"]
    if not (isinstance(jid, list) and len(jid) == 3 and all(isinstance(x, int) and 0 <= x <= 255 for x in jid)):
        raise ExternalError(f"{where}.jedec_id: expected three bytes (manufacturer, type, capacity)")
    qe = str(d["quad_enable"])
    octo = d.get("octospi", 0)
    if (d.get("controller") == "octospi") != (octo in (1, 2)) or isinstance(octo, bool):
        raise ExternalError(f"{where}.octospi: an octospi part names its OCTOSPI instance (1 or 2), a quadspi "
                            "part none")
    if octo and (qe != "none" or d.get("dual", False)):
        raise ExternalError(f"{where}: an OCTOSPI flash is read in SPI mode: quad_enable none, no dual")
    if qe not in ("none", "sr_bit6"):
        raise ExternalError(f"{where}.quad_enable: '{qe}' is not none or sr_bit6")
    pins = _pins(d["pins"], where)
    m = _PIN.fullmatch(str(d["ncs"]))
    if m is None or (m.group(1), int(m.group(2))) not in {(p.port, p.pin) for p in pins}:
        raise ExternalError(f"{where}.ncs: '{d['ncs']}' is not one of the pins")
    addr = _num(d, "addr_bytes", where, 3, 4, int)
    dual = d.get("dual", False)
    if not isinstance(dual, bool):
        raise ExternalError(f"{where}.dual: expected true or false")
    if dual and qe != "none":
        # the QE write would need one status byte per part (even/odd bytes): not generated
        raise ExternalError(f"{where}.quad_enable: dual-flash mode is supported for parts without a QE bit only")
    if dual and len(pins) < 10:
        raise ExternalError(f"{where}.pins: dual-flash mode needs CLK, NCS and both banks' IO0-IO3 (10 pins)")
    per_part = size // 2 if dual else size
    if per_part > (1 << 24) and addr != 4:
        raise ExternalError(f"{where}.addr_bytes: a {per_part >> 20} MiB flash needs 4-byte addresses")
    return QspiFlash(
        region=name, part=_name(d, "part", where), size=size, jedec_id=(jid[0], jid[1], jid[2]),
        max_hz=_num(d, "max_hz", where, 1_000_000, 200_000_000, int), cs_high_ns=_num(d, "cs_high_ns", where, 1, 1000),
        read_cmd=_num(d, "read_cmd", where, 0, 255, int), addr_bytes=addr, dummy=_num(d, "dummy", where, 0, 31, int),
        quad_enable=qe, pins=pins, ncs=str(d["ncs"]), stldr=_name(d, "stldr", where), datasheet=str(d["datasheet"]),
        dual=dual, octospi=octo)


_PSRAM_KEYS = {"controller", "octospi", "part", "size", "max_hz", "latency_max_mhz", "cem_ns", "cph_ns", "page_bytes",
               "drive", "pins", "ncs", "datasheet"}
_DRIVE = {"full": 0, "half": 1, "quarter": 2, "eighth": 3}   # MR0[1:0]: 25, 50, 100, 200 ohm


def _psram(name: str, d: dict, where: str) -> OctalPsram:
    _check_keys(d, _PSRAM_KEYS, set(), where)
    size = _pow2_size(d, where)
    lat = d["latency_max_mhz"]
    if (not isinstance(lat, dict) or not lat
            or not all(isinstance(k, int) and not isinstance(k, bool) and 3 <= k <= 7
                       and isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for k, x in lat.items())):
        raise ExternalError(f"{where}.latency_max_mhz: expected {{latency code 3..7: fastest clock in MHz}}")
    octo = d["octospi"]
    if octo not in (1, 2) or isinstance(octo, bool):
        raise ExternalError(f"{where}.octospi: expected the OCTOSPI instance, 1 or 2")
    drive = str(d["drive"])
    if drive not in _DRIVE:
        raise ExternalError(f"{where}.drive: '{drive}' is not one of {', '.join(_DRIVE)}")
    page = _num(d, "page_bytes", where, 16, 1 << 16, int)
    if page & (page - 1):
        raise ExternalError(f"{where}.page_bytes: {page} is not a power of two")
    pins = _pins(d["pins"], where)
    if len(pins) != 11:
        raise ExternalError(f"{where}.pins: an octal PSRAM needs CLK, NCS, DQS and IO0-IO7 (11 pins)")
    m = _PIN.fullmatch(str(d["ncs"]))
    if m is None or (m.group(1), int(m.group(2))) not in {(p.port, p.pin) for p in pins}:
        raise ExternalError(f"{where}.ncs: '{d['ncs']}' is not one of the pins")
    return OctalPsram(
        region=name, part=_name(d, "part", where), octospi=octo, size=size,
        max_hz=_num(d, "max_hz", where, 1_000_000, 400_000_000, int),
        latency_max_mhz={int(k): float(x) for k, x in lat.items()},
        cem_ns=_num(d, "cem_ns", where, 100, 100_000), cph_ns=_num(d, "cph_ns", where, 1, 1000),
        page_bytes=page, drive=drive, pins=pins, ncs=str(d["ncs"]), datasheet=str(d["datasheet"]))


def parse_external(data: Any, regions: dict[str, tuple[int, int, str | None]], family: str
                   ) -> dict[str, SdramPart | QspiFlash | OctalPsram]:
    """The board file's `external:` mapping, checked against its memory regions
    (name -> (origin, length, needs_init)) and the family's controllers."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ExternalError("external: expected a mapping of region name -> memory part")
    out: dict[str, SdramPart | QspiFlash | OctalPsram] = {}
    for name, d in data.items():
        where = f"external.{name}"
        if name not in regions:
            raise ExternalError(f"{where}: no memory region named '{name}'")
        if not isinstance(d, dict):
            raise ExternalError(f"{where}: expected a mapping")
        origin, length, needs = regions[name]
        kind = d.get("controller")
        if kind != needs:
            raise ExternalError(f"{where}.controller: '{kind}' but region '{name}' needs '{needs}'")
        if kind not in supported_controllers(family):
            raise ExternalError(f"{where}.controller: stm32ai does not bring up '{kind}' on {family}")
        if kind == "fmc_sdram":
            part: SdramPart | QspiFlash | OctalPsram = _sdram(name, d, where)
            if origin != SDRAM_BANK_ORIGIN[part.bank]:
                raise ExternalError(f"{where}: FMC SDRAM bank {part.bank} is at 0x{SDRAM_BANK_ORIGIN[part.bank]:08X}, "
                                    f"the region at 0x{origin:08X}")
            capacity = (1 << (part.row_bits + part.col_bits)) * part.internal_banks * part.data_bits // 8
            if length > capacity:
                raise ExternalError(f"{where}: region is {length} B, the part on a {part.data_bits}-bit bus "
                                    f"has {capacity}")
        elif kind == "octospi_psram":
            part = _psram(name, d, where)
            window = OCTOSPI_U5[part.octospi]["window"]
            if origin != window:
                raise ExternalError(f"{where}: OCTOSPI{part.octospi}'s memory-mapped space is at 0x{window:08X}, "
                                    f"the region at 0x{origin:08X}")
            if length > part.size:
                raise ExternalError(f"{where}: region is {length} B, the PSRAM has {part.size}")
        elif kind == "octospi":
            part = _qspi(name, d, where)
            window = OCTOSPI_U5[part.octospi]["window"]
            if origin != window:
                raise ExternalError(f"{where}: OCTOSPI{part.octospi}'s memory-mapped space is at 0x{window:08X}, "
                                    f"the region at 0x{origin:08X}")
            if length > part.size:
                raise ExternalError(f"{where}: region is {length} B, the flash has {part.size}")
        else:
            part = _qspi(name, d, where)
            if origin != 0x90000000:
                raise ExternalError(f"{where}: QUADSPI memory-mapped space is at 0x90000000, the region "
                                    f"at 0x{origin:08X}")
            if length > part.size:
                raise ExternalError(f"{where}: region is {length} B, the flash has {part.size}")
        out[name] = part
    used = [p.octospi for p in out.values() if isinstance(p, (QspiFlash, OctalPsram)) and p.octospi]
    if len(used) != len(set(used)):
        raise ExternalError("external: two memories on the same OCTOSPI instance")
    return out


# ---------------------------------------------------------------------------------------------
# Register values
# ---------------------------------------------------------------------------------------------
def _cycles(ns: float, tck_ns: float) -> int:
    """Clock cycles covering `ns` (rounded up; a hair of float slack so 18.0/9.0 stays 2)."""
    return max(1, math.ceil(ns / tck_ns - 1e-9))


def sdram_registers(p: SdramPart, hclk_hz: int) -> dict[str, int]:
    """FMC SDRAM register values and the init sequence's SDCMR words at this HCLK.

    RM0385 §13.7.3 "SDRAM initialization": clock configuration enable, wait the power-up delay,
    precharge all, auto-refresh (NRFS+1 commands), load mode register, then the refresh rate.
    SDCR/SDTR are one value for the part's bank: for bank 2 the bring-up writes it to both
    banks' registers, because SDCR2's SDCLK/RBURST/RPIPE and SDTR2's TRC/TRP are "don't care"
    (taken from SDCR1/SDTR1, RM0385 §13.7.5 / RM0399 FMC_SDCRx, FMC_SDTRx)."""
    sdclk = hclk_hz / p.sdclk_div
    tck = 1e9 / sdclk
    fits = sorted(cl for cl, tmin in p.cas_tck_min_ns.items() if tck + 1e-9 >= tmin)
    if not fits:
        raise ExternalError(f"{p.part}: SDCLK {sdclk / 1e6:g} MHz is faster than any CAS latency allows "
                            f"({p.cas_tck_min_ns})")
    cl = fits[0]
    trcd, trp = _cycles(p.trcd_ns, tck), _cycles(p.trp_ns, tck)
    tras, trc = _cycles(p.tras_ns, tck), _cycles(p.trc_ns, tck)
    # FMC_SDTR TWR note (RM0385 §13.7.5): TWR >= TRAS - TRCD and TWR >= TRC - TRCD - TRP
    twr = max(_cycles(p.twr_ns, tck), tras - trcd, trc - trcd - trp)
    txsr = _cycles(p.txsr_ns, tck)
    fields = {"TMRD": p.tmrd_clk, "TXSR": txsr, "TRAS": tras, "TRC": trc, "TWR": twr, "TRP": trp, "TRCD": trcd}
    for k, v in fields.items():
        if not 1 <= v <= 16:
            raise ExternalError(f"{p.part}: {k} = {v} cycles at SDCLK {sdclk / 1e6:g} MHz does not fit "
                                "FMC_SDTR (1..16)")
    sdcr = ((p.col_bits - 8) | (p.row_bits - 11) << 2 | {8: 0, 16: 1, 32: 2}[p.data_bits] << 4
            | (1 if p.internal_banks == 4 else 0) << 6 | cl << 7 | p.sdclk_div << 10
            | 1 << 12)                                    # RBURST: read bursts for the cache lines
    sdtr = ((fields["TMRD"] - 1) | (txsr - 1) << 4 | (tras - 1) << 8 | (trc - 1) << 12 | (twr - 1) << 16
            | (trp - 1) << 20 | (trcd - 1) << 24)
    # FMC_SDRTR COUNT = refresh period / rows in SDCLK cycles, minus the 20-cycle margin RM0385
    # §13.7.5 asks for; it must stay above 41 and fit 13 bits.
    count = int(p.refresh_ms * 1e-3 / p.refresh_rows * sdclk) - 20
    if not 41 < count < (1 << 13):
        raise ExternalError(f"{p.part}: refresh count {count} at SDCLK {sdclk / 1e6:g} MHz is outside 42..8191")
    ctb = 1 << 4 if p.bank == 1 else 1 << 3               # CTB1 (bit 4) / CTB2 (bit 3): the bank addressed
    # mode register (the part's datasheet, JEDEC SDR): burst length 1, sequential, CAS latency,
    # standard operation, single-location write bursts (bit 9)
    mrd = cl << 4 | 1 << 9
    return {
        "SDCR": sdcr, "SDTR": sdtr, "SDRTR": count << 1,
        "CMD_CLK_ENABLE": 1 | ctb, "CMD_PALL": 2 | ctb,
        "CMD_AUTOREFRESH": 3 | ctb | (p.autorefresh - 1) << 5, "CMD_LOAD_MODE": 4 | ctb | mrd << 9,
        "CAS": cl, "SDCLK_HZ": int(sdclk), "POWERUP_US": math.ceil(p.powerup_us),
        **{f"T_{k}": v for k, v in fields.items()},
    }


def qspi_registers(q: QspiFlash, hclk_hz: int) -> dict[str, int]:
    """QUADSPI register values: the clock (PRESCALER: QUADSPI clock = HCLK / (PRESCALER + 1)),
    the device configuration, and the CCR words of the commands the bring-up sends."""
    presc = max(0, math.ceil(hclk_hz / q.max_hz) - 1)
    if presc > 255:
        raise ExternalError(f"{q.part}: no prescaler brings HCLK {hclk_hz / 1e6:g} MHz down to {q.max_hz / 1e6:g} MHz")
    f = hclk_hz / (presc + 1)
    csht = min(7, max(0, math.ceil(q.cs_high_ns * f / 1e9) - 1))   # CS high for CSHT + 1 cycles
    fsize = q.size.bit_length() - 2                                  # 2^(FSIZE + 1) bytes (both parts)
    single, quad = 1, 3
    indirect_write, indirect_read, memory_mapped = 0, 1, 3

    def ccr(cmd: int, fmode: int, dmode: int = 0, admode: int = 0, dcyc: int = 0, imode: int = single) -> int:
        return (fmode << 26 | dmode << 24 | dcyc << 18 | (q.addr_bytes - 1) << 12 | admode << 10
                | imode << 8 | cmd)

    return {
        # FTHRES 4 bytes, SSHIFT half a cycle later, DFM (bit 6) for two parts in dual-flash
        # mode (RM0399 QUADSPI_CR: FSIZE then covers both, even bytes in flash 1, odd in flash 2);
        # EN set last
        "CR": presc << 24 | 3 << 8 | (1 << 6 if q.dual else 0) | 1 << 4,
        "DCR": fsize << 16 | csht << 8,
        # RESET ENABLE + RESET MEMORY (0x66, 0x99), first on four lines (a part left in QPI mode
        # by an earlier program), then on one: the flash starts from its power-on state
        "CCR_RESET_ENABLE_QPI": ccr(0x66, indirect_write, imode=quad),
        "CCR_RESET_QPI": ccr(0x99, indirect_write, imode=quad),
        "CCR_RESET_ENABLE": ccr(0x66, indirect_write), "CCR_RESET": ccr(0x99, indirect_write),
        "CCR_READ_ID": ccr(0x9F, indirect_read, single),            # JEDEC READ ID, 3 bytes
        "CCR_READ_SR": ccr(0x05, indirect_read, single),            # READ STATUS REGISTER, 1 byte
        "CCR_WRITE_ENABLE": ccr(0x06, indirect_write),
        "CCR_WRITE_SR": ccr(0x01, indirect_write, single),          # WRITE STATUS REGISTER, 1 byte
        "CCR_MEMORY_MAPPED": ccr(q.read_cmd, memory_mapped, quad, single, q.dummy),
        "QSPI_HZ": int(f), "PRESCALER": presc, "CSHT": csht, "FSIZE": fsize,
    }


def octospi_registers(q: QspiFlash, kernel_hz: int) -> dict[str, int]:
    """OCTOSPI register values for a NOR flash read memory-mapped in SPI mode (1-1-1, the
    part's power-on mode: no volatile configuration to write, nothing to lose on a reset), at the
    kernel clock `kernel_hz` (SYSCLK): clock = kernel / (PRESCALER + 1) (RM0456 OCTOSPI_DCR2)."""
    presc = max(0, math.ceil(kernel_hz / q.max_hz - 1e-9) - 1)
    if presc > 255:
        raise ExternalError(f"{q.part}: no prescaler brings {kernel_hz / 1e6:g} MHz down to {q.max_hz / 1e6:g} MHz")
    f = kernel_hz / (presc + 1)
    csht = min(63, max(0, math.ceil(q.cs_high_ns * f / 1e9 - 1e-9) - 1))   # CS high for CSHT + 1 cycles
    devsize = q.size.bit_length() - 2                                      # 2^(DEVSIZE + 1) bytes
    one, eight = 1, 4                          # IMODE/ADMODE/DMODE: 001 one line, 100 eight lines
    indirect_write, indirect_read, memory_mapped = 0, 1, 3

    def ccr(imode: int = one, isize: int = 0, idtr: int = 0, admode: int = 0, dmode: int = 0) -> int:
        return dmode << 24 | (q.addr_bytes - 1) << 12 | admode << 8 | isize << 4 | idtr << 3 | imode

    n = q.octospi
    pcr = {1: 1 << 24 | 1 << 25 | 1 << 16 | 1 << 8 | 1 << 4 | 1,          # port 1 <- OCTOSPI1 (IO[7:4] src 01)
           2: 1 << 24 | 3 << 25 | 1 << 16 | 2 << 17 | 1 << 8 | 1 << 9 | 1 << 4 | 1 << 5 | 1 | 1 << 1}[n]
    return {
        # MTYP 010 standard (the byte order of Micron/Macronix modes matters for octal DTR only),
        # DLYBYP: no delay block (STR reads without DQS)
        "DCR1": 2 << 24 | devsize << 16 | csht << 8 | 1 << 3,
        "DCR2": presc,
        "CR_INDIRECT_WRITE": indirect_write << 28, "CR_INDIRECT_READ": indirect_read << 28,
        "CR_MEMORY_MAPPED": memory_mapped << 28,
        # RESET ENABLE + RESET MEMORY: first as octal commands (16-bit instruction: the opcode and
        # its complement), STR then DTR, for a part an earlier program left in OPI mode; then SPI
        "CCR_RESET_OPI_STR": ccr(eight, isize=1), "CCR_RESET_OPI_DTR": ccr(eight, isize=1, idtr=1),
        "IR_RESET_ENABLE_OPI": 0x6699, "IR_RESET_OPI": 0x9966,
        "CCR_RESET": ccr(), "IR_RESET_ENABLE": 0x66, "IR_RESET": 0x99,
        "CCR_READ_ID": ccr(dmode=one), "IR_READ_ID": 0x9F,
        # memory-mapped read: instruction, address and data on one line, DCYC dummy clocks,
        # SSHIFT (bit 30): data sampled half a cycle later (STR)
        "CCR_MEMORY_MAPPED": ccr(admode=one, dmode=one), "TCR_MEMORY_MAPPED": 1 << 30 | q.dummy,
        "IR_MEMORY_MAPPED": q.read_cmd,
        "PCR": pcr, "PCR_ADDR": U5_OCTOSPIM + 4 * n,
        "BASE": OCTOSPI_U5[n]["base"], "WINDOW": OCTOSPI_U5[n]["window"], "EN_BIT": OCTOSPI_U5[n]["en_bit"],
        "OSPI_HZ": int(f), "PRESCALER": presc, "CSHT": csht, "DEVSIZE": devsize,
    }


# APS6408L write latency code (MR4[7:5]) of each latency: the bit-reversed binary of latency - 3
# (APS6408L datasheet, MR4 table: 000 = 3, 100 = 4, 010 = 5, 110 = 6, 001 = 7)
_WLC = {3: 0b000, 4: 0b100, 5: 0b010, 6: 0b110, 7: 0b001}


def psram_registers(p: OctalPsram, kernel_hz: int) -> dict[str, int]:
    """OCTOSPI and mode-register values for an octal DDR PSRAM read and written memory-mapped in
    octal DTR (8-8-8: instruction on one edge, address and data on both, DQS) at the kernel
    clock `kernel_hz` (SYSCLK; clock = kernel / (PRESCALER + 1), RM0456 OCTOSPI_DCR2).

    Timings from the datasheet figures at the clock reached:
    - latency: the smallest code whose maximum clock the clock meets; the PSRAM is set to fixed
      latency (MR0.LT): a read always waits 2 x the code (a refresh never stretches it: the
      OCTOSPI's regular-command mode does not follow the PSRAM's variable-latency signalling),
      a write the code (the write latency is always fixed);
    - CSHT (RM0456 OCTOSPI_DCR1): nCS high for at least tCPH, CSHT + 1 cycles;
    - REFRESH (OCTOSPI_DCR4): nCS is released every REFRESH + 4 cycles in a read (REFRESH + 1 in
      a write), so CE# stays low at most tCEM: REFRESH = floor(tCEM x f) - 4;
    - CSBOUND (OCTOSPI_DCR3): no transfer crosses a page (row) of the part."""
    presc = max(0, math.ceil(kernel_hz / p.max_hz - 1e-9) - 1)
    if presc > 255:
        raise ExternalError(f"{p.part}: no prescaler brings {kernel_hz / 1e6:g} MHz down to {p.max_hz / 1e6:g} MHz")
    f = kernel_hz / (presc + 1)
    fits = sorted(code for code, mhz in p.latency_max_mhz.items() if f <= mhz * 1e6 + 1e-3)
    if not fits:
        raise ExternalError(f"{p.part}: {f / 1e6:g} MHz is faster than any latency code allows ({p.latency_max_mhz})")
    lat = fits[0]
    read_dcyc, write_dcyc = 2 * lat, lat
    csht = max(0, math.ceil(p.cph_ns * f / 1e9 - 1e-9) - 1)
    refresh = math.floor(p.cem_ns * f / 1e9 + 1e-9) - 4
    overhead = 1 + 2 + read_dcyc                  # instruction, 4 address bytes on both edges, latency
    if csht > 63 or refresh < overhead + 2:
        raise ExternalError(f"{p.part}: tCPH {p.cph_ns:g} ns / tCEM {p.cem_ns:g} ns do not fit OCTOSPI_DCR1/DCR4 at "
                            f"{f / 1e6:g} MHz (CSHT {csht}, REFRESH {refresh} for a {overhead}-cycle command)")
    devsize = p.size.bit_length() - 2
    csbound = p.page_bytes.bit_length() - 1
    eight, indirect_write, memory_mapped = 4, 0, 3
    addr32_dtr = eight << 8 | 1 << 11 | 3 << 12           # ADMODE 100, ADDTR, ADSIZE 32-bit
    data_dtr = eight << 24 | 1 << 27                       # DMODE 100, DDTR
    dqse, dhqc = 1 << 29, 1 << 28
    n = p.octospi
    pcr = {1: 1 << 24 | 1 << 25 | 1 << 16 | 1 << 8 | 1 << 4 | 1,          # port 1 <- OCTOSPI1
           2: 1 << 24 | 3 << 25 | 1 << 16 | 2 << 17 | 1 << 8 | 1 << 9 | 1 << 4 | 1 << 5 | 1 | 1 << 1}[n]
    return {
        # MTYP 010: AP Memory mode (D0/D1 byte order in octal DTR; the HAL's HAL_OSPI_MEMTYPE_APMEMORY);
        # the delay block in use (DLYBYP clear): it delays DQS to the middle of each data half-cycle
        "DCR1": 2 << 24 | devsize << 16 | csht << 8, "DCR1_FRCK": 2 << 24 | devsize << 16 | csht << 8 | 1 << 1,
        "DCR2": presc, "DCR3": csbound << 16, "DCR4": refresh,
        "CR_INDIRECT_WRITE": indirect_write << 28,
        # memory-mapped, timeout counter on (nCS released after LPTR idle cycles, so the PSRAM
        # refreshes between sparse accesses), EN
        "CR_MEMORY_MAPPED": memory_mapped << 28 | 1 << 3 | 1, "LPTR": overhead,
        # global reset: 0xFF on eight lines, 3 address bytes (don't care), no data
        "CCR_RESET": eight | eight << 8 | 2 << 12, "IR_RESET": 0xFF,
        # mode register write (0xC0): instruction on 8 lines (STR), register address 32-bit DTR,
        # one data clock (the value on both edges), no latency, no DQS
        "CCR_MRW": eight | addr32_dtr | data_dtr, "TCR_MRW": dhqc, "IR_MRW": 0xC0,
        "MR0": 1 << 5 | (lat - 3) << 2 | _DRIVE[p.drive],  # LT fixed, read latency code, drive strength
        "MR4": _WLC[lat] << 5,          # write latency code; RF 00 (always 4x refresh), PASR 000 (whole array)
        "MR8": 0b11 | 1 << 3,           # burst length 2K (never reached: CSBOUND is smaller), RBX
        # memory-mapped read (0x00 SYNC READ) and write (0x80 SYNC WRITE): DQS on (reads: strobe;
        # writes: data mask, so a single byte can be written)
        "CCR_READ": eight | addr32_dtr | data_dtr | dqse, "TCR_READ": dhqc | read_dcyc, "IR_READ": 0x00,
        "WCCR": eight | addr32_dtr | data_dtr | dqse, "WTCR": dhqc | write_dcyc, "WIR": 0x80,
        "PCR": pcr, "PCR_ADDR": U5_OCTOSPIM + 4 * n, "DLYB": U5_DLYB[n],
        "BASE": OCTOSPI_U5[n]["base"], "WINDOW": OCTOSPI_U5[n]["window"], "EN_BIT": OCTOSPI_U5[n]["en_bit"],
        "OSPI_HZ": int(f), "PRESCALER": presc, "LATENCY": lat, "READ_DCYC": read_dcyc, "WRITE_DCYC": write_dcyc,
        "CSHT": csht, "REFRESH": refresh, "CSBOUND": csbound, "DEVSIZE": devsize,
    }


# MPU_RASR attribute fields (Armv7-M ARM B3.5.9): TEX 21:19, C 17, B 16; AP 26:24; XN 28.
_STRONGLY_ORDERED = 0
_NORMAL_WT = 1 << 17                      # TEX 000, C 1, B 0: write-through, no write-allocate
_NORMAL_WBWA = 1 << 19 | 1 << 17 | 1 << 16   # TEX 001, C 1, B 1: write-back, write/read-allocate
_AP_NONE, _AP_RW, _AP_RO = 0, 3 << 24, 6 << 24
_XN = 1 << 28


def _rasr(size: int, attrs: int) -> int:
    if size < 32 or size & (size - 1):
        raise ExternalError(f"MPU region of {size} B is not a power of two >= 32")
    return attrs | (size.bit_length() - 2) << 1 | 1


def mpu_regions(parts: dict[str, SdramPart | QspiFlash | OctalPsram], lengths: dict[str, int]
                ) -> list[tuple[int, int, str]]:
    """(RBAR, RASR, note) per Cortex-M7 MPU region, lowest number first (a higher one wins
    where they overlap). The default memory map makes 0x60000000-0x9FFFFFFF Normal memory the
    core may read speculatively, and 0xA0000000-0xDFFFFFFF Device memory (no cache, no unaligned
    access): so, as ST's AN4838 / AN4839 recommend, the external banks are first closed as
    strongly-ordered no-access regions and then the populated part is opened as Normal memory:
    the flash read-only and write-through, the SDRAM write-back."""
    out: list[tuple[int, int, str]] = []
    sdram = [p for p in parts.values() if isinstance(p, SdramPart)]
    qspi = [p for p in parts.values() if isinstance(p, QspiFlash) and not p.octospi]
    if sdram:
        out.append((0x60000000, _rasr(256 << 20, _STRONGLY_ORDERED | _AP_NONE | _XN),
                    "FMC bank 1 (NOR/PSRAM, unpopulated): no speculative reads"))
    if qspi:
        out.append((0x90000000, _rasr(256 << 20, _STRONGLY_ORDERED | _AP_NONE | _XN),
                    "QUADSPI space beyond the flash: no speculative reads"))
        q = qspi[0]
        out.append((0x90000000, _rasr(q.size, _NORMAL_WT | _AP_RO),
                    f"{q.part}{' x2 (dual-flash)' if q.dual else ''}: cacheable, read-only"))
    for p in sdram:
        size = 1 << (lengths[p.region] - 1).bit_length()
        out.append((SDRAM_BANK_ORIGIN[p.bank], _rasr(size, _NORMAL_WBWA | _AP_RW | _XN),
                    f"{p.part}: Normal memory, write-back"))
    return out
