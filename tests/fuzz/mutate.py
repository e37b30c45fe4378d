"""Structure-aware mutations of .tflite flatbuffers, for the generate fuzzer.

Raw mutations (byte flips, truncation, zero-filled regions) exercise the frontend's
robustness; schema-level mutations patch one field of the flatbuffer in place (a shape
element, a tensor type, an operator index, a quantisation parameter, an option...) so
the file stays a well-formed flatbuffer and the mutant reaches the verifier, the passes,
the emitter and the C kernels. In-place patching needs no flatbuffer builder: a field
can only be changed where the file stores it, and vectors can only get shorter.

Field slots are the vtable offsets of schema.fbs (slot = 4 + 2 * field index).
Independent of stm32ai: only the `tflite` accessors and the standard library.
"""

from __future__ import annotations

import inspect
import random
import re
import struct
from collections.abc import Callable

import tflite

__all__ = ["KINDS", "mutate"]

# vtable slots (schema.fbs field order)
M_OPCODES, M_SUBGRAPHS, M_DESCRIPTION, M_BUFFERS = 6, 8, 10, 12
SG_TENSORS, SG_INPUTS, SG_OUTPUTS, SG_OPERATORS = 4, 6, 8, 10
T_SHAPE, T_TYPE, T_BUFFER, T_NAME, T_QUANT, T_VARIABLE, T_SIGNATURE = 4, 6, 8, 10, 12, 14, 18
Q_SCALE, Q_ZERO_POINT, Q_DIM = 8, 10, 16
OP_OPCODE, OP_INPUTS, OP_OUTPUTS, OP_OPTIONS_TYPE, OP_OPTIONS = 4, 6, 8, 10, 12
OC_DEPRECATED, OC_CUSTOM, OC_BUILTIN = 4, 6, 10
B_DATA = 4

INTERESTING_INTS = [0, 1, 2, 3, -1, -2, 7, 16, 255, 256, 65535, 65536, (1 << 31) - 1, -(1 << 31),
                    (1 << 30), (1 << 24) + 1, 1000003]
INTERESTING_FLOATS = [float("nan"), float("inf"), float("-inf"), 0.0, -1.0, 1e-45, 1e-38, 3e38,
                      1e-30, 1e30, 1e10, 1e-10, 0.5, 2.0, 65536.0]
NAME_PAYLOADS = [b"\n", b"\r", b"*/", b"??/", b"\"", b"\\", b"\x00", b"\xe2\x80\xae", b"%s", b"\t"]


class _Buf:
    """A mutable copy of the file plus accessors over it."""

    def __init__(self, data: bytes):
        self.b = bytearray(data)
        self.model = tflite.Model.GetRootAsModel(bytes(self.b), 0)

    def put(self, fmt: str, pos: int, value: object) -> None:
        struct.pack_into(fmt, self.b, pos, value)


def _field(obj: object, slot: int) -> int | None:
    tab = obj._tab  # type: ignore[attr-defined]
    o = tab.Offset(slot)
    return tab.Pos + o if o else None


def _vector(obj: object, slot: int) -> tuple[int, int] | None:
    """(absolute start of the elements, length) of a vector field."""
    tab = obj._tab  # type: ignore[attr-defined]
    o = tab.Offset(slot)
    if not o:
        return None
    return tab.Vector(o), tab.VectorLen(o)


def _subgraph(fb: _Buf):
    return fb.model.Subgraphs(0) if fb.model.SubgraphsLength() else None


def _pick_tensor(fb: _Buf, rng: random.Random):
    sg = _subgraph(fb)
    if sg is None or sg.TensorsLength() == 0:
        return None
    return sg.Tensors(rng.randrange(sg.TensorsLength()))


def _pick_tensor_field(fb: _Buf, rng: random.Random, slot: int) -> int | None:
    """Where a random tensor's scalar field `slot` is stored (None: no tensor or field absent)."""
    t = _pick_tensor(fb, rng)
    return _field(t, slot) if t is not None else None


def _pick_op(fb: _Buf, rng: random.Random):
    sg = _subgraph(fb)
    if sg is None or sg.OperatorsLength() == 0:
        return None
    return sg.Operators(rng.randrange(sg.OperatorsLength()))


def _n_tensors(fb: _Buf) -> int:
    sg = _subgraph(fb)
    return sg.TensorsLength() if sg is not None else 0


def _some_int(rng: random.Random, current: int, n: int | None = None) -> int:
    choices = [current + 1, current - 1, current * 2, -current, rng.choice(INTERESTING_INTS)]
    if n is not None:
        choices += [rng.randrange(-1, n + 2), n, n - 1]
    return rng.choice(choices)


def _patch_int_vector(fb: _Buf, vec: tuple[int, int] | None, rng: random.Random,
                      n: int | None = None, fmt: str = "<i") -> bool:
    if vec is None or vec[1] == 0:
        return False
    start, length = vec
    size = struct.calcsize(fmt)
    if rng.random() < 0.25 and length > 0:  # shorten the vector
        fb.put("<I", start - 4, rng.randrange(length))
        return True
    pos = start + size * rng.randrange(length)
    cur = struct.unpack_from(fmt, fb.b, pos)[0]
    val = _some_int(rng, cur, n)
    lo, hi = (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1)
    fb.put(fmt, pos, max(lo, min(hi, val)))
    return True


# ---- schema-level mutations --------------------------------------------------------------

def m_shape(fb: _Buf, rng: random.Random) -> bool:
    t = _pick_tensor(fb, rng)
    if t is None:
        return False
    vec = _vector(t, T_SHAPE)
    ok = _patch_int_vector(fb, vec, rng)
    sig = _vector(t, T_SIGNATURE)
    if ok and sig is not None and vec is not None and sig[1] == vec[1] and rng.random() < 0.7:
        fb.b[sig[0]:sig[0] + 4 * sig[1]] = fb.b[vec[0]:vec[0] + 4 * vec[1]]  # keep them consistent
    return ok


def m_dtype(fb: _Buf, rng: random.Random) -> bool:
    pos = _pick_tensor_field(fb, rng, T_TYPE)
    if pos is None:
        return False
    fb.put("<b", pos, rng.choice([0, 1, 2, 3, 4, 6, 7, 9, 10, 16, 17, rng.randrange(-2, 30)]))
    return True


def m_op_index(fb: _Buf, rng: random.Random) -> bool:
    op = _pick_op(fb, rng)
    if op is None:
        return False
    slot = rng.choice([OP_INPUTS, OP_OUTPUTS])
    return _patch_int_vector(fb, _vector(op, slot), rng, _n_tensors(fb))


def m_opcode(fb: _Buf, rng: random.Random) -> bool:
    if rng.random() < 0.5:
        op = _pick_op(fb, rng)
        pos = _field(op, OP_OPCODE) if op is not None else None
        if pos is None:
            return False
        n = fb.model.OperatorCodesLength()
        fb.put("<I", pos, rng.choice([rng.randrange(n + 2), n, 0xFFFFFFFF]) if n else 1)
        return True
    n = fb.model.OperatorCodesLength()
    if n == 0:
        return False
    oc = fb.model.OperatorCodes(rng.randrange(n))
    code = rng.choice([rng.randrange(0, 210), 32, 3, 4, 9, 25, 22, 0, 17, 1, 255])
    ok = False
    pos = _field(oc, OC_BUILTIN)
    if pos is not None:
        fb.put("<i", pos, code)
        ok = True
    pos = _field(oc, OC_DEPRECATED)
    if pos is not None:
        fb.put("<b", pos, min(code, 127))
        ok = True
    return ok


def _pick_quant(fb: _Buf, rng: random.Random):
    sg = _subgraph(fb)
    if sg is None:
        return None, None
    cands = [i for i in range(sg.TensorsLength()) if sg.Tensors(i).Quantization() is not None
             and sg.Tensors(i).Quantization().ScaleLength()]
    if not cands:
        return None, None
    t = sg.Tensors(rng.choice(cands))
    return t, t.Quantization()


def m_quant(fb: _Buf, rng: random.Random) -> bool:
    t, q = _pick_quant(fb, rng)
    if q is None:
        return False
    what = rng.choice(["scale", "scale", "zp", "zp", "dim", "shorten"])
    if what == "scale":
        start, n = _vector(q, Q_SCALE)
        pos = start + 4 * rng.randrange(n)
        cur = struct.unpack_from("<f", fb.b, pos)[0]
        fb.put("<f", pos, rng.choice(INTERESTING_FLOATS + [cur * 2 ** rng.randrange(-40, 40)]))
        return True
    if what == "zp":
        vec = _vector(q, Q_ZERO_POINT)
        if vec is None or vec[1] == 0:
            return False
        pos = vec[0] + 8 * rng.randrange(vec[1])
        fb.put("<q", pos, rng.choice([-129, 128, 255, 256, -1, 127, -128, (1 << 31) - 1, -(1 << 31),
                                      (1 << 40), rng.randrange(-300, 300)]))
        return True
    if what == "dim":
        pos = _field(q, Q_DIM)
        if pos is None:
            return False
        fb.put("<i", pos, rng.choice([-1, 0, 1, 2, 3, 4, 5, 100, (1 << 31) - 1]))
        return True
    slot = rng.choice([Q_SCALE, Q_ZERO_POINT])
    vec = _vector(q, slot)
    if vec is None or vec[1] == 0:
        return False
    fb.put("<I", vec[0] - 4, rng.randrange(vec[1]))
    return True


def m_buffer(fb: _Buf, rng: random.Random) -> bool:
    what = rng.choice(["index", "data", "data", "shorten"])
    if what == "index":
        pos = _pick_tensor_field(fb, rng, T_BUFFER)
        if pos is None:
            return False
        n = fb.model.BuffersLength()
        fb.put("<I", pos, rng.choice([0, rng.randrange(max(n, 1) + 1), n, 0xFFFFFFFF]))
        return True
    n = fb.model.BuffersLength()
    cands = [i for i in range(n) if fb.model.Buffers(i).DataLength() > 0]
    if not cands:
        return False
    start, length = _vector(fb.model.Buffers(rng.choice(cands)), B_DATA)
    if what == "shorten":
        fb.put("<I", start - 4, rng.randrange(length))
        return True
    for _ in range(rng.randrange(1, 9)):  # extreme weight/bias bytes
        pos = start + rng.randrange(length)
        fb.b[pos] = rng.choice([0x7F, 0x80, 0xFF, 0x00, rng.randrange(256)])
    if length >= 4 and rng.random() < 0.5:
        pos = start + 4 * rng.randrange(length // 4)
        fb.put("<i", pos, rng.choice([(1 << 31) - 1, -(1 << 31), (1 << 30), -(1 << 30)]))
    return True


_FLAGS = {"Int8": "<b", "Uint8": "<B", "Bool": "<B", "Int16": "<h", "Uint16": "<H", "Int32": "<i",
          "Uint32": "<I", "Int64": "<q", "Float32": "<f"}
_SCALAR_RE = re.compile(r"self\._tab\.Offset\((\d+)\).*?Get\(flatbuffers\.number_types\.(\w+)Flags",
                        re.S)
_OPTION_FIELDS: dict[type, list[tuple[int, str]]] = {}


def _option_fields(cls: type) -> list[tuple[int, str]]:
    """(slot, struct format) of every scalar field of a generated options table class."""
    if cls not in _OPTION_FIELDS:
        out = []
        for name, fn in vars(cls).items():
            if name.startswith("_") or not callable(fn) or name == "Init":
                continue
            try:
                src = inspect.getsource(fn)
            except (OSError, TypeError):
                continue
            m = _SCALAR_RE.search(src)
            if m and "Vector(" not in src and m.group(2) in _FLAGS:
                out.append((int(m.group(1)), _FLAGS[m.group(2)]))
        _OPTION_FIELDS[cls] = out
    return _OPTION_FIELDS[cls]


_OPTIONS_NAMES = {v: k for k, v in vars(tflite.BuiltinOptions).items() if isinstance(v, int)}


def m_options(fb: _Buf, rng: random.Random) -> bool:
    op = _pick_op(fb, rng)
    if op is None:
        return False
    type_pos = _field(op, OP_OPTIONS_TYPE)
    if rng.random() < 0.2:  # drop the table or claim another table type
        if type_pos is None:
            return False
        fb.put("<B", type_pos, rng.choice([0, 0, rng.randrange(1, 127)]))
        return True
    table = op.BuiltinOptions()
    cls = getattr(tflite, _OPTIONS_NAMES.get(op.BuiltinOptionsType(), ""), None)
    if table is None or cls is None:
        return False
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    fields = [(s, f) for s, f in _option_fields(cls) if _field(obj, s) is not None]
    if not fields:
        return False
    slot, fmt = rng.choice(fields)
    pos = _field(obj, slot)
    if fmt == "<f":
        fb.put(fmt, pos, rng.choice(INTERESTING_FLOATS))
    else:
        size = struct.calcsize(fmt)
        lo, hi = (0, (1 << (8 * size)) - 1) if fmt[1].isupper() else \
            (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1)
        cur = struct.unpack_from(fmt, fb.b, pos)[0]
        fb.put(fmt, pos, max(lo, min(hi, _some_int(rng, cur))))
    return True


def m_io(fb: _Buf, rng: random.Random) -> bool:
    sg = _subgraph(fb)
    if sg is None:
        return False
    slot = rng.choice([SG_INPUTS, SG_OUTPUTS])
    vec = _vector(sg, slot)
    if vec is None or vec[1] == 0:
        return False
    if rng.random() < 0.3:
        fb.put("<I", vec[0] - 4, 0)  # no inputs / no outputs
        return True
    return _patch_int_vector(fb, vec, rng, _n_tensors(fb))


def m_name(fb: _Buf, rng: random.Random) -> bool:
    t = _pick_tensor(fb, rng)
    vec = _vector(t, T_NAME) if t is not None else None
    if vec is None or vec[1] == 0:
        return False
    start, n = vec
    payload = rng.choice(NAME_PAYLOADS)[:n]
    at = start + rng.randrange(n - len(payload) + 1)
    fb.b[at:at + len(payload)] = payload
    return True


def m_variable(fb: _Buf, rng: random.Random) -> bool:
    pos = _pick_tensor_field(fb, rng, T_VARIABLE)
    if pos is None:
        return False
    fb.put("<B", pos, 1 - fb.b[pos] if fb.b[pos] in (0, 1) else 1)
    return True


# ---- raw mutations -----------------------------------------------------------------------

def r_byteflip(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randrange(1, 9)):
        pos = rng.randrange(len(b))
        b[pos] ^= 1 << rng.randrange(8) if rng.random() < 0.7 else rng.randrange(1, 256)
    return bytes(b)


def r_truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randrange(len(data))]


def r_zerofill(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    n = rng.choice([1, 2, 4, 8, 16, 64, 256])
    pos = rng.randrange(len(b))
    b[pos:pos + n] = bytes(min(n, len(b) - pos))
    return bytes(b)


SCHEMA: dict[str, Callable[[_Buf, random.Random], bool]] = {
    "shape": m_shape, "dtype": m_dtype, "op_index": m_op_index, "opcode": m_opcode,
    "quant": m_quant, "buffer": m_buffer, "options": m_options, "io": m_io, "name": m_name,
    "variable": m_variable,
}
RAW: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "byteflip": r_byteflip, "truncate": r_truncate, "zerofill": r_zerofill,
}
KINDS = list(RAW) + list(SCHEMA)


def mutate(data: bytes, kind: str, rng: random.Random) -> bytes | None:
    """One mutant of `data`, or None if this kind found nothing to change in this model."""
    if kind in RAW:
        for _ in range(8):
            out = RAW[kind](data, rng)
            if out != data:
                return out
        return None
    for _ in range(8):  # a few tries: the picked tensor/op may lack the field or keep its value
        fb = _Buf(data)
        if SCHEMA[kind](fb, rng) and bytes(fb.b) != data:
            return bytes(fb.b)
    return None
