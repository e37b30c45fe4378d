"""A stripe's whole input dying row by row (issue 24, contract 1b; docs/stripes.md).

A stripe reads its whole input X band by band: once row r of X is past its last read in the
static schedule, its bytes are free. `joint_layout` places the stripe's scratch (rings, member
scratch, running sums) and its whole output Y in one buffer with X, X at byte 0, the scratch
region starting at X's byte 0 too: an item may lie on X bytes only if every X row under it was
last read at a step before the item's first use; a row k of Y only on X bytes read for the last
time before the call that writes it, and never on a scratch item still used after that call.
The planner joins X, Y and the scratch into one buffer when X dies at the stripe (the overlap
variant `scratch_at_input`, planner/liveness.py); otherwise the stripe keeps its standalone
layout (the pass's `_place`). tests/plan_sim.py replays the step table byte by byte.

Like passes/lower/overlap.py for single kernels, everything is decided from the schedule: per
X row the step of its last read, per item the steps it is busy, per Y row the step writing it.
"""

from __future__ import annotations

import bisect
import itertools
import random
from typing import Any

from stm32ai.ir import Graph

ALIGN = 4
Y_ALIGN = 8  # the planner's buffer alignment (planner ALIGN): Y tied inside the scratch starts on it


def _up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def x_last_reads(st: Any, x: int, h: int) -> list[int]:
    """Per row of the stripe's whole input x, the table step that reads it last (-1: never)."""
    last = [-1] * h
    for s, step in enumerate(st.table):
        if step[0] < 0 or step[0] >= len(st.members):
            continue
        m = st.members[step[0]]
        for q, t in enumerate(m.streamed):
            if t != x:
                continue
            n = step[3] if (m.kind == "window" and q == 0) else step[1]
            for r in range(step[5 + q], step[5 + q] + n):
                last[r] = s
    return last


def y_write_steps(st: Any, y: int, hy: int) -> list[int]:
    """Per row of the stripe's whole output y, the table step that writes it."""
    yw = [0] * hy
    ym = next(j for j, m in enumerate(st.members) if m.out == y)
    for s, step in enumerate(st.table):
        if step[0] != ym:
            continue
        if st.members[ym].kind == "reduce":  # its one output row: written by the call that finishes
            if step[2] & 1:  # stripes.REDUCE_LAST
                yw[0] = s
            continue
        for k in range(step[4], step[4] + step[1]):
            yw[k] = s
    return yw


def death_steps(st: Any, last: list[int], first_step: int) -> list[tuple[int, int, int]]:
    """(after step, row0, rows): X rows [row0, row0 + rows) are dead once `after step` ran (runs
    of consecutive rows dying at the same step); rows never read die before step 0 (-1)."""
    out: list[tuple[int, int, int]] = []
    for r, s in enumerate(last):
        s = max(s, first_step - 1)
        if out and out[-1][0] == s and out[-1][1] + out[-1][2] == r:
            out[-1] = (s, out[-1][1], out[-1][2] + 1)
        else:
            out.append((s, r, 1))
    return out


def clash(o: int, e: int, b: int, k: Any, lo: int, hi: int, steps: int, key: Any,
          allow: dict[Any, int]) -> bool:
    """Spans [o, e) busy at b and [lo, hi) busy at steps meet at a common step, other than the
    steps at which a member writes its output row in place over the other (stripes.py `_inplace`: the same
    first byte, the output no longer than the input row)."""
    if not (lo < e and o < hi) or not b & steps:
        return False
    if o == lo and allow:
        return bool(b & steps & ~allow.get((k, key), 0))
    return True


Span = tuple[int, int, int]  # (lo, hi, busy steps as a bit mask: bit s = table step s)


def _first(steps: int) -> int:
    return (steps & -steps).bit_length() - 1 if steps else 0


def joint_layout(g: Graph, st: Any, items: list[tuple[int, str, int, list[Span]]],
                 tries: int = 0, allow: dict[Any, int] | None = None,
                 order: list[tuple[int, str, int, list[Span]]] | None = None) -> dict[str, Any] | None:
    """The joint layout of stripe `st` over its dying input, or None when it has not exactly one
    whole input and one whole output. items: the pass's (bytes, kind, ring or member, spans)
    list (stripes.py `_layout_modes`: per ring one span per row slot, busy at its own steps).
    First fit in two orders (largest first, latest first use first), then `tries` steps of a
    local search over the order (move one item; keep the order when the top does not grow).
    allow: the in-place row pairs (stripes.py `_inplace`, `clash`).
    order: place exactly these items in this order (no search): a layout's `order` (the items
    as it placed them) with items appended lands them where that layout had room (`widen`)."""
    fed = not st.inputs and bool(st.fed)  # the input in rows (--input-rows): Y joins the scratch alone
    if len(st.outputs) != 1 or (len(st.inputs) != 1 and not fed):
        return None
    y = st.outputs[0]
    ty = g.tensors[y]
    hy, rby = int(ty.shape[1]), int(ty.nbytes // ty.shape[1])
    if fed:
        rbx, last, nx = 1, [], 0
    else:
        tx = g.tensors[st.inputs[0]]
        rbx = int(tx.nbytes // tx.shape[1])
        last = x_last_reads(st, st.inputs[0], int(tx.shape[1]))
        nx = tx.nbytes
    yw = y_write_steps(st, y, hy)
    if fed and order is None:
        # Y as one more item, its row k busy from the step writing it to the stripe's end (and
        # after: the planner ties Y's buffer to the scratch, planner/liveness.py `scratch_with_output`)
        full = (1 << len(st.table)) - 1
        items = [*items, (ty.nbytes, "y", -1, [(k * rby, (k + 1) * rby, full & ~((1 << yw[k]) - 1))
                                                for k in range(hy)])]

    prefmax = list(itertools.accumulate(last, max))  # non-decreasing

    def dead_prefix(step: int) -> int:
        """Bytes of X at its start whose rows were all read for the last time before `step`."""
        return bisect.bisect_left(prefmax, step) * rbx

    al = allow or {}

    def fits(p: int, spans: list[Span], keys: list[Any], placed: list[tuple[int, int, int, Any]]) -> bool:
        for (lo, hi, b), key in zip(spans, keys, strict=True):
            if not b:
                continue
            a, e = p + lo, p + hi
            if a < nx and min(e, nx) > dead_prefix(_first(b)):  # X bytes under it still to be read
                return False
            if any(a < pe and po < e and pb & b and clash(po, pe, pb, pk, a, e, b, key, al)
                   for po, pe, pb, pk in placed):
                return False
        return True

    def place(order: list[tuple[int, str, int, list[Span]]]) -> tuple[int, list[tuple[int, str, int, list[Span]]]]:
        placed: list[tuple[int, int, int, Any]] = []
        where: list[tuple[int, str, int, list[Span]]] = []
        top = nx
        for _, what, r, spans in order:
            keys = [(r, i) for i in range(len(spans))] if what == "ring" else \
                [r] if what == "slot" else [None] * len(spans)  # a split ring's slot: r = (ring, slot)
            al = Y_ALIGN if what == "y" else ALIGN  # Y's buffer starts on the planner's alignment
            cands = sorted(c for c in {0, _up(nx), *(e - lo for _, e, _, _ in placed for lo, _, _ in spans)}
                           if c >= 0 and c % al == 0)
            past = max([_up(nx), *(e for _, e, _, _ in placed)])  # past every span and X
            at = next((p for p in cands if fits(p, spans, keys, placed)), -(-past // al) * al)
            placed.extend((at + lo, at + hi, b, k) for (lo, hi, b), k in zip(spans, keys, strict=True))
            where.append((at, what, r, spans))
            top = max(top, at + spans[-1][1])
        return top, where

    def first_use(item: tuple[int, str, int, list[Span]]) -> int:
        return min((_first(b) for _, _, b in item[3] if b), default=0)

    by_size = sorted(items, key=lambda i: -i[0])
    by_late = sorted(items, key=lambda i: (-first_use(i), -i[0]))
    if order is not None:
        top, placed = place(order)
    else:
        top, placed = min(place(by_size), place(by_late), key=lambda tp: tp[0])
    if tries and order is None:  # a local search over the order (one item moved at a time), deterministic
        rng = random.Random(0)
        cur, cur_top = (by_size, top) if place(by_size)[0] == top else (by_late, top)
        for _ in range(tries):
            o = list(cur)
            o.insert(rng.randrange(len(o)), o.pop(rng.randrange(len(o))))
            got = place(o)
            if got[0] <= cur_top:
                cur, cur_top = o, got[0]
                if got[0] < top:
                    top, placed = got

    room_y = [dead_prefix(w) for w in yw]
    used_until = [(at + lo, at + hi, b.bit_length() - 1) for at, _, _, spans in placed for lo, hi, b in spans if b]

    def y_at() -> int:
        """The lowest offset where every row of Y is safe: a row k that clashes at d clashes at
        every offset up to where it clears what it hit, so the search jumps there."""
        d = 0
        while True:
            jump = d
            for k in range(hy):
                a, b = d + k * rby, d + (k + 1) * rby
                if a < nx and min(b, nx) > room_y[k]:  # X bytes under row k still to be read
                    jump = _up(nx - k * rby)
                    break
                hit = [e for o, e, until in used_until if o < b and a < e and until >= yw[k]]
                if hit:  # an item still used once row k is written
                    jump = _up(max(hit) - k * rby)
                    break
            if jump == d:
                return d
            d = max(jump, d + ALIGN)

    best = next((o for o, what, _, _ in placed if what == "y"), -1)
    if best < 0:
        best = y_at()
    size = _up(max(top, best + ty.nbytes))
    ring_offset = [0] * len(st.rings)
    scratch_offsets = [-1] * len(st.members)
    wide_offsets = [-1] * len(st.members)
    more: dict[int, dict[int, int]] = {}  # member -> region (>= 1) -> offset
    out: dict[str, Any] = {"y": best, "size": size, "scratch": _up(top) if top > 0 else 0, "acc_offset": -1}
    slots: list[list[int] | None] = [None] * len(st.rings)  # split rings (stripes.py `split_items`)
    for o, what, r, _ in placed:
        if what == "slot":
            ring, i = r
            if slots[ring] is None:
                slots[ring] = [0] * (i + 1)
            got = slots[ring]
            assert got is not None
            got.extend([0] * (i + 1 - len(got)))
            got[i] = o
            continue
        if what == "ring":
            ring_offset[r] = o
        elif what == "acc":
            out["acc_offset"] = o
        elif what == "y":
            continue
        elif what == "wide":  # a widened member's wide calls' kernel scratch (stripe_widen.py `widen`)
            if r < len(st.members):
                wide_offsets[r] = o
            else:  # its region r // n (item n * region + member)
                more.setdefault(r % len(st.members), {})[r // len(st.members)] = o
        else:  # a member's kernel scratch
            scratch_offsets[r] = o
    for ring, got in enumerate(slots):
        if got is not None:  # a split ring: its row slots anywhere (the executor's slot table)
            out.setdefault("slots", [None] * len(st.rings))[ring] = got
            ring_offset[ring] = got[0]
    out["ring_offset"] = ring_offset
    out["scratch_offsets"] = scratch_offsets
    out["order"] = [(spans[-1][1], what, r, spans) for _, what, r, spans in placed]  # not for graph.json
    if any(o >= 0 for o in wide_offsets):
        out["wide_offsets"] = wide_offsets
    if more:  # members with several wide regions: every region's offset ([]: one region or none)
        out["wide_regions"] = [[wide_offsets[j], *(more[j][q] for q in sorted(more[j]))] if j in more else []
                               for j in range(len(st.members))]
    return out
