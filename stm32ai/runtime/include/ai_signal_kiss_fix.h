/* KISS FFT in fixed point, written once for both widths TFLM builds it in: FIXED_POINT = 16
 * (SignalRfft/SignalIrfft int16, ai_signal_rfft.c) and FIXED_POINT = 32 (int32,
 * ai_signal_fft_s32.c). Private to those two kernels; docs/kernels_signal.md.
 *
 * Values are held in int32 and follow C's int arithmetic of the KISS FFT build of each width:
 *   add, sub   = the 32-bit int sum (wrapping), stored back to the width (int16: wraps);
 *   mul(a, b)  = (a * b + 2^(W-2)) >> (W-1), the product in int32 (W = 16) or int64 (W = 32),
 *                a complex product's two terms summed before the rounding shift;
 *   div(x, k)  = mul(x, (2^(W-1) - 1) / k): each radix-p butterfly's 1/p, the split's 1/2;
 *   half(x)    = x >> 1 (arithmetic), of the 32-bit int sum where KISS shifts a sum.
 * Every function takes the width `bits` (16 or 32) as a parameter; the kernels pass it as a
 * constant to the always-inlined butterflies, so each width compiles to straight code without
 * a test on the width (one copy of the logic, no macros generating code). Twiddles: the
 * width's type, cos/sin rounded at generate time (stm32ai/passes/lower/signal.py). */
#ifndef AI_SIGNAL_KISS_FIX_H
#define AI_SIGNAL_KISS_FIX_H

#include <stdint.h>
#include <string.h>

/* The butterflies are inlined into each width's stage function; that one and the recursion are
 * never inlined (-O2 would otherwise unroll the recursion into itself and pull the stage in:
 * the butterflies twice in flash). */
#if defined(__GNUC__)
#define AI_KISS_INLINE static inline __attribute__((always_inline))
#define AI_KISS_STAGE static __attribute__((noinline)) void
#define AI_KISS_NOINLINE __attribute__((noinline, unused))
#else
#define AI_KISS_NOINLINE
#define AI_KISS_INLINE static inline
#define AI_KISS_STAGE static void
#endif

typedef struct {
  const void *tw;  /* n complex twiddles of the width's type */
  int32_t inverse; /* radix 4 rotates by +i (inverse) or -i (forward) */
} ai_kiss_ctx;

/* one radix-p stage over p sub-transforms of length m (p = factors[0]) */
typedef void (*ai_kiss_stage_fn)(void *f, int32_t fstride, const ai_kiss_ctx *c, int32_t p, int32_t m);

AI_KISS_INLINE int32_t kf_wrap(int32_t x, int bits) {
  return bits == 16 ? (int32_t)(int16_t)x : x;
}

AI_KISS_INLINE int32_t kf_add(int32_t a, int32_t b, int bits) {
  return kf_wrap((int32_t)((uint32_t)a + (uint32_t)b), bits);
}

AI_KISS_INLINE int32_t kf_sub(int32_t a, int32_t b, int bits) {
  return kf_wrap((int32_t)((uint32_t)a - (uint32_t)b), bits);
}

AI_KISS_INLINE int32_t kf_neg(int32_t a, int bits) {
  return kf_wrap((int32_t)(0u - (uint32_t)a), bits);
}

/* (a + b) >> 1 and (a - b) >> 1 of the 32-bit int sum (int16 operands never wrap there) */
AI_KISS_INLINE int32_t kf_add_half(int32_t a, int32_t b, int bits) {
  return kf_wrap((int32_t)((uint32_t)a + (uint32_t)b) >> 1, bits);
}

AI_KISS_INLINE int32_t kf_sub_half(int32_t a, int32_t b, int bits) {
  return kf_wrap((int32_t)((uint32_t)a - (uint32_t)b) >> 1, bits);
}

/* the rounding shift of a product (sum): int32 for 16 bits (|sum| < 2^31: twiddles <= 32767) */
AI_KISS_INLINE int32_t kf_round(int64_t x, int bits) {
  return bits == 16 ? kf_wrap(((int32_t)x + (1 << 14)) >> 15, 16) : (int32_t)((x + (1LL << 30)) >> 31);
}

AI_KISS_INLINE int32_t kf_mul(int32_t a, int32_t b, int bits) {
  return kf_round(bits == 16 ? (int64_t)(a * b) : (int64_t)a * b, bits);
}

/* (ar + i ai) * (br + i bi); not forced inline (as KISS FFT's C_MUL compiles at -Os: a call
 * per product keeps the butterflies small), constant `bits` still folds (a clone per width) */
static inline void kf_cmul(int32_t *out_r, int32_t *out_i, int32_t ar, int32_t ai, int32_t br, int32_t bi,
                            int bits) {
  if (bits == 16) {
    *out_r = kf_round(ar * br - ai * bi, 16);
    *out_i = kf_round(ar * bi + ai * br, 16);
  } else {
    *out_r = kf_round((int64_t)ar * br - (int64_t)ai * bi, 32);
    *out_i = kf_round((int64_t)ar * bi + (int64_t)ai * br, 32);
  }
}

/* KISS FFT's 1/k as a multiplier of the width: (2^(W-1) - 1) / k */
AI_KISS_INLINE int32_t kf_inv(int32_t k, int bits) {
  return (bits == 16 ? 32767 : 2147483647) / k;
}

AI_KISS_INLINE int32_t kf_ld(const void *a, int32_t i, int bits) {
  return bits == 16 ? (int32_t)((const int16_t *)a)[i] : ((const int32_t *)a)[i];
}

AI_KISS_INLINE void kf_st(void *a, int32_t i, int32_t v, int bits) {
  if (bits == 16) {
    ((int16_t *)a)[i] = (int16_t)v;
  } else {
    ((int32_t *)a)[i] = v;
  }
}

AI_KISS_INLINE void kf_bfly2(void *f, int32_t fstride, const ai_kiss_ctx *c, int32_t m, int bits) {
  const int32_t h = kf_inv(2, bits);
  for (int32_t k = 0; k < m; k++) {
    const int32_t a = 2 * k, b = 2 * (k + m), w = 2 * k * fstride;
    int32_t ar = kf_mul(kf_ld(f, a, bits), h, bits), ai = kf_mul(kf_ld(f, a + 1, bits), h, bits);
    int32_t br = kf_mul(kf_ld(f, b, bits), h, bits), bi = kf_mul(kf_ld(f, b + 1, bits), h, bits);
    int32_t tr, ti;
    kf_cmul(&tr, &ti, br, bi, kf_ld(c->tw, w, bits), kf_ld(c->tw, w + 1, bits), bits);
    kf_st(f, b, kf_sub(ar, tr, bits), bits);
    kf_st(f, b + 1, kf_sub(ai, ti, bits), bits);
    kf_st(f, a, kf_add(ar, tr, bits), bits);
    kf_st(f, a + 1, kf_add(ai, ti, bits), bits);
  }
}

AI_KISS_INLINE void kf_bfly3(void *f, int32_t fstride, const ai_kiss_ctx *c, int32_t m, int bits) {
  const int32_t t = kf_inv(3, bits), e3i = kf_ld(c->tw, 2 * fstride * m + 1, bits);
  for (int32_t k = 0; k < m; k++) {
    const int32_t a = 2 * k, b = 2 * (k + m), d = 2 * (k + 2 * m), w1 = 2 * k * fstride, w2 = 4 * k * fstride;
    int32_t ar = kf_mul(kf_ld(f, a, bits), t, bits), ai = kf_mul(kf_ld(f, a + 1, bits), t, bits);
    int32_t br = kf_mul(kf_ld(f, b, bits), t, bits), bi = kf_mul(kf_ld(f, b + 1, bits), t, bits);
    int32_t dr = kf_mul(kf_ld(f, d, bits), t, bits), di = kf_mul(kf_ld(f, d + 1, bits), t, bits);
    int32_t s1r, s1i, s2r, s2i;
    kf_cmul(&s1r, &s1i, br, bi, kf_ld(c->tw, w1, bits), kf_ld(c->tw, w1 + 1, bits), bits);
    kf_cmul(&s2r, &s2i, dr, di, kf_ld(c->tw, w2, bits), kf_ld(c->tw, w2 + 1, bits), bits);
    const int32_t s3r = kf_add(s1r, s2r, bits), s3i = kf_add(s1i, s2i, bits);
    const int32_t s0r = kf_mul(kf_sub(s1r, s2r, bits), e3i, bits), s0i = kf_mul(kf_sub(s1i, s2i, bits), e3i, bits);
    const int32_t f1r = kf_sub(ar, s3r >> 1, bits), f1i = kf_sub(ai, s3i >> 1, bits);
    kf_st(f, a, kf_add(ar, s3r, bits), bits);
    kf_st(f, a + 1, kf_add(ai, s3i, bits), bits);
    kf_st(f, d, kf_add(f1r, s0i, bits), bits);
    kf_st(f, d + 1, kf_sub(f1i, s0r, bits), bits);
    kf_st(f, b, kf_sub(f1r, s0i, bits), bits);
    kf_st(f, b + 1, kf_add(f1i, s0r, bits), bits);
  }
}

AI_KISS_INLINE void kf_bfly4(void *f, int32_t fstride, const ai_kiss_ctx *c, int32_t m, int bits) {
  const int32_t q = kf_inv(4, bits);
  for (int32_t k = 0; k < m; k++) {
    const int32_t i0 = 2 * k, i1 = 2 * (k + m), i2 = 2 * (k + 2 * m), i3 = 2 * (k + 3 * m);
    const int32_t w1 = 2 * k * fstride, w2 = 4 * k * fstride, w3 = 6 * k * fstride;
    int32_t ar = kf_mul(kf_ld(f, i0, bits), q, bits), ai = kf_mul(kf_ld(f, i0 + 1, bits), q, bits);
    int32_t br = kf_mul(kf_ld(f, i1, bits), q, bits), bi = kf_mul(kf_ld(f, i1 + 1, bits), q, bits);
    int32_t cr = kf_mul(kf_ld(f, i2, bits), q, bits), ci = kf_mul(kf_ld(f, i2 + 1, bits), q, bits);
    int32_t dr = kf_mul(kf_ld(f, i3, bits), q, bits), di = kf_mul(kf_ld(f, i3 + 1, bits), q, bits);
    int32_t s0r, s0i, s1r, s1i, s2r, s2i;
    kf_cmul(&s0r, &s0i, br, bi, kf_ld(c->tw, w1, bits), kf_ld(c->tw, w1 + 1, bits), bits);
    kf_cmul(&s1r, &s1i, cr, ci, kf_ld(c->tw, w2, bits), kf_ld(c->tw, w2 + 1, bits), bits);
    kf_cmul(&s2r, &s2i, dr, di, kf_ld(c->tw, w3, bits), kf_ld(c->tw, w3 + 1, bits), bits);
    const int32_t s5r = kf_sub(ar, s1r, bits), s5i = kf_sub(ai, s1i, bits);
    ar = kf_add(ar, s1r, bits);
    ai = kf_add(ai, s1i, bits);
    const int32_t s3r = kf_add(s0r, s2r, bits), s3i = kf_add(s0i, s2i, bits);
    const int32_t s4r = kf_sub(s0r, s2r, bits), s4i = kf_sub(s0i, s2i, bits);
    kf_st(f, i2, kf_sub(ar, s3r, bits), bits);
    kf_st(f, i2 + 1, kf_sub(ai, s3i, bits), bits);
    kf_st(f, i0, kf_add(ar, s3r, bits), bits);
    kf_st(f, i0 + 1, kf_add(ai, s3i, bits), bits);
    /* forward: f1 = s5 - i s4, f3 = s5 + i s4; the inverse rotates the other way */
    const int32_t lo = c->inverse ? i3 : i1, hi = c->inverse ? i1 : i3;
    kf_st(f, lo, kf_add(s5r, s4i, bits), bits);
    kf_st(f, lo + 1, kf_sub(s5i, s4r, bits), bits);
    kf_st(f, hi, kf_sub(s5r, s4i, bits), bits);
    kf_st(f, hi + 1, kf_add(s5i, s4r, bits), bits);
  }
}

AI_KISS_INLINE void kf_bfly5(void *f, int32_t fstride, const ai_kiss_ctx *c, int32_t m, int bits) {
  const int32_t fifth = kf_inv(5, bits);
  const int32_t yar = kf_ld(c->tw, 2 * fstride * m, bits), yai = kf_ld(c->tw, 2 * fstride * m + 1, bits);
  const int32_t ybr = kf_ld(c->tw, 4 * fstride * m, bits), ybi = kf_ld(c->tw, 4 * fstride * m + 1, bits);
  for (int32_t u = 0; u < m; u++) {
    int32_t q[5], xr[5], xi[5], sr[5], si[5];
    for (int32_t j = 0; j < 5; j++) {
      q[j] = 2 * (u + j * m);
      xr[j] = kf_mul(kf_ld(f, q[j], bits), fifth, bits);
      xi[j] = kf_mul(kf_ld(f, q[j] + 1, bits), fifth, bits);
    }
    sr[0] = xr[0];
    si[0] = xi[0];
    for (int32_t j = 1; j < 5; j++) {
      const int32_t w = 2 * j * u * fstride;
      kf_cmul(&sr[j], &si[j], xr[j], xi[j], kf_ld(c->tw, w, bits), kf_ld(c->tw, w + 1, bits), bits);
    }
    const int32_t s7r = kf_add(sr[1], sr[4], bits), s7i = kf_add(si[1], si[4], bits);
    const int32_t s10r = kf_sub(sr[1], sr[4], bits), s10i = kf_sub(si[1], si[4], bits);
    const int32_t s8r = kf_add(sr[2], sr[3], bits), s8i = kf_add(si[2], si[3], bits);
    const int32_t s9r = kf_sub(sr[2], sr[3], bits), s9i = kf_sub(si[2], si[3], bits);
    kf_st(f, q[0], kf_add(xr[0], kf_add(s7r, s8r, bits), bits), bits);
    kf_st(f, q[0] + 1, kf_add(xi[0], kf_add(s7i, s8i, bits), bits), bits);
    const int32_t s5r = kf_add(kf_add(sr[0], kf_mul(s7r, yar, bits), bits), kf_mul(s8r, ybr, bits), bits);
    const int32_t s5i = kf_add(kf_add(si[0], kf_mul(s7i, yar, bits), bits), kf_mul(s8i, ybr, bits), bits);
    const int32_t s6r = kf_add(kf_mul(s10i, yai, bits), kf_mul(s9i, ybi, bits), bits);
    const int32_t s6i = kf_sub(kf_neg(kf_mul(s10r, yai, bits), bits), kf_mul(s9r, ybi, bits), bits);
    kf_st(f, q[1], kf_sub(s5r, s6r, bits), bits);
    kf_st(f, q[1] + 1, kf_sub(s5i, s6i, bits), bits);
    kf_st(f, q[4], kf_add(s5r, s6r, bits), bits);
    kf_st(f, q[4] + 1, kf_add(s5i, s6i, bits), bits);
    const int32_t s11r = kf_add(kf_add(sr[0], kf_mul(s7r, ybr, bits), bits), kf_mul(s8r, yar, bits), bits);
    const int32_t s11i = kf_add(kf_add(si[0], kf_mul(s7i, ybr, bits), bits), kf_mul(s8i, yar, bits), bits);
    const int32_t s12r = kf_add(kf_neg(kf_mul(s10i, ybi, bits), bits), kf_mul(s9i, yai, bits), bits);
    const int32_t s12i = kf_sub(kf_mul(s10r, ybi, bits), kf_mul(s9r, yai, bits), bits);
    kf_st(f, q[2], kf_add(s11r, s12r, bits), bits);
    kf_st(f, q[2] + 1, kf_add(s11i, s12i, bits), bits);
    kf_st(f, q[3], kf_sub(s11r, s12r, bits), bits);
    kf_st(f, q[3] + 1, kf_sub(s11i, s12i, bits), bits);
  }
}

/* A width's stage: the kernels define one per width with a constant `bits`. */
AI_KISS_INLINE void kf_stage(void *f, int32_t fstride, const ai_kiss_ctx *c, int32_t p, int32_t m, int bits) {
  switch (p) {
    case 2: kf_bfly2(f, fstride, c, m, bits); break;
    case 3: kf_bfly3(f, fstride, c, m, bits); break;
    case 4: kf_bfly4(f, fstride, c, m, bits); break;
    default: kf_bfly5(f, fstride, c, m, bits); break; /* the lowering allows radices 2..5 only */
  }
}

/* KISS FFT's decimation in time: out = p * m complex, in read with stride fstride (complex
 * elements of esize bytes each half); stage s combines p sub-transforms of length m. */
static AI_KISS_NOINLINE void kf_work(void *out, const void *in, int32_t fstride, const int32_t *factors, const ai_kiss_ctx *c,
                           size_t esize, ai_kiss_stage_fn stage) {
  const int32_t p = factors[0], m = factors[1];
  uint8_t *o = (uint8_t *)out;
  const uint8_t *x = (const uint8_t *)in;
  if (m == 1) {
    for (int32_t j = 0; j < p; j++) {
      memcpy(o + (size_t)(2 * j) * esize, x + (size_t)(2 * j * fstride) * esize, 2 * esize);
    }
  } else {
    for (int32_t j = 0; j < p; j++) {
      kf_work(o + (size_t)(2 * j * m) * esize, x + (size_t)(2 * j * fstride) * esize, fstride * p, factors + 2, c,
              esize, stage);
    }
  }
  stage(out, fstride, c, p, m);
}

/* kiss_fftr: frames of input_length zero-padded to N = fft_length, read as N/2 complex values,
 * the complex FFT (scratch: the padded frame, then N/2 complex), then the split into N/2 + 1
 * bins with the super twiddles. */
AI_KISS_INLINE void kf_rfft(int32_t batches, int32_t input_length, int32_t fft_length, const int32_t *factors,
                            const void *input, const void *twiddles, const void *super_twiddles, void *output,
                            void *scratch, ai_kiss_stage_fn stage, int bits) {
  const int32_t n = fft_length / 2, h = kf_inv(2, bits);
  const size_t es = bits == 16 ? sizeof(int16_t) : sizeof(int32_t);
  void *work = scratch;
  void *spec = (uint8_t *)scratch + (size_t)fft_length * es;
  const ai_kiss_ctx c = {twiddles, 0};
  for (int32_t b = 0; b < batches; b++) {
    void *y = (uint8_t *)output + (size_t)(b * 2 * (n + 1)) * es;
    memcpy(work, (const uint8_t *)input + (size_t)(b * input_length) * es, (size_t)input_length * es);
    memset((uint8_t *)work + (size_t)input_length * es, 0, (size_t)(fft_length - input_length) * es);
    kf_work(spec, work, 1, factors, &c, es, stage);
    const int32_t dcr = kf_mul(kf_ld(spec, 0, bits), h, bits), dci = kf_mul(kf_ld(spec, 1, bits), h, bits);
    kf_st(y, 0, kf_add(dcr, dci, bits), bits);
    kf_st(y, 1, 0, bits);
    kf_st(y, 2 * n, kf_sub(dcr, dci, bits), bits);
    kf_st(y, 2 * n + 1, 0, bits);
    for (int32_t k = 1; k <= n / 2; k++) {
      const int32_t pkr = kf_mul(kf_ld(spec, 2 * k, bits), h, bits), pki = kf_mul(kf_ld(spec, 2 * k + 1, bits), h, bits);
      const int32_t nkr = kf_mul(kf_ld(spec, 2 * (n - k), bits), h, bits);
      const int32_t nki = kf_mul(kf_neg(kf_ld(spec, 2 * (n - k) + 1, bits), bits), h, bits);
      const int32_t f1r = kf_add(pkr, nkr, bits), f1i = kf_add(pki, nki, bits);
      int32_t tr, ti;
      kf_cmul(&tr, &ti, kf_sub(pkr, nkr, bits), kf_sub(pki, nki, bits), kf_ld(super_twiddles, 2 * (k - 1), bits),
              kf_ld(super_twiddles, 2 * (k - 1) + 1, bits), bits);
      kf_st(y, 2 * k, kf_add_half(f1r, tr, bits), bits);
      kf_st(y, 2 * k + 1, kf_add_half(f1i, ti, bits), bits);
      kf_st(y, 2 * (n - k), kf_sub_half(f1r, tr, bits), bits);
      kf_st(y, 2 * (n - k) + 1, kf_sub_half(ti, f1i, bits), bits);
    }
  }
}

/* kiss_fftri: the N/2 + 1 bins of each frame merged into N/2 complex values (each halved,
 * the odd part rotated by the inverse super twiddles; scratch: N/2 complex), then the inverse
 * complex FFT of N/2 points writes the N real samples. */
AI_KISS_INLINE void kf_irfft(int32_t batches, int32_t fft_length, const int32_t *factors, const void *input,
                             const void *twiddles, const void *super_twiddles, void *output, void *scratch,
                             ai_kiss_stage_fn stage, int bits) {
  const int32_t n = fft_length / 2, h = kf_inv(2, bits);
  const size_t es = bits == 16 ? sizeof(int16_t) : sizeof(int32_t);
  void *tmp = scratch;
  const ai_kiss_ctx c = {twiddles, 1};
  for (int32_t b = 0; b < batches; b++) {
    const void *x = (const uint8_t *)input + (size_t)(b * 2 * (n + 1)) * es;
    void *y = (uint8_t *)output + (size_t)(b * fft_length) * es;
    const int32_t x0 = kf_ld(x, 0, bits), xn = kf_ld(x, 2 * n, bits);
    kf_st(tmp, 0, kf_mul(kf_add(x0, xn, bits), h, bits), bits);
    kf_st(tmp, 1, kf_mul(kf_sub(x0, xn, bits), h, bits), bits);
    for (int32_t k = 1; k <= n / 2; k++) {
      const int32_t fkr = kf_mul(kf_ld(x, 2 * k, bits), h, bits), fki = kf_mul(kf_ld(x, 2 * k + 1, bits), h, bits);
      const int32_t nkr = kf_mul(kf_ld(x, 2 * (n - k), bits), h, bits);
      const int32_t nki = kf_mul(kf_neg(kf_ld(x, 2 * (n - k) + 1, bits), bits), h, bits);
      const int32_t ekr = kf_add(fkr, nkr, bits), eki = kf_add(fki, nki, bits);
      int32_t okr, oki;
      kf_cmul(&okr, &oki, kf_sub(fkr, nkr, bits), kf_sub(fki, nki, bits), kf_ld(super_twiddles, 2 * (k - 1), bits),
              kf_ld(super_twiddles, 2 * (k - 1) + 1, bits), bits);
      kf_st(tmp, 2 * k, kf_add(ekr, okr, bits), bits);
      kf_st(tmp, 2 * k + 1, kf_add(eki, oki, bits), bits);
      kf_st(tmp, 2 * (n - k), kf_sub(ekr, okr, bits), bits);
      kf_st(tmp, 2 * (n - k) + 1, kf_neg(kf_sub(eki, oki, bits), bits), bits);
    }
    kf_work(y, tmp, 1, factors, &c, es, stage);
  }
}

#endif /* AI_SIGNAL_KISS_FIX_H */
