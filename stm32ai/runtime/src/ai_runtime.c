/* stm32ai runtime: model instances over generated model descriptors (docs/architecture.md).
 * A static table holds up to AI_MAX_INSTANCES instances; no malloc. */
#include "ai_runtime.h"

typedef struct {
  ai_model_info *nn; /* NULL: slot free */
  ai_u8 *activations;
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
  }
  return "unknown error";
}

static ai_status create_fail(ai_status s) {
  s_create_error = status_text(s);
  return s;
}

ai_status ai_create(ai_model_info *nn, ai_ptr activations, ai_handle *handle) {
  if (handle != NULL) {
    *handle = NULL;
  }
  if (nn == NULL || handle == NULL) {
    return create_fail(AI_ERR_NULL_POINTER);
  }
  if (nn->n_inputs > AI_MAX_IO || nn->n_outputs > AI_MAX_IO || nn->ai_create == NULL ||
      nn->ai_run == NULL || nn->ai_get_params == NULL) {
    return create_fail(AI_ERR_MODEL);
  }
  ai_u8 *act = activations != NULL ? activations : nn->activations;
  if (act == NULL) {
    return create_fail(AI_ERR_ACTIVATIONS);
  }
  if (((uintptr_t)act % AI_BUFFER_ALIGN) != 0u) {
    return create_fail(AI_ERR_UNALIGNED);
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
  ai_status s = nn->ai_create(weights, act);
  if (s == AI_OK && nn->ai_reset != NULL) {
    s = nn->ai_reset(act);
  }
  if (s != AI_OK) {
    return create_fail(s);
  }
  inst->nn = nn;
  inst->activations = act;
  inst->weights = weights;
  inst->error = "";
  for (int i = 0; i < nn->n_inputs; i++) {
    inst->in[i] = *nn->inputs[i];
    inst->in[i].data = inst->in[i].pool_offset != AI_NOT_IN_POOL ? act + inst->in[i].pool_offset : NULL;
    inst->in_ptrs[i] = &inst->in[i];
  }
  for (int i = 0; i < nn->n_outputs; i++) {
    inst->out[i] = *nn->outputs[i];
    inst->out[i].data = inst->out[i].pool_offset != AI_NOT_IN_POOL ? act + inst->out[i].pool_offset : NULL;
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
  inst->weights = NULL;
  return AI_OK;
}

ai_status ai_run(ai_handle h) {
  ai_instance *inst = instance_of(h);
  if (inst == NULL) {
    return AI_ERR_BAD_HANDLE;
  }
  /* Bind this instance's buffers, then run: two instances of one model take turns. */
  ai_status s = inst->nn->ai_create(inst->weights, inst->activations);
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
  ai_status s = inst->nn->ai_reset != NULL ? inst->nn->ai_reset(inst->activations) : AI_OK;
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
