/* CAST between the integer, boolean and float32 types (stm32ai/passes/lower/cast.py).
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * Parameter fields are the lowering's attrs, all computed at generate time.
 * Details: docs/kernels_cast.md.
 */
#ifndef AI_KERNELS_CAST_H
#define AI_KERNELS_CAST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CAST ------------------------------------------------------------------------------ */

/* Element type codes of ai_cast_params.in_type / out_type. */
#define AI_CAST_BOOL 0
#define AI_CAST_S8 1
#define AI_CAST_U8 2
#define AI_CAST_S16 3
#define AI_CAST_U16 4
#define AI_CAST_S32 5
#define AI_CAST_U32 6
#define AI_CAST_S64 7
#define AI_CAST_F32 8

/* Integer -> integer wraps (two's complement), -> bool is (x != 0), float -> integer
 * truncates toward zero (saturating to int32 range; NaN -> 0) then wraps, integer -> float
 * rounds to nearest. Output may alias the input when both elements have the same size. */
typedef struct {
  int32_t size, in_type, out_type;
} ai_cast_params;
void ai_cast(const ai_cast_params *p, const void *input, void *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_CAST_H */
