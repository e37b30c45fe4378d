/* RESIZE_BILINEAR kernels (see ai_kernels_movement.h and docs/kernels_movement.md).
 *
 * The source rows/columns and their fractional weights come precomputed per output row
 * and column (the lowering reproduces TFLite's float and 10-bit integer index maths), so
 * the loops here only blend four neighbours. */
#include "ai_kernels_resize.h"

void ai_resize_bilinear_s8(const ai_resize_bilinear_s8_params *p, const int8_t *input,
                           const int32_t *table, int8_t *output) {
  const int32_t ch = p->channels;
  const int32_t *xtab = table + 3 * p->out_h;
  int32_t b, y, x, c;
  for (b = 0; b < p->batches; ++b) {
    const int8_t *img = input + b * p->in_h * p->in_w * ch;
    for (y = 0; y < p->out_h; ++y) {
      const int8_t *r0 = img + table[3 * y];
      const int8_t *r1 = img + table[3 * y + 1];
      const int32_t wy = table[3 * y + 2];
      for (x = 0; x < p->out_w; ++x) {
        const int32_t x0 = xtab[3 * x], x1 = xtab[3 * x + 1], wx = xtab[3 * x + 2];
        /* |acc| <= 128 * 2048 * 2048 = 2^29 even with TFLite's extrapolating weights at
         * the borders (w in [-512, 1024)), so int32 holds TFLite's int64 sum exactly. */
        const int32_t w00 = (1024 - wy) * (1024 - wx);
        const int32_t w10 = wy * (1024 - wx);
        const int32_t w01 = (1024 - wy) * wx;
        const int32_t w11 = wy * wx;
        const int8_t *a = r0 + x0, *bb = r1 + x0, *cc = r0 + x1, *dd = r1 + x1;
        for (c = 0; c < ch; ++c) {
          const int32_t acc = a[c] * w00 + bb[c] * w10 + cc[c] * w01 + dd[c] * w11;
          const int32_t rnd = acc > 0 ? (1 << 19) : -(1 << 19);
          *output++ = (int8_t)((acc + rnd) / (1 << 20));
        }
      }
    }
  }
}

void ai_resize_bilinear_f32(const ai_resize_bilinear_f32_params *p, const float *input,
                            const int32_t *table, const float *frac, float *output) {
  const int32_t ch = p->channels;
  const int32_t *xtab = table + 3 * p->out_h;
  const float *xfrac = frac + p->out_h;
  int32_t b, y, x, c;
  for (b = 0; b < p->batches; ++b) {
    const float *img = input + b * p->in_h * p->in_w * ch;
    for (y = 0; y < p->out_h; ++y) {
      const float *r0 = img + table[3 * y];
      const float *r1 = img + table[3 * y + 1];
      const float dy = frac[y];
      const float uy = 1.0f - dy;
      for (x = 0; x < p->out_w; ++x) {
        const float *a = r0 + xtab[3 * x], *bb = r1 + xtab[3 * x];
        const float *cc = r0 + xtab[3 * x + 1], *dd = r1 + xtab[3 * x + 1];
        const float dx = xfrac[x];
        const float ux = 1.0f - dx;
        for (c = 0; c < ch; ++c) {
          /* same products and summation order as TFLite's reference ResizeBilinear */
          *output++ = a[c] * uy * ux + bb[c] * dy * ux + cc[c] * uy * dx + dd[c] * dy * dx;
        }
      }
    }
  }
}
