/* SignalRfft / SignalIrfft (float32): KISS FFT's kiss_fftr / kiss_fftri in float, operation
 * for operation (the same products and sums in the same order, no fused multiply-add); the
 * inverse then divides each sample by fft_length as TFLM's IrfftFloatApply does. See docs/kernels_signal.md. Contraction into
 * fused multiply-adds is off (as in ai_svdf.c): one rounding instead of two would differ. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <string.h>

#include "ai_kernels_signal.h"

#define RE(a, k) ((a)[2 * (k)])
#define IM(a, k) ((a)[2 * (k) + 1])

typedef struct {
  const float *tw; /* n complex twiddles */
  int32_t inverse; /* radix 4 rotates by +i (inverse) or -i (forward) */
} fft_ctx;

/* (ar + i ai) * (br + i bi) as KISS FFT's C_MUL: re = ar*br - ai*bi, im = ar*bi + ai*br */
static inline void cmul(float *out_r, float *out_i, float ar, float ai, float br, float bi) {
  *out_r = ar * br - ai * bi;
  *out_i = ar * bi + ai * br;
}

static void bfly2(float *f, int32_t fstride, const fft_ctx *c, int32_t m) {
  for (int32_t k = 0; k < m; k++) {
    float *a = f + 2 * k, *b = f + 2 * (k + m);
    const float *w = c->tw + 2 * k * fstride;
    float tr, ti;
    cmul(&tr, &ti, b[0], b[1], w[0], w[1]);
    b[0] = a[0] - tr;
    b[1] = a[1] - ti;
    a[0] += tr;
    a[1] += ti;
  }
}

static void bfly3(float *f, int32_t fstride, const fft_ctx *c, int32_t m) {
  const float e3i = IM(c->tw, fstride * m);
  for (int32_t k = 0; k < m; k++) {
    float *a = f + 2 * k, *b = f + 2 * (k + m), *d = f + 2 * (k + 2 * m);
    const float *w1 = c->tw + 2 * k * fstride, *w2 = c->tw + 4 * k * fstride;
    float s1r, s1i, s2r, s2i;
    cmul(&s1r, &s1i, b[0], b[1], w1[0], w1[1]);
    cmul(&s2r, &s2i, d[0], d[1], w2[0], w2[1]);
    float s3r = s1r + s2r, s3i = s1i + s2i;
    float s0r = s1r - s2r, s0i = s1i - s2i;
    b[0] = a[0] - s3r * 0.5f;
    b[1] = a[1] - s3i * 0.5f;
    s0r *= e3i;
    s0i *= e3i;
    a[0] += s3r;
    a[1] += s3i;
    d[0] = b[0] + s0i;
    d[1] = b[1] - s0r;
    b[0] -= s0i;
    b[1] += s0r;
  }
}

static void bfly4(float *f, int32_t fstride, const fft_ctx *c, int32_t m) {
  for (int32_t k = 0; k < m; k++) {
    float *f0 = f + 2 * k, *f1 = f + 2 * (k + m), *f2 = f + 2 * (k + 2 * m), *f3 = f + 2 * (k + 3 * m);
    const float *w1 = c->tw + 2 * k * fstride, *w2 = c->tw + 4 * k * fstride, *w3 = c->tw + 6 * k * fstride;
    float s0r, s0i, s1r, s1i, s2r, s2i;
    cmul(&s0r, &s0i, f1[0], f1[1], w1[0], w1[1]);
    cmul(&s1r, &s1i, f2[0], f2[1], w2[0], w2[1]);
    cmul(&s2r, &s2i, f3[0], f3[1], w3[0], w3[1]);
    float s5r = f0[0] - s1r, s5i = f0[1] - s1i;
    f0[0] += s1r;
    f0[1] += s1i;
    float s3r = s0r + s2r, s3i = s0i + s2i;
    float s4r = s0r - s2r, s4i = s0i - s2i;
    f2[0] = f0[0] - s3r;
    f2[1] = f0[1] - s3i;
    f0[0] += s3r;
    f0[1] += s3i;
    if (c->inverse) { /* rotation by +i */
      f1[0] = s5r - s4i;
      f1[1] = s5i + s4r;
      f3[0] = s5r + s4i;
      f3[1] = s5i - s4r;
    } else {
      f1[0] = s5r + s4i;
      f1[1] = s5i - s4r;
      f3[0] = s5r - s4i;
      f3[1] = s5i + s4r;
    }
  }
}

static void bfly5(float *f, int32_t fstride, const fft_ctx *c, int32_t m) {
  const float yar = RE(c->tw, fstride * m), yai = IM(c->tw, fstride * m);
  const float ybr = RE(c->tw, 2 * fstride * m), ybi = IM(c->tw, 2 * fstride * m);
  for (int32_t u = 0; u < m; u++) {
    float *q[5];
    float sr[5], si[5];
    for (int j = 0; j < 5; j++) {
      q[j] = f + 2 * (u + j * m);
    }
    sr[0] = q[0][0];
    si[0] = q[0][1];
    for (int j = 1; j < 5; j++) {
      const float *w = c->tw + 2 * j * u * fstride;
      cmul(&sr[j], &si[j], q[j][0], q[j][1], w[0], w[1]);
    }
    float s7r = sr[1] + sr[4], s7i = si[1] + si[4];
    float s10r = sr[1] - sr[4], s10i = si[1] - si[4];
    float s8r = sr[2] + sr[3], s8i = si[2] + si[3];
    float s9r = sr[2] - sr[3], s9i = si[2] - si[3];
    q[0][0] += s7r + s8r;
    q[0][1] += s7i + s8i;
    float s5r = sr[0] + s7r * yar + s8r * ybr;
    float s5i = si[0] + s7i * yar + s8i * ybr;
    float s6r = s10i * yai + s9i * ybi;
    float s6i = -(s10r * yai) - s9r * ybi;
    q[1][0] = s5r - s6r;
    q[1][1] = s5i - s6i;
    q[4][0] = s5r + s6r;
    q[4][1] = s5i + s6i;
    float s11r = sr[0] + s7r * ybr + s8r * yar;
    float s11i = si[0] + s7i * ybr + s8i * yar;
    float s12r = -(s10i * ybi) + s9i * yai;
    float s12i = s10r * ybi - s9r * yai;
    q[2][0] = s11r + s12r;
    q[2][1] = s11i + s12i;
    q[3][0] = s11r - s12r;
    q[3][1] = s11i - s12i;
  }
}

static void fft_work(float *out, const float *in, int32_t fstride, const int32_t *factors, const fft_ctx *c) {
  const int32_t p = factors[0], m = factors[1];
  if (m == 1) {
    for (int32_t j = 0; j < p; j++) {
      out[2 * j] = in[2 * j * fstride];
      out[2 * j + 1] = in[2 * j * fstride + 1];
    }
  } else {
    for (int32_t j = 0; j < p; j++) {
      fft_work(out + 2 * j * m, in + 2 * j * fstride, fstride * p, factors + 2, c);
    }
  }
  switch (p) {
    case 2: bfly2(out, fstride, c, m); break;
    case 3: bfly3(out, fstride, c, m); break;
    case 4: bfly4(out, fstride, c, m); break;
    default: bfly5(out, fstride, c, m); break; /* the lowering allows radices 2..5 only */
  }
}

void ai_signal_irfft_f32(const ai_signal_irfft_f32_params *p, const float *input, const float *twiddles,
                         const float *super_twiddles, float *output, void *scratch) {
  const int32_t n = p->fft_length / 2;
  const float len = (float)p->fft_length;
  float *tmp = (float *)scratch; /* n complex */
  fft_ctx c;
  c.tw = twiddles;
  c.inverse = 1;
  for (int32_t b = 0; b < p->batches; b++) {
    const float *x = input + b * 2 * (n + 1);
    float *y = output + b * p->fft_length;
    RE(tmp, 0) = RE(x, 0) + RE(x, n);
    IM(tmp, 0) = RE(x, 0) - RE(x, n);
    for (int32_t k = 1; k <= n / 2; k++) {
      const float fkr = RE(x, k), fki = IM(x, k);
      const float nkr = RE(x, n - k), nki = -IM(x, n - k);
      const float ekr = fkr + nkr, eki = fki + nki;
      float okr, oki;
      cmul(&okr, &oki, fkr - nkr, fki - nki, RE(super_twiddles, k - 1), IM(super_twiddles, k - 1));
      RE(tmp, k) = ekr + okr;
      IM(tmp, k) = eki + oki;
      RE(tmp, n - k) = ekr - okr;
      IM(tmp, n - k) = -(eki - oki);
    }
    fft_work(y, tmp, 1, p->factors, &c);
    for (int32_t i = 0; i < p->fft_length; i++) {
      y[i] /= len;
    }
  }
}

void ai_signal_rfft_f32(const ai_signal_rfft_f32_params *p, const float *input, const float *twiddles,
                        const float *super_twiddles, float *output, void *scratch) {
  const int32_t n = p->fft_length / 2;
  float *work = (float *)scratch;     /* fft_length: the zero-padded frame */
  float *spec = work + p->fft_length; /* n complex: the complex FFT */
  fft_ctx c;
  c.tw = twiddles;
  c.inverse = 0;
  for (int32_t b = 0; b < p->batches; b++) {
    float *y = output + b * 2 * (n + 1);
    memcpy(work, input + b * p->input_length, (size_t)p->input_length * sizeof(float));
    memset(work + p->input_length, 0, (size_t)(p->fft_length - p->input_length) * sizeof(float));
    fft_work(spec, work, 1, p->factors, &c);
    const float dcr = RE(spec, 0), dci = IM(spec, 0);
    RE(y, 0) = dcr + dci;
    RE(y, n) = dcr - dci;
    IM(y, 0) = 0.0f;
    IM(y, n) = 0.0f;
    for (int32_t k = 1; k <= n / 2; k++) {
      const float pkr = RE(spec, k), pki = IM(spec, k);
      const float nkr = RE(spec, n - k), nki = -IM(spec, n - k);
      const float f1r = pkr + nkr, f1i = pki + nki;
      float tr, ti;
      cmul(&tr, &ti, pkr - nkr, pki - nki, RE(super_twiddles, k - 1), IM(super_twiddles, k - 1));
      RE(y, k) = (f1r + tr) * 0.5f;
      IM(y, k) = (f1i + ti) * 0.5f;
      RE(y, n - k) = (f1r - tr) * 0.5f;
      IM(y, n - k) = (ti - f1i) * 0.5f;
    }
  }
}
