"""Firmware project generation: board file + emitted C model -> a self-contained project.

    generate_project(out_dir, board=..., name=..., c_dir=..., test_inputs=..., ...)

renders the cookiecutter template in project_templates/ (Makefile, CMake, STM32CubeIDE files,
startup, clock/UART bring-up, syscalls, cycle counter, README), the linker script from
linker_scripts/, the demo from demo/ with the embedded test vectors, and copies the model's C
files into Model/. Everything is written to a temporary directory next to `out_dir` and moved
into place at the end: a failure never leaves a half-written project.

The placement of the model's two pools is decided by `plan_placement()`: the first region of
each ordered list that has room (after the code, data, stack and heap the board reserves there)
is used; when none has room the model is refused with the numbers (Stm32aiError, exit 2).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from stm32ai.boards import ARMV6M_CORES, RESET_CLOCK, Board
from stm32ai.errors import Stm32aiError
from stm32ai.ir import DTYPE_CODES
from stm32ai.outputs import check_output_dir, mark_generated, publish_dir
from stm32ai.placement import (
    CODE_RESERVE,
    DATA_RESERVE,
    ActivationsDoNotFit,
    Placement,
    activation_budgets,
    plan_placement,
    round8,
)
from stm32ai.project.clockregs import clock_registers
from stm32ai.resources import data_dir
from stm32ai.sanitize import configure, untrusted

__all__ = ["ModelSpec", "Placement", "generate_multi_project", "generate_project", "plan_placement",
           "write_model_table",
           "activation_budgets", "ActivationsDoNotFit",
           "CODE_RESERVE", "DATA_RESERVE", "FIRMWARE_TARGET", "MANIFEST"]

FIRMWARE_TARGET = "firmware"
MANIFEST = "stm32ai_project.json"

SMALL_RAM = 64 * 1024


def _small_ram_defines(board: Board, n_models: int, max_io: int) -> list[str]:
    """On a board whose data region is small (qemu-microbit 16 KiB, NUCLEO-C031C6 12 KiB,
    NUCLEO-G071RB 36 KiB) the runtime's static instance table (~1.2 KiB per instance with the
    default 8 inputs and 8 outputs) holds just what the demo needs: one instance per model, as
    many I/O tensors as its models have (ai_create refuses a model with more). Elsewhere the
    defaults stay, raised only for a model with more than 8 inputs or outputs."""
    if board.region(board.data_region).length > SMALL_RAM:
        return [f"AI_MAX_IO={max_io}"] if max_io > 8 else []
    return [f"AI_MAX_INSTANCES={n_models}", f"AI_MAX_IO={max(1, max_io)}"]


# ---------------------------------------------------------------------------------------------
# Template contexts
# ---------------------------------------------------------------------------------------------
def _hex(v: int) -> str:
    return f"0x{v:08X}u"


def _c_str(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _clock_desc(board: Board) -> str:
    ck = board.clock
    if ck.source == "fixed":
        em = board.emulation
        return f"{em.qemu_machine}: no RCC model, reset clock kept" if em else "fixed clock"
    osc = {"hse": f"HSE {ck.oscillator_hz / 1e6:g} MHz{' bypass' if ck.hse_bypass else ''}",
           "hsi": f"HSI {ck.oscillator_hz / 1e6:g} MHz", "msi": f"MSI {ck.oscillator_hz / 1e6:g} MHz"}
    p = ck.pll
    if p is None:    # STM32C0: HSISYS = HSI48 / HSIDIV, no PLL
        return f"HSI48 / {ck.oscillator_hz // ck.sysclk_hz}, no PLL"
    fac = f"M={p.m} N={p.n}" + "".join(f" {k.upper()}={getattr(p, k)}" for k in "pqr" if getattr(p, k))
    return f"{osc[ck.source]}, PLL {fac}"


def _board_lines(board: Board) -> list[str]:
    ck, con = board.clock, board.console
    fixed = ck.source == "fixed"
    lines = [
        f'#define BOARD_ID "{_c_str(board.id)}"',
        f'#define BOARD_NAME "{_c_str(board.name)}"',
        f'#define BOARD_MCU "{_c_str(board.mcu)}"',
        f"#define BOARD_IRQ_COUNT {board.irq_count}",
        f"#define BOARD_HAS_FPU {0 if board.fpu == 'none' else 1} /* {board.fpu} */",
        f"#define BOARD_CACHE {1 if board.cache else 0} /* Cortex-M7 L1 I/D caches enabled by SystemInit */",
        f"#define BOARD_ICACHE {1 if board.family in ('stm32u5', 'stm32h5') else 0} /* STM32U5/H5 ICACHE */",
        "",
        "/* Clocks: targets derived from the board file's factors (stm32ai/boards.py). */",
        f"#define BOARD_CLOCK_FIXED {1 if fixed else 0}",
        f'#define BOARD_CLOCK_NOTE "{_c_str(_clock_desc(board))}"',
        f'#define BOARD_RESET_SOURCE "{RESET_CLOCK[board.family][0] if not fixed else "fixed"}"',
        f"#define BOARD_RESET_HZ {ck.reset_hz}u",
        f"#define BOARD_CPU_HZ {ck.cpu_hz}u",
        f"#define BOARD_HCLK_HZ {ck.hclk_hz}u",
        f"#define BOARD_PCLK1_HZ {ck.pclk1_hz}u",
        f"#define BOARD_PCLK2_HZ {ck.pclk2_hz}u",
        "",
        f"#define BOARD_EMULATED {1 if board.is_emulated else 0}",
        f"#define BOARD_SEMIHOSTING_EXIT {1 if board.is_emulated else 0} /* QEMU: exit through semihosting */",
        f"#define BOARD_CYCLE_COUNTER_DWT {1 if board.cycle_counter == 'dwt' else 0}",
        "/* Emulated boards run under QEMU -icount shift=N: one instruction = 2^N ns of virtual time,",
        " * so the demo converts counter ticks to instructions (QEMU has no cycle model). */",
        f"#define BOARD_ICOUNT_SHIFT {board.emulation.icount_shift if board.emulation else 0}",
        "",
        f"/* Console: {con.instance}, {con.vcp} */",
        f"#define CONSOLE_DRIVER_CMSDK {1 if con.driver == 'cmsdk_uart' else 0}",
        f"#define CONSOLE_REGS_ISR_TDR {1 if con.regs == 'isr_tdr' else 0}",
        f"#define CONSOLE_LPUART {1 if con.kind == 'lpuart' else 0}",
        f"#define CONSOLE_BASE {_hex(con.base)}",
        f"#define CONSOLE_BAUD {con.baud}u",
        f"#define CONSOLE_CLOCK_HZ_EXPR (g_clocks.{ {'sysclk': 'cpu', 'hclk': 'hclk'}.get(con.clock, con.clock) }_hz)",
        f"#define CONSOLE_DIVISOR_AT_TARGET {board.uart_divisor}u /* BRR/BAUDDIV at the target clock */",
    ]
    if con.enable is not None:
        lines += [f"#define CONSOLE_EN_REG {_hex(con.enable.reg)}",
                  f"#define CONSOLE_EN_MASK {_hex(con.enable.mask)}"]
    for tag, pin in (("TX", con.tx), ("RX", con.rx)):
        if pin is not None:
            lines += [f"#define CONSOLE_{tag}_PORT {pin.port_index}u /* P{pin.port}{pin.pin} */",
                      f"#define CONSOLE_{tag}_PIN {pin.pin}u",
                      f"#define CONSOLE_{tag}_AF {pin.af}u"]
    if board.gpio is not None:
        lines += [f"#define BOARD_GPIO_BASE {_hex(board.gpio.base)} /* GPIOA */",
                  f"#define BOARD_GPIO_STRIDE {_hex(board.gpio.stride)}",
                  f"#define BOARD_GPIO_EN_REG {_hex(board.gpio.enable_reg)} /* bit n enables port n */"]
    return lines + _armv6m_board_lines(board)


def _armv6m_board_lines(board: Board) -> list[str]:
    """What the Armv6-M boards add to board.h: the core's missing system registers (no VTOR on a
    Cortex-M0, no CFSR/HFSR/BFAR on Armv6-M) and the nRF51 UART (qemu-microbit)."""
    con = board.console
    lines = [
        "",
        "/* Armv6-M (Cortex-M0/M0+): no CFSR/HFSR/BFAR (ARMv6-M ARM B3.2); VTOR only on the M0+ */",
        f"#define BOARD_ARMV6M {1 if board.core in ARMV6M_CORES else 0}",
        f"#define BOARD_HAS_VTOR {0 if board.core == 'cortex-m0' else 1}",
        f"#define CONSOLE_DRIVER_NRF51 {1 if con.driver == 'nrf51_uart' else 0}",
    ]
    if con.driver == "nrf51_uart":
        lines += [f"#define CONSOLE_NRF51_BAUDRATE {_hex(board.uart_divisor)} /* BAUDRATE for {con.baud} baud */",
                  f"#define CONSOLE_NRF51_PSELTXD {con.psel_txd if con.psel_txd is not None else 0xFFFFFFFF}u",
                  f"#define CONSOLE_NRF51_PSELRXD {con.psel_rxd if con.psel_rxd is not None else 0xFFFFFFFF}u"]
    return lines


def _array_entry(arr: np.ndarray, sym: str, label: str) -> dict[str, Any]:
    a = np.asarray(arr)
    key = a.dtype.name
    if key not in DTYPE_CODES:
        raise Stm32aiError(f"test vector {label} has dtype {key}, which the demo cannot embed "
                           f"(one of {', '.join(DTYPE_CODES)})")
    code, bits = DTYPE_CODES[key]
    raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
    body_bytes = raw if raw else b"\x00"
    hexes = [f"0x{b:02x}" for b in body_bytes]
    body = ",\n".join("  " + ", ".join(hexes[i:i + 16]) for i in range(0, len(hexes), 16))
    return {"sym": sym, "label": label, "dtype": key, "shape": list(a.shape), "size": len(body_bytes),
            "count": int(a.size), "code": code, "bits": bits, "body": body}


def _render_dir_template(env: jinja2.Environment, name: str, ctx: dict[str, Any]) -> str:
    return env.get_template(name).render(**ctx)


def _jinja(path: Path) -> jinja2.Environment:
    return configure(jinja2.Environment(loader=jinja2.FileSystemLoader(str(path)),
                                        undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                        autoescape=False))


def _check_c_dir(c_dir: Path, name: str) -> None:
    if not c_dir.is_dir():
        raise Stm32aiError(f"model C directory '{c_dir}' not found")
    missing = [f for f in (f"{name}.c", f"{name}.h", f"{name}_data.c", f"{name}_data.h")
               if not (c_dir / f).is_file()]
    if missing:
        raise Stm32aiError(f"model C directory '{c_dir}' lacks {', '.join(missing)} "
                           f"(was it emitted with --name {name}?)")
    if not (c_dir / "runtime" / "include" / "ai_runtime.h").is_file():
        raise Stm32aiError(f"model C directory '{c_dir}' lacks the runtime (runtime/include/ai_runtime.h)")


def _copy_c(c_dir: Path, dest: Path) -> None:
    for f in sorted(c_dir.rglob("*")):
        if f.is_file() and f.suffix in (".c", ".h"):
            t = dest / f.relative_to(c_dir)
            t.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, t)


def _render_cookiecutter(template: Path, out: Path, slug: str, ctx: dict[str, Any], work: Path) -> Path:
    from cookiecutter.main import cookiecutter

    # A private config keeps cookiecutter's replay files out of the user's home directory.
    cfg = work / "cookiecutter.yaml"
    cfg.write_text(f"cookiecutters_dir: {json.dumps(str(work / 'cc'))}\n"
                   f"replay_dir: {json.dumps(str(work / 'replay'))}\n")
    try:
        result = cookiecutter(str(template), no_input=True, output_dir=str(out), config_file=str(cfg),
                              extra_context={"project_slug": slug, "_ctx": ctx})
    except Exception as e:  # a template bug: report it as one line
        raise Stm32aiError(f"project template rendering failed: {type(e).__name__}: {e}") from None
    return Path(result)


def generate_project(out_dir: Path, *, board: Board, name: str, c_dir: Path,
                     test_inputs: list[np.ndarray], expected_outputs: list[np.ndarray],
                     activations_pool: list[str] | None, weights_pool: list[str] | None,
                     activations_bytes: int, weights_bytes: int, tool_version: str,
                     force: bool = False, reference: str = "the reference",
                     model_signature: int = 0, validation: bool = False, model_file: str = "",
                     profile: bool = False, embed_expected: bool = True,
                     activation_split: list[tuple[str, int]] | None = None,
                     io_in_pool: tuple[bool, bool] = (False, False)) -> Path:
    """Write a complete firmware project for `board` running model `name` into `out_dir`.

    `c_dir` is the emitter's C-only output (`<name>.c/.h`, `<name>_data.c/.h`, `runtime/`).
    `test_inputs`/`expected_outputs` become the demo's embedded test vector (one sample, in the
    model's input/output order). With `embed_expected=False` the expected outputs only give the
    outputs' sizes: nothing is embedded and the demo reports `result: no-reference` (generated
    without a reference: --no-test-vector, or no reference runs the model). `model_signature`
    (stm32ai.graphjson.model_signature) is what the firmware reports to `validate --mode target`;
    `validation=True` makes an emulated board's demo serve the validation protocol after its
    self-test instead of exiting (hardware boards always serve it). `model_file` (the .tflite file
    name, untrusted) is only ever shown through the sanitiser's filters. `profile=True` builds with
    -DAI_PROFILE: the demo prints per-layer counts and the validation protocol serves them.
    `activation_split` is the model's (region, bytes) per activation pool when its plan is split
    across memory regions (the linker script then gets one section per pool). Returns `out_dir`.
    """
    out_dir = Path(out_dir)
    c_dir = Path(c_dir)
    if not name.isidentifier() or not name.isascii():
        raise Stm32aiError(f"model name '{name}' is not a C identifier")
    check_output_dir(out_dir, force, inputs=[c_dir])  # --force replaces only stm32ai's own outputs
    parent = out_dir.resolve().parent
    _check_c_dir(c_dir, name)
    if not test_inputs or not expected_outputs:
        raise Stm32aiError("the demo needs at least one test input and one expected output")

    ins = [_array_entry(a, f"s_input_{i}", f"input {i}") for i, a in enumerate(test_inputs)]
    outs = [_array_entry(a, f"s_expected_{i}", f"expected output {i}") for i, a in enumerate(expected_outputs)]
    vectors_bytes = sum(round8(v["size"]) for v in (ins + outs if embed_expected else ins))
    place = plan_placement(board, activations_bytes=activations_bytes, weights_bytes=weights_bytes,
                           activations_pool=activations_pool, weights_pool=weights_pool,
                           vectors_bytes=vectors_bytes, split=activation_split)

    slug = out_dir.name or "project"
    ctx = _project_context(board, name, tool_version, place, activations_bytes, weights_bytes, validation,
                           profile)
    ctx["defines"] += _small_ram_defines(board, 1, max(len(test_inputs), len(expected_outputs)))
    ctx["reference"] = reference if embed_expected else ""
    ctx["model_file"] = untrusted(model_file)
    lds_name = ctx["linker_script"]

    with tempfile.TemporaryDirectory(prefix=".stm32ai-", dir=parent) as tmp:
        work = Path(tmp)
        proj = _render_cookiecutter(data_dir("project_templates"), work / "render", slug, ctx, work)
        # Linker script
        lds = _jinja(data_dir("linker_scripts")).get_template("stm32ai.ld.j2")
        (proj / lds_name).write_text(lds.render(**_linker_context(board, place, tool_version,
                                                                  activations_bytes, weights_bytes)))
        # Demo
        denv = _jinja(data_dir("demo"))
        dctx = {"name": name, "NAME": name.upper(), "board_name": board.name, "tool_version": tool_version,
                "model_file": untrusted(model_file),
                "inputs": ins, "outputs": outs, "rtol": "1e-5f", "reference": reference,
                "has_expected": embed_expected,
                # the demo's own I/O buffers only for tensors the model leaves to the application
                "inputs_in_pool": io_in_pool[0], "outputs_in_pool": io_in_pool[1],
                "signature": f"0x{model_signature & 0xFFFFFFFF:08X}u"}
        _finish_demo(proj, denv, dctx, ("main.c.j2", "demo_data.c.j2", "demo_data.h.j2"), c_dir, work, out_dir)
    return out_dir


def _finish_demo(proj: Path, denv: jinja2.Environment, dctx: dict, templates: tuple[str, str, str],
                 c_dir: Path, work: Path, out_dir: Path) -> None:
    """The demo (main.c, demo_data.c/.h from `templates`), the validation protocol (plain C),
    the model and runtime C into proj; then proj published as out_dir in one rename."""
    for tpl, dest in zip(templates, ("Core/Src/main.c", "Core/Src/demo_data.c", "Core/Inc/demo_data.h"), strict=True):
        (proj / dest).write_text(denv.get_template(tpl).render(**dctx))
    shutil.copy2(data_dir("demo") / "ai_validation.c", proj / "Core" / "Src" / "ai_validation.c")
    shutil.copy2(data_dir("demo") / "ai_validation.h", proj / "Core" / "Inc" / "ai_validation.h")
    _copy_c(c_dir, proj / "Model")
    staged = work / "staged"
    os.replace(proj, staged)
    mark_generated(staged)
    publish_dir(staged, out_dir)


@dataclass
class ModelSpec:
    """One model of a multi-model project, as the generator needs it (C files in c_dir)."""

    name: str
    test_inputs: list[np.ndarray]
    expected_outputs: list[np.ndarray]   # the outputs' shapes and dtypes even without a reference
    embed_expected: bool
    reference: str
    signature: int
    model_file: str
    activations_bytes: int
    weights_bytes: int


def generate_multi_project(out_dir: Path, *, board: Board, models: list[ModelSpec], c_dir: Path, shared: bool,
                           activations_pool: list[str] | None, weights_pool: list[str] | None,
                           tool_version: str, validation: bool = False, force: bool = False) -> Path:
    """Write one firmware project running several models (each emitted into `c_dir` with its own
    prefix; with `shared` emitted without built-in pools). Model/ai_models.c/.h is the table of
    their descriptors (and, with `shared`, the one activation pool sized to the largest), which
    the generic demo (demo/main_multi.c.j2) loops over. Returns `out_dir`."""
    out_dir = Path(out_dir)
    check_output_dir(out_dir, force, inputs=[c_dir])
    parent = out_dir.resolve().parent
    for m in models:
        _check_c_dir(c_dir, m.name)
    entries = []
    for k, m in enumerate(models):
        ins = [_array_entry(a, f"s_m{k}_input_{i}", f"{m.name} input {i}") for i, a in enumerate(m.test_inputs)]
        outs = [_array_entry(a, f"s_m{k}_expected_{i}", f"{m.name} expected output {i}")
                for i, a in enumerate(m.expected_outputs)]
        entries.append({"index": k, "name": m.name, "inputs": ins, "outputs": outs,
                        "has_expected": m.embed_expected, "reference": m.reference,
                        "model_file": untrusted(m.model_file),
                        "signature": f"0x{m.signature & 0xFFFFFFFF:08X}u",
                        "activations_bytes": m.activations_bytes, "weights_bytes": m.weights_bytes})
    vectors_bytes = sum(round8(v["size"]) for e in entries
                        for v in (e["inputs"] + e["outputs"] if e["has_expected"] else e["inputs"]))
    act = max(m.activations_bytes for m in models) if shared else \
        sum(round8(m.activations_bytes) for m in models)
    wts = sum(round8(m.weights_bytes) for m in models)
    place = plan_placement(board, activations_bytes=act, weights_bytes=wts, activations_pool=activations_pool,
                           weights_pool=weights_pool, vectors_bytes=vectors_bytes)
    joined = "_".join(m.name for m in models)
    ctx = _project_context(board, joined, tool_version, place, act, wts, validation, False,
                           models={"names": [m.name for m in models], "shared_activations": shared,
                                   "activations_bytes": [m.activations_bytes for m in models],
                                   "weights_bytes": [m.weights_bytes for m in models]})
    ctx["defines"] += _small_ram_defines(board, len(models), max(max(len(e["inputs"]), len(e["outputs"]))
                                                                 for e in entries))
    ctx["reference"] = ", ".join(sorted({e["reference"] for e in entries if e["has_expected"]}))
    ctx["model_file"] = untrusted(", ".join(m.model_file for m in models))
    dctx = {"models": entries, "shared": shared, "board_name": board.name, "tool_version": tool_version,
            "activations_bytes": act, "weights_bytes": wts, "rtol": "1e-5f"}
    with tempfile.TemporaryDirectory(prefix=".stm32ai-", dir=parent) as tmp:
        work = Path(tmp)
        proj = _render_cookiecutter(data_dir("project_templates"), work / "render", out_dir.name or "project",
                                    ctx, work)
        lds = _jinja(data_dir("linker_scripts")).get_template("stm32ai.ld.j2")
        (proj / ctx["linker_script"]).write_text(lds.render(**_linker_context(board, place, tool_version, act, wts)))
        denv = _jinja(data_dir("demo"))
        write_model_table(proj / "Model", [m.name for m in models], shared, act, tool_version)
        _finish_demo(proj, denv, dctx, ("main_multi.c.j2", "demo_models.c.j2", "demo_models.h.j2"), c_dir, work,
                     out_dir)
    return out_dir


def write_model_table(dest: Path, names: list[str], shared: bool, activations_bytes: int,
                      tool_version: str, activations_section: str = ".nn_activations") -> None:
    """`ai_models.c/.h` in `dest`: the descriptor table of several models (and, with `shared`, the
    one activation pool of `activations_bytes`, the largest model's, in `activations_section`; the
    models must then be emitted without built-in pools)."""
    ctx = {"models": [{"name": n} for n in names], "shared": shared, "activations_bytes": activations_bytes,
           "tool_version": tool_version, "activations_section": activations_section}
    env = _jinja(data_dir("demo"))
    dest.mkdir(parents=True, exist_ok=True)
    for tpl in ("ai_models.c", "ai_models.h"):
        (dest / tpl).write_text(env.get_template(f"{tpl}.j2").render(**ctx))


def _project_context(board: Board, name: str, tool_version: str, place: Placement,
                     activations_bytes: int, weights_bytes: int, validation: bool = False,
                     profile: bool = False, models: dict[str, Any] | None = None) -> dict[str, Any]:
    ck, con = board.clock, board.console
    regs = clock_registers(board)
    fixed = ck.source == "fixed"
    text = board.region(board.text_region)
    emu = board.emulation if board.is_emulated else None   # firmware built for the emulator
    machine = board.qemu_machine or ""                       # QEMU can run it (make run)
    manifest = {
        "format": 1, "generator": f"stm32ai {tool_version}", "name": name, "board": board.id,
        # a board file of the user's own (shipped boards are found by id)
        "board_file": (str(board.path.resolve()) if board.path and
                       board.path.resolve().parent != data_dir("boards").resolve() else None),
        "target": FIRMWARE_TARGET, "elf": f"build/{FIRMWARE_TARGET}.elf",
        "emulated": emu.qemu_machine if emu else None,
        "cpu_hz": ck.cpu_hz, "activations_bytes": activations_bytes, "weights_bytes": weights_bytes,
        "placement": place.to_json(),
        # the demo serves the validation protocol after its self-test instead of exiting
        "validation": validation,
        # built with -DAI_PROFILE: per-layer counts (`layer:` lines, validation PROFILE request)
        "profile": profile,
        # what the demo's `instructions:`/`cycles:` figure counts
        "counter_unit": "instructions" if emu else "cycles",
        # external memories brought up, and the external flash regions the image writes
        # (programmed with the internal flash: stm32ai flash, docs/external_memory.md)
        "external": used_external(board, place),
        "external_flash": _external_flash(board, place),
    }
    extra: dict[str, Any] = {}
    if models is not None:  # a multi-model project: its models, in the descriptor table's order
        manifest["models"] = models
        extra = {"model_names": models["names"], "shared_activations": models["shared_activations"]}
    ide_name = f"{name}_{board.id}".replace("-", "_")
    ctx = {
        "tool_version": tool_version, "name": name, "NAME": name.upper(), "target": FIRMWARE_TARGET,
        "board_id": board.id, "board_name": board.name, "mcu": board.mcu, "family": board.family,
        "core": board.core, "mfpu": board.mfpu or "", "mfloat_abi": board.mfloat_abi,
        "arch_flags": " ".join(board.arch_flags),
        "cubeide_mcu": board.cubeide_mcu, "cubeide_board": board.cubeide_board,
        "ide_fpu": board.fpu if board.fpu != "none" else "None", "ide_project_name": ide_name,
        # the Makefile builds Release; CMake and CubeIDE have both (same flags: BUILD_CONFIGS)
        "release_opt": BUILD_CONFIGS[1]["opt"], "release_debuglevel": BUILD_CONFIGS[1]["debuglevel"],
        "release_defines": BUILD_CONFIGS[1]["defines"],
        "debug_opt": BUILD_CONFIGS[0]["opt"], "debug_debuglevel": BUILD_CONFIGS[0]["debuglevel"],
        "debug_defines": BUILD_CONFIGS[0]["defines"],
        "ide_source_folders": ["Core", "Model"],
        # AI_CORE_CM7: kernels whose fastest Cortex-M4 code is slower on the M7's dual issue keep
        # their C path there (conv2d_s8's assembly channel loop, docs/kernels_conv.md)
        "defines": ["STM32AI_FIRMWARE=1", *(["DEMO_SERVE_PROTOCOL=1"] if validation else []),
                    *(["AI_PROFILE=1"] if profile else []),
                    *(["AI_CORE_CM7=1"] if board.core == "cortex-m7" else [])],
        "include_dirs": ["Core/Inc", "Model", "Model/runtime/include"],
        "source_dirs": ["Core/Src", "Model", "Model/runtime/src"],
        "linker_script": f"{board.id}.ld",
        "board_lines": _board_lines(board),
        "clock_lines": regs.lines(),
        "clock_fixed": fixed,
        "clock_family": "" if fixed else board.family,
        "clock_source": ck.source, "hse_bypass": ck.hse_bypass, "overdrive": ck.overdrive,
        "clock_desc": _clock_desc(board), "cpu_mhz": f"{ck.cpu_hz / 1e6:g}",
        "mcu_manual": board.references.get("mcu", "the reference manual"),
        "region_enables": [{"reg": _hex(r.enable.reg), "mask": _hex(r.enable.mask),
                            "note": f"{r.name}: clock enable"} for r in board.memory if r.enable],
        "pre_init": [{"reg": _hex(w.reg), "set": _hex(w.set), "note": w.note} for w in board.pre_init],
        "console_desc": con.instance
        + (f" on P{con.tx.port}{con.tx.pin}/P{con.rx.port}{con.rx.pin}" if con.tx and con.rx else "")
        + (f", {con.vcp}" if con.vcp else ""),
        "console_driver": con.driver, "baud": con.baud,
        "monitor_port": "/dev/ttyACM0" if not emu else "socket://127.0.0.1:4321",
        "emulated": emu is not None, "qemu_machine": machine,
        # the demo's instruction conversion assumes it
        "icount_shift": board.emulation.icount_shift if board.emulation else 0,
        "openocd": board.openocd or "", "flash_origin": f"0x{text.origin:08x}",
        "flash": _flash_context(board, _external_flash(board, place)),
        "flash_hint": "; ".join(p["package"] for p in _flash_context(board, _external_flash(board, place))),
        # weights in external flash: their own image, left out of the internal .bin
        "external_images": [{"region": rn, "origin": f"0x{board.region(rn).origin:08X}", "section": ".nn_weights"}
                            for rn in _external_flash(board, place)],
        "activations_bytes": activations_bytes, "weights_bytes": weights_bytes,
        "activations_region": (place.activations_region if len(place.activation_pools) < 2 else
                               " + ".join(f"{p['region']} ({p['bytes']:,} B)" for p in place.activation_pools)),
        "weights_region": place.weights_region,
        "stack_size": board.stack_size, "stack_region": board.stack_region,
        "manifest_json": json.dumps(manifest, indent=1),
        "extmem": _extmem_context(board, place),
    }
    ctx["ide_configs"] = [_ide_config(board, cfg, ctx) for cfg in BUILD_CONFIGS]
    ctx.update(extra)
    return ctx


def used_external(board: Board, place: Placement) -> list[str]:
    """The external memories (board.external) this placement puts weights or activations in."""
    used = ({place.weights_region, place.activations_region} | {p["region"] for p in place.activation_pools}
            | ({place.weights_load} if place.weights_load else set()))
    return [r.name for r in board.memory if r.name in used and r.name in board.external]


def _extmem_context(board: Board, place: Placement) -> dict[str, Any]:
    """extmem.c's values: the register words of stm32ai/extmem.py at the board's HCLK, for the
    external memories the placement uses (none: extmem_init() does nothing)."""
    from stm32ai import extmem as xm
    from stm32ai.extmem import OctalPsram, QspiFlash, SdramPart, mpu_regions, qspi_registers, sdram_registers

    out: dict[str, Any] = {"sdram": None, "qspi": None, "ospi": None, "psram": None, "mpu": [], "boot_copy": None,
                           **dict.fromkeys(("fmc", "quadspi", "ahb3enr", "fmcen", "qspien", "bcr1_fmcen"), "0u")}
    used = {rn: board.external[rn] for rn in used_external(board, place)}
    if not used:
        return out
    out.update({k: _hex(v) for k, v in xm.FAMILY_REGS.get(board.family, {}).items()})

    def pins(part: Any) -> list[dict[str, int]]:
        ncs = getattr(part, "ncs", None)
        return [{"port": ord(p.port) - ord("A"), "pin": p.pin, "af": p.af,
                 "pull": 1 if ncs == f"P{p.port}{p.pin}" else 0} for p in part.pins]

    for rn, part in used.items():
        length = board.region(rn).length
        if isinstance(part, SdramPart):
            r = sdram_registers(part, board.hclk_hz)
            out["sdram"] = {
                "region": rn, "part": part.part, "origin": board.region(rn).origin, "bytes": length, "bank": part.bank,
                "pins": pins(part), "cas": r["CAS"], "sdclk_hz": r["SDCLK_HZ"], "powerup_us": r["POWERUP_US"],
                "autorefresh": part.autorefresh, "refresh_count": r["SDRTR"] >> 1,
                **{k: _hex(r[k]) for k in ("SDCR", "SDTR", "SDRTR", "CMD_CLK_ENABLE", "CMD_PALL",
                                           "CMD_AUTOREFRESH", "CMD_LOAD_MODE")},
                "sdcr_note": f"{part.col_bits} column / {part.row_bits} row bits, {part.data_bits}-bit bus, "
                             f"{part.internal_banks} banks, CAS {r['CAS']}, SDCLK = HCLK / {part.sdclk_div}, "
                             "read burst",
                "sdtr_note": ", ".join(f"{k[2:]} {r[k]}" for k in r if k.startswith("T_")) + " SDCLK cycles",
            }
        elif isinstance(part, OctalPsram):
            # the OCTOSPI kernel clock is SYSCLK (RCC_CCIPR2.OCTOSPISEL reset value)
            r = xm.psram_registers(part, board.sysclk_hz)
            out["psram"] = {
                "region": rn, "part": part.part, "bytes": length, "pins": pins(part), "hz": r["OSPI_HZ"],
                "instance": part.octospi, "drive": part.drive, "page_bytes": part.page_bytes,
                "cem_ns": f"{part.cem_ns:g}", "cph_ns": f"{part.cph_ns:g}",
                "ahb2enr1": _hex(xm.U5_AHB2ENR1), "ahb2enr2": _hex(xm.U5_AHB2ENR2),
                "octospimen": _hex(xm.U5_OCTOSPIMEN),
                **{k: r[k] for k in ("PRESCALER", "LATENCY", "READ_DCYC", "WRITE_DCYC", "CSHT", "REFRESH", "CSBOUND",
                                     "DEVSIZE", "LPTR")},
                **{f"{k}_hex": _hex(r[k]) for k in ("DCR1", "DCR1_FRCK", "DCR2", "DCR3", "DCR4", "CR_INDIRECT_WRITE",
                                                    "CR_MEMORY_MAPPED", "LPTR", "CCR_RESET", "IR_RESET", "CCR_MRW",
                                                    "TCR_MRW", "IR_MRW", "MR0", "MR4", "MR8", "CCR_READ", "TCR_READ",
                                                    "IR_READ", "WCCR", "WTCR", "WIR", "PCR", "PCR_ADDR", "DLYB",
                                                    "BASE", "WINDOW", "EN_BIT")},
            }
        elif isinstance(part, QspiFlash) and part.octospi:
            # the OCTOSPI kernel clock is SYSCLK (RCC_CCIPR2.OCTOSPISEL reset value)
            r = xm.octospi_registers(part, board.sysclk_hz)
            out["ospi"] = {
                "region": rn, "part": part.part, "bytes": length, "pins": pins(part), "hz": r["OSPI_HZ"],
                "instance": part.octospi, "read_cmd": part.read_cmd, "dummy": part.dummy,
                "id_c": ", ".join(f"0x{b:02X}u" for b in part.jedec_id),
                "id_hex": "".join(f"{b:02X}" for b in part.jedec_id),
                "PRESCALER": r["PRESCALER"], "DEVSIZE": r["DEVSIZE"], "CSHT_plus1": r["CSHT"] + 1,
                "ahb2enr1": _hex(xm.U5_AHB2ENR1), "ahb2enr2": _hex(xm.U5_AHB2ENR2),
                "octospimen": _hex(xm.U5_OCTOSPIMEN),
                **{k: _hex(r[k]) for k in ("DCR1", "DCR2", "CR_INDIRECT_WRITE", "CR_INDIRECT_READ",
                                           "CR_MEMORY_MAPPED", "CCR_RESET_OPI_STR", "CCR_RESET_OPI_DTR",
                                           "IR_RESET_ENABLE_OPI", "IR_RESET_OPI", "CCR_RESET", "IR_RESET_ENABLE",
                                           "IR_RESET", "CCR_READ_ID", "IR_READ_ID", "CCR_MEMORY_MAPPED",
                                           "TCR_MEMORY_MAPPED", "IR_MEMORY_MAPPED", "PCR", "PCR_ADDR", "BASE",
                                           "WINDOW", "EN_BIT")},
            }
        elif isinstance(part, QspiFlash):
            r = qspi_registers(part, board.hclk_hz)
            out["qspi"] = {
                "region": rn, "part": part.part, "bytes": length, "pins": pins(part), "hz": r["QSPI_HZ"],
                "read_cmd": part.read_cmd, "dummy": part.dummy, "quad_enable": part.quad_enable,
                # dual-flash: READ ID returns the parts' bytes interleaved (even bytes flash 1, odd flash 2)
                "dual": part.dual, "id_bytes": 6 if part.dual else 3,
                "id_c": ", ".join(f"0x{b:02X}u" for b in part.jedec_id for _ in range(2 if part.dual else 1)),
                "id_hex": "".join(f"{b:02X}" for b in part.jedec_id for _ in range(2 if part.dual else 1)),
                "PRESCALER": r["PRESCALER"], "FSIZE": r["FSIZE"], "CSHT_plus1": r["CSHT"] + 1,
                **{k: _hex(r[k]) for k in ("CR", "DCR", "CCR_RESET_ENABLE_QPI", "CCR_RESET_QPI", "CCR_RESET_ENABLE",
                                           "CCR_RESET", "CCR_READ_ID", "CCR_READ_SR", "CCR_WRITE_ENABLE",
                                           "CCR_WRITE_SR", "CCR_MEMORY_MAPPED")},
            }
    if place.weights_load:
        # the weights' load image in external flash, copied to their run region after the bring-up
        run = used.get(place.weights_region)
        out["boot_copy"] = {"load": place.weights_load, "run": place.weights_region,
                            "run_external": run is not None,
                            # the status of the external RAM the copy goes to (brought up first)
                            "run_status": "g_psram_status" if isinstance(run, OctalPsram) else "g_sdram_status"}
    if board.core == "cortex-m7":
        out["mpu"] = [{"rbar": _hex(b), "rasr": _hex(a), "note": n}
                      for b, a, n in mpu_regions(used, {rn: board.region(rn).length for rn in used})]
    return out


def _external_flash(board: Board, place: Placement) -> list[str]:
    """External read-only regions with a load image (the weights placed there, or copied from
    there at boot)."""
    if place.weights_load:
        return [place.weights_load]
    rn = place.weights_region
    return [rn] if rn in board.external and not board.region(rn).writable else []


def _flash_context(board: Board, external: list[str]) -> list[dict[str, str]]:
    """The Makefile's flash targets: the command lines of stm32ai.project.flash, with make's
    variables for the image (so `make flash` runs what `stm32ai flash` runs)."""
    import shlex

    from stm32ai.project.flash import PROGRAMMERS, flash_commands

    cmds = flash_commands(board, "$(BUILD_DIR)/$(TARGET).elf", "$(BUILD_DIR)/$(TARGET).bin", external)
    target = {"openocd": "flash-openocd", "st-flash": "flash-stlink", "cubeprog": "flash-cubeprog"}
    return [{"name": p.name, "exe": p.exe, "target": target[p.name], "package": p.package,
             "cmd": shlex.join(cmds[p.name])} for p in PROGRAMMERS if p.name in cmds]


# The two build configurations, one definition for the Makefile (Release), CMake and the
# STM32CubeIDE .cproject: gcc flags and CubeIDE's enumerated values for them.
BUILD_CONFIGS: tuple[dict[str, Any], ...] = (
    {"name": "Debug", "kind": "debug", "id": "1601", "opt": "-O0", "debuglevel": "-g3", "defines": ["DEBUG"]},
    {"name": "Release", "kind": "release", "id": "1602", "opt": "-O2", "debuglevel": "-g3",
     "defines": ["NDEBUG"]},
)


def _ide_config(board: Board, cfg: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
    """One .cproject configuration, with the `option.defaults` value every ST-made CubeIDE
    project carries (CubeIDE's build-inputs record: configuration, toolchain, MCU/board,
    include paths, symbols, source folders, linker script)."""
    from html import escape

    includes = " | ".join(f"../{d}" for d in ctx["include_dirs"])
    defines = " | ".join(ctx["defines"] + cfg["defines"])
    fields = [
        "com.st.stm32cube.ide.common.services.build.inputs.revA.1.0.6", cfg["name"],
        "true" if cfg["kind"] == "debug" else "false", "Executable",
        "com.st.stm32cube.ide.mcu.gnu.managedbuild.option.toolchain.value.workspace",
        board.cubeide_board or board.cubeide_mcu, "0", "0", "arm-none-eabi-",
        "${gnu_tools_for_stm32_compiler_path}", includes, "", "", defines, "",
        " | ".join(ctx["ide_source_folders"]), "", "",
        "${workspace_loc:/${ProjName}/" + ctx["linker_script"] + "}", "true", "NonSecure", "", "secure_nsclib.o",
        "", "None", "", "", "",
    ]
    return {**cfg, "opt": cfg["opt"].lstrip("-").lower(), "debuglevel": cfg["debuglevel"].lstrip("-"),
            "ide_defaults": escape(" || ".join(fields), quote=True)}


def _linker_context(board: Board, place: Placement, tool_version: str, activations_bytes: int,
                    weights_bytes: int) -> dict[str, Any]:
    regions = [{"sym": r.name.upper(), "access": r.access, "origin": r.origin,
                "length": (f"{r.length // (1 << 20)}M" if r.length % (1 << 20) == 0 else
                           f"{r.length // 1024}K" if r.length % 1024 == 0 else str(r.length)),
                "note": r.note.replace("*/", "") if r.note else ""}
               for r in board.memory]
    return {
        "board_name": board.name, "board_id": board.id, "mcu": board.mcu, "tool_version": tool_version,
        "regions": regions, "width": max(len(r["sym"]) for r in regions),
        "text_region": board.text_region, "data_region": board.data_region,
        "stack_region": board.stack_region, "weights_region": place.weights_region,
        "activations_region": place.activations_region, "weights_copied": place.weights_copied,
        "weights_load": place.weights_load, "LOAD": place.weights_load.upper(),
        "TEXT": board.text_region.upper(), "DATA": board.data_region.upper(),
        "STACK": board.stack_region.upper(), "WEIGHTS": place.weights_region.upper(),
        "ACTIVATIONS": place.activations_region.upper(),
        "stack_size": board.stack_size, "heap_size": board.heap_size,
        "activations_bytes": activations_bytes, "weights_bytes": weights_bytes,
        # pools 1.. of a model split across regions: section .nn_activations_<region> each
        "extra_pools": [{"index": k, "region": p["region"], "REGION": p["region"].upper(), "bytes": p["bytes"]}
                        for k, p in enumerate(place.activation_pools) if k > 0],
        "pool0_bytes": place.activation_pools[0]["bytes"] if place.activation_pools else activations_bytes,
    }
