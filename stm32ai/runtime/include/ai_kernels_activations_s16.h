/* LOGISTIC / TANH (and LEAKY_RELU, below) int16 -> int16 (zero points 0, output scale 2^-15), bit-exact with
 * TFLite's int16 Logistic/Tanh: the input is rescaled to the table's domain,
 * v = (x * multiplier + round) >> shift (multiplier and shift from TFLite's prepare, the
 * power-of-two input scales folded in by the generator), then TFLite's 256-entry sigmoid
 * table is interpolated (tanh(x) = 2 sigmoid(2x) - 1). The table and the per-element code
 * are the LSTM's (ai_sigmoid_s16 / ai_tanh_s16, ai_kernels_lstm.h).
 * Generator: stm32ai/passes/lower/s16.py; docs/kernels_s16.md. */
#ifndef AI_KERNELS_ACTIVATIONS_S16_H
#define AI_KERNELS_ACTIVATIONS_S16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int32_t size, multiplier, shift;
} ai_act_logistic_s16_params;
typedef ai_act_logistic_s16_params ai_act_tanh_s16_params;
void ai_act_logistic_s16(const ai_act_logistic_s16_params *p, const int16_t *input, int16_t *output);
void ai_act_tanh_s16(const ai_act_tanh_s16_params *p, const int16_t *input, int16_t *output);

/* LEAKY_RELU int16 -> int16, TFLite's QuantizeLeakyRelu<int16_t>: x = q - in_zp,
 * y = clamp(out_zp + requant(x, x >= 0 ? identity : alpha multiplier)); a negative alpha is
 * |alpha|'s multiplier with the product negated (negate_alpha 1), what TFLM computes */
typedef struct {
  int32_t size, input_offset, output_offset;
  int32_t multiplier_identity, shift_identity, multiplier_alpha, shift_alpha, negate_alpha;
} ai_leaky_relu_s16_params;
void ai_leaky_relu_s16(const ai_leaky_relu_s16_params *p, const int16_t *input, int16_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_ACTIVATIONS_S16_H */
