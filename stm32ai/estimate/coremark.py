"""Calibration of the estimator against silicon: the CoreMark workload through the estimator,
beside the CoreMark/MHz ST publishes for the same parts.

The workload is `../shared/calibration/coremark/lib/libcoremark_<core>.a` (unmodified CoreMark
1.0 built with GCC 12.2 -O2, see its README), linked here by our own small harness at the board's
addresses: code and constants in the board's text region (flash, behind the ART), data, bss and
stack in its data region (SRAM). The trace boots it from the reset vector, runs to the
`coremark_timed_begin` hook and estimates everything up to `coremark_timed_end` (the region a
CoreMark score times: `iterate()`), then lets the run finish and checks CoreMark's own CRC
verdict. CoreMark/MHz = iterations per second per MHz = 1e6 / cycles per iteration.

These are calibration runs, not CoreMark scores (the licence forbids calling them that: no
timer, runs far shorter than 10 s, a non-standard port).
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stm32ai.boards import Board
from stm32ai.errors import Stm32aiError
from stm32ai.estimate.estimate import core_model, model_name
from stm32ai.estimate.memsys import build_memory_system
from stm32ai.estimate.trace import Trace, board_regions

COREMARK_DIR = Path(__file__).resolve().parents[3] / "shared" / "calibration" / "coremark"


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


def build_coremark(board: Board, out: Path, iterations: int = 2, coremark_dir: Path = COREMARK_DIR) -> Path:
    """Link the board core's CoreMark library with the harness at the board's flash/SRAM."""
    lib = coremark_dir / "lib" / f"libcoremark_{board.core}.a"
    if not lib.is_file():
        raise Stm32aiError(f"{lib} not found (the CoreMark calibration library for {board.core})")
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


def estimate_coremark(board: Board, iterations: int = 2, coremark_dir: Path = COREMARK_DIR) -> CoremarkEstimate:
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
                            data_stall_cycles=r.data_stall_cycles, published=PUBLISHED.get(board.id))


def main() -> None:  # python -m stm32ai.estimate.coremark [board ...]: the table of docs/estimate.md
    import sys

    from stm32ai.boards import load_board

    ids = sys.argv[1:] or list(PUBLISHED)
    print("| board | model | cycles/iteration (estimated) | instructions/iteration | CPI | fetch stalls/it "
          "| data stalls/it | CM/MHz estimated | published | difference |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for bid in ids:
        e = estimate_coremark(load_board(bid))
        pub = e.published
        print(f"| {bid} | {e.model} | {e.cycles_per_iteration:,.0f} | {e.instructions_per_iteration:,.0f} "
              f"| {e.cycles / e.instructions:.3f} | {e.fetch_stall_cycles / e.iterations:,.0f} "
              f"| {e.data_stall_cycles / e.iterations:,.0f} | {e.cm_per_mhz:.2f} "
              f"| {pub.cm_per_mhz if pub else '-'} | {f'{100 * e.difference:+.1f} %' if pub else '-'} |")


if __name__ == "__main__":
    main()
