/* ADD, SUB, MUL, MAXIMUM, MINIMUM, DIV: int8, float32 and int32, with numpy broadcasting.
 * See docs/kernels_binary.md.
 *
 * One walker serves every kernel: it runs the 5 outer dimensions of out_shape as an
 * odometer and hands each innermost row (out_shape[5] elements, input strides in1_strides[5]
 * and in2_strides[5]) to a row function. Rows are written in output order and element i of a
 * row is written after element i of both inputs is read, so the output may alias input1.
 *
 * int8 arithmetic is TFLite Micro's, bit for bit (ai_requant = MultiplyByQuantizedMultiplier,
 * double rounding):
 *   ADD/SUB: u = requant((x1 + in1_off) << 20, m1, s1), v = requant((x2 + in2_off) << 20, m2, s2),
 *        y = clamp(requant(u +- v, mo, so) + out_off)
 *   MUL: y = clamp(requant((x1 + in1_off) * (x2 + in2_off), mo, so) + out_off)
 *   DIV: TFLite's DivElementwise (reciprocal of x2 - zp2, numerator normalised by its
 *        headroom), with the output zero point where TFLite's final shift exceeds 31
 *        (|quotient| < 0.5 LSB; undefined in TFLite) and for a zero divisor the saturated
 *        sign of the numerator (docs/kernels_binary.md "DIV int8").
 *   MAXIMUM/MINIMUM: raw comparison (the generator guarantees one shared quantisation).
 * float: y = min(max(x1 <op> x2, act_min), act_max), TFLite's ActivationFunctionWithMinMax.
 * int32 (unquantised): the same clamp around plain integer arithmetic. ADD/SUB/MUL wrap in
 * two's complement (computed on uint32_t, so no signed overflow); DIV truncates toward zero.
 */
#include <string.h>

#include "ai_kernels_binary.h"
#include "ai_fixedpoint.h"
#include "ai_qmath.h"
#include "ai_simd.h"

typedef void (*ai_binary_row)(const void *p, const void *a, const void *b, void *y, int32_t n,
                              int32_t sa, int32_t sb);

static void binary_walk(const int32_t *shape, const int32_t *s1, const int32_t *s2,
                        size_t elem_bytes, const void *p, const void *in1, const void *in2,
                        void *out, ai_binary_row row) {
  enum { OUTER = AI_MAX_DIMS - 1 };
  int32_t idx[OUTER] = {0};
  int32_t rows = 1;
  for (int d = 0; d < OUTER; d++) {
    rows *= shape[d];
  }
  const int32_t n = shape[OUTER];
  const uint8_t *a = (const uint8_t *)in1;
  const uint8_t *b = (const uint8_t *)in2;
  uint8_t *y = (uint8_t *)out;
  ptrdiff_t o1 = 0, o2 = 0, oy = 0;
  for (int32_t r = 0; r < rows; r++) {
    row(p, a + o1 * (ptrdiff_t)elem_bytes, b + o2 * (ptrdiff_t)elem_bytes,
        y + oy * (ptrdiff_t)elem_bytes, n, s1[OUTER], s2[OUTER]);
    oy += n;
    for (int d = OUTER - 1; d >= 0; d--) { /* next row: advance the odometer */
      o1 += s1[d];
      o2 += s2[d];
      if (++idx[d] < shape[d]) {
        break;
      }
      o1 -= (ptrdiff_t)s1[d] * shape[d];
      o2 -= (ptrdiff_t)s2[d] * shape[d];
      idx[d] = 0;
    }
  }
}

/* One binary operator: its row function (LOCALS: declarations hoisted out of the loop, no
 * commas; EXPR combines x = input1 and z = input2 of element type T, may read the params `p`)
 * and its kernel ai_<OP>(p, input1, input2, output) walking the broadcast. */
#define BINARY_OP(OP, T, LOCALS, EXPR)                                                       \
  static void OP##_row(const void *pv, const void *av, const void *bv, void *yv, int32_t n,   \
                       int32_t sa, int32_t sb) {                                             \
    const ai_##OP##_params *p = (const ai_##OP##_params *)pv;                                \
    const T *a = (const T *)av;                                                              \
    const T *b = (const T *)bv;                                                              \
    T *y = (T *)yv;                                                                          \
    LOCALS                                                                                   \
    (void)p;                                                                                 \
    for (int32_t i = 0; i < n; i++, a += sa, b += sb) {                                      \
      const T x = *a, z = *b;                                                                \
      y[i] = (T)(EXPR);                                                                      \
    }                                                                                        \
  }                                                                                          \
  void ai_##OP(const ai_##OP##_params *p, const T *input1, const T *input2, T *output) {     \
    binary_walk(p->out_shape, p->in1_strides, p->in2_strides, sizeof(T), p, input1, input2,  \
                output, OP##_row);                                                           \
  }

static inline int8_t sat_s8(int32_t v, int32_t lo, int32_t hi) {
  return (int8_t)AI_CLAMP(v, lo, hi);
}

/* ---- int8 ------------------------------------------------------------------------------ */

/* ADD (sign 1) and SUB (sign -1) share TFLite's scheme. */
static inline int32_t addsub_s8_one(const ai_sub_s8_params *p, int32_t x, int32_t z, int32_t scale_up,
                                    int32_t sign) {
  const int32_t u = ai_requant((x + p->input1_offset) * scale_up, p->input1_multiplier, p->input1_shift);
  const int32_t v = ai_requant((z + p->input2_offset) * scale_up, p->input2_multiplier, p->input2_shift);
  const int32_t r = ai_requant(u + sign * v, p->output_multiplier, p->output_shift) + p->output_offset;
  return sat_s8(r, p->act_min, p->act_max);
}

static inline int32_t mul_s8_one(const ai_mul_s8_params *p, int32_t x, int32_t z) {
  const int32_t prod = (x + p->input1_offset) * (z + p->input2_offset);
  return sat_s8(ai_requant(prod, p->output_multiplier, p->output_shift) + p->output_offset, p->act_min,
                p->act_max);
}

/* Leading sign bits of x (TFLite's CountLeadingSignBits; 31 for 0 and -1). */
static inline int32_t clrsb32(int32_t x) {
  return ai_fp_clz((uint32_t)(x < 0 ? ~x : x)) - 1;
}

/* TFLite's int8 DIV for one element: v1 = x1 - zp1, v2 = x2 - zp2 (|v| <= 255). */
static inline int32_t div_s8_one(const ai_div_s8_params *p, int32_t v1, int32_t v2) {
  if (v2 == 0) { /* IEEE x / 0 = +-inf and 0 / 0 = NaN, quantised: saturate, or the zero point */
    return v1 > 0 ? p->act_max : v1 < 0 ? p->act_min : AI_CLAMP(p->output_offset, p->act_min, p->act_max);
  }
  if (v2 < 0) {
    v1 = -v1;
    v2 = -v2;
  }
  /* GetReciprocal(v2, 31): v2 normalised to [1, 2) in Q0.31 above one, 1 / (1 + x) */
  const int32_t lz = ai_fp_clz((uint32_t)v2);
  const int32_t inv = ai_fp_one_over_one_plus_x_for_x_in_0_1(
      (int32_t)(((uint32_t)v2 << lz) - 0x80000000u));
  const int32_t headroom = clrsb32(v1);
  const int32_t exponent = (31 - lz) + headroom - p->output_shift; /* >= 0 (checked at generate time) */
  int32_t r = 0; /* exponent > 31: |quotient| < 0.5, TFLite undefined */
  if (exponent <= 31) {
    const int32_t q = ai_srdhm((int32_t)((uint32_t)v1 << headroom), inv);
    r = ai_rdbypot(ai_srdhm(q, p->output_multiplier), exponent);
  }
  return AI_CLAMP(r + p->output_offset, p->act_min, p->act_max);
}

BINARY_OP(add_s8, int8_t, const int32_t scale_up = (int32_t)1 << p->left_shift;,
          addsub_s8_one(p, x, z, scale_up, 1))
BINARY_OP(sub_s8, int8_t, const int32_t scale_up = (int32_t)1 << p->left_shift;,
          addsub_s8_one(p, x, z, scale_up, -1))
BINARY_OP(mul_s8, int8_t, , mul_s8_one(p, x, z))
BINARY_OP(div_s8, int8_t, , div_s8_one(p, x + p->input1_offset, z + p->input2_offset))
BINARY_OP(maximum_s8, int8_t, , x > z ? x : z)
BINARY_OP(minimum_s8, int8_t, , x < z ? x : z)

/* ---- int8 ADD/SUB through tables ---------------------------------------------------------- */

typedef struct {
  const ai_add_lut_s8_params *p;
  const void *t1, *t2;
} lut_ctx;

/* ssat8(v >> 7) in one instruction (SSAT's shifted operand). */
static inline int32_t sat8_asr7(int32_t v) {
#if defined(__ARM_FEATURE_SAT) && defined(__GNUC__)
  int32_t r;
  __asm__("ssat %0, #8, %1, asr #7" : "=r"(r) : "r"(v));
  return r;
#else
  return ssat8(v >> 7);
#endif
}

/* Mode 0 with int16 tables (the usual case): y = clamp((t1[x1] + t2[x2]) >> shift). The
 * dense full-range row (the residual ADD) has its own loop, 4 elements per iteration when
 * the shift is 7 (the widest the generator tries; SSAT takes it as its operand shift). */
static void lut16_row(const void *cv, const void *av, const void *bv, void *yv, int32_t n,
                      int32_t sa, int32_t sb) {
  const lut_ctx *c = (const lut_ctx *)cv;
  const int16_t *t1 = (const int16_t *)c->t1, *t2 = (const int16_t *)c->t2;
  const uint8_t *a = (const uint8_t *)av, *b = (const uint8_t *)bv;
  int8_t *y = (int8_t *)yv;
  const int32_t sh = c->p->shift, lo = c->p->act_min, hi = c->p->act_max;
  if (lo <= -128 && hi >= 127 && sa == 1 && sb == 1 && sh == 7) {
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
      y[i] = (int8_t)sat8_asr7((int32_t)t1[a[i]] + (int32_t)t2[b[i]]);
      y[i + 1] = (int8_t)sat8_asr7((int32_t)t1[a[i + 1]] + (int32_t)t2[b[i + 1]]);
      y[i + 2] = (int8_t)sat8_asr7((int32_t)t1[a[i + 2]] + (int32_t)t2[b[i + 2]]);
      y[i + 3] = (int8_t)sat8_asr7((int32_t)t1[a[i + 3]] + (int32_t)t2[b[i + 3]]);
    }
    for (; i < n; i++) {
      y[i] = (int8_t)sat8_asr7((int32_t)t1[a[i]] + (int32_t)t2[b[i]]);
    }
    return;
  }
  for (int32_t i = 0; i < n; i++, a += sa, b += sb) {
    y[i] = sat_s8(((int32_t)t1[*a] + (int32_t)t2[*b]) >> sh, lo, hi);
  }
}

/* Mode 0 with int32 tables (int16 did not fit): the plain strided loop. */
static void lut32_row(const void *cv, const void *av, const void *bv, void *yv, int32_t n,
                      int32_t sa, int32_t sb) {
  const lut_ctx *c = (const lut_ctx *)cv;
  const int32_t *t1 = (const int32_t *)c->t1, *t2 = (const int32_t *)c->t2;
  const uint8_t *a = (const uint8_t *)av, *b = (const uint8_t *)bv;
  int8_t *y = (int8_t *)yv;
  const int32_t sh = c->p->shift, lo = c->p->act_min, hi = c->p->act_max;
  for (int32_t i = 0; i < n; i++, a += sa, b += sb) {
    y[i] = sat_s8((t1[*a] + t2[*b]) >> sh, lo, hi);
  }
}

/* Modes 1 and 2: int32 tables, then the output requantisation of TFLite. */
static void lut_rq_row(const void *cv, const void *av, const void *bv, void *yv, int32_t n,
                       int32_t sa, int32_t sb) {
  const lut_ctx *c = (const lut_ctx *)cv;
  const int32_t *t1 = (const int32_t *)c->t1, *t2 = (const int32_t *)c->t2;
  const uint8_t *a = (const uint8_t *)av, *b = (const uint8_t *)bv;
  int8_t *y = (int8_t *)yv;
  const ai_add_lut_s8_params *p = c->p;
  const int32_t m = p->output_multiplier, shift = p->output_shift, zp = p->output_offset;
  const int32_t lo = p->act_min, hi = p->act_max;
  if (p->mode == 1) {
    const int32_t rs = -shift - 1, khi = (int32_t)(1u << (uint32_t)rs) >> 1;
    for (int32_t i = 0; i < n; i++, a += sa, b += sb) {
      y[i] = sat_s8(rq_fast(t1[*a] + t2[*b], m, rs, khi) + zp, lo, hi);
    }
    return;
  }
  for (int32_t i = 0; i < n; i++, a += sa, b += sb) {
    y[i] = sat_s8(ai_requant(t1[*a] + t2[*b], m, shift) + zp, lo, hi);
  }
}

void ai_add_lut_s8(const ai_add_lut_s8_params *p, const int8_t *input1, const int8_t *input2,
                   const void *table1, const void *table2, int8_t *output) {
  lut_ctx c;
  c.p = p;
  c.t1 = table1;
  c.t2 = table2;
  const ai_binary_row row = p->mode != 0 ? lut_rq_row : p->wide ? lut32_row : lut16_row;
  binary_walk(p->out_shape, p->in1_strides, p->in2_strides, sizeof(int8_t), &c, input1, input2,
              output, row);
}

int32_t ai_add_lut_staged_s8_scratch_size(const ai_add_lut_staged_s8_params *p) {
  return 2 * 256 * (p->mode == 0 && !p->wide ? 2 : 4);
}

void ai_add_lut_staged_s8(const ai_add_lut_staged_s8_params *p, const int8_t *input1,
                          const int8_t *input2, const void *table1, const void *table2,
                          int8_t *output, void *scratch) {
  const size_t n = (size_t)ai_add_lut_staged_s8_scratch_size(p) / 2;
  uint8_t *t = (uint8_t *)scratch;
  memcpy(t, table1, n);
  memcpy(t + n, table2, n);
  ai_add_lut_s8(p, input1, input2, t, t + n, output);
}

/* ---- float32 ---------------------------------------------------------------------------- */

/* min(max(v, lo), hi) as TFLite (NaN passes through). */
static inline float act_f32(float v, float lo, float hi) {
  const float m = v < lo ? lo : v;
  return hi < m ? hi : m;
}

#define F32_LOCALS const float lo = p->act_min; const float hi = p->act_max;
BINARY_OP(add_f32, float, F32_LOCALS, act_f32(x + z, lo, hi))
BINARY_OP(sub_f32, float, F32_LOCALS, act_f32(x - z, lo, hi))
BINARY_OP(mul_f32, float, F32_LOCALS, act_f32(x * z, lo, hi))
BINARY_OP(div_f32, float, F32_LOCALS, act_f32(x / z, lo, hi))
BINARY_OP(maximum_f32, float, , x > z ? x : z)
BINARY_OP(minimum_f32, float, , x < z ? x : z)

/* ---- int32 ------------------------------------------------------------------------------ */

/* min(max(v, lo), hi) as TFLite's ActivationFunctionWithMinMax. */
static inline int32_t act_s32(int32_t v, int32_t lo, int32_t hi) {
  const int32_t m = v < lo ? lo : v;
  return hi < m ? hi : m;
}

/* Two's complement wrap without signed overflow (the uint32_t -> int32_t conversion is
 * modular with GCC and every compiler for Cortex-M). */
#define WRAP_S32(EXPR) ((int32_t)(EXPR))

/* C division (truncates toward zero) made total: x / 0 = 0 and INT32_MIN / -1 = INT32_MIN,
 * the results of the Cortex-M SDIV instruction (with divide-by-zero trapping off). TFLite
 * Micro refuses a zero divisor and traps on INT32_MIN / -1 on x86. */
static inline int32_t div_s32(int32_t x, int32_t z) {
  if (z == 0) {
    return 0;
  }
  if (z == -1) {
    return WRAP_S32(0u - (uint32_t)x);
  }
  return x / z;
}

#define S32_LOCALS const int32_t lo = p->act_min; const int32_t hi = p->act_max;
BINARY_OP(add_s32, int32_t, S32_LOCALS, act_s32(WRAP_S32((uint32_t)x + (uint32_t)z), lo, hi))
BINARY_OP(sub_s32, int32_t, S32_LOCALS, act_s32(WRAP_S32((uint32_t)x - (uint32_t)z), lo, hi))
BINARY_OP(mul_s32, int32_t, S32_LOCALS, act_s32(WRAP_S32((uint32_t)x * (uint32_t)z), lo, hi))
BINARY_OP(div_s32, int32_t, S32_LOCALS, act_s32(div_s32(x, z), lo, hi))
BINARY_OP(maximum_s32, int32_t, , x > z ? x : z)
BINARY_OP(minimum_s32, int32_t, , x < z ? x : z)

/* ---- MAXIMUM / MINIMUM of int16 (one quantisation) and int64 (plain): stored values ---- */
BINARY_OP(maximum_s16, int16_t, , x > z ? x : z)
BINARY_OP(minimum_s16, int16_t, , x < z ? x : z)
BINARY_OP(maximum_s64, int64_t, , x > z ? x : z)
BINARY_OP(minimum_s64, int64_t, , x < z ? x : z)

/* ---- row entries (ai_kernels_binary.h): a stripe's row members, after every usual entry so
 * that a firmware without stripes drops them (--gc-sections) and keeps its code placement ---- */
#define BINARY_ROWS(OP)                                                                       \
  void ai_##OP##_rows(const ai_##OP##_params *p, int32_t n, const int8_t *input1,            \
                      const int8_t *input2, int8_t *output) {                                \
    OP##_row(p, input1, input2, output, n, 1, 1);                                            \
  }
BINARY_ROWS(add_s8)
BINARY_ROWS(sub_s8)
BINARY_ROWS(mul_s8)
BINARY_ROWS(maximum_s8)
BINARY_ROWS(minimum_s8)
#undef BINARY_ROWS

void ai_add_lut_s8_rows(const ai_add_lut_s8_params *p, int32_t n, const int8_t *input1,
                        const int8_t *input2, const void *table1, const void *table2, int8_t *output) {
  lut_ctx c;
  c.p = p;
  c.t1 = table1;
  c.t2 = table2;
  (p->mode != 0 ? lut_rq_row : p->wide ? lut32_row : lut16_row)(&c, input1, input2, output, n, 1, 1);
}
