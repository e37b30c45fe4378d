"""Exact integer Winograd F(2x2,3x3) for int8 3x3 stride-1 CONV_2D (--winograd,
stm32ai/passes/lower/conv_wino.py, runtime/src/ai_conv_wino_s8.c; docs/kernels_conv_wino.md).

References: TFLite's reference convolution transcribed loop for loop (test_lower_conv.reference),
TFLite Micro on the converter-made conv fixtures, and hand-computed bounds."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from conftest import FIXTURES, WARN, c_scratch_sizes, shared_model
from test_lower_conv import make_layer, reference

from stm32ai.ir import Op
from stm32ai.passes.lower.conv_wino import (
    WINO_VARIANT,
    pack_wino_weights,
    transform_filters,
    transform_filters_1d,
    wino1_scratch_size,
    wino_acc_bounds,
    wino_legal,
    wino_proved,
    wino_scratch_size,
    wino_weight_passes,
)
from stm32ai.pipeline import compile_graph, compile_model
from stm32ai.validate.host import run_compiled

rng = np.random.default_rng(2511)
B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.int64)
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.int64)


def test_filter_transform_is_four_times_g_g_gt():
    # G of F(2,3) (Lavin & Gray 2016) in floats; U' = G' g G'^T with G' = 2G is 4 G g G^T, integer
    g_f = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    w = rng.integers(-128, 128, (3, 3, 3, 5)).astype(np.int8)  # [oc, kh, kw, ic]
    u = transform_filters(w)
    for o in range(3):
        for c in range(5):
            want = 4 * g_f @ w[o, :, :, c].astype(np.float64) @ g_f.T
            assert np.array_equal(u[o, :, c].reshape(4, 4), want.astype(np.int64))
    # extreme filter: the centre rows [1, +-1, 1] give 9 * 128 = 1152 at most, int16
    assert np.abs(transform_filters(np.full((1, 3, 3, 1), -128, np.int8))).max() == 1152


def test_winograd_identity_is_exact_in_integers():
    # A^T (U' . B^T d B) A == 4 * (the 2x2 valid correlation of d with g), no rounding anywhere
    for _ in range(20):
        g = rng.integers(-128, 128, (1, 3, 3, 1)).astype(np.int8)
        d = rng.integers(-255, 256, (4, 4)).astype(np.int64)
        v = B_T @ d @ B_T.T
        assert np.abs(v).max() <= 1020
        y4 = A_T @ (transform_filters(g)[0, :, 0].reshape(4, 4) * v) @ A_T.T
        direct = np.array([[np.sum(d[i:i + 3, j:j + 3] * g[0, :, :, 0]) for j in range(2)] for i in range(2)])
        assert np.array_equal(y4, 4 * direct)


def test_weight_layout():
    # [out pair][16 positions][in pair][2 out][2 in]; out_c 3 -> 4 and in_c 3 -> 4 zero-filled
    w = rng.integers(-128, 128, (3, 3, 3, 3)).astype(np.int8)
    packed = pack_wino_weights(w)
    assert packed.dtype == np.int16 and packed.size == 4 * 16 * 4
    p = packed.reshape(2, 16, 2, 2, 2)
    u = transform_filters(w)
    for o in range(4):
        for pos in range(16):
            for c in range(4):
                want = u[o, pos, c] if o < 3 and c < 3 else 0
                assert p[o // 2, pos, c // 2, o % 2, c % 2] == want


def test_weight_layout_pairs_for_the_simd_input_transform():
    # in_c % 4 == 0: in each group of 4 input channels the pairs are (0, 2) and (1, 3)
    w = rng.integers(-128, 128, (2, 3, 3, 8)).astype(np.int8)
    p = pack_wino_weights(w).reshape(1, 16, 4, 2, 2)
    u = transform_filters(w)
    order = [0, 2, 1, 3, 4, 6, 5, 7]
    for o in range(2):
        for pos in range(16):
            for k in range(8):
                assert p[0, pos, k // 2, o, k % 2] == u[o, pos, order[k]]


def test_accumulator_bound_hand_computed():
    # all -128: per position sum_ic |U'| is at most 1152 * in_c (the centre), so |M| <= 1020 *
    # 1152 * in_c = 1,175,040 * in_c; the inverse transform's 4 * 255 * 9 * 128 * in_c is the same.
    # < 2^31 up to in_c = 1827 (2,146,798,080), not at 1828 (2,147,973,120)
    m, y4 = wino_acc_bounds(np.full((1, 3, 3, 1827), -128, np.int8))
    assert m[0] == y4[0] == 2_146_798_080
    assert wino_proved(np.full((1, 3, 3, 1827), -128, np.int8))
    assert not wino_proved(np.full((1, 3, 3, 1828), -128, np.int8))
    assert wino_proved(np.full((1, 3, 3, 1828), 64, np.int8))


def test_layer_over_the_bound_falls_back_to_direct():
    w = np.full((1, 3, 3, 1828), -128, np.int8)
    g = make_layer("CONV_2D", (1, 2, 2, 1828), w, np.zeros(1, np.int32), w_scales=[1e-6])
    g2 = copy.deepcopy(g)
    g2.ops[0].inputs[1] = g2.add_const("w2", np.full((1, 3, 3, 1828), 64, np.int8), g.tensors[g.ops[0].inputs[1]].quant)
    assert compile_graph(g, winograd=True).graph.ops[0].kernel == "conv2d_s8"
    assert compile_graph(g2, winograd=True).graph.ops[0].kernel == "conv2d_wino_s8"


# (name, x shape, out_c, options)
LAYERS = [
    ("same_even_c8", (1, 6, 8, 8), 6, dict()),
    ("same_odd_hw_odd_c", (1, 7, 5, 3), 5, dict(act="RELU")),
    ("valid_odd_out_c5", (1, 8, 9, 5), 4, dict(padding="VALID", act="RELU6")),
    ("valid_batch2_no_bias", (2, 5, 6, 4), 3, dict(padding="VALID", bias=False)),
    ("same_1x1_image", (1, 1, 1, 2), 3, dict()),
    ("same_c1_wide", (1, 3, 11, 1), 2, dict(act="RELU_N1_TO_1")),
    ("same_c32", (1, 4, 4, 32), 7, dict()),
    # 18 tiles a row: blocks of 4, 4, 4, 4, 2 (no core: one quad a block), the bands' kept
    # pixels, the last band one row; the Cortex-M7's blocks of 8, 8, 2
    ("same_wide_blocks_odd_tiles", (1, 5, 35, 6), 5, dict()),
    ("same_wide_blocks_of_8", (1, 6, 35, 6), 5, dict(core="cortex-m7")),
    # the output over its input (the graph input dies here) a row and a pixel below it, the
    # tightest offset: wrong if a block stored over input a later block reads (the kept pixel)
    ("same_c16_over_input", (1, 7, 20, 16), 16, dict(overlap=True)),
    ("same_c24_over_input_m7", (1, 8, 34, 24), 24, dict(overlap=True, core="cortex-m7")),
]


@pytest.mark.parametrize("name,x_shape,oc,opts", LAYERS, ids=[case[0] for case in LAYERS])
def test_layer_bit_exact_with_tflite_reference(name, x_shape, oc, opts):
    ic = x_shape[3]
    w = rng.integers(-128, 128, (oc, 3, 3, ic)).astype(np.int8)
    bias = None if opts.get("bias") is False else rng.integers(-50000, 50000, oc).astype(np.int32)
    scales = rng.uniform(0.002, 0.05, oc).astype(np.float32)  # per channel, random
    in_q = (float(rng.uniform(0.01, 0.1)), int(rng.integers(-128, 128)))
    out_q = (float(rng.uniform(0.5, 4)), int(rng.integers(-20, 20)))
    g = make_layer("CONV_2D", x_shape, w, bias, padding=opts.get("padding", "SAME"), act=opts.get("act", "NONE"),
                   in_q=in_q, w_scales=scales, out_q=out_q)
    c = compile_graph(copy.deepcopy(g), winograd=True, core=opts.get("core"))
    op: Op = c.graph.ops[0]
    assert op.kernel == "conv2d_wino_s8"
    assert op.attrs["tiles"] == (8 if opts.get("core") == "cortex-m7" else 4)
    if opts.get("overlap"):
        x_id, y_id = op.inputs[0], op.outputs[0]
        assert c.plan.tensor_offset(y_id) - c.plan.tensor_offset(x_id) == -(x_shape[2] + 1) * ic
    for _ in range(2):
        x = rng.integers(-128, 128, x_shape).astype(np.int8)
        np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], reference(g, x))
    # extremes: every input at -128 / 127 (the transformed values' bounds)
    for v in (-128, 127):
        x = np.full(x_shape, v, np.int8)
        np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], reference(g, x))


WINO_FIXTURES = [FIXTURES / f"{n}.tflite" for n in ("conv_odd_valid_int8", "conv_per_tensor_int8",
                                                     "conv_relu_int8", "conv_relu6_int8")]


@pytest.mark.parametrize("path", WINO_FIXTURES, ids=[p.stem for p in WINO_FIXTURES])
def test_fixture_matches_tflite_micro(path):
    runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    c = compile_model(path, winograd=True)
    assert c.graph.ops[0].kernel == "conv2d_wino_s8"
    x = np.random.default_rng(5).integers(-128, 128, c.graph.tensors[c.graph.inputs[0]].shape).astype(np.int8)
    it = runtime.Interpreter.from_file(str(path))
    it.set_input(x, 0)
    it.invoke()
    np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], it.get_output(0))


def test_scratch_size_matches_c(tmp_path):
    runtime = FIXTURES.parents[2] / "stm32ai" / "runtime" / "src"
    ops = []
    cases = [(1, 5), (3, 5), (16, 40)]  # (in_c, width): 3, 3 and 8 (a full block) tiles
    for ic, wd in cases:
        g = make_layer("CONV_2D", (1, 5, wd, ic), rng.integers(-9, 9, (2, 3, 3, ic)).astype(np.int8), None,
                       w_scales=[0.01, 0.02])
        ops.append(compile_graph(g, winograd=True).graph.ops[0])
    assert [op.kernel for op in ops] == ["conv2d_wino_s8"] * 3
    for k, shape in (((1, 3), (1, 2, 40, 3)), ((3, 1), (1, 9, 2, 5))):  # 16 and 5 tiles (F(2,3))
        g = make_layer("CONV_2D", shape, rng.integers(-9, 9, (2, *k, shape[3])).astype(np.int8), None,
                       w_scales=[0.01, 0.02])
        ops.append(compile_graph(g, winograd=True).graph.ops[0])
    assert [op.kernel for op in ops] == ["conv2d_wino_s8"] * 3 + ["conv2d_wino1d_s8"] * 2
    assert [op.attrs["tiles"] for op in ops[:3]] == [4] * 3  # no core: one quad per block
    # the Cortex-M7's blocks of 8 tiles (two quads)
    m7 = [copy.deepcopy(op) for op in ops[:3]]
    for op, (ic, wd) in zip(m7, cases, strict=True):
        op.attrs["tiles"] = 8
        op.scratch = wino_scratch_size(ic, wd, 8)
    ops += m7
    printed = c_scratch_sizes(ops, "ai_kernels_conv_wino.h", [runtime / "ai_conv_wino_s8.c"], WARN, tmp_path)
    # pad pixel (4-aligned) + the kept pixel (the same; more than one block per band only) +
    # tiles rounded up to quads of 4 * 16 positions * in_cp * 2 bytes;
    # F(2,3): pad pixel + tiles * 4 positions * in_cp * 2 bytes
    want = [4 + 4 * 16 * 2 * 2, 4 + 4 * 16 * 4 * 2, 16 + 16 + 4 * 16 * 16 * 2, 4 + 16 * 4 * 4 * 2, 8 + 5 * 4 * 6 * 2,
            4 + 4 * 16 * 2 * 2, 4 + 4 * 16 * 4 * 2, 16 + 16 + 8 * 16 * 16 * 2]  # 20 tiles: 5 / 3 blocks
    assert printed == [op.scratch for op in ops] == want
    assert [wino_scratch_size(ic, wd, 4) for ic, wd in cases] == want[:3]
    assert [wino1_scratch_size(3, 40), wino1_scratch_size(5, 9)] == want[3:5]


# ---- F(2, 3): 1x3 and 3x1 kernels ------------------------------------------------------------

def test_1d_identity_is_exact_in_integers():
    # A^T (U' . B^T d) == 2 * (the 2-output valid correlation of d with g); U' = 2 G g
    g_f = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    for _ in range(20):
        g = rng.integers(-128, 128, (1, 1, 3, 1)).astype(np.int8)
        d = rng.integers(-255, 256, 4).astype(np.int64)
        u = transform_filters_1d(g)[0, :, 0]
        assert np.array_equal(u, (2 * g_f @ g[0, 0, :, 0].astype(np.float64)).astype(np.int64))
        v = B_T @ d
        assert np.abs(v).max() <= 510
        assert np.array_equal(A_T @ (u * v), 2 * np.array([d[j:j + 3] @ g[0, 0, :, 0] for j in range(2)]))


def test_1d_bound_hand_computed_and_fallback():
    # all -128, 1x3: sum_ic |U'| <= 3 * 128 * in_c at the middle positions, |M| <= 510 * 384 * in_c
    # = 195,840 * in_c; 2 * 255 * 3 * 128 * in_c is the same. < 2^31 up to in_c = 10965
    # (2,147,385,600), not at 10966 (2,147,581,440)
    m, y2 = wino_acc_bounds(np.full((1, 1, 3, 10965), -128, np.int8))
    assert m[0] == y2[0] == 2_147_385_600
    assert not wino_proved(np.full((1, 3, 1, 10966), -128, np.int8))
    big = np.full((1, 3, 1, 10966), -128, np.int8)
    g = make_layer("CONV_2D", (1, 3, 1, 10966), big, np.zeros(1, np.int32), w_scales=[1e-6])
    assert compile_graph(g, winograd=True).graph.ops[0].kernel == "conv2d_s8"
    g = make_layer("CONV_2D", (1, 3, 1, 10965), big[..., :10965], np.zeros(1, np.int32), w_scales=[1e-6])
    assert compile_graph(g, winograd=True).graph.ops[0].kernel == "conv2d_wino1d_s8"


LAYERS_1D = [
    ("1x3_same_odd", (1, 4, 9, 5), (1, 3), 3, dict()),
    ("3x1_valid_batch2", (2, 7, 3, 4), (3, 1), 5, dict(padding="VALID", act="RELU")),
    ("1x3_long_blocks", (1, 1, 67, 16), (1, 3), 4, dict()),  # 34 tiles: blocks of 16, 16, 2
    ("3x1_tall_c1", (1, 37, 2, 1), (3, 1), 3, dict(act="RELU6")),
]


@pytest.mark.parametrize("name,x_shape,k,oc,opts", LAYERS_1D, ids=[case[0] for case in LAYERS_1D])
def test_1d_layer_bit_exact_with_tflite_reference(name, x_shape, k, oc, opts):
    ic = x_shape[3]
    for in_zp, wv in ((int(rng.integers(-128, 128)), None), (-128, -128), (127, 127)):
        # random, then the extremes: zero point -128 / 127 with every weight -128 / 127
        w = (rng.integers(-128, 128, (oc, *k, ic)) if wv is None else np.full((oc, *k, ic), wv)).astype(np.int8)
        bias = rng.integers(-50000, 50000, oc).astype(np.int32)
        g = make_layer("CONV_2D", x_shape, w, bias, padding=opts.get("padding", "SAME"), act=opts.get("act", "NONE"),
                       in_q=(0.03, in_zp), w_scales=rng.uniform(0.0005, 0.01, oc).astype(np.float32),
                       out_q=(float(rng.uniform(0.5, 4)), int(rng.integers(-20, 20))))
        c = compile_graph(copy.deepcopy(g), winograd=True)
        assert c.graph.ops[0].kernel == "conv2d_wino1d_s8"
        a = c.graph.ops[0].attrs
        assert c.graph.ops[0].scratch == wino1_scratch_size(ic, a["out_w"] if k == (1, 3) else a["out_h"])
        for v in (None, -128, 127):
            x = rng.integers(-128, 128, x_shape).astype(np.int8) if v is None else np.full(x_shape, v, np.int8)
            np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], reference(g, x))


@pytest.mark.parametrize("k,in_zp", [((1, 3), -128), ((3, 1), 127), ((3, 3), -128)])
def test_hand_built_model_matches_tflite_micro(tmp_path, k, in_zp):
    # a .tflite written field by field (tests/builders.py), extreme input zero point, weights
    # at +-128 / 127 on some channels; TFLM's own kernels are the reference
    runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    from test_dead_channels import ConvBuilder

    mb = ConvBuilder()
    xs, oc = (1, 6, 7, 6), 5
    w = rng.integers(-128, 128, (oc, *k, xs[3])).astype(np.int8)
    w[0], w[1] = -128, 127
    ws = rng.uniform(0.002, 0.01, oc).astype(np.float32)
    x_t = mb.tensor(xs, "int8", 0.04, in_zp)
    w_t = mb.tensor(w.shape, "int8", ws, np.zeros(oc, np.int64), w, axis=0)
    b_t = mb.tensor((oc,), "int32", np.float32(0.04) * ws, np.zeros(oc, np.int64),
                    rng.integers(-20000, 20000, oc).astype(np.int32))
    y_t = mb.tensor((1, 6, 7, oc), "int8", 0.7, -3)
    mb.conv(x_t, w_t, b_t, y_t, "SAME", act="RELU")
    path = tmp_path / "m.tflite"
    path.write_bytes(mb.build())
    c = compile_model(path, winograd=True)
    assert c.graph.ops[0].kernel == ("conv2d_wino_s8" if k == (3, 3) else "conv2d_wino1d_s8")
    it = runtime.Interpreter.from_file(str(path))
    for v in (None, -128, 127):
        x = rng.integers(-128, 128, xs).astype(np.int8) if v is None else np.full(xs, v, np.int8)
        it.set_input(x, 0)
        it.invoke()
        np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], it.get_output(0))


def test_variant_name_and_legality():
    # the tuner's variant name; legality = geometry + padding value + the accumulator proof
    from stm32ai.passes.lower.conv_geometry import conv_geometry

    assert WINO_VARIANT == "wino"

    def legal(k, stride=(1, 1), ic=2, wv=1, pad_value=3) -> bool:
        w = np.full((2, *k, ic), wv, np.int8)
        g = make_layer("CONV_2D", (1, 6, 6, ic), w, None, stride=stride, w_scales=[0.01, 0.01], in_q=(0.05, 3))
        geo = conv_geometry(g.ops[0], g)
        return wino_legal(geo, w.reshape(2, -1), pad_value, 3)

    assert legal((3, 3)) and legal((1, 3)) and legal((3, 1))
    assert not legal((3, 3), stride=(2, 2)) and not legal((5, 5)) and not legal((3, 2))
    assert not legal((3, 3), pad_value=0)  # a fused padding of another value
    assert not legal((3, 3), ic=1828, wv=-128) and legal((3, 3), ic=1827, wv=-128)
    g = make_layer("CONV_2D", (1, 4, 4, 2), np.ones((2, 3, 3, 2), np.int8), None, w_scales=[0.01, 0.01])
    assert compile_graph(copy.deepcopy(g)).graph.ops[0].kernel == "conv2d_s8"  # not asked: direct


def test_weight_passes_from_the_loops():
    # 3x3, out 32x32: 16 tile rows x (two blocks of 8 tiles = 4 quads); 1x3 out 1x67: 34 tiles in
    # blocks of 16, 16, 2 = 8 + 8 + 1 pairs
    a = dict(batches=1, out_h=32, out_w=32, k_h=3, k_w=3)
    assert wino_weight_passes(a) == (16 * 4, 256)
    assert wino_weight_passes(dict(batches=2, out_h=1, out_w=67, k_h=1, k_w=3)) == (2 * 17, 2 * 34)
    assert wino_weight_passes(dict(batches=1, out_h=67, out_w=3, k_h=3, k_w=1)) == (3 * 17, 3 * 34)


# ---- MLPerf Tiny IC (ResNet-8: all its stride-1 convolutions are 3x3) ---------------------------

def _ic():
    return shared_model("mlperf_tiny/pretrainedResnet_quant.tflite")


def test_ic_validates_on_host_with_winograd(capsys, tmp_path):
    from stm32ai.cli import main

    ic = _ic()
    js = tmp_path / "a.json"
    assert main(["analyze", str(ic), "--winograd", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    # the 5 stride-1 layers, their transformed weights: 2,048 + 2 * 8,192 + 32,768 + 131,072 B
    assert "winograd: 5 conv layers (5 F(2x2,3x3)), 182,272 B" in out
    rows = json.loads(js.read_text())["winograd"]
    assert [r["weights_bytes"] for r in rows] == [2_048, 8_192, 8_192, 32_768, 131_072]
    assert [r["int8_bytes"] for r in rows] == [432, 2_304, 2_304, 9_216, 36_864]  # 9 * in_c * out_c
    assert {r["tile"] for r in rows} == {"F(2x2,3x3)"}
    assert main(["validate", str(ic), "--winograd", "-n", "2"]) == 0
    assert "result: match" in capsys.readouterr().out


@pytest.mark.slow
def test_ic_with_winograd_matches_on_the_emulated_board(tmp_path, capsys):
    import shutil

    from stm32ai.cli import main

    if not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm not installed")
    out = tmp_path / "proj"
    assert main(["generate", str(_ic()), "--board", "qemu-netduinoplus2", "--winograd", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["run", str(out)]) == 0
    kv = dict(ln.split(": ", 1) for ln in capsys.readouterr().out.splitlines() if ": " in ln)
    assert kv["result"] == "match" and kv["max_err"] == "0"
    assert "conv2d_wino_s8" in (out / "Model" / "network.c").read_text()


WINO_SELFTEST_C = r"""
#include <stdio.h>
#include "ai_kernels_conv_wino.h"

static uint32_t seed = 2511u;
static uint32_t rnd(void) { seed = seed * 1664525u + 1013904223u; return seed >> 8; }
static int32_t rr(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); }

static int8_t in_buf[2 * 10 * 22 * 40], g_buf[20 * 9 * 40], out_buf[2 * 10 * 22 * 20];
static int16_t u_buf[20 * 16 * 40];
static int32_t rq[4 * 20];
static uint32_t scratch[4096];
static const int g2[4][3] = {{2, 0, 0}, {1, 1, 1}, {1, -1, 1}, {0, 0, 2}};

static uint32_t fnv(const int8_t *p, int32_t n) {
  uint32_t h = 2166136261u;
  for (int32_t i = 0; i < n; ++i) { h ^= (uint8_t)p[i]; h *= 16777619u; }
  return h;
}

int main(void) {
  int ran = 0;
  for (int c = 0; c < 400; ++c) {
    ai_conv2d_wino_s8_params p;
    /* up to 11 tiles a row: several blocks of 4 or 8 tiles (the carried bottom-left pixel) */
    p.batches = rr(1, 2); p.in_h = rr(1, 10); p.in_w = rr(0, 2) ? rr(1, 10) : rr(11, 22);
    p.tiles = rr(0, 1) ? 4 : 8;
    /* mostly the channel counts of the assembly dot (in_cp / 2 >= 2), some 1..2 channels */
    p.in_c = rr(0, 7) == 0 ? rr(1, 2) : rr(3, 40); p.out_c = rr(1, 20);
    p.k_h = p.k_w = 3; p.stride[0] = p.stride[1] = 1; p.dilation[0] = p.dilation[1] = 1;
    p.pad[0] = rr(0, 2); p.pad[1] = rr(0, 2);
    p.out_h = p.in_h + p.pad[0] + rr(0, 2) - 2; p.out_w = p.in_w + p.pad[1] + rr(0, 2) - 2;
    if (p.out_h < 1 || p.out_w < 1 || ai_conv2d_wino_s8_scratch_size(&p) > (int32_t)sizeof scratch) continue;
    p.pad_value = rr(-128, 127); p.out_offset = rr(-128, 127); p.rq_fold = rr(0, 1);
    p.act_min = rr(-128, 0); p.act_max = rr(p.act_min, 127);
    if (rr(0, 1)) { p.act_min = -128; p.act_max = 127; }
    const int32_t icp = (p.in_c + 1) & ~1, ocp = (p.out_c + 1) & ~1;
    for (int32_t i = 0; i < p.batches * p.in_h * p.in_w * p.in_c; ++i) in_buf[i] = (int8_t)rr(-128, 127);
    for (int32_t i = 0; i < p.out_c * 9 * p.in_c; ++i) g_buf[i] = (int8_t)rr(-128, 127);
    /* U' = G' g G'^T in the kernel's layout [ocp / 2][16][icp / 2][2 oc][2 ic], zero-padded */
    for (int32_t o = 0; o < ocp; ++o) {
      for (int pos = 0; pos < 16; ++pos) {
        for (int32_t ic = 0; ic < icp; ++ic) {
          int32_t s = 0;
          for (int a = 0; a < 3 && o < p.out_c && ic < p.in_c; ++a)
            for (int b = 0; b < 3; ++b)
              s += g2[pos / 4][a] * g_buf[((o * 3 + a) * 3 + b) * p.in_c + ic] * g2[pos % 4][b];
          /* in_c % 4 == 0: the pairs (0, 2), (1, 3) of each group of 4 (pack_wino_weights) */
          const int32_t k = p.in_c % 4 ? ic : (ic & ~3) | ((ic & 1) << 1) | ((ic >> 1) & 1);
          u_buf[(((o / 2) * 16 + pos) * (icp / 2) + k / 2) * 4 + (o % 2) * 2 + k % 2] = (int16_t)s;
        }
      }
    }
    for (int32_t i = 0; i < p.out_c; ++i) {
      const int32_t rs = rr(1, 14);
      rq[4 * i] = rr(-100000, 100000); rq[4 * i + 1] = (int32_t)(0x40000000u + (rnd() % 0x40000000u));
      rq[4 * i + 2] = p.rq_fold ? rs : rr(-14, 2);
      rq[4 * i + 3] = p.rq_fold ? (1 << (rs - 1)) + p.out_offset * (1 << rs) : 0;
    }
    ai_conv2d_wino_s8(&p, in_buf, u_buf, rq, out_buf, scratch);
    printf("wino %d %08lx\n", c, (unsigned long)fnv(out_buf, p.batches * p.out_h * p.out_w * p.out_c));
    ++ran;
  }
  printf("cases %d\n", ran);
  return 0;
}
"""


@pytest.mark.slow
def test_dsp_path_on_cortex_m4_matches_host_path(tmp_path):
    """Random 3x3 layers (real transformed filters, 1..40 input channels, odd counts, borders,
    both requantisation forms) through the Cortex-M4 build (the assembly dot, AI_WINO_ASM) on
    an emulated Cortex-M4 and through the portable C on the host (itself checked against
    TFLite's reference above): identical outputs."""
    import shutil
    import subprocess

    from conftest import M4, MPS2_LD, RUNTIME, STARTUP_C

    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "cc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    (tmp_path / "selftest.c").write_text(WINO_SELFTEST_C)
    (tmp_path / "startup.c").write_text(STARTUP_C)
    (tmp_path / "mps2.ld").write_text(MPS2_LD)
    inc = f"-I{RUNTIME / 'include'}"
    src = [str(RUNTIME / "src" / "ai_conv_wino_s8.c")]
    r = subprocess.run(["arm-none-eabi-gcc", *WARN, *M4, inc, "--specs=rdimon.specs", "-T", "mps2.ld",
                        "selftest.c", "startup.c", *src, "-o", "fw.elf"], cwd=tmp_path, capture_output=True,
                       text=True)
    if r.returncode != 0 and "rdimon" in r.stderr:
        pytest.skip("newlib's rdimon (semihosting) library is not installed")
    assert r.returncode == 0, r.stderr
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(tmp_path / "fw.elf")], capture_output=True,
                         text=True).stdout
    assert "smuad" in dis  # the assembly dot is the one compiled
    subprocess.run(["cc", *WARN, inc, "selftest.c", *src, "-o", "host"], cwd=tmp_path, check=True)
    host = subprocess.run([str(tmp_path / "host")], capture_output=True, text=True, check=True).stdout
    arm = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-monitor", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", "fw.elf"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    assert int(host.split()[-1]) > 250
    assert arm.replace("\r", "") == host


def test_default_rule_per_core_and_optimization():
    from stm32ai.passes.lower.conv_wino import WINO_MIN_IN_C, wino_default, wino_extra_bytes

    def geo(in_c: int, k: tuple[int, int] = (3, 3), stride: int = 1):
        g = make_layer("CONV_2D", (1, 8, 8, in_c), np.ones((4, *k, in_c), np.int8), np.zeros(4, np.int32),
                       stride=(stride, stride))
        from stm32ai.passes.lower.conv import _start_lowering

        return _start_lowering(g.ops[0], g, geo_taps=lambda gg: gg.k_h * gg.k_w * gg.in_c)[0]

    assert WINO_MIN_IN_C == {"cortex-m4": 16, "cortex-m7": 32}
    assert wino_default(geo(16), "cortex-m4", "balanced") and wino_default(geo(16), "cortex-m4", "time")
    assert not wino_default(geo(8), "cortex-m4", "balanced")
    assert not wino_default(geo(16), "cortex-m4", "ram")  # int8 weights, stripes' row windows
    assert not wino_default(geo(16), "cortex-m7", "balanced") and wino_default(geo(32), "cortex-m7", "balanced")
    for core in ("cortex-m33", "cortex-m0plus", None):  # not measured: direct
        assert not wino_default(geo(64), core, "balanced")
    assert not wino_default(geo(16, (1, 3)), "cortex-m4", "balanced")  # F(2,3): never measured faster
    assert not wino_default(geo(16, stride=2), "cortex-m4", "balanced")
    # 4 output channels x 16 positions x 16 input channels x 2 B - 4 x 9 x 16 int8
    assert wino_extra_bytes(geo(16)) == 4 * 16 * 16 * 2 - 4 * 9 * 16


def _wino_nodes(c) -> list[int]:
    return [op.index for op in c.graph.ops if op.kernel == "conv2d_wino_s8"]


def test_default_choice_on_ic_follows_the_core_and_the_overrides():
    from stm32ai.passes.lower.conv import _weights_bytes

    ic = _ic()
    m4 = compile_model(ic, core="cortex-m4")
    # the four 3x3 stride-1 layers with 16..64 input channels; the 3-channel first one stays off
    # Winograd (direct: on the M4 the small-channel window kernel, docs/kernels_conv_smallk.md)
    assert len(_wino_nodes(m4)) == 4
    assert next(op for op in m4.graph.ops if op.type == "CONV_2D").kernel in ("conv2d_s8", "conv2d_smallk_win_s8")
    assert len(_wino_nodes(compile_model(ic, core="cortex-m7"))) == 2  # the 32- and 64-channel layers
    assert _wino_nodes(compile_model(ic, core="cortex-m4", winograd=False)) == []
    assert len(_wino_nodes(compile_model(ic, core="cortex-m7", winograd=True))) == 5
    assert _wino_nodes(compile_model(ic, core="cortex-m33")) == []
    assert _wino_nodes(compile_model(ic, core="cortex-m4", optimization="ram")) == []
    assert _wino_nodes(compile_model(ic, core="cortex-m4", input_rows=True)) == []  # stripes: direct
    # balanced keeps the model's weights within the flash budget: a small one keeps layers direct
    small = compile_model(ic, core="cortex-m4", weights_budget=120_000)
    assert 0 < len(_wino_nodes(small)) < 4
    assert _weights_bytes(small.graph) <= 120_000 < _weights_bytes(m4.graph)
    assert len(_wino_nodes(compile_model(ic, core="cortex-m4", weights_budget=120_000, optimization="time"))) == 4


def test_board_default_keeps_the_flash_read_bar():
    """nucleo-l4r5zi: the weights go to SRAM3 at boot, the 4 Winograd layers stay. nucleo-f401re
    (96 KB RAM: the weights stay in its 2-wait-state flash): the transformed weights, re-read
    once per quad of tiles, would break issue 26's bar (<= 1.5x the weights read per inference),
    so the default falls back to direct there; --winograd still forces it."""
    from stm32ai.passes.staging import flash_reads
    from stm32ai.pipeline import FLASH_READS_BAR, compile_for_board

    ic = _ic()
    l4 = compile_for_board(ic, "network", "nucleo-l4r5zi")
    assert l4.weights_pool and len(_wino_nodes(l4)) == 4
    f4 = compile_for_board(ic, "network", "nucleo-f401re")
    assert not f4.weights_pool and _wino_nodes(f4) == []
    assert "Winograd off (default rule)" in (f4.weights_choice or "")
    w = next(p["size"] for p in f4.doc["stm32ai"]["pools"] if p["name"] == "weights")
    assert sum(flash_reads(op, f4.graph) for op in f4.graph.ops) <= FLASH_READS_BAR * w
    assert len(_wino_nodes(compile_for_board(ic, "network", "nucleo-f401re", winograd=True))) == 5


def test_block_size_per_core_and_code_flash():
    """One quad a block (the smallest scratch) where code runs without flash wait states; two on
    the Cortex-M7 and where code comes from a wait-stated flash (I-cache refills per block)."""
    from stm32ai.passes.lower.conv_wino import wino_tiles

    assert wino_tiles(None) == wino_tiles("cortex-m4") == 4
    assert wino_tiles("cortex-m4", True) == wino_tiles("cortex-m7") == wino_tiles("cortex-m7", True) == 8
    g = make_layer("CONV_2D", (1, 4, 20, 16), rng.integers(-9, 9, (4, 3, 3, 16)).astype(np.int8), None,
                   w_scales=[0.01] * 4)
    for kw, tiles in ((dict(core="cortex-m4"), 4), (dict(core="cortex-m4", code_wait_states=True), 8),
                      (dict(core="cortex-m7"), 8)):
        op = compile_graph(copy.deepcopy(g), **kw).graph.ops[0]  # the default rule: 16 channels on the M4
        assert op.kernel == ("conv2d_wino_s8" if kw["core"] == "cortex-m4" else "conv2d_s8")
        if op.kernel == "conv2d_wino_s8":
            assert op.attrs["tiles"] == tiles and op.scratch == wino_scratch_size(16, 20, tiles)


def test_ic_block_size_and_pool_per_board():
    """compile_for_board passes the board's code flash: IC's Winograd layers take blocks of 4
    on the emulated board (no flash timing) and 8 on nucleo-l4r5zi (5 wait states, ART), even
    though its weights are copied to SRAM3 there; both pools far below the 53,264 B of the
    Winograd layers without overlap."""
    from stm32ai.pipeline import compile_for_board

    for board, tiles, pool in (("qemu-netduinoplus2", 4, 35_456), ("nucleo-l4r5zi", 8, 37_504)):
        c = compile_for_board(_ic(), "network", board)
        wino = [op for op in c.graph.ops if op.kernel == "conv2d_wino_s8"]
        assert len(wino) == 4 and {op.attrs["tiles"] for op in wino} == {tiles}
        assert c.plan.pool_size <= pool
