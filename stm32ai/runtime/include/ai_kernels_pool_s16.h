/* AVERAGE_POOL_2D / MAX_POOL_2D on int16 (NHWC; input and output share the quantisation).
 * Average: int32 sum of the in-image taps, divided by their count rounding half away from
 * zero (TFLite's reference AveragePool), clamped; the generator bounds the window to
 * 65535 taps so the sum fits int32. Max: the largest in-image tap, clamped.
 * Generator: stm32ai/passes/lower/s16.py; docs/kernels_s16.md. */
#ifndef AI_KERNELS_POOL_S16_H
#define AI_KERNELS_POOL_S16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int32_t batches, in_h, in_w, channels, out_h, out_w;
  int32_t filter_h, filter_w, stride_h, stride_w, pad_h, pad_w;
  int32_t act_min, act_max;
} ai_pool_s16_params;
typedef ai_pool_s16_params ai_avgpool_s16_params;
typedef ai_pool_s16_params ai_maxpool_s16_params;
void ai_avgpool_s16(const ai_avgpool_s16_params *p, const int16_t *input, int16_t *output);
void ai_maxpool_s16(const ai_maxpool_s16_params *p, const int16_t *input, int16_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_POOL_S16_H */
