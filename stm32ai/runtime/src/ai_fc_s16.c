/* FULLY_CONNECTED 16x8 (see ai_kernels_fc_s16.h). */
#include "ai_kernels_fc_s16.h"

#include <stddef.h>

#include "ai_qmath64.h"

void ai_fully_connected_s16(const ai_fully_connected_s16_params *p, const int16_t *input,
                            const int8_t *weights, const int64_t *bias, const int32_t *rmult,
                            const int32_t *rshift, int16_t *output) {
  const int32_t k = p->n_in;
  int32_t b, o, c;
  for (b = 0; b < p->batches; ++b) {
    const int16_t *x = input + (size_t)b * (size_t)k;
    for (o = 0; o < p->n_out; ++o) {
      const int8_t *w = weights + (size_t)o * (size_t)k;
      int64_t acc = 0;
      c = 0;
      while (c < k) { /* int32 partial sums of 256 products (each |x * w| <= 2^22) */
        const int32_t stop = k - c > 256 ? c + 256 : k;
        int32_t s = 0;
        for (; c < stop; ++c) {
          s += (int32_t)x[c] * (int32_t)w[c];
        }
        acc += s;
      }
      if (bias != NULL) {
        acc += bias[o];
      }
      *output++ = ai_clamp_s16(ai_requant64(acc, rmult[o], rshift[o]), p->act_min, p->act_max);
    }
  }
}
