/* CONV_2D 16x8 (see ai_kernels_conv_s16.h). */
#include "ai_kernels_conv_s16.h"

#include <stddef.h>

#include "ai_dot_s16.h"
#include "ai_qmath.h"
#include "ai_qmath64.h"

/* *acc0 += x . w0, *acc1 += x . w1 with weights in plain order (runs of in_c < 4, which
 * the packing leaves as they are); int32 partial sums of at most 256 products. */
static inline void dot2_plain(const int16_t *x, const int8_t *w0, const int8_t *w1, int32_t n,
                              int64_t *acc0, int64_t *acc1) {
  int32_t c = 0;
  while (c < n) {
    const int32_t stop = n - c > 256 ? c + 256 : n;
    int32_t s0 = 0, s1 = 0;
    for (; c < stop; ++c) {
      s0 += (int32_t)x[c] * (int32_t)w0[c];
      s1 += (int32_t)x[c] * (int32_t)w1[c];
    }
    *acc0 += s0;
    *acc1 += s1;
  }
}

/* The two requantisations TFLite uses (see acc32 in the header); the int32 one takes the
 * accumulator modulo 2^32, as TFLite's int32 accumulator would wrap. */
static inline int32_t rq(int32_t acc32, int64_t acc, int32_t m, int32_t s) {
  return acc32 ? ai_requant((int32_t)(uint32_t)(uint64_t)acc, m, s) : ai_requant64(acc, m, s);
}

void ai_conv2d_s16(const ai_conv2d_s16_params *p, const int16_t *input, const int8_t *weights,
                   const int64_t *bias, const int32_t *rmult, const int32_t *rshift,
                   int16_t *output) {
  const int32_t ic = p->in_c;
  const size_t w_oc = (size_t)p->k_h * (size_t)p->k_w * (size_t)ic;
  /* A kernel row whose taps are all in the image is one run of k_w * in_c elements in both
   * the input and the weights (dilation 1 along x) when the packing groups do not straddle
   * taps: in_c a multiple of 4 (packed) or below 4 (plain). */
  const int32_t rows_ok = p->dilation[1] == 1 && (ic % 4 == 0 || ic < 4);
  const int32_t row_n = p->k_w * ic;
  int32_t b, oy, ox, oc, ky, kx;
  for (b = 0; b < p->batches; ++b) {
    const int16_t *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)p->in_w * (size_t)ic;
    for (oy = 0; oy < p->out_h; ++oy) {
      const int32_t y0 = oy * p->stride[0] - p->pad[0];
      for (ox = 0; ox < p->out_w; ++ox) {
        const int32_t x0 = ox * p->stride[1] - p->pad[1];
        const int32_t full_row = rows_ok && x0 >= 0 && x0 + p->k_w <= p->in_w;
        for (oc = 0; oc < p->out_c; oc += 2) { /* two output channels per pass over the input */
          const int32_t pair = oc + 1 < p->out_c;
          const int8_t *w0 = weights + (size_t)oc * w_oc;
          const int8_t *w1 = pair ? w0 + w_oc : w0;
          int64_t a0 = bias != NULL ? bias[oc] : 0;
          int64_t a1 = (bias != NULL && pair) ? bias[oc + 1] : 0;
          for (ky = 0; ky < p->k_h; ++ky) {
            const int32_t iy = y0 + ky * p->dilation[0];
            if (iy < 0 || iy >= p->in_h) {
              continue;
            }
            if (full_row) {
              const int16_t *xr = in_b + ((size_t)iy * (size_t)p->in_w + (size_t)x0) * (size_t)ic;
              const size_t wr = (size_t)ky * (size_t)row_n;
              if (ic < 4) {
                dot2_plain(xr, w0 + wr, w1 + wr, row_n, &a0, &a1);
              } else {
                ai_dot2_s16(xr, w0 + wr, w1 + wr, row_n, &a0, &a1);
              }
              continue;
            }
            for (kx = 0; kx < p->k_w; ++kx) {
              const int32_t ix = x0 + kx * p->dilation[1];
              if (ix < 0 || ix >= p->in_w) {
                continue;
              }
              const size_t tap = ((size_t)ky * (size_t)p->k_w + (size_t)kx) * (size_t)ic;
              ai_dot2_s16(in_b + ((size_t)iy * (size_t)p->in_w + (size_t)ix) * (size_t)ic,
                          w0 + tap, w1 + tap, ic, &a0, &a1);
            }
          }
          *output++ = ai_clamp_s16(rq(p->acc32, a0, rmult[oc], rshift[oc]), p->act_min, p->act_max);
          if (pair) {
            *output++ = ai_clamp_s16(rq(p->acc32, a1, rmult[oc + 1], rshift[oc + 1]), p->act_min,
                                     p->act_max);
          }
        }
      }
    }
  }
}
