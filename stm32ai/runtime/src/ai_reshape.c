/* RESHAPE that cannot alias its input: a byte copy. See docs/kernels_reshape.md.
 * memmove: the planner may overlap the buffers; a copy onto itself is a no-op. */
#include <string.h>

#include "ai_kernels_reshape.h"

void ai_copy(const ai_copy_params *p, const void *input, void *output) {
  if (input != output) {
    memmove(output, input, (size_t)p->size);
  }
}
