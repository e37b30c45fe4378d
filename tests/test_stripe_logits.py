"""The MLPerf Tiny models cut before their SOFTMAX, under `--optimization ram` (stripes), against
TFLite Micro: the logits, not the class probabilities. The int8 softmax of these models saturates
(one class at 127, the rest at -128 for most inputs), so an error in a stripe member's kernel can
leave the model's own output bit-exact while its logits are wrong (session 37: an in-place row of
the HWC depthwise's assembly did). Host build (the portable C paths) and the emulated Cortex-M4
(the Armv7E-M assembly paths), each against TFLite Micro on the same cut model."""

from __future__ import annotations

import shutil
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from conftest import shared_model
from test_lower_basic import schema

from stm32ai.pipeline import compile_model

tflm = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

MODELS = {"kws": "mlperf_tiny/kws_ref_model.tflite", "ic": "mlperf_tiny/pretrainedResnet_quant.tflite",
          "vww": "mlperf_tiny/vww_96_int8.tflite"}
SOFTMAX = schema.BuiltinOperator.SOFTMAX


def _cut_before_softmax(src: bytes) -> bytes:
    """The model with its last SOFTMAX and everything after it removed; the softmax's input
    (the logits) becomes the only output."""
    m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(src, 0))
    sg = m.subgraphs[0]
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]
    last = max(i for i, op in enumerate(sg.operators) if codes[op.opcodeIndex] == SOFTMAX)
    sg.outputs = [sg.operators[last].inputs[0]]
    sg.operators = sg.operators[:last]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _cut_model(name: str, tmp: Path) -> Path:
    path = shared_model(MODELS[name])  # skips when the shared models are absent
    out = tmp / f"{name}_logits.tflite"
    out.write_bytes(_cut_before_softmax(path.read_bytes()))
    return out


@pytest.fixture(scope="module", params=sorted(MODELS))
def cut(request, tmp_path_factory):
    return request.param, _cut_model(request.param, tmp_path_factory.mktemp("logits"))


def _tflm(data: bytes, x: np.ndarray) -> np.ndarray:
    it = tflm.Interpreter.from_bytes(data, arena_size=1 << 21)
    it.set_input(x, 0)
    it.invoke()
    return it.get_output(0)


def test_logits_on_host_match_tflm(cut):
    """Host build: random inputs whose logits are spread out (not one saturated class), every
    logit equal to TFLM's."""
    from stm32ai.validate.host import run_compiled

    name, path = cut
    c = compile_model(path, "network", optimization="ram")
    assert any(op.kernel == "stripe" for op in c.graph.ops), f"{name}: no stripe formed"
    shape = tuple(int(d) for d in c.graph.tensors[c.graph.inputs[0]].shape)
    rng = np.random.default_rng(37)
    xs = [[rng.integers(-128, 128, shape).astype(np.int8)] for _ in range(2)]
    data = path.read_bytes()
    for x, got in zip(xs, run_compiled(c, xs), strict=True):
        want = _tflm(data, x[0])
        assert not np.isin(want, (-128, 127)).all(), f"{name}: saturated reference logits: a weak check"
        np.testing.assert_array_equal(got[0].reshape(want.shape), want)


@pytest.mark.slow
@pytest.mark.parametrize("name,rows", [("kws", False), ("ic", False), ("vww", False), ("vww", True)],
                         ids=["kws", "ic", "vww", "vww_input_rows"])
def test_logits_on_the_emulated_m4_match_tflm(name, rows, tmp_path, capsys):
    """The generated firmware on the emulated Cortex-M4 (QEMU netduinoplus2: the Armv7E-M
    assembly rows of the stripe members), its test vector's logits against TFLite Micro's."""
    from stm32ai.cli import main

    if not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm not installed")
    path = _cut_model(name, tmp_path)
    out = tmp_path / "proj"
    args = ["generate", str(path), "--board", "qemu-netduinoplus2", "--optimization", "ram", "-o", str(out)]
    assert main(args + (["--input-rows"] if rows else [])) == 0
    capsys.readouterr()
    assert main(["run", str(out)]) == 0
    kv = dict(ln.split(": ", 1) for ln in capsys.readouterr().out.splitlines() if ": " in ln)
    assert kv["result"] == "match", kv
