"""Activation pools split across memory regions (TVM USMP's pool assignment, on top of a Plan).

When the single activation pool fits no region of the ordered list (`--activations-pool`), the
buffers are spread over several regions, one pool per region used:

1. every buffer gets a heat: bytes its kernels access per byte of the buffer (reads of an input
   or a scratch count one per MAC, as a direct convolution or a matrix product reads them;
   writes count once per byte), all known at generate time;
2. hottest first, each buffer goes to the first region of the list (the fastest: the board
   file and the CLI list regions fastest first) where a first-fit offset, clear of every
   buffer alive at the same time already there, keeps it inside the region's budget;
3. each region's buffers are then re-packed with the planner's allocators (`best_of`), kept
   when that is smaller.

If the hottest-first order cannot fit everything, a largest-first order is tried (packs
tighter); if that fails too, `RegionOverflow` names the region that overflows. Buffers of
different pools never share bytes, so only buffers of one pool are checked against each other
(`check_pools`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stm32ai.errors import Stm32aiError
from stm32ai.ir import Graph
from stm32ai.planner import ALIGN, Plan
from stm32ai.planner.allocate import ALLOCATORS
from stm32ai.planner.liveness import Buffer, lower_bound


@dataclass(frozen=True)
class RegionBudget:
    name: str       # board memory region
    capacity: int   # bytes the activations may use there


class RegionOverflow(Stm32aiError):
    """The activations fit no split across the given regions (exit 2)."""


def buffer_heat(g: Graph, plan: Plan) -> list[float]:
    """Accesses per byte of each buffer over one inference (0 for application-owned ones)."""
    acc = [0] * len(plan.buffers)
    for op_idx in plan.order:
        op = g.ops[op_idx]
        if op.kernel == "__nop":
            continue
        for t in op.inputs:
            if t >= 0 and not g.tensors[t].is_const:
                acc[plan.tensor_buffer[t]] += max(int(op.macc), g.tensors[t].nbytes)
        for t in op.outputs:
            acc[plan.tensor_buffer[t]] += g.tensors[t].nbytes
        if op_idx in plan.scratch_buffer:
            b = plan.scratch_buffer[op_idx]
            acc[b] += max(int(op.macc), plan.buffers[b].size)
    return [0.0 if not b.in_pool or b.size == 0 else acc[i] / b.size for i, b in enumerate(plan.buffers)]


def _first_fit(buffers: list[Buffer], placed: list[int], offsets: list[int], i: int) -> int:
    b = buffers[i]
    busy = sorted((offsets[j], offsets[j] + buffers[j].size) for j in placed
                  if buffers[j].first <= b.last and b.first <= buffers[j].last)
    at = 0
    for start, end in busy:
        if at + b.size <= start:
            break
        at = max(at, (end + ALIGN - 1) // ALIGN * ALIGN)
    return at


def _assign(buffers: list[Buffer], order: list[int], budgets: list[RegionBudget]
            ) -> tuple[list[int], list[int]] | tuple[int, list[int]]:
    """(region per buffer, offsets), or (index of the buffer that fit nowhere, its end in each region)."""
    region = [-1] * len(buffers)
    offsets = [0] * len(buffers)
    placed: list[list[int]] = [[] for _ in budgets]
    for i in order:
        ends = []
        for r, bud in enumerate(budgets):
            at = _first_fit(buffers, placed[r], offsets, i)
            if at + buffers[i].size <= bud.capacity:
                region[i], offsets[i] = r, at
                placed[r].append(i)
                break
            ends.append(at + buffers[i].size)
        else:
            return i, ends
    return region, offsets


def _repack(buffers: list[Buffer], members: list[int], offsets: list[int]) -> int:
    """Re-pack one region with the planner's allocator if that is smaller; returns its size."""
    own = max((offsets[i] + buffers[i].size for i in members), default=0)
    if any(buffers[i].tie is not None for i in members):  # tie indices are the whole plan's
        return own
    sub = [buffers[i] for i in members]
    new_offsets, size = ALLOCATORS["best_of"](sub, ALIGN)
    if size < own:
        for i, off in zip(members, new_offsets, strict=True):
            offsets[i] = off
        return size
    return own


def split_across_regions(g: Graph, plan: Plan, budgets: list[RegionBudget]) -> Plan:
    """A copy of `plan` whose pool buffers are spread over `budgets` (fastest first)."""
    if not budgets:
        raise RegionOverflow("no activation region to place the pool in")
    heat = buffer_heat(g, plan)
    bufs = plan.buffers
    live = [i for i, b in enumerate(bufs) if b.in_pool]
    hot_first = sorted(live, key=lambda i: (-heat[i], -bufs[i].size, i))
    big_first = sorted(live, key=lambda i: (-bufs[i].size, bufs[i].first, i))
    result = _assign(bufs, hot_first, budgets)
    if isinstance(result[0], int):
        result = _assign(bufs, big_first, budgets)
    if isinstance(result[0], int):
        i, ends = result  # type: ignore[misc]
        names = ", ".join(f"{b.name} ({b.capacity:,} B)" for b in budgets)
        over = [f"region {b.name} overflows by {e - b.capacity:,} B" for b, e in zip(budgets, ends, strict=True)]
        raise RegionOverflow(
            f"activations do not fit across {names}: placing a {bufs[i].size:,} B buffer alive at steps "
            f"{bufs[i].first}-{bufs[i].last}, {'; '.join(reversed(over))} (plan lower bound "
            f"{plan.lower_bound:,} B); add a region to --activations-pool or choose a board with more RAM")
    region, offsets = result  # type: ignore[misc]
    used = [r for r in range(len(budgets)) if any(region[i] == r for i in live)]
    pool_of = [0] * len(bufs)
    pools: list[tuple[str, int]] = []
    for k, r in enumerate(used):
        members = [i for i in live if region[i] == r]
        for i in members:
            pool_of[i] = k
        pools.append((budgets[r].name, _repack(bufs, members, offsets)))
    if any(b.tie is not None and (pool_of[i] != pool_of[b.tie[0]] or offsets[i] != offsets[b.tie[0]] + b.tie[1])
           for i, b in enumerate(bufs) if b.in_pool):
        raise RegionOverflow("a stripe's scratch tied to its output (scratch_with_output, --input-rows) cannot be "
                             "split across RAM regions: generate without --input-rows or choose a board with more RAM")
    return replace(plan, offsets=offsets, pool_of=pool_of, pools=pools,
                   pool_size=sum(size for _, size in pools))


def pool_lower_bound(plan: Plan, k: int) -> int:
    """Max over steps of the live bytes of pool k's buffers."""
    return lower_bound([b for i, b in enumerate(plan.buffers) if plan.pool_index(i) == k])


def check_pools(plan: Plan) -> None:
    """Raise AssertionError if two buffers of one pool alive at the same step overlap, or a
    buffer leaves its pool. Buffers of different pools live in different memory."""
    sizes = [s for _, s in plan.pools] or [plan.pool_size]
    live = [(i, b) for i, b in enumerate(plan.buffers) if b.in_pool]
    for i, a in live:
        oa, pa = plan.offsets[i], plan.pool_index(i)
        assert oa % ALIGN == 0, f"buffer {i} unaligned at {oa}"
        assert oa + a.size <= sizes[pa], f"buffer {i} past the end of pool {pa}"
        for j, b in live:
            if j <= i or plan.pool_index(j) != pa or not (a.first <= b.last and b.first <= a.last):
                continue
            ob = plan.offsets[j]
            assert oa + a.size <= ob or ob + b.size <= oa, (
                f"pool {pa}: buffers {i} and {j} overlap in time and space")
