/* LOGISTIC / TANH int16 (see ai_kernels_activations_s16.h). */
#include "ai_kernels_activations_s16.h"

#include "ai_kernels_lstm.h"

void ai_act_logistic_s16(const ai_act_logistic_s16_params *p, const int16_t *input, int16_t *output) {
  ai_sigmoid_s16(input, output, p->size, p->multiplier, p->shift);
}

void ai_act_tanh_s16(const ai_act_tanh_s16_params *p, const int16_t *input, int16_t *output) {
  ai_tanh_s16(input, output, p->size, p->multiplier, p->shift);
}
