"""conv2d_smallk_s8: int8 1x1 CONV_2D with 4 or 8 input channels, channel-stationary
(stm32ai/passes/lower/conv_smallk.py, runtime/src/ai_conv_smallk_s8.c; docs/kernels_conv_smallk.md).

Reference: TFLite's reference convolution transcribed loop for loop (test_lower_conv.reference),
over random layers (strides, batches, zero points, fused activations, every requantisation mode);
the Cortex-M4 assembly loop on QEMU against the same reference (slow)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_lower_conv import make_layer, reference

from stm32ai.passes.lower.conv_smallk import smallk_applies, smallk_default
from stm32ai.pipeline import compile_graph
from stm32ai.validate.host import run_compiled

rng = np.random.default_rng(2626)

# (name, x shape, out_c, stride, act, out zero point, bias scale): out_zp -128 with a small bias
# gives rq_fold 3, another zero point 2, a bias near 2^30 the plain rq_fold (1)
LAYERS = [
    ("c8_oc16_s1_zp-128", (1, 6, 7, 8), 16, (1, 1), "NONE", -128, 5000, 3),
    ("c8_oc5_s1_zp7_relu", (1, 5, 5, 8), 5, (1, 1), "RELU", 7, 5000, 2),
    ("c4_oc3_s1_relu6", (2, 4, 3, 4), 3, (1, 1), "RELU6", -128, 5000, 3),
    ("c8_oc9_s2_batch2", (2, 7, 9, 8), 9, (2, 2), "NONE", 11, 5000, 2),
    ("c4_oc1_s12", (1, 5, 8, 4), 1, (1, 2), "NONE", -3, 5000, 2),
    ("c8_oc6_bigbias", (1, 3, 5, 8), 6, (1, 1), "NONE", -128, (1 << 30) + 1, 1),
    ("c8_oc4_1px", (1, 1, 1, 8), 4, (1, 1), "NONE", 0, 5000, 2),
    ("c4_oc7_n1_to_1", (1, 4, 6, 4), 7, (1, 1), "RELU_N1_TO_1", 2, 5000, 2),
]


def _layer(x_shape, oc, stride, act, out_zp, bias_mag):
    ic = x_shape[3]
    w = rng.integers(-128, 128, (oc, 1, 1, ic)).astype(np.int8)
    bias = rng.integers(-bias_mag, bias_mag, oc).astype(np.int32)
    bias[0] = bias_mag  # the largest bias: it decides the requantisation mode
    scales = rng.uniform(0.002, 0.05, oc).astype(np.float32)
    in_q = (float(rng.uniform(0.01, 0.1)), int(rng.integers(-128, 128)))
    out_q = (float(rng.uniform(0.05, 0.5)), out_zp)
    return make_layer("CONV_2D", x_shape, w, bias, padding="SAME", stride=stride, act=act, in_q=in_q,
                      w_scales=scales, out_q=out_q)


@pytest.mark.parametrize("name,x_shape,oc,stride,act,out_zp,bias_mag,mode", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_bit_exact_with_tflite_reference(name, x_shape, oc, stride, act, out_zp, bias_mag, mode):
    g = _layer(x_shape, oc, stride, act, out_zp, bias_mag)
    c = compile_graph(copy.deepcopy(g), core="cortex-m4")
    op = c.graph.ops[0]
    assert op.kernel == "conv2d_smallk_s8"
    assert op.attrs["rq_fold"] == mode
    xs = [rng.integers(-128, 128, x_shape).astype(np.int8) for _ in range(2)]
    xs += [np.full(x_shape, v, np.int8) for v in (-128, 127)]
    outs = run_compiled(c, [[x] for x in xs])
    for x, out in zip(xs, outs, strict=True):
        np.testing.assert_array_equal(out[0], reference(g, x))


def test_rule_and_fallbacks():
    g = _layer((1, 4, 4, 8), 6, (1, 1), "NONE", -128, 5000)
    # other cores, --optimization ram: conv2d_s8
    assert compile_graph(copy.deepcopy(g), core="cortex-m7").graph.ops[0].kernel == "conv2d_s8"
    assert compile_graph(copy.deepcopy(g)).graph.ops[0].kernel == "conv2d_s8"
    assert compile_graph(copy.deepcopy(g), core="cortex-m4", optimization="ram").graph.ops[0].kernel == "conv2d_s8"
    # other geometries: 3x3, in_c 16, in_c 3
    for shape, k in (((1, 4, 4, 8), 3), ((1, 4, 4, 16), 1), ((1, 4, 4, 3), 1)):
        w = rng.integers(-128, 128, (4, k, k, shape[3])).astype(np.int8)
        h = make_layer("CONV_2D", shape, w, np.zeros(4, np.int32), w_scales=[0.01] * 4)
        assert compile_graph(h, core="cortex-m4").graph.ops[0].kernel == "conv2d_s8"
    # a general (unfolded) requantisation table: effective scale >= 0.25 keeps conv2d_s8
    w = rng.integers(-128, 128, (4, 1, 1, 8)).astype(np.int8)
    h = make_layer("CONV_2D", (1, 3, 3, 8), w, np.zeros(4, np.int32), w_scales=[1.0] * 4, in_q=(1.0, 0),
                   out_q=(1.0, 0))
    c = compile_graph(copy.deepcopy(h), core="cortex-m4")
    assert c.graph.ops[0].kernel == "conv2d_s8"
    x = rng.integers(-128, 128, (1, 3, 3, 8)).astype(np.int8)
    np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], reference(h, x))


def test_applies():
    from stm32ai.passes.lower.conv_geometry import ConvGeometry

    def geo(k: int, ic: int, pad: int = 0) -> ConvGeometry:
        return ConvGeometry(batches=1, in_h=4, in_w=4, in_c=ic, out_h=4, out_w=4, out_c=4, k_h=k, k_w=k,
                            stride=(1, 1), dilation=(1, 1), pad=(pad, pad))

    assert smallk_applies(geo(1, 8)) and smallk_applies(geo(1, 4))
    assert not smallk_applies(geo(1, 16)) and not smallk_applies(geo(3, 8)) and not smallk_applies(geo(1, 2))
    assert smallk_default(geo(1, 8), "cortex-m4", "balanced") and smallk_default(geo(1, 8), "cortex-m4", "time")
    assert not smallk_default(geo(1, 8), "cortex-m4", "ram") and not smallk_default(geo(1, 8), "cortex-m33", "time")
