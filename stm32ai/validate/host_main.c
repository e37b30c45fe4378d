/* Host harness for `stm32ai validate --mode host` (and the poison runner, several models in one
 * executable; argv[1] picks one, default 0): for each sample, reads every input's bytes from
 * stdin, runs the model, writes every output's bytes to stdout. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ai_runtime.h"
MODEL_INCLUDES

static ai_model_info *const models[] = { MODEL_INFOS };

/* Inputs in rows (--input-rows): the sample is read whole into the harness's own buffer (not in
 * the pool), and this source hands it over row by row, checking the contract: rows in
 * increasing order from row 0, each exactly once, none past the image. */
static int32_t next_row[32];

static ai_status host_row_source(void *user, int32_t i, int32_t row0, int32_t n_rows, void *dst) {
  ai_handle h = (ai_handle)user;
  const ai_tensor *t = i >= 0 && i < 32 && i < ai_get_input_size(h) ? ai_get_input(h, i) : NULL;
  const int32_t rows = t != NULL && t->ndim >= 2 ? (int32_t)t->shape[1] : 1;
  if (t == NULL || n_rows <= 0 || row0 != next_row[i] || row0 + n_rows > rows) {
    fprintf(stderr, "row source: input %d rows [%d, +%d) out of order or past the image\n", (int)i,
            (int)row0, (int)n_rows);
    return AI_ERR_INDEX;
  }
  const size_t row_bytes = t->size_bytes / (uint32_t)rows;
  memcpy(dst, (const uint8_t *)t->data + (size_t)row0 * row_bytes, (size_t)n_rows * row_bytes);
  next_row[i] = row0 + n_rows;
  return AI_OK;
}

int main(int argc, char **argv) {
  const int m = argc > 1 ? atoi(argv[1]) : 0;
  if (argc > 2 || m < 0 || m >= (int)(sizeof models / sizeof models[0])) {
    fprintf(stderr, "usage: %s [model index]\n", argv[0]);
    return 2;
  }
  ai_model_info *const info = models[m];
  /* The harness allocates every activation pool itself (as an application would), so the
   * application-provided path of ai_create_pools is what validation runs. */
  const uint32_t n_pools = info->n_pools != 0u ? info->n_pools : 1u;
  ai_u8 *pools[AI_MAX_POOLS] = {NULL};
  if (n_pools > AI_MAX_POOLS) {
    fprintf(stderr, "model has %u activation pools, AI_MAX_POOLS is %u\n", (unsigned)n_pools, (unsigned)AI_MAX_POOLS);
    return 3;
  }
  for (uint32_t k = 0; k < n_pools; k++) {
    const uint32_t size = info->n_pools != 0u ? info->pools[k].size : info->activations_size;
    pools[k] = calloc(size != 0u ? size : 1u, 1); /* zeroed like a static pool; calloc aligns to >= 8 */
    if (pools[k] == NULL) {
      fprintf(stderr, "out of memory for pool %u\n", (unsigned)k);
      return 3;
    }
  }
  ai_handle h;
  if (ai_create_pools(info, pools, n_pools, &h) != AI_OK) {
    fprintf(stderr, "ai_create_pools: %s\n", ai_get_error(NULL));
    return 3;
  }
  /* application-owned I/O (--no-inputs-allocation / --no-outputs-allocation): the harness's own */
  for (int i = 0; i < ai_get_input_size(h) + ai_get_output_size(h); i++) {
    ai_tensor *t = i < ai_get_input_size(h) ? ai_get_input(h, i) : ai_get_output(h, i - ai_get_input_size(h));
    if (t->data == NULL && (t->data = calloc(t->size_bytes != 0u ? t->size_bytes : 1u, 1)) == NULL) {
      fprintf(stderr, "out of memory for an I/O buffer\n");
      return 3;
    }
  }
  const uint32_t row_inputs = ai_get_row_inputs(h);
  if (row_inputs != 0u) {
    ai_set_row_source(h, host_row_source, h);
  }
  for (int sample = 0;; sample++) {
    /* each sample starts from the initial state, as the references reset between samples */
    if (sample > 0 && ai_reset(h) != AI_OK) {
      fprintf(stderr, "ai_reset: %s\n", ai_get_error(h));
      return 6;
    }
    for (int i = 0; i < ai_get_input_size(h); i++) {
      ai_tensor *t = ai_get_input(h, i);
      size_t got = fread(t->data, 1, t->size_bytes, stdin);
      if (got == 0 && i == 0) {
        ai_destroy(h);
        return 0;
      }
      if (got != t->size_bytes) {
        fprintf(stderr, "short input %d\n", i);
        return 4;
      }
    }
    memset(next_row, 0, sizeof next_row);
    if (ai_run(h) != AI_OK) {
      fprintf(stderr, "ai_run: %s\n", ai_get_error(h));
      return 5;
    }
    for (int i = 0; i < ai_get_input_size(h) && i < 32; i++) {
      const ai_tensor *t = ai_get_input(h, i);
      if (((row_inputs >> i) & 1u) && next_row[i] != (t->ndim >= 2 ? (int32_t)t->shape[1] : 1)) {
        fprintf(stderr, "input %d was not pulled to its last row\n", i);
        return 5;
      }
    }
    for (int i = 0; i < ai_get_output_size(h); i++) {
      ai_tensor *t = ai_get_output(h, i);
      fwrite(t->data, 1, t->size_bytes, stdout);
    }
    fflush(stdout);
  }
}
