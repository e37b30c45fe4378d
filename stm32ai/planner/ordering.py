"""Memory-aware schedule: the topological op order with the smallest peak of live bytes.

The cost model is the one `liveness.build_buffers` plans with: a buffer (a tensor and its
zero-copy aliases) is alive from the step of its producer to the step of its last reader,
graph outputs to the end; a kernel's scratch only at its own step; an in-place op's output
shares its input's bytes when that input dies at the op. The live bytes at a step depend
only on the set of ops already run, so the search is over those sets (downsets of the
dependency DAG):

* `exact_order`: A* over downsets with the bottleneck (max) cost, an admissible bound
  (the largest step any remaining op needs on its own), and a dominance rule that runs
  at once any ready op that neither raises the peak so far nor grows the live bytes
  (moving such an op earlier never hurts any order, see `_free_move`). It stops after a
  fixed number of expanded states (`budget`), not a time limit, so the result depends
  on the model only.
* `beam_order`: the fallback past the budget, a beam search over the same states
  (deterministic, polynomial).

Ops that touch persistent state (variable tensors: LSTM, SVDF, stateful custom ops) keep
their converter-order relative order; every other op only respects data dependencies.
`memory_aware_order` returns the converter order unless a searched order is strictly
better, so models without branches keep their schedule exactly.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from stm32ai.ir import Graph

EXACT_BUDGET = 1_500  # expanded states of the exact search before the beam fallback (~0.5 s)
BEAM_WIDTH = 64


@dataclass
class Problem:
    """The graph reduced to what the order changes: values (alias groups) and per-op effects."""

    n: int
    preds: list[int]  # per op: bitmask of ops that must run before it
    succs: list[list[int]]
    size: list[int]  # per value: aligned bytes it takes in the pool (0: not in the pool)
    keep: list[bool]  # per value: alive to the end (graph output)
    cons: list[int]  # per value: bitmask of ops reading it
    born_by: list[int]  # per value: bitmask of ops writing it (empty: a graph input)
    outs: list[list[int]]  # per op: values it writes
    ins: list[list[int]]  # per op: values it reads
    scratch: list[int]
    inplace: list[tuple[int, int] | None]  # per op: (src value, dst value) it may share
    first_extra: int  # graph inputs nobody reads: alive at step 0 only
    initial: list[int]  # values alive before any op (graph inputs)


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def build_problem(g: Graph, app_owned: set[int], align: int) -> Problem:
    n = len(g.ops)
    parent: dict[int, int] = {}

    def find(t: int) -> int:
        parent.setdefault(t, t)
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    for op in g.ops:
        if op.kernel == "__nop":
            parent[find(op.outputs[0])] = find(op.inputs[0])
    acts = sorted(t for t in g.used_tensor_ids() if not g.tensors[t].is_const)
    value_of: dict[int, int] = {}
    roots: dict[int, int] = {}
    for t in acts:
        value_of[t] = roots.setdefault(find(t), len(roots))
    nv = len(roots)
    size, keep = [0] * nv, [False] * nv
    pinned, owned = [False] * nv, [False] * nv
    for t in acts:
        v, ten = value_of[t], g.tensors[t]
        out_of_pool = t in app_owned or ten.variable  # constant over the run: no effect on order
        if out_of_pool:
            owned[v] = True
        if not out_of_pool:
            size[v] = max(size[v], _align(ten.nbytes, align))
        if t in g.outputs:
            keep[v] = True
        if t in g.outputs or out_of_pool:
            pinned[v] = True
    for v in range(nv):
        if owned[v]:
            size[v] = 0

    producer: dict[int, int] = {}
    for i, op in enumerate(g.ops):
        for t in op.outputs:
            producer[t] = i
    preds = [0] * n
    cons, born_by = [0] * nv, [0] * nv
    ins: list[list[int]] = [[] for _ in range(n)]
    outs: list[list[int]] = [[] for _ in range(n)]
    last_stateful = -1
    for i, op in enumerate(g.ops):
        for t in op.inputs:
            if t < 0 or g.tensors[t].is_const:
                continue
            if t in producer and producer[t] != i:
                preds[i] |= 1 << producer[t]
            v = value_of[t]
            cons[v] |= 1 << i
            if v not in ins[i]:
                ins[i].append(v)
        for t in op.outputs:
            v = value_of[t]
            born_by[v] |= 1 << i
            if v not in outs[i]:
                outs[i].append(v)
        if any(t >= 0 and g.tensors[t].variable for t in list(op.inputs) + list(op.outputs)):
            # persistent state: stateful ops keep their relative order
            if last_stateful >= 0:
                preds[i] |= 1 << last_stateful
            last_stateful = i
    succs: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        bits, j = preds[i], 0
        while bits:
            if bits & 1:
                succs[j].append(i)
            bits >>= 1
            j += 1

    inplace: list[tuple[int, int] | None] = [None] * n
    for i, op in enumerate(g.ops):
        if not op.inplace or not op.inputs or op.inputs[0] < 0 or not op.outputs:
            continue
        src_t, dst_t = op.inputs[0], op.outputs[0]
        if g.tensors[src_t].is_const or g.tensors[src_t].nbytes != g.tensors[dst_t].nbytes:
            continue
        src, dst = value_of[src_t], value_of[dst_t]
        if src != dst and not pinned[src] and not owned[dst]:
            inplace[i] = (src, dst)

    initial = sorted({value_of[t] for t in g.inputs})
    for v in initial:  # alive from the start: an alias of a graph input creates nothing
        born_by[v] = 0
        for i in range(n):
            if v in outs[i]:
                outs[i].remove(v)
    first_extra = sum(size[v] for v in initial if not cons[v] and not keep[v])
    scratch = [_align(op.scratch, align) if op.scratch > 0 else 0 for op in g.ops]
    return Problem(n, preds, succs, size, keep, cons, born_by, outs, ins, scratch, inplace,
                   first_extra, initial)


@dataclass
class _State:
    done: int  # bitmask of ops run
    live: int  # bytes alive after them
    peak: int  # largest step so far
    ready: tuple[int, ...]  # ops whose predecessors have all run, ascending
    order: tuple[int, ...]


class _Model:
    def __init__(self, p: Problem) -> None:
        self.p = p
        own = [self._alone(i) for i in range(p.n)]
        self.by_own = sorted(range(p.n), key=lambda i: (-own[i], i))
        self.own = own
        # per op: outputs born only by this op (the usual case) and the values it may free
        self.simple = [all(p.born_by[v] == 1 << i for v in p.outs[i]) for i in range(p.n)]
        self.outs_new = [list(p.outs[i]) for i in range(p.n)]
        self.grow = [sum(p.size[v] for v in p.outs[i]) for i in range(p.n)]
        self.frees = [[(p.cons[v], p.size[v]) for v in sorted(set(p.ins[i]) | set(p.outs[i]))
                       if not p.keep[v] and p.size[v]] for i in range(p.n)]

    def _alone(self, i: int) -> int:
        """Bytes op i needs at its step whatever the order: its inputs, outputs, scratch."""
        p = self.p
        vals = set(p.ins[i]) | set(p.outs[i])
        total = sum(p.size[v] for v in vals) + p.scratch[i]
        if p.inplace[i] is not None:
            src, dst = p.inplace[i]
            total -= min(p.size[src], p.size[dst])
        return total

    def start(self) -> _State:
        p = self.p
        live = sum(p.size[v] for v in p.initial) - p.first_extra
        ready = tuple(i for i in range(p.n) if p.preds[i] == 0)
        return _State(0, live, 0, ready, ())

    def step(self, s: _State, i: int) -> tuple[int, int, int]:
        """(step cost, live bytes after, done mask after) of running op i next."""
        p = self.p
        done = s.done | 1 << i
        if self.simple[i]:
            new, grow = self.outs_new[i], self.grow[i]
        else:
            new = [v for v in p.outs[i] if not (p.born_by[v] & s.done)]
            grow = sum(p.size[v] for v in new)
        pending = ~done
        freed = 0
        for cons, size in self.frees[i]:
            if not cons & pending:
                freed += size
        cost = s.live + grow + p.scratch[i]
        if s.done == 0:
            cost += p.first_extra
        ip = p.inplace[i]
        if ip is not None:
            src, dst = ip
            if dst in new and not (p.cons[src] & pending):
                cost -= min(p.size[src], p.size[dst])
        return cost, s.live + grow - freed, done

    def advance(self, s: _State, i: int, cost: int, live: int, done: int) -> _State:
        p = self.p
        ready = [r for r in s.ready if r != i]
        for c in p.succs[i]:
            if p.preds[c] & ~done == 0:
                ready.append(c)
        return _State(done, live, max(s.peak, cost), tuple(sorted(ready)), s.order + (i,))

    def settle(self, s: _State) -> _State:
        """Run free moves: a ready op that raises neither the peak so far nor the live bytes.

        Sound: moving such an op o earlier in any order changes the live bytes of every
        step it jumps over by at most live(after o) - live(before o) <= 0 (the inputs it
        frees here are freed there too, or earlier; its outputs add the same bytes), the in-place
        chances of the jumped ops only improve, and o's own step fits under the peak."""
        while s.done:
            for i in s.ready:
                cost, live, done = self.step(s, i)
                if cost <= s.peak and live <= s.live:
                    s = self.advance(s, i, cost, live, done)
                    break
            else:
                return s
        return s

    def bound(self, s: _State) -> int:
        """Admissible: the largest step a remaining op needs on its own."""
        for i in self.by_own:
            if not s.done >> i & 1:
                return self.own[i]
        return 0


def exact_order(p: Problem, budget: int = EXACT_BUDGET) -> tuple[list[int], int] | None:
    """Minimum-peak order and its peak, or None when the budget of expanded states runs out."""
    m = _Model(p)
    full = (1 << p.n) - 1
    s0 = m.start()
    best: dict[int, int] = {0: 0}
    heap: list[tuple[int, int, int, int, _State]] = [(m.bound(s0), 0, 0, 0, s0)]
    expanded = 0
    while heap:
        f, neg_depth, _, _, s = heapq.heappop(heap)
        if best.get(s.done, -1) < s.peak:
            continue
        if s.done == full:
            return list(s.order), s.peak
        expanded += 1
        if expanded > budget:
            return None
        for i in s.ready:
            cost, live, done = m.step(s, i)
            t = m.settle(m.advance(s, i, cost, live, done))
            if t.done in best and best[t.done] <= t.peak:
                continue
            best[t.done] = t.peak
            key = max(t.peak, m.bound(t))
            heapq.heappush(heap, (key, -len(t.order), t.peak, t.done, t))
    return None


def beam_order(p: Problem, width: int = 0) -> tuple[list[int], int]:
    """A good order for graphs too large to solve exactly: a beam of the lowest (peak,
    live) states, grown one op at a time (free moves folded in). The default width
    narrows past 200 ops so that the work stays about linear in the graph size."""
    width = width or max(4, BEAM_WIDTH * 200 // max(p.n, 200))
    m = _Model(p)
    full = (1 << p.n) - 1
    beam = [m.start()]
    finished: list[_State] = []
    while beam:
        nxt: dict[int, _State] = {}
        for s in beam:
            for i in s.ready:
                cost, live, done = m.step(s, i)
                t = m.settle(m.advance(s, i, cost, live, done))
                if t.done == full:
                    finished.append(t)
                    continue
                old = nxt.get(t.done)
                if old is None or (t.peak, t.order) < (old.peak, old.order):
                    nxt[t.done] = t
        ranked = sorted(nxt.values(), key=lambda t: (max(t.peak, m.bound(t)), t.peak, t.live,
                                                     -len(t.order), t.order))
        beam = ranked[:width]
    best = min(finished, key=lambda t: (t.peak, t.order))
    return list(best.order), best.peak


def order_peak(p: Problem, order: list[int]) -> int:
    """Peak live bytes of a given order under the search's cost model."""
    m = _Model(p)
    s = m.start()
    for i in order:
        cost, live, done = m.step(s, i)
        s = m.advance(s, i, cost, live, done)
    return s.peak


def memory_aware_order(g: Graph, app_owned: set[int], align: int) -> list[int]:
    """The converter order, or a searched order when its peak is strictly smaller."""
    converter = list(range(len(g.ops)))
    if len(g.ops) < 3:
        return converter
    p = build_problem(g, app_owned, align)
    found = exact_order(p)
    order, peak = found if found is not None else beam_order(p)
    return order if peak < order_peak(p, converter) else converter
