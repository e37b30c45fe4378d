"""Buffers and their lifetimes.

A buffer is a set of tensors sharing storage: a tensor and its zero-copy aliases
(`__nop` RESHAPE), plus an in-place op's output and the input it overwrites. Its
lifetime is the closed step interval from its first definition to its last use; graph
inputs live from step 0 and graph outputs to the last step.

Overlapping pairs: when a kernel may write its output over its dying input at an offset
(`Op.overlap`, from the kernel's access order, passes/lower/overlap.py), both go into one
buffer with a fixed byte offset per tensor (`Buffer.inner`), the union of the two as its size.
The allocator still sees rectangles (size, first, last).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stm32ai.ir import Graph, Op


@dataclass
class Buffer:
    size: int  # bytes, rounded up to the alignment
    first: int
    last: int
    tensors: list[int] = field(default_factory=list)
    scratch_of: int = -1  # op index when this is a kernel's scratch
    app_owned: bool = False  # the application provides it (not in the pool)
    state: bool = False  # persistent (variable) tensors: in the instance's state area, not the pool
    inner: dict[int, int] = field(default_factory=dict)  # tensor id -> byte offset inside (0 if absent)
    # op index -> byte offset inside of that op's scratch, when it lies in this buffer (a stripe
    # joined with its dying input: overlap variant SCRATCH_AT_INPUT)
    scratch_inner: dict[int, int] = field(default_factory=dict)
    # op index -> kernel attrs (access order) the inner offsets assume; plan_memory applies them
    orders: dict[int, dict[str, int]] = field(default_factory=dict)
    # (anchor buffer index, bytes): this buffer starts that far above the anchor (the pieces of
    # a stripe's scratch around the output it holds: SCRATCH_WITH_OUTPUT); the allocator places
    # a tied group as one
    tie: tuple[int, int] | None = None

    @property
    def in_pool(self) -> bool:
        return not (self.app_owned or self.state)


# An overlap variant with this key set: the op's scratch (of `attrs[stripe][joint][scratch]`
# bytes) lies in the joined buffer at input 0's first byte (a stripe over its dying input,
# passes/stripe_overlap.py proved every byte safe from the stripe's schedule).
SCRATCH_AT_INPUT = "scratch_at_input"


# An op attr: its scratch holds its output (a stripe fed in rows whose joint layout put the
# output's rows on scratch bytes dead once each is written, passes/stripe_overlap.py): the
# output's buffer goes `attrs[stripe][joint][y]` bytes into the scratch, the scratch bytes below
# and above it are buffers of the op's step tied to it; the planner sets the attr to 1 then.
SCRATCH_WITH_OUTPUT = "scratch_with_output"


def _tie_output(g: Graph, op: Op, op_idx: int, step: int, buffers: list[Buffer], tensor_buffer: dict[int, int],
                scratch_buffer: dict[int, int], align: int) -> bool:
    """Lay op's scratch around its output's buffer (SCRATCH_WITH_OUTPUT); False: not possible
    here. The output's buffer may be an overlap chain (the next op writing over the output):
    its other tensors are born later, so its bytes beside the output are free at this step."""
    joint = op.attrs["stripe"]["joint"]
    y = op.outputs[0]
    bi = tensor_buffer.get(y, -1)
    if bi < 0:
        return False
    by = buffers[bi]
    inner_y = by.inner.get(y, 0)
    lo = int(joint["y"]) - inner_y  # the buffer's start relative to the scratch's
    size = _align(int(joint["size"]), align)
    if by.first != step or by.tie is not None or not by.in_pool or by.scratch_inner or lo % align \
            or size < lo + _align(g.tensors[y].nbytes, align):
        return False
    if lo > 0:  # the scratch bytes below it
        anchor, at = len(buffers), 0
        buffers.append(Buffer(lo, step, step, scratch_of=op_idx))
        by.tie = (anchor, lo)
    else:
        anchor, at = bi, lo
        by.scratch_inner[op_idx] = -lo
    above = lo + by.size
    if size > above:  # and above it
        buffers.append(Buffer(size - above, step, step, scratch_of=op_idx, tie=(anchor, above - at)))
    scratch_buffer[op_idx] = anchor
    buffers[anchor].orders[op_idx] = {SCRATCH_WITH_OUTPUT: 1}
    return True


def joint_scratch(op: Op) -> int:
    """Bytes of the op's scratch when joined with its input (SCRATCH_AT_INPUT)."""
    return int(op.attrs["stripe"]["joint"]["scratch"])


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class _Groups:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, t: int) -> int:
        self.parent.setdefault(t, t)
        while self.parent[t] != t:
            self.parent[t] = self.parent[self.parent[t]]
            t = self.parent[t]
        return t

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(b)] = self.find(a)


def _overlap_deltas(g: Graph, op: Op, overlap: bool = True) -> list[tuple[int, int, dict[str, int]]] | None:
    """Where output 0 may start relative to input 0 when it shares input 0's storage, with
    the kernel attrs that make it safe: `Op.overlap`, or 0 for an elementwise in-place op of
    equal size."""
    if not op.inputs or op.inputs[0] < 0 or not op.outputs:
        return None
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if x.is_const:
        return None
    if op.overlap and overlap:
        return list(op.overlap)
    if op.inplace and x.nbytes == y.nbytes:
        return [(0, 0, {})]
    return None


# A chain: the alias group it starts with, then per overlapped op (the tail's group root,
# the new group root, the op index, its safe offsets of the new tensor relative to the tail).
Link = tuple[int, int, int, list[tuple[int, int, dict[str, int]]]]
Chain = tuple[int, list[Link]]


def _merge_overlaps(g: Graph, order: list[int], step_of: dict[int, int], groups: _Groups,
                    span: dict[int, list[int]], pinned: set[int], owned: set[int],
                    overlap: bool) -> dict[int, Chain]:
    """Join each overlappable op's dying input group and new output group; returns the chains
    by final group root. Only the tail of a chain is alive when the next op joins it."""
    chains: dict[int, Chain] = {}
    for op_idx in order:
        op = g.ops[op_idx]
        deltas = _overlap_deltas(g, op, overlap)
        if deltas is None:
            continue
        src, dst = groups.find(op.inputs[0]), groups.find(op.outputs[0])
        if src == dst or src in pinned or dst in owned:
            continue
        if span[src][1] != step_of[op_idx] or span[dst][0] != step_of[op_idx]:
            continue
        head, links = chains.get(src, (src, []))
        tail = links[-1][1] if links else head
        if groups.find(tail) != src or dst in chains:
            continue  # the input is not the chain's live tail: keep them apart
        chains.pop(src, None)
        groups.union(src, dst)
        r = groups.find(src)
        chains[r] = (head, [*links, (tail, dst, op_idx, deltas)])
        span[r] = [min(span[src][0], span[dst][0]), max(span[src][1], span[dst][1])]
        if dst in pinned:
            pinned.add(r)
    return chains


def _candidates(a: int, b: int, s: int, lo: int, hi: int, align: int) -> set[int]:
    """Offsets worth trying in the safe range [lo, hi] for a tensor of s bytes after a tail
    with a bytes of the chain below it and b from it up: the ends, 0, and the offsets that
    put the new tensor at the chain's bottom or top (inside it when it fits)."""
    out = {lo, hi}
    for v in (0, -a, b - s):
        for r in (v // align * align, -(-v // align) * align):
            out.add(min(max(r, lo), hi))
    return out


def _place_chain(g: Graph, alias_root: dict[int, int], chain: Chain, inner: dict[int, int],
                 align: int, orders: dict[int, dict[str, int]]) -> None:
    """Choose one safe offset per link so that the chain spans the fewest bytes (a small
    dynamic programme over (bytes below the tail, bytes from the tail up)), then set the inner
    offsets (tensors of one alias group share one) and record the access order (kernel attrs)
    each op's offset needs in `orders`."""
    head, links = chain
    roots = [head] + [dst for _, dst, _, _ in links]
    members = {r: [t for t, a in alias_root.items() if a == r] for r in roots}
    sizes = {r: max(g.tensors[t].nbytes for t in ts) for r, ts in members.items()}
    # state: (below, above) -> (previous state, offset taken)
    states: dict[tuple[int, int], tuple[tuple[int, int] | None, int]] = {(0, sizes[head]): (None, 0)}
    history = []
    for _, dst, _, deltas in links:
        nxt: dict[tuple[int, int], tuple[tuple[int, int] | None, int]] = {}
        for (a, b) in states:
            for lo, hi, _ in deltas:
                for d in _candidates(a, b, sizes[dst], lo, hi, align):
                    key = (max(a + d, 0), max(b - d, sizes[dst]))
                    if key not in nxt:
                        nxt[key] = ((a, b), d)
        history.append(nxt)
        states = _pareto(nxt)
    best = min(states, key=lambda k: (k[0] + k[1], k[0]))
    picks = []
    for nxt in reversed(history):
        prev, d = nxt[best]
        picks.append(d)
        assert prev is not None
        best = prev
    picks.reverse()
    pos = {head: 0}
    for (tail, dst, op_idx, deltas), d in zip(links, picks, strict=True):
        pos[dst] = pos[tail] + d
        variant = next(v for lo, hi, v in deltas if lo <= d <= hi)
        if variant:
            orders[op_idx] = variant
    low = min(pos.values())
    for r, ts in members.items():
        for t in ts:
            inner[t] = pos[r] - low


def _pareto(states: dict[tuple[int, int], tuple], keep: int = 256) -> dict[tuple[int, int], tuple]:
    """Drop states another one beats on both sides; keep the `keep` smallest spans."""
    ranked = sorted(states, key=lambda k: (k[0] + k[1], k[0]))
    out: dict[tuple[int, int], tuple] = {}
    for k in ranked:
        if any(a <= k[0] and b <= k[1] for a, b in out):
            continue
        out[k] = states[k]
        if len(out) >= keep:
            break
    return out


def build_buffers(g: Graph, order: list[int], app_owned: set[int], align: int,
                  inplace: bool = True, overlap: bool = True
                  ) -> tuple[list[Buffer], dict[int, int], dict[int, int]]:
    """inplace: let elementwise ops overwrite their dying input; overlap: also the kernels
    with a modelled access order (`Op.overlap`)."""
    step_of = {op_idx: s for s, op_idx in enumerate(order)}
    last_step = max(len(order) - 1, 0)
    groups = _Groups()
    activations = [t for t in sorted(g.used_tensor_ids()) if not g.tensors[t].is_const]
    for t in activations:
        groups.find(t)
    for op in g.ops:
        if op.kernel == "__nop":
            groups.union(op.inputs[0], op.outputs[0])

    def lifetimes() -> dict[int, list[int]]:
        span: dict[int, list[int]] = {}
        for t in activations:
            r = groups.find(t)
            s = span.setdefault(r, [last_step + 1, -1])
            if t in g.inputs:
                # alive from the start, even if no op reads it (the app writes it)
                s[0] = 0
                s[1] = max(s[1], 0)
            if t in g.outputs:
                s[1] = last_step
            if g.tensors[t].variable:
                # persistent state (LSTM): kept from one run to the next, so never shared
                s[0], s[1] = 0, last_step
        for op_idx in order:
            op, step = g.ops[op_idx], step_of[op_idx]
            for t in op.outputs:
                s = span[groups.find(t)]
                s[0] = min(s[0], step)
                s[1] = max(s[1], step)
            for t in op.inputs:
                if t >= 0 and not g.tensors[t].is_const:
                    s = span[groups.find(t)]
                    s[1] = max(s[1], step)
        return span

    span = lifetimes()
    variables = [t for t in activations if g.tensors[t].variable]
    pinned = {groups.find(t) for t in list(g.outputs) + list(app_owned) + variables}
    owned = {groups.find(t) for t in app_owned} | {groups.find(t) for t in variables}
    # byte offset of each tensor inside its group (aliases share 0; overlapped pairs differ)
    inner: dict[int, int] = dict.fromkeys(activations, 0)
    orders: dict[int, dict[int, dict[str, int]]] = {}  # chain root -> op index -> attrs
    if inplace:
        alias_root = {t: groups.find(t) for t in activations}
        chains = _merge_overlaps(g, order, step_of, groups, span, pinned, owned, overlap)
        for root, chain in chains.items():
            orders[root] = {}
            _place_chain(g, alias_root, chain, inner, align, orders[root])

    buffers: list[Buffer] = []
    index_of_root: dict[int, int] = {}
    tensor_buffer: dict[int, int] = {}
    for t in activations:
        r = groups.find(t)
        if r not in index_of_root:
            first, last = span[r]
            index_of_root[r] = len(buffers)
            buffers.append(Buffer(0, first, last, orders=orders.get(r, {})))
        b = buffers[index_of_root[r]]
        b.tensors.append(t)
        b.size = max(b.size, _align(inner[t] + g.tensors[t].nbytes, align))
        if inner[t]:
            b.inner[t] = inner[t]
        b.app_owned = b.app_owned or t in app_owned
        b.state = b.state or g.tensors[t].variable
        tensor_buffer[t] = index_of_root[r]
    scratch_buffer: dict[int, int] = {}
    joined = {op_idx: root for root, o in orders.items() for op_idx, v in o.items() if v.get(SCRATCH_AT_INPUT)}
    for op_idx in order:
        op = g.ops[op_idx]
        if op_idx in joined:  # inside the buffer joining its input and output (at the input's start)
            b = buffers[index_of_root[joined[op_idx]]]
            x = op.inputs[0]
            b.scratch_inner[op_idx] = inner[x]
            b.size = max(b.size, _align(inner[x] + joint_scratch(op), align))
            scratch_buffer[op_idx] = index_of_root[joined[op_idx]]
            continue
        if overlap and op.scratch > 0 and SCRATCH_WITH_OUTPUT in op.attrs \
                and _tie_output(g, op, op_idx, step_of[op_idx], buffers, tensor_buffer, scratch_buffer, align):
            continue
        if op.scratch > 0:
            s = step_of[op_idx]
            scratch_buffer[op_idx] = len(buffers)
            buffers.append(Buffer(_align(op.scratch, align), s, s, scratch_of=op_idx))
    return buffers, tensor_buffer, scratch_buffer


def lower_bound(buffers: list[Buffer]) -> int:
    """Max over steps of the bytes alive at that step (pool buffers only)."""
    steps = [b for b in buffers if b.in_pool]
    if not steps:
        return 0
    last = max(b.last for b in steps)
    return max(sum(b.size for b in steps if b.first <= s <= b.last) for s in range(last + 1))
