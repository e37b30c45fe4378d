"""Exact dead-channel elimination on the IR, before lowering (docs/passes.md).

A channel is the last axis of an activation tensor. Two facts make channels removable
without changing a single output bit:

* **constant channels.** An int8 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED output
  channel whose weights only read constant input channels (in particular: all its weights
  are zero) holds the same value at every position,
  `v = clamp(requant(bias + sum (v_c - in_zp) * w) + out_zp, act_min, act_max)`, computed
  here with TFLite's integer arithmetic (stm32ai/passes/quant.py). A convolution with padded
  taps reads `pad_value` (the input zero point) there instead of `v_c`, so a constant input
  channel is only *uniform* (same contribution at every output position) when the
  convolution has no padded taps or `v_c == pad_value`. Pooling maps a constant to itself
  (an average of n equal values rounds back to the value), clamped; RESHAPE moves it along.
* **unread channels.** A channel no consumer needs is not computed: a 1x1-or-uniform
  CONV_2D or a FULLY_CONNECTED adds a uniform constant channel's contribution to its int32
  bias (same accumulator, exact) and drops it; a consumer whose live outputs have only zero
  weights on a channel does not read it; a depthwise convolution or a pooling needs input
  channel c only if its output channel c is needed.

Constants flow forward, needs flow backward (reverse execution order: every consumer of a
tensor is seen before its producer, so one sweep reaches the fixed point of a DAG); then
every prunable op is rewritten with the kept channels (weights, bias, per-channel
quantisation, output shape). The pass repeats until it removes nothing (a second round is
a no-op by construction; the loop is a safety net).

Only int8 ops with constant weights are prunable; everything else (graph inputs and
outputs, ADD, CONCATENATION, activations, float ops...) needs all its input channels and
keeps all its output channels. A tensor keeps at least one channel.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from stm32ai.ir import Graph, Op, Quant, Tensor
from stm32ai.passes.quant import (
    INT32_MAX,
    INT32_MIN,
    activation_range_quantized,
    multiply_by_quantized_multiplier,
    per_channel_multiplier,
    quantize_multiplier,
)

__all__ = ["LayerPrune", "PruneSummary", "prune_dead_channels"]

_MAX_ROUNDS = 8


@dataclass
class LayerPrune:
    """One op the pass changed (channel counts before -> after, MACC as the lowering counts)."""

    index: int
    op: str
    output: str
    in_channels: tuple[int, int]
    out_channels: tuple[int, int]
    folded: int  # constant input channels absorbed into the bias
    macc: tuple[int, int]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PruneSummary:
    layers: list[LayerPrune] = field(default_factory=list)

    @property
    def removed_channels(self) -> int:
        return sum(ly.out_channels[0] - ly.out_channels[1] for ly in self.layers)

    @property
    def macc_saved(self) -> int:
        return sum(ly.macc[0] - ly.macc[1] for ly in self.layers)

    def to_json(self) -> dict[str, Any]:
        return {"removed_channels": self.removed_channels, "macc_saved": self.macc_saved,
                "layers": [ly.to_json() for ly in self.layers]}


# ---- which ops the pass understands ------------------------------------------------------------

def _zp(t: Tensor) -> int:
    assert t.quant is not None
    return int(t.quant.zero_point[0]) if t.quant.zero_point.size else 0


def _scale(t: Tensor) -> float:
    assert t.quant is not None
    return float(t.quant.scale[0])


def _per_tensor_s8(t: Tensor) -> bool:
    return (t.dtype == "int8" and not t.is_const and t.quant is not None
            and t.quant.scale.size == 1 and bool(t.shape))


def _bias(g: Graph, op: Op) -> Tensor | None:
    return g.tensors[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None


def _weighted_s8(g: Graph, op: Op) -> bool:
    if len(op.inputs) < 2 or op.inputs[1] < 0 or len(op.outputs) != 1:
        return False
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    b = _bias(g, op)
    return (_per_tensor_s8(x) and _per_tensor_s8(y) and w.is_const and w.dtype == "int8"
            and w.quant is not None and w.quant.scale.size >= 1
            and not np.any(np.asarray(w.quant.zero_point) != 0)
            and (b is None or (b.is_const and b.dtype == "int32")))


def _kind(g: Graph, op: Op) -> str | None:
    """'conv', 'dw', 'fc', 'pool', 'reshape' for the ops the pass can rewrite, else None."""
    if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        if not _weighted_s8(g, op):
            return None
        x, w = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]]
        if len(x.shape) != 4 or len(w.shape) != 4:
            return None
        if op.type == "CONV_2D":
            return "conv" if w.shape[3] == x.shape[3] else None
        return "dw" if w.shape[3] == x.shape[3] else None  # depth multiplier 1 only
    if op.type == "FULLY_CONNECTED":
        if not _weighted_s8(g, op) or op.options.get("weights_format", "DEFAULT") not in (None, "DEFAULT", 0):
            return None
        x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
        if len(w.shape) != 2 or y.shape[-1] != w.shape[0] or w.shape[1] % x.shape[-1]:
            return None
        return "fc"
    if op.type in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        if len(op.inputs) != 1 or len(op.outputs) != 1:
            return None
        x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
        ok = _per_tensor_s8(x) and _per_tensor_s8(y) and len(x.shape) == 4 and len(y.shape) == 4
        return "pool" if ok and x.shape[3] == y.shape[3] else None
    if op.type == "RESHAPE" and len(op.inputs) == 1 and len(op.outputs) == 1:
        x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
        ok = _per_tensor_s8(x) and _per_tensor_s8(y) and y.shape[-1] % x.shape[-1] == 0
        return "reshape" if ok else None
    return None


def _act(op: Op) -> str:
    a = op.options.get("fused_activation_function", "NONE")
    return "NONE" if a is None else str(a)


# ---- per-op arithmetic -------------------------------------------------------------------------

@dataclass
class _Weighted:
    """An int8 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED seen as out x in channel sums."""

    wsum: np.ndarray  # int64 [out, in]: sum of the weights of (out channel, input channel)
    reads: np.ndarray  # bool [out, in]: some weight of (out, in) is non-zero
    bias: np.ndarray  # int64 [out]
    in_zp: int
    uniform_value: int | None  # None: no padded taps; else the value padded taps read


def _has_padded_taps(op: Op, g: Graph) -> bool:
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    for i in (1, 2):
        k = w.shape[i]
        stride = int(op.options.get("stride_h" if i == 1 else "stride_w", 1) or 1)
        dil = int(op.options.get("dilation_h_factor" if i == 1 else "dilation_w_factor", 1) or 1)
        if (y.shape[i] - 1) * stride + (k - 1) * dil + 1 > x.shape[i]:
            return True
    return False


def _weighted(g: Graph, op: Op, kind: str) -> _Weighted:
    x, w = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]]
    assert w.data is not None
    wd = np.asarray(w.data, np.int64)
    if kind == "conv":
        wsum, reads = wd.sum(axis=(1, 2)), (wd != 0).any(axis=(1, 2))
    elif kind == "dw":
        per_c = wd.reshape(-1, wd.shape[3])
        wsum, reads = np.diag(per_c.sum(axis=0)), np.diag((per_c != 0).any(axis=0))
    else:  # fc: input feature k belongs to channel k % C
        c = x.shape[-1]
        wsum = wd.reshape(wd.shape[0], -1, c).sum(axis=1)
        reads = (wd != 0).reshape(wd.shape[0], -1, c).any(axis=1)
    b = _bias(g, op)
    bias = (np.zeros(wsum.shape[0], np.int64) if b is None or b.data is None
            else np.asarray(b.data, np.int64).reshape(-1))
    in_zp = _zp(x)
    pad_value = None
    if kind in ("conv", "dw") and _has_padded_taps(op, g):
        pad_value = int(op.options.get("pad_value", in_zp))
    return _Weighted(wsum, reads, bias, in_zp, pad_value)


def _uniform(wt: _Weighted, consts: dict[int, int]) -> dict[int, int]:
    """Constant input channels whose contribution is the same at every output position."""
    return {c: v for c, v in consts.items() if wt.uniform_value is None or v == wt.uniform_value}


def _requant(g: Graph, op: Op, acc: np.ndarray, oc: np.ndarray) -> np.ndarray:
    """TFLite's output stage for accumulators `acc` of output channels `oc`."""
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    assert w.quant is not None
    scales = np.asarray(w.quant.scale, np.float32).reshape(-1)
    pairs = [quantize_multiplier(per_channel_multiplier(_scale(x), float(scales[c if scales.size > 1 else 0]),
                                                        _scale(y))) for c in oc]
    mult = np.array([p[0] for p in pairs], np.int64)
    shift = np.array([p[1] for p in pairs], np.int64)
    lo, hi = activation_range_quantized(_act(op), _scale(y), _zp(y), "int8")
    return np.clip(multiply_by_quantized_multiplier(acc, mult, shift) + _zp(y), lo, hi)


def _weighted_consts(g: Graph, op: Op, kind: str, cin: dict[int, int]) -> dict[int, int]:
    wt = _weighted(g, op, kind)
    uni = _uniform(wt, cin)
    out_c = wt.wsum.shape[0]
    const_in = np.zeros(wt.wsum.shape[1], bool)
    delta = np.zeros(wt.wsum.shape[1], np.int64)
    for c, v in uni.items():
        const_in[c], delta[c] = True, v - wt.in_zp
    ok = ~(wt.reads & ~const_in).any(axis=1)  # every channel it reads is a uniform constant
    acc = wt.bias + wt.wsum @ delta
    ok &= (acc >= INT32_MIN) & (acc <= INT32_MAX)
    oc = np.flatnonzero(ok)
    if oc.size == 0:
        return {}
    vals = _requant(g, op, acc[oc], oc)
    assert out_c == g.tensors[op.outputs[0]].shape[-1]
    return {int(c): int(v) for c, v in zip(oc, vals, strict=True)}


def _pool_consts(g: Graph, op: Op, cin: dict[int, int]) -> dict[int, int]:
    # AVERAGE: (n*v + n/2) / n == v for v > 0 and (n*v - n/2) / n == v for v <= 0 with C's
    # truncating division (n >= 1 valid taps); MAX: v. Then the fused activation's clamp.
    y = g.tensors[op.outputs[0]]
    lo, hi = activation_range_quantized(_act(op), _scale(y), _zp(y), "int8")
    return {c: min(max(v, lo), hi) for c, v in cin.items()}


# ---- the analysis ------------------------------------------------------------------------------

@dataclass
class _Plan:
    kinds: dict[int, str]  # op position -> kind
    kept: dict[int, list[int]]  # tensor id -> kept channels (original indices)
    fold: dict[int, dict[int, int]]  # op position -> uniform constant input channels it may absorb


def _channels(t: Tensor) -> int:
    return int(t.shape[-1]) if t.shape else 1


def _forward_constants(g: Graph, kinds: dict[int, str]) -> dict[int, dict[int, int]]:
    consts: dict[int, dict[int, int]] = {}
    for i, op in enumerate(g.ops):
        kind = kinds.get(i)
        if kind is None:
            continue
        cin = consts.get(op.inputs[0], {})
        if kind in ("conv", "dw", "fc"):
            out = _weighted_consts(g, op, kind, cin)
        elif kind == "pool":
            out = _pool_consts(g, op, cin)
        else:  # reshape: output channel j is input channel j % C
            c = _channels(g.tensors[op.inputs[0]])
            n = _channels(g.tensors[op.outputs[0]])
            out = {j: cin[j % c] for j in range(n) if j % c in cin}
        if out:
            consts[op.outputs[0]] = out
    return consts


def _foldable(wt: _Weighted, uni: dict[int, int], live: np.ndarray) -> dict[int, int]:
    """The uniform constants the op may absorb into its bias: all of them, when even the sum
    of their absolute contributions cannot take a live bias out of int32 (so any subset is
    safe too), else none."""
    if not uni or live.size == 0:
        return {}
    cs = np.array(sorted(uni), np.int64)
    delta = np.array([uni[int(c)] - wt.in_zp for c in cs], np.int64)
    bound = np.abs(wt.bias[live]) + np.abs(wt.wsum[np.ix_(live, cs)] * delta).sum(axis=1)
    return dict(uni) if int(bound.max()) <= INT32_MAX else {}


def _analyse(g: Graph) -> _Plan:
    kinds = {i: k for i, op in enumerate(g.ops) if (k := _kind(g, op)) is not None}
    consts = _forward_constants(g, kinds)
    outputs = set(g.outputs)
    needed: dict[int, set[int]] = {}
    live_out: dict[int, list[int]] = {}
    fold: dict[int, dict[int, int]] = {}

    def need(tid: int, chans: set[int] | range) -> None:
        if tid >= 0 and not g.tensors[tid].is_const:
            needed.setdefault(tid, set()).update(chans)

    for i in range(len(g.ops) - 1, -1, -1):
        op = g.ops[i]
        kind = kinds.get(i)
        if kind is None:
            for tid in op.inputs:
                if tid >= 0:
                    need(tid, range(_channels(g.tensors[tid])))
            continue
        y, x = op.outputs[0], op.inputs[0]
        n_out = _channels(g.tensors[y])
        live = sorted(needed.get(y, set())) if y not in outputs else list(range(n_out))
        live = live or [0]  # a tensor keeps at least one channel
        live_out[i] = live
        if kind in ("conv", "dw", "fc"):
            wt = _weighted(g, op, kind)
            rows = np.array(live, np.int64)
            read = set(np.flatnonzero(wt.reads[rows].any(axis=0)).tolist())
            if kind == "dw":
                read = set(live)  # channel c in -> channel c out, whatever its weights
            uni = {c: v for c, v in _uniform(wt, consts.get(x, {})).items() if c in read}
            fold[i] = _foldable(wt, uni, rows) if kind != "dw" else {}
            need(x, read - set(fold[i]))
        elif kind == "pool":
            need(x, set(live))
        else:
            need(x, {j % _channels(g.tensors[x]) for j in live})

    kept: dict[int, list[int]] = {}
    for i, op in enumerate(g.ops):
        kind = kinds.get(i)
        if kind is None:
            continue
        x, y = op.inputs[0], op.outputs[0]
        kx = kept.get(x, list(range(_channels(g.tensors[x]))))
        if kind in ("conv", "fc"):
            kept[y] = live_out[i]
        elif kind in ("dw", "pool"):
            kept[y] = kx  # forced: the op maps channel c to channel c
        else:
            c = _channels(g.tensors[x])
            ks = set(kx)
            kept[y] = [j for j in range(_channels(g.tensors[y])) if j % c in ks]
    return _Plan(kinds, kept, fold)


# ---- the rewrite -------------------------------------------------------------------------------

def _subset_quant(q: Quant | None, keep: list[int]) -> Quant | None:
    if q is None or q.scale.size <= 1:
        return q
    return Quant(q.scale[keep].copy(), q.zero_point[keep].copy(), q.axis)


def _macc(g: Graph, op: Op, kind: str) -> int:
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if kind == "conv":
        w = g.tensors[op.inputs[1]]
        return y.size * w.shape[1] * w.shape[2] * x.shape[3]
    if kind == "dw":
        w = g.tensors[op.inputs[1]]
        return y.size * w.shape[1] * w.shape[2]
    if kind == "fc":
        return y.size * g.tensors[op.inputs[1]].shape[1]
    if kind == "pool":
        return y.size * int(op.options.get("filter_height", 1)) * int(op.options.get("filter_width", 1))
    return 0


def _set_channels(t: Tensor, n: int) -> None:
    t.shape = (*t.shape[:-1], n)


def _rewrite_weighted(g: Graph, op: Op, kind: str, kin: list[int], kout: list[int],
                      fold: dict[int, int]) -> int:
    """New weights/bias constants with the kept channels; returns the number of folded inputs."""
    w, y = g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    assert w.data is not None and w.quant is not None
    wt = _weighted(g, op, kind)
    c_in = wt.wsum.shape[1]
    removed = sorted(set(range(c_in)) - set(kin))
    rows = np.array(kout, np.int64)
    folded = [c for c in removed if c in fold]
    for c in removed:  # the analysis only removes what this op can do without
        assert c in fold or not wt.reads[rows, c].any(), (op.where, c)
    bias = wt.bias[rows] + sum((fold[c] - wt.in_zp) * wt.wsum[rows, c] for c in folded)
    assert np.all((bias >= INT32_MIN) & (bias <= INT32_MAX)), op.where
    wd = np.asarray(w.data)
    if kind == "conv":
        new_w, axis = wd[kout][:, :, :, kin], 0
    elif kind == "dw":
        new_w, axis = wd[:, :, :, kout], 3
    else:
        ks = set(kin)  # feature k is channel k % C (x's shape is still the original one here)
        feats = [k for k in range(wd.shape[1]) if k % c_in in ks]
        new_w, axis = wd[kout][:, feats], 0
    wq = _subset_quant(w.quant, kout)
    if wq is not None and wq.scale.size > 1:
        wq = Quant(wq.scale, wq.zero_point, axis)
    base = y.name or f"op{op.index}"
    op.inputs[1] = g.add_const(f"{base}/weights_pruned", np.ascontiguousarray(new_w), wq)
    b = _bias(g, op)
    bq = _subset_quant(b.quant, kout) if b is not None else None
    bias_id = g.add_const(f"{base}/bias_pruned", bias.astype(np.int32), bq)
    if len(op.inputs) > 2:
        op.inputs[2] = bias_id
    else:
        op.inputs.append(bias_id)
    return len(folded)


def _apply(g: Graph, plan: _Plan, summary: PruneSummary) -> bool:
    n_orig = {tid: _channels(g.tensors[tid]) for tid in plan.kept}

    def kept_of(tid: int) -> list[int]:
        return plan.kept.get(tid, list(range(_channels(g.tensors[tid]))))

    def shrinks(tid: int) -> bool:
        return tid in plan.kept and len(plan.kept[tid]) != n_orig[tid]

    changed = [i for i, op in enumerate(g.ops)
               if i in plan.kinds and (shrinks(op.inputs[0]) or shrinks(op.outputs[0]))]
    if not changed:
        return False
    before = {i: (_channels(g.tensors[g.ops[i].inputs[0]]), _channels(g.tensors[g.ops[i].outputs[0]]),
                  _macc(g, g.ops[i], plan.kinds[i])) for i in changed}
    folded: dict[int, int] = {}
    for i in changed:  # weights first, while every tensor still has its original channels
        op, kind = g.ops[i], plan.kinds[i]
        if kind in ("conv", "dw", "fc"):
            folded[i] = _rewrite_weighted(g, op, kind, kept_of(op.inputs[0]), kept_of(op.outputs[0]),
                                          plan.fold.get(i, {}))
    for tid, keep in plan.kept.items():
        if len(keep) != n_orig[tid]:
            _set_channels(g.tensors[tid], len(keep))
    for i in changed:
        op = g.ops[i]
        if plan.kinds[i] == "reshape":
            op.options = dict(op.options, new_shape=list(g.tensors[op.outputs[0]].shape))
        b_in, b_out, b_macc = before[i]
        summary.layers.append(LayerPrune(
            index=op.index, op=op.type, output=g.tensors[op.outputs[0]].name,
            in_channels=(b_in, _channels(g.tensors[op.inputs[0]])),
            out_channels=(b_out, _channels(g.tensors[op.outputs[0]])),
            folded=folded.get(i, 0), macc=(b_macc, _macc(g, op, plan.kinds[i]))))
    return True


def _merge(summary: PruneSummary) -> PruneSummary:
    """One row per op over all rounds (first 'before', last 'after')."""
    rows: dict[int, LayerPrune] = {}
    for ly in summary.layers:
        if ly.index in rows:
            r = rows[ly.index]
            r.in_channels = (r.in_channels[0], ly.in_channels[1])
            r.out_channels = (r.out_channels[0], ly.out_channels[1])
            r.macc, r.folded = (r.macc[0], ly.macc[1]), r.folded + ly.folded
        else:
            rows[ly.index] = ly
    return PruneSummary(sorted(rows.values(), key=lambda r: r.index))


def prune_dead_channels(g: Graph) -> PruneSummary:
    """Remove every channel the analysis proves unneeded, in place; returns what changed.

    Kept channel counts are not rounded up to a multiple of 4: keeping removable channels
    for the kernels' 4-channel fast paths measured slower on VWW (14.31 M vs 14.28 M
    instructions on the emulated Cortex-M4)."""
    summary = PruneSummary()
    for _ in range(_MAX_ROUNDS):
        if not _apply(g, _analyse(g), summary):
            break
    return _merge(summary)
