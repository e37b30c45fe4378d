/* 16x8 requantisation: TFLite's MultiplyByQuantizedMultiplier(int64_t x, m, shift), which
 * reduces the Q31 multiplier to 16 bits and does one rounding shift. The generator stores
 * the reduced multiplier `rmult` (0..32767) and the total shift `rshift` = 15 - shift
 * (verified 1..62 at generate time), so the kernel does (x * rmult + 2^(rshift-1)) >> rshift.
 * |x| < 2^47 (verified) keeps the product inside int64. */
#ifndef AI_QMATH64_H
#define AI_QMATH64_H

#include <stdint.h>

static inline int32_t ai_requant64(int64_t x, int32_t rmult, int32_t rshift) {
  /* TFLite casts the int64 result to int32 (it asserts that it fits); so do we. */
  return (int32_t)((x * (int64_t)rmult + ((int64_t)1 << (rshift - 1))) >> rshift);
}

/* Same clamp of an int32 to [lo, hi] as AI_CLAMP, as a function (no double evaluation). */
static inline int16_t ai_clamp_s16(int32_t v, int32_t lo, int32_t hi) {
  return (int16_t)(v < lo ? lo : (v > hi ? hi : v));
}

#endif /* AI_QMATH64_H */
