/* gemmlowp-style fixed-point arithmetic on raw int32 values, shared by the int8 SOFTMAX
 * (ai_softmax.c) and LOG_SOFTMAX (ai_log_softmax.c) kernels.
 *
 * A Qm.n value (m integer bits, n = 31 - m fractional bits) is held as its raw int32.
 * Products of two fixed-point values are ai_srdhm (the "doubling high multiply": the
 * integer bits of the result are the sum of the operands' integer bits); changing the
 * number of integer bits ("Rescale") is a saturating left shift (ai_fp_sat_shl) or a
 * rounding right shift (ai_rdbypot). Additions wrap, as the C++ reference does on every
 * target we know of; we spell the wrap out with unsigned arithmetic (no undefined
 * behaviour). Everything here is integer-only and bit-exact with TFLite's reference
 * kernels (TFLite Micro is the verdict, see docs/kernels_fc.md and
 * docs/kernels_log_softmax.md).
 *
 * Functions are `static inline`: every kernel file gets its own copy, no link-time symbol.
 */
#ifndef AI_FIXEDPOINT_H
#define AI_FIXEDPOINT_H

#include <stdint.h>

#include "ai_qmath.h"

/* a + b and a - b with two's-complement wrap-around. */
static inline int32_t ai_fp_add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static inline int32_t ai_fp_sub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }

/* a + b and a - b saturated to the int32 range. */
static inline int32_t ai_fp_sat_add(int32_t a, int32_t b) {
  const int64_t s = (int64_t)a + (int64_t)b;
  return s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : (int32_t)s);
}
static inline int32_t ai_fp_sat_sub(int32_t a, int32_t b) {
  const int64_t s = (int64_t)a - (int64_t)b;
  return s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : (int32_t)s);
}

/* x * 2^n for 0 <= n <= 31, saturating (gemmlowp SaturatingRoundingMultiplyByPOT with a
 * non-negative exponent); n = 0 returns x. */
static inline int32_t ai_fp_sat_shl(int32_t x, int32_t n) {
  const int32_t threshold = (int32_t)((1u << (31 - n)) - 1u);
  if (x > threshold) {
    return INT32_MAX;
  }
  if (x < -threshold) {
    return INT32_MIN;
  }
  return (int32_t)((uint32_t)x << n);
}

/* (a + b) / 2 rounded half away from zero, computed in 64 bits (gemmlowp RoundingHalfSum). */
static inline int32_t ai_fp_rounding_half_sum(int32_t a, int32_t b) {
  const int64_t sum = (int64_t)a + (int64_t)b;
  return (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
}

/* Leading zero bits of x; 32 for x == 0. */
static inline int32_t ai_fp_clz(uint32_t x) {
#if defined(__GNUC__)
  return x == 0u ? 32 : (int32_t)__builtin_clz(x);
#else
  int32_t n = 0;
  if (x == 0u) {
    return 32;
  }
  while ((x & 0x80000000u) == 0u) {
    x <<= 1;
    n++;
  }
  return n;
#endif
}

/* exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor series around -1/8 to degree 4. */
static inline int32_t ai_fp_exp_on_interval_between_negative_one_quarter_and_0_excl(int32_t a) {
  const int32_t constant_term = 1895147668;    /* exp(-1/8) */
  const int32_t constant_1_over_3 = 715827883; /* 1/3 */
  const int32_t x = ai_fp_add(a, 1 << 28);     /* a + 1/8 */
  const int32_t x2 = ai_srdhm(x, x);
  const int32_t x3 = ai_srdhm(x2, x);
  const int32_t x4 = ai_srdhm(x2, x2);
  const int32_t x4_over_4 = ai_rdbypot(x4, 2);
  const int32_t x4_over_24_plus_x3_over_6_plus_x2_over_2 =
      ai_rdbypot(ai_fp_add(ai_srdhm(ai_fp_add(x4_over_4, x3), constant_1_over_3), x2), 1);
  return ai_fp_add(constant_term,
                   ai_srdhm(constant_term, ai_fp_add(x, x4_over_24_plus_x3_over_6_plus_x2_over_2)));
}

/* exp(a) for a <= 0 in Q5.26 (5 integer bits), result Q0.31 (gemmlowp
 * exp_on_negative_values for FixedPoint<int32, 5>). */
static inline int32_t ai_fp_exp_on_negative_values_q5(int32_t a) {
  const int32_t one_quarter = 1 << 24; /* 1/4 in Q5.26 */
  const int32_t a_mod_quarter_minus_one_quarter = ai_fp_sub(a & (one_quarter - 1), one_quarter);
  /* Rescale Q5.26 -> Q0.31: x 2^5, cannot saturate on [-1/4, 0) */
  int32_t result = ai_fp_exp_on_interval_between_negative_one_quarter_and_0_excl(
      (int32_t)((uint32_t)a_mod_quarter_minus_one_quarter << 5));
  const int32_t remainder = ai_fp_sub(a_mod_quarter_minus_one_quarter, a);
  /* multiply by exp(-2^k) for every bit k of the remainder, k = -2 .. 4 */
  if (remainder & (1 << 24)) {
    result = ai_srdhm(result, 1672461947); /* exp(-1/4) */
  }
  if (remainder & (1 << 25)) {
    result = ai_srdhm(result, 1302514674); /* exp(-1/2) */
  }
  if (remainder & (1 << 26)) {
    result = ai_srdhm(result, 790015084); /* exp(-1) */
  }
  if (remainder & (1 << 27)) {
    result = ai_srdhm(result, 290630308); /* exp(-2) */
  }
  if (remainder & (1 << 28)) {
    result = ai_srdhm(result, 39332535); /* exp(-4) */
  }
  if (remainder & (1 << 29)) {
    result = ai_srdhm(result, 720401); /* exp(-8) */
  }
  if (remainder & (1 << 30)) {
    result = ai_srdhm(result, 242); /* exp(-16) */
  }
  return a == 0 ? INT32_MAX : result; /* exp(0) = "one" in Q0.31 */
}

/* 1 / (1 + a) for a in [0, 1), Q0.31 in and out (Newton-Raphson division, 3 steps,
 * gemmlowp one_over_one_plus_x_for_x_in_0_1). */
static inline int32_t ai_fp_one_over_one_plus_x_for_x_in_0_1(int32_t a) {
  const int32_t half_denominator = ai_fp_rounding_half_sum(a, INT32_MAX); /* Q0.31 */
  const int32_t constant_48_over_17 = 1515870810;      /* Q2.29 */
  const int32_t constant_neg_32_over_17 = -1010580540; /* Q2.29 */
  int32_t x = ai_fp_add(constant_48_over_17, ai_srdhm(half_denominator, constant_neg_32_over_17));
  for (int i = 0; i < 3; i++) {
    const int32_t half_denominator_times_x = ai_srdhm(half_denominator, x);         /* Q2.29 */
    const int32_t one_minus_half_denominator_times_x = ai_fp_sub(1 << 29, half_denominator_times_x);
    x = ai_fp_add(x, ai_fp_sat_shl(ai_srdhm(x, one_minus_half_denominator_times_x), 2)); /* Q4 -> Q2 */
  }
  return ai_fp_sat_shl(x, 1); /* x / 2 in Q1.30 read as Q0.31 */
}

#endif /* AI_FIXEDPOINT_H */
