/* LOGISTIC / TANH / LEAKY_RELU int16 (see ai_kernels_activations_s16.h). */
#include "ai_kernels_activations_s16.h"

#include "ai_kernels_lstm.h"
#include "ai_qmath.h"

void ai_act_logistic_s16(const ai_act_logistic_s16_params *p, const int16_t *input, int16_t *output) {
  ai_sigmoid_s16(input, output, p->size, p->multiplier, p->shift);
}

void ai_act_tanh_s16(const ai_act_tanh_s16_params *p, const int16_t *input, int16_t *output) {
  ai_tanh_s16(input, output, p->size, p->multiplier, p->shift);
}

/* |q - in_zp| <= 65535; the generator refuses multipliers whose left shift would overflow int32
 * (TFLite: undefined), so ai_requant is exact here. In place: element i read before written. */
void ai_leaky_relu_s16(const ai_leaky_relu_s16_params *p, const int16_t *input, int16_t *output) {
  for (int32_t i = 0; i < p->size; ++i) {
    const int32_t x = (int32_t)input[i] + p->input_offset;
    int32_t r;
    if (x >= 0) {
      r = ai_requant(x, p->multiplier_identity, p->shift_identity);
    } else {
      /* |r| <= |x| << shift < 2^31 (checked at generate time): the negation cannot overflow */
      r = ai_requant(x, p->multiplier_alpha, p->shift_alpha);
      r = p->negate_alpha ? -r : r;
    }
    const int32_t v = r + p->output_offset;
    output[i] = (int16_t)AI_CLAMP(v, -32768, 32767);
  }
}
