"""Run a .tflite model with the two references of docs/references.md.

* TFLite Micro (pip ``tflite-micro``, reference kernels): the primary reference wherever it
  runs the model, and the memory baseline (``tflm_arena_bytes``).
* LiteRT (pip ``ai-edge-litert``) with ``OpResolverType.BUILTIN_REF``: the cross-check and the
  reference for models TFLM refuses. Its default/XNNPACK kernels round differently, so they are
  never used here.

Both native runtimes call ``abort()`` (or crash) on some graphs, so every run happens in a child
interpreter (``python -m stm32ai.validate.reference``); a refusal, an abort or a segfault turns
into ``ReferenceUnavailable`` with a one-line reason. Arrays travel through ``.npz`` files.
A reference whose package is not installed is ``ReferenceMissing`` (checked in the parent, no
child started), which carries the pip command that installs it (docs/references.md).

Batch convention (shared with ``random_inputs`` and the metrics): each input array holds ``N``
whole samples in C order; ``random_inputs`` lays them out with the leading batch dimension of
size 1 replaced by ``N`` (X-CUBE-AI's layout; an extra leading axis when the shape does not start
with 1), and any other shape of the same data (extra axis, flat) is accepted. Outputs come back
in that layout: batch dimension replaced by ``N`` when the output shape starts with 1, else an
extra leading axis. With one sample the shapes are exactly the model's.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stm32ai.validate.refusal import ReferenceUnavailable

__all__ = [
    "DEFAULT_ARENA",
    "LITERT_REQUIREMENT",
    "REFERENCES",
    "TFLM_REQUIREMENT",
    "RefResult",
    "ReferenceMissing",
    "ReferenceUnavailable",
    "TensorSpec",
    "input_specs",
    "output_specs",
    "random_inputs",
    "missing_reference_error",
    "tflm_known_wrong",
    "reference_versions",
    "references",
    "run_litert_ref",
    "run_tflm",
    "tflm_arena_bytes",
]

# Generous on purpose: the recording allocator reports what was actually used.
DEFAULT_ARENA = 32 * 1024 * 1024
DEFAULT_TIMEOUT = 600.0

# TFLite schema TensorType -> numpy dtype (types a graph input/output can have here).
_TFL_DTYPES: dict[int, np.dtype] = {
    0: np.dtype(np.float32), 1: np.dtype(np.float16), 2: np.dtype(np.int32),
    3: np.dtype(np.uint8), 4: np.dtype(np.int64), 6: np.dtype(np.bool_),
    7: np.dtype(np.int16), 9: np.dtype(np.int8), 10: np.dtype(np.float64),
    15: np.dtype(np.uint32), 16: np.dtype(np.uint16),
}

_ARENA_RE = re.compile(r"Arena allocation total (\d+) bytes")




class ReferenceMissing(ReferenceUnavailable):
    """The reference's package is not installed; ``install`` is the command that installs it."""

    def __init__(self, reason: str, install: str) -> None:
        super().__init__(reason)
        self.install = install


@dataclass(frozen=True)
class Reference:
    """A reference runtime and the pip package it comes from (the pins live in pyproject.toml)."""

    kind: str          # 'tflm' | 'litert-ref'
    label: str         # how messages name it
    dist: str          # pip distribution name
    module: str        # top-level import name
    install: str       # the command that installs it as stm32ai wants it
    role: str          # one line for --version and the docs


# TFLM is a normal dependency (it computes the demo's expected output and validate's verdict);
# LiteRT is the [litert] extra (hybrid models, which TFLM refuses, and the cross-check).
# The version ranges are pyproject.toml's (tests/test_references_policy.py keeps them equal); why these
# ranges: docs/references.md.
TFLM_REQUIREMENT = "tflite-micro>=0.dev20261023182759,<0.dev20270101000000"
LITERT_REQUIREMENT = "ai-edge-litert>=2.3,<3"
REFERENCES: dict[str, Reference] = {
    "tflm": Reference("tflm", "TFLite Micro", "tflite-micro", "tflite_micro",
                      f"pip install '{TFLM_REQUIREMENT}'",
                      "primary reference (verdict wherever it runs the model)"),
    "litert-ref": Reference("litert-ref", "LiteRT", "ai-edge-litert", "ai_edge_litert",
                            "pip install 'stm32ai[litert]'",
                            "reference kernels: cross-check, and verdict for models TFLM refuses"),
}


def _installed(ref: Reference) -> bool:
    import importlib.util

    return importlib.util.find_spec(ref.module) is not None


def reference_versions() -> dict[str, str | None]:
    """Installed version of each reference's distribution (None: not installed)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for kind, ref in REFERENCES.items():
        try:
            out[kind] = metadata.version(ref.dist) if _installed(ref) else None
        except metadata.PackageNotFoundError:
            out[kind] = "unknown version"   # importable but without pip metadata
    return out


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output as the flatbuffer declares it."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    scale: np.ndarray | None = None       # float64, one entry per tensor or per channel
    zero_point: np.ndarray | None = None  # int64, same length as scale
    axis: int = 0                          # quantized_dimension when per-channel
    value: np.ndarray | None = None        # fixed content (shape operands fed as graph inputs)

    @property
    def quantized(self) -> bool:
        return self.scale is not None


@dataclass
class RefResult:
    """One reference's run: outputs, or the reason it could not run the model."""

    name: str                                # 'tflm' | 'litert-ref'
    outputs: list[np.ndarray] | None = None
    unavailable: str | None = None
    verdict: bool = False                    # True for the reference that decides pass/fail
    install: str | None = None               # set when the reference is not installed
    overruled: str | None = None             # why this reference is not the verdict although it ran
    substitutions: list[str] = field(default_factory=list)  # op versions lowered to run it (op_versions.py)
    undefined: list[str] = field(default_factory=list)  # ops whose result TFLite leaves undefined here

    @property
    def label(self) -> str:
        """The name and every substitution: ``litert-ref (TILE v3 run as v2: same int8 semantics)``."""
        return f"{self.name} ({'; '.join(self.substitutions)})" if self.substitutions else self.name

    @property
    def missing(self) -> bool:
        return self.install is not None

    @property
    def ok(self) -> bool:
        return self.outputs is not None


# --------------------------------------------------------------------------------------------
# Model I/O description (pure Python flatbuffer parsing: safe in the parent process)
# --------------------------------------------------------------------------------------------

def _load_model(model_path: str | os.PathLike[str]) -> Any:
    import tflite

    buf = Path(model_path).read_bytes()
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise ValueError(f"{model_path}: not a TFLite flatbuffer (no TFL3 identifier)")
    return tflite.Model.GetRootAs(buf, 0)


def _spec(tensor: Any, value: np.ndarray | None = None) -> TensorSpec:
    shape = tuple(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
    code = tensor.Type()
    if code not in _TFL_DTYPES:
        raise ValueError(f"tensor {tensor.Name()!r}: unsupported TFLite type {code}")
    scale = zero_point = None
    axis = 0
    q = tensor.Quantization()
    if q is not None and q.ScaleLength() > 0:
        scale = q.ScaleAsNumpy().astype(np.float64)
        zero_point = (q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength()
                      else np.zeros(len(scale), np.int64))
        axis = int(q.QuantizedDimension())
    name = tensor.Name().decode("utf-8", "replace") if tensor.Name() else ""
    return TensorSpec(name, shape, _TFL_DTYPES[code], scale, zero_point, axis, value)


def _builtin_code(model: Any, op: Any) -> int:
    oc = model.OperatorCodes(op.OpcodeIndex())
    # Schema v3a moved codes > 127 to BuiltinCode; old files only fill the deprecated field.
    return max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))


# TFLite Micro kernels known to compute a different function than TFLite defines (the model's
# real-valued meaning and LiteRT's reference kernels agree): builtin code -> (when, why).
_SPACE_TO_BATCH_ND = 38
TFLM_WRONG = {
    _SPACE_TO_BATCH_ND: (
        "int8 with a zero point other than 0",
        "TFLite Micro's SPACE_TO_BATCH_ND pads int8 with 0, not the zero point (its kernel never sets "
        "the pad value; tflite-micro#1646), so LiteRT-ref is the verdict (docs/references.md)"),
}


def tflm_known_wrong(model_path: str | os.PathLike[str]) -> str | None:
    """The reason TFLite Micro cannot be the verdict for this model, or None.

    Today one kernel: an int8 SPACE_TO_BATCH_ND whose output zero point is not 0 pads with raw
    0 (the real value -scale*zp) where TFLite pads with the zero point (the real value 0). A
    dilated convolution the converter writes as SPACE_TO_BATCH_ND -> CONV_2D ->
    BATCH_TO_SPACE_ND then differs at the borders (tens of LSB)."""
    model = _load_model(model_path)
    sg = model.Subgraphs(0)
    for o in range(sg.OperatorsLength()):
        op = sg.Operators(o)
        if _builtin_code(model, op) != _SPACE_TO_BATCH_ND or op.OutputsLength() < 1:
            continue
        out = sg.Tensors(op.Outputs(0))
        q = out.Quantization()
        zp = q.ZeroPointAsNumpy() if q is not None and q.ZeroPointLength() else np.zeros(1)
        if out.Type() == 9 and np.any(np.asarray(zp) != 0):  # int8
            return TFLM_WRONG[_SPACE_TO_BATCH_ND][1]
    return None


# Ops that take uint8 in TFLite Micro (8-bit I/O conversions); any other op on a quantised
# uint8 tensor makes a legacy uint8 model (TF1 QAT / TOCO)
_UINT8_NATIVE = {6, 114}  # DEQUANTIZE, QUANTIZE
_UINT8 = 3


def legacy_uint8(model_path: str | os.PathLike[str]) -> str | None:
    """Why TFLite Micro cannot be the verdict for a legacy uint8 model (uint8 weights and
    activations), or None. TFLM dropped uint8 from its kernels (CONV_2D and the others refuse
    it, some with a misleading message such as "Hybrid models are not supported"); LiteRT's
    reference kernels run such models and are the verdict (docs/kernels_u8.md)."""
    import tflite

    model = _load_model(model_path)
    sg = model.Subgraphs(0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    found: list[str] = []
    for o in range(sg.OperatorsLength()):
        op = sg.Operators(o)
        code = _builtin_code(model, op)
        if code in _UINT8_NATIVE:
            continue
        ids = [op.Inputs(i) for i in range(op.InputsLength())] + [op.Outputs(i) for i in range(op.OutputsLength())]
        for tid in ids:
            if tid < 0:
                continue
            t = sg.Tensors(tid)
            q = t.Quantization()
            if t.Type() == _UINT8 and q is not None and q.ScaleLength():
                name = names.get(code, f"op {code}")
                if name not in found:
                    found.append(name)
                break
    if not found:
        return None
    return ("legacy uint8 model (uint8 weights and activations, TF1 quantisation-aware training / TOCO): "
            f"TFLite Micro has no uint8 kernels for {', '.join(found[:6])}{' ...' if len(found) > 6 else ''}, "
            "so LiteRT with its reference kernels is the verdict (docs/kernels_u8.md)")


_DIV = 42


def int8_divs(model_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every int8 DIV of the model: output name, input tensor indices and TFLite's parameters
    (lower.binary.div_quant_params), for `div_undefined` on the reference's tensors."""
    from stm32ai.passes.lower.binary import div_quant_params

    model = _load_model(model_path)
    sg = model.Subgraphs(0)
    found = []
    for o in range(sg.OperatorsLength()):
        op = sg.Operators(o)
        if _builtin_code(model, op) != _DIV or op.InputsLength() != 2 or op.OutputsLength() < 1:
            continue
        ts = [sg.Tensors(op.Inputs(0)), sg.Tensors(op.Inputs(1)), sg.Tensors(op.Outputs(0))]
        if any(t.Type() != 9 for t in ts):  # int8
            continue
        q = []
        for t in ts:
            qp = t.Quantization()
            if qp is None or qp.ScaleLength() != 1 or qp.ZeroPointLength() != 1:
                break
            q += [float(qp.Scale(0)), int(qp.ZeroPoint(0))]
        else:
            with np.errstate(all="ignore"):
                params = div_quant_params(*q)
            found.append({"name": (ts[2].Name() or b"").decode("utf-8", "replace"), "in1": op.Inputs(0),
                          "in2": op.Inputs(1), "params": params})
    return found


def undefined_lines(counts: Sequence[Sequence[Any]]) -> list[str]:
    """One line per int8 DIV whose inputs reach TFLite's undefined domain: [name, K, N]."""
    from stm32ai.sanitize import quote

    return [_one_line(f"reference undefined: int8 DIV {quote(name)} at {k:,} of {n:,} elements (TFLite shifts by >31 "
                      "where the quotient rounds to the zero point, or divides by zero; ours gives the zero "
                      "point (a zero divisor saturates), TFLM on Cortex-M gives zp+-1; docs/kernels_binary.md)")
            for name, k, n in counts if k]


def input_specs(model_path: str | os.PathLike[str]) -> list[TensorSpec]:
    """Inputs of the main subgraph, in graph order."""
    import tflite

    model = _load_model(model_path)
    sg = model.Subgraphs(0)
    graph_inputs = [int(i) for i in sg.InputsAsNumpy()] if sg.InputsLength() else []
    # A shape operand wired to a graph input (TRANSPOSE_CONV output_shape, RESHAPE new shape)
    # needs the value the graph was built for; random data there is meaningless.
    values: dict[int, np.ndarray] = {}
    operand = {tflite.BuiltinOperator.TRANSPOSE_CONV: 0, tflite.BuiltinOperator.RESHAPE: 1}
    for o in range(sg.OperatorsLength()):
        op = sg.Operators(o)
        pos = operand.get(_builtin_code(model, op))
        if pos is None or op.InputsLength() <= pos or op.OutputsLength() < 1:
            continue
        t = int(op.Inputs(pos))
        if t in graph_inputs:
            out = sg.Tensors(op.Outputs(0))
            values[t] = np.asarray(out.ShapeAsNumpy() if out.ShapeLength() else [], np.int64)
    specs = []
    for t in graph_inputs:
        spec = _spec(sg.Tensors(t))
        if t in values and values[t].size == int(np.prod(spec.shape)):
            spec = TensorSpec(spec.name, spec.shape, spec.dtype, spec.scale, spec.zero_point,
                              spec.axis, values[t].astype(spec.dtype).reshape(spec.shape))
        specs.append(spec)
    return specs


def output_specs(model_path: str | os.PathLike[str]) -> list[TensorSpec]:
    """Outputs of the main subgraph, in graph order."""
    model = _load_model(model_path)
    sg = model.Subgraphs(0)
    return [_spec(sg.Tensors(int(t))) for t in (sg.OutputsAsNumpy() if sg.OutputsLength() else [])]


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

SpecLike = TensorSpec | tuple[Any, ...]


def _as_spec(item: SpecLike) -> TensorSpec:
    if isinstance(item, TensorSpec):
        return item
    shape, dtype = item[0], item[1]
    quant = item[2] if len(item) > 2 else None
    scale = zp = None
    if quant is not None:
        scale = np.atleast_1d(np.asarray(quant[0], np.float64))
        zp = np.atleast_1d(np.asarray(quant[1], np.int64))
    return TensorSpec("", tuple(int(d) for d in shape), np.dtype(dtype), scale, zp)


def _batched_shape(shape: tuple[int, ...], n: int) -> tuple[int, ...]:
    if n == 1:
        return shape
    if shape and shape[0] == 1:
        return (n, *shape[1:])
    return (n, *shape)


def random_inputs(model: str | os.PathLike[str] | Sequence[SpecLike], n: int = 1,
                  seed: int = 0) -> list[np.ndarray]:
    """Seeded random inputs, one array per graph input holding ``n`` samples.

    ``model`` is a .tflite path or a list of ``TensorSpec`` / ``(shape, dtype[, (scale, zp)])``.
    Integer inputs cover their full raw range (int8 -128..127, uint8 0..255, int16 full range;
    wider integers stay within int8's range so index-like inputs stay sane) because the C
    kernels must be bit-exact over the whole range; float inputs are uniform in [-1, 1].
    """
    specs = (input_specs(model) if isinstance(model, (str, os.PathLike))
             else [_as_spec(s) for s in model])
    if n < 1:
        raise ValueError("n must be >= 1")
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        shape = tuple(max(int(d), 1) for d in spec.shape)  # -1 (dynamic) dims -> 1
        full = _batched_shape(shape, n)
        dt = np.dtype(spec.dtype)
        if spec.value is not None:
            one = np.asarray(spec.value, dt).reshape(shape)
            out.append(np.broadcast_to(one.reshape((1,) * (len(full) - len(shape)) + shape)
                                       if len(full) > len(shape) else one, full).copy())
        elif dt.kind == "f":
            out.append(rng.uniform(-1.0, 1.0, size=full).astype(dt))
        elif dt == np.bool_:
            out.append(rng.integers(0, 2, size=full).astype(np.bool_))
        elif dt.kind in "iu":
            if dt in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.uint16)):
                lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
            else:
                lo, hi = (0, 127) if dt.kind == "u" else (-128, 127)
            out.append(rng.integers(lo, hi + 1, size=full).astype(dt))
        else:
            raise ValueError(f"input {spec.name!r}: no random generator for dtype {dt}")
    return out


def _split_samples(specs: list[TensorSpec], inputs: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
    """Per-sample input lists. Any array holding a whole number of samples in C order is
    accepted (batch dimension replaced by N, an extra leading axis, or flat)."""
    if len(inputs) != len(specs):
        raise ValueError(f"model has {len(specs)} input(s), {len(inputs)} array(s) given")
    counts: list[int] = []
    per_input: list[np.ndarray] = []
    for i, (spec, arr) in enumerate(zip(specs, inputs, strict=True)):
        arr = np.asarray(arr)
        dt = np.dtype(spec.dtype)
        if arr.dtype.kind == "f" and dt.kind in "iub":
            raise ValueError(f"input {i} ({spec.name}): {dt} expected, got {arr.dtype}")
        if arr.dtype.kind in "iu" and dt.kind in "iu" and arr.size and (
                arr.min() < np.iinfo(dt).min or arr.max() > np.iinfo(dt).max):
            raise ValueError(f"input {i} ({spec.name}): values outside the {dt} range")
        shape = tuple(max(d, 1) for d in spec.shape)
        size = int(np.prod(shape))
        if arr.size == 0 or arr.size % size:
            raise ValueError(f"input {i} ({spec.name}): shape {list(arr.shape)} does not hold a whole "
                             f"number of samples of the model's {list(shape)}")
        counts.append(arr.size // size)
        per_input.append(arr.astype(dt, copy=False).reshape((arr.size // size, *shape)))
    if len(set(counts)) > 1:
        raise ValueError(f"inputs hold different sample counts: {counts}")
    n = counts[0] if counts else 1
    return [[np.ascontiguousarray(a[j]) for a in per_input] for j in range(n)]


def _join_samples(per_sample: list[list[np.ndarray]]) -> list[np.ndarray]:
    if len(per_sample) == 1:
        return per_sample[0]
    joined = []
    for k in range(len(per_sample[0])):
        parts = [s[k] for s in per_sample]
        if parts[0].ndim and parts[0].shape[0] == 1:
            joined.append(np.concatenate(parts, axis=0))
        else:
            joined.append(np.stack(parts))
    return joined


# --------------------------------------------------------------------------------------------
# Child process side
# --------------------------------------------------------------------------------------------

def _calls_once(model_path: str) -> bool:
    """Whether the model runs a CALL_ONCE init subgraph (resource variables' initial values).
    Both references' reset zeroes resource variables without running it again, where the
    generated model's ai_reset restores the initial values (docs/kernels_resource.md): such a
    model gets a fresh interpreter for each sample instead of a reset."""
    import tflite
    from tflite.utils import BUILTIN_OPCODE2NAME

    with open(model_path, "rb") as fh:
        m = tflite.Model.GetRootAsModel(fh.read(), 0)
    return any(BUILTIN_OPCODE2NAME.get(max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())) == "CALL_ONCE"
               for oc in (m.OperatorCodes(i) for i in range(m.OperatorCodesLength())))


def _child_tflm(model_path: str, samples: list[list[np.ndarray]], n_out: int, arena: int,
                log_path: str) -> tuple[list[list[np.ndarray]], dict[str, Any]]:
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_file(model_path, arena_size=arena)
    fresh = _calls_once(model_path)
    results = []
    for j, sample in enumerate(samples):
        if j and fresh:
            interp = runtime.Interpreter.from_file(model_path, arena_size=arena)
        elif j:
            interp.reset()  # stateful kernels (LSTM, variables) start fresh for each sample
        for i, x in enumerate(sample):
            interp.set_input(np.ascontiguousarray(x), i)
        interp.invoke()
        results.append([np.array(interp.get_output(k), copy=True) for k in range(n_out)])
    # The recording allocator prints its report on the C-level stderr, which the child has
    # redirected to its log file; read back what this call appended.
    sys.stderr.flush()
    start = os.path.getsize(log_path)
    interp.print_allocations()
    sys.stderr.flush()
    with open(log_path, "rb") as fh:
        fh.seek(start)
        report = fh.read().decode("utf-8", "replace")
    m = _ARENA_RE.search(report)
    return results, {"arena_bytes": int(m.group(1)) if m else None}


def _child_litert(model_path: str, samples: list[list[np.ndarray]], n_out: int,
                  divs: list[dict[str, Any]]) -> tuple[list[list[np.ndarray]], dict[str, Any]]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from stm32ai.passes.lower.binary import div_undefined

    # BUILTIN_REF: reference kernels and no default delegate (XNNPACK rounds differently).
    # With int8 DIVs every tensor is kept, to read each DIV's inputs after the run.
    interp = Interpreter(model_path=model_path, experimental_preserve_all_tensors=bool(divs),
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    in_det = interp.get_input_details()
    out_det = interp.get_output_details()
    fresh = _calls_once(model_path)
    results = []
    counts: list[list[Any]] = [[d["name"], 0, 0] for d in divs]
    for j, sample in enumerate(samples):
        if j and fresh:
            interp = Interpreter(model_path=model_path, experimental_preserve_all_tensors=bool(divs),
                                 experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
            interp.allocate_tensors()
        elif j:
            interp.reset_all_variables()
        for det, x in zip(in_det, sample, strict=True):
            interp.set_tensor(det["index"], np.ascontiguousarray(x))
        interp.invoke()
        results.append([np.array(interp.get_tensor(d["index"]), copy=True) for d in out_det[:n_out]])
        for k, d in enumerate(divs):
            mask = div_undefined(interp.get_tensor(d["in1"]), interp.get_tensor(d["in2"]), d["params"])
            counts[k][1] += int(mask.sum())
            counts[k][2] += int(mask.size)
    return results, ({"div_undefined": counts} if divs else {})


def _child_main(kind: str, model_path: str, workdir: str, arena: int) -> None:
    # Native runtimes log on fds 1/2: send both to a file the parent reads to explain failures.
    log_path = os.path.join(workdir, "log.txt")
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        with np.load(os.path.join(workdir, "inputs.npz")) as z:
            meta = json.loads(str(z["meta"]))
            samples = [[z[f"s{j}_i{i}"] for i in range(meta["n_in"])] for j in range(meta["n"])]
        if kind == "tflm":
            outs, extra = _child_tflm(model_path, samples, meta["n_out"], arena, log_path)
        else:
            outs, extra = _child_litert(model_path, samples, meta["n_out"], meta.get("divs", []))
        np.savez(os.path.join(workdir, "outputs.npz"),
                 **{f"s{j}_o{k}": o for j, s in enumerate(outs) for k, o in enumerate(s)})
        result: dict[str, Any] = {"ok": True, **extra}
    except Exception as exc:  # the parent turns this into ReferenceUnavailable
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    with open(os.path.join(workdir, "result.json"), "w") as fh:
        json.dump(result, fh)


# --------------------------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------------------------

_LABEL = {"tflm": "TFLM", "litert-ref": "LiteRT-ref"}
_NOISE = ("XNNPACK delegate", "[RecordingMicroAllocator]")


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _log_tail(workdir: str, n: int = 3) -> str:
    try:
        text = Path(workdir, "log.txt").read_text("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not any(s in ln for s in _NOISE)
             and not ln.startswith(("Traceback", "  File "))]
    return " | ".join(lines[-n:])


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # Make this copy of the package importable in the child whatever the current directory.
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


@dataclass
class _Job:
    kind: str
    model_path: str
    proc: subprocess.Popen[bytes]
    tmp: tempfile.TemporaryDirectory[str]
    n_samples: int


def _start(kind: str, model_path: str | os.PathLike[str], inputs: Sequence[np.ndarray],
           arena: int = DEFAULT_ARENA) -> _Job:
    path = os.path.abspath(os.fspath(model_path))
    if not os.path.isfile(path):
        raise FileNotFoundError(path)
    ref = REFERENCES[kind]
    if not _installed(ref):
        raise ReferenceMissing(f"{_LABEL[kind]}: not installed ({ref.install})", ref.install)
    samples = _split_samples(input_specs(path), inputs)
    n_out = len(output_specs(path))
    tmp = tempfile.TemporaryDirectory(prefix="stm32ai-ref-")
    meta = {"n": len(samples), "n_in": len(samples[0]), "n_out": n_out,
            "divs": int8_divs(path) if kind == "litert-ref" else []}
    arrays = {f"s{j}_i{i}": x for j, s in enumerate(samples) for i, x in enumerate(s)}
    np.savez(os.path.join(tmp.name, "inputs.npz"), meta=np.array(json.dumps(meta)), **arrays)
    cmd = [sys.executable, "-m", "stm32ai.validate.reference", kind, path, tmp.name, str(arena)]
    proc = subprocess.Popen(cmd, env=_child_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return _Job(kind, path, proc, tmp, len(samples))


def _finish(job: _Job, timeout: float = DEFAULT_TIMEOUT) -> tuple[list[np.ndarray], dict[str, Any]]:
    label = _LABEL[job.kind]
    try:
        try:
            _, err = job.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            job.proc.kill()
            job.proc.communicate()
            raise ReferenceUnavailable(f"{label}: timed out after {timeout:.0f} s") from None
        wd = job.tmp.name
        res_path = Path(wd, "result.json")
        if not res_path.exists():
            rc = job.proc.returncode
            how = (f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with status {rc}")
            tail = _log_tail(wd) or _one_line(err.decode("utf-8", "replace")[-400:])
            raise ReferenceUnavailable(_one_line(f"{label}: crashed ({how})" + (f": {tail}" if tail else "")))
        result = json.loads(res_path.read_text())
        if not result["ok"]:
            tail = _log_tail(wd)
            reason = f"{label}: {result['error']}"
            if tail and tail not in reason:
                reason += f" [{tail}]"
            raise ReferenceUnavailable(_one_line(reason))
        with np.load(os.path.join(wd, "outputs.npz")) as z:
            n_out = sum(1 for k in z.files if k.startswith("s0_o"))
            per_sample = [[z[f"s{j}_o{k}"] for k in range(n_out)] for j in range(job.n_samples)]
        extra = {k: v for k, v in result.items() if k != "ok"}
        return _join_samples(per_sample), extra
    finally:
        job.tmp.cleanup()


def run_tflm(model_path: str | os.PathLike[str], inputs: Sequence[np.ndarray], *,
             arena_size: int = DEFAULT_ARENA, timeout: float = DEFAULT_TIMEOUT) -> list[np.ndarray]:
    """Outputs of TFLite Micro (reference kernels) for ``inputs`` (one array per graph input)."""
    return _finish(_start("tflm", model_path, inputs, arena_size), timeout)[0]


def run_litert_ref(model_path: str | os.PathLike[str], inputs: Sequence[np.ndarray], *,
                   timeout: float = DEFAULT_TIMEOUT) -> list[np.ndarray]:
    """Outputs of LiteRT with its reference kernels (BUILTIN_REF) for ``inputs``."""
    return _finish(_start("litert-ref", model_path, inputs), timeout)[0]


def tflm_arena_bytes(model_path: str | os.PathLike[str], *, arena_size: int = DEFAULT_ARENA,
                     timeout: float = DEFAULT_TIMEOUT) -> int:
    """TFLM's "Arena allocation total" (head + tail) after one inference (recording allocator).

    This is the arena this x86-64 build of TFLM actually used, the memory baseline of docs/bench.md.
    """
    _, extra = _finish(_start("tflm", model_path, random_inputs(model_path, 1, 0), arena_size), timeout)
    if extra.get("arena_bytes") is None:
        raise ReferenceUnavailable("TFLM: no arena report from the recording allocator")
    return int(extra["arena_bytes"])


def references(model_path: str | os.PathLike[str], inputs: Sequence[np.ndarray], *,
               timeout: float = DEFAULT_TIMEOUT) -> list[RefResult]:
    """Run both references (in parallel child processes) and mark the verdict one.

    TFLM is the verdict where it runs the model, else LiteRT-ref; if neither runs it, no
    result carries the verdict. Where a TFLM kernel is known to be wrong (`tflm_known_wrong`)
    TFLM still runs but is `overruled`: LiteRT-ref is the verdict, or nothing if it is missing.
    A missing TFLM leaves no verdict at all: LiteRT-ref in its place would change the expected
    results (docs/references.md, ad01), so the user must install it (`missing_reference_error`).

    A reference that refuses only an op version that op_versions.RULES covers for this model's
    types runs on a version-lowered copy; its result names the substitution
    (`RefResult.substitutions`, `RefResult.label`).
    """
    started: list[_Job | RefResult] = []
    for kind in ("tflm", "litert-ref"):
        try:
            started.append(_start(kind, model_path, inputs))
        except ReferenceMissing as exc:
            started.append(RefResult(kind, unavailable=exc.reason, install=exc.install))
    results = []
    for job in started:
        if isinstance(job, RefResult):
            results.append(job)
            continue
        try:
            outs, extra = _finish(job, timeout)
            results.append(RefResult(job.kind, outputs=outs, undefined=undefined_lines(extra.get("div_undefined", []))))
        except ReferenceUnavailable as exc:
            results.append(_substituted(job.kind, model_path, inputs, exc.reason, timeout)
                           or RefResult(job.kind, unavailable=exc.reason))
    _flag_div_unchecked(model_path, results)
    wrong = tflm_known_wrong(model_path)
    if wrong and results[0].ok:
        results[0].overruled = wrong  # still run and shown, as the cross-check
    u8 = legacy_uint8(model_path)
    if u8 and not results[0].missing:
        # TFLM refuses the model (or, for ops it still takes in uint8, is not what LiteRT runs):
        # say why in our words, its own message may be misleading
        results[0].overruled = u8
        if not results[0].ok:
            said = _one_line((results[0].unavailable or "").removeprefix("TFLM: "), 160)
            results[0].unavailable = f"{u8} (TFLM: {said})"
    if not results[0].missing:
        for r in results:
            if r.ok and not r.overruled:
                r.verdict = True
                break
    return results


def _flag_div_unchecked(model_path: str | os.PathLike[str], results: list[RefResult]) -> None:
    """int8 DIV inputs are checked in LiteRT-ref's run (`div_undefined`). Where it did not run,
    the check is missing: a zero divisor (LiteRT's DIV refuses it) or no LiteRT at all
    also make the references' result undefined for this model (docs/references.md)."""
    lite = results[-1]
    if lite.ok or not int8_divs(model_path):
        return
    if lite.missing:
        why = "LiteRT, which checks the int8 DIV inputs for TFLite's undefined domain, is not installed"
    elif "div.cc" in (lite.unavailable or ""):
        why = "a divisor equals its zero point (x / 0: LiteRT-ref refuses it; ours saturates to the sign of x)"
    else:
        why = "LiteRT-ref, which checks the int8 DIV inputs for TFLite's undefined domain, did not run"
    lite.undefined = [_one_line(f"reference undefined: int8 DIV: {why}; docs/kernels_binary.md")]


def _substituted(kind: str, model_path: str | os.PathLike[str], inputs: Sequence[np.ndarray], reason: str,
                 timeout: float) -> RefResult | None:
    """The reference run on a copy with op versions lowered, when it refused only an op version
    that a rule of op_versions.RULES covers for this model's types; else None."""
    from stm32ai.validate.op_versions import run_substituted

    got = run_substituted(kind, model_path, reason, lambda p: _finish(_start(kind, p, inputs), timeout)[0])
    if got is None:
        return None
    outputs, rules = got
    return RefResult(kind, outputs=outputs, substitutions=[r.label() for r in rules])


def missing_reference_error(model: str | os.PathLike[str], refs: Sequence[RefResult]) -> str | None:
    """One line naming the reference the verdict needs and the command that installs it, when the
    verdict is missing only because a reference is not installed; else None."""
    if any(r.verdict for r in refs):
        return None
    by_kind = {r.name: r for r in refs}
    tflm, lite = by_kind.get("tflm"), by_kind.get("litert-ref")
    name = Path(model).name
    if tflm is not None and tflm.missing:
        return (f"{name}: TFLite Micro (tflite-micro), the reference stm32ai checks against, is not installed: "
                f"{tflm.install}")
    if lite is not None and lite.missing:
        why = (tflm.unavailable or "refused").removeprefix("TFLM: ") if tflm is not None else "refused"
        cannot = "cannot run this model"
        if tflm is not None and tflm.overruled:
            why, cannot = tflm.overruled, "cannot be the verdict for this model"
        # shorten the reason, never the install command
        head = _one_line(f"{name}: TFLite Micro {cannot} ({_one_line(why, 160)})", 400)
        return f"{head} and LiteRT, the reference for such models, is not installed: {lite.install}"
    return None


if __name__ == "__main__":
    # Child entry point: KIND MODEL WORKDIR ARENA (see _start).
    _child_main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
