/* IF with a run-time condition. See docs/kernels_control_flow.md. memmove: the planner may
 * place the output over the value it copies. */
#include <string.h>

#include "ai_kernels_control_flow.h"

void ai_if_select(const ai_if_select_params *p, const uint8_t *cond, const void *then_value,
                  const void *else_value, void *output) {
  const void *src = cond[0] != 0u ? then_value : else_value;
  if (src != output) {
    memmove(output, src, (size_t)p->size);
  }
}
