"""Several models in one firmware (issue 13 items 1-3 and 6): `generate a.tflite b.tflite`,
shared or separate activation pools, the descriptor table and generic demo, the validation
protocol addressing one model, and the typed `stm32ai.project` API.

The slow tests build one firmware per pool mode (two small fixtures) and run it in QEMU: each
model's demo verdict compares with the TFLite Micro output embedded at generate time, and
`validate --mode target --model` compares the device's outputs with TFLite Micro on the host."""

from __future__ import annotations

import ast
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES

from stm32ai.cli import main, model_names
from stm32ai.project.demo_output import parse_demo_output
from stm32ai.sanitize import c_identifier
from stm32ai.validate.protocol import FLAG_MODELS, Frame, parse_hello

ROOT = Path(__file__).resolve().parents[1]
A = FIXTURES / "conv_1x1_int8.tflite"      # input 1x6x6x8 int8
B = FIXTURES / "act_relu_int8.tflite"
BOARD = "qemu-netduinoplus2"
HAVE_QEMU = all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm"))


def _one_error_line(err: str, *words: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("test vector")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], lines[0]


def _activations(model: Path) -> int:
    """The model's pool as compiled for BOARD alone (its core picks the kernels, and so the scratch)."""
    from stm32ai.pipeline import compile_for_board
    from stm32ai.report import build_report

    return build_report(compile_for_board(model, "x", BOARD)).activations_bytes


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------
def test_c_identifier_from_file_names():
    assert c_identifier("kws_ref_model") == "kws_ref_model"
    assert c_identifier("vww-96 int8.v2") == "vww_96_int8_v2"
    assert c_identifier("96x96") == "m_96x96"
    assert c_identifier("ÿ--..") == "model"            # nothing usable left: the fallback
    assert c_identifier("a" * 60, limit=10) == "a" * 10


def test_default_names_are_sanitized_and_disambiguated():
    assert model_names(None, ["x/kws.tflite"]) == ["network"]          # one model: unchanged default
    assert model_names(None, ["x/kws.tflite", "y/kws.tflite", "vww-96.tflite"]) == ["kws", "kws_2", "vww_96"]
    assert model_names(None, ["main.tflite", "ai_net.tflite"]) == ["m_main", "m_ai_net"]   # reserved names
    assert model_names("a,b", ["1.tflite", "2.tflite"]) == ["a", "b"]


@pytest.mark.parametrize("names,words", [("a", ["1 name(s) for 2 model(s)"]), ("a,a", ["given twice"]),
                                         ("a,ai_x", ["reserved"])])
def test_bad_name_lists_exit_2(tmp_path, capsys, names, words):
    out = tmp_path / "p"
    assert main(["generate", str(A), str(B), "--board", BOARD, "--name", names, "-o", str(out)]) == 2
    _one_error_line(capsys.readouterr().err, *words)
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# Pools: max vs sum, in analyze and in the fits check
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shared", [True, False])
def test_analyze_reports_max_or_sum(tmp_path, capsys, shared):
    a, b = _activations(A), _activations(B)
    want = max(a, b) if shared else sum((x + 7) // 8 * 8 for x in (a, b))
    js = tmp_path / "r.json"
    args = ["analyze", str(A), str(B), "--board", BOARD, "--json", str(js)]
    assert main(args + (["--shared-activations"] if shared else [])) == 0
    out = capsys.readouterr().out
    assert f"activations: {want:,} B for 2 models" in out and f"fits {BOARD}: yes" in out
    doc = json.loads(js.read_text())
    assert doc["activations_bytes"] == want and [m["name"] for m in doc["models"]] == ["conv_1x1_int8",
                                                                                       "act_relu_int8"]
    assert doc["fits"]["activation_pools"][0]["bytes"] == want


def test_fits_check_counts_the_sum_of_separate_pools(tmp_path, capsys):
    a, b = _activations(A), _activations(B)
    cap = f"sram:{max(a, b) + 8}"      # room for the largest model, not for both
    out = tmp_path / "p"
    base = ["generate", str(A), str(B), "--board", BOARD, "--activations-pool", cap, "-o", str(out)]
    assert main(base) == 2
    _one_error_line(capsys.readouterr().err, "do not fit", "sum over the models")
    assert not out.exists()
    assert main(["analyze", str(A), str(B), "--board", BOARD, "--activations-pool", cap,
                 "--shared-activations"]) == 0
    assert "fits qemu-netduinoplus2: yes" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Generated files
# ---------------------------------------------------------------------------------------------
def test_shared_project_has_one_pool_and_a_descriptor_table(tmp_path):
    out = tmp_path / "p"
    assert main(["generate", str(A), str(B), "--board", BOARD, "--shared-activations", "-o", str(out),
                 "--name", "net_a,net_b"]) == 0
    model = out / "Model"
    table = (model / "ai_models.h").read_text()
    assert "#define AI_MODELS_COUNT 2u" in table and "#define AI_MODELS_SHARED_ACTIVATIONS 1" in table
    src = (model / "ai_models.c").read_text()
    assert f"ai_models_shared_activations[{max(_activations(A), _activations(B))}]" in src
    assert "{ &net_a_info, ai_models_shared_activations }" in src
    for n in ("net_a", "net_b"):   # no built-in pools: the shared one is the only activation array
        assert f"{n}_activations[" not in (model / f"{n}.c").read_text()
        assert (model / "artifact" / n / "graph.json").is_file()
    m = json.loads((out / "stm32ai_project.json").read_text())
    assert m["models"]["names"] == ["net_a", "net_b"] and m["models"]["shared_activations"] is True
    main_c = (out / "Core" / "Src" / "main.c").read_text()
    assert "net_a" not in main_c.split("*/", 1)[1]   # generic: only the comment names the models


def test_single_model_project_has_no_table(tmp_path):
    out = tmp_path / "p"
    assert main(["generate", str(A), "--board", BOARD, "-o", str(out)]) == 0
    assert not (out / "Model" / "ai_models.h").exists()
    assert '#include "network.h"' in (out / "Core" / "Src" / "main.c").read_text()
    assert "models" not in json.loads((out / "stm32ai_project.json").read_text())


# ---------------------------------------------------------------------------------------------
# Demo output and protocol codec (no device)
# ---------------------------------------------------------------------------------------------
MULTI_OUT = """stm32ai: 0.1.0\r
board: qemu-netduinoplus2\r
models: 2\r
model: kws\r
result: match\r
instructions: 100\r
model: vww\r
result: {second}\r
instructions: 200\r
models_failed: {failed}\r
done: 1\r
"""


def test_demo_output_sections_per_model():
    ok = parse_demo_output(MULTI_OUT.format(second="match", failed=0))
    assert [(m.name, m.result, m.count, m.unit) for m in ok.models] == [
        ("kws", "match", 100, "instructions"), ("vww", "match", 200, "instructions")]
    assert ok.all_passed
    bad = parse_demo_output(MULTI_OUT.format(second="mismatch", failed=1))
    assert not bad.all_passed and bad.models[0].result == "match"
    single = parse_demo_output("board: b\nmodel: network\nresult: match\ninstructions: 5\ndone: 1\n")
    assert single.all_passed and single.models[0].count == 5


def test_monitor_fails_when_any_model_fails():
    import socket
    import threading
    from io import StringIO

    from rich.console import Console

    from stm32ai.project.monitor import monitor

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():   # the first model fails, the last matches: the verdict is the failure
        conn, _ = srv.accept()
        threading.Event().wait(0.3)
        conn.sendall(MULTI_OUT.replace("result: match", "result: mismatch", 1)
                     .format(second="match", failed=1).encode())
        threading.Event().wait(0.5)
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    url = f"socket://127.0.0.1:{srv.getsockname()[1]}"
    assert monitor(url, timeout_s=10, out=Console(file=StringIO(), width=100)) == 1
    srv.close()


def _hello_payload(flags: int, extension: bytes) -> bytes:
    def s(x: bytes) -> bytes:
        return bytes([len(x)]) + x

    fixed = struct.pack("<IIIBBBB", 0x1234, 168_000_000, 64, 1, 1, flags, 0)
    tensor = struct.pack("<BBBBI", 0, 8, 1, 0, 4) + struct.pack("<I", 4)
    return fixed + s(b"vww") + s(b"qemu-netduinoplus2") + s(b"0.1.0") + tensor + tensor + extension


def test_hello_lists_the_models():
    ext = bytes([1, 2]) + b"\x03kws" + b"\x03vww"
    info = parse_hello(Frame(1, 0x81, 1, _hello_payload(FLAG_MODELS, ext)))
    assert info.models == ("kws", "vww") and info.model_index == 1 and info.model == "vww"
    old = parse_hello(Frame(1, 0x81, 1, _hello_payload(0, b"")))      # a single-model firmware
    assert old.models == () and old.model_index == 0
    with pytest.raises(ValueError):
        parse_hello(Frame(1, 0x81, 1, _hello_payload(FLAG_MODELS, bytes([2, 2]) + b"\x01a\x01b")))


def test_validate_model_needs_target_mode(capsys):
    assert main(["validate", str(A), "--model", "x"]) == 2
    _one_error_line(capsys.readouterr().err, "--model")
    assert main(["validate", str(A), "--mode", "target", "--board", BOARD, "--model", "x"]) == 2
    _one_error_line(capsys.readouterr().err, "--model", "--port")


# ---------------------------------------------------------------------------------------------
# Item 6: stm32ai.project takes typed arguments and never imports stm32ai.validate
# ---------------------------------------------------------------------------------------------
def _imports(path: Path) -> set[str]:
    mods = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module)
    return mods


def test_project_does_not_import_validate():
    files = sorted((ROOT / "stm32ai" / "project").glob("*.py"))
    assert len(files) > 5
    for f in files:   # every import, module-level or inside a function
        bad = [m for m in _imports(f) if m == "stm32ai.validate" or m.startswith("stm32ai.validate.")]
        assert not bad, f"{f.name} imports {bad}"
    code = ("import sys, stm32ai.project.build, stm32ai.project.generator, stm32ai.project.run; "
            "print(sorted(m for m in sys.modules if m.startswith('stm32ai.validate')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.strip() == "[]"


def test_generate_firmware_project_takes_typed_arguments(tmp_path, capsys):
    import numpy as np

    from stm32ai.boards import load_board
    from stm32ai.pipeline import compile_model
    from stm32ai.project.build import generate_firmware_project
    from stm32ai.project.spec import Pools, ProjectModel, TestVector

    models = []
    for name, path in (("one", A), ("two", B)):
        c = compile_model(path, name)
        x = [np.zeros(c.graph.tensors[t].shape, c.graph.tensors[t].dtype) for t in c.graph.inputs]
        models.append(ProjectModel(name, c, TestVector(x), path.name))   # no expected output
    out = tmp_path / "p"
    out.mkdir()
    generate_firmware_project(out, load_board(BOARD), models, Pools(shared=False))
    assert "one.h" in (out / "Model" / "ai_models.h").read_text()
    assert "no-reference" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# On the emulated board: one firmware per pool mode
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["shared", "separate"])
def firmware(request, tmp_path_factory):
    if not HAVE_QEMU:
        pytest.skip("arm-none-eabi-gcc/make/qemu-system-arm not installed")
    pytest.importorskip("tflite_micro")
    from stm32ai.project.run import build_project

    shared = request.param == "shared"
    out = tmp_path_factory.mktemp("multi") / request.param
    args = ["generate", str(A), str(B), "--board", BOARD, "--validation", "-o", str(out)]
    assert main(args + (["--shared-activations"] if shared else [])) == 0
    return shared, out, build_project(out)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="no arm-none-eabi-gcc/make/qemu")
def test_demo_runs_every_model(firmware, capsys):
    shared, out, elf = firmware
    assert main(["run", str(out), "--timeout", "120"]) == 0     # `stm32ai run`: every model matched
    cap = capsys.readouterr()
    text = cap.out
    assert "model conv_1x1_int8: match" in cap.err and "model act_relu_int8: match" in cap.err
    demo = parse_demo_output(text)
    assert demo.all_passed, text
    assert [m.name for m in demo.models] == ["conv_1x1_int8", "act_relu_int8"]
    a, b = _activations(A), _activations(B)
    want = max(a, b) if shared else (a + 7) // 8 * 8 + (b + 7) // 8 * 8
    assert demo.fields["activations_pools"] == ("shared" if shared else "separate")
    assert int(demo.fields["activations_total_bytes"]) == want
    # the linker's figure: the .nn_activations section holds exactly that
    sizes = subprocess.run(["arm-none-eabi-size", "-A", str(elf)], capture_output=True, text=True, check=True)
    section = next(int(ln.split()[1]) for ln in sizes.stdout.splitlines() if ln.startswith(".nn_activations"))
    assert section == (want + 7) // 8 * 8


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="no arm-none-eabi-gcc/make/qemu")
def test_one_failing_model_fails_the_firmware(firmware, tmp_path, capsys):
    import re

    shared, out, _ = firmware
    if shared:
        pytest.skip("one corrupted expected output is enough: checked on the separate-pools firmware")
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)   # copy2 keeps the times: make rebuilds demo_data.o only
    data = bad / "Core" / "Src" / "demo_data.c"
    text = data.read_text()
    m = re.search(r"s_m1_expected_0\[\d+\][^{]*\{\s*0x([0-9a-f]{2})", text)
    flipped = f"0x{int(m.group(1), 16) ^ 1:02x}"
    data.write_text(text[:m.start(1) - 2] + flipped + text[m.end(1):])
    assert main(["run", str(bad), "--timeout", "120"]) == 1
    cap = capsys.readouterr()
    assert "model conv_1x1_int8: match" in cap.err and "model act_relu_int8: mismatch" in cap.err
    assert "models_failed: 1" in cap.out


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="no arm-none-eabi-gcc/make/qemu")
def test_validate_target_model_by_name_and_index(firmware, capsys):
    from stm32ai.boards import load_board
    from stm32ai.project.run import qemu_serial_server

    shared, _, elf = firmware
    if not shared:
        pytest.skip("the protocol does not depend on the pool mode: checked on the shared firmware")
    with qemu_serial_server(elf, load_board(BOARD)) as url:
        for model, sel in ((B, "act_relu_int8"), (A, "0"), (B, "1")):
            assert main(["validate", str(model), "--mode", "target", "--port", url, "--model", sel,
                         "-n", "2", "--timeout", "60"]) == 0, capsys.readouterr().err
            out = capsys.readouterr().out
            assert "result: match" in out and "firmware on qemu-netduinoplus2" in out
        # no --model: the first model is addressed, and the signature check names the others
        assert main(["validate", str(B), "--mode", "target", "--port", url, "--timeout", "60"]) == 2
        _one_error_line(capsys.readouterr().err, "signature", "--model NAME picks one", "act_relu_int8")
        assert main(["validate", str(B), "--mode", "target", "--port", url, "--model", "nope",
                     "--timeout", "60"]) == 2
        _one_error_line(capsys.readouterr().err, "no such model", "1 'act_relu_int8'")


def test_hostile_file_names_become_identifiers(tmp_path):
    evil = tmp_path / 'x* "evil\\.tflite'
    evil.write_bytes(B.read_bytes())
    out = tmp_path / "p"
    assert main(["generate", str(A), str(evil), "--board", BOARD, "-o", str(out), "--no-test-vector"]) == 0
    names = json.loads((out / "stm32ai_project.json").read_text())["models"]["names"]
    assert names == ["conv_1x1_int8", "x_evil"]
    data = (out / "Core" / "Src" / "demo_data.c").read_text()
    assert '* "evil' not in data and "x_evil" in data   # the file name only ever appears escaped


TABLE_MAIN = r"""
#include <stdio.h>
#include "ai_models.h"
#include "ai_runtime.h"

/* Generic: every model of the table, created on the pool the table names, run in turn (twice
 * round, so each run follows another model's run in the shared pool) on inputs from stdin. */
int main(void) {
  ai_handle h[AI_MODELS_COUNT];
  for (uint32_t k = 0; k < AI_MODELS_COUNT; k++) {
    if (ai_create(ai_models[k].info, ai_models[k].activations, &h[k]) != AI_OK) return 2;
  }
  for (int round = 0; round < 2; round++) {
    for (uint32_t k = 0; k < AI_MODELS_COUNT; k++) {
      for (int i = 0; i < ai_get_input_size(h[k]); i++) {
        ai_tensor *t = ai_get_input(h[k], i);
        if (fread(t->data, 1, t->size_bytes, stdin) != t->size_bytes) return 3;
      }
      if (ai_run(h[k]) != AI_OK) return 4;
      for (int i = 0; i < ai_get_output_size(h[k]); i++) {
        ai_tensor *t = ai_get_output(h[k], i);
        fwrite(t->data, 1, t->size_bytes, stdout);
      }
    }
  }
  return 0;
}
"""


@pytest.mark.parametrize("shared", [True, False])
def test_c_only_table_runs_every_model_bit_exact(tmp_path, shared):
    """--c-only with several models: the descriptor table drives a generic host program; its
    outputs equal TFLite Micro's for every model, run in turn on the (shared) pool."""
    import numpy as np

    from stm32ai.validate.host import build_host
    from stm32ai.validate.reference import random_inputs, run_tflm

    pytest.importorskip("tflite_micro")
    d = tmp_path / "c"
    models = [A, B, A]     # the same file twice: conv_1x1_int8 and conv_1x1_int8_2
    assert main(["generate", *map(str, models), "--c-only", "-o", str(d)]
                + (["--shared-activations"] if shared else [])) == 0
    names = model_names(None, list(map(str, models)))
    assert names == ["conv_1x1_int8", "act_relu_int8", "conv_1x1_int8_2"]
    assert ("ai_models_shared_activations" in (d / "ai_models.c").read_text()) == shared
    prog = tmp_path / "main.c"
    prog.write_text(TABLE_MAIN)
    extra = [d / f for n in names[1:] for f in (f"{n}.c", f"{n}_data.c")] + [d / "ai_models.c", prog]
    exe = build_host(d, names[0], tmp_path / "prog", extra)
    xs = [random_inputs(m, 1, seed=10 + k) for k, m in enumerate(models * 2)]
    r = subprocess.run([str(exe)], input=b"".join(x.tobytes() for s in xs for x in s), capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    pos = 0
    for m, x in zip(models * 2, xs, strict=True):
        for e in run_tflm(m, x):
            got = np.frombuffer(r.stdout[pos:pos + e.nbytes], dtype=e.dtype).reshape(e.shape)
            np.testing.assert_array_equal(got, e)
            pos += e.nbytes
    assert pos == len(r.stdout)
