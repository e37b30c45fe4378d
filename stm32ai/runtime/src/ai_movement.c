/* Data-movement kernels (see ai_kernels_movement.h and docs/kernels_movement.md).
 *
 * All three walk the output once in order and copy raw bytes; every index, stride and
 * table was computed by the lowering, so no element type is assumed here. */
#include <string.h>

#include "ai_kernels_movement.h"

/* Fill `bytes` bytes (a multiple of esize) with copies of one element. */
static void fill_elems(uint8_t *out, int32_t bytes, int32_t esize, const int32_t fill[2]) {
  int32_t i;
  switch (esize) {
    case 1:
      memset(out, (int)(uint8_t)fill[0], (size_t)bytes);
      break;
    case 2: {
      const uint16_t v = (uint16_t)fill[0];
      for (i = 0; i < bytes; i += 2) {
        memcpy(out + i, &v, 2);
      }
      break;
    }
    case 4: {
      const uint32_t v = (uint32_t)fill[0];
      for (i = 0; i < bytes; i += 4) {
        memcpy(out + i, &v, 4);
      }
      break;
    }
    case 8: {
      const uint64_t v = ((uint64_t)(uint32_t)fill[1] << 32) | (uint64_t)(uint32_t)fill[0];
      for (i = 0; i < bytes; i += 8) {
        memcpy(out + i, &v, 8);
      }
      break;
    }
    default:
      memset(out, 0, (size_t)bytes);
      break;
  }
}

/* Offset after adding dimension d at index i to a partial offset (-1: padding). */
static int32_t step(const ai_copy_nd_params *p, const int32_t *tables, int32_t d, int32_t prev,
                    int32_t i) {
  int32_t t;
  if (prev < 0) {
    return -1;
  }
  if (p->table[d] < 0) {
    return prev + i * p->stride[d];
  }
  t = tables[p->table[d] + i];
  return t < 0 ? -1 : prev + t;
}

void ai_copy_nd(const ai_copy_nd_params *p, const void *input, const int32_t *tables,
                void *output) {
  const uint8_t *const in = (const uint8_t *)input;
  uint8_t *out = (uint8_t *)output;
  const int32_t block = p->block;
  int32_t idx[AI_MAX_DIMS];
  int32_t off[AI_MAX_DIMS];
  int32_t last, n, d, i;

  if (p->rank <= 0) {
    memcpy(out, in + p->base, (size_t)block);
    return;
  }
  last = p->rank - 1;
  n = p->dims[last];
  /* off[d]: input offset contributed by the dimensions before d (-1 once padded) */
  off[0] = p->base;
  for (d = 0; d < last; ++d) {
    idx[d] = 0;
    off[d + 1] = step(p, tables, d, off[d], 0);
  }
  for (;;) {
    const int32_t o = off[last];
    if (o < 0) {
      fill_elems(out, n * block, p->elem_size, p->fill);
    } else if (p->table[last] < 0) {
      const uint8_t *src = in + o;
      const int32_t s = p->stride[last];
      if (block == 1) {
        for (i = 0; i < n; ++i) {
          out[i] = src[i * s];
        }
      } else if (s == block) {
        memcpy(out, src, (size_t)(n * block));
      } else {
        for (i = 0; i < n; ++i) {
          memcpy(out + i * block, src + i * s, (size_t)block);
        }
      }
    } else {
      const int32_t *t = tables + p->table[last];
      for (i = 0; i < n; ++i) {
        if (t[i] < 0) {
          fill_elems(out + i * block, block, p->elem_size, p->fill);
        } else {
          memcpy(out + i * block, in + o + t[i], (size_t)block);
        }
      }
    }
    out += n * block;
    /* next row: odometer over the outer dimensions */
    d = last - 1;
    while (d >= 0 && ++idx[d] == p->dims[d]) {
      idx[d] = 0;
      --d;
    }
    if (d < 0) {
      break;
    }
    for (; d < last; ++d) {
      off[d + 1] = step(p, tables, d, off[d], idx[d]);
    }
  }
}

void ai_concat(const ai_concat_params *p, const void *in0, const void *in1, const void *in2,
               const void *in3, const void *in4, const void *in5, const void *in6,
               const void *in7, const void *in8, const void *in9, void *output) {
  const uint8_t *src[AI_CONCAT_MAX_INPUTS];
  uint8_t *out = (uint8_t *)output;
  int32_t o, i;
  src[0] = (const uint8_t *)in0;
  src[1] = (const uint8_t *)in1;
  src[2] = (const uint8_t *)in2;
  src[3] = (const uint8_t *)in3;
  src[4] = (const uint8_t *)in4;
  src[5] = (const uint8_t *)in5;
  src[6] = (const uint8_t *)in6;
  src[7] = (const uint8_t *)in7;
  src[8] = (const uint8_t *)in8;
  src[9] = (const uint8_t *)in9;
  for (o = 0; o < p->outer; ++o) {
    for (i = 0; i < p->n_inputs; ++i) {
      const int32_t c = p->chunk[i];
      memcpy(out, src[i] + o * c, (size_t)c);
      out += c;
    }
  }
}

void ai_gather(const ai_gather_params *p, const void *params, const int32_t *indices,
               void *output) {
  const uint8_t *const in = (const uint8_t *)params;
  uint8_t *out = (uint8_t *)output;
  const int32_t inner = p->inner;
  int32_t b, o, k;
  for (b = 0; b < p->batch; ++b) {
    const int32_t *ix = indices + b * p->coords;
    for (o = 0; o < p->outer; ++o) {
      const uint8_t *row = in + (b * p->outer + o) * p->axis_size * inner;
      for (k = 0; k < p->coords; ++k) {
        const int32_t j = ix[k];
        if (j < 0 || j >= p->axis_size) {
          memset(out, 0, (size_t)inner);
        } else {
          memcpy(out, row + j * inner, (size_t)inner);
        }
        out += inner;
      }
    }
  }
}
