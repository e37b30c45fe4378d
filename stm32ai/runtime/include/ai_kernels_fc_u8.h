/* FULLY_CONNECTED of a legacy uint8 model (TF1 QAT / TOCO): the input shifted to int8 (q - 128,
 * zero point - 128: stm32ai/passes/legacy_u8.py), the uint8 weights re-centred at generate time
 * to w - zp_w (-255..255, int16) in TFLite's [out][in] order, the input zero point folded into
 * the bias. LiteRT's reference FullyConnected requantises with one rounding shift of the 64-bit
 * product, (acc * M + 2^(r-1)) >> r with r = 31 - shift (docs/kernels_fc.md, "Reference
 * differences"), which this kernel does (ai_requant64): bit-exact with LiteRT-ref.
 * Generator: stm32ai/passes/lower/u8.py; docs/kernels_u8.md. */
#ifndef AI_KERNELS_FC_U8_H
#define AI_KERNELS_FC_U8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int32_t batches, in_features, out_features;
  int32_t out_multiplier, out_shift, out_zero_point; /* TFLite's multiplier and shift (-31..30) */
  int32_t act_min, act_max;
} ai_fully_connected_u8_params;

void ai_fully_connected_u8(const ai_fully_connected_u8_params *p, const int8_t *input,
                           const int16_t *weights, const int32_t *bias, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_FC_U8_H */
