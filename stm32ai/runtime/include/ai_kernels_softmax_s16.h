/* SOFTMAX int16 -> int16 (input and output zero point 0, output scale 1/32768), bit-exact
 * with TFLite's SoftmaxInt16: per row, d = x - max(row) scaled by (input_multiplier,
 * input_shift) so [-65535, 0] maps onto [-10, 0], exp through `exp_lut`, the sum's
 * reciprocal through `recip_lut` (1 / (1 + x)), both 513-entry int16 tables with linear
 * interpolation that the generator computes as TFLite's LUTPopulate does at prepare time.
 * Rows of at most 65535 elements (the int32 sum of Q0.15 values cannot overflow).
 * Generator: stm32ai/passes/lower/s16.py; docs/kernels_s16.md. */
#ifndef AI_KERNELS_SOFTMAX_S16_H
#define AI_KERNELS_SOFTMAX_S16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int32_t rows, depth, input_multiplier, input_shift;
} ai_softmax_s16_params;
void ai_softmax_s16(const ai_softmax_s16_params *p, const int16_t *input, const int16_t *exp_lut,
                    const int16_t *recip_lut, int16_t *output);

/* TFLite's 513-entry int16 table lookup with 7-bit linear interpolation. */
static inline int16_t ai_lut513_s16(int16_t value, const int16_t *lut) {
  const int32_t index = 256 + (value >> 7);
  const int32_t offset = value & 0x7f;
  const int32_t base = lut[index];
  const int16_t slope = (int16_t)(lut[index + 1] - lut[index]);
  return (int16_t)(base + ((slope * offset + 64) >> 7));
}

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_SOFTMAX_S16_H */
