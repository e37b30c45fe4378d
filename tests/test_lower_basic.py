"""FULLY_CONNECTED, pooling, ADD, SOFTMAX and RESHAPE: lowering and kernels, read as specifications.

* the generate-time arithmetic on hand-computed cases (weight layout, folded bias, TFLite's
  multiplier/shift derivations for FC, ADD and SOFTMAX, pooling padding);
* two arithmetic rules settled against TFLite Micro itself on models built so that the rule
  flips the output: the FC multiplier uses the double product of the scales, the fused
  activation clamp divides in float32;
* the kernels on hand-computed inputs where rounding matters (average of negative sums,
  double rounding, softmax saturation), checked against both the hand value and TFLM;
* what the compiler refuses, and why;
* randomised single-op models (per-channel weights, keep_num_dims, batches, odd sizes,
  broadcasting, every fused activation, extreme softmax scales) against TFLM, bit for bit,
  and every real/fixture model using these ops;
* the Cortex-M4 SMLAD/SXTB16 path of the FC kernel on QEMU against the host build.

Single-op models are written with the flatbuffer schema shipped with tflite-micro, so the
quantisation parameters are exactly the ones chosen here.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from builders import TfliteBuilder, schema
from conftest import FIXTURES, MPS2_LD, STARTUP_C, shared_model

from stm32ai.errors import UnsupportedModelError
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.passes.canonicalize import canonicalize
from stm32ai.passes.fold_constants import fold_constants
from stm32ai.passes.lower import registry
from stm32ai.passes.lower.binary import add_params_s8, broadcast_strides
from stm32ai.passes.lower.fc import chunk_groups, pack_fc_weights_s8, packed_size, pairable
from stm32ai.passes.lower.pool import compute_padding
from stm32ai.passes.lower.softmax import softmax_params_s8
from stm32ai.passes.quant import multiply_by_quantized_multiplier, quantize_multiplier
from stm32ai.pipeline import compile_model
from stm32ai.validate.host import run_compiled

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

RUNTIME = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
BASIC_SOURCES = [RUNTIME / "src" / f for f in ("ai_fc.c", "ai_pool.c", "ai_binary.c", "ai_reshape.c", "ai_softmax.c")]
WARN = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion"]
M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
F32 = np.float32


# ---- a tiny .tflite writer ---------------------------------------------------------------------

class ModelBuilder(TfliteBuilder):
    _ACT = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4}
    _op = TfliteBuilder.op  # the name builders in other test files (and branches) call

    def io(self, inputs, output) -> None:
        """Runtime inputs not produced by an earlier op become graph inputs; an op's output
        becomes a graph output until a later op consumes it."""
        for t in inputs:
            if t in self.outputs:
                self.outputs.remove(t)
            elif self.tensors[t].buffer == 0 and t not in self.inputs:
                self.inputs.append(t)
        self.outputs.append(output)

    def fc(self, x, w, b, y, act="NONE", keep=False) -> None:
        o = schema.FullyConnectedOptionsT()
        o.fusedActivationFunction, o.keepNumDims = self._ACT[act], keep
        self.op(schema.BuiltinOperator.FULLY_CONNECTED, [x, w, b], [y],
                 schema.BuiltinOptions.FullyConnectedOptions, o)
        self.io([x], y)

    def pool(self, kind, x, y, fh, fw, sh, sw, padding, act="NONE") -> None:
        o = schema.Pool2DOptionsT()
        o.padding = 0 if padding == "SAME" else 1
        o.filterHeight, o.filterWidth, o.strideH, o.strideW = fh, fw, sh, sw
        o.fusedActivationFunction = self._ACT[act]
        code = (schema.BuiltinOperator.AVERAGE_POOL_2D if kind == "avg"
                else schema.BuiltinOperator.MAX_POOL_2D)
        self.op(code, [x], [y], schema.BuiltinOptions.Pool2DOptions, o)
        self.io([x], y)

    def add(self, a, b, y, act="NONE") -> None:
        o = schema.AddOptionsT()
        o.fusedActivationFunction = self._ACT[act]
        self.op(schema.BuiltinOperator.ADD, [a, b], [y], schema.BuiltinOptions.AddOptions, o)
        self.io([a, b], y)

    def softmax(self, x, y, beta=1.0) -> None:
        o = schema.SoftmaxOptionsT()
        o.beta = beta
        self.op(schema.BuiltinOperator.SOFTMAX, [x], [y], schema.BuiltinOptions.SoftmaxOptions, o)
        self.io([x], y)

    def reshape(self, x, y) -> None:
        o = schema.ReshapeOptionsT()
        o.newShape = list(self.tensors[y].shape)
        self.op(schema.BuiltinOperator.RESHAPE, [x], [y], schema.BuiltinOptions.ReshapeOptions, o)
        self.io([x], y)


def _tflm(data: bytes, inputs: list[np.ndarray], n_out: int) -> list[np.ndarray]:
    it = tflm_runtime.Interpreter.from_bytes(data, arena_size=4 << 20)
    for i, x in enumerate(inputs):
        it.set_input(x, i)
    it.invoke()
    return [it.get_output(j) for j in range(n_out)]


def _compile(data: bytes, tmp: Path):
    path = tmp / "model.tflite"
    path.write_bytes(data)
    return compile_model(path)


def _random_inputs(g, rng, n) -> list[list[np.ndarray]]:
    samples = []
    for _ in range(n):
        s = []
        for t in g.inputs:
            T = g.tensors[t]
            if T.dtype == "int8":
                s.append(rng.integers(-128, 128, T.shape).astype(np.int8))
            else:
                s.append(rng.normal(0.0, 3.0, T.shape).astype(np.float32))
        samples.append(s)
    return samples


def check_against_tflm(mb: ModelBuilder, tmp: Path, samples=None, n=4, seed=0) -> list[list[np.ndarray]]:
    """Compile, run the C on the host and TFLM on the same inputs: int8 outputs identical,
    float outputs within 1e-5 relative. Returns the C outputs."""
    data = mb.build()
    c = _compile(data, tmp)
    samples = samples if samples is not None else _random_inputs(c.graph, np.random.default_rng(seed), n)
    outs = run_compiled(c, samples)
    for s, got in zip(samples, outs, strict=True):
        ref = _tflm(data, s, len(got))
        for j, (a, b) in enumerate(zip(got, ref, strict=True)):
            assert a.shape == b.shape and a.dtype == b.dtype
            if a.dtype == np.int8:
                assert np.array_equal(a, b), (f"output {j} ({c.graph.ops[j].kernel}): "
                                              f"max diff {np.abs(a.astype(int) - b).max()}")
            else:
                rel = np.abs(a - b) / np.maximum(np.abs(b), np.float32(1e-30))
                assert float(rel.max()) <= 1e-5, f"output {j}: relative error {float(rel.max())}"
    return outs


def _lowered(mb: ModelBuilder, tmp: Path):
    path = tmp / "model.tflite"
    path.write_bytes(mb.build())
    return compile_model(path).graph


# ---- generate-time arithmetic, hand-computed ---------------------------------------------------

def test_fc_weight_layout():
    # 6 rows x 5 columns (K padded to 8, 2 column groups); rows (0,1), (2,3) form a block of
    # two pairs, (4,5) a single pair: each column's pair as the int16 256*a + b, per group
    # the word (h[4g], h[4g+2]) then (h[4g+1], h[4g+3])
    w = np.arange(30, dtype=np.int8).reshape(6, 5)
    block = ([5, 0, 7, 2, 6, 1, 8, 3, 15, 10, 17, 12, 16, 11, 18, 13]  # group 0: P0 xa, xb; P1 xa, xb
             + [9, 4, 0, 0, 0, 0, 0, 0, 19, 14, 0, 0, 0, 0, 0, 0])  # group 1: column 4 and padding
    pair = [25, 20, 27, 22, 26, 21, 28, 23, 29, 24, 0, 0, 0, 0, 0, 0]
    assert pack_fc_weights_s8(w, 6).tolist() == block + pair
    # pair_rows 4: rows 4 and 5 one by one in natural order, padded to 8 bytes
    assert pack_fc_weights_s8(w, 4).tolist() == block + [20, 21, 22, 23, 24, 0, 0, 0, 25, 26, 27, 28, 29, 0, 0, 0]
    # negative pairs: 256*(-1) + (-1) = -257 = 0xFEFF, little endian (0xFF, 0xFE)
    assert pack_fc_weights_s8(np.array([[-1], [-1]], np.int8), 2).tolist() == [-1, -2, 0, 0, 0, 0, 0, 0]
    for n, k in [(1, 1), (4, 8), (7, 3), (128, 640), (13, 20)]:
        z = np.zeros((n, k), np.int8)
        assert pack_fc_weights_s8(z, n - n % 2).size == packed_size(n, k) == pack_fc_weights_s8(z, 0).size
        assert packed_size(n, k) % 4 == 0  # every block and row stays 4-byte aligned


def test_fc_pairing_and_chunk_bounds():
    # a row A weight of -128 beside a negative B weight does not fit an int16: no pairs
    assert pairable(np.array([[-128, 5], [3, 3]], np.int8))
    assert not pairable(np.array([[-128, 5], [-1, 3]], np.int8))
    assert pairable(np.array([[3, 3], [-128, -128], [1, 1]], np.int8))  # B rows and the odd row are free
    # |sum a*x| <= 128 * sum|a| must stay <= 2^23 - 1 per chunk: 127 * 128 * 4 = 65024 per group,
    # so 129 groups fit (8,388,096) and 130 do not; row B's size plays no part
    w = np.full((2, 4 * 300), 127, np.int8)
    assert chunk_groups(w, 2) == 129  # chunks of 129, 129, 42 groups
    w = np.full((2, 4 * 129), -127, np.int8)
    assert chunk_groups(w, 2) == 129  # exactly one chunk
    w = np.full((2, 4 * 130), 127, np.int8)
    assert chunk_groups(w, 2) == 129
    w[0, 4 * 100:] = 0  # only 100 groups of large weights: the whole row is one chunk
    assert chunk_groups(w, 2) == 130
    w[0, 4 * 100:] = 127
    assert chunk_groups(w, 0) == 130


def test_fc_lowering_folds_the_input_zero_point_and_uses_tflm_multiplier(tmp_path):
    mb = ModelBuilder()
    w = np.array([[1, -2, 3], [127, -127, 5]], np.int8)  # row sums 2 and 5
    x = mb.tensor((1, 3), "int8", 0.05, -7)
    wt = mb.tensor((2, 3), "int8", 0.02, 0, w)
    b = mb.tensor((2,), "int32", F32(0.05) * F32(0.02), 0, np.array([100, -100]))
    y = mb.tensor((1, 2), "int8", 0.3, 4)
    mb.fc(x, wt, b, y, "RELU6")
    g = _lowered(mb, tmp_path)
    op = g.ops[0]
    assert op.kernel == "fully_connected_s8" and op.macc == 6
    assert g.tensors[op.inputs[2]].data.tolist() == [100 + 7 * 2, -100 + 7 * 5]
    assert op.inputs[3] == op.inputs[4] == -1  # per-tensor: no tables
    m, s = quantize_multiplier(float(F32(0.05)) * float(F32(0.02)) / float(F32(0.3)))
    a = op.attrs
    assert (a["out_multiplier"], a["out_shift"], a["out_zero_point"]) == (m, s, 4)
    # RELU6: max(-128, 4 + round(0 / 0.3)) and min(127, 4 + round(6 / 0.3) = 24)
    assert (a["act_min"], a["act_max"]) == (4, 24)
    assert (a["batches"], a["in_features"], a["out_features"]) == (1, 3, 2)


def test_fc_per_channel_tables_and_no_bias(tmp_path):
    mb = ModelBuilder()
    x = mb.tensor((3, 4), "int8", 0.1, 0)
    sw = np.array([0.01, 0.02, 0.5], np.float32)
    wt = mb.tensor((3, 4), "int8", sw, [0, 0, 0], np.ones((3, 4)))
    y = mb.tensor((3, 3), "int8", 0.2, -1)
    mb.fc(x, wt, -1, y)
    g = _lowered(mb, tmp_path)
    op = g.ops[0]
    assert op.inputs[2] == -1  # no bias and input zero point 0: nothing to add
    pairs = [quantize_multiplier(float(F32(0.1)) * float(s) / float(F32(0.2))) for s in sw]
    assert g.tensors[op.inputs[3]].data.tolist() == [p[0] for p in pairs]
    assert g.tensors[op.inputs[4]].data.tolist() == [p[1] for p in pairs]
    assert op.attrs["batches"] == 3 and op.macc == 36


def test_add_params_hand_computed():
    # twice_max = 1.0: input multipliers 0.5 and 0.25, output 1 / 2^20
    p = add_params_s8(0.5, 3, 0.25, -2, 1.0, 7)
    assert (p["input1_multiplier"], p["input1_shift"]) == (1 << 30, 0)
    assert (p["input2_multiplier"], p["input2_shift"]) == (1 << 30, -1)
    assert (p["output_multiplier"], p["output_shift"]) == (1 << 30, -19)
    assert (p["input1_offset"], p["input2_offset"], p["output_offset"], p["left_shift"]) == (-3, 2, 7, 20)


def test_broadcast_strides():
    assert broadcast_strides((2, 3, 4), (2, 3, 4)) == [0, 0, 0, 12, 4, 1]
    assert broadcast_strides((4,), (2, 3, 4)) == [0, 0, 0, 0, 0, 1]
    assert broadcast_strides((3, 1), (2, 3, 4)) == [0, 0, 0, 0, 1, 0]
    assert broadcast_strides((1, 5), (5,)) == [0, 0, 0, 0, 0, 1]
    assert broadcast_strides((3,), (2, 4)) is None


def test_softmax_params_hand_computed():
    # beta * scale * 2^26 = 2^22 -> multiplier 0.5 * 2^31, shift 23;
    # radius = floor((2^5 - 1) * 2^26 / 2^23) = 248
    assert softmax_params_s8(1.0, 1 / 16) == {"input_multiplier": 1 << 30, "input_left_shift": 23,
                                              "diff_min": -248}
    # scale 1/256: shift 19, radius 31 * 2^7: every int8 difference is in range
    assert softmax_params_s8(1.0, 1 / 256)["diff_min"] == -3968
    # beta * scale >= 32 caps the real multiplier at 2^31 - 1 (TFLite's max_real_multiplier)
    p = softmax_params_s8(2.0, 40.0)
    assert (p["input_multiplier"], p["input_left_shift"]) == quantize_multiplier(2.0**31 - 1)


def test_pool_padding_matches_tflite():
    assert compute_padding(1, 7, 3, 7) == 1  # SAME 3x3 stride 1
    assert compute_padding(2, 9, 3, 5) == 1  # (4*2 + 3 - 9) / 2
    assert compute_padding(2, 8, 3, 4) == 0  # (3*2 + 3 - 8) / 2 = 0.5 -> 0, extra pad at the end
    assert compute_padding(2, 8, 2, 4) == 0  # VALID


def test_rounding_helpers_match_tflite_definitions():
    # ai_requant's numpy twin: double rounding, e.g. 1 * 0.25 -> SRDHM gives 1 (0.5 rounded up),
    # the rounding shift keeps 1 (0.5 away from zero); exact rounding would give 0
    m, s = quantize_multiplier(0.25)
    assert int(multiply_by_quantized_multiplier(1, m, s)) == 1
    assert int(multiply_by_quantized_multiplier(-1, m, s)) == 0  # SRDHM: -0.5 -> 0 (half up)


# ---- two arithmetic rules, settled against TFLite Micro --------------------------------------

def _flip_cases(n: int, rng) -> list[tuple]:
    """FC layers whose output differs between the float32 and the double scale product."""
    acc = np.arange(-3_000_000, 3_000_000, dtype=np.int64)
    cases = []
    while len(cases) < n:
        a, b, c = (F32(10 ** rng.uniform(-3, 0)) for _ in range(3))
        qf = quantize_multiplier(float(a * b) / float(c))
        qd = quantize_multiplier(float(a) * float(b) / float(c))
        if qf == qd:
            continue
        rf = multiply_by_quantized_multiplier(acc, *qf)
        rd = multiply_by_quantized_multiplier(acc, *qd)
        hit = np.nonzero((rf != rd) & (np.abs(rd) < 100))[0]
        if hit.size:
            cases.append((a, b, c, int(acc[hit[0]]), int(rd[hit[0]]), int(rf[hit[0]])))
    return cases


def test_fc_multiplier_is_the_double_product_like_tflm(tmp_path):
    """Older TFLite took input_scale * filter_scale in float32; TFLM (the verdict) computes it
    in double. Zero weights and a bias chosen where the two rules disagree: TFLM, and so the
    C, follow the double product."""
    mb = ModelBuilder()
    cases = _flip_cases(6, np.random.default_rng(5))
    for a, b, c, acc, _, _ in cases:
        x = mb.tensor((1, 3), "int8", a, 0)
        w = mb.tensor((1, 3), "int8", b, 0, np.zeros((1, 3)))
        bias = mb.tensor((1,), "int32", float(a * b), 0, np.array([acc]))
        mb.fc(x, w, bias, mb.tensor((1, 1), "int8", c, 0))
    zeros = [np.zeros((1, 3), np.int8)] * len(cases)
    ref = _tflm(mb.build(), zeros, len(cases))
    assert [int(r[0, 0]) for r in ref] == [case[4] for case in cases]
    assert all(case[4] != case[5] for case in cases)
    got = check_against_tflm(mb, tmp_path, samples=[zeros])
    assert [int(o[0, 0]) for o in got[0]] == [case[4] for case in cases]


def test_activation_clamp_divides_in_float32_like_tflm(tmp_path):
    """TFLite quantises the RELU6 / RELU_N1_TO_1 bounds as round(float(limit) / float(scale)):
    on scales where the float32 quotient rounds across .5, the double quotient is wrong."""
    rng = np.random.default_rng(2)
    mb = ModelBuilder()
    expect = []
    while len(expect) < 6:
        s = F32(rng.uniform(6 / 126, 6 / 20))
        lim, act = (6.0, "RELU6") if len(expect) % 2 == 0 else (1.0, "RELU_N1_TO_1")
        q32 = float(F32(lim) / s)
        q64 = lim / float(s)
        r32 = math.floor(q32 + 0.5)
        if r32 == math.floor(q64 + 0.5):
            continue
        zp = -128 if act == "RELU6" else -(r32 // 2)
        x = mb.tensor((1, 1), "int8", 1.0, 0)
        w = mb.tensor((1, 1), "int8", 1.0, 0, np.array([[127]]))
        mb.fc(x, w, -1, mb.tensor((1, 1), "int8", float(s), zp), act)
        expect.append(min(127, zp + r32))  # the input saturates the output at act_max
    samples = [[np.array([[127]], np.int8)] * len(expect)]
    got = check_against_tflm(mb, tmp_path, samples=samples)
    assert [int(o[0, 0]) for o in got[0]] == expect


# ---- kernels on hand-computed cases (and TFLM) ----------------------------------------------------

def test_avgpool_rounds_half_away_from_zero_over_valid_taps(tmp_path):
    mb = ModelBuilder()
    x = mb.tensor((1, 2, 2, 5), "int8", 0.1, 3)
    y = mb.tensor((1, 1, 1, 5), "int8", 0.1, 3)
    mb.pool("avg", x, y, 2, 2, 2, 2, "VALID")
    # per channel: sums -2, 2, -1, -11, 6 over 4 taps -> -0.5, 0.5, -0.25, -2.75, 1.5
    taps = np.array([[-1, 1, -1, -3, 3], [-1, 1, 0, -3, 3], [0, 0, 0, -3, 0], [0, 0, 0, -2, 0]])
    xs = taps.reshape(1, 2, 2, 5).astype(np.int8)
    got = check_against_tflm(mb, tmp_path, samples=[[xs]])[0][0]
    assert got.reshape(-1).tolist() == [-1, 1, 0, -3, 2]

    # SAME 3x3 on 2x2: every window sees the 4 valid taps only (padding is not averaged in)
    mb = ModelBuilder()
    x = mb.tensor((1, 2, 2, 1), "int8", 0.1, 0)
    y = mb.tensor((1, 2, 2, 1), "int8", 0.1, 0)
    mb.pool("avg", x, y, 3, 3, 1, 1, "SAME")
    xs = np.array([100, 100, 100, 101], np.int8).reshape(1, 2, 2, 1)  # mean 100.25
    got = check_against_tflm(mb, tmp_path, samples=[[xs]])[0][0]
    assert got.reshape(-1).tolist() == [100] * 4


def test_maxpool_with_fused_relu6(tmp_path):
    mb = ModelBuilder()
    x = mb.tensor((1, 3, 3, 2), "int8", 0.1, -10)
    y = mb.tensor((1, 2, 2, 2), "int8", 0.1, -10)
    mb.pool("max", x, y, 2, 2, 1, 1, "VALID", "RELU6")
    xs = np.array([-128, 127, -50, 0, -20, 10, -30, 5, -12, 40, -60, 20, -70, -100, -80, 3, -90, 49],
                  np.int8).reshape(1, 3, 3, 2)
    got = check_against_tflm(mb, tmp_path, samples=[[xs]])[0][0]
    # clamp to [zp, zp + 6 / 0.1] = [-10, 50]
    want = np.maximum(np.maximum(xs[:, :-1, :-1], xs[:, 1:, :-1]), np.maximum(xs[:, :-1, 1:], xs[:, 1:, 1:]))
    assert np.array_equal(got, np.clip(want, -10, 50))


def test_fc_double_rounding_hand_computed(tmp_path):
    # real multiplier 0.5 * 0.5 / 1 = 0.25; bias b, zero weights: out = requant(b)
    biases = [1, -1, 2, -2, 3, 6, -6, 10]
    mb = ModelBuilder()
    x = mb.tensor((1, 2), "int8", 0.5, 0)
    w = mb.tensor((8, 2), "int8", 0.5, 0, np.zeros((8, 2)))
    b = mb.tensor((8,), "int32", 0.25, 0, np.array(biases))
    mb.fc(x, w, b, mb.tensor((1, 8), "int8", 1.0, 0))
    got = check_against_tflm(mb, tmp_path, samples=[[np.zeros((1, 2), np.int8)]])[0][0]
    # (b/2 rounded half up) then /2 rounded half away: 1 -> 1 -> 1, -1 -> 0 -> 0, 2 -> 1 -> 1,
    # -2 -> -1 -> -1, 3 -> 2 -> 1, 6 -> 3 -> 2, -6 -> -3 -> -2, 10 -> 5 -> 3
    assert got.reshape(-1).tolist() == [1, 0, 1, -1, 1, 2, -2, 3]


def test_add_equal_scales_is_exact_integer_addition(tmp_path):
    # all scales 1/8: the rescalings are exact, out = clamp(x1 - z1 + x2 - z2 + zo)
    mb = ModelBuilder()
    a = mb.tensor((2, 9), "int8", 0.125, 5)
    b = mb.tensor((2, 9), "int8", 0.125, -3)
    mb.add(a, b, mb.tensor((2, 9), "int8", 0.125, -20))
    rng = np.random.default_rng(1)
    x1 = rng.integers(-128, 128, (2, 9)).astype(np.int8)
    x2 = rng.integers(-128, 128, (2, 9)).astype(np.int8)
    got = check_against_tflm(mb, tmp_path, samples=[[x1, x2]])[0][0]
    assert np.array_equal(got, np.clip(x1.astype(int) - 5 + x2.astype(int) + 3 - 20, -128, 127))


def test_softmax_hand_computed(tmp_path):
    mb = ModelBuilder()
    x = mb.tensor((3, 4), "int8", 1.0, 0)
    mb.softmax(x, mb.tensor((3, 4), "int8", 1 / 256, -128))
    xs = np.array([[7, 7, 7, 7],            # four equal: 1/4 -> 64 - 128 = -64
                   [127, -128, -128, -128],  # others beyond diff_min: 1.0 saturates at 127
                   [0, 0, -128, -128]], np.int8)
    got = check_against_tflm(mb, tmp_path, samples=[[xs]])[0][0]
    assert got.tolist() == [[-64] * 4, [127, -128, -128, -128], [0, 0, -128, -128]]


def test_reshape_is_an_alias_or_a_copy(tmp_path):
    mb = ModelBuilder()
    x = mb.tensor((1, 6), "int8", 0.1, 0)
    mb.reshape(x, mb.tensor((2, 3), "int8", 0.1, 0))  # graph input -> graph output: a copy
    g = _lowered(mb, tmp_path)
    assert g.ops[0].kernel == "copy" and g.ops[0].attrs == {"size": 6}
    xs = np.arange(6, dtype=np.int8).reshape(1, 6)
    got = check_against_tflm(mb, tmp_path, samples=[[xs]])[0][0]
    assert got.tolist() == [[0, 1, 2], [3, 4, 5]]

    mb = ModelBuilder()  # softmax -> reshape -> softmax: the reshape is free
    x = mb.tensor((1, 2, 3), "int8", 0.1, 0)
    s1 = mb.tensor((1, 2, 3), "int8", 1 / 256, -128)
    r = mb.tensor((3, 2), "int8", 1 / 256, -128)
    y = mb.tensor((3, 2), "int8", 1 / 256, -128)
    mb.softmax(x, s1)
    mb.reshape(s1, r)
    mb.softmax(r, y)
    g = _lowered(mb, tmp_path)
    assert [op.kernel for op in g.ops] == ["softmax_s8", "__nop", "softmax_s8"]
    check_against_tflm(mb, tmp_path, n=3)


# ---- refusals ---------------------------------------------------------------------------------------

def _reason(mb: ModelBuilder, tmp: Path) -> str | None:
    path = tmp / "model.tflite"
    path.write_bytes(mb.build())
    g = load_tflite(path)
    fold_constants(g)
    canonicalize(g)
    op = g.ops[0]
    return registry()[op.type].check(op, g)


def test_refuses_what_it_cannot_compute_exactly(tmp_path):
    cases = {}
    mb = ModelBuilder()  # hybrid (float input, int8 weights) with asymmetric weights
    mb.fc(mb.tensor((1, 4), "float32"), mb.tensor((2, 4), "int8", 0.1, 3, np.ones((2, 4))), -1,
          mb.tensor((1, 2), "float32"))
    cases["hybrid"] = (mb, "hybrid")
    mb = ModelBuilder()  # asymmetric weights
    mb.fc(mb.tensor((1, 4), "int8", 0.1, 0), mb.tensor((2, 4), "int8", 0.1, 3, np.ones((2, 4))), -1,
          mb.tensor((1, 2), "int8", 0.1, 0))
    cases["weight_zp"] = (mb, "zero point")
    mb = ModelBuilder()  # weights and bias computed at run time (run-time weights: matmul.py; a bias must be constant)
    mb.fc(mb.tensor((1, 4), "int8", 0.1, 0), mb.tensor((2, 4), "int8", 0.1, 0), mb.tensor((2,), "int32", 0.01, 0),
          mb.tensor((1, 2), "int8", 0.1, 0))
    cases["runtime_bias"] = (mb, "constant bias")
    mb = ModelBuilder()  # TANH is not a fusable clamp
    mb.fc(mb.tensor((1, 4), "int8", 0.1, 0), mb.tensor((2, 4), "int8", 0.1, 0, np.ones((2, 4))), -1,
          mb.tensor((1, 2), "int8", 0.1, 0), "TANH")
    cases["tanh"] = (mb, "TANH")
    mb = ModelBuilder()  # softmax output must be 1/256, -128
    mb.softmax(mb.tensor((1, 4), "int8", 0.1, 0), mb.tensor((1, 4), "int8", 1 / 128, -128))
    cases["softmax_scale"] = (mb, "1/256")
    mb = ModelBuilder()  # int16 softmax with a zero point (16x8 needs 0)
    mb.softmax(mb.tensor((1, 4), "int16", 0.1, 3), mb.tensor((1, 4), "int16", 1 / 32768, 0))
    cases["softmax_int16"] = (mb, "int16")
    mb = ModelBuilder()  # pooling may not requantise
    mb.pool("avg", mb.tensor((1, 4, 4, 1), "int8", 0.1, 0), mb.tensor((1, 2, 2, 1), "int8", 0.2, 0),
            2, 2, 2, 2, "VALID")
    cases["pool_requant"] = (mb, "same scale")
    mb = ModelBuilder()  # int16 ADD with a zero point (16x8 needs 0)
    mb.add(mb.tensor((4,), "int16", 0.1, 2), mb.tensor((4,), "int16", 0.1, 0), mb.tensor((4,), "int16", 0.1, 0))
    cases["add_int16"] = (mb, "zero point 0")
    mb = ModelBuilder()  # incompatible broadcast
    mb.add(mb.tensor((2, 3), "float32"), mb.tensor((3, 2), "float32"), mb.tensor((2, 3), "float32"))
    cases["add_shapes"] = (mb, "broadcast")
    mb = ModelBuilder()  # output scale too small for TFLite's int8 ADD
    mb.add(mb.tensor((4,), "int8", 1.0, 0), mb.tensor((4,), "int8", 1.0, 0), mb.tensor((4,), "int8", 1e-7, 0))
    cases["add_out_scale"] = (mb, "too small")
    for name, (mb, needle) in cases.items():
        reason = _reason(mb, tmp_path)
        assert reason is not None and needle in reason, f"{name}: {reason!r}"


def test_unsupported_model_fails_with_one_clear_message(tmp_path):
    mb = ModelBuilder()  # hybrid FULLY_CONNECTED with a non-zero weight zero point
    mb.fc(mb.tensor((1, 4), "float32"), mb.tensor((2, 4), "int8", 0.1, 3, np.ones((2, 4))), -1,
          mb.tensor((1, 2), "float32"))
    path = tmp_path / "hybrid.tflite"
    path.write_bytes(mb.build())
    with pytest.raises(UnsupportedModelError, match="FULLY_CONNECTED.*hybrid"):
        compile_model(path)


# ---- randomised single-op models against TFLM ---------------------------------------------------

def _qs(rng, lo=-3.0, hi=0.0) -> float:
    return float(F32(10 ** rng.uniform(lo, hi)))


def _fc_layer(mb, rng, dtype) -> None:
    batches, k, n = int(rng.integers(1, 4)), int(rng.integers(1, 70)), int(rng.integers(1, 23))
    act = ACTS[int(rng.integers(0, 4))]
    if dtype == "float32":
        x = mb.tensor((batches, k), "float32")
        w = mb.tensor((n, k), "float32", data=rng.normal(0, 1, (n, k)))
        b = mb.tensor((n,), "float32", data=rng.normal(0, 1, n)) if rng.random() < 0.7 else -1
        mb.fc(x, w, b, mb.tensor((batches, n), "float32"), act)
        return
    per_ch = rng.random() < 0.5
    sx = _qs(rng)
    sw = (10 ** rng.uniform(-3, -1, n)).astype(np.float32) if per_ch else F32(10 ** rng.uniform(-3, -1))
    keep = rng.random() < 0.3
    x = mb.tensor((batches, 2, k) if keep else (batches, k), "int8", sx, int(rng.integers(-128, 128)))
    nz = n if per_ch else 1
    w = mb.tensor((n, k), "int8", sw, np.zeros(nz, int), rng.integers(-127, 128, (n, k)))
    bscale = (F32(sx) * np.atleast_1d(sw)).astype(np.float32)
    b = (mb.tensor((n,), "int32", bscale, np.zeros(nz, int), rng.integers(-20000, 20000, n))
         if rng.random() < 0.8 else -1)
    y = mb.tensor((batches, 2, n) if keep else (batches, n), "int8", 3 * _qs(rng), int(rng.integers(-128, 128)))
    mb.fc(x, w, b, y, act, keep)


def _pool_layer(mb, rng, dtype) -> None:
    h, w, c = int(rng.integers(1, 12)), int(rng.integers(1, 12)), int(rng.integers(1, 40))
    fh, fw, sh, sw = (int(v) for v in (rng.integers(1, 5), rng.integers(1, 5), rng.integers(1, 4),
                                       rng.integers(1, 4)))
    pad = "SAME" if rng.random() < 0.5 else "VALID"
    if pad == "VALID":
        h, w = max(h, fh), max(w, fw)
        oh, ow = (h - fh + sh) // sh, (w - fw + sw) // sw
    else:
        oh, ow = (h + sh - 1) // sh, (w + sw - 1) // sw
    q = (_qs(rng), int(rng.integers(-128, 128))) if dtype == "int8" else (None, None)
    x = mb.tensor((1, h, w, c), dtype, *q)
    y = mb.tensor((1, oh, ow, c), dtype, *q)
    mb.pool("avg" if rng.random() < 0.5 else "max", x, y, fh, fw, sh, sw, pad, ACTS[int(rng.integers(0, 4))])


def _add_layer(mb, rng, dtype) -> None:
    shape = tuple(int(v) for v in rng.integers(1, 6, int(rng.integers(1, 5))))
    r = rng.random()
    bshape = (tuple(d if rng.random() < 0.5 else 1 for d in shape) if r < 0.35
              else shape[1:] if r < 0.5 and len(shape) > 1 else shape)

    def q(mul=1.0):
        return (mul * _qs(rng), int(rng.integers(-128, 128))) if dtype == "int8" else (None, None)

    a, b = mb.tensor(shape, dtype, *q()), mb.tensor(bshape, dtype, *q())
    if rng.random() < 0.5:
        a, b = b, a
    mb.add(a, b, mb.tensor(shape, dtype, *q(2.0)), ACTS[int(rng.integers(0, 4))])


def _softmax_layer(mb, rng, dtype) -> None:
    shape = tuple(int(v) for v in rng.integers(1, 12, int(rng.integers(1, 4))))
    beta = float(F32(rng.choice([1.0, 0.5, 2.0, rng.uniform(0.1, 5)])))
    if dtype == "int8":
        x = mb.tensor(shape, "int8", _qs(rng, -2.5, 0.5), int(rng.integers(-128, 128)))
        y = mb.tensor(shape, "int8", 1 / 256, -128)
    else:
        x, y = mb.tensor(shape, "float32"), mb.tensor(shape, "float32")
    mb.softmax(x, y, beta)


LAYER_MAKERS = {"fc": _fc_layer, "pool": _pool_layer, "add": _add_layer, "softmax": _softmax_layer}


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("kind", list(LAYER_MAKERS))
def test_random_layers_match_tflite_micro(kind, dtype, tmp_path):
    rng = np.random.default_rng([*LAYER_MAKERS].index(kind) * 2 + (dtype == "int8"))
    for model in range(3):
        mb = ModelBuilder()
        for _ in range(4):  # four independent layers per model (the runtime takes <= 8 I/O)
            LAYER_MAKERS[kind](mb, rng, dtype)
        check_against_tflm(mb, tmp_path, n=4, seed=model)


def test_softmax_extreme_scales_and_depths(tmp_path):
    rng = np.random.default_rng(11)
    for scale, beta in [(1e-4, 1.0), (0.01, 0.3), (1.0, 1.0), (40.0, 1.0), (0.05, 1e3)]:
        mb = ModelBuilder()
        for depth in (1, 2, 7, 256):
            mb.softmax(mb.tensor((3, depth), "int8", float(F32(scale)), int(rng.integers(-128, 128))),
                       mb.tensor((3, depth), "int8", 1 / 256, -128), beta)
        check_against_tflm(mb, tmp_path, n=3, seed=int(scale * 1000))


def test_avgpool_four_channel_lanes_at_their_limits(tmp_path):
    """Channel counts that are multiples of 4 take the int16-lane sums (SXTAB16) for windows of
    at most 256 taps: all -128 / all 127 over exactly 256 taps are the lanes' extremes (-32768,
    32512); 289 taps take the int32 path. Against TFLite Micro."""
    rng = np.random.default_rng(7)
    mb = ModelBuilder()
    for h, w, f, s, pad, ch in [(16, 16, (16, 16), 1, "VALID", 8), (17, 17, (17, 17), 1, "VALID", 4),
                                (25, 5, (25, 5), 1, "VALID", 64), (9, 9, (4, 4), 3, "SAME", 12)]:
        oh, ow = ((h - f[0] + s) // s, (w - f[1] + s) // s) if pad == "VALID" else ((h + s - 1) // s, (w + s - 1) // s)
        mb.pool("avg", mb.tensor((1, h, w, ch), "int8", 0.03, 0), mb.tensor((1, oh, ow, ch), "int8", 0.03, 0),
                f[0], f[1], s, s, pad, "NONE")
    c = _compile(mb.build(), tmp_path)
    shapes = [c.graph.tensors[t].shape for t in c.graph.inputs]
    samples = [[np.full(sh, v, np.int8) for sh in shapes] for v in (-128, 127)]
    samples += [[rng.integers(-128, 128, sh).astype(np.int8) for sh in shapes] for _ in range(2)]
    check_against_tflm(mb, tmp_path, samples=samples)


def test_avgpool_large_windows_negative_inputs(tmp_path):
    rng = np.random.default_rng(4)
    mb = ModelBuilder()
    for h, w, f, s, pad in [(25, 5, (25, 5), 1, "VALID"), (9, 9, (4, 4), 3, "SAME"), (16, 16, (16, 16), 1, "SAME")]:
        zp = int(rng.integers(-128, 128))
        oh, ow = ((h - f[0] + s) // s, (w - f[1] + s) // s) if pad == "VALID" else ((h + s - 1) // s, (w + s - 1) // s)
        mb.pool("avg", mb.tensor((1, h, w, 37), "int8", 0.03, zp), mb.tensor((1, oh, ow, 37), "int8", 0.03, zp),
                f[0], f[1], s, s, pad, "RELU")
    c = _compile(mb.build(), tmp_path)
    samples = [[np.clip(rng.normal(-60, 50, c.graph.tensors[t].shape), -128, 127).astype(np.int8)
                for t in c.graph.inputs] for _ in range(4)]
    check_against_tflm(mb, tmp_path, samples=samples)


# ---- whole models -------------------------------------------------------------------------------------

BASIC_OPS = {"FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D", "ADD", "SOFTMAX", "RESHAPE"}
FIXTURE_MODELS = [p for p in sorted(FIXTURES.glob("*.tflite"))
                  if p.stem.split("_")[0] in ("dense", "avgpool", "maxpool", "classifier", "add", "two")
                  and "infer" not in p.stem]
REAL_MODELS = ["tflite_micro/hello_world_int8.tflite", "tflite_micro/hello_world_float.tflite",
               "mlperf_tiny/ad01_int8.tflite", "mlperf_tiny/ad01_fp32.tflite",
               "mlperf_tiny/kws_ref_model.tflite", "mlperf_tiny/pretrainedResnet_quant.tflite",
               "mlperf_tiny/pretrainedResnet.tflite", "tflite_micro/micro_speech_quantized.tflite"]


def _model_matches_tflm(path: Path, n: int = 5) -> None:
    c = compile_model(path)
    g = c.graph
    assert {op.type for op in g.ops} & {"FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D", "ADD", "SOFTMAX"}
    samples = _random_inputs(g, np.random.default_rng(7), n)
    outs = run_compiled(c, samples)
    for s, got in zip(samples, outs, strict=True):
        it = tflm_runtime.Interpreter.from_file(str(path), arena_size=8 << 20)
        for i, x in enumerate(s):
            it.set_input(x, i)
        it.invoke()
        for j, a in enumerate(got):
            b = it.get_output(j)
            if a.dtype == np.int8:
                assert np.array_equal(a, b), f"{path.name} output {j}"
            else:
                rel = np.abs(a - b) / np.maximum(np.abs(b), np.float32(1e-30))
                assert float(rel.max()) <= 1e-5, f"{path.name} output {j}: {float(rel.max())}"


@pytest.mark.parametrize("path", FIXTURE_MODELS, ids=[p.stem for p in FIXTURE_MODELS])
def test_fixture_model_matches_tflite_micro(path):
    _model_matches_tflm(path)


@pytest.mark.parametrize("rel", REAL_MODELS, ids=[Path(r).stem for r in REAL_MODELS])
def test_real_model_matches_tflite_micro(rel):
    # ad01_int8 is the model where LiteRT-ref's single rounding differs from TFLM (docs/references.md)
    _model_matches_tflm(shared_model(rel))


# ---- C hygiene and the Cortex-M4 DSP path -------------------------------------------------------

def test_kernels_compile_warning_free(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    for src in BASIC_SOURCES:
        r = subprocess.run([cc, *WARN, "-Wconversion", f"-I{RUNTIME / 'include'}", "-c", str(src),
                            "-o", str(tmp_path / (src.stem + ".o"))], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    for src in BASIC_SOURCES:
        obj = tmp_path / (src.stem + ".m4.o")
        r = subprocess.run(["arm-none-eabi-gcc", *WARN, *M4, f"-I{RUNTIME / 'include'}", "-c", str(src),
                            "-o", str(obj)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        if src.stem == "ai_fc":
            dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True).stdout
            assert "smlad" in dis and "sxtb16" in dis  # the DSP path is the one compiled


def _c_array(name: str, ctype: str, v, align: str = "") -> str:
    vals = ", ".join(str(int(t)) for t in np.asarray(v).reshape(-1)) or "0"
    return f"static const {ctype} {name}[{max(np.asarray(v).size, 1)}]{align} = {{{vals}}};"


def _fc_selftest_source(rng, n_layers: int) -> tuple[str, list[np.ndarray]]:
    """C program running random FC layers (weights packed by the compiler's own packer) and
    printing every output byte; also returns the expected outputs from a numpy transcription
    of TFLM's FullyConnected (input offset, int32 accumulation, double-rounding requant)."""
    lines = ['#include <stdio.h>', '#include "ai_kernels_fc.h"', "static int8_t out[8192];",
             "static uint32_t xscratch[1100];"]
    calls, expect = [], []
    for i in range(n_layers):
        batches, k, n = int(rng.integers(1, 4)), int(rng.integers(1, 90)), int(rng.integers(1, 26))
        kind = i % 5
        # per-tensor, fast, full-range output, K % 4 == 0 and a bias: the Cortex-M4 build's
        # whole-block routine (fc_blocks4_m4); n >= 4 so it runs
        simple = kind == 2 and i % 2 == 0
        if simple:
            k, n = 4 * int(rng.integers(1, 40)), int(rng.integers(4, 26))
        if kind == 3:  # long rows of large weights: several exact recoveries per paired row
            k, n, batches = int(rng.integers(520, 1100)), int(rng.integers(1, 10)), 1
        w = rng.integers(-127, 128, (n, k)).astype(np.int8)
        if kind == 3:
            w = np.where(w >= 0, 127, -127).astype(np.int8)
        if kind == 4:  # -128 beside negative weights: no pairs, every row alone
            w[0, 0], w[1 % n, 0] = -128, -5
        x = rng.integers(-128, 128, (batches, k)).astype(np.int8)
        if kind == 3:  # inputs that drive sum(a*x) to its bound
            x = np.where(w[:1] >= 0, 127, -128).astype(np.int8).repeat(batches, 0)
        bias = rng.integers(-(1 << 20), 1 << 20, n).astype(np.int64)
        per_ch = rng.random() < 0.5 and not simple
        mult = rng.integers(1 << 30, (1 << 31) - 1, n if per_ch else 1).astype(np.int64)
        # fast requantisation (every shift <= -2) on even layers, the general path on odd ones
        shift = rng.integers(-12, -1 if i % 2 == 0 else 2, n if per_ch else 1).astype(np.int64)
        zp = int(rng.integers(-128, 128))
        lo = int(rng.integers(-128, 0))
        hi = int(rng.integers(lo, 128))
        if simple:
            lo, hi = -128, 127
        acc = x.astype(np.int64) @ w.astype(np.int64).T + bias
        acc = ((acc + (1 << 31)) % (1 << 32)) - (1 << 31)
        y = multiply_by_quantized_multiplier(acc, mult, shift) + zp
        expect.append(np.clip(y, lo, hi).astype(np.int8).reshape(-1))
        pair_rows = n - n % 2 if pairable(w) else 0
        pw = pack_fc_weights_s8(w, pair_rows)
        fast = int(bool((shift <= -2).all()))

        lines += [_c_array(f"w{i}", "int8_t", pw, " __attribute__((aligned(4)))"),
                  _c_array(f"x{i}", "int8_t", x), _c_array(f"b{i}", "int32_t", bias)]
        if per_ch:
            lines += [_c_array(f"m{i}", "int32_t", mult), _c_array(f"s{i}", "int32_t", shift)]
        lines.append(f"static const ai_fully_connected_s8_params p{i} = {{ .batches = {batches}, "
                     f".in_features = {k}, .out_features = {n}, .out_multiplier = {int(mult[0])}, "
                     f".out_shift = {int(shift[0])}, .out_zero_point = {zp}, .act_min = {lo}, "
                     f".act_max = {hi}, .pair_rows = {pair_rows}, "
                     f".chunk_groups = {chunk_groups(w, pair_rows)}, .fast_requant = {fast} }};")
        tables = f"m{i}, s{i}" if per_ch else "NULL, NULL"
        call = (f"ai_fully_connected_s8_x16(&p{i}, x{i}, w{i}, b{i}, out, xscratch)" if simple and i % 4 == 2
                else f"ai_fully_connected_s8(&p{i}, x{i}, w{i}, b{i}, {tables}, out)")
        calls.append(f"  {call};\n"
                     f"  for (int j = 0; j < {batches * n}; j++) printf(\"%d \", out[j]);\n"
                     "  printf(\"\\n\");")
    lines += ["int main(void) {", *calls, "  return 0;", "}"]
    return "\n".join(lines) + "\n", expect




def test_fc_kernel_host_path_matches_numpy_transcription(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    src, expect = _fc_selftest_source(np.random.default_rng(21), 60)
    (tmp_path / "fc.c").write_text(src)
    subprocess.run([cc, *WARN, f"-I{RUNTIME / 'include'}", "fc.c", str(RUNTIME / "src" / "ai_fc.c"),
                    "-o", "fc"], cwd=tmp_path, check=True)
    out = subprocess.run([str(tmp_path / "fc")], capture_output=True, text=True, check=True).stdout
    got = [np.array(line.split(), dtype=int) for line in out.strip().splitlines()]
    assert len(got) == len(expect)
    for i, (a, b) in enumerate(zip(got, expect, strict=True)):
        assert np.array_equal(a, b), f"layer {i}"


@pytest.mark.slow
@pytest.mark.parametrize("defines", [[], ["-DAI_CORE_CM7=1"]], ids=["m4", "cm7-paths"])
def test_fc_dsp_path_on_cortex_m4_matches_host_path(tmp_path, defines):
    """The same random layers through the SMLAD/SXTB16 code on an emulated Cortex-M4 and
    through the portable C on the host (checked against numpy above): identical. `cm7-paths`:
    the block loop a Cortex-M7 build takes (AI_CORE_CM7), plain Armv7E-M, on the emulated M4."""
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "cc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    src, expect = _fc_selftest_source(np.random.default_rng(22), 80)
    (tmp_path / "fc.c").write_text(src)
    (tmp_path / "startup.c").write_text(STARTUP_C)
    (tmp_path / "mps2.ld").write_text(MPS2_LD)
    inc, fc = f"-I{RUNTIME / 'include'}", str(RUNTIME / "src" / "ai_fc.c")
    r = subprocess.run(["arm-none-eabi-gcc", *WARN, *M4, *defines, inc, "--specs=rdimon.specs", "-T",
                        "mps2.ld", "fc.c", "startup.c", fc, "-o", "fw.elf"], cwd=tmp_path, capture_output=True,
                       text=True)
    if r.returncode != 0 and "rdimon" in r.stderr:
        pytest.skip("newlib's rdimon (semihosting) library is not installed")
    assert r.returncode == 0, r.stderr
    subprocess.run(["cc", *WARN, inc, "fc.c", fc, "-o", "host"], cwd=tmp_path, check=True)
    host = subprocess.run([str(tmp_path / "host")], capture_output=True, text=True, check=True).stdout
    arm = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-monitor", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", "fw.elf"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    assert len(host.strip().splitlines()) == len(expect)
    assert arm.replace("\r", "") == host
