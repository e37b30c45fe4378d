"""LOG_SOFTMAX (last axis) -> ai_log_softmax_s8 / ai_log_softmax_f32.

int8 -> int8 reproduces TFLite Micro's reference LogSoftmax bit for bit. TFLM requires the
output to be quantised with scale 16/256 and zero point 127 (the output covers [-16, 0)).
Prepare, as TFLM's: beta is 1; PreprocessLogSoftmaxScalingExp gives the multiplier and left
shift that rescale an input difference to Q5.26 (the same as SOFTMAX's) plus a "reverse
scaling" multiplier and (non-positive) shift, the inverse of that rescaling, computed as
2^(31 - left_shift) / multiplier in double; diff_min = -CalculateInputRadius(5, left_shift).
The kernel (ai_log_softmax.c, docs/kernels_log_softmax.md) sums the exps in Q12.19, takes the
fixed-point log into Q5.26 and rescales each difference minus the log into steps of 1/16.

float32: TFLite's reference loop, (x - max) - log(sum(exp(x - max))).
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import scale_of
from stm32ai.passes.lower.softmax import (
    SCALED_DIFF_INTEGER_BITS,
    check_rows,
    lower_rows,
    softmax_params_s8,
)
from stm32ai.passes.quant import quantize_multiplier

__all__ = ["log_softmax_params_s8", "OUTPUT_SCALE", "OUTPUT_ZERO_POINT"]

OUTPUT_SCALE = 16.0 / 256
OUTPUT_ZERO_POINT = 127


def log_softmax_params_s8(input_scale: float) -> dict[str, int]:
    """input_multiplier, input_left_shift, reverse_multiplier, reverse_shift and diff_min as
    TFLM's LOG_SOFTMAX prepare (beta = 1, 5 integer bits for the scaled differences).

    reverse_shift is the exponent of the reverse multiplier (<= 0: a right shift), i.e. the
    shift the kernel passes to MultiplyByQuantizedMultiplier."""
    p = softmax_params_s8(1.0, input_scale)  # PreprocessSoftmaxScaling + CalculateInputRadius
    mult, left_shift = p["input_multiplier"], p["input_left_shift"]
    # (1 << (31 - left_shift)) is a C int: left_shift >= 1 here (the check asks real > 1)
    real_reverse = float(1 << (31 - left_shift)) / float(mult)
    assert 0.0 < real_reverse < 1.0, real_reverse
    rev_mult, rev_shift = quantize_multiplier(real_reverse)
    assert rev_shift <= 0, rev_shift
    return {"input_multiplier": mult, "input_left_shift": left_shift,
            "reverse_multiplier": int(rev_mult), "reverse_shift": int(rev_shift),
            "diff_min": p["diff_min"]}


def _check_log_softmax(op: Op, g: Graph) -> str | None:
    reason = check_rows(op, g, "log_softmax", (OUTPUT_SCALE, "16/256"), OUTPUT_ZERO_POINT)
    if reason or g.tensors[op.inputs[0]].dtype == "float32":
        return reason
    x = g.tensors[op.inputs[0]]
    real = float(np.float32(scale_of(x))) * float(1 << (31 - SCALED_DIFF_INTEGER_BITS))
    if not real > 1.0:
        return f"input scale {scale_of(x)} is too small for TFLite's int8 log_softmax"
    return None


@register("LOG_SOFTMAX", "int8 -> int8 (output scale 16/256, zero point 127) or float32; "
          "last axis; may run in place", _check_log_softmax)
def lower_log_softmax(op: Op, g: Graph) -> None:
    lower_rows(op, g, "log_softmax", 5, {}, log_softmax_params_s8)
