"""CONV_2D / DEPTHWISE_CONV_2D lowering and kernels, read as specifications.

* the generate-time arithmetic (padding, folded bias, weight layouts) on hand-computed cases;
* what the compiler refuses, and why;
* the kernels against an independent numpy transcription of TFLite's reference kernels
  (ConvPerChannel / DepthwiseConvPerChannel: padded taps skipped, input offset applied per
  tap, double-rounding requantisation) on synthetic layers that reach every code path;
* every conv fixture model against TFLite Micro, bit for bit;
* every conv layer of the real models in ../shared/models against LiteRT's reference
  kernels' intermediate tensors (bit-identical to TFLite Micro on these models), bit for bit;
* the ARMv7E-M DSP path: compiled with -Werror for Cortex-M4, and run on QEMU's Cortex-M4
  (mps2-an386) against the host build on ~700 random layers.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, M4, MPS2_LD, RUNTIME, STARTUP_C, WARN, c_scratch_sizes, compile_each, shared_model

from stm32ai.ir import Graph, Op, Quant
from stm32ai.passes.lower import dwconv3x3 as dw3
from stm32ai.passes.lower.conv import (
    acc_bound,
    check_conv,
    choose_conv_layouts,
    conv_layout_choices,
    conv_rq_table,
    fold_bias,
    out_size,
    pack_conv_weights_s8,
    pack_conv_weights_s16,
    pack_dw_weights_s8,
    rq_double_mode,
    rq_double_ok,
    rq_double_ref,
    rq_fold_ref,
    same_padding,
)
from stm32ai.passes.quant import (
    activation_range_f32,
    activation_range_quantized,
    multiply_by_quantized_multiplier,
    per_channel_multiplier,
    quantize_multiplier,
)
from stm32ai.pipeline import compile_graph, compile_model
from stm32ai.validate.host import run_compiled

CONV_SOURCES = sorted([*(RUNTIME / "src").glob("ai_conv*.c"), *(RUNTIME / "src").glob("ai_dwconv*.c")])


# ---- generate-time arithmetic, hand-computed ---------------------------------------------------

def test_same_padding_matches_tflite_rules():
    # in 7, k 3, stride 2: out 4, total = 3*2 + 3 - 7 = 2 -> 1 on top, 1 at the bottom
    assert out_size("SAME", 7, 3, 2, 1) == 4 and same_padding(7, 4, 3, 2, 1) == 1
    # in 9, k 2, stride 1: total 1 -> 0 on top, the odd pixel goes to the bottom
    assert out_size("SAME", 9, 2, 1, 1) == 9 and same_padding(9, 9, 2, 1, 1) == 0
    # in 10, k 3, dilation 2 (effective 5): total 4 -> 2
    assert same_padding(10, 10, 3, 1, 2) == 2
    # in 10, k 3, stride 2: out 5, total = 4*2 + 3 - 10 = 1 -> 0 on top
    assert out_size("SAME", 10, 3, 2, 1) == 5 and same_padding(10, 5, 3, 2, 1) == 0
    # VALID never pads: in 11, k 3, dilation 2 -> out 7
    assert out_size("VALID", 11, 3, 1, 2) == 7 and same_padding(11, 7, 3, 1, 2) == 0
    # VALID with stride 2: in 10, k 3 -> (10 - 3 + 2) // 2 = 4
    assert out_size("VALID", 10, 3, 2, 1) == 4 and same_padding(10, 4, 3, 2, 1) == 0


def test_fold_bias_hand_computed():
    w = np.array([[1, 2, -3], [127, -128, 5]], np.int8)  # sums 0 and 4
    assert fold_bias(np.array([10, -7]), w, -128).tolist() == [10, -7 + 128 * 4]
    assert fold_bias(None, w, 3).tolist() == [0, -12]
    # wraps like the int32 accumulator
    assert fold_bias(np.array([2**31 - 1, 0]), w[::-1], -1).tolist() == [-(2**31) + 3, 0]


def test_conv_weight_layout():
    # 3 output channels, K = 5 -> padded to 8; channels (0, 1) interleave per 4-group,
    # channel 2 follows as its padded row
    w = np.arange(1, 16, dtype=np.int8).reshape(3, 5)
    packed = pack_conv_weights_s8(w).tolist()
    assert packed == [1, 2, 3, 4, 6, 7, 8, 9, 5, 0, 0, 0, 10, 0, 0, 0,
                      11, 12, 13, 14, 15, 0, 0, 0]


def test_conv_weight_layout_int16():
    # the same blocking as the int8 layout, each 4-group as the int16 pairs {w0,w2} {w1,w3}
    w = np.arange(1, 16, dtype=np.int8).reshape(3, 5)
    w[0, 0] = -3
    packed = pack_conv_weights_s16(w)
    assert packed.dtype == np.int16
    assert packed.tolist() == [-3, 3, 2, 4, 6, 8, 7, 9, 5, 0, 0, 0, 10, 0, 0, 0,
                               11, 13, 12, 14, 15, 0, 0, 0]


def test_padded_rows_layout_for_first_layers():
    """in_c % 4 != 0: each filter row (k_w * in_c taps) padded to a multiple of 4 when cheap."""
    from stm32ai.passes.lower.conv import ConvGeometry, conv_kp, conv_krow, conv_rows_for_kernel
    g3 = ConvGeometry(1, 32, 32, 3, 32, 32, 2, 3, 3, (1, 1), (1, 1), (1, 1))
    w = np.arange(1, 55, dtype=np.int8).reshape(2, 27)
    assert conv_krow(g3) and conv_kp(g3) == 36
    rows = conv_rows_for_kernel(g3, w)
    assert rows.shape == (2, 36)
    assert rows[0].tolist() == [*range(1, 10), 0, 0, 0, *range(10, 19), 0, 0, 0, *range(19, 28), 0, 0, 0]
    # dilated rows are not contiguous; too many output channels make the padding cost more
    assert not conv_krow(ConvGeometry(1, 9, 9, 3, 9, 9, 2, 3, 3, (1, 1), (1, 2), (1, 2)))
    assert not conv_krow(ConvGeometry(1, 9, 9, 3, 9, 9, 64, 3, 3, (1, 1), (1, 1), (1, 1)))
    assert not conv_krow(ConvGeometry(1, 9, 9, 4, 9, 9, 2, 3, 3, (1, 1), (1, 1), (1, 1)))


def test_depthwise_weight_layout():
    # 2 taps, 6 channels: channels 0-3 tap-major in one group, then channels 4, 5 by taps
    w = np.array([[0, 1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15]], np.int8)
    assert pack_dw_weights_s8(w).tolist() == [0, 1, 2, 3, 10, 11, 12, 13, 4, 14, 5, 15]


# ---- synthetic layers --------------------------------------------------------------------------

def _q(scale, zp, axis=0) -> Quant:
    return Quant(np.atleast_1d(np.asarray(scale, np.float32)), np.atleast_1d(np.asarray(zp, np.int64)), axis)


def make_layer(kind: str, x_shape, w: np.ndarray, bias: np.ndarray | None, *, padding="SAME",
               stride=(1, 1), dilation=(1, 1), act="NONE", dtype="int8", in_q=(0.05, 3),
               w_scales=None, out_q=(0.1, -5), depth_multiplier=None, bias_dtype=None) -> Graph:
    depthwise = kind == "DEPTHWISE_CONV_2D"
    n, h, wd, _ = x_shape
    kh, kw = w.shape[1], w.shape[2]
    oc = w.shape[3] if depthwise else w.shape[0]
    oh = out_size(padding, h, kh, stride[0], dilation[0])
    ow = out_size(padding, wd, kw, stride[1], dilation[1])
    g = Graph("layer", [], [], [], [])
    q = dtype == "int8"
    xi = g.add_tensor("x", x_shape, dtype, _q(*in_q) if q else None)
    wq = _q(w_scales, np.zeros(np.size(w_scales), np.int64), 3 if depthwise else 0) if q else None
    wi = g.add_const("w", w, wq)
    bi = -1
    if bias is not None:
        bi = g.add_const("b", bias.astype(bias_dtype or ("int32" if q else "float32")))
    yi = g.add_tensor("y", (n, oh, ow, oc), dtype, _q(*out_q) if q else None)
    opts = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1],
            "dilation_h_factor": dilation[0], "dilation_w_factor": dilation[1],
            "fused_activation_function": act}
    if depthwise:
        opts["depth_multiplier"] = depth_multiplier or oc // x_shape[3]
    g.ops.append(Op(kind, [xi, wi, bi], [yi], opts, index=0))
    g.inputs, g.outputs = [xi], [yi]
    return g


def reference(g: Graph, x: np.ndarray) -> np.ndarray:
    """TFLite's reference kernels, transcribed loop for loop (numpy over channels)."""
    op = g.ops[0]
    xt, wt, yt = (g.tensors[i] for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
    w = wt.data.astype(np.float64 if xt.dtype == "float32" else np.int64)
    bias = (g.tensors[op.inputs[2]].data if op.inputs[2] >= 0 else np.zeros(yt.shape[3]))
    o = op.options
    depthwise = op.type == "DEPTHWISE_CONV_2D"
    n, h, wd, c = xt.shape
    _, oh, ow, oc = yt.shape
    kh, kw = w.shape[1], w.shape[2]
    sh, sw, dh, dw = o["stride_h"], o["stride_w"], o["dilation_h_factor"], o["dilation_w_factor"]
    ph, pw = same_padding(h, oh, kh, sh, dh), same_padding(wd, ow, kw, sw, dw)
    quant = xt.dtype == "int8"
    xv = x.astype(np.int64) - int(xt.quant.zero_point[0]) if quant else x.astype(np.float64)
    acc = np.zeros((n, oh, ow, oc), np.int64 if quant else np.float64)
    mult_m = oc // c
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for ky in range(kh):
                    iy = oy * sh - ph + ky * dh
                    for kx in range(kw):
                        ix = ox * sw - pw + kx * dw
                        if not (0 <= iy < h and 0 <= ix < wd):
                            continue  # TFLite skips padded taps
                        px = xv[b, iy, ix]
                        if depthwise:
                            acc[b, oy, ox] += w[0, ky, kx] * np.repeat(px, mult_m)
                        else:
                            acc[b, oy, ox] += w[:, ky, kx, :] @ px
    act = o["fused_activation_function"]
    if not quant:
        lo, hi = activation_range_f32(act)
        return np.clip(acc + bias, lo, hi).astype(np.float32)
    acc = acc + np.asarray(bias, np.int64)
    acc = ((acc + 2**31) % 2**32) - 2**31
    in_s, out_s = float(xt.quant.scale[0]), float(yt.quant.scale[0])
    scales = np.broadcast_to(wt.quant.scale, (oc,))
    ms = [quantize_multiplier(per_channel_multiplier(in_s, float(s), out_s)) for s in scales]
    m = np.array([p[0] for p in ms], np.int64)
    s = np.array([p[1] for p in ms], np.int64)
    out_zp = int(yt.quant.zero_point[0])
    y = multiply_by_quantized_multiplier(acc, m, s) + out_zp
    lo, hi = activation_range_quantized(act, out_s, out_zp, "int8")
    return np.clip(y, lo, hi).astype(np.int8)


def _run(g: Graph, x: np.ndarray) -> tuple[np.ndarray, Op]:
    c = compile_graph(copy.deepcopy(g))
    return run_compiled(c, [[x]])[0][0], c.graph.ops[0]


rng = np.random.default_rng(20240611)


def _w(shape, dtype):
    if dtype == "int8":
        return rng.integers(-127, 128, shape).astype(np.int8)
    return rng.standard_normal(shape).astype(np.float32)


def _x(shape, dtype):
    if dtype == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.uniform(-1, 1, shape).astype(np.float32)


# (name, kind, x_shape, filter shape, options, expected int8 kernel)
LAYERS = [
    ("conv3x3_same_c4_odd_oc_odd_pixels", "CONV_2D", (1, 5, 5, 4), (7, 3, 3, 4),
     dict(act="RELU"), "conv2d_s8"),
    ("conv2x3_valid_s2_d2_batch2", "CONV_2D", (2, 9, 10, 3), (2, 2, 3, 3),
     dict(padding="VALID", stride=(2, 1), dilation=(2, 2), act="RELU6"), "conv2d_s8"),
    ("conv1x1_no_bias", "CONV_2D", (1, 4, 3, 16), (8, 1, 1, 16), dict(bias=False), "conv2d_s8"),
    ("conv5x1_stride3_relu_n1", "CONV_2D", (1, 11, 4, 5), (3, 5, 1, 5),
     dict(stride=(3, 2), act="RELU_N1_TO_1"), "conv2d_s8"),
    ("dw3x3_s2_d2_tail_channels", "DEPTHWISE_CONV_2D", (1, 9, 8, 6), (1, 3, 3, 6),
     dict(stride=(2, 2), dilation=(2, 1), act="RELU6"), "depthwise_conv2d_s8"),
    ("dw3x3_c8_valid_batch2", "DEPTHWISE_CONV_2D", (2, 6, 7, 8), (1, 3, 3, 8),
     dict(padding="VALID"), "depthwise_conv2d_3x3_s8"),
    # the channel-planar 3x3 kernel: tail channels, odd widths, several bands, all borders
    ("dw3x3_s1_same_c6_odd_w", "DEPTHWISE_CONV_2D", (1, 5, 7, 6), (1, 3, 3, 6), {}, "depthwise_conv2d_3x3_s8"),
    ("dw3x3_s1_same_tall_bands_c4_w2", "DEPTHWISE_CONV_2D", (1, 20, 2, 4), (1, 3, 3, 4), {},
     "depthwise_conv2d_3x3_g2_s8"),
    ("dw3x3_s1_same_wide_bands_c4", "DEPTHWISE_CONV_2D", (1, 14, 15, 4), (1, 3, 3, 4), {},
     "depthwise_conv2d_3x3_s8"),
    ("dw3x3_s2_same_wide_bands_c8", "DEPTHWISE_CONV_2D", (1, 15, 16, 8), (1, 3, 3, 8), dict(stride=(2, 2)),
     "depthwise_conv2d_3x3_s8"),
    ("dw3x3_s1_same_1x1_c3", "DEPTHWISE_CONV_2D", (1, 1, 1, 3), (1, 3, 3, 3), {}, "depthwise_conv2d_3x3_s8"),
    ("dw3x3_s1_valid_c13_batch3", "DEPTHWISE_CONV_2D", (3, 8, 9, 13), (1, 3, 3, 13),
     dict(padding="VALID"), "depthwise_conv2d_3x3_s8"),
    ("dw3x3_s2_same_odd_9x7_c5", "DEPTHWISE_CONV_2D", (1, 9, 7, 5), (1, 3, 3, 5), dict(stride=(2, 2)),
     "depthwise_conv2d_3x3_g2_s8"),
    ("dw3x3_s2_same_even_17x10_c9", "DEPTHWISE_CONV_2D", (1, 17, 10, 9), (1, 3, 3, 9), dict(stride=(2, 2)),
     "depthwise_conv2d_3x3_g2_s8"),
    ("dw3x3_s2_valid_10x11_c12_batch2", "DEPTHWISE_CONV_2D", (2, 10, 11, 12), (1, 3, 3, 12),
     dict(stride=(2, 2), padding="VALID"), "depthwise_conv2d_3x3_s8"),
    ("dw3x3_s2_same_2x3_c4", "DEPTHWISE_CONV_2D", (1, 2, 3, 4), (1, 3, 3, 4), dict(stride=(2, 2)),
     "depthwise_conv2d_3x3_s8"),
    ("dw3x3_s2_multiplier2_c3", "DEPTHWISE_CONV_2D", (1, 9, 8, 3), (1, 3, 3, 6), dict(stride=(2, 2)),
     "depthwise_conv2d_3x3_g2_s8"),
    ("dw3x3_s1_multiplier3_c5_tall", "DEPTHWISE_CONV_2D", (2, 11, 6, 5), (1, 3, 3, 15), {},
     "depthwise_conv2d_3x3_g2_s8"),
    # a clamp narrower than int8 (RELU with the output zero point inside) and stride (1, 2)
    # stay on the general kernel
    ("dw3x3_relu_general", "DEPTHWISE_CONV_2D", (1, 6, 6, 8), (1, 3, 3, 8), dict(act="RELU"),
     "depthwise_conv2d_s8"),
    ("dw3x3_s1x2_general", "DEPTHWISE_CONV_2D", (1, 6, 6, 8), (1, 3, 3, 8), dict(stride=(1, 2)),
     "depthwise_conv2d_s8"),
    ("dw9x9_81_taps", "DEPTHWISE_CONV_2D", (1, 10, 9, 4), (1, 9, 9, 4), {}, "depthwise_conv2d_dm_s8"),
    ("dw5x5_multiplier3", "DEPTHWISE_CONV_2D", (1, 7, 6, 2), (1, 5, 5, 6),
     dict(stride=(1, 2)), "depthwise_conv2d_dm_s8"),
    ("dw3x3_one_channel_multiplier4", "DEPTHWISE_CONV_2D", (1, 8, 8, 1), (1, 3, 3, 4),
     dict(stride=(2, 2)), "conv2d_s8"),
    # one input channel: conv2d_s8 gathering K bytes (rows inside, partly outside, outside)
    ("dw6x5_one_channel_multiplier8_s2", "DEPTHWISE_CONV_2D", (1, 15, 13, 1), (1, 6, 5, 8),
     dict(stride=(2, 2)), "conv2d_s8"),
    ("dw3x3_one_channel_multiplier2_dilated", "DEPTHWISE_CONV_2D", (1, 9, 9, 1), (1, 3, 3, 2),
     dict(dilation=(1, 2)), "conv2d_s8"),
]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("name,kind,xs,ws,opts,kernel", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_matches_tflite_reference(name, kind, xs, ws, opts, kernel, dtype):
    opts = dict(opts)
    has_bias = opts.pop("bias", True)
    oc = ws[3] if kind == "DEPTHWISE_CONV_2D" else ws[0]
    w = _w(ws, dtype)
    bias = None
    if has_bias:
        bias = (rng.integers(-5000, 5000, oc) if dtype == "int8" else rng.standard_normal(oc))
    scales = rng.uniform(0.002, 0.02, oc)
    g = make_layer(kind, xs, w, bias, dtype=dtype, w_scales=scales, in_q=(0.05, int(rng.integers(-20, 20))),
                   out_q=(0.08, int(rng.integers(-30, 30))), **opts)
    assert check_conv(g.ops[0], g) is None
    x = _x(xs, dtype)
    y, lowered = _run(g, x)
    ref = reference(g, x)
    if dtype == "int8":
        assert lowered.kernel == kernel
        np.testing.assert_array_equal(y, ref)
    else:
        assert lowered.kernel == ("conv2d_f32" if kind == "CONV_2D" else "depthwise_conv2d_f32")
        assert np.max(np.abs(y - ref)) <= 1e-5 * np.max(np.abs(ref))


# the one-column variant (ai_conv2d_s8_1col, stripe members of --optimization ram): in_c % 4 == 0
ONE_COL_LAYERS = [
    ("same_3x3_odd_oc_relu", (1, 5, 5, 4), (7, 3, 3, 4), dict(act="RELU")),
    ("same_3x3_s2_c8_batch2", (2, 7, 6, 8), (6, 3, 3, 8), dict(stride=(2, 2))),
    ("valid_2x3_d2_c12", (1, 9, 8, 12), (5, 2, 3, 12), dict(padding="VALID", dilation=(2, 2), act="RELU6")),
    ("same_5x1_s1x2_c4_one_oc", (1, 6, 7, 4), (1, 5, 1, 4), dict(stride=(1, 2))),
    ("same_3x3_c64_like_ic", (1, 4, 4, 64), (8, 3, 3, 64), {}),
    # int8: pixel pairs with int8 columns; an odd pixel count (the last a pair of itself), odd oc
    ("same_3x3_c16_oc3_15px", (1, 3, 5, 16), (3, 3, 3, 16), dict(act="RELU")),
]


@pytest.mark.parametrize("layout", ["int8", "int16"])
@pytest.mark.parametrize("name,xs,ws,opts", ONE_COL_LAYERS, ids=[c[0] for c in ONE_COL_LAYERS])
def test_one_column_matches_tflite_reference(name, xs, ws, opts, layout):
    """conv2d_s8_1col (int16 weights: one int16 column, pixels one at a time; int8: pixel pairs,
    two int8 columns in the same bytes) on the lowered layer's params and
    weights: the outputs of TFLite's reference arithmetic, with 2 * Kp (+ the pad pixel) bytes of
    scratch where the pair kernel takes 4 * Kp."""
    from stm32ai.passes.lower.conv import conv_1col_scratch_size

    oc = ws[0]
    g = make_layer("CONV_2D", xs, _w(ws, "int8"), rng.integers(-5000, 5000, oc), w_scales=rng.uniform(0.002, 0.02, oc),
                   in_q=(0.05, int(rng.integers(-20, 20))), out_q=(0.08, int(rng.integers(-30, 30))), **opts)
    x = _x(xs, "int8")
    # the input outside the pool: the plan may not overlap the output with it (the pixel-pair
    # access order's proof; the variant runs only in stripes, whose calls never write in place)
    c = compile_graph(copy.deepcopy(g), optimization="time" if layout == "int16" else "ram", inputs_in_pool=False)
    op = c.graph.ops[0]
    assert op.kernel == "conv2d_s8" and op.attrs["w16"] == (layout == "int16") and not op.attrs["stage_oc"]
    one = conv_1col_scratch_size(op.attrs)
    kp = ws[1] * ws[2] * ws[3]
    assert op.scratch - one == 2 * kp
    node = next(n["attrs"] for n in c.doc["nodes"] if n["op"] != "null")  # what the emitter reads
    assert node["func_name"] == "conv2d_s8" and node["scratch_bytes"] == op.scratch
    node["func_name"], node["scratch_bytes"] = "conv2d_s8_1col", one
    np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], reference(g, x))


@pytest.mark.parametrize("kind", ["CONV_2D", "DEPTHWISE_CONV_2D"])
@pytest.mark.parametrize("regime", ["per_tensor_scale_0.5", "scale_above_1", "huge_bias"])
def test_requantisation_regimes(kind, regime):
    """Effective scales >= 0.25 (TFLite shift >= -1) and left shifts take the generic
    ai_requant path; huge biases push accumulators to the int32 edges."""
    c = 4
    ws = (1, 3, 3, c) if kind == "DEPTHWISE_CONV_2D" else (c, 3, 3, c)
    w = _w(ws, "int8")
    if regime == "huge_bias":
        bias, scales, in_q, out_q = rng.integers(-(2**30), 2**30, c), rng.uniform(0.002, 0.02, c), (0.05, 1), (0.1, 0)
    elif regime == "scale_above_1":
        bias, scales, in_q, out_q = rng.integers(-50, 50, c), np.full(c, 0.5), (0.5, -1), (0.1, 2)
    else:
        bias, scales, in_q, out_q = rng.integers(-50, 50, c), np.array([0.5]), (0.5, 0), (0.5, 0)
    g = make_layer(kind, (1, 6, 5, c), w, bias, w_scales=scales, in_q=in_q, out_q=out_q)
    x = _x((1, 6, 5, c), "int8")
    y, _ = _run(g, x)
    np.testing.assert_array_equal(y, reference(g, x))


# ---- folded requantisation ---------------------------------------------------------------------

RQ_EDGES = [0, 1, -1, 2, -2, 3, -3, 127, -128, 255, -255, 1 << 20, -(1 << 20), (1 << 30) - 1,
            -(1 << 30), (1 << 31) - 1, -(1 << 31), -(1 << 31) + 1]


def _fold_cases(rng_: np.random.Generator) -> list[tuple[int, int, int, int]]:
    """(m, shift, out_zp, bound) covering the shift range, zero points and tie values."""
    cases = []
    for shift in (-2, -3, -5, -8, -11, -16, -20, -24, -30, -31):
        for zp in (-128, -1, 0, 5, 127):
            m = int(rng_.integers(1 << 30, 1 << 31))
            cases.append((m, shift, zp, 1 << 31))
    cases.append(((1 << 30), -2, 0, 1 << 31))  # m = 2^30: the x = -1 corner of the identity
    cases.append(((1 << 31) - 1, -9, -128, 1 << 31))
    return cases


def _fold_inputs(m: int, shift: int, rng_: np.random.Generator) -> np.ndarray:
    e = -shift
    xs = list(RQ_EDGES) + rng_.integers(-(1 << 31), 1 << 31, 300).tolist()
    xs += rng_.integers(-70000, 70000, 300).tolist()
    # values whose double-rounded result sits at a tie of either rounding step
    for k in rng_.integers(-(1 << 20), 1 << 20, 60).tolist():
        for t in ((k << (31 + e)) + (1 << (30 + e)), (k << 31) + (1 << 30)):
            x = t // m
            xs += [x - 1, x, x + 1]
    xs = [x for x in xs if -(1 << 31) <= x < (1 << 31)]
    return np.array(xs, np.int64)


def test_rq_fold_identity_matches_tflite_double_rounding():
    """rq_fold's arithmetic (Python transcription) equals TFLite's MultiplyByQuantizedMultiplier
    + output zero point wherever conv_rq_table enables it, on edge, tie and random values."""
    r = np.random.default_rng(7)
    for m, shift, zp, bound in _fold_cases(r):
        table, fold = conv_rq_table(np.zeros(1), np.zeros((1, 1)), np.array([m]), np.array([shift]),
                                    zp, np.array([bound - 1]) if bound < (1 << 31) else np.array([1 << 30]))
        if not fold:
            continue
        _, mm, rs, kf = (int(v) for v in table[0])
        x = _fold_inputs(m, shift, r)
        ref = multiply_by_quantized_multiplier(x, np.int64(m), np.int64(shift)) + zp
        np.testing.assert_array_equal(rq_fold_ref(x, mm, rs, kf), ref)


def test_rq_table_falls_back_to_the_general_path():
    w = np.ones((2, 9), np.int8)
    # shift -1 (effective scale >= 0.25): general {bias, m, shift, 0}
    table, fold = conv_rq_table(np.array([5, 6]), w, np.array([1 << 30, 1 << 30]), np.array([-3, -1]), 3, None)
    assert not fold and table.tolist() == [[5, 1 << 30, -3, 0], [6, 1 << 30, -1, 0]]
    # rs = 29 with a zero point of 100: kf = 2^28 + 100 * 2^29 overflows int32
    _, fold = conv_rq_table(np.zeros(2), w, np.array([1 << 30] * 2), np.array([-30, -30]), 100, None)
    assert not fold
    # the usual case: folded, kf = 2^(rs-1) + zp * 2^rs
    table, fold = conv_rq_table(np.array([1, 2]), w, np.array([1 << 30] * 2), np.array([-9, -10]), -7, None)
    assert fold and table.tolist() == [[1, 1 << 30, 8, 128 - 7 * 256], [2, 1 << 30, 9, 256 - 7 * 512]]


def _tflite_requant(x: int, m: int, shift: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier for shift <= 0, transcribed here from gemmlowp
    (SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT) with C's truncating division,
    independently of stm32ai.passes.quant."""
    if x == m == -(1 << 31):
        hm = (1 << 31) - 1
    else:
        ab = x * m
        nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
        t = ab + nudge
        hm = abs(t) // (1 << 31) * (1 if t >= 0 else -1)  # C's / on int64: toward zero
    e = -shift
    mask = (1 << e) - 1
    rem, thr = hm & mask, (mask >> 1) + (1 if hm < 0 else 0)
    return (hm >> e) + (1 if rem > thr else 0)


def test_rq_double_matches_tflite_where_proven():
    """The doubled-accumulator form of the Cortex-M4 channel quads (rq_double_ref, AI_RQ_ACC_MM's
    arithmetic) equals TFLite's requantisation + zero point on edge, tie and random accumulators
    within the bound wherever rq_double_ok proves it, and its form without the sign term
    (AI_RQ_ACC_MM0) after saturation wherever rq_double_mode gives 3; and the proofs reject
    channels where the forms differ (accumulators from 2^30 on: the doubled accumulator wraps;
    zero points above -128: negative ties)."""
    r = np.random.default_rng(25)
    checked = proven3 = refused3 = 0
    for m, shift, zp, _ in _fold_cases(r):
        for bound in (1 << 16, (1 << 24) + 3, (1 << 30) - 1):
            table, fold = conv_rq_table(np.zeros(1), np.zeros((1, 1)), np.array([m]), np.array([shift]),
                                        zp, np.array([bound]))
            if not fold or not rq_double_ok(table, np.array([bound])):
                continue
            _, mm, rs, kf = (int(v) for v in table[0])
            x = _fold_inputs(m, shift, r)
            x = np.concatenate([x[np.abs(x) <= bound], [bound, -bound, bound - 1, 1 - bound]])
            ref = [_tflite_requant(int(v), m, shift) + zp for v in x.tolist()]
            np.testing.assert_array_equal(rq_double_ref(x, mm, rs, kf), ref)
            checked += len(ref)
            # without the sign term (AI_RQ_ACC_MM0): equal after SSAT wherever rq_fold 3 is chosen
            no_sign = np.clip(rq_double_ref(x, mm, rs, kf, sign=False), -128, 127)
            same = np.array_equal(no_sign, np.clip(ref, -128, 127))
            if rq_double_mode(table, np.array([bound]), zp) == 3:
                assert same
                proven3 += 1
            elif not same:
                refused3 += 1  # the proof refused a channel where the shorter form is wrong
    assert checked > 30000 and proven3 >= 10 and refused3 >= 10
    # a channel whose accumulator may reach 2^30: rejected, and there the form is wrong
    m, shift, zp = 1518500250, -8, -3
    big = np.array([1 << 30])
    table, fold = conv_rq_table(np.zeros(1), np.zeros((1, 1)), np.array([m]), np.array([shift]), zp, big)
    assert fold and not rq_double_ok(table, acc_bound(np.zeros((1, 1)), big))
    _, mm, rs, kf = (int(v) for v in table[0])
    x = 1 << 30
    assert int(rq_double_ref(np.array([x]), mm, rs, kf)[0]) != _tflite_requant(x, m, shift) + zp
    # and one whose 2 kf + A reaches 2^31 (a large zero point at a deep shift)
    table, fold = conv_rq_table(np.zeros(1), np.zeros((1, 1)), np.array([1 << 30]), np.array([-25]), 100,
                                np.array([1000]))
    assert fold and not rq_double_ok(table, np.array([1000]))
    _, mm, rs, kf = (int(v) for v in table[0])
    assert int(rq_double_ref(np.array([0]), mm, rs, kf)[0]) != _tflite_requant(0, 1 << 30, -25) + 100


RQ_HARNESS_C = r"""
#include <stdio.h>
#include "ai_simd.h"
int main(void) {
  long long x, m, rs, kf;
  while (scanf("%lld %lld %lld %lld", &x, &m, &rs, &kf) == 4) {
    printf("%ld\n", (long)ssat8(rq_fold((int32_t)x, (int32_t)m, (int32_t)rs, (int32_t)kf)));
  }
  return 0;
}
"""


def test_rq_fold_c_matches_tflite(tmp_path):
    """The C rq_fold + ssat8 (host build) against TFLite's arithmetic + zero point, saturated."""
    (tmp_path / "rq.c").write_text(RQ_HARNESS_C)
    subprocess.run(["cc", *WARN, f"-I{RUNTIME / 'include'}", "rq.c", "-o", "rq"], cwd=tmp_path, check=True)
    r = np.random.default_rng(11)
    lines, want = [], []
    for m, shift, zp, _ in _fold_cases(r):
        table, fold = conv_rq_table(np.zeros(1), np.zeros((1, 1)), np.array([m]), np.array([shift]), zp,
                                    np.array([1 << 30]))
        if not fold:
            continue
        _, mm, rs, kf = (int(v) for v in table[0])
        x = _fold_inputs(m, shift, r)
        lines += [f"{v} {mm} {rs} {kf}" for v in x.tolist()]
        want += np.clip(multiply_by_quantized_multiplier(x, np.int64(m), np.int64(shift)) + zp,
                        -128, 127).tolist()
    out = subprocess.run([str(tmp_path / "rq")], input="\n".join(lines), capture_output=True, text=True,
                         check=True).stdout.split()
    assert [int(v) for v in out] == want and len(want) > 10000


# ---- --optimization: int8 / int16 weight layouts -------------------------------------------------

OPT_LAYERS = [  # (x shape, filter shape, options): odd oc, in_c % 4 != 0, 1x1 stride 2, dilation, batches
    ((1, 5, 5, 4), (7, 3, 3, 4), dict(act="RELU6")),
    ((2, 9, 10, 3), (5, 2, 3, 3), dict(padding="VALID", stride=(2, 1), dilation=(2, 2))),
    ((1, 8, 7, 12), (9, 1, 1, 12), dict(stride=(2, 2))),
    ((1, 6, 5, 1), (4, 4, 3, 1), dict(stride=(2, 1))),
    ((1, 7, 3, 8), (6, 5, 3, 8), dict(dilation=(1, 2), act="RELU")),
]


@pytest.mark.parametrize("xs,ws,opts", OPT_LAYERS, ids=[f"opt{i}" for i in range(len(OPT_LAYERS))])
def test_optimization_modes_bit_exact(xs, ws, opts):
    """ram (int8 weights) and time (int16) give TFLite's outputs; time doubles the weights."""
    w = _w(ws, "int8")
    g = make_layer("CONV_2D", xs, w, rng.integers(-3000, 3000, ws[0]), w_scales=rng.uniform(0.002, 0.02, ws[0]),
                   in_q=(0.05, int(rng.integers(-20, 20))), out_q=(0.08, int(rng.integers(-30, 30))), **opts)
    x = _x(xs, "int8")
    ref = reference(g, x)
    sizes = {}
    for mode in ("ram", "time"):
        c = compile_graph(copy.deepcopy(g), optimization=mode)
        op = c.graph.ops[0]
        assert op.kernel == "conv2d_s8" and op.attrs["w16"] == (mode == "time")
        sizes[mode] = c.graph.tensors[op.inputs[1]].data.nbytes
        np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], ref)
    run = ws[2] * ws[3]
    kp = ws[1] * ((run + 3) // 4 * 4) if op.attrs["krow"] else (ws[1] * run + 3) // 4 * 4
    assert sizes == {"ram": kp * ws[0], "time": 2 * kp * ws[0]}


def test_balanced_chooses_int16_by_pixels_within_the_budget():
    """balanced: int16 for the layers with the most output pixels while the weights fit."""
    def two_layer_graph() -> Graph:
        g = make_layer("CONV_2D", (1, 16, 16, 8), _w((8, 3, 3, 8), "int8"), None, w_scales=np.full(8, 0.01))
        small = make_layer("CONV_2D", (1, 4, 4, 8), _w((8, 3, 3, 8), "int8"), None, w_scales=np.full(8, 0.01))
        x2, y2 = small.ops[0].inputs[0], small.ops[0].outputs[0]
        off = len(g.tensors)
        for t in small.tensors:
            g.add_tensor(t.name + "_2", t.shape, t.dtype, t.quant, t.data)
        op = small.ops[0]
        g.ops.append(Op(op.type, [i + off if i >= 0 else -1 for i in op.inputs], [y2 + off], op.options, index=1))
        g.inputs += [x2 + off]
        g.outputs += [y2 + off]
        return g
    from stm32ai.passes.lower import lower_graph
    g = lower_graph(two_layer_graph())
    base = sum(int(t.data.nbytes) for t in g.tensors if t.data is not None
               and any(t.id in o.inputs for o in g.ops))
    choose_conv_layouts(g, "balanced", base + 8 * 72)  # room for one layer's int16 copy
    assert [r["layout"] for r in conv_layout_choices(g)] == ["int16", "int8"]  # 16x16 before 4x4
    g2 = lower_graph(two_layer_graph())
    choose_conv_layouts(g2, "balanced", base)
    assert [r["layout"] for r in conv_layout_choices(g2)] == ["int8", "int8"]
    g3 = lower_graph(two_layer_graph())
    choose_conv_layouts(g3, "time", 0)
    assert [r["layout"] for r in conv_layout_choices(g3)] == ["int16", "int16"]
    # with --board: the program flash minus the code reserve (NUCLEO-F401RE: 512 KiB flash)
    from stm32ai.pipeline import weights_budget_for
    assert weights_budget_for("nucleo-f401re") == 512 * 1024 - 48 * 1024
    assert weights_budget_for(None) is None


def _dw3_kernel_requant(acc: np.ndarray, m: int, shift: int, out_zp: int) -> np.ndarray:
    """The 3x3 kernel's requantisation, transcribed: hi32({khi + s, 2^30 ^ s} + acc*m) >> rs,
    s = acc >> 31 (then SSAT 8, left out here)."""
    e = -shift
    acc = np.asarray(acc, np.int64)
    s = acc >> 63  # 0 or -1
    khi = (1 << (e - 2)) + out_zp * (1 << (e - 1))
    lo = np.where(s < 0, 0xBFFFFFFF, 0x40000000).astype(np.int64)
    total = ((khi + s) << 32) + lo + acc * m
    return (total >> 32) >> (e - 1)


def _dw3_sign_exact_requant(acc: np.ndarray, m: int, shift: int, out_zp: int) -> np.ndarray:
    """The _sgn kernel's requantisation, transcribed: hi32({khi, klo} - 2^31*[acc<0] + acc*m) >> rs."""
    e = -shift
    acc = np.asarray(acc, np.int64)
    khi = ((1 << (e - 2)) if e >= 2 else 0) + out_zp * (1 << (e - 1))
    klo = 0xC0000000 if e == 1 else 0x40000000
    total = (khi << 32) + klo - np.where(acc < 0, 1 << 31, 0) + acc * m
    return (total >> 32) >> (e - 1)


def test_dw3x3_sign_exact_requant_against_tflite():
    """The sign-exact sequence equals MultiplyByQuantizedMultiplier (+ out_zp) for every
    shift -23..-1, on random accumulators and the int32 edges."""
    local = np.random.default_rng(9)
    edges = np.array([-(2**31), -(2**31) + 1, -(2**30), -3, -2, -1, 0, 1, 2, 3, 2**30, 2**31 - 1])
    for shift in range(-23, 0):
        assert dw3.sign_exact_ok(2**30, shift)
        for _ in range(6):
            m = int(local.integers(2**30, 2**31)) >> int(local.integers(0, 31))
            m = max(m, 2**30) if local.random() < 0.7 else 2**30
            zp = int(local.integers(-128, 128))
            acc = np.concatenate([edges, local.integers(-(2**31), 2**31, 3000),
                                  local.integers(-5000, 5000, 3000)])
            ref = multiply_by_quantized_multiplier(acc, np.int64(m), np.int64(shift)) + zp
            np.testing.assert_array_equal(_dw3_sign_exact_requant(acc, m, shift, zp), ref)
    assert not dw3.sign_exact_ok(2**30, 0) and not dw3.sign_exact_ok(2**30, -24)


def test_dw3x3_fast_requant_proof_against_brute_force():
    """fast_requant_exact(m, shift, lo, hi) says the kernel's sequence equals TFLite's
    MultiplyByQuantizedMultiplier (+ out_zp) for every accumulator in [lo, hi]; check it by
    enumeration, and check that a rejected case really has a counterexample."""
    local = np.random.default_rng(5)
    accepted = 0
    for _ in range(60):
        shift = int(local.integers(-23, -1))
        tz = int(local.integers(0, 31)) if local.random() < 0.4 else 0  # trailing zeros of m
        m = int(local.integers(2**30, 2**31)) >> tz << tz
        m = max(m, 2**30)
        lo = int(local.integers(-70000, 1000))
        hi = lo + int(local.integers(0, 140000))
        zp = int(local.integers(-128, 128))
        acc = np.arange(lo, hi + 1, dtype=np.int64)
        ref = multiply_by_quantized_multiplier(acc, np.int64(m), np.int64(shift)) + zp
        ok = dw3.fast_requant_exact(m, shift, lo, hi)
        same = np.array_equal(_dw3_kernel_requant(acc, m, shift, zp), ref)
        assert same or not ok, (m, shift, lo, hi)
        accepted += ok
    assert accepted > 20
    # m = 2^30 (a power-of-two scale ratio): for acc = -3 the EOR's -1 lands on a tie
    assert not dw3.fast_requant_exact(2**30, -2, -3, 10)
    acc = np.arange(-3, 11)
    ref = multiply_by_quantized_multiplier(acc, np.int64(2**30), np.int64(-2))
    assert np.flatnonzero(_dw3_kernel_requant(acc, 2**30, -2, 0) != ref).tolist() == [0]
    # out-of-range shifts and wrapping accumulators are refused
    assert not dw3.fast_requant_exact(2**30 + 1, -1, 0, 10)
    assert not dw3.fast_requant_exact(2**30 + 1, -24, 0, 10)
    assert not dw3.fast_requant_exact(2**30 + 1, -8, 0, 2**31)


def test_dw3x3_double_mode_matches_tflite_where_proven():
    """`rqd` (the Cortex-M4 rows' doubled-accumulator requantisation, dw3x3_double_mode): on the
    3x3 kernel's own packed constants (khi as rq_fold's kf, rs = e - 1) the doubled form
    (rq_double_ref: SMMLAR on 2*acc, >> (rs + 1), with the sign term for 2, without for 3), after
    SSAT, equals TFLite's MultiplyByQuantizedMultiplier + out_zp clamped to int8 over the layer's
    whole accumulator range wherever the mode is proved; e = 1 and unbounded ranges are refused."""
    local = np.random.default_rng(26)
    modes = {0: 0, 2: 0, 3: 0}
    for _ in range(40):
        c = 3
        w = local.integers(-128, 128, (9, c))
        bias = local.integers(-20000, 20000, c)
        zp_in = int(local.integers(-128, 128))
        zp = -128 if local.random() < 0.6 else int(local.integers(-128, 128))
        m = local.integers(2**30, 2**31, c)
        shift = -local.integers(2, 16, c)
        packed = dw3.pack_dw3x3(w, bias, m, shift, zp)
        lo, hi = dw3.acc_range(w, bias, zp_in)
        mode = dw3.dw3x3_double_mode(packed, lo, hi, zp, rq_double_mode)
        modes[mode] += 1
        if not mode:
            continue
        k = packed.reshape(c, 10)
        for ch in range(c):
            acc = np.concatenate([local.integers(lo[ch], hi[ch] + 1, 4000), [lo[ch], hi[ch], 0, -1, 1]])
            ref = np.clip(multiply_by_quantized_multiplier(acc, np.int64(m[ch]), np.int64(shift[ch])) + zp,
                          -128, 127)
            got = rq_double_ref(acc, int(k[ch, 7]), int(k[ch, 9]), int(k[ch, 8]), sign=mode == 2)
            np.testing.assert_array_equal(np.clip(got, -128, 127), ref)
    assert modes[3] >= 10 and modes[2] >= 5
    # e = 1 (shift -1: no integer kf) and a range the doubled accumulator cannot hold: refused
    w = np.ones((9, 1), np.int64)
    p1 = dw3.pack_dw3x3(w, np.zeros(1), np.array([2**30]), np.array([-1]), -128)
    assert dw3.dw3x3_double_mode(p1, np.array([-100]), np.array([100]), -128, rq_double_mode) == 0
    p8 = dw3.pack_dw3x3(w, np.zeros(1), np.array([2**30]), np.array([-8]), -128)
    assert dw3.dw3x3_double_mode(p8, np.array([-100]), np.array([100]), -128, rq_double_mode) == 3
    assert dw3.dw3x3_double_mode(p8, np.array([-(2**30)]), np.array([100]), -128, rq_double_mode) == 0


@pytest.mark.parametrize("case,w_scale,in_q,out_q,kernel", [
    # scales whose ratio is a power of two (m = 2^30) with negative accumulators: the EOR
    # sequence cannot be proved exact -> the sign-exact kernel
    ("power_of_two_ratio", 1 / 64, (0.5, 3), (1.0, -2), "depthwise_conv2d_3x3_sgn_s8"),
    # effective scale 0.36: shift -1 -> the sign-exact kernel (rs = 0)
    ("shift_minus_1", 0.5, (0.5, 3), (0.7, -2), "depthwise_conv2d_3x3_sgn_s8"),
    # effective scale 0.71: shift 0 -> the general kernel
    ("shift_0", 0.5, (0.5, 3), (0.35, 1), "depthwise_conv2d_s8"),
])
def test_dw3x3_requant_variants(case, w_scale, in_q, out_q, kernel):
    c = 6
    w = _w((1, 3, 3, c), "int8")
    g = make_layer("DEPTHWISE_CONV_2D", (2, 5, 7, c), w, rng.integers(-50, 50, c),
                   w_scales=np.full(c, w_scale), in_q=in_q, out_q=out_q, stride=(2, 2) if c % 2 else (1, 1))
    x = _x((2, 5, 7, c), "int8")
    y, op = _run(g, x)
    assert op.kernel == kernel, case
    np.testing.assert_array_equal(y, reference(g, x))


def test_scratch_sizes_match_the_c_functions(tmp_path):
    """op.scratch (computed in Python) equals ai_<kernel>_scratch_size() of the emitted params."""
    cases = []
    for kind, xs, ws, opts in [
            ("CONV_2D", (1, 7, 6, 3), (5, 3, 2, 3), {}),  # gathers
            ("CONV_2D", (1, 4, 4, 8), (6, 1, 1, 8), {}),  # 1x1: no pad pixel
            ("CONV_2D", (1, 5, 5, 4), (3, 3, 3, 4), {}),  # SAME 3x3: pad pixel
            ("CONV_2D", (1, 6, 6, 8), (3, 3, 3, 8), dict(padding="VALID")),  # never leaves the image
            ("CONV_2D", (1, 6, 6, 8), (3, 3, 3, 8), dict(stride=(2, 2))),  # SAME: pad 0, extra at the bottom/right
            ("DEPTHWISE_CONV_2D", (1, 5, 5, 10), (1, 3, 3, 10), {}),
            ("DEPTHWISE_CONV_2D", (1, 5, 5, 10), (1, 3, 5, 10), {}),
            ("DEPTHWISE_CONV_2D", (1, 9, 8, 1), (1, 4, 3, 8), {})]:  # -> conv2d_s8, gathers
        oc = ws[3] if kind == "DEPTHWISE_CONV_2D" else ws[0]
        g = make_layer(kind, xs, _w(ws, "int8"), None, w_scales=np.full(oc, 0.01), **opts)
        op = compile_graph(g).graph.ops[0]
        cases.append(op)
    # the one-column variant of the in_c % 4 == 0 layers (conv_1col_scratch_size)
    from stm32ai.passes.lower.conv import conv_1col_scratch_size

    for op in cases[1:5]:
        cases.append(Op(op.type, op.inputs, op.outputs, kernel="conv2d_s8_1col", attrs={**op.attrs, "reverse": 0},
                        scratch=conv_1col_scratch_size({**op.attrs, "reverse": 0})))
    printed = c_scratch_sizes(cases, "ai_kernels_conv.h", CONV_SOURCES, WARN, tmp_path)
    assert printed == [op.scratch for op in cases]
    assert printed[1:5] == [4 * 8, 4 * 36 + 4, 4 * 72, 4 * 72 + 8]
    assert printed[-4:] == [2 * 8, 2 * 36 + 4, 2 * 72, 2 * 72 + 8]  # one column, the pad pixel
    assert all(s > 0 for s in printed)


# ---- refusals -----------------------------------------------------------------------------------

def _refusal(g: Graph) -> str:
    r = check_conv(g.ops[0], g)
    assert r is not None
    return r


def test_refuses_what_it_cannot_do_exactly():
    base = dict(w_scales=np.full(4, 0.01))
    w = _w((4, 3, 3, 4), "int8")
    # hybrid (float activations, int8 filter) without filter quantisation parameters
    g = make_layer("CONV_2D", (1, 5, 5, 4), w, None, dtype="float32")
    assert "hybrid" in _refusal(g) and "quantisation" in _refusal(g)
    # hybrid depthwise is not supported (hybrid CONV_2D is: tests/test_ops_hybrid.py)
    g = make_layer("DEPTHWISE_CONV_2D", (1, 5, 5, 4), np.ones((1, 3, 3, 4), np.int8), None, dtype="float32")
    assert "hybrid" in _refusal(g)
    # int16 activations
    g = make_layer("CONV_2D", (1, 5, 5, 4), w, None, **base)
    g.tensors[g.ops[0].inputs[0]].dtype = "int16"
    assert "int16" in _refusal(g)
    # grouped convolution: filter has 2 input channels, input 4
    g = make_layer("CONV_2D", (1, 5, 5, 4), _w((4, 3, 3, 2), "int8"), None, **base)
    g.tensors[0].shape = (1, 5, 5, 4)
    assert "grouped" in _refusal(g)
    # filter computed at run time
    g = make_layer("CONV_2D", (1, 5, 5, 4), w, None, **base)
    g.tensors[g.ops[0].inputs[1]].data = None
    assert "run time" in _refusal(g)
    # unsupported fused activation
    g = make_layer("CONV_2D", (1, 5, 5, 4), w, None, act="TANH", **base)
    assert "TANH" in _refusal(g)
    # asymmetric filter
    g = make_layer("CONV_2D", (1, 5, 5, 4), w, None, **base)
    g.tensors[g.ops[0].inputs[1]].quant.zero_point = np.array([0, 1, 0, 0])
    assert "zero point" in _refusal(g)
    # int64 bias (16x8 models)
    g = make_layer("CONV_2D", (1, 5, 5, 4), w, np.zeros(4), bias_dtype="int64", **base)
    assert "int64" in _refusal(g)
    # wrong number of per-channel scales
    g = make_layer("CONV_2D", (1, 5, 5, 4), w, None, w_scales=np.full(3, 0.01))
    assert "scales" in _refusal(g)
    # inconsistent output shape
    g = make_layer("CONV_2D", (1, 5, 5, 4), w, None, **base)
    g.tensors[g.ops[0].outputs[0]].shape = (1, 4, 5, 4)
    assert "inconsistent" in _refusal(g)


def test_hybrid_real_model_lowers_to_hybrid_kernels():
    # kws_ref_model_float32: 5 hybrid CONV_2D (per-tensor int8 filters), float depthwise and
    # FC; exactness against LiteRT-ref is tests/test_ops_hybrid.py's job
    path = shared_model("mlperf_tiny/kws_ref_model_float32.tflite")
    ops = compile_model(path).graph.ops
    hybrid = [op for op in ops if op.kernel == "conv2d_hybrid"]
    assert len(hybrid) == 5 and all(op.attrs["per_channel"] == 0 and op.scratch > 0 for op in hybrid)


# ---- fixtures against TFLite Micro --------------------------------------------------------------

# The int8 conv fixtures (tests/test_models_host.py runs every fixture whole; this is the
# bit-exactness claim of this module). conv_space_to_batch_int8 is left to the SPACE_TO_BATCH
# fusion: its TFLite Micro output differs from LiteRT's reference kernels (which we match)
# at the padded borders.
CONV_FIXTURES = [p for p in sorted(FIXTURES.glob("*conv_*_int8.tflite"))
                 if p.name.startswith(("conv_", "dwconv_")) and p.name != "conv_space_to_batch_int8.tflite"]


@pytest.mark.parametrize("path", CONV_FIXTURES, ids=[p.stem for p in CONV_FIXTURES])
def test_fixture_matches_tflite_micro(path):
    runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    c = compile_model(path)
    g = c.graph
    local = np.random.default_rng(7)
    xs = []
    for t in g.inputs:
        shape, dt = g.tensors[t].shape, g.tensors[t].dtype
        xs.append(local.uniform(-1, 1, shape).astype(np.float32) if dt == "float32"
                  else local.integers(-128, 128, shape).astype(np.int8))
    it = runtime.Interpreter.from_file(str(path))
    for i, x in enumerate(xs):
        it.set_input(x, i)
    it.invoke()
    ours = run_compiled(c, [xs])[0]
    for i, y in enumerate(ours):
        ref = it.get_output(i)
        if ref.dtype == np.float32:
            assert np.max(np.abs(y - ref)) <= 1e-5 * np.max(np.abs(ref))
        else:
            np.testing.assert_array_equal(y, ref)


# ---- real models, layer by layer, against LiteRT's reference kernels ---------------------------

def _layers_graph(g: Graph, convs: list[Op]) -> Graph:
    """The given layers of `g` as independent ops, each with its own graph input."""
    sub = Graph("layers", copy.deepcopy(g.tensors), [], [], [])
    for op in convs:
        t = sub.tensors[op.inputs[0]]
        xin = sub.add_tensor(t.name + "/layer_input", t.shape, t.dtype, t.quant)
        new = copy.deepcopy(op)
        new.inputs[0] = xin
        sub.ops.append(new)
        sub.inputs.append(xin)
        sub.outputs.append(op.outputs[0])
    return sub


def _check_layers(path: Path, litert_path: Path | None = None) -> None:
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    from stm32ai.frontend.tflite_reader import load_tflite
    g = load_tflite(path)
    li = litert.Interpreter(model_path=str(litert_path or path),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
                            experimental_preserve_all_tensors=True)
    li.allocate_tensors()
    local = np.random.default_rng(1)
    for d in li.get_input_details():
        if d["dtype"] == np.float32:
            x = local.uniform(-1, 1, d["shape"]).astype(np.float32)
        else:
            info = np.iinfo(d["dtype"])
            x = local.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"])
        li.set_tensor(d["index"], x)
    li.invoke()
    index = {d["name"]: d["index"] for d in li.get_tensor_details()}
    convs = [op for op in g.ops if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    assert convs
    results = []
    for i in range(0, len(convs), 8):  # AI_MAX_IO inputs/outputs per model
        chunk = convs[i:i + 8]
        inputs = [li.get_tensor(index[g.tensors[op.inputs[0]].name]) for op in chunk]
        results += run_compiled(compile_graph(_layers_graph(g, chunk)), [inputs])[0]
    for op, y in zip(convs, results, strict=True):
        ref = li.get_tensor(index[g.tensors[op.outputs[0]].name])
        where = f"{op.where} in {path.name}"
        if ref.dtype == np.float32:
            assert np.max(np.abs(y - ref)) <= 1e-5 * np.max(np.abs(ref)), where
        else:
            assert np.array_equal(y, ref), f"{where}: {int(np.sum(y != ref))} of {ref.size} differ"


REAL_MODELS = ["mlperf_tiny/kws_ref_model.tflite", "mlperf_tiny/vww_96_int8.tflite",
               "mlperf_tiny/pretrainedResnet_quant.tflite", "mlperf_tiny/str_ww_ref_model.tflite",
               "tflite_micro/micro_speech_quantized.tflite", "mlperf_tiny/vww_96_float.tflite",
               "mlperf_tiny/pretrainedResnet.tflite",
               "stm32ai_modelzoo/yamnet_256_64x96_esc10_int8.tflite",
               "openmv/fomo_face_detection.tflite"]


@pytest.mark.parametrize("rel", REAL_MODELS, ids=[Path(r).stem for r in REAL_MODELS])
def test_real_model_layers_bit_exact(rel):
    _check_layers(shared_model(rel))


def test_one_channel_depthwise_is_a_gathering_conv():
    """micro_speech's DEPTHWISE_CONV_2D (1x49x40x1, 10x8, stride 2, multiplier 8) is lowered
    to conv2d_s8 with the byte-gathering im2col scratch, and stays bit-exact."""
    path = shared_model("tflite_micro/micro_speech_quantized.tflite")
    op = next(o for o in compile_model(path).graph.ops if o.type == "DEPTHWISE_CONV_2D")
    assert op.kernel == "conv2d_s8" and op.attrs["in_c"] == 1 and op.attrs["out_c"] == 8
    assert op.attrs["krow"] == 1  # 10 rows of 8 taps: already multiples of 4
    # two int16 columns + the two int8 gather columns (Kp = 80), then the padded input copy:
    # 25x20 outputs at stride 2 of 10x8 windows touch 58 x 46 padded pixels, + a slack word
    assert op.attrs["pad_copy"] == 1
    assert op.scratch == 6 * 80 + 58 * 46 + 4
    _check_layers(path)


def test_person_detect_layers_bit_exact(tmp_path):
    """person_detect's rank-1 biases carry quantized_dimension=3: TFLite Micro tolerates it
    and so do we. LiteRT refuses the file, so its reference runs a copy with the field
    reset to 0 (the biases' quantisation plays no part in the arithmetic)."""
    path = shared_model("tflite_micro/person_detect.tflite")
    fu = pytest.importorskip("tensorflow.lite.tools.flatbuffer_utils")
    m = fu.read_model(str(path))
    for t in m.subgraphs[0].tensors:
        q = t.quantization
        if q is not None and q.quantizedDimension and len(t.shape) <= q.quantizedDimension:
            q.quantizedDimension = 0
    fixed = tmp_path / "person_detect_qdim0.tflite"
    fu.write_model(m, str(fixed))
    _check_layers(path, fixed)


# ---- the DSP path ----------------------------------------------------------------------------------

def test_kernels_compile_warning_free_for_cortex_m4(tmp_path):
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    for obj in compile_each("arm-none-eabi-gcc", [*WARN, *M4], CONV_SOURCES, tmp_path):
        dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True).stdout
        if obj.stem in ("ai_conv_s8", "ai_conv_dw_s8"):
            assert "sxtb16" in dis  # the DSP path is the one compiled


SELFTEST_C = r"""
#include <stdio.h>
#include "ai_kernels_conv.h"
#include "ai_simd.h"

static uint32_t seed = 12345u;
static uint32_t rnd(void) { seed = seed * 1664525u + 1013904223u; return seed >> 8; }
static int32_t rr(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); }

static int8_t in_buf[2 * 12 * 12 * 24];
static int8_t w_buf[16 * 4 * 4 * 24 + 64] __attribute__((aligned(8)));
static int16_t w16_buf[16 * 4 * 4 * 24 + 64] __attribute__((aligned(8)));
static int32_t bias[64], mult[64], shift[64], rq[4 * 64], packed[10 * 24];
static int8_t out_buf[2 * 12 * 12 * 64] __attribute__((aligned(8)));
static uint32_t scratch[8192];

static uint32_t fnv(const int8_t *p, int32_t n) {
  uint32_t h = 2166136261u;
  for (int32_t i = 0; i < n; ++i) { h ^= (uint8_t)p[i]; h *= 16777619u; }
  return h;
}

#define GEO(P) do { \
  (P).batches = rr(1, 2); (P).in_h = rr(1, 12); (P).in_w = rr(1, 12); \
  (P).k_h = rr(1, 4); (P).k_w = rr(1, 4); (P).stride[0] = rr(1, 3); (P).stride[1] = rr(1, 3); \
  (P).dilation[0] = rr(1, 2); (P).dilation[1] = rr(1, 2); \
  (P).pad[0] = rr(0, (P).k_h - 1); (P).pad[1] = rr(0, (P).k_w - 1); \
  { int32_t eh = ((P).k_h - 1) * (P).dilation[0] + 1, ew = ((P).k_w - 1) * (P).dilation[1] + 1; \
    (P).out_h = ((P).in_h + 2 * (P).pad[0] - eh) / (P).stride[0] + 1; \
    (P).out_w = ((P).in_w + 2 * (P).pad[1] - ew) / (P).stride[1] + 1; } \
  (P).pad_value = rr(-128, 127); (P).out_offset = rr(-128, 127); \
  (P).act_min = rr(-128, 0); (P).act_max = rr((P).act_min, 127); \
} while (0)

static void fill(int32_t n_in, int32_t n_w, int32_t oc) {
  for (int32_t i = 0; i < n_in; ++i) in_buf[i] = (int8_t)rr(-128, 127);
  for (int32_t i = 0; i < n_w; ++i) w_buf[i] = (int8_t)rr(-128, 127);
  const int big = rr(0, 3) == 0;
  for (int32_t i = 0; i < oc; ++i) {
    bias[i] = big ? (int32_t)(rnd() << 8) : rr(-100000, 100000);
    mult[i] = (int32_t)(0x40000000u + (rnd() % 0x40000000u));
    shift[i] = rr(-14, 2);
  }
}

#define FITS(P, NW) ((P).out_h >= 1 && (P).out_w >= 1 && \
  (P).batches * (P).in_h * (P).in_w * (P).in_c <= (int32_t)sizeof in_buf && (NW) <= (int32_t)sizeof w_buf && \
  (P).batches * (P).out_h * (P).out_w * (P).out_c <= (int32_t)sizeof out_buf)

int main(void) {
  int ran = 0;
  for (int c = 0; c < 600; ++c) {
    ai_conv2d_s8_params p;
    int rows1 = 0;
    GEO(p);
    p.in_c = rr(1, 24); p.out_c = rr(1, 16);
    p.w16 = rr(0, 1); p.rq_fold = rr(0, 1); p.reverse = rr(0, 1);
    /* half of the layers without a narrower clamp: the rq_fold + SSAT assembly (pair and
     * channel-quad loops) runs only then */
    if (rr(0, 1)) { p.act_min = -128; p.act_max = 127; }
    p.krow = (p.in_c & 3) != 0 && p.dilation[1] == 1 ? rr(0, 1) : 0;
    /* staged in scratch: not, in blocks of 2..out_c+1 channels (an odd request rounds down) */
    p.stage_oc = rr(0, 2) == 0 ? 0 : rr(1, p.out_c + 1);
    if (c >= 400) { /* the Cortex-M4 channel-quad loop's conditions (AI_CONV_QUAD), mostly; half
                       with a channel count that is not a multiple of 4 (unaligned quad stores) */
      /* rq_fold 2, 3: the doubled-accumulator requantisation (AI_RQ_ACC_MM, AI_RQ_ACC_MM0), whose
         proof needs |acc| < 2^30: small biases below */
      p.out_c = rr(0, 1) ? 4 * rr(1, 4) : rr(4, 16); p.w16 = 1; p.rq_fold = rr(1, 3); p.act_min = -128; p.act_max = 127;
      if (p.rq_fold == 3) p.out_offset = -128; /* AI_RQ_ACC_MM0's condition (mult >= 2^30 below) */
      p.stage_oc = rr(0, 4) == 0 ? 2 * rr(1, p.out_c / 2) : 4 * rr(1, p.out_c / 4 + 1);
      if (rr(0, 2) == 0) { /* pointwise with rq_fold 3: the compact pair loop (conv_pairs_w16_m1qz_lin) */
        p.k_h = p.k_w = 1; p.stride[0] = p.stride[1] = 1; p.dilation[0] = p.dilation[1] = 1;
        p.pad[0] = p.pad[1] = 0; p.out_h = p.in_h; p.out_w = p.in_w; p.in_c = 4 * rr(1, 6); p.krow = 0;
        p.rq_fold = 3; p.out_offset = -128;
      } else if (rr(0, 1)) { /* first-layer windows whose rows are one group (krow rows of at most 4
                                bytes, KWS's 10x4x1) with rq_fold 3: conv_pairs_w16_m1qz_lin2's row loop
                                (conv_unpack2_rows1) on the padded copy */
        p.in_c = rr(1, 2); p.k_w = rr(1, 4 / p.in_c); p.k_h = rr(1, 10); p.dilation[0] = p.dilation[1] = 1;
        p.pad[0] = rr(0, p.k_h - 1); p.pad[1] = rr(0, p.k_w - 1); p.in_h = rr(1, 12);
        p.out_h = (p.in_h + 2 * p.pad[0] - p.k_h) / p.stride[0] + 1;
        p.out_w = (p.in_w + 2 * p.pad[1] - p.k_w) / p.stride[1] + 1;
        p.krow = 1; p.rq_fold = 3; p.out_offset = -128; rows1 = 1;
      }
    }
    p.pad_copy = rows1 || rr(0, 2) == 0; /* the padded input copy: any geometry */
    const int32_t kp = p.krow ? p.k_h * ((p.k_w * p.in_c + 3) & ~3) : (p.k_h * p.k_w * p.in_c + 3) & ~3;
    const int32_t nw = kp * p.out_c;
    if (!FITS(p, nw) || ai_conv2d_s8_scratch_size(&p) > (int32_t)sizeof scratch) continue;
    fill(p.batches * p.in_h * p.in_w * p.in_c, nw, p.out_c);
    if (p.rq_fold >= 2) {
      for (int32_t i = 0; i < p.out_c; ++i) bias[i] = rr(-100000, 100000);
    }
    if (p.krow) { /* a filter row's padding holds zero weights (as the lowering writes them): the
                     bytes a padded row reads past its run are then ignored, whatever they are */
      const int32_t run = p.k_w * p.in_c, runp = (run + 3) & ~3, body = 2 * (p.out_c / 2) * kp;
      for (int32_t o = 0; o < nw; ++o) {
        const int32_t k = o < body ? (o % (2 * kp)) / 8 * 4 + o % 4 : o - body; /* its K index */
        if (k % runp >= run) w_buf[o] = 0;
      }
    }
    /* the int16 layout: each 4-byte group {w0,w1,w2,w3} as the pairs {w0,w2} {w1,w3} */
    for (int32_t i = 0; i < nw; ++i) w16_buf[i] = w_buf[(i & ~3) | ((i & 1) << 1) | ((i >> 1) & 1)];
    for (int32_t i = 0; i < p.out_c; ++i) {
      const int32_t rs = rr(1, 14);
      rq[4 * i] = bias[i]; rq[4 * i + 1] = mult[i];
      rq[4 * i + 2] = p.rq_fold ? rs : shift[i];
      rq[4 * i + 3] = p.rq_fold ? (1 << (rs - 1)) + p.out_offset * (1 << rs) : 0;
    }
    /* staged layers keep the int8 layout in flash (w16: expanded while staging) */
    ai_conv2d_s8(&p, in_buf, p.w16 && !p.stage_oc ? (const int8_t *)w16_buf : w_buf, rq, out_buf, scratch);
    const int32_t n_out = p.batches * p.out_h * p.out_w * p.out_c;
    const uint32_t h = fnv(out_buf, n_out);
    printf("conv %d %08lx\n", c, (unsigned long)h);
    if (p.stage_oc) { /* the same layer read from the weights where they are: identical */
      ai_conv2d_s8_params q = p;
      q.stage_oc = 0;
      ai_conv2d_s8(&q, in_buf, q.w16 ? (const int8_t *)w16_buf : w_buf, rq, out_buf, scratch);
      printf("%s %d\n", fnv(out_buf, n_out) == h ? "staged" : "stagediff", c);
    }
    if (p.pad_copy) { /* the same layer on the image itself (padded windows gathered): identical */
      ai_conv2d_s8_params q = p;
      q.pad_copy = 0;
      ai_conv2d_s8(&q, in_buf, p.w16 && !p.stage_oc ? (const int8_t *)w16_buf : w_buf, rq, out_buf, scratch);
      printf("%s %d\n", fnv(out_buf, n_out) == h ? "copied" : "copydiff", c);
    }
    { /* one column (ai_conv2d_s8_1col) on the unstaged layout: identical where it applies */
      ai_conv2d_s8_params q = p;
      q.stage_oc = 0; q.pad_copy = 0; q.reverse = 0;
      if ((q.in_c & 3) == 0) {
        memset(out_buf, 0x5A, sizeof out_buf);
        ai_conv2d_s8_1col(&q, in_buf, q.w16 ? (const int8_t *)w16_buf : w_buf, rq, out_buf, scratch);
        printf("%s %d\n", fnv(out_buf, n_out) == h ? "onecol" : "onecoldiff", c);
      }
    }
    ++ran;
  }
  for (int c = 0; c < 300; ++c) {
    ai_depthwise_conv2d_s8_params p;
    GEO(p);
    p.in_c = rr(1, 24); p.out_c = p.in_c;
    if (!FITS(p, p.k_h * p.k_w * p.in_c)) continue;
    fill(p.batches * p.in_h * p.in_w * p.in_c, p.k_h * p.k_w * p.in_c, p.out_c);
    ai_depthwise_conv2d_s8(&p, in_buf, w_buf, bias, mult, shift, out_buf, scratch);
    printf("dw %d %08lx\n", c, (unsigned long)fnv(out_buf, p.batches * p.out_h * p.out_w * p.out_c));
    ++ran;
  }
  for (int c = 0; c < 300; ++c) {
    ai_depthwise_conv2d_3x3_s8_params p;
    p.batches = rr(1, 2); p.in_h = rr(1, 12); p.in_w = rr(1, 12); p.in_c = rr(1, 24);
    p.out_c = p.in_c * rr(1, 3);
    if (p.out_c > 24) p.out_c = p.in_c;
    p.k_h = p.k_w = 3; p.stride[0] = p.stride[1] = rr(1, 2); p.dilation[0] = p.dilation[1] = 1;
    p.pad[0] = rr(0, 1); p.pad[1] = rr(0, 1);
    p.out_h = (p.in_h + p.pad[0] + rr(0, 2 - p.pad[0]) - 3) / p.stride[0] + 1;
    p.out_w = (p.in_w + p.pad[1] + rr(0, 2 - p.pad[1]) - 3) / p.stride[1] + 1;
    if (p.in_h + p.pad[0] + 2 < 3 || p.in_w + p.pad[1] + 2 < 3) continue;
    p.pad_value = rr(-128, 127); p.transpose = rr(0, 1); p.stage = rr(0, 1);
    { const int32_t ow = p.transpose ? p.out_h : p.out_w, iw = p.transpose ? p.in_h : p.in_w;
      const int32_t pl = p.transpose ? p.pad[0] : p.pad[1], pairs = ow / 2, odd = ow % 2;
      int32_t words = p.stride[0] == 1 ? pairs + 1 + odd : 2 * pairs + 1 + odd;
      if ((pl + iw + 1) / 2 > words) words = (pl + iw + 1) / 2;
      p.plane_w = 2 * words; }
    if (!FITS(p, 0) || ai_depthwise_conv2d_3x3_s8_scratch_size(&p) > (int32_t)sizeof scratch) continue;
    fill(p.batches * p.in_h * p.in_w * p.in_c, 0, 0);
    const int sgn = rr(0, 1), g2 = rr(0, 1);
    /* rqd 2, 3 (the Cortex-M4's doubled accumulator; the host ignores it): its conditions as
       the lowering proves them, e >= 2, |acc| < 2^30 (small biases), rqd 3 with zp = -128 */
    p.rqd = rr(0, 2) == 0 ? 0 : rr(2, 3);
    for (int32_t i = 0; i < p.out_c; ++i) {
      int32_t *k = packed + 10 * i;
      for (int j = 0; j < 6; ++j) { /* {w0, w1}, {w1, w2} per kernel row, as pack_dw3x3 */
        const uint32_t lo = j & 1 ? (uint32_t)k[j - 1] >> 16 : (uint32_t)rr(-128, 127) & 0xFFFFu;
        k[j] = (int32_t)(lo | ((uint32_t)rr(-128, 127) << 16));
      }
      const int32_t e = rr(p.rqd ? 2 : 2 - sgn, 23), zp = p.rqd == 3 ? -128 : rr(-128, 127);
      k[6] = rr(0, 3) == 0 && !p.rqd ? (int32_t)(rnd() << 8) : rr(-100000, 100000);
      k[7] = (int32_t)(0x40000000u + (rnd() % 0x40000000u));
      k[8] = (int32_t)((e >= 2 ? 1u << (e - 2) : 0u) + (uint32_t)zp * (1u << (e - 1)));
      k[9] = e - 1;
    }
    if (g2 && sgn) {
      ai_depthwise_conv2d_3x3_g2_sgn_s8(&p, in_buf, packed, out_buf, scratch);
    } else if (g2) {
      ai_depthwise_conv2d_3x3_g2_s8(&p, in_buf, packed, out_buf, scratch);
    } else if (sgn) {
      ai_depthwise_conv2d_3x3_sgn_s8(&p, in_buf, packed, out_buf, scratch);
    } else {
      ai_depthwise_conv2d_3x3_s8(&p, in_buf, packed, out_buf, scratch);
    }
    printf("dw3 %d rqd%d %08lx\n", c, (int)p.rqd,
           (unsigned long)fnv(out_buf, p.batches * p.out_h * p.out_w * p.out_c));
    if (!p.transpose) { /* the HWC kernel on the same params and constants: the same outputs */
      static int8_t out2[sizeof out_buf];
      if (sgn) {
        ai_depthwise_conv2d_3x3_hwc_sgn_s8(&p, in_buf, packed, out2);
      } else {
        ai_depthwise_conv2d_3x3_hwc_s8(&p, in_buf, packed, out2);
      }
      printf(memcmp(out2, out_buf, (size_t)(p.batches * p.out_h * p.out_w * p.out_c)) ? "hwcdiff %d\n" : "hwc %d\n", c);
    }
    ++ran;
  }
  for (int c = 0; c < 100; ++c) {
    ai_depthwise_conv2d_dm_s8_params p;
    GEO(p);
    p.in_c = rr(1, 8); p.depth_mult = rr(1, 3); p.out_c = p.in_c * p.depth_mult;
    if (!FITS(p, p.k_h * p.k_w * p.out_c)) continue;
    fill(p.batches * p.in_h * p.in_w * p.in_c, p.k_h * p.k_w * p.out_c, p.out_c);
    ai_depthwise_conv2d_dm_s8(&p, in_buf, w_buf, bias, mult, shift, out_buf);
    printf("dm %d %08lx\n", c, (unsigned long)fnv(out_buf, p.batches * p.out_h * p.out_w * p.out_c));
    ++ran;
  }
  {  /* rq_fold (SMLAL inline assembly on the M4) on edge accumulators */
    static const int32_t xs[] = {0, 1, -1, 2, -2, 255, -255, 65536, -65537, 0x3FFFFFFF, -0x40000000,
                                 0x7FFFFFFF, (-0x7FFFFFFF - 1)};
    for (int32_t rs = 1; rs <= 30; ++rs) {
      const int32_t m = (int32_t)(0x40000000u + (rnd() % 0x40000000u));
      const int32_t kf = (1 << (rs - 1)) + (rs < 22 ? rr(-128, 127) * (1 << rs) : 0);
      for (unsigned i = 0; i < sizeof xs / sizeof xs[0]; ++i) {
        printf("rq %ld\n", (long)rq_fold(xs[i], m, rs, kf));
      }
    }
  }
  for (int c = 0; c < 500; ++c) {
    /* odd pixel counts, mostly 1x1 (in_c % 4 == 0, unstaged, forward): the odd last pixel on its
       own (conv_pixel) and, int8 weights, the last pair with it in one weight pass (conv_triple),
       against the one-column kernel; in place (output on the input, the planner's 1x1 overlap) */
    ai_conv2d_s8_params p;
    p.batches = rr(1, 2); p.in_h = rr(1, 11); p.in_w = rr(1, 11);
    p.k_h = p.k_w = rr(0, 3) == 0 ? rr(2, 3) : 1; p.stride[0] = rr(1, 2); p.stride[1] = rr(1, 2);
    p.dilation[0] = p.dilation[1] = 1; p.pad[0] = rr(0, p.k_h - 1); p.pad[1] = rr(0, p.k_w - 1);
    p.out_h = (p.in_h + 2 * p.pad[0] - p.k_h) / p.stride[0] + 1;
    p.out_w = (p.in_w + 2 * p.pad[1] - p.k_w) / p.stride[1] + 1;
    p.pad_value = rr(-128, 127); p.out_offset = rr(-128, 127);
    p.act_min = rr(-128, 0); p.act_max = rr(p.act_min, 127);
    if (rr(0, 1)) { p.act_min = -128; p.act_max = 127; }
    p.in_c = 4 * rr(1, 6); p.out_c = rr(0, 2) ? 2 * rr(1, 8) : rr(1, 16);
    if (rr(0, 3) == 0) { /* the planner's in-place 1x1: same channel count, stride 1 */
      p.k_h = p.k_w = 1; p.pad[0] = p.pad[1] = 0; p.stride[0] = p.stride[1] = 1;
      p.out_h = p.in_h; p.out_w = p.in_w; p.out_c = p.in_c;
    }
    p.w16 = rr(0, 2) == 0; p.rq_fold = rr(0, 3) != 0; p.krow = 0; p.reverse = 0; p.stage_oc = 0; p.pad_copy = 0;
    const int32_t kp = p.k_h * p.k_w * p.in_c, nw = kp * p.out_c;
    if (!FITS(p, nw) || p.out_h < 1 || p.out_w < 1 || (p.out_h * p.out_w) % 2 == 0) continue;
    fill(p.batches * p.in_h * p.in_w * p.in_c, nw, p.out_c);
    for (int32_t i = 0; i < nw; ++i) w16_buf[i] = w_buf[(i & ~3) | ((i & 1) << 1) | ((i >> 1) & 1)];
    for (int32_t i = 0; i < p.out_c; ++i) {
      const int32_t rs = rr(1, 14);
      rq[4 * i] = bias[i]; rq[4 * i + 1] = mult[i];
      rq[4 * i + 2] = p.rq_fold ? rs : shift[i];
      rq[4 * i + 3] = p.rq_fold ? (1 << (rs - 1)) + p.out_offset * (1 << rs) : 0;
    }
    const int8_t *wl = p.w16 ? (const int8_t *)w16_buf : w_buf;
    const int32_t n_in = p.batches * p.in_h * p.in_w * p.in_c, n_out = p.batches * p.out_h * p.out_w * p.out_c;
    memset(out_buf, 0x5A, sizeof out_buf);
    ai_conv2d_s8(&p, in_buf, wl, rq, out_buf, scratch);
    const uint32_t h = fnv(out_buf, n_out);
    printf("px %d %08lx\n", c, (unsigned long)h);
    memset(out_buf, 0x5A, sizeof out_buf);
    ai_conv2d_s8_1col(&p, in_buf, wl, rq, out_buf, scratch);
    printf("%s %d\n", fnv(out_buf, n_out) == h ? "px1" : "px1diff", c);
    if (p.k_h == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.out_c == p.in_c) {
      memcpy(out_buf, in_buf, (size_t)n_in);
      ai_conv2d_s8(&p, out_buf, wl, rq, out_buf, scratch);
      printf("%s %d\n", fnv(out_buf, n_out) == h ? "inplace" : "inplacediff", c);
    }
    ++ran;
  }
  printf("cases %d\n", ran);
  return 0;
}
"""



@pytest.mark.slow
@pytest.mark.parametrize("defines", [[], ["-DAI_CONV_QUAD_MIN=0", "-DAI_CONV_QUAD_MIN_LIN=0"], ["-DAI_CORE_CM7=1"]],
                         ids=["m4", "m4-quads", "cm7-paths"])
def test_dsp_path_on_cortex_m4_matches_host_path(tmp_path, defines):
    """The same random layers through the SMLAD/SXTB16 code on an emulated Cortex-M4 and
    through the portable C on the host (itself checked against TFLite above): identical.
    `cm7-paths`: the code a Cortex-M7 build takes (AI_CORE_CM7: the software-pipelined w16 loop
    and gcc's channel loop), which is plain Armv7E-M and runs on the emulated M4. `m4-quads`:
    the channel-quad loop (AI_CONV_QUAD) on every staged block that qualifies, whatever its size."""
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "cc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    (tmp_path / "selftest.c").write_text(SELFTEST_C)
    (tmp_path / "startup.c").write_text(STARTUP_C)
    (tmp_path / "mps2.ld").write_text(MPS2_LD)
    inc = f"-I{RUNTIME / 'include'}"
    s8 = [str(RUNTIME / "src" / f) for f in ("ai_conv_s8.c", "ai_conv_dw_s8.c", "ai_conv_dw3_hwc_s8.c")]
    r = subprocess.run(["arm-none-eabi-gcc", *WARN, *M4, *defines, inc, "--specs=rdimon.specs", "-T", "mps2.ld",
                        "selftest.c", "startup.c", *s8, "-o", "fw.elf"], cwd=tmp_path, capture_output=True,
                       text=True)
    if r.returncode != 0 and "rdimon" in r.stderr:
        pytest.skip("newlib's rdimon (semihosting) library is not installed")
    assert r.returncode == 0, r.stderr
    subprocess.run(["cc", *WARN, inc, "selftest.c", *s8, "-o", "host"], cwd=tmp_path, check=True)
    host = subprocess.run([str(tmp_path / "host")], capture_output=True, text=True, check=True).stdout
    arm = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-monitor", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", "fw.elf"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    assert host.strip().splitlines()[-1].startswith("cases ")
    assert int(host.split()[-1]) > 900 and host.count("dw3 ") > 200
    assert host.count(" rqd2 ") > 40 and host.count(" rqd3 ") > 40  # the M4's doubled rows
    assert host.count("staged ") > 250 and "stagediff" not in host  # staged == read in place
    assert host.count("copied ") > 100 and "copydiff" not in host  # pad_copy == padded windows gathered
    assert host.count("onecol ") > 100 and "onecoldiff" not in host  # one column == pixel pairs
    assert host.count("hwc ") > 50 and "hwcdiff" not in host  # the HWC 3x3 depthwise == the planar one
    # the odd last pixel (conv_pixel, conv_triple) == one column, and in place
    assert host.count("px1 ") > 100 and "px1diff" not in host
    assert host.count("inplace ") > 5 and "inplacediff" not in host
    assert arm.replace("\r", "") == host


def test_dw3x3_tall_image_walk_follows_the_optimization():
    """A tall image (KWS 25x5) is walked along its height (faster, more scratch): with groups
    of 4 channels under --optimization time, of 2 (half the scratch) by default; --optimization
    ram keeps the row walk and its smaller scratch. All are bit-exact."""
    c = 8
    g = make_layer("DEPTHWISE_CONV_2D", (1, 25, 5, c), _w((1, 3, 3, c), "int8"), rng.integers(-50, 50, c),
                   w_scales=np.full(c, 0.02))
    x = _x((1, 25, 5, c), "int8")
    ref = reference(g, x)
    comp = {m: compile_graph(copy.deepcopy(g), optimization=m) for m in ("time", "balanced", "ram")}
    ops = {m: next(op for op in cc.graph.ops if op.kernel.startswith("depthwise_conv2d_3x3"))
           for m, cc in comp.items()}
    assert [(ops[m].kernel, ops[m].attrs["transpose"]) for m in ("time", "balanced", "ram")] == [
        ("depthwise_conv2d_3x3_s8", 1), ("depthwise_conv2d_3x3_g2_s8", 1), ("depthwise_conv2d_3x3_s8", 0)]
    assert ops["ram"].scratch < ops["balanced"].scratch == ops["time"].scratch // 2
    for cc in comp.values():
        np.testing.assert_array_equal(run_compiled(cc, [[x]])[0][0], ref)
