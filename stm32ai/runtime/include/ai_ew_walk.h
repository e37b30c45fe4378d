/* The broadcast walker of the elementwise and comparison kernels (ai_elementwise.c,
 * ai_compare.c): up to three inputs, each with its own element size and strides, and an
 * output of its own element size (a comparison reads float and writes bool).
 *
 * The 5 outer dimensions of `shape` (AI_MAX_DIMS) run as an odometer; each innermost row
 * (shape[AI_MAX_DIMS - 1] elements, input strides s[k][AI_MAX_DIMS - 1]) goes to `row`.
 * Strides are in elements and 0 along a broadcast dimension; the generator merges dimensions
 * contiguous for every input (stm32ai/passes/lower/binary.py loop_attrs). Rows are written in
 * output order, element i after element i of every input is read, so the output may alias an
 * input that covers it element for element. */
#ifndef AI_EW_WALK_H
#define AI_EW_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "ai_platform.h" /* AI_MAX_DIMS */

typedef void (*ai_ew_row)(const void *p, const void *const *in, const int32_t *stride, void *y,
                          int32_t n);

static inline void ai_ew_walk(const int32_t *shape, int n_in, const int32_t *const *strides,
                              const size_t *in_bytes, size_t out_bytes, const void *p,
                              const void *const *in, void *out, ai_ew_row row) {
  enum { OUTER = AI_MAX_DIMS - 1 };
  int32_t idx[OUTER] = {0};
  ptrdiff_t off[3] = {0, 0, 0};
  int32_t rows = 1;
  for (int d = 0; d < OUTER; d++) {
    rows *= shape[d];
  }
  const int32_t n = shape[OUTER];
  int32_t inner[3] = {0, 0, 0};
  for (int k = 0; k < n_in; k++) {
    inner[k] = strides[k][OUTER];
  }
  uint8_t *y = (uint8_t *)out;
  for (int32_t r = 0; r < rows; r++) {
    const void *ptr[3] = {NULL, NULL, NULL};
    for (int k = 0; k < n_in; k++) {
      ptr[k] = (const uint8_t *)in[k] + off[k] * (ptrdiff_t)in_bytes[k];
    }
    row(p, ptr, inner, y, n);
    y += (ptrdiff_t)n * (ptrdiff_t)out_bytes;
    for (int d = OUTER - 1; d >= 0; d--) { /* next row: advance the odometer */
      for (int k = 0; k < n_in; k++) {
        off[k] += strides[k][d];
      }
      if (++idx[d] < shape[d]) {
        break;
      }
      for (int k = 0; k < n_in; k++) {
        off[k] -= (ptrdiff_t)strides[k][d] * shape[d];
      }
      idx[d] = 0;
    }
  }
}

/* One two-input kernel: row function (LOCALS hoisted, EXPR of x = input1, z = input2 of type
 * TI, result of type TO; may read the params `p`) and ai_<OP>(p, input1, input2, output). */
#define AI_EW_BINARY(OP, TI, TO, LOCALS, EXPR)                                                 \
  static void OP##_row(const void *pv, const void *const *in, const int32_t *s, void *yv,    \
                       int32_t n) {                                                          \
    const ai_##OP##_params *p = (const ai_##OP##_params *)pv;                                \
    const TI *a = (const TI *)in[0];                                                         \
    const TI *b = (const TI *)in[1];                                                         \
    TO *y = (TO *)yv;                                                                        \
    LOCALS                                                                                   \
    (void)p;                                                                                 \
    for (int32_t i = 0; i < n; i++, a += s[0], b += s[1]) {                                  \
      const TI x = *a, z = *b;                                                               \
      y[i] = (TO)(EXPR);                                                                     \
    }                                                                                        \
  }                                                                                          \
  void ai_##OP(const ai_##OP##_params *p, const TI *input1, const TI *input2, TO *output) {   \
    const int32_t *st[2] = {p->in1_strides, p->in2_strides};                                 \
    const size_t bytes[2] = {sizeof(TI), sizeof(TI)};                                        \
    const void *in[2] = {input1, input2};                                                    \
    ai_ew_walk(p->out_shape, 2, st, bytes, sizeof(TO), p, in, output, OP##_row);             \
  }

#endif /* AI_EW_WALK_H */
