"""UNIDIRECTIONAL_SEQUENCE_LSTM: the generated C against TFLite Micro (docs/references.md).

* Every lstm_* fixture (Keras 2 LSTM through the real converter: int8 with int16 cell state,
  float32; sequences returned or the last step; batch 2; time-major; stacked) and the shared
  trained_lstm_int8 / dtln_noise_suppression models run bit-exact (int8) or within 1e-5
  (float32) against TFLM, each sample from the initial state.
* The state persists across ai_run like TFLM's variable tensors across Invoke, ai_reset
  restores the initial state, and two instances with separate pools keep separate states.
* Unsupported variants are refused at generate time with exit 2 and one line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, fixture_models, shared_model
from stateful import reference_sequence, run_sequence

from stm32ai.pipeline import compile_model
from stm32ai.validate.reference import input_specs
from stm32ai.validate.run import validate_model

MODELS = fixture_models("lstm_*.tflite")
SHARED = ["tflite_micro/trained_lstm_int8.tflite", "tflite_micro/dtln_noise_suppression.tflite"]


def _inputs(model: Path, n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for spec in input_specs(model):
        shape = (n, *spec.shape[1:]) if spec.shape[0] == 1 else (n, *spec.shape)
        if spec.dtype.kind in "iu":
            info = np.iinfo(spec.dtype)
            out.append(rng.integers(info.min, info.max + 1, shape).astype(spec.dtype))
        else:
            out.append(rng.uniform(-2.5, 2.5, shape).astype(np.float32))
    return out


def _check_tflm(model: Path, n: int, seed: int) -> None:
    res = validate_model(model, _inputs(model, n, seed), seed=seed)
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict and verdict[0].reference == "tflm", [(c.reference, c.unavailable) for c in res.comparisons]
    v = verdict[0]
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok, f"output {j}: max LSB {m.max_lsb}, max rel err {m.max_rel_err:.3g}"
        if m.max_lsb is not None:
            assert m.max_lsb == 0


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_fixture_matches_tflm(model):
    _check_tflm(model, 3, 11)


@pytest.mark.parametrize("rel", SHARED, ids=lambda r: Path(r).stem)
def test_shared_model_matches_tflm(rel):
    _check_tflm(shared_model(rel), 3, 5)


# ---------------------------------------------------------------------------------------------
# State across runs
# ---------------------------------------------------------------------------------------------

def steps(model: Path, n: int, seed: int) -> list[np.ndarray]:
    """n single-step inputs of the (batch 1 or batch-major) model."""
    spec = input_specs(model)[0]
    x = _inputs(model, n, seed)[0]
    return [np.ascontiguousarray(x[k:k + 1] if spec.shape[0] == 1 else x[k]).reshape(spec.shape) for k in range(n)]


@pytest.mark.parametrize("model", [FIXTURES / "lstm_seq_int8.tflite", FIXTURES / "lstm_batch2_float32.tflite"],
                         ids=lambda p: p.stem)
def test_state_persists_across_runs_like_tflm(model, tmp_path):
    xs = steps(model, 4, 7)
    want = reference_sequence(model, xs)
    c = compile_model(model)
    got = run_sequence(c, xs, tmp_path)
    out_t = c.graph.tensors[c.graph.outputs[0]]
    assert len(got) == 4 + 1 + 3
    seq, after_reset, interleaved = got[:4], got[4], got[5:]
    tol = {"rtol": 1e-5, "atol": 1e-6} if out_t.dtype == "float32" else {"rtol": 0, "atol": 0}
    for k in range(4):
        np.testing.assert_allclose(seq[k], want[k].reshape(out_t.shape), **tol)
    np.testing.assert_allclose(after_reset, want[4].reshape(out_t.shape), **tol)
    # after the reset, A has run sample 0; B (fresh) runs sample 0, A runs sample 1, B sample 1
    np.testing.assert_allclose(interleaved[0], want[0].reshape(out_t.shape), **tol)
    np.testing.assert_allclose(interleaved[1], want[1].reshape(out_t.shape), **tol)
    np.testing.assert_allclose(interleaved[2], want[1].reshape(out_t.shape), **tol)


def test_state_is_planned_for_the_whole_run():
    c = compile_model(FIXTURES / "lstm_stacked_int8.tflite")
    g, plan = c.graph, c.plan
    states = [t.id for t in g.tensors if t.variable]
    assert len(states) == 4
    last = len(plan.order) - 1
    for t in states:
        b = plan.buffers[plan.tensor_buffer[t]]
        assert (b.first, b.last) == (0, last) and b.tensors == [t]
    fills = [n["attrs"]["fill"] for n in c.doc["nodes"] if n.get("attrs", {}).get("variable")]
    zps = sorted(int(g.tensors[t].quant.zero_point[0]) & 0xFF for t in states)
    assert sorted(fills) == zps


# ---------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------

def test_hybrid_lstm_is_refused(tmp_path):
    model = FIXTURES / "unsupported" / "lstm_wide_hybrid.tflite"
    r = subprocess.run([sys.executable, "-m", "stm32ai", "generate", str(model), "--c-only",
                        "-o", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in lines[0] and "tensor '" in lines[0]
    assert "hybrid" in lines[0] and "int8 weights" in lines[0]
    assert not (tmp_path / "out").exists()
