/* CONV_2D, 16x8 quantisation: int16 activations (zero point 0), int8 filter (OHWI, per
 * channel or per tensor), int64 bias. Bit-exact with TFLite Micro's ConvPerChannel for
 * int16: acc = bias[oc] + sum x * w over in-image taps (int64), then
 * clamp(ai_requant64(acc, rmult[oc], rshift[oc]), act_min, act_max).
 * Generator: stm32ai/passes/lower/s16.py; docs/kernels_s16.md. */
#ifndef AI_KERNELS_CONV_S16_H
#define AI_KERNELS_CONV_S16_H

#include <stdint.h>

#include "ai_kernels_conv.h" /* AI_CONV_GEOMETRY_FIELDS */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t act_min, act_max;
  /* 1: the model's bias is int32 and TFLite then requantises the int32 accumulator with the
   * 32-bit MultiplyByQuantizedMultiplier: rmult/rshift hold the Q31 multiplier and signed
   * shift (ai_requant). 0: int64 bias, the 64-bit requantisation (ai_requant64). */
  int32_t acc32;
} ai_conv2d_s16_params;
/* weights [out_c][k_h * k_w * in_c], each row packed per group of 4 as (w0, w2, w1, w3)
 * (ai_dot_s16.h); bias may be NULL. Scratch: one im2col column of k_h * k_w * in_c int16
 * (ai_conv2d_s16_scratch_size), unused by a 1x1 kernel without padding. */
void ai_conv2d_s16(const ai_conv2d_s16_params *p, const int16_t *input, const int8_t *weights,
                   const int64_t *bias, const int32_t *rmult, const int32_t *rshift,
                   int16_t *output, void *scratch);
int32_t ai_conv2d_s16_scratch_size(const ai_conv2d_s16_params *p);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_CONV_S16_H */
