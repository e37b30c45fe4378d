"""Frame codec of the validation protocol, version 1 (docs/uart_protocol.md).

Pure bytes in, bytes out: no I/O here (the serial client is `stm32ai.validate.target`), so the
codec is unit-tested without a device. The device side is demo/ai_validation.c.

    frame = A5 5A | version u8 | type u8 | seq u16 | length u32 | payload | crc32 u32   (LE)

The CRC-32 (IEEE 802.3, as zlib.crc32) covers version..payload.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from stm32ai.ir import DTYPE_CODES

__all__ = ["ERROR_TEXT", "HEADER", "MAGIC", "MAX_PAYLOAD", "VERSION", "DeviceInfo", "ErrorCode", "Frame",
           "FrameDecoder", "MsgType", "TensorInfo", "crc32", "decode_error", "encode_frame",
           "parse_hello", "parse_profile_reply", "parse_run_reply"]

MAGIC = b"\xa5\x5a"
VERSION = 1
HEADER = struct.Struct("<2sBBHI")        # magic, version, type, seq, length
CRC = struct.Struct("<I")
# Longest payload the host accepts in a reply; a corrupted length field beyond it is resynced.
MAX_PAYLOAD = 64 * 1024 * 1024


FLAG_MODELS = 0x08  # HELLO flag bit 3: a multi-model firmware


class MsgType(IntEnum):
    HELLO = 0x01
    RUN = 0x02
    BYE = 0x03
    PROFILE = 0x04        # per-layer counts of the last RUN (firmware with HELLO flag bit 2)
    RUN_MODEL = 0x05      # RUN addressed to one model: u8 index + inputs (HELLO flag bit 3)
    ERROR = 0x7F
    REPLY = 0x80          # reply type = request type | REPLY


class ErrorCode(IntEnum):
    BAD_CRC = 1
    BAD_LENGTH = 2
    UNKNOWN_TYPE = 3
    PAYLOAD_SIZE = 4
    VERSION = 5
    RUN_FAILED = 6
    NO_MODEL = 7
    TIMEOUT = 8


ERROR_TEXT = {
    ErrorCode.BAD_CRC: "the device received a frame with a bad CRC",
    ErrorCode.BAD_LENGTH: "payload longer than the device accepts",
    ErrorCode.UNKNOWN_TYPE: "the device does not know this message type",
    ErrorCode.PAYLOAD_SIZE: "payload size differs from what the device expects",
    ErrorCode.VERSION: "protocol version mismatch",
    ErrorCode.RUN_FAILED: "the model failed to run on the device",
    ErrorCode.NO_MODEL: "the firmware has no model with this index",
    ErrorCode.TIMEOUT: "the frame stopped mid-way (the device's inter-byte timeout) and was dropped",
}

# ai_dtype_code (DLPack) + bits -> numpy dtype
_DTYPES = {v: k for k, v in DTYPE_CODES.items()}


def crc32(data: bytes, crc: int = 0) -> int:
    return zlib.crc32(data, crc) & 0xFFFFFFFF


def encode_frame(msg_type: int, seq: int, payload: bytes = b"", version: int = VERSION) -> bytes:
    body = HEADER.pack(MAGIC, version, msg_type, seq & 0xFFFF, len(payload))[2:] + payload
    return MAGIC + body + CRC.pack(crc32(body))


@dataclass(frozen=True)
class Frame:
    version: int
    type: int
    seq: int
    payload: bytes


class FrameDecoder:
    """Incremental decoder: feed() bytes as they come, get complete frames back.

    Anything that is not a valid frame (text before the first frame, line noise, a frame with a
    bad CRC or an absurd length) is skipped one byte at a time until the next magic, so the
    decoder resynchronises by itself. `skipped` counts the discarded bytes, `bad_crc` the frames
    rejected for their CRC.
    """

    def __init__(self, max_payload: int = MAX_PAYLOAD) -> None:
        self._buf = bytearray()
        self.max_payload = max_payload
        self.skipped = 0
        self.bad_crc = 0

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames = []
        while True:
            f = self._next()
            if f is None:
                return frames
            frames.append(f)

    def _drop(self, n: int) -> None:
        del self._buf[:n]
        self.skipped += n

    def _next(self) -> Frame | None:
        buf = self._buf
        while True:
            i = buf.find(MAGIC)
            if i < 0:
                # keep a trailing A5: it may be the first half of the next magic
                self._drop(len(buf) - 1 if buf.endswith(MAGIC[:1]) else len(buf))
                return None
            self._drop(i)
            if len(buf) < HEADER.size:
                return None
            _, version, msg_type, seq, length = HEADER.unpack_from(buf)
            if length > self.max_payload:
                self._drop(1)
                continue
            end = HEADER.size + length
            if len(buf) < end + CRC.size:
                return None
            body = bytes(buf[2:end])
            if CRC.unpack_from(buf, end)[0] != crc32(body):
                self.bad_crc += 1
                self._drop(1)
                continue
            del buf[:end + CRC.size]
            return Frame(version, msg_type, seq, bytes(body[HEADER.size - 2:]))


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]
    size_bytes: int


@dataclass(frozen=True)
class DeviceInfo:
    """The HELLO reply: what the firmware runs."""

    version: int
    signature: int
    cpu_hz: int
    max_payload: int
    flags: int
    model: str
    board: str
    tool_version: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    # a multi-model firmware (flag bit 3): the index of the model described, and all models' names
    model_index: int = 0
    models: tuple[str, ...] = ()

    @property
    def emulated(self) -> bool:
        return bool(self.flags & 0x02)

    @property
    def cycle_counter(self) -> str:
        return "dwt" if self.flags & 0x01 else "systick"

    @property
    def profile(self) -> bool:
        """The firmware was built with per-layer profiling (serves PROFILE)."""
        return bool(self.flags & 0x04)

    @property
    def unit(self) -> str:
        """What RUN's count (and PROFILE's) measures: instructions under QEMU, else cycles."""
        return "instructions" if self.emulated else "cycles"


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("HELLO reply is too short")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def str(self) -> str:
        return self.take(self.take(1)[0]).decode("utf-8", errors="replace")

    def tensor(self) -> TensorInfo:
        code, bits, ndim, _, size = struct.unpack("<BBBBI", self.take(8))
        shape = struct.unpack(f"<{ndim}I", self.take(4 * ndim))
        return TensorInfo(_DTYPES.get((code, bits), f"code{code}/{bits}"), tuple(shape), size)


def parse_hello(frame: Frame) -> DeviceInfo:
    r = _Reader(frame.payload)
    sig, cpu_hz, max_payload, n_in, n_out, flags, _ = struct.unpack("<IIIBBBB", r.take(16))
    model, board, tool = r.str(), r.str(), r.str()
    ins = [r.tensor() for _ in range(n_in)]
    outs = [r.tensor() for _ in range(n_out)]
    index, names = 0, ()
    if flags & FLAG_MODELS:  # appended after the I/O: u8 described model, u8 count, the names
        index, count = r.take(2)
        names = tuple(r.str() for _ in range(count))
        if index >= count:
            raise ValueError(f"HELLO reply describes model {index} of {count}")
    return DeviceInfo(frame.version, sig, cpu_hz, max_payload, flags, model, board, tool, ins, outs, index, names)


def parse_run_reply(frame: Frame, outputs: list[TensorInfo]) -> tuple[list[np.ndarray], int]:
    """(outputs, cycles) from a RUN reply."""
    p = frame.payload
    want = 8 + sum(t.size_bytes for t in outputs)
    if len(p) != want:
        raise ValueError(f"RUN reply has {len(p)} bytes, expected {want}")
    cycles = struct.unpack_from("<Q", p)[0]
    res, pos = [], 8
    for t in outputs:
        res.append(np.frombuffer(p[pos:pos + t.size_bytes], dtype=np.dtype(t.dtype).newbyteorder("<"))
                   .astype(t.dtype).reshape(t.shape))
        pos += t.size_bytes
    return res, cycles


def parse_profile_reply(frame: Frame) -> list[tuple[int, int]]:
    """[(graph.json node, count), ...] from a PROFILE reply: u32 n, n x (u16 node, u16 0, u64)."""
    p = frame.payload
    if len(p) < 4:
        raise ValueError("PROFILE reply is too short")
    n = struct.unpack_from("<I", p)[0]
    if len(p) != 4 + 12 * n:
        raise ValueError(f"PROFILE reply has {len(p)} bytes, expected {4 + 12 * n} for {n} layers")
    return [(node, count) for node, _, count in struct.iter_unpack("<HHQ", p[4:])]


def decode_error(frame: Frame) -> tuple[int, int, int]:
    """(code, request type, detail) of an ERROR frame."""
    if len(frame.payload) < 8:
        return 0, 0, 0
    code, req, _, detail = struct.unpack_from("<BBHI", frame.payload)
    return code, req, detail
