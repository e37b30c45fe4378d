/* SignalRfft / SignalIrfft (int16): the mixed-radix fixed-point FFT of KISS FFT as TFLite Micro builds it
 * (FIXED_POINT = 16), bit-exact. See docs/kernels_signal.md.
 *
 * A real frame of N = fft_length samples is read as N/2 complex pairs, transformed with a
 * complex FFT of n = N/2 points, then split into the N/2 + 1 bins of the real spectrum; the
 * inverse merges the bins into N/2 complex values, then runs the inverse complex FFT (the same
 * butterflies with the inverse twiddles). The transform is ai_signal_kiss_fix.h's, shared with
 * the int32 kernels (ai_signal_fft_s32.c), at width 16. Fixed-point rules (all of them matter
 * for bit-exactness):
 *   mul(a, b)   = (int16)(((int32)a * b + 2^14) >> 15), the products of a complex
 *                 multiplication summed in int32 before the rounding shift;
 *   div(x, k)   = mul(x, 32767 / k): every butterfly of radix p first scales its p inputs
 *                 by 1/p this way, and the real split scales by 1/2 the same way;
 *   add, sub    = int arithmetic stored back to int16 (wraps, never saturates);
 *   half(x)     = x >> 1 (arithmetic).
 * The decomposition (radix 4 first, then 2, 3, 5; `factors`) and the twiddles (cos/sin
 * rounded as floor(0.5 + 32767 * v)) come from generate time. */
#include "ai_kernels_signal.h"
#include "ai_signal_kiss_fix.h"

AI_KISS_STAGE stage16(void *f, int32_t fstride, const ai_kiss_ctx *c, int32_t p, int32_t m) {
  kf_stage(f, fstride, c, p, m, 16);
}

void ai_signal_rfft_s16(const ai_signal_rfft_s16_params *p, const int16_t *input, const int16_t *twiddles,
                        const int16_t *super_twiddles, int16_t *output, void *scratch) {
  kf_rfft(p->batches, p->input_length, p->fft_length, p->factors, input, twiddles, super_twiddles, output, scratch,
          stage16, 16);
}

void ai_signal_irfft_s16(const ai_signal_irfft_s16_params *p, const int16_t *input, const int16_t *twiddles,
                         const int16_t *super_twiddles, int16_t *output, void *scratch) {
  kf_irfft(p->batches, p->fft_length, p->factors, input, twiddles, super_twiddles, output, scratch, stage16, 16);
}
