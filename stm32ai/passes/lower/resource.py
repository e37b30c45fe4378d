"""Resource variables (frontend/resource_vars.py made them state tensors of subgraph 0):

* READ_VARIABLE   [state] -> [out]       : `copy` of the state's bytes (TFLM copies too: the
  output must not change when a later ASSIGN_VARIABLE of the same run writes the state);
* ASSIGN_VARIABLE [value, state] -> []    : `copy` of the value's bytes into the state;
* CALL_ONCE       [initial, flag, state] -> [] : `var_init` (ai_resource.c) copies the initial
  value into the state at the first ai_run after ai_create/ai_reset (flag 0), then sets the flag.

Bytes are copied as TFLM's kernels copy them (no requantisation: TFLM does none), so the result
is bit-exact whatever the tensors' quantisation. Details: docs/kernels_resource.md.
"""

from __future__ import annotations

from stm32ai.ir import DTYPE_CODES, Graph, Op
from stm32ai.passes.lower import register


def _state(g: Graph, tid: int) -> bool:
    return 0 <= tid < len(g.tensors) and g.tensors[tid].variable and not g.tensors[tid].is_const


def _same_bytes(g: Graph, a: int, b: int) -> str | None:
    x, y = g.tensors[a], g.tensors[b]
    if x.dtype not in DTYPE_CODES:
        return f"'{x.name}' is {x.dtype}, a type the runtime has no code for"
    if x.dtype != y.dtype or x.nbytes != y.nbytes:
        return (f"'{x.name}' {x.dtype}{list(x.shape)} and '{y.name}' {y.dtype}{list(y.shape)} "
                "differ in type or size")
    return None


def _check_read(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 1 or len(op.outputs) != 1 or not _state(g, op.inputs[0]):
        return "expects a resource variable (state) input and one output"
    return _same_bytes(g, op.inputs[0], op.outputs[0])


def _check_assign(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 2 or op.outputs or op.inputs[0] < 0 or not _state(g, op.inputs[1]):
        return "expects a value and a resource variable (state)"
    return _same_bytes(g, op.inputs[0], op.inputs[1])


def _check_call_once(op: Op, g: Graph) -> str | None:
    if (len(op.inputs) != 3 or op.outputs or op.inputs[0] < 0 or not g.tensors[op.inputs[0]].is_const
            or not _state(g, op.inputs[1]) or not _state(g, op.inputs[2])
            or g.tensors[op.inputs[1]].dtype != "uint8"):
        return "only an init subgraph that assigns constants to resource variables is supported"
    return _same_bytes(g, op.inputs[0], op.inputs[2])


@register("READ_VARIABLE", "any type: a copy of the variable's state (kept across ai_run)", _check_read)
def _lower_read(op: Op, g: Graph) -> None:
    op.kernel = "copy"
    op.attrs = {"size": int(g.tensors[op.inputs[0]].nbytes)}


@register("ASSIGN_VARIABLE", "any type: the value copied into the variable's state", _check_assign)
def _lower_assign(op: Op, g: Graph) -> None:
    op.kernel = "copy"
    op.attrs = {"size": int(g.tensors[op.inputs[1]].nbytes)}


@register("CALL_ONCE", "init subgraph of constant ASSIGN_VARIABLEs (the converter's tf.Variable "
          "initial values): applied at the first ai_run after ai_create/ai_reset", _check_call_once)
def _lower_call_once(op: Op, g: Graph) -> None:
    op.kernel = "var_init"
    op.attrs = {"size": int(g.tensors[op.inputs[2]].nbytes)}


def _check_var_handle(op: Op, g: Graph) -> str | None:
    # the frontend removes every VAR_HANDLE (frontend/resource_vars.py): one reaching the
    # support check was not part of the pattern
    return "resolved by the frontend only as the handle of READ_VARIABLE / ASSIGN_VARIABLE"


@register("VAR_HANDLE", "resolved by the frontend: each variable becomes a state tensor in the "
          "instance's state area (no code)", _check_var_handle)
def _lower_var_handle(op: Op, g: Graph) -> None:
    raise AssertionError(f"{op.where}: VAR_HANDLE reached lowering (its check always refuses)")
