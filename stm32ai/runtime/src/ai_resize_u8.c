/* Legacy uint8 RESIZE_BILINEAR on shifted int8 activations (ai_kernels_resize_u8.h).
 * Every float operation must round where LiteRT's does: contraction off for this file. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "ai_kernels_resize_u8.h"

/* round half away from zero of a float in [-2^30, 2^30]; then clamped to a uint8 code */
static inline int32_t round_code(float v) {
  int32_t t = (int32_t)v; /* truncation; v - t is exact in float32 */
  const float f = v - (float)t;
  t += f >= 0.5f ? 1 : (f <= -0.5f ? -1 : 0);
  return t < 0 ? 0 : (t > 255 ? 255 : t);
}

void ai_resize_bilinear_u8(const ai_resize_bilinear_u8_params *p, const int8_t *input,
                           const int32_t *table, const float *frac, int8_t *output) {
  const int32_t ch = p->channels;
  const int32_t *xtab = table + 3 * p->out_h;
  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *img = input + b * p->in_h * p->in_w * ch;
    for (int32_t y = 0; y < p->out_h; ++y) {
      const int8_t *r0 = img + table[3 * y], *r1 = img + table[3 * y + 1];
      const float dy = frac[y], uy = 1.0f - dy;
      for (int32_t x = 0; x < p->out_w; ++x, output += ch) {
        const int8_t *a = r0 + xtab[3 * x], *bb = r1 + xtab[3 * x];
        const int8_t *cc = r0 + xtab[3 * x + 1], *dd = r1 + xtab[3 * x + 1];
        const float dx = frac[p->out_h + x], ux = 1.0f - dx;
        for (int32_t c = 0; c < ch; ++c) {
          /* TFLite's products and summation order, on the uint8 codes */
          const float v = (float)(a[c] + 128) * uy * ux + (float)(bb[c] + 128) * dy * ux +
                          (float)(cc[c] + 128) * uy * dx + (float)(dd[c] + 128) * dy * dx;
          output[c] = (int8_t)(round_code(v) - 128);
        }
      }
    }
  }
}
