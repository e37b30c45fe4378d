/* int8 CONV_2D 3x3 stride 1 by exact integer Winograd F(2x2, 3x3) (docs/kernels_conv_wino.md).
 * No float, no malloc. */
#include <string.h>

#include "ai_kernels_conv_wino.h"
#include "ai_qmath.h"
#include "ai_simd.h"

/* Tiles transformed per block (p->tiles: 4 or 8; 0: AI_WINO_TB): the scratch holds their V, in
 * quads of 4 tiles interleaved per input channel pair ([quad][pos][in_cp / 2][4 tiles][2]);
 * output channel pairs then sweep the block a quad at a time (a 2 channel x 4 tile register
 * block: 6 loads, 8 SMLAD per pair of input channels; each transformed weight is loaded once
 * per quad whatever the block size). One quad is the smallest scratch; two let an output
 * channel pair's weights be read twice in a row (the Cortex-M7's D-cache keeps them). */
#define AI_WINO_TB 8

static inline int32_t wino_in_cp(const ai_conv2d_wino_s8_params *p) { return (p->in_c + 1) & ~1; }
static inline int32_t wino_pad_bytes(const ai_conv2d_wino_s8_params *p) { return (p->in_c + 3) & ~3; }
static inline int32_t wino_tb(const ai_conv2d_wino_s8_params *p) {
  const int32_t tx = (p->out_w + 1) / 2, tb = p->tiles == 4 ? 4 : AI_WINO_TB;
  return tx < tb ? tx : tb;
}

/* Blocks per band of 2 output rows. With more than one, the last pixel of the band's top input
 * row is copied to scratch (`keep`, in_c bytes) before the band's first block and every tile of
 * the band reads it there: with the output about a row and a pixel below the input (the
 * planner's overlap), the band's first block stores its bottom-left output over that pixel,
 * which the band's last block still reads (passes/lower/overlap.py models the early read). */
static inline int32_t wino_blocks(const ai_conv2d_wino_s8_params *p) {
  const int32_t tb = wino_tb(p);
  return tb > 0 ? ((p->out_w + 1) / 2 + tb - 1) / tb : 0;
}
static inline int32_t wino_keep_bytes(const ai_conv2d_wino_s8_params *p) {
  return wino_blocks(p) > 1 ? wino_pad_bytes(p) : 0;
}

int32_t ai_conv2d_wino_s8_scratch_size(const ai_conv2d_wino_s8_params *p) {
  return wino_pad_bytes(p) + wino_keep_bytes(p) +
         (wino_tb(p) + 3) / 4 * 4 * 16 * wino_in_cp(p) * (int32_t)sizeof(int16_t);
}

/* V = B^T d B of one tile, every input channel, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]:
 * v[pos * ps + (c / 2) * cs + c % 2], pos = 4 * row + col (ps, cs: the position and channel
 * pair strides of the quad layout). src[k]: the pixel of window position k (the pad
 * pixel, all pad_value, outside the image). d = x - zp is linear, and B^T 1 B is 4 at (1, 1)
 * and 0 elsewhere, so V = B^T x B - 4 zp e_(1,1): one subtraction instead of 16. */
static void wino_tile_in(const int8_t *const src[16], int32_t in_c, int32_t ps, int32_t cs, int32_t zp, int16_t *v) {
  const int32_t zp4 = 4 * zp;
  const int32_t s1 = ps, s2 = 2 * ps, s3 = 3 * ps;
  for (int32_t c = 0; c < in_c; c++) {
#define X(k) ((int32_t)src[k][c])
    /* rows of B^T x, column by column */
    const int32_t a0 = X(0) - X(8), a1 = X(1) - X(9), a2 = X(2) - X(10), a3 = X(3) - X(11);
    const int32_t b0 = X(4) + X(8), b1 = X(5) + X(9), b2 = X(6) + X(10), b3 = X(7) + X(11);
    const int32_t c0 = X(8) - X(4), c1 = X(9) - X(5), c2 = X(10) - X(6), c3 = X(11) - X(7);
    const int32_t e0 = X(4) - X(12), e1 = X(5) - X(13), e2 = X(6) - X(14), e3 = X(7) - X(15);
#undef X
    int16_t *o = v + (c >> 1) * cs + (c & 1);
    o[0] = (int16_t)(a0 - a2), o[s1] = (int16_t)(a1 + a2), o[s2] = (int16_t)(a2 - a1), o[s3] = (int16_t)(a1 - a3);
    o += 4 * ps;
    o[0] = (int16_t)(b0 - b2), o[s1] = (int16_t)(b1 + b2 - zp4), o[s2] = (int16_t)(b2 - b1);
    o[s3] = (int16_t)(b1 - b3);
    o += 4 * ps;
    o[0] = (int16_t)(c0 - c2), o[s1] = (int16_t)(c1 + c2), o[s2] = (int16_t)(c2 - c1), o[s3] = (int16_t)(c1 - c3);
    o += 4 * ps;
    o[0] = (int16_t)(e0 - e2), o[s1] = (int16_t)(e1 + e2), o[s2] = (int16_t)(e2 - e1), o[s3] = (int16_t)(e1 - e3);
  }
  if (in_c & 1) {
    for (int pos = 0; pos < 16; pos++) v[pos * ps + (in_c >> 1) * cs + 1] = 0; /* channel in_c: odd */
  }
}

/* Packed int16 pair add / subtract (SADD16 / SSUB16 on Armv7E-M; lanes wrap mod 2^16 there,
 * and here: the transform's final values fit int16, so wrapping intermediates are harmless). */
#if defined(__ARM_FEATURE_DSP)
static inline uint32_t add16x2(uint32_t a, uint32_t b) { return (uint32_t)__sadd16((int16x2_t)a, (int16x2_t)b); }
static inline uint32_t sub16x2(uint32_t a, uint32_t b) { return (uint32_t)__ssub16((int16x2_t)a, (int16x2_t)b); }
#else
static inline uint32_t add16x2(uint32_t a, uint32_t b) {
  return ((a + b) & 0xFFFFu) | (((a >> 16) + (b >> 16)) << 16);
}
static inline uint32_t sub16x2(uint32_t a, uint32_t b) {
  return ((a - b) & 0xFFFFu) | (((a >> 16) - (b >> 16)) << 16);
}
#endif

/* wino_tile_in for in_c % 4 == 0, two channels per instruction: each group of 4 channels is
 * read as one word per window pixel and split by SXTB16 into the pairs (c0, c2) and (c1, c3),
 * which are the group's two input-channel pairs of the layout (pack_wino_weights orders the
 * filter's channels the same way). d B per window row into t (the row's 4 columns, both
 * pairs), then B^T over the rows into v; one SSUB16 subtracts 4 zp at (1, 1) in both lanes.
 * vw: the tile's word in the quad layout (position stride pw words, pair stride 4 words). */
static void wino_tile_in4(const int8_t *const src[16], int32_t in_c, int32_t pw, uint32_t zp4, uint32_t *vw) {
  for (int32_t c = 0; c < in_c; c += 4, vw += 8) {
    uint32_t t[4][8];
    for (int i = 0; i < 4; i++) {
      const uint32_t w0 = rd32(src[4 * i] + c), w1 = rd32(src[4 * i + 1] + c);
      const uint32_t w2 = rd32(src[4 * i + 2] + c), w3 = rd32(src[4 * i + 3] + c);
      uint32_t x0 = sxtb16(w0), x1 = sxtb16(w1), x2 = sxtb16(w2), x3 = sxtb16(w3);
      t[i][0] = sub16x2(x0, x2), t[i][1] = add16x2(x1, x2), t[i][2] = sub16x2(x2, x1), t[i][3] = sub16x2(x1, x3);
      x0 = sxtb16_r8(w0), x1 = sxtb16_r8(w1), x2 = sxtb16_r8(w2), x3 = sxtb16_r8(w3);
      t[i][4] = sub16x2(x0, x2), t[i][5] = add16x2(x1, x2), t[i][6] = sub16x2(x2, x1), t[i][7] = sub16x2(x1, x3);
    }
    for (int j = 0; j < 8; j++) {
      const uint32_t a = t[0][j], b = t[1][j], cc = t[2][j], d = t[3][j];
      uint32_t *o = vw + (j >> 2) * 4 + (j & 3) * pw; /* column j % 4 of pair j / 4 */
      o[0] = sub16x2(a, cc), o[4 * pw] = add16x2(b, cc), o[8 * pw] = sub16x2(cc, b), o[12 * pw] = sub16x2(b, d);
    }
    vw[5 * pw] = sub16x2(vw[5 * pw], zp4), vw[5 * pw + 4] = sub16x2(vw[5 * pw + 4], zp4);
  }
}

static inline uint32_t ld2(const int16_t *p) {
  uint32_t x;
  memcpy(&x, p, 4);
  return x;
}

/* m[j][pos] for j = 2 * channel + tile: the npos transformed-domain sums of 2 output channels
 * (u0, u1: [npos][in_cp]) x 2 tiles (v0, v1: [npos][in_cp]); m rows are npos long. */
static void wino_dot22(const int16_t *u0, const int16_t *u1, const int16_t *v0, const int16_t *v1, int32_t in_cp,
                       int npos, int32_t *m) {
  for (int pos = 0; pos < npos; pos++) {
    int32_t a = 0, b = 0, c = 0, d = 0;
    const int16_t *pu0 = u0 + pos * in_cp, *pu1 = u1 + pos * in_cp;
    const int16_t *pv0 = v0 + pos * in_cp, *pv1 = v1 + pos * in_cp;
    for (int32_t k = in_cp >> 1; k > 0; k--) {
      const uint32_t x0 = ld2(pu0), x1 = ld2(pu1), y0 = ld2(pv0), y1 = ld2(pv1);
      pu0 += 2, pu1 += 2, pv0 += 2, pv1 += 2;
      a = smlad(x0, y0, a);
      b = smlad(x0, y1, b);
      c = smlad(x1, y0, c);
      d = smlad(x1, y1, d);
    }
    m[pos] = a, m[npos + pos] = b, m[2 * npos + pos] = c, m[3 * npos + pos] = d;
  }
}

/* AI_WINO_ASM: the Cortex-M4 dot below in Thumb-2 assembly (14 registers, r7 included: an
 * optimised build only); Armv7E-M, not the Cortex-M7 (AI_CORE_CM7 keeps gcc's loop), not with
 * -DAI_NO_ASM (the same conditions as conv2d_s8's AI_CONV_QUAD). */
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_ARCH_7EM__) && !defined(AI_CORE_CM7) && defined(__GNUC__) && \
    defined(__OPTIMIZE__) && !defined(AI_NO_ASM)
#define AI_WINO_ASM 1
#endif

/* m[pos][4 * channel + tile]: the 16 transformed-domain sums of an output channel pair (u:
 * [16][np][2 channels][2]) x a quad of tiles (v: [16][np][4 tiles][2]), np input channel pairs.
 * Per pair: 2 weight words and 4 input words loaded, 8 SMLAD. */
static void wino_dot24_c(const int16_t *u, const int16_t *v, int32_t np, int32_t m[16][8]) {
  const int16_t *pu = u, *pv = v; /* both run on from one position to the next */
  for (int pos = 0; pos < 16; pos++) {
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    for (int32_t k = np; k > 0; k--) {
      const uint32_t x0 = ld2(pu), x1 = ld2(pu + 2);
      uint32_t y = ld2(pv);
      a0 = smlad(x0, y, a0), b0 = smlad(x1, y, b0);
      y = ld2(pv + 2);
      a1 = smlad(x0, y, a1), b1 = smlad(x1, y, b1);
      y = ld2(pv + 4);
      a2 = smlad(x0, y, a2), b2 = smlad(x1, y, b2);
      y = ld2(pv + 6);
      a3 = smlad(x0, y, a3), b3 = smlad(x1, y, b3);
      pu += 4, pv += 8;
    }
    int32_t *mp = m[pos];
    mp[0] = a0, mp[1] = a1, mp[2] = a2, mp[3] = a3, mp[4] = b0, mp[5] = b1, mp[6] = b2, mp[7] = b3;
  }
}

#if defined(AI_WINO_ASM)
/* One input-channel pair of the 2 channel x 4 tile block: the 2 weight words and the first 2
 * input words in a burst of 4 LDRs (each pointer written back by its first load, the next load
 * from the other pointer: 2+1+1+1 cycles), 4 MACs, the other 2 input words (2+1), 4 MACs: 16
 * estimated Cortex-M4 cycles for 8 SMLAD (TRM DDI 0439B §3.3.1 Table 3-1, §3.3.2). All 32-bit
 * encodings (56 bytes): the loop is entered at a computed step (Duff's device). */
#define AI_WINO_LOADS                                 \
  "ldr %[x0], [%[u]], #8\n\t"                         \
  "ldr %[y0], [%[v]], #16\n\t"                        \
  "ldr %[x1], [%[u], #-4]\n\t"                        \
  "ldr %[y1], [%[v], #-12]\n\t"
#define AI_WINO_LOADS2                                \
  "ldr %[y0], [%[v], #-8]\n\t"                        \
  "ldr %[y1], [%[v], #-4]\n\t"
#define AI_WINO_MAC4(A, B, C, D)                      \
  "smlad %[" A "], %[x0], %[y0], %[" A "]\n\t"        \
  "smlad %[" B "], %[x1], %[y0], %[" B "]\n\t"        \
  "smlad %[" C "], %[x0], %[y1], %[" C "]\n\t"        \
  "smlad %[" D "], %[x1], %[y1], %[" D "]\n\t"
#define AI_WINO_MUL4(A, B, C, D)                      \
  "smuad %[" A "], %[x0], %[y0]\n\t"                  \
  "smuad %[" B "], %[x1], %[y0]\n\t"                  \
  "smuad %[" C "], %[x0], %[y1]\n\t"                  \
  "smuad %[" D "], %[x1], %[y1]\n\t"
#define AI_WINO_STEP                                  \
  AI_WINO_LOADS AI_WINO_MAC4("a0", "b0", "a1", "b1") AI_WINO_LOADS2 AI_WINO_MAC4("a2", "b2", "a3", "b3")

/* wino_dot24_c in assembly, np >= 2. Per position: the first channel pair by SMUAD (no
 * zeroing), the other np - 1 through a 4-pair body entered at pair (4 - (np - 1) % 4) % 4,
 * the 8 sums stored to m[pos]. Loop invariants in 24 bytes below sp: the m pointer, the body
 * entry (Thumb bit set, for LDR PC), the bytes of v per position, the end of m, the end of
 * this position's v. */
static void wino_dot24_asm(const int16_t *u, const int16_t *v, int32_t np, int32_t m[16][8]) {
  uint32_t a0 = (uint32_t)&m[0][0], a1 = (uint32_t)((4 - ((np - 1) & 3)) & 3) * 56u + 1u;
  uint32_t a2 = (uint32_t)np * 16u, a3 = (uint32_t)(&m[0][0] + 128);
  uint32_t b0, b1, b2, b3, x0, x1, y0, y1;
  __asm__ volatile(
      "sub sp, sp, #24\n\t"
      "str %[a0], [sp]\n\t"
      "adr %[x0], 3f\n\t"
      "add %[x0], %[x0], %[a1]\n\t"
      "str %[x0], [sp, #4]\n\t"
      "str %[a2], [sp, #8]\n\t"
      "str %[a3], [sp, #12]\n\t"
      ".balign 4\n"
      "5:\n\t"
      "ldr %[x0], [sp, #8]\n\t"
      "add %[x0], %[x0], %[v]\n\t"
      "str %[x0], [sp, #16]\n\t"
      AI_WINO_LOADS AI_WINO_MUL4("a0", "b0", "a1", "b1") AI_WINO_LOADS2 AI_WINO_MUL4("a2", "b2", "a3", "b3")
      "ldr pc, [sp, #4]\n\t"
      ".balign 4\n"
      "3:\n\t"
      AI_WINO_STEP
      AI_WINO_STEP
      AI_WINO_STEP
      AI_WINO_STEP
      "ldr %[x0], [sp, #16]\n\t"
      "cmp %[v], %[x0]\n\t"
      "bne 3b\n\t"
      "ldr %[x0], [sp]\n\t"
      "str %[a0], [%[x0]]\n\t"
      "str %[a1], [%[x0], #4]\n\t"
      "str %[a2], [%[x0], #8]\n\t"
      "str %[a3], [%[x0], #12]\n\t"
      "str %[b0], [%[x0], #16]\n\t"
      "str %[b1], [%[x0], #20]\n\t"
      "str %[b2], [%[x0], #24]\n\t"
      "str %[b3], [%[x0], #28]\n\t"
      "add %[x0], %[x0], #32\n\t"
      "str %[x0], [sp]\n\t"
      "ldr %[x1], [sp, #12]\n\t"
      "cmp %[x0], %[x1]\n\t"
      "bne 5b\n\t"
      "add sp, sp, #24\n\t"
      : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [b0] "=&r"(b0), [b1] "=&r"(b1),
        [b2] "=&r"(b2), [b3] "=&r"(b3), [u] "+r"(u), [v] "+r"(v), [x0] "=&r"(x0), [x1] "=&r"(x1),
        [y0] "=&r"(y0), [y1] "=&r"(y1)
      :
      : "cc", "memory");
}
#endif

static inline void wino_dot24(const int16_t *u, const int16_t *v, int32_t np, int32_t m[16][8]) {
#if defined(AI_WINO_ASM)
  if (np >= 2) {
    wino_dot24_asm(u, v, np, m);
    return;
  }
#endif
  wino_dot24_c(u, v, np, m);
}

/* The wrapping int32 add: the inverse transform's partial sums may leave int32 only where
 * the final (proved) value does not, and wrapping arithmetic gives that value exactly. */
static inline int32_t wa(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static inline int32_t ws(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }

/* The output stage's constants, copied out of the params: int8 output stores may alias them,
 * so read through `p` they would be reloaded after every store. */
typedef struct {
  int32_t fold, off, lo, hi;
} wino_os_t;

/* acc: TFLite's accumulator without bias; + bias, requantisation, clamp (conv2d_s8's stage) */
static inline int8_t wino_out_acc(const int32_t *q, int32_t acc0, const wino_os_t *os) {
  const int32_t acc = ai_wadd(q[0], acc0);
  int32_t v;
  if (os->fold) {
    v = ssat8(rq_fold(acc, q[1], q[2], q[3]));
  } else {
    v = ai_wadd(ai_requant(acc, q[1], q[2]), os->off);
  }
  return clamp8(v, os->lo, os->hi);
}

/* The inverse transform of a channel pair x quad block: y[j][k] = (A^T M A)[k / 2][k % 2] >> 2
 * (TFLite's accumulator without bias, exact) for column j = 4 * channel + tile of m[pos][j]. */
static inline void wino_inverse(int32_t m[16][8], int32_t y[8][4]) {
  for (int j = 0; j < 8; j++) {
    int32_t r0[4], r1[4];
    for (int c = 0; c < 4; c++) {
      r0[c] = wa(wa(m[c][j], m[4 + c][j]), m[8 + c][j]);
      r1[c] = ws(ws(m[4 + c][j], m[8 + c][j]), m[12 + c][j]);
    }
    y[j][0] = wa(wa(r0[0], r0[1]), r0[2]) >> 2, y[j][1] = ws(ws(r0[1], r0[2]), r0[3]) >> 2;
    y[j][2] = wa(wa(r1[0], r1[1]), r1[2]) >> 2, y[j][3] = ws(ws(r1[1], r1[2]), r1[3]) >> 2;
  }
}

/* One output channel over the ntq tiles of a quad (y[t]: tile t's 4 accumulators): + bias,
 * requantisation, clamp. `mode` is a constant at each call (0: ai_requant; 1: rq_fold and the
 * clamp; 2: rq_fold, no clamp beyond SSAT's), so the channel's rq row stays in registers.
 * o: tile 0's top-left output; nx: the last tile has its second column; ny: output rows. */
static inline void wino_quad_out(int32_t y[][4], int32_t ntq, const int32_t *q, int8_t *o, int32_t row_stride,
                                 int32_t cs, int nx, int ny, const wino_os_t *os, const int mode) {
  const int32_t bias = q[0], mul = q[1], q2 = q[2], q3 = q[3], lo = os->lo, hi = os->hi, off = os->off;
#define WINO_OUT(acc)                                                                                 \
  (mode == 2   ? (int8_t)ssat8(rq_fold(ai_wadd(bias, (acc)), mul, q2, q3))                           \
   : mode == 1 ? clamp8(ssat8(rq_fold(ai_wadd(bias, (acc)), mul, q2, q3)), lo, hi)                   \
               : clamp8(ai_wadd(ai_requant(ai_wadd(bias, (acc)), mul, q2), off), lo, hi))
  for (int32_t t = 0; t < ntq; t++, o += 2 * cs) {
    const int32_t *yt = y[t];
    const int two = t + 1 < ntq || nx;
    o[0] = WINO_OUT(yt[0]);
    if (two) o[cs] = WINO_OUT(yt[1]);
    if (ny > 1) {
      o[row_stride] = WINO_OUT(yt[2]);
      if (two) o[row_stride + cs] = WINO_OUT(yt[3]);
    }
  }
#undef WINO_OUT
}

void ai_conv2d_wino_s8(const ai_conv2d_wino_s8_params *p, const int8_t *input, const int16_t *weights,
                       const int32_t *rq, int8_t *output, void *scratch) {
  const int32_t in_cp = wino_in_cp(p), np = in_cp >> 1, in_c = p->in_c, out_c = p->out_c;
  const int32_t ps = 4 * in_cp, qsz = 16 * ps, usz = 32 * in_cp, tb = wino_tb(p);
  int8_t *pad = (int8_t *)scratch, *keep = pad + wino_pad_bytes(p);
  int16_t *v = (int16_t *)(void *)(keep + wino_keep_bytes(p));
  memset(pad, (int)(int8_t)p->pad_value, (size_t)in_c);
  const int32_t row_stride = p->out_w * out_c, multi = wino_blocks(p) > 1;
  const wino_os_t os = {p->rq_fold, p->out_offset, p->act_min, p->act_max};
  /* in_c % 4 == 0: the SIMD input transform and its channel pairing (see wino_tile_in4) */
  const int simd_in = (in_c & 3) == 0;
  const uint32_t zp4 = ((uint32_t)(4 * p->pad_value) & 0xFFFFu) * 0x10001u;
  /* rq_fold without a clamp narrower than SSAT's: no compare per output */
  const int mode = os.fold ? (os.lo == -128 && os.hi == 127 ? 2 : 1) : 0;
  for (int32_t b = 0; b < p->batches; b++) {
    const int8_t *in_b = input + (size_t)b * (size_t)(p->in_h * p->in_w * in_c);
    int8_t *out_b = output + (size_t)b * (size_t)(p->out_h * p->out_w * out_c);
    for (int32_t oy = 0; oy < p->out_h; oy += 2) {
      const int ny = oy + 1 < p->out_h ? 2 : 1;
      /* the band's top input row's last pixel, read from `keep` by every tile (wino_blocks) */
      int32_t kx = INT32_MIN / 2; /* the kept pixel's column, or none */
      if (multi && oy - p->pad[0] >= 0 && oy - p->pad[0] < p->in_h) {
        kx = p->in_w - 1;
        memcpy(keep, in_b + ((size_t)(oy - p->pad[0]) * (size_t)p->in_w + (size_t)kx) * (size_t)in_c, (size_t)in_c);
      }
      for (int32_t ox0 = 0; ox0 < p->out_w; ox0 += 2 * tb) {
        /* this block's tiles: ox0, ox0 + 2, ...; a last partial quad is zero-filled */
        const int32_t rest = (p->out_w - ox0 + 1) / 2, nt = rest < tb ? rest : tb, nq = (nt + 3) / 4;
        for (int32_t t = 0; t < 4 * nq; t++) {
          int16_t *vt = v + (t >> 2) * qsz + (t & 3) * 2;
          if (t >= nt) {
            for (int32_t k = 0; k < 16 * np; k++) vt[8 * k] = 0, vt[8 * k + 1] = 0;
            continue;
          }
          const int8_t *src[16];
          const int32_t iy0 = oy - p->pad[0], ix0 = ox0 + 2 * t - p->pad[1];
          for (int i = 0; i < 4; i++) {
            for (int j = 0; j < 4; j++) {
              const int32_t iy = iy0 + i, ix = ix0 + j;
              src[4 * i + j] = (iy >= 0 && iy < p->in_h && ix >= 0 && ix < p->in_w)
                                   ? in_b + ((size_t)iy * (size_t)p->in_w + (size_t)ix) * (size_t)in_c
                                   : pad;
            }
          }
          if (ix0 <= kx && kx - ix0 < 4) src[kx - ix0] = keep;
          if (simd_in) {
            wino_tile_in4(src, in_c, 2 * in_cp, zp4, (uint32_t *)(void *)vt);
          } else {
            wino_tile_in(src, in_c, ps, 8, p->pad_value, vt);
          }
        }
        for (int32_t oc = 0; oc < out_c; oc += 2) {
          const int two_c = oc + 1 < out_c; /* odd last channel: its pair's second one is zero */
          const int16_t *u = weights + (size_t)(oc >> 1) * (size_t)usz;
          for (int32_t q = 0; q < nq; q++) {
            int32_t m[16][8];
            wino_dot24(u, v + q * qsz, np, m);
            const int32_t ntq = nt - 4 * q < 4 ? nt - 4 * q : 4, ox = ox0 + 8 * q;
            int8_t *o = out_b + (size_t)oy * (size_t)row_stride + (size_t)ox * (size_t)out_c + (size_t)oc;
            const int32_t *qc = rq + 4 * oc;
            const int nx = ox + 2 * ntq - 1 < p->out_w; /* the quad's last tile has 2 columns */
            int32_t y[8][4];
            wino_inverse(m, y);
            if (mode == 2) {
              wino_quad_out(y, ntq, qc, o, row_stride, out_c, nx, ny, &os, 2);
              if (two_c) wino_quad_out(y + 4, ntq, qc + 4, o + 1, row_stride, out_c, nx, ny, &os, 2);
            } else if (mode == 1) {
              wino_quad_out(y, ntq, qc, o, row_stride, out_c, nx, ny, &os, 1);
              if (two_c) wino_quad_out(y + 4, ntq, qc + 4, o + 1, row_stride, out_c, nx, ny, &os, 1);
            } else {
              wino_quad_out(y, ntq, qc, o, row_stride, out_c, nx, ny, &os, 0);
              if (two_c) wino_quad_out(y + 4, ntq, qc + 4, o + 1, row_stride, out_c, nx, ny, &os, 0);
            }
          }
        }
      }
    }
  }
}

/* ---- F(2, 3): 1x3 and 3x1 kernels (1-D, along the kernel's axis) --------------------------
 * Per tile of 2 outputs along the axis: V = B^T d (4 values per input channel), M[pos] =
 * sum_ic U'[pos] V[pos] with U' = G' g (G' = 2G), A^T M = 2x TFLite's sum: >> 1 is exact. */
#define AI_WINO1_TB 16 /* tiles transformed per block */

static inline int wino1_along_w(const ai_conv2d_wino1d_s8_params *p) { return p->k_w == 3; }
static inline int32_t wino1_tb(const ai_conv2d_wino1d_s8_params *p) {
  const int32_t tx = ((wino1_along_w(p) ? p->out_w : p->out_h) + 1) / 2;
  return tx < AI_WINO1_TB ? tx : AI_WINO1_TB;
}

int32_t ai_conv2d_wino1d_s8_scratch_size(const ai_conv2d_wino1d_s8_params *p) {
  return wino_pad_bytes(p) + wino1_tb(p) * 4 * wino_in_cp(p) * (int32_t)sizeof(int16_t);
}

/* V = B^T d, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]; B^T 1 = (0, 2, 0, 0): the zero
 * point is subtracted once, at position 1. v[pos * in_cp + c]. */
static void wino1_tile_in(const int8_t *const src[4], int32_t in_c, int32_t in_cp, int32_t zp, int16_t *v) {
  const int32_t zp2 = 2 * zp;
  for (int32_t c = 0; c < in_c; c++) {
    const int32_t x0 = src[0][c], x1 = src[1][c], x2 = src[2][c], x3 = src[3][c];
    v[c] = (int16_t)(x0 - x2);
    v[in_cp + c] = (int16_t)(x1 + x2 - zp2);
    v[2 * in_cp + c] = (int16_t)(x2 - x1);
    v[3 * in_cp + c] = (int16_t)(x1 - x3);
  }
  if (in_c & 1) {
    for (int pos = 0; pos < 4; pos++) v[pos * in_cp + in_c] = 0;
  }
}

void ai_conv2d_wino1d_s8(const ai_conv2d_wino1d_s8_params *p, const int8_t *input, const int16_t *weights,
                         const int32_t *rq, int8_t *output, void *scratch) {
  const int32_t in_cp = wino_in_cp(p), in_c = p->in_c, out_c = p->out_c;
  const int32_t tsz = 4 * in_cp, tb = wino1_tb(p);
  const int along_w = wino1_along_w(p);
  const int32_t walk = along_w ? p->out_w : p->out_h, lines = along_w ? p->out_h : p->out_w;
  const int32_t pad_a = along_w ? p->pad[1] : p->pad[0], pad_l = along_w ? p->pad[0] : p->pad[1];
  const int32_t step = along_w ? out_c : p->out_w * out_c; /* next output along the axis */
  int8_t *pad = (int8_t *)scratch;
  int16_t *v = (int16_t *)(void *)(pad + wino_pad_bytes(p));
  memset(pad, (int)(int8_t)p->pad_value, (size_t)in_c);
  const wino_os_t os = {p->rq_fold, p->out_offset, p->act_min, p->act_max};
  for (int32_t b = 0; b < p->batches; b++) {
    const int8_t *in_b = input + (size_t)b * (size_t)(p->in_h * p->in_w * in_c);
    int8_t *out_b = output + (size_t)b * (size_t)(p->out_h * p->out_w * out_c);
    for (int32_t l = 0; l < lines; l++) {
      const int32_t il = l - pad_l;
      for (int32_t o0 = 0; o0 < walk; o0 += 2 * tb) {
        const int32_t rest = (walk - o0 + 1) / 2, nt = rest < tb ? rest : tb;
        for (int32_t t = 0; t < nt; t++) {
          const int8_t *src[4];
          for (int j = 0; j < 4; j++) {
            const int32_t ia = o0 + 2 * t + j - pad_a;
            const int32_t iy = along_w ? il : ia, ix = along_w ? ia : il;
            src[j] = (iy >= 0 && iy < p->in_h && ix >= 0 && ix < p->in_w)
                         ? in_b + ((size_t)iy * (size_t)p->in_w + (size_t)ix) * (size_t)in_c
                         : pad;
          }
          wino1_tile_in(src, in_c, in_cp, p->pad_value, v + t * tsz);
        }
        for (int32_t oc = 0; oc < out_c; oc += 2) {
          const int two_c = oc + 1 < out_c;
          const int16_t *u0 = weights + (size_t)oc * (size_t)tsz;
          const int16_t *u1 = two_c ? u0 + tsz : u0; /* odd last channel: computed twice, stored once */
          for (int32_t t = 0; t < nt; t += 2) {
            const int two_t = t + 1 < nt;
            int32_t m[4][4];
            wino_dot22(u0, u1, v + t * tsz, v + (two_t ? t + 1 : t) * tsz, in_cp, 4, &m[0][0]);
            for (int j = 0; j < 4; j++) {
              const int32_t ci = j >> 1, ti = j & 1;
              if ((ci && !two_c) || (ti && !two_t)) continue;
              const int32_t o = o0 + 2 * (t + ti), oy = along_w ? l : o, ox = along_w ? o : l;
              const int32_t *q = rq + 4 * (oc + ci);
              int8_t *dst = out_b + ((size_t)oy * (size_t)p->out_w + (size_t)ox) * (size_t)out_c + (size_t)(oc + ci);
              /* A^T M, A^T = [1 1 1 0; 0 1 -1 -1]: 2x TFLite's sums (proved int32), >> 1 exact */
              dst[0] = wino_out_acc(q, wa(wa(m[j][0], m[j][1]), m[j][2]) >> 1, &os);
              if (o + 1 < walk) dst[step] = wino_out_acc(q, ws(ws(m[j][1], m[j][2]), m[j][3]) >> 1, &os);
            }
          }
        }
      }
    }
  }
}
