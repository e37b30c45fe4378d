"""LOG_SOFTMAX (log_softmax.py, ai_log_softmax.c, ai_fixedpoint.h).

* every logsoftmax_* fixture (real converter output) runs bit-exact against TFLite Micro,
  the verdict, and the wide-range fixtures really send row differences below diff_min;
* hand-built graphs (the LOG_SOFTMAX flatbuffer written here) run the generated C on the
  host against TFLM for the edge cases random data rarely hits: all-equal rows, depth 1,
  every row value at -128 or 127, many maxima, extreme input scales (a capped multiplier),
  long rows, float rows with huge magnitudes;
* generate-time parameters against hand-computed values;
* an int8 output without TFLite's quantisation (16/256, 127) and other unsupported types are
  refused at generate time, through the CLI: exit 2, one line naming op, tensor and reason;
* the kernels compile warning-free on the host and for Cortex-M4.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, M4, WARN, compile_each, refused_by_generate

from stm32ai.passes.lower import registry
from stm32ai.passes.lower.log_softmax import log_softmax_params_s8
from stm32ai.pipeline import compile_model
from stm32ai.validate.reference import random_inputs
from stm32ai.validate.run import validate_model

schema = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")
flatbuffers = pytest.importorskip("flatbuffers")

LSM_FIXTURES = sorted(FIXTURES.glob("logsoftmax_*.tflite"))
NAMES = ("logsoftmax_row", "logsoftmax_3d", "logsoftmax_4d_wide", "logsoftmax_depth1", "logsoftmax_dense_head")
# calibrated on [-20, 20] and [-30, 30]: differences reach below diff_min
WIDE = ("logsoftmax_3d", "logsoftmax_4d_wide")
RUNTIME = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
F32 = np.float32


def _check(res) -> None:
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict, f"no reference ran {res.model}: {[c.unavailable for c in res.comparisons]}"
    v = verdict[0]
    assert v.reference == "tflm", f"{res.model}: TFLM did not run: {res.comparisons[0].unavailable}"
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok, (f"{res.model} output {j} vs {v.reference}: max LSB {m.max_lsb}, "
                    f"max rel err {m.max_rel_err:.3g}")
        if m.max_lsb is not None:
            assert m.max_lsb == 0


def test_fixtures_present():
    stems = {p.stem for p in LSM_FIXTURES}
    for name in NAMES:
        for flavour in ("int8", "float32"):
            assert f"{name}_{flavour}" in stems, f"{name}_{flavour} missing: run make_fixtures_logsoftmax.py"


@pytest.mark.parametrize("model", LSM_FIXTURES, ids=lambda p: p.stem)
def test_fixture_bit_exact(model):
    _check(validate_model(model, n=3, seed=7))


@pytest.mark.parametrize("name", WIDE)
def test_wide_fixtures_reach_below_diff_min(name):
    model = FIXTURES / f"{name}_int8.tflite"
    g = compile_model(model).graph
    op = next(o for o in g.ops if o.kernel == "log_softmax_s8")
    x = random_inputs(model, 3, seed=7)[0].reshape(-1, op.attrs["depth"]).astype(np.int32)
    diffs = x - x.max(axis=1, keepdims=True)
    assert (diffs < op.attrs["diff_min"]).any(), (diffs.min(), op.attrs["diff_min"])
    assert op.inplace


# ---------------------------------------------------------------------------------------------
# Hand-built LOG_SOFTMAX graphs against TFLM
# ---------------------------------------------------------------------------------------------

def _model(layers: list[tuple[tuple[int, ...], str, float, int, float, int]]) -> bytes:
    """One LOG_SOFTMAX per layer: (shape, dtype, in scale, in zp, out scale, out zp)."""
    tensors, ops, ins, outs = [], [], [], []
    tt = {"int8": schema.TensorType.INT8, "float32": schema.TensorType.FLOAT32,
          "int16": schema.TensorType.INT16, "uint8": schema.TensorType.UINT8}

    def tensor(shape, dtype, scale, zp) -> int:
        t = schema.TensorT()
        t.shape, t.type, t.name, t.buffer = list(shape), tt[dtype], f"t{len(tensors)}".encode(), 0
        if dtype != "float32":
            q = schema.QuantizationParametersT()
            q.scale, q.zeroPoint = [float(scale)], [int(zp)]
            t.quantization = q
        tensors.append(t)
        return len(tensors) - 1

    for shape, dtype, s_in, z_in, s_out, z_out in layers:
        x, y = tensor(shape, dtype, s_in, z_in), tensor(shape, dtype, s_out, z_out)
        o = schema.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = 0, [x], [y]
        o.builtinOptionsType = schema.BuiltinOptions.LogSoftmaxOptions
        o.builtinOptions = schema.LogSoftmaxOptionsT()
        ops.append(o)
        ins.append(x)
        outs.append(y)
    m = schema.ModelT()
    m.version, m.buffers = 3, [schema.BufferT()]
    oc = schema.OperatorCodeT()
    code = schema.BuiltinOperator.LOG_SOFTMAX
    oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = code, min(code, 127), 1
    m.operatorCodes = [oc]
    sg = schema.SubGraphT()
    sg.tensors, sg.operators, sg.inputs, sg.outputs = tensors, ops, ins, outs
    m.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _s8(shape, scale, zp=0):
    return (shape, "int8", float(F32(scale)), zp, 16 / 256, 127)


def _run(tmp_path: Path, layers, samples: list[list[np.ndarray]]) -> None:
    """validate_model on the hand-built graph; samples stacked on an extra leading axis."""
    path = tmp_path / "lsm.tflite"
    path.write_bytes(_model(layers))
    arrays = [np.stack([s[i] for s in samples]) for i in range(len(layers))]
    _check(validate_model(path, arrays))


def _edge_rows(depth: int, rng: np.random.Generator) -> np.ndarray:
    rows = [np.full(depth, v) for v in (-128, 127, 0, 37)]          # all equal
    r = np.full(depth, -128)
    r[rng.integers(0, depth)] = 127                                 # one max, the rest 255 below
    rows.append(r)
    r = np.full(depth, 127)
    r[rng.integers(0, depth)] = -128                                # one far below many maxima
    rows.append(r)
    rows.append(rng.choice([127, 126, -128], depth))                # many (near-)maxima
    rows.append(rng.integers(-128, 128, depth))
    return np.stack(rows).astype(np.int8)


@pytest.mark.parametrize("depth", [1, 2, 7, 64, 300, 1000])
def test_edge_rows_int8(tmp_path, depth):
    rng = np.random.default_rng(depth)
    scales = (0.02, 0.1, 0.157, 0.5)
    layers = [_s8((8, depth), s, int(rng.integers(-128, 128))) for s in scales]
    samples = [[_edge_rows(depth, rng) for _ in scales] for _ in range(2)]
    _run(tmp_path, layers, samples)


def test_extreme_input_scales(tmp_path):
    """Tiny scales (every difference far inside the exp range), scales whose rescaling
    multiplier is capped at 2^31 - 1 (diff_min 0: only the maxima count), and in between."""
    rng = np.random.default_rng(3)
    scales = (2e-7, 1e-4, 1 / 16, 1.0, 31.0, 40.0, 1000.0)
    layers = [_s8((5, 23), s, int(rng.integers(-128, 128))) for s in scales]
    samples = [[np.concatenate([_edge_rows(23, rng)[:4], rng.integers(-128, 128, (1, 23))]).astype(np.int8)
                for _ in scales] for _ in range(3)]
    _run(tmp_path, layers, samples)


def test_random_rows_many_scales(tmp_path):
    """Random shapes and scales, inputs confined to random sub-ranges of int8."""
    rng = np.random.default_rng(5)
    for _ in range(2):
        layers = []
        for _ in range(6):
            shape = tuple(int(v) for v in rng.integers(1, 30, int(rng.integers(1, 4))))
            layers.append(_s8(shape, 10 ** rng.uniform(-3, 1.3), int(rng.integers(-128, 128))))
        samples = []
        for _ in range(4):
            s = []
            for shape, *_ in layers:
                lo = int(rng.integers(-128, 128))
                s.append(rng.integers(lo, int(rng.integers(lo, 128)) + 1, shape).astype(np.int8))
            samples.append(s)
        _run(tmp_path, layers, samples)


def test_float_edge_rows(tmp_path):
    rng = np.random.default_rng(9)
    depths = (1, 5, 129)
    layers = [((6, d), "float32", 0.0, 0, 0.0, 0) for d in depths]
    samples = []
    for _ in range(2):
        s = []
        for d in depths:
            rows = [np.full(d, 3.5), np.full(d, -1e30), rng.normal(0, 1, d) * 1e4,
                    rng.normal(0, 1, d) * 1e-6, rng.normal(0, 10, d), rng.uniform(-100, 100, d)]
            s.append(np.stack(rows).astype(np.float32))
        samples.append(s)
    _run(tmp_path, layers, samples)


# ---------------------------------------------------------------------------------------------
# Generate-time parameters
# ---------------------------------------------------------------------------------------------

def test_params_hand_computed():
    # scale 1/16: input_scale * 2^26 = 2^22 = 0.5 * 2^23; its inverse 2^-22 = 0.5 * 2^-21;
    # radius = 31 * 2^26 / 2^23 = 248
    assert log_softmax_params_s8(1 / 16) == {
        "input_multiplier": 1 << 30, "input_left_shift": 23,
        "reverse_multiplier": 1 << 30, "reverse_shift": -21, "diff_min": -248}
    # capped: 40 * 2^26 > 2^31 - 1 -> multiplier 2^31 - 1, shift 31; reverse 1 / (2^31 - 1)
    # = 2^-31 * (1 + 2^-31 + ...): Q31 mantissa 2^30 * (1 + 2^-31) = 2^30 + 0.5 rounds up
    p = log_softmax_params_s8(40.0)
    assert p["input_multiplier"] == (1 << 31) - 1 and p["input_left_shift"] == 31
    assert p["reverse_multiplier"] == (1 << 30) + 1 and p["reverse_shift"] == -30
    assert p["diff_min"] == 0
    # the reverse scaling is the inverse of the forward one, to the multipliers' precision
    for scale in (1e-4, 0.0123, 0.157, 0.9, 7.5):
        q = log_softmax_params_s8(float(F32(scale)))
        fwd = q["input_multiplier"] * 2.0 ** (q["input_left_shift"] - 31)
        rev = q["reverse_multiplier"] * 2.0 ** (q["reverse_shift"] - 31)
        assert abs(fwd * rev - 1) < 1e-8
        assert q["reverse_shift"] <= 0 and q["diff_min"] <= 0


def test_registry_lists_log_softmax():
    reg = registry()
    assert "LOG_SOFTMAX" in reg and "16/256" in reg["LOG_SOFTMAX"].constraints


# ---------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------

def _refused(tmp_path: Path, data: bytes, *words: str) -> str:
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    return refused_by_generate(path, tmp_path / "out", *words)


@pytest.mark.parametrize("case,layer,words", [
    ("softmax_scale", ((1, 10), "int8", 0.1, 0, 1 / 256, -128), ("16/256", "scale 0.00390625")),
    ("zero_point", ((1, 10), "int8", 0.1, 0, 16 / 256, 0), ("16/256", "zero point 0")),
    ("scale_only", ((2, 3, 5), "int8", 0.1, 4, 1 / 16 + 1e-3, 127), ("16/256",)),
    ("int16", ((1, 10), "int16", 0.001, 0, 1 / 2048, 0), ("int16",)),
])
def test_cli_refuses_unsupported_quantisation(tmp_path, case, layer, words):
    _refused(tmp_path, _model([layer]), "LOG_SOFTMAX", "'t1'", *words)  # op and output tensor


def test_legacy_uint8_runs_bit_exact(tmp_path):
    """Legacy uint8 (TFLite's 16/256 output with zero point 255) is accepted and matches LiteRT's
    reference kernels (TFLM has no uint8 LOG_SOFTMAX)."""
    rng = np.random.default_rng(8)
    path = tmp_path / "lsm_u8.tflite"
    path.write_bytes(_model([((1, 10), "uint8", 0.1, 128, 16 / 256, 255)]))
    res = validate_model(path, [rng.integers(0, 256, (4, 1, 10), dtype=np.uint8)])
    v = next(c for c in res.comparisons if c.verdict)
    assert v.reference == "litert-ref"
    assert all(v.ok) and all(m.max_lsb == 0 for m in v.outputs)


# ---------------------------------------------------------------------------------------------
# Warning-free C, host and Cortex-M4
# ---------------------------------------------------------------------------------------------

SOURCES = [RUNTIME / "src" / "ai_log_softmax.c", RUNTIME / "src" / "ai_softmax.c"]


def test_kernels_compile_warning_free(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    compile_each(cc, [*WARN, "-Wconversion"], SOURCES, tmp_path)
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    compile_each("arm-none-eabi-gcc", [*WARN, *M4], SOURCES, tmp_path, ".m4.o")
