"""Reductions (MEAN, SUM, REDUCE_MAX, REDUCE_MIN, ARG_MAX, ARG_MIN) and TRANSPOSE_CONV.

* every converter-made fixture (tests/fixtures/make_fixtures_reduce.py) runs bit-exact
  against TFLite Micro (int8/int16) or within 1e-5 (float32); TFLite Micro is the verdict
  wherever it runs the model (it refuses int64 ARG_MAX/ARG_MIN output: LiteRT-ref decides);
* unsupported variants are refused at generate time: exit 2, one line naming op and reason;
* the kernels on many random shapes/axes/geometries built directly as IR graphs, against
  numpy models of TFLite's reference arithmetic;
* scratch sizes reported by the C kernels equal the planner's, and the kernels build
  warning-free for Cortex-M4.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, fixture_models, shared_model

from stm32ai.emitter import c_value
from stm32ai.errors import UnsupportedModelError
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.ir import Graph, Op, Quant
from stm32ai.passes.lower.reduce import check_reduce, mean_multiplier, reduce_plan
from stm32ai.passes.lower.transpose_conv import check_transpose_conv, tconv_padding
from stm32ai.passes.quant import multiply_by_quantized_multiplier, per_channel_multiplier, quantize_multiplier
from stm32ai.pipeline import compile_graph, compile_model
from stm32ai.validate.host import run_compiled
from stm32ai.validate.run import validate_model

MODELS = fixture_models("reduce_*.tflite") + fixture_models("tconv_*.tflite")
UNSUPPORTED = sorted([*(FIXTURES / "unsupported").glob("reduce_*.tflite"),
                      *(FIXTURES / "unsupported").glob("tconv_*.tflite")])
RUNTIME = ROOT / "stm32ai" / "runtime"
# int8 SUM: LiteRT's reference SUM still requantises in float without clamping (wraps)
LITERT_DIFFERS = {"reduce_sum_axis2_keep_int8", "reduce_sum_axes_neg_int8"}


def _check(res, name: str) -> None:
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict, f"no reference ran {name}: {[c.unavailable for c in res.comparisons]}"
    v = verdict[0]
    tflm = next(c for c in res.comparisons if c.reference == "tflm")
    if tflm.unavailable:  # only int64 ARG_MAX/ARG_MIN outputs, which TFLM does not implement
        assert "i64" in name, tflm.unavailable
    else:
        assert v.reference == "tflm"
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok, f"{name} output {j} vs {v.reference}: max LSB {m.max_lsb}, max rel err {m.max_rel_err:.3g}"
        if m.max_lsb is not None:
            assert m.max_lsb == 0
    if name not in LITERT_DIFFERS:
        for c in res.comparisons:
            if not c.verdict and not c.unavailable:
                assert all(c.ok), f"{name}: LiteRT-ref disagrees"


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_fixture_matches_reference(model):
    _check(validate_model(model, n=2, seed=5), model.stem)


def test_fixture_set_complete():
    names = {p.stem for p in MODELS}
    for op in ("mean", "sum", "max", "min", "argmax", "argmin"):
        assert any(n.startswith(f"reduce_{op}_") and n.endswith("_int8") for n in names), op
        assert any(n.startswith(f"reduce_{op}_") and n.endswith("_float32") for n in names), op
    assert sum(n.startswith("tconv_") for n in names) >= 10
    assert all(p.stat().st_size < 50_000 for p in MODELS + UNSUPPORTED)
    assert len(UNSUPPORTED) >= 1


def test_seanet_transpose_conv_16x8():
    """int16 activations, int8 weights, int64 bias, output_shape fed as graph input 0."""
    model = shared_model("tflite_micro/seanet_transpose_conv0.tflite")
    _check(validate_model(model, n=2, seed=11), model.stem)


# ---- refusals --------------------------------------------------------------------------------

@pytest.mark.parametrize("model", UNSUPPORTED, ids=lambda p: p.stem)
def test_unsupported_variant_refused(model, tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "stm32ai", "generate", str(model), "--c-only", "-o", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "op #0" in lines[0] and ("MEAN" in lines[0] or "ARG_MAX" in lines[0])
    assert "int16" in lines[0] or "run time" in lines[0]
    assert not out.exists()


def _retyped(model: str, **quant_out: float) -> Graph:
    g = load_tflite(FIXTURES / model)
    y = g.tensors[g.ops[0].outputs[0]]
    assert y.quant is not None
    y.quant = Quant(np.array([quant_out.get("scale", float(y.quant.scale[0]))], np.float32),
                    np.array([int(quant_out.get("zp", int(y.quant.zero_point[0])))], np.int64))
    return g


def test_refuses_int8_max_with_requantisation():
    g = _retyped("reduce_max_axis1_int8.tflite", scale=0.5)
    assert "quantisation" in check_reduce(g.ops[0], g)
    with pytest.raises(UnsupportedModelError, match="REDUCE_MAX"):
        compile_graph(g)


def test_refuses_inconsistent_transpose_conv():
    g = load_tflite(FIXTURES / "tconv_s2_same_int8.tflite")
    op = g.ops[0]
    assert check_transpose_conv(op, g) is None
    shape = g.tensors[op.inputs[0]]
    shape.data = np.array([1, 9, 8, 5], np.int32)
    assert "output_shape" in check_transpose_conv(op, g)
    g = load_tflite(FIXTURES / "tconv_s2_same_int8.tflite")
    w = g.tensors[g.ops[0].inputs[1]]
    w.quant.zero_point = np.ones_like(w.quant.zero_point)
    assert "zero point" in check_transpose_conv(g.ops[0], g)


# ---- numpy models of TFLite's reference arithmetic ---------------------------------------------

def ref_mean_sum_s8(x, axes, si, zi, so, zo, mean):
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    s = x.astype(np.int64).sum(axis=tuple(axes)) if axes else x.astype(np.int64)
    m, sh = mean_multiplier(si, so, n, mean)
    return np.clip(multiply_by_quantized_multiplier(s - zi * n, m, sh) + zo, -128, 127)


def ref_tconv(x, w, bias, stride, pad, out_hw, in_off):
    """TFLite's scatter, int64 accumulation (exact); x NHWC, w OHWI."""
    n, ih, iw, _ = x.shape
    oc, kh, kw, _ = w.shape
    acc = np.zeros((n, out_hw[0], out_hw[1], oc), np.float64 if x.dtype.kind == "f" else np.int64)
    xv = x.astype(acc.dtype) + in_off
    for ky in range(kh):
        for kx in range(kw):
            contrib = np.einsum("bhwc,oc->bhwo", xv, w[:, ky, kx, :].astype(acc.dtype))
            for iy in range(ih):
                oy = iy * stride[0] - pad[0] + ky
                if not 0 <= oy < out_hw[0]:
                    continue
                for ix in range(iw):
                    ox = ix * stride[1] - pad[1] + kx
                    if 0 <= ox < out_hw[1]:
                        acc[:, oy, ox, :] += contrib[:, iy, ix, :]
    if bias is not None:
        acc = acc + bias
    return acc


def _q(scale: float, zp: int) -> Quant:
    return Quant(np.array([scale], np.float32), np.array([zp], np.int64))


# ---- random reductions as IR graphs -----------------------------------------------------------

REDUCE_CASES = [  # input shape, [(op, axes, keep_dims), ...]
    ((2, 3, 5, 4), [("MEAN", [1, 2], True), ("SUM", [0, 2], False), ("REDUCE_MAX", [-1], False),
                    ("REDUCE_MIN", [3, 1], True), ("MEAN", [0, 1, 2, 3], False), ("SUM", [-3], True)]),
    ((3, 1, 4, 1, 6), [("MEAN", [0, 2, 4], False), ("SUM", [1, 3], False), ("REDUCE_MAX", [0, 4], True),
                       ("MEAN", [2, 2, -3], True), ("REDUCE_MIN", [1], False)]),
    ((7, 9), [("MEAN", [0], False), ("SUM", [1], True), ("REDUCE_MAX", [0, 1], False),
              ("MEAN", [1], False)]),
    ((2, 3, 2, 3, 2, 3), [("MEAN", [0, 2, 4], True), ("SUM", [1, 3, 5], False),
                          ("REDUCE_MIN", [5, 0], False)]),
]


def _reduce_graph(shape, cases, dtype, rng):
    g = Graph("reduce", [], [], [], [])
    qin = _q(float(rng.uniform(0.01, 0.05)), int(rng.integers(-20, 20))) if dtype == "int8" else None
    x = g.add_tensor("x", shape, dtype, qin)
    g.inputs = [x]
    for k, (op_type, axes, keep) in enumerate(cases):
        red = {a % len(shape) for a in axes}
        oshape = tuple(1 if d in red else n for d, n in enumerate(shape)) if keep else \
            tuple(n for d, n in enumerate(shape) if d not in red)
        if dtype == "int8":
            q = qin if op_type.startswith("REDUCE_") else _q(float(rng.uniform(0.002, 0.2)),
                                                              int(rng.integers(-30, 30)))
        else:
            q = None
        y = g.add_tensor(f"y{k}", oshape, dtype, q)
        a = g.add_const(f"axes{k}", np.array(axes, np.int32))
        g.ops.append(Op(op_type, [x, a], [y], {"keep_dims": keep}, index=k))
        g.outputs.append(y)
    return g


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("case", range(len(REDUCE_CASES)))
def test_reductions_random(case, dtype):
    rng = np.random.default_rng(100 + case)
    shape, cases = REDUCE_CASES[case]
    g = _reduce_graph(shape, cases, dtype, rng)
    specs = [(g.tensors[t].quant, g.tensors[t].shape) for t in g.outputs]
    qin = g.tensors[g.inputs[0]].quant
    c = compile_graph(g)
    for op in c.graph.ops:
        if op.kernel == "reduce_sum_s8":
            assert op.scratch == 4 * op.attrs["out_size"]
    if dtype == "int8":
        x = rng.integers(-128, 128, shape).astype(np.int8)
    else:
        x = rng.uniform(-2, 2, shape).astype(np.float32)
    outs = run_compiled(c, [[x]])[0]
    for (op_type, axes, _keep), (q, _oshape), got in zip(cases, specs, outs, strict=True):
        ax = sorted({a % len(shape) for a in axes})
        if op_type in ("REDUCE_MAX", "REDUCE_MIN"):
            f = np.max if op_type == "REDUCE_MAX" else np.min
            want = f(x, axis=tuple(ax))
            np.testing.assert_array_equal(got.reshape(-1), want.reshape(-1))
        elif dtype == "int8":
            want = ref_mean_sum_s8(x, ax, float(qin.scale[0]), int(qin.zero_point[0]), float(q.scale[0]),
                                   int(q.zero_point[0]), op_type == "MEAN")
            np.testing.assert_array_equal(got.reshape(-1).astype(np.int64), want.reshape(-1))
        else:
            f = np.mean if op_type == "MEAN" else np.sum
            want = f(x.astype(np.float64), axis=tuple(ax))
            np.testing.assert_allclose(got.reshape(-1), want.reshape(-1), rtol=0,
                                       atol=1e-6 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_argminmax_random(dtype):
    rng = np.random.default_rng(7)
    shape = (3, 4, 5, 6)
    g = Graph("arg", [], [], [], [])
    x = g.add_tensor("x", shape, dtype, _q(0.02, 3) if dtype == "int8" else None)
    g.inputs = [x]
    cases = [("ARG_MAX", 0, "int32"), ("ARG_MIN", 1, "int64"), ("ARG_MAX", -1, "int64"), ("ARG_MIN", 2, "int32")]
    for k, (op_type, axis, odt) in enumerate(cases):
        oshape = tuple(n for d, n in enumerate(shape) if d != axis % 4)
        y = g.add_tensor(f"y{k}", oshape, odt)
        a = g.add_const(f"axis{k}", np.array([axis], np.int32))
        g.ops.append(Op(op_type, [x, a], [y], {"output_type": odt.upper()}, index=k))
        g.outputs.append(y)
    c = compile_graph(g)
    # few distinct values: many ties, first index must win
    xv = rng.integers(-3, 3, shape).astype(np.int8 if dtype == "int8" else np.float32)
    outs = run_compiled(c, [[xv]])[0]
    for (op_type, axis, odt), got in zip(cases, outs, strict=True):
        f = np.argmax if op_type == "ARG_MAX" else np.argmin
        assert got.dtype == np.dtype(odt)
        np.testing.assert_array_equal(got, f(xv, axis=axis))


# ---- random transpose convolutions as IR graphs ----------------------------------------------

TCONV_CASES = [  # in (n, h, w, c), out_c, (kh, kw), (sh, sw), padding, extra output rows/cols, act
    ((1, 4, 5, 3), 4, (3, 3), (2, 2), "SAME", (0, 0), "NONE"),
    ((2, 3, 3, 5), 3, (4, 2), (2, 3), "VALID", (0, 0), "RELU6"),
    ((1, 5, 2, 2), 6, (1, 3), (1, 2), "SAME", (0, 0), "NONE"),
    ((1, 3, 4, 4), 2, (3, 3), (3, 2), "VALID", (2, 1), "RELU"),
    ((1, 2, 3, 7), 5, (5, 5), (1, 1), "SAME", (0, 0), "RELU_N1_TO_1"),
    ((1, 3, 3, 2), 3, (2, 2), (4, 4), "SAME", (0, 0), "NONE"),
    ((1, 2, 3, 301), 3, (2, 3), (2, 2), "SAME", (0, 0), "NONE"),  # long dot products
]


def _tconv_graph(case, dtype, rng, per_tensor=False, bias=True):
    (n, ih, iw, ic), oc, (kh, kw), (sh, sw), padding, (eh, ew), act = case
    if padding == "SAME":
        oh, ow = ih * sh, iw * sw
    else:
        oh, ow = (ih - 1) * sh + kh + eh, (iw - 1) * sw + kw + ew
    g = Graph("tconv", [], [], [], [])
    if dtype == "float32":
        w = rng.normal(0, 0.5, (oc, kh, kw, ic)).astype(np.float32)
        b = rng.normal(0, 0.5, oc).astype(np.float32)
        wq = xq = yq = bq = None
    else:
        w = rng.integers(-127, 128, (oc, kh, kw, ic)).astype(np.int8)
        ws = rng.uniform(0.002, 0.01, 1 if per_tensor else oc).astype(np.float32)
        wq = Quant(ws, np.zeros(ws.size, np.int64))
        if dtype == "int8":
            xq, yq = _q(0.02, int(rng.integers(-40, 40))), _q(float(rng.uniform(0.02, 0.1)), int(rng.integers(-20, 20)))
            b = rng.integers(-3000, 3000, oc).astype(np.int32)
        else:
            xq, yq = _q(0.0005, 0), _q(float(rng.uniform(0.001, 0.004)), 0)
            b = rng.integers(-300000, 300000, oc).astype(np.int64)
        bq = None
    x = g.add_tensor("x", (n, ih, iw, ic), dtype, xq)
    y = g.add_tensor("y", (n, oh, ow, oc), dtype, yq)
    shp = g.add_const("shape", np.array([n, oh, ow, oc], np.int32))
    wid = g.add_const("w", w, wq)
    ins = [shp, wid, x]
    if bias:
        ins.append(g.add_const("b", b, bq))
    g.ops.append(Op("TRANSPOSE_CONV", ins, [y], {"padding": padding, "stride_h": sh, "stride_w": sw,
                                                  "fused_activation_function": act}, index=0))
    g.inputs, g.outputs = [x], [y]
    return g, w, (b if bias else None), (oh, ow)


def _act_range(act, scale, zp, lo, hi):
    q = {"NONE": (None, None), "RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}[act]
    a = lo if q[0] is None else max(lo, zp + int(np.floor(abs(q[0] / scale) + 0.5) * np.sign(q[0])))
    b = hi if q[1] is None else min(hi, zp + int(np.floor(abs(q[1] / scale) + 0.5) * np.sign(q[1])))
    return a, b


@pytest.mark.parametrize("dtype", ["int8", "int16", "float32"])
@pytest.mark.parametrize("case", range(len(TCONV_CASES)))
def test_transpose_conv_random(case, dtype):
    rng = np.random.default_rng(200 + case)
    spec = TCONV_CASES[case]
    g, w, b, (oh, ow) = _tconv_graph(spec, dtype, rng, per_tensor=case == 2, bias=case != 3)
    x_t, y_t, w_t = g.tensors[g.inputs[0]], g.tensors[g.outputs[0]], g.tensors[g.ops[0].inputs[1]]
    xq, yq, wq = x_t.quant, y_t.quant, w_t.quant
    c = compile_graph(g)
    assert c.graph.ops[0].kernel == {"int8": "transpose_conv_s8", "int16": "transpose_conv_s16",
                                     "float32": "transpose_conv_f32"}[dtype]
    _, _, (kh, kw), (sh, sw), padding, _, act = spec
    pad = (tconv_padding(padding, oh, kh, sh), tconv_padding(padding, ow, kw, sw))
    if dtype == "float32":
        x = rng.uniform(-1, 1, x_t.shape).astype(np.float32)
    else:
        info = np.iinfo(np.dtype(dtype))
        x = rng.integers(info.min, info.max + 1, x_t.shape).astype(dtype)
    got = run_compiled(c, [[x]])[0][0]
    in_off = 0 if dtype != "int8" else -int(xq.zero_point[0])
    acc = ref_tconv(x, w, b, (sh, sw), pad, (oh, ow), in_off)
    if dtype == "float32":
        lo, hi = {"NONE": (-np.inf, np.inf), "RELU": (0, np.inf), "RELU6": (0, 6), "RELU_N1_TO_1": (-1, 1)}[act]
        np.testing.assert_allclose(got, np.clip(acc, lo, hi), rtol=0, atol=1e-5 * np.abs(acc).max())
        return
    scales = np.broadcast_to(wq.scale, (w.shape[0],))
    pairs = [quantize_multiplier(per_channel_multiplier(float(xq.scale[0]), float(s), float(yq.scale[0])))
             for s in scales]
    m = np.array([p[0] for p in pairs], np.int64)
    s = np.array([p[1] for p in pairs], np.int64)
    info = np.iinfo(np.dtype(dtype))
    zp = int(yq.zero_point[0])
    lo, hi = _act_range(act, float(yq.scale[0]), zp, int(info.min), int(info.max))
    if dtype == "int8":
        want = multiply_by_quantized_multiplier(acc, m, s) + zp
    else:  # TFLite's 64-bit MultiplyByQuantizedMultiplier
        rm = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
        ts = 15 - s
        want = (acc * rm + (np.int64(1) << (ts - 1))) >> ts
    np.testing.assert_array_equal(got.astype(np.int64), np.clip(want, lo, hi))


# ---- plans, scratch sizes, cross-compilation -------------------------------------------------

def test_reduce_plan_merges_dimensions():
    p = reduce_plan((1, 7, 9, 5), [1, 2])
    assert (p.shape, p.ostride, p.out_size, p.count) == ([63, 5], [0, 1], 5, 63)
    p = reduce_plan((2, 3, 4, 5), [0, 2])
    assert (p.shape, p.ostride, p.out_size, p.count) == ([2, 3, 4, 5], [0, 5, 0, 1], 15, 8)
    p = reduce_plan((1, 1, 1, 5), [1, 2])
    assert (p.shape, p.ostride, p.out_size, p.count) == ([5], [1], 5, 1)
    p = reduce_plan((3, 1), [0, 1])
    assert (p.shape, p.ostride, p.out_size, p.count) == ([3], [0], 1, 3)


def test_mean_multiplier_folds_count():
    m, s = quantize_multiplier(0.5)
    assert mean_multiplier(0.5, 1.0, 1, True) == (m, s)
    assert mean_multiplier(0.5, 1.0, 7, False) == (m, s)
    m7, s7 = mean_multiplier(0.5, 1.0, 7, True)
    assert s7 == s - 2 and m7 == (m << 2) // 7


def _cc() -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    return cc


def test_scratch_size_matches_planner(tmp_path):
    mains = []
    scratch = []
    for k, model in enumerate(["reduce_mean_hw_keep_int8", "reduce_sum_axes_neg_int8", "reduce_mean_axes012_int8"]):
        c = compile_model(FIXTURES / f"{model}.tflite")
        op = next(o for o in c.graph.ops if o.kernel == "reduce_sum_s8")
        init = ", ".join(f".{key} = {c_value(v)}" for key, v in op.attrs.items())
        mains.append(f"  {{ static const ai_reduce_sum_s8_params p{k} = {{ {init} }};\n"
                     f"    printf(\"%ld\\n\", (long)ai_reduce_sum_s8_scratch_size(&p{k})); }}")
        scratch.append(op.scratch)
    src = tmp_path / "main.c"
    src.write_text("#include <stdio.h>\n#include \"ai_kernels_reduce.h\"\nint main(void) {\n"
                   + "\n".join(mains) + "\n  return 0;\n}\n")
    exe = tmp_path / "scratch"
    subprocess.run([_cc(), "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{RUNTIME / 'include'}", str(src),
                    str(RUNTIME / "src" / "ai_reduce.c"), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert [int(v) for v in out] == scratch


FLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion"]


@pytest.mark.parametrize("cc", ["host", "arm"])
def test_kernels_build_clean(cc, tmp_path):
    if cc == "arm":
        exe = shutil.which("arm-none-eabi-gcc")
        if exe is None:
            pytest.skip("arm-none-eabi-gcc not installed")
        flags = [*FLAGS, "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
    else:
        exe, flags = _cc(), FLAGS
    for src in ("ai_reduce.c", "ai_transpose_conv.c"):
        r = subprocess.run([exe, *flags, f"-I{RUNTIME / 'include'}", "-c", str(RUNTIME / "src" / src),
                            "-o", str(tmp_path / (Path(src).stem + ".o"))], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
