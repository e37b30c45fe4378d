"""int8 1x1 CONV_2D with 4 or 8 input channels -> conv2d_smallk_s8 (runtime/src/ai_conv_smallk_s8.c,
docs/kernels_conv_smallk.md).

Channel-stationary: one output channel's weights (in_c int8, unpacked to int16 pairs once per
call) and requantisation constants stay in registers while every output pixel streams past, so
an output costs its loads, in_c / 2 SMLADs, the requantisation and one store, instead of
conv2d_s8's per-pixel-pair column staging and per-channel-quad set-up (which dominate when an
output has only 4-8 MACs). The requantisation table is conv2d_s8's (`conv_rq_table`, with the
doubled-accumulator modes `rq_double_mode` proved in passes/lower/conv.py), passed in by the
caller; only folded tables (rq_fold >= 1) are taken.

Default rule (`smallk_default`): the Cortex-M4 only, measured with the cycle estimator on
nucleo-l4r5zi (docs/kernels_conv_smallk.md); not under --optimization ram (stripes call the
direct kernels per band, and conv2d_smallk_s8 is no row-window member).
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower.conv_geometry import ConvGeometry

SMALLK_KERNEL = "conv2d_smallk_s8"
SMALLK_IN_C = (4, 8)  # the C kernel's specialisations (a pixel is 1 or 2 words)
SMALLK_CORES = ("cortex-m4",)  # where the estimator measured it faster than conv2d_s8


def smallk_applies(geo: ConvGeometry) -> bool:
    """The geometry the kernel handles: 1x1, no padding (1x1 never pads), in_c 4 or 8."""
    return (geo.k_h == 1 and geo.k_w == 1 and tuple(geo.pad) == (0, 0) and geo.in_c in SMALLK_IN_C
            and geo.batches >= 1)


def smallk_default(geo: ConvGeometry, core: str | None, optimization: str) -> bool:
    """Whether the default lowering takes a (legal) layer onto conv2d_smallk_s8."""
    return core in SMALLK_CORES and optimization != "ram" and smallk_applies(geo)


def lower_smallk(op: Op, g: Graph, geo: ConvGeometry, w_rows: np.ndarray, table: np.ndarray, rq_mode: int,
                 base: str, attrs: dict[str, object]) -> bool:
    """Lower to conv2d_smallk_s8 when the geometry fits and the requantisation table is folded
    (rq_mode: conv2d_s8's rq_fold, 1..3); False leaves the op to the caller.
    w_rows: int8 [out_c, in_c]; table: conv_rq_table's int32 [out_c, 4] {bias', m, rs, kf}."""
    if not smallk_applies(geo) or rq_mode not in (1, 2, 3):
        return False
    w_id = g.add_const(f"{base}/weights_smallk", np.ascontiguousarray(np.asarray(w_rows, np.int8)))
    q_id = g.add_const(f"{base}/requant", np.asarray(table, np.int32))
    op.kernel = SMALLK_KERNEL
    op.inputs = [op.inputs[0], w_id, q_id]
    op.attrs = {**geo.attrs(), **attrs, "rq_fold": int(rq_mode)}
    op.scratch = 0
    return True
