/* DEPTHWISE_CONV_2D of a legacy uint8 model (TF1 QAT / TOCO): activations shifted to int8
 * (q - 128, zero point - 128: stm32ai/passes/legacy_u8.py), the uint8 filter re-centred at
 * generate time to w - zp_w (-255..255, int16) in TFLite's [1][k_h][k_w][out_c] order
 * (out_c = in_c * depth_mult), the input zero point folded into the bias (padded taps read
 * pad_value = the input zero point, whose share of the fold they cancel). Bit-exact with
 * LiteRT's reference uint8 DepthwiseConv (int32 accumulator, TFLite's double-rounding
 * requantisation). Generator: stm32ai/passes/lower/u8.py; docs/kernels_u8.md. */
#ifndef AI_KERNELS_CONV_DW_U8_H
#define AI_KERNELS_CONV_DW_U8_H

#include <stdint.h>

#include "ai_kernels_conv.h" /* ai_depthwise_conv2d_dm_s8_params */

#ifdef __cplusplus
extern "C" {
#endif

/* the int8 kernel's parameters: pad_value / out_offset are the shifted zero points */
typedef ai_depthwise_conv2d_dm_s8_params ai_depthwise_conv2d_u8_params;

void ai_depthwise_conv2d_u8(const ai_depthwise_conv2d_u8_params *p, const int8_t *input,
                            const int16_t *weights, const int32_t *bias, const int32_t *mult,
                            const int32_t *shift, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_CONV_DW_U8_H */
