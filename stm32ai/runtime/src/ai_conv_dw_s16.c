/* DEPTHWISE_CONV_2D 16x8 (see ai_kernels_conv_dw_s16.h). */
#include "ai_kernels_conv_dw_s16.h"

#include <stddef.h>

#include "ai_qmath64.h"

int32_t ai_depthwise_conv2d_s16_scratch_size(const ai_depthwise_conv2d_s16_params *p) {
  return p->out_c * (int32_t)sizeof(int32_t);
}

/* Per output pixel: int32 sums of all output channels (scratch), tap by tap, so the inner
 * loop walks the channels contiguously (NHWC). |x * w| <= 2^22 and at most
 * AI_DW_S16_MAX_TAPS (511) taps keep each sum inside int32; bias and requantisation in int64. */
void ai_depthwise_conv2d_s16(const ai_depthwise_conv2d_s16_params *p, const int16_t *input,
                             const int8_t *weights, const int64_t *bias, const int32_t *rmult,
                             const int32_t *rshift, int16_t *output, void *scratch) {
  int32_t *acc = (int32_t *)scratch;
  const int32_t ic_n = p->in_c, oc_n = p->out_c, dm = p->depth_mult;
  int32_t b, oy, ox, ky, kx, ic, m, oc;
  for (b = 0; b < p->batches; ++b) {
    const int16_t *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)p->in_w * (size_t)ic_n;
    for (oy = 0; oy < p->out_h; ++oy) {
      const int32_t y0 = oy * p->stride[0] - p->pad[0];
      for (ox = 0; ox < p->out_w; ++ox) {
        const int32_t x0 = ox * p->stride[1] - p->pad[1];
        for (oc = 0; oc < oc_n; ++oc) {
          acc[oc] = 0;
        }
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
            const int16_t *x = in_b + ((size_t)iy * (size_t)p->in_w + (size_t)ix) * (size_t)ic_n;
            const int8_t *w = weights + ((size_t)ky * (size_t)p->k_w + (size_t)kx) * (size_t)oc_n;
            if (dm == 1) {
              for (oc = 0; oc < oc_n; ++oc) {
                acc[oc] += (int32_t)x[oc] * (int32_t)w[oc];
              }
            } else {
              for (ic = 0, oc = 0; ic < ic_n; ++ic) {
                for (m = 0; m < dm; ++m, ++oc) {
                  acc[oc] += (int32_t)x[ic] * (int32_t)w[oc];
                }
              }
            }
          }
        }
        for (oc = 0; oc < oc_n; ++oc) {
          const int64_t a = (int64_t)acc[oc] + (bias != NULL ? bias[oc] : 0);
          *output++ = ai_clamp_s16(ai_requant64(a, rmult[oc], rshift[oc]), p->act_min, p->act_max);
        }
      }
    }
  }
}
