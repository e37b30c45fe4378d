/* SOFTMAX over the last axis, int8 -> int8, int8 -> int16 and float32. See docs/kernels_softmax.md.
 *
 * int8 is TFLite Micro's reference softmax, bit for bit. Per row:
 *   max = row maximum; for each input with diff = x - max >= diff_min:
 *     d   = diff * 2^input_left_shift * input_multiplier   (rounding doubling high mul),
 *           a Q5.26 value in [-32, 0]
 *     e   = exp(d), gemmlowp's exp_on_negative_values, Q0.31
 *     sum += e / 2^12 (rounded)                       (Q12.19 accumulator)
 *   inv = 1 / sum: sum normalised to [1, 2) by its leading zeros, then gemmlowp's
 *         one_over_one_plus_x_for_x_in_0_1 (Newton-Raphson, 3 steps), Q0.31
 *   y   = clamp(round((inv * e) / 2^(bits_over_unit + 23)) - 128, -128, 127)
 * Inputs below diff_min give -128. int8 -> int16 (ai_softmax_s8_s16, TFLM's
 * Softmax<int8_t, int16_t>): the same with 2^(bits_over_unit + 15) and -32768. Integer arithmetic only; output may alias the input
 * (every element is read before it is written, and rows are independent). The fixed-point
 * helpers (exp, 1/(1+x), clz) live in ai_fixedpoint.h, the row maximum and the sum of
 * exponentials in ai_softmax_rows.h, all shared with LOG_SOFTMAX.
 */
#include <math.h>

#include "ai_kernels_softmax.h"
#include "ai_softmax_rows.h"

/* One row of TFLM's quantised Softmax<int8_t, OutputT>: out_bits 8 (int8) or 16 (int16); the
 * quotient is rounded by 2^(bits_over_unit + 31 - out_bits) and offset by OutputT's minimum. */
static void softmax_row_s8(const ai_softmax_s8_params *p, const int8_t *x, int32_t out_bits,
                           int8_t *y8, int16_t *y16) {
  const int32_t depth = p->depth;
  const int32_t lo = out_bits == 16 ? -32768 : -128;
  const int32_t hi = out_bits == 16 ? 32767 : 127;
  const int32_t max_in_row = ai_row_max_s8(x, depth);
  const int32_t sum_of_exps = ai_row_sum_of_exps_q12(x, depth, max_in_row, &p->diff_min,
                                                     &p->input_multiplier, &p->input_left_shift);

  /* GetReciprocal(sum, 12 integer bits) */
  const int32_t headroom_plus_one = ai_fp_clz((uint32_t)sum_of_exps);
  const int32_t num_bits_over_unit = 12 - headroom_plus_one;
  const int32_t shifted_sum_minus_one =
      (int32_t)(((uint32_t)sum_of_exps << headroom_plus_one) - (1u << 31));
  const int32_t shifted_scale = ai_fp_one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one);
  const int32_t exponent = num_bits_over_unit + 31 - out_bits;

  for (int32_t c = 0; c < depth; c++) {
    const int32_t diff = (int32_t)x[c] - max_in_row;
    int32_t v = lo;
    if (diff >= p->diff_min) {
      const int32_t scaled = ai_requant(diff, p->input_multiplier, p->input_left_shift);
      const int32_t e = ai_fp_exp_on_negative_values_q5(scaled);
      /* exponent > 31 happens only once the sum of exps reaches 2^(out_bits + 1) (TFLM aborts);
       * the exact rounded quotient of an int32 by 2^32 or more is 0 */
      const int32_t unsat = exponent > 31 ? 0 : ai_rdbypot(ai_srdhm(shifted_scale, e), exponent);
      v = unsat + lo;
      v = v > hi ? hi : v;
      v = v < lo ? lo : v;
    }
    if (y16 != NULL) {
      y16[c] = (int16_t)v;
    } else {
      y8[c] = (int8_t)v;
    }
  }
}

void ai_softmax_s8(const ai_softmax_s8_params *p, const int8_t *input, int8_t *output) {
  for (int32_t i = 0; i < p->outer; i++) {
    const size_t row = (size_t)i * (size_t)p->depth;
    softmax_row_s8(p, input + row, 8, output + row, NULL);
  }
}

void ai_softmax_s8_s16(const ai_softmax_s8_s16_params *p, const int8_t *input, int16_t *output) {
  for (int32_t i = 0; i < p->outer; i++) {
    const size_t row = (size_t)i * (size_t)p->depth;
    softmax_row_s8(p, input + row, 16, NULL, output + row);
  }
}

void ai_softmax_f32(const ai_softmax_f32_params *p, const float *input, float *output) {
  const int32_t depth = p->depth;
  const float beta = p->beta;
  for (int32_t i = 0; i < p->outer; i++) {
    const float *x = input + (size_t)i * (size_t)depth;
    float *y = output + (size_t)i * (size_t)depth;
    const float sum = ai_row_sum_exp_f32(x, depth, ai_row_max_f32(x, depth), beta, y);
    for (int32_t c = 0; c < depth; c++) {
      y[c] = y[c] / sum;
    }
  }
}
