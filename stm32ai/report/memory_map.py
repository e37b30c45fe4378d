"""The memory plan as data (`analyze --json`'s `memory`) and as a picture (`analyze --html`).

The picture is one self-contained inline SVG: schedule steps left to right, pool offsets top to
bottom, one box per buffer (tensors sharing storage, or a kernel's scratch) spanning the steps it
is alive, one band per activation pool with its region, and a dashed line at the pool's
lower bound (the most bytes alive at one step). Model strings (tensor and op names) are untrusted:
every one goes through `one_line` and then HTML/XML escaping, in text and in attributes alike.
"""

from __future__ import annotations

from html import escape
from typing import Any

from stm32ai.pipeline import Compiled
from stm32ai.planner.liveness import lower_bound
from stm32ai.sanitize import one_line

_W, _LEFT, _TOP, _BAND_GAP = 960, 170, 30, 36
_MAX_H, _MIN_BAND = 640, 60
_COLORS = ("#8ecae6", "#ffb703", "#90be6d", "#f4a261", "#cdb4db", "#a8dadc", "#e9c46a", "#f28482")


def _label(c: Compiled, i: int) -> str:
    b = c.plan.buffers[i]
    g = c.graph
    if b.scratch_of >= 0:
        op = g.ops[b.scratch_of]
        return f"scratch of {op.type} #{op.index}"
    return " = ".join(g.tensors[t].name for t in b.tensors[:3]) + (" ..." if len(b.tensors) > 3 else "")


def memory_map(c: Compiled) -> dict[str, Any]:
    """Pools (region, size, lower bound), steps (op run at each) and buffers (pool, offset,
    size, first/last step, label). Labels are the model's raw strings: escape them to show them."""
    plan, g = c.plan, c.graph
    regions = plan.pools or [("", plan.pool_size)]
    pools = []
    for k, (region, size) in enumerate(regions):
        members = [b for i, b in enumerate(plan.buffers) if plan.pool_index(i) == k]
        # one pool: the plan's schedule lower bound; split: the peak live bytes of this pool's buffers
        bound = plan.lower_bound if not plan.pools else lower_bound(members)
        pools.append({"index": k, "region": region, "size": size, "lower_bound": bound})
    steps = [f"{g.ops[o].type} #{g.ops[o].index}" for o in plan.order]
    buffers = [{"pool": plan.pool_index(i), "offset": plan.offsets[i], "size": b.size, "first": b.first,
                "last": b.last, "label": _label(c, i)}
               for i, b in enumerate(plan.buffers) if b.in_pool]
    return {"pools": pools, "steps": steps, "buffers": buffers, "lower_bound": plan.lower_bound}


def _e(s: Any, limit: int = 120) -> str:
    return escape(one_line(str(s), limit), quote=True)


def render_svg(mm: dict[str, Any]) -> str:
    """The memory map as an inline SVG element (no script, no external reference)."""
    n_steps = max(len(mm["steps"]), 1)
    total = max(sum(p["size"] for p in mm["pools"]), 1)
    scale = min(_MAX_H / total, 4.0)  # pixels per byte, one scale for every pool
    step_w = (_W - _LEFT - 10) / n_steps
    tops, y = [], _TOP
    for p in mm["pools"]:
        tops.append(y)
        y += max(p["size"] * scale, _MIN_BAND) + _BAND_GAP
    height = int(y + 40)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" '
           f'viewBox="0 0 {_W} {height}" font-family="sans-serif" font-size="10" role="img">',
           f'<text x="{_LEFT}" y="16" font-size="12">schedule step &#8594; (time); pool offset &#8595; '
           f'(bytes); dashed: lower bound</text>']
    for p, top in zip(mm["pools"], tops, strict=True):
        h = max(p["size"] * scale, _MIN_BAND)
        region = f" in {p['region']}" if p["region"] else ""
        out.append(f'<rect x="{_LEFT}" y="{top:.1f}" width="{_W - _LEFT - 10}" height="{h:.1f}" '
                   f'fill="#f8f8f8" stroke="#333"/>')
        out.append(f'<text x="4" y="{top + 12:.1f}" font-weight="bold">pool {p["index"]}{_e(region)}</text>')
        out.append(f'<text x="4" y="{top + 26:.1f}">{p["size"]:,} B</text>')
        out.append(f'<text x="4" y="{top + 40:.1f}">lower bound {p["lower_bound"]:,} B</text>')
        ly = top + p["lower_bound"] * scale
        out.append(f'<line x1="{_LEFT}" y1="{ly:.1f}" x2="{_W - 10}" y2="{ly:.1f}" stroke="#c00" '
                   f'stroke-dasharray="6 3"><title>lower bound {p["lower_bound"]:,} B</title></line>')
    for n, b in enumerate(mm["buffers"]):
        top = tops[b["pool"]]
        x = _LEFT + b["first"] * step_w
        w = max((b["last"] - b["first"] + 1) * step_w, 1.0)
        by, bh = top + b["offset"] * scale, max(b["size"] * scale, 1.0)
        tip = (f'{b["label"]}: {b["size"]:,} B at offset {b["offset"]:,}, steps {b["first"]}-{b["last"]}')
        out.append(f'<g><title>{_e(tip, 300)}</title><rect x="{x:.1f}" y="{by:.1f}" width="{w:.1f}" '
                   f'height="{bh:.1f}" fill="{_COLORS[n % len(_COLORS)]}" stroke="#222" stroke-width="0.5"/>')
        if bh >= 11 and w >= 40:
            chars = max(int(w / 6), 4)
            out.append(f'<text x="{x + 2:.1f}" y="{by + 10:.1f}">{_e(b["label"], chars)}</text>')
        out.append("</g>")
    axis_y = y - _BAND_GAP + 14
    every = max(1, n_steps // 20)
    for s, op in enumerate(mm["steps"]):
        if s % every == 0:
            out.append(f'<text x="{_LEFT + (s + 0.5) * step_w:.1f}" y="{axis_y:.1f}" text-anchor="middle">'
                       f'<title>{_e(op)}</title>{s}</text>')
    out.append("</svg>")
    return "\n".join(out)


def render_text(mm: dict[str, Any]) -> list[str]:
    """`analyze`'s per-region placement lines."""
    lines = []
    split = len(mm["pools"]) > 1
    if split:
        lines.append(f"activation pools: split across {len(mm['pools'])} regions "
                     "(hottest buffers, by accesses per byte, in the first)")
    for p in mm["pools"]:
        bufs = [b for b in mm["buffers"] if b["pool"] == p["index"]]
        region = p["region"] or "activations"
        names = ", ".join(one_line(b["label"], 32) for b in sorted(bufs, key=lambda b: -b["size"])[:4])
        more = f", +{len(bufs) - 4} more" if len(bufs) > 4 else ""
        lines.append(f"  pool {p['index']} {region}: {p['size']:,} B (lower bound {p['lower_bound']:,} B), "
                     f"{len(bufs)} buffers: {names}{more}")
    return lines
