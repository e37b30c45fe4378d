/* int8 1x1 CONV_2D with 4 or 8 input channels, channel-stationary (ai_kernels_conv_smallk.h,
 * docs/kernels_conv_smallk.md). Plain C with the ai_simd.h helpers: SXTB16 / SMLAD / SMMLAR /
 * SSAT on ARMv7E-M, their exact C equivalents elsewhere (host tests run the same loops). */
#include <stdint.h>
#include <string.h>

#include "ai_kernels_conv_smallk.h"
#include "ai_qmath.h"
#include "ai_simd.h"

/* AI_SMK_ASM: the Cortex-M4 pixel loop below (14 registers, r7 included: optimised builds only,
 * as conv2d_s8's AI_CONV_QUAD); not on the Cortex-M7 (AI_CORE_CM7: the lowering picks this
 * kernel for the Cortex-M4 only, and the M7 dual-issue timing of this loop was not estimated)
 * nor with -DAI_NO_ASM. */
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_ARCH_7EM__) && !defined(AI_CORE_CM7) && defined(__GNUC__) && \
    defined(__OPTIMIZE__) && !defined(AI_NO_ASM)
#define AI_SMK_ASM 1
#endif

int32_t ai_conv2d_smallk_s8_scratch_size(const ai_conv2d_smallk_s8_params *p) {
  return 32 * p->out_c; /* one smk_chan_t per output channel */
}

/* {lo, hi} int16 halves, as the packed pairs SMLAD reads */
static inline uint32_t smk_pack16(int32_t lo, int32_t hi) {
  return ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16);
}

/* The high word of (k2:2^31) + a*m, i.e. SMMLAR a, m, k2: bits 63..32 of k2*2^32 + a*m + 2^31
 * (never overflows 64 bits: |a*m| < 2^62). */
static inline int32_t smk_smmlar(int32_t a, int32_t m, int32_t k2) {
#if defined(__ARM_FEATURE_DSP)
  int32_t r;
  __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(m), "r"(k2));
  return r;
#else
  const int64_t v = (int64_t)k2 * 4294967296LL + (int64_t)a * m + 0x80000000LL;
  return (int32_t)(uint32_t)((uint64_t)v >> 32);
#endif
}

/* One channel's constants, read once per call. w: the in_c weights as int16 pairs {w0,w2},
 * {w1,w3} per 4 (doubled for rq_fold 2, 3); bias likewise doubled. */
typedef struct {
  uint32_t w[4];
  int32_t bias, m, sh, k;
} smk_chan_t;

static void smk_chan(const int8_t *w, const int32_t *q, int32_t ic, int mode, smk_chan_t *c) {
  const int32_t d = mode >= 2 ? 2 : 1;
  for (int32_t j = 0; j < ic / 4; ++j) {
    const int8_t *b = w + 4 * j;
    c->w[2 * j] = smk_pack16(d * b[0], d * b[2]);
    c->w[2 * j + 1] = smk_pack16(d * b[1], d * b[3]);
  }
  c->bias = (int32_t)((uint32_t)q[0] * (uint32_t)d); /* wraps like the accumulator */
  c->m = q[1];
  c->sh = mode >= 2 ? q[2] + 1 : q[2];
  c->k = mode >= 2 ? (int32_t)((uint32_t)q[3] * 2u) : q[3];
}

/* One output channel over n pixels, src stepping `step` bytes, dst `ostep`. IC, MODE, CLAMP are
 * constants after inlining: one loop per variant, nothing re-tested per pixel. */
static inline __attribute__((always_inline)) void smk_run(const smk_chan_t *cp, const int8_t *src,
                                                          int8_t *dst, int32_t n, int32_t step,
                                                          int32_t ostep, int32_t lo, int32_t hi,
                                                          const int IC, const int MODE, const int CLAMP) {
  const smk_chan_t c = *cp;
  for (; n > 0; --n) {
    const uint32_t x0 = rd32(src);
    int32_t a = smlad(c.w[0], sxtb16(x0), c.bias);
    a = smlad(c.w[1], sxtb16_r8(x0), a);
    if (IC == 8) {
      const uint32_t x1 = rd32(src + 4);
      a = smlad(c.w[2], sxtb16(x1), a);
      a = smlad(c.w[3], sxtb16_r8(x1), a);
    }
    int32_t v;
    if (MODE == 1) {
      v = rq_fold(a, c.m, c.sh, c.k);
    } else if (MODE == 2) {
      v = smk_smmlar(a, c.m, c.k + (a >> 31)) >> c.sh;
    } else {
      v = smk_smmlar(a, c.m, c.k) >> c.sh;
    }
    v = ssat8(v);
    if (CLAMP) {
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
    }
    *dst = (int8_t)v;
    src += step;
    dst += ostep;
  }
}


#if defined(AI_SMK_ASM)
/* The Cortex-M4 pixel loop: two pixels per pass, 14 registers (r7 too: optimised builds only).
 * Per output (in_c 8, rq_fold 3): 2 pipelined LDRs (3 cycles, Cortex-M4 TRM DDI 0439B §3.3.2),
 * 4 SXTB16 + 4 SMLAD, SMMLAR + ASR + SSAT, STRB: ~15 estimated cycles, plus 2.5 of pointer
 * and loop overhead (Thumb-2 has no register post-index store: one ADD per pair, and the end
 * pointer lives in a stack slot, compared once per pair). */
#define SMK_MAC8(ACC)                                 \
  "ldr %[x0], [%[s]], #8\n\t"                         \
  "ldr %[x1], [%[s], #-4]\n\t"                        \
  "sxtb16 %[" ACC "], %[x0]\n\t"                      \
  "smlad %[" ACC "], %[w0], %[" ACC "], %[b]\n\t"     \
  "sxtb16 %[x0], %[x0], ror #8\n\t"                   \
  "smlad %[" ACC "], %[w1], %[x0], %[" ACC "]\n\t"    \
  "sxtb16 %[x0], %[x1]\n\t"                           \
  "smlad %[" ACC "], %[w2], %[x0], %[" ACC "]\n\t"    \
  "sxtb16 %[x1], %[x1], ror #8\n\t"                   \
  "smlad %[" ACC "], %[w3], %[x1], %[" ACC "]\n\t"
#define SMK_MAC4(ACC)                                 \
  "ldr %[x0], [%[s]], #4\n\t"                         \
  "sxtb16 %[" ACC "], %[x0]\n\t"                      \
  "smlad %[" ACC "], %[w0], %[" ACC "], %[b]\n\t"     \
  "sxtb16 %[x0], %[x0], ror #8\n\t"                   \
  "smlad %[" ACC "], %[w1], %[x0], %[" ACC "]\n\t"
/* requantise a (result in a, saturated); rq_fold 1 (SMLAL form, ai_simd.h rq_fold), 2 (the
 * doubled accumulator with its sign term), 3 (without it) */
#define SMK_RQ1                                       \
  "and %[x0], %[a], #0x80000000\n\t"                  \
  "orr %[x0], %[x0], #0x40000000\n\t"                 \
  "add %[x1], %[k], %[a], asr #31\n\t"                \
  "smlal %[x0], %[x1], %[a], %[m]\n\t"                \
  "asr %[x1], %[x1], %[sh]\n\t"                       \
  "ssat %[a], #8, %[x1]\n\t"
#define SMK_RQ2                                       \
  "add %[x0], %[k], %[a], asr #31\n\t"                \
  "smmlar %[a], %[a], %[m], %[x0]\n\t"                \
  "asr %[a], %[a], %[sh]\n\t"                         \
  "ssat %[a], #8, %[a]\n\t"
#define SMK_RQ3                                       \
  "smmlar %[a], %[a], %[m], %[k]\n\t"                 \
  "asr %[a], %[a], %[sh]\n\t"                         \
  "ssat %[a], #8, %[a]\n\t"
#define SMK_LOOP(MAC, RQ)                             \
  "str %[x0], [sp, #-8]!\n\t"                         \
  ".balign 4\n"                                       \
  "1:\n\t"                                            \
  MAC("a") RQ                                         \
  "strb %[a], [%[d]]\n\t"                             \
  MAC("a") RQ                                         \
  "strb %[a], [%[d], %[os]]\n\t"                      \
  "add %[d], %[d], %[os], lsl #1\n\t"                 \
  "ldr %[x0], [sp]\n\t"                               \
  "cmp %[s], %[x0]\n\t"                               \
  "bne 1b\n\t"                                        \
  "add sp, sp, #8\n\t"
#define SMK_OPS                                                                                 \
  : [s] "+r"(s), [d] "+r"(d), [x0] "+r"(x0), [x1] "=&r"(x1), [a] "=&r"(a), [w0] "+r"(w0),       \
    [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3), [b] "+r"(b), [m] "+r"(m), [sh] "+r"(sh),       \
    [k] "+r"(k), [os] "+r"(os)                                                                  \
  :                                                                                             \
  : "cc", "memory"
#define SMK_OPS4                                                                                \
  : [s] "+r"(s), [d] "+r"(d), [x0] "+r"(x0), [x1] "=&r"(x1), [a] "=&r"(a), [w0] "+r"(w0),       \
    [w1] "+r"(w1), [b] "+r"(b), [m] "+r"(m), [sh] "+r"(sh), [k] "+r"(k), [os] "+r"(os)          \
  :                                                                                             \
  : "cc", "memory"

/* pairs >= 1 pixel pairs, contiguous (step = in_c), full int8 clamp */
static inline __attribute__((always_inline)) void smk_asm(const smk_chan_t *cp, const int8_t *src,
                                                          int8_t *dst, int32_t pairs, int32_t ostep,
                                                          const int IC, const int MODE) {
  uint32_t w0 = cp->w[0], w1 = cp->w[1], w2 = cp->w[2], w3 = cp->w[3];
  int32_t b = cp->bias, m = cp->m, sh = cp->sh, k = cp->k, os = ostep;
  const int8_t *s = src;
  int8_t *d = dst;
  uint32_t x0 = (uint32_t)(src + 2 * pairs * IC), x1;
  int32_t a;
  if (IC == 8) {
    if (MODE == 1) {
      __asm__ volatile(SMK_LOOP(SMK_MAC8, SMK_RQ1) SMK_OPS);
    } else if (MODE == 2) {
      __asm__ volatile(SMK_LOOP(SMK_MAC8, SMK_RQ2) SMK_OPS);
    } else {
      __asm__ volatile(SMK_LOOP(SMK_MAC8, SMK_RQ3) SMK_OPS);
    }
  } else {
    if (MODE == 1) {
      __asm__ volatile(SMK_LOOP(SMK_MAC4, SMK_RQ1) SMK_OPS4);
    } else if (MODE == 2) {
      __asm__ volatile(SMK_LOOP(SMK_MAC4, SMK_RQ2) SMK_OPS4);
    } else {
      __asm__ volatile(SMK_LOOP(SMK_MAC4, SMK_RQ3) SMK_OPS4);
    }
  }
}
#endif

typedef void (*smk_fn)(const smk_chan_t *, const int8_t *, int8_t *, int32_t, int32_t, int32_t, int32_t,
                       int32_t);


/* A variant's loop: the assembly pairs where it applies (contiguous pixels, full int8 clamp),
 * the C loop for the rest and an odd last pixel. */
static inline __attribute__((always_inline)) void smk_body(const smk_chan_t *c, const int8_t *s, int8_t *d,
                                                           int32_t n, int32_t st, int32_t os, int32_t lo,
                                                           int32_t hi, const int IC, const int MODE,
                                                           const int CLAMP) {
#if defined(AI_SMK_ASM)
  if (!CLAMP && st == IC && n >= 2) {
    smk_asm(c, s, d, n >> 1, os, IC, MODE);
    s += (n & ~1) * IC;
    d += (n & ~1) * os;
    n &= 1;
  }
#endif
  smk_run(c, s, d, n, st, os, lo, hi, IC, MODE, CLAMP);
}

#define SMK_VARIANT(IC, MODE, CLAMP)                                                                   \
  static __attribute__((noinline)) void smk_##IC##_##MODE##_##CLAMP(                                  \
      const smk_chan_t *c, const int8_t *s, int8_t *d, int32_t n, int32_t st, int32_t os, int32_t lo,  \
      int32_t hi) {                                                                                    \
    smk_body(c, s, d, n, st, os, lo, hi, IC, MODE, CLAMP);                                             \
  }
SMK_VARIANT(4, 1, 0)
SMK_VARIANT(4, 2, 0)
SMK_VARIANT(4, 3, 0)
SMK_VARIANT(8, 1, 0)
SMK_VARIANT(8, 2, 0)
SMK_VARIANT(8, 3, 0)
/* a fused activation narrower than int8 (rare): one C loop, in_c and mode tested per pixel */
static __attribute__((noinline)) void smk_clamped(const smk_chan_t *c, const int8_t *s, int8_t *d, int32_t n,
                                                  int32_t st, int32_t os, int32_t lo, int32_t hi, int ic,
                                                  int mode) {
  smk_run(c, s, d, n, st, os, lo, hi, ic, mode, 1);
}

static const smk_fn smk_fns[2][3] = {
    {smk_4_1_0, smk_4_2_0, smk_4_3_0},
    {smk_8_1_0, smk_8_2_0, smk_8_3_0},
};

void ai_conv2d_smallk_s8(const ai_conv2d_smallk_s8_params *p, const int8_t *input, const int8_t *weights,
                         const int32_t *rq, int8_t *output, void *scratch) {
  const ai_conv2d_smallk_s8_params lp = *p; /* in RAM: the params may sit in wait-stated flash */
  const int32_t ic = lp.in_c, oc = lp.out_c, mode = lp.rq_fold;
  if ((ic != 4 && ic != 8) || mode < 1 || mode > 3) {
    return; /* the lowering never emits these (docs/kernels_conv_smallk.md) */
  }
  const int clamp = lp.act_min > -128 || lp.act_max < 127;
  const smk_fn fn = smk_fns[ic == 8][mode - 1];
  const int32_t sy = lp.stride[0], sx = lp.stride[1], ow = lp.out_w, iw = lp.in_w;
  const int32_t npix = lp.out_h * ow, nblk = (npix + AI_SMK_BLOCK - 1) / AI_SMK_BLOCK;
  /* stride 1: input and output pixels are the same run */
  const int flat = sx == 1 && sy == 1 && iw == ow && lp.in_h == lp.out_h;
  const int32_t in_img = lp.in_h * iw * ic, out_img = npix * oc;
  /* every channel's unpacked weights and constants, once per call (flash is read once) */
  smk_chan_t *chans = (smk_chan_t *)scratch;
  for (int32_t o = 0; o < oc; ++o) {
    smk_chan(weights + o * ic, rq + 4 * o, ic, mode, &chans[o]);
  }
  /* blocks of AI_SMK_BLOCK output pixels (first to last, or last to first: reverse), each block
   * every channel (the access order overlap.py models: an output may overlap its input) */
  for (int32_t b = 0; b < lp.batches; ++b) {
    const int8_t *in = input + b * in_img;
    int8_t *out = output + b * out_img;
    for (int32_t k = 0; k < nblk; ++k) {
      const int32_t blk = lp.reverse ? nblk - 1 - k : k;
      const int32_t p0 = blk * AI_SMK_BLOCK, p1 = p0 + AI_SMK_BLOCK < npix ? p0 + AI_SMK_BLOCK : npix;
      for (int32_t o = 0; o < oc; ++o) {
        const smk_chan_t *c = &chans[o];
        if (flat) {
          if (clamp) {
            smk_clamped(c, in + p0 * ic, out + p0 * oc + o, p1 - p0, ic, oc, lp.act_min, lp.act_max, ic, mode);
          } else {
            fn(c, in + p0 * ic, out + p0 * oc + o, p1 - p0, ic, oc, lp.act_min, lp.act_max);
          }
          continue;
        }
        for (int32_t q = p0; q < p1;) { /* the block's pixels, one run per output row */
          const int32_t y = q / ow, x = q - y * ow, n = (p1 - q < ow - x) ? p1 - q : ow - x;
          const int8_t *src = in + (y * sy * iw + x * sx) * ic;
          if (clamp) {
            smk_clamped(c, src, out + q * oc + o, n, sx * ic, oc, lp.act_min, lp.act_max, ic, mode);
          } else {
            fn(c, src, out + q * oc + o, n, sx * ic, oc, lp.act_min, lp.act_max);
          }
          q += n;
        }
      }
    }
  }
}

/* ------------------------------------------------ conv2d_smallk_win_s8 (few-tap windows) */

/* int16-pair words of one window: k_h * 2 * (run / 4) from the rows' full words, then
 * ceil(k_h * (run % 4) / 2) from their leftover bytes */
static inline int32_t win_words(const ai_conv2d_smallk_win_s8_params *p) {
  const int32_t run = p->k_w * p->in_c;
  return p->k_h * 2 * (run / 4) + (p->k_h * (run % 4) + 1) / 2;
}

int32_t ai_conv2d_smallk_win_s8_scratch_size(const ai_conv2d_smallk_win_s8_params *p) {
  /* staged weights (one word per channel and window word), staged rq (16 B per channel), the
   * pixel pair's interleaved windows (2 words per window word) */
  return 4 * win_words(p) * p->out_c + 16 * p->out_c + 8 * win_words(p);
}

/* What the gather needs, computed once per call and held in RAM (the params struct may sit in
 * wait-stated flash: reading its fields per pixel cost VWW's first layer ~200 KB of flash reads). */
typedef struct {
  int32_t ic, kh, kw_taps, full, left, dil_h, sy, sx, pad_t, pad_l, in_h, in_w, out_w, row_bytes;
  int32_t is333; /* k_h 3, k_w * in_c 9, dilation 1, image >= 3x3: win_gather_333 for windows inside it */
  int8_t pad_value;
} win_ctx_t;

/* The 3x3x3 window inside the image (every RGB first layer): 3 rows of 9 bytes, 2 words each
 * through SXTB16, the rows' ninth bytes as the last two pair words (win_order). */
static __attribute__((noinline)) void win_gather_333(const int8_t *r, int32_t row_bytes, uint32_t *d) {
  for (int32_t ky = 0; ky < 3; ++ky, r += row_bytes, d += 8) {
    const uint32_t v0 = rd32(r), v1 = rd32(r + 4);
    d[0] = sxtb16(v0);
    d[2] = sxtb16_r8(v0);
    d[4] = sxtb16(v1);
    d[6] = sxtb16_r8(v1);
  }
  r -= 3 * row_bytes;
  d[0] = smk_pack16(r[8], r[row_bytes + 8]);
  d[2] = smk_pack16(r[2 * row_bytes + 8], 0);
}

/* The general gather of output pixel (oy, ox)'s window into col[2 * j + s] (s: 0 or 1, the
 * pair's slot), out of line: a row whose taps all lie in the image is read in place; another is
 * first copied to `row` with pad_value in its padded taps. */
static __attribute__((noinline)) void win_gather_slow(const win_ctx_t *gp, const int8_t *in, int32_t oy,
                                                      int32_t ox, uint32_t *col, int s) {
  const win_ctx_t g = *gp;
  const int32_t iy0 = oy * g.sy - g.pad_t, ix0 = ox * g.sx - g.pad_l;
  const int inside_x = ix0 >= 0 && ix0 + g.kw_taps <= g.in_w;
  uint32_t *d = col + s;
  const int8_t *src = in + iy0 * g.row_bytes + ix0 * g.ic;
  int8_t row[AI_SMK_WIN_MAX_K];
  int32_t tail[AI_SMK_WIN_MAX_K];
  int32_t nt = 0;
  for (int32_t ky = 0, iy = iy0; ky < g.kh; ++ky, iy += g.dil_h, src += g.dil_h * g.row_bytes) {
    const int8_t *r = src;
    if (!(iy >= 0 && iy < g.in_h && inside_x)) {
      for (int32_t kx = 0; kx < g.kw_taps; ++kx) {
        const int32_t ix = ix0 + kx;
        const int ok = iy >= 0 && iy < g.in_h && ix >= 0 && ix < g.in_w;
        for (int32_t c = 0; c < g.ic; ++c) {
          row[kx * g.ic + c] = ok ? src[kx * g.ic + c] : g.pad_value;
        }
      }
      r = row;
    }
    for (int32_t q = 0; q < g.full; ++q) {
      const uint32_t v = rd32(r + 4 * q);
      d[0] = sxtb16(v);
      d[2] = sxtb16_r8(v);
      d += 4;
    }
    for (int32_t t = 0; t < g.left; ++t) {
      tail[nt++] = r[4 * g.full + t];
    }
  }
  for (int32_t t = 0; t < nt; t += 2) {
    d[0] = smk_pack16(tail[t], t + 1 < nt ? tail[t + 1] : 0);
    d += 2;
  }
}

#if defined(AI_SMK_ASM)
/* One window word: the 4 channels' weight words against the two pixels' column words, loaded in
 * bursts of 4 and 2 single LDRs (5 + 3 estimated Cortex-M4 cycles, TRM DDI 0439B §3.3.2; each
 * pointer written back by its first load), 8 SMLADs: 16 cycles per 8 MACs-pairs. */
#define WIN_GROUP                                     \
  "ldr %[wa], [%[w]], #16\n\t"                        \
  "ldr %[x0], [%[c]], #8\n\t"                         \
  "ldr %[wb], [%[w], #-12]\n\t"                       \
  "ldr %[x1], [%[c], #-4]\n\t"                        \
  "smlad %[a00], %[wa], %[x0], %[a00]\n\t"            \
  "smlad %[a01], %[wa], %[x1], %[a01]\n\t"            \
  "smlad %[a10], %[wb], %[x0], %[a10]\n\t"            \
  "smlad %[a11], %[wb], %[x1], %[a11]\n\t"            \
  "ldr %[wa], [%[w], #-8]\n\t"                        \
  "ldr %[wb], [%[w], #-4]\n\t"                        \
  "smlad %[a20], %[wa], %[x0], %[a20]\n\t"            \
  "smlad %[a21], %[wa], %[x1], %[a21]\n\t"            \
  "smlad %[a30], %[wb], %[x0], %[a30]\n\t"            \
  "smlad %[a31], %[wb], %[x1], %[a31]\n\t"
/* requantise channel I's two accumulators (rq row I of the staged table at [x0]) in place:
 * m in wa, sh in wb, k in x1, w the temporary (rq_fold 2: with the sign term, 3: without) */
#define WIN_RQ2(A)                                    \
  "add %[w], %[x1], %[" A "], asr #31\n\t"            \
  "smmlar %[" A "], %[" A "], %[wa], %[w]\n\t"        \
  "asr %[" A "], %[" A "], %[wb]\n\t"                 \
  "ssat %[" A "], #8, %[" A "]\n\t"
#define WIN_RQ3(A)                                    \
  "smmlar %[" A "], %[" A "], %[wa], %[x1]\n\t"       \
  "asr %[" A "], %[" A "], %[wb]\n\t"                 \
  "ssat %[" A "], #8, %[" A "]\n\t"
#define WIN_RQ_CH(OFF, A0, A1, RQ)                    \
  "ldr %[wa], [%[x0], #" OFF "+4]\n\t"                \
  "ldr %[wb], [%[x0], #" OFF "+8]\n\t"                \
  "ldr %[x1], [%[x0], #" OFF "+12]\n\t"               \
  RQ(A0) RQ(A1)
/* One channel quad of a pixel pair: an odd first word (ODD), two words per pass (the end of the
 * columns, the rq rows and the two output pointers in 16 bytes below sp: all 14 registers are
 * live in the MAC loop), then the 8 outputs requantised in registers and stored. On entry wa =
 * end of the columns, wb = rq rows, x0 = o0, x1 = o1. */
#define WIN_QUAD(ODD, RQ)                             \
  "sub sp, sp, #16\n\t"                               \
  "str %[wa], [sp]\n\t"                               \
  "str %[wb], [sp, #4]\n\t"                           \
  "str %[x0], [sp, #8]\n\t"                           \
  "str %[x1], [sp, #12]\n\t"                          \
  ODD                                                 \
  ".balign 4\n"                                       \
  "1:\n\t"                                            \
  WIN_GROUP WIN_GROUP                                 \
  "ldr %[wa], [sp]\n\t"                               \
  "cmp %[c], %[wa]\n\t"                               \
  "bne 1b\n\t"                                        \
  "ldr %[x0], [sp, #4]\n\t"                           \
  WIN_RQ_CH("0", "a00", "a01", RQ)                    \
  WIN_RQ_CH("16", "a10", "a11", RQ)                   \
  WIN_RQ_CH("32", "a20", "a21", RQ)                   \
  WIN_RQ_CH("48", "a30", "a31", RQ)                   \
  "ldr %[w], [sp, #8]\n\t"                            \
  "ldr %[c], [sp, #12]\n\t"                           \
  "strb %[a00], [%[w]]\n\t"                           \
  "strb %[a10], [%[w], #1]\n\t"                       \
  "strb %[a20], [%[w], #2]\n\t"                       \
  "strb %[a30], [%[w], #3]\n\t"                       \
  "strb %[a01], [%[c]]\n\t"                           \
  "strb %[a11], [%[c], #1]\n\t"                       \
  "strb %[a21], [%[c], #2]\n\t"                       \
  "strb %[a31], [%[c], #3]\n\t"                       \
  "add sp, sp, #16\n\t"
#define WIN_OPS                                                                                 \
  : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [a20] "+r"(a20),        \
    [a21] "+r"(a21), [a30] "+r"(a30), [a31] "+r"(a31), [w] "+r"(w), [c] "+r"(c), [wa] "+r"(wa), \
    [wb] "+r"(wb), [x0] "+r"(x0), [x1] "+r"(x1)                                                 \
  :                                                                                             \
  : "cc", "memory"

/* Out of line: in a function of its own the 14 registers are always free (inlined into the
 * pixel loop, gcc's allocator could not always find them). kw >= 2, rq_fold 2 or 3 (mode),
 * the full int8 clamp; qs: the quad's 4 staged rq rows. */
static __attribute__((noinline)) void win_quad_asm(const uint32_t *w, const uint32_t *col, int32_t kw,
                                                   const int32_t *qs, int8_t *o0, int8_t *o1, int mode) {
  int32_t a00 = qs[0], a01 = qs[0], a10 = qs[4], a11 = qs[4];
  int32_t a20 = qs[8], a21 = qs[8], a30 = qs[12], a31 = qs[12];
  const uint32_t *c = col;
  uint32_t wa = (uint32_t)(col + 2 * kw), wb = (uint32_t)qs, x0 = (uint32_t)o0, x1 = (uint32_t)o1;
  if (kw & 1) {
    if (mode == 3) {
      __asm__ volatile(WIN_QUAD(WIN_GROUP, WIN_RQ3) WIN_OPS);
    } else {
      __asm__ volatile(WIN_QUAD(WIN_GROUP, WIN_RQ2) WIN_OPS);
    }
  } else if (mode == 3) {
    __asm__ volatile(WIN_QUAD("", WIN_RQ3) WIN_OPS);
  } else {
    __asm__ volatile(WIN_QUAD("", WIN_RQ2) WIN_OPS);
  }
}
#endif

/* Gather output pixel (oy, ox)'s window: the test for a 3x3x3 window inside the image inline,
 * the gathers out of line (with win_gather_333 inlined here, VWW's layer 0 ran 4 % fewer
 * instructions but 16 % more estimated cycles: the pixel-pair loop no longer fit the L4R5's
 * 1 KB ART I-cache, RM0432 §3.3.4, docs/kernels_conv.md). */
static inline __attribute__((always_inline)) void win_gather(const win_ctx_t *g, const int8_t *in, int32_t oy,
                                                             int32_t ox, uint32_t *col, int s) {
  if (g->is333) {
    const int32_t iy0 = oy * g->sy - g->pad_t, ix0 = ox * g->sx - g->pad_l;
    if ((uint32_t)ix0 <= (uint32_t)(g->in_w - 3) && (uint32_t)iy0 <= (uint32_t)(g->in_h - 3)) {
      win_gather_333(in + iy0 * g->row_bytes + ix0 * 3, g->row_bytes, col + s);
      return;
    }
  }
  win_gather_slow(g, in, oy, ox, col, s);
}

/* 4 channels x 2 pixels over kw window words: w holds per window word the 4 channels' words,
 * col the two pixels' words; acc[c][pixel] */
static inline __attribute__((always_inline)) void win_mac4x2(const uint32_t *w, const uint32_t *col,
                                                             int32_t kw, int32_t *acc) {
  int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
  int32_t a20 = acc[4], a21 = acc[5], a30 = acc[6], a31 = acc[7];
  for (int32_t j = 0; j < kw; ++j) {
    const uint32_t c0 = col[0], c1 = col[1];
    uint32_t wv = w[0];
    a00 = smlad(wv, c0, a00);
    a01 = smlad(wv, c1, a01);
    wv = w[1];
    a10 = smlad(wv, c0, a10);
    a11 = smlad(wv, c1, a11);
    wv = w[2];
    a20 = smlad(wv, c0, a20);
    a21 = smlad(wv, c1, a21);
    wv = w[3];
    a30 = smlad(wv, c0, a30);
    a31 = smlad(wv, c1, a31);
    w += 4;
    col += 2;
  }
  acc[0] = a00, acc[1] = a01, acc[2] = a10, acc[3] = a11;
  acc[4] = a20, acc[5] = a21, acc[6] = a30, acc[7] = a31;
}

/* one output from a staged rq row {bias, m, sh, k} */
static inline int8_t win_out(const int32_t *q, int32_t a, int mode, int clamp, int32_t lo, int32_t hi) {
  int32_t v;
  if (mode == 1) {
    v = rq_fold(a, q[1], q[2], q[3]);
  } else if (mode == 2) {
    v = smk_smmlar(a, q[1], q[3] + (a >> 31)) >> q[2];
  } else {
    v = smk_smmlar(a, q[1], q[3]) >> q[2];
  }
  v = ssat8(v);
  if (clamp) {
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
  }
  return (int8_t)v;
}

/* every output channel of one pixel pair (o0, o1; o1 == o0 for an odd last pixel) */
static inline __attribute__((always_inline)) void win_channels(const ai_conv2d_smallk_win_s8_params *p,
                                                               const uint32_t *ws, const int32_t *qs,
                                                               const uint32_t *col, int32_t kw, int8_t *o0,
                                                               int8_t *o1, const int MODE, const int CLAMP) {
  const int32_t oc = p->out_c, lo = p->act_min, hi = p->act_max;
  int32_t c = 0;
  for (; c + 4 <= oc; c += 4, ws += 4 * kw, qs += 16) {
#if defined(AI_SMK_ASM)
    if (!CLAMP && MODE >= 2 && kw >= 2) { /* MAC, requantisation and stores in one assembly block */
      win_quad_asm(ws, col, kw, qs, o0 + c, o1 + c, MODE);
      continue;
    }
#endif
    int32_t acc[8] = {qs[0], qs[0], qs[4], qs[4], qs[8], qs[8], qs[12], qs[12]};
    win_mac4x2(ws, col, kw, acc);
    for (int32_t i = 0; i < 4; ++i) {
      o0[c + i] = win_out(qs + 4 * i, acc[2 * i], MODE, CLAMP, lo, hi);
      o1[c + i] = win_out(qs + 4 * i, acc[2 * i + 1], MODE, CLAMP, lo, hi);
    }
  }
  for (; c < oc; ++c, ws += kw, qs += 4) {
    int32_t a0 = qs[0], a1 = qs[0];
    for (int32_t j = 0; j < kw; ++j) {
      a0 = smlad(ws[j], col[2 * j], a0);
      a1 = smlad(ws[j], col[2 * j + 1], a1);
    }
    o0[c] = win_out(qs, a0, MODE, CLAMP, lo, hi);
    o1[c] = win_out(qs, a1, MODE, CLAMP, lo, hi);
  }
}

#define WIN_VARIANT_BODY                                                                      \
  {                                                                                                    \
    const ai_conv2d_smallk_win_s8_params lp = *p; /* in RAM: p may be in flash */                      \
    const int32_t npix = lp.out_h * lp.out_w, oc = lp.out_c, ow = lp.out_w;                            \
    int32_t oy = 0, ox = 0; /* pixel n's coordinates */                                                \
    for (int32_t n = 0; n < npix; n += 2) {                                                            \
      const int32_t n1 = n + 1 < npix ? n + 1 : n;                                                     \
      win_gather(g, in, oy, ox, col, 0);                                                               \
      if (n1 != n && ++ox == ow) {                                                                     \
        ox = 0, ++oy;                                                                                  \
      }                                                                                                \
      win_gather(g, in, oy, ox, col, 1); /* an odd last pixel: itself again */                         \
      if (++ox == ow) {                                                                                \
        ox = 0, ++oy;                                                                                  \
      }                                                                                                \
      win_channels(&lp, ws, qs, col, kw, out + n * oc, out + n1 * oc, MODE, CLAMP);                    \
    }                                                                                                  \
  }
/* the assembly quads' modes (rq_fold 2, 3, full int8 clamp) with their constants folded in; every
 * other layer (rq_fold 1, a narrower clamp: rare) through one loop testing them at run time */
static __attribute__((noinline)) void win_pairs_2(const ai_conv2d_smallk_win_s8_params *p, const int8_t *in,
                                                  int8_t *out, const uint32_t *ws, const int32_t *qs,
                                                  uint32_t *col, int32_t kw, const win_ctx_t *g) {
  const int MODE = 2, CLAMP = 0;
  WIN_VARIANT_BODY
}
static __attribute__((noinline)) void win_pairs_3(const ai_conv2d_smallk_win_s8_params *p, const int8_t *in,
                                                  int8_t *out, const uint32_t *ws, const int32_t *qs,
                                                  uint32_t *col, int32_t kw, const win_ctx_t *g) {
  const int MODE = 3, CLAMP = 0;
  WIN_VARIANT_BODY
}
static __attribute__((noinline)) void win_pairs_any(const ai_conv2d_smallk_win_s8_params *p, const int8_t *in,
                                                    int8_t *out, const uint32_t *ws, const int32_t *qs,
                                                    uint32_t *col, int32_t kw, const win_ctx_t *g, int MODE,
                                                    int CLAMP) {
  WIN_VARIANT_BODY
}

void ai_conv2d_smallk_win_s8(const ai_conv2d_smallk_win_s8_params *p, const int8_t *input,
                             const int8_t *weights, const int32_t *rq, int8_t *output, void *scratch) {
  const int32_t kw = win_words(p), oc = p->out_c, mode = p->rq_fold;
  if (mode < 1 || mode > 3 || p->k_h * p->k_w * p->in_c > AI_SMK_WIN_MAX_K || p->dilation[1] != 1) {
    return; /* the lowering never emits these (docs/kernels_conv_smallk.md) */
  }
  const int32_t d = mode >= 2 ? 2 : 1;
  uint32_t *ws = (uint32_t *)scratch;
  int32_t *qs = (int32_t *)(ws + kw * oc);
  uint32_t *col = (uint32_t *)(qs + 4 * oc);
  /* stage: blocks of 4 channels word-interleaved, then the last oc % 4 channels' rows */
  for (int32_t c = 0; c < oc; ++c) {
    const int8_t *wr = weights + c * 2 * kw;
    const int32_t blk = c / 4 * 4;
    const int in_quad = blk + 4 <= oc;
    for (int32_t j = 0; j < kw; ++j) {
      const uint32_t v = smk_pack16(d * wr[2 * j], d * wr[2 * j + 1]);
      if (in_quad) {
        ws[blk * kw + 4 * j + (c - blk)] = v;
      } else {
        ws[c * kw + j] = v;
      }
    }
    const int32_t *q = rq + 4 * c;
    qs[4 * c] = (int32_t)((uint32_t)q[0] * (uint32_t)d);
    qs[4 * c + 1] = q[1];
    qs[4 * c + 2] = mode >= 2 ? q[2] + 1 : q[2];
    qs[4 * c + 3] = mode >= 2 ? (int32_t)((uint32_t)q[3] * 2u) : q[3];
  }
  const int clamp = p->act_min > -128 || p->act_max < 127;

  const int32_t run = p->k_w * p->in_c;
  const win_ctx_t g = {p->in_c, p->k_h, p->k_w, run / 4, run % 4, p->dilation[0], p->stride[0], p->stride[1],
                       p->pad[0], p->pad[1], p->in_h, p->in_w, p->out_w, p->in_w * p->in_c,
                       p->k_h == 3 && run == 9 && p->dilation[0] == 1 && p->in_h >= 3 && p->in_w >= 3,
                       (int8_t)p->pad_value};
  const int32_t in_img = p->in_h * p->in_w * p->in_c, out_img = p->out_h * p->out_w * oc;
  for (int32_t b = 0; b < p->batches; ++b) {
    if (!clamp && mode == 2) {
      win_pairs_2(p, input + b * in_img, output + b * out_img, ws, qs, col, kw, &g);
    } else if (!clamp && mode == 3) {
      win_pairs_3(p, input + b * in_img, output + b * out_img, ws, qs, col, kw, &g);
    } else {
      win_pairs_any(p, input + b * in_img, output + b * out_img, ws, qs, col, kw, &g, mode, clamp);
    }
  }
}
