/* Comparisons (EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL), LOGICAL_AND,
 * LOGICAL_OR, LOGICAL_NOT and SELECT_V2, broadcasting up to 6-D.
 *
 * Calling convention (see stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>);
 * Parameters are the attrs of stm32ai/passes/lower/compare.py. bool is one byte, 0 or 1 (as
 * TFLite's bool); an input byte other than 0 reads as true.
 * Comparisons of float32, int32, int64 and bool compare raw values; int8 compares TFLite's
 * rescaled values: ((x - zero_point) << 8) times the input's scale as a Q31
 * multiplier with a right shift (each input by its own, so inputs of different quantisation
 * compare as TFLite Micro does). Details: docs/kernels_compare.md.
 */
#ifndef AI_KERNELS_COMPARE_H
#define AI_KERNELS_COMPARE_H

#include <stdint.h>

#include "ai_kernels_binary.h" /* AI_BINARY_LOOP_FIELDS */

#ifdef __cplusplus
extern "C" {
#endif


typedef struct {
  AI_BINARY_LOOP_FIELDS;
} ai_cmp_params;

typedef struct {
  AI_BINARY_LOOP_FIELDS;
  int32_t left_shift;
  int32_t input1_offset, input1_multiplier, input1_shift;
  int32_t input2_offset, input2_multiplier, input2_shift;
} ai_cmp_q_params;

#define AI_CMP_DECL(OP, SUF, T, PT)                                                            \
  typedef PT ai_##OP##_##SUF##_params;                                                         \
  void ai_##OP##_##SUF(const ai_##OP##_##SUF##_params *p, const T *input1, const T *input2,     \
                       uint8_t *output)

#define AI_CMP_DECL_ALL(OP)                                                                    \
  AI_CMP_DECL(OP, f32, float, ai_cmp_params);                                                  \
  AI_CMP_DECL(OP, s32, int32_t, ai_cmp_params);                                                \
  AI_CMP_DECL(OP, s64, int64_t, ai_cmp_params);                                                \
  AI_CMP_DECL(OP, b, uint8_t, ai_cmp_params);                                                  \
  AI_CMP_DECL(OP, s8, int8_t, ai_cmp_q_params)

AI_CMP_DECL_ALL(equal);
AI_CMP_DECL_ALL(not_equal);
AI_CMP_DECL_ALL(greater);
AI_CMP_DECL_ALL(greater_equal);
AI_CMP_DECL_ALL(less);
AI_CMP_DECL_ALL(less_equal);

/* ---- logical (bool) ---- */
typedef ai_cmp_params ai_logical_and_params;
typedef ai_cmp_params ai_logical_or_params;
void ai_logical_and(const ai_logical_and_params *p, const uint8_t *input1, const uint8_t *input2,
                    uint8_t *output);
void ai_logical_or(const ai_logical_or_params *p, const uint8_t *input1, const uint8_t *input2,
                   uint8_t *output);

typedef struct {
  int32_t size;
} ai_logical_not_params;
void ai_logical_not(const ai_logical_not_params *p, const uint8_t *input, uint8_t *output);

/* ---- SELECT_V2: y = cond ? x : y, all three broadcast to the output; elements of 1, 2, 4
 * or 8 bytes copied raw (TFLite does not requantise: the generator checks x, y and the
 * output share one quantisation). ---- */
typedef struct {
  int32_t out_shape[AI_MAX_DIMS];
  int32_t cond_strides[AI_MAX_DIMS];
  int32_t x_strides[AI_MAX_DIMS];
  int32_t y_strides[AI_MAX_DIMS];
} ai_select_params;
typedef ai_select_params ai_select_v2_b1_params;
typedef ai_select_params ai_select_v2_b2_params;
typedef ai_select_params ai_select_v2_b4_params;
typedef ai_select_params ai_select_v2_b8_params;
void ai_select_v2_b1(const ai_select_v2_b1_params *p, const uint8_t *cond, const uint8_t *x,
                     const uint8_t *y, uint8_t *output);
void ai_select_v2_b2(const ai_select_v2_b2_params *p, const uint8_t *cond, const uint16_t *x,
                     const uint16_t *y, uint16_t *output);
void ai_select_v2_b4(const ai_select_v2_b4_params *p, const uint8_t *cond, const uint32_t *x,
                     const uint32_t *y, uint32_t *output);
void ai_select_v2_b8(const ai_select_v2_b8_params *p, const uint8_t *cond, const uint64_t *x,
                     const uint64_t *y, uint64_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_COMPARE_H */
