/* LOG_SOFTMAX over the last axis, int8 -> int8 and float32. See docs/kernels_log_softmax.md.
 *
 * int8 is TFLite Micro's reference LogSoftmax, bit for bit (output scale 16/256, zero
 * point 127). Per row:
 *   max = row maximum
 *   sum = sum over diff = x - max >= diff_min of round(exp(d) / 2^12),  (Q12.19)
 *         d = diff rescaled to Q5.26 by (input_multiplier, input_left_shift),
 *         exp = gemmlowp's exp_on_negative_values (ai_fixedpoint.h)
 *   L   = log(sum) in Q5.26 (TFLite's log_x_for_x_greater_than_or_equal_to_1, below)
 *   cut = max(diff_min - 1, (L - 2^31) mapped back to input units by
 *         (reverse_multiplier, reverse_shift))
 *   y   = diff > cut ? clamp(round((d - L) / 2^22) + 127, -128, 127) : -128
 * Integer arithmetic only. Every element is read before it is written and rows are
 * independent, so the output may alias the input.
 *
 * float32: TFLite's reference loop, y = (x - max) - logf(sum(expf(x - max))).
 */
#include <math.h>
#include <stddef.h>

#include "ai_kernels_log_softmax.h"
#include "ai_softmax_rows.h"

#define LSM_ACCUM_BITS 12 /* integer bits of the sum of exponentials */
#define LSM_INPUT_BITS 5  /* integer bits of the rescaled differences and of the log */
#define LSM_OUTPUT_BITS 4 /* the output covers [-16, 0) */
#define LSM_LOG_ACC_BITS (LSM_INPUT_BITS + 1) /* the log accumulates with one bit of headroom */

/* log(x) for x >= 1: x in Q12.19, result in Q5.26.
 *
 * x = 2^k * m with m normalised two ways (m in [1/2, 1) and m * sqrt(1/2)); the choice with
 * the smaller mantissa r (in [sqrt(1/2), 1)) gives log(x) = k' * log(2) + log(r / 2^(1/4)),
 * the exponent part k' carrying a +-1/4 adjustment. log of the mantissa is a rational
 * approximation num / (1 + denom_minus_one) in q = 2 (r - 2^(-1/4)), with the constants
 * of TFLite's common.h (log_x_for_x_greater_than_or_equal_to_1_impl). Sum in Q6.25, then
 * a saturating x2 into Q5.26. */
static int32_t log_q12_to_q5(int32_t x) {
  const int32_t log_2 = 1488522236;             /* log(2), Q0.31 */
  const int32_t sqrt_sqrt_half = 1805811301;    /* 2^(-1/4) */
  const int32_t sqrt_half = 1518500250;         /* 2^(-1/2) */
  const int32_t alpha_n = 117049297;            /* 11/240 * 2^(1/4) */
  const int32_t alpha_d = 127690142;            /* 1/20 * 2^(1/4) */
  const int32_t alpha_i = 1057819769;           /* 2 * 2^(-1/4) - 2^(1/4) */
  const int32_t alpha_f = 638450708;            /* 1/4 * 2^(1/4) */
  const int32_t quarter_acc = 1 << 23;          /* 1/4 in Q6.25 (1/4 in Q0.31 rounded by 2^-6) */
  const int32_t exp_shift = 31 - LSM_LOG_ACC_BITS; /* an integer as a Q6.25 raw value */

  /* x > 0 always (the row maximum contributes 1.0); clamping the shifts keeps a wrapped
   * (>= 4096-wide, see docs) accumulator defined behaviour */
  const int32_t za_headroom_plus_1 = ai_fp_clz((uint32_t)x);
  const int32_t r_a_tmp = ai_fp_sat_shl(x, AI_MAX(za_headroom_plus_1 - 1, 0));
  const int32_t r_a = ai_fp_sat_shl(ai_srdhm(r_a_tmp, sqrt_half), 1);
  const int32_t za_pow2_adj =
      ai_fp_sat_add(ai_fp_sat_shl(LSM_ACCUM_BITS - za_headroom_plus_1, exp_shift), quarter_acc);

  const int32_t z_b = ai_srdhm(x, sqrt_half);
  const int32_t zb_headroom = AI_MAX(ai_fp_clz((uint32_t)z_b) - 1, 0);
  const int32_t r_b = ai_fp_sat_shl(x, zb_headroom);
  const int32_t zb_pow2_adj =
      ai_fp_sat_sub(ai_fp_sat_shl(LSM_ACCUM_BITS - zb_headroom, exp_shift), quarter_acc);

  const int32_t r = AI_MIN(r_a, r_b);                     /* Q0.31 mantissa */
  const int32_t pow2_adj = AI_MAX(za_pow2_adj, zb_pow2_adj); /* Q6.25 exponent */

  const int32_t p = ai_fp_rounding_half_sum(r, sqrt_sqrt_half);
  int32_t q = ai_fp_sub(r, sqrt_sqrt_half);
  q = ai_fp_add(q, q);
  const int32_t q_sq = ai_srdhm(q, q);
  const int32_t num = ai_fp_add(ai_srdhm(q, r), ai_srdhm(ai_srdhm(q, q_sq), alpha_n));
  const int32_t denom_minus_one =
      ai_fp_add(ai_srdhm(p, ai_fp_add(ai_fp_add(alpha_i, q), ai_srdhm(alpha_d, q_sq))), ai_srdhm(alpha_f, q));
  const int32_t recip_denom = ai_fp_one_over_one_plus_x_for_x_in_0_1(denom_minus_one);

  const int32_t num_acc = ai_rdbypot(num, LSM_LOG_ACC_BITS); /* Q0.31 -> Q6.25 */
  const int32_t log_acc = ai_fp_add(ai_srdhm(pow2_adj, log_2), ai_srdhm(num_acc, recip_denom));
  return ai_fp_sat_shl(log_acc, LSM_LOG_ACC_BITS - LSM_INPUT_BITS); /* Q6.25 -> Q5.26 */
}

void ai_log_softmax_s8(const ai_log_softmax_s8_params *p, const int8_t *input, int8_t *output) {
  const int32_t depth = p->depth;
  const int32_t out_shift = 31 - LSM_INPUT_BITS - LSM_OUTPUT_BITS; /* Q5.26 -> steps of 1/16 */
  for (int32_t i = 0; i < p->outer; i++) {
    const int8_t *x = input + (size_t)i * (size_t)depth;
    int8_t *y = output + (size_t)i * (size_t)depth;
    const int32_t max_in_row = ai_row_max_s8(x, depth);
    const int32_t sum_of_exps = ai_row_sum_of_exps_q12(x, depth, max_in_row, &p->diff_min,
                                                       &p->input_multiplier, &p->input_left_shift);

    const int32_t log_sum = log_q12_to_q5(sum_of_exps); /* Q5.26, >= 0 */
    /* differences whose Q5.26 value minus log_sum would fall below the Q5.26 range */
    const int32_t cut = AI_MAX(p->diff_min - 1, ai_requant(ai_fp_add(log_sum, INT32_MIN),
                                                            p->reverse_multiplier, p->reverse_shift));

    for (int32_t c = 0; c < depth; c++) {
      const int32_t diff = (int32_t)x[c] - max_in_row;
      int32_t v = -128;
      if (diff > cut) {
        const int32_t scaled = ai_requant(diff, p->input_multiplier, p->input_left_shift);
        v = ai_rdbypot(ai_fp_sub(scaled, log_sum), out_shift) + 127;
        v = AI_CLAMP(v, -128, 127);
      }
      y[c] = (int8_t)v;
    }
  }
}

void ai_log_softmax_f32(const ai_log_softmax_f32_params *p, const float *input, float *output) {
  const int32_t depth = p->depth;
  for (int32_t i = 0; i < p->outer; i++) {
    const float *x = input + (size_t)i * (size_t)depth;
    float *y = output + (size_t)i * (size_t)depth;
    const float max = ai_row_max_f32(x, depth);
    const float log_sum = logf(ai_row_sum_exp_f32(x, depth, max, 1.0f, NULL));
    for (int32_t c = 0; c < depth; c++) {
      y[c] = x[c] - max - log_sum;
    }
  }
}
