"""Memory planning: which bytes of the activation pool each tensor occupies, and when.

The planner is three swappable steps (see docs/architecture.md):

1. `schedule`  - the order the ops run in: the converter's, or a memory-aware order with a
                 smaller peak of live bytes (planner/ordering.py);
2. `buffers`   - group tensors that share storage (zero-copy aliases, in-place ops, an
                 output overlapping its dying input at a fixed inner offset where the
                 kernel's access order allows it, `Op.overlap`) into buffers with a
                 lifetime [first step, last step];
3. `allocate`  - give every buffer an offset so that buffers alive at the same step
                 never overlap (greedy, then an exact search when greedy is above the
                 bound: planner/allocate.py).

`plan_memory` runs them and returns a `Plan`; `check_plan` checks that buffers alive together
never overlap (tests/plan_sim.py replays a plan byte by byte, overlaps inside buffers included).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stm32ai.ir import Graph
from stm32ai.planner.allocate import ALLOCATORS, allocate
from stm32ai.planner.liveness import SCRATCH_AT_INPUT, SCRATCH_WITH_OUTPUT, Buffer, build_buffers, lower_bound
from stm32ai.planner.ordering import memory_aware_order

ALIGN = 8  # every buffer starts on an 8-byte boundary (AI_BUFFER_ALIGN in ai_platform.h)


@dataclass
class Plan:
    order: list[int]  # op indices into graph.ops, in run order
    buffers: list[Buffer]
    tensor_buffer: dict[int, int]  # tensor id -> buffer index
    scratch_buffer: dict[int, int]  # op index -> buffer index of its scratch
    offsets: list[int]  # per buffer, byte offset in the activation pool
    pool_size: int
    lower_bound: int  # max over steps of live bytes (no overlap tricks)
    # max over steps of the aligned bytes of the buffers actually planned (in-place sharing
    # and scratch included): no offset assignment of this schedule can be smaller
    planned_bound: int = 0
    pool_optimal: bool = True  # pool_size is proven minimal for these buffers
    converter_order_bound: int = 0  # planned_bound the converter's op order would have had
    app_owned: set[int] = field(default_factory=set)  # tensor ids the application provides
    # Split across memory regions (planner/regions.py): per buffer its pool index, and per pool
    # (region name, size). Both empty for the usual single pool of `pool_size` bytes.
    pool_of: list[int] = field(default_factory=list)
    pools: list[tuple[str, int]] = field(default_factory=list)

    def tensor_offset(self, tid: int) -> int:
        b = self.tensor_buffer[tid]
        return self.offsets[b] + self.buffers[b].inner.get(tid, 0)

    def scratch_offset(self, op_idx: int) -> int:
        """Pool offset of an op's scratch (inside a joined buffer: at its inner offset)."""
        b = self.scratch_buffer[op_idx]
        return self.offsets[b] + self.buffers[b].scratch_inner.get(op_idx, 0)

    def pool_index(self, buffer: int) -> int:
        return self.pool_of[buffer] if self.pool_of else 0


def schedule(g: Graph, app_owned: set[int] | None = None) -> list[int]:
    """The op order: the converter's (already topological), unless a memory-aware order
    has a strictly smaller peak of live buffer bytes (planner/ordering.py)."""
    return memory_aware_order(g, app_owned or set(), ALIGN)


def _place(buffers: list[Buffer], allocator: str) -> tuple[list[int], int, bool]:
    if allocator == "best_of":
        a = allocate(buffers, ALIGN)
        return a.offsets, a.size, a.optimal
    offsets, size = ALLOCATORS[allocator](buffers, ALIGN)
    return offsets, size, size <= lower_bound(buffers)


def row_fed_inputs(g: Graph) -> set[int]:
    """Graph inputs a stripe pulls in rows from the application (--input-rows,
    docs/stripes.md): they never exist whole, so they take no pool bytes (app-owned, no buffer)."""
    return {g.inputs[src["input"]] for op in g.ops if op.kernel == "stripe"
            for src in op.attrs["stripe"].get("sources", ())}


def plan_memory(g: Graph, *, inputs_in_pool: bool = True, outputs_in_pool: bool = True,
                allocator: str = "best_of") -> Plan:
    app_owned: set[int] = set()
    if not inputs_in_pool:
        app_owned.update(g.inputs)
    if not outputs_in_pool:
        app_owned.update(g.outputs)
    app_owned.update(row_fed_inputs(g))
    converter = list(range(len(g.ops)))
    searched = schedule(g, app_owned)
    # Candidates: the converter order first (kept on ties, so models without a better order
    # keep their schedule), then the memory-aware one; each with overlapped chains (single
    # rectangles spanning their chain) and without (the allocator sometimes packs the
    # separate buffers better). The smallest pool wins.
    best = None
    converter_bound = 0
    for order in [converter] + ([searched] if searched != converter else []):
        for overlap in (True, False):
            built = build_buffers(g, order, app_owned, ALIGN, overlap=overlap)
            placed = _place(built[0], allocator)
            if best is None or placed[1] < best[2][1]:
                best = (order, built, placed)
                if order is converter:
                    converter_bound = lower_bound(built[0])
    assert best is not None
    order, (buffers, tensor_buffer, scratch_buffer), (offsets, size, optimal) = best
    for op in g.ops:  # a joint stripe layout is used only where this plan joined it
        if op.overlap and any(v.get(SCRATCH_AT_INPUT) for _, _, v in op.overlap):
            op.attrs[SCRATCH_AT_INPUT] = 0
        if SCRATCH_WITH_OUTPUT in op.attrs:
            op.attrs[SCRATCH_WITH_OUTPUT] = 0
    for b in buffers:
        for op_idx, attrs in b.orders.items():  # the access order an overlap relies on
            g.ops[op_idx].attrs.update(attrs)
    no_inplace, _, _ = build_buffers(g, order, app_owned, ALIGN, inplace=False)
    return Plan(order, buffers, tensor_buffer, scratch_buffer, offsets, size, lower_bound(no_inplace),
                planned_bound=lower_bound(buffers), pool_optimal=optimal,
                converter_order_bound=converter_bound, app_owned=app_owned)


def check_plan(plan: Plan) -> None:
    """Raise AssertionError if two buffers alive at the same step overlap in memory."""
    live = [(i, b) for i, b in enumerate(plan.buffers) if b.in_pool]
    for i, a in live:
        oa = plan.offsets[i]
        assert oa % ALIGN == 0, f"buffer {i} unaligned at {oa}"
        assert oa + a.size <= plan.pool_size, f"buffer {i} past the pool end"
        for j, b in live:
            if j <= i:
                continue
            if a.first <= b.last and b.first <= a.last:
                ob = plan.offsets[j]
                assert oa + a.size <= ob or ob + b.size <= oa, (
                    f"buffers {i} and {j} overlap in time [{a.first},{a.last}]/[{b.first},{b.last}] "
                    f"and space [{oa},{oa + a.size})/[{ob},{ob + b.size})")
