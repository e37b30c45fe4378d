"""Geometry of CONV_2D / DEPTHWISE_CONV_2D: output size, TFLite's padding, and the
`ConvGeometry` every convolution lowering (conv.py, dwconv3x3.py, s16.py) works from.

Its own module so that conv.py and dwconv3x3.py both import it and not each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from stm32ai.ir import Graph, Op

__all__ = ["PADDINGS", "ConvGeometry", "conv_geometry", "out_size", "same_padding"]

PADDINGS = ("SAME", "VALID")


# ---- geometry ------------------------------------------------------------------------------

def out_size(padding: str, in_size: int, k: int, stride: int, dil: int) -> int:
    """TFLite's ComputeOutSize."""
    eff = (k - 1) * dil + 1
    if padding == "SAME":
        return (in_size + stride - 1) // stride
    return (in_size - eff + stride) // stride


def same_padding(in_size: int, out: int, k: int, stride: int, dil: int) -> int:
    """Top/left padding (TFLite's ComputePaddingHeightWidth; the odd pixel goes bottom/right).

    Also right for VALID, where the total is never positive.
    """
    eff = (k - 1) * dil + 1
    total = max((out - 1) * stride + eff - in_size, 0)
    return total // 2


@dataclass
class ConvGeometry:
    batches: int
    in_h: int
    in_w: int
    in_c: int
    out_h: int
    out_w: int
    out_c: int
    k_h: int
    k_w: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int]

    def attrs(self) -> dict[str, object]:
        return {
            "batches": self.batches, "in_h": self.in_h, "in_w": self.in_w, "in_c": self.in_c,
            "out_h": self.out_h, "out_w": self.out_w, "out_c": self.out_c,
            "k_h": self.k_h, "k_w": self.k_w, "stride": list(self.stride),
            "dilation": list(self.dilation), "pad": list(self.pad),
        }


def _opt_int(op: Op, key: str, default: int = 1) -> int:
    v = op.options.get(key, default)
    return default if v is None else int(v)


def conv_geometry(op: Op, g: Graph) -> ConvGeometry | str:
    """The convolution's geometry, or the reason it is not supported."""
    depthwise = op.type == "DEPTHWISE_CONV_2D"
    x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
    for t, what in ((x, "input"), (w, "filter"), (y, "output")):
        if len(t.shape) != 4:
            return f"{what} '{t.name}' has shape {list(t.shape)}; a 4-D NHWC tensor is expected"
    n, ih, iw, ic = x.shape
    on, oh, ow, oc = y.shape
    if depthwise:
        one, kh, kw, woc = w.shape
        if one != 1:
            return f"filter '{w.name}' has shape {list(w.shape)}; [1, kh, kw, channels] is expected"
    else:
        woc, kh, kw, wic = w.shape
        if wic != ic:
            return (f"grouped convolution (filter '{w.name}' has {wic} input channels, the input "
                    f"has {ic}) is not supported")
    if woc != oc:
        return f"filter '{w.name}' has {woc} output channels, output '{y.name}' has {oc}"
    if depthwise and (ic <= 0 or oc % ic != 0):
        return f"output channels {oc} are not a multiple of the input channels {ic}"
    if min(n, ih, iw, ic, oh, ow, oc, kh, kw) <= 0:
        return "empty tensor"
    if on != n:
        return f"output batch {on} differs from input batch {n}"
    padding = op.options.get("padding", "SAME")
    if padding not in PADDINGS:
        return f"padding {padding} is not supported (SAME or VALID)"
    sh, sw = _opt_int(op, "stride_h"), _opt_int(op, "stride_w")
    dh, dw = _opt_int(op, "dilation_h_factor"), _opt_int(op, "dilation_w_factor")
    if min(sh, sw, dh, dw) < 1:
        return f"stride ({sh}, {sw}) and dilation ({dh}, {dw}) must be >= 1"
    eh, ew = out_size(padding, ih, kh, sh, dh), out_size(padding, iw, kw, sw, dw)
    if (eh, ew) != (oh, ow):
        return (f"output '{y.name}' is {oh}x{ow} but {padding} padding with this filter, stride "
                f"and dilation gives {eh}x{ew} — the model is inconsistent")
    return ConvGeometry(n, ih, iw, ic, oh, ow, oc, kh, kw, (sh, sw), (dh, dw),
                        (same_padding(ih, oh, kh, sh, dh), same_padding(iw, ow, kw, sw, dw)))
