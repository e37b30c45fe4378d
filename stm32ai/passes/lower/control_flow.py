"""IF with a run-time condition (frontend/control_flow.py copied both branches into subgraph 0):
IF [condition (bool scalar), then value, else value] -> [out], kernel `if_select`
(ai_control_flow.c): a byte copy of the value the condition picks, as TFLM's IF hands the
taken branch's outputs over. WHILE never reaches lowering: the frontend unrolls it.
Details: docs/kernels_control_flow.md.
"""

from __future__ import annotations

from stm32ai.ir import DTYPE_CODES, Graph, Op
from stm32ai.passes.lower import register


def _check_if(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 3 or len(op.outputs) != 1 or any(t < 0 for t in op.inputs):
        return "expects a condition, the two branches' values and one output"
    c, a, b = (g.tensors[t] for t in op.inputs)
    y = g.tensors[op.outputs[0]]
    if c.dtype != "bool" or c.size != 1:
        return f"condition '{c.name}' is {c.dtype}{list(c.shape)}; a bool scalar is supported"
    if y.dtype not in DTYPE_CODES:
        return f"output '{y.name}' is {y.dtype}, a type the runtime has no code for"
    for t in (a, b):
        if t.dtype != y.dtype or t.nbytes != y.nbytes:
            return f"branch value '{t.name}' {t.dtype}{list(t.shape)} does not match output {y.dtype}{list(y.shape)}"
    return None


@register("IF", "any type: both branches are computed, the condition picks one (branches with state "
          "refused); a condition known at generate time keeps only its branch", _check_if)
def _lower_if(op: Op, g: Graph) -> None:
    op.kernel = "if_select"
    op.attrs = {"size": int(g.tensors[op.outputs[0]].nbytes)}


def _check_while(op: Op, g: Graph) -> str | None:
    # the frontend unrolls every WHILE (frontend/control_flow.py): none reaches the support check
    return "unrolled by the frontend only"


@register("WHILE", "unrolled at generate time when its trip count is known then (a condition on a "
          "constant-initialised counter); a data-dependent trip count is refused", _check_while)
def _lower_while(op: Op, g: Graph) -> None:
    raise AssertionError(f"{op.where}: WHILE reached lowering (its check always refuses)")
