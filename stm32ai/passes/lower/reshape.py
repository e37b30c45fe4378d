"""RESHAPE (canonical form of RESHAPE/SQUEEZE/EXPAND_DIMS, data input only) -> "__nop".

A reshape only reinterprets bytes, so it becomes a zero-copy alias: the planner gives the
output the input's storage and no code runs. Where aliasing is impossible the op needs a
real copy, kernel `copy` (`ai_copy`, memmove of `size` bytes, attrs {"size": n}):

* here, when the input is a constant (its bytes live in flash, the output in the pool),
  when a graph input is reshaped straight into a graph output (two distinct user
  buffers), or for the copies `passes/output_copies.py` adds for graph outputs the model
  does not compute (option `output_copy`);
* in the planner, which may switch any `__nop` to `copy` with `use_copy(op, g)` when its
  placement cannot share the storage (e.g. the application owns one side).

`copy` may run in place (a copy onto itself is a no-op), so `inplace` is set for it.
"""

from __future__ import annotations

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower import register
from stm32ai.passes.output_copies import OUTPUT_COPY

__all__ = ["use_copy"]


def use_copy(op: Op, g: Graph) -> None:
    """Turn a lowered RESHAPE into a real byte copy (for the planner)."""
    src = g.tensors[op.inputs[0]]
    op.kernel = "copy"
    op.attrs = {"size": int(src.nbytes)}
    op.inplace = True
    op.macc = 0


def _check_reshape(op: Op, g: Graph) -> str | None:
    if len(op.inputs) < 1 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return "expects a data input and one output"
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if x.nbytes != y.nbytes:
        return (f"output '{y.name}' {list(y.shape)} ({y.nbytes} bytes) does not hold input "
                f"'{x.name}' {list(x.shape)} ({x.nbytes} bytes)")
    if x.dtype != y.dtype:
        return f"reshape changes the type ({x.dtype} -> {y.dtype})"
    return None


@register("RESHAPE", "any type; zero-copy alias of its input (a byte copy where aliasing "
          "is impossible)", _check_reshape)
def lower_reshape(op: Op, g: Graph) -> None:
    op.inputs = op.inputs[:1]
    src, dst = op.inputs[0], op.outputs[0]
    op.macc = 0
    if (g.tensors[src].is_const or (src in g.inputs and dst in g.outputs)
            or op.options.get(OUTPUT_COPY)):
        use_copy(op, g)
        return
    op.kernel = "__nop"
    op.attrs = {}
