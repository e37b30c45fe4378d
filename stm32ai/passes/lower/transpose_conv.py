"""TRANSPOSE_CONV -> transpose_conv_{s8,s16,f32} (docs/kernels_reduce.md).

TFLite's operands are (output_shape, filter OHWI, input, [bias]). The output shape is the
output tensor's static shape, as in TFLite Micro, which ignores operand 0: a constant
output_shape must agree with it, and one fed as a graph input (seanet_transpose_conv0) is
accepted and not read. Padding is TFLite's: ComputePaddingHeightWidth applied to the
*output* size (the forward convolution this op transposes).

* int8: acc = bias[oc] + sum (x - in_zp) * w, requantised per channel with TFLite's
  PopulateConvolutionQuantizationParams multipliers (double rounding), + out_zp, clamped to
  the fused activation's range. The input zero point goes into a per-(oc, ky, kx) table
  -in_zp * sum_ic w that the kernel adds for each in-range tap, so its inner loop is a
  plain int8 dot product (SMLAD on Cortex-M4).
* int16x8 (int16 activations with zero point 0, int8 filter, int64 / int16 bias): int64
  accumulator and TFLite's 64-bit MultiplyByQuantizedMultiplier, whose 16-bit reduced
  multiplier and total shift are computed here; the filter is re-packed per group of 4
  input channels for SMLAD (`pack_weights_s16`).
* float32: TFLite's summation order (see ai_transpose_conv.c), then bias, then clamp.
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import check_activation, check_filter_quant
from stm32ai.passes.lower.common import fused_activation as _act
from stm32ai.passes.lower.common import per_tensor_quant as _per_tensor
from stm32ai.passes.lower.common import zp_of as _zp
from stm32ai.passes.quant import (
    activation_range_f32,
    activation_range_quantized,
    per_channel_multiplier,
    quantize_multiplier,
)

__all__ = ["pack_weights_s16", "reduced_multiplier", "tconv_padding"]



def tconv_padding(padding: str, out_size: int, k: int, stride: int) -> int:
    """Top/left padding: TFLite's ComputePaddingHeightWidth on the output size."""
    num = out_size + stride - 1 if padding == "SAME" else out_size + stride - k
    fwd = int(num / stride)  # C division (truncates toward zero)
    return max((fwd - 1) * stride + k - out_size, 0) // 2


def reduced_multiplier(m: int, shift: int) -> tuple[int, int]:
    """TFLite's MultiplyByQuantizedMultiplier(int64_t x, m, shift) =
    (x * rm + 2^(ts-1)) >> ts: returns (rm, ts)."""
    rm = (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF
    return int(rm), int(15 - shift)


def pack_weights_s16(w: np.ndarray) -> np.ndarray:
    """OHWI int8 weights for transpose_conv_s16: along the input channels, each full group
    of 4 becomes (w0, w2, w1, w3) (SXTB16 then gives the pairs (w0, w1), (w2, w3)); the
    last in_c % 4 stay in order."""
    w = np.array(w, np.int8)
    ic4 = w.shape[-1] // 4 * 4
    groups = w[..., :ic4].reshape(*w.shape[:-1], ic4 // 4, 4)
    w[..., :ic4] = groups[..., [0, 2, 1, 3]].reshape(*w.shape[:-1], ic4)
    return w


def _bias(op: Op, g: Graph) -> Tensor | None:
    return g.tensors[op.inputs[3]] if len(op.inputs) > 3 and op.inputs[3] >= 0 else None


def check_transpose_conv(op: Op, g: Graph) -> str | None:
    if len(op.inputs) < 3 or min(op.inputs[:3]) < 0 or len(op.outputs) != 1:
        return "expects output_shape, filter, input, an optional bias and one output"
    shp, w, x = (g.tensors[i] for i in op.inputs[:3])
    y = g.tensors[op.outputs[0]]
    bias = _bias(op, g)
    if shp.is_const:
        assert shp.data is not None
        if [int(v) for v in np.asarray(shp.data).reshape(-1)] != list(y.shape):
            return (f"output_shape {np.asarray(shp.data).reshape(-1).tolist()} differs from output "
                    f"'{y.name}' {list(y.shape)} — the model is inconsistent")
    elif shp.id not in g.inputs:
        return (f"output_shape '{shp.name}' is computed at run time; only a constant output shape "
                "(or one fed as a graph input, which is not read) is supported")
    for t, what in ((x, "input"), (w, "filter"), (y, "output")):
        if len(t.shape) != 4:
            return f"{what} '{t.name}' has shape {list(t.shape)}; a 4-D NHWC tensor is expected"
    if not w.is_const:
        return f"filter '{w.name}' is computed at run time; only constant filters are supported"
    if bias is not None and not bias.is_const:
        return f"bias '{bias.name}' is computed at run time; only a constant bias is supported"
    n, ih, iw, ic = x.shape
    oc, kh, kw, wic = w.shape
    yn, oh, ow, yc = y.shape
    if wic != ic or yc != oc or yn != n:
        return (f"filter {list(w.shape)} does not fit input {list(x.shape)} and output "
                f"{list(y.shape)} — the model is inconsistent")
    if min(n, ih, iw, ic, oh, ow, oc, kh, kw) <= 0:
        return "empty tensor"
    if bias is not None and bias.size != oc:
        return f"bias '{bias.name}' has {bias.size} values for {oc} output channels"
    padding = op.options.get("padding", "SAME")
    if padding not in ("SAME", "VALID"):
        return f"padding {padding} is not supported (SAME or VALID)"
    if min(int(op.options.get("stride_h", 1)), int(op.options.get("stride_w", 1))) < 1:
        return "strides must be >= 1"
    r = check_activation(op)
    if r:
        return r
    if x.dtype == "float32":
        if w.dtype != "float32":
            return (f"hybrid (dynamic-range) model: float input with {w.dtype} filter '{w.name}' "
                    "is not supported — convert with full-integer quantisation or keep float weights")
        if y.dtype != "float32" or (bias is not None and bias.dtype != "float32"):
            return "float transpose convolution needs float32 output and bias"
        return None
    if x.dtype not in ("int8", "int16"):
        return f"input type {x.dtype} is not supported (int8, int16 or float32)"
    if w.dtype != "int8":
        return f"filter '{w.name}' is {w.dtype}; an int8 filter is expected"
    if y.dtype != x.dtype:
        return f"{x.dtype} input with {y.dtype} output is not supported"
    for t, what in ((x, "input"), (y, "output")):
        r = _per_tensor(t, what)
        if r:
            return r
    r = check_filter_quant(w, f"filter '{w.name}'", oc, None)
    if r:
        return r
    if x.dtype == "int8":
        if bias is not None and bias.dtype != "int32":
            return f"bias '{bias.name}' is {bias.dtype}; int8 transpose convolution needs an int32 bias"
        return None
    if _zp(x) != 0 or _zp(y) != 0:
        return "int16 activations need zero points 0 (TFLite's 16x8 quantisation)"
    if bias is not None and bias.dtype not in ("int64", "int16"):
        return (f"bias '{bias.name}' is {bias.dtype}; 16x8 transpose convolution takes an int64 "
                "(or int16) bias, as TFLite Micro reads it")
    return None


@register("TRANSPOSE_CONV",
          "int8 (per-tensor or per-channel filter, int32 bias), int16x8 (int64 bias) or float32; "
          "SAME/VALID, any strides and kernel size; fused NONE/RELU/RELU6/RELU_N1_TO_1; "
          "constant output_shape (or a graph input, not read)",
          check_transpose_conv)
def lower_transpose_conv(op: Op, g: Graph) -> None:
    w, x = g.tensors[op.inputs[1]], g.tensors[op.inputs[2]]
    y = g.tensors[op.outputs[0]]
    bias = _bias(op, g)
    n, ih, iw, ic = x.shape
    oc, kh, kw, _ = w.shape
    _, oh, ow, _ = y.shape
    padding = str(op.options.get("padding", "SAME"))
    sh, sw = int(op.options.get("stride_h", 1)), int(op.options.get("stride_w", 1))
    attrs: dict[str, object] = {
        "batches": n, "in_h": ih, "in_w": iw, "in_c": ic, "out_h": oh, "out_w": ow, "out_c": oc,
        "k_h": kh, "k_w": kw, "stride": [sh, sw],
        "pad": [tconv_padding(padding, oh, kh, sh), tconv_padding(padding, ow, kw, sw)],
    }
    op.macc = n * ih * iw * ic * kh * kw * oc
    base = y.name
    b_id = bias.id if bias is not None else -1
    if x.dtype == "float32":
        lo, hi = activation_range_f32(_act(op))
        op.kernel = "transpose_conv_f32"
        op.inputs = [x.id, w.id, b_id]
        op.attrs = {**attrs, "act_min": float(lo), "act_max": float(hi)}
        return
    assert x.quant is not None and y.quant is not None and w.quant is not None
    scales = np.asarray(w.quant.scale, np.float32).reshape(-1)
    if scales.size == 1:
        scales = np.repeat(scales, oc)
    pairs = [quantize_multiplier(per_channel_multiplier(float(x.quant.scale[0]), float(s),
                                                        float(y.quant.scale[0]))) for s in scales]
    lo, hi = activation_range_quantized(_act(op), float(y.quant.scale[0]), _zp(y), x.dtype)
    if x.dtype == "int8":
        mult = g.add_const(f"{base}/out_multiplier", np.array([p[0] for p in pairs], np.int32))
        shift = g.add_const(f"{base}/out_shift", np.array([p[1] for p in pairs], np.int32))
        assert w.data is not None
        taps = np.int64(-_zp(x)) * np.asarray(w.data, np.int64).sum(axis=3)  # [oc, kh, kw]
        taps = ((taps + (1 << 31)) % (1 << 32)) - (1 << 31)  # int32 wrap, like the accumulator
        tap_off = g.add_const(f"{base}/tap_offset", taps.astype(np.int32))
        op.kernel = "transpose_conv_s8"
        op.inputs = [x.id, w.id, tap_off, b_id, mult, shift]
        op.attrs = {**attrs, "out_offset": _zp(y), "act_min": int(lo), "act_max": int(hi)}
        return
    reduced = [reduced_multiplier(m, s) for m, s in pairs]
    rm = g.add_const(f"{base}/out_rmult", np.array([r[0] for r in reduced], np.int32))
    rs = g.add_const(f"{base}/out_rshift", np.array([r[1] for r in reduced], np.int32))
    if bias is not None and bias.dtype != "int64":
        assert bias.data is not None
        b_id = g.add_const(f"{base}/bias_i64", np.asarray(bias.data, np.int64).reshape(-1))
    assert w.data is not None
    w_packed = g.add_const(f"{base}/weights_packed", pack_weights_s16(w.data))
    op.kernel = "transpose_conv_s16"
    op.inputs = [x.id, w_packed, b_id, rm, rs]
    op.attrs = {**attrs, "act_min": int(lo), "act_max": int(hi)}
