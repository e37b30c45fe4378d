"""A tiny .tflite writer for hand-built test models (the flatbuffer schema shipped with
tflite-micro), so the quantisation parameters and options are exactly the ones a test picks.
Builtin ops are opcodes given by number, custom ops by name."""

from __future__ import annotations

import flatbuffers
import numpy as np
import pytest

schema = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")


class TfliteBuilder:
    _TT = {"int8": schema.TensorType.INT8, "int16": schema.TensorType.INT16,
           "int32": schema.TensorType.INT32, "uint32": schema.TensorType.UINT32,
           "uint64": schema.TensorType.UINT64, "float32": schema.TensorType.FLOAT32,
           "uint8": schema.TensorType.UINT8, "int64": schema.TensorType.INT64,
           "bool": schema.TensorType.BOOL, "uint16": schema.TensorType.UINT16,
           "int4": schema.TensorType.INT4}  # int4: values in [-8, 7], packed two per byte

    def __init__(self) -> None:
        self.tensors: list = []
        self.buffers = [schema.BufferT()]
        self.ops: list = []
        self.opcodes: list[int | str] = []  # builtin operator number or custom op name
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def tensor(self, shape, dtype, scale=None, zp=None, data=None, axis=0) -> int:
        t = schema.TensorT()
        t.shape = [int(d) for d in shape]
        t.type = self._TT[dtype]
        t.name = f"t{len(self.tensors)}".encode()
        if scale is not None:
            q = schema.QuantizationParametersT()
            q.scale = [float(x) for x in np.atleast_1d(scale)]
            q.zeroPoint = [int(x) for x in np.atleast_1d(0 if zp is None else zp)]
            q.quantizedDimension = axis
            t.quantization = q
        t.buffer = 0
        if data is not None:
            b = schema.BufferT()
            if dtype == "int4":  # element 2i in the low nibble of byte i (TFLite's packing)
                v = np.asarray(data, np.int8).ravel()
                v = np.append(v, np.int8(0)) if v.size % 2 else v
                b.data = ((v[0::2] & 0x0F) | ((v[1::2] & 0x0F) << 4)).astype(np.uint8)
            else:
                b.data = np.frombuffer(np.ascontiguousarray(data, dtype=dtype).tobytes(), np.uint8)
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        self.tensors.append(t)
        return len(self.tensors) - 1

    def op(self, code: int | str, inputs, outputs, opt_type: int = 0, opts=None):
        """Append an operator (builtin number or custom name); returns it for custom options."""
        if code not in self.opcodes:
            self.opcodes.append(code)
        o = schema.OperatorT()
        o.opcodeIndex = self.opcodes.index(code)
        o.inputs, o.outputs = list(inputs), list(outputs)
        o.builtinOptionsType, o.builtinOptions = opt_type, opts
        self.ops.append(o)
        return o

    def build(self) -> bytes:
        m = schema.ModelT()
        m.version = 3
        m.buffers = self.buffers
        codes = []
        for c in self.opcodes:
            oc = schema.OperatorCodeT()
            if isinstance(c, str):
                oc.builtinCode = oc.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
                oc.customCode = c.encode()
            else:
                oc.builtinCode, oc.deprecatedBuiltinCode = c, min(c, 127)
            oc.version = 1
            codes.append(oc)
        m.operatorCodes = codes
        sg = schema.SubGraphT()
        sg.tensors, sg.operators, sg.inputs, sg.outputs = self.tensors, self.ops, self.inputs, self.outputs
        m.subgraphs = [sg]
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())
