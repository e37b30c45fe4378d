"""C emitter: graph.json + params -> <name>.c/.h, <name>_data.c/.h and the runtime.

Driven by the artifact alone (never the .tflite file), so any frontend that writes
graph.json can use it. Every kernel call is generic: the node's `params` initialise
`ai_<func_name>_params` field by field, and its inputs/outputs become pointers into
the weights array, the activation pool or the application's I/O tensors.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import re
import shutil
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from stm32ai.emitter.io_helpers import Normalization, io_context
from stm32ai.errors import Stm32aiError
from stm32ai.graphjson import WEIGHTS_ALIGN, activation_pools
from stm32ai.ir import DTYPE_CODES
from stm32ai.resources import runtime_dir
from stm32ai.sanitize import configure, quote, untrusted

C_IDENT = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


NAME_MAX = 40  # symbols add up to 24 characters ("AI_<NAME>_ACTIVATIONS_ALIGN"); C99 guarantees 63
_C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for
    goto if inline int long register restrict return short signed sizeof static struct switch typedef union
    unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn
    _Static_assert _Thread_local alignas alignof bool constexpr false nullptr static_assert thread_local
    true typeof typeof_unqual _BitInt _Decimal32 _Decimal64 _Decimal128""".split())
# File names that would shadow a C library header (-I puts the model's directory first) or a
# file of the generated project (Core/Src, Core/Inc).
_TAKEN_FILE_NAMES = frozenset("""assert complex ctype errno fenv float inttypes iso646 limits locale math
    setjmp signal stdalign stdarg stdatomic stdbool stddef stdint stdio stdlib stdnoreturn string tgmath
    threads time uchar wchar wctype main board console cycles system startup syscalls demo_data""".split())


def check_name(name: str) -> None:
    """`--name` becomes a prefix of every exported symbol and the model's file names."""
    from stm32ai.sanitize import quote

    what = f"--name {quote(name, 48)}"
    if len(name) > NAME_MAX:
        raise Stm32aiError(f"--name is {len(name):,} characters long: at most {NAME_MAX}")
    if not C_IDENT.match(name):
        raise Stm32aiError(f"{what} is not a C identifier (letters, digits and '_', not starting with a digit)")
    if name.lower().startswith("ai_") or name.startswith("__") or (name[0] == "_" and name[1:2].isupper()):
        raise Stm32aiError(f"{what} is reserved (prefix 'ai_' belongs to the runtime, '__' and '_X' to the "
                           "C implementation): choose another name")
    if name in _C_KEYWORDS:
        raise Stm32aiError(f"{what} is a C keyword: choose another name")
    if name.lower() in _TAKEN_FILE_NAMES:
        raise Stm32aiError(f"{what} would make {name}.h, which clashes with a C library or project header: "
                           "choose another name")


def c_value(v: Any) -> str:
    """A params value as a C initialiser: exact hex floats, lists as braces."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return "{" + ", ".join(c_value(x) for x in v) + "}"
    if isinstance(v, float):
        if math.isinf(v):
            return "INFINITY" if v > 0 else "(-INFINITY)"
        if math.isnan(v):
            raise ValueError("NaN kernel parameter")
        f = float(np.float32(v))
        return f"{f.hex()}f" if f != 0.0 else "0.0f"
    if isinstance(v, (int, np.integer)):
        v = int(v)
        if v == -(1 << 31):
            return "(-2147483647 - 1)"
        if v > 0x7FFFFFFF:
            return f"{v}u"
        return str(v)
    raise TypeError(f"cannot emit kernel parameter {v!r}")


def _weights_blob(doc: dict[str, Any], params: dict[str, np.ndarray]) -> bytes:
    meta = doc["stm32ai"]
    size = next(p["size"] for p in meta["pools"] if p["name"] == "weights")
    blob = bytearray(size)
    sid_of = doc["attrs"]["storage_id"][1]
    row = doc["node_row_ptr"]
    for n in doc["arg_nodes"]:
        node = doc["nodes"][n]
        st = meta["storage"][sid_of[row[n]]]
        # by storage, not by name alone: an input or state tensor may be named "p0" too
        if st["pool"] != "weights" or node["name"] not in params:
            continue
        data = np.ascontiguousarray(params[node["name"]]).astype(params[node["name"]].dtype.newbyteorder("<"))
        raw = data.tobytes()
        blob[st["offset"]:st["offset"] + len(raw)] = raw
    return bytes(blob)


def _hex_body(blob: bytes) -> str:
    if not blob:
        return "  0"
    hexes = [f"0x{b:02x}" for b in blob]
    return "\n".join("  " + ", ".join(hexes[i:i + 16]) + "," for i in range(0, len(hexes), 16))


def build_context(doc: dict[str, Any], params: dict[str, np.ndarray], name: str) -> dict[str, Any]:
    check_name(name)
    meta = doc["stm32ai"]
    attrs = doc["attrs"]
    dltype, shapes, sids = attrs["dltype"][1], attrs["shape"][1], attrs["storage_id"][1]
    quants, tnames = attrs["quant"][1], attrs["tensor_name"][1]
    storage = meta["storage"]
    row = doc["node_row_ptr"]
    nodes = doc["nodes"]
    pools = _pools_context(doc, name)
    pool_index = {p["pool"]: p["index"] for p in pools}
    act_pool = pools[0]
    w_pool = next(p for p in meta["pools"] if p["name"] == "weights")

    def entry(node: int, idx: int) -> int:
        return row[node] + idx

    # pointer expression per storage id: graph I/O first, then the pools
    ptr: dict[int, str] = {}
    inputs, outputs = [], []
    graph_inputs = sorted((n for n in doc["arg_nodes"] if "graph_input" in nodes[n].get("attrs", {})),
                          key=lambda n: nodes[n]["attrs"]["graph_input"])

    def io_tensor(e: int, sym: str) -> dict[str, Any]:
        st = storage[sids[e]]
        q = quants[e]
        code, bits = DTYPE_CODES[dltype[e]]
        size_bytes = int(np.prod(shapes[e], dtype=np.int64)) * bits // 8
        qd = None
        if q is not None:
            qd = {"scale": q["scale"], "zero_point": q["zero_point"], "axis": q["axis"],
                  "scale_c": [c_value(float(s)) for s in q["scale"]]}
        in_pool = st["pool"] in pool_index
        return {"sym": sym, "shape": shapes[e] or [1], "dt_code": code, "dt_bits": bits,
                "size_bytes": size_bytes, "quant": qd, "tensor_name": untrusted(tnames[e]),
                "in_pool": in_pool, "pool": pool_index.get(st["pool"], 0),
                "pool_offset": f"{st['offset']}u" if in_pool else "AI_NOT_IN_POOL"}

    # inputs a stripe pulls from the row source (--input-rows): bit i = input i (ai_model_info)
    row_fed = {int(src["input"]) for node in nodes if node["op"] == "tvm_op"
               and node["attrs"].get("func_name") == "stripe"
               for src in node["attrs"]["params"]["stripe"].get("sources", ())}
    if any(k < 0 or k >= min(len(graph_inputs), 32) for k in row_fed):
        raise Stm32aiError("graph.json: a stripe's row source names no graph input (or one past 32)")
    for i, n in enumerate(graph_inputs):
        e = entry(n, 0)
        inputs.append(io_tensor(e, f"{name}_in{i}") | {"row_fed": i in row_fed})
        ptr.setdefault(sids[e], f"input[{i}]->data")
    for j, (n, idx, _v) in enumerate(doc["heads"]):
        e = entry(n, idx)
        outputs.append(io_tensor(e, f"{name}_out{j}"))
        ptr.setdefault(sids[e], f"output[{j}]->data")

    def pointer(sid: int) -> str:
        if sid in ptr:
            return ptr[sid]
        st = storage[sid]
        if sid in state_offset:
            return f"(void *)(st + {state_offset[sid]}u)"
        if st["pool"] == "weights":
            return f"(const void *)(w + {st['offset']}u)"
        if st["pool"] in pool_index:
            return f"(void *)({pools[pool_index[st['pool']]]['var']} + {st['offset']}u)"
        raise AssertionError(f"storage {sid} in pool {st['pool']} has no pointer")

    states, state_offset, state_size = _state_area(doc)
    calls = []
    needs_math = False
    macc = 0
    for i, node in enumerate(nodes):
        if node["op"] != "tvm_op":
            continue
        a = node["attrs"]
        kernel = a["func_name"]
        macc += int(a.get("macc", 0))
        if kernel == "__nop":
            continue
        if not C_IDENT.match(kernel):
            raise Stm32aiError(f"graph.json node {i}: bad func_name {kernel!r}")
        if i > 0xFFFF:   # the profile's node table (and the validation protocol) use u16
            raise Stm32aiError(f"graph.json has more than 65536 nodes (node {i}): too large a model")
        if kernel == "stripe":
            decls, code = _stripe_code(i, a, [None if inp is None else pointer(sids[entry(inp[0], inp[1])])
                                              for inp in node["inputs"]],
                                       [pointer(sids[entry(i, k)]) for k in range(int(a["num_outputs"]))],
                                       pointer(int(a["scratch_storage_id"])))
            calls.append({
                "kernel": kernel, "psym": f"k{i}", "params_init": None, "decls": decls,
                "node": i, "source_op": "STRIPE", "source_index": untrusted(str(a.get("source_index", "?"))),
                "call": code,
            })
            continue
        args = []
        kparams = a.get("params", {})
        psym = f"k{i}"
        init = None
        if kparams:
            init = "{ " + ", ".join(f".{k} = {c_value(v)}" for k, v in kparams.items()) + " }"
            needs_math = needs_math or "INFINITY" in init
            args.append(f"&{psym}")
        for inp in node["inputs"]:
            args.append("NULL" if inp is None else pointer(sids[entry(inp[0], inp[1])]))
        n_out = int(a["num_outputs"])
        for k in range(n_out):
            args.append(pointer(sids[entry(i, k)]))
        if "scratch_storage_id" in a:
            args.append(pointer(int(a["scratch_storage_id"])))
        calls.append({
            "kernel": kernel, "psym": psym, "params_init": init, "decls": None,
            "node": i, "source_op": untrusted(str(a.get("source_op", "?"))),
            "source_index": untrusted(str(a.get("source_index", "?"))),
            "call": f"ai_{kernel}({', '.join(args)});",
        })

    blob = _weights_blob(doc, params)
    revision = hashlib.sha256(blob + repr(nodes).encode()).hexdigest()[:12]
    return {
        "name": name, "NAME": name.upper(), "tool_version": untrusted(str(meta["tool_version"])),
        "source": untrusted(str(meta.get("source", ""))),
        "datetime": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "revision": revision, "n_nodes": len(calls), "inputs": inputs, "outputs": outputs,
        "activations_size": sum(p["size"] for p in pools), "activations_array_size": max(act_pool["size"], 8),
        "pools": pools, "multi_pool": len(pools) > 1,
        "align": act_pool["align"], "weights_size": w_pool["size"], "weights_align": WEIGHTS_ALIGN,
        "weights_array_size": max(len(blob), 1), "weights_body": _hex_body(blob),
        "kernel_headers": sorted(p.name for p in (runtime_dir() / "include").glob("ai_kernels_*.h")),
        "builtin_pool": True, "calls": calls, "states": states, "state_size": state_size,
        "needs_math": needs_math, "macc": macc, "stripes": any(c["kernel"] == "stripe" for c in calls),
        "row_inputs": sum(1 << k for k in row_fed),
    }


# kernels with an entry taking one pointer per input row (ai_kernels_conv.h `_rowp`): how a
# member reads a split ring's window (passes/stripes.py ROWP_KERNELS, `splittable`)
ROWP_KERNELS = {"depthwise_conv2d_3x3_hwc_s8": "depthwise_conv2d_3x3_hwc_rowp_s8",
                "depthwise_conv2d_3x3_hwc_sgn_s8": "depthwise_conv2d_3x3_hwc_sgn_rowp_s8"}
# kernels with a row-window entry ai_<kernel>_rows(p, ai_row_window, ...) (runtime/include/ai_row_window.h)
ROW_WINDOW_KERNELS = frozenset({
    "conv2d_s8", "conv2d_s8_1col", "depthwise_conv2d_s8", "depthwise_conv2d_3x3_s8",
    "depthwise_conv2d_3x3_sgn_s8", "depthwise_conv2d_3x3_g2_s8", "depthwise_conv2d_3x3_g2_sgn_s8",
    "avgpool_s8", "maxpool_s8"})
# row members with a row entry ai_<kernel>_rows(p, n, ...) (ai_kernels_binary.h): n flat elements
ROW_ENTRY_KERNELS = frozenset({"add_lut_s8", "add_s8", "sub_s8", "mul_s8", "maximum_s8", "minimum_s8"})


def _region_params(m: dict[str, Any]) -> bool:
    """Member m has several wide regions (stripe_widen.py `widen`) and some run other params than
    its own (its executor case picks them from the member's params pointer table)."""
    w = m.get("wide", {})
    return "offsets" in w and any(rp != m["params"] for rp in w["region_params"])


def _stripe_code(i: int, a: dict[str, Any], ins: list[str | None], outs: list[str],
                 scratch: str) -> tuple[str, str]:
    """(static declarations, code block) of stripe node i: the member params, the step table
    and the loop replaying it (docs/stripes.md). Every number comes from the pass's simulation."""
    st = a["params"]["stripe"]
    decls = []
    for j, m in enumerate(st["members"]):
        if not C_IDENT.match(m["kernel"]):
            raise Stm32aiError(f"graph.json node {i}: bad member kernel {m['kernel']!r}")
        init = "{ " + ", ".join(f".{k} = {c_value(v)}" for k, v in m["params"].items()) + " }"
        decls.append(f"static const ai_{m['kernel']}_params k{i}_m{j} = {init};")
        w = m.get("wide", {})
        if _region_params(m):  # several wide regions: e[6] = 1 + region, its params and offset by table
            wk = str(w["kernel"])
            if not C_IDENT.match(wk) or wk != m["kernel"]:  # one params pointer for both kernels
                raise Stm32aiError(f"graph.json node {i}: bad wide kernel of member {j}")
            names: list[str] = []
            seen: dict[str, str] = {}
            for q, rp in enumerate(w["region_params"]):
                winit = "{ " + ", ".join(f".{k} = {c_value(v)}" for k, v in rp.items()) + " }"
                if rp == m["params"] and wk == m["kernel"]:
                    names.append(f"&k{i}_m{j}")
                    continue
                if winit not in seen:  # one struct per distinct params (regions often share theirs)
                    seen[winit] = f"k{i}_m{j}w{q if q else ''}"
                    decls.append(f"static const ai_{wk}_params {seen[winit]} = {winit};")
                names.append(f"&{seen[winit]}")
            decls.append(f"static const ai_{wk}_params *const k{i}_m{j}wp[{len(names)}] = {{{', '.join(names)}}};")
        elif "params" in w:  # its calls with e[6] = 1 run with these params (staged weights)
            winit = "{ " + ", ".join(f".{k} = {c_value(v)}" for k, v in w["params"].items()) + " }"
            decls.append(f"static const ai_{m['kernel']}_params k{i}_m{j}w = {winit};")
    # int8 steps when every row number fits (images < 128 rows): half the flash
    ety = "int8_t" if all(-128 <= int(v) <= 127 for step in st["table"] for v in step) else "int16_t"
    # the steps that only poison dead rows are in the AI_POISON build's table only: without
    # them the executor decodes fewer steps (KWS ram: 542 -> 446, docs/stripes.md session 35)
    work = [step for step in st["table"] if _step_works(st, [int(v) for v in step])]
    if not work:
        raise Stm32aiError(f"graph.json node {i}: a stripe step table with no member call")
    for tag, steps in (("#ifdef AI_POISON", st["table"]), ("#else", work)):
        rows = ",\n".join("    {" + ", ".join(str(int(v)) for v in step) + "}" for step in steps)
        decls += [tag, f"static const {ety} k{i}_steps[{len(steps)}][7] = {{\n{rows}\n}};"]
    decls.append("#endif")
    n_steps = f"(uint32_t)(sizeof(k{i}_steps) / sizeof(k{i}_steps[0]))"

    # joined with its dying input by the planner (passes/stripe_overlap.py): the scratch starts
    # at the input's first byte and the items sit where the joint layout put them
    # or holding its output (a stripe fed in rows, `scratch_with_output`: the output's rows
    # inside the scratch, `joint.y` bytes in, the items where the joint layout put them)
    joint = st.get("joint") if int(a["params"].get("scratch_at_input", 0)) == 1 \
        or int(a["params"].get("scratch_with_output", 0)) == 1 else None
    ring_off = [int(v) for v in joint["ring_offset"]] if joint else [int(r["offset"]) for r in st["rings"]]
    # each member's kernel scratch region (older tables: one shared region)
    m_off = [int(v) for v in joint["scratch_offsets"]] if joint else \
        [int(m.get("scratch_offset", st["member_scratch_offset"])) for m in st["members"]]
    acc_off = int(joint["acc_offset"] if joint else st.get("acc_offset", -1))
    # split rings (passes/stripes.py `splittable`, docs/stripes.md "Split rings"): each row slot
    # where the joint layout put it, its offset from the ring's slot table
    slots = (joint or {}).get("slots") or [None] * len(st["rings"])
    for r, sl in enumerate(slots):
        if sl is not None:
            ty = "uint16_t" if max(int(v) for v in sl) < 65536 else "uint32_t"
            decls.append(f"static const {ty} k{i}_r{r}_slots[{len(sl)}] = {{{', '.join(str(int(v)) for v in sl)}}};")

    def row(ref: dict[str, int] | None, idx: str, rb: int) -> str:
        """The address of row `idx` of operand `ref` (a ring's slot, or a whole tensor's row)."""
        if ref is not None and "ring" in ref and slots[int(ref["ring"])] is not None:
            return f"(sc + k{i}_r{int(ref['ring'])}_slots[{idx}])"
        return f"({buf(ref)} + (uint32_t){idx} * {rb}u)"

    def buf(r: dict[str, int] | None) -> str:
        if r is None:
            return "NULL"
        if "ring" in r:
            return f"(sc + {ring_off[int(r['ring'])]}u)"
        if "out" in r:
            return f"((ai_u8 *){outs[r['out']]})"
        p = ins[r["in"]]
        return "NULL" if p is None else p

    if joint:  # the bytes on the input die with its rows (poisoned then, below)
        nx = int(joint["input_bytes"])
        first_poison = f"  AI_POISON_ROWS(sc + {nx}u, {max(int(joint['scratch']) - nx, 0)}u); /* rings start dead */"
    else:
        first_poison = f"  AI_POISON_ROWS(sc, {int(a['scratch_bytes'])}u); /* rings start dead */"
    lines = ["{", f"  ai_u8 *const sc = (ai_u8 *){scratch};", first_poison,
             f"  for (uint32_t s = 0u; s < {n_steps}; ++s) {{",
             f"    const {ety} *e = k{i}_steps[s];",
             "    switch (e[0]) {"]
    for j, m in enumerate(st["members"]):
        k = m["kernel"]
        lines.append(f"    case {j}: {{ /* {untrusted(str(m['source_op']))} #{int(m['source_index'])} */")
        if m["kind"] == "reduce":  # running sums per band, the rounded mean after the last
            sfx, aty = ("16", "int16_t") if st.get("acc_int16") else ("", "int32_t")  # passes/stripes.py acc16
            acc = f"({aty} *)(void *)(sc + {acc_off}u)"
            src = f"(const int8_t *){row(m['inputs'][0], 'e[5]', int(m['in_row_bytes'][0]))}"
            # e[2]: 2 on the first band (zero the sums: busy from here, passes/stripes.py
            # REDUCE_FIRST), 1 on the last (REDUCE_LAST)
            lines.append(f"      if ((e[2] & 2) != 0) {{ memset(sc + {acc_off}u, 0, {int(st['acc_bytes'])}u); }}")
            lines.append(f"      ai_avgpool_rows_s8_accumulate{sfx}(&k{i}_m{j}, {src}, e[1], {acc});")
            lines.append(f"      if ((e[2] & 1) != 0) {{ ai_avgpool_rows_s8_finish{sfx}(&k{i}_m{j}, {acc}, "
                         f"(int8_t *){buf(m['output'])}); }}")
            lines.append("    } break;")
            continue
        wide = m.get("wide")
        # a window member whose kernels have a row-window entry (ai_row_window.h) is called with
        # its const params and the step's window: no params copy here (docs/stripes.md)
        rows_entry = m["kind"] == "window" and k in ROW_WINDOW_KERNELS and \
            (wide is None or str(wide["kernel"]) in ROW_WINDOW_KERNELS)
        # a row member with a row entry: the const params and the call's element count
        # (the stripe pass admits only same-shape members walked flat: unit strides, no broadcast)
        unit = [0] * (len(m["params"].get("out_shape", [])) - 1) + [1]
        row_entry = m["kind"] == "rows" and k in ROW_ENTRY_KERNELS and wide is None and int(m["scratch"]) == 0 \
            and m["params"].get("in1_strides") == unit and m["params"].get("in2_strides") == unit
        if row_entry:
            pass
        elif rows_entry:
            if _region_params(m):
                lines.append(f"      const ai_{k}_params *q = e[6] != 0 ? k{i}_m{j}wp[e[6] - 1] : &k{i}_m{j};")
            elif "params" in m.get("wide", {}) and "offsets" not in m["wide"]:
                lines.append(f"      const ai_{k}_params *q = e[6] != 0 ? &k{i}_m{j}w : &k{i}_m{j};")
            else:
                lines.append(f"      const ai_{k}_params *q = &k{i}_m{j};")
            lines.append("      const ai_row_window rw = {e[1], e[2], e[3]};")
        elif _region_params(m):
            lines.append(f"      ai_{k}_params q = e[6] != 0 ? *k{i}_m{j}wp[e[6] - 1] : k{i}_m{j};")
        elif "params" in m.get("wide", {}) and "offsets" not in m["wide"]:
            lines.append(f"      ai_{k}_params q = e[6] != 0 ? k{i}_m{j}w : k{i}_m{j};")
        else:
            lines.append(f"      ai_{k}_params q = k{i}_m{j};")
        n_streamed = len(m["in_row_bytes"])
        if rows_entry or row_entry:
            pass
        elif m["kind"] == "window":
            pad = "q.pad_h" if "pad_h" in m["params"] else "q.pad[0]"
            lines.append(f"      q.out_h = e[1]; {pad} = e[2]; q.in_h = e[3];")
        else:
            lines.append(f"      q.out_shape[AI_MAX_DIMS - 1] = (int32_t)e[1] * {int(m['row_bytes'])};")
        args = ["q", "rw"] if rows_entry else \
            [f"&k{i}_m{j}", f"(int32_t)e[1] * {int(m['row_bytes'])}"] if row_entry else ["&q"]
        for q, r in enumerate(m["inputs"]):
            split = q == 0 and r is not None and "ring" in r and slots[int(r["ring"])] is not None
            if split and m["kind"] == "window" and k in ROWP_KERNELS:  # a window of a split ring
                n_rows = max(int(e[3]) for e in st["table"] if int(e[0]) == j)
                lines.append(f"      const int8_t *rp[{n_rows}];")
                at = row(r, "e[5] + t", 0)
                lines.append(f"      for (int32_t t = 0; t < (int32_t)e[3]; ++t) {{ rp[t] = (const int8_t *){at}; }}")
                args.append("rp")
                k = ROWP_KERNELS[k]
            elif split and m["kind"] == "window" and any(int(e[0]) == j and int(e[3]) != 1 for e in st["table"]):
                raise Stm32aiError(f"graph.json node {i}: member {j} reads a split ring's rows as one image")
            elif q < n_streamed:
                args.append(f"(const int8_t *){row(r, f'e[{5 + q}]', int(m['in_row_bytes'][q]))}")
            else:
                args.append(buf(r))
        args.append(f"(int8_t *){row(m['output'], 'e[4]', int(m['row_bytes']))}")
        sfx = "_rows" if rows_entry or row_entry else ""
        if m["scratch"] > 0:
            args.append(f"(void *)(sc + {m_off[j]}u)")
        if wide is not None:  # e[6] = 1: the op's own kernel in its own region (passes/stripe_widen.py `widen`)
            wk = str(wide["kernel"])
            if not C_IDENT.match(wk) or m["kind"] != "window" or n_streamed != 1 or int(m["scratch"]) <= 0:
                raise Stm32aiError(f"graph.json node {i}: bad wide kernel of member {j}")
            if "offsets" in wide:  # several regions: region e[6] - 1's offset from the member's table
                offs = [int(v) for v in joint["wide_regions"][j]] if joint else [int(v) for v in wide["offsets"]]
                oty = "uint16_t" if max(offs) < 65536 else "uint32_t"
                decls.append(f"static const {oty} k{i}_m{j}wo[{len(offs)}] = {{{', '.join(str(v) for v in offs)}}};")
                wargs = args[:-1] + [f"(void *)(sc + k{i}_m{j}wo[e[6] - 1])"]
            else:
                w_off = int(joint["wide_offsets"][j]) if joint else int(wide["scratch_offset"])
                wargs = args[:-1] + [f"(void *)(sc + {w_off}u)"]
            lines.append(f"      if (e[6] != 0) {{ ai_{wk}{sfx}({', '.join(wargs)}); }}")
            lines.append(f"      else {{ ai_{k}{sfx}({', '.join(args)}); }}")
        else:
            lines.append(f"      ai_{k}{sfx}({', '.join(args)});")
        lines.append("    } break;")
    for q, src in enumerate(st.get("sources", ())):  # --input-rows: the application's rows
        off, rb = ring_off[int(src["ring"])], int(st["rings"][int(src["ring"])]["row_bytes"])
        lines.append(f"    case {len(st['members']) + q}: /* rows [e[5], e[5] + e[1]) of input {int(src['input'])} */")
        lines.append(f"      if (ctx->row_source == NULL || ctx->row_source(ctx->row_user, {int(src['input'])}, e[5], "
                     f"e[1], sc + {off}u + (uint32_t)e[4] * {rb}u) != AI_OK) {{")
        lines.append("        return AI_ERR_ROW_SOURCE;")
        lines.append("      }")
        lines.append("      break;")
    dead = st.get("input_rows_dead")
    if dead is not None:  # rows of the whole input past their last read (contract 1b)
        rb = int(dead["row_bytes"])
        x = f"(ai_u8 *){buf({'in': int(dead['input'])})}"
        lines.append(f"    case {len(st['members']) + len(st.get('sources', ()))}: /* input rows [e[5], +e[1]) dead */")
        lines.append(f"      AI_POISON_ROWS({x} + (uint32_t)e[5] * {rb}u, (uint32_t)e[1] * {rb}u);")
        lines.append("      break;")
    for r, ring in enumerate(st["rings"]):
        off, rb = ring_off[r], int(ring["row_bytes"])
        if slots[r] is not None:  # a split ring: the same steps, row by row through its slot table
            lines += _split_drop(i, r, rb, ring.get("mode", "low") == "high")
            continue
        if ring.get("mode", "low") == "high":  # passes/stripes.py `_physical`: e[3] 1 drop, 2 move down
            lines.append(f"    case {-1 - r}: /* ring {r} (high): drop e[1] rows at slot e[4], or move "
                         "the e[2] live rows from slot e[5] down to e[4] */")
            lines.append("      if (e[3] == 3) { break; } /* DROP_KEEP: a row written in place is there */")
            lines.append("      if (e[3] == 2) {")
            lines.append(f"        ai_rows_move(sc + {off}u + (uint32_t)e[4] * {rb}u, "
                         f"sc + {off}u + (uint32_t)e[5] * {rb}u, (uint32_t)e[2] * {rb}u);")
            lines.append(f"        AI_POISON_ROWS(sc + {off}u + (uint32_t)(e[4] + e[2]) * {rb}u, "
                         f"(uint32_t)e[1] * {rb}u);")
            lines.append("      } else {")
            lines.append(f"        AI_POISON_ROWS(sc + {off}u + (uint32_t)e[4] * {rb}u, (uint32_t)e[1] * {rb}u);")
            lines.append("      }")
            lines.append("      break;")
            continue
        lines.append(f"    case {-1 - r}: /* drop e[1] of the e[2] live rows of ring {r} */")
        lines.append("      if (e[3] == 3) { break; } /* DROP_KEEP (every live row: nothing moves) */")
        # ai_rows_move: word copies (newlib-nano's memmove copies bytes; docs/stripes.md, fill36)
        lines.append(f"      ai_rows_move(sc + {off}u, sc + {off}u + (uint32_t)e[1] * {rb}u, "
                     f"(uint32_t)(e[2] - e[1]) * {rb}u);")
        lines.append(f"      AI_POISON_ROWS(sc + {off}u + (uint32_t)(e[2] - e[1]) * {rb}u, (uint32_t)e[1] * {rb}u);")
        lines.append("      break;")
    lines += ["    default: break;", "    }", "  }", "}"]
    return "\n".join(decls), "\n  ".join(lines)


def _split_drop(i: int, r: int, rb: int, high: bool) -> list[str]:
    """A split ring's drop / move step (`_stripe_code`): the contiguous ring's memmove and poison
    row by row, slot `x` at `sc + k<i>_r<r>_slots[x]`. The rows moved go to lower slots in
    increasing order (a slot is read before it is written), and the slots busy at one step never
    share bytes (passes/stripes.py `_physical`), so memcpy per row is the memmove."""
    s = f"k{i}_r{r}_slots"
    cp = f"memcpy(sc + {s}[t], sc + {s}[t + e[1]], {rb}u);"
    pz = f"AI_POISON_ROWS(sc + {s}[t], {rb}u);"
    out = [f"    case {-1 - r}: /* ring {r} (split, {'high' if high else 'low'}) */",
           "      if (e[3] == 3) { break; } /* DROP_KEEP: a row written in place is there */"]
    if high:
        out += ["      if (e[3] == 2) { /* the e[2] live rows from slot e[5] down to e[4] = e[5] - e[1] */",
                f"        for (int32_t t = e[4]; t < e[4] + e[2]; ++t) {{ {cp} }}",
                f"        for (int32_t t = e[4] + e[2]; t < e[5] + e[2]; ++t) {{ {pz} }}",
                "      } else { /* drop e[1] rows at slot e[4] */",
                f"        for (int32_t t = e[4]; t < e[4] + e[1]; ++t) {{ {pz} }}",
                "      }"]
    else:
        out += [f"      for (int32_t t = 0; t < e[2] - e[1]; ++t) {{ {cp} }}",
                f"      for (int32_t t = e[2] - e[1]; t < e[2]; ++t) {{ {pz} }}"]
    return out + ["      break;"]


def _step_works(st: dict[str, Any], e: list[int]) -> bool:
    """Whether step `e` of a stripe's table does anything in a build without AI_POISON (the
    executor in `_stripe_code`): member calls and row sources do; input-dead steps, DROP_KEEP
    (e[3] == 3), drops that move no row only poison."""
    n_members, n_sources = len(st["members"]), len(st.get("sources", ()))
    if e[0] >= 0:
        return e[0] < n_members + n_sources
    ring = st["rings"][-1 - e[0]]
    if e[3] == 3:
        return False
    if ring.get("mode", "low") == "high":
        return e[3] == 2 and e[2] > 0   # a move down of e[2] live rows; a drop only poisons
    return e[2] - e[1] > 0              # the memmove of the rows kept


def _state_area(doc: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[int, int], int]:
    """Persistent (variable) tensors live in the instance's state area, not in an activation
    pool, so that a pool shared with other models cannot overwrite them: the planner gives each
    storage of pool "state" an 8-aligned slot. Returns the tensors to fill at ai_create/ai_reset
    (offsets in the state area), the state offset of each storage id and the area's size."""
    attrs, nodes, row = doc["attrs"], doc["nodes"], doc["node_row_ptr"]
    dltype, shapes, sids = attrs["dltype"][1], attrs["shape"][1], attrs["storage_id"][1]
    tnames = attrs["tensor_name"][1]
    storage = doc["stm32ai"]["storage"]
    states: list[dict[str, Any]] = []
    offset: dict[int, int] = {}
    size = 0
    for n in doc["arg_nodes"]:
        na = nodes[n].get("attrs", {})
        if not na.get("variable"):
            continue
        e = row[n]
        sid = sids[e]
        st = storage[sid]
        if st["pool"] != "state":
            raise Stm32aiError(f"graph.json: state tensor {quote(tnames[e])} is not in the state area")
        if sid not in offset:
            offset[sid] = int(st["offset"])
            size = max(size, (int(st["offset"]) + int(st["size"]) + 7) // 8 * 8)
        nbytes = int(np.prod(shapes[e], dtype=np.int64)) * DTYPE_CODES[dltype[e]][1] // 8
        states.append({"offset": offset[sid], "size": nbytes, "fill": int(na.get("fill", 0)),
                       "tensor_name": untrusted(tnames[e])})
    return states, offset, size


def _pools_context(doc: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The activation pools: pool 0 is `<name>_activations` in `.nn_activations` (as a single-pool
    model's); pool k > 0 is `<name>_activations_<k>` in `.nn_activations_<region>`."""
    pools = []
    for k, p in enumerate(activation_pools(doc)):
        region = str(p.get("region", ""))
        if region and not C_IDENT.match(region):
            raise Stm32aiError(f"graph.json: activation pool {k} has a bad region name {quote(region)}")
        if k > 0 and not region:
            raise Stm32aiError(f"graph.json: activation pool {k} has no region")
        pools.append({"index": k, "pool": p["name"], "size": int(p["size"]), "align": int(p["align"]),
                      "region": region, "var": "act" if k == 0 else f"act{k}",
                      "sym": f"{name}_activations" if k == 0 else f"{name}_activations_{k}",
                      "section": ".nn_activations" if k == 0 else f".nn_activations_{region}",
                      "array_size": max(int(p["size"]), 8)})
    if not pools:
        raise Stm32aiError("graph.json has no activation pool")
    return pools


def _env() -> jinja2.Environment:
    return configure(jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
        trim_blocks=False, lstrip_blocks=False,
    ))


# Sections of the weights array and built-in pool 0. NAMED: stm32ai's own linker script places
# them (docs/project.md). STOCK: names a stock GCC/ST linker script already catches with its
# `*(.rodata*)` / `*(.bss*)` patterns (flash; zero-initialised RAM, no load image): the default of
# `generate --into`, which must not need a linker-script edit (docs/into.md).
NAMED_SECTIONS = (".nn_weights", ".nn_activations")
STOCK_SECTIONS = (".rodata.nn_weights", ".bss.nn_activations")


def emit_model(doc: dict[str, Any], params: dict[str, np.ndarray], name: str,
               builtin_pool: bool = True, sections: tuple[str, str] = NAMED_SECTIONS,
               input_normalization: Normalization | None = None) -> dict[str, str]:
    """The four model files, as {file name: text}. `builtin_pool=False` emits no activation
    array: the application passes one to ai_create (a pool shared by several models).
    `sections`: (weights, activation pool 0) section names, NAMED_SECTIONS or STOCK_SECTIONS.
    `input_normalization`: the (offset, scale) pairs of `<name>_input_from_u8` (io_helpers.py)."""
    if sections not in (NAMED_SECTIONS, STOCK_SECTIONS):
        raise ValueError(f"unknown sections {sections!r}")
    ctx = build_context(doc, params, name)
    ctx.update(io_context(ctx["inputs"], ctx["outputs"], input_normalization, c_value))
    ctx["builtin_pool"] = builtin_pool
    ctx["weights_section"], ctx["activations_section"] = sections
    env = _env()
    return {
        f"{name}.h": env.get_template("model.h.j2").render(ctx),
        f"{name}.c": env.get_template("model.c.j2").render(ctx),
        f"{name}_data.h": env.get_template("model_data.h.j2").render(ctx),
        f"{name}_data.c": env.get_template("model_data.c.j2").render(ctx),
    }


def copy_runtime(dest: Path) -> None:
    """The runtime and kernel library: dest/runtime/include/*.h, dest/runtime/src/*.c."""
    src = runtime_dir()
    for sub in ("include", "src"):
        (dest / "runtime" / sub).mkdir(parents=True, exist_ok=True)
        for f in sorted((src / sub).iterdir()):
            if f.suffix in (".h", ".c"):
                shutil.copy2(f, dest / "runtime" / sub / f.name)


def emit_c(doc: dict[str, Any], params: dict[str, np.ndarray], name: str, dest: Path,
           with_runtime: bool = True, builtin_pool: bool = True,
           sections: tuple[str, str] = NAMED_SECTIONS, input_normalization: Normalization | None = None) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for fname, text in emit_model(doc, params, name, builtin_pool, sections, input_normalization).items():
        (dest / fname).write_text(text)
        written.append(dest / fname)
    if with_runtime:
        copy_runtime(dest)
    return written
