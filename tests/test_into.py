"""`stm32ai generate MODEL --into PROJECT` (docs/into.md): the three fixture projects
(tests/fixtures/projects: CubeMX CMake layout, STM32CubeIDE, CubeMX-style Makefile; `common/`
holds the sources they share) get a model with one command, build with arm-none-eabi-gcc in
Debug (-O0) and Release, and `check-map` finds the weights in flash and the pool without a load
image. A second run changes nothing; a model update touches only the component folder; lines
outside the markers, edited by the user between runs, are kept."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, assert_one_line_error, stm32ai_cli

from stm32ai.errors import Stm32aiError
from stm32ai.project import into

PROJECTS = ROOT / "tests" / "fixtures" / "projects"
MODEL_A = FIXTURES / "classifier_softmax_int8.tflite"   # conv, pool, FC (ai_fc.c's asm at -O0), softmax
MODEL_B = FIXTURES / "conv_stride2_same_int8.tflite"
HAVE_ARM = shutil.which("arm-none-eabi-gcc") is not None
HAVE_CMAKE = shutil.which("cmake") is not None and shutil.which("ninja") is not None
BEGIN_MARK = "# " + into.BEGIN


def make_project(kind: str, dest: Path) -> Path:
    """A fresh copy of fixture project `kind` (its own files over the shared ones)."""
    p = dest / kind
    shutil.copytree(PROJECTS / "common", p)
    shutil.copytree(PROJECTS / kind, p, dirs_exist_ok=True)
    return p


def snapshot(root: Path, skip: str | None = "stm32ai") -> dict[str, str]:
    """sha256 of every file under root except the build folders (and the component folder)."""
    out = {}
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root)
        if f.is_file() and rel.parts[0] not in ("build", skip):
            out[str(rel)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def into_cli(model: Path, project: Path, *extra: str) -> subprocess.CompletedProcess:
    r = stm32ai_cli("generate", str(model), "--into", str(project), *extra, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r


# ---- wiring, pure text -------------------------------------------------------------------------
def test_cmake_wiring_idempotent_and_reversible():
    text = (PROJECTS / "cubemx_cmake" / "CMakeLists.txt").read_text()
    wired = into.wire_cmake(text, "kws")
    assert wired.startswith(text)  # appended: nothing of the user's file changed
    assert "add_subdirectory(stm32ai)" in wired
    assert "target_link_libraries(${CMAKE_PROJECT_NAME} stm32ai::kws)" in wired  # CubeMX's plain signature
    assert into.wire_cmake(wired, "kws") == wired
    # a model renamed: only the block changes
    assert into.wire_cmake(wired, "vww").replace("stm32ai::vww", "stm32ai::kws") == wired


def test_cmake_wiring_follows_keyword_signature():
    text = "project(x C)\nadd_executable(app main.c)\ntarget_link_libraries(app PRIVATE m)\n"
    assert "target_link_libraries(app PRIVATE stm32ai::network)" in into.wire_cmake(text, "network")
    with pytest.raises(Stm32aiError, match="add_executable"):
        into.wire_cmake("project(x C)\n", "network")


def test_makefile_wiring_after_cubemx_variables():
    text = (PROJECTS / "makefile" / "Makefile").read_text()
    wired = into.wire_makefile(text)
    lines = wired.splitlines()
    inc = lines.index("include stm32ai/stm32ai.mk")
    assert lines[inc - 3:inc] == ["C_INCLUDES =  \\", "-ICore/Inc", BEGIN_MARK]
    assert lines.index("OBJECTS = $(addprefix $(BUILD_DIR)/,$(notdir $(C_SOURCES:.c=.o)))") > inc
    assert into.wire_makefile(wired) == wired
    with pytest.raises(Stm32aiError, match="C_SOURCES"):
        into.wire_makefile("all:\n\techo\n")


def test_unterminated_block_is_a_conflict_not_a_deletion():
    text = "add_executable(app)\n" + BEGIN_MARK + "\nmy own line\n"
    with pytest.raises(Stm32aiError, match="no end marker"):
        into.wire_cmake(text, "network")


def test_cproject_every_configuration_carries_the_component():
    text = (PROJECTS / "cubeide" / ".cproject").read_text()
    wired = into.wire_cproject(text)
    assert into.wire_cproject(wired) == wired
    root = ET.fromstring(wired.split("?>", 2)[-1])  # after the two processing instructions
    configs = root.findall(".//cconfiguration")
    assert len(configs) == 2
    for cfg in configs:
        incs = [v.get("value") for o in cfg.iter("option")
                if o.get("superClass", "").endswith("c.compiler.option.includepaths")
                for v in o.iter("listOptionValue")]
        assert incs[:2] == ["../stm32ai", "../stm32ai/runtime/include"] and "../Core/Inc" in incs
        assert "stm32ai" in [e.get("name") for e in cfg.iter("entry") if e.get("kind") == "sourcePath"]


def test_cproject_saved_by_the_ide_without_markers_gets_no_duplicates():
    wired = into.wire_cproject((PROJECTS / "cubeide" / ".cproject").read_text())
    saved = "\n".join(ln for ln in wired.splitlines() if "stm32ai:" not in ln and "<<< stm32ai" not in ln) + "\n"
    again = into.wire_cproject(saved)
    assert again == saved  # every entry is there already: nothing added
    assert again.count('value="../stm32ai"') == 2 and again.count('name="stm32ai"') == 2


def test_mcu_from_ioc_cproject_and_linker_script(tmp_path):
    cm = make_project("cubemx_cmake", tmp_path)
    m = into.detect_mcu(cm)
    assert (m.name, m.core, m.flash_bytes, m.ram_bytes) == ("STM32F746ZGTx", "cortex-m7", 1024 * 1024, 320 * 1024)
    assert into.detect_mcu(make_project("cubeide", tmp_path)).name == "STM32F746ZGTx"
    mk_dir = make_project("makefile", tmp_path)
    (mk_dir / "A_RAM.ld").write_text("MEMORY\n{\n  RAM (xrw) : ORIGIN = 0x20000000, LENGTH = 64K\n}\n")
    mk = into.detect_mcu(mk_dir)  # CubeIDE's *_RAM.ld (the program in RAM) is not the budget
    assert (mk.name, mk.flash_bytes, mk.ram_bytes) == ("", 1024 * 1024, 320 * 1024)
    assert into.core_of("STM32G071RBTx") == "cortex-m0plus" and into.core_of("STM32U585AIIx") == "cortex-m33"


# ---- the command --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["cubemx_cmake", "cubeide", "makefile"])
def test_into_dry_run_twice_update(kind, tmp_path):
    p = make_project(kind, tmp_path)
    before = snapshot(p)
    r = into_cli(MODEL_A, p, "--dry-run")
    assert "dry run: nothing written" in r.stdout and "create    stm32ai" in r.stdout
    assert snapshot(p) == before and not (p / "stm32ai").exists()

    into_cli(MODEL_A, p)
    comp = snapshot(p / "stm32ai", skip=None)
    assert {"network.c", "network_data.c", "CMakeLists.txt", "stm32ai.mk"} <= set(comp)
    assert "AI_SECTION(\".rodata.nn_weights\")" in (p / "stm32ai" / "network_data.c").read_text()
    wired = snapshot(p)

    r = into_cli(MODEL_A, p)  # a second run changes nothing, not even a time stamp
    assert "up to date: nothing changed" in r.stdout
    assert snapshot(p) == wired and snapshot(p / "stm32ai", skip=None) == comp

    # the user edits their files (outside the markers), then updates the model
    build_file = {"cubemx_cmake": "CMakeLists.txt", "cubeide": ".cproject", "makefile": "Makefile"}[kind]
    main = p / "Core" / "Src" / "main.c"
    main.write_text(main.read_text().replace("volatile int32_t app_status;", "volatile int32_t app_status; /* mine */"))
    bf = p / build_file
    edited = bf.read_text() + ("\n<!-- my note -->\n" if kind == "cubeide" else "\n# my note\n")
    bf.write_text(edited)
    user = snapshot(p)
    r = into_cli(MODEL_B, p)
    assert "replace   stm32ai" in r.stdout and f"unchanged {build_file}" in r.stdout
    assert snapshot(p) == user  # every file outside the component, byte for byte
    assert snapshot(p / "stm32ai", skip=None) != comp


def test_options_are_part_of_the_component_inputs(tmp_path):
    p = make_project("makefile", tmp_path)
    into_cli(MODEL_A, p, "--input-normalization", "127.5:0.0078125")
    assert "up to date" in into_cli(MODEL_A, p, "--input-normalization", "127.5:0.0078125").stdout
    assert "replace   stm32ai" in into_cli(MODEL_A, p, "--input-normalization", "0:0.5").stdout
    assert "replace   stm32ai" in into_cli(MODEL_A, p, "--input-normalization", "0:0.5", "--named-sections").stdout


def test_edits_inside_the_component_are_announced_then_replaced(tmp_path):
    p = make_project("makefile", tmp_path)
    into_cli(MODEL_B, p)
    f = p / "stm32ai" / "network.c"
    f.write_text(f.read_text() + "/* mine */\n")
    r = into_cli(MODEL_B, p, "--dry-run")
    assert "replace   stm32ai (files in it were edited" in r.stdout and f.read_text().endswith("/* mine */\n")
    into_cli(MODEL_B, p)
    assert "/* mine */" not in f.read_text()
    assert "up to date" in into_cli(MODEL_B, p).stdout


def test_into_refuses_foreign_folder_and_bad_projects(tmp_path):
    p = make_project("cubemx_cmake", tmp_path)
    (p / "stm32ai").mkdir()
    (p / "stm32ai" / "mine.c").write_text("int x;\n")
    before = snapshot(p, skip=None)
    assert_one_line_error(stm32ai_cli("generate", str(MODEL_B), "--into", str(p), cwd=ROOT), "not written by stm32ai")
    assert snapshot(p, skip=None) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(stm32ai_cli("generate", str(MODEL_B), "--into", str(empty), cwd=ROOT),
                          "no CMakeLists.txt, .cproject or Makefile")
    assert_one_line_error(stm32ai_cli("generate", str(MODEL_B), "--into", str(p), "-o", "x", cwd=ROOT),
                          "does not go with --into")
    assert_one_line_error(stm32ai_cli("generate", str(MODEL_B), "--c-only", "--dry-run", cwd=ROOT), "--dry-run")
    assert_one_line_error(stm32ai_cli("generate", str(MODEL_B), "--board", "qemu-netduinoplus2", "--named-sections",
                                      "-o", str(tmp_path / "x"), cwd=ROOT), "--named-sections")
    (tmp_path / "x.map").write_text("not a map\n")
    assert_one_line_error(stm32ai_cli("check-map", str(tmp_path / "x.map"), cwd=ROOT), "not a GNU ld map file")
    assert_one_line_error(stm32ai_cli("check-map", str(tmp_path / "none.map"), cwd=ROOT), "not found")


def test_into_refuses_a_model_too_large_for_the_linker_script(tmp_path):
    p = make_project("makefile", tmp_path)
    ld = p / "STM32F746XX_FLASH.ld"
    ld.write_text(ld.read_text().replace("LENGTH = 320K", "LENGTH = 8K"))
    assert_one_line_error(stm32ai_cli("generate", str(MODEL_A), "--into", str(p), cwd=ROOT),
                          "activations", "do not fit the RAM")
    assert not (p / "stm32ai").exists()


# ---- builds with arm-none-eabi-gcc ------------------------------------------------------------------
def check_map(map_file: Path, ok: bool) -> str:
    r = stm32ai_cli("check-map", str(map_file), cwd=ROOT)
    assert r.returncode == (0 if ok else 1), r.stdout + r.stderr
    return r.stdout + r.stderr


def assert_placed(out: str) -> None:
    assert "placement: ok" in out
    assert "weights: network_weights" in out and "in FLASH (flash), output section .rodata" in out
    assert "activations: network_activations" in out and "in RAM (RAM), output section .bss, no load image" in out


@pytest.mark.slow
@pytest.mark.skipif(not (HAVE_ARM and HAVE_CMAKE), reason="needs arm-none-eabi-gcc, cmake and ninja")
def test_cubemx_cmake_builds_debug_and_release(tmp_path):
    p = make_project("cubemx_cmake", tmp_path)
    into_cli(MODEL_A, p)
    for preset in ("Debug", "Release"):  # CubeMX's presets: -O0 -g3 and -Os -g0
        for cmd in (["cmake", "--preset", preset], ["cmake", "--build", "--preset", preset]):
            r = subprocess.run(cmd, cwd=p, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert_placed(check_map(p / "build" / preset / "f746_app.map", ok=True))
    flags = (p / "build" / "Debug" / "compile_commands.json").read_text()
    assert "-O0 -g3" in flags and "ai_fc.c" in flags


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_ARM or shutil.which("make") is None, reason="needs arm-none-eabi-gcc and make")
def test_makefile_builds_o0_and_release_and_named_sections_are_caught(tmp_path):
    p = make_project("makefile", tmp_path)
    into_cli(MODEL_A, p)
    for args in (["OPT=-O0"], ["DEBUG=0", "OPT=-O2"]):
        subprocess.run(["make", "clean"], cwd=p, capture_output=True, check=True)
        r = subprocess.run(["make", "-j2", *args], cwd=p, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert_placed(check_map(p / "build" / "f746_app.map", ok=True))
    # --named-sections into a stock linker script: the orphan pool gets a load image, and the
    # check says so (the situation issue 27 found with --c-only output wired in by hand)
    into_cli(MODEL_A, p, "--named-sections")
    subprocess.run(["make", "clean"], cwd=p, capture_output=True, check=True)
    r = subprocess.run(["make", "-j2", "DEBUG=0", "OPT=-O2"], cwd=p, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = check_map(p / "build" / "f746_app.map", ok=False)
    assert "pool network_activations has a load image in output section .nn_activations" in out


def managed_build(project: Path, config: str) -> Path:
    """What STM32CubeIDE's managed build does with a .cproject configuration, enough to check that
    the wiring suffices: every .c/.s under the configuration's source folders, compiled from the
    build folder PROJECT/<config> with its include paths, symbols, optimisation level and core
    options, then linked with its linker script. Returns the map file."""
    root = ET.fromstring((project / ".cproject").read_text().split("?>", 2)[-1])
    cfg = next(c for c in root.iter("configuration") if c.get("name") == config)
    opts = {o.get("superClass", "").rsplit(".option.", 1)[-1]: o for o in cfg.iter("option")}
    level = opts["optimization.level"].get("value").rsplit(".", 1)[-1]            # o0, os, ...
    incs = [v.get("value") for v in opts["includepaths"].iter("listOptionValue")]
    defs = [v.get("value") for v in opts["definedsymbols"].iter("listOptionValue")]
    fpu = opts["fpu"].get("value").rsplit(".", 1)[-1]
    abi = opts["floatabi"].get("value").rsplit(".", 1)[-1]
    script = opts["script"].get("value").split("}/", 1)[-1].rstrip("}")
    folders = [e.get("name") for e in cfg.iter("entry") if e.get("kind") == "sourcePath"]
    build = project / config
    build.mkdir()
    core = ["-mcpu=cortex-m7", f"-mfpu={fpu}", f"-mfloat-abi={abi}", "-mthumb"]
    objs = []
    for folder in folders:
        for src in sorted((project / folder).rglob("*")):
            if src.suffix not in (".c", ".s"):
                continue
            obj = build / (str(src.relative_to(project)).replace("/", "_") + ".o")
            flags = (["-x", "assembler-with-cpp"] if src.suffix == ".s" else
                     ["-std=gnu11", "-O" + level[1:], "-g3", "-Wall", "-ffunction-sections", "-fdata-sections",
                      *(f"-D{d}" for d in defs), *(f"-I{i}" for i in incs)])
            r = subprocess.run(["arm-none-eabi-gcc", *core, *flags, "-c", str(src), "-o", str(obj)], cwd=build,
                               capture_output=True, text=True)
            assert r.returncode == 0, f"{config} {src}: {r.stderr[:2000]}"
            objs.append(str(obj))
    out = build / "app.elf"
    r = subprocess.run(["arm-none-eabi-gcc", *core, *objs, f"-T{project / script}", "--specs=nano.specs",
                        "-Wl,--gc-sections", f"-Wl,-Map={build / 'app.map'}", "-o", str(out)],
                       cwd=build, capture_output=True, text=True)
    assert r.returncode == 0, f"{config} link: {r.stderr[:2000]}"
    return build / "app.map"


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_ARM, reason="needs arm-none-eabi-gcc")
def test_cubeide_configurations_build(tmp_path):
    p = make_project("cubeide", tmp_path)
    (p / "Core" / "Startup").mkdir()
    (p / "startup_stm32f746xx.s").rename(p / "Core" / "Startup" / "startup_stm32f746xx.s")  # CubeIDE's place
    into_cli(MODEL_A, p)
    for config in ("Debug", "Release"):  # -O0 -g3 and -Os, as the fixture's configurations say
        assert_placed(check_map(managed_build(p, config), ok=True))


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_ARM or shutil.which("make") is None, reason="needs arm-none-eabi-gcc and make")
def test_two_models_one_component(tmp_path):
    p = make_project("makefile", tmp_path)
    r = stm32ai_cli("generate", str(MODEL_A), str(MODEL_B), "--name", "network,kws", "--shared-activations",
                    "--into", str(p), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    comp = p / "stm32ai"
    assert {"network.c", "kws.c", "ai_models.c", "ai_models.h"} <= {f.name for f in comp.iterdir()}
    assert 'AI_SECTION(".bss.nn_activations")' in (comp / "ai_models.c").read_text()  # the shared pool
    assert "stm32ai_models" in (comp / "CMakeLists.txt").read_text()
    mk = (comp / "stm32ai.mk").read_text()
    assert "$(STM32AI_DIR)/kws.c" in mk and "$(STM32AI_DIR)/ai_models.c" in mk
    # one pool each (main.c creates `network` with its built-in pool), then build and check
    r = stm32ai_cli("generate", str(MODEL_A), str(MODEL_B), "--name", "network,kws", "--into", str(p), cwd=ROOT)
    assert r.returncode == 0 and "replace   stm32ai" in r.stdout and "unchanged Makefile" in r.stdout, r.stderr
    r = subprocess.run(["make", "-j2", "OPT=-O0"], cwd=p, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert_placed(check_map(p / "build" / "f746_app.map", ok=True))
