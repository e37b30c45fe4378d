"""16x8 quantisation (int16 activations with zero point 0, int8 weights, int64 bias):
the int16 variants of the op families (docs/kernels_s16.md).

Each op here is registered with `register_variant`: ops whose activations are int16 are
checked and lowered by this module, every other op by its family's module. Bit-exact with
TFLite Micro's int16 reference kernels; everything but the per-element arithmetic is
computed here (multipliers, the 64-bit requantisation's reduced multipliers and shifts,
softmax's exp and 1/(1+x) tables):

* CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED: int64 accumulator plus the int64 bias,
  then TFLite's MultiplyByQuantizedMultiplier(int64_t, ...) (multiplier reduced to 16 bits,
  one rounding shift: `rmult`/`rshift` tables) and the fused activation's clamp; with an
  int32 bias (the converter's option; CONV_2D and FULLY_CONNECTED) TFLite requantises the
  accumulator as int32 with the 32-bit MultiplyByQuantizedMultiplier (`acc32`);
* AVERAGE/MAX_POOL_2D: int32 sum / max of the in-image taps, TFLite's rounding division;
* SOFTMAX: TFLite's SoftmaxInt16 with its two 513-entry interpolated tables;
* ADD / SUB: TFLite's general path with left_shift 15; MUL: one requantisation;
* LEAKY_RELU: TFLM's QuantizeLeakyRelu (identity / alpha multipliers);
* RELU: TFLM's requantise-and-clamp, RELU6: its clamp in the input's quantisation (both the
  requantize_s16_s16 kernel);
* QUANTIZE float32 -> int16, int16 <-> int8, int16 -> int16, int16 <-> int32; DEQUANTIZE int16 -> float32.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from functools import partial

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register_variant
from stm32ai.passes.lower.activations import f32_div, leaky_relu_alpha, round_half_away
from stm32ai.passes.lower.binary import loop_attrs
from stm32ai.passes.lower.common import check_activation as _fused_ok
from stm32ai.passes.lower.common import check_filter_quant, per_tensor_quant
from stm32ai.passes.lower.common import fused_activation as _act
from stm32ai.passes.lower.common import scale_of as _scale
from stm32ai.passes.lower.common import zp_of as _zp
from stm32ai.passes.lower.conv_geometry import conv_geometry
from stm32ai.passes.lower.pool import pool_geometry
from stm32ai.passes.lower.quantize import check_requantize_range, lower_requantize_int
from stm32ai.passes.lower.reduce import MAX_DIMS as REDUCE_DIMS
from stm32ai.passes.lower.reduce import mean_multiplier, reduce_plan, resolve_axes
from stm32ai.passes.lower.transpose_conv import pack_weights_s16, reduced_multiplier
from stm32ai.passes.quant import activation_range_quantized, per_channel_multiplier, quantize_multiplier

__all__ = ["add_params_s16", "checked_log2", "lut_act_params_s16", "lut_populate_s16", "softmax_luts_s16"]

LEFT_SHIFT_S16 = 15  # TFLite's ADD/SUB left shift for int16 (20 for int8)
MAX_POOL_TAPS = 65535  # the int32 sum of int16 taps cannot overflow
DW_MAX_TAPS = 511  # AI_DW_S16_MAX_TAPS: dwconv_s16's int32 per-channel sums (|x * w| <= 2^22)


# ---- shared checks ----------------------------------------------------------------------------

def _t(g: Graph, op: Op, i: int) -> Tensor | None:
    return g.tensors[op.inputs[i]] if i < len(op.inputs) and op.inputs[i] >= 0 else None


def _is_s16(op: Op, g: Graph) -> bool:
    """The variant applies when the op's data input or output is int16."""
    x = _t(g, op, 0)
    y = g.tensors[op.outputs[0]] if op.outputs else None
    return (x is not None and x.dtype == "int16") or (y is not None and y.dtype == "int16")


def _per_tensor(t: Tensor, what: str, zero: bool = True) -> str | None:
    """16x8 activations: per-tensor, positive scale, and (TFLite's rule) zero point 0."""
    r = per_tensor_quant(t, what)
    if r:
        return r
    if zero and t.dtype == "int16" and _zp(t) != 0:
        return (f"{what} '{t.name}' is int16 with zero point {_zp(t)}; 16x8 quantisation needs "
                "zero point 0")
    return None


def _all_s16(ts: list[tuple[Tensor, str]]) -> str | None:
    for t, what in ts:
        if t.dtype != "int16":
            return f"{what} '{t.name}' is {t.dtype}; 16x8 ops need int16 inputs and outputs"
        r = _per_tensor(t, what)
        if r:
            return r
    return None


def _act_range(op: Op, y: Tensor) -> tuple[int, int]:
    lo, hi = activation_range_quantized(_act(op), _scale(y), _zp(y), "int16")
    return int(lo), int(hi)


def _unary_s16(op: Op, g: Graph, fused: bool = False) -> tuple[Tensor, Tensor] | str:
    """Input and output of a one-input int16 op (and its fused activation when `fused`), or the
    reason it is refused."""
    if len(op.inputs) != 1 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return "expects one input and one output"
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    r = _all_s16([(x, "input"), (y, "output")]) or (_fused_ok(op) if fused else None)
    return r if r else (x, y)


# ---- weighted ops: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED -------------------------------

def _check_weights(w: Tensor, n_out: int, axis: int, bias: Tensor | None) -> str | None:
    if not w.is_const:
        return f"weights '{w.name}' are computed at run time; only constant weights are supported"
    if w.dtype != "int8":
        return f"weights '{w.name}' are {w.dtype}; 16x8 quantisation has int8 weights"
    r = check_filter_quant(w, f"weights '{w.name}'", n_out, axis)
    if r:
        return r
    if bias is not None:
        if not bias.is_const:
            return f"bias '{bias.name}' is computed at run time; only a constant bias is supported"
        if bias.dtype not in ("int64", "int32"):
            return (f"bias '{bias.name}' is {bias.dtype}; 16x8 layers take an int64 (converter "
                    "default) or int32 bias")
        if bias.size != n_out:
            return f"bias '{bias.name}' has {bias.size} values for {n_out} outputs"
    return None


def _requant64_tables(g: Graph, base: str, x: Tensor, w: Tensor, y: Tensor, n: int,
                      acc32: bool = False) -> tuple[int, int]:
    """Per output channel: the reduced multiplier and total right shift of TFLite's 64-bit
    MultiplyByQuantizedMultiplier (names ending in _rshift: verify.py bounds them 1..62), or
    with `acc32` (int32 bias) the Q31 multiplier and signed shift of the 32-bit one."""
    assert w.quant is not None
    scales = np.asarray(w.quant.scale, np.float32).reshape(-1)
    if scales.size == 1:
        scales = np.repeat(scales, n)
    q31 = [quantize_multiplier(per_channel_multiplier(_scale(x), float(s), _scale(y))) for s in scales]
    if acc32:
        return (g.add_const(f"{base}/out_multiplier", np.array([p[0] for p in q31], np.int32)),
                g.add_const(f"{base}/out_shift", np.array([p[1] for p in q31], np.int32)))
    pairs = [reduced_multiplier(*p) for p in q31]
    return (g.add_const(f"{base}/rmult", np.array([p[0] for p in pairs], np.int32)),
            g.add_const(f"{base}/rq_rshift", np.array([p[1] for p in pairs], np.int32)))


def _acc32(g: Graph, op: Op) -> bool:
    """An int32 bias: TFLite's 16x8 conv/FC then requantise a 32-bit accumulator."""
    b = _t(g, op, 2)
    return b is not None and b.dtype == "int32"


def _check_conv_s16(op: Op, g: Graph) -> str | None:
    if len(op.inputs) < 2 or op.inputs[0] < 0 or op.inputs[1] < 0 or len(op.outputs) != 1:
        return "expects an input, a filter, an optional bias and one output"
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    r = _all_s16([(x, "input"), (y, "output")]) or _fused_ok(op)
    if r:
        return r
    geo = conv_geometry(op, g)
    if isinstance(geo, str):
        return geo
    axis = 3 if op.type == "DEPTHWISE_CONV_2D" else 0
    r = _check_weights(w, geo.out_c, axis, _t(g, op, 2))
    if r:
        return r
    if op.type == "DEPTHWISE_CONV_2D" and _acc32(g, op):
        return ("an int32 bias on a 16x8 DEPTHWISE_CONV_2D is not supported (LiteRT refuses it, and "
                "TFLite Micro computes nonsense with it); convert with the default int64 bias")
    if op.type == "DEPTHWISE_CONV_2D" and geo.k_h * geo.k_w > DW_MAX_TAPS:
        return (f"a {geo.k_h}x{geo.k_w} kernel is over the {DW_MAX_TAPS} taps the int16 depthwise kernel "
                "sums in int32")
    return None


def _bias64(g: Graph, op: Op, base: str) -> int:
    """The bias as int64 (-1: none). TFLite's 16x8 kernels accumulate in int64 whatever the
    bias type, so an int32 bias (the converter's int32-bias option) is widened here, exactly."""
    b = _t(g, op, 2)
    if b is None or b.dtype == "int64":
        return -1 if b is None else op.inputs[2]
    assert b.data is not None
    return g.add_const(f"{base}/bias_s64", np.asarray(b.data, np.int64).reshape(-1))


def _lower_conv_like(op: Op, g: Graph, kernel: str, extra: dict[str, object]) -> None:
    geo = conv_geometry(op, g)
    assert not isinstance(geo, str), geo
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    base = y.name or f"op{op.index}"
    acc32 = _acc32(g, op)
    rm, rs = _requant64_tables(g, base, x, w, y, geo.out_c, acc32)
    lo, hi = _act_range(op, y)
    bias = _bias64(g, op, base)
    w_id = op.inputs[1]
    if kernel == "conv2d_s16":  # rows of k_h * k_w * in_c (the im2col order), packed for ai_dot2_s16
        assert w.data is not None
        rows = np.asarray(w.data, np.int8).reshape(geo.out_c, -1)
        w_id = g.add_const(f"{base}/weights_packed", pack_weights_s16(rows))
    op.kernel = kernel
    op.inputs = [op.inputs[0], w_id, bias, rm, rs]
    op.attrs = {**geo.attrs(), **extra, "act_min": lo, "act_max": hi}
    op.scratch = 0
    if kernel == "conv2d_s16":
        op.attrs["acc32"] = int(acc32)
        op.scratch = (geo.k_h * geo.k_w * geo.in_c * 2 + 3) // 4 * 4  # ai_conv2d_s16_scratch_size


_CONV_TEXT = ("int16x8: int16 activations (zero point 0), int8 per-tensor/per-channel filter, int64 "
              "bias and int64 accumulator, or int32 bias and TFLite's 32-bit requantisation")


@register_variant("CONV_2D", _CONV_TEXT, _is_s16, _check_conv_s16)
def lower_conv_s16(op: Op, g: Graph) -> None:
    geo = conv_geometry(op, g)
    assert not isinstance(geo, str)
    op.macc = int(geo.batches * geo.out_h * geo.out_w * geo.out_c * geo.k_h * geo.k_w * geo.in_c)
    _lower_conv_like(op, g, "conv2d_s16", {})


@register_variant("DEPTHWISE_CONV_2D", "int16x8: int16 activations (zero point 0), int8 per-tensor/per-channel "
                  "filter, int64 bias, int64 accumulator; any depth multiplier; kernels <= 511 taps",
                  _is_s16, _check_conv_s16)
def lower_dwconv_s16(op: Op, g: Graph) -> None:
    geo = conv_geometry(op, g)
    assert not isinstance(geo, str)
    op.macc = int(geo.batches * geo.out_h * geo.out_w * geo.out_c * geo.k_h * geo.k_w)
    _lower_conv_like(op, g, "depthwise_conv2d_s16", {"depth_mult": geo.out_c // geo.in_c})
    op.scratch = 4 * geo.out_c  # ai_depthwise_conv2d_s16_scratch_size


def _check_fc_s16(op: Op, g: Graph) -> str | None:
    if len(op.inputs) < 2 or op.inputs[0] < 0 or op.inputs[1] < 0 or len(op.outputs) != 1:
        return "expects an input, a weights tensor, an optional bias and one output"
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    if op.options.get("weights_format", "DEFAULT") not in (None, "DEFAULT", 0):
        return "only the DEFAULT weights format is supported"
    r = _all_s16([(x, "input"), (y, "output")]) or _fused_ok(op)
    if r:
        return r
    if len(w.shape) != 2:
        return f"weights '{w.name}' have shape {list(w.shape)}, expected [out_features, in_features]"
    n_out, k = w.shape
    if k <= 0 or n_out <= 0 or x.size % k != 0 or y.size != x.size // k * n_out:
        return f"input {list(x.shape)}, weights {list(w.shape)} and output {list(y.shape)} do not fit"
    return _check_weights(w, n_out, 0, _t(g, op, 2))


@register_variant("FULLY_CONNECTED", "int16x8: int16 input/output (zero point 0), int8 weights "
                  "(per tensor or per row), int64 bias (int32 bias: 32-bit requantisation)", _is_s16, _check_fc_s16)
def lower_fc_s16(op: Op, g: Graph) -> None:
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    n_out, k = w.shape
    base = y.name or f"op{op.index}"
    acc32 = _acc32(g, op)
    rm, rs = _requant64_tables(g, base, x, w, y, n_out, acc32)
    lo, hi = _act_range(op, y)
    bias = _bias64(g, op, base)
    assert w.data is not None
    w_id = g.add_const(f"{base}/weights_packed", pack_weights_s16(np.asarray(w.data, np.int8)))
    op.kernel = "fully_connected_s16"
    op.inputs = [op.inputs[0], w_id, bias, rm, rs]
    op.attrs = {"batches": int(x.size // k), "n_in": int(k), "n_out": int(n_out), "act_min": lo, "act_max": hi,
                "acc32": int(acc32)}
    op.macc = int(x.size // k * k * n_out)


# ---- pooling -------------------------------------------------------------------------------------

def _check_pool_s16(op: Op, g: Graph) -> str | None:
    io = _unary_s16(op, g, fused=True)
    if isinstance(io, str):
        return io
    x, y = io
    if len(x.shape) != 4 or len(y.shape) != 4:
        return f"input '{x.name}' {list(x.shape)} is not a 4-D NHWC tensor"
    o = op.options
    if str(o.get("padding", "VALID")) not in ("SAME", "VALID"):
        return f"padding {o.get('padding')} is not supported (SAME or VALID)"
    if any(int(o.get(k, 1)) < 1 for k in ("filter_height", "filter_width", "stride_h", "stride_w")):
        return "filter sizes and strides must be >= 1"
    if int(o.get("filter_height", 1)) * int(o.get("filter_width", 1)) > MAX_POOL_TAPS:
        return f"pooling windows over {MAX_POOL_TAPS} taps overflow the int32 sum"
    geo = pool_geometry(op, g)
    want = (geo["batches"], geo["out_h"], geo["out_w"], geo["channels"])
    if tuple(y.shape) != want or geo["out_h"] < 1 or geo["out_w"] < 1:
        return f"output '{y.name}' {list(y.shape)} does not match the pooled shape {list(want)}"
    if np.float32(_scale(x)) != np.float32(_scale(y)):
        return "int16 pooling needs the same scale on input and output (as TFLite)"
    return None


def _lower_pool_s16(op: Op, g: Graph, kind: str) -> None:
    y = g.tensors[op.outputs[0]]
    geo = pool_geometry(op, g)
    lo, hi = _act_range(op, y)
    op.kernel = f"{kind}_s16"
    op.attrs = {**geo, "act_min": lo, "act_max": hi}
    op.macc = int(y.size * geo["filter_h"] * geo["filter_w"])


_POOL_TEXT = "int16 (same quantisation on input and output, zero point 0)"


for _op_type, _kind in (("AVERAGE_POOL_2D", "avgpool"), ("MAX_POOL_2D", "maxpool")):
    register_variant(_op_type, _POOL_TEXT, _is_s16, _check_pool_s16)(partial(_lower_pool_s16, kind=_kind))


# ---- softmax --------------------------------------------------------------------------------

def _libm_f32(name: str) -> Callable[[float], float] | None:
    """The C library's float function (TFLite's std::exp(float) is expf)."""
    path = ctypes.util.find_library("m")
    if path is None:
        return None
    fn = getattr(ctypes.CDLL(path), name)
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn


def _expf(v: np.float32) -> np.float32:
    fn = _libm_f32("expf")
    if fn is not None:
        return np.float32(fn(float(v)))
    return np.float32(np.exp(np.float64(v)))  # correctly rounded exp, nearly always expf's value


def _round(v: np.float32) -> np.float32:
    """std::round on float: half away from zero."""
    return np.float32(np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))) if abs(v) < 2**23 else v


def lut_populate_s16(func: Callable[[np.float32], np.float32], input_scale: np.float32, input_zp: int,
                     output_scale: np.float32, output_zp: int) -> np.ndarray:
    """TFLite's LUTPopulate<int16_t> (float arithmetic throughout): 512 interpolation
    segments over the input's int16 range, each sample biased by half the error of the
    linear interpolation at the segment's midpoint, plus the end value (513 entries)."""
    f = np.float32
    in_min = f(input_scale * f(-32768 - input_zp))
    in_max = f(input_scale * f(32767 - input_zp))
    out_min = f(output_scale * f(-32768 - output_zp))
    out_max = f(output_scale * f(32767 - output_zp))
    step = f((in_max - in_min) / f(512))
    half = f(step / f(2))
    inv = f(f(65536) / f(out_max - out_min))
    lut = np.zeros(513, np.int16)
    for i in range(512):
        val = func(f(in_min + f(f(i) * step)))
        mid = func(f(f(in_min + f(f(i) * step)) + half))
        nxt = func(f(in_min + f(f(i + 1) * step)))
        sample = _round(f(val * inv))
        interp = _round(f(f(f(nxt * inv) + _round(f(val * inv))) / f(2)))
        bias = _round(f(f(interp - _round(f(mid * inv))) / f(2)))
        lut[i] = int(min(max(f(sample - bias), f(-32768)), f(32767)))
    lut[512] = int(min(max(_round(f(func(in_max) * inv)), f(-32768)), f(32767)))
    return lut


def softmax_luts_s16() -> tuple[np.ndarray, np.ndarray]:
    """exp on [-10, 0] and 1 / (1 + x) on [0, 1], both to [-1, 1), as TFLite Micro's
    softmax prepare (InitializeLutForInt16)."""
    f = np.float32
    rng = 65535
    exp_lut = lut_populate_s16(_expf, f(f(10) / f(rng)), 32767, f(f(2) / f(rng)), 0)
    recip = lut_populate_s16(lambda v: f(f(1) / f(f(1) + v)), f(f(1) / f(rng)), -32768, f(f(2) / f(rng)), 0)
    return exp_lut, recip


def _check_softmax_s16(op: Op, g: Graph) -> str | None:
    io = _unary_s16(op, g)
    if isinstance(io, str):
        return io
    x, y = io
    if len(x.shape) < 1 or x.shape != y.shape or x.shape[-1] < 1:
        return f"input {list(x.shape)} and output {list(y.shape)} shapes differ"
    if x.shape[-1] > 65535:
        return f"rows of {x.shape[-1]} elements overflow the int32 sum of exps (at most 65535)"
    real = _scale(x) * float(op.options.get("beta", 1.0)) / (10.0 / 65535.0)
    if not real > 0:
        return "beta * input scale must be positive"
    m, s = quantize_multiplier(real)
    if s > 15 or m == 0:
        return f"beta * input scale = {real * 10 / 65535:g} is out of the int16 softmax's range"
    return None


def _input_s16(op: Op, g: Graph) -> bool:
    """SOFTMAX's int16 variant: an int16 input (int8 -> int16 is the int8 algorithm, softmax.py)."""
    x = _t(g, op, 0)
    return x is not None and x.dtype == "int16"


@register_variant("SOFTMAX", "int16 -> int16 (zero points 0; TFLite's exp and 1/(1+x) tables)",
                  _input_s16, _check_softmax_s16)
def lower_softmax_s16(op: Op, g: Graph) -> None:
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    depth = int(x.shape[-1])
    real = float(np.float32(_scale(x))) * float(np.float32(op.options.get("beta", 1.0))) / (10.0 / 65535.0)
    m, s = quantize_multiplier(real)
    exp_lut, recip = softmax_luts_s16()
    base = y.name or f"op{op.index}"
    op.kernel = "softmax_s16"
    op.inputs = [op.inputs[0], g.add_const(f"{base}/exp_lut", exp_lut), g.add_const(f"{base}/recip_lut", recip)]
    op.attrs = {"rows": int(x.size // depth), "depth": depth, "input_multiplier": int(m), "input_shift": int(s)}
    op.macc = int(4 * x.size)
    op.inplace = True  # each row is read whole before it is written, element c after its last read


# ---- ADD / SUB / MUL ------------------------------------------------------------------------

def add_params_s16(s1: float, s2: float, so: float) -> dict[str, int]:
    """TFLite Micro's CalculateOpDataAdd/Sub for int16: left shift 15, double ratios."""
    f32 = np.float32
    twice_max = 2.0 * float(max(f32(s1), f32(s2)))
    pairs = [quantize_multiplier(float(f32(s1)) / twice_max), quantize_multiplier(float(f32(s2)) / twice_max),
             quantize_multiplier(twice_max / ((1 << LEFT_SHIFT_S16) * float(f32(so))))]
    return {"input1_offset": 0, "input2_offset": 0, "left_shift": LEFT_SHIFT_S16,
            "input1_multiplier": pairs[0][0], "input1_shift": pairs[0][1],
            "input2_multiplier": pairs[1][0], "input2_shift": pairs[1][1],
            "output_multiplier": pairs[2][0], "output_shift": pairs[2][1], "output_offset": 0}


def _check_binary_s16(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return "expects two inputs and one output"
    a, b, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    r = _all_s16([(a, "input 1"), (b, "input 2"), (y, "output")]) or _fused_ok(op)
    if r:
        return r
    if len(y.shape) > 6:
        return f"output rank {len(y.shape)} is over 6"
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast"
    if tuple(shape) != tuple(y.shape):
        return f"output {list(y.shape)} is not the broadcast shape {list(shape)}"
    return None


def _lower_binary_s16(op: Op, g: Graph, kernel: str, params: dict[str, int]) -> None:
    a, b, y = (g.tensors[i] for i in (*op.inputs, op.outputs[0]))
    lo, hi = _act_range(op, y)
    op.kernel = kernel
    op.attrs = {**loop_attrs(a.shape, b.shape, y.shape), **params, "act_min": lo, "act_max": hi}
    op.macc = y.size
    op.inplace = tuple(a.shape) == tuple(y.shape)


@register_variant("ADD", "int16x8: int16 (zero points 0, TFLite's general path, left shift 15); "
                  "broadcasting", _is_s16, _check_binary_s16)
def lower_add_s16(op: Op, g: Graph) -> None:
    a, b, y = (g.tensors[i] for i in (*op.inputs, op.outputs[0]))
    _lower_binary_s16(op, g, "add_s16", {**add_params_s16(_scale(a), _scale(b), _scale(y)), "subtract": 0})


@register_variant("SUB", "int16x8: int16 (zero points 0, left shift 15); broadcasting",
                  _is_s16, _check_binary_s16)
def lower_sub_s16(op: Op, g: Graph) -> None:
    a, b, y = (g.tensors[i] for i in (*op.inputs, op.outputs[0]))
    _lower_binary_s16(op, g, "sub_s16", {**add_params_s16(_scale(a), _scale(b), _scale(y)), "subtract": 1})


def _mul_multiplier(a: Tensor, b: Tensor, y: Tensor) -> tuple[int, int]:
    """TFLite Micro's CalculateOpDataMul: double(s1) * double(s2) / double(so)."""
    f32 = np.float32
    return quantize_multiplier(float(f32(_scale(a))) * float(f32(_scale(b))) / float(f32(_scale(y))))


def _check_mul_s16(op: Op, g: Graph) -> str | None:
    r = _check_binary_s16(op, g)
    if r:
        return r
    a, b, y = (g.tensors[i] for i in (*op.inputs, op.outputs[0]))
    if _mul_multiplier(a, b, y)[1] > 0:  # the int16 x int16 product (up to 2^30) shifted left overflows int32
        return "the output scale is below the product of the input scales (int32 overflow in TFLite's int16 MUL)"
    return None


@register_variant("MUL", "int16x8: int16 (zero points 0, output scale >= product of input scales); "
                  "broadcasting", _is_s16, _check_mul_s16)
def lower_mul_s16(op: Op, g: Graph) -> None:
    a, b, y = (g.tensors[i] for i in (*op.inputs, op.outputs[0]))
    m, s = _mul_multiplier(a, b, y)
    _lower_binary_s16(op, g, "mul_s16", {"input1_offset": 0, "input2_offset": 0, "output_multiplier": m,
                                         "output_shift": s, "output_offset": 0})


# ---- QUANTIZE / DEQUANTIZE ------------------------------------------------------------------

_Q_PAIRS = {("float32", "int16"), ("int16", "int16"), ("int16", "int8"), ("int8", "int16"),
            ("int16", "int32"), ("int32", "int16")}


def _check_quantize_s16(op: Op, g: Graph) -> str | None:
    if len(op.outputs) != 1 or not op.inputs or op.inputs[0] < 0:
        return "expects one input and one output"
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if (src.dtype, dst.dtype) not in _Q_PAIRS:
        return (f"{src.dtype} -> {dst.dtype} is not supported (float32 -> int16, int16 <-> int8, "
                "int16 -> int16, int16 <-> int32)")
    if src.size != dst.size:
        return f"input {list(src.shape)} and output {list(dst.shape)} differ in size"
    for t, what in ((src, "input"), (dst, "output")):
        if t.dtype != "float32":
            r = _per_tensor(t, what, zero=False)
            if r:
                return r
    return None if src.dtype == "float32" else check_requantize_range(src, dst)


def _fits_shifted(bound: int, shift: int) -> bool:
    """Does |x| <= bound, shifted left by a requantisation's positive exponent, fit int32?"""
    return (bound << max(shift, 0)) < (1 << 31)


@register_variant("QUANTIZE", "float32 -> int16; int16 -> int16/int8/int32; int8/int32 -> int16 (per-tensor)",
                  _is_s16, _check_quantize_s16)
def lower_quantize_s16(op: Op, g: Graph) -> None:
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    op.inputs = [op.inputs[0]]
    op.macc = src.size
    if src.dtype == "float32":
        op.kernel = "quantize_f32_s16"
        op.attrs = {"size": src.size, "scale": _scale(dst), "zero_point": _zp(dst)}
        return
    lower_requantize_int(op, g)


def _check_dequantize_s16(op: Op, g: Graph) -> str | None:
    if len(op.outputs) != 1 or not op.inputs or op.inputs[0] < 0:
        return "expects one input and one output"
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if dst.dtype != "float32" or src.size != dst.size:
        return f"{src.dtype} -> {dst.dtype} is not supported (int16 -> float32)"
    return _per_tensor(src, "input", zero=False)


@register_variant("DEQUANTIZE", "int16 -> float32 (per-tensor)", _is_s16, _check_dequantize_s16)
def lower_dequantize_s16(op: Op, g: Graph) -> None:
    src = g.tensors[op.inputs[0]]
    op.kernel = "dequantize_s16_f32"
    op.attrs = {"size": src.size, "scale": _scale(src), "zero_point": _zp(src)}
    op.inputs = [op.inputs[0]]
    op.macc = src.size


# ---- RELU / RELU6 (int16) -----------------------------------------------------------------------

def _check_unary_s16(op: Op, g: Graph) -> str | None:
    """One int16 input, one int16 output of the same shape (RELU, RELU6, LEAKY_RELU)."""
    if len(op.inputs) != 1 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return "expects one input and one output"
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if x.dtype != "int16" or y.dtype != "int16":
        return f"{x.dtype} -> {y.dtype} is not supported (int16 -> int16)"
    if x.shape != y.shape:
        return f"input {list(x.shape)} and output {list(y.shape)} shapes differ"
    return None


def _check_relu_s16(op: Op, g: Graph) -> str | None:
    r = _check_unary_s16(op, g)
    if r:
        return r
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    # TFLM's int16 RELU wants zero points 0 (activations_common.cc); RELU6 reads no zero point
    zero = op.type == "RELU"
    r = _per_tensor(x, "input", zero=zero) or _per_tensor(y, "output", zero=zero)
    if r or op.type == "RELU6":
        return r
    return check_requantize_range(x, y)


def _lower_relu_s16(op: Op, g: Graph) -> None:
    """TFLM's int16 RELU (ReluQuantized<int16_t>: requantise, clamp below at the output's zero)
    and RELU6 (Relu6Quantized<int16_t>: clamp the raw values to [zero, six] of the input's
    quantisation, no requantisation), both as requantize_s16_s16: RELU6 with the identity
    multiplier (2^30, shift 1: requant(x) == x exactly)."""
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if op.type == "RELU":
        lower_requantize_int(op, g)
        op.attrs["out_min"] = max(-32768, _zp(y) + round_half_away(f32_div(0.0, _scale(y))))
        return
    six = min(max(round_half_away(f32_div(6.0, _scale(x))) + _zp(x), -32768), 32767)
    op.inputs = [op.inputs[0]]
    op.kernel = "requantize_s16_s16"
    op.attrs = {"size": x.size, "input_offset": 0, "multiplier": 1 << 30, "shift": 1,
                "output_offset": 0, "out_min": _zp(x), "out_max": six}
    op.macc = x.size
    op.inplace = True


for _relu in ("RELU", "RELU6"):
    register_variant(_relu, "int16 -> int16 (per-tensor; RELU: zero points 0; TFLM's integer arithmetic)", _is_s16,
                     _check_relu_s16)(_lower_relu_s16)


# ---- LEAKY_RELU (int16) ----------------------------------------------------------------------

def _leaky_multipliers(x: Tensor, y: Tensor, alpha: float) -> tuple[tuple[int, int], tuple[int, int, bool]]:
    """TFLM's LeakyReluPrepare: the identity multiplier and the alpha one (with its sign apart,
    activations.leaky_relu_alpha), from float32 expressions taken to double."""
    m_id = quantize_multiplier(f32_div(_scale(x), _scale(y)))
    return m_id, leaky_relu_alpha(_scale(x), _scale(y), alpha)


def _check_leaky_relu_s16(op: Op, g: Graph) -> str | None:
    r = _check_unary_s16(op, g)
    if r:
        return r
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    r = _per_tensor(x, "input", zero=False) or _per_tensor(y, "output", zero=False)
    if r:
        return r
    alpha = float(op.options.get("alpha", 0.2))
    if not np.isfinite(alpha):
        return f"alpha {alpha} is not finite"
    for m, s, *_ in _leaky_multipliers(x, y, alpha):
        if m and not _fits_shifted(1 << 16, s):
            return "the input/output scale ratio is too large: (q - zero point) shifted left overflows int32"
    return None


@register_variant("LEAKY_RELU", "int16 -> int16 (per-tensor; TFLM's two multipliers)", _is_s16,
                  _check_leaky_relu_s16)
def lower_leaky_relu_s16(op: Op, g: Graph) -> None:
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    (mi, si), (ma, sa, negate) = _leaky_multipliers(x, y, float(op.options.get("alpha", 0.2)))
    op.inputs = [op.inputs[0]]
    op.kernel = "leaky_relu_s16"
    op.attrs = {"size": x.size, "input_offset": -_zp(x), "output_offset": _zp(y),
                "multiplier_identity": mi, "shift_identity": si, "multiplier_alpha": ma, "shift_alpha": sa,
                "negate_alpha": int(negate)}
    op.macc = x.size
    op.inplace = True


# ---- LOGISTIC / TANH --------------------------------------------------------------------------

def checked_log2(x: float) -> tuple[int, bool]:
    """TFLite's CheckedLog2 (float32): the rounded log2 and whether x is a power of two."""
    f = np.float32
    lg = f(np.log(f(x))) * f(f(1.0) / f(np.log(f(2.0))))
    r = _round(f(lg))
    return int(r), bool(abs(f(lg - r)) < f(1e-3))


def lut_act_params_s16(input_scale: float) -> tuple[int, int]:
    """(multiplier, right shift) TFLite's int16 Logistic/Tanh apply to the raw input,
    v = (x * m + round) >> s, to reach the sigmoid table's domain (scale 1/(3 * 4096));
    power-of-two scales with left shift 0 or 1 use m = 3 << shift, s = 0 (TFLite's eval)."""
    lg, pot = checked_log2(input_scale)
    left = (15 - 3) + lg
    if pot and left in (0, 1):
        return 3 << left, 0
    m = float(np.float32(input_scale)) * 4096.0 * 3.0
    shift = 0
    while m <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        m *= 2.0
    return int(m), shift


def _check_lut_act_s16(op: Op, g: Graph) -> str | None:
    io = _unary_s16(op, g)
    if isinstance(io, str):
        return io
    x, y = io
    if x.size != y.size:
        return f"input {list(x.shape)} and output {list(y.shape)} differ in size"
    lg, pot = checked_log2(_scale(y))
    if not pot or lg != -15:
        return f"int16 {op.type} output scale must be 2^-15 (TFLite's requirement), got {_scale(y):g}"
    m, _ = lut_act_params_s16(_scale(x))
    if not 0 < m <= 65535:
        return f"input scale {_scale(x):g} is out of the int16 {op.type} range"
    return None


def _lower_lut_act_s16(op: Op, g: Graph, kernel: str) -> None:
    x = g.tensors[op.inputs[0]]
    m, s = lut_act_params_s16(_scale(x))
    op.kernel = kernel
    op.attrs = {"size": x.size, "multiplier": m, "shift": s}
    op.macc = x.size
    op.inplace = True


_LUT_TEXT = "int16 -> int16 (zero points 0, output scale 2^-15; TFLite's sigmoid table)"


for _op_type, _kernel in (("LOGISTIC", "act_logistic_s16"), ("TANH", "act_tanh_s16")):
    register_variant(_op_type, _LUT_TEXT, _is_s16, _check_lut_act_s16)(partial(_lower_lut_act_s16, kernel=_kernel))


# ---- MEAN ---------------------------------------------------------------------------------------

def _mean_axes(op: Op, g: Graph) -> list[int] | str:
    a = _t(g, op, 1)
    if a is None or not a.is_const:
        return "the axis operand must be a constant"
    assert a.data is not None
    return resolve_axes([int(v) for v in np.asarray(a.data).reshape(-1)], len(g.tensors[op.inputs[0]].shape))


def _check_mean_s16(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 2 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return "expects an input, an axis operand and one output"
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    r = _all_s16([(x, "input"), (y, "output")])
    if r:
        return r
    if len(x.shape) > REDUCE_DIMS or x.size == 0:
        return f"input {list(x.shape)}: rank 1..{REDUCE_DIMS}, not empty"
    axes = _mean_axes(op, g)
    if isinstance(axes, str):
        return axes
    if not axes:
        return f"{op.type} over no axis is not supported for int16"
    keep = bool(op.options.get("keep_dims", False))
    want = [1 if d in axes else n for d, n in enumerate(x.shape)] if keep else \
        [n for d, n in enumerate(x.shape) if d not in axes]
    if int(np.prod(want, dtype=np.int64)) != y.size:
        return f"output {list(y.shape)} does not match reducing {list(x.shape)} over axes {axes}"
    count = reduce_plan(x.shape, axes).count
    if count >= 1 << 15:
        return "more than 32767 elements per output overflow the int32 sum of int16 values"
    if not _fits_shifted(count << 15, mean_multiplier(_scale(x), _scale(y), count, op.type == "MEAN")[1]):
        return "the input/output scale ratio is too large: the shifted sum overflows int32"
    return None


@register_variant("MEAN", "int16 (zero points 0); constant axes; TFLite Micro's integer mean",
                  _is_s16, _check_mean_s16)
def lower_mean_s16(op: Op, g: Graph) -> None:
    """MEAN, and SUM (the same QuantizedMeanOrSum without the division by the count)."""
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    axes = _mean_axes(op, g)
    assert not isinstance(axes, str)
    plan = reduce_plan(x.shape, axes)
    m, s = mean_multiplier(_scale(x), _scale(y), plan.count, op.type == "MEAN")
    op.kernel = "reduce_mean_s16"
    op.inputs = [op.inputs[0]]
    op.attrs = {**plan.attrs(), "bias": 0, "multiplier": m, "shift": s, "out_offset": 0,
                "act_min": -32768, "act_max": 32767}
    op.scratch = 4 * plan.out_size
    op.macc = x.size


register_variant("SUM", "int16 (zero points 0); constant axes; TFLite Micro's integer sum", _is_s16,
                 _check_mean_s16)(lower_mean_s16)
