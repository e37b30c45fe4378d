"""Program a generated project's image into its board (`stm32ai flash PROJECT`, `make flash`).

Three programmers, tried in this order unless one is asked for (`--programmer`):

    openocd               openocd -f <board file's openocd config> -c "program ELF verify reset exit"
    st-flash              st-flash --reset write BIN <flash origin>             (stlink-tools)
    STM32_Programmer_CLI  STM32_Programmer_CLI -c port=SWD -w ELF -v -rst        (STM32CubeProgrammer)

The command lines are built here once; the generated Makefile's `flash` targets are rendered
from the same functions (generator.py), so `make flash` and `stm32ai flash` run the same thing.
Every failure is one line and exit code 2: no programmer installed (naming the packages), no
board attached (the programmer's own line), an emulated board, an image that does not build.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stm32ai.boards import Board
from stm32ai.errors import Stm32aiError

__all__ = ["PROGRAMMERS", "Programmer", "flash_commands", "flash_project"]


def external_loader(stldr: str) -> str:
    """STM32CubeProgrammer's external loader file: in its bin/ExternalLoader folder when the
    programmer is installed, else named with a placeholder for that folder."""
    exe = shutil.which("STM32_Programmer_CLI")
    if exe is not None:
        return str(Path(exe).resolve().parent / "ExternalLoader" / stldr)
    return f"<STM32CubeProgrammer>/bin/ExternalLoader/{stldr}"


@dataclass(frozen=True)
class Programmer:
    name: str              # --programmer value
    exe: str               # executable looked up on PATH
    package: str           # what to install
    image: str             # "elf" or "bin"
    no_board: re.Pattern   # its output when no probe/board is attached

    def usable(self, board: Board, external: Sequence[str] = ()) -> bool:
        """OpenOCD needs the board file's config (`openocd:`: for external flash one that
        declares its QUADSPI bank; no OCTOSPI flash); st-flash programs the internal flash only; STM32CubeProgrammer
        needs the board's external loader for external flash."""
        if self.name == "openocd":
            # OpenOCD's configs declare QUADSPI banks only (stmqspi in the kits' board files);
            # none declares the U5 kit's OCTOSPI flash
            return bool(board.openocd) and not any(getattr(board.external[rn], "octospi", 0) for rn in external)
        if self.name == "st-flash":
            return not external
        return all(getattr(board.external[rn], "stldr", "") for rn in external)

    def command(self, board: Board, elf: str, bin_: str, external: Sequence[str] = ()) -> list[str]:
        if self.name == "openocd":
            # `openocd:` is one config file (board/...cfg) or several separated by spaces, e.g.
            # "interface/stlink.cfg target/stm32u5x.cfg" for a part OpenOCD has no board file for.
            # `program` writes every loadable section, an external flash one through the config's
            # stmqspi bank (its reset-init handler maps the flash)
            cfgs = [x for f in (board.openocd or "").split() for x in ("-f", f)] or ["-f", ""]
            return [self.exe, *cfgs, "-c", f"program {elf} verify reset exit"]
        if self.name == "st-flash":
            return [self.exe, "--reset", "write", bin_, f"0x{board.region(board.text_region).origin:08x}"]
        loaders = []
        for rn in external:
            loaders += ["-el", str(external_loader(board.external[rn].stldr))]
        return [self.exe, "-c", "port=SWD", *loaders, "-w", elf, "-v", "-rst"]


PROGRAMMERS: tuple[Programmer, ...] = (
    Programmer("openocd", "openocd", "openocd (Debian: apt install openocd)", "elf",
               re.compile(r"open failed|no device found|unable to (open|find)|LIBUSB_ERROR|"
                          r"Error connecting DP|init mode failed", re.I)),
    Programmer("st-flash", "st-flash", "stlink-tools (Debian: apt install stlink-tools)", "bin",
               re.compile(r"couldn't find any st-?link|found 0 stlink|no st-?link|"
                          r"unknown (chip|device) id|failed to (enter|connect)", re.I)),
    Programmer("cubeprog", "STM32_Programmer_CLI", "STM32CubeProgrammer (STM32_Programmer_CLI, from st.com)",
               "elf", re.compile(r"no (debug )?probe|no stm32 target|unable to get core id|"
                                 r"target device not found|st-?link .*not found", re.I)),
)
_BY_NAME = {p.name: p for p in PROGRAMMERS}


def flash_commands(board: Board, elf: str, bin_: str, external: Sequence[str] = ()) -> dict[str, list[str]]:
    """Programmer name -> its command line (also what the Makefile's flash targets run), for
    the programmers this board can use; `external`: the external flash regions the image has
    sections in (programmed by the same command)."""
    return {p.name: p.command(board, str(elf), bin_, external) for p in PROGRAMMERS if p.usable(board, external)}


def _choose(name: str | None, board: Board, external: Sequence[str] = ()) -> Programmer:
    if name is not None:
        if name not in _BY_NAME:
            raise Stm32aiError(f"unknown programmer '{name}' (one of {', '.join(_BY_NAME)})")
        p = _BY_NAME[name]
        if not p.usable(board, external):
            if p.name == "st-flash":
                raise Stm32aiError(f"st-flash cannot program the external flash ({', '.join(external)}) this image "
                                   "uses: use openocd or STM32CubeProgrammer")
            if p.name == "cubeprog":
                raise Stm32aiError(f"board {board.id} names no STM32CubeProgrammer external loader (`stldr:`) for "
                                   f"{', '.join(external)}")
            if board.openocd:
                raise Stm32aiError(f"OpenOCD's config for {board.id} declares no OCTOSPI flash bank for "
                                   f"{', '.join(external)}: use STM32CubeProgrammer (--programmer cubeprog)")
            raise Stm32aiError(f"board {board.id} names no OpenOCD config (add `openocd:` to its board "
                               "file, e.g. board/st_nucleo_f4.cfg)")
        if shutil.which(p.exe) is None:
            raise Stm32aiError(f"{p.exe} not found: install {p.package}")
        return p
    usable = [p for p in PROGRAMMERS if p.usable(board, external)]
    for p in usable:
        if shutil.which(p.exe) is not None:
            return p
    raise Stm32aiError(f"no programmer found ({', '.join(p.exe for p in usable)}): install one of: "
                       + "; ".join(p.package for p in usable))


def _failure_line(out: str) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return next((ln for ln in lines if re.search(r"error|fail", ln, re.I)), lines[-1] if lines else "")


def flash_project(project: Path, *, programmer: str | None = None, dry_run: bool = False,
                  monitor: bool = False, port: str = "/dev/ttyACM0") -> int:
    """Build the project if needed, program it, optionally open the monitor. Returns 0; every
    failure raises Stm32aiError (exit 2)."""
    from stm32ai.project.run import build_project, project_board

    project = Path(project)
    m, board = project_board(project)
    if board.is_emulated:
        raise Stm32aiError(f"board {board.id} is emulated: there is nothing to flash; run it with "
                           f"`stm32ai run {project}`")
    external = [rn for rn in m.get("external_flash", []) if rn in board.external]
    elf = project / m.get("elf", "build/firmware.elf")
    bin_ = elf.with_suffix(".bin")
    if dry_run:
        # the exact commands, also on a machine without a programmer: the chosen one when
        # installed (or asked for), else every one the board can use
        try:
            chosen = [_choose(programmer, board, external)]
        except Stm32aiError:
            if programmer is not None:
                raise
            chosen = [p for p in PROGRAMMERS if p.usable(board, external)]
            print(f"no programmer installed; the commands each would run ({len(chosen)}):")
        if not elf.is_file():
            print(f"would build: make -C {shlex.quote(str(project))}")
        if external:
            print(f"external flash: {', '.join(f'{rn} (0x{board.region(rn).origin:08X})' for rn in external)}, "
                  "programmed by the same command")
        for p in chosen:
            print(shlex.join(p.command(board, str(elf), str(bin_), external)))
        if monitor:
            print(f"then: stm32ai monitor --port {shlex.quote(port)}")
        return 0
    p = _choose(programmer, board, external)
    cmd = p.command(board, str(elf), str(bin_), external)
    if not elf.is_file() or not bin_.is_file():
        build_project(project)
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, errors="replace")
    if r.returncode != 0:
        if p.no_board.search(r.stdout):
            raise Stm32aiError(f"no board attached ({p.exe}: {_failure_line(r.stdout)}): connect "
                               f"{board.name}'s ST-LINK USB port")
        raise Stm32aiError(f"{p.exe} failed (exit {r.returncode}): {_failure_line(r.stdout)}")
    print(f"flashed {elf.name if p.image == 'elf' else bin_.name} into {board.name}: {shlex.join(cmd)}",
          file=sys.stderr)
    if monitor:
        from stm32ai.project.monitor import monitor as run_monitor

        return run_monitor(port, baud=board.console.baud)
    return 0
