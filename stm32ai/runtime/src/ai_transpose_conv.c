/* TRANSPOSE_CONV kernels: int8, int16x8 and float32 (see docs/kernels_transpose_conv.md).
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

#include "ai_dot_s16.h"
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

/* One output pixel (b, oy, ox) and the input rows [y0, y1) and columns [x0, x1) reaching it. */
typedef struct {
  int32_t b, oy, ox, y0, y1, x0, x1;
} tc_window;

#define TC_WINDOW_START {0, 0, -1, 0, 0, 0, 0}

/* The walk of all three kernels: advances *w to the next output pixel in (b, oy, ox) order
 * (the output's memory order) and returns 1, or 0 after the last one. */
static int tc_next(tc_window *w, int32_t batches, int32_t out_h, int32_t out_w,
                   const int32_t pad[2], const int32_t stride[2], int32_t k_h, int32_t k_w,
                   int32_t in_h, int32_t in_w) {
  if (batches <= 0 || out_h <= 0 || out_w <= 0) {
    return 0;
  }
  if (++w->ox >= out_w) {
    w->ox = 0;
    if (++w->oy >= out_h) {
      w->oy = 0;
      if (++w->b >= batches) {
        return 0;
      }
    }
  }
  tap_range(w->oy, pad[0], stride[0], k_h, in_h, &w->y0, &w->y1);
  tap_range(w->ox, pad[1], stride[1], k_w, in_w, &w->x0, &w->x1);
  return 1;
}
#define TC_NEXT(w, p)                                                                        \
  tc_next(&(w), (p)->batches, (p)->out_h, (p)->out_w, (p)->pad, (p)->stride, (p)->k_h,      \
          (p)->k_w, (p)->in_h, (p)->in_w)

/* Filter tap (ky, kx) joining input (iy, ix) to the window's output pixel. */
#define TC_TAP(w, p, iy, ix)                                                                 \
  (((w).oy + (p)->pad[0] - (iy) * (p)->stride[0]) * (p)->k_w +                               \
   ((w).ox + (p)->pad[1] - (ix) * (p)->stride[1]))

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
    s0 = ai_wmla(s0, x[c], w0[c]);
    s1 = ai_wmla(s1, x[c], w1[c]);
  }
  *acc0 = s0;
  *acc1 = s1;
}

static inline int8_t requant_s8(const ai_transpose_conv_s8_params *p, int32_t acc, int32_t mult,
                                int32_t shift) {
  acc = ai_wadd(ai_requant(acc, mult, shift), p->out_offset);
  return (int8_t)AI_CLAMP(acc, p->act_min, p->act_max);
}

/* TFLite's MultiplyByQuantizedMultiplier(int64_t, ...) with the multiplier reduced to 16
 * bits (rmult) and total shift rshift, then the activation clamp. */
static inline int16_t requant_s16(const ai_transpose_conv_s16_params *p, int64_t acc,
                                  int32_t rmult, int32_t rshift) {
  const int32_t v = (int32_t)((acc * (int64_t)rmult + ((int64_t)1 << (rshift - 1))) >> rshift);
  return (int16_t)AI_CLAMP(v, p->act_min, p->act_max);
}

/* int16 path: an int64 accumulator bounded by the verifier (never wraps); no tap offsets. */
static inline int64_t tc_add64(int64_t a, int32_t b) { return a + b; }

/* The integer kernels, one template for the element type T, the accumulator (and bias) type
 * ACC, the two-channel dot product DOT2 and the requantisation REQUANT: two output channels
 * (or a single last one) per pass over each output pixel's window. ADD: the accumulator's
 * addition (int8: int32 wrap-around, as TFLite Micro's on the device). tap_offset (int8 only,
 * NULL otherwise): sum over taps of (x - in_zp) * w = sum x * w + sum over the in-range taps
 * of tap_offset[oc][ky][kx] = -in_zp * sum_ic w[oc][ky][kx][ic] (precomputed). */
#define TC_INT_KERNEL(NAME, PARAMS, T, ACC, DOT2, ADD, REQUANT)                                \
  static inline __attribute__((always_inline)) void NAME(                                      \
      const PARAMS *p, const T *input, const int8_t *weights, const int32_t *tap_offset,       \
      const ACC *bias, const int32_t *mult, const int32_t *shift, T *output) {                 \
    const int32_t ic_n = p->in_c, taps = p->k_h * p->k_w;                                      \
    const size_t w_oc = (size_t)taps * (size_t)ic_n; /* weights per output channel */          \
    const size_t row = (size_t)p->in_w * (size_t)ic_n, in_b = (size_t)p->in_h * row;           \
    for (tc_window w = TC_WINDOW_START; TC_NEXT(w, p);) {                                      \
      for (int32_t oc = 0; oc < p->out_c; oc += 2) {                                           \
        const int32_t pair = oc + 1 < p->out_c; /* else a single last channel */               \
        ACC a0 = bias != NULL ? bias[oc] : 0;                                                  \
        ACC a1 = (bias != NULL && pair) ? bias[oc + 1] : 0;                                    \
        for (int32_t iy = w.y0; iy < w.y1; ++iy) {                                             \
          const T *x_row = input + (size_t)w.b * in_b + (size_t)iy * row;                      \
          for (int32_t ix = w.x0; ix < w.x1; ++ix) {                                           \
            const int32_t tap = TC_TAP(w, p, iy, ix);                                          \
            const int8_t *w0 = weights + (size_t)oc * w_oc + (size_t)tap * (size_t)ic_n;       \
            DOT2(x_row + (size_t)ix * (size_t)ic_n, w0, pair ? w0 + w_oc : w0, ic_n, &a0, &a1); \
            if (tap_offset != NULL) {                                                          \
              a0 = ADD(a0, tap_offset[oc * taps + tap]);                                       \
              a1 = ADD(a1, pair ? tap_offset[(oc + 1) * taps + tap] : 0);                      \
            }                                                                                  \
          }                                                                                    \
        }                                                                                      \
        *output++ = REQUANT(p, a0, mult[oc], shift[oc]);                                       \
        if (pair) {                                                                            \
          *output++ = REQUANT(p, a1, mult[oc + 1], shift[oc + 1]);                             \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
  }
TC_INT_KERNEL(tc_s8, ai_transpose_conv_s8_params, int8_t, int32_t, dot2_s8, ai_wadd, requant_s8)
TC_INT_KERNEL(tc_s16, ai_transpose_conv_s16_params, int16_t, int64_t, ai_dot2_s16, tc_add64,
              requant_s16)
#undef TC_INT_KERNEL

void ai_transpose_conv_s8(const ai_transpose_conv_s8_params *p, const int8_t *input,
                          const int8_t *weights, const int32_t *tap_offset, const int32_t *bias,
                          const int32_t *mult, const int32_t *shift, int8_t *output) {
  tc_s8(p, input, weights, tap_offset, bias, mult, shift, output);
}

void ai_transpose_conv_s16(const ai_transpose_conv_s16_params *p, const int16_t *input,
                           const int8_t *weights, const int64_t *bias, const int32_t *rmult,
                           const int32_t *rshift, int16_t *output) {
  tc_s16(p, input, weights, NULL, bias, rmult, rshift, output);
}

void ai_transpose_conv_f32(const ai_transpose_conv_f32_params *p, const float *input,
                           const float *weights, const float *bias, float *output) {
  const int32_t ic_n = p->in_c;
  const size_t w_oc = (size_t)p->k_h * (size_t)p->k_w * (size_t)ic_n; /* per output channel */
  const size_t row = (size_t)p->in_w * (size_t)ic_n, in_b = (size_t)p->in_h * row;
  for (tc_window w = TC_WINDOW_START; TC_NEXT(w, p);) {
    for (int32_t oc = 0; oc < p->out_c; ++oc) {
      float acc = 0.0f;
      for (int32_t iy = w.y0; iy < w.y1; ++iy) {
        const float *x_row = input + (size_t)w.b * in_b + (size_t)iy * row;
        for (int32_t ix = w.x0; ix < w.x1; ++ix) {
          const int32_t tap = TC_TAP(w, p, iy, ix);
          const float *wt = weights + (size_t)oc * w_oc + (size_t)tap * (size_t)ic_n;
          const float *x = x_row + (size_t)ix * (size_t)ic_n;
          for (int32_t c = 0; c < ic_n; ++c) {
            acc += x[c] * wt[c];
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
