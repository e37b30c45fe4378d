/* IF with a run-time condition (stm32ai/frontend/control_flow.py, passes/lower/control_flow.py):
 * both branches were computed; the condition picks the value copied to the output.
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * Details: docs/kernels_control_flow.md.
 */
#ifndef AI_KERNELS_CONTROL_FLOW_H
#define AI_KERNELS_CONTROL_FLOW_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int32_t size; /* bytes of the output */
} ai_if_select_params;

/* output = cond[0] != 0 ? then_value : else_value (size bytes) */
void ai_if_select(const ai_if_select_params *p, const uint8_t *cond, const void *then_value,
                  const void *else_value, void *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_CONTROL_FLOW_H */
