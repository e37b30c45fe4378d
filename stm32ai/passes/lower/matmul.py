"""BATCH_MATMUL, and FULLY_CONNECTED with run-time weights -> ai_batch_matmul_{s8,s16,f32}
(docs/kernels_matmul.md).

One strided kernel serves both: the output is [batch..., rows, cols] and

    out[b, i, j] = sum_k lhs[b, i, k] * rhs[b, k, j]

where the operands are read through element strides, so adj_x / adj_y (a transposed operand)
and broadcast batch dimensions (stride 0) cost no copy. TFLite Micro's arithmetic
(kernels/batch_matmul.cc, reference BatchMatMul; reference FullyConnected):

* int8: acc = sum (lhs - lhs_zp) * (rhs - rhs_zp) in int32 (+ bias for FULLY_CONNECTED),
  requantised with the double-rounding multiplier of double(s_lhs) * double(s_rhs) /
  double(s_out), + out_zp, clamped to the fused activation's range (BATCH_MATMUL: int8's);
* int16 (zero points 0): the same sum in int64, TFLite's 64-bit MultiplyByQuantizedMultiplier
  (16-bit reduced multiplier, one rounding shift, ai_requant64);
* float32: the float sum in k order (+ bias, then the activation clamp).

A FULLY_CONNECTED whose weights are computed at run time (attention's q @ k^T: the converter
writes a 2-D `a @ b^T` that way) is the same product with rhs = weights^T: it is a variant of
FULLY_CONNECTED (constant weights stay with fc.py's packed kernels).
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register, register_variant
from stm32ai.passes.lower.common import (
    act_range_f32,
    act_range_s8,
    check_activation,
    per_tensor_quant,
    scale_of,
    zp_of,
)
from stm32ai.passes.lower.transpose_conv import reduced_multiplier
from stm32ai.passes.quant import per_channel_multiplier, quantize_multiplier

BATCH_DIMS = 3  # TFLite Micro: operands of rank 2..5
# int8: |(x - zp)(y - zp)| <= 255 * 255; TFLite Micro's int32 sum wraps beyond 2^31 (undefined
# there): refuse a depth where that can happen, no real model comes near it.
MAX_DEPTH_S8 = (1 << 31) // (255 * 255)
# int16: |x * y| <= 2^30 and ai_requant64 needs |acc| < 2^47 (as TFLite asserts).
MAX_DEPTH_S16 = 1 << 17


def _io(op: Op, g: Graph) -> tuple[Tensor, Tensor, Tensor] | str:
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return "expects two inputs and one output"
    lhs, rhs = (g.tensors[t] for t in op.inputs)
    return lhs, rhs, g.tensors[op.outputs[0]]


def _geometry(lshape: tuple[int, ...], rshape: tuple[int, ...], adj_x: bool,
              adj_y: bool) -> dict[str, object] | str:
    """Loop attrs of the strided kernel, or the reason the shapes do not multiply."""
    rl, rr = len(lshape), len(rshape)
    if not (2 <= rl <= 2 + BATCH_DIMS and 2 <= rr <= 2 + BATCH_DIMS):
        return f"operands of rank {rl} and {rr}; ranks 2 to {2 + BATCH_DIMS} are supported (as TFLite Micro)"
    l0, l1 = (int(d) for d in lshape[-2:])
    r0, r1 = (int(d) for d in rshape[-2:])
    rows, depth = (l1, l0) if adj_x else (l0, l1)
    depth_r, cols = (r1, r0) if adj_y else (r0, r1)
    if depth != depth_r or min(rows, cols, depth) <= 0:
        return (f"lhs {list(lshape)} (adj_x={adj_x}) and rhs {list(rshape)} (adj_y={adj_y}) "
                "do not multiply")
    lb = [1] * (BATCH_DIMS - (rl - 2)) + [int(d) for d in lshape[:-2]]
    rb = [1] * (BATCH_DIMS - (rr - 2)) + [int(d) for d in rshape[:-2]]
    batch = []
    for a, b in zip(lb, rb, strict=True):
        if a != b and 1 not in (a, b):
            return f"batch dimensions of {list(lshape)} and {list(rshape)} do not broadcast"
        batch.append(max(a, b))

    def strides(dims: list[int], mat: int) -> list[int]:
        out, step = [0] * BATCH_DIMS, mat
        for d in range(BATCH_DIMS - 1, -1, -1):
            out[d] = 0 if dims[d] == 1 else step
            step *= dims[d]
        return out

    return {"batch": batch, "lhs_bstride": strides(lb, l0 * l1), "rhs_bstride": strides(rb, r0 * r1),
            "rows": rows, "cols": cols, "depth": depth,
            "lhs_row_stride": 1 if adj_x else l1, "lhs_depth_stride": l1 if adj_x else 1,
            "rhs_depth_stride": 1 if adj_y else r1, "rhs_col_stride": r1 if adj_y else 1}


def _check_quant(lhs: Tensor, rhs: Tensor, y: Tensor) -> str | None:
    for t, what in ((lhs, "lhs"), (rhs, "rhs"), (y, "output")):
        r = per_tensor_quant(t, f"{what} '{t.name}'")
        if r:
            return r
    if y.dtype == "int16" and any(zp_of(t) != 0 for t in (lhs, rhs, y)):
        return "int16 operands need zero point 0 (TFLite's 16-bit quantisation)"
    m, s = quantize_multiplier(per_channel_multiplier(scale_of(lhs), scale_of(rhs), scale_of(y)))
    if not -31 <= s <= 31:
        return f"the requantisation shift {s} is outside -31..31 (a quantisation scale is extreme)"
    if y.dtype == "int16" and not 1 <= reduced_multiplier(m, s)[1] <= 62:
        return f"the 16-bit requantisation shift {reduced_multiplier(m, s)[1]} is outside 1..62"
    return None


def _check_types(lhs: Tensor, rhs: Tensor, y: Tensor, depth: int, what: str) -> str | None:
    if not (lhs.dtype == rhs.dtype == y.dtype):
        return f"{lhs.dtype} x {rhs.dtype} -> {y.dtype}: {what} needs one type (int8, int16 or float32)"
    if y.dtype == "float32":
        return None
    if y.dtype not in ("int8", "int16"):
        return f"type {y.dtype} is not supported (int8, int16 or float32)"
    limit = MAX_DEPTH_S8 if y.dtype == "int8" else MAX_DEPTH_S16
    if depth > limit:
        return f"an accumulation depth of {depth} is over the {limit} the {y.dtype} kernel sums exactly"
    return _check_quant(lhs, rhs, y)


# ---- BATCH_MATMUL -------------------------------------------------------------------------------

def _check_bmm(op: Op, g: Graph) -> str | None:
    io = _io(op, g)
    if isinstance(io, str):
        return io
    lhs, rhs, y = io
    geo = _geometry(lhs.shape, rhs.shape, bool(op.options.get("adj_x")), bool(op.options.get("adj_y")))
    if isinstance(geo, str):
        return geo
    batch: list[int] = geo["batch"]  # type: ignore[assignment]
    rank = max(len(lhs.shape), len(rhs.shape))
    full = batch[BATCH_DIMS - (rank - 2):] + [geo["rows"], geo["cols"]]
    if [int(d) for d in y.shape] != full:
        return f"output {list(y.shape)} is not the product's shape {full} — the model is inconsistent"
    return _check_types(lhs, rhs, y, int(geo["depth"]), "BATCH_MATMUL")  # type: ignore[arg-type]


def _quant_attrs(lhs: Tensor, rhs: Tensor, y: Tensor) -> dict[str, int]:
    m, s = quantize_multiplier(per_channel_multiplier(scale_of(lhs), scale_of(rhs), scale_of(y)))
    if y.dtype == "int16":
        rm, rsh = reduced_multiplier(m, s)
        return {"rq_mult": rm, "rq_rsh": rsh}
    return {"lhs_offset": -zp_of(lhs), "rhs_offset": -zp_of(rhs), "out_zero_point": zp_of(y),
            "out_multiplier": int(m), "out_shift": int(s)}


def _lower(op: Op, geo: dict[str, object], lhs: Tensor, rhs: Tensor, y: Tensor,
           lo: float, hi: float, bias_id: int) -> None:
    kind = {"int8": "s8", "int16": "s16", "float32": "f32"}[y.dtype]
    op.kernel = f"batch_matmul_{kind}"
    op.attrs = dict(geo)
    if kind == "f32":
        op.attrs.update({"act_min": float(lo), "act_max": float(hi)})
    else:
        op.attrs.update(_quant_attrs(lhs, rhs, y))
        op.attrs.update({"act_min": int(lo), "act_max": int(hi)})
    if kind != "s16":
        op.inputs = [*op.inputs[:2], bias_id]
    op.macc = int(y.size) * int(geo["depth"])  # type: ignore[call-overload]


@register("BATCH_MATMUL",
          "int8, int16 (zero points 0) or float32, both operands constant or computed at run time; "
          "adj_x/adj_y; ranks 2-5 with broadcast batch dimensions", _check_bmm)
def lower_bmm(op: Op, g: Graph) -> None:
    lhs, rhs, y = (g.tensors[t] for t in (*op.inputs, op.outputs[0]))
    geo = _geometry(lhs.shape, rhs.shape, bool(op.options.get("adj_x")), bool(op.options.get("adj_y")))
    assert not isinstance(geo, str), geo
    if y.dtype == "float32":
        lo, hi = float("-inf"), float("inf")  # TFLite does not clamp a float BATCH_MATMUL
    else:
        info = np.iinfo(y.dtype)
        lo, hi = int(info.min), int(info.max)
    _lower(op, geo, lhs, rhs, y, lo, hi, -1)


# ---- FULLY_CONNECTED with run-time weights -------------------------------------------------------

def _runtime_weights(op: Op, g: Graph) -> bool:
    return len(op.inputs) >= 2 and op.inputs[1] >= 0 and not g.tensors[op.inputs[1]].is_const


def _fc_geometry(x: Tensor, w: Tensor) -> dict[str, object] | str:
    """x as [batches, k] rows, w [n, k] read transposed (adj_y): the FC as one matrix product."""
    if len(w.shape) != 2:
        return f"weights '{w.name}' have shape {list(w.shape)}, expected [out_features, in_features]"
    n, k = (int(d) for d in w.shape)
    if k <= 0 or n <= 0 or x.size % k != 0:
        return f"input '{x.name}' {list(x.shape)} is not a whole number of rows of {k} features"
    return _geometry((x.size // k, k), w.shape, False, True)


def _check_fc_runtime(op: Op, g: Graph) -> str | None:
    if len(op.inputs) < 2 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return "expects an input, a weights tensor, an optional bias and one output"
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    bias = g.tensors[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    if op.options.get("weights_format", "DEFAULT") not in (None, "DEFAULT", 0):
        return "only the DEFAULT weights format is supported"
    r = check_activation(op)
    if r:
        return r
    geo = _fc_geometry(x, w)
    if isinstance(geo, str):
        return geo
    if y.size != int(geo["rows"]) * int(geo["cols"]):  # type: ignore[call-overload]
        return f"output '{y.name}' {list(y.shape)} does not hold {geo['rows']} x {geo['cols']} values"
    if y.dtype not in ("int8", "float32"):
        return f"run-time weights with {y.dtype} data are not supported (int8 or float32)"
    r = _check_types(x, w, y, int(geo["depth"]), "FULLY_CONNECTED with run-time weights")  # type: ignore[call-overload]
    if r:
        return r
    if bias is not None:
        want = "float32" if y.dtype == "float32" else "int32"
        if not bias.is_const:
            return f"bias '{bias.name}' is computed at run time; only a constant bias is supported"
        if bias.dtype != want or bias.size != geo["cols"]:
            return f"bias '{bias.name}' must be {geo['cols']} {want} values"
    return None


@register_variant("FULLY_CONNECTED", "weights computed at run time (attention): int8 (any zero points, "
                  "per-tensor) or float32, optional constant bias, fused activation", _runtime_weights,
                  _check_fc_runtime)
def lower_fc_runtime(op: Op, g: Graph) -> None:
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    geo = _fc_geometry(x, w)
    assert not isinstance(geo, str), geo
    bias_id = op.inputs[2] if len(op.inputs) > 2 else -1
    lo, hi = act_range_f32(op) if y.dtype == "float32" else act_range_s8(op, y)
    op.inputs = op.inputs[:2]
    _lower(op, geo, x, w, y, lo, hi, bias_id)
