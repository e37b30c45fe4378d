"""The generated I/O helpers' context: `<name>_input_from_float`, `<name>_output_to_float`,
`<name>_input_from_u8` (docs/project.md, "I/O helpers").

Arithmetic is TFLite's (reference_ops::AffineQuantize / Dequantize, which TFLite Micro runs):
    QUANTIZE    q = clamp(round_half_away(x / scale) + zero_point)   (x / scale in float32)
    DEQUANTIZE  x = (float)(scale * (q - zero_point))                (exact product, one rounding:
                                                                      the float32 product is the same)
`input_from_u8` applies the generate-time normalisation real = ((float)u - offset) * scale
(float32, per channel = last dimension) and then QUANTIZE; for a quantised input all of that is a
table of 256 entries per channel computed here with numpy float32 (the same operations), so the
device does one load per byte.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stm32ai.errors import Stm32aiError

__all__ = ["Normalization", "io_context", "parse_normalization", "quantize_like_tflite"]

Normalization = list[tuple[float, float]]   # (offset, scale) per channel, or one for all
_CTYPES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "float32": "float"}
_BY_CODE = {(0, 8): "int8", (1, 8): "uint8", (0, 16): "int16", (2, 32): "float32"}


def parse_normalization(text: str) -> Normalization:
    """`OFFSET:SCALE[,OFFSET:SCALE...]` (one pair for every channel, or one per channel)."""
    out = []
    for part in text.split(","):
        try:
            off, scale = (float(v) for v in part.split(":"))
        except ValueError:
            raise Stm32aiError(f"--input-normalization {text!r}: give OFFSET:SCALE, or one per channel separated "
                               "by commas (real = (u8 - OFFSET) * SCALE), e.g. 127.5:0.0078125") from None
        if not (np.isfinite(off) and np.isfinite(scale)) or scale == 0:
            raise Stm32aiError(f"--input-normalization {text!r}: offsets and scales must be finite, scales non-zero")
        out.append((off, scale))
    return out


def quantize_like_tflite(x: np.ndarray, scale: float, zero_point: int, dtype: str) -> np.ndarray:
    """TFLite's AffineQuantize of float32 values (the generator's tables; tests check it against
    the references' QUANTIZE)."""
    info = np.iinfo(dtype)
    t = np.asarray(x, dtype=np.float32) / np.float32(scale)
    r = np.where(np.isnan(t), 0, np.sign(t) * np.floor(np.abs(t) + np.float64(0.5)))  # half away from 0
    return np.clip(r + zero_point, info.min, info.max).astype(dtype)


def _u8_table(norm: Normalization, channels: int, scale: float, zp: int, dtype: str) -> list[int]:
    pairs = norm if len(norm) == channels else norm * channels
    u = np.arange(256, dtype=np.float32)
    rows = [quantize_like_tflite((u - np.float32(off)) * np.float32(s), scale, zp, dtype) for off, s in pairs]
    return [int(v) for v in np.stack(rows, axis=1).reshape(-1)]  # [u][channel]


def io_context(inputs: list[dict[str, Any]], outputs: list[dict[str, Any]], norm: Normalization | None,
               c_value: Any) -> dict[str, Any]:
    """Per input/output: dtype, C type, element count, per-tensor scale/zero point (None when not
    quantised per tensor, the helpers then return AI_ERR_IO), and the u8 table of a quantised input."""
    norm = norm or [(0.0, 1.0)]

    def one(t: dict[str, Any], is_input: bool) -> dict[str, Any]:
        dtype = _BY_CODE.get((t["dt_code"], t["dt_bits"]))
        n = int(np.prod(t["shape"], dtype=np.int64))
        q = t["quant"]
        per_tensor = q is not None and len(q["scale"]) == 1
        d: dict[str, Any] = {"ctype": _CTYPES.get(dtype or "", ""), "dtype": dtype, "count": n,
                             "quantized": dtype in ("int8", "uint8", "int16") and per_tensor}
        if d["quantized"]:
            info = np.iinfo(dtype)
            d.update(scale=c_value(float(np.float32(q["scale"][0]))), zp=int(q["zero_point"][0]),
                     qmin=int(info.min), qmax=int(info.max))
        channels = int(t["shape"][-1]) if t["shape"] else 1
        if is_input and len(norm) not in (1, channels):
            raise Stm32aiError(f"--input-normalization gives {len(norm)} channels, the input's last dimension "
                               f"has {channels}: give one OFFSET:SCALE or {channels}")
        d["channels"] = channels if len(norm) == channels else 1
        d["norm"] = [(c_value(float(np.float32(o))), c_value(float(np.float32(s)))) for o, s in norm]
        if is_input and d["quantized"]:
            d["u8_table"] = _u8_table(norm, d["channels"], float(np.float32(q["scale"][0])), d["zp"], dtype)
        return d

    return {"io_inputs": [one(t, True) for t in inputs], "io_outputs": [one(t, False) for t in outputs]}
