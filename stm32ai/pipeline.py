"""The compiler pipeline: .tflite -> graph IR -> passes -> lowering -> memory plan -> artifact."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.graphjson import to_graph_json
from stm32ai.ir import Graph
from stm32ai.passes.canonicalize import canonicalize
from stm32ai.passes.check_support import check_supported
from stm32ai.passes.dilated_conv import fuse_dilated_convs
from stm32ai.passes.fold_constants import fold_constants
from stm32ai.passes.lower import lower_graph, registry
from stm32ai.passes.lower.conv import choose_conv_layouts
from stm32ai.planner import Plan, plan_memory


@dataclass
class Compiled:
    graph: Graph
    plan: Plan
    doc: dict[str, Any]  # graph.json
    params: dict[str, np.ndarray]


def compile_graph(g: Graph, name: str = "network", *, inputs_in_pool: bool = True,
                  outputs_in_pool: bool = True, optimization: str = "balanced",
                  weights_budget: int | None = None) -> Compiled:
    """optimization / weights_budget: the speed/flash trade of the conv weight layouts
    (passes/lower/conv.py choose_conv_layouts; the budget is the board's flash, if known)."""
    fold_constants(g)
    fuse_dilated_convs(g)
    canonicalize(g)
    check_supported(g, {t: s.check for t, s in registry().items()})
    lower_graph(g)
    choose_conv_layouts(g, optimization, weights_budget)
    plan = plan_memory(g, inputs_in_pool=inputs_in_pool, outputs_in_pool=outputs_in_pool)
    doc, params = to_graph_json(g, plan, name)
    return Compiled(g, plan, doc, params)


def weights_budget_for(board_id: str | None) -> int | None:
    """Flash bytes the weights may use on a board (its program region minus the code
    reserve), the limit of --optimization balanced; None without a board."""
    if not board_id:
        return None
    from stm32ai.boards import load_board
    from stm32ai.project.generator import CODE_RESERVE

    b = load_board(board_id)
    return max(b.region(b.text_region).length - CODE_RESERVE, 0)


def compile_model(path: str | Path, name: str = "network", **kw: Any) -> Compiled:
    return compile_graph(load_tflite(path), name, **kw)
