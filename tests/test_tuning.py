"""Per-layer autotuning (stm32ai/tuning.py: signature + table; stm32ai/tune.py: the tuner stage;
docs/tuning.md). The chooser and the cache are checked with a fake measurement; one slow test
runs the real tuner (build + cycle estimator) on a two-layer fixture and checks its choice is the
minimum of what it measured and that the tuned C matches TFLite Micro."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import FIXTURES

from stm32ai.errors import Stm32aiError
from stm32ai.pipeline import compile_for_board, compile_model
from stm32ai.tune import conv_variant, tune
from stm32ai.tuning import CONV_VARIANTS, Measured, TuningTable, choose, load_table, signature
from stm32ai.validate.host import run_compiled

TWO = FIXTURES / "conv_per_tensor_int8.tflite"   # 3x3 stride 1 (Winograd-able) + 3x3 stride 2
BOARD = "nucleo-l4r5zi"


def _variants(c):
    return [(op.tune_key, conv_variant(op, c.graph)) for op in c.graph.ops if op.tune_key]


def test_choose_fastest_then_smaller_flash_then_order():
    assert choose({"int8": Measured(1000, 900, 100), "int16": Measured(900, 700, 200)}) == "int16"
    # a tie in cycles: the smaller weights win
    assert choose({"int16": Measured(900, 700, 200), "int8": Measured(900, 900, 100)}) == "int8"
    # per layer: cycles summed over `count` layers with the key are compared per layer
    assert choose({"int8": Measured(2000, 0, 200, count=2), "wino": Measured(1100, 0, 360, count=1)}) == "int8"
    # full tie: CONV_VARIANTS order, whatever the dict order
    assert choose({"wino": Measured(5, 0, 1), "int16": Measured(5, 0, 1)}) == "int16"
    with pytest.raises(ValueError):
        choose({})


def test_signature_names_board_core_variants_and_tool():
    k = "CONV_2D[in_c=3]"
    s = signature(k, BOARD, "cortex-m4", CONV_VARIANTS, "t1")
    assert s == signature(k, BOARD, "cortex-m4", CONV_VARIANTS, "t1")
    others = {signature(k, "nucleo-h7a3zi-q", "cortex-m7", CONV_VARIANTS, "t1"),
              signature(k, BOARD, "cortex-m4", ("int8", "int16"), "t1"),
              signature(k, BOARD, "cortex-m4", CONV_VARIANTS, "t2"),
              signature("CONV_2D[in_c=4]", BOARD, "cortex-m4", CONV_VARIANTS, "t1")}
    assert s not in others and len(others) == 4


def test_table_round_trip_and_bad_tables(tmp_path):
    t = TuningTable(BOARD, "cortex-m4", "abc", layers={"K2": {"variant": "int16"}, "K1": {"variant": "wino"}})
    p = tmp_path / "t.json"
    t.dump(p)
    back = load_table(p, BOARD)
    assert back.choices() == {"K1": "wino", "K2": "int16"} and back.tool == "abc"
    with pytest.raises(Stm32aiError, match="tuned for board nucleo-l4r5zi, not nucleo-h7a3zi-q"):
        load_table(p, "nucleo-h7a3zi-q")
    for bad in ("{", "[]", json.dumps({"format": "x"}),
                json.dumps({**t.to_json(), "layers": {"K": {"variant": "fast"}}})):
        p.write_text(bad)
        with pytest.raises(Stm32aiError, match="--tuning"):
            load_table(p)
    with pytest.raises(Stm32aiError, match="does not exist"):
        load_table(tmp_path / "none.json")


def test_lowering_follows_the_table_per_layer():
    c0 = compile_model(TWO)
    k_s1, k_s2 = [op.tune_key for op in c0.graph.ops if op.tune_key]
    assert "stride=1x1" in k_s1 and "stride=2x2" in k_s2
    c = compile_model(TWO, tuning={k_s1: "wino", k_s2: "int16"})
    assert _variants(c) == [(k_s1, "wino"), (k_s2, "int16")]
    c = compile_model(TWO, optimization="time", tuning={k_s1: "int8", k_s2: "wino"})
    # wino does not apply to stride 2: that layer follows --optimization (time: int16)
    assert _variants(c) == [(k_s1, "int8"), (k_s2, "int16")]
    # ram keeps its meaning: int8 everywhere, the table is not consulted
    # (stripes off: under ram the two convs would run row-streamed inside one STRIPE op)
    c = compile_model(TWO, optimization="ram", tuning={k_s1: "wino", k_s2: "int16"}, stripes=False)
    assert _variants(c) == [(k_s1, "int8"), (k_s2, "int8")]


def test_mixed_variants_match_tflite_micro():
    runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    k_s1, k_s2 = [op.tune_key for op in compile_model(TWO).graph.ops if op.tune_key]
    x = np.random.default_rng(25).integers(-128, 128, (1, 8, 7, 3)).astype(np.int8)
    it = runtime.Interpreter.from_file(str(TWO))
    it.set_input(x, 0)
    it.invoke()
    want = it.get_output(0)
    for choice in ({k_s1: "wino", k_s2: "int16"}, {k_s1: "int16", k_s2: "int8"}):
        c = compile_for_board(TWO, "network", BOARD, tuning=choice)
        assert [v for _, v in _variants(c)] == [choice[k_s1], choice[k_s2]]
        np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], want)


def _fake(cycles: dict[str, int], calls: list[str]):
    """A measurement step that returns fixed per-variant cycles for every layer that runs the
    variant (checking the candidate build really runs it)."""
    def measure(path, board_id, c, variant, optimization):
        calls.append(variant)
        out = {}
        for op in c.graph.ops:
            if op.tune_key and conv_variant(op, c.graph) == variant:
                out[op.tune_key] = Measured(cycles[variant] + len(out), 1, 10 * CONV_VARIANTS.index(variant))
        assert out, variant
        return out, sum(m.cycles for m in out.values()), 0
    return measure


def test_tuner_keeps_the_fastest_and_caches(tmp_path):
    calls: list[str] = []
    lines: list[str] = []
    fake = _fake({"int8": 1000, "int16": 900, "wino": 950, "smallk": 980}, calls)
    res = tune(TWO, BOARD, cache=tmp_path, measure=fake, progress=lines.append)
    assert calls == ["int8", "int16", "wino", "smallk"] and not res.cached
    k_s1, k_s2 = sorted(res.table.layers)
    assert res.table.choices() == {k_s1: "int16", k_s2: "int16"}
    # 3 input channels: the small-channel window kernel admits both layers; no Winograd at stride 2
    assert set(res.table.layers[k_s1]["measured"]) == {"int8", "int16", "wino", "smallk"}
    assert set(res.table.layers[k_s2]["measured"]) == {"int8", "int16", "smallk"}
    assert any("int16 on 2 layers" in ln for ln in lines)
    t1 = tmp_path / "a.json"
    res.table.dump(t1)
    # second run: every signature cached, nothing built, the same table byte for byte
    calls2: list[str] = []
    res2 = tune(TWO, BOARD, cache=tmp_path, measure=_fake({"int8": 1, "int16": 2, "wino": 3, "smallk": 4}, calls2))
    t2 = tmp_path / "b.json"
    res2.table.dump(t2)
    assert res2.cached and calls2 == [] and t1.read_bytes() == t2.read_bytes()
    # another board is another signature: measured again
    calls3: list[str] = []
    tune(TWO, "nucleo-h7a3zi-q", cache=tmp_path, measure=_fake({"int8": 1, "int16": 2, "wino": 3, "smallk": 4}, calls3))
    assert calls3 == ["int8", "int16", "wino", "smallk"]


def test_tune_cli_refuses_in_one_line(tmp_path, capsys):
    from stm32ai.cli import main

    assert main(["generate", str(TWO), "--c-only", "--tuning", str(tmp_path / "x.json"),
                 "-o", str(tmp_path / "o")]) == 2
    assert "--tuning needs --board" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    (tmp_path / "bad.json").write_text("{")
    assert main(["analyze", str(TWO), "--board", BOARD, "--tuning", str(tmp_path / "bad.json")]) == 2
    assert "is not a tuning table" in capsys.readouterr().err


def test_generate_autotune_runs_the_tuner_then_compiles_with_its_table(tmp_path, capsys, monkeypatch):
    import stm32ai.tune
    from stm32ai.cli import main

    calls: list[str] = []
    monkeypatch.setenv("STM32AI_CACHE_DIR", str(tmp_path / "cache"))
    fake = _fake({"int8": 1000, "int16": 1100, "wino": 500, "smallk": 1200}, calls)
    monkeypatch.setattr(stm32ai.tune, "_measure", fake)
    out = tmp_path / "c"
    assert main(["generate", str(TWO), "--board", BOARD, "--c-only", "--autotune", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert calls == ["int8", "int16", "wino", "smallk"] and "tune [3/4] wino on 1 layers" in err
    src = (out / "network.c").read_text()
    # stride 1: Winograd (fastest); stride 2: int8 (faster than int16 in the fake)
    assert "conv2d_wino_s8" in src and "conv2d_s8" in src


@pytest.mark.slow
def test_real_tuner_on_a_fixture(tmp_path, capsys):
    """Builds and estimates every candidate (4 firmware builds, ~1 min): the table's choice is the
    minimum of what was measured, and the tuned C matches TFLite Micro on the host."""
    from stm32ai.cli import main

    if not shutil.which("arm-none-eabi-gcc"):
        pytest.skip("arm-none-eabi-gcc not installed")
    out = tmp_path / "t.json"
    assert main(["tune", str(TWO), "--board", BOARD, "-o", str(out), "--cache-dir", str(tmp_path / "c")]) == 0
    t = load_table(out, BOARD)
    assert len(t.layers) == 2
    for e in t.layers.values():
        m = e["measured"]
        assert e["variant"] == min(m, key=lambda v: (m[v]["cycles"], m[v]["weights_bytes"],
                                                     CONV_VARIANTS.index(v)))
        assert all(x["cycles"] > 0 for x in m.values())
    capsys.readouterr()
    assert main(["tune", str(TWO), "--board", BOARD, "-o", str(tmp_path / "t2.json"),
                 "--cache-dir", str(tmp_path / "c")]) == 0
    assert "(all measurements cached)" in capsys.readouterr().out
    assert (tmp_path / "t2.json").read_bytes() == out.read_bytes()
    assert main(["validate", str(TWO), "--board", BOARD, "--tuning", str(out), "-n", "2"]) == 0
    assert "result: match" in capsys.readouterr().out
    assert main(["analyze", str(TWO), "--board", BOARD, "--tuning", str(out)]) == 0
    assert "tuning table (nucleo-l4r5zi" in capsys.readouterr().out


def test_bench_labels_the_autotuned_row():
    from bench.__main__ import estimate_table

    e = {"board": BOARD, "estimated_cycles": 100, "estimated_ms": 1.0, "cpi": 1.0, "flash_bytes_read": 0,
         "xcube_cycles": 200, "est_vs_xcube": 0.5, "best_cycles": 150, "best_by": "x", "est_vs_best": 0.667,
         "trace_s": 1, "model": "m", "uncertainty": 0.15}
    md = estimate_table([{"stem": "ic", "estimates": [e, {**e, "autotuned": True,
                                                          "choices": {"a": "wino", "b": "int16", "c": "int16"}}]}])
    assert "| ic | nucleo-l4r5zi | 100 |" in md and "| ic autotuned (int16, wino) | nucleo-l4r5zi | 100 |" in md
