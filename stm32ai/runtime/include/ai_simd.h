/* Internal helpers shared by the int8 convolution kernels (not part of the public API).
 *
 * One code path for every target: the SIMD steps are written with tiny helpers (sxtb16,
 * sxtb16 of the word rotated by 8, smlad, smlabb/smlatt) that map to the ARMv7E-M DSP
 * instructions when __ARM_FEATURE_DSP is defined and to plain C otherwise, so host tests
 * exercise exactly the data layout and the loop structure that runs on the MCU.
 * Every function is static inline: each kernel file gets its own copy.
 */
#ifndef AI_SIMD_H
#define AI_SIMD_H

#include <stdint.h>
#include <string.h>

#include "ai_qmath.h"

#if defined(__ARM_FEATURE_DSP)
#include <arm_acle.h>
#endif

/* ---------------------------------------------------------------- SIMD helpers */

/* Unaligned-safe 32-bit load (a single LDR on Cortex-M3/M4/M7). */
static inline uint32_t rd32(const int8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

#if defined(__ARM_FEATURE_DSP)
/* bytes 0 and 2 of x, sign-extended to two halfwords */
static inline uint32_t sxtb16(uint32_t x) { return (uint32_t)__sxtb16((int8x4_t)x); }
/* bytes 1 and 3 of x: one SXTB16 with ROR #8 (gcc 12 does not fold __ror into it) */
static inline uint32_t sxtb16_r8(uint32_t x) {
  uint32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
  return r;
}
static inline int32_t smlad(uint32_t a, uint32_t b, int32_t acc) {
  return __smlad((int16x2_t)a, (int16x2_t)b, acc);
}
static inline int32_t smlabb(uint32_t a, uint32_t b, int32_t acc) {
  return __smlabb((int32_t)a, (int32_t)b, acc);
}
static inline int32_t smlatt(uint32_t a, uint32_t b, int32_t acc) {
  return __smlatt((int32_t)a, (int32_t)b, acc);
}
#else
static inline uint32_t sxtb16(uint32_t x) {
  const uint32_t lo = (uint32_t)(int32_t)(int8_t)(uint8_t)(x & 0xFFu) & 0xFFFFu;
  const uint32_t hi = (uint32_t)(int32_t)(int8_t)(uint8_t)((x >> 16) & 0xFFu) & 0xFFFFu;
  return lo | (hi << 16);
}
static inline uint32_t sxtb16_r8(uint32_t x) { return sxtb16((x >> 8) | (x << 24)); }
static inline int32_t lo16(uint32_t a) { return (int32_t)(int16_t)(uint16_t)(a & 0xFFFFu); }
static inline int32_t hi16(uint32_t a) { return (int32_t)(int16_t)(uint16_t)(a >> 16); }
/* The DSP instructions wrap modulo 2^32 (setting the Q flag): so do these. */
static inline int32_t smlad(uint32_t a, uint32_t b, int32_t acc) {
  const uint32_t s = (uint32_t)(lo16(a) * lo16(b)) + (uint32_t)(hi16(a) * hi16(b));
  return (int32_t)((uint32_t)acc + s);
}
static inline int32_t smlabb(uint32_t a, uint32_t b, int32_t acc) {
  return (int32_t)((uint32_t)acc + (uint32_t)(lo16(a) * lo16(b)));
}
static inline int32_t smlatt(uint32_t a, uint32_t b, int32_t acc) {
  return (int32_t)((uint32_t)acc + (uint32_t)(hi16(a) * hi16(b)));
}
#endif

/* ------------------------------------------------------------ requantisation */

/* TFLite's MultiplyByQuantizedMultiplier (double rounding), bit-exact. For the usual
 * right shift e = -shift >= 2 it is one 64-bit multiply-accumulate:
 *   srdhm(x, m)   = floor((x*m + 2^30) / 2^31)              (m > 0: never saturates)
 *   rdbypot(y, e) = floor((y + 2^(e-1) - [y<0]) / 2^e)      (half away from zero)
 * and floor(floor(a / 2^31) / 2^e) = floor(a / 2^(31+e)) give
 *   floor((x*m + 2^30 + 2^(30+e) - 2^31*[x<0]) / 2^(31+e))
 * ([y<0] == [x<0] for e >= 1, the x = -1, m = 2^30 corner included). With
 * k = 2^30 + 2^(30+e) = {hi: 2^(e-2), lo: 2^30} that is
 *   hi32(k - 2^31*[x<0] + x*m) >> (e-1).
 * Other shifts (effective scale >= 0.25, rare in convolutions) take ai_requant. */
typedef struct {
  int32_t m;   /* Q31 multiplier */
  int32_t rs;  /* e - 1 >= 1 on the fast path; 0 selects ai_requant */
  int32_t khi; /* 2^(e-2) */
  int32_t shift;
} rq_t;

static inline rq_t rq_prep(int32_t m, int32_t shift) {
  rq_t r;
  r.m = m;
  r.shift = shift;
  r.rs = shift <= -2 ? -shift - 1 : 0;
  r.khi = (int32_t)((1u << (uint32_t)r.rs) >> 1);
  return r;
}

/* The fast path alone (shift <= -2): 6 instructions on ARMv7E-M. */
static inline int32_t rq_fast(int32_t x, int32_t m, int32_t rs, int32_t khi) {
#if defined(__ARM_FEATURE_DSP)
  int32_t lo, hi = khi;
  const int32_t s = x >> 31;
  __asm__("mov %0, #0x40000000\n\t"
          "adds %0, %0, %2, lsl #31\n\t"
          "adc %1, %1, %2\n\t"
          "smlal %0, %1, %3, %4"
          : "=&r"(lo), "+&r"(hi)
          : "r"(s), "r"(x), "r"(m)
          : "cc");
  (void)lo;
  return hi >> rs;
#else
  const int64_t a = ((int64_t)khi << 32) + 0x40000000LL - (x < 0 ? 0x80000000LL : 0) + ai_smull(x, m);
  return (int32_t)(a >> 32) >> rs;
#endif
}

static inline int32_t rq_apply(int32_t x, const rq_t *r) {
  if (r->rs == 0) {
    return ai_requant(x, r->m, r->shift);
  }
  return rq_fast(x, r->m, r->rs, r->khi);
}

static inline int8_t clamp8(int32_t v, int32_t lo, int32_t hi) {
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  return (int8_t)v;
}

static inline int8_t rq_out(int32_t acc, const rq_t *r, int32_t offset, int32_t lo, int32_t hi) {
  return clamp8(ai_wadd(rq_apply(acc, r), offset), lo, hi);
}

/* 1 when every channel takes the fast path. */
static inline int all_fast(const int32_t *shift, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    if (shift[i] > -2) {
      return 0;
    }
  }
  return 1;
}

/* ------------------------------------------- folded requantisation (conv2d_s8) */

/* rq_fast with the output zero point folded in: kf = 2^(rs-1) + (out_zp << rs), so
 *   (hi32(kf:2^30 - 2^31*[x<0] + x*m)) >> rs == rq_fast(x, m, rs, 2^(rs-1)) + out_zp
 * (adding out_zp * 2^rs to the high word before the arithmetic shift adds exactly out_zp).
 * The lowering proves at generate time that the high word cannot overflow for any
 * accumulator the layer can produce; 4 instructions plus the shift on ARMv7E-M. */
static inline int32_t rq_fold(int32_t x, int32_t m, int32_t rs, int32_t kf) {
#if defined(__ARM_FEATURE_DSP)
  int32_t lo, hi;
  __asm__("and %0, %2, #0x80000000\n\t"
          "orr %0, %0, #0x40000000\n\t"
          "add %1, %3, %2, asr #31\n\t"
          "smlal %0, %1, %2, %4"
          : "=&r"(lo), "=&r"(hi)
          : "r"(x), "r"(kf), "r"(m));
  (void)lo;
  return hi >> rs;
#elif defined(__ARM_ARCH_6M__)
  /* Armv6-M has no 32x32->64 multiply (gcc calls libgcc's 64x64 __aeabi_lmul): the high word
   * of x*m from four 16x16 MULS (Hacker's Delight 8-2, mulhs), the low word from one MULS,
   * then + 2^30 - 2^31*[x<0] with its carry into the high word. Same value as the C below. */
  const uint32_t x0 = (uint32_t)x & 0xFFFFu, m0 = (uint32_t)m & 0xFFFFu;
  const int32_t x1 = x >> 16, m1 = m >> 16;
  const uint32_t w0 = x0 * m0;
  const int32_t t = x1 * (int32_t)m0 + (int32_t)(w0 >> 16);
  const int32_t w1 = (int32_t)x0 * m1 + (t & 0xFFFF);
  int32_t hi = x1 * m1 + (t >> 16) + (w1 >> 16);
  const uint32_t lo = (uint32_t)x * (uint32_t)m;
  const uint32_t c = x < 0 ? 0xC0000000u : 0x40000000u;   /* low word of 2^30 - 2^31*[x<0] */
  const uint32_t sum = lo + c;
  hi += (x < 0 ? -1 : 0) + (sum < lo ? 1 : 0);              /* its high word, and the carry */
  return (int32_t)((uint32_t)kf + (uint32_t)hi) >> rs;
#else
  const int64_t a = (int64_t)kf * 4294967296LL + 0x40000000LL - (x < 0 ? 0x80000000LL : 0) +
                    (int64_t)x * m;
  return (int32_t)(a >> 32) >> rs;
#endif
}

/* Saturate to int8 (one SSAT on ARMv7E-M). */
static inline int32_t ssat8(int32_t v) {
#if defined(__ARM_FEATURE_DSP)
  int32_t r; /* asm: ACLE's __ssat trips -Wsign-conversion in gcc 12 */
  __asm__("ssat %0, #8, %1" : "=r"(r) : "r"(v));
  return r;
#else
  return v < -128 ? -128 : (v > 127 ? 127 : v);
#endif
}

/* ------------------------------------------- helpers added for the 3x3 depthwise kernels */

/* Unaligned-safe 32-bit store (a single STR on Cortex-M3/M4/M7). */
static inline void wr32(void *p, uint32_t v) { memcpy(p, &v, sizeof v); }

#if defined(__ARM_FEATURE_DSP)
static inline int32_t smlabt(uint32_t a, uint32_t b, int32_t acc) {
  return __smlabt((int32_t)a, (int32_t)b, acc);
}
static inline int32_t smlatb(uint32_t a, uint32_t b, int32_t acc) {
  return __smlatb((int32_t)a, (int32_t)b, acc);
}
#else
static inline int32_t smlabt(uint32_t a, uint32_t b, int32_t acc) {
  return (int32_t)((uint32_t)acc +
                   (uint32_t)((int32_t)(int16_t)(uint16_t)(a & 0xFFFFu) * (int32_t)(int16_t)(uint16_t)(b >> 16)));
}
static inline int32_t smlatb(uint32_t a, uint32_t b, int32_t acc) {
  return (int32_t)((uint32_t)acc +
                   (uint32_t)((int32_t)(int16_t)(uint16_t)(a >> 16) * (int32_t)(int16_t)(uint16_t)(b & 0xFFFFu)));
}
#endif
/* {lo half of a, lo half of b} and {hi half of a, hi half of b} (PKHBT / PKHTB). */
#if defined(__ARM_FEATURE_DSP)
static inline uint32_t pk_lo(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
static inline uint32_t pk_hi(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("pkhtb %0, %2, %1, asr #16" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
#else
static inline uint32_t pk_lo(uint32_t a, uint32_t b) { return (a & 0xFFFFu) | (b << 16); }
static inline uint32_t pk_hi(uint32_t a, uint32_t b) { return (b & 0xFFFF0000u) | (a >> 16); }
#endif

/* ------------------------------------------------------------- word copies */

/* n words from s to d, both word-aligned, the ranges disjoint. The per-call copies of the
 * stripe entries (a member's params, its staged rq rows and int8 weights): on the Cortex-M4
 * LDM/STM of 4 words (5 + 5 cycles per 16 bytes, inline: no call, no alignment tests; the
 * linked memcpy moves a word per LDR/STR pair); elsewhere memcpy. */
#if defined(__ARM_ARCH_7EM__) && defined(__GNUC__) && !defined(AI_CORE_CM7) && !defined(AI_NO_ASM)
static inline __attribute__((always_inline)) void ai_copy_words(uint32_t *d, const uint32_t *s, uint32_t n) {
  for (; n >= 8u; n -= 8u) {
    __asm__ volatile("ldmia %0!, {r3, r4, r5, r6}\n\t"
                     "stmia %1!, {r3, r4, r5, r6}\n\t"
                     "ldmia %0!, {r3, r4, r5, r6}\n\t"
                     "stmia %1!, {r3, r4, r5, r6}"
                     : "+r"(s), "+r"(d)
                     :
                     : "r3", "r4", "r5", "r6", "memory");
  }
  if ((n & 4u) != 0u) {
    __asm__ volatile("ldmia %0!, {r3, r4, r5, r6}\n\t"
                     "stmia %1!, {r3, r4, r5, r6}"
                     : "+r"(s), "+r"(d)
                     :
                     : "r3", "r4", "r5", "r6", "memory");
  }
  if ((n & 2u) != 0u) {
    __asm__ volatile("ldmia %0!, {r3, r4}\n\t"
                     "stmia %1!, {r3, r4}"
                     : "+r"(s), "+r"(d)
                     :
                     : "r3", "r4", "memory");
  }
  if ((n & 1u) != 0u) {
    *d = *s;
  }
}
#else
static inline void ai_copy_words(uint32_t *d, const uint32_t *s, uint32_t n) {
  if (n != 0u) {
    memcpy(d, s, (size_t)n * 4u);
  }
}
#endif

#endif /* AI_SIMD_H */
