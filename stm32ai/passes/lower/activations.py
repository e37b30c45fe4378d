"""Lowering of the elementwise activations: RELU, RELU6, RELU_N1_TO_1, LEAKY_RELU, PRELU,
LOGISTIC, TANH, HARD_SWISH (int8 and float32). See docs/kernels_activations.md.

int8 unary activations are a function of one int8 value, so the lowering evaluates the
reference kernel's exact integer arithmetic for all 256 inputs here, in Python, and the C
kernel is one table lookup per element (``lut8``), or a clamp (``clamp_s8``) when the table
is one. The emulation below follows the integer algorithms of TFLite Micro's reference
kernels step by step (the requantisation, gemmlowp's fixed-point logistic/tanh, the 16-bit
hard-swish), so the tables are bit-exact by construction and need no documented exception;
tests/test_ops_act.py checks them against TFLM over all 256 inputs.

PRELU has a second operand (alpha, broadcast), so its int8 kernel does the x < 0 branch's
arithmetic at run time with parameters computed here; the x >= 0 branch, a function of the
input alone, is a 256-entry table again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stm32ai.ir import Graph, Op, Quant, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import check_per_tensor as _per_tensor
from stm32ai.passes.quant import quantize_multiplier

# ---------------------------------------------------------------------------------------------
# Exact integer arithmetic of the reference kernels (scalar Python ints, C semantics)
# ---------------------------------------------------------------------------------------------

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def wrap32(x: int) -> int:
    """x as a two's-complement int32 (what C's wrapping arithmetic leaves)."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def wrap16(x: int) -> int:
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _srdhm(a: int, b: int, bits: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul on an int`bits` value."""
    lo = -(1 << (bits - 1))
    if a == b == lo:
        return -lo - 1
    ab = a * b
    nudge = (1 << (bits - 2)) if ab >= 0 else 1 - (1 << (bits - 2))
    return _wrap(bits)(_cdiv(ab + nudge, 1 << (bits - 1)))


def _wrap(bits: int) -> Callable[[int], int]:
    return wrap32 if bits == 32 else wrap16


def srdhm32(a: int, b: int) -> int:
    return _srdhm(a, b, 32)


def srdhm16(a: int, b: int) -> int:
    return _srdhm(a, b, 16)


def sdhm16(a: int, b: int) -> int:
    """TFLite's SaturatingDoublingHighMul on int16 (truncating, no rounding nudge)."""
    if a == b == -(1 << 15):
        return (1 << 15) - 1
    return wrap16(_cdiv(a * b, 1 << 15))


def rdbypot(x: int, exponent: int, bits: int = 32) -> int:
    """gemmlowp RoundingDivideByPOT on an int`bits` value (mask and threshold kept in
    that type, as the template does)."""
    wrap = _wrap(bits)
    mask = wrap((1 << exponent) - 1)
    remainder = x & mask
    threshold = wrap((mask >> 1) + (1 if x < 0 else 0))
    return wrap((x >> exponent) + (1 if remainder > threshold else 0))


def mbqm(x: int, multiplier: int, shift: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier, double rounding (the TFLM default)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    return rdbypot(srdhm32(wrap32(x * (1 << left)), multiplier), right)


def mbqm_single(x: int, multiplier: int, shift: int) -> int:
    """The TFLITE_SINGLE_ROUNDING variant: one rounding shift of the 64-bit product."""
    total = 31 - shift
    return wrap32((x * multiplier + (1 << (total - 1))) >> total)


def round_half_away(x: float) -> int:
    """C's round()/roundf() (ties away from zero) of a value already computed in its type."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def f32(x: float) -> float:
    return float(np.float32(x))


def f32_div(a: float, b: float) -> float:
    """a / b evaluated in float32, as C does on two float operands."""
    return float(np.float32(a) / np.float32(b))


def f32_mul(a: float, b: float) -> float:
    return float(np.float32(a) * np.float32(b))


# ---- gemmlowp fixed point (int32 raw values; `ib` integer bits) -------------------------------

def _fp_one(ib: int) -> int:
    return I32_MAX if ib == 0 else 1 << (31 - ib)


def _sat_mul_pot(x: int, exponent: int) -> int:
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> on int32."""
    if exponent == 0:
        return x
    if exponent < 0:
        return rdbypot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return I32_MAX
    if x < -threshold:
        return I32_MIN
    return wrap32(x << exponent)


def _rescale(x: int, src_ib: int, dst_ib: int) -> int:
    return _sat_mul_pot(x, src_ib - dst_ib)


def _exp_on_interval_m025_0(a: int) -> int:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out."""
    constant_term = 1895147668        # exp(-1/8)
    constant_1_over_3 = 715827883
    x = wrap32(a + (1 << 28))         # a + 1/8
    x2 = srdhm32(x, x)
    x3 = srdhm32(x2, x)
    x4 = srdhm32(x2, x2)
    x4_over_4 = _sat_mul_pot(x4, -2)
    poly = _sat_mul_pot(wrap32(srdhm32(wrap32(x4_over_4 + x3), constant_1_over_3) + x2), -1)
    return wrap32(constant_term + srdhm32(constant_term, wrap32(x + poly)))


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def _exp_on_negative_values(a: int, ib: int) -> int:
    """gemmlowp exp_on_negative_values for a Q(ib) input <= 0; Q0.31 result."""
    frac = 31 - ib
    one_quarter = 1 << (frac - 2)
    mask = one_quarter - 1
    a_mod_quarter_minus_one_quarter = wrap32((a & mask) - one_quarter)
    result = _exp_on_interval_m025_0(_rescale(a_mod_quarter_minus_one_quarter, ib, 0))
    remainder = wrap32(a_mod_quarter_minus_one_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if ib > exponent and remainder & (1 << (frac + exponent)):
            result = srdhm32(result, multiplier)
    if ib > 5 and a < -(1 << (36 - ib)):
        result = 0
    if a == 0:
        result = I32_MAX
    return result


def _newton_reciprocal_q2(half_denominator: int) -> int:
    """The Newton-Raphson iteration gemmlowp uses for 1/x, in Q2.29."""
    c48_17, cm32_17 = 1515870810, -1010580540
    x = wrap32(c48_17 + srdhm32(half_denominator, cm32_17))
    one_q2 = 1 << 29
    for _ in range(3):
        hdx = srdhm32(half_denominator, x)
        x = wrap32(x + _rescale(srdhm32(x, wrap32(one_q2 - hdx)), 4, 2))
    return x


def _rounding_half_sum(a: int, b: int) -> int:
    s = a + b
    return wrap32(_cdiv(s + (1 if s >= 0 else -1), 2))


def _one_over_one_plus_x(a: int) -> int:
    """1 / (1 + a) for a in (0, 1), Q0.31."""
    x = _newton_reciprocal_q2(_rounding_half_sum(a, I32_MAX))
    return _rescale(x, 1, 0)          # ExactMulByPot<-1> turns Q2 into Q1


def _one_minus_x_over_one_plus_x(a: int) -> int:
    """(1 - a) / (1 + a) for a in (0, 1), Q0.31."""
    x = _newton_reciprocal_q2(_rounding_half_sum(a, I32_MAX))
    return _rescale(wrap32(x - (1 << 29)), 2, 0)


def gemmlowp_logistic(a: int, ib: int) -> int:
    """gemmlowp::logistic of a Q(ib) raw value; Q0.31 result."""
    if a == 0:
        return 1 << 30
    pos = a > 0
    abs_a = a if pos else wrap32(-a)
    r = _one_over_one_plus_x(_exp_on_negative_values(wrap32(-abs_a), ib))
    return r if pos else wrap32(I32_MAX - r)


def gemmlowp_tanh(a: int, ib: int) -> int:
    """gemmlowp::tanh of a Q(ib) raw value; Q0.31 result."""
    if a == 0:
        return 0
    neg = a < 0
    n = a if neg else wrap32(-a)
    # neg_tanh_on_negative_values: ExactMulByPot<1> makes it a Q(ib+1) value
    t = _one_minus_x_over_one_plus_x(_exp_on_negative_values(n, ib + 1))
    return wrap32(-t) if neg else t


# ---------------------------------------------------------------------------------------------
# Reference tables: output value for every input value (int8: -128..127)
# ---------------------------------------------------------------------------------------------

INT8_VALUES = range(-128, 128)


def _scale(q: Quant) -> float:
    return float(q.scale[0])


def _zp(q: Quant) -> int:
    return int(q.zero_point[0])


def _clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v


def relu_table(qi: Quant, qo: Quant) -> list[int]:
    """TFLM RELU int8 (ReluQuantized): requantise, then clamp at the output's zero."""
    m, s = quantize_multiplier(_scale(qi) / _scale(qo))           # double / double
    lo = max(-128, _zp(qo) + round_half_away(f32_div(0.0, _scale(qo))))
    return [_clamp(_zp(qo) + mbqm(v - _zp(qi), m, s), lo, 127) for v in INT8_VALUES]


def relu6_table(qi: Quant) -> list[int]:
    """TFLM RELU6 int8 (Relu6Quantized): clamps the raw values to [zero, six] of the INPUT's
    quantisation and does not requantise (the output's parameters are not read)."""
    zero = _zp(qi)
    six = _clamp(round_half_away(f32_div(6.0, _scale(qi))) + _zp(qi), -128, 127)
    return [six if v > six else zero if v < zero else v for v in INT8_VALUES]


def relu_x_table_litert(qi: Quant, qo: Quant, act_min: float, act_max: float) -> list[int]:
    """LiteRT's QuantizedReluX (RELU_N1_TO_1 int8; TFLM has no such kernel, so LiteRT-ref is
    the verdict reference): requantise with a float32 ratio of the scales, clamp to the
    quantised [act_min, act_max]."""
    m, s = quantize_multiplier(f32_div(_scale(qi), _scale(qo)))
    lo = max(-128, _zp(qo) + round_half_away(f32_div(act_min, _scale(qo))))
    hi = min(127, _zp(qo) + round_half_away(f32_div(act_max, _scale(qo))))
    return [_clamp(_zp(qo) + mbqm(v - _zp(qi), m, s), lo, hi) for v in INT8_VALUES]


def leaky_relu_alpha(qi: Quant | float, qo: Quant | float, alpha: float) -> tuple[int, int, bool]:
    """The alpha branch of TFLM's LEAKY_RELU: (multiplier, shift, negate) such that a negative
    input x gives `-mbqm(x, m, s)` if negate else `mbqm(x, m, s)`. The real multiplier is the
    float32 expression in_scale * alpha / out_scale. For a negative alpha TFLM's results equal
    the negated product with |multiplier| (ties of x * alpha rounded toward zero), not
    mbqm with a negative multiplier (ties away from zero): measured against the pip TFLM on
    every int8 and int16 value for alpha -0.125, -0.25, -0.5, -1, -3 (tests/test_op_types.py,
    tests/test_ops_act.py)."""
    si = qi if isinstance(qi, float) else _scale(qi)
    so = qo if isinstance(qo, float) else _scale(qo)
    real = f32_div(f32_mul(si, alpha), so)
    m, s = quantize_multiplier(abs(real))
    return m, s, real < 0


def leaky_relu_table(qi: Quant, qo: Quant, alpha: float) -> list[int]:
    """TFLM LEAKY_RELU int8 (QuantizeLeakyRelu). Both multipliers are float32 expressions."""
    m_alpha, s_alpha, negate = leaky_relu_alpha(qi, qo, alpha)
    m_id, s_id = quantize_multiplier(f32_div(_scale(qi), _scale(qo)))
    out = []
    for v in INT8_VALUES:
        x = v - _zp(qi)
        if x >= 0:
            y = mbqm(x, m_id, s_id)
        else:
            y = mbqm(x, m_alpha, s_alpha)
            y = -y if negate else y
        out.append(_clamp(_zp(qo) + y, -128, 127))
    return out


def _tanh_logistic_input_params(qi: Quant) -> tuple[int, int, int]:
    """input_multiplier, input_left_shift and input_range_radius of TFLM's int8
    LOGISTIC/TANH prepare (4 integer bits)."""
    real = _scale(qi) * float(1 << 27)
    q, shift = math.frexp(real)
    mult = wrap32(round_half_away(q * (1 << 31)))
    radius = math.floor(((1 << 4) - 1) * (1 << 27) / (1 << shift)) if shift >= 0 else I32_MAX
    return mult, shift, radius


def _saturating_table(qi: Quant, fn: Callable[[int, int], int], shift: int, offset: int) -> list[int]:
    """TFLM's int8 LOGISTIC/TANH shape: inputs beyond the range radius saturate, the rest go
    through the 4-integer-bit gemmlowp function `fn`, rounded down by `shift` and offset."""
    mult, in_shift, radius = _tanh_logistic_input_params(qi)
    out = []
    for v in INT8_VALUES:
        x = v - _zp(qi)
        if x <= -radius:
            out.append(-128)
        elif x >= radius:
            out.append(127)
        else:
            r = rdbypot(fn(mbqm(x, mult, in_shift), 4), shift)
            out.append(_clamp(r + offset, -128, 127))
    return out


def logistic_table(qi: Quant) -> list[int]:
    """TFLM LOGISTIC int8 (reference_integer_ops::Logistic); output is 1/256, zp -128."""
    return _saturating_table(qi, gemmlowp_logistic, 23, -128)


def tanh_table(qi: Quant) -> list[int]:
    """TFLM TANH int8 (reference_integer_ops::Tanh); output is 1/128, zp 0."""
    return _saturating_table(qi, gemmlowp_tanh, 24, 0)


def _downscale_to_int16(m: int) -> int:
    """TFLite's DownScaleInt32ToInt16Multiplier."""
    if m >= I32_MAX - (1 << 15):
        return (1 << 15) - 1
    return (m + (1 << 15)) >> 16


def hard_swish_params(qi: Quant, qo: Quant) -> tuple[int, int, int, int]:
    """(output multiplier int16, its exponent, reluish multiplier int16, its exponent) as
    TFLM's HardSwishPrepare computes them (float32 ratios)."""
    hires = f32_mul(1.0 / 128.0, _scale(qi))
    reluish_scale = f32(3.0 / 32768.0)
    m_out, e_out = quantize_multiplier(f32_div(hires, _scale(qo)))
    m_rel, e_rel = quantize_multiplier(f32_div(hires, reluish_scale))
    return _downscale_to_int16(m_out), e_out, _downscale_to_int16(m_rel), e_rel


def _sat_left_shift16(v: int, amount: int) -> int:
    return _clamp(v * (1 << amount), -(1 << 15), (1 << 15) - 1)


def hard_swish_table(qi: Quant, qo: Quant) -> list[int]:
    """TFLM HARD_SWISH int8 (reference_ops::HardSwish<int8_t>), 16-bit fixed point."""
    m_out, e_out, m_rel, e_rel = hard_swish_params(qi, qo)
    out = []
    for v in INT8_VALUES:
        x = wrap16(v - _zp(qi))
        hires = wrap16(x * (1 << 7))
        preshift = srdhm16(hires, m_out)
        reluish = hires
        if e_rel > 0:
            reluish = _sat_left_shift16(reluish, e_rel - 1)
        reluish = srdhm16(reluish, m_rel)
        if e_rel > 0:
            reluish = _sat_left_shift16(reluish, 1)
        if e_rel < 0:
            reluish = rdbypot(reluish, -e_rel, 16)
        reluish = wrap16((reluish + (1 << 15)) >> 1)
        y = sdhm16(reluish, preshift)
        y = rdbypot(y, -e_out, 16)
        y = wrap16(y + _zp(qo))
        out.append(_clamp(y, -128, 127))
    return out


# ---------------------------------------------------------------------------------------------
# Emitting a table or a clamp
# ---------------------------------------------------------------------------------------------

def table_bytes(values: dict[int, int] | list[int], in_dtype: str) -> np.ndarray:
    """The 256-byte table of ``lut8``: entry k is the output's raw byte for the input whose
    raw byte is k (so int8 input v sits at index v & 0xFF)."""
    inputs = range(-128, 128) if in_dtype == "int8" else range(256)
    vals = values if isinstance(values, list) else [values[v] for v in inputs]
    table = np.zeros(256, np.uint8)
    for v, y in zip(inputs, vals, strict=True):
        table[v & 0xFF] = y & 0xFF
    return table


def lower_as_table(op: Op, g: Graph, values: list[int], in_dtype: str = "int8",
                   out_dtype: str = "int8", what: str = "table") -> None:
    """Lower an 8-bit -> 8-bit elementwise op given its output for every input value
    (ordered -128..127 for int8 input, 0..255 for uint8). A table that is a clamp of the
    input becomes ``clamp_s8`` (no table, SIMD on Cortex-M); anything else ``lut8``."""
    src = g.tensors[op.inputs[0]]
    n = src.size
    if in_dtype == out_dtype == "int8":
        lo, hi = min(values), max(values)
        if all(y == _clamp(v, lo, hi) for v, y in zip(INT8_VALUES, values, strict=True)):
            op.kernel = "clamp_s8"
            op.attrs = {"size": n, "lo": lo, "hi": hi}
            op.inputs = [op.inputs[0]]
            _elementwise(op, n)
            return
    name = f"{g.tensors[op.outputs[0]].name}/{what}"
    tid = g.add_const(name, table_bytes(values, in_dtype))
    op.kernel = "lut8"
    op.attrs = {"size": n}
    op.inputs = [op.inputs[0], tid]
    _elementwise(op, n)


def _elementwise(op: Op, n: int) -> None:
    op.macc = n
    op.inplace = True


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def _unary_check(op: Op, g: Graph, types: tuple[str, ...] = ("int8", "float32")) -> str | None:
    if len(op.outputs) != 1 or not op.inputs or op.inputs[0] < 0:
        return "expects one input and one output"
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if src.dtype != dst.dtype or src.dtype not in types:
        return (f"{src.dtype} -> {dst.dtype} is not supported "
                f"(input and output both {' or '.join(types)})")
    if src.size != dst.size:
        return f"input {list(src.shape)} and output {list(dst.shape)} differ in size"
    if src.dtype == "int8":
        return _per_tensor(src) or _per_tensor(dst)
    return None


def _check_logistic(op: Op, g: Graph) -> str | None:
    return _unary_check(op, g) or _check_fixed_output(op, g, 1.0 / 256.0, -128)


def _check_tanh(op: Op, g: Graph) -> str | None:
    return _unary_check(op, g) or _check_fixed_output(op, g, 1.0 / 128.0, 0)


def _check_fixed_output(op: Op, g: Graph, scale: float, zp: int) -> str | None:
    dst = g.tensors[op.outputs[0]]
    if dst.dtype != "int8":
        return None
    assert dst.quant is not None
    if _zp(dst.quant) != zp or _scale(dst.quant) != np.float32(scale):
        return (f"int8 output must be quantised with scale 1/{round(1 / scale)} and zero point {zp} "
                f"(the fixed-point kernel's format), got scale {_scale(dst.quant):g} zero point "
                f"{_zp(dst.quant)}")
    return None


def _check_hard_swish(op: Op, g: Graph) -> str | None:
    reason = _unary_check(op, g)
    if reason or g.tensors[op.inputs[0]].dtype != "int8":
        return reason
    qi, qo = g.tensors[op.inputs[0]].quant, g.tensors[op.outputs[0]].quant
    assert qi is not None and qo is not None
    if hard_swish_params(qi, qo)[1] > 0:
        return ("output scale is smaller than input scale / 128: the 16-bit fixed-point "
                "kernel cannot represent it (TFLite Micro refuses it too)")
    return None


# ---------------------------------------------------------------------------------------------
# Lowerings of the unary activations
# ---------------------------------------------------------------------------------------------

def _io(op: Op, g: Graph) -> tuple[Tensor, Tensor]:
    return g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]


def _quants(op: Op, g: Graph) -> tuple[Quant, Quant]:
    src, dst = _io(op, g)
    assert src.quant is not None and dst.quant is not None
    return src.quant, dst.quant


def _lower_unary_f32(op: Op, g: Graph, kernel: str, **attrs: float) -> None:
    n = g.tensors[op.inputs[0]].size
    op.kernel = kernel
    op.attrs = {"size": n, **attrs}
    op.inputs = [op.inputs[0]]
    _elementwise(op, n)


def _alpha(op: Op) -> float:
    return float(op.options.get("alpha", 0.2))


@dataclass(frozen=True)
class _Unary:
    """One unary activation: its float32 kernel (with attributes from the op) and its int8
    lookup table (from the input and output quantisation and the op)."""

    doc: str
    check: Callable[[Op, Graph], str | None]
    f32_kernel: str
    f32_attrs: Callable[[Op], dict[str, float]]
    table: Callable[[Quant, Quant, Op], list[int]]

    def lower(self, op: Op, g: Graph) -> None:
        if g.tensors[op.inputs[0]].dtype == "float32":
            _lower_unary_f32(op, g, self.f32_kernel, **self.f32_attrs(op))
            return
        lower_as_table(op, g, self.table(*_quants(op, g), op), what=op.type.lower())


def _clamp_attrs(lo: float, hi: float) -> Callable[[Op], dict[str, float]]:
    return lambda op: {"lo": lo, "hi": hi}


def _no_attrs(op: Op) -> dict[str, float]:
    return {}


_UNARY = {
    "RELU": _Unary("int8 per-tensor (requantising, as TFLM) or float32; in place", _unary_check,
                   "clamp_f32", _clamp_attrs(0.0, float("inf")), lambda qi, qo, op: relu_table(qi, qo)),
    "RELU6": _Unary("int8 per-tensor (clamp in the input's quantisation, as TFLM) or float32; in place",
                    _unary_check, "clamp_f32", _clamp_attrs(0.0, 6.0), lambda qi, qo, op: relu6_table(qi)),
    "RELU_N1_TO_1": _Unary("int8 per-tensor (requantising, as LiteRT: TFLM has no kernel) or float32; in place",
                           _unary_check, "clamp_f32", _clamp_attrs(-1.0, 1.0),
                           lambda qi, qo, op: relu_x_table_litert(qi, qo, -1.0, 1.0)),
    "LEAKY_RELU": _Unary("int8 per-tensor or float32, any alpha; in place", _unary_check, "leaky_relu_f32",
                         lambda op: {"alpha": _alpha(op)},
                         lambda qi, qo, op: leaky_relu_table(qi, qo, _alpha(op))),
    "LOGISTIC": _Unary("int8 per-tensor (output scale 1/256, zero point -128) or float32; in place",
                       _check_logistic, "logistic_f32", _no_attrs, lambda qi, qo, op: logistic_table(qi)),
    "TANH": _Unary("int8 per-tensor (output scale 1/128, zero point 0) or float32; in place", _check_tanh,
                   "tanh_f32", _no_attrs, lambda qi, qo, op: tanh_table(qi)),
    "HARD_SWISH": _Unary("int8 per-tensor (output scale >= input scale / 128) or float32; in place",
                         _check_hard_swish, "hard_swish_f32", _no_attrs,
                         lambda qi, qo, op: hard_swish_table(qi, qo)),
}
for _name, _u in _UNARY.items():
    register(_name, _u.doc, _u.check)(_u.lower)


# ---------------------------------------------------------------------------------------------
# PRELU: out = x >= 0 ? x : alpha * x, alpha broadcast against x
# ---------------------------------------------------------------------------------------------

PRELU_MAX_DIMS = 4


def prelu_layout(out_shape: tuple[int, ...], alpha_shape: tuple[int, ...]) -> tuple[list[int], list[int]] | None:
    """Output dims and alpha strides (0 where alpha is broadcast), both of length 4, after
    merging neighbouring dims that broadcast alike; None when alpha does not broadcast to
    the output or more than 4 dims remain."""
    rank = len(out_shape)
    if len(alpha_shape) > rank:
        if any(d != 1 for d in alpha_shape[:len(alpha_shape) - rank]):
            return None
        alpha_shape = alpha_shape[len(alpha_shape) - rank:]
    a = (1,) * (rank - len(alpha_shape)) + tuple(alpha_shape)
    dims: list[int] = []
    bcast: list[bool] = []
    for d, ad in zip(out_shape, a, strict=True):
        if ad not in (1, d):
            return None
        if d == 1:
            continue
        b = ad == 1
        if dims and bcast[-1] == b:
            dims[-1] *= d
        else:
            dims.append(d)
            bcast.append(b)
    if len(dims) > PRELU_MAX_DIMS:
        return None
    dims = [1] * (PRELU_MAX_DIMS - len(dims)) + dims
    bcast = [True] * (PRELU_MAX_DIMS - len(bcast)) + bcast
    strides = [0] * PRELU_MAX_DIMS
    step = 1
    for i in reversed(range(PRELU_MAX_DIMS)):
        if not bcast[i]:
            strides[i] = step
            step *= dims[i]
    return dims, strides


def _check_prelu(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return "expects two inputs (input, alpha) and one output"
    src, alpha, dst = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    if not (src.dtype == alpha.dtype == dst.dtype) or src.dtype not in ("int8", "float32"):
        return (f"input/alpha/output types {src.dtype}/{alpha.dtype}/{dst.dtype} are not supported "
                "(all int8 or all float32)")
    if tuple(src.shape) != tuple(dst.shape):
        return (f"input {list(src.shape)} must have the output's shape {list(dst.shape)} "
                "(only alpha may be broadcast)")
    if prelu_layout(dst.shape, alpha.shape) is None:
        return (f"alpha {list(alpha.shape)} does not broadcast to {list(dst.shape)} within "
                f"{PRELU_MAX_DIMS} dimensions")
    if src.dtype == "int8":
        return _per_tensor(src) or _per_tensor(alpha) or _per_tensor(dst)
    return None


@register("PRELU", "int8 per-tensor or float32; alpha constant or not, broadcast over any axes "
          "(<= 4 dims after merging); in place", _check_prelu)
def lower_prelu(op: Op, g: Graph) -> None:
    src, alpha, dst = (g.tensors[t] for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    layout = prelu_layout(dst.shape, alpha.shape)
    assert layout is not None
    dims, strides = layout
    if src.dtype == "float32":
        op.kernel = "prelu_f32"
        op.attrs = {"dims": dims, "alpha_strides": strides}
        op.inputs = [op.inputs[0], op.inputs[1]]
    else:
        assert src.quant is not None and alpha.quant is not None and dst.quant is not None
        si, sa, so = (float(q.scale[0]) for q in (src.quant, alpha.quant, dst.quant))
        m_neg, s_neg = quantize_multiplier(si * sa / so)           # double arithmetic, as TFLM
        pos = table_bytes(prelu_pos_values(src.quant, dst.quant), "int8")
        table = g.add_const(f"{dst.name}/prelu_pos", pos)
        op.kernel = "prelu_s8"
        op.attrs = {
            "dims": dims, "alpha_strides": strides,
            "input_offset": -_zp(src.quant), "alpha_offset": -_zp(alpha.quant),
            "output_offset": _zp(dst.quant), "mult_neg": m_neg, "shift_neg": s_neg,
        }
        op.inputs = [op.inputs[0], op.inputs[1], table]
    _elementwise(op, dst.size)


def prelu_pos_values(qi: Quant, qo: Quant) -> list[int]:
    """TFLM PRELU's x >= 0 branch for every int8 input: clamp(requant(x - zp_in) + zp_out),
    the multiplier in_scale / out_scale in double. (Entries with x < 0 are never read.)"""
    m, s = quantize_multiplier(_scale(qi) / _scale(qo))
    return [_clamp(mbqm(max(v - _zp(qi), 0), m, s) + _zp(qo), -128, 127) for v in INT8_VALUES]


def prelu_reference_s8(x: np.ndarray, alpha: np.ndarray, qi: Quant, qa: Quant, qo: Quant) -> np.ndarray:
    """numpy model of TFLM's int8 PRELU (BroadcastPrelu4DSlow), for tests."""
    m_pos, s_pos = quantize_multiplier(_scale(qi) / _scale(qo))
    m_neg, s_neg = quantize_multiplier(_scale(qi) * _scale(qa) / _scale(qo))
    aa = np.broadcast_to(alpha, x.shape).astype(np.int64) - _zp(qa)
    out = np.empty(x.shape, np.int64)
    for idx in np.ndindex(x.shape):
        v = int(x[idx]) - _zp(qi)
        y = mbqm(v, m_pos, s_pos) if v >= 0 else mbqm(v * int(aa[idx]), m_neg, s_neg)
        out[idx] = _clamp(y + _zp(qo), -128, 127)
    return out.astype(np.int8)
