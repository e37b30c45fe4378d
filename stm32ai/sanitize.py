"""The one way a string read from a model reaches a generated file or a message.

A .tflite file is untrusted input (docs/security.md): its tensor names, operator codes, custom
op names, description, signature keys and even its file name may hold any bytes. None of them
ever becomes a C identifier (identifiers are generated: `--name` plus indices), and each one
that is shown somewhere goes through exactly one of these helpers, chosen by the context:

| helper         | for                                          | output alphabet                 |
|----------------|----------------------------------------------|---------------------------------|
| `c_string`     | the inside of a C string literal `"..."`     | printable ASCII, `\\ooo` escapes |
| `c_comment`    | the inside of a C (or linker script) comment | printable ASCII, `\\xNN` escapes |
| `build_text`   | Makefile, CMake, XML (.project), Markdown    | `[A-Za-z0-9 _.,:+=@/-]`, `%XX`   |
| `one_line`     | console output and error messages            | printable Unicode, escapes      |

Every helper caps the length. Templates receive model strings wrapped in `Untrusted`; the
jinja2 environments refuse to render one that did not go through a filter (`configure`).
"""

from __future__ import annotations

import re
from typing import Any

import jinja2
import jinja2.ext

__all__ = ["MAX_CHARS", "Untrusted", "UnsafeTemplateUse", "build_text", "c_comment", "c_identifier",
           "c_string", "configure", "one_line", "quote", "untrusted"]

MAX_CHARS = 200          # characters of one model string kept in a generated file
MESSAGE_MAX_CHARS = 2000  # a whole error message
NAME_IN_MESSAGE = 80     # one model string quoted inside a message
_ELLIPSIS = "..."

_C_STRING_SAFE = frozenset(chr(c) for c in range(0x20, 0x7F)) - set("\\\"'?")
_C_COMMENT_SAFE = frozenset(chr(c) for c in range(0x20, 0x7F)) - set("\\\"'?*%")
_BUILD_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,:+=@/-")


class Untrusted(str):
    """A string read from the model. Templates must pass it through a sanitiser filter."""

    __slots__ = ()


class UnsafeTemplateUse(RuntimeError):
    """A template rendered an `Untrusted` value without a sanitiser filter (a bug in stm32ai)."""


def untrusted(s: str | bytes | None) -> Untrusted:
    if s is None:
        return Untrusted("")
    if isinstance(s, bytes):
        s = s.decode("utf-8", errors="surrogateescape")
    return Untrusted(s)


def _cap(s: str, limit: int) -> str:
    return s if len(s) <= limit else s[:max(limit - len(_ELLIPSIS), 0)] + _ELLIPSIS


def _bytes(s: str | bytes) -> bytes:
    """The model's own bytes: undecodable bytes were kept as surrogates (surrogateescape)."""
    if isinstance(s, bytes):
        return s
    return str(s).encode("utf-8", errors="surrogateescape")


def _text(s: str | bytes) -> str:
    return s.decode("utf-8", errors="surrogateescape") if isinstance(s, bytes) else str(s)


def c_string(s: str | bytes, limit: int = MAX_CHARS) -> str:
    """Content for a C string literal: the string's UTF-8 bytes, printable ASCII kept, every
    other byte (and `\\`, quotes, `?`) as a three-digit octal escape. Octal escapes end after
    three digits, so a following digit cannot extend them (a `\\xNN` escape would), and with `?`
    escaped no trigraph can form."""
    out = []
    for b in _bytes(_cap(_text(s), limit)):
        ch = chr(b)
        out.append(ch if ch in _C_STRING_SAFE else f"\\{b:03o}")
    return "".join(out)


def c_comment(s: str | bytes, limit: int = MAX_CHARS) -> str:
    """Text for the inside of a `/* ... */` comment: printable ASCII without `*`, `\\`, `?`,
    quotes or `%`; those and every other byte become `\\xNN`. No `*/`, `/*`, trigraph or line
    splice can form, also not with the template's delimiters (a leading or trailing `/` is
    escaped too)."""
    out = [ch if ch in _C_COMMENT_SAFE else f"\\x{b:02x}"
           for b in _bytes(_cap(_text(s), limit)) for ch in (chr(b),)]
    if out and out[0] == "/":
        out[0] = "\\x2f"
    if out and out[-1] == "/":
        out[-1] = "\\x2f"
    return "".join(out)


def build_text(s: str | bytes, limit: int = MAX_CHARS) -> str:
    """Text for Makefiles, CMake files, XML (STM32CubeIDE project files) and Markdown: letters,
    digits and ` _.,:+=@/-` kept, every other byte percent-encoded (`%XX`). No `$`, `#`, `\\`,
    quote, `;`, `<`, `&` or `]]>` can reach the build tools or the XML parser."""
    return "".join(ch if ch in _BUILD_SAFE else f"%{b:02X}"
                   for b in _bytes(_cap(_text(s), limit)) for ch in (chr(b),))


_INVISIBLE = re.compile(r"[^\S ]")  # whitespace other than the plain space


def one_line(s: Any, limit: int = MESSAGE_MAX_CHARS) -> str:
    """Printable one-line text for the console: control, format (bidi overrides, zero-width),
    separator and undecodable characters become Python-style escapes; at most `limit` characters."""
    out, n = [], 0
    text = _text(s) if isinstance(s, (str, bytes)) else str(s)
    for i, ch in enumerate(text):
        if ch.isprintable() and not _INVISIBLE.match(ch):
            piece = ch
        elif ord(ch) < 0x100:
            piece = f"\\x{ord(ch):02x}"
        elif ord(ch) < 0x10000:
            piece = f"\\u{ord(ch):04x}"
        else:
            piece = f"\\U{ord(ch):08x}"
        room = limit - (len(_ELLIPSIS) if i < len(text) - 1 else 0)
        if n + len(piece) > room:
            out.append(_ELLIPSIS)
            break
        out.append(piece)
        n += len(piece)
    return "".join(out)


def c_identifier(s: str | bytes, limit: int = 40, fallback: str = "model") -> str:
    """A C identifier made from an untrusted string (a model's file name as a default `--name`):
    ASCII letters and digits kept, every run of other characters one `_`, `m_` in front of a
    leading digit, at most `limit` characters; `fallback` when nothing is left."""
    ident = re.sub(r"[^A-Za-z0-9]+", "_", _text(s)).strip("_")
    if ident[:1].isdigit():
        ident = "m_" + ident
    return ident[:limit].rstrip("_") or fallback


def quote(s: str | bytes, limit: int = NAME_IN_MESSAGE) -> str:
    """A model string quoted inside a message: `'name'`, one line, short."""
    return "'" + one_line(s, limit) + "'"


# ---- jinja2 --------------------------------------------------------------------------------------
FILTERS = {"c_string": c_string, "c_comment": c_comment, "build_text": build_text, "one_line": one_line}


def _finalize(value: Any) -> Any:
    if isinstance(value, Untrusted):
        raise UnsafeTemplateUse(
            f"template renders model string {quote(value)} without a sanitiser filter "
            f"({', '.join(FILTERS)})")
    return value


def configure(env: jinja2.Environment) -> jinja2.Environment:
    """Add the sanitiser filters, and refuse to render an unfiltered `Untrusted` value."""
    env.filters.update(FILTERS)
    env.finalize = _finalize
    return env


class JinjaSanitizer(jinja2.ext.Extension):
    """`configure` as a jinja2 extension, for environments we do not create (cookiecutter's
    `_extensions`)."""

    def __init__(self, environment: jinja2.Environment) -> None:
        super().__init__(environment)
        configure(environment)
