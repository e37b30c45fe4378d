"""TILE (tile.py -> copy_nd) and validation through op-version substitution (op_versions.py).

* every tile_* fixture (real converter output) validates bit-exact with a named verdict: no
  reference runs the int8 ones as shipped (TFLM has no TILE, LiteRT-ref registers TILE up to
  v2 and the converter stamps v3), so LiteRT-ref runs a version-lowered copy and says so;
* hand-built graphs run the generated C on the host against numpy's np.tile (every element
  type, the affine and the offset-table plans, rank 6);
* a constant TILE folds at generate time; runtime multiples and bad shapes are refused;
* the substitution: one int32 of the file changes, the installed LiteRT-ref really refuses
  the shipped version, rules never apply to other types, ops or references;
* the demo of the TILE-v3 fixture reports a match on the emulated board and names the
  substitution (slow).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, random_data

from stm32ai.cli import main
from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op, Quant
from stm32ai.passes.fold_constants import fold_constants
from stm32ai.passes.lower import registry
from stm32ai.pipeline import compile_graph
from stm32ai.validate import op_versions as ov
from stm32ai.validate.host import run_compiled
from stm32ai.validate.reference import ReferenceUnavailable, random_inputs, run_litert_ref
from stm32ai.validate.run import validate_model

TILE_FIXTURES = sorted(FIXTURES.glob("tile_*.tflite"))
# tile_head_int8 (both substitutions) is validated through the CLI below
HEAD = FIXTURES / "tile_head_int8.tflite"
TILE_V3 = "TILE v3 run as v2: same int8 semantics"
D2S_V2 = "DEPTH_TO_SPACE v2 run as v1: same int8 semantics"


def _base(path: Path) -> str:
    return path.stem.rsplit("_", 1)[0]


def test_fixtures_present():
    assert {_base(p) for p in TILE_FIXTURES} == {"tile_rows", "tile_batch", "tile_5d", "tile_head"}
    assert len(TILE_FIXTURES) == 8


# CI time: the int8 fixtures (the substitution) and the float head; the other float32 fixtures are
# plain TILEs that test_any_element_type_and_shape covers against numpy (all 8 match LiteRT-ref:
# `stm32ai validate tests/fixtures/models/tile_*.tflite`)
CHECKED = [p for p in TILE_FIXTURES if p != HEAD and (p.stem.endswith("int8") or p.stem == "tile_head_float32")]


@pytest.mark.parametrize("model", CHECKED, ids=lambda p: p.stem)
def test_fixture_bit_exact_with_named_verdict(model):
    res = validate_model(model, n=1, seed=7)
    tflm, lite = res.comparisons
    assert not tflm.verdict and "TILE" in (tflm.unavailable or "")   # TFLM has no TILE kernel
    assert lite.verdict, lite.unavailable
    int8 = model.stem.endswith("int8")
    want = ([D2S_V2, TILE_V3] if _base(model) == "tile_head" else [TILE_V3]) if int8 else []
    assert lite.substitutions == want
    assert res.verdict_label == "litert-ref" + (f" ({'; '.join(want)})" if want else "")
    for j, (m, ok) in enumerate(zip(lite.outputs, lite.ok, strict=True)):
        assert ok and m.max_abs_err == 0, f"{model.name} output {j}: {m.as_dict()}"
    js = res.to_json()
    assert js["verdict"] == res.verdict_label and js["references"][1]["substitutions"] == want


# ---------------------------------------------------------------------------------------------
# The generated C against numpy
# ---------------------------------------------------------------------------------------------

def _tile_graph(x: np.ndarray, mult: list[int], quant: Quant | None = None) -> Graph:
    g = Graph("t", [], [], [], [])
    a = g.add_tensor("x", x.shape, x.dtype.name, quant)
    m = g.add_const("multiples", np.asarray(mult, np.int32))
    y = g.add_tensor("y", np.tile(x, mult).shape, x.dtype.name, quant)
    g.ops.append(Op("TILE", [a, m], [y], {}, index=0))
    g.inputs, g.outputs = [a], [y]
    return g


CASES = [((2, 3, 4), [2, 1, 3]), ((1, 3, 4, 5), [1, 2, 3, 1]), ((3, 1, 2, 1, 2, 2), [1, 2, 1, 3, 2, 1]),
         ((2, 3, 2, 3), [2, 2, 2, 2]), ((5,), [4]), ((1, 2, 3, 4, 5), [1, 2, 2, 2, 2])]


@pytest.mark.parametrize("dtypes", [["int8"] * len(CASES), ["int16", "int32", "int64", "float32", "bool", "uint8"]],
                         ids=["int8-every-shape", "other-types"])
def test_any_element_type_and_shape(dtypes):
    # several tiles in one graph (one host build each; at most 8 model inputs)
    rng = np.random.default_rng(1)
    g = Graph("t", [], [], [], [])
    xs, want = [], []
    for k, (dtype, (shape, mult)) in enumerate(zip(dtypes, CASES, strict=True)):
        x = random_data(shape, dtype, rng)
        a = g.add_tensor(f"x{k}", x.shape, dtype)
        y = g.add_tensor(f"y{k}", np.tile(x, mult).shape, dtype)
        g.ops.append(Op("TILE", [a, g.add_const(f"m{k}", np.asarray(mult, np.int32))], [y], {}, index=k))
        g.inputs.append(a)
        g.outputs.append(y)
        xs.append(x)
        want.append(np.tile(x, mult))
    c = compile_graph(g)
    assert {op.kernel for op in c.graph.ops} == {"copy_nd"}
    got = run_compiled(c, [xs])[0]
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.dtype == b.dtype and np.array_equal(a, b), (dtypes[k], CASES[k])


def test_plans_affine_and_table():
    x = np.zeros((1, 3, 4, 5), np.int8)
    (op,) = compile_graph(_tile_graph(x, [1, 2, 3, 1])).graph.ops
    assert op.inputs[1] == -1 and op.attrs["block"] == 20      # rows of 4x5 copied whole, no tables
    x5 = np.zeros((1, 2, 3, 4, 5), np.int8)
    c = compile_graph(_tile_graph(x5, [1, 2, 2, 2, 2]))
    (op,) = c.graph.ops
    assert op.inputs[1] >= 0                                   # 7 affine dims > 6: offset tables


def test_int8_keeps_quantisation_and_constant_tile_folds():
    q = Quant(np.array([0.05]), np.array([-3]))
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    g = _tile_graph(x, [2, 2], q)
    g.tensors[0].data = x                                      # a constant input: the op folds
    g.inputs = []
    fold_constants(g)
    assert not g.ops and np.array_equal(g.tensors[g.outputs[0]].data, np.tile(x, [2, 2]))


def _refusal(g: Graph) -> str:
    with pytest.raises(UnsupportedModelError) as e:
        compile_graph(g)
    return str(e.value)


def test_refusals():
    x = np.zeros((1, 4, 2), np.int8)
    g = _tile_graph(x, [1, 2, 1])
    g.tensors[1].data = None                                   # multiples fed at run time
    g.inputs.append(1)
    msg = _refusal(g)
    assert "TILE" in msg and "constant" in msg
    g = _tile_graph(x, [1, 2, 1])
    g.tensors[2].shape = (1, 4, 2)
    assert "x multiples" in _refusal(g)
    g = _tile_graph(x, [1, 2, 1], Quant(np.array([0.1]), np.array([0])))
    g.tensors[2].quant = Quant(np.array([0.2]), np.array([0]))
    assert "quantis" in _refusal(g)


def test_registry_lists_tile():
    reg = registry()
    assert "TILE" in reg and "constant multiples" in reg["TILE"].constraints


# ---------------------------------------------------------------------------------------------
# Op-version substitution
# ---------------------------------------------------------------------------------------------

def test_lowered_copy_changes_one_version_field_only():
    buf = HEAD.read_bytes()
    low, done = ov.lower_versions(buf, {"TILE": (3, 2)})
    assert done == ["TILE"] and len(low) == len(buf)
    diff = [i for i, (a, b) in enumerate(zip(buf, low, strict=True)) if a != b]
    assert len(diff) == 1 and buf[diff[0]] == 3 and low[diff[0]] == 2


def test_installed_litert_ref_refuses_the_shipped_versions(tmp_path):
    # the rule exists because of this refusal; if a LiteRT release registers TILE v3, the
    # substitution is no longer taken (run_substituted reacts only to a refusal)
    x = random_inputs(HEAD, 1, 0)
    with pytest.raises(ReferenceUnavailable) as e:
        run_litert_ref(HEAD, x)
    assert ov.refused_op(e.value.reason) in {("TILE", 3), ("DEPTH_TO_SPACE", 2)}
    low, _ = ov.lower_versions(HEAD.read_bytes(), {"TILE": (3, 2), "DEPTH_TO_SPACE": (2, 1)})
    (tmp_path / "low.tflite").write_bytes(low)
    got = run_litert_ref(tmp_path / "low.tflite", x)
    assert sorted(y.shape for y in got) == [(1, 6, 16, 2), (1, 24, 12)]


def test_rules_are_narrow():
    assert ov.find_rule("TILE", 3, "litert-ref") is not None
    assert ov.find_rule("TILE", 3, "tflm") is None              # TFLM never checks versions
    assert ov.find_rule("TILE", 4, "litert-ref") is None
    assert ov.find_rule("CONV_2D", 3, "litert-ref") is None
    refusal = "Didn't find op for builtin opcode 'TILE' version '3'"
    # a float32 model has TILE v1: nothing at v3 to lower, the refusal stands
    assert ov.run_substituted("litert-ref", FIXTURES / "tile_rows_float32.tflite", refusal,
                              lambda p: pytest.fail("must not run")) is None
    assert ov.run_substituted("litert-ref", HEAD, "some other error", lambda p: pytest.fail("no")) is None
    for r in ov.RULES:
        assert r.types == {"int8"} and r.run_as < r.shipped and r.evidence


def test_rule_checks_the_tensor_types(tmp_path):
    # TILE stamped v3 on an int16 tensor (hand-edited): the rule covers int8 only
    import tflite

    buf = bytearray((FIXTURES / "tile_rows_int8.tflite").read_bytes())
    sg = tflite.Model.GetRootAs(bytes(buf), 0).Subgraphs(0)
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        if t.Type() == 9:                                      # int8 -> int16, in place
            buf[t._tab.Pos + t._tab.Offset(6)] = 7
    bad = tmp_path / "tile_int16.tflite"
    bad.write_bytes(bytes(buf))
    refusal = "Didn't find op for builtin opcode 'TILE' version '3'"
    assert ov.run_substituted("litert-ref", bad, refusal, lambda p: pytest.fail("must not run")) is None


def test_validate_cli_prints_and_writes_the_verdict(tmp_path, capsys):
    js = tmp_path / "v.json"
    assert main(["validate", str(HEAD), "-n", "1", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    label = f"litert-ref ({D2S_V2}; {TILE_V3})"
    assert f"substituted: {label}" in out and f"verdict: {label}" in out and "result: match" in out
    doc = json.loads(js.read_text())
    assert doc["verdict"] == label and doc["references"][1]["substitutions"] == [D2S_V2, TILE_V3]


def test_docs_list_the_rules():
    text = (ROOT / "docs" / "references.md").read_text()
    for r in ov.RULES:
        assert f"| {r.op} | v{r.shipped} | v{r.run_as} |" in text, r.op


@pytest.mark.slow
def test_tile_v3_demo_matches_on_the_emulated_board(tmp_path, capsys):
    if not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm not installed")
    out = tmp_path / "proj"
    assert main(["generate", str(HEAD), "--board", "qemu-netduinoplus2", "-o", str(out)]) == 0
    assert TILE_V3 in capsys.readouterr().err                  # "test vector: expected output from ..."
    assert main(["run", str(out)]) == 0
    kv = dict(ln.split(": ", 1) for ln in capsys.readouterr().out.splitlines() if ": " in ln)
    assert kv["result"] == "match" and kv["max_err"] == "0"
    assert kv["expected_output"] == f"LiteRT (reference kernels; {D2S_V2}; {TILE_V3})"
