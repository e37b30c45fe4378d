/* BATCH_MATMUL / run-time-weights FULLY_CONNECTED kernels (ai_kernels_matmul.h). */
#include "ai_kernels_matmul.h"

#include <stddef.h>

#include "ai_qmath.h"
#include "ai_qmath64.h"

/* Walks the batch dimensions and the [rows, cols] output of one product; BODY computes
 * out[o] from the row pointer `l_` (lhs[b, i, 0]) and the column pointer `r_` (rhs[b, 0, j]). */
#define MATMUL_WALK(P, ...)                                                     \
  do {                                                                                          \
    int32_t o = 0;                                                                              \
    for (int32_t b0 = 0; b0 < (P)->batch[0]; b0++)                                              \
      for (int32_t b1 = 0; b1 < (P)->batch[1]; b1++)                                            \
        for (int32_t b2 = 0; b2 < (P)->batch[2]; b2++) {                                        \
          const int32_t lb = b0 * (P)->lhs_bstride[0] + b1 * (P)->lhs_bstride[1] +              \
                             b2 * (P)->lhs_bstride[2];                                          \
          const int32_t rb = b0 * (P)->rhs_bstride[0] + b1 * (P)->rhs_bstride[1] +              \
                             b2 * (P)->rhs_bstride[2];                                          \
          for (int32_t i = 0; i < (P)->rows; i++)                                               \
            for (int32_t j = 0; j < (P)->cols; j++, o++) {                                      \
              const int32_t l_ = lb + i * (P)->lhs_row_stride;                                  \
              const int32_t r_ = rb + j * (P)->rhs_col_stride;                                  \
              __VA_ARGS__                                                                         \
            }                                                                                   \
        }                                                                                       \
  } while (0)

void ai_batch_matmul_s8(const ai_batch_matmul_s8_params *p, const int8_t *lhs, const int8_t *rhs,
                        const int32_t *bias, int8_t *output) {
  const int32_t ls = p->lhs_depth_stride, rs = p->rhs_depth_stride;
  MATMUL_WALK(p, {
    const int8_t *a = lhs + l_;
    const int8_t *w = rhs + r_;
    int32_t acc = 0;
    for (int32_t k = 0; k < p->depth; k++) {
      acc = ai_wmla(acc, (int32_t)a[k * ls] + p->lhs_offset, (int32_t)w[k * rs] + p->rhs_offset);
    }
    if (bias != NULL) {
      acc = ai_wadd(acc, bias[j]);
    }
    const int32_t v = ai_wadd(ai_requant(acc, p->out_multiplier, p->out_shift), p->out_zero_point);
    output[o] = (int8_t)AI_CLAMP(v, p->act_min, p->act_max);
  });
}

void ai_batch_matmul_s16(const ai_batch_matmul_s16_params *p, const int16_t *lhs, const int16_t *rhs,
                         int16_t *output) {
  const int32_t ls = p->lhs_depth_stride, rs = p->rhs_depth_stride;
  MATMUL_WALK(p, {
    const int16_t *a = lhs + l_;
    const int16_t *w = rhs + r_;
    int64_t acc = 0;
    for (int32_t k = 0; k < p->depth; k++) {
      acc += (int64_t)((int32_t)a[k * ls] * (int32_t)w[k * rs]);
    }
    output[o] = ai_clamp_s16(ai_requant64(acc, p->rq_mult, p->rq_rsh), p->act_min, p->act_max);
  });
}

void ai_batch_matmul_f32(const ai_batch_matmul_f32_params *p, const float *lhs, const float *rhs,
                         const float *bias, float *output) {
  const int32_t ls = p->lhs_depth_stride, rs = p->rhs_depth_stride;
  MATMUL_WALK(p, {
    const float *a = lhs + l_;
    const float *w = rhs + r_;
    float acc = 0.0f;
    for (int32_t k = 0; k < p->depth; k++) {
      acc += a[k * ls] * w[k * rs];
    }
    if (bias != NULL) {
      acc += bias[j];
    }
    /* NaN passes through, as TFLite's unclamped BATCH_MATMUL (act_min/max = -inf/+inf) */
    output[o] = acc < p->act_min ? p->act_min : (acc > p->act_max ? p->act_max : acc);
  });
}
