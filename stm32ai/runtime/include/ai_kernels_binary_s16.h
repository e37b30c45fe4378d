/* ADD / SUB / MUL on int16 (16x8 quantisation, zero points 0), broadcasting like the other
 * binary kernels (ai_kernels_binary.h: AI_BINARY_DIMS loops over out_shape, per-input
 * element strides). Bit-exact with TFLite Micro:
 *   ADD/SUB: TFLite's general path with left_shift 15: each input (x + offset) << 15 is
 *     rescaled by its multiplier (< 1), the two are added (subtracted), the sum rescaled to
 *     the output, + output_offset, clamped;
 *   MUL: clamp(requant((x1 + off1) * (x2 + off2), output multiplier) + output_offset).
 * Generator: stm32ai/passes/lower/s16.py; docs/kernels_s16.md. */
#ifndef AI_KERNELS_BINARY_S16_H
#define AI_KERNELS_BINARY_S16_H

#include <stdint.h>

#include "ai_kernels_binary.h" /* AI_BINARY_LOOP_FIELDS */

#ifdef __cplusplus
extern "C" {
#endif


typedef struct {
  AI_BINARY_LOOP_FIELDS;
  int32_t input1_offset, input2_offset, left_shift;
  int32_t input1_multiplier, input1_shift, input2_multiplier, input2_shift;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max, subtract;
} ai_add_s16_params;
typedef ai_add_s16_params ai_sub_s16_params;
void ai_add_s16(const ai_add_s16_params *p, const int16_t *input1, const int16_t *input2,
                int16_t *output);
void ai_sub_s16(const ai_sub_s16_params *p, const int16_t *input1, const int16_t *input2,
                int16_t *output);

typedef struct {
  AI_BINARY_LOOP_FIELDS;
  int32_t input1_offset, input2_offset;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
} ai_mul_s16_params;
void ai_mul_s16(const ai_mul_s16_params *p, const int16_t *input1, const int16_t *input2,
                int16_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_BINARY_S16_H */
