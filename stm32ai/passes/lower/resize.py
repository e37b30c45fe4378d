"""Lowering of RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR (docs/kernels_movement.md).

Both reproduce TFLite's reference index arithmetic here, at generate time, per output
row and column: the float32 scale computations are replayed step by step in numpy
float32 (the same IEEE operations the reference performs), the int8 bilinear path uses
TFLite's 10-bit fixed-point positions (ResizeBilinearInteger). The C kernels then only
copy (nearest: a ``copy_nd`` with row/column offset tables) or blend four neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower import register
from stm32ai.passes.lower.movement import Dim, check_moved, const_ints, set_copy

_F32 = np.float32


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return _F32(in_size - 1) / _F32(out_size - 1)
    return _F32(in_size) / _F32(out_size)


def nearest_index(i: int, in_size: int, out_size: int, align_corners: bool,
                  half_pixel_centers: bool) -> int:
    """TFLite's GetNearestNeighbor, float32 arithmetic included."""
    scale = _scale(in_size, out_size, align_corners)
    offset = _F32(0.5) if half_pixel_centers else _F32(0.0)
    pos = (_F32(i) + offset) * scale
    if align_corners:
        v = int(math.floor(abs(float(pos)) + 0.5)) * (1 if pos >= 0 else -1)  # std::round
    else:
        v = int(math.floor(float(pos)))
    v = min(v, in_size - 1)
    if half_pixel_centers:
        v = max(0, v)
    return v


def bilinear_float(i: int, in_size: int, out_size: int, align_corners: bool,
                   half_pixel_centers: bool) -> tuple[int, int, np.float32]:
    """TFLite's float ComputeInterpolationValues: (lower, upper, position - lower)."""
    scale = _scale(in_size, out_size, align_corners)
    if half_pixel_centers:
        pos = (_F32(i) + _F32(0.5)) * scale - _F32(0.5)
    else:
        pos = _F32(i) * scale
    lo = max(int(math.floor(float(pos))), 0)
    hi = min(int(math.ceil(float(pos))), in_size - 1)
    return lo, hi, _F32(pos - _F32(lo))


def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def bilinear_int(i: int, in_size: int, out_size: int, align_corners: bool,
                 half_pixel_centers: bool) -> tuple[int, int, int]:
    """TFLite's ComputeInterpolationValuesInteger: (lower, upper, 10-bit fraction)."""
    if align_corners and out_size > 1:
        s10 = _cdiv((1 << 10) * (in_size - 1) + (out_size - 1) // 2, out_size - 1)
    else:
        s10 = _cdiv((1 << 10) * in_size + out_size // 2, out_size)
    pos = i * s10 + s10 // 2 - (1 << 9) if half_pixel_centers else i * s10
    lo = max(_cdiv(pos, 1 << 10), 0)
    hi = min(_cdiv(pos + (1 << 10) - 1, 1 << 10), in_size - 1)
    return lo, hi, pos - (1 << 10) * lo


def _check_resize(op: Op, g: Graph) -> str | None:
    r = check_moved(op, g, op.inputs[:1])
    if r:
        return r
    src, dst = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    if len(src.shape) != 4:
        return f"input must be 4-D NHWC, got {list(src.shape)}"
    n, _, _, c = src.shape
    on, oh, ow, oc = dst.shape
    if (on, oc) != (n, c):
        return f"output {list(dst.shape)} does not keep batch and channels of {list(src.shape)}"
    size = const_ints(g, op.inputs[1]) if len(op.inputs) > 1 else None
    if size is None:
        return "the size input must be a constant tensor"
    if size != [oh, ow]:
        return f"size {size} does not match the output shape {list(dst.shape)}"
    align, half = bool(op.options.get("align_corners")), bool(op.options.get("half_pixel_centers"))
    if align and half:
        return "align_corners and half_pixel_centers are both set"
    if op.type == "RESIZE_BILINEAR":
        if src.dtype not in ("int8", "float32"):
            return f"type {src.dtype} (int8 and float32 only)"
        return bilinear_outside(bilinear_int if src.dtype == "int8" else bilinear_float,
                                src.shape[1:3], (oh, ow), align, half)
    return None


def bilinear_outside(fn: Callable[..., tuple], in_hw: tuple[int, ...], out_hw: tuple[int, ...], align: bool,
                     half: bool) -> str | None:
    """The reason when TFLite's bilinear source indices (`fn`: bilinear_int or bilinear_float)
    leave the input for some output row or column, else None (also the uint8 variant's check,
    passes/lower/u8.py)."""
    for o, i in zip(out_hw, in_hw, strict=True):
        for k in range(o):
            lo, hi, _ = fn(k, i, o, align, half)
            if not (0 <= lo < i and 0 <= hi < i):
                return (f"resizing {i} -> {o} makes TFLite's reference read outside the "
                        "input (its lower source index is not clamped); not reproducible")
    return None


@register("RESIZE_NEAREST_NEIGHBOR", "any type; NHWC; constant size; align_corners, half_pixel_centers",
          _check_resize)
def _lower_nearest(op: Op, g: Graph) -> None:
    src, dst = op.inputs[0], op.outputs[0]
    n, h, w, c = g.tensors[src].shape
    _, oh, ow, _ = g.tensors[dst].shape
    align, half = bool(op.options.get("align_corners")), bool(op.options.get("half_pixel_centers"))
    rows: list[int | None] = [nearest_index(y, h, oh, align, half) * w * c for y in range(oh)]
    cols: list[int | None] = [nearest_index(x, w, ow, align, half) * c for x in range(ow)]
    set_copy(op, g, src, dst, [Dim(n, h * w * c), Dim(oh, 0, rows), Dim(ow, 0, cols), Dim(c, 1)], 0)


@register("RESIZE_BILINEAR", "int8 (TFLite's integer arithmetic, bit-exact) and float32; NHWC; "
          "constant size; align_corners, half_pixel_centers", _check_resize)
def _lower_bilinear(op: Op, g: Graph) -> None:
    src, dst = op.inputs[0], op.outputs[0]
    t = g.tensors[src]
    n, h, w, c = t.shape
    _, oh, ow, _ = g.tensors[dst].shape
    align, half = bool(op.options.get("align_corners")), bool(op.options.get("half_pixel_centers"))
    table: list[int] = []
    frac: list[np.float32] = []
    for o, i, step in ((oh, h, w * c), (ow, w, c)):
        for k in range(o):
            if t.dtype == "int8":
                lo, hi, wgt = bilinear_int(k, i, o, align, half)
            else:
                lo, hi, f = bilinear_float(k, i, o, align, half)
                wgt = 0
                frac.append(f)
            table += [lo * step, hi * step, wgt]
    name = g.tensors[dst].name
    inputs = [src, g.add_const(f"{name}/resize_table", np.asarray(table, np.int32))]
    if t.dtype == "int8":
        op.kernel = "resize_bilinear_s8"
    else:
        op.kernel = "resize_bilinear_f32"
        inputs.append(g.add_const(f"{name}/resize_frac", np.asarray(frac, np.float32)))
    op.inputs = inputs
    op.attrs = {"batches": n, "in_h": h, "in_w": w, "out_h": oh, "out_w": ow, "channels": c}
    op.macc = 4 * g.tensors[dst].size
    op.scratch = 0
