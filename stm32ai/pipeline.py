"""The compiler pipeline: .tflite -> graph IR -> passes -> lowering -> memory plan -> artifact."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stm32ai.errors import Stm32aiError
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.graphjson import to_graph_json
from stm32ai.ir import Graph, Op
from stm32ai.passes.canonicalize import canonicalize
from stm32ai.passes.check_support import check_supported
from stm32ai.passes.dead_channels import PruneSummary, prune_dead_channels
from stm32ai.passes.dilated_conv import fuse_dilated_convs
from stm32ai.passes.fold_constants import fold_constants
from stm32ai.passes.gap_stage import mark_gap_staging
from stm32ai.passes.legacy_u8 import shift_uint8
from stm32ai.passes.lower import lower_graph, registry
from stm32ai.passes.lower.conv import choose_conv_layouts
from stm32ai.passes.lower.conv_wino import set_wino_tiles
from stm32ai.passes.lower.overlap import annotate_overlaps
from stm32ai.passes.output_copies import add_output_copies
from stm32ai.passes.staging import (
    M7_AXI_ROUND_TRIP,
    M7_COLUMN_CPI,
    M7_LOOP8_CPI,
    M7_LOOP_CPI,
    FlashModel,
    blocked,
    choose_staging,
    graph_cycles,
    modelled_cycles,
    pool_limit,
    restage_whole,
    saved_per_byte,
    unstage,
)
from stm32ai.passes.stripe_bands import Option, choose_bands
from stm32ai.passes.stripe_dw3 import predouble_stripe_dw3
from stm32ai.passes.stripe_widen import widen_stripes
from stm32ai.passes.stripes import form_all, form_stripes
from stm32ai.passes.verify import (
    verify_accumulators,
    verify_each_pass,
    verify_graph,
    verify_kernel_bounds,
    verify_memory,
)
from stm32ai.planner import ALIGN, Plan, plan_memory, row_fed_inputs


@dataclass
class Compiled:
    graph: Graph
    plan: Plan
    doc: dict[str, Any]  # graph.json
    params: dict[str, np.ndarray]
    pruned: PruneSummary | None = None  # what dead-channel elimination removed (None: pass off)
    warnings: list[str] = field(default_factory=list)  # one line each, already printed
    flash: FlashModel | None = None  # the weights memory the staging choice saw (None: no wait states)
    unstaged_pool: int | None = None  # the pool before staging (None: nothing staged)
    # --weights-pool chosen by compile_for_board (None: the user's or the board's) and why
    weights_pool: list[str] | None = None
    weights_choice: str | None = None
    # the stripe alternatives `--optimization ram` weighed (passes/stripe_bands.py; the
    # stripe-less graph first, the chosen one marked); None: stripes off or none formed
    stripe_options: list[Option] | None = None


def compile_graph(g: Graph, name: str = "network", *, inputs_in_pool: bool = True,
                  outputs_in_pool: bool = True, prune: bool = True, optimization: str = "balanced",
                  weights_budget: int | None = None, flash: FlashModel | None = None,
                  winograd: bool | None = None, tuning: dict[str, str] | None = None,
                  stripes: bool | str | None = None, stripes_max_cost: float | None = None,
                  input_rows: bool = False, core: str | None = None, code_wait_states: bool = False) -> Compiled:
    """optimization / weights_budget: the speed/flash trade of the conv weight layouts
    (passes/lower/conv.py choose_conv_layouts; the budget is the board's flash, if known).
    flash: the board's weights memory (`flash_model_for`); with wait states, layers whose
    constants are re-read get them staged in RAM (passes/staging.py), within the RAM budget
    of `optimization`. winograd: int8 3x3 stride-1 convolutions by exact Winograd where
    proved (passes/lower/conv_wino.py): True every legal layer, False none, None the per-core
    default rule (`wino_default`; off where stripes run: they call the direct kernels per band).
    tuning: a tuning table's choices, layer key -> variant
    (generate --tuning FILE; stm32ai/tuning.py): those layers take that variant instead.
    stripes: row-streamed execution where it shrinks the pool (passes/stripes.py); None: on
    with --optimization ram; "all": every run of stripe-able ops, whatever the pool (tests).
    stripes_max_cost: the band rule's bound (passes/stripe_bands.py): the smallest pool whose
    modelled cycles stay within this fraction over the stripe-less graph's (None: no bound).
    input_rows: graph inputs a stripe reads arrive in rows from the application's row source
    (--input-rows, docs/stripes.md): not in the pool; implies stripes.
    core: the board's core, for core-specific kernel variants (None: the portable ones).
    code_wait_states: the board fetches code from a flash with wait states (the Winograd
    kernels' block size, conv_wino.wino_tiles)."""
    # float32 parameter maths on extreme (malformed) scales overflows; the results are
    # checked (verifier, MultiplierRangeError), so numpy's warnings would only add stderr lines.
    with np.errstate(all="ignore"):
        stripes_on = optimization == "ram" if stripes is None else bool(stripes)
        if input_rows and stripes is None:
            stripes_on = True
        g.winograd = False if winograd is None and stripes_on else winograd
        g.weights_budget = weights_budget
        g.tuning = dict(tuning) if tuning else None
        if input_rows and stripes is False:
            raise Stm32aiError("--input-rows feeds inputs to stripes: it cannot go with --no-stripes")
        g.input_rows = input_rows
        if input_rows and stripes is None:
            stripes = True
        g.core = core
        return _compile(g, name, inputs_in_pool, outputs_in_pool, prune, optimization, weights_budget, flash,
                        optimization == "ram" if stripes is None else stripes, stripes_max_cost, code_wait_states)


def _compile(g: Graph, name: str, inputs_in_pool: bool, outputs_in_pool: bool, prune: bool,
             optimization: str, weights_budget: int | None, flash: FlashModel | None,
             stripes: bool | str = False, stripes_max_cost: float | None = None,
             code_wait_states: bool = False) -> Compiled:
    verify_graph(g)
    each = verify_each_pass()
    for i, step in enumerate((fold_constants, fuse_dilated_convs, canonicalize, shift_uint8)):
        step(g)
        if each:
            verify_graph(g, allow_unknown_dims=i == 0)
    check_supported(g, {t: s.check for t, s in registry().items()})
    warnings = verify_accumulators(g)
    pruned = prune_dead_channels(g) if prune else None
    if each and pruned is not None:
        verify_graph(g, allow_unknown_dims=False)
    add_output_copies(g, outputs_in_pool)
    n_model_tensors = len(g.tensors)
    g.optimization = optimization
    lower_graph(g)
    set_wino_tiles(g, code_wait_states)
    choose_conv_layouts(g, optimization, weights_budget)
    annotate_overlaps(g, ALIGN)
    if each:
        verify_graph(g, allow_unknown_dims=False)
    verify_kernel_bounds(g, n_model_tensors)
    if stripes == "all":
        form_all(g)
    options = None
    if stripes and stripes != "all":  # after the bounds check: members are checked at their full geometry
        chosen = form_stripes(g, lambda g: plan_memory(g, inputs_in_pool=inputs_in_pool,
                                                       outputs_in_pool=outputs_in_pool).pool_size)
        if chosen:
            options = choose_bands(g, chosen, lambda g: _evaluate(g, flash, optimization, inputs_in_pool,
                                                                  outputs_in_pool), stripes_max_cost)
            widen_stripes(g, flash)  # calls of members wide / staged where the layout has room
    plan = plan_memory(g, inputs_in_pool=inputs_in_pool, outputs_in_pool=outputs_in_pool)
    unstaged = plan.pool_size
    if flash is not None:
        plan, _ = _plan_staged(g, plan, flash, optimization, inputs_in_pool, outputs_in_pool)
    verify_memory(plan.pool_size, sum(t.nbytes for t in g.tensors if t.is_const))
    if optimization == "ram":  # unstaged convs stage in their input's dead rows (passes/gap_stage.py)
        mark_gap_staging(g, plan, flash)
    if stripes:  # the Cortex-M4's depthwise stripe members: packed constants pre-doubled
        predouble_stripe_dw3(g)
    doc, params = to_graph_json(g, plan, name)
    staged = any(op.attrs.get("stage_oc") or op.attrs.get("stage") or op.kernel == "add_lut_staged_s8"
                 for op in g.ops)
    if g.input_rows and not row_fed_inputs(g):  # nothing streamable reads an input: it stays whole
        warnings.append("--input-rows: no stripe reads a graph input here; the inputs stay whole in the pool")
    # Printed once the model compiled: a refused model gets its one error line alone.
    for w in warnings:  # not an error: the exit code is unaffected (docs/verifier.md)
        print(f"stm32ai: warning: {w}", file=sys.stderr)
    return Compiled(g, plan, doc, params, pruned, warnings, flash, unstaged if staged else None,
                    stripe_options=options)


def _evaluate(g: Graph, flash: FlashModel | None, optimization: str, inputs_in_pool: bool,
              outputs_in_pool: bool) -> tuple[int, float]:
    """(pool bytes, modelled cycles) of g as the rest of the pipeline would make it: planned,
    weights staged for the board's flash (then put back: g is unchanged)."""
    plan = plan_memory(g, inputs_in_pool=inputs_in_pool, outputs_in_pool=outputs_in_pool)
    if flash is None:
        return plan.pool_size, graph_cycles(g, None)
    plan, staged = _plan_staged(g, plan, flash, optimization, inputs_in_pool, outputs_in_pool, keep=False)
    out = plan.pool_size, graph_cycles(g, flash)
    for op, before in reversed(staged):
        unstage(op, before)
    annotate_overlaps(g, ALIGN)
    return out


def _plan_staged(g: Graph, plan: Plan, flash: FlashModel, optimization: str, inputs_in_pool: bool,
                 outputs_in_pool: bool, keep: bool = True) -> tuple[Plan, list[tuple[Any, dict]]]:
    """Stage the layers where it pays (passes/staging.py) and re-plan. The choice reads the
    unstaged plan's free bytes per step, which the re-plan may not reproduce (a blocked layer
    splits an overlapped chain): above the mode's pool limit, tile splits are taken back one at
    a time, then every layer. Returns the plan and the ops left staged (with what `unstage`
    needs); keep=False: a trial, every op the choice touched is returned so that the caller
    can put all of them back."""
    staged, _ = choose_staging(g, plan, flash, optimization)
    every = list(staged)
    if not staged:
        return plan, every
    # the mode's limit, not balanced's Pareto target: the re-plan may differ from the
    # unstaged plan's free bytes by a few buffers either way
    limit = pool_limit(optimization, plan.pool_size, flash)

    def replan() -> Plan:
        annotate_overlaps(g, ALIGN)
        return plan_memory(g, inputs_in_pool=inputs_in_pool, outputs_in_pool=outputs_in_pool)

    new = replan()
    # over the limit: take back tile splits one at a time (a wholesale retreat lost IC's three
    # tiled layers on disco-f746 for the one whose lost overlap the re-plan could not absorb):
    # the first, by fewest cycles saved per staging byte, whose return alone makes the pool fit,
    # else the fewest saved per byte; a layer taken back is staged whole when its choice had a
    # single-block candidate (`restage_whole`); past the last split, every layer
    while new.pool_size > limit:
        tiles = sorted((s for s in staged if blocked(s[0])), key=lambda s: saved_per_byte(g, s[0], s[1], flash))
        if not tiles:
            break
        drop = next((s for s in tiles if _fits_without(g, s, replan, limit)), tiles[0])
        if not restage_whole(g, *drop):
            staged = [s for s in staged if s[0] is not drop[0]]
        new = replan()
    if new.pool_size > limit:
        for op, before in staged:
            unstage(op, before)
        staged = []
        new = replan()
    annotate_overlaps(g, ALIGN)
    return new, staged if keep else every


def _fits_without(g: Graph, s: tuple[Op, dict], replan: Any, limit: int) -> bool:
    """Whether the re-plan fits the limit with this tiled layer staged whole (or not staged)."""
    op, before = s
    kept = (op.kernel, list(op.inputs), dict(op.attrs), op.scratch)
    restage_whole(g, op, before)
    fits = replan().pool_size <= limit
    op.kernel, op.inputs, op.attrs, op.scratch = kept
    return fits


def weights_budget_for(board_id: str | None) -> int | None:
    """Flash bytes the weights may use on a board (its program region minus the code
    reserve), the limit of --optimization balanced; None without a board."""
    if not board_id:
        return None
    from stm32ai.boards import load_board
    from stm32ai.placement import code_reserve

    b = load_board(board_id)
    return max(b.region(b.text_region).length - code_reserve(b), 0)


def flash_model_for(board_id: str | None, weights_pool: list[str] | None = None,
                    activations_pool: list[str] | None = None) -> FlashModel | None:
    """The board's weights memory as the staging choice sees it, from board data: wait states
    (clock.flash_latency), the flash read width and the data cache in front of it (the SoC's
    `memsys:`, docs/estimate.md: the ART D-cache, or the Cortex-M7 L1 D-cache when the board
    enables it). None when weights reads cost no wait states: no board, an emulated board (QEMU
    has no flash timing), weights placed in RAM (`--weights-pool` naming a RAM region first:
    copied there at boot), no flash description, or 0 wait states."""
    if not board_id:
        return None
    from stm32ai.boards import load_board, parse_size
    from stm32ai.placement import activation_budgets

    b = load_board(board_id)
    w_pool = list(weights_pool) if weights_pool else list(b.weights_pool)
    flash = (b.memsys or {}).get("flash") or {}
    if (b.is_emulated or not flash or not w_pool or w_pool[0] != b.text_region
            or w_pool[0] not in flash.get("regions", []) or b.clock.flash_latency <= 0):
        return None
    cache = 0
    if flash.get("dcache"):
        cache = int(flash["dcache"]["lines"]) * int(flash["dcache"]["line_bytes"])
    l1 = ((b.memsys or {}).get("l1") or {}).get("dcache")
    if b.cache and l1:
        cache = max(cache, parse_size(l1["size"], "memsys.l1.dcache.size"))
    icache = 0
    if flash.get("icache"):
        icache = int(flash["icache"]["lines"]) * int(flash["icache"]["line_bytes"])
    l1i = ((b.memsys or {}).get("l1") or {}).get("icache")
    if b.cache and l1i:
        icache = max(icache, parse_size(l1i["size"], "memsys.l1.icache.size"))
    budgets = activation_budgets(b, weights_bytes=0, activations_pool=activations_pool, weights_pool=w_pool)
    ws, line = int(b.clock.flash_latency), int(flash["read_bytes"])
    core: dict[str, float] = {}
    if b.core == "cortex-m7":  # dual issue; with the L1 D-cache on, one line fill per 32-B line
        ratio = max(1, round(b.cpu_hz / b.hclk_hz))
        core = {"miss_cycles": (ws + 1) * ratio + M7_AXI_ROUND_TRIP, "loop_cpi": M7_LOOP_CPI,
                "column_cpi": M7_COLUMN_CPI, "loop8_cpi": M7_LOOP8_CPI}
        line = int(l1["line_bytes"]) if b.cache and l1 else line
    if b.core == "cortex-m4":  # conv2d_s8's pixel quads in stripe calls (AI_CONV_QUAD builds)
        core = {"pxq": True}
    return FlashModel(b.id, ws, line, cache, budgets[0][1] if budgets else 0, icache_bytes=icache, **core)


def compile_model(path: str | Path, name: str = "network", **kw: Any) -> Compiled:
    return compile_graph(load_tflite(path), name, **kw)


# time: weights go to RAM only when 1/TIME_RESERVE of the board's RAM stays free after them,
# the pools, data and stack (the application's share); balanced: only when they take at most
# 1/BALANCED_SHARE of the RAM left free by the pool (docs/memory_regions.md, "weights in RAM")
TIME_RESERVE = 8
# ... and only when the stalls they save reach 2 % of the modelled cycles: below that the
# estimator sees code-placement effects of the other kernel choice (ART I-cache) as large as
# the gain (VWW on nucleo-l4r5zi: 1.3 % saved, +1.6 % estimated; docs/flash_staging.md)
TIME_MIN_GAIN = 0.02
# balanced also copies them when RAM is plentiful: at least 1/BALANCED_FREE of the board's RAM
# stays free after the weights, pools, data and stack, and the region is zero-wait. The staging
# exchange rate (below) prices RAM that is scarce; a board left more than half empty gets the
# faster placement (AD on
# nucleo-l4r5zi: 265 KiB of 640, 594,910 -> ~425,000 estimated cycles; docs/flash_staging.md)
BALANCED_FREE = 2


# the flash-read bar (issue 26): weights left in flash are read at most this many times per inference
FLASH_READS_BAR = 1.5


def compile_for_board(path: str | Path, name: str, board_id: str | None, *, optimization: str = "balanced",
                      weights_pool: list[str] | None = None, activations_pool: list[str] | None = None,
                      ram_room_div: int = 1, auto_weights: bool = True, **kw: Any) -> Compiled:
    """`_compile_for_board`; the default Winograd choice (winograd=None) is dropped where the
    weights stay in a flash with wait states and its transformed weights, re-read once per
    quad of tiles, would break the flash-read bar (FLASH_READS_BAR x the weights per inference:
    the direct kernels stage their blocks in RAM, Winograd layers are not staged yet)."""
    args = dict(optimization=optimization, weights_pool=weights_pool, activations_pool=activations_pool,
                ram_room_div=ram_room_div, auto_weights=auto_weights)
    c = _compile_for_board(path, name, board_id, **args, **kw)
    if kw.get("winograd") is not None or c.weights_pool or c.flash is None:
        return c
    from stm32ai.passes.lower.conv_wino import WINO_KERNELS
    from stm32ai.passes.staging import flash_reads

    if not any(op.kernel in WINO_KERNELS for op in c.graph.ops):
        return c
    reads = sum(flash_reads(op, c.graph) for op in c.graph.ops)
    w_bytes = next(p["size"] for p in c.doc["stm32ai"]["pools"] if p["name"] == "weights")
    if reads <= FLASH_READS_BAR * w_bytes:
        return c
    c = _compile_for_board(path, name, board_id, **args, **{**kw, "winograd": False})
    note = (f"Winograd off (default rule): its weights would stay in flash and be read {reads:,} B per "
            f"inference, > {FLASH_READS_BAR}x the {w_bytes:,} B of weights")
    c.weights_choice = f"{c.weights_choice}; {note}" if c.weights_choice else note
    return c


def _compile_for_board(path: str | Path, name: str, board_id: str | None, *, optimization: str = "balanced",
                       weights_pool: list[str] | None = None, activations_pool: list[str] | None = None,
                       ram_room_div: int = 1, auto_weights: bool = True, **kw: Any) -> Compiled:
    """The model compiled for a board: weight layouts within its flash, staging for its flash
    wait states, and (`auto_weights`, no --weights-pool) the weights copied to RAM at boot when
    the flash reads cost stalls and the mode's RAM rule holds (`_weights_in_ram`), recorded in
    `weights_pool` / `weights_choice`. ram_room_div: models sharing the activation region."""
    import dataclasses

    flash = flash_model_for(board_id, weights_pool, activations_pool)
    if board_id and "core" not in kw:
        from stm32ai.boards import load_board

        kw["core"] = load_board(board_id).core
    if board_id and "code_wait_states" not in kw:  # the code's flash, wherever the weights go
        code_flash = flash_model_for(board_id)
        kw["code_wait_states"] = bool(code_flash and code_flash.wait_states > 0)
    if flash is not None and ram_room_div > 1:
        flash = dataclasses.replace(flash, ram_room=flash.ram_room // ram_room_div)
    budget = weights_budget_for(board_id)
    c = compile_model(path, name, flash=flash, optimization=optimization, weights_budget=budget, **kw)
    if not (auto_weights and board_id and flash is not None and not weights_pool and optimization != "ram"):
        return c
    from stm32ai.passes.staging import flash_reads

    reads = sum(flash_reads(op, c.graph) for op in c.graph.ops)
    w_bytes = next(p["size"] for p in c.doc["stm32ai"]["pools"] if p["name"] == "weights")
    stalls = flash.stalls(reads) if w_bytes > flash.cache_bytes else 0.0
    ref = modelled_cycles(c.graph, flash)
    if stalls <= 0:
        return c
    if stalls < TIME_MIN_GAIN * ref:
        c.weights_choice = (f"weights ({w_bytes:,} B) stay in flash ({optimization}): the ~{stalls:,.0f} stall cycles "
                            f"left are < {TIME_MIN_GAIN:.0%} of the {ref:,.0f} modelled cycles")
        return c
    region, why = _weights_in_ram(board_id, optimization, path, name, activations_pool, budget, stalls, ref,
                                  c.plan.pool_size, kw)
    if region is None:
        c.weights_choice = why
        return c
    c_ram = compile_model(path, name, flash=None, optimization=optimization, weights_budget=budget, **kw)
    c_ram.weights_pool, c_ram.weights_choice = [region], why
    return c_ram


def _weights_in_ram(board_id: str, optimization: str, path: str | Path, name: str,
                    activations_pool: list[str] | None, budget: int | None, stalls: float, ref: float,
                    pool_now: int, kw: dict[str, Any]) -> tuple[str | None, str]:
    """(RAM region for the weights or None, why): the model compiled for weights in RAM (no
    staging: zero wait states), placed with its weights in each RAM region of the activation
    list, slowest-listed first (the activations keep the fastest); the first placement that
    fits and meets the mode's rule wins. time: the reserve stays free. balanced: either RAM is
    plentiful (1/BALANCED_FREE of the board's RAM stays free after them) or RAM is spare (the
    weights take at most 1/BALANCED_SHARE of the RAM left free) and it pays at staging's
    exchange rate (the stalls saved per KiB of RAM added >= BALANCED_RATE of `ref`, the
    modelled cycles with the weights in flash, staging.modelled_cycles)."""
    from stm32ai.boards import load_board
    from stm32ai.errors import Stm32aiError
    from stm32ai.graphjson import activation_pools
    from stm32ai.placement import plan_placement

    b = load_board(board_id)
    c = compile_model(path, name, flash=None, optimization=optimization, weights_budget=budget, **kw)
    pools = c.doc["stm32ai"]["pools"]
    w = next(p["size"] for p in pools if p["name"] == "weights")
    act = sum(p["size"] for p in activation_pools(c.doc))
    ram = [r for r in b.memory if r.writable and not r.needs_init and r.name != b.text_region]
    total = sum(r.length for r in ram)
    a_list = list(activations_pool) if activations_pool else list(b.activations_pool)
    saves = f"saves ~{stalls:,.0f} flash stall cycles per inference (analytic reads x wait states)"
    for rn in reversed([n for n in a_list if any(r.name == n for r in ram)]):
        try:
            pl = plan_placement(b, activations_bytes=act, weights_bytes=w, activations_pool=a_list,
                                weights_pool=[rn])
        except Stm32aiError:
            continue
        free = sum(pl.free.get(r.name, 0) for r in ram)
        if optimization == "time":
            ok = free >= total // TIME_RESERVE
            rule = f"{free:,} B of RAM would stay free, {'>=' if ok else '<'} 1/{TIME_RESERVE} of its {total:,} B"
        else:
            from stm32ai.passes.staging import BALANCED_RATE, BALANCED_SHARE
            room = free + w  # RAM left by the pool, data and stack
            kib = max(w + act - pool_now, 1) / 1024
            spare, pays = w <= room // BALANCED_SHARE, stalls / kib >= BALANCED_RATE * ref
            # plentiful RAM counts only where it is zero-wait (the board's memsys: the H743's
            # D2 SRAMs are not; there IC's weights in sram123 estimated +2.8 % slower than staged)
            ws = ((b.memsys or {}).get("wait_states") or {}).get(rn, 0)
            plenty = free >= total // BALANCED_FREE and not ws
            ok = plenty or (spare and pays)
            if plenty:
                rule = f"{free:,} B of RAM would stay free, >= 1/{BALANCED_FREE} of its {total:,} B"
            elif ws:
                rule = (f"it has {ws} wait state(s); they take {'<=' if spare else 'more than'} "
                        f"1/{BALANCED_SHARE} of the {room:,} B of RAM left free; {stalls / kib:,.0f} stall "
                        f"cycles saved per KiB added, {'>=' if pays else '<'} {BALANCED_RATE:.1%} of the "
                        f"{ref:,.0f} modelled cycles")
            else:
                rule = (f"{free:,} B of RAM would stay free, < 1/{BALANCED_FREE} of its {total:,} B; they take "
                        f"{'<=' if spare else 'more than'} 1/{BALANCED_SHARE} of the {room:,} B of RAM left "
                        f"free; {stalls / kib:,.0f} stall cycles saved per KiB added, {'>=' if pays else '<'} "
                        f"{BALANCED_RATE:.1%} of the {ref:,.0f} modelled cycles")
        if ok:
            return rn, f"weights ({w:,} B) copied to {rn} at boot ({optimization}): {saves}; {rule}"
        return None, f"weights ({w:,} B) stay in flash ({optimization}): in {rn} {rule}"
    return None, f"weights stay in flash: {w:,} B + the {act:,} B pool fit no RAM region of {','.join(a_list)}"
