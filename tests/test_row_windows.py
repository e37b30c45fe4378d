"""Row windows (issue 24, docs/kernels_conv.md "Row windows"): every kernel a stripe uses,
called on a sub-geometry, computes exactly the output rows the whole-image call computes.

A stripe (contract in docs/stripes.md) calls the unchanged kernel with a copy of its params
where `out_h = o1 - o0`, `in_h = n` (the rows of its window buffer), top pad
`p - o0*s + r0`; the input pointer is the window's first row, the output pointer where output
row o0 goes. `rows` members (elementwise) get the band's element count. Here each lowered
layer — real MLPerf Tiny layers and hand-built ones (test_lower_conv.LAYERS, fixtures) — runs
once on the whole image and then band by band (heights 1, 2, 3, odd tails, random cuts), every
window copied to a buffer of exactly its size (built with AddressSanitizer where the host has
it: a read outside the window fails), and the outputs must be byte-identical; the whole-image
result is compared with TFLite's reference convolution (test_lower_conv.reference) for the
hand-built conv layers, and the MLPerf models as wholes match TFLite Micro in test_models_host.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES, MPS2_LD, STARTUP_C, shared_model
from test_lower_conv import LAYERS, make_layer, reference

from stm32ai.emitter import ROW_ENTRY_KERNELS, ROW_WINDOW_KERNELS, c_value
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.ir import Graph, Op
from stm32ai.pipeline import compile_graph

RUNTIME = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
rng = np.random.default_rng(2024)

CONV = {"conv2d_s8", "conv2d_s8_1col", "depthwise_conv2d_s8", "depthwise_conv2d_dm_s8", "depthwise_conv2d_3x3_s8",
        "depthwise_conv2d_3x3_sgn_s8", "depthwise_conv2d_3x3_g2_s8", "depthwise_conv2d_3x3_g2_sgn_s8",
        "depthwise_conv2d_3x3_hwc_s8", "depthwise_conv2d_3x3_hwc_sgn_s8"}
NO_SCRATCH = {"depthwise_conv2d_dm_s8", "depthwise_conv2d_3x3_hwc_s8", "depthwise_conv2d_3x3_hwc_sgn_s8"}
POOL = {"avgpool_s8", "maxpool_s8"}
WINDOW = CONV | POOL
SOURCES = ["ai_conv_s8.c", "ai_conv_dw_s8.c", "ai_conv_dw3_hwc_s8.c", "ai_pool.c", "ai_binary.c", "ai_activations.c",
           "ai_quantize.c", "ai_elementwise.c"]


def geometry(op: Op) -> tuple[int, int, int, int, int]:
    """(H, k, stride, dilation, top pad) along the streamed dimension."""
    a = op.attrs
    if op.kernel in POOL:
        return a["in_h"], a["filter_h"], a["stride_h"], 1, a["pad_h"]
    return a["in_h"], a["k_h"], a["stride"][0], a["dilation"][0], a["pad"][0]


def window(op: Op, o0: int, o1: int) -> tuple[int, int, int]:
    """The contract's sub-geometry: first stored input row r0, row count n, top pad."""
    h, k, s, d, p = geometry(op)
    r0 = max(0, o0 * s - p)
    n = min(h, (o1 - 1) * s - p + (k - 1) * d + 1) - r0
    return r0, n, p - o0 * s + r0


def schedules(out_h: int) -> list[list[tuple[int, int]]]:
    """Band partitions of [0, out_h): uniform heights 1, 2, 3 (odd tails), a lone top and
    bottom row, and two random cuts."""
    out = []
    for b in (1, 2, 3):
        out.append([(o, min(o + b, out_h)) for o in range(0, out_h, b)])
    if out_h > 2:
        out.append([(0, 1), (1, out_h - 1), (out_h - 1, out_h)])
    for _ in range(2):
        cuts = sorted(set(rng.integers(1, out_h, size=min(out_h - 1, 3)).tolist())) if out_h > 1 else []
        edges = [0, *cuts, out_h]
        out.append(list(zip(edges[:-1], edges[1:], strict=True)))
    uniq = []
    for s in out:
        if s not in uniq:
            uniq.append(s)
    return uniq


def _c_array(name: str, data: np.ndarray) -> str:
    ctype = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int32_t"}[data.dtype.name]
    flat = data.reshape(-1)
    body = ", ".join(str(int(v)) for v in flat) or "0"
    return f"static const {ctype} {name}[{max(flat.size, 1)}] __attribute__((aligned(8))) = {{ {body} }};"


def _has_scratch_fn(kernel: str) -> bool:
    return kernel not in NO_SCRATCH and kernel not in POOL


def harness(g: Graph, op: Op, x: np.ndarray | list[np.ndarray], scheds: list[list[tuple[int, int]]],
            scratch: int) -> str:
    """C: the whole-image call, then every schedule band by band; writes the outputs to stdout."""
    a = op.attrs
    lines = ["#include <stdint.h>", "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>",
             '#include "ai_kernels_conv.h"', '#include "ai_kernels_pool.h"', '#include "ai_kernels_binary.h"',
             '#include "ai_kernels_activations.h"', '#include "ai_kernels_quantize.h"',
             '#include "ai_kernels_elementwise.h"']
    init = ", ".join(f".{k} = {c_value(v)}" for k, v in a.items())
    lines.append(f"static const ai_{op.kernel}_params P = {{ {init} }};")
    ins = x if isinstance(x, list) else [x]
    args_in: list[str] = []
    dyn = 0
    for j, t in enumerate(op.inputs):
        if t < 0:
            args_in.append("NULL")
        elif g.tensors[t].is_const:
            lines.append(_c_array(f"c{j}", np.ascontiguousarray(g.tensors[t].data)))
            args_in.append(f"(const void *)c{j}")
        else:
            lines.append(_c_array(f"x{dyn}", ins[dyn]))
            args_in.append(f"(const void *)x{dyn}")
            dyn += 1
    y = g.tensors[op.outputs[0]]
    ybytes = y.nbytes
    sch = [v for s in scheds for band in s for v in band]
    starts = [0]
    for s in scheds:
        starts.append(starts[-1] + len(s))
    lines.append(f"static const int32_t bands[{max(len(sch), 1)}] = {{ {', '.join(map(str, sch)) or '0'} }};")
    lines.append(f"static const int32_t first[{len(starts)}] = {{ {', '.join(map(str, starts))} }};")
    lines.append(f"static int8_t scratch[{max(scratch, 8)}] __attribute__((aligned(8), unused));")
    call = "ai_{k}(&{p}, {ins}, (void *){out}{scr});"
    scr = ", scratch" if (op.scratch > 0 and op.kernel not in NO_SCRATCH) or scratch_needed(op) else ""
    lines += ["int main(void) {",
              f"  int8_t *full = calloc({ybytes}, 1);",
              "  " + call.format(k=op.kernel, p="P", ins=", ".join(args_in), out="full", scr=scr),
              "#ifdef ROWWIN_TEXT",
              "  uint32_t fnv = 2166136261u;",
              f"  for (int i = 0; i < {ybytes}; ++i) {{ fnv = (fnv ^ (uint8_t)full[i]) * 16777619u; }}",
              '  printf("fnv %08lx\\n", (unsigned long)fnv);',
              "#else",
              f"  fwrite(full, 1, {ybytes}, stdout);",
              "#endif",
              f"  for (int s = 0; s < {len(scheds)}; ++s) {{",
              f"    int8_t *band = malloc({ybytes});",
              f"    memset(band, 0x5a, {ybytes});",
              "    for (int b = first[s]; b < first[s + 1]; ++b) {",
              "      const int32_t o0 = bands[2 * b], o1 = bands[2 * b + 1];",
              f"      ai_{op.kernel}_params q = P;"]
    if op.kernel in WINDOW:
        h, k, s_, d, p = geometry(op)
        in_row = a["in_w"] * (a["channels"] if op.kernel in POOL else a["in_c"])
        out_row = a["out_w"] * (a["channels"] if op.kernel in POOL else a["out_c"])
        pad = "pad_h" if op.kernel in POOL else "pad[0]"
        lines += [f"      const int32_t r0 = o0 * {s_} - {p} > 0 ? o0 * {s_} - {p} : 0;",
                  f"      int32_t end = (o1 - 1) * {s_} - {p} + {(k - 1) * d} + 1;",
                  f"      if (end > {h}) end = {h};",
                  "      const int32_t n = end - r0;",
                  f"      q.in_h = n; q.out_h = o1 - o0; q.{pad} = {p} - o0 * {s_} + r0;",
                  f"      int8_t *win = malloc((size_t)n * {in_row});",
                  f"      memcpy(win, (const int8_t *){args_in[0]} + r0 * {in_row}, (size_t)n * {in_row});"]
        if _has_scratch_fn(op.kernel):
            lines.append(f"      if (ai_{op.kernel}_scratch_size(&q) > ai_{op.kernel}_scratch_size(&P)) return 3;")
        win_args = ["(const void *)win", *args_in[1:]]
        # the kernels with a row-window entry run as the stripe executor calls them: the const
        # params and the window (emitter `_stripe_code`); the others on the patched copy
        band_call = call.format(k=op.kernel, p="q", ins=", ".join(win_args), out="dst", scr=scr)
        if op.kernel in ROW_WINDOW_KERNELS:
            lines.append("      const ai_row_window rw = { q.out_h, q." + pad + ", q.in_h };")
            band_call = call.format(k=op.kernel + "_rows", p="P, rw", ins=", ".join(win_args), out="dst", scr=scr)
        lines += [f"      int8_t *dst = malloc((size_t)(o1 - o0) * {out_row});",
                  "      " + band_call,
                  f"      memcpy(band + o0 * {out_row}, dst, (size_t)(o1 - o0) * {out_row});",
                  "      free(win); free(dst);"]
    else:  # rows: the band's elements, row-offset pointers
        row = int(np.prod(y.shape[2:]))
        if "size" in a:
            lines.append(f"      q.size = (o1 - o0) * {row};")
        else:
            lines.append(f"      q.out_shape[{len(a['out_shape']) - 1}] = (o1 - o0) * {row};")
        srcs = []
        for j, arg in enumerate(args_in):
            t = op.inputs[j]
            if t >= 0 and not g.tensors[t].is_const:
                lines += [f"      int8_t *w{j} = malloc((size_t)(o1 - o0) * {row});",
                          f"      memcpy(w{j}, (const int8_t *){arg} + o0 * {row}, (size_t)(o1 - o0) * {row});"]
                srcs.append(f"(const void *)w{j}")
            else:
                srcs.append(arg)
        # the row kernels with a row entry run as the stripe executor calls them: the const
        # params and the element count (emitter `_stripe_code`); the others on the patched copy
        row_call = call.format(k=op.kernel, p="q", ins=", ".join(srcs), out="dst", scr=scr)
        unit = [0] * (len(a.get("out_shape", [])) - 1) + [1]
        if op.kernel in ROW_ENTRY_KERNELS and not scr and a["in1_strides"] == unit and a["in2_strides"] == unit:
            row_call = "(void)q; " + call.format(k=op.kernel + "_rows", p="P, (o1 - o0) * " + str(row),
                                                 ins=", ".join(srcs), out="dst", scr=scr)
        lines += [f"      int8_t *dst = malloc((size_t)(o1 - o0) * {row});",
                  "      " + row_call,
                  f"      memcpy(band + o0 * {row}, dst, (size_t)(o1 - o0) * {row});",
                  "      free(dst);"]
        lines += [f"      free(w{j});" for j, s in enumerate(srcs) if s == f"(const void *)w{j}"]
    lines += ["    }",
              "#ifdef ROWWIN_TEXT",
              "    long diff = -1;",
              f"    for (int i = 0; i < {ybytes}; ++i) {{ if (band[i] != full[i]) {{ diff = i; break; }} }}",
              '    printf("schedule %d diff %ld\\n", s, diff);',
              "#else",
              f"    fwrite(band, 1, {ybytes}, stdout);",
              "#endif",
              "    free(band);", "  }",
              "  free(full);", "  return 0;", "}", ""]
    return "\n".join(lines)


def scratch_needed(op: Op) -> bool:
    return op.kernel in CONV and op.kernel not in NO_SCRATCH or op.kernel == "add_lut_staged_s8"


_CC = shutil.which("cc") or "cc"


@functools.cache
def _flags() -> tuple[str, ...]:
    """Host flags, with -fsanitize=address,undefined when the host cc links it (a read outside
    a window then fails the run)."""
    base = ("-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", f"-I{RUNTIME / 'include'}")
    san = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all")
    d = Path(tempfile.mkdtemp(prefix="rowwin_"))
    (d / "t.c").write_text("int main(void) { return 0; }\n")
    r = subprocess.run([_CC, *san, str(d / "t.c"), "-o", str(d / "t")], capture_output=True)
    shutil.rmtree(d, ignore_errors=True)
    return base + san if r.returncode == 0 else base


@functools.cache
def _runtime_objects() -> tuple[Path, ...]:
    """The kernels compiled once per test session."""
    d = Path(tempfile.mkdtemp(prefix="rowwin_rt_"))
    objs = []
    for s in SOURCES:
        o = d / (s[:-2] + ".o")
        subprocess.run([_CC, *_flags(), "-c", str(RUNTIME / "src" / s), "-o", str(o)], check=True)
        objs.append(o)
    return tuple(objs)


def run_bands(g: Graph, op: Op, x, tmp: Path, tag: str) -> tuple[np.ndarray, list[np.ndarray]]:
    a = op.attrs
    out_h = a["out_h"] if "out_h" in a else g.tensors[op.outputs[0]].shape[1]
    scheds = schedules(out_h)
    src = tmp / f"{tag}.c"
    # scratch: the op's planned size, or the C query for attrs patched by the test (stage_oc)
    src.write_text(harness(g, op, x, scheds, max(op.scratch, 1 << 16)))
    exe = tmp / tag
    subprocess.run([_CC, *_flags(), str(src), *map(str, _runtime_objects()), "-o", str(exe), "-lm"],
                   check=True)
    r = subprocess.run([str(exe)], capture_output=True, check=False)
    assert r.returncode == 0, f"{tag}: exit {r.returncode} {r.stderr.decode(errors='replace')[-2000:]}"
    ybytes = g.tensors[op.outputs[0]].nbytes
    raw = np.frombuffer(r.stdout, np.int8)
    assert raw.size == ybytes * (1 + len(scheds))
    parts = [raw[i * ybytes:(i + 1) * ybytes] for i in range(1 + len(scheds))]
    for s, got in zip(scheds, parts[1:], strict=True):
        assert np.array_equal(got, parts[0]), f"{tag} ({op.kernel}): bands {s} differ from the whole image"
    return parts[0], parts[1:]


# Cortex-M4 (mps2-an386) and Cortex-M7 (mps2-an500, -DAI_CORE_CM7): the DSP paths of the same kernels
TARGETS = {"m4": (["-mcpu=cortex-m4", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"], "mps2-an386"),
           "m7": (["-mcpu=cortex-m7", "-mfloat-abi=hard", "-mfpu=fpv5-d16", "-DAI_CORE_CM7"], "mps2-an500")}


@functools.cache
def _target_objects(target: str) -> tuple[Path, ...]:
    d = Path(tempfile.mkdtemp(prefix=f"rowwin_{target}_"))
    (d / "startup.c").write_text(STARTUP_C)
    (d / "mps2.ld").write_text(MPS2_LD)
    objs = []
    for src in [*(RUNTIME / "src" / s for s in SOURCES), d / "startup.c"]:
        o = d / (src.stem + ".o")
        subprocess.run(["arm-none-eabi-gcc", "-std=c99", "-O2", "-mthumb", *TARGETS[target][0],
                        f"-I{RUNTIME / 'include'}", "-c", str(src), "-o", str(o)], check=True)
        objs.append(o)
    return tuple(objs)


def run_bands_target(g: Graph, op: Op, x, tmp: Path, tag: str, target: str, full: np.ndarray) -> None:
    """The same harness on an emulated core: every schedule identical to its whole-image run, and
    that run identical to the host's (FNV-1a of the output)."""
    a = op.attrs
    out_h = a["out_h"] if "out_h" in a else g.tensors[op.outputs[0]].shape[1]
    scheds = schedules(out_h)
    src = tmp / f"{tag}_{target}.c"
    src.write_text(harness(g, op, x, scheds, max(op.scratch, 1 << 16)))
    objs = _target_objects(target)
    elf = tmp / f"{tag}_{target}.elf"
    r = subprocess.run(["arm-none-eabi-gcc", "-std=c99", "-O2", "-mthumb", *TARGETS[target][0], "-DROWWIN_TEXT",
                        f"-I{RUNTIME / 'include'}", "--specs=rdimon.specs", "-T", str(objs[-1].parent / "mps2.ld"),
                        str(src), *map(str, objs), "-o", str(elf), "-lm"], capture_output=True, text=True)
    if r.returncode != 0 and "rdimon" in r.stderr:
        pytest.skip("newlib's rdimon (semihosting) library is not installed")
    assert r.returncode == 0, r.stderr
    out = subprocess.run(["qemu-system-arm", "-M", TARGETS[target][1], "-nographic", "-monitor", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                         capture_output=True, text=True, timeout=300).stdout.replace("\r", "").split("\n")
    fnv = 2166136261
    for b in full.tobytes():
        fnv = ((fnv ^ b) * 16777619) & 0xFFFFFFFF
    assert out[0] == f"fnv {fnv:08x}", f"{tag} {target}: whole image differs from the host: {out[:2]}"
    diffs = [ln for ln in out[1:] if ln.startswith("schedule")]
    assert len(diffs) == len(scheds) and all(ln.endswith(" diff -1") for ln in diffs), (tag, target, diffs, scheds)


# ---- hand-built conv / depthwise layers (all kernel variants) -------------------------------

STRIPE_LAYERS = [c for c in LAYERS if c[2][0] == 1]  # batch 1: stripes stream one image


@pytest.mark.parametrize("optimization", ["ram", "time"])
@pytest.mark.parametrize("name,kind,xs,ws,opts,kernel", STRIPE_LAYERS, ids=[c[0] for c in STRIPE_LAYERS])
def test_conv_layer_row_windows(tmp_path, name, kind, xs, ws, opts, kernel, optimization):
    _conv_layer(tmp_path, name, kind, xs, ws, opts, optimization, None)


@pytest.mark.slow
@pytest.mark.parametrize("optimization", ["ram", "time"])
@pytest.mark.parametrize("target", ["m4", "m7"])
@pytest.mark.parametrize("name,kind,xs,ws,opts,kernel", STRIPE_LAYERS, ids=[c[0] for c in STRIPE_LAYERS])
def test_conv_layer_row_windows_on_target(tmp_path, name, kind, xs, ws, opts, kernel, target, optimization):
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    if optimization == "time" and kind != "CONV_2D":
        pytest.skip("time differs from ram only in conv2d_s8's int16 weights")
    _conv_layer(tmp_path, name, kind, xs, ws, opts, optimization, target)


def _conv_layer(tmp_path, name, kind, xs, ws, opts, optimization, target):
    opts = dict(opts)
    has_bias = opts.pop("bias", True)
    oc = ws[3] if kind == "DEPTHWISE_CONV_2D" else ws[0]
    w = rng.integers(-127, 128, ws).astype(np.int8)
    bias = rng.integers(-5000, 5000, oc) if has_bias else None
    g = make_layer(kind, xs, w, bias, w_scales=rng.uniform(0.002, 0.02, oc),
                   in_q=(0.05, int(rng.integers(-20, 20))), out_q=(0.08, int(rng.integers(-30, 30))), **opts)
    x = rng.integers(-128, 128, xs).astype(np.int8)
    c = compile_graph(copy.deepcopy(g), optimization=optimization)
    op = c.graph.ops[0]
    assert op.kernel in WINDOW
    if op.attrs.get("transpose"):
        # the column walk is a lowering choice outside --optimization ram: stripes lower their
        # members with transpose 0 (rule in docs/stripes.md)
        pytest.skip("transposed walk: not a stripe member")
    op.attrs = {**op.attrs, **({"reverse": 0} if "reverse" in op.attrs else {})}
    def one(tag: str) -> None:
        full, _ = run_bands(c.graph, op, x, tmp_path, tag)
        if target:
            run_bands_target(c.graph, op, x, tmp_path, tag, target, full)
        np.testing.assert_array_equal(full.reshape(reference(g, x).shape), reference(g, x))

    one(name)
    if op.kernel.startswith("depthwise_conv2d_3x3_") and "_g2_" not in op.kernel:
        # the channel-pair variant shares the packed layout (per channel) and the walk
        op.kernel = op.kernel.replace("3x3_", "3x3_g2_")
        one(name + "_g2")
    if op.kernel.startswith("depthwise_conv2d_3x3_"):
        # the HWC variant (stripe members with short rows): the same params and packed constants,
        # no scratch; on the targets its Armv7E-M row assembly
        op.kernel = op.kernel.replace("3x3_g2_", "3x3_").replace("3x3_", "3x3_hwc_")
        one(name + "_hwc")
    if op.kernel == "conv2d_s8" and op.attrs["in_c"] % 4 == 0 and not op.attrs.get("pad_copy"):
        # the one-column variant (stripe members of --optimization ram): the same params, weights, bands
        op.kernel = "conv2d_s8_1col"
        one(name + "_1col")
        op.kernel = "conv2d_s8"
    if op.kernel == "conv2d_s8" and not op.attrs["w16"] and op.attrs["out_c"] > 2:
        # weights staged per block of output channels (flash staging): the same bands
        op.attrs = {**op.attrs, "stage_oc": 2}
        one(name + "_stage")


# ---- pixel quads (ai_conv_s8.c conv_pxq: a stripe call with int8 weights in place) ------------

# shapes whose band calls run pixel quads (staging.pxq_applies: in_c % 4 == 0, out_c even,
# Kp % 16 == 0, out_h * out_w % 4 == 0 for the band): padded borders (the slow columns), VALID
# stride 2, a 1x1 stride-2 layer, dilation (no fast path), a relu clamp (mode 2), 8-pixel rows
PXQ_LAYERS = [
    ("pxq_same_3x3_c16_oc4_w4", (1, 5, 4, 16), (4, 3, 3, 16), dict(act="RELU")),
    ("pxq_valid_3x3_s2_c16_oc10", (1, 9, 9, 16), (10, 3, 3, 16), dict(padding="VALID", stride=(2, 2))),
    ("pxq_1x1_s2_c32_oc8", (1, 8, 8, 32), (8, 1, 1, 32), dict(stride=(2, 2))),
    ("pxq_same_3x3_d2_c16_oc6_w12", (1, 7, 12, 16), (6, 3, 3, 16), dict(dilation=(2, 2), act="RELU6")),
    ("pxq_same_3x3_c32_oc2_w8", (1, 4, 8, 32), (2, 3, 3, 32), {}),
    # 6-pixel rows: bands of 2 rows hold 3 quads, the middle one across the two rows (slow columns)
    ("pxq_same_3x3_c16_oc4_w6", (1, 6, 6, 16), (4, 3, 3, 16), {}),
    # 1x1 stride 1 (conv_rows_1x1_w8, pw37): a band's pixels as one run, its first npix & ~3 as
    # quads (across rows), the rest as pairs: rows of 6 (6 = a quad + a pair), of 5 (one-row calls
    # keep conv_triple_x3; 10 = 2 quads + a pair, 15 = 3 quads + a pair + the odd pixel), of 7;
    # a relu6 clamp (mode 2), more output than input channels, in_c 32
    ("pxq_1x1_c16_oc8_w6", (1, 5, 6, 16), (8, 1, 1, 16), {}),
    ("pxq_1x1_c16_oc6_w5", (1, 7, 5, 16), (6, 1, 1, 16), dict(act="RELU6")),
    ("pxq_1x1_c32_oc4_w7", (1, 4, 7, 32), (4, 1, 1, 32), dict(act="RELU")),
    ("pxq_1x1_c16_oc34_w4", (1, 5, 4, 16), (34, 1, 1, 16), {}),
    # rq_fold 3 (out_zp -128, no clamp: conv_pxq_m1z, the doubled-accumulator outputs): 1x1 rows
    # of 6, a padded 3x3 (slow columns), Kp 32
    ("pxq_1x1_c16_oc8_w6_rq3", (1, 5, 6, 16), (8, 1, 1, 16), dict(out_zp=-128, act="RELU")),
    ("pxq_same_3x3_c16_oc4_w4_rq3", (1, 5, 4, 16), (4, 3, 3, 16), dict(out_zp=-128)),
    # Kp % 16 != 0 (the leftover groups' loop first, conv_pxq_*t): VWW's in_c 60 pointwise members
    # (Kp 60: 3 leftover groups + 3 unrolled iterations) with rq_fold 3, in_c 8 (Kp 8: the leftover
    # loop alone), 3x3 in_c 4 (Kp 36 % 16 == 4) padded, 3x3 in_c 12 (Kp 108 % 16 == 12) with relu6
    ("pxq_1x1_c60_oc10_w6_rq3", (1, 6, 6, 60), (10, 1, 1, 60), dict(out_zp=-128, act="RELU")),
    ("pxq_1x1_c60_oc6_w6", (1, 4, 6, 60), (6, 1, 1, 60), {}),
    ("pxq_1x1_c8_oc4_w8_rq3", (1, 3, 8, 8), (4, 1, 1, 8), dict(out_zp=-128)),
    ("pxq_same_3x3_c4_oc6_w4", (1, 5, 4, 4), (6, 3, 3, 4), {}),
    ("pxq_same_3x3_c12_oc4_w8", (1, 4, 8, 12), (4, 3, 3, 12), dict(act="RELU6")),
    ("pxq_same_3x3_c12_oc4_w8_rq3", (1, 4, 8, 12), (4, 3, 3, 12), dict(out_zp=-128, act="RELU")),
    # an odd out_c (pxq_last_channel): 1x1 rows of 6 (conv_rows_1x1_w8), a padded 3x3 with relu6
    ("pxq_1x1_c16_oc7_w6", (1, 5, 6, 16), (7, 1, 1, 16), {}),
    ("pxq_same_3x3_c16_oc5_w4", (1, 5, 4, 16), (5, 3, 3, 16), dict(act="RELU6")),
    # krow 1x1 (in_c % 4 != 0, every window inside): quads across rows and the tensor's last
    # pixels through pxq_columns_slow's padded runs; VWW's in_c 106 / out_c 57 member with rq_fold 3
    ("pxq_1x1_c10_oc6_w6_krow", (1, 4, 6, 10), (6, 1, 1, 10), {}),
    ("pxq_1x1_c22_oc5_w4_krow_rq3", (1, 5, 4, 22), (5, 1, 1, 22), dict(out_zp=-128, act="RELU")),
    ("pxq_1x1_c106_oc57_w6_krow_rq3", (1, 6, 6, 106), (57, 1, 1, 106), dict(out_zp=-128, act="RELU")),
]


@pytest.mark.parametrize("target", [None, pytest.param("m4", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name,xs,ws,opts", PXQ_LAYERS, ids=[c[0] for c in PXQ_LAYERS])
def test_pixel_quads_row_windows(tmp_path, name, xs, ws, opts, target):
    """conv2d_s8's band calls with int8 weights in place run pixel quads (host: the C loop; m4:
    AI_PXQ_GROUP on the emulated Cortex-M4): every band schedule identical to the whole-image
    call (pixel pairs), and that identical to TFLite's reference convolution. Some band of each
    layer must qualify (staging.pxq_applies, the runtime's test mirrored)."""
    if target:
        for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
            if shutil.which(tool) is None:
                pytest.skip(f"{tool} not installed")
    from stm32ai.passes.staging import pxq_applies
    opts = dict(opts)
    out_zp = opts.pop("out_zp", None)
    w = rng.integers(-127, 128, ws).astype(np.int8)
    zp = int(rng.integers(-30, 30)) if out_zp is None else out_zp
    g = make_layer("CONV_2D", xs, w, rng.integers(-5000, 5000, ws[0]), w_scales=rng.uniform(0.002, 0.02, ws[0]),
                   in_q=(0.05, int(rng.integers(-20, 20))), out_q=(0.08, zp), **opts)
    x = rng.integers(-128, 128, xs).astype(np.int8)
    c = compile_graph(copy.deepcopy(g), optimization="ram")
    op = c.graph.ops[0]
    assert op.kernel == "conv2d_s8"
    op.attrs = {**op.attrs, "w16": 0, "stage_oc": 0, "reverse": 0}
    a = op.attrs
    if out_zp == -128:
        assert a["rq_fold"] == 3, (name, a["rq_fold"])  # the doubled-accumulator quads
    bands = {o1 - o0 for s in schedules(a["out_h"]) for o0, o1 in s}
    assert any(pxq_applies({**a, "out_h": b}) for b in bands), (name, a)
    full, _ = run_bands(c.graph, op, x, tmp_path, name)
    if target:
        run_bands_target(c.graph, op, x, tmp_path, name, target, full)
    np.testing.assert_array_equal(full.reshape(reference(g, x).shape), reference(g, x))


# ---- staged weights in the row-window entry (ai_conv_s8.c conv_stage_rows, call39) -----------

# (name, input, weights, layer options, output zero point, attrs set after lowering): the int8
# layout lowered (w16 0), then staged: w16 expanded per call (pairs only: n * Kp under the quads'
# threshold; channel quads, rq_fold 1 plain, 2 and 3 doubled; 1x1 rq_fold 3: the lin quads;
# blocks of 8 channels: quads per block, the last block pairs) or int8 by words; Kp * n / 4
# words not a multiple of 4 (the expansion's tail)
STAGED_LAYERS = [
    ("stg16_pairs_c4_oc6", (1, 6, 5, 4), (6, 3, 3, 4), {}, 5, dict(w16=1, stage_oc=6)),
    ("stg16_quads_fold1_c32_oc10", (1, 5, 6, 32), (10, 3, 3, 32), {}, 5, dict(w16=1, stage_oc=10, rq_fold=1)),
    ("stg16_quads_fold2_c32_oc10", (1, 5, 6, 32), (10, 3, 3, 32), {}, 5, dict(w16=1, stage_oc=10)),
    ("stg16_quads_fold3_c32_oc10", (1, 5, 6, 32), (10, 3, 3, 32), dict(act="RELU"), -128, dict(w16=1, stage_oc=10)),
    ("stg16_lin_1x1_c64_oc18", (1, 4, 6, 64), (18, 1, 1, 64), {}, -128, dict(w16=1, stage_oc=18)),
    ("stg16_blocks_1x1_c128_oc18", (1, 3, 5, 128), (18, 1, 1, 128), {}, -128, dict(w16=1, stage_oc=8)),
    ("stg8_c12_oc6", (1, 5, 5, 12), (6, 3, 3, 12), {}, 5, dict(w16=0, stage_oc=6)),
    # 1x1 stride 1, one block (the Cortex-M4's conv_rows_1x1_w16): pairs only, quads rq_fold 1
    # and 2 (not lin), a relu clamp (mode 2: conv2d_s8_run's loops)
    ("stg16_1x1_pairs_c8_oc16", (1, 6, 6, 8), (16, 1, 1, 8), {}, -128, dict(w16=1, stage_oc=16)),
    ("stg16_1x1_fold1_c128_oc18", (1, 3, 5, 128), (18, 1, 1, 128), {}, 5, dict(w16=1, stage_oc=18, rq_fold=1)),
    ("stg16_1x1_fold2_c128_oc18", (1, 3, 5, 128), (18, 1, 1, 128), {}, 5, dict(w16=1, stage_oc=18)),
    ("stg16_1x1_relu_c16_oc8", (1, 5, 7, 16), (8, 1, 1, 16), dict(act="RELU"), 5, dict(w16=1, stage_oc=8)),
    # in_c % 4 != 0 (krow: each pixel's run padded to a word): pairs, and lin quads (VWW's m15)
    ("stg16_1x1_krow_c6_oc10", (1, 5, 6, 6), (10, 1, 1, 6), {}, -128, dict(w16=1, stage_oc=10)),
    ("stg16_1x1_krow_c57_oc30", (1, 3, 4, 57), (30, 1, 1, 57), {}, -128, dict(w16=1, stage_oc=30)),
]


@pytest.mark.parametrize("target", [None, pytest.param("m4", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name,xs,ws,opts,zp,attrs", STAGED_LAYERS, ids=[c[0] for c in STAGED_LAYERS])
def test_staged_row_windows(tmp_path, name, xs, ws, opts, zp, attrs, target):
    """A stripe call of conv2d_s8 with staged weights (the row-window entry's conv_stage_rows:
    word copies, the quads' rq doubled while copied, on the Cortex-M4 the LDM/STM expansions
    and conv_rows_1x1_w16):
    every band schedule identical to the whole-image call (ai_conv2d_s8: conv_stage), that
    identical to TFLite's reference convolution and, m4, to the host's."""
    if target:
        for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
            if shutil.which(tool) is None:
                pytest.skip(f"{tool} not installed")
    w = rng.integers(-127, 128, ws).astype(np.int8)
    g = make_layer("CONV_2D", xs, w, rng.integers(-5000, 5000, ws[0]), w_scales=rng.uniform(0.002, 0.02, ws[0]),
                   in_q=(0.05, int(rng.integers(-20, 20))), out_q=(0.08, zp), **opts)
    x = rng.integers(-128, 128, xs).astype(np.int8)
    c = compile_graph(copy.deepcopy(g), optimization="ram")
    op = c.graph.ops[0]
    assert op.kernel == "conv2d_s8" and not op.attrs["w16"] and int(op.attrs.get("stage_oc", 0)) == 0, op.attrs
    assert not op.attrs.get("pad_copy") and op.attrs["rq_fold"] >= attrs.get("rq_fold", 2), op.attrs
    op.attrs = {**op.attrs, **attrs, "reverse": 0, "stage_gap": 0}
    full, _ = run_bands(c.graph, op, x, tmp_path, name)
    if target:
        run_bands_target(c.graph, op, x, tmp_path, name, target, full)
    np.testing.assert_array_equal(full.reshape(reference(g, x).shape), reference(g, x))


# ---- the 2-channel planar depthwise fill walk (ai_conv_dw_s8.c dw3_fill2_walk, dw39) ----------

# a stripe call's g2 fill planned once per call, one walk per channel pair (rows loop in the
# Cortex-M4 assembly): rows of W % 4 == 0 pixels with an odd left pad (the head {pad, pixel 0},
# quads, a pair and {pixel W-1, pad}: SAME stride 1, and stride 2 on an odd height/width) or an
# even one (quads only: SAME stride 2 on even sizes, VALID); odd and even quad counts; padding
# rows top and bottom (bands of 1-3 rows, pad_clean); VWW's 12-pixel and 8-pixel rows
DW_G2_LAYERS = [
    ("dwg2_same_w12_c8", (1, 9, 12, 8), (1, 3, 3, 8), {}),
    ("dwg2_same_w16_c4", (1, 7, 16, 4), (1, 3, 3, 4), {}),
    ("dwg2_same_w24_c2", (1, 6, 24, 2), (1, 3, 3, 2), {}),
    ("dwg2_same_s2_w8_c8", (1, 8, 8, 8), (1, 3, 3, 8), dict(stride=(2, 2))),
    ("dwg2_same_s2_w12_c6", (1, 10, 12, 6), (1, 3, 3, 6), dict(stride=(2, 2))),
    ("dwg2_same_s2_w12_c4_odd_h", (1, 9, 12, 4), (1, 3, 3, 4), dict(stride=(2, 2))),
    ("dwg2_valid_w8_c4", (1, 7, 8, 4), (1, 3, 3, 4), dict(padding="VALID")),
    # the Cortex-M4's immediate-offset walks (dw3_fill2_walk_i: 8, 16, 32 channels) and 64
    ("dwg2_same_w12_c16", (1, 7, 12, 16), (1, 3, 3, 16), {}),
    ("dwg2_same_s2_w8_c32", (1, 6, 8, 32), (1, 3, 3, 32), dict(stride=(2, 2))),
    ("dwg2_same_w12_c32", (1, 5, 12, 32), (1, 3, 3, 32), {}),
    ("dwg2_same_w8_c64_s2", (1, 5, 8, 64), (1, 3, 3, 64), dict(stride=(2, 2))),
    ("dwg2_same_w12_c64", (1, 4, 12, 64), (1, 3, 3, 64), {}),
    # odd quad counts on those (the single quad before the loop): VWW's k41_m0 (48 px, 8 ch) and k41_m4
    # (24 px, 32 ch) rows, 3 quads of 8 / 16 channels
    ("dwg2_same_w48_c8", (1, 5, 48, 8), (1, 3, 3, 8), {}),
    ("dwg2_same_w24_c32", (1, 5, 24, 32), (1, 3, 3, 32), {}),
    ("dwg2_same_w16_c8", (1, 6, 16, 8), (1, 3, 3, 8), {}),
    ("dwg2_same_s2_w12_c16", (1, 8, 12, 16), (1, 3, 3, 16), dict(stride=(2, 2))),
    ("dwg2_same_s2_w12_c64", (1, 6, 12, 64), (1, 3, 3, 64), dict(stride=(2, 2))),
]


@pytest.mark.parametrize("target", [None, pytest.param("m4", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name,xs,ws,opts", DW_G2_LAYERS, ids=[c[0] for c in DW_G2_LAYERS])
def test_dw3_g2_fill_walk_row_windows(tmp_path, name, xs, ws, opts, target):
    """The _g2 planar 3x3 depthwise kernel's band calls (the fill walk where the row shape
    qualifies; host: its C loop, m4: the assembly on the emulated Cortex-M4): every band
    schedule identical to the whole-image call (dw3_fill2), and that identical to TFLite's
    reference. Some band of each layer must take the walk (one band per call: out rows <= 6 at
    stride 1, <= 3 at stride 2; the row shape of dw3_walk2_plan)."""
    if target:
        for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
            if shutil.which(tool) is None:
                pytest.skip(f"{tool} not installed")
    opts = dict(opts)
    oc = ws[3]
    w = rng.integers(-127, 128, ws).astype(np.int8)
    g = make_layer("DEPTHWISE_CONV_2D", xs, w, rng.integers(-5000, 5000, oc), w_scales=rng.uniform(0.002, 0.02, oc),
                   in_q=(0.05, int(rng.integers(-20, 20))), out_q=(0.08, int(rng.integers(-30, 30))), **opts)
    x = rng.integers(-128, 128, xs).astype(np.int8)
    c = compile_graph(copy.deepcopy(g), optimization="ram")
    op = c.graph.ops[0]
    assert op.kernel.startswith("depthwise_conv2d_3x3_"), op.kernel
    op.kernel = op.kernel.replace("3x3_hwc_", "3x3_").replace("3x3_g2_", "3x3_").replace("3x3_", "3x3_g2_")
    a = op.attrs
    assert not a.get("transpose") and not a.get("stage"), a
    # the walk's row shape (dw3_walk2_plan): W % 4 == 0 and at least 2 quads per row
    walk_w = a["in_w"] % 4 == 0 and a["in_w"] >= 8 + 4 * (a["pad"][1] & 1)
    r = (8 - 3) // a["stride"][0] + 1
    assert walk_w and any(o1 - o0 <= r for s in schedules(a["out_h"]) for o0, o1 in s), (name, a)
    full, _ = run_bands(c.graph, op, x, tmp_path, name)
    if target:
        run_bands_target(c.graph, op, x, tmp_path, name, target, full)
    np.testing.assert_array_equal(full.reshape(reference(g, x).shape), reference(g, x))


# ---- real layers: every window and rows op of the MLPerf Tiny models --------------------------

def _single(g: Graph, op: Op) -> Graph:
    """The layer `op` of `g` as a one-op graph (its tensors copied)."""
    ids = [t for t in op.inputs + op.outputs if t >= 0]
    sub = Graph(f"layer{op.index}", [], [], [], [])
    remap = {}
    for t in ids:
        if t in remap:
            continue
        src = g.tensors[t]
        if src.is_const:
            remap[t] = sub.add_const(src.name, src.data, src.quant)
        else:
            remap[t] = sub.add_tensor(src.name, src.shape, src.dtype, src.quant)
    new = Op(op.type, [remap.get(t, -1) for t in op.inputs], [remap[t] for t in op.outputs],
             dict(op.options), index=op.index)
    sub.ops.append(new)
    sub.inputs = [remap[t] for t in op.inputs if t >= 0 and not g.tensors[t].is_const]
    sub.inputs = list(dict.fromkeys(sub.inputs))
    sub.outputs = [remap[t] for t in op.outputs]
    return sub


STREAMABLE = {"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D", "ADD", "MUL"}


def _layers(path: Path) -> list[tuple[str, Graph]]:
    g = load_tflite(path)
    out = []
    for op in g.ops:
        if op.type not in STREAMABLE:
            continue
        y = g.tensors[op.outputs[0]]
        if len(y.shape) != 4 or y.shape[0] != 1 or y.dtype != "int8":
            continue
        if op.type in ("ADD", "MUL") and len({g.tensors[t].shape for t in op.inputs}) != 1:
            continue
        out.append((f"{path.stem}_op{op.index}_{op.type.lower()}", _single(g, op)))
    return out


def _run_real(sub: Graph, tmp: Path, tag: str, optimization: str, target: str | None = None) -> str:
    """Lower the one-op graph, run it whole and in bands (also on `target`); conv/depthwise
    whole-image results against TFLite's reference convolution (test_lower_conv.reference)."""
    c = compile_graph(copy.deepcopy(sub), optimization=optimization)
    ops = [o for o in c.graph.ops if o.kernel != "__nop"]
    assert len(ops) == 1, [o.kernel for o in ops]
    op = ops[0]
    if op.attrs.get("transpose"):
        return "transposed"
    for k in ("reverse",):
        if k in op.attrs:
            op.attrs = {**op.attrs, k: 0}
    ins = [rng.integers(-128, 128, c.graph.tensors[t].shape).astype(np.int8)
           for t in op.inputs if t >= 0 and not c.graph.tensors[t].is_const]
    # an elementwise op lowered in place aliases nothing here: inputs are separate arrays
    full, _ = run_bands(c.graph, op, ins if len(ins) > 1 else ins[0], tmp, tag)
    if target:
        run_bands_target(c.graph, op, ins if len(ins) > 1 else ins[0], tmp, tag, target, full)
    if sub.ops[0].type in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        ref = reference(sub, ins[0])
        np.testing.assert_array_equal(full.reshape(ref.shape), ref)
    return op.kernel


MLPERF = ["mlperf_tiny/pretrainedResnet_quant.tflite", "mlperf_tiny/kws_ref_model.tflite",
          "mlperf_tiny/vww_96_int8.tflite"]


@pytest.mark.parametrize("model", MLPERF, ids=lambda m: Path(m).stem)
def test_mlperf_layers_row_windows(tmp_path, model):
    _mlperf_layers(tmp_path, model, ("ram", "time"), None)


@pytest.mark.slow
@pytest.mark.parametrize("model", MLPERF, ids=lambda m: Path(m).stem)
def test_mlperf_layers_row_windows_on_m4(tmp_path, model):
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    _mlperf_layers(tmp_path, model, ("ram",), "m4")


def _mlperf_layers(tmp_path: Path, model: str, opts: tuple[str, ...], target: str | None) -> None:
    path = shared_model(model)
    seen: dict[str, int] = {}
    layers = _layers(path)
    assert layers
    # one layer per distinct (kernel-relevant) shape: the models repeat blocks
    done = set()
    for tag, sub in layers:
        op = sub.ops[0]
        key = (op.type, tuple(sub.tensors[op.inputs[0]].shape), tuple(sub.tensors[op.outputs[0]].shape),
               tuple(sorted((k, str(v)) for k, v in op.options.items())))
        if key in done:
            continue
        done.add(key)
        for opt in opts:
            k = _run_real(sub, tmp_path, f"{tag}_{opt}", opt, target)
            # KWS's 25x5 images walk columns outside ram mode: never a stripe member
            assert k != "transposed" or opt != "ram", tag
            seen[k] = seen.get(k, 0) + 1
    assert {"conv2d_s8", "depthwise_conv2d_3x3_s8"} <= set(seen) or "Resnet" in model, seen


ROWS_FIXTURES = ["act_relu_int8", "act_relu6_int8", "act_logistic_int8", "act_tanh_int8", "act_hard_swish_int8",
                 "act_leaky_relu_int8", "act_chain_int8", "avgpool_p3s1_same_int8", "avgpool_p2s2_valid_int8",
                 "maxpool_p2s1_valid_int8", "maxpool_p3s2_same_int8", "add_residual_int8", "bin_maxmin_int8",
                 "bin_mul_gate_int8", "ew_q_int8"]


@pytest.mark.parametrize("fixture", ROWS_FIXTURES)
def test_fixture_layers_row_windows(tmp_path, fixture):
    path = FIXTURES / f"{fixture}.tflite"
    g = load_tflite(path)
    kernels = []
    for op in g.ops:
        y = g.tensors[op.outputs[0]]
        if len(y.shape) != 4 or y.shape[0] != 1 or y.dtype != "int8" or y.shape[1] < 2:
            continue
        if any(g.tensors[t].dtype != "int8" for t in op.inputs if t >= 0 and not g.tensors[t].is_const):
            continue  # stripes are int8 end to end
        if any(not g.tensors[t].is_const and g.tensors[t].shape != y.shape and op.type not in STREAMABLE
               for t in op.inputs if t >= 0):
            continue
        sub = _single(g, op)
        c = compile_graph(copy.deepcopy(sub), optimization="ram")
        ops = [o for o in c.graph.ops if o.kernel != "__nop"]
        if len(ops) != 1:
            continue
        o = ops[0]
        a = o.attrs
        flat = "size" in a or ("out_shape" in a and all(v == 1 for v in a["out_shape"][:-1]))
        if o.kernel not in WINDOW and not flat:
            continue
        ins = [rng.integers(-128, 128, c.graph.tensors[t].shape).astype(np.int8)
               for t in o.inputs if t >= 0 and not c.graph.tensors[t].is_const]
        run_bands(c.graph, o, ins if len(ins) > 1 else ins[0], tmp_path, f"{fixture}_{op.index}")
        kernels.append(o.kernel)
    assert kernels, f"{fixture}: no streamable layer"


def _attrs_text(a: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in a.items())


# ---- running-sum global average pool (ai_avgpool_rows_s8_accumulate / _finish) ---------------

def _rows_pool_c(attrs: dict[str, Any], x: np.ndarray, bands: list[tuple[int, int]]) -> str:
    init = ", ".join(f".{k} = {c_value(v)}" for k, v in attrs.items())
    row = attrs["in_w"] * attrs["channels"]
    flat = [v for b in bands for v in b]
    return "\n".join([
        "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>", '#include "ai_kernels_pool.h"',
        f"static const ai_avgpool_rows_s8_params P = {{ {init} }};",
        _c_array("x", x),
        f"static const int32_t bands[{len(flat)}] = {{ {', '.join(map(str, flat))} }};",
        "int main(void) {",
        "  int32_t *acc = calloc((size_t)ai_avgpool_rows_s8_acc_size(&P), 1);",
        f"  int16_t *acc16 = calloc({attrs['channels']}, sizeof(int16_t)); /* count <= 255 only */",
        f"  for (int b = 0; b < {len(bands)}; ++b) {{",
        "    const int32_t r0 = bands[2 * b], n = bands[2 * b + 1] - r0;",
        f"    int8_t *win = malloc((size_t)n * {row});",
        f"    memcpy(win, x + r0 * {row}, (size_t)n * {row});",
        "    ai_avgpool_rows_s8_accumulate(&P, win, n, acc);",
        "    if (P.count <= 255) { ai_avgpool_rows_s8_accumulate16(&P, win, n, acc16); }",
        "    free(win);",
        "  }",
        f"  int8_t *out = malloc({attrs['channels']});",
        "  ai_avgpool_rows_s8_finish(&P, acc, out);",
        f"  fwrite(out, 1, {attrs['channels']}, stdout);",
        "  if (P.count <= 255) {",
        "    ai_avgpool_rows_s8_finish16(&P, acc16, out);",
        f"    fwrite(out, 1, {attrs['channels']}, stdout);",
        "  }",
        "  free(out); free(acc); free(acc16);",
        "  return 0;", "}", ""])


def _pool_model(tmp: Path, shape: tuple[int, ...], zp: int, act: str) -> Path:
    from test_lower_basic import ModelBuilder
    b = ModelBuilder()
    x = b.tensor(shape, "int8", 0.05, zp)
    y = b.tensor((1, 1, 1, shape[3]), "int8", 0.05, zp)
    b.pool("avg", x, y, shape[1], shape[2], shape[1], shape[2], "VALID", act)
    path = tmp / "gpool.tflite"
    path.write_bytes(b.build())
    return path


def _avg_inputs(shape: tuple[int, ...], kind: str) -> np.ndarray:
    n = shape[1] * shape[2]
    if kind == "random":
        return rng.integers(-128, 128, shape).astype(np.int8)
    if kind == "negative":  # all sums negative, -128 everywhere in channel 0
        x = rng.integers(-128, 0, shape).astype(np.int8)
        x[..., 0] = -128
        return x
    # rounding ties: per channel a sum of exactly +-(k + 1/2) * n where n is even
    x = np.zeros(shape, np.int8)
    flat = x.reshape(n, shape[3])
    for c in range(shape[3]):
        k = (c % 7) - 3
        sign = 1 if c % 2 else -1
        flat[:, c] = k
        flat[: n // 2, c] += sign  # mean k + sign/2: a tie when n is even
    return x


GPOOLS = [((1, 8, 8, 64), "random", 3, "NONE"),       # IC ResNet-8's global pool
          ((1, 25, 5, 64), "random", -2, "NONE"),     # KWS DS-CNN's
          ((1, 3, 3, 256), "random", -128, "NONE"),   # VWW MobileNet's
          ((1, 4, 6, 9), "ties", 0, "NONE"),
          ((1, 2, 2, 5), "ties", 7, "NONE"),
          ((1, 7, 3, 13), "negative", -100, "RELU"),
          ((1, 5, 5, 3), "negative", 20, "RELU6"),
          ((1, 1, 9, 4), "random", 0, "RELU_N1_TO_1"),
          ((1, 15, 17, 4), "negative", -100, "NONE"),  # 255 pixels: the int16 sums' limit (-128 * 255)
          ((1, 16, 16, 4), "random", 0, "NONE")]       # 256: int32 sums only


@pytest.mark.parametrize("shape,kind,zp,act", GPOOLS, ids=[f"{s[1]}x{s[2]}x{s[3]}_{k}_{a}" for s, k, _, a in GPOOLS])
def test_avgpool_rows_matches_tflm(tmp_path, shape, kind, zp, act):
    from stm32ai.passes.lower.pool import avgpool_rows_attrs
    from stm32ai.validate.reference import run_tflm
    model = _pool_model(tmp_path, shape, zp, act)
    x = _avg_inputs(shape, kind)
    want = np.asarray(run_tflm(model, [x])[0]).reshape(-1)
    c = compile_graph(load_tflite(model))
    op = next(o for o in c.graph.ops if o.kernel == "avgpool_s8")
    attrs = avgpool_rows_attrs(op.attrs)
    assert attrs is not None and attrs["count"] == shape[1] * shape[2]
    h = shape[1]
    for bands in ([(0, h)], [(r, r + 1) for r in range(h)],
                  [(r, min(r + 2, h)) for r in range(0, h, 2)], [(0, 1), (1, h)] if h > 1 else [(0, h)]):
        src = tmp_path / "gp.c"
        src.write_text(_rows_pool_c(attrs, x, bands))
        exe = tmp_path / "gp"
        subprocess.run([_CC, *_flags(), str(src), *map(str, _runtime_objects()), "-o", str(exe), "-lm"],
                       check=True)
        got = np.frombuffer(subprocess.run([str(exe)], capture_output=True, check=True).stdout, np.int8)
        # int32 sums, then (count <= 255) int16 sums (_accumulate16 / _finish16)
        n_out = 2 if attrs["count"] <= 255 else 1
        assert got.size == n_out * shape[3]
        for k in range(n_out):
            np.testing.assert_array_equal(got[k * shape[3]:(k + 1) * shape[3]], want,
                                          err_msg=f"bands {bands} {'int16' if k else 'int32'} sums")


def test_avgpool_rows_only_for_global_pools():
    from stm32ai.passes.lower.pool import ROWS_MAX_COUNT, avgpool_rows_attrs
    a = {"batches": 1, "in_h": 8, "in_w": 8, "channels": 64, "out_h": 1, "out_w": 1, "filter_h": 8,
         "filter_w": 8, "stride_h": 8, "stride_w": 8, "pad_h": 0, "pad_w": 0, "act_min": -128, "act_max": 127}
    assert avgpool_rows_attrs(a) == {"in_w": 8, "channels": 64, "count": 64, "act_min": -128, "act_max": 127}
    assert avgpool_rows_attrs({**a, "filter_h": 4, "stride_h": 4, "out_h": 2}) is None
    assert avgpool_rows_attrs({**a, "batches": 2}) is None
    # 128 * count + count / 2 must fit int32: 2^23 taps (2^30 + 2^22) is the limit
    assert ROWS_MAX_COUNT == 2 ** 23 and 128 * 2 ** 24 + 2 ** 23 > 2 ** 31 - 1
    assert avgpool_rows_attrs({**a, "in_h": 2048, "in_w": 4096, "filter_h": 2048, "filter_w": 4096}) is not None
    assert avgpool_rows_attrs({**a, "in_h": 2049, "in_w": 4096, "filter_h": 2049, "filter_w": 4096}) is None


def test_transposed_depthwise_is_never_a_stripe_member():
    # time/balanced lower a tall 3x3 depthwise to the column walk with transposed constants:
    # patching transpose to 0 in a stripe would read them wrongly (KWS in time with stripes
    # mismatched TFLM), so the pass refuses such a member; the ram lowering walks rows
    from stm32ai.passes.stripes import as_member
    w = rng.integers(-127, 128, (1, 3, 3, 8)).astype(np.int8)
    g = make_layer("DEPTHWISE_CONV_2D", (1, 25, 5, 8), w, rng.integers(-500, 500, 8), w_scales=[0.01] * 8)
    for opt, member in (("time", False), ("ram", True)):
        c = compile_graph(copy.deepcopy(g), optimization=opt, stripes=False)
        op = c.graph.ops[0]
        assert op.kernel.startswith("depthwise_conv2d_3x3") and bool(op.attrs["transpose"]) != member
        assert (as_member(op, c.graph) is not None) == member, opt


# int16 running sums on the Cortex-M4 (SADD16 path, channels % 4 == 0): KWS's 25x5x64 pool,
# bands of one row, rows at an odd address; the sums and the pooled bytes against numpy's exact
# per-channel sums and TFLite Micro's pooled output
M4_GPOOLS = [((1, 25, 5, 64), "random", -2, "NONE"), ((1, 15, 17, 4), "negative", -100, "NONE"),
             ((1, 3, 3, 12), "random", 5, "RELU6"), ((1, 4, 6, 9), "ties", 0, "NONE")]


def test_avgpool_rows_accumulate16_on_m4(tmp_path):
    import shutil

    from conftest import run_m4_selftest

    from stm32ai.passes.lower.pool import avgpool_rows_attrs
    from stm32ai.validate.reference import run_tflm
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    src, calls, want_sum, want_out = "", "", [], []
    for i, (shape, kind, zp, act) in enumerate(M4_GPOOLS):
        model = _pool_model(tmp_path, shape, zp, act)
        x = _avg_inputs(shape, kind)
        want_out.append(np.asarray(run_tflm(model, [x])[0]).reshape(-1))
        want_sum.append(x.reshape(-1, shape[3]).astype(np.int64).sum(axis=0))
        c = compile_graph(load_tflite(model))
        attrs = avgpool_rows_attrs(next(o for o in c.graph.ops if o.kernel == "avgpool_s8").attrs)
        assert attrs is not None and attrs["count"] <= 255
        init = ", ".join(f".{k} = {c_value(v)}" for k, v in attrs.items())
        row, ch = shape[2] * shape[3], shape[3]
        src += (f"static int8_t x{i}[{x.size + 1}] = {{0, " + ", ".join(str(int(v)) for v in x.reshape(-1))
                + "};\n")
        calls += (f"  {{ const ai_avgpool_rows_s8_params p = {{ {init} }};\n"
                  f"    static int16_t acc[{ch}]; static int8_t out[{ch}];\n"
                  f"    for (int r = 0; r < {shape[1]}; ++r) {{\n"
                  f"      ai_avgpool_rows_s8_accumulate16(&p, x{i} + 1 + r * {row}, 1, acc);\n    }}\n"
                  f"    printf(\"case{i}\");\n    for (int j = 0; j < {ch}; ++j) {{ printf(\" %d\", acc[j]); }}\n"
                  f"    ai_avgpool_rows_s8_finish16(&p, acc, out);\n"
                  f"    for (int j = 0; j < {ch}; ++j) {{ printf(\" %d\", out[j]); }}\n    printf(\"\\n\"); }}\n")
    dis, lines = run_m4_selftest(tmp_path, '#include <stdio.h>\n#include "ai_kernels_pool.h"\n' + src
                                 + "int main(void) {\n" + calls + "  return 0;\n}\n", ["ai_pool.c"])
    assert "sadd16" in dis  # the SIMD path is built
    assert len(lines) == len(M4_GPOOLS)
    for n, ln in enumerate(lines):
        ch = M4_GPOOLS[n][0][3]
        got = np.array([int(v) for v in ln[1:]])
        assert ln[0] == f"case{n}" and got.size == 2 * ch
        np.testing.assert_array_equal(got[:ch], want_sum[n], err_msg=f"case {n} sums")
        np.testing.assert_array_equal(got[ch:], want_out[n], err_msg=f"case {n} output")
