/* FULLY_CONNECTED, 16x8 quantisation: int16 input (zero point 0), int8 weights
 * [n_out][k] (per tensor or per row; each row packed per group of 4 as (w0, w2, w1, w3),
 * ai_dot_s16.h), int64 bias. Bit-exact with TFLite Micro's
 * FullyConnected for int16: acc = bias[o] + sum x * w (int64), then
 * clamp(ai_requant64(acc, rmult[o], rshift[o]), act_min, act_max).
 * Generator: stm32ai/passes/lower/s16.py; docs/kernels_s16.md. */
#ifndef AI_KERNELS_FC_S16_H
#define AI_KERNELS_FC_S16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int32_t batches, n_in, n_out, act_min, act_max;
  /* 1: the model's bias is int32 and TFLite then requantises the int32 accumulator with the
   * 32-bit MultiplyByQuantizedMultiplier: rmult/rshift hold the Q31 multiplier and signed
   * shift (ai_requant). 0: int64 bias, the 64-bit requantisation (ai_requant64). */
  int32_t acc32;
} ai_fully_connected_s16_params;
void ai_fully_connected_s16(const ai_fully_connected_s16_params *p, const int16_t *input,
                            const int8_t *weights, const int64_t *bias, const int32_t *rmult,
                            const int32_t *rshift, int16_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_FC_S16_H */
