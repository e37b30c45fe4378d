"""disco-l475-iot01 on QEMU's b-l475e-iot01a (QEMU >= 9): the unchanged board firmware of a real
MLPerf Tiny model (AD autoencoder) runs its demo and serves the UART validation protocol.

One firmware is generated and built per session; `stm32ai run` and `validate --mode target
--port` both use it. The expected output comes from TFLite Micro (`generate`'s reference)."""

import json
import re
import shutil
import subprocess

import pytest

from stm32ai.boards import load_board
from tests.conftest import shared_model

BOARD = "disco-l475-iot01"


def _has_machine() -> bool:
    if not all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm")):
        return False
    out = subprocess.run(["qemu-system-arm", "-M", "help"], capture_output=True, text=True).stdout
    return any(ln.split()[:1] == ["b-l475e-iot01a"] for ln in out.splitlines())


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not _has_machine(), reason="qemu-system-arm lacks machine b-l475e-iot01a "
                                 "(QEMU >= 9: scripts/setup.sh installs it from Debian backports)")]


@pytest.fixture(scope="session")
def l475_project(tmp_path_factory):
    from stm32ai.cli import main
    from stm32ai.project.run import build_project

    model = shared_model("mlperf_tiny/ad01_int8.tflite")
    out = tmp_path_factory.mktemp("l475") / "ad01"
    assert main(["generate", str(model), "--board", BOARD, "-o", str(out)]) == 0
    build_project(out)
    return model, out


def test_board_file_names_the_machine():
    b = load_board(BOARD)
    assert b.qemu_machine == "b-l475e-iot01a" and b.emulation.firmware == "hardware"
    assert not b.is_emulated           # a real board: its firmware is the hardware firmware


def test_demo_runs_and_reports_its_real_clock(l475_project, capsys):
    from stm32ai.project.run import run_project_cli

    _, proj = l475_project
    assert run_project_cli(proj, timeout_s=120) == 0
    cap = capsys.readouterr()
    assert "result: match" in cap.out
    # QEMU models the RCC (the PLL locks) but not the flash interface: the FLASH_ACR read-back
    # that RM0351 §3.3.3 asks for fails, so the bring-up keeps MSI 4 MHz and says why.
    assert "clock: fallback msi 4000000 (flash latency not accepted)" in cap.out
    assert "sysclk_hz: 4000000" in cap.out
    m = re.search(r"runs at 4 MHz .*instructions: ([\d,]+) ", cap.err)
    assert m, cap.err
    ticks = int(re.search(r"^cycles: (\d+)$", cap.out, re.M).group(1))
    assert int(m.group(1).replace(",", "")) == ticks * 250       # 1 ns per instruction, 4 MHz SysTick


def test_validate_target_board_on_qemu(tmp_path, capsys):
    """`stm32ai validate --mode target --board disco-l475-iot01`: the validation firmware is built
    and run on b-l475e-iot01a; SysTick ticks come back as instructions at the clock it reached."""
    from stm32ai.cli import main

    model = shared_model("mlperf_tiny/ad01_int8.tflite")
    report = tmp_path / "v.json"
    code = main(["validate", str(model), "--mode", "target", "--board", BOARD, "-n", "2",
                 "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "result: match" in out and "resolution 250 instructions" in out
    doc = json.loads(report.read_text())
    assert doc["passed"] and doc["target"]["board"] == BOARD and not doc["target"]["emulated"]
    assert doc["target"]["cpu_hz"] == 4_000_000 and doc["target"]["unit"] == "instructions"
    counts = doc["target"]["instructions"]
    assert len(counts) == 2 and all(c % 250 == 0 and 300_000 < c < 400_000 for c in counts)
