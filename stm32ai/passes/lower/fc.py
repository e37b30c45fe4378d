"""FULLY_CONNECTED -> ai_fully_connected_s8 / ai_fully_connected_f32 / ai_fully_connected_hybrid.

Hybrid (float activations, int8 weights): LiteRT-ref's arithmetic, see `_lower_fc_hybrid`
and ai_kernels_hybrid.h.

int8 (TFLite Micro's reference arithmetic, bit-exact):

    acc[b, o] = bias[o] + sum_k w[o, k] * (x[b, k] - in_zp)
    y[b, o]   = clamp(requant(acc, M, s) + out_zp, act_min, act_max)

The weight zero point must be 0 (TFLite's int8 scheme; checked). The input zero point is
folded into the bias at generate time, `bias'[o] = bias[o] - in_zp * sum_k w[o, k]`,
exact (modulo 2^32, like the int32 accumulator) because FULLY_CONNECTED has no padding.
So the kernel's inner loop is a plain int8 x int8 dot product.

The requantisation multiplier is double(in_scale) * double(w_scale) / double(out_scale)
for per-tensor and per-channel weights alike: that is what TFLite Micro computes, and
current LiteRT-ref too (verified on models where a float32 scale product would flip
outputs). Quantised with QuantizeMultiplier and applied with the double rounding of
ai_requant.

The weights are re-laid out offline for the kernel (see `pack_fc_weights_s8`).
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op, Tensor
from stm32ai.passes.lower import register
from stm32ai.passes.lower.common import (
    act_range_f32,
    act_range_s8,
    check_activation,
    check_filter_quant,
    check_int8_io,
    scale_of,
    weighted_operands,
    zp_of,
)
from stm32ai.passes.quant import per_channel_multiplier, quantize_multiplier

__all__ = ["chunk_groups", "pack_fc_weights_s8", "pairable"]

# ---- weight packing ---------------------------------------------------------------------

PAIR_LIMIT = (1 << 23) - 1  # |sum_k a*x| of a paired row A over one chunk, so (ab - b) / 256 is exact


def pairable(w: np.ndarray) -> bool:
    """Every row pair (2i, 2i+1) fits one int16 per column: 256*a + b >= -32768 (a, b int8;
    only a == -128 with b < 0 overflows, which TFLite's symmetric weights never have)."""
    w = np.asarray(w, np.int64)
    n2 = w.shape[0] - w.shape[0] % 2
    return bool(np.all(256 * w[0:n2:2] + w[1:n2:2] >= -32768))


def chunk_groups(w: np.ndarray, pair_rows: int) -> int:
    """Column groups of 4 between two recoveries of a paired row A = row 2i: the largest
    count c such that 128 * sum|a| <= 2^23 - 1 over every chunk of c groups (x in
    [-128, 127] gives |sum a*x| <= 128 * sum|a|), so (ab - b) >> 8 is exactly sum a*x."""
    w = np.abs(np.asarray(w, np.int64))
    n_out, k = w.shape
    groups = (k + 3) // 4
    a = np.zeros((max(pair_rows // 2, 1), groups * 4), np.int64)
    a[:pair_rows // 2, :k] = w[0:pair_rows:2]
    per_group = a.reshape(a.shape[0], groups, 4).sum(axis=2)
    for c in range(groups, 0, -1):
        pad = (-groups) % c
        chunks = np.pad(per_group, ((0, 0), (0, pad))).reshape(a.shape[0], -1, c).sum(axis=2)
        if 128 * int(chunks.max(initial=0)) <= PAIR_LIMIT:
            return c
    raise AssertionError("a group of 4 int8 weights always fits")  # 128 * 4 * 128 < 2^23


def pack_fc_weights_s8(w: np.ndarray, pair_rows: int) -> np.ndarray:
    """Lay out int8 weights [out, K] as the kernel reads them (ai_fc.c), 32-bit words over
    groups of 4 columns, K zero-padded to a multiple of 4.

    The first `pair_rows` (even) rows go in pairs (A, B) = (row 2i, row 2i+1), each column's
    two weights as one little-endian int16 h = 256*a + b; per group and pair two words,
    (h[4g], h[4g+2]) and (h[4g+1], h[4g+3]), matching the input halves SXTB16 and
    SXTB16 ROR #8 extract. Pairs go two by two (blocks of 4 rows: per group P0's two words
    then P1's), a last single pair alone. The other rows follow one by one, per group
    their 4 bytes. Size: ceil(K/4) * 4 * out bytes, every block 4-byte aligned.
    """
    w = np.asarray(w, np.int64)
    n_out, k = w.shape
    groups = (k + 3) // 4
    wp = np.zeros((n_out, groups * 4), np.int64)
    wp[:, :k] = w
    parts: list[np.ndarray] = []
    if pair_rows:
        h = 256 * wp[0:pair_rows:2] + wp[1:pair_rows:2]  # [pairs, K4]
        assert h.min(initial=0) >= -32768 and h.max(initial=0) <= 32767
        g = h.reshape(h.shape[0], groups, 2, 2).transpose(0, 1, 3, 2)  # [pair, g, phase, half]
        g = g.reshape(h.shape[0], groups, 4)  # per group: xa word (2 halves), xb word
        n_pairs = pair_rows // 2
        for p in range(0, n_pairs - n_pairs % 2, 2):
            blk = np.stack([g[p], g[p + 1]], axis=1)  # [g, pair, 4 halves]
            parts.append(blk.reshape(-1).astype("<i2").view(np.int8))
        if n_pairs % 2:
            parts.append(g[n_pairs - 1].reshape(-1).astype("<i2").view(np.int8))
    for r in range(pair_rows, n_out):
        parts.append(wp[r].astype(np.int8))
    out = np.concatenate(parts) if parts else np.zeros(0, np.int8)
    return out.astype(np.int8)


def packed_size(n_out: int, k: int) -> int:
    return n_out * ((k + 3) // 4) * 4


# ---- support check ---------------------------------------------------------------------

def _check_fc(op: Op, g: Graph) -> str | None:
    operands = weighted_operands(op, g, "weights tensor")
    if isinstance(operands, str):
        return operands
    x, w, bias, y = operands
    fmt = op.options.get("weights_format", "DEFAULT")
    if fmt not in (None, "DEFAULT", 0):
        return f"weights format {fmt} is not supported (only DEFAULT)"
    reason = check_activation(op)
    if reason:
        return reason
    if len(w.shape) != 2:
        return f"weights '{w.name}' have shape {list(w.shape)}, expected [out_features, in_features]"
    n_out, k = w.shape
    if k <= 0 or n_out <= 0 or x.size % k != 0:
        return f"input '{x.name}' {list(x.shape)} is not a whole number of rows of {k} features"
    batches = x.size // k
    if y.size != batches * n_out:
        return (f"output '{y.name}' {list(y.shape)} does not hold {batches} x {n_out} values "
                "— the model is inconsistent")
    if bias is not None and bias.size != n_out:
        return f"bias '{bias.name}' has {bias.size} values for {n_out} outputs"
    if x.dtype == "float32":
        if w.dtype == "int8":
            return _check_hybrid(w, y, bias, n_out)
        if w.dtype != "float32":
            return (f"hybrid (dynamic-range) model: float input with {w.dtype} weights '{w.name}' "
                    "is not supported (int8 weights are) — convert with full-integer quantisation "
                    "or keep float weights")
        if y.dtype != "float32" or (bias is not None and bias.dtype != "float32"):
            return "float FULLY_CONNECTED needs float32 output and bias"
        return None
    reason = check_int8_io(x, y)
    if reason:
        return reason
    if w.dtype != "int8":
        return f"weights '{w.name}' are {w.dtype}; int8 input needs int8 weights"
    reason = check_filter_quant(w, f"weights '{w.name}'", n_out, 0)
    if reason:
        return reason
    if bias is not None and bias.dtype != "int32":
        return f"bias '{bias.name}' is {bias.dtype}; int8 FULLY_CONNECTED needs an int32 bias"
    return None


def _check_hybrid(w: Tensor, y: Tensor, bias: Tensor | None, n_out: int) -> str | None:
    """Hybrid (dynamic-range) FULLY_CONNECTED: float activations, int8 symmetric weights."""
    what = f"hybrid (dynamic-range) FULLY_CONNECTED: weights '{w.name}'"
    if y.dtype != "float32" or (bias is not None and bias.dtype != "float32"):
        return "hybrid FULLY_CONNECTED needs float32 output and a float32 bias (or none)"
    return check_filter_quant(w, what, n_out, 0)


def fc_x16_scratch_size(k: int) -> int:
    """ai_fully_connected_s8_x16's scratch: the input row as int16 pairs."""
    return 2 * k


# Extending the row costs ~7 estimated cycles per column group once; each block of 4 rows
# then saves 1 per group: below 8 blocks it does not pay (measured on ad01's 128 -> 8 layer:
# 2,125 -> 2,533 estimated cycles on nucleo-l4r5zi with 2 blocks).
X16_MIN_ROWS = 32
# cores built with the Cortex-M4 block routine (Armv7E-M / Armv8-M with the DSP extension,
# AI_CORE_CM7 unset; runtime/src/ai_fc.c)
X16_CORES = ("cortex-m4", "cortex-m33")


def x16_pays(k: int, n_out: int, pair_rows: int, chunk: int, per_tensor: bool, shift: int,
             lo: int, hi: int, has_bias: bool, optimization: str, core: str | None) -> bool:
    """Whether the layer takes ai_fully_connected_s8_x16: exactly the case of the Cortex-M4
    block routine (ai_fc.c, fc_blocks4_m4: blocks of 4 paired rows, one chunk per row,
    K % 4 == 0, a bias, per-tensor fast requantisation over the whole int8 range), which then
    reads the row as int16 pairs extended once instead of extending it in each of the
    n_out / 4 blocks: 1 estimated cycle less per 16 MACs for 2*K bytes of scratch, so not with
    --optimization ram. `shift`: the per-tensor shift, fast (<= -2) and small enough for the
    routine's folded zero point (>= -22, fc_m4_fold). Only for the cores whose build runs the
    routine (X16_CORES): the Cortex-M7 build has no use for the scratch, and the extra entry
    point cost it 10-30 estimated cycles per layer; no board: the int8 kernel."""
    groups = k // 4
    return (core in X16_CORES and optimization != "ram" and k % 4 == 0 and pair_rows >= X16_MIN_ROWS
            and chunk >= groups and per_tensor and -22 <= shift <= -2 and lo <= -128 and hi >= 127
            and has_bias)


def hybrid_fc_scratch_size(k: int) -> int:
    """ai_fully_connected_hybrid_scratch_size: one batch of quantised input."""
    return (k + 3) // 4 * 4


def _lower_fc_hybrid(op: Op, g: Graph, base: str, bias_id: int) -> None:
    """LiteRT's EvalHybridDense (see ai_kernels_hybrid.h). The filter scales are always
    passed per row (a per-tensor scale repeated): LiteRT's per-tensor path folds the scale
    into the batch's scaling factor, input_scale * filter_scale, the same float product."""
    x, w = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]]
    assert w.data is not None and w.quant is not None
    n_out, k = w.shape
    s = np.asarray(w.quant.scale, np.float32).reshape(-1)
    scales = g.add_const(f"{base}/weights_scale",
                         (s if s.size > 1 else np.full(n_out, s[0], np.float32)).astype(np.float32))
    asym = bool(op.options.get("asymmetric_quantize_inputs", False))
    w_sum = -1
    if asym:  # input offset term: sum w * (q - off) = sum w * q - off * sum w
        rows = np.asarray(w.data, np.int64).reshape(n_out, k)
        w_sum = g.add_const(f"{base}/weights_sum", rows.sum(axis=1).astype(np.int32))
    lo, hi = act_range_f32(op)
    op.kernel = "fully_connected_hybrid"
    op.inputs = [op.inputs[0], op.inputs[1], scales, w_sum, bias_id]
    op.attrs = {"batches": int(x.size // k), "in_features": int(k), "out_features": int(n_out),
                "asymmetric": int(asym), "act_min": lo, "act_max": hi}
    op.scratch = hybrid_fc_scratch_size(int(k))


# ---- lowering ----------------------------------------------------------------------------

@register("FULLY_CONNECTED",
          "int8 (per-tensor or per-channel weights, zero weight zero point), float32, or hybrid "
          "(float32 activations, int8 per-tensor/per-channel weights, LiteRT's dynamic-range "
          "arithmetic, symmetric or asymmetric input quantisation); "
          "optional bias; keep_num_dims; fused NONE/RELU/RELU6/RELU_N1_TO_1",
          _check_fc)
def lower_fc(op: Op, g: Graph) -> None:
    operands = weighted_operands(op, g, "weights tensor")
    assert not isinstance(operands, str), operands
    x, w, bias, y = operands
    bias_id = op.inputs[2] if bias is not None else -1
    n_out, k = w.shape
    batches = x.size // k
    op.macc = int(batches * n_out * k)
    base = y.name or f"op{op.index}"

    if x.dtype == "float32" and w.dtype == "int8":
        _lower_fc_hybrid(op, g, base, bias_id)
        return
    if x.dtype == "float32":
        lo, hi = act_range_f32(op)
        op.kernel = "fully_connected_f32"
        op.inputs = [op.inputs[0], op.inputs[1], bias_id]
        op.attrs = {"batches": int(batches), "in_features": int(k), "out_features": int(n_out),
                    "act_min": lo, "act_max": hi}
        return

    assert w.data is not None
    wq = np.asarray(w.data, np.int64)
    in_zp = zp_of(x)
    b = (np.asarray(bias.data, np.int64).reshape(-1) if bias is not None and bias.data is not None
         else np.zeros(n_out, np.int64))
    folded = b - in_zp * wq.sum(axis=1)
    folded = ((folded + (1 << 31)) % (1 << 32)) - (1 << 31)  # int32 wrap, like the accumulator
    bias_arg = -1
    if bias is not None or in_zp != 0:
        bias_arg = g.add_const(f"{base}/bias_folded", folded.astype(np.int32))

    wd = np.asarray(w.data, np.int8).reshape(n_out, k)
    pair_rows = (n_out - n_out % 2) if pairable(wd) else 0
    w_id = g.add_const(f"{base}/weights_packed", pack_fc_weights_s8(wd, pair_rows))

    in_scale, out_scale = scale_of(x), scale_of(y)
    assert w.quant is not None
    mult_arg = shift_arg = -1
    if w.quant.scale.size > 1:
        pairs = [quantize_multiplier(per_channel_multiplier(in_scale, float(s), out_scale))
                 for s in w.quant.scale]
        mult_arg = g.add_const(f"{base}/out_multiplier", np.array([p[0] for p in pairs], np.int32))
        shift_arg = g.add_const(f"{base}/out_shift", np.array([p[1] for p in pairs], np.int32))
        m, s = 0, 0
        fast = all(p[1] <= -2 for p in pairs)
    else:
        m, s = quantize_multiplier(per_channel_multiplier(in_scale, float(w.quant.scale[0]),
                                                          out_scale))
        fast = s <= -2
    lo, hi = act_range_s8(op, y)
    op.kernel = "fully_connected_s8"
    op.inputs = [op.inputs[0], w_id, bias_arg, mult_arg, shift_arg]
    op.attrs = {"batches": int(batches), "in_features": int(k), "out_features": int(n_out),
                "out_multiplier": int(m), "out_shift": int(s), "out_zero_point": zp_of(y),
                "act_min": int(lo), "act_max": int(hi), "pair_rows": int(pair_rows),
                "chunk_groups": chunk_groups(wd, pair_rows), "fast_requant": int(fast)}
    if x16_pays(k, n_out, pair_rows, chunk_groups(wd, pair_rows), mult_arg < 0, int(s) if fast else 0,
                lo, hi, bias_arg >= 0, g.optimization, g.core):
        op.kernel = "fully_connected_s8_x16"
        op.inputs = [op.inputs[0], w_id, bias_arg]  # per-tensor: no multiplier tables
        op.scratch = fc_x16_scratch_size(int(k))
