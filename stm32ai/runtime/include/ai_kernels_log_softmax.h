/* LOG_SOFTMAX over the last axis: int8 -> int8 and float32 (ai_log_softmax.c).
 *
 * The lowering (stm32ai/passes/lower/log_softmax.py) computes every parameter at generate
 * time; see docs/kernels_log_softmax.md. Field names of the parameter structs are the
 * `attrs` keys of the lowered op. Both kernels may run in place (output aliasing input).
 */
#ifndef AI_KERNELS_LOG_SOFTMAX_H
#define AI_KERNELS_LOG_SOFTMAX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* int8: TFLite Micro's reference LogSoftmax, bit for bit. Output scale 16/256, zero
 * point 127. input_multiplier/input_left_shift rescale an input difference into Q5.26;
 * reverse_multiplier/reverse_shift (shift <= 0) map a Q5.26 value back to input units;
 * diff_min (<= 0) is the smallest difference that enters the sum of exponentials. */
typedef struct {
  int32_t outer, depth;
  int32_t input_multiplier, input_left_shift;
  int32_t reverse_multiplier, reverse_shift;
  int32_t diff_min;
} ai_log_softmax_s8_params;
void ai_log_softmax_s8(const ai_log_softmax_s8_params *p, const int8_t *input, int8_t *output);

/* float32: y = (x - max) - logf(sum(expf(x - max))), per row. */
typedef struct {
  int32_t outer, depth;
} ai_log_softmax_f32_params;
void ai_log_softmax_f32(const ai_log_softmax_f32_params *p, const float *input, float *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_LOG_SOFTMAX_H */
