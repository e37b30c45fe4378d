"""ai_conv2d_s8 with int8 weights read in place, and `stage_gap` (passes/gap_stage.py: weights staged
chunk by chunk in the input's dead rows; its unstaged rows run the snake order, the channel pairs
alternating direction per pixel pair) against the TFLite interpreter."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_flash_staging import SLOW_FLASH, _forced, _layer
from test_lower_conv import _x, reference

from stm32ai.passes import staging
from stm32ai.passes.gap_stage import mark_gap_staging
from stm32ai.pipeline import compile_graph
from stm32ai.validate.host import run_compiled

# (x shape, filter shape, options): out_c * (Kp + 16) > 256 B, fewer than 16 outputs per row (no
# stage_gap: the plain unstaged loops)
SNAKE = [
    ((1, 13, 12, 3), (8, 3, 3, 3), dict(stride=(2, 2), act="RELU6")),   # VWW's first layer: krow, Kp 36, 416 B
    ((1, 9, 9, 3), (8, 3, 3, 3), dict(stride=(2, 2))),                  # 5x5 outputs: an odd last pixel
    ((1, 7, 3, 8), (12, 3, 3, 8), dict(act="RELU")),                    # Kp 72, 21 pixels
    ((1, 8, 7, 12), (10, 1, 1, 12), dict()),                            # 1x1, 280 B
    ((2, 6, 5, 4), (6, 3, 3, 4), dict(padding="VALID")),                # batches, 312 B
]


@pytest.mark.parametrize("xs,ws,opts", SNAKE, ids=[f"s{i}" for i in range(len(SNAKE))])
def test_snake_order_matches_tflite_reference(monkeypatch, xs, ws, opts):
    g = _layer(xs, ws, opts)
    x = _x(xs, "int8")
    ref = reference(g, x)
    _forced(monkeypatch, 0, 0)   # unstaged, int8 weights: read in place
    c = compile_graph(copy.deepcopy(g), optimization="ram", flash=SLOW_FLASH)
    op = c.graph.ops[0]
    assert op.kernel == "conv2d_s8" and op.attrs["stage_oc"] == 0 and op.attrs["w16"] == 0
    np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], ref)


# stage_gap (passes/gap_stage.py): the only reader of its input, unstaged int8 weights
GAP = [
    ((1, 26, 34, 3), (8, 3, 3, 3), dict(stride=(2, 2), act="RELU6")),   # VWW's first layer, smaller, odd width
    ((1, 12, 16, 3), (8, 3, 3, 3), dict(act="RELU")),                   # stride 1, SAME: a padded top row
    ((1, 9, 18, 8), (6, 3, 3, 8), dict(padding="VALID", stride=(2, 1))),  # no padding
    ((1, 10, 16, 4), (7, 1, 1, 4), dict()),                             # odd out_c: no snake, staged chunks
]


@pytest.mark.parametrize("xs,ws,opts", GAP, ids=[f"g{i}" for i in range(len(GAP))])
def test_gap_staging_matches_tflite_reference(monkeypatch, xs, ws, opts):
    g = _layer(xs, ws, opts)
    x = _x(xs, "int8")
    ref = reference(g, x)
    _forced(monkeypatch, 0, 0)
    c = compile_graph(copy.deepcopy(g), optimization="ram", flash=SLOW_FLASH)
    op = c.graph.ops[0]
    assert op.attrs["stage_oc"] == 0 and op.attrs["w16"] == 0 and op.attrs.get("stage_gap") == 1
    assert c.doc["nodes"][[n.get("attrs", {}).get("func_name") for n in c.doc["nodes"]].index("conv2d_s8")] \
        ["attrs"]["params"]["stage_gap"] == 1
    np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], ref)


def _staged_rows(a: dict, in0: int, out0: int) -> int:
    """Output rows conv2d_s8_gap runs staged at these tensor offsets (its chunk rule, in Python)."""
    kp = staging._kp(a)
    sb, ob, ib = int(a["out_c"]) * (16 + kp), int(a["out_w"]) * int(a["out_c"]), int(a["in_w"]) * int(a["in_c"])
    r0, n, out_h = 0, 0, int(a["out_h"])
    while r0 < out_h:
        first = max(0, r0 * int(a["stride"][0]) - int(a["pad"][0]))
        live = in0 + first * ib
        st = (live - sb) & ~3
        r1 = r0
        if live >= in0 + sb + 3:
            r1 = out_h if out0 >= st + sb else min((st - out0) // ob, out_h) if out0 <= st else r0
        n += r1 - r0 if r1 > r0 else 0
        r0 = r1 if r1 > r0 else r0 + 1
    return n


def test_gap_staging_stages_most_rows_of_an_in_place_first_layer(monkeypatch):
    """VWW's first layer's shape (96x96x3, stride 2, 8 channels): its output is placed in place
    below its input, and all but the first few output rows run staged in the dead input rows."""
    xs, ws = (1, 96, 96, 3), (8, 3, 3, 3)
    g = _layer(xs, ws, dict(stride=(2, 2), act="RELU6"))
    x = _x(xs, "int8")
    _forced(monkeypatch, 0, 0)
    c = compile_graph(copy.deepcopy(g), optimization="ram", flash=SLOW_FLASH)
    op = c.graph.ops[0]
    assert op.attrs.get("stage_gap") == 1
    in0, out0 = c.plan.tensor_offset(op.inputs[0]), c.plan.tensor_offset(op.outputs[0])
    assert out0 < in0 < out0 + 48 * 48 * 8   # in place, below the input
    assert _staged_rows(op.attrs, in0, out0) >= 40
    np.testing.assert_array_equal(run_compiled(c, [[x]])[0][0], reference(g, x))


def test_gap_staging_needs_the_only_reader(monkeypatch):
    """Not in balanced; and with a second reader of the input (its rows are not dead) none; nor
    on a row of fewer than 8 pixel pairs (MIN_OUT_W)."""
    g = _layer((1, 10, 32, 3), (8, 3, 3, 3), dict(stride=(2, 2)))
    _forced(monkeypatch, 0, 0)
    c = compile_graph(copy.deepcopy(g), optimization="balanced", flash=SLOW_FLASH)
    assert all("stage_gap" not in op.attrs for op in c.graph.ops)
    c = compile_graph(copy.deepcopy(g), optimization="ram", flash=SLOW_FLASH)
    op = c.graph.ops[0]
    assert mark_gap_staging(c.graph, c.plan, SLOW_FLASH) == [0]
    c.graph.ops.append(copy.deepcopy(op))     # a second reader of the same input
    del op.attrs["stage_gap"]
    assert mark_gap_staging(c.graph, c.plan, SLOW_FLASH) == []
    narrow = compile_graph(_layer((1, 10, 30, 3), (8, 3, 3, 3), dict(stride=(2, 2))), optimization="ram",
                           flash=SLOW_FLASH)   # 15 outputs per row
    assert "stage_gap" not in narrow.graph.ops[0].attrs
