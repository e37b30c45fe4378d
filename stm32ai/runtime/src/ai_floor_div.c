/* FLOOR_DIV kernels (ai_kernels_floor_div.h). */
#include "ai_kernels_floor_div.h"

/* floor() of a double without libm: exact for every double (|q| >= 2^52 is integral). */
static inline double floor_f64(double q) {
  if (!(q > -4503599627370496.0 && q < 4503599627370496.0)) {
    return q; /* integral, infinite or NaN */
  }
  const double t = (double)(int64_t)q; /* truncates toward zero */
  return t > q ? t - 1.0 : t;
}

static inline int32_t floor_div_s32(int32_t x, int32_t z) {
  if (z == 0) {
    return 0;
  }
  if (z == -1) {
    return (int32_t)(0u - (uint32_t)x); /* INT32_MIN / -1 wraps, as SDIV */
  }
  const int32_t q = x / z;
  return (x % z != 0 && ((x < 0) != (z < 0))) ? q - 1 : q;
}

/* Walks the output in order, reading each input through its element strides. */
#define FLOOR_DIV_WALK(T, P, IN1, IN2, OUT, EXPR)                                                \
  do {                                                                                         \
    const int32_t *n_ = (P)->out_shape;                                                        \
    const int32_t *s1_ = (P)->in1_strides;                                                     \
    const int32_t *s2_ = (P)->in2_strides;                                                     \
    int32_t o_ = 0;                                                                            \
    for (int32_t i0 = 0; i0 < n_[0]; i0++)                                                     \
      for (int32_t i1 = 0; i1 < n_[1]; i1++)                                                   \
        for (int32_t i2 = 0; i2 < n_[2]; i2++)                                                 \
          for (int32_t i3 = 0; i3 < n_[3]; i3++)                                               \
            for (int32_t i4 = 0; i4 < n_[4]; i4++) {                                           \
              int32_t a_ = i0 * s1_[0] + i1 * s1_[1] + i2 * s1_[2] + i3 * s1_[3] + i4 * s1_[4]; \
              int32_t b_ = i0 * s2_[0] + i1 * s2_[1] + i2 * s2_[2] + i3 * s2_[3] + i4 * s2_[4]; \
              for (int32_t i5 = 0; i5 < n_[5]; i5++, a_ += s1_[5], b_ += s2_[5], o_++) {       \
                const T x = (IN1)[a_];                                                         \
                const T z = (IN2)[b_];                                                         \
                (OUT)[o_] = (EXPR);                                                            \
              }                                                                                \
            }                                                                                  \
  } while (0)

void ai_floor_div_f32(const ai_floor_div_f32_params *p, const float *input1, const float *input2,
                      float *output) {
  FLOOR_DIV_WALK(float, p, input1, input2, output, (float)floor_f64((double)x / (double)z));
}

void ai_floor_div_s32(const ai_floor_div_s32_params *p, const int32_t *input1,
                      const int32_t *input2, int32_t *output) {
  FLOOR_DIV_WALK(int32_t, p, input1, input2, output, floor_div_s32(x, z));
}
