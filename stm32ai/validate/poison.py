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

import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from stm32ai.emitter import emit_c
from stm32ai.errors import Stm32aiError
from stm32ai.ir import DTYPE_SIZES
from stm32ai.pipeline import Compiled
from stm32ai.validate.host import HOST_TIMEOUT, build_host, io_specs

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


HARNESS = """/* Host harness of the poison runner: argv[1] picks the model; per sample, every input's
 * bytes from stdin, one run, every output's bytes to stdout. */
#include <stdio.h>
#include <stdlib.h>

#include "ai_runtime.h"
%(includes)s
static ai_model_info *const models[] = { %(infos)s };

int main(int argc, char **argv) {
  ai_handle h;
  if (argc != 2) {
    return 2;
  }
  const int k = atoi(argv[1]);
  if (k < 0 || k >= (int)(sizeof models / sizeof models[0])) {
    return 2;
  }
  if (ai_create(models[k], NULL, &h) != AI_OK) {
    fprintf(stderr, "ai_create: %%s\\n", ai_get_error(NULL));
    return 3;
  }
  for (int sample = 0;; sample++) {
    if (sample > 0 && ai_reset(h) != AI_OK) {
      return 6;
    }
    for (int i = 0; i < ai_get_input_size(h); i++) {
      ai_tensor *t = ai_get_input(h, i);
      size_t got = fread(t->data, 1, t->size_bytes, stdin);
      if (got == 0 && i == 0) {
        ai_destroy(h);
        return 0;
      }
      if (got != t->size_bytes) {
        return 4;
      }
    }
    if (ai_run(h) != AI_OK) {
      fprintf(stderr, "ai_run: %%s\\n", ai_get_error(h));
      return 5;
    }
    for (int i = 0; i < ai_get_output_size(h); i++) {
      ai_tensor *t = ai_get_output(h, i);
      fwrite(t->data, 1, t->size_bytes, stdout);
    }
    fflush(stdout);
  }
}
"""


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
        harness.write_text(HARNESS % {
            "includes": "\n".join(f'#include "{n}/{n}.h"' for n in models),
            "infos": ", ".join(f"&{n}_info" for n in models)})
        first = next(iter(models))
        self.exe = build_host(workdir / first, first, workdir / "poison_host", [*extra, harness],
                              defines=["AI_POISON"], include_dirs=[workdir])

    def run(self, c: Compiled, samples: list[list[np.ndarray]], name: str) -> list[list[np.ndarray]]:
        ins, outs = io_specs(c)
        stdin = b"".join(np.ascontiguousarray(x, dtype=s.dtype).tobytes()
                         for sample in samples for x, s in zip(sample, ins, strict=True))
        r = subprocess.run([str(self.exe), str(self.index[name])], input=stdin, capture_output=True,
                           timeout=HOST_TIMEOUT)
        if r.returncode != 0:
            raise Stm32aiError(f"poisoned model {name} failed (exit {r.returncode}): "
                               f"{r.stderr.decode(errors='replace').strip()}")
        results, pos = [], 0
        for _ in samples:
            row = []
            for s in outs:
                n = int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize
                row.append(np.frombuffer(r.stdout[pos:pos + n], dtype=s.dtype).reshape(s.shape).copy())
                pos += n
            results.append(row)
        return results
