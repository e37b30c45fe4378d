"""Binary elementwise ops and CAST (binary.py, cast.py, ai_binary.c, ai_cast.c).

* every bin_* fixture (real converter output) runs bit-exact against TFLite Micro (LiteRT-ref
  where TFLM has no kernel: uint8 CAST), the int32 ones (bin_*_int32) included;
* hand-built graphs run the generated C on the host against numpy for what the converter
  does not emit: 6-D broadcasting, int8 SUB/MUL against a numpy model of TFLM's integer
  arithmetic, int32 arithmetic over the whole int32 range (wrap-around, fused activations,
  truncating DIV with its edge cases), every CAST type pair;
* the kernels compile warning-free (-Wconversion on the host) and for Cortex-M4;
* unsupported variants are refused at generate time with the op, the tensor and the reason.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, refused_by_generate, shared_model
from test_ops_move import _Builder, _patch_scale

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Quant
from stm32ai.passes.lower import registry
from stm32ai.passes.lower.binary import loop_attrs, mul_params_s8, sub_params_s8
from stm32ai.passes.lower.cast import CAST_TYPES
from stm32ai.passes.quant import multiply_by_quantized_multiplier as mbqm
from stm32ai.pipeline import compile_graph
from stm32ai.validate.run import validate_model

BIN_FIXTURES = sorted(FIXTURES.glob("bin_*.tflite"))
RUNTIME = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
WARN = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion", "-Wconversion"]
M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
TFLM_REFUSES = {"bin_cast_uint8"}  # TFLM's CAST has no uint8 (LiteRT-ref is the verdict)


def _base(path) -> str:
    return path.stem.rsplit("_", 1)[0]


def test_fixtures_present():
    names = {p.stem for p in BIN_FIXTURES}
    assert len(names) >= 33, sorted(names)
    for op in ("sub", "mul", "maxmin", "div", "cast"):
        assert any(n.startswith(f"bin_{op}") for n in names), op
    for op in ("addsub", "mul", "div", "maxmin"):  # int32 variants
        assert any(n.startswith(f"bin_{op}") and n.endswith("_int32") for n in names), op


@pytest.mark.parametrize("model", BIN_FIXTURES, ids=lambda p: p.stem)
def test_fixture_bit_exact(model):
    res = validate_model(model, n=2, seed=7)
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict, f"no reference ran {res.model}: {[c.unavailable for c in res.comparisons]}"
    v = verdict[0]
    if _base(model) not in TFLM_REFUSES and model.stem not in TFLM_REFUSES:
        assert v.reference == "tflm", f"{res.model}: TFLM did not run: {res.comparisons[0].unavailable}"
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok and m.max_abs_err == 0.0, (f"{res.model} output {j} vs {v.reference}: max LSB {m.max_lsb}, "
                                             f"max abs err {m.max_abs_err:.3g}")


def test_miniresnet_with_mul_bit_exact():
    model = shared_model("stm32ai_modelzoo/miniresnetv2_1stacks_64x50_esc10_int8.tflite")
    res = validate_model(model, n=2, seed=3)
    v = next(c for c in res.comparisons if c.verdict)
    assert v.reference == "tflm" and all(v.ok), v
    assert max(m.max_abs_err for m in v.outputs) == 0.0


# ---------------------------------------------------------------------------------------------
# Loop parameters
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,y,want", [
    ((1, 5, 7, 3), (1, 5, 7, 3), (1, 5, 7, 3), ([1] * 5 + [105], [0] * 5 + [1], [0] * 5 + [1])),
    ((1, 5, 7, 3), (3,), (1, 5, 7, 3), ([1] * 4 + [35, 3], [0] * 4 + [3, 1], [0] * 4 + [0, 1])),
    ((1, 5, 7, 3), (1, 1, 1, 1), (1, 5, 7, 3), ([1] * 5 + [105], [0] * 5 + [1], [0] * 6)),
    ((1, 5, 1, 3), (1, 1, 7, 1), (1, 5, 7, 3), ([1] * 3 + [5, 7, 3], [0] * 3 + [3, 0, 1], [0] * 3 + [0, 1, 0])),
    ((2, 1, 3, 4, 1, 5), (3, 1, 2, 1), (2, 1, 3, 4, 2, 5),
     ([1, 2, 3, 4, 2, 5], [0, 60, 20, 5, 0, 1], [0, 0, 2, 0, 1, 0])),
])
def test_loop_attrs_merge_contiguous_dims(a, b, y, want):
    got = loop_attrs(a, b, y)
    assert (got["out_shape"], got["in1_strides"], got["in2_strides"]) == want


# ---------------------------------------------------------------------------------------------
# Hand-built graphs, run through the whole compiler and the generated C on the host
# ---------------------------------------------------------------------------------------------

SHAPES_6D = [((2, 1, 3, 1, 4, 5), (1, 3, 1, 2, 1, 1), (2, 3, 3, 2, 4, 5)),
             ((1, 2, 1, 3, 1, 4), (4,), (1, 2, 1, 3, 1, 4)),
             ((3, 1, 1, 1, 1, 1), (1, 2, 3, 1, 2, 3), (3, 2, 3, 1, 2, 3))]


@pytest.mark.parametrize("shapes", SHAPES_6D, ids=lambda s: "x".join(map(str, s[2])))
def test_float_6d_broadcast_against_numpy(shapes):
    sa, sb, sy = shapes
    rng = np.random.default_rng(1)
    x1 = rng.normal(size=sa).astype(np.float32)
    x2 = (rng.uniform(0.5, 2.0, size=sb) * rng.choice([-1, 1], size=sb)).astype(np.float32)
    b = _Builder()
    t1, t2 = b.input(x1), b.input(x2)
    outs = [b.op(op, [t1, t2], [sy], "float32", **opt)[0] for op, opt in (
        ("SUB", {"fused_activation_function": "RELU6"}), ("MUL", {}), ("DIV", {"fused_activation_function": "RELU"}),
        ("MAXIMUM", {}), ("MINIMUM", {}))]
    outs.append(b.op("SUB", [t2, t1], [sy], "float32")[0])  # broadcast input 0
    got = b.run(outs)
    want = [np.clip(x1 - x2, 0, 6), x1 * x2, np.maximum(x1 / x2, 0), np.maximum(x1, x2), np.minimum(x1, x2), x2 - x1]
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_array_equal(g, w.astype(np.float32), err_msg=f"output {k}")


def _q(scale: float, zp: int) -> Quant:
    return Quant(np.float32([scale]), np.int64([zp]))


def _sub_ref(x1, x2, p):
    u = mbqm((x1.astype(np.int64) + p["input1_offset"]) << 20, p["input1_multiplier"], p["input1_shift"])
    v = mbqm((x2.astype(np.int64) + p["input2_offset"]) << 20, p["input2_multiplier"], p["input2_shift"])
    return mbqm(u - v, p["output_multiplier"], p["output_shift"]) + p["output_offset"]


def _mul_ref(x1, x2, p):
    prod = (x1.astype(np.int64) + p["input1_offset"]) * (x2.astype(np.int64) + p["input2_offset"])
    return mbqm(prod, p["output_multiplier"], p["output_shift"]) + p["output_offset"]


@pytest.mark.parametrize("shapes", SHAPES_6D, ids=lambda s: "x".join(map(str, s[2])))
def test_int8_6d_broadcast_against_tflm_arithmetic(shapes):
    """The int8 kernels against a numpy model of TFLM's integer formulas, over every raw
    value, with scales that give left shifts (MUL) and unequal input multipliers (SUB)."""
    sa, sb, sy = shapes
    rng = np.random.default_rng(2)
    x1 = rng.integers(-128, 128, sa).astype(np.int8)
    x2 = rng.integers(-128, 128, sb).astype(np.int8)
    q1, q2 = _q(0.05, -7), _q(0.013, 11)
    q_sub, q_mul, q_mul_small = _q(0.031, 3), _q(0.0021, -20), _q(0.00011, 0)
    b = _Builder()
    t1, t2 = b.input(x1, q1), b.input(x2, q2)
    o_sub = b.op("SUB", [t1, t2], [sy], "int8", q_sub, fused_activation_function="RELU")[0]
    o_mul = b.op("MUL", [t1, t2], [sy], "int8", q_mul)[0]
    o_mul2 = b.op("MUL", [t2, t1], [sy], "int8", q_mul_small, fused_activation_function="RELU6")[0]
    got = b.run([o_sub, o_mul, o_mul2])
    ps = sub_params_s8(0.05, -7, 0.013, 11, 0.031, 3)
    g = b.g
    pm = mul_params_s8(g.tensors[t1], g.tensors[t2], g.tensors[o_mul])
    pm2 = mul_params_s8(g.tensors[t2], g.tensors[t1], g.tensors[o_mul2])
    assert pm2["output_shift"] > 0  # the left-shift path of the requantisation
    six = min(127, round(6 / 0.00011))
    want = [np.clip(_sub_ref(x1, x2, ps), 3, 127), np.clip(_mul_ref(x1, x2, pm), -128, 127),
            np.clip(_mul_ref(x2, x1, pm2), 0, six)]
    for k, (a, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_array_equal(a, np.broadcast_to(w, sy).astype(np.int8), err_msg=f"output {k}")


def test_int8_minmax_and_inplace_swap():
    rng = np.random.default_rng(3)
    x1 = rng.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    q = _q(0.02, -5)
    b = _Builder()
    t1 = b.input(x1, q)
    c = b.const(rng.integers(-128, 128, (4,)).astype(np.int8))
    b.g.tensors[c].quant = q
    o_max = b.op("MAXIMUM", [c, t1], [(2, 3, 4)], "int8", q)[0]
    o_min = b.op("MINIMUM", [o_max, c], [(2, 3, 4)], "int8", q)[0]
    got = b.run([o_min])
    cv = b.g.tensors[c].data
    np.testing.assert_array_equal(got[0], np.minimum(np.maximum(cv, x1), cv))
    op_max = next(op for op in b.g.ops if op.type == "MAXIMUM")
    assert op_max.inputs[0] == t1 and op_max.inplace  # swapped: the runtime input goes first


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((v.astype(np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def _tdiv32(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """C division toward zero; x / 0 = 0 and INT32_MIN / -1 = INT32_MIN (Cortex-M SDIV)."""
    x, z = np.broadcast_arrays(x.astype(np.int64), z.astype(np.int64))
    q = np.abs(x) // np.where(z == 0, 1, np.abs(z))
    return _wrap32(np.where(z == 0, 0, np.where((x < 0) != (z < 0), -q, q)))


def test_int32_against_numpy():
    """int32 ADD/SUB/MUL/DIV/MAXIMUM/MINIMUM over the whole int32 range, 6-D broadcasting on
    both sides (every x1 element meets every x2 element), fused activations, wrap-around and
    the DIV edge cases; MAXIMUM with a constant input 0 is swapped to run in place."""
    sa, sb, sy = SHAPES_6D[0]
    rng = np.random.default_rng(5)
    x1 = rng.integers(I32_MIN, I32_MAX, sa, dtype=np.int64, endpoint=True).astype(np.int32)
    x1.flat[:8] = [I32_MIN, I32_MAX, -7, 7, 0, -1, 1, 6]
    x2 = np.int32([-1, 0, 2, -2, I32_MIN, 1]).reshape(sb)
    b = _Builder()
    t1, t2 = b.input(x1), b.input(x2)
    c = b.const(np.int32([5, -3, 0, 100, -100]))
    ops = [("ADD", [t1, t2], "NONE"), ("SUB", [t1, t2], "RELU6"), ("MUL", [t1, t2], "RELU"),
           ("MUL", [t2, t1], "NONE"), ("DIV", [t1, t2], "NONE"), ("DIV", [t1, t2], "RELU_N1_TO_1"),
           ("MAXIMUM", [t1, t2], None)]
    outs = [b.op(op, ins, [sy], "int32", **({"fused_activation_function": act} if act else {}))[0]
            for op, ins, act in ops]
    m = b.op("MAXIMUM", [c, t1], [sa], "int32")[0]
    outs.append(b.op("MINIMUM", [t2, m], [sy], "int32")[0])  # at most 8 outputs (AI_MAX_IO)
    got = b.run(outs)
    x64 = x1.astype(np.int64)
    w = [_wrap32(x64 + x2), np.clip(_wrap32(x64 - x2), 0, 6), np.maximum(_wrap32(x64 * x2), 0),
         _wrap32(x2.astype(np.int64) * x1), _tdiv32(x1, x2), np.clip(_tdiv32(x1, x2), -1, 1),
         np.maximum(x1, x2), np.minimum(x2, np.maximum(b.g.tensors[c].data, x1))]
    for k, (g_, w_) in enumerate(zip(got, w, strict=True)):
        np.testing.assert_array_equal(g_, np.broadcast_to(w_, g_.shape), err_msg=f"output {k}")
    op_max = b.g.ops[-2]
    assert op_max.kernel == "maximum_s32" and op_max.inputs[0] == t1  # swapped for in place
    assert {op.kernel for op in b.g.ops} == {"add_s32", "sub_s32", "mul_s32", "div_s32", "maximum_s32",
                                             "minimum_s32"}


def test_kernels_compile_warning_free_for_cortex_m4(tmp_path):
    srcs = [RUNTIME / "src" / f for f in ("ai_binary.c", "ai_cast.c")]
    for src in srcs:
        r = subprocess.run(["cc", *WARN, f"-I{RUNTIME / 'include'}", "-c", str(src), "-o",
                            str(tmp_path / (src.stem + ".o"))], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    for src in srcs:
        r = subprocess.run(["arm-none-eabi-gcc", *WARN, *M4, f"-I{RUNTIME / 'include'}", "-c", str(src), "-o",
                            str(tmp_path / (src.stem + ".m4.o"))], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def _cast_want(x: np.ndarray, dst: str) -> np.ndarray:
    dt = np.dtype("bool" if dst == "bool" else dst)
    if dst == "bool":
        return x != 0
    if x.dtype.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        return np.clip(np.trunc(x.astype(np.float64)), info.min, info.max).astype(dt)
    if x.dtype == np.bool_:
        return x.astype(dt)
    if dt.kind == "f":
        return x.astype(np.float64).astype(dt) if x.dtype == np.int64 else x.astype(dt)
    return x.astype(np.int64).astype(dt)  # wrap


def _cast_data(src: str, rng: np.random.Generator) -> np.ndarray:
    shape = (3, 7)
    if src == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if src == "float32":
        x = rng.normal(scale=300.0, size=shape).astype(np.float32)
        x.flat[:6] = [-0.75, 0.75, 3e9, -3e9, 65535.9, -1.5]
        return x
    info = np.iinfo(np.dtype(src))
    lo, hi = max(info.min, -(1 << 40)), min(info.max, 1 << 40)
    x = rng.integers(lo, hi, shape, dtype=np.int64)
    x.flat[:2] = [lo, hi]
    return x.astype(src)


@pytest.mark.parametrize("src", list(CAST_TYPES))
def test_cast_every_pair_against_numpy(src):
    rng = np.random.default_rng(4)
    x = _cast_data(src, rng)
    b = _Builder()
    t = b.input(x)
    dsts = [d for d in CAST_TYPES if d != src]
    outs = [b.op("CAST", [t], [x.shape], d)[0] for d in dsts]
    got = b.run(outs)
    for d, g in zip(dsts, got, strict=True):
        np.testing.assert_array_equal(g, _cast_want(x, d), err_msg=f"{src} -> {d}")


# ---------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------

def _refused(build) -> str:
    b = _Builder()
    b.g.outputs = build(b)
    with pytest.raises(UnsupportedModelError) as e:
        compile_graph(b.g)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("case,words", [
    ("max_mixed_quant", ("MAXIMUM", "one quantisation", "zero point")),
    ("min_mixed_quant", ("MINIMUM", "one quantisation")),
    ("sub_int16", ("SUB", "int16")),
    ("mul_per_axis", ("MUL", "per-axis")),
    ("mul_overflow", ("MUL", "overflow")),
    ("sub_scale", ("SUB", "too small")),
    ("sub_tanh", ("SUB", "TANH")),
    ("mul_no_broadcast", ("MUL", "does not broadcast")),
    ("sub_rank7", ("SUB", "7 dimensions")),
    ("cast_quantised", ("CAST", "quantised")),
    ("add_int32_relu", ("ADD", "int32", "fused RELU", "LiteRT")),
    ("mul_int32_quantised", ("MUL", "quantised int32")),
    ("sub_int32_int8", ("SUB", "int32, int8")),
    ("div_int16", ("DIV", "int16", "int32")),
    ("cast_float16", ("CAST", "float16")),
])
def test_unsupported_variants_are_refused(case, words):
    def build(b: _Builder) -> list[int]:
        x8 = np.zeros((1, 4, 4, 2), np.int8)
        qa, qb = _q(0.1, 0), _q(0.1, 3)
        if case in ("max_mixed_quant", "min_mixed_quant"):
            op = "MAXIMUM" if case.startswith("max") else "MINIMUM"
            return b.op(op, [b.input(x8, qa), b.input(x8, qb)], [x8.shape], "int8", qa)
        if case == "sub_int16":
            a = b.input(np.zeros((4,), np.int16), _q(0.1, 3))  # 16x8 needs zero point 0
            return b.op("SUB", [a, a], [(4,)], "int16", _q(0.1, 0))
        if case == "mul_per_axis":
            qc = Quant(np.float32([0.1, 0.2]), np.int64([0, 0]), axis=3)
            return b.op("MUL", [b.input(x8, qc), b.input(x8, qa)], [x8.shape], "int8", qa)
        if case == "mul_overflow":
            return b.op("MUL", [b.input(x8, _q(4.0, 0)), b.input(x8, _q(8.0, 0))], [x8.shape], "int8", _q(1e-3, 0))
        if case == "sub_scale":
            return b.op("SUB", [b.input(x8, _q(1.0, 0)), b.input(x8, qa)], [x8.shape], "int8", _q(1e-7, 0))
        if case == "sub_tanh":
            a = b.input(x8.astype(np.float32))
            return b.op("SUB", [a, a], [x8.shape], "float32", fused_activation_function="TANH")
        if case == "mul_no_broadcast":
            a, c = b.input(np.zeros((1, 4, 4, 2), np.float32)), b.input(np.zeros((1, 4, 3, 2), np.float32))
            return b.op("MUL", [a, c], [(1, 4, 4, 2)], "float32")
        if case == "sub_rank7":
            a = b.input(np.zeros((1, 2, 1, 2, 1, 2, 1), np.float32))
            return b.op("SUB", [a, a], [(1, 2, 1, 2, 1, 2, 1)], "float32")
        if case == "cast_quantised":
            return b.op("CAST", [b.input(x8, qa)], [x8.shape], "float32")
        if case in ("add_int32_relu", "mul_int32_quantised", "sub_int32_int8"):
            x32 = np.zeros((1, 4, 4, 2), np.int32)
            op = {"add": "ADD", "mul": "MUL", "sub": "SUB"}[case[:3]]
            a = b.input(x32, _q(0.5, 3) if case == "mul_int32_quantised" else None)
            other = b.input(x8, qa) if case == "sub_int32_int8" else b.input(x32)
            act = "RELU" if case == "add_int32_relu" else "NONE"
            return b.op(op, [a, other], [x8.shape], "int32", fused_activation_function=act)
        if case == "div_int16":
            a = b.input(np.ones((4,), np.int16))
            return b.op("DIV", [a, a], [(4,)], "int16")
        if case == "cast_float16":
            return b.op("CAST", [b.input(x8)], [x8.shape], "float16")
        raise AssertionError(case)

    msg = _refused(build)
    for w in words:
        assert w in msg, msg


def test_cli_refuses_maximum_with_mismatched_quantisation(tmp_path):
    import tflite

    src = FIXTURES / "bin_maxmin_bcast_int8.tflite"
    sg = tflite.Model.GetRootAs(src.read_bytes(), 0).Subgraphs(0)
    first_input = sg.Tensors(sg.Inputs(0)).Name().decode()
    bad = tmp_path / "maxmin_bad.tflite"
    _patch_scale(src, bad, first_input, 2.0)
    refused_by_generate(bad, tmp_path / "out", "MAXIMUM", "MINIMUM", "one quantisation", "tensor '")


def test_registry_lists_binary_ops():
    reg = registry()
    for op in ("SUB", "MUL", "MAXIMUM", "MINIMUM", "DIV", "CAST"):
        assert op in reg and reg[op].constraints, op


# ---- int8 ADD / SUB through per-input tables ---------------------------------------------------

def _tfl_srdhm(a: np.ndarray, b: int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul, transcribed from TFLite (gemmlowp): nudge by
    +-2^30 by the product's sign, then divide by 2^31 truncating toward zero."""
    ab = a.astype(object) * b
    out = [(v + (1 << 30 if v >= 0 else 1 - (1 << 30))) for v in ab.ravel()]
    out = [q if q >= 0 else -((-q) // (1 << 31)) for q in out]
    out = [v // (1 << 31) if v >= 0 else v for v in out]
    return np.array(out, dtype=np.int64).reshape(a.shape)


def _tfl_rdbypot(x: np.ndarray, e: int) -> np.ndarray:
    """RoundingDivideByPOT: round to nearest, ties away from zero."""
    mask = (1 << e) - 1
    rem, thr = x & mask, (mask >> 1) + (x < 0)
    return (x >> e) + (rem > thr)


def _tfl_mbqm_lt1(x: np.ndarray, m: int, shift: int) -> np.ndarray:
    """MultiplyByQuantizedMultiplierSmallerThanOneExp (shift <= 0)."""
    assert shift <= 0
    return _tfl_rdbypot(_tfl_srdhm(x, m), -shift)


def _tfl_add_s8(x1, x2, p, lo, hi, sub=False):
    """TFLite's int8 ADD (reference_integer_ops::AddElementwise) / SUB over broadcast inputs."""
    a = _tfl_mbqm_lt1((x1.astype(np.int64) + p["input1_offset"]) << p["left_shift"], p["input1_multiplier"],
                      p["input1_shift"])
    b = _tfl_mbqm_lt1((x2.astype(np.int64) + p["input2_offset"]) << p["left_shift"], p["input2_multiplier"],
                      p["input2_shift"])
    s = a - b if sub else a + b
    return np.clip(_tfl_mbqm_lt1(s, p["output_multiplier"], p["output_shift"]) + p["output_offset"], lo, hi)


# (scale1, zp1, scale2, zp2, out scale, out zp, activation): ResNet-like, equal scales, a tiny
# output scale (output shift -1: mode 2), extreme zero points and every fused activation
LUT_CASES = [(0.0394, -128, 0.1042, -10, 0.0509, -128, "RELU"), (0.05, 3, 0.05, 3, 0.05, 3, "NONE"),
             (0.5, 0, 0.75, 5, 2.0 ** -19 * 3, -7, "NONE"), (0.013, 127, 0.2, -128, 0.09, 100, "RELU6"),
             (1e-3, -50, 7e-4, 60, 1.5e-3, 0, "RELU_N1_TO_1")]


def _lut_cases_graph(cases, sub: bool):
    """Per case, input 1 holds the 256 int8 values down a column and input 2 along a row:
    the broadcast output covers every input pair."""
    x1 = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
    x2 = np.arange(-128, 128, dtype=np.int8)[::-1].copy().reshape(1, 256)
    b = _Builder()
    outs = []
    for s1, z1, s2, z2, so, zo, act in cases:
        t1, t2 = b.input(x1, _q(s1, z1)), b.input(x2, _q(s2, z2))
        outs.append(b.op("SUB" if sub else "ADD", [t1, t2], [(256, 256)], "int8", _q(so, zo),
                         fused_activation_function=act)[0])
    return b, x1, x2, outs


@pytest.mark.parametrize("tables, sub", [("int16", False), ("int16", True), ("int32", False), ("requant", True)],
                         ids=["int16-add", "int16-sub", "int32-add", "requant-sub"])
def test_int8_add_sub_tables_every_input_pair(tables, sub, monkeypatch):
    """ai_add_lut_s8 against a transcription of TFLite's int8 ADD/SUB over all 65536 input
    pairs, for each table mode: the folded single shift with int16 tables (solved exactly)
    or int32 tables (rounded, kept when exact), and with the folding disabled rq_fast or the
    general requantisation."""
    from stm32ai.passes.lower import binary
    from stm32ai.passes.lower.binary import add_params_s8
    from stm32ai.passes.quant import activation_range_quantized

    single = tables != "requant"
    orig = binary.lookup_tables_s8
    monkeypatch.setattr(binary, "lookup_tables_s8", lambda *a, **k: orig(*a, **k, single=single))
    if tables == "int32":
        monkeypatch.setattr(binary, "_fit_tables", lambda *a: None)
    modes = set()
    for group in (LUT_CASES[:2], LUT_CASES[2:]):  # at most 8 inputs and outputs per model
        b, x1, x2, outs = _lut_cases_graph(group, sub)
        got = b.run(outs)
        for case, op, y in zip(group, b.g.ops, got, strict=True):
            assert op.kernel == "add_lut_s8"
            modes.add((op.attrs["mode"], op.attrs["wide"]))
            s1, z1, s2, z2, so, zo, act = case
            p = (sub_params_s8 if sub else add_params_s8)(s1, z1, s2, z2, so, zo)
            lo, hi = activation_range_quantized(act, so, zo, "int8")
            np.testing.assert_array_equal(y, _tfl_add_s8(x1, x2, p, lo, hi, sub), err_msg=str(case))
    if tables == "int32":  # the rounded candidates; int16 ones still win where they are exact
        assert (0, 1) in modes and (1, 1) not in modes
    else:
        assert modes == {"int16": {(0, 0)}, "requant": {(1, 1), (2, 1)}}[tables]


def test_int8_add_tables_broadcast_and_small_tensors():
    """Broadcasting shapes through the tables (strided rows), and the per-element kernels
    below LUT_MIN_ELEMENTS; both against the TFLite transcription."""
    from stm32ai.passes.lower.binary import LUT_MIN_ELEMENTS, add_params_s8

    rng = np.random.default_rng(9)
    for sa, sb in [((2, 8, 8, 16), (16,)), ((1, 8, 1, 16), (1, 1, 8, 1)), ((4, 4), (4, 4))]:
        sy = np.broadcast_shapes(sa, sb)
        x1 = rng.integers(-128, 128, sa).astype(np.int8)
        x2 = rng.integers(-128, 128, sb).astype(np.int8)
        b = _Builder()
        t1, t2 = b.input(x1, _q(0.04, -3)), b.input(x2, _q(0.11, 9))
        out = b.op("ADD", [t1, t2], [sy], "int8", _q(0.07, -128), fused_activation_function="RELU")[0]
        got = b.run([out])[0]
        want_kernel = "add_lut_s8" if int(np.prod(sy)) >= LUT_MIN_ELEMENTS else "add_s8"
        assert {op.kernel for op in b.g.ops} <= {want_kernel}
        p = add_params_s8(0.04, -3, 0.11, 9, 0.07, -128)
        np.testing.assert_array_equal(got, np.broadcast_to(_tfl_add_s8(x1, x2, p, -128, 127), sy))
