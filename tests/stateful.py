"""Shared by the tests of models with persistent state (LSTM, SVDF) and of several instances:
a host harness that runs a sequence, and the references' outputs for the same sequence run in
a row (state carried over), then after a reset."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from stm32ai.emitter import emit_c
from stm32ai.pipeline import Compiled
from stm32ai.validate.host import build_host

# one run of the model on input bytes x, its output bytes to stdout
RUN_C = r"""
#include <stdio.h>
#include <string.h>
#include "ai_runtime.h"

static int run(ai_handle h, const unsigned char *x) {
  ai_tensor *in = ai_get_input(h, 0), *out = ai_get_output(h, 0);
  memcpy(in->data, x, in->size_bytes);
  if (ai_run(h) != AI_OK) return 1;
  fwrite(out->data, 1, out->size_bytes, stdout);
  return 0;
}
"""

SEQUENCE_MAIN = RUN_C + r"""
#include "network.h"

AI_ALIGNED(8) static ai_u8 pool_b[AI_NETWORK_ACTIVATIONS_SIZE + 8];
AI_ALIGNED(8) static ai_u8 state_b[AI_NETWORK_STATE_SIZE];

/* stdin: N samples. Instance A runs samples 0..N-1 in a row; then ai_reset and sample 0;
 * then instance B (own pool and state area) runs sample 0 while A runs sample 1 in between.
 * B without a state area of its own would share A's built-in one: refused. */
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

# child programs (each reference in its own process): xs in a row, then reset + xs[0]
_TFLM = """from tflite_micro.python.tflite_micro import runtime
it = runtime.Interpreter.from_file(sys.argv[1], arena_size=4 << 20)
reset = it.reset
def step(x):
    it.set_input(np.ascontiguousarray(x), 0); it.invoke()
    return np.array(it.get_output(0), copy=True)
"""
_LITERT = """from ai_edge_litert.interpreter import Interpreter, OpResolverType
it = Interpreter(model_path=sys.argv[1], experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
it.allocate_tensors(); i = it.get_input_details()[0]['index']; o = it.get_output_details()[0]['index']
reset = it.reset_all_variables
def step(x):
    it.set_tensor(i, np.ascontiguousarray(x)); it.invoke()
    return np.array(it.get_tensor(o), copy=True)
"""
_SEQUENCE = """
xs = np.load(sys.argv[2])
outs = [step(x) for x in xs]
reset()
outs.append(step(xs[0]))
np.save(sys.argv[3], np.stack(outs))
"""


def reference_sequence(model: Path, xs: list[np.ndarray], litert: bool = False) -> list[np.ndarray]:
    """TFLM's (or LiteRT-ref's) outputs for xs run in a row (state carried over), then reset + xs[0]."""
    code = "import sys, numpy as np\n" + (_LITERT if litert else _TFLM) + _SEQUENCE
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "x.npy", np.stack(xs))
        subprocess.run([sys.executable, "-c", code, str(model), str(Path(tmp) / "x.npy"),
                        str(Path(tmp) / "y.npy")], check=True, capture_output=True, timeout=600)
        return list(np.load(Path(tmp) / "y.npy"))


def run_sequence(c: Compiled, xs: list[np.ndarray], tmp: Path) -> np.ndarray:
    """The generated model (named network) under SEQUENCE_MAIN: xs in a row, reset + xs[0],
    then the two-instance interleaving; every output, stacked."""
    emit_c(c.doc, c.params, "network", tmp / "c")
    (tmp / "main.c").write_text(SEQUENCE_MAIN)
    exe = build_host(tmp / "c", "network", tmp / "exe", [tmp / "main.c"])
    r = subprocess.run([str(exe)], input=b"".join(v.tobytes() for v in xs), capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out_t = c.graph.tensors[c.graph.outputs[0]]
    return np.frombuffer(r.stdout, dtype=out_t.dtype).reshape(-1, *out_t.shape)
