/* Audio front-end kernels other than the FFT: window, FFT auto-scale, energy, filter bank,
 * square root, spectral subtraction, PCAN and log. Integer only, bit-exact with TFLite
 * Micro's signal library: the comments give each op's arithmetic; the casts reproduce its
 * C integer conversions (16/32/64-bit wrap-around, sign extension of int16 into unsigned
 * types) so every input, even a degenerate one, gives TFLM's output. docs/kernels_signal.md.
 */
#include <string.h>

#include "ai_kernels_signal.h"

/* Bit length of x; 32 for x == 0 (what TFLM computes with __builtin_clz on GCC/Clang). */
static inline int32_t msb32(uint32_t x) {
  if (x == 0u) {
    return 32;
  }
#if defined(__GNUC__)
  return 32 - __builtin_clz(x);
#else
  int32_t n = 0;
  while (x != 0u) {
    x >>= 1;
    n++;
  }
  return n;
#endif
}

static inline int32_t msb64(uint64_t x) {
  if ((x >> 32) != 0u) {
    return 32 + msb32((uint32_t)(x >> 32));
  }
  return x == 0u ? 64 : msb32((uint32_t)x);
}

/* ---- window ---------------------------------------------------------------------------- */

void ai_signal_window_s16(const ai_signal_window_s16_params *p, const int16_t *input,
                          const int16_t *window, int16_t *output) {
  for (int32_t base = 0; base < p->size; base += p->window_size) {
    for (int32_t i = 0; i < p->window_size; i++) {
      int32_t v = ((int32_t)input[base + i] * window[i]) >> p->shift;
      output[base + i] = (int16_t)(v < INT16_MIN ? INT16_MIN : (v > INT16_MAX ? INT16_MAX : v));
    }
  }
}

/* ---- FFT auto-scale ----------------------------------------------------------------------
 * max|x| is computed in int16 exactly as TFLM does: -(-32768) wraps to -32768, after which
 * any later value replaces the maximum. scale = 15 - msb(max) (0 when negative). */

void ai_signal_fft_auto_scale_s16(const ai_signal_fft_auto_scale_s16_params *p, const int16_t *input,
                                  int16_t *output, int32_t *scale_bits) {
  int16_t mx = 0;
  for (int32_t i = 0; i < p->size; i++) {
    int16_t v = input[i];
    if (v > mx) {
      mx = v;
    } else if (-v > mx) {
      mx = (int16_t)(-v);
    }
  }
  int32_t s = 16 - msb32((uint32_t)(int32_t)mx) - 1;
  if (s < 0) {
    s = 0;
  }
  for (int32_t i = 0; i < p->size; i++) {
    output[i] = (int16_t)((int32_t)input[i] * (1 << s));
  }
  *scale_bits = s;
}

/* ---- energy ---------------------------------------------------------------------------- */

void ai_signal_energy_s16(const ai_signal_energy_s16_params *p, const int16_t *input, uint32_t *output) {
  for (int32_t i = 0; i < p->size; i++) {
    if (i < p->start_index || i >= p->end_index) {
      output[i] = 0u;
      continue;
    }
    int32_t re = input[2 * i], im = input[2 * i + 1];
    output[i] = (uint32_t)(re * re) + (uint32_t)(im * im);
  }
}

/* ---- filter bank ------------------------------------------------------------------------
 * num_channels + 1 bands; band i adds weight * x into channel i - 1 and unweight * x into
 * channel i. Band 0 only feeds channel 0's unweighted part. int16 weights are converted to
 * uint64 with sign extension, as in TFLM's `int16 * uint64`. */

void ai_signal_filter_bank_u32(const ai_signal_filter_bank_u32_params *p, const uint32_t *input,
                               const int16_t *weights, const int16_t *unweights,
                               const int16_t *channel_frequency_starts,
                               const int16_t *channel_weight_starts, const int16_t *channel_widths,
                               uint64_t *output) {
  uint64_t acc = 0u, unacc = 0u;
  for (int32_t ch = 0; ch <= p->num_channels; ch++) {
    const uint32_t *x = input + channel_frequency_starts[ch];
    const int16_t *w = weights + channel_weight_starts[ch];
    const int16_t *uw = unweights + channel_weight_starts[ch];
    for (int32_t j = 0; j < channel_widths[ch]; j++) {
      acc += (uint64_t)(int64_t)w[j] * x[j];
      unacc += (uint64_t)(int64_t)uw[j] * x[j];
    }
    if (ch > 0) {
      output[ch - 1] = acc;
    }
    acc = unacc;
    unacc = 0u;
  }
}

/* ---- square root ------------------------------------------------------------------------
 * Bit-by-bit integer square root rounded to nearest (no rounding up past the type's max).
 * TFLM takes a 32-bit routine for values below 2^32, whose 16-bit result saturates at
 * 0xFFFF there; it starts from the same bit and runs the same steps as the 64-bit one (the
 * bit lengths differ by 32, an even number), so one routine serves both, only the
 * saturation point follows the value's width. */

static uint32_t isqrt64(uint64_t num) {
  if (num == 0u) {
    return 0u;
  }
  const uint64_t res_max = (num >> 32) == 0u ? 0xFFFFu : 0xFFFFFFFFu;
  uint64_t res = 0u;
  int32_t top = (64 - msb64(num)) | 1;
  uint64_t bit = (uint64_t)1 << (63 - top);
  for (int32_t it = (63 - top) / 2 + 1; it > 0; it--) {
    if (num >= res + bit) {
      num -= res + bit;
      res = (res >> 1) + bit;
    } else {
      res >>= 1;
    }
    bit >>= 2;
  }
  if (num > res && res != res_max) {
    res++;
  }
  return (uint32_t)res;
}

void ai_signal_filter_bank_sqrt_u64(const ai_signal_filter_bank_sqrt_u64_params *p, const uint64_t *input,
                                    const int32_t *scale_bits, uint32_t *output) {
  const int32_t s = *scale_bits;
  for (int32_t i = 0; i < p->size; i++) {
    uint32_t r = isqrt64(input[i]);
    output[i] = (s <= 0) ? r : (s >= 32 ? 0u : r >> s);
  }
}

/* ---- spectral subtraction ---------------------------------------------------------------
 * Per channel (even channels use smoothing, odd ones the alternate coefficients):
 *   up    = x << smoothing_bits                                   (uint32, wraps)
 *   noise = (up * smoothing + noise * one_minus_smoothing) >> spectral_subtraction_bits
 *   est   = min(noise, up)             (clamping: the state takes est too)
 *   floor = (x * min_signal_remaining) >> spectral_subtraction_bits
 *   y     = max((up - est) >> smoothing_bits, floor)
 * with 64-bit products and 32-bit stores. */

void ai_signal_spectral_subtraction_u32(const ai_signal_spectral_subtraction_u32_params *p,
                                        const uint32_t *input, uint32_t *state, uint32_t *output,
                                        uint32_t *noise_estimate) {
  if (p->reset_state) {
    memset(state, 0, (size_t)p->num_channels * sizeof(uint32_t));
  }
  const int32_t sb = p->smoothing_bits, ssb = p->spectral_subtraction_bits;
  for (int32_t i = 0; i < p->num_channels; i++) {
    const uint32_t sm = (i & 1) ? p->alternate_smoothing : p->smoothing;
    const uint32_t om = (i & 1) ? p->alternate_one_minus_smoothing : p->one_minus_smoothing;
    const uint32_t up = input[i] << sb;
    uint32_t noise = (uint32_t)(((uint64_t)up * sm + (uint64_t)state[i] * om) >> ssb);
    uint32_t est = noise;
    if (est > up) {
      est = up;
      if (p->clamping) {
        noise = est;
      }
    }
    state[i] = noise;
    noise_estimate[i] = noise;
    const uint32_t floor = (uint32_t)(((uint64_t)input[i] * p->min_signal_remaining) >> ssb);
    const uint32_t sub = (up - est) >> sb;
    output[i] = sub > floor ? sub : floor;
  }
}

/* ---- PCAN -------------------------------------------------------------------------------
 * gain = wide-dynamic-range function of the noise estimate: a quadratic segment of the
 * look-up table chosen by msb(noise), evaluated on 10 fractional bits; snr = (x * gain) >>
 * snr_shift; y = shrink(snr) with 12 SNR bits in and 6 bits out. */

#define PCAN_SNR_BITS 12
#define PCAN_OUTPUT_BITS 6

static int16_t pcan_gain(uint32_t x, const int16_t *lut) {
  if (x <= 2u) {
    return lut[x];
  }
  const int32_t interval = msb32(x);
  lut += 4 * interval - 6;
  const uint32_t shifted = interval < 11 ? x << (11 - interval) : x >> (interval - 11);
  const int32_t frac = (int32_t)(int16_t)(shifted & 0x3FFu);
  int32_t r = ((int32_t)lut[2] * frac) >> 5;
  r = (int32_t)((uint32_t)r + ((uint32_t)(int32_t)lut[1] << 5));
  r = (int32_t)((uint32_t)r * (uint32_t)frac);
  r = (int32_t)((uint32_t)r + (1u << 14)) >> 15;
  r += lut[0];
  return (int16_t)r;
}

static uint32_t pcan_shrink(uint32_t x) {
  if (x < (2u << PCAN_SNR_BITS)) {
    return (x * x) >> (2 + 2 * PCAN_SNR_BITS - PCAN_OUTPUT_BITS);
  }
  return (x >> (PCAN_SNR_BITS - PCAN_OUTPUT_BITS)) - (1u << PCAN_OUTPUT_BITS);
}

void ai_signal_pcan_u32(const ai_signal_pcan_u32_params *p, const uint32_t *input,
                        const uint32_t *noise_estimate, const int16_t *gain_lut, uint32_t *output) {
  for (int32_t i = 0; i < p->num_channels; i++) {
    const uint32_t gain = (uint32_t)(int32_t)pcan_gain(noise_estimate[i], gain_lut);
    const uint32_t snr = (uint32_t)(((uint64_t)input[i] * gain) >> p->snr_shift);
    output[i] = pcan_shrink(snr);
  }
}

/* ---- log --------------------------------------------------------------------------------
 * log2(x) = integer part msb(x) - 1 plus a 16-bit fraction: the mantissa bits corrected by
 * a 128-segment table (log2(1 + f) - f) with linear interpolation; then
 * ln = (log2 * 45426 + 2^15) >> 16 and y = (output_scale * ln + 2^15) >> 16, clamped to
 * 32767; inputs whose scaled value is 0 or 1 give 0. */

static uint32_t log2_fraction(uint32_t x, int32_t log2x, const uint16_t *lut) {
  int32_t frac = (int32_t)((int64_t)x - ((int64_t)1 << log2x));
  if (log2x < 16) {
    frac = (int32_t)((uint32_t)frac << (16 - log2x));
  } else {
    frac >>= (log2x - 16);
  }
  const uint32_t seg = (uint32_t)frac >> 9;
  const int32_t c0 = lut[seg], c1 = lut[seg + 1u];
  const int32_t seg_base = (int32_t)(seg << 9);
  const int32_t rel = ((c1 - c0) * (frac - seg_base)) >> 16;
  return (uint32_t)(frac + c0 + rel);
}

void ai_signal_filter_bank_log_u32(const ai_signal_filter_bank_log_u32_params *p, const uint32_t *input,
                                   const uint16_t *log_lut, int16_t *output) {
  for (int32_t i = 0; i < p->num_channels; i++) {
    const uint32_t x = input[i] << p->input_correction_bits;
    if (x <= 1u) {
      output[i] = 0;
      continue;
    }
    const int32_t integer = msb32(x) - 1;
    const uint32_t log2v = ((uint32_t)integer << 16) + log2_fraction(x, integer, log_lut);
    const uint32_t ln = (uint32_t)(((uint64_t)45426u * log2v + 32768u) >> 16);
    const uint32_t v = (p->output_scale * ln + 32768u) >> 16;
    output[i] = (int16_t)(v < 32767u ? v : 32767u);
  }
}
