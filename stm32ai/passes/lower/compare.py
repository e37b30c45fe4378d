"""EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL, LOGICAL_AND, LOGICAL_OR,
LOGICAL_NOT, SELECT_V2 (docs/kernels_compare.md).

Types are TFLite Micro's (comparisons.cc, logical.cc, elementwise.cc, select.cc): EQUAL and
NOT_EQUAL take bool, float32, int32, int64 and int8; the ordering comparisons float32, int32,
int64 and int8; logical ops bool; SELECT_V2 float32, int8 and int16 (plus int32 and bool,
LiteRT's). int16 comparisons are refused: TFLite Micro's GREATER accepts int16 but its Prepare
leaves the int16 rescaling parameters at zero (every GREATER is false), LiteRT compares the raw
int16 values whatever their quantisation, and the converter emits none (docs/kernels_compare.md).
Quantised comparisons rescale each input as TFLite's ComparisonsPrepare does:
((x - zp) << 8) times the input scale as a Q31 multiplier with a right shift (scales must be
below 1, as TFLite's QuantizeMultiplierSmallerThanOneExp asserts).
"""

from __future__ import annotations

import math

from stm32ai.ir import MAX_DIMS, Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.binary import check_s32, loop_attrs
from stm32ai.passes.lower.common import broadcast_strides, padded, scale_of, zp_of
from stm32ai.passes.lower.elementwise import ZP_S8, check_quant
from stm32ai.passes.quant import quantize_multiplier

COMPARISONS = ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")
_EQUALITY_TYPES = ("bool", "float32", "int32", "int64", "int8")
_ORDER_TYPES = ("float32", "int32", "int64", "int8")
_SUFFIX = {"float32": "f32", "int32": "s32", "int64": "s64", "int8": "s8", "int16": "s16", "bool": "b"}
LEFT_SHIFT = 8


def _broadcast_check(ins: list[Tensor], y: Tensor) -> str | None:
    if len(y.shape) > MAX_DIMS:
        return f"output has {len(y.shape)} dimensions, at most {MAX_DIMS} are supported"
    for t in ins:
        if broadcast_strides(t.shape, y.shape) is None:
            return f"input '{t.name}' {list(t.shape)} does not broadcast to the output {list(y.shape)}"
    return None


def _check_cmp_quant(t: Tensor) -> str | None:
    reason = check_quant(t, ZP_S8)
    if reason:
        return reason
    if not scale_of(t) < 1.0:
        return (f"tensor '{t.name}' has scale {scale_of(t):g}: TFLite's quantised comparison "
                "needs scales below 1")
    return None


def _check_compare(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return "expects two inputs and one output"
    a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    if y.dtype != "bool":
        return f"output is {y.dtype}, bool is required"
    types = _EQUALITY_TYPES if op.type in ("EQUAL", "NOT_EQUAL") else _ORDER_TYPES
    if a.dtype == "int16":
        return ("int16 is not supported: TFLite Micro's int16 comparison runs with zero rescaling "
                "parameters and LiteRT compares raw values, so no reference defines it")
    if a.dtype != b.dtype or a.dtype not in types:
        return f"inputs {a.dtype}, {b.dtype} are not supported (both one of {', '.join(types)}, as TFLite Micro)"
    reason = _broadcast_check([a, b], y)
    if reason:
        return reason
    if a.dtype == "int8":
        return _check_cmp_quant(a) or _check_cmp_quant(b)
    if a.dtype == "int32":
        return check_s32(op, g) if a.quant is not None or b.quant is not None else None
    return None


def compare_params(a: Tensor, b: Tensor) -> dict[str, int]:
    """TFLM ComparisonsPrepare: offsets -zp, left shift 8, each scale a Q31 multiplier."""
    m1, h1 = quantize_multiplier(float(a.quant.scale[0]))  # type: ignore[union-attr]
    m2, h2 = quantize_multiplier(float(b.quant.scale[0]))  # type: ignore[union-attr]
    return {"left_shift": LEFT_SHIFT, "input1_offset": -zp_of(a), "input1_multiplier": m1,
            "input1_shift": h1, "input2_offset": -zp_of(b), "input2_multiplier": m2, "input2_shift": h2}


def _lower_compare(op: Op, g: Graph) -> None:
    a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    op.kernel = f"{op.type.lower()}_{_SUFFIX[a.dtype]}"
    op.attrs = loop_attrs(a.shape, b.shape, y.shape)
    if a.dtype == "int8":
        op.attrs.update(compare_params(a, b))
    op.macc = int(y.size)


for _name in COMPARISONS:
    register(_name, ("bool, float32, int32, int64, int8 (rescaled as TFLM)" if _name in ("EQUAL", "NOT_EQUAL")
                     else "float32, int32, int64, int8 (rescaled as TFLM)")
             + "; bool output, broadcasting up to 6-D", _check_compare)(_lower_compare)


def _check_logical(op: Op, g: Graph) -> str | None:
    n_in = 1 if op.type == "LOGICAL_NOT" else 2
    if len(op.inputs) != n_in or min(op.inputs) < 0 or len(op.outputs) != 1:
        return f"expects {n_in} input(s) and one output"
    ins = [g.tensors[t] for t in op.inputs]
    y = g.tensors[op.outputs[0]]
    if any(t.dtype != "bool" for t in (*ins, y)):
        return "inputs and output must be bool"
    if n_in == 1:
        return None if ins[0].size == y.size else "input and output differ in size"
    return _broadcast_check(ins, y)


def _lower_logical(op: Op, g: Graph) -> None:
    y = g.tensors[op.outputs[0]]
    op.kernel = op.type.lower()
    op.macc = int(y.size)
    if op.type == "LOGICAL_NOT":
        op.attrs = {"size": int(y.size)}
        op.inplace = True
        return
    a, b = (g.tensors[t] for t in op.inputs)
    op.attrs = loop_attrs(a.shape, b.shape, y.shape)


for _name in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT"):
    register(_name, "bool" + ("" if _name == "LOGICAL_NOT" else ", broadcasting up to 6-D"),
             _check_logical)(_lower_logical)


# ---------------------------------------------------------------------------------------------
# SELECT_V2
# ---------------------------------------------------------------------------------------------

_SELECT_TYPES = ("float32", "int8", "int16", "int32", "bool")
_ELEM_BYTES = {"float32": 4, "int8": 1, "int16": 2, "int32": 4, "bool": 1}


def _check_select(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 3 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return "expects condition, x, y inputs and one output"
    c, x, yv = (g.tensors[t] for t in op.inputs)
    out = g.tensors[op.outputs[0]]
    if c.dtype != "bool":
        return f"condition is {c.dtype}, bool is required"
    if not x.dtype == yv.dtype == out.dtype or out.dtype not in _SELECT_TYPES:
        return (f"{x.dtype}, {yv.dtype} -> {out.dtype} is not supported (one type, "
                f"{', '.join(_SELECT_TYPES)})")
    if out.dtype in ("int8", "int16"):
        qs = []
        for t in (x, yv, out):
            if t.quant is None or t.quant.scale.size != 1:
                return f"tensor '{t.name}' needs per-tensor quantisation"
            qs.append((float(t.quant.scale[0]), zp_of(t)))
        if len(set(qs)) != 1 or not math.isfinite(qs[0][0]):
            return ("x, y and the output are quantised differently: TFLite copies raw values, "
                    "which only means something with one quantisation")
    return _broadcast_check([c, x, yv], out)


@register("SELECT_V2", "float32, int8, int16 (x, y, output one quantisation), int32, bool; "
          "bool condition; broadcasting up to 6-D", _check_select)
def _lower_select(op: Op, g: Graph) -> None:
    c, x, yv = (g.tensors[t] for t in op.inputs)
    out = g.tensors[op.outputs[0]]
    ins = [broadcast_strides(t.shape, out.shape) for t in (c, x, yv)]
    assert all(s is not None for s in ins)
    # merge dimensions contiguous for all three inputs (innermost first), as loop_attrs does
    dims = [(n, *s) for n, *s in zip(padded(out.shape), *ins, strict=True) if n > 1]
    merged: list[tuple[int, ...]] = []
    for d in reversed(dims):
        if merged:
            p = merged[-1]
            if all(d[k] == p[k] * p[0] for k in (1, 2, 3)):
                merged[-1] = (p[0] * d[0], p[1], p[2], p[3])
                continue
        merged.append(tuple(d))
    merged += [(1, 0, 0, 0)] * (MAX_DIMS - len(merged))
    merged.reverse()
    op.kernel = f"select_v2_b{_ELEM_BYTES[out.dtype]}"
    op.attrs = {"out_shape": [m[0] for m in merged], "cond_strides": [m[1] for m in merged],
                "x_strides": [m[2] for m in merged], "y_strides": [m[3] for m in merged]}
    op.macc = int(out.size)
