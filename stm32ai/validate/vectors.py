"""The demo's test vector: one seeded random input and the verdict reference's output for it.

The CLI (and the benchmark) compute it here and pass it to `stm32ai.project` as a TestVector:
the project generator never runs a reference itself.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from stm32ai.errors import Stm32aiError
from stm32ai.project.spec import TestVector

__all__ = ["test_vector"]

UNDEFINED_RETRIES = 5  # seeds tried for a test vector that avoids undefined reference results

_LABELS = {"tflm": "TFLite Micro", "litert-ref": "LiteRT (reference kernels)"}


def _shaped(g: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(x).reshape(g.tensors[t].shape) for x, t in zip(inputs, g.inputs, strict=True)]


def test_vector(model: Path, c: Any, seed: int = 0, *, expected: bool = True) -> TestVector:
    """One seeded random input and the verdict reference's output for it (docs/references.md).

    The expected output is None when `expected` is False (--no-test-vector) or when every
    installed reference refuses the model (a warning says so): the demo then reports timing and
    memory only. Inputs whose reference results are undefined (int8 DIV, docs/references.md)
    are replaced by the next seeds' (UNDEFINED_RETRIES in all); if each one is, no expected
    output either (a warning says why). A reference the verdict needs but that is not installed
    is bad input (exit 2, with the install command): installing it is the fix, not a project
    without a check.
    """
    from stm32ai.validate.reference import missing_reference_error, random_inputs, references

    g = c.graph
    inputs = random_inputs(model, 1, seed)
    if not expected:
        return TestVector(_shaped(g, inputs))
    refs = references(model, inputs)
    # inputs reaching an op TFLite leaves undefined (int8 DIV): the next seeds, else no expected output
    for retry in range(1, UNDEFINED_RETRIES + 1):
        if not any(r.undefined for r in refs):
            break
        if retry == UNDEFINED_RETRIES:
            why = next(line for r in refs for line in r.undefined)
            print(f"stm32ai: warning: seeds {seed}..{seed + retry - 1} all reach undefined reference results, so "
                  f"the demo embeds no expected output and reports `result: no-reference` ({why})", file=sys.stderr)
            return TestVector(_shaped(g, inputs))
        inputs = random_inputs(model, 1, seed + retry)
        refs = references(model, inputs)
    shaped_in = _shaped(g, inputs)
    missing = missing_reference_error(model, refs)
    if missing:
        raise Stm32aiError(f"{missing} (or generate with --no-test-vector: a demo without expected output)")
    verdict = next((r for r in refs if r.verdict and r.outputs is not None), None)
    if verdict is None:
        reasons = "; ".join(f"{r.unavailable or r.overruled}" for r in refs)
        print(f"stm32ai: warning: no reference runs this model ({model.name}), so the demo embeds no expected "
              f"output and reports `result: no-reference` ({reasons})", file=sys.stderr)
        return TestVector(shaped_in)
    outs = [np.asarray(y).reshape(g.tensors[t].shape) for y, t in zip(verdict.outputs, g.outputs, strict=True)]
    label = _LABELS.get(verdict.name, verdict.name)
    if verdict.substitutions:  # named wherever the expected output is (docs/references.md, op versions)
        label = f"{label.removesuffix(')')}; " if label.endswith(")") else f"{label} ("
        label += "; ".join(verdict.substitutions) + ")"
    return TestVector(shaped_in, outs, label)
