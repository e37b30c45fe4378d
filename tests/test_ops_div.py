"""int8 DIV (ai_div_s8, lower/binary.py div_params_s8): docs/kernels_binary.md "DIV int8".

* `_tfl_div` is TFLite's reference_ops::DivElementwise transcribed in numpy from its
  definitions (GetReciprocal with gemmlowp's one_over_one_plus_x_for_x_in_0_1,
  CountLeadingSignBits, MultiplyByQuantizedMultiplier*), with the last rounding shift taken in
  64 bits (correct for any exponent); it shares no code with the kernel or the lowering;
* over every (x1, x2) pair and several output scales: where TFLite's shift exceeds 31 the
  exact rational quotient is below 0.5 output LSB, so the correctly rounded result is the
  output zero point (the claim the kernel rests on), and the 64-bit shift gives it too;
* the generated C over the whole 256 x 256 grid (zero divisors and the undefined domain
  included) against `_tfl_div`, with fused activations;
* the converter-made fixtures bit-exact against TFLite Micro and LiteRT-ref; `div_undefined`
  (plain a / b) is reported by `validate` as `unverified` with one line;
* generate-time refusal of scales that would overflow the kernel.
"""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from conftest import FIXTURES
from test_ops_move import _Builder

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Quant
from stm32ai.pipeline import compile_graph
from stm32ai.validate.run import validate_model

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
DIV_OK = ["div_norm_int8", "div_bcast_int8", "div_const_int8"]


# ---- TFLite's arithmetic, transcribed ----------------------------------------------------------

def _wrap(x: np.ndarray) -> np.ndarray:
    return ((x - I32_MIN) % (1 << 32)) + I32_MIN


def _srdhm(a: np.ndarray, b) -> np.ndarray:
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    ab = a * b
    q = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    q = np.where(q >= 0, q // (1 << 31), -((-q) // (1 << 31)))  # C division truncates
    return np.where((a == I32_MIN) & (b == I32_MIN), I32_MAX, q)


def _rdbypot(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT in 64 bits (the mask (1 << e) - 1 stays right for e > 31)."""
    mask = (np.int64(1) << e) - 1
    return (x >> e) + ((x & mask) > (mask >> 1) + (x < 0))


def _sat_shl(x: np.ndarray, n: int) -> np.ndarray:
    thr = (1 << (31 - n)) - 1
    return np.where(x > thr, I32_MAX, np.where(x < -thr, I32_MIN, x << n))


def _clz(u: np.ndarray) -> np.ndarray:
    return 32 - np.vectorize(lambda v: int(v).bit_length())(u).astype(np.int64)


def _clsb(x: np.ndarray) -> np.ndarray:
    """TFLite's CountLeadingSignBits (the portable branch)."""
    return np.where(x >= 0, _clz(np.where(x >= 0, x, 0)) - 1, _clz(np.where(x < 0, 2 * -x - 1, 0)))


def _one_over_one_plus_x(a: np.ndarray) -> np.ndarray:
    s = a + I32_MAX
    s = s + np.where(s >= 0, 1, -1)
    half = np.where(s >= 0, s // 2, -((-s) // 2))
    x = _wrap(1515870810 + _srdhm(half, -1010580540))
    for _ in range(3):
        x = _wrap(x + _sat_shl(_srdhm(x, _wrap((1 << 29) - _srdhm(half, x))), 2))
    return _sat_shl(x, 1)


def _quantize_multiplier(real: float) -> tuple[int, int]:
    q, e = math.frexp(real)
    m = int(math.floor(abs(q) * (1 << 31) + 0.5))
    if m == 1 << 31:
        m, e = m // 2, e + 1
    return (0, 0) if e < -31 else (m, e)


def _params(s1: float, z1: int, s2: float, z2: int, so: float, zo: int) -> dict[str, int]:
    f = np.float32
    m, sh = _quantize_multiplier(float(f(s1) / (f(s2) * f(so))))  # TFLite Micro: float32
    return {"z1": z1, "z2": z2, "zo": zo, "m": m, "sh": sh}


def _tfl_div(x1: np.ndarray, x2: np.ndarray, p: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(TFLite's result before the clamp, its final shift exponent) for v2 != 0."""
    v1 = np.asarray(x1, np.int64) - p["z1"]
    v2 = np.asarray(x2, np.int64) - p["z2"]
    v1, v2 = np.broadcast_arrays(v1, v2)
    assert (v2 != 0).all()
    v1 = np.where(v2 < 0, -v1, v1)
    v2 = np.abs(v2)
    hp1 = _clz(v2)
    inv = _one_over_one_plus_x((v2 << hp1) - (1 << 31))
    headroom = _clsb(v1)
    uq = _srdhm(v1 * (np.int64(1) << headroom), inv)
    e = (31 - hp1) + headroom - p["sh"]
    return p["zo"] + _rdbypot(_srdhm(uq, p["m"]), e), e


def _want(x1, x2, p, lo, hi) -> np.ndarray:
    """Our defined int8 DIV: TFLite's result (zero point where its shift exceeds 31), and
    the saturated sign of the numerator for a zero divisor."""
    v1 = np.asarray(x1, np.int64) - p["z1"]
    v2 = np.asarray(x2, np.int64) - p["z2"]
    v1, v2 = np.broadcast_arrays(v1, v2)
    r, e = _tfl_div(x1, np.where(v2 == 0, p["z2"] + 1, x2), p)
    r = np.where(e > 31, p["zo"], r)
    r = np.where(v2 == 0, np.where(v1 > 0, hi, np.where(v1 < 0, lo, p["zo"])), r)
    return np.clip(r, lo, hi)


# (s1, zp1, s2, zp2, so, zpo): the converter's a / b, small and large output scales, the
# largest output shift the kernel accepts, extreme zero points
CASES = [(2 / 255, -1, 2 / 255, -1, 11.1, 80), (0.02, 5, 0.03, -7, 0.004, -3), (0.5, 0, 0.01, 100, 0.8, -128),
         (0.1, -128, 0.1, 127, 1e-4, 0), (1e-3, 17, 0.2, -60, 3e-5, 127)]
GRID = np.arange(-128, 128, dtype=np.int64)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"so{c[4]:g}")
def test_shift_above_31_means_quotient_below_half_lsb(case):
    """Exhaustive over all 65280 (x1, x2) pairs with v2 != 0: exponent > 31 => |v1 s1 / (v2 s2
    so)| < 1/2 exactly (fractions), so the zero point is the correctly rounded result; and
    TFLite's arithmetic with a 64-bit shift gives exactly that zero point there."""
    s1, z1, s2, z2, so, zo = case
    p = _params(*case)
    x1, x2 = np.meshgrid(GRID, GRID[GRID != z2], indexing="ij")
    r, e = _tfl_div(x1, x2, p)
    deg = e > 31
    assert (~deg).any() and (deg.any() or so < 0.8)  # small output scales: shifts <= 31 everywhere
    assert (r[deg] == zo).all()
    k = Fraction(float(np.float32(s2))) * Fraction(float(np.float32(so)))
    s = Fraction(float(np.float32(s1)))
    # |v1| s / (|v2| k) < 1/2  <=>  2 |v1| s.num k.den < |v2| k.num s.den  (exact integers)
    v1 = np.abs(x1 - z1).astype(object)
    v2 = np.abs(x2 - z2).astype(object)
    below = 2 * v1 * (s.numerator * k.denominator) < v2 * (k.numerator * s.denominator)
    assert below[deg].all()
    # the converse does not hold: some quotients below 0.5 LSB keep a shift <= 31 (TFLite's
    # defined arithmetic rounds them to the zero point too, within one LSB of exact)
    exact = np.vectorize(lambda a, b: round(Fraction(int(a)) * s / (Fraction(int(b)) * k)))(x1 - z1, x2 - z2)
    assert np.abs(r[~deg] - zo - exact[~deg].astype(np.int64)).max() <= 1


def _grid_graph(cases, acts):
    b = _Builder()
    x1 = GRID.astype(np.int8).reshape(256, 1)
    x2 = GRID[::-1].astype(np.int8).copy().reshape(1, 256)
    outs = []
    for (s1, z1, s2, z2, so, zo), act in zip(cases, acts, strict=True):
        t1 = b.input(x1, Quant(np.float32([s1]), np.int64([z1])))
        t2 = b.input(x2, Quant(np.float32([s2]), np.int64([z2])))
        outs += b.op("DIV", [t1, t2], [(256, 256)], "int8", Quant(np.float32([so]), np.int64([zo])),
                     fused_activation_function=act)
    return b, x1, x2, outs


def test_kernel_every_input_pair_against_tflite_arithmetic():
    """ai_div_s8 over the 256 x 256 grid (a zero divisor in every case, the undefined domain,
    broadcasting both inputs) against the transcription, with each fused activation."""
    from stm32ai.passes.quant import activation_range_quantized

    acts = ["NONE", "RELU", "RELU6", "NONE", "RELU_N1_TO_1"]
    for k in (0, 3):  # at most 8 inputs per model
        b, x1, x2, outs = _grid_graph(CASES[k:k + 3], acts[k:k + 3])
        got = b.run(outs)
        for case, act, y in zip(CASES[k:k + 3], acts[k:k + 3], got, strict=True):
            s1, z1, s2, z2, so, zo = case
            lo, hi = activation_range_quantized(act, so, zo, "int8")
            want = _want(x1, x2, _params(*case), lo, hi)
            np.testing.assert_array_equal(y, want, err_msg=str(case))
        assert {op.kernel for op in b.g.ops} == {"div_s8"}


@pytest.mark.parametrize("name", DIV_OK)
def test_fixture_bit_exact_against_tflm_and_litert(name):
    res = validate_model(FIXTURES / f"{name}.tflite", n=3, seed=11)
    ran = {c.reference: c for c in res.comparisons if c.outputs}
    assert {"tflm", "litert-ref"} <= set(ran), [c.unavailable for c in res.comparisons]
    assert res.outcome == "match", res.outcome
    for c in ran.values():
        assert all(c.ok) and max(m.max_abs_err for m in c.outputs) == 0.0, c


def test_fixtures_present_and_int8_div():
    from stm32ai.frontend.tflite_reader import load_tflite

    for name in [*DIV_OK, "div_undefined_int8"]:
        g = load_tflite(FIXTURES / f"{name}.tflite")
        divs = [op for op in g.ops if op.type == "DIV"]
        assert divs and all(g.tensors[op.outputs[0]].dtype == "int8" for op in divs), name


@pytest.mark.parametrize("scales, words", [((10.0, 1e-3, 1e-3), ("DIV", "overflow int32")),
                                           ((1e29, 1e-29, 1e-29), ("DIV", "not finite"))])
def test_extreme_scales_refused(scales, words):
    s1, s2, so = scales
    b = _Builder()
    x = np.zeros((1, 4), np.int8)
    b.g.outputs = b.op("DIV", [b.input(x, Quant(np.float32([s1]), np.int64([0]))),
                               b.input(x, Quant(np.float32([s2]), np.int64([0])))],
                       [(1, 4)], "int8", Quant(np.float32([so]), np.int64([0])))
    with pytest.raises(UnsupportedModelError) as e:
        compile_graph(b.g)
    assert "\n" not in str(e.value) and all(w in str(e.value) for w in words), str(e.value)


def test_largest_accepted_output_shift_is_exact():
    """Scales just inside the generate-time check: the smallest exponent is 0 (no overflow),
    checked on the host against the transcription."""
    case = (2.0 ** 23 * 0.75, 0, 1.0, 0, 1.0, 0)
    p = _params(*case)
    x1 = GRID.reshape(256, 1)
    x2 = GRID[GRID != 0].reshape(1, 255)
    assert _tfl_div(x1, x2, p)[1].min() == 0
    b, gx1, gx2, outs = _grid_graph([case], ["NONE"])
    got = b.run(outs)[0]
    np.testing.assert_array_equal(got, _want(gx1, gx2, p, -128, 127))


@pytest.mark.slow
def test_validate_reports_undefined_reference(tmp_path):
    """Plain a / b: random inputs hit TFLite's undefined domain; validate says so in one line
    and the result is `unverified` (exit code 2), not a pass."""
    r = subprocess.run([sys.executable, "-m", "stm32ai", "validate", str(FIXTURES / "div_undefined_int8.tflite"),
                        "-n", "2"], capture_output=True, text=True, timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("reference undefined:")]
    assert len(lines) == 1, r.stdout + r.stderr
    assert "int8 DIV" in lines[0] and " of " in lines[0] and "zero point" in lines[0], lines[0]
    assert "result: unverified" in r.stdout and r.returncode == 2, (r.returncode, r.stdout[-400:])
    assert "MISMATCH" not in r.stdout


def test_undefined_fixture_matches_tflm_where_defined():
    """div_undefined (a / b straight from the graph inputs): ours equals TFLite Micro on every
    element outside TFLite's undefined domain (found with the transcription), and there gives
    the zero point; the reference result is flagged `unverified` in-process too."""
    from stm32ai.pipeline import compile_model
    from stm32ai.validate.host import run_compiled
    from stm32ai.validate.reference import random_inputs, run_tflm

    model = FIXTURES / "div_undefined_int8.tflite"
    c = compile_model(model, "network")
    xs = random_inputs(model, 1, 5)
    ref = run_tflm(model, xs)[0]
    g = c.graph
    ours = run_compiled(c, [[x[0] for x in xs]])[0][0].reshape(ref.shape)
    div = next(op for op in g.ops if op.type == "DIV")
    x1, x2 = (xs[g.inputs.index(t)] for t in div.inputs)  # the converter lists b before a
    q = [g.tensors[t].quant for t in (*div.inputs, div.outputs[0])]
    p = {k: int(v) for k, v in _params(*(float(v) for qq in q for v in (qq.scale[0], qq.zero_point[0]))).items()}
    v2 = x2.astype(np.int64) - p["z2"]
    _, e = _tfl_div(x1, np.where(v2 == 0, p["z2"] + 1, x2), p)
    undefined = (e > 31) | (v2 == 0)
    assert undefined.any() and (~undefined).any()
    np.testing.assert_array_equal(ours[~undefined], ref[~undefined])
    assert (ours[(e > 31) & (v2 != 0)] == p["zo"]).all()
    res = validate_model(model, xs, n=1)
    assert res.outcome == "unverified" and len(res.undefined) == 1 and not res.passed


def test_demo_vector_avoids_undefined_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's test vector: div_undefined reaches the undefined domain on every seed tried,
    so no expected output (with a warning); div_norm keeps TFLM's expected output."""
    from stm32ai.pipeline import compile_model
    from stm32ai.validate.vectors import UNDEFINED_RETRIES, test_vector

    bad = FIXTURES / "div_undefined_int8.tflite"
    tv = test_vector(bad, compile_model(bad, "network"))
    err = capsys.readouterr().err
    assert tv.expected is None and "reference undefined: int8 DIV" in err, err
    assert f"seeds 0..{UNDEFINED_RETRIES - 1}" in err and "no-reference" in err
    good = FIXTURES / "div_norm_int8.tflite"
    tv = test_vector(good, compile_model(good, "network"))
    assert tv.expected is not None and "TFLite Micro" in (tv.reference or "")
