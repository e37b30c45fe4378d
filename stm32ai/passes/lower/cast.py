"""CAST -> ai_cast (docs/kernels_binary.md).

TFLite's CAST converts stored values (static_cast), ignoring quantisation; a quantised
operand would make that a silent reinterpretation, so only unquantised tensors (or the
identity quantisation scale 1, zero point 0) are accepted. Constant CASTs never get here:
fold_constants evaluates them.

Value semantics (those of TFLite where TFLite's are defined): integer -> integer wraps,
anything -> bool is `x != 0`, bool -> anything 0/1, integer -> float rounds to nearest,
float -> integer truncates toward zero. Out-of-range float -> integer is undefined
behaviour in TFLite; the kernel saturates to the int32 range (NaN -> 0), then wraps.
"""

from __future__ import annotations

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower import register
from stm32ai.passes.lower.binary import unquantised

# ai_kernels_cast.h AI_CAST_* codes
CAST_TYPES = {"bool": 0, "int8": 1, "uint8": 2, "int16": 3, "uint16": 4, "int32": 5, "uint32": 6,
              "int64": 7, "float32": 8}


def _check_cast(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 1 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return "expects one input and one output"
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    for t in (x, y):
        if t.dtype not in CAST_TYPES:
            return f"tensor '{t.name}' is {t.dtype} (supported: {', '.join(CAST_TYPES)})"
        if not unquantised(t):
            return (f"tensor '{t.name}' is quantised: CAST converts stored values, use "
                    "DEQUANTIZE/QUANTIZE to convert quantised values")
    if x.size != y.size:
        return f"input has {x.size} elements, output {y.size}"
    return None


@register("CAST", "bool, int8, uint8, int16, uint16, int32, uint32, int64, float32 in any pair "
          "(unquantised); may run in place", _check_cast)
def lower_cast(op: Op, g: Graph) -> None:
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    op.kernel = "cast"
    op.attrs = {"size": int(y.size), "in_type": CAST_TYPES[x.dtype], "out_type": CAST_TYPES[y.dtype]}
    op.macc = int(y.size)
    op.inplace = True  # same element size only (the planner checks the byte sizes)
