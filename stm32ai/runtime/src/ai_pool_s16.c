/* AVERAGE_POOL_2D / MAX_POOL_2D on int16 (see ai_kernels_pool.h). */
#include "ai_kernels_pool.h"

#include <stddef.h>

#include "ai_qmath64.h"

static void pool_s16(const ai_pool_s16_params *p, const int16_t *input, int16_t *output,
                     int average) {
  const int32_t ch = p->channels;
  int32_t b, oy, ox, c, y, x;
  for (b = 0; b < p->batches; ++b) {
    const int16_t *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)p->in_w * (size_t)ch;
    for (oy = 0; oy < p->out_h; ++oy) {
      const int32_t y0 = oy * p->stride_h - p->pad_h;
      const int32_t ys = y0 < 0 ? 0 : y0;
      const int32_t ye = y0 + p->filter_h > p->in_h ? p->in_h : y0 + p->filter_h;
      for (ox = 0; ox < p->out_w; ++ox) {
        const int32_t x0 = ox * p->stride_w - p->pad_w;
        const int32_t xs = x0 < 0 ? 0 : x0;
        const int32_t xe = x0 + p->filter_w > p->in_w ? p->in_w : x0 + p->filter_w;
        const int32_t count = (ye - ys) * (xe - xs);
        for (c = 0; c < ch; ++c) {
          int32_t acc = average ? 0 : INT16_MIN;
          for (y = ys; y < ye; ++y) {
            const int16_t *row = in_b + ((size_t)y * (size_t)p->in_w) * (size_t)ch + (size_t)c;
            for (x = xs; x < xe; ++x) {
              const int32_t v = row[(size_t)x * (size_t)ch];
              if (average) {
                acc += v;
              } else if (v > acc) {
                acc = v;
              }
            }
          }
          if (average && count > 0) { /* rounding half away from zero, as TFLite */
            acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
          }
          *output++ = ai_clamp_s16(acc, p->act_min, p->act_max);
        }
      }
    }
  }
}

void ai_avgpool_s16(const ai_avgpool_s16_params *p, const int16_t *input, int16_t *output) {
  pool_s16(p, input, output, 1);
}

void ai_maxpool_s16(const ai_maxpool_s16_params *p, const int16_t *input, int16_t *output) {
  pool_s16(p, input, output, 0);
}
