"""Op-version substitution: run a reference that refuses a model only because of an op *version*.

The converter stamps each operator code with the version its tensor types need
(TFLite's ``tensorflow/lite/tools/versioning/op_version.cc``); a runtime's op resolver registers
a kernel for a range of versions. LiteRT's reference resolver (``register_ref.cc``) registers
TILE up to v2 and DEPTH_TO_SPACE at v1 only, while the converter stamps v3 / v2 on every int8
TILE / DEPTH_TO_SPACE, so LiteRT-ref refuses such a model ("Didn't find op for builtin opcode
'TILE' version '3'") although the kernel it would run is the one it has: for these ops the
newer version only *declares* int8 support, and the registered kernel dispatches on the tensor
type at run time. (TFLite Micro never checks versions, so it needs no rule.)

`RULES` lists each (op, version shipped, version run, tensor types) where that holds, with the
reason. `run_substituted` reacts to a version refusal: when a rule matches the refused op and
every tensor of every operator using that op code has a listed type, it writes a temporary
copy of the model whose operator-code version is lowered (one int32 changed in place, every
other byte identical), runs the reference on it and returns the substitutions made, which
the caller names in every output ("litert-ref (TILE v3 run as v2: same int8 semantics)").
Nothing here is silent and nothing applies to a type or version not in the table.
docs/references.md ("Op versions") explains the rule.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stm32ai.validate.refusal import ReferenceUnavailable

__all__ = ["RULES", "VersionRule", "find_rule", "lower_versions", "refused_op", "run_substituted"]


@dataclass(frozen=True)
class VersionRule:
    op: str                    # TFLite builtin operator name
    shipped: int               # version the converter stamps for `types`
    run_as: int                # highest version the reference registers
    types: frozenset[str]      # tensor types for which the two versions are one kernel path
    references: frozenset[str]  # the references that need the rule
    why: str                   # the short reason printed with the substitution
    evidence: str              # the long reason (docs, tests)

    def label(self) -> str:
        return f"{self.op} v{self.shipped} run as v{self.run_as}: {self.why}"


RULES: tuple[VersionRule, ...] = (
    VersionRule(
        "TILE", 3, 2, frozenset({"int8"}), frozenset({"litert-ref"}), "same int8 semantics",
        "op_version.cc stamps TILE v3 exactly when the input is int8 (v2: string); LiteRT's "
        "register_ref.cc registers Register_TILE() for v1-v2 and register.cc the same function for "
        "v1-v3; tile.cc copies elements by type size whatever the version, and the output keeps "
        "the input's quantisation"),
    VersionRule(
        "DEPTH_TO_SPACE", 2, 1, frozenset({"int8"}), frozenset({"litert-ref"}), "same int8 semantics",
        "op_version.cc stamps DEPTH_TO_SPACE v2 exactly when the input is int8; register_ref.cc "
        "registers Register_DEPTH_TO_SPACE_REF() with no version range (v1 only); its Eval "
        "switches on the tensor type (int8 included) and only moves elements"),
)

_REFUSAL = re.compile(r"Didn't find op for builtin opcode '([A-Z0-9_]+)' version '(\d+)'")
_MAX_ROUNDS = len(RULES) + 1

# TFLite TensorType codes -> names (the types a rule can name).
_TYPE_NAMES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool",
               7: "int16", 9: "int8", 10: "float64"}


def refused_op(reason: str) -> tuple[str, int] | None:
    """(op, version) when a reference's refusal is an op-version lookup failure."""
    m = _REFUSAL.search(reason)
    return (m.group(1), int(m.group(2))) if m else None


def find_rule(op: str, version: int, kind: str) -> VersionRule | None:
    return next((r for r in RULES if r.op == op and r.shipped == version and kind in r.references), None)


def _builtin_names() -> dict[int, str]:
    import tflite

    return {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}


def _code_of(oc: Any) -> int:
    return max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))


def _types_ok(model: Any, opcode_index: int, types: frozenset[str]) -> bool:
    """Every non-constant-shape operand of every operator using the op code has a listed type
    (the data input and outputs; int32 shape operands such as TILE's multiples are not data)."""
    used = False
    for s in range(model.SubgraphsLength()):
        sg = model.Subgraphs(s)
        for o in range(sg.OperatorsLength()):
            op = sg.Operators(o)
            if op.OpcodeIndex() != opcode_index:
                continue
            used = True
            data = [op.Inputs(0)] if op.InputsLength() else []
            data += [op.Outputs(k) for k in range(op.OutputsLength())]
            for t in data:
                if t < 0 or _TYPE_NAMES.get(sg.Tensors(t).Type()) not in types:
                    return False
    return used


def lower_versions(buf: bytes, changes: dict[str, tuple[int, int]]) -> tuple[bytes, list[str]]:
    """A copy of the flatbuffer `buf` whose operator codes ``op`` at version ``old`` read
    ``new`` (``changes[op] = (old, new)``). The version field is overwritten in place (it is
    stored, since only versions >= 2 are lowered), so every other byte stays identical."""
    import tflite

    names = _builtin_names()
    model = tflite.Model.GetRootAs(buf, 0)
    out = bytearray(buf)
    done = []
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        name = names.get(_code_of(oc), "")
        if name not in changes or oc.Version() != changes[name][0]:
            continue
        field = oc._tab.Offset(8)  # OperatorCode.version: field 2 -> vtable slot 4 + 2 * 2
        if field == 0:
            raise ValueError(f"operator code {i} ({name}) has no stored version")
        struct.pack_into("<i", out, oc._tab.Pos + field, changes[name][1])
        done.append(name)
    return bytes(out), done


def _applicable(model_path: str, op: str, version: int, kind: str) -> VersionRule | None:
    import tflite

    rule = find_rule(op, version, kind)
    if rule is None:
        return None
    model = tflite.Model.GetRootAs(Path(model_path).read_bytes(), 0)
    names = _builtin_names()
    hits = [i for i in range(model.OperatorCodesLength())
            if names.get(_code_of(model.OperatorCodes(i))) == op and model.OperatorCodes(i).Version() == version]
    return rule if hits and all(_types_ok(model, i, rule.types) for i in hits) else None


Runner = Callable[[str], list[np.ndarray]]


def run_substituted(kind: str, model_path: str | os.PathLike[str], reason: str,
                    run: Runner) -> tuple[list[np.ndarray], list[VersionRule]] | None:
    """Outputs of ``run(path)`` on a copy of the model with version-lowered op codes, and the
    rules applied; None when the refusal `reason` is not a version refusal a rule covers (the
    caller keeps the refusal). ``run`` raises ReferenceUnavailable on a refusal; a refusal of
    the copy for another covered op adds that rule and retries."""
    path = os.fspath(model_path)
    buf = Path(path).read_bytes()
    applied: list[VersionRule] = []
    with tempfile.TemporaryDirectory(prefix="stm32ai-opver-") as tmp:
        copy = os.path.join(tmp, Path(path).name)
        for _ in range(_MAX_ROUNDS):
            hit = refused_op(reason)
            rule = _applicable(path, *hit, kind) if hit else None
            if rule is None or rule in applied:
                return None
            applied.append(rule)
            data, _ = lower_versions(buf, {r.op: (r.shipped, r.run_as) for r in applied})
            Path(copy).write_bytes(data)
            try:
                return run(copy), applied
            except ReferenceUnavailable as exc:
                reason = exc.reason
    return None


def describe(kind: str, rules: Sequence[VersionRule]) -> str:
    """``litert-ref (TILE v3 run as v2: same int8 semantics)``, or just the kind."""
    return f"{kind} ({'; '.join(r.label() for r in rules)})" if rules else kind
