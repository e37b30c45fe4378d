/* SOFTMAX int16 (see ai_kernels_softmax_s16.h). */
#include "ai_kernels_softmax_s16.h"

#include <stddef.h>

#include "ai_qmath.h"

/* exp(x - max) in Q0.15 through the exp table. */
static inline int16_t exp_q15(const ai_softmax_s16_params *p, int32_t diff, const int16_t *lut) {
  const int32_t scaled = ai_requant(diff, p->input_multiplier, p->input_shift) + 32767;
  return ai_lut513_s16((int16_t)AI_CLAMP(scaled, -32768, 32767), lut);
}

/* Leading zeros of a positive int32 (the sum is at least exp(0) = 32767). */
static inline int32_t clz32(uint32_t v) {
  int32_t n = 0;
  while (n < 32 && (v & 0x80000000u) == 0u) {
    v <<= 1;
    ++n;
  }
  return n;
}

void ai_softmax_s16(const ai_softmax_s16_params *p, const int16_t *input, const int16_t *exp_lut,
                    const int16_t *recip_lut, int16_t *output) {
  const int32_t depth = p->depth;
  int32_t r, c;
  for (r = 0; r < p->rows; ++r) {
    const int16_t *x = input + (size_t)r * (size_t)depth;
    int16_t *y = output + (size_t)r * (size_t)depth;
    int32_t max_v = INT16_MIN, sum = 0;
    for (c = 0; c < depth; ++c) {
      max_v = x[c] > max_v ? x[c] : max_v;
    }
    for (c = 0; c < depth; ++c) {
      sum += exp_q15(p, x[c] - max_v, exp_lut);
    }
    /* 1 / sum: normalise the sum to [1, 2) in Q1.15... as TFLite, then 1/(1+x) table */
    const int32_t headroom_plus_one = clz32((uint32_t)sum);
    const int32_t shifted = (int32_t)((((int64_t)sum << (headroom_plus_one - 1)) + (1 << 13)) >> 14);
    const int32_t sym = shifted - ((1 << 15) + (1 << 16));
    const int16_t recip = ai_lut513_s16((int16_t)AI_CLAMP(sym, -32768, 32767), recip_lut);
    const int32_t right_shift = 31 - headroom_plus_one;
    const int64_t round = (int64_t)1 << (right_shift - 1);
    /* The output may alias the input (the planner's in-place mode): every input of the row
     * is read above, and below element c is read just before it is written. */
    for (c = 0; c < depth; ++c) {
      const int64_t e = exp_q15(p, x[c] - max_v, exp_lut);
      const int32_t v = (int32_t)((e * (int64_t)recip + round) >> right_shift);
      y[c] = (int16_t)AI_CLAMP(v, 0, 32767);
    }
  }
}
