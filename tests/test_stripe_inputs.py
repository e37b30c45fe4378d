"""A stripe's input (issue 24, docs/stripes.md): fed in rows by the application (--input-rows)
and, resident in the pool, dying row by row under the stripe's rings and output (contract 1b).
Checked against TFLite Micro, by the byte-level plan replay (tests/plan_sim.py) and the host
poison runner."""

import subprocess
import sys

import pytest
from plan_sim import simulate_plan
from test_stripes import _chain_models

from stm32ai.pipeline import compile_model
from stm32ai.planner import check_plan
from stm32ai.validate.run import validate_model

pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

NAMES = ["residual_s2", "dilated_valid", "skip_global"]


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    return _chain_models(tmp_path_factory.mktemp("stripe_inputs"))


def _stripes(c):
    return [op for op in c.graph.ops if op.kernel == "stripe"]


@pytest.mark.parametrize("name", NAMES)
def test_chain_fed_by_rows_matches_tflm(chains, name):
    """--input-rows: the input is a ring filled from the host harness's row source (which checks
    rows come in order, once, all of them); it has no pool bytes; the output is TFLM's."""
    c = compile_model(chains[name], "network", stripes="all", input_rows=True)
    fed = [op for op in _stripes(c) if op.attrs["stripe"]["sources"]]
    assert fed, "no stripe takes the input in rows"
    x = c.graph.inputs[0]
    assert x in c.plan.app_owned and not c.plan.buffers[c.plan.tensor_buffer[x]].in_pool
    assert c.doc["stm32ai"]["storage"][c.doc["attrs"]["storage_id"][1][0]]["pool"] == "user"
    assert c.doc["stm32ai"]["inputs_in_pool"]  # no buffer at all: the demo allocates none for it
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)
    assert validate_model(chains[name], n=2, compiled=c).outcome == "match"


@pytest.mark.parametrize("name", NAMES)
def test_dying_input_is_joined_and_replays(chains, name):
    """Input resident: the stripe reading the graph input is its last reader, so the planner
    joins input, scratch and output (`scratch_at_input`); the byte replay accepts the plan, and
    rejects it once the joint layout's rings are all moved onto the input's first bytes."""
    c = compile_model(chains[name], "network", stripes="all")
    joined = [op for op in _stripes(c) if op.attrs.get("scratch_at_input") == 1]
    assert joined, "no stripe was joined with its dying input"
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)
    assert validate_model(chains[name], n=2, compiled=c).outcome == "match"
    j = joined[0].attrs["stripe"]["joint"]
    if len(j["ring_offset"]) > 1:
        j["ring_offset"] = [0] * len(j["ring_offset"])
        with pytest.raises(AssertionError):
            simulate_plan(c.graph, c.plan)


def test_joint_layout_is_off_when_the_input_lives_on(chains):
    """The same chain with the input application-owned (--no-inputs-allocation): nothing to
    join, the stripe keeps its standalone scratch (and still matches)."""
    c = compile_model(chains["residual_s2"], "network", stripes="all", inputs_in_pool=False)
    assert _stripes(c) and not any(op.attrs.get("scratch_at_input") == 1 for op in _stripes(c))
    simulate_plan(c.graph, c.plan)
    assert validate_model(chains["residual_s2"], n=1, compiled=c).outcome == "match"


def test_poison_runner_rows_and_dying_input(chains, tmp_path):
    """The host poison runner (-DAI_POISON: dead pool bytes garbage before each kernel, ring rows
    at their drop, input rows at their last read) on the chains, input resident and in rows."""
    from stm32ai.validate.poison import PoisonBuild

    cases = {}
    for i, p in enumerate(chains.values()):
        cases[f"r{i}"] = (p, compile_model(p, f"r{i}", stripes="all"))
        cases[f"f{i}"] = (p, compile_model(p, f"f{i}", stripes="all", input_rows=True))
    build = PoisonBuild({k: c for k, (_, c) in cases.items()}, tmp_path)
    for name, (path, c) in cases.items():
        res = validate_model(path, n=1, seed=7, compiled=c, runner=lambda cc, s, name=name: build.run(cc, s, name))
        assert res.outcome == "match", name


def test_input_rows_with_no_stripes_is_one_line(chains):
    r = subprocess.run([sys.executable, "-m", "stm32ai", "analyze", str(chains["residual_s2"]), "--input-rows",
                        "--no-stripes"], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "--input-rows" in r.stderr


@pytest.mark.slow
def test_vww_ram_pools_and_rows_on_the_emulated_board(tmp_path, capsys):
    """VWW, `--optimization ram`: the input resident and dying row by row fits issue 24's
    29,696 B (plan replayed byte by byte), with --input-rows 12,288 B (split rings: replayed
    too); with --input-rows the demo feeds the rows from its
    test vector on the emulated board and the output matches TFLite Micro."""
    import shutil

    from conftest import shared_model

    from stm32ai.cli import main

    m = shared_model("mlperf_tiny/vww_96_int8.tflite")
    c = compile_model(m, "network", optimization="ram")
    assert c.plan.pool_size <= 29_696 and any(op.attrs.get("scratch_at_input") == 1 for op in _stripes(c))
    simulate_plan(c.graph, c.plan)
    # with --input-rows: issue 24's 12,288 B, reached with split rings (docs/stripes.md "Split rings")
    fed = compile_model(m, "network", optimization="ram", input_rows=True)
    assert fed.plan.pool_size <= 12_288
    assert any(s is not None for op in _stripes(fed) for s in op.attrs["stripe"].get("joint", {}).get("slots") or [])
    check_plan(fed.plan)
    simulate_plan(fed.graph, fed.plan)
    if not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm not installed")
    out = tmp_path / "proj"
    assert main(["generate", str(m), "--board", "qemu-netduinoplus2", "--optimization", "ram", "--input-rows",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["run", str(out)]) == 0
    kv = dict(ln.split(": ", 1) for ln in capsys.readouterr().out.splitlines() if ": " in ln)
    assert kv["result"] == "match" and kv["row_inputs"] == "1"
    assert int(kv["activations_bytes"]) < c.plan.pool_size


def test_ic_rows_into_a_high_ring_and_joined_ring_modes():
    """IC under `ram` with both issue-24 branches merged: --input-rows fetches into a high ring
    (`_physical`: the ring's move step before each fetch), replayed byte by byte (replay_check:
    fetched rows at their slots, nothing laid on bytes still to be read); input resident, the
    joint layout over the dying input places high rings and per-member scratch regions, checked
    by the plan replay. Both match TFLite Micro."""
    from conftest import shared_model

    import stm32ai.passes.stripes as sp
    from stm32ai.frontend.tflite_reader import load_tflite
    from stm32ai.passes.lower import lower_graph

    p = shared_model("mlperf_tiny/pretrainedResnet_quant.tflite")
    g = load_tflite(p)
    g.optimization, g.input_rows = "ram", True
    lower_graph(g)
    members = []
    for o in g.ops:  # the run form_all takes: every op up to the first that cannot be a member
        m = sp.as_member(o, g)
        if m is None:
            break
        members.append(m)
    # the sibling order's round schedule (simulate_best's pick before the drained schedule,
    # whose input ring ends up low: test_drained_schedule)
    st = sp.simulate(g, members, 1, sp._outside_reads(g, set(range(len(members)))), lazy=True,
                     order=sp.sibling_order(members))
    r = st.rings.index(st.fed[0])
    assert st.ring_mode[r] == 1
    code = len(st.members)
    t = st.table
    assert any(e[0] == code and t[s - 1][0] == -1 - r and t[s - 1][3] == sp.MOVE_HIGH
               for s, e in enumerate(t) if s > 0)  # a fetch appended after its ring's move down
    sp.replay_check(g, st)
    for rows in (False, True):
        c = compile_model(p, "network", optimization="ram", input_rows=rows)
        (op,) = _stripes(c)
        s = op.attrs["stripe"]
        assert bool(s["sources"]) == rows and (op.attrs.get("scratch_at_input") == 1) == (not rows)
        assert "high" in [ring["mode"] for ring in s["rings"]]
        check_plan(c.plan)
        simulate_plan(c.graph, c.plan)
        assert validate_model(p, n=1, compiled=c).outcome == "match"


def test_drained_schedule():
    """The drained schedule (`simulate(drain=True)`: one call per step, the most downstream
    member that can run) on IC's stripe: its table replays byte by byte (replay_check); the
    stride-2 shortcuts' output rings hold one row instead of two (no ring taller, two rows
    fewer in all), counted from the table by an independent replay of the logical steps; `ram`
    picks it (pool below the round schedule's 13,136 B)."""
    from conftest import shared_model

    import stm32ai.passes.stripes as sp
    from stm32ai.frontend.tflite_reader import load_tflite
    from stm32ai.passes.lower import lower_graph

    p = shared_model("mlperf_tiny/pretrainedResnet_quant.tflite")
    g = load_tflite(p)
    g.optimization = "ram"
    lower_graph(g)
    members = []
    for o in g.ops:
        m = sp.as_member(o, g)
        if m is None:
            break
        members.append(m)
    outs = sp._outside_reads(g, set(range(len(members))))
    order = sp.sibling_order(members)

    def tallest(st: sp.Stripe) -> list[int]:  # rows each ring holds at once, from the table
        live, top = [0] * len(st.rings), [0] * len(st.rings)
        ring_of = {t: r for r, t in enumerate(st.rings)}
        for step in st.logical:
            if step[0] < 0:
                live[-1 - step[0]] -= step[1]
            elif st.members[step[0]].out in ring_of:
                r = ring_of[st.members[step[0]].out]
                live[r] += step[1]
                top[r] = max(top[r], live[r])
        return top

    rounds = sp.simulate(g, members, 1, outs, lazy=True, order=order)
    drained = sp.simulate(g, members, 1, outs, lazy=True, order=order, drain=True)
    for st in (rounds, drained):
        sp.replay_check(g, st)
    assert tallest(rounds) == rounds.ring_rows and tallest(drained) == drained.ring_rows
    assert all(a <= b for a, b in zip(drained.ring_rows, rounds.ring_rows, strict=True))
    assert sum(drained.ring_rows) == sum(rounds.ring_rows) - 2
    assert sp.pool_bytes(g, drained) < sp.pool_bytes(g, rounds)
    c = compile_model(p, "network", optimization="ram")
    assert c.plan.pool_size < 13136


def test_rows_fed_depthwise_all_on_hwc_is_chosen_and_matches(tmp_path):
    """A VWW-like chain fed in rows (3x3 s2 conv, then depthwise 3x3 s1 / s2 unclamped with 1x1
    convs between, 48-pixel input rows): the band option "<band>:hwc-all" runs every 3x3 depthwise
    member on the scratch-less HWC kernel, the stride-2 ones included (`dw3x3_hwc_any`; the
    assembly's `dw3x3_hwc_ok` takes only the short rows), so the planar kernel's planes leave the
    stripe: ram's rule picks it for the smallest pool. Fed in rows, the stripe's whole output
    lies inside its scratch (`scratch_with_output`, the planner's tied buffers); the plan
    replays byte by byte, and the output is TFLite Micro's, also under the poison runner."""
    from test_stripes import Chain

    from stm32ai.passes.lower.dwconv3x3 import dw3x3_hwc_ok
    from stm32ai.validate.poison import PoisonBuild

    b = Chain((1, 20, 48, 3), 5)
    a = b.conv(b.x, 8, 3, s=2)
    a = b.conv(a, 8, 3, dw=True, act="NONE")
    a = b.conv(a, 12, 1)
    a = b.conv(a, 12, 3, s=2, dw=True, act="NONE")
    a = b.conv(a, 16, 1)
    a = b.conv(a, 16, 3, s=2, dw=True, act="NONE")
    p = b.save(a, tmp_path / "rows_dw.tflite")
    c = compile_model(p, "network", optimization="ram", input_rows=True)
    by = {o.bands[0]: o for o in c.stripe_options}
    pick = next(o for o in c.stripe_options if o.chosen)
    assert str(pick.bands[0]).endswith(":hwc-all") and pick.pool == c.plan.pool_size
    band = int(str(pick.bands[0]).split(":")[0])
    assert pick.pool < by[band].pool  # the planes (2-channel) of the plain band were at its peak
    st = next(op for op in _stripes(c))
    kernels = [m["kernel"] for m in st.attrs["stripe"]["members"]]
    assert "depthwise_conv2d_3x3_hwc_s8" in kernels and not any(
        k.startswith("depthwise_conv2d_3x3") and "_hwc_" not in k for k in kernels)
    lowered = compile_model(p, "network", optimization="ram", stripes=False)
    s2 = [op for op in lowered.graph.ops if (op.kernel or "").startswith("depthwise_conv2d_3x3")
          and int(op.attrs["stride"][0]) == 2]
    # the 48- and 24-pixel stride-2 rows are beyond the assembly (`dw3x3_hwc_ok`): only the new option takes them
    assert s2 and not all(dw3x3_hwc_ok(op.attrs) for op in s2)
    # its whole output joins the scratch (no whole input): Y's buffer tied inside the stripe's
    # scratch, the pool smaller than the scratch beside Y
    assert st.attrs.get("scratch_with_output") == 1
    y = st.outputs[0]
    assert c.plan.tensor_offset(y) == c.plan.scratch_offset(c.graph.ops.index(st)) + st.attrs["stripe"]["joint"]["y"]
    assert c.plan.pool_size < st.scratch + c.graph.tensors[y].nbytes
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)
    assert validate_model(p, n=2, compiled=c).outcome == "match"
    j = st.attrs["stripe"]["joint"]
    j["y"] += 8  # the executor would write Y elsewhere than the plan's buffer: the replay says so
    with pytest.raises(AssertionError):
        simulate_plan(c.graph, c.plan)
    j["y"] -= 8
    build = PoisonBuild({"h": c}, tmp_path / "poison")
    res = validate_model(p, n=1, seed=7, compiled=c, runner=lambda cc, s: build.run(cc, s, "h"))
    assert res.outcome == "match"


def test_split_rings_fed_chain_replays_and_matches(tmp_path, monkeypatch):
    """A VWW-like chain fed in rows whose joint layout (output inside the scratch) packs tighter
    with rings split (passes/stripes.py `splittable`, docs/stripes.md "Split rings"): each row
    slot of a ring read by the HWC depthwise kernel lies anywhere; the executor addresses it
    through a slot table and calls the kernel's `_rowp` entry with one pointer per window row.
    The pool is below the contiguous rings' (same pass, splitting off); the plan replays byte by
    byte (and fails once two live slots share bytes); the output is TFLite Micro's, also under
    the poison runner (rows poisoned at their drop, slot by slot)."""
    from test_stripes import Chain

    import stm32ai.passes.stripes as sp
    from stm32ai.emitter import _stripe_code
    from stm32ai.validate.poison import PoisonBuild

    b = Chain((1, 20, 48, 3), 5)
    a = b.conv(b.x, 8, 3, s=2)
    a = b.conv(a, 8, 3, dw=True, act="NONE")
    a = b.conv(a, 12, 1)
    a = b.conv(a, 12, 3, s=2, dw=True, act="NONE")
    a = b.conv(a, 16, 1)
    a = b.conv(a, 16, 3, s=1, dw=True, act="NONE")
    a = b.conv(a, 16, 1)
    a = b.conv(a, 16, 3, s=2, dw=True, act="NONE")
    p = b.save(a, tmp_path / "split.tflite")
    c = compile_model(p, "network", optimization="ram", input_rows=True)
    st = next(op for op in _stripes(c) if op.attrs["stripe"]["sources"])
    assert st.attrs.get("scratch_with_output") == 1
    j = st.attrs["stripe"]["joint"]
    split = [r for r, s in enumerate(j.get("slots") or []) if s is not None]
    assert split, "no ring was split"
    node = next(n for n in c.doc["nodes"] if n.get("attrs", {}).get("func_name") == "stripe")
    decls, code = _stripe_code(0, node["attrs"], ["in"] * len(node["inputs"]), ["out"], "pool")
    assert "_rowp_s8(" in code and "_slots[" in decls
    from stm32ai.emitter import ROWP_KERNELS
    assert set(ROWP_KERNELS) == set(sp.ROWP_KERNELS)  # the pass's readers are the ones the executor calls
    with monkeypatch.context() as mp:  # the same pass with contiguous rings only
        mp.setattr(sp, "SPLIT_MIN_GAIN", 1 << 30)
        plain = compile_model(p, "network", optimization="ram", input_rows=True)
    assert c.plan.pool_size < plain.plan.pool_size
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)
    assert validate_model(p, n=2, compiled=c).outcome == "match"
    build = PoisonBuild({"s": c}, tmp_path / "poison")
    res = validate_model(p, n=1, seed=7, compiled=c, runner=lambda cc, s: build.run(cc, s, "s"))
    assert res.outcome == "match"
    good = list(j["slots"][split[0]])
    # two slots of the split ring (live together in a 3-row window) on the same bytes: the
    # replay (one label per row written) sees it
    j["slots"][split[0]] = [good[0], good[0], *good[2:]]
    with pytest.raises(AssertionError):
        simulate_plan(c.graph, c.plan)
    # its slots all on the input ring's rows (live throughout)
    j["slots"][split[0]] = [j["ring_offset"][0]] * len(good)
    with pytest.raises(AssertionError):
        simulate_plan(c.graph, c.plan)
    j["slots"][split[0]] = good
    simulate_plan(c.graph, c.plan)
