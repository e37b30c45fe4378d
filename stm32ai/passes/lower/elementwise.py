"""Elementwise math: ABS, NEG, CEIL, FLOOR, ROUND, SQRT, RSQRT, EXP, LOG, SIN, COS, SQUARE, ELU,
SQUARED_DIFFERENCE, FLOOR_MOD, POW, ADD_N, ZEROS_LIKE, FILL (docs/kernels_elementwise.md).

Types follow TFLite Micro's kernels (elementwise.cc, exp.cc, neg.cc, ceil/floor/round.cc,
elu.cc, squared_difference.cc, floor_mod.cc, add_n.cc, zeros_like.cc, fill.cc): most are float32 only;
ABS also int8 and int16, RSQRT also int8 and int16, ELU also int8, SQUARED_DIFFERENCE also int32/int8/int16.
POW is LiteRT's (TFLite Micro has no kernel), float32; so are int8 EXP, LOG and SQRT (the
converter's full-integer quantisation makes them int8; TFLite Micro refuses such models, LiteRT-ref
runs them: LUTPopulate tables for EXP and LOG, a per-element float computation for SQRT).

int8 unary ops are a function of one int8 value: the table of all 256 outputs is computed here
with TFLite Micro's own arithmetic and run by ``lut8`` (activations.py). For ELU this IS what
TFLite Micro does (its Prepare fills a 256-entry table in float); for ABS and RSQRT TFLite
Micro computes per element with integer arithmetic that depends on nothing but the element,
so the table holds exactly those results (tests/test_ops_elementwise.py checks all 256 inputs
against TFLite Micro).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.activations import (
    I32_MAX,
    INT8_VALUES,
    _sat_mul_pot,
    lower_as_table,
    rdbypot,
    srdhm32,
    wrap32,
)
from stm32ai.passes.lower.binary import check_s32, loop_attrs
from stm32ai.passes.lower.common import broadcast_operands, scale_of, zp_of
from stm32ai.passes.quant import multiply_by_quantized_multiplier as mbqm
from stm32ai.passes.quant import quantize_multiplier

F32 = np.float32


# ---------------------------------------------------------------------------------------------
# Checks shared by the family
# ---------------------------------------------------------------------------------------------

def check_quant(t: Tensor, zp_range: tuple[int, int]) -> str | None:
    """Per-tensor quantisation with a positive finite scale and a zero point in range."""
    q = t.quant
    if q is None or q.scale.size == 0:
        return f"tensor '{t.name}' ({t.dtype}) has no quantisation parameters"
    if q.per_channel or q.scale.size != 1:
        return f"per-channel quantisation of '{t.name}' is not supported (per-tensor only)"
    s = float(F32(q.scale[0]))
    if not (math.isfinite(s) and s > 0):
        return f"tensor '{t.name}' has scale {s}: a positive finite scale is required"
    if not zp_range[0] <= zp_of(t) <= zp_range[1]:
        return f"tensor '{t.name}' has zero point {zp_of(t)}, outside [{zp_range[0]}, {zp_range[1]}]"
    return None


ZP_S8 = (-128, 127)
ZP_0 = (0, 0)


def _unary_io(op: Op, g: Graph) -> tuple[Tensor, Tensor] | str:
    if len(op.inputs) != 1 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return "expects one input and one output"
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if x.dtype != y.dtype:
        return f"input {x.dtype} and output {y.dtype} differ"
    if x.size != y.size:
        return f"input {list(x.shape)} and output {list(y.shape)} differ in size"
    return x, y


def _sf(t: Tensor) -> float:
    return float(F32(scale_of(t)))


# ---------------------------------------------------------------------------------------------
# int8 tables, TFLite Micro's arithmetic
# ---------------------------------------------------------------------------------------------

def _clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v


def abs_table(zi: int, si: float, zo: int, so: float, lo: int = -128, hi: int = 127,
              values: range = INT8_VALUES) -> list[int]:
    """TFLM AbsEvalQuantized: |x - zp_in|, requantised when the scales differ (as float32)."""
    if F32(si) == F32(so):
        return [_clamp(abs(v - zi) + zo, lo, hi) for v in values]
    m, s = quantize_multiplier(float(F32(si)) / float(F32(so)))
    return [_clamp(mbqm(abs(v - zi), m, s) + zo, lo, hi) for v in values]


def inv_sqrt_multiplier_exp(x: int, reverse_shift: int) -> tuple[int, int]:
    """TFLite's GetInvSqrtQuantizedMultiplierExp: 1/sqrt(x) as a Q31 multiplier and a shift,
    by 5 Newton-Raphson steps in gemmlowp Q3.28 fixed point."""
    if x <= 1:
        return I32_MAX, 0
    shift = 11
    while x >= (1 << 29):
        x //= 4
        shift += 1
    pairs = (32 - x.bit_length() - 1) // 2 - 1
    shift -= pairs
    x <<= 2 * pairs
    half_input = rdbypot(x >> 1, 1)
    half_three = (1 << 28) + (1 << 27)
    r = 1 << 28                                        # F3 one
    for _ in range(5):
        r3 = _sat_mul_pot(srdhm32(srdhm32(r, r), r), 6)   # F9 -> F3
        r = _sat_mul_pot(wrap32(srdhm32(half_three, r) - srdhm32(half_input, r3)), 3)  # F6 -> F3
    r = srdhm32(r, 1518500250)                          # * sqrt(2)/2 in Q0.31
    if shift < 0:
        r = wrap32(r << -shift)
        shift = 0
    return r, shift * reverse_shift


def rsqrt_table(zi: int, si: float, zo: int, so: float) -> list[int]:
    """TFLM RsqrtEvalQuantized for every int8 input. Inputs below the zero point (negative
    reals) make TFLite Micro fail the inference; they get 127 here, as 0 does."""
    m, s = quantize_multiplier(1.0 / (math.sqrt(float(F32(si))) * float(F32(so))))
    out = []
    for v in INT8_VALUES:
        value = v - zi
        if value <= 0:
            out.append(127)
            continue
        im, ish = inv_sqrt_multiplier_exp(value, -1)
        data = mbqm(1, im, ish + 20)
        out.append(_clamp(mbqm(data, m, s - 20) + zo, -128, 127))
    return out


def lut_populate(zi: int, si: float, zo: int, so: float, fn: Callable[[np.float32], np.float32]) -> list[int]:
    """TFLite's 8-bit LUTPopulate (TFLM elu.cc PopulateLookupTable is the same loop), in
    float32: clamp(int(round(fn(s_in * (v - zp_in)) * (1 / s_out)) + zp_out)), round half
    away from zero."""
    inv = F32(1) / F32(so)
    out = []
    with np.errstate(over="ignore", invalid="ignore"):
        for v in INT8_VALUES:
            r = F32(fn(F32(si) * F32(v - zi)) * inv)
            if not np.isfinite(r) or abs(float(r)) >= 2.0 ** 31:
                # C's float -> int32 conversion is undefined there (extreme scales, log(0),
                # log/sqrt of a negative): saturate; NaN gives -128, as x86's conversion
                # (INT32_MIN) then the clamp do in LiteRT-ref
                out.append(127 if r > 0 else -128)
                continue
            rounded = F32(math.floor(abs(float(r)) + 0.5) * (1 if r >= 0 else -1))
            out.append(_clamp(int(F32(rounded + F32(zo))), -128, 127))
    return out


def expf(x: np.float32) -> np.float32:
    """expf as the float32 rounding of the double exp (glibc's expf is correctly rounded in
    practice; the tests compare every table entry with the references)."""
    return F32(math.exp(float(x))) if x < 88.8 else F32(np.inf)


def elu_table(zi: int, si: float, zo: int, so: float) -> list[int]:
    """TFLM elu.cc: f(x) = x < 0 ? expf(x) - 1 : x."""
    return lut_populate(zi, si, zo, so, lambda x: F32(expf(x) - F32(1)) if x < 0 else x)


def exp_table(zi: int, si: float, zo: int, so: float) -> list[int]:
    """LiteRT's int8 EXP (exp.cc: LUTPopulate with expf); TFLite Micro has float32 only."""
    return lut_populate(zi, si, zo, so, expf)


def log_table(zi: int, si: float, zo: int, so: float) -> list[int]:
    """LiteRT's int8 LOG (elementwise.cc LogLUTPrepare: LUTPopulate of logf, with the output's
    lowest real value for inputs <= 0); TFLite Micro has float32 only."""
    out_min = F32(F32(-128 - zo) * F32(so))
    return lut_populate(zi, si, zo, so, lambda x: out_min if x <= 0 else F32(math.log(float(x))))


def sqrt_table(zi: int, si: float, zo: int, so: float) -> list[int]:
    """LiteRT's int8 SQRT (elementwise.cc SqrtEvalQuantized, per element but a function of the
    element alone): clamp(int(sqrtf(s_in * (v - zp_in)) / s_out) + zp_out), the quotient
    TRUNCATED toward zero (LiteRT casts, it does not round). A negative real makes LiteRT fail
    the inference: it gives sqrt(0) here. sqrtf is correctly rounded, as the double sqrt rounded
    to float32 is. TFLite Micro has float32 only."""
    out = []
    with np.errstate(over="ignore", invalid="ignore"):
        for v in INT8_VALUES:
            x = F32(si) * F32(v - zi)
            q = F32(F32(math.sqrt(float(x)) if x > 0 else 0.0) / F32(so))
            out.append(127 if not abs(float(q)) < 2.0 ** 31 else _clamp(int(q) + zo, -128, 127))
    return out


# ---------------------------------------------------------------------------------------------
# Unary ops
# ---------------------------------------------------------------------------------------------

# op -> (float32 kernel, int types TFLite Micro accepts besides float32)
_UNARY = {
    "ABS": ("abs", ("int8", "int16")), "NEG": ("neg", ()), "CEIL": ("ceil", ()),
    "FLOOR": ("floor", ()), "ROUND": ("round", ()), "SQRT": ("sqrt", ("int8",)),
    "RSQRT": ("rsqrt", ("int8", "int16")), "EXP": ("exp", ("int8",)), "LOG": ("log", ("int8",)), "SIN": ("sin", ()),
    "COS": ("cos", ()), "SQUARE": ("square", ()), "ELU": ("elu", ("int8",)),
}

_UNARY_DOC = {
    "ABS": "float32, int8 per-tensor (requantising, as TFLM), int16 (quantised with zero point 0, "
           "or raw); in place",
    "RSQRT": "float32, int8 per-tensor (TFLM's integer Newton-Raphson, as a 256-entry table), int16 "
             "(zero points 0, the same arithmetic per element); in place",
    "ELU": "float32, int8 per-tensor (TFLM's 256-entry table); in place",
    "ROUND": "float32 (to nearest, ties to even, as TFLite); in place",
    "EXP": "float32; int8 per-tensor (LiteRT's 256-entry table: TFLM has float32 only); in place",
    "LOG": "float32; int8 per-tensor (LiteRT's 256-entry table: TFLM has float32 only); in place",
    "SQRT": "float32; int8 per-tensor (LiteRT's arithmetic as a 256-entry table: TFLM has float32 only); "
            "in place",
}


def _check_unary(op: Op, g: Graph) -> str | None:
    io = _unary_io(op, g)
    if isinstance(io, str):
        return io
    x, y = io
    types = ("float32", *_UNARY[op.type][1])
    if x.dtype not in types:
        return f"{x.dtype} is not supported ({', '.join(types)}, as TFLite Micro)"
    if x.dtype == "int8":
        return check_quant(x, ZP_S8) or check_quant(y, ZP_S8)
    if x.dtype == "int16" and (op.type == "RSQRT" or x.quant is not None or y.quant is not None):
        reason = check_quant(x, ZP_0) or check_quant(y, ZP_0)
        if reason or op.type != "RSQRT":
            return reason
        if not -31 <= rsqrt_multiplier(x, y)[1] - 20 <= 30:
            return "input and output scales too far apart for TFLite's int16 RSQRT requantisation"
    return None


def rsqrt_multiplier(x: Tensor, y: Tensor) -> tuple[int, int]:
    """TFLM SetRsqrtOutputMultiplier: 1 / (sqrt(input scale) * output scale)."""
    return quantize_multiplier(1.0 / (math.sqrt(_sf(x)) * _sf(y)))


def _lower_unary(op: Op, g: Graph) -> None:
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    n = x.size
    op.macc = n
    op.inplace = True
    if x.dtype == "float32":
        op.kernel = f"{_UNARY[op.type][0]}_f32"
        op.attrs = {"size": n}
        return
    if x.dtype == "int16" and op.type == "RSQRT":
        m, s = rsqrt_multiplier(x, y)
        op.kernel = "rsqrt_s16"
        op.attrs = {"size": n, "multiplier": m, "shift": s}
        return
    if x.dtype == "int16":
        mode, m, s = 0, 0, 0
        if x.quant is not None:
            mode = 1 if F32(scale_of(x)) == F32(scale_of(y)) else 2
            if mode == 2:
                m, s = quantize_multiplier(_sf(x) / _sf(y))
        op.kernel = "abs_s16"
        op.attrs = {"size": n, "mode": mode, "multiplier": m, "shift": s}
        return
    args = (zp_of(x), _sf(x), zp_of(y), _sf(y))
    table = {"ABS": abs_table, "RSQRT": rsqrt_table, "ELU": elu_table, "EXP": exp_table, "LOG": log_table,
             "SQRT": sqrt_table}[op.type](*args)
    lower_as_table(op, g, table, what=op.type.lower())


for _name in _UNARY:
    register(_name, _UNARY_DOC.get(_name, "float32; in place"), _check_unary)(_lower_unary)


# ---------------------------------------------------------------------------------------------
# Binary ops: SQUARED_DIFFERENCE, FLOOR_MOD, POW
# ---------------------------------------------------------------------------------------------

def _binary_io(op: Op, g: Graph) -> tuple[Tensor, Tensor, Tensor] | str:
    io = broadcast_operands(op, g)
    if isinstance(io, str):
        return io
    a, b, y = io
    if not a.dtype == b.dtype == y.dtype:
        return f"{a.dtype}, {b.dtype} -> {y.dtype}: inputs and output must have one type"
    return a, b, y


_BINARY_TYPES = {"SQUARED_DIFFERENCE": ("float32", "int32", "int8", "int16"),
                 "FLOOR_MOD": ("float32", "int32"), "POW": ("float32",)}


def _check_binary(op: Op, g: Graph) -> str | None:
    io = _binary_io(op, g)
    if isinstance(io, str):
        return io
    a, b, y = io
    types = _BINARY_TYPES[op.type]
    if y.dtype not in types:
        return f"{y.dtype} is not supported ({', '.join(types)})"
    if y.dtype == "int32":
        return check_s32(op, g)
    if y.dtype in ("int8", "int16"):
        zr = ZP_S8 if y.dtype == "int8" else ZP_0
        return check_quant(a, zr) or check_quant(b, zr) or check_quant(y, zr)
    return None


def squared_difference_params(a: Tensor, b: Tensor, y: Tensor) -> dict[str, int]:
    """TFLM squared_difference.cc PrepareQuantized (left shift 7 for int8, 0 for int16)."""
    left_shift = 7 if y.dtype == "int8" else 0
    s1, s2, so = _sf(a), _sf(b), _sf(y)
    twice_max = 2.0 * max(s1, s2)
    m1, h1 = quantize_multiplier(s1 / twice_max)
    m2, h2 = quantize_multiplier(s2 / twice_max)
    mo, ho = quantize_multiplier(twice_max * twice_max / float(F32(F32(1 << (2 * left_shift)) * F32(so))))
    return {"input1_offset": -zp_of(a), "input2_offset": -zp_of(b), "left_shift": left_shift,
            "input1_multiplier": m1, "input1_shift": h1, "input2_multiplier": m2, "input2_shift": h2,
            "output_multiplier": mo, "output_shift": ho, "output_offset": zp_of(y)}


_SUFFIX = {"float32": "f32", "int32": "s32", "int8": "s8", "int16": "s16"}


def _lower_binary(op: Op, g: Graph) -> None:
    a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    op.kernel = f"{op.type.lower()}_{_SUFFIX[y.dtype]}"
    op.attrs = loop_attrs(a.shape, b.shape, y.shape)
    if op.type == "SQUARED_DIFFERENCE" and y.dtype in ("int8", "int16"):
        op.attrs.update(squared_difference_params(a, b, y))
    op.macc = int(y.size)


register("SQUARED_DIFFERENCE", "float32, int32 (wrapping), int8 / int16 per-tensor (TFLM's "
         "rescaled difference; int16 zero points 0), broadcasting up to 6-D", _check_binary)(_lower_binary)
register("FLOOR_MOD", "float32 (TFLM), int32 (LiteRT-ref), broadcasting up to 6-D",
         _check_binary)(_lower_binary)
register("POW", "float32 (LiteRT-ref: TFLM has no POW), broadcasting up to 6-D", _check_binary)(_lower_binary)


# ---------------------------------------------------------------------------------------------
# ADD_N
# ---------------------------------------------------------------------------------------------

ADD_N_MAX = 8        # the kernels' input slots (AI_ADD_N_MAX)
ADD_N_LEFT_SHIFT = 20


def _check_add_n(op: Op, g: Graph) -> str | None:
    if not 2 <= len(op.inputs) <= ADD_N_MAX or min(op.inputs) < 0 or len(op.outputs) != 1:
        return f"expects 2 to {ADD_N_MAX} inputs and one output"
    ins = [g.tensors[t] for t in op.inputs]
    y = g.tensors[op.outputs[0]]
    if any(t.dtype != y.dtype for t in ins) or y.dtype not in ("float32", "int8"):
        return f"{ins[0].dtype} -> {y.dtype} is not supported (all float32 or all int8, as TFLite Micro)"
    if any(tuple(t.shape) != tuple(y.shape) for t in ins):
        return "inputs and output must have one shape (ADD_N does not broadcast)"
    if y.dtype == "int8":
        reason = next((r for t in (*ins, y) if (r := check_quant(t, ZP_S8))), None)
        if reason:
            return reason
        if len({(_sf(t), zp_of(t)) for t in ins}) != 1:
            return "int8 inputs must share one quantisation (TFLite Micro requires it)"
        if not _add_n_output_real(ins[0], y) < 1.0:
            return "output scale too small for the input scale (TFLite's multiplier must stay below 1)"
    return None


def _add_n_output_real(x: Tensor, y: Tensor) -> float:
    return 2.0 * _sf(x) / ((1 << ADD_N_LEFT_SHIFT) * _sf(y))


@register("ADD_N", f"float32, int8 (inputs one quantisation); 2 to {ADD_N_MAX} same-shape inputs", _check_add_n)
def _lower_add_n(op: Op, g: Graph) -> None:
    x = g.tensors[op.inputs[0]]
    y = g.tensors[op.outputs[0]]
    n = len(op.inputs)
    op.attrs = {"size": int(y.size), "n": n}
    op.kernel = "add_n_f32" if y.dtype == "float32" else "add_n_s8"
    if y.dtype == "int8":
        mi, si = quantize_multiplier(0.5)  # x_scale / (2 * x_scale)
        mo, so = quantize_multiplier(_add_n_output_real(x, y))
        op.attrs.update({"input_offset": -zp_of(x), "left_shift": ADD_N_LEFT_SHIFT, "input_multiplier": mi,
                         "input_shift": si, "output_multiplier": mo, "output_shift": so,
                         "output_offset": zp_of(y)})
    op.inputs = list(op.inputs) + [-1] * (ADD_N_MAX - n)
    op.macc = int(y.size) * n


# ---------------------------------------------------------------------------------------------
# ZEROS_LIKE, FILL
# ---------------------------------------------------------------------------------------------

def _check_zeros_like(op: Op, g: Graph) -> str | None:
    io = _unary_io(op, g)
    if isinstance(io, str):
        return io
    if io[0].dtype not in ("float32", "int32", "int64", "int8"):
        return f"{io[0].dtype} is not supported (float32, int32, int64, int8, as TFLite Micro)"
    return None


@register("ZEROS_LIKE", "float32, int32, int64, int8 (raw zeros, as TFLM, not the zero point)",
          _check_zeros_like)
def _lower_zeros_like(op: Op, g: Graph) -> None:
    y = g.tensors[op.outputs[0]]
    op.kernel = "zeros_like"
    op.attrs = {"bytes": int(y.nbytes)}
    op.inputs = [op.inputs[0]]
    op.macc = 0


_FILL_TYPES = ("float32", "int32", "int8", "int16", "bool")


def _check_fill(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return "expects dims and value inputs and one output"
    dims, value = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    if value.size != 1:
        return f"value has {value.size} elements, a scalar is required"
    if value.dtype != y.dtype or y.dtype not in _FILL_TYPES:
        return f"{value.dtype} -> {y.dtype} is not supported (one of {', '.join(_FILL_TYPES)})"
    if not dims.is_const:
        return "dims is computed at run time: a constant output shape is required"
    want = [int(d) for d in np.asarray(dims.data).ravel()]
    if want != [int(d) for d in y.shape]:
        return f"dims {want} disagree with the output shape {list(y.shape)}"
    if y.dtype in ("int8", "int16") and value.quant is not None and y.quant is not None and (
            _sf(value) != _sf(y) or zp_of(value) != zp_of(y)):
        return "value and output are quantised differently (TFLite copies the raw value)"
    return None


@register("FILL", "float32, int32, int8, int16, bool; constant dims (a constant value is folded)",
          _check_fill)
def _lower_fill(op: Op, g: Graph) -> None:
    y = g.tensors[op.outputs[0]]
    op.kernel = "fill"
    op.attrs = {"count": int(y.size), "elem_bytes": int(y.nbytes // max(y.size, 1))}
    op.inputs = [op.inputs[1]]
    op.macc = 0
