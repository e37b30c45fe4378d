"""Lowering of the shape and data-movement ops (docs/kernels_movement.md).

Every op here only moves stored values, so it reduces to one of three byte-copy kernels
whose parameters are computed here:

* ``copy_nd`` - an output-ordered walk over an N-D view of the input: per outer
  dimension either an affine byte stride or a table of byte offsets (an entry < 0 fills
  the block with a pad value), then a contiguous block. TRANSPOSE, SLICE, STRIDED_SLICE,
  SPLIT, SPLIT_V, UNPACK, DEPTH_TO_SPACE, SPACE_TO_DEPTH, PAD, PADV2, MIRROR_PAD and
  RESIZE_NEAREST_NEIGHBOR (resize.py) all become it. Most index maps are derived from a
  numpy model of the op applied to an array of element indices, then decomposed and
  verified, so the C kernel and the numpy semantics cannot drift apart;
* ``concat`` - CONCATENATION and PACK (up to 10 inputs per kernel call; longer lists are
  chained through intermediate tensors);
* ``gather`` - GATHER with runtime or constant indices.

Ops with several outputs (SPLIT, SPLIT_V, UNPACK) become one ``copy_nd`` per used
output: the lowering appends the extra ops right after the original one.

Values are moved unchanged, as TFLite's kernels do; that is only meaningful when the
input and output quantisation agree (the converter guarantees it), so a mismatch is
refused rather than silently reinterpreted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from stm32ai.ir import DTYPE_SIZES, MAX_DIMS, Graph, Op, Quant
from stm32ai.passes.lower import register

T = TypeVar("T")

MAX_CONCAT_INPUTS = 10  # AI_CONCAT_MAX_INPUTS
_MAX_BYTES = (1 << 31) - 1  # kernels index with int32 byte offsets


# ---------------------------------------------------------------------------------------
# shared checks
# ---------------------------------------------------------------------------------------

def same_quant(a: Quant | None, b: Quant | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return (a.scale.shape == b.scale.shape and bool(np.all(a.scale == b.scale))
            and a.zero_point.shape == b.zero_point.shape
            and bool(np.all(a.zero_point == b.zero_point)))


def const_ints(g: Graph, tid: int) -> list[int] | None:
    if tid < 0 or not g.tensors[tid].is_const:
        return None
    return [int(x) for x in np.asarray(g.tensors[tid].data).reshape(-1)]


def _qdesc(q: Quant | None) -> str:
    if q is None:
        return "none"
    return f"scale {q.scale.tolist()} zero point {q.zero_point.tolist()}"


def check_moved(op: Op, g: Graph, data_inputs: list[int], outputs: list[int] | None = None,
                max_rank: int | None = MAX_DIMS) -> str | None:
    """Common conditions of a value-moving op: static shapes, one dtype, one quantisation."""
    outs = op.outputs if outputs is None else outputs
    if not data_inputs or any(t < 0 for t in data_inputs) or not outs:
        return "missing input or output tensor"
    ref = g.tensors[data_inputs[0]]
    for tid in list(data_inputs) + list(outs):
        t = g.tensors[tid]
        if any(d <= 0 for d in t.shape):
            return f"tensor '{t.name}' has a dynamic or empty shape {list(t.shape)}"
        if t.dtype != ref.dtype:
            return f"tensor '{t.name}' is {t.dtype}, '{ref.name}' is {ref.dtype}: types must match"
        if t.nbytes > _MAX_BYTES:
            return f"tensor '{t.name}' is larger than 2 GiB"
        if max_rank is not None and len(t.shape) > max_rank:
            return f"tensor '{t.name}' has rank {len(t.shape)}, at most {max_rank} is supported"
    out_q = g.tensors[outs[0]].quant
    for tid in list(data_inputs) + list(outs):
        t = g.tensors[tid]
        if not same_quant(t.quant, out_q):
            return (f"tensor '{t.name}' is quantised with {_qdesc(t.quant)} but the output with "
                    f"{_qdesc(out_q)}: values are moved unchanged, so the quantisation must match "
                    "(the TFLite converter always makes it match; re-export the model)")
        if t.quant is not None and t.quant.per_channel:
            return f"tensor '{t.name}' is quantised per channel; moved tensors must be per-tensor"
    return None


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def moved_params(op: Op, g: Graph, params: Callable[[Op, Graph], T | str]) -> T | str:
    """check_moved on the op's data input, then `params(op, g)`: the op's constant
    parameters, or the first reason it is refused."""
    r = check_moved(op, g, op.inputs[:1])
    return r if r else params(op, g)


# ---------------------------------------------------------------------------------------
# copy_nd: index maps -> kernel parameters
# ---------------------------------------------------------------------------------------

@dataclass
class Dim:
    """One output dimension of a copy: an affine input stride, or a table of input
    offsets in elements (None entries are padding: the block is filled)."""

    size: int
    stride: int = 0
    table: list[int | None] | None = None


def _progression(offsets: list[int]) -> int | None:
    """The step s when offsets[i] == offsets[0] + i * s for all i, else None."""
    s = offsets[1] - offsets[0] if len(offsets) > 1 else 0
    return s if all(o == offsets[0] + i * s for i, o in enumerate(offsets)) else None


def dims_from_map(m: np.ndarray) -> tuple[list[Dim], int]:
    """Decompose an index map (output-ordered array of input element indices) into
    per-dimension offset tables plus a base, verifying that it is separable:
    m[i0, i1, ...] == base + sum_d table_d[i_d]."""
    m = np.asarray(m, np.int64)
    base = int(m.flat[0])
    dims: list[Dim] = []
    recon = np.full(m.shape, base, np.int64)
    for ax, n in enumerate(m.shape):
        line = m[tuple(slice(None) if a == ax else 0 for a in range(m.ndim))] - base
        shape = [1] * m.ndim
        shape[ax] = n
        recon = recon + line.reshape(shape)
        dims.append(Dim(n, 0, [int(x) for x in line]))  # coalesce() makes it canonical
    if not np.array_equal(recon, m):
        raise AssertionError("index map is not separable per dimension")
    return dims, base


def coalesce(dims: list[Dim], base: int) -> tuple[list[Dim], int, int]:
    """Canonical copy_nd form. Tables are shifted to a minimum of 0 (with that, every
    partial offset the kernel forms is >= 0, which lets it use -1 for padding);
    padding-free progressions become affine; unit dimensions go; affine neighbours
    merge; the contiguous tail becomes the block. Returns (outer dims, base, block)."""
    kept: list[Dim] = []
    for d in dims:
        if d.table is not None:
            valid = [x for x in d.table if x is not None]
            lo = min(valid) if valid else 0
            t = [None if x is None else x - lo for x in d.table]
            base += lo
            step = _progression(valid) if len(valid) == len(t) else None
            if step is not None:
                base += t[0] or 0
                d = Dim(d.size, step)
            else:
                d = Dim(d.size, 0, t)
        if d.size == 1 and d.table is None:
            continue
        kept.append(d)
    merged: list[Dim] = []
    for d in kept:
        prev = merged[-1] if merged else None
        if (prev is not None and prev.table is None and d.table is None
                and prev.stride == d.stride * d.size):
            merged[-1] = Dim(prev.size * d.size, d.stride)
        else:
            merged.append(d)
    block = 1
    if merged and merged[-1].table is None and merged[-1].stride == 1:
        block = merged.pop().size
    return merged, base, block


def fill_words(value: object, dtype: str) -> list[int]:
    """An element's raw bits as two signed int32 words (low, high)."""
    raw = np.zeros(1, np.dtype(dtype))
    raw[0] = value
    bits = int(raw.view(f"<u{DTYPE_SIZES[dtype]}")[0]) if DTYPE_SIZES[dtype] in (1, 2, 4, 8) else 0

    def s32(x: int) -> int:
        x &= 0xFFFFFFFF
        return x - (1 << 32) if x >= (1 << 31) else x

    return [s32(bits), s32(bits >> 32)]


def set_copy(op: Op, g: Graph, src: int, dst: int, dims: list[Dim], base: int,
             fill: list[int] | None = None) -> None:
    """Make `op` a copy_nd call reading `src` and writing `dst`."""
    dtype = g.tensors[dst].dtype
    es = DTYPE_SIZES[dtype]
    outer, base, block = coalesce(dims, base)
    if len(outer) > MAX_DIMS:
        raise AssertionError(f"{op.where}: {len(outer)} outer dimensions after coalescing")
    if int(np.prod([d.size for d in outer], dtype=np.int64)) * block != g.tensors[dst].size:
        raise AssertionError(f"{op.where}: copy does not cover the output")
    tables: list[int] = []
    table_at = []
    for d in outer:
        if d.table is None:
            table_at.append(-1)
        else:
            table_at.append(len(tables))
            tables.extend(-1 if x is None else x * es for x in d.table)
    pad = MAX_DIMS - len(outer)
    op.kernel = "copy_nd"
    op.attrs = {
        "rank": len(outer),
        "dims": [d.size for d in outer] + [1] * pad,
        "stride": [d.stride * es for d in outer] + [0] * pad,
        "table": table_at + [-1] * pad,
        "base": base * es,
        "block": block * es,
        "elem_size": es,
        "fill": fill if fill is not None else [0, 0],
    }
    tab = -1
    if tables:
        tab = g.add_const(f"{g.tensors[dst].name}/copy_table", np.asarray(tables, np.int32))
    op.inputs = [src, tab]
    op.outputs = [dst]
    op.macc = 0
    op.scratch = 0
    op.inplace = False


def copy_from_map(op: Op, g: Graph, src: int, dst: int, m: np.ndarray) -> None:
    if m.size != g.tensors[dst].size:
        raise AssertionError(f"{op.where}: index map has {m.size} elements, output "
                             f"{g.tensors[dst].size}")
    dims, base = dims_from_map(m)
    set_copy(op, g, src, dst, dims, base)


def index_array(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)


def op_position(g: Graph, op: Op) -> int:
    return next(i for i, o in enumerate(g.ops) if o is op)


def _used(g: Graph, tid: int) -> bool:
    return tid in g.outputs or bool(g.consumers(tid))


def lower_multi(op: Op, g: Graph, src: int, maps: list[np.ndarray]) -> None:
    """One copy_nd per used output of a multi-output op; extra ops follow `op`."""
    outs = list(op.outputs)
    used = [k for k, t in enumerate(outs) if _used(g, t)] or [0]
    pos = op_position(g, op)
    first = True
    for k in used:
        target = op if first else Op(type=op.type, inputs=[], outputs=[], options=dict(op.options),
                                     index=op.index)
        copy_from_map(target, g, src, outs[k], maps[k])
        if not first:
            pos += 1
            g.ops.insert(pos, target)
        first = False


# ---------------------------------------------------------------------------------------
# TRANSPOSE
# ---------------------------------------------------------------------------------------

def _check_transpose(op: Op, g: Graph) -> str | None:
    perm = const_ints(g, op.inputs[1]) if len(op.inputs) > 1 else None
    if perm is None:
        return "the permutation must be a constant tensor"
    r = check_moved(op, g, op.inputs[:1])
    if r:
        return r
    rank = len(g.tensors[op.inputs[0]].shape)
    if sorted(_axis(p, rank) for p in perm) != list(range(rank)):
        return f"permutation {perm} is not a permutation of {rank} axes"
    shape = g.tensors[op.inputs[0]].shape
    want = [shape[_axis(p, rank)] for p in perm]
    if list(g.tensors[op.outputs[0]].shape) != want:
        return f"output shape {list(g.tensors[op.outputs[0]].shape)} is not the permuted input shape {want}"
    return None


@register("TRANSPOSE", "any type; constant permutation; rank <= 6", _check_transpose)
def _lower_transpose(op: Op, g: Graph) -> None:
    src = op.inputs[0]
    rank = len(g.tensors[src].shape)
    perm = [_axis(p, rank) for p in const_ints(g, op.inputs[1]) or []]
    copy_from_map(op, g, src, op.outputs[0], np.transpose(index_array(g.tensors[src].shape), perm))


# ---------------------------------------------------------------------------------------
# SLICE / STRIDED_SLICE
# ---------------------------------------------------------------------------------------

def _slice_ranges(op: Op, g: Graph) -> list[range] | str:
    shape = g.tensors[op.inputs[0]].shape
    begin = const_ints(g, op.inputs[1]) if len(op.inputs) > 1 else None
    size = const_ints(g, op.inputs[2]) if len(op.inputs) > 2 else None
    if begin is None or size is None:
        return "begin and size must be constant tensors"
    if len(begin) != len(shape) or len(size) != len(shape):
        return f"begin {begin} / size {size} do not match the input rank {len(shape)}"
    out = []
    for b, s, n in zip(begin, size, shape, strict=True):
        e = n if s == -1 else b + s
        if not 0 <= b <= e <= n:
            return f"slice begin {begin} size {size} is out of range for shape {list(shape)}"
        out.append(range(b, e))
    return out


def _bit(mask: int, i: int) -> bool:
    return bool((mask >> i) & 1)


def strided_slice_ranges(shape: tuple[int, ...], begin: list[int], end: list[int],
                         strides: list[int], options: dict) -> list[range] | str:
    """Input elements selected along each input dimension by a TFLite STRIDED_SLICE (see
    `strided_slice_spec`), or the reason the slice is refused."""
    spec = strided_slice_spec(shape, begin, end, strides, options)
    return spec if isinstance(spec, str) else spec[0]


def strided_slice(x: np.ndarray, begin: list[int], end: list[int], strides: list[int],
                  options: dict) -> np.ndarray:
    """STRIDED_SLICE evaluated in numpy with the runtime lowering's own index ranges (constant
    folding uses this: one implementation). Raises ValueError with the reason on a bad slice."""
    spec = strided_slice_spec(tuple(x.shape), begin, end, strides, options)
    if isinstance(spec, str):
        raise ValueError(spec)
    ranges, out_shape = spec
    return x[np.ix_(*[np.asarray(r, np.int64) for r in ranges])].reshape(out_shape)


def strided_slice_spec(shape: tuple[int, ...], begin: list[int], end: list[int], strides: list[int],
                       options: dict) -> tuple[list[range], tuple[int, ...]] | str:
    """Per input dimension the elements a TFLite STRIDED_SLICE selects, and its output shape.

    Sparse spec -> dense spec as TensorFlow does (ellipsis expansion, new axes); then per
    axis TFLite's StartForAxis / EndForAxis (negative indices, clamping, begin/end masks,
    `offset`). A shrunk axis takes the single element at its start, where the start honours
    begin_mask as TFLite's StartForAxis does (LiteRT-ref agrees: tests/test_ops_move.py); the
    output drops shrunk axes and has a 1 for each new axis.
    """
    bm = int(options.get("begin_mask", 0))
    em = int(options.get("end_mask", 0))
    ellipsis = int(options.get("ellipsis_mask", 0))
    new_axis = int(options.get("new_axis_mask", 0))
    shrink = int(options.get("shrink_axis_mask", 0))
    offset = bool(options.get("offset", False))
    rank = len(shape)
    n = len(begin)
    if not (len(end) == n and len(strides) == n):
        return "begin, end and strides have different lengths"
    if bin(ellipsis & ((1 << n) - 1)).count("1") > 1:
        return "more than one ellipsis in the slice spec"
    if not ellipsis & ((1 << n) - 1):  # an implicit ellipsis at the end
        ellipsis |= 1 << n
        begin, end, strides = begin + [0], end + [0], strides + [1]
        n += 1
    first_ell = next(i for i in range(n) if _bit(ellipsis, i))
    add_after = sum(1 for i in range(first_ell + 1, n) if _bit(new_axis, i) and not _bit(ellipsis, i))
    dense: list[tuple[int, int, int, bool, bool, bool]] = []
    layout: list[int] = []  # output dims: the dense axis they come from, -1 for a new axis
    for i in range(n):
        if _bit(ellipsis, i):
            nxt = min(rank - (n - i) + 1 + add_after, rank)
            while len(dense) < nxt:
                layout.append(len(dense))
                dense.append((0, 0, 1, True, True, False))
        elif _bit(new_axis, i):
            layout.append(-1)
        else:
            layout.append(len(dense))
            dense.append((begin[i], end[i], strides[i], _bit(bm, i), _bit(em, i), _bit(shrink, i)))
    if len(dense) != rank:
        return f"slice spec covers {len(dense)} axes, the input has {rank}"
    out = []
    for (b, e, s, bmask, emask, shr), size in zip(dense, shape, strict=True):
        if s == 0:
            return "stride 0"
        start = b + size if b < 0 else b
        start = min(max(start, 0), size) if s > 0 else min(max(start, -1), size - 1)
        if bmask:
            start = 0 if s > 0 else size - 1
        if shr:
            if s < 0:
                return "a shrunk axis with a negative stride is not supported"
            if not 0 <= start < size:
                return f"index {b} is out of range for an axis of size {size}"
            out.append(range(start, start + 1))
            continue
        stop = e + start if offset else e
        stop = stop + size if stop < 0 else stop
        stop = min(max(stop, 0), size) if s > 0 else min(max(stop, -1), size - 1)
        if emask:
            stop = size if s > 0 else -1
        out.append(range(start, stop, s))
    out_shape = tuple(1 if d < 0 else len(out[d]) for d in layout if d < 0 or not dense[d][5])
    return out, out_shape


def _ss_ranges(op: Op, g: Graph) -> list[range] | str:
    shape = g.tensors[op.inputs[0]].shape
    begin = const_ints(g, op.inputs[1]) if len(op.inputs) > 1 else None
    end = const_ints(g, op.inputs[2]) if len(op.inputs) > 2 else None
    strides = const_ints(g, op.inputs[3]) if len(op.inputs) > 3 and op.inputs[3] >= 0 else None
    if begin is None or end is None:
        return "begin and end must be constant tensors"
    if strides is None:
        if len(op.inputs) > 3 and op.inputs[3] >= 0:
            return "strides must be a constant tensor"
        strides = [1] * len(begin)
    return strided_slice_ranges(shape, begin, end, strides, op.options)


def _selection(op: Op, g: Graph) -> list[range] | str:
    """The input elements a SLICE or STRIDED_SLICE selects along each input dimension."""
    return _slice_ranges(op, g) if op.type == "SLICE" else _ss_ranges(op, g)


def _check_selection(op: Op, g: Graph) -> str | None:
    rs = moved_params(op, g, _selection)
    if isinstance(rs, str):
        return rs
    counts = [len(x) for x in rs]
    out = g.tensors[op.outputs[0]].shape
    if (int(np.prod(counts, dtype=np.int64)) != g.tensors[op.outputs[0]].size
            or [c for c in counts if c != 1] != [d for d in out if d != 1]):
        return f"output shape {list(out)} does not match the slice (sizes {counts})"
    return None


def _lower_selection(op: Op, g: Graph) -> None:
    src = op.inputs[0]
    rs = _selection(op, g)
    assert not isinstance(rs, str)
    m = index_array(g.tensors[src].shape)[np.ix_(*[np.asarray(r, np.int64) for r in rs])]
    copy_from_map(op, g, src, op.outputs[0], m)


register("SLICE", "any type; constant begin/size; rank <= 6", _check_selection)(_lower_selection)
register("STRIDED_SLICE", "any type; constant begin/end/strides; all masks and offset; rank <= 6",
         _check_selection)(_lower_selection)


# ---------------------------------------------------------------------------------------
# SPLIT / SPLIT_V / UNPACK
# ---------------------------------------------------------------------------------------

def _split_parts(op: Op, g: Graph) -> tuple[int, int, list[int]] | str:
    """(data input, axis, sizes along the axis) of a SPLIT / SPLIT_V."""
    if op.type == "SPLIT":
        if len(op.inputs) < 2:
            return "missing input"
        src, axis_t = op.inputs[1], op.inputs[0]
    else:
        if len(op.inputs) < 3:
            return "missing input"
        src, axis_t = op.inputs[0], op.inputs[2]
    ax = const_ints(g, axis_t)
    if ax is None or len(ax) != 1:
        return "the split axis must be a constant scalar"
    rank = len(g.tensors[src].shape)
    axis = _axis(ax[0], rank)
    if not 0 <= axis < rank:
        return f"axis {ax[0]} is out of range for rank {rank}"
    sizes = []
    for t in op.outputs:
        s = g.tensors[t].shape
        if len(s) != rank:
            return f"output '{g.tensors[t].name}' has rank {len(s)}, the input {rank}"
        ins = g.tensors[src].shape
        if s[:axis] + s[axis + 1:] != ins[:axis] + ins[axis + 1:]:
            return f"output '{g.tensors[t].name}' {list(s)} differs from the input {list(ins)} off axis {axis}"
        sizes.append(s[axis])
    if sum(sizes) != g.tensors[src].shape[axis]:
        return f"output sizes {sizes} along axis {axis} do not add up to the input's"
    return src, axis, sizes


def _check_split(op: Op, g: Graph) -> str | None:
    parts = _split_parts(op, g)
    if isinstance(parts, str):
        return parts
    return check_moved(op, g, [parts[0]])


def _lower_split(op: Op, g: Graph) -> None:
    parts = _split_parts(op, g)
    assert not isinstance(parts, str)
    src, axis, sizes = parts
    idx = index_array(g.tensors[src].shape)
    maps, at = [], 0
    for s in sizes:
        sl = [slice(None)] * idx.ndim
        sl[axis] = slice(at, at + s)
        maps.append(idx[tuple(sl)])
        at += s
    lower_multi(op, g, src, maps)


register("SPLIT", "any type; constant axis; rank <= 6; one copy per used output",
         _check_split)(_lower_split)
register("SPLIT_V", "any type; constant axis (sizes from the output shapes); rank <= 6",
         _check_split)(_lower_split)


def _check_unpack(op: Op, g: Graph) -> str | None:
    r = check_moved(op, g, op.inputs[:1])
    if r:
        return r
    shape = g.tensors[op.inputs[0]].shape
    axis = _axis(int(op.options.get("axis", 0)), len(shape))
    if not 0 <= axis < len(shape):
        return f"axis {op.options.get('axis')} is out of range for rank {len(shape)}"
    if len(op.outputs) != shape[axis]:
        return f"{len(op.outputs)} outputs for an axis of size {shape[axis]}"
    want = shape[:axis] + shape[axis + 1:]
    for t in op.outputs:
        if g.tensors[t].shape != want:
            return (f"output '{g.tensors[t].name}' {list(g.tensors[t].shape)} is not the input "
                    f"without axis {axis} {list(want)}")
    return None


@register("UNPACK", "any type; any axis; rank <= 6; one copy per used output", _check_unpack)
def _lower_unpack(op: Op, g: Graph) -> None:
    src = op.inputs[0]
    idx = index_array(g.tensors[src].shape)
    axis = _axis(int(op.options.get("axis", 0)), idx.ndim)
    lower_multi(op, g, src, [np.take(idx, k, axis=axis) for k in range(idx.shape[axis])])


# ---------------------------------------------------------------------------------------
# DEPTH_TO_SPACE / SPACE_TO_DEPTH (NHWC)
# ---------------------------------------------------------------------------------------

def _check_d2s(op: Op, g: Graph) -> str | None:
    r = check_moved(op, g, op.inputs[:1])
    if r:
        return r
    shape = g.tensors[op.inputs[0]].shape
    b = int(op.options.get("block_size", 0))
    if len(shape) != 4:
        return f"input must be 4-D NHWC, got {list(shape)}"
    if b < 1:
        return f"block size {b}"
    n, h, w, c = shape
    if op.type == "DEPTH_TO_SPACE":
        if c % (b * b):
            return f"{c} channels are not a multiple of block_size^2 = {b * b}"
        expect = (n, h * b, w * b, c // (b * b))
    else:
        if h % b or w % b:
            return f"spatial size {h}x{w} is not a multiple of block size {b}"
        expect = (n, h // b, w // b, c * b * b)
    if g.tensors[op.outputs[0]].shape != expect:
        return f"output shape {list(g.tensors[op.outputs[0]].shape)}, expected {list(expect)}"
    return None


def _lower_d2s(op: Op, g: Graph) -> None:
    src = op.inputs[0]
    n, h, w, c = g.tensors[src].shape
    b = int(op.options["block_size"])
    idx = index_array((n, h, w, c))
    if op.type == "DEPTH_TO_SPACE":
        # out[n, y*b+i, x*b+j, k] = in[n, y, x, (i*b+j)*C' + k]; output order (n, y, i, x, j, k)
        m = idx.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    else:
        # out[n, y, x, (i*b+j)*C + k] = in[n, y*b+i, x*b+j, k]; output order (n, y, x, i, j, k)
        m = idx.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    copy_from_map(op, g, src, op.outputs[0], m)


register("DEPTH_TO_SPACE", "any type; NHWC (DCR order)", _check_d2s)(_lower_d2s)
register("SPACE_TO_DEPTH", "any type; NHWC", _check_d2s)(_lower_d2s)


# ---------------------------------------------------------------------------------------
# PAD / PADV2 / MIRROR_PAD
# ---------------------------------------------------------------------------------------

def _paddings(op: Op, g: Graph) -> list[tuple[int, int]] | str:
    shape = g.tensors[op.inputs[0]].shape
    p = const_ints(g, op.inputs[1]) if len(op.inputs) > 1 else None
    if p is None:
        return "paddings must be a constant tensor"
    if len(p) != 2 * len(shape):
        return f"paddings has {len(p)} values for rank {len(shape)}"
    pairs = [(p[2 * i], p[2 * i + 1]) for i in range(len(shape))]
    if any(a < 0 or b < 0 for a, b in pairs):
        return f"negative paddings {pairs}"
    out = tuple(n + a + b for n, (a, b) in zip(shape, pairs, strict=True))
    if out != g.tensors[op.outputs[0]].shape:
        return f"output shape {list(g.tensors[op.outputs[0]].shape)}, paddings give {list(out)}"
    return pairs


def _pad_value(op: Op, g: Graph) -> object | str:
    """The pad element as stored: PADV2's constant as it is, else zero (quantised zero)."""
    out = g.tensors[op.outputs[0]]
    if op.type == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        cv = g.tensors[op.inputs[2]]
        if not cv.is_const:
            return "the constant value must be a constant tensor"
        if cv.size != 1 or cv.dtype != out.dtype:
            return f"constant value must be one {out.dtype} element"
        if cv.quant is not None and not same_quant(cv.quant, out.quant):
            return (f"constant value quantised with {_qdesc(cv.quant)}, output with "
                    f"{_qdesc(out.quant)}")
        return np.asarray(cv.data).reshape(-1)[0]
    if out.quant is not None:
        return int(out.quant.zero_point.reshape(-1)[0])
    return 0


def _check_pad(op: Op, g: Graph) -> str | None:
    pairs = moved_params(op, g, _paddings)
    if isinstance(pairs, str):
        return pairs
    v = _pad_value(op, g)
    if isinstance(v, str):
        return v
    if DTYPE_SIZES[g.tensors[op.outputs[0]].dtype] not in (1, 2, 4, 8):
        return f"unsupported element type {g.tensors[op.outputs[0]].dtype}"
    return None


def _strides(shape: tuple[int, ...]) -> list[int]:
    s, acc = [], 1
    for n in reversed(shape):
        s.append(acc)
        acc *= n
    return s[::-1]


def _padded_dims(op: Op, g: Graph, source: Callable[[int, int, int], int | None]) -> list[Dim]:
    """Copy dimensions of a padding op: unpadded axes stay affine, a padded axis becomes a
    table of `source(i, before, n)`, the input index of padded position i (None: fill)."""
    shape = g.tensors[op.inputs[0]].shape
    pairs = _paddings(op, g)
    assert not isinstance(pairs, str)
    dims = []
    for n, (a, b), st in zip(shape, pairs, _strides(shape), strict=True):
        if a == 0 and b == 0:
            dims.append(Dim(n, st))
        else:
            dims.append(Dim(n + a + b, 0, [None if (j := source(i, a, n)) is None else j * st
                                           for i in range(n + a + b)]))
    return dims


def _lower_pad(op: Op, g: Graph) -> None:
    src = op.inputs[0]
    value = _pad_value(op, g)
    assert not isinstance(value, str)
    dims = _padded_dims(op, g, lambda i, a, n: i - a if 0 <= i - a < n else None)
    set_copy(op, g, src, op.outputs[0], dims, 0, fill_words(value, g.tensors[src].dtype))


register("PAD", "any type; constant paddings; pads with 0 (the zero point when quantised); rank <= 6",
         _check_pad)(_lower_pad)
register("PADV2", "any type; constant paddings and constant value; rank <= 6", _check_pad)(_lower_pad)


def _check_mirror_pad(op: Op, g: Graph) -> str | None:
    pairs = moved_params(op, g, _paddings)
    if isinstance(pairs, str):
        return pairs
    mode = op.options.get("mode", "REFLECT")
    if mode not in ("REFLECT", "SYMMETRIC"):
        return f"mode {mode}"
    shape = g.tensors[op.inputs[0]].shape
    limit_off = 1 if mode == "REFLECT" else 0
    for n, (a, b) in zip(shape, pairs, strict=True):
        if max(a, b) > n - limit_off:
            return (f"paddings {pairs} exceed the {mode} limit "
                    f"({'size - 1' if limit_off else 'size'}) for shape {list(shape)}")
    return None


def mirror_index(i: int, before: int, n: int, offset: int) -> int:
    """Input index of padded position i (offset 1: REFLECT, 0: SYMMETRIC)."""
    j = i - before
    if j < 0:
        return -j - 1 + offset
    if j >= n:
        return 2 * n - j - 1 - offset
    return j


@register("MIRROR_PAD", "any type; REFLECT or SYMMETRIC; constant paddings within TF's limits; rank <= 6",
          _check_mirror_pad)
def _lower_mirror_pad(op: Op, g: Graph) -> None:
    offset = 1 if op.options.get("mode", "REFLECT") == "REFLECT" else 0
    dims = _padded_dims(op, g, lambda i, a, n: mirror_index(i, a, n, offset))
    set_copy(op, g, op.inputs[0], op.outputs[0], dims, 0)


# ---------------------------------------------------------------------------------------
# CONCATENATION / PACK
# ---------------------------------------------------------------------------------------

def _concat_view(op: Op, g: Graph) -> tuple[int, list[tuple[int, ...]]] | str:
    """(axis, per-input shapes with the packed axis made explicit) of a CONCATENATION or
    PACK, in the output's rank."""
    out = g.tensors[op.outputs[0]].shape
    rank = len(out)
    axis = _axis(int(op.options.get("axis", 0)), rank)
    if not 0 <= axis < rank:
        return f"axis {op.options.get('axis')} is out of range for rank {rank}"
    shapes = []
    for t in op.inputs:
        s = g.tensors[t].shape
        if op.type == "PACK":
            s = s[:axis] + (1,) + s[axis:]
        if len(s) != rank or any(a != b for i, (a, b) in enumerate(zip(s, out, strict=True)) if i != axis):
            return f"input '{g.tensors[t].name}' {list(g.tensors[t].shape)} does not fit output {list(out)}"
        shapes.append(s)
    if sum(s[axis] for s in shapes) != out[axis]:
        return "input sizes along the axis do not add up to the output's"
    return axis, shapes


def _check_concat(op: Op, g: Graph) -> str | None:
    if any(t < 0 for t in op.inputs) or not op.inputs:
        return "missing input"
    r = check_moved(op, g, list(op.inputs), max_rank=None)
    if r:
        return r
    act = op.options.get("fused_activation_function", "NONE")
    if op.type == "CONCATENATION" and act not in ("NONE", None):
        return f"fused activation {act} (only NONE)"
    v = _concat_view(op, g)
    return v if isinstance(v, str) else None


def _set_concat(op: Op, g: Graph, inputs: list[int], shapes: list[tuple[int, ...]], axis: int,
                dst: int) -> None:
    es = DTYPE_SIZES[g.tensors[dst].dtype]
    outer = int(np.prod(g.tensors[dst].shape[:axis], dtype=np.int64))
    chunks = [int(np.prod(s[axis:], dtype=np.int64)) * es for s in shapes]
    n = len(inputs)
    op.kernel = "concat"
    op.attrs = {"n_inputs": n, "outer": outer,
                "chunk": chunks + [0] * (MAX_CONCAT_INPUTS - n)}
    op.inputs = list(inputs) + [-1] * (MAX_CONCAT_INPUTS - n)
    op.outputs = [dst]
    op.macc = op.scratch = 0
    op.inplace = False


def _lower_concat(op: Op, g: Graph) -> None:
    v = _concat_view(op, g)
    assert not isinstance(v, str)
    axis, shapes = v
    inputs = list(op.inputs)
    dst = op.outputs[0]
    out = g.tensors[dst]
    pos = op_position(g, op)
    # More inputs than one call takes: concatenate a leading group into an intermediate
    # tensor, which then stands for the group in the remaining list (associativity).
    k = 0
    while len(inputs) > MAX_CONCAT_INPUTS:
        grp, gshapes = inputs[:MAX_CONCAT_INPUTS], shapes[:MAX_CONCAT_INPUTS]
        shape = list(out.shape)
        shape[axis] = sum(s[axis] for s in gshapes)
        mid = g.add_tensor(f"{out.name}/concat_part{k}", tuple(shape), out.dtype, out.quant)
        part = Op(type=op.type, inputs=[], outputs=[], options=dict(op.options), index=op.index)
        _set_concat(part, g, grp, gshapes, axis, mid)
        g.ops.insert(pos, part)
        pos += 1
        k += 1
        inputs = [mid] + inputs[MAX_CONCAT_INPUTS:]
        shapes = [tuple(shape)] + shapes[MAX_CONCAT_INPUTS:]
    _set_concat(op, g, inputs, shapes, axis, dst)


register("CONCATENATION", "any type; any axis; no fused activation; inputs quantised like the output",
         _check_concat)(_lower_concat)
register("PACK", "any type; any axis; inputs quantised like the output", _check_concat)(_lower_concat)


# ---------------------------------------------------------------------------------------
# GATHER
# ---------------------------------------------------------------------------------------

def _gather_geom(op: Op, g: Graph) -> tuple[int, int, int, int, int, int] | str:
    """(batch, outer, axis_size, coords, inner elements, axis)."""
    if len(op.inputs) < 2 or op.inputs[1] < 0:
        return "missing indices"
    params, idx = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]]
    rank, irank = len(params.shape), len(idx.shape)
    axis = _axis(int(op.options.get("axis", 0)), rank)
    bd = int(op.options.get("batch_dims", 0))
    bd = bd + irank if bd < 0 else bd
    if not 0 <= axis < rank:
        return f"axis {op.options.get('axis')} is out of range for rank {rank}"
    if not 0 <= bd <= min(axis, irank):
        return f"batch_dims {op.options.get('batch_dims')} is invalid for axis {axis}"
    if params.shape[:bd] != idx.shape[:bd]:
        return f"batch dimensions of params {list(params.shape)} and indices {list(idx.shape)} differ"
    expect = params.shape[:axis] + idx.shape[bd:] + params.shape[axis + 1:]
    if g.tensors[op.outputs[0]].shape != expect:
        return f"output shape {list(g.tensors[op.outputs[0]].shape)}, expected {list(expect)}"

    def prod(s: tuple[int, ...]) -> int:
        return int(np.prod(s, dtype=np.int64))

    return (prod(params.shape[:bd]), prod(params.shape[bd:axis]), params.shape[axis],
            prod(idx.shape[bd:]), prod(params.shape[axis + 1:]), axis)


def _check_gather(op: Op, g: Graph) -> str | None:
    geom = _gather_geom(op, g)
    if isinstance(geom, str):
        return geom
    r = check_moved(op, g, op.inputs[:1], max_rank=None)
    if r:
        return r
    idx = g.tensors[op.inputs[1]]
    if idx.is_const:
        if idx.dtype not in ("int16", "int32", "int64"):
            return f"indices of type {idx.dtype}"
        v = np.asarray(idx.data)
        if v.size and (v.min() < 0 or v.max() >= geom[2]):
            return f"constant indices outside [0, {geom[2]})"
    elif idx.dtype != "int32":
        return f"runtime indices must be int32, got {idx.dtype}"
    if any(d <= 0 for d in idx.shape):
        return f"indices have a dynamic or empty shape {list(idx.shape)}"
    return None


@register("GATHER", "any type; runtime or constant indices (runtime: int32); any axis and batch_dims",
          _check_gather)
def _lower_gather(op: Op, g: Graph) -> None:
    geom = _gather_geom(op, g)
    assert not isinstance(geom, str)
    batch, outer, axis_size, coords, inner, _ = geom
    idx_t = g.tensors[op.inputs[1]]
    idx = op.inputs[1]
    if idx_t.is_const and idx_t.dtype != "int32":
        idx = g.add_const(f"{idx_t.name}/int32", np.asarray(idx_t.data).astype(np.int32))
    es = DTYPE_SIZES[g.tensors[op.outputs[0]].dtype]
    op.kernel = "gather"
    op.attrs = {"batch": batch, "outer": outer, "axis_size": axis_size, "coords": coords,
                "inner": inner * es}
    op.inputs = [op.inputs[0], idx]
    op.macc = op.scratch = 0
