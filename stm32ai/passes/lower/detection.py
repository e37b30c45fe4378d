"""TFLite_Detection_PostProcess (the SSD tail: box decoding + non-max suppression) ->
ai_detection_postprocess_f32 (docs/kernels_detection.md).

A custom op whose flexbuffer options (decoded by the frontend into ``op.options["custom"]``)
are the fields TFLite Micro's kernel reads (kernels/detection_postprocess.cc): max_detections,
max_classes_per_detection, detections_per_class (default 100), use_regular_nms (default
false), nms_score_threshold, nms_iou_threshold, num_classes and the y/x/h/w scales.
Inputs: box encodings [1, boxes, >= 4], class scores [1, boxes, classes (+1 background)],
anchors [boxes, 4] (y, x, h, w); outputs: boxes [1, n, 4], classes [1, n], scores [1, n],
num_detections [1], all float32. TFLite Micro's kernel takes float32 inputs only.

Everything TFLite Micro would check at run time, or not at all (the anchors' and outputs'
sizes: it reads and writes past them), is checked here; the scratch the kernel needs is
computed here too (its layout: ai_kernels_detection.h).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower import register

OP = "CUSTOM:TFLite_Detection_PostProcess"
MAX_BOXES = 1 << 20  # keeps every scratch offset and index product far inside int32


def _opts(op: Op) -> dict[str, Any] | str:
    c = op.options.get("custom")
    if not isinstance(c, dict):
        return "its custom options are missing or not a flexbuffer map"
    out: dict[str, Any] = {}
    for k in ("max_detections", "max_classes_per_detection", "num_classes"):
        v = c.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            return f"option {k} is missing or not an integer"
        out[k] = int(v)
    dpc = c.get("detections_per_class", 100)
    if isinstance(dpc, bool) or not isinstance(dpc, (int, np.integer)):
        return "option detections_per_class is not an integer"
    out["detections_per_class"] = int(dpc)
    reg = c.get("use_regular_nms", False)
    if not isinstance(reg, (bool, int, np.integer)):
        return "option use_regular_nms is not a boolean"
    out["regular"] = bool(reg)
    for k in ("nms_score_threshold", "nms_iou_threshold", "y_scale", "x_scale", "h_scale", "w_scale"):
        v = c.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            return f"option {k} is missing or not a number"
        f = float(np.float32(v))  # TFLite Micro reads them with AsFloat()
        if not math.isfinite(f):
            return f"option {k} = {v} is not finite"
        out[k] = f
    return out


def _check(op: Op, g: Graph) -> str | None:
    if len(op.inputs) != 3 or min(op.inputs) < 0 or len(op.outputs) != 4 or min(op.outputs) < 0:
        return "expects 3 inputs (box encodings, class scores, anchors) and 4 outputs"
    o = _opts(op)
    if isinstance(o, str):
        return o
    box, cls, anc = (g.tensors[t] for t in op.inputs)
    outs = [g.tensors[t] for t in op.outputs]
    for t in (box, cls, anc, *outs):
        if t.dtype != "float32":
            return (f"tensor '{t.name}' is {t.dtype}; TFLite Micro's kernel takes and gives float32 only "
                    "(dequantize the box encodings and scores before it)")
    if len(box.shape) != 3 or box.shape[0] != 1 or box.shape[2] < 4:
        return f"box encodings {list(box.shape)}: [1, boxes, >= 4] expected"
    n = int(box.shape[1])
    if not 0 < n <= MAX_BOXES:
        return f"{n} boxes: 1 to {MAX_BOXES} are supported"
    nc = o["num_classes"]
    if len(cls.shape) != 3 or cls.shape[0] != 1 or cls.shape[1] != n or cls.shape[2] - nc not in (0, 1):
        return f"class scores {list(cls.shape)}: [1, {n}, {nc} or {nc + 1}] expected (num_classes = {nc})"
    if nc <= 0:
        return f"num_classes = {nc} must be positive"
    if list(anc.shape) != [n, 4]:
        return f"anchors {list(anc.shape)}: [{n}, 4] expected"
    if anc.is_const and np.any(~(np.asarray(anc.data)[:, 2:] > 0)):
        return "anchors with a height or width <= 0 make invalid boxes (TFLite Micro fails the inference)"
    if not 0.0 < o["nms_iou_threshold"] <= 1.0:
        return f"nms_iou_threshold = {o['nms_iou_threshold']} is outside (0, 1]"
    if min(o["y_scale"], o["x_scale"], o["h_scale"], o["w_scale"]) == 0.0:
        return "a zero y/x/h/w scale divides by zero"
    md = o["max_detections"]
    if not 0 <= md <= MAX_BOXES:
        return f"max_detections = {md} is outside 0..{MAX_BOXES}"
    if o["regular"]:
        if not 0 < o["detections_per_class"] <= MAX_BOXES:
            return f"detections_per_class = {o['detections_per_class']} must be positive (regular NMS)"
        per = 1
    else:
        if o["max_classes_per_detection"] <= 0:
            return f"max_classes_per_detection = {o['max_classes_per_detection']} must be positive (fast NMS)"
        per = min(o["max_classes_per_detection"], nc)
        if per != 1:
            return (f"fast NMS with {per} classes per detection: TFLite Micro writes such detections at "
                    "offsets past its outputs; max_classes_per_detection = 1 (or one class) is supported")
    cap = md * per
    ob, oc, osc, on = outs
    if ob.size < 4 * cap or oc.size < cap or osc.size < cap or on.size < 1:
        return (f"outputs {[list(t.shape) for t in outs]} cannot hold {cap} detections "
                "(TFLite Micro would write past them)")
    return None


def scratch_size(n: int, md: int, per_class: int, regular: bool) -> int:
    """Bytes of ai_detection_postprocess_f32's scratch (layout: ai_kernels_detection.h)."""
    s = min(n, per_class)
    m = md + s if regular else 0
    words = 8 * n + max(n, m) + s + 4 * m
    return 4 * words + n


@register(OP, "TFLite_Detection_PostProcess (SSD box decoding + NMS, TFLite Micro's): float32 inputs "
          "and outputs, regular or fast NMS, background class optional; anchors [boxes, 4]", _check)
def lower_detection(op: Op, g: Graph) -> None:
    o = _opts(op)
    assert not isinstance(o, str), o
    box, cls = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]]
    outs = [g.tensors[t] for t in op.outputs]
    n, nc = int(box.shape[1]), o["num_classes"]
    md = o["max_detections"]
    per_class = o["detections_per_class"] if o["regular"] else md
    op.kernel = "detection_postprocess_f32"
    op.attrs = {
        "num_boxes": n, "box_stride": int(box.shape[2]), "num_classes": nc,
        "label_offset": int(cls.shape[2]) - nc, "max_detections": md,
        "per_class": per_class, "regular": int(o["regular"]),
        "box_elems": int(outs[0].size), "class_elems": int(outs[1].size), "score_elems": int(outs[2].size),
        "score_threshold": o["nms_score_threshold"], "iou_threshold": o["nms_iou_threshold"],
        "y_scale": o["y_scale"], "x_scale": o["x_scale"], "h_scale": o["h_scale"], "w_scale": o["w_scale"],
    }
    op.scratch = scratch_size(n, md, per_class, o["regular"])
    op.macc = n * (int(cls.shape[2]) + 8)
