/* SignalRfft / SignalIrfft (int32): KISS FFT's kiss_fftr / kiss_fftri with 32-bit fixed point (FIXED_POINT = 32, as
 * TFLM's kiss_fft_int32 wrapper builds it), bit-exact. The transform is ai_signal_kiss_fix.h's, shared with the
 * int16 kernels (ai_signal_rfft.c), at width 32: mul(a, b) = (int32)(((int64)a * b + 2^30) >> 31), div(x, k) =
 * mul(x, 2147483647 / k), int32 sums that wrap (done in uint32: KISS FFT's int32 sums overflow the same way on
 * every target TFLM runs on). See docs/kernels_signal.md. */
#include "ai_kernels_signal.h"
#include "ai_signal_kiss_fix.h"

AI_KISS_STAGE stage32(void *f, int32_t fstride, const ai_kiss_ctx *c, int32_t p, int32_t m) {
  kf_stage(f, fstride, c, p, m, 32);
}

void ai_signal_irfft_s32(const ai_signal_irfft_s32_params *p, const int32_t *input, const int32_t *twiddles,
                         const int32_t *super_twiddles, int32_t *output, void *scratch) {
  kf_irfft(p->batches, p->fft_length, p->factors, input, twiddles, super_twiddles, output, scratch, stage32, 32);
}

void ai_signal_rfft_s32(const ai_signal_rfft_s32_params *p, const int32_t *input, const int32_t *twiddles,
                        const int32_t *super_twiddles, int32_t *output, void *scratch) {
  kf_rfft(p->batches, p->input_length, p->fft_length, p->factors, input, twiddles, super_twiddles, output, scratch,
          stage32, 32);
}
