/* Binary elementwise kernels: ADD, SUB, MUL, MAXIMUM, MINIMUM, DIV (int8, float32, int32;
 * int8 ADD/SUB also through per-input tables).
 *
 * Calling convention (see stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>);
 * Parameter fields are the lowering's attrs (stm32ai/passes/lower/binary.py), all computed
 * at generate time. int8 kernels use integer arithmetic only, bit-exact with TFLite Micro's
 * reference kernels; int32 kernels are plain (unquantised) integer arithmetic.
 * Details: docs/kernels_binary.md.
 *
 * Every binary kernel broadcasts (numpy rules): the output is walked as AI_MAX_DIMS nested
 * loops over `out_shape`, and each input advances by its own element strides (0 along a
 * broadcast dimension). The generator merges dimensions that are contiguous for both inputs,
 * so a same-shape operation is one loop of `out_shape[AI_MAX_DIMS - 1]` elements.
 * The output may alias input1 when input1 covers the output element for element.
 */
#ifndef AI_KERNELS_BINARY_H
#define AI_KERNELS_BINARY_H

#include <stddef.h>
#include <stdint.h>

#include "ai_platform.h" /* AI_MAX_DIMS */

#ifdef __cplusplus
extern "C" {
#endif


/* First fields of every binary kernel's params struct. */
#define AI_BINARY_LOOP_FIELDS                                                                 \
  int32_t out_shape[AI_MAX_DIMS];                                                          \
  int32_t in1_strides[AI_MAX_DIMS];                                                        \
  int32_t in2_strides[AI_MAX_DIMS]

/* ---- ADD / SUB ------------------------------------------------------------------------ */

/* TFLite's quantised ADD and SUB: both inputs shifted left by left_shift (20), rescaled to
 * twice the larger input scale, added or subtracted, rescaled to the output (all
 * multipliers < 1). */
typedef struct {
  AI_BINARY_LOOP_FIELDS;
  int32_t input1_offset, input2_offset, left_shift;
  int32_t input1_multiplier, input1_shift, input2_multiplier, input2_shift;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
} ai_sub_s8_params;
typedef ai_sub_s8_params ai_add_s8_params;
void ai_add_s8(const ai_add_s8_params *p, const int8_t *input1, const int8_t *input2,
               int8_t *output);
void ai_sub_s8(const ai_sub_s8_params *p, const int8_t *input1, const int8_t *input2,
               int8_t *output);

/* ---- int8 ADD / SUB through per-input tables ------------------------------------------ */

/* TFLite's int8 ADD (SUB) rescales each input on its own, r = requant((x + offset) << 20),
 * so the generator tabulates r for all 256 values of each input (stm32ai.passes.lower.
 * binary.lookup_tables_s8; table1/table2 indexed by the input byte read as uint8, SUB's
 * second table negated). Then, with s = table1[x1] + table2[x2]:
 *   mode 0: y = clamp(s >> shift)      (output multiplier, zero point and rounding folded
 *           into the tables; used only when it equals TFLite for all 65536 input pairs;
 *           int16 tables when wide == 0, int32 otherwise)
 *   mode 1: y = clamp(rq_fast(s) + output_offset)     (int32 tables; output_shift <= -2)
 *   mode 2: y = clamp(ai_requant(s) + output_offset)  (int32 tables)
 * Broadcasting as the other binary kernels; the output may alias input1. */
typedef struct {
  AI_BINARY_LOOP_FIELDS;
  int32_t mode, wide, shift;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
} ai_add_lut_s8_params;
void ai_add_lut_s8(const ai_add_lut_s8_params *p, const int8_t *input1, const int8_t *input2,
                   const void *table1, const void *table2, int8_t *output);

/* ai_add_lut_s8 with both tables copied to scratch first (weights in flash with wait states:
 * the per-element lookups then read SRAM; docs/flash_staging.md). Scratch: the two tables,
 * 256 entries each of int16 (mode 0, wide 0) or int32. */
typedef ai_add_lut_s8_params ai_add_lut_staged_s8_params;
void ai_add_lut_staged_s8(const ai_add_lut_staged_s8_params *p, const int8_t *input1,
                          const int8_t *input2, const void *table1, const void *table2,
                          int8_t *output, void *scratch);
int32_t ai_add_lut_staged_s8_scratch_size(const ai_add_lut_staged_s8_params *p);

/* Float kernels: y = clamp(x1 <op> x2, act_min, act_max). */
typedef struct {
  AI_BINARY_LOOP_FIELDS;
  float act_min, act_max;
} ai_binary_f32_params;
typedef ai_binary_f32_params ai_add_f32_params;
typedef ai_binary_f32_params ai_sub_f32_params;
typedef ai_binary_f32_params ai_mul_f32_params;
typedef ai_binary_f32_params ai_div_f32_params;
void ai_add_f32(const ai_add_f32_params *p, const float *input1, const float *input2,
                float *output);
void ai_sub_f32(const ai_sub_f32_params *p, const float *input1, const float *input2,
                float *output);
void ai_mul_f32(const ai_mul_f32_params *p, const float *input1, const float *input2,
                float *output);
void ai_div_f32(const ai_div_f32_params *p, const float *input1, const float *input2,
                float *output);

/* ---- MUL ------------------------------------------------------------------------------ */

/* y = clamp(output_offset + requant((x1 + input1_offset) * (x2 + input2_offset)), act). */
typedef struct {
  AI_BINARY_LOOP_FIELDS;
  int32_t input1_offset, input2_offset;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
} ai_mul_s8_params;
void ai_mul_s8(const ai_mul_s8_params *p, const int8_t *input1, const int8_t *input2,
               int8_t *output);

/* ---- DIV int8 ------------------------------------------------------------------------ */

/* TFLite's DivElementwise: v1 = x1 + input1_offset, v2 = x2 + input2_offset, the sign moved
 * to v1, q = SRDHM(v1 << headroom(v1), reciprocal(v2)), then
 * y = clamp(output_offset + RoundingDivideByPOT(SRDHM(q, output_multiplier), e)) with
 * e = recip_shift + headroom - output_shift. Where e > 31 (TFLite: undefined; |quotient|
 * < 0.5 LSB) the result is output_offset; v2 == 0 gives act_max / act_min by the sign of v1
 * (output_offset for 0 / 0). The generator checks e >= 0 for every input pair. */
typedef struct {
  AI_BINARY_LOOP_FIELDS;
  int32_t input1_offset, input2_offset;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
} ai_div_s8_params;
void ai_div_s8(const ai_div_s8_params *p, const int8_t *input1, const int8_t *input2,
               int8_t *output);

/* ---- MAXIMUM / MINIMUM (raw values; int8 only with identical quantisation) ----------- */

typedef struct {
  AI_BINARY_LOOP_FIELDS;
} ai_minmax_params;
typedef ai_minmax_params ai_maximum_s8_params;
typedef ai_minmax_params ai_minimum_s8_params;
typedef ai_minmax_params ai_maximum_f32_params;
typedef ai_minmax_params ai_minimum_f32_params;
void ai_maximum_s8(const ai_maximum_s8_params *p, const int8_t *input1, const int8_t *input2,
                   int8_t *output);
void ai_minimum_s8(const ai_minimum_s8_params *p, const int8_t *input1, const int8_t *input2,
                   int8_t *output);
void ai_maximum_f32(const ai_maximum_f32_params *p, const float *input1, const float *input2,
                    float *output);
void ai_minimum_f32(const ai_minimum_f32_params *p, const float *input1, const float *input2,
                    float *output);

/* ---- int32 (unquantised) -------------------------------------------------------------- */

/* y = clamp(x1 <op> x2, act_min, act_max). ADD, SUB and MUL wrap (two's complement); DIV
 * truncates toward zero, with x / 0 = 0 and INT32_MIN / -1 = INT32_MIN (what the Cortex-M
 * SDIV instruction gives; TFLite refuses or traps on both). MAXIMUM/MINIMUM take
 * ai_minmax_params (no activation). */
typedef struct {
  AI_BINARY_LOOP_FIELDS;
  int32_t act_min, act_max;
} ai_binary_s32_params;
typedef ai_binary_s32_params ai_add_s32_params;
typedef ai_binary_s32_params ai_sub_s32_params;
typedef ai_binary_s32_params ai_mul_s32_params;
typedef ai_binary_s32_params ai_div_s32_params;
typedef ai_minmax_params ai_maximum_s32_params;
typedef ai_minmax_params ai_minimum_s32_params;
void ai_add_s32(const ai_add_s32_params *p, const int32_t *input1, const int32_t *input2,
                int32_t *output);
void ai_sub_s32(const ai_sub_s32_params *p, const int32_t *input1, const int32_t *input2,
                int32_t *output);
void ai_mul_s32(const ai_mul_s32_params *p, const int32_t *input1, const int32_t *input2,
                int32_t *output);
void ai_div_s32(const ai_div_s32_params *p, const int32_t *input1, const int32_t *input2,
                int32_t *output);
void ai_maximum_s32(const ai_maximum_s32_params *p, const int32_t *input1,
                    const int32_t *input2, int32_t *output);
void ai_minimum_s32(const ai_minimum_s32_params *p, const int32_t *input1,
                    const int32_t *input2, int32_t *output);

/* MAXIMUM / MINIMUM of int16 (inputs and output share one quantisation) and plain int64 */
typedef ai_minmax_params ai_maximum_s16_params;
typedef ai_minmax_params ai_minimum_s16_params;
typedef ai_minmax_params ai_maximum_s64_params;
typedef ai_minmax_params ai_minimum_s64_params;
void ai_maximum_s16(const ai_maximum_s16_params *p, const int16_t *input1,
                    const int16_t *input2, int16_t *output);
void ai_minimum_s16(const ai_minimum_s16_params *p, const int16_t *input1,
                    const int16_t *input2, int16_t *output);
void ai_maximum_s64(const ai_maximum_s64_params *p, const int64_t *input1,
                    const int64_t *input2, int64_t *output);
void ai_minimum_s64(const ai_minimum_s64_params *p, const int64_t *input1,
                    const int64_t *input2, int64_t *output);

/* ---- row entries of a stripe's row members (docs/stripes.md, "The executor") ------------ */

/* The int8 kernels a stripe runs a few rows at a time (passes/stripes.py ROWS_KERNELS): the
 * member's inputs and output have one shape, walked flat (out_shape {1, .., 1, size}, unit
 * strides), so a call is `n` elements from each pointer, with the layer's const params (never
 * copied or patched). Same row loops as the usual entries. */
void ai_add_s8_rows(const ai_add_s8_params *p, int32_t n, const int8_t *input1, const int8_t *input2,
                    int8_t *output);
void ai_sub_s8_rows(const ai_sub_s8_params *p, int32_t n, const int8_t *input1, const int8_t *input2,
                    int8_t *output);
void ai_mul_s8_rows(const ai_mul_s8_params *p, int32_t n, const int8_t *input1, const int8_t *input2,
                    int8_t *output);
void ai_maximum_s8_rows(const ai_maximum_s8_params *p, int32_t n, const int8_t *input1,
                        const int8_t *input2, int8_t *output);
void ai_minimum_s8_rows(const ai_minimum_s8_params *p, int32_t n, const int8_t *input1,
                        const int8_t *input2, int8_t *output);
void ai_add_lut_s8_rows(const ai_add_lut_s8_params *p, int32_t n, const int8_t *input1,
                        const int8_t *input2, const void *table1, const void *table2, int8_t *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_BINARY_H */
