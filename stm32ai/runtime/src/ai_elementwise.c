/* Elementwise math kernels (ai_kernels_elementwise.h, docs/kernels_elementwise.md).
 *
 * float32 unary math is TFLite Micro's: the C library function of the same name on float
 * (fabsf, ceilf, floorf, sqrtf, expf, logf, sinf, cosf, expm1f for ELU), 1.0f / sqrtf(x) for
 * RSQRT, x * x for SQUARE, and ROUND to nearest with ties to even (TFLite's RoundToNearest).
 * Each kernel is its own function, so a model links only the ones it calls (--gc-sections).
 */
#include <math.h>
#include <string.h>

#include "ai_ew_walk.h"
#include "ai_fixedpoint.h"
#include "ai_kernels_elementwise.h"
#include "ai_qmath.h"

/* TFLite's RoundToNearest: floor, plus one above the half, ties to the even neighbour (fmodf
 * instead of TFLite's int cast, which is undefined beyond 2^31; there the tie cannot occur). */
static inline float round_half_even(float v) {
  const float f = floorf(v);
  const float d = v - f;
  if (d < 0.5f) {
    return f;
  }
  if (d > 0.5f) {
    return f + 1.0f;
  }
  return fmodf(f, 2.0f) == 0.0f ? f : f + 1.0f;
}

#define UNARY_F32(NAME, EXPR)                                                                  \
  void ai_##NAME##_f32(const ai_##NAME##_f32_params *p, const float *input, float *output) {   \
    const int32_t n = p->size;                                                                 \
    for (int32_t i = 0; i < n; i++) {                                                          \
      const float x = input[i];                                                                \
      output[i] = (EXPR);                                                                      \
    }                                                                                          \
  }

UNARY_F32(abs, fabsf(x))
UNARY_F32(neg, -x)
UNARY_F32(ceil, ceilf(x))
UNARY_F32(floor, floorf(x))
UNARY_F32(round, round_half_even(x))
UNARY_F32(sqrt, sqrtf(x))
UNARY_F32(rsqrt, 1.0f / sqrtf(x))
UNARY_F32(exp, expf(x))
UNARY_F32(log, logf(x))
UNARY_F32(sin, sinf(x))
UNARY_F32(cos, cosf(x))
UNARY_F32(square, x * x)
UNARY_F32(elu, x < 0.0f ? expm1f(x) : x)

void ai_abs_s16(const ai_abs_s16_params *p, const int16_t *input, int16_t *output) {
  const int32_t n = p->size;
  for (int32_t i = 0; i < n; i++) {
    const int32_t v = input[i] < 0 ? -(int32_t)input[i] : (int32_t)input[i];
    int32_t y;
    if (p->mode == 0) {
      y = (int16_t)(uint16_t)v; /* raw int16: std::abs then the cast back wraps -32768 */
    } else {
      y = p->mode == 1 ? v : ai_requant(v, p->multiplier, p->shift);
      y = AI_CLAMP(y, -32768, 32767);
    }
    output[i] = (int16_t)y;
  }
}

/* TFLite's GetInvSqrtQuantizedMultiplierExp(x, kReverseShift = -1) for 1 < x < 2^31: x
 * normalised into [2^27, 2^29) by pairs of bits, 5 Newton-Raphson steps of r = r * (3 - x r^2)
 * / 2 in gemmlowp Q3.28 (products in Q6 / Q9 rescaled with saturating shifts), times
 * sqrt(2)/2. Returns the Q31 multiplier; *shift gets the left shift to apply. */
static int32_t inv_sqrt_exp(int32_t x, int32_t *shift) {
  if (x <= 1) {
    *shift = 0;
    return INT32_MAX;
  }
  int32_t sh = 11;
  while (x >= (1 << 29)) {
    x /= 4;
    sh++;
  }
  const int32_t pairs = (ai_fp_clz((uint32_t)x) - 1) / 2 - 1;
  sh -= pairs;
  x = (int32_t)((uint32_t)x << (2 * pairs));
  const int32_t half_input = ai_rdbypot(x >> 1, 1);
  const int32_t half_three = (1 << 28) + (1 << 27);
  int32_t r = 1 << 28;
  for (int i = 0; i < 5; i++) {
    const int32_t r3 = ai_fp_sat_shl(ai_srdhm(ai_srdhm(r, r), r), 6);
    r = ai_fp_sat_shl(ai_fp_sub(ai_srdhm(half_three, r), ai_srdhm(half_input, r3)), 3);
  }
  r = ai_srdhm(r, 1518500250); /* sqrt(2) / 2 in Q0.31 */
  if (sh < 0) {
    r = (int32_t)((uint32_t)r << -sh);
    sh = 0;
  }
  *shift = -sh;
  return r;
}

void ai_rsqrt_s16(const ai_rsqrt_s16_params *p, const int16_t *input, int16_t *output) {
  for (int32_t i = 0; i < p->size; i++) {
    const int32_t v = input[i];
    if (v <= 0) {
      output[i] = 32767;
      continue;
    }
    int32_t ish;
    const int32_t im = inv_sqrt_exp(v, &ish);
    const int32_t data = ai_requant(1, im, ish + 20);
    const int32_t r = ai_requant(data, p->multiplier, p->shift - 20);
    output[i] = (int16_t)AI_CLAMP(r, -32768, 32767);
  }
}

/* ---- SQUARED_DIFFERENCE ---- */

AI_EW_BINARY(squared_difference_f32, float, float, , (x - z) * (x - z))
AI_EW_BINARY(squared_difference_s32, int32_t, int32_t, ,
             (int32_t)(((uint32_t)x - (uint32_t)z) * ((uint32_t)x - (uint32_t)z)))

/* TFLite's quantised SquaredDifference of one pair. |x + offset| <= 255 << 7 (int8) or 32767
 * (int16, offset 0), each rescaled by a multiplier <= 0.5, so the difference squared fits int32
 * (the generator checks the zero points); the product is still formed on uint32_t. */
static inline int32_t sqdiff_q(const ai_squared_difference_q_params *p, int32_t x, int32_t z,
                               int32_t lo, int32_t hi) {
  const int32_t v1 = (int32_t)((uint32_t)(x + p->input1_offset) << p->left_shift);
  const int32_t v2 = (int32_t)((uint32_t)(z + p->input2_offset) << p->left_shift);
  const int32_t s1 = ai_rdbypot(ai_srdhm(v1, p->input1_multiplier), -p->input1_shift);
  const int32_t s2 = ai_rdbypot(ai_srdhm(v2, p->input2_multiplier), -p->input2_shift);
  const int32_t d = s1 - s2;
  const int32_t sq = (int32_t)((uint32_t)d * (uint32_t)d);
  const int32_t r = ai_requant(sq, p->output_multiplier, p->output_shift) + p->output_offset;
  return AI_CLAMP(r, lo, hi);
}

AI_EW_BINARY(squared_difference_s8, int8_t, int8_t, , sqdiff_q(p, x, z, -128, 127))
AI_EW_BINARY(squared_difference_s16, int16_t, int16_t, , sqdiff_q(p, x, z, -32768, 32767))

/* ---- FLOOR_MOD ---- */

static inline float floor_mod_f(float x, float z) {
  const float t = fmodf(x, z);
  return (t != 0.0f && ((z < 0.0f) != (t < 0.0f))) ? t + z : t;
}

static inline int32_t floor_mod_i(int32_t x, int32_t z) {
  if (z == 0 || z == -1) {
    return 0; /* TFLite divides by zero (undefined); INT32_MIN % -1 would trap */
  }
  const int32_t t = x % z;
  return (t != 0 && ((z < 0) != (t < 0))) ? t + z : t;
}

AI_EW_BINARY(floor_mod_f32, float, float, , floor_mod_f(x, z))
AI_EW_BINARY(floor_mod_s32, int32_t, int32_t, , floor_mod_i(x, z))

/* ---- POW ---- */

AI_EW_BINARY(pow_f32, float, float, , powf(x, z))

/* ---- ADD_N ---- */

void ai_add_n_f32(const ai_add_n_f32_params *p, const float *in0, const float *in1,
                  const float *in2, const float *in3, const float *in4, const float *in5,
                  const float *in6, const float *in7, float *output) {
  const float *in[AI_ADD_N_MAX] = {in0, in1, in2, in3, in4, in5, in6, in7};
  for (int32_t i = 0; i < p->size; i++) {
    float x = 0.0f;
    for (int32_t j = 0; j < p->n; j++) {
      x += in[j][i];
    }
    output[i] = x;
  }
}

static inline int32_t add_n_scale(const ai_add_n_s8_params *p, int32_t v) {
  return ai_rdbypot(ai_srdhm((int32_t)((uint32_t)v << p->left_shift), p->input_multiplier),
                    -p->input_shift);
}

void ai_add_n_s8(const ai_add_n_s8_params *p, const int8_t *in0, const int8_t *in1,
                 const int8_t *in2, const int8_t *in3, const int8_t *in4, const int8_t *in5,
                 const int8_t *in6, const int8_t *in7, int8_t *output) {
  const int8_t *in[AI_ADD_N_MAX] = {in0, in1, in2, in3, in4, in5, in6, in7};
  const int32_t start = add_n_scale(p, p->input_offset);
  for (int32_t i = 0; i < p->size; i++) {
    int32_t acc = start; /* |each term| <= 255 << 19: 9 terms fit int32 */
    for (int32_t j = 0; j < p->n; j++) {
      acc += add_n_scale(p, in[j][i] + p->input_offset);
    }
    const int32_t r = ai_rdbypot(ai_srdhm(acc, p->output_multiplier), -p->output_shift) +
                      p->output_offset;
    output[i] = (int8_t)AI_CLAMP(r, -128, 127);
  }
}

/* ---- ZEROS_LIKE, FILL ---- */

void ai_zeros_like(const ai_zeros_like_params *p, const void *input, void *output) {
  (void)input;
  memset(output, 0, (size_t)p->bytes);
}

void ai_fill(const ai_fill_params *p, const void *value, void *output) {
  uint8_t *y = (uint8_t *)output;
  const size_t eb = (size_t)p->elem_bytes;
  for (int32_t i = 0; i < p->count; i++) {
    memcpy(y + (size_t)i * eb, value, eb);
  }
}
