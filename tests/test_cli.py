"""Bad input gets one clear line and exit 2, never a traceback, never partial output."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES

MODEL = FIXTURES / "conv_odd_same_int8.tflite"


def stm32ai(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stm32ai", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def assert_one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_missing_model(tmp_path):
    r = stm32ai("generate", str(tmp_path / "nope.tflite"), "--c-only", "-o", str(tmp_path / "out"))
    assert_one_line_error(r, "not found")
    assert not (tmp_path / "out").exists()


def test_not_a_tflite_file(tmp_path):
    bad = tmp_path / "model.tflite"
    bad.write_text("hello, this is not a flatbuffer\n")
    r = stm32ai("analyze", str(bad))
    assert_one_line_error(r, "model.tflite")


def test_truncated_model(tmp_path):
    bad = tmp_path / "cut.tflite"
    bad.write_bytes(MODEL.read_bytes()[:300])
    r = stm32ai("generate", str(bad), "--c-only", "-o", str(tmp_path / "out"))
    assert_one_line_error(r, "cut.tflite")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["1net", "my-net", "ai_net", "a b"])
def test_name_must_be_a_c_identifier(tmp_path, name):
    r = stm32ai("generate", str(MODEL), "--c-only", "--name", name, "-o", str(tmp_path / "out"))
    assert_one_line_error(r, "--name")
    assert not (tmp_path / "out").exists()


def test_existing_output_dir_needs_force(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = stm32ai("generate", str(MODEL), "--c-only", "-o", str(out))
    assert_one_line_error(r, "--force")
    assert (out / "keep.txt").read_text() == "mine"
    r = stm32ai("generate", str(MODEL), "--c-only", "-o", str(out), "--force")
    assert r.returncode == 0, r.stderr
    assert not (out / "keep.txt").exists()
    assert {"network.c", "network.h", "network_data.c", "network_data.h", "graph.json",
            "params.npz"} <= {p.name for p in out.iterdir()}
    assert (out / "runtime" / "include" / "ai_runtime.h").exists()


def test_leaves_no_temp_dirs(tmp_path):
    r = stm32ai("generate", str(MODEL), "--c-only", "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_analyze_json_totals(tmp_path):
    import json

    r = stm32ai("analyze", str(MODEL), "--json", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["macc"] == sum(layer["macc"] for layer in rep["layers"]) > 0
    assert rep["activations_bytes"] > 0 and rep["weights_bytes"] > 0


def test_analyze_shows_the_optimization_choice(tmp_path):
    """--optimization ram keeps int8 conv weights, time switches every conv layer to int16
    (twice the weights bytes); analyze prints the choice per layer."""
    import json

    out = {}
    for mode in ("ram", "time"):
        r = stm32ai("analyze", str(MODEL), "--optimization", mode, "--json", str(tmp_path / f"{mode}.json"))
        assert r.returncode == 0, r.stderr
        out[mode] = (r.stdout, json.loads((tmp_path / f"{mode}.json").read_text())["weights_bytes"])
    assert "optimization ram: 0 of 1 conv layers with int16 weights (+0 B" in out["ram"][0]
    assert "optimization time: 1 of 1 conv layers with int16 weights" in out["time"][0]
    assert "int16 weights" in out["time"][0] and out["time"][1] > out["ram"][1]
