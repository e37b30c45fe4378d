/* float32 CONV_2D and DEPTHWISE_CONV_2D kernels (see docs/kernels_conv.md).
 *
 * Each output sums its in-image taps in TFLite's reference order (ky, kx, ic), starting
 * from 0, then adds the bias and clamps: the same operations in the same order as the
 * reference kernels, so results match them to rounding of fused multiply-adds at most.
 * Taps outside the image are skipped (never multiplied by 0: inf/NaN weights stay exact).
 */
#include "ai_kernels_conv.h"

static inline float clampf(float v, float lo, float hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

/* The filter taps [*k0, *k1) along one axis whose input index o0 + k * dil lies in [0, size). */
static inline void tap_span(int32_t o0, int32_t k_n, int32_t dil, int32_t size, int32_t *k0,
                            int32_t *k1) {
  int32_t lo = 0, hi = k_n;
  while (lo < hi && o0 + lo * dil < 0) {
    ++lo;
  }
  while (hi > lo && o0 + (hi - 1) * dil >= size) {
    --hi;
  }
  *k0 = lo;
  *k1 = hi;
}

void ai_conv2d_f32(const ai_conv2d_f32_params *p, const float *input, const float *weights,
                   const float *bias, float *output) {
  const int32_t cin = p->in_c, cout = p->out_c;
  const int32_t kstride = p->k_h * p->k_w * cin; /* one output channel's weights */
  for (int32_t b = 0; b < p->batches; ++b) {
    const float *in = input + (int32_t)b * p->in_h * p->in_w * cin;
    float *out = output + (int32_t)b * p->out_h * p->out_w * cout;
    for (int32_t oy = 0; oy < p->out_h; ++oy) {
      const int32_t iy0 = oy * p->stride[0] - p->pad[0];
      int32_t ky0, ky1; /* rows of the filter that land inside the image */
      tap_span(iy0, p->k_h, p->dilation[0], p->in_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < p->out_w; ++ox, out += cout) {
        const int32_t ix0 = ox * p->stride[1] - p->pad[1];
        int32_t kx0, kx1;
        tap_span(ix0, p->k_w, p->dilation[1], p->in_w, &kx0, &kx1);
        int32_t oc = 0;
        /* two output channels at a time: each keeps its own accumulation order */
        for (; oc + 1 < cout; oc += 2) {
          const float *w0 = weights + oc * kstride;
          const float *w1 = w0 + kstride;
          float t0 = 0.0f, t1 = 0.0f;
          for (int32_t ky = ky0; ky < ky1; ++ky) {
            const float *row = in + (iy0 + ky * p->dilation[0]) * p->in_w * cin;
            for (int32_t kx = kx0; kx < kx1; ++kx) {
              const float *x = row + (ix0 + kx * p->dilation[1]) * cin;
              const int32_t wo = (ky * p->k_w + kx) * cin;
              const float *a = w0 + wo, *c = w1 + wo;
              for (int32_t ic = 0; ic < cin; ++ic) {
                t0 += x[ic] * a[ic];
                t1 += x[ic] * c[ic];
              }
            }
          }
          out[oc] = clampf(t0 + bias[oc], p->act_min, p->act_max);
          out[oc + 1] = clampf(t1 + bias[oc + 1], p->act_min, p->act_max);
        }
        for (; oc < cout; ++oc) {
          const float *w0 = weights + oc * kstride;
          float t0 = 0.0f;
          for (int32_t ky = ky0; ky < ky1; ++ky) {
            const float *row = in + (iy0 + ky * p->dilation[0]) * p->in_w * cin;
            for (int32_t kx = kx0; kx < kx1; ++kx) {
              const float *x = row + (ix0 + kx * p->dilation[1]) * cin;
              const float *a = w0 + (ky * p->k_w + kx) * cin;
              for (int32_t ic = 0; ic < cin; ++ic) {
                t0 += x[ic] * a[ic];
              }
            }
          }
          out[oc] = clampf(t0 + bias[oc], p->act_min, p->act_max);
        }
      }
    }
  }
}

void ai_depthwise_conv2d_f32(const ai_depthwise_conv2d_f32_params *p, const float *input,
                             const float *weights, const float *bias, float *output) {
  const int32_t C = p->in_c, M = p->depth_mult, OC = p->out_c;
  for (int32_t b = 0; b < p->batches; ++b) {
    const float *in = input + (int32_t)b * p->in_h * p->in_w * C;
    float *out = output + (int32_t)b * p->out_h * p->out_w * OC;
    for (int32_t oy = 0; oy < p->out_h; ++oy) {
      const int32_t iy0 = oy * p->stride[0] - p->pad[0];
      for (int32_t ox = 0; ox < p->out_w; ++ox, out += OC) {
        const int32_t ix0 = ox * p->stride[1] - p->pad[1];
        for (int32_t oc = 0; oc < OC; ++oc) {
          out[oc] = 0.0f;
        }
        /* taps outer, channels inner (contiguous); each channel still sums its taps
         * in (ky, kx) order starting from 0 */
        int32_t ky0, ky1, kx0, kx1;
        tap_span(iy0, p->k_h, p->dilation[0], p->in_h, &ky0, &ky1);
        tap_span(ix0, p->k_w, p->dilation[1], p->in_w, &kx0, &kx1);
        for (int32_t ky = ky0; ky < ky1; ++ky) {
          const int32_t iy = iy0 + ky * p->dilation[0];
          for (int32_t kx = kx0; kx < kx1; ++kx) {
            const float *x = in + (iy * p->in_w + ix0 + kx * p->dilation[1]) * C;
            const float *w = weights + (ky * p->k_w + kx) * OC;
            if (M == 1) {
              for (int32_t c = 0; c < C; ++c) {
                out[c] += x[c] * w[c];
              }
            } else {
              for (int32_t ic = 0; ic < C; ++ic) {
                for (int32_t m = 0; m < M; ++m) {
                  out[ic * M + m] += x[ic] * w[ic * M + m];
                }
              }
            }
          }
        }
        for (int32_t oc = 0; oc < OC; ++oc) {
          out[oc] = clampf(out[oc] + bias[oc], p->act_min, p->act_max);
        }
      }
    }
  }
}
