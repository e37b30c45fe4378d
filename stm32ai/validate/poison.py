"""Host runs with the dead bytes of the activation pool poisoned before every kernel call.

A plan that lets a tensor's bytes be reused too early (a wrong lifetime, a wrong overlap of
an output on its input) often still computes the right answer when the stale bytes happen to
hold the old values. This runner removes that luck: the generated model, built for the host
with `-DAI_POISON`, calls `<name>_poison(act, node)` before each kernel; the function, generated
here from graph.json alone (not from the planner's data structures), overwrites every byte of
the pool that no live tensor occupies with pseudo-random garbage. Live before node n: a tensor
written by an earlier node (or a graph input / persistent state) that node n or a later one
reads, or a graph output. Scratch is never live between calls. Several models link into one
executable (`PoisonBuild`), so a sweep over many models pays for one compiler run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from stm32ai.emitter import emit_c
from stm32ai.ir import DTYPE_SIZES
from stm32ai.pipeline import Compiled
from stm32ai.validate.host import build_host, harness_source, run_exe

BIG = 1 << 30


def live_ranges(doc: dict[str, Any]) -> dict[int, list[tuple[int, int]]]:
    """Per kernel node (graph.json index): the pool byte ranges [start, end) live before it."""
    attrs, meta = doc["attrs"], doc["stm32ai"]
    sids, shapes, dtypes = attrs["storage_id"][1], attrs["shape"][1], attrs["dltype"][1]
    storage, nodes, row = meta["storage"], doc["nodes"], doc["node_row_ptr"]
    n_entries = len(sids)
    made = [0] * n_entries  # node that writes the entry
    for n in range(len(nodes)):
        for e in range(row[n], row[n + 1]):
            made[e] = n
    last = [-1] * n_entries
    for n, node in enumerate(nodes):
        for inp in node.get("inputs", []):
            if inp is not None:
                e = row[inp[0]] + inp[1]
                last[e] = max(last[e], n)
    for n, idx, _v in doc["heads"]:
        last[row[n] + idx] = BIG
    for n in doc["arg_nodes"]:
        if nodes[n].get("attrs", {}).get("variable"):
            last[row[n]] = BIG
    out: dict[int, list[tuple[int, int]]] = {}
    for n, node in enumerate(nodes):
        if node["op"] != "tvm_op":
            continue
        ranges = []
        for e in range(n_entries):
            st = storage[sids[e]]
            if st["pool"] != "activations" or not (made[e] < n <= last[e]):
                continue
            nbytes = int(np.prod(shapes[e], dtype=np.int64)) * DTYPE_SIZES[dtypes[e]]
            ranges.append((int(st["offset"]), int(st["offset"]) + nbytes))
        out[n] = _merge(ranges)
    return out


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[1] > r[0]):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def poison_source(doc: dict[str, Any], name: str) -> str:
    """C for `<name>_poison(act, node)`: garbage into every dead pool byte before `node`."""
    pool = next(p["size"] for p in doc["stm32ai"]["pools"] if p["name"] == "activations")
    live = live_ranges(doc)
    n_nodes = len(doc["nodes"])
    first = [0] * (n_nodes + 1)
    flat: list[int] = []
    for n in range(n_nodes):
        first[n] = len(flat) // 2
        for a, b in live.get(n, []):
            flat += [a, b]
    first[n_nodes] = len(flat) // 2
    return "\n".join([
        "#include <stdint.h>",
        '#include "ai_platform.h"',
        f"static const uint32_t live_[{max(len(flat), 1)}] = {{ {', '.join(map(str, flat)) or '0'} }};",
        f"static const uint32_t first_[{n_nodes + 1}] = {{ {', '.join(map(str, first))} }};",
        f"void {name}_poison(ai_u8 *act, uint32_t node);",
        f"void {name}_poison(ai_u8 *act, uint32_t node) {{",
        "  uint32_t x = 0x9E3779B9u ^ (node * 2654435761u), pos = 0;",
        "  for (uint32_t r = first_[node]; r <= first_[node + 1]; ++r) {",
        f"    const uint32_t end = r < first_[node + 1] ? live_[2 * r] : {pool}u;",
        "    for (; pos < end; ++pos) {",
        "      x = x * 1664525u + 1013904223u;",
        "      act[pos] = (ai_u8)(x >> 24);",
        "    }",
        "    if (r < first_[node + 1]) {",
        "      pos = live_[2 * r + 1];",
        "    }",
        "  }",
        "}",
        "",
    ])


class PoisonBuild:
    """Several compiled models in one host executable built with -DAI_POISON."""

    def __init__(self, models: dict[str, Compiled], workdir: Path) -> None:
        self.models = models
        self.index = {name: i for i, name in enumerate(models)}
        workdir.mkdir(parents=True, exist_ok=True)
        extra: list[Path] = []
        for i, (name, c) in enumerate(models.items()):
            d = workdir / name
            emit_c(c.doc, c.params, name, d)
            (d / "poison.c").write_text(poison_source(c.doc, name))
            extra += ([] if i == 0 else [d / f"{name}.c", d / f"{name}_data.c"]) + [d / "poison.c"]
        harness = workdir / "poison_main.c"
        harness.write_text(harness_source({n: f"{n}/{n}.h" for n in models}))
        first = next(iter(models))
        self.exe = build_host(workdir / first, first, workdir / "poison_host", [*extra, harness],
                              defines=["AI_POISON"], include_dirs=[workdir])

    def run(self, c: Compiled, samples: list[list[np.ndarray]], name: str) -> list[list[np.ndarray]]:
        return run_exe(self.exe, [str(self.index[name])], c, samples, f"poisoned model {name}")
