"""The type audit (docs/op_types.md): which tensor-type combinations TFLite Micro's kernels
accept for each operator we support, and which we accept.

    python tests/op_types_probe.py            # probe both, rewrite tests/fixtures/op_types_tflm.json
                                              # and docs/op_types.md
    python tests/op_types_probe.py --check    # exit 1 if either file is out of date

Every case is a hand-built single-op model (tests/builders.py) with one type combination and
quantisation parameters that satisfy the kernels' non-type requirements (TFLite's fixed
softmax/logistic/tanh output quantisation, equal input/output quantisation where a kernel
wants it, symmetric int8 weights, a bias of scale input * weights), so a refusal is about the
types. TFLM "accepts" a case when its interpreter allocates the tensors (every kernel's
Prepare) and runs one inference (Eval's type switch); each operator's cases run in a child
process, so a TFLM abort refuses a case instead of ending the probe. We accept a case when
`stm32ai.pipeline.compile_graph` compiles it. Values are not compared here: bit-exactness is
each operator's own tests' job (tests/test_ops_*.py, tests/test_op_types.py).

tests/test_op_types.py reads the committed TFLM results (no TFLM run in the fast suite) and
fails when a combination TFLM accepts is refused by us, except the EXCLUSIONS below, each with
its reason (also printed in the doc).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from builders import TfliteBuilder  # noqa: E402
from builders import schema as S  # noqa: E402

TFLM_JSON = HERE / "fixtures" / "op_types_tflm.json"
DOC = ROOT / "docs" / "op_types.md"

ACT = ("int8", "uint8", "int16", "int32", "float32")            # activation types tried
ANY = ("int8", "uint8", "int16", "int32", "int64", "float32", "bool")  # data-movement types
Q = {"int8": (0.05, -3), "uint8": (0.05, 128), "int16": (0.001, 0), "int32": (0.0005, 0),
     "int64": (0.0005, 0)}
# TFLite's fixed output quantisation of the table/exp ops, per (op, output type[, input type])
FIXED = {("SOFTMAX", "int8"): (1 / 256, -128), ("SOFTMAX", "uint8"): (1 / 256, 0),
         ("SOFTMAX", "int16", "int8"): (1 / 65536, -32768), ("SOFTMAX", "int16"): (1 / 32768, 0),
         ("LOGISTIC", "int8"): (1 / 256, -128), ("LOGISTIC", "uint8"): (1 / 256, 0),
         ("LOGISTIC", "int16"): (1 / 32768, 0), ("TANH", "int8"): (1 / 128, 0),
         ("TANH", "uint8"): (1 / 128, 128), ("TANH", "int16"): (1 / 32768, 0),
         ("LOG_SOFTMAX", "int8"): (16 / 256, 127), ("LOG_SOFTMAX", "uint8"): (16 / 256, 255),
         ("L2_NORMALIZATION", "int8"): (1 / 128, 0), ("L2_NORMALIZATION", "uint8"): (1 / 128, 128)}

# (op, combination) TFLM accepts and we refuse on purpose: the reason is printed in the doc
_BIAS_AS_INT64 = ("TFLM accepts it, but its int16 kernel reads the bias as int64 whatever its type (an "
                  "out-of-bounds read: the outputs saturate), and LiteRT refuses it: no reference computes "
                  "this model, so we refuse it (tests/test_op_types.py::test_tflm_reads_an_int32_bias_as_int64 "
                  "shows it)")
_GREATER_S16 = ("TFLM accepts it, but its Prepare leaves the int16 rescaling parameters at zero, so every "
                "GREATER is false; LiteRT compares the raw values whatever their quantisation; the converter "
                "emits no int16 comparison: no reference defines it, so we refuse it "
                "(tests/test_ops_elementwise.py::test_tflm_int16_greater_is_always_false)")
EXCLUSIONS: dict[tuple[str, str], str] = {
    ("DEPTHWISE_CONV_2D", "int16 x int8 weights + int32 bias -> int16"): _BIAS_AS_INT64,
    ("TRANSPOSE_CONV", "int16 x int8 weights + int32 bias -> int16"): _BIAS_AS_INT64,
    ("GREATER", "int16 x int16 -> bool"): _GREATER_S16,
}


@dataclass
class Case:
    op: str
    combo: str                                   # "int8 -> int16", "int8 x int8 -> int8", ...
    build: Callable[[TfliteBuilder], None]


def _code(op: str) -> int:
    return getattr(S.BuiltinOperator, op)


def _opts(name: str, **fields: object) -> tuple[int, object]:
    o = getattr(S, f"{name}OptionsT")()
    for k, v in fields.items():
        setattr(o, k, v)
    return getattr(S.BuiltinOptions, f"{name}Options"), o


def _t(b: TfliteBuilder, shape: list[int], dtype: str, quant: bool = True,
       q: tuple[float, int] | None = None, data: np.ndarray | None = None) -> int:
    if q is None and quant and dtype in Q:
        q = Q[dtype]
    return b.tensor(shape, dtype, *(q or (None, None)), data=data)


def _const(b: TfliteBuilder, values: list | np.ndarray, dtype: str = "int32") -> int:
    a = np.asarray(values, dtype=dtype)
    return b.tensor(list(a.shape), dtype, data=a)


def _finish(b: TfliteBuilder, code: int, ins: list[int], outs: list[int], graph_ins: list[int],
            opts: tuple[int, object] | None = None) -> None:
    b.op(code, ins, outs, *(opts or (0, None)))
    b.inputs, b.outputs = graph_ins, outs


# ---- case families --------------------------------------------------------------------------

def _unary(op: str, pairs: list[tuple[str, str]], opts: Callable[[], tuple[int, object]] | None = None,
           shape: tuple[int, ...] = (1, 2, 3, 4), quant_int32: bool = False, quant: bool = True) -> list[Case]:
    """quant=False: no tensor quantised (CAST converts stored values; a quantised CAST is
    refused on purpose, docs/kernels_cast.md)."""
    cases = []
    for a, y in pairs:
        def build(b: TfliteBuilder, a: str = a, y: str = y) -> None:
            qa = quant and (quant_int32 or a != "int32")
            x = _t(b, list(shape), a, qa)
            fixed = FIXED.get((op, y, a), FIXED.get((op, y)))
            out = _t(b, list(shape), y, quant and (quant_int32 or y != "int32"), q=fixed)
            _finish(b, _code(op), [x], [out], [x], opts() if opts else None)
        cases.append(Case(op, f"{a} -> {y}", build))
    return cases


def _same(types: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(t, t) for t in types]


def _product(types: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(a, y) for a in types for y in types]


def _binary(op: str, opts: Callable[[], tuple[int, object]] | None) -> list[Case]:
    cases = []
    for t in ("int8", "uint8", "int16", "int32", "int64", "float32"):
        def build(b: TfliteBuilder, t: str = t) -> None:
            qt = t not in ("int32", "int64")  # wide integers: plain values
            x1, x2 = _t(b, [1, 2, 3], t, qt), _t(b, [1, 2, 3], t, qt)
            _finish(b, _code(op), [x1, x2], [_t(b, [1, 2, 3], t, qt)], [x1, x2],
                    opts() if opts else None)
        cases.append(Case(op, f"{t} x {t} -> {t}", build))
    return cases


def _movement(op: str, make: Callable[[TfliteBuilder, str], None], types: tuple[str, ...] = ANY) -> list[Case]:
    return [Case(op, f"{t} -> {t}", lambda b, t=t: make(b, t)) for t in types]


def _mv_simple(op: str, in_shape: list[int], out_shape: list[int],
               consts: Callable[[TfliteBuilder, str], list[int]] | None = None,
               opts: Callable[[], tuple[int, object]] | None = None, out_count: int = 1,
               const_first: bool = False) -> Callable[[TfliteBuilder, str], None]:
    def make(b: TfliteBuilder, t: str) -> None:
        x = _t(b, in_shape, t)
        extra = consts(b, t) if consts else []
        outs = [_t(b, out_shape, t) for _ in range(out_count)]
        ins = extra + [x] if const_first else [x] + extra
        _finish(b, _code(op), ins, outs, [x], opts() if opts else None)
    return make


def _two_inputs(op: str, in_shape: list[int], out_shape: list[int],
                opts: Callable[[], tuple[int, object]]) -> Callable[[TfliteBuilder, str], None]:
    def make(b: TfliteBuilder, t: str) -> None:
        x1, x2 = _t(b, in_shape, t), _t(b, in_shape, t)
        _finish(b, _code(op), [x1, x2], [_t(b, out_shape, t)], [x1, x2], opts())
    return make


def _weighted(op: str) -> list[Case]:
    """(activations, weights, bias) combinations of the weighted ops."""
    combos = [("int8", "int8", "int32"), ("int8", "int4", "int32"), ("int16", "int8", "int64"),
              ("int16", "int4", "int64"), ("int16", "int8", "int32"),
              ("float32", "float32", "float32"), ("float32", "int8", "float32"),
              ("uint8", "uint8", "int32")]
    cases = []
    for a, w, bt in combos:
        def build(b: TfliteBuilder, a: str = a, w: str = w, bt: str = bt) -> None:
            sx = Q.get(a, (None, None))[0]
            wq = (0.02, 128 if w == "uint8" else 0) if w != "float32" else None
            bq = (sx * 0.02, 0) if (sx and wq) else None
            yq = {"int8": (0.1, 1), "uint8": (0.1, 128), "int16": (0.002, 0)}.get(a)
            if op == "FULLY_CONNECTED":
                xs, ws, ys, nb = [1, 8], [2, 8], [1, 2], 2
            elif op == "DEPTHWISE_CONV_2D":
                xs, ws, ys, nb = [1, 4, 4, 3], [1, 1, 1, 3], [1, 4, 4, 3], 3
            else:
                xs, ws, ys, nb = [1, 4, 4, 3], [2, 1, 1, 3], [1, 4, 4, 2], 2
            x = b.tensor(xs, a, *(Q[a] if a in Q else (None, None)))
            wt = b.tensor(ws, w, *(wq or (None, None)), data=np.ones(ws, dtype="int8" if w == "int4" else w))
            bias = b.tensor([nb], bt, *(bq or (None, None)), data=np.ones(nb, dtype=bt))
            y = b.tensor(ys, a, *(yq or (None, None)))
            if op == "CONV_2D":
                _finish(b, _code(op), [x, wt, bias], [y], [x],
                        _opts("Conv2D", padding=S.Padding.SAME, strideW=1, strideH=1,
                              dilationWFactor=1, dilationHFactor=1))
            elif op == "DEPTHWISE_CONV_2D":
                _finish(b, _code(op), [x, wt, bias], [y], [x],
                        _opts("DepthwiseConv2D", padding=S.Padding.SAME, strideW=1, strideH=1,
                              depthMultiplier=1, dilationWFactor=1, dilationHFactor=1))
            elif op == "FULLY_CONNECTED":
                _finish(b, _code(op), [x, wt, bias], [y], [x], _opts("FullyConnected"))
            else:  # TRANSPOSE_CONV: output_shape, weights [out, kh, kw, in], input, bias
                shape = _const(b, ys)
                _finish(b, _code(op), [shape, wt, x, bias], [y], [x],
                        _opts("TransposeConv", padding=S.Padding.SAME, strideW=1, strideH=1))
        cases.append(Case(op, f"{a} x {w} weights + {bt} bias -> {a}", build))
    return cases


def _reduce(op: str) -> list[Case]:
    def make(b: TfliteBuilder, t: str) -> None:
        x = _t(b, [1, 4, 4, 3], t)
        _finish(b, _code(op), [x, _const(b, [1, 2])], [_t(b, [1, 1, 1, 3], t)], [x],
                _opts("Reducer", keepDims=True))
    return _movement(op, make, ACT)


def _arg(op: str) -> list[Case]:
    cases = []
    for a in ACT:
        for y in ("int32", "int64"):
            def build(b: TfliteBuilder, a: str = a, y: str = y) -> None:
                x = _t(b, [1, 4, 4, 3], a)
                name = "ArgMax" if op == "ARG_MAX" else "ArgMin"
                tt = S.TensorType.INT32 if y == "int32" else S.TensorType.INT64
                _finish(b, _code(op), [x, _const(b, [3])], [_t(b, [1, 4, 4], y, False)], [x],
                        _opts(name, outputType=tt))
            cases.append(Case(op, f"{a} -> {y}", build))
    return cases


def _prelu() -> list[Case]:
    def make(b: TfliteBuilder, t: str) -> None:
        x = _t(b, [1, 2, 2, 3], t)
        alpha = _t(b, [3], t, data=np.ones(3, dtype=t))
        _finish(b, _code("PRELU"), [x, alpha], [_t(b, [1, 2, 2, 3], t)], [x])
    return _movement("PRELU", make, ACT)


def _pool(op: str) -> list[Case]:
    make = _mv_simple(op, [1, 4, 4, 3], [1, 2, 2, 3],
                      opts=lambda: _opts("Pool2D", padding=S.Padding.VALID, strideW=2, strideH=2,
                                         filterWidth=2, filterHeight=2))
    return _movement(op, make, ACT)


def all_cases() -> list[Case]:
    x4 = [1, 4, 4, 3]
    cases: list[Case] = []
    for op in ("RELU", "RELU6", "RELU_N1_TO_1", "HARD_SWISH"):
        cases += _unary(op, _same(ACT))
    cases += _unary("LEAKY_RELU", _same(ACT), lambda: _opts("LeakyRelu", alpha=0.2))
    for op in ("LOGISTIC", "TANH"):
        cases += _unary(op, _product(ACT))
    cases += _unary("SOFTMAX", _product(ACT), lambda: _opts("Softmax", beta=1.0))
    cases += _unary("LOG_SOFTMAX", _product(ACT), lambda: _opts("LogSoftmax"))
    cases += _unary("QUANTIZE", _product(ACT), quant_int32=True)
    cases += _unary("DEQUANTIZE", _product(ACT), quant_int32=True)
    cast = ("int8", "uint8", "int16", "uint16", "int32", "int64", "float32", "bool")
    cases += _unary("CAST", _product(cast), quant=False)
    cases += _prelu()
    for op, opts in (("ADD", lambda: _opts("Add")), ("SUB", lambda: _opts("Sub")),
                     ("MUL", lambda: _opts("Mul")), ("DIV", lambda: _opts("Div")),
                     ("MAXIMUM", None), ("MINIMUM", None), ("FLOOR_DIV", lambda: _opts("FloorDiv"))):
        cases += _binary(op, opts)
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        cases += _pool(op)
    for op in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"):
        cases += _reduce(op)
    cases += _arg("ARG_MAX") + _arg("ARG_MIN")
    for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"):
        cases += _weighted(op)
    mv = {
        "RESHAPE": _mv_simple("RESHAPE", x4, [1, 48], lambda b, t: [_const(b, [1, 48])],
                              lambda: _opts("Reshape", newShape=[1, 48])),
        "TRANSPOSE": _mv_simple("TRANSPOSE", x4, [1, 4, 4, 3], lambda b, t: [_const(b, [0, 2, 1, 3])]),
        "CONCATENATION": _two_inputs("CONCATENATION", x4, [1, 4, 4, 6], lambda: _opts("Concatenation", axis=3)),
        "PACK": _two_inputs("PACK", [4, 3], [2, 4, 3], lambda: _opts("Pack", valuesCount=2, axis=0)),
        "UNPACK": _mv_simple("UNPACK", [2, 4, 3], [4, 3], opts=lambda: _opts("Unpack", num=2, axis=0), out_count=2),
        "SPLIT": _mv_simple("SPLIT", [1, 4, 4, 4], [1, 4, 4, 2], lambda b, t: [_const(b, 3)],
                            lambda: _opts("Split", numSplits=2), out_count=2, const_first=True),
        "SPLIT_V": _mv_simple("SPLIT_V", [1, 4, 4, 4], [1, 4, 4, 2],
                              lambda b, t: [_const(b, [2, 2]), _const(b, 3)],
                              lambda: _opts("SplitV", numSplits=2), out_count=2),
        "SLICE": _mv_simple("SLICE", x4, [1, 2, 2, 3], lambda b, t: [_const(b, [0, 1, 1, 0]), _const(b, [1, 2, 2, 3])]),
        "STRIDED_SLICE": _mv_simple("STRIDED_SLICE", x4, [1, 2, 2, 3],
                                    lambda b, t: [_const(b, [0, 0, 0, 0]), _const(b, [1, 4, 4, 3]),
                                                  _const(b, [1, 2, 2, 1])], lambda: _opts("StridedSlice")),
        "PAD": _mv_simple("PAD", x4, [1, 6, 6, 3], lambda b, t: [_const(b, [[0, 0], [1, 1], [1, 1], [0, 0]])]),
        "PADV2": _mv_simple("PADV2", x4, [1, 6, 6, 3],
                            lambda b, t: [_const(b, [[0, 0], [1, 1], [1, 1], [0, 0]]),
                                          _t(b, [1], t, data=np.zeros(1, dtype=t))]),
        "MIRROR_PAD": _mv_simple("MIRROR_PAD", x4, [1, 6, 6, 3],
                                 lambda b, t: [_const(b, [[0, 0], [1, 1], [1, 1], [0, 0]])],
                                 lambda: _opts("MirrorPad", mode=S.MirrorPadMode.REFLECT)),
        "GATHER": _mv_simple("GATHER", x4, [1, 2, 4, 3], lambda b, t: [_const(b, [0, 2])],
                             lambda: _opts("Gather", axis=1)),
        "TILE": _mv_simple("TILE", x4, [1, 8, 4, 3], lambda b, t: [_const(b, [1, 2, 1, 1])]),
        "DEPTH_TO_SPACE": _mv_simple("DEPTH_TO_SPACE", [1, 2, 2, 4], [1, 4, 4, 1],
                                     opts=lambda: _opts("DepthToSpace", blockSize=2)),
        "SPACE_TO_DEPTH": _mv_simple("SPACE_TO_DEPTH", x4, [1, 2, 2, 12],
                                     opts=lambda: _opts("SpaceToDepth", blockSize=2)),
        "RESIZE_BILINEAR": _mv_simple("RESIZE_BILINEAR", x4, [1, 8, 8, 3], lambda b, t: [_const(b, [8, 8])],
                                      lambda: _opts("ResizeBilinear")),
        "RESIZE_NEAREST_NEIGHBOR": _mv_simple("RESIZE_NEAREST_NEIGHBOR", x4, [1, 8, 8, 3],
                                              lambda b, t: [_const(b, [8, 8])],
                                              lambda: _opts("ResizeNearestNeighbor")),
    }
    for op, make in mv.items():
        cases += _movement(op, make)
    cases += _elementwise_cases()
    cases += _ops21t(x4)
    return cases


def _elementwise_cases() -> list[Case]:
    """Elementwise math, comparisons, logical ops, SELECT_V2, ADD_N, FILL (issue 21)."""
    cases: list[Case] = []
    for op in ("ABS", "NEG", "CEIL", "FLOOR", "ROUND", "SQRT", "RSQRT", "EXP", "LOG", "SIN", "COS",
               "SQUARE", "ELU", "ZEROS_LIKE"):
        cases += _unary(op, _same(ACT + ("int64",)))
    cases += _unary("LOGICAL_NOT", [("bool", "bool")], quant=False)
    for op in ("SQUARED_DIFFERENCE", "FLOOR_MOD", "POW"):
        cases += _binary(op, None)
    for op in ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL",
               "LOGICAL_AND", "LOGICAL_OR"):
        for t in (("bool",) if op.startswith("LOGICAL") else ANY):
            def build(b: TfliteBuilder, t: str = t, op: str = op) -> None:
                qt = t not in ("int32", "int64")
                x1, x2 = _t(b, [1, 2, 3], t, qt), _t(b, [1, 2, 3], t, qt)
                _finish(b, _code(op), [x1, x2], [_t(b, [1, 2, 3], "bool", False)], [x1, x2])
            cases.append(Case(op, f"{t} x {t} -> bool", build))
    for t in ANY:
        def sel(b: TfliteBuilder, t: str = t) -> None:
            qt = t not in ("int32", "int64")
            c, x1, x2 = _t(b, [1, 2, 3], "bool", False), _t(b, [1, 2, 3], t, qt), _t(b, [1, 2, 3], t, qt)
            _finish(b, _code("SELECT_V2"), [c, x1, x2], [_t(b, [1, 2, 3], t, qt)], [c, x1, x2])
        cases.append(Case("SELECT_V2", f"bool x {t} x {t} -> {t}", sel))

        def fill(b: TfliteBuilder, t: str = t) -> None:
            qt = t not in ("int32", "int64")
            v = _t(b, [], t, qt)
            _finish(b, _code("FILL"), [_const(b, [2, 3]), v], [_t(b, [2, 3], t, qt)], [v])
        cases.append(Case("FILL", f"int32 dims, {t} value -> {t}", fill))
    for t in ACT:
        def add_n(b: TfliteBuilder, t: str = t) -> None:
            qt = t != "int32"
            xs = [_t(b, [1, 2, 3], t, qt) for _ in range(3)]
            _finish(b, _code("ADD_N"), xs, [_t(b, [1, 2, 3], t, qt)], xs)
        cases.append(Case("ADD_N", f"3 x {t} -> {t}", add_n))
    return cases


def _ops21t(x4: list[int]) -> list[Case]:
    """Issue 21's tensor / shape / matmul operators (tensor.py, matmul.py)."""
    no_crops = lambda b, t: [_const(b, [2, 2]), _const(b, [[0, 0], [0, 0]])]  # noqa: E731
    mv = {
        "REVERSE_V2": _mv_simple("REVERSE_V2", x4, x4, lambda b, t: [_const(b, [1])]),
        "BATCH_TO_SPACE_ND": _mv_simple("BATCH_TO_SPACE_ND", [4, 2, 2, 3], x4, no_crops),
        "SPACE_TO_BATCH_ND": _mv_simple("SPACE_TO_BATCH_ND", x4, [4, 2, 2, 3], no_crops),
        "BROADCAST_TO": _mv_simple("BROADCAST_TO", [1, 4, 1, 3], x4, lambda b, t: [_const(b, x4)]),
        "GATHER_ND": _mv_simple("GATHER_ND", x4, [2, 4, 3], lambda b, t: [_const(b, [[0, 1], [0, 3]])]),
    }
    cases = [c for op, make in mv.items() for c in _movement(op, make)]

    def dus(b: TfliteBuilder, t: str) -> None:
        x, u = _t(b, x4, t), _t(b, [1, 2, 2, 3], t)
        _finish(b, _code("DYNAMIC_UPDATE_SLICE"), [x, u, _const(b, [0, 1, 1, 0])], [_t(b, x4, t)], [x, u])
    cases += _movement("DYNAMIC_UPDATE_SLICE", dus)

    def cumsum(b: TfliteBuilder, t: str) -> None:
        x = _t(b, x4, t, t != "int32")
        _finish(b, _code("CUMSUM"), [x, _const(b, 2)], [_t(b, x4, t, t != "int32")], [x], _opts("Cumsum"))
    cases += _movement("CUMSUM", cumsum, ACT + ("int64",))

    def reduce_all(b: TfliteBuilder, t: str) -> None:
        x = _t(b, x4, t)
        _finish(b, _code("REDUCE_ALL"), [x, _const(b, [1, 2])], [_t(b, [1, 1, 1, 3], t)], [x],
                _opts("Reducer", keepDims=True))
    cases += _movement("REDUCE_ALL", reduce_all, ("bool", "int8", "float32"))
    cases += _unary("L2_NORMALIZATION", _same(ACT), lambda: _opts("L2Norm"))
    cases += _pool("L2_POOL_2D")
    for t in ACT:
        def bmm(b: TfliteBuilder, t: str = t) -> None:
            q = t != "int32"
            x1, x2 = _t(b, [1, 2, 3], t, q), _t(b, [1, 3, 4], t, q)
            _finish(b, _code("BATCH_MATMUL"), [x1, x2], [_t(b, [1, 2, 4], t, q)], [x1, x2], _opts("BatchMatMul"))
        cases.append(Case("BATCH_MATMUL", f"{t} x {t} -> {t}", bmm))
    return cases


NOT_PROBED = {
    "SVDF": "several weight, bias and state tensors with one fixed type each (int8/int16/int32 or "
            "all float32): tests/test_ops_svdf.py covers both, TFLM's only combinations",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "about 20 operands whose types follow the 8x8_16 or float "
                                    "scheme: tests/test_ops_lstm.py",
    "CUSTOM:Signal*": "each signal op has one signature (TFLM's signal library): tests/test_ops_signal.py",
    "READ_VARIABLE, ASSIGN_VARIABLE, CALL_ONCE": "resource variables: byte copies of any type, which "
                                                 "only a multi-subgraph model exercises: tests/test_ops_state.py",
    "IF, WHILE": "control flow: subgraphs copied into subgraph 0 by the frontend, the IF select a byte "
                 "copy of any type: tests/test_ops_control_flow.py",
    "CUSTOM:TFLite_Detection_PostProcess": "float32 only in TFLM (box encodings, scores, anchors and the four "
                                           "outputs): tests/test_ops_detection.py",
    "EMBEDDING_LOOKUP": "int32 ids with a float32 or int8 table, int8 -> float32 dequantised: "
                        "tests/test_ops_tensor.py covers each against TFLM",
    "BROADCAST_ARGS": "int32 or int64 shapes only: tests/test_ops_tensor.py",
}


def model_bytes(case: Case) -> bytes:
    b = TfliteBuilder()
    case.build(b)
    return b.build()


# ---- TFLM side (child processes) ------------------------------------------------------------

def _tflm_one(data: bytes) -> str | None:
    """None if TFLM allocates and runs the model, else the first error line it printed."""
    import tempfile

    from tflite_micro.python.tflite_micro import runtime

    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        reason = None
        try:
            _feed_and_run(runtime.Interpreter.from_bytes(data, arena_size=1 << 18))
        except Exception as e:  # noqa: BLE001 - TFLM raises RuntimeError/ValueError
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        if reason is not None:
            err.seek(0)
            lines = [ln.strip() for ln in err.read().decode(errors="replace").splitlines() if ln.strip()]
            detail = next((ln for ln in lines if ".cc:" in ln or "not supported" in ln.lower()), None)
            reason = _short(detail or reason)
        return reason


def _feed_and_run(it: object) -> None:
    k = 0
    while True:
        try:
            det = it.get_input_details(k)
        except Exception:  # noqa: BLE001 - past the last input
            break
        dtype = np.dtype(det["dtype"])
        it.set_input(np.ones(det["shape"], dtype=dtype), k)
        k += 1
    it.invoke()


def _short(line: str) -> str:
    line = line.replace("tensorflow/lite/micro/kernels/", "")
    return line if len(line) <= 140 else line[:137] + "..."


def probe_tflm() -> dict[str, dict[str, str | None]]:
    """{op: {combo: None (accepted) or the reason}}; a child that dies refuses the case it was on."""
    ops = list(dict.fromkeys(c.op for c in all_cases()))
    out: dict[str, dict[str, str | None]] = {}
    for op in ops:
        combos = [c.combo for c in all_cases() if c.op == op]
        got: dict[str, str | None] = {}
        while len(got) < len(combos):
            left = [c for c in combos if c not in got]
            r = subprocess.run([sys.executable, __file__, "--tflm-worker", op, "--skip", json.dumps(list(got))],
                               capture_output=True, text=True, timeout=600)
            for ln in r.stdout.splitlines():
                d = json.loads(ln)
                got[d["combo"]] = None if d["ok"] else d["reason"]
            if r.returncode != 0:
                crashed = next(c for c in left if c not in got)
                got[crashed] = f"TFLM aborted (exit {r.returncode})"
        out[op] = {c: got[c] for c in combos}
    return out


# ---- our side -------------------------------------------------------------------------------

def ours_one(data: bytes) -> str | None:
    """None if stm32ai compiles the single-op model, else its one-line reason."""
    import tempfile

    from stm32ai.errors import Stm32aiError
    from stm32ai.frontend.tflite_reader import load_tflite
    from stm32ai.pipeline import compile_graph

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.tflite"
        p.write_bytes(data)
        try:
            compile_graph(load_tflite(p))
        except Stm32aiError as e:
            return _short(str(e))
        except Exception as e:  # noqa: BLE001 - a crash is a refusal the audit must show
            return _short(f"internal error: {type(e).__name__}: {e}")
    return None


def probe_ours() -> dict[str, dict[str, str | None]]:
    out: dict[str, dict[str, str | None]] = {}
    with contextlib.redirect_stderr(open(os.devnull, "w")):  # noqa: SIM115
        for c in all_cases():
            out.setdefault(c.op, {})[c.combo] = ours_one(model_bytes(c))
    return out


# ---- the doc ----------------------------------------------------------------------------------

def render(tflm: dict[str, dict[str, str | None]], ours: dict[str, dict[str, str | None]]) -> str:
    lines = [
        "# Operator types: TFLite Micro's accepted combinations vs ours",
        "",
        "Generated by `python tests/op_types_probe.py` (do not edit by hand; `--check` tells whether",
        "it is up to date, and `tests/test_op_types.py` fails when it is not). Each row is one type",
        "combination of a hand-built single-op model; **TFLM** is whether TFLite Micro's interpreter",
        "(the `tflite-micro` wheel, reference kernels) allocates it (every kernel's `Prepare`) and runs",
        "it, **ours** whether `stm32ai` compiles it. Only the combinations at least one side accepts",
        "are listed; refusals on both sides are counted at the end of each operator.",
        "The rule (docs/references.md, DESIGN.md section 7): what TFLM accepts for an operator we",
        "support, we accept; the exceptions are listed with their reason and the test",
        "(`tests/test_op_types.py::test_we_accept_every_type_combination_tflm_accepts`) skips",
        "exactly those. We also accept some combinations TFLM refuses (legacy uint8 models,",
        "RELU_N1_TO_1, data movement of any type, ...): `validate` checks such models against",
        "LiteRT-ref where it runs them (docs/references.md); this table does not probe LiteRT.",
        "",
        "Numbers are not compared here: each operator's tests check bit-exactness against TFLM",
        "(`tests/test_ops_*.py`, `tests/test_op_types.py`).",
        "",
        "Quantisation used per type: int8 (0.05, -3), uint8 (0.05, 128), int16 (0.001, 0), int32",
        "unquantised (QUANTIZE/DEQUANTIZE: (0.0005, 0)); table/exp ops get TFLite's fixed output",
        "quantisation; weighted ops: symmetric weights (scale 0.02), bias scale input x weights.",
        "",
        "## Not probed",
        "",
    ]
    for op, why in NOT_PROBED.items():
        lines.append(f"* `{op}`: {why}.")
    lines += ["", "## Summary", "",
              "| operator | combinations TFLM accepts | we accept of those | we accept, TFLM refuses |",
              "|---|---|---|---|"]
    for op in tflm:
        t_ok = [c for c, r in tflm[op].items() if r is None]
        both = [c for c in t_ok if ours[op].get(c) is None]
        extra = [c for c, r in ours[op].items() if r is None and tflm[op].get(c) is not None]
        lines.append(f"| {op} | {len(t_ok)} | {len(both)} | {len(extra)} |")
    lines += ["", "## Per operator", ""]
    for op in tflm:
        lines += [f"### {op}", "", "| types | TFLM | ours | note |", "|---|---|---|---|"]
        refused_both = 0
        for combo, t_reason in tflm[op].items():
            o_reason = ours[op].get(combo)
            if t_reason is not None and o_reason is not None:
                refused_both += 1
                continue
            note = ""
            if t_reason is None and o_reason is not None:
                note = EXCLUSIONS.get((op, combo), "**gap**: " + o_reason)
            elif t_reason is not None:
                note = f"TFLM refuses: {t_reason}"
            cell = lambda r: "yes" if r is None else "no"  # noqa: E731
            lines.append(f"| {combo} | {cell(t_reason)} | {cell(o_reason)} | {_md(note)} |")
        lines += ["", f"Refused by both: {refused_both} of {len(tflm[op])} combinations probed.", ""]
    return "\n".join(lines).rstrip() + "\n"


def _md(s: str) -> str:
    return s.replace("|", "\\|")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the JSON or the doc is stale")
    ap.add_argument("--tflm-worker", help=argparse.SUPPRESS)
    ap.add_argument("--skip", default="[]", help=argparse.SUPPRESS)
    ap.add_argument("--reuse-tflm", action="store_true", help="keep the committed TFLM results")
    args = ap.parse_args(argv)
    if args.tflm_worker:
        skip = set(json.loads(args.skip))
        for c in (c for c in all_cases() if c.op == args.tflm_worker and c.combo not in skip):
            reason = _tflm_one(model_bytes(c))
            print(json.dumps({"combo": c.combo, "ok": reason is None, "reason": reason}), flush=True)
        return 0
    sys.path.insert(0, str(ROOT))
    tflm = json.loads(TFLM_JSON.read_text()) if args.reuse_tflm else probe_tflm()
    doc = render(tflm, probe_ours())
    tflm_text = json.dumps(tflm, indent=1, sort_keys=False) + "\n"
    if args.check:
        stale = [p.name for p, text in ((TFLM_JSON, tflm_text), (DOC, doc))
                 if not p.exists() or p.read_text() != text]
        if stale:
            print(f"out of date: {', '.join(stale)} — run python tests/op_types_probe.py", file=sys.stderr)
            return 1
        return 0
    TFLM_JSON.write_text(tflm_text)
    DOC.write_text(doc)
    print(f"wrote {TFLM_JSON.relative_to(ROOT)} and {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
