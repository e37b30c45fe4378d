"""Build the generated C with the host compiler and run it on numpy inputs.

The runtime (stm32ai/runtime/src/*.c, the same for every model) is compiled once per
(compiler, flags, defines, runtime sources and headers) into object files kept in a cache
directory, and each model's generated C is linked against them: a `validate` or a test
session compiles the runtime once instead of once per model. The cache is
$STM32AI_CACHE_DIR, else $XDG_CACHE_HOME/stm32ai, else ~/.cache/stm32ai (subfolder
host-runtime/); STM32AI_CACHE_DIR=off (or an unwritable folder) builds in a temporary folder
per call instead. Entries are published by an atomic rename of a complete folder, under a
file lock where the OS has one, so parallel test workers and concurrent `validate` runs share
it safely; entries unused for 30 days are removed.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stm32ai.emitter import emit_c
from stm32ai.errors import Stm32aiError
from stm32ai.pipeline import Compiled, compile_model

try:
    import fcntl
except ImportError:  # not POSIX: the atomic rename alone keeps the cache consistent
    fcntl = None  # type: ignore[assignment]

CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion"]
HARNESS = Path(__file__).with_name("host_main.c")
HOST_TIMEOUT = 600.0  # seconds for all samples of one host run
CACHE_MAX_AGE = 30 * 86400.0  # seconds an unused runtime build stays in the cache


@dataclass
class IOSpec:
    shape: tuple[int, ...]
    dtype: str


def io_specs(c: Compiled) -> tuple[list[IOSpec], list[IOSpec]]:
    g = c.graph
    ins = [IOSpec(g.tensors[t].shape, g.tensors[t].dtype) for t in g.inputs]
    outs = [IOSpec(g.tensors[t].shape, g.tensors[t].dtype) for t in g.outputs]
    return ins, outs


def host_cc() -> str:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise Stm32aiError(f"host C compiler '{cc}' not found: install gcc or set CC")
    return cc


def cache_root() -> Path | None:
    """Where runtime builds are kept, or None when caching is off."""
    env = os.environ.get("STM32AI_CACHE_DIR")
    if env == "off":
        return None
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "stm32ai"
    root = base / "host-runtime"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root if os.access(root, os.W_OK) else None


@functools.lru_cache(maxsize=8)
def _compiler_id(cc_path: str, mtime_ns: int) -> str:
    """The compiler's identity for the cache key: its path and what it says it is."""
    r = subprocess.run([cc_path, "--version"], capture_output=True, text=True)
    return f"{cc_path}\n{mtime_ns}\n{r.stdout}"


def _runtime_key(cc: str, flags: list[str], rt: Path) -> str:
    cc_path = os.path.realpath(shutil.which(cc) or cc)
    h = hashlib.sha256(_compiler_id(cc_path, os.stat(cc_path).st_mtime_ns).encode())
    h.update("\0".join(flags).encode())
    for p in sorted([*(rt / "src").glob("*.c"), *(rt / "include").glob("*.h")]):
        h.update(f"\0{p.parent.name}/{p.name}\0".encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:24]


def _compile_runtime(cc: str, flags: list[str], rt: Path, out: Path) -> None:
    """Every runtime source into out/<stem>.o (one compiler run)."""
    sources = sorted((rt / "src").glob("*.c"))
    r = subprocess.run([cc, *flags, f"-I{rt / 'include'}", "-c", *map(str, sources)], cwd=out,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Stm32aiError(f"host build of the generated C failed: {_first_error(r.stderr)}")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    if fcntl is None:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _prune(root: Path, keep: Path) -> None:
    now = time.time()
    for d in root.iterdir():
        with contextlib.suppress(OSError):
            if d != keep and now - d.stat().st_mtime > CACHE_MAX_AGE:
                shutil.rmtree(d) if d.is_dir() else d.unlink()


def runtime_objects(rt: Path, cc: str, flags: list[str], scratch: Path) -> list[Path]:
    """The runtime in `rt` compiled with `flags`: from the cache, built there first if missing
    (or, with no cache, built into `scratch`)."""
    root = cache_root()
    if root is None:
        out = scratch / "runtime-obj"
        out.mkdir(parents=True, exist_ok=True)
        _compile_runtime(cc, flags, rt, out)
        return sorted(out.glob("*.o"))
    key = _runtime_key(cc, flags, rt)
    final = root / key
    if not final.is_dir():
        with _locked(root / f"{key}.lock"):
            if not final.is_dir():  # another process may have built it while we waited
                tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
                try:
                    _compile_runtime(cc, flags, rt, tmp)
                    os.rename(tmp, final)  # atomic: the folder is complete or absent
                except OSError:
                    if not final.is_dir():
                        raise
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                _prune(root, final)
    with contextlib.suppress(OSError):
        os.utime(final)  # recently used: kept by _prune
    return sorted(final.glob("*.o"))


def _first_error(stderr: str) -> str:
    return next((ln for ln in stderr.splitlines() if "error" in ln), stderr.strip()[:300])


def build_host(c_dir: Path, name: str, exe: Path, extra_sources: list[Path] | None = None,
               defines: list[str] | None = None, include_dirs: list[Path] | None = None,
               opt: str = "-O2") -> Path:
    """Link c_dir's generated model `name` (+ extra sources) with the cached runtime objects.
    `opt` replaces CFLAGS' -O2 (the model and the runtime: tests/test_opt_levels.py)."""
    cc = host_cc()
    flags = [opt if f == "-O2" else f for f in CFLAGS]
    dflags = [f"-D{d}" for d in defines or []]
    objs = runtime_objects(c_dir / "runtime", cc, [*flags, *dflags], exe.parent)
    sources = [c_dir / f"{name}.c", c_dir / f"{name}_data.c", *(extra_sources or [])]
    cmd = [cc, *flags, *dflags, f"-I{c_dir}", f"-I{c_dir / 'runtime' / 'include'}",
           *(f"-I{d}" for d in include_dirs or []), *map(str, sources), *map(str, objs), "-o", str(exe), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise Stm32aiError(f"host build of the generated C failed: {_first_error(r.stderr)}")
    return exe


def harness_source(models: dict[str, str]) -> str:
    """host_main.c for the models {info name prefix: header to include}, in this order."""
    return (HARNESS.read_text()
            .replace("MODEL_INCLUDES", "\n".join(f'#include "{h}"' for h in models.values()))
            .replace("MODEL_INFOS", ", ".join(f"&{n}_info" for n in models)))


def run_exe(exe: Path, args: list[str], c: Compiled, samples: list[list[np.ndarray]],
            what: str) -> list[list[np.ndarray]]:
    """Run a host harness: every sample's input bytes on stdin, one output list per sample back."""
    ins, outs = io_specs(c)
    stdin = b"".join(np.ascontiguousarray(x, dtype=s.dtype).tobytes()
                     for sample in samples for x, s in zip(sample, ins, strict=True))
    try:
        r = subprocess.run([str(exe), *args], input=stdin, capture_output=True, timeout=HOST_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Stm32aiError(f"the generated model did not finish {len(samples):,} sample(s) on the host "
                           f"within {HOST_TIMEOUT:.0f} s: use fewer samples (-n)") from None
    if r.returncode != 0:
        raise Stm32aiError(f"{what} failed on the host (exit {r.returncode}): "
                           f"{r.stderr.decode(errors='replace').strip()}")
    results, pos = [], 0
    for _ in samples:
        sample_out = []
        for s in outs:
            n = int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize
            sample_out.append(np.frombuffer(r.stdout[pos:pos + n], dtype=s.dtype).reshape(s.shape).copy())
            pos += n
        results.append(sample_out)
    if pos != len(r.stdout):
        raise Stm32aiError(f"{what} wrote an unexpected amount of output")
    return results


def run_compiled(c: Compiled, samples: list[list[np.ndarray]], name: str = "network",
                 workdir: Path | None = None, opt: str = "-O2") -> list[list[np.ndarray]]:
    """Emit, compile (`opt`: the optimisation level) and run: one output list per sample."""
    with tempfile.TemporaryDirectory(prefix="stm32ai-host-") as tmp:
        d = Path(workdir or tmp)
        emit_c(c.doc, c.params, name, d / "c")
        harness = d / "host_main.c"
        harness.write_text(harness_source({name: f"{name}.h"}))
        ins, outs = io_specs(c)
        max_io = max(len(ins), len(outs))     # the runtime's default instance table holds 8
        exe = build_host(d / "c", name, d / "model_host", [harness], opt=opt,
                         defines=[f"AI_MAX_IO={max_io}"] if max_io > 8 else None)
        return run_exe(exe, [], c, samples, "generated model")


def run_host(model_path: str | Path, inputs: list[np.ndarray], name: str = "network") -> list[np.ndarray]:
    """Compile the model, run it once on `inputs`, return its outputs."""
    return run_compiled(compile_model(model_path, name), [inputs], name)[0]
