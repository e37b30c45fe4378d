/* int16 <-> int16/int8/int32 QUANTIZE, TFLite's Requantize (see ai_kernels_quantize_s16.h); float32
 * <-> int16 is in ai_quantize.c with the other widths. */
#include "ai_kernels_quantize_s16.h"

#include "ai_qmath.h"

static inline int32_t requant_one(const ai_requantize_s16_params *p, int32_t q) {
  const int32_t v = ai_requant(q + p->input_offset, p->multiplier, p->shift) + p->output_offset;
  return AI_CLAMP(v, p->out_min, p->out_max);
}

void ai_requantize_s16_s16(const ai_requantize_s16_s16_params *p, const int16_t *input,
                           int16_t *output) {
  for (int32_t i = 0; i < p->size; ++i) {
    output[i] = (int16_t)requant_one(p, input[i]);
  }
}

void ai_requantize_s16_s8(const ai_requantize_s16_s8_params *p, const int16_t *input,
                          int8_t *output) {
  for (int32_t i = 0; i < p->size; ++i) {
    output[i] = (int8_t)requant_one(p, input[i]);
  }
}

void ai_requantize_s8_s16(const ai_requantize_s8_s16_params *p, const int8_t *input,
                          int16_t *output) {
  /* backwards: the output (2 bytes per element) may start where the input does */
  for (int32_t i = p->size - 1; i >= 0; --i) {
    output[i] = (int16_t)requant_one(p, input[i]);
  }
}

/* int32 on one side: the output is wider (backwards: it may start where the input does) or
 * narrower (forwards) */
void ai_requantize_s16_s32(const ai_requantize_s16_s32_params *p, const int16_t *input,
                           int32_t *output) {
  for (int32_t i = p->size - 1; i >= 0; --i) {
    output[i] = ai_requant_wrap(input[i], p->input_offset, p->multiplier, p->shift,
                                p->output_offset, p->out_min, p->out_max);
  }
}

void ai_requantize_s32_s16(const ai_requantize_s32_s16_params *p, const int32_t *input,
                           int16_t *output) {
  for (int32_t i = 0; i < p->size; ++i) {
    output[i] = (int16_t)ai_requant_wrap(input[i], p->input_offset, p->multiplier, p->shift,
                                         p->output_offset, p->out_min, p->out_max);
  }
}
