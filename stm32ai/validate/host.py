"""Build the generated C with the host compiler and run it on numpy inputs."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stm32ai.emitter import emit_c
from stm32ai.errors import Stm32aiError
from stm32ai.pipeline import Compiled, compile_model

CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion"]
HARNESS = Path(__file__).with_name("host_main.c")
HOST_TIMEOUT = 600.0  # seconds for all samples of one host run


@dataclass
class IOSpec:
    shape: tuple[int, ...]
    dtype: str


def io_specs(c: Compiled) -> tuple[list[IOSpec], list[IOSpec]]:
    g = c.graph
    ins = [IOSpec(g.tensors[t].shape, g.tensors[t].dtype) for t in g.inputs]
    outs = [IOSpec(g.tensors[t].shape, g.tensors[t].dtype) for t in g.outputs]
    return ins, outs


def build_host(c_dir: Path, name: str, exe: Path, extra_sources: list[Path] | None = None,
               defines: list[str] | None = None, include_dirs: list[Path] | None = None) -> Path:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise Stm32aiError(f"host C compiler '{cc}' not found: install gcc or set CC")
    sources = [c_dir / f"{name}.c", c_dir / f"{name}_data.c",
               *sorted((c_dir / "runtime" / "src").glob("*.c")), *(extra_sources or [])]
    cmd = [cc, *CFLAGS, *(f"-D{d}" for d in defines or []), f"-I{c_dir}",
           f"-I{c_dir / 'runtime' / 'include'}", *(f"-I{d}" for d in include_dirs or []), *map(str, sources),
           "-o", str(exe), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:300])
        raise Stm32aiError(f"host build of the generated C failed: {first}")
    return exe


def run_compiled(c: Compiled, samples: list[list[np.ndarray]], name: str = "network",
                 workdir: Path | None = None) -> list[list[np.ndarray]]:
    """Emit, compile and run: one output list per sample."""
    ins, outs = io_specs(c)
    with tempfile.TemporaryDirectory(prefix="stm32ai-host-") as tmp:
        d = Path(workdir or tmp)
        emit_c(c.doc, c.params, name, d / "c")
        harness = d / "host_main.c"
        harness.write_text(HARNESS.read_text().replace("MODEL_HEADER", f"{name}.h")
                           .replace("MODEL_INFO", f"{name}_info"))
        exe = build_host(d / "c", name, d / "model_host", [harness])
        stdin = b"".join(np.ascontiguousarray(x, dtype=s.dtype).tobytes()
                         for sample in samples for x, s in zip(sample, ins, strict=True))
        try:
            r = subprocess.run([str(exe)], input=stdin, capture_output=True, timeout=HOST_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Stm32aiError(f"the generated model did not finish {len(samples):,} sample(s) on the host "
                               f"within {HOST_TIMEOUT:.0f} s: use fewer samples (-n)") from None
        if r.returncode != 0:
            raise Stm32aiError(f"generated model failed on the host (exit {r.returncode}): "
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
        raise Stm32aiError("generated model wrote an unexpected amount of output")
    return results


def run_host(model_path: str | Path, inputs: list[np.ndarray], name: str = "network") -> list[np.ndarray]:
    """Compile the model, run it once on `inputs`, return its outputs."""
    return run_compiled(compile_model(model_path, name), [inputs], name)[0]
