/* Legacy uint8 FULLY_CONNECTED on shifted int8 input and int16 re-centred weights
 * (ai_kernels_fc_u8.h, docs/kernels_u8.md). No float, no malloc. */
#include "ai_kernels_fc_u8.h"

#include "ai_qmath.h"
#include "ai_qmath64.h"

void ai_fully_connected_u8(const ai_fully_connected_u8_params *p, const int8_t *input,
                           const int16_t *weights, const int32_t *bias, int8_t *output) {
  const int32_t K = p->in_features, N = p->out_features;
  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *x = input + (int32_t)b * K;
    for (int32_t o = 0; o < N; ++o) {
      const int16_t *w = weights + (int32_t)o * K;
      int32_t acc = bias[o];
      for (int32_t k = 0; k < K; ++k) {
        acc = ai_wmla(acc, x[k], w[k]); /* int32 wrap-around, like TFLite's accumulator */
      }
      int32_t v = ai_wadd(ai_requant64(acc, p->out_multiplier, 31 - p->out_shift), p->out_zero_point);
      v = v < p->act_min ? p->act_min : v;
      v = v > p->act_max ? p->act_max : v;
      *output++ = (int8_t)v;
    }
  }
}
