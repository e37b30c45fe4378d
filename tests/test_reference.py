"""The two references of docs/references.md (TFLM, LiteRT-ref) on the fixtures and the shared corpus."""

from __future__ import annotations

import subprocess
import sys
import tempfile

import numpy as np
import pytest
from conftest import FIXTURES, fixture_models, shared_model

from stm32ai.validate import reference as ref
from stm32ai.validate.metrics import compute_metrics, passes
from stm32ai.validate.reference import (
    ReferenceUnavailable,
    TensorSpec,
    input_specs,
    output_specs,
    random_inputs,
    references,
    run_litert_ref,
    run_tflm,
    tflm_arena_bytes,
)

# LiteRT-ref's int8 FULLY_CONNECTED rounds once where TFLM rounds twice (docs/references.md): outputs
# downstream of an FC may differ by a few LSB. Everything else must agree bit for bit.
FC_INT8 = {"dense", "dense_relu", "dense_flatten", "dense_per_tensor", "dense_dynamic_batch",
           "two_in_two_out", "classifier_softmax"}
TFLM_REFUSES = {"dense_dynamic_batch_infer"}  # RESHAPE output stored as [1, 1] by the converter


def _base(path) -> str:
    return path.stem.rsplit("_", 1)[0]


def test_fixture_set_is_small_and_complete():
    models = fixture_models()
    assert len(models) >= 50
    assert sum(p.stat().st_size for p in models) < 1_500_000
    assert all(p.stat().st_size < 100_000 for p in models)
    readme = (FIXTURES / "README.md").read_text()
    for base in {_base(p) for p in models}:
        assert f"`{base}`" in readme, f"{base} not documented in fixtures README"


# ---------------------------------------------------------------------------------------------
# I/O description and inputs
# ---------------------------------------------------------------------------------------------

def test_specs_two_in_two_out():
    path = FIXTURES / "two_in_two_out_int8.tflite"
    ins, outs = input_specs(path), output_specs(path)
    assert [s.shape for s in ins] == [(1, 9), (1, 6, 7, 3)]
    assert [s.shape for s in outs] == [(1, 5), (1, 4, 5, 4)]
    assert all(s.dtype == np.int8 and s.quantized and s.scale.size == 1 for s in ins + outs)
    f = input_specs(FIXTURES / "two_in_two_out_float32.tflite")
    assert all(s.dtype == np.float32 and not s.quantized for s in f)


def test_random_inputs_ranges_layout_and_seed():
    specs = [((1, 40, 50), np.int8), ((1, 30), np.uint8), ((2, 3), np.float32, None),
             ((1, 4), np.int16, (0.5, 0)), TensorSpec("x", (1, 3), np.dtype(np.int32))]
    a = random_inputs(specs, n=5, seed=3)
    assert [x.shape for x in a] == [(5, 40, 50), (5, 30), (5, 2, 3), (5, 4), (5, 3)]
    assert [x.dtype for x in a] == [np.int8, np.uint8, np.float32, np.int16, np.int32]
    assert a[0].min() == -128 and a[0].max() == 127          # full int8 range is hit
    assert a[1].min() >= 0 and a[1].max() == 255
    assert -1.0 <= a[2].min() and a[2].max() <= 1.0
    assert a[4].min() >= -128 and a[4].max() <= 127
    b = random_inputs(specs, n=5, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    c = random_inputs(specs, n=5, seed=4)
    assert not np.array_equal(a[0], c[0])
    one = random_inputs(FIXTURES / "two_in_two_out_int8.tflite", 1, 0)
    assert [x.shape for x in one] == [(1, 9), (1, 6, 7, 3)]


def test_bad_inputs_are_rejected():
    path = FIXTURES / "conv_1x1_int8.tflite"
    with pytest.raises(ValueError, match="input"):
        run_tflm(path, [np.zeros((1, 6, 5, 7), np.int8)])
    with pytest.raises(ValueError, match="int8 expected"):
        run_tflm(path, [np.zeros((1, 6, 5, 8), np.float32)])
    with pytest.raises(ValueError, match="outside the int8 range"):
        run_tflm(path, [np.full((1, 6, 5, 8), 200, np.int32)])
    with pytest.raises(ValueError, match="1 input"):
        run_tflm(path, [])


# ---------------------------------------------------------------------------------------------
# Both references on every fixture
# ---------------------------------------------------------------------------------------------

# The core fixtures of make_fixtures.py (convolution, dense, pooling, ADD, SOFTMAX): the two
# references agree on them. The op-family fixtures are checked against the verdict reference
# by tests/test_ops_*.py, which also record where TFLM refuses an op or the references differ.
CORE = ("conv_", "dwconv_", "dense", "avgpool_", "maxpool_", "add_residual_", "classifier_softmax_",
        "two_in_two_out_")


def core_fixtures() -> list:
    return [p for p in fixture_models() if p.name.startswith(CORE)]


def test_core_fixture_set():
    assert len(core_fixtures()) >= 50


@pytest.mark.parametrize("model", core_fixtures(), ids=lambda p: p.stem)
def test_references_agree_on_fixture(model):
    x = random_inputs(model, 4, seed=21)
    res = references(model, x)
    assert [r.name for r in res] == ["tflm", "litert-ref"]
    tflm, lite = res
    assert lite.ok, lite.unavailable
    if _base(model) in TFLM_REFUSES:
        assert not tflm.ok and "RESHAPE" in tflm.unavailable
        assert lite.verdict and not tflm.verdict
        return
    assert tflm.ok, tflm.unavailable
    assert tflm.verdict and not lite.verdict
    specs = output_specs(model)
    assert len(tflm.outputs) == len(lite.outputs) == len(specs)
    for t, lo, spec in zip(tflm.outputs, lite.outputs, specs, strict=True):
        shape = (4, *spec.shape[1:])
        assert t.shape == lo.shape == shape and t.dtype == lo.dtype == spec.dtype
        m = compute_metrics(lo, t, spec.scale, spec.zero_point)
        if spec.dtype == np.int8 and _base(model) in FC_INT8:
            assert m.max_lsb <= 1, f"LiteRT-ref vs TFLM FC rounding: {m.max_lsb} LSB"
        else:
            assert passes(m, spec.dtype), m  # bit-exact int8 / float within 1e-5


def test_batch_equals_single_runs():
    path = FIXTURES / "add_residual_int8.tflite"
    x = random_inputs(path, 3, seed=5)
    batch = run_tflm(path, x)[0]
    assert batch.shape == (3, 8, 7, 6)
    for j in range(3):
        single = run_tflm(path, [x[0][j:j + 1]])[0]
        assert single.shape == (1, 8, 7, 6)
        np.testing.assert_array_equal(single[0], batch[j])
    # An extra leading axis or a flat array carries the same samples.
    np.testing.assert_array_equal(run_litert_ref(path, [x[0][:, None]])[0], batch)
    np.testing.assert_array_equal(run_litert_ref(path, [x[0].ravel()])[0], batch)


def test_tflm_arena_bytes_fixture():
    n = tflm_arena_bytes(FIXTURES / "conv_odd_valid_int8.tflite")
    # At least the int8 input and output tensors (7*9*3 + 5*7*4 bytes), far below the 32 MiB offered.
    assert 189 + 140 <= n < 64 * 1024


# ---------------------------------------------------------------------------------------------
# Refusals and crashes become ReferenceUnavailable
# ---------------------------------------------------------------------------------------------

def test_hybrid_model_refused_by_tflm():
    path = shared_model("mlperf_tiny/kws_ref_model_float32.tflite")
    x = random_inputs(path, 1, seed=0)
    with pytest.raises(ReferenceUnavailable) as e:
        run_tflm(path, x)
    assert "Hybrid models are not supported" in e.value.reason
    assert "\n" not in e.value.reason and e.value.reason.startswith("TFLM:")
    tflm, lite = references(path, x)
    assert not tflm.ok and not tflm.verdict
    assert lite.ok and lite.verdict and lite.outputs[0].dtype == np.float32


def test_person_detect_refused_by_litert():
    path = shared_model("tflite_micro/person_detect.tflite")
    x = random_inputs(path, 1, seed=0)
    with pytest.raises(ReferenceUnavailable, match="quantized_dimension"):
        run_litert_ref(path, x)
    tflm, lite = references(path, x)
    assert tflm.ok and tflm.verdict and not lite.ok


def test_tflm_arena_matches_models_md():
    # MODELS.md: "Arena allocation total" of hello_world_int8 is 1504 bytes.
    assert tflm_arena_bytes(shared_model("tflite_micro/hello_world_int8.tflite")) == 1504


def test_ad01_known_fc_disagreement():
    path = shared_model("mlperf_tiny/ad01_int8.tflite")
    x = random_inputs(path, 1, seed=0)
    tflm, lite = references(path, x)
    m = compute_metrics(lite.outputs[0], tflm.outputs[0])
    assert 0 < m.max_lsb <= 3  # docs/references.md: up to 3 LSB, single vs double rounding


def _job(code: str) -> ref._Job:
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    return ref._Job("litert-ref", "model.tflite", proc, tempfile.TemporaryDirectory(), 1)


def test_native_abort_becomes_unavailable():
    with pytest.raises(ReferenceUnavailable, match=r"LiteRT-ref: crashed \(killed by SIGABRT\)"):
        ref._finish(_job("import os, sys; sys.stderr.write('boom\\n'); sys.stderr.flush(); os.abort()"))


def test_segfault_becomes_unavailable():
    code = "import ctypes; ctypes.string_at(0)"
    with pytest.raises(ReferenceUnavailable, match="SIGSEGV"):
        ref._finish(_job(code))


def test_timeout_becomes_unavailable():
    with pytest.raises(ReferenceUnavailable, match="timed out"):
        ref._finish(_job("import time; time.sleep(30)"), timeout=0.5)
