"""Graph outputs the model does not compute (docs/graph_json.md, "Outputs"): a constant
output (SSD priors), a graph input passed through, one tensor at two output positions, RESHAPE
aliases of an output or of the input. All legal TFLite; the regression set is converter-made
(tests/fixtures/make_fixtures_outputs.py, `out_*`), plus hand-built cases for what the
converter does not write. Every result is compared with TFLite Micro."""

from __future__ import annotations

import functools
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, fixture_models

from stm32ai.cli import main
from stm32ai.pipeline import compile_model
from stm32ai.planner import check_plan
from stm32ai.validate.host import run_compiled
from stm32ai.validate.reference import random_inputs, run_tflm

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))

pytest.importorskip("tflite_micro")

MODELS = fixture_models("out_*.tflite")
# (inputs in the pool, outputs in the pool): the default and the --no-*-allocation modes
MODES = [(True, True), (True, False), (False, True), (False, False)]
HAVE_QEMU = all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm"))


def _same(ours: list[np.ndarray], ref: list[np.ndarray]) -> None:
    assert len(ours) == len(ref)
    for j, (a, b) in enumerate(zip(ours, ref, strict=True)):
        assert a.dtype == b.dtype and a.shape == b.shape, (j, a.dtype, b.dtype, a.shape, b.shape)
        # copies and these ops are exact in float too (RELU, x * 0.5, x - 0.25)
        assert np.array_equal(a, b), f"output {j}: {a} != {b}"


def test_regression_set_shows_every_edge():
    """The fixtures still are what they are for (the generator checks it too, at build time)."""
    from output_edges import EDGES, output_edges

    assert len(MODELS) >= 9
    for p in MODELS:
        base = p.stem.rsplit("_", 1)[0]
        assert EDGES[base] <= output_edges(p.read_bytes()), p.name


@functools.cache
def _reference(model: Path) -> tuple[list[list[np.ndarray]], list[np.ndarray]]:
    """Three samples of `model` and TFLM's outputs for them (one TFLM run per model)."""
    x = random_inputs(model, 3, 11)
    return [[a[i:i + 1] for a in x] for i in range(3)], run_tflm(model, x)


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
@pytest.mark.parametrize("in_pool,out_pool", MODES, ids=["io-pool", "app-out", "app-in", "app-io"])
def test_bit_exact_with_tflm_in_every_allocation_mode(model, in_pool, out_pool):
    c = compile_model(model, inputs_in_pool=in_pool, outputs_in_pool=out_pool)
    check_plan(c.plan)
    samples, ref = _reference(model)
    ours = run_compiled(c, samples)
    # the reference stacks the samples (its leading axis); a sample's outputs keep their shapes
    for i, got in enumerate(ours):
        _same([r.reshape(len(samples), *g.shape)[i] for r, g in zip(ref, got, strict=True)], got)


def _storage(c, k: int) -> tuple[str, int]:
    """(pool, storage id) of graph output k in graph.json."""
    doc = c.doc
    n, idx, _ = doc["heads"][k]
    sid = doc["attrs"]["storage_id"][1][doc["node_row_ptr"][n] + idx]
    return doc["stm32ai"]["storage"][sid]["pool"], sid


def test_every_app_owned_output_has_its_own_buffer():
    """With --no-outputs-allocation the application passes one buffer per output position: each
    must be a storage of its own, or the model would write only one of them."""
    for name in ("out_dup_int8", "out_aliases_int8", "out_passthrough_int8"):
        c = compile_model(FIXTURES / f"{name}.tflite", outputs_in_pool=False)
        got = [_storage(c, k) for k in range(len(c.graph.outputs))]
        assert all(pool == "user" for pool, _ in got), got
        assert len({sid for _, sid in got}) == len(got), (name, got)


def test_pool_outputs_share_storage_without_a_copy():
    """In the pool one tensor at two positions is two heads on one buffer: no copy, no bytes."""
    c = compile_model(FIXTURES / "out_dup_int8.tflite")
    assert _storage(c, 0) == _storage(c, 1)
    assert "copy" not in [n["attrs"]["func_name"] for n in c.doc["nodes"] if n["op"] == "tvm_op"]


def test_constant_output_is_copied_from_the_weights():
    c = compile_model(FIXTURES / "out_ssd_priors_int8.tflite")
    copies = [op for op in c.graph.ops if op.kernel == "copy"]
    assert len(copies) == 1 and c.graph.tensors[copies[0].inputs[0]].is_const
    pool, _ = _storage(c, 1)
    assert pool == "activations"      # the output buffer, not the flash address


# ---- hand-built edges the converter does not write ---------------------------------------

def _builder():
    from builders import TfliteBuilder, schema

    return TfliteBuilder(), schema


def test_int8_constant_output_also_read_by_an_op(tmp_path):
    """A quantised constant that is both a graph output and an op's operand (ADD)."""
    b, S = _builder()
    x = b.tensor([1, 8], "int8", 0.05, -3)
    k = b.tensor([1, 8], "int8", 0.05, -3, data=np.arange(-40, 40, 10))
    y = b.tensor([1, 8], "int8", 0.1, 2)
    b.op(S.BuiltinOperator.ADD, [x, k], [y], S.BuiltinOptions.AddOptions, S.AddOptionsT())
    b.inputs, b.outputs = [x], [k, y, k]
    p = tmp_path / "const_add.tflite"
    p.write_bytes(b.build())
    x0 = random_inputs(p, 1, 2)
    for out_pool in (True, False):
        _same(run_compiled(compile_model(p, outputs_in_pool=out_pool), [x0])[0], run_tflm(p, x0))


def test_input_output_twice_and_computed(tmp_path):
    """The graph input at two output positions around a computed one, every allocation mode."""
    b, S = _builder()
    x = b.tensor([1, 5], "int8", 0.1, 0)
    y = b.tensor([1, 5], "int8", 0.1, 0)
    b.op(S.BuiltinOperator.RELU, [x], [y])
    b.inputs, b.outputs = [x], [x, y, x]
    p = tmp_path / "in_twice.tflite"
    p.write_bytes(b.build())
    x0 = random_inputs(p, 1, 4)
    ref = run_tflm(p, x0)
    for in_pool, out_pool in MODES:
        _same(run_compiled(compile_model(p, inputs_in_pool=in_pool, outputs_in_pool=out_pool), [x0])[0], ref)


def test_output_folded_to_a_constant(tmp_path):
    """SSD priors as the converter sometimes writes them: a RESHAPE of a constant, which
    fold_constants turns into a constant output."""
    b, S = _builder()
    x = b.tensor([1, 4], "int8", 0.1, 0)
    y = b.tensor([1, 4], "int8", 0.1, 0)
    k = b.tensor([2, 6], "int8", 0.02, 1, data=np.arange(12).reshape(2, 6))
    shape = b.tensor([2], "int32", data=np.array([3, 4]))
    r = b.tensor([3, 4], "int8", 0.02, 1)
    b.op(S.BuiltinOperator.RELU, [x], [y])
    o = S.ReshapeOptionsT()
    o.newShape = [3, 4]
    b.op(S.BuiltinOperator.RESHAPE, [k, shape], [r], S.BuiltinOptions.ReshapeOptions, o)
    b.inputs, b.outputs = [x], [y, r]
    p = tmp_path / "priors_reshape.tflite"
    p.write_bytes(b.build())
    x0 = random_inputs(p, 1, 6)
    c = compile_model(p)
    assert [n["attrs"]["func_name"] for n in c.doc["nodes"] if n["op"] == "tvm_op"] == ["clamp_s8", "copy"]
    _same(run_compiled(c, [x0])[0], run_tflm(p, x0))


def test_validate_cli_host_mode(capsys):
    for name in ("out_ssd_priors_int8", "out_aliases_float32", "out_identity_float32"):
        assert main(["validate", str(FIXTURES / f"{name}.tflite"), "-n", "2"]) == 0, name
        assert "result: match" in capsys.readouterr().out


def test_verifier_still_refuses_a_variable_output(tmp_path):
    from stm32ai.errors import Stm32aiError
    from stm32ai.frontend.tflite_reader import load_tflite
    from stm32ai.passes.verify import verify_graph

    b, S = _builder()
    x = b.tensor([1, 4], "int8", 0.1, 0)
    y = b.tensor([1, 4], "int8", 0.1, 0)
    b.op(S.BuiltinOperator.RELU, [x], [y])
    z = b.tensor([1, 4], "int8", 0.1, 0)
    b.inputs, b.outputs = [x], [y, x, z]
    p = tmp_path / "ok.tflite"
    p.write_bytes(b.build())
    g = load_tflite(p)
    g.outputs = g.outputs[:2]
    verify_graph(g)                       # an input as an output: accepted
    g = load_tflite(p)
    with pytest.raises(Stm32aiError, match="not produced by any op"):
        verify_graph(g)                   # z: nothing writes it
    g.tensors[g.outputs[2]].variable = True
    with pytest.raises(Stm32aiError, match="variable"):
        verify_graph(g)


def test_analyze_names_the_copy(capsys):
    assert main(["analyze", str(FIXTURES / "out_ssd_priors_int8.tflite")]) == 0
    assert "output copy" in capsys.readouterr().out


# ---- on the emulated board -----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="no arm-none-eabi-gcc/make/qemu")
def test_multi_model_firmware_with_app_owned_outputs(tmp_path, capsys):
    """Demo test vectors (expected outputs from TFLM) of three edge models in one firmware,
    outputs owned by the application: every model matches on the emulated STM32F405."""
    out = tmp_path / "fw"
    models = [str(FIXTURES / f"{n}.tflite") for n in ("out_ssd_priors_int8", "out_aliases_int8", "out_dup_int8")]
    assert main(["generate", *models, "--board", "qemu-netduinoplus2", "--no-outputs-allocation",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["run", str(out), "--timeout", "180"]) == 0
    err = capsys.readouterr().err
    for n in ("out_ssd_priors_int8", "out_aliases_int8", "out_dup_int8"):
        assert f"model {n}: match" in err, err


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="no arm-none-eabi-gcc/make/qemu")
def test_validate_target_mode_constant_and_passthrough(capsys):
    """The UART validation protocol carries the copied outputs (a float32 constant among int8)."""
    for name in ("out_ssd_priors_int8", "out_passthrough_int8"):
        assert main(["validate", str(FIXTURES / f"{name}.tflite"), "--mode", "target",
                     "--board", "qemu-netduinoplus2", "-n", "2"]) == 0, name
        assert "result: match" in capsys.readouterr().out


def test_more_outputs_than_the_default_instance_table(tmp_path):
    """A model with 10 outputs (UNPACK), more than the runtime's default AI_MAX_IO (8): the
    generated C says which -DAI_MAX_IO it needs instead of failing at ai_create, the host
    validation builds with it and matches TFLite Micro."""
    import re
    import subprocess

    from builders import TfliteBuilder, schema

    from stm32ai.emitter import emit_c
    from stm32ai.pipeline import compile_model
    from stm32ai.validate.run import validate_model

    b = TfliteBuilder()
    x = b.tensor([10, 3], "float32")
    outs = [b.tensor([3], "float32") for _ in range(10)]
    opts = schema.UnpackOptionsT()
    opts.num, opts.axis = 10, 0
    b.op(schema.BuiltinOperator.UNPACK, [x], outs, schema.BuiltinOptions.UnpackOptions, opts)
    b.inputs, b.outputs = [x], outs
    model = tmp_path / "unpack10.tflite"
    model.write_bytes(b.build())

    c = compile_model(model, "network")
    emit_c(c.doc, c.params, "network", tmp_path / "c")
    src = (tmp_path / "c" / "network.c").read_text()
    assert re.search(r"#if AI_MAX_IO < 10\n#error .*-DAI_MAX_IO=10", src)
    res = validate_model(model, n=2, seed=3)
    assert res.verdict_label == "tflm" and res.passed
    gcc = subprocess.run(["gcc", "-std=c99", "-fsyntax-only", f"-I{tmp_path / 'c'}",
                          f"-I{tmp_path / 'c' / 'runtime' / 'include'}", str(tmp_path / "c" / "network.c")],
                         capture_output=True, text=True)
    assert gcc.returncode != 0 and "-DAI_MAX_IO=10" in gcc.stderr
