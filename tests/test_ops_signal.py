"""TFLite Micro Signal custom ops (micro_speech audio front end): lowering and kernels.

* generate-time tables against their definitions (KISS FFT factorisation and twiddles,
  the log correction table);
* each op alone in a hand-built .tflite model, run by the generated C on the host and by
  TFLite Micro's interpreter, outputs compared bit for bit — on inputs chosen to hit the
  integer corner cases (int16 extremes, -32768 in the max-abs search, 64-bit accumulators,
  2^32 boundaries of the square root, clamping on and off) and on random ones;
* the persistent noise estimate: several frames through one model instance, against TFLM
  invoked as many times without reset;
* what the compiler refuses, and why;
* the two shared audio_preprocessor models through ``stm32ai validate`` (when the
  CAST/MUL/DIV/MINIMUM/MAXIMUM kernels they also need are available).
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from builders import TfliteBuilder, schema
from conftest import shared_model
from flatbuffers import flexbuffers

from stm32ai.emitter import emit_c
from stm32ai.errors import UnsupportedModelError
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.passes.lower import registry
from stm32ai.passes.lower.signal import kiss_factors, log_lut, rfft_plan
from stm32ai.pipeline import compile_model
from stm32ai.validate.host import CFLAGS, build_host, run_compiled

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

RUNTIME = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
INT8_MODEL = "tflite_micro/audio_preprocessor_int8.tflite"
FLOAT_MODEL = "tflite_micro/audio_preprocessor_float.tflite"


# ---- a tiny .tflite writer for custom ops ----------------------------------------------------

class SignalModel(TfliteBuilder):
    def tensor(self, shape, dtype, data=None) -> int:  # the signal ops' tensors are not quantised
        return super().tensor(shape, dtype, data=data)

    def input(self, shape, dtype) -> int:
        t = self.tensor(shape, dtype)
        self.inputs.append(t)
        return t

    def output(self, shape, dtype) -> int:
        t = self.tensor(shape, dtype)
        self.outputs.append(t)
        return t

    def custom(self, name: str, inputs, outputs, opts: dict) -> None:
        o = self.op(name, inputs, outputs)
        o.customOptions = list(bytes(flexbuffers.Dumps(opts)))
        o.customOptionsFormat = schema.CustomOptionsFormat.FLEXBUFFERS


def one_op(op: str, x_shape, x_dtype: str, y_shape, y_dtype: str, opts: dict) -> SignalModel:
    """A model of one signal op from one graph input to one graph output."""
    sm = SignalModel()
    sm.custom(op, [sm.input(x_shape, x_dtype)], [sm.output(y_shape, y_dtype)], opts)
    return sm


def tflm_frames(data: bytes, frames: list[list[np.ndarray]], n_out: int) -> list[list[np.ndarray]]:
    """One interpreter, invoked once per frame without reset (state carries over)."""
    it = tflm_runtime.Interpreter.from_bytes(data, arena_size=1 << 20)
    outs = []
    for frame in frames:
        for i, x in enumerate(frame):
            it.set_input(np.asarray(x, order="C"), i)  # ascontiguousarray makes 0-d 1-d
        it.invoke()
        outs.append([np.array(it.get_output(j), copy=True) for j in range(n_out)])
    return outs


def check(sm: SignalModel, tmp: Path, samples: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """Generated C vs TFLM, each sample from a fresh state, every output bit for bit."""
    data = sm.build()
    path = tmp / "model.tflite"
    path.write_bytes(data)
    c = compile_model(path)
    got = run_compiled(c, samples)
    for k, (s, outs) in enumerate(zip(samples, got, strict=True)):
        ref = tflm_frames(data, [s], len(outs))[0]
        for j, (a, b) in enumerate(zip(outs, ref, strict=True)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, j, a.dtype, b.dtype, a.shape, b.shape)
            bad = np.flatnonzero(a.reshape(-1) != b.reshape(-1))
            assert bad.size == 0, (f"sample {k} output {j}: {bad.size} differ, first at {bad[0]}: "
                                   f"C {a.reshape(-1)[bad[0]]} TFLM {b.reshape(-1)[bad[0]]}")
    return got


def model_consts() -> dict[str, np.ndarray]:
    """The filter-bank and PCAN tables of the shared int8 preprocessor (or skip)."""
    g = load_tflite(shared_model(INT8_MODEL))
    return {t.name: t.data for t in g.tensors if t.is_const}


RNG = np.random.default_rng(1234)


def i16(*shape, lo=-32768, hi=32767) -> np.ndarray:
    return RNG.integers(lo, hi + 1, size=shape).astype(np.int16)


# ---- generate-time tables ----------------------------------------------------------------------

def test_kiss_factors_follow_radix_4_2_then_odd():
    assert kiss_factors(256) == [(4, 64), (4, 16), (4, 4), (4, 1)]
    assert kiss_factors(128) == [(4, 32), (4, 8), (4, 2), (2, 1)]
    assert kiss_factors(240) == [(4, 60), (4, 15), (3, 5), (5, 1)]
    assert kiss_factors(14) == [(2, 7), (7, 1)]
    assert kiss_factors(2) == [(2, 1)]
    for n in (6, 12, 20, 30, 100, 256, 26):
        assert math.prod(p for p, _ in kiss_factors(n)) == n


def test_rfft_twiddles_are_rounded_unit_circle():
    factors, tw, st = rfft_plan(512)
    assert tw.dtype == np.int16 and tw.size == 2 * 256 and st.size == 2 * 128
    tw = tw.reshape(-1, 2).astype(np.int64)
    assert tw[0].tolist() == [32767, 0] and tw[64].tolist() == [0, -32767]  # exp(-i pi/2)
    k = np.arange(256)
    assert np.abs(tw[:, 0] - 32767 * np.cos(-2 * np.pi * k / 256)).max() <= 0.5
    assert np.abs(tw[:, 1] - 32767 * np.sin(-2 * np.pi * k / 256)).max() <= 0.5
    st = st.reshape(-1, 2).astype(np.int64)
    ph = -np.pi * ((np.arange(128) + 1) / 256 + 0.5)
    assert np.abs(st[:, 0] - 32767 * np.cos(ph)).max() <= 0.5


def test_log_lut_is_the_log2_correction_table():
    lut = log_lut()
    assert lut.dtype == np.uint16 and lut.size == 130
    # a few entries of TFLM's table, and its shape: 0 at both ends, maximum 5641 near 0.44
    assert lut[:4].tolist() == [0, 224, 442, 654] and lut[64] == 5568
    assert lut[128] == 0 and lut[129] == 0 and lut.max() == 5641


# ---- each op against TFLM ----------------------------------------------------------------------

@pytest.mark.parametrize("shift", [0, 7, 12, 15])
def test_window(tmp_path, shift):
    sm = SignalModel()
    w = i16(48)
    w[:4] = [32767, -32768, 0, 1]
    x = sm.input((3, 48), "int16")
    wt = sm.tensor((48,), "int16", w)
    y = sm.output((3, 48), "int16")
    sm.custom("SignalWindow", [x, wt], [y], {"shift": shift})
    ext = np.full((3, 48), -32768, np.int16)
    ext[1] = 32767
    check(sm, tmp_path, [[i16(3, 48)], [ext], [i16(3, 48, lo=-50, hi=50)]])


def test_fft_auto_scale_corner_cases(tmp_path):
    sm = SignalModel()
    x = sm.input((40,), "int16")
    y = sm.output((40,), "int16")
    s = sm.output((), "int32")
    sm.custom("SignalFftAutoScale", [x], [y, s], {})
    cases = [np.zeros(40, np.int16), i16(40), i16(40, lo=-3, hi=3), i16(40, lo=-1000, hi=1000)]
    one = np.zeros(40, np.int16)
    one[7] = 1
    cases.append(one)
    for pos, after in ((39, 0), (0, 5), (10, -5), (20, 300)):
        v = i16(40, lo=-200, hi=200)
        v[pos] = -32768  # |-32768| wraps in int16: TFLM's max search then takes the next value
        if pos + 1 < 40:
            v[pos + 1] = after
        cases.append(v)
    got = check(sm, tmp_path, [[c] for c in cases])
    assert int(got[0][1]) == 0 and int(got[4][1]) == 14


@pytest.mark.parametrize("fft_length,frame,batch", [
    (512, 480, 1), (512, 512, 1), (16, 16, 2), (8, 5, 1), (128, 100, 3),
    (24, 20, 1),   # n = 12: radix 4 and 3
    (40, 33, 2),   # n = 20: radix 4 and 5
    (480, 400, 1),  # n = 240: 4, 4, 3, 5
    (60, 60, 1),   # n = 30: 2, 3, 5
])
def test_rfft_int16(tmp_path, fft_length, frame, batch):
    shape = (batch, frame) if batch > 1 else (frame,)
    oshape = (batch, 2 * (fft_length // 2 + 1)) if batch > 1 else (2 * (fft_length // 2 + 1),)
    sm = one_op("SignalRfft", shape, "int16", oshape, "int16", {"T": 7, "fft_length": fft_length})
    sine = (16000 * np.sin(np.arange(frame) * 0.37)).astype(np.int16)
    samples = [[i16(*shape)], [i16(*shape, lo=-100, hi=100)],
               [np.broadcast_to(sine, shape).copy()],
               [np.full(shape, 32767, np.int16)], [np.full(shape, -32768, np.int16)]]
    check(sm, tmp_path, samples)


@pytest.mark.parametrize("start,end", [(0, 257), (5, 241), (0, 0), (100, 101)])
def test_energy(tmp_path, start, end):
    sm = one_op("SignalEnergy", (514,), "int16", (257,), "uint32", {"end_index": end, "start_index": start})
    ext = np.full(514, -32768, np.int16)  # re^2 + im^2 = 2^31: wraps int32 in TFLM, fine in uint32
    got = run = None
    data = sm.build()
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    c = compile_model(path)
    for s in ([i16(514)], [ext], [i16(514, lo=-5, hi=5)]):
        got = run_compiled(c, [s])[0][0]
        run = tflm_frames(data, [s], 1)[0][0]
        # TFLM leaves bins outside [start, end) untouched (arena content); ours are zero
        assert np.array_equal(got[start:end], run[start:end])
        assert not got[:start].any() and not got[end:].any()


def test_filter_bank_model_tables(tmp_path):
    k = model_consts()
    sm = SignalModel()
    x = sm.input((257,), "uint32")
    ins = [x] + [sm.tensor(k[f"signal_filter_bank/Const{s}"].shape, "int16", k[f"signal_filter_bank/Const{s}"])
                 for s in ("", "_1", "_2", "_3", "_4")]
    y = sm.output((40,), "uint64")
    sm.custom("SignalFilterBank", ins, [y], {"num_channels": 40})
    full = RNG.integers(0, 2**32, size=257, dtype=np.uint64).astype(np.uint32)
    top = np.full(257, 0xFFFFFFFF, np.uint32)
    check(sm, tmp_path, [[full], [top], [RNG.integers(0, 1000, 257).astype(np.uint32)]])


def test_filter_bank_negative_weights_wrap_like_tflm(tmp_path):
    # int16 weights are sign-extended into uint64 before the multiply: negative weights wrap
    sm = SignalModel()
    x = sm.input((10,), "uint32")
    w = np.array([100, -5, 4096, -32768, 7, 0, 1, 2], np.int16)
    uw = np.array([-1, 3, -4096, 32767, 0, 9, -2, 5], np.int16)
    fs = np.array([0, 1, 3, 6], np.int16)
    ws = np.array([0, 1, 3, 5], np.int16)
    wd = np.array([1, 2, 2, 3], np.int16)
    ins = [x] + [sm.tensor(a.shape, "int16", a) for a in (w, uw, fs, ws, wd)]
    y = sm.output((3,), "uint64")
    sm.custom("SignalFilterBank", ins, [y], {"num_channels": 3})
    check(sm, tmp_path, [[RNG.integers(0, 2**32, 10, dtype=np.uint64).astype(np.uint32)] for _ in range(3)])


def test_filter_bank_square_root(tmp_path):
    sm = SignalModel()
    x = sm.input((24,), "uint64")
    s = sm.input((), "int32")
    y = sm.output((24,), "uint32")
    sm.custom("SignalFilterBankSquareRoot", [x, s], [y], {})
    edge = np.array([0, 1, 2, 3, 4, 0xFFFE0001, 0xFFFF0000, 0xFFFFFFFF, 1 << 32, (1 << 32) + 1,
                     (1 << 64) - 1, (1 << 63), 0xFFFFFFFE00000001, 0xFFFFFFFF00000000, 99, 100,
                     (1 << 40) + 12345, 2**34 - 1, 2**34, 8, 15, 16, 17, 65535], np.uint64)
    rnd = (RNG.integers(0, 2**63, 24, dtype=np.uint64) >> RNG.integers(0, 63, 24).astype(np.uint64))
    samples = [[edge, np.array(sh, np.int32)] for sh in (0, 1, 5, 14)] + [[rnd, np.array(3, np.int32)]]
    check(sm, tmp_path, samples)


def _spectral_subtraction_model(clamping: bool, n: int = 40) -> SignalModel:
    sm = SignalModel()
    x = sm.input((n,), "uint32")
    y = sm.output((n,), "uint32")
    ne = sm.output((n,), "uint32")
    sm.custom("SignalFilterBankSpectralSubtraction", [x], [y, ne], {
        "alternate_one_minus_smoothing": 15401, "alternate_smoothing": 983, "clamping": clamping,
        "min_signal_remaining": 819, "num_channels": n, "one_minus_smoothing": 15975, "smoothing": 409,
        "smoothing_bits": 10, "spectral_subtraction_bits": 14})
    return sm


@pytest.mark.parametrize("clamping", [False, True])
def test_spectral_subtraction_one_frame(tmp_path, clamping):
    sm = _spectral_subtraction_model(clamping)
    big = RNG.integers(0, 2**32, 40, dtype=np.uint64).astype(np.uint32)  # << 10 wraps
    check(sm, tmp_path, [[RNG.integers(0, 5000, 40).astype(np.uint32)], [big],
                         [np.zeros(40, np.uint32)]])


HARNESS = r"""
#include <stdio.h>
#include "ai_runtime.h"
#include "network.h"
int main(void) {
  ai_handle h;
  if (ai_create(&network_info, NULL, &h) != AI_OK) return 3;
  for (int f = 0;; f++) {
    ai_tensor *in = ai_get_input(h, 0);
    if (fread(in->data, 1, in->size_bytes, stdin) != in->size_bytes) return 0;
    if (f == RESET_AT && ai_reset(h) != AI_OK) return 4;
    if (ai_run(h) != AI_OK) return 5;
    for (int i = 0; i < ai_get_output_size(h); i++) {
      ai_tensor *t = ai_get_output(h, i);
      fwrite(t->data, 1, t->size_bytes, stdout);
    }
  }
}
"""


def run_frames(c, frames: list[np.ndarray], reset_at: int, tmp: Path) -> list[list[np.ndarray]]:
    """The generated C, one instance, one ai_run per frame (single-input models), ai_reset
    before frame `reset_at` only."""
    emit_c(c.doc, c.params, "network", tmp / "c")
    h = tmp / "main.c"
    h.write_text(HARNESS.replace("RESET_AT", str(reset_at)))
    exe = build_host(tmp / "c", "network", tmp / "run", [h])
    r = subprocess.run([str(exe)], input=b"".join(np.ascontiguousarray(f).tobytes() for f in frames),
                       capture_output=True, check=True)
    outs, pos = [], 0
    specs = [c.graph.tensors[t] for t in c.graph.outputs]
    for _ in frames:
        one = []
        for t in specs:
            n = t.size * np.dtype(t.dtype).itemsize
            one.append(np.frombuffer(r.stdout[pos:pos + n], t.dtype).reshape(t.shape))
            pos += n
        outs.append(one)
    assert pos == len(r.stdout)
    return outs


def assert_streams_match(data: bytes, c, frames: list[np.ndarray], reset_at: int, tmp: Path) -> None:
    got = run_frames(c, frames, reset_at, tmp)
    n_out = len(c.graph.outputs)
    ref = (tflm_frames(data, [[f] for f in frames[:reset_at]], n_out)
           + tflm_frames(data, [[f] for f in frames[reset_at:]], n_out))
    for k in range(len(frames)):
        for a, b in zip(got[k], ref[k], strict=True):
            assert np.array_equal(a.reshape(-1), b.reshape(-1)), f"frame {k}"


@pytest.mark.parametrize("clamping", [False, True])
def test_spectral_subtraction_state_carries_across_runs(tmp_path, clamping):
    """Frames through one instance without reset: the noise estimate is smoothed from frame
    to frame exactly as in TFLM invoked repeatedly; ai_reset starts over like TFLM's reset."""
    sm = _spectral_subtraction_model(clamping)
    data = sm.build()
    (tmp_path / "m.tflite").write_bytes(data)
    c = compile_model(tmp_path / "m.tflite")
    frames = [RNG.integers(0, 20000 if k % 3 else 200, 40).astype(np.uint32) for k in range(8)]
    assert_streams_match(data, c, frames, 5, tmp_path)
    got = run_frames(c, frames, 5, tmp_path)
    assert not np.array_equal(got[1][1], got[6][1])  # the estimate did evolve


def test_pcan_model_table(tmp_path):
    k = model_consts()
    lut = k["signal_pcan/Const"]
    sm = SignalModel()
    x = sm.input((40,), "uint32")
    ne = sm.input((40,), "uint32")
    t = sm.tensor(lut.shape, "int16", lut)
    y = sm.output((40,), "uint32")
    sm.custom("SignalPCAN", [x, ne, t], [y], {"snr_shift": 6})

    def spread(n):  # values of every bit length, plus 0..2
        v = RNG.integers(0, 2**32, n, dtype=np.uint64) >> RNG.integers(0, 32, n).astype(np.uint64)
        return v.astype(np.uint32)

    small = np.arange(40, dtype=np.uint32) % 4
    samples = [[spread(40), spread(40)], [spread(40), small], [np.full(40, 0xFFFFFFFF, np.uint32), spread(40)],
               [RNG.integers(0, 3000, 40).astype(np.uint32), RNG.integers(0, 3000, 40).astype(np.uint32)]]
    check(sm, tmp_path, samples)


@pytest.mark.parametrize("bits,scale", [(3, 64), (0, 1), (5, 1000), (0, 65536)])
def test_filter_bank_log(tmp_path, bits, scale):
    sm = one_op("SignalFilterBankLog", (64,), "uint32", (64,), "int16",
                {"input_correction_bits": bits, "output_scale": scale})
    v = RNG.integers(0, 2**32, 64, dtype=np.uint64) >> RNG.integers(0, 32, 64).astype(np.uint64)
    edge = np.array([0, 1, 2, 3, 4, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF] * 8, np.uint32)
    check(sm, tmp_path, [[v.astype(np.uint32)], [edge], [np.arange(64, dtype=np.uint32)]])


def test_front_end_chain_without_casts(tmp_path):
    """window -> auto-scale -> rfft -> energy -> filter bank -> sqrt -> spectral subtraction ->
    PCAN -> log, with the shared model's tables (its CAST/slice glue replaced by feeding the
    energy straight into the filter bank)."""
    k = model_consts()
    sm = SignalModel()
    x = sm.input((480,), "int16")
    win = sm.tensor((480,), "int16", k["Const"])
    t_w = sm.tensor((480,), "int16")
    sm.custom("SignalWindow", [x, win], [t_w], {"shift": 12})
    t_a, t_s = sm.tensor((480,), "int16"), sm.tensor((), "int32")
    sm.custom("SignalFftAutoScale", [t_w], [t_a, t_s], {})
    t_f = sm.tensor((514,), "int16")
    sm.custom("SignalRfft", [t_a], [t_f], {"T": 7, "fft_length": 512})
    t_e = sm.tensor((257,), "uint32")
    sm.custom("SignalEnergy", [t_f], [t_e], {"end_index": 241, "start_index": 5})
    fb = [sm.tensor(k[f"signal_filter_bank/Const{s}"].shape, "int16", k[f"signal_filter_bank/Const{s}"])
          for s in ("", "_1", "_2", "_3", "_4")]
    t_b = sm.tensor((40,), "uint64")
    sm.custom("SignalFilterBank", [t_e, *fb], [t_b], {"num_channels": 40})
    t_q = sm.tensor((40,), "uint32")
    sm.custom("SignalFilterBankSquareRoot", [t_b, t_s], [t_q], {})
    t_ss, t_ne = sm.tensor((40,), "uint32"), sm.tensor((40,), "uint32")
    sm.custom("SignalFilterBankSpectralSubtraction", [t_q], [t_ss, t_ne], {
        "alternate_one_minus_smoothing": 15401, "alternate_smoothing": 983, "clamping": False,
        "min_signal_remaining": 819, "num_channels": 40, "one_minus_smoothing": 15975, "smoothing": 409,
        "smoothing_bits": 10, "spectral_subtraction_bits": 14})
    lut = sm.tensor((125,), "int16", k["signal_pcan/Const"])
    t_p = sm.tensor((40,), "uint32")
    sm.custom("SignalPCAN", [t_ss, t_ne, lut], [t_p], {"snr_shift": 6})
    y = sm.output((40,), "int16")
    sm.custom("SignalFilterBankLog", [t_p], [y], {"input_correction_bits": 3, "output_scale": 64})
    sine = (3000 * np.sin(np.arange(480) * 0.2)).astype(np.int16)
    check(sm, tmp_path, [[i16(480)], [i16(480, lo=-300, hi=300)], [sine], [np.zeros(480, np.int16)]])


# ---- refusals ----------------------------------------------------------------------------------

def _refusal(sm: SignalModel, tmp: Path) -> str:
    path = tmp / "bad.tflite"
    path.write_bytes(sm.build())
    with pytest.raises(UnsupportedModelError) as e:
        compile_model(path)
    return str(e.value)


def test_refuses_generic_fft_radix(tmp_path):
    sm = SignalModel()
    x = sm.input((28,), "int16")
    y = sm.output((30,), "int16")
    sm.custom("SignalRfft", [x], [y], {"T": 7, "fft_length": 28})  # 14 = 2 * 7
    assert "generic radix 7" in _refusal(sm, tmp_path)


def test_refuses_int8_rfft_and_missing_options(tmp_path):
    sm = one_op("SignalRfft", (16,), "int8", (18,), "int8", {"T": 9, "fft_length": 16})
    assert "int16 (7), int32 (2) or float32 (0)" in _refusal(sm, tmp_path)

    sm = SignalModel()
    x = sm.input((16,), "int16")
    w = sm.tensor((16,), "int16", np.ones(16))
    y = sm.output((16,), "int16")
    sm.custom("SignalWindow", [x, w], [y], {})
    assert "shift" in _refusal(sm, tmp_path)


def test_refuses_short_pcan_table_and_out_of_range_filter_bank(tmp_path):
    sm = SignalModel()
    x, ne = sm.input((4,), "uint32"), sm.input((4,), "uint32")
    t = sm.tensor((100,), "int16", np.zeros(100))
    y = sm.output((4,), "uint32")
    sm.custom("SignalPCAN", [x, ne, t], [y], {"snr_shift": 6})
    assert "gain table has 100 entries" in _refusal(sm, tmp_path)

    sm = SignalModel()
    x = sm.input((8,), "uint32")
    tabs = [np.ones(4, np.int16), np.ones(4, np.int16), np.array([0, 6, 7], np.int16),
            np.array([0, 1, 2], np.int16), np.array([1, 1, 3], np.int16)]
    ins = [x] + [sm.tensor(a.shape, "int16", a) for a in tabs]
    y = sm.output((2,), "uint64")
    sm.custom("SignalFilterBank", ins, [y], {"num_channels": 2})
    assert "reads past the end" in _refusal(sm, tmp_path)


def test_kernels_compile_for_cortex_m4(tmp_path):
    gcc = shutil.which("arm-none-eabi-gcc")
    if gcc is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    for src in sorted((RUNTIME / "src").glob("ai_signal_*.c")):
        subprocess.run([gcc, *CFLAGS, *M4, f"-I{RUNTIME / 'include'}", "-c", str(src), "-o",
                        str(tmp_path / (src.stem + ".o"))], check=True)


# ---- the shared models -------------------------------------------------------------------------

def _needs_glue(path: Path) -> None:
    """Skip while a non-Signal op of the model (CAST, MUL, DIV... owned by other kernel
    families) is still unsupported; Signal ops must never be the reason."""
    from stm32ai.passes.check_support import unsupported_ops
    from stm32ai.passes.fold_constants import fold_constants

    g = load_tflite(path)
    fold_constants(g)
    problems = unsupported_ops(g, {t: s.check for t, s in registry().items()})
    assert not [p for p in problems if "Signal" in p], problems
    if problems:
        pytest.skip(f"kernels not available yet: {'; '.join(problems)[:300]}")


@pytest.mark.parametrize("rel", [INT8_MODEL, FLOAT_MODEL])
def test_audio_preprocessor_models_match_tflm(rel):
    from stm32ai.validate.run import validate_model

    path = shared_model(rel)
    _needs_glue(path)
    res = validate_model(path, n=3)
    tflm = next(c for c in res.comparisons if c.reference == "tflm")
    assert tflm.verdict and tflm.unavailable is None
    assert all(tflm.ok), [m.as_dict() for m in tflm.outputs]
    for m in tflm.outputs:
        assert m.max_abs_err == 0.0


@pytest.mark.parametrize("rel", [INT8_MODEL, FLOAT_MODEL])
def test_audio_preprocessor_streams_like_tflm(tmp_path, rel):
    """Consecutive 30 ms frames through one instance (noise estimate carried over), then a
    reset, against one TFLM interpreter invoked on the same frames."""
    path = shared_model(rel)
    _needs_glue(path)
    c = compile_model(path)
    t = np.arange(480 * 10) / 16000.0
    audio = (8000 * np.sin(2 * np.pi * 440 * t) * (1 + np.sin(2 * np.pi * 3 * t))
             + RNG.normal(0, 500, t.size)).clip(-32768, 32767).astype(np.int16)
    frames = [audio[k * 320:k * 320 + 480].reshape(1, 480) for k in range(12)]
    frames.append(i16(1, 480))
    assert_streams_match(path.read_bytes(), c, frames, 9, tmp_path)
