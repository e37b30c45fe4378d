"""Structural verifier of the graph IR (docs/verifier.md).

A .tflite file is untrusted input. The frontend only guarantees that the flatbuffer could
be walked; this pass checks that what it describes is a graph the later stages and the C
runtime can handle without overflowing, reading out of bounds or dividing by zero, and
refuses anything else with one line naming the tensor or op and what to do (exit 2).

`verify_graph` runs right after the frontend (and, when STM32AI_VERIFY_PASSES=1, after
every pass, as the test suite does). `verify_kernel_bounds` runs after lowering: it checks
the integer ranges the C kernels rely on (requantisation shifts, int32 accumulators),
computed in Python from the parameters lowering derived.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

import numpy as np

from stm32ai.errors import Stm32aiError
from stm32ai.ir import DTYPE_SIZES, Graph, Op, Tensor
from stm32ai.sanitize import quote

__all__ = ["ModelVerifyError", "accumulator_bound", "verify_accumulators", "verify_graph", "verify_kernel_bounds",
           "verify_each_pass", "verify_memory"]

# The runtime's sizes and offsets are uint32/int32; element indices are int32 in kernels.
MAX_BYTES = (1 << 31) - 1
MAX_RANK = 8
INT32_LIMIT = 1 << 31
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

_FIX = "the model is malformed; re-export it from the original framework"

_INT_RANGES = {
    "int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
    "int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1), "uint64": (0, (1 << 64) - 1), "bool": (0, 1),
}

_ACTIVATIONS = {"NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH", "SIGN_BIT"}
_PADDINGS = {"SAME", "VALID"}

# Ops whose options table TFLite needs: a missing table leaves TFLite with a zeroed params
# struct (stride 0, filter 0...), which no kernel can run. Keys: fields that must be present.
_REQUIRED_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "CONV_2D": ("Conv2DOptions", ("padding", "stride_w", "stride_h", "dilation_w_factor",
                                  "dilation_h_factor")),
    "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", ("padding", "stride_w", "stride_h",
                                                     "depth_multiplier", "dilation_w_factor",
                                                     "dilation_h_factor")),
    "TRANSPOSE_CONV": ("TransposeConvOptions", ("padding", "stride_w", "stride_h")),
    "AVERAGE_POOL_2D": ("Pool2DOptions", ("padding", "stride_w", "stride_h", "filter_width",
                                          "filter_height")),
    "MAX_POOL_2D": ("Pool2DOptions", ("padding", "stride_w", "stride_h", "filter_width",
                                      "filter_height")),
    "DEPTH_TO_SPACE": ("DepthToSpaceOptions", ("block_size",)),
    "SPACE_TO_DEPTH": ("SpaceToDepthOptions", ("block_size",)),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ("UnidirectionalSequenceLSTMOptions",
                                     ("fused_activation_function", "time_major")),
}


class ModelVerifyError(Stm32aiError):
    """The model breaks a structural rule of the IR: exit 2 with one line."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _err(msg: str) -> ModelVerifyError:
    return ModelVerifyError(_one_line(msg))


def _tname(t: Tensor) -> str:
    name = t.name if len(t.name) <= 60 else t.name[:57] + "..."
    return f"tensor #{t.id} '{name}'"


# ---- tensors ----------------------------------------------------------------------------

def _check_shape(t: Tensor, allow_unknown: bool) -> None:
    if len(t.shape) > MAX_RANK:
        raise _err(f"{_tname(t)} has rank {len(t.shape)}; at most {MAX_RANK} dimensions are "
                   f"supported — {_FIX}")
    lo = -1 if allow_unknown and not t.is_const else 0
    for d in t.shape:
        if d < lo:
            raise _err(f"{_tname(t)} has a negative dimension in shape {list(t.shape)} — {_FIX}")
    if t.dtype not in DTYPE_SIZES:
        raise _err(f"{_tname(t)} has unknown type {t.dtype} — {_FIX}")
    count = math.prod(max(d, 1) for d in t.shape)  # Python ints: no int64 wrap-around
    nbytes = count * DTYPE_SIZES[t.dtype]
    if nbytes > MAX_BYTES:
        raise _err(f"{_tname(t)} {t.dtype}{list(t.shape)} needs {nbytes:,} bytes, more than the "
                   f"runtime's 32-bit sizes allow ({MAX_BYTES:,}) — reduce the model's tensor sizes")


def _check_data(t: Tensor) -> None:
    if t.data is None:
        return
    if tuple(t.data.shape) != tuple(t.shape) or t.data.dtype.name != t.dtype:
        raise _err(f"constant {_tname(t)} holds {t.data.dtype.name}{list(t.data.shape)} data but "
                   f"is declared {t.dtype}{list(t.shape)} — {_FIX}")


def _check_quant(t: Tensor) -> None:
    q = t.quant
    if q is None:
        return
    scale = np.asarray(q.scale, np.float64).ravel()
    zp = np.asarray(q.zero_point).ravel()
    if scale.size == 0:
        raise _err(f"{_tname(t)} has quantisation parameters without scales — {_FIX}")
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        bad = next(float(s) for s in scale if not (math.isfinite(s) and s > 0))
        raise _err(f"{_tname(t)} has quantisation scale {bad}; scales must be finite and > 0 — {_FIX}")
    # float32 scale as stored, then used in float32 arithmetic by kernels: must not be subnormal
    if np.any(scale < np.finfo(np.float32).tiny) or np.any(scale > 1e30):
        bad = next(float(s) for s in scale if s < np.finfo(np.float32).tiny or s > 1e30)
        raise _err(f"{_tname(t)} has quantisation scale {bad:g}, outside the range "
                   f"[{np.finfo(np.float32).tiny:g}, 1e30] the integer kernels can represent — {_FIX}")
    if zp.size != scale.size:
        raise _err(f"{_tname(t)} has {scale.size} quantisation scales but {zp.size} zero points — {_FIX}")
    rng = _INT_RANGES.get(t.dtype)
    if rng is not None and (int(zp.min()) < rng[0] or int(zp.max()) > rng[1]):
        bad = next(int(z) for z in zp if not rng[0] <= int(z) <= rng[1])
        raise _err(f"{_tname(t)} has zero point {bad}, outside the {t.dtype} range "
                   f"[{rng[0]}, {rng[1]}] — {_FIX}")
    if scale.size > 1:
        if not 0 <= q.axis < len(t.shape):
            raise _err(f"{_tname(t)} is quantised per channel along dimension {q.axis}, but its "
                       f"shape {list(t.shape)} has no such dimension — {_FIX}")
        if t.shape[q.axis] != scale.size:
            raise _err(f"{_tname(t)} has {scale.size} per-channel scales but dimension {q.axis} of "
                       f"its shape {list(t.shape)} is {t.shape[q.axis]} — {_FIX}")


# ---- graph structure ----------------------------------------------------------------------

def _check_index(tid: int, n: int, what: str, allow_omitted: bool) -> None:
    lo = -1 if allow_omitted else 0
    if not lo <= tid < n:
        raise _err(f"{what} refers to tensor {tid}, but the graph has {n} tensors — {_FIX}")


def _check_io(g: Graph) -> None:
    if not g.inputs:
        raise _err("the model has no inputs: the application could not feed it — export the "
                   "model with at least one input tensor")
    if not g.outputs:
        raise _err("the model has no outputs: nothing it computes could be read — export the "
                   "model with at least one output tensor")
    # ai_model_info holds uint8 n_inputs/n_outputs and a uint16 n_nodes
    if len(g.inputs) > 255 or len(g.outputs) > 255 or len(g.ops) > 65535:
        raise _err(f"the model has {len(g.inputs)} inputs, {len(g.outputs)} outputs and "
                   f"{len(g.ops)} operators; at most 255, 255 and 65535 are supported — split the model")
    n = len(g.tensors)
    for tid in g.inputs:
        _check_index(tid, n, "a graph input", False)
    for tid in g.outputs:
        _check_index(tid, n, "a graph output", False)
    if len(set(g.inputs)) != len(g.inputs):  # (one output listed twice is read twice: fine)
        raise _err("the model lists the same tensor twice among its inputs — " + _FIX)
    for tid in g.inputs:
        t = g.tensors[tid]
        if t.is_const:
            raise _err(f"graph input {_tname(t)} carries constant data; an input must be "
                       f"written by the application — {_FIX}")
        if t.variable:
            raise _err(f"graph input {_tname(t)} is a variable (state) tensor — {_FIX}")
    # A constant output (SSD priors), an input passed through and one tensor at two output
    # positions are legal TFLite: passes/output_copies.py gives each its own output buffer.
    for tid in g.outputs:
        t = g.tensors[tid]
        if t.variable and not t.is_const:
            raise _err(f"graph output {_tname(t)} is a variable (state) tensor — {_FIX}")


def _check_dataflow(g: Graph) -> None:
    """Every op input is a graph input, a constant, a state or produced by an earlier op."""
    n = len(g.tensors)
    available = set(g.inputs)
    available.update(t.id for t in g.tensors if t.is_const or t.variable)
    produced: set[int] = set()
    for op in g.ops:
        for tid in op.inputs:
            _check_index(tid, n, f"{op.where} input", True)
        if not op.outputs and not any(t >= 0 and t < n and g.tensors[t].variable for t in op.inputs):
            # (an op without outputs must write state: ASSIGN_VARIABLE, CALL_ONCE)
            raise _err(f"{op.where} has no outputs — {_FIX}")
        for tid in op.outputs:
            _check_index(tid, n, f"{op.where} output", False)
        for tid in op.inputs:
            if tid >= 0 and tid not in available:
                raise _err(f"{op.where} reads {_tname(g.tensors[tid])} before any op produces it "
                           f"(and it is neither a graph input nor a constant) — {_FIX}")
        for tid in op.outputs:
            t = g.tensors[tid]
            if tid in produced or tid in g.inputs:
                raise _err(f"{_tname(t)} is written by {op.where} but is already a graph input "
                           f"or the output of an earlier op — {_FIX}")
            if t.is_const:
                raise _err(f"{_tname(t)} is computed by {op.where} but also carries constant "
                           f"data — {_FIX}")
            produced.add(tid)
            available.add(tid)
        if len(set(op.outputs)) != len(op.outputs):
            raise _err(f"{op.where} lists the same output tensor twice — {_FIX}")
    for tid in g.outputs:
        if tid not in produced and tid not in g.inputs and not g.tensors[tid].is_const:
            raise _err(f"graph output {_tname(g.tensors[tid])} is not produced by any op, nor a "
                       f"graph input or a constant — {_FIX}")


# ---- operator options ---------------------------------------------------------------------

def _opt_int(op: Op, key: str) -> int | None:
    v = op.options.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _err(f"{op.where} option {key} = {v!r} is not an integer — {_FIX}")
    return v


def _spatial(g: Graph, tid: int) -> tuple[int, int] | None:
    if tid < 0 or tid >= len(g.tensors):
        return None
    s = g.tensors[tid].shape
    return (s[1], s[2]) if len(s) == 4 else None


MAX_EXTENT = 1 << 24  # dilated kernel extent: keeps in + pad + extent far inside int32


def _check_window(op: Op, g: Graph, kh: int | None, kw: int | None) -> None:
    """Strides/dilations/filter sizes >= 1 and bounded by the tensors they slide over, so the
    kernels' int32 index arithmetic (out * stride - pad + k * dilation) stays in range.
    Bound: 2 * max(input, output, kernel) + 2 (SAME padding legally lets a window overhang the
    input; TFLite converters never write more)."""
    ins = [d for d in (_spatial(g, op.inputs[0] if op.inputs else -1),
                       _spatial(g, op.outputs[0] if op.outputs else -1)) if d]
    if op.type == "TRANSPOSE_CONV" and len(op.inputs) > 2:  # inputs: shape, weights, data
        ins = [d for d in (_spatial(g, op.inputs[2]), _spatial(g, op.outputs[0])) if d]
    bound_h = 2 * max([d[0] for d in ins] + [kh or 1]) + 2
    bound_w = 2 * max([d[1] for d in ins] + [kw or 1]) + 2
    for key, bound in (("stride_h", bound_h), ("stride_w", bound_w), ("dilation_h_factor", bound_h),
                       ("dilation_w_factor", bound_w), ("filter_height", bound_h),
                       ("filter_width", bound_w)):
        v = _opt_int(op, key)
        if v is None:
            continue
        if v < 1:
            raise _err(f"{op.where} has {key} = {v}; it must be >= 1 — {_FIX}")
        if v > bound:
            raise _err(f"{op.where} has {key} = {v}, larger than the tensors it applies to "
                       f"(at most {bound}) — {_FIX}")
    for k, key in ((kh, "dilation_h_factor"), (kw, "dilation_w_factor")):
        d = _opt_int(op, key)
        if k is not None and d is not None and (k - 1) * d + 1 > MAX_EXTENT:
            raise _err(f"{op.where}: a {k}-tap kernel with {key} = {d} spans {(k - 1) * d + 1:,} "
                       f"pixels, more than {MAX_EXTENT:,} — {_FIX}")


def _check_options(op: Op, g: Graph) -> None:
    req = _REQUIRED_OPTIONS.get(op.type)
    if req is not None:
        table, keys = req
        missing = [k for k in keys if k not in op.options]
        if missing:
            raise _err(f"{op.where} has no {table} table (missing {', '.join(missing)}); TFLite "
                       f"cannot run it without one — {_FIX}")
    act = op.options.get("fused_activation_function")
    if act is not None and act not in _ACTIVATIONS:
        raise _err(f"{op.where} has unknown fused activation {act!r} — {_FIX}")
    pad = op.options.get("padding")
    if pad is not None and op.type != "CUSTOM" and pad not in _PADDINGS:
        raise _err(f"{op.where} has unknown padding {pad!r} — {_FIX}")
    kh = kw = None
    if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D") and len(op.inputs) > 1 and op.inputs[1] >= 0:
        ws = g.tensors[op.inputs[1]].shape
        if len(ws) == 4:
            kh, kw = ws[1], ws[2]
    if op.type == "TRANSPOSE_CONV" and len(op.inputs) > 1 and op.inputs[1] >= 0:
        ws = g.tensors[op.inputs[1]].shape
        if len(ws) == 4:
            kh, kw = ws[1], ws[2]
    if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "AVERAGE_POOL_2D", "MAX_POOL_2D"):
        _check_window(op, g, kh, kw)
    for key in ("block_size", "depth_multiplier"):
        v = _opt_int(op, key)
        if v is not None and op.type in ("DEPTH_TO_SPACE", "SPACE_TO_DEPTH") and key == "block_size":
            dims = [d for tid in op.inputs[:1] + op.outputs[:1] if 0 <= tid < len(g.tensors)
                    for d in g.tensors[tid].shape]
            if not 1 <= v <= max(dims + [1]):
                raise _err(f"{op.where} has block_size = {v}; it must be >= 1 and no larger than "
                           f"the tensor dimensions — {_FIX}")
    if op.type in ("SOFTMAX", "LOG_SOFTMAX"):
        beta = op.options.get("beta", 1.0)
        if not isinstance(beta, (int, float)) or not math.isfinite(beta) or beta <= 0:
            raise _err(f"{op.where} has beta = {beta}; it must be finite and > 0 — {_FIX}")
    for key in ("alpha", "cell_clip", "proj_clip"):
        v = op.options.get(key)
        if isinstance(v, float) and not math.isfinite(v):
            raise _err(f"{op.where} has {key} = {v}; it must be finite — {_FIX}")


# ---- entry points -------------------------------------------------------------------------

def verify_graph(g: Graph, *, allow_unknown_dims: bool = True) -> Graph:
    """Check the structural rules (docs/verifier.md); raise ModelVerifyError on the first
    broken one. `allow_unknown_dims`: -1 dimensions on intermediate tensors are legal until
    fold_constants has resolved them."""
    _check_io(g)
    _check_dataflow(g)
    used = g.used_tensor_ids()
    for t in g.tensors:
        if t.id not in used:
            continue
        _check_shape(t, allow_unknown_dims)
        _check_data(t)
        _check_quant(t)
    for op in g.ops:
        _check_options(op, g)
    return g


def verify_each_pass() -> bool:
    """Tests set STM32AI_VERIFY_PASSES=1 to re-verify the IR after every pass."""
    return os.environ.get("STM32AI_VERIFY_PASSES", "") not in ("", "0")


# ---- kernel bounds (after lowering) -------------------------------------------------------

def _int_values(v: object) -> Iterable[int]:
    if isinstance(v, bool):
        return []
    if isinstance(v, int):
        return [v]
    if isinstance(v, (list, tuple)):
        return [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
    return []


def _is_requant_shift(key: str) -> bool:
    # out_shift, output_shift, input1_shift, shift_x, fc_shift, reverse_shift, tanh_shift:
    # signed exponents; left_shift / input_left_shift are plain left shifts (checked 0..31).
    return "shift" in key and "left_shift" not in key


def _check_shift(op: Op, what: str, values: Iterable[int]) -> None:
    for s in values:
        if not -31 <= s <= 31:
            raise _err(f"{op.where}: requantisation {what} = {s} is outside the -31..31 the "
                       f"integer kernels handle (a quantisation scale is extreme: check the scales "
                       f"of this op's tensors) — {_FIX}")


# op type -> [(weights input, bias input or -1, data input, output-channel axis of the weights)]
_WEIGHTED: dict[str, list[tuple[int, int, int, int]]] = {
    "CONV_2D": [(1, 2, 0, 0)], "DEPTHWISE_CONV_2D": [(1, 2, 0, 3)], "FULLY_CONNECTED": [(1, 2, 0, 0)],
    "TRANSPOSE_CONV": [(1, 3, 2, 0)],
    # per gate: input weights with the gate bias, recurrent weights (on the int8 hidden state)
    "UNIDIRECTIONAL_SEQUENCE_LSTM": [(1 + i, 12 + i, 0, 0) for i in range(4)]
    + [(5 + i, -1, 18, 0) for i in range(4)],
}


def _const(g: Graph, op: Op, i: int) -> np.ndarray | None:
    if i >= len(op.inputs) or op.inputs[i] < 0:
        return None
    return g.tensors[op.inputs[i]].data


# The 8-bit kernels accumulate in int32 with two's-complement wrap-around (as TFLite Micro's
# accumulators do on Cortex-M), so a worst case at or above 2^31 is legal: real exports sit
# there (a 6x6 stem or a wide 1x1 head with large weights). Only a bound no converter writes
# is refused: it needs a bias beyond int32, and the generate-time sums (int64) must stay exact.
ACC8_REFUSE = 1 << 62
# 16-bit data: TFLite's int64 accumulator times its 16-bit reduced multiplier must fit int64
# (below 2^48 in TFLite; 2^47 keeps a margin); 2^47 needs a bias of 2^47 or 2^24 taps of
# weight 128 per channel, which no real model has (docs/verifier.md).
ACC16_REFUSE = 1 << 47


def verify_accumulators(g: Graph) -> list[str]:
    """Integer conv/FC kernels accumulate w * (x - zp) on top of the bias. Per output channel,
    |acc| <= sum|w| * 2^(bits of x) + |bias|. 8-bit data: a bound >= 2^31 gets a warning (the
    kernels wrap modulo 2^32 like TFLite Micro; bit-exact wherever TFLite's own accumulator
    fits), >= 2^62 is refused; 16-bit data (int64 accumulator, then multiplied by a 16-bit
    multiplier): refused from 2^47. Run before lowering, on TFLite's weight layouts.
    Returns the warnings, one line each."""
    warnings: list[str] = []
    for op in g.ops:
        for spec in _WEIGHTED.get(op.type, []):
            w = _check_accumulator(g, op, *spec)
            if w and w not in warnings:  # an LSTM names one output for its 8 gate sums
                warnings.append(w)
    return warnings


def accumulator_bound(w: np.ndarray, b: np.ndarray | None, axis: int, factor: int) -> int:
    """The worst |accumulator| over output channels: per channel sum|w| * factor + |bias|, the
    bias of that channel when there is one per channel, else max|bias| (Python ints: no int64
    wrap). factor: 256 for 8-bit data (|x - zp| <= 255), 2^16 for int16."""
    wa = np.abs(w.astype(np.int64))
    if wa.ndim > axis:
        per = wa.sum(axis=tuple(a for a in range(wa.ndim) if a != axis))
    else:
        per = np.array([wa.sum()])
    sums = [int(v) * factor for v in per.reshape(-1)] or [0]
    if b is None or not b.size or b.dtype.kind not in "iu":  # a float bias (hybrid ops) is added in float
        return max(sums)
    bias = [abs(int(v)) for v in b.reshape(-1)]  # Python ints: no |INT64_MIN| wrap
    if len(bias) == len(sums):
        return max(s + a for s, a in zip(sums, bias, strict=True))
    return max(sums) + max(bias)


def _check_accumulator(g: Graph, op: Op, wi: int, bi: int, xi: int, axis: int) -> str | None:
    w = _const(g, op, wi)
    if w is None or w.dtype.name not in ("int8", "uint8") or xi >= len(op.inputs) or op.inputs[xi] < 0:
        return None
    x = g.tensors[op.inputs[xi]]
    if x.dtype not in ("int8", "uint8", "int16", "float32"):
        return None
    wide = x.dtype == "int16"
    factor, limit = ((1 << 16), ACC16_REFUSE) if wide else (256, ACC8_REFUSE)
    worst = accumulator_bound(w, _const(g, op, bi) if bi >= 0 else None, axis, factor)
    out = quote(g.tensors[op.outputs[0]].name, 60)
    if worst >= limit:
        raise _err(f"{op.where}: the integer accumulator could overflow: weights and bias of "
                   f"output {out} bound it by {worst:,}, not below 2^{limit.bit_length() - 1} "
                   f"(no converter writes such values) — {_FIX}")
    if worst >= INT32_LIMIT and not wide:
        return (f"{op.where}: the int32 accumulator of output {out} is bounded by {worst:,} >= 2^31 "
                f"(2^31 + {worst - INT32_LIMIT:,}) for extreme inputs; the generated code wraps it "
                "modulo 2^32 like TFLite Micro on Cortex-M (bit-exact wherever TFLite's sum fits int32)")
    return None


_FLT_MAX = float(np.finfo(np.float32).max)


def _check_float_attr(op: Op, key: str, v: object) -> None:
    vals = v if isinstance(v, (list, tuple)) else [v]
    for x in vals:
        if isinstance(x, float) and not (math.isinf(x) or abs(x) <= _FLT_MAX):
            raise _err(f"{op.where}: kernel parameter {key} = {x} is not a float32 value (an option "
                       f"or quantisation parameter of this op is NaN or out of range) — {_FIX}")


def verify_kernel_bounds(g: Graph, n_model_tensors: int) -> Graph:
    """After lowering: every requantisation shift is one the C helpers can apply without
    shifting by 32 or more (accumulators: `verify_accumulators`).
    `n_model_tensors`: tensors before lowering; later ones are lowering's tables."""
    for op in g.ops:
        for key, v in op.attrs.items():
            ints = list(_int_values(v))
            lo = INT32_MIN
            hi = INT32_MAX if "mult" in key else (1 << 32) - 1
            if any(not lo <= x <= hi for x in ints):
                bad = next(x for x in ints if not lo <= x <= hi)
                raise _err(f"{op.where}: kernel parameter {key} = {bad} does not fit its 32-bit field "
                           f"(a quantisation scale or option of this op is extreme) — {_FIX}")
            if key == "tanh_shift" and any(not 0 <= x <= 31 for x in ints):  # a plain right shift
                raise _err(f"{op.where}: {key} = {ints[0]} is outside 0..31 (the cell state's scale "
                           f"is extreme) — {_FIX}")
            if _is_requant_shift(key):
                _check_shift(op, key, _int_values(v))
            elif "left_shift" in key:
                for s in _int_values(v):
                    if not 0 <= s <= 31:
                        _check_shift(op, key, [s])
            _check_float_attr(op, key, v)
        for tid in op.inputs:
            t = g.tensors[tid] if tid >= n_model_tensors else None
            if t is None or not t.is_const:
                continue
            table = t.name.rsplit("/", 1)[-1]
            if table.endswith("_rshift"):  # 64-bit rounding right shift: (acc*m + 2^(s-1)) >> s
                bad = [int(x) for x in t.data.ravel() if not 1 <= int(x) <= 62]
                if bad:
                    raise _err(f"{op.where}: requantisation {table} = {bad[0]} is outside the 1..62 the "
                               "kernel handles (a quantisation scale of this op is extreme) — " + _FIX)
            elif table.endswith("_shift"):
                _check_shift(op, table, (int(x) for x in t.data.ravel()))
            elif table == "requant" and t.data.ndim == 2 and t.data.shape[1] == 4 and not op.attrs.get("rq_fold"):
                # conv2d_s8's per-channel {bias, multiplier, shift, 0} rows on the general path (a
                # folded table holds right shifts 1..30, proven at generate time)
                _check_shift(op, table, (int(x) for x in t.data[:, 2]))
        if op.scratch > MAX_BYTES:
            raise _err(f"{op.where} needs {op.scratch:,} bytes of scratch, more than 32-bit sizes "
                       "allow — reduce the layer's size")
    return g


def verify_memory(pool_size: int, params_size: int) -> None:
    """The planned activation pool and the weights must fit the runtime's 32-bit sizes."""
    for what, size in (("activation pool", pool_size), ("weights", params_size)):
        if size > MAX_BYTES:
            raise _err(f"the model's {what} needs {size:,} bytes, more than the runtime's 32-bit "
                       f"sizes allow ({MAX_BYTES:,}) — reduce the model's tensor sizes")
