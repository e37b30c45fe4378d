/* RESHAPE that cannot alias its input: a byte copy (stm32ai/passes/lower/reshape.py).
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * Parameter fields are the lowering's attrs, all computed at generate time.
 * Details: docs/kernels_reshape.md.
 */
#ifndef AI_KERNELS_RESHAPE_H
#define AI_KERNELS_RESHAPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- copy (RESHAPE that cannot alias) ------------------------------------------------- */

typedef struct {
  int32_t size; /* bytes */
} ai_copy_params;
void ai_copy(const ai_copy_params *p, const void *input, void *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_RESHAPE_H */
