"""TFLite flatbuffer -> graph IR.

Reads the model with the `tflite` package's generated accessors. Everything the later
stages need is copied out of the flatbuffer (shapes, quantisation, constants, decoded
operator options), so nothing downstream holds on to the file's bytes.

Any failure while walking the flatbuffer is turned into a one-line Stm32aiError: a
truncated or corrupt file makes the accessors raise arbitrary exceptions (struct.error,
IndexError, ValueError from numpy...), and the CLI must never show a traceback.
"""

from __future__ import annotations

import inspect
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

from stm32ai.errors import Stm32aiError, UnsupportedModelError
from stm32ai.frontend.control_flow import CONTROL_FLOW_OPS, inline_control_flow
from stm32ai.frontend.resource_vars import RESOURCE_OPS, resolve_resource_variables
from stm32ai.ir import Graph, Op, Quant, Tensor

__all__ = ["load_tflite"]

_FIX_EXPORT = "re-export or re-download the model"

# TensorType enum value -> numpy dtype name. Unsigned 16/32/64-bit types appear in
# TFLM's audio front-end models (Signal* custom ops); accepting them here lets the
# support check name the real blocker (the custom op) instead of the tensor type.
_TENSOR_TYPES: dict[int, str] = {
    tflite.TensorType.FLOAT32: "float32",
    tflite.TensorType.FLOAT16: "float16",
    tflite.TensorType.FLOAT64: "float64",
    tflite.TensorType.INT8: "int8",
    tflite.TensorType.UINT8: "uint8",
    tflite.TensorType.INT16: "int16",
    tflite.TensorType.UINT16: "uint16",
    tflite.TensorType.INT32: "int32",
    tflite.TensorType.UINT32: "uint32",
    tflite.TensorType.INT64: "int64",
    tflite.TensorType.UINT64: "uint64",
    tflite.TensorType.BOOL: "bool",
}


def unpack_int4(raw: bytes, count: int) -> np.ndarray:
    """TFLite's packed int4 (two's complement nibbles, element 2i in the low nibble of byte i,
    TFLM's UnpackDenseInt4IntoInt8) as `count` int8 values."""
    b = np.frombuffer(raw, np.uint8)
    lo = ((b & 0x0F).astype(np.int16) ^ 8) - 8
    hi = ((b >> 4).astype(np.int16) ^ 8) - 8
    return np.stack([lo, hi], axis=1).reshape(-1)[:count].astype(np.int8)


def _enum_names(cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


_TENSOR_TYPE_NAMES = _enum_names(tflite.TensorType)
_BUILTIN_OPTIONS_NAMES = _enum_names(tflite.BuiltinOptions)
_BUILTIN_OPTIONS2_NAMES = _enum_names(tflite.BuiltinOptions2)

# Option fields that hold schema enums, keyed by snake_case field name. The generated
# Python returns plain ints for them; strings make the options readable and stable.
_ENUM_FIELDS: dict[str, dict[int, str]] = {
    "padding": _enum_names(tflite.Padding),
    "fused_activation_function": _enum_names(tflite.ActivationFunctionType),
    "mode": _enum_names(tflite.MirrorPadMode),
    "type": _enum_names(tflite.LSHProjectionType),
    "combiner": _enum_names(tflite.CombinerType),
    "kernel_type": _enum_names(tflite.LSTMKernelType),
    "weights_format": _enum_names(tflite.FullyConnectedOptionsWeightsFormat),
    "algorithm": _enum_names(tflite.RngAlgorithm),
    "reduce_function": _enum_names(tflite.ReduceWindowFunction),
    "comparison_direction": _enum_names(tflite.StablehloComparisonDirection),
    "compare_type": _enum_names(tflite.StablehloComparisonType),
    "precision_config": _enum_names(tflite.StablehloPrecisionConfig),
    "composite_attributes_format": _enum_names(tflite.CustomOptionsFormat),
}
for _f in ("quantized_bias_type", "in_data_type", "out_data_type", "output_type", "idx_out_type",
           "out_type", "key_dtype", "value_dtype"):
    _ENUM_FIELDS[_f] = _TENSOR_TYPE_NAMES

_CONTROL_FLOW_OPS = {"WHILE", "IF", "CALL", "CALL_ONCE", "STABLEHLO_WHILE"}

# Without an options table TFLite runs an op with its value-initialised params struct
# (flatbuffer_conversions.cc): zero, not the schema's defaults. Where zero differs from the
# defaults the lowering assumes, say so explicitly; ops that cannot run with zeroed params
# (strides, filter sizes) are refused by the verifier (docs/verifier.md).
_MISSING_OPTIONS = {"SOFTMAX": {"beta": 0.0}, "LEAKY_RELU": {"alpha": 0.0}}
_HELPER_SUFFIXES = ("AsNumpy", "Length", "IsNone")


def _snake(name: str) -> str:
    """Accessor name -> schema field name: DilationWFactor -> dilation_w_factor."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s).lower()


def _plain(value: Any) -> Any:
    """Accessor result -> plain Python value (tables become dicts, bytes become str)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if hasattr(value, "_tab"):
        return _decode_table(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _field_getters(obj: Any) -> Iterator[tuple[str, Any, int]]:
    """(name, bound getter, its parameter count) of each field of a generated table object."""
    for attr in vars(type(obj)):
        if (attr.startswith("_") or attr == "Init" or attr.startswith("GetRootAs")
                or attr.endswith("BufferHasIdentifier") or attr.endswith(_HELPER_SUFFIXES)):
            continue
        getter = getattr(obj, attr)
        if callable(getter):
            yield attr, getter, len(inspect.signature(getter).parameters)


def _decode_table(obj: Any) -> dict[str, Any]:
    """Decode a generated flatbuffer table object by calling each of its field getters.

    Generic on purpose: new option tables in a newer `tflite` package decode without
    code changes here. Vector fields come back as lists.
    """
    out: dict[str, Any] = {}
    for attr, getter, n_params in _field_getters(obj):
        key = _snake(attr)
        if n_params == 0:
            value = _plain(getter())
        elif n_params == 1 and hasattr(obj, attr + "Length"):  # vector field, getter(j)
            as_numpy = getattr(obj, attr + "AsNumpy", None)
            if as_numpy is not None:
                arr = as_numpy()
                value = [] if isinstance(arr, int) else arr.tolist()  # 0 means "absent"
            else:
                value = [_plain(getter(j)) for j in range(getattr(obj, attr + "Length")())]
        else:
            continue
        names = _ENUM_FIELDS.get(key)
        if names is not None:
            if isinstance(value, list):
                value = [names.get(v, v) for v in value]
            elif isinstance(value, int):
                value = names.get(value, value)
        out[key] = value
    return out


def _decode_options(table: Any, type_code: int, names: dict[int, str], what: str) -> dict[str, Any]:
    if type_code == 0 or table is None:
        return {}
    cls_name = names.get(type_code)
    cls = getattr(tflite, cls_name, None) if cls_name else None
    if cls is None:
        raise _Corrupt(f"{what} has unknown options type {type_code}")
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    return _decode_table(obj)


class _Corrupt(Exception):
    """Internal: a consistency check on the flatbuffer failed."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class _StrictBytes(bytes):
    """File bytes whose slices fail past the end.

    The generated accessors read strings by slicing, which silently returns fewer bytes
    on a truncated file; scalar and numpy reads already raise on their own.
    """

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, slice) and key.stop is not None and key.stop > len(self):
            raise IndexError(f"read up to byte {key.stop} past the end of the file ({len(self)} bytes)")
        return super().__getitem__(key)


def _touch_table(obj: Any, depth: int = 0) -> None:
    """Read every field reachable from a table so damaged data fails here, loudly."""
    if depth > 8:
        raise _Corrupt("tables nest too deeply")
    for attr, getter, n_params in _field_getters(obj):
        if n_params == 0:
            values = [getter()]
        elif n_params == 1 and hasattr(obj, attr + "Length"):
            if hasattr(obj, attr + "AsNumpy"):
                getattr(obj, attr + "AsNumpy")()  # numpy checks the whole vector's extent
                continue
            values = [getter(j) for j in range(getattr(obj, attr + "Length")())]
        else:
            continue
        for v in values:
            if hasattr(v, "_tab"):
                _touch_table(v, depth + 1)


class _Reader:
    def __init__(self, buf: bytes, path: Path):
        self.buf = _StrictBytes(buf)
        self.path = path
        self.model = tflite.Model.GetRootAsModel(self.buf, 0)

    def _unsupported(self, msg: str) -> UnsupportedModelError:
        return UnsupportedModelError(_one_line(f"{self.path}: {msg}"))

    def read(self, name: str | None) -> Graph:
        m = self.model
        root = struct.unpack_from("<I", self.buf, 0)[0]
        if root >= len(self.buf):
            raise _Corrupt("root table offset points past the end of the file")
        self._check_buffers()
        _touch_table(m)
        n_sub = m.SubgraphsLength()
        if n_sub == 0:
            raise _Corrupt("the model has no subgraph")
        opnames = self._opcode_names()
        if n_sub > 1 and self._control_flow(n_sub, opnames) - {"CALL_ONCE"} - CONTROL_FLOW_OPS:
            self._reject_subgraphs(n_sub, opnames)
        desc = m.Description()
        g = self._subgraph(0, opnames, name or self.path.stem)
        g.description = desc.decode("utf-8", errors="replace") if desc else ""
        subs: dict[int, Graph] = {}
        if any(op.type in CONTROL_FLOW_OPS or op.type in RESOURCE_OPS for op in g.ops):
            # the called subgraphs become ops and state tensors of subgraph 0 (IF/WHILE:
            # frontend/control_flow.py, CALL_ONCE: frontend/resource_vars.py); subgraphs
            # nothing calls are ignored, as TFLM does
            subs = {s: self._subgraph(s, opnames, f"subgraph{s}") for s in range(1, n_sub)}
        try:
            if any(op.type in CONTROL_FLOW_OPS for op in g.ops):
                inline_control_flow(g, subs)
            if any(op.type in RESOURCE_OPS for op in g.ops):
                resolve_resource_variables(g, subs)
        except UnsupportedModelError as e:
            raise self._unsupported(str(e)) from None
        return g

    def _subgraph(self, s: int, opnames: list[str], name: str) -> Graph:
        sg = self.model.Subgraphs(s)
        n_tensors = sg.TensorsLength()
        inputs = self._index_list(sg.InputsAsNumpy(), n_tensors, "subgraph inputs", allow_omitted=False)
        outputs = self._index_list(sg.OutputsAsNumpy(), n_tensors, "subgraph outputs", allow_omitted=False)
        input_set = set(inputs)
        tensors = [self._tensor(sg.Tensors(i), i, i in input_set) for i in range(n_tensors)]
        ops = [self._op(sg.Operators(i), i, opnames, n_tensors) for i in range(sg.OperatorsLength())]
        return Graph(name=name, tensors=tensors, ops=ops, inputs=inputs, outputs=outputs)

    def _control_flow(self, n_sub: int, opnames: list[str]) -> set[str]:
        found = set()
        for s in range(n_sub):
            sg = self.model.Subgraphs(s)
            for i in range(sg.OperatorsLength()):
                idx = sg.Operators(i).OpcodeIndex()
                if idx < len(opnames) and opnames[idx] in _CONTROL_FLOW_OPS:
                    found.add(opnames[idx])
        return found

    def _check_buffers(self) -> None:
        """Every buffer (weights and metadata alike) must lie inside the file.

        Weight data usually sits at the end of the file, so this is what catches a
        truncated download even when the damaged bytes belong to an unused buffer.
        """
        size = len(self.buf)
        for i in range(self.model.BuffersLength()):
            b = self.model.Buffers(i)
            offset, length = b.Offset(), b.Size()
            if offset > 1:
                end = offset + length
            else:
                field = b._tab.Offset(4)  # Buffer.data; accessor gives no start position
                if not field:
                    continue
                start = b._tab.Vector(field)
                end = start + b._tab.VectorLen(field)
                if start < 4 or start > size:
                    raise _Corrupt(f"buffer {i} starts outside the file")
            if end > size:
                raise _Corrupt(f"buffer {i} ends at byte {end}, past the end of the file ({size} bytes)")

    # -- operator codes and subgraphs ---------------------------------------------------

    def _opcode_names(self) -> list[str]:
        names = []
        for i in range(self.model.OperatorCodesLength()):
            oc = self.model.OperatorCodes(i)
            # Codes < 127 live in the deprecated int8 field in older files; newer files
            # fill both (or only builtin_code), so the larger one is the real code.
            code = max(oc.DeprecatedBuiltinCode(), oc.BuiltinCode())
            if code == tflite.BuiltinOperator.CUSTOM:
                custom = oc.CustomCode()
                names.append("CUSTOM:" + (custom.decode("utf-8", errors="replace") if custom else ""))
            elif code in BUILTIN_OPCODE2NAME:
                names.append(BUILTIN_OPCODE2NAME[code])
            else:
                raise self._unsupported(
                    f"unknown builtin operator code {code} (the model is newer than the tflite "
                    f"schema {tflite.__version__} this tool reads) — upgrade the 'tflite' package")
        return names

    def _reject_subgraphs(self, n_sub: int, opnames: list[str]) -> None:
        found = []
        for s in range(n_sub):
            sg = self.model.Subgraphs(s)
            for i in range(sg.OperatorsLength()):
                idx = sg.Operators(i).OpcodeIndex()
                if idx < len(opnames) and opnames[idx] in _CONTROL_FLOW_OPS:
                    found.append(f"{opnames[idx]} (subgraph {s}, op #{i})")
        why = f" (control flow: {', '.join(found[:5])})" if found else ""
        raise self._unsupported(
            f"model has {n_sub} subgraphs{why}; of the control-flow ops only IF, WHILE and CALL_ONCE "
            "are supported — re-export without CALL / STABLEHLO_WHILE")

    # -- tensors --------------------------------------------------------------------------

    def _index_list(self, arr: Any, n: int, what: str, allow_omitted: bool = True) -> list[int]:
        if isinstance(arr, int):  # accessor returns 0 for an absent vector
            return []
        out = [int(x) for x in arr]
        lo = -1 if allow_omitted else 0
        for x in out:
            if not lo <= x < n:
                raise _Corrupt(f"{what} refer to tensor {x}, but the subgraph has {n} tensors")
        return out

    def _tensor(self, t: Any, tid: int, is_input: bool) -> Tensor:
        name = (t.Name() or b"").decode("utf-8", errors="replace") or f"tensor_{tid}"
        ttype = t.Type()
        int4 = ttype == tflite.TensorType.INT4
        if ttype == tflite.TensorType.RESOURCE:
            # a VAR_HANDLE's output: TFLM stores the resource id as an int32 scalar
            # (frontend/resource_vars.py replaces every use by the variable's state tensor)
            return Tensor(tid, name, (), "int32")
        dtype = "int8" if int4 else _TENSOR_TYPES.get(ttype)
        if dtype is None:
            tname = _TENSOR_TYPE_NAMES.get(ttype, str(ttype))
            raise self._unsupported(
                f"tensor '{name}' has type {tname}, which is not supported "
                "(supported: float32/16, int8/16/32/64, uint8/16/32/64, bool, int4 weights) — convert the model "
                "with supported types")
        shape = [int(x) for x in t.ShapeAsNumpy()] if t.ShapeLength() else []
        sig = [int(x) for x in t.ShapeSignatureAsNumpy()] if t.ShapeSignatureLength() else list(shape)
        if len(sig) != len(shape):
            raise _Corrupt(f"tensor '{name}' has shape {shape} but shape_signature {sig}")

        buf_idx = t.Buffer()
        if not 0 <= buf_idx < max(self.model.BuffersLength(), 1):
            raise _Corrupt(f"tensor '{name}' uses buffer {buf_idx}, but the model has "
                           f"{self.model.BuffersLength()} buffers")
        raw = self._buffer_bytes(buf_idx, name) if buf_idx > 0 else None
        is_const = raw is not None and len(raw) > 0

        for i, (d, s) in enumerate(zip(shape, sig, strict=True)):
            if d >= 0 and s >= 0:
                continue
            if i == 0:  # dynamic batch: we compile for batch 1
                shape[0] = 1
            elif is_input or is_const:
                raise self._unsupported(
                    f"{'input' if is_input else 'constant'} tensor '{name}' has a dynamic dimension "
                    f"{i} (shape signature {sig}); only the batch dimension may be dynamic — "
                    "re-export the model with a fixed input shape")
            elif d < 0:
                shape[i] = -1  # left for fold_constants to resolve (or canonicalize to reject)
            # else: shape already holds the converter's static value for this dimension.

        quant = self._quant(t.Quantization(), shape)
        data = None
        if int4:
            # TFLM's packed int4 weights (conv/depthwise/FC filters): it unpacks them to int8 at
            # run time, so do we, at load time (docs/op_types.md)
            if not is_const or t.Sparsity() is not None:
                raise self._unsupported(
                    f"tensor '{name}' is INT4 but not a dense constant; int4 is supported for "
                    "constant weights only — convert the model with int8 activations")
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            assert raw is not None
            if len(raw) != (count + 1) // 2:
                raise _Corrupt(f"tensor '{name}' int4{shape} needs {(count + 1) // 2} bytes but its "
                               f"buffer holds {len(raw)}")
            data = unpack_int4(raw, count).reshape(shape)
            return Tensor(tid, name, tuple(shape), dtype, quant, data, variable=bool(t.IsVariable()))
        if is_const:
            if t.Sparsity() is not None:
                raise self._unsupported(
                    f"constant tensor '{name}' is stored sparse (DENSIFY); sparse weights are not "
                    "supported — re-export without sparsity optimisation")
            np_dtype = np.dtype(dtype).newbyteorder("<")
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if len(raw) != count * np_dtype.itemsize:
                raise _Corrupt(f"tensor '{name}' {dtype}{shape} needs {count * np_dtype.itemsize} "
                               f"bytes but its buffer holds {len(raw)}")
            data = np.frombuffer(raw, dtype=np_dtype).astype(dtype).reshape(shape).copy()
        return Tensor(tid, name, tuple(shape), dtype, quant, data, variable=bool(t.IsVariable()))

    def _buffer_bytes(self, idx: int, name: str) -> bytes:
        b = self.model.Buffers(idx)
        offset, size = b.Offset(), b.Size()
        if offset > 1:  # >2 GB models keep data after the flatbuffer, addressed from file start
            if offset + size > len(self.buf):
                raise _Corrupt(f"buffer {idx} of tensor '{name}' ends at byte {offset + size}, "
                               f"past the end of the file ({len(self.buf)} bytes)")
            return self.buf[offset:offset + size]
        if b.DataLength() == 0:
            return b""
        arr = b.DataAsNumpy()  # numpy raises if the vector runs past the end of the file
        return arr.tobytes()

    @staticmethod
    def _quant(q: Any, shape: list[int]) -> Quant | None:
        if q is None or q.ScaleLength() == 0:
            return None
        scale = np.asarray(q.ScaleAsNumpy(), dtype=np.float32).copy()
        if q.ZeroPointLength():
            zp = np.asarray(q.ZeroPointAsNumpy(), dtype=np.int64).copy()
        else:
            zp = np.zeros(scale.shape, np.int64)
        axis = int(q.QuantizedDimension())
        # The old TOCO converter wrote quantized_dimension=3 on rank-1 per-channel biases
        # (person_detect). TFLM ignores it; the only sensible axis for a rank-1 tensor is 0.
        if len(shape) == 1 and scale.size > 1 and scale.size == shape[0] and axis != 0:
            axis = 0
        return Quant(scale, zp, axis)

    # -- operators ------------------------------------------------------------------------

    def _op(self, o: Any, index: int, opnames: list[str], n_tensors: int) -> Op:
        code_idx = o.OpcodeIndex()
        if not 0 <= code_idx < len(opnames):
            raise _Corrupt(f"operator #{index} uses opcode {code_idx}, but the model has "
                           f"{len(opnames)} operator codes")
        op_type = opnames[code_idx]
        where = f"operator #{index} ({op_type})"
        inputs = self._index_list(o.InputsAsNumpy(), n_tensors, f"{where} inputs")
        outputs = self._index_list(o.OutputsAsNumpy(), n_tensors, f"{where} outputs")
        options = _decode_options(o.BuiltinOptions(), o.BuiltinOptionsType(), _BUILTIN_OPTIONS_NAMES,
                                  where)
        options.update(_decode_options(o.BuiltinOptions2(), o.BuiltinOptions2Type(),
                                       _BUILTIN_OPTIONS2_NAMES, where))
        if o.BuiltinOptionsType() == 0 and op_type in _MISSING_OPTIONS:
            options.update(_MISSING_OPTIONS[op_type])
        if o.IntermediatesLength():
            # Quantisation carriers for int8 LSTM gate outputs; not data-flow inputs.
            options["intermediates"] = self._index_list(o.IntermediatesAsNumpy(), n_tensors,
                                                        f"{where} intermediates")
        if op_type.startswith("CUSTOM:"):
            options.update(self._custom_options(o, where))
        return Op(type=op_type, inputs=inputs, outputs=outputs, options=options, index=index)

    def _custom_options(self, o: Any, where: str) -> dict[str, Any]:
        off, size = o.LargeCustomOptionsOffset(), o.LargeCustomOptionsSize()
        if off > 1:
            if off + size > len(self.buf):
                raise _Corrupt(f"{where} custom options run past the end of the file")
            raw = self.buf[off:off + size]
        elif o.CustomOptionsLength():
            raw = o.CustomOptionsAsNumpy().tobytes()
        else:
            return {}
        out: dict[str, Any] = {"custom_options": raw}
        if o.CustomOptionsFormat() == tflite.CustomOptionsFormat.FLEXBUFFERS:
            try:
                from flatbuffers import flexbuffers
                out["custom"] = flexbuffers.Loads(raw)
            except Exception:  # opaque custom payloads are allowed; keep the raw bytes only
                pass
        return out


def load_tflite(path: str | Path, name: str | None = None) -> Graph:
    """Read a .tflite file into a Graph (single subgraph, batch fixed to 1).

    Raises Stm32aiError (bad/corrupt file) or UnsupportedModelError (valid model we
    cannot compile: several subgraphs, dynamic shapes, unsupported tensor types), each
    with a one-line message naming the file.
    """
    p = Path(path)
    if not p.exists():
        raise Stm32aiError(f"{p}: file not found — check the path to the .tflite model")
    if p.is_dir():
        raise Stm32aiError(f"{p}: is a directory, not a .tflite file — pass the model file itself")
    try:
        buf = p.read_bytes()
    except OSError as e:
        raise Stm32aiError(_one_line(f"{p}: cannot read the file ({e.strerror or e}) — check its "
                                     "permissions")) from None
    if not buf:
        raise Stm32aiError(f"{p}: empty file (0 bytes) — {_FIX_EXPORT}")
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise Stm32aiError(f"{p}: not a TensorFlow Lite model (no 'TFL3' flatbuffer identifier) — "
                           "pass a .tflite file written by the TFLite converter")
    try:
        return _Reader(buf, p).read(name)
    except Stm32aiError:
        raise
    except _Corrupt as e:
        raise Stm32aiError(_one_line(f"{p}: corrupt TFLite flatbuffer: {e} — {_FIX_EXPORT}")) from None
    except Exception as e:  # accessors on damaged data fail in many ways; report them alike
        detail = _one_line(str(e) or type(e).__name__)[:160]
        raise Stm32aiError(_one_line(f"{p}: truncated or corrupt TFLite flatbuffer ({detail}) — "
                                     f"{_FIX_EXPORT}")) from None
