"""SVDF: the generated C against TFLite Micro (LiteRT-ref where TFLM crashes).

* Every svdf_* fixture (flatbuffers written by tests/fixtures/make_fixtures_svdf.py with
  TFLite's SVDF layout and quantisation: int8 with int16 state and time weights, float32;
  batch 2, rank 1..3, stacked layers, no bias) matches bit for bit from the initial state.
* Over a sequence of runs the state carries like TFLM's variable tensor across Invoke (more
  steps than the memory, so the shift wraps every column out): every output bit-exact, then
  ai_reset restarts the sequence, and a second instance with its own pool keeps its own state.
* The same sequence through the SMLAD paths on an emulated Cortex-M4 (slow).
* Unsupported variants are refused with a reason; the kernels compile warning-free for the
  host and the M4 with no fused multiply-add.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, fixture_models
from stateful import reference_sequence, run_sequence

from stm32ai.emitter import emit_c
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.passes.lower import registry
from stm32ai.pipeline import compile_model
from stm32ai.validate.reference import input_specs
from stm32ai.validate.run import validate_model

RUNTIME = Path(__file__).resolve().parents[1] / "stm32ai" / "runtime"
SOURCE = RUNTIME / "src" / "ai_svdf.c"
WARN = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wdouble-promotion", "-Wconversion"]
M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]

MODELS = fixture_models("svdf_*.tflite")
# TFLM's float SVDF dereferences a missing bias (SIGSEGV): LiteRT-ref decides for this one
TFLM_CRASHES = {"svdf_nobias_float32"}
STEPS = 14  # more than every fixture's memory (at most 10)


def _inputs(model: Path, n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    (spec,) = input_specs(model)
    if spec.dtype.kind in "iu":
        return [rng.integers(-128, 128, (n, *spec.shape)).astype(spec.dtype)]
    return [rng.uniform(-2.0, 2.0, (n, *spec.shape)).astype(np.float32)]


def test_fixture_set():
    assert {p.stem for p in MODELS} >= {"svdf_basic_int8", "svdf_basic_float32", "svdf_stacked_int8",
                                        "svdf_batch2_int8", "svdf_nobias_float32"}
    for p in MODELS:
        c = compile_model(p)
        ops = [op for op in c.graph.ops if op.kernel in ("svdf_s8", "svdf_f32")]
        assert ops and len(ops) == sum(1 for op in load_tflite(p).ops if op.type == "SVDF")


# validate's own flow (both references, the verdict) on one model per kind; the sequence test
# below checks every fixture against the reference from the first step on
@pytest.mark.parametrize("model", [FIXTURES / f"{n}.tflite" for n in
                                   ("svdf_stacked_int8", "svdf_nobias_float32")],
                         ids=lambda p: p.stem)
def test_fixture_exact(model):
    res = validate_model(model, _inputs(model, 4, 5), seed=5)
    verdict = [c for c in res.comparisons if c.verdict]
    want = "litert-ref" if model.stem in TFLM_CRASHES else "tflm"
    assert verdict and verdict[0].reference == want, [(c.reference, c.unavailable) for c in res.comparisons]
    for m, ok in zip(verdict[0].outputs, verdict[0].ok, strict=True):
        # TFLM: bit for bit; LiteRT-ref's float SVDF sums in another order (float bar: 1e-5)
        assert ok and (m.max_abs_err == 0.0 or (want == "litert-ref" and m.max_rel_err <= 1e-5))


# ---------------------------------------------------------------------------------------------
# State across runs
# ---------------------------------------------------------------------------------------------

def _sequence(model: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """STEPS inputs and the reference's outputs for them in a row, then reset + xs[0]."""
    spec = input_specs(model)[0]
    xs = [np.ascontiguousarray(v).reshape(spec.shape) for v in _inputs(model, STEPS, 17)[0]]
    return xs, reference_sequence(model, xs, litert=model.stem in TFLM_CRASHES)


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_state_persists_across_runs(model, tmp_path):
    xs, want = _sequence(model)
    c = compile_model(model)
    got = run_sequence(c, xs, tmp_path)
    out_t = c.graph.tensors[c.graph.outputs[0]]
    assert len(got) == STEPS + 1 + 3
    # the state matters: the last step's output differs from a fresh run of the same input
    assert not np.array_equal(want[STEPS - 1], want[STEPS]) or not np.array_equal(xs[STEPS - 1], xs[0])
    # TFLM: bit for bit; LiteRT-ref (float, other summation order): within 1e-5
    tol = {"rtol": 1e-5, "atol": 1e-6} if model.stem in TFLM_CRASHES else {"rtol": 0, "atol": 0}
    for k in range(STEPS):
        np.testing.assert_allclose(got[k], want[k].reshape(out_t.shape), err_msg=f"step {k}", **tol)
    np.testing.assert_allclose(got[STEPS], want[STEPS].reshape(out_t.shape), **tol)  # after ai_reset
    # after the reset A has run xs[0]; B (fresh pool) runs xs[0], A xs[1], B xs[1]
    np.testing.assert_allclose(got[STEPS + 1], want[0].reshape(out_t.shape), **tol)
    np.testing.assert_allclose(got[STEPS + 2], want[1].reshape(out_t.shape), **tol)
    np.testing.assert_allclose(got[STEPS + 3], want[1].reshape(out_t.shape), **tol)


def test_state_is_planned_for_the_whole_run_and_zeroed():
    c = compile_model(FIXTURES / "svdf_stacked_int8.tflite")
    g, plan = c.graph, c.plan
    states = [t.id for t in g.tensors if t.variable]
    assert len(states) == 2 and all(g.tensors[t].dtype == "int16" for t in states)
    last = len(plan.order) - 1
    for t in states:
        b = plan.buffers[plan.tensor_buffer[t]]
        assert (b.first, b.last) == (0, last) and b.tensors == [t]
    assert [n["attrs"]["fill"] for n in c.doc["nodes"] if n.get("attrs", {}).get("variable")] == [0, 0]


def test_effective_scales_are_tflm_float32_products():
    from stm32ai.passes.lower.svdf import svdf_effective_scales

    g = load_tflite(FIXTURES / "svdf_basic_int8.tflite")
    op = g.ops[0]
    s = [float(g.tensors[op.inputs[i]].quant.scale[0]) for i in (0, 1, 2, 4)]
    s_y = float(g.tensors[op.outputs[0]].quant.scale[0])
    e1, e2 = svdf_effective_scales(s[0], s[1], s[2], s[3], s_y)
    f = np.float32
    assert e1 == float(f(f(s[0]) * f(s[1])) / f(s[3]))
    assert e2 == float(f(f(s[3]) * f(s[2])) / f(s_y))


# ---------------------------------------------------------------------------------------------
# Cortex-M4 (SMLAD paths) over a sequence
# ---------------------------------------------------------------------------------------------

M4_MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "ai_runtime.h"
#include "network.h"
static const signed char xs[] = { XS };
int main(void) {
  ai_handle h;
  if (ai_create(&network_info, NULL, &h) != AI_OK) return 2;
  ai_tensor *in = ai_get_input(h, 0), *out = ai_get_output(h, 0);
  const unsigned n = (unsigned)(sizeof xs / in->size_bytes);
  for (unsigned k = 0; k <= n; ++k) {
    if (k == n && ai_reset(h) != AI_OK) return 3;
    memcpy(in->data, xs + (k == n ? 0 : k) * in->size_bytes, in->size_bytes);
    if (ai_run(h) != AI_OK) return 4;
    for (unsigned i = 0; i < out->size_bytes; ++i) printf("%d ", ((const signed char *)out->data)[i]);
    printf("\n");
  }
  return 0;
}
"""


@pytest.mark.slow
def test_int8_sequence_on_cortex_m4(tmp_path):
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    from test_lower_conv import MPS2_LD, STARTUP_C

    model = FIXTURES / "svdf_stacked_int8.tflite"
    xs, want = _sequence(model)
    c = compile_model(model)
    emit_c(c.doc, c.params, "network", tmp_path / "c")
    (tmp_path / "main.c").write_text(M4_MAIN.replace("XS", ", ".join(str(int(v)) for x in xs for v in x.ravel())))
    (tmp_path / "startup.c").write_text(STARTUP_C)
    (tmp_path / "mps2.ld").write_text(MPS2_LD)
    d = tmp_path / "c"
    srcs = [str(d / "network.c"), str(d / "network_data.c"), *map(str, sorted((d / "runtime" / "src").glob("*.c")))]
    r = subprocess.run(["arm-none-eabi-gcc", "-std=gnu11", "-O2", *M4, f"-I{d}", f"-I{d / 'runtime' / 'include'}",
                        "--specs=rdimon.specs", "-T", "mps2.ld", "main.c", "startup.c", *srcs, "-lm", "-o", "fw.elf"],
                       cwd=tmp_path, capture_output=True, text=True)
    if r.returncode != 0 and "rdimon" in r.stderr:
        pytest.skip("newlib's rdimon (semihosting) library is not installed")
    assert r.returncode == 0, r.stderr
    out = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-monitor", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", "fw.elf"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    got = [np.array(line.split(), dtype=int) for line in out.replace("\r", "").strip().splitlines()]
    assert len(got) == STEPS + 1
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_array_equal(a, b.reshape(-1).astype(int), err_msg=f"step {k}")


# ---------------------------------------------------------------------------------------------
# Refusals, C hygiene
# ---------------------------------------------------------------------------------------------

def _check(path: Path, edit) -> str | None:
    g = load_tflite(path)
    edit(g, g.ops[0])
    return registry()["SVDF"].check(g.ops[0], g)


def test_refusals_name_the_problem():
    q8, f32 = FIXTURES / "svdf_basic_int8.tflite", FIXTURES / "svdf_basic_float32.tflite"
    assert _check(q8, lambda g, op: None) is None and _check(f32, lambda g, op: None) is None

    def int8_state(g, op):
        g.tensors[op.inputs[4]].dtype = "int8"
    assert "int16" in _check(q8, int8_state)

    def state_zp(g, op):
        g.tensors[op.inputs[4]].quant.zero_point[:] = 3
    assert "zero point" in _check(q8, state_zp)

    def not_variable(g, op):
        g.tensors[op.inputs[4]].variable = False
    assert "variable" in _check(q8, not_variable)

    def bad_rank(g, op):
        op.options["rank"] = 4
    assert "rank" in _check(q8, bad_rank)

    def hybrid(g, op):
        w = g.tensors[op.inputs[1]]
        w.dtype, w.data = "int8", np.zeros(w.shape, np.int8)
    assert "hybrid" in _check(f32, hybrid)

    def tanh(g, op):
        op.options["fused_activation_function"] = "TANH"
    assert "TANH" in _check(f32, tanh)


def test_kernel_compiles_clean_and_without_fma(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    subprocess.run([cc, *WARN, f"-I{RUNTIME / 'include'}", "-c", str(SOURCE), "-o", str(tmp_path / "h.o")],
                   check=True)
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    obj = tmp_path / "m4.o"
    subprocess.run(["arm-none-eabi-gcc", *M4, "-std=gnu11", *WARN[1:], f"-I{RUNTIME / 'include'}", "-c",
                    str(SOURCE), "-o", str(obj)], check=True)
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    assert "smlad" in dis
    assert not any(i in dis for i in ("vfma", "vfms", "vmla", "vmls", "vfnm"))


@pytest.mark.slow
def test_stacked_int8_on_the_emulated_board(tmp_path):
    """The demo firmware on qemu-netduinoplus2 (Cortex-M4): result: match against the
    TFLM output embedded at generate time."""
    if not all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc/make/qemu-system-arm not installed")
    from stm32ai.boards import load_board
    from stm32ai.cli import main
    from stm32ai.project.demo_output import parse_demo_output
    from stm32ai.project.run import build_project, run_qemu

    out = tmp_path / "proj"
    board = load_board("qemu-netduinoplus2")
    assert main(["generate", str(FIXTURES / "svdf_stacked_int8.tflite"), "--board", board.id, "-o", str(out)]) == 0
    code, text = run_qemu(build_project(out), board, timeout_s=300)
    demo = parse_demo_output(text)
    assert code == 0 and demo.result == "match" and demo.fields["max_err"] == "0", text
    assert demo.unit == "instructions" and demo.count is not None and demo.count > 768 // 2


@pytest.mark.parametrize("model", ["svdf_stacked_int8", "lstm_stacked_int8"])
def test_state_is_outside_the_activation_pool(model):
    """Persistent state lives in the instance's state area only: the pool holds no state bytes
    (it fits in the bytes of the non-variable activations), and the state area holds each
    variable tensor of the file (read with the `tflite` package, not our frontend) in an
    8-aligned slot."""
    import tflite

    path = FIXTURES / f"{model}.tflite"
    m = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    sub = m.Subgraphs(0)
    sizes = {tflite.TensorType.INT8: 1, tflite.TensorType.INT16: 2, tflite.TensorType.FLOAT32: 4,
             tflite.TensorType.INT32: 4}
    variable, activation = [], 0  # bytes of the state tensors; of the other non-constant tensors
    for i in range(sub.TensorsLength()):
        t = sub.Tensors(i)
        nbytes = int(np.prod(t.ShapeAsNumpy())) * sizes[t.Type()]
        if t.IsVariable():
            variable.append(nbytes)
        elif m.Buffers(t.Buffer()).DataLength() == 0:
            activation += nbytes
    c = compile_model(path)
    assert variable, "fixture without state"
    state = [st for st in c.doc["stm32ai"]["storage"] if st["pool"] == "state"]
    assert sum(st["size"] for st in state) >= sum(variable)
    assert max(st["offset"] + st["size"] for st in state) <= sum((n + 7) // 8 * 8 for n in variable)
    scratch = sum(op.scratch for op in c.graph.ops)
    assert c.plan.pool_size <= activation + scratch + 8 * len(c.plan.buffers)
