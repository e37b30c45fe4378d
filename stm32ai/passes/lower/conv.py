"""CONV_2D and DEPTHWISE_CONV_2D -> the convolution kernels (docs/kernels_conv.md).

int8, bit-exact with TFLite Micro's reference kernels (ConvPerChannel /
DepthwiseConvPerChannel):

    acc[oc] = bias[oc] + sum over in-image taps of w * (x - in_zp)
    y[oc]   = clamp(requant(acc, M[oc], s[oc]) + out_zp, act_min, act_max)

Everything but the sums is computed here:

* the input zero point is folded into the bias, `bias'[oc] = bias[oc] - in_zp * sum(w[oc])`
  (int32 wrap-around, like the accumulator); the kernels then make padded taps read
  `pad_value = in_zp`, whose contribution `w * in_zp` cancels its share of the fold, so
  the result equals TFLite's skipping of those taps exactly;
* per-channel multiplier/shift tables: effective scale
  `double(in_scale) * double(filter_scale[c]) / double(out_scale)` (TFLite's
  PopulateConvolutionQuantizationParams, also for per-tensor filters) through
  QuantizeMultiplier;
* padding (TFLite's ComputePaddingHeightWidth), the fused activation's clamp range;
* the weights, re-laid out for the kernel's access order (see `pack_conv_weights_s8`,
  `pack_dw_weights_s8`).

float32 keeps TFLite's layouts and its accumulation order (taps, then bias).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import check_activation, check_filter_quant, check_int8_io, weighted_operands
from stm32ai.passes.lower.common import fused_activation as _fused
from stm32ai.passes.lower.common import scale_of as _scale
from stm32ai.passes.lower.common import zp_of as _zp
from stm32ai.passes.lower.conv_geometry import ConvGeometry, conv_geometry, out_size, same_padding
from stm32ai.passes.lower.conv_smallk import (
    lower_smallk,
    lower_win,
    smallk_applies,
    smallk_default,
    win_applies,
    win_default,
)
from stm32ai.passes.lower.conv_wino import lower_winograd, wino_default, wino_extra_bytes
from stm32ai.passes.lower.dwconv3x3 import lower_dw3x3
from stm32ai.passes.quant import (
    activation_range_f32,
    activation_range_quantized,
    per_channel_multiplier,
    quantize_multiplier,
)
from stm32ai.tuning import conv_key

__all__ = [
    "ConvGeometry", "DW_MAX_TAPS", "conv_geometry", "out_size", "same_padding", "fold_bias",
    "pack_conv_weights_s8", "pack_conv_weights_s16", "conv_rq_table", "rq_fold_ref", "acc_bound",
    "rq_double_ok", "rq_double_mode", "rq_double_ref",
    "conv_scratch_size", "conv_1col_ok", "conv_1col_scratch_size",
    "conv_copy_bytes", "conv_pad_copy", "conv_krow", "conv_kp", "conv_rows_for_kernel",
    "dw_scratch_size",
    "OPTIMIZATIONS", "DEFAULT_WEIGHTS_BUDGET", "choose_conv_layouts", "conv_layout_choices",
    "hybrid_per_channel", "hybrid_filter_scales", "hybrid_conv_scratch_size", "hybrid_dw_scratch_size",
]

DW_MAX_TAPS = 64  # AI_DW_MAX_TAPS in ai_kernels_conv.h
# ---- int8 helpers ----------------------------------------------------------------------------

def fold_bias(bias: np.ndarray | None, w_rows: np.ndarray, in_zp: int) -> np.ndarray:
    """bias[oc] - in_zp * sum(w_rows[oc]) wrapped to int32 (w_rows: [out_c, K])."""
    w_rows = np.asarray(w_rows, np.int64)
    b = np.zeros(w_rows.shape[0], np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
    folded = b - np.int64(in_zp) * w_rows.sum(axis=1)
    return (((folded + (1 << 31)) % (1 << 32)) - (1 << 31)).astype(np.int32)


def pack_conv_weights_s8(w_rows: np.ndarray) -> np.ndarray:
    """int8 [out_c, K] (K = kh*kw*in_c in TFLite's (ky, kx, ic) order) -> the conv2d_s8 layout.

    K is zero-padded to Kp = a multiple of 4. Output channels go in pairs; for a pair
    (2p, 2p+1) and each group of 4 K-elements, the 4 bytes of channel 2p then the 4 bytes
    of channel 2p+1 (one 64-bit load feeds both). An odd last channel follows as its
    plain padded row. The kernel unpacks each 4-byte word with SXTB16 into {w0, w2},
    {w1, w3}; the im2col columns are stored in that order, so no shuffle is needed.
    """
    w_rows = np.asarray(w_rows, np.int8)
    oc, k = w_rows.shape
    kp = (k + 3) // 4 * 4
    padded = np.zeros((oc, kp), np.int8)
    padded[:, :k] = w_rows
    parts = []
    pairs = oc // 2
    if pairs:
        body = padded[:2 * pairs].reshape(pairs, 2, kp // 4, 4).transpose(0, 2, 1, 3)
        parts.append(body.reshape(-1))
    if oc % 2:
        parts.append(padded[-1])
    return np.concatenate(parts).astype(np.int8)


def pack_conv_weights_s16(w_rows: np.ndarray) -> np.ndarray:
    """int8 [out_c, K] -> the conv2d_s8 w16 layout ("time"): int16, pre-sign-extended.

    Same blocking as `pack_conv_weights_s8` (pairs of output channels, groups of 4
    K-elements, K zero-padded to Kp), each group's 4 weights stored as the int16 pairs
    {w0, w2}, {w1, w3} — the order SXTB16 would unpack them and the im2col column uses —
    so the inner loop feeds them to SMLAD as loaded. Twice the bytes of the int8 layout.
    Rows beyond int8 (a legacy uint8 filter re-centred to -255..255, passes/lower/u8.py) are
    laid out the same way: the kernel reads any int16.
    """
    w_rows = np.asarray(w_rows)
    if w_rows.size and (int(w_rows.min()) < -32768 or int(w_rows.max()) > 32767):
        raise ValueError("w16 weights must fit int16")
    oc, k = w_rows.shape
    kp = (k + 3) // 4 * 4
    padded = np.zeros((oc, kp), np.int16)
    padded[:, :k] = w_rows
    padded = padded.reshape(oc, kp // 4, 4)[:, :, [0, 2, 1, 3]]
    parts = []
    pairs = oc // 2
    if pairs:
        parts.append(padded[:2 * pairs].reshape(pairs, 2, kp // 4, 4).transpose(0, 2, 1, 3).reshape(-1))
    if oc % 2:
        parts.append(padded[-1].reshape(-1))
    return np.concatenate(parts).astype(np.int16)


def rq_fold_ref(x: np.ndarray, m: int, rs: int, kf: int) -> np.ndarray:
    """The integer arithmetic of the C rq_fold (ai_simd.h), for tests and the exactness
    check: (hi32(kf * 2^32 + 2^30 - 2^31 * [x < 0] + x * m)) >> rs, arithmetic shifts."""
    x = np.asarray(x, np.int64)
    a = [int(v) for v in x.reshape(-1)]
    out = [(((kf << 32) + (1 << 30) - ((1 << 31) if v < 0 else 0) + v * m) >> 32) >> rs for v in a]
    return np.array(out, np.int64).reshape(x.shape)


def _fold_ok(m: int, shift: int, out_zp: int, acc_bound: int) -> bool:
    """rq_fold(x, m, rs, kf) == requant(x, m, shift) + out_zp for every |x| <= acc_bound.

    Holds by construction for shift <= -2 (the identity in ai_simd.h) as long as the high
    word kf + floor((x*m + 2^30 - 2^31 [x<0]) / 2^32) stays an int32; |x*m| < 2^31 |x|, so
    |high word| <= |kf| + acc_bound / 2 + 2."""
    if shift > -2 or shift < -31 or m <= 0:
        return False
    rs = -shift - 1
    kf = (1 << (rs - 1)) + out_zp * (1 << rs)
    return abs(kf) + acc_bound // 2 + 2 < (1 << 31)


def acc_bound(w_rows: np.ndarray, tflite_bias: np.ndarray | None) -> np.ndarray:
    """Per output channel, a bound on |TFLite's accumulator|: |bias| + 255 * sum|w|
    (|x - in_zp| <= 255), capped at 2^31 (wrap-around: any int32)."""
    w = np.abs(np.asarray(w_rows, np.int64))
    tb = np.zeros(w.shape[0], np.int64) if tflite_bias is None else np.asarray(tflite_bias, np.int64).reshape(-1)
    return np.minimum(np.abs(tb) + 255 * w.sum(axis=1), 1 << 31)


def rq_double_ok(table: np.ndarray, bound: np.ndarray) -> bool:
    """The doubled-accumulator requantisation of the Cortex-M4 channel quads (AI_RQ_ACC_MM) is
    exact for a folded table (rq_fold rows {bias', m, rs, kf}) when, for every channel, the
    doubled accumulator 2x and the SMMLAR high word (2 kf - [x<0]) + floor((2x*m + 2^31) / 2^32)
    stay int32: |x| <= A < 2^30 and 2|kf| + A + 2 < 2^31 (|2x*m| < 2^32 |x|). Then
    ((that high word) >> (rs + 1)) equals rq_fold's value for every |x| <= A
    (docs/kernels_conv.md "Doubled accumulator"); `rq_double_ref` is its transcription."""
    kf = np.abs(np.asarray(table, np.int64)[:, 3])
    a = np.asarray(bound, np.int64)
    return bool(np.all(a < (1 << 30)) and np.all(2 * kf + a + 2 < (1 << 31)))


def rq_double_mode(table: np.ndarray, bound: np.ndarray, out_zp: int) -> int:
    """conv2d_s8's rq_fold for a folded table: 3 when the doubled form also needs no sign term
    (out_zp = -128 and every m >= 2^30: for x < 0 it gives at most out_zp, rq_fold no more, and
    SSAT makes both -128), 2 when only `rq_double_ok` holds, else 1."""
    if not rq_double_ok(table, bound):
        return 1
    m = np.asarray(table, np.int64)[:, 1]
    return 3 if out_zp == -128 and bool(np.all(m >= (1 << 30))) else 2


def rq_double_ref(x: np.ndarray, m: int, rs: int, kf: int, sign: bool = True) -> np.ndarray:
    """The integer arithmetic of AI_RQ_ACC_MM (sign) / AI_RQ_ACC_MM0 (ai_conv_s8.c) on TFLite's
    accumulator x, int32 wrap-around included: a = 2x, hi = bits 63..32 of
    ((2kf + (a >> 31 if sign)) << 32) + a*m + 2^31 (SMMLAR), then hi >> (rs + 1), arithmetic
    shifts; not saturated."""
    def s32(v: int) -> int:
        return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    out = []
    for v in np.asarray(x, np.int64).reshape(-1).tolist():
        a = s32(2 * v)
        k = s32(s32(2 * kf) + (a >> 31 if sign else 0))
        hi = s32(((k << 32) + a * m + (1 << 31)) >> 32)
        out.append(hi >> (rs + 1))
    return np.array(out, np.int64).reshape(np.shape(x))


def conv_rq_table(bias: np.ndarray, w_rows: np.ndarray, mult: np.ndarray, shift: np.ndarray,
                  out_zp: int, tflite_bias: np.ndarray | None) -> tuple[np.ndarray, bool]:
    """The conv2d_s8 `rq` input: int32 [out_c, 4] and whether it holds rq_fold constants.

    bias: the folded bias the kernel starts from. The accumulator bound per channel is
    TFLite's |bias| + 255 * sum|w| (|x - in_zp| <= 255), capped at 2^31 (wrap-around:
    any int32). rq_fold for the layer when every channel passes `_fold_ok`, else the
    general {bias, multiplier, shift, 0} for ai_requant.
    """
    n = w_rows.shape[0]
    bound = acc_bound(w_rows, tflite_bias)
    mult = np.asarray(mult, np.int64)
    shift = np.asarray(shift, np.int64)
    fold = all(_fold_ok(int(mult[c]), int(shift[c]), out_zp, int(bound[c])) for c in range(n))
    table = np.zeros((n, 4), np.int64)
    table[:, 0] = np.asarray(bias, np.int64)
    table[:, 1] = mult
    if fold:
        rs = -shift - 1
        table[:, 2] = rs
        table[:, 3] = (np.int64(1) << (rs - 1)) + out_zp * (np.int64(1) << rs)
    else:
        table[:, 2] = shift
    return table.astype(np.int32), fold


def pack_dw_weights_s8(w_taps: np.ndarray) -> np.ndarray:
    """int8 [taps, C] (depth multiplier 1) -> the depthwise_conv2d_s8 layout.

    For each group of 4 channels, for each tap (ky-major), the 4 bytes w[t, c:c+4]
    (one 32-bit load per tap); then for each of the C % 4 remaining channels its taps.
    """
    w_taps = np.asarray(w_taps, np.int8)
    taps, c = w_taps.shape
    c4 = c // 4 * 4
    parts = [w_taps[:, :c4].reshape(taps, c4 // 4, 4).transpose(1, 0, 2).reshape(-1),
             w_taps[:, c4:].T.reshape(-1)]
    return np.concatenate(parts).astype(np.int8)


def conv_krow(geo: ConvGeometry) -> bool:
    """conv2d_s8's padded-rows K layout for in_c % 4 != 0: each filter row (k_w*in_c taps)
    padded with zero weights to a multiple of 4, so that a window inside the image unpacks
    its rows straight from the input instead of being gathered byte by byte (~250
    instructions per pixel for 3x3x3). Taken when dilation_w is 1 (rows are contiguous) and
    the padding's extra MACs per pixel (out_c * k_h * pad) stay under ~200, measured break-even."""
    run = geo.k_w * geo.in_c
    pad = -run % 4
    return geo.in_c % 4 != 0 and geo.dilation[1] == 1 and geo.out_c * geo.k_h * pad <= 200


def conv_kp(geo: ConvGeometry) -> int:
    """The packed K of conv2d_s8 (C: conv_kp)."""
    if conv_krow(geo):
        return geo.k_h * ((geo.k_w * geo.in_c + 3) // 4 * 4)
    return (geo.k_h * geo.k_w * geo.in_c + 3) // 4 * 4


def conv_rows_for_kernel(geo: ConvGeometry, w_rows: np.ndarray) -> np.ndarray:
    """Filter rows [out_c, K] in the kernel's K order: with krow, each filter row padded
    with zeros to a multiple of 4. int16 rows (legacy uint8, re-centred) stay int16, any
    other rows become int8."""
    w_rows = np.asarray(w_rows)
    dtype = np.int16 if w_rows.dtype == np.int16 else np.int8
    if not conv_krow(geo):
        return w_rows
    run = geo.k_w * geo.in_c
    runp = (run + 3) // 4 * 4
    rows = np.zeros((geo.out_c, geo.k_h, runp), dtype)
    rows[:, :, :run] = w_rows.astype(dtype).reshape(geo.out_c, geo.k_h, run)
    return rows.reshape(geo.out_c, -1)


def _conv_pads(geo: ConvGeometry) -> bool:
    """Some window reaches outside the image (C: conv_pads)."""
    return (geo.pad[0] > 0 or geo.pad[1] > 0
            or (geo.out_h - 1) * geo.stride[0] + (geo.k_h - 1) * geo.dilation[0] >= geo.in_h
            or (geo.out_w - 1) * geo.stride[1] + (geo.k_w - 1) * geo.dilation[1] >= geo.in_w)


def conv_copy_bytes(geo: ConvGeometry) -> int:
    """C conv_copy_bytes: the padded input copy of `pad_copy` (the rows and columns some window
    touches, padding included), rounded up to a word, plus one zeroed slack word."""
    ch = (geo.out_h - 1) * geo.stride[0] + (geo.k_h - 1) * geo.dilation[0] + 1
    cw = (geo.out_w - 1) * geo.stride[1] + (geo.k_w - 1) * geo.dilation[1] + 1
    return (ch * cw * geo.in_c + 3) // 4 * 4 + 4


# pad_copy: largest padded input copy (bytes of scratch) a layer may take; KWS's first layer
# needs 700 B, ResNet-8's 3,472 B, VWW's 96x96x3 28 KB (not taken)
PAD_COPY_MAX_BYTES = 4096


def conv_pad_copy(geo: ConvGeometry) -> bool:
    """conv2d_s8's `pad_copy`: copy the padded input into scratch first, so every window lies
    inside the copy and unpacks its rows straight from it. For gathered layers (in_c % 4 != 0,
    first layers) with the padded-rows layout (`krow`) whose windows leave the image: there
    each border window is gathered byte by byte by cold out-of-line code (KWS's first layer:
    43 of 63 pixel pairs), which also evicts the pixel-pair loop from the L4's 1 KB ART
    I-cache. Only when the copy is small (PAD_COPY_MAX_BYTES); docs/kernels_conv.md."""
    return (geo.in_c % 4 != 0 and conv_krow(geo) and _conv_pads(geo)
            and conv_copy_bytes(geo) <= PAD_COPY_MAX_BYTES)


def conv_scratch_size(geo: ConvGeometry, pad_copy: bool = False) -> int:
    """ai_conv2d_s8_scratch_size: two int16 im2col columns of Kp elements (4 * Kp bytes),
    plus the two pixels' int8 columns (2 * Kp bytes) when in_c % 4 != 0 (gathered as bytes,
    then unpacked 4 at a time), else one input pixel of pad values (in_c bytes) when some
    window reaches outside the image (never for 1x1); then the padded input copy (pad_copy)."""
    kp = conv_kp(geo)
    copy = conv_copy_bytes(geo) if pad_copy else 0
    if geo.in_c % 4:
        return 6 * kp + copy
    return 4 * kp + (geo.in_c if _conv_pads(geo) else 0) + copy


def conv_1col_ok(attrs: dict) -> bool:
    """C conv_1col_ok: ai_conv2d_s8_1col runs one column (else it runs ai_conv2d_s8): in_c % 4
    == 0, unstaged, no padded copy, raster order."""
    return (int(attrs["in_c"]) % 4 == 0 and int(attrs.get("stage_oc", 0)) <= 0
            and not int(attrs.get("pad_copy", 0)) and not int(attrs.get("reverse", 0)))


def conv_1col_scratch_size(attrs: dict) -> int:
    """ai_conv2d_s8_1col_scratch_size: one int16 column (2 * Kp bytes) and the pad pixel (in_c
    bytes) when some window leaves the image. Only for conv_1col_ok layers (the others run
    ai_conv2d_s8: its scratch, never chosen)."""
    if not conv_1col_ok(attrs):
        raise ValueError("conv2d_s8_1col: not a one-column layer (conv_1col_ok)")
    geo = ConvGeometry(*(int(attrs[k]) for k in ("batches", "in_h", "in_w", "in_c", "out_h", "out_w",
                                                  "out_c", "k_h", "k_w")),
                       *(tuple(int(v) for v in attrs[k]) for k in ("stride", "dilation", "pad")))  # type: ignore[arg-type]
    return 2 * conv_kp(geo) + (geo.in_c if _conv_pads(geo) else 0)


def dw_scratch_size(geo: ConvGeometry) -> int:
    """ai_depthwise_conv2d_s8_scratch_size: one pixel of pad values."""
    return (geo.in_c + 3) // 4 * 4


# ---- support check ---------------------------------------------------------------------------

def _check_hybrid_filter(op: Op, w: Tensor, out_c: int) -> str | None:
    """Hybrid (dynamic-range) layer: float activations, int8 symmetric filter."""
    what = f"hybrid (dynamic-range) {op.type}: float input with {w.dtype} filter '{w.name}'"
    if w.dtype != "int8":
        return f"{what} is not supported (int8 filters only)"
    if op.type != "DEPTHWISE_CONV_2D":
        return check_filter_quant(w, what, out_c, 0)
    # LiteRT's hybrid depthwise reads one filter scale per output channel (its only path)
    if w.quant is not None and (w.quant.scale.size != out_c or (out_c > 1 and w.quant.axis != 3)):
        return (f"{what} has {w.quant.scale.size} scales along axis {w.quant.axis}; hybrid depthwise "
                f"needs one per output channel (axis 3, {out_c} scales), as the converter writes")
    return check_filter_quant(w, what, out_c, None)


def check_conv(op: Op, g: Graph) -> str | None:
    operands = weighted_operands(op, g, "filter")
    if isinstance(operands, str):
        return operands
    x, w, bias, y = operands
    reason = check_activation(op)
    if reason:
        return reason
    geo = conv_geometry(op, g)
    if isinstance(geo, str):
        return geo
    if bias is not None and bias.size != geo.out_c:
        return f"bias '{bias.name}' has {bias.size} values for {geo.out_c} output channels"
    if x.dtype == "float32":
        if y.dtype != "float32" or (bias is not None and bias.dtype != "float32"):
            return "float convolution needs float32 output and bias"
        if w.dtype != "float32":
            return _check_hybrid_filter(op, w, geo.out_c)
        return None
    if x.dtype == "int16":
        return "int16 activations (16x8 quantisation) are not supported; use int8 activations"
    reason = check_int8_io(x, y)
    if reason:
        return reason
    if w.dtype != "int8":
        return f"filter '{w.name}' is {w.dtype}; int8 input needs an int8 filter"
    reason = check_filter_quant(w, f"filter '{w.name}'", geo.out_c, None)
    if reason:
        return reason
    if bias is not None and bias.dtype != "int32":
        return f"bias '{bias.name}' is {bias.dtype}; int8 convolution needs an int32 bias"
    return None


# ---- lowering --------------------------------------------------------------------------------

def _requant_values(x: Tensor, w: Tensor, y: Tensor, n: int) -> tuple[np.ndarray, np.ndarray]:
    """int32 multiplier and shift, one per output channel (TFLite exactly)."""
    assert w.quant is not None
    scales = np.asarray(w.quant.scale, np.float32).reshape(-1)
    if scales.size == 1:
        scales = np.repeat(scales, n)
    pairs = [quantize_multiplier(per_channel_multiplier(_scale(x), float(s), _scale(y)))
             for s in scales]
    return np.array([p[0] for p in pairs], np.int32), np.array([p[1] for p in pairs], np.int32)


def _requant_tables(g: Graph, base: str, x: Tensor, w: Tensor, y: Tensor, n: int) -> tuple[int, int]:
    """The multiplier and shift tables as constants."""
    mult, shift = _requant_values(x, w, y, n)
    return g.add_const(f"{base}/out_multiplier", mult), g.add_const(f"{base}/out_shift", shift)


def _int8_attrs(op: Op, x: Tensor, y: Tensor) -> dict[str, object]:
    lo, hi = activation_range_quantized(_fused(op), _scale(y), _zp(y), "int8")
    # A fused SPACE_TO_BATCH_ND may fix the padding value (see passes/dilated_conv.py).
    pad_value = int(op.options.get("pad_value", _zp(x)))
    return {"pad_value": pad_value, "out_offset": _zp(y), "act_min": int(lo), "act_max": int(hi)}


def _bias_values(g: Graph, op: Op) -> np.ndarray | None:
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        data = g.tensors[op.inputs[2]].data
        assert data is not None
        return np.asarray(data).reshape(-1)
    return None


def _lower_conv_s8_rows(op: Op, g: Graph, geo: ConvGeometry, w_rows: np.ndarray, base: str) -> None:
    """conv2d_s8 from filter rows [out_c, kh*kw*in_c], int8 weights (the "ram" layout;
    `choose_conv_layouts` may switch it to int16 afterwards)."""
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    bias = _bias_values(g, op)
    mult, shift = _requant_values(x, w, y, geo.out_c)
    table, fold = conv_rq_table(fold_bias(bias, w_rows, _zp(x)), w_rows, mult, shift, _zp(y), bias)
    # rq_fold 2, 3: the Cortex-M4 channel quads may requantise from a doubled accumulator
    rq_mode = rq_double_mode(table, acc_bound(w_rows, bias), _zp(y)) if fold else 0
    q_id = g.add_const(f"{base}/requant", table)
    w_id = g.add_const(f"{base}/weights_packed", pack_conv_weights_s8(conv_rows_for_kernel(geo, w_rows)))
    op.kernel = "conv2d_s8"
    op.inputs = [op.inputs[0], w_id, q_id]
    # ram keeps its meaning: no scratch for speed
    pad_copy = g.optimization != "ram" and conv_pad_copy(geo)
    op.attrs = {**geo.attrs(), **_int8_attrs(op, x, y), "w16": 0, "rq_fold": rq_mode,
                "krow": int(conv_krow(geo)), "reverse": 0, "stage_oc": 0, "pad_copy": int(pad_copy)}
    op.scratch = conv_scratch_size(geo, pad_copy)


def _float_bias(g: Graph, op: Op, base: str, n: int) -> int:
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        return op.inputs[2]
    return g.add_const(f"{base}/bias_zero", np.zeros(n, np.float32))


# ---- hybrid (float activations, int8 filter) ------------------------------------------------

def hybrid_per_channel(w: Tensor) -> bool:
    """LiteRT's choice between its two hybrid paths: per-channel (asymmetric input
    quantisation) only when the filter has several scales that are not all equal."""
    assert w.quant is not None
    s = np.asarray(w.quant.scale, np.float32).reshape(-1)
    return bool(s.size > 1 and np.any(s != s[0]))


def hybrid_filter_scales(w: Tensor, n: int) -> np.ndarray:
    """The filter scales the hybrid kernels read: n float32 values.

    Per-tensor path: LiteRT multiplies by the tensor's legacy (single) scale; for a filter
    with several scales that are all equal that is the first one (measured against
    LiteRT-ref, tests/test_ops_hybrid.py).
    """
    assert w.quant is not None
    s = np.asarray(w.quant.scale, np.float32).reshape(-1)
    if hybrid_per_channel(w):
        return s.astype(np.float32)
    return np.full(n, s[0], np.float32)


def hybrid_conv_scratch_size(geo: ConvGeometry) -> int:
    """ai_conv2d_hybrid_scratch_size: one batch of quantised input plus one im2col column."""
    def a4(v: int) -> int:
        return (v + 3) // 4 * 4
    return a4(geo.in_h * geo.in_w * geo.in_c) + a4(geo.k_h * geo.k_w * geo.in_c)


def hybrid_dw_scratch_size(geo: ConvGeometry) -> int:
    """ai_depthwise_conv2d_hybrid_scratch_size: one batch of quantised input, then one int32
    accumulator per output channel."""
    return (geo.in_h * geo.in_w * geo.in_c + 3) // 4 * 4 + 4 * geo.out_c


def _lower_dw_hybrid(op: Op, g: Graph, geo: ConvGeometry, base: str) -> None:
    """LiteRT's EvalHybridPerChannel (ai_kernels_hybrid.h): TFLite's filter layout, float
    per-channel scales, the float bias (or NULL)."""
    w = g.tensors[op.inputs[1]]
    assert w.quant is not None
    scales = g.add_const(f"{base}/filter_scale", np.asarray(w.quant.scale, np.float32).reshape(-1))
    bias = op.inputs[2] if len(op.inputs) > 2 and op.inputs[2] >= 0 else -1
    lo, hi = activation_range_f32(_fused(op))
    op.kernel = "depthwise_conv2d_hybrid"
    op.inputs = [op.inputs[0], op.inputs[1], scales, bias]
    op.attrs = {**geo.attrs(), "depth_mult": geo.out_c // geo.in_c, "act_min": lo, "act_max": hi}
    op.scratch = hybrid_dw_scratch_size(geo)


def _lower_conv_hybrid(op: Op, g: Graph, geo: ConvGeometry, base: str) -> None:
    w = g.tensors[op.inputs[1]]
    assert w.data is not None
    k = geo.k_h * geo.k_w * geo.in_c
    per_channel = hybrid_per_channel(w)
    scales = g.add_const(f"{base}/filter_scale", hybrid_filter_scales(w, geo.out_c))
    w_sum = -1
    if per_channel:  # for the input offset: sum w * (q - off) = sum w * q - off * sum w
        rows = np.asarray(w.data, np.int64).reshape(geo.out_c, k)
        w_sum = g.add_const(f"{base}/filter_sum", rows.sum(axis=1).astype(np.int32))
    lo, hi = activation_range_f32(_fused(op))
    op.kernel = "conv2d_hybrid"
    op.inputs = [op.inputs[0], op.inputs[1], scales, w_sum, _float_bias(g, op, base, geo.out_c)]
    op.attrs = {**geo.attrs(), "per_channel": int(per_channel), "act_min": lo, "act_max": hi}
    op.scratch = hybrid_conv_scratch_size(geo)


@register("CONV_2D",
          "int8 (per-tensor or per-channel filter, int32 bias), float32, or hybrid (float32 "
          "activations, int8 per-tensor/per-channel filter, LiteRT's dynamic-range arithmetic); "
          "any kernel size, stride, dilation; SAME/VALID; fused NONE/RELU/RELU6/RELU_N1_TO_1; "
          "not grouped",
          check_conv)
def lower_conv(op: Op, g: Graph) -> None:
    geo, x, w, base = _start_lowering(op, g, geo_taps=lambda geo: geo.k_h * geo.k_w * geo.in_c)
    if x.dtype == "float32" and w.dtype == "int8":
        _lower_conv_hybrid(op, g, geo, base)
        return
    if x.dtype == "float32":
        _lower_f32(op, g, geo, base, "conv2d_f32")
        return
    w_rows = np.asarray(w.data, np.int8).reshape(geo.out_c, -1)
    choice = _tuned(op, g, geo)
    wino = choice == "wino" or (choice is None and (g.winograd or (g.winograd is None and _wino_by_rule(g, geo))))
    if wino and _lower_conv_wino(op, g, geo, w_rows, base):
        return
    if choice in (None, "smallk") and _lower_conv_smallk(op, g, geo, w_rows, base, choice == "smallk"):
        return
    _lower_conv_s8_rows(op, g, geo, w_rows, base)
    op.tune_variant = choice if choice in ("int8", "int16") else None


def _tuned(op: Op, g: Graph, geo: ConvGeometry) -> str | None:
    """Record the layer's tuning key; the variant a --tuning table asks for, if any. `ram`
    keeps its meaning (int8 weights, nothing that grows flash): the table is not consulted."""
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    op.tune_key = conv_key(op.type, geo.attrs(), x.dtype, w.dtype,
                           bool(w.quant is not None and w.quant.per_channel), y.dtype)
    if not g.tuning or g.optimization == "ram":
        return None
    return g.tuning.get(op.tune_key)


def _wino_by_rule(g: Graph, geo: ConvGeometry) -> bool:
    """The default choice (no --winograd / --no-winograd, no table entry): `wino_default`'s
    per-core rule, and under balanced only while the model's weights plus the transformed
    filter's growth stay within 7/8 of the flash budget."""
    if not wino_default(geo, g.core, g.optimization):
        return False
    if g.optimization == "time":
        return True
    budget = DEFAULT_WEIGHTS_BUDGET if g.weights_budget is None else g.weights_budget
    # the weights are counted mid-lowering: the layers after this one still add their tables
    # (requantisation rows grow the bias 4x), so 1/8 of the budget stays for them
    return _weights_bytes(g) + wino_extra_bytes(geo) <= budget - budget // 8


def _lower_conv_wino(op: Op, g: Graph, geo: ConvGeometry, w_rows: np.ndarray, base: str) -> bool:
    """--winograd: conv2d_wino_s8 where it applies and is proved exact (passes/lower/conv_wino.py);
    its requant table starts from TFLite's bias (the kernel works on x - in_zp)."""
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    bias = _bias_values(g, op)
    tb = np.zeros(geo.out_c, np.int32) if bias is None else np.asarray(bias, np.int32)
    mult, shift = _requant_values(x, w, y, geo.out_c)
    table, fold = conv_rq_table(tb, w_rows, mult, shift, _zp(y), bias)
    return lower_winograd(op, g, geo, w_rows, table, fold, base, _int8_attrs(op, x, y), _zp(x))


def _lower_conv_smallk(op: Op, g: Graph, geo: ConvGeometry, w_rows: np.ndarray, base: str,
                       tuned: bool = False) -> bool:
    """conv2d_smallk_s8 / conv2d_smallk_win_s8 by their default rules (passes/lower/conv_smallk.py),
    or wherever legal when a tuning table names the `smallk` variant (`tuned`), with conv2d_s8's
    folded requantisation table and its doubled-accumulator proof (`rq_double_mode`); False: not
    taken (a tuned layer then follows the other rules)."""
    smallk = smallk_applies(geo) if tuned else smallk_default(geo, g.core, g.optimization)
    if not smallk and not (win_applies(geo) if tuned else win_default(geo, g.core, g.optimization)):
        return False
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    bias = _bias_values(g, op)
    mult, shift = _requant_values(x, w, y, geo.out_c)
    table, fold = conv_rq_table(fold_bias(bias, w_rows, _zp(x)), w_rows, mult, shift, _zp(y), bias)
    if not fold:
        return False
    rq_mode = rq_double_mode(table, acc_bound(w_rows, bias), _zp(y))
    lower = lower_smallk if smallk else lower_win
    return lower(op, g, geo, w_rows, table, rq_mode, base, _int8_attrs(op, x, y))


def _start_lowering(op: Op, g: Graph, geo_taps: Callable[[ConvGeometry], int]
                    ) -> tuple[ConvGeometry, Tensor, Tensor, str]:
    """Geometry, input and filter of a CONV_2D / DEPTHWISE_CONV_2D being lowered, and the name
    its constants are based on; sets the op's MACC (`geo_taps` filter taps per output value)."""
    geo = conv_geometry(op, g)
    assert not isinstance(geo, str), geo
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    assert w.data is not None
    op.macc = int(geo.batches * geo.out_h * geo.out_w * geo.out_c * geo_taps(geo))
    return geo, x, w, y.name or f"op{op.index}"


def _lower_f32(op: Op, g: Graph, geo: ConvGeometry, base: str, kernel: str, **attrs: int) -> None:
    lo, hi = activation_range_f32(_fused(op))
    op.kernel = kernel
    op.inputs = [op.inputs[0], op.inputs[1], _float_bias(g, op, base, geo.out_c)]
    op.attrs = {**geo.attrs(), **attrs, "act_min": lo, "act_max": hi}
    op.scratch = 0


@register("DEPTHWISE_CONV_2D",
          "int8 (per-tensor or per-channel filter, int32 bias), float32, or hybrid (float32 "
          "activations, int8 per-channel filter, LiteRT's dynamic-range arithmetic); any kernel size, "
          "stride, dilation, depth multiplier; SAME/VALID; fused NONE/RELU/RELU6/RELU_N1_TO_1",
          check_conv)
def lower_depthwise(op: Op, g: Graph) -> None:
    geo, x, w, base = _start_lowering(op, g, geo_taps=lambda geo: geo.k_h * geo.k_w)
    y = g.tensors[op.outputs[0]]
    taps = geo.k_h * geo.k_w
    mult_dm = geo.out_c // geo.in_c
    w_taps = np.asarray(w.data).reshape(taps, geo.out_c)  # [ky*kw+kx, oc], oc = ic*M + m
    if x.dtype == "float32" and w.dtype == "int8":
        _lower_dw_hybrid(op, g, geo, base)
        return
    if x.dtype == "float32":
        _lower_f32(op, g, geo, base, "depthwise_conv2d_f32", depth_mult=mult_dm)
        return
    if geo.in_c == 1 and mult_dm > 1:
        # One input channel: exactly a CONV_2D with out_c filters [kh, kw, 1].
        choice = _tuned(op, g, geo)
        _lower_conv_s8_rows(op, g, geo, w_taps.T.astype(np.int8), base)
        op.tune_variant = choice if choice in ("int8", "int16") else None
        return
    bias = _bias_values(g, op)
    folded = fold_bias(bias, w_taps.T, _zp(x))
    if lower_dw3x3(op, g, geo, w_taps, bias, base, _int8_attrs(op, x, y), folded, rq_double_mode):
        return
    mult, shift = _requant_tables(g, base, x, w, y, geo.out_c)
    b_id = g.add_const(f"{base}/bias_folded", folded)
    attrs = {**geo.attrs(), **_int8_attrs(op, x, y)}
    if mult_dm == 1 and taps <= DW_MAX_TAPS:
        w_id = g.add_const(f"{base}/weights_packed", pack_dw_weights_s8(w_taps))
        op.kernel = "depthwise_conv2d_s8"
        op.scratch = dw_scratch_size(geo)
    else:
        w_id = op.inputs[1]
        op.kernel = "depthwise_conv2d_dm_s8"
        attrs = {**geo.attrs(), "depth_mult": mult_dm, **_int8_attrs(op, x, y)}
        op.scratch = 0
    op.inputs = [op.inputs[0], w_id, b_id, mult, shift]
    op.attrs = attrs


# ---- --optimization time|balanced|ram: int8 or int16 conv weights ---------------------------

OPTIMIZATIONS = ("time", "balanced", "ram")
# balanced without a board: total weights bytes the int16 layouts may grow the model to
# (half the flash of the smallest boards we support that run the MLPerf Tiny models).
DEFAULT_WEIGHTS_BUDGET = 512 * 1024


def _weights_bytes(g: Graph) -> int:
    ids = {i for op in g.ops for i in op.inputs if i >= 0 and g.tensors[i].is_const}
    return sum(int(g.tensors[i].data.nbytes) for i in ids)  # type: ignore[union-attr]


def _to_w16(g: Graph, op: Op) -> None:
    """Re-lay an int8 conv2d_s8 weight constant as int16 (pack_conv_weights_s16's layout:
    each 4-byte group of the int8 layout, reordered {0, 2, 1, 3} and sign-extended)."""
    t = g.tensors[op.inputs[1]]
    assert t.data is not None
    w16 = np.asarray(t.data, np.int8).reshape(-1, 4)[:, [0, 2, 1, 3]].astype(np.int16).reshape(-1)
    op.inputs[1] = g.add_const(f"{t.name}_s16", w16)
    op.attrs["w16"] = 1


def choose_conv_layouts(g: Graph, mode: str = "balanced", weights_budget: int | None = None) -> None:
    """Switch conv2d_s8 layers to int16 weights (~20 % fewer instructions in the MAC loop,
    twice the layer's weight bytes). time: every layer; ram: none; balanced: layers in
    order of output pixels (instructions saved per extra flash byte) while the model's
    weights stay within `weights_budget` (DEFAULT_WEIGHTS_BUDGET without one)."""
    if mode not in OPTIMIZATIONS:
        raise ValueError(f"optimization {mode!r}")
    # (a layer lowered with int16 weights already, legacy uint8: passes/lower/u8.py, keeps them)
    # A layer a tuning table (generate --tuning) set to int8 stays int8; one set to int16 goes
    # first (still within the budget under balanced); the others follow the rule.
    convs = [op for op in g.ops if op.kernel == "conv2d_s8" and g.tensors[op.inputs[1]].dtype == "int8"
             and op.tune_variant != "int8"]
    if mode == "ram" or not convs:
        return
    budget = DEFAULT_WEIGHTS_BUDGET if weights_budget is None else weights_budget
    total = _weights_bytes(g)
    convs.sort(key=lambda op: (op.tune_variant != "int16",
                               -int(op.attrs["batches"]) * int(op.attrs["out_h"]) * int(op.attrs["out_w"])))
    for op in convs:
        extra = int(g.tensors[op.inputs[1]].data.nbytes)  # type: ignore[union-attr]
        if mode == "time" or total + extra <= budget:
            _to_w16(g, op)
            total += extra


def conv_layout_choices(g: Graph) -> list[dict[str, object]]:
    """Per conv2d_s8 layer: the weight layout stored with the model and its bytes, and what the
    inner loop reads (for analyze). A layer staged in RAM (passes/staging.py) keeps int8 where
    the weights are stored and its inner loop reads a staged copy, int16 when `w16`."""
    rows = []
    for op in g.ops:
        if op.kernel == "conv2d_s8":
            w16 = g.tensors[op.inputs[1]].dtype == "int16"
            nbytes = int(g.tensors[op.inputs[1]].data.nbytes)  # type: ignore[union-attr]
            staged = int(op.attrs.get("stage_oc", 0)) > 0
            loop = "int16" if int(op.attrs.get("w16", 0)) else "int8"
            rows.append({"op": op.index, "layout": "int16" if w16 else "int8",
                         "weights_bytes": nbytes, "int8_bytes": nbytes // 2 if w16 else nbytes,
                         "staged": staged, "inner_loop": loop})
    return rows
