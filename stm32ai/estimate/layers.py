"""Which graph.json node each traced cycle belongs to.

The generated run function `<name>_run_ctx` (emitter/templates/model.c.j2) calls one kernel per
node, each call under a `/* node N: OP #i -> kernel */` comment. The firmware is built with
debug info (-g3), so the DWARF line table maps every `bl` of the run function to a line of
`<name>.c`, and so to the node block it sits in. A node's bucket opens at its call instruction
and closes when the call returns (its return address); everything else in the run is `runtime`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

from stm32ai.estimate.isa import Insn
from stm32ai.estimate.trace import Buckets, TraceError

_NODE = re.compile(r"/\* node (\d+): (.*?) #\S* -> (\S+) \*/")


@dataclass(frozen=True)
class Layer:
    node: int
    op: str
    kernel: str


def node_lines(model_c: Path) -> list[tuple[int, Layer]]:
    """(line number, layer) of each node comment in the generated model source, in order."""
    out = []
    for i, line in enumerate(model_c.read_text().splitlines(), start=1):
        m = _NODE.search(line)
        if m:
            out.append((i, Layer(node=int(m.group(1)), op=m.group(2), kernel=m.group(3))))
    return out


def _line_table(elf: Path, source_name: str) -> list[tuple[int, int]]:
    """(address, line) rows of the DWARF line programs for the compilation unit of `source_name`."""
    from elftools.elf.elffile import ELFFile

    rows: list[tuple[int, int]] = []
    with open(elf, "rb") as f:
        e = ELFFile(f)
        if not e.has_dwarf_info():
            raise TraceError(f"{elf.name} has no debug info: cannot attribute cycles to layers")
        dwarf = e.get_dwarf_info()
        for cu in dwarf.iter_CUs():
            name = cu.get_top_DIE().attributes.get("DW_AT_name")
            if name is None or Path(name.value.decode(errors="replace")).name != source_name:
                continue
            lp = dwarf.line_program_for_CU(cu)
            if lp is None:
                continue
            files = lp["file_entry"]
            ver5 = lp["version"] >= 5
            for entry in lp.get_entries():
                s = entry.state
                if s is None or s.end_sequence:
                    continue
                fe = files[s.file if ver5 else s.file - 1] if files else None
                if fe is not None and Path(fe.name.decode(errors="replace")).name != source_name:
                    continue
                rows.append((s.address, s.line))
    rows.sort()
    return rows


def layer_buckets(elf: Path, model_c: Path, run_fn: tuple[int, int], insns: dict[int, Insn]
                  ) -> tuple[Buckets, list[Layer | None]]:
    """Buckets for `Trace.measure`: bucket 0 is the runtime, bucket k+1 the k-th node with a
    call in the run function. Returns them with the layer of each bucket (None: runtime)."""
    nodes = node_lines(model_c)
    if not nodes:
        raise TraceError(f"{model_c.name} has no node comments: is it a generated model source?")
    rows = _line_table(elf, model_c.name)
    lo, hi = run_fn
    calls = [i for a, i in sorted(insns.items()) if lo <= a < hi and i.mnemonic in ("bl", "blx")]
    switch: dict[int, int] = {}
    layers: list[Layer | None] = [None]
    index: dict[int, int] = {}
    addrs = [a for a, _ in rows]
    for insn in calls:
        k = bisect.bisect_right(addrs, insn.addr) - 1
        if k < 0:
            continue
        line = rows[k][1]
        j = bisect.bisect_right([ln for ln, _ in nodes], line) - 1
        if j < 0:
            continue                                  # a call before the first node (runtime)
        layer = nodes[j][1]
        if layer.node not in index:
            index[layer.node] = len(layers)
            layers.append(layer)
        switch[insn.addr] = index[layer.node]
        switch[insn.addr + insn.size] = 0             # the return address: back to the runtime
    # keep graph order (the run function calls nodes in schedule order)
    names = ["runtime"] + [f"node {x.node} {x.kernel}" for x in layers[1:] if x is not None]
    return Buckets(names=names, switch=switch), layers
