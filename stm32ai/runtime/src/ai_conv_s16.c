/* CONV_2D 16x8 (see ai_kernels_conv_s16.h). */
#include "ai_kernels_conv_s16.h"

#include <stddef.h>
#include <string.h>

#include "ai_dot_s16.h"

int32_t ai_conv2d_s16_scratch_size(const ai_conv2d_s16_params *p) {
  return (p->k_h * p->k_w * p->in_c * (int32_t)sizeof(int16_t) + 3) / 4 * 4;
}

/* The window of output pixel (oy, ox) as one column of k_h * k_w * in_c values (taps
 * outside the image are 0: with zero point 0 they add nothing, as TFLite's skipped taps). */
static void gather(const ai_conv2d_s16_params *p, const int16_t *in_b, int32_t y0, int32_t x0,
                   int16_t *col) {
  const size_t run = (size_t)p->in_c;
  int32_t ky, kx;
  for (ky = 0; ky < p->k_h; ++ky) {
    const int32_t iy = y0 + ky * p->dilation[0];
    for (kx = 0; kx < p->k_w; ++kx) {
      const int32_t ix = x0 + kx * p->dilation[1];
      if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w) {
        memset(col, 0, run * sizeof *col);
      } else {
        memcpy(col, in_b + ((size_t)iy * (size_t)p->in_w + (size_t)ix) * run, run * sizeof *col);
      }
      col += run;
    }
  }
}

void ai_conv2d_s16(const ai_conv2d_s16_params *p, const int16_t *input, const int8_t *weights,
                   const int64_t *bias, const int32_t *rmult, const int32_t *rshift,
                   int16_t *output, void *scratch) {
  const int32_t k = p->k_h * p->k_w * p->in_c;
  /* a 1x1 kernel without padding reads its column straight from the input */
  const int32_t direct = p->k_h == 1 && p->k_w == 1 && p->pad[0] == 0 && p->pad[1] == 0;
  int16_t *col = (int16_t *)scratch;
  int32_t b, oy, ox;
  for (b = 0; b < p->batches; ++b) {
    const int16_t *in_b =
        input + (size_t)b * (size_t)p->in_h * (size_t)p->in_w * (size_t)p->in_c;
    for (oy = 0; oy < p->out_h; ++oy) {
      const int32_t y0 = oy * p->stride[0] - p->pad[0];
      for (ox = 0; ox < p->out_w; ++ox) {
        const int32_t x0 = ox * p->stride[1] - p->pad[1];
        const int16_t *x = col;
        if (direct) {
          x = in_b + ((size_t)y0 * (size_t)p->in_w + (size_t)x0) * (size_t)p->in_c;
        } else {
          gather(p, in_b, y0, x0, col);
        }
        output = ai_rows_s16(x, weights, k, p->out_c, bias, rmult, rshift, p->acc32,
                             p->act_min, p->act_max, output);
      }
    }
  }
}
