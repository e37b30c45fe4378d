/* Per-row steps shared by SOFTMAX (ai_softmax.c) and LOG_SOFTMAX (ai_log_softmax.c): the
 * row maximum and TFLite's sum of exponentials of the differences from it.
 * Internal to the runtime (not a kernel header); `static inline`, no link-time symbol. */
#ifndef AI_SOFTMAX_ROWS_H
#define AI_SOFTMAX_ROWS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "ai_fixedpoint.h"
#include "ai_qmath.h"

static inline int32_t ai_row_max_s8(const int8_t *x, int32_t n) {
  int32_t max_in_row = -128;
  for (int32_t c = 0; c < n; c++) {
    max_in_row = x[c] > max_in_row ? x[c] : max_in_row;
  }
  return max_in_row;
}

/* std::max over the row, from std::numeric_limits<float>::lowest(). */
static inline float ai_row_max_f32(const float *x, int32_t n) {
  float max = -3.40282347e+38f;
  for (int32_t c = 0; c < n; c++) {
    max = max < x[c] ? x[c] : max;
  }
  return max;
}

/* sum of expf((x - max) * beta) over the row in index order (TFLite's float loops; beta 1
 * gives exactly expf(x - max)), each term also stored to `e` unless it is NULL. */
static inline float ai_row_sum_exp_f32(const float *x, int32_t n, float max, float beta, float *e) {
  float sum = 0.0f;
  for (int32_t c = 0; c < n; c++) {
    const float v = expf((x[c] - max) * beta);
    if (e != NULL) {
      e[c] = v;
    }
    sum += v;
  }
  return sum;
}

/* Sum over the inputs with diff = x - max >= diff_min of round(exp(d) / 2^12), Q12.19:
 * d = diff * 2^input_left_shift * input_multiplier (rounding doubling high mul), a Q5.26
 * value in [-32, 0], exp = gemmlowp's exp_on_negative_values, Q0.31. The sum wraps as the
 * C++ reference's does (only from 4096 maximal terms on). The three parameters come by
 * address: the loads then stay where the kernels' own loops had them, so the int8 SOFTMAX
 * (MLPerf models) compiles to the same instructions as before the helper existed. */
static inline int32_t ai_row_sum_of_exps_q12(const int8_t *x, int32_t n, int32_t max_in_row,
                                             const int32_t *diff_min,
                                             const int32_t *input_multiplier,
                                             const int32_t *input_left_shift) {
  int32_t sum_of_exps = 0;
  for (int32_t c = 0; c < n; c++) {
    const int32_t diff = (int32_t)x[c] - max_in_row;
    if (diff >= *diff_min) {
      const int32_t scaled = ai_requant(diff, *input_multiplier, *input_left_shift);
      sum_of_exps = ai_fp_add(sum_of_exps, ai_rdbypot(ai_fp_exp_on_negative_values_q5(scaled), 12));
    }
  }
  return sum_of_exps;
}

#endif /* AI_SOFTMAX_ROWS_H */
