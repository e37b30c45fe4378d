/* int8 CONV_2D kernels (see docs/kernels_conv.md). No float, no malloc. */
#include <string.h>

#include "ai_kernels_conv.h"
#include "ai_simd.h"

/* ---------------------------------------------------------------- CONV_2D */

/* Packed K: kernel taps * input channels rounded up to a multiple of 4. */
static inline int32_t conv_kp(const ai_conv2d_s8_params *p) {
  return (p->k_h * p->k_w * p->in_c + 3) & ~3;
}

/* 1 when the column is gathered as bytes first (conv_im2col_gather): in_c % 4 != 0 and a
 * pad value that is an int8 (always, for int8 inputs). */
static inline int conv_gathers(const ai_conv2d_s8_params *p) {
  return (p->in_c & 3) != 0 && p->pad_value >= -128 && p->pad_value <= 127;
}

int32_t ai_conv2d_s8_scratch_size(const ai_conv2d_s8_params *p) {
  /* two int16 columns, plus one int8 column of Kp bytes when gathering */
  return 2 * (int32_t)sizeof(int16_t) * conv_kp(p) + (conv_gathers(p) ? conv_kp(p) : 0);
}

/* n bytes from s to d, a word at a time (unaligned LDR/STR on Cortex-M3/M4/M7). */
static inline void copy_s8(int8_t *d, const int8_t *s, int32_t n) {
  for (; n >= 4; n -= 4, d += 4, s += 4) {
    const uint32_t v = rd32(s);
    memcpy(d, &v, sizeof v);
  }
  for (; n > 0; --n) {
    *d++ = *s++;
  }
}

/* The im2col column of output pixel (oy, ox) when in_c % 4 != 0 (e.g. the in_c = 1 of a
 * depthwise with one input channel lowered to conv2d_s8): gather its K input bytes in
 * K order into `lin` (a filter row of taps is one contiguous run of k_w*in_c input bytes
 * when it lies inside the image and dilation_w is 1), zero the K padding, then unpack each
 * 4-byte group with one load + two SXTB16 into the layout conv_im2col writes. Same values
 * as the element-by-element build, a fraction of its instructions. */
static void conv_im2col_gather(const ai_conv2d_s8_params *p, const int8_t *in, int32_t oy,
                               int32_t ox, int8_t *lin, uint32_t *col) {
  const int32_t cin = p->in_c, kw = p->k_w, dw = p->dilation[1];
  const int32_t run = kw * cin;
  const int32_t iy0 = oy * p->stride[0] - p->pad[0];
  const int32_t ix0 = ox * p->stride[1] - p->pad[1];
  const int row_run = dw == 1 && ix0 >= 0 && ix0 + kw <= p->in_w;
  const int8_t pv = (int8_t)p->pad_value;
  int8_t *d = lin;
  for (int32_t ky = 0; ky < p->k_h; ++ky, d += run) {
    const int32_t iy = iy0 + ky * p->dilation[0];
    if (iy < 0 || iy >= p->in_h) {
      memset(d, pv, (size_t)run);
      continue;
    }
    const int8_t *row = in + (int32_t)iy * p->in_w * cin;
    if (row_run) {
      copy_s8(d, row + ix0 * cin, run);
      continue;
    }
    for (int32_t kx = 0; kx < kw; ++kx) {
      const int32_t ix = ix0 + kx * dw;
      if (ix >= 0 && ix < p->in_w) {
        copy_s8(d + kx * cin, row + ix * cin, cin);
      } else {
        memset(d + kx * cin, pv, (size_t)cin);
      }
    }
  }
  const int32_t k = p->k_h * run, kp = conv_kp(p);
  for (int32_t i = k; i < kp; ++i) { /* K padding: zero weights, keep the column defined */
    lin[i] = 0;
  }
  for (int32_t g = 0; g < (kp >> 2); ++g) {
    const uint32_t w = rd32(lin + 4 * g);
    col[4 * g] = sxtb16(w);
    col[4 * g + 1] = sxtb16_r8(w);
  }
}

/* Build the im2col column of output pixel (oy, ox) into `col`.
 * Column layout (shared with the packed weights): groups of 4 K-elements; a group of
 * the column is two 32-bit words, {x0, x2} and {x1, x3} as int16 pairs (the order in
 * which sxtb16 / sxtb16_r8 unpack 4 weight bytes), and the groups of the two columns
 * of a pair interleave: word 4g+0,1 = column 0, word 4g+2,3 = column 1. */
static void conv_im2col(const ai_conv2d_s8_params *p, const int8_t *in, int32_t oy, int32_t ox,
                        uint32_t *col) {
  const int32_t cin = p->in_c;
  const int32_t iy0 = oy * p->stride[0] - p->pad[0];
  const int32_t ix0 = ox * p->stride[1] - p->pad[1];
  const uint32_t pv = (uint32_t)p->pad_value & 0xFFFFu;
  const uint32_t pad_pair = pv | (pv << 16);
  if ((cin & 3) == 0) {
    const int32_t groups = cin >> 2;
    uint32_t *dst = col;
    for (int32_t ky = 0; ky < p->k_h; ++ky) {
      const int32_t iy = iy0 + ky * p->dilation[0];
      const int row_in = iy >= 0 && iy < p->in_h;
      for (int32_t kx = 0; kx < p->k_w; ++kx) {
        const int32_t ix = ix0 + kx * p->dilation[1];
        if (row_in && ix >= 0 && ix < p->in_w) {
          const int8_t *src = in + ((int32_t)iy * p->in_w + ix) * cin;
          for (int32_t g = 0; g < groups; ++g) {
            const uint32_t w = rd32(src);
            src += 4;
            dst[0] = sxtb16(w);
            dst[1] = sxtb16_r8(w);
            dst += 4;
          }
        } else {
          for (int32_t g = 0; g < groups; ++g) {
            dst[0] = pad_pair;
            dst[1] = pad_pair;
            dst += 4;
          }
        }
      }
    }
  } else {
    /* element by element: K-element k goes to halfword 8*(k/4) + {0, 2, 1, 3}[k%4] */
    int16_t *h = (int16_t *)col;
    int32_t k = 0;
    for (int32_t ky = 0; ky < p->k_h; ++ky) {
      const int32_t iy = iy0 + ky * p->dilation[0];
      const int row_in = iy >= 0 && iy < p->in_h;
      for (int32_t kx = 0; kx < p->k_w; ++kx) {
        const int32_t ix = ix0 + kx * p->dilation[1];
        const int inside = row_in && ix >= 0 && ix < p->in_w;
        const int8_t *src = inside ? in + ((int32_t)iy * p->in_w + ix) * cin : in;
        for (int32_t c = 0; c < cin; ++c, ++k) {
          const int32_t slot = ((k >> 2) << 3) | ((k & 1) << 1) | ((k >> 1) & 1);
          h[slot] = (int16_t)(inside ? src[c] : p->pad_value);
        }
      }
    }
    for (; (k & 3) != 0; ++k) { /* K padding: zero weights, keep the column defined */
      h[((k >> 2) << 3) | ((k & 1) << 1) | ((k >> 1) & 1)] = 0;
    }
  }
}

/* Output channels (oc, oc+1) against the two columns of a pixel pair: the inner loop
 * does 16 MACs with 3 LDRD, 4 SXTB16 and 8 SMLAD. */
static void conv_pair2(const ai_conv2d_s8_params *p, const int8_t *wpair, int32_t kp,
                       const uint32_t *col, const int32_t *bias, const int32_t *mult,
                       const int32_t *shift, int32_t oc, int8_t *out0, int8_t *out1, int fast) {
  const uint32_t *w = (const uint32_t *)(const void *)wpair;
  const uint32_t *c = col;
  int32_t a00 = bias[oc], a01 = a00, a10 = bias[oc + 1], a11 = a10;
#define AI_CONV_STEP2(W, C)                   \
  do {                                        \
    const uint32_t wa = (W)[0], wb = (W)[1];  \
    const uint32_t x0 = (C)[0], x0h = (C)[1]; \
    const uint32_t x1 = (C)[2], x1h = (C)[3]; \
    uint32_t l_ = sxtb16(wa), h_ = sxtb16_r8(wa); \
    a00 = smlad(l_, x0, a00);                 \
    a00 = smlad(h_, x0h, a00);                \
    a01 = smlad(l_, x1, a01);                 \
    a01 = smlad(h_, x1h, a01);                \
    l_ = sxtb16(wb);                          \
    h_ = sxtb16_r8(wb);                       \
    a10 = smlad(l_, x0, a10);                 \
    a10 = smlad(h_, x0h, a10);                \
    a11 = smlad(l_, x1, a11);                 \
    a11 = smlad(h_, x1h, a11);                \
  } while (0)
  int32_t g = kp >> 2;
  for (; g >= 2; g -= 2) {
    AI_CONV_STEP2(w, c);
    AI_CONV_STEP2(w + 2, c + 4);
    w += 4;
    c += 8;
  }
  if (g) {
    AI_CONV_STEP2(w, c);
  }
#undef AI_CONV_STEP2
  const int32_t off = p->out_offset, lo = p->act_min, hi = p->act_max;
  if (fast) {
    const int32_t m0 = mult[oc], m1 = mult[oc + 1];
    const int32_t rs0 = -shift[oc] - 1, rs1 = -shift[oc + 1] - 1;
    const int32_t k0 = (int32_t)((1u << rs0) >> 1), k1 = (int32_t)((1u << rs1) >> 1);
    out0[oc] = clamp8(rq_fast(a00, m0, rs0, k0) + off, lo, hi);
    out1[oc] = clamp8(rq_fast(a01, m0, rs0, k0) + off, lo, hi);
    out0[oc + 1] = clamp8(rq_fast(a10, m1, rs1, k1) + off, lo, hi);
    out1[oc + 1] = clamp8(rq_fast(a11, m1, rs1, k1) + off, lo, hi);
    return;
  }
  rq_t r = rq_prep(mult[oc], shift[oc]);
  out0[oc] = rq_out(a00, &r, off, lo, hi);
  out1[oc] = rq_out(a01, &r, off, lo, hi);
  r = rq_prep(mult[oc + 1], shift[oc + 1]);
  out0[oc + 1] = rq_out(a10, &r, off, lo, hi);
  out1[oc + 1] = rq_out(a11, &r, off, lo, hi);
}

/* Output channels (oc, oc+1) against a single column (the last pixel when the count
 * is odd). */
static void conv_pair1(const ai_conv2d_s8_params *p, const int8_t *wpair, int32_t kp,
                       const uint32_t *col, const int32_t *bias, const int32_t *mult,
                       const int32_t *shift, int32_t oc, int8_t *out0) {
  const uint32_t *w = (const uint32_t *)(const void *)wpair;
  const uint32_t *const wend = w + (kp >> 1);
  const uint32_t *c = col;
  int32_t a0 = bias[oc], a1 = bias[oc + 1];
  while (w != wend) {
    const uint32_t wa = w[0], wb = w[1];
    const uint32_t x0 = c[0], x0h = c[1];
    w += 2;
    c += 4;
    a0 = smlad(sxtb16(wa), x0, a0);
    a0 = smlad(sxtb16_r8(wa), x0h, a0);
    a1 = smlad(sxtb16(wb), x0, a1);
    a1 = smlad(sxtb16_r8(wb), x0h, a1);
  }
  rq_t r = rq_prep(mult[oc], shift[oc]);
  out0[oc] = rq_out(a0, &r, p->out_offset, p->act_min, p->act_max);
  r = rq_prep(mult[oc + 1], shift[oc + 1]);
  out0[oc + 1] = rq_out(a1, &r, p->out_offset, p->act_min, p->act_max);
}

/* The last output channel when out_c is odd (weights: its plain K-padded row). */
static void conv_single(const ai_conv2d_s8_params *p, const int8_t *wrow, int32_t kp,
                        const uint32_t *col, int ncols, const int32_t *bias,
                        const int32_t *mult, const int32_t *shift, int32_t oc,
                        int8_t *out0, int8_t *out1) {
  const uint32_t *w = (const uint32_t *)(const void *)wrow;
  const uint32_t *c = col;
  int32_t a0 = bias[oc], a1 = bias[oc];
  for (int32_t g = 0; g < (kp >> 2); ++g) {
    const uint32_t wa = *w++;
    const uint32_t lo = sxtb16(wa), hi = sxtb16_r8(wa);
    a0 = smlad(lo, c[0], a0);
    a0 = smlad(hi, c[1], a0);
    a1 = smlad(lo, c[2], a1);
    a1 = smlad(hi, c[3], a1);
    c += 4;
  }
  const rq_t r = rq_prep(mult[oc], shift[oc]);
  out0[oc] = rq_out(a0, &r, p->out_offset, p->act_min, p->act_max);
  if (ncols == 2) {
    out1[oc] = rq_out(a1, &r, p->out_offset, p->act_min, p->act_max);
  }
}

void ai_conv2d_s8(const ai_conv2d_s8_params *p, const int8_t *input, const int8_t *weights,
                  const int32_t *bias, const int32_t *mult, const int32_t *shift,
                  int8_t *output, void *scratch) {
  const int32_t kp = conv_kp(p);
  const int32_t cout = p->out_c;
  const int32_t npix = p->out_h * p->out_w;
  uint32_t *col = (uint32_t *)scratch;
  int8_t *lin = conv_gathers(p) ? (int8_t *)scratch + 4 * kp : NULL;
  const int fast = all_fast(shift, cout);
  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *in = input + (int32_t)b * p->in_h * p->in_w * p->in_c;
    int8_t *out = output + (int32_t)b * npix * cout;
    for (int32_t n = 0; n < npix; n += 2) {
      const int ncols = n + 1 < npix ? 2 : 1;
      if (lin != NULL) {
        conv_im2col_gather(p, in, n / p->out_w, n % p->out_w, lin, col);
        if (ncols == 2) {
          conv_im2col_gather(p, in, (n + 1) / p->out_w, (n + 1) % p->out_w, lin, col + 2);
        }
      } else {
        conv_im2col(p, in, n / p->out_w, n % p->out_w, col);
        if (ncols == 2) {
          conv_im2col(p, in, (n + 1) / p->out_w, (n + 1) % p->out_w, col + 2);
        }
      }
      int8_t *o0 = out + n * cout;
      int8_t *o1 = o0 + cout;
      const int8_t *w = weights;
      int32_t oc = 0;
      if (ncols == 2) {
        for (; oc + 1 < cout; oc += 2) {
          conv_pair2(p, w, kp, col, bias, mult, shift, oc, o0, o1, fast);
          w += 2 * kp;
        }
      } else {
        for (; oc + 1 < cout; oc += 2) {
          conv_pair1(p, w, kp, col, bias, mult, shift, oc, o0);
          w += 2 * kp;
        }
      }
      if (oc < cout) {
        conv_single(p, w, kp, col, ncols, bias, mult, shift, oc, o0, o1);
      }
    }
  }
}
