"""Normalise shape-only ops and reject shapes we cannot compile.

SQUEEZE, EXPAND_DIMS and RESHAPE on a runtime tensor only reinterpret the same bytes,
so they all become a single-input RESHAPE that later stages turn into a zero-copy alias.
Run after fold_constants, which resolves the output shapes.
"""

from __future__ import annotations

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op

__all__ = ["aliased_op_types", "canonicalize"]

_SHAPE_ONLY = ("SQUEEZE", "EXPAND_DIMS", "RESHAPE")


def aliased_op_types() -> dict[str, str]:
    """Op types this pass rewrites, with how (for `stm32ai supported-ops`)."""
    return {k: "on a runtime tensor: rewritten to RESHAPE, a zero-copy alias of its input (no code)"
            for k in _SHAPE_ONLY if k != "RESHAPE"}


def canonicalize(g: Graph) -> Graph:
    """Rewrite shape-only ops as RESHAPE(data) and check every shape is static. Returns g."""
    for i, op in enumerate(g.ops):
        if op.type not in _SHAPE_ONLY or not op.inputs or op.inputs[0] < 0:
            continue
        src = g.tensors[op.inputs[0]]
        if src.is_const:
            continue
        out = g.tensors[op.outputs[0]]
        static = all(d > 0 for d in src.shape + out.shape)
        if static and src.size != out.size:
            raise UnsupportedModelError(
                f"{op.where}: output '{out.name}' {list(out.shape)} does not hold the "
                f"{src.size} elements of input '{src.name}' {list(src.shape)} — the model is "
                "inconsistent; re-export it")
        g.ops[i] = Op(type="RESHAPE", inputs=[op.inputs[0]], outputs=list(op.outputs),
                      options={"new_shape": list(out.shape)}, index=op.index)

    bad = []
    for op in g.ops:
        for tid in op.outputs:
            t = g.tensors[tid]
            if any(d <= 0 for d in t.shape):
                bad.append(f"{op.where} output '{t.name}' {list(t.shape)}")
    for tid in g.inputs:
        t = g.tensors[tid]
        if any(d <= 0 for d in t.shape):
            bad.append(f"input '{t.name}' {list(t.shape)}")
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise UnsupportedModelError(
            f"dynamic shape: {'; '.join(bad[:3])}{more} cannot be resolved at compile time "
            "(-1 or 0-sized dimensions) — re-export the model with fixed input shapes")
    return g
