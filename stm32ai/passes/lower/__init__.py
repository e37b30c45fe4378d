"""Lowering: TFLite ops -> calls of C kernels with all parameters precomputed.

Each op family lives in its own module and registers an `OpSupport` for every TFLite
op type it handles; `common.py` holds the helpers families share (quantisation, fused
activation, broadcasting) and registers nothing. After `lower_graph`, each op has:

* `kernel`  - the C kernel suffix: the emitter calls `ai_<kernel>(...)`, or "__nop" for
  a zero-copy alias (RESHAPE): output shares the input's storage, no code;
* `inputs`  - the tensor ids passed as pointers, in the kernel's argument order
  (constants created by lowering, e.g. folded biases and multiplier tables, included;
  -1 passes NULL);
* `attrs`   - the fields of `ai_<kernel>_params` (ints, floats or lists of ints); the
  emitter initialises the struct by field name, so attrs keys ARE the C field names.
  Empty attrs: the kernel takes no params struct;
* `scratch` - bytes of scratch the kernel needs, passed as the last argument;
* `macc`    - multiply-accumulates, for reports.

The kernel's C signature is
`void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>[, void *scratch])`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stm32ai.errors import UnsupportedModelError
from stm32ai.ir import Graph, Op
from stm32ai.passes.quant import MultiplierRangeError

Check = Callable[[Op, Graph], "str | None"]
Lower = Callable[[Op, Graph], None]


@dataclass
class OpSupport:
    op_type: str
    check: Check  # returns None when supported, else the reason
    lower: Lower
    constraints: str  # one line for `stm32ai supported-ops`


REGISTRY: dict[str, OpSupport] = {}

Applies = Callable[[Op, Graph], bool]


@dataclass
class Variant:
    """A dtype variant of an op type that lives in its own module (e.g. int16x8 in s16.py):
    ops it `applies` to are checked and lowered by it, the others by the base entry."""
    applies: Applies
    check: Check
    lower: Lower
    constraints: str


VARIANTS: dict[str, list[Variant]] = {}


def register(op_type: str, constraints: str, check: Check) -> Callable[[Lower], Lower]:
    def deco(fn: Lower) -> Lower:
        REGISTRY[op_type] = OpSupport(op_type, check, fn, constraints)
        return fn
    return deco


def register_variant(op_type: str, constraints: str, applies: Applies,
                     check: Check) -> Callable[[Lower], Lower]:
    def deco(fn: Lower) -> Lower:
        VARIANTS.setdefault(op_type, []).append(Variant(applies, check, fn, constraints))
        return fn
    return deco


def _with_variants(base: OpSupport | None, op_type: str, variants: list[Variant]) -> OpSupport:
    def pick(op: Op, g: Graph) -> Variant | OpSupport | None:
        return next((v for v in variants if v.applies(op, g)), base)

    def check(op: Op, g: Graph) -> str | None:
        s = pick(op, g)
        return "no kernel for this operator" if s is None else s.check(op, g)

    def lower(op: Op, g: Graph) -> None:
        s = pick(op, g)
        assert s is not None
        s.lower(op, g)

    text = "; ".join(([base.constraints] if base else []) + [v.constraints for v in variants])
    return OpSupport(op_type, check, lower, text)


def _load_families() -> None:
    # Importing a family module registers its ops (common.py registers none).
    import importlib
    import pkgutil

    for m in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{m.name}")


def registry() -> dict[str, OpSupport]:
    """Every supported op type; an op type with variants dispatches to them first."""
    _load_families()
    if not VARIANTS:
        return REGISTRY
    merged = dict(REGISTRY)
    for op_type, variants in VARIANTS.items():
        merged[op_type] = _with_variants(REGISTRY.get(op_type), op_type, variants)
    return merged


def lower_graph(g: Graph) -> Graph:
    reg = registry()
    for op in list(g.ops):
        support = reg.get(op.type)
        if support is None:
            raise UnsupportedModelError(f"{op.where}: no kernel for {op.type}")
        try:
            support.lower(op, g)
        except MultiplierRangeError as e:
            raise UnsupportedModelError(f"{op.where}: {e} — the model is malformed; re-export it") from None
        if op.kernel is None:
            raise AssertionError(f"lowering of {op.where} set no kernel")
    return g
