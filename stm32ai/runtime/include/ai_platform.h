/* stm32ai runtime: platform types shared by the runtime, the kernels and generated models.
 *
 * Buffer alignment: activation pools and weight arrays must be 8-byte aligned
 * (AI_BUFFER_ALIGN); the planner places every tensor at an offset that keeps the
 * alignment its kernel needs, and ai_create() refuses an unaligned pool.
 */
#ifndef AI_PLATFORM_H
#define AI_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AI_API_VERSION "1.3"
#define AI_BUFFER_ALIGN 8u
#define AI_MAX_DIMS 6 /* the largest rank a kernel walks: stm32ai.ir.MAX_DIMS (tests/test_structure.py) */

#ifndef AI_MAX_INSTANCES
#define AI_MAX_INSTANCES 4 /* model instances alive at once (no malloc: a static table) */
#endif
#ifndef AI_MAX_POOLS
#define AI_MAX_POOLS 4 /* activation pools per model (one per memory region it is split across) */
#endif
#ifndef AI_MAX_IO
#define AI_MAX_IO 8 /* inputs or outputs per model */
#endif

/* `ai_ptr` is a macro rather than a typedef so that `const ai_ptr` (used for weights in
 * flash and for the accessors' return types) means "pointer to const bytes"; with a
 * pointer typedef the const would bind to the pointer and be an ignored qualifier. */
typedef uint8_t ai_u8;
#define ai_ptr ai_u8 *

typedef void *ai_handle;

/* Placement and alignment of generated buffers. GCC/Clang attributes; the linker
 * script puts `.nn_weights` / `.nn_activations` in the chosen memory regions. */
#if defined(__GNUC__) && !defined(__APPLE__)
#define AI_SECTION(s) __attribute__((section(s)))
#else
#define AI_SECTION(s)
#endif
#if defined(__GNUC__)
#define AI_ALIGNED(n) __attribute__((aligned(n)))
#else
#define AI_ALIGNED(n)
#endif

/* Per-layer profiling (generated models built with -DAI_PROFILE): the application provides
 * this monotonic counter (the demo: DWT cycles, or SysTick ticks); never called otherwise. */
#ifdef AI_PROFILE
uint64_t ai_profile_clock(void);
#endif

typedef enum {
  AI_OK = 0,
  AI_ERR_NULL_POINTER,   /* a required pointer argument was NULL */
  AI_ERR_UNALIGNED,      /* a buffer is not AI_BUFFER_ALIGN-aligned */
  AI_ERR_ACTIVATIONS,    /* no activation buffer (model has no built-in pool) */
  AI_ERR_TOO_MANY,       /* more than AI_MAX_INSTANCES instances */
  AI_ERR_BAD_HANDLE,     /* handle not created by ai_create, or destroyed */
  AI_ERR_IO,             /* an input/output tensor is missing or has no data */
  AI_ERR_INDEX,          /* input/output index out of range */
  AI_ERR_MODEL,          /* the model descriptor is inconsistent */
  AI_ERR_POOLS,          /* wrong number of activation pools for this model */
  AI_ERR_STATE,          /* state area missing, unaligned, or already used by another instance */
  AI_ERR_ROW_SOURCE      /* API 1.3: the model takes inputs in rows and no row source is set
                            (ai_set_row_source), or the row source failed */
} ai_status;

/* Poison `bytes` bytes at p (a stripe's dead ring rows, docs/stripes.md; here so
 * generated code, which includes only this header, can call it): with -DAI_POISON the
 * host poison runner's garbage pattern (stm32ai/validate/poison.py), so a later read of them
 * shows as a mismatch; otherwise an empty inline function the compiler removes. */
#ifdef AI_POISON
void ai_poison_rows(void *p, uint32_t bytes);
#else
static inline void ai_poison_rows(void *p, uint32_t bytes) {
  (void)p;
  (void)bytes;
}
#endif

/* API 1.3, row input (docs/project.md "Inputs in rows"): copy rows [row0, row0 + n_rows) of
 * input `input_index` (NHWC, one row = W * C elements) to dst. A model generated with
 * --input-rows calls it from ai_run for each row-fed input, rows in increasing order, each row
 * exactly once; anything but AI_OK aborts the run (ai_run then returns AI_ERR_ROW_SOURCE). */
typedef ai_status (*ai_row_source)(void *user, int32_t input_index, int32_t row0, int32_t n_rows,
                                   void *dst);

/* DLPack DLDataType / DLDevice, laid out as in dlpack.h. */
typedef enum { AI_DT_INT = 0, AI_DT_UINT = 1, AI_DT_FLOAT = 2, AI_DT_BOOL = 6 } ai_dtype_code;
typedef struct {
  uint8_t code;   /* ai_dtype_code */
  uint8_t bits;   /* 8, 16, 32 */
  uint16_t lanes; /* always 1 */
} ai_dtype;
typedef struct {
  int32_t device_type; /* 1 = CPU */
  int32_t device_id;
} ai_device;

/* Quantisation: real = scale * (q - zero_point); per-axis when n > 1. */
typedef struct {
  int32_t n;                  /* number of scales; 0 = not quantised */
  int32_t axis;               /* quantised dimension when n > 1 */
  const float *scale;         /* n entries */
  const int32_t *zero_point;  /* n entries */
} ai_quant;

/* A tensor: the first fields are a DLPack DLTensor; quantisation and size follow. */
typedef struct {
  void *data;             /* NULL until bound (see ai_create / --no-inputs-allocation) */
  ai_device device;
  int32_t ndim;
  ai_dtype dtype;
  const int64_t *shape;
  const int64_t *strides; /* NULL: compact row-major */
  uint64_t byte_offset;
  ai_quant quant;
  uint32_t size_bytes;
  uint32_t pool_offset;   /* offset inside the activation pool, AI_NOT_IN_POOL if app-owned */
  const char *name;
} ai_tensor;
#define AI_NOT_IN_POOL 0xFFFFFFFFu

/* One activation pool of a model. A model whose activations are split across memory regions
 * has several (`--activations-pool dtcm,sram1` when no single region holds them all); each has
 * a built-in array in section `.nn_activations` (pool 0) or `.nn_activations_<region>`. */
typedef struct {
  uint32_t size;       /* bytes */
  uint32_t align;      /* required alignment of the pool's start (AI_BUFFER_ALIGN) */
  ai_u8 *builtin;      /* the built-in pool, or NULL */
  const char *region;  /* board memory region it was planned for ("" if none) */
} ai_pool_info;

/* What one run of one instance works on (API 1.2): the generated run function takes it as an
 * argument and computes every tensor address as a base below + a constant offset, so nothing
 * of an instance lives in file-scope variables and instances may run concurrently. */
typedef struct {
  const ai_u8 *weights;
  ai_u8 *pools[AI_MAX_POOLS]; /* activation pools 0..n_pools-1 */
  ai_u8 *state;               /* persistent state area (variable tensors), NULL if none */
  ai_row_source row_source;   /* API 1.3: where row-fed inputs come from (ai_set_row_source) */
  void *row_user;             /* its first argument */
} ai_context;

/* The descriptor every generated model exports as `<name>_info` (docs/architecture.md). */
typedef struct {
  const char *name, *datetime, *revision, *tool_version, *api_version;
  uint16_t n_nodes;
  uint8_t n_inputs, n_outputs;
  uint32_t activations_size, params_size;
  ai_ptr activations; /* built-in activation pool, or NULL */
  ai_tensor **inputs, **outputs;
  const ai_ptr (*ai_get_params)(void);
  ai_status (*ai_create)(const ai_ptr weights, const ai_ptr activations);
  ai_status (*ai_destroy)(void);
  ai_status (*ai_run)(ai_tensor *input[], ai_tensor *output[]);
  /* Before 1.2: reset the state kept in `activations`; since 1.2 the built-in state area's
   * (see ai_reset_state below). */
  ai_status (*ai_reset)(const ai_ptr activations);
  /* Activation pools (appended in API 1.1; a descriptor that leaves them 0/NULL has the single
   * pool above). activations_size is then the sum over the pools and `activations` is pool 0;
   * ai_create/ai_reset above bind pool 0 and take the other pools' built-in arrays. */
  uint32_t n_pools;
  const ai_pool_info *pools;  /* n_pools entries */
  /* Bind weights and all pools (pools[k] NULL, or pools NULL: the built-in pool k). */
  ai_status (*ai_create_pools)(const ai_ptr weights, ai_u8 *const pools[]);
  ai_status (*ai_reset_pools)(ai_u8 *const pools[]);
  /* API 1.2: the persistent state (variable tensors: LSTM, SVDF, signal noise estimates) lives
   * in a state area of state_size bytes (AI_BUFFER_ALIGN-aligned) per instance, never in an
   * activation pool, so a pool shared with other models keeps it. `state` is the built-in area
   * (NULL if state_size is 0). The 1.0/1.1 entry points above are kept for the descriptor's
   * layout but bind nothing: ai_create/ai_create_pools only check the buffers, ai_run runs on
   * the built-in weights, pools and state, ai_reset/ai_reset_pools reset the built-in state. */
  uint32_t state_size;
  ai_u8 *state;
  const uint8_t *io_pools; /* pool of each input, then of each output (in-pool ones) */
  ai_status (*ai_run_ctx)(const ai_context *ctx, ai_tensor *input[], ai_tensor *output[]);
  ai_status (*ai_reset_state)(ai_u8 *state); /* state to its initial value (NULL: built-in) */
  /* API 1.3: bit i set = input i is row-fed (--input-rows): it has no buffer (data NULL, not in
   * a pool, size_bytes the whole image for information); ai_run reads it through the row
   * source. 0 for every model generated without --input-rows (and for older descriptors,
   * whose positional initialisers leave it 0). */
  uint32_t row_inputs;
} ai_model_info;

#ifdef __cplusplus
}
#endif
#endif /* AI_PLATFORM_H */
