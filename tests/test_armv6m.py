"""Armv6-M (Cortex-M0/M0+): QEMU's microbit faults unaligned accesses (so CI catches one), and
the runtime and generated kernels run there bit-exact with TFLite Micro.

Armv6-M has no unaligned LDR/LDRH/STR (ARMv6-M ARM A3.2: an unaligned access is a HardFault;
CCR.UNALIGN_TRP is RES1). The probe below proves QEMU enforces it, with a Cortex-M3 control
where the same load is legal; then whole firmwares (MLPerf Tiny KWS and two multi-model
firmwares over the fixture models: conv, depthwise, FC, pooling, transpose conv, SVDF, int16
kernels, LUT activations, resize, concat, residual ADD) run on the emulated Cortex-M0 and must
report `result: match` against TFLite Micro (the reference computed at generate time)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from stm32ai.boards import load_board, uart_divisor
from tests.conftest import shared_model

FIXTURES = Path(__file__).parent / "fixtures" / "models"
TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm", "make")
needs_tools = pytest.mark.skipif(not all(shutil.which(t) for t in TOOLS),
                                 reason="arm-none-eabi-gcc, make and qemu-system-arm are needed")

# A load/store of WIDTH bits at buf + OFFSET; the offset comes through a volatile so the compiler
# cannot see the misalignment (it would split a visibly unaligned access into byte loads).
# Semihosting SYS_EXIT: ApplicationExit (QEMU exits 0) for the expected outcome, else 1.
PROBE = r"""
#include <stdint.h>
static void semi_exit(uint32_t reason) {
  register uint32_t r0 __asm("r0") = 0x18u;
  register uint32_t r1 __asm("r1") = reason;
  __asm volatile("bkpt 0xAB" : : "r"(r0), "r"(r1) : "memory");
  for (;;) {}
}
#define OK 0x20026u
#define BAD 0x20023u
static uint8_t buf[16] __attribute__((aligned(4)));
static volatile uint32_t off = OFFSET;
void HardFault_Handler(void) { semi_exit(EXPECT_FAULT ? OK : BAD); }
void Reset_Handler(void) {
  for (int i = 0; i < 16; i++) buf[i] = (uint8_t)i;
#if STORE
  *(volatile UINT *)(void *)(buf + off) = 0;
#else
  volatile UINT v = *(volatile const UINT *)(const void *)(buf + off);
  (void)v;
#endif
  semi_exit(EXPECT_FAULT ? BAD : OK);
}
extern uint32_t _estack;
__attribute__((section(".vectors"), used)) const void *const vectors[16] = {
  &_estack, (const void *)Reset_Handler, 0, (const void *)HardFault_Handler,
};
"""
PROBE_LD = """
MEMORY { FLASH (rx) : ORIGIN = 0, LENGTH = 256K  RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 16K }
SECTIONS { .text : { KEEP(*(.vectors)) *(.text*) *(.rodata*) } > FLASH
  .bss (NOLOAD) : { *(.bss*) *(COMMON) } > RAM
  _estack = ORIGIN(RAM) + LENGTH(RAM); }
"""


def _probe(tmp: Path, cpu: str, machine: str, width: int, offset: int, store: bool, fault: bool) -> int:
    (tmp / "p.c").write_text(PROBE)
    (tmp / "p.ld").write_text(PROBE_LD)
    elf = tmp / f"p_{cpu}_{width}_{offset}_{int(store)}.elf"
    subprocess.run(["arm-none-eabi-gcc", f"-mcpu={cpu}", "-mthumb", "-O1", "-nostdlib", "-ffreestanding",
                    f"-DOFFSET={offset}", f"-DEXPECT_FAULT={int(fault)}", f"-DSTORE={int(store)}",
                    f"-DUINT=uint{width}_t", "-T", str(tmp / "p.ld"), str(tmp / "p.c"), "-o", str(elf)],
                   check=True, capture_output=True)
    r = subprocess.run(["qemu-system-arm", "-M", machine, "-nographic", "-monitor", "none", "-serial", "null",
                        "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                       capture_output=True, timeout=30)
    return r.returncode


@needs_tools
@pytest.mark.parametrize("width,offset,store,fault", [
    (32, 0, False, False), (32, 1, False, True), (32, 2, False, True), (32, 3, True, True),
    (16, 2, False, False), (16, 1, False, True), (16, 3, True, True),
])
def test_qemu_microbit_faults_unaligned_accesses(tmp_path, width, offset, store, fault):
    assert _probe(tmp_path, "cortex-m0", "microbit", width, offset, store, fault) == 0, (
        f"{'STR' if store else 'LDR'} of {width} bits at offset {offset}: expected "
        f"{'a HardFault' if fault else 'no fault'} on the emulated Cortex-M0")


@needs_tools
def test_control_cortex_m3_allows_the_same_unaligned_load(tmp_path):
    # Armv7-M allows unaligned LDR (CCR.UNALIGN_TRP = 0 at reset): the probe itself is sound.
    assert _probe(tmp_path, "cortex-m3", "mps2-an385", 32, 1, False, False) == 0


def test_microbit_board():
    b = load_board("qemu-microbit")
    assert (b.core, b.fpu, b.family, b.cpu_hz) == ("cortex-m0", "none", "nrf51", 16_000_000)
    assert b.arch_flags == ["-mcpu=cortex-m0", "-mthumb", "-mfloat-abi=soft"]
    assert b.region("flash").length == 256 * 1024 and b.region("sram").length == 16 * 1024
    assert (b.console.driver, b.console.base, b.console.psel_txd, b.console.psel_rxd) == \
        ("nrf51_uart", 0x40002000, 24, 25)
    assert b.emulation.qemu_machine == "microbit" and b.cycle_counter == "systick"


# nRF51 Series Reference Manual v3.0 §29.10.8, BAUDRATE register values (16 MHz HFCLK)
@pytest.mark.parametrize("baud,value", [(1200, 0x0004F000), (9600, 0x00275000), (19200, 0x004EA000),
                                        (38400, 0x009D5000), (57600, 0x00EBF000), (115200, 0x01D7E000),
                                        (230400, 0x03AFB000), (460800, 0x075F7000), (1_000_000, 0x10000000)])
def test_nrf51_baudrate_register(baud, value):
    assert uart_divisor("nrf51", 16_000_000, baud) == value


def _generate_and_run(tmp: Path, models: list[Path], *extra: str) -> str:
    from stm32ai.cli import main
    from stm32ai.project.run import build_project, run_qemu

    out = tmp / "fw"
    assert main(["generate", *map(str, models), "--board", "qemu-microbit", "-o", str(out), *extra]) == 0
    build_project(out)
    code, text = run_qemu(out, load_board("qemu-microbit"), timeout_s=120)
    assert "fault" not in text, text
    assert code == 0, text
    return text


@pytest.mark.slow
@needs_tools
def test_kws_demo_matches_on_the_emulated_cortex_m0(tmp_path):
    text = _generate_and_run(tmp_path, [shared_model("mlperf_tiny/kws_ref_model.tflite")])
    assert "result: match" in text and "max_err: 0" in text
    assert "instructions: " in text and "cycles:" not in text


# Two firmwares, as many kernels as fit the 16 KiB of RAM (models share one activation pool).
BATCHES = [
    ["conv_odd_same_int8", "conv_stride2_same_int8", "conv_1x1_int8", "conv_dilation2_same_int8",
     "dwconv_dm1_same_int8", "dwconv_dm2_valid_int8", "dwconv_stride2_same_int8", "dense_int8",
     "avgpool_p3s1_same_int8", "maxpool_p3s2_same_int8", "act_logistic_int8"],
    ["s16_conv_int16", "s16_dwconv_int16", "bin_mul_gate_int8", "tconv_s2_same_int8", "svdf_basic_int8",
     "resize_bilinear_int8", "logsoftmax_dense_head_int8", "move_concat_int8", "act_prelu_channel_int8",
     "add_residual_int8"],
]


@pytest.mark.slow
@needs_tools
@pytest.mark.parametrize("batch", range(len(BATCHES)))
def test_kernels_match_on_the_emulated_cortex_m0(tmp_path, batch):
    names = BATCHES[batch]
    text = _generate_and_run(tmp_path, [FIXTURES / f"{n}.tflite" for n in names], "--shared-activations")
    assert text.count("result: match") == len(names), text


@pytest.mark.slow
@needs_tools
def test_int8_weight_layout_matches_on_the_emulated_cortex_m0(tmp_path):
    """--optimization ram keeps int8 conv weights (what a small flash gets): the Armv6-M w8
    loop (mac1x2_pass_w8_v6m), with odd K groups and an odd channel count among them."""
    names = ["conv_odd_same_int8", "conv_stride2_same_int8", "conv_1x1_int8", "conv_dilation2_same_int8",
             "conv_relu6_int8", "conv_odd_valid_int8"]
    text = _generate_and_run(tmp_path, [FIXTURES / f"{n}.tflite" for n in names], "--shared-activations",
                             "--optimization", "ram")
    assert text.count("result: match") == len(names), text


# ---- the Cortex-M0+ Nucleo boards (RM0444 STM32G0, RM0490 STM32C0) ----
MHZ = 1_000_000
K = 1024


@pytest.mark.parametrize("bid,mcu,cpu,flash,ram,reset", [
    ("nucleo-g0b1re", "STM32G0B1RET6", 64, 512, 144, 16),   # DS13560: 64 MHz, 512 KiB, 144 KiB
    ("nucleo-g071rb", "STM32G071RBT6", 64, 128, 36, 16),    # DS12232: 64 MHz, 128 KiB, 36 KiB
    ("nucleo-c031c6", "STM32C031C6T6", 48, 32, 12, 12),     # DS13944: 48 MHz, 32 KiB, 12 KiB
])
def test_m0plus_boards(bid, mcu, cpu, flash, ram, reset):
    b = load_board(bid)
    assert (b.mcu, b.core, b.fpu) == (mcu, "cortex-m0plus", "none")
    assert b.arch_flags == ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"]
    assert b.cpu_hz == b.hclk_hz == b.pclk1_hz == b.pclk2_hz == cpu * MHZ    # one APB bus, /1
    assert b.clock.reset_hz == reset * MHZ            # G0: HSI16; C0: HSI48 / 4
    assert {r.name: (r.origin, r.length) for r in b.memory} == {
        "flash": (0x08000000, flash * K), "sram": (0x20000000, ram * K)}
    # USART2 on PA2/PA3 AF1: the ST-LINK virtual COM port of every Nucleo-64 (UM2324, UM2953)
    assert (b.console.instance, b.console.base) == ("USART2", 0x40004400)
    assert (str(b.console.tx), str(b.console.rx)) == ("PA2 AF1", "PA3 AF1")
    assert b.console.enable.reg == 0x4002103C and b.console.enable.bit == 17   # RCC_APBENR1.USART2EN
    assert b.gpio.base == 0x50000000 and b.gpio.enable_reg == 0x40021034       # IOPORT, RCC_IOPENR
    assert b.uart_divisor == round(cpu * MHZ / 115200)
    assert b.cycle_counter == "systick" and b.irq_count == 32


def test_g0_clock_registers():
    from stm32ai.project.clockregs import clock_registers

    r = clock_registers(load_board("nucleo-g0b1re"))
    # RCC_PLLCFGR: PLLSRC = HSI16 (10), M-1 = 0, N = 8 << 8, P/Q fields /2 (disabled), PLLREN,
    # R-1 = 1 << 29: HSI16 / 1 * 8 / 2 = 64 MHz from a 128 MHz VCO
    assert r["CLK_PLLCFGR_VAL"] == 2 | (8 << 8) | (1 << 17) | (1 << 25) | (1 << 28) | (1 << 29)
    # FLASH_ACR: 2 WS (48 < HCLK <= 64 MHz, Range 1), PRFTEN, ICEN; written through a mask that
    # leaves DBG_SWEN (bit 18) alone
    assert r["CLK_FLASH_ACR_VAL"] == 2 | (1 << 8) | (1 << 9)
    assert r["CLK_FLASH_ACR_MASK"] & (1 << 18) == 0
    assert r["CLK_CFGR_PRE_VAL"] == 0


def test_c0_clock_registers():
    from stm32ai.project.clockregs import clock_registers

    r = clock_registers(load_board("nucleo-c031c6"))
    assert r["CLK_HSIDIV_MASK"] == 7 << 11 and r["CLK_HSIDIV_VAL"] == 0       # HSIDIV /1: 48 MHz
    assert r["CLK_FLASH_ACR_VAL"] == 1 | (1 << 8) | (1 << 9)                  # 1 WS at 48 MHz
    assert "CLK_PLLCFGR_VAL" not in r.defs


@pytest.mark.parametrize("bid,edit,expect", [
    ("nucleo-g0b1re", {"flash_latency": 1}, "too few for HCLK 64 MHz: at least 2"),
    ("nucleo-g0b1re", {"pll": {"m": 1, "n": 10, "r": 2}}, "exceeds the 64 MHz maximum"),
    ("nucleo-g0b1re", {"apb2_div": 2}, "one APB prescaler"),
    ("nucleo-c031c6", {"flash_latency": 0}, "too few for HCLK 48 MHz: at least 1"),
    ("nucleo-c031c6", {"pll": {"m": 1, "n": 8, "r": 2}}, "has no PLL"),
])
def test_m0plus_clock_errors(tmp_path, bid, edit, expect):
    import yaml

    from stm32ai.boards import boards_dir
    from stm32ai.errors import Stm32aiError

    data = yaml.safe_load((boards_dir() / f"{bid}.yaml").read_text())
    data["clock"].update(edit)
    (tmp_path / "soc").symlink_to(boards_dir() / "soc")
    f = tmp_path / "x.yaml"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(Stm32aiError, match=expect):
        load_board(str(f))


def test_c031c6_fits_check_names_region_and_bytes(tmp_path):
    model = shared_model("mlperf_tiny/kws_ref_model.tflite")
    r = subprocess.run(["python3", "-m", "stm32ai", "generate", str(model), "--board", "nucleo-c031c6",
                        "-o", str(tmp_path / "p")], capture_output=True, text=True,
                       env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert r.returncode == 2 and not (tmp_path / "p").exists()
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    # the int8 layout (35,120 B: the 32 KiB flash leaves no room for int16) still does not fit
    assert "weights (35,120 B) do not fit on nucleo-c031c6: flash has 6,144 B free" in line


def test_programmer_configuration():
    from stm32ai.project.flash import flash_commands

    # OpenOCD's board/st_nucleo_g0.cfg (ST-LINK + target/stm32g0x.cfg) serves both G0 Nucleos
    for bid in ("nucleo-g0b1re", "nucleo-g071rb"):
        cmds = flash_commands(load_board(bid), "f.elf", "f.bin")
        assert cmds["openocd"][:3] == ["openocd", "-f", "board/st_nucleo_g0.cfg"]
        assert cmds["st-flash"] == ["st-flash", "--reset", "write", "f.bin", "0x08000000"]
    # no OpenOCD config for the C0 (OpenOCD 0.12 has no STM32C0 target): st-flash or CubeProgrammer
    c0 = flash_commands(load_board("nucleo-c031c6"), "f.elf", "f.bin")
    assert "openocd" not in c0 and c0["cubeprog"][:3] == ["STM32_Programmer_CLI", "-c", "port=SWD"]


RQ_PROBE = r"""
#include <stdint.h>
#include <stdio.h>
#include "ai_simd.h"
static int32_t ref(int32_t x, int32_t m, int32_t rs, int32_t kf) {
  const int64_t a = (int64_t)kf * 4294967296LL + 0x40000000LL - (x < 0 ? 0x80000000LL : 0) +
                    (int64_t)x * m;
  return (int32_t)(a >> 32) >> rs;
}
static int32_t ref_srdhm(int32_t a, int32_t b) {
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  const int64_t ab = (int64_t)a * (int64_t)b;
  const int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
  return (int32_t)((ab + nudge) / (1LL << 31));
}
int main(void) {
  static const int32_t xs[] = {0, 1, -1, 2, -2, 65535, 65536, -65536, -65537, 0x7FFFFFFF,
                               (int32_t)0x80000000, 0x40000000, -0x40000000, 123456789, -987654321};
  static const int32_t ms[] = {1, 0x40000000, 0x7FFFFFFF, 0x4D3C2B1A, 1518500250, 65535, 65536, 0x10000001};
  uint32_t s = 12345u;
  long bad = 0;
  for (int k = 0; k < 2000000; k++) {
    s = s * 1664525u + 1013904223u; int32_t x = (int32_t)s;
    s = s * 1664525u + 1013904223u; int32_t m = (int32_t)((s >> 1) | 0x40000000u);
    if (k < 15 * 8) { x = xs[k % 15]; m = ms[k / 15]; }
    s = s * 1664525u + 1013904223u; int32_t kf = (int32_t)(s >> 8) - (1 << 23);
    int32_t rs = (int32_t)(s & 15u);
    if (rq_fold(x, m, rs, kf) != ref(x, m, rs, kf)) bad++;
    /* the 64-bit product itself, over any operand pair (m of either sign, the extremes) */
    s = s * 1664525u + 1013904223u; int32_t b = (int32_t)s;
    if (k < 15 * 15) { x = xs[k % 15]; b = xs[k / 15]; }
    if (ai_smull(x, b) != (int64_t)x * (int64_t)b) bad++;
    if (ai_srdhm(x, b) != ref_srdhm(x, b)) bad++;
  }
  printf("%ld\n", bad);
  return bad != 0;
}
"""


def test_armv6m_rq_fold_equals_the_64_bit_formula(tmp_path):
    """The Armv6-M 64-bit product (ai_smull: 16x16 MULS pieces instead of libgcc's 64-bit
    multiply) and the requantisations built on it (rq_fold, ai_srdhm), compiled on the host with
    __ARM_ARCH_6M__ defined, against the plain 64-bit formulas of the other targets (UBSan on:
    no signed overflow in the pieces)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    inc = Path(__file__).parents[1] / "stm32ai" / "runtime" / "include"
    (tmp_path / "p.c").write_text(RQ_PROBE)
    exe = tmp_path / "p"
    subprocess.run([cc, "-O2", "-D__ARM_ARCH_6M__=1", f"-I{inc}", "-fsanitize=undefined",
                    "-fno-sanitize-recover=all", str(tmp_path / "p.c"), "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "0", r.stdout + r.stderr


@pytest.mark.slow
@needs_tools
@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("ninja") is None,
                    reason="cmake/ninja not installed")
@pytest.mark.parametrize("bid", ["qemu-microbit", "nucleo-g0b1re", "nucleo-g071rb", "nucleo-c031c6"])
def test_cmake_builds_without_warnings_for_armv6m(tmp_path, bid):
    """The CMake flavour for each Armv6-M board (test_project.py builds every board's Makefile,
    test_cubeide.py checks the CubeIDE files), -Wall -Wextra -Werror for cortex-m0 / m0plus."""
    from stm32ai.cli import main

    p = tmp_path / "p"
    assert main(["generate", str(FIXTURES / "conv_odd_same_int8.tflite"), "--board", bid, "-o", str(p)]) == 0
    for cmd in (["cmake", "--preset", "Release"], ["cmake", "--build", "--preset", "Release"]):
        r = subprocess.run(cmd, cwd=p, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "warning" not in (r.stdout + r.stderr).lower()
    core = load_board(bid).core
    assert f"-mcpu={core}" in (p / "cmake" / "gcc-arm-none-eabi.cmake").read_text() + \
        (p / "CMakeLists.txt").read_text()
    assert (p / "build/Release/firmware.elf").is_file()


def test_boards_command_lists_core_clock_flash_and_ram(capsys):
    from stm32ai.cli import main

    assert main(["boards"]) == 0
    rows = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()}
    assert "cortex-m0plus   64.0 MHz  flash  512 KiB  RAM  144 KiB" in rows["nucleo-g0b1re"]
    assert "cortex-m0plus   64.0 MHz  flash  128 KiB  RAM   36 KiB" in rows["nucleo-g071rb"]
    assert "cortex-m0plus   48.0 MHz  flash   32 KiB  RAM   12 KiB" in rows["nucleo-c031c6"]
    assert "cortex-m0       16.0 MHz  flash  256 KiB  RAM   16 KiB" in rows["qemu-microbit"]


def test_small_flash_gives_int16_layouts_up_for_int8():
    """balanced's weights budget is the board's flash minus the code reserve: on the 128 KiB
    G071RB half of str_ww's conv layers keep int8 weights, the 512 KiB G0B1RE widens all four."""
    from stm32ai.passes.lower.conv import conv_layout_choices
    from stm32ai.pipeline import compile_model, weights_budget_for

    model = shared_model("mlperf_tiny/str_ww_ref_model.tflite")
    layouts = {}
    for bid in ("nucleo-g071rb", "nucleo-g0b1re"):
        c = compile_model(model, "network", weights_budget=weights_budget_for(bid))
        layouts[bid] = [r["layout"] for r in conv_layout_choices(c.graph)]
        assert c.doc["stm32ai"]["pools"][1]["size"] <= weights_budget_for(bid)
    assert layouts["nucleo-g071rb"] == ["int16", "int16", "int8", "int8"]
    assert layouts["nucleo-g0b1re"] == ["int16"] * 4
    assert weights_budget_for("nucleo-g071rb") == 80 * 1024 and weights_budget_for("nucleo-c031c6") == 6 * 1024


@pytest.mark.slow
@needs_tools
@pytest.mark.parametrize("bid,stem", [("nucleo-g071rb", "kws_ref_model"), ("nucleo-g0b1re", "ad01_int8")])
def test_mlperf_models_link_on_the_m0plus_nucleos(tmp_path, bid, stem):
    """KWS fits the G071RB (36 KiB RAM, 128 KiB flash), AD the G0B1RE (512 KiB flash): the
    firmware links (the linker script checks every region)."""
    from stm32ai.cli import main
    from stm32ai.project.run import build_project

    p = tmp_path / "p"
    assert main(["generate", str(shared_model(f"mlperf_tiny/{stem}.tflite")), "--board", bid, "-o", str(p)]) == 0
    assert build_project(p).is_file()


@pytest.mark.slow
@needs_tools
def test_target_validation_over_the_nrf51_uart(capsys):
    """The UART validation protocol through the nRF51 UART model (RXDRDY/RXD, TXDRDY/TXD)."""
    from stm32ai.cli import main

    code = main(["validate", str(FIXTURES / "conv_odd_same_int8.tflite"), "--mode", "target",
                 "--board", "qemu-microbit", "-n", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "result: match" in out, out


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["pretrainedResnet_quant", "vww_96_int8", "ad01_int8", "str_ww_ref_model"])
def test_models_too_big_for_the_microbit_make_no_misaligned_typed_access(tmp_path, stem):
    """What does not fit 16 KiB of RAM is checked on the host: the generated C and the runtime
    built with -fsanitize=alignment (abort on the first report), so no typed int16/int32 load
    or store (the ones gcc emits as LDRH/LDR, which fault on Armv6-M) is misaligned; the outputs
    are bit-exact with TFLite Micro. Byte-wise int8 loads go through memcpy (rd32), which gcc
    lowers to byte loads for -mcpu=cortex-m0 and UBSan rightly ignores."""
    import numpy as np

    from stm32ai.emitter import emit_c
    from stm32ai.pipeline import compile_model
    from stm32ai.validate.host import CFLAGS, harness_source, io_specs, run_exe, runtime_objects
    from stm32ai.validate.reference import ReferenceUnavailable, run_tflm
    from tests.conftest import random_data

    model = shared_model(f"mlperf_tiny/{stem}.tflite")
    c = compile_model(model, "network")
    d = tmp_path / "c"
    emit_c(c.doc, c.params, "network", d)
    (tmp_path / "host_main.c").write_text(harness_source({"network": "network.h"}))
    cc = shutil.which("cc") or "gcc"
    flags = [*CFLAGS, "-fsanitize=alignment", "-fno-sanitize-recover=all"]
    objs = runtime_objects(d / "runtime", cc, flags, tmp_path)
    exe = tmp_path / "m"
    subprocess.run([cc, *flags, f"-I{d}", f"-I{d / 'runtime' / 'include'}", str(d / "network.c"),
                    str(d / "network_data.c"), str(tmp_path / "host_main.c"), *map(str, objs), "-o", str(exe),
                    "-lm"], check=True, capture_output=True)
    ins, _ = io_specs(c)
    rng = np.random.default_rng(22)
    sample = [random_data(tuple(s.shape), s.dtype, rng) for s in ins]
    got = run_exe(exe, [], c, [sample], "alignment-sanitized build")[0]   # raises on a report
    try:
        want = run_tflm(model, sample)
    except ReferenceUnavailable as e:
        pytest.skip(f"TFLite Micro unavailable: {e.reason}")
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)


def test_bench_reads_the_published_g0b1re_cycles():
    from bench.armv6m import m0_table, published_m0

    text = ("| board (core, MHz) | submitter, round | IC | KWS | VWW | AD |\n|---|---|---|---|---|---|\n"
            "| NUCLEO-U575ZI-Q (M33, 160) | Plumerai, v1.1 | 16.69 M | 4.81 M | 9.52 M | 0.59 M |\n"
            "| NUCLEO-G0B1RE (M0+, 64) | Bosch, v1.2 | 97.41 M | 30.37 M | 90.52 M | 2.62 M |\n")
    pub = published_m0(text)
    assert pub["kws_ref_model"] == {"cycles": 30_370_000, "by": "Bosch, v1.2"}
    assert pub["ad01_int8"]["cycles"] == 2_620_000 and pub["pretrainedResnet_quant"]["cycles"] == 97_410_000
    md = m0_table([{"stem": "kws_ref_model", "m0_result": "match", "m0_instructions": 17_366_875,
                    "m0_published_cycles": 30_370_000, "m0_published_by": "Bosch, v1.2",
                    "m0_instr_vs_published_cycles": 0.572},
                   {"stem": "ad01_int8", "m0_result": "does not fit"}])
    assert "| kws_ref_model | match | 17,366,875 | 30,370,000 (Bosch, v1.2) | 0.572 |" in md
    assert "| ad01_int8 | does not fit | — | — | — |" in md


def test_cortex_m0plus_timing_table():
    """Cortex-M0+ TRM (DDI 0484C) Table 3-1 on hand-picked instructions, memory stalls on top."""
    import capstone.arm_const as A

    from stm32ai.estimate.core_m0plus import CortexM0Plus
    from stm32ai.estimate.isa import Cls, Insn
    from stm32ai.estimate.model import Access, Step

    def ins(m, cls, **kw):
        return Insn(addr=kw.pop("addr", 0x100), size=2, mnemonic=m, op_str=kw.pop("ops", ""), cls=cls,
                    reads=frozenset(), writes=frozenset(kw.pop("writes", ())), **kw)

    core = CortexM0Plus()
    assert core.cycles(Step(ins("muls", Cls.MUL))) == 1                 # single-cycle multiplier
    assert core.cycles(Step(ins("ldrsh", Cls.LOAD, addr=0x102, transfers=1))) == 2
    assert core.cycles(Step(ins("str", Cls.STORE, addr=0x104, transfers=1),
                            accesses=[Access(0x20000000, 4, True, stall=1)])) == 3   # no store buffer
    assert core.cycles(Step(ins("push", Cls.STORE_MULTIPLE, addr=0x106, transfers=4))) == 5
    assert core.cycles(Step(ins("pop", Cls.LOAD_MULTIPLE, addr=0x108, transfers=4,
                                writes=("r4", "pc"), writes_pc=True), taken=True)) == 7
    bne = ins("b", Cls.BRANCH, addr=0x10A, cond=A.ARM_CC_NE)
    assert core.cycles(Step(bne, taken=True)) == 2 and core.cycles(Step(bne, taken=False)) == 1
    assert core.cycles(Step(ins("bl", Cls.BRANCH, addr=0x10C), taken=True, fetch_stall=2)) == 5
    assert core.cycles(Step(ins("add", Cls.ALU, addr=0x10E, writes=("pc",), writes_pc=True))) == 2
