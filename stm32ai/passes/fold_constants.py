"""Compile-time evaluation of constant subgraphs.

Converters leave shape arithmetic in the graph (Keras Flatten with a dynamic batch
becomes SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE), plus the odd constant TRANSPOSE,
CAST or DEQUANTIZE of weights. On an MCU all of that is known at generate time, so we
evaluate it here with numpy, following TFLite semantics, and the ops disappear.

After folding, RESHAPE outputs get their static shape (resolving -1), and ops whose
results never reach a graph output are dropped. Tensor ids never change.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op, Quant
from stm32ai.passes.lower.movement import strided_slice

__all__ = ["fold_constants", "folded_op_types", "resolve_reshape_shape"]

Values = list[np.ndarray | None]
Folder = Callable[[Op, Values, Graph], list[np.ndarray] | None]

_FOLDERS: dict[str, Folder] = {}


def _folder(*names: str) -> Callable[[Folder], Folder]:
    def register(fn: Folder) -> Folder:
        for n in names:
            _FOLDERS[n] = fn
        return fn
    return register


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _ints(a: np.ndarray) -> list[int]:
    """A constant operand read as integers (shapes, axes, sizes): a model can give it any element
    type, so a non-integer or non-finite value is refused rather than truncated."""
    flat = np.asarray(a).reshape(-1)
    if flat.dtype.kind == "f" and not (np.all(np.isfinite(flat)) and np.all(flat == np.round(flat))):
        raise UnsupportedModelError("a constant shape/axis/size operand holds non-integer values "
                                    f"(type {flat.dtype}): the model is malformed")
    if flat.dtype.kind not in "biuf":
        raise UnsupportedModelError(f"a constant shape/axis/size operand has type {flat.dtype}, not an integer type")
    return [int(x) for x in flat]


def _same_quant(a: Quant | None, b: Quant | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return (a.scale.shape == b.scale.shape and bool(np.all(a.scale == b.scale))
            and a.zero_point.shape == b.zero_point.shape and bool(np.all(a.zero_point == b.zero_point)))


def _moves_raw_values(op: Op, g: Graph, data_inputs: list[int]) -> bool:
    """Data-movement ops copy stored values; that is only exact when the quantisation of
    every moved input equals the output's (otherwise the runtime would requantise)."""
    out_q = g.tensors[op.outputs[0]].quant
    return all(_same_quant(g.tensors[t].quant, out_q) for t in data_inputs if t >= 0)


# -- shape ops --------------------------------------------------------------------------

@_folder("SHAPE")
def _shape(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    shape = g.tensors[op.inputs[0]].shape
    if any(d < 0 for d in shape):
        return None
    return [np.array(shape, dtype=g.tensors[op.outputs[0]].dtype)]


@_folder("STRIDED_SLICE")
def _strided_slice(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if not _moves_raw_values(op, g, op.inputs[:1]):
        return None
    begin, end = _ints(v[1]), _ints(v[2])
    strides = _ints(v[3]) if len(v) > 3 and v[3] is not None else [1] * len(begin)
    # The runtime lowering's implementation: folding and the kernel select the same elements.
    return [strided_slice(np.asarray(v[0]), begin, end, strides, op.options)]


@_folder("SLICE")
def _slice(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if not _moves_raw_values(op, g, op.inputs[:1]):
        return None
    x, begin, size = v[0], _ints(v[1]), _ints(v[2])
    idx = tuple(slice(b, x.shape[i] if s == -1 else b + s)
                for i, (b, s) in enumerate(zip(begin, size, strict=True)))
    return [x[idx]]


@_folder("PACK")
def _pack(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if not _moves_raw_values(op, g, op.inputs):
        return None
    return [np.stack(v, axis=op.options.get("axis", 0))]


@_folder("UNPACK")
def _unpack(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if not _moves_raw_values(op, g, op.inputs):
        return None
    x = v[0]
    axis = _axis(op.options.get("axis", 0), x.ndim)
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


@_folder("GATHER")
def _gather(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if op.options.get("batch_dims", 0) != 0 or not _moves_raw_values(op, g, op.inputs[:1]):
        return None
    params, indices = v[0], v[1]
    axis = _axis(op.options.get("axis", 0), params.ndim)
    if np.any(indices < 0) or np.any(indices >= params.shape[axis]):
        raise ValueError(f"index out of range [0, {params.shape[axis]})")
    return [np.take(params, indices.astype(np.int64), axis=axis)]


def _reduce(fn: Callable[..., np.ndarray]) -> Folder:
    def fold(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
        x = v[0]
        if g.tensors[op.inputs[0]].quant is not None:  # quantised reductions rescale
            return None
        axes = tuple(sorted({_axis(a, x.ndim) for a in _ints(v[1])}))
        return [fn(x, axis=axes, keepdims=bool(op.options.get("keep_dims", False)))]
    return fold


_FOLDERS["REDUCE_PROD"] = _reduce(np.prod)
_FOLDERS["SUM"] = _reduce(np.sum)


@_folder("CONCATENATION")
def _concat(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if not _moves_raw_values(op, g, op.inputs) or op.options.get("fused_activation_function",
                                                                  "NONE") != "NONE":
        return None
    return [np.concatenate(v, axis=_axis(op.options.get("axis", 0), v[0].ndim))]


def resolve_reshape_shape(n_elements: int, target: list[int], where: str) -> tuple[int, ...]:
    """Target shape of a RESHAPE with at most one -1 filled in (TF semantics)."""
    unknown = [i for i, d in enumerate(target) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in target):
        raise UnsupportedModelError(f"{where}: invalid reshape target {target}")
    known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
    out = list(target)
    if unknown:
        if known == 0 or n_elements % known:
            raise UnsupportedModelError(
                f"{where}: cannot reshape {n_elements} elements to {target}")
        out[unknown[0]] = n_elements // known
    elif known != n_elements:
        raise UnsupportedModelError(f"{where}: cannot reshape {n_elements} elements to {target}")
    return tuple(out)


def _reshape_target(op: Op, g: Graph) -> list[int] | None:
    """The requested shape: the shape operand if constant, else the new_shape option."""
    if len(op.inputs) > 1 and op.inputs[1] >= 0:
        st = g.tensors[op.inputs[1]]
        if st.is_const:
            return _ints(st.data)
        return None
    ns = op.options.get("new_shape")
    return list(ns) if ns else None


@_folder("RESHAPE")
def _reshape(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if not _moves_raw_values(op, g, op.inputs[:1]):
        return None
    target = _reshape_target(op, g)
    shape = (resolve_reshape_shape(v[0].size, target, op.where) if target is not None
             else g.tensors[op.outputs[0]].shape)
    return [v[0].reshape(shape)]


@_folder("SQUEEZE")
def _squeeze(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if not _moves_raw_values(op, g, op.inputs[:1]):
        return None
    return [v[0].reshape(_squeeze_shape(v[0].shape, op.options.get("squeeze_dims") or []))]


def _squeeze_shape(shape: tuple[int, ...], dims: list[int]) -> tuple[int, ...]:
    if not dims:
        return tuple(d for d in shape if d != 1)
    drop = {_axis(d, len(shape)) for d in dims}
    return tuple(d for i, d in enumerate(shape) if i not in drop)


@_folder("EXPAND_DIMS")
def _expand_dims(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if not _moves_raw_values(op, g, op.inputs[:1]):
        return None
    return [np.expand_dims(v[0], _ints(v[1])[0])]


@_folder("TRANSPOSE")
def _transpose(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if not _moves_raw_values(op, g, op.inputs[:1]):
        return None
    return [np.transpose(v[0], _ints(v[1]))]


@_folder("TILE")
def _tile(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    if not _moves_raw_values(op, g, op.inputs[:1]):
        return None
    mult = _ints(v[1])
    if len(mult) != v[0].ndim or any(m < 0 for m in mult):
        raise ValueError(f"multiples {mult} do not fit the input shape {list(v[0].shape)}")
    return [np.tile(v[0], mult)]


@_folder("CAST")
def _cast(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    # numpy's astype truncates float -> int toward zero and maps nonzero -> True, as TF does.
    return [v[0].astype(g.tensors[op.outputs[0]].dtype)]


@_folder("FILL")
def _fill(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    return [np.full(_ints(v[0]), v[1].reshape(()), dtype=g.tensors[op.outputs[0]].dtype)]


@_folder("RANGE")
def _range(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    start, limit, delta = (x.reshape(()).item() for x in v[:3])
    if delta == 0:
        raise ValueError("delta 0")
    return [np.arange(start, limit, delta, dtype=g.tensors[op.outputs[0]].dtype)]


_ACT_CLAMP = {"NONE": (None, None), "RELU": (0, None), "RELU6": (0, 6), "RELU_N1_TO_1": (-1, 1)}


def _int_binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Folder:
    def fold(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
        ts = [g.tensors[t] for t in op.inputs[:2]] + [g.tensors[op.outputs[0]]]
        # Only plain integers (shape arithmetic): quantised/float maths belongs to the kernels.
        if any(t.quant is not None or not np.issubdtype(np.dtype(t.dtype), np.integer) for t in ts):
            return None
        act = op.options.get("fused_activation_function", "NONE")
        if act not in _ACT_CLAMP:
            return None
        a, b = v[0].astype(np.int64), v[1].astype(np.int64)
        res = fn(a, b)
        lo, hi = _ACT_CLAMP[act]
        if lo is not None or hi is not None:
            res = np.clip(res, lo, hi)
        return [res]
    return fold


def _div_trunc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.any(b == 0):
        raise ValueError("integer division by zero")
    q = np.abs(a) // np.abs(b)  # TFLite's integer DIV is C division: rounds toward zero
    return np.where((a < 0) != (b < 0), -q, q)


def _floor_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.any(b == 0):
        raise ValueError("integer division by zero")
    return np.floor_divide(a, b)


_FOLDERS["ADD"] = _int_binary(np.add)
_FOLDERS["SUB"] = _int_binary(np.subtract)
_FOLDERS["MUL"] = _int_binary(np.multiply)
_FOLDERS["DIV"] = _int_binary(_div_trunc)
_FOLDERS["FLOOR_DIV"] = _int_binary(_floor_div)


@_folder("DEQUANTIZE")
def _dequantize(op: Op, v: Values, g: Graph) -> list[np.ndarray] | None:
    src = g.tensors[op.inputs[0]]
    if g.tensors[op.outputs[0]].dtype != "float32":
        return None
    x = v[0]
    if src.dtype == "float16":
        return [x.astype(np.float32)]
    if src.quant is None or src.dtype not in ("int8", "uint8", "int16"):
        return None
    q = src.quant
    scale, zp = q.scale.astype(np.float64), q.zero_point
    if q.per_channel:
        bshape = [1] * x.ndim
        bshape[q.axis] = -1
        scale, zp = scale.reshape(bshape), zp.reshape(bshape)
    # (q - zp) is a small exact integer, so one float64 product rounded to float32 equals
    # the float32 product TFLite's kernels compute.
    return [((x.astype(np.int64) - zp) * scale).astype(np.float32)]


# Folded ops whose trailing operands TFLite lets a model omit (-1).
_OPTIONAL_INPUTS = {"STRIDED_SLICE", "RESHAPE"}


def folded_op_types() -> dict[str, str]:
    """Op types this pass evaluates at generate time, with how (for `stm32ai supported-ops`)."""
    how = "constant inputs: evaluated at generate time (the op disappears)"
    return {k: ("evaluated at generate time from its input's static shape (the op disappears)"
                if k == "SHAPE" else how) for k in _FOLDERS}


# -- driver -----------------------------------------------------------------------------

def _try_fold(op: Op, g: Graph) -> bool:
    fn = _FOLDERS.get(op.type)
    if fn is None or not op.outputs:
        return False
    if op.type == "SHAPE":  # needs only the static shape of its input
        values: Values = [None]
    else:
        present = [t for t in op.inputs if t >= 0]
        if not present or not all(g.tensors[t].is_const for t in present):
            return False
        if len(present) != len(op.inputs) and op.type not in _OPTIONAL_INPUTS:
            return False  # an omitted operand the op needs: left to the support check to refuse
        values = [g.tensors[t].data if t >= 0 else None for t in op.inputs]
    try:
        results = fn(op, values, g)
    except (ValueError, IndexError, TypeError, OverflowError) as e:
        raise UnsupportedModelError(
            f"cannot evaluate constant {op.where} at compile time: {e} — the model is inconsistent; "
            "re-export it") from None
    if results is None or len(results) != len(op.outputs):
        return False
    for tid, value in zip(op.outputs, results, strict=True):
        t = g.tensors[tid]
        # A fresh C-ordered array (np.ascontiguousarray would turn scalars into shape (1,)).
        arr = np.array(value, dtype=t.dtype, order="C")
        t.data = arr
        t.shape = tuple(int(d) for d in arr.shape)
    return True


def _fc_out_shape(op: Op, g: Graph, in_shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """FULLY_CONNECTED output shape from its input: every row of `in_features` (the weights'
    second dimension) gives one output row. A converter that flattens a dynamic batch stores
    the FC output with one row; the input's resolved shape has them all."""
    if len(op.inputs) < 2 or op.inputs[1] < 0 or not op.outputs:
        return None
    w = g.tensors[op.inputs[1]].shape
    if len(w) != 2 or w[1] <= 0 or not in_shape or in_shape[-1] <= 0:
        return None
    size = int(np.prod(in_shape, dtype=np.int64))
    if size % w[1]:
        return None  # malformed: left to the support check
    if op.options.get("keep_num_dims", False):
        return (*in_shape[:-1], int(w[0])) if in_shape[-1] == w[1] else None
    return (size // int(w[1]), int(w[0]))


def _resolve_shapes(g: Graph) -> bool:
    """Give RESHAPE/SQUEEZE/EXPAND_DIMS (and FULLY_CONNECTED) outputs their static shape once
    it is known.

    Returns True if a shape changed (a SHAPE op downstream may now fold).
    """
    changed = False
    for op in g.ops:
        if not op.inputs or op.inputs[0] < 0 or not op.outputs:
            continue
        src = g.tensors[op.inputs[0]]
        if any(d < 0 for d in src.shape):
            continue
        out = g.tensors[op.outputs[0]]
        shape = None
        if op.type == "RESHAPE":
            target = _reshape_target(op, g)
            if target is not None:
                shape = resolve_reshape_shape(src.size, target, op.where)
        elif op.type == "SQUEEZE" and any(d < 0 for d in out.shape):
            shape = _squeeze_shape(src.shape, op.options.get("squeeze_dims") or [])
        elif op.type == "FULLY_CONNECTED":
            shape = _fc_out_shape(op, g, src.shape)
        elif (op.type == "EXPAND_DIMS" and any(d < 0 for d in out.shape) and len(op.inputs) > 1
              and g.tensors[op.inputs[1]].is_const):
            axis = _ints(g.tensors[op.inputs[1]].data)[0]
            dims = list(src.shape)
            dims.insert(axis + len(dims) + 1 if axis < 0 else axis, 1)
            shape = tuple(dims)
        if shape is not None and tuple(shape) != out.shape:
            out.shape = tuple(shape)
            changed = True
    return changed


def _remove_dead_ops(g: Graph) -> None:
    needed = set(g.outputs)
    kept: list[Op] = []
    for op in reversed(g.ops):
        if any(t in needed for t in op.outputs) or not op.outputs:  # no outputs: writes state
            kept.append(op)
            needed.update(t for t in op.inputs if t >= 0)
    kept.reverse()
    g.ops = kept


def fold_constants(g: Graph) -> Graph:
    """Evaluate constant ops, resolve reshape shapes, drop dead ops. Mutates and returns g."""
    changed = True
    while changed:
        remaining = [op for op in g.ops if not _try_fold(op, g)]
        folded = len(remaining) != len(g.ops)
        g.ops = remaining
        changed = _resolve_shapes(g) or folded
    _remove_dead_ops(g)
    return g
