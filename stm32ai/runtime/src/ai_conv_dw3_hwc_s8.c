/* int8 DEPTHWISE_CONV_2D 3x3 on the HWC layout, channel by channel, for short calls (stripe
 * members: one or a few output rows per call). Same params and packed constants as
 * ai_depthwise_conv2d_3x3_s8 (docs/kernels_conv.md "3x3 depthwise on HWC"); no transposition
 * into scratch, no per-call frame: per output channel its 10 constants are read once per call,
 * then each output row is walked two pixels at a time, the input bytes of each kernel row
 * loaded straight from the HWC rows (stride in_c) and paired as int16 {x[i], x[i+1]} for SMLAD.
 * A pair of the previous step is reused (stride 1: 2 new columns per output pair and row).
 * Rows of the window outside the image: their taps read pad_value, so their sum
 * pad_value * (w0 + w1 + w2) is added to the bias once per output row and the row's weights
 * are zeroed (the loads then read a row inside the image, whose product with 0 adds nothing).
 * Columns outside the image: the few pairs next to the left / right edge take a bounds-checked
 * path; every other pair loads without a test. No float, no malloc, no scratch. */
#include <string.h>

#include "ai_kernels_conv.h"
#include "ai_simd.h"

/* Low word of TFLite's rounding constant (as ai_conv_dw_s8.c DW3_KLO) */
#define DWH_KLO(rs) ((rs) == 0 ? (int32_t)0xC0000000u : 0x40000000)

/* The packed requantisation (as ai_conv_dw_s8.c dw3_rq): hi32({khi, klo} + sign term +
 * x*m) >> rs, then SSAT 8. exact 0: sign term {s, klo ^ s} (proved exact per layer at
 * generate time); 1: exactly -2^31 * [x < 0]. */
static inline int32_t dwh_rq(int32_t x, int32_t m, int32_t khi, int32_t rs, int32_t klo, int exact) {
#if defined(__ARM_FEATURE_DSP)
  int32_t lo, hi, s;
  if (exact) {
    __asm__("asr %2, %3, #31\n\t"
            "adds %0, %4, %2, lsl #31\n\t"
            "adc %1, %5, %2\n\t"
            "smlal %0, %1, %3, %6"
            : "=&r"(lo), "=&r"(hi), "=&r"(s)
            : "r"(x), "r"(klo), "r"(khi), "r"(m)
            : "cc");
  } else {
    __asm__("eor %0, %3, %2, asr #31\n\t"
            "add %1, %4, %2, asr #31\n\t"
            "smlal %0, %1, %2, %5"
            : "=&r"(lo), "=&r"(hi)
            : "r"(x), "r"(klo), "r"(khi), "r"(m));
    s = 0;
  }
  (void)lo;
  (void)s;
  return ssat8(hi >> rs);
#else
  const uint32_t s = (uint32_t)(x >> 31);
  uint64_t k;
  if (exact) {
    k = ((uint64_t)(uint32_t)khi << 32) + (uint32_t)klo - (s & 0x80000000u);
  } else {
    k = ((uint64_t)((uint32_t)khi + s) << 32) | ((uint32_t)klo ^ s);
  }
  const uint64_t a = k + (uint64_t)ai_smull(x, m);
  return ssat8((int32_t)(uint32_t)(a >> 32) >> rs);
#endif
}

/* {a, b} as int16 halves, a low (PKHBT) */
static inline uint32_t dwh_pk(int32_t a, int32_t b) {
  return pk_lo((uint32_t)a, (uint32_t)b);
}

/* Input column ix of a row (bounds-checked: pad_value outside the image) */
static inline int32_t dwh_px(const int8_t *row, int32_t ix, int32_t w, int32_t col, int32_t pv) {
  return (ix >= 0 && ix < w) ? (int32_t)row[ix * col] : pv;
}

/* The two outputs of an output pair (or the first one alone) from the pairs A = {x0, x1},
 * B = {x2, x3} (and N = {x4, x5} at stride 2) of each kernel row k (weights wa = {w0, w1},
 * wb = {w1, w2}):  out0 = SMLAD(A, wa) + x2 * w2;
 *   stride 1: out1 = x1 * w0 + SMLAD(B, wb);  stride 2: out1 = SMLAD(B, wa) + x4 * w2. */
#define DWH_MAC_S1(A, B, WA, WB)   \
  do {                             \
    a0 = smlad(A, WA, a0);         \
    a0 = smlabt(B, WB, a0);        \
    a1 = smlatb(A, WA, a1);        \
    a1 = smlad(B, WB, a1);         \
  } while (0)
#define DWH_MAC_S2(A, B, N, WA, WB) \
  do {                              \
    a0 = smlad(A, WA, a0);          \
    a0 = smlabt(B, WB, a0);         \
    a1 = smlad(B, WA, a1);          \
    a1 = smlabt(N, WB, a1);         \
  } while (0)

/* The common one-row cases in assembly on Armv7E-M (Cortex-M4 and M7, optimised builds; gcc
 * spills most of the loop state of the C below): depth multiplier 1, the window's middle row
 * inside the image, and stride 1 with pad_l 1, out_w == in_w, or stride 2 with TFLite's SAME
 * geometry (pad_l = W & 1, out_w = (W + 1) / 2). One call runs every channel of one output row.
 * Registers: r0-r2 the three rows at the current channel and column, r3 in_c (the column and
 * output pitch), r4 the output, r5 the frame f (words: 0-5 the channel's wa0, wb0, wa1, wb1,
 * wa2, wb2; 6 bias; 7 m; 8 khi; 9 rs; 10 pad_l (stride 2); 11, 12 the carried pairs A1, A2
 * (A0 in r7: no frame pointer in an optimised build); 13 the packed constants' pointer; 14 the
 * pair loop's end; 15 klo (exact form); 16 pad_value; 17 {pad_value, pad_value}; 18 the pair
 * loop's row advance; 19, 20 a channel's row / output advance - 1; 21 the row ends in one
 * output; 22 channels left; 23 a window row outside the image; 24, 25 window row 0, 2 inside).
 * Per channel: its 10 constants copied to the frame (LDM/STM; the weights of a row outside the
 * image zeroed and its pad taps folded into the bias, as the C does), the A pairs, then the
 * pairs (stride 1, per kernel row: A, the 2 new bytes packed into B = {x[2j+1], x[2j+2]}, the
 * next A, the row's weights by LDRD, 4 MACs; stride 2: 4 new bytes, B and N, N the next A;
 * the requantisation, two byte stores), then the end of the row: one output or a pair whose
 * columns past the row read pad_value. Same values as the C loop. */
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_ARCH_7EM__) && defined(__GNUC__) && \
    defined(__OPTIMIZE__) && !defined(AI_NO_ASM)
#define AI_DWH_ASM 1
#define DWH_ROW(P, AOFF, WOFF)                  \
  "ldr lr, [r5, #" #AOFF "]\n\t"                \
  "ldrsb r6, [" P "]\n\t"                       \
  "ldrsb r8, [" P ", r3]\n\t"                   \
  "ldrd r9, r10, [r5, #" #WOFF "]\n\t"          \
  "pkhbt r6, r6, r8, lsl #16\n\t"               \
  "smlad r11, lr, r9, r11\n\t"                  \
  "smlatb r12, lr, r9, r12\n\t"                 \
  "smlabt r11, r6, r10, r11\n\t"                \
  "smlad r12, r6, r10, r12\n\t"                 \
  "str r6, [r5, #" #AOFF "]\n\t"
/* row 0: its carried pair A0 lives in r7 (no frame load / store) */
#define DWH_ROW0                                \
  "ldrsb r6, [r0]\n\t"                          \
  "ldrsb r8, [r0, r3]\n\t"                      \
  "ldrd r9, r10, [r5]\n\t"                      \
  "pkhbt r6, r6, r8, lsl #16\n\t"               \
  "smlad r11, r7, r9, r11\n\t"                  \
  "smlatb r12, r7, r9, r12\n\t"                 \
  "smlabt r11, r6, r10, r11\n\t"                \
  "smlad r12, r6, r10, r12\n\t"                 \
  "mov r7, r6\n\t"
/* the row's last pair: B = {x[W-1], pad} (r8 = pad_value) */
#define DWH_ROW_END2(P, AOFF, WOFF)             \
  "ldr lr, [r5, #" #AOFF "]\n\t"                \
  "ldrsb r6, [" P "]\n\t"                       \
  "ldrd r9, r10, [r5, #" #WOFF "]\n\t"          \
  "pkhbt r6, r6, r8, lsl #16\n\t"               \
  "smlad r11, lr, r9, r11\n\t"                  \
  "smlatb r12, lr, r9, r12\n\t"                 \
  "smlabt r11, r6, r10, r11\n\t"                \
  "smlad r12, r6, r10, r12\n\t"
/* the row's single last output: B = {pad, pad} (r8) */
#define DWH_ROW_END1(AOFF, WOFF)                \
  "ldr lr, [r5, #" #AOFF "]\n\t"                \
  "ldrd r9, r10, [r5, #" #WOFF "]\n\t"          \
  "smlad r11, lr, r9, r11\n\t"                  \
  "smlabt r11, r8, r10, r11\n\t"
#define DWH_RQ_EOR(ACC)                         \
  "asr r6, " ACC ", #31\n\t"                    \
  "add lr, r10, r6\n\t"                         \
  "eor r6, r6, #0x40000000\n\t"                 \
  "smlal r6, lr, " ACC ", r9\n\t"               \
  "asr lr, lr, r8\n\t"                          \
  "ssat lr, #8, lr\n\t"
#define DWH_RQ_EXACT(ACC)                       \
  "asr lr, " ACC ", #31\n\t"                    \
  "ldr r6, [r5, #60]\n\t"                       \
  "adds r6, r6, lr, lsl #31\n\t"                \
  "adc lr, r10, lr\n\t"                         \
  "smlal r6, lr, " ACC ", r9\n\t"               \
  "asr lr, lr, r8\n\t"                          \
  "ssat lr, #8, lr\n\t"
/* klo for the exact form's requantisation (the EOR form has it as an immediate) */
#define DWH_KLO_EXACT                           \
  "cmp r10, #0\n\t"                             \
  "ite eq\n\t"                                  \
  "moveq r8, #0xC0000000\n\t"                   \
  "movne r8, #0x40000000\n\t"                   \
  "str r8, [r5, #60]\n\t"
#define DWH_LDQ                                 \
  "ldrd r9, r10, [r5, #28]\n\t"                 \
  "ldr r8, [r5, #36]\n\t"
/* per channel: its constants to the frame, a window row outside the image folded (label 7: A's) */
#define DWH_CH_SETUP(KLO)                                                     \
  "5:\n\t" /* next channel: constants to the frame */                         \
  "ldr lr, [r5, #52]\n\t"                                                     \
  "ldm lr!, {r6, r8, r9, r10, r11, r12}\n\t"                                  \
  "stm r5, {r6, r8, r9, r10, r11, r12}\n\t"                                   \
  "ldm lr!, {r6, r8, r9, r10}\n\t"                                            \
  "str lr, [r5, #52]\n\t"                                                     \
  "add lr, r5, #24\n\t"                                                       \
  "stm lr, {r6, r8, r9, r10}\n\t"                                             \
  KLO                                                                         \
  "ldr lr, [r5, #92]\n\t" /* a window row outside the image (r6 = bias) */    \
  "cmp lr, #0\n\t"                                                            \
  "beq 7f\n\t"                                                                \
  "ldr r12, [r5, #68]\n\t"                                                    \
  "ldr lr, [r5, #96]\n\t"                                                     \
  "cmp lr, #0\n\t"                                                            \
  "bne 8f\n\t"                                                                \
  "ldrd r8, r9, [r5]\n\t" /* row 0: bias += pad * (w0 + w1 + w2), weights 0 */\
  "smlad r6, r12, r8, r6\n\t"                                                 \
  "smlabt r6, r12, r9, r6\n\t"                                                \
  "mov r8, #0\n\t"                                                            \
  "mov r9, #0\n\t"                                                            \
  "strd r8, r9, [r5]\n\t"                                                     \
  "8:\n\t"                                                                    \
  "ldr lr, [r5, #100]\n\t"                                                    \
  "cmp lr, #0\n\t"                                                            \
  "bne 9f\n\t"                                                                \
  "ldrd r8, r9, [r5, #16]\n\t" /* row 2 likewise */                          \
  "smlad r6, r12, r8, r6\n\t"                                                 \
  "smlabt r6, r12, r9, r6\n\t"                                                \
  "mov r8, #0\n\t"                                                            \
  "mov r9, #0\n\t"                                                            \
  "strd r8, r9, [r5, #16]\n\t"                                                \
  "9:\n\t"                                                                    \
  "str r6, [r5, #24]\n\t"                                                     \
  "7:\n\t"

/* the channel's end: back to column 0 of the next channel, f[19] / f[20] the advances */
#define DWH_CH_END                                                            \
  "6:\n\t" /* back to column 0 of the next channel */                        \
  "ldrd r6, r8, [r5, #76]\n\t"                                                \
  "sub r0, r0, r6\n\t"                                                        \
  "sub r1, r1, r6\n\t"                                                        \
  "sub r2, r2, r6\n\t"                                                        \
  "sub r4, r4, r8\n\t"                                                        \
  "ldr lr, [r5, #88]\n\t"                                                     \
  "subs lr, lr, #1\n\t"                                                       \
  "str lr, [r5, #88]\n\t"                                                     \
  "bne 5b\n\t"

/* stride 1 */
#define DWH_ROWS_ASM(RQ, KLO)                                                 \
  DWH_CH_SETUP(KLO)                                                           \
  "ldr r12, [r5, #64]\n\t" /* A = {pad, x[0]} */                             \
  "ldrsb r6, [r0]\n\t"                                                        \
  "ldrsb r8, [r1]\n\t"                                                        \
  "ldrsb r9, [r2]\n\t"                                                        \
  "pkhbt r6, r12, r6, lsl #16\n\t"                                            \
  "pkhbt r8, r12, r8, lsl #16\n\t"                                            \
  "pkhbt r9, r12, r9, lsl #16\n\t"                                            \
  "mov r7, r6\n\t"                                                            \
  "strd r8, r9, [r5, #44]\n\t"                                               \
  "add r0, r0, r3\n\t"                                                        \
  "add r1, r1, r3\n\t"                                                        \
  "add r2, r2, r3\n\t"                                                        \
  "ldr lr, [r5, #72]\n\t"                                                     \
  "cmp lr, #0\n\t"                                                            \
  "beq 3f\n\t"                                                                \
  "add lr, r0, lr\n\t"                                                        \
  "str lr, [r5, #56]\n\t"                                                     \
  ".p2align 2\n"                                                              \
  "1:\n\t"                                                                    \
  "ldr r11, [r5, #24]\n\t"                                                    \
  "mov r12, r11\n\t"                                                          \
  DWH_ROW0                                                                    \
  DWH_ROW("r1", 44, 8)                                                        \
  DWH_ROW("r2", 48, 16)                                                       \
  "add r0, r0, r3, lsl #1\n\t"                                                \
  "add r1, r1, r3, lsl #1\n\t"                                                \
  "add r2, r2, r3, lsl #1\n\t"                                                \
  DWH_LDQ                                                                     \
  RQ("r11")                                                                   \
  "strb lr, [r4]\n\t"                                                         \
  RQ("r12")                                                                   \
  "strb lr, [r4, r3]\n\t"                                                     \
  "add r4, r4, r3, lsl #1\n\t"                                                \
  "ldr lr, [r5, #56]\n\t"                                                     \
  "cmp r0, lr\n\t"                                                            \
  "bne 1b\n\t"                                                                \
  "3:\n\t" /* the row's end */                                               \
  "ldr r11, [r5, #24]\n\t"                                                    \
  "ldr lr, [r5, #84]\n\t"                                                     \
  "cmp lr, #0\n\t"                                                            \
  "beq 4f\n\t"                                                                \
  "ldr r8, [r5, #68]\n\t"                                                     \
  "ldrd r9, r10, [r5]\n\t" /* row 0 (A0 in r7) */                             \
  "smlad r11, r7, r9, r11\n\t"                                                \
  "smlabt r11, r8, r10, r11\n\t"                                              \
  DWH_ROW_END1(44, 8)                                                         \
  DWH_ROW_END1(48, 16)                                                        \
  DWH_LDQ                                                                     \
  RQ("r11")                                                                   \
  "strb lr, [r4]\n\t"                                                         \
  "b 6f\n\t"                                                                  \
  "4:\n\t"                                                                    \
  "mov r12, r11\n\t"                                                          \
  "ldr r8, [r5, #64]\n\t"                                                     \
  "ldrsb r6, [r0]\n\t" /* row 0 (A0 in r7) */                                 \
  "ldrd r9, r10, [r5]\n\t"                                                    \
  "pkhbt r6, r6, r8, lsl #16\n\t"                                             \
  "smlad r11, r7, r9, r11\n\t"                                                \
  "smlatb r12, r7, r9, r12\n\t"                                               \
  "smlabt r11, r6, r10, r11\n\t"                                              \
  "smlad r12, r6, r10, r12\n\t"                                               \
  DWH_ROW_END2("r1", 44, 8)                                                   \
  DWH_ROW_END2("r2", 48, 16)                                                  \
  DWH_LDQ                                                                     \
  RQ("r11")                                                                   \
  "strb lr, [r4]\n\t"                                                         \
  RQ("r12")                                                                   \
  "strb lr, [r4, r3]\n\t"                                                     \
  DWH_CH_END

/* Stride 2 (TFLite SAME: out_w = ceil(W / 2), pad_l = W & 1): a pair j of a channel reads the
 * 4 new columns n .. n + 3 of each kernel row (B = {x[n], x[n+1]}, N = {x[n+2], x[n+3]};
 * out0 = SMLAD(A, wa) + x[n] * w2, out1 = SMLAD(B, wa) + x[n+2] * w2, N the next pair's A).
 * The row pointer steps 2 columns after each load pair. */
#define DWH_ROW_S2(P, AOFF, WOFF)               \
  "ldrsb r6, [" P "]\n\t"                       \
  "ldrsb r8, [" P ", r3]\n\t"                   \
  "add " P ", " P ", r3, lsl #1\n\t"            \
  "ldrsb r9, [" P "]\n\t"                       \
  "ldrsb r10, [" P ", r3]\n\t"                  \
  "add " P ", " P ", r3, lsl #1\n\t"            \
  "pkhbt r6, r6, r8, lsl #16\n\t"               \
  "pkhbt r9, r9, r10, lsl #16\n\t"              \
  "ldr lr, [r5, #" #AOFF "]\n\t"                \
  "str r9, [r5, #" #AOFF "]\n\t"                \
  "ldrd r8, r10, [r5, #" #WOFF "]\n\t"          \
  "smlad r11, lr, r8, r11\n\t"                  \
  "smlabt r11, r6, r10, r11\n\t"                \
  "smlad r12, r6, r8, r12\n\t"                  \
  "smlabt r12, r9, r10, r12\n\t"
#define DWH_ROW0_S2                             \
  "ldrsb r6, [r0]\n\t"                          \
  "ldrsb r8, [r0, r3]\n\t"                      \
  "add r0, r0, r3, lsl #1\n\t"                  \
  "ldrsb r9, [r0]\n\t"                          \
  "ldrsb r10, [r0, r3]\n\t"                     \
  "add r0, r0, r3, lsl #1\n\t"                  \
  "pkhbt r6, r6, r8, lsl #16\n\t"               \
  "pkhbt r9, r9, r10, lsl #16\n\t"              \
  "ldrd r8, r10, [r5]\n\t"                      \
  "smlad r11, r7, r8, r11\n\t"                  \
  "smlabt r11, r6, r10, r11\n\t"                \
  "smlad r12, r6, r8, r12\n\t"                  \
  "smlabt r12, r9, r10, r12\n\t"                \
  "mov r7, r9\n\t"
/* the row's last pair: B = {x[W-2], x[W-1]}, x[W] = pad (r8) */
#define DWH_ROW_S2_END2(A, P, WOFF)             \
  "ldrsb r6, [" P "]\n\t"                       \
  "ldrsb r9, [" P ", r3]\n\t"                   \
  "pkhbt r6, r6, r9, lsl #16\n\t"               \
  "ldrd r9, r10, [r5, #" #WOFF "]\n\t"          \
  "smlad r11, " A ", r9, r11\n\t"               \
  "smlabt r11, r6, r10, r11\n\t"                \
  "smlad r12, r6, r9, r12\n\t"                  \
  "smlabt r12, r8, r10, r12\n\t"
/* f[10]: pad_l (1: A = {pad, x[0]}, 0: A = {x[0], x[1]}) */
#define DWH_ROWS_S2_ASM(RQ, KLO)                                              \
  DWH_CH_SETUP(KLO)                                                           \
  "ldr lr, [r5, #40]\n\t"                                                     \
  "cmp lr, #0\n\t"                                                            \
  "bne 2f\n\t"                                                                \
  "ldrsb r6, [r0]\n\t" /* pad_l 0: A = {x[0], x[1]} */                        \
  "ldrsb r8, [r0, r3]\n\t"                                                    \
  "add r0, r0, r3, lsl #1\n\t"                                                \
  "pkhbt r7, r6, r8, lsl #16\n\t"                                             \
  "ldrsb r6, [r1]\n\t"                                                        \
  "ldrsb r8, [r1, r3]\n\t"                                                    \
  "add r1, r1, r3, lsl #1\n\t"                                                \
  "pkhbt r9, r6, r8, lsl #16\n\t"                                             \
  "ldrsb r6, [r2]\n\t"                                                        \
  "ldrsb r8, [r2, r3]\n\t"                                                    \
  "add r2, r2, r3, lsl #1\n\t"                                                \
  "pkhbt r10, r6, r8, lsl #16\n\t"                                            \
  "strd r9, r10, [r5, #44]\n\t"                                               \
  "b 10f\n\t"                                                                 \
  "2:\n\t" /* pad_l 1: A = {pad, x[0]} */                                     \
  "ldr r12, [r5, #64]\n\t"                                                    \
  "ldrsb r6, [r0]\n\t"                                                        \
  "ldrsb r8, [r1]\n\t"                                                        \
  "ldrsb r9, [r2]\n\t"                                                        \
  "pkhbt r7, r12, r6, lsl #16\n\t"                                            \
  "pkhbt r8, r12, r8, lsl #16\n\t"                                            \
  "pkhbt r9, r12, r9, lsl #16\n\t"                                            \
  "strd r8, r9, [r5, #44]\n\t"                                                \
  "add r0, r0, r3\n\t"                                                        \
  "add r1, r1, r3\n\t"                                                        \
  "add r2, r2, r3\n\t"                                                        \
  "10:\n\t"                                                                   \
  "ldr lr, [r5, #72]\n\t"                                                     \
  "cmp lr, #0\n\t"                                                            \
  "beq 3f\n\t"                                                                \
  "add lr, r0, lr\n\t"                                                        \
  "str lr, [r5, #56]\n\t"                                                     \
  ".p2align 2\n"                                                              \
  "1:\n\t"                                                                    \
  "ldr r11, [r5, #24]\n\t"                                                    \
  "mov r12, r11\n\t"                                                          \
  DWH_ROW0_S2                                                                 \
  DWH_ROW_S2("r1", 44, 8)                                                     \
  DWH_ROW_S2("r2", 48, 16)                                                    \
  DWH_LDQ                                                                     \
  RQ("r11")                                                                   \
  "strb lr, [r4]\n\t"                                                         \
  RQ("r12")                                                                   \
  "strb lr, [r4, r3]\n\t"                                                     \
  "add r4, r4, r3, lsl #1\n\t"                                                \
  "ldr lr, [r5, #56]\n\t"                                                     \
  "cmp r0, lr\n\t"                                                            \
  "bne 1b\n\t"                                                                \
  "3:\n\t" /* the row's end: one output (x[W] = pad) or a pair */            \
  "ldr r11, [r5, #24]\n\t"                                                    \
  "ldr lr, [r5, #84]\n\t"                                                     \
  "cmp lr, #0\n\t"                                                            \
  "beq 4f\n\t"                                                                \
  "ldr r8, [r5, #68]\n\t"                                                     \
  "ldrd r9, r10, [r5]\n\t"                                                    \
  "smlad r11, r7, r9, r11\n\t"                                                \
  "smlabt r11, r8, r10, r11\n\t"                                              \
  DWH_ROW_END1(44, 8)                                                         \
  DWH_ROW_END1(48, 16)                                                        \
  DWH_LDQ                                                                     \
  RQ("r11")                                                                   \
  "strb lr, [r4]\n\t"                                                         \
  "b 6f\n\t"                                                                  \
  "4:\n\t"                                                                    \
  "mov r12, r11\n\t"                                                          \
  "ldr r8, [r5, #64]\n\t"                                                     \
  DWH_ROW_S2_END2("r7", "r0", 0)                                              \
  "ldr lr, [r5, #44]\n\t"                                                     \
  DWH_ROW_S2_END2("lr", "r1", 8)                                              \
  "ldr lr, [r5, #48]\n\t"                                                     \
  DWH_ROW_S2_END2("lr", "r2", 16)                                             \
  DWH_LDQ                                                                     \
  RQ("r11")                                                                   \
  "strb lr, [r4]\n\t"                                                         \
  RQ("r12")                                                                   \
  "strb lr, [r4, r3]\n\t"                                                     \
  DWH_CH_END

/* Rows of 5 (stride 1, pad_l 1, out_w == in_w == 5: KWS's stripe members), every window row inside
 * the image: per channel no frame copy, its constants read where they are (r5 walks them, 40 bytes
 * per channel) in two passes over the three kernel rows, outputs 0-1 then 2-4, each input byte
 * loaded by LDRSB at [row, C] / [row, C, LSL #1] (the row pointer stepped 2 columns in pass 2):
 *   pass 1, per row: P01 = {x0, x1}; o0 += SMLAD(P01, wb) + pad * w0; o1 += SMLAD(P01, wa) + x2 * w2
 *   pass 2, per row: P12 = {x1, x2}, P34 = {x3, x4}; o2 += SMLAD(P12, wa) + x3 * w2;
 *                    o3 += x2 * w0 + SMLAD(P34, wb); o4 += SMLAD(P34, wa) + pad * w2
 * (wa = {w0, w1}, wb = {w1, w2}: the same products as the pair loop, so the same sums). Registers:
 * r0-r2 the rows at column 0 of the channel, r3 C, r4 the output, r5 the constants; 24 bytes below
 * sp: pad_value, outputs 0 and 1 (bytes 4, 5), channels left, 2C - 1 (from column 2 of a channel to
 * column 0 of the next), klo (exact form). Every output of a channel is stored after its last
 * input read (pass 2 re-reads x1, x2), so the output may be written over its input row (a stripe's
 * in-place rows) as with dwh_row_asm. About 135 instructions per channel and row against 172. */
#define DWH5_P1(P, WOFF)                        \
  "ldrd r8, r9, [r5, #" #WOFF "]\n\t"           \
  "ldrsb r10, [" P "]\n\t"                      \
  "ldrsb r11, [" P ", r3]\n\t"                  \
  "pkhbt r10, r10, r11, lsl #16\n\t"            \
  "ldrsb r11, [" P ", r3, lsl #1]\n\t"          \
  "smlad r6, r10, r9, r6\n\t"                   \
  "smlabb r6, r12, r8, r6\n\t"                  \
  "smlad r7, r10, r8, r7\n\t"                   \
  "smlabt r7, r11, r9, r7\n\t"
#define DWH5_P2(P, WOFF)                        \
  "ldrd r9, r10, [r5, #" #WOFF "]\n\t"          \
  "ldrsb r11, [" P ", r3]\n\t"                  \
  "ldrsb lr, [" P ", r3, lsl #1]\n\t"           \
  "add " P ", " P ", r3, lsl #1\n\t"            \
  "pkhbt r11, r11, lr, lsl #16\n\t"             \
  "ldrsb r12, [" P ", r3]\n\t"                  \
  "ldrsb lr, [" P ", r3, lsl #1]\n\t"           \
  "smlad r6, r11, r9, r6\n\t"                   \
  "smlatb r7, r11, r9, r7\n\t"                  \
  "pkhbt r12, r12, lr, lsl #16\n\t"             \
  "smlabt r6, r12, r10, r6\n\t"                 \
  "smlad r7, r12, r10, r7\n\t"                  \
  "smlad r8, r12, r9, r8\n\t"                   \
  "ldr lr, [sp]\n\t"                            \
  "smlabt r8, lr, r10, r8\n\t"
/* requantisation of ACC into T1 (T0, T1 temporaries; M, KHI, RS the constants), as DWH_RQ_EOR /
 * DWH_RQ_EXACT (klo at [sp, #16]) */
#define DWH5_RQ_EOR(ACC, M, KHI, RS, T0, T1)    \
  "asr " T0 ", " ACC ", #31\n\t"                \
  "add " T1 ", " KHI ", " T0 "\n\t"             \
  "eor " T0 ", " T0 ", #0x40000000\n\t"         \
  "smlal " T0 ", " T1 ", " ACC ", " M "\n\t"    \
  "asr " T1 ", " T1 ", " RS "\n\t"              \
  "ssat " T1 ", #8, " T1 "\n\t"
#define DWH5_RQ_EXACT(ACC, M, KHI, RS, T0, T1)  \
  "asr " T1 ", " ACC ", #31\n\t"                \
  "ldr " T0 ", [sp, #16]\n\t"                   \
  "adds " T0 ", " T0 ", " T1 ", lsl #31\n\t"    \
  "adc " T1 ", " KHI ", " T1 "\n\t"             \
  "smlal " T0 ", " T1 ", " ACC ", " M "\n\t"    \
  "asr " T1 ", " T1 ", " RS "\n\t"              \
  "ssat " T1 ", #8, " T1 "\n\t"
#define DWH5_KLO_EXACT                          \
  "cmp r10, #0\n\t"                             \
  "ite eq\n\t"                                  \
  "moveq r11, #0xC0000000\n\t"                  \
  "movne r11, #0x40000000\n\t"                  \
  "str r11, [sp, #16]\n\t"
#define DWH5_ASM(RQ, KLO)                                                     \
  "sub sp, sp, #24\n\t" /* r6: {pad_value, C, 2C - 1} */                      \
  "ldm r6, {r7, r8, r9}\n\t"                                                   \
  "str r7, [sp]\n\t"                                                          \
  "str r8, [sp, #8]\n\t"                                                      \
  "str r9, [sp, #12]\n\t"                                                     \
  ".p2align 2\n"                                                              \
  "1:\n\t"                                                                    \
  "ldr r12, [sp]\n\t"                                                         \
  "ldr r6, [r5, #24]\n\t"                                                     \
  "mov r7, r6\n\t"                                                            \
  DWH5_P1("r0", 0)                                                            \
  DWH5_P1("r1", 8)                                                            \
  DWH5_P1("r2", 16)                                                           \
  "ldrd r8, r9, [r5, #28]\n\t"                                                \
  "ldr r10, [r5, #36]\n\t"                                                    \
  KLO                                                                         \
  RQ("r6", "r8", "r9", "r10", "r11", "r12")                                   \
  "strb r12, [sp, #4]\n\t" /* outputs 0, 1 stored after pass 2 reads x1, x2 */ \
  RQ("r7", "r8", "r9", "r10", "r11", "r12")                                   \
  "strb r12, [sp, #5]\n\t"                                                     \
  "ldr r6, [r5, #24]\n\t"                                                     \
  "mov r7, r6\n\t"                                                            \
  "mov r8, r6\n\t"                                                            \
  DWH5_P2("r0", 0)                                                            \
  DWH5_P2("r1", 8)                                                            \
  DWH5_P2("r2", 16)                                                           \
  "ldrd r9, r10, [r5, #28]\n\t"                                               \
  "ldr r11, [r5, #36]\n\t"                                                    \
  RQ("r6", "r9", "r10", "r11", "r12", "lr")                                   \
  "strb lr, [r4, r3, lsl #1]\n\t"                                             \
  "add r4, r4, r3, lsl #1\n\t"                                                \
  RQ("r7", "r9", "r10", "r11", "r12", "lr")                                   \
  "strb lr, [r4, r3]\n\t"                                                     \
  RQ("r8", "r9", "r10", "r11", "r12", "lr")                                   \
  "strb lr, [r4, r3, lsl #1]\n\t"                                             \
  "ldrb r9, [sp, #4]\n\t"                                                      \
  "ldrb r10, [sp, #5]\n\t"                                                     \
  "sub r11, r4, r3, lsl #1\n\t"                                                \
  "strb r9, [r11]\n\t"                                                         \
  "strb r10, [r11, r3]\n\t"                                                    \
  "ldr r6, [sp, #12]\n\t" /* column 2 of this channel -> column 0 of the next */ \
  "sub r0, r0, r6\n\t"                                                        \
  "sub r1, r1, r6\n\t"                                                        \
  "sub r2, r2, r6\n\t"                                                        \
  "sub r4, r4, r6\n\t"                                                        \
  "add r5, r5, #40\n\t"                                                       \
  "ldr r7, [sp, #8]\n\t"                                                      \
  "subs r7, r7, #1\n\t"                                                       \
  "str r7, [sp, #8]\n\t"                                                      \
  "bne 1b\n\t"                                                                \
  "add sp, sp, #24\n\t"

/* every channel of one output row of 5 (the conditions above; rows at column 0 of channel 0) */
static void dwh_row5_asm(const int8_t *const *rows, int32_t C, int8_t *out, const int32_t *packed, int32_t pv,
                         int exact) {
  const int32_t fr[3] = {pv, C, 2 * C - 1};
  register const int8_t *r0_ __asm__("r0") = rows[0];
  register const int8_t *r1_ __asm__("r1") = rows[1];
  register const int8_t *r2_ __asm__("r2") = rows[2];
  register int32_t r3_ __asm__("r3") = C;
  register int8_t *r4_ __asm__("r4") = out;
  register const int32_t *r5_ __asm__("r5") = packed;
  register const int32_t *r6_ __asm__("r6") = fr;
  if (exact) {
    __asm__ volatile(DWH5_ASM(DWH5_RQ_EXACT, DWH5_KLO_EXACT)
                     : "+r"(r0_), "+r"(r1_), "+r"(r2_), "+r"(r4_), "+r"(r5_), "+r"(r6_)
                     : "r"(r3_)
                     : "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
  } else {
    __asm__ volatile(DWH5_ASM(DWH5_RQ_EOR, "")
                     : "+r"(r0_), "+r"(r1_), "+r"(r2_), "+r"(r4_), "+r"(r5_), "+r"(r6_)
                     : "r"(r3_)
                     : "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
  }
}

/* stride 2, SAME (out_w = (W + 1) / 2, pad_l = W & 1): the pairs whose 4 new columns all lie
 * in the row; the rest of the row is then 1 output (x[W] = pad) or a pair whose N is {pad, -} */
static inline int32_t dwh_s2_pairs(int32_t W) {
  return ((W + (W & 1)) % 4 == 0) ? (W + (W & 1) - 4) / 4 : (W + (W & 1) - 2) / 4;
}

/* every channel of one output row (the conditions above); rows: the window's rows at column 0
 * of channel 0 (a row outside the image: any row inside, its weights then zeroed); f[13] =
 * packed, f[16] = pad_value, f[24] / f[25] = window row 0 / 2 inside the image, set by the
 * caller */
static void dwh_row_asm(const int8_t *const *rows, int32_t C, int8_t *out, int32_t *f, int32_t W,
                        int32_t S, int exact) {
  f[23] = !f[24] || !f[25];
  if (S == 1 && W == 5 && !f[23]) {
    dwh_row5_asm(rows, C, out, (const int32_t *)(uintptr_t)f[13], f[16], exact);
    return;
  }
  f[17] = (int32_t)(((uint32_t)f[16] & 0xFFFFu) | ((uint32_t)f[16] << 16));
  f[22] = C;
  if (S == 1) {
    const int32_t npairs = (W - 1) >> 1; /* pairs that load no padded column */
    f[18] = 2 * npairs * C;
    f[19] = (2 * npairs + 1) * C - 1;
    f[20] = 2 * npairs * C - 1;
    f[21] = W & 1;
  } else { /* dwh_s2_pairs: n pairs, then 1 output (r = 1) or a pair (r = 2) */
    const int32_t pl = W & 1, n = dwh_s2_pairs(W), r = (W + 1) / 2 - 2 * n;
    f[10] = pl;
    f[18] = 4 * n * C;
    f[19] = (2 - pl + 4 * n) * C - 1;
    f[20] = 2 * n * C - 1;
    f[21] = r == 1;
  }
  register const int8_t *r0_ __asm__("r0") = rows[0];
  register const int8_t *r1_ __asm__("r1") = rows[1];
  register const int8_t *r2_ __asm__("r2") = rows[2];
  register int32_t r3_ __asm__("r3") = C;
  register int8_t *r4_ __asm__("r4") = out;
  register int32_t *r5_ __asm__("r5") = f;
  if (S == 1) {
    if (exact) {
      __asm__ volatile(DWH_ROWS_ASM(DWH_RQ_EXACT, DWH_KLO_EXACT)
                       : "+r"(r0_), "+r"(r1_), "+r"(r2_), "+r"(r4_)
                       : "r"(r3_), "r"(r5_)
                       : "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    } else {
      __asm__ volatile(DWH_ROWS_ASM(DWH_RQ_EOR, "")
                       : "+r"(r0_), "+r"(r1_), "+r"(r2_), "+r"(r4_)
                       : "r"(r3_), "r"(r5_)
                       : "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    }
  } else {
    if (exact) {
      __asm__ volatile(DWH_ROWS_S2_ASM(DWH_RQ_EXACT, DWH_KLO_EXACT)
                       : "+r"(r0_), "+r"(r1_), "+r"(r2_), "+r"(r4_)
                       : "r"(r3_), "r"(r5_)
                       : "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    } else {
      __asm__ volatile(DWH_ROWS_S2_ASM(DWH_RQ_EOR, "")
                       : "+r"(r0_), "+r"(r1_), "+r"(r2_), "+r"(r4_)
                       : "r"(r3_), "r"(r5_)
                       : "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    }
  }
}
#endif

/* One output row of one channel (any case the lowering allows). */
static inline __attribute__((always_inline)) void dwh_row_c(
    const ai_depthwise_conv2d_3x3_s8_params *p, const int8_t *src, const int8_t *const *rowp, int32_t cofs,
    const int32_t *k, int8_t *o, int32_t iy0, int32_t jlo, int32_t jhi, const int exact) {
  const int32_t H = p->in_h, W = p->in_w, C = p->in_c, OC = p->out_c;
  const int32_t OW = p->out_w, S = p->stride[0], PL = p->pad[1], pv = p->pad_value;
  const int32_t in_row = W * C, npairs = OW >> 1, step = 2 * S * C;
  const int32_t m = k[7], khi = k[8], rs = k[9], klo = DWH_KLO(rs);
  /* per kernel row: the row read (clamped into the image), its weights (0 outside, their pad
   * taps then folded into the bias) */
  int32_t a_bias = k[6];
  const int8_t *r[3];
  uint32_t wa[3], wb[3];
  for (int32_t ky = 0; ky < 3; ++ky) {
    const int32_t iy = iy0 + ky;
    wa[ky] = (uint32_t)k[2 * ky];
    wb[ky] = (uint32_t)k[2 * ky + 1];
    if (iy < 0 || iy >= H) {
      const int32_t s3 = (int32_t)(int16_t)(uint16_t)(wa[ky] & 0xFFFFu) +
                         (int32_t)(int16_t)(uint16_t)(wa[ky] >> 16) +
                         (int32_t)(int16_t)(uint16_t)(wb[ky] >> 16);
      a_bias = (int32_t)((uint32_t)a_bias + (uint32_t)(pv * s3));
      wa[ky] = 0u;
      wb[ky] = 0u;
    }
    const int32_t cy = iy < 0 ? 0 : (iy >= H ? H - 1 : iy);
    r[ky] = rowp != NULL ? rowp[cy] + cofs : src + cy * in_row; /* rowp: one pointer per input row */
  }
  const uint32_t wa0 = wa[0], wb0 = wb[0], wa1 = wa[1], wb1 = wb[1], wa2 = wa[2], wb2 = wb[2];
  const int8_t *r0 = r[0], *r1 = r[1], *r2 = r[2];
  /* the first pair's A = {x[ix0], x[ix0 + 1]}, ix0 = -PL */
  uint32_t A0 = dwh_pk(dwh_px(r0, -PL, W, C, pv), dwh_px(r0, 1 - PL, W, C, pv));
  uint32_t A1 = dwh_pk(dwh_px(r1, -PL, W, C, pv), dwh_px(r1, 1 - PL, W, C, pv));
  uint32_t A2 = dwh_pk(dwh_px(r2, -PL, W, C, pv), dwh_px(r2, 1 - PL, W, C, pv));
  int32_t j = 0;
  /* bounds-checked pairs (left edge), then the plain ones, then the right edge */
  for (int pass = 0; pass < 3; ++pass) {
    const int32_t jend = pass == 0 ? jlo : (pass == 1 ? jhi : npairs);
    if (pass == 1) {
      int32_t off = (2 * j * S - PL + 2) * C;
      if (S == 1) {
        for (; j < jend; ++j, off += step, o += 2 * OC) {
          int32_t a0 = a_bias, a1 = a_bias;
          const uint32_t B0 = dwh_pk(r0[off], r0[off + C]);
          const uint32_t B1 = dwh_pk(r1[off], r1[off + C]);
          const uint32_t B2 = dwh_pk(r2[off], r2[off + C]);
          DWH_MAC_S1(A0, B0, wa0, wb0);
          DWH_MAC_S1(A1, B1, wa1, wb1);
          DWH_MAC_S1(A2, B2, wa2, wb2);
          A0 = B0;
          A1 = B1;
          A2 = B2;
          o[0] = (int8_t)dwh_rq(a0, m, khi, rs, klo, exact);
          o[OC] = (int8_t)dwh_rq(a1, m, khi, rs, klo, exact);
        }
      } else {
        for (; j < jend; ++j, off += step, o += 2 * OC) {
          int32_t a0 = a_bias, a1 = a_bias;
          const uint32_t B0 = dwh_pk(r0[off], r0[off + C]);
          const uint32_t N0 = dwh_pk(r0[off + 2 * C], r0[off + 3 * C]);
          DWH_MAC_S2(A0, B0, N0, wa0, wb0);
          const uint32_t B1 = dwh_pk(r1[off], r1[off + C]);
          const uint32_t N1 = dwh_pk(r1[off + 2 * C], r1[off + 3 * C]);
          DWH_MAC_S2(A1, B1, N1, wa1, wb1);
          const uint32_t B2 = dwh_pk(r2[off], r2[off + C]);
          const uint32_t N2 = dwh_pk(r2[off + 2 * C], r2[off + 3 * C]);
          DWH_MAC_S2(A2, B2, N2, wa2, wb2);
          A0 = N0;
          A1 = N1;
          A2 = N2;
          o[0] = (int8_t)dwh_rq(a0, m, khi, rs, klo, exact);
          o[OC] = (int8_t)dwh_rq(a1, m, khi, rs, klo, exact);
        }
      }
      continue;
    }
    for (; j < jend; ++j, o += 2 * OC) {
      const int32_t ix = 2 * j * S - PL + 2; /* the first new column */
      int32_t a0 = a_bias, a1 = a_bias;
      const uint32_t B0 = dwh_pk(dwh_px(r0, ix, W, C, pv), dwh_px(r0, ix + 1, W, C, pv));
      const uint32_t B1 = dwh_pk(dwh_px(r1, ix, W, C, pv), dwh_px(r1, ix + 1, W, C, pv));
      const uint32_t B2 = dwh_pk(dwh_px(r2, ix, W, C, pv), dwh_px(r2, ix + 1, W, C, pv));
      if (S == 1) {
        DWH_MAC_S1(A0, B0, wa0, wb0);
        DWH_MAC_S1(A1, B1, wa1, wb1);
        DWH_MAC_S1(A2, B2, wa2, wb2);
        A0 = B0;
        A1 = B1;
        A2 = B2;
      } else {
        const uint32_t N0 = dwh_pk(dwh_px(r0, ix + 2, W, C, pv), dwh_px(r0, ix + 3, W, C, pv));
        const uint32_t N1 = dwh_pk(dwh_px(r1, ix + 2, W, C, pv), dwh_px(r1, ix + 3, W, C, pv));
        const uint32_t N2 = dwh_pk(dwh_px(r2, ix + 2, W, C, pv), dwh_px(r2, ix + 3, W, C, pv));
        DWH_MAC_S2(A0, B0, N0, wa0, wb0);
        DWH_MAC_S2(A1, B1, N1, wa1, wb1);
        DWH_MAC_S2(A2, B2, N2, wa2, wb2);
        A0 = N0;
        A1 = N1;
        A2 = N2;
      }
      o[0] = (int8_t)dwh_rq(a0, m, khi, rs, klo, exact);
      o[OC] = (int8_t)dwh_rq(a1, m, khi, rs, klo, exact);
    }
  }
  if (OW & 1) { /* the last output alone: A as carried, column ix0 + 2 */
    const int32_t ix = 2 * npairs * S - PL + 2;
    int32_t a0 = a_bias;
    a0 = smlad(A0, wa0, a0);
    a0 = smlabt((uint32_t)dwh_px(r0, ix, W, C, pv), wb0, a0);
    a0 = smlad(A1, wa1, a0);
    a0 = smlabt((uint32_t)dwh_px(r1, ix, W, C, pv), wb1, a0);
    a0 = smlad(A2, wa2, a0);
    a0 = smlabt((uint32_t)dwh_px(r2, ix, W, C, pv), wb2, a0);
    o[0] = (int8_t)dwh_rq(a0, m, khi, rs, klo, exact);
  }
}

#if defined(AI_DWH_ASM)
/* Every output row in assembly (dwh_row_asm's conditions, and every window's middle row inside
 * the image): the whole call, before dwh_run's C-path set-up, out of line (a stripe member's
 * one-row call runs only this). Returns 0 when some row needs the C loop. */
static __attribute__((noinline)) int dwh_run_asm(const ai_depthwise_conv2d_3x3_s8_params *p, const int8_t *input,
                                                 const int32_t *packed, int8_t *output, const int exact) {
  const int32_t H = p->in_h, W = p->in_w, C = p->in_c, OC = p->out_c;
  const int32_t OH = p->out_h, OW = p->out_w, S = p->stride[0], PT = p->pad[0], PL = p->pad[1];
  if (p->batches != 1 || OC != C || C <= 0 || OH <= 0 || W < 2 || 1 - PT < 0 || (OH - 1) * S - PT + 1 >= H ||
      !((S == 1 && PL == 1 && OW == W) || (S == 2 && PL == (W & 1) && OW == (W + 1) / 2))) {
    return 0; /* several batches: the C path's loop (its rows still in assembly) */
  }
  const int32_t in_row = W * C;
  int32_t f[26];
  f[16] = p->pad_value;
  const int8_t *mid = input + (1 - PT) * in_row; /* the first window's middle row */
  for (int32_t iy0 = -PT, oy = OH; oy > 0; --oy, iy0 += S, mid += S * in_row, output += OW * OC) {
    f[24] = iy0 >= 0;
    f[25] = iy0 + 2 < H;
    const int8_t *const rows[3] = {f[24] ? mid - in_row : mid, mid, f[25] ? mid + in_row : mid};
    f[13] = (int32_t)(uintptr_t)packed;
    dwh_row_asm(rows, C, output, f, W, S, exact);
  }
  return 1;
}
#endif

/* rowp NULL: the input is one image at `input`; else rowp[i] is input row i (batch 1: a stripe's
 * ring whose rows are not one image, docs/stripes.md "Split rings"). */
static inline __attribute__((always_inline)) void dwh_run(const ai_depthwise_conv2d_3x3_s8_params *p,
                                                          const int8_t *input, const int8_t *const *rowp,
                                                          const int32_t *packed, int8_t *output,
                                                          const int exact) {
  const int32_t H = p->in_h, W = p->in_w, C = p->in_c, OC = p->out_c;
  const int32_t OH = p->out_h, OW = p->out_w, S = p->stride[0], PT = p->pad[0], PL = p->pad[1];
  const int32_t M = C > 0 ? OC / C : 0;
  const int32_t in_row = W * C, npairs = OW >> 1;
  if (H <= 0 || W <= 0 || M <= 0 || (S != 1 && S != 2)) {
    return; /* the lowering never selects this kernel for such layers */
  }
  /* pairs whose new loads all lie inside the row: [jlo, jhi) (columns 2jS - PL + 2 ..
   * 2jS - PL + 1 + 2S); the others take the bounds-checked path */
  int32_t jlo = 0;
  while (jlo < npairs && 2 * jlo * S - PL + 2 < 0) {
    ++jlo;
  }
  int32_t jhi = npairs;
  while (jhi > jlo && 2 * (jhi - 1) * S - PL + 1 + 2 * S > W - 1) {
    --jhi;
  }
#if defined(AI_DWH_ASM)
  int32_t f[26];
  f[16] = p->pad_value;
  const int asm_ok = M == 1 && ((S == 1 && PL == 1 && OW == W && W >= 2) ||
                                 (S == 2 && PL == (W & 1) && OW == (W + 1) / 2 && W >= 2));
#endif
  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *in_b = input + b * H * in_row;
    int8_t *out_b = output + b * OH * OW * OC;
    for (int32_t oy = 0; oy < OH; ++oy) {
      const int32_t iy0 = oy * S - PT;
      int8_t *o = out_b + oy * OW * OC;
#if defined(AI_DWH_ASM)
      if (asm_ok && iy0 + 1 >= 0 && iy0 + 1 < H) {
        f[24] = iy0 >= 0;
        f[25] = iy0 + 2 < H;
        const int8_t *const mid = rowp != NULL ? rowp[iy0 + 1] : in_b + (iy0 + 1) * in_row;
        const int8_t *const rows[3] = {f[24] ? (rowp != NULL ? rowp[iy0] : mid - in_row) : mid, mid,
                                       f[25] ? (rowp != NULL ? rowp[iy0 + 2] : mid + in_row) : mid};
        f[13] = (int32_t)(uintptr_t)packed;
        dwh_row_asm(rows, C, o, f, W, S, exact);
        continue;
      }
#endif
      const int32_t *k = packed;
      for (int32_t c = 0; c < OC; ++c, k += 10) {
        dwh_row_c(p, in_b + c / M, rowp, c / M, k, o + c, iy0, jlo, jhi, exact);
      }
    }
  }
}

/* the C path out of line: the entries' assembly calls save no registers for it */
static __attribute__((noinline)) void dwh_run_e0(const ai_depthwise_conv2d_3x3_s8_params *p, const int8_t *input,
                                                 const int32_t *packed, int8_t *output) {
  dwh_run(p, input, NULL, packed, output, 0);
}
static __attribute__((noinline)) void dwh_run_e1(const ai_depthwise_conv2d_3x3_s8_params *p, const int8_t *input,
                                                 const int32_t *packed, int8_t *output) {
  dwh_run(p, input, NULL, packed, output, 1);
}

void ai_depthwise_conv2d_3x3_hwc_s8(const ai_depthwise_conv2d_3x3_hwc_s8_params *p, const int8_t *input,
                                    const int32_t *packed, int8_t *output) {
#if defined(AI_DWH_ASM)
  if (dwh_run_asm(p, input, packed, output, 0)) {
    return;
  }
#endif
  dwh_run_e0(p, input, packed, output);
}

void ai_depthwise_conv2d_3x3_hwc_sgn_s8(const ai_depthwise_conv2d_3x3_hwc_sgn_s8_params *p,
                                        const int8_t *input, const int32_t *packed, int8_t *output) {
#if defined(AI_DWH_ASM)
  if (dwh_run_asm(p, input, packed, output, 1)) {
    return;
  }
#endif
  dwh_run_e1(p, input, packed, output);
}

void ai_depthwise_conv2d_3x3_hwc_rowp_s8(const ai_depthwise_conv2d_3x3_hwc_s8_params *p,
                                         const int8_t *const *rows, const int32_t *packed, int8_t *output) {
  dwh_run(p, rows[0], rows, packed, output, 0);
}

void ai_depthwise_conv2d_3x3_hwc_sgn_rowp_s8(const ai_depthwise_conv2d_3x3_hwc_sgn_s8_params *p,
                                             const int8_t *const *rows, const int32_t *packed, int8_t *output) {
  dwh_run(p, rows[0], rows, packed, output, 1);
}
