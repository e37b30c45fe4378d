/* stm32ai runtime: model instances over generated model descriptors (docs/architecture.md).
 * A static table holds up to AI_MAX_INSTANCES instances; no malloc. */
#include "ai_runtime.h"

typedef struct {
  ai_model_info *nn; /* NULL: slot free */
  ai_context ctx;    /* weights, pools and state of this instance: what its runs work on */
  uint32_t n_pools;
  ai_tensor in[AI_MAX_IO], out[AI_MAX_IO];
  ai_tensor *in_ptrs[AI_MAX_IO], *out_ptrs[AI_MAX_IO];
  const char *error;
} ai_instance;

/* The only mutable file-scope state of the runtime and the generated models (besides the
 * built-in pools and state areas): the instance table and the last ai_create error. Each
 * instance's runs touch only its own entry, so ai_run/ai_reset of different instances may run
 * concurrently; ai_create/ai_destroy change the table and must not race each other. */
static struct {
  ai_instance inst[AI_MAX_INSTANCES];
  const char *create_error;
} s_table;

static ai_instance *instance_of(ai_handle h) {
  for (int i = 0; i < AI_MAX_INSTANCES; i++) {
    if (h == (ai_handle)&s_table.inst[i] && s_table.inst[i].nn != NULL) {
      return &s_table.inst[i];
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
    case AI_ERR_STATE: return "state area unaligned or already used by another instance (see ai_create_state)";
    case AI_ERR_ROW_SOURCE: return "model takes inputs in rows: no row source set (ai_set_row_source) or it failed";
  }
  return "unknown error";
}

static ai_status create_fail(ai_status s) {
  s_table.create_error = status_text(s);
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

/* API >= 1.2: the model runs on an explicit context (no binding); older descriptors bind the
 * instance's buffers into the model's statics before each run. */
static int has_ctx(const ai_model_info *nn) {
  return nn->ai_run_ctx != NULL;
}

/* (Re)bind an instance's weights and pools: a check only for a 1.2 model. */
static ai_status bind(const ai_model_info *nn, const ai_u8 *weights, ai_u8 *const pools[]) {
  if (pool_count(nn) > 1u) {
    return nn->ai_create_pools != NULL ? nn->ai_create_pools(weights, pools) : AI_ERR_MODEL;
  }
  return nn->ai_create(weights, pools[0]);
}

static ai_status reset(const ai_model_info *nn, const ai_context *ctx) {
  if (has_ctx(nn)) {
    return nn->state_size != 0u && nn->ai_reset_state != NULL ? nn->ai_reset_state(ctx->state) : AI_OK;
  }
  if (pool_count(nn) > 1u) {
    return nn->ai_reset_pools != NULL ? nn->ai_reset_pools(ctx->pools) : AI_ERR_MODEL;
  }
  return nn->ai_reset != NULL ? nn->ai_reset(ctx->pools[0]) : AI_OK;
}

/* An input/output in a pool points into this instance's pool; an app-owned one starts unbound. */
static void *io_data(const ai_model_info *nn, const ai_tensor *t, uint32_t io, const ai_context *ctx) {
  if (t->pool_offset == AI_NOT_IN_POOL) {
    return NULL;
  }
  if (pool_count(nn) == 1u) {
    return ctx->pools[0] + t->pool_offset;
  }
  /* a 1.1 descriptor has no io_pools: its create has pointed the static tensors */
  return nn->io_pools != NULL ? ctx->pools[nn->io_pools[io]] + t->pool_offset : t->data;
}

/* The built-in state area is one instance's: a second instance needs its own. */
static int state_in_use(const ai_u8 *state) {
  for (int i = 0; i < AI_MAX_INSTANCES; i++) {
    if (s_table.inst[i].nn != NULL && s_table.inst[i].ctx.state == state) {
      return 1;
    }
  }
  return 0;
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
  return ai_create_state(nn, pools, n_pools, NULL, handle);
}

ai_status ai_create_state(ai_model_info *nn, ai_u8 *const pools[], uint32_t n_pools, ai_u8 *state,
                          ai_handle *handle) {
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
    if (s_table.inst[i].nn == NULL) {
      inst = &s_table.inst[i];
      break;
    }
  }
  if (inst == NULL) {
    return create_fail(AI_ERR_TOO_MANY);
  }
  ai_u8 *st = NULL;
  if (has_ctx(nn) && nn->state_size != 0u) {
    st = state != NULL ? state : nn->state;
    if (st == NULL || ((uintptr_t)st % AI_BUFFER_ALIGN) != 0u || state_in_use(st)) {
      return create_fail(AI_ERR_STATE);
    }
  }
  ai_context ctx;
  ctx.weights = nn->ai_get_params();
  for (uint32_t k = 0; k < AI_MAX_POOLS; k++) {
    ctx.pools[k] = act[k];
  }
  ctx.state = st;
  ctx.row_source = NULL;
  ctx.row_user = NULL;
  ai_status s = bind(nn, ctx.weights, act);
  if (s == AI_OK) {
    s = reset(nn, &ctx);
  }
  if (s != AI_OK) {
    return create_fail(s);
  }
  inst->nn = nn;
  inst->ctx = ctx;
  inst->n_pools = n;
  inst->error = "";
  for (int i = 0; i < nn->n_inputs; i++) {
    inst->in[i] = *nn->inputs[i];
    inst->in[i].data = io_data(nn, nn->inputs[i], (uint32_t)i, &ctx);
    inst->in_ptrs[i] = &inst->in[i];
  }
  for (int i = 0; i < nn->n_outputs; i++) {
    inst->out[i] = *nn->outputs[i];
    inst->out[i].data = io_data(nn, nn->outputs[i], (uint32_t)(nn->n_inputs + i), &ctx);
    inst->out_ptrs[i] = &inst->out[i];
  }
  s_table.create_error = "";
  *handle = (ai_handle)inst;
  return AI_OK;
}

ai_status ai_destroy(ai_handle h) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return AI_ERR_BAD_HANDLE;
  }
  inst->nn = NULL;
  inst->ctx = (ai_context){0};
  return AI_OK;
}

ai_status ai_run(ai_handle h) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return AI_ERR_BAD_HANDLE;
  }
  ai_status s;
  if (inst->nn->row_inputs != 0u && inst->ctx.row_source == NULL) {
    s = AI_ERR_ROW_SOURCE; /* never run on inputs nobody supplied */
  } else if (has_ctx(inst->nn)) {
    s = inst->nn->ai_run_ctx(&inst->ctx, inst->in_ptrs, inst->out_ptrs);
  } else {
    /* a pre-1.2 model: bind this instance's buffers into its statics, then run */
    s = bind(inst->nn, inst->ctx.weights, inst->ctx.pools);
    if (s == AI_OK) {
      s = inst->nn->ai_run(inst->in_ptrs, inst->out_ptrs);
    }
  }
  inst->error = status_text(s);
  return s;
}

ai_status ai_set_row_source(ai_handle h, ai_row_source src, void *user) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return AI_ERR_BAD_HANDLE;
  }
  inst->ctx.row_source = src;
  inst->ctx.row_user = src != NULL ? user : NULL;
  return AI_OK;
}

uint32_t ai_get_row_inputs(ai_handle h) {
  const ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->nn->row_inputs : 0u;
}

#ifdef AI_POISON
/* The generator of stm32ai/validate/poison.py's <name>_poison (one pattern for every dead
 * byte), seeded from the length so consecutive drops differ. */
void ai_poison_rows(void *p, uint32_t bytes) {
  ai_u8 *b = (ai_u8 *)p;
  uint32_t x = 0x9E3779B9u ^ (bytes * 2654435761u);
  for (uint32_t i = 0; i < bytes; ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = (ai_u8)(x >> 24);
  }
}
#endif

ai_status ai_reset(ai_handle h) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return AI_ERR_BAD_HANDLE;
  }
  ai_status s = reset(inst->nn, &inst->ctx);
  inst->error = status_text(s);
  return s;
}

uint32_t ai_get_activations_size(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->nn->activations_size : 0u;
}

ai_ptr ai_get_activations(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->ctx.pools[0] : NULL;
}

uint32_t ai_get_pool_count(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? pool_count(inst->nn) : 0u;
}

ai_ptr ai_get_pool(ai_handle h, uint32_t k) {
  ai_instance *inst = instance_of(h);
  return inst != NULL && k < pool_count(inst->nn) ? inst->ctx.pools[k] : NULL;
}

uint32_t ai_get_pool_size(ai_handle h, uint32_t k) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL || k >= pool_count(inst->nn)) {
    return 0u;
  }
  return inst->nn->n_pools != 0u ? inst->nn->pools[k].size : inst->nn->activations_size;
}

ai_ptr ai_get_state(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->ctx.state : NULL;
}

uint32_t ai_get_state_size(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL && has_ctx(inst->nn) ? inst->nn->state_size : 0u;
}

uint32_t ai_get_params_size(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->nn->params_size : 0u;
}

const ai_ptr ai_get_params(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->ctx.weights : NULL;
}

int32_t ai_get_input_size(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? (int32_t)inst->nn->n_inputs : -1;
}

int32_t ai_get_output_size(ai_handle h) {
  ai_instance *inst = instance_of(h);
  return inst != NULL ? (int32_t)inst->nn->n_outputs : -1;
}

/* Input or output tensor i of the instance, NULL (and the instance's error) when i is out of range. */
static ai_tensor *io_tensor(ai_handle h, int32_t i, int output) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return NULL;
  }
  if (i < 0 || i >= (int32_t)(output ? inst->nn->n_outputs : inst->nn->n_inputs)) {
    inst->error = status_text(AI_ERR_INDEX);
    return NULL;
  }
  return output ? &inst->out[i] : &inst->in[i];
}

ai_tensor *ai_get_input(ai_handle h, int32_t i) { return io_tensor(h, i, 0); }

ai_tensor *ai_get_output(ai_handle h, int32_t i) { return io_tensor(h, i, 1); }

const char *ai_get_error(ai_handle h) {
  if (h == NULL) {
    return s_table.create_error;
  }
  ai_instance *inst = instance_of(h);
  return inst != NULL ? inst->error : status_text(AI_ERR_BAD_HANDLE);
}
