/* Audio front-end kernels: TFLite Micro's Signal custom ops (micro_speech feature
 * generator): window, FFT auto-scale, int16 real FFT, energy, mel filter bank, its square
 * root, spectral subtraction, PCAN gain control and log.
 *
 * Calling convention (see stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, scratch]);
 * Every table (window, FFT twiddles, filter-bank weights, PCAN and log look-up tables) is
 * computed at generate time and passed as a constant input. All arithmetic is integer and
 * follows TFLite Micro's signal library operation by operation (same shifts, same
 * truncations, same 16/32/64-bit wrap-arounds), so outputs are bit-exact with TFLM.
 * Details: docs/kernels_signal.md.
 */
#ifndef AI_KERNELS_SIGNAL_H
#define AI_KERNELS_SIGNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AI_SIGNAL_MAX_FFT_STAGES 16

/* ---- SignalWindow: y = sat16((x * w) >> shift), w repeated over every frame ---------- */
typedef struct {
  int32_t size;        /* elements of x and y */
  int32_t window_size; /* elements of w; size is a multiple of it */
  int32_t shift;
} ai_signal_window_s16_params;
void ai_signal_window_s16(const ai_signal_window_s16_params *p, const int16_t *input,
                          const int16_t *window, int16_t *output);

/* Element count: the only parameter of the element-wise kernels below. */
typedef struct {
  int32_t size;
} ai_signal_size_params;

/* ---- SignalFftAutoScale: y = x << s with s the headroom of max|x|, scale_bits = s ----- */
typedef ai_signal_size_params ai_signal_fft_auto_scale_s16_params;
void ai_signal_fft_auto_scale_s16(const ai_signal_fft_auto_scale_s16_params *p, const int16_t *input,
                                  int16_t *output, int32_t *scale_bits);

/* ---- SignalRfft (int16): KISS FFT fixed-point real FFT of each frame zero-padded to
 * fft_length. `twiddles`: fft_length/2 complex int16 (re, im) of the complex sub-FFT;
 * `super_twiddles`: fft_length/4 complex int16 of the real-to-complex split. `factors`:
 * (radix 2..5, remaining length) pairs of the sub-FFT, n_stages of them. Output per frame:
 * fft_length/2 + 1 complex int16. Scratch: see stm32ai/passes/lower/signal.py. */
typedef struct {
  int32_t batches, input_length, fft_length, n_stages;
  int32_t factors[2 * AI_SIGNAL_MAX_FFT_STAGES];
} ai_signal_rfft_s16_params;
void ai_signal_rfft_s16(const ai_signal_rfft_s16_params *p, const int16_t *input,
                        const int16_t *twiddles, const int16_t *super_twiddles, int16_t *output,
                        void *scratch);
/* int32 (KISS FFT 32-bit fixed point) and float32 (unscaled) variants, same layout; scratch:
 * fft_length + fft_length/2 complex values of the type. */
typedef ai_signal_rfft_s16_params ai_signal_rfft_s32_params;
typedef ai_signal_rfft_s16_params ai_signal_rfft_f32_params;
void ai_signal_rfft_s32(const ai_signal_rfft_s32_params *p, const int32_t *input, const int32_t *twiddles,
                        const int32_t *super_twiddles, int32_t *output, void *scratch);
void ai_signal_rfft_f32(const ai_signal_rfft_f32_params *p, const float *input, const float *twiddles,
                        const float *super_twiddles, float *output, void *scratch);

/* ---- SignalEnergy: y[i] = re^2 + im^2 (uint32) for start_index <= i < end_index,
 * y[i] = 0 elsewhere (TFLM leaves those untouched). */
typedef struct {
  int32_t size; /* complex input elements = output elements */
  int32_t start_index, end_index;
} ai_signal_energy_s16_params;
void ai_signal_energy_s16(const ai_signal_energy_s16_params *p, const int16_t *input, uint32_t *output);

/* ---- SignalFilterBank: triangular mel channels with 64-bit accumulators ------------- */
typedef struct {
  int32_t num_channels;
} ai_signal_filter_bank_u32_params;
void ai_signal_filter_bank_u32(const ai_signal_filter_bank_u32_params *p, const uint32_t *input,
                               const int16_t *weights, const int16_t *unweights,
                               const int16_t *channel_frequency_starts,
                               const int16_t *channel_weight_starts, const int16_t *channel_widths,
                               uint64_t *output);

/* ---- SignalFilterBankSquareRoot: y = isqrt64(x) >> scale_bits[0] ------------------- */
typedef ai_signal_size_params ai_signal_filter_bank_sqrt_u64_params;
void ai_signal_filter_bank_sqrt_u64(const ai_signal_filter_bank_sqrt_u64_params *p, const uint64_t *input,
                                    const int32_t *scale_bits, uint32_t *output);

/* ---- SignalFilterBankSpectralSubtraction ------------------------------------------- *
 * `state` (num_channels uint32) is the noise estimate kept from one run to the next, as
 * TFLM keeps it across invocations: the lowering makes it a persistent (variable) tensor,
 * zeroed at ai_create/ai_reset. With reset_state = 1 the kernel zeroes it itself on every
 * run instead. The updated estimate is also copied to `noise_estimate`, the op's second
 * output. */
typedef struct {
  int32_t num_channels;
  uint32_t smoothing, one_minus_smoothing, alternate_smoothing, alternate_one_minus_smoothing;
  int32_t smoothing_bits, spectral_subtraction_bits;
  uint32_t min_signal_remaining;
  int32_t clamping, reset_state;
} ai_signal_spectral_subtraction_u32_params;
void ai_signal_spectral_subtraction_u32(const ai_signal_spectral_subtraction_u32_params *p,
                                        const uint32_t *input, uint32_t *state, uint32_t *output,
                                        uint32_t *noise_estimate);

/* ---- SignalPCAN: per-channel automatic gain control from the noise estimate ---------- */
typedef struct {
  int32_t num_channels, snr_shift;
} ai_signal_pcan_u32_params;
void ai_signal_pcan_u32(const ai_signal_pcan_u32_params *p, const uint32_t *input,
                        const uint32_t *noise_estimate, const int16_t *gain_lut, uint32_t *output);

/* ---- SignalFilterBankLog: y = min(32767, log(x << input_correction_bits) * output_scale)
 * with TFLM's fixed-point log (`log_lut`: 130 uint16 correction entries). */
typedef struct {
  int32_t num_channels, input_correction_bits;
  uint32_t output_scale;
} ai_signal_filter_bank_log_u32_params;
void ai_signal_filter_bank_log_u32(const ai_signal_filter_bank_log_u32_params *p, const uint32_t *input,
                                   const uint16_t *log_lut, int16_t *output);

/* ---- SignalIrfft: KISS FFT's inverse real FFT of each frame of fft_length/2 + 1 complex
 * bins -> fft_length real samples. `twiddles`/`super_twiddles` are the inverse transform's
 * (phases negated); int16 / int32: KISS FFT's 16- / 32-bit fixed point (1/radix per stage);
 * float32: float arithmetic in KISS FFT's order, then each sample / fft_length, as TFLM.
 * Scratch: fft_length/2 complex values. */
typedef struct {
  int32_t batches, fft_length, n_stages;
  int32_t factors[2 * AI_SIGNAL_MAX_FFT_STAGES];
} ai_signal_irfft_params;
typedef ai_signal_irfft_params ai_signal_irfft_s16_params;
typedef ai_signal_irfft_params ai_signal_irfft_f32_params;
typedef ai_signal_irfft_params ai_signal_irfft_s32_params;
void ai_signal_irfft_s16(const ai_signal_irfft_s16_params *p, const int16_t *input,
                         const int16_t *twiddles, const int16_t *super_twiddles, int16_t *output,
                         void *scratch);
void ai_signal_irfft_f32(const ai_signal_irfft_f32_params *p, const float *input, const float *twiddles,
                         const float *super_twiddles, float *output, void *scratch);
void ai_signal_irfft_s32(const ai_signal_irfft_s32_params *p, const int32_t *input, const int32_t *twiddles,
                         const int32_t *super_twiddles, int32_t *output, void *scratch);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_SIGNAL_H */
