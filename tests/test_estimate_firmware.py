"""The estimator on real generated firmware: the trace follows the same instruction stream QEMU
counts for the demo's measured inference, per-layer figures add up, and `analyze --estimate`
keeps the CLI contract (estimated_cycles line, --json, one-line errors)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, assert_one_line_error, stm32ai_cli

from stm32ai.boards import load_board

MODEL = ROOT / "tests" / "fixtures" / "models" / "conv_odd_same_int8.tflite"
RESIDUAL = ROOT / "tests" / "fixtures" / "models" / "add_residual_int8.tflite"   # 3 CONV_2D + ADD
needs_toolchain = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="no arm-none-eabi-gcc")


@pytest.mark.slow
@needs_toolchain
@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="no qemu-system-arm")
def test_trace_follows_the_instructions_qemu_counts(tmp_path):
    """QEMU (-icount) counts the instructions between the demo's two cycles_now() reads around
    the measured ai_run; the trace runs the same ELF under unicorn and must see the same stream
    (QEMU's count also holds the two SysTick reads in cycles_now() and the calls around ai_run,
    about 70 instructions, and has a resolution of 6 instructions: 1 ns per instruction, ticks at
    168 MHz)."""
    from stm32ai.estimate.estimate import estimate_elf
    from stm32ai.project.demo_output import parse_demo_output
    from stm32ai.project.run import build_project, run_qemu

    board = load_board("qemu-netduinoplus2")
    proj = tmp_path / "p"
    r = stm32ai_cli("generate", str(MODEL), "--board", board.id, "-o", str(proj), "--no-test-vector")
    assert r.returncode == 0, r.stderr
    elf = build_project(proj)
    _, uart = run_qemu(elf, board, timeout_s=120.0)
    out = parse_demo_output(uart, legacy_board=board)
    assert out.unit == "instructions" and out.count, uart
    est = estimate_elf(elf, board, proj / "Model" / "network.c")
    assert 0 <= out.count - est.instructions <= 100, (est.instructions, out.count)
    assert sum(x.cycles for x in est.layers) == est.cycles
    assert sum(x.instructions for x in est.layers) == est.instructions
    assert est.cycles >= est.instructions          # a Cortex-M4 issues at most one instruction per cycle


@needs_toolchain
def test_analyze_estimate_cli(tmp_path):
    j = tmp_path / "r.json"
    # --weights-pool flash: balanced would copy this model's 2.5 KB of weights to RAM at boot
    # (docs/flash_staging.md "Weights in SRAM at boot"); here every weight byte is read from flash
    r = stm32ai_cli("analyze", str(RESIDUAL), "--board", "nucleo-l4r5zi", "--weights-pool", "flash", "--estimate",
                    "--json", str(j))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    n = int(next(ln for ln in lines if ln.startswith("estimated_cycles: ")).split()[1])
    assert any(ln.startswith("estimated_ms: ") for ln in lines)
    assert any("estimated on cortex-m4 + stm32l4r5xi flash 5 WS" in ln for ln in lines)
    doc = json.loads(j.read_text())
    est = doc["estimate"]
    assert est["estimated_cycles"] == n == sum(x["cycles"] for x in est["layers"])
    assert est["estimated_ms"] == pytest.approx(n / 120e6 * 1e3, rel=1e-3)
    # every weight byte is read from flash at least once
    assert est["flash_bytes_read"] >= doc["weights_bytes"] > 0
    assert est["flash_bytes_read"] == sum(x["flash_bytes"] for x in est["layers"])
    # the DWARF attribution finds each kernel call the compiler planned, in order (the report's
    # layers minus the aliases that emit no call)
    assert ([x["kernel"] for x in est["layers"] if x["node"] is not None]
            == [x["kernel"] for x in doc["layers"] if not x["kernel"].startswith("__")])
    ops = [x["op"] for x in est["layers"] if x["node"] is not None]
    assert ops == ["CONV_2D", "CONV_2D", "CONV_2D", "ADD"]
    conv = [x["cycles"] for x in est["layers"] if x["op"] == "CONV_2D"]
    assert conv[1] > conv[0] > conv[2]         # cycles follow the MACC (18,144 > 12,096 > 1,344)
    assert 0 < est["uncertainty"] < 1


def test_estimate_needs_a_board():
    assert_one_line_error(stm32ai_cli("analyze", str(MODEL), "--estimate"), "--estimate needs --board")


@needs_toolchain
def test_estimate_board_without_memory_system():
    assert_one_line_error(stm32ai_cli("analyze", str(MODEL), "--board", "qemu-mps2-an386", "--estimate"),
                          "qemu-mps2-an386", "memsys")


def test_estimate_without_toolchain(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}          # neither make nor arm-none-eabi-gcc
    r = subprocess.run([sys.executable, "-m", "stm32ai", "analyze", str(MODEL), "--board", "nucleo-l4r5zi",
                        "--estimate"], capture_output=True, text=True, env=env, timeout=600)
    assert_one_line_error(r, "not found")
