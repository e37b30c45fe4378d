"""Long fuzz campaign: python -m tests.fuzz -n 10000 [--seed S] [--jobs J] [--keep DIR].

Prints the table mutation kind x outcome and the first failures; exit 1 if any failed."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests.fuzz.runner import Result, campaign, seed_models, table


def _chunk(args: tuple[int, int, int, int, str | None, str]) -> list[Result]:
    start, n, seed, max_kb, keep, workdir = args
    os.environ.setdefault("STM32AI_VERIFY_PASSES", "1")
    return campaign(n, seed, start, seed_models(max_kb << 10), Path(workdir),
                    Path(keep) if keep else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz")
    ap.add_argument("-n", type=int, default=1000, help="number of mutants")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first mutant index (replay a range)")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-kb", type=int, default=400, help="largest seed model, KiB")
    ap.add_argument("--keep", help="copy failing mutants into this directory")
    ap.add_argument("--chunk", type=int, default=25)
    a = ap.parse_args(argv)
    workdir = Path(tempfile.gettempdir()) / f"stm32ai-fuzz-{os.getuid()}"
    jobs = [(s, min(a.chunk, a.start + a.n - s), a.seed, a.max_kb, a.keep, str(workdir))
            for s in range(a.start, a.start + a.n, a.chunk)]
    t0 = time.time()
    results: list[Result] = []
    with ProcessPoolExecutor(a.jobs) as ex:
        for i, part in enumerate(ex.map(_chunk, jobs)):
            results += part
            if sys.stderr.isatty() or i % 10 == 0:
                fails = sum(r.outcome.startswith("FAIL") for r in results)
                print(f"{len(results)}/{a.n} mutants, {fails} failures, {time.time() - t0:.0f} s",
                      file=sys.stderr, flush=True)
    print(table(results))
    fails = [r for r in results if r.outcome.startswith("FAIL")]
    for r in fails[:40]:
        detail = r.detail.strip().splitlines()[-1] if r.detail.strip() else ""
        print(f"#{r.index} {r.kind} {r.seed}: {r.outcome}: {detail[:300]}")
    print(f"{len(results)} mutants in {time.time() - t0:.0f} s (seed {a.seed})")
    return 1 if fails else 0


if __name__ == "__main__":
    raise SystemExit(main())
