"""`stm32ai monitor --port URL`: read and pretty-print the demo's `key: value` UART output.

Any pyserial URL works: `/dev/ttyACM0` (ST-LINK virtual COM port), `socket://127.0.0.1:4321`
(QEMU `-serial tcp::4321,server=on`), `loop://`... The monitor stops after the demo's
`done: 1` line (or after `timeout_s`, or Ctrl-C) and returns 0 when the demo reported
`result: match` (or `result: no-reference`: a demo generated without a reference), 1 when it
reported a mismatch, an error or a fault, 0 when it saw no verdict. A multi-model demo prints
one `result:` per model: any failing model makes it 1.
A firmware generated with --profile also gets its `layer:` lines summed up as a table (count and
share per kernel call) after `done: 1`. The counts are cycles on hardware and instructions on
emulated boards (`instructions:`), as the demo labels them.
"""

from __future__ import annotations

import time
from typing import Any

from stm32ai.errors import Stm32aiError
from stm32ai.project.demo_output import Layer, format_layers, parse_layer

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


def check_port_url(port: str) -> None:
    """Refuse (exit 2) a malformed network port URL before pyserial answers with an unrelated message."""
    import ipaddress
    from urllib.parse import urlsplit

    from stm32ai.sanitize import quote

    if "://" not in port:
        return  # a device path, or a pyserial URL without a network address
    u = urlsplit(port)
    if u.scheme not in ("socket", "rfc2217"):
        return
    problems = []
    host = u.hostname
    if not host:
        problems.append(f"no host (write {u.scheme}://HOST:PORT, e.g. {u.scheme}://127.0.0.1:4321)")
    elif all(part.isdigit() for part in host.split(".")):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            problems.append(f"{quote(host)} is not an IPv4 address (four numbers 0-255)")
    try:
        num = u.port
    except ValueError:
        num = None
    if num is None or not 1 <= num <= 65535:
        problems.append("the port must be a number from 1 to 65535")
    if problems:
        raise Stm32aiError(f"port URL {quote(port)}: " + "; ".join(problems))


def _open(port: str, baud: int) -> Any:
    check_port_url(port)
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
    layers: list[Layer] = []
    unit = "count"
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
                if k == "result" and (verdict is None or verdict in _OK):
                    verdict = v   # a multi-model demo: one line per model, the first failure sticks
                elif k == "profile_unit":
                    unit = v
                elif k == "layer" and (layer := parse_layer(v)) is not None:
                    layers.append(layer)
                style = _STYLE.get(v, "") if k == "result" else ""
                con.print(f"[cyan]{k:>18}[/]: " + (f"[{style}]{v}[/]" if style else v.replace("[", r"\[")))
                if k == "done":
                    if layers:
                        for ln in format_layers(layers, unit):
                            con.print(ln, markup=False)
                    return 0 if verdict in _OK else 1
    except KeyboardInterrupt:
        pass
    finally:
        ser.close()
    return 0 if verdict in _OK else 1
