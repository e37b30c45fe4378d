/* MEAN on int16 (16x8 models), bit-exact with TFLite Micro's QuantizedMeanOrSum: the raw
 * inputs of each output are summed in int32 (the generator bounds the count so the sum
 * cannot overflow), then out = clamp(requant(s + bias, multiplier, shift) + out_offset)
 * with the 1/count folded into the multiplier (as the int8 MEAN, ai_kernels_reduce.h).
 * The walk: the input in memory order as `ndim` merged dimensions `shape`, `ostride[d]`
 * the output stride of dimension d (0 when reduced). Scratch: out_size int32 sums.
 * Generator: stm32ai/passes/lower/s16.py; docs/kernels_s16.md. */
#ifndef AI_KERNELS_REDUCE_S16_H
#define AI_KERNELS_REDUCE_S16_H

#include <stdint.h>

#include "ai_platform.h"

#ifdef __cplusplus
extern "C" {
#endif


typedef struct {
  int32_t ndim;
  int32_t shape[AI_MAX_DIMS];
  int32_t ostride[AI_MAX_DIMS];
  int32_t out_size;
  int32_t bias, multiplier, shift, out_offset, act_min, act_max;
} ai_reduce_mean_s16_params;
void ai_reduce_mean_s16(const ai_reduce_mean_s16_params *p, const int16_t *input, int16_t *output,
                        void *scratch);
int32_t ai_reduce_mean_s16_scratch_size(const ai_reduce_mean_s16_params *p);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_REDUCE_S16_H */
