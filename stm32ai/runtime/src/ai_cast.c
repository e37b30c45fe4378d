/* CAST between bool, 8/16/32-bit integers, int64 and float32. See docs/kernels_binary.md.
 *
 * Values pass through int64_t (integer and bool inputs) or float (float32 inputs):
 *   integer -> integer: two's complement wrap to the output width (as static_cast);
 *   any -> bool: x != 0;   integer -> float: rounded to nearest;
 *   float -> integer: truncated toward zero and saturated to the output type's range, as
 *   TFLite Micro and LiteRT do (checked: 150.0 -> int8 gives 127); NaN gives 0.
 * Elements are converted in order, each read before it is written: the output may alias
 * the input when both element types have the same size.
 */
#include "ai_kernels_cast.h"

static int64_t load_int(const void *in, int32_t type, int32_t i) {
  switch (type) {
    case AI_CAST_BOOL: return ((const uint8_t *)in)[i] != 0u;
    case AI_CAST_S8: return ((const int8_t *)in)[i];
    case AI_CAST_U8: return ((const uint8_t *)in)[i];
    case AI_CAST_S16: return ((const int16_t *)in)[i];
    case AI_CAST_U16: return ((const uint16_t *)in)[i];
    case AI_CAST_S32: return ((const int32_t *)in)[i];
    case AI_CAST_U32: return ((const uint32_t *)in)[i];
    default: return ((const int64_t *)in)[i];
  }
}

static void store_int(void *out, int32_t type, int32_t i, int64_t v) {
  const uint64_t u = (uint64_t)v; /* wrap through unsigned: defined for every width */
  switch (type) {
    case AI_CAST_BOOL: ((uint8_t *)out)[i] = (uint8_t)(v != 0); break;
    case AI_CAST_S8: ((int8_t *)out)[i] = (int8_t)(uint8_t)u; break;
    case AI_CAST_U8: ((uint8_t *)out)[i] = (uint8_t)u; break;
    case AI_CAST_S16: ((int16_t *)out)[i] = (int16_t)(uint16_t)u; break;
    case AI_CAST_U16: ((uint16_t *)out)[i] = (uint16_t)u; break;
    case AI_CAST_S32: ((int32_t *)out)[i] = (int32_t)(uint32_t)u; break;
    case AI_CAST_U32: ((uint32_t *)out)[i] = (uint32_t)u; break;
    default: ((int64_t *)out)[i] = v; break;
  }
}

/* float -> integer type `t`: truncated toward zero, saturated to the type's range, NaN -> 0.
 * `hi` is the type's maximum where a float holds it exactly, else the power of two above. */
static int64_t float_to_int(float x, int32_t t) {
  float lo, hi;
  int64_t ilo, ihi;
  switch (t) {
    case AI_CAST_S8: lo = -128.0f; hi = 127.0f; ilo = INT8_MIN; ihi = INT8_MAX; break;
    case AI_CAST_U8: lo = 0.0f; hi = 255.0f; ilo = 0; ihi = UINT8_MAX; break;
    case AI_CAST_S16: lo = -32768.0f; hi = 32767.0f; ilo = INT16_MIN; ihi = INT16_MAX; break;
    case AI_CAST_U16: lo = 0.0f; hi = 65535.0f; ilo = 0; ihi = UINT16_MAX; break;
    case AI_CAST_S32: lo = -2147483648.0f; hi = 2147483648.0f; ilo = INT32_MIN; ihi = INT32_MAX; break;
    case AI_CAST_U32: lo = 0.0f; hi = 4294967296.0f; ilo = 0; ihi = UINT32_MAX; break;
    default: lo = -9223372036854775808.0f; hi = 9223372036854775808.0f; ilo = INT64_MIN; ihi = INT64_MAX; break;
  }
  if (!(x == x)) {
    return 0;
  }
  if (x <= lo) {
    return ilo;
  }
  if (x >= hi) {
    return ihi;
  }
  return (int64_t)x;
}

static float int_to_float(int64_t v) {
  /* an int32 conversion is a single instruction on an FPU; the int64 one a library call */
  return (v >= INT32_MIN && v <= INT32_MAX) ? (float)(int32_t)v : (float)v;
}

void ai_cast(const ai_cast_params *p, const void *input, void *output) {
  const int32_t n = p->size, it = p->in_type, ot = p->out_type;
  if (it == AI_CAST_F32) {
    const float *x = (const float *)input;
    for (int32_t i = 0; i < n; i++) {
      const float v = x[i];
      if (ot == AI_CAST_F32) {
        ((float *)output)[i] = v;
      } else if (ot == AI_CAST_BOOL) {
        ((uint8_t *)output)[i] = (uint8_t)(v != 0.0f);
      } else {
        store_int(output, ot, i, float_to_int(v, ot));
      }
    }
    return;
  }
  for (int32_t i = 0; i < n; i++) {
    const int64_t v = load_int(input, it, i);
    if (ot == AI_CAST_F32) {
      ((float *)output)[i] = int_to_float(v);
    } else {
      store_int(output, ot, i, v);
    }
  }
}
