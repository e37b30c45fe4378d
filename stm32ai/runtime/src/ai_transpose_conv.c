/* TRANSPOSE_CONV kernels: int8, int16x8 and float32 (see docs/kernels_reduce.md).
 *
 * TFLite's reference kernels scatter every input pixel into an output-sized accumulator
 * buffer. Here each output pixel gathers the input pixels that reach it instead, which
 * needs no buffer: output row oy receives input row iy through filter row
 * ky = oy + pad - iy * stride, for every iy with 0 <= ky < k_h (same for columns).
 * Inputs are visited in increasing (iy, ix, ic) order, the order in which TFLite's
 * scatter adds them to an output, so even the float sums are bit-exact. Integer sums are
 * exact in any order. No float math in the integer kernels, no malloc.
 */
#include <stddef.h>
#include <string.h>

#include "ai_kernels_transpose_conv.h"
#include "ai_qmath.h"
#include "ai_simd.h"

/* First and one-past-last input index reaching output index o along one axis. */
static void tap_range(int32_t o, int32_t pad, int32_t stride, int32_t k, int32_t in_size,
                      int32_t *lo, int32_t *hi) {
  const int32_t t = o + pad;       /* >= 0 */
  const int32_t first = t - k + 1; /* smallest stride multiple must be >= first */
  int32_t a = first <= 0 ? 0 : (first + stride - 1) / stride;
  int32_t b = t / stride + 1;
  if (b > in_size) {
    b = in_size;
  }
  *lo = a;
  *hi = b > a ? b : a;
}

/* int8 dot products: the SIMD helpers of ai_simd.h (DSP instructions on ARMv7E-M, the same
 * wrap-around in plain C elsewhere). */

/* acc0 += x . w0, acc1 += x . w1 over n int8 elements. */
static inline void dot2_s8(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n,
                           int32_t *acc0, int32_t *acc1) {
  int32_t s0 = *acc0, s1 = *acc1, c = 0;
  for (; c + 4 <= n; c += 4) {
    const uint32_t xv = rd32(x + c), v0 = rd32(w0 + c), v1 = rd32(w1 + c);
    const uint32_t xa = sxtb16(xv), xb = sxtb16_r8(xv);
    s0 = smlad(xa, sxtb16(v0), s0);
    s0 = smlad(xb, sxtb16_r8(v0), s0);
    s1 = smlad(xa, sxtb16(v1), s1);
    s1 = smlad(xb, sxtb16_r8(v1), s1);
  }
  for (; c < n; ++c) {
    s0 += (int32_t)x[c] * (int32_t)w0[c];
    s1 += (int32_t)x[c] * (int32_t)w1[c];
  }
  *acc0 = s0;
  *acc1 = s1;
}

static inline int32_t dot_s8(const int8_t *x, const int8_t *w, int32_t n, int32_t acc) {
  int32_t c = 0;
  for (; c + 4 <= n; c += 4) {
    const uint32_t xv = rd32(x + c), v = rd32(w + c);
    acc = smlad(sxtb16(xv), sxtb16(v), acc);
    acc = smlad(sxtb16_r8(xv), sxtb16_r8(v), acc);
  }
  for (; c < n; ++c) {
    acc += (int32_t)x[c] * (int32_t)w[c];
  }
  return acc;
}

static inline int8_t requant_s8(const ai_transpose_conv_s8_params *p, int32_t acc, int32_t mult,
                                int32_t shift) {
  acc = ai_requant(acc, mult, shift) + p->out_offset;
  return (int8_t)AI_CLAMP(acc, p->act_min, p->act_max);
}

/* sum over taps of (x + in_offset) * w = sum x * w + sum over taps of tap_offset, where
 * tap_offset[oc][ky][kx] = in_offset * sum_ic w[oc][ky][kx][ic] (precomputed). */
void ai_transpose_conv_s8(const ai_transpose_conv_s8_params *p, const int8_t *input,
                          const int8_t *weights, const int32_t *tap_offset, const int32_t *bias,
                          const int32_t *mult, const int32_t *shift, int8_t *output) {
  const int32_t ic_n = p->in_c;
  const int32_t taps = p->k_h * p->k_w;
  const size_t w_oc = (size_t)taps * (size_t)ic_n; /* weights per output channel */
  int32_t b, oy, ox, oc, iy, ix;
  for (b = 0; b < p->batches; ++b) {
    const int8_t *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)p->in_w * (size_t)ic_n;
    for (oy = 0; oy < p->out_h; ++oy) {
      int32_t y0, y1;
      tap_range(oy, p->pad[0], p->stride[0], p->k_h, p->in_h, &y0, &y1);
      for (ox = 0; ox < p->out_w; ++ox) {
        int32_t x0, x1;
        tap_range(ox, p->pad[1], p->stride[1], p->k_w, p->in_w, &x0, &x1);
        for (oc = 0; oc + 2 <= p->out_c; oc += 2) {
          int32_t a0 = bias != NULL ? bias[oc] : 0;
          int32_t a1 = bias != NULL ? bias[oc + 1] : 0;
          for (iy = y0; iy < y1; ++iy) {
            const int32_t ky = oy + p->pad[0] - iy * p->stride[0];
            const int8_t *x_row = in_b + (size_t)iy * (size_t)p->in_w * (size_t)ic_n;
            for (ix = x0; ix < x1; ++ix) {
              const int32_t tap = ky * p->k_w + (ox + p->pad[1] - ix * p->stride[1]);
              const int8_t *w0 = weights + (size_t)oc * w_oc + (size_t)tap * (size_t)ic_n;
              dot2_s8(x_row + (size_t)ix * (size_t)ic_n, w0, w0 + w_oc, ic_n, &a0, &a1);
              a0 += tap_offset[oc * taps + tap];
              a1 += tap_offset[(oc + 1) * taps + tap];
            }
          }
          *output++ = requant_s8(p, a0, mult[oc], shift[oc]);
          *output++ = requant_s8(p, a1, mult[oc + 1], shift[oc + 1]);
        }
        if (oc < p->out_c) {
          int32_t a0 = bias != NULL ? bias[oc] : 0;
          for (iy = y0; iy < y1; ++iy) {
            const int32_t ky = oy + p->pad[0] - iy * p->stride[0];
            const int8_t *x_row = in_b + (size_t)iy * (size_t)p->in_w * (size_t)ic_n;
            for (ix = x0; ix < x1; ++ix) {
              const int32_t tap = ky * p->k_w + (ox + p->pad[1] - ix * p->stride[1]);
              a0 = dot_s8(x_row + (size_t)ix * (size_t)ic_n,
                          weights + (size_t)oc * w_oc + (size_t)tap * (size_t)ic_n, ic_n, a0);
              a0 += tap_offset[oc * taps + tap];
            }
          }
          *output++ = requant_s8(p, a0, mult[oc], shift[oc]);
        }
      }
    }
  }
}

/* acc0 += x . w0 and acc1 += x . w1 over n int16 x int8 elements (w1 may equal w0 for a
 * single channel). Weights are packed per group of 4 as (w0, w2, w1, w3), so SXTB16 yields
 * the halfword pairs (w0, w1) and (w2, w3) matching two plain 32-bit loads of x; the last
 * n % 4 weights are in plain order. Partial sums stay in int32 for at most 256 products
 * (|x * w| <= 2^22), then go to the int64 accumulators. */
static inline void dot2_s16(const int16_t *x, const int8_t *w0, const int8_t *w1, int32_t n,
                            int64_t *acc0, int64_t *acc1) {
  int32_t c = 0;
  while (c + 4 <= n) {
    const int32_t stop = (n - c) / 4 > 64 ? c + 256 : c + (n - c) / 4 * 4;
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

/* TFLite's MultiplyByQuantizedMultiplier(int64_t, ...) with the multiplier reduced to 16
 * bits (rmult) and total shift rshift, then the activation clamp. */
static inline int16_t requant_s16(const ai_transpose_conv_s16_params *p, int64_t acc,
                                  int32_t rmult, int32_t rshift) {
  const int32_t v = (int32_t)((acc * (int64_t)rmult + ((int64_t)1 << (rshift - 1))) >> rshift);
  return (int16_t)AI_CLAMP(v, p->act_min, p->act_max);
}

void ai_transpose_conv_s16(const ai_transpose_conv_s16_params *p, const int16_t *input,
                           const int8_t *weights, const int64_t *bias, const int32_t *rmult,
                           const int32_t *rshift, int16_t *output) {
  const int32_t ic_n = p->in_c;
  const int32_t taps = p->k_h * p->k_w;
  const size_t w_oc = (size_t)taps * (size_t)ic_n; /* weights per output channel */
  int32_t b, oy, ox, oc, iy, ix;
  for (b = 0; b < p->batches; ++b) {
    const int16_t *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)p->in_w * (size_t)ic_n;
    for (oy = 0; oy < p->out_h; ++oy) {
      int32_t y0, y1;
      tap_range(oy, p->pad[0], p->stride[0], p->k_h, p->in_h, &y0, &y1);
      for (ox = 0; ox < p->out_w; ++ox) {
        int32_t x0, x1;
        tap_range(ox, p->pad[1], p->stride[1], p->k_w, p->in_w, &x0, &x1);
        for (oc = 0; oc < p->out_c; oc += 2) {
          const int32_t pair = oc + 1 < p->out_c; /* else a single last channel */
          int64_t a0 = bias != NULL ? bias[oc] : 0;
          int64_t a1 = (bias != NULL && pair) ? bias[oc + 1] : 0;
          for (iy = y0; iy < y1; ++iy) {
            const int32_t ky = oy + p->pad[0] - iy * p->stride[0];
            const int16_t *x_row = in_b + (size_t)iy * (size_t)p->in_w * (size_t)ic_n;
            for (ix = x0; ix < x1; ++ix) {
              const int32_t tap = ky * p->k_w + (ox + p->pad[1] - ix * p->stride[1]);
              const int8_t *w0 = weights + (size_t)oc * w_oc + (size_t)tap * (size_t)ic_n;
              dot2_s16(x_row + (size_t)ix * (size_t)ic_n, w0, pair ? w0 + w_oc : w0, ic_n, &a0,
                       &a1);
            }
          }
          *output++ = requant_s16(p, a0, rmult[oc], rshift[oc]);
          if (pair) {
            *output++ = requant_s16(p, a1, rmult[oc + 1], rshift[oc + 1]);
          }
        }
      }
    }
  }
}

void ai_transpose_conv_f32(const ai_transpose_conv_f32_params *p, const float *input,
                           const float *weights, const float *bias, float *output) {
  const int32_t ic_n = p->in_c;
  int32_t b, oy, ox, oc, iy, ix, c;
  for (b = 0; b < p->batches; ++b) {
    const float *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)p->in_w * (size_t)ic_n;
    for (oy = 0; oy < p->out_h; ++oy) {
      int32_t y0, y1;
      tap_range(oy, p->pad[0], p->stride[0], p->k_h, p->in_h, &y0, &y1);
      for (ox = 0; ox < p->out_w; ++ox) {
        int32_t x0, x1;
        tap_range(ox, p->pad[1], p->stride[1], p->k_w, p->in_w, &x0, &x1);
        for (oc = 0; oc < p->out_c; ++oc) {
          float acc = 0.0f;
          for (iy = y0; iy < y1; ++iy) {
            const int32_t ky = oy + p->pad[0] - iy * p->stride[0];
            const float *w_row = weights + ((size_t)oc * (size_t)p->k_h + (size_t)ky) *
                                               (size_t)p->k_w * (size_t)ic_n;
            const float *x_row = in_b + (size_t)iy * (size_t)p->in_w * (size_t)ic_n;
            for (ix = x0; ix < x1; ++ix) {
              const int32_t kx = ox + p->pad[1] - ix * p->stride[1];
              const float *w = w_row + (size_t)kx * (size_t)ic_n;
              const float *x = x_row + (size_t)ix * (size_t)ic_n;
              for (c = 0; c < ic_n; ++c) {
                acc += x[c] * w[c];
              }
            }
          }
          if (bias != NULL) {
            acc += bias[oc];
          }
          *output++ = AI_CLAMP(acc, p->act_min, p->act_max);
        }
      }
    }
  }
}
