"""Activation pools split across memory regions (planner/regions.py) and the HTML memory map.

A model whose activations exceed every region it may use (regions capped on the command line,
`REGION:SIZE`) is planned across two regions: the plan is checked here by an overlap checker of
the test's own, the split model runs bit-exact against TFLite Micro on the host (the harness
allocates both pools) and matches on the emulated board (one linker section per region), and a
model that fits no split fails with one line naming the region that overflows.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES

from stm32ai.boards import load_board
from stm32ai.cli import main
from stm32ai.errors import Stm32aiError
from stm32ai.pipeline import compile_model
from stm32ai.planner.regions import RegionBudget, buffer_heat, split_across_regions
from stm32ai.project.build import place_model
from stm32ai.project.generator import plan_placement
from stm32ai.report import build_report, render_html
from stm32ai.validate.host import build_host
from stm32ai.validate.run import validate_model

RESIDUAL = FIXTURES / "add_residual_int8.tflite"   # 1,624 B single pool (a padded input copy), a residual branch
LSTM = FIXTURES / "lstm_stacked_int8.tflite"       # persistent state in the pool
BOARD = "qemu-mps2-an386"                          # sram + psram, both mapped by QEMU
SPLIT = ["sram:1024", "psram:1024"]                  # neither region alone holds the pool


def _split(model: Path, pool: list[str]):
    c = compile_model(model)
    place = place_model(load_board(BOARD), c, pool, None)
    return c, place


def _check_split(plan, budgets: dict[str, int]) -> None:
    """Independent check: every pool buffer in one pool, inside it and inside its region's budget;
    two buffers of one pool alive at one step never share a byte (pools are separate memory)."""
    assert plan.pools and len(plan.pool_of) == len(plan.buffers)
    for region, size in plan.pools:
        assert size <= budgets[region], (region, size)
    live = [i for i, b in enumerate(plan.buffers) if b.in_pool]
    for i in live:
        b, k = plan.buffers[i], plan.pool_of[i]
        assert 0 <= k < len(plan.pools) and plan.offsets[i] % 8 == 0
        assert plan.offsets[i] + b.size <= plan.pools[k][1]
    for step in range(max(b.last for b in plan.buffers) + 1):
        for k in range(len(plan.pools)):
            used = np.zeros(plan.pools[k][1], dtype=np.int32)
            for i in live:
                b = plan.buffers[i]
                if plan.pool_of[i] == k and b.first <= step <= b.last:
                    used[plan.offsets[i]:plan.offsets[i] + b.size] += 1
            assert used.max(initial=0) <= 1, f"step {step}: two live buffers share bytes of pool {k}"


def test_single_region_keeps_the_single_pool_plan():
    ref = compile_model(RESIDUAL)
    c, place = _split(RESIDUAL, ["sram", "psram"])
    assert not c.plan.pools and c.doc == ref.doc and c.plan.offsets == ref.plan.offsets
    assert place.activation_pools == [{"region": "sram", "bytes": ref.plan.pool_size}]
    # the pool exceeds the capped first region but fits the second whole: still one pool
    c, place = _split(RESIDUAL, ["sram:512", "psram"])
    assert not c.plan.pools and place.activations_region == "psram"


@pytest.mark.parametrize("model,pool", [(RESIDUAL, SPLIT), (LSTM, ["sram:160", "psram:160"])],
                         ids=["residual", "lstm"])
def test_split_plan_is_sound(model, pool):
    c, place = _split(model, pool)
    budgets = {p.split(":")[0]: int(p.split(":")[1]) for p in pool}
    assert [r for r, _ in c.plan.pools] == [p.split(":")[0] for p in pool]
    assert c.plan.pool_size > max(budgets.values())          # needs both regions
    _check_split(c.plan, budgets)
    assert [p["region"] for p in place.activation_pools] == [r for r, _ in c.plan.pools]
    # graph.json: every activation storage entry names its pool and region
    meta = c.doc["stm32ai"]
    pools = {p["name"]: p for p in meta["pools"]}
    assert pools["activations"]["region"] == "sram" and pools["activations_1"]["region"] == "psram"
    for i, st in enumerate(meta["storage"][:len(c.plan.buffers)]):
        if c.plan.buffers[i].state:
            assert st["pool"] == "state" and "region" not in st   # the instance's state area
        elif not c.plan.buffers[i].app_owned:
            k = c.plan.pool_of[i]
            assert st["pool"] == ("activations" if k == 0 else f"activations_{k}")
            assert st["region"] == c.plan.pools[k][0] and st["offset"] == c.plan.offsets[i]


def test_the_checkers_catch_an_overlap():
    from dataclasses import replace

    from stm32ai.planner.regions import check_pools

    c, _ = _split(RESIDUAL, SPLIT)
    check_pools(c.plan)
    # move a buffer onto another buffer of the same pool alive at the same step
    pools = [[i for i, b in enumerate(c.plan.buffers) if not b.app_owned and c.plan.pool_of[i] == k] for k in (0, 1)]
    a, b = next((a, b) for p in pools for a in p for b in p if a != b
                and c.plan.buffers[a].first <= c.plan.buffers[b].last
                and c.plan.buffers[b].first <= c.plan.buffers[a].last)
    offsets = list(c.plan.offsets)
    offsets[a] = offsets[b]
    bad = replace(c.plan, offsets=offsets)
    with pytest.raises(AssertionError):
        _check_split(bad, {"sram": 1024, "psram": 1024})
    with pytest.raises(AssertionError):
        check_pools(bad)


def test_hottest_buffer_goes_to_the_fastest_region():
    c = compile_model(RESIDUAL)
    heat = buffer_heat(c.graph, c.plan)
    # by hand: the graph input (1x8x7x4 int8 = 224 B) is read by conv #0 (12,096 MACC) and by the
    # 1x1 shortcut conv #2 (1,344 MACC), one read per MAC; the application's write is not counted.
    # The shortcut conv writes its 336-B output over the dying input (one 336-B buffer), and the
    # ADD reads it once per byte: 336 + 336 more accesses.
    x = c.plan.tensor_buffer[c.graph.inputs[0]]
    assert c.plan.buffers[x].size == 336 and heat[x] == (12_096 + 1_344 + 336 + 336) / 336
    hottest = max((i for i, b in enumerate(c.plan.buffers) if not b.app_owned), key=lambda i: heat[i])
    plan = split_across_regions(c.graph, c.plan, [RegionBudget("fast", 1024), RegionBudget("slow", 1024)])
    assert plan.pool_of[hottest] == 0


def test_split_runs_bit_exact_on_the_host_against_tflm():
    for model, pool in ((RESIDUAL, SPLIT), (LSTM, ["sram:160", "psram:160"])):
        c, _ = _split(model, pool)
        assert len(c.plan.pools) == 2
        res = validate_model(model, None, n=3, seed=5, compiled=c)
        verdict = [cmp for cmp in res.comparisons if cmp.verdict]
        assert verdict and verdict[0].reference == "tflm"
        for m, ok in zip(verdict[0].outputs, verdict[0].ok, strict=True):
            assert ok and m.max_lsb == 0, (model.name, m.max_lsb)


@pytest.mark.slow
def test_split_with_application_owned_io_runs_on_the_host():
    c = compile_model(RESIDUAL, inputs_in_pool=False, outputs_in_pool=False)
    place_model(load_board(BOARD), c, ["sram:1000", "psram:1000"], None)
    assert len(c.plan.pools) == 2
    res = validate_model(RESIDUAL, None, n=2, seed=3, compiled=c)
    assert res.passed


def test_region_overflow_is_one_line_naming_the_region():
    with pytest.raises(Stm32aiError) as e:
        _split(RESIDUAL, ["sram:256", "psram:256"])
    msg = str(e.value)
    assert "region psram overflows" in msg and "\n" not in msg and e.value.exit_code == 2


def test_split_pool_checked_per_region():
    c, _ = _split(RESIDUAL, SPLIT)
    with pytest.raises(Stm32aiError, match=r"activation pool 1 \(\d+ B\) overflows region psram"):
        plan_placement(load_board(BOARD), activations_bytes=c.plan.pool_size, weights_bytes=100,
                       activations_pool=["sram:1024", "psram:256"], split=c.plan.pools)


def test_cli_fits_error_exit_2(tmp_path, capsys):
    out = tmp_path / "proj"
    rc = main(["generate", str(RESIDUAL), "--board", BOARD, "--activations-pool", "sram:256,psram:256",
               "-o", str(out), "--no-test-vector"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and not out.exists() and "\n" not in err and "region psram overflows" in err
    rc = main(["analyze", str(RESIDUAL), "--board", BOARD, "--activations-pool", "sram:256,psram:256"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "region psram overflows" in err
    rc = main(["analyze", str(RESIDUAL), "--board", BOARD, "--activations-pool", "sram:1K,sram"])
    assert rc == 2 and "lists region 'sram' twice" in capsys.readouterr().err
    rc = main(["analyze", str(RESIDUAL), "--board", BOARD, "--activations-pool", "sram:lots,psram"])
    assert rc == 2 and "--activations-pool sram: expected a size" in capsys.readouterr().err
    rc = main(["validate", str(RESIDUAL), "--activations-pool", "sram,psram"])   # host mode: no board
    assert rc == 2 and "are for --mode target" in capsys.readouterr().err


def test_cli_analyze_shows_the_placement_per_region(tmp_path, capsys):
    js = tmp_path / "a.json"
    rc = main(["analyze", str(RESIDUAL), "--board", BOARD, "--activations-pool", ",".join(SPLIT),
               "--json", str(js)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "split across 2 regions" in out and "pool 0 sram:" in out and "pool 1 psram:" in out
    assert "fits qemu-mps2-an386: yes (activations in sram" in out
    import json

    doc = json.loads(js.read_text())
    assert [p["region"] for p in doc["memory"]["pools"]] == ["sram", "psram"]
    assert doc["activations_bytes"] == sum(p["size"] for p in doc["memory"]["pools"])


def test_html_memory_map_escapes_hostile_names(tmp_path):
    c, _ = _split(RESIDUAL, SPLIT)
    hostile = '<script>alert(1)</script>"><img src=x onerror=alert(2)>&amp;'
    for t in c.graph.tensors:
        t.name = hostile
    html = render_html(build_report(c))
    assert "<svg" in html and "</svg>" in html
    assert "<script" not in html and "<img" not in html and "onerror=alert(2)>" not in html
    assert "&lt;script&gt;" in html and "&amp;amp;" in html
    assert "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")   # no external assets
    assert html.count("pool 0 in sram") == 1 and html.count("pool 1 in psram") == 1
    assert "stroke-dasharray" in html                                               # lower bound lines


def test_cli_analyze_html(tmp_path):
    h = tmp_path / "map.html"
    assert main(["analyze", str(RESIDUAL), "--html", str(h)]) == 0
    text = h.read_text()
    assert text.count("<rect") >= len(compile_model(RESIDUAL).plan.buffers) and "lower bound" in text


def test_runtime_pools_api_on_the_host(tmp_path):
    """ai_create_pools: app-provided and built-in pools, wrong count, unaligned, two instances."""
    from stm32ai.emitter import emit_c

    c, _ = _split(RESIDUAL, SPLIT)
    emit_c(c.doc, c.params, "net", tmp_path / "c")
    h = (tmp_path / "c" / "net.h").read_text()
    assert "#define AI_NET_POOL_COUNT 2u" in h and "AI_NET_POOL_1_SIZE" in h
    assert 'AI_SECTION(".nn_activations_psram")' in (tmp_path / "c" / "net.c").read_text()
    harness = tmp_path / "t.c"
    harness.write_text(r"""
#include <stdio.h>
#include <string.h>
#include "ai_runtime.h"
#include "net.h"
static AI_ALIGNED(8) ai_u8 p0[2][AI_NET_POOL_0_SIZE + 8], p1[2][AI_NET_POOL_1_SIZE + 8];
static int run(ai_handle h, int8_t v) {
  memset(ai_get_input(h, 0)->data, v, ai_get_input(h, 0)->size_bytes);
  return ai_run(h) == AI_OK;
}
int main(void) {
  ai_handle a, b, c;
  ai_u8 *one = p0[0];
  if (ai_create(&net_info, one, &a) != AI_ERR_POOLS) return 10;         /* one buffer, two pools */
  ai_u8 *bad[2] = {p0[0] + 4, p1[0]};
  if (ai_create_pools(&net_info, bad, 2, &a) != AI_ERR_UNALIGNED) return 11;
  ai_u8 *mine[2] = {p0[0], p1[0]}, *other[2] = {p0[1], p1[1]};
  if (ai_create_pools(&net_info, mine, 1, &a) != AI_ERR_POOLS) return 12;
  if (ai_create_pools(&net_info, mine, 2, &a) != AI_OK) return 13;
  if (ai_create_pools(&net_info, other, 2, &b) != AI_OK) return 14;
  if (ai_create(&net_info, NULL, &c) != AI_OK) return 15;              /* the built-in pools */
  if (ai_get_pool_count(a) != 2u || ai_get_pool(a, 1) != p1[0] || ai_get_pool(c, 1) != net_activations_1 ||
      ai_get_pool_size(a, 1) != AI_NET_POOL_1_SIZE || ai_get_pool(a, 2) != NULL) return 16;
  if (ai_get_activations_size(a) != AI_NET_POOL_0_SIZE + AI_NET_POOL_1_SIZE) return 17;
  /* instances a and b take turns with different inputs; each output stays its own */
  if (!run(a, 3) || !run(b, -70) || !run(c, 3)) return 18;
  ai_tensor *oa = ai_get_output(a, 0), *ob = ai_get_output(b, 0), *oc = ai_get_output(c, 0);
  if (memcmp(oa->data, oc->data, oa->size_bytes) != 0) return 19;       /* same input, same output */
  if (memcmp(oa->data, ob->data, oa->size_bytes) == 0) return 20;
  const ai_u8 *d = (const ai_u8 *)oa->data;   /* a's output lies in one of a's own pools */
  if (!((d >= p0[0] && d < p0[0] + sizeof p0[0]) || (d >= p1[0] && d < p1[0] + sizeof p1[0]))) return 21;
  puts("ok");
  return 0;
}
""")
    exe = build_host(tmp_path / "c", "net", tmp_path / "t", [harness])
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr)


HAVE_QEMU = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="qemu-system-arm / arm-none-eabi-gcc not installed")
def test_split_model_matches_on_the_emulated_board(tmp_path):
    from stm32ai.project.run import build_project, run_qemu

    proj = tmp_path / "proj"
    assert main(["generate", str(RESIDUAL), "--board", BOARD, "--activations-pool", ",".join(SPLIT),
                 "-o", str(proj)]) == 0
    lds = (proj / f"{BOARD}.ld").read_text()
    assert ".nn_activations_psram (NOLOAD)" in lds and "} > PSRAM" in lds
    elf = build_project(proj)
    syms = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    addr = {ln.split()[-1]: int(ln.split()[0], 16) for ln in syms.splitlines() if "activations" in ln}
    board = load_board(BOARD)
    assert board.region("sram").origin <= addr["network_activations"] < board.region("sram").end
    assert board.region("psram").origin <= addr["network_activations_1"] < board.region("psram").end
    code, text = run_qemu(proj, board, timeout_s=120)
    assert "result: match" in text and "max_err: 0" in text, text
    assert "activations_pool: 1" in text and "B in psram" in text
    assert code == 0
