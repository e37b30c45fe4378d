"""Resource variables and CALL_ONCE -> persistent state tensors of subgraph 0.

A converter-made streaming model (tf.Variable read and assigned in its tf.function) holds its
state in resource variables: VAR_HANDLE gives a handle keyed by (container, shared_name),
READ_VARIABLE copies the variable into a tensor, ASSIGN_VARIABLE copies a tensor into it, and
a CALL_ONCE in subgraph 0 runs an init subgraph (VAR_HANDLE + ASSIGN_VARIABLE of constants)
at the first invocation. TFLM keeps the variables in its MicroResourceVariables arena across
Invoke.

Here every resource variable becomes one variable (state) tensor of subgraph 0, so the planner
puts it in the instance's state area like LSTM/SVDF state (zero bytes at ai_create/ai_reset):

* VAR_HANDLE       -> removed (its handle tensor is no longer read);
* READ_VARIABLE    -> inputs [state], outputs [out]            (lowered to `copy`);
* ASSIGN_VARIABLE  -> inputs [value, state], no outputs: writes the state in place;
* CALL_ONCE        -> one op per variable the init subgraph assigns:
                      inputs [initial value (constant), initialised flag (uint8 state), state],
                      no outputs: copies the initial value into the state when the flag is 0,
                      then sets it; ai_create and ai_reset zero the flag, so the next ai_run
                      starts from the initial values, as a freshly created TFLM interpreter.

The init subgraph may hold only VAR_HANDLE and ASSIGN_VARIABLE of constants (what the converter
emits for tf.Variable initial values); anything else is refused with a reason. The result has
no subgraphs left: the rest of the pipeline sees ordinary state tensors (docs/architecture.md,
"Several subgraphs"). Ops with no outputs are kept by dead-op removal (they write state).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op

__all__ = ["RESOURCE_OPS", "resolve_resource_variables"]

RESOURCE_OPS = {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"}


@dataclass
class _Var:
    key: tuple[str, str]
    uses: list[tuple[str, int]] = field(default_factory=list)  # (where, tensor id in subgraph 0)
    init: np.ndarray | None = None
    state: int = -1


def _key(op: Op) -> tuple[str, str]:
    return (str(op.options.get("container", "") or ""), str(op.options.get("shared_name", "") or ""))


def _handles(g: Graph, sub: int, err: type[UnsupportedModelError]) -> dict[int, tuple[str, str]]:
    """Handle tensor id -> variable key of each VAR_HANDLE of one subgraph."""
    out: dict[int, tuple[str, str]] = {}
    for op in g.ops:
        if op.type == "VAR_HANDLE":
            if len(op.outputs) != 1 or op.inputs:
                raise err(f"subgraph {sub} {op.where}: expects no inputs and one handle output")
            out[op.outputs[0]] = _key(op)
    return out


def _handle_of(op: Op, pos: int, handles: dict[int, tuple[str, str]], sub: int) -> tuple[str, str]:
    if pos >= len(op.inputs) or op.inputs[pos] not in handles:
        raise UnsupportedModelError(f"subgraph {sub} {op.where}: its resource input is not the "
                                    "output of a VAR_HANDLE of the same subgraph")
    return handles[op.inputs[pos]]


def _init_values(sub: int, sg: Graph) -> dict[tuple[str, str], np.ndarray]:
    """The constants an init subgraph assigns, by variable key (the last assignment wins)."""
    handles = _handles(sg, sub, UnsupportedModelError)
    values: dict[tuple[str, str], np.ndarray] = {}
    for op in sg.ops:
        if op.type == "VAR_HANDLE":
            continue
        if op.type != "ASSIGN_VARIABLE":
            raise UnsupportedModelError(
                f"CALL_ONCE init subgraph {sub} {op.where}: only constant initial values "
                "(VAR_HANDLE + ASSIGN_VARIABLE of a constant) are supported")
        key = _handle_of(op, 0, handles, sub)
        if len(op.inputs) != 2 or op.inputs[1] < 0 or not sg.tensors[op.inputs[1]].is_const:
            raise UnsupportedModelError(
                f"CALL_ONCE init subgraph {sub} {op.where}: the initial value is not a constant; "
                "only constant initial values are supported")
        values[key] = np.asarray(sg.tensors[op.inputs[1]].data)
    return values


def resolve_resource_variables(g: Graph, subgraphs: dict[int, Graph]) -> None:
    """Rewrite subgraph 0 (g) in place; `subgraphs` holds the model's other subgraphs by index."""
    handles = _handles(g, 0, UnsupportedModelError)
    variables: dict[tuple[str, str], _Var] = {}

    def var(key: tuple[str, str]) -> _Var:
        return variables.setdefault(key, _Var(key))

    inits: list[tuple[Op, dict[tuple[str, str], np.ndarray]]] = []
    seen_init: set[int] = set()
    for op in g.ops:
        if op.type == "READ_VARIABLE":
            if len(op.outputs) != 1:
                raise UnsupportedModelError(f"{op.where}: expects one output")
            var(_handle_of(op, 0, handles, 0)).uses.append((op.where, op.outputs[0]))
        elif op.type == "ASSIGN_VARIABLE":
            if len(op.inputs) != 2 or op.inputs[1] < 0:
                raise UnsupportedModelError(f"{op.where}: expects a resource and a value input")
            var(_handle_of(op, 0, handles, 0)).uses.append((op.where, op.inputs[1]))
        elif op.type == "CALL_ONCE":
            idx = op.options.get("init_subgraph_index")
            if not isinstance(idx, int) or idx not in subgraphs:
                raise UnsupportedModelError(f"{op.where}: init_subgraph_index {idx!r} names no "
                                            "subgraph of the model (other than the main one)")
            if idx in seen_init:
                raise UnsupportedModelError(f"{op.where}: init subgraph {idx} is called twice")
            seen_init.add(idx)
            values = _init_values(idx, subgraphs[idx])
            for key in values:
                var(key)
            inits.append((op, values))

    for v in variables.values():
        ts = [(w, g.tensors[t]) for w, t in v.uses]
        if not ts:  # assigned by the init subgraph only: never read, nothing to keep
            continue
        t0 = ts[0][1]
        for w, t in ts[1:]:
            if t.dtype != t0.dtype or t.size != t0.size:
                raise UnsupportedModelError(
                    f"{w}: resource variable '{v.key[1]}' is used as {t.dtype}{list(t.shape)} and "
                    f"as {t0.dtype}{list(t0.shape)}; one type and size per variable is supported")
        v.state = g.add_tensor(f"{v.key[1] or 'resource'}:state", t0.shape, t0.dtype)
        g.tensors[v.state].variable = True

    ops: list[Op] = []
    for op in g.ops:
        if op.type == "VAR_HANDLE":
            continue
        if op.type == "READ_VARIABLE":
            v = variables[handles[op.inputs[0]]]
            op.inputs = [v.state]
        elif op.type == "ASSIGN_VARIABLE":
            v = variables[handles[op.inputs[0]]]
            op.inputs = [op.inputs[1], v.state]
        elif op.type == "CALL_ONCE":
            values = next(vals for o, vals in inits if o is op)
            for key, value in values.items():
                v = variables[key]
                if v.state < 0:
                    continue
                st = g.tensors[v.state]
                if value.dtype.name != st.dtype or value.size != st.size:
                    raise UnsupportedModelError(
                        f"{op.where}: the initial value of resource variable '{key[1]}' is "
                        f"{value.dtype.name}{list(value.shape)} but the model uses it as "
                        f"{st.dtype}{list(st.shape)}")
                init = g.add_const(f"{st.name}/initial", value.reshape(st.shape))
                flag = g.add_tensor(f"{st.name}/initialised", (1,), "uint8")
                g.tensors[flag].variable = True
                ops.append(Op("CALL_ONCE", [init, flag, v.state], [],
                              {"init_subgraph_index": op.options["init_subgraph_index"]}, op.index))
            continue
        ops.append(op)
    g.ops = ops
    for tid in handles:  # the handles are read by nothing now
        t = g.tensors[tid]
        t.dtype, t.shape = "int32", ()
