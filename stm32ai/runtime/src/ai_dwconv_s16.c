/* DEPTHWISE_CONV_2D 16x8 (see ai_kernels_dwconv_s16.h). */
#include "ai_kernels_dwconv_s16.h"

#include <stddef.h>

#include "ai_qmath64.h"

void ai_depthwise_conv2d_s16(const ai_depthwise_conv2d_s16_params *p, const int16_t *input,
                             const int8_t *weights, const int64_t *bias, const int32_t *rmult,
                             const int32_t *rshift, int16_t *output) {
  const int32_t ic_n = p->in_c, oc_n = p->out_c, dm = p->depth_mult;
  int32_t b, oy, ox, ic, m, ky, kx;
  for (b = 0; b < p->batches; ++b) {
    const int16_t *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)p->in_w * (size_t)ic_n;
    for (oy = 0; oy < p->out_h; ++oy) {
      const int32_t y0 = oy * p->stride[0] - p->pad[0];
      for (ox = 0; ox < p->out_w; ++ox) {
        const int32_t x0 = ox * p->stride[1] - p->pad[1];
        for (ic = 0; ic < ic_n; ++ic) {
          for (m = 0; m < dm; ++m) {
            const int32_t oc = ic * dm + m;
            /* |x * w| <= 2^22: an int32 partial sum is exact for up to 256 taps, so sum
             * per kernel row (k_w <= 256 is checked by the generator) into int64. */
            int64_t acc = 0;
            for (ky = 0; ky < p->k_h; ++ky) {
              const int32_t iy = y0 + ky * p->dilation[0];
              if (iy < 0 || iy >= p->in_h) {
                continue;
              }
              int32_t s = 0;
              for (kx = 0; kx < p->k_w; ++kx) {
                const int32_t ix = x0 + kx * p->dilation[1];
                if (ix < 0 || ix >= p->in_w) {
                  continue;
                }
                s += (int32_t)in_b[((size_t)iy * (size_t)p->in_w + (size_t)ix) * (size_t)ic_n +
                                   (size_t)ic] *
                     (int32_t)weights[((size_t)ky * (size_t)p->k_w + (size_t)kx) * (size_t)oc_n +
                                      (size_t)oc];
              }
              acc += s;
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
}
