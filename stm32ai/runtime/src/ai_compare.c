/* Comparison, logical and SELECT_V2 kernels (ai_kernels_compare.h, docs/kernels_compare.md). */
#include "ai_ew_walk.h"
#include "ai_kernels_compare.h"
#include "ai_qmath.h"

/* TFLite's rescaling of a quantised comparison operand: ((x + offset) << left_shift), times
 * the Q31 multiplier, rounded right shift (MultiplyByQuantizedMultiplierSmallerThanOneExp).
 * |x + offset| <= 255 << 8 fits int32. */
static inline int32_t cmp_scale(int32_t v, int32_t left_shift, int32_t multiplier, int32_t shift) {
  return ai_rdbypot(ai_srdhm((int32_t)((uint32_t)v << left_shift), multiplier), -shift);
}

#define CMP_Q_LOCALS                                                                           \
  const int32_t ls = p->left_shift, o1 = p->input1_offset, m1 = p->input1_multiplier;          \
  const int32_t h1 = p->input1_shift, o2 = p->input2_offset, m2 = p->input2_multiplier;        \
  const int32_t h2 = p->input2_shift;
#define CMP_Q(OPR) (cmp_scale(x + o1, ls, m1, h1) OPR cmp_scale(z + o2, ls, m2, h2))

#define CMP_ALL(OP, OPR)                                                                       \
  AI_EW_BINARY(OP##_f32, float, uint8_t, , x OPR z)                                            \
  AI_EW_BINARY(OP##_s32, int32_t, uint8_t, , x OPR z)                                          \
  AI_EW_BINARY(OP##_s64, int64_t, uint8_t, , x OPR z)                                          \
  AI_EW_BINARY(OP##_b, uint8_t, uint8_t, , (x != 0) OPR (z != 0))                              \
  AI_EW_BINARY(OP##_s8, int8_t, uint8_t, CMP_Q_LOCALS, CMP_Q(OPR))

CMP_ALL(equal, ==)
CMP_ALL(not_equal, !=)
CMP_ALL(greater, >)
CMP_ALL(greater_equal, >=)
CMP_ALL(less, <)
CMP_ALL(less_equal, <=)

AI_EW_BINARY(logical_and, uint8_t, uint8_t, , (x != 0) && (z != 0))
AI_EW_BINARY(logical_or, uint8_t, uint8_t, , (x != 0) || (z != 0))

void ai_logical_not(const ai_logical_not_params *p, const uint8_t *input, uint8_t *output) {
  for (int32_t i = 0; i < p->size; i++) {
    output[i] = input[i] == 0;
  }
}

#define SELECT(SUF, T)                                                                         \
  static void select_##SUF##_row(const void *pv, const void *const *in, const int32_t *s,     \
                                 void *yv, int32_t n) {                                      \
    (void)pv;                                                                                \
    const uint8_t *c = (const uint8_t *)in[0];                                               \
    const T *a = (const T *)in[1];                                                           \
    const T *b = (const T *)in[2];                                                           \
    T *y = (T *)yv;                                                                          \
    for (int32_t i = 0; i < n; i++, c += s[0], a += s[1], b += s[2]) {                       \
      y[i] = *c ? *a : *b;                                                                   \
    }                                                                                        \
  }                                                                                          \
  void ai_select_v2_##SUF(const ai_select_v2_##SUF##_params *p, const uint8_t *cond,         \
                          const T *x, const T *y, T *output) {                               \
    const int32_t *st[3] = {p->cond_strides, p->x_strides, p->y_strides};                    \
    const size_t bytes[3] = {1, sizeof(T), sizeof(T)};                                       \
    const void *in[3] = {cond, x, y};                                                        \
    ai_ew_walk(p->out_shape, 3, st, bytes, sizeof(T), p, in, output, select_##SUF##_row);    \
  }

SELECT(b1, uint8_t)
SELECT(b2, uint16_t)
SELECT(b4, uint32_t)
SELECT(b8, uint64_t)
