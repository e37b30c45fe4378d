/* QUANTIZE float32 -> int8/int16 and DEQUANTIZE int8/uint8/int16 -> float32 (see
 * ai_kernels_quantize.h). One loop per direction serves every integer width: the public
 * kernels pass the width as a constant, so each inlined copy keeps only its own loads and
 * stores. 8-bit -> 8-bit QUANTIZE (requantisation) is a table: ai_lut8 in ai_activations.c;
 * the int16 requantisations are in ai_quantize_s16.c; int8 <-> int32 at the end. */
#include "ai_kernels_quantize.h"
#include "ai_kernels_quantize_s16.h"
#include "ai_qmath.h"

typedef enum { Q_S8, Q_U8, Q_S16 } q_type;

/* TFLite: (int32)round(x / scale) + zero_point, saturated to [lo, hi], the division in
 * float32 (a correctly rounded IEEE division: never replace it by a multiplication by
 * 1/scale). |q| >= limit saturates whatever the zero point (also +-inf); below it the
 * truncation and q - t are exact in float32, so comparing the fraction with 0.5 rounds
 * half away from zero. NaN gives the zero point, as TFLite Micro on Cortex-M. */
static inline int32_t quantize_one(float x, float scale, int32_t zp, float limit, int32_t lo,
                                   int32_t hi) {
  const float q = x / scale;
  int32_t v;
  if (q >= limit) {
    v = (int32_t)limit;
  } else if (q <= -limit) {
    v = -(int32_t)limit;
  } else if (q == q) {
    v = (int32_t)q;
    const float frac = q - (float)v;
    if (frac >= 0.5f) {
      v += 1;
    } else if (frac <= -0.5f) {
      v -= 1;
    }
  } else {
    v = 0;
  }
  v += zp;
  return v < lo ? lo : (v > hi ? hi : v);
}

static inline void quantize_run(int32_t n, float scale, int32_t zp, const float *input,
                                void *output, q_type t) {
  for (int32_t i = 0; i < n; ++i) {
    if (t == Q_S8) {
      ((int8_t *)output)[i] = (int8_t)quantize_one(input[i], scale, zp, 1024.0f, -128, 127);
    } else {
      ((int16_t *)output)[i] = (int16_t)quantize_one(input[i], scale, zp, 131072.0f, -32768, 32767);
    }
  }
}

/* scale * (q - zp): (q - zp) is exact in float and the product is rounded once, as in TFLite. */
static inline void dequantize_run(int32_t n, float scale, int32_t zp, const void *input,
                                  float *output, q_type t) {
  for (int32_t i = 0; i < n; ++i) {
    const int32_t q = t == Q_S8 ? ((const int8_t *)input)[i]
                      : t == Q_U8 ? ((const uint8_t *)input)[i]
                                  : ((const int16_t *)input)[i];
    output[i] = scale * (float)(q - zp);
  }
}

void ai_quantize_f32_s8(const ai_quantize_f32_s8_params *p, const float *input, int8_t *output) {
  quantize_run(p->size, p->scale, p->zero_point, input, output, Q_S8);
}

void ai_quantize_f32_s16(const ai_quantize_f32_s16_params *p, const float *input, int16_t *output) {
  quantize_run(p->size, p->scale, p->zero_point, input, output, Q_S16);
}

void ai_dequantize_s8_f32(const ai_dequantize_s8_f32_params *p, const int8_t *input,
                          float *output) {
  dequantize_run(p->size, p->scale, p->zero_point, input, output, Q_S8);
}

void ai_dequantize_u8_f32(const ai_dequantize_u8_f32_params *p, const uint8_t *input,
                          float *output) {
  dequantize_run(p->size, p->scale, p->zero_point, input, output, Q_U8);
}

void ai_dequantize_s16_f32(const ai_dequantize_s16_f32_params *p, const int16_t *input,
                           float *output) {
  dequantize_run(p->size, p->scale, p->zero_point, input, output, Q_S16);
}

/* int8 <-> int32 QUANTIZE (TFLite's Requantize); int8 -> int32 runs backwards, so the output
 * may start where the input does */
void ai_requantize_s8_s32(const ai_requantize_s8_s32_params *p, const int8_t *input,
                          int32_t *output) {
  for (int32_t i = p->size - 1; i >= 0; --i) {
    output[i] = ai_requant_wrap(input[i], p->input_offset, p->multiplier, p->shift,
                                p->output_offset, p->out_min, p->out_max);
  }
}

void ai_requantize_s32_s8(const ai_requantize_s32_s8_params *p, const int32_t *input,
                          int8_t *output) {
  for (int32_t i = 0; i < p->size; ++i) {
    output[i] = (int8_t)ai_requant_wrap(input[i], p->input_offset, p->multiplier, p->shift,
                                        p->output_offset, p->out_min, p->out_max);
  }
}
