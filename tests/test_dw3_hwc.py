"""ai_depthwise_conv2d_3x3_hwc_s8 / _hwc_sgn_s8 (ai_conv_dw3_hwc_s8.c): the 3x3 depthwise layer on
the HWC layout channel by channel, with the planar kernel's params and packed constants (a stripe
member's variant, passes/stripes.py `_narrow_scratch`). Each case lowers a layer with
--optimization ram (the planar kernel), swaps the emitted call to the HWC variant and compares
with TFLite's reference arithmetic (test_lower_conv.reference, a loop-for-loop transcription):
odd widths, strides 1 and 2, SAME / VALID pads, channel counts not a multiple of 4, depth
multipliers, batches, and one-output-row layers (the stripe's one-row calls)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_lower_conv import _w, _x, make_layer, reference

from stm32ai.passes.lower.overlap import ACCESS_MODELS, overlap_ok
from stm32ai.pipeline import compile_graph
from stm32ai.validate.host import run_compiled

rng = np.random.default_rng(20261127)

# (name, x shape, filter shape, options)
CASES = [
    ("s1_same_c6_odd_w", (1, 5, 7, 6), (1, 3, 3, 6), {}),
    ("s1_same_one_row_w5_c64", (1, 1, 5, 64), (1, 3, 3, 64), {}),
    ("s1_same_two_rows_w5_c7", (1, 2, 5, 7), (1, 3, 3, 7), {}),
    ("s1_valid_one_row_w9_c5", (1, 3, 9, 5), (1, 3, 3, 5), dict(padding="VALID")),
    ("s1_same_w1_c3", (1, 1, 1, 3), (1, 3, 3, 3), {}),
    ("s1_same_w2_c4", (1, 4, 2, 4), (1, 3, 3, 4), {}),
    ("s1_same_w3_c2", (1, 3, 3, 2), (1, 3, 3, 2), {}),
    ("s1_valid_c13_batch3", (3, 8, 9, 13), (1, 3, 3, 13), dict(padding="VALID")),
    ("s1_same_wide_c8", (1, 6, 16, 8), (1, 3, 3, 8), {}),
    ("s2_same_odd_9x7_c5", (1, 9, 7, 5), (1, 3, 3, 5), dict(stride=(2, 2))),
    ("s2_same_even_10x10_c9", (1, 10, 10, 9), (1, 3, 3, 9), dict(stride=(2, 2))),
    ("s2_same_one_row_w11_c3", (1, 2, 11, 3), (1, 3, 3, 3), dict(stride=(2, 2))),
    ("s2_valid_10x11_c12_batch2", (2, 10, 11, 12), (1, 3, 3, 12), dict(stride=(2, 2), padding="VALID")),
    ("s2_same_2x3_c4", (1, 2, 3, 4), (1, 3, 3, 4), dict(stride=(2, 2))),
    ("s2_same_w4_c1_mult1", (1, 4, 4, 2), (1, 3, 3, 2), dict(stride=(2, 2))),
    ("s2_multiplier2_c3", (1, 9, 8, 3), (1, 3, 3, 6), dict(stride=(2, 2))),
    ("s1_multiplier3_c5", (2, 5, 6, 5), (1, 3, 3, 15), {}),
]


def _hwc(kernel: str) -> str:
    assert kernel in ("depthwise_conv2d_3x3_s8", "depthwise_conv2d_3x3_sgn_s8"), kernel
    return kernel.replace("3x3_", "3x3_hwc_")


def _swap(c) -> str:
    node = next(n["attrs"] for n in c.doc["nodes"] if n["op"] != "null")  # what the emitter reads
    node["func_name"] = _hwc(node["func_name"])
    node.pop("scratch_storage_id", None)  # no scratch argument
    return node["func_name"]


@pytest.mark.parametrize("sgn", [False, True])
@pytest.mark.parametrize("name,xs,ws,opts", CASES, ids=[c[0] for c in CASES])
def test_hwc_matches_tflite_reference(name, xs, ws, opts, sgn):
    oc = ws[3]
    g = make_layer("DEPTHWISE_CONV_2D", xs, _w(ws, "int8"), rng.integers(-5000, 5000, oc),
                   w_scales=rng.uniform(0.002, 0.02, oc), in_q=(0.05, int(rng.integers(-20, 20))),
                   out_q=(0.08, int(rng.integers(-30, 30))), **opts)
    x = _x(xs, "int8")
    c = compile_graph(copy.deepcopy(g), optimization="ram", inputs_in_pool=False)
    op = c.graph.ops[0]
    assert op.kernel.startswith("depthwise_conv2d_3x3_") and not op.attrs["transpose"]
    if sgn:  # the exact-sign requantisation on the same constants (valid for every e >= 1)
        node = next(n["attrs"] for n in c.doc["nodes"] if n["op"] != "null")
        node["func_name"] = "depthwise_conv2d_3x3_sgn_s8"
    assert _swap(c).startswith("depthwise_conv2d_3x3_hwc_")
    np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], reference(g, x))


def test_hwc_extreme_inputs_and_weights():
    """Saturated inputs and weights (-128 / 127, -127 / 127): the int16 pairs and SMLAD sums."""
    for fill in (-128, 127):
        ws = (1, 3, 3, 6)
        w = np.where(rng.integers(0, 2, ws) == 1, 127, -127).astype(np.int8)
        g = make_layer("DEPTHWISE_CONV_2D", (1, 3, 5, 6), w, rng.integers(-5000, 5000, 6),
                       w_scales=rng.uniform(0.0005, 0.002, 6), in_q=(0.05, 0), out_q=(0.5, 3))
        x = np.full((1, 3, 5, 6), fill, np.int8)
        c = compile_graph(copy.deepcopy(g), optimization="ram", inputs_in_pool=False)
        _swap(c)
        np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], reference(g, x))


def test_hwc_access_model_matches_its_order():
    """The access model (passes/lower/overlap.py): per channel, output pixel pairs in order, a
    pair's new columns loaded before its outputs are stored: a one-row call may write its output
    row over the middle row of its window (each byte is read by the step that writes it or
    earlier), not one pixel to the left of it (pair 0's output lands on column 4 of the top
    row, which pair 1 loads)."""
    model = ACCESS_MODELS["depthwise_conv2d_3x3_hwc_s8"]
    a = {"batches": 1, "in_h": 3, "in_w": 5, "in_c": 4, "out_h": 1, "out_w": 5, "out_c": 4,
         "stride": [1, 1], "pad": [0, 1], "k_h": 3, "k_w": 3, "dilation": [1, 1]}
    steps = model(a, 3 * 5 * 4, 5 * 4)
    write, last = steps
    assert write.max() == 4 * 3 - 1 and (write >= 0).all()  # 4 channels x 3 pairs
    assert overlap_ok(steps, -5 * 4)  # the output row just before the window
    assert overlap_ok(steps, 5 * 4)  # over the middle row: each byte read before (or as) written
    assert not overlap_ok(steps, 4 * 4)  # one pixel left: pair 0 writes where pair 1 still reads


# Layers run on the emulated Cortex-M4 (the assembly rows, AI_DWH_ASM, where they apply; gcc's
# loop elsewhere): (x shape, channels out, stride, padding)
M4_CASES = [
    ((1, 3, 5, 64), 64, 1, "SAME"),      # KWS's rows: odd width (2 pairs + 1), top / bottom rows padded
    ((1, 4, 6, 7), 7, 1, "SAME"),        # even width: the last pair's B = {x[W-1], pad}
    ((1, 1, 2, 4), 4, 1, "SAME"),        # one row, both window rows outside, 1 pair
    ((1, 2, 3, 3), 3, 1, "SAME"),        # 1 pair + 1
    ((2, 5, 9, 5), 5, 1, "SAME"),        # batches
    ((1, 1, 8, 9), 9, 1, "SAME"),        # one row of 8
    ((1, 4, 5, 7), 7, 1, "SAME"),        # rows of 5 (dwh_row5_asm for the inner rows), odd C
    ((1, 3, 5, 64), 64, 1, "SAME"),      # KWS's rows: 5 x 64
    ((2, 3, 5, 3), 3, 1, "SAME"),        # rows of 5, batches
    ((1, 5, 16, 6), 6, 1, "SAME"),       # a wide row
    ((1, 5, 7, 5), 5, 1, "VALID"),       # pad_l 0: gcc's loop
    # stride 2 (SAME: pad_l = W & 1): n pairs in the loop, then 1 output or a pair (W + pad_l
    # = 4n + 2 or 4n + 4), top row padded (odd H) or bottom row (even H)
    ((1, 9, 10, 6), 6, 2, "SAME"),       # n 2 + 1
    ((1, 8, 12, 5), 5, 2, "SAME"),       # n 2 + pair, bottom row outside
    ((1, 4, 48, 4), 4, 2, "SAME"),       # VWW's widths: 48, 24, 6
    ((1, 3, 24, 3), 3, 2, "SAME"),
    ((1, 6, 6, 17), 17, 2, "SAME"),
    ((1, 2, 2, 4), 4, 2, "SAME"),        # n 0 + 1
    ((1, 3, 4, 5), 5, 2, "SAME"),        # n 0 + pair
    ((1, 5, 3, 6), 6, 2, "SAME"),        # odd widths (pad_l 1): 3 = n 0 + pair, 5, 7, 9, 11
    ((1, 4, 5, 3), 3, 2, "SAME"),
    ((1, 3, 7, 4), 4, 2, "SAME"),
    ((1, 2, 9, 2), 2, 2, "SAME"),
    ((1, 9, 11, 5), 5, 2, "SAME"),
    ((1, 7, 10, 4), 4, 2, "VALID"),      # VALID: gcc's loop
    ((1, 6, 8, 3), 6, 1, "SAME"),        # depth multiplier 2
]


@pytest.mark.slow
def test_cortex_m4_matches_tflite_reference(tmp_path):
    """Every M4_CASES layer, both requantisation forms, built for the Cortex-M4 (-O2: the
    assembly rows) and run on an emulated Cortex-M4 (QEMU mps2-an386): outputs equal TFLite's
    reference arithmetic (test_lower_conv.reference). Inputs at an odd address, saturated
    weights in one case."""
    import shutil

    from conftest import run_m4_selftest

    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    src, calls, want = "", "", []
    i = 0
    for xs, oc, s, padding in M4_CASES:
        for sgn in (False, True):
            w = _w((1, 3, 3, oc), "int8")
            if i == 2:
                w = np.where(rng.integers(0, 2, w.shape) == 1, 127, -127).astype(np.int8)
            g = make_layer("DEPTHWISE_CONV_2D", xs, w, rng.integers(-5000, 5000, oc),
                           w_scales=rng.uniform(0.002, 0.02, oc), in_q=(0.05, int(rng.integers(-20, 20))),
                           out_q=(0.08, int(rng.integers(-30, 30))), stride=(s, s), padding=padding)
            c = compile_graph(copy.deepcopy(g), optimization="ram", inputs_in_pool=False, core="cortex-m4")
            op, t = c.graph.ops[0], c.graph.tensors
            assert op.kernel.startswith("depthwise_conv2d_3x3_") and not op.attrs["transpose"]
            x = _x(xs, "int8")
            want.append(reference(g, x).reshape(-1))
            src += f"static int8_t x{i}_buf[{x.size + 1}] = {{0, " + ", ".join(str(int(v)) for v in x.reshape(-1))
            src += "};\n"
            src += f"static const int32_t q{i}[] = {{" + ", ".join(str(int(v)) for v in t[op.inputs[1]].data) + "};\n"
            src += f"static int8_t y{i}[{want[-1].size}];\n"
            fields = ", ".join(f".{k} = {{{v[0]}, {v[1]}}}" if isinstance(v, list | tuple) else f".{k} = {v}"
                               for k, v in op.attrs.items())
            fn = "ai_depthwise_conv2d_3x3_hwc_sgn_s8" if sgn else "ai_depthwise_conv2d_3x3_hwc_s8"
            calls += (f"  {{ const ai_depthwise_conv2d_3x3_s8_params p = {{{fields}}};\n"
                      f"    {fn}(&p, x{i}_buf + 1, q{i}, y{i});\n"
                      f"    printf(\"case{i}\"); for (unsigned j = 0; j < sizeof y{i}; ++j) printf(\" %d\", y{i}[j]);"
                      f" printf(\"\\n\"); }}\n")
            i += 1
            if xs[0] == 1 and xs[1] == 3 and xs[2] == 5 and s == 1 and padding == "SAME":
                # a stripe's in-place row: output row 1 (window rows 0-2, pad top 0) written over
                # input row 1 (dwh_row5_asm stores each channel's outputs after its last read)
                want.append(want[-1].reshape(xs[1], xs[2], oc)[1].reshape(-1))
                row = xs[2] * xs[3]
                calls += (f"  {{ ai_depthwise_conv2d_3x3_s8_params p = {{{fields}}};\n"
                          f"    p.in_h = 3; p.out_h = 1; p.pad[0] = 0;\n"
                          f"    static int8_t z[{x.size + 1}]; memcpy(z, x{i - 1}_buf, sizeof z);\n"
                          f"    {fn}(&p, z + 1, q{i - 1}, z + 1 + {row});\n"
                          f"    printf(\"case{i}\");"
                          f" for (unsigned j = 0; j < {row}; ++j) printf(\" %d\", z[1 + {row} + j]);"
                          f" printf(\"\\n\"); }}\n")
                i += 1
    dis, lines = run_m4_selftest(tmp_path, '#include <stdio.h>\n#include <string.h>\n'
                                 '#include "ai_kernels_conv.h"\n' + src
                                 + "int main(void) {\n" + calls + "  return 0;\n}\n", ["ai_conv_dw3_hwc_s8.c"])
    assert "pkhbt" in dis and "smlal" in dis  # the assembly rows are built
    assert len(lines) == i
    for n, ln in enumerate(lines):
        assert ln[0] == f"case{n}"
        np.testing.assert_array_equal(np.array([int(v) for v in ln[1:]]), want[n], err_msg=f"case {n}")
