"""SVDF -> ai_svdf_s8 (int8 input/output, int16 state and time weights) / ai_svdf_f32.

TFLite's SVDF (singular value decomposition filter, the keyword-spotting layer): a rank-r
approximation of a dense layer over the last `memory` input frames. Inputs: x [batch, n_in],
weights_feature [filters, n_in], weights_time [filters, memory], optional bias [units], and the
activation state [batch, memory * filters], a variable tensor kept across invocations.
filters = units * rank. Per run (TFLite Micro's svdf_common.cc):

    state <<= 1 step;  state[f][memory-1] = weights_feature[f] . x
    y[u] = bias[u] + sum over the rank's filters f of weights_time[f] . state[f]

int8: the feature sum requantises to the int16 state (effective scale 1 = s_x * s_wf / s_state),
the output sum to int8 (effective scale 2 = s_state * s_wt / s_y). TFLM computes both scale
products in float32 (TfLiteTensor params are floats) and converts to double for
QuantizeMultiplier; so do we. The input zero point is folded into a per-filter int32 bias.
Both TFLM and LiteRT ignore the fused activation of an int8 SVDF (LiteRT requires RELU,
which TFLite's quantiser folds into the output range), so the int8 kernel clamps to int8 only.
float32 applies the fused activation. See docs/kernels_svdf.md.
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import per_tensor_quant, scale_of, zp_of
from stm32ai.passes.quant import activation_range_f32, quantize_multiplier

__all__ = ["svdf_effective_scales", "svdf_dims"]

X, W_FEATURE, W_TIME, BIAS, STATE = range(5)
FLOAT_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def _opt(op: Op, i: int) -> int:
    return op.inputs[i] if i < len(op.inputs) else -1


def svdf_dims(op: Op, g: Graph) -> tuple[int, int, int, int, int]:
    """(batches, input_size, units, rank, memory) of a well-formed SVDF."""
    x, wt = g.tensors[op.inputs[X]], g.tensors[op.inputs[W_TIME]]
    rank = int(op.options.get("rank", 0) or 0)
    filters, memory = wt.shape
    return int(x.shape[0]), int(x.shape[1]), int(filters) // rank, rank, int(memory)


def svdf_effective_scales(s_x: float, s_wf: float, s_wt: float, s_state: float,
                          s_y: float) -> tuple[float, float]:
    """TFLM's PrepareSvdf: the products and quotients in float32, then widened to double."""
    f = np.float32
    e1 = f(f(s_x) * f(s_wf)) / f(s_state)
    e2 = f(f(s_state) * f(s_wt)) / f(s_y)
    return float(f(e1)), float(f(e2))


# ---- support check ---------------------------------------------------------------------

def _check_shapes(op: Op, g: Graph) -> str | None:
    x, wf, wt = (g.tensors[op.inputs[i]] for i in (X, W_FEATURE, W_TIME))
    state, y = g.tensors[op.inputs[STATE]], g.tensors[op.outputs[0]]
    rank = int(op.options.get("rank", 0) or 0)
    if len(x.shape) != 2 or len(y.shape) != 2:
        return f"input {list(x.shape)} and output {list(y.shape)} must be [batch, features]"
    if len(wf.shape) != 2 or len(wt.shape) != 2:
        return f"weights_feature {list(wf.shape)} and weights_time {list(wt.shape)} must be 2-D"
    batches, n_in = x.shape
    filters, memory = wt.shape
    if min(batches, n_in, filters, memory) <= 0:
        return "empty input or weights"
    if rank <= 0 or filters % rank:
        return f"rank {rank} does not divide the {filters} filters"
    units = filters // rank
    if tuple(wf.shape) != (filters, n_in):
        return f"weights_feature '{wf.name}' {list(wf.shape)}, expected [{filters}, {n_in}]"
    if tuple(y.shape) != (batches, units):
        return f"output '{y.name}' {list(y.shape)}, expected [{batches}, {units}]"
    if state.size != batches * memory * filters:
        return f"state '{state.name}' holds {state.size} values, expected {batches} x {memory * filters}"
    b = _opt(op, BIAS)
    if b >= 0 and g.tensors[b].size != units:
        return f"bias '{g.tensors[b].name}' has {g.tensors[b].size} values for {units} units"
    return None


def _check_s8(op: Op, g: Graph) -> str | None:
    x, wf, wt = (g.tensors[op.inputs[i]] for i in (X, W_FEATURE, W_TIME))
    state, y = g.tensors[op.inputs[STATE]], g.tensors[op.outputs[0]]
    if wf.dtype != "int8" or y.dtype != "int8":
        return f"int8 SVDF needs int8 weights_feature and output (got {wf.dtype}, {y.dtype})"
    if wt.dtype != "int16" or state.dtype != "int16":
        return (f"time weights '{wt.name}' {wt.dtype} with a {state.dtype} state are not supported; "
                "int8 SVDF needs int16 time weights and an int16 state (TFLite's quantisation)")
    b = _opt(op, BIAS)
    if b >= 0 and g.tensors[b].dtype != "int32":
        return f"bias '{g.tensors[b].name}' is {g.tensors[b].dtype}; int8 SVDF needs an int32 bias"
    for t, what in ((x, "input"), (wf, "weights_feature"), (wt, "weights_time"), (state, "state"),
                    (y, "output")):
        r = per_tensor_quant(t, what)
        if r:
            return r
    for t, what in ((wf, "weights_feature"), (wt, "weights_time"), (state, "state")):
        if zp_of(t) != 0:
            return f"{what} '{t.name}' has a non-zero zero point; TFLite quantises it symmetrically"
    return None


def _check_svdf(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 5 or len(op.outputs) != 1:
        return f"expects 5 inputs and one output, got {len(op.inputs)} and {len(op.outputs)}"
    for i in (X, W_FEATURE, W_TIME, STATE):
        if op.inputs[i] < 0:
            return f"required input {i} is missing"
    wf, wt, state = (g.tensors[op.inputs[i]] for i in (W_FEATURE, W_TIME, STATE))
    b = _opt(op, BIAS)
    for t in (wf, wt, *([g.tensors[b]] if b >= 0 else [])):
        if not t.is_const:
            return f"'{t.name}' is computed at run time; only constant weights and bias are supported"
    if state.is_const or not state.variable:
        return f"state '{state.name}' is not a variable tensor"
    r = _check_shapes(op, g)
    if r:
        return r
    x = g.tensors[op.inputs[X]]
    act = str(op.options.get("fused_activation_function", "NONE") or "NONE")
    if x.dtype == "float32":
        if wf.dtype != "float32":
            return (f"hybrid (dynamic-range) SVDF: float input with {wf.dtype} weights_feature "
                    f"'{wf.name}' is not supported — convert with full-integer quantisation or keep float weights")
        types = {wt.dtype, state.dtype, g.tensors[op.outputs[0]].dtype} | ({g.tensors[b].dtype} if b >= 0 else set())
        if types != {"float32"}:
            return "float SVDF needs float32 time weights, bias, state and output"
        if act not in FLOAT_ACTIVATIONS:
            return f"fused activation {act} is not supported (supported: {', '.join(FLOAT_ACTIVATIONS)})"
        return None
    if x.dtype != "int8":
        return f"{x.dtype} input is not supported (int8 with an int16 state, or float32)"
    return _check_s8(op, g)


# ---- lowering ----------------------------------------------------------------------------

def _wrap32(a: np.ndarray) -> np.ndarray:
    return (((a + (1 << 31)) % (1 << 32)) - (1 << 31)).astype(np.int32)


def _lower_s8(op: Op, g: Graph, base: str, dims: tuple[int, int, int, int, int]) -> None:
    x, wf, wt = (g.tensors[op.inputs[i]] for i in (X, W_FEATURE, W_TIME))
    state, y = g.tensors[op.inputs[STATE]], g.tensors[op.outputs[0]]
    units = dims[2]
    assert wf.data is not None
    rows = np.asarray(wf.data, np.int64).reshape(wf.shape)
    f_bias = g.add_const(f"{base}/feature_bias", _wrap32(-zp_of(x) * rows.sum(axis=1)))
    b = _opt(op, BIAS)
    bias = b if b >= 0 else g.add_const(f"{base}/bias_zero", np.zeros(units, np.int32))
    e1, e2 = svdf_effective_scales(scale_of(x), scale_of(wf), scale_of(wt), scale_of(state), scale_of(y))
    m1, s1 = quantize_multiplier(e1)
    m2, s2 = quantize_multiplier(e2)
    op.kernel = "svdf_s8"
    op.inputs = [op.inputs[X], op.inputs[W_FEATURE], op.inputs[W_TIME], f_bias, bias, op.inputs[STATE]]
    op.attrs.update({"feature_mult": m1, "feature_shift": s1, "out_mult": m2, "out_shift": s2,
                     "out_zero_point": zp_of(y)})


def _lower_f32(op: Op) -> None:
    act = str(op.options.get("fused_activation_function", "NONE") or "NONE")
    lo, hi = activation_range_f32(act)
    if act in ("NONE", "RELU"):  # TFLM's ActivationValFloat does not clamp to +-FLT_MAX
        lo = float("-inf") if act == "NONE" else 0.0
        hi = float("inf")
    op.kernel = "svdf_f32"
    op.inputs = [op.inputs[i] for i in (X, W_FEATURE, W_TIME)] + [_opt(op, BIAS), op.inputs[STATE]]
    op.attrs.update({"act_min": lo, "act_max": hi})


@register("SVDF",
          "int8 input/output with int8 feature weights, int16 time weights and int16 state "
          "(TFLite's quantisation), or float32; any rank, memory, batch; optional bias; "
          "state persists across runs (ai_reset clears it)",
          _check_svdf)
def lower_svdf(op: Op, g: Graph) -> None:
    dims = svdf_dims(op, g)
    batches, n_in, units, rank, memory = dims
    filters = units * rank
    op.macc = int(batches * filters * (n_in + memory))
    op.attrs = {"batches": batches, "input_size": n_in, "units": units, "rank": rank, "memory": memory}
    op.scratch = 0
    x: Tensor = g.tensors[op.inputs[X]]
    base = g.tensors[op.outputs[0]].name or f"op{op.index}"
    if x.dtype == "float32":
        _lower_f32(op)
    else:
        _lower_s8(op, g, base, dims)
