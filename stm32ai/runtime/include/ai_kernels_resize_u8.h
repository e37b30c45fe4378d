/* RESIZE_BILINEAR of a legacy uint8 model on its shifted int8 activations (q - 128:
 * stm32ai/passes/legacy_u8.py). LiteRT's reference ResizeBilinear has no integer path for
 * uint8: it blends the uint8 codes in float32 (TFLite's products and summation order, the
 * float fractional weights of ComputeInterpolationValues) and rounds the result. This kernel
 * does the same float operations on x + 128 (contraction off: no fused multiply-add), rounds
 * half away from zero, clamps to 0..255 and shifts back: bit-exact with LiteRT-ref.
 * `table`/`frac`: as ai_resize_bilinear_f32 (ai_kernels_resize.h). Generator:
 * stm32ai/passes/lower/u8.py; docs/kernels_u8.md. */
#ifndef AI_KERNELS_RESIZE_U8_H
#define AI_KERNELS_RESIZE_U8_H

#include <stdint.h>

#include "ai_kernels_resize.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef ai_resize_bilinear_params ai_resize_bilinear_u8_params;
void ai_resize_bilinear_u8(const ai_resize_bilinear_u8_params *p, const int8_t *input,
                           const int32_t *table, const float *frac, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_RESIZE_U8_H */
