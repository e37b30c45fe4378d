"""Honest emulator numbers and per-layer profiling (issue 9 items 8, 9).

Fast: the demo-output parser, the board's tick -> instruction conversion, the PROFILE reply codec,
the benchmark's baseline parsing and tables, the generated hook (host build with -DAI_PROFILE).
Slow: a fixture generated with --profile runs in QEMU; its per-layer counts are one per kernel
node of graph.json, positive, and add up (within the profiling overhead) to the instruction count
of the *un-profiled* firmware, an independent measurement; `validate --mode target --profile`
returns the same layers over the UART protocol.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES

from bench.__main__ import add_ratios, baselines, estimate_table, layer_table, published_per_board
from stm32ai.boards import load_board
from stm32ai.errors import Stm32aiError
from stm32ai.project.demo_output import Layer, format_layers, parse_demo_output, parse_layer
from stm32ai.validate.protocol import DeviceInfo, Frame, MsgType, parse_profile_reply

MODEL = FIXTURES / "classifier_softmax_int8.tflite"
HAVE_QEMU = all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm"))


# ---------------------------------------------------------------------------------------------
# Parsing and formatting
# ---------------------------------------------------------------------------------------------
EMULATED_OUT = """stm32ai: 0.1.0
board: qemu-netduinoplus2
cycle_counter: systick
result: match
max_err: 0
instructions: 33280
profile_unit: instructions
profile_layers: 2
layer: 5 conv2d_s8 24595
layer: 13 softmax_s8 4077
layer: 7 bad kernel name 3
profile_total: 28672
done: 1
"""


def test_parse_emulated_output_with_layers():
    out = parse_demo_output(EMULATED_OUT)
    assert out.result == "match" and out.count == 33280 and out.unit == "instructions"
    assert out.ms is None and out.profile_total == 28672
    assert out.layers == [Layer(5, "conv2d_s8", 24595), Layer(13, "softmax_s8", 4077)]   # malformed skipped
    assert parse_layer("12 fully_connected_s8 1440") == Layer(12, "fully_connected_s8", 1440)
    assert parse_layer("12 fully connected 1440") is None and parse_layer("x conv 1") is None


def test_parse_hardware_output_and_legacy_emulated_cycles():
    hw = parse_demo_output("result: match\r\ncycle_counter: dwt\r\ncycles: 5180000\r\nms: 43.166\r\n")
    assert (hw.count, hw.unit, hw.ms) == (5180000, "cycles", 43.166)
    # firmware from before the change printed SysTick ticks as "cycles" on QEMU: 168 ticks at
    # 168 MHz with -icount shift=0 are 1000 ns of virtual time = 1000 instructions
    old = "cycle_counter: systick\ncycles: 168\n"
    assert parse_demo_output(old, legacy_board=load_board("qemu-netduinoplus2")).count == 1000
    assert parse_demo_output(old, legacy_board=load_board("qemu-netduinoplus2")).unit == "instructions"
    assert parse_demo_output(old).unit == "cycles"       # no board given: left as printed


def test_format_layers_shares():
    lines = format_layers([Layer(1, "conv2d_s8", 750), Layer(2, "softmax_s8", 250)], "instructions")
    assert "instructions" in lines[0] and len(lines) == 3
    assert lines[1].split()[:3] == ["1", "conv2d_s8", "750"] and lines[1].endswith("75.0%")
    assert lines[2].endswith("25.0%")


def test_board_counter_relation():
    nd, mps = load_board("qemu-netduinoplus2"), load_board("qemu-mps2-an386")
    assert nd.emulation.icount_shift == 0 and nd.emulation.ns_per_instruction == 1
    assert nd.emulation.ticks_to_instructions(168_000) == 1_000_000       # 168 MHz, 1 ns/instr
    assert mps.emulation.ticks_to_instructions(25) == 1000                 # 25 MHz
    assert nd.summary()["counter_unit"] == "instructions"
    assert load_board("nucleo-f746zg").summary()["counter_unit"] == "cycles"


def test_board_icount_shift_is_checked(tmp_path):
    src = (Path(load_board("qemu-netduinoplus2").path)).read_text()
    f = tmp_path / "b.yaml"
    f.write_text(src.replace("icount_shift: 0", "icount_shift: 2"))
    b = load_board(f)
    assert b.emulation.ns_per_instruction == 4 and b.emulation.ticks_to_instructions(672) == 1000
    f.write_text(src.replace("icount_shift: 0", "icount_shift: 11"))
    with pytest.raises(Stm32aiError, match="icount_shift"):
        load_board(f)


def test_profile_reply_codec():
    payload = struct.pack("<I", 2) + struct.pack("<HHQ", 5, 0, 24595) + struct.pack("<HHQ", 13, 0, 1 << 40)
    assert parse_profile_reply(Frame(1, MsgType.PROFILE | MsgType.REPLY, 1, payload)) == [(5, 24595), (13, 1 << 40)]
    for bad in (b"", struct.pack("<I", 3) + payload[4:]):
        with pytest.raises(ValueError):
            parse_profile_reply(Frame(1, 0x84, 1, bad))
    info = DeviceInfo(1, 0, 168_000_000, 64, 0x06, "m", "b", "t", [], [])
    assert info.profile and info.emulated and info.unit == "instructions"
    assert not DeviceInfo(1, 0, 1, 64, 0x01, "m", "b", "t", [], []).profile
    assert DeviceInfo(1, 0, 1, 64, 0x01, "m", "b", "t", [], []).unit == "cycles"


def test_bench_baselines_and_ratios():
    text = """| model | MACs | a | b | c | d | e |
|---|---|---|---|---|---|---|
| mlperf_tiny/kws_ref_model | 2,656,768 | 7,697,393 | 2.90 | 43,112,583 | 22,820 | 55,270 B |

| model | best | cycles | ram | flash |
|---|---|---|---|---|
| KWS DS-CNN | X-CUBE-AI 9.0: 43.2 ms | 5.18 M | 22,272 B | 24,368 B |
| AD FC autoencoder | Plumerai: 4.05 ms | 0.49 M | 2,048 B | 270,880 B |
"""
    b = baselines(text)
    assert b["kws_ref_model"]["cmsis_instructions"] == 7_697_393
    assert b["kws_ref_model"]["published_cycles"] == 5_180_000
    assert b["kws_ref_model"]["published_by"] == "X-CUBE-AI 9.0"
    assert b["ad01_int8"] == {"published_cycles": 490_000, "published_by": "Plumerai", "xcube_ram": 2_048}
    assert b["kws_ref_model"]["xcube_ram"] == 22_272
    row: dict = {"macc": 1}
    add_ratios(row, 3_885_000, b["kws_ref_model"])
    assert row["instr_vs_published_cycles"] == 0.75 and row["instr_vs_tflm_cmsis"] == round(3_885_000 / 7_697_393, 3)
    assert row["macs_per_instruction"] == round(2_656_768 / 3_885_000, 3)


def test_bench_layer_table():
    r = {"model": "m.tflite", "profile_total": 1000, "layers": [
        {"node": 3, "kernel": "conv2d_s8", "source_op": "CONV_2D", "source_index": 0, "in_shapes": [[1, 4, 4, 3]],
         "out_shapes": [[1, 4, 4, 8]], "macc": 500, "instructions": 900, "instr_per_mac": 1.8, "share": 0.9},
        {"node": 4, "kernel": "softmax_s8", "source_op": "SOFTMAX", "in_shapes": [[1, 8]],
         "out_shapes": [[1, 8]], "macc": 0, "instructions": 100, "instr_per_mac": None, "share": 0.1}]}
    md = layer_table(r)
    assert "| 3 | conv2d_s8 | CONV_2D (#0) | 1x4x4x3 | 1x4x4x8 | 500 | 900 | 1.80 | 90.0 % |" in md
    assert "| 4 | softmax_s8 | SOFTMAX | 1x8 | 1x8 | 0 | 100 | — | 10.0 % |" in md


@pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")
def test_profile_hook_host_build(tmp_path):
    # The generated model with -DAI_PROFILE, warning-free on the host compiler; the hook records
    # one count per kernel call, and the chained timestamps add up to the whole run.
    from stm32ai.emitter import emit_c
    from stm32ai.pipeline import compile_model

    c = compile_model(MODEL, "net")
    emit_c(c.doc, c.params, "net", tmp_path)
    src = (tmp_path / "net.c").read_text()
    kernels = [n for n in c.doc["nodes"] if n["op"] == "tvm_op" and n["attrs"]["func_name"] != "__nop"]
    assert src.count("AI_PROF_MARK(") == len(kernels) + 2        # one per call + the two macros
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "ai_runtime.h"\n#include "net.h"\n'
        "static uint64_t t;\nuint64_t ai_profile_clock(void) { return t += 10u; }\n"
        "int main(void) {\n  ai_handle h = NULL;\n"
        "  if (ai_create(&net_info, NULL, &h) != AI_OK || ai_run(h) != AI_OK) return 1;\n"
        "  for (int k = 0; k < AI_NET_PROFILE_N; k++)\n"
        '    printf("%u %s %llu\\n", (unsigned)net_profile_nodes[k], net_profile_kernels[k],\n'
        "           (unsigned long long)net_profile_counts[k]);\n  return 0;\n}\n")
    rt = tmp_path / "runtime"
    exe = tmp_path / "t"
    r = subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-DAI_PROFILE", f"-I{tmp_path}",
                        f"-I{rt / 'include'}", str(tmp_path / "main.c"), str(tmp_path / "net.c"),
                        str(tmp_path / "net_data.c"), *map(str, (rt / "src").glob("*.c")), "-o", str(exe),
                        "-lm"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = [ln.split() for ln in subprocess.run([str(exe)], capture_output=True, text=True).stdout.splitlines()]
    assert [(int(a), k) for a, k, _ in got] == [(c.doc["nodes"].index(n), n["attrs"]["func_name"]) for n in kernels]
    assert all(int(n) == 10 for _, _, n in got)      # each call sees exactly one clock step


# ---------------------------------------------------------------------------------------------
# In QEMU
# ---------------------------------------------------------------------------------------------
def _generate_and_run(tmp: Path, name: str, *extra: str) -> tuple[Path, object]:
    from stm32ai.cli import main
    from stm32ai.project.run import build_project, run_qemu

    out = tmp / name
    assert main(["generate", str(MODEL), "--board", "qemu-netduinoplus2", "-o", str(out), *extra]) == 0
    board = load_board("qemu-netduinoplus2")
    code, text = run_qemu(build_project(out), board, timeout_s=120)
    assert code == 0, text
    return out, parse_demo_output(text)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if not HAVE_QEMU:
        pytest.skip("arm-none-eabi-gcc/make/qemu-system-arm not installed")
    pytest.importorskip("tflite_micro")
    tmp = tmp_path_factory.mktemp("prof")
    return _generate_and_run(tmp, "plain"), _generate_and_run(tmp, "prof", "--profile")


@pytest.mark.slow
def test_profiled_demo_layers_add_up(runs):
    (plain_dir, plain), (prof_dir, prof) = runs
    assert plain.result == prof.result == "match"
    assert plain.unit == prof.unit == "instructions" and "cycles" not in plain.fields and not plain.layers
    assert json.loads((prof_dir / "stm32ai_project.json").read_text())["profile"] is True
    doc = json.loads((prof_dir / "Model" / "artifact" / "graph.json").read_text())
    kernel_nodes = [(i, n["attrs"]["func_name"]) for i, n in enumerate(doc["nodes"])
                    if n["op"] == "tvm_op" and n["attrs"]["func_name"] != "__nop"]
    assert [(x.node, x.kernel) for x in prof.layers] == kernel_nodes       # one per node, in order
    assert all(x.count > 0 for x in prof.layers)
    total = sum(x.count for x in prof.layers)
    assert total == prof.profile_total
    # independent check: the un-profiled firmware's own count; the difference is the clock reads
    # (a few tens of instructions per layer) and the run's prologue/epilogue
    assert abs(total - plain.count) <= 60 * len(prof.layers) + 100, (total, plain.count)
    assert prof.count >= plain.count        # the profiled headline carries the overhead


@pytest.mark.slow
def test_validate_target_reports_layers(runs, tmp_path, capsys):
    from stm32ai.cli import main

    _, (_, prof) = runs
    js = tmp_path / "v.json"
    assert main(["validate", str(MODEL), "--mode", "target", "--board", "qemu-netduinoplus2", "--profile",
                 "-n", "1", "--json", str(js)]) == 0
    t = json.loads(js.read_text())["target"]
    assert t["unit"] == "instructions" and len(t["instructions"]) == 1
    assert [(x["node"], x["kernel"]) for x in t["layers"]] == [(x.node, x.kernel) for x in prof.layers]
    assert all(x["mean"] > 0 for x in t["layers"])
    out = capsys.readouterr().out
    assert "per-layer instructions" in out and all(x.kernel in out for x in prof.layers)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="arm-none-eabi-gcc/make not installed")
def test_profile_builds_for_hardware_without_warnings(tmp_path):
    # DWT path (hardware board): -DAI_PROFILE compiles warning-free under -Werror
    pytest.importorskip("tflite_micro")
    from stm32ai.cli import main
    from stm32ai.project.run import build_project

    out = tmp_path / "hw"
    assert main(["generate", str(MODEL), "--board", "nucleo-f746zg", "-o", str(out), "--profile"]) == 0
    assert "-DAI_PROFILE=1" in (out / "Makefile").read_text()
    build_project(out)


@pytest.mark.slow
def test_run_prints_the_layer_table(runs, capsys):
    from stm32ai.cli import main

    (_, _), (prof_dir, prof) = runs
    assert main(["run", str(prof_dir)]) == 0
    cap = capsys.readouterr()
    assert "per-layer instructions" in cap.err and "instructions: " in cap.out
    top = max(prof.layers, key=lambda x: x.count)
    first = next(ln for ln in cap.err.splitlines() if ln.strip() and ln.split()[0].isdigit())
    assert first.split()[:2] == [str(top.node), top.kernel]          # largest share first


def test_monitor_prints_the_layer_table():
    import socket
    import threading
    from io import StringIO

    from rich.console import Console

    from stm32ai.project.monitor import monitor

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve() -> None:
        conn, _ = srv.accept()
        threading.Event().wait(0.3)   # pyserial's socket:// open flushes what is already there
        conn.sendall(EMULATED_OUT.replace("\n", "\r\n").encode())
        threading.Event().wait(0.5)
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    buf = StringIO()
    assert monitor(f"socket://127.0.0.1:{port}", timeout_s=10, out=Console(file=buf, width=120)) == 0
    srv.close()
    text = buf.getvalue()
    assert "instructions" in text and "33280" in text
    rows = [ln.split() for ln in text.splitlines() if ln.strip().startswith(("5 ", "13 "))]
    assert rows == [["5", "conv2d_s8", "24,595", "85.8%"], ["13", "softmax_s8", "4,077", "14.2%"]]


def test_validate_prints_counts_in_the_firmware_unit(capsys):
    from stm32ai.validate.target import _print_counts, _print_layers

    hw = DeviceInfo(1, 0, 216_000_000, 64, 0x01, "network", "nucleo-f746zg", "t", [], [])
    _print_counts(hw, [216_000, 216_000], icount=False)
    out = capsys.readouterr().out
    assert "cycles mean 216,000" in out and "= 1.000 ms at 216 MHz, dwt" in out
    emu = DeviceInfo(1, 0, 168_000_000, 64, 0x06, "network", "qemu-netduinoplus2", "t", [], [])
    _print_counts(emu, [33_280], icount=True)
    _print_layers(emu, [{"node": 5, "kernel": "conv2d_s8", "mean": 100}])
    out = capsys.readouterr().out
    assert "instructions mean 33,280" in out and "QEMU -icount" in out and " ms" not in out
    assert "cycles" not in out and "conv2d_s8" in out


def test_bench_published_per_board_and_estimate_table():
    text = """| board (core, MHz) | submitter, round | IC | KWS | VWW | AD |
|---|---|---|---|---|---|
| NUCLEO-L4R5ZI (M4, 120) | STMicroelectronics (X-CUBE-AI), v1.3 | 19.88 M | 5.21 M | 10.73 M | 0.58 M |
| NUCLEO-L4R5ZI (M4, 120) | STMicroelectronics (X-CUBE-AI 9.0), v1.2 | 19.82 M | 5.18 M | 10.67 M | 0.63 M |
| NUCLEO-L4R5ZI (M4, 120) | Plumerai, v1.1 | 20.13 M | 5.73 M | 11.85 M | 0.49 M |
| DISCO-F746NG (M7, 216) | Bosch, v1.2 | 13.51 M | 4.10 M | 12.37 M | 0.37 M (0.31 M "max performance") |
| NUCLEO-G0B1RE (M0+, 64) | Bosch, v1.2 | 97.41 M | 30.37 M | 90.52 M | 2.62 M |
"""
    p = published_per_board(text)
    assert set(p) == {"nucleo-l4r5zi", "disco-f746", "nucleo-g0b1re"}   # every board with an estimator model
    kws = p["nucleo-l4r5zi"]["kws_ref_model"]
    assert (kws["xcube_cycles"], kws["best_cycles"]) == (5_210_000, 5_180_000)      # ST's latest round first
    assert p["nucleo-l4r5zi"]["ad01_int8"]["best_by"] == "Plumerai, v1.1"
    assert p["disco-f746"]["ad01_int8"] == {"best_cycles": 370_000, "best_by": "Bosch, v1.2"}
    rows = [{"stem": "kws_ref_model", "estimates": [
        {"board": "nucleo-l4r5zi", **kws, "estimated_cycles": 7_000_000, "estimated_ms": 58.333, "cpi": 2.05,
         "flash_bytes_read": 2_752_630, "est_vs_xcube": 1.344, "est_vs_best": 1.351, "trace_s": 12.0,
         "model": "cortex-m4 + x", "uncertainty": 0.15}]}]
    md = estimate_table(rows)
    assert ("| kws_ref_model | nucleo-l4r5zi | 7,000,000 | 58.33 | 2.05 | 2,752,630 | 5,210,000 | 1.344 "
            "| 5,180,000 (STMicroelectronics (X-CUBE-AI 9.0), v1.2) | 1.351 | 12.0 |") in md
    assert estimate_table([{"stem": "x"}]) == ""
