/* int8 DEPTHWISE_CONV_2D kernels (see docs/kernels_conv.md). No float, no malloc. */
#include <string.h>

#include "ai_kernels_conv.h"
#include "ai_simd.h"

/* ------------------------------------------------------ DEPTHWISE_CONV_2D, m = 1 */

int32_t ai_depthwise_conv2d_s8_scratch_size(const ai_depthwise_conv2d_s8_params *p) {
  return (p->in_c + 3) & ~3; /* one pixel of pad_value, read by padded taps */
}

/* Weights: for each group of 4 channels, for each tap t (ky-major), the 4 bytes
 * w[t][c..c+3]; then, for each remaining channel c (in_c % 4 of them), its taps. */
/* win NULL (constant-folded): the full geometry, the usual entry's code unchanged */
#define DW_IN_H (win != 0 ? win->in_h : p->in_h)
#define DW_OUT_H (win != 0 ? win->out_h : p->out_h)
#define DW_PAD_T (win != 0 ? win->pad_top : p->pad[0])
static inline __attribute__((always_inline)) void dw_s8_run(
    const ai_depthwise_conv2d_s8_params *p, const ai_row_window *win, const int8_t *input,
    const int8_t *weights, const int32_t *bias, const int32_t *mult, const int32_t *shift,
    int8_t *output, void *scratch) {
  const int32_t C = p->in_c;
  const int32_t C4 = C & ~3;
  const int32_t ntaps = p->k_h * p->k_w;
  const int8_t *tap[AI_DW_MAX_TAPS];
  int8_t *padpix = (int8_t *)scratch;
  if (ntaps > AI_DW_MAX_TAPS) {
    return; /* the lowering never selects this kernel for such filters */
  }
  memset(padpix, p->pad_value, (size_t)C);
  const int32_t off = p->out_offset, lo = p->act_min, hi = p->act_max;
  const int fast = all_fast(shift, C);

  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *in = input + (int32_t)b * DW_IN_H * p->in_w * C;
    int8_t *out = output + (int32_t)b * DW_OUT_H * p->out_w * C;
    for (int32_t oy = 0; oy < DW_OUT_H; ++oy) {
      const int32_t iy0 = oy * p->stride[0] - DW_PAD_T;
      for (int32_t ox = 0; ox < p->out_w; ++ox, out += C) {
        const int32_t ix0 = ox * p->stride[1] - p->pad[1];
        int32_t t = 0;
        for (int32_t ky = 0; ky < p->k_h; ++ky) {
          const int32_t iy = iy0 + ky * p->dilation[0];
          const int row_in = iy >= 0 && iy < DW_IN_H;
          for (int32_t kx = 0; kx < p->k_w; ++kx, ++t) {
            const int32_t ix = ix0 + kx * p->dilation[1];
            tap[t] = (row_in && ix >= 0 && ix < p->in_w) ? in + (iy * p->in_w + ix) * C : padpix;
          }
        }
        const int8_t *w = weights;
        int32_t c = 0;
        for (; c < C4; c += 4) {
          int32_t a0 = bias[c], a1 = bias[c + 1], a2 = bias[c + 2], a3 = bias[c + 3];
#define AI_DW_TAP(K)                                         \
  do {                                                       \
    const uint32_t x = rd32(tap[K] + c);                     \
    const uint32_t wv = rd32(w + 4 * (K));                   \
    const uint32_t x02 = sxtb16(x), x13 = sxtb16_r8(x);      \
    const uint32_t w02 = sxtb16(wv), w13 = sxtb16_r8(wv);    \
    a0 = smlabb(x02, w02, a0);                               \
    a2 = smlatt(x02, w02, a2);                               \
    a1 = smlabb(x13, w13, a1);                               \
    a3 = smlatt(x13, w13, a3);                               \
  } while (0)
          if (ntaps == 9) {
            AI_DW_TAP(0); AI_DW_TAP(1); AI_DW_TAP(2);
            AI_DW_TAP(3); AI_DW_TAP(4); AI_DW_TAP(5);
            AI_DW_TAP(6); AI_DW_TAP(7); AI_DW_TAP(8);
          } else {
            for (int32_t k = 0; k < ntaps; ++k) {
              AI_DW_TAP(k);
            }
          }
#undef AI_DW_TAP
          w += 4 * ntaps;
          if (fast) {
            int32_t rs = -shift[c] - 1;
            out[c] = clamp8(rq_fast(a0, mult[c], rs, (int32_t)((1u << rs) >> 1)) + off, lo, hi);
            rs = -shift[c + 1] - 1;
            out[c + 1] = clamp8(rq_fast(a1, mult[c + 1], rs, (int32_t)((1u << rs) >> 1)) + off, lo, hi);
            rs = -shift[c + 2] - 1;
            out[c + 2] = clamp8(rq_fast(a2, mult[c + 2], rs, (int32_t)((1u << rs) >> 1)) + off, lo, hi);
            rs = -shift[c + 3] - 1;
            out[c + 3] = clamp8(rq_fast(a3, mult[c + 3], rs, (int32_t)((1u << rs) >> 1)) + off, lo, hi);
          } else {
            rq_t r = rq_prep(mult[c], shift[c]);
            out[c] = rq_out(a0, &r, off, lo, hi);
            r = rq_prep(mult[c + 1], shift[c + 1]);
            out[c + 1] = rq_out(a1, &r, off, lo, hi);
            r = rq_prep(mult[c + 2], shift[c + 2]);
            out[c + 2] = rq_out(a2, &r, off, lo, hi);
            r = rq_prep(mult[c + 3], shift[c + 3]);
            out[c + 3] = rq_out(a3, &r, off, lo, hi);
          }
        }
        for (; c < C; ++c) {
          int32_t a = bias[c];
          for (int32_t k = 0; k < ntaps; ++k) {
            a = ai_wmla(a, tap[k][c], *w++);
          }
          const rq_t r = rq_prep(mult[c], shift[c]);
          out[c] = rq_out(a, &r, off, lo, hi);
        }
      }
    }
  }
}

void ai_depthwise_conv2d_s8(const ai_depthwise_conv2d_s8_params *p, const int8_t *input,
                            const int8_t *weights, const int32_t *bias, const int32_t *mult,
                            const int32_t *shift, int8_t *output, void *scratch) {
  dw_s8_run(p, 0, input, weights, bias, mult, shift, output, scratch);
}

void ai_depthwise_conv2d_s8_rows(const ai_depthwise_conv2d_s8_params *p, ai_row_window win,
                                 const int8_t *input, const int8_t *weights, const int32_t *bias,
                                 const int32_t *mult, const int32_t *shift, int8_t *output,
                                 void *scratch) {
  dw_s8_run(p, &win, input, weights, bias, mult, shift, output, scratch);
}
#undef DW_IN_H
#undef DW_OUT_H
#undef DW_PAD_T

/* ------------------------------------------- DEPTHWISE_CONV_2D, any multiplier */

void ai_depthwise_conv2d_dm_s8(const ai_depthwise_conv2d_dm_s8_params *p, const int8_t *input,
                               const int8_t *weights, const int32_t *bias, const int32_t *mult,
                               const int32_t *shift, int8_t *output) {
  const int32_t C = p->in_c, M = p->depth_mult, OC = p->out_c;
  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *in = input + (int32_t)b * p->in_h * p->in_w * C;
    int8_t *out = output + (int32_t)b * p->out_h * p->out_w * OC;
    for (int32_t oy = 0; oy < p->out_h; ++oy) {
      const int32_t iy0 = oy * p->stride[0] - p->pad[0];
      for (int32_t ox = 0; ox < p->out_w; ++ox, out += OC) {
        const int32_t ix0 = ox * p->stride[1] - p->pad[1];
        for (int32_t ic = 0; ic < C; ++ic) {
          for (int32_t m = 0; m < M; ++m) {
            const int32_t oc = ic * M + m;
            int32_t acc = bias[oc];
            for (int32_t ky = 0; ky < p->k_h; ++ky) {
              const int32_t iy = iy0 + ky * p->dilation[0];
              const int row_in = iy >= 0 && iy < p->in_h;
              for (int32_t kx = 0; kx < p->k_w; ++kx) {
                const int32_t ix = ix0 + kx * p->dilation[1];
                const int32_t x = (row_in && ix >= 0 && ix < p->in_w)
                                      ? in[(iy * p->in_w + ix) * C + ic] : p->pad_value;
                acc = ai_wmla(acc, x, weights[(ky * p->k_w + kx) * OC + oc]);
              }
            }
            const rq_t r = rq_prep(mult[oc], shift[oc]);
            out[oc] = rq_out(acc, &r, p->out_offset, p->act_min, p->act_max);
          }
        }
      }
    }
  }
}

/* ------------------------------- DEPTHWISE_CONV_2D 3x3, stride 1 or 2, channel-planar */

#define AI_DW3_K 10 /* int32 constants per channel in `packed` */
#define AI_DW3_HB 8 /* input rows per band: word (j, row) of a plane is at j * HB + row */

/* G planes, then (stage) one group's packed constants */
int32_t ai_depthwise_conv2d_3x3_s8_scratch_size(const ai_depthwise_conv2d_3x3_s8_params *p) {
  return 4 * ((p->plane_w / 2) * AI_DW3_HB + (p->stage ? AI_DW3_K : 0)) * (int32_t)sizeof(uint32_t);
}

int32_t ai_depthwise_conv2d_3x3_g2_s8_scratch_size(const ai_depthwise_conv2d_3x3_g2_s8_params *p) {
  return 2 * ((p->plane_w / 2) * AI_DW3_HB + (p->stage ? AI_DW3_K : 0)) * (int32_t)sizeof(uint32_t);
}

/* Low word of TFLite's rounding constant 2^30 + 2^(30+e) (docs): 2^30, or 3 * 2^30 for e = 1. */
#define DW3_KLO(rs) ((rs) == 0 ? (int32_t)0xC0000000u : 0x40000000)

/* Portable requantisation (the assembly computes the same): hi32({khi, klo} + sign term +
 * x*m) >> rs, then SSAT 8; khi folds the output zero point in (docs/kernels_conv.md).
 * exact_sign = 0: sign term applied as {s, klo ^ s} (EOR; proved exact per layer at
 * generate time); 1: exactly -2^31 * [x < 0]. */
static inline int32_t dw3_rq(int32_t x, int32_t m, int32_t khi, int32_t rs, int exact_sign) {
  const uint32_t s = (uint32_t)(x >> 31), klo = (uint32_t)DW3_KLO(rs);
  uint64_t k;
  if (exact_sign) {
    k = ((uint64_t)(uint32_t)khi << 32) + klo - (s & 0x80000000u);
  } else {
    k = ((uint64_t)((uint32_t)khi + s) << 32) | (klo ^ s);
  }
  const uint64_t a = k + (uint64_t)ai_smull(x, m);
  return ssat8((int32_t)(uint32_t)(a >> 32) >> rs);
}

static inline void wr16(uint8_t *p, uint32_t v) {
  const uint16_t h = (uint16_t)v;
  memcpy(p, &h, sizeof h);
}

/* Scratch layout: word (j, r, k) = pixels {2j, 2j+1} of band row r of channel k of the
 * group of G channels (4, or 2 in the _g2 kernels), at word index (j * HB + r) * G + k: the
 * G channels' words are adjacent (the fill stores them together), a channel's band rows are
 * G words apart, its columns G*HB. */
#define DW3_ATG(G, i, r, k) (((((i) >> 1) * AI_DW3_HB + (r)) * (G) + (k)) * 4 + ((i) & 1) * 2)
#define DW3_AT(i, r, k) DW3_ATG(4, i, r, k)

/* Words (j, r, 0..3) from the 4-channel pixel words x (left column) and y (right column),
 * each already split by SXTB16 into even (e) and odd (o) channels. */
static inline void dw3_put(uint8_t *d, uint32_t xe, uint32_t xo, uint32_t ye, uint32_t yo) {
  uint32_t *w = (uint32_t *)(void *)d;
  w[0] = pk_lo(xe, ye);
  w[1] = pk_lo(xo, yo);
  w[2] = pk_hi(xe, ye);
  w[3] = pk_hi(xo, yo);
}

/* The same from the raw pixel words x, y: pack first ({x.c0, x.c1, y.c0, y.c1} and
 * {x.c2, x.c3, y.c2, y.c3}), then sign-extend: 2 PKH + 4 SXTB16 instead of 4 + 4. */
static inline void dw3_put_xy(uint8_t *d, uint32_t x, uint32_t y) {
  uint32_t *w = (uint32_t *)(void *)d;
  const uint32_t t = pk_lo(x, y), u = pk_hi(x, y);
  w[0] = sxtb16(t);
  w[1] = sxtb16_r8(t);
  w[2] = sxtb16(u);
  w[3] = sxtb16_r8(u);
}

/* The image as the kernel walks it: rows of `w` pixels, `in_col` bytes apart (the input's
 * columns, or its rows when the layer is processed transposed). */
typedef struct {
  int32_t h, w, pad_t, pad_l, in_row, in_col, oh, ow, out_row, out_col, pad_value;
} dw3_view;

/* The fills' inner loops in assembly on the Cortex-M4 (Armv7E-M without AI_CORE_CM7, optimised
 * builds): gcc interleaves the four pixel loads with their packing and reloads loop state, so
 * that no load pipelines (~34 estimated cycles per iteration of dw3_fill2 on KWS). Here the
 * four loads of an iteration issue back to back (Cortex-M4 TRM §3.3.2: N independent loads
 * take N+1 cycles), the last store post-increments the destination, and the loop counts down
 * (~20 cycles). Same loads, same words stored as the C loops below. */
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_ARCH_7EM__) && !defined(AI_CORE_CM7) && \
    defined(__GNUC__) && defined(__OPTIMIZE__) && !defined(AI_NO_ASM)
#define AI_DW3_FILL_ASM 1
/* n iterations of dw3_fill's inner loop: 4 pixels (pairs {x, y}, {x2, y2}) of 4 channels. */
static inline __attribute__((always_inline)) void dw3_fill_quads(const int8_t **ps, uint8_t **pd,
                                                                  int32_t n, int32_t C) {
  const int8_t *s = *ps;
  uint8_t *d = *pd;
  uint32_t x, y, x2, y2, t;
  __asm__ volatile(
      ".p2align 2\n" /* a taken branch to a halfword-aligned 32-bit LDR: 1 cycle more (TRM §3.3.1) */
      "1:\n\t"
      "ldr %[x], [%[s]]\n\t"
      "ldr %[y], [%[s], %[c1]]\n\t"
      "ldr %[x2], [%[s], %[c2]]\n\t"
      "ldr %[y2], [%[s], %[c3]]\n\t"
      "add %[s], %[s], %[c1], lsl #2\n\t"
      "pkhbt %[t], %[x], %[y], lsl #16\n\t"
      "pkhtb %[y], %[y], %[x], asr #16\n\t"
      "sxtb16 %[x], %[t], ror #8\n\t"
      "str %[x], [%[d], #4]\n\t"
      "sxtb16 %[x], %[y]\n\t"
      "str %[x], [%[d], #8]\n\t"
      "sxtb16 %[x], %[y], ror #8\n\t"
      "str %[x], [%[d], #12]\n\t"
      "sxtb16 %[x], %[t]\n\t"
      "str %[x], [%[d]], #128\n\t"
      "pkhbt %[t], %[x2], %[y2], lsl #16\n\t"
      "pkhtb %[y2], %[y2], %[x2], asr #16\n\t"
      "sxtb16 %[x2], %[t], ror #8\n\t"
      "str %[x2], [%[d], #4]\n\t"
      "sxtb16 %[x2], %[y2]\n\t"
      "str %[x2], [%[d], #8]\n\t"
      "sxtb16 %[x2], %[y2], ror #8\n\t"
      "str %[x2], [%[d], #12]\n\t"
      "sxtb16 %[x2], %[t]\n\t"
      "str %[x2], [%[d]], #128\n\t"
      "subs %[n], %[n], #1\n\t"
      "bne 1b\n\t"
      : [s] "+r"(s), [d] "+r"(d), [n] "+r"(n), [x] "=&r"(x), [y] "=&r"(y), [x2] "=&r"(x2),
        [y2] "=&r"(y2), [t] "=&r"(t)
      : [c1] "r"(C), [c2] "r"(2 * C), [c3] "r"(3 * C)
      : "cc", "memory");
  *ps = s;
  *pd = d;
}

/* n iterations of dw3_fill2's inner loop: 4 pixels of 2 channels (halfword loads). */
static inline __attribute__((always_inline)) void dw3_fill2_quads(const int8_t **ps, uint32_t **pd,
                                                                   int32_t n, int32_t C) {
  const int8_t *s = *ps;
  uint32_t *d = *pd;
  uint32_t x, y, x2, y2;
  __asm__ volatile(
      ".p2align 2\n" /* a taken branch to a halfword-aligned 32-bit LDR: 1 cycle more (TRM §3.3.1) */
      "1:\n\t"
      "ldrh %[x], [%[s]]\n\t"
      "ldrh %[y], [%[s], %[c1]]\n\t"
      "ldrh %[x2], [%[s], %[c2]]\n\t"
      "ldrh %[y2], [%[s], %[c3]]\n\t"
      "add %[s], %[s], %[c1], lsl #2\n\t"
      "orr %[x], %[x], %[y], lsl #16\n\t"
      "orr %[x2], %[x2], %[y2], lsl #16\n\t"
      "sxtb16 %[y], %[x], ror #8\n\t"
      "str %[y], [%[d], #4]\n\t"
      "sxtb16 %[y2], %[x2]\n\t"
      "str %[y2], [%[d], #64]\n\t"
      "sxtb16 %[y2], %[x2], ror #8\n\t"
      "str %[y2], [%[d], #68]\n\t"
      "sxtb16 %[y], %[x]\n\t"
      "str %[y], [%[d]], #128\n\t"
      "subs %[n], %[n], #1\n\t"
      "bne 1b\n\t"
      : [s] "+r"(s), [d] "+r"(d), [n] "+r"(n), [x] "=&r"(x), [y] "=&r"(y), [x2] "=&r"(x2),
        [y2] "=&r"(y2)
      : [c1] "r"(C), [c2] "r"(2 * C), [c3] "r"(3 * C)
      : "cc", "memory");
  *ps = s;
  *pd = d;
}
#if AI_DW3_HB != 8
#error "the fill assembly's store offsets assume AI_DW3_HB == 8"
#endif
#endif

/* Input rows iy0 .. iy0+rows-1 into band rows 0 .. rows-1 for 4 output channels that are 4
 * consecutive input channels (multiplier 1) starting at `in`. Int16 column i holds input
 * column i - pad_l; whole words are written, a column outside the image taking pad_value
 * (rows outside the image are pad_value throughout). Words no interior pixel touches keep
 * the pad values written at the start. */
static void dw3_fill(const dw3_view *v, const int8_t *in, int32_t iy0, int32_t rows, uint8_t *pl,
                     uint32_t pv, int pad_clean) {
  const int32_t W = v->w, C = v->in_col, pad = v->pad_l, H = v->h, in_row = v->in_row;
  const int32_t j_end = (pad + W + 1) >> 1; /* words holding interior pixels: [j0, j_end) */
  const int32_t j0 = pad >> 1;
  /* the same walk for every row, planned once: {pad, pixel 0} when word j0 starts left of the
   * image, then nq runs of 4 pixels, then a pixel pair (tail & 2) and {pixel W-1, pad} (tail & 1) */
  const int head = 2 * j0 - pad < 0;
  const int32_t nq = (W - head) >> 2, tail = (W - head) & 3;
  uint8_t *d = pl + DW3_AT(2 * j0, 0, 0);
  int32_t off = iy0 * in_row;
  for (int32_t iy = iy0; iy < iy0 + rows; ++iy, d += 16, off += in_row) { /* band row: 16 B */
    uint8_t *q = d;
    if ((uint32_t)iy >= (uint32_t)H) {
      if (pad_clean) {
        continue;
      }
      for (int32_t j = j0; j < j_end; ++j, q += 16 * AI_DW3_HB) {
        dw3_put(q, pv, pv, pv, pv);
      }
      continue;
    }
    const int8_t *s = in + off;
    if (head) {
      const uint32_t y = rd32(s);
      dw3_put(q, pv, pv, sxtb16(y), sxtb16_r8(y));
      s += C;
      q += 16 * AI_DW3_HB;
    }
    /* two words per iteration: the four loads issue back to back (pipelined, Cortex-M4
     * TRM §3.3.2) and the loop's branch is taken half as often */
#if defined(AI_DW3_FILL_ASM)
    if (nq > 0) {
      dw3_fill_quads(&s, &q, nq, C);
    }
#else
    for (int32_t i = 0; i < nq; ++i, s += 4 * C, q += 32 * AI_DW3_HB) {
      const uint32_t x = rd32(s), y = rd32(s + C), x2 = rd32(s + 2 * C), y2 = rd32(s + 3 * C);
      dw3_put_xy(q, x, y);
      dw3_put_xy(q + 16 * AI_DW3_HB, x2, y2);
    }
#endif
    if (tail & 2) {
      dw3_put_xy(q, rd32(s), rd32(s + C));
      s += 2 * C;
      q += 16 * AI_DW3_HB;
    }
    if (tail & 1) { /* {pixel W-1, pad} */
      const uint32_t x = rd32(s);
      dw3_put(q, sxtb16(x), sxtb16_r8(x), pv, pv);
    }
  }
}

/* dw3_fill for 2 consecutive channels (the _g2 kernels): per pixel pair, two halfword loads
 * packed into {x.c0, x.c1, y.c0, y.c1}; SXTB16 of that is channel 0's word {x, y}, of it
 * rotated by 8 channel 1's. */
static inline uint32_t dw3_rd16(const int8_t *p) {
  uint16_t h;
  memcpy(&h, p, sizeof h);
  return h;
}

static void dw3_fill2(const dw3_view *v, const int8_t *in, int32_t iy0, int32_t rows, uint8_t *pl,
                      uint32_t pv, int pad_clean) {
  const int32_t W = v->w, C = v->in_col, pad = v->pad_l, H = v->h, in_row = v->in_row;
  const int32_t j_end = (pad + W + 1) >> 1; /* words holding interior pixels: [j0, j_end) */
  const int32_t j0 = pad >> 1;
  const uint32_t pp = (pv & 0xFFu) * 0x0101u; /* a padding pixel's 2 channel bytes */
  const int head = 2 * j0 - pad < 0;          /* the row walk, planned once as in dw3_fill */
  const int32_t nq = (W - head) >> 2, tail = (W - head) & 3;
  uint32_t *d = (uint32_t *)(void *)(pl + DW3_ATG(2, 2 * j0, 0, 0));
  int32_t off = iy0 * in_row;
  for (int32_t iy = iy0; iy < iy0 + rows; ++iy, d += 2, off += in_row) { /* band row: 2 words */
    uint32_t *q = d;
    if ((uint32_t)iy >= (uint32_t)H) {
      if (pad_clean) {
        continue;
      }
      for (int32_t j = j0; j < j_end; ++j, q += 2 * AI_DW3_HB) {
        q[0] = pv;
        q[1] = pv;
      }
      continue;
    }
    const int8_t *s = in + off;
    if (head) { /* {pad, pixel 0} */
      const uint32_t t = pp | (dw3_rd16(s) << 16);
      q[0] = sxtb16(t);
      q[1] = sxtb16_r8(t);
      s += C;
      q += 2 * AI_DW3_HB;
    }
#if defined(AI_DW3_FILL_ASM)
    if (nq > 0) {
      dw3_fill2_quads(&s, &q, nq, C);
    }
#else
    for (int32_t i = 0; i < nq; ++i, s += 4 * C, q += 4 * AI_DW3_HB) { /* as dw3_fill: 2 words */
      const uint32_t t = dw3_rd16(s) | (dw3_rd16(s + C) << 16);
      const uint32_t t2 = dw3_rd16(s + 2 * C) | (dw3_rd16(s + 3 * C) << 16);
      q[0] = sxtb16(t);
      q[1] = sxtb16_r8(t);
      q[2 * AI_DW3_HB] = sxtb16(t2);
      q[2 * AI_DW3_HB + 1] = sxtb16_r8(t2);
    }
#endif
    if (tail & 2) {
      const uint32_t t = dw3_rd16(s) | (dw3_rd16(s + C) << 16);
      q[0] = sxtb16(t);
      q[1] = sxtb16_r8(t);
      s += 2 * C;
      q += 2 * AI_DW3_HB;
    }
    if (tail & 1) { /* {pixel W-1, pad} */
      const uint32_t t = dw3_rd16(s) | (pp << 16);
      q[0] = sxtb16(t);
      q[1] = sxtb16_r8(t);
    }
  }
}

/* dw3_fill2 for a stripe's call (the row-window entry, one band, pad_clean; docs/stripes.md):
 * the walk planned once per call for all its channel pairs, then ONE pass per pair over the
 * band's interior rows (the row loop in the assembly on the Cortex-M4) instead of a C row loop
 * per pair. Two row shapes, those of VWW's stripes (others: dw3_fill2): rows of W % 4 == 0
 * pixels either with an odd left pad (`head`: {pad, pixel 0}, nq quads, a pixel pair and
 * {pixel W-1, pad}) or with an even one (nq quads); nq >= 2. Same loads, same words stored as
 * dw3_fill2 (pad_clean: rows outside the image untouched). */
typedef struct dw3_walk2 dw3_walk2;
typedef void dw3_walk2_fn(const dw3_walk2 *w, const int8_t *in, uint8_t *pl);
struct dw3_walk2 {
  int32_t nq;    /* [0] quads per row */
  uint32_t pp;   /* [1] a padding pixel's 2 channel bytes ({pad, pixel 0}) */
  uint32_t pp16; /* [2] the same << 16 ({pixel W-1, pad}) */
  int32_t sskip; /* [3] bytes from where the row's last load group starts to the next row */
  int32_t dskip; /* [4] bytes from the row's end in the plane to the next row's first word */
  int32_t sskip_i; /* [5] sskip for dw3_fill2_walk_i (s one pixel behind its loads) */
  int32_t C, rows, s_off, d_off;
  dw3_walk2_fn *fn; /* the walk for the row shape and C (one indirect call per channel pair) */
};

#if defined(AI_DW3_FILL_ASM)
/* dw3_fill2_walk's assembly for a channel stride C known at compile time: the loads take
 * immediate offsets from s, kept at the previous quad's last pixel and advanced by the quad's
 * last load (pre-indexed writeback, 4C <= 255; else an ADD): no ADD per quad, no offset
 * registers (the row's constants stay in registers). */
static inline __attribute__((always_inline)) void dw3_fill2_walk_i(const dw3_walk2 *w,
    const int8_t *s, uint8_t *d, int32_t rows, const int head, const int32_t C) {
  uint32_t x, y, x2, y2;
  int32_t n;
#define DW3_W2_QUAD_I                         \
  "ldrh %[x], [%[s], #%c[k1]]\n\t"            \
  "ldrh %[y], [%[s], #%c[k2]]\n\t"            \
  "ldrh %[x2], [%[s], #%c[k3]]\n\t"           \
  ".if %c[k4] < 256\n\t"                      \
  "ldrh %[y2], [%[s], #%c[k4]]!\n\t"          \
  ".else\n\t" /* 64 channels: no writeback */ \
  "ldrh %[y2], [%[s], #%c[k4]]\n\t"           \
  "add %[s], %[s], #%c[k4]\n\t"               \
  ".endif\n\t"                                \
  "orr %[x], %[x], %[y], lsl #16\n\t"         \
  "orr %[x2], %[x2], %[y2], lsl #16\n\t"      \
  "sxtb16 %[y], %[x], ror #8\n\t"             \
  "str %[y], [%[d], #4]\n\t"                  \
  "sxtb16 %[y2], %[x2]\n\t"                   \
  "str %[y2], [%[d], #64]\n\t"                \
  "sxtb16 %[y2], %[x2], ror #8\n\t"           \
  "str %[y2], [%[d], #68]\n\t"                \
  "sxtb16 %[y], %[x]\n\t"                     \
  "str %[y], [%[d]], #128\n\t"
/* after LSRS n, nq, #1 (the carry: an odd quad first; flags kept by the head's ORR/SXTB16/STR) */ \
#define DW3_W2_QUADS_I                        \
  "bcc 3f\n\t"                                \
  DW3_W2_QUAD_I                               \
  ".p2align 2\n"                              \
  "3:\n\t"                                    \
  DW3_W2_QUAD_I                               \
  DW3_W2_QUAD_I                               \
  "subs %[n], %[n], #1\n\t"                   \
  "bne 3b\n\t"
  /* the row constants in registers (13 with the loop's): no loads per row but the pixels' */
  const int32_t nq = w->nq, ssk = w->sskip_i, dsk = w->dskip;
  if (head) { /* s at pixel 0: the head's, then the quads' "previous last pixel" */
    const uint32_t pp = w->pp, pp16 = w->pp16;
    __asm__ volatile(
        ".p2align 2\n"
        "2:\n\t"
        "ldrh %[x], [%[s]]\n\t" /* {pad, pixel 0} */
        "lsrs %[n], %[nq], #1\n\t"
        "orr %[x], %[pp], %[x], lsl #16\n\t"
        "sxtb16 %[y], %[x], ror #8\n\t"
        "str %[y], [%[d], #4]\n\t"
        "sxtb16 %[x], %[x]\n\t"
        "str %[x], [%[d]], #64\n\t"
        DW3_W2_QUADS_I
        "ldrh %[x], [%[s], #%c[k1]]\n\t" /* a pixel pair and {pixel W-1, pad} */
        "ldrh %[y], [%[s], #%c[k2]]\n\t"
        "ldrh %[x2], [%[s], #%c[k3]]\n\t"
        "add %[s], %[s], %[ssk]\n\t"
        "orr %[x], %[x], %[y], lsl #16\n\t"
        "orr %[x2], %[x2], %[pp16]\n\t"
        "sxtb16 %[y], %[x], ror #8\n\t"
        "str %[y], [%[d], #4]\n\t"
        "sxtb16 %[y2], %[x2]\n\t"
        "str %[y2], [%[d], #64]\n\t"
        "sxtb16 %[y2], %[x2], ror #8\n\t"
        "str %[y2], [%[d], #68]\n\t"
        "sxtb16 %[y], %[x]\n\t"
        "str %[y], [%[d]], #128\n\t"
        "add %[d], %[d], %[dsk]\n\t"
        "subs %[rows], %[rows], #1\n\t"
        "bne 2b\n\t"
        : [s] "+r"(s), [d] "+r"(d), [rows] "+r"(rows), [n] "=&r"(n), [x] "=&r"(x), [y] "=&r"(y),
          [x2] "=&r"(x2), [y2] "=&r"(y2)
        : [nq] "r"(nq), [pp] "r"(pp), [pp16] "r"(pp16), [ssk] "r"(ssk), [dsk] "r"(dsk),
          [k1] "n"(C), [k2] "n"(2 * C), [k3] "n"(3 * C), [k4] "n"(4 * C)
        : "cc", "memory");
  } else { /* s one pixel before the row's first */
    __asm__ volatile(
        "sub %[s], %[s], #%c[k1]\n\t"
        ".p2align 2\n"
        "2:\n\t"
        "lsrs %[n], %[nq], #1\n\t"
        DW3_W2_QUADS_I
        "add %[s], %[s], %[ssk]\n\t"
        "add %[d], %[d], %[dsk]\n\t"
        "subs %[rows], %[rows], #1\n\t"
        "bne 2b\n\t"
        : [s] "+r"(s), [d] "+r"(d), [rows] "+r"(rows), [n] "=&r"(n), [x] "=&r"(x), [y] "=&r"(y),
          [x2] "=&r"(x2), [y2] "=&r"(y2)
        : [nq] "r"(nq), [ssk] "r"(ssk), [dsk] "r"(dsk),
          [k1] "n"(C), [k2] "n"(2 * C), [k3] "n"(3 * C), [k4] "n"(4 * C)
        : "cc", "memory");
  }
#undef DW3_W2_QUADS_I
#undef DW3_W2_QUAD_I
}
#endif

/* the walk with the load offsets in registers (other channel counts), or in C (host) */
static inline __attribute__((always_inline)) void dw3_fill2_walk_g(const dw3_walk2 *w,
    const int8_t *s, uint8_t *d, int32_t rows, const int head) {
  const int32_t C = w->C;
#if defined(AI_DW3_FILL_ASM)
  uint32_t x, y, x2, y2;
  int32_t n;
  /* a quad: pixels 0..3 at s, s + C, s + 2C, s + 3C -> words (j, 0), (j, 1), (j + 1, 0),
   * (j + 1, 1) at d, d + 4, d + 64, d + 68 (as dw3_fill2_quads) */
#define DW3_W2_QUAD                           \
  "ldrh %[x], [%[s]]\n\t"                     \
  "ldrh %[y], [%[s], %[c1]]\n\t"              \
  "ldrh %[x2], [%[s], %[c2]]\n\t"             \
  "ldrh %[y2], [%[s], %[c3]]\n\t"             \
  "add %[s], %[s], %[c1], lsl #2\n\t"         \
  "orr %[x], %[x], %[y], lsl #16\n\t"         \
  "orr %[x2], %[x2], %[y2], lsl #16\n\t"      \
  "sxtb16 %[y], %[x], ror #8\n\t"             \
  "str %[y], [%[d], #4]\n\t"                  \
  "sxtb16 %[y2], %[x2]\n\t"                   \
  "str %[y2], [%[d], #64]\n\t"                \
  "sxtb16 %[y2], %[x2], ror #8\n\t"           \
  "str %[y2], [%[d], #68]\n\t"                \
  "sxtb16 %[y], %[x]\n\t"                     \
  "str %[y], [%[d]], #128\n\t"
  /* nq quads, two per iteration (an odd one first): n = nq >> 1 >= 1 */
#define DW3_W2_QUADS                          \
  "lsrs %[n], %[n], #1\n\t"                   \
  "bcc 3f\n\t"                                \
  DW3_W2_QUAD                                 \
  ".p2align 2\n"                              \
  "3:\n\t"                                    \
  DW3_W2_QUAD                                 \
  DW3_W2_QUAD                                 \
  "subs %[n], %[n], #1\n\t"                   \
  "bne 3b\n\t"
  if (head) {
    __asm__ volatile(
        ".p2align 2\n"
        "2:\n\t"
        "ldr %[n], [%[kp]]\n\t" /* {pad, pixel 0} */
        "ldr %[y], [%[kp], #4]\n\t"
        "ldrh %[x], [%[s]]\n\t"
        "add %[s], %[s], %[c1]\n\t"
        "orr %[x], %[y], %[x], lsl #16\n\t"
        "sxtb16 %[y], %[x], ror #8\n\t"
        "str %[y], [%[d], #4]\n\t"
        "sxtb16 %[x], %[x]\n\t"
        "str %[x], [%[d]], #64\n\t"
        DW3_W2_QUADS
        "ldrh %[x], [%[s]]\n\t" /* a pixel pair and {pixel W-1, pad}: a quad with pp16 */
        "ldrh %[y], [%[s], %[c1]]\n\t"
        "ldrh %[x2], [%[s], %[c2]]\n\t"
        "ldr %[y2], [%[kp], #8]\n\t"
        "ldr %[n], [%[kp], #12]\n\t"
        "add %[s], %[s], %[n]\n\t"
        "orr %[x], %[x], %[y], lsl #16\n\t"
        "orr %[x2], %[x2], %[y2]\n\t"
        "sxtb16 %[y], %[x], ror #8\n\t"
        "str %[y], [%[d], #4]\n\t"
        "sxtb16 %[y2], %[x2]\n\t"
        "str %[y2], [%[d], #64]\n\t"
        "sxtb16 %[y2], %[x2], ror #8\n\t"
        "str %[y2], [%[d], #68]\n\t"
        "sxtb16 %[y], %[x]\n\t"
        "str %[y], [%[d]], #128\n\t"
        "ldr %[n], [%[kp], #16]\n\t"
        "add %[d], %[d], %[n]\n\t"
        "subs %[rows], %[rows], #1\n\t"
        "bne 2b\n\t"
        : [s] "+r"(s), [d] "+r"(d), [rows] "+r"(rows), [n] "=&r"(n), [x] "=&r"(x), [y] "=&r"(y),
          [x2] "=&r"(x2), [y2] "=&r"(y2)
        : [kp] "r"(w), [c1] "r"(C), [c2] "r"(2 * C), [c3] "r"(3 * C)
        : "cc", "memory");
  } else {
    __asm__ volatile(
        ".p2align 2\n"
        "2:\n\t"
        "ldr %[n], [%[kp]]\n\t"
        DW3_W2_QUADS
        "ldr %[x], [%[kp], #12]\n\t"
        "ldr %[y], [%[kp], #16]\n\t"
        "add %[s], %[s], %[x]\n\t"
        "add %[d], %[d], %[y]\n\t"
        "subs %[rows], %[rows], #1\n\t"
        "bne 2b\n\t"
        : [s] "+r"(s), [d] "+r"(d), [rows] "+r"(rows), [n] "=&r"(n), [x] "=&r"(x), [y] "=&r"(y),
          [x2] "=&r"(x2), [y2] "=&r"(y2)
        : [kp] "r"(w), [c1] "r"(C), [c2] "r"(2 * C), [c3] "r"(3 * C)
        : "cc", "memory");
  }
#undef DW3_W2_QUADS
#undef DW3_W2_QUAD
#else
  for (; rows > 0; --rows) {
    const int8_t *t = s;
    uint32_t *q = (uint32_t *)(void *)d;
    if (head) { /* {pad, pixel 0} */
      const uint32_t u = w->pp | (dw3_rd16(t) << 16);
      q[0] = sxtb16(u);
      q[1] = sxtb16_r8(u);
      t += C;
      q += 2 * AI_DW3_HB;
    }
    for (int32_t i = 0; i < w->nq; ++i, t += 4 * C, q += 4 * AI_DW3_HB) {
      const uint32_t u = dw3_rd16(t) | (dw3_rd16(t + C) << 16);
      const uint32_t u2 = dw3_rd16(t + 2 * C) | (dw3_rd16(t + 3 * C) << 16);
      q[0] = sxtb16(u);
      q[1] = sxtb16_r8(u);
      q[2 * AI_DW3_HB] = sxtb16(u2);
      q[2 * AI_DW3_HB + 1] = sxtb16_r8(u2);
    }
    if (head) { /* a pixel pair and {pixel W-1, pad} */
      const uint32_t u = dw3_rd16(t) | (dw3_rd16(t + C) << 16);
      const uint32_t u2 = dw3_rd16(t + 2 * C) | w->pp16;
      q[0] = sxtb16(u);
      q[1] = sxtb16_r8(u);
      q[2 * AI_DW3_HB] = sxtb16(u2);
      q[2 * AI_DW3_HB + 1] = sxtb16_r8(u2);
      q += 4 * AI_DW3_HB;
    }
    /* the assembly's pointer arithmetic, checked: the row ends where the plan says */
    s = t + w->sskip;
    d = (uint8_t *)(void *)q + w->dskip;
  }
#endif
}


/* one function per row shape and (Cortex-M4) channel count: the plan picks it once per call */
#define DW3_W2_FN(NAME, BODY, ...)                                                           \
  static void NAME(const dw3_walk2 *w, const int8_t *in, uint8_t *pl) {                      \
    BODY(w, in + w->s_off, pl + w->d_off, w->rows, __VA_ARGS__);                             \
  }
#if defined(AI_DW3_FILL_ASM)
DW3_W2_FN(dw3_w2_h8, dw3_fill2_walk_i, 1, 8)
DW3_W2_FN(dw3_w2_n8, dw3_fill2_walk_i, 0, 8)
DW3_W2_FN(dw3_w2_h16, dw3_fill2_walk_i, 1, 16)
DW3_W2_FN(dw3_w2_n16, dw3_fill2_walk_i, 0, 16)
DW3_W2_FN(dw3_w2_h32, dw3_fill2_walk_i, 1, 32)
DW3_W2_FN(dw3_w2_n32, dw3_fill2_walk_i, 0, 32)
DW3_W2_FN(dw3_w2_h64, dw3_fill2_walk_i, 1, 64)
DW3_W2_FN(dw3_w2_n64, dw3_fill2_walk_i, 0, 64)
#endif
DW3_W2_FN(dw3_w2_h, dw3_fill2_walk_g, 1)
DW3_W2_FN(dw3_w2_n, dw3_fill2_walk_g, 0)
#undef DW3_W2_FN

static int dw3_walk2_plan(dw3_walk2 *w, const dw3_view *v, int32_t iy0, int32_t rows, uint32_t pv) {
  const int32_t W = v->w, C = v->in_col, pad = v->pad_l;
  const int head = pad & 1; /* 2 * j0 - pad < 0 */
  if ((W & 3) != 0 || W < 8 + 4 * head) {
    return 0;
  }
  const int32_t a = iy0 < 0 ? 0 : iy0, b = iy0 + rows < v->h ? iy0 + rows : v->h;
  if (b <= a) {
    return 0; /* no image row (dw3_fill2 writes none either) */
  }
  const int32_t nq = (W - head) >> 2;
  w->nq = nq;
  w->pp = (pv & 0xFFu) * 0x0101u;
  w->pp16 = w->pp << 16;
  w->C = C;
  w->rows = b - a;
  w->s_off = a * v->in_row;
  w->d_off = DW3_ATG(2, 2 * (pad >> 1), a - iy0, 0);
  /* head: the last group is the tail's 3 pixels (W - 3 before them); else the row's end */
  w->sskip = head ? v->in_row - (W - 3) * C : v->in_row - W * C;
  w->dskip = 2 * 4 - (head ? 64 * (2 * nq + 3) : 128 * nq);
  w->sskip_i = head ? v->in_row - (W - 4) * C : v->in_row - W * C;
#if defined(AI_DW3_FILL_ASM)
  w->fn = C == 8    ? (head ? dw3_w2_h8 : dw3_w2_n8)
          : C == 16 ? (head ? dw3_w2_h16 : dw3_w2_n16)
          : C == 32 ? (head ? dw3_w2_h32 : dw3_w2_n32)
          : C == 64 ? (head ? dw3_w2_h64 : dw3_w2_n64)
                    : (head ? dw3_w2_h : dw3_w2_n);
#else
  w->fn = head ? dw3_w2_h : dw3_w2_n;
#endif
  return 1;
}

/* The same for a partial group (nch < G) or a depth multiplier > 1: output channel c0+k
 * reads input channel (c0+k)/mult, one byte at a time. */
static inline __attribute__((always_inline)) void dw3_fill_gather_g(
    const dw3_view *v, const int8_t *in, int32_t c0, int32_t nch, int32_t mult, int32_t iy0,
    int32_t rows, uint8_t *pl, const int32_t G) {
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t iy = iy0 + r;
    const int8_t *s = in + iy * v->in_row;
    for (int32_t ix = 0; ix < v->w; ++ix, s += v->in_col) {
      for (int32_t k = 0; k < nch; ++k) {
        const int32_t x = (iy < 0 || iy >= v->h) ? v->pad_value : s[(c0 + k) / mult];
        wr16(pl + DW3_ATG(G, v->pad_l + ix, r, k), (uint32_t)x);
      }
    }
  }
}

/* Out of line, as the fill: one copy per group size. */
static void dw3_fill_gather(const dw3_view *v, const int8_t *in, int32_t c0, int32_t nch,
                            int32_t mult, int32_t iy0, int32_t rows, uint8_t *pl) {
  dw3_fill_gather_g(v, in, c0, nch, mult, iy0, rows, pl, 4);
}
static void dw3_fill_gather2(const dw3_view *v, const int8_t *in, int32_t c0, int32_t nch,
                             int32_t mult, int32_t iy0, int32_t rows, uint8_t *pl) {
  dw3_fill_gather_g(v, in, c0, nch, mult, iy0, rows, pl, 2);
}

/* One kernel row (band rows K, words q[K], q[HB + K], ...) of two adjacent outputs:
 * l = {p0,p1}, h = {p2,p3}, n = {p4,p5}; wa = {w0,w1}, wb = {w1,w2}.
 *   out0 = SMLAD(l, wa) + p2*w2                 (SMLABT h, wb)
 *   out1 = SMLAD(h, wb) + p1*w0   (stride 1)    (SMLATB l, wa)
 *        = SMLAD(h, wa) + p4*w2   (stride 2)    (SMLABT n, wb) */
#define DW3_ROW_S1(G, K, WA, WB)                               \
  do {                                                         \
    const uint32_t l_ = q[(G) * (K)], h_ = q[(G) * (AI_DW3_HB + (K))]; \
    a0 = smlad(l_, WA, a0);                                    \
    a1 = smlad(h_, WB, a1);                                    \
    a0 = smlabt(h_, WB, a0);                                   \
    a1 = smlatb(l_, WA, a1);                                   \
  } while (0)
#define DW3_ROW_S2(G, K, WA, WB)                               \
  do {                                                         \
    const uint32_t l_ = q[(G) * (K)], h_ = q[(G) * (AI_DW3_HB + (K))]; \
    const uint32_t n_ = q[(G) * (2 * AI_DW3_HB + (K))];        \
    a0 = smlad(l_, WA, a0);                                    \
    a1 = smlad(h_, WA, a1);                                    \
    a0 = smlabt(h_, WB, a0);                                   \
    a1 = smlabt(n_, WB, a1);                                   \
  } while (0)
#define DW3_ONE(G, K, WA, WB)                                  \
  do {                                                         \
    a0 = smlad(q[(G) * (K)], WA, a0);                          \
    a0 = smlabt(q[(G) * (AI_DW3_HB + (K))], WB, a0);           \
  } while (0)

#if defined(__ARM_FEATURE_DSP)
/* r7 is the frame pointer of unoptimised builds: only optimised builds take the r7 bodies, on
 * the Cortex-M7 (AI_CORE_CM7) and on the Cortex-M4 (Armv7E-M without AI_CORE_CM7), where the
 * two row words loaded back to back pipeline (Cortex-M4 TRM §3.3.2: N loads in N+1 cycles).
 * Not on the Cortex-M33 (Armv8-M), whose timing this was not measured on. */
#if (defined(AI_CORE_CM7) || defined(__ARM_ARCH_7EM__)) && defined(__OPTIMIZE__) && !defined(AI_NO_ASM)
#define AI_DW3_R7 1
#endif
/* The rows in assembly: gcc's register allocation spills the six weight words and the
 * requantisation constants (45-50 instructions per pair). r0 data words, r1 outputs, r2
 * output column pitch, r3 the frame f (below DW3_ROWS_ASM); the weights are reloaded by
 * one LDM per 4 (or 2) outputs so that the requantisation can use their registers; lr
 * streams the data words. Cycle reasoning: docs/kernels_conv.md, "3x3 depthwise". */
/* One output pair (accumulators r11, r12) per kernel row K. A = the accumulator r11 starts
 * from: r11, or r12 (holding the bias) on the first row, which spares loading the bias
 * twice. */
#define DW3_MAC_S1(G, K, WA, WB, A)                        \
  "ldr lr, [r0, #" #K "*4*" #G "]\n\t"                     \
  "smlad r11, lr, " WA ", " A "\n\t"                       \
  "smlatb r12, lr, " WA ", r12\n\t"                        \
  "ldr lr, [r0, #32*" #G "+" #K "*4*" #G "]\n\t"           \
  "smlabt r11, lr, " WB ", r11\n\t"                        \
  "smlad r12, lr, " WB ", r12\n\t"
#define DW3_MAC_S2(G, K, WA, WB, A)                        \
  "ldr lr, [r0, #" #K "*4*" #G "]\n\t"                     \
  "smlad r11, lr, " WA ", " A "\n\t"                       \
  "ldr lr, [r0, #32*" #G "+" #K "*4*" #G "]\n\t"           \
  "smlabt r11, lr, " WB ", r11\n\t"                        \
  "smlad r12, lr, " WA ", r12\n\t"                         \
  "ldr lr, [r0, #64*" #G "+" #K "*4*" #G "]\n\t"           \
  "smlabt r12, lr, " WB ", r12\n\t"
/* Kernel row 0 last, its loads post-incrementing r0 to the next pair (no separate add). */
#define DW3_MAC_S1_LAST(G, WA, WB)                         \
  "ldr lr, [r0, #32*" #G "]\n\t"                           \
  "smlabt r11, lr, " WB ", r11\n\t"                        \
  "smlad r12, lr, " WB ", r12\n\t"                         \
  "ldr lr, [r0], #32*" #G "\n\t"                           \
  "smlad r11, lr, " WA ", r11\n\t"                         \
  "smlatb r12, lr, " WA ", r12\n\t"
#define DW3_MAC_S2_LAST(G, WA, WB)                         \
  "ldr lr, [r0, #64*" #G "]\n\t"                           \
  "smlabt r12, lr, " WB ", r12\n\t"                        \
  "ldr lr, [r0], #32*" #G "\n\t"                           \
  "smlad r11, lr, " WA ", r11\n\t"                         \
  "ldr lr, [r0], #32*" #G "\n\t"                           \
  "smlabt r11, lr, " WB ", r11\n\t"                        \
  "smlad r12, lr, " WA ", r12\n\t"
/* The single output of a row (accumulator r11, weights r4-r6, r8-r10 as loaded by the LDM
 * before it): its 6 words loaded into lr, r12 and r2 (free there: r2 is reloaded per row),
 * 3 of them back to back, so that they pipeline (Cortex-M4 TRM §3.3.2): 9 load cycles
 * instead of 12. Kernel rows 0, 1, 2: SMLAD(l, wa) + SMLABT(h, wb) each. */
#define DW3_MAC_ONE3(G)                                    \
  "ldr lr, [r0]\n\t"                                       \
  "ldr r12, [r0, #32*" #G "]\n\t"                          \
  "ldr r2, [r0, #4*" #G "]\n\t"                            \
  "smlad r11, lr, r4, r11\n\t"                             \
  "smlabt r11, r12, r5, r11\n\t"                           \
  "ldr lr, [r0, #32*" #G "+4*" #G "]\n\t"                  \
  "ldr r12, [r0, #8*" #G "]\n\t"                           \
  "smlad r11, r2, r6, r11\n\t"                             \
  "smlabt r11, lr, r8, r11\n\t"                            \
  "ldr lr, [r0, #32*" #G "+8*" #G "]\n\t"                  \
  "smlad r11, r12, r9, r11\n\t"                            \
  "smlabt r11, lr, r10, r11\n\t"
/* lo = klo ^ s, hi = khi + s (s = acc >> 31): 2 instructions, exactness proved per layer */
#define DW3_SGN_EOR(ACC)                                \
  "eor r9, r8, " ACC ", asr #31\n\t"                    \
  "add r10, r5, " ACC ", asr #31\n\t"
/* {hi, lo} = {khi, klo} - 2^31 * [acc < 0]: exact for every accumulator */
#define DW3_SGN_EXACT(ACC)                              \
  "asr r10, " ACC ", #31\n\t"                           \
  "adds r9, r8, r10, lsl #31\n\t"                       \
  "adc r10, r5, r10\n\t"
#define DW3_RQ_NOSTORE(SGN, ACC)                           \
  SGN(ACC)                                              \
  "smlal r9, r10, " ACC ", r4\n\t"                      \
  "asr r10, r10, r6\n\t"                                \
  "ssat r10, #8, r10\n\t"
#define DW3_RQN_EOR(ACC) DW3_RQ_NOSTORE(DW3_SGN_EOR, ACC)
#define DW3_RQN_EXACT(ACC) DW3_RQ_NOSTORE(DW3_SGN_EXACT, ACC)
/* the frame's requantisation words: m, khi, rs, klo, then the output pointer (lr) */
#define DW3_LDQ "ldmdb r3, {r4, r5, r6, r8, lr}\n\t"
#define DW3_RQ(RQN, ACC, DST)                              \
  RQN(ACC)                                              \
  "strb r10, " DST "\n\t"
/* Four adjacent outputs (two pairs) per kernel row, accumulators r1, r2, r11, r12: the words
 * of a row are loaded once for all four (stride 1: l, h, n = 3 loads instead of 2 x 2;
 * stride 2: 5 words instead of 2 x 3), and the weights and requantisation constants are
 * reloaded once per 4 outputs instead of once per 2. A0..A3: the registers the four
 * accumulators start from (themselves, or r12 = the bias on the first kernel row). */
#if defined(AI_DW3_R7)
/* Cortex-M7 (AI_CORE_CM7, optimised builds): the same MACs with the row words loaded into two
 * registers in turn (lr, r7), each load placed right after the last read of its register, so
 * that it runs ahead of its first SMLAD: on the M7 a MAC operand cannot take a load result from
 * the previous cycle (docs/estimate.md, "Cortex-M7"), which the single-register order above
 * pays on every load. Same loads in the same order (the post-incremented ones too). */
#define DW3_QMAC_S1_BODY(LDL, LDH, LDN, WA, WB, A0, A1, A2, A3) \
  "ldr lr, " LDL "\n\t"                                    \
  "ldr r7, " LDH "\n\t"                                    \
  "smlad r1, lr, " WA ", " A0 "\n\t"                       \
  "smlatb r2, lr, " WA ", " A1 "\n\t"                      \
  "ldr lr, " LDN "\n\t"                                    \
  "smlabt r1, r7, " WB ", r1\n\t"                          \
  "smlad r2, r7, " WB ", r2\n\t"                           \
  "smlad r11, r7, " WA ", " A2 "\n\t"                      \
  "smlatb r12, r7, " WA ", " A3 "\n\t"                     \
  "smlabt r11, lr, " WB ", r11\n\t"                        \
  "smlad r12, lr, " WB ", r12\n\t"
#define DW3_QMAC_S2_BODY(LD0, LD1, LD2, LD3, LD4, WA, WB, A0, A1, A2, A3) \
  "ldr lr, " LD0 "\n\t"                                    \
  "ldr r7, " LD1 "\n\t"                                    \
  "smlad r1, lr, " WA ", " A0 "\n\t"                       \
  "ldr lr, " LD2 "\n\t"                                    \
  "smlabt r1, r7, " WB ", r1\n\t"                          \
  "smlad r2, r7, " WA ", " A1 "\n\t"                       \
  "ldr r7, " LD3 "\n\t"                                    \
  "smlabt r2, lr, " WB ", r2\n\t"                          \
  "smlad r11, lr, " WA ", " A2 "\n\t"                      \
  "ldr lr, " LD4 "\n\t"                                    \
  "smlabt r11, r7, " WB ", r11\n\t"                        \
  "smlad r12, r7, " WA ", " A3 "\n\t"                      \
  "smlabt r12, lr, " WB ", r12\n\t"
#define DW3_CLOBBER_R7 "r7",
#else
#define DW3_QMAC_S1_BODY(LDL, LDH, LDN, WA, WB, A0, A1, A2, A3) \
  "ldr lr, " LDL "\n\t"                                    \
  "smlad r1, lr, " WA ", " A0 "\n\t"                       \
  "smlatb r2, lr, " WA ", " A1 "\n\t"                      \
  "ldr lr, " LDH "\n\t"                                    \
  "smlabt r1, lr, " WB ", r1\n\t"                          \
  "smlad r2, lr, " WB ", r2\n\t"                           \
  "smlad r11, lr, " WA ", " A2 "\n\t"                      \
  "smlatb r12, lr, " WA ", " A3 "\n\t"                     \
  "ldr lr, " LDN "\n\t"                                    \
  "smlabt r11, lr, " WB ", r11\n\t"                        \
  "smlad r12, lr, " WB ", r12\n\t"
#define DW3_QMAC_S2_BODY(LD0, LD1, LD2, LD3, LD4, WA, WB, A0, A1, A2, A3) \
  "ldr lr, " LD0 "\n\t"                                    \
  "smlad r1, lr, " WA ", " A0 "\n\t"                       \
  "ldr lr, " LD1 "\n\t"                                    \
  "smlabt r1, lr, " WB ", r1\n\t"                          \
  "smlad r2, lr, " WA ", " A1 "\n\t"                       \
  "ldr lr, " LD2 "\n\t"                                    \
  "smlabt r2, lr, " WB ", r2\n\t"                          \
  "smlad r11, lr, " WA ", " A2 "\n\t"                      \
  "ldr lr, " LD3 "\n\t"                                    \
  "smlabt r11, lr, " WB ", r11\n\t"                        \
  "smlad r12, lr, " WA ", " A3 "\n\t"                      \
  "ldr lr, " LD4 "\n\t"                                    \
  "smlabt r12, lr, " WB ", r12\n\t"
#define DW3_CLOBBER_R7
#endif
#define DW3_LDW(G, I, K) "[r0, #" #I "*32*" #G "+" #K "*4*" #G "]"
/* Kernel row 0 last: its loads post-increment r0 by one word column each (2 at stride 1,
 * 4 at stride 2: the next quad; LDR's post-index reaches 255, 64*G would not encode). */
#define DW3_LDP(G) "[r0], #32*" #G
#define DW3_QMAC_S1_FIRST(G, WA, WB)                                                          \
  DW3_QMAC_S1_BODY(DW3_LDW(G, 0, 2), DW3_LDW(G, 1, 2), DW3_LDW(G, 2, 2), WA, WB, "r12", "r12", \
                   "r12", "r12")
#define DW3_QMAC_S1(G, K, WA, WB)                                                             \
  DW3_QMAC_S1_BODY(DW3_LDW(G, 0, K), DW3_LDW(G, 1, K), DW3_LDW(G, 2, K), WA, WB, "r1", "r2",   \
                   "r11", "r12")
#define DW3_QMAC_S2_FIRST(G, WA, WB)                                                          \
  DW3_QMAC_S2_BODY(DW3_LDW(G, 0, 2), DW3_LDW(G, 1, 2), DW3_LDW(G, 2, 2), DW3_LDW(G, 3, 2),     \
                   DW3_LDW(G, 4, 2), WA, WB, "r12", "r12", "r12", "r12")
#define DW3_QMAC_S2(G, K, WA, WB)                                                             \
  DW3_QMAC_S2_BODY(DW3_LDW(G, 0, K), DW3_LDW(G, 1, K), DW3_LDW(G, 2, K), DW3_LDW(G, 3, K),     \
                   DW3_LDW(G, 4, K), WA, WB, "r1", "r2", "r11", "r12")
#if defined(AI_DW3_R7) && !defined(AI_CORE_CM7)
/* Cortex-M4 r7 bodies: the first load without writeback and the next ones pre-indexed with
 * writeback ("[r0, #32*G]!"): the same addresses and final r0, but the second load's address
 * no longer depends on the first load's writeback, so the two back-to-back loads pipeline
 * (Cortex-M4 TRM §3.3.2). */
#define DW3_LDX(G) "[r0, #32*" #G "]!"
#define DW3_QMAC_S1_LAST(G, WA, WB) \
  DW3_QMAC_S1_BODY("[r0]", DW3_LDX(G), DW3_LDX(G), WA, WB, "r1", "r2", "r11", "r12")
#define DW3_QMAC_S2_LAST(G, WA, WB)                                                           \
  DW3_QMAC_S2_BODY("[r0]", DW3_LDX(G), DW3_LDX(G), DW3_LDX(G), DW3_LDX(G), WA, WB, \
                   "r1", "r2", "r11", "r12")
#else
#define DW3_QMAC_S1_LAST(G, WA, WB) \
  DW3_QMAC_S1_BODY(DW3_LDP(G), DW3_LDP(G), "[r0]", WA, WB, "r1", "r2", "r11", "r12")
#define DW3_QMAC_S2_LAST(G, WA, WB)                                                           \
  DW3_QMAC_S2_BODY(DW3_LDP(G), DW3_LDP(G), DW3_LDP(G), DW3_LDP(G), "[r0]", WA, WB, \
                   "r1", "r2", "r11", "r12")
#endif
/* Per output row: quads (r1, r2 become accumulators; the output pointer and pitch live in
 * the frame meanwhile; the quad's end-of-row load sits right before its last register-offset
 * STRB, which then pipelines behind it, Cortex-M4 TRM §3.3.2), then at most one pair and one
 * single output. r3 points into the frame: LDM r3 = weights + bias, LDMDB r3 = the requantisation constants + the output
 * pointer (one LDM of 5 words, 6 cycles, instead of 2 LDRD + LDR, 8). The loop top is
 * word-aligned: a taken branch to a 32-bit instruction at a halfword address costs a cycle
 * more (Cortex-M4 TRM §3.3.1, branch "P" depends on the target's alignment and width). */
#define DW3_ROWS_ASM(G, QFIRST, QMAC, QLAST, MAC, LAST, RQN, LDQ)                          \
  "2:\n\t"                                                                         \
  "str r1, [r3, #-4]\n\t"                                                          \
  "ldr r4, [r3, #52]\n\t"                                                          \
  "cmp r4, #0\n\tbeq 5f\n\t"                                                       \
  "add lr, r0, r4\n\t"                                                             \
  "str lr, [r3, #36]\n\t"                                                          \
  ".p2align 2\n"                                                                   \
  "1:\n\t"                                                                         \
  "ldm r3, {r4, r5, r6, r8, r9, r10, r12}\n\t"                                     \
  QFIRST(G, "r9", "r10") QMAC(G, 1, "r6", "r8") QLAST(G, "r4", "r5")               \
  LDQ                                             \
  DW3_RQ(RQN, "r1", "[lr]")                                                        \
  "ldr r1, [r3, #32]\n\t"                                                          \
  DW3_RQ(RQN, "r2", "[lr, r1]")                                                    \
  "add lr, lr, r1, lsl #1\n\t"                                                     \
  DW3_RQ(RQN, "r11", "[lr]")                                                       \
  RQN("r12")                                                       \
  "ldr r9, [r3, #36]\n\t"                                                          \
  "strb r10, [lr, r1]\n\t"                                                         \
  "add lr, lr, r1, lsl #1\n\t"                                                     \
  "str lr, [r3, #-4]\n\t"                                                          \
  "cmp r0, r9\n\t"                                                                 \
  "bne 1b\n\t"                                                                     \
  "5:\n\t"                                                                         \
  "ldr r1, [r3, #-4]\n\t"                                                          \
  "ldr r2, [r3, #32]\n\t"                                                          \
  "ldr r4, [r3, #56]\n\t"                                                          \
  "cmp r4, #0\n\tbeq 3f\n\t"                                                       \
  "ldm r3, {r4, r5, r6, r8, r9, r10, r12}\n\t"                                     \
  MAC(G, 2, "r9", "r10", "r12") MAC(G, 1, "r6", "r8", "r11") LAST(G, "r4", "r5")   \
  LDQ                                             \
  DW3_RQ(RQN, "r11", "[r1]") DW3_RQ(RQN, "r12", "[r1, r2]")                        \
  "add r1, r1, r2, lsl #1\n\t"                                                     \
  "3:\n\t"                                                                         \
  "ldr r4, [r3, #60]\n\t"                                                          \
  "cmp r4, #0\n\tbeq 4f\n\t"                                                       \
  "ldm r3, {r4, r5, r6, r8, r9, r10, r11}\n\t"                                     \
  DW3_MAC_ONE3(G)                                                                  \
  LDQ                                             \
  DW3_RQ(RQN, "r11", "[r1]")                                                       \
  "4:\n\t"                                                                         \
  "ldrd r4, r5, [r3, #44]\n\t"                                                     \
  "add r1, r1, r4\n\t"                                                             \
  "add r0, r0, r5\n\t"                                                             \
  "ldr lr, [r3, #40]\n\t"                                                          \
  "subs lr, lr, #1\n\t"                                                            \
  "str lr, [r3, #40]\n\t"                                                          \
  "bne 2b\n\t"

/* The frame f; r3 = f + 5 (byte offsets from r3 in the assembly): -20 m, khi, rs, klo,
 * -4 output pointer; 0 {w0a, w0b, w1a, w1b, w2a, w2b}, 24 bias, 28 bias (the quad's and
 * the pair's LDM take the weights and one bias, the single output's the other), 32 output
 * pitch, 36 end of the row's quads (r0), 40 rows left, 44 output / data pointer deltas to
 * the next row, 52 data bytes the quads advance, 56 a pair left (ow & 2), 60 a single
 * output left (ow & 1). */
#define DW3_ROWS_CALL(G, SV, RQN, LDQ)                                                         \
  register const uint32_t *q_ __asm__("r0") = plane;                                           \
  register int8_t *o_ __asm__("r1") = out;                                                     \
  register int32_t c_ __asm__("r2") = f[13];                                                   \
  register int32_t *f_ __asm__("r3") = f + 5;                                                  \
  __asm__ volatile(DW3_ROWS_ASM(G, DW3_QMAC_##SV##_FIRST, DW3_QMAC_##SV, DW3_QMAC_##SV##_LAST,  \
                                DW3_MAC_##SV, DW3_MAC_##SV##_LAST, RQN, LDQ)                   \
                   : "+r"(q_), "+r"(o_), "+r"(c_)                                              \
                   : "r"(f_)                                                                   \
                   : DW3_CLOBBER_R7 "r4", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr",     \
                     "cc", "memory")
#define DW3_ROWS_FN(NAME, G, S, SV, RQN)                                                       \
  static void NAME(const uint32_t *plane, int32_t *f, const int32_t *k, int8_t *out) {         \
    /* the channel's constants into the band's frame (dw3_frame wrote the geometry) */        \
    f[0] = k[7];                                                                               \
    f[1] = k[8];                                                                               \
    f[2] = k[9];                                                                               \
    f[3] = DW3_KLO(k[9]);                                                                      \
    memcpy(f + 5, k, 6 * sizeof(int32_t));                                                     \
    f[11] = k[6];                                                                              \
    f[12] = k[6];                                                                              \
    f[15] = f[21];                                                                             \
    DW3_ROWS_CALL(G, SV, RQN, DW3_LDQ);                                                        \
  }
DW3_ROWS_FN(dw3_rows_s1, 4, 1, S1, DW3_RQN_EOR)
DW3_ROWS_FN(dw3_rows_s2, 4, 2, S2, DW3_RQN_EOR)
DW3_ROWS_FN(dw3_rows_s1x, 4, 1, S1, DW3_RQN_EXACT)
DW3_ROWS_FN(dw3_rows_s2x, 4, 2, S2, DW3_RQN_EXACT)
DW3_ROWS_FN(dw3_rows_g2_s1, 2, 1, S1, DW3_RQN_EOR)
DW3_ROWS_FN(dw3_rows_g2_s2, 2, 2, S2, DW3_RQN_EOR)
DW3_ROWS_FN(dw3_rows_g2_s1x, 2, 1, S1, DW3_RQN_EXACT)
DW3_ROWS_FN(dw3_rows_g2_s2x, 2, 2, S2, DW3_RQN_EXACT)
#if defined(AI_DW3_R7) && !defined(AI_CORE_CM7)
/* Cortex-M4 only (`rqd`, the doubled accumulator; docs/kernels_conv.md "3x3 depthwise,
 * doubled accumulator"). The rows run on 2*acc: the frame takes the channel's weight pairs and
 * bias doubled (each int16 half of an int8 or int9 weight doubles within int16; the bias modulo
 * 2^32 like the accumulator, whose doubled final value the lowering proved an int32), and
 * m, K = 2*khi, rs + 1 at f[24..26], the output pointer at f[27]. The requantisation needs no
 * temporary (it runs in the accumulator; `rqd` 2's sign term in r7) and no longer touches
 * r8-r10, so the quad loop keeps w1b, w2a, w2b across quads and reloads only w0a, w0b, w1a and
 * the bias, from their copy at f[1..4] (LDMDB, 5 cycles instead of the 7-register LDM's 8). */
#define AI_DW3_DQ 1
#define DW3_RQA_MM0(ACC)                                \
  "smmlar " ACC ", " ACC ", r4, r5\n\t"                 \
  "asr " ACC ", " ACC ", r6\n\t"                        \
  "ssat " ACC ", #8, " ACC "\n\t"
#define DW3_RQA_MM(ACC)                                 \
  "add r7, r5, " ACC ", asr #31\n\t"                    \
  "smmlar " ACC ", " ACC ", r4, r7\n\t"                 \
  "asr " ACC ", " ACC ", r6\n\t"                        \
  "ssat " ACC ", #8, " ACC "\n\t"
/* m, K, rs + 1 and the output pointer (4 single loads back to back: 5 cycles, as an LDM) */
#define DW3_LDQ_DQ                                      \
  "ldr r4, [r3, #76]\n\t"                               \
  "ldr r5, [r3, #80]\n\t"                               \
  "ldr r6, [r3, #84]\n\t"                               \
  "ldr lr, [r3, #88]\n\t"
#define DW3_ROWS_ASM_DQ(G, QFIRST, QMAC, QLAST, MAC, LAST, RQA)                       \
  "2:\n\t"                                                                         \
  "str r1, [r3, #88]\n\t"                                                          \
  "ldr r4, [r3, #52]\n\t"                                                          \
  "cmp r4, #0\n\tbeq 5f\n\t"                                                       \
  "add lr, r0, r4\n\t"                                                             \
  "str lr, [r3, #36]\n\t"                                                          \
  "ldm r3, {r4, r5, r6, r8, r9, r10, r12}\n\t"                                     \
  ".p2align 2\n"                                                                   \
  "1:\n\t"                                                                         \
  QFIRST(G, "r9", "r10") QMAC(G, 1, "r6", "r8") QLAST(G, "r4", "r5")               \
  DW3_LDQ_DQ                                                                       \
  RQA("r1") "strb r1, [lr]\n\t"                                                    \
  "ldr r1, [r3, #32]\n\t"                                                          \
  RQA("r2") "strb r2, [lr, r1]\n\t"                                                \
  "add lr, lr, r1, lsl #1\n\t"                                                     \
  RQA("r11") "strb r11, [lr]\n\t"                                                  \
  RQA("r12")                                                                       \
  "ldr r2, [r3, #36]\n\t"                                                          \
  "strb r12, [lr, r1]\n\t"                                                         \
  "add lr, lr, r1, lsl #1\n\t"                                                     \
  "str lr, [r3, #88]\n\t"                                                          \
  "ldmdb r3, {r4, r5, r6, r12}\n\t"                                                \
  "cmp r0, r2\n\t"                                                                 \
  "bne 1b\n\t"                                                                     \
  "5:\n\t"                                                                         \
  "ldr r1, [r3, #88]\n\t"                                                          \
  "ldr r2, [r3, #32]\n\t"                                                          \
  "ldr r4, [r3, #56]\n\t"                                                          \
  "cmp r4, #0\n\tbeq 3f\n\t"                                                       \
  "ldm r3, {r4, r5, r6, r8, r9, r10, r12}\n\t"                                     \
  MAC(G, 2, "r9", "r10", "r12") MAC(G, 1, "r6", "r8", "r11") LAST(G, "r4", "r5")   \
  DW3_LDQ_DQ                                                                       \
  RQA("r11") "strb r11, [r1]\n\t"                                                  \
  RQA("r12") "strb r12, [r1, r2]\n\t"                                              \
  "add r1, r1, r2, lsl #1\n\t"                                                     \
  "3:\n\t"                                                                         \
  "ldr r4, [r3, #60]\n\t"                                                          \
  "cmp r4, #0\n\tbeq 4f\n\t"                                                       \
  "ldm r3, {r4, r5, r6, r8, r9, r10, r11}\n\t"                                     \
  DW3_MAC_ONE3(G)                                                                  \
  DW3_LDQ_DQ                                                                       \
  RQA("r11") "strb r11, [r1]\n\t"                                                  \
  "4:\n\t"                                                                         \
  "ldrd r4, r5, [r3, #44]\n\t"                                                     \
  "add r1, r1, r4\n\t"                                                             \
  "add r0, r0, r5\n\t"                                                             \
  "ldr lr, [r3, #40]\n\t"                                                          \
  "subs lr, lr, #1\n\t"                                                            \
  "str lr, [r3, #40]\n\t"                                                          \
  "bne 2b\n\t"
/* The doubled frame from the channel's 10 packed words: one LDM (the words in address order:
 * each flash line once), SADD16 doubles each int16 weight half (exact: int8 or int9 values),
 * LSL the bias and khi (modulo 2^32), then 3 STMs; the row counter f[15] = f[21]. */
#define DW3_ROWS_DQ_FN(NAME, G, S, SV, RQA)                                                    \
  static void NAME(const uint32_t *plane, int32_t *f, const int32_t *k, int8_t *out) {         \
    const int32_t *kk = k;                                                                     \
    __asm__ volatile("ldm %[k], {r4, r5, r6, r7, r8, r9, r10, r11, r12, lr}\n\t"                \
                     "sadd16 r4, r4, r4\n\t"                                                   \
                     "sadd16 r5, r5, r5\n\t"                                                   \
                     "sadd16 r6, r6, r6\n\t"                                                   \
                     "sadd16 r7, r7, r7\n\t"                                                   \
                     "sadd16 r8, r8, r8\n\t"                                                   \
                     "sadd16 r9, r9, r9\n\t"                                                   \
                     "lsl r10, r10, #1\n\t"                                                    \
                     "lsl r12, r12, #1\n\t"                                                    \
                     "add lr, lr, #1\n\t"                                                      \
                     "add %[k], %[f], #4\n\t"                                                  \
                     "stm %[k]!, {r4, r5, r6, r10}\n\t" /* f[1..4]; %[k] = f + 5 */             \
                     "stm %[k], {r4, r5, r6, r7, r8, r9, r10}\n\t"                             \
                     "str r10, [%[f], #48]\n\t"                                                \
                     "add %[k], %[f], #96\n\t"                                                 \
                     "stm %[k], {r11, r12, lr}\n\t"                                            \
                     "ldr r4, [%[f], #84]\n\t"                                                 \
                     "str r4, [%[f], #60]\n\t"                                                 \
                     : [k] "+r"(kk)                                                            \
                     : [f] "r"(f)                                                              \
                     : "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "memory"); \
    register const uint32_t *q_ __asm__("r0") = plane;                                         \
    register int8_t *o_ __asm__("r1") = out;                                                   \
    register int32_t c_ __asm__("r2") = f[13];                                                 \
    register int32_t *f_ __asm__("r3") = f + 5;                                                \
    __asm__ volatile(DW3_ROWS_ASM_DQ(G, DW3_QMAC_##SV##_FIRST, DW3_QMAC_##SV,                  \
                                     DW3_QMAC_##SV##_LAST, DW3_MAC_##SV, DW3_MAC_##SV##_LAST,  \
                                     RQA)                                                      \
                     : "+r"(q_), "+r"(o_), "+r"(c_)                                            \
                     : "r"(f_)                                                                 \
                     : "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc",    \
                       "memory");                                                              \
  }
DW3_ROWS_DQ_FN(dw3_rows_s1d, 4, 1, S1, DW3_RQA_MM)
DW3_ROWS_DQ_FN(dw3_rows_s2d, 4, 2, S2, DW3_RQA_MM)
DW3_ROWS_DQ_FN(dw3_rows_s1d0, 4, 1, S1, DW3_RQA_MM0)
DW3_ROWS_DQ_FN(dw3_rows_s2d0, 4, 2, S2, DW3_RQA_MM0)
DW3_ROWS_DQ_FN(dw3_rows_g2_s1d, 2, 1, S1, DW3_RQA_MM)
DW3_ROWS_DQ_FN(dw3_rows_g2_s2d, 2, 2, S2, DW3_RQA_MM)
DW3_ROWS_DQ_FN(dw3_rows_g2_s1d0, 2, 1, S1, DW3_RQA_MM0)
DW3_ROWS_DQ_FN(dw3_rows_g2_s2d0, 2, 2, S2, DW3_RQA_MM0)
/* Stripe calls (dw3_stripe_g2p) of a member whose packed constants the stripe pass emitted
 * pre-doubled (`rqd` 4 / 5 = 2 / 3 on {2w, 2 bias, m, 2 khi, rs + 1}, passes/stripe_dw3.py):
 * both channels of a pair per call, each channel's frame copied from its record as it is (no
 * SADD16 / LSL / ADD: 9 instructions fewer per channel; nor f[12], which only the rows of
 * `rqd` 0 read). The loop over the two channels is in the assembly, its state (plane, output
 * and record pointers, the pair's end) in 4 stack words: one LDM / STM each per channel
 * instead of a call, a register save and restore per channel; one copy of the rows (the
 * stripe's loop of fill, driver and rows must stay within the 1 KB flash I-cache). r0 plane,
 * r1 output, r2 record, r3 = f + 5 as in DW3_ROWS_DQ_FN (whose rows never read r2 before
 * writing it). */
#define DW3_ROWS_DQP_FN(NAME, G, S, SV, RQA)                                                   \
  static void NAME(const uint32_t *plane, int32_t *f, const int32_t *k, int8_t *out) {         \
    register const uint32_t *q_ __asm__("r0") = plane;                                         \
    register int8_t *o_ __asm__("r1") = out;                                                   \
    register const int32_t *k_ __asm__("r2") = k;                                              \
    register int32_t *f_ __asm__("r3") = f + 5;                                                \
    __asm__ volatile("add r4, r2, #80\n\t" /* the pair's records end */                        \
                     "sub sp, sp, #16\n\t"                                                     \
                     "str r4, [sp, #12]\n"                                                     \
                     "6:\n\t"                                                                  \
                     "ldm r2!, {r4, r5, r6, r7, r8, r9, r10, r11, r12, lr}\n\t"                 \
                     "stm sp, {r0, r1, r2}\n\t"                                                \
                     "sub r2, r3, #16\n\t"                                                     \
                     "stm r2!, {r4, r5, r6, r10}\n\t" /* f[1..4]; r2 = f + 5 */                 \
                     "stm r2, {r4, r5, r6, r7, r8, r9, r10}\n\t"                               \
                     "add r2, r3, #76\n\t"                                                     \
                     "stm r2, {r11, r12, lr}\n\t" /* f[24..26] */                              \
                     "ldr r4, [r3, #64]\n\t"                                                   \
                     "str r4, [r3, #40]\n\t" /* f[15] = f[21] */                               \
                     DW3_ROWS_ASM_DQ(G, DW3_QMAC_##SV##_FIRST, DW3_QMAC_##SV,                  \
                                     DW3_QMAC_##SV##_LAST, DW3_MAC_##SV, DW3_MAC_##SV##_LAST,  \
                                     RQA)                                                      \
                     "ldm sp, {r0, r1, r2, r4}\n\t"                                            \
                     "adds r0, r0, #4\n\t" /* the pair's other plane word, output byte */      \
                     "adds r1, r1, #1\n\t"                                                     \
                     "cmp r2, r4\n\t"                                                          \
                     "bne 6b\n\t"                                                              \
                     "add sp, sp, #16\n\t"                                                     \
                     : "+r"(q_), "+r"(o_), "+r"(k_)                                            \
                     : "r"(f_)                                                                 \
                     : "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc",    \
                       "memory");                                                              \
  }
DW3_ROWS_DQP_FN(dw3_rows_g2_s1p, 2, 1, S1, DW3_RQA_MM)
DW3_ROWS_DQP_FN(dw3_rows_g2_s2p, 2, 2, S2, DW3_RQA_MM)
DW3_ROWS_DQP_FN(dw3_rows_g2_s1p0, 2, 1, S1, DW3_RQA_MM0)
DW3_ROWS_DQP_FN(dw3_rows_g2_s2p0, 2, 2, S2, DW3_RQA_MM0)
#endif
#else
/* Portable C: the same data layout, pairs and arithmetic. */
#define DW3_ROWS_FN(NAME, G, S, ROW, X)                                                            \
  static void NAME(const uint32_t *plane, int32_t *f, const int32_t *k, int8_t *out) {         \
    const int32_t nrows = f[21], ow = f[22], out_pitch = f[23], C = f[13];                     \
    const uint32_t w0a = (uint32_t)k[0], w0b = (uint32_t)k[1], w1a = (uint32_t)k[2];           \
    const uint32_t w1b = (uint32_t)k[3], w2a = (uint32_t)k[4], w2b = (uint32_t)k[5];           \
    const int32_t bias = k[6], m = k[7], khi = k[8], rs = k[9];                                \
    for (int32_t r = 0; r < nrows; ++r, out += out_pitch) {                                    \
      const uint32_t *q = plane + (G) * r * (S);                                                 \
      int8_t *o = out;                                                                         \
      for (int32_t j = ow >> 1; j > 0; --j, q += (G) * (S) * AI_DW3_HB, o += 2 * C) {           \
        int32_t a0 = bias, a1 = bias;                                                          \
        ROW(G, 0, w0a, w0b);                                                                      \
        ROW(G, 1, w1a, w1b);                                                                      \
        ROW(G, 2, w2a, w2b);                                                                      \
        o[0] = (int8_t)dw3_rq(a0, m, khi, rs, X);                                              \
        o[C] = (int8_t)dw3_rq(a1, m, khi, rs, X);                                              \
      }                                                                                        \
      if (ow & 1) {                                                                            \
        int32_t a0 = bias;                                                                     \
        DW3_ONE(G, 0, w0a, w0b);                                                                  \
        DW3_ONE(G, 1, w1a, w1b);                                                                  \
        DW3_ONE(G, 2, w2a, w2b);                                                                  \
        o[0] = (int8_t)dw3_rq(a0, m, khi, rs, X);                                              \
      }                                                                                        \
    }                                                                                          \
  }
DW3_ROWS_FN(dw3_rows_s1, 4, 1, DW3_ROW_S1, 0)
DW3_ROWS_FN(dw3_rows_s2, 4, 2, DW3_ROW_S2, 0)
DW3_ROWS_FN(dw3_rows_s1x, 4, 1, DW3_ROW_S1, 1)
DW3_ROWS_FN(dw3_rows_s2x, 4, 2, DW3_ROW_S2, 1)
DW3_ROWS_FN(dw3_rows_g2_s1, 2, 1, DW3_ROW_S1, 0)
DW3_ROWS_FN(dw3_rows_g2_s2, 2, 2, DW3_ROW_S2, 0)
DW3_ROWS_FN(dw3_rows_g2_s1x, 2, 1, DW3_ROW_S1, 1)
DW3_ROWS_FN(dw3_rows_g2_s2x, 2, 2, DW3_ROW_S2, 1)
#endif

/* The frame of a band's row calls (DW3_ROWS_FN; offsets in the comment above it): words 13
 * and 16-20 are the band's geometry, 21-23 its rows, outputs per row and output row pitch
 * (read by the C rows and to reset the row counter); each channel's call writes only its
 * constants (0-3, 5-12, 24-27), the output pointer (4), the quads' end (14) and the row
 * counter (15), so the driver builds it once per band height, not per group and band. Out of
 * line: one-row band calls (stripes, --optimization ram) loop over the channel groups with
 * the driver, fill and rows code all live, and that loop must fit the flash I-cache (1 KB on
 * the STM32L4+, RM0432 §3.3.4) to run from it (docs/kernels_conv.md). */
#if defined(AI_DW3_DQ)
#define DW3_FRAME_WORDS 28 /* 24-27: the doubled rows' requantisation words */
/* Cortex-M4 only (the L4+'s I-cache): other builds keep their objects byte-identical (their
 * code placement, which other kernels' loops are sensitive to) and build the frame per band. */
#define DW3_FRAME_ATTR __attribute__((noinline))
/* Code placement only: dw3_frame (80 B with its alignment) out of line made the 4-channel
 * driver 88 B and the 2-channel one 96 B shorter; these nops keep each driver + dw3_frame at
 * the size before, so that the kernels linked after them keep their alignment (VWW's
 * smallk_win loops cost +4 % estimated cycles on nucleo-l4r5zi shifted by -8 B). */
#define DW3_PAD_G4() __asm__ volatile("nop\n\tnop\n\tnop\n\tnop")
#define DW3_PAD_G2() __asm__ volatile("nop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop")
#define DW3_FRAME_BUILD(F, F_NR, G, S, NR, OW, PITCH, C)                                         \
  if ((NR) != (F_NR)) { /* the geometry once per band height, not per group and band */         \
    dw3_frame(F, G, S, NR, OW, PITCH, C);                                                        \
    F_NR = (NR);                                                                                 \
  }
#else
#define DW3_FRAME_WORDS 24
#define DW3_FRAME_ATTR inline
#define DW3_PAD_G4()
#define DW3_PAD_G2()
#define DW3_FRAME_BUILD(F, F_NR, G, S, NR, OW, PITCH, C)                                         \
  (void)(F_NR);                                                                                  \
  dw3_frame(F, G, S, NR, OW, PITCH, C);
#endif
static DW3_FRAME_ATTR void dw3_frame(int32_t *f, int32_t G, int32_t S, int32_t nrows, int32_t ow,
                             int32_t out_pitch, int32_t C) {
  const int32_t step = 32 * G * S; /* data bytes per output pair */
  f[4] = 0;
  f[13] = C;
  f[14] = 0;
  f[16] = out_pitch - (ow >> 1) * 2 * C;
  f[17] = 4 * G * S - (ow >> 1) * step;
  f[18] = (ow >> 2) * 2 * step;
  f[19] = ow & 2;
  f[20] = ow & 1;
  f[21] = nrows;
  f[22] = ow;
  f[23] = out_pitch;
}

/* The driver of the 3x3 kernels, one per group size G (4 channels, or 2 in the _g2 kernels;
 * its fill and rows functions), generated from one template: each is inlined into its two
 * kernels with a constant `sgn`, so that a model links only the kernels it calls and the
 * calls stay direct. A template rather than a G parameter: with G a parameter, gcc allocates
 * the registers of the inlined copies differently (2-5 instructions more per kernel). */
/* The Cortex-M4's doubled-accumulator rows (`rqd` 2 / 3) ahead of the others; other builds
 * ignore `rqd` (the packed constants are the same). */
#if defined(AI_DW3_DQ)
/* Cortex-M4: the rows function chosen once per call (the doubled-accumulator rows for `rqd`
 * 2 / 3), one indirect call per channel instead of the tests; other builds ignore `rqd` (the
 * packed constants are the same) and keep their direct calls. */
typedef void dw3_rows_fn(const uint32_t *plane, int32_t *f, const int32_t *k, int8_t *out);
#define DW3_DQ_SEL(G, SUF) ((G) == 2 ? dw3_rows_g2_##SUF : dw3_rows_##SUF)
#define DW3_ROWS_PICK(G, RQD, S, SGN, ROWS_S1, ROWS_S1X, ROWS_S2, ROWS_S2X)                         \
  dw3_rows_fn *const rows_ =                                                                     \
      (RQD) == 3   ? ((S) == 1 ? DW3_DQ_SEL(G, s1d0) : DW3_DQ_SEL(G, s2d0))                        \
      : (RQD) == 2 ? ((S) == 1 ? DW3_DQ_SEL(G, s1d) : DW3_DQ_SEL(G, s2d))                          \
      : (S) == 1   ? ((SGN) ? ROWS_S1X : ROWS_S1)                                                \
                   : ((SGN) ? ROWS_S2X : ROWS_S2);
#define DW3_RUN_ROWS(S, SGN, ROWS_S1, ROWS_S1X, ROWS_S2, ROWS_S2X, PL, FR, KC, O) rows_(PL, FR, KC, O);
#else
#define DW3_ROWS_PICK(G, RQD, S, SGN, ROWS_S1, ROWS_S1X, ROWS_S2, ROWS_S2X)
#define DW3_RUN_ROWS(S, SGN, ROWS_S1, ROWS_S1X, ROWS_S2, ROWS_S2X, PL, FR, KC, O)                  \
  if ((S) == 1) {                                                                                \
    ((SGN) ? ROWS_S1X : ROWS_S1)(PL, FR, KC, O);                                                 \
  } else {                                                                                       \
    ((SGN) ? ROWS_S2X : ROWS_S2)(PL, FR, KC, O);                                                 \
  }
#endif
/* A stripe's one-band call through its own loop (DW3_RUN_FN): on the Cortex-M4 (measured) and
 * the host (tested); the other Arm builds keep their objects as they were (code placement). */
#if defined(AI_DW3_DQ) || !defined(__arm__)
#define DW3_STRIPE_LOOP 1
#else
#define DW3_STRIPE_LOOP 0
#endif
/* `rqd` 4 / 5: the row-window entries only (a stripe member on the Cortex-M4 whose packed
 * constants the stripe pass pre-doubled, passes/stripe_dw3.py); win is the constant 0 in the
 * usual entries, where this folds away. */
#define DW3_PRE(WIN, P) ((WIN) != 0 && (P)->rqd >= 4)
/* A pre-doubled record as the other rows take it: each int16 weight and the bias halved
 * (exact: the stripe pass doubled them), khi halved, rs - 1; DW3_ROWS_PICK then picks the
 * rows of `rqd` 0 for 4 / 5 (exact: the lowering chose the kernel for them). */
static void dw3_undouble(const int32_t *k, int32_t *t) {
  for (int32_t i = 0; i < 6; ++i) {
    const uint32_t u = (uint32_t)k[i];
    const int32_t lo = (int16_t)(uint16_t)(u & 0xFFFFu), hi = (int16_t)(uint16_t)(u >> 16);
    t[i] = (int32_t)(((uint32_t)(lo / 2) & 0xFFFFu) | ((uint32_t)(hi / 2) << 16));
  }
  t[6] = k[6] / 2;
  t[7] = k[7];
  t[8] = k[8] / 2;
  t[9] = k[9] - 1;
}
#define DW3_KC(WIN, P, KC, T) (DW3_PRE(WIN, P) ? (dw3_undouble(KC, T), (const int32_t *)(T)) : (KC))
#define DW3_RUN_FN(NAME, G, FILL, GATHER, ROWS_S1, ROWS_S1X, ROWS_S2, ROWS_S2X)                   \
  static inline __attribute__((always_inline)) void NAME(                                         \
      const ai_depthwise_conv2d_3x3_s8_params *p, const ai_row_window *win, const int8_t *input, \
      const int32_t *packed, int8_t *output, void *scratch, const int sgn) {                      \
    /* the parameters on the stack: the byte stores may alias them, and reloads from a const   \
     * struct in flash would cost wait states (docs/flash_staging.md); with the row window     \
     * (win NULL, constant-folded: the usual entry's code unchanged, no placement move) */      \
    ai_depthwise_conv2d_3x3_s8_params local_ = *p;                                                \
    if (win != 0) {                                                                               \
      local_.out_h = win->out_h;                                                                  \
      local_.pad[0] = win->pad_top;                                                               \
      local_.in_h = win->in_h;                                                                    \
    }                                                                                             \
    p = &local_;                                                                                  \
    const int32_t C = p->in_c, OC = p->out_c, S = p->stride[0];                                   \
    dw3_view v = {p->in_h, p->in_w, p->pad[0], p->pad[1], p->in_w * C, C,                         \
                  p->out_h, p->out_w, p->out_w * OC, OC, p->pad_value};                           \
    if (p->transpose) { /* walk columns: longer pixel runs, fewer rows (weights transposed) */    \
      const dw3_view t = {p->in_w, p->in_h, p->pad[1], p->pad[0], C, p->in_w * C,                 \
                          p->out_w, p->out_h, OC, p->out_w * OC, p->pad_value};                   \
      v = t;                                                                                      \
    }                                                                                             \
    const int32_t R = (AI_DW3_HB - 3) / S + 1;              /* output rows per band */            \
    const int32_t plane_w32 = (p->plane_w / 2) * AI_DW3_HB; /* words per plane */                 \
    uint32_t *pl = (uint32_t *)scratch;                                                           \
    const uint32_t pv = ((uint32_t)p->pad_value & 0xFFFFu) * 0x10001u;                            \
    /* the fill writes whole words [j0, j_end) of every band row (rows outside the image as     \
     * pad_value unless pad_clean): only the padding columns outside them are written here, once \
     * per call (a stripe calls the kernel per band, docs/stripes.md); the gather (a partial    \
     * group, a multiplier) writes half-words: the whole planes then */                          \
    const int whole = win == 0 || OC != C || OC % (G) != 0;                                       \
    const int32_t jw = (G) * AI_DW3_HB; /* words per column pair */                               \
    const int32_t f0 = whole ? 0 : (v.pad_l >> 1) * jw;                                           \
    const int32_t f1 = whole ? 0 : ((v.pad_l + v.w + 1) >> 1) * jw;                               \
    for (int32_t i = 0; i < f0; ++i) {                                                            \
      pl[i] = pv; /* padding columns are never overwritten */                                     \
    }                                                                                             \
    for (int32_t i = f1; i < (G) * plane_w32; ++i) {                                              \
      pl[i] = pv;                                                                                 \
    }                                                                                             \
    /* one band per image (KWS walked transposed, small VWW layers, stripe calls): no band row \
     * outside the image ever receives image data, so the fill skips them and their words get   \
     * pad_value here, once per call (by the whole-plane fill above for a gather) */            \
    const int pad_clean = v.oh <= R;                                                              \
    if (pad_clean && !whole) {                                                                    \
      const int32_t rows0 = (v.oh - 1) * S + 3;                                                   \
      for (int32_t r = 0; r < rows0; ++r) {                                                       \
        if ((uint32_t)(r - v.pad_t) < (uint32_t)v.h) {                                            \
          continue;                                                                               \
        }                                                                                         \
        for (int32_t i = f0 + r * (G); i < f1; i += jw) {                                         \
          for (int32_t k = 0; k < (G); ++k) {                                                     \
            pl[i + k] = pv;                                                                       \
          }                                                                                       \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
    DW3_ROWS_PICK(G, p->rqd, S, sgn, ROWS_S1, ROWS_S1X, ROWS_S2, ROWS_S2X)                        \
    /* the rows calls never write the frame's geometry words (dw3_frame) */                       \
    int32_t fr[DW3_FRAME_WORDS];                                                                  \
    int32_t kt_[AI_DW3_K]; /* a pre-doubled channel's record halved (DW3_KC) */                   \
    (void)kt_;                                                                                    \
    int32_t fr_nr = 0; /* band height fr was built for (0: not yet) */                            \
    if (DW3_STRIPE_LOOP && (G) == 2 && win != 0 && p->batches == 1 && !p->stage && !whole &&       \
        pad_clean) {                                                                              \
      /* a stripe's call (docs/stripes.md, fill36): one band of whole groups, the loop of the     \
       * general case below without its batch, band, gather and staging state (kept in           \
       * registers: ~40 fewer instructions per channel group on VWW) */                           \
      const int32_t rows1 = (v.oh - 1) * S + 3;                                                   \
      DW3_FRAME_BUILD(fr, fr_nr, (G), S, v.oh, v.ow, v.out_row, v.out_col)                        \
      const int32_t *kc = packed;                                                                 \
      dw3_walk2 wk_; /* the fill's walk planned once for all channel pairs (VWW's row shapes) */  \
      const int walk_ = (G) == 2 && dw3_walk2_plan(&wk_, &v, -v.pad_t, rows1, pv);                \
      for (int32_t c0 = 0; c0 < OC; c0 += (G)) {                                                  \
        if (walk_) {                                                                              \
          wk_.fn(&wk_, input + c0, (uint8_t *)pl);                                                \
        } else {                                                                                  \
          FILL(&v, input + c0, -v.pad_t, rows1, (uint8_t *)pl, pv, 1);                            \
        }                                                                                         \
        for (int32_t k = 0; k < (G); ++k, kc += AI_DW3_K) {                                       \
          const int32_t *kr = DW3_KC(win, p, kc, kt_);                                            \
          DW3_RUN_ROWS(S, sgn, ROWS_S1, ROWS_S1X, ROWS_S2, ROWS_S2X, pl + k, fr, kr, output + c0 + k) \
        }                                                                                         \
      }                                                                                           \
      return;                                                                                     \
    }                                                                                             \
    for (int32_t b = 0; b < p->batches; ++b) {                                                    \
      const int8_t *in = input + b * p->in_h * p->in_w * C;                                       \
      int8_t *out = output + b * p->out_h * p->out_w * OC;                                        \
      for (int32_t c0 = 0; c0 < OC; c0 += (G)) {                                                  \
        const int32_t nch = OC - c0 < (G) ? OC - c0 : (G);                                        \
        const int32_t *kg = packed + c0 * AI_DW3_K;                                               \
        if (p->stage) { /* the group's constants once, not once per band */                      \
          int32_t *st = (int32_t *)(void *)(pl + (G) * plane_w32);                                \
          memcpy(st, kg, (size_t)nch * AI_DW3_K * sizeof(int32_t));                               \
          kg = st;                                                                                \
        }                                                                                         \
        for (int32_t oy0 = 0; oy0 < v.oh; oy0 += R) {                                            \
          const int32_t nr = v.oh - oy0 < R ? v.oh - oy0 : R;                                     \
          const int32_t iy0 = oy0 * S - v.pad_t, rows = (nr - 1) * S + 3;                        \
          if (nch == (G) && OC == C) {                                                            \
            FILL(&v, in + c0, iy0, rows, (uint8_t *)pl, pv, pad_clean);                           \
          } else {                                                                                \
            GATHER(&v, in, c0, nch, OC / C, iy0, rows, (uint8_t *)pl);                            \
          }                                                                                       \
          DW3_FRAME_BUILD(fr, fr_nr, (G), S, nr, v.ow, v.out_row, v.out_col)                     \
          for (int32_t k = 0; k < nch; ++k) {                                                     \
            const int32_t *kc = DW3_KC(win, p, kg + k * AI_DW3_K, kt_);                           \
            int8_t *o = out + oy0 * v.out_row + c0 + k;                                           \
            DW3_RUN_ROWS(S, sgn, ROWS_S1, ROWS_S1X, ROWS_S2, ROWS_S2X, pl + k, fr, kc, o)         \
          }                                                                                       \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
  }
DW3_RUN_FN(dw3_run, 4, dw3_fill, dw3_fill_gather, dw3_rows_s1, dw3_rows_s1x, dw3_rows_s2,
           dw3_rows_s2x)
DW3_RUN_FN(dw3_run_g2, 2, dw3_fill2, dw3_fill_gather2, dw3_rows_g2_s1, dw3_rows_g2_s1x,
           dw3_rows_g2_s2, dw3_rows_g2_s2x)
#undef DW3_RUN_FN

void ai_depthwise_conv2d_3x3_s8(const ai_depthwise_conv2d_3x3_s8_params *p, const int8_t *input,
    const int32_t *packed, int8_t *output, void *scratch) {
  dw3_run(p, 0, input, packed, output, scratch, 0);
  DW3_PAD_G4();
#if defined(__ARM_ARCH_6M__) && defined(__OPTIMIZE__)
  /* Code placement only (issue 25): the portable driver shrank by 36 bytes on Armv6-M, which
   * moved VWW's conv2d_s8 loops by 4 bytes modulo 32 in flash and cost them fetch stalls on
   * nucleo-g0b1re (+0.13 % estimated); 4 bytes here restore their alignment. */
  __asm__ volatile("nop\n\tnop");
#endif
}

int32_t ai_depthwise_conv2d_3x3_sgn_s8_scratch_size(const ai_depthwise_conv2d_3x3_sgn_s8_params *p) {
  return ai_depthwise_conv2d_3x3_s8_scratch_size(p);
}

void ai_depthwise_conv2d_3x3_sgn_s8(const ai_depthwise_conv2d_3x3_sgn_s8_params *p, const int8_t *input,
    const int32_t *packed, int8_t *output, void *scratch) {
  dw3_run(p, 0, input, packed, output, scratch, 1);
  DW3_PAD_G4();
}

void ai_depthwise_conv2d_3x3_g2_s8(const ai_depthwise_conv2d_3x3_g2_s8_params *p, const int8_t *input,
    const int32_t *packed, int8_t *output, void *scratch) {
  dw3_run_g2(p, 0, input, packed, output, scratch, 0);
  DW3_PAD_G2();
}

int32_t ai_depthwise_conv2d_3x3_g2_sgn_s8_scratch_size(
    const ai_depthwise_conv2d_3x3_g2_sgn_s8_params *p) {
  return ai_depthwise_conv2d_3x3_g2_s8_scratch_size(p);
}

void ai_depthwise_conv2d_3x3_g2_sgn_s8(const ai_depthwise_conv2d_3x3_g2_sgn_s8_params *p, const int8_t *input,
    const int32_t *packed, int8_t *output, void *scratch) {
  dw3_run_g2(p, 0, input, packed, output, scratch, 1);
  DW3_PAD_G2();
}

#if defined(AI_DW3_DQ)
/* A stripe member's one-band call with pre-doubled constants (`rqd` 4 / 5, passes/stripe_dw3.py:
 * one image, whole channel pairs, no staging, not transposed): the stripe loop of DW3_RUN_FN
 * without its parameter copy, general set-up and rows choice per channel (~590 -> ~330
 * estimated cycles per call on VWW, many of them fetch stalls: the calls of the other members
 * evict this code from the I-cache between two calls), the pre-doubled rows
 * (DW3_ROWS_DQP_FN) per channel pair. 0: not such a call (oh > one band), dw3_run_g2 runs it. */
static int dw3_stripe_g2p(const ai_depthwise_conv2d_3x3_s8_params *p, const ai_row_window *win,
                          const int8_t *input, const int32_t *kc, int8_t *output, uint32_t *pl) {
  const int32_t S = p->stride[0], oh = win->out_h;
  if (oh > (S == 1 ? AI_DW3_HB - 2 : (AI_DW3_HB - 1) / 2)) { /* (HB - 3) / S + 1 output rows */
    return 0;
  }
  const int32_t C = p->in_c, W = p->in_w, ow = p->out_w, pad_l = p->pad[1];
  const dw3_view v = {win->in_h, W, win->pad_top, pad_l, W * C, C, oh, ow, ow * C, C, p->pad_value};
  const uint32_t pv = ((uint32_t)p->pad_value & 0xFFFFu) * 0x10001u;
  const int32_t jw = 2 * AI_DW3_HB, f0 = (pad_l >> 1) * jw, f1 = ((pad_l + W + 1) >> 1) * jw;
  const int32_t fe = p->plane_w * AI_DW3_HB; /* 2 planes of plane_w / 2 word columns */
  for (int32_t i = 0; i < f0; ++i) {
    pl[i] = pv; /* the padding columns, as DW3_RUN_FN */
  }
  for (int32_t i = f1; i < fe; ++i) {
    pl[i] = pv;
  }
  const int32_t rows1 = (oh - 1) * S + 3;
  for (int32_t r = 0; r < rows1; ++r) { /* band rows outside the image (the fill skips them) */
    if ((uint32_t)(r - v.pad_t) >= (uint32_t)v.h) {
      for (int32_t i = f0 + 2 * r; i < f1; i += jw) {
        pl[i] = pv;
        pl[i + 1] = pv;
      }
    }
  }
  int32_t fr[DW3_FRAME_WORDS];
  dw3_frame(fr, 2, S, oh, ow, ow * C, C);
  dw3_rows_fn *const rows = S == 1 ? (p->rqd == 5 ? dw3_rows_g2_s1p0 : dw3_rows_g2_s1p)
                                   : (p->rqd == 5 ? dw3_rows_g2_s2p0 : dw3_rows_g2_s2p);
  dw3_walk2 wk; /* the fill's walk planned once for all channel pairs (VWW's row shapes) */
  const int walk = dw3_walk2_plan(&wk, &v, -v.pad_t, rows1, pv);
  for (int32_t c0 = 0; c0 < C; c0 += 2, kc += 2 * AI_DW3_K) {
    if (walk) {
      wk.fn(&wk, input + c0, (uint8_t *)pl);
    } else {
      dw3_fill2(&v, input + c0, -v.pad_t, rows1, (uint8_t *)pl, pv, 1);
    }
    rows(pl, fr, kc, output + c0); /* both channels */
  }
  return 1;
}
/* `rqd` 4 / 5 come with one image, no staging, no transposition and whole channel pairs (the
 * stripe pass sets them only so): only the band height is checked (in dw3_stripe_g2p). The
 * general driver out of line: the entry's own code stays a few instructions (it runs from
 * flash on every call, other members' code evicting it from the I-cache in between). */
#define DW3_STRIPE_G2P(P, WIN, IN, K, OUT, SCR)                                                  \
  if ((P)->rqd >= 4 && dw3_stripe_g2p(P, WIN, IN, K, OUT, (uint32_t *)(SCR))) {                 \
    return;                                                                                     \
  }
#define DW3_ROWS_RUN_ATTR __attribute__((noinline))
#else
#define DW3_STRIPE_G2P(P, WIN, IN, K, OUT, SCR)
#define DW3_ROWS_RUN_ATTR inline __attribute__((always_inline))
#endif

/* row-window entries (ai_row_window.h), after the usual ones: unused, they are dropped from a
 * firmware without stripes (--gc-sections) and move none of its code */
void ai_depthwise_conv2d_3x3_s8_rows(const ai_depthwise_conv2d_3x3_s8_params *p, ai_row_window win,
    const int8_t *input, const int32_t *packed, int8_t *output, void *scratch) {
  dw3_run(p, &win, input, packed, output, scratch, 0);
}

void ai_depthwise_conv2d_3x3_sgn_s8_rows(const ai_depthwise_conv2d_3x3_sgn_s8_params *p, ai_row_window win,
    const int8_t *input, const int32_t *packed, int8_t *output, void *scratch) {
  dw3_run(p, &win, input, packed, output, scratch, 1);
}

static DW3_ROWS_RUN_ATTR void dw3_run_g2_rows(const ai_depthwise_conv2d_3x3_s8_params *p,
    const ai_row_window *win, const int8_t *input, const int32_t *packed, int8_t *output, void *scratch) {
  dw3_run_g2(p, win, input, packed, output, scratch, 0);
}

static DW3_ROWS_RUN_ATTR void dw3_run_g2_sgn_rows(const ai_depthwise_conv2d_3x3_s8_params *p,
    const ai_row_window *win, const int8_t *input, const int32_t *packed, int8_t *output, void *scratch) {
  dw3_run_g2(p, win, input, packed, output, scratch, 1);
}

void ai_depthwise_conv2d_3x3_g2_s8_rows(const ai_depthwise_conv2d_3x3_g2_s8_params *p, ai_row_window win,
    const int8_t *input, const int32_t *packed, int8_t *output, void *scratch) {
  DW3_STRIPE_G2P(p, &win, input, packed, output, scratch)
  dw3_run_g2_rows(p, &win, input, packed, output, scratch);
}

void ai_depthwise_conv2d_3x3_g2_sgn_s8_rows(const ai_depthwise_conv2d_3x3_g2_sgn_s8_params *p, ai_row_window win,
    const int8_t *input, const int32_t *packed, int8_t *output, void *scratch) {
  DW3_STRIPE_G2P(p, &win, input, packed, output, scratch)
  dw3_run_g2_sgn_rows(p, &win, input, packed, output, scratch);
}
