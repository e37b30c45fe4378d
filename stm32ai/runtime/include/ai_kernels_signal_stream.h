/* TFLite Micro's streaming signal ops: SignalDelay, SignalFramer, SignalStacker,
 * SignalOverlapAdd (stm32ai/passes/lower/signal_stream.py).
 *
 * Calling convention (stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch]);
 * The state inputs are persistent tensors (the instance's state area, zeroed by ai_create and
 * ai_reset) that the kernels rewrite in place; each keeps a FIFO oldest sample first, which
 * gives the outputs of TFLM's circular buffers. Details: docs/kernels_signal_stream.md.
 */
#ifndef AI_KERNELS_SIGNAL_STREAM_H
#define AI_KERNELS_SIGNAL_STREAM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- SignalDelay: out = the input delayed by delay_length samples along the last axis */
typedef struct {
  int32_t rows, frame_size, delay_length;
} ai_signal_delay_s16_params;
/* line: rows * delay_length samples (NULL when delay_length is 0) */
void ai_signal_delay_s16(const ai_signal_delay_s16_params *p, const int16_t *input, int16_t *line,
                         int16_t *output);

/* ---- SignalFramer: frames of frame_size samples every frame_step samples */
typedef struct {
  int32_t rows, n_frames, frame_size, frame_step;
  int32_t capacity; /* samples of each row's FIFO in buffer */
  int32_t prefill;  /* zeros the FIFO starts with: frame_size - frame_step, or 0 */
} ai_signal_framer_s16_params;
/* fill[0]: samples in each FIFO beyond `prefill`; buffer: rows * capacity samples */
void ai_signal_framer_s16(const ai_signal_framer_s16_params *p, const int16_t *input, int32_t *fill,
                          int16_t *buffer, int16_t *output, uint8_t *valid);

/* ---- SignalStacker: left + 1 + right frames of num_channels, every step frames */
typedef struct {
  int32_t num_channels, left_context;
  int32_t buffer_size; /* num_channels * (left + right + 1) */
  int32_t step_size;   /* num_channels * step */
} ai_signal_stacker_s16_params;
/* fill[0]: samples in the FIFO, fill[1]: the first frame arrived; buffer: buffer_size samples */
void ai_signal_stacker_s16(const ai_signal_stacker_s16_params *p, const int16_t *input, int32_t *fill,
                           int16_t *buffer, int16_t *output, uint8_t *valid);

/* ---- SignalOverlapAdd: frames [rows, n_frames, frame_size] -> [rows, n_frames * frame_step] */
typedef struct {
  int32_t rows, n_frames, frame_size, frame_step;
} ai_signal_overlap_add_params;
typedef ai_signal_overlap_add_params ai_signal_overlap_add_s16_params;
typedef ai_signal_overlap_add_params ai_signal_overlap_add_f32_params;
/* sums: rows * frame_size partial sums; int16 saturates each sum, as TFLM */
void ai_signal_overlap_add_s16(const ai_signal_overlap_add_s16_params *p, const int16_t *input,
                               int16_t *sums, int16_t *output);
void ai_signal_overlap_add_f32(const ai_signal_overlap_add_f32_params *p, const float *input,
                               float *sums, float *output);

/* ---- CIRCULAR_BUFFER (TFLM's custom op, cycles_max 1): the last num_slots inputs, oldest
 * first. TFLM keeps them in the output tensor itself; here they are state, copied out. */
typedef struct {
  int32_t num_slots, depth;
} ai_circular_buffer_s8_params;
void ai_circular_buffer_s8(const ai_circular_buffer_s8_params *p, const int8_t *input, int8_t *slots,
                           int8_t *output);

#ifdef __cplusplus
}
#endif
#endif /* AI_KERNELS_SIGNAL_STREAM_H */
