"""AVERAGE_POOL_2D / MAX_POOL_2D -> ai_avgpool_s8/f32, ai_maxpool_s8/f32 (NHWC).

Padding and output size follow TFLite's ComputePaddingHeightWidth (dilation 1). Windows
are clipped to the input: padded taps are skipped, so an average divides by the number of
valid taps only. int8 average (TFLite Micro reference): sum the valid taps in int32, then
round half away from zero, `(sum + n/2) / n` for sum > 0 else `(sum - n/2) / n` with C's
truncating division, then clamp to the fused activation. Input and output must share the
quantisation (TFLM refuses otherwise), so no requantisation happens.
"""

from __future__ import annotations

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import act_range_f32, act_range_s8, check_activation, per_tensor_quant, scale_of, zp_of

__all__ = ["pool_geometry", "compute_padding", "check_pool_options"]


def _out_size(padding: str, size: int, filt: int, stride: int) -> int:
    if padding == "SAME":
        return (size + stride - 1) // stride
    return (size + stride - filt) // stride


def compute_padding(stride: int, in_size: int, filt: int, out_size: int) -> int:
    """TFLite's ComputePadding with dilation 1 (C truncating division, clamped at 0)."""
    num = (out_size - 1) * stride + filt - in_size
    pad = int(num / 2)  # truncation toward zero, as in C
    return pad if pad > 0 else 0


def pool_geometry(op: Op, g: Graph) -> dict[str, int]:
    x = g.tensors[op.inputs[0]]
    n, h, w, c = x.shape
    o = op.options
    fh, fw = int(o.get("filter_height", 1)), int(o.get("filter_width", 1))
    sh, sw = int(o.get("stride_h", 1)), int(o.get("stride_w", 1))
    padding = str(o.get("padding", "VALID"))
    oh, ow = _out_size(padding, h, fh, sh), _out_size(padding, w, fw, sw)
    return {
        "batches": int(n), "in_h": int(h), "in_w": int(w), "channels": int(c),
        "out_h": int(oh), "out_w": int(ow), "filter_h": fh, "filter_w": fw,
        "stride_h": sh, "stride_w": sw,
        "pad_h": compute_padding(sh, h, fh, oh), "pad_w": compute_padding(sw, w, fw, ow),
    }


def check_pool_options(op: Op) -> str | None:
    """The pooling options every pool kernel needs (also L2_POOL_2D, passes/lower/tensor.py):
    SAME/VALID padding, filter and strides >= 1, a supported fused activation."""
    o = op.options
    if str(o.get("padding", "VALID")) not in ("SAME", "VALID"):
        return f"padding {o.get('padding')} is not supported (SAME or VALID)"
    for key in ("filter_height", "filter_width", "stride_h", "stride_w"):
        if int(o.get(key, 1)) < 1:
            return f"{key} = {o.get(key)} is invalid"
    return check_activation(op)


def _check_pool(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 1 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return "expects one input and one output"
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if len(x.shape) != 4 or len(y.shape) != 4:
        return f"input '{x.name}' {list(x.shape)} is not a 4-D NHWC tensor"
    reason = check_pool_options(op)
    if reason:
        return reason
    geo = pool_geometry(op, g)
    want = (geo["batches"], geo["out_h"], geo["out_w"], geo["channels"])
    if tuple(y.shape) != want or geo["out_h"] < 1 or geo["out_w"] < 1:
        return (f"output '{y.name}' {list(y.shape)} does not match the pooled shape {list(want)} "
                "— the model is inconsistent")
    if x.dtype == "float32":
        return None if y.dtype == "float32" else f"float input with {y.dtype} output is not supported"
    if x.dtype != "int8" or y.dtype != "int8":
        return f"{x.dtype} -> {y.dtype} pooling is not supported (int8 or float32)"
    for t, what in ((x, "input"), (y, "output")):
        r = per_tensor_quant(t, what)
        if r:
            return r
    if abs(scale_of(x) - scale_of(y)) > 1e-6 or zp_of(x) != zp_of(y):
        return "int8 pooling needs the same scale and zero point on input and output (as TFLite)"
    return None


def _lower_pool(op: Op, g: Graph, kind: str) -> None:
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    geo = pool_geometry(op, g)
    op.macc = int(y.size * geo["filter_h"] * geo["filter_w"])
    if x.dtype == "float32":
        lo_f, hi_f = act_range_f32(op)
        op.kernel = f"{kind}_f32"
        op.attrs = {**geo, "act_min": lo_f, "act_max": hi_f}
    else:
        lo, hi = act_range_s8(op, y)
        op.kernel = f"{kind}_s8"
        op.attrs = {**geo, "act_min": int(lo), "act_max": int(hi)}


_CONSTRAINTS = ("int8 (same input/output quantisation) or float32, NHWC, SAME/VALID, any filter "
                "and stride; fused NONE/RELU/RELU6/RELU_N1_TO_1")


@register("AVERAGE_POOL_2D", _CONSTRAINTS, _check_pool)
def lower_avgpool(op: Op, g: Graph) -> None:
    _lower_pool(op, g, "avgpool")


@register("MAX_POOL_2D", _CONSTRAINTS, _check_pool)
def lower_maxpool(op: Op, g: Graph) -> None:
    _lower_pool(op, g, "maxpool")


# Running sums for a global int8 average pool inside a row-streamed stripe (issue 24,
# docs/stripes.md): |acc| <= 128 * count, and acc -+ count / 2 in _finish, must fit int32.
ROWS_MAX_COUNT = 1 << 23


def avgpool_rows_attrs(a: dict) -> dict | None:
    """The ai_avgpool_rows_s8 params of a lowered `avgpool_s8` op that is a global pool
    (filter = the whole input, no padding, 1x1 output, one image), else None."""
    glob = (a["batches"] == 1 and a["out_h"] == 1 and a["out_w"] == 1 and a["filter_h"] == a["in_h"]
            and a["filter_w"] == a["in_w"] and a["pad_h"] == 0 and a["pad_w"] == 0)
    count = int(a["in_h"]) * int(a["in_w"])
    if not glob or count > ROWS_MAX_COUNT:
        return None
    return {"in_w": int(a["in_w"]), "channels": int(a["channels"]), "count": count,
            "act_min": int(a["act_min"]), "act_max": int(a["act_max"])}
