/* CALL_ONCE of resource variables. See docs/kernels_resource.md. */
#include <string.h>

#include "ai_kernels_resource.h"

void ai_var_init(const ai_var_init_params *p, const void *initial, uint8_t *flag, void *state) {
  if (*flag == 0u) {
    memcpy(state, initial, (size_t)p->size);
    *flag = 1u;
  }
}
