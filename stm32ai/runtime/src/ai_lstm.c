/* UNIDIRECTIONAL_SEQUENCE_LSTM kernels (see ai_kernels_lstm.h and docs/kernels_lstm.md).
 *
 * int8 (TFLite Micro's "8x8_16" integer LSTM, bit-exact): per batch row and time step, the
 * four gates are computed from the input and the previous hidden state (all gates read the
 * old hidden state), then the cell and the hidden state are updated in place:
 *
 *   gate[g][r] = sat16(sat16(requant(bias_x + Wx.x)) + sat16(requant(bias_h + Wh.h)))  Q3.12
 *   i, f, o    = sigmoid16(gate), cell gate = tanh16 (or sigmoid16) of gate       Q0.15
 *   c          = clip(sat16(sat16(requant(f * c)) + sat16(requant(i * g))))
 *   h          = sat8(h_zp + requant(o * tanh16(c)))
 *
 * requant is TFLite's double-rounding MultiplyByQuantizedMultiplier (ai_requant). All
 * multipliers, shifts, folded biases and the clip bound come from the lowering.
 *
 * float32: TFLite's float LSTM in the same order (fc sums in index order, bias added after
 * the input fc, the recurrent fc added to it; sigmoid/tanh as ai_logistic_f32/ai_tanh_f32).
 */
#include <float.h>
#include <string.h>

#include "ai_kernels_activations.h"
#include "ai_kernels_lstm.h"
#include "ai_qmath.h"

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#include <arm_acle.h>
#define AI_LSTM_DSP 1
#else
#define AI_LSTM_DSP 0
#endif

/* sigmoid(k / 24) in unsigned 0.16 fixed point, k = 0..255: the table TFLite's int16
 * logistic and tanh interpolate (tensorflow/lite/kernels/internal/common.h; its rounding is
 * not a closed formula, so the values are data). */
static const uint16_t k_sigmoid_u16[256] = {
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535
};

static inline int32_t sat16(int32_t v) { return AI_CLAMP(v, -32768, 32767); }

/* TFLite's int16 Logistic / Tanh: v = (x * mult + round) >> shift rescales the input to the
 * table's domain, then the 256-entry sigmoid table is interpolated at |v| (9 fraction bits
 * for the sigmoid, 8 for tanh(x) = 2 sigmoid(2x) - 1, the table's last entry beyond it) and
 * the result mirrored for v < 0 (1 - s, or -t) and rounded to Q0.15. The two functions
 * differ only in these constants, so one loop serves both. */
static void sigmoid_lut_s16(const int16_t *input, int16_t *output, int32_t n, int32_t mult,
                            int32_t shift, int32_t is_tanh) {
  const int32_t frac_bits = is_tanh ? 8 : 9;
  const int32_t out_shift = is_tanh ? 8 : 10;
  const int32_t sat = is_tanh ? 0xFFFF << 8 : 0x7FFF << 10; /* at and past the table's end */
  const int32_t mirror = is_tanh ? 1 << 23 : 1 << 25;       /* 1.0 at the interpolated scale */
  const int32_t half = 1 << (out_shift - 1);
  const int32_t rnd = shift > 0 ? (int32_t)1 << (shift - 1) : 0;
  for (int32_t i = 0; i < n; i++) {
    const int32_t v = ((int32_t)input[i] * mult + rnd) >> shift;
    const uint32_t a = (uint32_t)(v < 0 ? -v : v);
    const uint32_t uh = a >> frac_bits;
    int32_t r;
    if (uh >= 255u) {
      r = sat;
    } else {
      const uint32_t ua = k_sigmoid_u16[uh], ub = k_sigmoid_u16[uh + 1u];
      r = (int32_t)((ua << frac_bits) + (a & ((1u << frac_bits) - 1u)) * (ub - ua));
    }
    /* sigmoid: s or 1 - s; tanh: 2s - 1 or 1 - 2s, both at the interpolated scale */
    r = v >= 0 ? r - (is_tanh ? mirror : 0) + half : mirror - r + half - 1;
    output[i] = (int16_t)(r >> out_shift); /* arithmetic shift, as TFLite */
  }
}

void ai_sigmoid_s16(const int16_t *input, int16_t *output, int32_t n, int32_t mult, int32_t shift) {
  sigmoid_lut_s16(input, output, n, mult, shift, 0);
}

void ai_tanh_s16(const int16_t *input, int16_t *output, int32_t n, int32_t mult, int32_t shift) {
  sigmoid_lut_s16(input, output, n, mult, shift, 1);
}

#if AI_LSTM_DSP
static inline uint32_t ror8(uint32_t v) { return (v >> 8) | (v << 24); }
#endif

/* acc + sum_k w[k] * x[k] (int8 x int8, int32 accumulation). */
static int32_t dot_s8(const int8_t *w, const int8_t *x, int32_t n, int32_t acc) {
  int32_t k = 0;
#if AI_LSTM_DSP
  for (; k + 4 <= n; k += 4) {
    int32_t wv, xv;
    memcpy(&wv, w + k, 4);
    memcpy(&xv, x + k, 4);
    acc = __smlad(__sxtb16(wv), __sxtb16(xv), acc);
    acc = __smlad(__sxtb16((int32_t)ror8((uint32_t)wv)), __sxtb16((int32_t)ror8((uint32_t)xv)), acc);
  }
#endif
  for (; k < n; k++) {
    acc = ai_wmla(acc, w[k], x[k]);
  }
  return acc;
}

static void lstm_step_s8(const ai_lstm_s8_params *p, const int8_t *x, const int8_t *w_x,
                         const int8_t *w_h, const int32_t *bias_x, const int32_t *bias_h,
                         int8_t *h, int16_t *c, int8_t *out, int16_t *gates) {
  const int32_t n_in = p->input_size, s = p->state_size;
  int16_t *gi = gates, *gf = gates + s, *gc = gates + 2 * s, *go = gates + 3 * s;
  for (int32_t g = 0; g < 4; g++) {
    for (int32_t r = 0; r < s; r++) {
      const int32_t row = g * s + r;
      const int32_t ax = dot_s8(w_x + (size_t)row * (size_t)n_in, x, n_in, bias_x[row]);
      const int32_t ah = dot_s8(w_h + (size_t)row * (size_t)s, h, s, bias_h[row]);
      const int32_t vx = sat16(ai_requant(ax, p->mult_x[g], p->shift_x[g]));
      const int32_t vh = sat16(ai_requant(ah, p->mult_h[g], p->shift_h[g]));
      gates[row] = (int16_t)sat16(vx + vh);
    }
  }
  ai_sigmoid_s16(gi, gi, 2 * s, 3, 0); /* input and forget gates */
  if (p->cell_gate_tanh) {
    ai_tanh_s16(gc, gc, s, 3, 0);
  } else {
    ai_sigmoid_s16(gc, gc, s, 3, 0);
  }
  ai_sigmoid_s16(go, go, s, 3, 0);
  const int32_t clip = p->cell_clip;
  for (int32_t r = 0; r < s; r++) {
    const int32_t fc = sat16(ai_requant((int32_t)gf[r] * c[r], p->fc_mult, p->fc_shift));
    const int32_t ig = sat16(ai_requant((int32_t)gi[r] * gc[r], p->ig_mult, p->ig_shift));
    int32_t cn = sat16(fc + ig);
    if (clip > 0) {
      cn = AI_CLAMP(cn, -clip, clip);
    }
    c[r] = (int16_t)cn;
  }
  ai_tanh_s16(c, gi, s, p->tanh_mult, p->tanh_shift); /* tanh(c) into the spent input gate */
  for (int32_t r = 0; r < s; r++) {
    const int32_t v = ai_wadd(p->h_zero_point, ai_requant((int32_t)gi[r] * go[r], p->h_mult, p->h_shift));
    h[r] = (int8_t)AI_CLAMP(v, -128, 127);
  }
  memcpy(out, h, (size_t)s);
}

void ai_lstm_s8(const ai_lstm_s8_params *p, const int8_t *input, const int8_t *w_x,
                const int8_t *w_h, const int32_t *bias_x, const int32_t *bias_h, int8_t *hidden,
                int16_t *cell, int8_t *output, void *scratch) {
  const int32_t nb = p->batches, nt = p->time_steps, n_in = p->input_size, s = p->state_size;
  int16_t *gates = (int16_t *)scratch;
  /* Batch rows are independent, so time-major input runs row by row too. */
  for (int32_t b = 0; b < nb; b++) {
    for (int32_t t = 0; t < nt; t++) {
      const int32_t step = p->time_major ? t * nb + b : b * nt + t;
      lstm_step_s8(p, input + (size_t)step * (size_t)n_in, w_x, w_h, bias_x, bias_h,
                   hidden + (size_t)b * (size_t)s, cell + (size_t)b * (size_t)s,
                   output + (size_t)step * (size_t)s, gates);
    }
  }
}

/* TFLite's ActivationFunctionWithMinMax with the +-FLT_MAX bounds of "no activation". */
static inline float clamp_flt(float v) {
  v = v < -FLT_MAX ? -FLT_MAX : v;
  return v > FLT_MAX ? FLT_MAX : v;
}

static float dot_f32(const float *w, const float *x, int32_t n) {
  float total = 0.0f;
  for (int32_t k = 0; k < n; k++) {
    total += x[k] * w[k];
  }
  return total;
}

static void lstm_step_f32(const ai_lstm_f32_params *p, const float *x, const float *w_x,
                          const float *w_h, const float *bias, float *h, float *c, float *out,
                          float *gates) {
  const int32_t n_in = p->input_size, s = p->state_size;
  float *gi = gates, *gf = gates + s, *gc = gates + 2 * s, *go = gates + 3 * s;
  for (int32_t row = 0; row < 4 * s; row++) {
    const float vx = clamp_flt(dot_f32(w_x + (size_t)row * (size_t)n_in, x, n_in) + bias[row]);
    const float vh = clamp_flt(dot_f32(w_h + (size_t)row * (size_t)s, h, s) + 0.0f);
    gates[row] = vx + vh;
  }
  ai_logistic_f32_params two_gates = {2 * s}, one_gate = {s};
  ai_tanh_f32_params tanh_gate = {s};
  ai_logistic_f32(&two_gates, gi, gi);
  if (p->cell_gate_tanh) {
    ai_tanh_f32(&tanh_gate, gc, gc);
  } else {
    ai_logistic_f32(&one_gate, gc, gc);
  }
  ai_logistic_f32(&one_gate, go, go);
  const float clip = p->cell_clip;
  for (int32_t r = 0; r < s; r++) {
    float cn = clamp_flt(gf[r] * c[r]) + clamp_flt(gi[r] * gc[r]);
    if (clip > 0.0f) {
      cn = cn > clip ? clip : (cn < -clip ? -clip : cn);
    }
    c[r] = cn;
  }
  ai_tanh_f32(&tanh_gate, c, gi);
  for (int32_t r = 0; r < s; r++) {
    h[r] = clamp_flt(gi[r] * go[r]);
  }
  memcpy(out, h, (size_t)s * sizeof(float));
}

void ai_lstm_f32(const ai_lstm_f32_params *p, const float *input, const float *w_x,
                 const float *w_h, const float *bias, float *hidden, float *cell, float *output,
                 void *scratch) {
  const int32_t nb = p->batches, nt = p->time_steps, n_in = p->input_size, s = p->state_size;
  float *gates = (float *)scratch;
  for (int32_t b = 0; b < nb; b++) {
    for (int32_t t = 0; t < nt; t++) {
      const int32_t step = p->time_major ? t * nb + b : b * nt + t;
      lstm_step_f32(p, input + (size_t)step * (size_t)n_in, w_x, w_h, bias,
                    hidden + (size_t)b * (size_t)s, cell + (size_t)b * (size_t)s,
                    output + (size_t)step * (size_t)s, gates);
    }
  }
}
