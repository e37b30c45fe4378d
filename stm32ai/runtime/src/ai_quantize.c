/* QUANTIZE float32 -> int8 and DEQUANTIZE int8/uint8 -> float32 (see ai_kernels_activations.h).
 * 8-bit -> 8-bit QUANTIZE (requantisation) is a table: ai_lut8 in ai_activations.c. */
#include "ai_kernels_quantize.h"

void ai_quantize_f32_s8(const ai_quantize_f32_s8_params *p, const float *input, int8_t *output) {
  const int32_t n = p->size;
  const float scale = p->scale;
  const int32_t zp = p->zero_point;
  for (int32_t i = 0; i < n; ++i) {
    /* TFLite: (int32)round(x / scale) + zero_point, the division in float32 (a correctly
     * rounded IEEE division: never replace it by a multiplication by 1/scale). */
    const float q = input[i] / scale;
    int32_t v;
    if (q >= 1024.0f) {
      v = 1024; /* saturates below; also +inf */
    } else if (q <= -1024.0f) {
      v = -1024;
    } else if (q == q) {
      /* |q| < 1024: the truncation and q - t are exact, so this is round-half-away. */
      v = (int32_t)q;
      const float frac = q - (float)v;
      if (frac >= 0.5f) {
        v += 1;
      } else if (frac <= -0.5f) {
        v -= 1;
      }
    } else {
      v = 0; /* NaN: the zero point, as TFLite Micro on Cortex-M */
    }
    v += zp;
    output[i] = (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
  }
}

void ai_dequantize_s8_f32(const ai_dequantize_s8_f32_params *p, const int8_t *input,
                          float *output) {
  const int32_t n = p->size;
  const float scale = p->scale;
  const int32_t zp = p->zero_point;
  /* (q - zp) is exact in float and the product is rounded once, as in TFLite. */
  for (int32_t i = 0; i < n; ++i) {
    output[i] = scale * (float)((int32_t)input[i] - zp);
  }
}

void ai_dequantize_u8_f32(const ai_dequantize_u8_f32_params *p, const uint8_t *input,
                          float *output) {
  const int32_t n = p->size;
  const float scale = p->scale;
  const int32_t zp = p->zero_point;
  for (int32_t i = 0; i < n; ++i) {
    output[i] = scale * (float)((int32_t)input[i] - zp);
  }
}
