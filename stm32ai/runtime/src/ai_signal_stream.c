/* TFLite Micro's streaming signal ops. See docs/kernels_signal_stream.md.
 * Every FIFO is linear, oldest sample first: appending writes at its end, consuming n samples
 * moves the rest to the front (memmove). The generator checked every size (signal_stream.py),
 * so no FIFO grows beyond its buffer. */
#include <string.h>

#include "ai_kernels_signal_stream.h"

#define S16(n) ((size_t)(n) * sizeof(int16_t))

void ai_signal_delay_s16(const ai_signal_delay_s16_params *p, const int16_t *input, int16_t *line,
                         int16_t *output) {
  const int32_t f = p->frame_size, d = p->delay_length;
  int32_t r;
  for (r = 0; r < p->rows; r++) {
    const int16_t *x = input + (size_t)r * (size_t)f;
    int16_t *y = output + (size_t)r * (size_t)f;
    int16_t *s = d > 0 ? line + (size_t)r * (size_t)d : line;
    /* the row's stream is s[0..d) then x[0..f): the first f samples out, the last d kept */
    if (d == 0) {
      memmove(y, x, S16(f));
    } else if (d >= f) {
      memcpy(y, s, S16(f));
      memmove(s, s + f, S16(d - f));
      memcpy(s + (d - f), x, S16(f));
    } else {
      memcpy(y, s, S16(d));
      memcpy(y + d, x, S16(f - d));
      memcpy(s, x + (f - d), S16(d));
    }
  }
}

void ai_signal_framer_s16(const ai_signal_framer_s16_params *p, const int16_t *input, int32_t *fill,
                          int16_t *buffer, int16_t *output, uint8_t *valid) {
  const int32_t size = p->frame_size, step = p->frame_step;
  int32_t len = p->prefill + fill[0];
  int32_t r, k;
  *valid = 1u;
  for (r = 0; r < p->rows; r++) {
    int16_t *fifo = buffer + (size_t)r * (size_t)p->capacity;
    len = p->prefill + fill[0]; /* every row's FIFO holds as many samples */
    for (k = 0; k < p->n_frames; k++) {
      const size_t i = (size_t)r * (size_t)p->n_frames + (size_t)k;
      int16_t *y = output + i * (size_t)size;
      memcpy(fifo + len, input + i * (size_t)step, S16(step));
      len += step;
      if (len >= size) {
        memcpy(y, fifo, S16(size));
        len -= step;
        memmove(fifo, fifo + step, S16(len));
      } else {
        memset(y, 0, S16(size)); /* TFLM leaves an invalid frame as it was */
        *valid = 0u;
      }
    }
  }
  fill[0] = len - p->prefill;
}

void ai_signal_stacker_s16(const ai_signal_stacker_s16_params *p, const int16_t *input, int32_t *fill,
                           int16_t *buffer, int16_t *output, uint8_t *valid) {
  const int32_t ch = p->num_channels;
  int32_t len = fill[0];
  int32_t k;
  memcpy(buffer + len, input, S16(ch));
  len += ch;
  if (fill[1] == 0) { /* the first frame, replicated left_context more times */
    for (k = 0; k < p->left_context; k++) {
      memcpy(buffer + len, buffer + (len - ch), S16(ch));
      len += ch;
    }
    fill[1] = 1;
  }
  if (len >= p->buffer_size) {
    memcpy(output, buffer, S16(p->buffer_size));
    len -= p->step_size;
    memmove(buffer, buffer + p->step_size, S16(len));
    *valid = 1u;
  } else {
    memset(output, 0, S16(p->buffer_size)); /* TFLM leaves the output as it was */
    *valid = 0u;
  }
  fill[0] = len;
}

void ai_signal_overlap_add_s16(const ai_signal_overlap_add_s16_params *p, const int16_t *input,
                               int16_t *sums, int16_t *output) {
  const int32_t size = p->frame_size, step = p->frame_step;
  int32_t r, k, i;
  for (r = 0; r < p->rows; r++) {
    int16_t *acc = sums + (size_t)r * (size_t)size;
    for (k = 0; k < p->n_frames; k++) {
      const size_t f = (size_t)r * (size_t)p->n_frames + (size_t)k;
      const int16_t *x = input + f * (size_t)size;
      for (i = 0; i < size; i++) {
        int32_t v = (int32_t)x[i] + (int32_t)acc[i];
        acc[i] = (int16_t)(v < INT16_MIN ? INT16_MIN : (v > INT16_MAX ? INT16_MAX : v));
      }
      memcpy(output + f * (size_t)step, acc, S16(step));
      memmove(acc, acc + step, S16(size - step));
      memset(acc + (size - step), 0, S16(step));
    }
  }
}

void ai_signal_overlap_add_f32(const ai_signal_overlap_add_f32_params *p, const float *input,
                               float *sums, float *output) {
  const int32_t size = p->frame_size, step = p->frame_step;
  int32_t r, k, i;
  for (r = 0; r < p->rows; r++) {
    float *acc = sums + (size_t)r * (size_t)size;
    for (k = 0; k < p->n_frames; k++) {
      const size_t f = (size_t)r * (size_t)p->n_frames + (size_t)k;
      const float *x = input + f * (size_t)size;
      for (i = 0; i < size; i++) {
        acc[i] += x[i];
      }
      memcpy(output + f * (size_t)step, acc, (size_t)step * sizeof(float));
      memmove(acc, acc + step, (size_t)(size - step) * sizeof(float));
      memset(acc + (size - step), 0, (size_t)step * sizeof(float));
    }
  }
}

void ai_circular_buffer_s8(const ai_circular_buffer_s8_params *p, const int8_t *input, int8_t *slots,
                           int8_t *output) {
  const size_t depth = (size_t)p->depth, keep = (size_t)(p->num_slots - 1) * depth;
  memmove(slots, slots + depth, keep);
  memcpy(slots + keep, input, depth);
  memcpy(output, slots, keep + depth);
}
