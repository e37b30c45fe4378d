/* CONV_2D 16x8 (see ai_kernels_conv_s16.h). */
#include "ai_kernels_conv_s16.h"

#include <stddef.h>

#include "ai_qmath64.h"

/* sum x[c] * w[c] over n channels. Partial sums stay in int32 for 256 products
 * (|x * w| <= 2^22, so at most 2^30), then go to the int64 accumulator. */
static inline int64_t dot_s16(const int16_t *x, const int8_t *w, int32_t n) {
  int64_t acc = 0;
  int32_t c = 0;
  while (c < n) {
    const int32_t stop = n - c > 256 ? c + 256 : n;
    int32_t s = 0;
    for (; c < stop; ++c) {
      s += (int32_t)x[c] * (int32_t)w[c];
    }
    acc += s;
  }
  return acc;
}

void ai_conv2d_s16(const ai_conv2d_s16_params *p, const int16_t *input, const int8_t *weights,
                   const int64_t *bias, const int32_t *rmult, const int32_t *rshift,
                   int16_t *output) {
  const int32_t ic = p->in_c;
  const size_t w_oc = (size_t)p->k_h * (size_t)p->k_w * (size_t)ic;
  int32_t b, oy, ox, oc, ky, kx;
  for (b = 0; b < p->batches; ++b) {
    const int16_t *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)p->in_w * (size_t)ic;
    for (oy = 0; oy < p->out_h; ++oy) {
      const int32_t y0 = oy * p->stride[0] - p->pad[0];
      for (ox = 0; ox < p->out_w; ++ox) {
        const int32_t x0 = ox * p->stride[1] - p->pad[1];
        for (oc = 0; oc < p->out_c; ++oc) {
          const int8_t *w_o = weights + (size_t)oc * w_oc;
          int64_t acc = 0;
          for (ky = 0; ky < p->k_h; ++ky) {
            const int32_t iy = y0 + ky * p->dilation[0];
            if (iy < 0 || iy >= p->in_h) {
              continue;
            }
            for (kx = 0; kx < p->k_w; ++kx) {
              const int32_t ix = x0 + kx * p->dilation[1];
              if (ix < 0 || ix >= p->in_w) {
                continue;
              }
              acc += dot_s16(in_b + ((size_t)iy * (size_t)p->in_w + (size_t)ix) * (size_t)ic,
                             w_o + ((size_t)ky * (size_t)p->k_w + (size_t)kx) * (size_t)ic, ic);
            }
          }
          if (bias != NULL) {
            acc += bias[oc];
          }
          *output++ = ai_clamp_s16(ai_requant64(acc, rmult[oc], rshift[oc]), p->act_min,
                                   p->act_max);
        }
      }
    }
  }
}
