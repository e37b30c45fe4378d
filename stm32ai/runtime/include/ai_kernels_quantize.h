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

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_QUANTIZE_H */
