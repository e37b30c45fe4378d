"""Where a kernel's output may overlap its input: the access order of the C kernels, in Python.

A kernel runs in *steps* (conv2d_s8: one output pixel pair; the 3x3 depthwise kernel: one band
of one channel group). Within a step it reads everything it needs before it writes (the im2col
columns, the band's planes, are in scratch), so an output byte written at step s may land on an
input byte whose last read is at a step <= s. `access_steps` gives, per kernel, the step that
writes each output byte and the last step that reads each input byte; `safe_ranges` lists the
offsets of the output relative to the input (multiples of the pool alignment) at which no byte
is written before its last read. They go on `Op.overlap` (with the kernel attrs of the access
order that makes them safe); the planner picks one per op and keeps the pair in one buffer
(planner/liveness.py).

Only kernels whose order is modelled here overlap; elementwise ops keep `Op.inplace` (same
bytes, element i written after element i is read). The C side documents the same orders
(docs/kernels_conv.md, "Access order") and the host poison runner checks them end to end.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower.conv_smallk import smallk_access

AccessSteps = tuple[np.ndarray, np.ndarray]  # (write step per output byte, last read step per input byte)

DW3_HB = 8  # AI_DW3_HB: input rows per band of the 3x3 depthwise kernel
PROBE = 128  # offsets (in alignment units) checked exactly on each side of 0 and of in - out


def _conv_s8(a: dict, in_size: int, out_size: int) -> AccessSteps:
    """ai_conv2d_s8: blocks of output channels in order (one block unless `stage_oc` stages
    smaller ones), then batches in order, output pixels in raster order two at a time (pairs
    from the last to the first when `reverse`); a pair's columns (every tap of both windows)
    are built in scratch before the block's outputs of both pixels are stored. Each block
    re-reads the whole input."""
    nb, ih, iw, ic = a["batches"], a["in_h"], a["in_w"], a["in_c"]
    oh, ow, oc, kh, kw = a["out_h"], a["out_w"], a["out_c"], a["k_h"], a["k_w"]
    (sh, sw), (dh, dw), (ph, pw) = a["stride"], a["dilation"], a["pad"]
    npix = oh * ow
    pairs = (npix + 1) // 2
    pix = np.arange(npix)
    oy, ox = pix // ow, pix % ow
    order = (pairs - 1 - pix // 2) if a.get("reverse") else pix // 2
    write = np.repeat(np.arange(nb)[:, None] * pairs + order[None, :], oc).astype(np.int64)
    blk = _conv_block(oc, int(a.get("stage_oc", 0)))
    nblk = -(-oc // blk)
    if nblk > 1:  # block k's steps come after every step of blocks 0..k-1
        write += np.tile(np.arange(oc) // blk, nb * npix)[:write.size] * (nb * pairs)
    last_pix = np.full(nb * ih * iw, -1, np.int64)
    last = np.full(in_size, -1, np.int64)
    krow = bool(a.get("krow"))
    run = kw * ic
    runp = (run + 3) // 4 * 4 if krow else run
    inside = (ox * sw - pw >= 0) & (ox * sw - pw + kw <= iw)
    extra: list[tuple[np.ndarray, np.ndarray]] = []
    for b in range(nb):
        step = b * pairs + order
        for ky in range(kh):
            iy = oy * sh - ph + ky * dh
            row_ok = (iy >= 0) & (iy < ih)
            for kx in range(kw):
                ix = ox * sw - pw + kx * dw
                ok = row_ok & (ix >= 0) & (ix < iw)
                # one tap maps distinct output pixels to distinct input pixels: no duplicates
                idx = b * ih * iw + iy[ok] * iw + ix[ok]
                last_pix[idx] = np.maximum(last_pix[idx], step[ok])
            if krow and runp > run:  # a padded row read whole from the image: runp - run more bytes
                ok = row_ok & inside
                extra.append((b * ih * iw * ic + (iy[ok] * iw + ox[ok] * sw - pw) * ic + run, step[ok]))
    last[:nb * ih * iw * ic] = np.repeat(last_pix, ic)
    for starts, st in extra:
        for j in range(runp - run):
            idx = starts + j
            keep = idx < in_size
            last[idx[keep]] = np.maximum(last[idx[keep]], st[keep])
    if nblk > 1:  # the last block reads again every byte the first one read
        last[last >= 0] += (nblk - 1) * nb * pairs
    return write[:out_size], last


def _conv_block(oc: int, stage_oc: int) -> int:
    """conv_block in ai_conv_s8.c: output channels per staged block."""
    if stage_oc <= 0 or stage_oc >= oc:
        return oc
    return max(2, stage_oc & ~1)


def _dw3x3(a: dict, in_size: int, out_size: int, group: int = 4) -> AccessSteps:
    """ai_depthwise_conv2d_3x3_s8 / _sgn_s8 (ai_conv_dw_s8.c dw3_run): batches, groups of 4
    output channels (`group` = 2: the _g2 kernels), bands of R output rows along the walk (rows, or columns when
    `transpose`); a band's input rows (3 - S overlapping the next band's) are all copied to
    scratch for the group's channels before its output rows are stored."""
    nb, ih, iw, c = a["batches"], a["in_h"], a["in_w"], a["in_c"]
    oh, ow, oc = a["out_h"], a["out_w"], a["out_c"]
    s = a["stride"][0]
    pad_t, pad_l = a["pad"]
    # walk view: h x w pixels, in_row / in_col byte pitches (dw3_view)
    h, w, in_row, in_col = ih, iw, iw * c, c
    voh, vow, out_row, out_col = oh, ow, ow * oc, oc
    if a.get("transpose"):
        h, w, in_row, in_col = iw, ih, c, iw * c
        voh, vow, out_row, out_col = ow, oh, oc, ow * oc
        pad_t = pad_l
    r_per_band = (DW3_HB - 3) // s + 1
    mult = oc // c
    write = np.full(out_size, -1, np.int64)
    last = np.full(in_size, -1, np.int64)
    step = 0
    xs = np.arange(w)
    oxs = np.arange(vow)
    for b in range(nb):
        ib, ob = b * ih * iw * c, b * oh * ow * oc
        for c0 in range(0, oc, group):
            nch = min(group, oc - c0)
            chans = np.arange(c0, c0 + group) if nch == group and oc == c else (c0 + np.arange(nch)) // mult
            for oy0 in range(0, voh, r_per_band):
                nr = min(r_per_band, voh - oy0)
                iy0, rows = oy0 * s - pad_t, (nr - 1) * s + 3
                iys = np.arange(max(iy0, 0), min(iy0 + rows, h))
                rd = ib + iys[:, None, None] * in_row + xs[None, :, None] * in_col + chans[None, None, :]
                last[rd.reshape(-1)] = step  # steps only grow: the latest read is this one
                oys = np.arange(oy0, oy0 + nr)
                wr = (ob + oys[:, None, None] * out_row + oxs[None, :, None] * out_col
                      + np.arange(c0, c0 + nch)[None, None, :])
                write[wr.reshape(-1)] = step
                step += 1
    return write, last


def _dw3x3_hwc(a: dict, in_size: int, out_size: int) -> AccessSteps:
    """ai_depthwise_conv2d_3x3_hwc_s8 / _sgn_s8 (ai_conv_dw3_hwc_s8.c dwh_run): batches, output
    rows in order, per row the output channels in order, each channel's row walked two outputs at a time
    (then a single one when out_w is odd). A step is one pair: it loads its new input columns
    (stride S: 2S columns from 2jS - pad_l + 2; the first pair also columns -pad_l, 1 - pad_l;
    the single output column 2jS - pad_l + 2) of the window rows inside the image, then stores
    its outputs; the columns the previous step loaded are reused from registers."""
    nb, ih, iw, c = a["batches"], a["in_h"], a["in_w"], a["in_c"]
    oh, ow, oc = a["out_h"], a["out_w"], a["out_c"]
    s, pad_t, pad_l = a["stride"][0], a["pad"][0], a["pad"][1]
    mult = oc // c
    npairs, steps_row = ow // 2, (ow + 1) // 2
    write = np.full(out_size, -1, np.int64)
    last = np.full(in_size, -1, np.int64)
    chans = np.arange(oc)
    for b in range(nb):
        ib, ob = b * ih * iw * c, b * oh * ow * oc
        for oy in range(oh):
            iy0 = oy * s - pad_t
            iys = np.arange(max(iy0, 0), min(iy0 + 3, ih))
            for j in range(steps_row):
                step = ((b * oh + oy) * oc + chans) * steps_row + j  # per output channel
                ix0 = 2 * j * s - pad_l
                cols = list(range(ix0 + 2, ix0 + 2 + (2 * s if j < npairs else 1)))
                if j == 0:
                    cols = [ix0, ix0 + 1, *cols]
                xs = np.array([x for x in cols if 0 <= x < iw], np.int64)
                if xs.size and iys.size:
                    rd = ib + (iys[:, None, None] * iw + xs[None, :, None]) * c + (chans // mult)[None, None, :]
                    np.maximum.at(last, rd.reshape(-1), np.broadcast_to(step[None, None, :], rd.shape).reshape(-1))
                oxs = np.arange(2 * j, min(2 * j + 2, ow))
                wr = ob + (oy * ow + oxs[:, None]) * oc + chans[None, :]
                write[wr.reshape(-1)] = np.broadcast_to(step[None, :], wr.shape).reshape(-1)
    return write, last


def _wino3x3(a: dict, in_size: int, out_size: int) -> AccessSteps:
    """ai_conv2d_wino_s8 (ai_conv_wino_s8.c): batches, bands of 2 output rows top to bottom,
    in each band blocks of `wino_block_tiles` 2x2 tiles left to right. A step is one block:
    its input window (rows oy - pad_t .. + 3, columns ox0 - pad_l .. + 2 * nt + 1, every
    channel) goes into scratch (the transformed V) before any of the block's outputs is
    stored, every output channel. With more than one block per band, the last pixel of the
    band's top input row is copied to scratch at the band's first step and read there (so an
    output a row and a pixel below the input may land on it: the band's first block stores its
    bottom-left pixel there)."""
    from stm32ai.passes.lower.conv_wino import wino_block_tiles  # one home for the block size

    nb, ih, iw, ic = a["batches"], a["in_h"], a["in_w"], a["in_c"]
    oh, ow, oc = a["out_h"], a["out_w"], a["out_c"]
    pad_t, pad_l = a["pad"]
    tb = wino_block_tiles(ow, int(a.get("tiles") or 0))
    nblk = -(-((ow + 1) // 2) // tb)
    write = np.full(out_size, -1, np.int64)
    last = np.full(in_size, -1, np.int64)
    inp = last[:nb * ih * iw * ic].reshape(nb, ih, iw, ic)
    outp = write[:nb * oh * ow * oc].reshape(nb, oh, ow, oc)
    step = 0
    for b in range(nb):
        for oy in range(0, oh, 2):
            first = step
            for ox0 in range(0, ow, 2 * tb):
                nt = min((ow - ox0 + 1) // 2, tb)
                y0, x0 = oy - pad_t, ox0 - pad_l
                inp[b, max(y0, 0):max(y0 + 4, 0), max(x0, 0):max(x0 + 2 * nt + 2, 0)] = step  # steps only grow
                outp[b, oy:oy + 2, ox0:ox0 + 2 * nt] = step
                step += 1
            if nblk > 1 and 0 <= oy - pad_t < ih:  # the kept pixel: last read by the band's copy
                inp[b, oy - pad_t, iw - 1] = first
    return write, last


# attrs a kernel may be given to change its access order, tried when planning overlaps
ORDER_VARIANTS: dict[str, list[dict[str, int]]] = {"conv2d_s8": [{"reverse": 0}, {"reverse": 1}],
                                                   "conv2d_smallk_s8": [{"reverse": 0}, {"reverse": 1}]}

ACCESS_MODELS = {
    "conv2d_s8": _conv_s8,
    # conv2d_smallk_win_s8 gathers a pixel pair's window taps (exactly these, no padded rows) into
    # scratch before storing the pair's outputs: conv2d_s8's order without krow / reverse
    "conv2d_smallk_win_s8": _conv_s8,
    "conv2d_smallk_s8": smallk_access,
    "depthwise_conv2d_3x3_s8": _dw3x3,
    "depthwise_conv2d_3x3_sgn_s8": _dw3x3,
    "depthwise_conv2d_3x3_g2_s8": partial(_dw3x3, group=2),
    "depthwise_conv2d_3x3_g2_sgn_s8": partial(_dw3x3, group=2),
    "conv2d_wino_s8": _wino3x3,
    "depthwise_conv2d_3x3_hwc_s8": _dw3x3_hwc,
    "depthwise_conv2d_3x3_hwc_sgn_s8": _dw3x3_hwc,
}


def access_steps(op: Op, g: Graph, variant: dict[str, int] | None = None) -> AccessSteps | None:
    """The kernel's (write step per output byte, last read step per input byte; -1: never
    read), with `variant` overriding its attrs, or None when its order is not modelled."""
    model = ACCESS_MODELS.get(op.kernel or "")
    if model is None or not op.inputs or op.inputs[0] < 0 or len(op.outputs) != 1:
        return None
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if x.is_const or x.dtype != "int8" or y.dtype != "int8":
        return None
    return model({**op.attrs, **(variant or {})}, x.nbytes, y.nbytes)


def overlap_ok(steps: AccessSteps, delta: int) -> bool:
    """No output byte, placed `delta` bytes after the input's start, lands on an input byte
    that a later step still reads."""
    write, last = steps
    addr = np.arange(write.size) + delta
    m = (addr >= 0) & (addr < last.size)
    return bool(np.all(write[m] >= last[addr[m]]))


def _ok_many(steps: AccessSteps, deltas: np.ndarray, where: np.ndarray) -> np.ndarray:
    """overlap_ok for each of `deltas`, looking only at the output bytes `where`."""
    write, last = steps
    out = np.ones(deltas.size, bool)
    if last.size == 0 or where.size == 0:
        return out
    per = max(1, (1 << 20) // where.size)
    for i in range(0, deltas.size, per):
        addr = where[None, :] + deltas[i:i + per, None]
        inside = (addr >= 0) & (addr < last.size)
        reads = np.where(inside, last[np.clip(addr, 0, last.size - 1)], -1)
        out[i:i + per] = np.all(write[where][None, :] >= reads, axis=1)
    return out


def _hull_forbidden(steps: AccessSteps) -> list[tuple[int, int]]:
    """Offsets ruled out by hulls: for each step, the span of the bytes it writes against the
    span of the input bytes read after it (a superset of the truly unsafe offsets)."""
    write, last = steps
    if write.size == 0 or last.size == 0 or last.max() < 0:
        return []
    read = np.flatnonzero(last >= 0)
    vals, first_i = np.unique(last[read], return_index=True)  # addresses ascend: first = lowest
    rev = read[::-1]
    _, last_i = np.unique(last[rev], return_index=True)
    n = int(max(write.max(), vals.max())) + 2
    lo_at = np.full(n, last.size, np.int64)
    hi_at = np.full(n, -1, np.int64)
    lo_at[vals] = read[first_i]
    hi_at[vals] = rev[last_i]
    # reads strictly after step w: suffix over steps > w
    after_lo = np.minimum.accumulate(lo_at[::-1])[::-1]
    after_hi = np.maximum.accumulate(hi_at[::-1])[::-1]
    b = np.arange(write.size)
    wv, wfirst = np.unique(write, return_index=True)
    _, wlast = np.unique(write[::-1], return_index=True)
    wlo, whi = b[wfirst], b[::-1][wlast]
    nxt = np.minimum(wv + 1, n - 1)
    has = (wv + 1 < n) & (after_hi[nxt] >= 0)
    f0 = after_lo[nxt] - whi
    f1 = after_hi[nxt] - wlo
    return list(zip(f0[has].tolist(), f1[has].tolist(), strict=True))


def _mark_forbidden(grid: np.ndarray, ok: np.ndarray, intervals: list[tuple[int, int]]) -> None:
    """ok[i] = False for every grid point inside one of the closed intervals."""
    if not intervals or grid.size == 0:
        return
    iv = np.array(intervals, np.int64)
    a = np.searchsorted(grid, iv[:, 0], side="left")
    b = np.searchsorted(grid, iv[:, 1], side="right")
    diff = np.zeros(grid.size + 1, np.int64)
    np.add.at(diff, a, 1)
    np.add.at(diff, b, -1)
    ok &= np.cumsum(diff[:-1]) == 0


def safe_ranges(steps: AccessSteps, in_size: int, out_size: int, align: int) -> list[tuple[int, int]]:
    """Safe output offsets, multiples of `align`, as closed ranges [lo, hi]: the ends are the
    two placements side by side (below: -out, above: +in, rounded out), always safe. Every
    offset returned is safe (hull bounds, then exact checks); the exact search looks only near
    0 and near in - out (output ends with the input), so a safe offset far from those that the
    hulls miss may be left out."""
    lo = -((out_size + align - 1) // align) * align
    hi = (in_size + align - 1) // align * align
    grid = np.arange(lo + align, hi, align, dtype=np.int64)
    ok = np.ones(grid.size, bool)
    _mark_forbidden(grid, ok, _hull_forbidden(steps))
    write = steps[0]
    if write.size and grid.size and not ok.all():
        sample = np.unique(np.r_[np.arange(0, write.size, 61), write.size - 1])
        for target in {0, (in_size - out_size) // align * align}:
            near = np.abs(grid - target) <= PROBE * align
            probe = grid[near & ~ok]
            maybe = probe[_ok_many(steps, probe, sample)]
            if maybe.size:
                ok[np.isin(grid, maybe[_ok_many(steps, maybe, np.arange(write.size))])] = True
    good = np.r_[lo, grid[ok], hi]
    ranges: list[tuple[int, int]] = []
    for d in good.tolist():
        if ranges and d == ranges[-1][1] + align:
            ranges[-1] = (ranges[-1][0], d)
        else:
            ranges.append((d, d))
    return ranges


def annotate_overlaps(g: Graph, align: int) -> None:
    """Set `op.overlap` on every op whose kernel may write its output over its input: the
    safe output offsets relative to input 0 as ranges, each with the attrs of the access order
    that makes it safe (the planner applies the one it picks). None when only the placements
    side by side are safe."""
    for op in g.ops:
        if op.kernel == "stripe":  # its overlap comes from its schedule (passes/stripe_overlap.py)
            continue
        op.overlap = None
        found: list[tuple[int, int, dict[str, int]]] = []
        for variant in ORDER_VARIANTS.get(op.kernel or "", [{}]):
            steps = access_steps(op, g, variant)
            if steps is None:
                break
            x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
            ranges = safe_ranges(steps, x.nbytes, y.nbytes, align)
            if len(ranges) > 2 or ranges[0][1] > ranges[0][0] or ranges[-1][0] < ranges[-1][1]:
                found += [(a, b, variant) for a, b in ranges]
        op.overlap = found or None
