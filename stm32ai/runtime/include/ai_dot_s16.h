/* int16 x int8 dot products for the 16x8 kernels (conv2d_s16, fully_connected_s16).
 * Weights are packed per group of 4 along the summed axis as (w0, w2, w1, w3) (the
 * generator's pack_weights_s16), so SXTB16 yields the halfword pairs (w0, w1), (w2, w3)
 * that match two 32-bit loads of the int16 inputs (SMLAD on Cortex-M4; plain C on the host,
 * same arithmetic); the last n % 4 weights stay in order. Partial sums stay in int32 for at
 * most 256 products (each |x * w| <= 2^22, so |sum| <= 2^30), then go to int64. */
#ifndef AI_DOT_S16_H
#define AI_DOT_S16_H

#include <stdint.h>
#include <string.h>

#include "ai_simd.h"

/* *acc0 += x . w0, *acc1 += x . w1 over n elements (w1 may equal w0). */
static inline void ai_dot2_s16(const int16_t *x, const int8_t *w0, const int8_t *w1, int32_t n,
                               int64_t *acc0, int64_t *acc1) {
  int32_t c = 0;
  while (n - c >= 4) {
    const int32_t groups = (n - c) / 4 > 64 ? 64 : (n - c) / 4;
    const int32_t stop = c + 4 * groups;
    int32_t s0 = 0, s1 = 0;
    for (; c < stop; c += 4) {
      uint32_t x01, x23;
      const uint32_t v0 = rd32(w0 + c), v1 = rd32(w1 + c);
      memcpy(&x01, x + c, sizeof x01);
      memcpy(&x23, x + c + 2, sizeof x23);
      s0 = smlad(x01, sxtb16(v0), s0);
      s0 = smlad(x23, sxtb16_r8(v0), s0);
      s1 = smlad(x01, sxtb16(v1), s1);
      s1 = smlad(x23, sxtb16_r8(v1), s1);
    }
    *acc0 += s0;
    *acc1 += s1;
  }
  for (; c < n; ++c) {
    *acc0 += (int32_t)x[c] * (int32_t)w0[c];
    *acc1 += (int32_t)x[c] * (int32_t)w1[c];
  }
}

#endif /* AI_DOT_S16_H */
