"""SPACE_TO_BATCH_ND -> CONV_2D/DEPTHWISE_CONV_2D -> BATCH_TO_SPACE_ND => one dilated convolution.

The TFLite converter expresses a dilated convolution this way. The triple equals a
stride-1 convolution with dilation = block size on the original input, padded by the
SPACE_TO_BATCH paddings and cropped by the BATCH_TO_SPACE crops; we rewrite it when that
padding is exactly SAME or VALID padding of the dilated convolution.
"""

from __future__ import annotations

from stm32ai.ir import Graph, Op

_CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D")


def fused_op_types() -> dict[str, str]:
    """Op types this pass removes, with how (for `stm32ai supported-ops`)."""
    how = ("SPACE_TO_BATCH_ND -> CONV_2D/DEPTHWISE_CONV_2D -> BATCH_TO_SPACE_ND: fused into one "
           "dilated convolution when the paddings/crops are its SAME or VALID padding")
    return {"SPACE_TO_BATCH_ND": how, "BATCH_TO_SPACE_ND": how}


def _same_pads(in_size: int, out_size: int, k: int, dil: int) -> tuple[int, int]:
    total = max((out_size - 1) + (k - 1) * dil + 1 - in_size, 0)
    return total // 2, total - total // 2


def _only_consumer(g: Graph, tid: int) -> Op | None:
    users = g.consumers(tid)
    return users[0] if len(users) == 1 and tid not in g.outputs else None


def _well_formed(g: Graph, s2b: Op, conv: Op, b2s: Op) -> bool:
    """Operand counts and ranks the rewrite relies on; anything else stays unfused (and is
    then refused by the support check with a reason, not an IndexError here)."""
    if len(s2b.inputs) < 3 or len(b2s.inputs) < 3 or len(conv.inputs) < 2 or not b2s.outputs:
        return False
    ids = [*s2b.inputs[:3], *b2s.inputs[:3], conv.inputs[1], b2s.outputs[0]]
    if any(t < 0 for t in ids):
        return False
    x, y, filt = g.tensors[s2b.inputs[0]], g.tensors[b2s.outputs[0]], g.tensors[conv.inputs[1]]
    sizes = [g.tensors[t].size for t in (s2b.inputs[2], b2s.inputs[2])]
    return len(x.shape) == len(y.shape) == len(filt.shape) == 4 and sizes == [4, 4]


def fuse_dilated_convs(g: Graph) -> Graph:
    for s2b in [op for op in g.ops if op.type == "SPACE_TO_BATCH_ND"]:
        conv = _only_consumer(g, s2b.outputs[0])
        if conv is None or conv.type not in _CONVS:
            continue
        b2s = _only_consumer(g, conv.outputs[0])
        if b2s is None or b2s.type != "BATCH_TO_SPACE_ND" or not _well_formed(g, s2b, conv, b2s):
            continue
        block_t, pads_t = g.tensors[s2b.inputs[1]], g.tensors[s2b.inputs[2]]
        block2_t, crops_t = g.tensors[b2s.inputs[1]], g.tensors[b2s.inputs[2]]
        if not all(t.is_const for t in (block_t, pads_t, block2_t, crops_t)):
            continue
        block = [int(v) for v in block_t.data.ravel()]
        if block != [int(v) for v in block2_t.data.ravel()] or len(block) != 2:
            continue
        x, y = g.tensors[s2b.inputs[0]], g.tensors[b2s.outputs[0]]
        if x.dtype == "float32" and g.tensors[conv.inputs[1]].dtype == "int8":
            # hybrid: LiteRT quantises each of the block^2 batches SPACE_TO_BATCH makes with its
            # own scale; one fused convolution would quantise the whole input once
            continue
        o = conv.options
        if x.shape[0] != 1 or o.get("stride_h", 1) != 1 or o.get("stride_w", 1) != 1:
            continue
        if o.get("dilation_h_factor", 1) != 1 or o.get("dilation_w_factor", 1) != 1:
            continue
        if o.get("padding") != "VALID":
            continue
        pads = pads_t.data.reshape(2, 2).astype(int)
        crops = crops_t.data.reshape(2, 2).astype(int)
        filt = g.tensors[conv.inputs[1]]
        kh, kw = filt.shape[1], filt.shape[2]
        eff = [(pads[i][0] - crops[i][0], pads[i][1] - crops[i][1]) for i in range(2)]
        # padding of the rewritten conv: (before, after) per spatial dim
        same = [_same_pads(x.shape[1 + i], y.shape[1 + i], (kh, kw)[i], block[i]) for i in range(2)]
        k = (kh, kw)
        valid = all(e == (0, 0) and x.shape[1 + i] - (k[i] - 1) * block[i] == y.shape[1 + i]
                    for i, e in enumerate(eff))
        padding = "VALID" if valid else "SAME" if [tuple(e) for e in eff] == same else ""
        if not padding:
            continue
        conv.inputs[0] = s2b.inputs[0]
        conv.outputs = list(b2s.outputs)
        conv.options = dict(o, padding=padding, dilation_h_factor=block[0], dilation_w_factor=block[1])
        # int8 padding is the zero point (the real value 0), TFLite's SPACE_TO_BATCH_ND and
        # LiteRT-ref's; TFLite Micro pads with raw 0 and is not the verdict for such models
        # (validate.reference.tflm_known_wrong, docs/references.md).
        g.ops = [op for op in g.ops if op is not s2b and op is not b2s]
    return g
