"""Accumulators at the 2^31 edge (issue 20, docs/verifier.md "Accumulators at 2^31").

A worst-case int8 accumulator bound >= 2^31 is a warning, not a refusal: the kernels wrap
modulo 2^32 like TFLite Micro on Cortex-M. The regression set (tests/fixtures/
make_fixtures_acc.py, converter-made) validates bit-exact against TFLite Micro just below and
just above the edge and for the two detector shapes of the issue; adversarial inputs that
truly overflow run clean under UBSan and match a numpy int32 wrap-around transcription.
"""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from stm32ai.cli import main
from stm32ai.emitter import emit_c
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.ir import Graph, Op
from stm32ai.passes.quant import multiply_by_quantized_multiplier, per_channel_multiplier, quantize_multiplier
from stm32ai.passes.verify import accumulator_bound
from stm32ai.pipeline import Compiled, compile_graph, compile_model
from stm32ai.validate.host import CFLAGS, harness_source, io_specs, run_exe, runtime_objects
from stm32ai.validate.reference import run_tflm
from tests.conftest import FIXTURES
from tests.test_lower_conv import _q, make_layer, reference

SAN = ["-fsanitize=undefined", "-fno-sanitize-recover=all", "-g"]
LIMIT = 1 << 31

# fixture -> layers whose bound is >= 2^31 (each gets one warning line)
EDGE = {
    "acc_conv_below_int8": [],
    "acc_conv_above_int8": ["op #0 (CONV_2D)"],
    "acc_fc_below_int8": [],
    "acc_fc_above_int8": ["op #0 (FULLY_CONNECTED)"],
    "acc_conv_wrap_int8": ["op #0 (CONV_2D)"],
    "acc_yolov5_stem_int8": ["op #0 (CONV_2D)"],
    "acc_fomo_effnet_int8": ["op #1 (DEPTHWISE_CONV_2D)", "op #10 (CONV_2D)"],
}


def _bounds(name: str) -> list[int]:
    g = load_tflite(FIXTURES / f"{name}.tflite")
    out = []
    for op in g.ops:
        if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            w, b = (g.tensors[op.inputs[i]].data for i in (1, 2))
            out.append(accumulator_bound(w, b, 3 if op.type == "DEPTHWISE_CONV_2D" else 0, 256))
    return out


def test_fixtures_sit_at_the_edge():
    """The regression set is where it claims to be: the edge models within 2^16 of 2^31 on
    their side, the detectors with exactly the listed layers just above."""
    for name, layers in EDGE.items():
        bounds = _bounds(name)
        over = [b for b in bounds if b >= LIMIT]
        assert len(over) == len(layers), (name, bounds)
        if name.endswith("below_int8"):
            assert LIMIT - (1 << 16) < max(bounds) < LIMIT, (name, bounds)
        elif name != "acc_conv_wrap_int8":
            assert all(b < LIMIT + (1 << 16) for b in over), (name, over)


@pytest.mark.parametrize("name", sorted(EDGE))
def test_edge_model_validates_bit_exact_against_tflm(name: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]):
    report = tmp_path / "v.json"
    code = main(["validate", str(FIXTURES / f"{name}.tflite"), "--mode", "host", "-n", "3",
                 "--json", str(report)])
    err = capsys.readouterr().err
    assert code == 0, err
    import json

    doc = json.loads(report.read_text())
    assert doc["verdict"] == "tflm" and doc["result"] == "match" and doc["passed"], doc
    tflm = next(r for r in doc["references"] if r["name"] == "tflm")
    assert tflm["outputs"] and all(o["max_lsb"] == 0 for o in tflm["outputs"]), tflm
    warnings = [ln for ln in err.splitlines() if ln.startswith("stm32ai: warning: ")]
    assert len(warnings) == len(EDGE[name]), err
    for ln, where in zip(warnings, EDGE[name], strict=True):
        assert where in ln and ">= 2^31" in ln and "wraps" in ln, ln
        bound = int(ln.split("bounded by ")[1].split()[0].replace(",", ""))
        assert bound >= LIMIT
    assert "error" not in err


def test_generate_warns_and_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "c"
    code = main(["generate", str(FIXTURES / "acc_yolov5_stem_int8.tflite"), "--c-only", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0 and (out / "network.c").exists(), err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("stm32ai: warning: op #0 (CONV_2D)"), err
    assert "2,147,516,159" in lines[0]


# ---- adversarial inputs under UBSan ------------------------------------------------------------

def _run_sanitized(c: Compiled, samples: list[list[np.ndarray]], tmp: Path) -> list[list[np.ndarray]]:
    """The generated C and the runtime built with UBSan (aborting on the first report)."""
    d = tmp / "c"
    emit_c(c.doc, c.params, "network", d)
    (tmp / "host_main.c").write_text(harness_source({"network": "network.h"}))
    cc = os.environ.get("CC", "cc")
    flags = [*CFLAGS, *SAN]
    objs = runtime_objects(d / "runtime", cc, flags, tmp)
    exe = tmp / "model_ubsan"
    subprocess.run([cc, *flags, f"-I{d}", f"-I{d / 'runtime' / 'include'}", str(d / "network.c"),
                    str(d / "network_data.c"), str(tmp / "host_main.c"), *map(str, objs), "-o", str(exe),
                    "-lm"], check=True, capture_output=True)
    return run_exe(exe, [], c, samples, "UBSan build")  # raises on a sanitizer report (exit != 0)


def test_wrap_fixture_overflows_cleanly_and_matches_numpy(tmp_path: Path):
    """acc_conv_wrap_int8 with x = 127 everywhere (x - zp = 255): channel 0's true sum is above
    2^31. UBSan-clean, equal to the int32 wrap-around transcription (and to TFLite Micro)."""
    model = FIXTURES / "acc_conv_wrap_int8.tflite"
    c = compile_model(model)
    ins, _ = io_specs(c)
    g = load_tflite(model)
    op = g.ops[0]
    x_t, w_t, b_t, y_t = (g.tensors[i] for i in (*op.inputs, op.outputs[0]))
    xs = [np.full(ins[0].shape, 127, np.int8), np.full(ins[0].shape, -128, np.int8),
          np.where(np.arange(int(np.prod(ins[0].shape))) % 3 == 0, 127, -128).astype(np.int8).reshape(ins[0].shape)]
    got = _run_sanitized(c, [[x] for x in xs], tmp_path)
    w = w_t.data.reshape(w_t.shape[0], -1).astype(np.int64)
    zp = int(x_t.quant.zero_point[0])
    true_acc = (xs[0].reshape(-1, w.shape[1]).astype(np.int64) - zp) @ w.T + b_t.data.astype(np.int64)
    assert true_acc.max() >= LIMIT  # the case really overflows int32
    in_s, out_s = float(x_t.quant.scale[0]), float(y_t.quant.scale[0])
    pairs = [quantize_multiplier(per_channel_multiplier(in_s, float(s), out_s)) for s in w_t.quant.scale]
    m = np.array([p[0] for p in pairs], np.int64)
    s = np.array([p[1] for p in pairs], np.int64)
    for x, (y,) in zip(xs, got, strict=True):
        acc = (x.reshape(-1, w.shape[1]).astype(np.int64) - zp) @ w.T + b_t.data.astype(np.int64)
        acc = ((acc + LIMIT) % (1 << 32)) - LIMIT  # two's-complement wrap, as on Cortex-M
        want = np.clip(multiply_by_quantized_multiplier(acc, m, s) + int(y_t.quant.zero_point[0]), -128, 127)
        np.testing.assert_array_equal(y.reshape(want.shape), want.astype(np.int8))
        # TFLite Micro's host build wraps the same way here (its overflow is UB in C++, so this
        # is what the reference happens to compute, not a contract)
        np.testing.assert_array_equal(y, run_tflm(model, [x])[0].reshape(y.shape))


def _fc_graph(w: np.ndarray, bias: np.ndarray, in_zp: int, scales: tuple[float, float, float] = (0.02, 0.01, 40.0)
              ) -> Graph:
    g = Graph("fc", [], [], [], [])
    k = w.shape[1]
    xi = g.add_tensor("x", (2, k), "int8", _q(scales[0], in_zp))
    wi = g.add_const("w", w, _q(np.full(w.shape[0], scales[1]), np.zeros(w.shape[0]), 0))
    bi = g.add_const("b", bias.astype(np.int32))
    yi = g.add_tensor("y", (2, w.shape[0]), "int8", _q(scales[2], 3))
    g.ops.append(Op("FULLY_CONNECTED", [xi, wi, bi], [yi],
                    {"fused_activation_function": "NONE", "keep_num_dims": False}, index=0))
    g.inputs, g.outputs = [xi], [yi]
    return g


def _fc_reference(g: Graph, x: np.ndarray) -> np.ndarray:
    op = g.ops[0]
    x_t, w_t, b_t, y_t = (g.tensors[i] for i in (*op.inputs, op.outputs[0]))
    acc = (x.astype(np.int64) - int(x_t.quant.zero_point[0])) @ w_t.data.astype(np.int64).T
    acc = acc + b_t.data.astype(np.int64)
    acc = ((acc + LIMIT) % (1 << 32)) - LIMIT
    pairs = [quantize_multiplier(per_channel_multiplier(float(x_t.quant.scale[0]), float(s),
                                                        float(y_t.quant.scale[0]))) for s in w_t.quant.scale]
    m = np.array([p[0] for p in pairs], np.int64)
    s = np.array([p[1] for p in pairs], np.int64)
    y = multiply_by_quantized_multiplier(acc, m, s) + int(y_t.quant.zero_point[0])
    y = ((y + LIMIT) % (1 << 32)) - LIMIT  # TFLite's `acc += output_offset` is int32 too
    return np.clip(y, -128, 127)


def test_output_offset_wraps_at_multiplier_2_31_minus_1(tmp_path: Path):
    """Scales whose ratio quantises to the multiplier 2^31 - 1 (shift 0) pass an accumulator of
    2^31 - 1 through as 2^31 - 2: adding the output zero point (3) then wraps in int32, as
    TFLite Micro's `acc += output_offset` does on the device (the C kernels used to overflow
    there, undefined behaviour). The scales were found by a search over float32 triples."""
    scales = (1.719909429550171, 0.5814259648323059, 1.0)
    assert quantize_multiplier(per_channel_multiplier(*scales)) == ((1 << 31) - 1, 0)
    w = np.ones((4, 8), np.int8)
    w[1] = -1
    bias = np.array([LIMIT - 1, -LIMIT, LIMIT - 3000, -LIMIT + 3000], np.int64)
    g = _fc_graph(w, bias, 0, scales)
    x = np.zeros((2, 8), np.int8)
    x[1] = 3
    c = compile_graph(copy.deepcopy(g))
    (y,), = _run_sanitized(c, [[x]], tmp_path)
    want = _fc_reference(g, x)
    np.testing.assert_array_equal(y, want)
    assert want[0, 0] == -128  # (2^31 - 2) + 3 wrapped


def _edge_bias(w_rows: np.ndarray, zp: int, rng: np.random.Generator) -> np.ndarray:
    """Biases that put the second-last channel (all +127) and the last (all -127) within 1000
    of +-2^31 once the input zero point is folded in (bias - zp * sum w), so x = 127 everywhere
    (x - zp = 255) takes both far outside int32 in every accumulation order; small random
    biases elsewhere."""
    sums = w_rows.reshape(w_rows.shape[0], -1).astype(np.int64).sum(axis=1)
    bias = rng.integers(-5000, 5000, w_rows.shape[0]).astype(np.int64)
    bias[-2] = LIMIT - 1000 + zp * sums[-2]
    bias[-1] = -LIMIT + 1000 + zp * sums[-1]
    assert bias.min() >= -LIMIT and bias.max() < LIMIT
    return bias


# kind -> (kernel size, input channels, depth multiplier or 0 for CONV_2D, C kernel it lowers to)
LAYERS = {
    "conv3x3": (3, 8, 0, "conv2d_s8"),
    "conv1x1": (1, 8, 0, "conv2d_s8"),
    "dw3x3": (3, 8, 1, "depthwise_conv2d_3x3"),
    "dw3x3_mult2": (3, 4, 2, "depthwise_conv2d_3x3_g2"),
    "dw5x5_c6": (5, 6, 1, "depthwise_conv2d_s8"),  # the last 2 channels: the plain-C tail loop
    "dw5x5_mult2": (5, 3, 2, "depthwise_conv2d_dm_s8"),
}


@pytest.mark.parametrize("kind", [*LAYERS, "fc"])
def test_overflowing_layers_are_sanitizer_clean_and_wrap(kind: str, tmp_path: Path):
    """Hand-built layers whose true accumulators leave int32 (one channel above 2^31, one below
    -2^31, for x = 127 everywhere): every int8 kernel family accumulates with defined
    wrap-around (UBSan aborts on a signed overflow) and equals the numpy int32-wrap
    transcription of TFLite's reference kernel."""
    rng = np.random.default_rng(20)
    zp = -128
    if kind == "fc":
        w = rng.choice(np.int8([-127, 127]), (6, 301))
        w[-2], w[-1] = 127, -127
        g = _fc_graph(w, _edge_bias(w, zp, rng), zp)
        x = np.full((2, 301), 127, np.int8)
        x[1, ::2] = rng.integers(-128, 128, 151)
        c = compile_graph(copy.deepcopy(g))
        (y,), = _run_sanitized(c, [[x]], tmp_path)
        np.testing.assert_array_equal(y, _fc_reference(g, x))
        return
    k, cin, dm, kernel = LAYERS[kind]
    oc = cin * dm if dm else 6
    w = rng.choice(np.int8([-127, 127]), (1, k, k, oc) if dm else (oc, k, k, cin))
    if dm:
        w[..., -2], w[..., -1] = 127, -127
        rows = np.moveaxis(w, 3, 0)
    else:
        w[-2], w[-1] = 127, -127
        rows = w
    bias = _edge_bias(rows, zp, rng)
    g = make_layer("DEPTHWISE_CONV_2D" if dm else "CONV_2D", (1, 7, 6, cin), w, bias,
                   in_q=(0.02, zp), w_scales=np.full(oc, 0.01), out_q=(40.0, 3))
    x = np.full((1, 7, 6, cin), 127, np.int8)
    x[0, 0] = rng.integers(-128, 128, (6, cin))  # one row of ordinary values
    c = compile_graph(copy.deepcopy(g))
    assert any(n["attrs"].get("func_name", "").startswith(kernel) for n in c.doc["nodes"]), kind
    (y,), = _run_sanitized(c, [[x]], tmp_path)
    np.testing.assert_array_equal(y, reference(g, x))
    # the case overflows: the edge channels at a pixel whose taps are all interior
    assert bias[-2] + rows[-2].astype(np.int64).sum() * 255 >= LIMIT
    assert bias[-1] + rows[-1].astype(np.int64).sum() * 255 < -LIMIT


def test_overflowing_transpose_conv_is_sanitizer_clean_and_wraps(tmp_path: Path):
    """TRANSPOSE_CONV int8 (SIMD dot product, plain-C tail of 3 input channels, per-tap zero
    point offsets): output channel 2 far above 2^31, channel 3 far below, for x = 127."""
    from stm32ai.passes.lower.transpose_conv import tconv_padding
    from tests.test_ops_reduce import ref_tconv

    rng = np.random.default_rng(21)
    ih, iw, ic, oc, k, st = 4, 4, 7, 4, 3, 2
    w = rng.choice(np.int8([-127, 127]), (oc, k, k, ic))
    w[2], w[3] = 127, -127
    bias = np.array([1234, -777, LIMIT - 101, -LIMIT + 100], np.int64)
    g = Graph("tconv", [], [], [], [])
    x_i = g.add_tensor("x", (1, ih, iw, ic), "int8", _q(0.02, -128))
    y_i = g.add_tensor("y", (1, ih * st, iw * st, oc), "int8", _q(40.0, 3))
    ins = [g.add_const("shape", np.array([1, ih * st, iw * st, oc], np.int32)),
           g.add_const("w", w, _q(np.full(oc, 0.01), np.zeros(oc))), x_i, g.add_const("b", bias.astype(np.int32))]
    g.ops.append(Op("TRANSPOSE_CONV", ins, [y_i], {"padding": "SAME", "stride_h": st, "stride_w": st,
                                                   "fused_activation_function": "NONE"}, index=0))
    g.inputs, g.outputs = [x_i], [y_i]
    x = np.full((1, ih, iw, ic), 127, np.int8)
    x[0, 0] = rng.integers(-128, 128, (iw, ic))
    c = compile_graph(copy.deepcopy(g))
    assert c.graph.ops[0].kernel == "transpose_conv_s8"
    (y,), = _run_sanitized(c, [[x]], tmp_path)
    pad = tconv_padding("SAME", ih * st, k, st)
    acc = ref_tconv(x, w, bias, (st, st), (pad, pad), (ih * st, iw * st), 128)
    assert acc[..., 2].max() >= LIMIT and acc[..., 3].min() < -LIMIT  # truly overflowing
    acc = ((acc + LIMIT) % (1 << 32)) - LIMIT
    pairs = [quantize_multiplier(per_channel_multiplier(0.02, 0.01, 40.0))] * oc
    m = np.array([p[0] for p in pairs], np.int64)
    s = np.array([p[1] for p in pairs], np.int64)
    want = np.clip(multiply_by_quantized_multiplier(acc, m, s) + 3, -128, 127)
    np.testing.assert_array_equal(y.astype(np.int64), want)


def test_overflowing_lstm_gate_is_sanitizer_clean_and_matches_tflm(tmp_path: Path):
    """lstm_seq_int8 with the forget-gate bias written at -2^31 + 5 (as a clamping exporter
    would): the gate's true accumulator leaves int32 for inputs that push its weights down.
    UBSan-clean, and equal to TFLite Micro on the same file (whose host build wraps too)."""
    import tflite

    from tests.fuzz.mutate import _Buf

    src = FIXTURES / "lstm_seq_int8.tflite"
    g = load_tflite(src)
    lstm = next(op for op in g.ops if op.type == "UNIDIRECTIONAL_SEQUENCE_LSTM")
    fb = _Buf(src.read_bytes())
    sg = fb.model.Subgraphs(0)
    bias_t = sg.Tensors(lstm.inputs[13])
    assert bias_t.Type() == tflite.TensorType.INT32
    buf = fb.model.Buffers(bias_t.Buffer())
    start = buf._tab.Vector(buf._tab.Offset(4))
    for i in range(bias_t.Shape(0)):
        fb.put("<i", start + 4 * i, -LIMIT + 5)
    model = tmp_path / "lstm_edge.tflite"
    model.write_bytes(bytes(fb.b))
    c = compile_model(model)
    assert len(c.warnings) == 1 and "UNIDIRECTIONAL_SEQUENCE_LSTM" in c.warnings[0]
    ins, _ = io_specs(c)
    x_t = g.tensors[lstm.inputs[0]]
    w_f = g.tensors[lstm.inputs[2]].data.astype(np.int64)  # input-to-forget weights [cells, in]
    zp = int(x_t.quant.zero_point[0])
    # per cell, the input that drives the input part of its forget gate down the most
    x_down = np.where(w_f[0] > 0, -128, 127)
    assert -LIMIT + 5 + int((w_f[0] * (x_down - zp)).sum()) < -LIMIT  # truly overflowing
    xs = [np.broadcast_to(x_down.astype(np.int8), ins[0].shape).copy(),
          np.full(ins[0].shape, 127, np.int8), np.full(ins[0].shape, -128, np.int8)]
    got = _run_sanitized(c, [[x] for x in xs], tmp_path)
    for x, (y,) in zip(xs, got, strict=True):
        np.testing.assert_array_equal(y, run_tflm(model, [x])[0].reshape(y.shape))


@pytest.mark.slow
def test_overflow_on_emulated_cortex_m4_matches_tflm(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """The Cortex-M4 build (SMLAD path) of acc_conv_wrap_int8 on QEMU mps2-an386, fed inputs whose
    accumulators truly leave int32 (`validate --mode target --inputs`): equal to TFLite Micro."""
    import shutil

    if not all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc/make/qemu-system-arm not installed")
    x = np.full((3, 2, 2, 34000), 127, np.int8)
    x[1] = -128
    x[2, :, :, ::3] = -128
    np.savez(tmp_path / "adv.npz", x)
    report = tmp_path / "v.json"
    code = main(["validate", str(FIXTURES / "acc_conv_wrap_int8.tflite"), "--mode", "target", "--board",
                 "qemu-mps2-an386", "--inputs", str(tmp_path / "adv.npz"), "--timeout", "300",
                 "--json", str(report)])  # 136 kB per input over the emulated UART: slow under load
    cap = capsys.readouterr()
    assert code == 0, cap.out + cap.err
    import json

    doc = json.loads(report.read_text())
    assert doc["passed"] and doc["verdict"] == "tflm" and doc["samples"] == 3, doc
    assert "stm32ai: warning: op #0 (CONV_2D)" in cap.err


def test_overflowing_hybrid_fc_is_sanitizer_clean(tmp_path: Path):
    """A hybrid FULLY_CONNECTED (float input quantised at run time, int8 weights) of 140,000
    inputs of weight +-127 fed the input that matches their signs: the int32 dot product truly
    leaves int32 (127 * 127 * 140,000 > 2^31). UBSan-clean (LiteRT's sum wraps the same way
    on the device; the float result of a wrapped sum is not compared)."""
    g = load_tflite(FIXTURES / "hybrid_fc_odd_relu_hybrid.tflite")
    op = g.ops[0]
    x_t, w_t, b_t, y_t = (g.tensors[i] for i in (*op.inputs, op.outputs[0]))
    k = 140_000
    rng = np.random.default_rng(22)
    w = rng.choice(np.int8([-127, 127]), (2, k))
    w_t.shape, w_t.data = (2, k), w
    w_t.quant.scale, w_t.quant.zero_point = np.float32([0.01, 0.02]), np.zeros(2, np.int64)
    x_t.shape, y_t.shape = (1, k), (1, 2)
    b_t.shape, b_t.data = (2,), np.float32([0.5, -0.5])
    op.options["fused_activation_function"] = "NONE"
    c = compile_graph(g)
    assert any(o.kernel == "fully_connected_hybrid" for o in c.graph.ops)
    x = np.where(w[0] > 0, 1.0, -1.0).astype(np.float32).reshape(1, k)
    (y,), = _run_sanitized(c, [[x]], tmp_path)
    assert y.shape == (1, 2) and np.isfinite(y).all()
