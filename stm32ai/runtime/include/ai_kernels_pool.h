/* AVERAGE_POOL_2D and MAX_POOL_2D, int8 and float32 (stm32ai/passes/lower/pool.py) and int16
 * (stm32ai/passes/lower/s16.py).
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * Parameter fields are the lowering's attrs, all computed at generate time.
 * int8 is bit-exact with TFLite Micro's reference kernels. Details: docs/kernels_pool.md.
 */
#ifndef AI_KERNELS_POOL_H
#define AI_KERNELS_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "ai_row_window.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- AVERAGE_POOL_2D / MAX_POOL_2D (NHWC) -------------------------------------------- */

/* int8 and int16: the activation bounds are stored values (int32) */
typedef struct {
  int32_t batches, in_h, in_w, channels, out_h, out_w;
  int32_t filter_h, filter_w, stride_h, stride_w, pad_h, pad_w;
  int32_t act_min, act_max;
} ai_pool_params;
typedef struct {
  int32_t batches, in_h, in_w, channels, out_h, out_w;
  int32_t filter_h, filter_w, stride_h, stride_w, pad_h, pad_w;
  float act_min, act_max;
} ai_pool_f32_params;
typedef ai_pool_params ai_pool_s8_params;
typedef ai_pool_params ai_avgpool_s8_params;
typedef ai_pool_params ai_maxpool_s8_params;
typedef ai_pool_f32_params ai_avgpool_f32_params;
typedef ai_pool_f32_params ai_maxpool_f32_params;
void ai_avgpool_s8(const ai_avgpool_s8_params *p, const int8_t *input, int8_t *output);
void ai_maxpool_s8(const ai_maxpool_s8_params *p, const int8_t *input, int8_t *output);
/* row-window entries (ai_row_window.h; pad_top is pad_h's window): the entries above are the full window */
void ai_avgpool_s8_rows(const ai_avgpool_s8_params *p, ai_row_window w, const int8_t *input, int8_t *output);
void ai_maxpool_s8_rows(const ai_maxpool_s8_params *p, ai_row_window w, const int8_t *input, int8_t *output);
void ai_avgpool_f32(const ai_avgpool_f32_params *p, const float *input, float *output);
void ai_maxpool_f32(const ai_maxpool_f32_params *p, const float *input, float *output);

/* Global int8 AVERAGE_POOL_2D (filter = the whole input, VALID, 1x1 output) as running sums,
 * for a pool at the end of a row-streamed stripe (docs/stripes.md): the stripe calls
 * _accumulate on each band of input rows as it is produced, acc[c] += the band's sum of
 * channel c, then _finish once, out[c] = clamp(round(acc[c] / count)) with TFLite Micro's
 * int8 AveragePool rounding ((acc + count/2) / count when acc > 0, else (acc - count/2) /
 * count, C truncating division) — bit-exact with ai_avgpool_s8 on the whole image.
 * acc: `channels` int32 (4 * channels bytes of the stripe's scratch, 4-byte aligned), zeroed
 * by the caller before the first band. count = in_h * in_w; the lowering keeps it <= 2^23 so
 * |acc| <= 128 * count (and acc -+ count / 2) fits int32. */
typedef struct {
  int32_t in_w, channels, count;
  int32_t act_min, act_max;
} ai_avgpool_rows_s8_params;
void ai_avgpool_rows_s8_accumulate(const ai_avgpool_rows_s8_params *p, const int8_t *rows,
                                   int32_t n_rows, int32_t *acc);
void ai_avgpool_rows_s8_finish(const ai_avgpool_rows_s8_params *p, const int32_t *acc,
                               int8_t *out);
/* Bytes of running sums a stripe's scratch must hold for this pool: 4 * channels. */
int32_t ai_avgpool_rows_s8_acc_size(const ai_avgpool_rows_s8_params *p);
/* The same with `channels` int16 sums (2 * channels bytes, 2-byte aligned), for count <= 255
 * only (|acc| <= 128 * 255 fits int16; the stripe pass picks them then). */
void ai_avgpool_rows_s8_accumulate16(const ai_avgpool_rows_s8_params *p, const int8_t *rows,
                                     int32_t n_rows, int16_t *acc);
void ai_avgpool_rows_s8_finish16(const ai_avgpool_rows_s8_params *p, const int16_t *acc,
                                 int8_t *out);

/* int16 (input and output share the quantisation; ai_pool_s16.c). Average: int32 sum of the
 * in-image taps, divided by their count rounding half away from zero (TFLite's reference
 * AveragePool), clamped; the generator bounds the window to 65535 taps so the sum fits
 * int32. Max: the largest in-image tap, clamped. Details: docs/kernels_s16.md. */
typedef ai_pool_params ai_pool_s16_params;
typedef ai_pool_params ai_avgpool_s16_params;
typedef ai_pool_params ai_maxpool_s16_params;
void ai_avgpool_s16(const ai_avgpool_s16_params *p, const int16_t *input, int16_t *output);
void ai_maxpool_s16(const ai_maxpool_s16_params *p, const int16_t *input, int16_t *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_POOL_H */
