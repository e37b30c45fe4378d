/* SVDF kernels (int8 with int16 state, float32): docs/kernels_svdf.md.
 *
 * Calling convention (stm32ai/passes/lower/__init__.py, svdf.py):
 *   void ai_svdf_<t>(const ai_svdf_<t>_params *p, input, weights_feature, weights_time, bias,
 *                    state, output);   (no scratch: the rank sums run per unit)
 * `state` is the model's variable tensor [batches][filters][memory] (TFLite's
 * [batches, memory * filters], filter-major): every run shifts it left by one step, writes
 * the newest feature column, and keeps it for the next run (the generated model zeroes it in
 * ai_create and ai_reset). filters = units * rank.
 *
 * Per run and batch row (TFLite Micro's EvalIntegerSvdfReference / EvalFloatSvdfReference):
 *   state[f][0..M-2] = state[f][1..M-1]
 *   state[f][M-1]    = feature(f)      int8: sat16(requant1(feature_bias[f] + sum wf[f][i]*x[i]))
 *   y[u]             = bias[u] + sum_{r<rank} sum_m wt[u*rank+r][m] * state[u*rank+r][m]
 *   out[u]           int8: sat8(requant2(y[u]) + out_zp);  float: clamp(y[u], act_min, act_max)
 * The int8 output has no activation clamp: TFLite's quantiser fuses RELU into the output
 * range, and both TFLM and LiteRT ignore the fused activation of an int8 SVDF.
 */
#ifndef AI_KERNELS_SVDF_H
#define AI_KERNELS_SVDF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* weights_feature int8 [filters][input_size]; weights_time int16 [filters][memory];
 * feature_bias int32 [filters] = -input_zp * row_sum(weights_feature) (wrapping);
 * bias int32 [units] (TFLite's bias, or zeros). */
typedef struct {
  int32_t batches, input_size, units, rank, memory;
  int32_t feature_mult, feature_shift; /* input * weights_feature -> state (int16) */
  int32_t out_mult, out_shift, out_zero_point; /* state * weights_time -> output (int8) */
} ai_svdf_s8_params;
void ai_svdf_s8(const ai_svdf_s8_params *p, const int8_t *input, const int8_t *weights_feature,
                const int16_t *weights_time, const int32_t *feature_bias, const int32_t *bias,
                int16_t *state, int8_t *output);

/* float32: weights_feature [filters][input_size], weights_time [filters][memory],
 * bias [units] or NULL. */
typedef struct {
  int32_t batches, input_size, units, rank, memory;
  float act_min, act_max;
} ai_svdf_f32_params;
void ai_svdf_f32(const ai_svdf_f32_params *p, const float *input, const float *weights_feature,
                 const float *weights_time, const float *bias, float *state, float *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_SVDF_H */
