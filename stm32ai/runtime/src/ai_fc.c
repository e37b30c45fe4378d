/* FULLY_CONNECTED kernels (int8 and float32). See docs/kernels_fc.md.
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

#include "ai_kernels_fc.h"
#include "ai_simd.h"

#if defined(__GNUC__)
#define AI_ASSUME_ALIGNED4(ptr) __builtin_assume_aligned((ptr), 4)
/* the block loop pins 13 registers: kept out of the caller so neither spills */
#define AI_FC_NOINLINE __attribute__((noinline))
#else
#define AI_ASSUME_ALIGNED4(ptr) (ptr)
#define AI_FC_NOINLINE
#endif

/* Everything one call shares, copied to a local once (the int8 stores cannot alias it). */
typedef struct {
  const int32_t *bias;           /* folded bias, or NULL */
  const int32_t *mults, *shifts; /* per-channel requantisation, or NULL */
  int32_t groups;                /* column groups of 4, the padded last one included */
  int32_t tail;                  /* 1 when K % 4 != 0: the last group comes from xt */
  int32_t chunk;                 /* groups between two recoveries of a paired row */
  uint32_t xt;                   /* the K % 4 last inputs of the row, zero-extended */
  int32_t m, shift, rs, khi;     /* per-tensor multiplier, shift and its rq_fast form */
  int32_t zp, lo, hi, fast, full;
  int32_t simple; /* per-tensor, fast and full range: the output stage inlined in the block */
} fc_ctx;

/* The K % 4 last input bytes as one little-endian word, zero-extended (never reads past
 * the row). */
static uint32_t tail_word(const int8_t *x, int32_t t) {
  uint32_t v = 0;
  for (int32_t i = 0; i < t; i++) {
    v |= (uint32_t)(uint8_t)x[i] << (8 * i);
  }
  return v;
}

/* TFLite's MultiplyByQuantizedMultiplier (double rounding), zero point and clamp for
 * outputs o..o+cnt-1. `fast` (every shift <= -2, decided at generate time) takes rq_fast,
 * an exact rewrite (ai_simd.h); `full` (clamp range [-128, 127]) one saturation. */
static void fc_store(const fc_ctx *c, const int32_t *acc, int32_t cnt, int32_t o, int8_t *y) {
  const int32_t zp = c->zp;
  if (c->mults == NULL && c->fast && c->full) { /* the common case, kept tight */
    const int32_t m = c->m, rs = c->rs, khi = c->khi;
    for (int32_t r = 0; r < cnt; r++) {
      y[o + r] = (int8_t)ssat8(rq_fast(acc[r], m, rs, khi) + zp);
    }
    return;
  }
  for (int32_t r = 0; r < cnt; r++) {
    int32_t v;
    if (c->mults == NULL) {
      v = c->fast ? rq_fast(acc[r], c->m, c->rs, c->khi) : ai_requant(acc[r], c->m, c->shift);
    } else if (c->fast) {
      const int32_t rs = -c->shifts[o + r] - 1;
      v = rq_fast(acc[r], c->mults[o + r], rs, (int32_t)(1u << (uint32_t)rs) >> 1);
    } else {
      v = ai_requant(acc[r], c->mults[o + r], c->shifts[o + r]);
    }
    y[o + r] = clamp8(ai_wadd(v, zp), c->lo, c->hi);
  }
}

/* One column group for one pair: W0 against xa, W1 against xb. */
#define FC_PAIR(AB, B, W0, W1, XA, XB) \
  do {                                 \
    AB = smlad((W0), (XA), AB);        \
    B = smlad(sxtb16(W0), (XA), B);    \
    AB = smlad((W1), (XB), AB);        \
    B = smlad(sxtb16(W1), (XB), B);    \
  } while (0)

/* (ab - b) / 256 exactly (the generator bounds it below 2^23), as int32. */
static inline int32_t fc_recover(int32_t ab, int32_t b) {
  return (int32_t)((uint32_t)ab - (uint32_t)b) >> 8;
}

static inline int32_t add_wrap(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a + (uint32_t)b);
}

/* The asm needs 13 free core registers. GCC finds them when it optimises; at -O0 (CubeMX's
 * Debug preset, -O0 -g3) it keeps r7 as the frame pointer and reports "'asm' operand has
 * impossible constraints", so unoptimised builds take the C loop in fc_block4, the same
 * arithmetic (bit-exact, slower). -DAI_NO_ASM forces the C loop, e.g. for -Og together with
 * -fno-omit-frame-pointer, which GCC cannot announce to the preprocessor. */
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__OPTIMIZE__) && !defined(AI_NO_ASM)
#define AI_FC_ASM 1
/* The block loop over n >= 1 column groups: per group 5 single LDRs (the 4 inputs, any
 * alignment, and the 4 weight words), 2 + 4 SXTB16 and 8 SMLAD (16 MACs). Cycles (Cortex-M4
 * TRM DDI 0439B §3.3.2): consecutive single LDRs pipeline, N in N+1 cycles, when no address
 * depends on the previous load's results; LDM (1+N) does not pipeline with its neighbours,
 * so LDR + LDM cost 2+5 and the 5 LDRs 6 (write-back on the first load of each base, the
 * next load from the other base). Four groups per iteration (one then two peeled for
 * n % 4): one taken branch (1+P) per 64 MACs. The C loop in fc_block4 is the same
 * arithmetic. */
static inline void fc_loop4_asm(const int8_t **xpp, const int8_t **wpp, int32_t n, int32_t *pab0,
                                int32_t *pb0, int32_t *pab1, int32_t *pb1) {
  uint32_t w0, w1, w2, w3, xa, xb;
  const int8_t *xp = *xpp, *wp = *wpp;
  int32_t ab0 = *pab0, b0 = *pb0, ab1 = *pab1, b1 = *pb1;
#define AI_FC_GROUP_ASM                                 \
  "ldr    %[w0], [%[wp]], #16\n\t"                      \
  "ldr    %[xa], [%[xp]], #4\n\t"                       \
  "ldr    %[w1], [%[wp], #-12]\n\t"                     \
  "ldr    %[w2], [%[wp], #-8]\n\t"                      \
  "ldr    %[w3], [%[wp], #-4]\n\t"                      \
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
#if defined(AI_CORE_CM7)
/* Cortex-M7 (AI_CORE_CM7): the same arithmetic re-ordered for dual issue (generated by
 * scripts/gen_m7_asm.py; docs/kernels_fc.md "Cortex-M7"): the SMLADs on raw weight words first,
 * each SXTB16 (which issues only as the older of a pair) right before an SMLAD it can pair
 * with, the next group's loads placed after the last read of the register they overwrite so
 * that they pair with the tail's SMLADs; offsets from the pointers, one ADD each per body.
 * Estimated by core_m7.py: 47 cycles per 4 groups (64 MACs) against 69 for the body below
 * (which the M4 keeps: 83 there, this one 95). */
#define AI_FC_M7_G1                                 \
  "ldr %[xa], [%[xp], #0]\n\t"                      \
  "ldr %[w0], [%[wp], #0]\n\t"                      \
  "ldr %[w1], [%[wp], #4]\n\t"                      \
  "ldr %[w2], [%[wp], #8]\n\t"                      \
  "sxtb16 %[xb], %[xa], ror #8\n\t"                 \
  "ldr %[w3], [%[wp], #12]\n\t"                     \
  "sxtb16 %[xa], %[xa]\n\t"                         \
  "smlad %[ab0], %[w0], %[xa], %[ab0]\n\t"          \
  "sxtb16 %[w0], %[w0]\n\t"                         \
  "smlad %[ab0], %[w1], %[xb], %[ab0]\n\t"          \
  "sxtb16 %[w1], %[w1]\n\t"                         \
  "smlad %[ab1], %[w2], %[xa], %[ab1]\n\t"          \
  "sxtb16 %[w2], %[w2]\n\t"                         \
  "smlad %[ab1], %[w3], %[xb], %[ab1]\n\t"          \
  "sxtb16 %[w3], %[w3]\n\t"                         \
  "smlad %[b0], %[w0], %[xa], %[b0]\n\t"            \
  "smlad %[b0], %[w1], %[xb], %[b0]\n\t"            \
  "smlad %[b1], %[w2], %[xa], %[b1]\n\t"            \
  "smlad %[b1], %[w3], %[xb], %[b1]\n\t"            \
  "add %[xp], %[xp], #4\n\t"                        \
  "add %[wp], %[wp], #16\n\t"

#define AI_FC_M7_G2                                 \
  "ldr %[xa], [%[xp], #0]\n\t"                      \
  "ldr %[w0], [%[wp], #0]\n\t"                      \
  "ldr %[w1], [%[wp], #4]\n\t"                      \
  "ldr %[w2], [%[wp], #8]\n\t"                      \
  "sxtb16 %[xb], %[xa], ror #8\n\t"                 \
  "ldr %[w3], [%[wp], #12]\n\t"                     \
  "sxtb16 %[xa], %[xa]\n\t"                         \
  "smlad %[ab0], %[w0], %[xa], %[ab0]\n\t"          \
  "sxtb16 %[w0], %[w0]\n\t"                         \
  "smlad %[ab0], %[w1], %[xb], %[ab0]\n\t"          \
  "sxtb16 %[w1], %[w1]\n\t"                         \
  "smlad %[ab1], %[w2], %[xa], %[ab1]\n\t"          \
  "sxtb16 %[w2], %[w2]\n\t"                         \
  "smlad %[ab1], %[w3], %[xb], %[ab1]\n\t"          \
  "sxtb16 %[w3], %[w3]\n\t"                         \
  "smlad %[b0], %[w0], %[xa], %[b0]\n\t"            \
  "ldr %[w0], [%[wp], #16]\n\t"                     \
  "smlad %[b0], %[w1], %[xb], %[b0]\n\t"            \
  "ldr %[w1], [%[wp], #20]\n\t"                     \
  "smlad %[b1], %[w2], %[xa], %[b1]\n\t"            \
  "ldr %[xa], [%[xp], #4]\n\t"                      \
  "ldr %[w2], [%[wp], #24]\n\t"                     \
  "smlad %[b1], %[w3], %[xb], %[b1]\n\t"            \
  "sxtb16 %[xb], %[xa], ror #8\n\t"                 \
  "ldr %[w3], [%[wp], #28]\n\t"                     \
  "sxtb16 %[xa], %[xa]\n\t"                         \
  "smlad %[ab0], %[w0], %[xa], %[ab0]\n\t"          \
  "sxtb16 %[w0], %[w0]\n\t"                         \
  "smlad %[ab0], %[w1], %[xb], %[ab0]\n\t"          \
  "sxtb16 %[w1], %[w1]\n\t"                         \
  "smlad %[ab1], %[w2], %[xa], %[ab1]\n\t"          \
  "sxtb16 %[w2], %[w2]\n\t"                         \
  "smlad %[ab1], %[w3], %[xb], %[ab1]\n\t"          \
  "sxtb16 %[w3], %[w3]\n\t"                         \
  "smlad %[b0], %[w0], %[xa], %[b0]\n\t"            \
  "smlad %[b0], %[w1], %[xb], %[b0]\n\t"            \
  "smlad %[b1], %[w2], %[xa], %[b1]\n\t"            \
  "smlad %[b1], %[w3], %[xb], %[b1]\n\t"            \
  "add %[xp], %[xp], #8\n\t"                        \
  "add %[wp], %[wp], #32\n\t"

#define AI_FC_M7_G4                                 \
  "ldr %[xa], [%[xp], #0]\n\t"                      \
  "ldr %[w0], [%[wp], #0]\n\t"                      \
  "ldr %[w1], [%[wp], #4]\n\t"                      \
  "ldr %[w2], [%[wp], #8]\n\t"                      \
  "sxtb16 %[xb], %[xa], ror #8\n\t"                 \
  "ldr %[w3], [%[wp], #12]\n\t"                     \
  "sxtb16 %[xa], %[xa]\n\t"                         \
  "smlad %[ab0], %[w0], %[xa], %[ab0]\n\t"          \
  "sxtb16 %[w0], %[w0]\n\t"                         \
  "smlad %[ab0], %[w1], %[xb], %[ab0]\n\t"          \
  "sxtb16 %[w1], %[w1]\n\t"                         \
  "smlad %[ab1], %[w2], %[xa], %[ab1]\n\t"          \
  "sxtb16 %[w2], %[w2]\n\t"                         \
  "smlad %[ab1], %[w3], %[xb], %[ab1]\n\t"          \
  "sxtb16 %[w3], %[w3]\n\t"                         \
  "smlad %[b0], %[w0], %[xa], %[b0]\n\t"            \
  "ldr %[w0], [%[wp], #16]\n\t"                     \
  "smlad %[b0], %[w1], %[xb], %[b0]\n\t"            \
  "ldr %[w1], [%[wp], #20]\n\t"                     \
  "smlad %[b1], %[w2], %[xa], %[b1]\n\t"            \
  "ldr %[xa], [%[xp], #4]\n\t"                      \
  "ldr %[w2], [%[wp], #24]\n\t"                     \
  "smlad %[b1], %[w3], %[xb], %[b1]\n\t"            \
  "sxtb16 %[xb], %[xa], ror #8\n\t"                 \
  "ldr %[w3], [%[wp], #28]\n\t"                     \
  "sxtb16 %[xa], %[xa]\n\t"                         \
  "smlad %[ab0], %[w0], %[xa], %[ab0]\n\t"          \
  "sxtb16 %[w0], %[w0]\n\t"                         \
  "smlad %[ab0], %[w1], %[xb], %[ab0]\n\t"          \
  "sxtb16 %[w1], %[w1]\n\t"                         \
  "smlad %[ab1], %[w2], %[xa], %[ab1]\n\t"          \
  "sxtb16 %[w2], %[w2]\n\t"                         \
  "smlad %[ab1], %[w3], %[xb], %[ab1]\n\t"          \
  "sxtb16 %[w3], %[w3]\n\t"                         \
  "smlad %[b0], %[w0], %[xa], %[b0]\n\t"            \
  "ldr %[w0], [%[wp], #32]\n\t"                     \
  "smlad %[b0], %[w1], %[xb], %[b0]\n\t"            \
  "ldr %[w1], [%[wp], #36]\n\t"                     \
  "smlad %[b1], %[w2], %[xa], %[b1]\n\t"            \
  "ldr %[xa], [%[xp], #8]\n\t"                      \
  "ldr %[w2], [%[wp], #40]\n\t"                     \
  "smlad %[b1], %[w3], %[xb], %[b1]\n\t"            \
  "sxtb16 %[xb], %[xa], ror #8\n\t"                 \
  "ldr %[w3], [%[wp], #44]\n\t"                     \
  "sxtb16 %[xa], %[xa]\n\t"                         \
  "smlad %[ab0], %[w0], %[xa], %[ab0]\n\t"          \
  "sxtb16 %[w0], %[w0]\n\t"                         \
  "smlad %[ab0], %[w1], %[xb], %[ab0]\n\t"          \
  "sxtb16 %[w1], %[w1]\n\t"                         \
  "smlad %[ab1], %[w2], %[xa], %[ab1]\n\t"          \
  "sxtb16 %[w2], %[w2]\n\t"                         \
  "smlad %[ab1], %[w3], %[xb], %[ab1]\n\t"          \
  "sxtb16 %[w3], %[w3]\n\t"                         \
  "smlad %[b0], %[w0], %[xa], %[b0]\n\t"            \
  "ldr %[w0], [%[wp], #48]\n\t"                     \
  "smlad %[b0], %[w1], %[xb], %[b0]\n\t"            \
  "ldr %[w1], [%[wp], #52]\n\t"                     \
  "smlad %[b1], %[w2], %[xa], %[b1]\n\t"            \
  "ldr %[xa], [%[xp], #12]\n\t"                     \
  "ldr %[w2], [%[wp], #56]\n\t"                     \
  "smlad %[b1], %[w3], %[xb], %[b1]\n\t"            \
  "sxtb16 %[xb], %[xa], ror #8\n\t"                 \
  "ldr %[w3], [%[wp], #60]\n\t"                     \
  "sxtb16 %[xa], %[xa]\n\t"                         \
  "smlad %[ab0], %[w0], %[xa], %[ab0]\n\t"          \
  "sxtb16 %[w0], %[w0]\n\t"                         \
  "smlad %[ab0], %[w1], %[xb], %[ab0]\n\t"          \
  "sxtb16 %[w1], %[w1]\n\t"                         \
  "smlad %[ab1], %[w2], %[xa], %[ab1]\n\t"          \
  "sxtb16 %[w2], %[w2]\n\t"                         \
  "smlad %[ab1], %[w3], %[xb], %[ab1]\n\t"          \
  "sxtb16 %[w3], %[w3]\n\t"                         \
  "smlad %[b0], %[w0], %[xa], %[b0]\n\t"            \
  "smlad %[b0], %[w1], %[xb], %[b0]\n\t"            \
  "smlad %[b1], %[w2], %[xa], %[b1]\n\t"            \
  "smlad %[b1], %[w3], %[xb], %[b1]\n\t"            \
  "add %[xp], %[xp], #16\n\t"                       \
  "add %[wp], %[wp], #64\n\t"
  __asm__ volatile("tst    %[n], #1\n\t"
                   "beq    1f\n\t"
                   AI_FC_M7_G1
                   "1:\n\t"
                   "tst    %[n], #2\n\t"
                   "beq    2f\n\t"
                   AI_FC_M7_G2
                   "2:\n\t"
                   "lsrs   %[n], %[n], #2\n\t"
                   "beq    4f\n"
                   ".balign 4\n"
                   "3:\n\t"
                   AI_FC_M7_G4
                   "subs   %[n], %[n], #1\n\t"
                   "bne    3b\n"
                   "4:\n\t"
                   : [ab0] "+r"(ab0), [b0] "+r"(b0), [ab1] "+r"(ab1), [b1] "+r"(b1),
                     [xp] "+r"(xp), [wp] "+r"(wp), [n] "+r"(n), [xa] "=&r"(xa), [xb] "=&r"(xb),
                     [w0] "=&r"(w0), [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3)
                   :
                   : "cc", "memory");
#undef AI_FC_M7_G1
#undef AI_FC_M7_G2
#undef AI_FC_M7_G4
#else
  __asm__ volatile("tst    %[n], #1\n\t"
                   "beq    1f\n\t"
                   AI_FC_GROUP_ASM
                   "1:\n\t"
                   "tst    %[n], #2\n\t"
                   "beq    2f\n\t"
                   AI_FC_GROUP_ASM AI_FC_GROUP_ASM
                   "2:\n\t"
                   "lsrs   %[n], %[n], #2\n\t"
                   "beq    4f\n"
                   "3:\n\t"
                   AI_FC_GROUP_ASM AI_FC_GROUP_ASM AI_FC_GROUP_ASM AI_FC_GROUP_ASM
                   "subs   %[n], %[n], #1\n\t"
                   "bne    3b\n"
                   "4:\n\t"
                   : [ab0] "+r"(ab0), [b0] "+r"(b0), [ab1] "+r"(ab1), [b1] "+r"(b1),
                     [xp] "+r"(xp), [wp] "+r"(wp), [n] "+r"(n), [xa] "=&r"(xa), [xb] "=&r"(xb),
                     [w0] "=&r"(w0), [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3)
                   :
                   : "cc", "memory");
#endif
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

/* Rows o..o+3 (two pairs) of input row x: sums, requantisation, stores. Returns the
 * weights past the block. */
AI_FC_NOINLINE static const int8_t *fc_block4(const fc_ctx *c, const int8_t *x, const int8_t *w,
                                              int8_t *y, int32_t o) {
  int32_t a0 = 0, b0 = 0, a1 = 0, b1 = 0;
  if (c->bias != NULL) {
    a0 = c->bias[o];
    b0 = c->bias[o + 1];
    a1 = c->bias[o + 2];
    b1 = c->bias[o + 3];
  }
  const int8_t *wa = (const int8_t *)AI_ASSUME_ALIGNED4(w);
  int32_t left = c->groups;
  do {
    const int32_t n = left < c->chunk ? left : c->chunk;
    left -= n;
    const int32_t last = left == 0 ? c->tail : 0; /* the padded group ends the last chunk */
    int32_t ab0 = b0, ab1 = b1; /* ab - b restarts from 0 for each chunk */
    int32_t g = n - last;
#if AI_FC_ASM
    if (g > 0) {
      fc_loop4_asm(&x, &wa, g, &ab0, &b0, &ab1, &b1);
    }
    g = 0;
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
      const uint32_t xa = sxtb16(c->xt), xb = sxtb16_r8(c->xt);
      FC_PAIR(ab0, b0, rd32(wa), rd32(wa + 4), xa, xb);
      FC_PAIR(ab1, b1, rd32(wa + 8), rd32(wa + 12), xa, xb);
      wa += 16;
    }
    a0 = add_wrap(a0, fc_recover(ab0, b0));
    a1 = add_wrap(a1, fc_recover(ab1, b1));
  } while (left > 0);
  if (c->simple) {
    const int32_t m = c->m, rs = c->rs, khi = c->khi, zp = c->zp;
    y[o] = (int8_t)ssat8(rq_fast(a0, m, rs, khi) + zp);
    y[o + 1] = (int8_t)ssat8(rq_fast(b0, m, rs, khi) + zp);
    y[o + 2] = (int8_t)ssat8(rq_fast(a1, m, rs, khi) + zp);
    y[o + 3] = (int8_t)ssat8(rq_fast(b1, m, rs, khi) + zp);
  } else {
    const int32_t acc[4] = {a0, b0, a1, b1};
    fc_store(c, acc, 4, o, y);
  }
  return wa;
}

#if AI_FC_ASM && !defined(AI_CORE_CM7)
#define AI_FC_M4_BLOCKS 1
/* The whole block loop of the common case in one routine (Cortex-M4 build; issue 25): every
 * block of 4 rows when one chunk covers the row, K % 4 == 0, a bias, and the per-tensor
 * fast full-range output stage (fc_ctx.simple) whose zero point folds into the rounding
 * constant (fc_m4_fold). Per block: the two B biases start both accumulators of each pair,
 * the MAC loop (the arithmetic of fc_loop4_asm, 8 column groups per iteration, groups % 8
 * peeled out of line), the recovery A = bias_A + (ab - b) / 256, four requantisations
 * (rq_fast with the zero point folded: 0x40000000 - 2^31 [x < 0] by AND/ORR, the high word
 * kf + (x >> 31) by one ADD, SMLAL, ASR, SSAT #8) and one word store of the 4 outputs
 * (unaligned STR is allowed on Armv7-M). In C, GCC spilled the MAC loop's 13 registers
 * around each block and kept the chunk bookkeeping: ~180 estimated cycles per block besides
 * the MACs on nucleo-l4r5zi, ~70 here. The state lives in memory (`fc_m4_run`, pointer in LR
 * during the routine): r0 x, r1 w, r2 count, r3-r6 ab0 b0 ab1 b1, r7 r8 xa xb, r9-r12
 * weight words; after the MACs r9-r11 take m, rs, kf.
 * Two inputs: the int8 row (G8: SXTB16 per group, as fc_loop4_asm) or, in
 * ai_fully_connected_s8_x16, the row sign-extended once per layer into scratch as the
 * (x0, x2), (x1, x3) int16 pairs (G16: 6 pipelined LDRs and no SXTB16 of the input, 19
 * estimated cycles per 16 MACs instead of 20; the row is re-read by every block). */
typedef struct {
  const void *x;       /* 0: the input row (int8, or the int16 pairs) */
  const int32_t *bias; /* 4: bias of the next block (advances) */
  int8_t *y;           /* 8: output of the next block (advances) */
  int8_t *yend;        /* 12: y + the rows in blocks */
  int32_t groups7;     /* 16: column groups (no tail) % 8, peeled out of line */
  int32_t m, rs, kf;   /* 20..28: multiplier, right shift, folded rounding constant */
  int32_t unused;      /* 32 */
  const int8_t *w;     /* 36: weights, in and out */
  int32_t groups8;     /* 40: column groups / 8: iterations of the 8-group loop */
} fc_m4_run;

/* rq_fast(x, m, rs, khi) + zp == hi32(kf:2^30 - 2^31 [x < 0] + x * m) >> rs with
 * kf = khi + zp * 2^rs (khi = 2^(rs-1)) whenever that high word stays an int32: it is
 * kf + floor((2^30 - 2^31 [x < 0] + x * m) / 2^32), and |x * m| < 2^62 for every int32 x, so
 * |floor(...)| <= 2^30 and |kf| < 2^30 - 1 suffices: an int8 zp and rs <= 21 (the FC layers
 * of the MLPerf models have rs <= 12). Returns 0 otherwise (the C path then runs). */
static int fc_m4_fold(const fc_ctx *c, int32_t *kf) {
  if (c->rs < 1 || c->rs > 21 || c->zp < -128 || c->zp > 127) {
    return 0;
  }
  *kf = c->khi + c->zp * (int32_t)(1u << (uint32_t)c->rs); /* |kf| <= 2^20 + 2^28 */
  return 1;
}

#define AI_FC_M4_G8                   \
  "ldr    r9, [r1], #16\n\t"         \
  "ldr    r7, [r0], #4\n\t"          \
  "ldr    r10, [r1, #-12]\n\t"       \
  "ldr    r11, [r1, #-8]\n\t"        \
  "ldr    r12, [r1, #-4]\n\t"        \
  "sxtb16 r8, r7, ror #8\n\t"        \
  "sxtb16 r7, r7\n\t"                \
  "smlad  r3, r9, r7, r3\n\t"        \
  "sxtb16 r9, r9\n\t"                \
  "smlad  r4, r9, r7, r4\n\t"        \
  "smlad  r3, r10, r8, r3\n\t"       \
  "sxtb16 r10, r10\n\t"              \
  "smlad  r4, r10, r8, r4\n\t"       \
  "smlad  r5, r11, r7, r5\n\t"       \
  "sxtb16 r11, r11\n\t"              \
  "smlad  r6, r11, r7, r6\n\t"       \
  "smlad  r5, r12, r8, r5\n\t"       \
  "sxtb16 r12, r12\n\t"              \
  "smlad  r6, r12, r8, r6\n\t"
#define AI_FC_M4_G16                  \
  "ldr    r9, [r1], #16\n\t"         \
  "ldr    r7, [r0], #8\n\t"          \
  "ldr    r10, [r1, #-12]\n\t"       \
  "ldr    r8, [r0, #-4]\n\t"         \
  "ldr    r11, [r1, #-8]\n\t"        \
  "ldr    r12, [r1, #-4]\n\t"        \
  "smlad  r3, r9, r7, r3\n\t"        \
  "sxtb16 r9, r9\n\t"                \
  "smlad  r4, r9, r7, r4\n\t"        \
  "smlad  r3, r10, r8, r3\n\t"       \
  "sxtb16 r10, r10\n\t"              \
  "smlad  r4, r10, r8, r4\n\t"       \
  "smlad  r5, r11, r7, r5\n\t"       \
  "sxtb16 r11, r11\n\t"              \
  "smlad  r6, r11, r7, r6\n\t"       \
  "smlad  r5, r12, r8, r5\n\t"       \
  "sxtb16 r12, r12\n\t"              \
  "smlad  r6, r12, r8, r6\n\t"
#define AI_FC_M4_RQ_R3          \
  "and    r7, r3, #0x80000000\n\t"  \
  "orr    r7, r7, #0x40000000\n\t"  \
  "add    r8, r11, r3, asr #31\n\t" \
  "smlal  r7, r8, r3, r9\n\t"      \
  "asr    r8, r8, r10\n\t"          \
  "ssat   r3, #8, r8\n\t"
#define AI_FC_M4_RQ_R4          \
  "and    r7, r4, #0x80000000\n\t"  \
  "orr    r7, r7, #0x40000000\n\t"  \
  "add    r8, r11, r4, asr #31\n\t" \
  "smlal  r7, r8, r4, r9\n\t"      \
  "asr    r8, r8, r10\n\t"          \
  "ssat   r4, #8, r8\n\t"
#define AI_FC_M4_RQ_R5          \
  "and    r7, r5, #0x80000000\n\t"  \
  "orr    r7, r7, #0x40000000\n\t"  \
  "add    r8, r11, r5, asr #31\n\t" \
  "smlal  r7, r8, r5, r9\n\t"      \
  "asr    r8, r8, r10\n\t"          \
  "ssat   r5, #8, r8\n\t"
#define AI_FC_M4_RQ_R6          \
  "and    r7, r6, #0x80000000\n\t"  \
  "orr    r7, r7, #0x40000000\n\t"  \
  "add    r8, r11, r6, asr #31\n\t" \
  "smlal  r7, r8, r6, r9\n\t"      \
  "asr    r8, r8, r10\n\t"          \
  "ssat   r6, #8, r8\n\t"
#define AI_FC_M4_BODY(G)                                                        \
  __asm__ volatile("push   {r4-r11, lr}\n\t"                                      \
                   "mov    lr, r0\n\t"                                            \
                   "ldr    r1, [lr, #36]\n"                                       \
                   "10:\n\t"                                                      \
                   "ldr    r7, [lr, #4]\n\t"                                      \
                   "ldr    r0, [lr, #0]\n\t"                                      \
                   "ldr    r2, [lr, #16]\n\t"                                     \
                   "ldr    r4, [r7, #4]\n\t"                                      \
                   "ldr    r6, [r7, #12]\n\t"                                     \
                   "mov    r3, r4\n\t"                                            \
                   "mov    r5, r6\n\t"                                            \
                   "cmp    r2, #0\n\t"                                            \
                   "bne.w  20f\n"                                                 \
                   "21:\n\t"                                                      \
                   "ldr    r2, [lr, #40]\n\t"                                     \
                   "cmp    r2, #0\n\t"                                            \
                   "beq.w  4f\n"                                                  \
                   "3:\n\t"                                                       \
                   G G G G G G G G                                                \
                   "subs   r2, r2, #1\n\t"                                        \
                   "bne.w  3b\n"                                                  \
                   "4:\n\t"                                                       \
                   "ldr    r7, [lr, #4]\n\t"                                      \
                   "subs   r3, r3, r4\n\t"                                        \
                   "subs   r5, r5, r6\n\t"                                        \
                   "ldr    r8, [r7], #16\n\t"                                     \
                   "ldr    r9, [r7, #-8]\n\t"                                     \
                   "str    r7, [lr, #4]\n\t"                                      \
                   "add    r3, r8, r3, asr #8\n\t"                                \
                   "add    r5, r9, r5, asr #8\n\t"                                \
                   "add    r7, lr, #20\n\t"                                       \
                   "ldm    r7, {r9, r10, r11}\n\t"                                \
                   AI_FC_M4_RQ_R3 AI_FC_M4_RQ_R4 AI_FC_M4_RQ_R5 AI_FC_M4_RQ_R6   \
                   "bfi    r3, r4, #8, #8\n\t"                                    \
                   "bfi    r3, r5, #16, #8\n\t"                                   \
                   "bfi    r3, r6, #24, #8\n\t"                                   \
                   "ldr    r7, [lr, #8]\n\t"                                      \
                   "ldr    r8, [lr, #12]\n\t"                                     \
                   "str    r3, [r7], #4\n\t"                                      \
                   "str    r7, [lr, #8]\n\t"                                      \
                   "cmp    r7, r8\n\t"                                            \
                   "bne.w  10b\n\t"                                               \
                   "str    r1, [lr, #36]\n\t"                                     \
                   "pop    {r4-r11, pc}\n"                                        \
                   "20:\n\t"                                                      \
                   "tst    r2, #1\n\t"                                            \
                   "beq    22f\n\t"                                               \
                   G                                                              \
                   "22:\n\t"                                                      \
                   "tst    r2, #2\n\t"                                            \
                   "beq    23f\n\t"                                               \
                   G G                                                            \
                   "23:\n\t"                                                      \
                   "tst    r2, #4\n\t"                                            \
                   "beq.w  21b\n\t"                                               \
                   G G G G                                                        \
                   "b.w    21b\n\t")

__attribute__((naked, noinline)) static void fc_blocks4_m4(fc_m4_run *st __attribute__((unused))) {
  AI_FC_M4_BODY(AI_FC_M4_G8);
}
__attribute__((naked, noinline)) static void fc_blocks4_m4_x16(fc_m4_run *st __attribute__((unused))) {
  AI_FC_M4_BODY(AI_FC_M4_G16);
}
#undef AI_FC_M4_BODY
#undef AI_FC_M4_G8
#undef AI_FC_M4_G16
#undef AI_FC_M4_RQ_R3
#undef AI_FC_M4_RQ_R4
#undef AI_FC_M4_RQ_R5
#undef AI_FC_M4_RQ_R6
#else
#define AI_FC_M4_BLOCKS 0
#endif

/* Rows o, o+1 (one pair), same scheme. */
static const int8_t *fc_block2(const fc_ctx *c, const int8_t *x, const int8_t *w, int8_t *y,
                               int32_t o) {
  int32_t a0 = c->bias != NULL ? c->bias[o] : 0, b0 = c->bias != NULL ? c->bias[o + 1] : 0;
  int32_t left = c->groups;
  do {
    const int32_t n = left < c->chunk ? left : c->chunk;
    left -= n;
    const int32_t last = left == 0 ? c->tail : 0;
    int32_t ab0 = b0;
    for (int32_t g = n - last; g > 0; g--) {
      const uint32_t xw = rd32(x);
      x += 4;
      FC_PAIR(ab0, b0, rd32(w), rd32(w + 4), sxtb16(xw), sxtb16_r8(xw));
      w += 8;
    }
    if (last) {
      FC_PAIR(ab0, b0, rd32(w), rd32(w + 4), sxtb16(c->xt), sxtb16_r8(c->xt));
      w += 8;
    }
    a0 = add_wrap(a0, fc_recover(ab0, b0));
  } while (left > 0);
  const int32_t acc[2] = {a0, b0};
  fc_store(c, acc, 2, o, y);
  return w;
}

/* Row o alone, in natural byte order (per group its 4 weights). */
static const int8_t *fc_row1(const fc_ctx *c, const int8_t *x, const int8_t *w, int8_t *y,
                             int32_t o) {
  int32_t a = c->bias != NULL ? c->bias[o] : 0;
  for (int32_t g = c->groups - c->tail; g > 0; g--) {
    const uint32_t xw = rd32(x), wv = rd32(w);
    x += 4;
    w += 4;
    a = smlad(sxtb16(wv), sxtb16(xw), a);
    a = smlad(sxtb16_r8(wv), sxtb16_r8(xw), a);
  }
  if (c->tail) {
    const uint32_t wv = rd32(w);
    w += 4;
    a = smlad(sxtb16(wv), sxtb16(c->xt), a);
    a = smlad(sxtb16_r8(wv), sxtb16_r8(c->xt), a);
  }
  fc_store(c, &a, 1, o, y);
  return w;
}

#if AI_FC_M4_BLOCKS
/* x16: scratch for the row as int16 pairs (2 * in_features bytes, 4-aligned), or NULL.
 * Shared by both entry points. Builds without the block routine (Cortex-M7, no DSP) compile
 * this body as ai_fully_connected_s8 itself, token for token what it was before the _x16
 * variant existed: as a shared function GCC made ai_fully_connected_s8 a tail branch into it
 * and moved code, which cost estimated cycles on the M7. (Inlining it into both entries on the
 * M4 moved the code after ai_fc.o by a different amount: KWS / IC on nucleo-l4r5zi +132 /
 * +880 estimated cycles in unchanged conv2d layers, ART I-cache placement; not taken.) */
static void fc_s8(
    const ai_fully_connected_s8_params *p, const int8_t *input, const int8_t *weights,
    const int32_t *bias, const int32_t *multipliers, const int32_t *shifts, int8_t *output,
    uint32_t *x16) {
#else
void ai_fully_connected_s8(const ai_fully_connected_s8_params *p, const int8_t *input,
                           const int8_t *weights, const int32_t *bias, const int32_t *multipliers,
                           const int32_t *shifts, int8_t *output) {
#endif
  const int32_t k = p->in_features;
  const int32_t n = p->out_features;
  const int32_t n4 = p->pair_rows & ~3, n2 = p->pair_rows;
  fc_ctx c;
  c.bias = bias;
  c.mults = multipliers;
  c.shifts = shifts;
  c.tail = (k & 3) != 0;
  c.groups = (k >> 2) + c.tail;
  c.chunk = p->chunk_groups > 0 ? p->chunk_groups : 1;
  c.m = p->out_multiplier;
  c.shift = p->out_shift;
  c.rs = -c.shift - 1;
  c.khi = c.shift <= -2 ? (int32_t)(1u << (uint32_t)c.rs) >> 1 : 0;
  c.zp = p->out_zero_point;
  c.lo = p->act_min;
  c.hi = p->act_max;
  c.fast = p->fast_requant;
  c.full = c.lo <= -128 && c.hi >= 127;
  c.simple = multipliers == NULL && c.fast && c.full;

  for (int32_t b = 0; b < p->batches; b++) {
    const int8_t *x = input + (size_t)b * (size_t)k;
    int8_t *y = output + (size_t)b * (size_t)n;
    c.xt = tail_word(x + (k & ~3), k & 3);
    const int8_t *w = weights;
    int32_t o = 0;
#if AI_FC_M4_BLOCKS
    int32_t kf;
    if (n4 > 0 && c.chunk >= c.groups && !c.tail && c.simple && bias != NULL && fc_m4_fold(&c, &kf)) {
      fc_m4_run st = {x, bias, y, y + n4, c.groups & 7, c.m, c.rs, kf, 0, w, c.groups >> 3};
      if (x16 != NULL) {
        /* the row as int16 pairs, once for all blocks */
        for (int32_t g = 0; g < c.groups; g++) {
          const uint32_t xw = rd32(x + 4 * g);
          x16[2 * g] = sxtb16(xw);
          x16[2 * g + 1] = sxtb16_r8(xw);
        }
        st.x = x16;
        fc_blocks4_m4_x16(&st);
      } else {
        fc_blocks4_m4(&st);
      }
      w = st.w;
      o = n4;
    }
#endif
    for (; o < n4; o += 4) {
      w = fc_block4(&c, x, w, y, o);
    }
    if (o < n2) {
      w = fc_block2(&c, x, w, y, o);
      o += 2;
    }
    for (; o < n; o++) {
      w = fc_row1(&c, x, w, y, o);
    }
  }
}

#if AI_FC_M4_BLOCKS
void ai_fully_connected_s8(const ai_fully_connected_s8_params *p, const int8_t *input,
                           const int8_t *weights, const int32_t *bias, const int32_t *multipliers,
                           const int32_t *shifts, int8_t *output) {
  fc_s8(p, input, weights, bias, multipliers, shifts, output, NULL);
}
#endif

void ai_fully_connected_s8_x16(const ai_fully_connected_s8_x16_params *p, const int8_t *input,
                               const int8_t *weights, const int32_t *bias, int8_t *output,
                               void *scratch) {
#if AI_FC_M4_BLOCKS
  fc_s8(p, input, weights, bias, NULL, NULL, output, (uint32_t *)scratch);
#else
  /* no use for the scratch: the int8 kernel (the lowering picks _x16 only for cores that
   * build the routine, so this entry is normally not even linked) */
  (void)scratch;
  ai_fully_connected_s8(p, input, weights, bias, NULL, NULL, output);
#endif
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
