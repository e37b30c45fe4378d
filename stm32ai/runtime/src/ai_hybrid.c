/* Hybrid (dynamic-range) kernels: float activations, int8 weights (ai_kernels_hybrid.h,
 * docs/kernels_conv.md "Hybrid").
 *
 * Results are identical to LiteRT's reference hybrid kernels only if every float operation
 * is rounded where theirs is: a fused multiply-add (x * inv + offset, acc * s + bias)
 * would round once instead of twice and can move an input by one quantisation step. So
 * contraction is switched off for this file (GCC's default for GNU C is to contract; ISO
 * C mode already does not).
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <string.h>

#include "ai_kernels_hybrid.h"
#include "ai_qmath.h"

/* std::round for float (half away from zero) on |v| < 2^23, without libm. The callers
 * clamp to +-1024 first, so the int conversion is always defined. */
static inline float round_half_away(float v) {
  const float t = (float)(int32_t)v; /* truncation toward zero */
  const float d = v - t;             /* exact: |v| < 2^23 */
  if (d >= 0.5f) {
    return t + 1.0f;
  }
  if (d <= -0.5f) {
    return t - 1.0f;
  }
  return t;
}

/* std::round for double on |v| < 2^31. */
static inline double round_half_away_d(double v) {
  const double t = (double)(int32_t)v;
  const double d = v - t;
  if (d >= 0.5) {
    return t + 1.0;
  }
  if (d <= -0.5) {
    return t - 1.0;
  }
  return t;
}

static inline float clampf(float v, float lo, float hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

static inline int32_t q_clamp(float r, int32_t lo, int32_t hi) {
  /* clamp before the conversion (any |r| > 1024 clamps the same way afterwards) */
  r = r < -1024.0f ? -1024.0f : (r > 1024.0f ? 1024.0f : r);
  int32_t v = (int32_t)round_half_away(r);
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

static void min_max(const float *x, int32_t n, float *lo, float *hi) {
  float l = x[0], h = x[0];
  for (int32_t i = 1; i < n; ++i) {
    l = x[i] < l ? x[i] : l;
    h = x[i] > h ? x[i] : h;
  }
  *lo = l;
  *hi = h;
}

float ai_hybrid_quantize_sym(const float *x, int32_t n, int8_t *q) {
  float lo, hi;
  min_max(x, n, &lo, &hi);
  const float alo = lo < 0.0f ? -lo : lo;
  const float ahi = hi < 0.0f ? -hi : hi;
  const float range = alo < ahi ? ahi : alo; /* std::max(|min|, |max|) */
  if (range == 0.0f) {
    memset(q, 0, (size_t)n);
    return 1.0f;
  }
  const float inv = 127.0f / range;
  for (int32_t i = 0; i < n; ++i) {
    q[i] = (int8_t)q_clamp(x[i] * inv, -127, 127);
  }
  return range / 127.0f;
}

float ai_hybrid_quantize_asym(const float *x, int32_t n, int8_t *q, int32_t *offset) {
  float lo, hi;
  min_max(x, n, &lo, &hi);
  const float fmin0 = lo < 0.0f ? lo : 0.0f;
  const float fmax0 = hi > 0.0f ? hi : 0.0f;
  if (fmin0 == fmax0) {
    memset(q, 0, (size_t)n);
    *offset = 0;
    return 1.0f;
  }
  /* The range is a float subtraction (LiteRT keeps rmin/rmax as floats; measured: a double
   * subtraction changes the scale by one ulp on some inputs); the rest is double. */
  const double rmin = (double)fmin0, rmax = (double)fmax0;
  const double scale = (double)(fmax0 - fmin0) / 255.0;
  const double zp_from_min = -128.0 - rmin / scale;
  const double zp_from_max = 127.0 - rmax / scale;
  const double err_min = 128.0 + (rmin / scale < 0.0 ? -(rmin / scale) : rmin / scale);
  const double err_max = 127.0 + (rmax / scale < 0.0 ? -(rmax / scale) : rmax / scale);
  const double zp = err_min < err_max ? zp_from_min : zp_from_max;
  int32_t off;
  if (zp <= -128.0) {
    off = -128;
  } else if (zp >= 127.0) {
    off = 127;
  } else {
    off = (int32_t)round_half_away_d(zp);
  }
  const float s = (float)scale;
  const float inv = (float)(1.0 / (double)s);
  const float foff = (float)off;
  for (int32_t i = 0; i < n; ++i) {
    const float t = x[i] * inv;
    q[i] = (int8_t)q_clamp(foff + t, -128, 127);
  }
  *offset = off;
  return s;
}

/* A hybrid kernel's input quantisation: asymmetric (zero point in *offset) or symmetric
 * (*offset = 0). Returns the scale. */
static float quantize_input(const float *x, int32_t n, int8_t *q, int32_t asym, int32_t *offset) {
  *offset = 0;
  return asym ? ai_hybrid_quantize_asym(x, n, q, offset) : ai_hybrid_quantize_sym(x, n, q);
}

/* ---- CONV_2D -------------------------------------------------------------------------- */

static inline int32_t align4(int32_t n) { return (n + 3) & ~3; }

int32_t ai_conv2d_hybrid_scratch_size(const ai_conv2d_hybrid_params *p) {
  return align4(p->in_h * p->in_w * p->in_c) + align4(p->k_h * p->k_w * p->in_c);
}

static inline int32_t dot_s8(const int8_t *a, const int8_t *b, int32_t k) {
  int32_t acc = 0;
  for (int32_t i = 0; i < k; ++i) {
    acc = ai_wmla(acc, a[i], b[i]);
  }
  return acc;
}

void ai_conv2d_hybrid(const ai_conv2d_hybrid_params *p, const float *input, const int8_t *weights,
                      const float *w_scale, const int32_t *w_sum, const float *bias, float *output,
                      void *scratch) {
  const int32_t cin = p->in_c, cout = p->out_c;
  const int32_t k = p->k_h * p->k_w * cin;
  const int32_t in_size = p->in_h * p->in_w * cin;
  int8_t *xq = (int8_t *)scratch;
  int8_t *col = xq + align4(in_size);
  /* 1x1 filters never touch padding: the column is the input pixel itself */
  const int direct = p->k_h == 1 && p->k_w == 1;
  for (int32_t b = 0; b < p->batches; ++b) {
    const float *in = input + (int32_t)b * in_size;
    float *out = output + (int32_t)b * p->out_h * p->out_w * cout;
    int32_t offset;
    const float in_scale = quantize_input(in, in_size, xq, p->per_channel, &offset);
    const float scale0 = in_scale * w_scale[0]; /* per-tensor: one product per batch */
    const int8_t pad = (int8_t)offset;          /* a padded tap reads the zero point */
    for (int32_t oy = 0; oy < p->out_h; ++oy) {
      const int32_t iy0 = oy * p->stride[0] - p->pad[0];
      for (int32_t ox = 0; ox < p->out_w; ++ox, out += cout) {
        const int32_t ix0 = ox * p->stride[1] - p->pad[1];
        const int8_t *c;
        if (direct) {
          c = xq + (iy0 * p->in_w + ix0) * cin;
        } else {
          int8_t *dst = col;
          for (int32_t ky = 0; ky < p->k_h; ++ky) {
            const int32_t iy = iy0 + ky * p->dilation[0];
            for (int32_t kx = 0; kx < p->k_w; ++kx, dst += cin) {
              const int32_t ix = ix0 + kx * p->dilation[1];
              if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w) {
                memset(dst, pad, (size_t)cin);
              } else {
                memcpy(dst, xq + (iy * p->in_w + ix) * cin, (size_t)cin);
              }
            }
          }
          c = col;
        }
        const int8_t *w = weights;
        if (p->per_channel) {
          for (int32_t oc = 0; oc < cout; ++oc, w += k) {
            /* sum w * (q - offset) over all taps; padded taps contribute 0 */
            const int32_t acc = (int32_t)((uint32_t)dot_s8(w, c, k) -
                                          (uint32_t)offset * (uint32_t)w_sum[oc]);
            float y = (float)acc * w_scale[oc];
            y = y * in_scale;
            out[oc] = clampf(y + bias[oc], p->act_min, p->act_max);
          }
        } else {
          for (int32_t oc = 0; oc < cout; ++oc, w += k) {
            const float y = (float)dot_s8(w, c, k) * scale0;
            out[oc] = clampf(y + bias[oc], p->act_min, p->act_max);
          }
        }
      }
    }
  }
}

/* ---- DEPTHWISE_CONV_2D ---------------------------------------------------------------- */

int32_t ai_depthwise_conv2d_hybrid_scratch_size(const ai_depthwise_conv2d_hybrid_params *p) {
  return align4(p->in_h * p->in_w * p->in_c) + 4 * p->out_c;
}

/* acc[oc] += w[oc] * (x[oc / dm] - offset) for one tap: channels are contiguous in both the
 * filter and the input pixel, so the inner loop streams through them (integer sums: the
 * order does not matter; unsigned adds wrap like LiteRT's int32 instead of being undefined). */
static void dw_hybrid_tap(int32_t *acc, const int8_t *w, const int8_t *x, int32_t cin, int32_t dm,
                          int32_t offset) {
  if (dm == 1) {
    for (int32_t c = 0; c < cin; ++c) {
      acc[c] = (int32_t)((uint32_t)acc[c] + (uint32_t)((int32_t)w[c] * ((int32_t)x[c] - offset)));
    }
    return;
  }
  for (int32_t ic = 0; ic < cin; ++ic, acc += dm, w += dm) {
    const int32_t v = (int32_t)x[ic] - offset;
    for (int32_t m = 0; m < dm; ++m) {
      acc[m] = (int32_t)((uint32_t)acc[m] + (uint32_t)((int32_t)w[m] * v));
    }
  }
}

void ai_depthwise_conv2d_hybrid(const ai_depthwise_conv2d_hybrid_params *p, const float *input,
                                const int8_t *weights, const float *w_scale, const float *bias,
                                float *output, void *scratch) {
  const int32_t cin = p->in_c, cout = p->out_c, dm = p->depth_mult;
  const int32_t in_size = p->in_h * p->in_w * cin;
  int8_t *xq = (int8_t *)scratch;
  int32_t *acc = (int32_t *)(void *)(xq + align4(in_size));
  for (int32_t b = 0; b < p->batches; ++b) {
    int32_t offset = 0;
    const float in_scale = ai_hybrid_quantize_asym(input + b * in_size, in_size, xq, &offset);
    float *out = output + b * p->out_h * p->out_w * cout;
    for (int32_t oy = 0; oy < p->out_h; ++oy) {
      const int32_t iy0 = oy * p->stride[0] - p->pad[0];
      for (int32_t ox = 0; ox < p->out_w; ++ox, out += cout) {
        const int32_t ix0 = ox * p->stride[1] - p->pad[1];
        memset(acc, 0, (size_t)cout * sizeof(int32_t));
        for (int32_t ky = 0; ky < p->k_h; ++ky) {
          const int32_t iy = iy0 + ky * p->dilation[0];
          if (iy < 0 || iy >= p->in_h) {
            continue; /* LiteRT skips taps outside the image */
          }
          for (int32_t kx = 0; kx < p->k_w; ++kx) {
            const int32_t ix = ix0 + kx * p->dilation[1];
            if (ix >= 0 && ix < p->in_w) {
              dw_hybrid_tap(acc, weights + (ky * p->k_w + kx) * cout, xq + (iy * p->in_w + ix) * cin,
                            cin, dm, offset);
            }
          }
        }
        for (int32_t oc = 0; oc < cout; ++oc) {
          const float scale = w_scale[oc] * in_scale; /* LiteRT: the two scales first */
          float y = (float)acc[oc] * scale;
          if (bias) {
            y += bias[oc];
          }
          out[oc] = clampf(y, p->act_min, p->act_max);
        }
      }
    }
  }
}

/* ---- FULLY_CONNECTED ------------------------------------------------------------------ */

int32_t ai_fully_connected_hybrid_scratch_size(const ai_fully_connected_hybrid_params *p) {
  return align4(p->in_features);
}

void ai_fully_connected_hybrid(const ai_fully_connected_hybrid_params *p, const float *input,
                               const int8_t *weights, const float *w_scale, const int32_t *w_sum,
                               const float *bias, float *output, void *scratch) {
  const int32_t k = p->in_features, n = p->out_features;
  int8_t *xq = (int8_t *)scratch;
  /* LiteRT first sets the output to the bias (or zero) and skips the products when the
   * whole input is zero; the accumulation below then adds acc * scale to that. */
  int all_zero = 1;
  for (int32_t i = 0; i < p->batches * k; ++i) {
    if (input[i] != 0.0f) {
      all_zero = 0;
      break;
    }
  }
  for (int32_t b = 0; b < p->batches; ++b) {
    const float *in = input + b * k;
    float *out = output + b * n;
    if (all_zero) {
      for (int32_t o = 0; o < n; ++o) {
        out[o] = clampf(bias ? bias[o] : 0.0f, p->act_min, p->act_max);
      }
      continue;
    }
    int32_t offset;
    const float in_scale = quantize_input(in, k, xq, p->asymmetric, &offset);
    const int8_t *w = weights;
    for (int32_t o = 0; o < n; ++o, w += k) {
      int32_t acc = dot_s8(w, xq, k);
      if (p->asymmetric) {
        acc = (int32_t)((uint32_t)acc - (uint32_t)offset * (uint32_t)w_sum[o]);
      }
      const float scale = in_scale * w_scale[o];
      float y = bias ? bias[o] : 0.0f;
      y += (float)acc * scale;
      out[o] = clampf(y, p->act_min, p->act_max);
    }
  }
}
