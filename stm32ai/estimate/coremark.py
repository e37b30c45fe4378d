"""Calibration of the estimator against silicon: the CoreMark workload through the estimator,
beside the CoreMark/MHz ST publishes for the same parts.

The workload is `<coremark dir>/lib/libcoremark_<core>.a` (unmodified CoreMark 1.0 built with
GCC 12.2 -O2, see its README; the directory is `--coremark-dir DIR`, else $STM32AI_COREMARK_DIR,
else `../shared/calibration/coremark` beside the source checkout), linked here by our own small harness at the board's
addresses: code and constants in the board's text region (flash, behind the ART), data, bss and
stack in its data region (SRAM). The trace boots it from the reset vector, runs to the
`coremark_timed_begin` hook and estimates everything up to `coremark_timed_end` (the region a
CoreMark score times: `iterate()`), then lets the run finish and checks CoreMark's own CRC
verdict. CoreMark/MHz = iterations per second per MHz = 1e6 / cycles per iteration.

These are calibration runs, not CoreMark scores (the licence forbids calling them that: no
timer, runs far shorter than 10 s, a non-standard port).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stm32ai.boards import Board
from stm32ai.errors import Stm32aiError
from stm32ai.estimate.estimate import core_model, model_name
from stm32ai.estimate.memsys import build_memory_system
from stm32ai.estimate.trace import Trace, board_regions

COREMARK_ENV = "STM32AI_COREMARK_DIR"
# the project's checkout layout: <work>/<source tree>/stm32ai/estimate/coremark.py, <work>/shared/...
_CHECKOUT_DEFAULT = Path(__file__).resolve().parents[3] / "shared" / "calibration" / "coremark"


def default_coremark_dir() -> Path:
    """$STM32AI_COREMARK_DIR if set, else ../shared/calibration/coremark beside the source checkout."""
    env = os.environ.get(COREMARK_ENV)
    return Path(env) if env else _CHECKOUT_DEFAULT


COREMARK_DIR = default_coremark_dir()


def coremark_library(coremark_dir: Path, core: str) -> Path:
    """The core's CoreMark library in `coremark_dir`, or one line saying where it was looked for."""
    lib = coremark_dir / "lib" / f"libcoremark_{core}.a"
    if not lib.is_file():
        raise Stm32aiError(f"CoreMark calibration library not found: {lib} (give --coremark-dir DIR or set "
                           f"{COREMARK_ENV}=DIR, DIR holding lib/libcoremark_{core}.a and include/)")
    return lib


@dataclass(frozen=True)
class Published:
    cm_per_mhz: float
    source: str
    status: str


# ../shared/calibration/coremark/README.md, "Published CoreMark figures (real silicon)"
PUBLISHED: dict[str, Published] = {
    "nucleo-l4r5zi": Published(3.41, "DS12023 cover page (STM32L4R5 @ 120 MHz: 409.20)", "unverified"),
    "disco-l475-iot01": Published(3.42, "DS10969 cover page (STM32L475 @ 80 MHz: 273.55)",
                                  "L4 series line verified, L475 unverified"),
    "nucleo-f401re": Published(3.39, "ST STM32F401 product page (285 CoreMark @ 84 MHz)", "secondary"),
    "qemu-netduinoplus2": Published(3.37, "ST STM32F407/417 product page (566 CoreMark @ 168 MHz)",
                                    "verified for F407; F405 assumed the same"),
    "disco-f746": Published(5.01, "AN4667 Introduction (STM32F746 @ 216 MHz: 1082)", "verified"),
    "nucleo-f746zg": Published(5.01, "AN4667 Introduction (STM32F746 @ 216 MHz: 1082)", "verified"),
    "disco-f769": Published(5.01, "AN4667 Introduction (F7 series @ 216 MHz: 1082)",
                            "series-level figure, F769 unverified"),
    "nucleo-h743zi": Published(5.05, "ST STM32H743/753 product page (2424 CoreMark @ 480 MHz)", "secondary"),
}

# The like-for-like reference: CoreMark/MHz measured on silicon of the same core built with the
# same compiler and level as the calibration library (GCC 12.2 -O2), code and data in zero-wait
# TCM, so the core decides it. github.com/Masmiseim36/Coremark_iMXRT, readme.md, "Results with
# GCC 12.2" (iterations/s, Rowley CrossWorks projects for NXP i.MX RT boards; the M33 row is
# only in "Results with GCC 12.3"). docs/estimate.md lists every row.
_NXP_GCC = "measured, third party (github Masmiseim36/Coremark_iMXRT)"
GCC_SILICON: dict[str, Published] = {
    "cortex-m4": Published(605.96 / 240, "i.MX RT1160 CM4 @ 240 MHz, GCC 12.2 -O2, TCM: 605.96 it/s "
                                         "(RT1170 CM4 @ 400 MHz: 991.60 = 2.48)", _NXP_GCC),
    "cortex-m7": Published(2423.06 / 600, "i.MX RT1060 @ 600 MHz, GCC 12.2 -O2, TCM: 2423.06 it/s "
                                          "(RT10xx/11xx CM7 rows: 4.02-4.05)", _NXP_GCC),
    "cortex-m33": Published(651.09 / 240, "i.MX RT1180 CM33 @ 240 MHz, GCC 12.3 -O2, TCM: 651.09 it/s "
                                          "(GCC 13.2: 2.86)", _NXP_GCC),
}

_HARNESS = r"""
#include <stdint.h>
#include "coremark_run.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
int main(void);

volatile int32_t g_rc = 1;
coremark_result_t g_res;

/* The estimator traces from the entry of the first hook to the entry of the second. */
__attribute__((noinline)) void coremark_timed_begin(void) { __asm volatile("" ::: "memory"); }
__attribute__((noinline)) void coremark_timed_end(void) { __asm volatile("" ::: "memory"); }
__attribute__((noinline)) void harness_done(void) { for (;;) { __asm volatile("" ::: "memory"); } }

void Reset_Handler(void) {
  uint32_t *s = &_sidata, *d = &_sdata;
  while (d < &_edata) *d++ = *s++;
  for (d = &_sbss; d < &_ebss;) *d++ = 0;
#if defined(__ARM_FP)
  *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20);  /* CPACR: CP10/CP11 full access */
  __asm volatile("dsb\n isb" ::: "memory");
#endif
  main();
  harness_done();
}

static void Default_Handler(void) { harness_done(); }

__attribute__((section(".isr_vector"), used))
void (*const vector_table[16])(void) = {
  (void (*)(void))(&_estack), Reset_Handler, Default_Handler, Default_Handler, Default_Handler,
  Default_Handler, Default_Handler, 0, 0, 0, 0, Default_Handler, Default_Handler, 0,
  Default_Handler, Default_Handler,
};

int main(void) {
  g_rc = coremark_run(ITERATIONS, &g_res);
  harness_done();
  return 0;
}
"""

_LD = """MEMORY {{ ROM (rx) : ORIGIN = 0x{text:08x}, LENGTH = {text_len}
         RAM (rwx): ORIGIN = 0x{data:08x}, LENGTH = {data_len} }}
ENTRY(Reset_Handler)
SECTIONS {{
  .isr_vector : {{ KEEP(*(.isr_vector)) }} > ROM
  .text : {{ *(.text*) *(.rodata*) . = ALIGN(4); }} > ROM
  .ARM.exidx : {{ *(.ARM.exidx*) }} > ROM
  _sidata = LOADADDR(.data);
  .data : {{ _sdata = .; *(.data*) . = ALIGN(4); _edata = .; }} > RAM AT > ROM
  .bss (NOLOAD) : {{ _sbss = .; *(.bss*) *(COMMON) . = ALIGN(4); _ebss = .; }} > RAM
  _estack = ORIGIN(RAM) + LENGTH(RAM);
}}
"""


@dataclass
class CoremarkEstimate:
    board: str
    model: str
    iterations: int
    cycles: int
    instructions: int
    fetch_stall_cycles: int
    data_stall_cycles: int
    published: Published | None
    gcc_silicon: Published | None = None

    @property
    def cycles_per_iteration(self) -> float:
        return self.cycles / self.iterations

    @property
    def instructions_per_iteration(self) -> float:
        return self.instructions / self.iterations

    @property
    def cm_per_mhz(self) -> float:
        return 1e6 / self.cycles_per_iteration

    @property
    def difference(self) -> float | None:
        """Estimated CoreMark/MHz relative to the published one (+0.05 = 5 % faster than published)."""
        return self.cm_per_mhz / self.published.cm_per_mhz - 1 if self.published else None

    @property
    def difference_gcc(self) -> float | None:
        """Estimated CoreMark/MHz relative to GCC 12.2 -O2 silicon of the same core (like for like)."""
        return self.cm_per_mhz / self.gcc_silicon.cm_per_mhz - 1 if self.gcc_silicon else None

    @property
    def set_up_factor(self) -> float | None:
        """ST's published CoreMark/MHz over GCC 12.2 -O2 silicon of the same core: what ST's
        (undisclosed) compiler set-up is worth, measured, not assumed."""
        return self.published.cm_per_mhz / self.gcc_silicon.cm_per_mhz if self.published and self.gcc_silicon else None


def build_coremark(board: Board, out: Path, iterations: int = 2, coremark_dir: Path | None = None) -> Path:
    """Link the board core's CoreMark library with the harness at the board's flash/SRAM."""
    coremark_dir = coremark_dir or default_coremark_dir()
    lib = coremark_library(coremark_dir, board.core)
    out.mkdir(parents=True, exist_ok=True)
    text, data = board.region(board.text_region), board.region(board.data_region)
    (out / "harness.c").write_text(_HARNESS)
    (out / "link.ld").write_text(_LD.format(text=text.origin, text_len=text.length, data=data.origin,
                                            data_len=data.length))
    elf = out / "coremark.elf"
    cmd = ["arm-none-eabi-gcc", *board.arch_flags, "-O2", "-fno-tree-loop-distribute-patterns", "-g",
           f"-DITERATIONS={iterations}u",
           f"-I{coremark_dir / 'include'}", "-nostartfiles", "-nostdlib", "-T", str(out / "link.ld"),
           "-o", str(elf), str(out / "harness.c"), str(lib), "-lgcc"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise Stm32aiError("arm-none-eabi-gcc not found: install gcc-arm-none-eabi") from None
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        first = next((ln for ln in lines if "error" in ln or "undefined" in ln), lines[0] if lines else "?")
        raise Stm32aiError(f"CoreMark harness build failed: {first.strip()}")
    return elf


def estimate_coremark(board: Board, iterations: int = 2, coremark_dir: Path | None = None) -> CoremarkEstimate:
    """CoreMark's timed region through the board's core and memory-system model."""
    with tempfile.TemporaryDirectory(prefix="stm32ai-coremark-") as tmp:
        elf = build_coremark(board, Path(tmp), iterations, coremark_dir)
        tr = Trace(elf, board_regions(board), core=board.core)
        tr.run_to(tr.symbol("coremark_timed_begin"))
        r = tr.measure(core_model(board), build_memory_system(board), stop=tr.symbol("coremark_timed_end"))
        tr.run_to(tr.symbol("harness_done"))
        rc = int.from_bytes(tr.uc.mem_read(tr.symbol("g_rc"), 4), "little", signed=True)
    if rc != 0:
        raise Stm32aiError(f"CoreMark did not validate under the estimator's trace (coremark_run returned {rc})")
    return CoremarkEstimate(board=board.id, model=model_name(board), iterations=iterations, cycles=r.cycles,
                            instructions=r.instructions, fetch_stall_cycles=r.fetch_stall_cycles,
                            data_stall_cycles=r.data_stall_cycles, published=PUBLISHED.get(board.id),
                            gcc_silicon=GCC_SILICON.get(board.core))


def main(argv: list[str] | None = None) -> int:
    """python -m stm32ai.estimate.coremark [--coremark-dir DIR] [board ...]: the table of docs/estimate.md."""
    from stm32ai.boards import load_board
    from stm32ai.sanitize import one_line

    ap = argparse.ArgumentParser(prog="python -m stm32ai.estimate.coremark",
                                 description="CoreMark through the cycle estimator, beside published silicon figures")
    ap.add_argument("boards", nargs="*", help=f"board ids (default: {', '.join(PUBLISHED)})")
    ap.add_argument("--coremark-dir", type=Path, default=None,
                    help=f"the CoreMark calibration library (lib/, include/); default ${COREMARK_ENV}, else "
                         f"{_CHECKOUT_DEFAULT}")
    args = ap.parse_args(argv)
    cdir = args.coremark_dir or default_coremark_dir()
    try:
        boards = [load_board(b) for b in (args.boards or list(PUBLISHED))]
        for core in dict.fromkeys(b.core for b in boards):      # every library checked before any work
            coremark_library(cdir, core)
        print("| board | model | cycles/iteration (estimated) | instructions/iteration | CPI | fetch stalls/it "
              "| data stalls/it | CM/MHz estimated | ST published | difference | GCC 12.2 -O2 silicon (same core) "
              "| difference | ST / GCC silicon |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for b in boards:
            e = estimate_coremark(b, coremark_dir=cdir)
            pub, gcc = e.published, e.gcc_silicon
            print(f"| {b.id} | {e.model} | {e.cycles_per_iteration:,.0f} | {e.instructions_per_iteration:,.0f} "
                  f"| {e.cycles / e.instructions:.3f} | {e.fetch_stall_cycles / e.iterations:,.0f} "
                  f"| {e.data_stall_cycles / e.iterations:,.0f} | {e.cm_per_mhz:.2f} "
                  f"| {pub.cm_per_mhz if pub else '-'} | {f'{100 * e.difference:+.1f} %' if pub else '-'} "
                  f"| {f'{gcc.cm_per_mhz:.2f}' if gcc else '-'} | {f'{100 * e.difference_gcc:+.1f} %' if gcc else '-'} "
                  f"| {f'{e.set_up_factor:.2f}' if e.set_up_factor else '-'} |")
    except Stm32aiError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
