"""STRIDED_SLICE has one implementation (movement.strided_slice_spec) serving constant folding
and the runtime lowering; here it is checked against LiteRT's reference kernel on the mask
combinations, both in numpy (the folding path) and as generated C (the kernel path)."""

from __future__ import annotations

import numpy as np
import pytest

from stm32ai.passes.lower.movement import strided_slice

schema = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")
flatbuffers = pytest.importorskip("flatbuffers")

SHAPE = (4, 5, 6)
# (begin, end, strides, masks): every mask alone and the combinations on one axis that the
# two former implementations disagreed on (begin_mask with shrink_axis_mask).
CASES = [
    ([1, 2, 3], [3, 4, 6], [1, 1, 1], {}),
    ([2, 0, 0], [3, 5, 6], [1, 1, 1], {"begin_mask": 0b001, "shrink_axis_mask": 0b001}),
    ([3, 1, 0], [0, 4, 6], [1, 1, 2], {"begin_mask": 0b011, "shrink_axis_mask": 0b001}),
    ([-1, 0, 0], [0, 5, 6], [1, 1, 1], {"end_mask": 0b001, "shrink_axis_mask": 0b001}),
    ([1, 4, 2], [0, 0, 0], [1, 1, 1], {"begin_mask": 0b010, "end_mask": 0b111, "shrink_axis_mask": 0b010}),
    ([0, -2, 5], [4, -5, 0], [1, -1, -2], {"begin_mask": 0b001}),
    ([3, 0, 0], [0, 5, 6], [-1, 1, 1], {"end_mask": 0b001}),
    ([1, 2], [3, 4], [1, 1], {"ellipsis_mask": 0b01}),
    ([1, 0, 2], [2, 0, 5], [1, 1, 1], {"ellipsis_mask": 0b010, "shrink_axis_mask": 0b001}),
    ([0, 1, 0], [0, 3, 0], [1, 1, 1], {"new_axis_mask": 0b001, "end_mask": 0b100}),
    ([2, 1, 0, 1], [3, 3, 0, 4], [1, 1, 1, 1], {"new_axis_mask": 0b0100, "shrink_axis_mask": 0b0001}),
    ([-3, -9, -4], [9, 9, -1], [2, 3, 1], {}),
    ([1, 1, 1], [2, 3, 2], [1, 1, 1], {"shrink_axis_mask": 0b101, "begin_mask": 0b100}),
]


def _model(cases: list = CASES) -> bytes:
    """One int8 input [4, 5, 6], one STRIDED_SLICE (and one graph output) per case."""
    tensors, buffers, ops = [], [schema.BufferT()], []

    def tensor(shape, ttype, data: np.ndarray | None = None, quant: bool = False) -> int:
        t = schema.TensorT()
        t.shape, t.type, t.name, t.buffer = list(shape), ttype, f"t{len(tensors)}".encode(), 0
        if data is not None:
            b = schema.BufferT()
            b.data = list(data.astype("<i4").tobytes())
            buffers.append(b)
            t.buffer = len(buffers) - 1
        if quant:
            q = schema.QuantizationParametersT()
            q.scale, q.zeroPoint = [0.05], [3]
            t.quantization = q
        tensors.append(t)
        return len(tensors) - 1

    x = tensor(SHAPE, schema.TensorType.INT8, quant=True)
    outs = []
    for begin, end, strides, masks in cases:
        y_shape = strided_slice(np.zeros(SHAPE, np.int8), begin, end, strides, masks).shape
        ids = [tensor([len(v)], schema.TensorType.INT32, np.asarray(v)) for v in (begin, end, strides)]
        y = tensor(y_shape, schema.TensorType.INT8, quant=True)
        o = schema.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = 0, [x, *ids], [y]
        o.builtinOptionsType = schema.BuiltinOptions.StridedSliceOptions
        opts = schema.StridedSliceOptionsT()
        opts.beginMask, opts.endMask = masks.get("begin_mask", 0), masks.get("end_mask", 0)
        opts.ellipsisMask, opts.newAxisMask = masks.get("ellipsis_mask", 0), masks.get("new_axis_mask", 0)
        opts.shrinkAxisMask = masks.get("shrink_axis_mask", 0)
        o.builtinOptions = opts
        ops.append(o)
        outs.append(y)
    m = schema.ModelT()
    m.version, m.buffers = 3, buffers
    oc = schema.OperatorCodeT()
    oc.builtinCode = oc.deprecatedBuiltinCode = schema.BuiltinOperator.STRIDED_SLICE
    oc.version = 4
    m.operatorCodes = [oc]
    sg = schema.SubGraphT()
    sg.tensors, sg.operators, sg.inputs, sg.outputs = tensors, ops, [x], outs
    m.subgraphs = [sg]
    b = flatbuffers.Builder(4096)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


@pytest.fixture(scope="module")
def sliced(tmp_path_factory):
    """The model, one input, and LiteRT-ref's outputs for it."""
    from stm32ai.validate.reference import ReferenceMissing, run_litert_ref

    path = tmp_path_factory.mktemp("ss") / "strided_slice.tflite"
    path.write_bytes(_model())
    x = np.arange(np.prod(SHAPE), dtype=np.int64).reshape(SHAPE).astype(np.int8)
    try:
        ref = run_litert_ref(path, [x])
    except ReferenceMissing as e:
        pytest.skip(e.reason)
    return path, x, [np.asarray(r) for r in ref]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_folding_path_equals_litert_ref(sliced, i):
    _, x, ref = sliced
    begin, end, strides, masks = CASES[i]
    got = strided_slice(x, begin, end, strides, masks)
    assert got.shape == ref[i].shape, CASES[i]
    np.testing.assert_array_equal(got, ref[i], err_msg=str(CASES[i]))


def test_begin_mask_on_a_shrunk_axis_takes_the_first_row(sliced):
    """The combination the two former implementations disagreed on, by hand: begin_mask on
    axis 0 overrides begin 2 there, so the shrunk axis keeps row 0."""
    _, x, ref = sliced
    np.testing.assert_array_equal(ref[1], x[0])
    np.testing.assert_array_equal(strided_slice(x, *CASES[1][:3], CASES[1][3]), x[0])


@pytest.mark.slow
def test_kernel_path_equals_litert_ref(sliced, tmp_path):
    """The generated C (the lowering's copy tables) on the host; a model has at most
    AI_MAX_IO (8) outputs, so the cases run as two models."""
    from stm32ai.pipeline import compile_model
    from stm32ai.validate.host import run_compiled

    _, x, ref = sliced
    half = (len(CASES) + 1) // 2
    for lo in (0, half):
        path = tmp_path / f"ss{lo}.tflite"
        path.write_bytes(_model(CASES[lo:lo + half]))
        c = compile_model(path, "network")
        assert {op.kernel for op in c.graph.ops} <= {"copy_nd"}, {op.kernel for op in c.graph.ops}
        ours = run_compiled(c, [[x]])[0]
        for i, o in enumerate(ours, lo):
            np.testing.assert_array_equal(np.asarray(o).reshape(ref[i].shape), ref[i], err_msg=str(CASES[i]))
