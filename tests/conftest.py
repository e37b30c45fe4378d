"""Shared test helpers: where the real models and fixtures are."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

# Re-verify the IR after every compiler pass (stm32ai/passes/verify.py) in every test.
os.environ.setdefault("STM32AI_VERIFY_PASSES", "1")


def pytest_configure(config: pytest.Config) -> None:
    """One host-runtime build cache for the whole session (stm32ai/validate/host.py): set by the
    controller before xdist starts its workers, which inherit it; removed at the end."""
    if "PYTEST_XDIST_WORKER" not in os.environ and "STM32AI_CACHE_DIR" not in os.environ:
        config._stm32ai_cache = tempfile.mkdtemp(prefix="stm32ai-test-cache-")  # type: ignore[attr-defined]
        os.environ["STM32AI_CACHE_DIR"] = config._stm32ai_cache  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    cache = getattr(config, "_stm32ai_cache", None)
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
        os.environ.pop("STM32AI_CACHE_DIR", None)


ROOT = Path(__file__).resolve().parents[1]
SHARED_MODELS = ROOT.parent / "shared" / "models"
FIXTURES = ROOT / "tests" / "fixtures" / "models"


def shared_model(rel: str) -> Path:
    p = SHARED_MODELS / rel
    if not p.exists():
        pytest.skip(f"{rel} not present in ../shared/models")
    return p


def fixture_models(pattern: str = "*.tflite") -> list[Path]:
    return sorted(FIXTURES.glob(pattern))


RUNTIME = ROOT / "stm32ai" / "runtime"
WARN = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion"]
M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]


def compile_each(cc: str, flags: list[str], sources: list[Path], out: Path, suffix: str = ".o") -> list[Path]:
    """Every source alone into out/<stem><suffix> with the runtime headers; any warning fails."""
    objs = []
    for src in sources:
        obj = out / (src.stem + suffix)
        r = subprocess.run([cc, *flags, f"-I{RUNTIME / 'include'}", "-c", str(src), "-o", str(obj)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        objs.append(obj)
    return objs


def random_data(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Random values over the dtype's range (integers within +-2^40), bools 0/1, floats normal."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind == "f":
        return rng.normal(size=shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -(1 << 40)), min(info.max, 1 << 40), shape, dtype=np.int64).astype(dt)


def stm32ai_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stm32ai", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def assert_one_line_error(r: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, no traceback, one line on stderr naming every word; returns the line."""
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def refused_by_generate(model: Path, out: Path, *words: str) -> str:
    """`stm32ai generate --c-only` refuses the model: one line naming every word, nothing written."""
    line = assert_one_line_error(stm32ai_cli("generate", str(model), "--c-only", "-o", str(out), cwd=ROOT), *words)
    assert not out.exists()
    return line


def c_scratch_sizes(ops: list, header: str, sources: list[Path], flags: list[str], tmp: Path) -> list[int]:
    """What each op's C `ai_<kernel>_scratch_size(&params)` returns, with the op's own params,
    compiled with the host cc: lets tests hold the Python size mirror to the C query."""
    from stm32ai.emitter import c_value

    runtime = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
    lines = ["#include <stdio.h>", f'#include "{header}"', "int main(void) {"]
    for i, op in enumerate(ops):
        init = ", ".join(f".{k} = {c_value(v)}" for k, v in op.attrs.items())
        lines.append(f"  static const ai_{op.kernel}_params p{i} = {{ {init} }};")
        lines.append(f'  printf("%ld\\n", (long)ai_{op.kernel}_scratch_size(&p{i}));')
    lines.append("  return 0;\n}\n")
    src = tmp / "scratch.c"
    src.write_text("\n".join(lines))
    exe = tmp / "scratch"
    subprocess.run(["cc", *flags, f"-I{runtime / 'include'}", str(src), *map(str, sources), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return [int(v) for v in out.split()]


# Bare-metal Cortex-M program for QEMU mps2-an386 (semihosting stdio): vector table and reset
# handler, and the linker script. Kernel tests link their C self-tests with these.
STARTUP_C = r"""
#include <stdint.h>
extern void _start(void);
extern uint32_t __stack_top;
void reset_handler(void) {
  *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: enable the FPU */
  __asm__ volatile("dsb\n isb");
  _start(); /* newlib's rdimon crt0: semihosting stdio, then main() and exit() */
}
static void fault(void) { for (;;) { } }
__attribute__((section(".vectors"), used)) const void *const vectors[16] = {
  &__stack_top, (void *)reset_handler, (void *)fault, (void *)fault, (void *)fault,
  (void *)fault, (void *)fault,
};
"""

MPS2_LD = """
MEMORY { FLASH (rx) : ORIGIN = 0x00000000, LENGTH = 4M  RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 4M }
ENTRY(reset_handler)
SECTIONS {
  .text : { KEEP(*(.vectors)) *(.text*) *(.rodata*) KEEP(*(.init)) KEEP(*(.fini)) . = ALIGN(4);
            __preinit_array_start = .; KEEP(*(.preinit_array)) __preinit_array_end = .;
            __init_array_start = .; KEEP(*(.init_array*)) __init_array_end = .;
            __fini_array_start = .; KEEP(*(.fini_array*)) __fini_array_end = .; } > FLASH
  .ARM.exidx : { *(.ARM.exidx*) } > FLASH
  .data : { *(.data*) } > RAM
  .bss : { __bss_start__ = .; *(.bss*) *(COMMON) . = ALIGN(8); __bss_end__ = .; } > RAM
  end = .; __end__ = .;
  __stack_top = ORIGIN(RAM) + LENGTH(RAM);
  __stack = __stack_top;
}
"""


def run_m4_selftest(tmp_path: Path, source: str, kernels: list[str]) -> tuple[str, list[list[str]]]:
    """Build a C self-test (`source`, with main()) and the runtime files `kernels` (names under
    runtime/src) for the Cortex-M4 at -O2 with -Werror, run it on QEMU mps2-an386 with semihosting
    stdio, and return the firmware's disassembly and its stdout lines starting with "case", split
    into words. Skips when newlib's rdimon library is not installed."""
    (tmp_path / "selftest.c").write_text(source)
    (tmp_path / "startup.c").write_text(STARTUP_C)
    (tmp_path / "mps2.ld").write_text(MPS2_LD)
    srcs = [str(RUNTIME / "src" / k) for k in kernels]
    r = subprocess.run(["arm-none-eabi-gcc", *WARN, *M4, f"-I{RUNTIME / 'include'}", "--specs=rdimon.specs",
                        "-T", "mps2.ld", "selftest.c", "startup.c", *srcs, "-o", "fw.elf"], cwd=tmp_path,
                       capture_output=True, text=True)
    if r.returncode != 0 and "rdimon" in r.stderr:
        pytest.skip("newlib's rdimon (semihosting) library is not installed")
    assert r.returncode == 0, r.stderr
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(tmp_path / "fw.elf")], capture_output=True,
                         text=True).stdout
    out = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-monitor", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", "fw.elf"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    return dis, [ln.split() for ln in out.replace("\r", "").splitlines() if ln.startswith("case")]
