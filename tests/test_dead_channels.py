"""Dead-channel elimination (stm32ai/passes/dead_channels.py), read as a specification.

Small int8 models with all-zero weight channels, written with the tflite-micro flatbuffer
schema (tests/test_lower_basic.py's ModelBuilder plus CONV_2D / DEPTHWISE_CONV_2D), are
compiled with the pass, run as C on the host and compared bit for bit with TFLite Micro
(an independent reference: it runs the unpruned model). Each test also checks what the pass
removed, so a pass that silently stopped pruning fails too:

* a dead channel into a 1x1 conv (folded into its bias), into a FULLY_CONNECTED through
  a flattening RESHAPE (one channel -> every H*W-th feature), through AVERAGE_POOL;
* into a 3x3 SAME depthwise conv: folded only when the constant equals the padding value
  (the input zero point); with another value the border taps differ, which TFLM shows, and
  the channel must stay; with VALID padding it folds whatever its value;
* a consumer whose weights ignore a channel makes the producer drop it (live weights only);
* chains, graph outputs (never pruned), and the fixed point (a second run removes nothing);
* the real MLPerf Tiny VWW model and a VWW cut after a pruned layer (every channel of that
  layer checked against TFLM), slow.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, shared_model
from test_lower_basic import ModelBuilder, check_against_tflm, schema

from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.passes.dead_channels import prune_dead_channels
from stm32ai.pipeline import compile_graph, compile_model

F32 = np.float32


class ConvBuilder(ModelBuilder):
    """ModelBuilder with CONV_2D and DEPTHWISE_CONV_2D."""

    def conv(self, x, w, b, y, padding="SAME", stride=1, act="NONE") -> None:
        o = schema.Conv2DOptionsT()
        o.padding = 0 if padding == "SAME" else 1
        o.strideH = o.strideW = stride
        o.dilationHFactor = o.dilationWFactor = 1
        o.fusedActivationFunction = self._ACT[act]
        self.op(schema.BuiltinOperator.CONV_2D, [x, w, b], [y], schema.BuiltinOptions.Conv2DOptions, o)
        self.io([x], y)

    def dw(self, x, w, b, y, padding="SAME", stride=1, act="NONE") -> None:
        o = schema.DepthwiseConv2DOptionsT()
        o.padding = 0 if padding == "SAME" else 1
        o.strideH = o.strideW = stride
        o.dilationHFactor = o.dilationWFactor = 1
        o.depthMultiplier = 1
        o.fusedActivationFunction = self._ACT[act]
        self.op(schema.BuiltinOperator.DEPTHWISE_CONV_2D, [x, w, b], [y],
                 schema.BuiltinOptions.DepthwiseConv2DOptions, o)
        self.io([x], y)


class Net:
    """A sequential int8 model: each layer's output quantisation is (scale, zero point)."""

    def __init__(self, shape, scale=0.05, zp=3, seed=0) -> None:
        self.mb = ConvBuilder()
        self.rng = np.random.default_rng(seed)
        self.x = self.mb.tensor(shape, "int8", scale, zp)
        self.shape, self.scale = tuple(shape), scale

    def _weights(self, shape, dead_axis, dead) -> tuple[np.ndarray, np.ndarray]:
        w = self.rng.integers(-127, 128, shape).astype(np.int8)
        idx = [slice(None)] * len(shape)
        idx[dead_axis] = list(dead)
        w[tuple(idx)] = 0
        return w, self.rng.uniform(0.003, 0.01, shape[dead_axis]).astype(F32)

    def _bias(self, n, w_scale, bias) -> int:
        b = self.rng.integers(-3000, 3000, n) if bias is None else np.asarray(bias)
        bs = F32(self.scale) * w_scale
        return self.mb.tensor((n,), "int32", bs, np.zeros(n, np.int64), b.astype(np.int32))

    def conv(self, oc, k=1, dead=(), bias=None, out=(0.1, -5), padding="SAME", act="NONE",
             zero_inputs=()) -> int:
        ic = self.shape[3]
        w, ws = self._weights((oc, k, k, ic), 0, dead)
        w[:, :, :, list(zero_inputs)] = 0
        wt = self.mb.tensor(w.shape, "int8", ws, np.zeros(oc, np.int64), w, axis=0)
        return self._windowed(self.mb.conv, wt, ws, oc, k, bias, out, padding, act)

    def dw(self, k=3, dead=(), bias=None, out=(0.1, -5), padding="SAME", act="NONE") -> int:
        c = self.shape[3]
        w, ws = self._weights((1, k, k, c), 3, dead)
        wt = self.mb.tensor(w.shape, "int8", ws, np.zeros(c, np.int64), w, axis=3)
        return self._windowed(self.mb.dw, wt, ws, c, k, bias, out, padding, act)

    def _windowed(self, emit, wt, ws, oc, k, bias, out, padding, act) -> int:
        """Bias, output tensor and the op (conv or dw, k x k, stride 1) after the weights."""
        b = self._bias(oc, ws, bias)
        n, h, wd, _ = self.shape
        if padding == "VALID":
            h, wd = h - k + 1, wd - k + 1
        y = self.mb.tensor((n, h, wd, oc), "int8", *out)
        emit(self.x, wt, b, y, padding, act=act)
        return self._next(y, (n, h, wd, oc), out[0])

    def avgpool(self, kind="avg") -> int:
        n, h, w, c = self.shape
        zp = int(self.mb.tensors[self.x].quantization.zeroPoint[0])
        y = self.mb.tensor((n, 1, 1, c), "int8", self.scale, zp)
        self.mb.pool(kind, self.x, y, h, w, 1, 1, "VALID")
        return self._next(y, (n, 1, 1, c), self.scale)

    def pool_same(self, kind="max") -> int:
        """3x3 stride 2 SAME pooling (windows clipped at the border)."""
        n, h, w, c = self.shape
        zp = int(self.mb.tensors[self.x].quantization.zeroPoint[0])
        shape = (n, (h + 1) // 2, (w + 1) // 2, c)
        y = self.mb.tensor(shape, "int8", self.scale, zp)
        self.mb.pool(kind, self.x, y, 3, 3, 2, 2, "SAME")
        return self._next(y, shape, self.scale)

    def flatten(self) -> int:
        zp = int(self.mb.tensors[self.x].quantization.zeroPoint[0])
        size = int(np.prod(self.shape))
        y = self.mb.tensor((1, size), "int8", self.scale, zp)
        self.mb.reshape(self.x, y)
        return self._next(y, (1, size), self.scale)

    def fc(self, n_out, out=(0.2, 4)) -> int:
        k = self.shape[-1]
        w, ws = self._weights((n_out, k), 0, ())
        wt = self.mb.tensor(w.shape, "int8", ws, np.zeros(n_out, np.int64), w, axis=0)
        b = self._bias(n_out, ws, None)
        y = self.mb.tensor((1, n_out), "int8", *out)
        self.mb.fc(self.x, wt, b, y)
        return self._next(y, (1, n_out), out[0])

    def _next(self, y, shape, scale) -> int:
        self.x, self.shape, self.scale = y, tuple(shape), scale
        return y


# Bias 0 makes a dead channel output exactly the zero point, i.e. the next layer's input zero
# point; a large positive bias puts it elsewhere (20000 * 0.05 * [0.003, 0.01] / 0.1: +30..+100 LSB).
AT_ZP, OFF_ZP = 0, 20000


def _pruned(tmp: Path, net: Net):
    path = tmp / "model.tflite"
    path.write_bytes(net.mb.build())
    c = compile_model(path)
    return c, {ly.index: ly for ly in c.pruned.layers}


def _exact(tmp: Path, net: Net, n=6) -> None:
    check_against_tflm(net.mb, tmp, n=n, seed=3)


def _bias_with(n: int, dead, value: int, rng) -> np.ndarray:
    b = rng.integers(-3000, 3000, n)
    b[list(dead)] = value
    return b


def test_dead_channel_into_1x1_conv_is_folded_into_its_bias(tmp_path):
    net = Net((1, 5, 6, 4))
    rng = np.random.default_rng(1)
    net.conv(7, k=3, dead=(1, 4, 5), bias=_bias_with(7, (1, 4, 5), OFF_ZP, rng))
    net.conv(5, k=1)
    c, layers = _pruned(tmp_path, net)
    assert layers[0].out_channels == (7, 4)
    assert layers[1].in_channels == (7, 4) and layers[1].folded == 3
    assert c.pruned.macc_saved == 5 * 6 * 3 * 9 * 4 + 5 * 6 * 5 * 3
    _exact(tmp_path, net)


def test_dead_channels_into_fc_through_flatten_and_average_pool(tmp_path):
    # conv (2 of 6 channels dead) -> flatten 3x2x6 -> FC: channel c is every 6th feature
    net = Net((1, 3, 2, 5))
    net.conv(6, k=1, dead=(0, 3), bias=_bias_with(6, (0, 3), OFF_ZP, np.random.default_rng(2)))
    net.flatten()
    net.fc(3)
    c, layers = _pruned(tmp_path, net)
    assert layers[0].out_channels == (6, 4)
    assert layers[1].out_channels == (36, 24)  # the reshape's output features
    assert layers[2].in_channels == (36, 24) and layers[2].folded == 12
    _exact(tmp_path, net)

    # conv -> average pool -> flatten -> FC (the end of MobileNet / VWW)
    net = Net((1, 4, 3, 5), seed=1)
    net.conv(6, k=1, dead=(2, 5), bias=_bias_with(6, (2, 5), OFF_ZP, np.random.default_rng(3)), act="RELU")
    net.avgpool()
    net.flatten()
    net.fc(4)
    c, layers = _pruned(tmp_path, net)
    assert [layers[i].out_channels[1] for i in range(3)] == [4, 4, 4]
    assert layers[3].folded == 2
    _exact(tmp_path, net)

    # clipped SAME windows: max of the in-image taps, average over them (v either way)
    net = Net((1, 5, 5, 3), seed=2)
    net.conv(6, k=1, dead=(0, 4), bias=_bias_with(6, (0, 4), OFF_ZP, np.random.default_rng(4)))
    net.pool_same("max")
    net.pool_same("avg")
    net.flatten()
    net.fc(2)
    c, layers = _pruned(tmp_path, net)
    assert [layers[i].out_channels[1] for i in range(3)] == [4, 4, 4]
    assert layers[4].folded == 2 * 4  # 2 channels x 2x2 pixels
    _exact(tmp_path, net)


def _dw_chain(padding: str, dead_bias: int, seed=0) -> Net:
    net = Net((1, 6, 7, 4), seed=seed)
    net.conv(6, k=1, dead=(1, 4), bias=_bias_with(6, (1, 4), dead_bias, np.random.default_rng(seed)))
    net.dw(k=3, padding=padding)
    net.conv(3, k=1)
    return net


def test_depthwise_same_folds_only_a_constant_equal_to_the_padding_value(tmp_path):
    # dead channels at the zero point: the depthwise reads the same value in and outside the
    # image, its output channel is constant, the 1x1 conv folds it, the channel disappears
    net = _dw_chain("SAME", AT_ZP)
    _, layers = _pruned(tmp_path, net)
    assert layers[0].out_channels == (6, 4) and layers[1].out_channels == (6, 4)
    assert layers[2].folded == 2
    _exact(tmp_path, net)

    # dead channels away from the zero point: border taps read the zero point instead, so the
    # depthwise output is not constant and nothing may be removed
    net = _dw_chain("SAME", OFF_ZP)
    c, layers = _pruned(tmp_path, net)
    assert not layers
    _exact(tmp_path, net)


def test_depthwise_same_border_really_differs_when_constant_is_not_the_zero_point(tmp_path):
    """The negative control: TFLM's depthwise output of such a channel varies at the border,
    so a pass that folded it as a constant would fail the test above."""
    tflm = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    net = Net((1, 6, 7, 4))
    net.conv(6, k=1, dead=(1, 4), bias=_bias_with(6, (1, 4), OFF_ZP, np.random.default_rng(0)))
    net.dw(k=3, padding="SAME")
    it = tflm.Interpreter.from_bytes(net.mb.build(), arena_size=1 << 20)
    it.set_input(np.random.default_rng(5).integers(-128, 128, (1, 6, 7, 4)).astype(np.int8), 0)
    it.invoke()
    y = it.get_output(0)
    for c in (1, 4):
        assert y[0, 1:-1, 1:-1, c].min() == y[0, 1:-1, 1:-1, c].max()  # constant inside
        assert len(np.unique(y[0, :, :, c])) > 1  # not at the border


def test_depthwise_valid_folds_any_constant(tmp_path):
    net = _dw_chain("VALID", OFF_ZP, seed=4)
    _, layers = _pruned(tmp_path, net)
    assert layers[0].out_channels == (6, 4) and layers[2].folded == 2
    _exact(tmp_path, net)


def test_channel_ignored_by_every_consumer_weight_is_dropped(tmp_path):
    # the producer's channels 0 and 2 have weights, but the consumer never reads them
    net = Net((1, 4, 4, 3))
    net.conv(5, k=3)
    net.conv(4, k=1, zero_inputs=(0, 2))
    _, layers = _pruned(tmp_path, net)
    assert layers[0].out_channels == (5, 3) and layers[1].folded == 0
    _exact(tmp_path, net)


def test_tensor_with_two_consumers_drops_only_what_both_can_do_without(tmp_path):
    # channel 3 is at the zero point: the depthwise path folds it later, the 3x3 SAME conv
    # folds it directly -> removed; channel 1 is not: both paths need it -> kept, read as is
    net = Net((1, 5, 5, 3), seed=8)
    bias = _bias_with(6, (3,), AT_ZP, np.random.default_rng(8))
    bias[1] = OFF_ZP
    net.conv(6, k=1, dead=(1, 3), bias=bias)
    branch = (net.x, net.shape, net.scale)
    net.dw(k=3)
    net.conv(4, k=1)
    net.x, net.shape, net.scale = branch
    net.conv(3, k=3)
    net.mb.inputs.remove(branch[0])  # ModelBuilder.io took the second read for a graph input
    _, layers = _pruned(tmp_path, net)
    assert layers[0].out_channels == (6, 5) and layers[1].out_channels == (6, 5)
    assert layers[2].folded == 1 and layers[3].folded == 1
    _exact(tmp_path, net)


def test_chain_to_a_classifier_and_fixed_point(tmp_path):
    net = Net((1, 8, 8, 3), seed=6)
    r = np.random.default_rng(6)
    net.conv(8, k=3, dead=(0, 5), bias=_bias_with(8, (0, 5), AT_ZP, r), act="RELU", out=(0.05, -128))
    net.dw(k=3, dead=(3,), bias=_bias_with(8, (3,), -50, r), act="RELU", out=(0.05, -128))
    net.conv(12, k=1, dead=(1, 2, 7, 11), bias=_bias_with(12, (1, 2, 7, 11), OFF_ZP, r), act="RELU",
             out=(0.05, -128))
    net.dw(k=3, padding="VALID", act="RELU", out=(0.05, -128))
    net.conv(6, k=1, dead=(4,), act="RELU", out=(0.05, -128))
    net.avgpool()
    net.flatten()
    net.fc(3)
    c, layers = _pruned(tmp_path, net)
    assert layers[0].out_channels == (8, 5)  # 0, 5 dead; 3 dead in the depthwise, folded later
    assert layers[2].out_channels == (12, 8)
    assert layers[4].out_channels == (6, 5) and layers[7].folded == 1
    _exact(tmp_path, net, n=8)
    # a second run over the pruned graph finds nothing more (the fixed point)
    path = tmp_path / "model.tflite"
    g = load_tflite(path)
    c = compile_graph(copy.deepcopy(g), prune=False)
    assert c.pruned is None
    from stm32ai.passes.canonicalize import canonicalize
    from stm32ai.passes.fold_constants import fold_constants
    fold_constants(g)
    canonicalize(g)
    assert prune_dead_channels(g).layers
    assert not prune_dead_channels(g).layers


def test_graph_outputs_keep_every_channel(tmp_path):
    net = Net((1, 4, 4, 3))
    net.conv(5, k=1, dead=(0, 1, 2, 3, 4), bias=np.full(5, OFF_ZP))
    _, layers = _pruned(tmp_path, net)
    assert not layers
    _exact(tmp_path, net)
    # all channels of a hidden tensor constant and folded: one channel stays
    net = Net((1, 4, 4, 3))
    net.conv(4, k=1, dead=(0, 1, 2, 3), bias=np.full(4, OFF_ZP))
    net.conv(3, k=1)
    _, layers = _pruned(tmp_path, net)
    assert layers[0].out_channels == (4, 1) and layers[1].folded == 3
    _exact(tmp_path, net)


# ---- the real model ------------------------------------------------------------------------------

VWW = "mlperf_tiny/vww_96_int8.tflite"


def test_vww_macc_and_weights():
    path = shared_model(VWW)
    before, after = compile_model(path, prune=False), compile_model(path)
    m0, m1 = (sum(op.macc for op in c.graph.ops) for c in (before, after))
    assert m0 == 7_491_976 and m1 < 0.55 * m0  # X-CUBE-AI: 7.49 M -> 4.65 M
    assert after.pruned.macc_saved == m0 - m1
    w0, w1 = ({p["name"]: p["size"] for p in c.doc["stm32ai"]["pools"]}["weights"] for c in (before, after))
    assert w1 < 0.2 * w0


def test_analyze_reports_what_was_removed_and_no_prune_turns_it_off(tmp_path, capsys):
    import json

    from stm32ai.cli import main

    path = str(shared_model(VWW))
    assert main(["analyze", path, "--json", str(tmp_path / "on.json")]) == 0
    assert "dead-channel elimination" in capsys.readouterr().out
    on = json.loads((tmp_path / "on.json").read_text())
    p = on["pruning"]
    assert p["macc"] == [7_491_976, on["macc"]] and p["weights_bytes"][1] == on["weights_bytes"]
    assert p["removed_channels"] == sum(ly["out_channels"][0] - ly["out_channels"][1] for ly in p["layers"])
    assert main(["analyze", path, "--no-prune", "--json", str(tmp_path / "off.json")]) == 0
    assert "dead-channel elimination" not in capsys.readouterr().out
    off = json.loads((tmp_path / "off.json").read_text())
    assert off["pruning"] is None and off["macc"] == 7_491_976
    assert p["weights_bytes"][0] == off["weights_bytes"]  # "before" is the unpruned compile's figure


@pytest.mark.slow
def test_vww_validates_bit_exact_on_host():
    r = subprocess.run([sys.executable, "-m", "stm32ai", "validate", str(shared_model(VWW)), "--mode", "host",
                        "-n", "4"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "result: match" in r.stdout


@pytest.mark.slow
def test_vww_cut_after_a_pruned_layer_matches_tflm_on_every_channel(tmp_path):
    """VWW truncated after op 22 (a 1x1 conv fed by pruned depthwise layers; 101 of its 128
    output channels are dead): the graph output keeps all 128 channels, computed from pruned
    inputs, and all must equal TFLM's."""
    import flatbuffers

    tflm = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    src = shared_model(VWW).read_bytes()
    m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(src, 0))
    sg = m.subgraphs[0]
    sg.operators = sg.operators[:23]
    sg.outputs = list(sg.operators[-1].outputs)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    data = bytes(b.Output())
    path = tmp_path / "vww_cut.tflite"
    path.write_bytes(data)
    c = compile_model(path)
    assert c.pruned.macc_saved > 2_000_000
    from stm32ai.validate.host import run_compiled

    rng = np.random.default_rng(9)
    xs = [[rng.integers(-128, 128, (1, 96, 96, 3)).astype(np.int8)] for _ in range(3)]
    ours = run_compiled(c, xs)
    for x, got in zip(xs, ours, strict=True):
        it = tflm.Interpreter.from_bytes(data, arena_size=1 << 20)
        it.set_input(x[0], 0)
        it.invoke()
        np.testing.assert_array_equal(got[0].reshape(1, 6, 6, 128), it.get_output(0))
