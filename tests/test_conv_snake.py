"""ai_conv2d_s8's snake order (int8 weights read in place, even out_c, a pass over the channels
longer than AI_CONV_SNAKE_MIN = 256 B: the channel pairs alternate direction per pixel pair) against
the TFLite interpreter, and the estimator's per-context attribution (estimate/profile.py)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_flash_staging import SLOW_FLASH, _forced, _layer
from test_lower_conv import _x, reference

from stm32ai.pipeline import compile_graph
from stm32ai.validate.host import run_compiled

# (x shape, filter shape, options): each runs the snake (out_c even, out_c * (Kp + 16) > 256 B)
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
