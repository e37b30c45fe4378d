/* FULLY_CONNECTED, int8 and float32 (stm32ai/passes/lower/fc.py; hybrid FC: ai_kernels_hybrid.h).
 *
 * Calling convention (see stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>);
 * Parameter fields are the lowering's attrs, all computed at generate time.
 * int8 kernels use integer arithmetic only (bit-exact with TFLite Micro's reference
 * kernels); float kernels follow TFLite's loop order. Details: docs/kernels_fc.md.
 */
#ifndef AI_KERNELS_FC_H
#define AI_KERNELS_FC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- FULLY_CONNECTED ------------------------------------------------------------------ */

/* `weights` are packed by stm32ai.passes.lower.fc.pack_fc_weights_s8 (the first
 * `pair_rows` rows two by two as int16 256*a + b, the rest one by one; 32-bit words over
 * groups of 4 columns, see ai_fc.c; out_features * ceil(in_features / 4) * 4 bytes) and
 * must be 4-byte aligned. `chunk_groups`: column groups between two exact
 * recoveries of a paired row (proved by the generator). `bias` holds the bias with the
 * input zero point folded in (NULL = zeros). `multipliers`/`shifts`: per-output
 * requantisation, or NULL to use out_multiplier/out_shift for every output;
 * `fast_requant` = 1 when every shift is <= -2 (rq_fast, exact). No scratch. */
typedef struct {
  int32_t batches, in_features, out_features;
  int32_t out_multiplier, out_shift, out_zero_point;
  int32_t act_min, act_max;
  int32_t pair_rows, chunk_groups, fast_requant;
} ai_fully_connected_s8_params;
void ai_fully_connected_s8(const ai_fully_connected_s8_params *p, const int8_t *input,
                           const int8_t *weights, const int32_t *bias, const int32_t *multipliers,
                           const int32_t *shifts, int8_t *output);
/* The same layer with scratch for the input row as int16 pairs (2 * in_features bytes,
 * 4-aligned), for per-tensor layers with a bias (no multiplier tables): the Cortex-M4 block
 * routine then skips the SXTB16 of the input in every block (docs/kernels_fc.md). Other
 * builds, and layers outside the routine's case, ignore the scratch. */
typedef ai_fully_connected_s8_params ai_fully_connected_s8_x16_params;
void ai_fully_connected_s8_x16(const ai_fully_connected_s8_x16_params *p, const int8_t *input,
                               const int8_t *weights, const int32_t *bias, int8_t *output,
                               void *scratch);

/* weights [out_features][in_features] as in TFLite; bias may be NULL. */
typedef struct {
  int32_t batches, in_features, out_features;
  float act_min, act_max;
} ai_fully_connected_f32_params;
void ai_fully_connected_f32(const ai_fully_connected_f32_params *p, const float *input,
                            const float *weights, const float *bias, float *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_FC_H */
