"""int8 1x1 CONV_2D with 4 or 8 input channels -> conv2d_smallk_s8 (runtime/src/ai_conv_smallk_s8.c,
docs/kernels_conv_smallk.md).

Channel-stationary: one output channel's weights (in_c int8, unpacked to int16 pairs once per
call) and requantisation constants stay in registers while every output pixel streams past, so
an output costs its loads, in_c / 2 SMLADs, the requantisation and one store, instead of
conv2d_s8's per-pixel-pair column staging and per-channel-quad set-up (which dominate when an
output has only 4-8 MACs). The requantisation table is conv2d_s8's (`conv_rq_table`, with the
doubled-accumulator modes `rq_double_mode` proved in passes/lower/conv.py), passed in by the
caller; only folded tables (rq_fold >= 1) are taken.

Default rule (`smallk_default`): the Cortex-M4 only, measured with the cycle estimator on
nucleo-l4r5zi (docs/kernels_conv_smallk.md); not under --optimization ram (stripes call the
direct kernels per band, and conv2d_smallk_s8 is no row-window member).
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower.conv_geometry import ConvGeometry

SMALLK_KERNEL = "conv2d_smallk_s8"
WIN_KERNEL = "conv2d_smallk_win_s8"
WIN_MAX_K = 64  # AI_SMK_WIN_MAX_K: taps of a window (the gather's row buffer)
SMALLK_IN_C = (4, 8)  # the C kernel's specialisations (a pixel is 1 or 2 words)
SMALLK_CORES = ("cortex-m4",)  # where the estimator measured them faster than conv2d_s8
SMALLK_CHAN_BYTES = 32  # sizeof(smk_chan_t): one channel's unpacked weights and constants, staged
SMALLK_BLOCK = 128  # AI_SMK_BLOCK: output pixels per block (each block runs every channel)


def smallk_applies(geo: ConvGeometry) -> bool:
    """The geometry the kernel handles: 1x1, no padding (1x1 never pads), in_c 4 or 8."""
    return (geo.k_h == 1 and geo.k_w == 1 and tuple(geo.pad) == (0, 0) and geo.in_c in SMALLK_IN_C
            and geo.batches >= 1)


def smallk_default(geo: ConvGeometry, core: str | None, optimization: str) -> bool:
    """Whether the default lowering takes a (legal) layer onto conv2d_smallk_s8."""
    return core in SMALLK_CORES and optimization != "ram" and smallk_applies(geo)


def lower_smallk(op: Op, g: Graph, geo: ConvGeometry, w_rows: np.ndarray, table: np.ndarray, rq_mode: int,
                 base: str, attrs: dict[str, object]) -> bool:
    """Lower to conv2d_smallk_s8 when the geometry fits and the requantisation table is folded
    (rq_mode: conv2d_s8's rq_fold, 1..3); False leaves the op to the caller.
    w_rows: int8 [out_c, in_c]; table: conv_rq_table's int32 [out_c, 4] {bias', m, rs, kf}."""
    if not smallk_applies(geo) or rq_mode not in (1, 2, 3):
        return False
    w_id = g.add_const(f"{base}/weights_smallk", np.ascontiguousarray(np.asarray(w_rows, np.int8)))
    q_id = g.add_const(f"{base}/requant", np.asarray(table, np.int32))
    op.kernel = SMALLK_KERNEL
    op.inputs = [op.inputs[0], w_id, q_id]
    op.attrs = {**geo.attrs(), **attrs, "rq_fold": int(rq_mode), "reverse": 0}
    op.scratch = SMALLK_CHAN_BYTES * geo.out_c
    return True


# ---- conv2d_smallk_win_s8: few-tap windows (first layers) ----------------------------------

def win_applies(geo: ConvGeometry) -> bool:
    """The geometry conv2d_smallk_win_s8 handles: K = k_h * k_w * in_c <= WIN_MAX_K, dilation_w 1."""
    return geo.k_h * geo.k_w * geo.in_c <= WIN_MAX_K and geo.dilation[1] == 1 and geo.batches >= 1


def win_default(geo: ConvGeometry, core: str | None, optimization: str) -> bool:
    """The default rule: the Cortex-M4, not under ram, gathered layers (in_c % 4 != 0: first
    layers, whose windows conv2d_s8 pads row by row) with at most WIN_RULE_K taps."""
    return (core in SMALLK_CORES and optimization != "ram" and win_applies(geo) and geo.in_c % 4 != 0
            and geo.k_h * geo.k_w * geo.in_c <= WIN_RULE_K)


WIN_RULE_K = 32  # VWW's 3x3x3 (27); measured in docs/kernels_conv_smallk.md


def win_words(geo: ConvGeometry) -> int:
    """int16-pair words of one window (C win_words)."""
    run = geo.k_w * geo.in_c
    return geo.k_h * 2 * (run // 4) + (geo.k_h * (run % 4) + 1) // 2


def win_order(geo: ConvGeometry) -> np.ndarray:
    """int [2 * win_words]: for each int16 lane of the gathered window, the index of its tap in
    TFLite's (ky, kx, ic) filter order, -1 for a zero lane. Per filter row, each full 4 bytes
    {b0..b3} of the row's run as the pairs {b0, b2}, {b1, b3} (SXTB16 and SXTB16 ROR 8 of one
    word); then the rows' leftover bytes (run % 4 each, row-major) in consecutive pairs."""
    run = geo.k_w * geo.in_c
    full = run // 4
    lanes: list[int] = []
    tail: list[int] = []
    for ky in range(geo.k_h):
        base = ky * run
        for q in range(full):
            b = base + 4 * q
            lanes += [b, b + 2, b + 1, b + 3]
        tail += [base + 4 * full + t for t in range(run % 4)]
    if len(tail) % 2:
        tail.append(-1)
    return np.array(lanes + tail, np.int64)


def pack_win_weights(geo: ConvGeometry, w_rows: np.ndarray) -> np.ndarray:
    """int8 [out_c, K] (TFLite order) -> int8 [out_c, 2 * win_words] in `win_order`."""
    order = win_order(geo)
    w = np.asarray(w_rows, np.int8)
    out = np.zeros((w.shape[0], order.size), np.int8)
    out[:, order >= 0] = w[:, order[order >= 0]]
    return out


def win_scratch_size(geo: ConvGeometry) -> int:
    """ai_conv2d_smallk_win_s8_scratch_size: the staged weights (a word per channel and window
    word), the staged rq rows (16 B per channel), the pixel pair's windows."""
    kw = win_words(geo)
    return 4 * kw * geo.out_c + 16 * geo.out_c + 8 * kw


def lower_win(op: Op, g: Graph, geo: ConvGeometry, w_rows: np.ndarray, table: np.ndarray, rq_mode: int,
              base: str, attrs: dict[str, object]) -> bool:
    """Lower to conv2d_smallk_win_s8 (folded requantisation only); False leaves the op to the caller."""
    if not win_applies(geo) or rq_mode not in (1, 2, 3):
        return False
    w_id = g.add_const(f"{base}/weights_smallk_win", pack_win_weights(geo, w_rows))
    q_id = g.add_const(f"{base}/requant", np.asarray(table, np.int32))
    op.kernel = WIN_KERNEL
    op.inputs = [op.inputs[0], w_id, q_id]
    op.attrs = {**geo.attrs(), **attrs, "rq_fold": int(rq_mode), "reverse": 0}
    op.scratch = win_scratch_size(geo)
    return True


# ---- access orders (passes/lower/overlap.py: where an output may overlap its input) ---------

def smallk_access(a: dict, in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """ai_conv2d_smallk_s8: per batch, blocks of SMALLK_BLOCK output pixels (last to first when
    `reverse`), each block every channel: within a block outputs are written between reads of
    the block's input, so block k (order index i) writes at step 2i and reads at step 2i + 1: an
    output byte may only land on input read by earlier blocks (overlap.py's rule: write step >=
    last read step)."""
    nb, ih, iw, ic = a["batches"], a["in_h"], a["in_w"], a["in_c"]
    oh, ow, oc = a["out_h"], a["out_w"], a["out_c"]
    (sh, sw) = a["stride"]
    npix = oh * ow
    nblk = -(-npix // SMALLK_BLOCK)
    pix = np.arange(npix)
    blk = pix // SMALLK_BLOCK
    order = (nblk - 1 - blk) if a.get("reverse") else blk
    steps = (np.arange(nb)[:, None] * nblk + order[None, :]).astype(np.int64)  # [nb, npix]
    write = np.repeat(2 * steps.reshape(-1), oc)
    last = np.full(in_size, -1, np.int64)
    oy, ox = pix // ow, pix % ow
    src = (oy * sh * iw + ox * sw)  # the input pixel each output pixel reads
    for b in range(nb):
        idx = (b * ih * iw + src)[:, None] * ic + np.arange(ic)[None, :]
        last[idx.reshape(-1)] = np.repeat(2 * steps[b] + 1, ic)
    return write[:out_size], last
