"""Hand-computed checks of the X-CUBE-AI-style metrics and the pass rule of docs/references.md."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stm32ai.validate.metrics import compute_metrics, dequantize, passes


def test_float_metrics_by_hand():
    r = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    c = np.array([1.0, 2.0, 3.0, 5.0], np.float32)
    m = compute_metrics(c, r)
    assert m.rmse == pytest.approx(0.5)                   # sqrt(1/4)
    assert m.mae == pytest.approx(0.25)                   # 1/4
    assert m.l2r == pytest.approx(1 / math.sqrt(30))      # ||d|| = 1, ||r|| = sqrt(30)
    assert m.cos == pytest.approx(34 / math.sqrt(30 * 39))
    assert m.max_abs_err == 1.0
    assert m.max_rel_err == pytest.approx(0.25)           # 1 / max|r| = 1/4
    assert m.acc == 1.0                                   # argmax 3 on both sides
    assert m.max_lsb is None
    assert m.dtype == "float32"
    assert not passes(m, np.float32)


def test_int8_metrics_dequantised_and_lsb():
    # scale 0.5, zp -1: r -> [0, 1, 2], c -> [0, 1.5, 2]
    r = np.array([-1, 1, 3], np.int8)
    c = np.array([-1, 2, 3], np.int8)
    m = compute_metrics(c, r, scale=0.5, zero_point=-1)
    assert m.max_lsb == 1
    assert m.max_abs_err == pytest.approx(0.5)
    assert m.rmse == pytest.approx(math.sqrt(0.25 / 3))
    assert m.mae == pytest.approx(0.5 / 3)
    assert m.l2r == pytest.approx(0.5 / math.sqrt(5))
    assert m.cos == pytest.approx(5.5 / (math.sqrt(5) * 2.5))
    assert m.max_rel_err == pytest.approx(0.25)           # 0.5 / 2
    assert m.acc == 1.0
    assert not passes(m, np.int8)                         # not bit-exact
    assert passes(m, np.int8, allowance_lsb=1)            # a documented 1-LSB allowance
    assert not passes(m)                                  # dtype taken from the metrics
    # Without quantisation parameters the float metrics are in raw units.
    raw = compute_metrics(c, r)
    assert raw.max_abs_err == 1.0 and raw.max_lsb == 1


def test_bit_exact_integer_outputs_pass():
    r = np.array([[5, -7, 127, -128]], np.int8)
    m = compute_metrics(r.copy(), r, scale=[0.1], zero_point=[3])
    assert m.max_lsb == 0 and m.rmse == 0.0 and m.l2r == 0.0 and m.max_abs_err == 0.0
    assert m.cos == pytest.approx(1.0)
    assert passes(m, "int8")
    i32 = np.array([1 << 30, -(1 << 30)], np.int32)
    assert passes(compute_metrics(i32, i32), np.int32)
    i16 = np.array([32767, -32768], np.int16)
    assert compute_metrics(i16[::-1], i16).max_lsb == 65535   # no int16 wrap-around


def test_uint8_lsb_does_not_wrap():
    m = compute_metrics(np.array([0], np.uint8), np.array([255], np.uint8))
    assert m.max_lsb == 255
    assert not passes(m, np.uint8, allowance_lsb=1)


def test_top1_agreement_over_batch():
    r = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    c = np.array([[0.2, 0.8], [0.4, 0.6], [0.1, 0.9]])
    assert compute_metrics(c, r).acc == pytest.approx(2 / 3)
    # Not classification-like: rank > 2, or a single score per sample.
    assert compute_metrics(np.zeros((1, 4, 4, 3)), np.zeros((1, 4, 4, 3))).acc is None
    assert compute_metrics(np.zeros((3, 1)), np.zeros((3, 1))).acc is None
    # Quantised scores: agreement decided on the dequantised values (same argmax here).
    q = compute_metrics(np.array([[-128, 10, 3]], np.int8), np.array([[-128, 9, 3]], np.int8),
                        scale=1 / 256, zero_point=-128)
    assert q.acc == 1.0 and q.max_lsb == 1


def test_float_relative_error_bar():
    # Exactly representable in float32: 2^-9 / 256 = 7.6e-6 passes, 2^-7 / 256 = 3.1e-5 fails.
    r = np.array([128.0, -256.0], np.float32)
    ok = compute_metrics(np.array([128.0, -256.0 + 2**-9], np.float32), r)
    assert ok.max_rel_err == pytest.approx(2**-9 / 256)
    assert passes(ok, np.float32)
    bad = compute_metrics(np.array([128.0, -256.0 + 2**-7], np.float32), r)
    assert not passes(bad, np.float32)
    assert passes(bad, np.float32, rtol=1e-4)


def test_zero_reference():
    z = np.zeros(4, np.float32)
    m = compute_metrics(z, z)
    assert (m.l2r, m.cos, m.max_rel_err, m.rmse) == (0.0, 1.0, 0.0, 0.0)
    assert passes(m, np.float32)
    m = compute_metrics(np.array([0, 0, 0, 1e-3], np.float32), z)
    assert m.l2r == math.inf and m.cos == 0.0
    assert not passes(m, np.float32)


def test_nan_fails():
    r = np.array([1.0, 2.0], np.float32)
    m = compute_metrics(np.array([1.0, np.nan], np.float32), r)
    assert m.max_abs_err == math.inf
    assert not passes(m, np.float32)


def test_per_axis_dequantize():
    q = np.array([[[1, 2, 3], [4, 5, 6]]], np.int8)             # shape (1, 2, 3), axis 2
    x = dequantize(q, [1.0, 2.0, 4.0], [0, 1, -1], axis=2)
    np.testing.assert_allclose(x, [[[1, 2, 16], [4, 8, 28]]])
    np.testing.assert_allclose(dequantize(q, [1.0, 2.0, 4.0], [0, 1, -1], axis=-1), x)
    with pytest.raises(ValueError, match="axis"):
        dequantize(q, [1.0, 2.0, 4.0], [0, 1, -1])
    m = compute_metrics(q, q - np.array([0, 0, 1], np.int8), [1.0, 2.0, 4.0], [0, 1, -1], axis=2)
    assert m.max_lsb == 1 and m.max_abs_err == 4.0               # 1 LSB in channel 2 is 4.0


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape mismatch"):
        compute_metrics(np.zeros(3), np.zeros(4))


def test_bool_outputs_exact():
    a = np.array([True, False])
    assert passes(compute_metrics(a, a), np.bool_)
    assert not passes(compute_metrics(~a, a), np.bool_)


def test_as_dict_names():
    d = compute_metrics(np.ones((1, 3)), np.ones((1, 3))).as_dict()
    for key in ("acc", "rmse", "mae", "l2r", "cos", "max_abs_err", "max_lsb", "max_rel_err"):
        assert key in d
