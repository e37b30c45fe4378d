"""The generated I/O helpers (`<name>_input_from_float`, `_output_to_float`, `_input_from_u8`)
against TFLite's own QUANTIZE / DEQUANTIZE: hand-built one-op models run in TFLite Micro (and
LiteRT-ref when installed), the helpers compiled on the host, byte for byte. Inputs include exact
rounding ties x = (k + 0.5) * scale, their float neighbours, and values far out of range."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from builders import TfliteBuilder

from stm32ai.emitter import emit_c
from stm32ai.emitter.io_helpers import parse_normalization, quantize_like_tflite
from stm32ai.errors import Stm32aiError
from stm32ai.pipeline import compile_model
from stm32ai.validate.host import build_host
from stm32ai.validate.reference import run_litert_ref, run_tflm

QUANTIZE, DEQUANTIZE = 114, 6
HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "ai_runtime.h"
#include "network.h"
/* argv[1]: f = input_from_float (floats in), u = input_from_u8 (bytes in), o = output_to_float */
int main(int argc, char **argv) {
  static float fbuf[65536];
  static unsigned char ubuf[65536];
  ai_handle h = NULL;
  if (argc < 3 || ai_create(&network_info, NULL, &h) != AI_OK) return 2;
  const unsigned n = (unsigned)atoi(argv[2]);
  ai_tensor *in = ai_get_input(h, 0), *out = ai_get_output(h, 0);
  if (argv[1][0] == 'f') {
    if (fread(fbuf, sizeof(float), n, stdin) != n) return 3;
    if (network_input_from_float(h, 0, fbuf, n) != AI_OK) return 4;
    if (network_input_from_float(h, 0, fbuf, n + 1) != AI_ERR_IO) return 5;   /* count checked */
    if (network_input_from_float(h, 1, fbuf, n) != AI_ERR_INDEX) return 6;
    fwrite(in->data, 1, in->size_bytes, stdout);
  } else if (argv[1][0] == 'u') {
    if (fread(ubuf, 1, n, stdin) != n) return 3;
    if (network_input_from_u8(h, 0, ubuf, n) != AI_OK) return 4;
    fwrite(in->data, 1, in->size_bytes, stdout);
  } else {
    if (fread(out->data, 1, out->size_bytes, stdin) != out->size_bytes) return 3;
    if (network_output_to_float(h, 0, fbuf, n) != AI_OK) return 4;
    if (network_output_to_float(h, 0, NULL, n) != AI_ERR_NULL_POINTER) return 5;
    fwrite(fbuf, sizeof(float), n, stdout);
  }
  return 0;
}
"""


def one_op(path: Path, code: int, shape: tuple[int, ...], src: str, dst: str, scale: float, zp: int) -> Path:
    b = TfliteBuilder()
    qs = {"scale": scale, "zp": zp}
    x = b.tensor(shape, src, **(qs if src != "float32" else {}))
    y = b.tensor(shape, dst, **(qs if dst != "float32" else {}))
    b.op(code, [x], [y])
    b.inputs, b.outputs = [x], [y]
    path.write_bytes(b.build())
    return path


def helper_exe(model: Path, d: Path, norm=None) -> Path:
    c = compile_model(model, "network")
    emit_c(c.doc, c.params, "network", d / "c", input_normalization=norm)
    (d / "h.c").write_text(HARNESS)
    return build_host(d / "c", "network", d / "exe", [d / "h.c"])


def run(exe: Path, mode: str, n: int, data: bytes) -> bytes:
    import subprocess

    r = subprocess.run([str(exe), mode, str(n)], input=data, capture_output=True, timeout=60)
    assert r.returncode == 0, f"harness exit {r.returncode}"
    return r.stdout


def references(model: Path, x: np.ndarray) -> list[np.ndarray]:
    outs = [run_tflm(model, [x])[0]]
    try:
        outs.append(run_litert_ref(model, [x])[0])
    except Exception:  # noqa: BLE001 (LiteRT is optional: docs/references.md)
        pass
    return outs


CASES = [("int8", 0.0123, -17), ("int8", 1.0, 0), ("int8", 0.5, 127), ("int16", 0.001, 0), ("int16", 3.7e-4, 5)]


@pytest.mark.parametrize("dtype,scale,zp", CASES)
def test_input_from_float_is_tflite_quantize(dtype, scale, zp, tmp_path):
    s = np.float32(scale)
    k = np.arange(-300, 300)
    ties = ((k + 0.5) * np.float64(s)).astype(np.float32)
    x = np.concatenate([ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf)),
                        np.random.default_rng(1).uniform(-40000 * s, 40000 * s, 600).astype(np.float32),
                        np.array([0.0, -0.0, 1e9 * s, -1e9 * s], np.float32)])
    huge = np.array([1e30, -1e30, np.inf, -np.inf], np.float32)  # |x / scale| >= 2^31: undefined in TFLite
    shape = (1, x.size)
    q_model = one_op(tmp_path / "q.tflite", QUANTIZE, shape, "float32", dtype, scale, zp)
    d_model = one_op(tmp_path / "d.tflite", DEQUANTIZE, shape, dtype, "float32", scale, zp)
    exe = helper_exe(d_model, tmp_path)  # its input tensor has the (scale, zero point) under test
    ours = np.frombuffer(run(exe, "f", x.size, x.tobytes()), dtype)
    for ref in references(q_model, x.reshape(shape)):
        assert np.array_equal(ours, ref.reshape(-1)), np.flatnonzero(ours != ref.reshape(-1))[:10]
    assert np.array_equal(ours, quantize_like_tflite(x, scale, zp, dtype))  # the u8 tables' maths
    # TFLite casts x / scale to int32 (undefined out of range; x86 gives INT_MIN for both signs):
    # the helper saturates, as stm32ai's QUANTIZE kernel does
    info = np.iinfo(dtype)
    ours = np.frombuffer(run(exe, "f", x.size, np.resize(huge, x.size).tobytes()), dtype)[:4]
    assert ours.tolist() == [info.max, info.min, info.max, info.min]


@pytest.mark.parametrize("dtype,scale,zp", CASES[:3] + CASES[4:])
def test_output_to_float_is_tflite_dequantize(dtype, scale, zp, tmp_path):
    info = np.iinfo(dtype)
    q = np.arange(info.min, info.max + 1, max(1, (info.max - info.min) // 4000)).astype(dtype)
    shape = (1, q.size)
    q_model = one_op(tmp_path / "q.tflite", QUANTIZE, shape, "float32", dtype, scale, zp)
    d_model = one_op(tmp_path / "d.tflite", DEQUANTIZE, shape, dtype, "float32", scale, zp)
    exe = helper_exe(q_model, tmp_path)  # its output tensor has the (scale, zero point)
    ours = np.frombuffer(run(exe, "o", q.size, q.tobytes()), np.float32)
    for ref in references(d_model, q.reshape(shape)):
        assert np.array_equal(ours.view(np.uint32), ref.reshape(-1).view(np.uint32))


@pytest.mark.parametrize("norm", ["127.5:0.0078125", "0:0.00392156862745098",
                                  "123.675:0.0171,116.28:0.0175,103.53:0.0174"])
def test_input_from_u8_is_normalisation_then_quantize(norm, tmp_path):
    scale, zp, channels = 0.0078125 * 1.7, 3, 3
    pairs = parse_normalization(norm)
    u = np.tile(np.arange(256, dtype=np.uint8), channels).reshape(256, channels)  # every value per channel
    per = pairs if len(pairs) == channels else pairs * channels
    real = np.stack([(u[:, c].astype(np.float32) - np.float32(o)) * np.float32(s) for c, (o, s) in enumerate(per)],
                    axis=1)
    shape = (1, 256, channels)
    q_model = one_op(tmp_path / "q.tflite", QUANTIZE, shape, "float32", "int8", scale, zp)
    d_model = one_op(tmp_path / "d.tflite", DEQUANTIZE, shape, "int8", "float32", scale, zp)
    exe = helper_exe(d_model, tmp_path, pairs)
    ours = np.frombuffer(run(exe, "u", u.size, u.tobytes()), np.int8)
    ref = run_tflm(q_model, [real.reshape(shape)])[0]
    assert np.array_equal(ours, ref.reshape(-1))


def test_bad_normalization_is_refused():
    for bad in ("1", "a:b", "0:0", "nan:1", "1:2:3"):
        with pytest.raises(Stm32aiError, match="input-normalization"):
            parse_normalization(bad)
