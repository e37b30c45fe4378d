/* Shape and data-movement kernels: every TFLite op that moves stored values without
 * arithmetic (TRANSPOSE, SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, UNPACK, PAD, PADV2,
 * MIRROR_PAD, DEPTH_TO_SPACE, SPACE_TO_DEPTH, RESIZE_NEAREST_NEIGHBOR, CONCATENATION,
 * PACK, GATHER); RESIZE_BILINEAR is in ai_kernels_resize.h.
 *
 * The lowering (stm32ai/passes/lower/movement.py) reduces each op to a few
 * generic kernels whose parameters it computes entirely at generate time; see
 * docs/kernels_movement.md. Field names of the parameter structs are the `attrs` keys of the
 * lowered op. The copy kernels work on raw bytes, so they serve every element type.
 *
 * Alignment: none required for data (copies go through memcpy); the int32 index tables
 * live in the weights pool, which keeps them 4-byte aligned.
 */
#ifndef AI_KERNELS_MOVEMENT_H
#define AI_KERNELS_MOVEMENT_H

#include <stdint.h>

#include "ai_platform.h" /* AI_MAX_DIMS */

#ifdef __cplusplus
extern "C" {
#endif

#define AI_CONCAT_MAX_INPUTS 10 /* data inputs of ai_concat (TFLite Micro's limit too) */

/* ---- ai_copy_nd: one output-ordered walk over an N-D view of the input ----
 *
 * The output is `rank` outer dimensions (row-major, extents dims[]) of contiguous blocks of
 * `block` bytes. The block at outer index (i0, ..., i_{rank-1}) comes from input byte offset
 *   base + sum_d c_d(i_d),   c_d(i) = i * stride[d]          when table[d] < 0 (affine),
 *                            c_d(i) = tables[table[d] + i]    otherwise (tabled),
 * and a tabled entry < 0 means "padding": the whole block is filled with the element
 * `fill` (elem_size bytes: 1, 2 or 4 take fill[0]'s low bytes; 8 is fill[1]:fill[0]).
 * Strides may be negative (reversed slices); base + partial sums never are.
 * `tables` may be NULL when no dimension is tabled. */
typedef struct {
  int32_t rank;
  int32_t dims[AI_MAX_DIMS];
  int32_t stride[AI_MAX_DIMS];
  int32_t table[AI_MAX_DIMS];
  int32_t base;
  int32_t block;
  int32_t elem_size;
  int32_t fill[2];
} ai_copy_nd_params;

void ai_copy_nd(const ai_copy_nd_params *p, const void *input, const int32_t *tables,
                void *output);

/* ---- ai_concat: CONCATENATION and PACK ----
 * For each of `outer` steps, copy chunk[i] bytes from each input i in turn (input i
 * advances by chunk[i] per step). Inputs past n_inputs are NULL. */
typedef struct {
  int32_t n_inputs;
  int32_t outer;
  int32_t chunk[AI_CONCAT_MAX_INPUTS];
} ai_concat_params;

void ai_concat(const ai_concat_params *p, const void *in0, const void *in1, const void *in2,
               const void *in3, const void *in4, const void *in5, const void *in6,
               const void *in7, const void *in8, const void *in9, void *output);

/* ---- ai_gather: GATHER with runtime (or constant) int32 indices ----
 * params viewed as [batch, outer, axis_size, inner bytes], indices as [batch, coords];
 * out[b, o, k] = params[b, o, indices[b, k]]. An index outside [0, axis_size) (TFLite
 * Micro fails the inference) writes zero bytes. */
typedef struct {
  int32_t batch;
  int32_t outer;
  int32_t axis_size;
  int32_t coords;
  int32_t inner;
} ai_gather_params;

void ai_gather(const ai_gather_params *p, const void *params, const int32_t *indices,
               void *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_MOVEMENT_H */
