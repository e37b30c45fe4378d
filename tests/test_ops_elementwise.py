"""Elementwise math, comparisons, logical ops, SELECT_V2 (elementwise.py, compare.py,
ai_elementwise.c, ai_compare.c).

* every ew_* fixture (converter output, tests/fixtures/make_fixtures_elementwise.py) runs
  bit-exact (int8/int16/int32/bool) or within 1e-5 relative (float32) against TFLite Micro, or
  against LiteRT-ref where TFLite Micro has no kernel for the type (POW, int32 FLOOR_MOD, int8
  EXP); int8 inputs cover all 256 values;
* the int8 tables (ABS, RSQRT, ELU, EXP) are checked entry by entry against the references on
  hand-built single-op models, at several quantisations;
* the int16 paths the converter does not emit (SELECT_V2, raw and rescaled ABS), int8
  comparisons of differently quantised inputs and bool / int64 comparisons run on hand-built
  models against TFLite Micro; int16 comparisons are refused (no reference defines them);
* a hand-built graph runs the cases random data rarely hits against numpy: ROUND ties, FLOOR_MOD
  signs and zero divisors, int32 SQUARED_DIFFERENCE wrapping, 6-D SELECT_V2 broadcasting,
  logical ops, ZEROS_LIKE and FILL;
* unsupported variants are refused with the reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from builders import TfliteBuilder
from builders import schema as S
from conftest import FIXTURES, refused_by_generate

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op, Quant
from stm32ai.passes.lower import registry
from stm32ai.pipeline import compile_graph
from stm32ai.validate.host import run_compiled
from stm32ai.validate.reference import input_specs
from stm32ai.validate.run import validate_model

EW_FIXTURES = sorted(FIXTURES.glob("ew_*.tflite"))
LITERT_ONLY = ("ew_pow_", "ew_floormod_int32_", "ew_sigmoid_tail_", "ew_qlite_")  # TFLM lacks the kernel/type
OPS = S.BuiltinOperator


def _inputs(model: Path, seed: int) -> list[np.ndarray]:
    """int8/int16 inputs: every int8 value at least twice; int32: small signed values; float:
    uniform in [-1.5, 1.5] with 0, -0 and +-1."""
    rng = np.random.default_rng(seed)
    out = []
    specs = input_specs(model)
    n = max(2, *(-(-2 * 256 // int(np.prod(s.shape))) for s in specs))
    for spec in specs:
        size = int(np.prod(spec.shape))
        if spec.dtype in (np.int8, np.int16):
            flat = (np.arange(n * size) % 256 - 128).astype(spec.dtype)
            if spec.dtype == np.int16:
                flat = (flat.astype(np.int32) * 255).astype(np.int16)
            rng.shuffle(flat)
        elif spec.dtype == np.int32:
            flat = rng.integers(-60, 60, n * size).astype(np.int32)
        else:
            flat = rng.uniform(-1.5, 1.5, n * size).astype(np.float32)
            flat[:4] = [0.0, -0.0, 1.0, -1.0]
        out.append(flat.reshape((n, *spec.shape[1:])))
    return out


def _assert_matches(res, want: str) -> None:
    v = next((c for c in res.comparisons if c.verdict), None)
    assert v is not None and v.reference == want, [(c.reference, c.unavailable) for c in res.comparisons]
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok, f"output {j}: {m.as_dict()}"
        if m.max_lsb is not None:
            assert m.max_lsb == 0, f"output {j}: {m.as_dict()}"
        else:
            assert m.max_rel_err is None or m.max_rel_err <= 1e-5, f"output {j}: {m.as_dict()}"


@pytest.mark.parametrize("model", EW_FIXTURES, ids=lambda p: p.stem)
def test_fixture_matches_reference(model):
    want = "litert-ref" if model.stem.startswith(LITERT_ONLY) else "tflm"
    _assert_matches(validate_model(model, _inputs(model, 5), seed=5), want)


def test_fixtures_present():
    names = {p.stem for p in EW_FIXTURES}
    assert {"ew_sigmoid_tail_mixed", "ew_layernorm_int8", "ew_unary_a_float32", "ew_unary_b_float32",
            "ew_q_int8", "ew_qlite_int8", "ew_cmpq_int8", "ew_cmp_float32", "ew_sqdiff_int16"} <= names


# ---------------------------------------------------------------------------------------------
# Hand-built models against the references
# ---------------------------------------------------------------------------------------------

def _model(tmp_path: Path, name: str, ins: list[tuple], ops: list[tuple[int, list[int], tuple]]) -> Path:
    """Several single ops side by side (at most 8 inputs and 8 outputs: AI_MAX_IO): `ins` are
    (shape, dtype, scale, zp) graph inputs, each op (code, input indices, output spec)."""
    b = TfliteBuilder()
    tin = [b.tensor(*t) for t in ins]
    touts = []
    for code, idx, out in ops:
        touts.append(b.tensor(*out))
        b.op(code, [tin[i] for i in idx], [touts[-1]])
    b.inputs, b.outputs = tin, touts
    p = tmp_path / f"{name}.tflite"
    p.write_bytes(b.build())
    return p


def _s8(q: tuple[float, int]) -> tuple:
    return ((1, 256), "int8", *q)


def test_int8_tables_every_value(tmp_path):
    """ABS (same scale, requantised), ELU, RSQRT tables: all 256 inputs against TFLite Micro;
    int8 EXP, LOG, SQRT (TFLM has float32 only) against LiteRT-ref, on their own model
    (LiteRT-ref has no ELU v1)."""
    all_s8 = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    tflm_in = [(0.05, -3), (0.05, 10), (0.02, 0), (0.11, 20), (0.01, -128), (0.003, 7), (0.5, 0)]
    data = [all_s8] * 4
    for _, zp in tflm_in[4:]:  # RSQRT: TFLite Micro fails the inference on inputs below the zero point
        data.append(np.resize(np.arange(zp, 128, dtype=np.int8), (1, 256)))
    ops = [(OPS.ABS, [0], _s8((0.05, -3))), (OPS.ABS, [1], _s8((0.031, -128))), (OPS.ABS, [2], _s8((0.09, -100))),
           (OPS.ELU, [0], _s8((0.04, 30))), (OPS.ELU, [3], _s8((0.06, -10))),
           (OPS.RSQRT, [4], _s8((0.05, -128))), (OPS.RSQRT, [5], _s8((0.2, -50))), (OPS.RSQRT, [6], _s8((0.004, -128)))]
    m = _model(tmp_path, "tables", [_s8(q) for q in tflm_in], ops)
    _assert_matches(validate_model(m, data, seed=0), "tflm")
    # LiteRT-ref: int8 EXP, LOG (log of <= 0 included), SQRT (TFLM: float32 only). LiteRT fails
    # the inference on SQRT of a negative real: those inputs are left out
    def from_(lo: int) -> np.ndarray:
        return np.resize(np.arange(lo, 128, dtype=np.int8), (1, 256))

    m = _model(tmp_path, "exp", [_s8((0.03, 5)), _s8((0.1, -20)), _s8((0.1, -20)), _s8((0.02, -100))],
               [(OPS.EXP, [0], _s8((0.05, -128))), (OPS.EXP, [1], _s8((0.9, -128))),
                (OPS.LOG, [0], _s8((0.03, 60))), (OPS.LOG, [1], _s8((0.015, 100))),
                (OPS.SQRT, [2], _s8((0.03, -128))), (OPS.SQRT, [3], _s8((0.008, -100)))])
    _assert_matches(validate_model(m, [all_s8, all_s8, from_(-20), from_(-99)], seed=0), "litert-ref")


def test_int16_and_scaled_int8_against_tflm(tmp_path):
    """int16 ABS (raw, same scale, rescaled), RSQRT, SQUARED_DIFFERENCE; int8 comparisons of
    differently quantised inputs; SELECT_V2 int16 with a broadcast condition; bool EQUAL, int64
    GREATER: hand-built (the converter emits none of them) against TFLite Micro."""
    rng = np.random.default_rng(7)
    sh, bsh = (1, 6, 50), (1, 1, 50)
    x = rng.integers(-32768, 32768, sh).astype(np.int16)
    x.flat[:3] = [-32768, 32767, 0]
    y = rng.integers(-32768, 32768, bsh).astype(np.int16)
    xp = np.abs(x.astype(np.int32)).clip(0, 32767).astype(np.int16)  # RSQRT: TFLM fails on x < 0
    xp.flat[:4] = [0, 1, 2, 32767]
    ins = [(sh, "int16", None, None), (sh, "int16", 0.001, 0), (sh, "int16", 3e-5, 0), (bsh, "int16", 0.0023, 0)]
    ops = [(OPS.ABS, [0], (sh, "int16", None, None)), (OPS.ABS, [1], (sh, "int16", 0.001, 0)),
           (OPS.ABS, [1], (sh, "int16", 0.0007, 0)), (OPS.RSQRT, [1], (sh, "int16", 0.0007, 0)),
           (OPS.RSQRT, [2], (sh, "int16", 0.02, 0)), (OPS.SQUARED_DIFFERENCE, [1, 3], (sh, "int16", 0.05, 0))]
    m = _model(tmp_path, "s16", ins, ops)
    _assert_matches(validate_model(m, [x, xp, xp, y], seed=0), "tflm")

    x8 = rng.integers(-128, 128, sh).astype(np.int8)
    y8 = rng.integers(-128, 128, bsh).astype(np.int8)
    c = rng.integers(0, 2, (1, 6, 1)).astype(np.bool_)
    bb = rng.integers(0, 2, sh).astype(np.bool_)
    i64 = rng.integers(-(1 << 40), 1 << 40, sh).astype(np.int64)
    boolean = (sh, "bool", None, None)
    ins = [(sh, "int8", 0.01, 3), (bsh, "int8", 0.023, -7), (bsh, "int8", 0.01, -2), ((1, 6, 1), "bool", None, None),
           (sh, "int16", 0.01, 0), (bsh, "int16", 0.01, 0), boolean, (sh, "int64", None, None)]
    ops = [(OPS.GREATER, [0, 1], boolean), (OPS.LESS_EQUAL, [0, 2], boolean), (OPS.EQUAL, [0, 2], boolean),
           (OPS.SELECT_V2, [3, 4, 5], (sh, "int16", 0.01, 0)), (OPS.EQUAL, [6, 6], boolean),
           (OPS.NOT_EQUAL, [3, 6], boolean), (OPS.GREATER, [7, 7], boolean)]
    m = _model(tmp_path, "mix", ins, ops)
    data = [x8, y8, (y8 // 2).astype(np.int8), c, x, y, bb, i64]
    _assert_matches(validate_model(m, data, seed=0), "tflm")


@pytest.mark.parametrize("zp", [-5, 40])
def test_add_n_int8_against_tflm(tmp_path, zp):
    """The converter keeps ADD_N in float in int8 models: int8 ADD_N by hand (TFLM's Prepare
    wants one quantisation on every input)."""
    rng = np.random.default_rng(9)
    xs = [rng.integers(-128, 128, (1, 3, 70)).astype(np.int8) for _ in range(3)]
    q = ((1, 3, 70), "int8", 0.05, zp)
    m = _model(tmp_path, "addn", [q] * 3, [(OPS.ADD_N, [0, 1, 2], ((1, 3, 70), "int8", 0.11, 3))])
    _assert_matches(validate_model(m, xs, seed=0), "tflm")


def test_tflm_int16_greater_is_always_false(tmp_path):
    """Why int16 comparisons are refused (op_types_probe.EXCLUSIONS): TFLite Micro runs them with
    zero rescaling parameters, so GREATER is false even for 30000 > -30000."""
    from stm32ai.validate.reference import run_tflm

    q = ((1, 4), "int16", 0.001, 0)
    m = _model(tmp_path, "g16", [q, q], [(OPS.GREATER, [0, 1], ((1, 4), "bool", None, None))])
    x = np.int16([[30000, 5, -7, 100]])
    y = np.int16([[-30000, -5, -9, 0]])
    assert not run_tflm(m, [x, y])[0].any()


# ---------------------------------------------------------------------------------------------
# Hand-built graph against numpy
# ---------------------------------------------------------------------------------------------

def _op(g: Graph, typ: str, ins: list[int], shape: tuple[int, ...], dtype: str, k: int) -> int:
    y = g.add_tensor(f"y{k}", shape, dtype)
    g.ops.append(Op(typ, ins, [y], {}, index=k))
    g.outputs.append(y)
    return y


def test_edge_cases_against_numpy():
    rng = np.random.default_rng(4)
    fr = np.float32([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49999976, 1e9 + 0.0, -0.0, 7.5, 8.5, -7.5])
    fx = np.float32([7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 6.0, -6.0, 1e-30, 5.0, 3.0, -3.0])
    fz = np.float32([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, -3.0, 3.0, 1.0, 0.0, np.inf, 2.5])
    ix = np.int32([7, -7, 7, -7, 0, 5, -2147483648, 2147483647, 9, -9, 6, -6])
    iz = np.int32([2, 2, -2, -2, 3, 0, -1, -1, 3, 3, -4, 4])
    c6 = rng.integers(0, 2, (2, 1, 3, 1, 2, 1)).astype(np.bool_)
    x6 = rng.normal(size=(1, 2, 3, 1, 2, 5)).astype(np.float32)
    y6 = rng.normal(size=(2, 1, 1, 4, 1, 5)).astype(np.float32)
    ba = rng.integers(0, 2, (3, 1, 4)).astype(np.bool_)
    bb = rng.integers(0, 2, (1, 5, 4)).astype(np.bool_)
    sa = rng.integers(-(1 << 31), (1 << 31) - 1, (40,), dtype=np.int64).astype(np.int32)
    sb = rng.integers(-(1 << 31), (1 << 31) - 1, (40,), dtype=np.int64).astype(np.int32)
    def graph(name: str, arrays: list[np.ndarray]) -> tuple[Graph, list[int]]:
        gg = Graph(name, [], [], [], [])
        gg.inputs = [gg.add_tensor(f"i{k}", v.shape, v.dtype.name) for k, v in enumerate(arrays)]
        return gg, gg.inputs

    # at most 8 inputs and 8 outputs per model (AI_MAX_IO)
    g, (tr, tx, tz, tix, tiz) = graph("a", [fr, fx, fz, ix, iz])
    _op(g, "ROUND", [tr], fr.shape, "float32", 0)
    _op(g, "FLOOR_MOD", [tx, tz], fx.shape, "float32", 1)
    _op(g, "FLOOR_MOD", [tix, tiz], ix.shape, "int32", 2)
    c = compile_graph(g)
    assert [op.kernel for op in c.graph.ops] == ["round_f32", "floor_mod_f32", "floor_mod_s32"]
    outs = run_compiled(c, [[fr, fx, fz, ix, iz]])[0]
    assert outs[0].tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 3.0, 1e9, -0.0, 8.0, 8.0, -8.0]
    assert np.array_equal(outs[0], np.round(fr))           # numpy rounds ties to even too
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.fmod(fx, fz)
        assert np.array_equal(outs[1], np.where((t != 0) & ((fz < 0) != (t < 0)), t + fz, t), equal_nan=True)
    assert outs[2].tolist() == [1, 1, -1, -1, 0, 0, 0, 0, 0, 0, -2, 2]

    g, (tc, t6x, t6y, tba, tbb, tsa, tsb) = graph("b", [c6, x6, y6, ba, bb, sa, sb])
    _op(g, "SELECT_V2", [tc, t6x, t6y], np.broadcast_shapes(c6.shape, x6.shape, y6.shape), "float32", 0)
    _op(g, "LOGICAL_AND", [tba, tbb], (3, 5, 4), "bool", 1)
    _op(g, "LOGICAL_OR", [tba, tbb], (3, 5, 4), "bool", 2)
    _op(g, "LOGICAL_NOT", [tba], ba.shape, "bool", 3)
    _op(g, "SQUARED_DIFFERENCE", [tsa, tsb], sa.shape, "int32", 4)
    c = compile_graph(g)
    assert [op.kernel for op in c.graph.ops] == ["select_v2_b4", "logical_and", "logical_or", "logical_not",
                                                 "squared_difference_s32"]
    outs = run_compiled(c, [[c6, x6, y6, ba, bb, sa, sb]])[0]
    assert np.array_equal(outs[0], np.where(c6, x6, y6))
    assert np.array_equal(outs[1], ba & bb) and np.array_equal(outs[2], ba | bb)
    assert np.array_equal(outs[3], ~ba)
    d = sa.astype(np.int64) - sb.astype(np.int64)
    assert np.array_equal(outs[4], ((d * d) & 0xFFFFFFFF).astype(np.uint32).view(np.int32))

    g2 = Graph("z", [], [], [], [])
    t = g2.add_tensor("x", (3, 4), "int32")
    v = g2.add_tensor("v", (), "float32")
    dims = g2.add_const("dims", np.int32([2, 3]))
    g2.inputs = [t, v]
    _op(g2, "ZEROS_LIKE", [t], (3, 4), "int32", 0)
    _op(g2, "FILL", [dims, v], (2, 3), "float32", 1)
    _op(g2, "ADD", [t, t], (3, 4), "int32", 2)   # makes the zeros not the only thing the model does
    c2 = compile_graph(g2)
    z, f, _ = run_compiled(c2, [[np.full((3, 4), 7, np.int32), np.float32(-1.25)]])[0]
    assert not z.any() and z.shape == (3, 4)
    assert f.tolist() == [[-1.25] * 3] * 2


# ---------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------

def _q(s: float, zp: int) -> Quant:
    return Quant(np.float32([s]), np.int64([zp]))


@pytest.mark.parametrize("typ,dtype,quant,words", [
    ("NEG", "int8", _q(0.1, 0), ("NEG", "int8", "float32")),
    ("RSQRT", "int16", _q(0.001, 3), ("RSQRT", "zero point 3")),
    ("EXP", "int16", _q(0.001, 0), ("EXP", "int16")),
    ("ABS", "int8", Quant(np.full(8, 0.1, np.float32), np.zeros(8, np.int64), 1), ("ABS", "per-channel")),
    ("ABS", "int16", _q(0.001, 5), ("ABS", "zero point 5")),
])
def test_unary_refusals(typ, dtype, quant, words):
    g = Graph("t", [], [], [], [])
    x = g.add_tensor("x", (1, 8), dtype, quant)
    y = g.add_tensor("y", (1, 8), dtype, quant)
    g.ops.append(Op(typ, [x], [y], {}, index=0))
    g.inputs, g.outputs = [x], [y]
    with pytest.raises(UnsupportedModelError) as e:
        compile_graph(g)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_binary_refusals():
    def one(typ: str, qa: Quant, qb: Quant, out_dtype: str, words: tuple[str, ...], n_in: int = 2) -> None:
        g = Graph("t", [], [], [], [])
        ins = [g.add_tensor("c", (1, 8), "bool")] if n_in == 3 else []
        ins += [g.add_tensor("a", (1, 8), "int8", qa), g.add_tensor("b", (1, 8), "int8", qb)]
        y = g.add_tensor("y", (1, 8), out_dtype, qa if out_dtype == "int8" else None)
        g.ops.append(Op(typ, ins, [y], {}, index=0))
        g.inputs, g.outputs = ins, [y]
        with pytest.raises(UnsupportedModelError) as e:
            compile_graph(g)
        assert all(w in str(e.value) for w in words), str(e.value)

    one("GREATER", _q(1.5, 0), _q(0.1, 0), "bool", ("GREATER", "below 1"))
    one("SELECT_V2", _q(0.1, 0), _q(0.2, 0), "int8", ("SELECT_V2", "quantised differently"), n_in=3)
    one("SQUARED_DIFFERENCE", _q(0.1, 0), _q(0.1, 0), "bool", ("SQUARED_DIFFERENCE", "one type"))
    one("POW", _q(0.1, 0), _q(0.1, 0), "int8", ("POW", "int8"))
    g = Graph("t", [], [], [], [])
    a, b = g.add_tensor("a", (1, 8), "int16", _q(0.001, 0)), g.add_tensor("b", (1, 8), "int16", _q(0.001, 0))
    y = g.add_tensor("y", (1, 8), "bool")
    g.ops.append(Op("GREATER", [a, b], [y], {}, index=0))
    g.inputs, g.outputs = [a, b], [y]
    with pytest.raises(UnsupportedModelError, match="GREATER.*int16 is not supported"):
        compile_graph(g)


def test_generate_refuses_in_one_line(tmp_path):
    """`stm32ai generate` on a model with an int16 comparison: exit 2, one line naming the op and
    the reason, nothing written."""
    q = ((1, 4), "int16", 0.001, 0)
    m = _model(tmp_path, "g16", [q, q], [(OPS.GREATER_EQUAL, [0, 1], ((1, 4), "bool", None, None))])
    refused_by_generate(m, tmp_path / "out", "GREATER_EQUAL", "int16")


def test_tables_survive_extreme_scales():
    """Scales at the verifier's limits (float32 tiny .. 1e30): every table is 256 int8 values,
    no Python exception (an inf or NaN product saturates instead of reaching int())."""
    from stm32ai.passes.lower.elementwise import (
        abs_table,
        elu_table,
        exp_table,
        log_table,
        rsqrt_table,
        sqrt_table,
    )

    tiny = float(np.finfo(np.float32).tiny)
    for table in (abs_table, elu_table, exp_table, rsqrt_table, log_table, sqrt_table):
        for si, so in ((1e30, tiny), (tiny, 1e30), (1e30, 1e30), (tiny, tiny)):
            t = table(-128, si, 127, so)
            assert len(t) == 256 and all(-128 <= v <= 127 for v in t)


def test_registry_lists_the_family():
    reg = registry()
    for op in ("ABS", "NEG", "CEIL", "FLOOR", "ROUND", "SQRT", "RSQRT", "EXP", "LOG", "SIN", "COS",
               "SQUARE", "ELU", "SQUARED_DIFFERENCE", "FLOOR_MOD", "POW", "ZEROS_LIKE", "FILL",
               "EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL",
               "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "SELECT_V2"):
        assert op in reg, op
    assert "int16" in reg["ABS"].constraints and "int8" in reg["RSQRT"].constraints


# ---------------------------------------------------------------------------------------------
# No undefined behaviour at the extremes (UBSan), and the Cortex-M4 build on QEMU
# ---------------------------------------------------------------------------------------------

def test_extremes_are_ubsan_clean(tmp_path):
    """The kernels at the edges of their integer ranges, built with UBSan (aborting on a report):
    int32 SQUARED_DIFFERENCE and FLOOR_MOD at INT32_MIN/MAX and divisors 0 / -1, raw int16 ABS of
    -32768, int16 RSQRT of every non-negative value, int8 SQUARED_DIFFERENCE / comparisons / ADD_N
    (8 inputs) with extreme zero points. Results equal the normal build's; the int32 ones numpy's."""
    import os
    import subprocess

    from stm32ai.emitter import emit_c
    from stm32ai.validate.host import CFLAGS, harness_source, run_exe, runtime_objects

    g = Graph("x", [], [], [], [])
    e32 = np.int32([-2147483648, 2147483647, -2147483648, 0, -1, 7, -2147483648, 5])
    d32 = np.int32([2147483647, -2147483648, -1, 0, 0, -1, 0, -2147483648])
    s16 = np.arange(-32768, 32768, 8, dtype=np.int16).reshape(1, -1)
    p16 = np.arange(0, 32768, dtype=np.int16).reshape(1, -1)
    q = _q(0.9, 127), _q(0.0001, -128)
    x8 = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    ins = [g.add_tensor("e", e32.shape, "int32"), g.add_tensor("d", d32.shape, "int32"),
           g.add_tensor("s", s16.shape, "int16"), g.add_tensor("p", p16.shape, "int16", _q(3e-5, 0)),
           g.add_tensor("a", x8.shape, "int8", q[0]), g.add_tensor("b", x8.shape, "int8", q[1])]
    g.inputs = ins
    outs = [g.add_tensor(f"y{k}", sh, dt, qq) for k, (sh, dt, qq) in enumerate([
        (e32.shape, "int32", None), (e32.shape, "int32", None), (s16.shape, "int16", None),
        (p16.shape, "int16", _q(0.02, 0)), (x8.shape, "int8", _q(0.0001, -128)), (x8.shape, "bool", None),
        (x8.shape, "int8", _q(0.002, 127))])]
    for k, (typ, i) in enumerate([("SQUARED_DIFFERENCE", [0, 1]), ("FLOOR_MOD", [0, 1]), ("ABS", [2]),
                                  ("RSQRT", [3]), ("SQUARED_DIFFERENCE", [4, 5]), ("GREATER_EQUAL", [4, 5]),
                                  ("ADD_N", [4] * 8)]):
        g.ops.append(Op(typ, [ins[j] for j in i], [outs[k]], {}, index=k))
    g.outputs = outs
    c = compile_graph(g)
    sample = [e32, d32, s16, p16, x8, x8[:, ::-1].copy()]
    plain = run_compiled(c, [sample])[0]
    d = tmp_path / "c"
    emit_c(c.doc, c.params, "network", d)
    for f in (d / "runtime" / "src").glob("*.c"):   # only the kernels this model calls
        if f.name not in ("ai_runtime.c", "ai_elementwise.c", "ai_compare.c"):
            f.unlink()
    (tmp_path / "host_main.c").write_text(harness_source({"network": "network.h"}))
    cc = os.environ.get("CC", "cc")
    flags = [*CFLAGS, "-fsanitize=undefined", "-fno-sanitize-recover=all", "-g"]
    objs = runtime_objects(d / "runtime", cc, flags, tmp_path)
    exe = tmp_path / "model_ubsan"
    subprocess.run([cc, *flags, f"-I{d}", f"-I{d / 'runtime' / 'include'}", str(d / "network.c"),
                    str(d / "network_data.c"), str(tmp_path / "host_main.c"), *map(str, objs), "-o", str(exe),
                    "-lm"], check=True, capture_output=True)
    san = run_exe(exe, [], c, [sample], "UBSan build")[0]
    for a, b in zip(plain, san, strict=True):
        assert np.array_equal(a, b)
    dd = e32.astype(np.int64) - d32.astype(np.int64)
    assert np.array_equal(san[0], ((dd * dd) & 0xFFFFFFFF).astype(np.uint32).view(np.int32))
    safe = np.where(d32 == 0, 1, d32).astype(np.int64)
    assert np.array_equal(san[1], np.where(d32 == 0, 0, np.mod(e32.astype(np.int64), safe)))  # x mod 0 = 0
    assert san[1].tolist()[:2] == [2147483646, -1]
    assert san[2].ravel()[0] == -32768 and np.array_equal(san[2][0, 1:], np.abs(s16[0, 1:]))


@pytest.mark.slow
def test_cortex_m4_on_qemu_within_tolerance(tmp_path, capsys):
    """ew_unary_b_float32 (newlib's expf/logf/sinf/cosf/sqrtf) and the int8 LayerNorm, built for
    Cortex-M4 and run on QEMU mps2-an386 (`validate --mode target`): within 1e-5 / bit-exact
    against TFLite Micro."""
    import json
    import shutil

    from stm32ai.cli import main

    if not all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc/make/qemu-system-arm not installed")
    for name in ("ew_unary_b_float32", "ew_layernorm_int8"):
        report = tmp_path / f"{name}.json"
        code = main(["validate", str(FIXTURES / f"{name}.tflite"), "--mode", "target", "--board",
                     "qemu-mps2-an386", "-n", "2", "--timeout", "300", "--json", str(report)])
        cap = capsys.readouterr()
        assert code == 0, cap.out + cap.err
        doc = json.loads(report.read_text())
        assert doc["passed"] and doc["verdict"] == "tflm", doc
