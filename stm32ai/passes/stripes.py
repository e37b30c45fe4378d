"""Depth-first (row-streamed) execution: chains of ops run band by band (issue 24, docs/stripes.md).

A *stripe* replaces a contiguous run of lowered int8 ops by one op (`kernel == "stripe"`): for
the planner it is one node whose inputs are the whole tensors it reads from outside (and the
members' constants) and whose outputs are the whole tensors ops outside read; every tensor
produced and consumed only inside lives in a *ring* (a window of rows) in the stripe's scratch.
The members are the unchanged kernels, called on a sub-geometry (`in_h`, `out_h`, top pad
patched): an output row band [o0, o1) of a `window` member reads input rows
[max(0, o0*s - p), min(H, (o1-1)*s - p + (k-1)*d + 1)), an exact TFLite convolution of that
n-row image. `rows` members (elementwise, no broadcast) read the same rows they write.

Everything is decided here: `simulate` replays the stripe in Python and yields the static step
table the generated executor replays (calls with row offsets, ring drops by memmove), the ring
capacities and the scratch. `choose_stripes` keeps a stripe only where the planned pool shrinks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower.conv import conv_1col_ok, conv_1col_scratch_size
from stm32ai.passes.lower.dwconv3x3 import dw3x3_hwc_any, dw3x3_hwc_ok, dw3x3_scratch_size
from stm32ai.passes.stripe_overlap import clash

ALIGN = 4  # ring and member-scratch offsets inside the stripe scratch
# a stripe fed in rows whose output joins the scratch (`_fed_modes`): order-search steps per
# ring-mode vector tried, rounds of ring flips, and the winner's order-search steps
FED_MODE_TRIES = 10
FED_MODE_ROUNDS = 1
FED_TRIES = 200
SPLIT_MIN_GAIN = 8  # bytes a further split ring must save (the planner's alignment)
JOINT_TRIES = 60  # local-search steps of the joint layout over a dying input (`_place`, search on)
STEP_WIDTH = 7  # int16 per table step: see `Stripe.table`
INT16_MAX = 32767
# reduce steps' flags (step[2]): the running sums are zeroed by the first band (busy only from
# there: the layout may put them on bytes that die before it) and finished by the last
REDUCE_LAST, REDUCE_FIRST = 1, 2

# window members: kernel -> (k attr, stride attr, pad attr, dilation attr); attrs are the
# C params fields (lists: index 0 is H)
_CONV = ("k_h", "stride", "pad", "dilation")
WINDOW_KERNELS: dict[str, tuple[str, str, str, str | None]] = {
    "conv2d_s8": _CONV,
    "conv2d_s8_1col": _CONV,
    "depthwise_conv2d_s8": _CONV,
    "depthwise_conv2d_3x3_s8": _CONV,
    "depthwise_conv2d_3x3_sgn_s8": _CONV,
    "depthwise_conv2d_3x3_g2_s8": _CONV,
    "depthwise_conv2d_3x3_g2_sgn_s8": _CONV,
    "depthwise_conv2d_3x3_hwc_s8": _CONV,
    "depthwise_conv2d_3x3_hwc_sgn_s8": _CONV,
    "avgpool_s8": ("filter_h", "stride_h", "pad_h", None),
    "maxpool_s8": ("filter_h", "stride_h", "pad_h", None),
}
# rows members: kernel -> number of streamed leading inputs (the rest are constants)
# (same-shape binary kernels walk AI_BINARY_LOOP_FIELDS: out_shape patched to the band's bytes)
ROWS_KERNELS: dict[str, int] = {"add_lut_s8": 2, "add_s8": 2, "sub_s8": 2, "mul_s8": 2,
                                "maximum_s8": 2, "minimum_s8": 2}
# access-order / staging attrs that must be off in a stripe (docs/stripes.md). `reverse` is only
# the walk's direction; `transpose` (3x3 depthwise) also transposed the packed constants at
# lowering, so a transposed op is refused (as_member), never patched (tests/test_row_windows.py)
_OFF_ATTRS = ("reverse", "transpose")
_REFUSE_ATTRS = ("stage_oc", "stage")


def _first(v: Any) -> int:
    return int(v[0]) if isinstance(v, list) else int(v)


@dataclass
class Member:
    op: Op
    kind: str  # "window" | "rows" | "reduce" (global average pool as running sums)
    streamed: list[int]  # tensor ids of the row-streamed inputs (in input order)
    out: int
    k: int = 1
    s: int = 1
    p: int = 0
    d: int = 1
    params: dict[str, int] | None = None  # reduce: ai_avgpool_rows_s8_params
    kernel: str = ""  # the kernel called in the stripe ("": op.kernel; see `_narrow_scratch`)
    scratch: int = -1  # its scratch bytes (-1: op.scratch)
    # ordinals of this member's calls that run its alternative `alt` in a scratch region of its
    # own (`widen`: where the layout has room at that call; table e[6] = 1)
    wide: frozenset[int] = frozenset()
    # (kernel, params patched, scratch bytes): a narrowed member's own kernel (`conv2d_s8` for
    # `conv2d_s8_1col`), or the conv2d_s8 member with its weights staged whole (`stage_oc`)
    alt: tuple[str, dict[str, Any], int] | None = None
    # several regions (`widen`: up to stripe_widen.MAX_REGIONS, each a group of wide calls with
    # its own scratch offset and alternative): alts[q] is region q's alternative (alts[0] ==
    # alt), region[ordinal] the region of a wide call (absent: 0); empty: one region, `alt`
    alts: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)
    region: dict[int, int] = field(default_factory=dict)

    @property
    def region_alts(self) -> list[tuple[str, dict[str, Any], int]]:
        """Each region's alternative (region q: table e[6] = 1 + q)."""
        return list(self.alts) if self.alts else ([self.alt] if self.alt is not None else [])

    def region_of(self, ordinal: int) -> int:
        """The region of wide call `ordinal` (-1: not a wide call)."""
        return self.region.get(ordinal, 0) if self.widened and ordinal in self.wide else -1

    def clear_wide(self) -> None:
        self.wide, self.alt, self.alts, self.region = frozenset(), None, [], {}

    @property
    def call_kernel(self) -> str:
        return self.kernel or str(self.op.kernel)

    @property
    def call_scratch(self) -> int:
        return int(self.op.scratch) if self.scratch < 0 else self.scratch

    @property
    def widened(self) -> bool:
        """Some calls run `alt` (`widen`)."""
        return bool(self.wide) and self.alt is not None

    @property
    def alt_scratch(self) -> int:
        return self.alt[2] if self.alt is not None else 0

    def rows_needed(self, o0: int, o1: int, h_in: int) -> tuple[int, int]:
        """Input rows [r0, r1) output rows [o0, o1) read (clipped to the image)."""
        if self.kind == "rows":
            return o0, o1
        if self.kind == "reduce":
            return 0, h_in  # its one output row reads every input row (as running sums)
        r0 = max(0, o0 * self.s - self.p)
        r1 = min(h_in, (o1 - 1) * self.s - self.p + (self.k - 1) * self.d + 1)
        return r0, r1


def _geom(g: Graph, tid: int) -> tuple[int, int] | None:
    """(H, row bytes) of an int8 NHWC batch-1 tensor, else None."""
    t = g.tensors[tid]
    if t.dtype != "int8" or len(t.shape) != 4 or t.shape[0] != 1 or t.is_const:
        return None
    return int(t.shape[1]), int(t.shape[2] * t.shape[3])


def as_member(op: Op, g: Graph) -> Member | None:
    """The op as a stripe member, or None when it cannot be one."""
    if op.kernel is None or len(op.outputs) != 1 or any(op.attrs.get(a) for a in _REFUSE_ATTRS):
        return None
    if op.attrs.get("transpose"):  # column walk: weights packed transposed (time/balanced lowering)
        return None
    out = op.outputs[0]
    if _geom(g, out) is None:
        return None
    if op.kernel in WINDOW_KERNELS:
        ka, sa, pa, da = WINDOW_KERNELS[op.kernel]
        a = op.attrs
        if int(a.get("batches", 1)) != 1 or op.inputs[0] < 0 or _geom(g, op.inputs[0]) is None:
            return None
        m = Member(op, "window", [op.inputs[0]], out, _first(a[ka]), _first(a[sa]), _first(a[pa]),
                   _first(a[da]) if da else 1)
        h_in, _ = _geom(g, op.inputs[0])  # type: ignore[misc]
        h_out = g.tensors[out].shape[1]
        if int(a["in_h"]) != h_in or int(a["out_h"]) != h_out or m.k <= 0 or m.s <= 0:
            return None
        if m.k * m.d >= h_in + 2 * m.p and h_out == 1:
            return _reduce_member(op, g)
        return m
    if op.kernel in ROWS_KERNELS:
        n = ROWS_KERNELS[op.kernel]
        ins = op.inputs[:n]
        shp = g.tensors[out].shape
        if any(i < 0 or g.tensors[i].shape != shp or _geom(g, i) is None for i in ins):
            return None
        size = g.tensors[out].size
        flat = [1] * 5 + [size]
        unit = [0] * 5 + [1]
        a = op.attrs
        if a.get("out_shape") != flat or a.get("in1_strides") != unit or a.get("in2_strides") != unit:
            return None
        return Member(op, "rows", list(ins), out)
    return None


def reduce_kernel_available() -> bool:
    """The running-sum pool kernel (ai_avgpool_rows_s8_*, engineer B's side of issue 24) is in
    the runtime this tool copies: global pools become `reduce` members only then."""
    from stm32ai.resources import runtime_dir

    h = runtime_dir() / "include" / "ai_kernels_pool.h"
    return h.is_file() and "ai_avgpool_rows_s8_accumulate" in h.read_text()


ACC16_MAX_COUNT = 255  # int16 running sums when the pool sums at most this many pixels (exact)


def acc_bytes(m: Member) -> int:
    """Bytes of a reduce member's running sums: int16 per channel when `count` <= 255 (the
    runtime's _accumulate16: |sum| <= 128 * 255), else int32."""
    assert m.params is not None
    return (2 if acc16(m) else 4) * int(m.params["channels"])


def acc16(m: Member) -> bool:
    return m.params is not None and int(m.params["count"]) <= ACC16_MAX_COUNT


def _reduce_member(op: Op, g: Graph) -> Member | None:
    """A global int8 AVERAGE_POOL_2D (filter = the whole VALID input, one output pixel) as a
    `reduce` member: ai_avgpool_rows_s8_accumulate per band, _finish after the last."""
    a = op.attrs
    if (op.kernel != "avgpool_s8" or int(a["out_w"]) != 1 or int(a["filter_w"]) != int(a["in_w"])
            or int(a["filter_h"]) != int(a["in_h"]) or int(a["pad_h"]) or int(a["pad_w"])
            or not reduce_kernel_available()):
        return None
    m = Member(op, "reduce", [op.inputs[0]], op.outputs[0])
    m.params = {"in_w": int(a["in_w"]), "channels": int(a["channels"]),
                "count": int(a["in_h"]) * int(a["in_w"]), "act_min": int(a["act_min"]),
                "act_max": int(a["act_max"])}
    return m


@dataclass
class Stripe:
    members: list[Member]
    band: int
    inputs: list[int]  # whole tensors read from outside (activations only)
    outputs: list[int]  # whole tensors written for ops outside / graph outputs
    rings: list[int]  # tensor ids held as rings, in ring order
    ring_rows: list[int] = field(default_factory=list)
    ring_offset: list[int] = field(default_factory=list)
    ring_mode: list[int] = field(default_factory=list)  # 0 low, 1 high (see `_physical`)
    member_scratch_offset: int = 0  # the largest member scratch's offset
    scratch_offsets: list[int] = field(default_factory=list)  # per member, its own region (-1: none)
    wide_offsets: list[int] = field(default_factory=list)  # per member, its wide calls' region (-1: none)
    # per member with several wide regions (`Member.alts`): the offsets of regions 1, 2, ...
    wide_more: dict[int, list[int]] = field(default_factory=dict)
    narrow: bool | str = True  # `_narrow_scratch`'s flag this stripe was laid out with
    acc_offset: int = -1  # the reduce member's int32 running sums (-1: none)
    scratch: int = 0
    # steps, STEP_WIDTH int16 each:
    #   call:  [m, out_rows, pad_top, in_rows, out_row, in0_row, in1_row] (row offsets into the
    #          operand's buffer: a whole tensor's row index, or the row inside the ring)
    #          reduce: [m, rows, flags, rows, 0, in_row, 0] (flags: REDUCE_FIRST on the first band,
    #          which zeroes the running sums first, REDUCE_LAST on the band that finishes)
    #   ring:  [-1 - ring, rows, rows_live_before, kind, a, b, 0] (row offsets are slots of the
    #          ring's buffer): kind DROP_LOW: drop `rows`, memmove the rest to slot 0;
    #          DROP_HIGH: drop the `rows` at slot a (no memmove); MOVE_HIGH: memmove the live
    #          rows from slot b down to slot a (= b - rows) before an append
    #   fetch: [len(members) + q, rows, 0, 0, ring_row, input_row0, 0]: rows [input_row0,
    #          +rows) of row-fed input fed[q] from the application's row source (--input-rows),
    #          written at slot ring_row of its ring; rows in increasing order, each exactly once
    table: list[list[int]] = field(default_factory=list)
    calls: int = 0
    fed: list[int] = field(default_factory=list)  # row-fed graph inputs held as rings (--input-rows)
    logical: list[list[int]] = field(default_factory=list)  # the simulation's table (every ring low)
    # the layout over the dying whole input (passes/stripe_overlap.py), None: none possible
    joint: dict[str, Any] | None = None
    items: list[Any] = field(default_factory=list, repr=False)  # the layout's items (`_layout_modes`)
    allow: dict[Any, int] = field(default_factory=dict, repr=False)  # in-place row pairs (`_inplace`)
    keep: dict[Any, list[int]] = field(default_factory=dict, repr=False)


class StripeError(Exception):
    """The run cannot be a stripe (a row index past int16, an input row never available...)."""


def simulate_best(g: Graph, members: list[Member], band: int, outside_reads: set[int],
                  narrow: bool | str = True, search: bool = True,
                  row_fed: frozenset[int] | set[int] | None = None) -> Stripe:
    """`simulate` eager, lazy (demand-driven) and drained, in the members' and the sibling
    order: the stripe with the smallest pool, then scratch, then fewer table steps. Lazy keeps
    a side branch (IC's 1x1 stride-2 shortcut) from running ahead of the branch it joins, whose
    rows then wait in a taller ring; drained runs it just before its ADD (docs/stripes.md)."""
    found = []
    orders = [None]
    sib = sibling_order(members)
    if search and sib != list(range(len(members))):  # not in form_stripes' quick cut-point search
        orders.append(sib)
    # the drained schedule where rows branch or join (a ring with two consumers, a member with
    # two streamed inputs: IC's residual blocks); on chains (KWS, VWW) it never won, and the
    # layouts it adds cost compile time (every band height is laid out again, stripe_bands.py)
    readers: dict[int, int] = {}
    for m in members:
        for t in m.streamed:
            readers[t] = readers.get(t, 0) + 1
    drained = search and (max(readers.values(), default=0) > 1 or any(len(m.streamed) > 1 for m in members))
    for order in orders:
        # (lazy, drain): the sibling order lazy only (eager never won); the drained schedule
        # lazy only (eager drains let side branches run ahead)
        variants = [(True, False)] if order is not None else [(False, False), (True, False)]
        for lazy, drain in variants + ([(True, True)] if drained else []):
            try:
                found.append(simulate(g, members, band, outside_reads, lazy=lazy, narrow=narrow, search=search,
                                      row_fed=row_fed, order=order, drain=drain))
            except StripeError:
                if not lazy and order is None:
                    raise
    best = min(found, key=lambda st: (pool_bytes(g, st), st.scratch, len(st.table)))
    if search and best.joint is not None and best.fed and not best.inputs:  # its output joins the scratch
        _fed_modes(g, best)
    elif search and best.joint is not None:  # the winner's joint layout searched further
        from stm32ai.passes.stripe_overlap import joint_layout

        better = joint_layout(g, best, best.items, tries=JOINT_TRIES, allow=best.allow)
        if better is not None and better["size"] < best.joint["size"]:
            best.joint = better
            mark_keep(g, best)
    return best


def pool_bytes(g: Graph, st: Stripe) -> int:
    """What the stripe needs of the pool while it runs: its scratch beside its whole inputs and
    outputs, or its joint layout over the dying input (the planner uses it where the stripe is
    the input's last reader)."""
    alone = st.scratch + sum(g.tensors[t].nbytes for t in [*st.inputs, *st.outputs])
    return min(alone, int(st.joint["size"])) if st.joint else alone


def sibling_order(members: list[Member]) -> list[int]:
    """A topological order of the members in which the consumers of one ring run side by side:
    stable by the position of their latest producer inside the stripe. IC's 1x1 stride-2
    shortcut then reads its rows right after the 3x3 branch's first convolution does, so the
    ring they share drops them before the branch's second convolution runs (its call is the
    peak: with its kernel scratch)."""
    produced = {m.out: i for i, m in enumerate(members)}
    key = [max((produced[t] for t in m.streamed if t in produced), default=-1) for m in members]
    return sorted(range(len(members)), key=lambda j: (key[j], j))


def simulate(g: Graph, members: list[Member], band: int, outside_reads: set[int],
             lazy: bool = False, narrow: bool | str = True, search: bool = True,
             row_fed: frozenset[int] | set[int] | None = None, order: list[int] | None = None,
             drain: bool = False) -> Stripe:
    """Replay the stripe: each round every member produces up to `band` more rows as soon as its
    inputs have them; after every call each ring drops the rows no consumer needs any more.
    outside_reads: tensors read by ops outside the members or graph outputs (kept whole).
    lazy: a member writing a ring produces only rows its consumers' next call reads.
    narrow: 3x3 depthwise members may run as their 2-channel variant (`_narrow_scratch`);
    "hwc": as their HWC variant where it applies (the others as with True).
    search: the ring modes' local search (`_place`; False: its starting points only).
    row_fed: graph inputs that may arrive in rows (None: every graph input if `g.input_rows`,
    --input-rows): one the stripe alone reads becomes a ring filled from the row source just
    before the call that first needs each row.
    order: the order in which each round visits the members (None: theirs; `sibling_order`).
    drain: no rounds, one call per step: the last member (in `order`) that can run, so a row
    is consumed before its producers make more (IC, sibling order: each stride-2 shortcut runs
    just before the ADD that reads it, its output ring holds one row instead of two, and the
    joint layout packs 512 B tighter)."""
    if row_fed is None:
        row_fed = set(g.inputs) if g.input_rows else set()
    produced = {m.out: i for i, m in enumerate(members)}
    inputs: list[int] = []
    for m in members:
        for t in m.streamed:
            if t not in produced and t not in inputs:
                inputs.append(t)
    fed = [t for t in inputs if t in row_fed and t not in outside_reads]
    inputs = [t for t in inputs if t not in fed]
    outputs = [m.out for m in members if m.out in outside_reads]
    rings = fed + [m.out for m in members if m.out not in outside_reads]
    ring_idx = {t: i for i, t in enumerate(rings)}
    h = {t: _geom(g, t)[0] for t in [*inputs, *fed, *produced]}  # type: ignore[index]
    if max(h.values()) > INT16_MAX:
        raise StripeError("taller than int16 rows")
    done = [0] * len(members)
    base = [0] * len(rings)
    count = [0] * len(rings)
    cap = [0] * len(rings)
    consumers: dict[int, list[int]] = {t: [] for t in rings}
    for j, m in enumerate(members):
        for t in m.streamed:
            if t in consumers:
                consumers[t].append(j)
    table: list[list[int]] = []
    fetched = dict.fromkeys(fed, 0)  # rows of each row-fed input pulled so far

    def avail(t: int) -> int:  # a row-fed input: any row, pulled on demand (`fetch`)
        return h[t] if t not in produced else done[produced[t]]

    def fetch(t: int, r1: int) -> None:
        """Pull rows [fetched, r1) of row-fed input t into its ring (appended: contiguous)."""
        if t not in fetched or r1 <= fetched[t]:
            return
        r = ring_idx[t]
        assert base[r] + count[r] == fetched[t]
        table.append([len(members) + fed.index(t), r1 - fetched[t], 0, 0, count[r], fetched[t], 0])
        count[r] += r1 - fetched[t]
        cap[r] = max(cap[r], count[r])
        fetched[t] = r1

    def goal(j: int) -> int:  # rows a member produces (reduce: input rows it accumulates)
        m = members[j]
        return h[m.streamed[0]] if m.kind == "reduce" else h[m.out]

    def need_from(t: int) -> int:
        lo = h[t]
        for j in consumers[t]:
            m = members[j]
            if done[j] < goal(j):
                lo = min(lo, done[j] if m.kind == "reduce" else m.rows_needed(done[j], done[j] + 1, h[t])[0])
        return lo

    def need_end(t: int) -> int:  # rows of ring t the consumers' next calls read (lazy)
        end = 0
        for j in consumers[t]:
            m = members[j]
            if done[j] >= goal(j):
                continue
            if m.kind == "reduce":
                end = max(end, min(h[t], done[j] + max(band, 1)))
            else:
                end = max(end, m.rows_needed(done[j], min(h[m.out], done[j] + band), h[t])[1])
        return end

    def holds_back(j: int) -> bool:  # (lazy) member j alone keeps rows of an input ring alive
        m = members[j]
        for t in m.streamed:
            if t not in ring_idx or m.kind == "reduce":
                continue
            mine = m.rows_needed(done[j], done[j] + 1, h[t])[0]
            others = [members[c].rows_needed(done[c], done[c] + 1, h[t])[0] if members[c].kind != "reduce"
                      else done[c] for c in consumers[t] if c != j and done[c] < goal(c)]
            if others and mine < min(others):
                return True
        return False

    def drops() -> None:
        for r, t in enumerate(rings):
            k = min(need_from(t), base[r] + count[r]) - base[r]
            if k > 0:
                table.append([-1 - r, k, count[r], 0, 0, 0, 0])
                base[r] += k
                count[r] -= k

    for m in members:
        if m.kind == "reduce" and (m.out in produced_reads(members) or m.out not in outside_reads):
            raise StripeError("a reduce member's output is read inside the stripe")
    n_calls = 0

    def call(j: int) -> bool:
        """Member j's next call if its inputs hold the rows (appended with the drops after
        it); False when it cannot run now."""
        nonlocal n_calls
        m = members[j]
        if m.kind == "reduce":
            t = m.streamed[0]
            r0, r1 = done[j], min(avail(t), done[j] + max(band, 1))
            if r1 <= r0:
                return False
            fetch(t, r1)
            row = r0 - base[ring_idx[t]] if t in ring_idx else r0
            if t in ring_idx:
                assert base[ring_idx[t]] <= r0 and r1 <= base[ring_idx[t]] + count[ring_idx[t]]
            table.append([j, r1 - r0, (REDUCE_LAST if r1 == h[t] else 0) | (REDUCE_FIRST if r0 == 0 else 0),
                          r1 - r0, 0, row, 0])
            n_calls += 1
            done[j] = r1
            drops()
            return True
        o0 = done[j]
        ho = h[m.out]
        o1 = min(ho, o0 + band)
        if lazy and m.out in ring_idx and not holds_back(j):
            o1 = min(o1, max(need_end(m.out), o0))
        while o1 > o0 and any(m.rows_needed(o0, o1, h[t])[1] > avail(t) for t in m.streamed):
            o1 -= 1
        if o1 <= o0:
            return False
        for t in m.streamed:
            fetch(t, m.rows_needed(o0, o1, h[t])[1])
        step = [j, o1 - o0, 0, 0, 0, 0, 0]
        for q, t in enumerate(m.streamed):
            r0, r1 = m.rows_needed(o0, o1, h[t])
            if r1 <= r0:
                raise StripeError("a band reads no input row")
            if q == 0:
                step[2] = (m.p - o0 * m.s + r0) if m.kind == "window" else 0
                step[3] = r1 - r0
            if t in ring_idx:
                r = ring_idx[t]
                assert base[r] <= r0 and r1 <= base[r] + count[r], "ring lost a row still needed"
                step[5 + q] = r0 - base[r]
            else:
                step[5 + q] = r0
        if m.out in ring_idx:
            r = ring_idx[m.out]
            assert base[r] + count[r] == o0
            step[4] = o0 - base[r]
            count[r] += o1 - o0
            cap[r] = max(cap[r], count[r])
        else:
            step[4] = o0
        table.append(step)
        n_calls += 1
        done[j] = o1
        drops()
        return True

    for m in members:  # `widen` decides wide calls on the chosen stripe's final layout only
        m.clear_wide()
    seq = list(order or range(len(members)))
    while any(done[j] < goal(j) for j in range(len(members))):
        if drain:  # the most downstream member that can run, one call at a time
            progress = any(call(j) for j in reversed(seq))
        else:  # a round: every member once, in order
            progress = False
            for j in seq:
                progress = call(j) or progress
        if not progress:
            raise StripeError("no member can advance")
    for t in fed:  # rows no member reads (a VALID window's tail): pulled all the same, then dropped
        if fetched[t] < h[t]:
            fetch(t, h[t])
            drops()
    st = Stripe(members, band, inputs, outputs, rings, cap, table=table, calls=n_calls, fed=fed)
    _place(g, st, narrow, search)
    return st


# ---- ring modes: where a ring keeps its live rows between calls (docs/stripes.md, "Ring modes")
# low (0): at its first rows; a drop memmoves the rows left to the start, an append is free.
# high (1): at its last rows; an append first memmoves the live rows down by the rows it adds,
# a drop is free. The memmove per row is the same; what differs is which of its rows a ring
# leaves free between calls: a low ring's last, a high ring's first. A 3-row ring holding 2
# rows in between (a 3x3 consumer's window) thus frees one row at either end, and a low ring
# and a high ring whose third rows are busy at different steps can share that row.
DROP_LOW, DROP_HIGH, MOVE_HIGH = 0, 1, 2  # step[3] of a ring step
# DROP_KEEP: a drop that moves and poisons nothing (rows at slot step[4]; a low ring drops all
# its live rows): its bytes already hold the output row a member wrote in place (`_inplace`)
DROP_KEEP = 3


def moved_rows(step: list[int]) -> int:
    """Rows a ring step memmoves (the cost model's ring traffic)."""
    if step[3] == DROP_LOW:
        return step[2] - step[1]
    return step[2] if step[3] == MOVE_HIGH else 0


def _physical(st: Stripe, modes: list[int]) -> tuple[list[list[int]], list[list[int]], dict[int, int]]:
    """The simulation's table (row offsets relative to each ring's oldest live row, every ring
    low) turned into the table of ring modes `modes`: ring offsets are slots of the ring's
    buffer; a high ring gets a move step before each append and drops without memmove.
    Returns it, the steps at which each slot of each ring is busy (live, read, written, moved
    or poisoned) and, per member with kernel scratch, the steps of its calls, as bit masks
    (bit s: step s); a widened member's wide calls (`Member.wide`: step[6] = 1, the op's own
    kernel) under key len(members) + j, their own region."""
    n = len(st.rings)
    ring_of = {t: r for r, t in enumerate(st.rings)}
    start, count = [0] * n, [0] * n
    out: list[list[int]] = []
    busy: list[list[int]] = [[0] * st.ring_rows[r] for r in range(n)]
    since: list[list[int]] = [[-1] * st.ring_rows[r] for r in range(n)]  # step a live slot was filled
    scratch_steps: dict[int, int] = {}  # member -> steps of its calls (it has kernel scratch)
    ordinal = [0] * len(st.members)  # calls of each member so far

    def fill(r: int, lo: int, hi: int) -> None:  # slots live from this step on
        for i in range(lo, hi):
            if since[r][i] < 0:
                since[r][i] = len(out)

    def free(r: int, lo: int, hi: int) -> None:  # slots dead after this step (busy through it)
        for i in range(lo, hi):
            if since[r][i] >= 0:
                busy[r][i] |= (1 << (len(out) + 1)) - (1 << since[r][i])
                since[r][i] = -1

    for step in st.logical:
        if step[0] < 0:
            r, k, n_live = -1 - step[0], step[1], step[2]
            if modes[r] == 0:  # the memmove reads and writes slots [0, n_live)
                free(r, n_live - k, n_live)
                out.append([step[0], k, n_live, DROP_LOW, 0, 0, 0])
            else:
                free(r, start[r], start[r] + k)
                out.append([step[0], k, n_live, DROP_HIGH, start[r], 0, 0])
                start[r] += k
            count[r] -= k
            continue
        fetch = step[0] >= len(st.members)  # a fetch writes its ring like a producer's call
        m = None if fetch else st.members[step[0]]
        phys = list(step)
        r_out = ring_of[st.fed[step[0] - len(st.members)]] if m is None else ring_of.get(m.out, -1)
        if r_out >= 0 and modes[r_out] == 1:
            r, add = r_out, step[1]
            dst = st.ring_rows[r] - count[r] - add
            if count[r] == 0:
                start[r] = dst
            elif dst != start[r]:
                fill(r, dst, start[r] + count[r])
                free(r, max(dst + count[r], start[r]), start[r] + count[r])
                out.append([-1 - r, start[r] - dst, count[r], MOVE_HIGH, dst, start[r], 0])
                start[r] = dst
        if m is None:
            phys[4] = step[4] + start[r_out]
            fill(r_out, phys[4], phys[4] + step[1])
            count[r_out] += step[1]
            out.append(phys)
            continue
        for q, t in enumerate(m.streamed):
            if t in ring_of:
                phys[5 + q] = step[5 + q] + start[ring_of[t]]
        if r_out >= 0:
            phys[4] = step[4] + start[r_out]
            fill(r_out, phys[4], phys[4] + step[1])
            count[r_out] += step[1]
        key = step[0]
        q = m.region_of(ordinal[step[0]])
        if q >= 0:  # a window member: e[6] is free (one input); region q under key n * (1 + q) + j
            phys[6], key = 1 + q, len(st.members) * (1 + q) + step[0]
        ordinal[step[0]] += 1
        if m.call_scratch > 0 and m.kind != "reduce":
            scratch_steps[key] = scratch_steps.get(key, 0) | 1 << len(out)
        out.append(phys)
    for r in range(n):  # rows a ring still holds at the end (none: every row is read)
        free(r, 0, st.ring_rows[r])
    return out, busy, scratch_steps


Key = tuple[int, int] | None  # a ring row slot (ring, slot), None: not a ring's


def _fit(placed: list[tuple[int, int, int, Key]], spans: list[tuple[int, int, int]],
         starts: set[int], keys: list[Key] | None = None,
         allow: dict[tuple[Key, Key], int] | None = None) -> int:
    """The lowest offset among `starts` (4-aligned) at which every (lo, hi, steps) of `spans`
    shifted by it meets no placed span busy at a common step (`clash`)."""
    lo_all, hi_all = spans[0][0], spans[-1][1]
    keys = keys or [None] * len(spans)
    for off in sorted(o for o in starts if o >= 0 and o % ALIGN == 0):
        near = [p for p in placed if p[0] < off + hi_all and off + lo_all < p[1]]
        # the plain overlap test first (cheap); `clash` only for spans that do meet
        if all(not (off + lo < e and o < off + hi and b & steps) or not clash(o, e, b, k, off + lo, off + hi,
                                                                               steps, key, allow or {})
               for (lo, hi, steps), key in zip(spans, keys, strict=True) for o, e, b, k in near):
            return off
    raise AssertionError("unreachable: the top of the placed spans is always a start")


def _inplace_safe(g: Graph, m: Member, n_in: int, pad_top: int, delta: int) -> bool:
    """A one-row call of member m (window of n_in input rows, top pad pad_top) may write its
    output row `delta` bytes after its window's first byte: its kernel's access order
    (passes/lower/overlap.py) reads every byte the output lands on before writing it. Rows
    members (elementwise) write element i after reading it: delta 0 only."""
    if m.kind == "rows":
        return delta == 0
    key = (m.call_kernel, repr(sorted(m.op.attrs.items())), n_in, pad_top, delta)
    if key not in _SAFE:  # the layout search asks again for every ring-mode vector
        _SAFE[key] = _inplace_safe_model(g, m, n_in, pad_top, delta)
    return _SAFE[key]


_SAFE: dict[tuple[Any, ...], bool] = {}


def _inplace_safe_model(g: Graph, m: Member, n_in: int, pad_top: int, delta: int) -> bool:
    from stm32ai.passes.lower.overlap import ACCESS_MODELS, overlap_ok

    model = ACCESS_MODELS.get(m.call_kernel)
    if m.kind != "window" or model is None:
        return False
    a = dict(m.op.attrs)
    for k in _OFF_ATTRS:
        a[k] = 0
    a["in_h"], a["out_h"] = n_in, 1
    a["pad"] = [pad_top, *list(a["pad"])[1:]]
    rb_in, rb_out = _geom(g, m.streamed[0])[1], _geom(g, m.out)[1]  # type: ignore[index]
    return overlap_ok(model(a, n_in * rb_in, rb_out), delta)


Pairs = dict[tuple[Key, Key], int]  # (slot, slot) -> steps at which they may share bytes


def _inplace(g: Graph, st: Stripe, table: list[list[int]]) -> tuple[Pairs, dict[tuple[Key, Key], list[int]]]:
    """Where a one-row call may write its output row over an input row it frees: the row slot A
    of an input ring that the drops right after the call free (a high ring's drop, or a ring
    dropping every live row: nothing moved over it) and the output ring's slot B it writes,
    when the kernel's access order allows that delta. Returns per (A, B) (both orders) the
    steps at which the two may share bytes (the call through that drop) and the drop steps to
    turn into DROP_KEEP when the layout puts B on A."""
    ring_of = {t: r for r, t in enumerate(st.rings)}
    allow: dict[tuple[Key, Key], int] = {}
    drops: dict[tuple[Key, Key], list[int]] = {}
    safe: dict[tuple[int, int, int, int], bool] = {}
    n = len(st.members)
    for p, step in enumerate(table):
        if not 0 <= step[0] < n or step[1] != 1:
            continue
        j = step[0]
        m = st.members[j]
        if m.kind == "reduce" or m.out not in ring_of:
            continue
        rb_out = _geom(g, m.out)[1]  # type: ignore[index]
        ins = {ring_of[t]: q for q, t in enumerate(m.streamed) if t in ring_of}
        q_ = p + 1
        while q_ < len(table) and table[q_][0] < 0:
            d = table[q_]
            r = -1 - d[0]
            q_ += 1
            if r not in ins or d[3] == MOVE_HIGH:
                continue
            if d[3] == DROP_HIGH:
                freed = range(d[4], d[4] + d[1])
            elif d[3] == DROP_LOW and d[1] == d[2]:
                freed = range(0, d[1])
            else:
                continue
            q = ins[r]
            rb_in = _geom(g, st.rings[r])[1]  # type: ignore[index]
            if rb_out > rb_in:
                continue
            in0 = step[5 + q]
            for a_slot in freed:
                delta = (a_slot - in0) * rb_in
                if m.kind == "window" and q == 0:
                    key = (j, step[3], step[2], delta)
                    if key not in safe:
                        safe[key] = delta >= 0 and _inplace_safe(g, m, step[3], step[2], delta)
                    ok = safe[key]
                else:
                    ok = m.kind == "rows" and delta == 0 and rb_in == rb_out
                if not ok:
                    continue
                pair = ((r, a_slot), (ring_of[m.out], step[4]))
                bits = (1 << (q_)) - (1 << p)  # the call through this drop
                for k in (pair, pair[::-1]):
                    allow[k] = allow.get(k, 0) | bits
                drops.setdefault(pair, []).append(q_ - 1)
    return allow, drops


def _layout_modes(g: Graph, st: Stripe, modes: list[int]) -> tuple[int, dict[str, Any]]:
    """(scratch bytes, layout) with ring modes `modes`: first fit, largest first, of the rings
    (each row slot busy at its own steps), the kernel scratch (busy at its calls) and the
    running sums (busy throughout)."""
    table, busy, scratch_steps = _physical(st, modes)
    everything = (1 << len(table)) - 1
    items: list[tuple[int, str, int, list[tuple[int, int, int]]]] = []  # (bytes, what, ring, spans)
    for r, t in enumerate(st.rings):
        rb = _geom(g, t)[1]  # type: ignore[index]
        size = -(-st.ring_rows[r] * rb // ALIGN) * ALIGN
        spans = [(i * rb, (i + 1) * rb, busy[r][i]) for i in range(st.ring_rows[r])]
        spans[-1] = (spans[-1][0], size, spans[-1][2])
        items.append((size, "ring", r, spans))
    for j, m in enumerate(st.members):
        if m.kind == "reduce":  # the running sums: int32 per channel, from its first band to its last
            calls = [s for s, step in enumerate(table) if step[0] == j]
            busy_acc = everything & ((1 << (calls[-1] + 1)) - (1 << calls[0]))
            items.append((-(-acc_bytes(m) // ALIGN) * ALIGN, "acc", -1,
                          [(0, -(-acc_bytes(m) // ALIGN) * ALIGN, busy_acc)]))
    n = len(st.members)
    for j, steps in scratch_steps.items():  # each member's own region, busy at its calls
        if j >= n:  # its wide calls' region q (item n * q + member: `wide_region`)
            size = -(-st.members[j % n].region_alts[j // n - 1][2] // ALIGN) * ALIGN
            items.append((size, "wide", j - n, [(0, size, steps)]))
            continue
        size = -(-st.members[j].call_scratch // ALIGN) * ALIGN
        items.append((size, "scratch", j, [(0, size, steps)]))
    allow, keep = _inplace(g, st, table)
    placed: list[tuple[int, int, int, Key]] = []
    lay: dict[str, Any] = {"table": table, "ring_offset": [0] * len(st.rings), "acc": -1, "scratch_off": {},
                           "wide_off": {}}
    lay["items"] = items  # for the joint layout over a dying input (`_place`)
    lay["allow"], lay["keep"] = allow, keep
    top = 0
    for _, what, r, spans in sorted(items, key=lambda x: -x[0]):
        keys: list[Key] = [(r, i) for i in range(len(spans))] if what == "ring" else [None] * len(spans)
        starts = {0} | {e - lo for _, e, _, _ in placed for lo, _, _ in spans}
        off = _fit(placed, spans, starts, keys, allow)
        placed.extend((off + lo, off + hi, b, k) for (lo, hi, b), k in zip(spans, keys, strict=True))
        top = max(top, off + spans[-1][1])
        if what == "ring":
            lay["ring_offset"][r] = off
        elif what == "acc":
            lay["acc"] = off
        elif what == "wide":
            lay["wide_off"][r] = off
        else:
            lay["scratch_off"][r] = off
    return top, lay


def _place(g: Graph, st: Stripe, narrow: bool | str = True, search: bool = True) -> None:
    """Ring modes and offsets: from every ring low and from the two alternations along the
    chain, a local search flipping one multi-row ring at a time while the scratch shrinks; the
    smallest wins (KWS's chain ends up alternating low / high rings: each pair shares its
    third row). search False: the starting points only (form_stripes' cut-point search)."""
    _narrow_scratch(st.members, narrow)
    st.narrow = narrow
    st.logical = st.table
    flippable = [r for r in range(len(st.rings)) if st.ring_rows[r] > 1]
    starts = [[0] * len(st.rings)]
    for first in (0, 1):  # alternating along the chain: each low ring next to a high one
        alt = [0] * len(st.rings)
        for i, r in enumerate(flippable):
            alt[r] = (i + first) % 2
        starts.append(alt)
    found = []
    for modes in starts:  # a local search from each start: flip one ring while the scratch shrinks
        best = _layout_modes(g, st, modes)
        improved = search
        while improved:
            improved = False
            for r in flippable:
                trial = list(modes)
                trial[r] ^= 1
                got = _layout_modes(g, st, trial)
                if got[0] < best[0]:
                    best, modes, improved = got, trial, True
        found.append((best[0], modes, best))
    _, modes, best = min(found, key=lambda x: x[0])
    _apply_layout(g, st, modes, *best)


def _apply_layout(g: Graph, st: Stripe, modes: list[int], scratch: int, lay: dict[str, Any],
                  joint: dict[str, Any] | None = None) -> None:
    st.ring_mode = modes
    st.table = lay["table"]
    st.ring_offset = lay["ring_offset"]
    st.acc_offset = lay["acc"]
    st.scratch_offsets = [lay["scratch_off"].get(j, -1) for j in range(len(st.members))]
    st.wide_offsets = [lay["wide_off"].get(j, -1) for j in range(len(st.members))]
    n = len(st.members)
    st.wide_more = {}
    for r, o in sorted(lay["wide_off"].items()):
        if r >= n:
            st.wide_more.setdefault(r % n, []).append(o)
    big = max(lay["scratch_off"], key=lambda j: st.members[j].call_scratch, default=-1)
    st.member_scratch_offset = lay["scratch_off"][big] if big >= 0 else 0
    st.scratch = scratch
    from stm32ai.passes.stripe_overlap import joint_layout

    st.items, st.allow, st.keep = lay["items"], lay["allow"], lay["keep"]
    st.joint = joint if joint is not None else joint_layout(g, st, lay["items"], allow=st.allow)
    mark_keep(g, st)


def _fed_modes(g: Graph, st: Stripe) -> None:
    """A stripe fed in rows with one whole output, which joins the scratch (`_fed_output`): the
    ring modes `_place` chose for the standalone scratch, flipped one ring at a time while the
    joint layout (its order searched FED_MODE_TRIES steps) shrinks; then the winner's order
    searched FED_TRIES steps. VWW --input-rows: 12,912 -> 12,720 B (docs/stripes.md)."""
    from stm32ai.passes.stripe_overlap import joint_layout

    def trial(modes: list[int], tries: int, split: set[int] | None = None
              ) -> tuple[int, int, dict[str, Any], dict[str, Any] | None]:
        top, lay = _layout_modes(g, st, modes)
        keep, st.table = st.table, lay["table"]
        try:
            j = joint_layout(g, st, split_items(lay["items"], split or set()), tries=tries, allow=lay["allow"])
        finally:
            st.table = keep
        return (int(j["size"]) if j is not None else 1 << 30), top, lay, j

    modes = list(st.ring_mode)
    best = trial(modes, FED_MODE_TRIES)
    flippable = [r for r in range(len(st.rings)) if st.ring_rows[r] > 1]
    for _ in range(FED_MODE_ROUNDS):
        improved = False
        for r in flippable:
            m = list(modes)
            m[r] ^= 1
            got = trial(m, FED_MODE_TRIES)
            if got[0] < best[0]:
                best, modes, improved = got, m, True
        if not improved:
            break
    final = trial(modes, FED_TRIES)
    # split rings (docs/stripes.md "Split rings"): greedily, the ring whose slots laid out one by
    # one shrink the joint layout most, while it shrinks (VWW --input-rows: 12,768 -> 11,424 B)
    split: set[int] = set()
    cands = [r for r in range(len(st.rings)) if splittable(st, r)]
    while cands and final[3] is not None:
        tried = [(trial(modes, FED_MODE_TRIES, split | {r}), r) for r in cands if r not in split]
        if not tried:
            break
        got, r = min(tried, key=lambda x: x[0][0])
        if got[0] > final[0] - SPLIT_MIN_GAIN:
            break
        split.add(r)
        final = min(got, trial(modes, FED_TRIES, split), key=lambda x: x[0])
    if final[3] is None or (st.joint is not None and final[0] >= int(st.joint["size"])):
        return
    _apply_layout(g, st, modes, final[1], final[2], final[3])


# kernels that take one pointer per input row (their `_rowp` entry, ai_kernels_conv.h; the
# emitter's ROWP_KERNELS maps them): the multi-row readers a split ring may have
ROWP_KERNELS = ("depthwise_conv2d_3x3_hwc_s8", "depthwise_conv2d_3x3_hwc_sgn_s8")


def splittable(st: Stripe, r: int) -> bool:
    """Whether ring r may be split (its row slots anywhere in the scratch, addressed through the
    executor's slot table: docs/stripes.md "Split rings"): not fed from the row source, every
    write one row (a producer's call), and every read either one row or a window of a kernel
    taking row pointers (ROWP_KERNELS, batch 1)."""
    t = st.rings[r]
    if t in st.fed or st.ring_rows[r] < 2:
        return False
    n = len(st.members)
    for step in st.logical:
        if not 0 <= step[0] < n:
            continue
        m = st.members[step[0]]
        if m.out == t and step[1] != 1:
            return False
        for q, x in enumerate(m.streamed):
            if x != t:
                continue
            rows = step[3] if m.kind == "window" and q == 0 else step[1]
            if rows > 1 and not (m.kind == "window" and q == 0 and m.call_kernel in ROWP_KERNELS
                                 and int(m.op.attrs.get("batches", 1)) == 1):
                return False
    return True


def split_items(items: list[Any], split: set[int] | frozenset[int]) -> list[Any]:
    """The layout items with each ring of `split` as one item per row slot ("slot", (ring, slot))."""
    out = []
    for size, what, r, spans in items:
        if what == "ring" and r in split:
            out += [(-(-(hi - lo) // ALIGN) * ALIGN, "slot", (r, i), [(0, -(-(hi - lo) // ALIGN) * ALIGN, b)])
                    for i, (lo, hi, b) in enumerate(spans)]
        else:
            out.append((size, what, r, spans))
    return out


def slot_offset(g: Graph, st: Stripe, lay: dict[str, Any], r: int, slot: int) -> int:
    """Where slot `slot` of ring r starts in layout `lay` (a joint layout may split rings)."""
    slots = lay.get("slots")
    if slots and slots[r] is not None:
        return int(slots[r][slot])
    return int(lay["ring_offset"][r]) + slot * _geom(g, st.rings[r])[1]  # type: ignore[index]


def mark_keep(g: Graph, st: Stripe) -> None:
    """The drops after a call whose output row the standalone or the joint layout put on the
    input row it frees (`_inplace`) become DROP_KEEP: poisoning them would destroy that row."""
    layouts = [{"ring_offset": st.ring_offset}] + ([st.joint] if st.joint else [])
    for ((ra, sa), (rb_, sb)), steps in st.keep.items():
        if any(slot_offset(g, st, lay, ra, sa) == slot_offset(g, st, lay, rb_, sb) for lay in layouts):
            for d in steps:
                st.table[d][3] = DROP_KEEP


def _narrow_scratch(members: list[Member], narrow: bool | str = True) -> None:
    """The members share one kernel-scratch region, sized by the largest. A 3x3 depthwise
    member (4-channel planes) that alone sets that size runs as its 2-channel variant
    (`_g2_`: the same params and packed constants, half the planes' scratch, ~1 % more
    instructions layer by layer, but +18 % on KWS's one-row bands: twice the per-group set-up;
    docs/stripes.md) when that lowers the region (KWS: 512 -> 256 B); so does a conv2d_s8 member
    (its one-column variant, below); narrow False: never (the band rule weighs both); "hwc":
    first every 3x3 depthwise member that can runs as its HWC variant (`_hwc_`: the same params
    and packed constants, no scratch, no per-call frame: the fastest on short calls, KWS's
    one-row bands; the band rule weighs it against the planar kernels, docs/stripes.md);
    "hwc-all": every 3x3 depthwise member the HWC kernel takes at all (`dw3x3_hwc_any`: stride 2,
    wide rows through its C loop), so no member has planes (VWW `--input-rows`). The op
    itself is unchanged (the layer-by-layer alternative keeps its kernel)."""
    for m in members:
        m.kernel, m.scratch = "", -1
    if not narrow:
        return
    g4 = ("depthwise_conv2d_3x3_s8", "depthwise_conv2d_3x3_sgn_s8")
    if narrow in ("hwc", "hwc-all"):
        ok = dw3x3_hwc_ok if narrow == "hwc" else dw3x3_hwc_any
        for m in members:
            if m.op.kernel in g4 and ok(m.op.attrs):
                m.kernel, m.scratch = str(m.op.kernel).replace("3x3_", "3x3_hwc_"), 0
    others = max((m.call_scratch for m in members if m.kind != "reduce" and m.call_kernel not in g4), default=0)
    for m in members:
        if m.call_kernel in g4 and not m.op.attrs.get("stage") and m.op.scratch > others:
            half = dw3x3_scratch_size(int(m.op.attrs["plane_w"]), 2)
            m.kernel, m.scratch = str(m.op.kernel).replace("3x3_", "3x3_g2_"), half
    # a conv2d_s8 window member (k > 1: never in place, and no access model for the variant)
    # whose scratch alone sets the size runs one pixel at a time (`conv2d_s8_1col`: one int16
    # column instead of a pixel pair's two, the same params and weights; IC's 8x8x64 3x3 conv
    # 2,368 -> 1,216 B; docs/kernels_conv.md "One column")
    for m in members:
        a = m.op.attrs
        if m.op.kernel != "conv2d_s8" or m.kind != "window" or int(a["k_h"]) * int(a["k_w"]) < 2 \
                or not conv_1col_ok(a):
            continue
        rest = max((o.call_scratch for o in members if o is not m and o.kind != "reduce"), default=0)
        one = conv_1col_scratch_size(a)
        if m.op.scratch > rest and one < m.op.scratch:
            m.kernel, m.scratch = "conv2d_s8_1col", one


def produced_reads(members: list[Member]) -> set[int]:
    return {t for m in members for t in m.streamed}


def replay_check(g: Graph, st: Stripe) -> None:
    """Independent check of a stripe's table and scratch layout (tests/test_stripes.py):
    replays it on labels, one per byte of the stripe scratch (ring row, running sums or
    garbage), asserting every call finds at its offsets exactly the rows its window needs
    (first principles), every row is written before it is read, no row is dropped before its
    last read, and nothing (another ring's row, a kernel's scratch, a move, a poison) lands on
    bytes still to be read."""
    import numpy as np

    h = {t: _geom(g, t)[0] for t in [*st.inputs, *st.fed, *(m.out for m in st.members)]}  # type: ignore[index]
    ring_of = {t: r for r, t in enumerate(st.rings)}
    rb = [_geom(g, t)[1] for t in st.rings]  # type: ignore[index]
    held = [0] * len(st.rings)
    written: dict[int, set[int]] = {t: set() for t in [*st.rings, *st.outputs]}
    reads_left: dict[tuple[int, int], int] = {}
    # every (tensor, row) read count, from first principles (the full-image geometry)
    for m in st.members:
        for t in m.streamed:
            if m.kind == "reduce":
                for r in range(h[t]):
                    reads_left[(t, r)] = reads_left.get((t, r), 0) + 1
                continue
            ho = h[m.out]
            for o in range(ho):
                r0, r1 = m.rows_needed(o, o + 1, h[t])
                for r in range(r0, r1):
                    reads_left[(t, r)] = reads_left.get((t, r), 0) + 1
    sc = np.zeros(st.scratch, np.int64)  # 0: garbage, -1: running sums, else ring row label
    n_acc = next((acc_bytes(m) for m in st.members if m.kind == "reduce"), 0)

    def label(r: int, row: int) -> int:
        return ((r + 1) << 20) + row + 1

    def span(r: int, slot: int, n: int) -> slice:
        assert 0 <= slot and slot + n <= st.ring_rows[r], f"ring {r} slots {slot}+{n} past its capacity"
        return slice(st.ring_offset[r] + slot * rb[r], st.ring_offset[r] + (slot + n) * rb[r])

    def holds(r: int, slot: int, rows: range) -> bool:
        want = np.repeat(np.array([label(r, x) for x in rows], np.int64), rb[r])
        return bool(np.array_equal(sc[span(r, slot, len(rows))], want))

    def dropped(r: int, labels: np.ndarray) -> None:
        for lab in set(labels.tolist()):
            assert lab >> 20 == r + 1, f"ring {r} drops bytes it does not hold"
            row = (lab & 0xFFFFF) - 1
            assert reads_left.get((st.rings[r], row), 0) == 0, f"row {row} of ring {r} dropped before its last read"

    # the row each ring slot holds (None: none), kept beside the byte labels: a DROP_KEEP's
    # bytes hold the row a member wrote in place, so its dropped rows are read from here
    slot_row: list[list[int | None]] = [[None] * st.ring_rows[r] for r in range(len(st.rings))]
    produced_rows: dict[int, int] = {m.out: 0 for m in st.members}
    pulled = dict.fromkeys(st.fed, 0)
    for step in st.table:
        if step[0] >= len(st.members):  # a fetch: the next rows of a row-fed input, in order, once
            t = st.fed[step[0] - len(st.members)]
            assert step[5] == pulled[t] and step[1] > 0 and step[5] + step[1] <= h[t], f"bad fetch {step}"
            r = ring_of[t]
            rows = range(pulled[t], pulled[t] + step[1])
            sc[span(r, step[4], step[1])] = np.repeat(np.array([label(r, x) for x in rows], np.int64), rb[r])
            slot_row[r][step[4]:step[4] + step[1]] = list(rows)
            held[r] += step[1]
            assert held[r] <= st.ring_rows[r], "ring overflow"
            written[t].update(range(pulled[t], pulled[t] + step[1]))
            pulled[t] += step[1]
            continue
        if step[0] < 0:
            r = -1 - step[0]
            k, live, kind = step[1], step[2], step[3]
            assert live == held[r] and 0 < k and (k <= live or kind == MOVE_HIGH), f"bad ring step {step}"
            if kind == DROP_LOW:
                dropped(r, sc[span(r, 0, k)])
                s_live, s_all = span(r, k, live - k), span(r, 0, live - k)
                sc[s_all] = sc[s_live].copy()
                sc[span(r, live - k, k)] = 0
                slot_row[r] = slot_row[r][k:live] + [None] * (st.ring_rows[r] - live + k)
                held[r] -= k
            elif kind == DROP_HIGH:
                dropped(r, sc[span(r, step[4], k)])
                sc[span(r, step[4], k)] = 0
                slot_row[r][step[4]:step[4] + k] = [None] * k
                held[r] -= k
            elif kind == DROP_KEEP:  # nothing moved or poisoned: a low ring drops every live row
                assert st.ring_mode[r] == 1 or (k == live and step[4] == 0), f"bad keep {step}"
                for x in slot_row[r][step[4]:step[4] + k]:
                    assert x is not None, f"ring {r} drops a slot holding no row"
                    assert reads_left.get((st.rings[r], x), 0) == 0, f"row {x} of ring {r} dropped before its last read"
                slot_row[r][step[4]:step[4] + k] = [None] * k
                held[r] -= k
            else:
                assert kind == MOVE_HIGH and step[5] - step[4] == k, f"bad move {step}"
                moved = sc[span(r, step[5], live)].copy()
                assert np.all(moved >> 20 == r + 1), f"ring {r} moves bytes it does not hold"
                sc[span(r, step[5], live)] = 0
                sc[span(r, step[4], live)] = moved
                rows_moved = slot_row[r][step[5]:step[5] + live]
                slot_row[r][step[5]:step[5] + live] = [None] * live
                slot_row[r][step[4]:step[4] + live] = rows_moved
            continue
        m = st.members[step[0]]
        if m.call_scratch > 0 and m.kind != "reduce":  # the kernel's scratch: garbage after the call
            q = int(step[6]) - 1 if m.widened else -1
            o = st.scratch_offsets[step[0]] if q < 0 else wide_offset(st, step[0], q)
            sc[o:o + -(-(m.region_alts[q][2] if q >= 0 else m.call_scratch) // ALIGN) * ALIGN] = 0
        if m.kind == "reduce":
            t = m.streamed[0]
            r0 = produced_rows[m.out]
            r1 = r0 + step[1]
            if t in ring_of:
                assert holds(ring_of[t], step[5], range(r0, r1)), "reduce reads rows not held"
            else:
                assert step[5] == r0 and (t not in written or all(r in written[t] for r in range(r0, r1)))
            assert step[2] == (REDUCE_LAST if r1 == h[t] else 0) | (REDUCE_FIRST if r0 == 0 else 0)
            if step[2] & REDUCE_FIRST:  # zeroed here: busy from this band on
                sc[st.acc_offset:st.acc_offset + n_acc] = -1
            assert np.all(sc[st.acc_offset:st.acc_offset + n_acc] == -1), "running sums overwritten"
            for r in range(r0, r1):
                reads_left[(t, r)] -= 1
            produced_rows[m.out] = r1
            continue
        n_out = step[1]
        o0 = produced_rows[m.out]
        o1 = o0 + n_out
        windows = []
        for q, t in enumerate(m.streamed):
            r0, r1 = m.rows_needed(o0, o1, h[t])
            if q == 0 and m.kind == "window":
                assert step[2] == m.p - o0 * m.s + r0 and 0 <= step[2] <= m.p and step[3] == r1 - r0
            if t in ring_of:
                windows.append((ring_of[t], step[5 + q], range(r0, r1)))
                assert holds(*windows[-1]), f"call {step} reads rows not in the window of {t}"
            else:
                assert step[5 + q] == r0
                if t in written:
                    assert all(r in written[t] for r in range(r0, r1)), "read before written"
            # output rows [o0, o1) consume one read of each needed row per output row
            for o in range(o0, o1):
                a, b = m.rows_needed(o, o + 1, h[t])
                for r in range(a, b):
                    reads_left[(t, r)] -= 1
        if m.out in ring_of:
            r = ring_of[m.out]
            sc[span(r, step[4], n_out)] = np.repeat(np.array([label(r, x) for x in range(o0, o1)], np.int64), rb[r])
            slot_row[r][step[4]:step[4] + n_out] = list(range(o0, o1))
            held[r] += n_out
            assert held[r] <= st.ring_rows[r], "ring overflow"
            for w in windows:  # rows it read and wrote over: only in place, rows read for the last time
                if holds(*w):
                    continue
                rw, slot, rows = w
                hit = [x for i, x in enumerate(rows) if not holds(rw, slot + i, range(x, x + 1))]
                assert all(reads_left.get((st.rings[rw], x), 0) == 0 for x in hit), \
                    f"call {step} writes over rows it reads"
                o = st.ring_offset[r] + step[4] * rb[r] - (st.ring_offset[rw] + slot * rb[rw])
                assert n_out == 1 and _inplace_safe(g, m, step[3], step[2], o) if m.kind == "window" else o == 0, \
                    f"call {step} writes over its input in an order its kernel does not allow"
        else:
            assert step[4] == o0
        written.setdefault(m.out, set()).update(range(o0, o1))
        produced_rows[m.out] = o1
    for m in st.members:
        goal = h[m.streamed[0]] if m.kind == "reduce" else h[m.out]
        assert produced_rows[m.out] == goal, "a member did not produce every row"
    assert all(v == 0 for v in reads_left.values()), "a row was never read"
    assert all(pulled[t] == h[t] for t in st.fed), "a row-fed input was not pulled to its last row"


def wide_offset(st: Stripe, j: int, q: int) -> int:
    """The standalone offset of member j's wide region q."""
    return st.wide_offsets[j] if q == 0 else st.wide_more[j][q - 1]


def stripe_op(g: Graph, st: Stripe) -> Op:
    """The one op standing for the stripe: inputs = whole activations read + the members'
    constants, outputs = the whole tensors kept; attrs["stripe"] = what graph.json carries."""
    ins = list(st.inputs)
    for m in st.members:
        for t in m.op.inputs:
            if t >= 0 and g.tensors[t].is_const and t not in ins:
                ins.append(t)
    ring_of = {t: r for r, t in enumerate(st.rings)}

    def ref(t: int) -> dict[str, int] | None:
        if t < 0:
            return None
        if t in ring_of:
            return {"ring": ring_of[t]}
        if t in st.outputs:
            return {"out": st.outputs.index(t)}
        return {"in": ins.index(t)}

    members = []
    for j, m in enumerate(st.members):
        params = dict(m.params) if m.params is not None else dict(m.op.attrs)
        for a in _OFF_ATTRS:
            if a in params:
                params[a] = 0
        members.append({
            "kernel": "avgpool_rows_s8" if m.kind == "reduce" else m.call_kernel, "kind": m.kind, "params": params,
            "inputs": [ref(t) for t in m.op.inputs], "output": ref(m.out),
            "row_bytes": _geom(g, m.out)[1],  # type: ignore[index]
            "in_row_bytes": [_geom(g, t)[1] for t in m.streamed],  # type: ignore[index]
            "scratch": m.call_scratch, "scratch_offset": st.scratch_offsets[j], "macc": int(m.op.macc),
            "source_op": m.op.type, "source_index": m.op.index,
        })
        if m.widened and m.alt is not None:  # the calls with e[6] = 1 run `alt` in their own region (`widen`)
            wp = {**params, **m.alt[1]}
            members[-1]["wide"] = {"kernel": m.alt[0], "scratch": m.alt[2], "scratch_offset": st.wide_offsets[j],
                                   "calls": sorted(m.wide), **({"params": wp} if wp != params else {})}
            alts = m.region_alts
            if len(alts) > 1:  # several regions: call k runs region e[6] - 1 (its own offset, params)
                members[-1]["wide"].update({
                    "offsets": [wide_offset(st, j, q) for q in range(len(alts))],
                    "region_scratch": [a[2] for a in alts],
                    "region_params": [{**params, **a[1]} for a in alts],
                    "call_regions": [m.region.get(k, 0) for k in sorted(m.wide)]})
    attrs = {"stripe": {
        "band": st.band, "members": members,
        "rings": [{"tensor": g.tensors[t].name, "rows": st.ring_rows[r], "row_bytes": _geom(g, t)[1],  # type: ignore[index]
                   "offset": st.ring_offset[r], "mode": "high" if st.ring_mode[r] else "low"}
                  for r, t in enumerate(st.rings)],
        "member_scratch_offset": st.member_scratch_offset, "acc_offset": st.acc_offset,
        "acc_bytes": next(acc_bytes(m) for m in st.members if m.kind == "reduce") if st.acc_offset >= 0 else 0,
        "acc_int16": any(acc16(m) for m in st.members if m.kind == "reduce"),
        "table": st.table, "calls": st.calls,
        # row-fed graph inputs (--input-rows): the ring each fills, the graph input's index
        "sources": [{"ring": ring_of[t], "input": g.inputs.index(t)} for t in st.fed],
    }}
    op = Op("STRIPE", ins, list(st.outputs), kernel="stripe", attrs=attrs,
            index=st.members[0].op.index, macc=sum(m.op.macc for m in st.members), scratch=st.scratch)
    op.__dict__["_stripe"] = st  # for `widen_stripes` (members as laid out now: see `widen`)
    _dying_input(g, st, op)
    _fed_output(g, st, op)
    return op


SCRATCH_WITH_OUTPUT = "scratch_with_output"  # planner/liveness.py reads the same key


def _fed_output(g: Graph, st: Stripe, op: Op) -> None:
    """A stripe whose input comes in rows (--input-rows: no whole input) and that writes one
    whole tensor Y: the joint layout (passes/stripe_overlap.py) put Y's rows on scratch bytes
    dead from the step writing each on; the planner places Y's buffer at `joint.y` bytes into
    the stripe's scratch (attr `scratch_with_output`: it sets 1 when it does, else 0), so only
    the tensor outlives the stripe."""
    if st.joint is None or not st.fed or st.inputs or len(st.outputs) != 1:
        return
    y = st.outputs[0]
    if y in g.outputs or st.joint["size"] >= -(-st.scratch // 8) * 8 + g.tensors[y].nbytes:
        return  # no byte saved: the planner keeps them apart
    sa = op.attrs["stripe"]
    sa["joint"] = {**{k: v for k, v in st.joint.items() if k != "order"}, "input_bytes": 0}
    op.attrs[SCRATCH_WITH_OUTPUT] = 0


def _dying_input(g: Graph, st: Stripe, op: Op) -> None:
    """When the stripe is the last reader of its one whole input (contract 1b): the table
    poisons each input row at its death (`AI_POISON_ROWS`, garbage in poison runs only), and
    the joint layout over it (passes/stripe_overlap.py) is offered to the planner as an overlap
    of the output at `joint.y` bytes after the input, with the scratch at the input's start
    (variant `scratch_at_input`: the planner sets it to 1 when it joins them, else 0)."""
    if st.joint is None or st.fed or len(st.inputs) != 1:
        return
    x = st.inputs[0]
    mine = {id(m.op) for m in st.members}
    for o in g.ops:  # another reader of x (a stripe op standing for the same members is not one)
        if x in o.inputs and id(o) not in mine and not (o.kernel == "stripe" and o.outputs == st.outputs):
            return
    if x in g.outputs:
        return
    from stm32ai.passes.stripe_overlap import death_steps, x_last_reads

    sa = op.attrs["stripe"]
    h = int(g.tensors[x].shape[1])
    code = len(st.members) + len(st.fed)
    deaths = death_steps(st, x_last_reads(st, x, h), 0)
    table: list[list[int]] = [[code, n, 0, 0, 0, r0, 0] for s, r0, n in deaths if s < 0]
    for s, step in enumerate(st.table):
        table.append(step)
        table += [[code, n, 0, 0, 0, r0, 0] for d, r0, n in deaths if d == s]
    sa["table"] = table
    sa["input_rows_dead"] = {"input": 0, "row_bytes": g.tensors[x].nbytes // h}
    sa["joint"] = {**{k: v for k, v in st.joint.items() if k != "order"}, "input_bytes": g.tensors[x].nbytes}
    op.attrs["scratch_at_input"] = 0
    op.overlap = [(st.joint["y"], st.joint["y"], {"scratch_at_input": 1})]


def _outside_reads(g: Graph, members: set[int]) -> set[int]:
    reads = set(g.outputs)
    for i, op in enumerate(g.ops):
        if i not in members:
            reads.update(t for t in op.inputs if t >= 0)
    return reads


def try_segment(g: Graph, lo: int, hi: int, band: int, search: bool = True) -> Stripe | None:
    """The stripe of ops [lo, hi) of g.ops, or None when they cannot form one."""
    ms = [as_member(g.ops[i], g) for i in range(lo, hi)]
    if any(m is None for m in ms):
        return None
    members = [m for m in ms if m is not None]
    produced = {m.out for m in members}
    if not any(t in produced for m in members for t in m.streamed):
        return None  # no ring: nothing to gain
    try:
        return simulate_best(g, members, band, _outside_reads(g, set(range(lo, hi))), search=search)
    except StripeError:
        return None


def apply(g: Graph, lo: int, hi: int, st: Stripe) -> None:
    g.ops[lo:hi] = [stripe_op(g, st)]


def form_all(g: Graph, band: int = 1) -> list[Stripe]:
    """Every maximal run of member ops as one stripe, whatever the pool (tests, `--stripes all`):
    the executor and the schedule exercised on models too small for stripes to pay."""
    chosen: list[Stripe] = []
    lo = 0
    while lo < len(g.ops):
        hi = lo
        while hi < len(g.ops) and as_member(g.ops[hi], g) is not None:
            hi += 1
        for end in range(hi, lo + 1, -1):  # the longest run from lo that simulates
            st = try_segment(g, lo, end, band)
            if st is not None:
                apply(g, lo, end, st)
                chosen.append(st)
                break
        lo += 1
    return chosen


def _pool_floor(g: Graph) -> Callable[[int, int], int]:
    """A lower bound of the planned pool of g with ops [lo, hi) made one stripe, from g alone
    (no simulation): every activation tensor that stays whole (not produced and read only
    inside the segment) is a buffer of at least its bytes, and every op outside the segment
    needs, at its step, its scratch and its distinct tensors at once (an op whose output may
    overlap its input, `Op.overlap` / `inplace`: its largest tensor only). Graph inputs and
    outputs count nowhere (they may be the application's: --input-rows, `inputs_in_pool`).
    `form_stripes` skips the segments whose floor is no better than the best pool found."""
    root: dict[int, int] = {}

    def find(t: int) -> int:
        while root.get(t, t) != t:
            t = root[t]
        return t

    for op in g.ops:  # zero-copy aliases share one buffer
        if op.kernel == "__nop" and op.inputs and op.inputs[0] >= 0 and op.outputs:
            root[find(op.outputs[0])] = find(op.inputs[0])
    io = set(g.inputs) | set(g.outputs)
    size: dict[int, int] = {}
    for op in g.ops:
        for t in [*op.inputs, *op.outputs]:
            if t >= 0 and not g.tensors[t].is_const and t not in io:
                size[find(t)] = max(size.get(find(t), 0), g.tensors[t].nbytes)
    readers: dict[int, list[int]] = {}
    producer: dict[int, int] = {}
    for i, op in enumerate(g.ops):
        for t in op.inputs:
            if t >= 0:
                readers.setdefault(find(t), []).append(i)
        for t in op.outputs:
            producer[find(t)] = i
    foot = []
    for op in g.ops:
        groups = {find(t) for t in [*op.inputs, *op.outputs] if t >= 0 and find(t) in size}
        if op.kernel == "__nop":
            foot.append(0)
        elif op.overlap or op.inplace:
            foot.append(max((size[r] for r in groups), default=0))
        else:
            foot.append(int(op.scratch) + sum(size[r] for r in groups))
    # per op index: the running max of the footprints before it and after it
    pre = [0] * (len(foot) + 1)
    for i, f in enumerate(foot):
        pre[i + 1] = max(pre[i], f)
    post = [0] * (len(foot) + 1)
    for i in range(len(foot) - 1, -1, -1):
        post[i] = max(post[i + 1], foot[i])

    def floor(lo: int, hi: int) -> int:
        whole = max((b for r, b in size.items() if not (lo <= producer.get(r, -1) < hi and
                                                        all(lo <= i < hi for i in readers.get(r, [])))),
                    default=0)
        return max(whole, pre[lo], post[hi])

    return floor


def form_stripes(g: Graph, pool_of: Callable[[Graph], int], bands: tuple[int, ...] = (1,),
                 max_len: int = 64) -> list[Stripe]:
    """Greedy search over cut points: repeatedly apply the segment (and band height) that
    shrinks the planned pool most, until none does (ties: fewer kernel calls, then the first
    segment in op order). pool_of plans a graph (the planner is fast). Segments are tried in
    the order of `_pool_floor`, a lower bound of their pool, and those whose bound cannot beat
    the best pool found are not simulated: the same choice as trying every one (VWW
    --input-rows: 19 simulations instead of 500)."""
    chosen: list[Stripe] = []
    pool_now = pool_of(g)
    while True:
        best: tuple[int, int, int, int, int, Stripe] | None = None  # (pool, calls, lo, hi, band #, stripe)
        n = len(g.ops)
        ok = [as_member(op, g) is not None for op in g.ops]
        floor = _pool_floor(g)
        cands = []
        for lo in range(n):
            if not ok[lo]:
                continue
            for hi in range(lo + 2, min(n, lo + max_len) + 1):
                if not ok[hi - 1]:
                    break
                cands.append((floor(lo, hi), lo, hi))
        cands.sort()
        for low, lo, hi in cands:
            if low >= pool_now or (best is not None and low > best[0]):
                break  # sorted by bound: no later segment can win either
            for bi, band in enumerate(bands):
                st = try_segment(g, lo, hi, band, search=False)  # quick layouts; the pick searched
                if st is None:
                    continue
                saved_ops = g.ops[lo:hi]
                apply(g, lo, hi, st)
                try:
                    pool = pool_of(g)
                finally:
                    g.ops[lo:lo + 1] = saved_ops
                if pool < pool_now and (best is None or (pool, st.calls, lo, hi, bi) < best[:5]):
                    best = (pool, st.calls, lo, hi, bi, st)
        if best is None:
            return chosen
        pool_now, _, lo, hi, _, st = best
        st = try_segment(g, lo, hi, st.band) or st  # the full layout search: never a larger scratch
        apply(g, lo, hi, st)
        chosen.append(st)


def summary(g: Graph) -> list[dict[str, Any]]:
    """Each stripe of a compiled graph, for `analyze` (text and --json): members, band height,
    rings (rows x row bytes), scratch bytes, calls and the step table's flash bytes."""
    out = []
    for op in g.ops:
        if op.kernel != "stripe":
            continue
        st = op.attrs["stripe"]
        out.append({
            "members": [f"{m['source_op']}#{m['source_index']}:{m['kernel']}" for m in st["members"]],
            "band": st["band"],
            "rings": [{"tensor": r["tensor"], "rows": r["rows"], "row_bytes": r["row_bytes"]} for r in st["rings"]],
            "scratch": int(op.scratch), "calls": st["calls"],
            # the emitter's element type: int8 when every value fits (emitter._stripe_code)
            "table_bytes": STEP_WIDTH * len(st["table"]) * (
                1 if all(-128 <= v <= 127 for step in st["table"] for v in step) else 2),
        })
    return out
