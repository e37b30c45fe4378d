/* The plain DEPTHWISE_CONV_2D loop (any depth multiplier, kernel, stride, dilation), written once
 * for the weight widths that use it: int8 (TFLite's weights, ai_depthwise_conv2d_dm_s8) and
 * int16 (a legacy uint8 filter re-centred to w - zp_w, ai_depthwise_conv2d_u8). Activations
 * int8, TFLite's 1HW(C*M) weight order, out channel oc = ic * depth_mult + m, the input zero
 * point folded into the bias (padded taps read pad_value, cancelling their share of the fold),
 * TFLite's double-rounding requantisation (rq_out). `wbits` (8 or 16) is a constant at each
 * call: the function is always inlined, so each width compiles to its own straight loop.
 * docs/kernels_conv.md, docs/kernels_u8.md. */
#ifndef AI_CONV_DW_LOOP_H
#define AI_CONV_DW_LOOP_H

#include <stdint.h>

#include "ai_kernels_conv.h"
#include "ai_qmath.h"
#include "ai_simd.h"

#if defined(__GNUC__)
#define AI_DW_LOOP_INLINE static inline __attribute__((always_inline))
#else
#define AI_DW_LOOP_INLINE static inline
#endif

AI_DW_LOOP_INLINE int32_t ai_dw_weight(const void *w, int32_t i, int wbits) {
  return wbits == 16 ? (int32_t)((const int16_t *)w)[i] : (int32_t)((const int8_t *)w)[i];
}

AI_DW_LOOP_INLINE void ai_dw_dm_loop(const ai_depthwise_conv2d_dm_s8_params *p, const int8_t *input,
                                     const void *weights, int wbits, const int32_t *bias, const int32_t *mult,
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
                acc = ai_wmla(acc, x, ai_dw_weight(weights, (ky * p->k_w + kx) * OC + oc, wbits));
              }
            }
            const rq_t r = rq_prep(mult[oc], shift[oc]);
            out[oc] = rq_out(acc, &r, p->out_offset, p->act_min, p->act_max);
          }
        }
      }
    }
  }
}

#endif /* AI_CONV_DW_LOOP_H */
