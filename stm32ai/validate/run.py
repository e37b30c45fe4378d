"""`stm32ai validate`: the generated C against the references of docs/references.md.

The C model is run by a *runner*: on the host (`run_compiled`, --mode host) or on the board over
UART (`stm32ai.validate.target`, --mode target); comparison and printing are shared.

When no reference gives a verdict the C model is not run: the result is `no-reference` and the
exit code 2 (the environment lacks a reference: the message names the install command; or every
installed reference refuses the model), never 1, which means the results differ
(docs/references.md).
"""

from __future__ import annotations

import json
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stm32ai.errors import Stm32aiError
from stm32ai.pipeline import Compiled, compile_model
from stm32ai.sanitize import one_line, quote
from stm32ai.validate.host import run_compiled
from stm32ai.validate.metrics import OutputMetrics, compute_metrics, passes
from stm32ai.validate.reference import RefResult, missing_reference_error, random_inputs, references

MAX_SAMPLES = 100_000  # -n: the host run and each reference get 600 s for all samples (docs/security.md)

@dataclass
class Comparison:
    reference: str
    verdict: bool
    unavailable: str | None = None
    install: str | None = None        # the reference is not installed: the command that installs it
    overruled: str | None = None      # it ran but is known wrong for this model: why
    outputs: list[OutputMetrics] = field(default_factory=list)
    ok: list[bool] = field(default_factory=list)
    substitutions: list[str] = field(default_factory=list)  # op versions lowered to run the reference

    @property
    def label(self) -> str:
        """The reference and any substitution: ``litert-ref (TILE v3 run as v2: same int8 semantics)``."""
        return f"{self.reference} ({'; '.join(self.substitutions)})" if self.substitutions else self.reference


@dataclass
class ValidationResult:
    model: str
    samples: int
    comparisons: list[Comparison]
    subject: str = "generated C"      # what ran the model: the host build or a board's firmware
    target: dict[str, Any] | None = None   # --mode target: board, model, unit, counts (and layers)
    no_verdict: str | None = None          # why no reference gives a verdict (one line)
    undefined: list[str] = field(default_factory=list)  # the references' results are undefined here

    @property
    def passed(self) -> bool:
        verdict = [c for c in self.comparisons if c.verdict]
        return bool(verdict) and all(all(c.ok) for c in verdict) and not self.undefined

    @property
    def verdict_label(self) -> str | None:
        """The verdict reference named with its substitutions (None: no verdict)."""
        return next((c.label for c in self.comparisons if c.verdict), None)

    @property
    def outcome(self) -> str:
        """`match`, `mismatch`, `no-reference` (nothing to validate against) or `unverified` (the
        inputs reach an op whose reference result is undefined: int8 DIV, docs/references.md)."""
        if not any(c.verdict for c in self.comparisons):
            return "no-reference"
        if self.undefined:
            return "unverified"
        return "match" if self.passed else "mismatch"

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model, "samples": self.samples, "passed": self.passed, "result": self.outcome,
            "subject": self.subject, "verdict": self.verdict_label,
            **({"no_verdict": self.no_verdict} if self.no_verdict else {}),
            **({"undefined": self.undefined} if self.undefined else {}),
            **({"target": self.target} if self.target is not None else {}),
            "references": [
                {"name": c.reference, "verdict": c.verdict, "unavailable": c.unavailable, "install": c.install,
                 **({"overruled": c.overruled} if c.overruled else {}),
                 "substitutions": c.substitutions,
                 "outputs": [dict(m.as_dict(), passed=ok) for m, ok in zip(c.outputs, c.ok, strict=True)]}
                for c in self.comparisons
            ],
        }


def load_inputs(path: str | Path, c: Compiled) -> list[np.ndarray]:
    """Arrays in graph-input order, each holding one or more samples along a leading axis."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise Stm32aiError(f"--inputs {path}: not a readable .npz file ({e})") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise Stm32aiError(f"--inputs {path}: a single .npy array; give an .npz archive with one array per "
                           "model input (numpy.savez)")
    try:
        with loaded as z:
            arrays = [z[k] for k in z.files]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise Stm32aiError(f"--inputs {path}: not a readable .npz file ({e})") from None
    g = c.graph
    if len(arrays) != len(g.inputs):
        raise Stm32aiError(f"--inputs {path}: {len(arrays)} array(s) for {len(g.inputs)} model input(s)")
    for i, (a, tid) in enumerate(zip(arrays, g.inputs, strict=True)):
        t = g.tensors[tid]
        if a.size % t.size != 0 or a.size == 0:
            raise Stm32aiError(f"--inputs {path}: array {i} has {a.size} values, not a multiple of "
                               f"input {quote(t.name)} {list(t.shape)}")
        if a.dtype != np.dtype(t.dtype):
            raise Stm32aiError(f"--inputs {path}: array {i} is {a.dtype}, input {quote(t.name)} is {t.dtype}")
    n = {a.size // g.tensors[tid].size for a, tid in zip(arrays, g.inputs, strict=True)}
    if len(n) != 1:
        raise Stm32aiError(f"--inputs {path}: arrays hold different numbers of samples")
    if n.pop() > MAX_SAMPLES:
        raise Stm32aiError(f"--inputs {path}: more than {MAX_SAMPLES:,} samples")
    return arrays


def per_sample(c: Compiled, arrays: list[np.ndarray]) -> list[list[np.ndarray]]:
    g = c.graph
    n = arrays[0].size // g.tensors[g.inputs[0]].size
    split = [a.reshape((n, *g.tensors[tid].shape)) for a, tid in zip(arrays, g.inputs, strict=True)]
    return [[s[k] for s in split] for k in range(n)]


def compare(c: Compiled, c_outputs: list[list[np.ndarray]], refs: list[RefResult]) -> list[Comparison]:
    g = c.graph
    result = []
    for ref in refs:
        comp = Comparison(ref.name, ref.verdict, ref.unavailable, ref.install, ref.overruled,
                          substitutions=list(ref.substitutions))
        if ref.outputs is not None:
            for j, tid in enumerate(g.outputs):
                r = np.asarray(ref.outputs[j])
                ours = np.stack([sample[j] for sample in c_outputs]).reshape(r.shape)
                q = g.tensors[tid].quant
                m = compute_metrics(ours, r, q.scale if q else None, q.zero_point if q else None,
                                    q.axis if q and q.per_channel else None)
                comp.outputs.append(m)
                comp.ok.append(passes(m, r.dtype))
        result.append(comp)
    return result


Runner = Callable[[Compiled, list[list[np.ndarray]]], list[list[np.ndarray]]]


def validate_model(model: str | Path, inputs: list[np.ndarray] | None = None, n: int = 3,
                   seed: int = 0, runner: Runner | None = None,
                   compiled: Compiled | None = None,
                   step: Callable[[str], None] | None = None, prune: bool = True) -> ValidationResult:
    """Run the references and the C model (`runner`, default: host build) on the same inputs.

    Without a verdict reference the C model is not run (`outcome` is `no-reference`).
    `step(description)` is told each phase (the CLI's progress display)."""
    say = step or (lambda _d: None)
    if compiled is None:
        say("compiling the model")
    c = compiled if compiled is not None else compile_model(model, "network", prune=prune)
    arrays = inputs if inputs is not None else random_inputs(model, n, seed)
    samples = per_sample(c, arrays)
    say(f"running the references on {len(samples):,} sample(s)")
    refs = references(model, arrays)
    if not any(r.verdict for r in refs):
        why = missing_reference_error(model, refs) or (
            f"{Path(model).name}: no reference runs this model, nothing to validate against ("
            + "; ".join(r.unavailable or r.name for r in refs) + ")")
        return ValidationResult(Path(model).name, len(samples), compare(c, [], refs), no_verdict=why)
    say(f"running the C model on {len(samples):,} sample(s)")
    ours = (runner or run_compiled)(c, samples)
    undefined = list(dict.fromkeys(line for r in refs for line in r.undefined))
    return ValidationResult(Path(model).name, len(samples), compare(c, ours, refs), undefined=undefined)


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def print_result(res: ValidationResult) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"{escape(one_line(res.model, 200))}: {escape(one_line(res.subject, 200))} vs references, "
              f"{res.samples} sample(s)", title_justify="left")
    for col in ("reference", "output", "acc", "rmse", "mae", "l2r", "cos", "max abs err", "max LSB", "result"):
        t.add_column(col)
    for comp in res.comparisons:
        label = comp.reference + (" (verdict)" if comp.verdict else "")
        if comp.install or comp.unavailable:   # escape: `stm32ai[litert]` is not rich markup
            why = (f"not installed: {comp.install}" if comp.install
                   else f"unavailable: {one_line(comp.unavailable, 80)}")
            t.add_row(label, "-", "", "", "", "", "", "", "", escape(why))
            continue
        for j, (m, ok) in enumerate(zip(comp.outputs, comp.ok, strict=True)):
            t.add_row(label if j == 0 else "", str(j), _fmt(m.acc), _fmt(m.rmse), _fmt(m.mae), _fmt(m.l2r),
                      _fmt(m.cos, ".6f"), _fmt(m.max_abs_err), "-" if m.max_lsb is None else str(m.max_lsb),
                      "ok" if ok else ("MISMATCH" if comp.verdict and not res.undefined else "differs"))
    Console(highlight=False, width=None if sys.stdout.isatty() else 160).print(t)
    for line in [*disagreements(res), *res.undefined]:
        print(line)
    for comp in res.comparisons:  # never silent: every op-version substitution is named
        if comp.substitutions:
            print(f"substituted: {one_line(comp.label, 300)}")
    print(f"verdict: {one_line(res.verdict_label or 'none', 300)}")
    print(f"result: {res.outcome if res.outcome != 'mismatch' else 'MISMATCH'}")


def disagreements(res: ValidationResult) -> list[str]:
    """One line per reference that ran but is overruled for this model: by how much it differs
    from the generated C (which follows the verdict) and why it is not the verdict."""
    lines = []
    for c in res.comparisons:
        if not c.overruled:
            continue
        if c.unavailable:  # refused the model (legacy uint8): why it is not the verdict
            lines.append(one_line(f"note: {c.reference} is not the verdict: {c.overruled}", 400))
            continue
        lsb = [m.max_lsb for m in c.outputs if m.max_lsb is not None]
        by = f"differs by up to {max(lsb)} LSB" if lsb and max(lsb) else "agrees here"
        if not lsb and not all(c.ok):
            by = "differs"
        lines.append(one_line(f"note: {c.reference} {by}: {c.overruled}", 400))
    return lines


def collect(model: Path, *, inputs: str | None, n: int, seed: int,
            step: Callable[[str], None] | None = None, prune: bool = True,
            optimization: str = "balanced", board: str | None = None, winograd: bool | None = None,
            tuning: dict[str, str] | None = None, stripes: bool | None = None,
            stripes_max_cost: float | None = None, input_rows: bool = False) -> ValidationResult:
    """`validate --mode host` without the printing: inputs from --inputs or -n random samples;
    `board`: compiled as for that board (weight layouts, staging), run on the host."""
    from stm32ai.pipeline import compile_for_board

    if not 1 <= n <= MAX_SAMPLES:
        raise Stm32aiError(f"-n {n}: give 1 to {MAX_SAMPLES:,} samples")
    (step or (lambda _d: None))("compiling the model")
    c = compile_for_board(model, "network", board, prune=prune, optimization=optimization, winograd=winograd,
                          tuning=tuning, stripes=stripes, stripes_max_cost=stripes_max_cost,
                          input_rows=input_rows)
    arrays = load_inputs(inputs, c) if inputs else None
    return validate_model(model, arrays, n, seed, compiled=c, step=step)


def validate(model: Path, *, inputs: str | None, n: int, seed: int, as_json: str | None,
             step: Callable[[str], None] | None = None, prune: bool = True,
             optimization: str = "balanced") -> int:
    return report(collect(model, inputs=inputs, n=n, seed=seed, step=step, prune=prune,
                          optimization=optimization), as_json)


def report(res: ValidationResult, as_json: str | None) -> int:
    """Print (and write as JSON) the result; the exit code: 0 pass, 1 mismatch, 2 unverified
    (the inputs reach an op the references leave undefined: other inputs are the fix); no
    verdict reference raises Stm32aiError (exit 2) with the reason, or the install command."""
    print_result(res)
    if as_json:
        from stm32ai.outputs import write_text_atomic

        write_text_atomic(as_json, json.dumps(res.to_json(), indent=1) + "\n", "--json")
    if res.outcome == "no-reference":
        raise Stm32aiError(res.no_verdict or "no reference runs this model: nothing to validate against")
    if res.outcome == "unverified":
        return 2
    return 0 if res.passed else 1
