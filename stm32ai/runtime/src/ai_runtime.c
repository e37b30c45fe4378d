/* stm32ai runtime: model instances over generated model descriptors (DESIGN §4).
 * A static table holds up to AI_MAX_INSTANCES instances; no malloc. */
#include "ai_runtime.h"

typedef struct {
  ai_model_info *nn; /* NULL: slot free */
  ai_u8 *activations; /* pool 0 */
  ai_u8 *pools[AI_MAX_POOLS];
  uint32_t n_pools;
  const ai_u8 *weights;
  ai_tensor in[AI_MAX_IO], out[AI_MAX_IO];
  ai_tensor *in_ptrs[AI_MAX_IO], *out_ptrs[AI_MAX_IO];
  const char *error;
} ai_instance;

static ai_instance s_instances[AI_MAX_INSTANCES];
static const char *s_create_error = "";

static ai_instance *instance_of(ai_handle h) {
  for (int i = 0; i < AI_MAX_INSTANCES; i++) {
    if (h == (ai_handle)&s_instances[i] && s_instances[i].nn != NULL) {
      return &s_instances[i];
    }
  }
  return NULL;
}

static const char *status_text(ai_status s) {
  switch (s) {
    case AI_OK: return "";
    case AI_ERR_NULL_POINTER: return "NULL pointer argument";
    case AI_ERR_UNALIGNED: return "buffer not aligned to AI_BUFFER_ALIGN (8 bytes)";
    case AI_ERR_ACTIVATIONS: return "model has no built-in activation pool: pass an activation buffer";
    case AI_ERR_TOO_MANY: return "too many instances (raise AI_MAX_INSTANCES)";
    case AI_ERR_BAD_HANDLE: return "invalid or destroyed handle";
    case AI_ERR_IO: return "an input or output tensor has no data buffer";
    case AI_ERR_INDEX: return "input/output index out of range";
    case AI_ERR_MODEL: return "inconsistent model descriptor";
    case AI_ERR_POOLS: return "wrong number of activation pools for this model (see ai_create_pools)";
  }
  return "unknown error";
}

static ai_status create_fail(ai_status s) {
  s_create_error = status_text(s);
  return s;
}

/* Pools of a descriptor: 0 means a pre-1.1 descriptor with the single `activations` pool. */
static uint32_t pool_count(const ai_model_info *nn) {
  return nn->n_pools != 0u ? nn->n_pools : 1u;
}

static ai_u8 *builtin_pool(const ai_model_info *nn, uint32_t k) {
  if (nn->n_pools == 0u || nn->pools == NULL) {
    return k == 0u ? nn->activations : NULL;
  }
  return nn->pools[k].builtin;
}

/* (Re)bind an instance's weights and pools to the model's static state. A single-pool model
 * takes the 1.0 path (ai_create), which keeps ai_run's cost what it was. */
static ai_status bind(const ai_model_info *nn, const ai_u8 *weights, ai_u8 *const pools[]) {
  if (pool_count(nn) > 1u) {
    return nn->ai_create_pools != NULL ? nn->ai_create_pools(weights, pools) : AI_ERR_MODEL;
  }
  return nn->ai_create(weights, pools[0]);
}

static ai_status reset(const ai_model_info *nn, ai_u8 *const pools[]) {
  if (pool_count(nn) > 1u) {
    return nn->ai_reset_pools != NULL ? nn->ai_reset_pools(pools) : AI_ERR_MODEL;
  }
  return nn->ai_reset != NULL ? nn->ai_reset(pools[0]) : AI_OK;
}

static void *io_data(const ai_tensor *t, uint32_t n_pools, ai_u8 *pool0) {
  if (t->pool_offset == AI_NOT_IN_POOL) {
    return NULL;
  }
  return n_pools > 1u ? t->data : pool0 + t->pool_offset;
}

ai_status ai_create(ai_model_info *nn, ai_ptr activations, ai_handle *handle) {
  if (nn != NULL && activations != NULL && pool_count(nn) > 1u) {
    if (handle != NULL) {
      *handle = NULL;
    }
    return create_fail(AI_ERR_POOLS); /* one buffer cannot stand for several pools */
  }
  return ai_create_pools(nn, activations != NULL ? &activations : NULL, activations != NULL ? 1u : 0u, handle);
}

ai_status ai_create_pools(ai_model_info *nn, ai_u8 *const pools[], uint32_t n_pools, ai_handle *handle) {
  if (handle != NULL) {
    *handle = NULL;
  }
  if (nn == NULL || handle == NULL || (pools == NULL && n_pools != 0u)) {
    return create_fail(AI_ERR_NULL_POINTER);
  }
  if (nn->n_inputs > AI_MAX_IO || nn->n_outputs > AI_MAX_IO || nn->ai_create == NULL ||
      nn->ai_run == NULL || nn->ai_get_params == NULL || pool_count(nn) > AI_MAX_POOLS ||
      (nn->n_pools != 0u && nn->pools == NULL)) {
    return create_fail(AI_ERR_MODEL);
  }
  const uint32_t n = pool_count(nn);
  if (pools != NULL && n_pools != n) {
    return create_fail(AI_ERR_POOLS);
  }
  ai_u8 *act[AI_MAX_POOLS] = {NULL};
  for (uint32_t k = 0; k < n; k++) {
    act[k] = pools != NULL && pools[k] != NULL ? pools[k] : builtin_pool(nn, k);
    if (act[k] == NULL) {
      return create_fail(AI_ERR_ACTIVATIONS);
    }
    if (((uintptr_t)act[k] % AI_BUFFER_ALIGN) != 0u) {
      return create_fail(AI_ERR_UNALIGNED);
    }
  }
  ai_instance *inst = NULL;
  for (int i = 0; i < AI_MAX_INSTANCES; i++) {
    if (s_instances[i].nn == NULL) {
      inst = &s_instances[i];
      break;
    }
  }
  if (inst == NULL) {
    return create_fail(AI_ERR_TOO_MANY);
  }
  const ai_u8 *weights = nn->ai_get_params();
  ai_status s = bind(nn, weights, act);
  if (s == AI_OK) {
    s = reset(nn, act);
  }
  if (s != AI_OK) {
    return create_fail(s);
  }
  inst->nn = nn;
  inst->activations = act[0];
  inst->n_pools = n;
  for (uint32_t k = 0; k < AI_MAX_POOLS; k++) {
    inst->pools[k] = act[k];
  }
  inst->weights = weights;
  inst->error = "";
  /* I/O tensors in a pool: pool_offset is inside pool 0 for a single-pool model; with several
   * pools the model's create has just pointed its static tensors into the right pool. App-owned
   * ones (AI_NOT_IN_POOL) start unbound. */
  for (int i = 0; i < nn->n_inputs; i++) {
    inst->in[i] = *nn->inputs[i];
    inst->in[i].data = io_data(nn->inputs[i], n, act[0]);
    inst->in_ptrs[i] = &inst->in[i];
  }
  for (int i = 0; i < nn->n_outputs; i++) {
    inst->out[i] = *nn->outputs[i];
    inst->out[i].data = io_data(nn->outputs[i], n, act[0]);
    inst->out_ptrs[i] = &inst->out[i];
  }
  s_create_error = "";
  *handle = (ai_handle)inst;
  return AI_OK;
}

ai_status ai_destroy(ai_handle h) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return AI_ERR_BAD_HANDLE;
  }
  inst->nn = NULL;
  inst->activations = NULL;
  for (uint32_t k = 0; k < AI_MAX_POOLS; k++) {
    inst->pools[k] = NULL;
  }
  inst->weights = NULL;
  return AI_OK;
}

ai_status ai_run(ai_handle h) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return AI_ERR_BAD_HANDLE;
  }
  /* Bind this instance's buffers, then run: two instances of one model take turns. */
  ai_status s = inst->n_pools > 1u ? inst->nn->ai_create_pools(inst->weights, inst->pools)
                                   : inst->nn->ai_create(inst->weights, inst->activations);
  if (s == AI_OK) {
    s = inst->nn->ai_run(inst->in_ptrs, inst->out_ptrs);
  }
  inst->error = status_text(s);
  return s;
}

ai_status ai_reset(ai_handle h) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return AI_ERR_BAD_HANDLE;
  }
  ai_status s = reset(inst->nn, inst->pools);
  inst->error = status_text(s);
  return s;
}

uint32_t ai_get_activations_size(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->nn->activations_size : 0u;
}

ai_ptr ai_get_activations(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->activations : NULL;
}

uint32_t ai_get_pool_count(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? pool_count(inst->nn) : 0u;
}

ai_ptr ai_get_pool(ai_handle h, uint32_t k) {
  ai_instance *inst = instance_of(h);
  return inst != NULL && k < pool_count(inst->nn) ? inst->pools[k] : NULL;
}

uint32_t ai_get_pool_size(ai_handle h, uint32_t k) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL || k >= pool_count(inst->nn)) {
    return 0u;
  }
  return inst->nn->n_pools != 0u ? inst->nn->pools[k].size : inst->nn->activations_size;
}

uint32_t ai_get_params_size(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->nn->params_size : 0u;
}

const ai_ptr ai_get_params(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->weights : NULL;
}

int32_t ai_get_input_size(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? (int32_t)inst->nn->n_inputs : -1;
}

int32_t ai_get_output_size(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? (int32_t)inst->nn->n_outputs : -1;
}

ai_tensor *ai_get_input(ai_handle h, int32_t i) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return NULL;
  }
  if (i < 0 || i >= (int32_t)inst->nn->n_inputs) {
    inst->error = status_text(AI_ERR_INDEX);
    return NULL;
  }
  return &inst->in[i];
}

ai_tensor *ai_get_output(ai_handle h, int32_t i) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return NULL;
  }
  if (i < 0 || i >= (int32_t)inst->nn->n_outputs) {
    inst->error = status_text(AI_ERR_INDEX);
    return NULL;
  }
  return &inst->out[i];
}

const char *ai_get_error(ai_handle h) {
  if (h == NULL) {
    return s_create_error;
  }
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->error : status_text(AI_ERR_BAD_HANDLE);
}
