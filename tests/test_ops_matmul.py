"""BATCH_MATMUL and FULLY_CONNECTED with run-time weights (matmul.py, ai_matmul.c).

* the matmul_* fixtures (real converter output: int8, int16, float32; run-time and constant
  operands, adj_x/adj_y, broadcast batch dims, attention's q k^T, FC with run-time weights,
  fused bias and RELU) run bit-exact against TFLite Micro;
* hand-built models (tests/builders.py) against TFLite Micro on what the converter's
  calibration never writes: extreme zero points (-128 / 127), 5-D operands with batch
  broadcasting on both sides, every adj_x/adj_y combination, a fused RELU6 on an FC with
  run-time weights and zero-point-127 weights;
* shapes that do not multiply, or types TFLite Micro lacks, are refused with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from builders import TfliteBuilder, schema
from conftest import FIXTURES

from stm32ai.errors import UnsupportedModelError
from stm32ai.passes.lower import registry
from stm32ai.pipeline import compile_model
from stm32ai.validate.host import run_compiled
from stm32ai.validate.run import validate_model

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

MATMUL_FIXTURES = sorted(FIXTURES.glob("matmul_*.tflite"))


@pytest.mark.parametrize("model", MATMUL_FIXTURES, ids=lambda p: p.stem)
def test_fixture_bit_exact(model):
    res = validate_model(model, n=1, seed=5)
    assert res.verdict_label == "tflm", [c.unavailable for c in res.comparisons]
    v = next(c for c in res.comparisons if c.verdict)
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok and m.max_abs_err == 0, f"{model.name} output {j}: {m.as_dict()}"


def test_fixtures_present():
    assert {p.stem for p in MATMUL_FIXTURES} == {
        "matmul_bmm_int8", "matmul_bmm_float32", "matmul_bmm_int16", "matmul_const_int8",
        "matmul_const_float32", "matmul_einsum_int8", "matmul_einsum_float32",
        "matmul_fc_runtime_int8", "matmul_fc_runtime_float32", "matmul_attention_int8", "matmul_attention_float32"}


# ---- hand-built models against TFLite Micro ------------------------------------------------------

def _q(dtype: str, zp: int, scale: float) -> dict:
    return {"scale": scale, "zp": zp} if dtype != "float32" else {}


def _bmm_model(cases: list[tuple], dtype: str) -> bytes:
    """One BATCH_MATMUL per case (lhs shape, rhs shape, adj_x, adj_y, lhs zp, rhs zp, out zp)."""
    b = TfliteBuilder()
    for ls, rs, ax, ay, zl, zr, zo in cases:
        lhs = b.tensor(ls, dtype, **_q(dtype, zl, 0.03))
        rhs = b.tensor(rs, dtype, **_q(dtype, zr, 0.02))
        a, w = np.zeros(ls), np.zeros(rs)
        shape = np.matmul(a.swapaxes(-1, -2) if ax else a, w.swapaxes(-1, -2) if ay else w).shape
        y = b.tensor(shape, dtype, **_q(dtype, zo, 0.05))
        o = schema.BatchMatMulOptionsT()
        o.adjX, o.adjY = ax, ay
        b.op(schema.BuiltinOperator.BATCH_MATMUL, [lhs, rhs], [y], schema.BuiltinOptions.BatchMatMulOptions, o)
        b.inputs += [lhs, rhs]
        b.outputs.append(y)
    return b.build()


_NP = {schema.TensorType.INT8: np.int8, schema.TensorType.INT16: np.int16,
       schema.TensorType.FLOAT32: np.float32}


def _samples(data: bytes, rng: np.random.Generator, n: int) -> list[list[np.ndarray]]:
    """Random inputs over each type's whole range (floats: normal, sigma 2)."""
    sg = schema.ModelT.InitFromPackedBuf(data, 0).subgraphs[0]
    specs = [(tuple(sg.tensors[i].shape), np.dtype(_NP[sg.tensors[i].type])) for i in sg.inputs]
    out = []
    for _ in range(n):
        s = []
        for shape, dt in specs:
            if dt.kind == "f":
                s.append(rng.normal(0, 2, shape).astype(dt))
            else:
                info = np.iinfo(dt)
                s.append(rng.integers(info.min, int(info.max) + 1, shape).astype(dt))
        out.append(s)
    return out


def _against_tflm(data: bytes, tmp_path, n: int = 3, seed: int = 0) -> list[str]:
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    c = compile_model(path)
    samples = _samples(data, np.random.default_rng(seed), n)
    got = run_compiled(c, samples)
    for s, outs in zip(samples, got, strict=True):
        it = tflm_runtime.Interpreter.from_bytes(data, arena_size=4 << 20)
        for i, x in enumerate(s):
            it.set_input(x, i)
        it.invoke()
        for j, a in enumerate(outs):
            ref = it.get_output(j)
            assert a.shape == ref.shape and a.dtype == ref.dtype, (j, a.shape, ref.shape)
            if a.dtype == np.float32:
                np.testing.assert_allclose(a, ref, rtol=1e-5, atol=1e-6, err_msg=f"output {j}")
            else:
                assert np.array_equal(a, ref), f"output {j}: max diff {np.abs(a.astype(int) - ref).max()}"
    return [op.kernel for op in c.graph.ops]


BMM_CASES = [
    ((2, 1, 3, 4, 5), (1, 3, 1, 5, 6), False, False, -128, 127, 5),   # 5-D, both sides broadcast
    ((3, 4, 5), (4, 6), True, False, 127, -128, -128),                  # adj_x, rank 3 x rank 2
    ((2, 3, 4), (2, 6, 4), False, True, 0, 3, 127),                     # adj_y
    ((1, 4, 3), (3, 6, 4), True, True, -7, 0, 0),                       # both, lhs broadcast
]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_batch_matmul_against_tflm(tmp_path, dtype):
    kernels = _against_tflm(_bmm_model(BMM_CASES, dtype), tmp_path)
    assert kernels == [f"batch_matmul_{'s8' if dtype == 'int8' else 'f32'}"] * len(BMM_CASES)


def test_batch_matmul_int16_against_tflm(tmp_path):
    cases = [(ls, rs, ax, ay, 0, 0, 0) for ls, rs, ax, ay, *_ in BMM_CASES]
    assert _against_tflm(_bmm_model(cases, "int16"), tmp_path) == ["batch_matmul_s16"] * len(cases)


def _fc_model(dtype: str, act: int, w_zp: int) -> bytes:
    b = TfliteBuilder()
    x = b.tensor((2, 3, 7), dtype, **_q(dtype, -128, 0.04))
    w = b.tensor((5, 7), dtype, **_q(dtype, w_zp, 0.03))
    rng = np.random.default_rng(1)
    bias = (b.tensor((5,), "int32", scale=0.04 * 0.03, zp=0, data=rng.integers(-3000, 3000, 5).astype(np.int32))
            if dtype == "int8" else b.tensor((5,), "float32", data=rng.normal(0, 1, 5).astype(np.float32)))
    y = b.tensor((6, 5), dtype, **_q(dtype, 3, 0.02))
    o = schema.FullyConnectedOptionsT()
    o.fusedActivationFunction = act
    b.op(schema.BuiltinOperator.FULLY_CONNECTED, [x, w, bias], [y], schema.BuiltinOptions.FullyConnectedOptions, o)
    b.inputs += [x, w]
    b.outputs.append(y)
    return b.build()


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_fc_runtime_weights_against_tflm(tmp_path, dtype):
    act = schema.ActivationFunctionType.RELU6
    kernels = _against_tflm(_fc_model(dtype, act, 127), tmp_path)
    assert kernels == [f"batch_matmul_{'s8' if dtype == 'int8' else 'f32'}"]


# ---- refusals ----------------------------------------------------------------------------------

def _compile_bytes(data: bytes, tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    return compile_model(path)


def test_mismatched_depth_is_refused(tmp_path):
    b = TfliteBuilder()
    lhs, rhs = b.tensor((2, 3, 4), "float32"), b.tensor((2, 5, 6), "float32")
    y = b.tensor((2, 3, 6), "float32")
    b.op(schema.BuiltinOperator.BATCH_MATMUL, [lhs, rhs], [y], schema.BuiltinOptions.BatchMatMulOptions,
         schema.BatchMatMulOptionsT())
    b.inputs, b.outputs = [lhs, rhs], [y]
    with pytest.raises(UnsupportedModelError) as e:
        _compile_bytes(b.build(), tmp_path)
    assert "BATCH_MATMUL" in str(e.value) and "do not multiply" in str(e.value)


def test_int16_zero_point_is_refused(tmp_path):
    with pytest.raises(UnsupportedModelError) as e:
        _compile_bytes(_bmm_model([((2, 3), (3, 2), False, False, 1, 0, 0)], "int16"), tmp_path)
    assert "zero point 0" in str(e.value)


def test_registry_lists_both():
    reg = registry()
    assert "adj_x" in reg["BATCH_MATMUL"].constraints
    assert "run time" in reg["FULLY_CONNECTED"].constraints


@pytest.mark.slow
def test_attention_on_the_emulated_board(tmp_path):
    """The int8 attention fixture's demo firmware on qemu-netduinoplus2 (Cortex-M4, the
    cross-compiled strided kernels): result: match against the TFLM output embedded at
    generate time."""
    import shutil

    if not all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc/make/qemu-system-arm not installed")
    from stm32ai.boards import load_board
    from stm32ai.cli import main
    from stm32ai.project.demo_output import parse_demo_output
    from stm32ai.project.run import build_project, run_qemu

    out = tmp_path / "proj"
    board = load_board("qemu-netduinoplus2")
    assert main(["generate", str(FIXTURES / "matmul_attention_int8.tflite"), "--board", board.id, "-o", str(out)]) == 0
    code, text = run_qemu(build_project(out), board, timeout_s=300)
    demo = parse_demo_output(text)
    assert code == 0 and demo.result == "match" and demo.fields["max_err"] == "0", text
