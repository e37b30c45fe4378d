"""ADD, SUB, MUL, MAXIMUM, MINIMUM, DIV -> ai_<op>_s8 / _f32 / _s32 (docs/kernels_binary.md).

Every kernel broadcasts with numpy/TFLite rules (up to MAX_DIMS = 6 dimensions): the output
is walked as 6 nested loops and each input advances by its own element strides (0 along
broadcast dimensions, from common.broadcast_strides). Adjacent dimensions that are contiguous
for both inputs are merged here, so a same-shape op is a single loop and [1,5,7,3] x [1]
is one loop with a 0 stride.

int8 parameters reproduce TFLite Micro's Prepare functions exactly:

* ADD (add_common.cc CalculateOpDataAdd): both inputs shifted left by 20 bits, rescaled to
  twice the larger input scale with multipliers below one (ratios in double), summed, then
  rescaled to the output scale; from LUT_MIN_ELEMENTS outputs on, through per-input tables
  (`lookup_tables_s8`, proved exact for all 65536 input pairs);
* SUB (sub_common.cc CalculateOpDataSub): ADD's scheme but with the ratios computed in
  float32, not double as ADD does (tables from LUT_MIN_ELEMENTS on, as ADD);
* MUL (mul_common.cc): one multiplier for s1 * s2 / so, the product taken in double;
* MAXIMUM/MINIMUM compare stored values, which is only the real max/min when both inputs
  and the output share one scale and zero point (the converter makes them so); otherwise
  the op is refused;
* DIV (div.cc CalculateOpDataDiv, reference_ops::DivElementwise): one multiplier for
  s1 / (s2 * so) taken in float32; the kernel takes the reciprocal of x2 - zp2 at run time
  (gemmlowp's Newton-Raphson, ai_fixedpoint.h: smaller than a 255-entry table) and normalises
  the numerator by its headroom. Where TFLite's final shift `div_exponent` exceeds 31
  (|quotient| < 0.5 LSB, undefined behaviour in TFLite) the kernel gives the output zero
  point; `div_undefined` finds those inputs for `validate` (docs/kernels_binary.md).

int32 (unquantised) is TFLite's
plain integer arithmetic: ADD/SUB/MUL wrap, DIV truncates toward zero, and the fused
activation clamps to CalculateActivationRange<int32_t> (NONE = the whole int32 range).
Where the references have no answer the kernel does what Cortex-M's SDIV does: x / 0 = 0
(both references fail the inference) and INT32_MIN / -1 = INT32_MIN (TFLite Micro traps on
x86, LiteRT gives INT32_MAX). TFLite Micro ignores the fused activation of an int32 ADD
where LiteRT applies it; the converter never fuses one there (an int32 RELU becomes
MAXIMUM), so such a hand-made model is refused rather than silently matching one reference.

The output may overwrite input 0 (`inplace`). For the commutative ops (ADD and MUL of every
type, MAXIMUM and MINIMUM of int8 and int32) inputs are swapped when only input 1 could be
overwritten (the int8 parameters are computed for the swapped order).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import (
    MAX_DIMS,
    act_range_f32,
    act_range_s8,
    broadcast_strides,
    check_activation,
    covers,
    fused_activation,
    padded,
    per_tensor_quant,
    scale_of,
    zp_of,
)
from stm32ai.passes.quant import multiply_by_quantized_multiplier as mbqm
from stm32ai.passes.quant import quantize_multiplier

__all__ = ["LUT_MIN_ELEMENTS", "activation_range_s32", "add_params_s8", "broadcast_strides", "check_s32",
           "div_exponent", "div_params_s8", "div_quant_params", "div_undefined", "lookup_tables_s8", "loop_attrs",
           "lower_lut_s8", "lower_s32", "mul_params_s8", "sub_params_s8", "unquantised"]

LEFT_SHIFT_S8 = 20
LUT_MIN_ELEMENTS = 256  # int8 ADD/SUB through per-input tables (lookup_tables_s8) from this size on

LUT_RAW = np.arange(256).astype(np.uint8).view(np.int8).astype(np.int64)  # table index u -> int8 value

# MUL: (x1 - zp1) * (x2 - zp2) needs 17 bits; a left shift beyond this overflows int32
_MUL_MAX_LEFT_SHIFT = 14

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def activation_range_s32(act: str) -> tuple[int, int]:
    """TFLite's CalculateActivationRange<int32_t>: NONE is the whole int32 range."""
    return {"NONE": (INT32_MIN, INT32_MAX), "RELU": (0, INT32_MAX), "RELU6": (0, 6),
            "RELU_N1_TO_1": (-1, 1)}[act]


def loop_attrs(a_shape: tuple[int, ...], b_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> dict[str, list[int]]:
    """out_shape / in1_strides / in2_strides of the kernel's 6 loops, contiguous dims merged."""
    s1 = broadcast_strides(a_shape, y_shape)
    s2 = broadcast_strides(b_shape, y_shape)
    assert s1 is not None and s2 is not None
    dims = [(n, x, z) for n, x, z in zip(padded(y_shape), s1, s2, strict=True) if n > 1]
    merged: list[tuple[int, int, int]] = []  # innermost first
    for n, x, z in reversed(dims):
        if merged:
            pn, px, pz = merged[-1]
            if x == px * pn and z == pz * pn:  # continues the inner dim for both inputs
                merged[-1] = (pn * n, px, pz)
                continue
        merged.append((n, x, z))
    merged += [(1, 0, 0)] * (MAX_DIMS - len(merged))
    merged.reverse()
    return {"out_shape": [m[0] for m in merged], "in1_strides": [m[1] for m in merged],
            "in2_strides": [m[2] for m in merged]}


def add_params_s8(s1: float, zp1: int, s2: float, zp2: int, so: float, zpo: int) -> dict[str, int]:
    """TFLite's CalculateOpDataAdd for int8 (left_shift 20; the ratios in double)."""
    f32 = np.float32
    twice_max = 2.0 * float(max(f32(s1), f32(s2)))
    r1 = float(f32(s1)) / twice_max
    r2 = float(f32(s2)) / twice_max
    ro = twice_max / ((1 << LEFT_SHIFT_S8) * float(f32(so)))
    return _addsub_params(r1, zp1, r2, zp2, ro, zpo)


def _addsub_params(r1: float, zp1: int, r2: float, zp2: int, ro: float, zpo: int) -> dict[str, int]:
    m1, sh1 = quantize_multiplier(r1)
    m2, sh2 = quantize_multiplier(r2)
    mo, sho = quantize_multiplier(ro)
    return {"input1_offset": -int(zp1), "input2_offset": -int(zp2), "left_shift": LEFT_SHIFT_S8,
            "input1_multiplier": m1, "input1_shift": sh1, "input2_multiplier": m2, "input2_shift": sh2,
            "output_multiplier": mo, "output_shift": sho, "output_offset": int(zpo)}


def sub_params_s8(s1: float, zp1: int, s2: float, zp2: int, so: float, zpo: int) -> dict[str, int]:
    """TFLite Micro's CalculateOpDataSub for int8: the ratios are float32 divisions."""
    f32 = np.float32
    twice_max = f32(2) * max(f32(s1), f32(s2))
    r1 = float(f32(s1) / twice_max)
    r2 = float(f32(s2) / twice_max)
    ro = float(twice_max / (f32(1 << LEFT_SHIFT_S8) * f32(so)))
    return _addsub_params(r1, zp1, r2, zp2, ro, zpo)


def _rescaled(offset: int, mult: int, shift: int) -> np.ndarray:
    """TFLite's per-input step of ADD/SUB for every int8 value, indexed by the byte (uint8):
    MultiplyByQuantizedMultiplierSmallerThanOneExp((x + offset) << 20, mult, shift)."""
    return mbqm((LUT_RAW + offset) << LEFT_SHIFT_S8, mult, shift)


def _single_rounding(r1: np.ndarray, r2: np.ndarray, mo: int, so: int, zpo: int, limit: int):
    """Candidate tables for y = (u1[x1] + u2[x2]) >> S: the rescaled values times the output
    multiplier, scaled to S fraction bits (as large as the storage allows) with the output
    zero point and the rounding constant folded into u1. Only candidates: the caller keeps
    one only if it reproduces TFLite's result for all 65536 input pairs."""
    e = max(-so, 0)
    p1, p2 = r1 * mo, r2 * mo  # exact (< 2^59)
    span = max(int(np.abs(p1).max()), int(np.abs(p2).max()), 1) / 2.0 ** (31 + e) + abs(zpo) + 2
    s_max = min(24, int(np.floor(np.log2(limit / span))))
    for s in range(s_max, max(s_max - 4, 0) - 1, -1):
        d = 31 + e - s
        if d < 1:
            continue
        half = (1 << 30) + (1 << (30 + e))  # rq_fast's rounding constant for a positive sum
        for k in (half, 1 << (30 + e), half + (1 << (d - 1))):
            u1 = ((p1 + k) >> d) + (zpo << s)
            u2 = p2 >> d
            if max(np.abs(u1).max(), np.abs(u2).max()) <= limit:
                yield u1, u2, s


def _fit_tables(want: np.ndarray, lo: int, hi: int, s: int, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Integer tables u1, u2 within +-limit with clamp((u1[i] + u2[j]) >> s) == want[i, j]
    for every pair, or None. Each pair bounds the sum, w*2^s <= u1 + u2 <= (w+1)*2^s - 1
    (one side only where the clamp saturates): difference constraints on (u1, -u2), solved
    exactly by Bellman-Ford shortest paths (infeasible = no fixpoint within 512 rounds)."""
    big = np.int64(1) << 50
    low = np.where(want > lo, want.astype(np.int64) << s, -big)
    high = np.where(want < hi, ((want.astype(np.int64) + 1) << s) - 1, big)
    u1 = np.zeros(256, np.int64)
    v = np.zeros(256, np.int64)  # -u2
    for _ in range(513):
        nu1 = np.minimum(u1, (v[None, :] + high).min(axis=1))
        nv = np.minimum(v, (nu1[:, None] - low).min(axis=0))
        if np.array_equal(nu1, u1) and np.array_equal(nv, v):
            break
        u1, v = nu1, nv
    else:
        return None
    u2 = -v
    c_lo, c_hi = max(-limit - int(u1.min()), int(u2.max()) - limit), min(limit - int(u1.max()), int(u2.min()) + limit)
    if c_lo > c_hi:
        return None
    return u1 + c_lo, u2 - c_lo


def lookup_tables_s8(p: dict[str, int], lo: int, hi: int, subtract: bool,
                     single: bool = True) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """Per-input tables for int8 ADD (or SUB, `subtract`) from TFLite's parameters `p`
    (add_params_s8 / sub_params_s8), the kernel attrs and the two tables.

    TFLite computes y = clamp(MBQM(r1[x1] +- r2[x2], mo, so) + zpo, lo, hi) with r the
    per-input rescaled values. Mode 1 tabulates r1 and +-r2 (int32) and keeps the one output
    requantisation (rq_fast, exact for so <= -2; mode 2 = ai_requant otherwise): exact by
    construction. Mode 0 also folds the output multiplier into the tables, y = clamp((u1 +
    u2) >> shift); it is used only when it gives TFLite's result for every one of the 65536
    input pairs (the proof is that exhaustive check), with int16 tables when they fit;
    `single=False` skips it (tests reach mode 1 that way).
    """
    r1 = _rescaled(p["input1_offset"], p["input1_multiplier"], p["input1_shift"])
    r2 = _rescaled(p["input2_offset"], p["input2_multiplier"], p["input2_shift"])
    if subtract:
        r2 = -r2
    mo, so, zpo = p["output_multiplier"], p["output_shift"], p["output_offset"]
    want = np.clip(mbqm(r1[:, None] + r2[None, :], mo, so) + zpo, lo, hi)
    attrs = {"mode": 1 if so <= -2 else 2, "shift": 0, "output_multiplier": mo, "output_shift": so,
             "output_offset": zpo, "act_min": lo, "act_max": hi, "wide": 1}
    if single:  # int16 tables solved exactly for the widest shift that fits (0.5 KiB each)
        for sh in range(7, -1, -1):
            fit = _fit_tables(want, lo, hi, sh, (1 << 15) - 1)
            if fit is not None and np.array_equal(np.clip((fit[0][:, None] + fit[1][None, :]) >> sh, lo, hi), want):
                attrs.update({"mode": 0, "shift": sh, "wide": 0})
                return attrs, fit[0].astype(np.int16), fit[1].astype(np.int16)
    for dtype, limit in ((np.int16, (1 << 15) - 1), (np.int32, (1 << 30) - 1)) if single else ():
        for u1, u2, sh in _single_rounding(r1, r2, mo, so, zpo, limit):
            got = np.clip((u1[:, None] + u2[None, :]) >> sh, lo, hi)
            if np.array_equal(got, want):
                attrs.update({"mode": 0, "shift": sh, "wide": int(dtype == np.int32)})
                return attrs, u1.astype(dtype), u2.astype(dtype)
    return attrs, r1.astype(np.int32), r2.astype(np.int32)


def lower_lut_s8(op: Op, g: Graph, params: dict[str, int], subtract: bool) -> None:
    """int8 ADD/SUB as ai_add_lut_s8 (inputs already ordered, op.inputs = [in1, in2])."""
    a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    lo, hi = act_range_s8(op, y)
    attrs, t1, t2 = lookup_tables_s8(params, int(lo), int(hi), subtract)
    base = y.name or f"op{op.index}"
    op.kernel = "add_lut_s8"
    op.inputs = [op.inputs[0], op.inputs[1], g.add_const(f"{base}/lut1", t1), g.add_const(f"{base}/lut2", t2)]
    op.macc = int(y.size)
    op.inplace = True
    op.attrs = {**loop_attrs(a.shape, b.shape, y.shape), **attrs}


def _mul_real(a: Tensor, b: Tensor, y: Tensor) -> float:
    f32 = np.float32
    return float(f32(scale_of(a))) * float(f32(scale_of(b))) / float(f32(scale_of(y)))


def mul_params_s8(a: Tensor, b: Tensor, y: Tensor) -> dict[str, int]:
    """TFLite Micro's CalculateOpDataMul for int8: double(s1) * double(s2) / double(so)."""
    m, sh = quantize_multiplier(_mul_real(a, b, y))
    return {"input1_offset": -zp_of(a), "input2_offset": -zp_of(b),
            "output_multiplier": m, "output_shift": sh, "output_offset": zp_of(y)}


def div_params_s8(a: Tensor, b: Tensor, y: Tensor) -> dict[str, int]:
    """TFLite Micro's CalculateOpDataDiv for int8 (div_quant_params on the tensors)."""
    return div_quant_params(scale_of(a), zp_of(a), scale_of(b), zp_of(b), scale_of(y), zp_of(y))


def div_quant_params(s1: float, zp1: int, s2: float, zp2: int, so: float, zpo: int) -> dict[str, int]:
    """CalculateOpDataDiv: one multiplier for s1 / (s2 * so), taken in float32."""
    m, sh = quantize_multiplier(_div_real(s1, s2, so))
    return {"input1_offset": -int(zp1), "input2_offset": -int(zp2),
            "output_multiplier": m, "output_shift": sh, "output_offset": int(zpo)}


def _div_real(s1: float, s2: float, so: float) -> float:
    f32 = np.float32
    with np.errstate(over="ignore"):
        return float(f32(s1) / (f32(s2) * f32(so)))


def _bit_length(u: np.ndarray) -> np.ndarray:
    """Bits of non-negative int64 values below 2^32."""
    return sum(((u >> k) > 0).astype(np.int64) for k in range(32))


def div_exponent(v1: np.ndarray, v2: np.ndarray, output_shift: int) -> np.ndarray:
    """TFLite's final right shift in int8 DIV, recip_shift + headroom - output_shift, for
    offset values v1 = x1 - zp1, v2 = x2 - zp2 != 0 (the sign of v2 moved to v1 first;
    headroom = CountLeadingSignBits, recip_shift = 31 - CountLeadingZeros(|v2|))."""
    v1 = np.where(v2 < 0, -v1, v1).astype(np.int64)
    v2 = np.abs(v2).astype(np.int64)
    headroom = 32 - _bit_length(np.where(v1 < 0, ~v1, v1)) - 1
    return (_bit_length(v2) - 1) + headroom - output_shift


def div_undefined(x1: np.ndarray, x2: np.ndarray, p: dict[str, int]) -> np.ndarray:
    """Where TFLite's int8 DIV (params `p`, div_params_s8) shifts by more than 31 bits, or
    divides by zero: undefined in TFLite; the kernel gives the output zero point there (the
    correctly rounded result) and saturates on a zero divisor."""
    v1 = np.asarray(x1, np.int64) + p["input1_offset"]
    v2 = np.asarray(x2, np.int64) + p["input2_offset"]
    v1, v2 = np.broadcast_arrays(v1, v2)
    e = div_exponent(v1, np.where(v2 == 0, 1, v2), p["output_shift"])
    return (v2 == 0) | (e > 31)


def _same_quant(ts: tuple[Tensor, ...]) -> bool:
    return len({(float(np.float32(scale_of(t))), zp_of(t)) for t in ts}) == 1


# ---- checks ---------------------------------------------------------------------------------

def unquantised(t: Tensor) -> bool:
    """No quantisation, or the identity (scale 1, zero point 0): stored values are the values."""
    q = t.quant
    if q is None or q.scale.size == 0:
        return True
    return bool((q.scale == 1.0).all()) and bool((q.zero_point == 0).all())


def check_s32(op: Op, g: Graph) -> str | None:
    """int32 operands: plain integers (TFLite's int32 arithmetic ignores quantisation)."""
    for t in (*(g.tensors[i] for i in op.inputs), g.tensors[op.outputs[0]]):
        if not unquantised(t):
            return (f"tensor '{t.name}' is a quantised int32 (scale {scale_of(t):.6g}, zero point "
                    f"{zp_of(t)}): int32 {op.type} is supported on plain integers only")
    return None


def _check_shapes(op: Op, g: Graph, fused: bool) -> str | None:
    """Two inputs broadcasting to one output (<= 6-D), a fused activation we know."""
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return "expects two inputs and one output"
    a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    if fused:
        reason = check_activation(op)
        if reason:
            return reason
    if len(y.shape) > MAX_DIMS:
        return f"output has {len(y.shape)} dimensions, at most {MAX_DIMS} are supported"
    for t in (a, b):
        if broadcast_strides(t.shape, y.shape) is None:
            return (f"input '{t.name}' {list(t.shape)} does not broadcast to the output "
                    f"{list(y.shape)} (at most {MAX_DIMS} dimensions)")
    return None


def _check_common(op: Op, g: Graph, int8_ok: bool, fused: bool) -> str | None:
    """Two inputs broadcasting to one output (<= 6-D); all float32, all int32 (unquantised),
    or all int8 per-tensor."""
    reason = _check_shapes(op, g, fused)
    if reason:
        return reason
    a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    dtypes = {a.dtype, b.dtype, y.dtype}
    if dtypes == {"float32"}:
        return None
    if dtypes == {"int32"}:
        return check_s32(op, g)
    if dtypes != {"int8"} or not int8_ok:
        types = "all float32 or all int32" if not int8_ok else "all int8, all int32 or all float32"
        return f"{a.dtype}, {b.dtype} -> {y.dtype} is not supported ({types})"
    for t, what in ((a, "input"), (b, "input"), (y, "output")):
        r = per_tensor_quant(t, what)
        if r:
            return r
    for t in (a, b, y):
        if not -128 <= zp_of(t) <= 127:
            return f"tensor '{t.name}' zero point {zp_of(t)} is outside the int8 range"
    return None


def _int8(op: Op, g: Graph) -> tuple[Tensor, Tensor, Tensor] | None:
    a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    return (a, b, y) if y.dtype == "int8" else None


def _addsub_ratio(a: Tensor, b: Tensor, y: Tensor, in_float32: bool) -> float:
    """2 * max(input scales) / (2^20 * output scale): ADD takes it in double, SUB in float32."""
    f32 = np.float32
    if in_float32:
        return float((f32(2) * max(f32(scale_of(a)), f32(scale_of(b)))) / (f32(1 << LEFT_SHIFT_S8) * f32(scale_of(y))))
    return 2.0 * float(max(f32(scale_of(a)), f32(scale_of(b)))) / ((1 << LEFT_SHIFT_S8) * scale_of(y))


def _check_addsub(op: Op, g: Graph) -> str | None:
    reason = _check_common(op, g, int8_ok=True, fused=True)
    if reason:
        return reason
    y = g.tensors[op.outputs[0]]
    if op.type == "ADD" and y.dtype == "int32" and fused_activation(op) != "NONE":
        return (f"int32 ADD with fused {fused_activation(op)} is not supported: TFLite Micro ignores the "
                "activation where LiteRT applies it (the converter emits a separate MAXIMUM)")
    if _int8(op, g) is None:
        return None
    a, b = (g.tensors[t] for t in op.inputs)
    if not _addsub_ratio(a, b, y, in_float32=op.type == "SUB") < 1.0:
        return (f"output scale {scale_of(y)} is too small for the input scales (TFLite's int8 {op.type} "
                "needs 2*max(input scales) < 2^20 * output scale)")
    return None


def _int8_checked(fused: bool, int8_check: Callable[[Op, Tensor, Tensor, Tensor], str | None]):
    """An op's check: _check_common, then for int8 `int8_check(op, in1, in2, out)`."""
    def check(op: Op, g: Graph) -> str | None:
        reason = _check_common(op, g, int8_ok=True, fused=fused)
        if reason or _int8(op, g) is None:
            return reason
        a, b, y = (g.tensors[t] for t in (*op.inputs, op.outputs[0]))
        return int8_check(op, a, b, y)
    return check


def _mul_int8(op: Op, a: Tensor, b: Tensor, y: Tensor) -> str | None:
    _, shift = quantize_multiplier(_mul_real(a, b, y))
    if shift > _MUL_MAX_LEFT_SHIFT:
        return (f"input scales {scale_of(a)} x {scale_of(b)} over output scale {scale_of(y)} is "
                f"2^{shift - 1} or more: the int8 product would overflow int32")
    return None


def _minmax_int8(op: Op, a: Tensor, b: Tensor, y: Tensor) -> str | None:
    if not _same_quant((a, b, y)):
        desc = ", ".join(f"'{t.name}' scale {scale_of(t):.6g} zero point {zp_of(t)}" for t in (a, b, y))
        return (f"int8 {op.type} compares stored values, so inputs and output need one "
                f"quantisation ({desc})")
    return None


def _div_int8(op: Op, a: Tensor, b: Tensor, y: Tensor) -> str | None:
    if not np.isfinite(_div_real(scale_of(a), scale_of(b), scale_of(y))):
        return f"input scale {scale_of(a)} over input scale {scale_of(b)} x output scale {scale_of(y)} is not finite"
    p = div_params_s8(a, b, y)
    v = np.arange(-128, 128, dtype=np.int64)
    v1 = v[:, None] + p["input1_offset"]
    v2 = v[None, :] + p["input2_offset"]
    e = div_exponent(*np.broadcast_arrays(v1, np.where(v2 == 0, 1, v2)), p["output_shift"])
    if int(e.min()) < 0:  # a left shift: the int32 quotient would overflow (TFLite: undefined)
        return (f"input scale {scale_of(a)} over input scale {scale_of(b)} x output scale {scale_of(y)} "
                f"is too large: the int8 quotient would overflow int32")
    return None


_check_mul = _int8_checked(True, _mul_int8)
_check_minmax_base = _int8_checked(False, _minmax_int8)


def _check_minmax(op: Op, g: Graph) -> str | None:
    """MAXIMUM/MINIMUM also take int16 and int64, plain or with one per-tensor quantisation
    shared by the inputs and the output (as int8): TFLM compares the stored values."""
    if len(op.inputs) == 2 and min(op.inputs) >= 0 and len(op.outputs) == 1:
        a, b, y = (g.tensors[t] for t in (*op.inputs, op.outputs[0]))
        if {a.dtype, b.dtype, y.dtype} in ({"int16"}, {"int64"}):
            reason = _check_shapes(op, g, fused=False)
            if reason:
                return reason
            if y.dtype == "int64" and all(unquantised(t) for t in (a, b, y)):
                return None
            for t, what in ((a, "input"), (b, "input"), (y, "output")):
                reason = per_tensor_quant(t, what)
                if reason:
                    return reason
            return _minmax_int8(op, a, b, y)
    return _check_minmax_base(op, g)
_check_div = _int8_checked(True, _div_int8)


# ---- lowering -------------------------------------------------------------------------------

def _lower(op: Op, g: Graph, name: str, swappable: bool, fused: bool, params_s8=None) -> None:
    y = g.tensors[op.outputs[0]]
    i1, i2 = op.inputs
    a, b = g.tensors[i1], g.tensors[i2]
    # prefer an input 0 the output can overwrite: dense and computed at run time
    if swappable and (a.is_const or not covers(a, y)) and (not b.is_const and covers(b, y)):
        i1, i2, a, b = i2, i1, b, a
    op.inputs = [i1, i2]
    op.macc = int(y.size)
    op.inplace = True
    attrs: dict = loop_attrs(a.shape, b.shape, y.shape)
    if y.dtype == "float32":
        op.kernel = f"{name}_f32"
        if fused:  # MAXIMUM/MINIMUM have no fused activation
            lo, hi = act_range_f32(op)
            attrs.update({"act_min": lo, "act_max": hi})
    elif y.dtype in ("int16", "int64"):  # MAXIMUM/MINIMUM only: stored values compared
        op.kernel = f"{name}_{'s16' if y.dtype == 'int16' else 's64'}"
    elif y.dtype == "int32":
        op.kernel = f"{name}_s32"
        if fused:
            lo32, hi32 = activation_range_s32(fused_activation(op))
            attrs.update({"act_min": lo32, "act_max": hi32})
    else:
        op.kernel = f"{name}_s8"
        if fused:
            lo8, hi8 = act_range_s8(op, y)
            attrs.update(params_s8(a, b, y))
            attrs.update({"act_min": int(lo8), "act_max": int(hi8)})
    op.attrs = attrs


def lower_s32(op: Op, g: Graph, name: str, swappable: bool, fused: bool) -> None:
    """int32 lowering of one of this module's ops (kept for callers outside the module)."""
    _lower(op, g, name, swappable, fused)


def _lower_addsub(op: Op, g: Graph, subtract: bool) -> None:
    make = sub_params_s8 if subtract else add_params_s8

    def params(a: Tensor, b: Tensor, y: Tensor) -> dict[str, int]:
        return make(scale_of(a), zp_of(a), scale_of(b), zp_of(b), scale_of(y), zp_of(y))
    a, b, y = (g.tensors[t] for t in (*op.inputs, op.outputs[0]))
    if y.dtype == "int8" and y.size >= LUT_MIN_ELEMENTS:
        if not subtract and (a.is_const or not covers(a, y)) and (not b.is_const and covers(b, y)):
            op.inputs = [op.inputs[1], op.inputs[0]]  # the output may overwrite input 0
            a, b = b, a
        lower_lut_s8(op, g, params(a, b, y), subtract=subtract)
        return
    _lower(op, g, "sub" if subtract else "add", not subtract, True, params)


@register("ADD", "int8 (per-tensor), int32 (no fused activation) or float32, broadcasting up "
          "to 6-D; fused NONE/RELU/RELU6/RELU_N1_TO_1; may run in place", _check_addsub)
def lower_add(op: Op, g: Graph) -> None:
    _lower_addsub(op, g, subtract=False)


@register("SUB", "int8 (per-tensor), int32 or float32, broadcasting up to 6-D; fused "
          "NONE/RELU/RELU6/RELU_N1_TO_1; may run in place", _check_addsub)
def lower_sub(op: Op, g: Graph) -> None:
    _lower_addsub(op, g, subtract=True)


@register("MUL", "int8 (per-tensor), int32 or float32, broadcasting up to 6-D; fused "
          "NONE/RELU/RELU6/RELU_N1_TO_1; may run in place", _check_mul)
def lower_mul(op: Op, g: Graph) -> None:
    _lower(op, g, "mul", True, True, mul_params_s8)


def _lower_minmax(op: Op, g: Graph) -> None:
    name = op.type.lower()  # "maximum" / "minimum": commutative, swappable except in float
    _lower(op, g, name, g.tensors[op.outputs[0]].dtype != "float32", False)


for _op_type in ("MAXIMUM", "MINIMUM"):
    register(_op_type, "int8 or int16 (inputs and output share one per-tensor quantisation), int32, "
             "int64 or float32, broadcasting up to 6-D; may run in place", _check_minmax)(_lower_minmax)


@register("DIV", "int8 (per-tensor; TFLite's arithmetic, the output zero point where TFLite's "
          "shift is undefined), float32 or int32 (truncating), broadcasting up to 6-D; fused "
          "NONE/RELU/RELU6/RELU_N1_TO_1; may run in place", _check_div)
def lower_div(op: Op, g: Graph) -> None:
    _lower(op, g, "div", False, True, div_params_s8)
