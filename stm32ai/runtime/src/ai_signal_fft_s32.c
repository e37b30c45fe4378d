/* SignalRfft / SignalIrfft (int32): KISS FFT's kiss_fftr / kiss_fftri with 32-bit fixed point (FIXED_POINT = 32, as
 * TFLM's kiss_fft_int32 wrapper builds it), bit-exact. See docs/kernels_signal.md.
 *   mul(a, b)  = (int32)(((int64)a * b + 2^30) >> 31), a complex product's two terms summed
 *                in int64 before the rounding shift;
 *   div(x, k)  = mul(x, 2147483647 / k) (each butterfly's 1/radix, the split's 1/2);
 *   add, sub   = int32 arithmetic that wraps (done in uint32 here: KISS FFT's int32 sums
 *                overflow the same way on every target TFLM runs on);
 *   half(x)    = x >> 1 (arithmetic). */
#include <string.h>

#include "ai_kernels_signal.h"

#define RE(a, k) ((a)[2 * (k)])
#define IM(a, k) ((a)[2 * (k) + 1])

static inline int32_t add32(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a + (uint32_t)b);
}

static inline int32_t sub32(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a - (uint32_t)b);
}

static inline int32_t neg32(int32_t a) {
  return (int32_t)(0u - (uint32_t)a);
}

static inline int32_t round31(int64_t x) {
  return (int32_t)((x + (1LL << 30)) >> 31);
}

static inline int32_t smul32(int32_t a, int32_t b) {
  return round31((int64_t)a * b);
}

static inline void cmul32(int32_t *out_r, int32_t *out_i, int32_t ar, int32_t ai, int32_t br, int32_t bi) {
  *out_r = round31((int64_t)ar * br - (int64_t)ai * bi);
  *out_i = round31((int64_t)ar * bi + (int64_t)ai * br);
}

typedef struct {
  const int32_t *tw; /* n complex twiddles */
  int32_t inverse;   /* radix 4 rotates by +i (inverse) or -i (forward) */
} fft32_ctx;

static void bfly2(int32_t *f, int32_t fstride, const fft32_ctx *c, int32_t m) {
  for (int32_t k = 0; k < m; k++) {
    int32_t *a = f + 2 * k, *b = f + 2 * (k + m);
    const int32_t *w = c->tw + 2 * k * fstride;
    int32_t ar = smul32(a[0], 1073741823), ai = smul32(a[1], 1073741823);
    int32_t br = smul32(b[0], 1073741823), bi = smul32(b[1], 1073741823);
    int32_t tr, ti;
    cmul32(&tr, &ti, br, bi, w[0], w[1]);
    b[0] = sub32(ar, tr);
    b[1] = sub32(ai, ti);
    a[0] = add32(ar, tr);
    a[1] = add32(ai, ti);
  }
}

static void bfly3(int32_t *f, int32_t fstride, const fft32_ctx *c, int32_t m) {
  const int32_t e3i = IM(c->tw, fstride * m);
  for (int32_t k = 0; k < m; k++) {
    int32_t *a = f + 2 * k, *b = f + 2 * (k + m), *d = f + 2 * (k + 2 * m);
    const int32_t *w1 = c->tw + 2 * k * fstride, *w2 = c->tw + 4 * k * fstride;
    int32_t ar = smul32(a[0], 715827882), ai = smul32(a[1], 715827882);
    int32_t br = smul32(b[0], 715827882), bi = smul32(b[1], 715827882);
    int32_t dr = smul32(d[0], 715827882), di = smul32(d[1], 715827882);
    int32_t s1r, s1i, s2r, s2i;
    cmul32(&s1r, &s1i, br, bi, w1[0], w1[1]);
    cmul32(&s2r, &s2i, dr, di, w2[0], w2[1]);
    int32_t s3r = add32(s1r, s2r), s3i = add32(s1i, s2i);
    int32_t s0r = sub32(s1r, s2r), s0i = sub32(s1i, s2i);
    int32_t f1r = sub32(ar, s3r >> 1), f1i = sub32(ai, s3i >> 1);
    s0r = smul32(s0r, e3i);
    s0i = smul32(s0i, e3i);
    a[0] = add32(ar, s3r);
    a[1] = add32(ai, s3i);
    d[0] = add32(f1r, s0i);
    d[1] = sub32(f1i, s0r);
    b[0] = sub32(f1r, s0i);
    b[1] = add32(f1i, s0r);
  }
}

static void bfly4(int32_t *f, int32_t fstride, const fft32_ctx *c, int32_t m) {
  for (int32_t k = 0; k < m; k++) {
    int32_t *f0 = f + 2 * k, *f1 = f + 2 * (k + m), *f2 = f + 2 * (k + 2 * m), *f3 = f + 2 * (k + 3 * m);
    const int32_t *w1 = c->tw + 2 * k * fstride, *w2 = c->tw + 4 * k * fstride, *w3 = c->tw + 6 * k * fstride;
    int32_t ar = smul32(f0[0], 536870911), ai = smul32(f0[1], 536870911);
    int32_t br = smul32(f1[0], 536870911), bi = smul32(f1[1], 536870911);
    int32_t cr = smul32(f2[0], 536870911), ci = smul32(f2[1], 536870911);
    int32_t dr = smul32(f3[0], 536870911), di = smul32(f3[1], 536870911);
    int32_t s0r, s0i, s1r, s1i, s2r, s2i;
    cmul32(&s0r, &s0i, br, bi, w1[0], w1[1]);
    cmul32(&s1r, &s1i, cr, ci, w2[0], w2[1]);
    cmul32(&s2r, &s2i, dr, di, w3[0], w3[1]);
    int32_t s5r = sub32(ar, s1r), s5i = sub32(ai, s1i);
    ar = add32(ar, s1r);
    ai = add32(ai, s1i);
    int32_t s3r = add32(s0r, s2r), s3i = add32(s0i, s2i);
    int32_t s4r = sub32(s0r, s2r), s4i = sub32(s0i, s2i);
    f2[0] = sub32(ar, s3r);
    f2[1] = sub32(ai, s3i);
    f0[0] = add32(ar, s3r);
    f0[1] = add32(ai, s3i);
    if (c->inverse) { /* rotation by +i */
      f1[0] = sub32(s5r, s4i);
      f1[1] = add32(s5i, s4r);
      f3[0] = add32(s5r, s4i);
      f3[1] = sub32(s5i, s4r);
    } else {
      f1[0] = add32(s5r, s4i);
      f1[1] = sub32(s5i, s4r);
      f3[0] = sub32(s5r, s4i);
      f3[1] = add32(s5i, s4r);
    }
  }
}

static void bfly5(int32_t *f, int32_t fstride, const fft32_ctx *c, int32_t m) {
  const int32_t yar = RE(c->tw, fstride * m), yai = IM(c->tw, fstride * m);
  const int32_t ybr = RE(c->tw, 2 * fstride * m), ybi = IM(c->tw, 2 * fstride * m);
  for (int32_t u = 0; u < m; u++) {
    int32_t *q[5];
    int32_t xr[5], xi[5], sr[5], si[5];
    for (int j = 0; j < 5; j++) {
      q[j] = f + 2 * (u + j * m);
      xr[j] = smul32(q[j][0], 429496729);
      xi[j] = smul32(q[j][1], 429496729);
    }
    sr[0] = xr[0];
    si[0] = xi[0];
    for (int j = 1; j < 5; j++) {
      const int32_t *w = c->tw + 2 * j * u * fstride;
      cmul32(&sr[j], &si[j], xr[j], xi[j], w[0], w[1]);
    }
    int32_t s7r = add32(sr[1], sr[4]), s7i = add32(si[1], si[4]);
    int32_t s10r = sub32(sr[1], sr[4]), s10i = sub32(si[1], si[4]);
    int32_t s8r = add32(sr[2], sr[3]), s8i = add32(si[2], si[3]);
    int32_t s9r = sub32(sr[2], sr[3]), s9i = sub32(si[2], si[3]);
    q[0][0] = add32(xr[0], add32(s7r, s8r));
    q[0][1] = add32(xi[0], add32(s7i, s8i));
    int32_t s5r = add32(add32(sr[0], smul32(s7r, yar)), smul32(s8r, ybr));
    int32_t s5i = add32(add32(si[0], smul32(s7i, yar)), smul32(s8i, ybr));
    int32_t s6r = add32(smul32(s10i, yai), smul32(s9i, ybi));
    int32_t s6i = sub32(neg32(smul32(s10r, yai)), smul32(s9r, ybi));
    q[1][0] = sub32(s5r, s6r);
    q[1][1] = sub32(s5i, s6i);
    q[4][0] = add32(s5r, s6r);
    q[4][1] = add32(s5i, s6i);
    int32_t s11r = add32(add32(sr[0], smul32(s7r, ybr)), smul32(s8r, yar));
    int32_t s11i = add32(add32(si[0], smul32(s7i, ybr)), smul32(s8i, yar));
    int32_t s12r = add32(neg32(smul32(s10i, ybi)), smul32(s9i, yai));
    int32_t s12i = sub32(smul32(s10r, ybi), smul32(s9r, yai));
    q[2][0] = add32(s11r, s12r);
    q[2][1] = add32(s11i, s12i);
    q[3][0] = sub32(s11r, s12r);
    q[3][1] = sub32(s11i, s12i);
  }
}

static void fft32_work(int32_t *out, const int32_t *in, int32_t fstride, const int32_t *factors,
                       const fft32_ctx *c) {
  const int32_t p = factors[0], m = factors[1];
  if (m == 1) {
    for (int32_t j = 0; j < p; j++) {
      out[2 * j] = in[2 * j * fstride];
      out[2 * j + 1] = in[2 * j * fstride + 1];
    }
  } else {
    for (int32_t j = 0; j < p; j++) {
      fft32_work(out + 2 * j * m, in + 2 * j * fstride, fstride * p, factors + 2, c);
    }
  }
  switch (p) {
    case 2: bfly2(out, fstride, c, m); break;
    case 3: bfly3(out, fstride, c, m); break;
    case 4: bfly4(out, fstride, c, m); break;
    default: bfly5(out, fstride, c, m); break; /* the lowering allows radices 2..5 only */
  }
}

void ai_signal_irfft_s32(const ai_signal_irfft_s32_params *p, const int32_t *input, const int32_t *twiddles,
                         const int32_t *super_twiddles, int32_t *output, void *scratch) {
  const int32_t n = p->fft_length / 2;
  int32_t *tmp = (int32_t *)scratch; /* n complex */
  fft32_ctx c;
  c.tw = twiddles;
  c.inverse = 1;
  for (int32_t b = 0; b < p->batches; b++) {
    const int32_t *x = input + b * 2 * (n + 1);
    int32_t *y = output + b * p->fft_length;
    RE(tmp, 0) = smul32(add32(RE(x, 0), RE(x, n)), 1073741823);
    IM(tmp, 0) = smul32(sub32(RE(x, 0), RE(x, n)), 1073741823);
    for (int32_t k = 1; k <= n / 2; k++) {
      int32_t fkr = smul32(RE(x, k), 1073741823), fki = smul32(IM(x, k), 1073741823);
      int32_t nkr = smul32(RE(x, n - k), 1073741823);
      int32_t nki = smul32(neg32(IM(x, n - k)), 1073741823);
      int32_t ekr = add32(fkr, nkr), eki = add32(fki, nki);
      int32_t okr, oki;
      cmul32(&okr, &oki, sub32(fkr, nkr), sub32(fki, nki), RE(super_twiddles, k - 1), IM(super_twiddles, k - 1));
      RE(tmp, k) = add32(ekr, okr);
      IM(tmp, k) = add32(eki, oki);
      RE(tmp, n - k) = sub32(ekr, okr);
      IM(tmp, n - k) = neg32(sub32(eki, oki));
    }
    fft32_work(y, tmp, 1, p->factors, &c);
  }
}

void ai_signal_rfft_s32(const ai_signal_rfft_s32_params *p, const int32_t *input, const int32_t *twiddles,
                        const int32_t *super_twiddles, int32_t *output, void *scratch) {
  const int32_t n = p->fft_length / 2;
  int32_t *work = (int32_t *)scratch;   /* fft_length: the zero-padded frame */
  int32_t *spec = work + p->fft_length; /* n complex: the complex FFT */
  fft32_ctx c;
  c.tw = twiddles;
  c.inverse = 0;
  for (int32_t b = 0; b < p->batches; b++) {
    int32_t *y = output + b * 2 * (n + 1);
    memcpy(work, input + b * p->input_length, (size_t)p->input_length * sizeof(int32_t));
    memset(work + p->input_length, 0, (size_t)(p->fft_length - p->input_length) * sizeof(int32_t));
    fft32_work(spec, work, 1, p->factors, &c);
    const int32_t dcr = smul32(RE(spec, 0), 1073741823), dci = smul32(IM(spec, 0), 1073741823);
    RE(y, 0) = add32(dcr, dci);
    RE(y, n) = sub32(dcr, dci);
    IM(y, 0) = 0;
    IM(y, n) = 0;
    for (int32_t k = 1; k <= n / 2; k++) {
      int32_t pkr = smul32(RE(spec, k), 1073741823), pki = smul32(IM(spec, k), 1073741823);
      int32_t nkr = smul32(RE(spec, n - k), 1073741823);
      int32_t nki = smul32(neg32(IM(spec, n - k)), 1073741823);
      int32_t f1r = add32(pkr, nkr), f1i = add32(pki, nki);
      int32_t tr, ti;
      cmul32(&tr, &ti, sub32(pkr, nkr), sub32(pki, nki), RE(super_twiddles, k - 1), IM(super_twiddles, k - 1));
      RE(y, k) = add32(f1r, tr) >> 1;
      IM(y, k) = add32(f1i, ti) >> 1;
      RE(y, n - k) = sub32(f1r, tr) >> 1;
      IM(y, n - k) = sub32(ti, f1i) >> 1;
    }
  }
}
