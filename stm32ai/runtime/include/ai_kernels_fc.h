/* Basic kernels: fully connected, pooling, elementwise add, softmax, copy.
 *
 * Calling convention (see stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>);
 * Parameter fields are the lowering's attrs, all computed at generate time.
 * int8 kernels use integer arithmetic only (bit-exact with TFLite Micro's reference
 * kernels); float kernels follow TFLite's loop order. Details: docs/kernels_fc.md.
 */
#ifndef AI_KERNELS_FC_H
#define AI_KERNELS_FC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- FULLY_CONNECTED ------------------------------------------------------------------ */

/* `weights` are packed by stm32ai.passes.lower.fc.pack_fc_weights_s8 (the first
 * `pair_rows` rows two by two as int16 256*a + b, the rest one by one; 32-bit words over
 * groups of 4 columns, see ai_fc.c; out_features * ceil(in_features / 4) * 4 bytes) and
 * must be 4-byte aligned. `chunk_groups`: column groups between two exact
 * recoveries of a paired row (proved by the generator). `bias` holds the bias with the
 * input zero point folded in (NULL = zeros). `multipliers`/`shifts`: per-output
 * requantisation, or NULL to use out_multiplier/out_shift for every output;
 * `fast_requant` = 1 when every shift is <= -2 (rq_fast, exact). No scratch. */
typedef struct {
  int32_t batches, in_features, out_features;
  int32_t out_multiplier, out_shift, out_zero_point;
  int32_t act_min, act_max;
  int32_t pair_rows, chunk_groups, fast_requant;
} ai_fully_connected_s8_params;
void ai_fully_connected_s8(const ai_fully_connected_s8_params *p, const int8_t *input,
                           const int8_t *weights, const int32_t *bias, const int32_t *multipliers,
                           const int32_t *shifts, int8_t *output);

/* weights [out_features][in_features] as in TFLite; bias may be NULL. */
typedef struct {
  int32_t batches, in_features, out_features;
  float act_min, act_max;
} ai_fully_connected_f32_params;
void ai_fully_connected_f32(const ai_fully_connected_f32_params *p, const float *input,
                            const float *weights, const float *bias, float *output);

/* ---- AVERAGE_POOL_2D / MAX_POOL_2D (NHWC) -------------------------------------------- */

typedef struct {
  int32_t batches, in_h, in_w, channels, out_h, out_w;
  int32_t filter_h, filter_w, stride_h, stride_w, pad_h, pad_w;
  int32_t act_min, act_max;
} ai_pool_s8_params;
typedef struct {
  int32_t batches, in_h, in_w, channels, out_h, out_w;
  int32_t filter_h, filter_w, stride_h, stride_w, pad_h, pad_w;
  float act_min, act_max;
} ai_pool_f32_params;
typedef ai_pool_s8_params ai_avgpool_s8_params;
typedef ai_pool_s8_params ai_maxpool_s8_params;
typedef ai_pool_f32_params ai_avgpool_f32_params;
typedef ai_pool_f32_params ai_maxpool_f32_params;
void ai_avgpool_s8(const ai_avgpool_s8_params *p, const int8_t *input, int8_t *output);
void ai_maxpool_s8(const ai_maxpool_s8_params *p, const int8_t *input, int8_t *output);
void ai_avgpool_f32(const ai_avgpool_f32_params *p, const float *input, float *output);
void ai_maxpool_f32(const ai_maxpool_f32_params *p, const float *input, float *output);

/* ---- ADD ------------------------------------------------------------------------------- */

#define AI_BCAST_DIMS 6

/* Same-size inputs (output may alias input1 or input2). */
typedef struct {
  int32_t size;
  int32_t input1_offset, input2_offset, left_shift;
  int32_t input1_multiplier, input1_shift, input2_multiplier, input2_shift;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
} ai_add_s8_params;
void ai_add_s8(const ai_add_s8_params *p, const int8_t *input1, const int8_t *input2,
               int8_t *output);

/* Broadcasting: shapes left-padded to AI_BCAST_DIMS; strides in elements, 0 = broadcast. */
typedef struct {
  int32_t out_shape[AI_BCAST_DIMS], in1_strides[AI_BCAST_DIMS], in2_strides[AI_BCAST_DIMS];
  int32_t input1_offset, input2_offset, left_shift;
  int32_t input1_multiplier, input1_shift, input2_multiplier, input2_shift;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
} ai_add_bcast_s8_params;
void ai_add_bcast_s8(const ai_add_bcast_s8_params *p, const int8_t *input1,
                     const int8_t *input2, int8_t *output);

typedef struct {
  int32_t size;
  float act_min, act_max;
} ai_add_f32_params;
void ai_add_f32(const ai_add_f32_params *p, const float *input1, const float *input2,
                float *output);

typedef struct {
  int32_t out_shape[AI_BCAST_DIMS], in1_strides[AI_BCAST_DIMS], in2_strides[AI_BCAST_DIMS];
  float act_min, act_max;
} ai_add_bcast_f32_params;
void ai_add_bcast_f32(const ai_add_bcast_f32_params *p, const float *input1,
                      const float *input2, float *output);

/* ---- SOFTMAX (last axis; output may alias input) ---------------------------------------- */

typedef struct {
  int32_t outer, depth;
  int32_t input_multiplier, input_left_shift, diff_min;
} ai_softmax_s8_params;
void ai_softmax_s8(const ai_softmax_s8_params *p, const int8_t *input, int8_t *output);

typedef struct {
  int32_t outer, depth;
  float beta;
} ai_softmax_f32_params;
void ai_softmax_f32(const ai_softmax_f32_params *p, const float *input, float *output);

/* ---- copy (RESHAPE that cannot alias) ------------------------------------------------- */

typedef struct {
  int32_t size; /* bytes */
} ai_copy_params;
void ai_copy(const ai_copy_params *p, const void *input, void *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_FC_H */
