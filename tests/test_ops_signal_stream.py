"""TFLite Micro's streaming signal ops (SignalDelay, SignalFramer, SignalStacker,
SignalOverlapAdd): the generated C against TFLM's interpreter over consecutive runs.

* each op alone in a hand-built .tflite model (the signal ops have no converter path: TFLM's
  signal library writes them as custom ops; test_ops_signal.py builds its fixtures the same
  way), one instance run frame after frame without reset, then ai_reset and the stream again,
  against one TFLM interpreter invoked on the same frames (reset where ours is): every output
  bit for bit, Framer/Stacker frames wherever TFLM says `valid` (TFLM leaves an invalid frame's
  output untouched, ours are zeros);
* edge configurations: delay longer than a frame, prefill on and off, several rows, a frame
  size that is no multiple of the step, stacker step = left + right + 1, int16 saturation;
* refusals with a reason; the kernels compile warning-free for the host and a Cortex-M4.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_ops_signal import SignalModel, run_frames, tflm_frames

from stm32ai.errors import UnsupportedModelError
from stm32ai.pipeline import compile_model

RUNTIME = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
SOURCES = [RUNTIME / "src" / f for f in ("ai_signal_stream.c", "ai_signal_fft_f32.c", "ai_signal_fft_s32.c",
                                         "ai_signal_rfft.c")]
WARN = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion", "-Wconversion"]
M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
RNG = np.random.default_rng(21)


def _model(op: str, x_shape, x_dtype, outs: list[tuple[list[int], str]], opts: dict) -> SignalModel:
    sm = SignalModel()
    x = sm.input(x_shape, x_dtype)
    sm.custom(op, [x], [sm.output(s, d) for s, d in outs], opts)
    return sm


def _stream(sm: SignalModel, frames: list[np.ndarray], tmp: Path, reset_at: int) -> None:
    """Ours (one instance, ai_reset before frame reset_at) against TFLM (a reset there too)."""
    data = sm.build()
    (tmp / "m.tflite").write_bytes(data)
    c = compile_model(tmp / "m.tflite")
    got = run_frames(c, frames, reset_at, tmp)
    n_out = len(c.graph.outputs)
    it = tflm_frames(data, [[f] for f in frames[:reset_at]], n_out)
    ref = it + tflm_frames(data, [[f] for f in frames[reset_at:]], n_out)
    n_valid = 0
    for k, (a, b) in enumerate(zip(got, ref, strict=True)):
        if n_out == 2:  # Framer / Stacker: data, valid
            assert bool(a[1]) == bool(b[1]), f"frame {k}: valid {a[1]} vs TFLM {b[1]}"
            if not bool(b[1]):
                # TFLM may leave some frames of the batch untouched; the valid ones are checked
                continue
            n_valid += 1
        assert a[0].dtype == b[0].dtype
        bad = np.flatnonzero(a[0].reshape(-1) != b[0].reshape(-1))
        assert bad.size == 0, f"frame {k}: {bad.size} differ, first at {bad[0]}"
    assert n_out == 1 or n_valid >= 2


def _i16(*shape, lo=-32768, hi=32767) -> np.ndarray:
    return RNG.integers(lo, hi + 1, size=shape).astype(np.int16)


@pytest.mark.parametrize("shape,delay", [([2, 5], 3), ([8], 20)], ids=["rows_short_delay", "delay_beyond_frame"])
def test_delay(shape, delay, tmp_path):
    sm = _model("SignalDelay", shape, "int16", [(shape, "int16")], {"delay_length": delay})
    _stream(sm, [_i16(*shape) for _ in range(7)], tmp_path, 4)


@pytest.mark.parametrize("shape,size,step,prefill", [
    ([8], 6, 2, True), ([2, 6], 5, 3, True), ([9], 7, 3, False)], ids=["prefill", "rows", "no_prefill"])
def test_framer(shape, size, step, prefill, tmp_path):
    n = shape[-1] // step
    sm = _model("SignalFramer", shape, "int16", [([*shape[:-1], n, size], "int16"), ([], "bool")],
                {"frame_size": size, "frame_step": step, "prefill": prefill})
    _stream(sm, [_i16(*shape) for _ in range(8)], tmp_path, 5)


@pytest.mark.parametrize("ch,left,right,step", [(3, 2, 1, 1), (4, 1, 1, 3)], ids=["step1", "step_eq_frames"])
def test_stacker(ch, left, right, step, tmp_path):
    size = ch * (left + right + 1)
    sm = _model("SignalStacker", [ch], "int16", [([size], "int16"), ([], "bool")],
                {"num_channels": ch, "stacker_left_context": left, "stacker_right_context": right,
                 "stacker_step": step})
    _stream(sm, [_i16(ch) for _ in range(12)], tmp_path, 7)


@pytest.mark.parametrize("dtype,shape,step", [("int16", [2, 3, 8], 4), ("float32", [2, 2, 6], 1)],
                         ids=["s16_rows", "f32_step1"])
def test_overlap_add(dtype, shape, step, tmp_path):
    out = [*shape[:-2], shape[-2] * step]
    sm = _model("SignalOverlapAdd", shape, dtype, [(out, dtype)],
                {"T": 7 if dtype == "int16" else 0, "frame_step": step})
    if dtype == "int16":  # large values: the running sums saturate
        frames = [_i16(*shape, lo=-20000, hi=20000) for _ in range(6)]
    else:
        frames = [RNG.uniform(-3, 3, shape).astype(np.float32) for _ in range(6)]
    _stream(sm, frames, tmp_path, 4)


@pytest.mark.parametrize("op,shape,outs,opts,words", [
    ("SignalFramer", [8], [([4, 2], "int16"), ([], "bool")], {"frame_size": 2, "frame_step": 3},
     "frame_step (3) <= frame_size (2)"),
    ("SignalFramer", [7], [([3, 4], "int16"), ([], "bool")], {"frame_size": 4, "frame_step": 2},
     "not a positive multiple"),
    ("SignalFramer", [8], [([4, 5], "int16"), ([], "bool")], {"frame_size": 4, "frame_step": 2},
     "expects an output [4, 4]"),
    ("SignalStacker", [3], [([9], "int16"), ([], "bool")],
     {"num_channels": 3, "stacker_left_context": 1, "stacker_right_context": 1, "stacker_step": 4},
     "stacker_step (4) <= left + right + 1 (3)"),
    ("SignalStacker", [3], [([9], "int16"), ([], "bool")], {"num_channels": 3}, "lack integer field"),
    ("SignalOverlapAdd", [2, 4], [([8], "int16")], {"T": 7, "frame_step": 5}, "frame_step (5)"),
    ("SignalOverlapAdd", [2, 4], [([4], "int16")], {"T": 0, "frame_step": 2}, "expected float32"),
    ("SignalDelay", [4], [([4], "int16")], {"delay_length": -1}, "outside 0.."),
], ids=["framer_step", "framer_multiple", "framer_out", "stacker_step", "stacker_opts", "ola_step",
        "ola_type", "delay_negative"])
def test_refusals(op, shape, outs, opts, words, tmp_path):
    sm = _model(op, shape, "int16", outs, opts)
    (tmp_path / "m.tflite").write_bytes(sm.build())
    with pytest.raises(UnsupportedModelError) as e:
        compile_model(tmp_path / "m.tflite")
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_kernels_compile_clean(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    for src in SOURCES:
        subprocess.run([cc, *WARN, f"-I{RUNTIME / 'include'}", "-c", str(src), "-o", str(tmp_path / "h.o")],
                       check=True)
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    for src in SOURCES:
        obj = tmp_path / "m4.o"
        subprocess.run(["arm-none-eabi-gcc", *M4, "-std=gnu11", *WARN[1:], f"-I{RUNTIME / 'include'}", "-c",
                        str(src), "-o", str(obj)], check=True)
        dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True,
                             check=True).stdout
        assert not any(i in dis for i in ("vfma", "vfms", "vmla", "vmls", "vfnm")), src.name


# ---- SignalIrfft (not a streaming op; its tests live here to keep test_ops_signal.py as is) ----

@pytest.mark.parametrize("dtype,fft_length,batch", [("int16", 512, 1), ("int16", 20, 2), ("int32", 512, 1),
                                                    ("int32", 120, 2), ("float32", 512, 2), ("float32", 60, 1)])
def test_irfft(dtype, fft_length, batch, tmp_path):
    bins = 2 * (fft_length // 2 + 1)
    sm = _model("SignalIrfft", [batch, bins], dtype, [([batch, fft_length], dtype)],
                {"T": {"int16": 7, "int32": 2}.get(dtype, 0), "fft_length": fft_length})
    if dtype == "int16":
        frames = [_i16(batch, bins), _i16(batch, bins, lo=-300, hi=300), np.full((batch, bins), 32767, np.int16),
                  np.full((batch, bins), -32768, np.int16)]
    elif dtype == "int32":
        info = np.iinfo(np.int32)
        frames = [RNG.integers(info.min, info.max, (batch, bins), endpoint=True).astype(np.int32),
                  RNG.integers(-5000, 5000, (batch, bins)).astype(np.int32),
                  np.full((batch, bins), info.max, np.int32), np.full((batch, bins), info.min, np.int32)]
    else:
        frames = [RNG.uniform(-100, 100, (batch, bins)).astype(np.float32) for _ in range(3)]
    _stream(sm, frames, tmp_path, len(frames))


@pytest.mark.parametrize("dtype,fft_length,frame,batch", [("int32", 512, 400, 1), ("int32", 40, 33, 2),
                                                          ("float32", 60, 60, 1), ("float32", 24, 20, 1)])
def test_rfft_int32_float(dtype, fft_length, frame, batch, tmp_path):
    """SignalRfft's int32 and float32 variants (int16: test_ops_signal.py)."""
    bins = 2 * (fft_length // 2 + 1)
    sm = _model("SignalRfft", [batch, frame], dtype, [([batch, bins], dtype)],
                {"T": 2 if dtype == "int32" else 0, "fft_length": fft_length})
    if dtype == "int32":
        info = np.iinfo(np.int32)
        frames = [RNG.integers(info.min, info.max, (batch, frame), endpoint=True).astype(np.int32),
                  RNG.integers(-3000, 3000, (batch, frame)).astype(np.int32),
                  np.full((batch, frame), info.max, np.int32), np.full((batch, frame), info.min, np.int32)]
    else:
        frames = [RNG.uniform(-1000, 1000, (batch, frame)).astype(np.float32) for _ in range(3)]
    _stream(sm, frames, tmp_path, len(frames))


def test_forward_int16_plan_is_rfft_plan():
    from stm32ai.passes.lower.signal import irfft_plan, rfft_plan

    for n in (8, 48, 512):
        a, b = rfft_plan(n), irfft_plan(n, "int16", inverse=False)
        assert a[0] == b[0] and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])


def test_irfft_refusals(tmp_path):
    for opts, shape, out, words in [({"T": 9, "fft_length": 8}, [10], [8], "int16 (7), int32 (2) or float32"),
                                    ({"T": 7, "fft_length": 14}, [16], [14], "generic radix 7"),
                                    ({"T": 7, "fft_length": 8}, [10], [9], "of 8 samples out")]:
        sm = _model("SignalIrfft", shape, "int16", [(out, "int16")], opts)
        (tmp_path / "m.tflite").write_bytes(sm.build())
        with pytest.raises(UnsupportedModelError) as e:
            compile_model(tmp_path / "m.tflite")
        assert words in str(e.value), str(e.value)


# ---- CIRCULAR_BUFFER --------------------------------------------------------------------------

@pytest.mark.parametrize("slots,h,d", [(5, 2, 6)])
def test_circular_buffer(slots, h, d, tmp_path):
    """TFLM keeps the slots in the output tensor, uninitialised (arena content) until `slots`
    runs filled them; ours start from zeros: compared once every slot holds an input."""
    sm = _model("CIRCULAR_BUFFER", [1, 1, h, d], "int8", [([1, slots, h, d], "int8")], {"cycles_max": 1})
    data = sm.build()
    (tmp_path / "m.tflite").write_bytes(data)
    c = compile_model(tmp_path / "m.tflite")
    frames = [RNG.integers(-128, 128, (1, 1, h, d)).astype(np.int8) for _ in range(slots + 4)]
    got = run_frames(c, frames, len(frames), tmp_path)
    ref = tflm_frames(data, [[f] for f in frames], 1)
    assert not got[0][0][0, :slots - 1].any()  # ours: zeros before the first inputs
    for k in range(slots - 1, len(frames)):
        assert np.array_equal(got[k][0], ref[k][0].reshape(got[k][0].shape)), f"run {k}"
    for k in range(len(frames)):  # the newest input is always in the last slot
        assert np.array_equal(got[k][0][0, -1], frames[k][0, 0])


@pytest.mark.parametrize("opts", [{"cycles_max": 2}, {}], ids=["period2", "heuristic"])
def test_circular_buffer_refuses_other_periods(opts, tmp_path):
    sm = _model("CIRCULAR_BUFFER", [1, 1, 1, 4], "int8", [([1, 3, 1, 4], "int8")], opts)
    (tmp_path / "m.tflite").write_bytes(sm.build())
    with pytest.raises(UnsupportedModelError) as e:
        compile_model(tmp_path / "m.tflite")
    assert "only 1 is supported" in str(e.value)
