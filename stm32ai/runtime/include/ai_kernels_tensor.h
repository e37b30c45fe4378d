/* Tensor / shape operators that read run-time indices or compute (the copy-only ones are
 * lowered onto ai_copy_nd, ai_kernels_movement.h): GATHER_ND, EMBEDDING_LOOKUP (int8 -> float),
 * DYNAMIC_UPDATE_SLICE, CUMSUM, REDUCE_ALL, L2_NORMALIZATION, L2_POOL_2D, BROADCAST_ARGS.
 *
 * Calling convention (see stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>);
 * Parameters are computed by stm32ai/passes/lower/tensor.py; arithmetic and index handling are
 * TFLite Micro's (docs/kernels_tensor.md). A run-time index never reads or writes outside a
 * tensor: where TFLite Micro fails the inference on a bad index, the kernel writes zeros.
 */
#ifndef AI_KERNELS_TENSOR_H
#define AI_KERNELS_TENSOR_H

#include <stdint.h>

#include "ai_platform.h" /* AI_MAX_DIMS */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GATHER_ND: slice i = params[flat position sum_j indices[i, j] * count[j]], slice_elems
 * elements of elem_size bytes; a slice whose position falls outside the params is zeros. */
typedef struct {
  int32_t n_slices, nd, slice_elems, elem_size, params_elems;
  int32_t count[AI_MAX_DIMS];
} ai_gather_nd_params;
void ai_gather_nd(const ai_gather_nd_params *p, const void *params, const int32_t *indices, void *output);

/* ---- EMBEDDING_LOOKUP, int8 table -> float32: row ids[i] dequantised (q * scale, zero point 0);
 * an id outside [0, rows) gives a zero row. (Same-type lookups use ai_gather.) */
typedef struct {
  int32_t n_ids, rows, cols;
  float scale;
} ai_embedding_lookup_hybrid_params;
void ai_embedding_lookup_hybrid(const ai_embedding_lookup_hybrid_params *p, const int32_t *ids,
                                const int8_t *table, float *output);

/* ---- DYNAMIC_UPDATE_SLICE: output = operand, with update written at the start indices
 * clamped to [0, dims[d] - upd[d]] (TFLite's clamp). Shapes left-padded to AI_MAX_DIMS. */
typedef struct {
  int32_t dims[AI_MAX_DIMS];
  int32_t upd[AI_MAX_DIMS];
  int32_t rank, elem_size, operand_bytes, index64;
} ai_dynamic_update_slice_params;
void ai_dynamic_update_slice(const ai_dynamic_update_slice_params *p, const void *operand, const void *update,
                             const void *start, void *output);

/* ---- CUMSUM along one axis of [outer, axis, inner]; exclusive / reverse as TFLite. */
typedef struct {
  int32_t outer, axis, inner, exclusive, reverse;
} ai_cumsum_params;
typedef ai_cumsum_params ai_cumsum_f32_params;
typedef ai_cumsum_params ai_cumsum_s32_params;
void ai_cumsum_f32(const ai_cumsum_f32_params *p, const float *input, float *output);
void ai_cumsum_s32(const ai_cumsum_s32_params *p, const int32_t *input, int32_t *output);

/* int8: TFLite's quantized CumSum — each term (x + input_offset) << left_shift scaled by the
 * input multiplier (x / 2 in Q(left_shift)), an int32 running sum that starts at the scaled
 * input offset (as TFLite's, not at 0) and wraps, requantised per output. */
typedef struct {
  int32_t outer, axis, inner, exclusive, reverse;
  int32_t input_offset, left_shift, input_multiplier, input_shift;
  int32_t output_multiplier, output_shift, output_offset, act_min, act_max;
} ai_cumsum_s8_params;
void ai_cumsum_s8(const ai_cumsum_s8_params *p, const int8_t *input, int8_t *output);

/* ---- REDUCE_ALL (bool): output element o = AND of the input elements mapping to it. The input
 * is walked in order over `shape`; out_strides[d] is the output stride of input dim d (0 when
 * reduced). */
typedef struct {
  int32_t shape[AI_MAX_DIMS];
  int32_t out_strides[AI_MAX_DIMS];
  int32_t out_size;
} ai_reduce_all_params;
void ai_reduce_all(const ai_reduce_all_params *p, const uint8_t *input, uint8_t *output);

/* ---- L2_NORMALIZATION over the last axis: rows of `depth`. int8: TFLite's integer path
 * (GetInvSqrtQuantizedMultiplierExp, output scale 1/128, zero point 0); float32: x / sqrt(sum x^2). */
typedef struct {
  int32_t outer, depth, input_zero_point;
} ai_l2_norm_s8_params;
typedef struct {
  int32_t outer, depth;
} ai_l2_norm_f32_params;
void ai_l2_norm_s8(const ai_l2_norm_s8_params *p, const int8_t *input, int8_t *output);
void ai_l2_norm_f32(const ai_l2_norm_f32_params *p, const float *input, float *output);

/* ---- L2_POOL_2D, float32 NHWC: sqrt(mean of squares over the valid window taps), clamped. */
typedef struct {
  int32_t batches, in_h, in_w, channels, out_h, out_w;
  int32_t filter_h, filter_w, stride_h, stride_w, pad_h, pad_w;
  float act_min, act_max;
} ai_l2_pool_f32_params;
void ai_l2_pool_f32(const ai_l2_pool_f32_params *p, const float *input, float *output);

/* ---- BROADCAST_ARGS: the broadcast of two 1-D shapes, right-aligned (a missing dim is 1);
 * values are read as int (TFLite's reference truncates int64 the same way); where the dims
 * disagree (TFLite aborts) the output takes shape 1's. */
typedef struct {
  int32_t n1, n2, n_out;
} ai_broadcast_args_params;
typedef ai_broadcast_args_params ai_broadcast_args_s32_params;
typedef ai_broadcast_args_params ai_broadcast_args_s64_params;
void ai_broadcast_args_s32(const ai_broadcast_args_s32_params *p, const int32_t *shape1, const int32_t *shape2,
                           int32_t *output);
void ai_broadcast_args_s64(const ai_broadcast_args_s64_params *p, const int64_t *shape1, const int64_t *shape2,
                           int64_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_TENSOR_H */
