"""Calls with room (docs/stripes.md "Calls with room"): after the band rule, a stripe member
may run some of its calls another way (its op's own two-column kernel, or its weights staged per
call) where the finished layout has free bytes at those calls. A pass of its own after
passes/stripes.py and passes/staging.py: it prices calls with the staging cost model, which
itself imports the stripe module, so it cannot live in either."""

from __future__ import annotations

from typing import Any

from stm32ai.ir import Graph, Op
from stm32ai.passes.staging import ZERO_WAIT, _call_cycles, conv_stage_bytes
from stm32ai.passes.stripe_overlap import joint_layout
from stm32ai.passes.stripes import (
    _OFF_ATTRS,
    ALIGN,
    JOINT_TRIES,
    Key,
    Member,
    Stripe,
    _fed_modes,
    _fit,
    _narrow_scratch,
    _place,
    mark_keep,
    pool_bytes,
    stripe_op,
)

# narrowed kernels (`_narrow_scratch`) whose calls `widen` may run as the op's own kernel: the
# one-column conv2d_s8 (never in place: k > 1, so the wide kernel's access order never matters)
WIDEN_KERNELS = ("conv2d_s8_1col",)
# wide regions per member (`widen`): groups of its calls, each with its own scratch offset and
# alternative (table e[6] = 1 + region); the executor's per-member offset and params tables
MAX_REGIONS = 8


def _relayout(g: Graph, st: Stripe) -> int:
    """Lay st out again as `simulate_best` does for its pick (ring modes searched, the joint
    layout's order search): the pool bytes it needs (`pool_bytes`)."""
    st.table = st.logical
    _place(g, st, st.narrow, True)
    if st.joint is not None and st.fed and not st.inputs:  # its output joins the scratch (rows35)
        _fed_modes(g, st)
    elif st.joint is not None:
        better = joint_layout(g, st, st.items, tries=JOINT_TRIES, allow=st.allow)
        if better is not None and better["size"] < st.joint["size"]:
            st.joint = better
            mark_keep(g, st)
    return pool_bytes(g, st)


def _alternatives(g: Graph, m: Member, staged: bool) -> list[tuple[str, dict[str, Any], int]]:
    """What some calls of member m may run instead, each (kernel, params patch, scratch bytes):
    a narrowed one-column conv its op's own kernel (two columns); a conv2d_s8 with its int8
    weights in flash (`--optimization ram`'s layout), when `staged` (a flash with wait states),
    its weights and rq staged whole per call (`stage_oc` = out_c: one block, the unstaged loop
    order), expanded to int16 or as they are (docs/flash_staging.md)."""
    if m.kind != "window":
        return []
    if m.kernel in WIDEN_KERNELS:
        return [(str(m.op.kernel), {}, int(m.op.scratch))]
    a = m.op.attrs
    if not staged or m.kernel or m.op.kernel != "conv2d_s8" or int(a.get("w16", 0)) or int(a.get("stage_oc", 0)) \
            or g.tensors[m.op.inputs[1]].dtype != "int8":
        return []
    out = []
    for w16 in (1, 0):
        patch = {"stage_oc": int(a["out_c"]), "w16": w16}
        out.append(("conv2d_s8", patch, int(m.op.scratch) + conv_stage_bytes({**a, **patch})))
    return out


def _call_gain(g: Graph, m: Member, step: list[int], alt: tuple[str, dict[str, Any], int], flash: Any) -> float:
    """Modelled cycles (passes/staging.py `_call_cycles`) call `step` of m saves as `alt`."""
    a = dict(m.op.attrs)
    for k in _OFF_ATTRS:
        if k in a:
            a[k] = 0
    a.update(out_h=step[1], in_h=step[3], pad=[step[2], *list(a["pad"])[1:]])
    now = Op(m.op.type, list(m.op.inputs), [], kernel=m.call_kernel, attrs=a)
    then = Op(m.op.type, list(m.op.inputs), [], kernel=alt[0], attrs={**a, **alt[1]})
    return _call_cycles(now, g, flash, None, rows=True) - _call_cycles(then, g, flash, None, rows=True)


def widen(g: Graph, st: Stripe, flash: Any = None) -> bool:
    """Calls of a member that run an alternative (`_alternatives`) where the layout has room
    for its scratch: a narrowed member (`_narrow_scratch`: IC's 8x8x64 3x3 conv as
    `conv2d_s8_1col`, one int16 column, because its two-column scratch sets the peak) as the
    op's own kernel (`conv2d_s8`: a pixel pair per pass over the weights, half the flash
    re-reads, the int8 pair loop), and on a flash with wait states (`flash`, a
    passes/staging.py FlashModel) a conv2d_s8 member with its weights staged whole at that call
    (read from flash once per call instead of once per pixel pair). The peak is at a few calls,
    not all. The stripe is laid out as `simulate_best` does (`_relayout`); then, member by
    member (the largest modelled gain first), each alternative is tried greedily over the
    member's calls (the largest gain first): a call takes it (table e[6] = 1) when the
    alternative's scratch, one more layout item busy at the member's alternative calls, fits
    the layout's free bytes at those steps: placed last in the standalone layout (which may
    grow while the joint one, the pool's, does not) and in the joint layout over the dying
    input (the same placement order, the item appended) without the stripe's pool bytes
    (`pool_bytes`) growing; every other item stays where it was. The alternative whose calls
    gain most (modelled) is kept. Returns whether any call changed."""
    staged = flash is not None and flash.wait_states > 0
    # the members as this stripe was laid out (other layouts of the same members, band options,
    # changed their narrowing since): its table and layouts are still the stripe's own
    _narrow_scratch(st.members, st.narrow)
    for m in st.members:
        m.clear_wide()
    base = pool_bytes(g, st)
    calls: dict[int, list[int]] = {}
    for s_, step in enumerate(st.table):
        if 0 <= step[0] < len(st.members):
            calls.setdefault(step[0], []).append(s_)
    fm = flash
    if fm is None:
        fm = ZERO_WAIT
    work = []  # (member, alternative, per-call gains)
    for j, m in enumerate(st.members):
        for alt in _alternatives(g, m, staged):
            gains = [_call_gain(g, m, st.table[s_], alt, fm) for s_ in calls.get(j, [])]
            if max(gains, default=0.0) > 0:
                work.append((j, alt, gains))
    if not work:
        return False
    # the base layout's placed spans (standalone), as `_layout_modes` placed them
    placed0: list[tuple[int, int, int, Key]] = []
    for _, what, r, spans in st.items:
        off = (st.ring_offset[r] if what == "ring" else st.acc_offset if what == "acc"
               else st.scratch_offsets[r])
        keys: list[Key] = [(r, i) for i in range(len(spans))] if what == "ring" else [None] * len(spans)
        placed0.extend((off + lo, off + hi, b, k) for (lo, hi, b), k in zip(spans, keys, strict=True))
    outside = sum(g.tensors[t].nbytes for t in [*st.inputs, *st.outputs])
    # the joint layout only where the planner is offered it (`_dying_input`); else the
    # standalone scratch must not grow
    op0 = stripe_op(g, st)  # (fed in rows: the output inside the scratch, `_fed_output`)
    joinable = st.joint is not None and (op0.overlap is not None or "scratch_with_output" in op0.attrs)
    limit = base if joinable else st.scratch + outside
    best_gain: dict[int, float] = {}
    for j, _, gains in work:
        best_gain[j] = max(best_gain.get(j, 0.0), sum(x for x in gains if x > 0))
    Pick = tuple[Any, set[int], int, int]  # (alternative, calls, standalone offset, its size)
    n = len(st.members)

    def greedy(joint0: dict[str, Any] | None) -> tuple[float, dict[int, list[Pick]], int, dict[str, Any] | None]:
        """The alternatives' calls on top of the standalone layout and joint layout joint0: per
        member up to MAX_REGIONS regions, each a group of its calls with its own offset."""
        placed, top0, joint_now = list(placed0), st.scratch, joint0
        total, picks = 0.0, {}
        for j in sorted(best_gain, key=lambda j: -best_gain[j]):
            taken: set[int] = set()
            regions: list[Pick] = []
            for q in range(MAX_REGIONS):
                pick: tuple[float, Any, set[int], int, int, dict[str, Any] | None] | None = None
                for jj, alt, gains in work:
                    if jj != j or (regions and alt[0] != regions[0][0][0]):  # one wide kernel per member
                        continue
                    size = -(-alt[2] // ALIGN) * ALIGN
                    wide: set[int] = set()
                    got: tuple[int, int, dict[str, Any] | None] | None = None  # (standalone offset, top, joint)
                    for k in sorted(range(len(gains)), key=lambda k: -gains[k]):
                        if gains[k] <= 0:
                            break
                        if k in taken:
                            continue
                        spans = [(0, size, sum(1 << calls[j][c] for c in wide | {k}))]
                        off = _fit(placed, spans, {0} | {e for _, e, _, _ in placed})
                        top = max(top0, off + size)
                        joint = None
                        if joint_now is not None:
                            joint = joint_layout(g, st, [], allow=st.allow,
                                                 order=[*joint_now["order"], (size, "wide", n * q + j, spans)])
                            if joint is None:
                                continue
                        if (min(top + outside, int(joint["size"])) if joinable and joint else top + outside) <= limit:
                            wide.add(k)
                            got = (off, top, joint)
                    gain = sum(gains[k] for k in wide)
                    if got is not None and (pick is None or gain > pick[0]):
                        pick = (gain, alt, wide, got[0], got[1], got[2])
                if pick is None:  # nothing more fits: a further region would not either
                    break
                gain, alt, wide, off, top0, joint_now = pick
                total += gain
                size = -(-alt[2] // ALIGN) * ALIGN
                regions.append((alt, wide, off, size))
                taken |= wide
                placed.append((off, off + size, sum(1 << calls[j][c] for c in wide), None))
            if regions:
                picks[j] = regions
        return total, picks, top0, joint_now

    total, picks, top, joint = greedy(st.joint)
    if not picks:
        return False
    st.scratch = top
    if joint is not None:
        st.joint = joint
    st.wide_more = {}
    for j, regions in picks.items():
        m = st.members[j]
        m.alts = [alt for alt, _, _, _ in regions]
        m.alt = m.alts[0]
        m.wide = frozenset(k for _, wide, _, _ in regions for k in wide)
        m.region = {k: q for q, (_, wide, _, _) in enumerate(regions) for k in wide if q}
        st.wide_offsets[j] = regions[0][2]
        if len(regions) > 1:
            st.wide_more[j] = [off for _, _, off, _ in regions[1:]]
        else:
            m.alts = []
        for q, (_, wide, _, _) in enumerate(regions):
            for k in wide:
                st.table[calls[j][k]][6] = 1 + q
    return True


def widen_stripes(g: Graph, flash: Any = None) -> None:
    """`widen` every stripe op of g made by `stripe_op` (the Stripe it stands for kept on it)."""
    for i, op in enumerate(g.ops):
        st = op.__dict__.get("_stripe") if op.kernel == "stripe" else None
        if st is None:
            continue
        _narrow_scratch(st.members, st.narrow)
        if any(m.kind != "reduce" and m.call_kernel != d["kernel"]
               for m, d in zip(st.members, op.attrs["stripe"]["members"], strict=True)):
            _relayout(g, st)  # not the narrowing the op was made with (not seen): lay it out again
        if widen(g, st, flash):
            g.ops[i] = stripe_op(g, st)
