"""Build a generated project and run it on its emulated board (`stm32ai run PROJECT`).

    elf = build_project(project_dir)                      # make; first compiler error on failure
    code, uart = run_qemu(elf, board, timeout_s=60)       # qemu-system-arm, semihosting exit code

run_qemu never hangs: a hard timeout kills QEMU (and returns TIMEOUT_EXIT_CODE); QEMU's own
start-up errors become Stm32aiError. The UART output is streamed line by line to `stream`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from stm32ai.boards import Board, load_board
from stm32ai.errors import Stm32aiError
from stm32ai.project.demo_output import format_layers, parse_demo_output

__all__ = ["TIMEOUT_EXIT_CODE", "build_project", "qemu_command", "qemu_serial_server", "read_manifest",
           "run_project_cli", "run_qemu"]

TIMEOUT_EXIT_CODE = 124   # like timeout(1): the guest did not finish in time
QEMU = "qemu-system-arm"
# The demo's verdicts that are a success: it matched, or it had nothing to compare with
# (generated without a reference: timing and memory only).
_RESULT_OK = re.compile(r"^result: (match|no-reference)$", re.M)
_ERR_LINE = re.compile(r"(^|\s)(fatal )?error:|undefined reference|region `[^']*' overflowed|"
                       r"will not fit in region|overlaps section|No rule to make target|\*\*\*")


def read_manifest(project: Path) -> dict:
    f = Path(project) / "stm32ai_project.json"
    if not f.is_file():
        raise Stm32aiError(f"'{project}' is not an stm32ai project (no stm32ai_project.json): "
                           "generate one with `stm32ai generate MODEL --board B`")
    try:
        return json.loads(f.read_text())
    except (OSError, ValueError) as e:
        raise Stm32aiError(f"cannot read {f}: {e}") from None


def project_board(project: Path) -> tuple[dict, Board]:
    """The project's manifest and its board (the board file it was generated from when it is
    still there, else the board id)."""
    m = read_manifest(project)
    ref = m.get("board_file") if m.get("board_file") and Path(m["board_file"]).is_file() else m.get("board")
    if not ref:
        raise Stm32aiError(f"{project}/stm32ai_project.json names no board")
    return m, load_board(ref)


def _jobs() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def check_toolchain(make: str = "make") -> None:
    """make and arm-none-eabi-gcc on PATH, else one line saying what to install."""
    if shutil.which(make) is None:
        raise Stm32aiError(f"'{make}' not found: install GNU make (and gcc-arm-none-eabi)")
    if shutil.which("arm-none-eabi-gcc") is None:
        raise Stm32aiError("arm-none-eabi-gcc not found: install gcc-arm-none-eabi and "
                           "libnewlib-arm-none-eabi (Debian/Ubuntu)")


def build_project(path: Path, *, jobs: int | None = None, make: str = "make",
                  extra_args: list[str] | None = None, log: Callable[[str], None] | None = None) -> Path:
    """Run make in a generated project; returns the ELF. Raises Stm32aiError with the compiler's
    first error line on failure."""
    path = Path(path)
    manifest = read_manifest(path)
    check_toolchain(make)
    cmd = [make, "-C", str(path), f"-j{jobs or _jobs()}", *(extra_args or [])]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace")
    if log is not None:
        for line in p.stdout.splitlines():
            log(line)
    if p.returncode != 0:
        lines = p.stdout.splitlines()
        first = next((ln for ln in lines if _ERR_LINE.search(ln)), None) or \
            next((ln for ln in reversed(lines) if ln.strip()), "make failed")
        raise Stm32aiError(f"build of {path} failed: {first.strip()}")
    elf = path / manifest.get("elf", "build/firmware.elf")
    if not elf.is_file():
        raise Stm32aiError(f"build of {path} produced no {elf.name}")
    return elf


def _resolve(project_or_elf: Path) -> Path:
    p = Path(project_or_elf)
    if p.is_dir():
        elf = p / read_manifest(p).get("elf", "build/firmware.elf")
        if not elf.is_file():
            raise Stm32aiError(f"{elf} not found: build the project first (make, or stm32ai run)")
        return elf
    if not p.is_file():
        raise Stm32aiError(f"'{p}' not found")
    return p


def qemu_command(elf: Path, board: Board, *, icount: bool = True, serial_index: int | None = None,
                 serial: str = "stdio", machine: str | None = None) -> list[str]:
    """The qemu-system-arm command line that runs `elf` on the board's emulated machine."""
    if machine is None:
        if board.emulation is None:
            raise Stm32aiError(f"board {board.id} is not emulated: flash it (make flash) and read "
                               "its output with `stm32ai monitor`")
        machine = board.emulation.qemu_machine
    idx = board.emulation.serial_index if (serial_index is None and board.emulation) else (serial_index or 0)
    cmd = [QEMU, "-M", machine, "-nographic", "-monitor", "none"]
    for _ in range(idx):
        cmd += ["-serial", "null"]
    cmd += ["-serial", serial, "-semihosting-config", "enable=on,target=native"]
    if icount:   # the board's counter then counts instructions (Emulation.icount_shift)
        shift = board.emulation.icount_shift if board.emulation else 0
        cmd += ["-icount", f"shift={shift}"]
    cmd += ["-kernel", str(elf)]
    return cmd


def demo_passed(text: str) -> bool:
    """The demo's verdict from its UART text: every model's `result:` is match (or no-reference)."""
    out = parse_demo_output(text)
    return out.all_passed if out.models else bool(_RESULT_OK.search(text))


def run_qemu(project_or_elf: Path, board: Board, timeout_s: float = 60.0, icount: bool = True,
             stream: Callable[[str], None] | None = None, *, serial_index: int | None = None,
             machine: str | None = None, stop_on_done: bool = False,
             serial: str = "stdio") -> tuple[int, str]:
    """Run a firmware on the board's QEMU machine; returns (exit_code, uart_text).

    exit_code is QEMU's: the demo's semihosting verdict (0 match, 1 mismatch or error), or
    TIMEOUT_EXIT_CODE when `timeout_s` elapsed (QEMU is killed). With `stop_on_done` QEMU is
    stopped as soon as the demo prints `done: 1` (for firmware without a semihosting exit) and
    the code is 0 for `result: match` or `result: no-reference`, else 1. `stream` gets each UART line as it arrives.
    `serial` is QEMU's chardev for the console, e.g. "tcp:127.0.0.1:4321,server=on,wait=on" to
    reach it through pyserial's socket:// URL (the returned text is then only QEMU's own output).
    """
    elf = _resolve(Path(project_or_elf))
    if shutil.which(QEMU) is None:
        raise Stm32aiError(f"{QEMU} not found: install qemu-system-arm (Debian: qemu-system-arm)")
    cmd = qemu_command(elf, board, icount=icount, serial_index=serial_index, machine=machine,
                       serial=serial)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    chunks: list[str] = []
    err: list[bytes] = []
    done = threading.Event()

    def read_out() -> None:
        assert proc.stdout is not None
        pending = ""
        while True:
            b = proc.stdout.read1(4096) if hasattr(proc.stdout, "read1") else proc.stdout.read(4096)
            if not b:
                break
            text = b.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "")
            chunks.append(text)
            pending += text
            while "\n" in pending:
                line, pending = pending.split("\n", 1)
                if stream is not None:
                    stream(line)
                if stop_on_done and line.strip() == "done: 1":
                    done.set()
        if pending and stream is not None:
            stream(pending)

    def read_err() -> None:
        assert proc.stderr is not None
        for b in iter(lambda: proc.stderr.read(4096), b""):
            err.append(b)

    threads = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    code: int | None = None
    stopped = False
    while True:
        code = proc.poll()
        if code is not None:
            break
        if done.is_set():
            stopped = True
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    if code is None:
        _kill(proc)
    for t in threads:
        t.join(timeout=2.0)
    text = "".join(chunks)
    if stopped:
        return (0 if demo_passed(text) else 1), text
    if code is None:
        return TIMEOUT_EXIT_CODE, text
    stderr = b"".join(err).decode("utf-8", errors="replace")
    if code != 0 and not text:
        msg = next((ln for ln in stderr.splitlines() if ln.strip()), f"exit code {code}")
        raise Stm32aiError(f"{QEMU} failed: {msg.strip()}")
    return code, text


@contextmanager
def qemu_serial_server(elf: Path, board: Board, *, icount: bool = False) -> Iterator[str]:
    """Run `elf` on the board's QEMU machine with its console on a local TCP server; yields the
    pyserial URL (`socket://127.0.0.1:PORT`). QEMU waits for the first client before starting
    the guest (wait=on) and accepts a new client after one disconnects. QEMU is killed on exit.

    No -icount by default: the guest's clock then follows real time, so the timeouts of a
    UART protocol mean what they say (with -icount a polling loop's virtual time runs ~150x
    slower than the wall clock)."""
    if shutil.which(QEMU) is None:
        raise Stm32aiError(f"{QEMU} not found: install qemu-system-arm (Debian: qemu-system-arm)")
    with socket.socket() as s:     # a free port; QEMU binds it right after
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = qemu_command(Path(elf), board, icount=icount,
                       serial=f"tcp:127.0.0.1:{port},server=on,wait=on")
    kick = board.emulation is not None and board.emulation.serial_rx_kick
    tmp = Path(tempfile.mkdtemp(prefix="stm32ai-qmp-")) if kick else None
    if tmp is not None:
        # HMP: its socket is served by the main loop (QMP's has its own I/O thread)
        cmd[cmd.index("-monitor") + 1] = f"unix:{tmp / 'mon.sock'},server=on,wait=off"
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    stop = threading.Event()
    try:
        deadline = time.monotonic() + 10.0
        while True:     # wait until QEMU listens, without connecting (that would start the guest)
            if proc.poll() is not None:
                err = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace").strip()
                raise Stm32aiError(f"{QEMU} failed: {err.splitlines()[0] if err else f'exit {proc.returncode}'}")
            if _listening(port) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if tmp is not None:
            threading.Thread(target=_kick_main_loop, args=(tmp / "mon.sock", stop), daemon=True).start()
        yield f"socket://127.0.0.1:{port}"
    finally:
        stop.set()
        if proc.poll() is None:
            _kill(proc)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _kick_main_loop(path: Path, stop: threading.Event, period_s: float = 0.0005) -> None:
    """Wake QEMU's main loop every `period_s` (an empty line to its HMP monitor socket)
    so that a UART model which never calls qemu_chr_fe_accept_input still gets its next byte:
    the chardev re-checks can_receive on every main-loop iteration (Emulation.serial_rx_kick)."""
    deadline = time.monotonic() + 10.0
    with socket.socket(socket.AF_UNIX) as s:
        while not stop.is_set():
            try:
                s.connect(str(path))
                break
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)
        s.setblocking(False)
        while not stop.is_set():
            try:
                s.send(b"\n")
                s.recv(65536)       # the monitor's prompts
            except BlockingIOError:
                pass
            except OSError:
                return
            time.sleep(period_s)


def _listening(port: int) -> bool:
    """Whether some socket listens on 127.0.0.1:port (Linux /proc; elsewhere assume yes)."""
    try:
        text = Path("/proc/net/tcp").read_text()
    except OSError:
        return True
    return any(ln.split()[1] == f"0100007F:{port:04X}" and ln.split()[3] == "0A"
               for ln in text.splitlines()[1:] if len(ln.split()) > 3)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)   # the session QEMU leads (started by us)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        pass


def _report_hardware_firmware(out: Any, board: Board, err: Any) -> None:
    """A real board's firmware in QEMU: the clock it reached there (its `clock:` line says why) and
    its SysTick ticks as instructions (QEMU -icount: one instruction per 2^shift ns)."""
    hz = out.fields.get("sysclk_hz", "")
    if not hz.isdigit() or out.unit != "instructions" or out.count is None:
        return
    step = 1e9 / int(hz) * (board.emulation.ns_per_instruction if board.emulation else 1)
    print(f"emulated {board.id} runs at {int(hz) / 1e6:g} MHz (clock: {out.fields.get('clock', '?')}); "
          f"instructions: {out.count:,} (SysTick ticks under -icount, resolution {step:,.0f} instructions)",
          file=err)


def run_project_cli(project: Path, timeout_s: float = 300.0) -> int:
    """`stm32ai run PROJECT`: build, run on the emulated board, stream the UART, return the verdict.

    Exit codes: 0 the demo printed `result: match` (or `result: no-reference`: a project generated
    without a reference, nothing to check); 1 mismatch, fault or timeout; 2 bad input
    (not a project, not an emulated board, build failure: raised as Stm32aiError)."""
    project = Path(project)
    m, board = project_board(project)
    if board.emulation is None:
        raise Stm32aiError(f"board {board.id} is not emulated: flash it (make -C {project} flash) and "
                           "read its output with `stm32ai monitor --port /dev/ttyACM0`")
    err = sys.stderr
    print(f"building {project} ...", file=err, flush=True)
    elf = build_project(project)
    print(f"running {elf} on {board.emulation.qemu_machine} (qemu, -icount shift="
          f"{board.emulation.icount_shift}: counts are instructions)", file=err, flush=True)
    # validation firmware, and a real board's firmware, serve the UART protocol after `done: 1`
    # instead of exiting
    code, text = run_qemu(elf, board, timeout_s=timeout_s, stream=lambda ln: print(ln, flush=True),
                          stop_on_done=bool(m.get("validation")) or not board.is_emulated)
    if code == TIMEOUT_EXIT_CODE:
        print(f"stm32ai: the firmware did not finish within {timeout_s:g} s", file=err)
        return 1
    out = parse_demo_output(text, board)
    if not board.is_emulated:
        _report_hardware_firmware(out, board, err)
    if out.layers:   # a --profile firmware: the per-layer table, largest share first
        print(f"per-layer {out.fields.get('profile_unit', out.unit)} (--profile; the headline figure "
              "includes the profiling overhead):", file=err)
        layers = sorted(out.layers, key=lambda x: -x.count)
        for ln in format_layers(layers, out.fields.get("profile_unit", "count"), out.profile_total):
            print(ln, file=err)
    if len(out.models) > 1:  # a multi-model firmware: one verdict line per model
        for sec in out.models:
            print(f"model {sec.name}: {sec.result or 'no result'}"
                  + (f", {sec.count:,} {sec.unit}" if sec.count is not None else ""), file=err)
    if code == 0 and demo_passed(text):
        if "result: no-reference" in text:
            print("stm32ai: the project embeds no expected output (generated without a reference): "
                  "nothing was checked", file=err)
        return 0
    return 1
