"""The UART validation protocol (docs/uart_protocol.md): the frame codec on its own, then end to
end against the emulated board (QEMU netduinoplus2, console on a TCP socket reached through
pyserial's socket:// URL). The validation firmware is built and started once for the module."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES

from stm32ai.cli import main
from stm32ai.validate.protocol import (
    VERSION,
    ErrorCode,
    Frame,
    FrameDecoder,
    MsgType,
    crc32,
    decode_error,
    encode_frame,
)

MODEL = FIXTURES / "conv_odd_same_int8.tflite"
OTHER_MODEL = FIXTURES / "dense_int8.tflite"
DEMO = Path(__file__).resolve().parents[1] / "demo"

HAVE_QEMU = all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm"))
_skip_qemu = pytest.mark.skipif(not HAVE_QEMU, reason="arm-none-eabi-gcc/make/qemu-system-arm not installed")


def needs_qemu(fn):
    """Builds firmware and runs QEMU."""
    return pytest.mark.slow(_skip_qemu(fn))


def one_line_error(capsys, *words: str) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("building", "test vector"))]
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------------------------------------
# Frame codec (no device)
# ---------------------------------------------------------------------------------------------
def test_crc32_check_value():
    assert crc32(b"123456789") == 0xCBF43926     # CRC-32/ISO-HDLC check value


@pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")
def test_device_crc_and_warning_free_host_build(tmp_path):
    # the device code builds warning-free with the host compiler and computes the same CRC
    from stm32ai.resources import runtime_dir

    (tmp_path / "t.c").write_text('#include <stdio.h>\n#include "ai_validation.h"\nint main(void) {\n'
                                  '  const uint8_t m[] = "123456789";\n'
                                  '  uint32_t a = ai_validation_crc32(0u, m, 4);\n'
                                  '  printf("%08x\\n", (unsigned)ai_validation_crc32(a, m + 4, 5));\n'
                                  "  return 0;\n}\n")
    exe = tmp_path / "t"
    r = subprocess.run(["cc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-Wshadow",
                        "-Wconversion", f"-I{DEMO}", f"-I{runtime_dir() / 'include'}", str(tmp_path / "t.c"),
                        str(DEMO / "ai_validation.c"), *map(str, (runtime_dir() / "src").glob("*.c")),
                        "-o", str(exe), "-lm"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout.strip() == "cbf43926"


def test_frame_layout_and_roundtrip():
    f = encode_frame(MsgType.RUN, 0x1234, b"\x01\x02\x03")
    assert f[:2] == b"\xa5\x5a" and f[2] == VERSION and f[3] == 0x02
    assert f[4:6] == b"\x34\x12" and f[6:10] == b"\x03\x00\x00\x00" and f[10:13] == b"\x01\x02\x03"
    assert int.from_bytes(f[13:], "little") == crc32(f[2:13])
    assert FrameDecoder().feed(f) == [Frame(VERSION, 0x02, 0x1234, b"\x01\x02\x03")]


def test_decoder_byte_by_byte_resyncs_on_garbage_and_bad_crc():
    good = [encode_frame(MsgType.HELLO | MsgType.REPLY, i, bytes([i]) * i) for i in range(4)]
    bad = bytearray(encode_frame(MsgType.RUN, 99, b"xyz"))
    bad[-1] ^= 0xFF
    stream = b"stm32ai: 0.1.0\r\n\xa5\xa5" + good[0] + bytes(bad) + good[1] + b"\xa5\x5a\xff" + good[2] + good[3]
    d = FrameDecoder(max_payload=1024)
    frames = []
    for b in stream:
        frames += d.feed(bytes([b]))
    assert [f.seq for f in frames] == [0, 1, 2, 3] and d.bad_crc == 1
    assert frames[3].payload == b"\x03\x03\x03"


def test_decoder_skips_absurd_length():
    d = FrameDecoder(max_payload=16)
    f = encode_frame(MsgType.RUN, 1, bytes(17))
    assert d.feed(f + encode_frame(MsgType.BYE, 2)) == [Frame(VERSION, MsgType.BYE, 2, b"")]


# ---------------------------------------------------------------------------------------------
# Host behaviour without a device
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def silent_server():
    """A TCP server that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    conns: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"socket://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join(2)
    for c in conns:
        c.close()
    srv.close()


def test_silent_device_times_out_with_a_clear_error(silent_server, capsys):
    t0 = time.monotonic()
    rc = main(["validate", str(MODEL), "--mode", "target", "--port", silent_server, "--timeout", "1"])
    assert rc == 2 and time.monotonic() - t0 < 20
    one_line_error(capsys, "no reply from", "within 1 s")


def test_port_that_cannot_be_opened(capsys):
    with socket.socket() as s:      # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["validate", str(MODEL), "--mode", "target", "--port", f"socket://127.0.0.1:{port}"]) == 2
    one_line_error(capsys, "cannot open")
    assert main(["validate", str(MODEL), "--mode", "target"]) == 2
    one_line_error(capsys, "--port")


# ---------------------------------------------------------------------------------------------
# End to end on QEMU netduinoplus2
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def target_url(tmp_path_factory):
    if not HAVE_QEMU:
        pytest.skip("arm-none-eabi-gcc/make/qemu-system-arm not installed")
    pytest.importorskip("tflite_micro")
    from stm32ai.pipeline import compile_model
    from stm32ai.validate.target import emulated_target

    # the same path as `validate --mode target --board qemu-netduinoplus2`
    with emulated_target(MODEL, "qemu-netduinoplus2", compile_model(MODEL, "network"),
                         workdir=tmp_path_factory.mktemp("fw")) as url:
        yield url


@pytest.fixture
def dev(target_url):
    from stm32ai.validate.target import TargetClient

    with TargetClient.open(target_url, timeout=60.0, connect_timeout=60.0) as d:
        d.hello(timeout=60.0)    # also drains whatever an earlier test left behind
        yield d


def _input(d) -> list[np.ndarray]:
    from stm32ai.validate.reference import random_inputs

    x = random_inputs(MODEL, 1, 7)[0]
    return [x.reshape(d.info.inputs[0].shape)]


def _expect_error(d, seq: int, code: ErrorCode) -> Frame:
    f = d.wait_reply({seq}, 5.0)
    assert f is not None and f.type == MsgType.ERROR, f
    assert decode_error(f)[0] == code, decode_error(f)
    return f


@needs_qemu
def test_hello_reports_version_signature_and_shapes(dev):
    from stm32ai.graphjson import model_signature
    from stm32ai.pipeline import compile_model

    info = dev.info
    c = compile_model(MODEL, "network")
    assert info.version == VERSION and info.signature == model_signature(c.doc, c.params)
    assert info.model == "network" and info.board == "qemu-netduinoplus2" and info.emulated
    assert info.cpu_hz == 168_000_000 and info.cycle_counter == "systick"
    assert [(t.dtype, t.shape, t.size_bytes) for t in info.inputs] == [("int8", (1, 7, 9, 3), 189)]
    assert [(t.dtype, t.shape, t.size_bytes) for t in info.outputs] == [("int8", (1, 7, 9, 5), 315)]


@needs_qemu
def test_run_is_bit_exact_with_tflite_micro(dev):
    from stm32ai.validate.reference import random_inputs, run_tflm

    for seed in (1, 2):
        x = random_inputs(MODEL, 1, seed)
        ref = run_tflm(MODEL, x)[0]
        y, cycles = dev.run([x[0].reshape(dev.info.inputs[0].shape)])
        assert y[0].dtype == np.int8 and np.array_equal(y[0], ref.reshape(y[0].shape))
        assert cycles > 0


@needs_qemu
def test_validate_cli_target_mode_matches(target_url, capsys, tmp_path):
    js = tmp_path / "v.json"
    assert main(["validate", str(MODEL), "--mode", "target", "--port", target_url, "-n", "2",
                 "--json", str(js)]) == 0
    out = capsys.readouterr().out
    # an emulated board reports instructions, never cycles
    assert "result: match" in out and "firmware on qemu-netduinoplus2" in out and "instructions mean" in out
    doc = json.loads(js.read_text())
    assert doc["passed"] and len(doc["target"]["instructions"]) == 2 and doc["target"]["board"] == "qemu-netduinoplus2"
    assert doc["target"]["unit"] == "instructions" and "cycles" not in doc["target"]
    assert doc["target"]["layers"] == []          # built without --profile: no PROFILE request
    tflm = next(r for r in doc["references"] if r["name"] == "tflm")
    assert tflm["verdict"] and tflm["outputs"][0]["max_lsb"] == 0


@needs_qemu
def test_wrong_model_signature_exits_2(target_url, capsys):
    assert main(["validate", str(OTHER_MODEL), "--mode", "target", "--port", target_url]) == 2
    one_line_error(capsys, "signature", "dense_int8.tflite")


@needs_qemu
def test_flipped_crc_gets_an_error_and_the_next_frame_works(dev):
    x = _input(dev)
    bad = bytearray(encode_frame(MsgType.RUN, seq := dev.next_seq(), x[0].tobytes()))
    bad[-2] ^= 0x40
    dev.send(bytes(bad))
    _expect_error(dev, seq, ErrorCode.BAD_CRC)
    y, _ = dev.run(x)
    assert y[0].shape == (1, 7, 9, 5)


@needs_qemu
def test_truncated_frame_then_pause_then_valid_frame(dev):
    x = _input(dev)
    expected, _ = dev.run(x)
    frame = encode_frame(MsgType.RUN, cut := dev.next_seq(), x[0].tobytes())
    dev.send(frame[:40])          # header + part of the payload, then silence
    time.sleep(0.5)               # > the device's 50 ms inter-byte timeout
    # the drop is reported with the cut frame's seq and the payload bytes that arrived
    assert decode_error(_expect_error(dev, cut, ErrorCode.TIMEOUT))[2] == 40 - 10
    seq = dev.next_seq()
    dev.send(encode_frame(MsgType.RUN, seq, x[0].tobytes()))
    f = dev.wait_reply({seq}, 60.0)  # an upper bound: a loaded CI machine starves QEMU
    assert f is not None and f.type == MsgType.RUN | MsgType.REPLY
    assert f.payload[8:] == expected[0].tobytes()


@needs_qemu
def test_run_resends_a_frame_the_device_dropped_mid_way(dev):
    """Bytes that stall longer than the device's inter-byte timeout (a loaded host) cost a
    resend, not a hang: the device reports TIMEOUT at once and `run` sends the frame again."""
    x = _input(dev)
    expected, _ = dev.run(x)
    real_send, calls = dev.send, []

    def stalling_send(data: bytes) -> None:
        calls.append(len(data))
        if len(calls) == 1:       # the first RUN stalls after 30 bytes of its frame
            real_send(data[:30])
            time.sleep(0.5)
            real_send(data[30:])
        else:
            real_send(data)

    dev.send = stalling_send
    try:
        y, _ = dev.run(x, timeout=60.0)
    finally:
        dev.send = real_send
    assert len(calls) == 2 and np.array_equal(y[0], expected[0])


@needs_qemu
def test_garbage_before_a_frame_is_skipped(dev):
    x = _input(dev)
    expected, _ = dev.run(x)
    dev.send(b"hello device\r\n\x00\xff\xa5\x13" + bytes(range(0, 256, 3)))
    y, _ = dev.run(x)
    assert np.array_equal(y[0], expected[0])


@needs_qemu
def test_protocol_errors(dev):
    seq = dev.next_seq()
    dev.send(encode_frame(0x42, seq))
    _expect_error(dev, seq, ErrorCode.UNKNOWN_TYPE)
    seq = dev.next_seq()
    dev.send(encode_frame(MsgType.RUN, seq, b"\x00" * 5))
    assert decode_error(_expect_error(dev, seq, ErrorCode.PAYLOAD_SIZE))[2] == 189
    seq = dev.next_seq()
    dev.send(encode_frame(MsgType.HELLO, seq, version=VERSION + 1))
    assert decode_error(_expect_error(dev, seq, ErrorCode.VERSION))[2] == VERSION
    seq = dev.next_seq()
    dev.send(encode_frame(MsgType.RUN, seq, bytes(100_000))[:10])   # length beyond the device's limit
    _expect_error(dev, seq, ErrorCode.BAD_LENGTH)
    assert dev.hello().signature == dev.info.signature                # still serving


@needs_qemu
def test_profile_request_to_a_firmware_without_profiling(dev):
    # backwards compatibility: the host only asks when HELLO flag bit 2 is set; a firmware built
    # without -DAI_PROFILE answers PROFILE like any request it does not serve
    assert not dev.info.profile and dev.profile() == []
    seq = dev.next_seq()
    dev.send(encode_frame(MsgType.PROFILE, seq))
    _expect_error(dev, seq, ErrorCode.UNKNOWN_TYPE)
    assert dev.hello().signature == dev.info.signature                # still serving
