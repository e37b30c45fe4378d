/* Tensor / shape operator kernels (ai_kernels_tensor.h, docs/kernels_tensor.md). */
#include "ai_kernels_tensor.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "ai_fixedpoint.h"
#include "ai_qmath.h"

/* ---- GATHER_ND ---------------------------------------------------------------------------- */

void ai_gather_nd(const ai_gather_nd_params *p, const void *params, const int32_t *indices, void *output) {
  const uint8_t *src = (const uint8_t *)params;
  uint8_t *dst = (uint8_t *)output;
  const size_t slice_bytes = (size_t)p->slice_elems * (size_t)p->elem_size;
  for (int32_t i = 0; i < p->n_slices; i++) {
    int64_t pos = 0; /* 64-bit: no index can overflow it (|index| < 2^31, nd <= 6) */
    for (int32_t j = 0; j < p->nd; j++) {
      pos += (int64_t)indices[i * p->nd + j] * (int64_t)p->count[j];
    }
    uint8_t *out = dst + (size_t)i * slice_bytes;
    if (pos < 0 || pos + p->slice_elems > p->params_elems) {
      memset(out, 0, slice_bytes);
    } else {
      memcpy(out, src + (size_t)pos * (size_t)p->elem_size, slice_bytes);
    }
  }
}

/* ---- EMBEDDING_LOOKUP (int8 table, float output) ------------------------------------------- */

void ai_embedding_lookup_hybrid(const ai_embedding_lookup_hybrid_params *p, const int32_t *ids,
                                const int8_t *table, float *output) {
  for (int32_t i = 0; i < p->n_ids; i++) {
    float *out = output + (size_t)i * (size_t)p->cols;
    const int32_t id = ids[i];
    if (id < 0 || id >= p->rows) {
      memset(out, 0, (size_t)p->cols * sizeof(float));
      continue;
    }
    const int8_t *row = table + (size_t)id * (size_t)p->cols;
    for (int32_t c = 0; c < p->cols; c++) {
      out[c] = (float)row[c] * p->scale; /* TFLM's Dequantize: (q - 0) * scale */
    }
  }
}

/* ---- DYNAMIC_UPDATE_SLICE ------------------------------------------------------------------ */

void ai_dynamic_update_slice(const ai_dynamic_update_slice_params *p, const void *operand, const void *update,
                             const void *start, void *output) {
  int32_t st[AI_MAX_DIMS];
  int32_t ostride[AI_MAX_DIMS];
  const int32_t pad = AI_MAX_DIMS - p->rank;
  int32_t acc = 1;
  for (int32_t d = AI_MAX_DIMS - 1; d >= 0; d--) {
    ostride[d] = acc;
    acc *= p->dims[d];
    int64_t s = 0;
    if (d >= pad) {
      s = p->index64 ? ((const int64_t *)start)[d - pad] : (int64_t)((const int32_t *)start)[d - pad];
    }
    const int64_t hi = (int64_t)p->dims[d] - (int64_t)p->upd[d]; /* >= 0, checked at generate time */
    st[d] = (int32_t)(s < 0 ? 0 : (s > hi ? hi : s));
  }
  if (output != operand) {
    memcpy(output, operand, (size_t)p->operand_bytes);
  }
  const size_t es = (size_t)p->elem_size;
  const size_t row = (size_t)p->upd[AI_MAX_DIMS - 1] * es;
  const uint8_t *u = (const uint8_t *)update;
  uint8_t *o = (uint8_t *)output;
  const int32_t *n = p->upd;
  for (int32_t i0 = 0; i0 < n[0]; i0++)
    for (int32_t i1 = 0; i1 < n[1]; i1++)
      for (int32_t i2 = 0; i2 < n[2]; i2++)
        for (int32_t i3 = 0; i3 < n[3]; i3++)
          for (int32_t i4 = 0; i4 < n[4]; i4++) {
            const int32_t off = (st[0] + i0) * ostride[0] + (st[1] + i1) * ostride[1] +
                                (st[2] + i2) * ostride[2] + (st[3] + i3) * ostride[3] +
                                (st[4] + i4) * ostride[4] + st[5];
            memcpy(o + (size_t)off * es, u, row);
            u += row;
          }
}

/* ---- CUMSUM ------------------------------------------------------------------------------- */

#define CUMSUM_WALK(T, ADD)                                                                   \
  do {                                                                                        \
    for (int32_t o = 0; o < p->outer; o++)                                                    \
      for (int32_t k = 0; k < p->inner; k++) {                                                \
        T acc = 0;                                                                            \
        for (int32_t a = 0; a < p->axis; a++) {                                               \
          const int32_t ia = p->reverse ? p->axis - 1 - a : a;                                \
          const int32_t at = (o * p->axis + ia) * p->inner + k;                               \
          if (p->exclusive) {                                                                 \
            output[at] = acc;                                                                 \
            acc = ADD(acc, input[at]);                                                        \
          } else {                                                                            \
            acc = ADD(acc, input[at]);                                                        \
            output[at] = acc;                                                                 \
          }                                                                                   \
        }                                                                                     \
      }                                                                                       \
  } while (0)

static inline float add_f32(float a, float b) { return a + b; }

void ai_cumsum_f32(const ai_cumsum_f32_params *p, const float *input, float *output) {
  CUMSUM_WALK(float, add_f32);
}

void ai_cumsum_s32(const ai_cumsum_s32_params *p, const int32_t *input, int32_t *output) {
  CUMSUM_WALK(int32_t, ai_wadd);
}

void ai_cumsum_s8(const ai_cumsum_s8_params *p, const int8_t *input, int8_t *output) {
  const int32_t start = ai_requant((int32_t)((uint32_t)p->input_offset << p->left_shift), p->input_multiplier,
                                   p->input_shift);
  for (int32_t o = 0; o < p->outer; o++)
    for (int32_t k = 0; k < p->inner; k++) {
      int32_t acc = start;
      for (int32_t a = 0; a < p->axis; a++) {
        const int32_t ia = p->reverse ? p->axis - 1 - a : a;
        const int32_t at = (o * p->axis + ia) * p->inner + k;
        const int32_t y = (int32_t)input[at] + p->input_offset;
        const int32_t scaled = ai_requant((int32_t)((uint32_t)y << p->left_shift), p->input_multiplier,
                                          p->input_shift);
        int32_t v;
        if (p->exclusive) {
          v = acc;
          acc = ai_wadd(acc, scaled);
        } else {
          acc = ai_wadd(acc, scaled);
          v = acc;
        }
        v = ai_wadd(ai_requant(v, p->output_multiplier, p->output_shift), p->output_offset);
        output[at] = (int8_t)AI_CLAMP(v, p->act_min, p->act_max);
      }
    }
}

/* ---- REDUCE_ALL ----------------------------------------------------------------------------- */

void ai_reduce_all(const ai_reduce_all_params *p, const uint8_t *input, uint8_t *output) {
  memset(output, 1, (size_t)p->out_size);
  const int32_t *n = p->shape;
  const int32_t *s = p->out_strides;
  int32_t i = 0;
  for (int32_t i0 = 0; i0 < n[0]; i0++)
    for (int32_t i1 = 0; i1 < n[1]; i1++)
      for (int32_t i2 = 0; i2 < n[2]; i2++)
        for (int32_t i3 = 0; i3 < n[3]; i3++)
          for (int32_t i4 = 0; i4 < n[4]; i4++) {
            const int32_t o = i0 * s[0] + i1 * s[1] + i2 * s[2] + i3 * s[3] + i4 * s[4];
            for (int32_t i5 = 0; i5 < n[5]; i5++, i++) {
              if (input[i] == 0) {
                output[o + i5 * s[5]] = 0;
              }
            }
          }
}

/* ---- L2_NORMALIZATION ------------------------------------------------------------------------ */

/* TFLite's GetInvSqrtQuantizedMultiplierExp with reverse_shift -1: 1/sqrt(input) as a Q31
 * multiplier and a (left) shift, by five Newton-Raphson steps in gemmlowp's Q3.28. */
static void inv_sqrt_multiplier(int32_t input, int32_t *mult, int32_t *shift) {
  if (input <= 1) {
    *mult = INT32_MAX;
    *shift = 0;
    return;
  }
  int32_t sh = 11;
  while (input >= (1 << 29)) {
    input /= 4;
    ++sh;
  }
  const int32_t max_left_shift_bits = ai_fp_clz((uint32_t)input) - 1;
  const int32_t left_pairs = max_left_shift_bits / 2 - 1;
  sh -= left_pairs;
  input = (int32_t)((uint32_t)input << (2 * left_pairs));
  const int32_t half_input = ai_rdbypot(input >> 1, 1);      /* F3 */
  const int32_t half_three = (1 << 28) + (1 << 27);          /* 1.5 in F3 */
  int32_t x = 1 << 28;                                       /* 1.0 in F3 */
  for (int k = 0; k < 5; k++) {
    const int32_t x3 = ai_fp_sat_shl(ai_srdhm(ai_srdhm(x, x), x), 6);  /* F9 -> F3 */
    x = ai_fp_sat_shl(ai_fp_sub(ai_srdhm(half_three, x), ai_srdhm(half_input, x3)), 3);  /* F6 -> F3 */
  }
  x = ai_srdhm(x, 1518500250); /* * sqrt(2)/2 (F0) */
  if (sh < 0) {
    x = (int32_t)((uint32_t)x << -sh);
    sh = 0;
  }
  *mult = x;
  *shift = -sh;
}

void ai_l2_norm_s8(const ai_l2_norm_s8_params *p, const int8_t *input, int8_t *output) {
  for (int32_t o = 0; o < p->outer; o++) {
    const int8_t *x = input + (size_t)o * (size_t)p->depth;
    int8_t *y = output + (size_t)o * (size_t)p->depth;
    int32_t acc = 0;
    for (int32_t c = 0; c < p->depth; c++) {
      const int32_t v = (int32_t)x[c] - p->input_zero_point;
      acc = ai_wmla(acc, v, v);
    }
    int32_t mult, shift;
    inv_sqrt_multiplier(acc, &mult, &shift);
    for (int32_t c = 0; c < p->depth; c++) {
      const int32_t v = ai_requant((int32_t)x[c] - p->input_zero_point, mult, shift + 7);
      y[c] = (int8_t)AI_CLAMP(v, -128, 127);
    }
  }
}

void ai_l2_norm_f32(const ai_l2_norm_f32_params *p, const float *input, float *output) {
  for (int32_t o = 0; o < p->outer; o++) {
    const float *x = input + (size_t)o * (size_t)p->depth;
    float *y = output + (size_t)o * (size_t)p->depth;
    float sq = 0.0f;
    for (int32_t c = 0; c < p->depth; c++) {
      sq += x[c] * x[c];
    }
    float norm = sqrtf(sq);
    norm = norm < 1e-6f ? 1e-6f : norm; /* TFLite's epsilon */
    for (int32_t c = 0; c < p->depth; c++) {
      y[c] = x[c] / norm;
    }
  }
}

/* ---- L2_POOL_2D ------------------------------------------------------------------------------ */

void ai_l2_pool_f32(const ai_l2_pool_f32_params *p, const float *input, float *output) {
  const int32_t C = p->channels;
  for (int32_t b = 0; b < p->batches; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const int32_t iy0 = oy * p->stride_h - p->pad_h;
        const int32_t ix0 = ox * p->stride_w - p->pad_w;
        const int32_t fy0 = iy0 < 0 ? -iy0 : 0;
        const int32_t fx0 = ix0 < 0 ? -ix0 : 0;
        const int32_t fy1 = AI_MIN(p->filter_h, p->in_h - iy0);
        const int32_t fx1 = AI_MIN(p->filter_w, p->in_w - ix0);
        float *out = output + (((size_t)b * (size_t)p->out_h + (size_t)oy) * (size_t)p->out_w + (size_t)ox) * (size_t)C;
        for (int32_t c = 0; c < C; c++) {
          float sum = 0.0f;
          int32_t count = 0;
          for (int32_t fy = fy0; fy < fy1; fy++)
            for (int32_t fx = fx0; fx < fx1; fx++) {
              const float v = input[(((size_t)b * (size_t)p->in_h + (size_t)(iy0 + fy)) * (size_t)p->in_w +
                                     (size_t)(ix0 + fx)) * (size_t)C + (size_t)c];
              sum += v * v;
              count++;
            }
          const float r = sqrtf(sum / (float)count);
          out[c] = r < p->act_min ? p->act_min : (r > p->act_max ? p->act_max : r);
        }
      }
}

/* ---- BROADCAST_ARGS -------------------------------------------------------------------------- */

#define BROADCAST_ARGS(P, A, B, OUT)                                                   \
  do {                                                                                 \
    for (int32_t i = 0; i < (P)->n_out; i++) {                                         \
      const int32_t a = i < (P)->n1 ? (int32_t)(A)[(P)->n1 - 1 - i] : 1;               \
      const int32_t b = i < (P)->n2 ? (int32_t)(B)[(P)->n2 - 1 - i] : 1;               \
      (OUT)[(P)->n_out - 1 - i] = a == 1 ? b : a;                                      \
    }                                                                                  \
  } while (0)

void ai_broadcast_args_s32(const ai_broadcast_args_s32_params *p, const int32_t *shape1, const int32_t *shape2,
                           int32_t *output) {
  BROADCAST_ARGS(p, shape1, shape2, output);
}

void ai_broadcast_args_s64(const ai_broadcast_args_s64_params *p, const int64_t *shape1, const int64_t *shape2,
                           int64_t *output) {
  BROADCAST_ARGS(p, shape1, shape2, output);
}
