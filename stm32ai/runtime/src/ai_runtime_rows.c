/* ai_rows_move: the ring drops of a stripe's step-table executor (generated network.c,
 * docs/stripes.md "The executor"). Its own file so that a runtime without stripes needs neither
 * it nor ai_row_window.h. */
#include <string.h>

#include "ai_row_window.h"

/* ai_rows_move (ai_row_window.h): a forward copy, 16 bytes per iteration loaded before they are
 * stored, so that a move down (dst < src) never overwrites a byte it has still to read. Words
 * at any alignment where the core loads unaligned words (Armv7-M), else when both ends are
 * word-aligned; bytes for the rest. A move up (never emitted) goes to memmove. */
static inline __attribute__((always_inline)) void rows_move_words(uint8_t *dst, const uint8_t *src,
                                                                  uint32_t n) {
  for (; n >= 16u; n -= 16u, dst += 16, src += 16) {
    uint32_t a, b, c, d;
    memcpy(&a, src, 4);
    memcpy(&b, src + 4, 4);
    memcpy(&c, src + 8, 4);
    memcpy(&d, src + 12, 4);
    memcpy(dst, &a, 4);
    memcpy(dst + 4, &b, 4);
    memcpy(dst + 8, &c, 4);
    memcpy(dst + 12, &d, 4);
  }
  for (; n >= 4u; n -= 4u, dst += 4, src += 4) {
    uint32_t a;
    memcpy(&a, src, 4);
    memcpy(dst, &a, 4);
  }
}

void ai_rows_move(uint8_t *dst, const uint8_t *src, uint32_t n) {
  if (dst > src) {
    memmove(dst, src, n);
    return;
  }
  uint32_t done = n & ~3u; /* bytes the word loops copy */
  const int aligned = (((uintptr_t)dst | (uintptr_t)src) & 3u) == 0u;
  if (aligned && (uint32_t)(src - dst) >= 32u) {
    /* whole rows of a word-aligned ring, 32 bytes apart at least: block copies of 32 bytes
     * with no overlap inside a block (LDM/STM of 8 words on Arm) */
    uint8_t *d = (uint8_t *)__builtin_assume_aligned(dst, 4);
    const uint8_t *s = (const uint8_t *)__builtin_assume_aligned(src, 4);
#if defined(__thumb2__) && defined(__GNUC__) && !defined(AI_NO_ASM)
    /* one LDM and one STM of 8 words per block (9 + 9 cycles on Cortex-M4, plus 3 for the
     * loop), gcc's memcpy of 32 bytes being two of 4 words with their address arithmetic */
    uint32_t blocks = done >> 5;
    const uint32_t i = done & ~31u;
    if (blocks != 0u) {
      uint8_t *dp = d;
      const uint8_t *sp = s;
      __asm__ volatile("1:\n\t"
                       "ldmia %[s]!, {r3, r4, r5, r6, r8, r9, r10, r11}\n\t"
                       "subs %[n], %[n], #1\n\t"
                       "stmia %[d]!, {r3, r4, r5, r6, r8, r9, r10, r11}\n\t"
                       "bne 1b"
                       : [s] "+r"(sp), [d] "+r"(dp), [n] "+r"(blocks)
                       :
                       : "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11", "cc", "memory");
    }
#else
    uint32_t i = 0;
    for (; i + 32u <= done; i += 32u) {
      memcpy(d + i, s + i, 32);
    }
#endif
    rows_move_words(d + i, s + i, done - i);
  } else {
#if defined(__ARM_FEATURE_UNALIGNED)
    rows_move_words(dst, src, done);
#else
    if (aligned) {
      rows_move_words((uint8_t *)__builtin_assume_aligned(dst, 4),
                      (const uint8_t *)__builtin_assume_aligned(src, 4), done);
    } else {
      done = 0u;
    }
#endif
  }
  for (uint32_t i = done; i < n; ++i) {
    dst[i] = src[i];
  }
}
