/* ADD / SUB / MUL on int16 (see ai_kernels_binary_s16.h). */
#include "ai_kernels_binary_s16.h"

#include <stddef.h>

#include "ai_qmath.h"

#define LOOP6(P, BODY)                                                                        \
  do {                                                                                        \
    int32_t i0, i1, i2, i3, i4, i5;                                                           \
    for (i0 = 0; i0 < (P)->out_shape[0]; ++i0)                                                \
      for (i1 = 0; i1 < (P)->out_shape[1]; ++i1)                                              \
        for (i2 = 0; i2 < (P)->out_shape[2]; ++i2)                                            \
          for (i3 = 0; i3 < (P)->out_shape[3]; ++i3)                                          \
            for (i4 = 0; i4 < (P)->out_shape[4]; ++i4) {                                      \
              const int32_t o1 = i0 * (P)->in1_strides[0] + i1 * (P)->in1_strides[1] +          \
                                 i2 * (P)->in1_strides[2] + i3 * (P)->in1_strides[3] +          \
                                 i4 * (P)->in1_strides[4];                                      \
              const int32_t o2 = i0 * (P)->in2_strides[0] + i1 * (P)->in2_strides[1] +          \
                                 i2 * (P)->in2_strides[2] + i3 * (P)->in2_strides[3] +          \
                                 i4 * (P)->in2_strides[4];                                      \
              for (i5 = 0; i5 < (P)->out_shape[5]; ++i5) {                                    \
                const int32_t a = input1[o1 + i5 * (P)->in1_strides[5]];                      \
                const int32_t b = input2[o2 + i5 * (P)->in2_strides[5]];                      \
                BODY;                                                                         \
              }                                                                               \
            }                                                                                 \
  } while (0)

static inline int16_t add_one(const ai_add_s16_params *p, int32_t a, int32_t b) {
  /* (x + offset) << 15 fits int32 for int16 x and offset 0 (the generator checks offsets). */
  const int32_t s1 = ai_requant((int32_t)((uint32_t)(a + p->input1_offset) << p->left_shift),
                                p->input1_multiplier, p->input1_shift);
  const int32_t s2 = ai_requant((int32_t)((uint32_t)(b + p->input2_offset) << p->left_shift),
                                p->input2_multiplier, p->input2_shift);
  const int32_t raw = p->subtract ? s1 - s2 : s1 + s2;
  const int32_t v = ai_requant(raw, p->output_multiplier, p->output_shift) + p->output_offset;
  return (int16_t)AI_CLAMP(v, p->act_min, p->act_max);
}

void ai_add_s16(const ai_add_s16_params *p, const int16_t *input1, const int16_t *input2,
                int16_t *output) {
  LOOP6(p, *output++ = add_one(p, a, b));
}

void ai_sub_s16(const ai_sub_s16_params *p, const int16_t *input1, const int16_t *input2,
                int16_t *output) {
  LOOP6(p, *output++ = add_one(p, a, b));
}

void ai_mul_s16(const ai_mul_s16_params *p, const int16_t *input1, const int16_t *input2,
                int16_t *output) {
  LOOP6(p, {
    /* (a + off1) * (b + off2): offsets are 0 for 16x8, so |product| <= 2^30 */
    const int32_t prod = (a + p->input1_offset) * (b + p->input2_offset);
    const int32_t v = ai_requant(prod, p->output_multiplier, p->output_shift) + p->output_offset;
    *output++ = (int16_t)AI_CLAMP(v, p->act_min, p->act_max);
  });
}
