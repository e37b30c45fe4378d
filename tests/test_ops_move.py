"""Shape and data-movement ops (movement.py, resize.py, ai_movement.c, ai_resize.c).

* every move_*/resize_* fixture (real converter output) runs bit-exact against TFLite Micro;
* hand-built graphs run the generated C on the host against numpy for the paths the
  converter rarely emits (other element types, every strided-slice mask, >10 inputs,
  unused outputs, batch_dims, out-of-range indices);
* unsupported variants are refused at generate time with the op and the reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, random_data, refused_by_generate

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op, Quant
from stm32ai.passes.lower import registry
from stm32ai.passes.lower.movement import strided_slice_ranges
from stm32ai.pipeline import compile_graph
from stm32ai.validate.host import run_compiled
from stm32ai.validate.reference import random_inputs
from stm32ai.validate.run import validate_model

MOVE_FIXTURES = sorted(FIXTURES.glob("move_*.tflite")) + sorted(FIXTURES.glob("resize_*.tflite"))
# Runtime GATHER indices: valid values are [0, n) (random int32 data would be out of range).
INDEX_FIXTURES = {"move_gather_runtime": 9, "move_gather_embedding": 20}
# TFLM refuses these (concatenation.cc: at most 10 inputs); LiteRT-ref is the verdict.
TFLM_REFUSES = {"move_concat_many"}


def _base(path: Path) -> str:
    return path.stem.rsplit("_", 1)[0]


def _check(res, tflm_expected: bool) -> None:
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict, f"no reference ran {res.model}: {[c.unavailable for c in res.comparisons]}"
    v = verdict[0]
    if tflm_expected:
        assert v.reference == "tflm", f"{res.model}: TFLM did not run: {res.comparisons[0].unavailable}"
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok, (f"{res.model} output {j} vs {v.reference}: max LSB {m.max_lsb}, "
                    f"max rel err {m.max_rel_err:.3g}")


def test_fixtures_present():
    names = {_base(p) for p in MOVE_FIXTURES}
    assert len(names) >= 19, names
    for stem in INDEX_FIXTURES:
        assert (FIXTURES / "indices" / f"{stem}_int8.tflite").exists()


@pytest.mark.parametrize("model", MOVE_FIXTURES, ids=lambda p: p.stem)
def test_fixture_bit_exact(model):
    _check(validate_model(model, n=2, seed=7), _base(model) not in TFLM_REFUSES)


@pytest.mark.parametrize("model", sorted((FIXTURES / "indices").glob("move_*.tflite")), ids=lambda p: p.stem)
def test_runtime_index_fixture_bit_exact(model):
    high = INDEX_FIXTURES[_base(model)]
    arrays = random_inputs(model, 3, seed=5)
    rng = np.random.default_rng(1)
    arrays = [rng.integers(0, high, a.shape).astype(np.int32) if a.dtype == np.int32 else a
              for a in arrays]
    _check(validate_model(model, arrays, n=3), True)


# ---------------------------------------------------------------------------------------------
# Hand-built graphs, run through the whole compiler and the generated C on the host
# ---------------------------------------------------------------------------------------------

class _Builder:
    def __init__(self) -> None:
        self.g = Graph("t", [], [], [], [])
        self.values: list[np.ndarray] = []

    def input(self, x: np.ndarray, quant: Quant | None = None) -> int:
        tid = self.g.add_tensor(f"in{len(self.g.inputs)}", x.shape, x.dtype.name, quant)
        self.g.inputs.append(tid)
        self.values.append(x)
        return tid

    def const(self, v) -> int:
        return self.g.add_const(f"c{len(self.g.tensors)}", np.asarray(v))

    def op(self, op_type: str, inputs: list[int], shapes: list[tuple[int, ...]], dtype: str,
           quant: Quant | None = None, **options) -> list[int]:
        outs = [self.g.add_tensor(f"t{len(self.g.tensors)}", s, dtype, quant) for s in shapes]
        self.g.ops.append(Op(op_type, list(inputs), outs, options, index=len(self.g.ops)))
        return outs

    def run(self, outputs: list[int]) -> list[np.ndarray]:
        self.g.outputs = list(outputs)
        return run_compiled(compile_graph(self.g), [self.values])[0]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "float32", "bool"])
def test_any_element_type(dtype):
    rng = np.random.default_rng(0)
    x = random_data((2, 3, 4, 5), dtype, rng)
    fillv = np.asarray(True if dtype == "bool" else (-5 if dtype != "uint8" else 7), dtype)
    b = _Builder()
    t = b.input(x)
    perm = (3, 0, 2, 1)
    pads = [(1, 0), (0, 2), (1, 1), (2, 1)]
    outs = [
        b.op("TRANSPOSE", [t, b.const(np.int32(perm))], [np.transpose(x, perm).shape], dtype)[0],
        b.op("PADV2", [t, b.const(np.int32(pads)), b.const(fillv.reshape(()))],
             [np.pad(x, pads).shape], dtype)[0],
        b.op("MIRROR_PAD", [t, b.const(np.int64(pads))], [np.pad(x, pads).shape], dtype,
             mode="SYMMETRIC")[0],
        b.op("STRIDED_SLICE", [t, b.const(np.int32([0, 2, -1, 4])), b.const(np.int32([2, 0, 0, 0])),
                               b.const(np.int32([1, -1, -2, -3]))], [(2, 2, 2, 2)], dtype,
             begin_mask=0, end_mask=4)[0],
        b.op("GATHER", [t, b.const(np.int64([3, 0, 0, 2, 1]))], [(2, 3, 5, 5)], dtype, axis=2)[0],
        b.op("CONCATENATION", [t, t], [(2, 6, 4, 5)], dtype, axis=-3)[0],
    ]
    got = b.run(outs)
    want = [np.transpose(x, perm), np.pad(x, pads, constant_values=fillv),
            np.pad(x, pads, mode="symmetric"), x[0:2, 2:0:-1, -1::-2, 4::-3],
            np.take(x, [3, 0, 0, 2, 1], axis=2), np.concatenate([x, x], axis=1)]
    for k, (a, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_array_equal(a, w, err_msg=f"output {k}")


def _numpy_index(begin, end, strides, bm, em, ell, new, shrink):
    idx = []
    for i, (b0, e0, s) in enumerate(zip(begin, end, strides, strict=True)):
        if ell >> i & 1:
            idx.append(Ellipsis)
        elif new >> i & 1:
            idx.append(np.newaxis)
        elif shrink >> i & 1:
            idx.append(b0)
        else:
            idx.append(slice(None if bm >> i & 1 else b0, None if em >> i & 1 else e0, s))
    return tuple(idx)


def _random_spec(rng, shape):
    """A random sparse slice spec (numpy's basic indexing has TF's semantics for it)."""
    n = int(rng.integers(1, len(shape) + 2))
    ell_at = int(rng.integers(0, n)) if rng.random() < 0.4 else -1
    begin, end, strides = [], [], []
    bm = em = ell = new = shrink = 0
    dim = 0
    for i in range(n):
        if i == ell_at:
            ell |= 1 << i
            begin.append(0), end.append(0), strides.append(1)
            dim = max(dim, len(shape) - (n - i - 1))  # only steers index magnitudes
            continue
        if rng.random() < 0.15:
            new |= 1 << i
            begin.append(0), end.append(0), strides.append(1)
            continue
        size = shape[min(dim, len(shape) - 1)]
        if rng.random() < 0.2:
            shrink |= 1 << i
            begin.append(int(rng.integers(-size, size))), end.append(0), strides.append(1)
        else:
            s = int(rng.choice([1, 1, 2, 3, -1, -2]))
            begin.append(int(rng.integers(-size - 2, size + 2)))
            end.append(int(rng.integers(-size - 2, size + 2)))
            strides.append(s)
            bm |= (1 << i) if rng.random() < 0.3 else 0
            em |= (1 << i) if rng.random() < 0.3 else 0
        dim += 1
    return begin, end, strides, dict(begin_mask=bm, end_mask=em, ellipsis_mask=ell,
                                      new_axis_mask=new, shrink_axis_mask=shrink)


def test_strided_slice_semantics_against_numpy():
    """The lowering's TFLite strided-slice index logic against numpy basic indexing."""
    rng = np.random.default_rng(3)
    checked = 0
    while checked < 400:
        shape = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(1, 5))))
        begin, end, strides, opts = _random_spec(rng, shape)
        x = np.arange(int(np.prod(shape))).reshape(shape)
        try:
            want = x[_numpy_index(begin, end, strides, opts["begin_mask"], opts["end_mask"],
                                  opts["ellipsis_mask"], opts["new_axis_mask"], opts["shrink_axis_mask"])]
        except IndexError:
            continue
        rs = strided_slice_ranges(shape, begin, end, strides, opts)
        if isinstance(rs, str):
            raise AssertionError(f"{shape} {begin} {end} {strides} {opts}: {rs}")
        got = x[np.ix_(*[np.asarray(r, np.int64) for r in rs])] if rs else x
        assert np.array_equal(got.reshape(want.shape) if got.size == want.size else got, want), \
            (shape, begin, end, strides, opts)
        checked += 1


def test_strided_slice_masks_on_host():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 4, 5, 6)).astype(np.float32)
    cases = [  # (begin, end, strides, options, numpy index)
        ([0, 1, 0], [0, 2, 3], [1, 1, 1], dict(ellipsis_mask=1), np.s_[..., 1:2, 0:3]),
        ([0, 1], [0, 3], [1, 1], dict(new_axis_mask=1), np.s_[np.newaxis, 1:3]),
        ([-1, 0, 2], [0, 0, 1], [1, 1, -1], dict(shrink_axis_mask=1, begin_mask=2, end_mask=2),
         np.s_[-1, :, 2:1:-1]),
        ([0, 0, 4, 5], [0, 0, 0, 0], [1, 1, -1, -2], dict(begin_mask=3, end_mask=15), np.s_[:, :, 4::-1, 5::-2]),
        ([1, 1, 1, 1], [1, 2, 3, 4], [1, 1, 2, 1], dict(offset=True), np.s_[1:2, 1:3, 1:4:2, 1:5]),
        ([0, 2], [0, 0], [1, 1], dict(ellipsis_mask=1, new_axis_mask=0, shrink_axis_mask=2),
         np.s_[..., 2]),
    ]
    b = _Builder()
    t = b.input(x)
    outs = []
    for begin, end, strides, opts, idx in cases:
        shape = x[idx].shape
        outs += b.op("STRIDED_SLICE", [t, b.const(np.int32(begin)), b.const(np.int32(end)),
                                       b.const(np.int32(strides))], [shape], "float32", **opts)
    got = b.run(outs)
    for k, (case, a) in enumerate(zip(cases, got, strict=True)):
        np.testing.assert_array_equal(a, x[case[4]], err_msg=f"case {k}")


def test_concat_and_pack_many_inputs_chain():
    rng = np.random.default_rng(5)
    xs = [rng.integers(-128, 128, (2, 3, 2)).astype(np.int8) for _ in range(23)]
    q = Quant(np.float32([0.05]), np.int64([3]))
    b = _Builder()
    ts = [b.input(x, q) for x in xs[:8]]  # graph inputs are capped; reuse them
    ins = [ts[i % 8] for i in range(23)]
    vals = [xs[i % 8] for i in range(23)]
    outs = [
        b.op("PACK", ins, [(2, 23, 3, 2)], "int8", q, axis=1, values_count=23)[0],
        b.op("CONCATENATION", ins[:11], [(2, 3, 22)], "int8", q, axis=-1)[0],
        b.op("CONCATENATION", ins[:10], [(20, 3, 2)], "int8", q, axis=0)[0],
    ]
    got = b.run(outs)
    np.testing.assert_array_equal(got[0], np.stack(vals, axis=1))
    np.testing.assert_array_equal(got[1], np.concatenate(vals[:11], axis=-1))
    np.testing.assert_array_equal(got[2], np.concatenate(vals[:10], axis=0))


def test_split_unpack_only_used_outputs():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(4, 6, 3)).astype(np.float32)
    b = _Builder()
    t = b.input(x)
    s = b.op("SPLIT", [b.const(np.int32(-2)), t], [(4, 2, 3)] * 3, "float32", num_splits=3)
    sv = b.op("SPLIT_V", [t, b.const(np.int32([1, -1, 2])), b.const(np.int32(0))],
              [(1, 6, 3), (1, 6, 3), (2, 6, 3)], "float32", num_splits=3)
    u = b.op("UNPACK", [t], [(4, 6)] * 3, "float32", axis=-1, num=3)
    got = b.run([s[2], sv[1], u[0], u[2]])
    np.testing.assert_array_equal(got[0], x[:, 4:6])
    np.testing.assert_array_equal(got[1], x[1:2])
    np.testing.assert_array_equal(got[2], x[..., 0])
    np.testing.assert_array_equal(got[3], x[..., 2])
    kinds = [op.kernel for op in b.g.ops]
    assert kinds.count("copy_nd") == 4, kinds  # one copy per used output, none for the rest


def test_gather_runtime_indices_batch_dims_and_out_of_range():
    rng = np.random.default_rng(7)
    p = rng.normal(size=(2, 5, 3)).astype(np.float32)
    idx = np.int32([[4, 0, 2, 2], [1, 3, 9, -1]])  # last two out of range: zeros
    b = _Builder()
    tp, ti = b.input(p), b.input(idx)
    o1 = b.op("GATHER", [tp, ti], [(2, 4, 3)], "float32", axis=1, batch_dims=1)[0]
    o2 = b.op("GATHER", [tp, b.const(np.int32([[2, 0], [1, 1]]))], [(2, 2, 2, 3)], "float32", axis=-2)[0]
    got = b.run([o1, o2])
    want = np.zeros((2, 4, 3), np.float32)
    for i in range(2):
        for k in range(4):
            if 0 <= idx[i, k] < 5:
                want[i, k] = p[i, idx[i, k]]
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], np.take(p, [[2, 0], [1, 1]], axis=1))


def test_depth_space_and_pad_layouts():
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (2, 3, 5, 8)).astype(np.int8)
    q = Quant(np.float32([0.1]), np.int64([-7]))
    b = _Builder()
    t = b.input(x, q)
    d2s = b.op("DEPTH_TO_SPACE", [t], [(2, 6, 10, 2)], "int8", q, block_size=2)[0]
    s2d = b.op("SPACE_TO_DEPTH", [d2s], [(2, 3, 5, 8)], "int8", q, block_size=2)[0]
    pad = b.op("PAD", [t, b.const(np.int32([[0, 0], [2, 1], [0, 3], [0, 0]]))], [(2, 6, 8, 8)],
               "int8", q)[0]
    refl = b.op("MIRROR_PAD", [t, b.const(np.int32([[1, 1], [2, 2], [4, 0], [0, 7]]))],
                [(4, 7, 9, 15)], "int8", q, mode="REFLECT")[0]
    got = b.run([d2s, s2d, pad, refl])
    n, h, w, c = x.shape
    want_d2s = x.reshape(n, h, w, 2, 2, 2).transpose(0, 1, 3, 2, 4, 5).reshape(n, 6, 10, 2)
    np.testing.assert_array_equal(got[0], want_d2s)
    np.testing.assert_array_equal(got[1], x)
    np.testing.assert_array_equal(got[2], np.pad(x, [(0, 0), (2, 1), (0, 3), (0, 0)], constant_values=-7))
    np.testing.assert_array_equal(got[3], np.pad(x, [(1, 1), (2, 2), (4, 0), (0, 7)], mode="reflect"))
    # PAD on H/W keeps whole pixels contiguous: one block of C bytes per copy
    pad_op = next(op for op in b.g.ops if op.outputs == [pad])
    assert pad_op.attrs["block"] == c


def test_transpose_needs_no_table():
    b = _Builder()
    t = b.input(np.zeros((1, 5, 7, 3), np.int8))
    o = b.op("TRANSPOSE", [t, b.const(np.int32([0, 3, 1, 2]))], [(1, 3, 5, 7)], "int8")[0]
    b.g.outputs = [o]
    c = compile_graph(b.g)
    op = c.graph.ops[0]
    assert op.kernel == "copy_nd" and op.inputs[1] == -1 and op.attrs["rank"] == 2


# ---------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------

def _refused(build) -> str:
    b = _Builder()
    outs = build(b)
    b.g.outputs = outs
    with pytest.raises(UnsupportedModelError) as e:
        compile_graph(b.g)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


Q1, Q2 = Quant(np.float32([0.1]), np.int64([0])), Quant(np.float32([0.2]), np.int64([0]))


@pytest.mark.parametrize("case,words", [
    ("concat_quant", ("CONCATENATION", "quantis")),
    ("concat_act", ("CONCATENATION", "RELU")),
    ("transpose_runtime_perm", ("TRANSPOSE", "permutation")),
    ("gather_int64_runtime", ("GATHER", "int32")),
    ("gather_const_out_of_range", ("GATHER", "outside")),
    ("bilinear_uint8", ("RESIZE_BILINEAR", "uint8")),
    ("bilinear_out_of_bounds", ("RESIZE_BILINEAR", "outside the input")),
    ("mirror_too_wide", ("MIRROR_PAD", "REFLECT")),
    ("padv2_runtime_value", ("PADV2", "constant")),
    ("slice_runtime_begin", ("STRIDED_SLICE", "constant")),
    ("rank7", ("TRANSPOSE", "rank 7")),
])
def test_unsupported_variants_are_refused(case, words):
    def build(b: _Builder) -> list[int]:
        x8 = np.zeros((1, 4, 4, 2), np.int8)
        if case == "concat_quant":
            a, c = b.input(x8, Q1), b.input(x8, Q2)
            return b.op("CONCATENATION", [a, c], [(1, 4, 4, 4)], "int8", Q1, axis=3)
        if case == "concat_act":
            a = b.input(x8.astype(np.float32))
            return b.op("CONCATENATION", [a, a], [(1, 4, 4, 4)], "float32", axis=3,
                        fused_activation_function="RELU")
        if case == "transpose_runtime_perm":
            a, p = b.input(x8), b.input(np.int32([0, 2, 1, 3]))
            return b.op("TRANSPOSE", [a, p], [(1, 4, 4, 2)], "int8")
        if case == "gather_int64_runtime":
            a, i = b.input(x8), b.input(np.int64([1, 2]))
            return b.op("GATHER", [a, i], [(1, 2, 4, 2)], "int8", axis=1)
        if case == "gather_const_out_of_range":
            a = b.input(x8)
            return b.op("GATHER", [a, b.const(np.int32([1, 4]))], [(1, 2, 4, 2)], "int8", axis=1)
        if case == "bilinear_uint8":
            a = b.input(x8.astype(np.uint8))
            return b.op("RESIZE_BILINEAR", [a, b.const(np.int32([8, 8]))], [(1, 8, 8, 2)], "uint8")
        if case == "bilinear_out_of_bounds":  # TFLite's integer path reads row 2 of 2
            a = b.input(np.zeros((1, 2, 2, 1), np.int8))
            return b.op("RESIZE_BILINEAR", [a, b.const(np.int32([65, 2]))], [(1, 65, 2, 1)], "int8")
        if case == "mirror_too_wide":
            a = b.input(x8)
            return b.op("MIRROR_PAD", [a, b.const(np.int32([[0, 0], [4, 0], [0, 0], [0, 0]]))],
                        [(1, 8, 4, 2)], "int8", mode="REFLECT")
        if case == "padv2_runtime_value":
            a, v = b.input(x8), b.input(np.int8([3]).reshape(()))
            return b.op("PADV2", [a, b.const(np.int32([[0, 0], [1, 0], [0, 0], [0, 0]])), v],
                        [(1, 5, 4, 2)], "int8")
        if case == "slice_runtime_begin":
            a, bg = b.input(x8), b.input(np.int32([0, 1, 0, 0]))
            return b.op("STRIDED_SLICE", [a, bg, b.const(np.int32([1, 3, 4, 2])),
                                          b.const(np.int32([1, 1, 1, 1]))], [(1, 2, 4, 2)], "int8")
        if case == "rank7":
            a = b.input(np.zeros((1, 2, 1, 2, 1, 2, 1), np.int8))
            return b.op("TRANSPOSE", [a, b.const(np.int32([6, 5, 4, 3, 2, 1, 0]))],
                        [(1, 2, 1, 2, 1, 2, 1)], "int8")
        raise AssertionError(case)

    msg = _refused(build)
    for w in words:
        assert w in msg, msg


def _patch_scale(src: Path, dst: Path, tensor_name: str, factor: float) -> None:
    """Copy a .tflite file, multiplying the first quantisation scale of one tensor."""
    import tflite

    buf = bytearray(src.read_bytes())
    sg = tflite.Model.GetRootAs(bytes(buf), 0).Subgraphs(0)
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        if t.Name().decode() == tensor_name:
            q = t.Quantization()
            pos = q._tab.Vector(q._tab.Offset(8))  # QuantizationParameters.scale
            old = np.frombuffer(bytes(buf[pos:pos + 4]), "<f4")[0]
            buf[pos:pos + 4] = np.float32(old * factor).astype("<f4").tobytes()
            dst.write_bytes(bytes(buf))
            return
    raise AssertionError(tensor_name)


def test_cli_refuses_concat_with_mismatched_quantisation(tmp_path):
    import tflite

    src = FIXTURES / "move_concat_int8.tflite"
    model = tflite.Model.GetRootAs(src.read_bytes(), 0)
    sg = model.Subgraphs(0)
    first_input = sg.Tensors(sg.Inputs(0)).Name().decode()
    bad = tmp_path / "concat_bad.tflite"
    _patch_scale(src, bad, first_input, 2.0)
    refused_by_generate(bad, tmp_path / "out", "CONCATENATION", "quantis")


def test_registry_lists_movement_ops():
    reg = registry()
    for op in ("CONCATENATION", "PAD", "PADV2", "MIRROR_PAD", "TRANSPOSE", "STRIDED_SLICE", "SLICE",
               "SPLIT", "SPLIT_V", "PACK", "UNPACK", "GATHER", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH",
               "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"):
        assert op in reg and reg[op].constraints, op
