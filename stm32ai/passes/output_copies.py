"""Give every graph output storage of its own where the model does not compute it.

Legal TFLite graphs may list as an output a constant (an SSD model's anchors/priors), a
graph input passed straight through, or one tensor at two output positions. The planner
and the emitter bind each output position to one buffer the model writes; these outputs
have none (a constant lives in flash, an input is the application's), or share it. So for
each such position this pass adds a copy op (a RESHAPE marked `output_copy`, lowered to
the `copy` kernel, docs/graph_json.md "Outputs") into a fresh tensor that replaces it:

* a constant: copied from the weights into the output buffer on every `ai_run` (the output
  buffer belongs to the pool or to the application, either may be overwritten between runs);
* a graph input, or a zero-copy alias (RESHAPE chain) of one: copied, so the output holds the
  input's values however the application's input and output buffers are laid out;
* an output whose storage an earlier output already uses (the same tensor twice, or a RESHAPE
  alias of it): copied only when the application owns the outputs (`--no-outputs-allocation`:
  it passes one buffer per position, each must be written); in the pool both positions
  simply point at the same bytes.

Runs after dead-channel elimination (it needs every op's final type), before lowering.
"""

from __future__ import annotations

from stm32ai.ir import Graph, Op

__all__ = ["add_output_copies", "OUTPUT_COPY"]

OUTPUT_COPY = "output_copy"  # RESHAPE option: always a byte copy (passes/lower/reshape.py)


def _alias_root(g: Graph, tid: int, producer: dict[int, Op]) -> int:
    """The tensor whose storage `tid` shares through zero-copy RESHAPEs (itself if none)."""
    seen = set()
    while tid in producer and tid not in seen:
        seen.add(tid)
        op = producer[tid]
        src = op.inputs[0] if op.inputs else -1
        if op.type != "RESHAPE" or src < 0 or g.tensors[src].is_const or op.options.get(OUTPUT_COPY):
            break
        if src in g.inputs and tid in g.outputs:
            break  # lowered to a copy already (passes/lower/reshape.py)
        tid = src
    return tid


def add_output_copies(g: Graph, outputs_in_pool: bool = True) -> int:
    """Rewrite g's outputs as described above; returns the number of copies added."""
    producer = {t: op for op in g.ops for t in op.outputs}
    input_roots = {_alias_root(g, t, producer) for t in g.inputs}
    seen: set[int] = set()
    added = 0
    for k, tid in enumerate(list(g.outputs)):
        t = g.tensors[tid]
        root = _alias_root(g, tid, producer)
        shared = root in seen
        seen.add(root)
        if not (t.is_const or root in input_roots or (shared and not outputs_in_pool)):
            continue
        new = g.add_tensor(t.name, t.shape, t.dtype, t.quant)
        g.ops.append(Op(type="RESHAPE", inputs=[tid], outputs=[new],
                        options={"new_shape": list(t.shape), OUTPUT_COPY: True}, index=-1))
        g.outputs[k] = new
        added += 1
    return added
