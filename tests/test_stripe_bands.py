"""Band heights of stripes and what they cost (issue 24, docs/stripes.md "What a band costs"):
ring sizes and flash reads per band height against hand-computed figures, the band rule of
`--optimization ram` (passes/stripe_bands.py), and the chosen firmware against TFLite Micro."""

from pathlib import Path

import pytest
from test_stripes import Chain

from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.passes import stripes as sp
from stm32ai.passes.lower import lower_graph
from stm32ai.passes.staging import flash_reads, staging_rows, stripe_calls
from stm32ai.pipeline import compile_for_board, compile_model
from stm32ai.validate.run import validate_model

pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

H, W = 12, 5  # odd width: a one-row band of a 1x1 conv2d_s8 wastes half a pixel pair


def _chain(tmp: Path, oc: int = 8) -> Path:
    """1x1 conv -> 3x3 SAME depthwise -> 1x1 conv on a 12x5 image."""
    b = Chain((1, H, W, 4), 7)
    a = b.conv(b.x, oc, 1)
    c = b.conv(a, oc, 3, dw=True)
    y = b.conv(c, 4, 1)
    return b.save(y, tmp / f"chain{oc}.tflite")


@pytest.mark.parametrize("band", [1, 2, 3, 4, 6])
def test_ring_rows_and_first_member_reads_hand_computed(tmp_path, band):
    """Rings: the 3x3 stride-1 consumer's input holds its 3 window rows plus band - 1 more
    (band + 2), the 1x1 consumer's input the band's rows. Flash: the first 1x1 conv runs H / band
    calls of band rows, each reading its weights and rq table once per pixel pair: ceil(band * W
    / 2) pairs per call (an odd last pixel reads the rq table with the last pair), against
    ceil(H * W / 2) layer by layer."""
    g = load_tflite(_chain(tmp_path))
    lower_graph(g)
    assert [op.kernel for op in g.ops][0] == "conv2d_s8" and g.ops[2].kernel == "conv2d_s8"
    per_pass = flash_reads(g.ops[0], g) // (-(-H * W // 2))  # layer by layer: once per pair
    run = [sp.as_member(op, g) for op in g.ops]
    st = sp.simulate(g, run, band, sp._outside_reads(g, set(range(len(run)))))
    sp.replay_check(g, st)
    assert st.ring_rows == [band + 2, band]
    lo, hi = 0, len(g.ops)
    sp.apply(g, lo, hi, st)
    op = g.ops[0]
    first = next(r for r in staging_rows(g) if r["op"] == run[0].op.index)
    assert first["stripe_calls"] == H // band
    # an odd pixel count (band * W): the last pair and the odd pixel read the rq rows (16 B per
    # output channel) once between them (conv_triple, a 1x1 int8 layer); a one-row call (band 1)
    # reads the weights and rq rows once for its last three pixels (conv_triple_x3)
    rq = 16 * 8 if band * W % 2 else 0
    if band == 1 and W % 2 and W >= 3:
        assert first["flash_reads"] == (H // band) * ((W + 1) // 2 - 1) * per_pass
    else:
        assert first["flash_reads"] == (H // band) * ((-(-band * W // 2)) * per_pass - rq)
    assert flash_reads(op, g) == sum(r["flash_reads"] for r in staging_rows(g))
    assert len(stripe_calls(op, g)) == st.calls


def test_band_rule_and_tflm(tmp_path):
    """--optimization ram: no bound = the smallest pool; bound 0 = the stripe-less graph (its
    pool = --no-stripes); a bound between = the smallest pool among the options within it, and
    that firmware (a taller band) still matches TFLite Micro."""
    p = _chain(tmp_path, oc=32)
    flat = compile_model(p, optimization="ram", stripes=False)
    c = compile_for_board(p, "network", "nucleo-l4r5zi", optimization="ram")
    opts = c.stripe_options
    assert opts and opts[0].bands == (None,) and opts[0].pool == flat.plan.pool_size
    pick = next(o for o in opts if o.chosen)
    assert pick.pool == min(o.pool for o in opts) < flat.plan.pool_size
    assert pick.bands == (1,)  # the smallest rings

    c0 = compile_for_board(p, "network", "nucleo-l4r5zi", optimization="ram", stripes_max_cost=0.0)
    assert not any(op.kernel == "stripe" for op in c0.graph.ops) and c0.plan.pool_size == flat.plan.pool_size

    base = opts[0].cycles
    costs = sorted(o.cost(base) for o in opts if o.bands != (None,))
    bound = (costs[0] + costs[1]) / 2  # admits only the cheapest stripe option(s)
    cb = compile_for_board(p, "network", "nucleo-l4r5zi", optimization="ram", stripes_max_cost=bound)
    pick = next(o for o in cb.stripe_options if o.chosen)
    within = [o for o in cb.stripe_options if o.cost(base) <= bound]
    assert pick.cost(base) <= bound and pick.pool == min(o.pool for o in within)
    assert pick.bands[0] is not None and pick.bands[0] > 1
    st = next(op for op in cb.graph.ops if op.kernel == "stripe")
    assert st.attrs["stripe"]["band"] == pick.bands[0] and cb.plan.pool_size == pick.pool
    assert validate_model(p, n=2, compiled=cb).outcome == "match"


def test_two_channel_depthwise_is_an_option():
    """KWS's 3x3 depthwise members, whose 4-channel planes (512 B on 5-pixel rows) are the
    stripe's largest kernel scratch, run as the 2-channel kernel (256 B) at band 1; the band
    rule also weighs them kept 4-channel ("1:dw4"): at least 256 B more pool, fewer modelled cycles (4
    layers x 64 channels x 25 one-row bands, each paying the 2-channel set-up's extra,
    DW3_G2_BAND_CYCLES). Both are weighed against the HWC kernel ("1:hwc": no scratch, no frame
    per call), which ram's rule takes: no larger a pool, fewer modelled cycles; it still matches
    TFLite Micro."""
    from conftest import shared_model

    from stm32ai.passes.staging import DW3_BAND_CYCLES, DW3_G2_BAND_CYCLES

    p = shared_model("mlperf_tiny/kws_ref_model.tflite")
    c = compile_for_board(p, "network", "nucleo-l4r5zi", optimization="ram")
    by = {o.bands: o for o in c.stripe_options}
    narrow, wide = by[(1,)], by[("1:dw4",)]
    assert wide.pool - narrow.pool >= 256  # the planes' 256 B, more where they no longer fit in free rows
    assert narrow.cycles - wide.cycles == pytest.approx(4 * 64 * 25 * (DW3_G2_BAND_CYCLES - DW3_BAND_CYCLES))
    hwc = by[("1:hwc",)]
    assert hwc.chosen and hwc.pool <= narrow.pool and hwc.cycles < narrow.cycles
    st = next(op for op in c.graph.ops if op.kernel == "stripe").attrs["stripe"]
    assert {m["kernel"] for m in st["members"] if "depthwise" in m["kernel"]} == {"depthwise_conv2d_3x3_hwc_s8"}
    assert validate_model(p, n=2, compiled=c).outcome == "match"


@pytest.mark.slow
def test_estimator_confirms_stripe_flash_reads(tmp_path):
    """KWS in --optimization ram (a one-row-band stripe of 10 layers, 250 calls) on
    nucleo-l4r5zi: the analytic flash reads (each member's weights read at every call) within 3 %
    of the bytes the estimator's trace of the built firmware loads from flash (runtime and
    literal pools included there)."""
    from conftest import shared_model

    from stm32ai.boards import load_board
    from stm32ai.estimate.estimate import estimate_project
    from stm32ai.project.build import generate_firmware_project
    from stm32ai.project.spec import Pools, ProjectModel
    from stm32ai.validate.vectors import test_vector

    m = shared_model("mlperf_tiny/kws_ref_model.tflite")
    c = compile_for_board(m, "network", "nucleo-l4r5zi", optimization="ram")
    assert any(op.kernel == "stripe" for op in c.graph.ops)
    analytic = sum(flash_reads(op, c.graph) for op in c.graph.ops)
    board = load_board("nucleo-l4r5zi")
    generate_firmware_project(tmp_path / "p", board, [ProjectModel("network", c, test_vector(m, c, expected=False),
                                                                   m.name)], Pools())
    est = estimate_project(tmp_path / "p", board)
    assert abs(est.flash_bytes_read - analytic) <= 0.03 * analytic


@pytest.mark.slow
def test_bench_ram_row(tmp_path):
    """bench's RAM-mode row (bench/ram.py) on a chain where a stripe pays: the ram firmware
    runs on the emulated board and its output matches TFLite Micro (the demo's verdict), its pool
    is below --no-stripes', and the table renders the row."""
    from bench.__main__ import _build_run
    from bench.ram import bench_ram, ram_table
    from stm32ai.boards import load_board

    p = _chain(tmp_path, oc=32)
    row = {"stem": p.stem, "pool_bytes": compile_model(p).plan.pool_size}
    bench_ram(row, p, tmp_path, _build_run, load_board("qemu-netduinoplus2"), estimate=False)
    r = row["ram"]
    assert r["result"] == "match" and r["instructions"] > 0 and r["instructions_no_stripes"] > 0
    assert r["pool_ram"] < r["pool_ram_no_stripes"] and r["bands"] == [1]
    rows = "—" if r["pool_ram_rows"] is None else f"{r['pool_ram_rows']:,}"  # --input-rows
    assert (f"| {p.stem} | {row['pool_bytes']:,} | {r['pool_ram_no_stripes']:,} | {r['pool_ram']:,} | {rows} "
            "| 1 | match |") in ram_table([row])


def test_analyze_lists_the_band_options(tmp_path):
    """analyze --optimization ram: the options weighed in text and --json (the stripe-less graph
    first, its pool = --no-stripes'); a bad --stripes-max-cost is one line, exit 2, nothing written."""
    import json

    from conftest import assert_one_line_error, stm32ai_cli

    p = _chain(tmp_path, oc=32)
    r = stm32ai_cli("analyze", str(p), "--board", "nucleo-l4r5zi", "--optimization", "ram",
                    "--json", str(tmp_path / "a.json"))
    assert r.returncode == 0, r.stderr
    assert "band heights weighed (smallest pool" in r.stdout and "* band 1: pool" in r.stdout
    st = json.loads((tmp_path / "a.json").read_text())["stripes"]
    assert st["options"][0]["bands"] == [None]
    assert st["options"][0]["pool"] == st["pool_without"] == compile_model(p, optimization="ram",
                                                                           stripes=False).plan.pool_size
    assert [o["pool"] for o in st["options"] if o["chosen"]] == [st["pool"]]
    r = stm32ai_cli("generate", str(p), "--c-only", "--optimization", "ram", "--stripes-max-cost", "-5",
                    "-o", str(tmp_path / "out"))
    assert_one_line_error(r, "--stripes-max-cost")
    assert not (tmp_path / "out").exists()


def test_cut_point_bound_keeps_the_exhaustive_choice(tmp_path, monkeypatch):
    """`form_stripes` skips segments whose `_pool_floor` (a lower bound of the planned pool)
    cannot beat the best found: the same stripes as trying every segment (a bound of 0)."""
    from test_stripes import _chain_models

    paths = list(_chain_models(tmp_path).values()) + [_chain(tmp_path)]
    picked = {}
    for exhaustive in (False, True):
        if exhaustive:
            monkeypatch.setattr(sp, "_pool_floor", lambda g: lambda lo, hi: 0)
        for p in paths:
            for rows in (False, True):
                c = compile_model(p, "network", optimization="ram", input_rows=rows)
                key = (p.name, rows)
                got = (c.plan.pool_size, [(op.index, op.attrs["stripe"]["band"], len(op.attrs["stripe"]["members"]))
                                          for op in c.graph.ops if op.kernel == "stripe"])
                if exhaustive:
                    assert got == picked[key], key
                else:
                    picked[key] = got
