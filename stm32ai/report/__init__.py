"""Per-layer and total figures of a compiled model: the `analyze` report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from stm32ai.pipeline import Compiled
from stm32ai.planner import row_fed_inputs


@dataclass
class Layer:
    index: int
    op: str
    kernel: str
    inputs: list[list[int]]
    output: list[int]
    dtype: str
    macc: int
    weights_bytes: int
    activation_bytes: int


@dataclass
class Report:
    model: str
    layers: list[Layer]
    macc: int
    weights_bytes: int  # ROM for the model's constants
    activations_bytes: int  # the activation pool (RAM)
    lower_bound_bytes: int  # max live bytes over the schedule, without in-place tricks
    planned_bound_bytes: int  # max live bytes of the buffers actually planned (in-place, scratch)
    converter_order_bound_bytes: int  # planned_bound_bytes with the converter's op order
    pool_optimal: bool  # the pool is proven minimal for the planned buffers
    input_bytes: list[int]
    output_bytes: list[int]
    io_in_pool: bool
    fits: dict[str, Any] | None = field(default=None)
    pruning: dict[str, Any] | None = field(default=None)  # dead-channel elimination, see add_pruning
    memory: dict[str, Any] | None = field(default=None)  # the plan per pool (report/memory_map.py)
    state_bytes: int = 0  # persistent variable tensors (LSTM, SVDF): the instance's state area, RAM
    flash: dict[str, Any] | None = field(default=None)  # weights bytes read per inference, staging (flash_report)
    # layers on a Winograd kernel: tile, transformed weights' bytes vs their int8 filter
    # (passes/lower/conv_wino.py winograd_choices); empty without --winograd / a "wino" variant
    winograd: list[dict[str, Any]] = field(default_factory=list)
    # inputs a stripe pulls in rows from the application (--input-rows): not in the pool
    row_inputs: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def build_report(c: Compiled) -> Report:
    from stm32ai.graphjson import activation_pools
    from stm32ai.passes.lower.conv_wino import winograd_choices
    from stm32ai.report.memory_map import memory_map

    g = c.graph
    layers = []
    for op_idx in c.plan.order:
        op = g.ops[op_idx]
        acts = [g.tensors[t] for t in op.inputs if t >= 0 and not g.tensors[t].is_const]
        consts = [g.tensors[t] for t in op.inputs if t >= 0 and g.tensors[t].is_const]
        # an op without outputs writes a state input in place (ASSIGN_VARIABLE, CALL_ONCE)
        out = g.tensors[op.outputs[0] if op.outputs else op.inputs[-1]]
        layers.append(Layer(
            # passes/output_copies.py's copies have no source op (index -1)
            index=op.index, op="output copy" if op.options.get("output_copy") else op.type,
            kernel=op.kernel or "?",
            inputs=[list(t.shape) for t in acts], output=list(out.shape), dtype=out.dtype,
            macc=op.macc, weights_bytes=sum(t.nbytes for t in consts),
            activation_bytes=0 if op.kernel == "__nop" else sum(g.tensors[t].nbytes for t in op.outputs),
        ))
    pools = {p["name"]: p for p in c.doc["stm32ai"]["pools"]}
    return Report(
        model=g.name, layers=layers, macc=sum(op.macc for op in g.ops),
        weights_bytes=pools["weights"]["size"],
        activations_bytes=sum(p["size"] for p in activation_pools(c.doc)),
        lower_bound_bytes=c.plan.lower_bound,
        planned_bound_bytes=c.plan.planned_bound, converter_order_bound_bytes=c.plan.converter_order_bound,
        pool_optimal=c.plan.pool_optimal,
        input_bytes=[g.tensors[t].nbytes for t in g.inputs],
        output_bytes=[g.tensors[t].nbytes for t in g.outputs],
        io_in_pool=bool(c.doc["stm32ai"]["inputs_in_pool"]),
        memory=memory_map(c),
        state_bytes=max((-(-(st["offset"] + st["size"]) // 8) * 8 for st in c.doc["stm32ai"]["storage"]
                         if st["pool"] == "state"), default=0),
        flash=flash_report(c, pools["weights"]["size"]),
        winograd=winograd_choices(g),
        row_inputs=sorted(g.inputs.index(t) for t in row_fed_inputs(g)),
    )


def flash_report(c: Compiled, weights_bytes: int) -> dict[str, Any]:
    """Bytes the kernels load from the weights array per inference (analytic, from the C loops:
    passes/staging.py flash_reads), against the weights; the board's flash figures the staging
    choice used and its per-layer result; the pool before staging."""
    from stm32ai.passes.staging import flash_reads, staging_rows

    reads = sum(flash_reads(op, c.graph) for op in c.graph.ops)
    fm = c.flash
    return {"reads_bytes": reads, "weights_bytes": weights_bytes,
            "reads_per_weight_byte": round(reads / weights_bytes, 3) if weights_bytes else None,
            "board": None if fm is None else {"id": fm.board, "wait_states": fm.wait_states,
                                                "line_bytes": fm.line_bytes, "cache_bytes": fm.cache_bytes,
                                                "ram_room": fm.ram_room},
            "pool_before_staging": c.unstaged_pool, "layers": staging_rows(c.graph),
            "weights_placement": {"region": c.weights_pool[0] if c.weights_pool else None,
                                  "why": c.weights_choice} if c.weights_choice else None}


def render_flash(r: Report) -> list[str]:
    """analyze's lines on flash reads and staging."""
    f = r.flash
    if not f:
        return []
    ratio = f["reads_per_weight_byte"]
    lines = [f"flash reads per inference (analytic, bytes loaded from the weights): {f['reads_bytes']:,} B"
             + (f" = {ratio}x the weights ({f['weights_bytes']:,} B)" if ratio is not None else "")]
    b = f["board"]
    wp = f.get("weights_placement")
    if wp:  # compile_for_board's automatic choice (pipeline._weights_in_ram)
        lines.append(("weights in RAM (automatic): " if wp["region"] else "weights in flash: ") + wp["why"])
    if b is None and wp and wp["region"]:
        lines.append("weights staging: off (the weights are read from RAM: no wait states)")
        return lines
    if b is None:
        lines.append("weights staging: off (no board with flash wait states; weights reads cost no wait states)")
        return lines
    staged = [x for x in f["layers"] if x["staged"]]
    grow = ""
    if f["pool_before_staging"] is not None:
        grow = f", pool {f['pool_before_staging']:,} -> {r.activations_bytes:,} B"
    lines.append(f"weights staging for {b['id']} ({b['wait_states']} wait states, {b['line_bytes']}-B flash reads, "
                 f"{b['cache_bytes']}-B data cache): {len(staged)} of {len(f['layers'])} layers staged{grow}")
    for x in f["layers"]:
        if x["staged"] and x["kernel"] == "conv2d_s8":
            how = (f"staged, {x['blocks']} blocks of {x['block']} channels" if x["blocks"] > 1 else "staged") \
                + f", {x['staging_bytes']:,} B scratch, {x['inner']} inner loop"
        elif x["staged"]:
            what = "constants" if x["kernel"].startswith("depthwise") else "tables"
            how = f"staged {what}, {x['staging_bytes']:,} B scratch"
        elif x.get("stripe_calls"):
            how = f"in a stripe, read in place at each of its {x['stripe_calls']} band calls"
        else:
            how = "read in place"
        lines.append(f"  layer {x['op']} {x['kernel']}: {how}; {x['flash_reads']:,} B read")
    return lines


def add_pruning(r: Report, c: Compiled, unpruned: Compiled | None) -> None:
    """What dead-channel elimination removed: per layer channels and MACC, and the model's
    totals compiled without the pass (`unpruned`) against with it."""
    if c.pruned is None:
        return
    info: dict[str, Any] = {"removed_channels": c.pruned.removed_channels,
                            "layers": [ly.to_json() for ly in c.pruned.layers]}
    if unpruned is not None:
        before = build_report(unpruned)
        info["macc"] = [before.macc, r.macc]
        info["weights_bytes"] = [before.weights_bytes, r.weights_bytes]
        info["activations_bytes"] = [before.activations_bytes, r.activations_bytes]
    r.pruning = info


def _arrow(pair: Any) -> str:
    a, b = pair
    return f"{a:,}" if a == b else f"{a:,} -> {b:,}"


def render_pruning(r: Report) -> Any:
    """A rich Table of the pruned layers, or None when nothing was removed."""
    from rich.table import Table

    p = r.pruning
    if not p or not p["layers"]:
        return None
    t = Table(title="dead-channel elimination (exact; --no-prune turns it off)", title_justify="left")
    for col, just in (("#", "right"), ("op", "left"), ("in channels", "right"), ("out channels", "right"),
                      ("folded", "right"), ("MACC", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for ly in p["layers"]:
        t.add_row(str(ly["index"]), ly["op"], _arrow(ly["in_channels"]), _arrow(ly["out_channels"]),
                  str(ly["folded"]), _arrow(ly["macc"]))
    parts = [f"{p['removed_channels']:,} output channels removed"]
    for key, label in (("macc", "MACC"), ("weights_bytes", "ROM (weights) B"),
                       ("activations_bytes", "RAM (activation pool) B")):
        if key in p:
            parts.append(f"{label} {_arrow(p[key])}")
    t.caption = " | ".join(parts)
    t.caption_justify = "left"
    return t


def _bounds(r: Report) -> str:
    """The planned-buffers bound (what offset assignment can reach) and, when the memory-aware
    schedule changed it, the converter order's."""
    parts = [f"planned buffers {r.planned_bound_bytes:,} B"]
    if r.converter_order_bound_bytes != r.planned_bound_bytes:
        parts.append(f"converter order {r.converter_order_bound_bytes:,} B")
    if r.activations_bytes > r.planned_bound_bytes:
        parts.append("pool proven minimal" if r.pool_optimal else "pool not proven minimal")
    return f" ({', '.join(parts)})"


def render_table(r: Report) -> Any:
    """A rich Table of the layers plus a totals caption."""
    from rich.markup import escape
    from rich.table import Table

    from stm32ai.sanitize import one_line

    t = Table(title=f"{escape(one_line(r.model, 200))}: {len(r.layers)} layers", title_justify="left")
    for col, just in (("#", "right"), ("op", "left"), ("kernel", "left"), ("input shapes", "left"),
                      ("output", "left"), ("MACC", "right"), ("weights B", "right"),
                      ("activations B", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for ly in r.layers:
        t.add_row(str(ly.index), escape(one_line(ly.op, 60)), ly.kernel, " ".join(map(str, ly.inputs)),
                  f"{ly.output} {ly.dtype}", f"{ly.macc:,}", f"{ly.weights_bytes:,}",
                  f"{ly.activation_bytes:,}")
    io = "inside the pool" if r.io_in_pool else "application-owned"
    if r.row_inputs:  # the app hands these over in rows (its own buffer, camera lines...): not in the pool
        io += (f"; input {', '.join(map(str, r.row_inputs))} in rows from the application's row source, "
               "in no buffer")
    t.caption = (f"MACC {r.macc:,} | ROM (weights) {r.weights_bytes:,} B | RAM (activation pool) "
                 f"{r.activations_bytes:,} B, schedule lower bound {r.lower_bound_bytes:,} B{_bounds(r)} | "
                 f"inputs {sum(r.input_bytes):,} B, outputs {sum(r.output_bytes):,} B ({io})")
    if r.state_bytes:
        t.caption += f" | RAM (state area, per instance) {r.state_bytes:,} B"
    t.caption_justify = "left"
    return t


def _pruning_html(r: Report) -> str:
    p = r.pruning
    if not p or not p["layers"]:
        return ""
    totals = "; ".join(f"{label} {_arrow(p[k])}" for k, label in
                       (("macc", "MACC"), ("weights_bytes", "ROM B"), ("activations_bytes", "RAM B")) if k in p)
    return f"<p>dead-channel elimination: {p['removed_channels']:,} output channels removed; {totals}</p>"


def render_html(r: Report) -> str:
    from html import escape

    from stm32ai.report.memory_map import render_svg

    rows = "\n".join(
        f"<tr><td>{ly.index}</td><td>{escape(ly.op)}</td><td>{escape(ly.kernel)}</td>"
        f"<td>{escape(str(ly.inputs))}</td><td>{escape(str(ly.output))} {ly.dtype}</td>"
        f"<td>{ly.macc:,}</td><td>{ly.weights_bytes:,}</td><td>{ly.activation_bytes:,}</td></tr>"
        for ly in r.layers)
    return (f"<!doctype html><meta charset=utf-8><title>{escape(r.model)}</title>"
            f"<h1>{escape(r.model)}</h1><p>MACC {r.macc:,}; ROM {r.weights_bytes:,} B; "
            f"RAM {r.activations_bytes:,} B (lower bound {r.lower_bound_bytes:,} B)</p>{_pruning_html(r)}"
            "<table border=1><tr><th>#</th><th>op</th><th>kernel</th><th>inputs</th><th>output</th>"
            f"<th>MACC</th><th>weights B</th><th>activations B</th></tr>\n{rows}</table>\n"
            + (f"<h2>memory map</h2>\n{render_svg(r.memory)}\n" if r.memory else ""))
