/* TRANSPOSE_CONV, int8 / int16x8 / float32 (stm32ai/passes/lower/transpose_conv.py).
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * Parameter fields are the lowering's attrs, all computed at generate time.
 * Integer kernels are bit-exact with TFLite Micro's reference kernels; float adds in
 * TFLite's reference order. Details: docs/kernels_transpose_conv.md.
 *
 * Alignment: int32/int64 tables (bias, multipliers) and scratch must be naturally aligned.
 */
#ifndef AI_KERNELS_TRANSPOSE_CONV_H
#define AI_KERNELS_TRANSPOSE_CONV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- TRANSPOSE_CONV (NHWC) -------------------------------------------------------------
 * out[b, oy, ox, oc] = sum over (iy, ix, ky, kx) with oy = iy*stride[0] - pad[0] + ky,
 * ox = ix*stride[1] - pad[1] + kx, of x[b, iy, ix, :] . w[oc, ky, kx, :], plus bias[oc].
 * Weights are TFLite's OHWI. Each output is gathered (no scatter buffer), visiting its
 * inputs in increasing (iy, ix, ic) order: TFLite's reference summation order. */
#define AI_TCONV_GEOMETRY_FIELDS                                                        \
  int32_t batches;                                                                      \
  int32_t in_h, in_w, in_c;                                                             \
  int32_t out_h, out_w, out_c;                                                          \
  int32_t k_h, k_w;                                                                     \
  int32_t stride[2];                                                                    \
  int32_t pad[2];

/* int8: acc = bias[oc] + sum (x - in_zp) * w (int32), computed as sum x * w plus, per
 * in-range tap, tap_offset[oc][ky][kx] = -in_zp * sum_ic w[oc][ky][kx][ic] (a table made
 * at generate time, int32 [out_c][k_h][k_w]; bias may be NULL);
 * out = clamp(requant(acc, mult[oc], shift[oc]) + out_offset, act_min, act_max). */
typedef struct {
  AI_TCONV_GEOMETRY_FIELDS
  int32_t out_offset; /* output zero point */
  int32_t act_min, act_max;
} ai_transpose_conv_s8_params;
void ai_transpose_conv_s8(const ai_transpose_conv_s8_params *p, const int8_t *input,
                          const int8_t *weights, const int32_t *tap_offset, const int32_t *bias,
                          const int32_t *mult, const int32_t *shift, int8_t *output);

/* int16 activations x int8 weights (zero points 0): acc = bias[oc] + sum x * w (int64);
 * weights OHWI with each full group of 4 input channels stored as (w0, w2, w1, w3);
 * out = clamp((int32)((acc * rmult[oc] + 2^(rshift[oc]-1)) >> rshift[oc]), act_min, act_max)
 * -- TFLite's 64-bit MultiplyByQuantizedMultiplier with the multiplier reduced to 16 bits
 * (rmult, rshift precomputed). */
typedef struct {
  AI_TCONV_GEOMETRY_FIELDS
  int32_t act_min, act_max;
} ai_transpose_conv_s16_params;
void ai_transpose_conv_s16(const ai_transpose_conv_s16_params *p, const int16_t *input,
                           const int8_t *weights, const int64_t *bias, const int32_t *rmult,
                           const int32_t *rshift, int16_t *output);

/* float32: out = clamp((0 + sum x * w) + bias[oc], act_min, act_max). */
typedef struct {
  AI_TCONV_GEOMETRY_FIELDS
  float act_min, act_max;
} ai_transpose_conv_f32_params;
void ai_transpose_conv_f32(const ai_transpose_conv_f32_params *p, const float *input,
                           const float *weights, const float *bias, float *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_TRANSPOSE_CONV_H */
