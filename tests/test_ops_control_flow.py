"""IF and WHILE (frontend/control_flow.py): the generated C against TFLite Micro.

* converter-made fixtures (tests/fixtures/make_fixtures_control_flow.py): tf.cond on a run-time
  predicate (float32 and int8), fixed-count tf.while_loop (float32 and int8), an IF nested in a
  WHILE body; inputs chosen so that both branches are taken; bit for bit with TFLM through
  validate's own flow;
* what the frontend makes of them: the loop unrolled (one copy of the body per iteration, the
  counter evaluated at generate time), a run-time IF as both branches + `if_select`, an IF whose
  condition is a constant as its branch alone;
* refusals: a data-dependent trip count, more than MAX_UNROLL iterations.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES

from stm32ai.errors import UnsupportedModelError
from stm32ai.frontend.control_flow import MAX_UNROLL
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.pipeline import compile_model
from stm32ai.validate.reference import input_specs
from stm32ai.validate.run import validate_model

schema = pytest.importorskip("ai_edge_litert.schema_py_generated")
flatbuffers = pytest.importorskip("flatbuffers")

MODELS = ["cf_if_float32", "cf_if_int8", "cf_while_float32", "cf_while_int8", "cf_while_if_float32"]


def _inputs(model: Path) -> list[np.ndarray]:
    """Rows of both signs (the predicate is sum(x) > 0) and random rows, stacked per input."""
    (spec,) = input_specs(model)
    rng = np.random.default_rng(7)
    if spec.dtype.kind in "iu":
        rows = [np.full(spec.shape, 90), np.full(spec.shape, -90), rng.integers(-128, 128, spec.shape),
                rng.integers(-128, 128, spec.shape)]
    else:
        rows = [np.full(spec.shape, 1.5), np.full(spec.shape, -1.5), rng.uniform(-2, 2, spec.shape),
                rng.uniform(-0.3, 0.3, spec.shape)]
    return [np.stack(rows).astype(spec.dtype)]


@pytest.mark.parametrize("name", MODELS)
def test_matches_tflm(name):
    model = FIXTURES / f"{name}.tflite"
    res = validate_model(model, _inputs(model), seed=3)
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict and verdict[0].reference == "tflm"
    for m, ok in zip(verdict[0].outputs, verdict[0].ok, strict=True):
        assert ok and m.max_abs_err == 0.0


def test_what_the_frontend_makes():
    g = load_tflite(FIXTURES / "cf_while_float32.tflite")
    assert [op.type for op in g.ops].count("TANH") == 4 and not any(op.type == "WHILE" for op in g.ops)
    g = load_tflite(FIXTURES / "cf_while_if_float32.tflite")
    assert [op.type for op in g.ops].count("IF") == 3  # one select per iteration
    c = compile_model(FIXTURES / "cf_if_int8.tflite")
    kernels = [op.kernel for op in c.graph.ops]
    assert kernels.count("if_select") == 1


def _edit(src: str, dst: Path, edit) -> Path:
    m = schema.ModelT.InitFromPackedBuf(bytearray((FIXTURES / src).read_bytes()), 0)
    edit(m)
    b = flatbuffers.Builder(1 << 16)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    dst.write_bytes(bytes(b.Output()))
    return dst


def _loop_bound(n: int):
    def edit(m) -> None:
        cond = next(sg for sg in m.subgraphs if sg.name == b"while_cond")
        (op,) = cond.operators
        t = cond.tensors[op.inputs[1]]
        m.buffers[t.buffer].data = list(np.array(n, np.int32).tobytes())
    return edit


def _const_condition(value: bool):
    def edit(m) -> None:
        sg = m.subgraphs[0]
        buf = schema.BufferT()
        buf.data = [1 if value else 0]
        m.buffers.append(buf)
        t = schema.TensorT()
        t.shape, t.type, t.buffer, t.name = [], schema.TensorType.BOOL, len(m.buffers) - 1, b"const_cond"
        sg.tensors.append(t)
        code = schema.BuiltinOperator.IF
        (op,) = [o for o in sg.operators if m.operatorCodes[o.opcodeIndex].builtinCode == code]
        op.inputs[0] = len(sg.tensors) - 1
    return edit


def test_longer_loop_matches_tflm(tmp_path):
    p = _edit("cf_while_float32.tflite", tmp_path / "loop10.tflite", _loop_bound(10))
    assert [op.type for op in load_tflite(p).ops].count("TANH") == 10
    res = validate_model(p, _inputs(p), seed=3)
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict and verdict[0].reference == "tflm" and all(verdict[0].ok)


@pytest.mark.parametrize("value", [True, False])
def test_constant_condition_keeps_one_branch(value, tmp_path):
    p = _edit("cf_if_float32.tflite", tmp_path / "c.tflite", _const_condition(value))
    c = compile_model(p)
    assert not any(op.kernel == "if_select" for op in c.graph.ops)
    assert any(op.type == ("ADD" if value else "RELU") for op in c.graph.ops)
    res = validate_model(p, _inputs(p), seed=3)
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict and verdict[0].reference == "tflm" and all(verdict[0].ok)


def _counter_from_input(m) -> None:
    """The loop counter's initial value becomes a second (int32) graph input."""
    sg = m.subgraphs[0]
    t = schema.TensorT()
    t.shape, t.type, t.buffer, t.name = [], schema.TensorType.INT32, 0, b"n0"
    sg.tensors.append(t)
    sg.inputs = [*sg.inputs, len(sg.tensors) - 1]
    (op,) = sg.operators
    op.inputs[0] = len(sg.tensors) - 1


def test_refusals(tmp_path):
    p = _edit("cf_while_float32.tflite", tmp_path / "dyn.tflite", _counter_from_input)
    with pytest.raises(UnsupportedModelError) as e:
        load_tflite(p)
    assert "depends on run-time data" in str(e.value) and "\n" not in str(e.value)
    p = _edit("cf_while_float32.tflite", tmp_path / "long.tflite", _loop_bound(MAX_UNROLL + 5))
    with pytest.raises(UnsupportedModelError) as e:
        load_tflite(p)
    assert f"more than {MAX_UNROLL} iterations" in str(e.value)


def test_kernel_compiles_clean(tmp_path):
    import shutil
    import subprocess

    runtime = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
    src = runtime / "src" / "ai_control_flow.c"
    warn = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wconversion"]
    for cc, extra in (("cc", []), ("arm-none-eabi-gcc", ["-mcpu=cortex-m4", "-mthumb"])):
        if shutil.which(cc) is None:
            continue
        subprocess.run([cc, *extra, *warn, f"-I{runtime / 'include'}", "-c", str(src), "-o",
                        str(tmp_path / "o.o")], check=True)
