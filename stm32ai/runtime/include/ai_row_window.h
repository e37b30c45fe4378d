/* The row window of a windowed kernel (docs/stripes.md, "Row-window entries").
 *
 * A stripe (--optimization ram) runs a convolution or pool a few output rows at a time: its
 * executor calls the kernel's `_rows` entry with the layer's params (const, in flash, never
 * copied) and the window of this call: `out_h` output rows, `pad_top` padding rows above the
 * first input row given, `in_h` input rows present from the input pointer. The kernel's usual
 * entry is the `_rows` entry with the full window {p->out_h, p->pad[0] (pad_h), p->in_h}: one
 * kernel, one set of loops. */
#ifndef AI_ROW_WINDOW_H
#define AI_ROW_WINDOW_H

#include <stdint.h>

typedef struct {
  int32_t out_h, pad_top, in_h;
} ai_row_window;

/* A stripe's ring drop (the executor, docs/stripes.md): n bytes of whole rows moved from src
 * down to dst (dst <= src, the ranges may overlap), as memmove but word by word: newlib-nano's
 * memmove copies bytes (ai_runtime.c). */
void ai_rows_move(uint8_t *dst, const uint8_t *src, uint32_t n);

#endif
