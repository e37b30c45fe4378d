/* Elementwise activation kernels (see ai_kernels_activations.h and docs/kernels_activations.md).
 *
 * int8 kernels do integer arithmetic only; their parameters and tables were computed at
 * generate time from TFLite Micro's reference arithmetic. Every kernel reads element i
 * before it writes element i, so output may alias input. */
#include <math.h>
#include <string.h>

#include "ai_kernels_activations.h"
#include "ai_qmath.h"

#if defined(__ARM_FEATURE_SIMD32) && __ARM_FEATURE_SIMD32
#include <arm_acle.h>
#define AI_ACT_SIMD32 1
#else
#define AI_ACT_SIMD32 0
#endif

void ai_lut8(const ai_lut8_params *p, const uint8_t *input, const uint8_t *table,
             uint8_t *output) {
  const int32_t n = p->size;
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint8_t a = table[input[i]];
    const uint8_t b = table[input[i + 1]];
    const uint8_t c = table[input[i + 2]];
    const uint8_t d = table[input[i + 3]];
    output[i] = a;
    output[i + 1] = b;
    output[i + 2] = c;
    output[i + 3] = d;
  }
  for (; i < n; ++i) {
    output[i] = table[input[i]];
  }
}

void ai_clamp_s8(const ai_clamp_s8_params *p, const int8_t *input, int8_t *output) {
  const int32_t n = p->size;
  const int32_t lo = p->lo;
  const int32_t hi = p->hi;
  int32_t i = 0;
#if AI_ACT_SIMD32
  {
    /* Four signed lanes: SSUB8 sets GE[k] where lane k of the minuend >= subtrahend,
     * SEL takes lane k from its first operand where GE[k]. Unaligned word access is
     * fine on ARMv7E-M; memcpy keeps it well defined in C. */
    const uint32_t lo4 = (uint32_t)(uint8_t)lo * 0x01010101u;
    const uint32_t hi4 = (uint32_t)(uint8_t)hi * 0x01010101u;
    for (; i + 4 <= n; i += 4) {
      uint32_t w;
      memcpy(&w, input + i, 4);
      (void)__ssub8((int8x4_t)w, (int8x4_t)lo4);
      w = __sel((uint8x4_t)w, (uint8x4_t)lo4); /* max(w, lo) */
      (void)__ssub8((int8x4_t)hi4, (int8x4_t)w);
      w = __sel((uint8x4_t)w, (uint8x4_t)hi4); /* min(w, hi) */
      memcpy(output + i, &w, 4);
    }
  }
#endif
  for (; i < n; ++i) {
    const int32_t v = input[i];
    output[i] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
  }
}

/* One run of `n` elements along the innermost dim: alpha advances by `astep` (0 or 1). */
static void prelu_s8_run(const ai_prelu_s8_params *p, const int8_t *input, const int8_t *alpha,
                         int32_t astep, const int8_t *pos_table, int8_t *output, int32_t n) {
  const int32_t in_off = p->input_offset;
  const int32_t a_off = p->alpha_offset;
  const int32_t out_off = p->output_offset;
  const int32_t mn = p->mult_neg, sn = p->shift_neg;
  for (int32_t i = 0; i < n; ++i, alpha += astep) {
    const int32_t x = (int32_t)input[i] + in_off;
    if (x >= 0) {
      output[i] = pos_table[(uint8_t)input[i]];
    } else {
      const int32_t y = ai_requant(x * ((int32_t)*alpha + a_off), mn, sn) + out_off;
      output[i] = (int8_t)AI_CLAMP(y, -128, 127);
    }
  }
}

/* One run of `n` float elements, alpha advancing by `astep` (0 or 1). */
static void prelu_f32_run(const float *input, const float *alpha, int32_t astep, float *output,
                          int32_t n) {
  for (int32_t i = 0; i < n; ++i, alpha += astep) {
    const float x = input[i];
    output[i] = x >= 0.0f ? x : x * *alpha;
  }
}

/* The input's runs along the innermost dim, each with its alpha run (alpha broadcast by
 * its element strides, 0 on a broadcast dim): float32 when `is_f32`, int8 otherwise. */
static inline void prelu_runs(const int32_t dims[4], const int32_t astr[4], const void *input,
                              const void *alpha, void *output, const ai_prelu_s8_params *p8,
                              const int8_t *pos_table, int32_t is_f32) {
  const int32_t d3 = dims[3];
  int32_t idx = 0;
  for (int32_t i0 = 0; i0 < dims[0]; ++i0) {
    for (int32_t i1 = 0; i1 < dims[1]; ++i1) {
      for (int32_t i2 = 0; i2 < dims[2]; ++i2, idx += d3) {
        const int32_t a = i0 * astr[0] + i1 * astr[1] + i2 * astr[2];
        if (is_f32) {
          prelu_f32_run((const float *)input + idx, (const float *)alpha + a, astr[3],
                        (float *)output + idx, d3);
        } else {
          prelu_s8_run(p8, (const int8_t *)input + idx, (const int8_t *)alpha + a, astr[3],
                       pos_table, (int8_t *)output + idx, d3);
        }
      }
    }
  }
}

void ai_prelu_s8(const ai_prelu_s8_params *p, const int8_t *input, const int8_t *alpha,
                 const int8_t *pos_table, int8_t *output) {
  prelu_runs(p->dims, p->alpha_strides, input, alpha, output, p, pos_table, 0);
}

void ai_prelu_f32(const ai_prelu_f32_params *p, const float *input, const float *alpha,
                  float *output) {
  prelu_runs(p->dims, p->alpha_strides, input, alpha, output, NULL, NULL, 1);
}

void ai_clamp_f32(const ai_clamp_f32_params *p, const float *input, float *output) {
  const int32_t n = p->size;
  const float lo = p->lo;
  const float hi = p->hi;
  for (int32_t i = 0; i < n; ++i) {
    const float v = input[i];
    output[i] = v < lo ? lo : (v > hi ? hi : v);
  }
}

void ai_leaky_relu_f32(const ai_leaky_relu_f32_params *p, const float *input, float *output) {
  const int32_t n = p->size;
  const float alpha = p->alpha;
  for (int32_t i = 0; i < n; ++i) {
    const float v = input[i];
    output[i] = v > 0.0f ? v : v * alpha;
  }
}

void ai_logistic_f32(const ai_logistic_f32_params *p, const float *input, float *output) {
  /* TFLite's reference formula, cut-offs included, so results agree to float rounding. */
  const float cutoff_upper = 16.619047164916992188f;
  const float cutoff_lower = -9.0f;
  const int32_t n = p->size;
  for (int32_t i = 0; i < n; ++i) {
    const float v = input[i];
    float r;
    if (v > cutoff_upper) {
      r = 1.0f;
    } else if (v < cutoff_lower) {
      r = expf(v);
    } else {
      r = 1.0f / (1.0f + expf(-v));
    }
    output[i] = r;
  }
}

void ai_tanh_f32(const ai_tanh_f32_params *p, const float *input, float *output) {
  const int32_t n = p->size;
  for (int32_t i = 0; i < n; ++i) {
    output[i] = tanhf(input[i]);
  }
}

void ai_hard_swish_f32(const ai_hard_swish_f32_params *p, const float *input, float *output) {
  const int32_t n = p->size;
  for (int32_t i = 0; i < n; ++i) {
    const float v = input[i];
    const float r = AI_MIN(6.0f, AI_MAX(0.0f, v + 3.0f));
    output[i] = v * r / 6.0f;
  }
}
