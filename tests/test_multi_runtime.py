"""Several models and instances in one program (API 1.2, issue 13 items 4 and 5).

* State that survives sharing: an LSTM and a CNN share one activation buffer (the application
  passes the same buffer to both ai_create calls) and run interleaved; the LSTM's outputs are
  those of TFLite Micro running the sequence alone (its state lives in its state area, not in
  the shared pool) and the CNN's match TFLM too.
* Instances that run concurrently: two host threads run two instances of one model thousands of
  times each, every output compared with a single-threaded run whose outputs match TFLM; built
  with ThreadSanitizer when the compiler has it (a data race is then an error too).
* No mutable file-scope state: the objects of the generated model and the runtime have no
  .data/.bss symbol but the instance table, the built-in pools and state area, and the
  descriptor (non-const for API 1.0 compatibility, written by nothing).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES
from stateful import RUN_C, reference_sequence
from test_ops_lstm import steps

from stm32ai.emitter import emit_c
from stm32ai.pipeline import compile_model
from stm32ai.validate.host import CFLAGS, build_host, runtime_objects
from stm32ai.validate.reference import random_inputs, run_tflm

LSTM = FIXTURES / "lstm_seq_int8.tflite"
CNN = FIXTURES / "conv_stride2_same_int8.tflite"
STEPS = 4

SHARED_MAIN = RUN_C + r"""
#include "lstm.h"
#include "cnn.h"

#define SHARED_SIZE (AI_LSTM_ACTIVATIONS_SIZE > AI_CNN_ACTIVATIONS_SIZE ? AI_LSTM_ACTIVATIONS_SIZE \
                                                                       : AI_CNN_ACTIVATIONS_SIZE)
static AI_ALIGNED(8) ai_u8 shared[SHARED_SIZE];

/* stdin: STEPS LSTM inputs then STEPS CNN inputs. LSTM step k, then CNN k (overwriting the
 * shared pool); then ai_reset of the LSTM and its step 0 again. */
int main(void) {
  static unsigned char buf[1 << 20];
  const size_t got = fread(buf, 1, sizeof buf, stdin);
  ai_handle l, c;
  if (ai_create(&lstm_info, shared, &l) != AI_OK) return 2;
  if (ai_create(&cnn_info, shared, &c) != AI_OK) return 3;
  if (ai_get_state(l) == NULL || ai_get_state_size(l) != AI_LSTM_STATE_SIZE || ai_get_state(c) != NULL) return 4;
  const size_t sl = ai_get_input(l, 0)->size_bytes, sc = ai_get_input(c, 0)->size_bytes;
  if (got != STEPS * (sl + sc)) return 5;
  for (size_t k = 0; k < STEPS; k++) {
    if (run(l, buf + k * sl) || run(c, buf + STEPS * sl + k * sc)) return 6;
  }
  if (ai_reset(l) != AI_OK || run(l, buf)) return 7;
  return 0;
}
"""


def _split(raw: bytes, arrays: list[np.ndarray]) -> list[np.ndarray]:
    out, pos = [], 0
    for e in arrays:
        out.append(np.frombuffer(raw[pos:pos + e.nbytes], dtype=e.dtype).reshape(e.shape))
        pos += e.nbytes
    assert pos == len(raw), (pos, len(raw))
    return out


def _emit_two(tmp_path: Path) -> Path:
    d = tmp_path / "c"
    cl, cc = compile_model(LSTM, "lstm"), compile_model(CNN, "cnn")
    emit_c(cl.doc, cl.params, "lstm", d)
    emit_c(cc.doc, cc.params, "cnn", d, with_runtime=False)
    return d


def test_lstm_state_survives_a_pool_shared_with_a_cnn(tmp_path: Path):
    xs = steps(LSTM, STEPS, 7)
    xc = [random_inputs(CNN, 1, seed=20 + k)[0] for k in range(STEPS)]
    want_lstm = reference_sequence(LSTM, xs)          # STEPS in a row, then reset + step 0
    want_cnn = [run_tflm(CNN, [v])[0] for v in xc]

    d = _emit_two(tmp_path)
    (tmp_path / "main.c").write_text(SHARED_MAIN.replace("STEPS", str(STEPS)))
    exe = build_host(d, "lstm", tmp_path / "prog", [d / "cnn.c", d / "cnn_data.c", tmp_path / "main.c"])
    stdin = b"".join(v.tobytes() for v in xs) + b"".join(v.tobytes() for v in xc)
    r = subprocess.run([str(exe)], input=stdin, capture_output=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr)

    order = [a for k in range(STEPS) for a in (want_lstm[k], want_cnn[k])] + [want_lstm[STEPS]]
    got = _split(r.stdout, order)
    for k, (g, w) in enumerate(zip(got, order, strict=True)):
        np.testing.assert_array_equal(g, w.reshape(g.shape), err_msg=f"output {k}")


THREADS_MAIN = r"""
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "ai_runtime.h"
#include "net.h"

/* NX inputs; a stateful model runs them as a sequence (ai_reset before input 0), a stateless
 * one in a different order per thread. Instance A: built-in pool and state area; B: its own. */
#define NX 4
#define ITERS 3000
static AI_ALIGNED(8) ai_u8 pool_b[AI_NET_ACTIVATIONS_SIZE];
static AI_ALIGNED(8) ai_u8 state_b[AI_NET_STATE_SIZE + 8];
static unsigned char xs[NX][AI_NET_IN_1_SIZE_BYTES];
static unsigned char expected[NX][AI_NET_OUT_1_SIZE_BYTES];
static pthread_barrier_t start;

typedef struct { ai_handle h; int id; long bad; } job;

static int step(ai_handle h, int k) {
  if (AI_NET_STATE_SIZE != 0u && k == 0 && ai_reset(h) != AI_OK) return 1;
  memcpy(ai_get_input(h, 0)->data, xs[k], sizeof xs[k]);
  return ai_run(h) != AI_OK;
}

static void *worker(void *arg) {
  job *j = arg;
  const int shift = AI_NET_STATE_SIZE != 0u ? 0 : j->id;
  pthread_barrier_wait(&start);
  for (int it = 0; it < ITERS; it++) {
    const int k = (it + shift) % NX;
    if (step(j->h, k) || memcmp(ai_get_output(j->h, 0)->data, expected[k], sizeof expected[k]) != 0) {
      j->bad++;
    }
  }
  return NULL;
}

int main(void) {
  if (fread(xs, 1, sizeof xs, stdin) != sizeof xs) return 2;
  ai_handle a, b;
  ai_u8 *pools_b[1] = { pool_b };
  if (ai_create(&net_info, NULL, &a) != AI_OK || ai_create_state(&net_info, pools_b, 1, state_b, &b) != AI_OK) return 3;
  /* single-threaded reference run (checked against TFLM by the test) */
  for (int k = 0; k < NX; k++) {
    if (step(a, k)) return 4;
    memcpy(expected[k], ai_get_output(a, 0)->data, sizeof expected[k]);
  }
  fwrite(expected, 1, sizeof expected, stdout);
  job ja = {a, 0, 0}, jb = {b, 1, 0};
  pthread_t ta, tb;
  pthread_barrier_init(&start, NULL, 2);
  if (pthread_create(&ta, NULL, worker, &ja) || pthread_create(&tb, NULL, worker, &jb)) return 5;
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  fprintf(stderr, "mismatches: %ld %ld of %d\n", ja.bad, jb.bad, ITERS);
  return ja.bad || jb.bad ? 1 : 0;
}
"""


def _tsan_works(tmp: Path) -> bool:
    src = tmp / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-fsanitize=thread", str(src), "-o", str(tmp / "probe")], capture_output=True)
    return r.returncode == 0 and subprocess.run([str(tmp / "probe")], capture_output=True).returncode == 0


def _tflm_expected(model: Path, xs: list[np.ndarray]) -> list[np.ndarray]:
    if model == LSTM:  # a sequence from the initial state
        return reference_sequence(model, xs)[:len(xs)]
    return [run_tflm(model, [x])[0] for x in xs]


@pytest.mark.parametrize("model", [CNN, LSTM], ids=["cnn", "lstm_state"])
def test_two_threads_run_two_instances_bit_exact(tmp_path: Path, model: Path):
    """ThreadSanitizer (when the compiler has it) turns any race into a failure; the plain
    comparison alone rarely catches the pre-1.2 race (a few instructions wide)."""
    c = compile_model(model, "net")
    d = tmp_path / "c"
    emit_c(c.doc, c.params, "net", d)
    (tmp_path / "main.c").write_text(THREADS_MAIN)
    cc = os.environ.get("CC", "cc")
    tsan = ["-fsanitize=thread", "-g"] if _tsan_works(tmp_path) else []
    flags = [f for f in CFLAGS if f != "-std=c99"] + ["-std=gnu11", *tsan, "-pthread"]
    srcs = [d / "net.c", d / "net_data.c", tmp_path / "main.c", *runtime_objects(d / "runtime", cc, flags, tmp_path)]
    exe = tmp_path / "threads"
    subprocess.run([cc, *flags, f"-I{d}", f"-I{d / 'runtime' / 'include'}", *map(str, srcs),
                    "-o", str(exe), "-lm"], check=True, capture_output=True)
    xs = steps(LSTM, 4, 9) if model == LSTM else [random_inputs(model, 1, seed=40 + k)[0] for k in range(4)]
    env = {**os.environ, "TSAN_OPTIONS": "halt_on_error=1 exitcode=66"}
    r = subprocess.run([str(exe)], input=b"".join(x.tobytes() for x in xs), capture_output=True,
                       timeout=300, env=env)
    assert r.returncode == 0, (r.returncode, r.stderr.decode(errors="replace")[-2000:])
    assert b"mismatches: 0 0 of 3000" in r.stderr
    want = _tflm_expected(model, xs)
    for k, (g, w) in enumerate(zip(_split(r.stdout, want), want, strict=True)):
        np.testing.assert_array_equal(g, w.reshape(g.shape), err_msg=f"input {k}")


# nm symbol types of writable data: .data, .bss, small data/bss, common
_WRITABLE = set("bBdDgGsSC")


_ALLOWED = re.compile(r"\A(s_table|(lstm|cnn)_activations(_\d+)?|lstm_state|(lstm|cnn)_info)\Z")
ARM_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-O2", "-std=gnu11", "-Wall",
             "-Wextra", "-Werror", "-fno-common", "-ffunction-sections", "-fdata-sections"]


def _writable_symbols(cc: str, nm: str, flags: list[str], d: Path, srcs: list[Path], out: Path) -> dict[str, str]:
    """{symbol: 'file: symbol (nm type)'} of every writable-data symbol the objects define."""
    found = {}
    for src in srcs:
        obj = out / (src.stem + ".o")
        inc = [f"-I{d}", f"-I{d / 'runtime' / 'include'}"]
        subprocess.run([cc, *flags, "-c", *inc, str(src), "-o", str(obj)], check=True, capture_output=True)
        for line in subprocess.run([nm, str(obj)], capture_output=True, text=True, check=True).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in _WRITABLE:
                found[parts[2]] = f"{src.name}: {parts[2]} ({parts[1]})"
    return found


def test_no_mutable_file_scope_state(tmp_path: Path):
    nm = shutil.which("nm")
    assert nm is not None
    d = _emit_two(tmp_path)
    models = [d / f for f in ("lstm.c", "lstm_data.c", "cnn.c", "cnn_data.c")]
    # host: every runtime and kernel file; -fno-pic: const tables holding pointers go to
    # .rodata, not .data.rel.ro (which nm also calls 'd')
    found = _writable_symbols(os.environ.get("CC", "cc"), nm, [*CFLAGS, "-fno-pic"], d,
                              models + sorted((d / "runtime" / "src").glob("*.c")), tmp_path)
    bad = [v for k, v in found.items() if not _ALLOWED.match(k)]
    assert not bad, bad
    # the scan sees what it must allow (it would see a forbidden one the same way)
    assert {"s_table", "lstm_activations", "cnn_activations", "lstm_state"} <= set(found), found
    if shutil.which("arm-none-eabi-gcc") and shutil.which("arm-none-eabi-nm"):
        # the target compiler too (small-data and common sections differ), models + runtime
        arm = _writable_symbols("arm-none-eabi-gcc", "arm-none-eabi-nm", ARM_FLAGS, d,
                                models + [d / "runtime" / "src" / "ai_runtime.c"], tmp_path)
        bad = [v for k, v in arm.items() if not _ALLOWED.match(k)]
        assert not bad, bad
        assert {"s_table", "lstm_state"} <= set(arm), arm
