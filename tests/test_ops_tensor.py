"""Tensor / shape operators (tensor.py, ai_tensor.c; copy-only ones on ai_copy_nd).

* the tensor_* fixtures (real converter output, float32 and int8: REVERSE_V2, BATCH_TO_SPACE_ND,
  SPACE_TO_BATCH_ND, BROADCAST_TO, GATHER_ND, L2_NORMALIZATION, CUMSUM) run bit-exact against
  the verdict reference (TFLite Micro; LiteRT-ref for int8 SPACE_TO_BATCH_ND, where TFLM pads
  with 0 instead of the zero point: docs/references.md);
* hand-built models (tests/builders.py) against TFLite Micro (LiteRT-ref where TFLM lacks the
  type) on what the converter does not write or random data does not reach: run-time GATHER_ND
  and EMBEDDING_LOOKUP indices, EMBEDDING_LOOKUP int8 -> float, DYNAMIC_UPDATE_SLICE with
  run-time start indices out of range (clamped), REDUCE_ALL on bool, L2_POOL_2D, int8
  L2_NORMALIZATION at its edges (all values at the zero point, extreme sums), int32 CUMSUM;
* bad shapes or parameters are refused with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from builders import TfliteBuilder, schema
from conftest import FIXTURES

from stm32ai.errors import UnsupportedModelError
from stm32ai.pipeline import compile_model
from stm32ai.validate.host import run_compiled
from stm32ai.validate.reference import run_litert_ref, run_tflm
from stm32ai.validate.run import validate_model

TENSOR_FIXTURES = sorted(FIXTURES.glob("tensor_*.tflite"))
BO = schema.BuiltinOperator


@pytest.mark.parametrize("model", TENSOR_FIXTURES, ids=lambda p: p.stem)
def test_fixture_bit_exact(model):
    res = validate_model(model, n=1, seed=7)
    want = "litert-ref" if model.stem == "tensor_space_to_batch_int8" else "tflm"
    assert res.verdict_label == want, [c.unavailable for c in res.comparisons]
    v = next(c for c in res.comparisons if c.verdict)
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok and m.max_abs_err == 0, f"{model.name} output {j}: {m.as_dict()}"


def test_fixtures_present():
    names = {p.stem for p in TENSOR_FIXTURES}
    for base in ("reverse", "batch_to_space", "space_to_batch", "broadcast_to", "gather_nd", "l2_norm", "cumsum"):
        assert {f"tensor_{base}_int8", f"tensor_{base}_float32"} <= names, base


# ---- hand-built models ---------------------------------------------------------------------------

def _single(code, ins: list[tuple], out: tuple, opt_type: int = 0, opts=None) -> bytes:
    """One op: ins are (shape, dtype, quant dict, data or None) — data makes a constant."""
    b = TfliteBuilder()
    ids = []
    for shape, dtype, q, data in ins:
        t = b.tensor(shape, dtype, data=data, **q)
        ids.append(t)
        if data is None:
            b.inputs.append(t)
    y = b.tensor(out[0], out[1], **out[2])
    b.op(code, ids, [y], opt_type, opts)
    b.outputs = [y]
    return b.build()


def _run(data: bytes, tmp_path, samples: list[list[np.ndarray]], ref: str = "tflm") -> list[np.ndarray]:
    """Compile and run on the host; compare every sample with `ref` exactly (float: 1e-6 rel)."""
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    c = compile_model(path)
    got = run_compiled(c, samples)
    for s, outs in zip(samples, got, strict=True):
        want = run_tflm(path, s) if ref == "tflm" else run_litert_ref(path, s)
        for a, b in zip(outs, want, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
            if a.dtype == np.float32:
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=0)
            else:
                assert np.array_equal(a, b), (a, b)
    return [o[0] for o in got]


def test_gather_nd_runtime_indices(tmp_path):
    params = ((2, 5, 3), "float32", {}, None)
    idx = ((4, 2), "int32", {}, None)
    data = _single(BO.GATHER_ND, [params, idx], ((4, 3), "float32", {}))
    rng = np.random.default_rng(0)
    samples = [[rng.normal(0, 1, (2, 5, 3)).astype(np.float32),
                np.array([[1, 4], [0, 0], [1, 2], [0, 4]], np.int32)]]
    _run(data, tmp_path, samples)
    # a slice past the params (TFLM fails the inference): zeros, no read outside
    path = tmp_path / "m.tflite"
    c = compile_model(path)
    bad = run_compiled(c, [[samples[0][0], np.array([[1, 4], [2, 0], [-1, 0], [0, 1]], np.int32)]])[0][0]
    assert np.array_equal(bad[1:3], np.zeros((2, 3), np.float32))
    assert np.array_equal(bad[0], samples[0][0][1, 4]) and np.array_equal(bad[3], samples[0][0][0, 1])


@pytest.mark.parametrize("hybrid", [False, True], ids=["float32", "int8_to_float"])
def test_embedding_lookup(tmp_path, hybrid):
    rng = np.random.default_rng(1)
    if hybrid:
        table = (rng.integers(-127, 128, (7, 2, 3)).astype(np.int8), "int8", {"scale": 0.037, "zp": 0})
    else:
        table = (rng.normal(0, 1, (7, 2, 3)).astype(np.float32), "float32", {})
    data = _single(BO.EMBEDDING_LOOKUP, [((5,), "int32", {}, None), ((7, 2, 3), table[1], table[2], table[0])],
                   ((5, 2, 3), "float32", {}))
    out = _run(data, tmp_path, [[np.array([6, 0, 3, 3, 1], np.int32)]])[0]
    kernel = [op.kernel for op in compile_model(tmp_path / "m.tflite").graph.ops]
    assert kernel == (["embedding_lookup_hybrid"] if hybrid else ["gather"])
    assert out.shape == (5, 2, 3)


@pytest.mark.parametrize("dtype", ["int8"])
def test_dynamic_update_slice_clamps_runtime_starts(tmp_path, dtype):
    q = {"scale": 0.1, "zp": 3} if dtype == "int8" else {}
    data = _single(BO.DYNAMIC_UPDATE_SLICE, [((1, 6, 5, 2), dtype, q, None), ((1, 2, 3, 2), dtype, q, None),
                                             ((4,), "int32", {}, None)], ((1, 6, 5, 2), dtype, q))
    rng = np.random.default_rng(2)

    def r(shape):
        return (rng.integers(-128, 128, shape).astype(np.int8) if dtype == "int8"
                else rng.normal(0, 1, shape).astype(np.float32))

    starts = [[0, 5, 4, 0], [3, -2, 9, 7], [0, 4, 2, 0]]  # clamped high, both ways, in range
    _run(data, tmp_path, [[r((1, 6, 5, 2)), r((1, 2, 3, 2)), np.array(s, np.int32)] for s in starts])


def test_reduce_all_bool(tmp_path):
    o = schema.ReducerOptionsT()
    o.keepDims = False
    axes = np.array([1, -1], np.int32)
    data = _single(BO.REDUCE_ALL, [((2, 3, 4, 5), "bool", {}, None), ((2,), "int32", {}, axes)], ((2, 4), "bool", {}),
                   schema.BuiltinOptions.ReducerOptions, o)
    rng = np.random.default_rng(3)
    x = rng.random((2, 3, 4, 5)) > 0.03  # mostly true: both results occur
    x[0, :, 1, :] = True
    _run(data, tmp_path, [[x]])
    got = run_compiled(compile_model(tmp_path / "m.tflite"), [[x]])[0][0]
    assert np.array_equal(got, np.all(x, axis=(1, 3)))


@pytest.mark.parametrize("padding,act", [("SAME", "NONE"), ("VALID", "RELU6")])
def test_l2_pool(tmp_path, padding, act):
    o = schema.Pool2DOptionsT()
    o.padding = getattr(schema.Padding, padding)
    o.strideH, o.strideW, o.filterHeight, o.filterWidth = 2, 1, 3, 2
    o.fusedActivationFunction = getattr(schema.ActivationFunctionType, act)
    shape = (1, 7, 6, 3)
    oh, ow = ((4, 6) if padding == "SAME" else (3, 5))
    data = _single(BO.L2_POOL_2D, [(shape, "float32", {}, None)], ((1, oh, ow, 3), "float32", {}),
                   schema.BuiltinOptions.Pool2DOptions, o)
    rng = np.random.default_rng(4)
    _run(data, tmp_path, [[rng.normal(0, 3, shape).astype(np.float32)]])


def test_l2_norm_int8_edges(tmp_path):
    """Rows at the zero point (sum 0 and 1: TFLite's special case), tiny and maximal sums."""
    depth = 40
    data = _single(BO.L2_NORMALIZATION, [((6, depth), "int8", {"scale": 0.02, "zp": -5}, None)],
                   ((6, depth), "int8", {"scale": 1 / 128, "zp": 0}))
    x = np.full((6, depth), -5, np.int8)
    x[1, 3] = -4                      # sum of squares 1
    x[2, :2] = [-3, -7]               # 8
    x[3] = 127                        # every term 132^2
    x[4] = np.where(np.arange(depth) % 2, -128, 127)
    x[5] = np.random.default_rng(5).integers(-128, 128, depth)
    _run(data, tmp_path, [[x]])


def test_cumsum_int32_against_litert(tmp_path):
    o = schema.CumsumOptionsT()
    o.exclusive, o.reverse = True, True
    data = _single(BO.CUMSUM, [((3, 4, 5), "int32", {}, None), ((1,), "int32", {}, np.array([1], np.int32))],
                   ((3, 4, 5), "int32", {}), schema.BuiltinOptions.CumsumOptions, o)
    x = np.random.default_rng(6).integers(-(1 << 30), 1 << 30, (3, 4, 5)).astype(np.int32)
    _run(data, tmp_path, [[x]], ref="litert")


# ---- refusals ------------------------------------------------------------------------------------

def _refused(data: bytes, tmp_path, *words: str) -> None:
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(UnsupportedModelError) as e:
        compile_model(path)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_refusals(tmp_path):
    # GATHER_ND deeper than TFLM's 5
    _refused(_single(BO.GATHER_ND, [((1, 2, 2, 2, 2, 2), "float32", {}, None), ((1, 6), "int32", {}, None)],
                     ((1,), "float32", {})), tmp_path, "GATHER_ND", "index depth")
    # L2_NORMALIZATION int8 with an output scale TFLite does not use
    _refused(_single(BO.L2_NORMALIZATION, [((1, 8), "int8", {"scale": 0.1, "zp": 0}, None)],
                     ((1, 8), "int8", {"scale": 0.01, "zp": 0})), tmp_path, "L2_NORMALIZATION", "1/128")
    # DYNAMIC_UPDATE_SLICE with an update larger than the operand
    _refused(_single(BO.DYNAMIC_UPDATE_SLICE, [((2, 3), "float32", {}, None), ((3, 3), "float32", {}, None),
                                               ((2,), "int32", {}, None)], ((2, 3), "float32", {})),
             tmp_path, "DYNAMIC_UPDATE_SLICE", "larger")


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_broadcast_args(tmp_path, dtype):
    data = _single(BO.BROADCAST_ARGS, [((4,), dtype, {}, None), ((2,), dtype, {}, None)], ((4,), dtype, {}))
    dt = np.dtype(dtype)
    samples = [[np.array(a, dt), np.array(b, dt)] for a, b in
               (([2, 1, 3, 1], [1, 5]), ([1, 1, 1, 1], [7, 1]), ([3, 4, 1, 6], [5, 6]))]
    outs = _run(data, tmp_path, samples)
    assert outs[0].tolist() == [2, 1, 3, 5]


@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, True)])
def test_cumsum_int8_against_tflm(tmp_path, exclusive, reverse):
    """TFLite's quantized CUMSUM (the converter keeps CUMSUM in float, TFLM runs int8): its sum
    starts at the scaled input offset, and 40 terms of up to 255 * 2^19 wrap the int32 sum."""
    o = schema.CumsumOptionsT()
    o.exclusive, o.reverse = exclusive, reverse
    data = _single(BO.CUMSUM, [((2, 40, 3), "int8", {"scale": 0.05, "zp": -20}, None),
                               ((1,), "int32", {}, np.array([1], np.int32))],
                   ((2, 40, 3), "int8", {"scale": 0.4, "zp": 7}), schema.BuiltinOptions.CumsumOptions, o)
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (2, 40, 3)).astype(np.int8)
    x[1, :, 0] = 127
    _run(data, tmp_path, [[x]])


@pytest.mark.slow
def test_l2_norm_int8_on_the_emulated_board(tmp_path):
    """The int8 L2_NORMALIZATION fixture (the integer inverse square root) in the demo firmware
    on qemu-netduinoplus2 (Cortex-M4): result: match against the TFLM output embedded at
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
    assert main(["generate", str(FIXTURES / "tensor_l2_norm_int8.tflite"), "--board", board.id, "-o", str(out)]) == 0
    code, text = run_qemu(build_project(out), board, timeout_s=300)
    demo = parse_demo_output(text)
    assert code == 0 and demo.result == "match" and demo.fields["max_err"] == "0", text
