"""Reject a model up front, naming every operator we cannot compile (not just the first)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op
from stm32ai.sanitize import one_line, quote

__all__ = ["check_supported", "unsupported_ops"]

Checker = Callable[[Op, Graph], "str | None"]

_MAX_LISTED = 25  # keep the one-line message readable on huge models


def unsupported_ops(g: Graph, supported: Mapping[str, Checker]) -> list[str]:
    """One entry per op we cannot compile: "op #3 SQUARE (tensor 'foo': reason)"."""
    problems = []
    for op in g.ops:
        check = supported.get(op.type)
        if check is None:
            reason = None
        else:
            try:
                reason = check(op, g)
            except Exception as e:  # a checker bug must still end in one line, not a traceback
                reason = f"support check failed: {type(e).__name__}: {e}"
            if reason is None:
                continue
        name = quote(g.tensors[op.outputs[0]].name) if op.outputs else "?"
        detail = f"tensor {name}" + (f": {one_line(' '.join(str(reason).split()), 300)}" if reason else "")
        problems.append(f"op #{op.index} {one_line(op.type, 80)} ({detail})")  # model strings: one short line
    return problems


def check_supported(g: Graph, supported: Mapping[str, Checker]) -> None:
    """Raise UnsupportedModelError listing all ops that are missing from `supported` or
    whose checker returns a reason string."""
    problems = unsupported_ops(g, supported)
    if not problems:
        return
    listed = "; ".join(problems[:_MAX_LISTED])
    if len(problems) > _MAX_LISTED:
        listed += f"; ... and {len(problems) - _MAX_LISTED} more"
    raise UnsupportedModelError(
        f"unsupported operators: {listed} — see 'stm32ai supported-ops'")
