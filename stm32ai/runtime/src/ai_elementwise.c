/* ADD, int8 and float32, same-size and broadcasting. See docs/kernels_fc.md.
 *
 * int8 is TFLite Micro's AddFunc:
 *   a = (x1 + input1_offset) << left_shift, b = (x2 + input2_offset) << left_shift
 *   a' = requant(a, m1, s1), b' = requant(b, m2, s2)          (shifts <= 0)
 *   y  = clamp(requant(a' + b', mo, so) + output_offset, act_min, act_max)
 * with requant = TFLite's double rounding (rounding doubling high multiply, then a
 * rounding right shift). The operands here are small (|a|, |a' + b'| < 2^29), so the
 * doubling high multiply is computed as (a * m + 2^30) >> 31, which equals
 * ai_srdhm exactly for every operand except a == m == INT32_MIN (impossible here: m > 0).
 * The output may alias either input: element i is written after both inputs' element i
 * are read.
 */
#include <string.h>

#include "ai_kernels_fc.h"
#include "ai_qmath.h"

/* floor((a * b + 2^30) / 2^31): TFLite's SaturatingRoundingDoublingHighMul for b > 0.
 * (Its nudge-and-truncate form rounds half up in both signs, which is this floor.) */
static inline int32_t srdhm_pos(int32_t a, int32_t b) {
  return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
}

/* x * m * 2^shift for shift <= 0, double rounding. */
static inline int32_t requant_le0(int32_t x, int32_t m, int32_t shift) {
  return ai_rdbypot(srdhm_pos(x, m), -shift);
}

#define ADD_S8_BODY(P, x1, x2, out)                                                      \
  do {                                                                                   \
    const int32_t a_ = requant_le0(((x1) + (P)->input1_offset) * (1 << (P)->left_shift),  \
                                   (P)->input1_multiplier, (P)->input1_shift);           \
    const int32_t b_ = requant_le0(((x2) + (P)->input2_offset) * (1 << (P)->left_shift),  \
                                   (P)->input2_multiplier, (P)->input2_shift);           \
    int32_t v_ = requant_le0(a_ + b_, (P)->output_multiplier, (P)->output_shift) +       \
                 (P)->output_offset;                                                     \
    v_ = v_ < (P)->act_min ? (P)->act_min : v_;                                          \
    v_ = v_ > (P)->act_max ? (P)->act_max : v_;                                          \
    (out) = (int8_t)v_;                                                                  \
  } while (0)

void ai_add_s8(const ai_add_s8_params *p, const int8_t *input1, const int8_t *input2,
               int8_t *output) {
  const int32_t n = p->size;
  for (int32_t i = 0; i < n; i++) {
    ADD_S8_BODY(p, (int32_t)input1[i], (int32_t)input2[i], output[i]);
  }
}

static inline float clampf(float v, float lo, float hi) {
  v = v < lo ? lo : v; /* TFLite: min(max(v, lo), hi) */
  return v > hi ? hi : v;
}

void ai_add_f32(const ai_add_f32_params *p, const float *input1, const float *input2,
                float *output) {
  const int32_t n = p->size;
  const float lo = p->act_min, hi = p->act_max;
  for (int32_t i = 0; i < n; i++) {
    output[i] = clampf(input1[i] + input2[i], lo, hi);
  }
}

/* Broadcasting: 6 nested dimensions, innermost contiguous in the output. The innermost
 * loop is a plain strided pass, so typical cases (per-channel vector, scalar) stay fast. */
#define BCAST_LOOPS(P, BODY)                                                                \
  do {                                                                                      \
    const int32_t *sh_ = (P)->out_shape, *s1_ = (P)->in1_strides, *s2_ = (P)->in2_strides; \
    int32_t o_ = 0;                                                                         \
    for (int32_t d0 = 0; d0 < sh_[0]; d0++) {                                               \
      for (int32_t d1 = 0; d1 < sh_[1]; d1++) {                                             \
        for (int32_t d2 = 0; d2 < sh_[2]; d2++) {                                           \
          for (int32_t d3 = 0; d3 < sh_[3]; d3++) {                                         \
            for (int32_t d4 = 0; d4 < sh_[4]; d4++) {                                       \
              int32_t i1_ = d0 * s1_[0] + d1 * s1_[1] + d2 * s1_[2] + d3 * s1_[3] + d4 * s1_[4]; \
              int32_t i2_ = d0 * s2_[0] + d1 * s2_[1] + d2 * s2_[2] + d3 * s2_[3] + d4 * s2_[4]; \
              for (int32_t d5 = 0; d5 < sh_[5]; d5++) {                                     \
                BODY;                                                                       \
                i1_ += s1_[5];                                                              \
                i2_ += s2_[5];                                                              \
                o_++;                                                                       \
              }                                                                             \
            }                                                                               \
          }                                                                                 \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
  } while (0)

void ai_add_bcast_s8(const ai_add_bcast_s8_params *p, const int8_t *input1,
                     const int8_t *input2, int8_t *output) {
  BCAST_LOOPS(p, ADD_S8_BODY(p, (int32_t)input1[i1_], (int32_t)input2[i2_], output[o_]));
}

void ai_add_bcast_f32(const ai_add_bcast_f32_params *p, const float *input1,
                      const float *input2, float *output) {
  const float lo = p->act_min, hi = p->act_max;
  BCAST_LOOPS(p, output[o_] = clampf(input1[i1_] + input2[i2_], lo, hi));
}

/* RESHAPE that cannot alias its input: a byte copy (memmove: the planner may overlap
 * the buffers, a copy onto itself is a no-op). */
void ai_copy(const ai_copy_params *p, const void *input, void *output) {
  if (input != output) {
    memmove(output, input, (size_t)p->size);
  }
}
