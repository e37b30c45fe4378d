/* QUANTIZE / DEQUANTIZE around int16 (16x8 models):
 *   quantize_f32_s16:   TFLite's AffineQuantize to int16 (round(x / scale) half away from
 *                       zero, the division in float32, + zero point, saturated);
 *   dequantize_s16_f32: scale * (q - zero_point) in float32;
 *   requantize_{s16_s16, s16_s8, s8_s16, s16_s32, s32_s16}: TFLite's Requantize,
 *                       clamp(requant(q - in_zp, multiplier, shift) + out_zp).
 * Generator: stm32ai/passes/lower/s16.py; docs/kernels_s16.md. */
#ifndef AI_KERNELS_QUANTIZE_S16_H
#define AI_KERNELS_QUANTIZE_S16_H

#include <stdint.h>

#include "ai_kernels_quantize.h"

#ifdef __cplusplus
extern "C" {
#endif

/* float32 <-> int16 (kernels in ai_quantize.c): the parameters of every width */
typedef ai_quantize_params ai_quantize_f32_s16_params;
typedef ai_quantize_params ai_dequantize_s16_f32_params;
void ai_quantize_f32_s16(const ai_quantize_f32_s16_params *p, const float *input, int16_t *output);
void ai_dequantize_s16_f32(const ai_dequantize_s16_f32_params *p, const int16_t *input,
                           float *output);

typedef struct {
  int32_t size, input_offset, multiplier, shift, output_offset, out_min, out_max;
} ai_requantize_s16_params;
typedef ai_requantize_s16_params ai_requantize_s16_s16_params;
typedef ai_requantize_s16_params ai_requantize_s16_s8_params;
typedef ai_requantize_s16_params ai_requantize_s8_s16_params;
void ai_requantize_s16_s16(const ai_requantize_s16_s16_params *p, const int16_t *input,
                           int16_t *output);
void ai_requantize_s16_s8(const ai_requantize_s16_s8_params *p, const int16_t *input,
                          int8_t *output);
void ai_requantize_s8_s16(const ai_requantize_s8_s16_params *p, const int8_t *input,
                          int16_t *output);

/* int16 <-> int32 (int32 sums wrapping, ai_requant_wrap) */
typedef ai_requantize_s16_params ai_requantize_s16_s32_params;
typedef ai_requantize_s16_params ai_requantize_s32_s16_params;
void ai_requantize_s16_s32(const ai_requantize_s16_s32_params *p, const int16_t *input,
                           int32_t *output);
void ai_requantize_s32_s16(const ai_requantize_s32_s16_params *p, const int32_t *input,
                           int16_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_QUANTIZE_S16_H */
