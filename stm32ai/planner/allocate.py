"""Offset assignment: place buffers so that those alive together never overlap.

Each strategy is a function (buffers, align) -> (offsets, pool size). The greedy ones
place buffers one by one in a fixed order, each in the lowest gap free of every
time-overlapping buffer already placed (correct by construction). `best_of` keeps the
smallest of the greedy results and, only when that is above the lower bound (the largest
sum of aligned sizes alive at one step, which no assignment can beat), runs `bump`
(iterated greedy: the buffers that cross the bound move to the front of the order, a few
rounds per greedy order) and, if still above, `solve`, an exact branch and bound with a
fixed node budget (deterministic: counts, no timer).

Why the search is complete: take any assignment, list its buffers by offset and place
them again in that order, each at its lowest fit among those already placed: no buffer
moves up, so the pool does not grow. Repeating until nothing moves gives an assignment
that is "first fit along a sequence whose offsets never decrease". `solve` enumerates
exactly those sequences, so it finds the optimum or, when the budget runs out, says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stm32ai.planner.liveness import Buffer, lower_bound

Allocator = Callable[[list[Buffer], int], tuple[list[int], int]]

# Search nodes of `solve`: a node costs about one pass over the buffers, so the budget is
# SOLVER_WORK / buffers nodes (at most SOLVER_BUDGET): ~1 s at worst on the CI machine.
SOLVER_BUDGET = 20_000
SOLVER_WORK = 300_000


@dataclass
class Allocation:
    offsets: list[int]
    size: int
    bound: int  # max over steps of live aligned bytes: no assignment is smaller
    method: str  # the greedy order that won, "bump_<order>" or "solver"
    optimal: bool  # size is proven minimal (== bound, or the solver exhausted its search)


def tie_groups(buffers: list[Buffer]) -> dict[int, list[tuple[int, int]]]:
    """Per buffer of a tied group (`Buffer.tie`), the group: (buffer, bytes above the anchor)."""
    groups: dict[int, list[tuple[int, int]]] = {}
    for i, b in enumerate(buffers):
        if b.tie is not None:
            groups.setdefault(b.tie[0], [(b.tie[0], 0)]).append((i, b.tie[1]))
    return {i: grp for grp in groups.values() for i, _ in grp}


def ties_hold(buffers: list[Buffer], offsets: list[int]) -> bool:
    return all(b.tie is None or offsets[i] == offsets[b.tie[0]] + b.tie[1] for i, b in enumerate(buffers))


def _place_group(buffers: list[Buffer], group: list[tuple[int, int]], placed: list[int], offsets: list[int],
                 align: int) -> None:
    """The lowest anchor offset at which every buffer of a tied group fits (first fit)."""
    busy = [[(offsets[j], offsets[j] + buffers[j].size) for j in placed
             if buffers[j].first <= buffers[k].last and buffers[k].first <= buffers[j].last] for k, _ in group]
    top = max((e for bs in busy for _, e in bs), default=0)  # everything above: always fits
    cands = sorted({0, -(-top // align) * align} | {-(-(e - d) // align) * align
                                                   for (_, d), bs in zip(group, busy, strict=True)
                                                   for _, e in bs if e - d > 0})
    for p in cands:
        if all(not (s < p + d + buffers[k].size and p + d < e) for (k, d), bs in zip(group, busy, strict=True)
               for s, e in bs):
            break
    for k, d in group:
        offsets[k] = p + d
        placed.append(k)


def _place_in_order(buffers: list[Buffer], order: list[int], align: int) -> tuple[list[int], int]:
    offsets = [0] * len(buffers)
    placed: list[int] = []
    groups = tie_groups(buffers)
    for i in order:
        b = buffers[i]
        if not b.in_pool:
            continue
        if i in groups:
            if i not in placed:
                _place_group(buffers, groups[i], placed, offsets, align)
            continue
        busy = sorted(
            (offsets[j], offsets[j] + buffers[j].size)
            for j in placed
            if buffers[j].first <= b.last and b.first <= buffers[j].last
        )
        # lowest offset whose gap fits b
        candidate = 0
        for start, end in busy:
            if candidate + b.size <= start:
                break
            candidate = max(candidate, (end + align - 1) // align * align)
        offsets[i] = candidate
        placed.append(i)
    size = max((offsets[i] + buffers[i].size for i in placed), default=0)
    return offsets, size


# The greedy orders, as sort keys over a buffer index: tried in this order; the first smallest wins.
ORDER_KEYS: dict[str, Callable[[list[Buffer]], Callable[[int], tuple[int, ...]]]] = {
    "greedy_by_size": lambda bs: lambda i: (-bs[i].size, bs[i].first),
    "greedy_by_area": lambda bs: lambda i: (-bs[i].size * (bs[i].last - bs[i].first + 1), i),
    "greedy_by_start": lambda bs: lambda i: (bs[i].first, -bs[i].size),
    "greedy_by_lifetime": lambda bs: lambda i: (bs[i].first - bs[i].last, -bs[i].size, i),
    "greedy_by_end": lambda bs: lambda i: (-bs[i].last, -bs[i].size, i),
}


def _order(name: str, buffers: list[Buffer]) -> list[int]:
    return sorted(range(len(buffers)), key=ORDER_KEYS[name](buffers))


def _greedy(name: str) -> Allocator:
    def run(buffers: list[Buffer], align: int) -> tuple[list[int], int]:
        return _place_in_order(buffers, _order(name, buffers), align)
    run.__name__ = name
    return run


greedy_by_size = _greedy("greedy_by_size")
greedy_by_area = _greedy("greedy_by_area")
greedy_by_start = _greedy("greedy_by_start")
greedy_by_lifetime = _greedy("greedy_by_lifetime")
greedy_by_end = _greedy("greedy_by_end")

GREEDY: dict[str, Allocator] = {name: _greedy(name) for name in ORDER_KEYS}

# Rounds of `bump` per greedy order: one round is one first-fit pass (~5 ms at 200 buffers).
BUMP_ROUNDS = 8


def bump(buffers: list[Buffer], align: int, bound: int, name: str,
         rounds: int = BUMP_ROUNDS) -> tuple[list[int], int]:
    """Iterated greedy with priority bumping: place in the greedy order `name`; while the
    pool ends above `bound`, move the buffers that cross it to the front of the order (they
    get the low offsets first, the rest fills in around them) and place again. The best pass
    is kept, so the result is never worse than the greedy one. Why it helps on squeeze-excite
    graphs (issue 24 item 6, tests/fixtures/make_fixtures_se.py): a static order places some
    big tensor early at offset 0 and a big buffer of the peak step, placed later, finds only
    the space above it; bumping the latter first reaches the bound there in 1-2 rounds from
    every order, where `solve`'s search, 200 buffers deep, runs out of nodes without a gain."""
    order = _order(name, buffers)
    best: tuple[list[int], int] | None = None
    for _ in range(rounds):
        offsets, size = _place_in_order(buffers, order, align)
        if best is None or size < best[1]:
            best = (offsets, size)
        if size <= bound:
            break
        over = [i for i in order if buffers[i].in_pool and offsets[i] + buffers[i].size > bound]
        if order[:len(over)] == over:
            break  # already in front: the next pass would repeat this one
        moved = set(over)
        order = over + [i for i in order if i not in moved]
    assert best is not None
    return best


class _Search:
    """Branch and bound over first-fit sequences with non-decreasing offsets.

    Sizes and offsets are in units of the alignment. A node is a set of placed buffers
    and the level L (offset of the last one placed); every later buffer goes at or above
    L, so the bytes below L that are free at a step are lost for good. Pruning:
    * every step needs live bytes + those lost bytes <= target;
    * a buffer whose lowest fit already ends above the target can never be placed;
    * two buffers at the same offset that do not meet in time commute: only one order.
    """

    def __init__(self, size: list[int], first: list[int], last: list[int], budget: int) -> None:
        self.n = len(size)
        self.size, self.first, self.last = size, first, last
        self.meets = [[j for j in range(self.n) if j != i and first[j] <= last[i] and first[i] <= last[j]]
                      for i in range(self.n)]
        n_steps = max(last, default=-1) + 1
        # only maximal sets of buffers alive together constrain (interval graph: at most n)
        sets = {frozenset(i for i in range(self.n) if first[i] <= s <= last[i]) for s in range(n_steps)}
        self.alive = sorted((sorted(a) for a in sets if not any(a < b for b in sets)), key=lambda a: a)
        self.in_sets = [[c for c, a in enumerate(self.alive) if i in a] for i in range(self.n)]
        self.budget = budget
        self.nodes = 0
        self.cut = False  # a limited-discrepancy round skipped some branch

    def _fit(self, j: int, off: list[int], at: int = 0) -> int:
        """Lowest offset >= `at` where j fits among the placed buffers it meets."""
        busy = sorted((off[k], off[k] + self.size[k]) for k in self.meets[j] if off[k] >= 0)
        for start, end in busy:
            if at + self.size[j] <= start:
                break
            at = max(at, end)
        return at

    def run(self, target: int) -> tuple[list[int] | None, bool]:
        """(an assignment with every buffer ending at or below `target` or None, whether
        the answer is decided). Limited discrepancy search: first the paths that leave
        the heuristic's first choice at most `slack` times (counted by rank), the last
        round without a limit (complete)."""
        rem = [sum(self.size[i] for i in a) for a in self.alive]
        slack = 0
        while True:
            self.cut = False
            found = self._dfs([-1] * self.n, [0] * self.n, rem, 0, -1, target, self.n, slack)
            if found is not None:
                return found, True
            if self.nodes > self.budget:
                return None, False
            if not self.cut:
                return None, True  # the whole tree was searched: proven
            slack = slack * 2 + 1

    def _feasible(self, off: list[int], rem: list[int], level: int, target: int) -> bool:
        room = target - level
        size = self.size
        for c, alive in enumerate(self.alive):
            above = rem[c]
            if not above:
                continue
            for i in alive:
                o = off[i]
                if o >= 0 and o + size[i] > level:
                    above += o + size[i] - level
            if above > room:
                return False
        return True

    def _dfs(self, off: list[int], fit: list[int], rem: list[int], level: int, last: int,
             target: int, left: int, slack: int) -> list[int] | None:
        if left == 0:
            return list(off)
        self.nodes += 1
        if self.nodes > self.budget or not self._feasible(off, rem, level, target):
            return None
        cands = []
        for j in range(self.n):
            if off[j] >= 0:
                continue
            if fit[j] + self.size[j] > target:
                return None  # can only rise: never placeable
            if fit[j] < level:
                if self._fit(j, off, level) + self.size[j] > target:
                    return None  # no room left above the level
                continue
            if (last >= 0 and fit[j] == off[last] and j < last
                    and not (self.first[j] <= self.last[last] and self.first[last] <= self.last[j])):
                continue  # commutes with `last`: the other order is searched
            cands.append(j)
        cands.sort(key=lambda j: (fit[j], -self.size[j], self.first[j] - self.last[j], j))
        for rank, j in enumerate(cands):
            if rank > slack:
                self.cut = True
                break
            at = fit[j]
            off[j] = at
            new_fit = list(fit)
            for k in self.meets[j]:
                if off[k] < 0 and new_fit[k] < at + self.size[j] and at < new_fit[k] + self.size[k]:
                    new_fit[k] = self._fit(k, off)
            for c in self.in_sets[j]:
                rem[c] -= self.size[j]
            found = self._dfs(off, new_fit, rem, at, j, target, left - 1, slack - rank)
            for c in self.in_sets[j]:
                rem[c] += self.size[j]
            off[j] = -1
            if found is not None or self.nodes > self.budget:
                return found
        return None


def _scale(found: list[int], idx: list[int], units: list[int], n: int, align: int) -> tuple[list[int], int]:
    offsets = [0] * n
    for k, i in enumerate(idx):
        offsets[i] = found[k] * align
    return offsets, max((found[k] + units[k] for k in range(len(idx))), default=0) * align


def solve(buffers: list[Buffer], align: int, start: tuple[list[int], int],
          budget: int | None = None) -> Allocation:
    """The smallest pool the search finds within `budget` nodes, never worse than `start`
    (a greedy result). `optimal` is True when the result is proven minimal."""
    idx = [i for i, b in enumerate(buffers) if b.in_pool]
    if budget is None:
        budget = min(SOLVER_BUDGET, SOLVER_WORK // max(len(idx), 1))
    units = [-(-buffers[i].size // align) for i in idx]
    first = [buffers[i].first for i in idx]
    last = [buffers[i].last for i in idx]
    bound = lower_bound(buffers)
    best_off, best_size = start
    unit_bound = max((sum(u for u, f, la in zip(units, first, last, strict=True) if f <= s <= la)
                      for s in range(max(last, default=-1) + 1)), default=0)
    search = _Search(units, first, last, budget * 3 // 5)
    target, optimal = unit_bound, False
    # 1. climb from the bound: the first target that fits is the optimum
    while target * align < best_size:
        found, decided = search.run(target)
        if found is not None:
            best_off, best_size = _scale(found, idx, units, len(buffers), align)
            optimal = True
            break
        if not decided:
            break  # undecided at this target
        target += 1  # proven: nothing fits `target`
    else:
        optimal = True  # every target below the greedy pool is proven infeasible
    if not optimal:
        # 2. budget left: any improvement on the greedy pool, tightening after each find
        search.budget = budget
        while best_size > target * align:
            found, decided = search.run(best_size // align - 1)
            if found is None:
                optimal = decided
                break
            best_off, best_size = _scale(found, idx, units, len(buffers), align)
        optimal = optimal or best_size <= target * align
    return Allocation(best_off, best_size, bound, "solver", optimal or best_size <= bound)


def allocate(buffers: list[Buffer], align: int, budget: int | None = None) -> Allocation:
    """Greedy first (fast); when the best greedy pool is above the bound, `bump` from each
    greedy order, then the solver only if that is still above it."""
    bound = lower_bound(buffers)
    name, (offsets, size) = min(((k, f(buffers, align)) for k, f in GREEDY.items()),
                                key=lambda r: r[1][1])
    if size <= bound:
        return Allocation(offsets, size, bound, name, True)
    for k in ORDER_KEYS:
        b_off, b_size = bump(buffers, align, bound, k)
        if b_size < size:
            name, offsets, size = f"bump_{k.removeprefix('greedy_')}", b_off, b_size
        if size <= bound:
            return Allocation(offsets, size, bound, name, True)
    solved = solve(buffers, align, (offsets, size), budget)
    if solved.size < size and ties_hold(buffers, solved.offsets):  # the search knows no ties
        return solved
    return Allocation(offsets, size, bound, name, solved.optimal)


def best_of(buffers: list[Buffer], align: int) -> tuple[list[int], int]:
    a = allocate(buffers, align)
    return a.offsets, a.size


def best_greedy(buffers: list[Buffer], align: int) -> tuple[list[int], int]:
    return min((f(buffers, align) for f in GREEDY.values()), key=lambda r: r[1])


ALLOCATORS: dict[str, Allocator] = {
    **GREEDY,
    "best_greedy": best_greedy,
    "best_of": best_of,
}
