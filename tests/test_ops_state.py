"""Resource variables and CALL_ONCE: the generated C against TFLite Micro over several runs.

* Every state_* fixture (converter-made by tests/fixtures/make_fixtures_state.py: tf.Variable
  state read and assigned in a tf.function; a CALL_ONCE init subgraph gives the initial values)
  compiles to state tensors, `copy` (READ_VARIABLE / ASSIGN_VARIABLE) and `var_init` (CALL_ONCE).
* Over a sequence of runs the state carries like TFLM's resource variables across Invoke: every
  output bit-exact. ai_reset restarts from the initial values, as a freshly created TFLM
  interpreter (TFLM's own reset zeroes the variables and skips the init subgraph: checked to
  differ for the non-zero initial value, docs/kernels_resource.md); a second instance keeps its own.
* validate's flow (a fresh reference interpreter per sample for CALL_ONCE models).
* Malformed variants are refused with one line; the kernel compiles warning-free.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, fixture_models
from stateful import reference_sequence, run_sequence

from stm32ai.errors import UnsupportedModelError
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.pipeline import compile_model
from stm32ai.validate.reference import input_specs
from stm32ai.validate.run import validate_model

RUNTIME = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
SOURCE = RUNTIME / "src" / "ai_resource.c"
WARN = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion", "-Wconversion"]
M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
MODELS = fixture_models("state_*.tflite")
STEPS = 7  # more than the ring's 4 frames: the initial value is shifted out entirely


def _inputs(model: Path, n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    (spec,) = input_specs(model)
    if spec.dtype.kind in "iu":
        return [rng.integers(-128, 128, spec.shape).astype(spec.dtype) for _ in range(n)]
    return [rng.uniform(-2.0, 2.0, spec.shape).astype(np.float32) for _ in range(n)]


def test_fixture_set():
    assert {p.stem for p in MODELS} >= {"state_ring_float32", "state_ring_int8", "state_accum_float32"}
    for p in MODELS:
        c = compile_model(p)
        g = c.graph
        assert not any(op.type == "VAR_HANDLE" for op in g.ops)
        kernels = [op.kernel for op in g.ops]
        n_vars = 2 if p.stem == "state_accum_float32" else 1
        assert kernels.count("var_init") == n_vars
        states = [t for t in g.tensors if t.variable and t.dtype != "uint8"]
        flags = [t for t in g.tensors if t.variable and t.dtype == "uint8"]
        assert len(states) == n_vars and len(flags) == n_vars
        # the state area holds the variables and their flags, zeroed at ai_create/ai_reset
        state_pool = [st for st in c.doc["stm32ai"]["storage"] if st["pool"] == "state"]
        assert sum(st["size"] for st in state_pool) >= sum(t.nbytes for t in states + flags)
        assert all(n["attrs"]["fill"] == 0 for n in c.doc["nodes"] if n.get("attrs", {}).get("variable"))
        for op in g.ops:  # every READ/ASSIGN/CALL_ONCE touches a state tensor
            if op.type in ("READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"):
                assert any(g.tensors[t].variable for t in op.inputs)


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_state_persists_across_runs(model, tmp_path):
    spec = input_specs(model)[0]
    xs = [np.ascontiguousarray(x).reshape(spec.shape) for x in _inputs(model, STEPS, 3)]
    want = reference_sequence(model, xs)  # TFLM: xs in a row, then its reset + xs[0]
    c = compile_model(model)
    got = run_sequence(c, xs, tmp_path)
    out_t = c.graph.tensors[c.graph.outputs[0]]
    assert len(got) == STEPS + 1 + 3
    # the state matters: no two steps give the same output
    assert len({w.tobytes() for w in want[:STEPS]}) == STEPS
    for k in range(STEPS):
        np.testing.assert_array_equal(got[k], want[k].reshape(out_t.shape), err_msg=f"step {k}")
    # after ai_reset: the initial values again (a fresh interpreter's first output, want[0])
    np.testing.assert_array_equal(got[STEPS], want[0].reshape(out_t.shape))
    if model.stem == "state_ring_float32":  # TFLM's reset zeroes instead (non-zero initial value)
        assert not np.array_equal(want[STEPS], want[0])
    # after the reset A has run xs[0]; B (own pool and state) runs xs[0], A xs[1], B xs[1]
    np.testing.assert_array_equal(got[STEPS + 1], want[0].reshape(out_t.shape))
    np.testing.assert_array_equal(got[STEPS + 2], want[1].reshape(out_t.shape))
    np.testing.assert_array_equal(got[STEPS + 3], want[1].reshape(out_t.shape))


def test_validate_flow():
    model = FIXTURES / "state_ring_float32.tflite"
    res = validate_model(model, [np.stack(_inputs(model, 3, 5))], seed=5)
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict and verdict[0].reference == "tflm"
    for m, ok in zip(verdict[0].outputs, verdict[0].ok, strict=True):
        assert ok and m.max_abs_err == 0.0


# ---------------------------------------------------------------------------------------------
# Refusals (the converter's model, edited)
# ---------------------------------------------------------------------------------------------

schema = pytest.importorskip("ai_edge_litert.schema_py_generated")
flatbuffers = pytest.importorskip("flatbuffers")


def _edited(src: str, dst: Path, edit) -> Path:
    m = schema.ModelT.InitFromPackedBuf(bytearray((FIXTURES / src).read_bytes()), 0)
    edit(m)
    b = flatbuffers.Builder(1 << 16)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    dst.write_bytes(bytes(b.Output()))
    return dst


def _opcode(m, name: str) -> int:
    code = getattr(schema.BuiltinOperator, name)
    return next(i for i, oc in enumerate(m.operatorCodes) if max(oc.builtinCode, oc.deprecatedBuiltinCode) == code)


def _non_const_init(m) -> None:
    sg = m.subgraphs[1]
    assign = next(o for o in sg.operators if o.opcodeIndex == _opcode(m, "ASSIGN_VARIABLE"))
    sg.tensors[assign.inputs[1]].buffer = 0  # no data: the value is computed, not a constant


def _bad_index(m) -> None:
    call = next(o for o in m.subgraphs[0].operators if o.opcodeIndex == _opcode(m, "CALL_ONCE"))
    call.builtinOptions.initSubgraphIndex = 7


def _one_variable_two_shapes(m) -> None:
    handles = [o for o in m.subgraphs[0].operators if o.opcodeIndex == _opcode(m, "VAR_HANDLE")]
    handles[1].builtinOptions.sharedName = handles[0].builtinOptions.sharedName


def _init_computes(m) -> None:
    sg = m.subgraphs[1]
    sg.operators[1].opcodeIndex = _opcode(m, "READ_VARIABLE")


@pytest.mark.parametrize("edit,src,words", [
    (_non_const_init, "state_ring_float32.tflite", ["CALL_ONCE init subgraph 1", "not a constant"]),
    (_bad_index, "state_ring_float32.tflite", ["init_subgraph_index 7", "names no subgraph"]),
    (_one_variable_two_shapes, "state_accum_float32.tflite", ["resource variable", "one type and size"]),
    (_init_computes, "state_ring_float32.tflite", ["CALL_ONCE init subgraph 1", "only constant initial"]),
], ids=["non_const_init", "bad_index", "two_shapes", "init_computes"])
def test_refusals(edit, src, words, tmp_path):
    p = _edited(src, tmp_path / "m.tflite", edit)
    with pytest.raises(UnsupportedModelError) as e:
        load_tflite(p)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_kernel_compiles_clean(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    subprocess.run([cc, *WARN, f"-I{RUNTIME / 'include'}", "-c", str(SOURCE), "-o", str(tmp_path / "h.o")],
                   check=True)
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    subprocess.run(["arm-none-eabi-gcc", *M4, "-std=gnu11", *WARN[1:], f"-I{RUNTIME / 'include'}", "-c",
                    str(SOURCE), "-o", str(tmp_path / "m4.o")], check=True)
