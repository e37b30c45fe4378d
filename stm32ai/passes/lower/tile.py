"""TILE -> ``copy_nd`` (docs/kernels_movement.md, "TILE").

TILE repeats the input ``multiples[d]`` times along each dimension d: output element
``[i0, i1, ...]`` is input ``[i0 % n0, i1 % n1, ...]``. TFLite's kernel (tile.cc) is one
type-generic copy, so int8, int16, int32, float32... are the same byte moves and the
output keeps the input's quantisation.

The copy is planned on the view [m0, n0, m1, n1, ...] of the output, where the input
stride along each ``m`` axis is 0: after ``coalesce`` that is a few affine dimensions and
a contiguous block (a channel-wise or row-wise repeat is one ``memcpy`` per block). When a
rank-4+ tile leaves more than ``MAX_DIMS`` affine dimensions, the copy falls back to
per-dimension offset tables on the output's own dimensions (one int32 per output index).

A TILE of a constant folds at generate time (fold_constants.py); a runtime ``multiples``
operand is refused: the output shape would not be static.
"""

from __future__ import annotations

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower import register
from stm32ai.passes.lower.movement import (
    MAX_DIMS,
    Dim,
    coalesce,
    const_ints,
    copy_from_map,
    index_array,
    moved_params,
    set_copy,
)

__all__ = ["tile_dims"]


def _multiples(op: Op, g: Graph) -> list[int] | str:
    if len(op.inputs) != 2 or len(op.outputs) != 1:
        return "expects an input, a multiples operand and one output"
    mult = const_ints(g, op.inputs[1])
    if mult is None:
        return "multiples must be a constant tensor (a runtime multiples gives a dynamic output shape)"
    shape = g.tensors[op.inputs[0]].shape
    if len(mult) != len(shape):
        return f"multiples {mult} do not match the input rank {len(shape)}"
    if any(m < 1 for m in mult):
        return f"multiples {mult}: every multiple must be >= 1"
    return mult


def tile_dims(shape: tuple[int, ...], mult: list[int]) -> list[Dim]:
    """Affine copy dimensions over the [m0, n0, m1, n1, ...] view (input element strides)."""
    strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
    dims: list[Dim] = []
    for n, m, s in zip(shape, mult, strides, strict=True):
        dims += [Dim(m, 0), Dim(n, s)]
    return dims


def _check_tile(op: Op, g: Graph) -> str | None:
    mult = moved_params(op, g, _multiples)
    if isinstance(mult, str):
        return mult
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    want = tuple(n * m for n, m in zip(x.shape, mult, strict=True))
    if tuple(y.shape) != want:
        return f"output shape {list(y.shape)} is not input {list(x.shape)} x multiples {mult} = {list(want)}"
    return None


@register("TILE", "any type (int8 keeps the input's quantisation); constant multiples; rank <= 6", _check_tile)
def _lower_tile(op: Op, g: Graph) -> None:
    src, dst = op.inputs[0], op.outputs[0]
    shape = g.tensors[src].shape
    mult = _multiples(op, g)
    assert not isinstance(mult, str)
    dims = tile_dims(shape, mult)
    outer, _, _ = coalesce(dims, 0)
    if len(outer) <= MAX_DIMS:
        set_copy(op, g, src, dst, dims, 0)
    else:  # tables over the output's own (<= 6) dimensions
        copy_from_map(op, g, src, dst, np.tile(index_array(shape), mult))
