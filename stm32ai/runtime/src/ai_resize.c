/* RESIZE_BILINEAR kernels (see ai_kernels_movement.h and docs/kernels_movement.md).
 *
 * The source rows/columns and their fractional weights come precomputed per output row
 * and column (the lowering reproduces TFLite's float and 10-bit integer index maths), so
 * the loops here only blend four neighbours. */
#include "ai_kernels_resize.h"

/* int8: TFLite's 10-bit fixed-point weights (wy, wx in 1/1024), rounded half away from zero. */
static inline void blend_s8(const int8_t *r0, const int8_t *r1, int32_t x0, int32_t x1, int32_t wy,
                            int32_t wx, int32_t ch, int8_t *output) {
  /* |acc| <= 128 * 2048 * 2048 = 2^29 even with TFLite's extrapolating weights at
   * the borders (w in [-512, 1024)), so int32 holds TFLite's int64 sum exactly. */
  const int32_t w00 = (1024 - wy) * (1024 - wx);
  const int32_t w10 = wy * (1024 - wx);
  const int32_t w01 = (1024 - wy) * wx;
  const int32_t w11 = wy * wx;
  const int8_t *a = r0 + x0, *bb = r1 + x0, *cc = r0 + x1, *dd = r1 + x1;
  for (int32_t c = 0; c < ch; ++c) {
    const int32_t acc = a[c] * w00 + bb[c] * w10 + cc[c] * w01 + dd[c] * w11;
    const int32_t rnd = acc > 0 ? (1 << 19) : -(1 << 19);
    output[c] = (int8_t)((acc + rnd) / (1 << 20));
  }
}

/* float32: fractional weights dy, dx. */
static inline void blend_f32(const float *r0, const float *r1, int32_t x0, int32_t x1, float dy,
                             float dx, int32_t ch, float *output) {
  const float uy = 1.0f - dy;
  const float ux = 1.0f - dx;
  const float *a = r0 + x0, *bb = r1 + x0, *cc = r0 + x1, *dd = r1 + x1;
  for (int32_t c = 0; c < ch; ++c) {
    /* same products and summation order as TFLite's reference ResizeBilinear */
    output[c] = a[c] * uy * ux + bb[c] * dy * ux + cc[c] * uy * dx + dd[c] * dy * dx;
  }
}

/* Every output pixel in order. `table` holds per output row, then per output column, the two
 * source offsets (elements) and the int8 weight; `frac` the float weights (rows, then
 * columns). One loop serves both types (a branch per output pixel, not per channel; smaller
 * code than two copies). */
static void resize_run(const ai_resize_bilinear_params *p, const void *input,
                       const int32_t *table, const float *frac, void *output, int32_t is_f32) {
  const int32_t ch = p->channels;
  const int32_t *xtab = table + 3 * p->out_h;
  int32_t o = 0; /* output element */
  for (int32_t b = 0; b < p->batches; ++b) {
    const int32_t img = b * p->in_h * p->in_w * ch;
    for (int32_t y = 0; y < p->out_h; ++y) {
      const int32_t r0 = img + table[3 * y], r1 = img + table[3 * y + 1];
      for (int32_t x = 0; x < p->out_w; ++x, o += ch) {
        const int32_t x0 = xtab[3 * x], x1 = xtab[3 * x + 1];
        if (is_f32) {
          const float *in = (const float *)input;
          blend_f32(in + r0, in + r1, x0, x1, frac[y], frac[p->out_h + x], ch, (float *)output + o);
        } else {
          const int8_t *in = (const int8_t *)input;
          blend_s8(in + r0, in + r1, x0, x1, table[3 * y + 2], xtab[3 * x + 2], ch,
                   (int8_t *)output + o);
        }
      }
    }
  }
}

void ai_resize_bilinear_s8(const ai_resize_bilinear_s8_params *p, const int8_t *input,
                           const int32_t *table, int8_t *output) {
  resize_run(p, input, table, NULL, output, 0);
}

void ai_resize_bilinear_f32(const ai_resize_bilinear_f32_params *p, const float *input,
                            const int32_t *table, const float *frac, float *output) {
  resize_run(p, input, table, frac, output, 1);
}
