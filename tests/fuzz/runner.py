"""Run generate --c-only on mutants and classify what happens (docs/verifier.md).

Each mutant goes through the CLI entry point in-process (`stm32ai.cli.main`). Refused
means exit 2 with exactly one stderr line and no output directory; any other exit code
or exception is a failure. An accepted mutant's C is compiled with -Werror under
ASan+UBSan (the runtime library once per process) and run once on pseudo-random input.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import random
import resource
import shutil
import signal
import subprocess
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.mutate import KINDS, mutate

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "models"
SHARED = ROOT.parent / "shared" / "models"
HARNESS = Path(__file__).with_name("harness.c")

OUTCOMES = ["refused", "accepted-clean", "accepted-big", "FAIL-traceback", "FAIL-multiline-error",
            "FAIL-output", "FAIL-compile", "FAIL-run", "FAIL-sanitizer", "FAIL-hang"]
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
CFLAGS = ["-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion",
          "-fno-omit-frame-pointer", *SAN]
MODEL_CFLAGS = [f for f in CFLAGS if f not in ("-O1", "-g")] + ["-O0"]  # mostly tables: compile fast
GENERATE_TIMEOUT = 120  # seconds, per mutant
RUN_TIMEOUT = 60
MAX_RUN_POOL = 64 << 20  # bigger activation pools are compiled but not run (shared machine)
PY_MEMORY_LIMIT = 6 << 30  # a mutant that makes the compiler allocate more is a failure


@dataclass
class Result:
    index: int
    kind: str
    seed: str
    outcome: str
    detail: str = ""


def seed_models(max_bytes: int = 64 << 10, shared: bool = True) -> list[Path]:
    """Fixtures and shared models up to max_bytes (small ones keep CI fast)."""
    paths = sorted(FIXTURES.glob("*.tflite"))
    if shared and SHARED.is_dir():
        paths += sorted(SHARED.glob("*/*.tflite"))
    return [p for p in paths if p.stat().st_size <= max_bytes]


def make_mutant(seeds: list[Path], index: int, master_seed: int) -> tuple[str, Path, bytes]:
    """The index-th mutant of a campaign: deterministic in (master_seed, index)."""
    rng = random.Random(f"{master_seed}:{index}")
    kind = KINDS[index % len(KINDS)]
    for _ in range(20):
        seed = rng.choice(seeds)
        data = mutate(seed.read_bytes(), kind, rng)
        if data is not None:
            return kind, seed, data
    return kind, seed, seed.read_bytes()


def _raise_soft_limits() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))  # ASan needs its huge shadow mapping


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _Timeout()


class Fuzzer:
    def __init__(self, workdir: Path, cc: str = "cc"):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cc = cc
        self._lib: Path | None = None

    # -- runtime, once ------------------------------------------------------------------------

    def runtime_lib(self) -> Path:
        """The C runtime compiled with the sanitizers, as a static library (cached by content)."""
        if self._lib is not None:
            return self._lib
        import stm32ai

        rt = Path(stm32ai.__file__).parent / "runtime"
        srcs = sorted((rt / "src").glob("*.c"))
        h = hashlib.sha256(" ".join([self.cc, *CFLAGS]).encode())
        for p in srcs + sorted((rt / "include").glob("*.h")):
            h.update(p.read_bytes())
        out = self.workdir / f"libairt-{h.hexdigest()[:16]}.a"
        if not out.exists():
            objdir = Path(tempfile.mkdtemp(dir=self.workdir))
            objs = []
            for s in srcs:
                o = objdir / (s.stem + ".o")
                subprocess.run([self.cc, *CFLAGS, f"-I{rt / 'include'}", "-c", str(s), "-o", str(o)],
                               check=True, capture_output=True)
                objs.append(str(o))
            tmp = objdir / "lib.a"
            subprocess.run(["ar", "rcs", str(tmp), *objs], check=True, capture_output=True)
            os.replace(tmp, out)  # atomic: parallel workers may race to build it
            shutil.rmtree(objdir, ignore_errors=True)
        self._lib = out
        return out

    # -- one mutant ---------------------------------------------------------------------------

    def generate(self, model: Path, out: Path) -> tuple[int | None, str, str]:
        """(exit code or None on exception, stderr, traceback)"""
        from stm32ai.cli import main

        err, tb = io.StringIO(), ""
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(GENERATE_TIMEOUT)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (min(PY_MEMORY_LIMIT, hard) if hard > 0 else
                                                PY_MEMORY_LIMIT, hard))
        os.environ["STM32AI_DEBUG"] = "1"  # internal errors raise: we want their traceback
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code: int | None = main(["generate", str(model), "--c-only", "-o", str(out)])
        except _Timeout:
            return -999, err.getvalue(), "timeout"
        except BaseException:  # noqa: BLE001 - SystemExit included: argparse must not exit here
            code, tb = None, traceback.format_exc(limit=-6)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
            os.environ.pop("STM32AI_DEBUG", None)
        return code, err.getvalue(), tb

    def build_and_run(self, c_dir: Path) -> tuple[str, str]:
        lib = self.runtime_lib()
        exe = c_dir / "fuzz_harness"
        cmd = [self.cc, *MODEL_CFLAGS, f"-I{c_dir}", f"-I{c_dir / 'runtime' / 'include'}",
               str(c_dir / "network.c"), str(c_dir / "network_data.c"), str(HARNESS), str(lib),
               "-lm", "-o", str(exe)]
        r = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_raise_soft_limits)
        if r.returncode != 0:
            return "FAIL-compile", _first_error(r.stderr)
        pool = _pool_size(c_dir)
        if pool > MAX_RUN_POOL:
            return "accepted-big", f"activation pool {pool} B not run"
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1",
                   UBSAN_OPTIONS="print_stacktrace=1")
        try:
            r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=RUN_TIMEOUT,
                               env=env, preexec_fn=_raise_soft_limits)
        except subprocess.TimeoutExpired:
            return "FAIL-hang", "inference did not finish"
        if r.returncode == 0 and r.stdout.startswith("ok"):
            return "accepted-clean", ""
        if "Sanitizer" in r.stderr or "runtime error" in r.stderr or r.returncode < 0:
            return "FAIL-sanitizer", _first_error(r.stderr, ("runtime error", "ERROR: Address",
                                                             "SUMMARY"))
        return "FAIL-run", f"exit {r.returncode}: {r.stderr.strip()[:300]}"

    def run(self, index: int, kind: str, seed: Path, data: bytes, keep: Path | None = None) -> Result:
        with tempfile.TemporaryDirectory(dir=self.workdir) as tmp:
            d = Path(tmp)
            model = d / f"mutant_{index}.tflite"
            model.write_bytes(data)
            out = d / "out"
            code, err, tb = self.generate(model, out)
            res = self._classify(index, kind, seed, code, err, tb, out)
            if res.outcome.startswith("FAIL") and keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(model, keep / f"{res.outcome}_{kind}_{index}.tflite")
            return res

    def _classify(self, index: int, kind: str, seed: Path, code: int | None, err: str, tb: str,
                  out: Path) -> Result:
        r = Result(index, kind, seed.name, "")
        lines = err.strip().splitlines()
        if code == -999:
            r.outcome, r.detail = "FAIL-hang", f"generate took more than {GENERATE_TIMEOUT} s"
        elif code is None or code not in (0, 2):
            r.outcome, r.detail = "FAIL-traceback", tb.strip() or f"exit {code}: {err.strip()}"
        elif code == 2:
            if len(lines) != 1 or not lines[0].startswith("stm32ai: error: "):
                r.outcome, r.detail = "FAIL-multiline-error", err
            elif out.exists() or any(p.name.startswith(".stm32ai") for p in out.parent.iterdir()):
                r.outcome, r.detail = "FAIL-output", "refused but left an output or temp directory"
            else:
                r.outcome, r.detail = "refused", lines[0]
        else:
            r.outcome, r.detail = self.build_and_run(out)
        return r


def _pool_size(c_dir: Path) -> int:
    import json

    try:
        doc = json.loads((c_dir / "graph.json").read_text())
    except (OSError, ValueError):
        return 0
    pools = doc.get("stm32ai", {}).get("pools", [])
    return sum(int(p.get("size", 0)) for p in pools if p.get("name") == "activations")


def _first_error(text: str, keys: tuple[str, ...] = ("error",)) -> str:
    for ln in text.splitlines():
        if any(k in ln for k in keys):
            return ln.strip()[:400]
    return text.strip()[:400]


def campaign(n: int, master_seed: int, start: int = 0, seeds: list[Path] | None = None,
             workdir: Path | None = None, keep: Path | None = None) -> list[Result]:
    seeds = seeds or seed_models()
    fz = Fuzzer(workdir or Path(tempfile.gettempdir()) / f"stm32ai-fuzz-{os.getuid()}")
    out = []
    for i in range(start, start + n):
        kind, seed, data = make_mutant(seeds, i, master_seed)
        out.append(fz.run(i, kind, seed, data, keep))
    return out


def table(results: list[Result]) -> str:
    """Markdown table: mutation kind x outcome."""
    kinds = sorted({r.kind for r in results}, key=KINDS.index)
    cols = [o for o in OUTCOMES if o in ("refused", "accepted-clean") or o.startswith("FAIL")
            or any(r.outcome == o for r in results)]
    rows = ["| kind | " + " | ".join(cols) + " | total |", "|---" * (len(cols) + 2) + "|"]
    for k in kinds + ["all"]:
        sel = [r for r in results if k in ("all", r.kind)]
        cells = [str(sum(r.outcome == o for r in sel)) for o in cols]
        rows.append(f"| {k} | " + " | ".join(cells) + f" | {len(sel)} |")
    return "\n".join(rows)
