/* Legacy uint8 DEPTHWISE_CONV_2D on shifted int8 activations and int16 re-centred weights
 * (ai_kernels_conv_dw_u8.h, docs/kernels_u8.md): the plain depthwise loop of ai_conv_dw_loop.h
 * at weight width 16. No float, no malloc. */
#include "ai_kernels_conv_dw_u8.h"

#include "ai_conv_dw_loop.h"

void ai_depthwise_conv2d_u8(const ai_depthwise_conv2d_u8_params *p, const int8_t *input,
                            const int16_t *weights, const int32_t *bias, const int32_t *mult,
                            const int32_t *shift, int8_t *output) {
  ai_dw_dm_loop(p, input, weights, 16, bias, mult, shift, output);
}
