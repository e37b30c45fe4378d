/* Hybrid (dynamic-range) kernels: float32 activations, int8 weights.
 *
 * Semantics are those of LiteRT's reference hybrid path (docs/kernels_conv.md, "Hybrid"):
 * per inference and per batch the float input is quantised to int8 on the fly, the dot
 * products are int8 x int8 -> int32, and the result goes back to float with the input's
 * and the filter's scales, then + float bias and the fused-activation clamp.
 *
 * Two input quantisations, chosen by the lowering exactly as LiteRT chooses them:
 *   symmetric  (per-tensor filter): q = round(x * 127 / max|x|), zero point 0,
 *              y = (float)acc * (input_scale * filter_scale) + bias
 *   asymmetric (per-channel filter): q = round(offset + x / scale) with TFLite's nudged
 *              zero point, y = ((float)acc * filter_scale[oc]) * input_scale + bias,
 *              acc = sum w * (q - offset).
 * An all-zero input quantises to all zeros with scale 1 (and offset 0).
 *
 * Scratch (size from ai_<kernel>_scratch_size, 4-byte aligned): the quantised input of one
 * batch, then one int8 im2col column.
 */
#ifndef AI_KERNELS_HYBRID_H
#define AI_KERNELS_HYBRID_H

#include <stdint.h>

#include "ai_kernels_conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TFLite's SymmetricQuantizeFloats: returns the scaling factor (max|x| / 127, 1 for an
 * all-zero input) and writes q[i] in [-127, 127]. */
float ai_hybrid_quantize_sym(const float *x, int32_t n, int8_t *q);

/* TFLite's AsymmetricQuantizeFloats: returns the scaling factor ((float)(max(0,max x) -
 * min(0,min x)) / 255, 1 for an all-zero input), writes q[i] in [-128, 127] and the zero
 * point to *offset. */
float ai_hybrid_quantize_asym(const float *x, int32_t n, int8_t *q, int32_t *offset);

/* CONV_2D, float input/output, int8 OHWI filter (as in TFLite).
 * w_scale: out_c filter scales (per_channel = 0: only w_scale[0] is read);
 * w_sum:   per output channel sum of its filter (per_channel = 1; NULL otherwise);
 * bias:    out_c floats. */
typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t per_channel; /* 1: asymmetric input quantisation, per-channel scales */
  float act_min, act_max;
} ai_conv2d_hybrid_params;

void ai_conv2d_hybrid(const ai_conv2d_hybrid_params *p, const float *input, const int8_t *weights,
                      const float *w_scale, const int32_t *w_sum, const float *bias, float *output,
                      void *scratch);
int32_t ai_conv2d_hybrid_scratch_size(const ai_conv2d_hybrid_params *p);

/* DEPTHWISE_CONV_2D, float input/output, int8 filter [1, k_h, k_w, out_c] (as in TFLite),
 * LiteRT's EvalHybridPerChannel: per batch the input is quantised asymmetrically
 * (ai_hybrid_quantize_asym), then per output channel oc = ic * depth_mult + m
 *   acc = sum over in-image taps of w * (q - offset)   (taps outside the image are skipped)
 *   y   = (float)acc * (w_scale[oc] * input_scale) [+ bias[oc]], clamped.
 * w_scale: out_c filter scales (per channel; LiteRT runs no per-tensor hybrid depthwise);
 * bias:    out_c floats or NULL.
 * Scratch: the quantised input of one batch, align4(in_h * in_w * in_c) bytes, then out_c
 * int32 accumulators. */
typedef struct {
  AI_CONV_GEOMETRY_FIELDS
  int32_t depth_mult;
  float act_min, act_max;
} ai_depthwise_conv2d_hybrid_params;

void ai_depthwise_conv2d_hybrid(const ai_depthwise_conv2d_hybrid_params *p, const float *input,
                                const int8_t *weights, const float *w_scale, const float *bias,
                                float *output, void *scratch);
int32_t ai_depthwise_conv2d_hybrid_scratch_size(const ai_depthwise_conv2d_hybrid_params *p);

/* FULLY_CONNECTED, float input/output, int8 weights [out_features, in_features] (as in
 * TFLite), LiteRT's EvalHybridDense arithmetic: per batch (row of in_features inputs) the
 * input is quantised (asymmetric = 1: TFLite's AsymmetricQuantizeFloats, the FC option
 * asymmetric_quantize_inputs; 0: SymmetricQuantizeFloats), then
 *   y[o] = bias[o] (or 0);  y[o] += (float)acc * (input_scale * w_scale[o]);  clamp
 * with acc = sum w * q - offset * w_sum[o] (int32, wrapping). An input that is zero in
 * every batch gives the clamped bias.
 * w_scale: out_features filter scales (a per-tensor scale repeated);
 * w_sum:   per output row sum of its weights (asymmetric = 1; NULL otherwise);
 * bias:    out_features floats or NULL.
 * Scratch: the quantised input of one batch, align4(in_features) bytes. */
typedef struct {
  int32_t batches, in_features, out_features;
  int32_t asymmetric;
  float act_min, act_max;
} ai_fully_connected_hybrid_params;

void ai_fully_connected_hybrid(const ai_fully_connected_hybrid_params *p, const float *input,
                               const int8_t *weights, const float *w_scale, const int32_t *w_sum,
                               const float *bias, float *output, void *scratch);
int32_t ai_fully_connected_hybrid_scratch_size(const ai_fully_connected_hybrid_params *p);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_HYBRID_H */
