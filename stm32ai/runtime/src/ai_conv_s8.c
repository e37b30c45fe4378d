/* int8 CONV_2D kernels (see docs/kernels_conv.md). No float, no malloc. */
#include <string.h>

#include "ai_kernels_conv.h"
#include "ai_simd.h"

/* ---------------------------------------------------------------- CONV_2D */

/* AI_CONV_QUAD: the Cortex-M4 channel-quad loop (4 output channels x 2 pixels per pass, staged
 * int16 weights; conv_quads_asm_w16 below). It needs 14 registers, r7 included, so only in an
 * optimised build (no frame pointer); Armv7E-M only and not on the Cortex-M7 (AI_CORE_CM7 keeps
 * gcc's loop, which pairs better there; the Cortex-M33's timing was not estimated with it), and
 * not with -DAI_NO_ASM. */
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_ARCH_7EM__) && !defined(AI_CORE_CM7) && defined(__GNUC__) && \
    defined(__OPTIMIZE__) && !defined(AI_NO_ASM)
#define AI_CONV_QUAD 1
#endif
/* channels x packed K of a staged block from which the quads pay (estimated on nucleo-l4r5zi) */
#ifndef AI_CONV_QUAD_MIN
#define AI_CONV_QUAD_MIN 2048
#endif
/* the same for pointwise layers (conv_run_t.lin), whose compact pair loop fits the I-cache with
 * the quad loop: only the per-pass costs against the pair loop's decide (estimated, nucleo-l4r5zi) */
#ifndef AI_CONV_QUAD_MIN_LIN
#define AI_CONV_QUAD_MIN_LIN 1024
#endif

/* K of one filter row (k_w * in_c) and its stride in the packed K: rounded up to a multiple
 * of 4 when the rows are padded (krow: the lowering's choice for in_c % 4 != 0, so that an
 * interior window's rows unpack straight from the image). */
static inline int32_t conv_runp(const ai_conv2d_s8_params *p) {
  const int32_t run = p->k_w * p->in_c;
  return p->krow ? (run + 3) & ~3 : run;
}

/* Packed K: kernel taps * input channels rounded up to a multiple of 4 (or k_h padded rows). */
static inline int32_t conv_kp(const ai_conv2d_s8_params *p) {
  return p->krow ? p->k_h * conv_runp(p) : (p->k_h * p->k_w * p->in_c + 3) & ~3;
}

/* 1 when the columns are gathered as bytes first (in_c % 4 != 0). */
static inline int conv_gathers(const ai_conv2d_s8_params *p) { return (p->in_c & 3) != 0; }

/* 1 when some window reaches outside the image (padding, or SAME's extra bottom/right). */
static inline int conv_pads(const ai_conv2d_s8_params *p) {
  return p->pad[0] > 0 || p->pad[1] > 0 ||
         (p->out_h - 1) * p->stride[0] + (p->k_h - 1) * p->dilation[0] >= p->in_h ||
         (p->out_w - 1) * p->stride[1] + (p->k_w - 1) * p->dilation[1] >= p->in_w;
}

/* Output channels per staged block: all of them unless staged in smaller blocks, which are
 * even (a block's weights are then whole channel pairs: a contiguous slice of the layout). */
static inline int32_t conv_block(const ai_conv2d_s8_params *p) {
  if (p->stage_oc <= 0 || p->stage_oc >= p->out_c) {
    return p->out_c;
  }
  return p->stage_oc < 2 ? 2 : p->stage_oc & ~1;
}

/* Bytes of the staging area: per channel of a block its 4 rq words and its Kp weights (int16
 * when w16: expanded while copying). A multiple of 16 plus 4 * Kp: the columns stay aligned. */
static inline int32_t conv_stage_bytes(const ai_conv2d_s8_params *p) {
  return p->stage_oc > 0 ? conv_block(p) * (16 + conv_kp(p) * (p->w16 ? 2 : 1)) : 0;
}

/* pad_copy: the rows and columns of the padded image that some window touches (from the top-left
 * padding on), and the bytes of that copy: rounded up to a word, plus one zeroed word that the last
 * window's padded row (krow: up to 3 bytes past its run, against zero weights) may read. */
static inline int32_t conv_copy_h(const ai_conv2d_s8_params *p) {
  return (p->out_h - 1) * p->stride[0] + (p->k_h - 1) * p->dilation[0] + 1;
}
static inline int32_t conv_copy_w(const ai_conv2d_s8_params *p) {
  return (p->out_w - 1) * p->stride[1] + (p->k_w - 1) * p->dilation[1] + 1;
}
static inline int32_t conv_copy_bytes(const ai_conv2d_s8_params *p) {
  return p->pad_copy ? ((conv_copy_h(p) * conv_copy_w(p) * p->in_c + 3) & ~3) + 4 : 0;
}

/* pad_copy: what the copy needs of the caller's geometry, kept on the stack (the caller's
 * params may sit in flash, with wait states on every read). */
typedef struct {
  int32_t in_h, in_w, cin, pad_t, pad_l, ch, cw;
  uint32_t pv4; /* the pad value in all four bytes */
} conv_copy_t;
static void conv_pad_copy(const conv_copy_t *g, const int8_t *in, int8_t *dst);

/* Bytes of the per-pixel extras after the columns: gathering, the two pixels' int8 columns
 * (2 * Kp bytes), else, when windows can leave the image, one input pixel of pad values (in_c
 * bytes, a multiple of 4) that padded taps read instead of the image. */
static inline int32_t conv_extra_bytes(const ai_conv2d_s8_params *p) {
  return conv_gathers(p) ? 2 * conv_kp(p) : conv_pads(p) ? p->in_c : 0;
}

/* Scratch: the staging area (stage_oc > 0), the two int16 columns (4 * Kp bytes), the extras,
 * then the padded input copy (pad_copy). */
int32_t ai_conv2d_s8_scratch_size(const ai_conv2d_s8_params *p) {
  return conv_stage_bytes(p) + 4 * conv_kp(p) + conv_extra_bytes(p) + conv_copy_bytes(p);
}


/* One block of n output channels from c0 into the staging area: its rq rows, then its weights
 * (int8 layout: channel pairs are contiguous, an odd last channel's row ends the layout),
 * copied as they are or, w16, each 4-byte word {w0..w3} expanded to the int16 pairs
 * {w0,w2} {w1,w3} that pack_conv_weights_s16 stores (SXTB16, SXTB16 ROR 8). Every byte is
 * read from `weights`/`rq` once here instead of once per pixel pair.
 * quad (w16 only): the first n & ~3 channels as channel quads for conv_quads_asm_w16: per
 * quad and group of 4 K-elements 8 words, {w0,w2} of its channels 0..3, then {w1,w3} of
 * channels 0..3 (the order its loads consume them); the rest (a pair, an odd channel) as
 * above. Channel-quad rows are two pair blocks of the int8 layout, read side by side. */
#if defined(AI_CONV_QUAD)
/* Both int16 halves of v times 2 (one SADD16; the staged weights fit int16 doubled). */
static inline uint32_t sadd16_self(uint32_t v) {
  uint32_t r;
  __asm__("sadd16 %0, %1, %1" : "=r"(r) : "r"(v));
  return r;
}
/* conv_stage's quads (conv_stage_rows too): per quad and group, 8 words, X of each expanded word */
#define AI_STAGE_QUADS(X)                                                                        \
  for (int32_t c = 0; c < nq; c += 4, s += 4 * kp) {                                            \
    const int8_t *sa = s, *sb = s + 2 * kp; /* the quad's two channel pairs */                   \
    for (int32_t g = kp >> 2; g > 0; --g, sa += 8, sb += 8, d += 8) {                           \
      const uint32_t a0 = rd32(sa), a1 = rd32(sa + 4), b0 = rd32(sb), b1 = rd32(sb + 4);         \
      d[0] = X(sxtb16(a0)), d[1] = X(sxtb16(a1)), d[2] = X(sxtb16(b0)), d[3] = X(sxtb16(b1));     \
      d[4] = X(sxtb16_r8(a0)), d[5] = X(sxtb16_r8(a1)), d[6] = X(sxtb16_r8(b0)), d[7] = X(sxtb16_r8(b1)); \
    }                                                                                            \
  }
#define AI_STAGE_SAME(v) (v)
/* AI_STAGE_QUADS for conv_stage_rows, its word-aligned weights: per group LDM of the two pairs'
 * words {a0, a1} {b0, b1}, {sx a0, sx a1, sx b0, sx b1, sx8 a0, sx8 a1, sx8 b0, sx8 b1} (then
 * DBL: each doubled) stored by one STM; the same 8 words as AI_STAGE_QUADS */
#define AI_STAGE_QUADS_LSM(DBL)                                                                  \
  for (int32_t c = 0; c < nq; c += 4, s += 4 * kp) {                                            \
    const int8_t *sa = s, *sb = s + 2 * kp;                                                      \
    uint32_t g = (uint32_t)kp >> 2;                                                              \
    __asm__ volatile("1:\n\t"                                                                    \
                     "ldmia %[a]!, {r8, r9}\n\t"                                                \
                     "ldmia %[b]!, {r10, r11}\n\t"                                              \
                     "sxtb16 r3, r8\n\t"                                                        \
                     "sxtb16 r4, r9\n\t"                                                        \
                     "sxtb16 r5, r10\n\t"                                                       \
                     "sxtb16 r6, r11\n\t"                                                       \
                     "sxtb16 r8, r8, ror #8\n\t"                                                \
                     "sxtb16 r9, r9, ror #8\n\t"                                                \
                     "sxtb16 r10, r10, ror #8\n\t"                                              \
                     "sxtb16 r11, r11, ror #8\n\t" DBL                                          \
                     "subs %[g], %[g], #1\n\t"                                                  \
                     "stmia %[d]!, {r3, r4, r5, r6, r8, r9, r10, r11}\n\t"                      \
                     "bne 1b"                                                                    \
                     : [a] "+r"(sa), [b] "+r"(sb), [d] "+r"(d), [g] "+r"(g)                      \
                     :                                                                           \
                     : "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11", "cc", "memory");        \
  }
#endif

static inline __attribute__((always_inline)) void conv_stage(const int8_t *weights, const int32_t *rq, int32_t c0, int32_t n, int32_t kp,
                       int w16, int quad, uint32_t *dst) {
  memcpy(dst, rq + 4 * c0, (size_t)n * 16u);
  uint32_t *d = dst + 4 * n;
  const int8_t *s = weights + c0 * kp;
  if (!w16) {
    memcpy(d, s, (size_t)n * (size_t)kp);
    return;
  }
#if defined(AI_CONV_QUAD)
  const int32_t nq = quad ? n & ~3 : 0;
  /* quad >= 2 (rq_fold >= 2): the quads' accumulators doubled for AI_RQ_ACC_MM(0): each int16
   * weight (SADD16 of the expanded word with itself) and the bias times 2 (mod 2^32, like the
   * accumulator), and the rq row {2 bias', m, rs + 1, 2 kf} */
  const int sh = quad >= 2;
  if (sh) {
    AI_STAGE_QUADS(sadd16_self)
  } else {
    AI_STAGE_QUADS(AI_STAGE_SAME)
  }
  if (sh) {
    for (int32_t c = 0; c < nq; ++c) {
      dst[4 * c] <<= 1;
      dst[4 * c + 2] += 1;
      dst[4 * c + 3] <<= 1;
    }
  }
#else
  const int32_t nq = 0; /* the other cores' code stays as it was */
  (void)quad;
#endif
  for (int32_t i = (n - nq) * kp >> 2; i > 0; --i, s += 4, d += 2) {
    const uint32_t v = rd32(s);
    d[0] = sxtb16(v);
    d[1] = sxtb16_r8(v);
  }
}

/* conv_stage for the row-window entry (stripe firmwares only; a stripe member's call stages
 * its block every call): s = the block's int8 weights, q = its rq rows. The same staged bytes;
 * the copies by words (ai_copy_words: LDM/STM on the Cortex-M4, inline), the
 * quads' doubled rq rows (quad >= 2: {2 bias, m, rs + 1, 2 kf}) written on the way, int8
 * weights by words where the source is word-aligned (Kp is a multiple of 4). */
static __attribute__((noinline)) void conv_stage_rows(const int8_t *s, const int32_t *q, int32_t n, int32_t kp,
                                                      int w16, int quad, uint32_t *dst) {
  uint32_t *d = dst + 4 * n;
  const uint32_t *qs = (const uint32_t *)(const void *)q;
  if (!w16) {
    ai_copy_words(dst, qs, 4u * (uint32_t)n);
    const size_t bytes = (size_t)n * (size_t)kp;
    if (((uintptr_t)s & 3u) == 0u) {
      ai_copy_words(d, (const uint32_t *)(const void *)s, (uint32_t)(bytes >> 2));
    } else {
      memcpy(d, s, bytes);
    }
    return;
  }
#if defined(AI_CONV_QUAD)
  const int32_t nq = quad ? n & ~3 : 0;
  /* the expansions below by LDM / 8 SXTB16 (+ 8 SADD16) / one STM of 8 words where the
   * weights are word-aligned (r7 is free: AI_CONV_QUAD builds are optimised) */
  const int lsm = ((uintptr_t)s & 3u) == 0u;
  if (quad >= 2) {
    uint32_t *r = dst;
    for (int32_t c = 0; c < nq; ++c, qs += 4, r += 4) {
      const uint32_t b = qs[0], m = qs[1], rs = qs[2], kf = qs[3];
      r[0] = b << 1;
      r[1] = m;
      r[2] = rs + 1u;
      r[3] = kf << 1;
    }
    ai_copy_words(r, qs, 4u * (uint32_t)(n - nq));
    if (lsm) {
      AI_STAGE_QUADS_LSM("sadd16 r3, r3, r3\n\tsadd16 r4, r4, r4\n\tsadd16 r5, r5, r5\n\tsadd16 r6, r6, r6\n\t"
                         "sadd16 r8, r8, r8\n\tsadd16 r9, r9, r9\n\tsadd16 r10, r10, r10\n\t"
                         "sadd16 r11, r11, r11\n\t")
    } else {
      AI_STAGE_QUADS(sadd16_self)
    }
  } else {
    ai_copy_words(dst, qs, 4u * (uint32_t)n);
    if (lsm) {
      AI_STAGE_QUADS_LSM("")
    } else {
      AI_STAGE_QUADS(AI_STAGE_SAME)
    }
  }
  if (lsm) {
    /* the rest as pairs, 4 words {v0..v3} into {sx v0, sx8 v0, .., sx v3, sx8 v3} per pass */
    uint32_t blocks = (uint32_t)((n - nq) * kp) >> 4;
    if (blocks != 0u) {
      __asm__ volatile("1:\n\t"
                       "ldmia %[s]!, {r8, r9, r10, r11}\n\t"
                       "sxtb16 r3, r8\n\t"
                       "sxtb16 r4, r8, ror #8\n\t"
                       "sxtb16 r5, r9\n\t"
                       "sxtb16 r6, r9, ror #8\n\t"
                       "sxtb16 r8, r10\n\t"
                       "sxtb16 r9, r10, ror #8\n\t"
                       "sxtb16 r10, r11\n\t"
                       "sxtb16 r11, r11, ror #8\n\t"
                       "subs %[n], %[n], #1\n\t"
                       "stmia %[d]!, {r3, r4, r5, r6, r8, r9, r10, r11}\n\t"
                       "bne 1b"
                       : [s] "+r"(s), [d] "+r"(d), [n] "+r"(blocks)
                       :
                       : "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11", "cc", "memory");
    }
    for (int32_t i = ((n - nq) * kp >> 2) & 3; i > 0; --i, s += 4, d += 2) {
      const uint32_t v = rd32(s);
      d[0] = sxtb16(v);
      d[1] = sxtb16_r8(v);
    }
    return;
  }
#else
  const int32_t nq = 0;
  (void)quad;
  ai_copy_words(dst, qs, 4u * (uint32_t)n);
#endif
  for (int32_t i = (n - nq) * kp >> 2; i > 0; --i, s += 4, d += 2) {
    const uint32_t v = rd32(s);
    d[0] = sxtb16(v);
    d[1] = sxtb16_r8(v);
  }
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

/* n bytes of the pad value (pv4: it in all four bytes), inline: these runs are short. */
static inline void fill_s8(int8_t *d, uint32_t pv4, int32_t n) {
  for (; n >= 4; n -= 4, d += 4) {
    memcpy(d, &pv4, sizeof pv4);
  }
  for (; n > 0; --n) {
    *d++ = (int8_t)pv4;
  }
}


/* pad_copy's set-up, out of line (the other layers keep a short prologue): the copy's geometry
 * into `cg`, `local` turned into the copy's unpadded image (every window inside: the fast
 * columns); returns where the copy goes in scratch. */
static __attribute__((noinline)) int8_t *conv_copy_setup(ai_conv2d_s8_params *local, conv_copy_t *cg,
                                                         void *scratch) {
  const ai_conv2d_s8_params *p = local;
  int8_t *copy = (int8_t *)scratch + conv_stage_bytes(p) + 4 * conv_kp(p) + conv_extra_bytes(p);
  cg->in_h = p->in_h, cg->in_w = p->in_w, cg->cin = p->in_c, cg->pad_t = p->pad[0], cg->pad_l = p->pad[1];
  cg->ch = conv_copy_h(p), cg->cw = conv_copy_w(p);
  cg->pv4 = ((uint32_t)p->pad_value & 0xFFu) * 0x01010101u;
  local->in_h = cg->ch;
  local->in_w = cg->cw;
  local->pad[0] = local->pad[1] = 0;
  return copy;
}

/* The padded copy of one batch's input `in` (geometry `g`) into `dst`: row y, column x of the
 * copy is input pixel (y - pad_t, x - pad_l), or the pad value outside the image; then the
 * zeroed slack word. Rows are copied a word at a time. Out of line: it runs once per call. */
static __attribute__((noinline)) void conv_pad_copy(const conv_copy_t *g, const int8_t *in, int8_t *dst) {
  const int32_t cin = g->cin, ch = g->ch, cw = g->cw, pt = g->pad_t, ih = g->in_h;
  const int32_t pl = g->pad_l < cw ? g->pad_l : cw;                /* left padding columns */
  int32_t mid = g->in_w < cw - pl ? g->in_w : cw - pl;              /* image columns used */
  mid = mid < 0 ? 0 : mid;
  const int32_t right = cw - pl - mid;                             /* right padding columns */
  const uint32_t pv4 = g->pv4;
  const int32_t row = g->in_w * cin;
  for (int32_t y = 0; y < ch; ++y, dst += cw * cin) {
    const int32_t iy = y - pt;
    if (iy < 0 || iy >= ih) {
      fill_s8(dst, pv4, cw * cin);
      continue;
    }
    fill_s8(dst, pv4, pl * cin);
    copy_s8(dst + pl * cin, in + iy * row, mid * cin);
    fill_s8(dst + (pl + mid) * cin, pv4, right * cin);
  }
  const uint32_t zero = 0;
  memcpy(dst, &zero, sizeof zero);
}

/* The K input bytes of output pixel (oy, ox) in K order into `lin`, K padding zeroed
 * (in_c % 4 != 0, e.g. first layers with 1 or 3 channels): a filter row of taps is one
 * contiguous run of k_w*in_c input bytes when it lies inside the image and dilation_w
 * is 1, copied a word at a time; border taps are copied or filled tap by tap. */
static void conv_gather(const ai_conv2d_s8_params *p, const int8_t *in, int32_t oy, int32_t ox,
                        int8_t *lin) {
  const int32_t cin = p->in_c, kw = p->k_w, dw = p->dilation[1], iw = p->in_w;
  const int32_t run = kw * cin, runp = conv_runp(p);
  const int32_t iy0 = oy * p->stride[0] - p->pad[0];
  const int32_t ix0 = ox * p->stride[1] - p->pad[1];
  const int row_run = dw == 1 && ix0 >= 0 && ix0 + kw <= iw;
  const uint32_t pv4 = ((uint32_t)p->pad_value & 0xFFu) * 0x01010101u;
  int8_t *d = lin;
  for (int32_t ky = 0; ky < p->k_h; ++ky, d += runp) {
    const int32_t iy = iy0 + ky * p->dilation[0];
    for (int32_t i = run; i < runp; ++i) { /* row padding (krow): zero weights */
      d[i] = 0;
    }
    if (iy < 0 || iy >= p->in_h) {
      fill_s8(d, pv4, run);
      continue;
    }
    const int8_t *row = in + (int32_t)iy * iw * cin;
    if (row_run) {
      copy_s8(d, row + ix0 * cin, run);
      continue;
    }
    /* border row: tap by tap, byte by byte (in_c is small here: 1..3 mostly) */
    int8_t *t = d;
    for (int32_t kx = 0, ix = ix0; kx < kw; ++kx, ix += dw) {
      if (ix >= 0 && ix < iw) {
        const int8_t *src = row + ix * cin;
        for (int32_t c = 0; c < cin; ++c) {
          *t++ = src[c];
        }
      } else {
        for (int32_t c = 0; c < cin; ++c) {
          *t++ = (int8_t)pv4;
        }
      }
    }
  }
  for (int32_t i = p->k_h * runp; i < conv_kp(p); ++i) { /* K padding: zero weights */
    lin[i] = 0;
  }
}

/* Column layout (shared with the packed weights): groups of 4 K-elements; a group is four
 * 32-bit words, {x0, x2} {x1, x3} of pixel 0 then of pixel 1, as int16 pairs (the order in
 * which SXTB16 / SXTB16 ROR 8 unpack 4 bytes). One LDR per pixel, 4 SXTB16, and the four
 * words are written together. */
static inline void conv_unpack2(uint32_t *d, const int8_t *s0, const int8_t *s1, int32_t groups) {
#if defined(__ARM_FEATURE_DSP)
  /* 12 instructions, 14 estimated Cortex-M4 cycles per group: a STR with an immediate
   * offset is always one cycle, a STRD two words in three (Cortex-M4 TRM DDI 0439B
   * §3.3.2), so four STRs beat two STRDs by two cycles */
  if (groups > 0) {
    uint32_t a, b, c, e;
    __asm__ volatile("1:\n\t"
            "ldr %[a], [%[s0]], #4\n\t"
            "ldr %[b], [%[s1]], #4\n\t"
            "sxtb16 %[c], %[a]\n\t"
            "sxtb16 %[a], %[a], ror #8\n\t"
            "sxtb16 %[e], %[b]\n\t"
            "sxtb16 %[b], %[b], ror #8\n\t"
            "str %[a], [%[d], #4]\n\t"
            "str %[e], [%[d], #8]\n\t"
            "str %[b], [%[d], #12]\n\t"
            "str %[c], [%[d]], #16\n\t"
            "subs %[n], %[n], #1\n\t"
            "bne 1b\n\t"
            : [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [e] "=&r"(e), [s0] "+r"(s0), [s1] "+r"(s1),
              [d] "+r"(d), [n] "+r"(groups)
            :
            : "cc", "memory");
  }
#else
  for (; groups > 0; --groups, s0 += 4, s1 += 4, d += 4) {
    const uint32_t w0 = rd32(s0), w1 = rd32(s1);
    d[0] = sxtb16(w0);
    d[1] = sxtb16_r8(w0);
    d[2] = sxtb16(w1);
    d[3] = sxtb16_r8(w1);
  }
#endif
}

#if defined(AI_CONV_QUAD)
/* conv_unpack2 for the compact pair loops of the quads (conv_pairs' lin paths, Cortex-M4 only).
 * pairs >= 1 iterations of two groups: the four loads issue back to back (N independent loads
 * take N + 1 cycles, Cortex-M4 TRM DDI 0439B §3.3.2) and the loop's branch is taken half as
 * often: 24 estimated cycles per two groups instead of 28. Same words as conv_unpack2. */
static inline __attribute__((always_inline)) void conv_unpack2_x2(uint32_t *d, const int8_t *s0, const int8_t *s1,
                                                                  int32_t pairs) {
  uint32_t a, b, a2, b2, c, e;
  __asm__ volatile("1:\n\t"
                   "ldr %[a], [%[s0]], #8\n\t"
                   "ldr %[b], [%[s1]], #8\n\t"
                   "ldr %[a2], [%[s0], #-4]\n\t"
                   "ldr %[b2], [%[s1], #-4]\n\t"
                   "sxtb16 %[c], %[a]\n\t"
                   "sxtb16 %[a], %[a], ror #8\n\t"
                   "sxtb16 %[e], %[b]\n\t"
                   "sxtb16 %[b], %[b], ror #8\n\t"
                   "str %[c], [%[d]], #32\n\t"
                   "str %[a], [%[d], #-28]\n\t"
                   "str %[e], [%[d], #-24]\n\t"
                   "str %[b], [%[d], #-20]\n\t"
                   "sxtb16 %[c], %[a2]\n\t"
                   "sxtb16 %[a2], %[a2], ror #8\n\t"
                   "sxtb16 %[e], %[b2]\n\t"
                   "sxtb16 %[b2], %[b2], ror #8\n\t"
                   "str %[c], [%[d], #-16]\n\t"
                   "str %[a2], [%[d], #-12]\n\t"
                   "str %[e], [%[d], #-8]\n\t"
                   "str %[b2], [%[d], #-4]\n\t"
                   "subs %[n], %[n], #1\n\t"
                   "bne 1b\n\t"
                   : [a] "=&r"(a), [b] "=&r"(b), [a2] "=&r"(a2), [b2] "=&r"(b2), [c] "=&r"(c), [e] "=&r"(e),
                     [s0] "+r"(s0), [s1] "+r"(s1), [d] "+r"(d), [n] "+r"(pairs)
                   :
                   : "cc", "memory");
}

/* The window rows of a pixel pair when each row is one group (krow rows of 4 bytes: KWS's first
 * layer, 10x4x1): rows >= 1 rows, `st` bytes apart; pixel 1's row at s0 + dl. One loop over the
 * rows (~15 estimated cycles per row, against ~30 for conv_unpack2 per row and its row loop). */
static inline __attribute__((always_inline)) void conv_unpack2_rows1(uint32_t *d, const int8_t *s0, int32_t dl,
                                                                     int32_t st, int32_t rows) {
  uint32_t a, b, c, e;
  __asm__ volatile("1:\n\t"
                   "ldr %[a], [%[s0]]\n\t"
                   "ldr %[b], [%[s0], %[dl]]\n\t"
                   "add %[s0], %[s0], %[st]\n\t"
                   "sxtb16 %[c], %[a]\n\t"
                   "sxtb16 %[a], %[a], ror #8\n\t"
                   "sxtb16 %[e], %[b]\n\t"
                   "sxtb16 %[b], %[b], ror #8\n\t"
                   "str %[c], [%[d]], #16\n\t"
                   "str %[a], [%[d], #-12]\n\t"
                   "str %[e], [%[d], #-8]\n\t"
                   "str %[b], [%[d], #-4]\n\t"
                   "subs %[n], %[n], #1\n\t"
                   "bne 1b\n\t"
                   : [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [e] "=&r"(e), [s0] "+r"(s0), [d] "+r"(d),
                     [n] "+r"(rows)
                   : [dl] "r"(dl), [st] "r"(st)
                   : "cc", "memory");
}
#endif

/* krow: the first row of output pixel (oy, ox)'s window in the image and the stride
 * between its rows, when the window lies inside the image and reading each row's padded
 * run stays inside the input tensor; else the window gathered into `lin` (stride runp). */
static const int8_t *conv_window(const ai_conv2d_s8_params *p, const int8_t *in, int32_t oy,
                                 int32_t ox, int8_t *lin, int32_t *stride) {
  const int32_t cin = p->in_c, iw = p->in_w;
  const int32_t iy0 = oy * p->stride[0] - p->pad[0], ix0 = ox * p->stride[1] - p->pad[1];
  const int32_t iy_last = iy0 + (p->k_h - 1) * p->dilation[0];
  if (iy0 >= 0 && iy_last < p->in_h && ix0 >= 0 && ix0 + p->k_w <= iw &&
      (iy_last * iw + ix0) * cin + conv_runp(p) <= p->in_h * iw * cin) {
    *stride = p->dilation[0] * iw * cin;
    return in + (iy0 * iw + ix0) * cin;
  }
  conv_gather(p, in, oy, ox, lin);
  *stride = conv_runp(p);
  return lin;
}

/* The columns of output pixels n0 and n1 (n1 == n0 for an odd last pixel). in_c % 4 == 0:
 * per tap, the two pixels' input channels are unpacked straight from the image, a padded
 * tap reading the pad pixel in scratch (no per-element bounds checks). */
static void conv_columns(const ai_conv2d_s8_params *p, const int8_t *in, int32_t n0, int32_t n1,
                         uint32_t *col, int8_t *extra) {
  const int32_t oy0 = n0 / p->out_w, ox0 = n0 - oy0 * p->out_w;
  const int32_t oy1 = n1 / p->out_w, ox1 = n1 - oy1 * p->out_w;
  if (conv_gathers(p)) {
    const int32_t kp = conv_kp(p);
    /* n1 == n0 (an odd last pixel, conv_pixel): its window gathered once */
    if (!p->krow) {
      conv_gather(p, in, oy0, ox0, extra);
      if (n1 != n0) {
        conv_gather(p, in, oy1, ox1, extra + kp);
      }
      conv_unpack2(col, extra, n1 != n0 ? extra + kp : extra, kp >> 2);
      return;
    }
    /* padded rows: each window's rows straight from the image when inside it, else
     * gathered (with the same row stride) into scratch */
    int32_t st0, st1;
    const int8_t *s0 = conv_window(p, in, oy0, ox0, extra, &st0);
    const int8_t *s1 = s0;
    st1 = st0;
    if (n1 != n0) {
      s1 = conv_window(p, in, oy1, ox1, extra + kp, &st1);
    }
    const int32_t gr = conv_runp(p) >> 2;
    for (int32_t ky = 0; ky < p->k_h; ++ky, s0 += st0, s1 += st1, col += 4 * gr) {
      conv_unpack2(col, s0, s1, gr);
    }
    return;
  }
  const int32_t cin = p->in_c, groups = cin >> 2, ih = p->in_h, iw = p->in_w;
  if (p->k_h == 1 && p->k_w == 1) { /* 1x1: never padded, the column is the input pixel */
    const int32_t sh = p->stride[0], sw = p->stride[1];
    conv_unpack2(col, in + (oy0 * sh * iw + ox0 * sw) * cin, in + (oy1 * sh * iw + ox1 * sw) * cin,
                 groups);
    return;
  }
  const int32_t y0 = oy0 * p->stride[0] - p->pad[0], x0 = ox0 * p->stride[1] - p->pad[1];
  const int32_t y1 = oy1 * p->stride[0] - p->pad[0], x1 = ox1 * p->stride[1] - p->pad[1];
  uint32_t *d = col;
  for (int32_t ky = 0; ky < p->k_h; ++ky) {
    const int32_t iy0 = y0 + ky * p->dilation[0], iy1 = y1 + ky * p->dilation[0];
    const int in0 = iy0 >= 0 && iy0 < ih, in1 = iy1 >= 0 && iy1 < ih;
    const int32_t r0 = iy0 * iw * cin, r1 = iy1 * iw * cin; /* offsets: formed into pointers only inside */
    for (int32_t kx = 0; kx < p->k_w; ++kx, d += 4 * groups) {
      const int32_t ix0 = x0 + kx * p->dilation[1], ix1 = x1 + kx * p->dilation[1];
      const int8_t *s0 = in0 && ix0 >= 0 && ix0 < iw ? in + r0 + ix0 * cin : extra;
      const int8_t *s1 = in1 && ix1 >= 0 && ix1 < iw ? in + r1 + ix1 * cin : extra;
      conv_unpack2(d, s0, s1, groups);
    }
  }
}

/* ---- inner loops: output channels (oc, oc+1) x the two columns of a pixel pair ----
 * acc = {a00, a01, a10, a11} (channel, pixel) accumulate over g >= 1 groups of 4
 * K-elements. Column words per group: {x0,x2} {x1,x3} of pixel 0, then of pixel 1.
 * w8: per group 8 bytes, the 4 int8 weights of oc then of oc+1 (SXTB16 unpacks them in
 *     the column's order): 6 LDR + 4 SXTB16 + 8 SMLAD = 18 instructions per 16 MACs.
 * w16: per group 16 bytes, the weights pre-sign-extended in the column's order,
 *     {w0,w2} {w1,w3} of oc then of oc+1: 8 LDR + 8 SMLAD = 16 per 16 MACs.
 * Cycles (Cortex-M4 TRM DDI 0439B §3.3.2): consecutive single LDRs pipeline (N loads in
 * N+1 cycles) when no address depends on the previous load's results, while LDM (1+N) and
 * LDRD (3) never pipeline with a neighbour. So the loads are bursts of single LDRs, the
 * pointer write-back on the first load of each base and the next load from the other base:
 * w16 6+2 loads = 7+3 cycles per group (LDM + 2 LDRD: 5+3+3), w8 4+2 = 5+3 (3 LDRD: 9).
 * The loops run four groups per iteration (one then two peeled for g % 4): a taken branch
 * (1+P) per 64 MACs instead of per 32. The DSP path is inline assembly because gcc 12
 * spills or re-loads with these 13 live registers; the C path below it is the same
 * computation (exact int32 wrap-around sums, so the order does not matter). */

#if defined(__ARM_FEATURE_DSP)
#define AI_W8_GROUP                                   \
  "ldr %[wa], [%[w]], #8\n\t"                         \
  "ldr %[x0], [%[c]], #16\n\t"                        \
  "ldr %[wb], [%[w], #-4]\n\t"                        \
  "ldr %[x1], [%[c], #-12]\n\t"                       \
  "sxtb16 %[l0], %[wa]\n\t"                           \
  "sxtb16 %[wa], %[wa], ror #8\n\t"                   \
  "sxtb16 %[l1], %[wb]\n\t"                           \
  "sxtb16 %[wb], %[wb], ror #8\n\t"                   \
  "smlad %[a00], %[l0], %[x0], %[a00]\n\t"            \
  "smlad %[a00], %[wa], %[x1], %[a00]\n\t"            \
  "smlad %[a10], %[l1], %[x0], %[a10]\n\t"            \
  "smlad %[a10], %[wb], %[x1], %[a10]\n\t"            \
  "ldr %[x0], [%[c], #-8]\n\t"                        \
  "ldr %[x1], [%[c], #-4]\n\t"                        \
  "smlad %[a01], %[l0], %[x0], %[a01]\n\t"            \
  "smlad %[a01], %[wa], %[x1], %[a01]\n\t"            \
  "smlad %[a11], %[l1], %[x0], %[a11]\n\t"            \
  "smlad %[a11], %[wb], %[x1], %[a11]\n\t"

#define AI_W16_GROUP                                  \
  "ldr %[wa], [%[w]], #16\n\t"                        \
  "ldr %[x0], [%[c]], #16\n\t"                        \
  "ldr %[wb], [%[w], #-12]\n\t"                       \
  "ldr %[x1], [%[c], #-12]\n\t"                       \
  "ldr %[x2], [%[c], #-8]\n\t"                        \
  "ldr %[x3], [%[c], #-4]\n\t"                        \
  "smlad %[a00], %[wa], %[x0], %[a00]\n\t"            \
  "smlad %[a00], %[wb], %[x1], %[a00]\n\t"            \
  "smlad %[a01], %[wa], %[x2], %[a01]\n\t"            \
  "smlad %[a01], %[wb], %[x3], %[a01]\n\t"            \
  "ldr %[wa], [%[w], #-8]\n\t"                        \
  "ldr %[wb], [%[w], #-4]\n\t"                        \
  "smlad %[a10], %[wa], %[x0], %[a10]\n\t"            \
  "smlad %[a10], %[wb], %[x1], %[a10]\n\t"            \
  "smlad %[a11], %[wa], %[x2], %[a11]\n\t"            \
  "smlad %[a11], %[wb], %[x3], %[a11]\n\t"

#define AI_FOUR_GROUP_LOOP(GROUP)                     \
  "1:\n\t"                                            \
  "tst %[g], #3\n\t"                                  \
  "beq 2f\n\t"                                        \
  GROUP                                               \
  "sub %[g], %[g], #1\n\t"                            \
  "b 1b\n"                                            \
  "2:\n\t"                                            \
  "lsrs %[g], %[g], #2\n\t"                           \
  "beq 4f\n\t"                                        \
  ".balign 4\n"                                       \
  "3:\n\t"                                            \
  GROUP                                               \
  GROUP                                               \
  GROUP                                               \
  GROUP                                               \
  "subs %[g], %[g], #1\n\t"                           \
  "bne 3b\n"                                          \
  "4:\n\t"

#if defined(AI_CORE_CM7)
/* Cortex-M7 (AI_CORE_CM7): the w16 2x2 group software-pipelined for dual issue. The M7 issues
 * one MAC per cycle and pairs it with a load; a MAC operand cannot take a load result from the
 * previous cycle (jnk0le's M7 notes; docs/estimate.md "Cortex-M7"). So every SMLAD is paired
 * with one LDR issued for a later SMLAD: per half-group (one K-pair: the {x0,x2} or {x1,x3}
 * words) the loads go column px0, weight oc0, column px1, weight oc1, each >= 2 cycles before
 * its first SMLAD; six data registers rotate (interval colouring, scripts/gen_m7_asm.py). Each
 * 4-group body starts with 3 unpaired loads (nothing is loaded past the arrays' ends) and the
 * pointer updates and loop counter ride in the tail's free slots. Estimated by core_m7.py:
 * 35 cycles per 32 SMLADs (AI_W16_GROUP x4: 49); on the M4 it would be 99 against 75. */
#define AI_W16_M7_GROUP1                      \
  "ldr %[x0], [%[c], #0]\n\t"                       \
  "ldr %[x1], [%[w], #0]\n\t"                       \
  "ldr %[x2], [%[c], #8]\n\t"                       \
  "smlad %[a00], %[x1], %[x0], %[a00]\n\t"          \
  "ldr %[x3], [%[w], #8]\n\t"                       \
  "smlad %[a01], %[x1], %[x2], %[a01]\n\t"          \
  "ldr %[wa], [%[c], #4]\n\t"                       \
  "smlad %[a10], %[x3], %[x0], %[a10]\n\t"          \
  "ldr %[wb], [%[w], #4]\n\t"                       \
  "smlad %[a11], %[x3], %[x2], %[a11]\n\t"          \
  "ldr %[x1], [%[c], #12]\n\t"                      \
  "smlad %[a00], %[wb], %[wa], %[a00]\n\t"          \
  "ldr %[x0], [%[w], #12]\n\t"                      \
  "smlad %[a01], %[wb], %[x1], %[a01]\n\t"          \
  "add %[c], %[c], #16\n\t"                         \
  "smlad %[a10], %[x0], %[wa], %[a10]\n\t"          \
  "add %[w], %[w], #16\n\t"                         \
  "smlad %[a11], %[x0], %[x1], %[a11]\n\t"

#define AI_W16_M7_GROUP4                      \
  "ldr %[x0], [%[c], #0]\n\t"                       \
  "ldr %[x1], [%[w], #0]\n\t"                       \
  "ldr %[x2], [%[c], #8]\n\t"                       \
  "smlad %[a00], %[x1], %[x0], %[a00]\n\t"          \
  "ldr %[x3], [%[w], #8]\n\t"                       \
  "smlad %[a01], %[x1], %[x2], %[a01]\n\t"          \
  "ldr %[wa], [%[c], #4]\n\t"                       \
  "smlad %[a10], %[x3], %[x0], %[a10]\n\t"          \
  "ldr %[wb], [%[w], #4]\n\t"                       \
  "smlad %[a11], %[x3], %[x2], %[a11]\n\t"          \
  "ldr %[x1], [%[c], #12]\n\t"                      \
  "smlad %[a00], %[wb], %[wa], %[a00]\n\t"          \
  "ldr %[x0], [%[w], #12]\n\t"                      \
  "smlad %[a01], %[wb], %[x1], %[a01]\n\t"          \
  "ldr %[x2], [%[c], #16]\n\t"                      \
  "smlad %[a10], %[x0], %[wa], %[a10]\n\t"          \
  "ldr %[x3], [%[w], #16]\n\t"                      \
  "smlad %[a11], %[x0], %[x1], %[a11]\n\t"          \
  "ldr %[wb], [%[c], #24]\n\t"                      \
  "smlad %[a00], %[x3], %[x2], %[a00]\n\t"          \
  "ldr %[wa], [%[w], #24]\n\t"                      \
  "smlad %[a01], %[x3], %[wb], %[a01]\n\t"          \
  "ldr %[x0], [%[c], #20]\n\t"                      \
  "smlad %[a10], %[wa], %[x2], %[a10]\n\t"          \
  "ldr %[x1], [%[w], #20]\n\t"                      \
  "smlad %[a11], %[wa], %[wb], %[a11]\n\t"          \
  "ldr %[x3], [%[c], #28]\n\t"                      \
  "smlad %[a00], %[x1], %[x0], %[a00]\n\t"          \
  "ldr %[x2], [%[w], #28]\n\t"                      \
  "smlad %[a01], %[x1], %[x3], %[a01]\n\t"          \
  "ldr %[wa], [%[c], #32]\n\t"                      \
  "smlad %[a10], %[x2], %[x0], %[a10]\n\t"          \
  "ldr %[wb], [%[w], #32]\n\t"                      \
  "smlad %[a11], %[x2], %[x3], %[a11]\n\t"          \
  "ldr %[x1], [%[c], #40]\n\t"                      \
  "smlad %[a00], %[wb], %[wa], %[a00]\n\t"          \
  "ldr %[x0], [%[w], #40]\n\t"                      \
  "smlad %[a01], %[wb], %[x1], %[a01]\n\t"          \
  "ldr %[x2], [%[c], #36]\n\t"                      \
  "smlad %[a10], %[x0], %[wa], %[a10]\n\t"          \
  "ldr %[x3], [%[w], #36]\n\t"                      \
  "smlad %[a11], %[x0], %[x1], %[a11]\n\t"          \
  "ldr %[wb], [%[c], #44]\n\t"                      \
  "smlad %[a00], %[x3], %[x2], %[a00]\n\t"          \
  "ldr %[wa], [%[w], #44]\n\t"                      \
  "smlad %[a01], %[x3], %[wb], %[a01]\n\t"          \
  "ldr %[x0], [%[c], #48]\n\t"                      \
  "smlad %[a10], %[wa], %[x2], %[a10]\n\t"          \
  "ldr %[x1], [%[w], #48]\n\t"                      \
  "smlad %[a11], %[wa], %[wb], %[a11]\n\t"          \
  "ldr %[x3], [%[c], #56]\n\t"                      \
  "smlad %[a00], %[x1], %[x0], %[a00]\n\t"          \
  "ldr %[x2], [%[w], #56]\n\t"                      \
  "smlad %[a01], %[x1], %[x3], %[a01]\n\t"          \
  "ldr %[wa], [%[c], #52]\n\t"                      \
  "smlad %[a10], %[x2], %[x0], %[a10]\n\t"          \
  "ldr %[wb], [%[w], #52]\n\t"                      \
  "smlad %[a11], %[x2], %[x3], %[a11]\n\t"          \
  "ldr %[x1], [%[c], #60]\n\t"                      \
  "smlad %[a00], %[wb], %[wa], %[a00]\n\t"          \
  "ldr %[x0], [%[w], #60]\n\t"                      \
  "smlad %[a01], %[wb], %[x1], %[a01]\n\t"          \
  "add %[c], %[c], #64\n\t"                         \
  "smlad %[a10], %[x0], %[wa], %[a10]\n\t"          \
  "add %[w], %[w], #64\n\t"                         \
  "smlad %[a11], %[x0], %[x1], %[a11]\n\t"          \
  "subs %[g], %[g], #1\n\t"

#define AI_M7_W16_LOOP                              \
  "1:\n\t"                                          \
  "tst %[g], #3\n\t"                                \
  "beq 2f\n\t"                                      \
  AI_W16_M7_GROUP1                                  \
  "sub %[g], %[g], #1\n\t"                          \
  "b 1b\n"                                          \
  "2:\n\t"                                          \
  "lsrs %[g], %[g], #2\n\t"                         \
  "beq 4f\n\t"                                      \
  ".balign 4\n"                                     \
  "3:\n\t"                                          \
  AI_W16_M7_GROUP4                                  \
  "bne 3b\n"                                        \
  "4:\n\t"
#endif
#endif

/* AI_V6M_ASM: the Armv6-M loops below; at -Os gcc cannot allocate their eleven operands
 * (five in r8-r12), so a size-optimised build keeps the portable C loop (bit-exact, slower). */
#if !defined(__ARM_FEATURE_DSP) && defined(__ARM_ARCH_6M__) && !defined(__OPTIMIZE_SIZE__)
#define AI_V6M_ASM 1
#endif

#if defined(AI_V6M_ASM)
/* Armv6-M (Cortex-M0/M0+: no SMLAD, a single-cycle 32x32 MULS on the G0/C0) over the w16
 * layout: per group the column holds the halfwords x0 x2 x1 x3 of pixel 0 (bytes 0-7) then of
 * pixel 1 (8-15), the weights w0 w2 w1 w3 of oc (0-7) then of oc+1 (8-15): the same order, so
 * each accumulator is a plain int16 dot product. One element (4 MACs) is 2 column + 4 weight
 * LDRSH (register offset: Armv6-M has no immediate form), 4 MULS, 4 ADD into the accumulators
 * kept in r8-r11 (ADD takes high registers) = 14 instructions; the index steps 2 bytes within
 * a group and 10 to the next one. All loads are halfword loads at even offsets of word-aligned
 * arrays (aligned on Armv6-M, where an unaligned LDRSH faults). */
#define AI_V6M_ELEM(STEP)                             \
  "ldrsh %[x], [%[c0], %[i]]\n\t"                    \
  "ldrsh %[t], [%[w0], %[i]]\n\t"                    \
  "muls %[t], %[x]\n\t"                              \
  "add %[a00], %[t]\n\t"                             \
  "ldrsh %[t], [%[w1], %[i]]\n\t"                    \
  "muls %[t], %[x]\n\t"                              \
  "add %[a10], %[t]\n\t"                             \
  "ldrsh %[x], [%[c1], %[i]]\n\t"                    \
  "ldrsh %[t], [%[w0], %[i]]\n\t"                    \
  "muls %[t], %[x]\n\t"                              \
  "add %[a01], %[t]\n\t"                             \
  "ldrsh %[t], [%[w1], %[i]]\n\t"                    \
  "muls %[t], %[x]\n\t"                              \
  "add %[a11], %[t]\n\t"                             \
  "adds %[i], #" #STEP "\n\t"

static inline void mac2x2_w16_v6m(const uint32_t *w, const uint32_t *c, int32_t g, int32_t *p00,
                                  int32_t *p01, int32_t *p10, int32_t *p11) {
  if (g <= 0) {
    return;
  }
  const uint8_t *c0 = (const uint8_t *)c, *c1 = c0 + 8;
  const uint8_t *w0 = (const uint8_t *)w, *w1 = w0 + 8;
  int32_t a00 = *p00, a01 = *p01, a10 = *p10, a11 = *p11;
  uint32_t i = 0, x, t;
  const uint32_t end = 16u * (uint32_t)g;
  /* gcc hands Thumb-1 inline assembly the divided syntax (-masm-syntax-unified is off): this
   * block is written in unified syntax and restores the divided one for what follows */
  __asm__ volatile(".syntax unified\n"
                   "1:\n\t" AI_V6M_ELEM(2) AI_V6M_ELEM(2) AI_V6M_ELEM(2) AI_V6M_ELEM(10)
                   "cmp %[i], %[end]\n\t"
                   "bne 1b\n\t"
                   ".syntax divided\n\t"
                   : [a00] "+h"(a00), [a01] "+h"(a01), [a10] "+h"(a10), [a11] "+h"(a11),
                     [i] "+l"(i), [x] "=&l"(x), [t] "=&l"(t)
                   : [c0] "l"(c0), [c1] "l"(c1), [w0] "l"(w0), [w1] "l"(w1), [end] "h"(end)
                   : "cc", "memory");
  *p00 = a00, *p01 = a01, *p10 = a10, *p11 = a11;
}

/* The w8 layout on Armv6-M (a flash-constrained board keeps int8 weights): per group the 4
 * int8 weights w0 w1 w2 w3 of oc (bytes 0-3) and of oc+1 (4-7); column element j (halfword at
 * byte 2j: x0 x2 x1 x3) pairs with weight byte {0, 2, 1, 3}[j]. One pixel per pass (7 low
 * registers), the weights read twice as the w16 loop does: per element 1 LDRSH + 2 LDRSB,
 * 2 MULS, 2 ADD and the two index steps = 9 instructions per 2 MACs. */
#define AI_V6M_ELEM8(CSTEP, WSTEP)                    \
  "ldrsh %[x], [%[cp], %[ic]]\n\t"                   \
  "ldrsb %[t], [%[w0], %[iw]]\n\t"                   \
  "muls %[t], %[x]\n\t"                              \
  "add %[a0], %[t]\n\t"                              \
  "ldrsb %[t], [%[w1], %[iw]]\n\t"                   \
  "muls %[t], %[x]\n\t"                              \
  "add %[a1], %[t]\n\t"                              \
  "adds %[ic], #" #CSTEP "\n\t"                      \
  WSTEP "\n\t"

static inline void mac1x2_pass_w8_v6m(const uint8_t *cp, const uint8_t *w, int32_t g, int32_t *p0,
                                      int32_t *p1) {
  const uint8_t *w1 = w + 4;
  int32_t a0 = *p0, a1 = *p1;
  uint32_t ic = 0, iw = 0, x, t;
  const uint32_t end = 16u * (uint32_t)g;
  __asm__ volatile(".syntax unified\n"
                   "1:\n\t"
                   AI_V6M_ELEM8(2, "adds %[iw], #2") AI_V6M_ELEM8(2, "subs %[iw], #1")
                   AI_V6M_ELEM8(2, "adds %[iw], #2") AI_V6M_ELEM8(10, "adds %[iw], #5")
                   "cmp %[ic], %[end]\n\t"
                   "bne 1b\n\t"
                   ".syntax divided\n\t"
                   : [a0] "+h"(a0), [a1] "+h"(a1), [ic] "+l"(ic), [iw] "+l"(iw), [x] "=&l"(x),
                     [t] "=&l"(t)
                   : [cp] "l"(cp), [w0] "l"(w), [w1] "l"(w1), [end] "h"(end)
                   : "cc", "memory");
  *p0 = a0, *p1 = a1;
}
#endif

static inline __attribute__((always_inline)) void mac2x2_w8(const uint32_t **wp, const uint32_t *c, int32_t g, int32_t *acc) {
  const uint32_t *w = *wp;
  int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
#if defined(__ARM_FEATURE_DSP)
  uint32_t wa, wb, l0, l1, x0, x1;
  __asm__ volatile(AI_FOUR_GROUP_LOOP(AI_W8_GROUP)
          : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [w] "+r"(w),
            [c] "+r"(c), [g] "+r"(g), [wa] "=&r"(wa), [wb] "=&r"(wb), [l0] "=&r"(l0),
            [l1] "=&r"(l1), [x0] "=&r"(x0), [x1] "=&r"(x1)
          :
          : "cc", "memory");
#elif defined(AI_V6M_ASM)
  if (g > 0) {
    mac1x2_pass_w8_v6m((const uint8_t *)c, (const uint8_t *)w, g, &a00, &a10);       /* pixel 0 */
    mac1x2_pass_w8_v6m((const uint8_t *)c + 8, (const uint8_t *)w, g, &a01, &a11);   /* pixel 1 */
    w += 2 * g;
  }
#else
  for (; g > 0; --g, w += 2, c += 4) {
    const uint32_t l0 = sxtb16(w[0]), h0 = sxtb16_r8(w[0]);
    const uint32_t l1 = sxtb16(w[1]), h1 = sxtb16_r8(w[1]);
    a00 = smlad(h0, c[1], smlad(l0, c[0], a00));
    a10 = smlad(h1, c[1], smlad(l1, c[0], a10));
    a01 = smlad(h0, c[3], smlad(l0, c[2], a01));
    a11 = smlad(h1, c[3], smlad(l1, c[2], a11));
  }
#endif
  acc[0] = a00, acc[1] = a01, acc[2] = a10, acc[3] = a11;
  *wp = w;
}


static inline __attribute__((always_inline)) void mac2x2_w16(const uint32_t **wp, const uint32_t *c, int32_t g, int32_t *acc) {
  const uint32_t *w = *wp;
  int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
#if defined(__ARM_FEATURE_DSP)
  uint32_t wa, wb, x0, x1, x2, x3;
#if defined(AI_CORE_CM7)
  __asm__ volatile(AI_M7_W16_LOOP
#else
  __asm__ volatile(AI_FOUR_GROUP_LOOP(AI_W16_GROUP)
#endif
          : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [w] "+r"(w),
            [c] "+r"(c), [g] "+r"(g), [wa] "=&r"(wa), [wb] "=&r"(wb), [x0] "=&r"(x0),
            [x1] "=&r"(x1), [x2] "=&r"(x2), [x3] "=&r"(x3)
          :
          : "cc", "memory");
#elif defined(AI_V6M_ASM)
  mac2x2_w16_v6m(w, c, g, &a00, &a01, &a10, &a11);
  w += 4 * g;
#else
  for (; g > 0; --g, w += 4, c += 4) {
    a00 = smlad(w[1], c[1], smlad(w[0], c[0], a00));
    a01 = smlad(w[1], c[3], smlad(w[0], c[2], a01));
    a10 = smlad(w[3], c[1], smlad(w[2], c[0], a10));
    a11 = smlad(w[3], c[3], smlad(w[2], c[2], a11));
  }
#endif
  acc[0] = a00, acc[1] = a01, acc[2] = a10, acc[3] = a11;
  *wp = w;
}

/* The last output channel when out_c is odd, against both columns. Weights: its row,
 * K-padded, as int8 (w8) or as the int16 pairs {w0,w2} {w1,w3} per group (w16). */
static void mac1x2(const uint32_t *w, int w16, const uint32_t *c, int32_t g, int32_t *acc) {
  int32_t a0 = acc[0], a1 = acc[1];
  for (; g > 0; --g, c += 4) {
    uint32_t lo, hi;
    if (w16) {
      lo = w[0], hi = w[1];
      w += 2;
    } else {
      lo = sxtb16(w[0]), hi = sxtb16_r8(w[0]);
      w += 1;
    }
    a0 = smlad(hi, c[1], smlad(lo, c[0], a0));
    a1 = smlad(hi, c[3], smlad(lo, c[2], a1));
  }
  acc[0] = a0, acc[1] = a1;
}

/* One pixel (an odd last pixel: the column words {x0,x2} {x1,x3} of pixel 0 of each 4-word
 * group, c[0] and c[1]) against output channels (oc, oc+1): acc = {a0, a1}. The weights are
 * read as mac2x2_w8 / mac2x2_w16 read them (the same layout, every word once); the MACs, the
 * column loads and the SMLADs are half a pixel pair's: w8 12 instructions per group (4 LDR in
 * one burst, 4 SXTB16, 4 SMLAD) against 18, w16 10 against 16 (docs/kernels_conv.md "One-row
 * calls: the odd last pixel"). Not on Armv6-M (AI_V6M_ASM: the odd pixel stays a pair there). */
#if !defined(AI_V6M_ASM)
#define AI_CONV_PX1 1
#if defined(__ARM_FEATURE_DSP)
#define AI_W8_GROUP1                                  \
  "ldr %[wa], [%[w]], #8\n\t"                         \
  "ldr %[x0], [%[c]], #16\n\t"                        \
  "ldr %[wb], [%[w], #-4]\n\t"                        \
  "ldr %[x1], [%[c], #-12]\n\t"                       \
  "sxtb16 %[l0], %[wa]\n\t"                           \
  "sxtb16 %[wa], %[wa], ror #8\n\t"                   \
  "sxtb16 %[l1], %[wb]\n\t"                           \
  "sxtb16 %[wb], %[wb], ror #8\n\t"                   \
  "smlad %[a0], %[l0], %[x0], %[a0]\n\t"              \
  "smlad %[a0], %[wa], %[x1], %[a0]\n\t"              \
  "smlad %[a1], %[l1], %[x0], %[a1]\n\t"              \
  "smlad %[a1], %[wb], %[x1], %[a1]\n\t"

#define AI_W16_GROUP1                                 \
  "ldr %[wa], [%[w]], #16\n\t"                        \
  "ldr %[x0], [%[c]], #16\n\t"                        \
  "ldr %[wb], [%[w], #-8]\n\t"                        \
  "ldr %[x1], [%[c], #-12]\n\t"                       \
  "ldr %[l0], [%[w], #-12]\n\t"                       \
  "ldr %[l1], [%[w], #-4]\n\t"                        \
  "smlad %[a0], %[wa], %[x0], %[a0]\n\t"              \
  "smlad %[a1], %[wb], %[x0], %[a1]\n\t"              \
  "smlad %[a0], %[l0], %[x1], %[a0]\n\t"              \
  "smlad %[a1], %[l1], %[x1], %[a1]\n\t"
#endif

static inline __attribute__((always_inline)) void mac1px(const uint32_t **wp, int w16, const uint32_t *c, int32_t g,
                                                         int32_t *acc) {
  const uint32_t *w = *wp;
  int32_t a0 = acc[0], a1 = acc[1];
#if defined(__ARM_FEATURE_DSP)
  uint32_t wa, wb, l0, l1, x0, x1;
  if (w16) {
    __asm__ volatile(AI_FOUR_GROUP_LOOP(AI_W16_GROUP1)
                     : [a0] "+r"(a0), [a1] "+r"(a1), [w] "+r"(w), [c] "+r"(c), [g] "+r"(g), [wa] "=&r"(wa),
                       [wb] "=&r"(wb), [l0] "=&r"(l0), [l1] "=&r"(l1), [x0] "=&r"(x0), [x1] "=&r"(x1)
                     :
                     : "cc", "memory");
  } else {
    __asm__ volatile(AI_FOUR_GROUP_LOOP(AI_W8_GROUP1)
                     : [a0] "+r"(a0), [a1] "+r"(a1), [w] "+r"(w), [c] "+r"(c), [g] "+r"(g), [wa] "=&r"(wa),
                       [wb] "=&r"(wb), [l0] "=&r"(l0), [l1] "=&r"(l1), [x0] "=&r"(x0), [x1] "=&r"(x1)
                     :
                     : "cc", "memory");
  }
#else
  for (; g > 0; --g, c += 4) {
    if (w16) {
      a0 = smlad(w[1], c[1], smlad(w[0], c[0], a0));
      a1 = smlad(w[3], c[1], smlad(w[2], c[0], a1));
      w += 4;
    } else {
      a0 = smlad(sxtb16_r8(w[0]), c[1], smlad(sxtb16(w[0]), c[0], a0));
      a1 = smlad(sxtb16_r8(w[1]), c[1], smlad(sxtb16(w[1]), c[0], a1));
      w += 2;
    }
  }
#endif
  acc[0] = a0, acc[1] = a1;
  *wp = w;
}

/* mac1px with int8 weights against one pixel's int8 input (in_c % 4 == 0, one run of 4 * g
 * bytes: a 1x1 window) read straight from the image, each 4 bytes unpacked in the loop: 3 LDR,
 * 6 SXTB16, 4 SMLAD per group; no column in scratch (conv_triple). */
#if defined(__ARM_FEATURE_DSP)
#define AI_W8_GROUP1D                                 \
  "ldr %[x1], [%[c]], #4\n\t"                         \
  "ldr %[wa], [%[w]], #8\n\t"                         \
  "ldr %[wb], [%[w], #-4]\n\t"                        \
  "sxtb16 %[x0], %[x1]\n\t"                           \
  "sxtb16 %[x1], %[x1], ror #8\n\t"                   \
  "sxtb16 %[l0], %[wa]\n\t"                           \
  "sxtb16 %[wa], %[wa], ror #8\n\t"                   \
  "sxtb16 %[l1], %[wb]\n\t"                           \
  "sxtb16 %[wb], %[wb], ror #8\n\t"                   \
  "smlad %[a0], %[l0], %[x0], %[a0]\n\t"              \
  "smlad %[a0], %[wa], %[x1], %[a0]\n\t"              \
  "smlad %[a1], %[l1], %[x0], %[a1]\n\t"              \
  "smlad %[a1], %[wb], %[x1], %[a1]\n\t"
#endif

static inline __attribute__((always_inline)) void mac1px_w8_in(const uint32_t *w, const int8_t *x, int32_t g,
                                                               int32_t *acc) {
  int32_t a0 = acc[0], a1 = acc[1];
#if defined(__ARM_FEATURE_DSP)
  uint32_t wa, wb, l0, l1, x0, x1;
  __asm__ volatile(AI_FOUR_GROUP_LOOP(AI_W8_GROUP1D)
                   : [a0] "+r"(a0), [a1] "+r"(a1), [w] "+r"(w), [c] "+r"(x), [g] "+r"(g), [wa] "=&r"(wa),
                     [wb] "=&r"(wb), [l0] "=&r"(l0), [l1] "=&r"(l1), [x0] "=&r"(x0), [x1] "=&r"(x1)
                   :
                   : "cc", "memory");
#else
  for (; g > 0; --g, x += 4, w += 2) {
    const uint32_t v = rd32(x), x0 = sxtb16(v), x1 = sxtb16_r8(v);
    a0 = smlad(sxtb16_r8(w[0]), x1, smlad(sxtb16(w[0]), x0, a0));
    a1 = smlad(sxtb16_r8(w[1]), x1, smlad(sxtb16(w[1]), x0, a1));
  }
#endif
  acc[0] = a0, acc[1] = a1;
}
#endif

#if defined(AI_CONV_PX1)
/* A channel pair against three pixels whose int8 inputs are interleaved by group in scratch
 * (12 bytes per group: 4 of pixel 0, 1, 2; conv_triple): each weight word pair loaded and
 * unpacked once for 24 MACs, each input word unpacked in the loop (3 LDR + 4 + 6 SXTB16 + 12
 * SMLAD per group, ~30 estimated Cortex-M4 cycles, against 34 for mac2x2_w8 + mac1px_w8_in
 * over the same weights). 14 registers; the loop's two ends live in 8 bytes below sp. */
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__OPTIMIZE__) && !defined(AI_NO_ASM)
#define AI_W8_X3_PX(OFF, A0, A1)                      \
  "sxtb16 %[y], %[x]\n\t"                             \
  "sxtb16 %[x], %[x], ror #8\n\t"                     \
  "smlad %[" A0 "], %[l0], %[y], %[" A0 "]\n\t"       \
  "smlad %[" A1 "], %[l1], %[y], %[" A1 "]\n\t"       \
  "smlad %[" A0 "], %[wa], %[x], %[" A0 "]\n\t"       \
  "smlad %[" A1 "], %[wb], %[x], %[" A1 "]\n\t"
#define AI_W8_GROUP3X                                 \
  "ldr %[wa], [%[w]], #8\n\t"                         \
  "ldr %[wb], [%[w], #-4]\n\t"                        \
  "ldr %[x], [%[c]], #12\n\t"                         \
  "sxtb16 %[l0], %[wa]\n\t"                           \
  "sxtb16 %[wa], %[wa], ror #8\n\t"                   \
  "sxtb16 %[l1], %[wb]\n\t"                           \
  "sxtb16 %[wb], %[wb], ror #8\n\t"                   \
  AI_W8_X3_PX(0, "a00", "a10")                        \
  "ldr %[x], [%[c], #-8]\n\t"                         \
  AI_W8_X3_PX(4, "a01", "a11")                        \
  "ldr %[x], [%[c], #-4]\n\t"                         \
  AI_W8_X3_PX(8, "a02", "a12")
#define AI_CONV_X3_ASM 1
#endif

static inline __attribute__((always_inline)) void mac2x3_w8_x(const uint32_t **wp, const uint32_t *c, int32_t g,
                                                              int32_t *acc) {
  const uint32_t *w = *wp;
  int32_t a00 = acc[0], a01 = acc[1], a02 = acc[2], a10 = acc[3], a11 = acc[4], a12 = acc[5];
#if defined(AI_CONV_X3_ASM)
  uint32_t x = (uint32_t)(c + 3 * (g & 3)), y = (uint32_t)(c + 3 * g), wa, wb, l0, l1;
  __asm__ volatile("sub sp, sp, #8\n\t"
                   "str %[y], [sp]\n\t"
                   "str %[x], [sp, #4]\n\t"
                   "cmp %[c], %[x]\n\t"
                   "beq 2f\n"
                   "1:\n\t"
                   AI_W8_GROUP3X
                   "ldr %[y], [sp, #4]\n\t"
                   "cmp %[c], %[y]\n\t"
                   "bne 1b\n"
                   "2:\n\t"
                   "ldr %[y], [sp]\n\t"
                   "cmp %[c], %[y]\n\t"
                   "beq 4f\n\t"
                   ".balign 4\n"
                   "3:\n\t"
                   AI_W8_GROUP3X
                   AI_W8_GROUP3X
                   AI_W8_GROUP3X
                   AI_W8_GROUP3X
                   "ldr %[y], [sp]\n\t"
                   "cmp %[c], %[y]\n\t"
                   "bne 3b\n"
                   "4:\n\t"
                   "add sp, sp, #8\n\t"
                   : [a00] "+r"(a00), [a01] "+r"(a01), [a02] "+r"(a02), [a10] "+r"(a10), [a11] "+r"(a11),
                     [a12] "+r"(a12), [w] "+r"(w), [c] "+r"(c), [x] "+r"(x), [y] "+r"(y), [wa] "=&r"(wa),
                     [wb] "=&r"(wb), [l0] "=&r"(l0), [l1] "=&r"(l1)
                   :
                   : "cc", "memory");
#else
  for (; g > 0; --g, c += 3, w += 2) {
    const uint32_t l0 = sxtb16(w[0]), h0 = sxtb16_r8(w[0]), l1 = sxtb16(w[1]), h1 = sxtb16_r8(w[1]);
    const uint32_t p0 = sxtb16(c[0]), q0 = sxtb16_r8(c[0]), p1 = sxtb16(c[1]), q1 = sxtb16_r8(c[1]);
    const uint32_t p2 = sxtb16(c[2]), q2 = sxtb16_r8(c[2]);
    a00 = smlad(h0, q0, smlad(l0, p0, a00));
    a10 = smlad(h1, q0, smlad(l1, p0, a10));
    a01 = smlad(h0, q1, smlad(l0, p1, a01));
    a11 = smlad(h1, q1, smlad(l1, p1, a11));
    a02 = smlad(h0, q2, smlad(l0, p2, a02));
    a12 = smlad(h1, q2, smlad(l1, p2, a12));
  }
#endif
  acc[0] = a00, acc[1] = a01, acc[2] = a02, acc[3] = a10, acc[4] = a11, acc[5] = a12;
  *wp = w;
}
#endif

/* ---- requantisation + store. rq: 4 int32 per output channel, {bias, multiplier, rs,
 * kf} when p->rq_fold (rq_fold's constants, out_zp folded in; proven exact by the
 * lowering), else {bias, multiplier, shift, 0} (ai_requant, any shift). */
typedef struct {
  int32_t lo, hi, off; /* activation clamp, output zero point (general path) */
} conv_out_t;

/* General path, out of line: rare (effective scales >= 0.25). */
static __attribute__((noinline)) int8_t conv_out_general(const int32_t *q, int32_t acc,
                                                         const conv_out_t *o) {
  return clamp8(ai_wadd(ai_requant(acc, q[1], q[2]), o->off), o->lo, o->hi);
}

/* mode: 0 general, 1 rq_fold + SSAT, 2 rq_fold + SSAT + activation clamp. Constant
 * after inlining, so each mode is its own loop with nothing re-tested per output. */
static inline int8_t conv_out(const int32_t *q, int32_t m, int32_t rs, int32_t kf, int32_t acc,
                              const conv_out_t *o, int mode) {
  if (mode == 0) {
    return conv_out_general(q, acc, o);
  }
  int32_t v = ssat8(rq_fold(acc, m, rs, kf));
  if (mode == 2) {
    v = v < o->lo ? o->lo : v;
    v = v > o->hi ? o->hi : v;
  }
  return (int8_t)v;
}

/* The last output channel when out_c is odd: out of line, it is one channel of many. */
static __attribute__((noinline)) void conv_last_channel(int w16, const uint32_t *wp, const int32_t *q,
                                                        const uint32_t *col, int32_t groups, int8_t *o0,
                                                        int8_t *o1, const conv_out_t *o, int mode) {
  int32_t acc[2] = {q[0], q[0]};
  mac1x2(wp, w16, col, groups, acc);
  const int32_t m0 = q[1], rs0 = q[2], kf0 = q[3];
  int8_t y0, y1;
  if (mode == 1) {
    y0 = conv_out(q, m0, rs0, kf0, acc[0], o, 1);
    y1 = conv_out(q, m0, rs0, kf0, acc[1], o, 1);
  } else if (mode == 2) {
    y0 = conv_out(q, m0, rs0, kf0, acc[0], o, 2);
    y1 = conv_out(q, m0, rs0, kf0, acc[1], o, 2);
  } else {
    y0 = conv_out(q, m0, rs0, kf0, acc[0], o, 0);
    y1 = conv_out(q, m0, rs0, kf0, acc[1], o, 0);
  }
  o0[0] = y0;
  o1[0] = y1;
}

#if defined(__ARM_FEATURE_DSP) && !defined(AI_CORE_CM7)
/* w16 group with 4 data registers, one K-pair at a time: {x0,x2} of both channels against
 * both pixels, then {x1,x3}. Same loads (two bursts of 4: 5 + 5 cycles instead of 7 + 3) and
 * SMLADs as AI_W16_GROUP, two registers fewer: the whole channel loop fits in 13. */
#define AI_W16_GROUP4                                 \
  "ldr %[wa], [%[w]], #16\n\t"                        \
  "ldr %[x0], [%[c]], #16\n\t"                        \
  "ldr %[wb], [%[w], #-8]\n\t"                        \
  "ldr %[x1], [%[c], #-8]\n\t"                        \
  "smlad %[a00], %[wa], %[x0], %[a00]\n\t"            \
  "smlad %[a01], %[wa], %[x1], %[a01]\n\t"            \
  "smlad %[a10], %[wb], %[x0], %[a10]\n\t"            \
  "smlad %[a11], %[wb], %[x1], %[a11]\n\t"            \
  "ldr %[wa], [%[w], #-12]\n\t"                       \
  "ldr %[x0], [%[c], #-12]\n\t"                       \
  "ldr %[wb], [%[w], #-4]\n\t"                        \
  "ldr %[x1], [%[c], #-4]\n\t"                        \
  "smlad %[a00], %[wa], %[x0], %[a00]\n\t"            \
  "smlad %[a01], %[wa], %[x1], %[a01]\n\t"            \
  "smlad %[a10], %[wb], %[x0], %[a10]\n\t"            \
  "smlad %[a11], %[wb], %[x1], %[a11]\n\t"

/* One output of the folded requantisation (rq_fold + SSAT, mode 1) stored at [O, #OFF]:
 * lo:hi = kf:2^30 - 2^31*[acc<0] + acc*m, then hi >> rs saturated to int8. */
#define AI_RQ_OUT(ACC, O, OFF)                        \
  "and %[c], %[" ACC "], #0x80000000\n\t"             \
  "orr %[c], %[c], #0x40000000\n\t"                   \
  "add %[g], %[x1], %[" ACC "], asr #31\n\t"          \
  "smlal %[c], %[g], %[" ACC "], %[wa]\n\t"           \
  "asr %[g], %[g], %[wb]\n\t"                         \
  "ssat %[g], #8, %[g]\n\t"                           \
  "strb %[g], [%[" O "], #" OFF "]\n\t"

/* Every channel pair of a pixel pair, w16 weights, rq_fold + SSAT (the default on a board
 * that stages its weights): MAC loop, requantisation and stores in one assembly loop, so the
 * per-channel-pair work is ~59 estimated Cortex-M4 cycles instead of the ~77 gcc's code took
 * (docs/kernels_conv.md). 13 registers (r7 stays free for a frame pointer); the loop's
 * invariants (columns, group count, end of rq) live in 16 bytes below sp, the current rq
 * row pointer too. pairs >= 1. */
static inline __attribute__((always_inline)) const uint32_t *conv_pairs_asm_w16(
    const uint32_t *w, const uint32_t *col, int32_t groups, const int32_t *q, int32_t pairs,
    int8_t **o0p, int8_t **o1p) {
  int32_t a00, a01, a10, a11;
  uint32_t x0, x1;
  uint32_t c = (uint32_t)col, g = (uint32_t)groups;
  uint32_t wa = (uint32_t)q, wb = (uint32_t)(q + 8 * pairs);
  int8_t *o0 = *o0p, *o1 = *o1p;
  __asm__ volatile(
      "sub sp, sp, #16\n\t"
      "str %[c], [sp]\n\t"
      "str %[g], [sp, #4]\n\t"
      "str %[wa], [sp, #8]\n\t"
      "str %[wb], [sp, #12]\n\t"
      "mov %[x0], %[wa]\n\t"
      ".balign 4\n" /* a taken branch to a 32-bit instruction at a halfword address costs a cycle more */
      "5:\n\t"
      "ldr %[a00], [%[x0]]\n\t"
      "ldr %[a10], [%[x0], #16]\n\t"
      "ldr %[c], [sp]\n\t"
      "ldr %[g], [sp, #4]\n\t"
      "mov %[a01], %[a00]\n\t"
      "mov %[a11], %[a10]\n\t"
      AI_FOUR_GROUP_LOOP(AI_W16_GROUP4)
      "ldr %[x0], [sp, #8]\n\t"
      "ldr %[wa], [%[x0], #4]\n\t"
      "ldr %[wb], [%[x0], #8]\n\t"
      "ldr %[x1], [%[x0], #12]\n\t"
      AI_RQ_OUT("a00", "o0", "0")
      AI_RQ_OUT("a01", "o1", "0")
      "ldr %[wa], [%[x0], #20]\n\t"
      "ldr %[wb], [%[x0], #24]\n\t"
      "ldr %[x1], [%[x0], #28]\n\t"
      AI_RQ_OUT("a10", "o0", "1")
      AI_RQ_OUT("a11", "o1", "1")
      "add %[o0], %[o0], #2\n\t"
      "add %[o1], %[o1], #2\n\t"
      "add %[x0], %[x0], #32\n\t"
      "str %[x0], [sp, #8]\n\t"
      "ldr %[x1], [sp, #12]\n\t"
      "cmp %[x0], %[x1]\n\t"
      "bne 5b\n\t"
      "add sp, sp, #16\n\t"
      : [a00] "=&r"(a00), [a01] "=&r"(a01), [a10] "=&r"(a10), [a11] "=&r"(a11), [w] "+r"(w),
        [c] "+r"(c), [g] "+r"(g), [wa] "+r"(wa), [wb] "+r"(wb), [x0] "=&r"(x0), [x1] "=&r"(x1),
        [o0] "+r"(o0), [o1] "+r"(o1)
      :
      : "cc", "memory");
  *o0p = o0, *o1p = o1;
  return w;
}
#endif

#if defined(AI_CONV_QUAD)
/* Channel-quad group: 4 K-elements of output channels 0..3 against the two pixels' columns.
 * Per K-pair (the {x0,x2} words, then the {x1,x3} words) 2 column words and 4 weight words,
 * loaded in bursts of 4 and 2 single LDRs (5 + 3 estimated Cortex-M4 cycles, TRM DDI 0439B
 * §3.3.2; each pointer written back by its first load, the next load from the other pointer),
 * and 8 SMLADs: 32 cycles per 32 MACs, against 36 for the 2x2 block (AI_W16_GROUP4: 4 loads
 * per 4 SMLADs). Weights: the staged quad layout of conv_stage (8 words per group). */
#define AI_QUAD_GROUP                                 \
  "ldr %[wa], [%[w]], #32\n\t"                        \
  "ldr %[x0], [%[c]], #16\n\t"                        \
  "ldr %[wb], [%[w], #-28]\n\t"                       \
  "ldr %[x1], [%[c], #-8]\n\t"                        \
  "smlad %[a00], %[wa], %[x0], %[a00]\n\t"            \
  "smlad %[a10], %[wa], %[x1], %[a10]\n\t"            \
  "smlad %[a01], %[wb], %[x0], %[a01]\n\t"            \
  "smlad %[a11], %[wb], %[x1], %[a11]\n\t"            \
  "ldr %[wa], [%[w], #-24]\n\t"                       \
  "ldr %[wb], [%[w], #-20]\n\t"                       \
  "smlad %[a02], %[wa], %[x0], %[a02]\n\t"            \
  "smlad %[a12], %[wa], %[x1], %[a12]\n\t"            \
  "smlad %[a03], %[wb], %[x0], %[a03]\n\t"            \
  "smlad %[a13], %[wb], %[x1], %[a13]\n\t"            \
  "ldr %[wa], [%[w], #-16]\n\t"                       \
  "ldr %[x0], [%[c], #-12]\n\t"                       \
  "ldr %[wb], [%[w], #-12]\n\t"                       \
  "ldr %[x1], [%[c], #-4]\n\t"                        \
  "smlad %[a00], %[wa], %[x0], %[a00]\n\t"            \
  "smlad %[a10], %[wa], %[x1], %[a10]\n\t"            \
  "smlad %[a01], %[wb], %[x0], %[a01]\n\t"            \
  "smlad %[a11], %[wb], %[x1], %[a11]\n\t"            \
  "ldr %[wa], [%[w], #-8]\n\t"                        \
  "ldr %[wb], [%[w], #-4]\n\t"                        \
  "smlad %[a02], %[wa], %[x0], %[a02]\n\t"            \
  "smlad %[a12], %[wa], %[x1], %[a12]\n\t"            \
  "smlad %[a03], %[wb], %[x0], %[a03]\n\t"            \
  "smlad %[a13], %[wb], %[x1], %[a13]\n\t"

/* rq_fold + SSAT of one accumulator, in place (the int8 result in its low byte): lo:hi =
 * kf:2^30 - 2^31*[acc<0] + acc*m, then hi >> rs saturated (AI_RQ_OUT without the store).
 * Constants: m in wa, rs in wb, kf in x1; c and w are the temporaries. */
#define AI_RQ_ACC(ACC)                                \
  "and %[c], %[" ACC "], #0x80000000\n\t"             \
  "orr %[c], %[c], #0x40000000\n\t"                   \
  "add %[w], %[x1], %[" ACC "], asr #31\n\t"          \
  "smlal %[c], %[w], %[" ACC "], %[wa]\n\t"           \
  "asr %[w], %[w], %[wb]\n\t"                         \
  "ssat %[" ACC "], #8, %[w]\n\t"

/* The same output from a doubled accumulator (rq_fold == 2: the staged weights and bias
 * times 2, proven |2 acc| < 2^31 by the lowering), constants m in wa, e = rs + 1 in wb and
 * K = 2 kf in x1: hi = (K - [acc<0]):2^31 + acc*m rounded to its high word (SMMLAR), then
 * hi >> e saturated. With acc = 2x that is floor((x*m + 2^30 + kf*2^32 - 2^31*[x<0]) /
 * 2^(31+e)), rq_fold's value exactly (docs/kernels_conv.md "Doubled accumulator"): 4
 * instructions instead of 6. w is the temporary. */
#define AI_RQ_ACC_MM(ACC)                             \
  "add %[w], %[x1], %[" ACC "], asr #31\n\t"          \
  "smmlar %[w], %[" ACC "], %[wa], %[w]\n\t"          \
  "asr %[w], %[w], %[wb]\n\t"                         \
  "ssat %[" ACC "], #8, %[w]\n\t"

/* AI_RQ_ACC_MM without the sign term (rq_fold == 3, out_zp = -128, proven by the lowering):
 * for acc < 0 it gives hi >> e <= out_zp (acc*m <= -2^31 as m >= 2^30), and rq_fold's value is
 * no larger, so both saturate to -128; for acc >= 0 it is AI_RQ_ACC_MM. 3 instructions. */
#define AI_RQ_ACC_MM0(ACC)                            \
  "smmlar %[w], %[" ACC "], %[wa], %[x1]\n\t"         \
  "asr %[w], %[w], %[wb]\n\t"                         \
  "ssat %[" ACC "], #8, %[w]\n\t"

/* AI_RQ_ACC_MM0 in place (the accumulator is its own temporary): the weight pointer stays in
 * its register through the requantisation (no stack round trip) */
#define AI_RQ_ACC_MM0_IP(ACC)                                                           \
  "smmlar %[" ACC "], %[" ACC "], %[wa], %[x1]\n\t"                                     \
  "asr %[" ACC "], %[" ACC "], %[wb]\n\t"                                               \
  "ssat %[" ACC "], #8, %[" ACC "]\n\t"

#define AI_RQ_CH(OFF, A0, A1, RQ)                     \
  "ldr %[wa], [%[x0], #" OFF "+4]\n\t"                \
  "ldr %[wb], [%[x0], #" OFF "+8]\n\t"                \
  "ldr %[x1], [%[x0], #" OFF "+12]\n\t"               \
  RQ(A0)                                              \
  RQ(A1)

/* Every channel quad of a pixel pair (quads >= 1), staged w16 weights in the quad layout,
 * rq_fold + SSAT: 4 x 2 accumulators over the K groups, then the 8 outputs requantised in
 * place and stored as one word per pixel (4 consecutive channels; the word may be unaligned). 14 registers (r7 too: optimised builds only);
 * the loop's invariants live in 32 bytes below sp: the columns, the entry into the 4-group
 * body (groups % 4 leading groups run by entering it past its first groups, Duff's device:
 * one copy of the body less, which keeps the hot code within the L4's 1 KB ART I-cache), the
 * end of the columns, the rq row and its end, the output pointers and, while requantising
 * (rq_fold 1, 2: their requantisation needs it as a temporary), the weight pointer. One register
 * is LR (the body's entry, BX LR). Per quad and pixel pair ~95 estimated Cortex-M4 cycles
 * besides the groups' 32 each (docs/kernels_conv.md, "Compact pair loops for the quads"). */
/* The channel-quad loop of conv_quads_asm_w16, its requantisation RQ (AI_RQ_ACC or AI_RQ_ACC_MM). */
#define AI_QUADS_ASM(RQ, SAVEW, LOADW)                                                  \
      "sub sp, sp, #32\n\t"                                                             \
      "str %[a00], [sp]\n\t"                                                            \
      "str %[a01], [sp, #4]\n\t"                                                        \
      "str %[a02], [sp, #8]\n\t"                                                        \
      "str %[a03], [sp, #12]\n\t"                                                       \
      "str %[a10], [sp, #16]\n\t"                                                       \
      "str %[a11], [sp, #20]\n\t"                                                       \
      "str %[a12], [sp, #24]\n\t"                                                       \
      "adr %[x1], 3f\n\t"                                                               \
      "add %[x1], %[x1], %[a01]\n\t"                                                    \
      "str %[x1], [sp, #4]\n\t"                                                         \
      "mov %[x0], %[a03]\n\t"                                                           \
      ".balign 4\n"                                                                     \
      "5:\n\t"                                                                          \
      "ldr %[a00], [%[x0]]\n\t"                                                         \
      "ldr %[a01], [%[x0], #16]\n\t"                                                    \
      "ldr %[a02], [%[x0], #32]\n\t"                                                    \
      "ldr %[a03], [%[x0], #48]\n\t"                                                    \
      "ldr %[c], [sp]\n\t"                                                              \
      "ldr %[x1], [sp, #4]\n\t"                                                         \
      "mov %[a10], %[a00]\n\t"                                                          \
      "mov %[a11], %[a01]\n\t"                                                          \
      "mov %[a12], %[a02]\n\t"                                                          \
      "mov %[a13], %[a03]\n\t"                                                          \
      /* into the 4-group body at group (4 - groups % 4) % 4: BX LR (2 cycles: the core takes\
         its target at decode) after a pipelined load, not LDR PC (5) */                \
      "bx %[x1]\n\t"                                                                    \
      ".balign 4\n"                                                                     \
      "3:\n\t"                                                                          \
      AI_QUAD_GROUP                                                                     \
      AI_QUAD_GROUP                                                                     \
      AI_QUAD_GROUP                                                                     \
      AI_QUAD_GROUP                                                                     \
      "ldr %[x1], [sp, #8]\n\t"                                                         \
      "cmp %[c], %[x1]\n\t"                                                             \
      "bne 3b\n"                                                                        \
      "4:\n\t"                                                                          \
      SAVEW                                                                             \
      "ldr %[x0], [sp, #12]\n\t"                                                        \
      AI_RQ_CH("0", "a00", "a10", RQ)                                                   \
      AI_RQ_CH("16", "a01", "a11", RQ)                                                  \
      AI_RQ_CH("32", "a02", "a12", RQ)                                                  \
      AI_RQ_CH("48", "a03", "a13", RQ)                                                  \
      "bfi %[a00], %[a01], #8, #8\n\t"                                                  \
      "bfi %[a10], %[a11], #8, #8\n\t"                                                  \
      "bfi %[a00], %[a02], #16, #8\n\t"                                                 \
      "bfi %[a10], %[a12], #16, #8\n\t"                                                 \
      "bfi %[a00], %[a03], #24, #8\n\t"                                                 \
      "bfi %[a10], %[a13], #24, #8\n\t"                                                 \
      "ldr %[wa], [sp, #20]\n\t"                                                        \
      "ldr %[wb], [sp, #24]\n\t"                                                        \
      "ldr %[x1], [sp, #16]\n\t"                                                        \
      LOADW                                                                             \
      "add %[x0], %[x0], #64\n\t"                                                       \
      "str %[a00], [%[wa]], #4\n\t"                                                     \
      "str %[a10], [%[wb]], #4\n\t"                                                     \
      "str %[wa], [sp, #20]\n\t"                                                        \
      "str %[wb], [sp, #24]\n\t"                                                        \
      "str %[x0], [sp, #12]\n\t"                                                        \
      "cmp %[x0], %[x1]\n\t"                                                            \
      "bne 5b\n\t"                                                                      \
      "mov %[a11], %[wa]\n\t"                                                           \
      "mov %[a12], %[wb]\n\t"                                                           \
      "add sp, sp, #32\n\t"
#define AI_QUADS_OPERANDS                                                               \
      : [a00] "+r"(a00), [a01] "+r"(a01), [a02] "+r"(a02), [a03] "+r"(a03), [a10] "+r"(a10),\
        [a11] "+r"(a11), [a12] "+r"(a12), [a13] "=&r"(a13), [w] "+r"(w), [c] "=&r"(c),  \
        [wa] "=&r"(wa), [wb] "=&r"(wb), [x0] "=&r"(x0), [x1] "=&r"(x1)                  \
      :                                                                                 \
      : "cc", "memory"

static inline __attribute__((always_inline)) const uint32_t *conv_quads_asm_w16(
    const uint32_t *w, const uint32_t *col, int32_t groups, const int32_t *q, int32_t quads,
    int8_t **o0p, int8_t **o1p, int rq) {
  /* a01: the byte offset of the first group to run in the 4-group body (each group is 28
   * 32-bit instructions, 112 bytes), plus the Thumb bit for the BX LR that enters it */
  uint32_t a00 = (uint32_t)col, a01 = (uint32_t)(((4 - (groups & 3)) & 3) * 112 + 1);
  uint32_t a02 = (uint32_t)(col + 4 * groups);
  uint32_t a03 = (uint32_t)q, a10 = (uint32_t)(q + 16 * quads), a11 = (uint32_t)*o0p, a12 = (uint32_t)*o1p;
  uint32_t a13, c, wa, wb, x0;
  register uint32_t x1 __asm__("lr"); /* the body's entry is BX LR (AI_QUADS_ASM) */
  /* rq: the layer's rq_fold (1: AI_RQ_ACC; 2, 3: from the doubled accumulators; 3 in place, so the
   * weight pointer is not saved around it) */
#define AI_SAVEW "str %[w], [sp, #28]\n\t"
#define AI_LOADW "ldr %[w], [sp, #28]\n\t"
  if (rq == 3) {
    __asm__ volatile(AI_QUADS_ASM(AI_RQ_ACC_MM0_IP, "", "") AI_QUADS_OPERANDS);
  } else if (rq == 2) {
    __asm__ volatile(AI_QUADS_ASM(AI_RQ_ACC_MM, AI_SAVEW, AI_LOADW) AI_QUADS_OPERANDS);
  } else {
    __asm__ volatile(AI_QUADS_ASM(AI_RQ_ACC, AI_SAVEW, AI_LOADW) AI_QUADS_OPERANDS);
  }
#undef AI_SAVEW
#undef AI_LOADW
  *o0p = (int8_t *)a11, *o1p = (int8_t *)a12;
  return w;
}
#endif

/* Every output channel of a pixel pair (o0, o1; o1 == o0 for an odd last pixel). The MAC
 * loops leave the weight pointer at the next channel pair (the layout is contiguous);
 * outputs are stored through post-incremented pointers. */
static inline __attribute__((always_inline)) void conv_channels(const int8_t *w, int w16,
                                                                 int32_t groups, const int32_t *q,
                                                                 int32_t cout, const uint32_t *col,
                                                                 int8_t *o0, int8_t *o1,
                                                                 const conv_out_t *o, int mode,
                                                                 int quad) {
  const uint32_t *wp = (const uint32_t *)(const void *)w;
#if defined(AI_CONV_QUAD)
  if (quad && w16 && mode == 1 && cout >= 4) { /* the channel quads, then the pair layout */
    wp = conv_quads_asm_w16(wp, col, groups, q, cout >> 2, &o0, &o1, quad);
    q += 16 * (cout >> 2);
    cout &= 3;
    if (cout == 0) {
      return;
    }
  }
#else
  (void)quad;
#endif
#if defined(__ARM_FEATURE_DSP) && !defined(AI_CORE_CM7)
  /* not on the Cortex-M7 (AI_CORE_CM7, set by the project generator): there the estimator puts
   * it 8 % behind gcc's code (KWS on nucleo-h743zi 3,287,819 -> 3,595,724 estimated cycles) */
  if (w16 && mode == 1 && cout >= 2) {
    wp = conv_pairs_asm_w16(wp, col, groups, q, cout >> 1, &o0, &o1);
    q += 8 * (cout >> 1);
    if (cout & 1) {
      conv_last_channel(w16, wp, q, col, groups, o0, o1, o, mode);
    }
    return;
  }
#endif
  for (int32_t pairs = cout >> 1; pairs > 0; --pairs, q += 8) {
    int32_t acc[4] = {q[0], q[0], q[4], q[4]};
    if (w16) {
      mac2x2_w16(&wp, col, groups, acc);
    } else {
      mac2x2_w8(&wp, col, groups, acc);
    }
    /* constants into registers before the byte stores (which may alias them) */
    const int32_t m0 = q[1], rs0 = q[2], kf0 = q[3], m1 = q[5], rs1 = q[6], kf1 = q[7];
    const int8_t y00 = conv_out(q, m0, rs0, kf0, acc[0], o, mode);
    const int8_t y01 = conv_out(q, m0, rs0, kf0, acc[1], o, mode);
    const int8_t y10 = conv_out(q + 4, m1, rs1, kf1, acc[2], o, mode);
    const int8_t y11 = conv_out(q + 4, m1, rs1, kf1, acc[3], o, mode);
    o0[0] = y00;
    o0[1] = y10;
    o0 += 2;
    o1[0] = y01;
    o1[1] = y11;
    o1 += 2;
  }
  if (cout & 1) {
    conv_last_channel(w16, (const uint32_t *)(const void *)wp, q, col, groups, o0, o1, o, mode);
  }
}

/* One block of output channels over every pixel pair of one batch: what the pixel-pair loop
 * needs, computed once per call. */
typedef struct {
  const ai_conv2d_s8_params *p;
  const int8_t *in;      /* this batch's input */
  int8_t *out;           /* this batch's output, at the block's first channel */
  const int8_t *w;       /* the block's weights (staged copy or flash) */
  const int32_t *q;      /* the block's rq rows */
  int32_t n;             /* channels in the block */
  int32_t groups;        /* Kp / 4 */
  uint32_t *col;
  int8_t *extra;
  conv_out_t o;
  /* fast columns: a window that lies inside the image (and, krow, whose last padded row stays
   * inside the input tensor) is k_h runs of rowg groups, rowst bytes apart, straight from the
   * image; others take conv_columns (out of line). fast = 0: always conv_columns. */
  int32_t fast, rowg, rowst, kh;
  int32_t out_w, sy, sx, py, px, ymax, xmax, pix_bytes, row_bytes, max_off;
#if defined(AI_CONV_QUAD)
  int32_t quad;          /* the staged weights start with channel quads (conv_stage): rq_fold */
  int32_t lin;           /* rq_fold 3 and every window inside the image: conv_pairs_w16_m1qz_lin;
                          * 1: 1x1 stride 1 (pixel n at n * in_c), 2: the others */
  int32_t ystep, xstep;  /* lin 2: input bytes per output row and per output column */
#endif
} conv_run_t;

/* The first byte of output pixel n's window in the image when the fast path may read it
 * there, else NULL (every test on values computed once per call: the loop stays short). */
static inline __attribute__((always_inline)) const int8_t *conv_fast_src(const conv_run_t *r, int32_t n) {
  const int32_t oy = n / r->out_w, ox = n - oy * r->out_w;
  const int32_t iy0 = oy * r->sy - r->py, ix0 = ox * r->sx - r->px;
  if ((uint32_t)iy0 > (uint32_t)r->ymax || (uint32_t)ix0 > (uint32_t)r->xmax) {
    return 0;
  }
  const int32_t off = iy0 * r->row_bytes + ix0 * r->pix_bytes;
  return off <= r->max_off ? r->in + off : 0;
}

/* Out of line: border windows (padding) and layers whose window rows are not runs. Kept out
 * of the pixel-pair loops so that their hot code stays small (the L4's ART I-cache holds
 * 1 KB; docs/kernels_conv.md "Code size and the ART I-cache"). */
static __attribute__((noinline)) void conv_columns_slow(const conv_run_t *r, int32_t n0, int32_t n1) {
  conv_columns(r->p, r->in, n0, n1, r->col, r->extra);
}

#if defined(AI_CONV_PX1)
/* An odd last pixel (n) on its own (AI_CONV_PX1): its column built as a pair's pixel 0 (the
 * same builders, pixel 1 a copy), then every output channel pair against that one column
 * (mac1px: half the MACs and column loads of a pixel pair, the same weight reads), the odd
 * last channel as before. Same sums and requantisation as the pair of itself it replaces, so
 * the same bytes; the column is read before any output of the pixel is stored, as before.
 * Out of line (one per w16 x mode instance used): the pair loops keep their code. A one-row
 * stripe call on an odd width (KWS's 5-pixel rows) runs one per call. Not for the quads'
 * staged layout (conv_pairs passes quad == 0 only). */
static inline __attribute__((always_inline)) void conv_pixel(const conv_run_t *r, int32_t n, int w16, int mode) {
  const int32_t cout = r->p->out_c;
  const int8_t *s0 = r->fast ? conv_fast_src(r, n) : 0;
  if (s0) {
    uint32_t *c = r->col;
    for (int32_t ky = r->kh; ky > 0; --ky, s0 += r->rowst, c += 4 * r->rowg) {
      conv_unpack2(c, s0, s0, r->rowg);
    }
  } else {
    conv_columns_slow(r, n, n);
  }
  const uint32_t *wp = (const uint32_t *)(const void *)r->w;
  const int32_t *q = r->q;
  const uint32_t *col = r->col;
  const int32_t groups = r->groups;
  const conv_out_t o = r->o;
  int8_t *out = r->out + n * cout;
  for (int32_t pairs = r->n >> 1; pairs > 0; --pairs, q += 8, out += 2) {
    int32_t acc[2] = {q[0], q[4]};
    mac1px(&wp, w16, col, groups, acc);
    const int32_t m0 = q[1], rs0 = q[2], kf0 = q[3], m1 = q[5], rs1 = q[6], kf1 = q[7];
    const int8_t y0 = conv_out(q, m0, rs0, kf0, acc[0], &o, mode);
    const int8_t y1 = conv_out(q + 4, m1, rs1, kf1, acc[1], &o, mode);
    out[0] = y0;
    out[1] = y1;
  }
  if (r->n & 1) {
    conv_last_channel(w16, wp, q, col, groups, out, out, &o, mode);
  }
}

#define AI_CONV_PIXEL(NAME, W16, MODE) \
  static __attribute__((noinline)) void NAME(const conv_run_t *r, int32_t n) { conv_pixel(r, n, W16, MODE); }
AI_CONV_PIXEL(conv_pixel_w16_m1, 1, 1)
AI_CONV_PIXEL(conv_pixel_w16_m2, 1, 2)
AI_CONV_PIXEL(conv_pixel_w8_m1, 0, 1)
AI_CONV_PIXEL(conv_pixel_w8_m2, 0, 2)
static __attribute__((noinline)) void conv_pixel_m0(const conv_run_t *r, int32_t n, int w16) {
  conv_pixel(r, n, w16, 0);
}

/* conv_pairs' odd last pixel: the instance of its (w16, mode) */
static inline __attribute__((always_inline)) void conv_pixel_of(const conv_run_t *r, int32_t n, int w16,
                                                                int mode) {
  if (mode == 0) {
    conv_pixel_m0(r, n, w16);
  } else if (w16) {
    (mode == 1 ? conv_pixel_w16_m1 : conv_pixel_w16_m2)(r, n);
  } else {
    (mode == 1 ? conv_pixel_w8_m1 : conv_pixel_w8_m2)(r, n);
  }
}

/* The last pixel pair (n, n+1) and the odd last pixel n+2 in one pass over the weights
 * (AI_CONV_PX1, int8 weights, forward order): per channel pair the pair's 2x2 MAC loop, then
 * the odd pixel's (mac1px_w8_in) over the same weight rows, which the flash's data cache still
 * holds (the L4R5's 256 B hold a 1x1 64-channel layer's pair rows, 128 B), instead of a pass of
 * their own from flash. The odd pixel needs no column: its window is one run of the image
 * (1x1, inside), read where it is unless the three pixels' stores reach it (an output written
 * over its input, the planner's in-place 1x1 layers and a stripe's in-place rows): then it is
 * first copied to AI_CONV_TRIPLE_COPY bytes of stack. Returns 0 when it does not apply
 * (another window, an odd channel count, in place with in_c > AI_CONV_TRIPLE_COPY). */
#ifndef AI_CONV_TRIPLE_COPY
#define AI_CONV_TRIPLE_COPY 64 /* stack bytes for an odd pixel's input written over in place (in_c <= 64) */
#endif
static inline __attribute__((always_inline)) int conv_triple(const conv_run_t *r, int32_t n, int mode) {
  const int32_t cout = r->p->out_c, groups = r->groups;
  const int8_t *s2 = r->fast && r->kh == 1 && (r->n & 1) == 0 ? conv_fast_src(r, n + 2) : 0;
  if (!s2) {
    return 0;
  }
  int8_t *o0 = r->out + n * cout, *o1 = o0 + cout, *o2 = o1 + cout;
  const uintptr_t lo = (uintptr_t)o0, hi = (uintptr_t)(o2 + r->n), xlo = (uintptr_t)s2,
                  xhi = xlo + 4u * (uint32_t)groups;
  uint32_t x[AI_CONV_TRIPLE_COPY / 4];
  if (lo < xhi && xlo < hi) { /* written over (in place): its bytes copied to the stack first */
    if (groups > AI_CONV_TRIPLE_COPY / 4) {
      return 0;
    }
    memcpy(x, s2, 4u * (uint32_t)groups);
    s2 = (const int8_t *)x;
  }
  const int8_t *s0 = conv_fast_src(r, n), *s1 = s0 ? conv_fast_src(r, n + 1) : 0;
  if (s1) {
    conv_unpack2(r->col, s0, s1, r->rowg);
  } else {
    conv_columns_slow(r, n, n + 1);
  }
  const uint32_t *wp = (const uint32_t *)(const void *)r->w;
  const int32_t *q = r->q;
  const uint32_t *col = r->col;
  const conv_out_t o = r->o;
  for (int32_t pairs = r->n >> 1; pairs > 0; --pairs, q += 8) {
    const uint32_t *w0 = wp;
    int32_t acc[4] = {q[0], q[0], q[4], q[4]};
    int32_t acc2[2] = {q[0], q[4]};
    mac2x2_w8(&wp, col, groups, acc);
    mac1px_w8_in(w0, s2, groups, acc2);
    const int32_t m0 = q[1], rs0 = q[2], kf0 = q[3], m1 = q[5], rs1 = q[6], kf1 = q[7];
    const int8_t y00 = conv_out(q, m0, rs0, kf0, acc[0], &o, mode);
    const int8_t y01 = conv_out(q, m0, rs0, kf0, acc[1], &o, mode);
    const int8_t y02 = conv_out(q, m0, rs0, kf0, acc2[0], &o, mode);
    const int8_t y10 = conv_out(q + 4, m1, rs1, kf1, acc[2], &o, mode);
    const int8_t y11 = conv_out(q + 4, m1, rs1, kf1, acc[3], &o, mode);
    const int8_t y12 = conv_out(q + 4, m1, rs1, kf1, acc2[1], &o, mode);
    o0[0] = y00;
    o0[1] = y10;
    o0 += 2;
    o1[0] = y01;
    o1[1] = y11;
    o1 += 2;
    o2[0] = y02;
    o2[1] = y12;
    o2 += 2;
  }
  return 1;
}

#define AI_CONV_TRIPLE(NAME, MODE) \
  static __attribute__((noinline)) int NAME(const conv_run_t *r, int32_t n) { return conv_triple(r, n, MODE); }
AI_CONV_TRIPLE(conv_triple_w8_m1, 1)
AI_CONV_TRIPLE(conv_triple_w8_m2, 2)
#endif

#if defined(AI_CONV_PX1)
/* conv_channels' generic int8 loop (even cout), its channel pairs from the first to the last or
 * (back) from the last to the first: the snake order of conv_pairs' `snake` instances (below).
 * Same sums, requantisation and stores per channel pair; only the order of the pairs differs.
 * One loop for both directions (strides in registers): the pair loop keeps one channel loop's
 * code in the ART I-cache. */
static inline __attribute__((always_inline)) void conv_channels_w8_dir(const int8_t *w, int32_t groups,
                                                                       const int32_t *q, int32_t cout,
                                                                       const uint32_t *col, int8_t *o0,
                                                                       int8_t *o1, const conv_out_t *o,
                                                                       int mode, int back) {
  const int32_t last = back ? (cout >> 1) - 1 : 0, d = back ? -1 : 1;
  const uint32_t *wp = (const uint32_t *)(const void *)w + last * 2 * groups;
  const int32_t wadj = back ? -4 * groups : 0;
  q += 8 * last;
  o0 += 2 * last;
  o1 += 2 * last;
  for (int32_t pairs = cout >> 1; pairs > 0; --pairs, q += 8 * d, wp += wadj) {
    int32_t acc[4] = {q[0], q[0], q[4], q[4]};
    mac2x2_w8(&wp, col, groups, acc);
    const int32_t m0 = q[1], rs0 = q[2], kf0 = q[3], m1 = q[5], rs1 = q[6], kf1 = q[7];
    const int8_t y00 = conv_out(q, m0, rs0, kf0, acc[0], o, mode);
    const int8_t y01 = conv_out(q, m0, rs0, kf0, acc[1], o, mode);
    const int8_t y10 = conv_out(q + 4, m1, rs1, kf1, acc[2], o, mode);
    const int8_t y11 = conv_out(q + 4, m1, rs1, kf1, acc[3], o, mode);
    o0[0] = y00;
    o0[1] = y10;
    o0 += 2 * d;
    o1[0] = y01;
    o1[1] = y11;
    o1 += 2 * d;
  }
}
#endif

/* The pixel-pair loop of one block, for one (w16, mode) pair: each instance is its own
 * compact function (pair loop + fast columns + channel loop). `r` is copied to a local: the
 * byte stores may alias anything reached through a pointer, the local's fields they cannot.
 * snake (int8 weights read in place, even channel count, AI_CONV_PX1): the channel pairs run
 * forwards at one pixel pair and backwards at the next, so a pass starts on the weight and rq
 * lines the previous pass read last. A flash data cache with LRU replacement smaller than a
 * pass's bytes (the L4R5's ART: 256 B against VWW's first layer's 416 B) then keeps those
 * lines (a forward-only order misses every line of every pass; docs/stripes.md session 37). */
static inline __attribute__((always_inline)) void conv_pairs(const conv_run_t *rp, int w16, int mode,
                                                              int quad, int lin, int snake) {
  (void)snake; /* used with AI_CONV_PX1 only */
  const conv_run_t r = *rp;
  const int32_t npix = r.p->out_h * r.out_w, cout = r.p->out_c;
  const int32_t last = (npix - 1) & ~1, step = r.p->reverse ? -2 : 2;
#if defined(AI_CONV_QUAD)
  if (lin) {
    /* every window inside the image (conv_run_t.lin): no window test but the krow rows' end
     * (the last pixels may read past the tensor), no division for 1x1 stride 1 (lin 1: pixel n
     * at n * in_c); the pair loop stays a few instructions around the unpack and the quads, so
     * it and the quad loop fit the L4's 1 KB ART I-cache together (docs/kernels_conv.md) */
    for (int32_t k = r.p->reverse ? last : 0; k >= 0 && k < npix; k += step) {
      const int32_t k1 = k + 1 < npix ? k + 1 : k;
      int32_t f0, f1;
      if (lin == 1) {
        f0 = k * r.pix_bytes, f1 = k1 * r.pix_bytes;
      } else {
        const int32_t y0 = k / r.out_w, y1 = k1 / r.out_w;
        f0 = y0 * r.ystep + (k - y0 * r.out_w) * r.xstep;
        f1 = y1 * r.ystep + (k1 - y1 * r.out_w) * r.xstep;
      }
      if (f0 <= r.max_off && f1 <= r.max_off) {
        const int8_t *s0 = r.in + f0, *s1 = r.in + f1;
        if (lin == 1) {
          if (r.rowg & 1) {
            conv_unpack2(r.col, s0, s1, r.rowg);
          } else {
            conv_unpack2_x2(r.col, s0, s1, r.rowg >> 1);
          }
        } else if (r.rowg == 1) {
          conv_unpack2_rows1(r.col, s0, (int32_t)(s1 - s0), r.rowst, r.kh);
        } else {
          uint32_t *c = r.col;
          for (int32_t ky = r.kh; ky > 0; --ky, s0 += r.rowst, s1 += r.rowst, c += 4 * r.rowg) {
            conv_unpack2(c, s0, s1, r.rowg);
          }
        }
      } else {
        conv_columns_slow(rp, k, k1);
      }
      conv_channels(r.w, w16, r.groups, r.q, r.n, r.col, r.out + k * cout, r.out + k1 * cout, &r.o, mode,
                    quad);
    }
    /* code placement (once per call): with this word each lin instance's growth for the unpack
     * loops above sums to 192 B, a multiple of the L4R5's 32-byte ART I-cache line (RM0432
     * §3.3.4), so the kernels linked after this file (conv2d_smallk_win_s8, conv2d_wino_s8) keep
     * the line offsets they were measured with: a 184-byte growth put VWW's first layer (smallk
     * win) at +25 % estimated cycles (docs/kernels_conv.md, "Unpack loops of the lin paths");
     * the second word: the odd-pixel code (conv_pixel, conv_triple) grew the file's linked text
     * by 7,192 B on VWW's default build, 24 mod 32, which put the first layer at +25 % again;
     * these 2 x 4 bytes make it 7,200 (docs/kernels_conv.md "The odd last pixel") */
    __asm__ volatile("nop.w\n\tnop.w");
    return;
  }
#else
  (void)lin;
#endif
  /* Pixel pairs (0,1), (2,3), ... in raster order, or the reverse: each pair's columns
   * are read into scratch before its outputs are stored, so an output may overlap the
   * input where the planner proved no later pair reads it (docs/kernels_conv.md). */
#if defined(AI_CONV_PX1)
  if (snake) {
    /* whole pairs, the channel order alternating; an odd last pixel on its own */
    const int32_t odd = npix & 1, full = npix - odd;
    int back = 0;
    if (odd && step < 0) {
      conv_pixel_of(rp, npix - 1, 0, mode);
    }
    for (int32_t k = step > 0 ? 0 : full - 2, stop = step > 0 ? full : -2; k != stop; k += step, back ^= 1) {
      const int8_t *s0 = r.fast ? conv_fast_src(&r, k) : 0;
      const int8_t *s1 = s0 ? conv_fast_src(&r, k + 1) : 0;
      if (s1) {
        uint32_t *c = r.col;
        for (int32_t ky = r.kh; ky > 0; --ky, s0 += r.rowst, s1 += r.rowst, c += 4 * r.rowg) {
          conv_unpack2(c, s0, s1, r.rowg);
        }
      } else {
        conv_columns_slow(rp, k, k + 1);
      }
      conv_channels_w8_dir(r.w, r.groups, r.q, r.n, r.col, r.out + k * cout, r.out + (k + 1) * cout, &r.o, mode,
                           back);
    }
    if (odd && step > 0) {
      conv_pixel_of(rp, npix - 1, 0, mode);
    }
    return;
  }
  if (!quad) {
    /* whole pairs only in the loop; an odd last pixel on its own (conv_pixel): first when walking
     * backwards, last forwards, where with int8 weights the last pair takes it in its weight pass
     * (conv_triple) when that applies */
    const int32_t odd = npix & 1, full = npix - odd;
    int tri = !w16 && mode != 0 && odd && full >= 2 && step > 0;
    int32_t k = step > 0 ? 0 : full - 2, stop = step > 0 ? full - 2 * tri : -2;
    if (odd && step < 0) {
      conv_pixel_of(rp, npix - 1, w16, mode);
    }
    for (;;) {
      for (; k != stop; k += step) {
        const int8_t *s0 = r.fast ? conv_fast_src(&r, k) : 0;
        const int8_t *s1 = s0 ? conv_fast_src(&r, k + 1) : 0;
        if (s1) {
          uint32_t *c = r.col;
          for (int32_t ky = r.kh; ky > 0; --ky, s0 += r.rowst, s1 += r.rowst, c += 4 * r.rowg) {
            conv_unpack2(c, s0, s1, r.rowg);
          }
        } else {
          conv_columns_slow(rp, k, k + 1);
        }
        conv_channels(r.w, w16, r.groups, r.q, r.n, r.col, r.out + k * cout, r.out + (k + 1) * cout, &r.o,
                      mode, quad);
      }
      if (!tri) {
        break;
      }
      tri = 0;
      if ((mode == 1 ? conv_triple_w8_m1 : conv_triple_w8_m2)(rp, k)) {
        return;
      }
      stop = full; /* not applicable: the last pair in the loop, then the pixel */
    }
    if (odd && step > 0) {
      conv_pixel_of(rp, npix - 1, w16, mode);
    }
    return;
  }
#endif
  for (int32_t k = r.p->reverse ? last : 0; k >= 0 && k < npix; k += step) {
    /* an odd last pixel (the quads' staged layout; without AI_CONV_PX1 every layout) is computed
     * twice (both columns the same pixel) and stored twice to the same place */
    const int32_t k1 = k + 1 < npix ? k + 1 : k;
    const int8_t *s0 = r.fast ? conv_fast_src(&r, k) : 0;
    const int8_t *s1 = s0 ? conv_fast_src(&r, k1) : 0;
    if (s1) {
      uint32_t *c = r.col;
      for (int32_t ky = r.kh; ky > 0; --ky, s0 += r.rowst, s1 += r.rowst, c += 4 * r.rowg) {
        conv_unpack2(c, s0, s1, r.rowg);
      }
    } else {
      conv_columns_slow(rp, k, k1);
    }
    conv_channels(r.w, w16, r.groups, r.q, r.n, r.col, r.out + k * cout, r.out + k1 * cout, &r.o, mode,
                  quad);
  }
}

#define AI_CONV_PAIRS(NAME, W16, MODE, QUAD, LIN) \
  static __attribute__((noinline)) void NAME(const conv_run_t *r) { conv_pairs(r, W16, MODE, QUAD, LIN, 0); }
AI_CONV_PAIRS(conv_pairs_w16_m1, 1, 1, 0, 0)
AI_CONV_PAIRS(conv_pairs_w16_m2, 1, 2, 0, 0)
AI_CONV_PAIRS(conv_pairs_w8_m1, 0, 1, 0, 0)
AI_CONV_PAIRS(conv_pairs_w8_m2, 0, 2, 0, 0)
#if defined(AI_CONV_QUAD)
/* its own instance: the pair-only loops keep their code (and their fit in the ART I-cache) */
AI_CONV_PAIRS(conv_pairs_w16_m1q, 1, 1, 1, 0)
/* rq_fold 2, 3: doubled accumulators (AI_RQ_ACC_MM, AI_RQ_ACC_MM0) */
AI_CONV_PAIRS(conv_pairs_w16_m1qm, 1, 1, 2, 0)
AI_CONV_PAIRS(conv_pairs_w16_m1qz, 1, 1, 3, 0)
/* rq_fold 3 (the shared models' case) with every window inside the image (conv_run_t.lin): the
 * compact pair loops, 1x1 stride 1 and the others */
AI_CONV_PAIRS(conv_pairs_w16_m1qz_lin1, 1, 1, 3, 1)
AI_CONV_PAIRS(conv_pairs_w16_m1qz_lin2, 1, 1, 3, 2)
#endif
/* ---- pixel quads with int8 weights read in place (stripe calls; docs/kernels_conv.md "Pixel
 * quads, int8 columns") ----
 * A stripe member whose int8 weights stay in flash re-reads them once per pixel pair; here four
 * output pixels share one pass over the weights. Their columns are int8, in the 4 * Kp bytes that
 * hold a pixel pair's two int16 columns (no more scratch), interleaved per group of 4 K-elements
 * as four words: E_AB = {A0,B0,A2,B2}, E_CD = {C0,D0,C2,D2}, O_AB = {A1,B1,A3,B3}, O_CD (pixels
 * A..D). SXTB16 of E_AB gives pixel A's {x0,x2}, SXTB16 ROR 8 pixel B's: both pair with the
 * weights' {w0,w2} (SXTB16 of the weight word), so a group needs only the even weight halves,
 * then only the odd ones (the weight words loaded again: the same 8-byte flash read, a data
 * cache hit). Needs AI_CONV_QUAD's register set (14, optimised Armv7E-M builds); the C path (host
 * builds, for the tests) is the same computation. */
#if defined(AI_CONV_QUAD) || !defined(__arm__)
#define AI_CONV_PXQ 1
#define AI_PXQ_M 0x00FF00FFu

/* groups of four pixels' int8 K-elements (one word each per group) into the interleaved words */
static inline __attribute__((always_inline)) void pxq_interleave(uint32_t *d, const int8_t *s0, const int8_t *s1,
                                                                 const int8_t *s2, const int8_t *s3, int32_t groups) {
  for (; groups > 0; --groups, d += 4, s0 += 4, s1 += 4, s2 += 4, s3 += 4) {
    const uint32_t a = rd32(s0), b = rd32(s1), c = rd32(s2), e = rd32(s3);
    d[0] = (a & AI_PXQ_M) | ((b & AI_PXQ_M) << 8);
    d[1] = (c & AI_PXQ_M) | ((e & AI_PXQ_M) << 8);
    d[2] = ((a >> 8) & AI_PXQ_M) | (b & ~AI_PXQ_M);
    d[3] = ((c >> 8) & AI_PXQ_M) | (e & ~AI_PXQ_M);
  }
}

/* The quad's columns when a window leaves the image (or the layer has no fast path): per tap
 * each pixel's input channels from the image or the pad pixel (in_c % 4 == 0), out of line. */
static __attribute__((noinline)) void pxq_columns_slow(const conv_run_t *r, int32_t n) {
  const ai_conv2d_s8_params *p = r->p;
  const int32_t cin = p->in_c, groups = cin >> 2, ih = p->in_h, iw = p->in_w;
  int32_t y[4], x[4];
  for (int32_t i = 0; i < 4; ++i) {
    const int32_t oy = (n + i) / p->out_w;
    y[i] = oy * p->stride[0] - p->pad[0];
    x[i] = (n + i - oy * p->out_w) * p->stride[1] - p->pad[1];
  }
  uint32_t *d = r->col;
  if (conv_gathers(p)) {
    /* krow 1x1, every window inside the image (conv2d_s8_run's pxq test): the tensor's last
     * pixels, whose padded runs would read past it: their in_c & 3 last bytes, zeros after
     * (the padded weights are zero there) */
    int8_t t[4][4] = {{0}};
    const int8_t *s[4];
    for (int32_t i = 0; i < 4; ++i) {
      s[i] = r->in + (y[i] * iw + x[i]) * cin;
      memcpy(t[i], s[i] + 4 * groups, (size_t)(cin & 3));
    }
    pxq_interleave(d, s[0], s[1], s[2], s[3], groups);
    pxq_interleave(d + 4 * groups, t[0], t[1], t[2], t[3], 1);
    return;
  }
  for (int32_t ky = 0; ky < p->k_h; ++ky) {
    for (int32_t kx = 0; kx < p->k_w; ++kx, d += 4 * groups) {
      const int8_t *s[4];
      for (int32_t i = 0; i < 4; ++i) {
        const int32_t iy = y[i] + ky * p->dilation[0], ix = x[i] + kx * p->dilation[1];
        s[i] = iy >= 0 && iy < ih && ix >= 0 && ix < iw ? r->in + (iy * iw + ix) * cin : r->extra;
      }
      pxq_interleave(d, s[0], s[1], s[2], s[3], groups);
    }
  }
}

#if defined(AI_CONV_QUAD)
/* One group of 4 K-elements: output channels (oc, oc+1) x pixels A..D. Estimated Cortex-M4
 * cycles (TRM DDI 0439B §3.3.2): loads 2+1+1, 2, 2+1+1, 2; 12 SXTB16, 16 SMLAD: 40 per 32 MACs
 * (two int8-weight pixel pairs, AI_W8_GROUP: 40 too) and one 8-byte flash read instead of two. */
#define AI_PXQ_GROUP                                  \
  "ldr %[l0], [%[w]], #8\n\t"                         \
  "ldr %[x], [%[c]], #16\n\t"                         \
  "ldr %[l1], [%[w], #-4]\n\t"                        \
  "sxtb16 %[l0], %[l0]\n\t"                           \
  "sxtb16 %[l1], %[l1]\n\t"                           \
  "sxtb16 %[y], %[x]\n\t"                             \
  "sxtb16 %[x], %[x], ror #8\n\t"                     \
  "smlad %[a0], %[l0], %[y], %[a0]\n\t"               \
  "smlad %[b0], %[l1], %[y], %[b0]\n\t"               \
  "smlad %[a1], %[l0], %[x], %[a1]\n\t"               \
  "smlad %[b1], %[l1], %[x], %[b1]\n\t"               \
  "ldr %[x], [%[c], #-12]\n\t"                        \
  "sxtb16 %[y], %[x]\n\t"                             \
  "sxtb16 %[x], %[x], ror #8\n\t"                     \
  "smlad %[a2], %[l0], %[y], %[a2]\n\t"               \
  "smlad %[b2], %[l1], %[y], %[b2]\n\t"               \
  "smlad %[a3], %[l0], %[x], %[a3]\n\t"               \
  "smlad %[b3], %[l1], %[x], %[b3]\n\t"               \
  "ldr %[l0], [%[w], #-8]\n\t"                        \
  "ldr %[l1], [%[w], #-4]\n\t"                        \
  "ldr %[x], [%[c], #-8]\n\t"                         \
  "sxtb16 %[l0], %[l0], ror #8\n\t"                   \
  "sxtb16 %[l1], %[l1], ror #8\n\t"                   \
  "sxtb16 %[y], %[x]\n\t"                             \
  "sxtb16 %[x], %[x], ror #8\n\t"                     \
  "smlad %[a0], %[l0], %[y], %[a0]\n\t"               \
  "smlad %[b0], %[l1], %[y], %[b0]\n\t"               \
  "smlad %[a1], %[l0], %[x], %[a1]\n\t"               \
  "smlad %[b1], %[l1], %[x], %[b1]\n\t"               \
  "ldr %[x], [%[c], #-4]\n\t"                         \
  "sxtb16 %[y], %[x]\n\t"                             \
  "sxtb16 %[x], %[x], ror #8\n\t"                     \
  "smlad %[a2], %[l0], %[y], %[a2]\n\t"               \
  "smlad %[b2], %[l1], %[y], %[b2]\n\t"               \
  "smlad %[a3], %[l0], %[x], %[a3]\n\t"               \
  "smlad %[b3], %[l1], %[x], %[b3]\n\t"
#endif

#if defined(AI_CONV_QUAD)
/* the 14 operands of AI_PXQ_GROUP's loops */
#define AI_PXQ_OPS                                                                                 \
  [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [b0] "+r"(b0), [b1] "+r"(b1),         \
      [b2] "+r"(b2), [b3] "+r"(b3), [w] "+r"(w), [c] "+r"(c), [x] "+r"(x), [l0] "=&r"(l0), [l1] "=&r"(l1), \
      [y] "=&r"(y)
#endif

/* acc = {a0..a3: oc x pixels A..D, b0..b3: oc+1}. tail 0: groups a multiple of 4 (>= 4); tail
 * 1 (a constant; Kp % 16 != 0, e.g. VWW's in_c 60 members): any groups >= 1, the groups % 4
 * leftover groups first (a computed entry into the unrolled loop), then whole iterations. */
static inline __attribute__((always_inline)) void pxq_mac(const uint32_t **wp, const uint32_t *c, int32_t groups,
                                                          int32_t *acc, int tail) {
  const uint32_t *w = *wp;
  int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  int32_t b0 = acc[4], b1 = acc[5], b2 = acc[6], b3 = acc[7];
#if defined(AI_CONV_QUAD)
  /* all 14 registers (y is LR); the end of the columns lives on the stack */
  uint32_t x, l0, l1;
  register uint32_t y __asm__("lr");
  if (tail) {
    /* the leftover groups (Kp/4 % 4) run first as the unrolled loop's last ones, entered at
     * group 4 - leftover (each group moves its own pointers), so no more code than the plain
     * loop (a loop of its own outgrew the ART I-cache: VWW's in_c 60 member, +91 K fetch
     * stalls). x = the columns' end + the leftover count in its low 2 bits (word aligned);
     * one asm statement (two left gcc no register to spare between them on -mcpu=cortex-m7). */
    x = (uint32_t)(c + 4 * groups) + (uint32_t)(groups & 3);
    __asm__ volatile("and %[l0], %[x], #3\n\t"
                     "bic %[x], %[x], #3\n\t"
                     "str %[x], [sp, #-8]!\n\t"
                     "cmp %[l0], #2\n\t"
                     "beq.w 6f\n\t"
                     "bhi.w 5f\n\t"
                     "cmp %[l0], #1\n\t"
                     "beq.w 7f\n\t"
                     ".balign 4\n"
                     "1:\n\t"
                     AI_PXQ_GROUP
                     "5:\n\t"
                     AI_PXQ_GROUP
                     "6:\n\t"
                     AI_PXQ_GROUP
                     "7:\n\t"
                     AI_PXQ_GROUP
                     "ldr %[x], [sp]\n\t"
                     "cmp %[c], %[x]\n\t"
                     "bne 1b\n\t"
                     "add sp, sp, #8\n\t"
                     : AI_PXQ_OPS
                     :
                     : "cc", "memory");
  } else {
    x = (uint32_t)(c + 4 * groups);
    __asm__ volatile("str %[x], [sp, #-8]!\n\t"
                     ".balign 4\n"
                     "1:\n\t"
                     AI_PXQ_GROUP AI_PXQ_GROUP AI_PXQ_GROUP AI_PXQ_GROUP
                     "ldr %[x], [sp]\n\t"
                     "cmp %[c], %[x]\n\t"
                     "bne 1b\n\t"
                     "add sp, sp, #8\n\t"
                     : AI_PXQ_OPS
                     :
                     : "cc", "memory");
  }
#else
  (void)tail;
  for (; groups > 0; --groups, w += 2, c += 4) {
    const uint32_t l0 = sxtb16(w[0]), h0 = sxtb16_r8(w[0]), l1 = sxtb16(w[1]), h1 = sxtb16_r8(w[1]);
    const uint32_t ea = sxtb16(c[0]), eb = sxtb16_r8(c[0]), ec = sxtb16(c[1]), ed = sxtb16_r8(c[1]);
    const uint32_t oa = sxtb16(c[2]), ob = sxtb16_r8(c[2]), oc = sxtb16(c[3]), od = sxtb16_r8(c[3]);
    a0 = smlad(h0, oa, smlad(l0, ea, a0));
    a1 = smlad(h0, ob, smlad(l0, eb, a1));
    a2 = smlad(h0, oc, smlad(l0, ec, a2));
    a3 = smlad(h0, od, smlad(l0, ed, a3));
    b0 = smlad(h1, oa, smlad(l1, ea, b0));
    b1 = smlad(h1, ob, smlad(l1, eb, b1));
    b2 = smlad(h1, oc, smlad(l1, ec, b2));
    b3 = smlad(h1, od, smlad(l1, ed, b3));
  }
#endif
  acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
  acc[4] = b0, acc[5] = b1, acc[6] = b2, acc[7] = b3;
  *wp = w;
}

/* An odd last output channel (its plain padded row of Kp int8 weights) for the quad's 4 pixels:
 * out of line, one channel of many. */
static __attribute__((noinline)) void pxq_last_channel(const uint32_t *w, const int32_t *q, const uint32_t *c,
                                                       int32_t groups, int8_t *o, int32_t cout,
                                                       const conv_out_t *ro, int mode) {
  int32_t a0 = q[0], a1 = q[0], a2 = q[0], a3 = q[0];
  for (; groups > 0; --groups, ++w, c += 4) {
    const uint32_t l = sxtb16(w[0]), h = sxtb16_r8(w[0]);
    a0 = smlad(h, sxtb16(c[2]), smlad(l, sxtb16(c[0]), a0));
    a1 = smlad(h, sxtb16_r8(c[2]), smlad(l, sxtb16_r8(c[0]), a1));
    a2 = smlad(h, sxtb16(c[3]), smlad(l, sxtb16(c[1]), a2));
    a3 = smlad(h, sxtb16_r8(c[3]), smlad(l, sxtb16_r8(c[1]), a3));
  }
  const int32_t m = q[1], rs = q[2], kf = q[3];
  if (mode == 2) {
    o[0] = conv_out(q, m, rs, kf, a0, ro, 2), o[cout] = conv_out(q, m, rs, kf, a1, ro, 2);
    o[2 * cout] = conv_out(q, m, rs, kf, a2, ro, 2), o[3 * cout] = conv_out(q, m, rs, kf, a3, ro, 2);
  } else {
    o[0] = conv_out(q, m, rs, kf, a0, ro, 1), o[cout] = conv_out(q, m, rs, kf, a1, ro, 1);
    o[2 * cout] = conv_out(q, m, rs, kf, a2, ro, 1), o[3 * cout] = conv_out(q, m, rs, kf, a3, ro, 1);
  }
}

/* rq_fold == 3 (out_zp -128, m >= 2^30, |2 acc| < 2^31: proven by the lowering) from the doubled
 * accumulator, AI_RQ_ACC_MM0's arithmetic: K = 2 kf, e = rs + 1, hi = high word of K:2^31 +
 * 2acc * m (SMMLAR), then hi >> e saturated; rq_fold + SSAT's value (docs/kernels_conv.md
 * "Doubled accumulator"): 4 instructions with the doubling instead of 6. */
static inline __attribute__((always_inline)) int8_t pxq_out_mm0(int32_t acc, int32_t m, int32_t k2, int32_t e) {
  const int32_t a2 = (int32_t)((uint32_t)acc + (uint32_t)acc);
#if defined(__ARM_FEATURE_DSP)
  int32_t hi;
  __asm__("smmlar %0, %1, %2, %3" : "=r"(hi) : "r"(a2), "r"(m), "r"(k2));
#else
  const int64_t t = (int64_t)k2 * 4294967296LL + (int64_t)a2 * m + 2147483648LL;
  const int32_t hi = (int32_t)(t >> 32);
#endif
  return (int8_t)ssat8(hi >> e);
}

/* Every pixel quad of a call (npix % 4 == 0, raster order, int8 weights unstaged, in_c % 4 == 0
 * or krow 1x1 inside the image: conv2d_s8_run's pxq test; Kp % 16 == 0 unless tail; an odd last
 * channel: pxq_last_channel): columns, then per channel
 * pair the 8 sums, requantised and stored (after the columns are read: in place as the pairs).
 * mode 3: rq_fold 3 without an activation clamp, the doubled-accumulator requantisation. */
static inline __attribute__((always_inline)) void conv_pxq(const conv_run_t *rp, int mode, int tail) {
  const conv_run_t r = *rp;
  const int32_t npix = r.p->out_h * r.out_w, cout = r.p->out_c;
  for (int32_t k = 0; k < npix; k += 4) {
    /* fast: the quad in one output row, its first and last windows inside the image (so the
     * two between: sx * in_c bytes apart); else the slow columns (out of line: short hot code) */
    const int8_t *s0 = r.fast ? conv_fast_src(&r, k) : 0;
    const int8_t *s3 = s0 && k % r.out_w <= r.out_w - 4 ? conv_fast_src(&r, k + 3) : 0;
    if (s3) {
      const int32_t xs = r.sx * r.pix_bytes;
      const int8_t *s1 = s0 + xs, *s2 = s1 + xs;
      uint32_t *c = r.col;
      for (int32_t ky = r.kh; ky > 0; --ky, c += 4 * r.rowg) {
        pxq_interleave(c, s0, s1, s2, s3, r.rowg);
        s0 += r.rowst, s1 += r.rowst, s2 += r.rowst, s3 += r.rowst;
      }
    } else {
      pxq_columns_slow(rp, k);
    }
    const uint32_t *wp = (const uint32_t *)(const void *)r.w;
    const int32_t *q = r.q;
    int8_t *o = r.out + k * cout;
    for (int32_t pairs = cout >> 1; pairs > 0; --pairs, q += 8, o += 2) {
      int32_t acc[8] = {q[0], q[0], q[0], q[0], q[4], q[4], q[4], q[4]};
      pxq_mac(&wp, r.col, r.groups, acc, tail);
      int8_t y0, y1, y2, y3, z0, z1, z2, z3;
      if (mode == 3) {
        const int32_t m0 = q[1], e0 = q[2] + 1, k0 = 2 * q[3], m1 = q[5], e1 = q[6] + 1, k1 = 2 * q[7];
        y0 = pxq_out_mm0(acc[0], m0, k0, e0);
        y1 = pxq_out_mm0(acc[1], m0, k0, e0);
        y2 = pxq_out_mm0(acc[2], m0, k0, e0);
        y3 = pxq_out_mm0(acc[3], m0, k0, e0);
        z0 = pxq_out_mm0(acc[4], m1, k1, e1);
        z1 = pxq_out_mm0(acc[5], m1, k1, e1);
        z2 = pxq_out_mm0(acc[6], m1, k1, e1);
        z3 = pxq_out_mm0(acc[7], m1, k1, e1);
      } else {
        const int32_t m0 = q[1], rs0 = q[2], kf0 = q[3], m1 = q[5], rs1 = q[6], kf1 = q[7];
        y0 = conv_out(q, m0, rs0, kf0, acc[0], &r.o, mode);
        y1 = conv_out(q, m0, rs0, kf0, acc[1], &r.o, mode);
        y2 = conv_out(q, m0, rs0, kf0, acc[2], &r.o, mode);
        y3 = conv_out(q, m0, rs0, kf0, acc[3], &r.o, mode);
        z0 = conv_out(q + 4, m1, rs1, kf1, acc[4], &r.o, mode);
        z1 = conv_out(q + 4, m1, rs1, kf1, acc[5], &r.o, mode);
        z2 = conv_out(q + 4, m1, rs1, kf1, acc[6], &r.o, mode);
        z3 = conv_out(q + 4, m1, rs1, kf1, acc[7], &r.o, mode);
      }
      o[0] = y0, o[1] = z0;
      o[cout] = y1, o[cout + 1] = z1;
      o[2 * cout] = y2, o[2 * cout + 1] = z2;
      o[3 * cout] = y3, o[3 * cout + 1] = z3;
    }
    if (cout & 1) {
      pxq_last_channel(wp, q, r.col, r.groups, o, cout, &r.o, mode);
    }
  }
}

static __attribute__((noinline)) void conv_pxq_m1(const conv_run_t *r) { conv_pxq(r, 1, 0); }
static __attribute__((noinline)) void conv_pxq_m2(const conv_run_t *r) { conv_pxq(r, 2, 0); }
/* rq_fold 3, no clamp (the shared models' pointwise layers): the doubled-accumulator outputs */
static __attribute__((noinline)) void conv_pxq_m1z(const conv_run_t *r) { conv_pxq(r, 3, 0); }
/* Kp % 16 != 0: the leftover groups' loop first */
static __attribute__((noinline)) void conv_pxq_m1t(const conv_run_t *r) { conv_pxq(r, 1, 1); }
static __attribute__((noinline)) void conv_pxq_m2t(const conv_run_t *r) { conv_pxq(r, 2, 1); }
static __attribute__((noinline)) void conv_pxq_m1zt(const conv_run_t *r) { conv_pxq(r, 3, 1); }

/* the pixel-quad instance for a call's requantisation (mode 1, 2; rq_fold 3 -> the doubled
 * outputs where mode 1) and Kp (a multiple of 16, or not: tail) */
static inline __attribute__((always_inline)) void conv_pxq_run(const conv_run_t *r, int mode, int32_t rq_fold_,
                                                               int32_t kp) {
  if ((kp & 15) == 0) {
    (mode == 2 ? conv_pxq_m2 : rq_fold_ == 3 ? conv_pxq_m1z : conv_pxq_m1)(r);
  } else {
    (mode == 2 ? conv_pxq_m2t : rq_fold_ == 3 ? conv_pxq_m1zt : conv_pxq_m1t)(r);
  }
}
#endif

/* the general requantisation (rare) shares one loop for both layouts */
static __attribute__((noinline)) void conv_pairs_m0(const conv_run_t *r, int w16) { conv_pairs(r, w16, 0, 0, 0, 0); }
/* code-placement padding: nops written out one per line (not .rept), so that gcc's length
 * estimate of the asm statement is right and its short branches (CBZ) across it stay in range */
#define AI_NOPW2 "nop.w\n\tnop.w\n\t"
#define AI_NOPW4 AI_NOPW2 AI_NOPW2
#define AI_NOPW8 AI_NOPW4 AI_NOPW4
#if defined(AI_CONV_PX1)
/* the snake order (conv_pairs): int8 weights read in place, whose pass over the channels reads
 * more than AI_CONV_SNAKE_MIN bytes (weights + rq; the L4R5's ART data cache: 256 B) */
#ifndef AI_CONV_SNAKE_MIN
#define AI_CONV_SNAKE_MIN 256
#endif
/* code placement (once per call): each instance padded to a multiple of 64 bytes (1,216 and
 * 1,344 B on the Cortex-M4 build), so the functions linked after them keep their address modulo
 * 64 (the default firmware's estimated cycles: its conv2d_smallk_win_s8 lost 0.3 M to a shift;
 * docs/stripes.md session 37) */
#if defined(__ARM_ARCH_7EM__) && defined(__OPTIMIZE__) && !defined(AI_CORE_CM7)
#define AI_SNAKE_PAD1 __asm__ volatile(AI_NOPW2 "nop.w")
#define AI_SNAKE_PAD2 __asm__ volatile(AI_NOPW8 AI_NOPW8)
#else
#define AI_SNAKE_PAD1 (void)0
#define AI_SNAKE_PAD2 (void)0
#endif
static __attribute__((noinline)) void conv_pairs_w8_m1s(const conv_run_t *r) {
  conv_pairs(r, 0, 1, 0, 0, 1);
  AI_SNAKE_PAD1;
}
static __attribute__((noinline)) void conv_pairs_w8_m2s(const conv_run_t *r) {
  conv_pairs(r, 0, 2, 0, 0, 1);
  AI_SNAKE_PAD2;
}
#endif

/* The kernel: `win` NULL (constant-folded) runs the full geometry, the code of the usual entry
 * unchanged (no code-placement move in the default firmware); else the call's row window. */
static inline __attribute__((always_inline)) void conv2d_s8_run(const ai_conv2d_s8_params *p,
                                                                const ai_row_window *win, const int8_t *input,
                                                                const int8_t *weights, const int32_t *rq,
                                                                int8_t *output, void *scratch, void *stage_at,
                                                                int quads) {
  (void)quads; /* AI_CONV_PXQ builds only */
  /* the parameters on the stack: the column builders read them per pixel pair (the byte
   * stores may alias them), and a const struct in flash would cost wait states each time;
   * the one copy of a call, with its row window (a stripe's executor copies nothing) */
  ai_conv2d_s8_params local;
  if (quads) {
    /* the row-window entry: by words (ai_copy_words: LDM/STM on the Cortex-M4, inline) */
    ai_copy_words((uint32_t *)(void *)&local, (const uint32_t *)(const void *)p, sizeof local / 4u);
  } else {
    local = *p;
  }
  if (win != 0) {
    local.out_h = win->out_h;
    local.pad[0] = win->pad_top;
    local.in_h = win->in_h;
  }
  p = &local;
  const int32_t in_batch = p->in_h * p->in_w * p->in_c;
  conv_copy_t cg;
  int8_t *const copy = p->pad_copy ? conv_copy_setup(&local, &cg, scratch) : 0;
  const int32_t kp = conv_kp(p);
  const int32_t cout = p->out_c, blk = conv_block(p);
  const int32_t npix = p->out_h * p->out_w;
  const int w16 = p->w16 != 0, staged = p->stage_oc > 0;
  const int mode = !p->rq_fold ? 0 : (p->act_min > -128 || p->act_max < 127) ? 2 : 1;
  /* stage_at (conv2d_s8_gap): the staging area elsewhere, the columns at the scratch's start */
  uint32_t *stage = stage_at != 0 ? (uint32_t *)stage_at : (uint32_t *)scratch;
  /* channel quads (AI_CONV_QUAD): staged int16 weights, rq_fold + SSAT. Any channel count: a
   * block's first n & ~3 channels run as quads, the rest as pairs (and an odd last channel);
   * a quad's 4 outputs are one word store, unaligned when out_c or c0 is not a multiple of 4
   * (STR allows it on Armv7-M with CCR.UNALIGN_TRP clear, the reset value; ~1 cycle more,
   * Cortex-M4 TRM DDI 0439B §3.3.2) */
#if defined(AI_CONV_QUAD)
  const int quad = staged && w16 && mode == 1;
#endif
  conv_run_t r;
  r.p = p;
#if defined(AI_CONV_QUAD)
  r.quad = 0; /* not staged: the flash layout, pairs */
#endif
  r.groups = kp >> 2;
  r.col = (uint32_t *)((int8_t *)scratch + (stage_at != 0 ? 0 : conv_stage_bytes(p)));
  r.extra = (int8_t *)r.col + 4 * kp;
  r.o.lo = p->act_min, r.o.hi = p->act_max, r.o.off = p->out_offset;
  r.fast = p->dilation[1] == 1 && (!conv_gathers(p) || p->krow);
  r.rowg = conv_runp(p) >> 2;
  r.row_bytes = p->in_w * p->in_c;
  r.pix_bytes = p->in_c;
  r.rowst = p->dilation[0] * r.row_bytes;
  r.kh = p->k_h;
  r.out_w = p->out_w, r.sy = p->stride[0], r.sx = p->stride[1], r.py = p->pad[0], r.px = p->pad[1];
  /* inside: 0 <= iy0 <= ymax, 0 <= ix0 <= xmax (as unsigned compares); the last row's padded
   * run (krow) must end inside the input tensor: offset <= max_off */
  r.ymax = p->in_h - 1 - (p->k_h - 1) * p->dilation[0];
  r.xmax = p->in_w - p->k_w;
  r.max_off = p->in_h * r.row_bytes - (p->k_h - 1) * r.rowst - 4 * r.rowg;
  if (copy) {
    r.max_off += 4; /* the copy's zeroed slack word */
  }
  if (r.ymax < 0 || r.xmax < 0 || r.max_off < 0) {
    r.fast = 0;
  }
  if (!conv_gathers(p) && conv_pads(p)) {
    memset(r.extra, (int8_t)p->pad_value, (size_t)p->in_c);
  }
#if defined(AI_CONV_QUAD)
  /* every window inside the image (no padding, or the padded copy): the compact pair loop of the
   * rq_fold 3 quads; 1: 1x1 stride 1 (pixel n at n * in_c), 2: the others */
  r.lin = !quad || !r.fast || p->rq_fold != 3 || conv_pads(p) ? 0
          : p->k_h == 1 && p->k_w == 1 && p->stride[0] == 1 && p->stride[1] == 1 ? 1 : 2;
  if (r.lin == 2) {
    r.ystep = p->stride[0] * r.row_bytes;
    r.xstep = p->stride[1] * r.pix_bytes;
  }
#endif
#if defined(AI_CONV_PXQ)
  /* pixel quads (stripe calls only: `quads` is a constant, 1 in the row-window entry, 0 in the
   * layer-by-layer entry and in stage_gap's chunks (conv2d_s8_run_at), whose code every firmware
   * links and which stays as it was): int8 weights read in place, whole quads, raster order */
  const int pxq = quads && win != 0 && !w16 && !staged &&
                  (!conv_gathers(p) || (p->krow && p->k_h == 1 && p->k_w == 1 && !conv_pads(p))) && kp >= 4 &&
                  (npix & 3) == 0 && npix > 0 && !p->reverse;
#endif
#if defined(AI_CONV_PX1)
  /* unstaged int8 weights whose pass over the channels outgrows the flash data cache: the snake
   * order (conv_pairs); only where the compiler found a flash with wait states and a data cache
   * (stage_gap: conv2d_s8_gap's rows with no room). Elsewhere its ~35 more instructions per
   * pixel pair (VWW's first layer) buy nothing: QEMU's instruction count, KWS's and IC's stripes */
  const int snake = !staged && p->stage_gap && (cout & 1) == 0 && cout * (kp + 16) > AI_CONV_SNAKE_MIN;
#endif
  /* Blocks of output channels (one unless staged in blocks): the block's weights and rq are
   * staged once, then every batch and pixel pair computes the block's channels. */
  for (int32_t c0 = 0; c0 < cout; c0 += blk) {
    r.n = cout - c0 < blk ? cout - c0 : blk;
    r.w = weights;
    r.q = rq;
    if (staged) {
      /* quads only where a pixel pair's channel loop is long: the quad code and the pixel-pair
       * loop together outgrow the L4's 1 KB ART I-cache, and below n * Kp = AI_CONV_QUAD_MIN
       * the extra fetch misses per pixel pair cost more than the quads save (docs/kernels_conv.md,
       * "Channel quads") */
#if defined(AI_CONV_QUAD)
      r.quad = quad && r.n * kp >= (r.lin ? AI_CONV_QUAD_MIN_LIN : AI_CONV_QUAD_MIN)
                   ? (p->rq_fold >= 2 ? p->rq_fold : 1) : 0;
      if (quads) {
        conv_stage_rows(weights + c0 * kp, rq + 4 * c0, r.n, kp, w16, r.quad, stage);
      } else {
        conv_stage(weights, rq, c0, r.n, kp, w16, r.quad, stage);
      }
#else
      if (quads) {
        conv_stage_rows(weights + c0 * kp, rq + 4 * c0, r.n, kp, w16, 0, stage);
      } else {
        conv_stage(weights, rq, c0, r.n, kp, w16, 0, stage);
      }
#endif
      r.q = (const int32_t *)stage;
      r.w = (const int8_t *)(stage + 4 * r.n);
    }
    for (int32_t b = 0; b < p->batches; ++b) {
      r.in = input + b * in_batch;
      if (copy) {
        conv_pad_copy(&cg, r.in, copy);
        r.in = copy;
      }
      r.out = output + (int32_t)b * npix * cout + c0;
      if (mode == 0) {
        conv_pairs_m0(&r, w16);
      } else if (w16) {
#if defined(AI_CONV_QUAD)
        if (r.quad) {
          (r.quad == 3 ? (r.lin == 1 ? conv_pairs_w16_m1qz_lin1 : r.lin ? conv_pairs_w16_m1qz_lin2 : conv_pairs_w16_m1qz)
                       : r.quad == 2 ? conv_pairs_w16_m1qm : conv_pairs_w16_m1q)(&r);
          continue;
        }
#endif
        (mode == 1 ? conv_pairs_w16_m1 : conv_pairs_w16_m2)(&r);
      } else {
#if defined(AI_CONV_PXQ)
        if (pxq) {
          conv_pxq_run(&r, mode, p->rq_fold, kp);
          continue;
        }
#endif
#if defined(AI_CONV_PX1)
        if (snake) {
          (mode == 1 ? conv_pairs_w8_m1s : conv_pairs_w8_m2s)(&r);
          continue;
        }
#endif
        (mode == 1 ? conv_pairs_w8_m1 : conv_pairs_w8_m2)(&r);
      }
    }
  }
}

/* Not on Armv6-M (its boards' flash has no data cache for stage_gap to spare, and 32 KB parts
 * have no room for the code): there the flag is ignored, the layer runs unstaged, same bytes. */
#if !defined(__ARM_ARCH_6M__)
#define AI_CONV_GAP 1
#endif
#if defined(AI_CONV_GAP)
/* stage_gap (passes/gap_stage.py: this call is its input's only reader, int8 weights unstaged,
 * one batch, raster order, no padded copy): the output in chunks of rows; a chunk whose weights
 * and rq (out_c * (16 + Kp) bytes) fit in the input rows no later window reads, below the first
 * byte the chunk reads and above every output byte written up to the chunk's end, stages them
 * there (the usual staged loops, the columns in the scratch); a row with no such room runs
 * unstaged. The room grows as the input dies (VWW's first layer: stride 2, its output placed
 * just below its input), so the chunks grow. The same sums and requantisation, so the same bytes;
 * no byte beyond the tensors and the scratch is written. */
static __attribute__((noinline)) void conv2d_s8_run_at(const ai_conv2d_s8_params *p, const ai_row_window *win,
                                                       const int8_t *input, const int8_t *weights,
                                                       const int32_t *rq, int8_t *output, void *scratch,
                                                       void *stage_at) {
  conv2d_s8_run(p, win, input, weights, rq, output, scratch, stage_at, 0);
#if defined(__ARM_ARCH_7EM__) && defined(__OPTIMIZE__) && !defined(AI_CORE_CM7)
  /* code placement: 2,048 B on the Cortex-M4 build, a multiple of 64 (see conv_pairs_w8_m1s) */
  __asm__ volatile(AI_NOPW2 "nop.w");
#endif
}

/* Output rows [r0, r1) whose staging area of `sbytes` fits below the first input byte they read
 * (`live`, dead input below it) and above every output byte written up to r1: r1 (r0 if none). */
static inline int32_t conv_gap_rows(uintptr_t in0, uintptr_t live, uintptr_t out0, uintptr_t sbytes, int32_t ob,
                                    int32_t r0, int32_t out_h, uintptr_t *st) {
  *st = (live - sbytes) & ~(uintptr_t)3;
  if (live < in0 + sbytes + 3u) { /* st < in0: not on dead input bytes */
    return r0;
  }
  if (out0 >= *st + sbytes) {
    return out_h; /* the output lies above the stage */
  }
  if (out0 > *st) {
    return r0;
  }
  const uintptr_t rows = (*st - out0) / (uintptr_t)ob; /* output rows ending at or below st */
  return rows < (uintptr_t)out_h ? (int32_t)rows : out_h;
}

static __attribute__((noinline)) void conv2d_s8_gap(const ai_conv2d_s8_params *p, const int8_t *input,
                                                    const int8_t *weights, const int32_t *rq, int8_t *output,
                                                    void *scratch) {
  ai_conv2d_s8_params q = *p;
  const int32_t out_h = q.out_h, sy = q.stride[0], py = q.pad[0], oc = q.out_c, kp = conv_kp(&q);
  /* int16 staged (the pair loops' int16 path, fewer instructions) where it fits, else int8 */
  const uintptr_t s16 = (uintptr_t)oc * (uintptr_t)(16 + 2 * kp), s8 = (uintptr_t)oc * (uintptr_t)(16 + kp);
  const int32_t ob = q.out_w * oc, ib = q.in_w * q.in_c;
  const uintptr_t in0 = (uintptr_t)input, out0 = (uintptr_t)output;
  for (int32_t r0 = 0, r1; r0 < out_h; r0 = r1) {
    const int32_t iy = r0 * sy - py, first = iy > 0 ? iy : 0; /* rows >= r0 read input rows >= first */
    const uintptr_t live = in0 + (uintptr_t)first * (uintptr_t)ib;
    uintptr_t st;
    int32_t w16 = 1;
    r1 = conv_gap_rows(in0, live, out0, s16, ob, r0, out_h, &st);
    if (r1 <= r0) {
      w16 = 0;
      r1 = conv_gap_rows(in0, live, out0, s8, ob, r0, out_h, &st);
    }
    const int staged = r1 > r0;
    if (!staged) {
      r1 = r0 + 1;
    }
    const ai_row_window w = {r1 - r0, iy < 0 ? -iy : 0, q.in_h - first};
    q.stage_oc = staged ? oc : 0;
    q.w16 = staged ? w16 : 0;
    conv2d_s8_run_at(&q, &w, input + first * ib, weights, rq, output + r0 * ob, scratch,
                     staged ? (void *)st : 0);
  }
#if defined(__ARM_ARCH_7EM__) && defined(__OPTIMIZE__) && !defined(AI_CORE_CM7)
  /* code placement: 448 B on the Cortex-M4 build, a multiple of 64 (see conv_pairs_w8_m1s) */
  __asm__ volatile(AI_NOPW4 AI_NOPW2 "nop.w");
#endif
}
#endif /* AI_CONV_GAP */

void ai_conv2d_s8(const ai_conv2d_s8_params *p, const int8_t *input, const int8_t *weights,
                  const int32_t *rq, int8_t *output, void *scratch) {
#if defined(AI_CONV_GAP)
  if (p->stage_gap && p->stage_oc <= 0 && !p->w16 && p->batches == 1 && !p->pad_copy && !p->reverse) {
    conv2d_s8_gap(p, input, weights, rq, output, scratch);
    return;
  }
#endif
  conv2d_s8_run(p, 0, input, weights, rq, output, scratch, 0, 0);
#if defined(__ARM_ARCH_7EM__) && defined(__OPTIMIZE__)
  /* Code placement only: with the row-window entry beside it gcc allocates this entry's
   * registers differently (52 bytes more); the nops here make it 64 longer than before, so
   * every later function keeps its address modulo 64 (ART lines, the default firmware's
   * estimated cycles; docs/stripes.md session 35); and 32 bytes more for the dispatch below
   * (session 37: the snake and stage_gap dispatch, +192 in all) */
  __asm__ volatile("nop\n\tnop\n\tnop\n\tnop\n\tnop\n\t" AI_NOPW8);
#endif
}

#if defined(AI_CONV_PX1)
/* The last three pixels of a one-row 1x1 call (n, n + 1, n + 2; conv_rows_1x1_w8, a stripe's
 * pointwise member on an odd width): their int8 bytes interleaved by group in the scratch (3 Kp of
 * its 4 Kp bytes), read before any output is stored (in place or not), then one pass of
 * mac2x3_w8_x per channel pair: each weight word pair loaded and unpacked once for the 24 MACs of
 * three pixels (conv_triple: a pair pass, then the odd pixel's over the same weights, 34 estimated
 * Cortex-M4 cycles per group against ~30). Stripe-only code (the layer-by-layer firmware keeps
 * conv_triple: no code-placement move there). Its caller has checked that it applies: the
 * pixels' windows are the runs s0, s0 + in_c, s0 + 2 in_c (one row, no padding, in_c % 4 == 0,
 * int8 weights in place, an even out_c). */
static inline __attribute__((always_inline)) void conv_triple_x3(const conv_run_t *r, int32_t n, const int8_t *s0,
                                                                 int mode) {
  const int32_t cout = r->p->out_c, groups = r->groups, in_c = r->pix_bytes;
  int8_t *o0 = r->out + n * cout, *o1 = o0 + cout, *o2 = o1 + cout;
  const int8_t *s1 = s0 + in_c, *s2 = s1 + in_c;
  {
    /* the three pixels' bytes interleaved by group in the scratch (3 Kp of its 4 Kp bytes), read
     * before any output is stored (in place or not): one pass of mac2x3_w8_x per channel pair */
    uint32_t *x3 = r->col;
    for (int32_t k = 0; k < groups; ++k, x3 += 3) {
      x3[0] = rd32(s0 + 4 * k);
      x3[1] = rd32(s1 + 4 * k);
      x3[2] = rd32(s2 + 4 * k);
    }
    const uint32_t *wp = (const uint32_t *)(const void *)r->w;
    const int32_t *q = r->q;
    const conv_out_t o = r->o;
    for (int32_t pairs = r->n >> 1; pairs > 0; --pairs, q += 8) {
      int32_t acc[6] = {q[0], q[0], q[0], q[4], q[4], q[4]};
      mac2x3_w8_x(&wp, r->col, groups, acc);
      const int32_t m0 = q[1], rs0 = q[2], kf0 = q[3], m1 = q[5], rs1 = q[6], kf1 = q[7];
      const int8_t y00 = conv_out(q, m0, rs0, kf0, acc[0], &o, mode);
      const int8_t y01 = conv_out(q, m0, rs0, kf0, acc[1], &o, mode);
      const int8_t y02 = conv_out(q, m0, rs0, kf0, acc[2], &o, mode);
      const int8_t y10 = conv_out(q + 4, m1, rs1, kf1, acc[3], &o, mode);
      const int8_t y11 = conv_out(q + 4, m1, rs1, kf1, acc[4], &o, mode);
      const int8_t y12 = conv_out(q + 4, m1, rs1, kf1, acc[5], &o, mode);
      o0[0] = y00;
      o0[1] = y10;
      o0 += 2;
      o1[0] = y01;
      o1[1] = y11;
      o1 += 2;
      o2[0] = y02;
      o2[1] = y12;
      o2 += 2;
    }
  }
}
static __attribute__((noinline)) void conv_triple_x3_m1(const conv_run_t *r, int32_t n, const int8_t *s0) {
  conv_triple_x3(r, n, s0, 1);
}
static __attribute__((noinline)) void conv_triple_x3_m2(const conv_run_t *r, int32_t n, const int8_t *s0) {
  conv_triple_x3(r, n, s0, 2);
}

/* A stripe's 1x1 stride-1 member call with its int8 weights unstaged (KWS's pointwise layers
 * in --optimization ram: rows of 5 pixels, a pair then conv_triple): conv2d_s8_run's set-up for
 * exactly that case (one block, one batch, no padded copy, no pad pixel, folded
 * requantisation), the same conv_run_t, the same pair loop; short and out of line, so a call
 * skips the general entry's staging / block / batch logic and its cold code. */
static __attribute__((noinline)) void conv_rows_1x1_w8(const ai_conv2d_s8_params *p, const ai_row_window *win,
                                                       const int8_t *input, const int8_t *weights,
                                                       const int32_t *rq, int8_t *output, void *scratch,
                                                       int mode) {
  ai_conv2d_s8_params local;
  ai_copy_words((uint32_t *)(void *)&local, (const uint32_t *)(const void *)p, sizeof local / 4u);
  local.out_h = win->out_h;
  local.pad[0] = win->pad_top;
  local.in_h = win->in_h;
  conv_run_t r;
  const int32_t kp = conv_kp(&local);
  r.p = &local;
#if defined(AI_CONV_QUAD)
  r.quad = 0;
  r.lin = 0;
#endif
  r.in = input;
  r.out = output;
  r.w = weights;
  r.q = rq;
  r.n = local.out_c;
  r.groups = kp >> 2;
  r.col = (uint32_t *)scratch;
  r.extra = (int8_t *)r.col + 4 * kp;
  r.o.lo = local.act_min, r.o.hi = local.act_max, r.o.off = local.out_offset;
  r.fast = local.dilation[1] == 1;
  r.rowg = conv_runp(&local) >> 2;
  r.row_bytes = local.in_w * local.in_c;
  r.pix_bytes = local.in_c;
  r.rowst = local.dilation[0] * r.row_bytes;
  r.kh = 1;
  r.out_w = local.out_w, r.sy = 1, r.sx = 1, r.py = local.pad[0], r.px = local.pad[1];
  r.ymax = local.in_h - 1;
  r.xmax = local.in_w - 1;
  r.max_off = local.in_h * r.row_bytes - 4 * r.rowg;
  if (r.ymax < 0 || r.xmax < 0 || r.max_off < 0) {
    r.fast = 0;
  }
  /* one row on an odd width (KWS's 5-pixel rows, forward): its pairs but the last three pixels,
   * then those three in one weight pass (conv_triple_x3); else conv_pairs (conv_triple) */
  const int32_t npix = local.out_h * local.out_w;
  if (local.out_h == 1 && (npix & 1) && npix >= 3 && !local.reverse && (r.n & 1) == 0 && r.fast &&
      r.rowg == r.groups) {
    /* out_h 1, no padding, out_w <= in_w (ai_conv2d_s8_rows): pixel n's window is the run at
     * input + n * in_c, inside the image */
    if (npix > 3) {
      r.out_w = npix - 3; /* out_h 1: pixel n of the row stays at column n */
      (mode == 1 ? conv_pairs_w8_m1 : conv_pairs_w8_m2)(&r);
      r.out_w = npix;
    }
    (mode == 1 ? conv_triple_x3_m1 : conv_triple_x3_m2)(&r, npix - 3, input + (npix - 3) * local.in_c);
    return;
  }
#if defined(AI_CONV_PXQ)
  /* pixel quads (pw37; VWW's pointwise members): the call's pixels are contiguous runs (one row,
   * or whole rows: out_w == in_w), pixel n's at input + n * in_c, so its first npix & ~3 pixels
   * are one pretend row of that many pixels for conv_pxq (every window inside it: its fast
   * columns), the weights read once per 4 pixels; the rest as pairs, after (forward, as before) */
  const int32_t nq = npix & ~3;
  if (nq > 0 && !local.reverse && kp >= 4 && r.fast && r.rowg == r.groups &&
      (local.out_h == 1 || local.out_w == local.in_w)) {
    local.out_h = 1;
    r.out_w = nq;
    r.ymax = 0;
    r.xmax = nq - 1;
    conv_pxq_run(&r, mode, local.rq_fold, kp);
    if (npix > nq) {
      r.in += nq * local.in_c;
      r.out += nq * local.out_c;
      r.out_w = npix - nq;
      r.xmax = npix - nq - 1;
      r.max_off -= nq * local.in_c;
      (mode == 1 ? conv_pairs_w8_m1 : conv_pairs_w8_m2)(&r);
    }
    return;
  }
#endif
  (mode == 1 ? conv_pairs_w8_m1 : conv_pairs_w8_m2)(&r);
}
#endif

#if defined(AI_CONV_QUAD)
/* A stripe's 1x1 stride-1 member call with int16 weights staged in one block (VWW's pointwise
 * members in --optimization ram, 16 calls each for some): conv2d_s8_run's set-up for exactly
 * that case (one block, one batch, no padded copy, no pad pixel, in_c % 4 == 0 or krow: the
 * fast columns, folded requantisation over the full int8 range: mode 1), the same conv_run_t,
 * the same staged
 * layout (conv_stage_rows) and the same pair / quad loops as conv2d_s8_run would choose; short
 * and out of line, so a call skips the general entry's staging / block / batch logic and its
 * cold code (~1,000 estimated cycles a call there, half of them I-cache misses). */
static __attribute__((noinline)) void conv_rows_1x1_w16(const ai_conv2d_s8_params *p, const ai_row_window *win,
                                                        const int8_t *input, const int8_t *weights,
                                                        const int32_t *rq, int8_t *output, void *scratch) {
  ai_conv2d_s8_params local;
  ai_copy_words((uint32_t *)(void *)&local, (const uint32_t *)(const void *)p, sizeof local / 4u);
  local.out_h = win->out_h;
  local.pad[0] = win->pad_top;
  local.in_h = win->in_h;
  conv_run_t r;
  const int32_t kp = conv_kp(&local), n = local.out_c;
  uint32_t *const stage = (uint32_t *)scratch;
  r.p = &local;
  r.in = input;
  r.out = output;
  r.n = n;
  r.groups = kp >> 2;
  r.col = (uint32_t *)((int8_t *)scratch + conv_stage_bytes(&local));
  r.extra = (int8_t *)r.col + 4 * kp;
  r.o.lo = local.act_min, r.o.hi = local.act_max, r.o.off = local.out_offset;
  r.rowg = conv_runp(&local) >> 2;
  r.row_bytes = local.in_w * local.in_c;
  r.pix_bytes = local.in_c;
  r.rowst = local.dilation[0] * r.row_bytes;
  r.kh = 1;
  r.out_w = local.out_w, r.sy = 1, r.sx = 1, r.py = 0, r.px = 0;
  r.ymax = local.in_h - 1;
  r.xmax = local.in_w - 1;
  r.max_off = local.in_h * r.row_bytes - 4 * r.rowg;
  r.fast = local.dilation[1] == 1 && r.ymax >= 0 && r.xmax >= 0 && r.max_off >= 0;
  /* conv2d_s8_run's choices: quads (staged, w16, mode 1) from n * Kp on, lin 1 for rq_fold 3
   * with every window inside the image (1x1 stride 1, no padding: the fast columns) */
  r.lin = r.fast && local.rq_fold == 3 ? 1 : 0;
  r.quad = n * kp >= (r.lin ? AI_CONV_QUAD_MIN_LIN : AI_CONV_QUAD_MIN) ? (local.rq_fold >= 2 ? local.rq_fold : 1) : 0;
  conv_stage_rows(weights, rq, n, kp, 1, r.quad, stage);
  r.q = (const int32_t *)stage;
  r.w = (const int8_t *)(stage + 4 * n);
  if (r.quad) {
    (r.quad == 3 ? (r.lin ? conv_pairs_w16_m1qz_lin1 : conv_pairs_w16_m1qz)
                 : r.quad == 2 ? conv_pairs_w16_m1qm : conv_pairs_w16_m1q)(&r);
  } else {
    conv_pairs_w16_m1(&r);
  }
}
#endif

void ai_conv2d_s8_rows(const ai_conv2d_s8_params *p, ai_row_window win, const int8_t *input,
                       const int8_t *weights, const int32_t *rq, int8_t *output, void *scratch) {
#if defined(AI_CONV_PX1)
  if (p->k_h == 1 && p->k_w == 1 && p->stride[0] == 1 && p->stride[1] == 1 && (p->in_c & 3) == 0 &&
      !p->w16 && p->stage_oc <= 0 && !p->pad_copy && p->rq_fold && p->batches == 1 && p->pad[1] == 0 &&
      win.pad_top == 0 && win.out_h <= win.in_h && p->out_w <= p->in_w) {
    /* no window leaves the image (conv_pads 0): no pad pixel to write */
    conv_rows_1x1_w8(p, &win, input, weights, rq, output, scratch,
                     (p->act_min > -128 || p->act_max < 127) ? 2 : 1);
    return;
  }
#endif
#if defined(AI_CONV_QUAD)
  if (p->k_h == 1 && p->k_w == 1 && p->stride[0] == 1 && p->stride[1] == 1 && ((p->in_c & 3) == 0 || p->krow) && p->w16 &&
      p->stage_oc >= p->out_c && !p->pad_copy && p->rq_fold && p->act_min == -128 && p->act_max == 127 &&
      p->batches == 1 && p->pad[1] == 0 && win.pad_top == 0 && win.out_h <= win.in_h && p->out_w <= p->in_w) {
    conv_rows_1x1_w16(p, &win, input, weights, rq, output, scratch);
    return;
  }
#endif
  conv2d_s8_run(p, &win, input, weights, rq, output, scratch, 0, 1);
}

/* ---- one column (ai_conv2d_s8_1col, docs/kernels_conv.md "One column") ----
 * The same layer one output pixel at a time: one int16 column of Kp elements (2 * Kp bytes,
 * the words {x0,x2} {x1,x3} per group of 4 K-elements) instead of a pixel pair's two, for
 * stripe members whose scratch sets the stripe's peak (--optimization ram). The weights are the
 * pair layout ai_conv2d_s8 reads unstaged (each pair's per-group words {w0,w2} {w1,w3} of oc then
 * of oc+1, int16 or int8; an odd last channel's row at the end); the same exact int32 sums and
 * requantisation, so the outputs are those of ai_conv2d_s8. Only for in_c % 4 == 0, unstaged,
 * no padded copy and raster order (conv_1col_ok); any other layer runs ai_conv2d_s8 itself. */
static inline int conv_1col_ok(const ai_conv2d_s8_params *p) {
  return !conv_gathers(p) && p->stage_oc <= 0 && !p->pad_copy && !p->reverse;
}

int32_t ai_conv2d_s8_1col_scratch_size(const ai_conv2d_s8_params *p) {
  if (!conv_1col_ok(p)) {
    return ai_conv2d_s8_scratch_size(p);
  }
  return 2 * conv_kp(p) + conv_extra_bytes(p); /* the column, then the pad pixel (conv_pads) */
}

/* Output pixel n's column: per tap its in_c channels unpacked from the image, or from the pad
 * pixel `pad` when the tap lies outside the image. */
static void conv_col1(const ai_conv2d_s8_params *p, const int8_t *in, int32_t n, uint32_t *d,
                      const int8_t *pad) {
  const int32_t oy = n / p->out_w, ox = n - oy * p->out_w;
  const int32_t y0 = oy * p->stride[0] - p->pad[0], x0 = ox * p->stride[1] - p->pad[1];
  const int32_t cin = p->in_c, ih = p->in_h, iw = p->in_w;
  for (int32_t ky = 0; ky < p->k_h; ++ky) {
    const int32_t iy = y0 + ky * p->dilation[0];
    for (int32_t kx = 0; kx < p->k_w; ++kx) {
      const int32_t ix = x0 + kx * p->dilation[1];
      const int8_t *s = iy >= 0 && iy < ih && ix >= 0 && ix < iw ? in + (iy * iw + ix) * cin : pad;
      for (int32_t g = cin >> 2; g > 0; --g, s += 4, d += 2) {
        const uint32_t v = rd32(s);
        d[0] = sxtb16(v);
        d[1] = sxtb16_r8(v);
      }
    }
  }
}

/* Every output channel of one pixel (its column `col`) into o. */
static inline __attribute__((always_inline)) void conv_1col_channels(const uint32_t *wp, int w16,
                                                                      int32_t groups, const int32_t *q,
                                                                      int32_t cout, const uint32_t *col,
                                                                      int8_t *o, const conv_out_t *oo,
                                                                      int mode) {
  for (int32_t pairs = cout >> 1; pairs > 0; --pairs, q += 8, o += 2) {
    int32_t a0 = q[0], a1 = q[4];
    const uint32_t *c = col;
    for (int32_t g = groups; g > 0; --g, c += 2) {
      const uint32_t x0 = c[0], x1 = c[1];
      if (w16) {
        a0 = smlad(wp[1], x1, smlad(wp[0], x0, a0));
        a1 = smlad(wp[3], x1, smlad(wp[2], x0, a1));
        wp += 4;
      } else {
        const uint32_t u = wp[0], v = wp[1];
        a0 = smlad(sxtb16_r8(u), x1, smlad(sxtb16(u), x0, a0));
        a1 = smlad(sxtb16_r8(v), x1, smlad(sxtb16(v), x0, a1));
        wp += 2;
      }
    }
    const int32_t m0 = q[1], rs0 = q[2], kf0 = q[3], m1 = q[5], rs1 = q[6], kf1 = q[7];
    const int8_t y0 = conv_out(q, m0, rs0, kf0, a0, oo, mode);
    const int8_t y1 = conv_out(q + 4, m1, rs1, kf1, a1, oo, mode);
    o[0] = y0;
    o[1] = y1;
  }
  if (cout & 1) { /* the odd last channel's row: 2 (w16) or 1 (w8) words per group */
    int32_t a = q[0];
    const uint32_t *c = col;
    for (int32_t g = groups; g > 0; --g, c += 2) {
      const uint32_t lo = w16 ? wp[0] : sxtb16(wp[0]), hi = w16 ? wp[1] : sxtb16_r8(wp[0]);
      a = smlad(hi, c[1], smlad(lo, c[0], a));
      wp += w16 ? 2 : 1;
    }
    o[0] = conv_out(q, q[1], q[2], q[3], a, oo, mode);
  }
}

/* int8 weights (w16 = 0): output pixels n and n + 1 per pass over the weights, their columns
 * kept as int8 (Kp bytes each: both fit the one int16 column's 2 * Kp bytes) and sign-extended
 * in the MAC loop like the weights, so each weight word feeds both pixels: half the flash reads
 * of one pixel per pass, and fewer instructions per MAC (two SXTB16 per column word instead of
 * two per weight word and pixel). Same exact sums and requantisation, so the same outputs
 * (docs/kernels_conv.md "One column: pixel pairs with int8 columns"). */
static void conv_col8(const ai_conv2d_s8_params *p, const int8_t *in, int32_t n, uint32_t *d,
                      const int8_t *pad) {
  const int32_t oy = n / p->out_w, ox = n - oy * p->out_w;
  const int32_t y0 = oy * p->stride[0] - p->pad[0], x0 = ox * p->stride[1] - p->pad[1];
  const int32_t cin = p->in_c, ih = p->in_h, iw = p->in_w;
  for (int32_t ky = 0; ky < p->k_h; ++ky) {
    const int32_t iy = y0 + ky * p->dilation[0];
    for (int32_t kx = 0; kx < p->k_w; ++kx) {
      const int32_t ix = x0 + kx * p->dilation[1];
      const int8_t *s = iy >= 0 && iy < ih && ix >= 0 && ix < iw ? in + (iy * iw + ix) * cin : pad;
      for (int32_t g = cin >> 2; g > 0; --g, s += 4, d += 2) {
        *d = rd32(s);
      }
    }
  }
}

#if defined(__ARM_FEATURE_DSP)
/* One group of 4 K-elements of a channel pair against the pixel pair's interleaved int8 column
 * words (pixel 0, pixel 1): 20 instructions, 13 registers. */
#define AI_W8_X8_GROUP                                \
  "ldr %[wa], [%[w]], #8\n\t"                         \
  "ldr %[x], [%[c]], #8\n\t"                          \
  "ldr %[wb], [%[w], #-4]\n\t"                        \
  "sxtb16 %[l0], %[wa]\n\t"                           \
  "sxtb16 %[wa], %[wa], ror #8\n\t"                   \
  "sxtb16 %[xl], %[x]\n\t"                            \
  "sxtb16 %[x], %[x], ror #8\n\t"                     \
  "sxtb16 %[l1], %[wb]\n\t"                           \
  "sxtb16 %[wb], %[wb], ror #8\n\t"                   \
  "smlad %[a00], %[l0], %[xl], %[a00]\n\t"            \
  "smlad %[a00], %[wa], %[x], %[a00]\n\t"             \
  "smlad %[a10], %[l1], %[xl], %[a10]\n\t"            \
  "smlad %[a10], %[wb], %[x], %[a10]\n\t"             \
  "ldr %[x], [%[c], #-4]\n\t"                         \
  "sxtb16 %[xl], %[x]\n\t"                            \
  "sxtb16 %[x], %[x], ror #8\n\t"                     \
  "smlad %[a01], %[l0], %[xl], %[a01]\n\t"            \
  "smlad %[a01], %[wa], %[x], %[a01]\n\t"             \
  "smlad %[a11], %[l1], %[xl], %[a11]\n\t"            \
  "smlad %[a11], %[wb], %[x], %[a11]\n\t"
#endif

static inline __attribute__((always_inline)) void conv_1col8_channels(const uint32_t *wp, int32_t groups,
                                                                       const int32_t *q, int32_t cout,
                                                                       const uint32_t *col,
                                                                       int8_t *o0, int8_t *o1,
                                                                       const conv_out_t *oo, int mode) {
  for (int32_t pairs = cout >> 1; pairs > 0; --pairs, q += 8, o0 += 2, o1 += 2) {
    int32_t a00 = q[0], a01 = q[0], a10 = q[4], a11 = q[4];
#if defined(__ARM_FEATURE_DSP)
    const uint32_t *w = wp, *c = col;
    int32_t g = groups;
    uint32_t wa, wb, l0, l1, x, xl;
    __asm__ volatile(AI_FOUR_GROUP_LOOP(AI_W8_X8_GROUP)
                     : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [w] "+r"(w),
                       [c] "+r"(c), [g] "+r"(g), [wa] "=&r"(wa), [wb] "=&r"(wb), [l0] "=&r"(l0),
                       [l1] "=&r"(l1), [x] "=&r"(x), [xl] "=&r"(xl)
                     :
                     : "cc", "memory");
    wp = w;
#else
    for (int32_t g = 0; g < groups; ++g, wp += 2) {
      const uint32_t u = wp[0], v = wp[1];
      const uint32_t ul = sxtb16(u), uh = sxtb16_r8(u), vl = sxtb16(v), vh = sxtb16_r8(v);
      uint32_t x = col[2 * g];
      uint32_t xl = sxtb16(x), xh = sxtb16_r8(x);
      a00 = smlad(uh, xh, smlad(ul, xl, a00));
      a10 = smlad(vh, xh, smlad(vl, xl, a10));
      x = col[2 * g + 1];
      xl = sxtb16(x), xh = sxtb16_r8(x);
      a01 = smlad(uh, xh, smlad(ul, xl, a01));
      a11 = smlad(vh, xh, smlad(vl, xl, a11));
    }
#endif
    const int32_t m0 = q[1], rs0 = q[2], kf0 = q[3], m1 = q[5], rs1 = q[6], kf1 = q[7];
    const int8_t y00 = conv_out(q, m0, rs0, kf0, a00, oo, mode);
    const int8_t y01 = conv_out(q, m0, rs0, kf0, a01, oo, mode);
    const int8_t y10 = conv_out(q + 4, m1, rs1, kf1, a10, oo, mode);
    const int8_t y11 = conv_out(q + 4, m1, rs1, kf1, a11, oo, mode);
    o0[0] = y00, o0[1] = y10;
    o1[0] = y01, o1[1] = y11;
  }
  if (cout & 1) { /* the odd last channel's row: one word per group */
    int32_t a0 = q[0], a1 = q[0];
    for (int32_t g = 0; g < groups; ++g, ++wp) {
      const uint32_t lo = sxtb16(wp[0]), hi = sxtb16_r8(wp[0]);
      const uint32_t x0 = col[2 * g], x1 = col[2 * g + 1];
      a0 = smlad(hi, sxtb16_r8(x0), smlad(lo, sxtb16(x0), a0));
      a1 = smlad(hi, sxtb16_r8(x1), smlad(lo, sxtb16(x1), a1));
    }
    const int8_t y0 = conv_out(q, q[1], q[2], q[3], a0, oo, mode);
    const int8_t y1 = conv_out(q, q[1], q[2], q[3], a1, oo, mode);
    o0[0] = y0;
    o1[0] = y1;
  }
}

/* The pixel-pair loop (int8 weights): both columns, interleaved per group of 4 K-elements (pixel
 * 0's word, pixel 1's), are built before the pair's outputs are stored; an odd last pixel is a
 * pair of itself (stored twice to the same bytes). */
static inline __attribute__((always_inline)) void conv_1col8_pixels(const ai_conv2d_s8_params *p,
                                                                     const int8_t *input,
                                                                     const int8_t *weights,
                                                                     const int32_t *rq, int8_t *output,
                                                                     uint32_t *col, int mode) {
  const int32_t kp = conv_kp(p), npix = p->out_h * p->out_w, cout = p->out_c;
  const int32_t in_batch = p->in_h * p->in_w * p->in_c;
  const int8_t *pad = (const int8_t *)(col + (kp >> 1));
  const conv_out_t oo = {p->act_min, p->act_max, p->out_offset};
  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *in = input + b * in_batch;
    int8_t *out = output + b * npix * cout;
    for (int32_t n = 0; n < npix; n += 2) {
      const int two = n + 1 < npix;
      conv_col8(p, in, n, col, pad);
      conv_col8(p, in, n + two, col + 1, pad);
      conv_1col8_channels((const uint32_t *)(const void *)weights, kp >> 2, rq, cout, col,
                          out + n * cout, out + (n + two) * cout, &oo, mode);
    }
  }
}

#define AI_CONV_1COL8(NAME, MODE)                                                                    \
  static __attribute__((noinline)) void NAME(const ai_conv2d_s8_params *p, const int8_t *in,         \
                                             const int8_t *w, const int32_t *rq, int8_t *out,         \
                                             uint32_t *col) {                                         \
    conv_1col8_pixels(p, in, w, rq, out, col, MODE);                                                  \
  }
AI_CONV_1COL8(conv_1col8_m0, 0)
AI_CONV_1COL8(conv_1col8_m1, 1)
AI_CONV_1COL8(conv_1col8_m2, 2)

/* The pixel loop: each pixel's column is built before its outputs are stored. */
static inline __attribute__((always_inline)) void conv_1col_pixels(const ai_conv2d_s8_params *p,
                                                                    const int8_t *input,
                                                                    const int8_t *weights,
                                                                    const int32_t *rq, int8_t *output,
                                                                    uint32_t *col, int w16, int mode) {
  const int32_t kp = conv_kp(p), npix = p->out_h * p->out_w, cout = p->out_c;
  const int32_t in_batch = p->in_h * p->in_w * p->in_c;
  const int8_t *pad = (const int8_t *)(col + (kp >> 1));
  const conv_out_t oo = {p->act_min, p->act_max, p->out_offset};
  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *in = input + b * in_batch;
    int8_t *out = output + b * npix * cout;
    for (int32_t n = 0; n < npix; ++n) {
      conv_col1(p, in, n, col, pad);
      conv_1col_channels((const uint32_t *)(const void *)weights, w16, kp >> 2, rq, cout, col,
                         out + n * cout, &oo, mode);
    }
  }
}

#define AI_CONV_1COL(NAME, W16, MODE)                                                                \
  static __attribute__((noinline)) void NAME(const ai_conv2d_s8_params *p, const int8_t *in,         \
                                             const int8_t *w, const int32_t *rq, int8_t *out,         \
                                             uint32_t *col) {                                         \
    conv_1col_pixels(p, in, w, rq, out, col, W16, MODE);                                              \
  }
AI_CONV_1COL(conv_1col_w16_m0, 1, 0)
AI_CONV_1COL(conv_1col_w16_m1, 1, 1)
AI_CONV_1COL(conv_1col_w16_m2, 1, 2)

void ai_conv2d_s8_1col_rows(const ai_conv2d_s8_params *p, ai_row_window win, const int8_t *input,
                            const int8_t *weights, const int32_t *rq, int8_t *output, void *scratch) {
  if (!conv_1col_ok(p)) {
    ai_conv2d_s8_rows(p, win, input, weights, rq, output, scratch);
    return;
  }
  /* the parameters on the stack (byte stores may alias them; flash reads cost wait states),
   * with the call's row window */
  ai_conv2d_s8_params local = *p;
  local.out_h = win.out_h;
  local.pad[0] = win.pad_top;
  local.in_h = win.in_h;
  uint32_t *col = (uint32_t *)scratch;
  if (conv_pads(&local)) {
    memset(col + (conv_kp(&local) >> 1), (int8_t)local.pad_value, (size_t)local.in_c);
  }
  const int mode = !local.rq_fold ? 0 : (local.act_min > -128 || local.act_max < 127) ? 2 : 1;
  if (local.w16) {
    (mode == 0 ? conv_1col_w16_m0 : mode == 1 ? conv_1col_w16_m1 : conv_1col_w16_m2)(&local, input, weights,
                                                                                       rq, output, col);
  } else {
    (mode == 0 ? conv_1col8_m0 : mode == 1 ? conv_1col8_m1 : conv_1col8_m2)(&local, input, weights, rq, output,
                                                                             col);
  }
}

void ai_conv2d_s8_1col(const ai_conv2d_s8_params *p, const int8_t *input, const int8_t *weights,
                       const int32_t *rq, int8_t *output, void *scratch) {
  const ai_row_window full = {p->out_h, p->pad[0], p->in_h};
  ai_conv2d_s8_1col_rows(p, full, input, weights, rq, output, scratch);
}
