/* FLOOR_DIV: y = floor(x1 / x2), float32 and int32 (unquantised), broadcasting up to 6-D.
 *
 * Calling convention (see stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>);
 * The output is walked as AI_MAX_DIMS nested loops over `out_shape`; each input advances
 * by its own element strides (0 along a broadcast dimension), as the binary kernels do
 * (stm32ai/passes/lower/floor_div.py merges contiguous dimensions). Details:
 * docs/kernels_binary.md, "FLOOR_DIV".
 *
 * float32: (float)floor((double)x1 / (double)x2), TFLite's reference FloorDiv (the quotient in
 * double, so a float quotient that rounds up to an integer cannot move the floor); x / 0 gives
 * IEEE +-inf / NaN (both references refuse the inference).
 * int32: the floor of the exact quotient; x / 0 = 0 and INT32_MIN / -1 = INT32_MIN, as the
 * truncating int32 DIV kernel (TFLite refuses a zero divisor).
 */
#ifndef AI_KERNELS_FLOOR_DIV_H
#define AI_KERNELS_FLOOR_DIV_H

#include <stdint.h>

#include "ai_kernels_binary.h" /* AI_BINARY_LOOP_FIELDS */

#ifdef __cplusplus
extern "C" {
#endif


typedef struct {
  AI_BINARY_LOOP_FIELDS;
} ai_floor_div_params;
typedef ai_floor_div_params ai_floor_div_f32_params;
typedef ai_floor_div_params ai_floor_div_s32_params;

void ai_floor_div_f32(const ai_floor_div_f32_params *p, const float *input1, const float *input2,
                      float *output);
void ai_floor_div_s32(const ai_floor_div_s32_params *p, const int32_t *input1,
                      const int32_t *input2, int32_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_FLOOR_DIV_H */
