"""conv2d_smallk_s8: int8 1x1 CONV_2D with 4 or 8 input channels, channel-stationary
(stm32ai/passes/lower/conv_smallk.py, runtime/src/ai_conv_smallk_s8.c; docs/kernels_conv_smallk.md).

Reference: TFLite's reference convolution transcribed loop for loop (test_lower_conv.reference),
over random layers (strides, batches, zero points, fused activations, every requantisation mode);
the Cortex-M4 assembly loop on QEMU against the same reference (slow)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

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


def _check_host_kernel(g, x_shape: tuple[int, ...], kernel: str, mode: int) -> None:
    """The layer lowers to `kernel` with requantisation mode `mode` on the M4 and its host C output
    equals the TFLite reference arithmetic on random and extreme inputs."""
    c = compile_graph(copy.deepcopy(g), core="cortex-m4")
    op = c.graph.ops[0]
    assert op.kernel == kernel
    assert op.attrs["rq_fold"] == mode
    xs = [rng.integers(-128, 128, x_shape).astype(np.int8) for _ in range(2)]
    xs += [np.full(x_shape, v, np.int8) for v in (-128, 127)]
    for x, out in zip(xs, run_compiled(c, [[x] for x in xs]), strict=True):
        np.testing.assert_array_equal(out[0], reference(g, x))


@pytest.mark.parametrize("name,x_shape,oc,stride,act,out_zp,bias_mag,mode", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_bit_exact_with_tflite_reference(name, x_shape, oc, stride, act, out_zp, bias_mag, mode):
    _check_host_kernel(_layer(x_shape, oc, stride, act, out_zp, bias_mag), x_shape, "conv2d_smallk_s8", mode)


def test_rule_and_fallbacks():
    g = _layer((1, 4, 4, 8), 6, (1, 1), "NONE", -128, 5000)
    # other cores, --optimization ram: conv2d_s8
    assert compile_graph(copy.deepcopy(g), core="cortex-m7").graph.ops[0].kernel == "conv2d_s8"
    assert compile_graph(copy.deepcopy(g)).graph.ops[0].kernel == "conv2d_s8"
    assert compile_graph(copy.deepcopy(g), core="cortex-m4", optimization="ram").graph.ops[0].kernel == "conv2d_s8"
    # other geometries: 3x3x8 (72 taps), 1x1x16; few-tap gathered windows take the window kernel
    for shape, k, kernel in (((1, 4, 4, 8), 3, "conv2d_s8"), ((1, 4, 4, 16), 1, "conv2d_s8"),
                             ((1, 4, 4, 3), 1, "conv2d_smallk_win_s8"), ((1, 6, 6, 3), 3, "conv2d_smallk_win_s8"),
                             ((1, 6, 6, 4), 3, "conv2d_s8"), ((1, 6, 6, 5), 3, "conv2d_s8")):
        w = rng.integers(-128, 128, (4, k, k, shape[3])).astype(np.int8)
        h = make_layer("CONV_2D", shape, w, np.zeros(4, np.int32), w_scales=[0.01] * 4)
        assert compile_graph(copy.deepcopy(h), core="cortex-m4").graph.ops[0].kernel == kernel, (shape, k)
        assert compile_graph(h, core="cortex-m7").graph.ops[0].kernel == "conv2d_s8"
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


def test_scratch_size_matches_c(tmp_path):
    from conftest import WARN, c_scratch_sizes

    from stm32ai.passes.lower.conv_smallk import SMALLK_CHAN_BYTES

    runtime = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime" / "src"
    ops = [compile_graph(_layer((1, 4, 4, 8), 16, (1, 1), "NONE", -128, 9000), core="cortex-m4").graph.ops[0],
           compile_graph(_layer((1, 4, 4, 4), 3, (1, 1), "NONE", 3, 9000), core="cortex-m4").graph.ops[0]]
    ops += [compile_graph(_win_layer((1, 9, 9, 3), (3, 3), 8, (2, 2), "SAME", "NONE", -128),
                          core="cortex-m4").graph.ops[0],
            compile_graph(_win_layer((1, 6, 6, 1), (3, 3), 5, (1, 1), "SAME", "NONE", 2),
                          core="cortex-m4").graph.ops[0]]
    assert [op.kernel for op in ops] == ["conv2d_smallk_s8"] * 2 + ["conv2d_smallk_win_s8"] * 2
    printed = c_scratch_sizes(ops, "ai_kernels_conv_smallk.h", [runtime / "ai_conv_smallk_s8.c"], WARN, tmp_path)
    # hand-computed: 32 B per channel; staged weights (kw words x out_c x 4) + rq (16 x out_c) + two
    # windows (8 x kw); 3x3x3: kw 14 (VWW's layer 0: 688 B), 3x3x1: kw 5
    want = [SMALLK_CHAN_BYTES * 16, SMALLK_CHAN_BYTES * 3, 4 * 14 * 8 + 16 * 8 + 8 * 14, 4 * 5 * 5 + 16 * 5 + 8 * 5]
    assert want[2] == 688
    assert printed == [op.scratch for op in ops] == want


def _c_array(name: str, ctype: str, data: np.ndarray) -> str:
    vals = ", ".join(str(int(v)) for v in np.asarray(data).reshape(-1))
    return f"static const {ctype} {name}[] __attribute__((aligned(4))) = {{{vals}}};\n"


# conv2d_smallk_win_s8: (name, x shape, kernel, out_c, stride, padding, act, out zero point, mode)
WIN_LAYERS = [
    ("vww_like_3x3x3_s2", (1, 9, 10, 3), (3, 3), 8, (2, 2), "SAME", "NONE", -128, 3),
    ("3x3x3_s1_oc6_relu", (1, 5, 6, 3), (3, 3), 6, (1, 1), "SAME", "RELU", 4, 2),
    ("3x3x1_oc5_valid", (2, 6, 5, 1), (3, 3), 5, (1, 1), "VALID", "NONE", 9, 2),
    ("5x3x2_oc9_s21", (1, 8, 7, 2), (5, 3), 9, (2, 1), "SAME", "RELU6", -128, 3),
    ("2x2x3_oc4_s2_odd", (1, 5, 7, 3), (2, 2), 4, (2, 2), "SAME", "NONE", -7, 2),
    ("1x7x1_oc3", (1, 3, 9, 1), (1, 7), 3, (1, 1), "SAME", "NONE", 0, 2),
    ("3x3x3_tiny_image", (1, 2, 2, 3), (3, 3), 4, (1, 1), "SAME", "NONE", -128, 3),
    ("3x3x3_one_row", (1, 1, 5, 3), (3, 3), 8, (1, 1), "SAME", "NONE", 1, 2),
]


def _win_layer(x_shape, k, oc, stride, padding, act, out_zp):
    w = rng.integers(-128, 128, (oc, *k, x_shape[3])).astype(np.int8)
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    scales = rng.uniform(0.002, 0.05, oc).astype(np.float32)
    in_q = (float(rng.uniform(0.01, 0.1)), int(rng.integers(-128, 128)))
    return make_layer("CONV_2D", x_shape, w, bias, padding=padding, stride=stride, act=act, in_q=in_q,
                      w_scales=scales, out_q=(float(rng.uniform(0.05, 0.5)), out_zp))


@pytest.mark.parametrize("name,x_shape,k,oc,stride,padding,act,out_zp,mode", WIN_LAYERS,
                         ids=[c[0] for c in WIN_LAYERS])
def test_win_layer_bit_exact_with_tflite_reference(name, x_shape, k, oc, stride, padding, act, out_zp, mode):
    _check_host_kernel(_win_layer(x_shape, k, oc, stride, padding, act, out_zp), x_shape, "conv2d_smallk_win_s8",
                       mode)


def test_win_order_hand_computed():
    from stm32ai.passes.lower.conv_geometry import ConvGeometry
    from stm32ai.passes.lower.conv_smallk import pack_win_weights, win_order, win_words

    geo = ConvGeometry(batches=1, in_h=4, in_w=4, in_c=3, out_h=2, out_w=2, out_c=1, k_h=3, k_w=3,
                       stride=(2, 2), dilation=(1, 1), pad=(0, 0))
    # rows of 9 taps: per row {0,2},{1,3},{4,6},{5,7}; the leftovers 8, 17, 26 paired, then a zero lane
    assert win_words(geo) == 14
    want = []
    for r in range(3):
        b = 9 * r
        want += [b, b + 2, b + 1, b + 3, b + 4, b + 6, b + 5, b + 7]
    assert win_order(geo).tolist() == want + [8, 17, 26, -1]
    w = np.arange(27, dtype=np.int8).reshape(1, 27)
    assert pack_win_weights(geo, w).tolist() == [want + [8, 17, 26, 0]]


@pytest.mark.slow
def test_cortex_m4_assembly_matches_tflite_reference(tmp_path):
    """Random layers (every case of LAYERS and WIN_LAYERS plus odd pixel counts, unaligned input) lowered
    by the pipeline, the kernel built for the Cortex-M4 (the assembly pixel loop, AI_SMK_ASM) and
    run on an emulated Cortex-M4: outputs equal TFLite's reference arithmetic."""
    import shutil

    from conftest import run_m4_selftest

    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    cases = [_layer(*c[1:7]) for c in LAYERS] + [_layer((1, 3, 5, 8), 13, (1, 1), "NONE", -128, 9000),
                                                _layer((1, 1, 3, 4), 2, (1, 1), "NONE", 5, 9000),
                                                _layer((2, 5, 5, 8), 8, (1, 1), "RELU6", -128, 9000)]
    cases += [_win_layer(*c[1:8]) for c in WIN_LAYERS] + [_win_layer((1, 7, 7, 3), (3, 3), 11, (2, 2), "SAME",
                                                                     "NONE", 3)]
    src, calls, want = "", "", []
    for i, g in enumerate(cases):
        shape = g.tensors[g.inputs[0]].shape
        c = compile_graph(copy.deepcopy(g), core="cortex-m4")
        op, t = c.graph.ops[0], c.graph.tensors
        assert op.kernel in ("conv2d_smallk_s8", "conv2d_smallk_win_s8")
        x = rng.integers(-128, 128, shape).astype(np.int8)
        want.append(reference(g, x).reshape(-1))
        # the input at an odd address: activations need no alignment
        src += f"static int8_t x{i}_buf[{x.size + 1}] __attribute__((aligned(4))) = {{0, "
        src += ", ".join(str(int(v)) for v in x.reshape(-1)) + "};\n"
        src += _c_array(f"w{i}", "int8_t", t[op.inputs[1]].data) + _c_array(f"q{i}", "int32_t", t[op.inputs[2]].data)
        src += f"static int8_t y{i}[{want[-1].size}];\n"
        src += f"static uint32_t s{i}[{op.scratch // 4 + 1}];\n"
        args = f", s{i}"
        fields = ", ".join(f".{k} = {{{v[0]}, {v[1]}}}" if isinstance(v, list | tuple) else f".{k} = {v}"
                           for k, v in op.attrs.items())
        calls += (f"  {{ const ai_conv2d_smallk_s8_params p = {{{fields}}};\n"
                  f"    ai_{op.kernel}(&p, x{i}_buf + 1, w{i}, q{i}, y{i}{args});\n"
                  f"    printf(\"case{i}\"); for (unsigned j = 0; j < sizeof y{i}; ++j) printf(\" %d\", y{i}[j]);"
                  f" printf(\"\\n\"); }}\n")
    dis, lines = run_m4_selftest(tmp_path, '#include <stdio.h>\n#include "ai_kernels_conv_smallk.h"\n' + src
                                 + "int main(void) {\n" + calls + "  return 0;\n}\n", ["ai_conv_smallk_s8.c"])
    # the assembly pixel loops are the ones built: their second store is register-offset (the C loop's
    # are not), and both requantisation forms are there
    assert re.search(r"strb(\.w)?\s+\w+, \[\w+, \w+\]", dis) and "smmlar" in dis and "smlal" in dis
    assert len(lines) == len(cases)
    for i, ln in enumerate(lines):
        assert ln[0] == f"case{i}"
        np.testing.assert_array_equal(np.array([int(v) for v in ln[1:]]), want[i], err_msg=f"case {i}")


@pytest.mark.slow
def test_vww_poisoned_overlaps_match_reference(tmp_path):
    """VWW compiled for the Cortex-M4 with the L4R5's flash (both kernels taken, their outputs
    placed over their inputs where the access models allow), run on the host with every dead
    pool byte poisoned before each kernel call (validate/poison.py): bit-exact with the
    reference, so no output byte lands on input its kernel still reads."""
    from conftest import SHARED_MODELS

    from stm32ai.pipeline import compile_model, flash_model_for
    from stm32ai.validate.poison import PoisonBuild
    from stm32ai.validate.run import validate_model

    path = SHARED_MODELS / "mlperf_tiny" / "vww_96_int8.tflite"
    if not path.exists():
        pytest.skip("shared models not available")
    c = compile_model(path, "m0", flash=flash_model_for("nucleo-l4r5zi"), core="cortex-m4")
    kernels = [op.kernel for op in c.graph.ops]
    assert "conv2d_smallk_s8" in kernels and "conv2d_smallk_win_s8" in kernels
    assert any(op.kernel == "conv2d_smallk_s8" and op.overlap for op in c.graph.ops)
    build = PoisonBuild({"m0": c}, tmp_path)
    res = validate_model(path, n=1, seed=5, compiled=c, runner=lambda cc, samples: build.run(cc, samples, "m0"))
    verdict = [r for r in res.comparisons if r.verdict]
    assert verdict and all(verdict[0].ok)


def test_overlap_model_matches_the_c_access_order(tmp_path):
    """conv2d_smallk_s8 run on the host with its output placed over its input at every offset the
    access model (`smallk_access`, both orders) calls safe, within a few blocks of the input: the
    result equals the separate-buffer run, so no byte is written before its last read."""
    import ctypes
    import subprocess

    from conftest import RUNTIME

    from stm32ai.passes.lower.conv_smallk import smallk_access
    from stm32ai.passes.lower.overlap import overlap_ok

    lib = tmp_path / "smk.so"
    subprocess.run(["cc", "-std=c99", "-O2", "-shared", "-fPIC", f"-I{RUNTIME / 'include'}",
                    str(RUNTIME / "src" / "ai_conv_smallk_s8.c"), "-o", str(lib)], check=True)
    fn = ctypes.CDLL(str(lib)).ai_conv2d_smallk_s8
    for shape, oc, stride in (((1, 20, 20, 8), 16, (1, 1)), ((1, 17, 9, 4), 3, (1, 1)), ((2, 9, 30, 8), 5, (1, 2))):
        g = _layer(shape, oc, stride, "NONE", -128, 9000)
        c = compile_graph(copy.deepcopy(g), core="cortex-m4")
        op, t = c.graph.ops[0], c.graph.tensors
        w = np.ascontiguousarray(t[op.inputs[1]].data, np.int8)
        q = np.ascontiguousarray(t[op.inputs[2]].data, np.int32)
        x = rng.integers(-128, 128, shape).astype(np.int8).reshape(-1)
        n_out = int(np.prod(t[op.outputs[0]].shape))
        want = reference(g, x.reshape(shape)).reshape(-1)
        tested = 0
        for reverse in (0, 1):
            a = {**op.attrs, "reverse": reverse}
            fields = [a["batches"], a["in_h"], a["in_w"], a["in_c"], a["out_h"], a["out_w"], a["out_c"], a["k_h"],
                      a["k_w"], *a["stride"], *a["dilation"], *a["pad"], a["pad_value"], a["out_offset"],
                      a["act_min"], a["act_max"], a["rq_fold"], reverse]
            params = np.array(fields, np.int32)
            steps = smallk_access(a, x.size, n_out)
            scratch = np.zeros(op.scratch // 4 + 1, np.int32)
            for delta in range(-n_out - 64, x.size + 64, 4):
                if not overlap_ok(steps, delta):
                    continue
                lo = min(0, delta)
                buf = np.zeros(max(x.size, delta + n_out) - lo, np.int8)
                buf[-lo:-lo + x.size] = x
                base = buf.ctypes.data
                fn(ctypes.c_void_p(params.ctypes.data), ctypes.c_void_p(base - lo), ctypes.c_void_p(w.ctypes.data),
                   ctypes.c_void_p(q.ctypes.data), ctypes.c_void_p(base - lo + delta),
                   ctypes.c_void_p(scratch.ctypes.data))
                np.testing.assert_array_equal(buf[delta - lo:delta - lo + n_out], want, err_msg=f"{shape} {delta}")
                tested += -n_out < delta < x.size  # the two really overlap
        assert tested > 0
