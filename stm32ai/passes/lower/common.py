"""Helpers every lowering family shares (not a family: it registers no op).

Per-tensor quantisation (scale, zero point, the check that a tensor has exactly one of
each), the symmetric int8 filter quantisation of the weighted ops, the fused activation
and its clamp range, and the broadcasting strides of the kernels' MAX_DIMS-deep loops.
One definition each; the family modules import them from here.
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import MAX_DIMS, Graph, Op, Tensor
from stm32ai.passes.quant import activation_range_f32, activation_range_quantized

__all__ = ["FUSED_ACTIVATIONS", "MAX_DIMS", "act_range_f32", "act_range_s8", "broadcast_operands", "broadcast_strides",
           "check_activation", "check_filter_quant", "check_int8_io", "check_per_tensor", "covers",
           "fused_activation", "padded", "per_tensor_io", "per_tensor_quant", "scale_of",
           "weighted_operands", "zp_of"]

FUSED_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def fused_activation(op: Op) -> str:
    act = op.options.get("fused_activation_function", "NONE")
    return "NONE" if act is None else str(act)


def check_activation(op: Op) -> str | None:
    act = fused_activation(op)
    if act not in FUSED_ACTIVATIONS:
        return f"fused activation {act} is not supported (supported: {', '.join(FUSED_ACTIVATIONS)})"
    return None


def per_tensor_quant(t: Tensor, what: str) -> str | None:
    """Reason string unless `t` has one scale (> 0) and one zero point."""
    if t.quant is None or t.quant.scale.size == 0:
        return f"{what} '{t.name}' is {t.dtype} without quantisation parameters"
    if t.quant.scale.size != 1:
        return f"{what} '{t.name}' has per-axis quantisation, only per-tensor is supported"
    if not float(t.quant.scale[0]) > 0.0:
        return f"{what} '{t.name}' has a non-positive scale {float(t.quant.scale[0])}"
    return None


def check_per_tensor(t: Tensor) -> str | None:
    """Reason string if `t` has no quantisation or a per-channel one (8-bit unary ops)."""
    if t.quant is None:
        return f"tensor '{t.name}' ({t.dtype}) has no quantisation parameters"
    if t.quant.per_channel:
        return f"per-channel quantisation of '{t.name}' is not supported (per-tensor only)"
    return None


def per_tensor_io(x: Tensor, y: Tensor) -> str | None:
    """per_tensor_quant of an op's input `x` and output `y`, the first reason."""
    return per_tensor_quant(x, "input") or per_tensor_quant(y, "output")


def check_int8_io(x: Tensor, y: Tensor) -> str | None:
    """int8 -> int8 with per-tensor quantisation on both sides (after the float32 case)."""
    if x.dtype != "int8":
        return f"input type {x.dtype} is not supported (int8 or float32)"
    if y.dtype != "int8":
        return f"int8 input with {y.dtype} output is not supported (int8 -> int8 only)"
    return per_tensor_io(x, y)


def weighted_operands(op: Op, g: Graph, what: str) -> tuple[Tensor, Tensor, Tensor | None, Tensor] | str:
    """Input, constant filter (`what`: "filter", "weights tensor"), optional constant bias and
    output of a weighted op (input, filter, bias order), or the reason it is refused."""
    if len(op.inputs) < 2 or op.inputs[0] < 0 or op.inputs[1] < 0 or len(op.outputs) != 1:
        return f"expects an input, a {what}, an optional bias and one output"
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    bias = g.tensors[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    if not w.is_const:
        return f"{what} '{w.name}' is computed at run time; only constant weights are supported"
    if bias is not None and not bias.is_const:
        return f"bias '{bias.name}' is computed at run time; only a constant bias is supported"
    return x, w, bias, y


def check_filter_quant(w: Tensor, what: str, n_out: int, axis: int | None) -> str | None:
    """Reason unless the int8 filter `w` (`what` names it in the message) is quantised as
    TFLite's int8 weights are: one positive scale, or one per output channel (`n_out` of them,
    along `axis` unless None), and zero point 0 (symmetric)."""
    q = w.quant
    if q is None or q.scale.size == 0:
        return f"{what}: no quantisation parameters"
    if q.scale.size not in (1, n_out) or (q.scale.size > 1 and axis is not None and q.axis != axis):
        along = "" if axis is None else f" (axis {axis})"
        return (f"{what}: {q.scale.size} scales along axis {q.axis} for {n_out} output channels; "
                f"one scale, or one per output channel{along}, expected")
    if np.any(np.asarray(q.zero_point) != 0):
        return f"{what}: non-zero zero point; int8 filters are symmetric (zero point 0)"
    if np.any(~(np.asarray(q.scale) > 0)):
        return f"{what}: non-positive scale"
    return None


def scale_of(t: Tensor) -> float:
    assert t.quant is not None
    return float(t.quant.scale[0])


def zp_of(t: Tensor) -> int:
    assert t.quant is not None
    return int(t.quant.zero_point[0]) if t.quant.zero_point.size else 0


def act_range_s8(op: Op, out: Tensor) -> tuple[int, int]:
    return activation_range_quantized(fused_activation(op), scale_of(out), zp_of(out), "int8")


def act_range_f32(op: Op) -> tuple[float, float]:
    return activation_range_f32(fused_activation(op))


def padded(shape: tuple[int, ...]) -> list[int]:
    """`shape` left-padded with 1s to MAX_DIMS."""
    return [1] * (MAX_DIMS - len(shape)) + [int(d) for d in shape]


def broadcast_strides(in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> list[int] | None:
    """Element strides of `in_shape` over `out_shape` (both left-padded to MAX_DIMS), 0 along
    broadcast dimensions; None if not broadcastable."""
    if len(in_shape) > MAX_DIMS or len(out_shape) > MAX_DIMS:
        return None
    ins, outs = padded(in_shape), padded(out_shape)
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


def broadcast_operands(op: Op, g: Graph) -> tuple[Tensor, Tensor, Tensor] | str:
    """(a, b, y) of a two-input op whose inputs broadcast to its output (at most MAX_DIMS
    dimensions), or the reason; the types are the caller's to check."""
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return "expects two inputs and one output"
    a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    if len(y.shape) > MAX_DIMS:
        return f"output has {len(y.shape)} dimensions, at most {MAX_DIMS} are supported"
    for t in (a, b):
        if broadcast_strides(t.shape, y.shape) is None:
            return f"input '{t.name}' {list(t.shape)} does not broadcast to the output {list(y.shape)}"
    return a, b, y


def covers(t: Tensor, out: Tensor) -> bool:
    """t covers out element for element (same size, broadcast-compatible): out may overwrite t."""
    return t.size == out.size and broadcast_strides(t.shape, out.shape) is not None
