/* Integer requantisation helpers, bit-exact with TFLite's reference arithmetic
 * (double rounding: a rounding doubling high multiply, then a rounding right shift). */
#ifndef AI_QMATH_H
#define AI_QMATH_H

#include <stdint.h>

#define AI_MIN(a, b) ((a) < (b) ? (a) : (b))
#define AI_MAX(a, b) ((a) > (b) ? (a) : (b))
#define AI_CLAMP(x, lo, hi) AI_MIN(AI_MAX((x), (lo)), (hi))

/* int32 arithmetic that wraps modulo 2^32 (two's complement), as the Cortex-M ADD/MLA/SMLAD
 * instructions and TFLite Micro's int32 accumulators compute it on the device, without the
 * undefined behaviour of a signed overflow in C: the sum is formed in uint32_t and converted
 * back (implementation-defined, modulo 2^32 in GCC and Clang; no extra instruction on
 * Cortex-M). Accumulators whose worst case reaches 2^31 are legal (docs/verifier.md). */
static inline int32_t ai_wadd(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static inline int32_t ai_wmla(int32_t acc, int32_t a, int32_t b) {
  return (int32_t)((uint32_t)acc + (uint32_t)a * (uint32_t)b);
}

/* The 64-bit product of two int32. Armv6-M (Cortex-M0/M0+) has no 32x32->64 multiply and gcc
 * calls libgcc's 64x64 __aeabi_lmul for it: there the high word comes from four 16x16 MULS
 * (Hacker's Delight 8-2, mulhs: exact for every operand pair, each partial sum inside int32)
 * and the low word from one MULS. Everywhere else it is the plain C (one SMULL). */
static inline int64_t ai_smull(int32_t a, int32_t b) {
#if defined(__ARM_ARCH_6M__)
  const uint32_t a0 = (uint32_t)a & 0xFFFFu, b0 = (uint32_t)b & 0xFFFFu;
  const int32_t a1 = a >> 16, b1 = b >> 16;
  const uint32_t w0 = a0 * b0;
  const int32_t t = a1 * (int32_t)b0 + (int32_t)(w0 >> 16);
  const int32_t w1 = (int32_t)a0 * b1 + (t & 0xFFFF);
  const int32_t hi = a1 * b1 + (t >> 16) + (w1 >> 16);
  return (int64_t)(((uint64_t)(uint32_t)hi << 32) | ((uint32_t)a * (uint32_t)b));
#else
  return (int64_t)a * (int64_t)b;
#endif
}

/* (a * b * 2) >> 32 with round-to-nearest (ties away from zero), saturating the one
 * overflow case INT32_MIN * INT32_MIN. */
static inline int32_t ai_srdhm(int32_t a, int32_t b) {
  if (a == INT32_MIN && b == INT32_MIN) {
    return INT32_MAX;
  }
  const int64_t ab = ai_smull(a, b);
  const int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
  return (int32_t)((ab + nudge) / (1LL << 31));
}

/* x / 2^exponent rounded to nearest, ties away from zero. */
static inline int32_t ai_rdbypot(int32_t x, int32_t exponent) {
  const int32_t mask = (int32_t)((1LL << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* x * multiplier * 2^shift, multiplier a Q31 value in [0.5, 1). */
static inline int32_t ai_requant(int32_t x, int32_t multiplier, int32_t shift) {
  const int32_t left = shift > 0 ? shift : 0;
  const int32_t right = shift > 0 ? 0 : -shift;
  return ai_rdbypot(ai_srdhm((int32_t)((uint32_t)x << left), multiplier), right);
}

/* TFLite's Requantize of one value with an int32 input or output:
 * requant(q + input_offset) + output_offset, each sum wrapping modulo 2^32 as the int32
 * arithmetic of TFLite's reference code does on the targets it runs on (there, an overflow
 * is undefined behaviour; here it is defined), then clamped to [lo, hi]. */
static inline int32_t ai_requant_wrap(int32_t q, int32_t input_offset, int32_t multiplier,
                                      int32_t shift, int32_t output_offset, int32_t lo, int32_t hi) {
  const int32_t x = (int32_t)((uint32_t)q + (uint32_t)input_offset);
  const int32_t v = (int32_t)((uint32_t)ai_requant(x, multiplier, shift) + (uint32_t)output_offset);
  return AI_CLAMP(v, lo, hi);
}

#endif /* AI_QMATH_H */
