"""`stm32ai validate --mode target`: the model run by the firmware, over UART, vs the references.

    with TargetClient.open("socket://127.0.0.1:4321") as dev:   # or /dev/ttyACM0
        info = dev.hello()                      # version handshake, what the firmware runs
        outputs, count = dev.run([x0, x1])      # one inference; count in info.unit
        layers = dev.profile()                  # [(graph.json node, count)] if info.profile

Every read has a deadline: a silent or dead device gives a one-line Stm32aiError, never a
hang. Replies are checked for CRC (FrameDecoder) and sequence number; stale replies (to an
earlier retry) are skipped. The protocol is in docs/uart_protocol.md.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from stm32ai.errors import Stm32aiError
from stm32ai.sanitize import quote
from stm32ai.validate.protocol import (
    ERROR_TEXT,
    VERSION,
    DeviceInfo,
    ErrorCode,
    Frame,
    FrameDecoder,
    MsgType,
    decode_error,
    encode_frame,
    parse_hello,
    parse_profile_reply,
    parse_run_reply,
)

__all__ = ["TargetClient", "TargetError", "emulated_target", "validate_target"]

DEFAULT_TIMEOUT = 30.0     # per reply; a large model on a slow core (or QEMU) takes seconds
HELLO_RETRY_S = 0.5        # the device may still be booting or running its self-test


class TargetError(Stm32aiError):
    """The device answered with an ERROR frame."""

    def __init__(self, code: int, request: int, detail: int) -> None:
        try:
            text = ERROR_TEXT[ErrorCode(code)]
        except ValueError:
            text = f"unknown error code {code}"
        super().__init__(f"device error {code} ({text}) on request type 0x{request:02x}, detail {detail}")
        self.code, self.request, self.detail = code, request, detail


class TargetClient:
    """Host side of the protocol over any pyserial URL."""

    def __init__(self, ser: Any, url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.ser, self.url, self.timeout = ser, url, timeout
        self.decoder = FrameDecoder()
        self._pending: list[Frame] = []
        self._seq = 0
        self.info: DeviceInfo | None = None
        self.model: int | None = None  # the model of a multi-model firmware requests address

    # ---- connection ----
    @classmethod
    def open(cls, url: str, *, baud: int = 115200, timeout: float = DEFAULT_TIMEOUT,
             connect_timeout: float = 0.0) -> TargetClient:
        """Open `url`; retry for `connect_timeout` s while the other end is not there yet (QEMU
        starting)."""
        try:
            import serial
        except ImportError:  # pragma: no cover - a dependency of the package
            raise Stm32aiError("pyserial is not installed (pip install pyserial)") from None
        from stm32ai.project.monitor import check_port_url

        check_port_url(url)
        deadline = time.monotonic() + connect_timeout
        while True:
            try:
                ser = serial.serial_for_url(url, baudrate=baud, timeout=0.05, write_timeout=timeout)
                return cls(ser, url, timeout)
            except (serial.SerialException, ValueError, OSError) as e:
                if time.monotonic() >= deadline:
                    raise Stm32aiError(f"cannot open {url}: {e}") from None
                time.sleep(0.1)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ser.close()

    def __enter__(self) -> TargetClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- frames ----
    def next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0xFFFF
        return self._seq

    def send(self, data: bytes) -> None:
        """Raw bytes to the device (tests use it for corrupted frames)."""
        import serial

        try:
            self.ser.write(data)
            self.ser.flush()
        except (serial.SerialException, OSError) as e:
            raise Stm32aiError(f"write to {self.url} failed: {e}") from None

    def read_frame(self, timeout: float) -> Frame | None:
        """The next valid frame, or None after `timeout` seconds."""
        import serial

        deadline = time.monotonic() + timeout
        while not self._pending:
            if time.monotonic() >= deadline:
                return None
            try:
                chunk = self.ser.read(max(1, self.ser.in_waiting))
            except (serial.SerialException, OSError) as e:
                raise Stm32aiError(f"read from {self.url} failed: {e}") from None
            if chunk:
                self._pending += self.decoder.feed(chunk)
        return self._pending.pop(0)

    def wait_reply(self, seqs: set[int], timeout: float) -> Frame | None:
        """The reply to one of `seqs`; replies to anything else (earlier retries) are skipped."""
        deadline = time.monotonic() + timeout
        while True:
            f = self.read_frame(max(0.0, deadline - time.monotonic()))
            if f is None or f.seq in seqs:
                return f

    def request(self, msg_type: int, payload: bytes = b"", timeout: float | None = None) -> Frame:
        """Send one request, return its reply; ERROR replies raise TargetError."""
        seq = self.next_seq()
        self.send(encode_frame(msg_type, seq, payload))
        t = self.timeout if timeout is None else timeout
        f = self.wait_reply({seq}, t)
        if f is None:
            raise Stm32aiError(f"no reply from {self.url} within {t:g} s "
                               f"(request {MsgType(msg_type).name}, seq {seq})")
        return self._check(f, msg_type)

    def _check(self, f: Frame, msg_type: int) -> Frame:
        if f.type == MsgType.ERROR:
            code, req, detail = decode_error(f)
            if code == ErrorCode.VERSION:
                raise Stm32aiError(f"the firmware speaks validation protocol v{detail}, this stm32ai "
                                   f"speaks v{VERSION}: regenerate the firmware with this stm32ai")
            raise TargetError(code, req, detail)
        if f.version != VERSION:
            raise Stm32aiError(f"the firmware speaks validation protocol v{f.version}, this stm32ai "
                               f"speaks v{VERSION}: regenerate the firmware with this stm32ai")
        if f.type != (msg_type | MsgType.REPLY):
            raise Stm32aiError(f"unexpected reply type 0x{f.type:02x} to {MsgType(msg_type).name}")
        return f

    # ---- messages ----
    def hello(self, timeout: float = 10.0, model: int | None = None) -> DeviceInfo:
        """Handshake: HELLO is resent every HELLO_RETRY_S until a reply or `timeout` (the device
        may be booting, running its self-test, or have lost our first bytes). `model`: the index
        of the model of a multi-model firmware to describe (and address from then on)."""
        deadline = time.monotonic() + timeout
        sent: set[int] = set()
        payload = b"" if model is None else bytes([model])
        self.model = model
        while time.monotonic() < deadline:
            seq = self.next_seq()
            sent.add(seq)
            self.send(encode_frame(MsgType.HELLO, seq, payload))
            f = self.wait_reply(sent, min(HELLO_RETRY_S, max(0.0, deadline - time.monotonic())))
            if f is None or (f.type == MsgType.ERROR and decode_error(f)[0] == ErrorCode.BAD_CRC):
                continue
            try:
                self.info = parse_hello(self._check(f, MsgType.HELLO))
            except ValueError as e:
                raise Stm32aiError(f"malformed HELLO reply from {self.url}: {e}") from None
            return self.info
        raise Stm32aiError(f"no reply from {self.url} within {timeout:g} s: is the validation firmware "
                           "running there? (stm32ai generate MODEL --board B [--validation], flash it)")

    def run(self, inputs: list[np.ndarray], timeout: float | None = None) -> tuple[list[np.ndarray], int]:
        """One inference: (outputs, cycles). A frame the device received corrupted (BAD_CRC) or
        cut short (TIMEOUT: our bytes stalled longer than its inter-byte timeout) is sent again,
        up to 3 times; neither ran anything."""
        if self.info is None:
            self.hello()
        assert self.info is not None
        payload = b"".join(np.ascontiguousarray(x, dtype=np.dtype(t.dtype).newbyteorder("<")).tobytes()
                           for x, t in zip(inputs, self.info.inputs, strict=True))
        msg = MsgType.RUN
        if self.model is not None and self.info.models:  # a multi-model firmware: name the model
            msg, payload = MsgType.RUN_MODEL, bytes([self.model]) + payload
        for attempt in range(3):
            try:
                f = self.request(msg, payload, timeout)
                break
            except TargetError as e:
                if e.code not in (ErrorCode.BAD_CRC, ErrorCode.TIMEOUT) or attempt == 2:
                    raise
        try:
            return parse_run_reply(f, self.info.outputs)
        except ValueError as e:
            raise Stm32aiError(f"malformed RUN reply from {self.url}: {e}") from None

    def profile(self, timeout: float | None = None) -> list[tuple[int, int]]:
        """Per-layer counts of the last RUN: [(graph.json node, count)]; [] when the firmware was
        built without profiling (HELLO flag bit 2 clear: the request is not even sent, so older
        firmware is never asked)."""
        if self.info is None:
            self.hello()
        assert self.info is not None
        if not self.info.profile:
            return []
        f = self.request(MsgType.PROFILE, timeout=timeout)
        try:
            return parse_profile_reply(f)
        except ValueError as e:
            raise Stm32aiError(f"malformed PROFILE reply from {self.url}: {e}") from None

    def bye(self, timeout: float = 2.0) -> None:
        """End the session: an emulated board then exits."""
        self.request(MsgType.BYE, timeout=timeout)


# ---------------------------------------------------------------------------------------------
# validate --mode target
# ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def emulated_target(model: Path, board_id: str, compiled: Any, workdir: Path | None = None, *,
                    profile: bool = False, icount: bool = False,
                    activations_pool: str | None = None) -> Iterator[str]:
    """Generate and build the validation firmware of `model` for an emulated board, run it in
    QEMU with its console on a local TCP port; yields the port's pyserial URL. `profile` builds
    it with per-layer profiling; `icount` runs QEMU with -icount so that the counts the firmware
    reports are instructions (its inter-byte timeout then lasts longer in wall time).
    `activations_pool` is generate's option (a model may be split across regions)."""
    from stm32ai.boards import load_board
    from stm32ai.project.build import generate_firmware_project, pool_list
    from stm32ai.project.run import build_project, qemu_serial_server
    from stm32ai.project.spec import Pools, ProjectModel
    from stm32ai.validate.vectors import test_vector

    board = load_board(board_id)
    if board.emulation is None:
        raise Stm32aiError(f"board {board_id} is not emulated: flash its firmware (stm32ai generate MODEL "
                           f"--board {board_id}, make flash) and pass --port (e.g. /dev/ttyACM0)")
    with tempfile.TemporaryDirectory(prefix="stm32ai-target-") as tmp:
        d = Path(workdir or tmp)
        # No expected output: the references run once, in validate_model, which reports a missing one.
        stage = d / "project"
        stage.mkdir(parents=True, exist_ok=True)
        print(f"building the validation firmware for {board_id} ...", file=sys.stderr, flush=True)
        vec = test_vector(model, compiled, expected=False)
        generate_firmware_project(stage, board, [ProjectModel("network", compiled, vec, model.name)],
                                  Pools(pool_list(activations_pool), compiled.weights_pool),
                                  validation=True, profile=profile)
        elf = build_project(stage)
        with qemu_serial_server(elf, board, icount=icount) as url:
            yield url


def _select_model(dev: TargetClient, info: DeviceInfo, sel: str, url: str, timeout: float) -> DeviceInfo:
    """--model NAME or INDEX: the model of a multi-model firmware the requests address (HELLO
    with its index describes it). A single-model firmware accepts its own name or 0."""
    names = list(info.models) or [info.model]
    if sel in names:
        k = names.index(sel)
    elif sel.isdigit() and int(sel) < len(names):
        k = int(sel)
    else:
        raise Stm32aiError(f"--model {quote(sel)}: the firmware on {url} has no such model (its models: "
                           + ", ".join(f"{i} {quote(n)}" for i, n in enumerate(names)) + ")")
    if not info.models:
        return info
    return dev.hello(timeout=min(timeout, 10.0), model=k)


def _check_io(info: DeviceInfo, c: Any) -> None:
    g = c.graph
    for what, tids, dev in (("input", g.inputs, info.inputs), ("output", g.outputs, info.outputs)):
        if len(tids) != len(dev):
            raise Stm32aiError(f"the firmware's model has {len(dev)} {what}(s), this model {len(tids)}")
        for i, (tid, t) in enumerate(zip(tids, dev, strict=True)):
            want = g.tensors[tid]
            if tuple(want.shape) != t.shape or want.dtype != t.dtype:
                raise Stm32aiError(f"{what} {i}: the firmware has {t.dtype}{list(t.shape)}, this model "
                                   f"{want.dtype}{list(want.shape)}")


def _compiled_for_reported_board(model: Path, board_id: str, prune: bool, optimization: str, c: Any,
                                 sig: int) -> tuple[Any, int]:
    """The model compiled as for the board a device reports (weights budget, flash staging), when
    that board is known; else (c, sig) unchanged."""
    from stm32ai.boards import boards_dir
    from stm32ai.graphjson import model_signature
    from stm32ai.pipeline import compile_for_board

    # the device's string is untrusted: only the id of a board shipped with stm32ai (never a path)
    if board_id not in {f.stem for f in boards_dir().glob("*.yaml")}:
        return c, sig
    c2 = compile_for_board(model, "network", board_id, prune=prune, optimization=optimization)
    return c2, model_signature(c2.doc, c2.params)


def validate_target(model: Path, *, port: str | None, board: str | None, inputs: str | None, n: int,
                    seed: int, as_json: str | None, timeout: float = DEFAULT_TIMEOUT,
                    profile: bool = False, prune: bool = True, optimization: str = "balanced",
                    activations_pool: str | None = None, model_sel: str | None = None) -> int:
    from stm32ai.graphjson import model_signature
    from stm32ai.validate.reference import random_inputs
    from stm32ai.validate.run import load_inputs, report, validate_model

    if n < 1:
        raise Stm32aiError("-n must be at least 1")
    if not port and not board:
        raise Stm32aiError("--mode target needs --port URL (the board's UART, e.g. /dev/ttyACM0 or "
                           "socket://127.0.0.1:4321) or --board B for an emulated board")
    if model_sel is not None and not port:
        raise Stm32aiError("--model selects one model of a multi-model firmware behind --port (with --board "
                           "stm32ai builds a firmware of this one model)")
    if activations_pool and (port or not board):
        raise Stm32aiError("--activations-pool needs --board (it shapes the firmware stm32ai builds; a board "
                           "behind --port runs the firmware it was flashed with)")
    from stm32ai.pipeline import compile_for_board
    from stm32ai.project.build import pool_list

    c = compile_for_board(model, "network", board, prune=prune, optimization=optimization,
                          activations_pool=pool_list(activations_pool))
    sig = model_signature(c.doc, c.params)
    arrays = load_inputs(inputs, c) if inputs else random_inputs(model, n, seed)
    counts: list[int] = []
    layers: dict[int, list[int]] = {}      # graph.json node -> count per sample

    with contextlib.ExitStack() as stack:
        if port:
            url, connect = port, 0.0
        else:
            assert board is not None
            # -icount: the firmware's counts are then instructions (docs/bench.md)
            url, connect = stack.enter_context(emulated_target(model, board, c, profile=profile,
                                                               icount=True,
                                                               activations_pool=activations_pool)), 10.0
        dev = stack.enter_context(TargetClient.open(url, timeout=timeout, connect_timeout=connect))
        info = dev.hello(timeout=min(timeout, 10.0) if port else max(timeout, 30.0))
        if model_sel is not None:
            info = _select_model(dev, info, model_sel, url, timeout)
        if info.signature != sig and port and not board and info.board:
            # a firmware generated with --board B: its layers may be staged for B's flash
            # (docs/flash_staging.md); compile as for the board it reports and compare again
            c, sig = _compiled_for_reported_board(model, info.board, prune, optimization, c, sig)
        if info.signature != sig:
            others = (f" (its models: {', '.join(quote(m) for m in info.models)}; --model NAME picks one)"
                      if len(info.models) > 1 else "")
            raise Stm32aiError(f"the firmware on {url} runs model {quote(info.model)} (signature "
                               f"0x{info.signature:08x}), not {model.name} (0x{sig:08x}){others}: generate, "
                               "build and flash the firmware of this model")
        _check_io(info, c)

        def runner(_c: Any, samples: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
            outs = []
            for s in samples:
                y, cnt = dev.run(s)
                outs.append(y)
                counts.append(cnt)
                for node, k in dev.profile():
                    layers.setdefault(node, []).append(k)
            return outs

        res = validate_model(model, arrays, n, seed, runner=runner, compiled=c)
        unit = info.unit
        if not port and not info.emulated:
            # A real board's firmware in QEMU (emulation.firmware: hardware): its counts are
            # SysTick ticks at the clock it reached, under -icount: instructions after conversion.
            counts, layers, unit = _ticks_to_instructions(board or "", info.cpu_hz, counts, layers)
        res.subject = f"firmware on {info.board}"
        res.target = {"board": info.board, "model": info.model, "signature": f"0x{info.signature:08x}",
                      "cpu_hz": info.cpu_hz, "cycle_counter": info.cycle_counter, "emulated": info.emulated,
                      "unit": unit, unit: counts,
                      "layers": _layer_rows(c.doc, layers)}
        if not port:
            with contextlib.suppress(Stm32aiError):
                dev.bye()
    code = report(res, as_json)
    _print_counts(info, counts, icount=not port, unit=unit)
    _print_layers(info, res.target["layers"], unit)
    return code


def _ticks_to_instructions(board_id: str, clock_hz: int, counts: list[int], layers: dict[int, list[int]],
                           ) -> tuple[list[int], dict[int, list[int]], str]:
    from stm32ai.boards import load_board

    emu = load_board(board_id).emulation
    assert emu is not None

    def conv(ks: list[int]) -> list[int]:
        return [emu.ticks_to_instructions(k, clock_hz) for k in ks]
    return conv(counts), {n: conv(ks) for n, ks in layers.items()}, "instructions"


def _layer_rows(doc: dict[str, Any], layers: dict[int, list[int]]) -> list[dict[str, Any]]:
    """Per-layer mean counts; the kernel name comes from this host's graph.json (the firmware
    sends node indices only, and its signature proves the graphs are the same)."""
    nodes = doc["nodes"]
    rows = []
    for node, ks in layers.items():
        kernel = nodes[node]["attrs"].get("func_name", "?") if 0 <= node < len(nodes) else "?"
        rows.append({"node": node, "kernel": kernel, "mean": round(sum(ks) / len(ks)), "samples": ks})
    return rows


def _print_counts(info: DeviceInfo, counts: list[int], icount: bool, unit: str | None = None) -> None:
    if not counts:
        return
    unit = unit or info.unit
    mean = sum(counts) / len(counts)
    head = (f"target: {info.board}, model {info.model}, {len(counts)} inference(s): {unit} mean "
            f"{mean:,.0f} (min {min(counts):,}, max {max(counts):,})")
    if info.emulated:   # QEMU: instructions (with -icount), never cycles or milliseconds
        note = "QEMU -icount" if icount else "valid only if QEMU runs with -icount"
        print(f"{head}, emulated board ({note})")
    elif unit == "instructions":   # the board's own firmware in QEMU: SysTick at the clock it reached
        step = 1e9 / info.cpu_hz if info.cpu_hz else 0.0
        print(f"{head}, the board's firmware in QEMU -icount (SysTick at the {info.cpu_hz / 1e6:g} MHz "
              f"it runs at there: resolution {step:,.0f} instructions)")
    else:
        ms = mean * 1000.0 / info.cpu_hz if info.cpu_hz else 0.0
        print(f"{head} = {ms:.3f} ms at {info.cpu_hz / 1e6:g} MHz, {info.cycle_counter}")


def _print_layers(info: DeviceInfo, rows: list[dict[str, Any]], unit: str | None = None) -> None:
    from stm32ai.project.demo_output import Layer, format_layers

    unit = unit or info.unit
    if rows:
        print(f"per-layer {unit} (mean over the inferences; profiling adds a few per layer):")
        for ln in format_layers([Layer(r["node"], r["kernel"], r["mean"]) for r in rows], unit):
            print(ln)
