"""SOFTMAX (last axis) -> ai_softmax_s8 / ai_softmax_s8_s16 / ai_softmax_f32.

int8 -> int8 reproduces TFLite Micro's reference softmax bit for bit: the output must be
quantised with scale 1/256 and zero point -128 (TFLM's requirement). Per row, input
differences to the row maximum at or above `diff_min` are rescaled by (input_multiplier,
input_left_shift) into Q5.26, exponentiated with gemmlowp's fixed-point
exp_on_negative_values, summed in Q12.19, inverted with one_over_one_plus_x_for_x_in_0_1
and each exp scaled by the inverse (details in docs/kernels_fc.md). The multiplier,
shift and diff_min come from TFLite's PreprocessSoftmaxScaling and CalculateInputRadius
(kScaledDiffIntegerBits = 5), computed here in double exactly as TFLM does.

int8 -> int16 (TFLM's Softmax<int8_t, int16_t>): the same row arithmetic, the quotient
rounded by 2^(bits_over_unit + 15) instead of 2^(bits_over_unit + 23), offset by -32768 and
clamped to int16; output scale 1/65536, zero point -32768 (TFLM's Prepare).

float32: max-subtracted expf, TFLite's loop order (max, exp and sum, divide).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import check_int8_io, per_tensor_io, scale_of, zp_of
from stm32ai.passes.quant import calculate_input_radius, quantize_multiplier

__all__ = ["softmax_params_s8", "SCALED_DIFF_INTEGER_BITS"]

SCALED_DIFF_INTEGER_BITS = 5
_INT32_MAX = (1 << 31) - 1


def softmax_params_s8(beta: float, input_scale: float) -> dict[str, int]:
    """input_multiplier, input_left_shift and diff_min as TFLite's CalculateSoftmaxParams."""
    beta_d = float(np.float32(beta))
    scale_d = float(np.float32(input_scale))
    real = min(beta_d * scale_d * float(1 << (31 - SCALED_DIFF_INTEGER_BITS)), float(_INT32_MAX))
    mult, shift = quantize_multiplier(real)
    radius = calculate_input_radius(SCALED_DIFF_INTEGER_BITS, shift)
    return {"input_multiplier": int(mult), "input_left_shift": int(shift), "diff_min": -int(radius)}


def check_rows(op: Op, g: Graph, what: str, scale: tuple[float, str], zp: int) -> str | None:
    """What SOFTMAX and LOG_SOFTMAX both need: one input and one output of the same shape,
    float32 -> float32, or int8 -> int8 with TFLite's fixed output quantisation (see
    `check_fixed_output`)."""
    if len(op.inputs) != 1 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return "expects one input and one output"
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if len(x.shape) < 1 or x.shape != y.shape:
        return f"input {list(x.shape)} and output {list(y.shape)} shapes differ"
    if x.dtype == "float32":
        return None if y.dtype == "float32" else f"float input with {y.dtype} output is not supported"
    return check_int8_io(x, y) or check_fixed_output(y, what, scale, zp)


def _s8_to_s16(op: Op, g: Graph) -> bool:
    """int8 input, int16 output: TFLite's int8 softmax with a 16-bit output (SVDF keyword models)."""
    return (len(op.inputs) == 1 and op.inputs[0] >= 0 and len(op.outputs) == 1
            and g.tensors[op.inputs[0]].dtype == "int8" and g.tensors[op.outputs[0]].dtype == "int16")


def check_s16_output(y: Tensor) -> str | None:
    """TFLite Micro's int8 -> int16 softmax output (softmax_common.cc): zero point -32768 and a
    scale within 0.001 / 65536 of 1 / 65536 (TF_LITE_ENSURE_NEAR)."""
    if zp_of(y) != -32768 or abs(float(np.float32(scale_of(y))) - 1.0 / 65536) > 0.001 / 65536:
        return (f"int8 -> int16 softmax output must have scale 1/65536 and zero point -32768 "
                f"(TFLite's requirement), got scale {scale_of(y)} and zero point {zp_of(y)}")
    return None


def _check_softmax(op: Op, g: Graph) -> str | None:
    if _s8_to_s16(op, g):
        x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
        reason = (None if len(x.shape) >= 1 and x.shape == y.shape
                  else f"input {list(x.shape)} and output {list(y.shape)} shapes differ")
        reason = reason or per_tensor_io(x, y) or check_s16_output(y)
    else:
        reason = check_rows(op, g, "softmax", (1.0 / 256, "1/256"), -128)
    if reason or g.tensors[op.inputs[0]].dtype == "float32":
        return reason
    x = g.tensors[op.inputs[0]]
    beta = float(op.options.get("beta", 1.0))
    if x.shape[-1] >= 4096:
        # the row's sum of exps is Q12.19 in int32: 4096 equal maxima overflow it (in TFLM too)
        return f"int8 softmax rows of {x.shape[-1]} elements overflow its Q12.19 sum (at most 4095)"
    real = beta * scale_of(x) * float(1 << (31 - SCALED_DIFF_INTEGER_BITS))
    if not real > 1.0:
        return f"beta * input scale = {beta * scale_of(x)} is too small for TFLite's int8 softmax"
    return None


def check_fixed_output(y: Tensor, what: str, scale: tuple[float, str], zp: int) -> str | None:
    """TFLite's int8 (log-)softmax output has one fixed quantisation: `scale` (value, as
    written in the message) and `zp`."""
    if zp_of(y) != zp or np.float32(scale_of(y)) != np.float32(scale[0]):
        return (f"int8 {what} output must have scale {scale[1]} and zero point {zp} (TFLite's "
                f"requirement), got scale {scale_of(y)} and zero point {zp_of(y)}")
    return None


@register("SOFTMAX", "int8 -> int8 (output scale 1/256, zero point -128) or float32; "
          "last axis; any beta; may run in place; int8 -> int16 (output scale 1/65536, zero "
          "point -32768)", _check_softmax)
def lower_softmax(op: Op, g: Graph) -> None:
    beta = float(op.options.get("beta", 1.0))
    wide = _s8_to_s16(op, g)
    lower_rows(op, g, "softmax", 4, {"beta": float(np.float32(beta))},
               lambda scale: softmax_params_s8(beta, scale))
    if wide:
        # same arithmetic, 16-bit output (TFLM's Softmax<int8_t, int16_t>); twice the input's
        # bytes, so never in place
        op.kernel = "softmax_s8_s16"
        op.inplace = False


def lower_rows(op: Op, g: Graph, name: str, macc_per_element: int, f32_attrs: dict[str, float],
               s8_params: Callable[[float], dict[str, int]]) -> None:
    """SOFTMAX / LOG_SOFTMAX over the last axis: kernel `{name}_f32` or `{name}_s8` on the
    input's rows, the int8 one with `s8_params(input scale)`."""
    x = g.tensors[op.inputs[0]]
    depth = int(x.shape[-1])
    outer = int(x.size // depth) if depth else 0
    op.macc = int(macc_per_element * x.size)
    # both kernels read a whole row (max, sum) before writing any of it, and write element
    # c right after its last read: the output may overwrite the input
    op.inplace = True
    if x.dtype == "float32":
        op.kernel = f"{name}_f32"
        op.attrs = {"outer": outer, "depth": depth, **f32_attrs}
        return
    op.kernel = f"{name}_s8"
    op.attrs = {"outer": outer, "depth": depth, **s8_params(scale_of(x))}
