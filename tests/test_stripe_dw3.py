"""Pre-doubled packed constants of the 2-channel planar 3x3 depthwise stripe members
(passes/stripe_dw3.py, `rqd` 4 / 5): the row-window entry on the record the stripe pass emits,
band by band, equals TFLite's reference convolution (host: the halved record and the rows of
`rqd` 0; Cortex-M4 under QEMU: the pre-doubled rows DW3_ROWS_DQP_FN in the one-band stripe
loop, the halved record in the other paths); VWW's ram firmware for a Cortex-M4 board gets them
on its five planar members and matches TFLite Micro on the host."""

from __future__ import annotations

import copy
import shutil
import subprocess

import numpy as np
import pytest
from conftest import shared_model
from test_lower_conv import make_layer, reference
from test_row_windows import (
    _CC,
    RUNTIME,
    TARGETS,
    _c_array,
    _flags,
    _runtime_objects,
    _target_objects,
    schedules,
    window,
)

from stm32ai.emitter import c_value
from stm32ai.passes.stripe_dw3 import G2_KERNELS, predouble_dw3x3, predouble_stripe_dw3, undouble_dw3x3
from stm32ai.pipeline import compile_graph

rng = np.random.default_rng(39)

# (name, input shape, stride, padding): VWW's row shapes (12 and 8 px wide rows, stride 1 and 2),
# odd widths (the pair and single outputs after the quads), VALID
DW3_LAYERS = [
    ("s1_w12_c8", (1, 7, 12, 8), 1, "SAME"),
    ("s2_w24_c6", (1, 9, 24, 6), 2, "SAME"),
    ("s1_w7_c4", (1, 6, 7, 4), 1, "SAME"),
    ("s2_w9_c2", (1, 8, 9, 2), 2, "VALID"),
    ("s1_w8_c10", (1, 5, 8, 10), 1, "VALID"),
]


def _layer(xs, stride, padding, rqd_want):
    """A depthwise layer the lowering gives `rqd` rqd_want (2 or 3), its op and input."""
    c = xs[3]
    for _ in range(200):
        zp = -128 if rqd_want == 3 else int(rng.integers(-20, 20))
        g = make_layer("DEPTHWISE_CONV_2D", xs, rng.integers(-127, 128, (1, 3, 3, c)).astype(np.int8),
                       rng.integers(-300, 300, c), padding=padding, stride=(stride, stride),
                       act="RELU" if rqd_want == 3 else "NONE",
                       w_scales=rng.uniform(0.002, 0.02, c), in_q=(0.05, int(rng.integers(-20, 20))),
                       out_q=(0.08, zp))
        cg = compile_graph(copy.deepcopy(g), optimization="ram")
        op = cg.graph.ops[0]
        if op.kernel.startswith("depthwise_conv2d_3x3_") and op.attrs.get("rqd") == rqd_want:
            return g, cg, op, rng.integers(-128, 128, xs).astype(np.int8)
    pytest.skip(f"no layer with rqd {rqd_want} drawn")


def _harness(op, attrs, packed, x, scheds, text):
    """C: every schedule band by band through the g2 row-window entry (as the stripe executor
    calls it: const params, the window); raw outputs (host) or FNV-1a per schedule (target)."""
    a = attrs
    kernel = op.kernel.replace("3x3_", "3x3_g2_") if "_g2_" not in op.kernel else op.kernel
    h, s, p = a["in_h"], a["stride"][0], a["pad"][0]
    in_row, out_row, ybytes = a["in_w"] * a["in_c"], a["out_w"] * a["out_c"], a["out_h"] * a["out_w"] * a["out_c"]
    init = ", ".join(f".{k} = {c_value(v)}" for k, v in a.items())
    sch = [v for sc in scheds for band in sc for v in band]
    first = [0]
    for sc in scheds:
        first.append(first[-1] + len(sc))
    lines = ["#include <stdint.h>", "#include <stdio.h>", "#include <string.h>", '#include "ai_kernels_conv.h"',
             f"static const ai_{kernel}_params P = {{ {init} }};",
             _c_array("K", packed), _c_array("X", x),
             f"static const int32_t bands[{len(sch)}] = {{ {', '.join(map(str, sch))} }};",
             f"static const int32_t first[{len(first)}] = {{ {', '.join(map(str, first))} }};",
             f"static int8_t win[{h * in_row}], band[{ybytes}], dst[{ybytes}];",
             "static int8_t scratch[1 << 14] __attribute__((aligned(8)));",
             "int main(void) {",
             f"  for (int sc = 0; sc < {len(scheds)}; ++sc) {{",
             f"    memset(band, 0x5a, {ybytes});",
             "    for (int b = first[sc]; b < first[sc + 1]; ++b) {",
             "      const int32_t o0 = bands[2 * b], o1 = bands[2 * b + 1];",
             f"      const int32_t r0 = o0 * {s} - {p} > 0 ? o0 * {s} - {p} : 0;",
             f"      int32_t end = (o1 - 1) * {s} - {p} + 3;",
             f"      if (end > {h}) end = {h};",
             f"      memcpy(win, X + r0 * {in_row}, (size_t)(end - r0) * {in_row});",
             f"      const ai_row_window rw = {{ o1 - o0, {p} - o0 * {s} + r0, end - r0 }};",
             f"      ai_{kernel}_rows(&P, rw, win, (const int32_t *)K, dst, scratch);",
             f"      memcpy(band + o0 * {out_row}, dst, (size_t)(o1 - o0) * {out_row});",
             "    }"]
    if text:
        lines += ["    uint32_t fnv = 2166136261u;",
                  f"    for (int i = 0; i < {ybytes}; ++i) {{ fnv = (fnv ^ (uint8_t)band[i]) * 16777619u; }}",
                  '    printf("fnv %08lx\\n", (unsigned long)fnv);']
    else:
        lines.append(f"    fwrite(band, 1, {ybytes}, stdout);")
    lines += ["  }", "  return 0;", "}", ""]
    return "\n".join(lines)


def _fnv(b: bytes) -> int:
    h = 2166136261
    for v in b:
        h = ((h ^ v) * 16777619) & 0xFFFFFFFF
    return h


def test_predouble_is_exact_and_inverse():
    for _, xs, stride, padding in DW3_LAYERS[:2]:  # lowered layers' records
        for rqd in (2, 3):
            _, cg, op, _ = _layer(xs, stride, padding, rqd)
            packed = cg.graph.tensors[op.inputs[1]].data
            d = predouble_dw3x3(packed)
            assert d is not None and np.array_equal(undouble_dw3x3(d), packed)
    # on random records: weights int8 / int9 halves, biases, khi, rs
    k = np.zeros((64, 10), np.int64)
    w = rng.integers(-256, 256, (64, 12))
    k[:, :6] = (w[:, 0::2] & 0xFFFF) | ((w[:, 1::2] & 0xFFFF) << 16)
    k[:, :6] = np.where(k[:, :6] >= 2**31, k[:, :6] - 2**32, k[:, :6])
    k[:, 6] = rng.integers(-2**29, 2**29, 64)
    k[:, 7] = rng.integers(2**30, 2**31 - 1, 64)
    k[:, 8] = rng.integers(-2**28, 2**28, 64)
    k[:, 9] = rng.integers(1, 22, 64)
    packed = k.astype(np.int32).reshape(-1)
    d = predouble_dw3x3(packed)
    assert d is not None
    dd = d.astype(np.int64).reshape(-1, 10)
    assert np.array_equal(dd[:, 6], 2 * k[:, 6]) and np.array_equal(dd[:, 9], k[:, 9] + 1)
    lo = ((dd[:, :6] & 0xFFFF) ^ 0x8000) - 0x8000
    assert np.array_equal(lo, 2 * w[:, 0::2])
    assert np.array_equal(undouble_dw3x3(d), packed)
    k[0, 6] = 2**30 + 5  # a bias whose double leaves int32: not pre-doubled
    assert predouble_dw3x3(k.astype(np.int32).reshape(-1)) is None


@pytest.mark.parametrize("target", [None, pytest.param("m4", marks=pytest.mark.slow)])
@pytest.mark.parametrize("rqd", [2, 3])
@pytest.mark.parametrize("name,xs,stride,padding", DW3_LAYERS, ids=[c[0] for c in DW3_LAYERS])
def test_predoubled_rows_match_reference(tmp_path, name, xs, stride, padding, rqd, target):
    if target:
        for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
            if shutil.which(tool) is None:
                pytest.skip(f"{tool} not installed")
    g, cg, op, x = _layer(xs, stride, padding, rqd)
    ref = reference(g, x).reshape(-1).astype(np.int8)
    packed = predouble_dw3x3(cg.graph.tensors[op.inputs[1]].data)
    assert packed is not None
    attrs = {**op.attrs, "rqd": rqd + 2}
    scheds = schedules(int(attrs["out_h"]))
    for o0, o1 in (b for sc in scheds for b in sc):  # the contract's windows, as the harness cuts them
        r0, n, pt = window(op, o0, o1)
        assert n > 0 and pt >= 0
    src = tmp_path / f"{name}.c"
    if target is None:
        src.write_text(_harness(op, attrs, packed, x, scheds, text=False))
        exe = tmp_path / name
        subprocess.run([_CC, *_flags(), str(src), *map(str, _runtime_objects()), "-o", str(exe), "-lm"], check=True)
        out = subprocess.run([str(exe)], capture_output=True, check=True).stdout
        raw = np.frombuffer(out, np.int8)
        assert raw.size == ref.size * len(scheds)
        for i, sc in enumerate(scheds):
            assert np.array_equal(raw[i * ref.size:(i + 1) * ref.size], ref), f"{name}: bands {sc} differ"
        return
    src.write_text(_harness(op, attrs, packed, x, scheds, text=True))
    objs = _target_objects(target)
    elf = tmp_path / f"{name}.elf"
    r = subprocess.run(["arm-none-eabi-gcc", "-std=c99", "-O2", "-mthumb", *TARGETS[target][0],
                        f"-I{RUNTIME / 'include'}", "--specs=rdimon.specs", "-T", str(objs[-1].parent / "mps2.ld"),
                        str(src), *map(str, objs), "-o", str(elf), "-lm"], capture_output=True, text=True)
    if r.returncode != 0 and "rdimon" in r.stderr:
        pytest.skip("newlib's rdimon (semihosting) library is not installed")
    assert r.returncode == 0, r.stderr
    out = subprocess.run(["qemu-system-arm", "-M", TARGETS[target][1], "-nographic", "-monitor", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                         capture_output=True, text=True, timeout=300).stdout.replace("\r", "").split("\n")
    want = f"fnv {_fnv(ref.tobytes()):08x}"
    got = [ln for ln in out if ln.startswith("fnv")]
    assert got == [want] * len(scheds), (name, target, got, want)


@pytest.mark.slow
def test_vww_ram_m4_members_predoubled_and_match():
    """VWW --optimization ram for a Cortex-M4 board: its five planar members run on pre-doubled
    constants (`rqd` 5), the others (and other cores) keep theirs; the firmware's host build
    matches TFLite Micro (the halved records, exact)."""
    pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    from stm32ai.pipeline import compile_model
    from stm32ai.validate.run import validate_model

    m = shared_model("mlperf_tiny/vww_96_int8.tflite")
    c = compile_model(m, "network", optimization="ram", core="cortex-m4")
    members = [mm for op in c.graph.ops if op.kernel == "stripe" for mm in op.attrs["stripe"]["members"]]
    pre = [mm for mm in members if mm["kernel"] in G2_KERNELS and mm["params"].get("rqd", 0) >= 4]
    assert len(pre) == 5
    assert all("wide" not in mm and not mm["params"].get("stage") for mm in pre)
    assert validate_model(m, n=2, compiled=c).outcome == "match"
    c.graph.core = "cortex-m7"  # the other cores have no doubled rows: nothing to pre-double
    assert predouble_stripe_dw3(c.graph) == 0
