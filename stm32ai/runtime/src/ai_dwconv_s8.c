/* int8 DEPTHWISE_CONV_2D kernels (see docs/kernels_conv.md). No float, no malloc. */
#include <string.h>

#include "ai_kernels_conv.h"
#include "ai_simd.h"

/* ------------------------------------------------------ DEPTHWISE_CONV_2D, m = 1 */

int32_t ai_depthwise_conv2d_s8_scratch_size(const ai_depthwise_conv2d_s8_params *p) {
  return (p->in_c + 3) & ~3; /* one pixel of pad_value, read by padded taps */
}

/* Weights: for each group of 4 channels, for each tap t (ky-major), the 4 bytes
 * w[t][c..c+3]; then, for each remaining channel c (in_c % 4 of them), its taps. */
void ai_depthwise_conv2d_s8(const ai_depthwise_conv2d_s8_params *p, const int8_t *input,
                            const int8_t *weights, const int32_t *bias, const int32_t *mult,
                            const int32_t *shift, int8_t *output, void *scratch) {
  const int32_t C = p->in_c;
  const int32_t C4 = C & ~3;
  const int32_t ntaps = p->k_h * p->k_w;
  const int8_t *tap[AI_DW_MAX_TAPS];
  int8_t *padpix = (int8_t *)scratch;
  if (ntaps > AI_DW_MAX_TAPS) {
    return; /* the lowering never selects this kernel for such filters */
  }
  memset(padpix, p->pad_value, (size_t)C);
  const int32_t off = p->out_offset, lo = p->act_min, hi = p->act_max;
  const int fast = all_fast(shift, C);

  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *in = input + (int32_t)b * p->in_h * p->in_w * C;
    int8_t *out = output + (int32_t)b * p->out_h * p->out_w * C;
    for (int32_t oy = 0; oy < p->out_h; ++oy) {
      const int32_t iy0 = oy * p->stride[0] - p->pad[0];
      for (int32_t ox = 0; ox < p->out_w; ++ox, out += C) {
        const int32_t ix0 = ox * p->stride[1] - p->pad[1];
        int32_t t = 0;
        for (int32_t ky = 0; ky < p->k_h; ++ky) {
          const int32_t iy = iy0 + ky * p->dilation[0];
          const int row_in = iy >= 0 && iy < p->in_h;
          for (int32_t kx = 0; kx < p->k_w; ++kx, ++t) {
            const int32_t ix = ix0 + kx * p->dilation[1];
            tap[t] = (row_in && ix >= 0 && ix < p->in_w) ? in + (iy * p->in_w + ix) * C : padpix;
          }
        }
        const int8_t *w = weights;
        int32_t c = 0;
        for (; c < C4; c += 4) {
          int32_t a0 = bias[c], a1 = bias[c + 1], a2 = bias[c + 2], a3 = bias[c + 3];
#define AI_DW_TAP(K)                                         \
  do {                                                       \
    const uint32_t x = rd32(tap[K] + c);                     \
    const uint32_t wv = rd32(w + 4 * (K));                   \
    const uint32_t x02 = sxtb16(x), x13 = sxtb16_r8(x);      \
    const uint32_t w02 = sxtb16(wv), w13 = sxtb16_r8(wv);    \
    a0 = smlabb(x02, w02, a0);                               \
    a2 = smlatt(x02, w02, a2);                               \
    a1 = smlabb(x13, w13, a1);                               \
    a3 = smlatt(x13, w13, a3);                               \
  } while (0)
          if (ntaps == 9) {
            AI_DW_TAP(0); AI_DW_TAP(1); AI_DW_TAP(2);
            AI_DW_TAP(3); AI_DW_TAP(4); AI_DW_TAP(5);
            AI_DW_TAP(6); AI_DW_TAP(7); AI_DW_TAP(8);
          } else {
            for (int32_t k = 0; k < ntaps; ++k) {
              AI_DW_TAP(k);
            }
          }
#undef AI_DW_TAP
          w += 4 * ntaps;
          if (fast) {
            int32_t rs = -shift[c] - 1;
            out[c] = clamp8(rq_fast(a0, mult[c], rs, (int32_t)((1u << rs) >> 1)) + off, lo, hi);
            rs = -shift[c + 1] - 1;
            out[c + 1] = clamp8(rq_fast(a1, mult[c + 1], rs, (int32_t)((1u << rs) >> 1)) + off, lo, hi);
            rs = -shift[c + 2] - 1;
            out[c + 2] = clamp8(rq_fast(a2, mult[c + 2], rs, (int32_t)((1u << rs) >> 1)) + off, lo, hi);
            rs = -shift[c + 3] - 1;
            out[c + 3] = clamp8(rq_fast(a3, mult[c + 3], rs, (int32_t)((1u << rs) >> 1)) + off, lo, hi);
          } else {
            rq_t r = rq_prep(mult[c], shift[c]);
            out[c] = rq_out(a0, &r, off, lo, hi);
            r = rq_prep(mult[c + 1], shift[c + 1]);
            out[c + 1] = rq_out(a1, &r, off, lo, hi);
            r = rq_prep(mult[c + 2], shift[c + 2]);
            out[c + 2] = rq_out(a2, &r, off, lo, hi);
            r = rq_prep(mult[c + 3], shift[c + 3]);
            out[c + 3] = rq_out(a3, &r, off, lo, hi);
          }
        }
        for (; c < C; ++c) {
          int32_t a = bias[c];
          for (int32_t k = 0; k < ntaps; ++k) {
            a += (int32_t)tap[k][c] * (int32_t)*w++;
          }
          const rq_t r = rq_prep(mult[c], shift[c]);
          out[c] = rq_out(a, &r, off, lo, hi);
        }
      }
    }
  }
}

/* ------------------------------------------- DEPTHWISE_CONV_2D, any multiplier */

void ai_depthwise_conv2d_dm_s8(const ai_depthwise_conv2d_dm_s8_params *p, const int8_t *input,
                               const int8_t *weights, const int32_t *bias, const int32_t *mult,
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
                acc += x * weights[(ky * p->k_w + kx) * OC + oc];
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
