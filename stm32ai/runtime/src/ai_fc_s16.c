/* FULLY_CONNECTED 16x8 (see ai_kernels_fc_s16.h). */
#include "ai_kernels_fc_s16.h"

#include <stddef.h>

#include "ai_dot_s16.h"

void ai_fully_connected_s16(const ai_fully_connected_s16_params *p, const int16_t *input,
                            const int8_t *weights, const int64_t *bias, const int32_t *rmult,
                            const int32_t *rshift, int16_t *output) {
  const int32_t k = p->n_in;
  int32_t b;
  for (b = 0; b < p->batches; ++b) {
    const int16_t *x = input + (size_t)b * (size_t)k;
    output = ai_rows_s16(x, weights, k, p->n_out, bias, rmult, rshift, p->acc32, p->act_min,
                         p->act_max, output);
  }
}
