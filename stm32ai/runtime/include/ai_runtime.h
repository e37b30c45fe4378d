/* stm32ai runtime API: create, run and inspect model instances (docs/architecture.md).
 *
 * Every call returns ai_status and records a readable message for ai_get_error().
 * No malloc: instances live in a static table of AI_MAX_INSTANCES entries.
 */
#ifndef AI_RUNTIME_H
#define AI_RUNTIME_H

#include "ai_platform.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Create an instance of `nn`. `activations` may be NULL when the model has a built-in
 * pool; otherwise it must hold nn->activations_size bytes, AI_BUFFER_ALIGN-aligned.
 * Inputs and outputs placed in the pool get their data pointers set here; app-owned
 * ones (--no-inputs-allocation / --no-outputs-allocation) must be set by the caller
 * through ai_get_input()/ai_get_output() before ai_run(). */
ai_status ai_create(ai_model_info *nn, ai_ptr activations, ai_handle *handle);
/* Create an instance of a model with several activation pools (nn->n_pools, one per memory
 * region its activations were split across; single-pool models work too, n_pools = 1).
 * `pools` holds n_pools pointers, pool k nn->pools[k].size bytes, AI_BUFFER_ALIGN-aligned; a
 * NULL entry (or pools == NULL with n_pools == 0) takes the built-in pool. ai_create() with a
 * non-NULL `activations` refuses a multi-pool model (AI_ERR_POOLS); with NULL it uses the
 * built-in pools. */
ai_status ai_create_pools(ai_model_info *nn, ai_u8 *const pools[], uint32_t n_pools, ai_handle *handle);
/* API 1.2: as ai_create_pools, with the instance's persistent state area (variable tensors:
 * LSTM/SVDF states; nn->state_size bytes, AI_BUFFER_ALIGN-aligned, AI_<NAME>_STATE_SIZE). The
 * state never lives in an activation pool, so models may share pools and keep their state.
 * `state` NULL takes the model's built-in state area, which belongs to one instance at a time:
 * a second live instance of a stateful model needs its own (else AI_ERR_STATE). ai_create and
 * ai_create_pools are this call with state NULL. Ignored for a stateless model. */
ai_status ai_create_state(ai_model_info *nn, ai_u8 *const pools[], uint32_t n_pools, ai_u8 *state,
                          ai_handle *handle);
/* Thread safety: ai_run, ai_reset and the getters of *different* instances may run concurrently
 * (each run works on its instance's context only; no file-scope state is written). ai_create and
 * ai_destroy update the instance table: call them from one thread or under the application's
 * lock. One instance must not run in two threads at once. */
ai_status ai_destroy(ai_handle h);
ai_status ai_run(ai_handle h);
/* Put the model's persistent state (LSTM hidden/cell state...) back to its initial value,
 * as at ai_create. The state lives in the instance's state area (ai_create_state), apart from
 * the activation pools, and is kept from one ai_run to the next (TFLite's variable tensors),
 * also when the pools are shared with other models. */
ai_status ai_reset(ai_handle h);

/* API 1.3: the row source of a model generated with --input-rows (ai_row_source in
 * ai_platform.h; `user` is passed back as its first argument). src NULL unsets it. Kept until
 * changed or the instance is destroyed; ai_run of a row-fed model without one returns
 * AI_ERR_ROW_SOURCE. Allowed (and ignored by ai_run) on a model without row-fed inputs. */
ai_status ai_set_row_source(ai_handle h, ai_row_source src, void *user);
/* Inputs of the model fed in rows: bit i set = input i (0 for an ordinary model or a bad handle). */
uint32_t ai_get_row_inputs(ai_handle h);

uint32_t ai_get_activations_size(ai_handle h);
ai_ptr ai_get_activations(ai_handle h);
/* Activation pools of an instance: count, pool k's buffer and size (0/NULL on a bad handle or k). */
uint32_t ai_get_pool_count(ai_handle h);
ai_ptr ai_get_pool(ai_handle h, uint32_t k);
uint32_t ai_get_pool_size(ai_handle h, uint32_t k);
/* The instance's persistent state area and its size (NULL/0: stateless model or bad handle). */
ai_ptr ai_get_state(ai_handle h);
uint32_t ai_get_state_size(ai_handle h);
uint32_t ai_get_params_size(ai_handle h);
const ai_ptr ai_get_params(ai_handle h);
int32_t ai_get_input_size(ai_handle h);   /* number of inputs, -1 on a bad handle */
int32_t ai_get_output_size(ai_handle h);  /* number of outputs, -1 on a bad handle */
ai_tensor *ai_get_input(ai_handle h, int32_t i);
ai_tensor *ai_get_output(ai_handle h, int32_t i);

/* Last error of `h`, or of the last failed ai_create() when h is NULL; "" if none. */
const char *ai_get_error(ai_handle h);

#ifdef __cplusplus
}
#endif
#endif /* AI_RUNTIME_H */
