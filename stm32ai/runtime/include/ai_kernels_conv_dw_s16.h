/* DEPTHWISE_CONV_2D, 16x8 quantisation: int16 activations (zero point 0), int8 filter
 * [1][k_h][k_w][out_c] (out_c = in_c * depth_mult), int64 bias. Bit-exact with TFLite
 * Micro's DepthwiseConvPerChannel for int16 (int64 accumulator, 64-bit requantisation).
 * Generator: stm32ai/passes/lower/s16.py; docs/kernels_s16.md. */
#ifndef AI_KERNELS_CONV_DW_S16_H
#define AI_KERNELS_CONV_DW_S16_H

#include <stdint.h>

#include "ai_kernels_conv.h" /* AI_CONV_GEOMETRY_FIELDS */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t depth_mult, act_min, act_max;
} ai_depthwise_conv2d_s16_params;
/* At most AI_DW_S16_MAX_TAPS kernel taps (k_h * k_w): the per-channel int32 sums cannot
 * overflow. Scratch: out_c int32 sums. */
#define AI_DW_S16_MAX_TAPS 511
void ai_depthwise_conv2d_s16(const ai_depthwise_conv2d_s16_params *p, const int16_t *input,
                             const int8_t *weights, const int64_t *bias, const int32_t *rmult,
                             const int32_t *rshift, int16_t *output, void *scratch);
int32_t ai_depthwise_conv2d_s16_scratch_size(const ai_depthwise_conv2d_s16_params *p);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_CONV_DW_S16_H */
