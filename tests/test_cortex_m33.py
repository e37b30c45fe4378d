"""Cortex-M33 (issue 22): the runtime and kernels built for -mcpu=cortex-m33 (Armv8-M Mainline with
the DSP extension, FPv5-SP) run bit-exact on QEMU's mps2-an505 (the demo compares with the output
TFLite Micro computed at generate time; `validate --mode target` with TFLite Micro on the host),
and the STM32U5/H5 memory system of the cycle estimator (one ICACHE on the code bus)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import FIXTURES, shared_model, stm32ai_cli

from stm32ai.boards import load_board

HAVE_GCC = shutil.which("arm-none-eabi-gcc") is not None
HAVE_QEMU = HAVE_GCC and all(shutil.which(t) for t in ("make", "qemu-system-arm"))
AN505 = "qemu-mps2-an505"


@pytest.mark.skipif(not HAVE_GCC, reason="arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("bid", [AN505, "nucleo-u575zi-q", "nucleo-h563zi"])
def test_m33_flags_select_the_dsp_kernels(bid):
    """gcc's cortex-m33 has +dsp: __ARM_FEATURE_DSP (the SMLAD path's guard) is defined with the
    board's flags, and the FPU is the single-precision FPv5."""
    b = load_board(bid)
    assert b.arch_flags == ["-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"]
    r = subprocess.run(["arm-none-eabi-gcc", *b.arch_flags, "-dM", "-E", "-"], input="", capture_output=True,
                       text=True, check=True)
    macros = dict(ln.split(" ", 2)[1:] for ln in r.stdout.splitlines() if ln.count(" ") >= 2)
    assert macros.get("__ARM_FEATURE_DSP") == "1" and macros.get("__ARM_ARCH") == "8"
    assert macros.get("__ARM_ARCH_8M_MAIN__") == "1" and macros.get("__ARM_FP") == "4"


def test_code_bus_icache_serves_fetches_and_flash_data():
    """STM32U5: a flash line fetched as code is then a data hit (one ICACHE on the C-AHB), a miss
    costs the 4 wait states of 160 MHz, SRAM is zero-wait."""
    from stm32ai.estimate.memsys import CodeBusCacheMemory, build_memory_system

    b = load_board("nucleo-u575zi-q")
    m = build_memory_system(b)
    assert isinstance(m, CodeBusCacheMemory)
    assert m.read(0x08001000, 4) == 4          # cold: one 128-bit flash read
    assert m.read(0x08001008, 4) == 0          # same 16-byte line
    m.fetch(0x08002000, 2)
    assert m.read(0x08002004, 4) == 0          # fetched as code: the data read hits the shared ICACHE
    assert m.read(0x20000000, 4) == 0 and m.read(0x20040000, 4) == 0
    for i in range(513):                       # 8 KB of other lines evict the first (LRU)
        m.read(0x08100000 + 16 * i, 4)
    assert m.read(0x08001000, 4) == 4


def test_estimate_on_an_m33_board(tmp_path):
    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("make") is None:
        pytest.skip("no arm-none-eabi-gcc/make")
    r = stm32ai_cli("analyze", str(FIXTURES / "add_residual_int8.tflite"), "--board", "nucleo-u575zi-q",
                    "--weights-pool", "flash", "--estimate")
    assert r.returncode == 0, r.stderr
    kv = dict(ln.split(": ", 1) for ln in r.stdout.splitlines() if ": " in ln and not ln.startswith(" "))
    cycles, instr = int(kv["estimated_cycles"]), int(kv["instructions"])
    assert "cortex-m33 + stm32u575xi flash 4 WS + 8 KB ICACHE (fetch + data)" in kv["estimate_model"]
    assert float(kv["estimated_ms"]) == pytest.approx(cycles / 160e6 * 1e3, rel=1e-2)
    assert instr / 2 <= cycles      # the M33 dual-issues at most pairs of 16-bit instructions


# AD: the FC kernel; KWS: conv2d_s8 (1x1 and first layer), the 3x3 depthwise kernel, average
# pool, softmax.
@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="arm-none-eabi-gcc/make/qemu-system-arm not installed")
@pytest.mark.parametrize("stem,macs", [("ad01_int8", 264_192), ("kws_ref_model", 2_656_768)])
def test_mlperf_tiny_matches_on_emulated_cortex_m33(tmp_path, stem, macs):
    pytest.importorskip("tflite_micro")
    from stm32ai.cli import main
    from stm32ai.project.demo_output import parse_demo_output
    from stm32ai.project.run import build_project, run_qemu

    model = shared_model(f"mlperf_tiny/{stem}.tflite")
    board = load_board(AN505)
    out = tmp_path / "m33"
    assert main(["generate", str(model), "--board", board.id, "-o", str(out)]) == 0
    assert "-mcpu=cortex-m33" in (out / "Makefile").read_text()
    code, text = run_qemu(build_project(out), board, timeout_s=300)
    demo = parse_demo_output(text)
    assert code == 0 and demo.result == "match" and demo.fields["max_err"] == "0", text
    assert demo.fields["board"] == AN505 and demo.unit == "instructions"
    assert demo.count is not None and demo.count > macs // 2      # at most 2 MACs per instruction (SMLAD)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="arm-none-eabi-gcc/make/qemu-system-arm not installed")
def test_validate_target_on_emulated_cortex_m33(capsys):
    """`validate --mode target --board qemu-mps2-an505`: the validation firmware over the UART
    protocol (QEMU's CMSDK UART through a TCP socket), compared with TFLite Micro on the host."""
    pytest.importorskip("tflite_micro")
    from stm32ai.cli import main

    model = shared_model("mlperf_tiny/ad01_int8.tflite")
    code = main(["validate", str(model), "--mode", "target", "--board", AN505, "-n", "2", "--timeout", "120"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "result: match" in out and f"target: {AN505}" in out


def test_bench_m33_table_beside_the_published_u575_cycles():
    """bench's emulated-M33 table: instructions, X-CUBE-AI's and the best published NUCLEO-U575ZI-Q
    cycles (BASELINES.md's third table) with their ratios, and the estimated U575 cycles."""
    from bench.__main__ import M33_SILICON, m33_table, published_per_board

    text = """| board (core, MHz) | submitter, round | IC | KWS | VWW | AD |
|---|---|---|---|---|---|
| NUCLEO-U575ZI-Q (M33, 160) | STMicroelectronics (X-CUBE-AI), v1.3 | 17.52 M | 4.64 M | 9.48 M | 0.51 M |
| NUCLEO-U575ZI-Q (M33, 160) | Plumerai, v1.1 | 16.69 M | 4.81 M | 9.52 M | 0.59 M |
"""
    pub = published_per_board(text)[M33_SILICON]
    assert pub["pretrainedResnet_quant"] == {
        "xcube_cycles": 17_520_000, "xcube_by": "STMicroelectronics (X-CUBE-AI), v1.3",
        "best_cycles": 16_690_000, "best_by": "Plumerai, v1.1"}
    assert pub["ad01_int8"]["best_cycles"] == 510_000 and pub["kws_ref_model"]["best_cycles"] == 4_640_000
    row = {"stem": "kws_ref_model", "m33_result": "match", "m33_instructions": 3_403_550,
           "m33_published": {**pub["kws_ref_model"], "board": M33_SILICON}, "m33_instr_vs_xcube": 0.734,
           "m33_instr_vs_best": 0.734, "estimates": [{"board": M33_SILICON, "estimated_cycles": 5_033_563}]}
    md = m33_table([row])
    assert ("| kws_ref_model | match | 3,403,550 | 4,640,000 | 0.734 | 4,640,000 (STMicroelectronics (X-CUBE-AI), "
            "v1.3) | 0.734 | 5,033,563 |") in md
    assert "not cycles" in md and m33_table([{"stem": "x"}]) == ""
