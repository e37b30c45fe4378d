/* Elementwise activation kernels, int8 and float32.
 *
 * RELU, RELU6, RELU_N1_TO_1, LEAKY_RELU, PRELU, LOGISTIC, TANH, HARD_SWISH (and int8 -> int8
 * QUANTIZE through ai_lut8; float QUANTIZE/DEQUANTIZE: ai_kernels_quantize.h). The lowering
 * (stm32ai/passes/lower/activations.py, quantize.py) computes
 * every parameter, and for 8-bit unary ops the whole 256-entry output table, at generate
 * time; see docs/kernels_activations.md. Field names of the parameter structs are the `attrs`
 * keys of the lowered op.
 *
 * All kernels run in place (output == input allowed). No alignment is required for int8 data; float data
 * must be 4-byte aligned (the planner guarantees it).
 */
#ifndef AI_KERNELS_ACTIVATIONS_H
#define AI_KERNELS_ACTIVATIONS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 8-bit unary ops (int8 or uint8 in and out) ----
 * output[i] = table[(uint8_t)input[i]]: the table holds the output byte for every input
 * byte (index = raw byte, so int8 value v is at v & 0xFF). Used for int8 RELU, LEAKY_RELU,
 * LOGISTIC, TANH, HARD_SWISH, RELU_N1_TO_1 and 8-bit -> 8-bit QUANTIZE. */
typedef struct {
  int32_t size;
} ai_lut8_params;

void ai_lut8(const ai_lut8_params *p, const uint8_t *input, const uint8_t *table,
             uint8_t *output);

/* output[i] = min(max(input[i], lo), hi): int8 activations whose table is a clamp (RELU6,
 * RELU with equal input/output quantisation). Four lanes per step with SSUB8/SEL where
 * the core has the DSP extension. */
typedef struct {
  int32_t size;
  int32_t lo, hi;
} ai_clamp_s8_params;

void ai_clamp_s8(const ai_clamp_s8_params *p, const int8_t *input, int8_t *output);

/* PRELU int8: x = input + input_offset;
 *   x >= 0: output = pos_table[(uint8_t)input]   (TFLM's clamp(requant(x, m1, s1) + zp_out),
 *                                                  tabulated at generate time)
 *   x <  0: output = clamp(requant(x * (alpha + alpha_offset), mult_neg, shift_neg)
 *                          + output_offset, -128, 127).
 * The tensors are seen as 4-D `dims` (row-major); the alpha element for index (i0..i3) is
 * alpha[sum(ik * alpha_strides[k])] (stride 0 on broadcast dims; alpha_strides[3] is 0 or 1). */
typedef struct {
  int32_t dims[4];
  int32_t alpha_strides[4];
  int32_t input_offset, alpha_offset, output_offset;
  int32_t mult_neg, shift_neg;
} ai_prelu_s8_params;

void ai_prelu_s8(const ai_prelu_s8_params *p, const int8_t *input, const int8_t *alpha,
                 const int8_t *pos_table, int8_t *output);

/* ---- float32 ---- */

/* RELU (lo 0, hi +inf), RELU6 (0, 6), RELU_N1_TO_1 (-1, 1). NaN passes through. */
typedef struct {
  int32_t size;
  float lo, hi;
} ai_clamp_f32_params;

void ai_clamp_f32(const ai_clamp_f32_params *p, const float *input, float *output);

/* x > 0 ? x : alpha * x */
typedef struct {
  int32_t size;
  float alpha;
} ai_leaky_relu_f32_params;

void ai_leaky_relu_f32(const ai_leaky_relu_f32_params *p, const float *input, float *output);

/* x >= 0 ? x : alpha * x, alpha broadcast as for ai_prelu_s8. */
typedef struct {
  int32_t dims[4];
  int32_t alpha_strides[4];
} ai_prelu_f32_params;

void ai_prelu_f32(const ai_prelu_f32_params *p, const float *input, const float *alpha,
                  float *output);

/* 1 / (1 + exp(-x)) with TFLite's cut-offs (1 above 16.619..., exp(x) below -9). */
typedef struct {
  int32_t size;
} ai_logistic_f32_params;

void ai_logistic_f32(const ai_logistic_f32_params *p, const float *input, float *output);

typedef struct {
  int32_t size;
} ai_tanh_f32_params;

void ai_tanh_f32(const ai_tanh_f32_params *p, const float *input, float *output);

/* x * min(6, max(0, x + 3)) / 6 */
typedef struct {
  int32_t size;
} ai_hard_swish_f32_params;

void ai_hard_swish_f32(const ai_hard_swish_f32_params *p, const float *input, float *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_ACTIVATIONS_H */
