"""ADD -> ai_add_s8 / ai_add_f32 (same number of elements) or ai_add_bcast_s8/f32; int32 ADD
-> ai_add_s32 (binary.py's kernel family and broadcasting walker, docs/kernels_binary.md).

int8 follows TFLite Micro's AddFunc bit for bit: both inputs are shifted left by 20 bits,
rescaled to twice the larger input scale with (multiplier, shift) pairs below one, summed,
then rescaled to the output scale and clamped (left_shift = 20, twice_max_input_scale,
QuantizeMultiplierSmallerThanOneExp for all three multipliers; all computed here).

Broadcasting (numpy/TFLite rules, up to 6 dimensions) uses per-input element strides,
0 along broadcast dimensions. Inputs whose shapes differ only by leading 1s (e.g. [1, 5]
+ [5]) are plain elementwise.

The output may overwrite input 0 (`inplace`): element i of the output is written after
element i of both inputs is read. When only input 1 could be overwritten (input 0 is a
constant or broadcast), the inputs are swapped; addition is symmetric (the int8 formula
too, with the per-input parameters swapped along).
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.fc import (
    act_range_f32,
    act_range_s8,
    check_activation,
    fused_activation,
    per_tensor_quant,
    scale_of,
    zp_of,
)
from stm32ai.passes.quant import quantize_multiplier

__all__ = ["add_params_s8", "broadcast_strides", "MAX_DIMS"]

MAX_DIMS = 6
LEFT_SHIFT_S8 = 20
LUT_MIN_ELEMENTS = 256  # int8 ADD through per-input tables (binary.lookup_tables_s8) from this size on


def broadcast_strides(in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> list[int] | None:
    """Element strides of `in_shape` over `out_shape` (both left-padded to MAX_DIMS), 0 along
    broadcast dimensions; None if not broadcastable."""
    if len(in_shape) > MAX_DIMS or len(out_shape) > MAX_DIMS:
        return None
    ins = [1] * (MAX_DIMS - len(in_shape)) + [int(d) for d in in_shape]
    outs = [1] * (MAX_DIMS - len(out_shape)) + [int(d) for d in out_shape]
    strides = [0] * MAX_DIMS
    step = 1
    for i in range(MAX_DIMS - 1, -1, -1):
        if ins[i] == outs[i]:
            strides[i] = step if ins[i] > 1 else 0
        elif ins[i] == 1:
            strides[i] = 0
        else:
            return None
        step *= ins[i]
    return strides


def _padded(shape: tuple[int, ...]) -> list[int]:
    return [1] * (MAX_DIMS - len(shape)) + [int(d) for d in shape]


def _dense(t: Tensor, out: Tensor) -> bool:
    """t covers out element for element (same size, broadcast-compatible)."""
    return t.size == out.size and broadcast_strides(t.shape, out.shape) is not None


def add_params_s8(s1: float, zp1: int, s2: float, zp2: int, so: float, zpo: int) -> dict[str, int]:
    """TFLite's CalculateOpDataAdd for int8 (left_shift 20)."""
    f32 = np.float32
    twice_max = 2.0 * float(max(f32(s1), f32(s2)))
    r1 = float(f32(s1)) / twice_max
    r2 = float(f32(s2)) / twice_max
    ro = twice_max / ((1 << LEFT_SHIFT_S8) * float(f32(so)))
    m1, sh1 = quantize_multiplier(r1)
    m2, sh2 = quantize_multiplier(r2)
    mo, sho = quantize_multiplier(ro)
    return {"input1_offset": -int(zp1), "input2_offset": -int(zp2), "left_shift": LEFT_SHIFT_S8,
            "input1_multiplier": m1, "input1_shift": sh1, "input2_multiplier": m2, "input2_shift": sh2,
            "output_multiplier": mo, "output_shift": sho, "output_offset": int(zpo)}


def _check_add(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return "expects two inputs and one output"
    a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    reason = check_activation(op)
    if reason:
        return reason
    for t in (a, b):
        if broadcast_strides(t.shape, y.shape) is None:
            return (f"input '{t.name}' {list(t.shape)} does not broadcast to the output "
                    f"{list(y.shape)} (at most {MAX_DIMS} dimensions)")
    if len(y.shape) > MAX_DIMS:
        return f"output has {len(y.shape)} dimensions, at most {MAX_DIMS} are supported"
    dtypes = {a.dtype, b.dtype, y.dtype}
    if dtypes == {"float32"}:
        return None
    if dtypes == {"int32"}:
        from stm32ai.passes.lower.binary import check_s32  # binary.py imports this module

        act = fused_activation(op)
        if act != "NONE":
            return (f"int32 ADD with fused {act} is not supported: TFLite Micro ignores the "
                    "activation where LiteRT applies it (the converter emits a separate MAXIMUM)")
        return check_s32(op, g)
    if dtypes != {"int8"}:
        return (f"{a.dtype} + {b.dtype} -> {y.dtype} is not supported (all int8, all int32 or all float32)")
    for t, what in ((a, "input"), (b, "input"), (y, "output")):
        r = per_tensor_quant(t, what)
        if r:
            return r
    for t in (a, b):
        if not -128 <= zp_of(t) <= 127:
            return f"input '{t.name}' zero point {zp_of(t)} is outside the int8 range"
    twice_max = 2.0 * float(max(np.float32(scale_of(a)), np.float32(scale_of(b))))
    ro = twice_max / ((1 << LEFT_SHIFT_S8) * scale_of(y))
    if not ro < 1.0:
        return (f"output scale {scale_of(y)} is too small for the input scales (TFLite's int8 ADD "
                "needs 2*max(input scales) < 2^20 * output scale)")
    return None


@register("ADD", "int8 (per-tensor), int32 (no fused activation) or float32, broadcasting up "
          "to 6-D; fused NONE/RELU/RELU6/RELU_N1_TO_1; may run in place", _check_add)
def lower_add(op: Op, g: Graph) -> None:
    y = g.tensors[op.outputs[0]]
    if y.dtype == "int32":
        from stm32ai.passes.lower.binary import lower_s32

        lower_s32(op, g, "add", True, True)
        return
    i1, i2 = op.inputs
    a, b = g.tensors[i1], g.tensors[i2]
    # prefer an input 0 the output can overwrite: dense and computed at run time
    if (a.is_const or not _dense(a, y)) and (not b.is_const and _dense(b, y)):
        i1, i2, a, b = i2, i1, b, a
    op.inputs = [i1, i2]
    op.macc = int(y.size)
    op.inplace = True
    flat = _dense(a, y) and _dense(b, y)

    if y.dtype == "float32":
        lo_f, hi_f = act_range_f32(op)
        attrs: dict = {"act_min": lo_f, "act_max": hi_f}
        suffix = "f32"
    else:
        attrs = add_params_s8(scale_of(a), zp_of(a), scale_of(b), zp_of(b), scale_of(y), zp_of(y))
        if y.size >= LUT_MIN_ELEMENTS:  # per-input tables, binary.py's broadcasting walker
            from stm32ai.passes.lower.binary import lower_lut_s8

            lower_lut_s8(op, g, attrs, subtract=False)
            return
        lo, hi = act_range_s8(op, y)
        attrs.update({"act_min": int(lo), "act_max": int(hi)})
        suffix = "s8"
    if flat:
        op.kernel = f"add_{suffix}"
        op.attrs = {"size": int(y.size), **attrs}
    else:
        op.kernel = f"add_bcast_{suffix}"
        s1 = broadcast_strides(a.shape, y.shape)
        s2 = broadcast_strides(b.shape, y.shape)
        assert s1 is not None and s2 is not None
        op.attrs = {"out_shape": _padded(y.shape), "in1_strides": s1, "in2_strides": s2, **attrs}
