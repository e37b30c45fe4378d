"""Lowering of QUANTIZE and DEQUANTIZE (see docs/kernels_activations.md).

* QUANTIZE float32 -> int8: ``quantize_f32_s8``, TFLite's AffineQuantize
  (round(x / scale) + zero_point in float32, ties away from zero, saturated).
* QUANTIZE int8/uint8 -> int8/uint8 (requantisation, and the int8 <-> uint8 conversions the
  converter puts at uint8 model I/O): a 256-entry table of TFLite's Requantize evaluated here
  (``lut8``; ``clamp_s8`` when the table is the identity), bit-exact by construction.
* QUANTIZE int8 <-> int32 (TFLM accepts both): TFLite's Requantize, ``requantize_s8_s32`` /
  ``requantize_s32_s8`` (the int16 pairs are in s16.py, which shares ``lower_requantize_int``).
* DEQUANTIZE int8/uint8 -> float32: ``dequantize_s8_f32`` / ``dequantize_u8_f32``,
  scale * (q - zero_point) in float32 (exact product, one rounding: bit-exact).

Constant operands never get here: fold_constants evaluates DEQUANTIZE of weights.
"""

from __future__ import annotations

from stm32ai.ir import Graph, Op, Quant, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.activations import lower_as_table, mbqm
from stm32ai.passes.lower.common import check_per_tensor as _pt
from stm32ai.passes.quant import qrange, quantize_multiplier

_BYTE_TYPES = ("int8", "uint8")


def requantize_values(qi: Quant, qo: Quant, in_dtype: str, out_dtype: str) -> list[int]:
    """TFLite's Requantize for every input value: (q - zp_in) * (s_in / s_out) with the
    double-rounding multiplier, + zp_out, saturated to the output type. (Its int8 <-> uint8
    "xor 0x80" fast path gives the same values.)"""
    m, s = quantize_multiplier(float(qi.scale[0]) / float(qo.scale[0]))   # double / double
    zi, zo = int(qi.zero_point[0]), int(qo.zero_point[0])
    lo, hi = qrange(out_dtype)
    inputs = range(-128, 128) if in_dtype == "int8" else range(256)
    return [min(max(mbqm(v - zi, m, s) + zo, lo), hi) for v in inputs]


def _check_quantize(op: Op, g: Graph) -> str | None:
    if len(op.outputs) != 1 or not op.inputs or op.inputs[0] < 0:
        return "expects one input and one output"
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if src.size != dst.size:
        return f"input {list(src.shape)} and output {list(dst.shape)} differ in size"
    if src.dtype == "float32" and dst.dtype == "int8":
        return _pt(dst)
    if src.dtype in _BYTE_TYPES and dst.dtype in _BYTE_TYPES:
        return _pt(src) or _pt(dst)
    if (src.dtype, dst.dtype) in (("int8", "int32"), ("int32", "int8")):
        return _pt(src) or _pt(dst) or check_requantize_range(src, dst)
    return (f"{src.dtype} -> {dst.dtype} is not supported (float32 -> int8, between "
            "int8 and uint8, or between int8 and int32)")


INT_SUFFIX = {"int8": "s8", "int16": "s16", "int32": "s32"}


def check_requantize_range(src: Tensor, dst: Tensor) -> str | None:
    """An 8/16-bit input shifted left by the requantisation must fit int32 (TFLite computes
    it in int32; an overflow there is undefined). An int32 input has no bound to check: the
    kernel's sums wrap (ai_requant_wrap), the values TFLite's undefined overflow would give on
    the targets it runs on."""
    if src.dtype == "int32":
        return None
    _, s = quantize_multiplier(float(src.quant.scale[0]) / float(dst.quant.scale[0]))
    bound = 1 << (16 if src.dtype == "int16" else 8)
    if (bound << max(s, 0)) >= (1 << 31):
        return "the input/output scale ratio is too large: (q - zero point) shifted left overflows int32"
    return None


def lower_requantize_int(op: Op, g: Graph) -> None:
    """QUANTIZE between int8, int16 and int32 (not 8-bit -> 8-bit, a table): TFLite's
    Requantize, kernel requantize_<in>_<out>, the multiplier of the double scale ratio."""
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    assert src.quant is not None and dst.quant is not None
    m, s = quantize_multiplier(float(src.quant.scale[0]) / float(dst.quant.scale[0]))  # double / double
    lo, hi = qrange(dst.dtype)
    op.inputs = [op.inputs[0]]
    op.macc = src.size
    op.kernel = f"requantize_{INT_SUFFIX[src.dtype]}_{INT_SUFFIX[dst.dtype]}"
    op.attrs = {"size": src.size, "input_offset": -int(src.quant.zero_point[0]), "multiplier": m,
                "shift": s, "output_offset": int(dst.quant.zero_point[0]), "out_min": lo, "out_max": hi}
    op.inplace = src.dtype == dst.dtype


@register("QUANTIZE", "float32 -> int8; int8/uint8 -> int8/uint8 (per-tensor; in place); "
          "int8 <-> int32 (per-tensor)", _check_quantize)
def lower_quantize(op: Op, g: Graph) -> None:
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    assert dst.quant is not None
    if "int32" in (src.dtype, dst.dtype):
        lower_requantize_int(op, g)
        return
    if src.dtype == "float32":
        op.kernel = "quantize_f32_s8"
        op.attrs = {"size": src.size, "scale": float(dst.quant.scale[0]),
                    "zero_point": int(dst.quant.zero_point[0])}
        op.inputs = [op.inputs[0]]
        op.macc = src.size
        return
    assert src.quant is not None
    values = requantize_values(src.quant, dst.quant, src.dtype, dst.dtype)
    lower_as_table(op, g, values, src.dtype, dst.dtype, what="requantize")


def _check_dequantize(op: Op, g: Graph) -> str | None:
    if len(op.outputs) != 1 or not op.inputs or op.inputs[0] < 0:
        return "expects one input and one output"
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if src.dtype not in _BYTE_TYPES or dst.dtype != "float32":
        return f"{src.dtype} -> {dst.dtype} is not supported (int8 or uint8 -> float32)"
    if src.size != dst.size:
        return f"input {list(src.shape)} and output {list(dst.shape)} differ in size"
    return _pt(src)


@register("DEQUANTIZE", "int8/uint8 -> float32 (per-tensor)", _check_dequantize)
def lower_dequantize(op: Op, g: Graph) -> None:
    src = g.tensors[op.inputs[0]]
    assert src.quant is not None
    op.kernel = "dequantize_s8_f32" if src.dtype == "int8" else "dequantize_u8_f32"
    op.attrs = {"size": src.size, "scale": float(src.quant.scale[0]),
                "zero_point": int(src.quant.zero_point[0])}
    op.inputs = [op.inputs[0]]
    op.macc = src.size
