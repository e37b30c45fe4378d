"""stm32ai's own CMake project follows STM32CubeMX's CMake layout (issue 27, item 7;
docs/project.md "CMake"):

* a user-owned top `CMakeLists.txt` that names no model (sources, include paths and libraries
  are added between CubeMX's comment lines) and links the interface library `stm32cubemx`;
* `cmake/stm32cubemx/CMakeLists.txt` and `cmake/gcc-arm-none-eabi.cmake`, which stm32ai owns:
  the model, runtime and demo sources, defines, linker script, build types;
* CubeMX's preset names (Debug -O0 -g3, Release) building into `build/<preset>`.

A model update rewrites only stm32ai's files: the user's edited top file is kept, and both
presets still build with the user's own source in them; the Debug (-O0) firmware runs the demo
on the emulated board with `result: match` against TFLite Micro's expected output."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, stm32ai_cli

from stm32ai.boards import load_board
from stm32ai.project.run import demo_passed, run_qemu

BOARD = "qemu-netduinoplus2"
MODEL_A = FIXTURES / "classifier_softmax_int8.tflite"   # conv, pool, FC (ai_fc.c's C loop at -O0), softmax
MODEL_B = FIXTURES / "conv_stride2_same_int8.tflite"

needs_cmake = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("cmake", "ninja", "arm-none-eabi-gcc")),
    reason="cmake/ninja/arm-none-eabi-gcc not installed")


def gen(out: Path, model: Path, *extra: str) -> subprocess.CompletedProcess:
    return stm32ai_cli("generate", str(model), "--board", BOARD, "-o", str(out), *extra, cwd=ROOT)


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cmake_layout")
    out = {}
    for name, model in (("a", MODEL_A), ("b", MODEL_B)):
        r = gen(d / name, model, "--no-test-vector") if name == "b" else gen(d / name, model)
        assert r.returncode == 0, r.stderr
        out[name] = d / name
    return out


def test_top_file_is_cubemx_shaped_and_model_free(projects):
    a, b = projects["a"], projects["b"]
    top = (a / "CMakeLists.txt").read_text()
    for line in ('include("cmake/gcc-arm-none-eabi.cmake")', "add_executable(${CMAKE_PROJECT_NAME})",
                 "add_subdirectory(cmake/stm32cubemx)", "# Add user sources here",
                 "# Add user defined include paths", "# Add user defined libraries"):
        assert line in top, line
    assert re.search(r"target_link_libraries\(\$\{CMAKE_PROJECT_NAME\}\s+stm32cubemx", top)
    # nothing of the model in the user's file: a model update never conflicts with its edits
    assert (a / "CMakeLists.txt").read_bytes() == (b / "CMakeLists.txt").read_bytes()
    assert "network" not in top and ".c" not in top.replace(".cmake", "")
    mx = (a / "cmake" / "stm32cubemx" / "CMakeLists.txt").read_text()
    assert "add_library(stm32cubemx INTERFACE)" in mx and "${CMAKE_SOURCE_DIR}/Model/*.c" in mx
    assert f"{BOARD}.ld" in mx and "-Wall -Wextra -Werror" in mx
    tc = (a / "cmake" / "gcc-arm-none-eabi.cmake").read_text()
    assert 'set(CMAKE_C_FLAGS_DEBUG "-O0 -g3")' in tc      # CubeMX's Debug
    presets = json.loads((a / "CMakePresets.json").read_text())
    conf = {p["name"]: p for p in presets["configurePresets"]}
    assert conf["default"]["binaryDir"] == "${sourceDir}/build/${presetName}"
    assert conf["default"]["toolchainFile"] == "${sourceDir}/cmake/gcc-arm-none-eabi.cmake"
    assert {p["name"] for p in presets["buildPresets"]} == {"Debug", "Release"}
    for name, bt in (("Debug", "Debug"), ("Release", "Release")):
        assert conf[name]["inherits"] == "default" and conf[name]["cacheVariables"]["CMAKE_BUILD_TYPE"] == bt


def _build(p: Path, preset: str) -> str:
    out = ""
    for cmd in (["cmake", "--preset", preset], ["cmake", "--build", "--preset", preset]):
        r = subprocess.run(cmd, cwd=p, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        out += r.stdout + r.stderr
    return out


@pytest.mark.slow
@needs_cmake
def test_user_edit_survives_update_and_both_presets_build_and_run(projects, tmp_path):
    p = tmp_path / "p"
    shutil.copytree(projects["b"], p)
    # the user's own source, added where CubeMX's file says
    (p / "Core" / "Src" / "app_extra.c").write_text("int app_extra_value(void) { return 42; }\n")
    top = p / "CMakeLists.txt"
    top.write_text(top.read_text().replace("    # Add user sources here\n",
                                           "    # Add user sources here\n    Core/Src/app_extra.c\n"))
    edited = top.read_bytes()

    r = gen(p, MODEL_A, "--update")                    # a new model (A carries a test vector)
    assert r.returncode == 0, r.stderr
    assert "kept      CMakeLists.txt" in r.stdout      # the user's file, untouched
    assert top.read_bytes() == edited
    for rel in ("cmake/stm32cubemx/CMakeLists.txt", "cmake/gcc-arm-none-eabi.cmake"):   # stm32ai's: model A's now
        assert (p / rel).read_bytes() == (projects["a"] / rel).read_bytes(), rel
    assert not list(p.rglob("*.stm32ai-new"))

    for preset, opt in (("Debug", "-O0 -g3"), ("Release", "-O2 -g3")):
        log = _build(p, preset)
        assert "warning" not in log.lower(), log[-2000:]
        cc = json.loads((p / "build" / preset / "compile_commands.json").read_text())
        cmds = {Path(e["file"]).name: e["command"] for e in cc}
        assert "app_extra.c" in cmds and "network.c" in cmds and "ai_fc.c" in cmds
        assert f" {opt} " in cmds["ai_fc.c"] and "-Werror" in cmds["app_extra.c"]
        assert (p / "build" / preset / "firmware.elf").is_file()
        assert (p / "build" / preset / "firmware.hex").is_file()

    # the Debug (-O0) firmware computes what TFLite Micro computes (the demo's test vector)
    code, text = run_qemu(p / "build" / "Debug" / "firmware.elf", load_board(BOARD), timeout_s=300)
    assert code == 0 and demo_passed(text), text[-2000:]
