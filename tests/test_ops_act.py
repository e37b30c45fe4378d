"""Activations and quantisation (RELU, RELU6, RELU_N1_TO_1, LEAKY_RELU, PRELU, LOGISTIC, TANH,
HARD_SWISH, QUANTIZE, DEQUANTIZE): the generated C against the references of docs/references.md.

* Every act_*/quant_* fixture runs bit-exact (int8) or within 1e-5 (float32) against TFLite
  Micro, with inputs that cover all 256 int8 values, so every entry of every table is checked.
  RELU_N1_TO_1 has no TFLM kernel: LiteRT-ref is its verdict.
* Kernel paths no fixture reaches (uint8 DEQUANTIZE, int8 -> int8 requantise tables, QUANTIZE
  rounding ties, PRELU broadcast patterns) run on hand-built graphs against numpy models of
  TFLite's arithmetic.
* Unsupported variants are refused at generate time with exit 2 and one line.
* The kernels built for Cortex-M4 (SIMD clamp, FPU division) run on QEMU's mps2-an386.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, fixture_models, refused_by_generate

from stm32ai.ir import Graph, Op, Quant, Tensor
from stm32ai.passes.lower import registry
from stm32ai.passes.lower.activations import (
    mbqm,
    prelu_layout,
    prelu_reference_s8,
    round_half_away,
)
from stm32ai.passes.lower.quantize import requantize_values
from stm32ai.pipeline import compile_graph
from stm32ai.validate.host import run_compiled
from stm32ai.validate.reference import input_specs
from stm32ai.validate.run import validate_model

MODELS = fixture_models("act_*.tflite") + fixture_models("quant_*.tflite")
NO_TFLM = ("act_relu_n1_to_1",)  # TFLM has no RELU_N1_TO_1 kernel: LiteRT-ref decides


# ---------------------------------------------------------------------------------------------
# Fixtures against the references
# ---------------------------------------------------------------------------------------------

def _inputs(model: Path, seed: int) -> list[np.ndarray]:
    """Integer inputs: every raw value at least 4 times across the samples, in a seeded
    order. Float inputs: wide uniform values (saturating every activation) plus 0, -0 and
    values near the activations' break points."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in input_specs(model):
        size = int(np.prod(spec.shape))
        n = max(2, -(-4 * 256 // size))
        if spec.dtype.kind in "iu":
            lo = int(np.iinfo(spec.dtype).min)
            flat = (np.arange(n * size) % 256 + lo).astype(spec.dtype)
            rng.shuffle(flat)
        else:
            flat = rng.uniform(-10.0, 10.0, n * size).astype(np.float32)
            special = np.array([0.0, -0.0, -3.0, 3.0, 6.0, -9.0, 16.7, -1.0, 1.0, 1e-30], np.float32)
            flat[:special.size] = special
        out.append(flat.reshape((n, *spec.shape[1:])) if spec.shape[0] == 1
                   else flat.reshape((n, *spec.shape)))
    return out


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_fixture_matches_reference(model):
    res = validate_model(model, _inputs(model, 3), seed=3)
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict, [c.unavailable for c in res.comparisons]
    v = verdict[0]
    expected = "litert-ref" if model.stem.startswith(NO_TFLM) else "tflm"
    assert v.reference == expected, [(c.reference, c.unavailable) for c in res.comparisons]
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok, f"output {j} vs {v.reference}: max LSB {m.max_lsb}, max rel err {m.max_rel_err:.3g}"
        if m.max_lsb is not None:
            assert m.max_lsb == 0


def test_relu6_follows_tflm_not_litert():
    """TFLM's int8 RELU6 clamps in the input's quantisation without requantising; LiteRT
    requantises. TFLM is the verdict, and the two disagree on this converter output."""
    model = FIXTURES / "act_relu6_int8.tflite"
    res = validate_model(model, _inputs(model, 5), seed=5)
    by_ref = {c.reference: c for c in res.comparisons}
    assert all(by_ref["tflm"].ok)
    assert by_ref["litert-ref"].outputs[0].max_lsb > 0


# ---------------------------------------------------------------------------------------------
# Hand-built graphs: kernel paths against numpy models of TFLite's arithmetic
# ---------------------------------------------------------------------------------------------

def _q(scale: float, zp: int) -> Quant:
    return Quant(np.array([scale], np.float32), np.array([zp], np.int64))


def _one_op(op_type: str, ins: list[Tensor], out: Tensor, options: dict | None = None) -> Graph:
    tensors = [*ins, out]
    for i, t in enumerate(tensors):
        t.id = i
    g = Graph("t", tensors, [], [t.id for t in ins if not t.is_const], [out.id])
    g.ops.append(Op(op_type, [t.id for t in ins], [out.id], options or {}, index=0))
    return g


def _run(g: Graph, *inputs: np.ndarray) -> np.ndarray:
    c = compile_graph(g)
    return run_compiled(c, [list(inputs)])[0][0]


@pytest.mark.parametrize("src,dst,qi,qo", [
    ("int8", "int8", (0.05, -7), (0.0213, 11)),       # requantise, multiplier < 1
    ("int8", "int8", (0.011, 100), (0.05, -128)),     # multiplier < 1, saturating zero points
    ("int8", "int8", (0.07, 3), (0.02, 0)),           # multiplier > 1 (left shift)
    ("uint8", "int8", (0.031, 131), (0.029, -5)),
    ("int8", "uint8", (0.031, -3), (0.04, 120)),
    ("uint8", "int8", (0.5, 128), (0.5, 0)),          # the xor-0x80 case
])
def test_requantize_all_values(src, dst, qi, qo):
    shape = (1, 256)
    g = _one_op("QUANTIZE", [Tensor(0, "x", shape, src, _q(*qi))], Tensor(0, "y", shape, dst, _q(*qo)))
    x = np.arange(-128, 128) if src == "int8" else np.arange(256)
    y = _run(g, x.astype(src).reshape(shape))
    # numpy model of TFLite's Requantize (double-rounding multiplier)
    from stm32ai.passes.quant import quantize_multiplier
    m, s = quantize_multiplier(float(np.float32(qi[0])) / float(np.float32(qo[0])))
    lo, hi = (-128, 127) if dst == "int8" else (0, 255)
    want = [min(max(mbqm(int(v) - qi[1], m, s) + qo[1], lo), hi) for v in x]
    assert y.reshape(-1).tolist() == want
    assert requantize_values(_q(*qi), _q(*qo), src, dst) == want


@pytest.mark.parametrize("scale,zp", [(0.0157, -3), (0.1, 0), (1.0 / 255.0, -128), (0.37, 77)])
def test_quantize_float_rounding(scale, zp):
    """Exact ties k + 0.5, their float neighbours, huge values, NaN."""
    s = np.float32(scale)
    k = np.arange(-140, 140)
    ties = ((k + 0.5) * np.float64(s)).astype(np.float32)
    x = np.concatenate([ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf)),
                        np.random.default_rng(0).uniform(-200 * s, 200 * s, 300).astype(np.float32),
                        np.array([0.0, -0.0, 1e30, -1e30, np.inf, -np.inf, np.nan], np.float32)])
    shape = (1, x.size)
    g = _one_op("QUANTIZE", [Tensor(0, "x", shape, "float32")], Tensor(0, "y", shape, "int8", _q(scale, zp)))
    y = _run(g, x.reshape(shape)).reshape(-1).astype(np.int64)
    with np.errstate(invalid="ignore", over="ignore"):
        q = x / s  # float32 division, as TFLite
    want = []
    for v in q:
        if np.isnan(v):
            want.append(zp)
        elif abs(v) > 1e6:
            want.append(127 if v > 0 else -128)
        else:
            want.append(min(max(round_half_away(float(v)) + zp, -128), 127))
    assert y.tolist() == want


@pytest.mark.parametrize("src", ["int8", "uint8"])
def test_dequantize_all_values(src):
    shape = (2, 128)
    qi = _q(0.0123, -17 if src == "int8" else 140)
    g = _one_op("DEQUANTIZE", [Tensor(0, "x", shape, src, qi)], Tensor(0, "y", shape, "float32"))
    x = (np.arange(256) - (128 if src == "int8" else 0)).astype(src).reshape(shape)
    y = _run(g, x)
    want = (np.float32(qi.scale[0]) * (x.astype(np.int64) - int(qi.zero_point[0])).astype(np.float32))
    assert np.array_equal(y.view(np.uint32), want.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("shape,alpha_shape", [
    ((1, 4, 3, 5), (4, 1, 5)),       # broadcast in the middle: strides with a gap
    ((1, 4, 3, 5), (1, 3, 1)),
    ((2, 3, 5), (1, 1)),             # scalar-like alpha, batch 2
    ((1, 6, 7), (6, 1)),
    ((1, 2, 3, 4, 5), (1, 1, 1, 5)),  # rank 5 collapses to <= 4 dims
])
@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_prelu_broadcast(shape, alpha_shape, dtype):
    rng = np.random.default_rng(1)
    if dtype == "int8":
        alpha = rng.integers(-128, 128, alpha_shape).astype(np.int8)
        qi, qa, qo = _q(0.05, 9), _q(0.004, -3), _q(0.04, -20)
        g = _one_op("PRELU", [Tensor(0, "x", shape, "int8", qi), Tensor(0, "a", alpha_shape, "int8", qa, alpha)],
                    Tensor(0, "y", shape, "int8", qo))
        x = rng.integers(-128, 128, shape).astype(np.int8)
        assert np.array_equal(_run(g, x), prelu_reference_s8(x, alpha, qi, qa, qo))
    else:
        alpha = rng.uniform(-1, 1, alpha_shape).astype(np.float32)
        g = _one_op("PRELU", [Tensor(0, "x", shape, "float32"),
                              Tensor(0, "a", alpha_shape, "float32", None, alpha)],
                    Tensor(0, "y", shape, "float32"))
        x = rng.uniform(-2, 2, shape).astype(np.float32)
        y = _run(g, x)
        assert np.array_equal(y, np.where(x >= 0, x, x * alpha).astype(np.float32))


def test_prelu_layout_merges_dims():
    assert prelu_layout((1, 7, 5, 6), (1, 1, 6)) == ([1, 1, 35, 6], [0, 0, 0, 1])
    assert prelu_layout((1, 4, 3, 5), (4, 1, 5)) == ([1, 4, 3, 5], [0, 5, 0, 1])
    assert prelu_layout((1, 5, 3, 7), (5, 3, 7)) == ([1, 1, 1, 105], [0, 0, 0, 1])
    assert prelu_layout((2, 3, 4, 5, 6), (3, 1, 5, 1)) is None        # 5 alternating dims
    assert prelu_layout((1, 4, 3), (5, 3)) is None                       # not broadcastable


# ---------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------

def _check(g: Graph) -> str | None:
    op = g.ops[0]
    return registry()[op.type].check(op, g)


def test_checks_give_reasons():
    i8 = _q(0.1, 0)
    per_ch = Quant(np.array([0.1, 0.2], np.float32), np.array([0, 0], np.int64), 1)
    cases = [
        (_one_op("PRELU", [Tensor(0, "x", (1, 3), "int8", i8),
                           Tensor(0, "a", (2, 3), "int8", i8, np.ones((2, 3), np.int8))],
                 Tensor(0, "y", (2, 3), "int8", i8)), "only alpha may be broadcast"),
        (_one_op("PRELU", [Tensor(0, "x", (1, 2), "int8", i8),
                           Tensor(0, "a", (2,), "int8", per_ch, np.ones(2, np.int8))],
                 Tensor(0, "y", (1, 2), "int8", i8)), "per-channel"),
        (_one_op("LEAKY_RELU", [Tensor(0, "x", (1, 4), "int16", i8)], Tensor(0, "y", (1, 4), "int8", i8),
                 {"alpha": 0.1}), "int16 -> int8"),  # (int16 -> int16 is supported: test_op_types.py)
        (_one_op("RELU", [Tensor(0, "x", (1, 4), "int8")], Tensor(0, "y", (1, 4), "int8", i8)), "no quantisation"),
        (_one_op("TANH", [Tensor(0, "x", (1, 4), "int8", i8)], Tensor(0, "y", (1, 4), "int8", _q(0.01, 0))), "1/128"),
        (_one_op("QUANTIZE", [Tensor(0, "x", (1, 4), "float32")], Tensor(0, "y", (1, 4), "uint8", i8)),
         "float32 -> uint8"),
        (_one_op("QUANTIZE", [Tensor(0, "x", (1, 4), "int16", i8)], Tensor(0, "y", (1, 4), "uint8", i8)),
         "int16 -> uint8"),
        (_one_op("DEQUANTIZE", [Tensor(0, "x", (1, 4), "int32", i8)], Tensor(0, "y", (1, 4), "float32")),
         "int32 -> float32"),
        (_one_op("HARD_SWISH", [Tensor(0, "x", (1, 4), "int8", _q(0.5, 0))],
                 Tensor(0, "y", (1, 4), "int8", _q(0.001, 0))), "cannot represent"),
    ]
    for g, words in cases:
        reason = _check(g)
        assert reason is not None and words in reason, (g.ops[0].type, reason)


def _patched(src: Path, dst: Path, old: float, new: float) -> Path:
    data = src.read_bytes()
    pat = struct.pack("<f", old)
    assert data.count(pat) == 1
    dst.write_bytes(data.replace(pat, struct.pack("<f", new)))
    return dst


@pytest.mark.parametrize("case", ["int16", "logistic_scale", "hard_swish_scale"])
def test_unsupported_refused_at_generate(tmp_path, case):
    if case == "int16":
        # int16 LOGISTIC needs TFLite's output scale 2^-15
        model = _patched(FIXTURES / "act_logistic_16x8_int16.tflite", tmp_path / "m.tflite", 1 / 32768, 1 / 30000)
        words = ("LOGISTIC", "2^-15")
    elif case == "logistic_scale":
        model = _patched(FIXTURES / "act_logistic_int8.tflite", tmp_path / "m.tflite", 1 / 256, 1 / 200)
        words = ("LOGISTIC", "1/256")
    else:
        src = FIXTURES / "act_hard_swish_int8.tflite"
        from stm32ai.frontend.tflite_reader import load_tflite
        g = load_tflite(src)
        old = float(g.tensors[g.ops[0].outputs[0]].quant.scale[0])
        model = _patched(src, tmp_path / "m.tflite", old, 1e-5)
        words = ("HARD_SWISH", "cannot represent")
    refused_by_generate(model, tmp_path / "out", *words)


# ---------------------------------------------------------------------------------------------
# The Cortex-M4 build of the kernels, on QEMU mps2-an386 (semihosting)
# ---------------------------------------------------------------------------------------------

M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
RUNTIME = ROOT / "stm32ai" / "runtime"

_STARTUP = r"""
#include <stdint.h>
#include <string.h>
extern int main(void);
extern uint32_t __bss_start__, __bss_end__, __stack_top;
void Reset_Handler(void);
static void Fault_Handler(void) { for (;;) { } }
__attribute__((section(".vectors"), used)) const void *const vectors[16] = {
  &__stack_top, (void *)Reset_Handler, (void *)Fault_Handler, (void *)Fault_Handler,
  (void *)Fault_Handler, (void *)Fault_Handler, (void *)Fault_Handler, 0, 0, 0, 0,
  (void *)Fault_Handler, (void *)Fault_Handler, 0, (void *)Fault_Handler, (void *)Fault_Handler};
static int sh_call(int op, const void *arg) {
  register int r0 __asm__("r0") = op;
  register const void *r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}
void sh_puts(const char *s) { sh_call(0x04, s); }
void Reset_Handler(void) {
  *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: FPU on */
  __asm__ volatile("dsb\n isb");
  memset(&__bss_start__, 0, (size_t)((char *)&__bss_end__ - (char *)&__bss_start__));
  /* SYS_EXIT: on AArch32 r1 is the reason itself; ApplicationExit means status 0 and any
   * other reason a failure, which is how main's status reaches the test */
  sh_call(0x18, (const void *)(main() == 0 ? 0x20026u : 0x20023u));
  for (;;) { }
}
"""

_LINKER = """
MEMORY { RAM (rwx) : ORIGIN = 0x00000000, LENGTH = 4M }
ENTRY(Reset_Handler)
SECTIONS {
  .text : { KEEP(*(.vectors)) *(.text*) *(.rodata*) } > RAM
  .ARM.exidx : { *(.ARM.exidx*) } > RAM
  .data : { *(.data*) } > RAM
  .bss (NOLOAD) : { __bss_start__ = .; *(.bss*) *(COMMON) . = ALIGN(4); __bss_end__ = .; } > RAM
  end = .; _end = .;
  __stack_top = ORIGIN(RAM) + LENGTH(RAM);
}
"""


def _c_array(name: str, ctype: str, values: np.ndarray) -> str:
    vals = ", ".join(str(int(v)) for v in np.asarray(values).reshape(-1))
    return f"static {ctype} {name}[] = {{{vals}}};\n"


def test_kernels_on_cortex_m4(tmp_path):
    gcc = shutil.which("arm-none-eabi-gcc")
    qemu = shutil.which("qemu-system-arm")
    if gcc is None or qemu is None:
        pytest.skip("arm-none-eabi-gcc or qemu-system-arm not installed")
    rng = np.random.default_rng(11)
    n = 1003  # odd: exercises the 4-lane loops' tails
    x8 = rng.integers(-128, 128, n).astype(np.int8)
    xf = rng.uniform(-12, 12, n).astype(np.float32)
    xf[:6] = [0.0, -0.0, 16.7, -9.5, 3.0, -3.0]
    table = rng.integers(0, 256, 256).astype(np.uint8)
    clamps = [(-128, 127), (-5, 90), (0, 0), (-128, -100), (37, 127)]
    qscale = np.float32(0.0371)
    ties = ((np.arange(-60, 60) + 0.5) * np.float64(qscale)).astype(np.float32)
    xq = np.concatenate([ties, xf])

    src = [textwrap.dedent("""
        #include <stdint.h>
        #include <stdio.h>
        #include "ai_kernels_activations.h"
        #include "ai_kernels_quantize.h"
        void sh_puts(const char *s);
        static void dump(const char *tag, const void *p, int n) {
          static char line[80];
          const uint8_t *b = (const uint8_t *)p;
          for (int i = 0; i < n; i += 32) {
            int k = snprintf(line, sizeof line, "%s ", tag);
            for (int j = i; j < n && j < i + 32; ++j) k += snprintf(line + k, sizeof line - (size_t)k, "%02x", b[j]);
            line[k++] = '\\n'; line[k] = 0;
            sh_puts(line);
          }
        }
        """)]
    src.append(_c_array("x8", "const int8_t", x8))
    src.append(f"static const uint32_t xf_bits[] = {{{', '.join(str(v) for v in xf.view(np.uint32))}}};\n")
    src.append(f"static const uint32_t xq_bits[] = {{{', '.join(str(v) for v in xq.view(np.uint32))}}};\n")
    src.append(_c_array("table", "const uint8_t", table))
    body = [f"int8_t o8[{n}]; float of[{n}]; int8_t oq[{xq.size}];",
            "const float *xf = (const float *)xf_bits; const float *xq = (const float *)xq_bits;",
            f"ai_lut8_params lp = {{{n}}}; ai_lut8(&lp, (const uint8_t *)x8, table, (uint8_t *)o8);",
            f"dump(\"lut8\", o8, {n});"]
    for k, (lo, hi) in enumerate(clamps):
        body.append(f"{{ ai_clamp_s8_params cp = {{{n}, {lo}, {hi}}}; ai_clamp_s8(&cp, x8, o8); "
                    f"dump(\"clamp{k}\", o8, {n}); }}")
    # in place, unaligned start
    body.append(f"{{ static int8_t buf[{n + 1}]; for (int i = 0; i < {n}; ++i) buf[i + 1] = x8[i]; "
                f"ai_clamp_s8_params cp = {{{n}, -7, 55}}; ai_clamp_s8(&cp, buf + 1, buf + 1); "
                f"dump(\"clampip\", buf + 1, {n}); }}")
    for name in ("logistic", "tanh", "hard_swish"):
        body.append(f"{{ ai_{name}_f32_params fp = {{{n}}}; ai_{name}_f32(&fp, xf, of); "
                    f"dump(\"{name}\", of, {4 * n}); }}")
    body.append(f"{{ ai_quantize_f32_s8_params qp = {{{xq.size}, {float(qscale).hex()}f, -9}}; "
                f"ai_quantize_f32_s8(&qp, xq, oq); dump(\"quant\", oq, {xq.size}); }}")
    body.append(f"{{ ai_dequantize_s8_f32_params dp = {{{n}, {float(qscale).hex()}f, 5}}; "
                f"ai_dequantize_s8_f32(&dp, x8, of); dump(\"dequant\", of, {4 * n}); }}")
    # PRELU: alpha per channel (13), 7 x 11 pixels
    qi, qa, qo = _q(0.043, -11), _q(0.0061, 4), _q(0.037, 21)
    g = _one_op("PRELU", [Tensor(0, "x", (1, 7, 11, 13), "int8", qi),
                          Tensor(0, "a", (1, 1, 13), "int8", qa, rng.integers(-128, 128, (1, 1, 13)).astype(np.int8))],
                Tensor(0, "y", (1, 7, 11, 13), "int8", qo))
    palpha = g.tensors[1].data
    px = x8[:7 * 11 * 13].reshape(1, 7, 11, 13)
    registry()["PRELU"].lower(g.ops[0], g)
    pa = g.ops[0].attrs
    src.append(_c_array("palpha", "const int8_t", palpha))
    src.append(_c_array("ppos", "const int8_t", g.tensors[g.ops[0].inputs[2]].data.view(np.int8)))
    fields = ", ".join(f".{k} = {{{', '.join(map(str, v))}}}" if isinstance(v, list) else f".{k} = {v}"
                       for k, v in pa.items())
    body.append(f"{{ static const ai_prelu_s8_params pp = {{{fields}}}; ai_prelu_s8(&pp, x8, palpha, ppos, o8); "
                f"dump(\"prelu\", o8, {px.size}); }}")
    src.append("int main(void) {\n" + "\n".join("  " + b for b in body) + "\n  return 0;\n}\n")
    (tmp_path / "main.c").write_text("".join(src))
    (tmp_path / "startup.c").write_text(_STARTUP)
    (tmp_path / "link.ld").write_text(_LINKER)
    elf = tmp_path / "t.elf"
    cmd = [gcc, *M4, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wdouble-promotion",
           "-ffunction-sections", "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs",
           f"-I{RUNTIME / 'include'}", str(tmp_path / "main.c"), str(tmp_path / "startup.c"),
           str(RUNTIME / "src" / "ai_activations.c"), str(RUNTIME / "src" / "ai_quantize.c"),
           "-T", str(tmp_path / "link.ld"), "-lm", "-o", str(elf)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([qemu, "-M", "mps2-an386", "-nographic", "-monitor", "none", "-serial", "none",
                        "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    dumps: dict[str, bytearray] = {}
    # semihosting SYS_WRITE0 goes to QEMU's stderr (-nographic may add control sequences)
    for tag, hexes in re.findall(r"([a-z_0-9]+) ([0-9a-f]+)$", r.stdout + "\n" + r.stderr, re.MULTILINE):
        dumps.setdefault(tag, bytearray()).extend(bytes.fromhex(hexes))

    def i8(tag: str) -> np.ndarray:
        return np.frombuffer(bytes(dumps[tag]), np.int8)

    def f32(tag: str) -> np.ndarray:
        return np.frombuffer(bytes(dumps[tag]), np.float32)

    assert np.array_equal(i8("lut8").view(np.uint8), table[x8.view(np.uint8)])
    for k, (lo, hi) in enumerate(clamps):
        assert np.array_equal(i8(f"clamp{k}"), np.clip(x8, lo, hi)), (lo, hi)
    assert np.array_equal(i8("clampip"), np.clip(x8, -7, 55))
    x = xf.astype(np.float64)
    ref = {
        "logistic": np.where(x > 16.619047164916992, 1.0, np.where(x < -9.0, np.exp(x), 1 / (1 + np.exp(-x)))),
        "tanh": np.tanh(x),
        "hard_swish": x * np.clip(x + 3, 0, 6) / 6,
    }
    for name, want in ref.items():
        got = f32(name).astype(np.float64)
        assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want)), name
    assert np.array_equal(i8("prelu").reshape(px.shape), prelu_reference_s8(px, palpha, qi, qa, qo))
    q = xq / qscale
    want_q = [min(max(round_half_away(float(v)) - 9, -128), 127) for v in q]
    assert i8("quant").tolist() == want_q
    want_dq = qscale * (x8.astype(np.int64) - 5).astype(np.float32)
    assert np.array_equal(f32("dequant").view(np.uint32), want_dq.astype(np.float32).view(np.uint32))
