/* Convolution kernels: CONV_2D and DEPTHWISE_CONV_2D, int8 and float32.
 *
 * Everything that can be computed at generate time is computed by the lowering
 * (stm32ai/passes/lower/conv.py); see docs/kernels_conv.md for the parameters, the
 * packed weight layouts and the arithmetic. Tensors are NHWC. Field names of the
 * parameter structs are the `attrs` keys of the lowered op.
 *
 * Alignment: packed weights, biases and the multiplier/shift tables must be 4-byte
 * aligned (the weights pool guarantees it); scratch must be 4-byte aligned (the
 * activation pool guarantees 8). Activations need no alignment.
 */
#ifndef AI_KERNELS_CONV_H
#define AI_KERNELS_CONV_H

#include <stdint.h>

#include "ai_row_window.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Geometry shared by every convolution kernel. `stride`, `dilation` and `pad` are
 * {height, width}; `pad` is the top/left padding (TFLite SAME puts the odd pixel at
 * the bottom/right). */
#define AI_CONV_GEOMETRY_FIELDS                                                         \
  int32_t batches;                                                                      \
  int32_t in_h, in_w, in_c;                                                             \
  int32_t out_h, out_w, out_c;                                                          \
  int32_t k_h, k_w;                                                                     \
  int32_t stride[2];                                                                    \
  int32_t dilation[2];                                                                  \
  int32_t pad[2];

/* ---- int8 ----
 * acc[oc] = bias[oc] + sum over taps of w * x, where a padded tap reads x = pad_value
 * (the input zero point; the lowering folded -in_zp * sum(w) into bias), then
 * out = clamp(requant(acc, mult[oc], shift[oc]) + out_offset, act_min, act_max)
 * with TFLite's double-rounding requantisation. */

/* General CONV_2D (any kernel size, stride, dilation, padding) as partial im2col
 * (two int16 columns in scratch) times packed weights, 2 output channels x 2 pixels
 * per inner loop. Weights: the "pair-interleaved" int8 layout, or (w16 = 1) the same
 * order pre-sign-extended to int16 (docs/kernels_conv.md). rq: per output channel the 4
 * int32 {bias, multiplier, rs, kf} (rq_fold = 1: the folded requantisation the lowering
 * proved exact, output zero point inside kf) or {bias, multiplier, shift, 0}. */
typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t pad_value;  /* input zero point */
  int32_t out_offset; /* output zero point (rq_fold = 0 only) */
  int32_t act_min, act_max;
  int32_t w16;        /* 1: int16 weights ("time"), 0: int8 weights */
  int32_t rq_fold;    /* 1: rq holds rq_fold constants; 2: the same, and the lowering proved the
                         doubled accumulator of the Cortex-M4 channel quads fits (|acc| < 2^30);
                         3: 2 with out_zp = -128, m >= 2^30 (no sign term needed; docs/kernels_conv.md
                         "Doubled accumulator") */
  int32_t krow;       /* 1: K is k_h filter rows each padded to a multiple of 4 (in_c % 4 != 0, dilation_w 1) */
  int32_t reverse;    /* 1: pixel pairs from the last to the first (an output placed after its input
                         may then overlap it; docs/kernels_conv.md "Access order") */
  int32_t stage_oc;   /* 0: the MAC loops read `weights` and `rq` where they are (flash). > 0: blocks of
                         stage_oc output channels (even, or >= out_c: one block); each block's rq rows and
                         weights are copied to scratch once, then every pixel pair of the block reads them
                         there. `weights` is then the int8 layout and w16 = 1 expands it to int16 while
                         copying (docs/kernels_conv.md "Weights staged in RAM") */
  int32_t pad_copy;   /* 1: per batch (and staged block) the input rows and columns the windows touch are
                         first copied into scratch with their padding written out (pad_value), so every
                         window lies inside that copy and takes the fast column path; chosen by the
                         lowering for small padded first layers (docs/kernels_conv.md "Padded input copy") */
  int32_t stage_gap;  /* 1 (ai_conv2d_s8, unstaged int8, one batch, raster order, the input's only reader):
                         stage the weights and rq, chunk of output rows by chunk, in the input rows no
                         later window reads (passes/gap_stage.py; docs/stripes.md session 37) */
} ai_conv2d_s8_params;

void ai_conv2d_s8(const ai_conv2d_s8_params *p, const int8_t *input, const int8_t *weights,
                  const int32_t *rq, int8_t *output, void *scratch);
/* Row-window entries (ai_row_window.h): the layer's rows w.out_h from w.in_h input rows with
 * w.pad_top padding rows above them; the entry above is the full window. */
void ai_conv2d_s8_rows(const ai_conv2d_s8_params *p, ai_row_window w, const int8_t *input,
                       const int8_t *weights, const int32_t *rq, int8_t *output, void *scratch);
int32_t ai_conv2d_s8_scratch_size(const ai_conv2d_s8_params *p);

/* The same layer one output pixel at a time (one int16 column: 2 * Kp bytes of scratch instead
 * of 4 * Kp), the same outputs; for in_c % 4 == 0, unstaged, no pad_copy, reverse 0 (else it runs
 * ai_conv2d_s8, with its scratch). Chosen for stripe members whose scratch sets the stripe's
 * peak (passes/stripes.py `_narrow_scratch`; docs/kernels_conv.md "One column"). */
typedef ai_conv2d_s8_params ai_conv2d_s8_1col_params;
void ai_conv2d_s8_1col(const ai_conv2d_s8_1col_params *p, const int8_t *input, const int8_t *weights,
                       const int32_t *rq, int8_t *output, void *scratch);
void ai_conv2d_s8_1col_rows(const ai_conv2d_s8_1col_params *p, ai_row_window w, const int8_t *input,
                            const int8_t *weights, const int32_t *rq, int8_t *output, void *scratch);
int32_t ai_conv2d_s8_1col_scratch_size(const ai_conv2d_s8_1col_params *p);

/* DEPTHWISE_CONV_2D, depth multiplier 1, at most AI_DW_MAX_TAPS kernel taps.
 * Weights: packed per group of 4 channels, tap-major inside the group. */
#define AI_DW_MAX_TAPS 64
typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t pad_value;
  int32_t out_offset;
  int32_t act_min, act_max;
} ai_depthwise_conv2d_s8_params;

void ai_depthwise_conv2d_s8(const ai_depthwise_conv2d_s8_params *p, const int8_t *input,
                            const int8_t *weights, const int32_t *bias, const int32_t *mult,
                            const int32_t *shift, int8_t *output, void *scratch);
void ai_depthwise_conv2d_s8_rows(const ai_depthwise_conv2d_s8_params *p, ai_row_window w,
                                 const int8_t *input, const int8_t *weights, const int32_t *bias,
                                 const int32_t *mult, const int32_t *shift, int8_t *output,
                                 void *scratch);
int32_t ai_depthwise_conv2d_s8_scratch_size(const ai_depthwise_conv2d_s8_params *p);

/* DEPTHWISE_CONV_2D 3x3, any multiplier (out_c = in_c * M), dilation 1, stride 1x1 or 2x2, fused clamp equal to
 * the full int8 range, requantisation proved exact at generate time for the fast sequence
 * (docs/kernels_conv.md, "3x3 depthwise"). Channel-planar: for each group of 4 channels,
 * bands of 8 input rows are transposed into int16 pixel pairs in scratch (padding holds
 * pad_value), then each channel's output rows are computed two pixels at a time with SMLAD
 * on packed pixel pairs. Scratch: ai_depthwise_conv2d_3x3_s8_scratch_size() bytes.
 * packed: per channel 10 int32: {w00,w01}, {w01,w02}, {w10,w11}, {w11,w12}, {w20,w21},
 * {w21,w22} (int16 pairs, low half first), folded bias, multiplier, khi, rs (see docs).
 * Access order (for in-place use): channel groups in order; inside a group, bands of output
 * rows in the walking direction; a band's input rows (of this group's channels) are all read
 * into scratch before any of its outputs is written: output may overwrite input when
 * transpose == 0 or stride == 1 (docs). */
typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t pad_value;
  int32_t plane_w;   /* int16 columns per plane row (even) */
  int32_t transpose; /* 1: walk the image column by column (packed weights transposed) */
  int32_t stage;     /* 1: each channel group's packed constants are copied to scratch (after the
                        planes) once per group instead of read from `packed` once per band
                        (weights in flash with wait states, docs/flash_staging.md) */
  int32_t rqd;       /* 2, 3: the doubled-accumulator requantisation is proved exact for every
                        channel (3: also without its sign term); used by Cortex-M4 builds only,
                        others ignore it (docs/kernels_conv.md). 4, 5: 2, 3 with `packed`
                        pre-doubled ({2w}, 2 bias, m, 2 khi, rs + 1 per channel): the
                        row-window entries of the _g2 kernels only, with batches 1, stage 0,
                        transpose 0, in_c == out_c even (the stripe pass sets it so on Cortex-M4
                        targets, passes/stripe_dw3.py, docs/stripes.md) */
} ai_depthwise_conv2d_3x3_s8_params;

void ai_depthwise_conv2d_3x3_s8(const ai_depthwise_conv2d_3x3_s8_params *p, const int8_t *input,
                                const int32_t *packed, int8_t *output, void *scratch);
void ai_depthwise_conv2d_3x3_s8_rows(const ai_depthwise_conv2d_3x3_s8_params *p, ai_row_window w,
    const int8_t *input, const int32_t *packed, int8_t *output, void *scratch);
int32_t ai_depthwise_conv2d_3x3_s8_scratch_size(const ai_depthwise_conv2d_3x3_s8_params *p);

/* The same kernel with the requantisation's sign correction computed exactly (2 more
 * instructions per output): for 3x3 layers whose fast sequence cannot be proved exact, and
 * channels with shift -1 (rs = 0). */
typedef ai_depthwise_conv2d_3x3_s8_params ai_depthwise_conv2d_3x3_sgn_s8_params;
void ai_depthwise_conv2d_3x3_sgn_s8(const ai_depthwise_conv2d_3x3_sgn_s8_params *p,
                                    const int8_t *input, const int32_t *packed, int8_t *output,
                                    void *scratch);
void ai_depthwise_conv2d_3x3_sgn_s8_rows(const ai_depthwise_conv2d_3x3_sgn_s8_params *p, ai_row_window w,
    const int8_t *input, const int32_t *packed, int8_t *output, void *scratch);
int32_t ai_depthwise_conv2d_3x3_sgn_s8_scratch_size(const ai_depthwise_conv2d_3x3_sgn_s8_params *p);

/* The same two kernels with channel groups of 2 instead of 4: half the scratch
 * (ai_depthwise_conv2d_3x3_g2_s8_scratch_size), the same access order with groups of 2
 * channels; chosen for the transposed walk of tall images (docs/kernels_conv.md). */
typedef ai_depthwise_conv2d_3x3_s8_params ai_depthwise_conv2d_3x3_g2_s8_params;
typedef ai_depthwise_conv2d_3x3_s8_params ai_depthwise_conv2d_3x3_g2_sgn_s8_params;
void ai_depthwise_conv2d_3x3_g2_s8(const ai_depthwise_conv2d_3x3_g2_s8_params *p,
                                   const int8_t *input, const int32_t *packed, int8_t *output,
                                   void *scratch);
void ai_depthwise_conv2d_3x3_g2_s8_rows(const ai_depthwise_conv2d_3x3_g2_s8_params *p, ai_row_window w,
    const int8_t *input, const int32_t *packed, int8_t *output, void *scratch);
int32_t ai_depthwise_conv2d_3x3_g2_s8_scratch_size(const ai_depthwise_conv2d_3x3_g2_s8_params *p);
void ai_depthwise_conv2d_3x3_g2_sgn_s8(const ai_depthwise_conv2d_3x3_g2_sgn_s8_params *p,
                                       const int8_t *input, const int32_t *packed, int8_t *output,
                                       void *scratch);
void ai_depthwise_conv2d_3x3_g2_sgn_s8_rows(const ai_depthwise_conv2d_3x3_g2_sgn_s8_params *p, ai_row_window w,
    const int8_t *input, const int32_t *packed, int8_t *output, void *scratch);
int32_t ai_depthwise_conv2d_3x3_g2_sgn_s8_scratch_size(
    const ai_depthwise_conv2d_3x3_g2_sgn_s8_params *p);

/* The same layer (same params and packed constants; plane_w, transpose 0, stage and rqd
 * ignored) computed on the HWC layout channel by channel: no scratch, no per-call set-up
 * beyond each channel's 10 constants; for short calls (stripe members, passes/stripes.py
 * `_narrow_scratch`; docs/kernels_conv.md "3x3 depthwise on HWC"). Access order (in-place
 * use): per batch, output rows in order; per row, output channels in order, each channel walked
 * two pixels at a time, a pair's input columns read before its two outputs are stored.
 * pad[1] <= 2. _sgn: the exact sign term, as ai_depthwise_conv2d_3x3_sgn_s8. */
typedef ai_depthwise_conv2d_3x3_s8_params ai_depthwise_conv2d_3x3_hwc_s8_params;
typedef ai_depthwise_conv2d_3x3_s8_params ai_depthwise_conv2d_3x3_hwc_sgn_s8_params;
void ai_depthwise_conv2d_3x3_hwc_s8(const ai_depthwise_conv2d_3x3_hwc_s8_params *p, const int8_t *input,
                                    const int32_t *packed, int8_t *output);
void ai_depthwise_conv2d_3x3_hwc_sgn_s8(const ai_depthwise_conv2d_3x3_hwc_sgn_s8_params *p,
                                        const int8_t *input, const int32_t *packed, int8_t *output);
/* The same on an input whose rows are not one image: rows[i] is input row i (i < in_h; batches
 * 1): a stripe's split ring (docs/stripes.md "Split rings"). */
void ai_depthwise_conv2d_3x3_hwc_rowp_s8(const ai_depthwise_conv2d_3x3_hwc_s8_params *p,
                                         const int8_t *const *rows, const int32_t *packed, int8_t *output);
void ai_depthwise_conv2d_3x3_hwc_sgn_rowp_s8(const ai_depthwise_conv2d_3x3_hwc_sgn_s8_params *p,
                                             const int8_t *const *rows, const int32_t *packed, int8_t *output);

/* DEPTHWISE_CONV_2D, any depth multiplier and kernel size; TFLite's 1HW(C*M) weights
 * as they are. out channel oc = ic * depth_mult + m. No scratch. */
typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t depth_mult;
  int32_t pad_value;
  int32_t out_offset;
  int32_t act_min, act_max;
} ai_depthwise_conv2d_dm_s8_params;

void ai_depthwise_conv2d_dm_s8(const ai_depthwise_conv2d_dm_s8_params *p, const int8_t *input,
                               const int8_t *weights, const int32_t *bias, const int32_t *mult,
                               const int32_t *shift, int8_t *output);

/* ---- float32 ----
 * out = clamp(sum over in-image taps (ky, kx, ic) of x * w, then + bias, act_min, act_max),
 * accumulated in TFLite's reference order. */
typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  float act_min, act_max;
} ai_conv2d_f32_params;

/* weights: OHWI as in TFLite. */
void ai_conv2d_f32(const ai_conv2d_f32_params *p, const float *input, const float *weights,
                   const float *bias, float *output);

typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t depth_mult;
  float act_min, act_max;
} ai_depthwise_conv2d_f32_params;

/* weights: 1HW(C*M) as in TFLite. */
void ai_depthwise_conv2d_f32(const ai_depthwise_conv2d_f32_params *p, const float *input,
                             const float *weights, const float *bias, float *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_CONV_H */
