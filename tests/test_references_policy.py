"""Dependency and reference policy (docs/references.md): TFLite Micro is a dependency, LiteRT the
`[litert]` extra; a reference the verdict needs but that is not installed gives one line with the
install command and exit 2; without any reference the demo still runs (`result: no-reference`).

"Not installed" is simulated in-process by hiding the package from the parent's import check
(`reference._installed`); tests/test_wheel.py checks the real thing in a fresh virtual environment.
"""

from __future__ import annotations

import socket
import threading
from io import StringIO
from pathlib import Path

import pytest
import tomllib
from conftest import FIXTURES, ROOT
from packaging.requirements import Requirement
from packaging.version import Version

import stm32ai.validate.reference as ref
from stm32ai import __version__
from stm32ai.cli import main
from stm32ai.validate.reference import (
    LITERT_REQUIREMENT,
    TFLM_REQUIREMENT,
    RefResult,
    missing_reference_error,
    random_inputs,
    reference_versions,
    references,
)

HYBRID = FIXTURES / "hybrid_fc_odd_relu_hybrid.tflite"   # TFLM refuses it: LiteRT-ref is the verdict
INT8 = FIXTURES / "conv_1x1_int8.tflite"
LITERT_INSTALL = "pip install 'stm32ai[litert]'"


def _hide(monkeypatch: pytest.MonkeyPatch, *kinds: str) -> None:
    real = ref._installed
    monkeypatch.setattr(ref, "_installed", lambda r: r.kind not in kinds and real(r))


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("stm32ai: error: "), err
    assert "Traceback" not in err
    return lines[0]


# ---------------------------------------------------------------------------------------------
# Packaging metadata
# ---------------------------------------------------------------------------------------------
def test_pyproject_declares_the_reference_policy():
    proj = _pyproject()["project"]
    assert TFLM_REQUIREMENT in proj["dependencies"]
    assert not any(d.startswith("ai-edge-litert") for d in proj["dependencies"])
    extras = proj["optional-dependencies"]
    assert extras["litert"] == [LITERT_REQUIREMENT]
    assert "stm32ai[litert]" in extras["test"]
    assert proj["version"] == __version__


def test_installed_references_are_inside_the_pins():
    # The suite's expected results come from these installs: the pins must admit them.
    versions = reference_versions()
    for kind, req in (("tflm", TFLM_REQUIREMENT), ("litert-ref", LITERT_REQUIREMENT)):
        if versions[kind] is None:
            pytest.skip(f"{kind} not installed")
        spec = Requirement(req).specifier
        assert spec.contains(Version(versions[kind]), prereleases=True), (kind, versions[kind], req)


def test_version_lists_the_references(monkeypatch, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"stm32ai {__version__}"
    vers = reference_versions()
    assert out[1].startswith(f"tflite-micro: {vers['tflm']} ")
    assert out[2].startswith(f"ai-edge-litert: {vers['litert-ref']} ")
    _hide(monkeypatch, "litert-ref")
    with pytest.raises(SystemExit):
        main(["--version"])
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith(f"ai-edge-litert: not installed ({LITERT_INSTALL})")


# ---------------------------------------------------------------------------------------------
# A reference the verdict needs is missing: one line naming the install command, exit 2
# ---------------------------------------------------------------------------------------------
def test_missing_litert_for_a_hybrid_model(monkeypatch):
    _hide(monkeypatch, "litert-ref")
    tflm, lite = references(HYBRID, random_inputs(HYBRID, 1, 0))
    assert not tflm.ok and not tflm.missing and not tflm.verdict       # refused, not missing
    assert lite.missing and lite.install == LITERT_INSTALL and not lite.verdict
    msg = missing_reference_error(HYBRID, [tflm, lite])
    assert msg is not None and "\n" not in msg and msg.endswith(LITERT_INSTALL)


def test_missing_litert_is_only_a_note_when_tflm_is_the_verdict(monkeypatch):
    _hide(monkeypatch, "litert-ref")
    tflm, lite = references(INT8, random_inputs(INT8, 1, 0))
    assert tflm.verdict and lite.missing
    assert missing_reference_error(INT8, [tflm, lite]) is None


def test_missing_tflm_leaves_no_verdict(monkeypatch):
    # LiteRT-ref in TFLM's place would change the expected results (ad01): install TFLM instead.
    _hide(monkeypatch, "tflm")
    tflm, lite = references(INT8, random_inputs(INT8, 1, 0))
    assert tflm.missing and lite.ok and not lite.verdict
    msg = missing_reference_error(INT8, [tflm, lite])
    assert msg is not None and f"pip install '{TFLM_REQUIREMENT}'" in msg


def test_generate_without_litert(monkeypatch, tmp_path, capsys):
    _hide(monkeypatch, "litert-ref")
    out = tmp_path / "proj"
    assert main(["generate", str(HYBRID), "--board", "qemu-netduinoplus2", "-o", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert LITERT_INSTALL in line and "--no-test-vector" in line
    assert not out.exists() and list(tmp_path.iterdir()) == []      # nothing half-written
    # --no-test-vector asks for a project without expected output: no reference needed
    assert main(["generate", str(HYBRID), "--board", "qemu-netduinoplus2", "-o", str(out),
                 "--no-test-vector"]) == 0
    assert "#define DEMO_HAS_EXPECTED 0" in (out / "Core" / "Inc" / "demo_data.h").read_text()
    data = (out / "Core" / "Src" / "demo_data.c").read_text()
    assert "s_expected_0" not in data and "{ NULL, " in data
    assert "result: no-reference" in (out / "README.md").read_text()


def test_validate_without_litert_says_so(monkeypatch, tmp_path, capsys):
    _hide(monkeypatch, "litert-ref")
    js = tmp_path / "v.json"
    assert main(["validate", str(HYBRID), "-n", "1", "--json", str(js)]) == 2
    cap = capsys.readouterr()
    assert "MISMATCH" not in cap.out and "result: no-reference" in cap.out
    assert LITERT_INSTALL in cap.out                                    # the table's row
    assert _one_error_line(cap.err).endswith(LITERT_INSTALL)
    import json

    doc = json.loads(js.read_text())
    assert doc["result"] == "no-reference" and not doc["passed"]
    assert doc["references"][1]["install"] == LITERT_INSTALL


def test_validate_notes_a_missing_cross_check(monkeypatch, capsys):
    _hide(monkeypatch, "litert-ref")
    assert main(["validate", str(INT8), "-n", "1"]) == 0
    out = capsys.readouterr().out
    assert "result: match" in out and f"not installed: {LITERT_INSTALL}" in out


# ---------------------------------------------------------------------------------------------
# Every installed reference refuses the model: no dead end
# ---------------------------------------------------------------------------------------------
def _refusing(model, inputs, **kw):
    return [RefResult("tflm", unavailable="TFLM: refused (test)"),
            RefResult("litert-ref", unavailable="LiteRT-ref: refused (test)")]


def test_validate_when_every_reference_refuses(monkeypatch, capsys):
    monkeypatch.setattr("stm32ai.validate.run.references", _refusing)
    assert main(["validate", str(INT8), "-n", "1"]) == 2
    cap = capsys.readouterr()
    assert "MISMATCH" not in cap.out and "result: no-reference" in cap.out
    line = _one_error_line(cap.err)
    assert "no reference runs this model" in line and "TFLM: refused (test)" in line


def test_generate_when_every_reference_refuses(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(ref, "references", _refusing)
    out = tmp_path / "proj"
    assert main(["generate", str(INT8), "--board", "nucleo-f401re", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning: no reference runs this model" in err and "result: no-reference" in err
    assert "#define DEMO_HAS_EXPECTED 0" in (out / "Core" / "Inc" / "demo_data.h").read_text()


def _serve(lines: bytes) -> tuple[socket.socket, str]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve() -> None:
        conn, _ = srv.accept()
        threading.Event().wait(0.3)   # pyserial's socket:// open flushes what is already there
        conn.sendall(lines)
        threading.Event().wait(0.5)
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, f"socket://127.0.0.1:{srv.getsockname()[1]}"


def test_monitor_accepts_no_reference():
    from rich.console import Console

    from stm32ai.project.monitor import monitor

    srv, url = _serve(b"model: m\r\nexpected_output: none (generated without a reference)\r\n"
                      b"result: no-reference\r\ninstructions: 30\r\ndone: 1\r\n")
    buf = StringIO()
    try:
        assert monitor(url, timeout_s=10, out=Console(file=buf, width=100)) == 0
    finally:
        srv.close()
    assert "no-reference" in buf.getvalue()


# ---------------------------------------------------------------------------------------------
# The demo without expected output, built and run on the emulated board
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_no_test_vector_demo_runs(tmp_path, capsys):
    import shutil

    if not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm not installed")
    out = tmp_path / "proj"
    assert main(["generate", str(HYBRID), "--board", "qemu-netduinoplus2", "-o", str(out),
                 "--no-test-vector"]) == 0
    capsys.readouterr()
    assert main(["run", str(out)]) == 0          # nothing to check is not a failure
    cap = capsys.readouterr()
    kv = dict(ln.split(": ", 1) for ln in cap.out.splitlines() if ": " in ln)
    assert kv["result"] == "no-reference" and "max_err" not in kv
    assert kv["expected_output"].startswith("none") and kv["done"] == "1"
    assert int(kv["instructions"]) > 0 and int(kv["activations_bytes"]) > 0 and int(kv["stack_used"]) > 0
    assert "nothing was checked" in cap.err


def test_docs_name_the_policy():
    text = (ROOT / "docs" / "references.md").read_text()
    for needle in (TFLM_REQUIREMENT, LITERT_REQUIREMENT, LITERT_INSTALL, "no-reference", "--no-test-vector"):
        assert needle in text, needle
    assert Path(ROOT / "README.md").read_text().count(LITERT_INSTALL) >= 1
