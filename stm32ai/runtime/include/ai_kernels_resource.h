/* CALL_ONCE of resource variables: the init subgraph's constant initial values
 * (stm32ai/frontend/resource_vars.py, stm32ai/passes/lower/resource.py).
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * READ_VARIABLE and ASSIGN_VARIABLE are plain byte copies (ai_copy, ai_kernels_reshape.h).
 * Details: docs/kernels_resource.md.
 */
#ifndef AI_KERNELS_RESOURCE_H
#define AI_KERNELS_RESOURCE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int32_t size; /* bytes of the variable */
} ai_var_init_params;

/* If *flag is 0 (ai_create / ai_reset zero the state area), copy `size` bytes of the initial
 * value into the variable's state and set *flag to 1; otherwise do nothing. */
void ai_var_init(const ai_var_init_params *p, const void *initial, uint8_t *flag, void *state);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_RESOURCE_H */
