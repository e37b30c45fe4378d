"""Graph IR shared by the frontend, the passes and the planner.

A Graph is a flat list of tensors and a list of ops in execution order (the order of
the source model, which the converter already made topological). Tensor ids are list
indices. Constants carry their value in `Tensor.data`.

After the lowering pass every remaining op has `kernel` set to the name of a C kernel
(the kernel families: docs/architecture.md, "Kernel families") and `attrs` holding
everything the kernel needs, computed in Python: the C code does only the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_DIMS = 6  # the largest rank a kernel walks; C: AI_MAX_DIMS in ai_platform.h (tests check they agree)

# Element type -> (ai_dtype_code, bits) of the C runtime's ai_dtype (DLPack codes; C: the
# ai_dtype_code enum in ai_platform.h, checked by tests/test_structure.py).
DTYPE_CODES = {
    "int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64),
    "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
    "float32": (2, 32), "bool": (6, 8),
}

DTYPE_SIZES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
    "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "float16": 2, "float32": 4, "float64": 8,
}


@dataclass
class Quant:
    """Affine quantisation: real = scale * (q - zero_point).

    Per-tensor when `scale` has one element, else per-channel along `axis`.
    """

    scale: np.ndarray  # float32 [n]
    zero_point: np.ndarray  # int64 [n]
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    def to_json(self) -> dict[str, Any]:
        return {
            "scale": [float(s) for s in self.scale],
            "zero_point": [int(z) for z in self.zero_point],
            "axis": int(self.axis),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Quant:
        return Quant(np.asarray(d["scale"], np.float32), np.asarray(d["zero_point"], np.int64),
                     int(d.get("axis", 0)))


@dataclass
class Tensor:
    id: int
    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name, see DTYPE_SIZES
    quant: Quant | None = None
    data: np.ndarray | None = None  # constant value, dtype/shape as above
    variable: bool = False  # TFLite variable tensor (e.g. LSTM state): persistent, zero at init

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.size * DTYPE_SIZES[self.dtype]


@dataclass
class Op:
    type: str  # TFLite builtin name ("CONV_2D"), "CUSTOM:<code>", or a pass-made name
    inputs: list[int]  # tensor ids; -1 marks an omitted optional input
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)
    index: int = -1  # position in the source model, for error messages
    kernel: str | None = None  # set by lowering: C kernel name, "__nop" for aliases
    attrs: dict[str, Any] = field(default_factory=dict)  # kernel parameters (JSON-able)
    macc: int = 0  # multiply-accumulates, set by lowering
    scratch: int = 0  # bytes of kernel scratch the planner must provide (passed last)
    inplace: bool = False  # lowering says output 0 may overwrite input 0 (same size, elementwise)
    # (offset, attrs) pairs: output 0 may start `offset` bytes after input 0 (negative: before)
    # and overlap it when the kernel runs with `attrs` applied (its access order): it never
    # writes a byte it still has to read (passes/lower/overlap.py). None: kept apart.
    overlap: list[tuple[int, dict[str, int]]] | None = None
    # set by lowering for a layer a tuning table can steer (stm32ai/tuning.py): its layer key,
    # and the variant the table asked for (None: the rules of --optimization / --winograd)
    tune_key: str | None = None
    tune_variant: str | None = None

    @property
    def where(self) -> str:
        return f"op #{self.index} ({self.type})"


@dataclass
class Graph:
    name: str
    tensors: list[Tensor]
    ops: list[Op]
    inputs: list[int]
    outputs: list[int]
    description: str = ""
    # --optimization time|balanced|ram: the speed/memory trade lowering may take where a
    # kernel has two layouts (set by the pipeline before lowering)
    optimization: str = "balanced"
    # int8 3x3 stride-1 convolutions by Winograd F(2x2,3x3) where proved exact
    # (passes/lower/conv_wino.py; set by the pipeline before lowering): True (--winograd) every
    # legal layer, False (--no-winograd) none, None the per-core rule `wino_default`
    winograd: bool | None = None
    # flash bytes the weights may use (the board's; None: DEFAULT_WEIGHTS_BUDGET), for the
    # Winograd rule's flash check under balanced (set by the pipeline before lowering)
    weights_budget: int | None = None
    # generate --tuning FILE: layer key -> variant (stm32ai/tuning.py; set by the pipeline)
    tuning: dict[str, str] | None = None
    # --input-rows: graph inputs a stripe reads may arrive in rows from the application's row
    # source instead of sitting whole in the pool (passes/stripes.py; set by the pipeline)
    input_rows: bool = False
    # the target board's core ("cortex-m4", ...) where lowering picks a core-specific variant
    # (FC's int16 input scratch, passes/lower/fc.py); None: no board, the portable choice
    core: str | None = None

    def add_tensor(self, name: str, shape: tuple[int, ...], dtype: str,
                   quant: Quant | None = None, data: np.ndarray | None = None) -> int:
        t = Tensor(len(self.tensors), name, tuple(int(s) for s in shape), dtype, quant, data)
        self.tensors.append(t)
        return t.id

    def add_const(self, name: str, value: np.ndarray, quant: Quant | None = None) -> int:
        value = np.asarray(value, order="C")  # not ascontiguousarray: that makes scalars 1-d
        return self.add_tensor(name, value.shape, value.dtype.name, quant, value)

    def producer(self, tid: int) -> Op | None:
        for op in self.ops:
            if tid in op.outputs:
                return op
        return None

    def consumers(self, tid: int) -> list[Op]:
        return [op for op in self.ops if tid in op.inputs]

    def used_tensor_ids(self) -> set[int]:
        used = set(self.inputs) | set(self.outputs)
        for op in self.ops:
            used.update(t for t in op.inputs if t >= 0)
            used.update(op.outputs)
        return used
