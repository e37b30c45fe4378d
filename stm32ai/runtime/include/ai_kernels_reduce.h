/* Reduction kernels (MEAN, SUM, REDUCE_MAX, REDUCE_MIN, ARG_MAX, ARG_MIN), int8 / float32.
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * Parameter fields are the lowering's attrs (stm32ai/passes/lower/reduce.py), all computed at generate time; see docs/kernels_reduce.md.
 * int8 kernels use integer arithmetic only, bit-exact with TFLite Micro's reference
 * kernels; float kernels add in TFLite's reference order.
 *
 * Alignment: int32/int64 tables (bias, multipliers) and scratch must be naturally aligned
 * (the weights pool and the activation pool guarantee 8 bytes); activations need only
 * their element alignment.
 */
#ifndef AI_KERNELS_REDUCE_H
#define AI_KERNELS_REDUCE_H

#include <stdint.h>

#include "ai_platform.h" /* AI_MAX_DIMS */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- MEAN / SUM / REDUCE_MAX / REDUCE_MIN ---------------------------------------------
 * The input, in memory order, is walked as `ndim` merged dimensions `shape` (outermost
 * first); `ostride[d]` is the output stride of dimension d, 0 when d is reduced. Output
 * element o accumulates every input whose walk position maps to o, in input order. */

#define AI_REDUCE_WALK_FIELDS                                                           \
  int32_t ndim;                                                                         \
  int32_t shape[AI_MAX_DIMS];                                                    \
  int32_t ostride[AI_MAX_DIMS];                                                  \
  int32_t out_size;

typedef struct {
  AI_REDUCE_WALK_FIELDS
} ai_reduce_walk_params;

/* float32: sum (from 0), max (from -FLT_MAX), min (from FLT_MAX); mean = sum / count. */
typedef ai_reduce_walk_params ai_reduce_sum_f32_params;
typedef ai_reduce_walk_params ai_reduce_max_f32_params;
typedef ai_reduce_walk_params ai_reduce_min_f32_params;
typedef struct {
  AI_REDUCE_WALK_FIELDS
  int32_t count; /* inputs per output */
} ai_reduce_mean_f32_params;

void ai_reduce_sum_f32(const ai_reduce_sum_f32_params *p, const float *input, float *output);
void ai_reduce_mean_f32(const ai_reduce_mean_f32_params *p, const float *input, float *output);
void ai_reduce_max_f32(const ai_reduce_max_f32_params *p, const float *input, float *output);
void ai_reduce_min_f32(const ai_reduce_min_f32_params *p, const float *input, float *output);

/* int8 max / min: input and output share their quantisation, raw values compare. */
typedef ai_reduce_walk_params ai_reduce_max_s8_params;
typedef ai_reduce_walk_params ai_reduce_min_s8_params;
void ai_reduce_max_s8(const ai_reduce_max_s8_params *p, const int8_t *input, int8_t *output);
void ai_reduce_min_s8(const ai_reduce_min_s8_params *p, const int8_t *input, int8_t *output);

/* int8 MEAN and SUM: s = sum of raw inputs (int32 scratch, out_size entries), then
 * out = clamp(requant(s + bias, multiplier, shift) + out_offset, act_min, act_max);
 * bias = -in_zp * count, and for MEAN the multiplier carries the 1/count. */
typedef struct {
  AI_REDUCE_WALK_FIELDS
  int32_t bias;
  int32_t multiplier, shift;
  int32_t out_offset;
  int32_t act_min, act_max;
} ai_reduce_sum_s8_params;
void ai_reduce_sum_s8(const ai_reduce_sum_s8_params *p, const int8_t *input, int8_t *output,
                      void *scratch);
int32_t ai_reduce_sum_s8_scratch_size(const ai_reduce_sum_s8_params *p);

/* ---- ARG_MAX / ARG_MIN ------------------------------------------------------------------
 * input viewed as [outer][axis_size][inner]; output [outer][inner] holds the first index of
 * the largest (smallest) value, int32_t, or int64_t when out_i64 is set. */
typedef struct {
  int32_t outer, axis_size, inner;
  int32_t out_i64;
} ai_arg_params;
typedef ai_arg_params ai_arg_max_f32_params;
typedef ai_arg_params ai_arg_min_f32_params;
typedef ai_arg_params ai_arg_max_s8_params;
typedef ai_arg_params ai_arg_min_s8_params;
void ai_arg_max_f32(const ai_arg_max_f32_params *p, const float *input, void *output);
void ai_arg_min_f32(const ai_arg_min_f32_params *p, const float *input, void *output);
void ai_arg_max_s8(const ai_arg_max_s8_params *p, const int8_t *input, void *output);
void ai_arg_min_s8(const ai_arg_min_s8_params *p, const int8_t *input, void *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_REDUCE_H */
