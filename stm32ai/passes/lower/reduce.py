"""MEAN, SUM, REDUCE_MAX, REDUCE_MIN, ARG_MAX, ARG_MIN -> the reduction kernels
(docs/kernels_reduce.md).

Every reduction over any set of axes is turned, here, into a walk over the input in memory
order: the input shape with its size-1 dimensions dropped and neighbouring dimensions of the
same kind (reduced / kept) merged, and for each merged dimension its stride in the output
(0 for a reduced one). `reduce_plan` does it; the C kernels only walk and accumulate. The walk
visits the elements of each output in increasing input order, as TFLite's reference Reduce
does, so float sums are bit-exact with TFLite Micro.

int8 MEAN and SUM follow TFLite Micro's reference QuantizedMeanOrSum (integer version):

    sum   = sum of the raw int8 inputs (int32, in scratch)
    y     = clamp(requant(sum - in_zp * n, M, s) + out_zp, -128, 127)

with (M, s) = QuantizeMultiplier(double(in_scale) / double(out_scale)); for MEAN the 1/n is
folded into the multiplier as TFLite does it: k = min(floor(log2 n), 32, 31 + s),
M' = (M << k) // n, s' = s - k.

int8 REDUCE_MAX / REDUCE_MIN need equal input and output quantisation (TFLite Micro requires
it); ARG_MAX / ARG_MIN return the first index of the extreme value, int32 or int64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stm32ai.ir import MAX_DIMS, Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import per_tensor_io
from stm32ai.passes.lower.common import scale_of as _scale
from stm32ai.passes.lower.common import zp_of as _zp
from stm32ai.passes.quant import quantize_multiplier

__all__ = ["MAX_DIMS", "ReducePlan", "mean_multiplier", "reduce_plan", "resolve_axes"]

_REDUCE_F32 = {"MEAN": "reduce_mean_f32", "SUM": "reduce_sum_f32",
               "REDUCE_MAX": "reduce_max_f32", "REDUCE_MIN": "reduce_min_f32"}
_REDUCE_S8 = {"MEAN": "reduce_sum_s8", "SUM": "reduce_sum_s8",
              "REDUCE_MAX": "reduce_max_s8", "REDUCE_MIN": "reduce_min_s8"}


# ---- axis handling -------------------------------------------------------------------------

def _axis_values(g: Graph, op: Op) -> list[int] | str:
    if len(op.inputs) < 2 or op.inputs[1] < 0:
        return "the axis operand is missing"
    a = g.tensors[op.inputs[1]]
    if not a.is_const:
        return f"axis '{a.name}' is computed at run time; only constant axes are supported"
    if a.dtype not in ("int32", "int64"):
        return f"axis '{a.name}' is {a.dtype}; int32 or int64 expected"
    assert a.data is not None
    return [int(v) for v in np.asarray(a.data).reshape(-1)]


def resolve_axes(axes: list[int], rank: int) -> list[int] | str:
    """TFLite's ResolveAxis: negative axes wrap, duplicates are dropped (first kept)."""
    out: list[int] = []
    for a in axes:
        r = a + rank if a < 0 else a
        if not 0 <= r < rank:
            return f"axis {a} is out of range for a rank-{rank} input"
        if r not in out:
            out.append(r)
    return out


@dataclass
class ReducePlan:
    shape: list[int]    # merged dimensions, outermost first
    ostride: list[int]  # output stride of each merged dimension (0: reduced)
    out_size: int       # number of outputs
    count: int          # inputs folded into each output

    def attrs(self) -> dict[str, object]:
        pad = MAX_DIMS - len(self.shape)
        return {"ndim": len(self.shape), "shape": self.shape + [1] * pad,
                "ostride": self.ostride + [0] * pad, "out_size": self.out_size}


def reduce_plan(shape: tuple[int, ...], axes: list[int]) -> ReducePlan:
    """Merged walk of `shape` reducing `axes` (already resolved)."""
    red = set(axes)
    dims: list[list[int]] = []  # [extent, reduced]
    for d, n in enumerate(shape):
        if n == 1:
            continue
        r = int(d in red)
        if dims and dims[-1][1] == r:
            dims[-1][0] *= n
        else:
            dims.append([n, r])
    if not dims:
        dims = [[1, 0]]
    ostride = [0] * len(dims)
    s = 1
    for i in range(len(dims) - 1, -1, -1):
        if not dims[i][1]:
            ostride[i] = s
            s *= dims[i][0]
    count = int(np.prod([shape[a] for a in red], dtype=np.int64)) if red else 1
    return ReducePlan([d[0] for d in dims], ostride, s, count)


def mean_multiplier(in_scale: float, out_scale: float, count: int, mean: bool) -> tuple[int, int]:
    """Requantisation of a raw sum of `count` inputs: TFLite's QuantizedMeanOrSum."""
    m, s = quantize_multiplier(float(np.float32(in_scale)) / float(np.float32(out_scale)))
    if mean and count > 1:
        k = min(count.bit_length() - 1, 32, 31 + s)
        m = (m << k) // count
        s -= k
    return int(m), int(s)


# ---- checks ----------------------------------------------------------------------------------

def _expected_out_shape(shape: tuple[int, ...], axes: list[int], keep: bool) -> tuple[int, ...]:
    if keep:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def _io_axes(op: Op, g: Graph) -> tuple[Tensor, Tensor, list[int]] | str:
    """Input, output and constant axes of a reduction, or the reason they are unusable."""
    if not op.inputs or op.inputs[0] < 0 or len(op.outputs) != 1:
        return "expects an input, an axis operand and one output"
    axes = _axis_values(g, op)
    if isinstance(axes, str):
        return axes
    return g.tensors[op.inputs[0]], g.tensors[op.outputs[0]], axes


def check_reduce(op: Op, g: Graph) -> str | None:
    io = _io_axes(op, g)
    if isinstance(io, str):
        return io
    x, y, axes = io
    if len(x.shape) > MAX_DIMS:
        return f"input '{x.name}' has rank {len(x.shape)}; at most {MAX_DIMS} is supported"
    axes = resolve_axes(axes, len(x.shape))
    if isinstance(axes, str):
        return axes
    keep = bool(op.options.get("keep_dims", False))
    want = _expected_out_shape(x.shape, axes, keep)
    if int(np.prod(want, dtype=np.int64)) != y.size:
        return (f"output '{y.name}' {list(y.shape)} does not match reducing {list(x.shape)} over "
                f"axes {axes} (keep_dims={keep}) — the model is inconsistent")
    if x.size == 0 or y.size == 0:
        return "empty tensor"
    if x.dtype != y.dtype:
        return f"input '{x.name}' is {x.dtype} but output '{y.name}' is {y.dtype}"
    if x.dtype == "float32":
        return None
    if x.dtype != "int8":
        return f"{x.dtype} tensors are not supported (int8 or float32)"
    reason = per_tensor_io(x, y)
    if reason:
        return reason
    if op.type in ("REDUCE_MAX", "REDUCE_MIN") and (_scale(x) != _scale(y) or _zp(x) != _zp(y)):
        return (f"int8 {op.type} with different input and output quantisation is not supported "
                "(TFLite Micro requires them equal)")
    if op.type in ("MEAN", "SUM"):
        if not axes and (_scale(x) != _scale(y) or _zp(x) != _zp(y)):
            return (f"int8 {op.type} over no axis with different input and output quantisation "
                    "is ambiguous (TFLite versions copy or requantise); not supported")
        plan = reduce_plan(x.shape, axes)
        if plan.count * 128 * 2 >= 1 << 31:
            return f"{plan.count} elements per output overflow the int32 sum"
    return None


def check_arg(op: Op, g: Graph) -> str | None:
    io = _io_axes(op, g)
    if isinstance(io, str):
        return io
    x, y, axes = io
    if len(axes) != 1:
        return f"{len(axes)} axes given; {op.type} reduces exactly one axis"
    axes = resolve_axes(axes, len(x.shape))
    if isinstance(axes, str):
        return axes
    if x.dtype not in ("int8", "float32"):
        return f"input '{x.name}' is {x.dtype}; int8 or float32 is supported"
    if y.dtype not in ("int32", "int64"):
        return f"output '{y.name}' is {y.dtype}; int32 or int64 is supported"
    want = _expected_out_shape(x.shape, axes, False)
    if int(np.prod(want, dtype=np.int64)) != y.size:
        return (f"output '{y.name}' {list(y.shape)} does not match reducing {list(x.shape)} over "
                f"axis {axes[0]} — the model is inconsistent")
    if x.size == 0:
        return "empty tensor"
    return None


# ---- lowering --------------------------------------------------------------------------------

def _lower_reduce(op: Op, g: Graph) -> None:
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    axes = resolve_axes(_axis_values(g, op), len(x.shape))  # type: ignore[arg-type]
    assert not isinstance(axes, str)
    plan = reduce_plan(x.shape, axes)
    op.inputs = [op.inputs[0]]
    op.macc = x.size
    attrs = plan.attrs()
    if x.dtype == "float32":
        op.kernel = _REDUCE_F32[op.type]
        if op.type == "MEAN":
            attrs["count"] = plan.count
    else:
        op.kernel = _REDUCE_S8[op.type]
        if op.type in ("MEAN", "SUM"):
            m, s = mean_multiplier(_scale(x), _scale(y), plan.count, op.type == "MEAN")
            bias = -_zp(x) * plan.count
            attrs.update({"bias": int(bias), "multiplier": m, "shift": s, "out_offset": _zp(y),
                          "act_min": -128, "act_max": 127})
            op.scratch = 4 * plan.out_size
    op.attrs = attrs


def _lower_arg(op: Op, g: Graph) -> None:
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    axes = resolve_axes(_axis_values(g, op), len(x.shape))  # type: ignore[arg-type]
    assert not isinstance(axes, str)
    a = axes[0]
    outer = int(np.prod(x.shape[:a], dtype=np.int64))
    inner = int(np.prod(x.shape[a + 1:], dtype=np.int64))
    kind = "max" if op.type == "ARG_MAX" else "min"
    op.kernel = f"arg_{kind}_{'f32' if x.dtype == 'float32' else 's8'}"
    op.inputs = [op.inputs[0]]
    op.attrs = {"outer": outer, "axis_size": int(x.shape[a]), "inner": inner,
                "out_i64": int(y.dtype == "int64")}
    op.macc = x.size


_REDUCE_DOC = "int8 (per-tensor) or float32; any set of axes (negative, repeated), keep_dims; rank <= 6"

for _t, _extra in (("MEAN", "; int8 requantises like TFLite Micro (integer 1/n)"),
                   ("SUM", "; int8 requantises like TFLite Micro"),
                   ("REDUCE_MAX", "; int8 input and output quantisation equal"),
                   ("REDUCE_MIN", "; int8 input and output quantisation equal")):
    register(_t, _REDUCE_DOC + _extra, check_reduce)(_lower_reduce)

for _t in ("ARG_MAX", "ARG_MIN"):
    register(_t, "int8 or float32 input, one constant axis, int32 or int64 output "
             "(first index of the extreme value)", check_arg)(_lower_arg)
