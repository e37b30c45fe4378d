/* QUANTIZE / DEQUANTIZE around int16 (see ai_kernels_quantize_s16.h). */
#include "ai_kernels_quantize_s16.h"

#include "ai_qmath.h"

void ai_quantize_f32_s16(const ai_quantize_f32_s16_params *p, const float *input, int16_t *output) {
  const int32_t n = p->size;
  for (int32_t i = 0; i < n; ++i) {
    /* TFLite: round(x / scale) + zero_point, the division in float32 (never by 1/scale). */
    const float q = input[i] / p->scale;
    int32_t v;
    if (q >= 131072.0f) {
      v = 131072; /* saturates below; also +inf */
    } else if (q <= -131072.0f) {
      v = -131072;
    } else if (q == q) {
      /* |q| < 2^17: truncation and q - t are exact in float32, so this rounds half away */
      v = (int32_t)q;
      const float frac = q - (float)v;
      if (frac >= 0.5f) {
        v += 1;
      } else if (frac <= -0.5f) {
        v -= 1;
      }
    } else {
      v = 0; /* NaN: the zero point */
    }
    v += p->zero_point;
    output[i] = (int16_t)AI_CLAMP(v, -32768, 32767);
  }
}

void ai_dequantize_s16_f32(const ai_dequantize_s16_f32_params *p, const int16_t *input,
                           float *output) {
  const int32_t n = p->size;
  for (int32_t i = 0; i < n; ++i) {
    output[i] = p->scale * (float)((int32_t)input[i] - p->zero_point);
  }
}

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
