"""Legacy uint8 variants (docs/kernels_u8.md): the ops passes/legacy_u8.py moved onto shifted
int8 activations whose arithmetic still needs the uint8 model's own terms.

* CONV_2D with a uint8 filter: TFLite's uint8 reference computes
  acc = bias + sum (w - zp_w) * (x - zp_x). The filter is re-centred here, w - zp_w in
  -255..255, and laid out in conv2d_s8's int16 weight layout (`w16`: what SMLAD reads, any
  int16; conv.pack_conv_weights_s16 / conv_rows_for_kernel, shared with int8), the input zero
  point folded into the bias as for int8; the multiplier is LiteRT's
  legacy per-tensor one, double(s_x) * double(s_w) / double(s_y) through QuantizeMultiplier,
  double rounding: the int8 kernel then gives the uint8 model's outputs minus 128.
* DEPTHWISE_CONV_2D: the same re-centring, read by a plain loop kernel with int16 weights
  (ai_depthwise_conv2d_u8).
* FULLY_CONNECTED: re-centred int16 weights and LiteRT's single-rounding requantisation
  (ai_fully_connected_u8; docs/kernels_fc.md "Reference differences").
* AVERAGE_POOL_2D: uint8 rounds the sum of codes half up, not half away from zero
  (ai_avgpool_u8).
* QUANTIZE marked `RESCALE` (put by the pass before a CONCATENATION input quantised unlike the
  output): LiteRT's float ConcatenationWithScaling as a 256-entry table.

The filter keeps its uint8 codes until here (legacy_u8 shifts activations only); these
variants apply to ops that pass marked (`LEGACY_U8`, `RESCALE`).
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.legacy_u8 import LEGACY_U8, RESCALE
from stm32ai.passes.lower import register_variant
from stm32ai.passes.lower.activations import lower_as_table, relu_x_table_litert
from stm32ai.passes.lower.common import (
    check_activation,
    fused_activation,
    per_tensor_quant,
    weighted_operands,
)
from stm32ai.passes.lower.common import scale_of as _scale
from stm32ai.passes.lower.common import zp_of as _zp
from stm32ai.passes.lower.conv import (
    ConvGeometry,
    conv_geometry,
    conv_krow,
    conv_rows_for_kernel,
    conv_rq_table,
    conv_scratch_size,
    fold_bias,
    pack_conv_weights_s16,
)
from stm32ai.passes.lower.pool import pool_geometry
from stm32ai.passes.lower.resize import bilinear_float, bilinear_outside
from stm32ai.passes.quant import activation_range_quantized, per_channel_multiplier, quantize_multiplier

__all__ = ["recentred"]


def _legacy(op: Op, g: Graph) -> bool:
    return bool(op.options.get(LEGACY_U8))


def recentred(w: Tensor) -> np.ndarray:
    """The uint8 filter's codes minus its zero point: int16, -255..255."""
    assert w.data is not None and w.quant is not None
    return (np.asarray(w.data, np.int16) - np.int16(_zp(w))).astype(np.int16)


# ---- checks ------------------------------------------------------------------------------------

def _check_io(x: Tensor, y: Tensor, w: Tensor, bias: Tensor | None, n_out: int) -> str | None:
    if x.dtype != "int8" or y.dtype != "int8":
        return f"legacy uint8: {x.dtype} input / {y.dtype} output next to a uint8 filter is not supported"
    r = per_tensor_quant(x, "input") or per_tensor_quant(y, "output")
    if r:
        return r
    if w.dtype != "uint8" or w.quant is None or w.quant.scale.size != 1 or w.quant.zero_point.size > 1:
        return (f"legacy uint8: filter '{w.name}' must be uint8 with one scale and one zero point "
                "(TFLite's uint8 quantisation is per-tensor)")
    if not float(w.quant.scale[0]) > 0:
        return f"legacy uint8: filter '{w.name}' has a non-positive scale"
    if bias is not None and (bias.dtype != "int32" or bias.size != n_out):
        return f"legacy uint8: bias '{bias.name}' must be int32 with {n_out} values"
    return None


def _check_conv_u8(op: Op, g: Graph) -> str | None:
    operands = weighted_operands(op, g, "filter")
    if isinstance(operands, str):
        return operands
    x, w, bias, y = operands
    geo = conv_geometry(op, g)
    if isinstance(geo, str):
        return geo
    return check_activation(op) or _check_io(x, y, w, bias, geo.out_c)


def _fc_geometry(op: Op, g: Graph) -> ConvGeometry | str:
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    if len(w.shape) != 2 or min(w.shape) <= 0:
        return f"weights '{w.name}' {list(w.shape)} are not a 2-D [out, in] matrix"
    n_out, k = (int(d) for d in w.shape)
    if x.size % k:
        return f"input '{x.name}' {list(x.shape)} is not a whole number of rows of {k}"
    b = x.size // k
    if y.size != b * n_out:
        return f"output '{y.name}' {list(y.shape)} does not hold {b} x {n_out} values"
    if str(op.options.get("weights_format", "DEFAULT")) != "DEFAULT":
        return f"weights format {op.options.get('weights_format')} is not supported"
    return ConvGeometry(b, 1, 1, k, 1, 1, n_out, 1, 1, (1, 1), (1, 1), (0, 0))


def _check_fc_u8(op: Op, g: Graph) -> str | None:
    operands = weighted_operands(op, g, "weights tensor")
    if isinstance(operands, str):
        return operands
    x, w, bias, y = operands
    geo = _fc_geometry(op, g)
    if isinstance(geo, str):
        return geo
    reason = check_activation(op) or _check_io(x, y, w, bias, geo.out_c)
    if reason:
        return reason
    _, shift = _requant(x, w, y, 1)
    if not 1 <= 31 - int(shift[0]) <= 62:
        return "legacy uint8: the output multiplier's shift is outside TFLite's range — the model is malformed"
    return None


# ---- lowering ------------------------------------------------------------------------------------

def _bias(g: Graph, op: Op, n: int) -> np.ndarray:
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        return np.asarray(g.tensors[op.inputs[2]].data, np.int64).reshape(-1)
    return np.zeros(n, np.int64)


def _act_range(op: Op, y: Tensor) -> tuple[int, int]:
    """TFLite's clamp range in the shifted int8 domain (= the uint8 range - 128)."""
    return activation_range_quantized(fused_activation(op), _scale(y), _zp(y), "int8")


def _requant(x: Tensor, w: Tensor, y: Tensor, n: int) -> tuple[np.ndarray, np.ndarray]:
    m, s = quantize_multiplier(per_channel_multiplier(_scale(x), float(w.quant.scale[0]), _scale(y)))  # type: ignore[union-attr]
    return np.full(n, m, np.int64), np.full(n, s, np.int64)


def _lower_wide_conv(op: Op, g: Graph, geo: ConvGeometry) -> None:
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    base = y.name or f"op{op.index}"
    rows = recentred(w).reshape(geo.out_c, -1)
    bias = _bias(g, op, geo.out_c)
    mult, shift = _requant(x, w, y, geo.out_c)
    table, fold = conv_rq_table(fold_bias(bias, rows, _zp(x)), rows, mult, shift, _zp(y), bias)
    lo, hi = _act_range(op, y)
    op.macc = int(geo.batches * geo.out_h * geo.out_w * geo.out_c * geo.k_h * geo.k_w * geo.in_c)
    op.kernel = "conv2d_s8"
    w16 = pack_conv_weights_s16(conv_rows_for_kernel(geo, rows))
    op.inputs = [op.inputs[0], g.add_const(f"{base}/weights_u8_w16", w16),
                 g.add_const(f"{base}/requant", table)]
    op.attrs = {**geo.attrs(), "pad_value": _zp(x), "out_offset": _zp(y), "act_min": int(lo), "act_max": int(hi),
                "w16": 1, "rq_fold": int(fold), "krow": int(conv_krow(geo)), "reverse": 0, "stage_oc": 0}
    op.scratch = conv_scratch_size(geo)


@register_variant("CONV_2D", "legacy uint8 (TF1 QAT/TOCO: uint8 per-tensor filter and activations): "
                  "bit-exact with LiteRT-ref, on the int8 kernel with the filter re-centred to int16",
                  _legacy, _check_conv_u8)
def lower_conv_u8(op: Op, g: Graph) -> None:
    geo = conv_geometry(op, g)
    assert not isinstance(geo, str)
    _lower_wide_conv(op, g, geo)


@register_variant("FULLY_CONNECTED", "legacy uint8 (uint8 per-tensor weights and activations): bit-exact "
                  "with LiteRT-ref (its single-rounding requantisation), weights re-centred to int16",
                  _legacy, _check_fc_u8)
def lower_fc_u8(op: Op, g: Graph) -> None:
    geo = _fc_geometry(op, g)
    assert not isinstance(geo, str)
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    base = y.name or f"op{op.index}"
    rows = recentred(w).reshape(geo.out_c, geo.in_c)
    bias = fold_bias(_bias(g, op, geo.out_c), rows, _zp(x))
    mult, shift = _requant(x, w, y, 1)
    lo, hi = _act_range(op, y)
    op.macc = int(geo.batches * geo.out_c * geo.in_c)
    op.kernel = "fully_connected_u8"
    op.inputs = [op.inputs[0], g.add_const(f"{base}/weights_u8", np.ascontiguousarray(rows)),
                 g.add_const(f"{base}/bias_folded", bias)]
    op.attrs = {"batches": geo.batches, "in_features": geo.in_c, "out_features": geo.out_c,
                "out_multiplier": int(mult[0]), "out_shift": int(shift[0]), "out_zero_point": _zp(y),
                "act_min": int(lo), "act_max": int(hi)}
    op.scratch = 0


@register_variant("DEPTHWISE_CONV_2D", "legacy uint8 (uint8 per-tensor filter and activations): "
                  "bit-exact with LiteRT-ref, filter re-centred to int16; any multiplier, stride, dilation",
                  _legacy, _check_conv_u8)
def lower_dw_u8(op: Op, g: Graph) -> None:
    geo = conv_geometry(op, g)
    assert not isinstance(geo, str)
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    base = y.name or f"op{op.index}"
    taps = recentred(w).reshape(geo.k_h * geo.k_w, geo.out_c)  # TFLite's [ky*kw+kx][oc]
    bias = fold_bias(_bias(g, op, geo.out_c), taps.T, _zp(x))
    mult, shift = _requant(x, w, y, geo.out_c)
    lo, hi = _act_range(op, y)
    op.macc = int(geo.batches * geo.out_h * geo.out_w * geo.out_c * geo.k_h * geo.k_w)
    op.kernel = "depthwise_conv2d_u8"
    op.inputs = [op.inputs[0], g.add_const(f"{base}/weights_u8", np.ascontiguousarray(taps)),
                 g.add_const(f"{base}/bias_folded", bias), g.add_const(f"{base}/out_multiplier", mult.astype(np.int32)),
                 g.add_const(f"{base}/out_shift", shift.astype(np.int32))]
    op.attrs = {**geo.attrs(), "depth_mult": geo.out_c // geo.in_c, "pad_value": _zp(x), "out_offset": _zp(y),
                "act_min": int(lo), "act_max": int(hi)}
    op.scratch = 0


def _check_avgpool_u8(op: Op, g: Graph) -> str | None:
    from stm32ai.passes.lower import REGISTRY

    return REGISTRY["AVERAGE_POOL_2D"].check(op, g)  # the int8 rules hold on the shifted tensors


@register_variant("AVERAGE_POOL_2D", "legacy uint8: LiteRT-ref's rounding of uint8 sums (half up)",
                  _legacy, _check_avgpool_u8)
def lower_avgpool_u8(op: Op, g: Graph) -> None:
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if x.dtype != "int8":  # a float pool cannot carry the flag; kept for safety
        raise AssertionError(op.where)
    geo = pool_geometry(op, g)
    lo, hi = _act_range(op, y)
    op.macc = int(y.size * geo["filter_h"] * geo["filter_w"])
    op.kernel = "avgpool_u8"
    op.attrs = {**geo, "act_min": int(lo), "act_max": int(hi)}


def concat_rescale_values(s_in: float, zp_in: int, s_out: float, zp_out: int) -> list[int]:
    """LiteRT's uint8 ConcatenationWithScaling for every shifted input code -128..127, shifted
    back: in float32, scale = s_in * (1 / s_out), bias = -zp_in * scale, then
    round(u * scale + bias) (half away from zero) + zp_out clamped to 0..255 (zero points uint8)."""
    f = np.float32
    scale = f(f(s_in) * f(f(1.0) / f(s_out)))
    bias = f(f(-zp_in) * scale)
    out = []
    for u in range(256):
        v = f(f(f(u) * scale) + bias)
        r = int(np.floor(abs(float(v)) + 0.5)) * (1 if v >= 0 else -1)
        out.append(min(max(r + zp_out, 0), 255) - 128)
    return out


def _rescale(op: Op, g: Graph) -> bool:
    return bool(op.options.get(RESCALE))


def _check_rescale(op: Op, g: Graph) -> str | None:
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    return per_tensor_quant(src, "input") or per_tensor_quant(dst, "output")


@register_variant("QUANTIZE", "legacy uint8: the float rescaling of a CONCATENATION input quantised "
                  "unlike the output (LiteRT's ConcatenationWithScaling), a 256-entry table",
                  _rescale, _check_rescale)
def lower_rescale_u8(op: Op, g: Graph) -> None:
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    values = concat_rescale_values(_scale(src), _zp(src) + 128, _scale(dst), _zp(dst) + 128)
    lower_as_table(op, g, values, "int8", "int8", what="rescale")


def _check_relu6_u8(op: Op, g: Graph) -> str | None:
    from stm32ai.passes.lower import REGISTRY

    return REGISTRY["RELU6"].check(op, g)  # the int8 rules hold on the shifted tensors


@register_variant("RELU6", "legacy uint8: LiteRT's QuantizedReluX (requantised to the output's "
                  "quantisation, then clamped), a 256-entry table", _legacy, _check_relu6_u8)
def lower_relu6_u8(op: Op, g: Graph) -> None:
    """TFLM's int8 RELU6 clamps in the input's quantisation and never reads the output's; LiteRT's
    uint8 RELU6 requantises to the output first (QuantizedReluX), which is what a legacy model
    means. Shift-invariant like the rest (clamp bounds zp + round(r / s) move with zp)."""
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    assert src.quant is not None and dst.quant is not None
    lower_as_table(op, g, relu_x_table_litert(src.quant, dst.quant, 0.0, 6.0), "int8", "int8", what="relu6")


def _check_resize_u8(op: Op, g: Graph) -> str | None:
    from stm32ai.passes.lower import REGISTRY

    reason = REGISTRY["RESIZE_BILINEAR"].check(op, g)  # shapes, size, options (int8 rules)
    if reason:
        return reason
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    align, half = bool(op.options.get("align_corners")), bool(op.options.get("half_pixel_centers"))
    return bilinear_outside(bilinear_float, src.shape[1:3], dst.shape[1:3], align, half)


@register_variant("RESIZE_BILINEAR", "legacy uint8: LiteRT's float32 blend of the uint8 codes, rounded "
                  "(float at run time, bit-exact)", _legacy, _check_resize_u8)
def lower_resize_bilinear_u8(op: Op, g: Graph) -> None:
    """LiteRT has no integer bilinear path for uint8: the float one, on codes (module docs)."""
    src, dst = op.inputs[0], op.outputs[0]
    n, h, w, c = g.tensors[src].shape
    _, oh, ow, _ = g.tensors[dst].shape
    align, half = bool(op.options.get("align_corners")), bool(op.options.get("half_pixel_centers"))
    table: list[int] = []
    frac: list[np.float32] = []
    for o, i, step in ((oh, h, w * c), (ow, w, c)):
        for k in range(o):
            lo, hi, f = bilinear_float(k, i, o, align, half)
            table += [lo * step, hi * step, 0]
            frac.append(f)
    name = g.tensors[dst].name
    op.kernel = "resize_bilinear_u8"
    op.inputs = [src, g.add_const(f"{name}/resize_table", np.asarray(table, np.int32)),
                 g.add_const(f"{name}/resize_frac", np.asarray(frac, np.float32))]
    op.attrs = {"batches": n, "in_h": h, "in_w": w, "out_h": oh, "out_w": ow, "channels": c}
    op.macc = 4 * g.tensors[dst].size
    op.scratch = 0
