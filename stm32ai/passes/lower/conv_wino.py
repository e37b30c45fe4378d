"""int8 CONV_2D 3x3 stride 1 -> ai_conv2d_wino_s8, exact integer Winograd F(2x2, 3x3); 1x3 /
3x1 stride 1 -> ai_conv2d_wino1d_s8, F(2, 3) along the kernel's axis (docs/kernels_conv_wino.md).
Opt-in (`--winograd`, Graph.winograd, every legal layer) or per layer as the lowering variant
`WINO_VARIANT` ("wino", a tuning table's choice); the conv lowering consults `lower_winograd`
before the direct kernel and keeps the direct kernel when it returns False.

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

F(2, 3) (1-D): U' = G' g (4 values), V = B^T d (|V| <= 2 * 255 = 510), A^T (U' . V) = 2 * sum g d;
the same two bounds with VMAX1 = 510 and 2 * 255 * sum |g[oc]|.
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower.conv_geometry import ConvGeometry

G2 = np.array([[2, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 2]], np.int64)  # G' = 2G
VMAX = 4 * 255  # |B^T d B| for |d| <= 255
VMAX1 = 2 * 255  # |B^T d| (1-D)
WINO_VARIANT = "wino"  # the lowering variant's name (tuning tables, stm32ai/tuning.py)
ACC_LIMIT = 1 << 31


def transform_filters(w: np.ndarray) -> np.ndarray:
    """TFLite filter int8 [out_c, 3, 3, in_c] -> U' = G' g G'^T as int64 [out_c, 16, in_c]
    (position 4 * row + col)."""
    g = np.asarray(w, np.int64)
    u = np.einsum("ia,oabc,jb->oijc", G2, g, G2)
    return u.reshape(g.shape[0], 16, g.shape[3])


def transform_filters_1d(w: np.ndarray) -> np.ndarray:
    """TFLite filter int8 [out_c, 1, 3, in_c] or [out_c, 3, 1, in_c] -> U' = G' g as int64
    [out_c, 4, in_c]."""
    g = np.asarray(w, np.int64).reshape(w.shape[0], 3, w.shape[3])
    return np.einsum("ia,oac->oic", G2, g)


def wino_acc_bounds(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel: the worst |M| over the 16 (1-D: 4) positions and the worst
    |4 * sum g d| (1-D: |2 * sum g d|)."""
    one_d = w.shape[1] == 1 or w.shape[2] == 1
    u = transform_filters_1d(w) if one_d else transform_filters(w)
    m = (VMAX1 if one_d else VMAX) * np.abs(u).sum(axis=2).max(axis=1)
    y = (2 if one_d else 4) * 255 * np.abs(np.asarray(w, np.int64)).reshape(w.shape[0], -1).sum(axis=1)
    return m, y


def wino_proved(w: np.ndarray) -> bool:
    """Every transformed-domain sum and the inverse transform's value fit an int32."""
    m, y4 = wino_acc_bounds(w)
    return bool(np.all(m < ACC_LIMIT) and np.all(y4 < ACC_LIMIT))


def pack_wino_weights(w: np.ndarray) -> np.ndarray:
    """3x3: int16 [out_cp / 2][16][in_cp / 2][2 out channels][2 in channels], the kernel's
    channel pair x quad register block (out_cp, in_cp: rounded up to even, zero-filled). The
    input-channel pairs are (2k, 2k + 1), except when in_c % 4 == 0: then each group of 4
    channels g gives the pairs (4g, 4g + 2) and (4g + 1, 4g + 3), the halves SXTB16 splits a
    word of 4 int8 channels into (the kernel's SIMD input transform).
    1-D filters: int16 [out_c][4][in_cp]."""
    one_d = w.shape[1] == 1 or w.shape[2] == 1
    u = transform_filters_1d(w) if one_d else transform_filters(w)
    assert np.abs(u).max(initial=0) <= 1152
    oc, npos, ic = u.shape
    if one_d:
        packed = np.zeros((oc, npos, ic + ic % 2), np.int16)
        packed[:, :, :ic] = u
        return packed.reshape(-1)
    padded = np.zeros((oc + oc % 2, npos, ic + ic % 2), np.int16)
    padded[:oc, :, :ic] = u
    if ic % 4 == 0:  # the kernel's SIMD input transform pairs channels (0, 2), (1, 3) of each 4
        padded = padded.reshape(oc + oc % 2, npos, ic // 4, 4)[..., [0, 2, 1, 3]].reshape(padded.shape)
    ocp, _, icp = padded.shape
    return padded.reshape(ocp // 2, 2, npos, icp // 2, 2).transpose(0, 2, 3, 1, 4).reshape(-1)


WINO_TB = 8  # AI_WINO_TB in ai_conv_wino_s8.c: tiles transformed per block (params `tiles` = 0)


def wino_tiles(core: str | None, code_wait_states: bool = False) -> int:
    """Tiles per block (the kernel's `tiles` param): one quad, the smallest scratch (IC's pool
    peaks at a Winograd layer's step), where code runs without flash wait states (the emulated
    board, the host); two quads on the Cortex-M7 (each output channel pair's weights read twice
    in a row from its D-cache) and where code is fetched from a wait-stated flash through a
    small cache (the ART): a band's blocks alternate between the input-transform code and the
    dot / output code, and each switch refills the I-cache (IC on nucleo-l4r5zi with blocks of
    4: +40,840 estimated fetch stall cycles, +0.3 %; docs/kernels_conv_wino.md)."""
    return 8 if core == "cortex-m7" or code_wait_states else 4


def set_wino_tiles(g: Graph, code_wait_states: bool) -> None:
    """After lowering, when the board is known: each 3x3 Winograd layer's block size
    (`wino_tiles`) and the scratch that follows from it."""
    for op in g.ops:
        if op.kernel == "conv2d_wino_s8":
            op.attrs["tiles"] = wino_tiles(g.core, code_wait_states)
            op.scratch = wino_scratch_size(int(op.attrs["in_c"]), int(op.attrs["out_w"]), op.attrs["tiles"])


def wino_block_tiles(out_w: int, tiles: int) -> int:
    """wino_tb: tiles per block of this layer (the `tiles` param: 4, else WINO_TB)."""
    return min((out_w + 1) // 2, 4 if tiles == 4 else WINO_TB)


def wino_scratch_size(in_c: int, out_w: int, tiles: int = WINO_TB) -> int:
    """ai_conv2d_wino_s8_scratch_size: one pad pixel (in_c bytes, 4-aligned), the kept pixel
    (the same size; only with more than one block per band: the last pixel of the band's top
    input row, copied before the band's first block stores anything), then the transformed
    input of a block of wino_block_tiles tiles rounded up to whole quads of 4, int16
    [quad][16][in_cp / 2][4][2]."""
    tb = wino_block_tiles(out_w, tiles)
    pix = (in_c + 3) // 4 * 4
    keep = pix if tb and -(-((out_w + 1) // 2) // tb) > 1 else 0
    return pix + keep + -(-tb // 4) * 4 * 16 * (in_c + in_c % 2) * 2


WINO1_TB = 16  # AI_WINO1_TB: tiles transformed per block (F(2, 3))


def wino1_scratch_size(in_c: int, walk: int) -> int:
    """ai_conv2d_wino1d_s8_scratch_size: the pad pixel, then a block of min(ceil(walk / 2), 16)
    tiles' V, int16 [tile][4][in_cp]; walk: outputs along the kernel's axis."""
    return (in_c + 3) // 4 * 4 + min((walk + 1) // 2, WINO1_TB) * 4 * (in_c + in_c % 2) * 2


def wino_kernel(geo: ConvGeometry) -> str | None:
    """The Winograd kernel for this geometry (3x3: F(2x2,3x3); 1x3 / 3x1: F(2,3)), or None."""
    if tuple(geo.stride) != (1, 1) or tuple(geo.dilation) != (1, 1):
        return None
    if (geo.k_h, geo.k_w) == (3, 3):
        return "conv2d_wino_s8"
    if (geo.k_h, geo.k_w) in ((1, 3), (3, 1)):
        return "conv2d_wino1d_s8"
    return None


def wino_applies(geo: ConvGeometry) -> bool:
    return wino_kernel(geo) is not None


# The default rule (no --winograd / --no-winograd, no tuning-table entry): a 3x3 layer goes to
# F(2x2,3x3) on these cores from this many input channels, where the estimator measured it
# faster than conv2d_s8 on every IC layer shape (docs/kernels_conv_wino.md "Default"). The
# Cortex-M4 runs the assembly dot (AI_WINO_ASM); the Cortex-M7 gcc's. Other cores (M33, M0+)
# were not measured: direct. 1-D F(2,3) layers were never measured faster: direct.
WINO_MIN_IN_C = {"cortex-m4": 16, "cortex-m7": 32}


def wino_default(geo: ConvGeometry, core: str | None, optimization: str) -> bool:
    """Whether the default choice takes a (legal) layer onto Winograd: a 3x3 stride-1 layer
    with at least WINO_MIN_IN_C[core] input channels, not under --optimization ram (int8
    weights, the smallest flash and RAM; stripes keep the direct kernels' row windows)."""
    n = WINO_MIN_IN_C.get(core or "")
    return (n is not None and optimization != "ram" and wino_kernel(geo) == "conv2d_wino_s8"
            and geo.in_c >= n)


def wino_extra_bytes(geo: ConvGeometry) -> int:
    """Flash the transformed int16 weights take beyond the int8 filter (3x3)."""
    ocp, icp = geo.out_c + geo.out_c % 2, geo.in_c + geo.in_c % 2
    return ocp * 16 * icp * 2 - geo.out_c * 9 * geo.in_c


def wino_legal(geo: ConvGeometry, w: np.ndarray, pad_value: int, in_zp: int) -> bool:
    """Whether the "wino" variant can take this int8 layer: the geometry fits, the padding
    value is the input zero point, and the accumulator proof holds (for the tuner: a layer
    where this is False stays direct whatever a table asks)."""
    if not wino_applies(geo) or pad_value != in_zp or geo.batches < 1:
        return False
    return wino_proved(np.asarray(w, np.int8).reshape(geo.out_c, geo.k_h, geo.k_w, geo.in_c))


def lower_winograd(op: Op, g: Graph, geo: ConvGeometry, w: np.ndarray, table: np.ndarray, fold: bool,
                   base: str, attrs: dict[str, object], in_zp: int) -> bool:
    """Lower to conv2d_wino_s8 when the geometry fits and the accumulator proof holds.
    w: TFLite's int8 filter [out_c, 3, 3, in_c]; table: conv_rq_table's rows built from
    TFLite's own bias (the kernel adds it after the exact / 4); attrs: the int8 attrs. The
    kernel pads with d = 0, i.e. x = in_zp: a fused padding of another value stays direct."""
    if not wino_legal(geo, w, int(attrs["pad_value"]), in_zp):
        return False
    kernel = wino_kernel(geo)
    assert kernel is not None
    w = np.asarray(w, np.int8).reshape(geo.out_c, geo.k_h, geo.k_w, geo.in_c)
    q_id = g.add_const(f"{base}/requant", np.asarray(table, np.int32))
    w_id = g.add_const(f"{base}/weights_wino", pack_wino_weights(w))
    op.kernel = kernel
    op.inputs = [op.inputs[0], w_id, q_id]
    op.attrs = {**geo.attrs(), "pad_value": attrs["pad_value"], "out_offset": attrs["out_offset"],
                "act_min": attrs["act_min"], "act_max": attrs["act_max"], "rq_fold": int(fold)}
    if kernel == "conv2d_wino_s8":
        op.attrs["tiles"] = wino_tiles(g.core)
        op.scratch = wino_scratch_size(geo.in_c, geo.out_w, op.attrs["tiles"])
    else:
        op.scratch = wino1_scratch_size(geo.in_c, geo.out_w if geo.k_w == 3 else geo.out_h)
    return True


WINO_KERNELS = {"conv2d_wino_s8": "F(2x2,3x3)", "conv2d_wino1d_s8": "F(2,3)"}


def _blocks(tiles: int, tb: int, group: int) -> int:
    """Register blocks of `group` tiles in a row of `tiles` tiles swept in blocks of `tb`."""
    full, rest = divmod(tiles, tb)
    return full * -(-tb // group) + -(-rest // group)


def wino_weight_passes(a: dict) -> tuple[int, int]:
    """(times the kernel loads its whole transformed weights, tiles it stores) per inference,
    from the C loops: 3x3, once per quad of tiles; 1-D, once per pair of tiles; the rq table's
    channel row once per tile and channel."""
    b, oh, ow = int(a["batches"]), int(a["out_h"]), int(a["out_w"])
    if int(a["k_h"]) == 3 and int(a["k_w"]) == 3:
        rows, tx = b * ((oh + 1) // 2), (ow + 1) // 2
        return rows * _blocks(tx, int(a.get("tiles") or WINO_TB), 4), rows * tx
    walk, lines = (ow, oh) if int(a["k_w"]) == 3 else (oh, ow)
    tx = (walk + 1) // 2
    return b * lines * _blocks(tx, WINO1_TB, 2), b * lines * tx


def winograd_choices(g: Graph) -> list[dict[str, int]]:
    """Per Winograd layer (for analyze): its kernel and tile ("F(2x2,3x3)" / "F(2,3)"), its
    transformed weights' bytes in flash and the bytes of the same filter as int8 (the direct
    kernel's smallest layout)."""
    rows = []
    for op in g.ops:
        if op.kernel in WINO_KERNELS:
            t = g.tensors[op.inputs[1]]
            assert t.data is not None
            a = op.attrs
            rows.append({"op": op.index, "kernel": op.kernel, "tile": WINO_KERNELS[op.kernel],
                         "weights_bytes": int(t.data.nbytes),
                         "int8_bytes": int(a["k_h"]) * int(a["k_w"]) * int(a["in_c"]) * int(a["out_c"])})
    return rows
