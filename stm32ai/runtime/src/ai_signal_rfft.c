/* SignalRfft (int16): the mixed-radix fixed-point FFT of KISS FFT as TFLite Micro builds it
 * (FIXED_POINT = 16), bit-exact. See docs/kernels_signal.md.
 *
 * A real frame of N = fft_length samples is read as N/2 complex pairs, transformed with a
 * complex FFT of n = N/2 points, then split into the N/2 + 1 bins of the real spectrum.
 * Fixed-point rules (all of them matter for bit-exactness):
 *   mul(a, b)   = (int16)(((int32)a * b + 2^14) >> 15), the products of a complex
 *                 multiplication summed in int32 before the rounding shift;
 *   div(x, k)   = mul(x, 32767 / k): every butterfly of radix p first scales its p inputs
 *                 by 1/p this way, and the real split scales by 1/2 the same way;
 *   add, sub    = int arithmetic stored back to int16 (wraps, never saturates);
 *   half(x)     = x >> 1 (arithmetic).
 * The decomposition (radix 4 first, then 2, 3, 5; `factors`) and the twiddles (cos/sin
 * rounded as floor(0.5 + 32767 * v)) come from generate time. The recursion follows
 * KISS FFT's decimation in time: stage s reads its input with stride fstride and combines
 * p sub-transforms of length m. */
#include <string.h>

#include "ai_kernels_signal.h"

#define RE(a, k) ((a)[2 * (k)])
#define IM(a, k) ((a)[2 * (k) + 1])

static inline int16_t rfft_round(int32_t x) {
  return (int16_t)((x + (1 << 14)) >> 15);
}

static inline int16_t rfft_scale(int16_t x, int32_t k) {
  return rfft_round((int32_t)x * k);
}

/* (ar + i ai) * (br + i bi), both products summed in int32 before rounding */
static inline void rfft_cmul(int16_t *out_r, int16_t *out_i, int16_t ar, int16_t ai, int16_t br,
                             int16_t bi) {
  *out_r = rfft_round((int32_t)ar * br - (int32_t)ai * bi);
  *out_i = rfft_round((int32_t)ar * bi + (int32_t)ai * br);
}

typedef struct {
  const int16_t *tw; /* n complex twiddles */
  int32_t n;         /* complex FFT length */
  int32_t inverse;   /* KISS FFT's inverse transform (SignalIrfft): radix 4 rotates by +i */
} rfft_ctx;

static void bfly2(int16_t *f, int32_t fstride, const rfft_ctx *c, int32_t m) {
  for (int32_t k = 0; k < m; k++) {
    int16_t *a = f + 2 * k, *b = f + 2 * (k + m);
    const int16_t *w = c->tw + 2 * k * fstride;
    int16_t ar = rfft_scale(a[0], 16383), ai = rfft_scale(a[1], 16383);
    int16_t br = rfft_scale(b[0], 16383), bi = rfft_scale(b[1], 16383);
    int16_t tr, ti;
    rfft_cmul(&tr, &ti, br, bi, w[0], w[1]);
    b[0] = (int16_t)(ar - tr);
    b[1] = (int16_t)(ai - ti);
    a[0] = (int16_t)(ar + tr);
    a[1] = (int16_t)(ai + ti);
  }
}

static void bfly3(int16_t *f, int32_t fstride, const rfft_ctx *c, int32_t m) {
  const int16_t e3i = IM(c->tw, fstride * m);
  for (int32_t k = 0; k < m; k++) {
    int16_t *a = f + 2 * k, *b = f + 2 * (k + m), *d = f + 2 * (k + 2 * m);
    const int16_t *w1 = c->tw + 2 * k * fstride, *w2 = c->tw + 4 * k * fstride;
    int16_t ar = rfft_scale(a[0], 10922), ai = rfft_scale(a[1], 10922);
    int16_t br = rfft_scale(b[0], 10922), bi = rfft_scale(b[1], 10922);
    int16_t dr = rfft_scale(d[0], 10922), di = rfft_scale(d[1], 10922);
    int16_t s1r, s1i, s2r, s2i;
    rfft_cmul(&s1r, &s1i, br, bi, w1[0], w1[1]);
    rfft_cmul(&s2r, &s2i, dr, di, w2[0], w2[1]);
    int16_t s3r = (int16_t)(s1r + s2r), s3i = (int16_t)(s1i + s2i);
    int16_t s0r = (int16_t)(s1r - s2r), s0i = (int16_t)(s1i - s2i);
    int16_t f1r = (int16_t)(ar - (s3r >> 1)), f1i = (int16_t)(ai - (s3i >> 1));
    s0r = rfft_round((int32_t)s0r * e3i);
    s0i = rfft_round((int32_t)s0i * e3i);
    a[0] = (int16_t)(ar + s3r);
    a[1] = (int16_t)(ai + s3i);
    d[0] = (int16_t)(f1r + s0i);
    d[1] = (int16_t)(f1i - s0r);
    b[0] = (int16_t)(f1r - s0i);
    b[1] = (int16_t)(f1i + s0r);
  }
}

static void bfly4(int16_t *f, int32_t fstride, const rfft_ctx *c, int32_t m) {
  for (int32_t k = 0; k < m; k++) {
    int16_t *f0 = f + 2 * k, *f1 = f + 2 * (k + m), *f2 = f + 2 * (k + 2 * m), *f3 = f + 2 * (k + 3 * m);
    const int16_t *w1 = c->tw + 2 * k * fstride, *w2 = c->tw + 4 * k * fstride, *w3 = c->tw + 6 * k * fstride;
    int16_t ar = rfft_scale(f0[0], 8191), ai = rfft_scale(f0[1], 8191);
    int16_t br = rfft_scale(f1[0], 8191), bi = rfft_scale(f1[1], 8191);
    int16_t cr = rfft_scale(f2[0], 8191), ci = rfft_scale(f2[1], 8191);
    int16_t dr = rfft_scale(f3[0], 8191), di = rfft_scale(f3[1], 8191);
    int16_t s0r, s0i, s1r, s1i, s2r, s2i;
    rfft_cmul(&s0r, &s0i, br, bi, w1[0], w1[1]);
    rfft_cmul(&s1r, &s1i, cr, ci, w2[0], w2[1]);
    rfft_cmul(&s2r, &s2i, dr, di, w3[0], w3[1]);
    int16_t s5r = (int16_t)(ar - s1r), s5i = (int16_t)(ai - s1i);
    ar = (int16_t)(ar + s1r);
    ai = (int16_t)(ai + s1i);
    int16_t s3r = (int16_t)(s0r + s2r), s3i = (int16_t)(s0i + s2i);
    int16_t s4r = (int16_t)(s0r - s2r), s4i = (int16_t)(s0i - s2i);
    f2[0] = (int16_t)(ar - s3r);
    f2[1] = (int16_t)(ai - s3i);
    f0[0] = (int16_t)(ar + s3r);
    f0[1] = (int16_t)(ai + s3i);
    if (c->inverse) {
      int16_t *t = f1;
      f1 = f3;
      f3 = t;
    }
    f1[0] = (int16_t)(s5r + s4i);
    f1[1] = (int16_t)(s5i - s4r);
    f3[0] = (int16_t)(s5r - s4i);
    f3[1] = (int16_t)(s5i + s4r);
  }
}

static inline int16_t smul(int16_t a, int16_t b) {
  return rfft_round((int32_t)a * b);
}

static void bfly5(int16_t *f, int32_t fstride, const rfft_ctx *c, int32_t m) {
  const int16_t yar = RE(c->tw, fstride * m), yai = IM(c->tw, fstride * m);
  const int16_t ybr = RE(c->tw, 2 * fstride * m), ybi = IM(c->tw, 2 * fstride * m);
  for (int32_t u = 0; u < m; u++) {
    int16_t *q[5];
    int16_t xr[5], xi[5];
    for (int j = 0; j < 5; j++) {
      q[j] = f + 2 * (u + j * m);
      xr[j] = rfft_scale(q[j][0], 6553);
      xi[j] = rfft_scale(q[j][1], 6553);
    }
    int16_t sr[5], si[5];
    sr[0] = xr[0];
    si[0] = xi[0];
    for (int j = 1; j < 5; j++) {
      const int16_t *w = c->tw + 2 * j * u * fstride;
      rfft_cmul(&sr[j], &si[j], xr[j], xi[j], w[0], w[1]);
    }
    int16_t s7r = (int16_t)(sr[1] + sr[4]), s7i = (int16_t)(si[1] + si[4]);
    int16_t s10r = (int16_t)(sr[1] - sr[4]), s10i = (int16_t)(si[1] - si[4]);
    int16_t s8r = (int16_t)(sr[2] + sr[3]), s8i = (int16_t)(si[2] + si[3]);
    int16_t s9r = (int16_t)(sr[2] - sr[3]), s9i = (int16_t)(si[2] - si[3]);
    q[0][0] = (int16_t)(xr[0] + (s7r + s8r));
    q[0][1] = (int16_t)(xi[0] + (s7i + s8i));
    int16_t s5r = (int16_t)(sr[0] + smul(s7r, yar) + smul(s8r, ybr));
    int16_t s5i = (int16_t)(si[0] + smul(s7i, yar) + smul(s8i, ybr));
    int16_t s6r = (int16_t)(smul(s10i, yai) + smul(s9i, ybi));
    int16_t s6i = (int16_t)(-smul(s10r, yai) - smul(s9r, ybi));
    q[1][0] = (int16_t)(s5r - s6r);
    q[1][1] = (int16_t)(s5i - s6i);
    q[4][0] = (int16_t)(s5r + s6r);
    q[4][1] = (int16_t)(s5i + s6i);
    int16_t s11r = (int16_t)(sr[0] + smul(s7r, ybr) + smul(s8r, yar));
    int16_t s11i = (int16_t)(si[0] + smul(s7i, ybr) + smul(s8i, yar));
    int16_t s12r = (int16_t)(-smul(s10i, ybi) + smul(s9i, yai));
    int16_t s12i = (int16_t)(smul(s10r, ybi) - smul(s9r, yai));
    q[2][0] = (int16_t)(s11r + s12r);
    q[2][1] = (int16_t)(s11i + s12i);
    q[3][0] = (int16_t)(s11r - s12r);
    q[3][1] = (int16_t)(s11i - s12i);
  }
}

/* out: p * m complex; in: read with stride fstride (complex elements) */
static void rfft_work(int16_t *out, const int16_t *in, int32_t fstride, const int32_t *factors,
                      const rfft_ctx *c) {
  const int32_t p = factors[0], m = factors[1];
  if (m == 1) {
    for (int32_t j = 0; j < p; j++) {
      out[2 * j] = in[2 * j * fstride];
      out[2 * j + 1] = in[2 * j * fstride + 1];
    }
  } else {
    for (int32_t j = 0; j < p; j++) {
      rfft_work(out + 2 * j * m, in + 2 * j * fstride, fstride * p, factors + 2, c);
    }
  }
  switch (p) {
    case 2: bfly2(out, fstride, c, m); break;
    case 3: bfly3(out, fstride, c, m); break;
    case 4: bfly4(out, fstride, c, m); break;
    default: bfly5(out, fstride, c, m); break; /* the lowering allows radices 2..5 only */
  }
}

void ai_signal_rfft_s16(const ai_signal_rfft_s16_params *p, const int16_t *input, const int16_t *twiddles,
                        const int16_t *super_twiddles, int16_t *output, void *scratch) {
  const int32_t n = p->fft_length / 2;
  int16_t *work = (int16_t *)scratch;  /* fft_length int16: the zero-padded frame */
  int16_t *spec = work + p->fft_length; /* n complex: the complex FFT */
  rfft_ctx c;
  c.tw = twiddles;
  c.n = n;
  c.inverse = 0;
  for (int32_t b = 0; b < p->batches; b++) {
    const int16_t *x = input + b * p->input_length;
    int16_t *y = output + b * 2 * (n + 1);
    memcpy(work, x, (size_t)p->input_length * sizeof(int16_t));
    memset(work + p->input_length, 0, (size_t)(p->fft_length - p->input_length) * sizeof(int16_t));
    rfft_work(spec, work, 1, p->factors, &c);

    int16_t dcr = rfft_scale(RE(spec, 0), 16383), dci = rfft_scale(IM(spec, 0), 16383);
    RE(y, 0) = (int16_t)(dcr + dci);
    IM(y, 0) = 0;
    RE(y, n) = (int16_t)(dcr - dci);
    IM(y, n) = 0;
    for (int32_t k = 1; k <= n / 2; k++) {
      int16_t pkr = rfft_scale(RE(spec, k), 16383), pki = rfft_scale(IM(spec, k), 16383);
      int16_t nkr = rfft_scale(RE(spec, n - k), 16383);
      int16_t nki = rfft_scale((int16_t)(-IM(spec, n - k)), 16383);
      int16_t f1r = (int16_t)(pkr + nkr), f1i = (int16_t)(pki + nki);
      int16_t f2r = (int16_t)(pkr - nkr), f2i = (int16_t)(pki - nki);
      int16_t tr, ti;
      rfft_cmul(&tr, &ti, f2r, f2i, RE(super_twiddles, k - 1), IM(super_twiddles, k - 1));
      RE(y, k) = (int16_t)((f1r + tr) >> 1);
      IM(y, k) = (int16_t)((f1i + ti) >> 1);
      RE(y, n - k) = (int16_t)((f1r - tr) >> 1);
      IM(y, n - k) = (int16_t)((ti - f1i) >> 1);
    }
  }
}

/* SignalIrfft (int16): KISS FFT's kiss_fftri in fixed point. The N/2 + 1 bins of each frame
 * are merged into N/2 complex values (each halved with the rounding multiply by 16383, the
 * odd part rotated by the inverse super twiddles), then the inverse complex FFT of N/2 points
 * (the same butterflies with the inverse twiddles) writes the N real samples. */
void ai_signal_irfft_s16(const ai_signal_irfft_s16_params *p, const int16_t *input, const int16_t *twiddles,
                         const int16_t *super_twiddles, int16_t *output, void *scratch) {
  const int32_t n = p->fft_length / 2;
  int16_t *tmp = (int16_t *)scratch; /* n complex */
  rfft_ctx c;
  c.tw = twiddles;
  c.n = n;
  c.inverse = 1;
  for (int32_t b = 0; b < p->batches; b++) {
    const int16_t *x = input + b * 2 * (n + 1);
    int16_t *y = output + b * p->fft_length;
    RE(tmp, 0) = rfft_scale((int16_t)(RE(x, 0) + RE(x, n)), 16383);
    IM(tmp, 0) = rfft_scale((int16_t)(RE(x, 0) - RE(x, n)), 16383);
    for (int32_t k = 1; k <= n / 2; k++) {
      int16_t fkr = rfft_scale(RE(x, k), 16383), fki = rfft_scale(IM(x, k), 16383);
      int16_t nkr = rfft_scale(RE(x, n - k), 16383);
      int16_t nki = rfft_scale((int16_t)(-IM(x, n - k)), 16383);
      int16_t ekr = (int16_t)(fkr + nkr), eki = (int16_t)(fki + nki);
      int16_t dr = (int16_t)(fkr - nkr), di = (int16_t)(fki - nki);
      int16_t okr, oki;
      rfft_cmul(&okr, &oki, dr, di, RE(super_twiddles, k - 1), IM(super_twiddles, k - 1));
      RE(tmp, k) = (int16_t)(ekr + okr);
      IM(tmp, k) = (int16_t)(eki + oki);
      RE(tmp, n - k) = (int16_t)(ekr - okr);
      IM(tmp, n - k) = (int16_t)(-(int16_t)(eki - oki));
    }
    rfft_work(y, tmp, 1, p->factors, &c);
  }
}
