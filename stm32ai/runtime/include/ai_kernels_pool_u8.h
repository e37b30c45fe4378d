/* AVERAGE_POOL_2D of a legacy uint8 model on its shifted int8 activations (q - 128:
 * stm32ai/passes/legacy_u8.py). LiteRT's reference uint8 AveragePool rounds the sum of the
 * in-image taps half up, (sum + n/2) / n, on codes 0..255; the int8 kernel rounds half away
 * from zero, which differs once the shifted sum is negative. This kernel sums the uint8 codes
 * (x + 128), divides as LiteRT does and shifts back: bit-exact with LiteRT-ref.
 * Parameters: ai_pool_params (ai_kernels_pool.h). Generator: stm32ai/passes/lower/u8.py;
 * docs/kernels_u8.md. */
#ifndef AI_KERNELS_POOL_U8_H
#define AI_KERNELS_POOL_U8_H

#include <stdint.h>

#include "ai_kernels_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef ai_pool_params ai_avgpool_u8_params;
void ai_avgpool_u8(const ai_avgpool_u8_params *p, const int8_t *input, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_POOL_U8_H */
