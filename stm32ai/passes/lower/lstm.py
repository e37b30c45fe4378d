"""UNIDIRECTIONAL_SEQUENCE_LSTM -> ai_lstm_s8 (int8 x int8 -> int16 cell) / ai_lstm_f32.

The standard (Keras) LSTM only, as TFLite Micro runs it (lstm_eval.h, lstm_eval_common.cc):
no CIFG, peephole, projection or layer normalisation. See docs/kernels_lstm.md.

Per time step and batch row, with h and c the variable state tensors (persistent across
invocations, zero at ai_create/ai_reset):

    gate_g = act_g(fc(x, Wx_g, b_g) + fc(h, Wh_g))         g in (i, f, c, o)
    c      = clip(f * c + i * cell_gate)
    h      = o * tanh(c);   output[t] = h

int8 ("8x8_16"): every fc produces int16 in Q3.12 (scale 2^-12): acc = bias + sum w * (in - zp)
requantised with QuantizeMultiplier(in_scale * w_scale / 2^-12) and clamped to int16; the two
fcs add with int16 saturation. sigmoid/tanh are TFLite's int16 table-interpolation versions
(Q3.12 in, Q0.15 out). The products are TFLite's MulElementwise: MultiplyByQuantizedMultiplier
of the int16 x int16 product with the multipliers of CreateInterGateMulParams (2^-15 per gate
output, the cell and hidden scales). The cell tanh takes its input as Q(15 - cell_power)
where 2^cell_power is the cell scale, rescaled by TFLite's 3/4 trick (multiplier 3, shift).

Everything but the arithmetic is done here: the four gates' weights are stacked into one
[4S, I] and one [4S, S] matrix (order i, f, c, o), the input and hidden zero points are folded
into per-row int32 biases (bias - zp * row_sum(W)), and every multiplier/shift is a parameter.
"""

from __future__ import annotations

import math

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import per_tensor_quant, scale_of, zp_of
from stm32ai.passes.quant import quantize_multiplier

__all__ = ["lstm_gate_multiplier", "cell_scale_power", "tanh_input_params"]

# TFLite LSTM input tensor indices (lstm_shared.h)
X = 0
W_IN = (1, 2, 3, 4)          # input-to-{input, forget, cell, output} weights
W_REC = (5, 6, 7, 8)         # recurrent-to-{input, forget, cell, output} weights
PEEPHOLE = (9, 10, 11)
BIAS = (12, 13, 14, 15)      # {input, forget, cell, output} gate bias
PROJECTION = (16, 17)
H_STATE, C_STATE = 18, 19
LAYER_NORM = (20, 21, 22, 23)

GATE_INPUT_SCALE = 2.0 ** -12   # fc output / nonlinearity input: Q3.12
GATE_OUTPUT_SCALE = 2.0 ** -15  # nonlinearity output: Q0.15
CELL_ACTIVATIONS = {"TANH": 1, "SIGMOID": 0}


def _opt(op: Op, i: int) -> int:
    return op.inputs[i] if i < len(op.inputs) else -1


def lstm_gate_multiplier(in_scale: float, w_scale: float) -> tuple[int, int]:
    """Multiplier of one gate fc: TFLM's per-tensor GetQuantizedConvolutionMultipler takes
    the input x weight scale product in float32, then divides by the output scale in double."""
    prod = float(np.float32(in_scale) * np.float32(w_scale))
    return quantize_multiplier(prod / GATE_INPUT_SCALE)


def _mul_multiplier(s1: float, s2: float, s_out: float) -> tuple[int, int]:
    """CreateInterGateMulParams: double(s1) * double(s2) / double(s_out)."""
    return quantize_multiplier(float(np.float32(s1)) * float(np.float32(s2)) / float(np.float32(s_out)))


def cell_scale_power(scale: float) -> int:
    """TFLite's CheckedLog2 (float32 arithmetic, rounded); the cell scale is meant to be a
    power of two and TFLM uses the rounded exponent either way."""
    x = np.float32(scale)
    lg = np.float32(np.log(x)) * np.float32(np.float32(1.0) / np.float32(np.log(np.float32(2.0))))
    return int(math.floor(abs(float(lg)) + 0.5)) * (1 if lg >= 0 else -1)


def tanh_input_params(cell_power: int) -> tuple[int, int]:
    """(multiplier, right shift) the int16 tanh applies to its raw input, x * m + round >> s,
    so that a value of scale 2^cell_power lands in the table's 3/4-scaled Q3.12 domain."""
    left = 15 + cell_power - 3
    if left < 0:
        return 3, -left
    return 3 << left, 0


# ---- support check ---------------------------------------------------------------------

def _check_lstm(op: Op, g: Graph) -> str | None:
    if len(op.inputs) < 20 or len(op.outputs) != 1:
        return f"expects 20 or 24 inputs and one output, got {len(op.inputs)} and {len(op.outputs)}"
    if _opt(op, W_IN[0]) < 0 or _opt(op, W_REC[0]) < 0:
        return "CIFG LSTM (no input gate) is not supported (TFLite Micro does not run it either)"
    if any(_opt(op, i) >= 0 for i in PEEPHOLE):
        return "peephole connections are not supported (TFLite Micro does not run them either)"
    if any(_opt(op, i) >= 0 for i in PROJECTION):
        return "projection is not supported (TFLite Micro does not run it either)"
    if any(_opt(op, i) >= 0 for i in LAYER_NORM):
        return "layer-normalised LSTM is not supported (TFLite Micro does not run it either)"
    for i in (X, *W_IN, *W_REC, *BIAS, H_STATE, C_STATE):
        if _opt(op, i) < 0:
            return f"required input {i} is missing"
    t = {i: g.tensors[op.inputs[i]] for i in (X, *W_IN, *W_REC, *BIAS, H_STATE, C_STATE)}
    x, h, c, y = t[X], t[H_STATE], t[C_STATE], g.tensors[op.outputs[0]]
    for i in (*W_IN, *W_REC, *BIAS):
        if not t[i].is_const:
            return f"'{t[i].name}' is computed at run time; only constant weights and biases are supported"
    for s in (h, c):
        if s.is_const or not s.variable:
            return f"state '{s.name}' is not a variable tensor"
    if len(x.shape) != 3 or len(y.shape) != 3:
        return f"input {list(x.shape)} and output {list(y.shape)} must be rank 3"
    time_major = bool(op.options.get("time_major", False))
    steps, batches = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    n_in = x.shape[2]
    if len(t[W_IN[1]].shape) != 2:
        return f"weights '{t[W_IN[1]].name}' must be 2-D"
    n_state = t[W_IN[1]].shape[0]
    for i in W_IN:
        if tuple(t[i].shape) != (n_state, n_in):
            return f"input weights '{t[i].name}' {list(t[i].shape)}, expected [{n_state}, {n_in}]"
    for i in W_REC:
        if tuple(t[i].shape) != (n_state, n_state):
            return f"recurrent weights '{t[i].name}' {list(t[i].shape)}, expected [{n_state}, {n_state}]"
    for i in BIAS:
        if t[i].size != n_state:
            return f"bias '{t[i].name}' has {t[i].size} values for {n_state} cells"
    if h.size != batches * n_state or c.size != batches * n_state:
        return f"state tensors must hold {batches} x {n_state} values"
    if tuple(y.shape[:2]) != tuple(x.shape[:2]) or y.shape[2] != n_state:
        return f"output {list(y.shape)} does not match input {list(x.shape)} and {n_state} cells"
    if steps <= 0 or batches <= 0 or n_in <= 0 or n_state <= 0:
        return "empty input or state"
    act = str(op.options.get("fused_activation_function", "TANH"))
    if act not in CELL_ACTIVATIONS:
        return f"cell activation {act} is not supported (TANH or SIGMOID, as TFLite Micro)"
    if float(op.options.get("cell_clip", 0.0) or 0.0) < 0:
        return "negative cell_clip"
    wtypes = {t[i].dtype for i in (*W_IN, *W_REC)}
    if x.dtype == "float32":
        if wtypes != {"float32"}:
            return (f"hybrid (dynamic-range) LSTM: float input with {'/'.join(sorted(wtypes))} weights is not "
                    "supported — convert with full-integer quantisation or keep float weights")
        if {t[i].dtype for i in BIAS} != {"float32"} or {h.dtype, c.dtype, y.dtype} != {"float32"}:
            return "float LSTM needs float32 biases, state and output"
        return None
    if x.dtype != "int8":
        return (f"{x.dtype} activations are not supported (int8 with int16 cell state, or float32)")
    if wtypes != {"int8"}:
        return f"weights are {'/'.join(sorted(wtypes))}; int8 LSTM needs int8 weights"
    if {t[i].dtype for i in BIAS} != {"int32"}:
        return "int8 LSTM needs int32 biases"
    if h.dtype != "int8" or y.dtype != "int8":
        return f"hidden state '{h.name}' and output must be int8"
    if c.dtype != "int16":
        return f"cell state '{c.name}' is {c.dtype}; only an int16 cell state is supported (int8x8_16)"
    for tt, what in ((x, "input"), (h, "hidden state"), (c, "cell state"), (y, "output"),
                     *((t[i], "weights") for i in (*W_IN, *W_REC))):
        r = per_tensor_quant(tt, what)
        if r:
            return r
    for i in (*W_IN, *W_REC):
        if zp_of(t[i]) != 0:
            return f"weights '{t[i].name}' have a non-zero zero point"
    if zp_of(c) != 0:
        return f"cell state '{c.name}' has a non-zero zero point"
    return None


# ---- lowering ----------------------------------------------------------------------------

def _wrap32(a: np.ndarray) -> np.ndarray:
    return (((a + (1 << 31)) % (1 << 32)) - (1 << 31)).astype(np.int32)


def _common_attrs(op: Op, x: Tensor, n_state: int) -> dict[str, int]:
    time_major = bool(op.options.get("time_major", False))
    steps, batches = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    return {"batches": int(batches), "time_steps": int(steps), "input_size": int(x.shape[2]),
            "state_size": int(n_state), "time_major": int(time_major),
            "cell_gate_tanh": CELL_ACTIVATIONS[str(op.options.get("fused_activation_function", "TANH"))]}


@register("UNIDIRECTIONAL_SEQUENCE_LSTM",
          "int8 x int8 weights with int16 cell state (TFLM's 8x8_16) or float32; standard LSTM "
          "(no CIFG/peephole/projection/layer norm); batch- or time-major; state persists across runs",
          _check_lstm)
def lower_lstm(op: Op, g: Graph) -> None:
    x = g.tensors[op.inputs[X]]
    w_in = [g.tensors[op.inputs[i]] for i in W_IN]
    w_rec = [g.tensors[op.inputs[i]] for i in W_REC]
    biases = [g.tensors[op.inputs[i]] for i in BIAS]
    h, c = g.tensors[op.inputs[H_STATE]], g.tensors[op.inputs[C_STATE]]
    y = g.tensors[op.outputs[0]]
    n_state, n_in = w_in[0].shape
    attrs = _common_attrs(op, x, n_state)
    steps_total = attrs["batches"] * attrs["time_steps"]
    op.macc = int(steps_total * 4 * n_state * (n_in + n_state) + steps_total * 6 * n_state)
    base = y.name or f"op{op.index}"
    cell_clip = float(op.options.get("cell_clip", 0.0) or 0.0)
    wx = np.concatenate([np.asarray(t.data) for t in w_in], axis=0)
    wh = np.concatenate([np.asarray(t.data) for t in w_rec], axis=0)
    b = np.concatenate([np.asarray(t.data).reshape(-1) for t in biases])

    if x.dtype == "float32":
        ids = [g.add_const(f"{base}/w_x", wx.astype(np.float32)),
               g.add_const(f"{base}/w_h", wh.astype(np.float32)),
               g.add_const(f"{base}/bias", b.astype(np.float32))]
        op.kernel = "lstm_f32"
        op.inputs = [op.inputs[X], *ids, op.inputs[H_STATE], op.inputs[C_STATE]]
        op.attrs = {**attrs, "cell_clip": float(np.float32(cell_clip))}
        op.scratch = 4 * n_state * 4
        return

    in_zp, h_zp = zp_of(x), zp_of(h)
    wx64, wh64 = wx.astype(np.int64), wh.astype(np.int64)
    bias_x = _wrap32(b.astype(np.int64) - in_zp * wx64.sum(axis=1))
    bias_h = _wrap32(-h_zp * wh64.sum(axis=1))
    ids = [g.add_const(f"{base}/w_x", wx.astype(np.int8)),
           g.add_const(f"{base}/w_h", wh.astype(np.int8)),
           g.add_const(f"{base}/bias_x", bias_x),
           g.add_const(f"{base}/bias_h", bias_h)]
    mx = [lstm_gate_multiplier(scale_of(x), scale_of(w)) for w in w_in]
    mh = [lstm_gate_multiplier(scale_of(h), scale_of(w)) for w in w_rec]
    c_scale, h_scale = scale_of(c), scale_of(h)
    fc_m, fc_s = _mul_multiplier(GATE_OUTPUT_SCALE, c_scale, c_scale)
    ig_m, ig_s = _mul_multiplier(GATE_OUTPUT_SCALE, GATE_OUTPUT_SCALE, c_scale)
    hm, hs = _mul_multiplier(GATE_OUTPUT_SCALE, GATE_OUTPUT_SCALE, h_scale)
    tanh_m, tanh_s = tanh_input_params(cell_scale_power(c_scale))
    qclip = 0
    if cell_clip > 0:
        qclip = int(min(max(float(np.float32(cell_clip)) / float(np.float32(c_scale)), -32768.0), 32767.0))
    op.kernel = "lstm_s8"
    op.inputs = [op.inputs[X], *ids, op.inputs[H_STATE], op.inputs[C_STATE]]
    op.attrs = {
        **attrs,
        "mult_x": [m for m, _ in mx], "shift_x": [s for _, s in mx],
        "mult_h": [m for m, _ in mh], "shift_h": [s for _, s in mh],
        "fc_mult": fc_m, "fc_shift": fc_s, "ig_mult": ig_m, "ig_shift": ig_s,
        "h_mult": hm, "h_shift": hs, "h_zero_point": h_zp,
        "cell_clip": qclip, "tanh_mult": tanh_m, "tanh_shift": tanh_s,
    }
    op.scratch = 4 * n_state * 2
