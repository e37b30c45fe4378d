"""`stm32ai monitor --port URL`: read and pretty-print the demo's `key: value` UART output.

Any pyserial URL works: `/dev/ttyACM0` (ST-LINK virtual COM port), `socket://127.0.0.1:4321`
(QEMU `-serial tcp::4321,server=on`), `loop://`... The monitor stops after the demo's
`done: 1` line (or after `timeout_s`, or Ctrl-C) and returns 0 when the demo reported
`result: match` (or `result: no-reference`: a demo generated without a reference), 1 when it
reported a mismatch, an error or a fault, 0 when it saw no verdict.
"""

from __future__ import annotations

import time
from typing import Any

from stm32ai.errors import Stm32aiError

__all__ = ["monitor", "parse_line"]

_OK = (None, "match", "no-reference")
_STYLE = {"match": "bold green", "no-reference": "bold yellow", "mismatch": "bold red", "error": "bold red",
          "fault": "bold red"}


def parse_line(line: str) -> tuple[str, str] | None:
    """`key: value` -> (key, value); None for anything else."""
    if ": " not in line:
        return None
    k, v = line.split(": ", 1)
    k = k.strip()
    if not k or " " in k:
        return None
    return k, v.strip()


def _open(port: str, baud: int) -> Any:
    try:
        import serial
    except ImportError:  # pragma: no cover - a dependency of the package
        raise Stm32aiError("pyserial is not installed (pip install pyserial)") from None
    try:
        return serial.serial_for_url(port, baudrate=baud, timeout=0.2)
    except (serial.SerialException, ValueError, OSError) as e:
        raise Stm32aiError(f"cannot open {port}: {e}") from None


def monitor(port: str, baud: int = 115200, timeout_s: float = 0.0, out: Any = None) -> int:
    import serial
    from rich.console import Console

    con = out or Console(highlight=False)
    ser = _open(port, baud)
    verdict: str | None = None
    buf = b""
    deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
    try:
        while deadline is None or time.monotonic() < deadline:
            try:
                chunk = ser.read(max(1, ser.in_waiting))
            except (serial.SerialException, OSError) as e:   # port closed, socket disconnected
                con.print(f"[yellow]monitor: {e}[/]")
                break
            if not chunk:
                continue
            buf += chunk
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                line = raw.decode("utf-8", errors="replace").rstrip("\r")
                kv = parse_line(line)
                if kv is None:
                    con.print(line, markup=False)
                    continue
                k, v = kv
                if k == "result":
                    verdict = v
                style = _STYLE.get(v, "") if k == "result" else ""
                con.print(f"[cyan]{k:>18}[/]: " + (f"[{style}]{v}[/]" if style else v.replace("[", r"\[")))
                if k == "done":
                    return 0 if verdict in _OK else 1
    except KeyboardInterrupt:
        pass
    finally:
        ser.close()
    return 0 if verdict in _OK else 1
