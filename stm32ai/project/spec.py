"""Typed inputs of the project generator: what `stm32ai.project` builds a firmware from.

    from stm32ai.project.spec import ProjectModel, Pools, TestVector
    from stm32ai.project.build import generate_firmware_project

    vec = TestVector(inputs=[x], expected=[y], reference="TFLite Micro")
    generate_firmware_project(out, board, [ProjectModel("kws", compiled, vec, "kws.tflite")],
                              Pools(shared=True), validation=False, profile=False)

The caller (the CLI, `validate --mode target`, the benchmark) compiles the models and computes
the test vectors (stm32ai.validate.vectors): `stm32ai.project` never runs a reference itself, so
data flows one way, compiler and references -> project (tests/test_project_api.py checks that
`stm32ai.project` does not import `stm32ai.validate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Pools", "ProjectModel", "TestVector"]


@dataclass(frozen=True)
class TestVector:
    """One sample the demo runs: inputs in the model's input order (shaped), and the verdict
    reference's outputs for them, or None (no reference: the demo reports `result: no-reference`)."""

    __test__ = False  # not a pytest class

    inputs: list[np.ndarray]
    expected: list[np.ndarray] | None = None
    reference: str | None = None  # who computed `expected` ("TFLite Micro", ...)


@dataclass
class ProjectModel:
    """One model of the project: its C prefix, the compiled model, its demo test vector."""

    name: str                 # C identifier, prefix of every symbol and file of the model
    compiled: Any             # stm32ai.pipeline.Compiled (its plan may be split across regions)
    vector: TestVector
    model_file: str = ""      # the .tflite file name (untrusted: shown only through the sanitiser)
    input_normalization: list[tuple[float, float]] | None = None  # <name>_input_from_u8's (offset, scale)


@dataclass(frozen=True)
class Pools:
    """Where the pools go. `activations`/`weights` are board memory regions in order of
    preference (`REGION` or `REGION:SIZE` for activations), None for the board's defaults.
    `shared`: the models of a multi-model project share one activation pool sized to the
    largest (the application runs them one after another); else each has its own."""

    activations: list[str] | None = None
    weights: list[str] | None = None
    shared: bool = False
