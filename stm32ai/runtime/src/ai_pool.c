/* AVERAGE_POOL_2D and MAX_POOL_2D, NHWC, int8 and float32. See docs/kernels_fc.md.
 *
 * The window of output (oy, ox) starts at (oy * stride - pad, ox * stride - pad) and is
 * clipped to the input; padded taps are skipped (TFLite semantics). The channel loop is
 * innermost so every tap reads contiguous memory.
 *
 * int8 average: the valid taps are summed in int32 and divided by their count with
 * TFLite Micro's rounding, (sum + n/2) / n when sum > 0, else (sum - n/2) / n, C
 * truncating division (round half away from zero).
 */
#include "ai_kernels_pool.h"
#include "ai_simd.h"

/* acc's two int16 lanes += bytes 0 and 2 of x (sign-extended), wrapping per lane: SXTAB16. */
static inline uint32_t sxtab16(uint32_t acc, uint32_t x) {
#if defined(__ARM_FEATURE_DSP)
  return (uint32_t)__sxtab16((int16x2_t)acc, (int8x4_t)x);
#else
  const int32_t b0 = (int32_t)((x & 0xFFu) ^ 0x80u) - 128, b2 = (int32_t)(((x >> 16) & 0xFFu) ^ 0x80u) - 128;
  const uint32_t lo = (uint32_t)((int32_t)(acc & 0xFFFFu) + b0) & 0xFFFFu;
  const uint32_t hi = (uint32_t)((int32_t)(acc >> 16) + b2) & 0xFFFFu;
  return lo | (hi << 16);
#endif
}

/* Sums of 4 channels over a window of at most 256 taps, two int16 lanes per word (|sum| <=
 * 256 * 128 = 32768: -32768 fits, the positive side stops at 32512): one LDR and two SXTAB16
 * per 4 taps instead of 4 byte loads and adds (KWS's 25x5x64 pool: 69 k -> ~20 k estimated
 * Cortex-M4 cycles). sum[0..3] gets the exact int32 sums. */
static void pool_sum4(const int8_t *src, int32_t rows, int32_t cols, int32_t row, int32_t c_n,
                      int32_t *sum) {
  uint32_t a = 0, b = 0; /* lanes {c0, c2}, {c1, c3} */
  for (int32_t y = 0; y < rows; y++, src += row) {
    const int8_t *s = src;
    for (int32_t x = cols; x > 0; x--, s += c_n) {
      const uint32_t v = rd32(s);
      a = sxtab16(a, v);
      b = sxtab16(b, (v >> 8) | (v << 24));
    }
  }
  sum[0] = (int16_t)(a & 0xFFFFu), sum[1] = (int16_t)(b & 0xFFFFu);
  sum[2] = (int16_t)(a >> 16), sum[3] = (int16_t)(b >> 16);
}

typedef struct {
  int32_t y0, y1, x0, x1; /* clipped window, input coordinates [y0, y1) x [x0, x1) */
} pool_window;

static inline pool_window window_at(int32_t oy, int32_t ox, int32_t in_h, int32_t in_w,
                                    int32_t fh, int32_t fw, int32_t sh, int32_t sw, int32_t ph,
                                    int32_t pw) {
  pool_window win;
  const int32_t iy = oy * sh - ph;
  const int32_t ix = ox * sw - pw;
  win.y0 = iy < 0 ? 0 : iy;
  win.x0 = ix < 0 ? 0 : ix;
  win.y1 = iy + fh < in_h ? iy + fh : in_h;
  win.x1 = ix + fw < in_w ? ix + fw : in_w;
  return win;
}

#define POOL_WINDOW(p, oy, ox)                                                                  \
  window_at((oy), (ox), (p)->in_h, (p)->in_w, (p)->filter_h, (p)->filter_w, (p)->stride_h,     \
            (p)->stride_w, (p)->pad_h, (p)->pad_w)
/* rw NULL (constant-folded): the full geometry, the usual entries' code unchanged */
#define POOL_IN_H (rw != 0 ? rw->in_h : p->in_h)
#define POOL_OUT_H (rw != 0 ? rw->out_h : p->out_h)
#define POOL_PAD_T (rw != 0 ? rw->pad_top : p->pad_h)
/* the same inside a row window (ai_row_window.h): in_h input rows, pad_t padding rows above */
#define POOL_WINDOW_ROWS(p, oy, ox, in_h_, pad_t)                                               \
  window_at((oy), (ox), (in_h_), (p)->in_w, (p)->filter_h, (p)->filter_w, (p)->stride_h,       \
            (p)->stride_w, (pad_t), (p)->pad_w)

/* Channel block for the int8 average: accumulators live on the stack (no scratch). */
#define AI_POOL_CBLK 32

static inline __attribute__((always_inline)) void avgpool_s8_run(const ai_avgpool_s8_params *p, const ai_row_window *rw,
    const int8_t *input, int8_t *output) {
  const int32_t c_n = p->channels;
  const int32_t row = p->in_w * c_n;
  for (int32_t b = 0; b < p->batches; b++) {
    const int8_t *in_b = input + (size_t)b * (size_t)POOL_IN_H * (size_t)row;
    for (int32_t oy = 0; oy < POOL_OUT_H; oy++) {
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const pool_window win = POOL_WINDOW_ROWS(p, oy, ox, POOL_IN_H, POOL_PAD_T);
        const int32_t count = (win.y1 - win.y0) * (win.x1 - win.x0);
        const int32_t half = count / 2;
        for (int32_t c0 = 0; c0 < c_n; c0 += AI_POOL_CBLK) {
          const int32_t cn = c_n - c0 < AI_POOL_CBLK ? c_n - c0 : AI_POOL_CBLK;
          int32_t acc[AI_POOL_CBLK];
          if ((c_n & 3) == 0 && count <= 256) { /* cn is then a multiple of 4 too */
            const int8_t *src = in_b + (size_t)win.y0 * (size_t)row + (size_t)win.x0 * (size_t)c_n + c0;
            for (int32_t c = 0; c < cn; c += 4) {
              pool_sum4(src + c, win.y1 - win.y0, win.x1 - win.x0, row, c_n, acc + c);
            }
          } else {
            for (int32_t c = 0; c < cn; c++) {
              acc[c] = 0;
            }
            for (int32_t y = win.y0; y < win.y1; y++) {
              const int8_t *src = in_b + (size_t)y * (size_t)row + (size_t)win.x0 * (size_t)c_n + c0;
              for (int32_t x = win.x0; x < win.x1; x++) {
                for (int32_t c = 0; c < cn; c++) {
                  acc[c] += src[c];
                }
                src += c_n;
              }
            }
          }
          for (int32_t c = 0; c < cn; c++) {
            int32_t v = acc[c];
            v = v > 0 ? (v + half) / count : (v - half) / count;
            v = v < p->act_min ? p->act_min : v;
            v = v > p->act_max ? p->act_max : v;
            *output++ = (int8_t)v;
          }
        }
      }
    }
  }
}

void ai_avgpool_s8(const ai_avgpool_s8_params *p, const int8_t *input, int8_t *output) {
  avgpool_s8_run(p, 0, input, output);
#if defined(__ARM_ARCH_7EM__) && defined(__OPTIMIZE__)
  /* Code placement only: 4 bytes shorter than before the row-window entry (gcc's choices),
   * restored so that later functions keep their addresses (docs/stripes.md session 35) */
  __asm__ volatile("nop\n\tnop");
#endif
}

void ai_avgpool_s8_rows(const ai_avgpool_s8_params *p, ai_row_window rw, const int8_t *input, int8_t *output) {
  avgpool_s8_run(p, &rw, input, output);
}

void ai_avgpool_rows_s8_accumulate(const ai_avgpool_rows_s8_params *p, const int8_t *rows,
                                   int32_t n_rows, int32_t *acc) {
  const int32_t c_n = p->channels;
  const int32_t pixels = n_rows * p->in_w; /* the band's rows are contiguous */
  for (int32_t i = 0; i < pixels; i++, rows += c_n) {
    for (int32_t c = 0; c < c_n; c++) {
      acc[c] += rows[c];
    }
  }
}

/* One channel's average from its running sum: rounded as ai_avgpool_s8 (TFLM), clamped. */
static inline int8_t avg_rows_out(const ai_avgpool_rows_s8_params *p, int32_t v) {
  const int32_t count = p->count, half = count / 2;
  v = v > 0 ? (v + half) / count : (v - half) / count;
  v = v < p->act_min ? p->act_min : v;
  v = v > p->act_max ? p->act_max : v;
  return (int8_t)v;
}

void ai_avgpool_rows_s8_finish(const ai_avgpool_rows_s8_params *p, const int32_t *acc, int8_t *out) {
  for (int32_t c = 0; c < p->channels; c++) {
    out[c] = avg_rows_out(p, acc[c]);
  }
}

int32_t ai_avgpool_rows_s8_acc_size(const ai_avgpool_rows_s8_params *p) {
  return 4 * p->channels;
}

/* The same with int16 sums (count <= 255: |acc| <= 128 * 255 fits int16, exact): half the
 * bytes, which sit at the pool's peak in the MLPerf stripes (docs/stripes.md). */
void ai_avgpool_rows_s8_accumulate16(const ai_avgpool_rows_s8_params *p, const int8_t *rows,
                                     int32_t n_rows, int16_t *acc) {
  const int32_t c_n = p->channels;
  const int32_t pixels = n_rows * p->in_w; /* the band's rows are contiguous */
#if defined(__ARM_FEATURE_DSP)
  if ((c_n & 3) == 0) {
    /* 4 channels at a time, their 4 sums in two registers over every pixel: per pixel one LDR,
     * 2 SXTB16, PKHBT / PKHTB to {x0, x1} {x2, x3}, 2 SADD16 (modulo 2^16 per half, as the int16
     * adds below; exact: count <= 255). KWS's stripe: 1,960 -> ~950 instructions per call. */
    for (int32_t c = 0; c < c_n; c += 4) {
      uint32_t s01, s23;
      memcpy(&s01, acc + c, sizeof s01);
      memcpy(&s23, acc + c + 2, sizeof s23);
      const int8_t *r = rows + c;
      for (int32_t i = pixels; i > 0; --i, r += c_n) {
        const uint32_t v = rd32(r), x02 = sxtb16(v), x13 = sxtb16_r8(v);
        s01 = (uint32_t)__sadd16((int16x2_t)s01, (int16x2_t)pk_lo(x02, x13));
        s23 = (uint32_t)__sadd16((int16x2_t)s23, (int16x2_t)pk_hi(x02, x13));
      }
      memcpy(acc + c, &s01, sizeof s01);
      memcpy(acc + c + 2, &s23, sizeof s23);
    }
    return;
  }
#endif
  for (int32_t i = 0; i < pixels; i++, rows += c_n) {
    for (int32_t c = 0; c < c_n; c++) {
      acc[c] = (int16_t)(acc[c] + rows[c]);
    }
  }
}

void ai_avgpool_rows_s8_finish16(const ai_avgpool_rows_s8_params *p, const int16_t *acc, int8_t *out) {
  for (int32_t c = 0; c < p->channels; c++) {
    out[c] = avg_rows_out(p, acc[c]);
  }
}

static inline __attribute__((always_inline)) void maxpool_s8_run(const ai_maxpool_s8_params *p, const ai_row_window *rw,
    const int8_t *input, int8_t *output) {
  const int32_t c_n = p->channels;
  const int32_t row = p->in_w * c_n;
  for (int32_t b = 0; b < p->batches; b++) {
    const int8_t *in_b = input + (size_t)b * (size_t)POOL_IN_H * (size_t)row;
    for (int32_t oy = 0; oy < POOL_OUT_H; oy++) {
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const pool_window win = POOL_WINDOW_ROWS(p, oy, ox, POOL_IN_H, POOL_PAD_T);
        /* first valid tap initialises the output row, the others take the max */
        const int8_t *first = in_b + (size_t)win.y0 * (size_t)row + (size_t)win.x0 * (size_t)c_n;
        for (int32_t c = 0; c < c_n; c++) {
          output[c] = first[c];
        }
        for (int32_t y = win.y0; y < win.y1; y++) {
          const int8_t *src = in_b + (size_t)y * (size_t)row + (size_t)win.x0 * (size_t)c_n;
          for (int32_t x = win.x0; x < win.x1; x++) {
            for (int32_t c = 0; c < c_n; c++) {
              output[c] = src[c] > output[c] ? src[c] : output[c];
            }
            src += c_n;
          }
        }
        for (int32_t c = 0; c < c_n; c++) {
          int32_t v = output[c];
          v = v < p->act_min ? p->act_min : v;
          v = v > p->act_max ? p->act_max : v;
          output[c] = (int8_t)v;
        }
        output += c_n;
      }
    }
  }
}

void ai_maxpool_s8(const ai_maxpool_s8_params *p, const int8_t *input, int8_t *output) {
  maxpool_s8_run(p, 0, input, output);
}

void ai_maxpool_s8_rows(const ai_maxpool_s8_params *p, ai_row_window rw, const int8_t *input, int8_t *output) {
  maxpool_s8_run(p, &rw, input, output);
}

static inline float clampf(float v, float lo, float hi) {
  v = v < lo ? lo : v; /* TFLite: min(max(v, lo), hi) */
  return v > hi ? hi : v;
}

void ai_avgpool_f32(const ai_avgpool_f32_params *p, const float *input, float *output) {
  const int32_t c_n = p->channels;
  const int32_t row = p->in_w * c_n;
  for (int32_t b = 0; b < p->batches; b++) {
    const float *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)row;
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const pool_window win = POOL_WINDOW(p, oy, ox);
        const float count = (float)((win.y1 - win.y0) * (win.x1 - win.x0));
        /* per channel, taps summed in TFLite's order (rows, then columns) */
        for (int32_t c = 0; c < c_n; c++) {
          float total = 0.0f;
          for (int32_t y = win.y0; y < win.y1; y++) {
            const float *src = in_b + (size_t)y * (size_t)row + (size_t)win.x0 * (size_t)c_n + c;
            for (int32_t x = win.x0; x < win.x1; x++) {
              total += *src;
              src += c_n;
            }
          }
          output[c] = clampf(total / count, p->act_min, p->act_max);
        }
        output += c_n;
      }
    }
  }
}

void ai_maxpool_f32(const ai_maxpool_f32_params *p, const float *input, float *output) {
  const int32_t c_n = p->channels;
  const int32_t row = p->in_w * c_n;
  for (int32_t b = 0; b < p->batches; b++) {
    const float *in_b = input + (size_t)b * (size_t)p->in_h * (size_t)row;
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const pool_window win = POOL_WINDOW(p, oy, ox);
        for (int32_t c = 0; c < c_n; c++) {
          output[c] = -3.40282347e+38f; /* std::numeric_limits<float>::lowest() */
        }
        for (int32_t y = win.y0; y < win.y1; y++) {
          const float *src = in_b + (size_t)y * (size_t)row + (size_t)win.x0 * (size_t)c_n;
          for (int32_t x = win.x0; x < win.x1; x++) {
            for (int32_t c = 0; c < c_n; c++) {
              /* std::max(max, v): keeps max unless max < v */
              output[c] = output[c] < src[c] ? src[c] : output[c];
            }
            src += c_n;
          }
        }
        for (int32_t c = 0; c < c_n; c++) {
          output[c] = clampf(output[c], p->act_min, p->act_max);
        }
        output += c_n;
      }
    }
  }
}
