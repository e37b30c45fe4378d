"""Cortex-M7 (issue 9 item 10): the same runtime and kernels built for -mcpu=cortex-m7
-mfpu=fpv5-d16 run an MLPerf Tiny model bit-exact on QEMU's mps2-an500. The demo compares the
firmware's output with the one TFLite Micro computed at generate time (an independent reference)
and reports instructions, as on every emulated board."""

from __future__ import annotations

import shutil

import pytest
from conftest import shared_model

from stm32ai.boards import load_board

HAVE_QEMU = all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm"))


# AD: the FC kernel; KWS: conv2d_s8 (int16 weights, 1x1 and first layer), the 3x3 depthwise
# kernel, average pool, softmax; ResNet-8: KxK convs and the ADD tables.
@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="arm-none-eabi-gcc/make/qemu-system-arm not installed")
@pytest.mark.parametrize("stem,macs", [("ad01_int8", 264_192), ("kws_ref_model", 2_656_768),
                                       ("pretrainedResnet_quant", 12_501_632)])
def test_mlperf_tiny_matches_on_emulated_cortex_m7(tmp_path, stem, macs):
    pytest.importorskip("tflite_micro")
    from stm32ai.cli import main
    from stm32ai.project.demo_output import parse_demo_output
    from stm32ai.project.run import build_project, run_qemu

    model = shared_model(f"mlperf_tiny/{stem}.tflite")
    board = load_board("qemu-mps2-an500")
    assert board.core == "cortex-m7" and "-mcpu=cortex-m7" in board.arch_flags
    out = tmp_path / "m7"
    assert main(["generate", str(model), "--board", board.id, "-o", str(out)]) == 0
    assert "-mcpu=cortex-m7" in (out / "Makefile").read_text()
    code, text = run_qemu(build_project(out), board, timeout_s=300)
    demo = parse_demo_output(text)
    assert code == 0 and demo.result == "match" and demo.fields["max_err"] == "0", text
    assert demo.fields["board"] == "qemu-mps2-an500" and demo.unit == "instructions"
    assert demo.count is not None and demo.count > macs // 2      # at most 2 MACs per instruction (SMLAD)
