"""FLOOR_DIV -> ai_floor_div_f32 / ai_floor_div_s32 (docs/kernels_binary.md, "FLOOR_DIV").

TFLite's reference FloorDiv is ``floor(double(x1) / double(x2))``: float32 models keep it in
float (the converter leaves FLOOR_DIV unquantised in int8 models, between DEQUANTIZE and
QUANTIZE), and integer ``a // b`` becomes an int32 FLOOR_DIV. TFLite Micro runs float32 only;
LiteRT-ref also int32 (and raw, unquantised int8/int16, which no converter quantisation
produces: refused). Broadcasting as the binary kernels (same loop attrs).
"""

from __future__ import annotations

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower import register
from stm32ai.passes.lower.binary import check_s32, loop_attrs
from stm32ai.passes.lower.common import broadcast_operands


def _check_floor_div(op: Op, g: Graph) -> str | None:
    io = broadcast_operands(op, g)
    if isinstance(io, str):
        return io
    a, b, y = io
    dtypes = {a.dtype, b.dtype, y.dtype}
    if dtypes == {"float32"}:
        return None
    if dtypes == {"int32"}:
        return check_s32(op, g)
    return (f"{a.dtype}, {b.dtype} -> {y.dtype} is not supported (all float32 or all int32; the "
            "converter keeps FLOOR_DIV in float in int8 models)")


@register("FLOOR_DIV", "float32 (floor of the double quotient, as TFLite) or int32, broadcasting up to 6-D",
          _check_floor_div)
def _lower_floor_div(op: Op, g: Graph) -> None:
    a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    op.kernel = "floor_div_f32" if y.dtype == "float32" else "floor_div_s32"
    op.attrs = loop_attrs(a.shape, b.shape, y.shape)
    op.macc = int(y.size)
