/* MEAN on int16 (see ai_kernels_reduce_s16.h). */
#include "ai_kernels_reduce_s16.h"

#include "ai_qmath.h"

int32_t ai_reduce_mean_s16_scratch_size(const ai_reduce_mean_s16_params *p) {
  return p->out_size * (int32_t)sizeof(int32_t);
}

void ai_reduce_mean_s16(const ai_reduce_mean_s16_params *p, const int16_t *input, int16_t *output,
                        void *scratch) {
  int32_t *acc = (int32_t *)scratch;
  int32_t idx[AI_MAX_DIMS] = {0, 0, 0, 0, 0, 0};
  const int32_t last = p->ndim - 1;
  int32_t i, d, o = 0;
  for (i = 0; i < p->out_size; ++i) {
    acc[i] = 0;
  }
  for (;;) {
    /* the innermost dimension in one run */
    const int32_t n = p->shape[last], os = p->ostride[last];
    for (i = 0; i < n; ++i) {
      acc[o + i * os] += input[i];
    }
    input += n;
    /* odometer over the outer dimensions; o follows the output position */
    for (d = last - 1; d >= 0; --d) {
      o += p->ostride[d];
      if (++idx[d] < p->shape[d]) {
        break;
      }
      o -= p->ostride[d] * p->shape[d];
      idx[d] = 0;
    }
    if (d < 0) {
      break;
    }
  }
  for (i = 0; i < p->out_size; ++i) {
    const int32_t v = ai_requant(acc[i] + p->bias, p->multiplier, p->shift) + p->out_offset;
    output[i] = (int16_t)AI_CLAMP(v, p->act_min, p->act_max);
  }
}
