"""Specification of the TFLite reader (stm32ai.frontend.tflite_reader.load_tflite).

Facts come from outside the reader: LiteRT's own parse of each corpus model, the operator
counts and I/O signatures recorded in ../shared/models/MODELS.md, shape arithmetic that
the decoded options must satisfy, and small models built here byte by byte with the
flatbuffer builder (so every expected value is one we wrote).
"""

from __future__ import annotations

import collections
import math
import random
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
import tflite

from stm32ai.errors import Stm32aiError, UnsupportedModelError
from stm32ai.frontend.tflite_reader import load_tflite

MODELS_DIR = Path(__file__).resolve().parents[2] / "shared" / "models"
if not MODELS_DIR.is_dir():
    MODELS_DIR = Path("/work/shared/models")
MODELS = sorted(MODELS_DIR.glob("**/*.tflite"))


def model_path(rel: str) -> Path:
    p = MODELS_DIR / rel
    if not p.exists():
        pytest.skip(f"{rel} not present")
    return p


def assert_one_line(err: Exception, path: Path | None = None) -> str:
    msg = str(err)
    assert msg and "\n" not in msg and "Traceback" not in msg
    if path is not None:
        assert str(path) in msg
    return msg


# -- a tiny flatbuffer writer, so tests control every byte ---------------------------------

def _offsets_vector(b: flatbuffers.Builder, offs: list[int]) -> int:
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def build_tflite(tensors: list[dict], ops: list[dict], opcodes: list[tuple], inputs: list[int],
                 outputs: list[int], buffers: list, n_subgraphs: int = 1,
                 description: str = "hand-built") -> bytes:
    """tensors: dicts(name, shape, type, buffer, sig, quant=(scale, zp, axis), variable);
    buffers: bytes, or ("ext", offset, size) for data stored after the flatbuffer;
    opcodes: (deprecated_builtin_code, builtin_code, custom_code or None);
    ops: dicts(opcode, inputs, outputs, options=fn(builder) -> (BuiltinOptions type, offset))."""
    b = flatbuffers.Builder(1024)
    buf_offs = []
    for data in buffers:
        if isinstance(data, tuple):
            tflite.BufferStart(b)
            tflite.BufferAddOffset(b, data[1])
            tflite.BufferAddSize(b, data[2])
        else:
            vec = b.CreateNumpyVector(np.frombuffer(data, np.uint8)) if data else None
            tflite.BufferStart(b)
            if vec is not None:
                tflite.BufferAddData(b, vec)
        buf_offs.append(tflite.BufferEnd(b))

    def subgraph() -> int:
        t_offs = []
        for t in tensors:
            name = b.CreateString(t["name"])
            shape = b.CreateNumpyVector(np.array(t["shape"], np.int32))
            sig = b.CreateNumpyVector(np.array(t["sig"], np.int32)) if t.get("sig") else None
            q = None
            if t.get("quant"):
                scale, zp, axis = t["quant"]
                sv = b.CreateNumpyVector(np.array(scale, np.float32))
                zv = b.CreateNumpyVector(np.array(zp, np.int64))
                tflite.QuantizationParametersStart(b)
                tflite.QuantizationParametersAddScale(b, sv)
                tflite.QuantizationParametersAddZeroPoint(b, zv)
                tflite.QuantizationParametersAddQuantizedDimension(b, axis)
                q = tflite.QuantizationParametersEnd(b)
            tflite.TensorStart(b)
            tflite.TensorAddShape(b, shape)
            tflite.TensorAddType(b, t.get("type", tflite.TensorType.FLOAT32))
            tflite.TensorAddBuffer(b, t.get("buffer", 0))
            tflite.TensorAddName(b, name)
            if q is not None:
                tflite.TensorAddQuantization(b, q)
            if sig is not None:
                tflite.TensorAddShapeSignature(b, sig)
            if t.get("variable"):
                tflite.TensorAddIsVariable(b, True)
            t_offs.append(tflite.TensorEnd(b))
        o_offs = []
        for op in ops:
            ins = b.CreateNumpyVector(np.array(op["inputs"], np.int32))
            outs = b.CreateNumpyVector(np.array(op["outputs"], np.int32))
            opt = op["options"](b) if op.get("options") else None
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, op["opcode"])
            tflite.OperatorAddInputs(b, ins)
            tflite.OperatorAddOutputs(b, outs)
            if opt is not None:
                tflite.OperatorAddBuiltinOptionsType(b, opt[0])
                tflite.OperatorAddBuiltinOptions(b, opt[1])
            o_offs.append(tflite.OperatorEnd(b))
        tv, ov = _offsets_vector(b, t_offs), _offsets_vector(b, o_offs)
        iv = b.CreateNumpyVector(np.array(inputs, np.int32))
        outv = b.CreateNumpyVector(np.array(outputs, np.int32))
        name = b.CreateString("main")
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tv)
        tflite.SubGraphAddInputs(b, iv)
        tflite.SubGraphAddOutputs(b, outv)
        tflite.SubGraphAddOperators(b, ov)
        tflite.SubGraphAddName(b, name)
        return tflite.SubGraphEnd(b)

    sg_offs = [subgraph() for _ in range(n_subgraphs)]
    oc_offs = []
    for dep, code, custom in opcodes:
        cs = b.CreateString(custom) if custom else None
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, dep)
        tflite.OperatorCodeAddBuiltinCode(b, code)
        if cs is not None:
            tflite.OperatorCodeAddCustomCode(b, cs)
        tflite.OperatorCodeAddVersion(b, 1)
        oc_offs.append(tflite.OperatorCodeEnd(b))
    ocv, sgv, bv = _offsets_vector(b, oc_offs), _offsets_vector(b, sg_offs), _offsets_vector(b, buf_offs)
    desc = b.CreateString(description)
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, ocv)
    tflite.ModelAddSubgraphs(b, sgv)
    tflite.ModelAddDescription(b, desc)
    tflite.ModelAddBuffers(b, bv)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


BO, TT = tflite.BuiltinOptions, tflite.TensorType
W = np.arange(-27, 27, dtype=np.int8).reshape(3, 3, 3, 2)  # OHWI conv weights
BIAS = np.array([100, -200, 300], np.int32)


def conv_options(b: flatbuffers.Builder) -> tuple[int, int]:
    tflite.Conv2DOptionsStart(b)
    tflite.Conv2DOptionsAddPadding(b, tflite.Padding.VALID)
    tflite.Conv2DOptionsAddStrideW(b, 2)
    tflite.Conv2DOptionsAddStrideH(b, 1)
    tflite.Conv2DOptionsAddFusedActivationFunction(b, tflite.ActivationFunctionType.RELU6)
    tflite.Conv2DOptionsAddDilationWFactor(b, 1)
    tflite.Conv2DOptionsAddDilationHFactor(b, 1)
    return BO.Conv2DOptions, tflite.Conv2DOptionsEnd(b)


def reshape_options(b: flatbuffers.Builder) -> tuple[int, int]:
    ns = b.CreateNumpyVector(np.array([1, -1], np.int32))
    tflite.ReshapeOptionsStart(b)
    tflite.ReshapeOptionsAddNewShape(b, ns)
    return BO.ReshapeOptions, tflite.ReshapeOptionsEnd(b)


def tiny_spec(**over) -> dict:
    """input[-1,5,5,2] -> CONV_2D(VALID, stride 2x1, RELU6) -> RESHAPE([1,-1]) -> output."""
    spec = dict(
        tensors=[
            dict(name="input", shape=[1, 5, 5, 2], sig=[-1, 5, 5, 2]),
            dict(name="w", shape=[3, 3, 3, 2], type=TT.INT8, buffer=1,
                 quant=([0.5, 0.25, 0.125], [0, 0, 0], 0)),
            dict(name="b", shape=[3], type=TT.INT32, buffer=2, quant=([0.5, 0.25, 0.125], [0, 0, 0], 0)),
            dict(name="conv", shape=[1, 3, 2, 3], sig=[-1, 3, 2, 3]),
            dict(name="shape", shape=[2], type=TT.INT32, buffer=3),
            dict(name="out", shape=[1, 18], sig=[-1, 18]),
        ],
        ops=[dict(opcode=0, inputs=[0, 1, 2], outputs=[3], options=conv_options),
             dict(opcode=1, inputs=[3, 4], outputs=[5], options=reshape_options)],
        # CONV_2D with both code fields; RESHAPE the way pre-2.4 files store it (deprecated only)
        opcodes=[(3, 3, None), (22, 0, None)],
        inputs=[0], outputs=[5],
        buffers=[b"", W.tobytes(), BIAS.tobytes(), np.array([1, -1], np.int32).tobytes()],
    )
    spec.update(over)
    return spec


def write(tmp_path: Path, data: bytes, name: str = "tiny.tflite") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# -- hand-built models: every expected value is one we wrote ------------------------------

def test_handbuilt_model_round_trip(tmp_path):
    g = load_tflite(write(tmp_path, build_tflite(**tiny_spec())))
    assert g.name == "tiny" and g.description == "hand-built"
    assert g.inputs == [0] and g.outputs == [5]
    assert [t.name for t in g.tensors] == ["input", "w", "b", "conv", "shape", "out"]
    assert g.tensors[0].shape == (1, 5, 5, 2) and g.tensors[0].dtype == "float32"
    assert not g.tensors[0].is_const and not g.tensors[3].is_const and not g.tensors[5].is_const
    w = g.tensors[1]
    assert w.dtype == "int8" and w.shape == (3, 3, 3, 2)
    np.testing.assert_array_equal(w.data, W)
    assert w.data.flags.owndata or w.data.base is not None  # a private copy, not a file view
    assert w.quant.per_channel and w.quant.axis == 0
    np.testing.assert_array_equal(w.quant.scale, np.float32([0.5, 0.25, 0.125]))
    assert w.quant.scale.dtype == np.float32 and w.quant.zero_point.dtype == np.int64
    np.testing.assert_array_equal(g.tensors[2].data, BIAS)
    np.testing.assert_array_equal(g.tensors[4].data, [1, -1])
    assert g.tensors[0].quant is None

    conv, reshape = g.ops
    assert (conv.type, conv.inputs, conv.outputs, conv.index) == ("CONV_2D", [0, 1, 2], [3], 0)
    assert {k: conv.options[k] for k in ("padding", "stride_w", "stride_h", "fused_activation_function",
                                         "dilation_w_factor", "dilation_h_factor")} == dict(
        padding="VALID", stride_w=2, stride_h=1, fused_activation_function="RELU6",
        dilation_w_factor=1, dilation_h_factor=1)
    assert (reshape.type, reshape.index) == ("RESHAPE", 1)
    assert reshape.options == {"new_shape": [1, -1]}


def test_name_override(tmp_path):
    assert load_tflite(write(tmp_path, build_tflite(**tiny_spec())), name="kws").name == "kws"


def test_opcodes_above_127_and_custom_ops(tmp_path):
    spec = tiny_spec(
        tensors=[dict(name="x", shape=[1, 4]), dict(name="y", shape=[1, 4]), dict(name="z", shape=[1, 4])],
        # GELU (150) is stored as deprecated=127 placeholder + builtin_code=150
        opcodes=[(127, 150, None), (32, 32, "MyFancyOp")],
        ops=[dict(opcode=0, inputs=[0], outputs=[1]), dict(opcode=1, inputs=[1, -1], outputs=[2])],
        inputs=[0], outputs=[2], buffers=[b""])
    g = load_tflite(write(tmp_path, build_tflite(**spec)))
    assert [op.type for op in g.ops] == ["GELU", "CUSTOM:MyFancyOp"]
    assert g.ops[1].inputs == [1, -1]  # omitted optional input kept as -1


def test_buffer_stored_outside_the_flatbuffer(tmp_path):
    payload = np.arange(6, dtype=np.int32)
    spec = tiny_spec(
        tensors=[dict(name="x", shape=[2, 3]), dict(name="c", shape=[2, 3], type=TT.INT32, buffer=1),
                 dict(name="y", shape=[2, 3])],
        opcodes=[(0, 0, None)], ops=[dict(opcode=0, inputs=[0, 1], outputs=[2])], inputs=[0], outputs=[2])
    # Offsets are absolute in the file, so build once to learn the flatbuffer's length.
    size = len(build_tflite(**{**spec, "buffers": [b"", ("ext", 2, 24)]}))
    offset = (size + 15) // 16 * 16
    fb = build_tflite(**{**spec, "buffers": [b"", ("ext", offset, 24)]})
    assert len(fb) == size
    data = fb + b"\0" * (offset - size) + payload.tobytes()
    g = load_tflite(write(tmp_path, data))
    np.testing.assert_array_equal(g.tensors[1].data, payload.reshape(2, 3))
    with pytest.raises(Stm32aiError) as e:  # the same file with its external data cut off
        load_tflite(write(tmp_path, data[:-8], "cut.tflite"))
    assert "past the end of the file" in assert_one_line(e.value)


def test_variable_tensor_flag(tmp_path):
    spec = tiny_spec(
        tensors=[dict(name="x", shape=[1, 4]), dict(name="state", shape=[1, 4], variable=True),
                 dict(name="y", shape=[1, 4])],
        opcodes=[(0, 0, None)], ops=[dict(opcode=0, inputs=[0, 1], outputs=[2])], inputs=[0], outputs=[2],
        buffers=[b""])
    g = load_tflite(write(tmp_path, build_tflite(**spec)))
    assert [t.variable for t in g.tensors] == [False, True, False]
    assert not g.tensors[1].is_const


def test_rank1_bias_with_stray_quantized_dimension_gets_axis_0(tmp_path):
    spec = tiny_spec()
    spec["tensors"][2]["quant"] = ([0.5, 0.25, 0.125], [0, 0, 0], 3)  # what old TOCO wrote
    g = load_tflite(write(tmp_path, build_tflite(**spec)))
    assert g.tensors[2].quant.axis == 0


@pytest.mark.parametrize("case, exc, words", [
    ("dynamic_input", UnsupportedModelError, ["dynamic dimension 1", "'input'", "fixed input shape"]),
    ("string_tensor", UnsupportedModelError, ["STRING", "'input'"]),
    ("call_subgraphs", UnsupportedModelError, ["2 subgraphs", "CALL", "control flow"]),
    ("while_no_subgraph", UnsupportedModelError, ["WHILE", "names no subgraph"]),
    ("bad_buffer_index", Stm32aiError, ["corrupt", "buffer 99"]),
    ("bad_tensor_index", Stm32aiError, ["corrupt", "tensor 42"]),
    ("bad_opcode_index", Stm32aiError, ["corrupt", "opcode 7"]),
    ("wrong_const_size", Stm32aiError, ["corrupt", "'b'", "needs 12 bytes"]),
    ("unknown_builtin", UnsupportedModelError, ["unknown builtin operator code 5000"]),
])
def test_handbuilt_bad_models(tmp_path, case, exc, words):
    spec = tiny_spec()
    if case == "dynamic_input":
        spec["tensors"][0]["sig"] = [1, -1, 5, 2]
    elif case == "string_tensor":
        spec["tensors"][0]["type"] = TT.STRING
    elif case == "call_subgraphs":
        spec["opcodes"][1] = (31, 31, None)
        spec["n_subgraphs"] = 2
    elif case == "while_no_subgraph":  # WHILE without options: subgraph indices 0
        spec["opcodes"][1] = (119, 119, None)
        spec["n_subgraphs"] = 2
    elif case == "bad_buffer_index":
        spec["tensors"][1]["buffer"] = 99
    elif case == "bad_tensor_index":
        spec["ops"][0]["inputs"] = [0, 42, 2]
    elif case == "bad_opcode_index":
        spec["ops"][1]["opcode"] = 7
    elif case == "wrong_const_size":
        spec["buffers"][2] = BIAS.tobytes()[:8]
    elif case == "unknown_builtin":
        spec["opcodes"][1] = (127, 5000, None)
    p = write(tmp_path, build_tflite(**spec))
    with pytest.raises(exc) as e:
        load_tflite(p)
    msg = assert_one_line(e.value, p)
    for w in words:
        assert w in msg


# -- bad files ----------------------------------------------------------------------------

def test_missing_file(tmp_path):
    p = tmp_path / "nope.tflite"
    with pytest.raises(Stm32aiError) as e:
        load_tflite(p)
    assert "not found" in assert_one_line(e.value, p)


def test_directory(tmp_path):
    with pytest.raises(Stm32aiError) as e:
        load_tflite(tmp_path)
    assert "directory" in assert_one_line(e.value, tmp_path)


def test_empty_file(tmp_path):
    p = write(tmp_path, b"", "empty.tflite")
    with pytest.raises(Stm32aiError) as e:
        load_tflite(p)
    assert "empty file" in assert_one_line(e.value, p)


@pytest.mark.parametrize("content", [b"hello, this is not a model\n", b"PK\x03\x04" + b"\0" * 60, b"TFL3"])
def test_not_a_tflite_file(tmp_path, content):
    p = write(tmp_path, content, "text.tflite")
    with pytest.raises(Stm32aiError) as e:
        load_tflite(p)
    assert "not a TensorFlow Lite model" in assert_one_line(e.value, p)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, -64])
def test_truncated_copy(tmp_path, keep):
    src = model_path("mlperf_tiny/pretrainedResnet_quant.tflite")
    data = src.read_bytes()
    n = len(data) + keep if keep < 0 else int(len(data) * keep)
    p = write(tmp_path, data[:n], "cut.tflite")
    with pytest.raises(Stm32aiError) as e:
        load_tflite(p)
    assert "truncated or corrupt" in assert_one_line(e.value, p)


def test_bad_root_offset(tmp_path):
    data = bytearray(model_path("mlperf_tiny/pretrainedResnet_quant.tflite").read_bytes())
    data[0:4] = b"\xff\xff\xff\x7f"
    p = write(tmp_path, bytes(data), "root.tflite")
    with pytest.raises(Stm32aiError) as e:
        load_tflite(p)
    assert "corrupt" in assert_one_line(e.value, p)


def test_random_corruption_never_escapes_as_traceback(tmp_path):
    """Byte flips anywhere in a real model: loads, or fails with a one-line Stm32aiError."""
    data = model_path("tflite_micro/hello_world_int8.tflite").read_bytes()
    rng = random.Random(1234)
    p = tmp_path / "fuzz.tflite"
    for _ in range(300):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            pos = rng.randrange(8, len(buf))  # keep the identifier so the parser runs
            buf[pos] = rng.randrange(256)
        p.write_bytes(bytes(buf))
        try:
            load_tflite(p)
        except Stm32aiError as e:
            assert_one_line(e, p)


# -- real models: independent facts -------------------------------------------------------

# From ../shared/models/MODELS.md ("Builtin ops (count)", "# ops", Inputs, Outputs).
MODELS_MD = {
    "mlperf_tiny/pretrainedResnet_quant.tflite": dict(
        ops={"CONV_2D": 9, "ADD": 3, "AVERAGE_POOL_2D": 1, "FULLY_CONNECTED": 1, "RESHAPE": 1, "SOFTMAX": 1},
        n_ops=16, inputs=[("int8", (1, 32, 32, 3), 1.0, -128)], outputs=[("int8", (1, 10), 0.003906, -128)]),
    "openmv/blazeface_front_128.tflite": dict(
        ops={"CONV_2D": 21, "ADD": 16, "DEPTHWISE_CONV_2D": 16, "PAD": 11, "DEQUANTIZE": 4, "RESHAPE": 4,
             "MAX_POOL_2D": 3, "QUANTIZE": 1},
        n_ops=76, inputs=[("float32", (1, 128, 128, 3), None, None)],
        outputs=[("float32", (1, 512, 16), None, None), ("float32", (1, 512, 1), None, None),
                 ("float32", (1, 384, 1), None, None), ("float32", (1, 384, 16), None, None)]),
    "tflite_micro/person_detect.tflite": dict(
        ops={"CONV_2D": 14, "DEPTHWISE_CONV_2D": 14, "AVERAGE_POOL_2D": 1, "RESHAPE": 1, "SOFTMAX": 1},
        n_ops=31, inputs=[("int8", (1, 96, 96, 1), 0.007843, -1)],
        outputs=[("int8", (1, 2), 0.003906, -128)]),
    "tflite_micro/audio_preprocessor_int8.tflite": dict(
        ops={"CAST": 4, "ADD": 2, "CONCATENATION": 1, "CUSTOM:SignalEnergy": 1,
             "CUSTOM:SignalFftAutoScale": 1,
             "CUSTOM:SignalFilterBank": 1, "CUSTOM:SignalFilterBankLog": 1,
             "CUSTOM:SignalFilterBankSpectralSubtraction": 1, "CUSTOM:SignalFilterBankSquareRoot": 1,
             "CUSTOM:SignalPCAN": 1, "CUSTOM:SignalRfft": 1, "CUSTOM:SignalWindow": 1, "DIV": 1,
             "MAXIMUM": 1, "MINIMUM": 1, "MUL": 1, "RESHAPE": 1, "STRIDED_SLICE": 1},
        n_ops=22, inputs=[("int16", (1, 480), None, None)], outputs=[("int8", (40,), None, None)]),
}


@pytest.mark.parametrize("rel", sorted(MODELS_MD))
def test_models_md_figures(rel):
    facts = MODELS_MD[rel]
    g = load_tflite(model_path(rel))
    assert len(g.ops) == facts["n_ops"]
    assert dict(collections.Counter(op.type for op in g.ops)) == facts["ops"]
    for tids, expected in ((g.inputs, facts["inputs"]), (g.outputs, facts["outputs"])):
        assert len(tids) == len(expected)
        for tid, (dtype, shape, scale, zp) in zip(tids, expected, strict=True):
            t = g.tensors[tid]
            assert (t.dtype, t.shape) == (dtype, shape)
            if scale is not None:
                assert t.quant.scale.size == 1
                assert t.quant.scale[0] == pytest.approx(scale, rel=1e-3)
                assert t.quant.zero_point[0] == zp


def test_person_detect_rank1_biases_get_axis_0():
    """MODELS.md: 14 rank-1 biases carry quantized_dimension=3; TFLM tolerates it, so do we.

    (28 biases are per-channel in all: the 14 depthwise ones have the stray 3, copied from
    their weights, whose axis 3 must stay as it is.)"""
    g = load_tflite(model_path("tflite_micro/person_detect.tflite"))
    per_channel = [t for t in g.tensors if t.is_const and t.quant and t.quant.per_channel]
    biases = [t for t in per_channel if len(t.shape) == 1]
    assert len(biases) == 28
    assert all(t.quant.axis == 0 for t in biases)
    assert collections.Counter(t.quant.axis for t in per_channel if len(t.shape) == 4) == {0: 14, 3: 14}


def _litert(path: Path):
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        pytest.skip("ai_edge_litert not installed")
    try:
        return Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    except Exception as e:  # e.g. person_detect's bias quantisation, TFLM-only custom ops
        pytest.skip(f"LiteRT refuses {path.name}: {str(e)[:80]}")


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_tensors_and_ops_match_litert(path):
    interp = _litert(path)
    details = interp.get_tensor_details()  # before allocate_tensors: no runtime temporaries yet
    g = load_tflite(path)
    assert len(g.tensors) == len(details)
    for d in details:
        t = g.tensors[d["index"]]
        assert t.name == d["name"]
        assert t.shape == tuple(int(x) for x in d["shape"]), t.name
        assert np.dtype(t.dtype) == np.dtype(d["dtype"]), t.name
        qp = d["quantization_parameters"]
        if qp["scales"].size == 0:
            assert t.quant is None, t.name
        else:
            np.testing.assert_array_equal(t.quant.scale, qp["scales"])
            np.testing.assert_array_equal(t.quant.zero_point, qp["zero_points"])
            assert t.quant.axis == qp["quantized_dimension"], t.name
        if int(np.prod(d["shape"])) == 0:
            continue
        # LiteRT hands out constant data before allocation and refuses everything else.
        try:
            ref = interp.get_tensor(d["index"])
        except ValueError:
            ref = None
        if ref is None:
            assert not t.is_const, t.name
        else:
            assert t.is_const, t.name
            np.testing.assert_array_equal(t.data, ref)
            assert t.data.dtype == ref.dtype
    assert g.inputs == [d["index"] for d in interp.get_input_details()]
    assert g.outputs == [d["index"] for d in interp.get_output_details()]
    ops = interp._get_ops_details()
    # LiteRT names a custom op by its custom code alone
    assert [op.type.removeprefix("CUSTOM:") for op in g.ops] == [o["op_name"] for o in ops]
    for op, ref in zip(g.ops, ops, strict=True):
        assert op.inputs == [int(i) for i in ref["inputs"]]
        assert op.outputs == [int(i) for i in ref["outputs"]]


def _out_size(n: int, k: int, stride: int, dilation: int, padding: str) -> int:
    eff = (k - 1) * dilation + 1
    return math.ceil(n / stride) if padding == "SAME" else (n - eff) // stride + 1


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_decoded_options_explain_output_shapes(path):
    """padding/stride/dilation/filter options, read back, must reproduce every conv and
    pool output shape the converter wrote: an independent check of option decoding."""
    g = load_tflite(path)
    checked = 0
    acts = {"NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH", "SIGN_BIT"}
    for op in g.ops:
        if "fused_activation_function" in op.options:
            assert op.options["fused_activation_function"] in acts
        if op.type not in ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D"):
            continue
        o = op.options
        assert o["padding"] in ("SAME", "VALID")
        x, y = g.tensors[op.inputs[0]].shape, g.tensors[op.outputs[0]].shape
        if op.type.endswith("POOL_2D"):
            kh, kw, dh, dw = o["filter_height"], o["filter_width"], 1, 1
        else:
            kh, kw = g.tensors[op.inputs[1]].shape[1:3]
            dh, dw = o["dilation_h_factor"], o["dilation_w_factor"]
        assert y[1] == _out_size(x[1], kh, o["stride_h"], dh, o["padding"]), op.where
        assert y[2] == _out_size(x[2], kw, o["stride_w"], dw, o["padding"]), op.where
        checked += 1
    if not checked:
        pytest.skip("no conv/pool ops")


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_every_corpus_model_loads(path):
    g = load_tflite(path)
    assert g.ops and g.inputs and g.outputs
    assert [op.index for op in g.ops] == list(range(len(g.ops)))
    for t in g.tensors:
        if t.is_const:
            assert t.data.shape == t.shape and t.data.dtype == np.dtype(t.dtype)
