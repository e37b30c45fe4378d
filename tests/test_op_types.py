"""Type variants TFLite Micro accepts that we once refused (issue 20, item 3), bit-exact
against TFLM on hand-built single-op models: SOFTMAX int8 -> int16 (the SVDF keyword-spotting
head) and QUANTIZE between int32 and int8/int16. The audit of every operator's accepted type
combinations against TFLM's (docs/op_types.md) is at the end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from builders import TfliteBuilder
from builders import schema as S

from stm32ai.pipeline import compile_model
from stm32ai.validate.host import run_compiled
from stm32ai.validate.reference import run_tflm

pytest.importorskip("tflite_micro")


def _unary(path: Path, code: int, x_t: tuple, y_t: tuple, shape: list[int],
           opts: tuple[int, object] | None = None) -> Path:
    """One op, input (dtype, scale, zp) -> output (dtype, scale, zp)."""
    b = TfliteBuilder()
    x = b.tensor(shape, x_t[0], x_t[1], x_t[2])
    y = b.tensor(shape, y_t[0], y_t[1], y_t[2])
    b.op(code, [x], [y], *(opts or (0, None)))
    b.inputs, b.outputs = [x], [y]
    path.write_bytes(b.build())
    return path


def _check(path: Path, rows: np.ndarray) -> None:
    """Every row of `rows` as one sample: ours == TFLM's, element for element."""
    ref = run_tflm(path, [rows])[0]
    c = compile_model(path)
    ours = np.concatenate([o[0] for o in run_compiled(c, [[r[None]] for r in rows])])
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    bad = np.flatnonzero(ours != ref)
    assert bad.size == 0, (f"{bad.size} of {ref.size} differ, first at {bad[0]}: "
                           f"{ours.flat[bad[0]]} vs {ref.flat[bad[0]]}")


def _softmax_opts(beta: float) -> tuple[int, object]:
    o = S.SoftmaxOptionsT()
    o.beta = beta
    return S.BuiltinOptions.SoftmaxOptions, o


@pytest.mark.parametrize("in_scale,in_zp,beta,depth", [
    (0.0625, -20, 1.0, 12),      # the keyword models' head: a few classes
    (0.1, 5, 1.0, 3),
    (0.02, -128, 2.5, 40),
    (0.35, 100, 0.7, 7),
])
def test_softmax_int8_to_int16_matches_tflm(tmp_path, in_scale, in_zp, beta, depth):
    p = _unary(tmp_path / "sm.tflite", S.BuiltinOperator.SOFTMAX, ("int8", in_scale, in_zp),
               ("int16", 1.0 / 65536, -32768), [1, depth], _softmax_opts(beta))
    rng = np.random.default_rng(depth)
    rows = rng.integers(-128, 128, (24, depth)).astype(np.int8)
    rows[0] = 127                                  # all equal: the largest sum of exps
    rows[1] = -128
    rows[2, 0] = 127                               # one large value, the rest tiny
    rows[2, 1:] = -128
    _check(p, rows)


def test_softmax_int8_to_int16_needs_tflm_output_quantisation(tmp_path):
    from stm32ai.errors import Stm32aiError

    # TFLM's Prepare: zero point -32768 and scale within 0.001/65536 of 1/65536
    ok = _unary(tmp_path / "ok.tflite", S.BuiltinOperator.SOFTMAX, ("int8", 0.1, 0),
                ("int16", 1.5259e-05, -32768), [1, 4], _softmax_opts(1.0))
    compile_model(ok)
    for scale, zp in ((1.0 / 32768, 0), (1.6e-05, -32768), (1.0 / 65536, 0)):
        bad = _unary(tmp_path / "bad.tflite", S.BuiltinOperator.SOFTMAX, ("int8", 0.1, 0),
                     ("int16", scale, zp), [1, 4], _softmax_opts(1.0))
        with pytest.raises(Stm32aiError, match="1/65536"):
            compile_model(bad)


@pytest.mark.parametrize("src,dst,qi,qo", [
    ("int8", "int32", (0.05, -3), (0.0005, 0)),        # multiplier > 1: left shift
    ("int8", "int32", (0.05, 10), (0.3, -7)),          # < 1, non-zero output zero point
    ("int16", "int32", (0.001, 0), (0.00002, 0)),
    ("int16", "int32", (0.001, 3), (0.01, 100)),
    ("int32", "int8", (0.0005, 0), (0.05, -3)),
    ("int32", "int8", (0.002, 17), (0.08, 5)),
    ("int32", "int16", (0.00002, 0), (0.001, 0)),
    ("int32", "int16", (0.01, -9), (0.0004, 2)),
])
def test_quantize_int32_pairs_match_tflm(tmp_path, src, dst, qi, qo):
    p = _unary(tmp_path / "q.tflite", S.BuiltinOperator.QUANTIZE, (src, *qi), (dst, *qo), [1, 64])
    rng = np.random.default_rng(7)
    info = np.iinfo(src)
    if src == "int32":
        # wide values that saturate int8/int16 outputs, small ones around the zero point, and
        # the extremes whose (q - zero point) still fits int32 (TFLite: overflow undefined)
        rows = np.concatenate([rng.integers(-1 << 24, 1 << 24, (4, 64)), rng.integers(-300, 300, (4, 64))])
        rows[0, :2] = (info.min + max(qi[1], 0), info.max + min(qi[1], 0))
    else:
        rows = rng.integers(info.min, int(info.max) + 1, (8, 64))
        rows[0, :2] = (info.min, info.max)
    _check(p, rows.astype(src))


@pytest.mark.parametrize("op,qi,qo", [
    ("RELU", (0.001, 0), (0.0007, 0)),       # multiplier > 1
    ("RELU", (0.002, 0), (0.003, 0)),        # < 1 (TFLM: int16 RELU zero points 0)
    ("RELU6", (0.0002, 0), (0.0002, 0)),     # six inside the int16 range: clamps there
    ("RELU6", (0.001, -7), (0.5, 3)),        # output quantisation not read
])
def test_relu_int16_matches_tflm_on_every_value(tmp_path, op, qi, qo):
    p = _unary(tmp_path / "r.tflite", getattr(S.BuiltinOperator, op), ("int16", *qi), ("int16", *qo), [1, 4096])
    _check(p, np.arange(-32768, 32768).reshape(16, 4096).astype(np.int16))


@pytest.mark.parametrize("alpha,qi,qo", [
    (0.2, (0.001, 0), (0.0008, 0)),
    (0.01, (0.0005, 12), (0.0011, -30)),
    (3.0, (0.001, -3), (0.004, 5)),          # alpha > 1
    (-0.5, (0.002, 0), (0.002, 0)),          # negative: ties of x * alpha toward zero, as TFLM
    (-3.0, (0.001, 4), (0.004, -6)),
])
def test_leaky_relu_int16_matches_tflm_on_every_value(tmp_path, alpha, qi, qo):
    o = S.LeakyReluOptionsT()
    o.alpha = alpha
    p = _unary(tmp_path / "lr.tflite", S.BuiltinOperator.LEAKY_RELU, ("int16", *qi), ("int16", *qo), [1, 4096],
               (S.BuiltinOptions.LeakyReluOptions, o))
    _check(p, np.arange(-32768, 32768).reshape(16, 4096).astype(np.int16))


@pytest.mark.parametrize("axes,keep,qi,qo", [
    ([1, 2], True, (0.001, 0), (0.004, 0)),
    ([2], False, (0.0005, 0), (0.0003, 0)),     # multiplier > 1: saturates
    ([0, 1, 2, 3], True, (0.002, 0), (0.02, 0)),
])
def test_sum_int16_matches_tflm(tmp_path, axes, keep, qi, qo):
    b = TfliteBuilder()
    x = b.tensor([1, 5, 6, 3], "int16", *qi)
    ax = b.tensor([len(axes)], "int32", data=np.array(axes))
    out = [1 if (d in axes) else n for d, n in enumerate([1, 5, 6, 3])]
    if not keep:
        out = [n for d, n in enumerate([1, 5, 6, 3]) if d not in axes]
    y = b.tensor(out, "int16", *qo)
    o = S.ReducerOptionsT()
    o.keepDims = keep
    b.op(S.BuiltinOperator.SUM, [x, ax], [y], S.BuiltinOptions.ReducerOptions, o)
    b.inputs, b.outputs = [x], [y]
    p = tmp_path / "sum.tflite"
    p.write_bytes(b.build())
    rng = np.random.default_rng(5)
    for lo, hi in ((-32768, 32768), (-300, 300)):
        xs = rng.integers(lo, hi, (1, 5, 6, 3)).astype(np.int16)
        assert np.array_equal(run_compiled(compile_model(p), [[xs]])[0][0], run_tflm(p, [xs])[0])


@pytest.mark.parametrize("alpha,qi,qo", [(-0.5, (0.05, 0), (0.05, 0)), (-0.125, (0.05, 5), (0.025, -7)),
                                         (-3.0, (0.01, 0), (0.04, 3))])
def test_leaky_relu_int8_negative_alpha_matches_tflm(tmp_path, alpha, qi, qo):
    """int8 LEAKY_RELU with a negative alpha: TFLM rounds the ties of x * alpha toward zero
    (activations.leaky_relu_alpha); every int8 value."""
    o = S.LeakyReluOptionsT()
    o.alpha = alpha
    p = _unary(tmp_path / "lr8.tflite", S.BuiltinOperator.LEAKY_RELU, ("int8", *qi), ("int8", *qo), [1, 256],
               (S.BuiltinOptions.LeakyReluOptions, o))
    _check(p, np.arange(-128, 128).reshape(1, 256).astype(np.int8))


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
@pytest.mark.parametrize("dtype", ["int16", "int64"])
def test_maximum_minimum_int16_int64_match_tflm(tmp_path, op, dtype):
    """Stored values compared; int16 shares one quantisation, int64 is plain; broadcasting."""
    b = TfliteBuilder()
    q = (0.001, 0) if dtype == "int16" else (None, None)
    x1, x2 = b.tensor([2, 3, 5], dtype, *q), b.tensor([3, 1], dtype, *q)
    y = b.tensor([2, 3, 5], dtype, *q)
    b.op(getattr(S.BuiltinOperator, op), [x1, x2], [y])
    b.inputs, b.outputs = [x1, x2], [y]
    p = tmp_path / "mm.tflite"
    p.write_bytes(b.build())
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (2, 3, 5), dtype=dtype, endpoint=True)
    c = rng.integers(info.min, info.max, (3, 1), dtype=dtype, endpoint=True)
    a[0, 0, :2] = (info.min, info.max)
    ref = run_tflm(p, [a[None][0], c])[0]
    assert np.array_equal(run_compiled(compile_model(p), [[a, c]])[0][0], ref)
    assert np.array_equal(ref, np.maximum(a, c) if op == "MAXIMUM" else np.minimum(a, c))


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"])
def test_int4_weights_match_tflm(tmp_path, op):
    """TFLM's packed int4 filters (two per byte, low nibble first): the frontend unpacks them to
    int8; every int4 value occurs."""
    rng = np.random.default_rng(4)
    b = TfliteBuilder()
    if op == "FULLY_CONNECTED":
        xs, ws, ys, n = [1, 9], [5, 9], [1, 5], 5          # odd element count: a half-used last byte
    elif op == "DEPTHWISE_CONV_2D":
        xs, ws, ys, n = [1, 5, 5, 3], [1, 3, 3, 3], [1, 5, 5, 3], 3
    else:
        xs, ws, ys, n = [1, 5, 5, 3], [4, 3, 3, 3], [1, 5, 5, 4], 4
    axis = 3 if op == "DEPTHWISE_CONV_2D" else 0
    # per-channel, except FC: TFLM's int4 FC takes per-tensor weights only (fully_connected_common.cc)
    w_scale = rng.uniform(0.01, 0.05, n) if op != "FULLY_CONNECTED" else np.float64(0.03)
    zp = np.zeros(np.size(w_scale), int)
    x = b.tensor(xs, "int8", 0.05, -3)
    w = b.tensor(ws, "int4", w_scale, zp, data=rng.integers(-8, 8, ws), axis=axis)
    bias = b.tensor([n], "int32", 0.05 * w_scale, zp, data=rng.integers(-500, 500, n))
    y = b.tensor(ys, "int8", 0.08, 2)
    if op == "FULLY_CONNECTED":
        b.op(S.BuiltinOperator.FULLY_CONNECTED, [x, w, bias], [y], S.BuiltinOptions.FullyConnectedOptions,
             S.FullyConnectedOptionsT())
    elif op == "DEPTHWISE_CONV_2D":
        o = S.DepthwiseConv2DOptionsT()
        o.padding, o.strideW, o.strideH, o.depthMultiplier = S.Padding.SAME, 1, 1, 1
        o.dilationWFactor = o.dilationHFactor = 1
        b.op(S.BuiltinOperator.DEPTHWISE_CONV_2D, [x, w, bias], [y], S.BuiltinOptions.DepthwiseConv2DOptions, o)
    else:
        o = S.Conv2DOptionsT()
        o.padding, o.strideW, o.strideH = S.Padding.SAME, 1, 1
        o.dilationWFactor = o.dilationHFactor = 1
        b.op(S.BuiltinOperator.CONV_2D, [x, w, bias], [y], S.BuiltinOptions.Conv2DOptions, o)
    b.inputs, b.outputs = [x], [y]
    p = tmp_path / "int4.tflite"
    p.write_bytes(b.build())
    samples = [rng.integers(-128, 128, xs).astype(np.int8) for _ in range(4)]
    ours = run_compiled(compile_model(p), [[s] for s in samples])
    for s, got in zip(samples, ours, strict=True):
        assert np.array_equal(got[0], run_tflm(p, [s])[0])


def test_int4_unpacking_order():
    from stm32ai.frontend.tflite_reader import unpack_int4

    # bytes 0x8F, 0x07: low nibble first, two's complement; the last high nibble unused
    assert unpack_int4(bytes([0x8F, 0x07]), 3).tolist() == [-1, -8, 7]


def test_quantize_refusals_name_the_supported_pairs(tmp_path):
    from stm32ai.errors import Stm32aiError

    # float32 -> int32: TFLM refuses it too (docs/op_types.md)
    p = _unary(tmp_path / "q.tflite", S.BuiltinOperator.QUANTIZE, ("float32", None, None),
               ("int32", 0.001, 0), [1, 4])
    with pytest.raises(Stm32aiError, match="not supported"):
        compile_model(p)


# ---- the audit: docs/op_types.md ------------------------------------------------------------

@pytest.mark.parametrize("op", ["DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"])
def test_tflm_reads_an_int32_bias_as_int64(tmp_path, op):
    """The evidence for op_types_probe.EXCLUSIONS: TFLM's int16 depthwise and transpose
    convolutions give other results for one bias stored as int32 than as int64 (they read
    int64), so an int32 bias there has no reference result to be bit-exact with."""
    def model(bias_type: str) -> Path:
        b = TfliteBuilder()
        x = b.tensor([1, 4, 4, 3], "int16", 0.001, 0)
        bias = b.tensor([3], bias_type, 0.00002, 0, data=np.array([1000, -2000, 3000]))
        y = b.tensor([1, 4, 4, 3], "int16", 0.002, 0)
        if op == "DEPTHWISE_CONV_2D":
            w = b.tensor([1, 1, 1, 3], "int8", 0.02, 0, data=np.array([3, -5, 7]).reshape(1, 1, 1, 3))
            o = S.DepthwiseConv2DOptionsT()
            o.padding, o.strideW, o.strideH, o.depthMultiplier = S.Padding.SAME, 1, 1, 1
            o.dilationWFactor = o.dilationHFactor = 1
            b.op(S.BuiltinOperator.DEPTHWISE_CONV_2D, [x, w, bias], [y], S.BuiltinOptions.DepthwiseConv2DOptions, o)
        else:
            w = b.tensor([3, 1, 1, 3], "int8", 0.02, 0, data=np.arange(9).reshape(3, 1, 1, 3) - 4)
            shape = b.tensor([4], "int32", data=np.array([1, 4, 4, 3]))
            o = S.TransposeConvOptionsT()
            o.padding, o.strideW, o.strideH = S.Padding.SAME, 1, 1
            b.op(S.BuiltinOperator.TRANSPOSE_CONV, [shape, w, x, bias], [y], S.BuiltinOptions.TransposeConvOptions, o)
        b.inputs, b.outputs = [x], [y]
        p = tmp_path / f"{bias_type}.tflite"
        p.write_bytes(b.build())
        return p

    xs = np.random.default_rng(0).integers(-3000, 3000, (1, 4, 4, 3)).astype(np.int16)
    as32, as64 = (run_tflm(model(t), [xs])[0] for t in ("int32", "int64"))
    assert not np.array_equal(as32, as64)
    assert np.array_equal(run_compiled(compile_model(model("int64")), [[xs]])[0][0], as64)

def test_we_accept_every_type_combination_tflm_accepts():
    """For every probed operator and type combination that TFLite Micro accepts (the committed
    probe results), our compiler compiles the single-op model too, except the reasoned
    EXCLUSIONS; and docs/op_types.md is what the probe renders from today's compiler."""
    import json

    import op_types_probe as probe

    tflm = json.loads(probe.TFLM_JSON.read_text())
    cases = {(c.op, c.combo): c for c in probe.all_cases()}
    assert set(cases) == {(op, combo) for op, d in tflm.items() for combo in d}, \
        "the probe's cases changed: run python tests/op_types_probe.py"
    ours = probe.probe_ours()
    gaps = [f"{op} {combo}: {ours[op][combo]}" for (op, combo) in cases
            if tflm[op][combo] is None and ours[op][combo] is not None and (op, combo) not in probe.EXCLUSIONS]
    assert not gaps, "TFLM accepts, we refuse:\n" + "\n".join(gaps)
    stale = [k for k in probe.EXCLUSIONS if k not in cases or tflm[k[0]][k[1]] is not None
             or ours[k[0]][k[1]] is None]
    assert not stale, f"exclusions that no longer apply: {stale}"
    assert probe.DOC.read_text() == probe.render(tflm, ours), \
        "docs/op_types.md is out of date: run python tests/op_types_probe.py --reuse-tflm"


@pytest.mark.slow
def test_committed_tflm_results_match_the_installed_tflm():
    """The committed TFLM column is what the installed tflite-micro wheel does (a new wheel
    that accepts more shows up here)."""
    import json

    import op_types_probe as probe

    assert probe.probe_tflm() == json.loads(probe.TFLM_JSON.read_text())
