"""Row-streamed stripes (issue 24, docs/stripes.md): every stripe schedule replayed on row labels
by an independent checker, and models run with stripes on against TFLite Micro (host build)."""

from pathlib import Path

import numpy as np
import pytest
from builders import TfliteBuilder, schema
from conftest import shared_model
from plan_sim import simulate_plan

from stm32ai.passes import stripes as sp
from stm32ai.pipeline import compile_model
from stm32ai.planner import check_plan
from stm32ai.validate.run import validate_model

pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

_ACT = {"NONE": 0, "RELU": 1, "RELU6": 3}


class Chain(TfliteBuilder):
    """A chain of int8 NHWC layers with random weights, one graph input and output."""

    def __init__(self, shape, seed: int) -> None:
        super().__init__()
        self.rng = np.random.default_rng(seed)
        self.x = self.tensor(shape, "int8", 0.05, -3)
        self.inputs = [self.x]

    def _out(self, shape, act: str = "NONE"):
        return self.tensor(shape, "int8", float(self.rng.uniform(0.03, 0.12)), int(self.rng.integers(-20, 20)))

    def conv(self, x, oc, k, s=1, d=1, padding="SAME", act="RELU", dw=False):
        _, h, w, c = self.tensors[x].shape
        eff = (k - 1) * d + 1
        oh = -(-h // s) if padding == "SAME" else (h - eff) // s + 1
        ow = -(-w // s) if padding == "SAME" else (w - eff) // s + 1
        oc = c if dw else oc
        wshape = (1, k, k, oc) if dw else (oc, k, k, c)
        scales = self.rng.uniform(0.002, 0.01, oc)
        wt = self.tensor(wshape, "int8", scales, np.zeros(oc, np.int64),
                         self.rng.integers(-127, 128, wshape, dtype=np.int8), axis=3 if dw else 0)
        in_scale = float(self.tensors[x].quantization.scale[0])
        bt = self.tensor((oc,), "int32", scales * in_scale, np.zeros(oc, np.int64),
                         self.rng.integers(-2000, 2000, oc, dtype=np.int32))
        y = self._out((1, oh, ow, oc))
        if dw:
            o = schema.DepthwiseConv2DOptionsT()
            o.depthMultiplier = 1
            code, ot = schema.BuiltinOperator.DEPTHWISE_CONV_2D, schema.BuiltinOptions.DepthwiseConv2DOptions
        else:
            o = schema.Conv2DOptionsT()
            code, ot = schema.BuiltinOperator.CONV_2D, schema.BuiltinOptions.Conv2DOptions
        o.padding = 0 if padding == "SAME" else 1
        o.strideH = o.strideW = s
        o.dilationHFactor = o.dilationWFactor = d
        o.fusedActivationFunction = _ACT[act]
        self.op(code, [x, wt, bt], [y], ot, o)
        return y

    def pool(self, x, kind, k, s, padding="SAME"):
        _, h, w, c = self.tensors[x].shape
        oh = -(-h // s) if padding == "SAME" else (h - k) // s + 1
        ow = -(-w // s) if padding == "SAME" else (w - k) // s + 1
        # TFLite pools keep the input's quantisation
        q = self.tensors[x].quantization
        y = self.tensor((1, oh, ow, c), "int8", q.scale[0], q.zeroPoint[0])
        o = schema.Pool2DOptionsT()
        o.padding = 0 if padding == "SAME" else 1
        o.filterHeight = o.filterWidth = k
        o.strideH = o.strideW = s
        code = schema.BuiltinOperator.AVERAGE_POOL_2D if kind == "avg" else schema.BuiltinOperator.MAX_POOL_2D
        self.op(code, [x], [y], schema.BuiltinOptions.Pool2DOptions, o)
        return y

    def add(self, a, b, act="NONE"):
        y = self._out(self.tensors[a].shape)
        o = schema.AddOptionsT()
        o.fusedActivationFunction = _ACT[act]
        self.op(schema.BuiltinOperator.ADD, [a, b], [y], schema.BuiltinOptions.AddOptions, o)
        return y

    def save(self, y, path: Path) -> Path:
        self.outputs = [y]
        path.write_bytes(self.build())
        return path


def _chain_models(tmp: Path) -> dict[str, Path]:
    out = {}
    b = Chain((1, 13, 7, 3), 1)  # stride 2 SAME, residual ADD, depthwise, 1x1, odd heights
    a = b.conv(b.x, 8, 3, s=2)
    c = b.conv(a, 8, 3, dw=True)
    c = b.conv(c, 8, 1, act="NONE")
    y = b.add(a, c, act="RELU")
    y = b.pool(y, "max", 3, 2)
    out["residual_s2"] = b.save(y, tmp / "residual_s2.tflite")

    b = Chain((1, 17, 10, 4), 2)  # dilation, VALID, stride-2 VALID depthwise, avg pool VALID
    a = b.conv(b.x, 6, 3, d=2, padding="VALID")
    a = b.conv(a, 6, 3, s=2, padding="VALID", dw=True, act="RELU6")
    a = b.conv(a, 5, 2, padding="SAME")
    y = b.pool(a, "avg", 2, 1, padding="VALID")
    out["dilated_valid"] = b.save(y, tmp / "dilated_valid.tflite")

    b = Chain((1, 9, 9, 8), 3)  # 5x5 SAME, a skip over two layers, global average pool last
    a = b.conv(b.x, 8, 5)
    c = b.conv(a, 8, 3, dw=True, d=2)
    c = b.conv(c, 8, 3)
    y = b.add(c, a)
    y = b.pool(y, "avg", 9, 9, padding="VALID")
    out["skip_global"] = b.save(y, tmp / "skip_global.tflite")
    return out


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    return _chain_models(tmp_path_factory.mktemp("stripes"))


def _stripes(c):
    return [op for op in c.graph.ops if op.kernel == "stripe"]


@pytest.mark.parametrize("name", ["residual_s2", "dilated_valid", "skip_global"])
@pytest.mark.parametrize("band", [1, 2, 5])
def test_schedule_replays(chains, name, band):
    """The pass's schedule, band heights 1/2/5, checked by replay_check (reads only rows held,
    writes before reads, drops after the last read) and the member geometry by first principles."""
    from stm32ai.frontend.tflite_reader import load_tflite
    from stm32ai.passes.lower import lower_graph

    g = load_tflite(chains[name])
    lower_graph(g)
    ms = [sp.as_member(op, g) for op in g.ops]
    run = []
    for m in ms:
        if m is None:
            break
        run.append(m)
    assert len(run) >= 3
    st = sp.simulate(g, run, band, sp._outside_reads(g, set(range(len(run)))))
    sp.replay_check(g, st)
    for r, t in enumerate(st.rings):  # a ring never holds a whole tensor when rows are dropped
        assert st.ring_rows[r] <= g.tensors[t].shape[1]


def test_replay_catches_an_early_drop(chains):
    from stm32ai.frontend.tflite_reader import load_tflite
    from stm32ai.passes.lower import lower_graph

    g = load_tflite(chains["residual_s2"])
    lower_graph(g)
    run = [sp.as_member(op, g) for op in g.ops[:4]]
    st = sp.simulate(g, run, 1, sp._outside_reads(g, set(range(4))))
    first_drop = next(i for i, s in enumerate(st.table) if s[0] < 0)
    st.table[first_drop][1] += 1  # drop one row more than the schedule may
    st.table[first_drop][2] = max(st.table[first_drop][2], st.table[first_drop][1])
    with pytest.raises(AssertionError):
        sp.replay_check(g, st)


@pytest.mark.parametrize("name", ["residual_s2", "dilated_valid", "skip_global"])
def test_chain_matches_tflm_with_stripes(chains, name):
    c = compile_model(chains[name], "network", stripes="all")
    assert _stripes(c), "the chain formed no stripe"
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)
    assert validate_model(chains[name], n=2, compiled=c).outcome == "match"


def test_ic_ram_stripes_shrink_pool_and_match():
    m = shared_model("mlperf_tiny/pretrainedResnet_quant.tflite")
    off = compile_model(m, optimization="ram", stripes=False)
    c = compile_model(m, "network", optimization="ram")
    assert _stripes(c)
    assert c.plan.pool_size < off.plan.pool_size
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)
    assert validate_model(m, n=2, compiled=c).outcome == "match"


def test_poisoned_runs_with_stripes(chains, tmp_path):
    """The host poison runner (dead pool bytes garbage before each kernel, dead ring rows
    garbage the moment they are dropped, AI_POISON_ROWS) with stripes on: still TFLM's result."""
    from stm32ai.validate.poison import PoisonBuild

    cases = {f"s{i}": (p, compile_model(p, f"s{i}", stripes="all")) for i, p in enumerate(chains.values())}
    ic = shared_model("mlperf_tiny/pretrainedResnet_quant.tflite")
    cases["ic"] = (ic, compile_model(ic, "ic", optimization="ram"))
    kws = shared_model("mlperf_tiny/kws_ref_model.tflite")  # high rings, HWC depthwise members
    cases["kws"] = (kws, compile_model(kws, "kws", optimization="ram"))
    # --input-rows: IC's fed ring is high (a move before each fetch)
    cases["ic_rows"] = (ic, compile_model(ic, "icrows", optimization="ram", input_rows=True))
    # on a flash with wait states: calls staged and two-column where the layout has room (`widen`)
    from stm32ai.pipeline import compile_for_board

    cases["ic_l4"] = (ic, compile_for_board(ic, "icl4", "nucleo-l4r5zi", optimization="ram"))
    build = PoisonBuild({k: c for k, (_, c) in cases.items()}, tmp_path)
    for name, (path, c) in cases.items():
        assert _stripes(c)
        res = validate_model(path, n=1, seed=5, compiled=c, runner=lambda cc, s, name=name: build.run(cc, s, name))
        assert res.outcome == "match", name


def _ram_stripes(name: str):
    from stm32ai.frontend.tflite_reader import load_tflite
    from stm32ai.passes.lower import lower_graph

    g = load_tflite(shared_model(f"mlperf_tiny/{name}.tflite"))
    g.optimization = "ram"
    lower_graph(g)
    return g, sp.form_all(g)


def test_kws_rings_share_rows_and_replay():
    """KWS's 10-member stripe at band 1, checked byte by byte (replay_check: rings, kernel
    scratch and running sums never on bytes still to be read). Hand count of its rings: four
    3-row rings (the 3x3 depthwise inputs, 5 x 64 = 320 B rows) hold 2 rows between calls and a
    third only from their producer's call to the depthwise's drop, and the one-row rings (the
    1x1 convs' inputs, the pool's input) are busy from their producer's call to their reader's.
    At a depthwise call 3 + 2 + 2 + 2 rows of the 3-row rings and its output row are busy: 10
    rows (the issue's floor). Shared third rows (a low and a high ring) and one-row rings in
    third rows while those are empty reach 11 rows: the one-row ring written by the second
    depthwise is busy while both its neighbours' third rows are.
    In place (`_inplace`): a depthwise writes its output row over its high input ring's oldest
    row, a 1x1 conv over its one-row input (their access orders allow it, the drop after the
    call keeps the bytes): 10 rows.
    Kernel scratch: the 2-channel 3x3 depthwise (256 B, not the 4-channel 512 B) = the 1x1
    conv's two int16 columns (4 x 64), each member's in rows free at its calls; running sums
    2 x 64 (int16: the pool sums 125 pixels), busy from the pool's first band."""
    g, chosen = _ram_stripes("kws_ref_model")
    (st,) = chosen
    sp.replay_check(g, st)
    assert sorted(st.ring_rows) == [1] * 5 + [3] * 4
    assert any(st.ring_mode)  # at least one low / high pair
    assert {m.call_kernel for m in st.members if m.op.kernel.startswith("depthwise")} == {
        "depthwise_conv2d_3x3_g2_s8"}
    # the kernel scratch of each member fits in ring rows free at its calls; two members write
    # their output row in place over the input row they free (the drop after keeps it): 10 rows
    assert st.scratch == 10 * 320 + 256 + 128
    assert any(e[0] < 0 and e[3] == sp.DROP_KEEP for e in st.table)


def test_ic_replays_and_replay_catches_a_shared_row():
    """IC's stripe replays byte by byte; moving one ring onto bytes another ring still holds
    is caught."""
    g, chosen = _ram_stripes("pretrainedResnet_quant")
    (st,) = chosen
    sp.replay_check(g, st)
    assert any(st.ring_mode)
    r = max(range(len(st.rings)), key=lambda r: st.ring_rows[r])
    other = next(q for q in range(len(st.rings)) if q != r and st.ring_rows[q] == st.ring_rows[r])
    st.ring_offset[r] = st.ring_offset[other]
    with pytest.raises(AssertionError):
        sp.replay_check(g, st)


def test_inplace_only_where_the_access_order_allows():
    """A one-row call may write its output over its window's first row only when its kernel
    reads those bytes first (passes/lower/overlap.py's access models): a 1x1 conv and a 3x3
    depthwise (per channel group) may, a 3x3 conv2d_s8 (the next pixel pair still reads the
    pixel it would overwrite) may not; replay_check uses the same rule."""
    g, chosen = _ram_stripes("kws_ref_model")
    (st,) = chosen
    pw = next(m for m in st.members if m.op.kernel == "conv2d_s8" and m.k == 1)
    dw = next(m for m in st.members if m.op.kernel.startswith("depthwise"))
    assert sp._inplace_safe(g, pw, 1, 0, 0)
    assert sp._inplace_safe(g, dw, 3, 0, 0)
    assert not sp._inplace_safe(g, dw, 3, 0, -4)
    # its HWC variant (rows, then channels, pixel pairs: each column loaded no later than the
    # pair that overwrites it) may too
    sp._narrow_scratch(st.members, "hwc")
    assert dw.call_kernel == "depthwise_conv2d_3x3_hwc_s8" and dw.call_scratch == 0
    assert sp._inplace_safe(g, dw, 3, 0, 0)
    assert sp._inplace_safe(g, dw, 3, 1, 0)  # the first band (top row padded)
    sp._narrow_scratch(st.members)
    g2, chosen2 = _ram_stripes("pretrainedResnet_quant")
    conv3 = next(m for m in chosen2[0].members if m.op.kernel == "conv2d_s8" and m.k == 3 and m.s == 1)
    assert not sp._inplace_safe(g2, conv3, 3, 0, 0)


def test_ic_ram_calls_widened_and_staged_where_room():
    """`widen` (docs/stripes.md "Calls with room"): on nucleo-l4r5zi (5 wait states) some calls
    of IC's stripe members run staged (weights copied once per call) and some of the 8x8x64
    one-column conv's calls run two-column, each in a scratch item of its own placed in the
    finished layout's free bytes: the pool is the one without (widen off), the table and both
    layouts replay (replay_check, plan_sim), the host build matches TFLM; a wide item moved
    onto a ring row is caught."""
    from stm32ai.pipeline import compile_for_board

    ic = shared_model("mlperf_tiny/pretrainedResnet_quant.tflite")
    c = compile_for_board(ic, "network", "nucleo-l4r5zi", optimization="ram")
    (op,) = [o for o in c.graph.ops if o.kernel == "stripe"]
    members = op.attrs["stripe"]["members"]
    wide = {j: m["wide"] for j, m in enumerate(members) if "wide" in m}
    assert any(w["kernel"] == "conv2d_s8" and members[j]["kernel"] == "conv2d_s8_1col" for j, w in wide.items())
    assert any(w.get("params", {}).get("stage_oc") for w in wide.values())
    for j, w in wide.items():  # e[6] marks exactly the listed calls
        mine = [e for e in op.attrs["stripe"]["table"] if e[0] == j]
        assert [k for k, e in enumerate(mine) if e[6] >= 1] == w["calls"]
    import stm32ai.pipeline as pl

    orig = pl.widen_stripes
    pl.widen_stripes = lambda g, flash=None: None
    try:
        plain = compile_for_board(ic, "network", "nucleo-l4r5zi", optimization="ram")
    finally:
        pl.widen_stripes = orig
    assert c.plan.pool_size <= plain.plan.pool_size
    st = op.__dict__["_stripe"]
    sp.replay_check(c.graph, st)
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)
    assert validate_model(ic, n=2, compiled=c).outcome == "match"
    j, r = next((j, st.rings.index(m.streamed[0])) for j, m in enumerate(st.members)
                if m.widened and m.streamed[0] in st.rings)
    st.wide_offsets[j] = st.ring_offset[r]  # onto the rows its calls read
    with pytest.raises(AssertionError):
        sp.replay_check(c.graph, st)


def test_vww_input_rows_wide_regions_in_the_joint_layout():
    """`widen`'s regions in a stripe fed in rows (`--input-rows`: the output inside the scratch,
    the joint layout's `wide_regions`): the pool stays 11,424 B, the table and the plan replay
    (replay_check, plan_sim) and the host build (rows fed) matches TFLM."""
    from stm32ai.pipeline import compile_for_board

    vww = shared_model("mlperf_tiny/vww_96_int8.tflite")
    c = compile_for_board(vww, "network", "nucleo-l4r5zi", optimization="ram", input_rows=True)
    (op,) = [o for o in c.graph.ops if o.kernel == "stripe"]
    st_ = op.attrs["stripe"]
    multi = [j for j, m in enumerate(st_["members"]) if "offsets" in m.get("wide", {})]
    assert multi and int(op.attrs.get("scratch_with_output", 0)) == 1
    for j in multi:
        assert len(st_["joint"]["wide_regions"][j]) == len(st_["members"][j]["wide"]["offsets"])
    assert c.plan.pool_size <= 11424
    sp.replay_check(c.graph, op.__dict__["_stripe"])
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)
    assert validate_model(vww, n=1, compiled=c).outcome == "match"


def test_vww_ram_wide_calls_at_several_offsets(tmp_path):
    """`widen` with regions (docs/stripes.md "Calls with room"): on nucleo-l4r5zi a member of
    VWW's stripe stages its weights at calls in several scratch regions (each its own offset,
    int16 or int8: table e[6] = 1 + region), where one offset had room for only some of them.
    The pool stays 27,960 B; the table, both layouts and the plan replay (replay_check,
    plan_sim), the host build and the poison runner (every region's bytes garbage outside its
    calls) match TFLM; a region moved onto a ring's rows is caught."""
    from stm32ai.pipeline import compile_for_board
    from stm32ai.validate.poison import PoisonBuild

    vww = shared_model("mlperf_tiny/vww_96_int8.tflite")
    c = compile_for_board(vww, "network", "nucleo-l4r5zi", optimization="ram")
    (op,) = [o for o in c.graph.ops if o.kernel == "stripe"]
    members = op.attrs["stripe"]["members"]
    multi = {j: m["wide"] for j, m in enumerate(members) if "offsets" in m.get("wide", {})}
    assert multi, "no member with several wide regions"
    for j, w in multi.items():
        n_reg = len(w["offsets"])
        assert 2 <= n_reg <= 8 and len(w["region_params"]) == n_reg == len(w["region_scratch"])
        assert sorted(set(w["call_regions"])) == list(range(n_reg))
        mine = [e for e in op.attrs["stripe"]["table"] if e[0] == j]
        assert [k for k, e in enumerate(mine) if e[6] >= 1] == w["calls"]
        assert [mine[k][6] - 1 for k in w["calls"]] == w["call_regions"]
        assert all(rp.get("stage_oc") for rp in w["region_params"])
    assert c.plan.pool_size <= 27960
    st = op.__dict__["_stripe"]
    sp.replay_check(c.graph, st)
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)
    build = PoisonBuild({"vww_l4": c}, tmp_path)
    res = validate_model(vww, n=1, seed=5, compiled=c, runner=lambda cc, s: build.run(cc, s, "vww_l4"))
    assert res.outcome == "match"
    j = next(iter(multi))
    m = st.members[j]
    r = st.rings.index(m.streamed[0])
    st.wide_more[j][0] = st.ring_offset[r]  # region 1 onto the rows its calls read
    with pytest.raises(AssertionError):
        sp.replay_check(c.graph, st)
