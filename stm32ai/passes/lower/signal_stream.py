"""TFLite Micro's streaming signal ops -> ai_signal_stream.c (docs/kernels_signal_stream.md).

CUSTOM:SignalDelay, SignalFramer, SignalStacker, SignalOverlapAdd: each keeps samples from one
invocation to the next in TFLM (circular buffers or an overlap buffer, refilled by
``MicroInterpreter::Reset()``). Lowering gives each op its state as persistent (variable)
tensors, zeroed by ai_create/ai_reset, that the kernel reads and rewrites in place:

* Delay [in, line] -> [out]: the last `delay_length` samples of each row (zeros at reset);
* Framer [in, fill, buf] -> [out, valid]: the samples not yet framed (`fill` counts them
  beyond the `frame_size - frame_step` zeros of `prefill`);
* Stacker [in, fill, buf] -> [out, valid]: the frames not yet stacked (`fill` holds the count
  and whether the first frame, replicated `stacker_left_context` times, arrived);
* OverlapAdd [in, acc] -> [out]: the `frame_size` partial sums of each row.

A circular buffer's observable behaviour is a FIFO: the kernels keep each one as a linear FIFO
(oldest sample first) and shift it, which gives TFLM's outputs bit for bit. Where TFLM leaves
an invalid frame's output untouched (Framer/Stacker with `valid` false) the kernels write zeros.
Options are read by name from the flexbuffer map, as for the other signal ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.signal import signal_io, signal_types

MAX_SAMPLES = 1 << 24  # bound on any buffer length (int32 index arithmetic stays exact)
_TENSOR_TYPE = {0: "float32", 7: "int16"}  # TFLite TensorType codes OverlapAdd's 'T' may hold


def _opts(op: Op) -> dict[str, Any] | None:
    c = op.options.get("custom")
    return c if isinstance(c, dict) else None


def _ints(op: Op, keys: tuple[str, ...]) -> dict[str, int] | str:
    c = _opts(op)
    if c is None:
        return "custom options are missing or not a flexbuffer map"
    out: dict[str, int] = {}
    for k in keys:
        v = c.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            return f"custom options lack integer field {k}"
        if not 0 <= int(v) <= MAX_SAMPLES:
            return f"{k} = {int(v)} is outside 0..{MAX_SAMPLES}"
        out[k] = int(v)
    return out


def _state(op: Op, g: Graph, what: str, shape: tuple[int, ...], dtype: str) -> int:
    base = g.tensors[op.outputs[0]].name or f"op{op.index}"
    tid = g.add_tensor(f"{base}/{what}", shape, dtype)
    g.tensors[tid].variable = True
    return tid


def _rows(x: Tensor) -> tuple[int, int]:
    """(outer rows, innermost length) of a tensor of rank >= 1."""
    inner = x.shape[-1]
    return (x.size // inner if inner else 0), inner


# ---- SignalDelay ---------------------------------------------------------------------------

def _check_delay(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 1, 1)
    if isinstance(io, str):
        return io
    (x,), (y,) = io
    o = _ints(op, ("delay_length",))
    if isinstance(o, str):
        return o
    r = signal_types([x, y], ["int16", "int16"], ["input", "output"])
    if r:
        return r
    if not x.shape or x.shape[-1] < 1 or y.size != x.size:
        return "expects an int16 input of rank >= 1 and an output of the same size"
    if _rows(x)[0] * o["delay_length"] > MAX_SAMPLES:
        return f"the delay line holds more than {MAX_SAMPLES} samples"
    return None


@register("CUSTOM:SignalDelay", "int16; the delay line persists from run to run (zeroed by "
          "ai_create/ai_reset)", _check_delay)
def _lower_delay(op: Op, g: Graph) -> None:
    x = g.tensors[op.inputs[0]]
    rows, frame = _rows(x)
    delay = int(_opts(op)["delay_length"])  # type: ignore[index]
    op.kernel = "signal_delay_s16"
    op.inputs = [op.inputs[0]] + ([_state(op, g, "delay_line", (rows * delay,), "int16")] if delay else [-1])
    op.attrs = {"rows": rows, "frame_size": frame, "delay_length": delay}


# ---- SignalFramer --------------------------------------------------------------------------

def _check_framer(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 1, 2)
    if isinstance(io, str):
        return io
    (x,), (y, v) = io
    o = _ints(op, ("frame_size", "frame_step"))
    if isinstance(o, str):
        return o
    if not isinstance((_opts(op) or {}).get("prefill", False), (bool, int, np.integer)):
        return "custom option 'prefill' is not a boolean"
    r = signal_types([x, y, v], ["int16", "int16", "bool"], ["input", "output", "valid"])
    if r:
        return r
    size, step = o["frame_size"], o["frame_step"]
    if not 1 <= step <= size:
        return f"needs 1 <= frame_step ({step}) <= frame_size ({size})"
    if not x.shape or x.shape[-1] < step or x.shape[-1] % step:
        return f"the input's last dimension is not a positive multiple of frame_step {step}"
    rows, inner = _rows(x)
    n_frames = inner // step
    if y.shape != (*x.shape[:-1], n_frames, size) or v.size != 1 or len(v.shape) != 0:
        return (f"expects an output {[*x.shape[:-1], n_frames, size]} and a scalar bool valid "
                f"(got {list(y.shape)} and {list(v.shape)})")
    if rows * (size + step) > MAX_SAMPLES:
        return f"the framer buffers hold more than {MAX_SAMPLES} samples"
    return None


@register("CUSTOM:SignalFramer", "int16, frame_step <= frame_size; the samples not yet framed "
          "persist from run to run (reset by ai_create/ai_reset)", _check_framer)
def _lower_framer(op: Op, g: Graph) -> None:
    x = g.tensors[op.inputs[0]]
    c = _opts(op) or {}
    size, step = int(c["frame_size"]), int(c["frame_step"])
    rows, inner = _rows(x)
    cap = -(-size // step) * step  # TFLM's capacity: frame_size rounded up to whole steps
    op.kernel = "signal_framer_s16"
    op.inputs = [op.inputs[0], _state(op, g, "fill", (1,), "int32"),
                 _state(op, g, "buffer", (rows * cap,), "int16")]
    op.attrs = {"rows": rows, "n_frames": inner // step, "frame_size": size, "frame_step": step,
                "capacity": cap, "prefill": size - step if c.get("prefill") else 0}


# ---- SignalStacker -------------------------------------------------------------------------

_STACKER_KEYS = ("num_channels", "stacker_left_context", "stacker_right_context", "stacker_step")


def _check_stacker(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 1, 2)
    if isinstance(io, str):
        return io
    (x,), (y, v) = io
    o = _ints(op, _STACKER_KEYS)
    if isinstance(o, str):
        return o
    r = signal_types([x, y, v], ["int16", "int16", "bool"], ["input", "output", "valid"])
    if r:
        return r
    ch, left, right, step = (o[k] for k in _STACKER_KEYS)
    frames = left + right + 1
    if ch < 1 or not 1 <= step <= frames:
        return (f"needs num_channels >= 1 and 1 <= stacker_step ({step}) <= left + right + 1 "
                f"({frames})")
    if ch * frames > MAX_SAMPLES:
        return f"the stacker buffer holds more than {MAX_SAMPLES} samples"
    if len(x.shape) != 1 or x.size < ch:
        return f"expects a 1-D input of at least num_channels = {ch} values"
    if len(y.shape) != 1 or y.size != ch * frames or v.size != 1 or len(v.shape) != 0:
        return f"expects a 1-D output of {ch * frames} values and a scalar bool valid"
    return None


@register("CUSTOM:SignalStacker", "int16; the frames not yet stacked persist from run to run "
          "(reset by ai_create/ai_reset)", _check_stacker)
def _lower_stacker(op: Op, g: Graph) -> None:
    c = _opts(op) or {}
    ch, left, right, step = (int(c[k]) for k in _STACKER_KEYS)
    size = ch * (left + right + 1)
    op.kernel = "signal_stacker_s16"
    op.inputs = [op.inputs[0], _state(op, g, "fill", (2,), "int32"),
                 _state(op, g, "buffer", (size,), "int16")]
    op.attrs = {"num_channels": ch, "left_context": left, "buffer_size": size, "step_size": ch * step}


# ---- SignalOverlapAdd ----------------------------------------------------------------------

def _check_overlap_add(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 1, 1)
    if isinstance(io, str):
        return io
    (x,), (y,) = io
    o = _ints(op, ("T", "frame_step"))
    if isinstance(o, str):
        return o
    dtype = _TENSOR_TYPE.get(o["T"])
    if dtype is None:
        return f"custom option T = {o['T']} is neither float32 (0) nor int16 (7)"
    r = signal_types([x, y], [dtype, dtype], ["input", "output"])
    if r:
        return r
    if len(x.shape) < 2:
        return "expects an input [..., frames, frame_size]"
    n_frames, size, step = x.shape[-2], x.shape[-1], o["frame_step"]
    if not 1 <= step <= size:
        return f"needs 1 <= frame_step ({step}) <= frame_size ({size})"
    if y.shape != (*x.shape[:-2], n_frames * step):
        return f"expects an output {[*x.shape[:-2], n_frames * step]}, got {list(y.shape)}"
    return None


@register("CUSTOM:SignalOverlapAdd", "int16 (saturating) or float32; the partial sums persist "
          "from run to run (zeroed by ai_create/ai_reset)", _check_overlap_add)
def _lower_overlap_add(op: Op, g: Graph) -> None:
    x = g.tensors[op.inputs[0]]
    n_frames, size = x.shape[-2], x.shape[-1]
    rows = x.size // (n_frames * size) if n_frames * size else 0
    op.kernel = "signal_overlap_add_s16" if x.dtype == "int16" else "signal_overlap_add_f32"
    op.inputs = [op.inputs[0], _state(op, g, "sums", (rows * size,), x.dtype)]
    op.attrs = {"rows": rows, "n_frames": n_frames, "frame_size": size,
                "frame_step": int((_opts(op) or {})["frame_step"])}
    op.macc = x.size


# ---- CIRCULAR_BUFFER (TFLM's streaming-convolution custom op) --------------------------------

def _check_circular_buffer(op: Op, g: Graph) -> str | None:
    io = signal_io(op, g, 1, 1)
    if isinstance(io, str):
        return io
    (x,), (y,) = io
    c = _opts(op)
    cycles = c.get("cycles_max") if c is not None else None
    if isinstance(cycles, bool) or not isinstance(cycles, (int, np.integer)) or int(cycles) != 1:
        return (f"cycles_max = {cycles!r}: only 1 is supported (with another period, or none, TFLM "
                "ends the invoke early on skipped cycles with kTfLiteAbort, which ai_run cannot express)")
    r = signal_types([x, y], ["int8", "int8"], ["input", "output"])
    if r:
        return r
    if (len(x.shape) != 4 or len(y.shape) != 4 or x.shape[0] != 1 or y.shape[0] != 1 or x.shape[1] != 1
            or x.shape[2:] != y.shape[2:]):
        return f"expects an input [1, 1, h, d] and an output [1, slots, h, d] (got {list(x.shape)}, {list(y.shape)})"
    return None


@register("CUSTOM:CIRCULAR_BUFFER", "int8 [1,1,h,d] -> [1,slots,h,d], cycles_max 1; the slots persist "
          "from run to run (zeroed by ai_create/ai_reset)", _check_circular_buffer)
def _lower_circular_buffer(op: Op, g: Graph) -> None:
    y = g.tensors[op.outputs[0]]
    op.kernel = "circular_buffer_s8"
    op.inputs = [op.inputs[0], _state(op, g, "slots", (y.size,), "int8")]
    op.attrs = {"num_slots": y.shape[1], "depth": y.shape[2] * y.shape[3]}
