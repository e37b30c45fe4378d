/* int8 1x1 CONV_2D with few input channels (in_c 4 or 8): "channel-stationary" — one output
 * channel's weights and requantisation constants stay in registers while every output pixel
 * streams past (docs/kernels_conv_smallk.md; lowering: stm32ai/passes/lower/conv_smallk.py).
 *
 * Per output channel oc and pixel: acc = bias'[oc] + sum_ic w[oc][ic] * x[ic] (SXTB16 of the
 * pixel's 1-2 words against the channel's int16 weight pairs, SMLAD), then the conv2d_s8
 * folded requantisation (rq_fold 1) or its doubled-accumulator form (rq_fold 2, 3: weights and
 * bias doubled when the channel starts, SMMLAR; the lowering proved it exact with
 * `rq_double_ok`), SSAT, the activation clamp when narrower than int8, one STRB.
 * Why: conv2d_s8's per-output fixed costs (column staging, channel-quad set-up) dominate when
 * an output has only 4-8 MACs (VWW's 1x1 8->16 on 48x48: ~32 estimated Cortex-M4 cycles per
 * output); here an output costs its loads, 2-4 SMLADs, 3-4 requantisation instructions and a
 * store. Weights and rq are read from flash once per call (staged in scratch, unpacked).
 *
 * weights: TFLite's filter [out_c][in_c] int8 as is (read bytewise: no alignment needed).
 * rq: per output channel the 4 int32 {bias', m, rs, kf} of conv2d_s8's folded table
 * (rq_fold >= 1; the general table is not accepted: the lowering keeps conv2d_s8 there).
 * Geometry: k_h = k_w = 1, pad 0, any stride. Access order: blocks of AI_SMK_BLOCK output pixels
 * (raster order; last to first when `reverse`), each block every channel, so an output written in
 * a block may only overlap input of blocks done before it (passes/lower/overlap.py). Scratch:
 * ai_conv2d_smallk_s8_scratch_size() = 32 B per output channel (its unpacked weights and
 * constants, staged once per call: the blocks re-use them without re-reading flash). */
#ifndef AI_KERNELS_CONV_SMALLK_H
#define AI_KERNELS_CONV_SMALLK_H

#include <stdint.h>

#include "ai_kernels_conv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AI_SMK_BLOCK 128 /* output pixels per block (SMALLK_BLOCK in conv_smallk.py) */
typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t pad_value;  /* input zero point (unused: 1x1 never pads; kept for the shared lowering) */
  int32_t out_offset; /* output zero point (inside kf) */
  int32_t act_min, act_max;
  int32_t rq_fold;    /* 1: rq_fold; 2: doubled accumulator with the sign term; 3: without it
                         (out_zp = -128, every m >= 2^30): conv2d_s8's meanings */
  int32_t reverse;    /* 1: pixel blocks from the last to the first (conv2d_smallk_s8 only) */
} ai_conv2d_smallk_s8_params;

void ai_conv2d_smallk_s8(const ai_conv2d_smallk_s8_params *p, const int8_t *input, const int8_t *weights,
                         const int32_t *rq, int8_t *output, void *scratch);
int32_t ai_conv2d_smallk_s8_scratch_size(const ai_conv2d_smallk_s8_params *p);

/* int8 CONV_2D whose window has few taps (K = k_h * k_w * in_c <= AI_SMK_WIN_MAX_K, dilation_w 1;
 * first layers: VWW's 3x3x3 stride 2), "pixel-pair stationary": per output pixel pair the two
 * windows are gathered once as int16 pairs (K order below; padded taps read pad_value), then
 * every block of 4 output channels accumulates 4 x 2 outputs over them (one column word and four
 * weight words feed 8 SMLADs), requantised as conv2d_smallk_s8. Weights and rq are staged in
 * scratch once per call (doubled for rq_fold 2, 3).
 * K order (the lowering's `smallk_win_order`): per filter row, each full 4 bytes of the row's
 * k_w * in_c run as the pairs {b0, b2}, {b1, b3} (SXTB16 of one word); then the rows' leftover
 * bytes (run % 4 per row, row-major) in consecutive pairs, a last odd one with 0.
 * weights: int8 [out_c][2 * kw_words] in that order (zero in the padding lanes).
 * Scratch: ai_conv2d_smallk_win_s8_scratch_size(). Not in-place. */
#define AI_SMK_WIN_MAX_K 64
typedef ai_conv2d_smallk_s8_params ai_conv2d_smallk_win_s8_params;

void ai_conv2d_smallk_win_s8(const ai_conv2d_smallk_win_s8_params *p, const int8_t *input,
                             const int8_t *weights, const int32_t *rq, int8_t *output, void *scratch);
int32_t ai_conv2d_smallk_win_s8_scratch_size(const ai_conv2d_smallk_win_s8_params *p);

#ifdef __cplusplus
}
#endif
#endif
