"""The memory plan: tensors alive at the same step never share bytes.

The liveness used to check is recomputed here from the op lists alone, independently
of the planner's own buffer construction.
"""

import random

import numpy as np
import pytest

from stm32ai.ir import Graph, Op
from stm32ai.planner import ALIGN, plan_memory


def _independent_overlap_check(g: Graph, plan) -> None:
    steps = [g.ops[i] for i in plan.order]
    last = len(steps) - 1
    born, dies = {}, {}
    for t in g.inputs:
        born[t] = 0
    for s, op in enumerate(steps):
        for t in op.outputs:
            born.setdefault(t, s)
            dies[t] = max(dies.get(t, s), s)
        for t in op.inputs:
            if t >= 0 and not g.tensors[t].is_const:
                dies[t] = max(dies.get(t, 0), s)
    for t in g.outputs:
        dies[t] = last
    alias = {op.outputs[0]: op.inputs[0] for op in steps if op.kernel == "__nop"}

    def root(t):
        while t in alias:
            t = alias[t]
        return t

    def extent(t):
        off = plan.tensor_offset(t)
        return off, off + g.tensors[t].nbytes

    ts = [t for t in born if t not in plan.app_owned]
    for t in ts:
        lo, hi = extent(t)
        assert lo % ALIGN == 0
        assert hi <= plan.pool_size
    for s, op in enumerate(steps):
        live = [t for t in ts if born[t] <= s <= dies[t]]
        # an in-place op may write its output over input 0 at that step
        exempt = {(op.inputs[0], op.outputs[0])} if op.inplace else set()
        for i, a in enumerate(live):
            for b in live[i + 1:]:
                if root(a) == root(b) or (a, b) in exempt or (b, a) in exempt:
                    continue
                (a0, a1), (b0, b1) = extent(a), extent(b)
                assert a1 <= b0 or b1 <= a0, f"step {s}: tensors {a} and {b} overlap"
        if op.scratch:
            sb = plan.scratch_buffer[plan.order[s]]
            s0 = plan.offsets[sb]
            for t in live:
                t0, t1 = extent(t)
                assert t1 <= s0 or s0 + op.scratch <= t0, f"step {s}: scratch overlaps tensor {t}"


def _chain_graph() -> Graph:
    # in(1000) -> A(2000) -> B(500) -> reshape(B) -> add(A, B') inplace -> out
    g = Graph("t", [], [], [], [])
    x = g.add_tensor("x", (1000,), "int8")
    a = g.add_tensor("a", (2000,), "int8")
    b = g.add_tensor("b", (2000,), "int8")
    br = g.add_tensor("br", (20, 100), "int8")
    w = g.add_const("w", np.zeros(4, np.int8))
    y = g.add_tensor("y", (2000,), "int8")
    g.inputs, g.outputs = [x], [y]
    g.ops = [
        Op("K1", [x, w], [a], kernel="k1", index=0, scratch=300),
        Op("K2", [a], [b], kernel="k2", index=1),
        Op("RESHAPE", [b], [br], kernel="__nop", index=2),
        Op("ADD", [br, a], [y], kernel="add", index=3, inplace=True),
    ]
    return g


def test_chain_plan_has_no_overlap_and_reaches_bound():
    g = _chain_graph()
    plan = plan_memory(g)
    _independent_overlap_check(g, plan)
    # the reshape is free: b and br share one buffer
    assert plan.tensor_offset(2) == plan.tensor_offset(3)
    # without in-place, step 3 holds a, b and y (6000 B); writing y over b saves 2000 B
    assert plan.lower_bound == 6000
    assert plan.pool_size == 4000


def test_app_owned_io_is_not_in_pool():
    g = _chain_graph()
    plan = plan_memory(g, inputs_in_pool=False, outputs_in_pool=False)
    assert 0 in plan.app_owned and 5 in plan.app_owned
    _independent_overlap_check(g, plan)


@pytest.mark.parametrize("seed", range(30))
def test_random_dags_never_overlap(seed):
    rng = random.Random(seed)
    g = Graph("r", [], [], [], [])
    live = [g.add_tensor("in", (rng.randint(1, 3000),), "int8")]
    g.inputs = [live[0]]
    for k in range(rng.randint(3, 25)):
        n_in = min(len(live), rng.randint(1, 3))
        ins = rng.sample(live, n_in)
        if rng.random() < 0.2:
            out = g.add_tensor(f"r{k}", (g.tensors[ins[0]].size,), "int8")
            g.ops.append(Op("RESHAPE", [ins[0]], [out], kernel="__nop", index=k))
        else:
            out = g.add_tensor(f"t{k}", (rng.randint(1, 4000),), "int8")
            g.ops.append(Op("K", ins, [out], kernel="k", index=k,
                            scratch=rng.choice([0, 0, 64, 999]), inplace=rng.random() < 0.3))
        live.append(out)
    g.outputs = [live[-1]] + ([live[-2]] if rng.random() < 0.5 else [])
    plan = plan_memory(g)
    _independent_overlap_check(g, plan)
    assert plan.pool_size >= 0


def test_tied_buffers_keep_their_distance():
    """Buffer.tie (a stripe's scratch around its output, planner/liveness.py `_tie_output`): every
    greedy order places a tied group at one anchor offset, so the distances hold; the pieces
    never meet other buffers alive with them; the pool is no larger than the sum at the step."""
    from stm32ai.planner.allocate import GREEDY, allocate, ties_hold
    from stm32ai.planner.liveness import Buffer

    bufs = [Buffer(64, 0, 0), Buffer(32, 0, 3), Buffer(40, 0, 0), Buffer(96, 1, 2), Buffer(48, 2, 3)]
    bufs[1].tie = (0, 64)  # the output 64 B above the scratch piece below it
    bufs[2].tie = (0, 96)  # the scratch piece above it
    for name, f in GREEDY.items():
        off, size = f(bufs, 8)
        assert ties_hold(bufs, off), name
        assert off[1] == off[0] + 64 and off[2] == off[0] + 96
        for i, a in enumerate(bufs):
            for k, b in enumerate(bufs):
                if i < k and a.first <= b.last and b.first <= a.last:
                    assert off[i] + a.size <= off[k] or off[k] + b.size <= off[i], (name, i, k)
    a = allocate(bufs, 8)
    assert ties_hold(bufs, a.offsets) and a.size == 176  # 136 B at step 0; steps 1-3: 32 + 96 + 48
