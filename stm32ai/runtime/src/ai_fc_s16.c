/* FULLY_CONNECTED 16x8 (see ai_kernels_fc_s16.h). */
#include "ai_kernels_fc_s16.h"

#include <stddef.h>

#include "ai_dot_s16.h"
#include "ai_qmath.h"
#include "ai_qmath64.h"

/* The two requantisations TFLite uses (see acc32 in the header); the int32 one takes the
 * accumulator modulo 2^32, as TFLite's int32 accumulator would wrap. */
static inline int32_t rq(int32_t acc32, int64_t acc, int32_t m, int32_t s) {
  return acc32 ? ai_requant((int32_t)(uint32_t)(uint64_t)acc, m, s) : ai_requant64(acc, m, s);
}

void ai_fully_connected_s16(const ai_fully_connected_s16_params *p, const int16_t *input,
                            const int8_t *weights, const int64_t *bias, const int32_t *rmult,
                            const int32_t *rshift, int16_t *output) {
  const int32_t k = p->n_in;
  int32_t b, o;
  for (b = 0; b < p->batches; ++b) {
    const int16_t *x = input + (size_t)b * (size_t)k;
    for (o = 0; o < p->n_out; o += 2) { /* two rows per pass over the input */
      const int32_t pair = o + 1 < p->n_out;
      const int8_t *w0 = weights + (size_t)o * (size_t)k;
      int64_t a0 = bias != NULL ? bias[o] : 0;
      int64_t a1 = (bias != NULL && pair) ? bias[o + 1] : 0;
      ai_dot2_s16(x, w0, pair ? w0 + k : w0, k, &a0, &a1);
      *output++ = ai_clamp_s16(rq(p->acc32, a0, rmult[o], rshift[o]), p->act_min, p->act_max);
      if (pair) {
        *output++ = ai_clamp_s16(rq(p->acc32, a1, rmult[o + 1], rshift[o + 1]), p->act_min,
                                 p->act_max);
      }
    }
  }
}
