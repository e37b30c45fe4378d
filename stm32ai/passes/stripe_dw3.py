"""Pre-doubled packed constants for the stripe members of the planar 3x3 depthwise kernel
(session 39, docs/stripes.md "Pre-doubled depthwise constants").

On the Cortex-M4 a member whose `rqd` is 2 or 3 runs the doubled-accumulator rows
(ai_conv_dw_s8.c, DW3_ROWS_DQ_FN): every channel of every band call loads its 10 packed words
and doubles them (6 SADD16 on the weight pairs, LSL on the bias and khi, rs + 1) before its
rows. All of that is known here: the member's packed constants are emitted already doubled
and its `rqd` becomes 4 / 5 (= 2 / 3 on the doubled record). The row-window entry then runs
its one-band stripe loop with the pair rows (DW3_ROWS_DQ2_FN: both channels of a pair per
call, the record copied to the frame as it is); its other paths, and the builds without the
doubled rows (other cores, the host), halve the record back (`dw3_undouble`, exact) and run
the rows of `rqd` 0. Only the row-window entry reads `rqd` 4 / 5: the op's own (whole-image)
kernel never sees these constants, so members with a `wide` alternative (which calls it) and
staged ones keep theirs.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from stm32ai.ir import Graph
from stm32ai.passes.lower.dwconv3x3 import DW3_K

G2_KERNELS = ("depthwise_conv2d_3x3_g2_s8", "depthwise_conv2d_3x3_g2_sgn_s8")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _half(w: np.ndarray, shift: int) -> np.ndarray:
    h = (w >> shift) & 0xFFFF
    return np.where(h >= 0x8000, h - 0x10000, h)


def predouble_dw3x3(packed: np.ndarray) -> np.ndarray | None:
    """The packed constants {w pairs, bias, m, khi, rs} per channel as the Cortex-M4's
    doubled rows use them: each int16 weight half and the bias doubled, m, khi doubled,
    rs + 1 (what DW3_ROWS_DQ_FN computes per call). None when a value would not fit (the
    `rqd` proof bounds the doubled accumulator, so it never happens for a valid `rqd`)."""
    k = np.asarray(packed, np.int64).reshape(-1, DW3_K)
    w = k[:, :6] & 0xFFFFFFFF
    lo, hi = 2 * _half(w, 0), 2 * _half(w, 16)
    bias, khi = 2 * k[:, 6], 2 * k[:, 8]
    if lo.min(initial=0) < -(2**15) or lo.max(initial=0) >= 2**15 or hi.min(initial=0) < -(2**15) \
            or hi.max(initial=0) >= 2**15:
        return None
    if any(v.min(initial=0) < INT32_MIN or v.max(initial=0) > INT32_MAX for v in (bias, khi)):
        return None
    out = k.copy()
    out[:, :6] = (lo & 0xFFFF) | ((hi & 0xFFFF) << 16)
    out[:, :6] = np.where(out[:, :6] >= 2**31, out[:, :6] - 2**32, out[:, :6])
    out[:, 6], out[:, 8], out[:, 9] = bias, khi, k[:, 9] + 1
    return out.astype(np.int32).reshape(-1)


def undouble_dw3x3(packed: np.ndarray) -> np.ndarray:
    """The inverse (tests; the C's `dw3_undouble`)."""
    k = np.asarray(packed, np.int64).reshape(-1, DW3_K)
    w = k[:, :6] & 0xFFFFFFFF
    lo, hi = _half(w, 0) // 2, _half(w, 16) // 2
    out = k.copy()
    out[:, :6] = (lo & 0xFFFF) | ((hi & 0xFFFF) << 16)
    out[:, :6] = np.where(out[:, :6] >= 2**31, out[:, :6] - 2**32, out[:, :6])
    out[:, 6], out[:, 8], out[:, 9] = k[:, 6] // 2, k[:, 8] // 2, k[:, 9] - 1
    return out.astype(np.int32).reshape(-1)


def predouble_stripe_dw3(g: Graph) -> int:
    """Pre-double the packed constants of every 2-channel planar 3x3 depthwise stripe member
    with `rqd` 2 / 3 on a Cortex-M4 target (the only core with the doubled rows); the member's
    `rqd` becomes 4 / 5. A constant read by anything else is left alone. Returns the count."""
    if g.core != "cortex-m4":
        return 0
    refs: Counter[int] = Counter()
    for op in g.ops:
        refs.update(t for t in op.inputs if t >= 0)
        if op.kernel == "stripe":
            for m in op.attrs["stripe"]["members"]:
                for r in m["inputs"]:
                    if r is not None and "in" in r:
                        refs[op.inputs[int(r["in"])]] += 1
    n = 0
    for op in g.ops:
        if op.kernel != "stripe":
            continue
        for m in op.attrs["stripe"]["members"]:
            p = m["params"]
            if m["kernel"] not in G2_KERNELS or m["kind"] != "window" or "wide" in m \
                    or p.get("rqd") not in (2, 3) or p.get("stage") or p.get("transpose") \
                    or int(p.get("batches", 1)) != 1:
                continue
            r = m["inputs"][1] if len(m["inputs"]) > 1 else None
            if r is None or "in" not in r:
                continue
            t = op.inputs[int(r["in"])]
            ten = g.tensors[t]
            if refs[t] != 2 or not ten.is_const or ten.dtype != "int32":  # this op and this member
                continue
            d = predouble_dw3x3(ten.data)
            if d is None:
                continue
            ten.data = d.reshape(ten.data.shape)
            p["rqd"] = int(p["rqd"]) + 2
            n += 1
    return n
