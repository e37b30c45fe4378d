/* Legacy uint8 DEPTHWISE_CONV_2D on shifted int8 activations and int16 re-centred weights
 * (ai_kernels_conv_dw_u8.h, docs/kernels_u8.md). No float, no malloc. */
#include "ai_kernels_conv_dw_u8.h"

#include "ai_qmath.h"

void ai_depthwise_conv2d_u8(const ai_depthwise_conv2d_u8_params *p, const int8_t *input,
                            const int16_t *weights, const int32_t *bias, const int32_t *mult,
                            const int32_t *shift, int8_t *output) {
  const int32_t C = p->in_c, M = p->depth_mult, OC = p->out_c;
  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *in = input + (int32_t)b * p->in_h * p->in_w * C;
    int8_t *out = output + (int32_t)b * p->out_h * p->out_w * OC;
    for (int32_t oy = 0; oy < p->out_h; ++oy) {
      const int32_t iy0 = oy * p->stride[0] - p->pad[0];
      for (int32_t ox = 0; ox < p->out_w; ++ox, out += OC) {
        const int32_t ix0 = ox * p->stride[1] - p->pad[1];
        for (int32_t ic = 0; ic < C; ++ic) {
          for (int32_t m = 0; m < M; ++m) {
            const int32_t oc = ic * M + m;
            int32_t acc = bias[oc];
            for (int32_t ky = 0; ky < p->k_h; ++ky) {
              const int32_t iy = iy0 + ky * p->dilation[0];
              const int row_in = iy >= 0 && iy < p->in_h;
              for (int32_t kx = 0; kx < p->k_w; ++kx) {
                const int32_t ix = ix0 + kx * p->dilation[1];
                const int32_t x = (row_in && ix >= 0 && ix < p->in_w)
                                      ? in[(iy * p->in_w + ix) * C + ic] : p->pad_value;
                /* wraps modulo 2^32 like the folded bias (TFLite: int32 arithmetic) */
                acc = ai_wmla(acc, x, weights[(ky * p->k_w + kx) * OC + oc]);
              }
            }
            int32_t v = ai_wadd(ai_requant(acc, mult[oc], shift[oc]), p->out_offset);
            v = v < p->act_min ? p->act_min : v;
            v = v > p->act_max ? p->act_max : v;
            out[oc] = (int8_t)v;
          }
        }
      }
    }
  }
}
