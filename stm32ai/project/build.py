"""`generate --board`: compiled models + their test vectors -> firmware project.

The bridge between the compiler (`Compiled` models) and the project generator, with typed
arguments (stm32ai.project.spec): the caller computes the test vectors (stm32ai.validate.vectors)
and passes them down. The CLI calls it inside its staging directory, so a failure leaves
nothing behind.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stm32ai import __version__
from stm32ai.boards import Board
from stm32ai.emitter import emit_c
from stm32ai.errors import Stm32aiError
from stm32ai.graphjson import activation_pools, model_signature, to_graph_json, write_artifact
from stm32ai.pipeline import Compiled
from stm32ai.placement import ActivationsDoNotFit, Placement, activation_budgets, plan_placement, round8
from stm32ai.planner.regions import RegionBudget, split_across_regions
from stm32ai.project.generator import ModelSpec, generate_multi_project, generate_project
from stm32ai.project.spec import Pools, ProjectModel


def pool_list(v: str | None) -> list[str] | None:
    """A comma-separated region list option (--activations-pool, --weights-pool)."""
    return [s.strip() for s in v.split(",") if s.strip()] if v else None


def _sizes(c: Compiled) -> tuple[int, int]:
    """(activation bytes over all pools, weights bytes)."""
    w = next(p["size"] for p in c.doc["stm32ai"]["pools"] if p["name"] == "weights")
    return sum(p["size"] for p in activation_pools(c.doc)), w


def place_model(board: Any, c: Compiled, activations_pool: list[str] | None, weights_pool: list[str] | None,
                vectors_bytes: int = 0) -> Placement:
    """Place the model's pools on `board`. The single activation pool goes to the first region
    of its list with room (unchanged plan); when none has room and the list has several regions,
    the plan is split across them (planner/regions.py) and `c` (plan and graph.json) is updated.
    Raises Stm32aiError naming the region that overflows when even the split does not fit."""
    act, wts = _sizes(c)
    kw: dict[str, Any] = {"activations_pool": activations_pool, "weights_pool": weights_pool,
                          "vectors_bytes": vectors_bytes}
    if c.plan.pools:
        return plan_placement(board, activations_bytes=act, weights_bytes=wts, split=c.plan.pools, **kw)
    a_list = list(activations_pool) if activations_pool else list(board.activations_pool)
    internal = [e for e in a_list if e.partition(":")[0].strip() not in board.external]
    try:
        if internal and len(internal) < len(a_list):
            # external RAM takes only what the internal RAMs cannot hold: the whole pool in an
            # internal region, else split (the hottest buffers in the first, internal, regions)
            try:
                return plan_placement(board, activations_bytes=act, weights_bytes=wts,
                                      **{**kw, "activations_pool": internal})
            except ActivationsDoNotFit:
                pass
            if len(activation_budgets(board, weights_bytes=wts, **kw)) < 2:
                return plan_placement(board, activations_bytes=act, weights_bytes=wts, **kw)
            raise ActivationsDoNotFit("split across internal and external RAM")
        return plan_placement(board, activations_bytes=act, weights_bytes=wts, **kw)
    except ActivationsDoNotFit:
        budgets = activation_budgets(board, weights_bytes=wts, **kw)
        if len(budgets) < 2:
            raise
    plan = split_across_regions(c.graph, c.plan, [RegionBudget(n, cap) for n, cap in budgets])
    c.plan = plan
    c.doc, c.params = to_graph_json(c.graph, plan, c.doc["stm32ai"]["name"])
    return plan_placement(board, activations_bytes=act, weights_bytes=wts, split=plan.pools, **kw)


def place_models(board: Board, compiled: Sequence[Compiled], pools: Pools) -> Placement:
    """Place the pools of one model (place_model) or of several. Several models: their weights
    arrays all go to the weights region (the sum); their activations to one region: the largest
    model's pool when `pools.shared` (they run one after another), else the sum of their pools.
    A multi-model project does not split a model across regions (each pool is one array)."""
    if len(compiled) == 1:
        return place_model(board, compiled[0], pools.activations, pools.weights)
    sizes = [_sizes(c) for c in compiled]
    act = activations_total([a for a, _ in sizes], pools.shared)
    wts = sum(round8(w) for _, w in sizes)
    try:
        return plan_placement(board, activations_bytes=act, weights_bytes=wts,
                              activations_pool=pools.activations, weights_pool=pools.weights)
    except ActivationsDoNotFit as e:
        raise Stm32aiError(f"{e} ({'largest model' if pools.shared else 'sum over the models'}; a multi-model "
                           "project keeps each activation pool in one region"
                           + ("" if pools.shared else "; --shared-activations needs only the largest") + ")") from None


def activations_total(sizes: Sequence[int], shared: bool) -> int:
    """Activation RAM of several models: one shared pool holds the largest, separate pools add up
    (each rounded to the 8-byte alignment of the next array)."""
    return max(sizes) if shared else sum(round8(a) for a in sizes)


def generate_firmware_project(stage: Path, board: Board, models: Sequence[ProjectModel],
                              pools: Pools | None = None, *, validation: bool = False, profile: bool = False) -> Path:
    """Write the firmware project of `models` (compiled, each with its test vector) for `board`
    into `stage`. One model: the single-model demo; several: one project with each model's
    own prefix, weights and descriptor, the descriptor table (Model/ai_models.h) and a demo
    that loops over it. Raises Stm32aiError when the models do not fit the board."""
    pools = pools or Pools()
    if not models:
        raise Stm32aiError("no model to generate a project for")
    names = [m.name for m in models]
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise Stm32aiError(f"two models are named '{dup}': give each its own name (--name a,b)")
    if len(models) > 1 and profile:
        raise Stm32aiError("--profile takes one model (per-layer counts of a multi-model project: generate "
                           "each model on its own with --profile)")
    # refuse early, before emitting anything, when the models cannot fit (one model may be split)
    place_models(board, [m.compiled for m in models], pools)
    work = stage.parent / "c"
    for m in models:
        emit_c(m.compiled.doc, m.compiled.params, m.name, work, builtin_pool=not (pools.shared and len(models) > 1),
               input_normalization=m.input_normalization)
    specs = [_model_spec(m) for m in models]
    if len(models) == 1:
        m, spec = models[0], specs[0]
        c = m.compiled
        act, wts = _sizes(c)
        generate_project(stage, board=board, name=m.name, c_dir=work, test_inputs=spec.test_inputs,
                         expected_outputs=spec.expected_outputs, embed_expected=spec.embed_expected,
                         activations_pool=pools.activations, weights_pool=pools.weights,
                         activations_bytes=act, weights_bytes=wts, tool_version=__version__,
                         reference=spec.reference, model_signature=spec.signature,
                         validation=validation, model_file=m.model_file, profile=profile,
                         activation_split=c.plan.pools or None,
                         io_in_pool=(bool(c.doc["stm32ai"]["inputs_in_pool"]),
                                     bool(c.doc["stm32ai"]["outputs_in_pool"])))
        write_artifact(stage / "Model" / "artifact", c.doc, c.params)
    else:
        generate_multi_project(stage, board=board, models=specs, c_dir=work, shared=pools.shared,
                               activations_pool=pools.activations, weights_pool=pools.weights,
                               tool_version=__version__, validation=validation)
        for m in models:
            write_artifact(stage / "Model" / "artifact" / m.name, m.compiled.doc, m.compiled.params)
    shutil.rmtree(work, ignore_errors=True)
    for m in models:
        who = f"{m.name}: " if len(models) > 1 else ""
        print(f"test vector: {who}expected output from {m.vector.reference}" if m.vector.expected is not None else
              f"test vector: {who}input only, no expected output embedded (the demo reports result: no-reference)",
              file=sys.stderr)
    return stage


def _model_spec(m: ProjectModel) -> ModelSpec:
    c, v = m.compiled, m.vector
    g = c.graph
    act, wts = _sizes(c)
    expected = v.expected if v.expected is not None else \
        [np.zeros(g.tensors[t].shape, g.tensors[t].dtype) for t in g.outputs]
    return ModelSpec(name=m.name, test_inputs=list(v.inputs), expected_outputs=list(expected),
                     embed_expected=v.expected is not None, reference=v.reference or "no reference",
                     signature=model_signature(c.doc, c.params), model_file=m.model_file,
                     activations_bytes=act, weights_bytes=wts)


def fits_report(board: Board, compiled: Sequence[Compiled], pools: Pools) -> dict[str, Any]:
    """The fits check of `analyze --board` (may split a single model's activations across regions)."""
    try:
        place = place_models(board, compiled, pools)
    except Stm32aiError as e:
        return {"ok": False, "summary": str(e)}
    where = ", ".join(f"{p['region']} {p['bytes']:,} B" for p in place.activation_pools)
    if len(compiled) > 1:
        where += " (shared pool: the largest model)" if pools.shared else " (separate pools: the sum)"
    copy = f" (copied from {place.weights_load} at boot)" if place.weights_load else ""
    return {"ok": True, "summary": f"activations in {where}, weights in {place.weights_region}{copy}",
            **place.to_json()}
