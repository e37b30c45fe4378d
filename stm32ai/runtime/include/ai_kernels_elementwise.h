/* Elementwise math: unary float32 math (ABS, NEG, CEIL, FLOOR, ROUND, SQRT, RSQRT, EXP, LOG,
 * SIN, COS, SQUARE, ELU), int16 ABS, SQUARED_DIFFERENCE (float32, int32, int8, int16),
 * FLOOR_MOD (float32, int32), POW (float32), ADD_N (float32, int8), ZEROS_LIKE, FILL.
 * (int8 ABS, RSQRT and ELU are 256-entry tables run by ai_lut8, ai_kernels_activations.h.)
 *
 * Calling convention (see stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>);
 * Parameters are the attrs of stm32ai/passes/lower/elementwise.py, computed at generate time.
 * The binary kernels broadcast as the binary family (AI_BINARY_LOOP_FIELDS, ai_kernels_binary.h).
 * Arithmetic is TFLite Micro's reference arithmetic; details: docs/kernels_elementwise.md.
 */
#ifndef AI_KERNELS_ELEMENTWISE_H
#define AI_KERNELS_ELEMENTWISE_H

#include <stdint.h>

#include "ai_kernels_binary.h" /* AI_BINARY_LOOP_FIELDS */

#ifdef __cplusplus
extern "C" {
#endif


/* ---- unary, float32: y[i] = f(x[i]) over `size` elements (in place allowed) ---- */
typedef struct {
  int32_t size;
} ai_unary_f32_params;

#define AI_UNARY_F32_DECL(NAME)                                                                \
  typedef ai_unary_f32_params ai_##NAME##_f32_params;                                          \
  void ai_##NAME##_f32(const ai_##NAME##_f32_params *p, const float *input, float *output)

AI_UNARY_F32_DECL(abs);
AI_UNARY_F32_DECL(neg);
AI_UNARY_F32_DECL(ceil);
AI_UNARY_F32_DECL(floor);
AI_UNARY_F32_DECL(round);
AI_UNARY_F32_DECL(sqrt);
AI_UNARY_F32_DECL(rsqrt);
AI_UNARY_F32_DECL(exp);
AI_UNARY_F32_DECL(log);
AI_UNARY_F32_DECL(sin);
AI_UNARY_F32_DECL(cos);
AI_UNARY_F32_DECL(square);
AI_UNARY_F32_DECL(elu);

/* ---- ABS int16. mode 0: raw int16 (no quantisation), |x| wrapping as a cast of abs() does
 * (|-32768| = -32768); mode 1: quantised, same scale: clamp(|x|); mode 2: quantised,
 * rescaled: clamp(requant(|x|, multiplier, shift)). Zero points are 0 (TFLM requires it). */
typedef struct {
  int32_t size;
  int32_t mode;
  int32_t multiplier, shift;
} ai_abs_s16_params;
void ai_abs_s16(const ai_abs_s16_params *p, const int16_t *input, int16_t *output);

/* ---- RSQRT int16 (zero points 0): TFLite Micro's RsqrtEvalQuantized per element: 1/sqrt(x)
 * by gemmlowp Newton-Raphson (GetInvSqrtQuantizedMultiplierExp), requantised by
 * (multiplier, shift) = 1 / (sqrt(input scale) * output scale); x <= 0 gives 32767 (TFLite
 * fails the inference on x < 0). ---- */
typedef struct {
  int32_t size;
  int32_t multiplier, shift;
} ai_rsqrt_s16_params;
void ai_rsqrt_s16(const ai_rsqrt_s16_params *p, const int16_t *input, int16_t *output);

/* ---- SQUARED_DIFFERENCE ---- */
typedef struct {
  AI_BINARY_LOOP_FIELDS;
} ai_ew_loop_params;
typedef ai_ew_loop_params ai_squared_difference_f32_params;
typedef ai_ew_loop_params ai_squared_difference_s32_params;
void ai_squared_difference_f32(const ai_squared_difference_f32_params *p, const float *input1,
                               const float *input2, float *output);
/* int32: (x1 - x2)^2 wrapping modulo 2^32 (TFLite's int32 arithmetic, defined here). */
void ai_squared_difference_s32(const ai_squared_difference_s32_params *p, const int32_t *input1,
                               const int32_t *input2, int32_t *output);

/* int8 / int16: each input (x + offset) << left_shift rescaled to twice the larger input scale
 * (multiplier < 1), the difference squared, requantised to the output, clamped. */
typedef struct {
  AI_BINARY_LOOP_FIELDS;
  int32_t input1_offset, input2_offset, left_shift;
  int32_t input1_multiplier, input1_shift, input2_multiplier, input2_shift;
  int32_t output_multiplier, output_shift, output_offset;
} ai_squared_difference_q_params;
typedef ai_squared_difference_q_params ai_squared_difference_s8_params;
typedef ai_squared_difference_q_params ai_squared_difference_s16_params;
void ai_squared_difference_s8(const ai_squared_difference_s8_params *p, const int8_t *input1,
                              const int8_t *input2, int8_t *output);
void ai_squared_difference_s16(const ai_squared_difference_s16_params *p, const int16_t *input1,
                               const int16_t *input2, int16_t *output);

/* ---- FLOOR_MOD: the remainder with the divisor's sign (x mod 0 = 0 and INT32_MIN mod -1 = 0
 * for int32, where TFLite has no answer; fmodf's NaN for float) ---- */
typedef ai_ew_loop_params ai_floor_mod_f32_params;
typedef ai_ew_loop_params ai_floor_mod_s32_params;
void ai_floor_mod_f32(const ai_floor_mod_f32_params *p, const float *input1, const float *input2,
                      float *output);
void ai_floor_mod_s32(const ai_floor_mod_s32_params *p, const int32_t *input1,
                      const int32_t *input2, int32_t *output);

/* ---- POW float32: powf(x1, x2) (LiteRT's reference kernel; TFLite Micro has none) ---- */
typedef ai_ew_loop_params ai_pow_f32_params;
void ai_pow_f32(const ai_pow_f32_params *p, const float *input1, const float *input2,
                float *output);

/* ---- ADD_N: y = sum of n (2..AI_ADD_N_MAX) same-shape inputs; unused input slots are NULL.
 * float32: 0 + x0 + x1 + ... in float, in input order (TFLite's AddN). int8 (one quantisation
 * for all inputs): each (x + input_offset) << 20 rescaled by input_multiplier / input_shift
 * (0.5), summed in int32 starting from the rescaled input_offset itself (TFLM's reference
 * AddN starts its sum there), requantised to the output, clamped. ---- */
#define AI_ADD_N_MAX 8
typedef struct {
  int32_t size, n;
} ai_add_n_f32_params;
typedef struct {
  int32_t size, n;
  int32_t input_offset, left_shift, input_multiplier, input_shift;
  int32_t output_multiplier, output_shift, output_offset;
} ai_add_n_s8_params;
void ai_add_n_f32(const ai_add_n_f32_params *p, const float *in0, const float *in1,
                  const float *in2, const float *in3, const float *in4, const float *in5,
                  const float *in6, const float *in7, float *output);
void ai_add_n_s8(const ai_add_n_s8_params *p, const int8_t *in0, const int8_t *in1,
                 const int8_t *in2, const int8_t *in3, const int8_t *in4, const int8_t *in5,
                 const int8_t *in6, const int8_t *in7, int8_t *output);

/* ---- ZEROS_LIKE: `bytes` zero bytes (the input is only read for its shape) ---- */
typedef struct {
  int32_t bytes;
} ai_zeros_like_params;
void ai_zeros_like(const ai_zeros_like_params *p, const void *input, void *output);

/* ---- FILL: `count` copies of the `elem_bytes`-byte value (the dims input is a generate-time
 * constant, not read) ---- */
typedef struct {
  int32_t count;
  int32_t elem_bytes;
} ai_fill_params;
void ai_fill(const ai_fill_params *p, const void *value, void *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_ELEMENTWISE_H */
