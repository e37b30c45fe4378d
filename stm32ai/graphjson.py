"""graph.json + params.npz: the compiler's output artifact (schema in docs/graph_json.md).

The layout is TVM's graph-executor JSON (nodes, arg_nodes, heads, node_row_ptr, attrs
with dltype/shape/storage_id) with the extra attributes an MCU emitter needs:
per-entry quantisation, a storage table giving each storage id its pool and byte
offset, and per-node kernel parameters. Constants go to params.npz, keyed by the
name of their "null" node.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from stm32ai import API_VERSION, __version__
from stm32ai.errors import Stm32aiError
from stm32ai.ir import DTYPE_SIZES, Graph
from stm32ai.planner import ALIGN, Plan, row_fed_inputs
from stm32ai.sanitize import quote

SCHEMA_VERSION = 1
WEIGHTS_ALIGN = 8


def _const_align(dtype: str) -> int:
    return max(4, DTYPE_SIZES[dtype])


def to_graph_json(g: Graph, plan: Plan, name: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    row_fed = row_fed_inputs(g)
    nodes: list[dict[str, Any]] = []
    arg_nodes: list[int] = []
    entry_of: dict[int, int] = {}  # tensor id -> entry id
    node_row_ptr = [0]
    dltype: list[str] = []
    shape: list[list[int]] = []
    storage_id: list[int] = []
    quant: list[Any] = []
    tensor_names: list[str] = []
    params: dict[str, np.ndarray] = {}

    # storage ids: activation/scratch buffers first, then one per constant
    storage: list[dict[str, Any]] = []
    state_size = 0  # persistent tensors: 8-aligned slots of the instance's state area, in buffer order
    for i, b in enumerate(plan.buffers):
        if b.state:
            st = {"id": i, "pool": "state", "offset": state_size, "size": b.size}
            state_size += (b.size + 7) // 8 * 8
        elif b.app_owned:
            st = {"id": i, "pool": "user", "offset": 0, "size": b.size}
        else:
            st = {"id": i, "pool": activation_pool_name(plan.pool_index(i)), "offset": plan.offsets[i],
                  "size": b.size}
            if plan.pools:
                st["region"] = plan.pools[plan.pool_index(i)][0]
        storage.append(st)
    weights_size = 0
    const_storage: dict[int, int] = {}
    slots: dict[tuple[int, int], int] = {}  # (buffer, inner offset) -> storage id

    def sid_of(tid: int) -> int:
        """A tensor's storage id: its buffer's, or, at an offset inside an overlapped buffer,
        a storage entry of its own (whose bytes overlap the buffer's other entries)."""
        b = plan.tensor_buffer[tid]
        return slot(b, plan.buffers[b].inner.get(tid, 0))

    def slot(b: int, inner: int) -> int:
        if not inner:
            return b
        if (b, inner) not in slots:
            slots[(b, inner)] = len(storage)
            st = {"id": len(storage), "pool": activation_pool_name(plan.pool_index(b)),
                  "offset": plan.offsets[b] + inner, "size": plan.buffers[b].size - inner}
            if plan.pools:
                st["region"] = plan.pools[plan.pool_index(b)][0]
            storage.append(st)
        return slots[(b, inner)]

    def add_entry(tid: int, sid: int) -> None:
        t = g.tensors[tid]
        entry_of[tid] = len(dltype)
        dltype.append(t.dtype)
        shape.append(list(t.shape))
        storage_id.append(sid)
        quant.append(t.quant.to_json() if t.quant is not None else None)
        tensor_names.append(t.name)

    def add_node(node: dict[str, Any], outputs: list[tuple[int, int]]) -> int:
        nodes.append(node)
        for tid, sid in outputs:
            add_entry(tid, sid)
        node_row_ptr.append(len(dltype))
        return len(nodes) - 1

    def const_node(tid: int) -> None:
        nonlocal weights_size
        t = g.tensors[tid]
        key = f"p{len(params)}"
        data = np.ascontiguousarray(t.data, dtype=t.dtype)
        params[key] = data
        a = _const_align(t.dtype)
        off = (weights_size + a - 1) // a * a
        weights_size = off + data.nbytes
        sid = len(storage)
        storage.append({"id": sid, "pool": "weights", "offset": off, "size": int(data.nbytes)})
        const_storage[tid] = sid
        arg_nodes.append(add_node({"op": "null", "name": key, "inputs": [],
                                   "attrs": {"tensor": t.name}}, [(tid, sid)]))

    for i, tid in enumerate(g.inputs):
        arg_nodes.append(add_node({"op": "null", "name": g.tensors[tid].name, "inputs": [],
                                   "attrs": {"graph_input": i}},
                                  [(tid, sid_of(tid))]))
    for tid in sorted(t for t in g.used_tensor_ids() if g.tensors[t].variable and not g.tensors[t].is_const
                      and t not in entry_of):
        # persistent state: the model fills it at ai_create/ai_reset as TFLM does (int8: the
        # zero point byte, anything else: zeros)
        t = g.tensors[tid]
        fill = int(t.quant.zero_point[0]) & 0xFF if (t.dtype == "int8" and t.quant is not None
                                                      and t.quant.zero_point.size) else 0
        arg_nodes.append(add_node({"op": "null", "name": t.name, "inputs": [],
                                   "attrs": {"variable": True, "fill": fill}},
                                  [(tid, sid_of(tid))]))
    for op_idx in plan.order:
        op = g.ops[op_idx]
        inputs = []
        for tid in op.inputs:
            if tid < 0:
                inputs.append(None)
                continue
            if tid not in entry_of:
                if not g.tensors[tid].is_const:
                    raise AssertionError(f"{op.where} reads tensor {tid} before it is produced")
                const_node(tid)
            e = entry_of[tid]
            node = next(n for n in range(len(nodes)) if node_row_ptr[n] <= e < node_row_ptr[n + 1])
            inputs.append([node, e - node_row_ptr[node], 0])
        attrs: dict[str, Any] = {
            "func_name": op.kernel,
            "num_inputs": str(len(op.inputs)),
            "num_outputs": str(len(op.outputs)),
            "flatten_data": "0",
            "params": op.attrs,
            "macc": int(op.macc),
            "source_op": op.type,
            "source_index": op.index,
        }
        if op.scratch > 0:
            attrs["scratch_bytes"] = int(op.scratch)
            sb = plan.scratch_buffer[op_idx]  # inside a joined buffer (a stripe over its dying input): its slot
            attrs["scratch_storage_id"] = slot(sb, plan.buffers[sb].scratch_inner.get(op_idx, 0))
        add_node({"op": "tvm_op", "name": f"{op.kernel}_{op_idx}", "inputs": inputs, "attrs": attrs},
                 [(t, sid_of(t)) for t in op.outputs])

    heads = []
    for tid in g.outputs:
        if tid not in entry_of:
            # passes/output_copies.py copies constant and input outputs into computed tensors
            raise AssertionError(f"graph output {quote(g.tensors[tid].name)} is not computed by any op")
        e = entry_of[tid]
        node = next(n for n in range(len(nodes)) if node_row_ptr[n] <= e < node_row_ptr[n + 1])
        heads.append([node, e - node_row_ptr[node], 0])

    doc = {
        "nodes": nodes,
        "arg_nodes": arg_nodes,
        "heads": heads,
        "node_row_ptr": node_row_ptr,
        "attrs": {
            "dltype": ["list_str", dltype],
            "shape": ["list_shape", shape],
            "storage_id": ["list_int", storage_id],
            "quant": ["list_quant", quant],
            "tensor_name": ["list_str", tensor_names],
        },
        "stm32ai": {
            "schema_version": SCHEMA_VERSION,
            "name": name,
            "tool_version": __version__,
            "api_version": API_VERSION,
            "source": g.name,
            "description": g.description,
            "storage": storage,
            "pools": [*_activation_pools(plan),
                      {"name": "weights", "size": weights_size, "align": WEIGHTS_ALIGN}],
            # a row-fed input (--input-rows) has no buffer at all: the app hands its rows over
            "inputs_in_pool": not any(t in plan.app_owned and t not in row_fed for t in g.inputs),
            "outputs_in_pool": not any(t in plan.app_owned for t in g.outputs),
        },
    }
    return doc, params


def activation_pool_name(k: int) -> str:
    """Pool 0 keeps the single-pool name, so single-pool artifacts are unchanged."""
    return "activations" if k == 0 else f"activations_{k}"


def _activation_pools(plan: Plan) -> list[dict[str, Any]]:
    if not plan.pools:
        return [{"name": "activations", "size": plan.pool_size, "align": ALIGN, "lower_bound": plan.lower_bound}]
    from stm32ai.planner.regions import pool_lower_bound

    pools = []
    for k, (region, size) in enumerate(plan.pools):
        p: dict[str, Any] = {"name": activation_pool_name(k), "size": size, "align": ALIGN, "region": region,
                             "pool_lower_bound": pool_lower_bound(plan, k)}
        if k == 0:
            p["lower_bound"] = plan.lower_bound
        pools.append(p)
    return pools


def activation_pools(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The activation pools of an artifact, pool 0 first."""
    return [p for p in doc["stm32ai"]["pools"] if p["name"] == "activations" or p["name"].startswith("activations_")]


def write_artifact(out_dir: Path, doc: dict[str, Any], params: dict[str, np.ndarray]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "graph.json").write_text(json.dumps(doc, indent=1) + "\n")
    np.savez(out_dir / "params.npz", **params)


def read_artifact(src: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read graph.json and params.npz from a directory (or a graph.json path)."""
    path = src / "graph.json" if src.is_dir() else src
    try:
        doc = json.loads(path.read_text())
        with np.load(path.parent / "params.npz", allow_pickle=False) as z:
            params = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, json.JSONDecodeError) as e:
        raise Stm32aiError(f"{path}: cannot read graph artifact ({e})") from e
    meta = doc.get("stm32ai", {})
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise Stm32aiError(f"{path}: graph.json schema version {meta.get('schema_version')!r}, "
                           f"this tool reads {SCHEMA_VERSION}")
    return doc, params




def model_signature(doc: dict[str, Any], params: dict[str, np.ndarray]) -> int:
    """32-bit signature of what the model computes: CRC-32 of its nodes, outputs, entry dtypes,
    shapes and quantisation, and every constant's dtype, shape and bytes.

    Names, buffer placement and tool/version fields are left out, so the same model compiled
    with another `--name` or other I/O allocation options keeps its signature. The firmware
    reports it in the validation protocol's HELLO (docs/uart_protocol.md).
    """
    attrs = doc["attrs"]
    nodes = [{"op": n["op"], "inputs": n.get("inputs", []),
              "attrs": {k: v for k, v in n.get("attrs", {}).items() if k not in ("tensor", "scratch_storage_id")}}
             for n in doc["nodes"]]
    structure = {"nodes": nodes, "heads": doc["heads"], "dltype": attrs["dltype"],
                 "shape": attrs["shape"], "quant": attrs.get("quant")}
    crc = zlib.crc32(json.dumps(structure, sort_keys=True, separators=(",", ":")).encode())
    for key in sorted(params):
        a = np.ascontiguousarray(params[key])
        crc = zlib.crc32(f"{key}:{a.dtype.str}:{list(a.shape)}".encode(), crc)
        crc = zlib.crc32(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes(), crc)
    return crc & 0xFFFFFFFF
