"""Per-layer kernel variants chosen by estimated cycles: the layer signature and the tuning
table file (docs/tuning.md).

Both sides import this module and nothing heavier: the compiler (passes/lower/conv.py reads a
table's choice per layer) and the tuner (stm32ai/tune.py, a stage after the project generator
that builds and estimates candidates and writes the table). It imports no pass, no estimator
and no project code.

A layer's *key* says what the kernel sees (op, geometry, channel counts, quantisation kinds);
its *signature* adds what the estimate depends on besides the layer (board, core, the variant
set, the tool version hash) and names the layer's entry in the tuner's cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from stm32ai.errors import Stm32aiError

FORMAT = "stm32ai-tuning/1"
# Variants of an int8 CONV_2D the lowering can be told per layer, in order of preference on a
# tie (then smaller flash): int8 direct (conv2d_s8), int16 direct (conv2d_s8 w16), exact
# Winograd F(2x2,3x3) (conv2d_wino_s8, only 3x3 stride 1 and where its bound is proved).
CONV_VARIANTS = ("int8", "int16", "wino", "smallk")

_PKG = Path(__file__).resolve().parent
# What the estimated cycles of a layer depend on besides the layer and the board: the C
# kernels and runtime, the lowering that lays out their operands, the estimator's models.
_HASHED = ("runtime", "passes/lower", "passes/staging.py", "estimate", "boards.py")


@lru_cache(maxsize=1)
def tool_hash() -> str:
    """sha256 (16 hex) of the package version and of every source the estimated cycles of a
    layer depend on: a merged kernel change invalidates the cached measurements."""
    from stm32ai import __version__

    h = hashlib.sha256(__version__.encode())
    for rel in _HASHED:
        p = _PKG / rel
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in (".c", ".h", ".py", ".j2", ".S")) \
            if p.is_dir() else [p]
        for f in files:
            h.update(str(f.relative_to(_PKG)).encode())
            h.update(f.read_bytes())
    for f in sorted((_PKG.parent / "boards").rglob("*.yaml")):   # clock, wait states, memsys
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def conv_key(op_type: str, geo: dict[str, Any], x_dtype: str, w_dtype: str, per_channel: bool,
             y_dtype: str) -> str:
    """The layer key of an int8 convolution: everything its kernel's cost depends on
    (`geo`: ConvGeometry.attrs(), the shape attributes the kernel gets)."""
    fields = ",".join(f"{k}={_plain(v)}" for k, v in sorted(geo.items()))
    q = f"x={x_dtype},w={w_dtype}/{'per-channel' if per_channel else 'per-tensor'},y={y_dtype}"
    return f"{op_type}[{fields};{q}]"


def _plain(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "x".join(str(int(i)) for i in v)
    return str(int(v)) if isinstance(v, (int, bool)) else str(v)


def signature(key: str, board: str, core: str, variants: tuple[str, ...] = CONV_VARIANTS,
              tool: str | None = None) -> str:
    """The cache name of one layer's measurements on one board (sha256, 24 hex)."""
    text = "\n".join((FORMAT, key, board, core, ",".join(variants), tool or tool_hash()))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass
class Measured:
    """One variant of one layer, from one candidate build: estimated cycles (summed over the
    layers of the model with this key, `count` of them), instructions, flash bytes of its
    weights (the tie-break)."""

    cycles: int
    instructions: int
    weights_bytes: int
    count: int = 1


def choose(measured: dict[str, Measured]) -> str:
    """The fastest variant by estimated cycles per layer; ties -> smaller weights, then the
    order of CONV_VARIANTS. Deterministic."""
    if not measured:
        raise ValueError("nothing measured")

    def rank(v: str) -> tuple[float, int, int]:
        m = measured[v]
        order = CONV_VARIANTS.index(v) if v in CONV_VARIANTS else len(CONV_VARIANTS)
        return (m.cycles / max(m.count, 1), m.weights_bytes // max(m.count, 1), order)

    return min(sorted(measured), key=rank)


@dataclass
class TuningTable:
    """The file `stm32ai tune` writes and `generate --tuning` reads: per layer key, the chosen
    variant and what was measured. `layers` is the only part the compiler uses."""

    board: str
    core: str
    tool: str
    variants: tuple[str, ...] = CONV_VARIANTS
    layers: dict[str, dict[str, Any]] = field(default_factory=dict)   # key -> {"variant", "measured"}
    source: str = ""            # model file it was tuned on (informational)

    def choices(self) -> dict[str, str]:
        return {k: str(v["variant"]) for k, v in self.layers.items()}

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "board": self.board, "core": self.core, "tool": self.tool,
                "variants": list(self.variants), "source": self.source,
                "layers": {k: self.layers[k] for k in sorted(self.layers)}}

    def dump(self, path: str | Path) -> None:
        """Atomic write (a crash never leaves half a table)."""
        p = Path(path)
        tmp = p.with_name(f".{p.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.to_json(), indent=1, sort_keys=False) + "\n")
        tmp.replace(p)


def load_table(path: str | Path, board: str | None = None) -> TuningTable:
    """Read and check a tuning table; a bad file or one for another board is one error line."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise Stm32aiError(f"--tuning: '{path}' does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Stm32aiError(f"--tuning: '{path}' is not a tuning table ({type(e).__name__})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise Stm32aiError(f"--tuning: '{path}' is not a {FORMAT} table")
    layers = doc.get("layers")
    variants = doc.get("variants")
    if (not isinstance(layers, dict) or not isinstance(variants, list)
            or not all(isinstance(v, str) and v in CONV_VARIANTS for v in variants)
            or not all(isinstance(doc.get(k), str) for k in ("board", "core", "tool"))):
        raise Stm32aiError(f"--tuning: '{path}': malformed table")
    for k, v in layers.items():
        if not isinstance(v, dict) or v.get("variant") not in CONV_VARIANTS:
            raise Stm32aiError(f"--tuning: '{path}': layer entry with no known variant")
        del k
    if board is not None and doc["board"] != board:
        raise Stm32aiError(f"--tuning: '{path}' was tuned for board {doc['board']}, not {board}")
    return TuningTable(board=doc["board"], core=doc["core"], tool=doc["tool"], variants=tuple(variants),
                       layers=layers, source=str(doc.get("source", "")))


def forced(variant: str, keys: list[str], board: str, core: str) -> TuningTable:
    """A table that asks for `variant` on every layer in `keys` (the tuner's candidate builds)."""
    return TuningTable(board=board, core=core, tool=tool_hash(),
                       layers={k: {"variant": variant} for k in keys})


def cache_dir() -> Path | None:
    """$STM32AI_CACHE_DIR/tune, else $XDG_CACHE_HOME/stm32ai/tune, else ~/.cache/stm32ai/tune
    (validate/host.py's convention); None with STM32AI_CACHE_DIR=off (nothing cached)."""
    base = os.environ.get("STM32AI_CACHE_DIR")
    if base == "off":
        return None
    if base:
        return Path(base) / "tune"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "stm32ai" / "tune"
