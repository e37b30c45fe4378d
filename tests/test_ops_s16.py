"""16x8 quantisation (int16 activations, int8 weights, int64 bias): converter-made fixtures
against TFLite Micro, kernel edge cases against numpy models of TFLite's arithmetic, the
support checks' refusals, and the DS-CNN on the emulated board. See docs/kernels_s16.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, fixture_models

from stm32ai.ir import Graph, Op, Quant, Tensor
from stm32ai.passes.lower import registry
from stm32ai.passes.lower.s16 import checked_log2, lut_act_params_s16, softmax_luts_s16
from stm32ai.passes.quant import per_channel_multiplier, quantize_multiplier
from stm32ai.pipeline import compile_graph
from stm32ai.validate.host import run_compiled
from stm32ai.validate.reference import input_specs
from stm32ai.validate.run import validate_model

# (act_logistic_16x8_int16 and reduce_mean_16x8_int16 are validated with their families' fixtures)
MODELS = fixture_models("s16_*.tflite")
FULL_RANGE = ("s16_logistic_all_int16", "s16_tanh_all_int16")


def _inputs(model: Path, seed: int) -> list[np.ndarray] | None:
    """Every int16 value once for the one-activation fixtures (in a seeded order); the
    default (full-range uniform) inputs otherwise."""
    if model.stem not in FULL_RANGE:
        return None
    (spec,) = input_specs(model)
    flat = np.arange(-32768, 32768, dtype=np.int16)
    np.random.default_rng(seed).shuffle(flat)
    return [flat.reshape(-1, *spec.shape[1:])]


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_fixture_matches_tflm(model):
    res = validate_model(model, _inputs(model, 7), n=6, seed=7)
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict and verdict[0].reference == "tflm", [(c.reference, c.unavailable) for c in res.comparisons]
    for j, (m, ok) in enumerate(zip(verdict[0].outputs, verdict[0].ok, strict=True)):
        assert ok, f"output {j}: max LSB {m.max_lsb}, max rel err {m.max_rel_err:.3g}"
        assert m.max_lsb in (0, None)


def test_fixture_set_covers_the_ops():
    from stm32ai.frontend.tflite_reader import load_tflite

    seen = {op.type for m in MODELS for op in load_tflite(m).ops}
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D", "SOFTMAX",
            "ADD", "SUB", "MUL", "MEAN", "LOGISTIC", "TANH", "QUANTIZE", "DEQUANTIZE", "CONCATENATION",
            "PAD", "RESHAPE"} <= seen
    assert all(m.stat().st_size < 50_000 for m in MODELS)


# ---- kernels against numpy models of TFLite's arithmetic ---------------------------------------

def _q(scale: float, zp: int = 0, axis: int = 0) -> Quant:
    s = np.atleast_1d(np.asarray(scale, np.float32))
    return Quant(s, np.zeros(s.size, np.int64) + zp, axis)


def _mbqm64(acc: np.ndarray, real: np.ndarray) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier(int64_t, ...), written from its definition."""
    out = []
    for a, r in zip(acc.ravel(), np.broadcast_to(real, acc.shape).ravel(), strict=True):
        m, s = quantize_multiplier(float(r))
        rm = (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF
        ts = 15 - s
        out.append((int(a) * rm + (1 << (ts - 1))) >> ts)
    return np.array(out, np.int64).reshape(acc.shape)


def _run(g: Graph, *xs: np.ndarray) -> np.ndarray:
    c = compile_graph(g, "network")
    (y,) = run_compiled(c, [list(xs)])[0]
    return np.asarray(y)


def _fc_graph(x: np.ndarray, w: np.ndarray, bias: np.ndarray, sx: float, sw: float, sy: float) -> Graph:
    t = [Tensor(0, "x", x.shape, "int16", _q(sx)), Tensor(1, "w", w.shape, "int8", _q(sw), w),
         Tensor(2, "b", bias.shape, "int64", _q(sx * sw), bias),
         Tensor(3, "y", (x.shape[0], w.shape[0]), "int16", _q(sy))]
    return Graph("fc", t, [Op("FULLY_CONNECTED", [0, 1, 2], [3], {"fused_activation_function": "NONE"}, 0)],
                 [0], [3])


@pytest.mark.parametrize("k", [3, 257, 1000])
def test_fc_extremes(k):
    """Every product at its largest (-32768 * -128 = 2^22) over long rows: the kernel's int32
    partial sums and the int64 accumulator must agree with the plain int64 sum."""
    rng = np.random.default_rng(k)
    x = np.full((1, k), -32768, np.int16)
    x[0, 1::3] = 32767
    w = np.full((3, k), -128, np.int8)
    w[1] = rng.integers(-128, 128, k)
    w[2, ::2] = 127
    bias = np.array([1 << 40, -(1 << 39), 12345], np.int64)
    sx, sw, sy = 1e-4, 0.02, 600.0 * k * 1e-4
    y = _run(_fc_graph(x, w, bias, sx, sw, sy), x)
    acc = x.astype(np.int64) @ w.astype(np.int64).T + bias
    want = np.clip(_mbqm64(acc, per_channel_multiplier(sx, sw, sy)), -32768, 32767)
    np.testing.assert_array_equal(y.reshape(-1), want.reshape(-1))


def test_softmax_tables_shape_and_ends():
    """exp(0) = 1 and 1 / (1 + 0) = 1 are the tables' top entries in Q0.15 (saturated at
    32767); exp(-10) and 1/2 their bottom ones; both are monotonic, as TFLite's."""
    exp_lut, recip = softmax_luts_s16()
    assert exp_lut.shape == recip.shape == (513,)
    assert exp_lut[-1] == 32767 and abs(int(exp_lut[0]) - round(np.exp(-10) * 32768)) <= 1
    assert recip[0] == 32767 and abs(int(recip[-1]) - 16384) <= 1
    assert np.all(np.diff(exp_lut.astype(np.int32)) >= 0) and np.all(np.diff(recip.astype(np.int32)) <= 0)


def test_lut_act_params():
    assert checked_log2(2.0 ** -12) == (-12, True)
    assert checked_log2(3 / 32767)[1] is False
    assert lut_act_params_s16(2.0 ** -12) == (3, 0)    # power of two, left shift 0
    assert lut_act_params_s16(2.0 ** -11) == (6, 0)    # left shift 1
    m, s = lut_act_params_s16(3 / 32767)               # general: 3 * 4096 * scale, doubled into 16384..32767
    assert 16384 <= m <= 32767 and m == int(3 / 32767 * 4096 * 3 * 2 ** s)


# ---- refusals ---------------------------------------------------------------------------------

def _check(g: Graph) -> str | None:
    op = g.ops[0]
    return registry()[op.type].check(op, g)


def test_refusals_name_the_reason():
    x = np.zeros((1, 4), np.int16)
    w = np.ones((2, 4), np.int8)
    g = _fc_graph(x, w, np.zeros(2, np.int64), 0.01, 0.01, 0.01)
    assert _check(g) is None
    g.tensors[2] = Tensor(2, "b", (2,), "int32", _q(1e-4), np.zeros(2, np.int32))
    assert _check(g) is None  # int32 bias: TFLite's 32-bit requantisation (s16_bias32 fixture)
    g.tensors[2] = Tensor(2, "b", (2,), "int16", _q(1e-4), np.zeros(2, np.int16))
    assert "int64" in _check(g)
    g = _fc_graph(x, w, np.zeros(2, np.int64), 0.01, 0.01, 0.01)
    g.tensors[0].quant = _q(0.01, 5)
    assert "zero point 0" in _check(g)
    add = Graph("add", [Tensor(0, "a", (1, 3), "int16", _q(0.01)), Tensor(1, "b", (1, 3), "int8", _q(0.01)),
                        Tensor(2, "y", (1, 3), "int16", _q(0.02))],
                [Op("ADD", [0, 1], [2], {}, 0)], [0, 1], [2])
    assert "int16 inputs and outputs" in _check(add)
    mul = Graph("mul", [Tensor(0, "a", (1, 3), "int16", _q(0.1)), Tensor(1, "b", (1, 3), "int16", _q(0.1)),
                        Tensor(2, "y", (1, 3), "int16", _q(1e-4))],
                [Op("MUL", [0, 1], [2], {}, 0)], [0, 1], [2])
    assert "overflow" in _check(mul)
    mul.tensors[2].quant = _q(0.02)
    assert _check(mul) is None
    q = Graph("q", [Tensor(0, "x", (4,), "int16", _q(1.0)), Tensor(1, "y", (4,), "int8", _q(1e-5, 3))],
              [Op("QUANTIZE", [0], [1], {}, 0)], [0], [1])
    assert "overflow" in _check(q)
    q.tensors[1].quant = _q(0.01, 3)
    assert _check(q) is None


def test_accumulator_bound_refuses_overflow(tmp_path):
    """A bias near 2^47 lets the int64 accumulator times the 16-bit multiplier overflow:
    the verifier refuses the model (exit 2, one line) instead of emitting it."""
    from stm32ai.errors import Stm32aiError
    from stm32ai.passes.verify import verify_accumulators

    x = np.zeros((1, 4), np.int16)
    g = _fc_graph(x, np.ones((2, 4), np.int8), np.array([1 << 47, 0], np.int64), 0.01, 0.01, 0.01)
    with pytest.raises(Stm32aiError, match="accumulator"):
        verify_accumulators(g)


def test_supported_ops_lists_int16():
    out = subprocess.run([sys.executable, "-m", "stm32ai", "supported-ops"], capture_output=True, text=True,
                         check=True).stdout
    for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "SOFTMAX", "ADD", "QUANTIZE", "LOGISTIC"):
        line = next(ln for ln in out.splitlines() if ln.split()[:1] == [op])
        assert "int16" in line, line


# ---- the DS-CNN on the emulated board ----------------------------------------------------------

@pytest.mark.slow
def test_ds_cnn_on_netduinoplus2(tmp_path):
    import shutil

    if not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")):
        pytest.skip("needs arm-none-eabi-gcc and qemu-system-arm")
    proj = tmp_path / "p"
    cmd = [sys.executable, "-m", "stm32ai"]
    subprocess.run([*cmd, "generate", str(FIXTURES / "s16_ds_cnn_int16.tflite"), "--board", "qemu-netduinoplus2",
                    "-o", str(proj)], check=True, capture_output=True, timeout=600)
    r = subprocess.run([*cmd, "run", str(proj)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "result: match" in r.stdout and "max_err: 0" in r.stdout, r.stdout


def test_scratch_sizes_match_the_c_queries(tmp_path):
    """op.scratch (Python) equals ai_<kernel>_scratch_size() of the emitted params."""
    from conftest import c_scratch_sizes

    from stm32ai.pipeline import compile_model

    ops = [op for m in ("s16_ds_cnn_int16", "s16_dwconv_int16", "s16_pad_int16", "s16_mean_int16")
           for op in compile_model(FIXTURES / f"{m}.tflite", "network").graph.ops
           if op.kernel in ("conv2d_s16", "depthwise_conv2d_s16", "reduce_mean_s16")]
    assert {op.kernel for op in ops} == {"conv2d_s16", "depthwise_conv2d_s16", "reduce_mean_s16"}
    runtime = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
    got = []
    for kernel, header, src in (("conv2d_s16", "ai_kernels_conv_s16.h", "ai_conv_s16.c"),
                                ("depthwise_conv2d_s16", "ai_kernels_conv_dw_s16.h", "ai_conv_dw_s16.c"),
                                ("reduce_mean_s16", "ai_kernels_reduce_s16.h", "ai_reduce_s16.c")):
        mine = [op for op in ops if op.kernel == kernel]
        got += list(zip([op.scratch for op in mine],
                        c_scratch_sizes(mine, header, [runtime / "src" / src], ["-std=c99"], tmp_path), strict=True))
    assert all(a == b and a > 0 for a, b in got), got
