/* RESIZE_BILINEAR (stm32ai/passes/lower/resize.py; RESIZE_NEAREST_NEIGHBOR is a movement copy).
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * Parameter fields are the lowering's attrs, all computed at generate time.
 * int8 is bit-exact with TFLite Micro's reference kernel. Details: docs/kernels_resize.md.
 */
#ifndef AI_KERNELS_RESIZE_H
#define AI_KERNELS_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- RESIZE_BILINEAR (NHWC) ----
 * `table` holds 3 int32 per output row then 3 per output column:
 *   rows:    y0 * in_w * channels, y1 * in_w * channels, wy   (element offsets)
 *   columns: x0 * channels,        x1 * channels,        wx
 * int8 (TFLite's integer ResizeBilinearInteger): wy, wx are the 10-bit fractional
 * positions (input_pos - 1024 * lower); the four weights are products of (1024 - w) and w,
 * the sum is rounded half away from zero by 2^20 and truncated to int8.
 * float32: `frac` holds dy per output row then dx per output column (table's w unused),
 * out = a*(1-dy)*(1-dx) + b*dy*(1-dx) + c*(1-dy)*dx + d*dy*dx in the reference's order. */
typedef struct {
  int32_t batches;
  int32_t in_h, in_w;
  int32_t out_h, out_w;
  int32_t channels;
} ai_resize_bilinear_params;

typedef ai_resize_bilinear_params ai_resize_bilinear_s8_params;
typedef ai_resize_bilinear_params ai_resize_bilinear_f32_params;

void ai_resize_bilinear_s8(const ai_resize_bilinear_s8_params *p, const int8_t *input,
                           const int32_t *table, int8_t *output);
void ai_resize_bilinear_f32(const ai_resize_bilinear_f32_params *p, const float *input,
                            const int32_t *table, const float *frac, float *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_RESIZE_H */
