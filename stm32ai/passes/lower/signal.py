"""TFLite Micro Signal custom ops (the micro_speech audio front end) -> ai_signal_* kernels.

CUSTOM:SignalWindow, SignalFftAutoScale, SignalRfft (int16), SignalEnergy, SignalFilterBank,
SignalFilterBankSquareRoot, SignalFilterBankSpectralSubtraction, SignalPCAN and
SignalFilterBankLog. Their parameters come from the op's flexbuffer custom options (decoded
by the frontend into ``op.options["custom"]``), the same fields TFLM's kernels read.

Everything TFLM computes once at init is computed here and passed to the kernels as
constants: the KISS FFT decomposition and twiddles (``rfft_plan``), the log correction table
(``log_lut``). The C kernels (ai_signal_basic.c, ai_signal_rfft.c) reproduce TFLM's integer
arithmetic operation by operation; outputs are bit-exact (docs/kernels_signal.md).

State. SignalFilterBankSpectralSubtraction keeps its noise estimate across invocations in
TFLM (zeroed by ``MicroInterpreter::Reset()``). Lowering gives it a persistent (variable)
uint32 tensor: the planner keeps it apart for the whole run, the model zeroes it at
``ai_create`` and ``ai_reset``, and each ``ai_run`` continues from the previous frame's
estimate, as a streaming micro_speech front end needs. ``validate`` resets both TFLM and
the C model between samples, so they agree sample by sample.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register

__all__ = ["kiss_factors", "rfft_plan", "irfft_plan", "log_lut", "signal_io", "signal_types", "MAX_FFT_STAGES",
           "PCAN_LUT_SIZE", "LOG_LUT_SIZE"]

MAX_FFT_STAGES = 16  # AI_SIGNAL_MAX_FFT_STAGES in ai_kernels_signal.h
PCAN_LUT_SIZE = 125  # TFLM indexes up to 4 * 32 - 6 + 2
LOG_LUT_SIZE = 130  # 129 segment ends + 1 padding entry, as in TFLM


# ---- generate-time tables ----------------------------------------------------------------

def kiss_factors(n: int) -> list[tuple[int, int]]:
    """KISS FFT's decomposition of an n-point complex FFT: (radix, remaining length) pairs.

    Powers of 4 first, then 2, then odd numbers from 3; once the candidate passes
    floor(sqrt(n)) of the original n, the remainder is taken as one (prime) radix."""
    out: list[tuple[int, int]] = []
    p = 4
    floor_sqrt = math.floor(math.sqrt(float(n)))
    while True:
        while n % p:
            p = 2 if p == 4 else (3 if p == 2 else p + 2)
            if p > floor_sqrt:
                p = n
        n //= p
        out.append((p, n))
        if n <= 1:
            return out


def _q15(v: float) -> int:
    return int(math.floor(0.5 + 32767.0 * v))


def rfft_plan(fft_length: int) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """(factors, twiddles, super_twiddles) of KISS FFT's int16 real FFT of fft_length points.

    twiddles: fft_length/2 complex (re, im) int16, exp(-2*pi*i*k/n) with n = fft_length/2;
    super_twiddles: n/2 complex, exp(-i*pi*((k+1)/n + 1/2)); both rounded as
    floor(0.5 + 32767 * value), the phases computed in double in KISS FFT's order."""
    n = fft_length // 2
    tw = np.zeros((n, 2), np.int16)
    for i in range(n):
        phase = -2 * math.pi * i / n
        tw[i] = (_q15(math.cos(phase)), _q15(math.sin(phase)))
    st = np.zeros((max(n // 2, 1), 2), np.int16)
    for i in range(n // 2):
        phase = -math.pi * ((i + 1) / n + 0.5)
        st[i] = (_q15(math.cos(phase)), _q15(math.sin(phase)))
    return kiss_factors(n), tw.reshape(-1), st.reshape(-1)


def log_lut() -> np.ndarray:
    """TFLM's log2 correction table: round(65536 * (log2(1 + k/128) - k/128)), k = 0..128,
    plus one padding zero."""
    v = [round((math.log2(1.0 + k / 128.0) - k / 128.0) * 65536.0) for k in range(129)]
    return np.array(v + [0], np.uint16)


# ---- helpers -----------------------------------------------------------------------------

def _custom(op: Op) -> dict[str, Any] | None:
    c = op.options.get("custom")
    return c if isinstance(c, dict) else None


def _int_opt(op: Op, key: str) -> int | None:
    c = _custom(op)
    if c is None or key not in c:
        return None
    v = c[key]
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        return None
    return int(v)


def _out_of_range(op: Op, limits: dict[str, int]) -> str | None:
    """The first integer option outside 0..limits[key] (an absent one reads as 0)."""
    for k, hi in limits.items():
        v = int(_int_opt(op, k) or 0)
        if not 0 <= v <= hi:
            return f"{k} = {v} is outside 0..{hi}"
    return None


def _missing(op: Op, keys: tuple[str, ...]) -> str | None:
    if _custom(op) is None:
        return "custom options are missing or not a flexbuffer map"
    absent = [k for k in keys if _int_opt(op, k) is None]
    if absent:
        return f"custom options lack integer field(s) {', '.join(absent)}"
    return None


def signal_io(op: Op, g: Graph, n_in: int, n_out: int) -> tuple[list[Tensor], list[Tensor]] | str:
    """The op's input and output tensors, or the reason when their count is not n_in / n_out
    (shared with passes/lower/signal_stream.py)."""
    if len(op.inputs) != n_in or len(op.outputs) != n_out or any(t < 0 for t in op.inputs):
        return f"expects {n_in} input(s) and {n_out} output(s)"
    return [g.tensors[t] for t in op.inputs], [g.tensors[t] for t in op.outputs]


def signal_types(ts: list[Tensor], want: list[str], what: list[str]) -> str | None:
    """The first tensor whose dtype is not the wanted one, named by `what`, or None."""
    for t, d, w in zip(ts, want, what, strict=True):
        if t.dtype != d:
            return f"{w} '{t.name}' is {t.dtype}, expected {d}"
    return None


def _const_of(t: Tensor, what: str) -> str | None:
    if not t.is_const:
        return f"{what} '{t.name}' is computed at run time; only constants are supported"
    return None


def _base(op: Op, g: Graph) -> str:
    return g.tensors[op.outputs[0]].name or f"op{op.index}"


# ---- SignalWindow ------------------------------------------------------------------------

def _check_window(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 2, 1)
    if isinstance(io, str):
        return io
    (x, w), (y,) = io
    r = (_missing(op, ("shift",)) or signal_types([x, w, y], ["int16"] * 3, ["input", "window", "output"])
         or _const_of(w, "window"))
    if r:
        return r
    if len(w.shape) != 1 or w.size == 0 or x.size % w.size or y.size != x.size:
        return f"input {list(x.shape)} is not a whole number of {list(w.shape)} windows"
    return _out_of_range(op, {"shift": 31})


@register("CUSTOM:SignalWindow", "int16 input and output, constant int16 window, shift 0..31", _check_window)
def lower_window(op: Op, g: Graph) -> None:
    x, w = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]]
    op.kernel = "signal_window_s16"
    op.attrs = {"size": x.size, "window_size": w.size, "shift": _int_opt(op, "shift")}
    op.macc = x.size


# ---- SignalFftAutoScale ------------------------------------------------------------------

def _check_vector_op(op: Op, g: Graph, scalar_out: bool, dtypes: list[str], scalar: str,
                     usage: str) -> str | None:
    """A 1-D op: input x, output y of x's shape, and a scalar: a second output when
    `scalar_out`, else a second input. `dtypes` are x's, y's and the scalar's types."""
    io = signal_io(op, g, 1 if scalar_out else 2, 2 if scalar_out else 1)
    if isinstance(io, str):
        return io
    ins, outs = io
    x, y, s = ins[0], outs[0], outs[1] if scalar_out else ins[1]
    r = signal_types([x, y, s], dtypes, ["input", "output", scalar])
    if r:
        return r
    if len(x.shape) != 1 or y.shape != x.shape or s.size != 1:
        return usage
    return None


def _lower_vector_op(op: Op, g: Graph, kernel: str, macc_per_element: int) -> None:
    x = g.tensors[op.inputs[0]]
    op.kernel = kernel
    op.attrs = {"size": x.size}
    op.macc = macc_per_element * x.size


register("CUSTOM:SignalFftAutoScale", "1-D int16 input; int16 output and int32 scale",
         partial(_check_vector_op, scalar_out=True, dtypes=["int16", "int16", "int32"], scalar="scale output",
                 usage="expects a 1-D int16 input, an output of the same shape and a scalar int32 scale"))(
    partial(_lower_vector_op, kernel="signal_fft_auto_scale_s16", macc_per_element=2))


# ---- SignalRfft --------------------------------------------------------------------------

_TFL_INT16 = 7
_FFT_TYPES = {7: "int16", 2: "int32", 0: "float32"}  # TFLite TensorType codes the FFTs take as T


def _check_fft_io(op: Op, g: Graph, what: str) -> tuple[Tensor, Tensor, int] | str:
    """The checks SignalRfft and SignalIrfft share: one input and one output of the type `T`
    names, an even fft_length >= 4. (input, output, fft_length) or the reason."""
    io = signal_io(op, g, 1, 1)
    if isinstance(io, str):
        return io
    (x,), (y,) = io
    r = _missing(op, ("T", "fft_length"))
    if r:
        return r
    t = _int_opt(op, "T")
    want = _FFT_TYPES.get(t) if t is not None else None
    if want is None:
        return f"T = {t}: the {what} is int16 (7), int32 (2) or float32 (0)"
    r = signal_types([x, y], [want, want], ["input", "output"])
    if r:
        return r
    n = int(_int_opt(op, "fft_length") or 0)
    if n < 4 or n % 2:
        return f"fft_length {n} must be even and at least 4"
    return x, y, n


def _check_fft_factors(n: int, note: str = "") -> str | None:
    """fft_length / 2 must factor into KISS FFT's radices 2..5, in at most MAX_FFT_STAGES stages."""
    factors = kiss_factors(n // 2)
    odd = sorted({p for p, _ in factors if p > 5})
    if odd:
        return (f"fft_length {n} needs KISS FFT's generic radix {odd[0]} (fft_length / 2 must factor "
                f"into 2, 3, 4 and 5{note})")
    if len(factors) > MAX_FFT_STAGES:
        return f"fft_length {n} needs {len(factors)} FFT stages, at most {MAX_FFT_STAGES} supported"
    return None


def _check_rfft(op: Op, g: Graph) -> str | None:
    io = _check_fft_io(op, g, "FFT")
    if isinstance(io, str):
        return io
    x, y, n = io
    if not x.shape or not y.shape or len(x.shape) != len(y.shape):
        return "input and output must have the same rank (>= 1)"
    in_len = x.shape[-1]
    if in_len < 1 or in_len > n:
        return f"frame length {in_len} is not in 1..fft_length ({n})"
    if y.shape[-1] != 2 * (n // 2 + 1) or y.size // y.shape[-1] != x.size // in_len:
        return (f"output {list(y.shape)} does not hold {x.size // in_len} frames of "
                f"{n // 2 + 1} complex values")
    return _check_fft_factors(n, "; TFLite Micro itself crashes on the generic radix")


def rfft_scratch_bytes(fft_length: int) -> int:
    """The zero-padded frame (fft_length int16) and the complex sub-FFT (fft_length / 2 complex)."""
    return 2 * fft_length + 4 * (fft_length // 2)


@register("CUSTOM:SignalRfft", "int16 / int32 (KISS fixed point) or float32; fft_length = 2 * (product "
          "of 2, 3, 4, 5) >= 4; frames zero-padded", _check_rfft)
def lower_rfft(op: Op, g: Graph) -> None:
    x = g.tensors[op.inputs[0]]
    n = int(_int_opt(op, "fft_length") or 0)
    in_len = x.shape[-1]
    batches = x.size // in_len
    factors, tw, st = rfft_plan(n) if x.dtype == "int16" else irfft_plan(n, x.dtype, inverse=False)
    base = _base(op, g)
    tw_id = g.add_const(f"{base}/twiddles", tw)
    st_id = g.add_const(f"{base}/super_twiddles", st)
    flat = [v for pm in factors for v in pm]
    op.kernel = {"int16": "signal_rfft_s16", "int32": "signal_rfft_s32"}.get(x.dtype, "signal_rfft_f32")
    op.inputs = [op.inputs[0], tw_id, st_id]
    op.attrs = {"batches": batches, "input_length": in_len, "fft_length": n, "n_stages": len(factors),
                "factors": flat}
    op.scratch = rfft_scratch_bytes(n) * (1 if x.dtype == "int16" else 2)
    op.macc = batches * (n // 2) * (sum(p for p, _ in factors) + 2)


# ---- SignalEnergy ------------------------------------------------------------------------

def _check_energy(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 1, 1)
    if isinstance(io, str):
        return io
    (x,), (y,) = io
    r = _missing(op, ("start_index", "end_index")) or signal_types([x, y], ["int16", "uint32"], ["input", "output"])
    if r:
        return r
    if len(x.shape) != 1 or len(y.shape) != 1 or x.size != 2 * y.size:
        return f"expects a 1-D complex int16 input of 2 * {y.size} values and a 1-D output"
    s, e = _int_opt(op, "start_index"), _int_opt(op, "end_index")
    assert s is not None and e is not None
    if not 0 <= s <= e <= y.size:
        return f"index range [{s}, {e}) is outside the {y.size} bins"
    return None


@register("CUSTOM:SignalEnergy", "1-D complex int16 -> uint32; 0 <= start_index <= end_index <= bins",
          _check_energy)
def lower_energy(op: Op, g: Graph) -> None:
    y = g.tensors[op.outputs[0]]
    s, e = _int_opt(op, "start_index"), _int_opt(op, "end_index")
    op.kernel = "signal_energy_s16"
    op.attrs = {"size": y.size, "start_index": s, "end_index": e}
    op.macc = 2 * (int(e or 0) - int(s or 0))


# ---- SignalFilterBank --------------------------------------------------------------------

def _check_filter_bank(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 6, 1)
    if isinstance(io, str):
        return io
    (x, w, uw, fs, ws, wd), (y,) = io
    names = ["weights", "unweights", "channel frequency starts", "channel weight starts", "channel widths"]
    r = (_missing(op, ("num_channels",)) or signal_types([x, y], ["uint32", "uint64"], ["input", "output"])
         or signal_types([w, uw, fs, ws, wd], ["int16"] * 5, names))
    if r:
        return r
    for t, what in zip((w, uw, fs, ws, wd), names, strict=True):
        r = _const_of(t, what)
        if r:
            return r
    nc = _int_opt(op, "num_channels")
    assert nc is not None
    if nc < 1 or y.size != nc or len(y.shape) != 1:
        return f"output {list(y.shape)} does not hold num_channels = {nc} values"
    if min(fs.size, ws.size, wd.size) < nc + 1:
        return f"channel tables need num_channels + 1 = {nc + 1} entries"
    if uw.size != w.size:
        return "weights and unweights differ in size"
    f0, w0, n0 = (np.asarray(t.data, np.int64).reshape(-1)[:nc + 1] for t in (fs, ws, wd))
    if np.any(f0 < 0) or np.any(w0 < 0) or np.any(n0 < 0):
        return "negative channel start or width"
    if np.any(f0 + n0 > x.size) or np.any(w0 + n0 > w.size):
        return "a channel reads past the end of the spectrum or of the weights"
    return None


@register("CUSTOM:SignalFilterBank", "uint32 -> uint64; constant int16 weights and channel tables",
          _check_filter_bank)
def lower_filter_bank(op: Op, g: Graph) -> None:
    nc = int(_int_opt(op, "num_channels") or 0)
    wd = g.tensors[op.inputs[5]]
    op.kernel = "signal_filter_bank_u32"
    op.attrs = {"num_channels": nc}
    op.macc = 2 * int(np.asarray(wd.data, np.int64).reshape(-1)[:nc + 1].sum())


# ---- SignalFilterBankSquareRoot ----------------------------------------------------------

register("CUSTOM:SignalFilterBankSquareRoot", "1-D uint64 -> uint32, int32 scalar shift",
         partial(_check_vector_op, scalar_out=False, dtypes=["uint64", "uint32", "int32"], scalar="scale bits",
                 usage="expects a 1-D uint64 input, a scalar int32 shift and a 1-D uint32 output"))(
    partial(_lower_vector_op, kernel="signal_filter_bank_sqrt_u64", macc_per_element=32))


# ---- SignalFilterBankSpectralSubtraction -------------------------------------------------

_SS_KEYS = ("num_channels", "smoothing", "one_minus_smoothing", "alternate_smoothing",
            "alternate_one_minus_smoothing", "smoothing_bits", "spectral_subtraction_bits",
            "min_signal_remaining")


def _check_spectral_subtraction(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 1, 2)
    if isinstance(io, str):
        return io
    (x,), (y, ne) = io
    r = _missing(op, _SS_KEYS) or signal_types([x, y, ne], ["uint32"] * 3, ["input", "output", "noise estimate"])
    if r:
        return r
    c = _custom(op)
    assert c is not None
    if not isinstance(c.get("clamping", False), (bool, int, np.integer)):
        return "custom option 'clamping' is not a boolean"
    nc = int(_int_opt(op, "num_channels") or 0)
    if nc < 1 or not (x.size == y.size == ne.size == nc) or len(x.shape) != 1:
        return f"input, output and noise estimate must be 1-D with num_channels = {nc} values"
    return _out_of_range(op, {"smoothing_bits": 31, "spectral_subtraction_bits": 31}
                         | {k: 0xFFFFFFFF for k in _SS_KEYS[1:5] + ("min_signal_remaining",)})


@register("CUSTOM:SignalFilterBankSpectralSubtraction",
          "uint32; the noise estimate persists from run to run (zeroed by ai_create/ai_reset)",
          _check_spectral_subtraction)
def lower_spectral_subtraction(op: Op, g: Graph) -> None:
    c = _custom(op) or {}
    nc = int(_int_opt(op, "num_channels") or 0)
    state = g.add_tensor(f"{_base(op, g)}/noise_state", (nc,), "uint32")
    g.tensors[state].variable = True
    op.kernel = "signal_spectral_subtraction_u32"
    op.inputs = [op.inputs[0], state]
    op.attrs = {k: int(_int_opt(op, k) or 0) for k in _SS_KEYS}
    op.attrs["clamping"] = 1 if c.get("clamping") else 0
    op.attrs["reset_state"] = 0
    op.macc = 4 * nc


# ---- SignalPCAN --------------------------------------------------------------------------

def _check_pcan(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 3, 1)
    if isinstance(io, str):
        return io
    (x, ne, lut), (y,) = io
    r = (_missing(op, ("snr_shift",))
         or signal_types([x, ne, lut, y], ["uint32", "uint32", "int16", "uint32"],
                   ["input", "noise estimate", "gain table", "output"])
         or _const_of(lut, "gain table"))
    if r:
        return r
    if len(x.shape) != 1 or x.size < 1 or ne.size != x.size or y.size != x.size:
        return "input, noise estimate and output must be 1-D with the same number of channels"
    if lut.size < PCAN_LUT_SIZE:
        return f"gain table has {lut.size} entries, TFLM reads up to {PCAN_LUT_SIZE}"
    return _out_of_range(op, {"snr_shift": 63})


@register("CUSTOM:SignalPCAN", "uint32 channels and noise estimate, constant int16 gain table", _check_pcan)
def lower_pcan(op: Op, g: Graph) -> None:
    x = g.tensors[op.inputs[0]]
    op.kernel = "signal_pcan_u32"
    op.attrs = {"num_channels": x.size, "snr_shift": int(_int_opt(op, "snr_shift") or 0)}
    op.macc = 6 * x.size


# ---- SignalFilterBankLog -----------------------------------------------------------------

def _check_log(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 1, 1)
    if isinstance(io, str):
        return io
    (x,), (y,) = io
    r = (_missing(op, ("input_correction_bits", "output_scale"))
         or signal_types([x, y], ["uint32", "int16"], ["input", "output"]))
    if r:
        return r
    if len(x.shape) != 1 or y.shape != x.shape:
        return "expects a 1-D uint32 input and an int16 output of the same shape"
    return _out_of_range(op, {"input_correction_bits": 31, "output_scale": 0xFFFFFFFF})


@register("CUSTOM:SignalFilterBankLog", "1-D uint32 -> int16", _check_log)
def lower_log(op: Op, g: Graph) -> None:
    x = g.tensors[op.inputs[0]]
    lut_id = g.add_const(f"{_base(op, g)}/log_lut", log_lut())
    op.kernel = "signal_filter_bank_log_u32"
    op.inputs = [op.inputs[0], lut_id]
    op.attrs = {"num_channels": x.size,
                "input_correction_bits": int(_int_opt(op, "input_correction_bits") or 0),
                "output_scale": int(_int_opt(op, "output_scale") or 0)}
    op.macc = 8 * x.size


# ---- SignalIrfft -------------------------------------------------------------------------



def irfft_plan(fft_length: int, dtype: str, inverse: bool = True) -> tuple[list[tuple[int, int]], np.ndarray,
                                                                          np.ndarray]:
    """(factors, twiddles, super_twiddles) of KISS FFT's real FFT (kiss_fftr_alloc), inverse by
    default (inverse_fft = 1: the forward phases negated, the doubles KISS FFT computes * -1);
    int16 / int32 rounded as floor(0.5 + SAMP_MAX * v) (SAMP_MAX 32767 / 2147483647), float32
    as (float)cos / (float)sin."""
    n = fft_length // 2
    sign = -1.0 if inverse else 1.0
    ph_tw = [sign * (-2 * math.pi * i / n) for i in range(n)]
    ph_st = [sign * (-math.pi * ((i + 1) / n + 0.5)) for i in range(n // 2)]
    if dtype in ("int16", "int32"):
        top = 32767.0 if dtype == "int16" else 2147483647.0

        def conv(ph: list[float]) -> np.ndarray:
            return np.array([(math.floor(0.5 + top * math.cos(p)), math.floor(0.5 + top * math.sin(p)))
                             for p in ph], dtype).reshape(-1)
    else:
        def conv(ph: list[float]) -> np.ndarray:
            return np.array([(math.cos(p), math.sin(p)) for p in ph], np.float64).astype(np.float32).reshape(-1)
    st = conv(ph_st) if ph_st else np.zeros(2, dtype)
    return kiss_factors(n), conv(ph_tw), st


def _check_irfft(op: Op, g: Graph) -> str | None:
    io = _check_fft_io(op, g, "inverse FFT")
    if isinstance(io, str):
        return io
    x, y, n = io
    if not x.shape or len(x.shape) != len(y.shape):
        return "input and output must have the same rank (>= 1)"
    if x.shape[-1] != 2 * (n // 2 + 1) or y.shape[-1] != n or x.size // x.shape[-1] != y.size // n:
        return (f"expects frames of {n // 2 + 1} complex bins in ([..., {2 * (n // 2 + 1)}]) and "
                f"of {n} samples out ([..., {n}]), as many of each")
    return _check_fft_factors(n)


@register("CUSTOM:SignalIrfft", "int16 / int32 (KISS fixed point) or float32 (/ fft_length); "
          "fft_length = 2 * (product of 2, 3, 4, 5) >= 4", _check_irfft)
def lower_irfft(op: Op, g: Graph) -> None:
    x = g.tensors[op.inputs[0]]
    n = int(_int_opt(op, "fft_length") or 0)
    factors, tw, st = irfft_plan(n, x.dtype)
    base = _base(op, g)
    tw_id = g.add_const(f"{base}/twiddles", tw)
    st_id = g.add_const(f"{base}/super_twiddles", st)
    batches = x.size // x.shape[-1]
    op.kernel = {"int16": "signal_irfft_s16", "int32": "signal_irfft_s32"}.get(x.dtype, "signal_irfft_f32")
    op.inputs = [op.inputs[0], tw_id, st_id]
    op.attrs = {"batches": batches, "fft_length": n, "n_stages": len(factors),
                "factors": [v for pm in factors for v in pm]}
    op.scratch = (n // 2) * 2 * (2 if x.dtype == "int16" else 4)  # n/2 complex values
    op.macc = batches * (n // 2) * (sum(p for p, _ in factors) + 2)
