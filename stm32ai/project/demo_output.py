"""Parse the demo's `key: value` UART output (docs/project.md, "The demo").

    out = parse_demo_output(uart_text)
    out.result            # "match" / "mismatch" / "error" / None
    out.count, out.unit   # 1234567, "instructions" (emulated boards) or "cycles" (hardware)
    out.layers            # [Layer(node=5, kernel="conv2d_s8", count=24595), ...] (--profile builds)
    out.models            # per `model:` line: ModelOutput(name, fields, count, unit) (several models)
    out.all_passed        # every model printed `result: match` (or `no-reference`)

Emulated boards report retired instructions (`instructions:`; QEMU -icount has no cycle model),
hardware boards core cycles (`cycles:` and `ms:`). Firmware generated before that distinction
printed `cycles:` on emulated boards too: those are SysTick ticks of virtual time, converted here
to instructions when the caller passes the board (`legacy_board`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DemoOutput", "Layer", "ModelOutput", "format_layers", "parse_demo_output", "parse_layer"]

PASSING = ("match", "no-reference")  # a model's `result:` values that are not a failure

_KV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): (.*)$")
_LAYER = re.compile(r"^(\d+) ([A-Za-z_][A-Za-z0-9_]*) (\d+)$")


@dataclass(frozen=True)
class Layer:
    node: int      # graph.json node index
    kernel: str    # graph.json func_name (a C identifier)
    count: int     # instructions (emulated) or cycles (hardware)


@dataclass
class ModelOutput:
    """The lines from one `model: <name>` line to the next (a multi-model demo prints one such
    section per model; a single-model demo's one section runs to the end)."""

    name: str
    fields: dict[str, str] = field(default_factory=dict)
    count: int | None = None
    unit: str | None = None

    @property
    def result(self) -> str | None:
        return self.fields.get("result")


@dataclass
class DemoOutput:
    fields: dict[str, str] = field(default_factory=dict)
    layers: list[Layer] = field(default_factory=list)
    count: int | None = None
    unit: str | None = None          # "instructions" or "cycles"
    models: list[ModelOutput] = field(default_factory=list)

    @property
    def all_passed(self) -> bool:
        """At least one model, and every model's `result:` is match (or no-reference)."""
        return bool(self.models) and all(m.result in PASSING for m in self.models)

    @property
    def result(self) -> str | None:
        return self.fields.get("result")

    @property
    def ms(self) -> float | None:
        v = self.fields.get("ms")
        return float(v) if v is not None else None

    @property
    def profile_total(self) -> int | None:
        v = self.fields.get("profile_total")
        return int(v) if v is not None and v.isdigit() else None

    def to_json(self) -> dict[str, Any]:
        return {"result": self.result, "unit": self.unit, "count": self.count, "ms": self.ms,
                "layers": [{"node": x.node, "kernel": x.kernel, "count": x.count} for x in self.layers],
                "models": [{"name": x.name, "result": x.result, "unit": x.unit, "count": x.count}
                           for x in self.models]}


def parse_layer(value: str) -> Layer | None:
    """The value of a `layer:` line (`<node> <kernel> <count>`), or None if malformed."""
    m = _LAYER.match(value.strip())
    return Layer(int(m.group(1)), m.group(2), int(m.group(3))) if m else None


def parse_demo_output(text: str, legacy_board: Any = None) -> DemoOutput:
    """Fields (last value wins), the headline count and its unit, and the `layer:` lines."""
    out = DemoOutput()
    for raw in text.splitlines():
        m = _KV.match(raw.rstrip("\r"))
        if not m:
            continue
        k, v = m.group(1), m.group(2).strip()
        if k == "model":
            out.models.append(ModelOutput(v))
        elif out.models:
            out.models[-1].fields[k] = v
        if k == "layer":
            layer = parse_layer(v)
            if layer is not None:
                out.layers.append(layer)
            continue
        out.fields[k] = v
    f = out.fields
    if f.get("instructions", "").isdigit():
        out.count, out.unit = int(f["instructions"]), "instructions"
    elif f.get("cycles", "").isdigit():
        out.count, out.unit = int(f["cycles"]), "cycles"
        emu = getattr(legacy_board, "emulation", None)
        if emu is not None and f.get("cycle_counter") == "systick":   # SysTick ticks under QEMU -icount
            # at the clock the firmware reports it reached (a real board's firmware: after its bring-up)
            hz = int(f["sysclk_hz"]) if f.get("sysclk_hz", "").isdigit() else None
            out.count, out.unit = emu.ticks_to_instructions(out.count, hz), "instructions"
    for sec in out.models:
        for unit in ("instructions", "cycles"):
            if sec.fields.get(unit, "").isdigit():
                sec.count, sec.unit = int(sec.fields[unit]), unit
                break
    return out


def format_layers(layers: list[Layer], unit: str, total: int | None = None) -> list[str]:
    """A plain-text per-layer table (node, kernel, count, share of the total)."""
    tot = total or sum(x.count for x in layers) or 1
    w = max([len(x.kernel) for x in layers] + [6])
    lines = [f"{'node':>5}  {'kernel':<{w}}  {unit:>14}  share"]
    for x in layers:
        lines.append(f"{x.node:>5}  {x.kernel:<{w}}  {x.count:>14,}  {100.0 * x.count / tot:5.1f}%")
    return lines
