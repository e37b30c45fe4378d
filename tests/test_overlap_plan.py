"""Overlapping input/output buffers (issue 10): the plans of real models replayed byte by byte
by an independent simulator (tests/plan_sim.py), the safe offsets of the kernel access models
checked against that simulator, and the MLPerf Tiny pool targets."""

import numpy as np
import pytest
from conftest import fixture_models, shared_model
from plan_sim import KERNEL_STEPS, simulate_plan

from stm32ai.ir import Op
from stm32ai.passes.lower.overlap import access_steps, safe_ranges
from stm32ai.pipeline import compile_model
from stm32ai.planner import check_plan

# pool targets (I/O inside), issue 10; "ram" may use other kernels' orders
TARGETS = {
    ("mlperf_tiny/pretrainedResnet_quant.tflite", "balanced"): 36 * 1024,
    ("mlperf_tiny/vww_96_int8.tflite", "balanced"): 40 * 1024,
    ("mlperf_tiny/ad01_int8.tflite", "balanced"): 768,
    ("mlperf_tiny/kws_ref_model.tflite", "ram"): 9 * 1024,
    ("mlperf_tiny/pretrainedResnet_quant.tflite", "ram"): 36 * 1024,
    ("mlperf_tiny/vww_96_int8.tflite", "ram"): 40 * 1024,
    ("mlperf_tiny/kws_ref_model.tflite", "balanced"): 9 * 1024,  # transposed 3x3 walk, 2-channel groups
}


@pytest.fixture(scope="module", params=sorted(TARGETS), ids=lambda k: f"{k[0].split('/')[1][:-7]}-{k[1]}")
def compiled(request):
    rel, mode = request.param
    # the layer-by-layer plan the overlaps serve (stripes: tests/test_stripes.py)
    return compile_model(shared_model(rel), optimization=mode, stripes=False), TARGETS[request.param]


def test_pool_at_target_and_plan_replays(compiled):
    c, target = compiled
    assert c.plan.pool_size <= target
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)


def test_overlaps_are_used(compiled):
    c, _ = compiled
    if c.plan.lower_bound > 1024:
        assert c.plan.pool_size < c.plan.lower_bound  # below the no-overlap liveness bound
        assert any(b.inner for b in c.plan.buffers)


@pytest.mark.parametrize("model", [p for p in fixture_models() if p.name.startswith(
    ("conv_", "dwconv_", "add_", "classifier_"))], ids=lambda p: p.stem)
def test_fixture_plans_replay(model):
    for mode in ("balanced", "ram"):
        c = compile_model(model, optimization=mode)
        check_plan(c.plan)
        simulate_plan(c.graph, c.plan)


def test_winograd_layers_overlap_their_input():
    """IC on the Cortex-M4 (the default rule takes its four 16+-channel 3x3 layers onto
    Winograd): every Winograd layer whose input dies writes over it, the plan replays byte by
    byte, and the pool stays near the direct kernels' (33,968 B on the emulated board; 53,264 B
    before the Winograd access model)."""
    c = compile_model(shared_model("mlperf_tiny/pretrainedResnet_quant.tflite"), core="cortex-m4", stripes=False)
    wino = [op for op in c.graph.ops if op.kernel == "conv2d_wino_s8"]
    assert len(wino) == 4 and all(op.attrs["tiles"] == 4 for op in wino)
    joined = [op for op in wino if c.plan.tensor_buffer[op.inputs[0]] == c.plan.tensor_buffer[op.outputs[0]]]
    assert len(joined) == 3  # the fourth, a block's first conv, reads the skip tensor the ADD needs
    check_plan(c.plan)
    simulate_plan(c.graph, c.plan)
    assert c.plan.pool_size <= 35_456


def test_simulator_catches_an_unsafe_overlap():
    """Put a row-walked 3x3 depthwise output on its input (it needs to trail by a row, the
    next band re-reads the last rows): the replay fails."""
    c = compile_model(shared_model("mlperf_tiny/kws_ref_model.tflite"), optimization="ram",
                      stripes=False)  # layer by layer: stripes would fuse the depthwise away
    simulate_plan(c.graph, c.plan)
    op = next(o for o in c.graph.ops if o.kernel.startswith("depthwise_conv2d_3x3"))
    x, y = op.inputs[0], op.outputs[0]
    assert c.plan.tensor_buffer[x] == c.plan.tensor_buffer[y]
    inner = c.plan.buffers[c.plan.tensor_buffer[y]].inner
    assert inner.get(y, 0) != inner.get(x, 0)
    inner[y] = inner.get(x, 0)
    with pytest.raises(AssertionError, match="overwritten"):
        simulate_plan(c.graph, c.plan)


def _replay_ok(kernel: str, attrs: dict, n_in: int, n_out: int, delta: int) -> bool:
    """Replay one kernel with its output at `delta` from its input (plan_sim's loop order)."""
    base = max(0, -delta)
    owner = np.full(base + max(n_in, delta + n_out) + 8, -1)
    owner[base:base + n_in] = 1
    for reads, writes in KERNEL_STEPS[kernel](attrs):
        if np.any(owner[base + reads] != 1):
            return False
        owner[base + delta + writes] = 2
    return True


def _geo(ih, iw, ic, oc, k, s, pad, **extra):
    oh, ow = (ih - (k if pad == 0 else 1)) // s + 1, (iw - (k if pad == 0 else 1)) // s + 1
    return {"batches": 1, "in_h": ih, "in_w": iw, "in_c": ic, "out_h": oh, "out_w": ow, "out_c": oc,
            "k_h": k, "k_w": k, "stride": [s, s], "dilation": [1, 1], "pad": [pad, pad], **extra}


CASES = [
    ("conv2d_s8", _geo(6, 5, 8, 8, 1, 1, 0)),
    ("conv2d_s8", _geo(6, 5, 8, 16, 1, 1, 0)),
    ("conv2d_s8", _geo(6, 5, 16, 8, 1, 1, 0, reverse=1)),
    ("conv2d_s8", _geo(7, 6, 4, 4, 3, 1, 1)),
    ("conv2d_s8", _geo(8, 8, 3, 8, 3, 2, 0, krow=1)),
    ("conv2d_s8", _geo(9, 7, 8, 8, 3, 2, 1, reverse=1)),
    ("depthwise_conv2d_3x3_s8", _geo(11, 5, 8, 8, 3, 1, 1, transpose=0)),
    ("depthwise_conv2d_3x3_s8", _geo(5, 11, 8, 8, 3, 1, 1, transpose=1)),
    ("depthwise_conv2d_3x3_s8", _geo(12, 12, 8, 8, 3, 2, 0, transpose=0)),
    ("depthwise_conv2d_3x3_s8", _geo(10, 6, 6, 6, 3, 1, 1, transpose=0)),
    ("depthwise_conv2d_3x3_g2_s8", _geo(5, 11, 6, 6, 3, 1, 1, transpose=1)),
    ("depthwise_conv2d_3x3_g2_s8", _geo(11, 5, 5, 5, 3, 1, 1, transpose=0)),
    ("depthwise_conv2d_3x3_g2_sgn_s8", _geo(13, 9, 6, 6, 3, 2, 0, transpose=1)),
    # the HWC variant (stripe members): rows, channels, pixel pairs
    ("depthwise_conv2d_3x3_hwc_s8", _geo(5, 5, 8, 8, 3, 1, 1)),
    ("depthwise_conv2d_3x3_hwc_s8", _geo(3, 6, 8, 8, 3, 1, 1)),
    ("depthwise_conv2d_3x3_hwc_sgn_s8", _geo(9, 7, 8, 8, 3, 2, 1)),
    ("depthwise_conv2d_3x3_hwc_s8", _geo(8, 8, 16, 16, 3, 2, 0)),
    # weights staged in blocks of output channels: each block re-reads the whole input
    ("conv2d_s8", _geo(6, 5, 8, 16, 1, 1, 0, stage_oc=4)),
    ("conv2d_s8", _geo(7, 6, 4, 7, 3, 1, 1, stage_oc=2, reverse=1)),
    ("conv2d_s8", _geo(9, 7, 16, 6, 3, 2, 1, stage_oc=3)),
    ("conv2d_s8", _geo(6, 5, 8, 8, 1, 1, 0, stage_oc=8)),  # one block: the unstaged order
    # Winograd F(2x2,3x3): bands of 2 rows, blocks of 4 or 8 tiles; several blocks per band
    # (the carried bottom-left pixel), one block, odd rows / columns, valid padding
    ("conv2d_wino_s8", _geo(7, 20, 8, 8, 3, 1, 1, tiles=4)),
    ("conv2d_wino_s8", _geo(6, 12, 16, 16, 3, 1, 1, tiles=4)),
    ("conv2d_wino_s8", _geo(6, 21, 8, 6, 3, 1, 1, tiles=8)),
    ("conv2d_wino_s8", _geo(5, 7, 4, 8, 3, 1, 1, tiles=4)),
    ("conv2d_wino_s8", _geo(9, 12, 6, 6, 3, 1, 0, tiles=4)),
]


@pytest.mark.parametrize("kernel,attrs", CASES)
def test_safe_offsets_replay(kernel, attrs):
    """Every offset the access model calls safe replays without a stale read, and near 0 it
    finds every offset the replay accepts."""
    from stm32ai.ir import Graph

    g = Graph("t", [], [], [], [])
    ic, oc = attrs["in_c"], attrs["out_c"]
    x = g.add_tensor("x", (1, attrs["in_h"], attrs["in_w"], ic), "int8")
    y = g.add_tensor("y", (1, attrs["out_h"], attrs["out_w"], oc), "int8")
    op = Op("T", [x, -1], [y], kernel=kernel, attrs=attrs)
    steps = access_steps(op, g)
    n_in, n_out = g.tensors[x].nbytes, g.tensors[y].nbytes
    ranges = safe_ranges(steps, n_in, n_out, 8)
    safe = {d for lo, hi in ranges for d in range(lo, hi + 1, 8)}
    for d in safe:
        assert _replay_ok(kernel, attrs, n_in, n_out, d), d
    # exact within the probe window around 0
    for d in range(-min(n_out, 512) // 8 * 8, min(n_in, 512) + 1, 8):
        assert (d in safe) == _replay_ok(kernel, attrs, n_in, n_out, d), d
    blocks = attrs.get("stage_oc", 0) and attrs["stage_oc"] < attrs["out_c"]
    assert blocks or len(safe) > 2 or ranges[0][1] > ranges[0][0]  # some real overlap in each case
