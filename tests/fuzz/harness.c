/* Fuzz harness: create the model, fill every input with seeded pseudo-random data (floats
 * in [-1, 1), other types any bit pattern), run one inference, touch every output byte. */
#include <stdint.h>
#include <stdio.h>

#include "ai_runtime.h"
#include "network.h"

static uint32_t next(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s;
}

int main(void) {
  ai_handle h;
  uint32_t seed = 12345u;
  if (ai_create(&network_info, NULL, &h) != AI_OK) {
    fprintf(stderr, "ai_create: %s\n", ai_get_error(NULL));
    return 3;
  }
  for (int32_t i = 0; i < ai_get_input_size(h); i++) {
    ai_tensor *t = ai_get_input(h, i);
    if (t->dtype.code == AI_DT_FLOAT && t->dtype.bits == 32) {
      float *p = (float *)t->data;
      for (uint32_t k = 0; k < t->size_bytes / 4u; k++) {
        p[k] = (float)((int32_t)(next(&seed) >> 8) - (1 << 23)) / (float)(1 << 23);
      }
    } else {
      uint8_t *p = (uint8_t *)t->data;
      for (uint32_t k = 0; k < t->size_bytes; k++) {
        p[k] = (uint8_t)(next(&seed) >> 24);
      }
    }
  }
  if (ai_run(h) != AI_OK) {
    fprintf(stderr, "ai_run: %s\n", ai_get_error(h));
    return 5;
  }
  uint32_t sum = 0;
  for (int32_t i = 0; i < ai_get_output_size(h); i++) {
    ai_tensor *t = ai_get_output(h, i);
    const uint8_t *p = (const uint8_t *)t->data;
    for (uint32_t k = 0; k < t->size_bytes; k++) {
      sum = sum * 31u + p[k];
    }
  }
  printf("ok %08lx\n", (unsigned long)sum);
  return ai_destroy(h) == AI_OK ? 0 : 6;
}
