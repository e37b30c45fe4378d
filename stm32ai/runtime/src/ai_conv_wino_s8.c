/* int8 CONV_2D 3x3 stride 1 by exact integer Winograd F(2x2, 3x3) (docs/kernels_conv_wino.md).
 * No float, no malloc. */
#include <string.h>

#include "ai_kernels_conv_wino.h"
#include "ai_qmath.h"
#include "ai_simd.h"

static inline int32_t wino_in_cp(const ai_conv2d_wino_s8_params *p) { return (p->in_c + 1) & ~1; }

int32_t ai_conv2d_wino_s8_scratch_size(const ai_conv2d_wino_s8_params *p) {
  return 16 * wino_in_cp(p) * (int32_t)sizeof(int16_t);
}

/* V = B^T d B for one input channel, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]:
 * v[pos * in_cp] for pos = 4 * row + col. */
static void wino_in_tf(const int32_t d[16], int16_t *v, int32_t in_cp) {
  int32_t t[16];
  for (int j = 0; j < 4; j++) { /* rows: B^T d */
    t[0 + j] = d[0 + j] - d[8 + j];
    t[4 + j] = d[4 + j] + d[8 + j];
    t[8 + j] = d[8 + j] - d[4 + j];
    t[12 + j] = d[4 + j] - d[12 + j];
  }
  for (int i = 0; i < 4; i++) { /* columns: (B^T d) B */
    const int32_t *r = &t[4 * i];
    v[(4 * i + 0) * in_cp] = (int16_t)(r[0] - r[2]);
    v[(4 * i + 1) * in_cp] = (int16_t)(r[1] + r[2]);
    v[(4 * i + 2) * in_cp] = (int16_t)(r[2] - r[1]);
    v[(4 * i + 3) * in_cp] = (int16_t)(r[1] - r[3]);
  }
}

/* sum over k of u[k] * v[k], n even (int16 pairs, SMLAD). */
static inline int32_t wino_dot(const int16_t *u, const int16_t *v, int32_t n) {
  int32_t acc = 0;
  for (int32_t k = 0; k < n; k += 2) {
    uint32_t a, b;
    memcpy(&a, u + k, 4);
    memcpy(&b, v + k, 4);
    acc = smlad(a, b, acc);
  }
  return acc;
}

static inline int8_t wino_out(const int32_t *q, int32_t y4, const ai_conv2d_wino_s8_params *p) {
  /* y4 is exactly 4x TFLite's sum (the lowering's proof keeps it an int32): >> 2 is exact */
  const int32_t acc = ai_wadd(q[0], y4 >> 2);
  int32_t v;
  if (p->rq_fold) {
    v = ssat8(rq_fold(acc, q[1], q[2], q[3]));
  } else {
    v = ai_wadd(ai_requant(acc, q[1], q[2]), p->out_offset);
  }
  return clamp8(v, p->act_min, p->act_max);
}

/* The wrapping int32 add: the inverse transform's partial sums may leave int32 only where
 * the final (proved) value does not, and wrapping arithmetic gives that value exactly. */
static inline int32_t wa(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static inline int32_t ws(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }

void ai_conv2d_wino_s8(const ai_conv2d_wino_s8_params *p, const int8_t *input, const int16_t *weights,
                       const int32_t *rq, int8_t *output, void *scratch) {
  const int32_t in_cp = wino_in_cp(p), in_c = p->in_c, out_c = p->out_c;
  int16_t *v = (int16_t *)scratch;
  for (int32_t b = 0; b < p->batches; b++) {
    const int8_t *in_b = input + (size_t)b * (size_t)(p->in_h * p->in_w * in_c);
    int8_t *out_b = output + (size_t)b * (size_t)(p->out_h * p->out_w * out_c);
    for (int32_t oy = 0; oy < p->out_h; oy += 2) {
      for (int32_t ox = 0; ox < p->out_w; ox += 2) {
        const int32_t iy0 = oy - p->pad[0], ix0 = ox - p->pad[1];
        /* transformed input of this tile, every channel; the pad channel (odd in_c) is 0 */
        for (int32_t c = 0; c < in_c; c++) {
          int32_t d[16];
          for (int i = 0; i < 4; i++) {
            const int32_t iy = iy0 + i;
            for (int j = 0; j < 4; j++) {
              const int32_t ix = ix0 + j;
              d[4 * i + j] = (iy >= 0 && iy < p->in_h && ix >= 0 && ix < p->in_w)
                                 ? (int32_t)in_b[((size_t)iy * (size_t)p->in_w + (size_t)ix) * (size_t)in_c +
                                                 (size_t)c] - p->pad_value
                                 : 0;
            }
          }
          wino_in_tf(d, v + c, in_cp);
        }
        if (in_c & 1) {
          for (int pos = 0; pos < 16; pos++) v[pos * in_cp + in_c] = 0;
        }
        const int two_y = oy + 1 < p->out_h, two_x = ox + 1 < p->out_w;
        int8_t *o00 = out_b + ((size_t)oy * (size_t)p->out_w + (size_t)ox) * (size_t)out_c;
        for (int32_t oc = 0; oc < out_c; oc++) {
          const int16_t *u = weights + (size_t)oc * 16u * (size_t)in_cp;
          int32_t m[16];
          for (int pos = 0; pos < 16; pos++) {
            m[pos] = wino_dot(u + pos * in_cp, v + pos * in_cp, in_cp);
          }
          /* A^T M A, A^T = [1 1 1 0; 0 1 -1 -1] */
          int32_t r0[4], r1[4];
          for (int j = 0; j < 4; j++) {
            r0[j] = wa(wa(m[j], m[4 + j]), m[8 + j]);
            r1[j] = ws(ws(m[4 + j], m[8 + j]), m[12 + j]);
          }
          const int32_t *q = rq + 4 * oc;
          o00[oc] = wino_out(q, wa(wa(r0[0], r0[1]), r0[2]), p);
          if (two_x) o00[out_c + oc] = wino_out(q, ws(ws(r0[1], r0[2]), r0[3]), p);
          if (two_y) {
            int8_t *o10 = o00 + (size_t)p->out_w * (size_t)out_c;
            o10[oc] = wino_out(q, wa(wa(r1[0], r1[1]), r1[2]), p);
            if (two_x) o10[out_c + oc] = wino_out(q, ws(ws(r1[1], r1[2]), r1[3]), p);
          }
        }
      }
    }
  }
}
