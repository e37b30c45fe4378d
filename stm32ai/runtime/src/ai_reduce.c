/* Reductions: MEAN, SUM, REDUCE_MAX, REDUCE_MIN (int8, float32), ARG_MAX, ARG_MIN
 * (see docs/kernels_reduce.md). No float math in the int8 kernels, no malloc. */
#include <float.h>
#include <stddef.h>

#include "ai_kernels_reduce.h"
#include "ai_qmath.h"

/* ------------------------------------------------------------------ the walk
 * The input is consumed in memory order as runs along the innermost merged dimension.
 * A run either folds into one output (innermost dimension reduced, ostride 0) or maps
 * element-wise onto `n` consecutive outputs (innermost dimension kept, ostride 1). */
typedef struct {
  int32_t idx[AI_MAX_DIMS];
  int32_t out;  /* output offset of the current run */
  int32_t n;    /* run length */
  int32_t fold; /* 1: the run folds into out; 0: element-wise */
} walk_t;

static void walk_start(int32_t ndim, const int32_t *shape, const int32_t *ostride, walk_t *w) {
  int32_t d;
  for (d = 0; d < AI_MAX_DIMS; ++d) {
    w->idx[d] = 0;
  }
  w->out = 0;
  w->n = shape[ndim - 1];
  w->fold = ostride[ndim - 1] == 0;
}

/* Advances to the next run; 0 when the walk is over. */
static int walk_next(int32_t ndim, const int32_t *shape, const int32_t *ostride, walk_t *w) {
  int32_t d = ndim - 2;
  while (d >= 0) {
    w->out += ostride[d];
    if (++w->idx[d] < shape[d]) {
      return 1;
    }
    w->out -= ostride[d] * shape[d];
    w->idx[d] = 0;
    --d;
  }
  return 0;
}

#define AI_WALK(p) (p)->ndim, (p)->shape, (p)->ostride

/* ----------------------------------------------------------------- float32 */

static void sum_f32(int32_t ndim, const int32_t *shape, const int32_t *ostride, int32_t out_size,
                    const float *input, float *output) {
  walk_t w;
  int32_t i;
  for (i = 0; i < out_size; ++i) {
    output[i] = 0.0f;
  }
  walk_start(ndim, shape, ostride, &w);
  do {
    if (w.fold) {
      float acc = output[w.out];
      for (i = 0; i < w.n; ++i) {
        acc += input[i];
      }
      output[w.out] = acc;
    } else {
      float *o = output + w.out;
      for (i = 0; i < w.n; ++i) {
        o[i] += input[i];
      }
    }
    input += w.n;
  } while (walk_next(ndim, shape, ostride, &w));
}

void ai_reduce_sum_f32(const ai_reduce_sum_f32_params *p, const float *input, float *output) {
  sum_f32(AI_WALK(p), p->out_size, input, output);
}

void ai_reduce_mean_f32(const ai_reduce_mean_f32_params *p, const float *input, float *output) {
  const float n = (float)p->count;
  int32_t i;
  sum_f32(AI_WALK(p), p->out_size, input, output);
  for (i = 0; i < p->out_size; ++i) {
    output[i] = output[i] / n;
  }
}

#define AI_REDUCE_EXTREME(NAME, T, INIT, BETTER)                                        \
  void NAME(const ai_reduce_walk_params *p, const T *input, T *output) {                \
    walk_t w;                                                                           \
    int32_t i;                                                                          \
    for (i = 0; i < p->out_size; ++i) {                                                 \
      output[i] = (INIT);                                                               \
    }                                                                                   \
    walk_start(AI_WALK(p), &w);                                                         \
    do {                                                                                \
      if (w.fold) {                                                                     \
        T acc = output[w.out];                                                          \
        for (i = 0; i < w.n; ++i) {                                                     \
          if (BETTER(input[i], acc)) {                                                  \
            acc = input[i];                                                             \
          }                                                                             \
        }                                                                               \
        output[w.out] = acc;                                                            \
      } else {                                                                          \
        T *o = output + w.out;                                                          \
        for (i = 0; i < w.n; ++i) {                                                     \
          if (BETTER(input[i], o[i])) {                                                 \
            o[i] = input[i];                                                            \
          }                                                                             \
        }                                                                               \
      }                                                                                 \
      input += w.n;                                                                     \
    } while (walk_next(AI_WALK(p), &w));                                                \
  }

#define AI_GT(a, b) ((a) > (b))
#define AI_LT(a, b) ((a) < (b))

AI_REDUCE_EXTREME(ai_reduce_max_f32, float, -FLT_MAX, AI_GT)
AI_REDUCE_EXTREME(ai_reduce_min_f32, float, FLT_MAX, AI_LT)
AI_REDUCE_EXTREME(ai_reduce_max_s8, int8_t, INT8_MIN, AI_GT)
AI_REDUCE_EXTREME(ai_reduce_min_s8, int8_t, INT8_MAX, AI_LT)

/* -------------------------------------------------------------- int8 mean/sum */

int32_t ai_reduce_sum_s8_scratch_size(const ai_reduce_sum_s8_params *p) {
  return p->out_size * (int32_t)sizeof(int32_t);
}

void ai_reduce_sum_s8(const ai_reduce_sum_s8_params *p, const int8_t *input, int8_t *output,
                      void *scratch) {
  int32_t *acc = (int32_t *)scratch;
  walk_t w;
  int32_t i;
  for (i = 0; i < p->out_size; ++i) {
    acc[i] = 0;
  }
  walk_start(AI_WALK(p), &w);
  do {
    if (w.fold) {
      int32_t s = 0;
      for (i = 0; i < w.n; ++i) {
        s += input[i];
      }
      acc[w.out] += s;
    } else {
      int32_t *a = acc + w.out;
      for (i = 0; i < w.n; ++i) {
        a[i] += input[i];
      }
    }
    input += w.n;
  } while (walk_next(AI_WALK(p), &w));
  for (i = 0; i < p->out_size; ++i) {
    int32_t v = ai_requant(acc[i] + p->bias, p->multiplier, p->shift) + p->out_offset;
    output[i] = (int8_t)AI_CLAMP(v, p->act_min, p->act_max);
  }
}

/* ----------------------------------------------------------- ARG_MAX / ARG_MIN */

#define AI_ARG(NAME, T, BETTER)                                                         \
  void NAME(const ai_arg_params *p, const T *input, void *output) {                     \
    int32_t *o32 = (int32_t *)output;                                                   \
    int64_t *o64 = (int64_t *)output;                                                   \
    int32_t outer, inner, i;                                                            \
    for (outer = 0; outer < p->outer; ++outer) {                                        \
      const T *base = input + (size_t)outer * (size_t)p->axis_size * (size_t)p->inner;  \
      for (inner = 0; inner < p->inner; ++inner) {                                      \
        const T *x = base + inner;                                                      \
        T best = x[0];                                                                  \
        int32_t at = 0;                                                                 \
        for (i = 1; i < p->axis_size; ++i) {                                            \
          const T v = x[(size_t)i * (size_t)p->inner];                                  \
          if (BETTER(v, best)) {                                                        \
            best = v;                                                                   \
            at = i;                                                                     \
          }                                                                             \
        }                                                                               \
        if (p->out_i64) {                                                               \
          *o64++ = at;                                                                  \
        } else {                                                                        \
          *o32++ = at;                                                                  \
        }                                                                               \
      }                                                                                 \
    }                                                                                   \
  }

AI_ARG(ai_arg_max_f32, float, AI_GT)
AI_ARG(ai_arg_min_f32, float, AI_LT)
AI_ARG(ai_arg_max_s8, int8_t, AI_GT)
AI_ARG(ai_arg_min_s8, int8_t, AI_LT)
