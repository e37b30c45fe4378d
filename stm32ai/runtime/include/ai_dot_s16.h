/* int16 x int8 dot products for the 16x8 kernels (conv2d_s16, fully_connected_s16,
 * transpose_conv_s16).
 * Weights are packed per group of 4 along the summed axis as (w0, w2, w1, w3) (the
 * generator's pack_weights_s16), so SXTB16 yields the halfword pairs (w0, w1), (w2, w3)
 * that match two 32-bit loads of the int16 inputs (SMLAD on Cortex-M4; plain C on the host,
 * same arithmetic); the last n % 4 weights stay in order. Partial sums stay in int32 for at
 * most 256 products (each |x * w| <= 2^22, so |sum| <= 2^30), then go to int64. */
#ifndef AI_DOT_S16_H
#define AI_DOT_S16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ai_qmath.h"
#include "ai_qmath64.h"
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

/* TFLite's two requantisations of the 16x8 kernels (acc32 in their parameters): the int32
 * one takes the accumulator modulo 2^32, as TFLite's int32 accumulator would wrap. */
static inline int32_t ai_requant_acc_s16(int32_t acc32, int64_t acc, int32_t m, int32_t s) {
  return acc32 ? ai_requant((int32_t)(uint32_t)(uint64_t)acc, m, s) : ai_requant64(acc, m, s);
}

/* out[o] = clamp(requant(bias[o] + x . w[o]), act_min, act_max) for the n_out weight rows of
 * k packed weights each, two rows per pass over x (bias may be NULL): the output channels of
 * one CONV_2D pixel or one FULLY_CONNECTED batch. Returns output + n_out. */
static inline int16_t *ai_rows_s16(const int16_t *x, const int8_t *w, int32_t k, int32_t n_out,
                                   const int64_t *bias, const int32_t *rmult,
                                   const int32_t *rshift, int32_t acc32, int32_t act_min,
                                   int32_t act_max, int16_t *output) {
  for (int32_t o = 0; o < n_out; o += 2) {
    const int32_t pair = o + 1 < n_out;
    const int8_t *w0 = w + (size_t)o * (size_t)k;
    int64_t a0 = bias != NULL ? bias[o] : 0;
    int64_t a1 = (bias != NULL && pair) ? bias[o + 1] : 0;
    ai_dot2_s16(x, w0, pair ? w0 + k : w0, k, &a0, &a1);
    *output++ = ai_clamp_s16(ai_requant_acc_s16(acc32, a0, rmult[o], rshift[o]), act_min, act_max);
    if (pair) {
      *output++ = ai_clamp_s16(ai_requant_acc_s16(acc32, a1, rmult[o + 1], rshift[o + 1]),
                               act_min, act_max);
    }
  }
  return output;
}

#endif /* AI_DOT_S16_H */
