"""Where did the model land? Reads a GNU ld map file (and the ELF beside it when there is one).

`stm32ai check-map BUILD/APP.map` lists, for every model weights array and activation pool (input
sections whose name holds `nn_weights` / `nn_activations`), its address, size, memory region and
output section, and fails (exit 1) when a pool has a load image (its bytes stored in flash and
copied at reset: flash wasted, and a big pool may overflow flash) or weights sit in RAM without
`--weights-in-ram` (the user asked for it with --weights-pool). docs/into.md.

Whether an output section has a load image is the ELF's section type (SHT_NOBITS: none); ld's map
prints a "load address" for NOBITS sections too (an ST script's .bss follows `.data AT> FLASH`),
so without the ELF the input section's name decides (`.bss*`/COMMON, or a NOLOAD output section).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from stm32ai.errors import Stm32aiError

__all__ = ["Placed", "Region", "check_placement", "read_map"]


@dataclass(frozen=True)
class Region:
    name: str
    origin: int
    length: int
    attrs: str

    @property
    def ram(self) -> bool:
        return "w" in self.attrs


@dataclass(frozen=True)
class Placed:
    kind: str               # "weights" or "activations"
    section: str            # input section, e.g. .rodata.nn_weights
    symbol: str             # first symbol in it, e.g. network_weights ("" when none is listed)
    address: int
    size: int
    region: str             # memory region name ("" outside every region)
    in_ram: bool
    output_section: str
    load_image: bool        # stored in the image and copied at reset

    def line(self) -> str:
        where = f"{self.region or 'no region'} ({'RAM' if self.in_ram else 'flash'})"
        if self.kind == "weights" and not self.in_ram:
            load = "read in place"
        else:
            load = "has a load image (copied from flash at reset)" if self.load_image else "no load image"
        return (f"{self.kind}: {self.symbol or self.section} {self.size:,} B at 0x{self.address:08x} in {where}, "
                f"output section {self.output_section}, {load}")


_REGION = re.compile(r"^(\S+)\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s*(\S*)\s*$")
_OUT = re.compile(r"^(\.\S+|\S+)\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)(?:\s+load address 0x([0-9a-fA-F]+))?\s*$")
_IN = re.compile(r"^ (\S+)\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(.*)$")
_SYM = re.compile(r"^\s+0x([0-9a-fA-F]+)\s+([A-Za-z_][A-Za-z0-9_]*)\s*$")


def _joined(lines: list[str]) -> list[str]:
    """ld wraps a long section name: the name alone, address/size on the next line. Rejoin them."""
    out: list[str] = []
    for ln in lines:
        if out and re.match(r"^\s{10,}0x[0-9a-fA-F]+\s+0x[0-9a-fA-F]+", ln) and re.match(r"^ ?\S+\s*$", out[-1]):
            out[-1] = out[-1].rstrip() + " " + ln.strip()
            continue
        out.append(ln.rstrip("\n"))
    return out


def read_map(path: Path, elf: Path | None = None) -> list[Placed]:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise Stm32aiError(f"cannot read map file {path}: {e.strerror or e}") from None
    if "Memory Configuration" not in text or "Linker script and memory map" not in text:
        raise Stm32aiError(f"{path} is not a GNU ld map file (link with -Wl,-Map=FILE)")
    head, body = text.split("Linker script and memory map", 1)
    regions = []
    for ln in head.split("Memory Configuration", 1)[1].splitlines():
        m = _REGION.match(ln)
        if m and m.group(1) not in ("Name", "*default*"):
            regions.append(Region(m.group(1), int(m.group(2), 16), int(m.group(3), 16), m.group(4).lower()))
    nobits = _nobits_sections(elf) if elf is not None and elf.is_file() else None
    found: list[Placed] = []
    out_name, out_load, noload = "", False, False
    lines = _joined(body.splitlines())
    for i, ln in enumerate(lines):
        m = _OUT.match(ln)
        if m and not ln.startswith(" "):
            out_name, out_load = m.group(1), m.group(4) is not None
            noload = False
            continue
        if not ln.startswith(" ") and ln.strip():
            out_name = ln.split()[0]
            noload = "(NOLOAD)" in ln
            continue
        m = _IN.match(ln)
        if m is None:
            continue
        sec, addr, size = m.group(1), int(m.group(2), 16), int(m.group(3), 16)
        kind = "weights" if "nn_weights" in sec else "activations" if "nn_activations" in sec else None
        if kind is None or size == 0:
            continue
        sym = ""
        if i + 1 < len(lines):
            s = _SYM.match(lines[i + 1])
            if s and int(s.group(1), 16) == addr:
                sym = s.group(2)
        reg = next((r for r in regions if r.origin <= addr < r.origin + r.length), None)
        if nobits is not None:
            load = out_name not in nobits
        else:  # no ELF: the section's own kind
            load = not (noload or sec.startswith((".bss", "COMMON"))) and (out_load or bool(reg and reg.ram))
        found.append(Placed(kind, sec, sym, addr, size, reg.name if reg else "", bool(reg and reg.ram), out_name,
                            load))
    return found


def _nobits_sections(elf: Path) -> set[str]:
    from elftools.elf.elffile import ELFFile

    try:
        with elf.open("rb") as f:
            return {s.name for s in ELFFile(f).iter_sections() if s["sh_type"] == "SHT_NOBITS"}
    except Exception as e:  # noqa: BLE001 (pyelftools raises its own error types)
        raise Stm32aiError(f"cannot read ELF {elf}: {e}") from None


def check_placement(found: list[Placed], weights_in_ram: bool = False) -> list[str]:
    """The problems: an empty list when every pool is load-image free and the weights are where asked."""
    problems = []
    if not found:
        problems.append("no model weights or activation pool in the map (is the model linked, and its "
                        "descriptor referenced? --gc-sections drops an unused model)")
    for p in found:
        if p.kind == "activations" and p.load_image:
            problems.append(f"pool {p.symbol or p.section} has a load image in output section {p.output_section}: "
                            f"{p.size:,} B of flash wasted; place it in a NOLOAD or .bss section (docs/into.md)")
        if p.kind == "weights" and p.in_ram and not weights_in_ram:
            problems.append(f"weights {p.symbol or p.section} are in RAM ({p.region}, output section "
                            f"{p.output_section}): place them with the read-only data (docs/into.md), or pass "
                            "--weights-in-ram if you asked for it")
        if p.kind == "weights" and not p.region:
            problems.append(f"weights {p.symbol or p.section} are outside every memory region")
    return problems
