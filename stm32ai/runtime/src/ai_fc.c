/* FULLY_CONNECTED kernels (int8 and float32). See docs/kernels_basic.md.
 *
 * int8: acc = bias'[o] + sum_k w[o][k] * x[k] (input zero point folded into bias' at
 * generate time), then TFLite's double-rounding requantisation, output zero point and
 * clamp.
 *
 * Weights are packed at generate time (stm32ai.passes.lower.fc.pack_fc_weights_s8) as
 * 32-bit words over groups of 4 input columns (K padded with zero columns to a multiple
 * of 4). The first `pair_rows` rows go in pairs (A, B) = (row 2i, row 2i+1) whose two
 * weights per column share one int16: h = 256*a + b (the generator checks it fits).
 * With the input word split by SXTB16 into xa = (x0, x2) and xb = (x1, x3):
 *   SMLAD(W, xa) adds 256*(a0 x0 + a2 x2) + (b0 x0 + b2 x2)     (one instruction, 4 MACs)
 *   SMLAD(SXTB16(W), xa) adds b0 x0 + b2 x2                      (SXTB16(W) = (b0, b2))
 * so per pair two accumulators ab and b give row B = b and row A = (ab - b) / 256: 4 MACs
 * in 3 instructions. The division is exact while |sum a*x| < 2^23 over a chunk; the
 * generator proves it from the weights (|sum a*x| <= 128 * sum |a|) and sets
 * `chunk_groups`, the column groups between two recoveries (every group when it fits).
 * Layout: blocks of 2 pairs, per group [P0 xa-word, P0 xb-word, P1 xa-word, P1 xb-word];
 * then one pair (per group [xa-word, xb-word]) if pair_rows % 4 == 2; then the remaining
 * rows one by one in natural byte order (per group the 4 weights, SXTB16 on both sides).
 */
#include <string.h>

#include "ai_kernels_basic.h"
#include "ai_simd.h"

#if defined(__GNUC__)
#define AI_ASSUME_ALIGNED4(ptr) __builtin_assume_aligned((ptr), 4)
#else
#define AI_ASSUME_ALIGNED4(ptr) (ptr)
#endif

/* Column geometry shared by every block of one call. */
typedef struct {
  int32_t groups; /* full groups of 4 input columns */
  int32_t tail;   /* K % 4 columns of the last, zero-padded group */
  int32_t chunk;  /* groups between two recoveries of a paired row */
} fc_geom;

/* Output stage constants, copied to locals once per call: the int8 stores could alias
 * the parameter struct, which would force a reload per output. */
typedef struct {
  int32_t zp, lo, hi, fast;
} fc_clamp;

/* The K % 4 last input bytes as one little-endian word, zero-extended (never reads past
 * the row). */
static uint32_t tail_word(const int8_t *x, int32_t t) {
  uint32_t v = 0;
  for (int32_t i = 0; i < t; i++) {
    v |= (uint32_t)(uint8_t)x[i] << (8 * i);
  }
  return v;
}

/* TFLite's MultiplyByQuantizedMultiplier (double rounding), then zero point and clamp.
 * `fast` (every shift <= -2, decided at generate time) takes rq_fast, an exact rewrite. */
static inline int8_t fc_out_s8(int32_t acc, int32_t mult, int32_t shift, fc_clamp c) {
  int32_t v;
  if (c.fast) {
    const int32_t e = -shift;
    v = rq_fast(acc, mult, e - 1, (int32_t)(1u << (uint32_t)(e - 2)));
  } else {
    v = ai_requant(acc, mult, shift);
  }
  return clamp8(v + c.zp, c.lo, c.hi);
}

/* One column group for one pair: W0 against xa, W1 against xb. */
#define FC_PAIR(AB, B, W0, W1, XA, XB) \
  do {                                 \
    AB = smlad((W0), (XA), AB);        \
    B = smlad(sxtb16(W0), (XA), B);    \
    AB = smlad((W1), (XB), AB);        \
    B = smlad(sxtb16(W1), (XB), B);    \
  } while (0)

#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__)
#define AI_FC_ASM 1
/* The block loop, two column groups per iteration: per group one LDR of 4 inputs (any
 * alignment), one LDM of the 4 weight words, 2 + 4 SXTB16 and 8 SMLAD (16 MACs in 17
 * instructions with the loop branch). GCC splits the weight loads into 4 LDRs and keeps
 * separate pointer increments, hence the asm; the C loop in fc_block4 is the same
 * arithmetic. The weight registers are pinned so the LDM register list is ascending. */
static inline void fc_loop4_asm(const int8_t **xpp, const int8_t **wpp, int32_t n2, int32_t *pab0,
                                int32_t *pb0, int32_t *pab1, int32_t *pb1) {
  register uint32_t w0 __asm__("r0");
  register uint32_t w1 __asm__("r1");
  register uint32_t w2 __asm__("r2");
  register uint32_t w3 __asm__("r3");
  uint32_t xa, xb;
  const int8_t *xp = *xpp, *wp = *wpp;
  int32_t ab0 = *pab0, b0 = *pb0, ab1 = *pab1, b1 = *pb1;
#define AI_FC_GROUP_ASM                                 \
  "ldr    %[xa], [%[xp]], #4\n\t"                       \
  "ldm    %[wp]!, {%[w0], %[w1], %[w2], %[w3]}\n\t"      \
  "sxtb16 %[xb], %[xa], ror #8\n\t"                     \
  "sxtb16 %[xa], %[xa]\n\t"                             \
  "smlad  %[ab0], %[w0], %[xa], %[ab0]\n\t"              \
  "sxtb16 %[w0], %[w0]\n\t"                             \
  "smlad  %[b0], %[w0], %[xa], %[b0]\n\t"                \
  "smlad  %[ab0], %[w1], %[xb], %[ab0]\n\t"              \
  "sxtb16 %[w1], %[w1]\n\t"                             \
  "smlad  %[b0], %[w1], %[xb], %[b0]\n\t"                \
  "smlad  %[ab1], %[w2], %[xa], %[ab1]\n\t"              \
  "sxtb16 %[w2], %[w2]\n\t"                             \
  "smlad  %[b1], %[w2], %[xa], %[b1]\n\t"                \
  "smlad  %[ab1], %[w3], %[xb], %[ab1]\n\t"              \
  "sxtb16 %[w3], %[w3]\n\t"                             \
  "smlad  %[b1], %[w3], %[xb], %[b1]\n\t"
  __asm__ volatile("1:\n\t" AI_FC_GROUP_ASM AI_FC_GROUP_ASM
                   "subs   %[n], %[n], #1\n\t"
                   "bne    1b\n\t"
                   : [ab0] "+r"(ab0), [b0] "+r"(b0), [ab1] "+r"(ab1), [b1] "+r"(b1),
                     [xp] "+r"(xp), [wp] "+r"(wp), [n] "+r"(n2), [xa] "=&r"(xa), [xb] "=&r"(xb),
                     [w0] "=&r"(w0), [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3)
                   :
                   : "cc", "memory");
#undef AI_FC_GROUP_ASM
  *xpp = xp;
  *wpp = wp;
  *pab0 = ab0;
  *pb0 = b0;
  *pab1 = ab1;
  *pb1 = b1;
}
#else
#define AI_FC_ASM 0
#endif

/* (ab - b) / 256 exactly (the generator bounds it below 2^23), as int32. */
static inline int32_t fc_recover(int32_t ab, int32_t b) {
  return (int32_t)((uint32_t)ab - (uint32_t)b) >> 8;
}

/* Two pairs (4 rows) over all columns; acc[] holds the biases on entry, the 4 sums on
 * exit. Returns the weights past the block. */
static const int8_t *fc_block4(fc_geom gm, const int8_t *x, uint32_t xt, const int8_t *w,
                               int32_t acc[4]) {
  int32_t a0 = acc[0], b0 = acc[1], a1 = acc[2], b1 = acc[3];
  const int8_t *wa = (const int8_t *)AI_ASSUME_ALIGNED4(w);
  int32_t left = gm.groups + (gm.tail != 0); /* >= 1: K >= 1 */
  do {
    const int32_t n = left < gm.chunk ? left : gm.chunk;
    left -= n;
    const int32_t last = left == 0 && gm.tail != 0; /* the padded group ends the last chunk */
    int32_t ab0 = b0, ab1 = b1;
    int32_t g = n - last;
#if AI_FC_ASM
    int32_t g2 = g >> 1;
    g &= 1;
    if (g2 > 0) {
      fc_loop4_asm(&x, &wa, g2, &ab0, &b0, &ab1, &b1);
    }
#endif
    for (; g > 0; g--) {
      const uint32_t xw = rd32(x);
      const uint32_t xa = sxtb16(xw), xb = sxtb16_r8(xw);
      const uint32_t w0 = rd32(wa), w1 = rd32(wa + 4), w2 = rd32(wa + 8), w3 = rd32(wa + 12);
      x += 4;
      wa += 16;
      FC_PAIR(ab0, b0, w0, w1, xa, xb);
      FC_PAIR(ab1, b1, w2, w3, xa, xb);
    }
    if (last) {
      const uint32_t xa = sxtb16(xt), xb = sxtb16_r8(xt);
      FC_PAIR(ab0, b0, rd32(wa), rd32(wa + 4), xa, xb);
      FC_PAIR(ab1, b1, rd32(wa + 8), rd32(wa + 12), xa, xb);
      wa += 16;
    }
    a0 = (int32_t)((uint32_t)a0 + (uint32_t)fc_recover(ab0, b0));
    a1 = (int32_t)((uint32_t)a1 + (uint32_t)fc_recover(ab1, b1));
  } while (left > 0);
  acc[0] = a0;
  acc[1] = b0;
  acc[2] = a1;
  acc[3] = b1;
  return wa;
}

/* One pair (2 rows), same scheme. */
static const int8_t *fc_block2(fc_geom gm, const int8_t *x, uint32_t xt, const int8_t *w,
                               int32_t acc[2]) {
  int32_t a0 = acc[0], b0 = acc[1];
  int32_t left = gm.groups + (gm.tail != 0);
  do {
    const int32_t n = left < gm.chunk ? left : gm.chunk;
    left -= n;
    const int32_t last = left == 0 && gm.tail != 0;
    int32_t ab0 = b0;
    for (int32_t g = n - last; g > 0; g--) {
      const uint32_t xw = rd32(x);
      x += 4;
      FC_PAIR(ab0, b0, rd32(w), rd32(w + 4), sxtb16(xw), sxtb16_r8(xw));
      w += 8;
    }
    if (last) {
      FC_PAIR(ab0, b0, rd32(w), rd32(w + 4), sxtb16(xt), sxtb16_r8(xt));
      w += 8;
    }
    a0 = (int32_t)((uint32_t)a0 + (uint32_t)fc_recover(ab0, b0));
  } while (left > 0);
  acc[0] = a0;
  acc[1] = b0;
  return w;
}

/* One row in natural byte order (per group its 4 weights). */
static const int8_t *fc_row1(fc_geom gm, const int8_t *x, uint32_t xt, const int8_t *w,
                             int32_t *acc) {
  int32_t a = *acc;
  for (int32_t g = gm.groups; g > 0; g--) {
    const uint32_t xw = rd32(x), wv = rd32(w);
    x += 4;
    w += 4;
    a = smlad(sxtb16(wv), sxtb16(xw), a);
    a = smlad(sxtb16_r8(wv), sxtb16_r8(xw), a);
  }
  if (gm.tail != 0) {
    const uint32_t wv = rd32(w);
    w += 4;
    a = smlad(sxtb16(wv), sxtb16(xt), a);
    a = smlad(sxtb16_r8(wv), sxtb16_r8(xt), a);
  }
  *acc = a;
  return w;
}

int32_t ai_fully_connected_s8_weights_size(const ai_fully_connected_s8_params *p) {
  return ((p->in_features + 3) >> 2) * 4 * p->out_features;
}

void ai_fully_connected_s8(const ai_fully_connected_s8_params *p, const int8_t *input,
                           const int8_t *weights, const int32_t *bias, const int32_t *multipliers,
                           const int32_t *shifts, int8_t *output) {
  const int32_t k = p->in_features;
  const int32_t n = p->out_features;
  const int32_t n_pairs = p->pair_rows;
  const int32_t out_mult = p->out_multiplier, out_shift = p->out_shift;
  const int32_t batches = p->batches;
  fc_geom gm;
  gm.groups = k >> 2;
  gm.tail = k & 3;
  gm.chunk = p->chunk_groups > 0 ? p->chunk_groups : 1;
  fc_clamp c;
  c.zp = p->out_zero_point;
  c.lo = p->act_min;
  c.hi = p->act_max;
  c.fast = p->fast_requant;

  for (int32_t b = 0; b < batches; b++) {
    const int8_t *x = input + (size_t)b * (size_t)k;
    int8_t *y = output + (size_t)b * (size_t)n;
    uint32_t xt = tail_word(x + (k & ~3), k & 3);
    const int8_t *w = weights;
    int32_t o = 0;
    int32_t acc[4];
    for (; o < n; ) {
      const int32_t rows = o + 4 <= n_pairs ? 4 : o + 2 <= n_pairs ? 2 : 1;
      for (int32_t r = 0; r < rows; r++) {
        acc[r] = bias != NULL ? bias[o + r] : 0;
      }
      if (rows == 4) {
        w = fc_block4(gm, x, xt, w, acc);
      } else if (rows == 2) {
        w = fc_block2(gm, x, xt, w, acc);
      } else {
        w = fc_row1(gm, x, xt, w, acc);
      }
      for (int32_t r = 0; r < rows; r++, o++) {
        const int32_t m = multipliers != NULL ? multipliers[o] : out_mult;
        const int32_t s = multipliers != NULL ? shifts[o] : out_shift;
        y[o] = fc_out_s8(acc[r], m, s, c);
      }
    }
  }
}

static inline float clampf(float v, float lo, float hi) {
  /* TFLite's ActivationFunctionWithMinMax: min(max(v, lo), hi); NaN passes through */
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

void ai_fully_connected_f32(const ai_fully_connected_f32_params *p, const float *input,
                            const float *weights, const float *bias, float *output) {
  const int32_t k = p->in_features;
  const int32_t n = p->out_features;
  for (int32_t b = 0; b < p->batches; b++) {
    const float *x = input + (size_t)b * (size_t)k;
    float *y = output + (size_t)b * (size_t)n;
    int32_t o = 0;
    /* two rows at a time share the input loads; each row still sums in TFLite's order */
    for (; o + 1 < n; o += 2) {
      const float *w0 = weights + (size_t)o * (size_t)k;
      const float *w1 = w0 + k;
      float t0 = 0.0f, t1 = 0.0f;
      for (int32_t d = 0; d < k; d++) {
        const float xd = x[d];
        t0 += xd * w0[d];
        t1 += xd * w1[d];
      }
      const float b0 = bias != NULL ? bias[o] : 0.0f;
      const float b1 = bias != NULL ? bias[o + 1] : 0.0f;
      y[o] = clampf(t0 + b0, p->act_min, p->act_max);
      y[o + 1] = clampf(t1 + b1, p->act_min, p->act_max);
    }
    for (; o < n; o++) {
      const float *w0 = weights + (size_t)o * (size_t)k;
      float t0 = 0.0f;
      for (int32_t d = 0; d < k; d++) {
        t0 += x[d] * w0[d];
      }
      y[o] = clampf(t0 + (bias != NULL ? bias[o] : 0.0f), p->act_min, p->act_max);
    }
  }
}
