"""An independent checker of memory plans that understands partial overlaps.

It replays the run on a model of the pool: every byte records which tensor's value it holds.
Each kernel is replayed in its C loop order at pixel / band granularity (written from the C
sources, not from stm32ai/passes/lower/overlap.py): each step first checks that every byte it
reads still holds the input, then stamps the bytes it writes with the output. Scratch is
stamped as garbage. Any byte overwritten before its last read, by the op itself or by another
buffer, fails an assertion naming the op and the tensor.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.planner import Plan

GARBAGE = -2
Step = tuple[np.ndarray, np.ndarray]  # (input byte indices read, output byte indices written)


def _conv_steps(a: dict) -> Iterator[Step]:
    """ai_conv2d_s8: per block of staged output channels (one block unless `stage_oc`), per
    batch, pixel pairs (n, n+1) forward or, with `reverse`, backward; both windows' taps are
    read (krow: each row's padded run) before the block's channels of both pixels are stored."""
    ih, iw, ic, oh, ow, oc = a["in_h"], a["in_w"], a["in_c"], a["out_h"], a["out_w"], a["out_c"]
    kh, kw = a["k_h"], a["k_w"]
    (sh, sw), (dh, dw), (ph, pw) = a["stride"], a["dilation"], a["pad"]
    npix, run = oh * ow, kw * ic
    runp = (run + 3) // 4 * 4 if a.get("krow") else run
    starts = list(range(0, npix, 2))
    if a.get("reverse"):
        starts.reverse()
    s_oc = int(a.get("stage_oc", 0))  # staged blocks of output channels (C: conv_block)
    blk = oc if s_oc <= 0 or s_oc >= oc else max(2, s_oc & ~1)
    for b, c0 in ((b, c0) for c0 in range(0, oc, blk) for b in range(a["batches"])):
        ib, ob = b * ih * iw * ic, b * npix * oc
        nc = min(blk, oc - c0)
        for n in starts:
            reads = []
            for p in {n, min(n + 1, npix - 1)}:
                oy, ox = divmod(p, ow)
                for ky in range(kh):
                    iy = oy * sh - ph + ky * dh
                    if not 0 <= iy < ih:
                        continue
                    x0 = ox * sw - pw
                    if a.get("krow") and x0 >= 0 and x0 + kw <= iw:
                        s = ib + (iy * iw + x0) * ic
                        reads.append(np.arange(s, min(s + runp, ib + ih * iw * ic)))
                        continue
                    for kx in range(kw):
                        ix = x0 + kx * dw
                        if 0 <= ix < iw:
                            s = ib + (iy * iw + ix) * ic
                            reads.append(np.arange(s, s + ic))
            last = min(n + 1, npix - 1)
            writes = [np.arange(ob + q * oc + c0, ob + q * oc + c0 + nc) for q in range(n, last + 1)]
            yield (np.concatenate(reads) if reads else np.zeros(0, np.int64), np.concatenate(writes))


def _dw3_steps(a: dict, g: int = 4) -> Iterator[Step]:
    """ai_depthwise_conv2d_3x3_s8 (dw3_run): per batch, per group of g output channels (4; 2 for
    the _g2 kernels), per
    band of R output rows of the walk: the band's input rows (group channels) are copied to
    scratch, then its output rows stored."""
    ih, iw, c, oh, ow, oc = a["in_h"], a["in_w"], a["in_c"], a["out_h"], a["out_w"], a["out_c"]
    s = a["stride"][0]
    hb = 8
    if a.get("transpose"):
        h, w, in_row, in_col, pad_t = iw, ih, c, iw * c, a["pad"][1]
        voh, vow, out_row, out_col = ow, oh, oc, ow * oc
    else:
        h, w, in_row, in_col, pad_t = ih, iw, iw * c, c, a["pad"][0]
        voh, vow, out_row, out_col = oh, ow, ow * oc, oc
    rpb = (hb - 3) // s + 1
    for b in range(a["batches"]):
        ib, ob = b * ih * iw * c, b * oh * ow * oc
        for c0 in range(0, oc, g):
            nch = min(g, oc - c0)
            chans = list(range(c0, c0 + g)) if nch == g and oc == c else [(c0 + k) // (oc // c) for k in range(nch)]
            for oy0 in range(0, voh, rpb):
                nr = min(rpb, voh - oy0)
                iy0 = oy0 * s - pad_t
                reads = [ib + iy * in_row + ix * in_col + ch
                         for iy in range(max(iy0, 0), min(iy0 + (nr - 1) * s + 3, h))
                         for ix in range(w) for ch in chans]
                writes = [ob + oy * out_row + ox * out_col + c0 + k
                          for oy in range(oy0, oy0 + nr) for ox in range(vow) for k in range(nch)]
                yield np.array(reads, np.int64), np.array(writes, np.int64)


def _dwh_steps(a: dict) -> Iterator[Step]:
    """ai_depthwise_conv2d_3x3_hwc_s8 (ai_conv_dw3_hwc_s8.c dwh_run / the M4 row assembly): per
    batch, per output row, per output channel (input channel oc / M), the row's pixel pairs: a
    pair loads the columns it adds (the first pair also the two before them) of the window rows
    inside the image, then stores its outputs; earlier columns are reused from registers."""
    ih, iw, c, oh, ow, oc = a["in_h"], a["in_w"], a["in_c"], a["out_h"], a["out_w"], a["out_c"]
    s, pt, pl = a["stride"][0], a["pad"][0], a["pad"][1]
    for b in range(a["batches"]):
        ib, ob = b * ih * iw * c, b * oh * ow * oc
        for oy in range(oh):
            rows = [y for y in range(oy * s - pt, oy * s - pt + 3) if 0 <= y < ih]
            for ch in range(oc):
                for j in range((ow + 1) // 2):
                    x0 = 2 * j * s - pl
                    cols = list(range(x0 + 2, x0 + 2 + (2 * s if 2 * j + 1 < ow else 1)))
                    if j == 0:
                        cols = [x0, x0 + 1, *cols]
                    reads = [ib + (y * iw + x) * c + ch // (oc // c) for y in rows for x in cols if 0 <= x < iw]
                    writes = [ob + (oy * ow + x) * oc + ch for x in range(2 * j, min(2 * j + 2, ow))]
                    yield np.array(reads, np.int64), np.array(writes, np.int64)


def _wino_steps(a: dict) -> Iterator[Step]:
    """ai_conv2d_wino_s8: per batch, per band of 2 output rows, per block of tb tiles (params
    `tiles` 4, else 8; fewer when the row has fewer): each tile's 4x4 window is transformed
    into scratch (pixels outside the image: the pad pixel, in scratch), then each tile's 2x2
    outputs stored, every channel. A band of more than one block copies its top input row's
    last pixel to scratch (`keep`) before its first block, and its tiles read that copy."""
    ih, iw, ic, oh, ow, oc = a["in_h"], a["in_w"], a["in_c"], a["out_h"], a["out_w"], a["out_c"]
    pt, pl = a["pad"]
    tx = (ow + 1) // 2
    tb = min(tx, 4 if a.get("tiles") == 4 else 8)
    multi = (tx + tb - 1) // tb > 1
    for b in range(a["batches"]):
        ib, ob = b * ih * iw * ic, b * oh * ow * oc
        for oy in range(0, oh, 2):
            kept = (oy - pt, iw - 1) if multi and 0 <= oy - pt < ih else None
            for ox0 in range(0, ow, 2 * tb):
                nt = min((ow - ox0 + 1) // 2, tb)
                reads, writes = [], []
                if kept and ox0 == 0:  # the copy, before the band's first block
                    reads.append(np.arange(ib + (kept[0] * iw + kept[1]) * ic, ib + (kept[0] * iw + kept[1] + 1) * ic))
                for t in range(nt):
                    for i in range(4):
                        for j in range(4):
                            iy, ix = oy - pt + i, ox0 + 2 * t - pl + j
                            if 0 <= iy < ih and 0 <= ix < iw and (iy, ix) != kept:
                                reads.append(np.arange(ib + (iy * iw + ix) * ic, ib + (iy * iw + ix + 1) * ic))
                    for dy in range(2):
                        for dx in range(2):
                            y, x = oy + dy, ox0 + 2 * t + dx
                            if y < oh and x < ow:
                                writes.append(np.arange(ob + (y * ow + x) * oc, ob + (y * ow + x + 1) * oc))
                yield (np.concatenate(reads) if reads else np.zeros(0, np.int64),
                       np.concatenate(writes) if writes else np.zeros(0, np.int64))


def _smallk_steps(a: dict) -> Iterator[Step]:
    """ai_conv2d_smallk_s8 (1x1): per batch, blocks of SMALLK_BLOCK output pixels (last block
    first with `reverse`); inside a block each output channel streams all the block's pixels, so
    channel 0's stores precede channel 1's reads of the same input: a block's step writes its
    outputs, then its input is read again (an output on the block's own input is caught)."""
    from stm32ai.passes.lower.conv_smallk import SMALLK_BLOCK

    ih, iw, ic, oh, ow, oc = a["in_h"], a["in_w"], a["in_c"], a["out_h"], a["out_w"], a["out_c"]
    sh, sw = a["stride"]
    npix = oh * ow
    blocks = [range(p0, min(p0 + SMALLK_BLOCK, npix)) for p0 in range(0, npix, SMALLK_BLOCK)]
    if a.get("reverse"):
        blocks.reverse()
    for b in range(a["batches"]):
        for blk in blocks:
            src = [b * ih * iw + (p // ow) * sh * iw + (p % ow) * sw for p in blk]
            reads = np.concatenate([np.arange(q * ic, q * ic + ic) for q in src])
            writes = np.concatenate([np.arange((b * npix + p) * oc, (b * npix + p + 1) * oc) for p in blk])
            yield reads, writes
            yield reads, np.zeros(0, np.int64)


KERNEL_STEPS = {"conv2d_s8": _conv_steps, "depthwise_conv2d_3x3_s8": _dw3_steps,
                # the window kernel gathers exactly the window taps of a pixel pair (no krow runs),
                # forward only, before storing the pair: conv2d_s8's plain order
                "conv2d_smallk_win_s8": lambda a: _conv_steps({**a, "krow": 0, "reverse": 0}),
                "conv2d_smallk_s8": _smallk_steps,
                "conv2d_wino_s8": _wino_steps,
                "depthwise_conv2d_3x3_sgn_s8": _dw3_steps,
                "depthwise_conv2d_3x3_g2_s8": lambda a: _dw3_steps(a, 2),
                "depthwise_conv2d_3x3_g2_sgn_s8": lambda a: _dw3_steps(a, 2),
                "depthwise_conv2d_3x3_hwc_s8": _dwh_steps,
                "depthwise_conv2d_3x3_hwc_sgn_s8": _dwh_steps}


def simulate_plan(g: Graph, plan: Plan) -> None:
    """Replay the plan; AssertionError on the first byte read after it was overwritten."""
    owner = np.full(plan.pool_size, -1, np.int64)
    canon: dict[int, int] = {}
    for op in g.ops:
        if op.kernel == "__nop":
            canon[op.outputs[0]] = canon.get(op.inputs[0], op.inputs[0])

    def key(t: int) -> int:
        return canon.get(t, t)

    def span(t: int) -> tuple[int, int] | None:
        if t in plan.app_owned or t < 0 or g.tensors[t].is_const:
            return None
        o = plan.tensor_offset(t)
        return o, o + g.tensors[t].nbytes

    def check(t: int, idx: np.ndarray | None, what: str) -> None:
        sp = span(t)
        if sp is None:
            return
        sel = owner[sp[0]:sp[1]] if idx is None else owner[sp[0] + idx]
        bad = np.flatnonzero(sel != key(t))
        assert bad.size == 0, (f"{what}: tensor {t} ({g.tensors[t].name!r}) byte "
                               f"{int(bad[0] if idx is None else idx[bad[0]])} was overwritten "
                               f"(holds {int(sel[bad[0]])})")

    def stamp(t: int, idx: np.ndarray | None = None) -> None:
        sp = span(t)
        if sp is None:
            return
        if idx is None:
            owner[sp[0]:sp[1]] = key(t)
        else:
            owner[sp[0] + idx] = key(t)

    for t in g.inputs:
        stamp(t)
    for t in g.used_tensor_ids():
        if g.tensors[t].variable and not g.tensors[t].is_const:
            stamp(t)
    for step, op_idx in enumerate(plan.order):
        op = g.ops[op_idx]
        what = f"step {step} {op.where} {op.kernel}"
        if op.kernel == "__nop":
            check(op.inputs[0], None, what)
            continue
        if op.kernel == "stripe":
            _run_stripe(g, plan, op_idx, owner, check, stamp, what)
            continue
        if op_idx in plan.scratch_buffer:
            b = plan.scratch_buffer[op_idx]
            owner[plan.offsets[b]:plan.offsets[b] + plan.buffers[b].size] = GARBAGE
        _run_op(g, plan, op, check, stamp, what)
    for t in g.outputs:
        check(t, None, "end of run")


RING = -100  # ring r's rows hold RING - r
SPLIT = -10_000  # a split ring's k-th row written holds SPLIT - k


def _run_stripe(g: Graph, plan: Plan, op_idx: int, owner: np.ndarray, check, stamp, what: str) -> None:
    """A stripe op, step by step from its table (docs/stripes.md): each call first checks the
    rows it reads (of a whole input, or of a ring: stamped RING - r when written), then stamps
    the rows it writes (of the whole output, or of a ring) and its kernel scratch as garbage;
    a joined layout (scratch over the dying input, `scratch_at_input`) is replayed at its
    offsets, so a ring, the kernel scratch or an output row laid on input bytes still to be
    read, or on each other, fails here."""
    op = g.ops[op_idx]
    st = op.attrs["stripe"]
    joint = st.get("joint") if op.attrs.get("scratch_at_input") == 1 else None
    with_out = st.get("joint") if op.attrs.get("scratch_with_output") == 1 else None
    joint = joint or with_out
    ring_off = joint["ring_offset"] if joint else [r["offset"] for r in st["rings"]]
    m_off = joint["scratch_offsets"] if joint else \
        [m.get("scratch_offset", st["member_scratch_offset"]) for m in st["members"]]
    acc = joint["acc_offset"] if joint else st.get("acc_offset", -1)
    base = plan.scratch_offset(op_idx) if op_idx in plan.scratch_buffer else None
    if with_out:  # the output's buffer inside the scratch: the bytes around it are the stripe's
        assert base is not None and base + with_out["y"] == plan.tensor_offset(op.outputs[0]), \
            "the output is not where the joint layout put it"
        assert base + with_out["size"] <= plan.pool_size
        owner[base:base + with_out["size"]] = GARBAGE
    elif joint:
        assert base == plan.tensor_offset(op.inputs[0]), "joined scratch not at the input's start"
    else:
        assert base is None or base + op.scratch <= plan.pool_size
        if base is not None:
            owner[base:base + op.scratch] = GARBAGE
    n_mem = len(st["members"])

    def rows(rb: int, r0: int, n: int) -> np.ndarray:
        return np.arange(r0 * rb, (r0 + n) * rb)

    slots = (joint or {}).get("slots") or [None] * len(st["rings"])

    def ring_bytes(r: int, r0: int, n: int) -> slice | np.ndarray:
        rb = st["rings"][r]["row_bytes"]
        if slots[r] is not None:  # a split ring: each row slot at its own offset (joint["slots"])
            return np.concatenate([np.arange(base + slots[r][x], base + slots[r][x] + rb) for x in range(r0, r0 + n)]
                                  or [np.zeros(0, dtype=np.int64)])
        return slice(base + ring_off[r] + r0 * rb, base + ring_off[r] + (r0 + n) * rb)

    # a split ring's rows: each written row its own label (SPLIT - k), each slot the label it
    # should hold, moved row by row as the executor's per-row copies (emitter `_split_drop`), so
    # two slots of one ring on the same bytes show too
    expect: dict[tuple[int, int], int] = {}
    made = [0]

    def slot_bytes(r: int, x: int) -> np.ndarray:
        rb = st["rings"][r]["row_bytes"]
        return np.arange(base + slots[r][x], base + slots[r][x] + rb)

    def ring_write(r: int, r0: int, n: int) -> None:
        if slots[r] is None:
            owner[ring_bytes(r, r0, n)] = RING - r
            return
        for x in range(r0, r0 + n):
            made[0] += 1
            expect[(r, x)] = SPLIT - made[0]
            owner[slot_bytes(r, x)] = expect[(r, x)]

    def ring_holds(r: int, r0: int, n: int) -> bool:
        if slots[r] is None:
            return bool((owner[ring_bytes(r, r0, n)] == RING - r).all())
        return all((owner[slot_bytes(r, x)] == expect.get((r, x), GARBAGE)).all() for x in range(r0, r0 + n))

    def split_move(r: int, k: int, dst: int, n: int, dead: range) -> None:
        """n rows from slot dst + k down to dst, one by one in increasing order, then `dead` garbage."""
        for x in range(dst, dst + n):
            assert ring_holds(r, x + k, 1), f"{what}: ring {r} lost a live row before a move"
            owner[slot_bytes(r, x)] = owner[slot_bytes(r, x + k)]
            expect[(r, x)] = expect[(r, x + k)]
        for x in dead:
            owner[slot_bytes(r, x)] = GARBAGE
            expect.pop((r, x), None)

    for e in st["table"]:
        if e[0] < 0 and e[3] == 3:  # DROP_KEEP: the rows hold a row written in place (stamped then)
            continue
        if e[0] < 0 and slots[-1 - e[0]] is not None:  # a split ring's drop or move
            r = -1 - e[0]
            if e[3] == 1:
                split_move(r, 0, 0, 0, range(e[4], e[4] + e[1]))
            elif e[3] == 2:
                split_move(r, e[1], e[4], e[2], range(e[4] + e[2], e[5] + e[2]))
            else:
                split_move(r, e[1], 0, e[2] - e[1], range(e[2] - e[1], e[2]))
            continue
        if e[0] < 0 and e[3] == 1:  # a high ring's drop: the rows at slot e[4] die in place
            owner[ring_bytes(-1 - e[0], e[4], e[1])] = GARBAGE
            continue
        if e[0] < 0 and e[3] == 2:  # a high ring's move: its e[2] live rows from slot e[5] to e[4]
            r = -1 - e[0]
            live = owner[ring_bytes(r, e[5], e[2])].copy()
            assert (live == RING - r).all(), f"{what}: ring {r} lost a live row before a move"
            owner[ring_bytes(r, e[5], e[2])] = GARBAGE
            owner[ring_bytes(r, e[4], e[2])] = live
            continue
        if e[0] < 0:  # a low ring's drop: the live rows move to the ring's start
            r = -1 - e[0]
            live = owner[ring_bytes(r, e[1], e[2] - e[1])].copy()
            assert (live == RING - r).all(), f"{what}: ring {r} lost a live row before a drop"
            owner[ring_bytes(r, 0, e[2] - e[1])] = live
            owner[ring_bytes(r, e[2] - e[1], e[1])] = GARBAGE
            continue
        if e[0] >= n_mem:
            q = e[0] - n_mem
            if q < len(st.get("sources", ())):  # rows from the row source into a ring
                ring_write(st["sources"][q]["ring"], e[4], e[1])
            continue  # dead input rows (poisoned by the executor): nothing to check
        m = st["members"][e[0]]
        if m["scratch"] > 0 and m["kind"] != "reduce":  # written while the call reads its rows
            if "wide" in m and e[6] >= 1:  # a wide call: the op's own kernel in its region e[6] - 1
                w, q = m["wide"], e[6] - 1
                if joint:
                    o = joint["wide_regions"][e[0]][q] if joint.get("wide_regions", [[]] * n_mem)[e[0]] \
                        else joint["wide_offsets"][e[0]]
                else:
                    o = w["offsets"][q] if "offsets" in w else w["scratch_offset"]
                size = w["region_scratch"][q] if "region_scratch" in w else w["scratch"]
                assert "offsets" in w or q == 0, f"{what}: member {e[0]}: region {q} of one"
                owner[base + o:base + o + size] = GARBAGE
            else:
                owner[base + m_off[e[0]]:base + m_off[e[0]] + m["scratch"]] = GARBAGE
        n_streamed = len(m["in_row_bytes"])
        for q in range(n_streamed):
            ref = m["inputs"][q]
            n = e[3] if (m["kind"] == "window" and q == 0) else e[1]
            if "ring" in ref:
                assert ring_holds(ref["ring"], e[5 + q], n), f"{what}: member {e[0]}: ring {ref['ring']} overwritten"
            else:
                check(op.inputs[ref["in"]], rows(m["in_row_bytes"][q], e[5 + q], n), f"{what} member {e[0]}")
        if m["kind"] == "reduce":
            if e[2] & 2:  # the first band zeroes the running sums: theirs from here on
                owner[base + acc:base + acc + st["acc_bytes"]] = RING - 99
            assert (owner[base + acc:base + acc + st["acc_bytes"]] == RING - 99).all(), f"{what}: sums overwritten"
            if e[2] & 1:
                stamp(op.outputs[m["output"]["out"]])
            continue
        out = m["output"]
        if "ring" in out:
            ring_write(out["ring"], e[4], e[1])
        else:
            stamp(op.outputs[out["out"]], rows(m["row_bytes"], e[4], e[1]))


def _run_op(g: Graph, plan: Plan, op: Op, check, stamp, what: str) -> None:
    steps = KERNEL_STEPS.get(op.kernel or "")
    x = op.inputs[0] if op.inputs else -1
    others = [t for t in op.inputs[1:] if t >= 0]
    if steps is not None and x >= 0 and not g.tensors[x].is_const:
        for t in others:
            check(t, None, what)
        for reads, writes in steps(op.attrs):
            check(x, reads, what)
            stamp(op.outputs[0], writes)
        return
    for t in op.inputs:
        if t >= 0:
            check(t, None, what)
    ins = [t for t in op.inputs if t >= 0 and not g.tensors[t].is_const and t not in plan.app_owned]
    for y in op.outputs:
        if y in plan.app_owned:
            continue
        yo = plan.tensor_offset(y)
        for t in ins:
            # any other kernel may only overwrite an input it reads elementwise, in place
            to = plan.tensor_offset(t)
            if yo < to + g.tensors[t].nbytes and to < yo + g.tensors[y].nbytes:
                assert op.inplace and t == op.inputs[0] and to == yo, (
                    f"{what}: output {y} overlaps input {t} but the kernel is not modelled in place")
        stamp(y)
