"""Tensor / shape operators (docs/kernels_tensor.md).

Pure data movement with constant parameters is lowered onto the movement family's ``copy_nd``
(an output-ordered index map, ``copy_from_map``), exact by construction for every type:
REVERSE_V2, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND (a padded copy first when it pads),
BROADCAST_TO. Operators that read run-time indices or compute get kernels of their own
(ai_kernels_tensor.h, ai_tensor.c).
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import DTYPE_SIZES, MAX_DIMS, Graph, Op
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import act_range_f32
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
from stm32ai.passes.lower.pool import check_pool_options, pool_geometry
from stm32ai.passes.quant import quantize_multiplier_smaller_than_one_exp


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



# ---- GATHER_ND ----------------------------------------------------------------------------------

MAX_INDEX_ND = 5  # TFLite Micro's MAX_INDICES_ND


def _check_gather_nd(op: Op, g: Graph) -> str | None:
    r = _io(op, 2)
    if r:
        return r
    x, idx = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]]
    r = check_moved(op, g, op.inputs[:1])
    if r:
        return r
    if idx.dtype != "int32":
        return f"indices '{idx.name}' are {idx.dtype}; int32 expected (as TFLite Micro)"
    if len(idx.shape) < 1 or len(x.shape) < 1:
        return "params and indices must be at least vectors"
    nd = int(idx.shape[-1])
    if not 1 <= nd <= min(len(x.shape), MAX_INDEX_ND):
        return f"index depth {nd} must be 1..{min(len(x.shape), MAX_INDEX_ND)} (params rank {len(x.shape)})"
    return _out_shape_is(op, g, (*idx.shape[:-1], *x.shape[nd:]))


@register("GATHER_ND", "any type (TFLite Micro: float32, int8); int32 indices, run-time or constant, depth <= 5; "
          "a slice outside the params gives zeros", _check_gather_nd)
def _lower_gather_nd(op: Op, g: Graph) -> None:
    x, idx = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]]
    nd = int(idx.shape[-1])
    count, acc = [], x.size
    for d in range(nd):
        acc //= int(x.shape[d])
        count.append(acc)
    op.kernel = "gather_nd"
    op.attrs = {"n_slices": int(idx.size // nd), "nd": nd, "slice_elems": int(acc),
                "elem_size": DTYPE_SIZES[x.dtype], "params_elems": int(x.size),
                "count": count + [0] * (MAX_DIMS - nd)}
    op.inputs = op.inputs[:2]


# ---- EMBEDDING_LOOKUP -----------------------------------------------------------------------------

def _check_embedding(op: Op, g: Graph) -> str | None:
    r = _io(op, 2)
    if r:
        return r
    ids, table, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    if ids.dtype != "int32" or len(ids.shape) != 1:
        return f"lookup '{ids.name}' must be a 1-D int32 tensor"
    if len(table.shape) < 2 or table.shape[0] <= 0:
        return f"table '{table.name}' {list(table.shape)} must have rank >= 2"
    if table.dtype == "int8" and y.dtype == "float32":
        q = table.quant
        if q is None or q.scale.size != 1 or int(q.zero_point.reshape(-1)[0]) != 0 or not q.scale[0] > 0:
            return "an int8 table read as float needs one positive scale and zero point 0 (as TFLite Micro)"
    elif table.dtype in ("float32", "int8") and y.dtype == table.dtype:
        r = check_moved(op, g, op.inputs[1:2])
        if r:
            return r
    else:
        return f"{table.dtype} table -> {y.dtype} output is not supported (float32, int8, or int8 -> float32)"
    return _out_shape_is(op, g, (ids.shape[0], *table.shape[1:]))


@register("EMBEDDING_LOOKUP", "float32 or int8 table (int8 -> float32 dequantised, zero point 0); 1-D int32 "
          "ids, an id out of range gives a zero row", _check_embedding)
def _lower_embedding(op: Op, g: Graph) -> None:
    ids, table, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    rows, cols = int(table.shape[0]), int(table.size // table.shape[0])
    if y.dtype != table.dtype:
        assert table.quant is not None
        op.kernel = "embedding_lookup_hybrid"
        op.attrs = {"n_ids": int(ids.size), "rows": rows, "cols": cols, "scale": float(table.quant.scale[0])}
        return
    op.kernel = "gather"  # the movement family's kernel: an id out of range writes zero bytes
    op.attrs = {"batch": 1, "outer": 1, "axis_size": rows, "coords": int(ids.size),
                "inner": cols * DTYPE_SIZES[y.dtype]}
    op.inputs = [op.inputs[1], op.inputs[0]]


# ---- DYNAMIC_UPDATE_SLICE -------------------------------------------------------------------------

def _check_dus(op: Op, g: Graph) -> str | None:
    r = _io(op, 3) or check_moved(op, g, op.inputs[:2])
    if r:
        return r
    x, u, s = (g.tensors[t] for t in op.inputs[:3])
    if len(u.shape) != len(x.shape):
        return f"update {list(u.shape)} and operand {list(x.shape)} have different ranks"
    if any(b > a for a, b in zip(x.shape, u.shape, strict=True)):
        return f"update {list(u.shape)} is larger than the operand {list(x.shape)}"
    if s.dtype not in ("int32", "int64") or list(s.shape) != [len(x.shape)]:
        return f"start indices '{s.name}' must be {len(x.shape)} int32 or int64 values"
    return _out_shape_is(op, g, x.shape)


@register("DYNAMIC_UPDATE_SLICE", "any type; run-time or constant int32/int64 start indices, clamped as TFLite; "
          "rank <= 6", _check_dus)
def _lower_dus(op: Op, g: Graph) -> None:
    x, u, s = (g.tensors[t] for t in op.inputs[:3])
    pad = MAX_DIMS - len(x.shape)
    op.kernel = "dynamic_update_slice"
    op.attrs = {"dims": [1] * pad + [int(d) for d in x.shape], "upd": [1] * pad + [int(d) for d in u.shape],
                "rank": len(x.shape), "elem_size": DTYPE_SIZES[x.dtype], "operand_bytes": int(x.nbytes),
                "index64": int(s.dtype == "int64")}


# ---- CUMSUM -----------------------------------------------------------------------------------------

def _check_cumsum(op: Op, g: Graph) -> str | None:
    r = _io(op, 2)
    if r:
        return r
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if x.dtype not in ("float32", "int32", "int8") or y.dtype != x.dtype:
        return f"{x.dtype} -> {y.dtype} is not supported (float32, int8 or int32)"
    if x.dtype == "int8":
        for t in (x, y):
            if t.quant is None or t.quant.scale.size != 1 or not t.quant.scale[0] > 0:
                return f"tensor '{t.name}' must be quantised per tensor"
        if not 2.0 * float(x.quant.scale[0]) / ((1 << CUMSUM_SHIFT) * float(y.quant.scale[0])) < 1.0:
            return "the output scale is over 2^19 times smaller than the input's"
    axis = const_ints(g, op.inputs[1])
    if axis is None or len(axis) != 1:
        return "the axis must be one constant value"
    a = axis[0] + len(x.shape) if axis[0] < 0 else axis[0]
    if not 0 <= a < len(x.shape):
        return f"axis {axis[0]} is out of range for rank {len(x.shape)}"
    return _out_shape_is(op, g, x.shape)


CUMSUM_SHIFT = 20  # TFLite's kCumSumIntegerShift


@register("CUMSUM", "float32, int8 (TFLite's quantized path) or int32; constant axis; exclusive, reverse",
          _check_cumsum)
def _lower_cumsum(op: Op, g: Graph) -> None:
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    ax = const_ints(g, op.inputs[1])[0]  # type: ignore[index]
    ax = ax + len(x.shape) if ax < 0 else ax
    op.kernel = {"float32": "cumsum_f32", "int32": "cumsum_s32", "int8": "cumsum_s8"}[x.dtype]
    op.attrs = {"outer": int(np.prod(x.shape[:ax], dtype=np.int64)), "axis": int(x.shape[ax]),
                "inner": int(np.prod(x.shape[ax + 1:], dtype=np.int64)),
                "exclusive": int(bool(op.options.get("exclusive"))), "reverse": int(bool(op.options.get("reverse")))}
    op.inputs = op.inputs[:1]
    if x.dtype == "int8":
        assert x.quant is not None and y.quant is not None
        sx, sy = float(x.quant.scale[0]), float(y.quant.scale[0])
        im, ish = quantize_multiplier_smaller_than_one_exp(sx / (2.0 * sx))
        om, osh = quantize_multiplier_smaller_than_one_exp(2.0 * sx / ((1 << CUMSUM_SHIFT) * sy))
        op.attrs.update({"input_offset": -int(x.quant.zero_point[0]), "left_shift": CUMSUM_SHIFT,
                         "input_multiplier": im, "input_shift": ish, "output_multiplier": om,
                         "output_shift": osh, "output_offset": int(y.quant.zero_point[0]),
                         "act_min": -128, "act_max": 127})


# ---- REDUCE_ALL --------------------------------------------------------------------------------------

def _reduce_all_axes(op: Op, g: Graph) -> list[int] | str:
    r = _io(op, 2)
    if r:
        return r
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if x.dtype != "bool" or y.dtype != "bool":
        return f"{x.dtype} -> {y.dtype}: REDUCE_ALL takes and gives bool"
    if len(x.shape) > MAX_DIMS or x.size == 0:
        return f"input {list(x.shape)}: rank <= {MAX_DIMS}, non-empty expected"
    axes = const_ints(g, op.inputs[1])
    if axes is None:
        return "the axes must be a constant tensor"
    norm: list[int] = []
    for a in axes:
        r_ = a + len(x.shape) if a < 0 else a
        if not 0 <= r_ < len(x.shape):
            return f"axis {a} is out of range for rank {len(x.shape)}"
        if r_ not in norm:
            norm.append(r_)
    keep = bool(op.options.get("keep_dims"))
    want = [1 if d in norm else n for d, n in enumerate(x.shape)] if keep else \
        [n for d, n in enumerate(x.shape) if d not in norm]
    return _out_shape_is(op, g, want) or norm


def _check_reduce_all(op: Op, g: Graph) -> str | None:
    r = _reduce_all_axes(op, g)
    return r if isinstance(r, str) else None


@register("REDUCE_ALL", "bool; constant axes (negative, repeated), keep_dims; rank <= 6", _check_reduce_all)
def _lower_reduce_all(op: Op, g: Graph) -> None:
    axes = _reduce_all_axes(op, g)
    assert not isinstance(axes, str), axes
    shape = [int(d) for d in g.tensors[op.inputs[0]].shape]
    kept = [d for d in range(len(shape)) if d not in axes]
    strides, acc = {}, 1
    for d in reversed(kept):
        strides[d] = acc
        acc *= shape[d]
    pad = MAX_DIMS - len(shape)
    op.kernel = "reduce_all"
    op.attrs = {"shape": [1] * pad + shape, "out_strides": [0] * pad + [strides.get(d, 0) for d in range(len(shape))],
                "out_size": int(acc)}
    op.inputs = op.inputs[:1]


# ---- L2_NORMALIZATION ---------------------------------------------------------------------------------

L2_MAX_DEPTH = (1 << 31) // (255 * 255)  # TFLite's int32 sum of squares cannot overflow


def _check_l2_norm(op: Op, g: Graph) -> str | None:
    r = _io(op, 1)
    if r:
        return r
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if op.options.get("fused_activation_function", "NONE") not in ("NONE", None):
        return f"fused activation {op.options.get('fused_activation_function')} is not supported (NONE)"
    if tuple(y.shape) != tuple(x.shape) or not x.shape:
        return f"output {list(y.shape)} must have the input's shape {list(x.shape)}"
    if x.dtype == "float32" and y.dtype == "float32":
        return None
    if x.dtype != "int8" or y.dtype != "int8":
        return f"{x.dtype} -> {y.dtype} is not supported (int8 or float32, as TFLite Micro)"
    for t in (x, y):
        if t.quant is None or t.quant.scale.size != 1:
            return f"tensor '{t.name}' must be quantised per tensor"
    if float(np.float32(y.quant.scale[0])) != float(np.float32(1.0 / 128)) or int(y.quant.zero_point[0]) != 0:
        return "the int8 output must have scale 1/128 and zero point 0 (TFLite's L2_NORMALIZATION)"
    if int(x.shape[-1]) > L2_MAX_DEPTH:
        return f"a depth of {x.shape[-1]} is over the {L2_MAX_DEPTH} TFLite's int32 sum of squares holds"
    return None


@register("L2_NORMALIZATION", "int8 (TFLite's integer path: output scale 1/128, zero point 0) or float32; "
          "last axis", _check_l2_norm)
def _lower_l2_norm(op: Op, g: Graph) -> None:
    x = g.tensors[op.inputs[0]]
    depth = int(x.shape[-1])
    op.attrs = {"outer": int(x.size // depth), "depth": depth}
    if x.dtype == "int8":
        assert x.quant is not None
        op.kernel = "l2_norm_s8"
        op.attrs["input_zero_point"] = int(x.quant.zero_point[0])
    else:
        op.kernel = "l2_norm_f32"
    op.macc = int(2 * x.size)


# ---- L2_POOL_2D -----------------------------------------------------------------------------------------

def _check_l2_pool(op: Op, g: Graph) -> str | None:
    r = _io(op, 1)
    if r:
        return r
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if x.dtype != "float32" or y.dtype != "float32":
        return f"{x.dtype} -> {y.dtype} is not supported (float32, as TFLite Micro)"
    if len(x.shape) != 4:
        return f"input {list(x.shape)} is not a 4-D NHWC tensor"
    r = check_pool_options(op)
    if r:
        return r
    geo = pool_geometry(op, g)
    if geo["out_h"] < 1 or geo["out_w"] < 1:
        return "the window is larger than the input"
    return _out_shape_is(op, g, (geo["batches"], geo["out_h"], geo["out_w"], geo["channels"]))


@register("L2_POOL_2D", "float32; SAME or VALID; fused NONE/RELU/RELU6/RELU_N1_TO_1", _check_l2_pool)
def _lower_l2_pool(op: Op, g: Graph) -> None:
    geo = pool_geometry(op, g)
    lo, hi = act_range_f32(op)
    op.kernel = "l2_pool_f32"
    op.attrs = {**geo, "act_min": lo, "act_max": hi}
    op.macc = int(g.tensors[op.outputs[0]].size * geo["filter_h"] * geo["filter_w"])


# ---- BROADCAST_ARGS -------------------------------------------------------------------------------------

def _check_broadcast_args(op: Op, g: Graph) -> str | None:
    r = _io(op, 2)
    if r:
        return r
    a, b, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    if a.dtype not in ("int32", "int64") or b.dtype != a.dtype or y.dtype != a.dtype:
        return f"{a.dtype}, {b.dtype} -> {y.dtype}: int32 or int64 shapes of one type expected"
    if len(a.shape) != 1 or len(b.shape) != 1 or len(y.shape) != 1:
        return "the shapes and the output must be 1-D"
    if y.size != max(a.size, b.size):
        return f"output has {y.size} values for shapes of {a.size} and {b.size} — the model is inconsistent"
    return None


@register("BROADCAST_ARGS", "int32 or int64 shapes (run-time or constant)", _check_broadcast_args)
def _lower_broadcast_args(op: Op, g: Graph) -> None:
    a, b, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    op.kernel = "broadcast_args_s32" if a.dtype == "int32" else "broadcast_args_s64"
    op.attrs = {"n1": int(a.size), "n2": int(b.size), "n_out": int(y.size)}
