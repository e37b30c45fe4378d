/* Legacy uint8 AVERAGE_POOL_2D on shifted int8 activations (ai_kernels_pool_u8.h). */
#include "ai_kernels_pool_u8.h"

void ai_avgpool_u8(const ai_avgpool_u8_params *p, const int8_t *input, int8_t *output) {
  const int32_t c_n = p->channels;
  const int32_t row = p->in_w * c_n;
  for (int32_t b = 0; b < p->batches; b++) {
    const int8_t *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)row;
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const int32_t iy = oy * p->stride_h - p->pad_h;
      const int32_t y0 = iy < 0 ? 0 : iy;
      const int32_t y1 = iy + p->filter_h < p->in_h ? iy + p->filter_h : p->in_h;
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const int32_t ix = ox * p->stride_w - p->pad_w;
        const int32_t x0 = ix < 0 ? 0 : ix;
        const int32_t x1 = ix + p->filter_w < p->in_w ? ix + p->filter_w : p->in_w;
        const int32_t count = (y1 - y0) * (x1 - x0);
        for (int32_t c = 0; c < c_n; c++) {
          int32_t acc = 0; /* sum of uint8 codes: >= 0 */
          for (int32_t y = y0; y < y1; y++) {
            const int8_t *src = in_b + (size_t)y * (size_t)row + (size_t)x0 * (size_t)c_n + c;
            for (int32_t x = x0; x < x1; x++, src += c_n) {
              acc += (int32_t)*src + 128;
            }
          }
          /* count >= 1: the lowering refuses windows with no in-image tap */
          int32_t v = (acc + count / 2) / count - 128;
          v = v < p->act_min ? p->act_min : v;
          v = v > p->act_max ? p->act_max : v;
          *output++ = (int8_t)v;
        }
      }
    }
  }
}
