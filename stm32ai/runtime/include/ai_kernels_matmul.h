/* BATCH_MATMUL, and FULLY_CONNECTED with run-time weights: one strided matrix product.
 *
 * Calling convention (see stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>);
 *
 *   out[b, i, j] = sum_k lhs[b, i, k] * rhs[b, k, j]      out: [batch[0..2], rows, cols]
 *
 * lhs[b, i, k] is lhs_data[sum_d b_d * lhs_bstride[d] + i * lhs_row_stride + k * lhs_depth_stride],
 * rhs likewise: adj_x / adj_y (transposed operands) are strides, a broadcast batch dimension
 * has stride 0 (stm32ai/passes/lower/matmul.py). Arithmetic is TFLite Micro's (docs/kernels_matmul.md):
 *   s8:  int32 sum of (lhs + lhs_offset) * (rhs + rhs_offset), + bias[j] when `bias` is not NULL
 *        (FULLY_CONNECTED), requantised (double rounding), + out_zero_point, clamped to
 *        [act_min, act_max];
 *   s16: zero points 0, int64 sum, TFLite's 64-bit requantisation (ai_requant64), clamped;
 *   f32: float sum in k order, + bias[j], clamped to [act_min, act_max].
 */
#ifndef AI_KERNELS_MATMUL_H
#define AI_KERNELS_MATMUL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AI_MATMUL_LOOP_FIELDS                                                               \
  int32_t batch[3];                                                                         \
  int32_t lhs_bstride[3];                                                                   \
  int32_t rhs_bstride[3];                                                                   \
  int32_t rows, cols, depth;                                                                \
  int32_t lhs_row_stride, lhs_depth_stride, rhs_depth_stride, rhs_col_stride

typedef struct {
  AI_MATMUL_LOOP_FIELDS;
  int32_t lhs_offset, rhs_offset, out_zero_point, out_multiplier, out_shift;
  int32_t act_min, act_max;
} ai_batch_matmul_s8_params;

typedef struct {
  AI_MATMUL_LOOP_FIELDS;
  int32_t rq_mult, rq_rsh; /* reduced 16-bit multiplier, total right shift 1..62 */
  int32_t act_min, act_max;
} ai_batch_matmul_s16_params;

typedef struct {
  AI_MATMUL_LOOP_FIELDS;
  float act_min, act_max;
} ai_batch_matmul_f32_params;

void ai_batch_matmul_s8(const ai_batch_matmul_s8_params *p, const int8_t *lhs, const int8_t *rhs,
                        const int32_t *bias, int8_t *output);
void ai_batch_matmul_s16(const ai_batch_matmul_s16_params *p, const int16_t *lhs, const int16_t *rhs,
                         int16_t *output);
void ai_batch_matmul_f32(const ai_batch_matmul_f32_params *p, const float *lhs, const float *rhs,
                         const float *bias, float *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_MATMUL_H */
