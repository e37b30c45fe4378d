/* SVDF kernels (ai_kernels_svdf.h, docs/kernels_svdf.md).
 *
 * int8 is bit-exact with TFLite Micro: the feature dot products requantise to the int16
 * state with TFLite's double rounding, the time dot products accumulate int16 x int16 in
 * int32 (wrapping, like TFLM's), the rank reduction adds to the bias, and the output
 * requantises to int8. All sums are integer, so any order gives TFLM's result; on cores with
 * the DSP extension the dot products use SMLAD two products at a time.
 *
 * float32 keeps TFLM's operation order exactly: each feature and time dot product starts
 * from 0 and runs in index order, the output starts from the bias and adds the rank's time
 * sums in filter order. Contraction into fused multiply-adds is switched off for the same
 * reason as in ai_hybrid.c (it would round once instead of twice).
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <string.h>

#include "ai_kernels_svdf.h"
#include "ai_qmath.h"
#include "ai_simd.h"

/* s[i] = s[i + 1] for i < n - 1, two elements per 32-bit load/store: the source is one
 * element ahead, so every word is read before it is overwritten (newlib's memmove falls
 * back to bytes for this 2-byte offset). */
static void shift_left_s16(int16_t *s, int32_t n) {
  int32_t i = 0;
  for (; i + 2 < n; i += 2) {
    uint32_t v;
    memcpy(&v, s + i + 1, sizeof v);
    memcpy(s + i, &v, sizeof v);
  }
  for (; i + 1 < n; ++i) {
    s[i] = s[i + 1];
  }
}

/* sum w[i] * x[i], int8 x int8 */
static int32_t dot_s8(const int8_t *w, const int8_t *x, int32_t n, int32_t acc) {
  int32_t i = 0;
#if defined(__ARM_FEATURE_DSP)
  for (; i + 4 <= n; i += 4) {
    const uint32_t wv = rd32(w + i), xv = rd32(x + i);
    acc = smlad(sxtb16(wv), sxtb16(xv), acc);
    acc = smlad(sxtb16_r8(wv), sxtb16_r8(xv), acc);
  }
#endif
  for (; i < n; ++i) {
    acc = (int32_t)((uint32_t)acc + (uint32_t)((int32_t)w[i] * (int32_t)x[i]));
  }
  return acc;
}

/* sum a[i] * b[i], int16 x int16 (int32 wrapping) */
static int32_t dot_s16(const int16_t *a, const int16_t *b, int32_t n, int32_t acc) {
  int32_t i = 0;
#if defined(__ARM_FEATURE_DSP)
  for (; i + 2 <= n; i += 2) {
    uint32_t av, bv;
    memcpy(&av, a + i, sizeof av);
    memcpy(&bv, b + i, sizeof bv);
    acc = smlad(av, bv, acc);
  }
#endif
  for (; i < n; ++i) {
    acc = (int32_t)((uint32_t)acc + (uint32_t)((int32_t)a[i] * (int32_t)b[i]));
  }
  return acc;
}

void ai_svdf_s8(const ai_svdf_s8_params *p, const int8_t *input, const int8_t *weights_feature,
                const int16_t *weights_time, const int32_t *feature_bias, const int32_t *bias,
                int16_t *state, int8_t *output) {
  const int32_t n_in = p->input_size, m = p->memory, rank = p->rank;
  const int32_t filters = p->units * rank;
  const int32_t total = p->batches * filters * m;
  const rq_t rq1 = rq_prep(p->feature_mult, p->feature_shift);
  const rq_t rq2 = rq_prep(p->out_mult, p->out_shift);
  /* one step older: the whole buffer moves left; each filter's newest slot is rewritten */
  shift_left_s16(state, total);
  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *x = input + b * n_in;
    int16_t *st = state + b * filters * m;
    const int8_t *wf = weights_feature;
    for (int32_t f = 0; f < filters; ++f, wf += n_in) {
      const int32_t acc = dot_s8(wf, x, n_in, feature_bias[f]);
      const int32_t v = rq_apply(acc, &rq1);
      st[f * m + m - 1] = (int16_t)AI_CLAMP(v, INT16_MIN, INT16_MAX);
    }
    const int16_t *wt = weights_time;
    const int16_t *sf = st;
    int8_t *out = output + b * p->units;
    for (int32_t u = 0; u < p->units; ++u) {
      int32_t acc = bias[u];
      for (int32_t r = 0; r < rank; ++r, wt += m, sf += m) {
        acc = dot_s16(wt, sf, m, acc);
      }
      const int32_t y = ai_wadd(rq_apply(acc, &rq2), p->out_zero_point);
      out[u] = (int8_t)AI_CLAMP(y, INT8_MIN, INT8_MAX);
    }
  }
}

void ai_svdf_f32(const ai_svdf_f32_params *p, const float *input, const float *weights_feature,
                 const float *weights_time, const float *bias, float *state, float *output) {
  const int32_t n_in = p->input_size, m = p->memory, rank = p->rank;
  const int32_t filters = p->units * rank;
  const int32_t total = p->batches * filters * m;
  memmove(state, state + 1, (size_t)(total - 1) * sizeof(float));
  for (int32_t b = 0; b < p->batches; ++b) {
    const float *x = input + b * n_in;
    float *st = state + b * filters * m;
    const float *wf = weights_feature;
    for (int32_t f = 0; f < filters; ++f, wf += n_in) {
      float acc = 0.0f;
      for (int32_t i = 0; i < n_in; ++i) {
        acc += wf[i] * x[i];
      }
      st[f * m + m - 1] = acc;
    }
    const float *wt = weights_time;
    const float *sf = st;
    float *out = output + b * p->units;
    for (int32_t u = 0; u < p->units; ++u) {
      float y = bias ? bias[u] : 0.0f;
      for (int32_t r = 0; r < rank; ++r, wt += m, sf += m) {
        float t = 0.0f;
        for (int32_t j = 0; j < m; ++j) {
          t += wt[j] * sf[j];
        }
        y += t;
      }
      y = y < p->act_min ? p->act_min : y;
      out[u] = y > p->act_max ? p->act_max : y;
    }
  }
}
