"""The IR verifier (stm32ai/passes/verify.py, docs/verifier.md): each rule refuses a
malformed model with one line naming the tensor or op, exit 2 (issue 8's exit-3 and UB cases)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from stm32ai.cli import main
from stm32ai.errors import Stm32aiError
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.ir import Graph, Quant
from stm32ai.passes.verify import ModelVerifyError, verify_graph
from stm32ai.pipeline import compile_graph
from tests.conftest import FIXTURES
from tests.fuzz.mutate import OP_OPTIONS, Q_SCALE, Q_ZERO_POINT, _Buf, _field, _vector


def _g(name: str) -> Graph:
    return load_tflite(FIXTURES / f"{name}.tflite")


def _refused(g: Graph, *words: str, cls: type[Exception] = Stm32aiError) -> str:
    with pytest.raises(cls) as e:
        compile_graph(g)
    msg = str(e.value)
    assert "\n" not in msg and msg
    for w in words:
        assert w in msg, msg
    return msg


# ---- graph structure -------------------------------------------------------------------------

def test_reads_tensor_before_it_is_produced():
    g = _g("conv_relu_int8")
    g.ops[0].inputs[0] = g.ops[0].outputs[0]  # reads its own output
    _refused(g, "op #0 (CONV_2D)", "before any op produces it", cls=ModelVerifyError)


def test_no_inputs_and_no_outputs():
    g = _g("conv_relu_int8")
    g.inputs = []
    _refused(g, "no inputs", cls=ModelVerifyError)
    g = _g("conv_relu_int8")
    g.outputs = []
    _refused(g, "no outputs", cls=ModelVerifyError)


def test_constant_graph_output_and_input():
    g = _g("conv_relu_int8")
    g.outputs = [g.ops[0].inputs[1], g.inputs[0]]  # the weights, the input: legal TFLite
    verify_graph(g)  # (copied into their outputs: tests/test_outputs.py)
    g = _g("conv_relu_int8")
    g.inputs = [g.ops[0].inputs[1]]
    _refused(g, "graph input", "constant data", cls=ModelVerifyError)


def test_op_output_carrying_constant_data():
    g = _g("act_chain_int8")
    y = g.tensors[g.ops[0].outputs[0]]  # an intermediate activation
    y.data = np.zeros(y.shape, np.int8)
    _refused(g, "computed by op #0", "constant data", cls=ModelVerifyError)


def test_index_out_of_range():
    g = _g("conv_relu_int8")
    g.ops[0].inputs[1] = len(g.tensors) + 5
    _refused(g, "op #0 (CONV_2D) input", "refers to tensor", cls=ModelVerifyError)


def test_shape_product_overflowing_int64_and_uint32():
    g = _g("conv_relu_int8")
    x = g.tensors[g.inputs[0]]
    x.shape = (1 << 40, 1 << 40, 1 << 40, 3)  # 2^120 elements: int64 products would wrap
    msg = _refused(g, "needs", "32-bit", cls=ModelVerifyError)
    assert x.name in msg
    g = _g("dense_float32")
    x = g.tensors[g.inputs[0]]
    x.shape = (1, 1 << 30)  # a 4 GiB float input: byte size overflows the uint32 fields
    _refused(g, "4,294,967,296 bytes", cls=ModelVerifyError)


def test_negative_dimension():
    g = _g("conv_relu_int8")
    g.tensors[g.inputs[0]].shape = (1, -3, 7, 3)
    _refused(g, "negative dimension", cls=ModelVerifyError)


# ---- quantisation ----------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [float("nan"), float("inf"), 0.0, -0.5, 1e-45, 3e38])
def test_bad_scale_on_io_tensor(scale: float):
    g = _g("conv_relu_int8")
    x = g.tensors[g.inputs[0]]
    x.quant = Quant(np.float32([scale]), x.quant.zero_point)
    _refused(g, "quantisation scale", cls=ModelVerifyError)


@pytest.mark.parametrize("zp", [128, -129, (1 << 31) - 1])
def test_int8_zero_point_out_of_range_reaching_reduce(zp: int):
    g = _g("reduce_mean_hw_int8")
    x = g.tensors[g.inputs[0]]
    x.quant = Quant(x.quant.scale, np.int64([zp]))
    _refused(g, f"zero point {zp}", "int8 range", cls=ModelVerifyError)


def test_per_channel_arrays_and_axis():
    g = _g("conv_relu_int8")
    w = g.tensors[g.ops[0].inputs[1]]
    w.quant = Quant(w.quant.scale[:4], w.quant.zero_point[:4], 0)
    _refused(g, "4 per-channel scales", cls=ModelVerifyError)
    g = _g("conv_relu_int8")
    w = g.tensors[g.ops[0].inputs[1]]
    w.quant = Quant(w.quant.scale, w.quant.zero_point, 7)
    _refused(g, "along dimension 7", cls=ModelVerifyError)
    g = _g("conv_relu_int8")
    w = g.tensors[g.ops[0].inputs[1]]
    w.quant = Quant(w.quant.scale, w.quant.zero_point[:1], 0)
    _refused(g, "zero points", cls=ModelVerifyError)


@pytest.mark.parametrize("which,scale", [("output", 1e-37), ("weights", 1e25), ("input", 1e28)])
def test_requantisation_shift_out_of_c_range(which: str, scale: float):
    """Finite positive scales whose effective multiplier needs a shift of 32 or more."""
    g = _g("conv_relu_int8")
    op = g.ops[0]
    t = g.tensors[{"output": op.outputs[0], "weights": op.inputs[1], "input": op.inputs[0]}[which]]
    t.quant = Quant(np.full(t.quant.scale.shape, scale, np.float32), t.quant.zero_point, t.quant.axis)
    _refused(g, "op #0 (CONV_2D)", "outside the -31..31", cls=ModelVerifyError)


def test_accumulator_at_2_31_warns_not_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """Issue 20: a bound >= 2^31 is legal (the kernels wrap like TFLite Micro): one warning
    line naming the layer and the bound, exit 0, the C generated."""
    g = _g("dense_int8")
    b = g.tensors[g.ops[0].inputs[2]]
    b.data = b.data.copy()
    b.data[0] = (1 << 31) - 1  # any positive product then leaves int32
    c = compile_graph(g)
    assert len(c.warnings) == 1 and "op #0 (FULLY_CONNECTED)" in c.warnings[0], c.warnings
    assert ">= 2^31" in c.warnings[0] and "\n" not in c.warnings[0]
    capsys.readouterr()
    model = _patched(tmp_path, "dense_int8", lambda fb: _set_bias0(fb, (1 << 31) - 1))
    out = tmp_path / "out"
    assert main(["generate", str(model), "--c-only", "-o", str(out)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("stm32ai: warning: op #0 (FULLY_CONNECTED)"), err
    assert (out / "network.c").exists()


def test_refused_model_gets_its_error_line_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A model whose accumulator would warn but which is then refused (fuzz seed 20261126,
    mutant 5714: an extreme output scale) prints the one error line, not the warning too."""
    def patch(fb: _Buf) -> None:
        _set_bias0(fb, (1 << 31) - 1)
        start, _ = _vector(_quant_of(fb, 3), Q_SCALE)
        fb.put("<f", start, 1e-37)  # the requantisation shift leaves -31..31

    model = _patched(tmp_path, "dense_int8", patch)
    out = tmp_path / "out"
    code = main(["generate", str(model), "--c-only", "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("stm32ai: error: "), err
    assert not out.exists()


def _set_bias0(fb: _Buf, value: int) -> None:
    """The first element of the first FULLY_CONNECTED's bias buffer, in place."""
    sg = fb.model.Subgraphs(0)
    op = sg.Operators(0)
    buf = fb.model.Buffers(sg.Tensors(op.Inputs(2)).Buffer())
    fb.put("<i", buf._tab.Vector(buf._tab.Offset(4)), value)


def test_accumulator_from_2_62_refused():
    """Only a bound no converter writes is refused: 2^62 needs a bias beyond int32 (an int64
    bias on 8-bit data); the message names the op and says why."""
    from stm32ai.passes.verify import verify_accumulators

    g = _g("dense_int8")
    b = g.tensors[g.ops[0].inputs[2]]
    b.data = b.data.astype(np.int64)
    b.data[0] = 1 << 62
    with pytest.raises(ModelVerifyError, match="no converter writes") as e:
        verify_accumulators(g)
    assert "op #0 (FULLY_CONNECTED)" in str(e.value) and "2^62" in str(e.value)
    b.data[0] = (1 << 62) - (1 << 40)  # below: a warning
    assert len(verify_accumulators(g)) == 1


def test_accumulator_bound_is_per_channel():
    """The bound pairs each channel's weights with its own bias (the old max-over-max formula
    warned about layers whose largest bias and largest weights sit on different channels)."""
    from stm32ai.passes.verify import accumulator_bound

    w = np.zeros((2, 4), np.int8)
    w[0] = 127
    assert accumulator_bound(w, np.int32([0, (1 << 31) - 1]), 0, 256) == (1 << 31) - 1
    assert accumulator_bound(w, np.int32([(1 << 31) - 1, 0]), 0, 256) == (1 << 31) - 1 + 4 * 127 * 256
    assert accumulator_bound(w, np.int32([-(1 << 31)]), 0, 256) == (1 << 31) + 4 * 127 * 256  # per-tensor bias
    assert accumulator_bound(w, None, 0, 256) == 4 * 127 * 256


# ---- options ---------------------------------------------------------------------------------

def test_transpose_conv_stride_and_depthwise_dilation_bounded():
    g = _g("tconv_s2_same_int8")
    g.ops[0].options["stride_h"] = (1 << 31) - 1
    _refused(g, "op #0 (TRANSPOSE_CONV)", "stride_h = 2147483647", cls=ModelVerifyError)
    g = _g("dwconv_dm1_same_int8")
    g.ops[0].options["dilation_w_factor"] = (1 << 31) - 1
    _refused(g, "op #0 (DEPTHWISE_CONV_2D)", "dilation_w_factor", cls=ModelVerifyError)
    g = _g("dwconv_dm1_same_int8")
    g.ops[0].options["stride_w"] = 0
    _refused(g, "stride_w = 0", cls=ModelVerifyError)


def test_missing_required_options_table():
    g = _g("conv_relu_int8")
    g.ops[0].options = {}
    _refused(g, "has no Conv2DOptions table", cls=ModelVerifyError)


def test_missing_softmax_options_is_tflite_default_beta_zero():
    g = _g("classifier_softmax_int8")
    sm = next(op for op in g.ops if op.type == "SOFTMAX")
    sm.options = {"beta": 0.0}  # TFLite's value-initialised TfLiteSoftmaxParams
    _refused(g, "beta = 0.0", cls=ModelVerifyError)


# ---- op shape consistency (support checks) and constant folding -------------------------------

def test_inconsistent_split_transpose_slice():
    g = _g("move_split_int8")
    g.tensors[g.ops[0].outputs[0]].shape = (1, 6, 5, 3)
    _refused(g, "SPLIT")
    g = _g("move_transpose_3d_int8")
    y = g.tensors[g.ops[0].outputs[0]]
    y.shape = tuple(reversed(y.shape)) + (1,)
    _refused(g, "TRANSPOSE")
    g = _g("move_slice_int8")
    g.tensors[g.ops[0].outputs[0]].shape = (1, 4, 7, 9)
    _refused(g, "SLICE")


def test_fold_index_error_is_one_line():
    g = _g("move_gather_int8")
    gather = g.ops[0]
    x = g.tensors[gather.inputs[0]]
    gather.inputs[0] = g.add_const("table", np.zeros(x.shape, np.int8), x.quant)  # foldable
    idx = g.tensors[gather.inputs[1]]
    idx.data = np.full(idx.shape, 99, idx.dtype)
    _refused(g, "op #0 (GATHER)", "cannot evaluate constant", "index out of range")


def test_verify_graph_accepts_every_fixture():
    for p in sorted(FIXTURES.glob("*.tflite")):
        verify_graph(load_tflite(p))


# ---- end to end through the CLI: exit 2, one line, nothing written ---------------------------

def _patched(tmp: Path, fixture: str, patch) -> Path:
    fb = _Buf((FIXTURES / f"{fixture}.tflite").read_bytes())
    patch(fb)
    out = tmp / "m.tflite"
    out.write_bytes(bytes(fb.b))
    return out


def _quant_of(fb: _Buf, tid: int):
    return fb.model.Subgraphs(0).Tensors(tid).Quantization()


@pytest.mark.parametrize("case", ["inf_scale_input", "nan_scale_output", "zp_out_of_range",
                                  "no_options"])
def test_cli_exit_2_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    def inf_scale_input(fb: _Buf) -> None:
        start, _ = _vector(_quant_of(fb, 0), Q_SCALE)
        fb.put("<f", start, float("inf"))

    def nan_scale_output(fb: _Buf) -> None:
        start, _ = _vector(_quant_of(fb, 3), Q_SCALE)
        fb.put("<f", start, float("nan"))

    def zp_out_of_range(fb: _Buf) -> None:
        start, _ = _vector(_quant_of(fb, 0), Q_ZERO_POINT)
        fb.put("<q", start, (1 << 31) - 1)

    def no_options(fb: _Buf) -> None:
        op = fb.model.Subgraphs(0).Operators(0)
        fb.put("<B", _field(op, OP_OPTIONS - 2), 0)  # builtin_options_type = NONE

    model = _patched(tmp_path, "conv_relu_int8", locals()[case])
    out = tmp_path / "out"
    code = main(["generate", str(model), "--c-only", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("stm32ai: error: ")
    assert not out.exists()
    assert struct is not None


def test_lstm_gate_accumulator_at_2_31_warns():
    g = _g("lstm_seq_int8")
    lstm = next(op for op in g.ops if op.type == "UNIDIRECTIONAL_SEQUENCE_LSTM")
    b = g.tensors[lstm.inputs[13]]  # forget gate bias
    b.data = np.full(b.shape, -(1 << 31) + 5, b.data.dtype)
    c = compile_graph(g)
    assert len(c.warnings) == 1 and "UNIDIRECTIONAL_SEQUENCE_LSTM" in c.warnings[0], c.warnings


def test_int8_mean_over_too_many_elements_refused():
    g = _g("reduce_mean_hw_int8")
    x, y = g.tensors[g.inputs[0]], g.tensors[g.outputs[0]]
    x.shape = (1, 4096, 4096, y.shape[-1])  # 2^24 int8 values summed per output
    _refused(g, "op #0 MEAN", "overflow the int32 sum")  # the reduce support check


def test_missing_options_table_gets_tflite_zero_defaults(tmp_path: Path):
    """TFLite value-initialises the params struct of an op without options: beta 0, alpha 0."""
    for fixture, op_type, key in (("classifier_softmax_int8", "SOFTMAX", "beta"),
                                  ("act_leaky_relu_int8", "LEAKY_RELU", "alpha")):
        g0 = _g(fixture)
        i = next(k for k, op in enumerate(g0.ops) if op.type == op_type)

        def drop(fb: _Buf, i: int = i) -> None:
            fb.put("<B", _field(fb.model.Subgraphs(0).Operators(i), OP_OPTIONS - 2), 0)

        g = load_tflite(_patched(tmp_path, fixture, drop))
        assert g0.ops[i].options[key] != 0.0 and g.ops[i].options[key] == 0.0


def test_split_v_output_differing_off_axis():
    g = _g("move_split_v_int8")
    op = next(o for o in g.ops if o.type == "SPLIT_V")
    y = g.tensors[op.outputs[-1]]
    y.shape = y.shape[:-1] + (y.shape[-1] + 1 << 22,)
    _refused(g, "SPLIT_V")


def test_infinite_multiplier_names_the_op(capsys: pytest.CaptureFixture[str]):
    g = _g("act_leaky_relu_int8")
    g.ops[0].options["alpha"] = 3e38  # finite, but alpha * scale overflows float32
    _refused(g, "op #0 (LEAKY_RELU)", "multiplier is inf")
    assert capsys.readouterr().err == ""  # no numpy overflow warnings on stderr either


def test_activation_pool_beyond_32_bits_refused():
    """Each tensor fits the 32-bit sizes, but two live 1 GiB inputs and the sum do not fit one pool."""
    from stm32ai.ir import Op

    g = Graph("big", [], [], [], [])
    q = Quant(np.float32([0.1]), np.int64([0]))
    a, b, y = (g.add_tensor(n, (1, 1 << 15, 1 << 15, 1), "int8", q) for n in "aby")
    g.ops = [Op("ADD", [a, b], [y], {"fused_activation_function": "NONE"}, index=0)]
    g.inputs, g.outputs = [a, b], [y]
    _refused(g, "activation pool", "32-bit", cls=ModelVerifyError)


def test_malformed_dilated_conv_triple_is_refused_not_crashed():
    g = _g("conv_space_to_batch_int8")
    g.ops[0].inputs = g.ops[0].inputs[:2]  # SPACE_TO_BATCH_ND without its paddings operand
    _refused(g, "SPACE_TO_BATCH_ND")
    g = _g("conv_space_to_batch_int8")
    y = g.tensors[g.ops[2].outputs[0]]
    y.shape = y.shape[:3]  # rank-3 output of BATCH_TO_SPACE_ND
    _refused(g, "BATCH_TO_SPACE_ND")


def test_hybrid_float_bias_is_not_an_integer_accumulator_bound():
    g = _g("hybrid_fc_3d_hybrid")
    b = g.tensors[g.ops[0].inputs[2]]
    b.data = np.full(b.shape, np.nan, np.float32)  # float maths: not ours to refuse
    compile_graph(g)


def test_omitted_operand_of_a_foldable_op_is_refused_not_crashed():
    g = _g("bin_mul_wrap_int32")
    const = next(t.id for t in g.tensors if t.is_const)
    g.ops[-1].inputs = [-1, const]  # MUL with an omitted first operand, the other constant
    _refused(g, "MUL")


def test_unpack_output_shape_must_drop_the_axis():
    g = _g("move_pack_unpack_int8")
    op = next(o for o in g.ops if o.type == "UNPACK")
    y = g.tensors[op.outputs[0]]
    y.shape = y.shape + (2,)
    _refused(g, "UNPACK")
