/* QUANTIZE and DEQUANTIZE (stm32ai/passes/lower/quantize.py).
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * Parameter fields are the lowering's attrs, all computed at generate time.
 * Bit-exact with TFLite Micro's reference kernels. Details: docs/kernels_quantize.md.
 */
#ifndef AI_KERNELS_QUANTIZE_H
#define AI_KERNELS_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- quantisation ---- */

/* float32 <-> integer at one scale and zero point, any integer width (int16 kernels:
 * ai_kernels_quantize_s16.h). */
typedef struct {
  int32_t size;
  float scale;
  int32_t zero_point;
} ai_quantize_params;

/* QUANTIZE float32 -> int8: round(x / scale) (float32 division, ties away from zero)
 * + zero_point, saturated. NaN gives zero_point. */
typedef ai_quantize_params ai_quantize_f32_s8_params;
void ai_quantize_f32_s8(const ai_quantize_f32_s8_params *p, const float *input, int8_t *output);

/* DEQUANTIZE int8/uint8 -> float32: scale * (q - zero_point). */
typedef ai_quantize_params ai_dequantize_s8_f32_params;
typedef ai_quantize_params ai_dequantize_u8_f32_params;
void ai_dequantize_s8_f32(const ai_dequantize_s8_f32_params *p, const int8_t *input,
                          float *output);
void ai_dequantize_u8_f32(const ai_dequantize_u8_f32_params *p, const uint8_t *input,
                          float *output);

/* int8 <-> int32 QUANTIZE: TFLite's Requantize, clamp(requant(q - in_zp) + out_zp), the int32
 * sums wrapping (ai_requant_wrap); the int16 <-> int32 pair is in ai_kernels_quantize_s16.h */
typedef struct {
  int32_t size, input_offset, multiplier, shift, output_offset, out_min, out_max;
} ai_requantize_int_params;
typedef ai_requantize_int_params ai_requantize_s8_s32_params;
typedef ai_requantize_int_params ai_requantize_s32_s8_params;
void ai_requantize_s8_s32(const ai_requantize_s8_s32_params *p, const int8_t *input,
                          int32_t *output);
void ai_requantize_s32_s8(const ai_requantize_s32_s8_params *p, const int32_t *input,
                          int8_t *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_QUANTIZE_H */
