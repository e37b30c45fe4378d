"""Tensor / shape operators (docs/kernels_tensor.md).

Pure data movement with constant parameters is lowered onto the movement family's ``copy_nd``
(an output-ordered index map, ``copy_from_map``), exact by construction for every type:
REVERSE_V2, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND (a padded copy first when it pads),
BROADCAST_TO. Operators that read run-time indices or compute get kernels of their own
(ai_kernels_tensor.h, ai_tensor.c).
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower import register
from stm32ai.passes.lower.movement import (
    Dim,
    check_moved,
    const_ints,
    copy_from_map,
    fill_words,
    index_array,
    op_position,
    set_copy,
)


def _io(op: Op, n_in: int) -> str | None:
    if len(op.inputs) < n_in or any(t < 0 for t in op.inputs[:n_in]) or len(op.outputs) != 1:
        return f"expects {n_in} inputs and one output"
    return None


def _out_shape_is(op: Op, g: Graph, want: tuple[int, ...] | list[int]) -> str | None:
    y = g.tensors[op.outputs[0]]
    if tuple(int(d) for d in y.shape) != tuple(int(d) for d in want):
        return f"output shape {list(y.shape)}, expected {[int(d) for d in want]} — the model is inconsistent"
    return None


# ---- REVERSE_V2 ---------------------------------------------------------------------------------

def _reverse_axes(op: Op, g: Graph) -> list[int] | str:
    r = _io(op, 2) or check_moved(op, g, op.inputs[:1])
    if r:
        return r
    axes = const_ints(g, op.inputs[1])
    if axes is None:
        return "the axis must be a constant tensor"
    rank = len(g.tensors[op.inputs[0]].shape)
    norm = [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in norm) or len(set(norm)) != len(norm):
        return f"axis {axes} is not a set of distinct axes of a rank-{rank} tensor"
    return _out_shape_is(op, g, g.tensors[op.inputs[0]].shape) or norm


def _check_reverse(op: Op, g: Graph) -> str | None:
    r = _reverse_axes(op, g)
    return r if isinstance(r, str) else None


@register("REVERSE_V2", "any type; constant axes (any number, negative allowed); rank <= 6", _check_reverse)
def _lower_reverse(op: Op, g: Graph) -> None:
    axes = _reverse_axes(op, g)
    assert not isinstance(axes, str), axes
    src = op.inputs[0]
    m = index_array(g.tensors[src].shape)
    copy_from_map(op, g, src, op.outputs[0], np.flip(m, axis=tuple(axes)) if axes else m)


# ---- BATCH_TO_SPACE_ND / SPACE_TO_BATCH_ND ----------------------------------------------------

def _block_params(op: Op, g: Graph) -> tuple[list[int], list[tuple[int, int]]] | str:
    """block_shape and crops/paddings (constant); input [batch, spatial..., rest...]."""
    r = _io(op, 3) or check_moved(op, g, op.inputs[:1])
    if r:
        return r
    block, pads = const_ints(g, op.inputs[1]), const_ints(g, op.inputs[2])
    if block is None or pads is None:
        return "block_shape and crops/paddings must be constant tensors"
    shape = g.tensors[op.inputs[0]].shape
    if len(shape) not in (3, 4):
        return f"input {list(shape)}: rank 3 or 4 expected (as TFLite Micro)"
    ns = len(block)
    if ns < 1 or ns > len(shape) - 1 or len(pads) != 2 * ns:
        return f"block_shape {block} and crops/paddings {pads} do not fit input {list(shape)}"
    if any(b < 1 for b in block) or any(p < 0 for p in pads):
        return f"block_shape {block} must be >= 1 and crops/paddings {pads} >= 0"
    return block, [(pads[2 * i], pads[2 * i + 1]) for i in range(ns)]


def _check_b2s(op: Op, g: Graph) -> str | None:
    p = _block_params(op, g)
    if isinstance(p, str):
        return p
    block, crops = p
    shape = g.tensors[op.inputs[0]].shape
    nb = int(np.prod(block))
    if shape[0] % nb:
        return f"batch {shape[0]} is not a multiple of the block size {nb}"
    sp = [shape[1 + i] * b - c0 - c1 for i, (b, (c0, c1)) in enumerate(zip(block, crops, strict=True))]
    if any(s <= 0 for s in sp):
        return f"crops {crops} leave nothing of {list(shape)}"
    return _out_shape_is(op, g, (shape[0] // nb, *sp, *shape[1 + len(block):]))


@register("BATCH_TO_SPACE_ND", "any type; constant block_shape and crops; rank 3 or 4", _check_b2s)
def _lower_b2s(op: Op, g: Graph) -> None:
    p = _block_params(op, g)
    assert not isinstance(p, str), p
    block, crops = p
    src = op.inputs[0]
    shape = tuple(g.tensors[src].shape)
    ns = len(block)
    n = shape[0] // int(np.prod(block))
    # input batch = (b_0, ..., b_{ns-1}, n); out[n, ..., s_i*block_i + b_i - crop_i, ...]
    idx = index_array(shape).reshape(*block, n, *shape[1:])
    # axes: block dims 0..ns-1, n at ns, spatial ns+1..2ns, rest after
    perm = [ns]
    for i in range(ns):
        perm += [ns + 1 + i, i]  # spatial i, then its block offset: s_i*block_i + b_i
    perm += list(range(2 * ns + 1, idx.ndim))
    full = idx.transpose(perm).reshape(n, *[shape[1 + i] * block[i] for i in range(ns)], *shape[1 + ns:])
    sl = (slice(None),) + tuple(slice(c0, full.shape[1 + i] - c1) for i, (c0, c1) in enumerate(crops))
    copy_from_map(op, g, src, op.outputs[0], full[sl])


def _check_s2b(op: Op, g: Graph) -> str | None:
    p = _block_params(op, g)
    if isinstance(p, str):
        return p
    block, pads = p
    shape = g.tensors[op.inputs[0]].shape
    padded = [shape[1 + i] + a + b for i, (a, b) in enumerate(pads)]
    if any(s % b for s, b in zip(padded, block, strict=True)):
        return f"padded spatial size {padded} is not a multiple of block_shape {block}"
    return _out_shape_is(op, g, (shape[0] * int(np.prod(block)),
                                 *[s // b for s, b in zip(padded, block, strict=True)], *shape[1 + len(block):]))


def _pad_fill(g: Graph, tid: int) -> list[int]:
    """TFLite pads SPACE_TO_BATCH_ND with the output's zero point (0 for float)."""
    t = g.tensors[tid]
    zp = int(t.quant.zero_point.reshape(-1)[0]) if t.quant is not None and t.quant.zero_point.size else 0
    return fill_words(zp, t.dtype)


@register("SPACE_TO_BATCH_ND", "any type; constant block_shape and paddings (pads with the zero point); "
          "rank 3 or 4", _check_s2b)
def _lower_s2b(op: Op, g: Graph) -> None:
    p = _block_params(op, g)
    assert not isinstance(p, str), p
    block, pads = p
    src, dst = op.inputs[0], op.outputs[0]
    x = g.tensors[src]
    shape = tuple(x.shape)
    ns = len(block)
    if any(a or b for a, b in pads):  # a padded copy first (PAD's copy), then the pure rearrangement
        pshape = (shape[0], *[shape[1 + i] + a + b for i, (a, b) in enumerate(pads)], *shape[1 + ns:])
        mid = g.add_tensor(f"{g.tensors[dst].name}/padded", pshape, x.dtype, x.quant)
        strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
        dims = [Dim(shape[0], strides[0])]
        for i, (a, b) in enumerate(pads):
            n_i, st = shape[1 + i], strides[1 + i]
            dims.append(Dim(n_i + a + b, 0, [(j - a) * st if 0 <= j - a < n_i else None
                                             for j in range(n_i + a + b)]))
        dims += [Dim(shape[d], strides[d]) for d in range(1 + ns, len(shape))]
        pad_op = Op(type=op.type, inputs=[], outputs=[], options=dict(op.options), index=op.index)
        set_copy(pad_op, g, src, mid, dims, 0, _pad_fill(g, dst))
        g.ops.insert(op_position(g, op), pad_op)
        src, shape = mid, pshape
    n = shape[0]
    out_sp = [shape[1 + i] // block[i] for i in range(ns)]
    # out[(b_0, ..., b_{ns-1}, n), s_0, ...] = in[n, s_0*block_0 + b_0, ...]
    view = [n]
    for i in range(ns):
        view += [out_sp[i], block[i]]
    idx = index_array(shape).reshape(*view, *shape[1 + ns:])
    perm = [2 + 2 * i for i in range(ns)] + [0] + [1 + 2 * i for i in range(ns)]
    perm += list(range(1 + 2 * ns, idx.ndim))
    copy_from_map(op, g, src, dst, idx.transpose(perm))


# ---- BROADCAST_TO ---------------------------------------------------------------------------------

def _check_broadcast_to(op: Op, g: Graph) -> str | None:
    r = _io(op, 2) or check_moved(op, g, op.inputs[:1])
    if r:
        return r
    shape = const_ints(g, op.inputs[1])
    if shape is None:
        return "the shape must be a constant tensor (a run-time shape makes the output dynamic)"
    x = g.tensors[op.inputs[0]]
    try:
        want = np.broadcast_shapes(tuple(x.shape), tuple(shape))
    except ValueError:
        return f"input {list(x.shape)} does not broadcast to {shape}"
    if list(want) != shape:
        return f"input {list(x.shape)} does not broadcast to {shape}"
    return _out_shape_is(op, g, shape)


@register("BROADCAST_TO", "any type; constant shape; rank <= 6", _check_broadcast_to)
def _lower_broadcast_to(op: Op, g: Graph) -> None:
    src, dst = op.inputs[0], op.outputs[0]
    m = np.broadcast_to(index_array(g.tensors[src].shape), g.tensors[dst].shape)
    copy_from_map(op, g, src, dst, m)

