"""Row input API of the runtime (issue 24, API 1.3; docs/project.md "Inputs in rows"):
ai_set_row_source / ai_get_row_inputs, ai_run refusing a row-fed model without a source
(AI_ERR_ROW_SOURCE), and ai_poison_rows (the poison runner's pattern under -DAI_POISON, nothing
otherwise). A generated model's descriptor is flagged row-fed by hand here; the calls the
generated stripe executor makes are tested with it (tests/test_stripes*.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
from test_lower_conv import make_layer

from stm32ai.emitter import emit_c
from stm32ai.pipeline import compile_graph
from stm32ai.validate.host import build_host

MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "ai_runtime.h"
#include "network.h"

#ifdef AI_POISON
/* the poison runner's per-node hook (stm32ai/validate/poison.py), not under test here */
void network_poison(ai_u8 *act, uint32_t node);
void network_poison(ai_u8 *act, uint32_t node) { (void)act; (void)node; }
#endif

static int calls;
static ai_status src(void *user, int32_t i, int32_t row0, int32_t n, void *dst) {
  (void)i; (void)row0; (void)n; (void)dst;
  ++*(int *)user;
  return AI_OK;
}

#define CHECK(c) do { if (!(c)) { printf("FAIL line %d: %s\n", __LINE__, #c); return 1; } } while (0)

int main(void) {
  ai_handle h = NULL;
  CHECK(ai_set_row_source(NULL, src, &calls) == AI_ERR_BAD_HANDLE);
  CHECK(ai_get_row_inputs(NULL) == 0u);
  /* an ordinary model: the source is accepted and never called */
  CHECK(ai_create(&network_info, NULL, &h) == AI_OK);
  CHECK(ai_get_row_inputs(h) == 0u);
  CHECK(ai_set_row_source(h, src, &calls) == AI_OK);
  CHECK(ai_run(h) == AI_OK);
  CHECK(calls == 0);
  CHECK(ai_destroy(h) == AI_OK);
  CHECK(ai_set_row_source(h, src, &calls) == AI_ERR_BAD_HANDLE);
  /* input 0 row-fed: no run without a source, with the reason */
  network_info.row_inputs = 1u;
  CHECK(ai_create(&network_info, NULL, &h) == AI_OK);
  CHECK(ai_get_row_inputs(h) == 1u);
  CHECK(ai_run(h) == AI_ERR_ROW_SOURCE);
  CHECK(strstr(ai_get_error(h), "row source") != NULL);
  CHECK(ai_set_row_source(h, src, &calls) == AI_OK);
  CHECK(ai_run(h) == AI_OK);
  CHECK(ai_set_row_source(h, NULL, NULL) == AI_OK);
  CHECK(ai_run(h) == AI_ERR_ROW_SOURCE);
  CHECK(ai_destroy(h) == AI_OK);
  /* a new instance starts without a source */
  CHECK(ai_create(&network_info, NULL, &h) == AI_OK);
  CHECK(ai_run(h) == AI_ERR_ROW_SOURCE);
  CHECK(ai_destroy(h) == AI_OK);
  /* ai_poison_rows */
  unsigned char buf[40];
  memset(buf, 0x11, sizeof buf);
  ai_poison_rows(buf + 4, 32u);
  for (int i = 0; i < 40; ++i) {
    printf("%02x", buf[i]);
  }
  printf("\nOK\n");
  return 0;
}
"""


def _build(tmp: Path, defines: list[str]) -> Path:
    w = np.ones((2, 3, 3, 2), np.int8)
    g = make_layer("CONV_2D", (1, 4, 4, 2), w, np.zeros(2, np.int32), w_scales=[0.01, 0.02])
    c = compile_graph(g)
    d = tmp / "c"
    if not d.exists():
        emit_c(c.doc, c.params, "network", d)
    (tmp / "main.c").write_text(MAIN)
    tag = "_".join(defines) or "plain"
    return build_host(d, "network", tmp / f"prog_{tag}", [tmp / "main.c"], defines=defines)


def _poison_pattern(n: int) -> bytes:
    """stm32ai/validate/poison.py's generator, seeded as ai_poison_rows documents."""
    x = (0x9E3779B9 ^ (n * 2654435761)) & 0xFFFFFFFF
    out = bytearray()
    for _ in range(n):
        x = (x * 1664525 + 1013904223) & 0xFFFFFFFF
        out.append(x >> 24)
    return bytes(out)


def test_row_source_api_and_poison_rows(tmp_path):
    plain = subprocess.run([str(_build(tmp_path, []))], capture_output=True, text=True)
    assert plain.returncode == 0 and plain.stdout.endswith("OK\n"), plain.stdout
    assert plain.stdout.splitlines()[0] == "11" * 40  # no AI_POISON: nothing written
    poisoned = subprocess.run([str(_build(tmp_path, ["AI_POISON"]))], capture_output=True, text=True)
    assert poisoned.returncode == 0 and poisoned.stdout.endswith("OK\n"), poisoned.stdout
    got = bytes.fromhex(poisoned.stdout.splitlines()[0])
    assert got[:4] == b"\x11" * 4 and got[36:] == b"\x11" * 4  # exactly the bytes asked for
    assert got[4:36] == _poison_pattern(32)


ROWS_MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "ai_runtime.h"
#include "network.h"
#include "vec.h"

static int32_t next_row[8], n_calls, bad;

static ai_status src(void *user, int32_t i, int32_t row0, int32_t n, void *dst) {
  (void)user;
  if (i != 0 || n <= 0 || row0 != next_row[0] || row0 + n > VEC_H) {
    bad = 1;
    return AI_ERR_INDEX;
  }
  memcpy(dst, vec_in + (size_t)row0 * VEC_ROW, (size_t)n * VEC_ROW);
  next_row[0] = row0 + n;
  ++n_calls;
  return user == NULL ? AI_OK : AI_ERR_IO; /* user != NULL: fail the source */
}

int main(void) {
  ai_handle h = NULL;
  if (ai_create(&network_info, NULL, &h) != AI_OK || ai_get_row_inputs(h) != 1u) {
    printf("FAIL create\n");
    return 1;
  }
  if (ai_get_input(h, 0)->data != NULL) { printf("FAIL row-fed input has a buffer\n"); return 1; }
  if (ai_run(h) != AI_ERR_ROW_SOURCE) { printf("FAIL run without source\n"); return 1; }
  static int fail_token;
  ai_set_row_source(h, src, &fail_token);
  if (ai_run(h) != AI_ERR_ROW_SOURCE || n_calls != 1) { printf("FAIL failing source\n"); return 1; }
  for (int run = 0; run < 2; ++run) {  /* twice: each run pulls every row again, from row 0 */
    next_row[0] = 0; n_calls = 0;
    ai_set_row_source(h, src, NULL);
    if (ai_run(h) != AI_OK || bad || next_row[0] != VEC_H) {
      printf("FAIL run %d bad %d rows %d\n", run, bad, (int)next_row[0]);
      return 1;
    }
  }
  const ai_tensor *o = ai_get_output(h, 0);
  for (uint32_t k = 0; k < o->size_bytes; ++k) printf("%d ", (int)((const int8_t *)o->data)[k]);
  printf("\ncalls %d\nOK\n", (int)n_calls);
  return 0;
}
"""


def test_row_fed_model_pulls_each_row_once_in_order(tmp_path):
    """A --input-rows model (engineer A's executor): no run without a source, a failing source
    fails the run, rows pulled in increasing order, each once, all of them, every run; the
    output matches TFLite Micro."""
    import inspect

    from stm32ai.frontend.tflite_reader import load_tflite
    from stm32ai.validate.reference import run_tflm
    if "input_rows" not in inspect.signature(compile_graph).parameters:
        import pytest
        pytest.skip("compile_graph has no input_rows (engineer A's --input-rows not merged)")
    from conftest import shared_model
    path = shared_model("mlperf_tiny/kws_ref_model.tflite")
    c = compile_graph(load_tflite(path), optimization="ram", input_rows=True)
    xt = c.graph.tensors[c.graph.inputs[0]]
    x = np.random.default_rng(5).integers(-128, 128, xt.shape).astype(np.int8)
    d = tmp_path / "c"
    emit_c(c.doc, c.params, "network", d)
    h, row = xt.shape[1], int(np.prod(xt.shape[2:]))
    (tmp_path / "vec.h").write_text(
        f"#define VEC_H {h}\n#define VEC_ROW {row}\nstatic const int8_t vec_in[{x.size}] = {{ "
        + ", ".join(map(str, x.reshape(-1))) + " };\n")
    (tmp_path / "main.c").write_text(ROWS_MAIN)
    exe = build_host(d, "network", tmp_path / "rows", [tmp_path / "main.c"], include_dirs=[tmp_path])
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.endswith("OK\n"), r.stdout
    got = np.array(r.stdout.splitlines()[0].split(), np.int64)
    want = np.asarray(run_tflm(path, [x])[0]).reshape(-1)
    np.testing.assert_array_equal(got, want)
