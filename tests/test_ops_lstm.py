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
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, fixture_models, shared_model

from stm32ai.emitter import emit_c
from stm32ai.pipeline import compile_model
from stm32ai.validate.host import build_host
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

HARNESS = r"""
#include <stdio.h>
#include <string.h>
#include "ai_runtime.h"
#include "network.h"

AI_ALIGNED(8) static ai_u8 pool_b[AI_NETWORK_ACTIVATIONS_SIZE + 8];
AI_ALIGNED(8) static ai_u8 state_b[AI_NETWORK_STATE_SIZE];

/* stdin: N samples. Instance A runs samples 0..N-1 in a row; then ai_reset and sample 0;
 * then instance B (own pool and state area) runs sample 0 while A runs sample 1 in between.
 * B without a state area of its own would share A's built-in one: refused. */
static int run(ai_handle h, const unsigned char *x) {
  ai_tensor *in = ai_get_input(h, 0), *out = ai_get_output(h, 0);
  memcpy(in->data, x, in->size_bytes);
  if (ai_run(h) != AI_OK) return 1;
  fwrite(out->data, 1, out->size_bytes, stdout);
  return 0;
}

int main(void) {
  static unsigned char buf[1 << 20];
  size_t got = fread(buf, 1, sizeof buf, stdin);
  ai_handle a, b;
  if (ai_create(&network_info, NULL, &a) != AI_OK) return 2;
  ai_u8 *pools_b[1] = { pool_b };
  if (ai_create(&network_info, pool_b, &b) != AI_ERR_STATE || b != NULL) return 8;
  if (ai_create_state(&network_info, pools_b, 1, state_b, &b) != AI_OK) return 3;
  const size_t sz = ai_get_input(a, 0)->size_bytes;
  const size_t n = got / sz;
  for (size_t k = 0; k < n; k++) {
    if (run(a, buf + k * sz)) return 4;
  }
  if (ai_reset(a) != AI_OK) return 5;
  if (run(a, buf)) return 6;
  if (run(b, buf) || run(a, buf + sz) || run(b, buf + sz)) return 7;
  return 0;
}
"""


def _tflm_sequence(model: Path, xs: list[np.ndarray]) -> list[np.ndarray]:
    """TFLM outputs for xs run in a row (state carried over), then reset + xs[0]."""
    code = (
        "import sys, numpy as np\n"
        "from tflite_micro.python.tflite_micro import runtime\n"
        "xs = np.load(sys.argv[2])\n"
        "it = runtime.Interpreter.from_file(sys.argv[1], arena_size=4 << 20)\n"
        "outs = []\n"
        "for x in list(xs) + [None]:\n"
        "    if x is None:\n"
        "        it.reset(); x = xs[0]\n"
        "    it.set_input(np.ascontiguousarray(x), 0); it.invoke()\n"
        "    outs.append(np.array(it.get_output(0), copy=True))\n"
        "np.save(sys.argv[3], np.stack(outs))\n")
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "x.npy", np.stack(xs))
        subprocess.run([sys.executable, "-c", code, str(model), str(Path(tmp) / "x.npy"),
                        str(Path(tmp) / "y.npy")], check=True, capture_output=True, timeout=600)
        return list(np.load(Path(tmp) / "y.npy"))


@pytest.mark.parametrize("model", [FIXTURES / "lstm_seq_int8.tflite", FIXTURES / "lstm_batch2_float32.tflite"],
                         ids=lambda p: p.stem)
def test_state_persists_across_runs_like_tflm(model, tmp_path):
    spec = input_specs(model)[0]
    x = _inputs(model, 4, 7)[0]
    xs = [np.ascontiguousarray(x[k:k + 1] if spec.shape[0] == 1 else x[k]).reshape(spec.shape)
          for k in range(4)]
    want = _tflm_sequence(model, xs)
    c = compile_model(model)
    emit_c(c.doc, c.params, "network", tmp_path / "c")
    (tmp_path / "main.c").write_text(HARNESS)
    exe = build_host(tmp_path / "c", "network", tmp_path / "exe", [tmp_path / "main.c"])
    r = subprocess.run([str(exe)], input=b"".join(v.tobytes() for v in xs), capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out_t = c.graph.tensors[c.graph.outputs[0]]
    got = np.frombuffer(r.stdout, dtype=out_t.dtype).reshape(-1, *out_t.shape)
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
