"""IF and WHILE -> ops of subgraph 0 (the IR is one graph: docs/architecture.md, "Several
subgraphs").

The frontend reads every subgraph, then replaces each control-flow op of subgraph 0 by the ops
of the subgraphs it calls, copied into subgraph 0 with fresh tensors (recursively, so nested
IF/WHILE work the same way):

* WHILE is unrolled. Its condition subgraph is evaluated at generate time on the loop
  variables it reads, which must be known then (the converter's fixed-count loops: an int32
  counter compared with a constant); each iteration copies the body's ops, and the integer/
  bool ops whose inputs are all constants (the counter's ADD) are evaluated here too, so the
  next condition is known. A condition that depends on run-time data is refused (TFLM would
  run it; a data-dependent trip count is not compiled), and so is a loop of more than
  MAX_UNROLL iterations.
* IF with a constant condition becomes the chosen branch. With a run-time condition both
  branches are copied and each output is taken from one of them by an `IF` op of
  [condition, then value, else value] (kernel `if_select`, passes/lower/control_flow.py):
  both branches run, which gives the same result because a branch may hold no state (no
  variable tensors, no resource variables, no stateful signal ops: refused).

A loop or branch output that is one of its inputs or a constant becomes a RESHAPE alias (or a
constant), so the passes after the frontend see plain dataflow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import DTYPE_SIZES, Graph, Op, Tensor

__all__ = ["CONTROL_FLOW_OPS", "MAX_UNROLL", "inline_control_flow"]

CONTROL_FLOW_OPS = {"IF", "WHILE"}
MAX_UNROLL = 256  # WHILE iterations copied at most
MAX_OPS = 65535  # ai_model_info's uint16 node count (passes/verify.py)
# ops that keep state between runs: a branch run unconditionally must hold none
_STATEFUL = {"ASSIGN_VARIABLE", "READ_VARIABLE", "VAR_HANDLE", "CALL_ONCE", "CALL",
             "CUSTOM:SignalFilterBankSpectralSubtraction", "CUSTOM:SignalDelay", "CUSTOM:SignalFramer",
             "CUSTOM:SignalStacker", "CUSTOM:SignalOverlapAdd", "CUSTOM:CIRCULAR_BUFFER"}

Val = int | np.ndarray  # a tensor id of subgraph 0, or a value known at generate time

# integer and bool ops evaluated at generate time when every input is known (loop counters)
_EVAL: dict[str, Callable[..., np.ndarray]] = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply,
    "LESS": np.less, "LESS_EQUAL": np.less_equal, "GREATER": np.greater,
    "GREATER_EQUAL": np.greater_equal, "EQUAL": np.equal, "NOT_EQUAL": np.not_equal,
    "LOGICAL_AND": np.logical_and, "LOGICAL_OR": np.logical_or, "LOGICAL_NOT": np.logical_not,
}
_EXACT = {"int32", "int64", "bool"}


def _evaluate(op: Op, sub: Graph, ins: list[Val]) -> np.ndarray | None:
    """The op's single output when it is an integer/bool op of known inputs, else None."""
    fn = _EVAL.get(op.type)
    if fn is None or len(op.outputs) != 1 or not ins or not all(isinstance(v, np.ndarray) for v in ins):
        return None
    out = sub.tensors[op.outputs[0]]
    if out.dtype not in _EXACT or any(v.dtype.name not in _EXACT for v in ins):  # type: ignore[union-attr]
        return None
    if op.options.get("fused_activation_function", "NONE") not in ("NONE", None):
        return None
    n_args = 1 if op.type == "LOGICAL_NOT" else 2
    if len(ins) != n_args:
        return None
    with np.errstate(all="ignore"):
        res = fn(*ins)
    return np.asarray(res).astype(out.dtype)


class _Inliner:
    def __init__(self, g: Graph, subgraphs: dict[int, Graph]) -> None:
        self.g = g
        self.subs = subgraphs
        self.ops: list[Op] = []
        self.depth = 0

    def _err(self, op: Op, where: str, msg: str) -> UnsupportedModelError:
        return UnsupportedModelError(f"{where + ' ' if where else ''}{op.where}: {msg}")

    def _sub(self, op: Op, where: str, key: str) -> tuple[int, Graph]:
        idx = op.options.get(key)
        if not isinstance(idx, int) or idx not in self.subs:
            raise self._err(op, where, f"{key} {idx!r} names no subgraph of the model (other than the main one)")
        return idx, self.subs[idx]

    @staticmethod
    def _fit(v: np.ndarray, like: Tensor) -> np.ndarray:
        """v as a constant of like's type and shape (the same number of elements)."""
        if v.size != like.size or like.dtype not in DTYPE_SIZES or like.dtype == "float16":
            raise UnsupportedModelError(f"a value known at generate time ({v.dtype.name}{list(v.shape)}) "
                                        f"does not fit tensor '{like.name}' {like.dtype}{list(like.shape)}")
        return np.asarray(v, dtype=like.dtype).reshape(like.shape)

    def _tensor_of(self, v: Val, like: Tensor, name: str) -> int:
        """A tensor id of subgraph 0 holding v (a constant gets one of like's type)."""
        if isinstance(v, int):
            return v
        return self.g.add_const(name, self._fit(v, like), like.quant)

    def _bind(self, out_tid: int, v: Val) -> None:
        """Make tensor out_tid of subgraph 0 hold v: a constant, or a RESHAPE alias of v."""
        t = self.g.tensors[out_tid]
        if isinstance(v, np.ndarray):
            t.data = self._fit(v, t)
            return
        self.ops.append(Op("RESHAPE", [v], [out_tid], {"new_shape": list(t.shape)}, -1))

    def call(self, idx: int, sub: Graph, args: list[Val], prefix: str, pure: bool, caller: Op,
             where: str) -> list[Val]:
        """Copy subgraph idx's ops into subgraph 0 on args; its outputs as values."""
        self.depth += 1
        if self.depth > 16:
            raise self._err(caller, where, "control flow nested more than 16 deep")
        if len(args) != len(sub.inputs):
            raise self._err(caller, where, f"passes {len(args)} values to subgraph {idx}, which has "
                                           f"{len(sub.inputs)} inputs")
        env: dict[int, Val] = {}
        for tid, a in zip(sub.inputs, args, strict=True):
            t = sub.tensors[tid]
            at = a if isinstance(a, np.ndarray) else self.g.tensors[a]
            shape = tuple(a.shape) if isinstance(a, np.ndarray) else at.shape  # type: ignore[union-attr]
            dtype = a.dtype.name if isinstance(a, np.ndarray) else at.dtype  # type: ignore[union-attr]
            if dtype != t.dtype or int(np.prod(shape, dtype=np.int64)) != t.size:
                raise self._err(caller, where, f"argument {dtype}{list(shape)} does not match input "
                                               f"'{t.name}' {t.dtype}{list(t.shape)} of subgraph {idx}")
            env[tid] = a
        for t in sub.tensors:
            if t.is_const:
                env[t.id] = np.asarray(t.data)
            elif t.variable:
                raise self._err(caller, where, f"subgraph {idx} holds variable (state) tensor '{t.name}'; "
                                               "state inside IF/WHILE is not supported")

        def value(tid: int) -> Val:
            if tid < 0:
                return -1
            if tid not in env:
                raise self._err(caller, where, f"subgraph {idx} reads tensor '{sub.tensors[tid].name}' "
                                               "before any op produces it")
            return env[tid]

        for op in sub.ops:
            if pure and op.type in _STATEFUL:
                raise self._err(caller, where, f"branch subgraph {idx} holds {op.type}, which keeps state; "
                                               "an IF with a run-time condition runs both branches")
            ins = [value(t) for t in op.inputs]
            known = _evaluate(op, sub, ins)  # type: ignore[arg-type]
            if known is not None:
                env[op.outputs[0]] = known
                continue
            if op.type in CONTROL_FLOW_OPS:
                outs = self.control(op, sub, ins, f"{prefix}/{op.type.lower()}{op.index}", pure,
                                    f"{where} -> subgraph {idx}")
                for tid, v in zip(op.outputs, outs, strict=True):
                    env[tid] = v
                continue
            new_ins = [-1 if v is None or (isinstance(v, int) and v < 0) else
                       self._tensor_of(v, sub.tensors[t], f"{prefix}/{sub.tensors[t].name}")
                       for t, v in zip(op.inputs, ins, strict=True)]
            new_outs = []
            for tid in op.outputs:
                t = sub.tensors[tid]
                q = dataclasses.replace(t.quant) if t.quant is not None else None
                new_outs.append(self.g.add_tensor(f"{prefix}/{t.name}", t.shape, t.dtype, q))
                env[tid] = new_outs[-1]
            self.ops.append(Op(op.type, new_ins, new_outs, dict(op.options), caller.index))
            if len(self.ops) > MAX_OPS:
                raise self._err(caller, where, f"the inlined control flow exceeds {MAX_OPS} operators")
        self.depth -= 1
        return [value(t) for t in sub.outputs]

    def control(self, op: Op, graph: Graph, ins: list[Val], prefix: str, pure: bool, where: str) -> list[Val]:
        if op.type == "IF":
            return self._if(op, graph, ins, prefix, pure, where)
        return self._while(op, graph, ins, prefix, pure, where)

    def _if(self, op: Op, graph: Graph, ins: list[Val], prefix: str, pure: bool, where: str) -> list[Val]:
        ti, then_g = self._sub(op, where, "then_subgraph_index")
        ei, else_g = self._sub(op, where, "else_subgraph_index")
        if not ins or (isinstance(ins[0], int) and ins[0] < 0):
            raise self._err(op, where, "has no condition input")
        cond, args = ins[0], ins[1:]
        ct = graph.tensors[op.inputs[0]]
        if ct.dtype != "bool" or ct.size != 1:
            raise self._err(op, where, f"condition '{ct.name}' is {ct.dtype}{list(ct.shape)}; a bool "
                                       "scalar is supported")
        if isinstance(cond, np.ndarray):  # known at generate time: the chosen branch only
            k, sub = (ti, then_g) if bool(cond.reshape(-1)[0]) else (ei, else_g)
            return self.call(k, sub, args, f"{prefix}/{'then' if k == ti else 'else'}", pure, op, where)
        a = self.call(ti, then_g, args, f"{prefix}/then", True, op, where)
        b = self.call(ei, else_g, args, f"{prefix}/else", True, op, where)
        if not (len(a) == len(b) == len(op.outputs)):
            raise self._err(op, where, "its branches return a different number of values than it has outputs")
        outs: list[Val] = []
        for j, (va, vb) in enumerate(zip(a, b, strict=True)):
            y = graph.tensors[op.outputs[j]]
            ta = self._tensor_of(va, y, f"{prefix}/then_out{j}")
            tb = self._tensor_of(vb, y, f"{prefix}/else_out{j}")
            for t in (self.g.tensors[ta], self.g.tensors[tb]):
                if t.dtype != y.dtype or t.size != y.size:
                    raise self._err(op, where, f"branch output '{t.name}' {t.dtype}{list(t.shape)} does not "
                                               f"match output '{y.name}' {y.dtype}{list(y.shape)}")
            q = dataclasses.replace(y.quant) if y.quant is not None else None
            out = self.g.add_tensor(f"{prefix}/{y.name}", y.shape, y.dtype, q)
            self.ops.append(Op("IF", [cond, ta, tb], [out], {}, op.index))
            outs.append(out)
        return outs

    def _while(self, op: Op, graph: Graph, ins: list[Val], prefix: str, pure: bool, where: str) -> list[Val]:
        ci, cond_g = self._sub(op, where, "cond_subgraph_index")
        bi, body_g = self._sub(op, where, "body_subgraph_index")
        if len(ins) != len(op.outputs):
            raise self._err(op, where, f"has {len(ins)} loop variables but {len(op.outputs)} outputs")
        vals = list(ins)
        for it in range(MAX_UNROLL + 1):
            saved = len(self.ops)
            cs = self.call(ci, cond_g, vals, f"{prefix}/cond{it}", True, op, where)
            del self.ops[saved:]  # the condition's copied ops: only its value matters
            if len(cs) != 1:
                raise self._err(op, where, f"condition subgraph {ci} has {len(cs)} outputs, expected 1")
            c = cs[0]
            if not isinstance(c, np.ndarray):
                raise self._err(op, where, "its condition depends on run-time data; only loops whose trip "
                                           "count is known at generate time are unrolled")
            if c.dtype != np.bool_ or c.size != 1:
                raise self._err(op, where, f"condition is {c.dtype.name}{list(c.shape)}; a bool scalar is expected")
            if not bool(c.reshape(-1)[0]):
                return vals
            if it == MAX_UNROLL:
                break
            vals = self.call(bi, body_g, vals, f"{prefix}/it{it}", pure, op, where)
            if len(vals) != len(op.outputs):
                raise self._err(op, where, "its body returns a different number of values than it has "
                                           "loop variables")
        raise self._err(op, where, f"the loop runs more than {MAX_UNROLL} iterations; at most "
                                   f"{MAX_UNROLL} are unrolled")


def inline_control_flow(g: Graph, subgraphs: dict[int, Graph]) -> None:
    """Replace every IF/WHILE of subgraph 0 (g) by subgraph 0 ops, in place."""
    inl = _Inliner(g, subgraphs)
    for op in g.ops:
        if op.type not in CONTROL_FLOW_OPS:
            inl.ops.append(op)
            continue
        ins: list[Val] = [t if t < 0 or not g.tensors[t].is_const else np.asarray(g.tensors[t].data)
                          for t in op.inputs]
        outs = inl.control(op, g, ins, f"{op.type.lower()}{op.index}", False, "")
        if len(outs) != len(op.outputs):
            raise UnsupportedModelError(f"{op.where}: returns {len(outs)} values for {len(op.outputs)} outputs")
        for tid, v in zip(op.outputs, outs, strict=True):
            inl._bind(tid, v)
    g.ops = inl.ops
