/* SOFTMAX, int8 (int8 or int16 output) and float32 (stm32ai/passes/lower/softmax.py).
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * Parameter fields are the lowering's attrs, all computed at generate time.
 * int8 is bit-exact with TFLite Micro's reference kernel. Details: docs/kernels_softmax.md.
 */
#ifndef AI_KERNELS_SOFTMAX_H
#define AI_KERNELS_SOFTMAX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- SOFTMAX (last axis; output may alias input) ---------------------------------------- */

typedef struct {
  int32_t outer, depth;
  int32_t input_multiplier, input_left_shift, diff_min;
} ai_softmax_s8_params;
void ai_softmax_s8(const ai_softmax_s8_params *p, const int8_t *input, int8_t *output);

/* int8 -> int16 (output scale 1/65536, zero point -32768); output never aliases the input */
typedef ai_softmax_s8_params ai_softmax_s8_s16_params;
void ai_softmax_s8_s16(const ai_softmax_s8_s16_params *p, const int8_t *input, int16_t *output);

typedef struct {
  int32_t outer, depth;
  float beta;
} ai_softmax_f32_params;
void ai_softmax_f32(const ai_softmax_f32_params *p, const float *input, float *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_SOFTMAX_H */
