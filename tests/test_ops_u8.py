"""Legacy uint8 models (passes/legacy_u8.py, passes/lower/u8.py, ai_conv_dw_u8.c, ai_fc_u8.c,
ai_pool_u8.c; docs/kernels_u8.md).

* the u8_* fixtures (TF1 QAT graphs converted by TF2's compat converter with uint8 inference:
  tests/fixtures/make_fixtures_u8.py) run bit-exact against LiteRT with its reference kernels,
  which is the verdict; TFLite Micro refuses them and validate says why;
* the identity the lowering rests on, checked exhaustively: shifting codes and zero point by
  128 keeps every difference q - zp and moves TFLite's clamp range by 128;
* hand cases where uint8 and int8 arithmetic differ after the shift (the average's rounding,
  CONCATENATION's float rescaling) against hand-computed values;
* weights re-centred beyond int8 survive the layout choices (--optimization time/ram) and the
  flash staging of a board with wait states;
* every activation on all 256 codes, random quantisations, against LiteRT-ref (hand-built
  single-op models);
* an op whose uint8 arithmetic is not the shifted int8 one is refused, with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op, Quant
from stm32ai.passes.legacy_u8 import EXACT_OPS, shift_uint8
from stm32ai.passes.lower.u8 import concat_rescale_values
from stm32ai.passes.quant import activation_range_quantized
from stm32ai.pipeline import compile_for_board, compile_graph
from stm32ai.validate.host import run_compiled
from stm32ai.validate.run import validate_model

U8_FIXTURES = sorted(FIXTURES.glob("u8_*.tflite"))


def _exact_against_litert(res, what: str) -> None:
    assert res.verdict_label == "litert-ref", [(c.reference, c.unavailable) for c in res.comparisons]
    tflm = next(c for c in res.comparisons if c.reference == "tflm")
    assert tflm.overruled and "legacy uint8" in tflm.overruled and not tflm.verdict
    v = next(c for c in res.comparisons if c.verdict)
    assert v.outputs
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok and m.max_abs_err == 0, f"{what} output {j}: {m.as_dict()}"


@pytest.mark.parametrize("model", U8_FIXTURES, ids=lambda p: p.stem)
def test_fixture_bit_exact(model):
    _exact_against_litert(validate_model(model, n=20, seed=5), model.name)


def test_fixtures_present():
    assert {p.stem.removesuffix("_uint8") for p in U8_FIXTURES} == {
        "u8_conv", "u8_dw", "u8_fc", "u8_pool", "u8_eltwise", "u8_head", "u8_act_a", "u8_act_b", "u8_resize_mean",
        "u8_mix"}


@pytest.mark.parametrize("optimization", ["time", "ram"])
def test_weight_layouts_keep_wide_weights(optimization):
    model = FIXTURES / "u8_conv_uint8.tflite"
    # stripes off: the layouts are asserted on the top-level ops (stripes: tests/test_stripes.py)
    c = compile_for_board(model, "network", None, optimization=optimization, stripes=False)
    convs = [op for op in c.graph.ops if op.kernel == "conv2d_s8"]
    assert len(convs) == 3 and all(op.attrs["w16"] == 1 for op in convs)
    assert all(c.graph.tensors[op.inputs[1]].dtype == "int16" for op in convs)
    _exact_against_litert(validate_model(model, n=10, seed=6, compiled=c), f"{model.name} {optimization}")


def test_staging_board_keeps_wide_weights():
    """A board whose flash has wait states: staging would store int8 weights in flash, which
    cannot hold re-centred uint8 filters; such layers stay unstaged and exact."""
    model = FIXTURES / "u8_mix_uint8.tflite"
    c = compile_for_board(model, "network", "nucleo-f746zg", optimization="time")
    assert c.flash is not None
    for op in c.graph.ops:
        if op.kernel == "conv2d_s8":
            w = np.asarray(c.graph.tensors[op.inputs[1]].data)
            assert w.dtype == np.int16 and np.abs(w.astype(np.int32)).max() > 127
            assert op.attrs["stage_oc"] == 0
    _exact_against_litert(validate_model(model, n=10, seed=7, compiled=c), model.name)


def test_shift_identity_exhaustive():
    q = np.arange(256)[:, None]
    zp = np.arange(256)[None, :]
    assert np.array_equal(q - zp, (q - 128) - (zp - 128))
    for act in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        for scale in (0.0037, 0.02352941, 0.5, 7.0):
            for z in (0, 1, 77, 128, 200, 255):
                lo_u, hi_u = activation_range_quantized(act, scale, z, "uint8")
                lo_s, hi_s = activation_range_quantized(act, scale, z - 128, "int8")
                assert (lo_s, hi_s) == (lo_u - 128, hi_u - 128), (act, scale, z)


def test_w16_layout_holds_wide_values():
    """conv.pack_conv_weights_s16 / conv_rows_for_kernel (shared with int8) keep re-centred
    uint8 weights beyond int8 (hand-computed layout: {w0, w2}, {w1, w3}, K padded to 4)."""
    from stm32ai.passes.lower.conv import ConvGeometry, conv_rows_for_kernel, pack_conv_weights_s16

    wide = np.array([[255, -255, 3, 0, 7]], np.int16)
    assert pack_conv_weights_s16(wide).tolist() == [255, 3, -255, 0, 7, 0, 0, 0]
    two = np.array([[-200, 1, 2, 3], [4, 5, 6, 250]], np.int16)
    assert pack_conv_weights_s16(two).tolist() == [-200, 2, 1, 3, 4, 6, 5, 250]
    # krow: a 2x1 filter on 3 channels, each 3-element filter row padded to 4, int16 kept
    geo = ConvGeometry(1, 4, 4, 3, 4, 4, 1, 2, 1, (1, 1), (1, 1), (0, 0))
    rows = np.array([[-255, 1, 2, 3, 4, 255]], np.int16)
    out = conv_rows_for_kernel(geo, rows)
    assert out.dtype == np.int16 and out.tolist() == [[-255, 1, 2, 0, 3, 4, 255, 0]]
    with pytest.raises(ValueError):
        pack_conv_weights_s16(np.array([[40000]]))


def _u8(g: Graph, name: str, shape: tuple[int, ...], scale: float, zp: int, data: np.ndarray | None = None) -> int:
    return g.add_tensor(name, shape, "uint8", Quant(np.float32([scale]), np.int64([zp])), data)


def test_avgpool_rounds_half_up_like_uint8():
    """LiteRT's uint8 average: (sum + n/2) / n on codes 0..255. After the shift a sum can be
    negative, where the int8 kernel's half-away rounding would go down: {127, 128} -> 128."""
    g = Graph("t", [], [], [], [])
    x = _u8(g, "x", (1, 1, 8, 1), 0.1, 100)
    y = _u8(g, "y", (1, 1, 4, 1), 0.1, 100)
    g.ops.append(Op("AVERAGE_POOL_2D", [x], [y], {"filter_height": 1, "filter_width": 2, "stride_h": 1,
                                                  "stride_w": 2, "padding": "VALID"}, 0))
    g.inputs, g.outputs = [x], [y]
    c = compile_graph(g)
    assert "avgpool_u8" in [op.kernel for op in c.graph.ops]
    data = np.uint8([[127, 128, 0, 1, 254, 255, 3, 6]]).reshape(1, 1, 8, 1)
    (out,) = run_compiled(c, [[data]])[0]
    assert out.dtype == np.uint8
    assert out.reshape(-1).tolist() == [128, 1, 255, 5]  # hand: 255/2, 1/2, 509/2, 9/2 rounded half up


def test_concat_rescale_hand_values():
    """ConcatenationWithScaling in float32: round(u * s + b) + zp_out, s = s_in / s_out."""
    vals = concat_rescale_values(0.5, 10, 0.25, 3)
    # u = 0: round(-20) + 3 = -17 -> clamp 0; u = 10: 3; u = 60: 103; u = 200: 383 -> 255
    assert [vals[u] + 128 for u in (0, 10, 60, 200)] == [0, 3, 103, 255]
    half = concat_rescale_values(1.0, 0, 2.0, 0)  # u / 2, ties away from zero: 1 -> 1, 3 -> 2
    assert [half[u] + 128 for u in (0, 1, 2, 3, 255)] == [0, 1, 1, 2, 128]


def test_unverified_op_refused():
    g = Graph("t", [], [], [], [])
    x = _u8(g, "x", (1, 4), 0.05, 120)
    y = _u8(g, "y", (1, 4), 1 / 128, 128)
    g.ops.append(Op("L2_NORMALIZATION", [x], [y], {}, 0))
    g.inputs, g.outputs = [x], [y]
    assert "L2_NORMALIZATION" not in EXACT_OPS
    with pytest.raises(UnsupportedModelError, match="legacy uint8 model: L2_NORMALIZATION on uint8 tensors is not"):
        shift_uint8(g)


def test_io_stays_uint8_and_native_ops_untouched():
    """Graph inputs/outputs keep uint8 in the API (QUANTIZE at the boundary); a uint8 tensor
    only QUANTIZE touches (uint8 input of an int8 model) is left as it is."""
    g = Graph("t", [], [], [], [])
    x = _u8(g, "x", (1, 4), 0.05, 120)
    y = _u8(g, "y", (1, 4), 0.05, 120)
    g.ops.append(Op("MAX_POOL_2D", [x], [y], {}, 0))
    g.inputs, g.outputs = [x], [y]
    shift_uint8(g)
    assert [op.type for op in g.ops] == ["QUANTIZE", "MAX_POOL_2D", "QUANTIZE"]
    assert g.tensors[x].dtype == g.tensors[y].dtype == "uint8"
    mid = g.ops[1]
    assert [g.tensors[t].dtype for t in mid.inputs + mid.outputs] == ["int8", "int8"]
    assert int(g.tensors[mid.inputs[0]].quant.zero_point[0]) == -8

    h = Graph("t", [], [], [], [])
    a = _u8(h, "a", (1, 4), 0.05, 120)
    b = h.add_tensor("b", (1, 4), "int8", Quant(np.float32([0.05]), np.int64([-8])))
    h.ops.append(Op("QUANTIZE", [a], [b], {}, 0))
    h.inputs, h.outputs = [a], [b]
    shift_uint8(h)
    assert [op.type for op in h.ops] == ["QUANTIZE"] and h.tensors[a].dtype == "uint8"


_ACTIVATIONS = {"LOGISTIC": 14, "TANH": 28, "HARD_SWISH": 117, "LEAKY_RELU": 98, "RELU": 19, "RELU6": 21,
                "RELU_N1_TO_1": 20}


@pytest.mark.parametrize("seed", [0, 1])
def test_activations_every_code_against_litert(seed, tmp_path):
    """Each uint8 activation on all 256 input codes, random input/output quantisations (LOGISTIC
    and TANH: the output quantisation uint8 requires), LEAKY_RELU with several alphas: the
    shifted int8 tables (RELU6: LiteRT's requantising ReluX variant) equal LiteRT-ref's uint8
    kernels value for value."""
    from builders import TfliteBuilder, schema

    from stm32ai.pipeline import compile_model
    from stm32ai.validate.reference import run_litert_ref

    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    x = b.tensor((1, 256), "uint8", float(np.float32(rng.uniform(0.002, 0.2))), int(rng.integers(0, 256)))
    b.inputs.append(x)
    for name, code in _ACTIVATIONS.items():
        so, zo = {"LOGISTIC": (1 / 256, 0), "TANH": (1 / 128, 128)}.get(
            name, (float(np.float32(rng.uniform(0.002, 0.2))), int(rng.integers(0, 256))))
        y = b.tensor((1, 256), "uint8", so, zo)
        if name == "LEAKY_RELU":
            o = schema.LeakyReluOptionsT()
            o.alpha = float(rng.choice([0.1, 0.2, 0.3, -0.5]))
            b.op(code, [x], [y], schema.BuiltinOptions.LeakyReluOptions, o)
        else:
            b.op(code, [x], [y])
        b.outputs.append(y)
    path = tmp_path / "act_u8.tflite"
    path.write_bytes(b.build())
    codes = [np.arange(256, dtype=np.uint8).reshape(1, 256)]
    ref = run_litert_ref(path, codes)
    ours = run_compiled(compile_model(path), [codes])[0]
    for name, r, o in zip(_ACTIVATIONS, ref, ours, strict=True):
        assert o.dtype == np.uint8 and np.array_equal(r, o), (name, np.flatnonzero(r != o)[:8])


def test_mean_and_resize_against_litert(tmp_path):
    """MEAN (same and different quantisation, spatial / channel / one axis) runs exactly as the
    int8 kernel on shifted codes; RESIZE_BILINEAR (plain, half-pixel, align_corners) as LiteRT's
    float blend of uint8 codes (ai_resize_bilinear_u8): hand-built models, 12 random samples."""
    from builders import TfliteBuilder, schema

    from stm32ai.pipeline import compile_model
    from stm32ai.validate.reference import run_litert_ref

    rng = np.random.default_rng(4)
    b = TfliteBuilder()
    s_in, zp_in = 0.0731, 37
    x = b.tensor((1, 5, 7, 6), "uint8", s_in, zp_in)
    b.inputs.append(x)
    for same, axes, keep in ((True, [1, 2], True), (False, [1, 2], True), (True, [3], False), (False, [1], True)):
        so, zo = (s_in, zp_in) if same else (0.0412, 201)
        shape = [1, 5, 7, 6]
        oshape = [1 if i in axes else d for i, d in enumerate(shape)] if keep else \
            [d for i, d in enumerate(shape) if i not in axes]
        y = b.tensor(oshape, "uint8", so, zo)
        o = schema.ReducerOptionsT()
        o.keepDims = keep
        ax = b.tensor((len(axes),), "int32", data=np.int32(axes))
        b.op(40, [x, ax], [y], schema.BuiltinOptions.ReducerOptions, o)
        b.outputs.append(y)
    for size, align, half in (((9, 11), False, False), ((9, 11), False, True), ((8, 13), True, False)):
        y = b.tensor((1, *size, 6), "uint8", s_in, zp_in)
        o = schema.ResizeBilinearOptionsT()
        o.alignCorners, o.halfPixelCenters = align, half
        b.op(23, [x, b.tensor((2,), "int32", data=np.int32(size))], [y], schema.BuiltinOptions.ResizeBilinearOptions, o)
        b.outputs.append(y)
    path = tmp_path / "mean_resize_u8.tflite"
    path.write_bytes(b.build())
    samples = [[rng.integers(0, 256, (1, 5, 7, 6)).astype(np.uint8)] for _ in range(12)]
    c = compile_model(path)
    assert "resize_bilinear_u8" in [op.kernel for op in c.graph.ops]
    ours = run_compiled(c, samples)
    ref = run_litert_ref(path, [np.concatenate([s[0] for s in samples])])
    for j, r in enumerate(ref):
        o = np.concatenate([out[j] for out in ours])
        assert np.array_equal(r, o), (j, int((r != o).sum()))


def test_mixed_uint8_int8_refused():
    """LOGISTIC uint8 -> int8: TFLite refuses it (input->type != output->type), so do we."""
    g = Graph("t", [], [], [], [])
    x = _u8(g, "x", (1, 4), 0.05, 120)
    y = g.add_tensor("y", (1, 4), "int8", Quant(np.float32([1 / 256]), np.int64([-128])))
    g.ops.append(Op("LOGISTIC", [x], [y], {}, 0))
    g.inputs, g.outputs = [x], [y]
    with pytest.raises(UnsupportedModelError, match="LOGISTIC mixes uint8 and int8 tensors"):
        shift_uint8(g)


@pytest.mark.slow
def test_on_the_emulated_board(tmp_path):
    """The demo firmware on qemu-netduinoplus2 (Cortex-M4F, arm-none-eabi-gcc -Werror): the
    conv2d_s8 int16-weight (SMLAD) path, the uint8 depthwise, average pool, FULLY_CONNECTED and
    the boundary QUANTIZEs against the LiteRT-ref output embedded at generate time."""
    import shutil

    if not all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc/make/qemu-system-arm not installed")
    from stm32ai.boards import load_board
    from stm32ai.cli import main
    from stm32ai.project.demo_output import parse_demo_output
    from stm32ai.project.run import build_project, run_qemu

    out = tmp_path / "proj"
    board = load_board("qemu-netduinoplus2")
    assert main(["generate", str(FIXTURES / "u8_mix_uint8.tflite"), "--board", board.id, "-o", str(out)]) == 0
    code, text = run_qemu(build_project(out), board, timeout_s=300)
    demo = parse_demo_output(text)
    assert code == 0 and demo.result == "match" and demo.fields["max_err"] == "0", text
    assert "LiteRT" in demo.fields.get("expected_output", ""), text


def _reducer(b, x, axes: list[int], out_shape, so: float, zo: int, code: str, keep: bool = True) -> int:
    from builders import schema

    y = b.tensor(out_shape, "uint8", so, zo)
    o = schema.ReducerOptionsT()
    o.keepDims = keep
    b.op(getattr(schema.BuiltinOperator, code), [x, b.tensor((len(axes),), "int32", data=np.int32(axes))], [y],
         schema.BuiltinOptions.ReducerOptions, o)
    return y


@pytest.mark.parametrize("seed", [0, 1])
def test_reduce_arg_prelu_logsoftmax_against_litert(seed, tmp_path):
    """SUM, REDUCE_MAX/MIN, ARG_MAX/MIN, PRELU and LOG_SOFTMAX on uint8 (TFLM refuses them all,
    LiteRT-ref runs them: docs/op_types.md): the int8 kernels on shifted codes
    equal LiteRT-ref's uint8 kernels on hand-built models with random quantisations, 16 random
    samples (SUM/REDUCE_*: spatial, channel, one axis; PRELU: per-channel alpha, broadcast)."""
    from builders import TfliteBuilder, schema

    from stm32ai.pipeline import compile_model
    from stm32ai.validate.reference import run_litert_ref

    rng = np.random.default_rng(10 + seed)

    def q() -> tuple[float, int]:
        return float(np.float32(rng.uniform(0.005, 0.2))), int(rng.integers(0, 256))

    b = TfliteBuilder()
    s_in, zp_in = q()
    shape = [1, 4, 5, 6]
    x = b.tensor(shape, "uint8", s_in, zp_in)
    b.inputs.append(x)
    outs = []
    for code in ("SUM", "REDUCE_MAX", "REDUCE_MIN"):
        for axes, keep in (([1, 2], True), ([3], False), ([2], True)):
            oshape = [1 if i in axes else d for i, d in enumerate(shape)] if keep else \
                [d for i, d in enumerate(shape) if i not in axes]
            # REDUCE_MAX/MIN: the int8 kernels (like TFLM's) want the input's quantisation
            so, zo = q() if code == "SUM" else (s_in, zp_in)
            outs.append((f"{code} {axes}", _reducer(b, x, axes, oshape, so, zo, code, keep)))
    for code, opt in (("ARG_MAX", "ArgMax"), ("ARG_MIN", "ArgMin")):
        y = b.tensor(shape[:3], "int32")
        o = getattr(schema, f"{opt}OptionsT")()
        o.outputType = schema.TensorType.INT32
        b.op(getattr(schema.BuiltinOperator, code), [x, b.tensor((1,), "int32", data=np.int32([3]))], [y],
             getattr(schema.BuiltinOptions, f"{opt}Options"), o)
        outs.append((code, y))
    sa, za = q()
    alpha = b.tensor((1, 1, 6), "uint8", sa, za, data=rng.integers(0, 256, (1, 1, 6)).astype(np.uint8))
    y = b.tensor(shape, "uint8", *q())
    b.op(schema.BuiltinOperator.PRELU, [x, alpha], [y])
    outs.append(("PRELU", y))
    y = b.tensor(shape, "uint8", 16 / 256, 255)
    b.op(schema.BuiltinOperator.LOG_SOFTMAX, [x], [y], schema.BuiltinOptions.LogSoftmaxOptions,
         schema.LogSoftmaxOptionsT())
    outs.append(("LOG_SOFTMAX", y))
    b.outputs.extend(t for _, t in outs)
    path = tmp_path / "reduce_u8.tflite"
    path.write_bytes(b.build())
    samples = [[rng.integers(0, 256, shape).astype(np.uint8)] for _ in range(16)]
    ours = run_compiled(compile_model(path), samples)
    ref = run_litert_ref(path, [np.concatenate([s[0] for s in samples])])
    bad = []
    for j, ((name, _), r) in enumerate(zip(outs, ref, strict=True)):
        o = np.concatenate([out[j] for out in ours])
        if o.dtype != r.dtype or not np.array_equal(r, o):
            bad.append((name, str(o.dtype), int((r != o).sum()) if o.shape == r.shape else o.shape))
    assert not bad, bad
