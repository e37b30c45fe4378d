"""Hybrid (dynamic-range) CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED: float32 activations, int8 filters.

TFLite Micro refuses hybrid models, so LiteRT with its reference kernels is the reference
(docs/references.md). We reproduce its arithmetic operation for operation (on-the-fly input
quantisation per batch, int8 x int8 -> int32 dot products, the float finish in the same
order), so the generated C is required to match it *exactly*, not just within 1e-5:

* the `hybrid_conv_*` fixtures (converter-made, per-channel and per-tensor filters, odd
  sizes, stride 2, SAME/VALID, dilation, RELU/RELU6, batch 2);
* inputs that reach the corners of the input quantisation: all zeros, all positive, all
  negative, one huge value;
* kws_ref_model_float32 (MLPerf Tiny DS-CNN) when ../shared/models has it;
* a filter with several equal per-channel scales (LiteRT takes its per-tensor path);
* FULLY_CONNECTED (`hybrid_fc_*`: per-channel and per-tensor weights, with and without
  bias, RELU/RELU6, 3-D input and batch 2): exact on the fixtures, on the corner inputs
  and with `asymmetric_quantize_inputs` cleared (symmetric input quantisation);
* DEPTHWISE_CONV_2D (`hybrid_dw_*`: LiteRT's per-channel path, 3x3/5x5, stride 2, depth
  multiplier 2, dilation 2, batch 2, RELU/RELU6): exact on the fixtures and the corner inputs;
  a per-tensor filter (no LiteRT path) is refused;
* scratch size in Python == the C size query; the kernel compiles warning-free for the
  host and for Cortex-M4 with no fused multiply-add (which would round differently).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, c_scratch_sizes, shared_model

from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.passes.lower.conv import check_conv
from stm32ai.pipeline import compile_model
from stm32ai.validate.host import run_compiled
from stm32ai.validate.reference import random_inputs, run_litert_ref
from stm32ai.validate.run import per_sample, validate_model

RUNTIME = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
HYBRID_SOURCE = RUNTIME / "src" / "ai_hybrid.c"
WARN = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion", "-Wconversion"]
M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]

HYBRID_FIXTURES = sorted(FIXTURES.glob("hybrid_*.tflite"))
FC_FIXTURES = sorted(FIXTURES.glob("hybrid_fc_*.tflite"))


def _ours(path: Path, x: list[np.ndarray]) -> list[np.ndarray]:
    c = compile_model(path)
    outs = run_compiled(c, per_sample(c, x))
    return [np.stack([o[j] for o in outs]) for j in range(len(outs[0]))]


def _assert_exact(path: Path, x: list[np.ndarray]) -> None:
    ref = run_litert_ref(path, x)
    ours = _ours(path, x)
    assert len(ref) == len(ours)
    for r, o in zip(ref, ours, strict=True):
        o = o.reshape(r.shape)
        assert o.dtype == r.dtype == np.float32
        diff = int(np.count_nonzero(o != r))
        assert diff == 0, f"{path.name}: {diff} of {r.size} values differ, max abs {np.abs(o - r).max():.3g}"


def test_fixture_set():
    names = {p.name for p in HYBRID_FIXTURES}
    assert len(names) >= 11
    for p in HYBRID_FIXTURES:
        g = load_tflite(p)
        op_type = ("FULLY_CONNECTED" if p.name.startswith("hybrid_fc_") else
                   "DEPTHWISE_CONV_2D" if p.name.startswith("hybrid_dw_") else "CONV_2D")
        ops = [op for op in g.ops if op.type == op_type]
        assert ops and all(g.tensors[op.inputs[1]].dtype == "int8" for op in ops), p.name
        assert all(g.tensors[op.inputs[0]].dtype == "float32" for op in ops), p.name


@pytest.mark.parametrize("model", HYBRID_FIXTURES, ids=lambda p: p.stem)
def test_fixture_exact_vs_litert_ref(model):
    res = validate_model(model, n=4, seed=3)
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict and verdict[0].reference == "litert-ref"
    assert all(ok for ok in verdict[0].ok)
    for m in verdict[0].outputs:
        assert m.max_abs_err == 0.0
    # TFLM refuses hybrid models: it is never the verdict here
    assert all(c.unavailable for c in res.comparisons if c.reference == "tflm")


def _corner_inputs(path: Path) -> list[np.ndarray]:
    (x,) = random_inputs(path, 5, seed=9)
    x = x.copy()
    x[0] = 0.0                                 # all zero: scale 1, zero point 0, output = bias
    x[1] = np.abs(x[1]) * 3.0 + 0.5            # all positive: asymmetric zero point -128
    x[2] = -np.abs(x[2]) * 0.01 - 1e-3         # all negative, small: zero point 127
    x[3] *= 1e4                                # large magnitudes
    x[3].flat[7] = 3e6                         # one outlier: most inputs quantise to 0
    x[4].flat[::2] = 0.0                       # half zeros
    return [x]


@pytest.mark.parametrize("model", [FIXTURES / "hybrid_conv_odd_same_hybrid.tflite",
                                   FIXTURES / "hybrid_conv_per_tensor_hybrid.tflite",
                                   FIXTURES / "hybrid_conv_stride2_valid_relu6_hybrid.tflite",
                                   *FC_FIXTURES,
                                   FIXTURES / "hybrid_dw_stride2_mult2_relu6_hybrid.tflite",
                                   FIXTURES / "hybrid_dw_batch2_hybrid.tflite"],
                         ids=lambda p: p.stem)
def test_input_quantisation_corners(model):
    _assert_exact(model, _corner_inputs(model))


def test_all_zero_input_gives_the_bias():
    path = FIXTURES / "hybrid_conv_1x1_hybrid.tflite"
    g = load_tflite(path)
    bias = np.asarray(g.tensors[g.ops[0].inputs[2]].data, np.float32)
    (x,) = random_inputs(path, 1, seed=0)
    x = np.zeros_like(x)
    (y,) = _ours(path, [x])
    np.testing.assert_array_equal(y.reshape(-1, bias.size), np.broadcast_to(bias, (y.size // bias.size, bias.size)))
    _assert_exact(path, [x])


def test_batch_quantised_per_batch():
    # batch 2 in one tensor: each batch gets its own scale and zero point
    path = FIXTURES / "hybrid_conv_batch2_hybrid.tflite"
    (x,) = random_inputs(path, 3, seed=5)
    x = x.copy()
    x[:, 1] *= 50.0  # the second batch of each sample has a much larger range
    _assert_exact(path, [x])


def test_kws_ref_model_float32_exact():
    path = shared_model("mlperf_tiny/kws_ref_model_float32.tflite")
    res = validate_model(path, n=5, seed=1)
    v = [c for c in res.comparisons if c.verdict][0]
    assert v.reference == "litert-ref" and all(v.ok)
    assert all(m.max_abs_err == 0.0 for m in v.outputs)
    # and on the quantisation corners (all-zero input included)
    (x,) = random_inputs(path, 3, seed=2)
    x = x.copy()
    x[0] = 0.0
    x[1] = np.abs(x[1]) * 100.0
    _assert_exact(path, [x])


def test_equal_per_channel_scales_take_litert_per_tensor_path(tmp_path):
    """Several filter scales that are all equal: LiteRT runs its per-tensor path
    (symmetric input quantisation) with the first scale, not the per-channel one."""
    schema = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")
    import flatbuffers

    src = FIXTURES / "hybrid_conv_odd_same_hybrid.tflite"
    m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(src.read_bytes(), 0))
    sg = m.subgraphs[0]
    w = sg.tensors[sg.operators[0].inputs[1]]
    w.quantization.scale = [float(w.quantization.scale[0])] * len(w.quantization.scale)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    path = tmp_path / "equal_scales.tflite"
    path.write_bytes(bytes(b.Output()))
    x = random_inputs(path, 2, seed=4)
    _assert_exact(path, x)


# ---- FULLY_CONNECTED ----------------------------------------------------------------------------

def _fc_with_options(src: Path, tmp_path: Path, **opts) -> Path:
    """`src` with FullyConnectedOptions fields changed on every operator (schema object API)."""
    schema = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")
    import flatbuffers

    m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(src.read_bytes(), 0))
    for op in m.subgraphs[0].operators:
        for k, v in opts.items():
            setattr(op.builtinOptions, k, v)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    path = tmp_path / f"{src.stem}_mod.tflite"
    path.write_bytes(bytes(b.Output()))
    return path


def test_fc_lowers_to_the_hybrid_kernel():
    for p in FC_FIXTURES:
        c = compile_model(p)
        fcs = [op for op in c.graph.ops if op.kernel == "fully_connected_hybrid"]
        assert fcs, p.name
        for op in fcs:
            assert op.attrs["asymmetric"] == 1  # the converter sets asymmetric_quantize_inputs
            assert op.scratch == (op.attrs["in_features"] + 3) // 4 * 4
    batches = [op.attrs["batches"] for op in compile_model(FIXTURES / "hybrid_fc_3d_hybrid.tflite").graph.ops
               if op.kernel == "fully_connected_hybrid"]
    assert batches == [3]  # keep_num_dims: every row of the 3-D input is a batch


@pytest.mark.parametrize("model", FC_FIXTURES, ids=lambda p: p.stem)
def test_fc_symmetric_input_quantisation(model, tmp_path):
    """asymmetric_quantize_inputs = false: SymmetricQuantizeFloats, per-channel scales still
    applied per row (measured against LiteRT-ref)."""
    path = _fc_with_options(model, tmp_path, asymmetricQuantizeInputs=False)
    c = compile_model(path)
    assert all(op.attrs["asymmetric"] == 0 for op in c.graph.ops if op.kernel == "fully_connected_hybrid")
    _assert_exact(path, _corner_inputs(path))


@pytest.mark.parametrize("model", [FIXTURES / "hybrid_fc_odd_relu_hybrid.tflite",
                                   FIXTURES / "hybrid_fc_nobias_hybrid.tflite",
                                   FIXTURES / "hybrid_fc_batch2_hybrid.tflite"],
                         ids=lambda p: p.stem)
def test_fc_all_zero_and_all_negative_inputs(model):
    (x,) = random_inputs(model, 3, seed=11)
    x = x.copy()
    x[0] = 0.0
    x[1] = -np.abs(x[1]) - 0.25
    x[2] = -np.abs(x[2]) * 1e-5
    _assert_exact(model, [x])
    g = load_tflite(model)
    op = g.ops[0]
    n = g.tensors[op.inputs[1]].shape[0]
    bias = (np.asarray(g.tensors[op.inputs[2]].data, np.float32) if len(op.inputs) > 2 and op.inputs[2] >= 0
            else np.zeros(n, np.float32))
    lo, hi = (0.0, 6.0) if "batch2" in model.name else ((0.0, np.inf) if "relu" in model.name
                                                          else (-np.inf, np.inf))
    (y,) = _ours(model, [x[:1]])
    np.testing.assert_array_equal(y.reshape(-1, n), np.broadcast_to(np.clip(bias, lo, hi), (y.size // n, n)))


def test_fc_refusals_name_the_problem():
    from stm32ai.passes.lower import registry

    path = FIXTURES / "hybrid_fc_odd_relu_hybrid.tflite"
    check = registry()["FULLY_CONNECTED"].check
    g = load_tflite(path)
    assert check(g.ops[0], g) is None
    g.tensors[g.ops[0].inputs[1]].quant.zero_point[:] = 1
    assert "zero point" in check(g.ops[0], g)
    g = load_tflite(path)
    w = g.tensors[g.ops[0].inputs[1]]
    w.quant.scale = w.quant.scale[:3]
    assert "scales" in check(g.ops[0], g)
    g = load_tflite(path)
    g.tensors[g.ops[0].inputs[1]].quant = None
    assert "quantisation" in check(g.ops[0], g)


# ---- refusals ---------------------------------------------------------------------------------

def _conv_graph(path: Path):
    g = load_tflite(path)
    return g, g.ops[0]


def test_refusals_name_the_problem():
    g, op = _conv_graph(FIXTURES / "hybrid_conv_odd_same_hybrid.tflite")
    assert check_conv(op, g) is None
    w = g.tensors[op.inputs[1]]
    w.quant.zero_point = np.ones_like(w.quant.zero_point)
    assert "zero point" in check_conv(op, g)
    g, op = _conv_graph(FIXTURES / "hybrid_conv_odd_same_hybrid.tflite")
    w = g.tensors[op.inputs[1]]
    w.quant.scale = w.quant.scale[:3]
    assert "scales" in check_conv(op, g)
    g, op = _conv_graph(FIXTURES / "hybrid_conv_odd_same_hybrid.tflite")
    g.tensors[op.inputs[1]].quant = None
    assert "quantisation" in check_conv(op, g)
    # a hybrid depthwise layer without quantisation, or with one scale for all channels
    # (LiteRT only has a per-channel hybrid depthwise), is refused with a reason that says so
    from test_lower_conv import make_layer
    w = np.ones((1, 3, 3, 4), np.int8)
    g = make_layer("DEPTHWISE_CONV_2D", (1, 5, 5, 4), w, None, dtype="float32")
    reason = check_conv(g.ops[0], g)
    assert reason is not None and "hybrid" in reason and "DEPTHWISE_CONV_2D" in reason
    g, op = _conv_graph(FIXTURES / "hybrid_dw_3x3_same_relu_hybrid.tflite")
    assert check_conv(op, g) is None
    w = g.tensors[op.inputs[1]]
    w.quant.scale = w.quant.scale[:1]
    reason = check_conv(op, g)
    assert "DEPTHWISE_CONV_2D" in reason and "per output channel" in reason


# ---- C: scratch size query, warnings, no fused multiply-add -----------------------------------

def test_scratch_size_matches_the_c_function(tmp_path):
    ops = []
    for p in HYBRID_FIXTURES:
        ops += [op for op in compile_model(p).graph.ops
                if op.kernel in ("conv2d_hybrid", "fully_connected_hybrid", "depthwise_conv2d_hybrid")]
    printed = c_scratch_sizes(ops, "ai_kernels_hybrid.h", [HYBRID_SOURCE], WARN[:-1], tmp_path)
    assert printed == [op.scratch for op in ops] and all(s > 0 for s in printed)


def test_kernel_compiles_clean_and_without_fma(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    subprocess.run([cc, *WARN, f"-I{RUNTIME / 'include'}", "-c", str(HYBRID_SOURCE), "-o",
                    str(tmp_path / "h.o")], check=True)
    arm = shutil.which("arm-none-eabi-gcc")
    if arm is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    # the firmware Makefile's GNU C mode, where GCC contracts a*b+c by default
    for std in ("-std=c99", "-std=gnu11"):
        obj = tmp_path / f"m4{std[5:]}.o"
        subprocess.run([arm, *M4, std, *WARN[1:], f"-I{RUNTIME / 'include'}", "-c", str(HYBRID_SOURCE),
                        "-o", str(obj)], check=True)
        dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True,
                             check=True).stdout
        assert not any(i in dis for i in ("vfma", "vfms", "vmla", "vmls", "vfnm")), std


def test_hybrid_dilated_triple_is_not_fused():
    """SPACE_TO_BATCH_ND -> hybrid conv -> BATCH_TO_SPACE_ND stays three ops: LiteRT quantises
    each of the block^2 batches on its own, a fused dilated convolution would not."""
    from stm32ai.ir import Graph, Op
    from stm32ai.passes.dilated_conv import fuse_dilated_convs

    def triple(w_dtype: str) -> Graph:
        g = Graph("t", [], [], [], [])
        x = g.add_tensor("x", (1, 8, 8, 4), "float32")
        block = g.add_const("block", np.array([2, 2], np.int32))
        pads = g.add_const("pads", np.array([[2, 2], [2, 2]], np.int32))
        crops = g.add_const("crops", np.zeros((2, 2), np.int32))
        s = g.add_tensor("s2b", (4, 6, 6, 4), "float32")
        w = g.add_const("w", np.ones((1, 3, 3, 4), w_dtype))
        c = g.add_tensor("dw", (4, 4, 4, 4), "float32")
        y = g.add_tensor("y", (1, 8, 8, 4), "float32")
        g.ops = [Op("SPACE_TO_BATCH_ND", [x, block, pads], [s], {}, index=0),
                 Op("DEPTHWISE_CONV_2D", [s, w, -1], [c], {"padding": "VALID", "depth_multiplier": 1}, index=1),
                 Op("BATCH_TO_SPACE_ND", [c, block, crops], [y], {}, index=2)]
        g.inputs, g.outputs = [x], [y]
        return g

    assert [op.type for op in fuse_dilated_convs(triple("float32")).ops] == ["DEPTHWISE_CONV_2D"]
    assert len(fuse_dilated_convs(triple("int8")).ops) == 3
