/* int8 CONV_2D 3x3, stride 1, dilation 1, by exact integer Winograd F(2x2, 3x3)
 * (docs/kernels_conv_wino.md; lowering: stm32ai/passes/lower/conv_wino.py).
 *
 * Per 2x2 output tile: V = B^T d B per input channel (d = x - pad_value, 0 outside the
 * image; entries 0/+-1, |V| <= 1020, int16), then per output channel and each of the 16
 * transformed positions M = sum_ic U'[oc][pos][ic] * V[pos][ic] (SMLAD pairs, int32), with
 * U' = G' g G'^T, G' = 2G (entries 0, +-1, +-2), laid out at generate time as int16
 * [out_c][16][in_cp] (in_cp = in_c rounded up to even, zero-filled). A^T M A is exactly 4x
 * TFLite's accumulator without bias, so >> 2 is exact; then + bias and the conv2d_s8
 * requantisation (rq: 4 int32 per output channel, {bias, multiplier, rs, kf} when rq_fold,
 * else {bias, multiplier, shift, 0}). The lowering proved every int32 sum cannot overflow.
 * Scratch: ai_conv2d_wino_s8_scratch_size() bytes (a pad pixel and one block of `tiles` tiles'
 * transformed input). Access order (one step per block, modelled for the planner by
 * passes/lower/overlap.py): bands of 2 output rows top to bottom, in each band blocks of
 * `tiles` 2x2 tiles left to right; a block's input window (4 rows, 2 * tiles + 2 columns) is
 * transformed into scratch before any of its outputs is stored, so the output may overlap
 * the input at an offset where no byte is stored before its last read (about one row and a
 * pixel below it). */
#ifndef AI_KERNELS_CONV_WINO_H
#define AI_KERNELS_CONV_WINO_H

#include <stdint.h>

#include "ai_kernels_conv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t pad_value;  /* input zero point */
  int32_t out_offset; /* output zero point (rq_fold = 0 only) */
  int32_t act_min, act_max;
  int32_t rq_fold;    /* 1: rq holds rq_fold constants */
  int32_t tiles;      /* 3x3: tiles per block, 4 or 8 (0: 8); the 1-D kernel ignores it */
} ai_conv2d_wino_s8_params;

void ai_conv2d_wino_s8(const ai_conv2d_wino_s8_params *p, const int8_t *input, const int16_t *weights,
                       const int32_t *rq, int8_t *output, void *scratch);
int32_t ai_conv2d_wino_s8_scratch_size(const ai_conv2d_wino_s8_params *p);

/* int8 CONV_2D 1x3 or 3x1, stride 1, dilation 1, by exact integer Winograd F(2, 3) along the
 * kernel's axis (k_w == 3: along the width). Per tile of 2 outputs: V = B^T d (4 values per
 * input channel, |V| <= 510), M[pos] = sum_ic U'[oc][pos][ic] V[pos][ic] with U' = G' g laid
 * out as int16 [out_c][4][in_cp]; A^T M is exactly 2x TFLite's accumulator without bias, so
 * >> 1 is exact; rq and the output stage as above. Scratch: ai_conv2d_wino1d_s8_scratch_size()
 * bytes (a pad pixel and a block of up to 16 tiles' V). Not in-place. */
typedef ai_conv2d_wino_s8_params ai_conv2d_wino1d_s8_params;

void ai_conv2d_wino1d_s8(const ai_conv2d_wino1d_s8_params *p, const int8_t *input, const int16_t *weights,
                         const int32_t *rq, int8_t *output, void *scratch);
int32_t ai_conv2d_wino1d_s8_scratch_size(const ai_conv2d_wino1d_s8_params *p);

#ifdef __cplusplus
}
#endif
#endif
