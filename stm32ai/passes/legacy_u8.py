"""Legacy uint8 models (TF1 quantisation-aware training / TOCO) -> the int8 kernels, exactly.

Such models quantise weights and activations as asymmetric uint8 (real = s * (q - zp), q in
0..255); LiteRT's reference kernels run them, TFLite Micro does not (no uint8 convolution).
Every quantised integer op computes with the differences q - zp only, so shifting a tensor's
codes and its zero point by the same 128,

    q_s8 = q_u8 - 128,   zp_s8 = zp_u8 - 128,   q_u8 - zp_u8 = q_s8 - zp_s8,

changes nothing an op computes from it; an output's zero point and clamp range move by the same
128 (TFLite's CalculateActivationRangeQuantized: [0, 255] -> [-128, 127], zp + round(r / s)
-> zp - 128 + round(r / s)). So this pass rewrites each quantised uint8 activation tensor (and
each quantised uint8 constant an op reads as data: an ADD operand, a PADV2 value) as int8 with
zp - 128, and the int8 kernels then produce the uint8 model's outputs minus 128 bit for bit.

What the shift does not cover is handled elsewhere and named here:
* weights (CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED filter, input 1) stay uint8 with
  their zero point: passes/lower/u8.py re-centres them to w - zp_w (-255..255, int16);
* AVERAGE_POOL_2D rounds uint8 sums half up, (sum + n/2) / n, where the int8 kernel rounds
  half away from zero: a sum that is negative after the shift would round the other way, so
  it gets the uint8 rounding (passes/lower/u8.py, ai_avgpool_u8);
* graph inputs and outputs keep their uint8 type in the C API: a QUANTIZE (uint8 <-> int8,
  same scale, zero point -/+ 128: the exact map q -/+ 128, a 256-entry table) at the boundary.
Ops are accepted on shifted tensors only where their uint8 arithmetic in LiteRT-ref is the
int8 arithmetic on shifted codes (`EXACT_OPS`, each checked against LiteRT-ref by
tests/test_ops_u8.py); any other op touching a uint8 tensor is refused, never silently run
with int8 arithmetic. Unquantised uint8 tensors (raw integers: CAST) are left alone, and so
are uint8 tensors only QUANTIZE / DEQUANTIZE touch (they take uint8 as it is).
"""

from __future__ import annotations

import numpy as np

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op, Quant

__all__ = ["ARITHMETIC_OPS", "EXACT_OPS", "LEGACY_U8", "MOVEMENT_OPS", "RESCALE", "WEIGHTED", "shift_uint8",
           "uint8_op_types"]

# op.options key set on every op this pass moved to shifted int8 tensors (the lowering
# variants of passes/lower/u8.py dispatch on it)
LEGACY_U8 = "legacy_uint8"
# option of the QUANTIZE ops this pass puts before a CONCATENATION input quantised unlike the
# output: LiteRT's uint8 ConcatenationWithScaling rescales in float (passes/lower/u8.py)
RESCALE = "legacy_uint8_rescale"
# ops whose filter (input 1) keeps its uint8 codes for passes/lower/u8.py
WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
# ops that run shifted uint8 tensors exactly (module docstring): the arithmetic ones each have a
# converter-made fixture in tests/test_ops_u8.py compared with LiteRT-ref bit for bit
ARITHMETIC_OPS = frozenset({*WEIGHTED, "AVERAGE_POOL_2D", "MAX_POOL_2D", "ADD", "SUB", "MUL", "SOFTMAX",
                            "LOGISTIC", "PAD", "QUANTIZE", "DEQUANTIZE", "CONCATENATION", "RESHAPE",
                            "TANH", "HARD_SWISH", "LEAKY_RELU", "RELU", "RELU6", "RELU_N1_TO_1", "MEAN",
                            "RESIZE_BILINEAR", "SUM", "REDUCE_MAX", "REDUCE_MIN", "ARG_MAX", "ARG_MIN",
                            "PRELU", "LOG_SOFTMAX"})
# ops that only move codes (their int8 kernels refuse an output quantised unlike the input, so
# no requantisation happens): shift-invariant by construction
MOVEMENT_OPS = frozenset({"PADV2", "MAXIMUM", "MINIMUM", "SPACE_TO_DEPTH", "DEPTH_TO_SPACE", "TRANSPOSE",
                          "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V", "PACK", "UNPACK", "GATHER", "TILE",
                          "RESIZE_NEAREST_NEIGHBOR", "MIRROR_PAD", "REVERSE_V2", "BROADCAST_TO"})
# (RESIZE_BILINEAR and MEAN: checked against LiteRT-ref like the arithmetic ops, see ARITHMETIC_OPS)
EXACT_OPS = ARITHMETIC_OPS | MOVEMENT_OPS
_NATIVE = ("QUANTIZE", "DEQUANTIZE")  # ops that take uint8 as it is


def uint8_op_types() -> dict[str, str]:
    """Op types that run legacy uint8 tensors through the shift, with how (`supported-ops`;
    the ops with a variant of their own in passes/lower/u8.py also list that variant)."""
    how = "legacy uint8: the int8 kernel on codes and zero points shifted by 128 (exact)"
    return {k: how for k in sorted(EXACT_OPS)}


def _quantised_u8(g: Graph, tid: int) -> bool:
    t = g.tensors[tid]
    return t.dtype == "uint8" and t.quant is not None and t.quant.scale.size > 0


def _shifted_quant(q: Quant) -> Quant:
    return Quant(np.asarray(q.scale, np.float32), np.asarray(q.zero_point, np.int64) - 128, q.axis)


def _has_int8(g: Graph, op: Op, filters: set[int]) -> bool:
    """A quantised int8 data tensor (not a filter) beside the op's uint8 ones."""
    return any(tid >= 0 and tid not in filters and g.tensors[tid].dtype == "int8" and g.tensors[tid].quant is not None
               for tid in [*op.inputs, *op.outputs])


def _filters(g: Graph) -> set[int]:
    return {op.inputs[1] for op in g.ops if op.type in WEIGHTED and len(op.inputs) > 1 and op.inputs[1] >= 0
            and g.tensors[op.inputs[1]].is_const}


def shift_uint8(g: Graph) -> Graph:
    """Rewrite the quantised uint8 tensors of `g` as shifted int8 (module docstring). Returns g."""
    touched: dict[int, list[Op]] = {}
    for op in g.ops:
        for tid in [*op.inputs, *op.outputs]:
            if tid >= 0 and _quantised_u8(g, tid):
                touched.setdefault(tid, []).append(op)
    if not touched:
        return g
    # uint8 only QUANTIZE/DEQUANTIZE touch stays uint8; so does a filter of a weighted op
    filters = _filters(g)
    shift = {tid for tid, ops in touched.items()
             if tid not in filters and any(op.type not in _NATIVE for op in ops)}
    for tid in filters & set(touched):
        users = touched[tid]
        if any(op.type not in WEIGHTED or op.inputs.index(tid) != 1 for op in users):
            raise UnsupportedModelError(
                f"uint8 filter '{g.tensors[tid].name}' is also read as data — the model is unusual; "
                "re-export it with separate constants")
    if not shift and not filters & set(touched):
        return g
    ops_on = {id(op): op for tid in shift | (filters & set(touched)) for op in touched[tid]}
    bad_ops = sorted((op for op in ops_on.values() if op.type not in EXACT_OPS), key=lambda op: op.index)
    bad = sorted({op.type for op in bad_ops})
    if bad:
        first = bad_ops[0]
        where = f" (first: {first.type} -> '{g.tensors[first.outputs[0]].name}')" if first.outputs else ""
        raise UnsupportedModelError(
            f"legacy uint8 model: {', '.join(bad)} on uint8 tensors is not supported{where} (uint8 runs through "
            f"the int8 kernels where that is exact; see 'stm32ai supported-ops') — re-export the model "
            "with int8 quantisation (TFLiteConverter, optimizations=[tf.lite.Optimize.DEFAULT])")
    mixed = sorted({op.type for op in ops_on.values() if op.type not in _NATIVE and _has_int8(g, op, filters)})
    if mixed:  # TFLite refuses these too (input->type != output->type); no reference defines them
        raise UnsupportedModelError(
            f"{', '.join(mixed)} mixes uint8 and int8 tensors, which TFLite does not define — re-export the "
            "model with one quantisation type")
    for op in ops_on.values():
        op.options = {**op.options, LEGACY_U8: True}
    first_use = {tid: min((op.index for op in touched[tid]), default=-1) for tid in shift}
    for tid in sorted(shift):
        t = g.tensors[tid]
        assert t.quant is not None
        if tid in g.inputs or tid in g.outputs:
            _boundary(g, tid, first_use[tid])
            continue
        t.dtype, t.quant = "int8", _shifted_quant(t.quant)
        if t.data is not None:
            t.data = (np.asarray(t.data, np.int16) - 128).astype(np.int8)
    for op in [op for op in g.ops if op.type == "CONCATENATION" and op.options.get(LEGACY_U8)]:
        _rescale_inputs(g, op)
    return g


def _same_quant(a: Quant | None, b: Quant | None) -> bool:
    return (a is not None and b is not None and np.array_equal(np.float32(a.scale), np.float32(b.scale))
            and np.array_equal(a.zero_point, b.zero_point))


def _rescale_inputs(g: Graph, op: Op) -> None:
    """A uint8 CONCATENATION may take inputs quantised unlike its output (TOCO leaves them so):
    LiteRT rescales those in float. Each such input gets a QUANTIZE (marked RESCALE) to the
    output's quantisation, so the concatenation itself only copies."""
    out = g.tensors[op.outputs[0]]
    for k, tid in enumerate(op.inputs):
        t = g.tensors[tid] if tid >= 0 else None
        if t is None or t.dtype != "int8" or _same_quant(t.quant, out.quant):
            continue
        twin = g.add_tensor(f"{t.name}/rescaled", t.shape, "int8", out.quant)
        g.ops.insert(g.ops.index(op), Op("QUANTIZE", [tid], [twin], {LEGACY_U8: True, RESCALE: True}, op.index))
        op.inputs[k] = twin


def _boundary(g: Graph, tid: int, index: int) -> None:
    """Keep graph input/output `tid` uint8 in the API: the ops use a shifted int8 twin, converted
    by a QUANTIZE at the boundary (input: before every op; output: after every op)."""
    t = g.tensors[tid]
    assert t.quant is not None
    twin = g.add_tensor(f"{t.name}/int8", t.shape, "int8", _shifted_quant(t.quant))
    if tid in g.inputs:  # (an input that is also an output stays one: passed through as it is)
        for op in g.ops:
            op.inputs = [twin if i == tid else i for i in op.inputs]
        g.ops.insert(0, Op("QUANTIZE", [tid], [twin], {LEGACY_U8: True}, index))
        return
    for op in g.ops:
        op.outputs = [twin if o == tid else o for o in op.outputs]
    g.ops.append(Op("QUANTIZE", [twin], [tid], {LEGACY_U8: True}, index))
