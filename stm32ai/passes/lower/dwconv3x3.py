"""int8 DEPTHWISE_CONV_2D 3x3, stride 1 or 2 -> ai_depthwise_conv2d_3x3[_sgn]_s8 (docs/kernels_conv.md).

The kernel is chosen only where its shortcuts are exact for every possible input; everything
it needs is computed here, per channel (10 int32, `pack_dw3x3`):

* weights as int16 pairs {w_k0, w_k1}, {w_k1, w_k2} for each kernel row k (SMLAD operands);
* the folded bias (the input zero point folded in, as for the other int8 convolutions);
* requantisation constants m, khi = 2^(e-2) + out_zp * 2^(e-1), rs = e - 1 (e = -shift).

The kernel computes `hi32({khi + s, 2^30 ^ s} + acc*m) >> rs` with s = acc >> 31, then SSAT 8.
TFLite's double rounding is `floor((acc*m + 2^30 + 2^(30+e) - 2^31*[acc<0]) / 2^(31+e))`; the
EOR makes the 64-bit addend 1 smaller for negative acc, which changes the floor only if the
exact numerator is a multiple of 2^(31+e), which needs acc*m == 2^30 (mod 2^31), i.e. a
negative acc with v2(acc) = 30 - v2(m). `fast_requant_exact` rules that out from the
accumulator's range (from the weights, bias and zero point), so the kernel is bit-exact.
Layers where it cannot (or with a channel at shift -1) take ai_depthwise_conv2d_3x3_sgn_s8,
whose sign term is exact for every accumulator (`sign_exact_ok`), 2 instructions more per
output; anything else stays on the general kernels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower.common import scale_of, zp_of
from stm32ai.passes.lower.conv_geometry import ConvGeometry
from stm32ai.passes.quant import per_channel_multiplier, quantize_multiplier

DW3_HB = 8  # AI_DW3_HB in ai_conv_dw_s8.c: input rows per band
DW3_K = 10  # AI_DW3_K: int32 constants per channel
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# `rqd` from this many outputs per walked row (one quad): below, the doubled rows' larger frame
# cost more than the requantisation they save (VWW's 3x3 layer: 21,721 -> 22,314 estimated
# cycles on nucleo-l4r5zi; its 6x6 layers gain; docs/kernels_conv.md)
DW3_RQD_MIN_W = 4


def acc_range(w_taps: np.ndarray, bias: np.ndarray | None, in_zp: int) -> tuple[np.ndarray, np.ndarray]:
    """Per channel, the least and greatest value of TFLite's accumulator
    bias + sum_t w_t * (x_t - in_zp) over all int8 inputs (a padded tap adds 0)."""
    w = np.asarray(w_taps, np.int64)  # [taps, C]
    lo_d, hi_d = -128 - in_zp, 127 - in_zp
    b = np.zeros(w.shape[1], np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
    lo = b + np.minimum(w * lo_d, w * hi_d).sum(axis=0)
    hi = b + np.maximum(w * lo_d, w * hi_d).sum(axis=0)
    return lo, hi


def _v2(m: int) -> int:
    return (m & -m).bit_length() - 1


def sign_exact_ok(m: int, shift: int) -> bool:
    """The `_sgn` kernel's requantisation (exact sign term) equals TFLite's for every int32
    accumulator: needs 1 <= e <= 23 (e = -shift; e <= 23 keeps khi and the 64-bit sum in range)."""
    return m > 0 and 1 <= -shift <= 23


def fast_requant_exact(m: int, shift: int, lo: int, hi: int) -> bool:
    """True when the EOR requantisation equals TFLite's for every acc in [lo, hi]."""
    e = -shift
    if m <= 0 or not 2 <= e <= 23:  # e <= 23: khi and the 64-bit sum never overflow
        return False
    if lo < INT32_MIN or hi > INT32_MAX:  # the accumulator could wrap
        return False
    return lo >= 0 or -lo < (1 << (30 - _v2(m)))


def dw3x3_plane_w(in_w: int, out_w: int, stride: int, pad_l: int) -> int:
    """int16 columns per plane row: the interior at pad_l .. pad_l+in_w-1 and every word the
    pair loop and the odd-output tail read (the kernel's pairs read one word beyond a pair
    at stride 1, two at stride 2)."""
    pairs, odd = out_w // 2, out_w % 2
    if stride == 1:
        words = pairs + 1 + odd
    else:
        words = max(2 * pairs + 1, 2 * pairs + 2 if odd else 0)
    return 2 * max(words, (pad_l + in_w + 1) // 2)


def dw3x3_scratch_size(plane_w: int, group: int = 4, stage: int = 0) -> int:
    """ai_depthwise_conv2d_3x3[_g2]_s8_scratch_size: `group` planes of plane_w/2 words x DW3_HB rows,
    then (stage) the group's packed constants, 10 words per channel."""
    return group * ((plane_w // 2) * DW3_HB + (10 if stage else 0)) * 4


# stripe members on the HWC kernel: only rows of at most this many outputs. Its assembly takes any
# width, but on wider rows the planar kernel's row loop wins even with its per-call set-up: VWW
# ram with every stride-1 and stride-2 member on HWC (band 3) 11,570,941 est. cycles against
# 11,369,800 with the short rows only (session 35, nucleo-l4r5zi); docs/stripes.md
DW3_HWC_MAX_OUT_W = 8


def dw3x3_hwc_ok(a: dict) -> bool:
    """A stripe member lowered to the planar kernel with these attrs may run
    ai_depthwise_conv2d_3x3_hwc_s8 (the band option "<band>:hwc"): the row walk (packed constants
    not transposed), constants not staged, and a geometry of the kernel's Armv7E-M assembly rows,
    multiplier 1 and stride 1 (pad_l 1, out_w == in_w) or stride 2 SAME (pad_l = in_w & 1,
    out_w = ceil(in_w / 2)), with short rows (DW3_HWC_MAX_OUT_W)."""
    if a.get("transpose") or a.get("stage") or int(a["in_c"]) != int(a["out_c"]) or int(a["in_w"]) < 2:
        return False
    s, pl, ow, iw = int(a["stride"][0]), int(a["pad"][1]), int(a["out_w"]), int(a["in_w"])
    if int(a["stride"][1]) != s or ow > DW3_HWC_MAX_OUT_W:
        return False
    return (s == 1 and pl == 1 and ow == iw) or (s == 2 and pl == iw % 2 and ow == (iw + 1) // 2)


def dw3x3_hwc_any(a: dict) -> bool:
    """A stripe member lowered to the planar kernel with these attrs can run
    ai_depthwise_conv2d_3x3_hwc_s8 at all (the band option "<band>:hwc-all"): the same params
    and packed constants (not transposed, not staged); its portable path takes any stride, pad,
    row width and multiplier (tests/test_dw3_hwc.py). No scratch: the planar kernel's planes
    (1,600 B on VWW's 48-pixel rows, 2-channel) leave the stripe's peak, at the C loop's speed
    on rows the assembly does not take (`staging.hwc_cycles`)."""
    return not a.get("transpose") and not a.get("stage")


def _pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int16 pairs {a low, b high} as int32."""
    u = (a.astype(np.int64) & 0xFFFF) | ((b.astype(np.int64) & 0xFFFF) << 16)
    return u.astype(np.uint32).view(np.int32)


def pack_dw3x3(w_taps: np.ndarray, bias_folded: np.ndarray, mult: np.ndarray, shift: np.ndarray,
               out_zp: int) -> np.ndarray:
    """[C, 10] int32 per-channel block (flattened): {w_k0,w_k1}, {w_k1,w_k2} for k = 0..2,
    folded bias, m, khi, rs."""
    w = np.asarray(w_taps, np.int64).reshape(3, 3, -1)  # [ky, kx, C]
    c = w.shape[2]
    e = -np.asarray(shift, np.int64)
    out = np.zeros((c, DW3_K), np.int32)
    for k in range(3):
        out[:, 2 * k] = _pairs(w[k, 0], w[k, 1])
        out[:, 2 * k + 1] = _pairs(w[k, 1], w[k, 2])
    out[:, 6] = bias_folded
    out[:, 7] = mult
    # khi: the high word of 2^30 + 2^(30+e) (0 for e = 1, whose 3 * 2^30 the kernel keeps in
    # the low word) plus the output zero point times 2^(31+e) / 2^32
    khi = np.where(e >= 2, np.int64(1) << np.maximum(e - 2, 0), 0)
    out[:, 8] = khi + np.int64(out_zp) * (np.int64(1) << (e - 1))
    out[:, 9] = e - 1
    return out.reshape(-1)


def dw3x3_double_mode(packed: np.ndarray, lo: np.ndarray, hi: np.ndarray, out_zp: int,
                      rq_double_mode: Callable[[np.ndarray, np.ndarray, int], int]) -> int:
    """The `rqd` param: 3 or 2 when the Cortex-M4 rows may requantise from the doubled
    accumulator (conv2d_s8's `rq_fold` 3 / 2: SMMLAR on 2*acc, without / with the sign term),
    else 0. The packed khi is rq_fold's kf for e >= 2 (2^(e-2) + out_zp * 2^(e-1), rs = e - 1),
    so conv.py's proof applies as it stands to the table {bias, m, rs, khi} and the exact
    accumulator range [lo, hi]; other cores ignore the param. `rq_double_mode` is conv.py's
    (passed in: conv.py imports this module)."""
    k = np.asarray(packed, np.int64).reshape(-1, DW3_K)
    if not bool(np.all(k[:, 9] >= 1)):  # e = 1: the rounding constant 3 * 2^30 has no kf
        return 0
    table = np.stack([k[:, 6], k[:, 7], k[:, 9], k[:, 8]], axis=1)
    bound = np.maximum(np.abs(np.asarray(lo, np.int64)), np.abs(np.asarray(hi, np.int64)))
    mode = rq_double_mode(table, bound, out_zp)
    return mode if mode >= 2 else 0


def requant_pairs(in_scale: float, filter_scales: np.ndarray, out_scale: float,
                  n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (multiplier, shift), exactly as conv.py's tables (TFLite's arithmetic)."""
    s = np.asarray(filter_scales, np.float32).reshape(-1)
    if s.size == 1:
        s = np.repeat(s, n)
    pairs = [quantize_multiplier(per_channel_multiplier(in_scale, float(v), out_scale)) for v in s]
    return np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64)


def dw3x3_eligible(k: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
                   depth_mult: int, act: tuple[int, int]) -> bool:
    """Shape and clamp conditions of the 3x3 kernel (the requantisation is checked apart)."""
    return (k == (3, 3) and dilation == (1, 1) and stride in ((1, 1), (2, 2)) and depth_mult >= 1
            and act == (-128, 127))


def lower_dw3x3(op: Op, g: Graph, geo: ConvGeometry, w_taps: np.ndarray, bias: np.ndarray | None,
                base: str, q: dict, folded_bias: np.ndarray,
                rq_double_mode: Callable[[np.ndarray, np.ndarray, int], int]) -> bool:
    """Lower an int8 depthwise op to depthwise_conv2d_3x3_s8 when every condition holds
    (multiplier M > 1: output channel oc reads input channel oc // M, gathered byte by byte
    in the transposition); False leaves the op to the general kernels. conv.py passes its
    int8 attrs `q` (pad value, clamp) and the bias with the input zero point folded in."""
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    if not dw3x3_eligible((geo.k_h, geo.k_w), geo.stride, geo.dilation, geo.out_c // geo.in_c,
                          (int(q["act_min"]), int(q["act_max"]))):
        return False
    assert w.quant is not None
    mult, shift = requant_pairs(scale_of(x), np.asarray(w.quant.scale), scale_of(y), geo.out_c)
    lo, hi = acc_range(w_taps, bias, zp_of(x))
    if all(fast_requant_exact(int(m), int(s), int(a), int(b))
           for m, s, a, b in zip(mult, shift, lo, hi, strict=True)):
        kernel = "depthwise_conv2d_3x3_s8"
    elif all(sign_exact_ok(int(m), int(s)) for m, s in zip(mult, shift, strict=True)):
        kernel = "depthwise_conv2d_3x3_sgn_s8"  # 2 more instructions per output
    else:
        return False
    # Walk the image along its longer side: more output pairs per row, fewer rows. The longer
    # plane needs more scratch (KWS 25x5: 1,792 B instead of 512 B), so --optimization ram
    # keeps the row walk, and balanced fills the planes 2 channels at a time (the _g2
    # kernels: half the scratch, 896 B on KWS, for ~1 % more instructions on such layers).
    transpose = geo.in_h > geo.in_w and g.optimization != "ram"
    group = 2 if transpose and g.optimization == "balanced" else 4
    if group == 2:
        kernel = kernel.replace("3x3_", "3x3_g2_")
    taps = w_taps.reshape(3, 3, -1).transpose(1, 0, 2).reshape(9, -1) if transpose else w_taps
    packed = pack_dw3x3(taps, folded_bias, mult, shift, zp_of(y))
    if transpose:
        plane_w = dw3x3_plane_w(geo.in_h, geo.out_h, geo.stride[0], geo.pad[0])
    else:
        plane_w = dw3x3_plane_w(geo.in_w, geo.out_w, geo.stride[1], geo.pad[1])
    walk_w = geo.out_h if transpose else geo.out_w  # outputs per row of the walk
    op.kernel = kernel
    op.inputs = [op.inputs[0], g.add_const(f"{base}/dw3x3_packed", packed)]
    op.attrs = {**geo.attrs(), "pad_value": q["pad_value"], "plane_w": plane_w,
                "transpose": int(transpose), "stage": 0,
                "rqd": dw3x3_double_mode(packed, lo, hi, zp_of(y), rq_double_mode) if walk_w >= DW3_RQD_MIN_W else 0}
    op.scratch = dw3x3_scratch_size(plane_w, group)
    return True
