"""Weights staged in the input's dead rows (`stage_gap`, ai_conv2d_s8; docs/stripes.md session 37).

A conv2d_s8 left unstaged with int8 weights (no room at its step: VWW's first layer in
`--optimization ram` sets the pool's peak) reads its weights and rq from flash once per pixel
pair. When it is the only reader of its input, the input rows its later windows no longer read
are dead while it runs: the kernel (`stage_gap` = 1) copies the weights and rq there, chunk of
output rows by chunk, just below the first input byte the chunk still reads and above every
output byte written up to the chunk's end (both from the call's own pointers, whatever the
planner's placement); rows with no such room run unstaged. No byte of the pool is added.
"""

from __future__ import annotations

from stm32ai.ir import Graph
from stm32ai.passes.staging import FlashModel, _kp
from stm32ai.planner import Plan

MIN_OUT_W = 16


def _alone(g: Graph, plan: Plan, i: int, x: int, y: int) -> bool:
    """True when every other tensor of x's buffer is dead before op i runs or made after it: the
    bytes of x are x's alone while op i runs (no view of them read later, no graph output)."""
    pos = {op: k for k, op in enumerate(plan.order)}
    here = pos[i]
    b = plan.tensor_buffer.get(x)
    if b is None or x in plan.app_owned:
        return False
    for t, bt in plan.tensor_buffer.items():
        if bt != b or t in (x, y):
            continue
        made = [pos[k] for k, op in enumerate(g.ops) if t in op.outputs and k in pos]
        if made and min(made) > here:
            continue
        if t in g.outputs or any(pos.get(k, -1) >= here for k, op in enumerate(g.ops) if t in op.inputs):
            return False
    return True


def mark_gap_staging(g: Graph, plan: Plan, flash: FlashModel | None) -> list[int]:
    """Set `stage_gap` = 1 on the conv2d_s8 ops that may stage in their input's dead rows and
    whose pass over the channels outgrows the flash's data cache. Returns their indices."""
    if flash is None or flash.wait_states <= 0:
        return []
    outs = set(g.outputs)
    marked = []
    for i, op in enumerate(g.ops):
        a = op.attrs
        if op.kernel != "conv2d_s8" or int(a.get("stage_oc", 0)) != 0 or int(a.get("w16", 0)) \
                or int(a.get("batches", 1)) != 1 or int(a.get("pad_copy", 0)) or int(a.get("reverse", 0)):
            continue
        x = op.inputs[0]
        if x is None or g.tensors[x].is_const or x in outs or len(g.consumers(x)) != 1 \
                or (x in g.inputs and g.input_rows) or not _alone(g, plan, i, x, op.outputs[0]):
            continue
        if int(a["out_c"]) * (_kp(a) + 16) <= flash.cache_bytes:
            continue
        # a chunk is a kernel call and a copy of the weights: with fewer than 8 pixel pairs per
        # output row they do not pay (VWW --input-rows: layers 10-14, 12 and 6 wide, took it and
        # lost 57 K est. cycles on nucleo-l4r5zi; its first layer is 48 wide)
        if int(a["out_w"]) < MIN_OUT_W:
            continue
        a["stage_gap"] = 1
        marked.append(i)
    return marked
