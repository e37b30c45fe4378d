"""int8 CONV_2D 3x3 stride 1 -> ai_conv2d_wino_s8, exact integer Winograd F(2x2, 3x3)
(docs/kernels_conv_wino.md). Opt-in (`--winograd`, Graph.winograd); the conv lowering
consults `lower_winograd` before the direct kernel and keeps the direct kernel when it
returns False.

With G' = 2G = [[2,0,0],[1,1,1],[1,-1,1],[0,0,2]], U' = G' g G'^T and V = B^T d B
(d = x - in_zp, 0 in the padding), A^T (U' . V) A = 4 * sum_taps g * d exactly, TFLite's
accumulator without its bias. Bounds (all proved here, per layer):

* |d| <= 255, B^T has two entries +-1 per row: |V| <= 4 * 255 = 1020 (int16);
* |U'[i][j]| <= r_i r_j 128 with r = the row sums of |G'| (2, 3, 3, 2): <= 1152 (int16);
* M[oc][pos] = sum_ic U' V: |M| <= VMAX * sum_ic |U'[oc][pos][ic]|, must stay < 2^31 (the
  SMLAD chain and its partial sums are bounded by the same sum of magnitudes);
* the inverse transform's value is 4 * TFLite's sum, |.| <= 4 * 255 * sum |g[oc]|, must stay
  < 2^31 (its partial sums wrap harmlessly: the kernel adds modulo 2^32).
Otherwise the layer stays on the direct kernel.
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower.conv_geometry import ConvGeometry

G2 = np.array([[2, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 2]], np.int64)  # G' = 2G
VMAX = 4 * 255  # |B^T d B| for |d| <= 255
ACC_LIMIT = 1 << 31


def transform_filters(w: np.ndarray) -> np.ndarray:
    """TFLite filter int8 [out_c, 3, 3, in_c] -> U' = G' g G'^T as int64 [out_c, 16, in_c]
    (position 4 * row + col)."""
    g = np.asarray(w, np.int64)
    u = np.einsum("ia,oabc,jb->oijc", G2, g, G2)
    return u.reshape(g.shape[0], 16, g.shape[3])


def wino_acc_bounds(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel: the worst |M| over the 16 positions and the worst |4 * sum g d|."""
    u = transform_filters(w)
    m = VMAX * np.abs(u).sum(axis=2).max(axis=1)
    y4 = 4 * 255 * np.abs(np.asarray(w, np.int64)).reshape(w.shape[0], -1).sum(axis=1)
    return m, y4


def wino_proved(w: np.ndarray) -> bool:
    """Every transformed-domain sum and the inverse transform's value fit an int32."""
    m, y4 = wino_acc_bounds(w)
    return bool(np.all(m < ACC_LIMIT) and np.all(y4 < ACC_LIMIT))


def pack_wino_weights(w: np.ndarray) -> np.ndarray:
    """int16 [out_c][16][in_cp], in_cp = in_c rounded up to even (zero-filled)."""
    u = transform_filters(w)
    assert np.abs(u).max(initial=0) <= 1152
    oc, _, ic = u.shape
    packed = np.zeros((oc, 16, ic + ic % 2), np.int16)
    packed[:, :, :ic] = u
    return packed.reshape(-1)


WINO_TB = 8  # AI_WINO_TB in ai_conv_wino_s8.c: tiles transformed per block


def wino_scratch_size(in_c: int, out_w: int) -> int:
    """ai_conv2d_wino_s8_scratch_size: one pad pixel (in_c bytes, 4-aligned), then the
    transformed input of a block of min(ceil(out_w / 2), WINO_TB) tiles, int16 [tile][16][in_cp]."""
    return (in_c + 3) // 4 * 4 + min((out_w + 1) // 2, WINO_TB) * 16 * (in_c + in_c % 2) * 2


def wino_applies(geo: ConvGeometry) -> bool:
    return (geo.k_h == 3 and geo.k_w == 3 and tuple(geo.stride) == (1, 1)
            and tuple(geo.dilation) == (1, 1))


def lower_winograd(op: Op, g: Graph, geo: ConvGeometry, w: np.ndarray, table: np.ndarray, fold: bool,
                   base: str, attrs: dict[str, object], in_zp: int) -> bool:
    """Lower to conv2d_wino_s8 when the geometry fits and the accumulator proof holds.
    w: TFLite's int8 filter [out_c, 3, 3, in_c]; table: conv_rq_table's rows built from
    TFLite's own bias (the kernel adds it after the exact / 4); attrs: the int8 attrs. The
    kernel pads with d = 0, i.e. x = in_zp: a fused padding of another value stays direct."""
    if not wino_applies(geo) or int(attrs["pad_value"]) != in_zp or geo.batches < 1:
        return False
    w = np.asarray(w, np.int8).reshape(geo.out_c, 3, 3, geo.in_c)
    if not wino_proved(w):
        return False
    q_id = g.add_const(f"{base}/requant", np.asarray(table, np.int32))
    w_id = g.add_const(f"{base}/weights_wino", pack_wino_weights(w))
    op.kernel = "conv2d_wino_s8"
    op.inputs = [op.inputs[0], w_id, q_id]
    op.attrs = {**geo.attrs(), "pad_value": attrs["pad_value"], "out_offset": attrs["out_offset"],
                "act_min": attrs["act_min"], "act_max": attrs["act_max"], "rq_fold": int(fold)}
    op.scratch = wino_scratch_size(geo.in_c, geo.out_w)
    return True


def winograd_choices(g: Graph) -> list[dict[str, int]]:
    """Per conv2d_wino_s8 layer (for analyze): its transformed weights' bytes in flash and the
    bytes of the same filter as int8 (the direct kernel's smallest layout)."""
    rows = []
    for op in g.ops:
        if op.kernel == "conv2d_wino_s8":
            t = g.tensors[op.inputs[1]]
            assert t.data is not None
            rows.append({"op": op.index, "weights_bytes": int(t.data.nbytes),
                         "int8_bytes": 9 * int(op.attrs["in_c"]) * int(op.attrs["out_c"])})
    return rows
