"""FLOOR_DIV (floor_div.py, ai_floor_div.c).

* the floordiv_* fixtures (real converter output) run bit-exact: float32 and the int8 model
  (FLOOR_DIV kept in float between DEQUANTIZE/QUANTIZE) against TFLite Micro, int32 against
  LiteRT-ref (TFLite Micro's FLOOR_DIV is float32 only);
* a hand-built graph runs the generated C on the host against numpy on the cases the
  converter's random data rarely hits: float quotients just below an integer (where a float32
  division would round up and move the floor), signs, 6-D broadcasting, int32 floor vs
  truncation, and the defined results where TFLite refuses (x / 0, INT32_MIN / -1);
* raw int8 FLOOR_DIV is refused with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op
from stm32ai.passes.lower import registry
from stm32ai.pipeline import compile_graph
from stm32ai.validate.host import run_compiled
from stm32ai.validate.run import validate_model

FLOORDIV_FIXTURES = sorted(FIXTURES.glob("floordiv_*.tflite"))


@pytest.mark.parametrize("model", FLOORDIV_FIXTURES, ids=lambda p: p.stem)
def test_fixture_bit_exact(model):
    res = validate_model(model, n=1, seed=11)
    want = "litert-ref" if "int32" in model.stem else "tflm"
    assert res.verdict_label == want, [c.unavailable for c in res.comparisons]
    v = next(c for c in res.comparisons if c.verdict)
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok and m.max_abs_err == 0, f"{model.name} output {j}: {m.as_dict()}"


def test_fixtures_present():
    assert {p.stem for p in FLOORDIV_FIXTURES} == {"floordiv_bcast_float32", "floordiv_bcast_int8",
                                                  "floordiv_int32_int32"}


def _graph(pairs: list[tuple[np.ndarray, np.ndarray]]) -> Graph:
    g = Graph("t", [], [], [], [])
    for k, (a, b) in enumerate(pairs):
        ta = g.add_tensor(f"a{k}", a.shape, a.dtype.name)
        tb = g.add_tensor(f"b{k}", b.shape, b.dtype.name)
        ty = g.add_tensor(f"y{k}", np.broadcast_shapes(a.shape, b.shape), a.dtype.name)
        g.ops.append(Op("FLOOR_DIV", [ta, tb], [ty], {}, index=k))
        g.inputs += [ta, tb]
        g.outputs.append(ty)
    return g


def test_against_numpy():
    rng = np.random.default_rng(3)
    # float32: a = k * b * (1 - 2^-24) has a float32 quotient that rounds up to k
    b = rng.uniform(0.3, 5.0, (1, 2, 1, 3, 1, 4)).astype(np.float32) * rng.choice([-1, 1], (1, 2, 1, 3, 1, 4))
    k = rng.integers(-50, 50, (2, 1, 3, 1, 5, 4)).astype(np.float32)
    a = (k * b * np.float32(1 - 2.0 ** -24)).astype(np.float32)
    a.flat[:7] = [0.0, -0.0, 1e30, -1e-30, 7.5, -7.5, 3.0]
    fa, fb = a, np.broadcast_to(b, a.shape).astype(np.float32).copy()
    fb.flat[:7] = [2.0, 2.0, 1e-10, 3.0, 2.5, 2.5, -1.0]
    # int32: truncation and floor differ for mixed signs; TFLite has no answer for the last two
    ia = np.int32([7, -7, 7, -7, 6, -6, 0, 2147483647, -2147483648, 5, -2147483648]).reshape(1, 11)
    ib = np.int32([2, 2, -2, -2, 3, 3, -5, -1, 7, 0, -1]).reshape(1, 11)
    ra = rng.integers(-(1 << 31), (1 << 31) - 1, (3, 1, 40), dtype=np.int64).astype(np.int32)
    rb = rng.integers(-1000, 1000, (1, 5, 40)).astype(np.int32)
    rb[rb == 0] = 1
    c = compile_graph(_graph([(fa, fb), (ia, ib), (ra, rb)]))
    assert [op.kernel for op in c.graph.ops] == ["floor_div_f32", "floor_div_s32", "floor_div_s32"]
    y_f, y_i, y_r = run_compiled(c, [[fa, fb, ia, ib, ra, rb]])[0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        want_f = np.floor(fa.astype(np.float64) / fb.astype(np.float64)).astype(np.float32)
        assert np.count_nonzero(np.floor(fa / fb) != want_f) > 0      # float32 division would differ
    assert np.array_equal(y_f, want_f, equal_nan=True)
    assert y_i.tolist() == [[3, -4, -4, 3, 2, -2, 0, -2147483647, -306783379, 0, -2147483648]]
    assert np.array_equal(y_r, np.floor_divide(ra.astype(np.int64), rb.astype(np.int64)).astype(np.int32))


def test_raw_int8_is_refused():
    a = np.zeros((1, 4), np.int8)
    with pytest.raises(UnsupportedModelError) as e:
        compile_graph(_graph([(a, a)]))
    assert "FLOOR_DIV" in str(e.value) and "float" in str(e.value)


def test_registry_lists_floor_div():
    assert "int32" in registry()["FLOOR_DIV"].constraints
