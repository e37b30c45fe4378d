"""Specification of constant folding, canonicalisation and the support check.

Graphs are built by hand with the IR; every expected value below is worked out by hand
from TensorFlow/TFLite semantics (x[i, j, k] = 12*i + 4*j + k for the 2x3x4 test tensor),
not by re-running the numpy expression the pass uses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stm32ai.errors import UnsupportedModelError
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.ir import Graph, Op, Quant
from stm32ai.passes.canonicalize import canonicalize
from stm32ai.passes.check_support import check_supported
from stm32ai.passes.fold_constants import fold_constants

MODELS_DIR = Path(__file__).resolve().parents[2] / "shared" / "models"
if not MODELS_DIR.is_dir():
    MODELS_DIR = Path("/work/shared/models")
MODELS = sorted(MODELS_DIR.glob("**/*.tflite"))

X = np.arange(24, dtype=np.int32).reshape(2, 3, 4)  # x[i, j, k] = 12i + 4j + k


def empty_graph() -> Graph:
    return Graph(name="t", tensors=[], ops=[], inputs=[], outputs=[])


def fold_one(op_type: str, inputs: list, out_dtype: str, options: dict | None = None,
             n_out: int = 1, in_quant: Quant | None = None) -> list[np.ndarray]:
    """Fold a single op over constant inputs (None = omitted) and return its outputs."""
    g = empty_graph()
    ids = [-1 if v is None else g.add_const(f"in{i}", np.asarray(v), in_quant) for i, v in enumerate(inputs)]
    outs = [g.add_tensor(f"out{i}", (-1,), out_dtype) for i in range(n_out)]
    g.ops.append(Op(op_type, ids, outs, dict(options or {}), index=0))
    g.outputs = outs
    fold_constants(g)
    assert g.ops == [], f"{op_type} was not folded"
    for t in outs:
        assert g.tensors[t].is_const and g.tensors[t].dtype == out_dtype
        assert g.tensors[t].shape == g.tensors[t].data.shape
    return [g.tensors[t].data for t in outs]


def fold1(op_type: str, inputs: list, out_dtype: str = "int32", **options) -> np.ndarray:
    return fold_one(op_type, inputs, out_dtype, options)[0]


def i32(v) -> np.ndarray:
    return np.array(v, np.int32)


# -- the converter's real-world shape subgraph ---------------------------------------------

def flatten_graph(tail: int) -> tuple[Graph, dict[str, int]]:
    """Keras Flatten with a dynamic batch, as the TFLite converter emits it:
    x[1,4,4,8] -> SHAPE -> STRIDED_SLICE[0] (shrink) -> PACK(batch, tail) -> RESHAPE -> FC."""
    g = empty_graph()
    t = {}
    t["x"] = g.add_tensor("x", (1, 4, 4, 8), "float32")
    t["shape"] = g.add_tensor("shape", (4,), "int32")
    t["b0"], t["e0"], t["s0"] = g.add_const("b0", i32([0])), g.add_const("e0", i32([1])), g.add_const("s0", i32([1]))
    t["batch"] = g.add_tensor("batch", (), "int32")
    t["tail"] = g.add_const("tail", i32(tail))
    t["packed"] = g.add_tensor("packed", (2,), "int32")
    t["flat"] = g.add_tensor("flat", (-1, -1), "float32")  # unknown until the shape is folded
    t["w"] = g.add_const("w", np.ones((10, 128), np.float32))
    t["y"] = g.add_tensor("y", (1, 10), "float32")
    g.ops = [
        Op("SHAPE", [t["x"]], [t["shape"]], {"out_type": "INT32"}, 0),
        Op("STRIDED_SLICE", [t["shape"], t["b0"], t["e0"], t["s0"]], [t["batch"]],
           {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 1,
            "offset": False}, 1),
        Op("PACK", [t["batch"], t["tail"]], [t["packed"]], {"values_count": 2, "axis": 0}, 2),
        Op("RESHAPE", [t["x"], t["packed"]], [t["flat"]], {}, 3),
        Op("FULLY_CONNECTED", [t["flat"], t["w"], -1], [t["y"]], {"fused_activation_function": "NONE"}, 4),
    ]
    g.inputs, g.outputs = [t["x"]], [t["y"]]
    return g, t


@pytest.mark.parametrize("tail", [128, -1])
def test_keras_flatten_shape_subgraph_folds_away(tail):
    g, t = flatten_graph(tail)
    n_tensors = len(g.tensors)
    fold_constants(g)
    assert [(op.type, op.index) for op in g.ops] == [("RESHAPE", 3), ("FULLY_CONNECTED", 4)]
    np.testing.assert_array_equal(g.tensors[t["shape"]].data, [1, 4, 4, 8])
    batch = g.tensors[t["batch"]]
    assert batch.shape == () and batch.data.dtype == np.int32 and int(batch.data) == 1
    np.testing.assert_array_equal(g.tensors[t["packed"]].data, [1, tail])
    assert g.tensors[t["flat"]].shape == (1, 128)
    # tensor ids are stable: nothing renumbered, nothing removed from the list
    assert len(g.tensors) == n_tensors and all(x.id == i for i, x in enumerate(g.tensors))

    canonicalize(g)
    reshape = g.ops[0]
    assert (reshape.type, reshape.inputs, reshape.outputs, reshape.index) == ("RESHAPE", [t["x"]], [t["flat"]], 3)


def test_shape_of_a_resolved_reshape_folds_in_a_later_round():
    g = empty_graph()
    x = g.add_tensor("x", (1, 2, 3, 4), "int8")
    r = g.add_tensor("r", (-1, -1), "int8")
    s = g.add_tensor("s", (2,), "int32")
    n = g.add_tensor("n", (), "int32")
    y = g.add_tensor("y", (-1,), "int8")
    g.ops = [Op("RESHAPE", [x, g.add_const("c", i32([1, -1]))], [r], {}, 0),
             Op("SHAPE", [r], [s], {}, 1),
             Op("REDUCE_PROD", [s, g.add_const("ax", i32([0]))], [n], {"keep_dims": False}, 2),
             Op("RESHAPE", [r, n], [y], {}, 3)]  # scalar shape operand: what new_shape=[] looks like
    g.inputs, g.outputs = [x], [y]
    fold_constants(g)
    np.testing.assert_array_equal(g.tensors[s].data, [1, 24])
    assert int(g.tensors[n].data) == 24
    assert g.tensors[y].shape == (24,)
    assert [op.index for op in g.ops] == [0, 3]


# -- STRIDED_SLICE, every mask -------------------------------------------------------------

def strided(begin, end, strides, **masks):
    opts = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0,
            "shrink_axis_mask": 0, "offset": False}
    opts.update(masks)
    return fold1("STRIDED_SLICE", [X, i32(begin), i32(end), i32(strides)], **opts)


def test_strided_slice_negative_begin_and_stride():
    # x[0:2, 1:3, -1:0:-1]: last axis visits k = 3, 2, 1
    np.testing.assert_array_equal(strided([0, 1, -1], [2, 3, 0], [1, 1, -1]),
                                  [[[7, 6, 5], [11, 10, 9]], [[19, 18, 17], [23, 22, 21]]])


def test_strided_slice_shrink_axis_uses_begin_only():
    # x[0:2, -1, 0:4:2]: end of the shrunk axis is ignored
    out = strided([0, -1, 0], [2, 0, 4], [1, 1, 2], shrink_axis_mask=0b010)
    np.testing.assert_array_equal(out, [[8, 10], [20, 22]])


def test_strided_slice_begin_and_end_masks():
    # x[:1, 0:2, 1:]
    out = strided([1, 0, 1], [1, 2, 0], [1, 1, 1], begin_mask=0b001, end_mask=0b100)
    np.testing.assert_array_equal(out, [[[1, 2, 3], [5, 6, 7]]])


def test_strided_slice_masked_negative_stride():
    # x[0:2, 0:1, ::-2]
    out = strided([0, 0, 0], [2, 1, 0], [1, 1, -2], begin_mask=0b100, end_mask=0b100)
    np.testing.assert_array_equal(out, [[[3, 1]], [[15, 13]]])


def test_strided_slice_ellipsis():
    # x[..., 1:3]
    out = strided([0, 1], [0, 3], [1, 1], ellipsis_mask=0b01)
    np.testing.assert_array_equal(out, [[[1, 2], [5, 6], [9, 10]], [[13, 14], [17, 18], [21, 22]]])


def test_strided_slice_new_axis():
    # x[newaxis, 0:1]
    out = strided([0, 0], [0, 1], [1, 1], new_axis_mask=0b01)
    assert out.shape == (1, 1, 3, 4)
    np.testing.assert_array_equal(out[0, 0, 2], [8, 9, 10, 11])


def test_strided_slice_offset_means_end_is_a_size():
    # begin [1,0,1] + sizes [1,2,2] -> x[1:2, 0:2, 1:3]
    out = strided([1, 0, 1], [1, 2, 2], [1, 1, 1], offset=True)
    np.testing.assert_array_equal(out, [[[13, 14], [17, 18]]])


def test_strided_slice_clamps_out_of_range():
    out = strided([1, -100, 2], [100, 100, 100], [1, 2, 1])  # x[1:, ::2, 2:]
    np.testing.assert_array_equal(out, [[[14, 15], [22, 23]]])


# -- the other folders ---------------------------------------------------------------------

def test_slice_size_minus_one_runs_to_the_end():
    np.testing.assert_array_equal(fold1("SLICE", [X, i32([1, 0, 2]), i32([1, -1, 2])]),
                                  [[[14, 15], [18, 19], [22, 23]]])


def test_pack_and_unpack():
    np.testing.assert_array_equal(fold1("PACK", [i32([1, 2]), i32([3, 4])], axis=1, values_count=2),
                                  [[1, 3], [2, 4]])
    outs = fold_one("UNPACK", [i32([[1, 2, 3], [4, 5, 6]])], "int32", {"num": 3, "axis": -1}, n_out=3)
    assert [o.tolist() for o in outs] == [[1, 4], [2, 5], [3, 6]]


def test_gather():
    p = i32([[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(fold1("GATHER", [p, i32([2, 0])], axis=1, batch_dims=0), [[3, 1], [6, 4]])
    np.testing.assert_array_equal(fold1("GATHER", [p, i32([2, 0])], axis=-1, batch_dims=0), [[3, 1], [6, 4]])
    np.testing.assert_array_equal(fold1("GATHER", [p, i32(1)], axis=0, batch_dims=0), [4, 5, 6])
    np.testing.assert_array_equal(fold1("GATHER", [i32([1, 4, 4, 8]), i32([1, 2, 3])], axis=0), [4, 4, 8])


def test_reductions():
    out = fold1("REDUCE_PROD", [i32([4, 4, 8]), i32([0])], keep_dims=False)
    assert out.shape == () and int(out) == 128
    assert fold1("REDUCE_PROD", [i32([4, 4, 8]), i32(0)], keep_dims=True).tolist() == [128]
    assert fold1("SUM", [i32([[1, 2], [3, 4]]), i32([-1])], keep_dims=False).tolist() == [3, 7]
    assert fold1("SUM", [i32([[1, 2], [3, 4]]), i32([0, 1])], keep_dims=True).tolist() == [[10]]


def test_concatenation():
    assert fold1("CONCATENATION", [i32([1]), i32([-1, 7])], axis=0,
                 fused_activation_function="NONE").tolist() == [1, -1, 7]
    assert fold1("CONCATENATION", [i32([[1], [2]]), i32([[3], [4]])], axis=-1).tolist() == [[1, 3], [2, 4]]


def test_reshape_squeeze_expand_dims_of_constants():
    data = np.arange(6, dtype=np.float32)
    assert fold1("RESHAPE", [data, i32([3, -1])], "float32").shape == (3, 2)
    assert fold1("RESHAPE", [data], "float32", new_shape=[-1, 3]).shape == (2, 3)
    ones = np.zeros((1, 3, 1, 2), np.int8)
    assert fold1("SQUEEZE", [ones], "int8", squeeze_dims=[]).shape == (3, 2)
    assert fold1("SQUEEZE", [ones], "int8", squeeze_dims=[-2]).shape == (1, 3, 2)
    assert fold1("EXPAND_DIMS", [np.zeros((2, 3), np.int8), i32(-1)], "int8").shape == (2, 3, 1)
    assert fold1("EXPAND_DIMS", [np.zeros((2, 3), np.int8), i32([0])], "int8").shape == (1, 2, 3)


def test_cast_truncates_toward_zero():
    assert fold1("CAST", [np.float32([1.7, -1.7, 2.5, -0.5])]).tolist() == [1, -1, 2, 0]
    assert fold1("CAST", [i32([0, 2, -1])], "bool").tolist() == [False, True, True]
    assert fold1("CAST", [i32([3])], "float32").dtype == np.float32


def test_fill_and_range():
    assert fold1("FILL", [i32([2, 3]), i32(7)]).tolist() == [[7, 7, 7], [7, 7, 7]]
    assert fold1("FILL", [i32([2]), np.float32(0.5)], "float32").tolist() == [0.5, 0.5]
    assert fold1("RANGE", [i32(0), i32(10), i32(3)]).tolist() == [0, 3, 6, 9]
    assert fold1("RANGE", [i32(5), i32(0), i32(-2)]).tolist() == [5, 3, 1]
    assert fold1("RANGE", [np.float32(0), np.float32(1), np.float32(0.25)], "float32").tolist() == [
        0.0, 0.25, 0.5, 0.75]


def test_integer_arithmetic():
    a, b = i32([7, -7, 7, -7]), i32([2, 2, -2, -2])
    assert fold1("DIV", [a, b]).tolist() == [3, -3, -3, 3]  # C division: toward zero
    assert fold1("FLOOR_DIV", [a, b]).tolist() == [3, -4, -4, 3]
    assert fold1("ADD", [i32([[1], [2]]), i32([10, 20])]).tolist() == [[11, 21], [12, 22]]
    assert fold1("SUB", [i32([1, 2]), i32([3])]).tolist() == [-2, -1]
    assert fold1("SUB", [i32([1, 2]), i32([3])], fused_activation_function="RELU").tolist() == [0, 0]
    assert fold1("MUL", [i32([4, 4]), i32(8)], fused_activation_function="RELU6").tolist() == [6, 6]
    assert fold1("MUL", [np.int64([4]), np.int64([8])], "int64").tolist() == [32]


def test_transpose():
    assert fold1("TRANSPOSE", [i32([[1, 2, 3], [4, 5, 6]]), i32([1, 0])]).tolist() == [[1, 4], [2, 5], [3, 6]]


def test_dequantize_float16_and_int8():
    out = fold1("DEQUANTIZE", [np.float16([0.5, -2, 65504])], "float32")
    assert out.dtype == np.float32 and out.tolist() == [0.5, -2.0, 65504.0]
    per_tensor = Quant(np.float32([0.5]), np.int64([-1]))
    out = fold_one("DEQUANTIZE", [np.int8([-128, 0, 127])], "float32", in_quant=per_tensor)[0]
    assert out.tolist() == [-63.5, 0.5, 64.0]
    per_channel = Quant(np.float32([0.5, 2.0]), np.int64([0, 1]), axis=1)
    out = fold_one("DEQUANTIZE", [np.int8([[1, 2], [3, 4]])], "float32", in_quant=per_channel)[0]
    assert out.tolist() == [[0.5, 2.0], [1.5, 6.0]]
    per_row = Quant(np.float32([0.5, 2.0]), np.int64([0, 1]), axis=0)
    out = fold_one("DEQUANTIZE", [np.int8([[1, 2], [3, 4]])], "float32", in_quant=per_row)[0]
    assert out.tolist() == [[0.5, 1.0], [4.0, 6.0]]


# -- what must NOT fold --------------------------------------------------------------------

def single_op_graph(op_type: str, consts: list[np.ndarray], out_dtype: str, quant: Quant | None = None,
                    out_quant: Quant | None = None, **options) -> Graph:
    g = empty_graph()
    ids = [g.add_const(f"c{i}", c, quant) for i, c in enumerate(consts)]
    out = g.add_tensor("y", (-1,), out_dtype, out_quant)
    g.ops = [Op(op_type, ids, [out], options, 0)]
    g.outputs = [out]
    return fold_constants(g)


def test_float_and_quantised_arithmetic_is_left_to_the_kernels():
    assert len(single_op_graph("ADD", [np.float32([1]), np.float32([2])], "float32").ops) == 1
    q = Quant(np.float32([0.1]), np.int64([0]))
    assert len(single_op_graph("ADD", [np.int8([1]), np.int8([2])], "int8", q, q).ops) == 1


def test_requantising_data_movement_is_not_folded():
    qa, qb = Quant(np.float32([0.1]), np.int64([0])), Quant(np.float32([0.2]), np.int64([0]))
    g = single_op_graph("RESHAPE", [np.int8([1, 2]), i32([2, 1])], "int8", qa, qb)
    assert len(g.ops) == 1  # values would need rescaling, which is the kernel's job


def test_inconsistent_constants_fail_with_one_line():
    with pytest.raises(UnsupportedModelError) as e:
        single_op_graph("DIV", [i32([1]), i32([0])], "int32")
    assert "op #0 (DIV)" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UnsupportedModelError) as e:
        single_op_graph("GATHER", [i32([1, 2]), i32([5])], "int32", axis=0)
    assert "GATHER" in str(e.value)


def test_reshape_to_an_impossible_shape_is_rejected():
    g = empty_graph()
    x = g.add_tensor("x", (1, 2, 3), "float32")
    y = g.add_tensor("y", (-1, -1), "float32")
    g.ops = [Op("RESHAPE", [x, g.add_const("s", i32([5, -1]))], [y], {}, 7)]
    g.inputs, g.outputs = [x], [y]
    with pytest.raises(UnsupportedModelError) as e:
        fold_constants(g)
    assert "op #7 (RESHAPE)" in str(e.value) and "6 elements" in str(e.value)


@pytest.mark.parametrize("shape", [[2.0, np.nan], [2.5, 3.0], [np.inf, 1.0]])
def test_reshape_to_a_non_integer_shape_is_rejected(shape):
    """A float shape operand (a malformed model: found by the fuzz campaign, seed 20261128) is
    refused in one line, not truncated or turned into an internal error."""
    g = empty_graph()
    x = g.add_tensor("x", (1, 2, 3), "float32")
    y = g.add_tensor("y", (-1, -1), "float32")
    g.ops = [Op("RESHAPE", [x, g.add_const("s", np.asarray(shape, dtype=np.float32))], [y], {}, 3)]
    g.inputs, g.outputs = [x], [y]
    with pytest.raises(UnsupportedModelError, match="non-integer values"):
        fold_constants(g)


def test_dead_ops_are_removed_and_ids_stay():
    g = empty_graph()
    x = g.add_tensor("x", (1, 4), "float32")
    y = g.add_tensor("y", (1, 4), "float32")
    unused = g.add_tensor("unused", (1, 4), "float32")
    also_unused = g.add_tensor("also_unused", (1, 4), "float32")
    g.ops = [Op("RELU", [x], [y], {}, 0), Op("TANH", [x], [unused], {}, 1),
             Op("LOGISTIC", [unused], [also_unused], {}, 2)]
    g.inputs, g.outputs = [x], [y]
    fold_constants(g)
    assert [op.index for op in g.ops] == [0]
    assert [t.id for t in g.tensors] == [x, y, unused, also_unused] == [0, 1, 2, 3]


# -- canonicalize ----------------------------------------------------------------------------

def test_shape_only_ops_become_single_input_reshapes():
    g = empty_graph()
    x = g.add_tensor("x", (1, 1, 8), "int8")
    a = g.add_tensor("a", (1, 8), "int8")
    b = g.add_tensor("b", (1, 8, 1), "int8")
    c = g.add_tensor("c", (8,), "int8")
    d = g.add_tensor("d", (8,), "int8")
    g.ops = [Op("SQUEEZE", [x], [a], {"squeeze_dims": [1]}, 0),
             Op("EXPAND_DIMS", [a, g.add_const("ax", i32(-1))], [b], {}, 1),
             Op("RESHAPE", [b, g.add_const("s", i32([8]))], [c], {}, 2),
             Op("RELU", [c], [d], {}, 3)]
    g.inputs, g.outputs = [x], [d]
    canonicalize(fold_constants(g))
    assert [(op.type, op.inputs, op.outputs, op.index) for op in g.ops] == [
        ("RESHAPE", [x], [a], 0), ("RESHAPE", [a], [b], 1), ("RESHAPE", [b], [c], 2), ("RELU", [c], [d], 3)]


@pytest.mark.parametrize("shape", [(-1, 4), (0, 4)])
def test_unresolvable_shapes_are_rejected(shape):
    g = empty_graph()
    x = g.add_tensor("x", (1, 4), "float32")
    y = g.add_tensor("y", shape, "float32")
    g.ops = [Op("RELU", [x], [y], {}, 5)]
    g.inputs, g.outputs = [x], [y]
    with pytest.raises(UnsupportedModelError) as e:
        canonicalize(g)
    msg = str(e.value)
    assert msg.startswith("dynamic shape") and "op #5 (RELU)" in msg and "'y'" in msg and "\n" not in msg


# -- check_supported -------------------------------------------------------------------------

def support_graph() -> Graph:
    g = empty_graph()
    x = g.add_tensor("x", (1, 4), "int16")
    foo, bar, baz = (g.add_tensor(n, (1, 4), "int16") for n in ("foo", "bar", "baz"))
    g.ops = [Op("ADD", [x, x], [foo], {}, 0), Op("SQUARE", [foo], [bar], {}, 3),
             Op("CONV_2D", [bar], [baz], {}, 7)]
    g.inputs, g.outputs = [x], [baz]
    return g


def test_check_supported_lists_every_problem():
    def conv_check(op: Op, g: Graph) -> str | None:
        return "int16 activations not supported" if g.tensors[op.inputs[0]].dtype == "int16" else None

    with pytest.raises(UnsupportedModelError) as e:
        check_supported(support_graph(), {"ADD": lambda op, g: None, "CONV_2D": conv_check})
    assert str(e.value) == (
        "unsupported operators: op #3 SQUARE (tensor 'bar'); "
        "op #7 CONV_2D (tensor 'baz': int16 activations not supported) — see 'stm32ai supported-ops'")


def test_check_supported_passes_and_survives_a_crashing_checker():
    ok = dict.fromkeys(("ADD", "SQUARE", "CONV_2D"), lambda op, g: None)
    assert check_supported(support_graph(), ok) is None
    with pytest.raises(UnsupportedModelError) as e:
        check_supported(support_graph(), {**ok, "SQUARE": lambda op, g: 1 / 0})
    assert "op #3 SQUARE" in str(e.value) and "ZeroDivisionError" in str(e.value)


# -- the corpus ------------------------------------------------------------------------------

_FOLDABLE = {"SHAPE", "STRIDED_SLICE", "SLICE", "PACK", "UNPACK", "GATHER", "REDUCE_PROD", "SUM",
             "CONCATENATION", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "CAST", "FILL", "RANGE", "TRANSPOSE"}


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_corpus_models_fold_and_canonicalize(path):
    g = load_tflite(path)
    n_tensors = len(g.tensors)
    before = {t.id: t.shape for t in g.tensors}
    canonicalize(fold_constants(g))
    assert len(g.tensors) == n_tensors
    for op in g.ops:
        assert op.type not in ("SQUEEZE", "EXPAND_DIMS", "SHAPE")
        if op.type in _FOLDABLE:
            assert not all(g.tensors[i].is_const for i in op.inputs if i >= 0), op.where
        if op.type == "RESHAPE":
            src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
            assert op.inputs == [src.id] and src.size == dst.size
        for tid in op.outputs:  # every model here is static: shapes must be what the file said
            assert g.tensors[tid].shape == before[tid], op.where
