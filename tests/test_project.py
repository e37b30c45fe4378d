"""Project generation: placement and fits check, the generated tree, builds for every board with
zero warnings, and runs on the emulated boards (QEMU) that must print `result: match`.

Most tests use a tiny hand-made model (`write_fake_model`: output = input + 1, written against
the generated-C contract of docs/architecture.md) so they exercise the project machinery alone; the
`test_real_*` tests go through the real compiler, emitter and TFLite Micro reference.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import threading
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, SHARED_MODELS

from stm32ai.boards import list_boards, load_board
from stm32ai.errors import Stm32aiError
from stm32ai.project.generator import generate_project, plan_placement
from stm32ai.project.monitor import monitor, parse_line
from stm32ai.project.run import TIMEOUT_EXIT_CODE, build_project, qemu_command, run_qemu
from stm32ai.resources import runtime_dir

HAVE_TOOLS = shutil.which("arm-none-eabi-gcc") is not None and shutil.which("make") is not None
HAVE_QEMU = shutil.which("qemu-system-arm") is not None
needs_tools = pytest.mark.skipif(not HAVE_TOOLS, reason="arm-none-eabi-gcc/make not installed")
needs_qemu = pytest.mark.skipif(not (HAVE_TOOLS and HAVE_QEMU), reason="qemu-system-arm not installed")

X = np.arange(-8, 8, dtype=np.int8).reshape(1, 16)


def write_fake_model(dest: Path, name: str = "fake", n: int = 16, weights: int = 64,
                     act: int = 64) -> Path:
    """A hand-written model following the emitter's C contract: `<name>_info`, weights in
    .nn_weights, a built-in pool in .nn_activations, I/O tensors in the pool; y = x + w[0] (= 1)."""
    up = name.upper()
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"{name}.h").write_text(
        f'#ifndef AI_{up}_H\n#define AI_{up}_H\n#include "ai_platform.h"\n'
        f"#define AI_{up}_IN_NUM 1\n#define AI_{up}_OUT_NUM 1\n#define AI_{up}_ACTIVATIONS_SIZE {act}u\n"
        f"extern ai_model_info {name}_info;\nextern ai_u8 {name}_activations[];\n#endif\n")
    (dest / f"{name}_data.h").write_text(
        f'#ifndef AI_{up}_DATA_H\n#define AI_{up}_DATA_H\n#include "ai_platform.h"\n'
        f"#define AI_{up}_WEIGHTS_SIZE {weights}u\nextern const ai_u8 {name}_weights[];\n#endif\n")
    (dest / f"{name}_data.c").write_text(
        f'#include "{name}_data.h"\nAI_ALIGNED(8) AI_SECTION(".nn_weights")\n'
        f"const ai_u8 {name}_weights[{weights}] = {{ 1 }};\n")
    (dest / f"{name}.c").write_text(f"""#include <stddef.h>
#include <stdint.h>
#include "{name}.h"
#include "{name}_data.h"
AI_ALIGNED(8) AI_SECTION(".nn_activations") ai_u8 {name}_activations[{act}];
static const int64_t s_shape[2] = {{1, {n}}};
static ai_tensor s_in = {{NULL, {{1, 0}}, 2, {{0, 8, 1}}, s_shape, NULL, 0, {{0, 0, NULL, NULL}}, {n}u, 0u, "in"}};
static ai_tensor s_out = {{NULL, {{1, 0}}, 2, {{0, 8, 1}}, s_shape, NULL, 0, {{0, 0, NULL, NULL}}, {n}u, 32u, "out"}};
static ai_tensor *s_inputs[1] = {{&s_in}};
static ai_tensor *s_outputs[1] = {{&s_out}};
static const ai_u8 *s_w;
static const ai_ptr get_params(void) {{ return {name}_weights; }}
static ai_status create(const ai_ptr weights, const ai_ptr activations) {{
  ai_u8 *a = (ai_u8 *)(uintptr_t)activations;
  if (a == NULL) {{ a = {name}_activations; }}
  s_w = weights != NULL ? weights : {name}_weights;
  s_in.data = a;
  s_out.data = a + 32;
  return AI_OK;
}}
static ai_status destroy(void) {{ return AI_OK; }}
static ai_status run(ai_tensor *input[], ai_tensor *output[]) {{
  const int8_t *x = (const int8_t *)input[0]->data;
  int8_t *y = (int8_t *)output[0]->data;
  for (int i = 0; i < {n}; i++) {{ y[i] = (int8_t)(x[i] + s_w[0]); }}
  return AI_OK;
}}
ai_model_info {name}_info = {{
  "{name}", "2024-01-01", "fake", "0", AI_API_VERSION, 1u, 1u, 1u, {act}u, {weights}u,
  {name}_activations, s_inputs, s_outputs, get_params, create, destroy, run, NULL,
  0u, NULL, NULL, NULL, /* n_pools 0: the single pool above (an API 1.0 descriptor) */
  0u, NULL, NULL, NULL, NULL, /* no ai_run_ctx: the runtime runs it the pre-1.2 way */
  0u /* row_inputs (1.3): no row-fed input */
}};
""")
    rt = runtime_dir()
    for sub, files in (("include", ["ai_platform.h", "ai_runtime.h"]), ("src", ["ai_runtime.c"])):
        (dest / "runtime" / sub).mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy2(rt / sub / f, dest / "runtime" / sub / f)
    return dest


@pytest.fixture(scope="module")
def fake_c(tmp_path_factory) -> Path:
    return write_fake_model(tmp_path_factory.mktemp("fake") / "c")


def gen(out: Path, board: str, c_dir: Path, expected=None, **kw) -> Path:
    return generate_project(
        out, board=load_board(board), name=kw.pop("name", "fake"), c_dir=c_dir, test_inputs=[X],
        expected_outputs=[X + 1 if expected is None else expected],
        activations_pool=kw.pop("activations_pool", None), weights_pool=kw.pop("weights_pool", None),
        activations_bytes=kw.pop("activations_bytes", 64), weights_bytes=kw.pop("weights_bytes", 64),
        tool_version="test", **kw)


# ---------------------------------------------------------------------------------------------
# Placement and the fits check
# ---------------------------------------------------------------------------------------------
def test_default_placement():
    p = plan_placement(load_board("disco-f746"), activations_bytes=40_000, weights_bytes=80_000)
    assert (p.activations_region, p.weights_region, p.weights_copied) == ("dtcm", "flash", False)
    h7 = plan_placement(load_board("nucleo-h743zi"), activations_bytes=50_000, weights_bytes=1)
    assert h7.activations_region == "dtcm"


def test_placement_falls_back_to_the_next_region():
    # 60 KB does not fit the F746's 64 KiB DTCM once its 8 KiB stack is there: SRAM1 is next.
    p = plan_placement(load_board("disco-f746"), activations_bytes=60_000, weights_bytes=1000)
    assert p.activations_region == "sram1"
    p = plan_placement(load_board("nucleo-h743zi"), activations_bytes=300_000, weights_bytes=1)
    assert p.activations_region == "axi_sram"


def test_placement_user_order_and_weights_in_ram():
    b = load_board("qemu-mps2-an386")
    p = plan_placement(b, activations_bytes=1000, weights_bytes=1000, activations_pool=["psram"],
                       weights_pool=["psram"])
    assert p.activations_region == "psram" and p.weights_region == "psram" and p.weights_copied


def test_placement_refuses_with_numbers():
    with pytest.raises(Stm32aiError) as e:
        plan_placement(load_board("nucleo-f401re"), activations_bytes=200_000, weights_bytes=1000)
    msg = str(e.value)
    assert "activations (200,000 B) do not fit on nucleo-f401re" in msg
    assert "sram has" in msg and "B free (96 KiB" in msg and "stack" in msg
    assert "choose a board with more memory" in msg and "\n" not in msg
    with pytest.raises(Stm32aiError, match=r"weights \(3,000,000 B\) do not fit.*flash has"):
        plan_placement(load_board("nucleo-f401re"), activations_bytes=1, weights_bytes=3_000_000)


def test_placement_suggests_another_region():
    with pytest.raises(Stm32aiError, match="try --activations-pool sram1"):
        plan_placement(load_board("disco-f746"), activations_bytes=100_000, weights_bytes=1,
                       activations_pool=["dtcm"])


def test_placement_bad_region_names_and_bring_up(tmp_path):
    import yaml

    b = load_board("disco-f746")
    with pytest.raises(Stm32aiError, match="no memory region 'ccm'"):
        plan_placement(b, activations_bytes=1, weights_bytes=1, activations_pool=["ccm"])
    # a region whose bring-up stm32ai does not generate (the F769 kit without its SDRAM's part
    # description) is refused ...
    data = yaml.safe_load((ROOT / "boards" / "disco-f769.yaml").read_text())
    del data["external"]["sdram"]
    (tmp_path / "disco-f769.yaml").write_text(yaml.safe_dump(data))
    f769 = load_board(tmp_path / "disco-f769.yaml")
    with pytest.raises(Stm32aiError, match="sdram needs fmc_sdram bring-up, which stm32ai does not generate"):
        plan_placement(f769, activations_bytes=1, weights_bytes=1, activations_pool=["sdram"])
    # ... and skipped when a later one fits
    p = plan_placement(f769, activations_bytes=1, weights_bytes=1, activations_pool=["sdram", "sram1"])
    assert p.activations_region == "sram1"
    # external memories it brings up hold pools: weights read in place from the QSPI flash
    p = plan_placement(b, activations_bytes=1, weights_bytes=1, weights_pool=["qspi", "flash"],
                       activations_pool=["sdram"])
    assert (p.weights_region, p.weights_copied, p.activations_region) == ("qspi", False, "sdram")
    # not weights in external RAM: the reset-time copy runs before SystemInit brings it up
    with pytest.raises(Stm32aiError, match="sdram is external RAM, brought up after the reset-time copy"):
        plan_placement(b, activations_bytes=1, weights_bytes=1, weights_pool=["sdram"])


# ---------------------------------------------------------------------------------------------
# The generated tree
# ---------------------------------------------------------------------------------------------
def test_generated_tree(tmp_path, fake_c):
    p = gen(tmp_path / "proj", "disco-f746", fake_c)
    for f in ("Makefile", "CMakeLists.txt", "CMakePresets.json", "cmake/gcc-arm-none-eabi.cmake",
              ".project", ".cproject", "README.md", "disco-f746.ld", "stm32ai_project.json",
              "Core/Src/startup.c", "Core/Src/system.c", "Core/Src/console.c", "Core/Src/syscalls.c",
              "Core/Src/cycles.c", "Core/Src/main.c", "Core/Src/demo_data.c", "Core/Inc/board.h",
              "Core/Inc/demo_data.h", "Model/fake.c", "Model/fake_data.h",
              "Model/runtime/include/ai_runtime.h", "Model/runtime/src/ai_runtime.c"):
        assert (p / f).is_file(), f
    mk = (p / "Makefile").read_text()
    assert "-Wall -Wextra -Werror" in mk and "-mcpu=cortex-m7" in mk and "-mfpu=fpv5-sp-d16" in mk
    assert "--gc-sections" in mk and "-ffunction-sections -fdata-sections" in mk and "-O2" in mk
    cp = ET.parse(p / ".cproject").getroot()
    vals = {o.get("superClass"): o.get("value") for o in cp.iter("option")}
    assert vals["com.st.stm32cube.ide.mcu.gnu.managedbuild.option.target_mcu"] == "STM32F746NGHx"
    assert vals["com.st.stm32cube.ide.mcu.gnu.managedbuild.option.fpu"].endswith("fpv5-sp-d16")
    assert vals["com.st.stm32cube.ide.mcu.gnu.managedbuild.tool.c.linker.option.script"].endswith(
        "/disco-f746.ld}")
    incs = [v.get("value") for v in cp.iter("listOptionValue")]
    assert "../Core/Inc" in incs and "../Model/runtime/include" in incs
    assert {e.get("name") for e in cp.iter("entry")} == {"Core", "Model"}
    assert ET.parse(p / ".project").getroot().find("name").text == "fake_disco_f746"
    json.loads((p / "CMakePresets.json").read_text())
    readme = (p / "README.md").read_text()
    for word in ("make", "cmake --preset", "STM32CubeIDE", "st-flash", "openocd", "stm32ai monitor"):
        assert word in readme
    board_h = (p / "Core/Inc/board.h").read_text()
    assert "#define BOARD_CPU_HZ 216000000u" in board_h and "CLK_PLLCFGR_VAL 0x09406C19u" in board_h
    lds = (p / "disco-f746.ld").read_text()
    assert ".nn_activations (NOLOAD) : ALIGN(8)" in lds and "> DTCM" in lds and ".nn_weights" in lds
    m = json.loads((p / "stm32ai_project.json").read_text())
    assert m["board"] == "disco-f746" and m["elf"] == "build/firmware.elf"
    assert m["placement"]["activations_region"] == "dtcm"


def test_refuses_non_empty_dir_and_force_replaces(tmp_path, fake_c):
    out = tmp_path / "proj"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(Stm32aiError, match="not empty"):
        gen(out, "qemu-netduinoplus2", fake_c)
    assert (out / "mine.txt").read_text() == "keep"
    with pytest.raises(Stm32aiError, match="not generated by stm32ai"):  # --force never deletes user files
        gen(out, "qemu-netduinoplus2", fake_c, force=True)
    assert (out / "mine.txt").read_text() == "keep"
    (out / "mine.txt").unlink()
    gen(out, "qemu-netduinoplus2", fake_c)
    (out / "mine.txt").write_text("scratch")
    gen(out, "qemu-netduinoplus2", fake_c, force=True)  # stm32ai's own project: replaced
    assert not (out / "mine.txt").exists() and (out / "Makefile").is_file() and (out / ".stm32ai-generated").is_file()
    assert [x.name for x in tmp_path.iterdir()] == ["proj"]  # no temp dirs left behind


def test_no_half_written_project(tmp_path, fake_c):
    out = tmp_path / "proj"
    with pytest.raises(Stm32aiError, match="do not fit"):
        gen(out, "nucleo-f401re", fake_c, activations_bytes=10**6)
    with pytest.raises(Stm32aiError, match="lacks"):
        gen(out, "nucleo-f401re", fake_c, name="other")
    with pytest.raises(Stm32aiError, match="dtype float64"):
        generate_project(out, board=load_board("nucleo-f401re"), name="fake", c_dir=fake_c,
                         test_inputs=[X.astype(np.float64)], expected_outputs=[X],
                         activations_pool=None, weights_pool=None, activations_bytes=1,
                         weights_bytes=1, tool_version="t")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_demo_data_embeds_vectors(tmp_path, fake_c):
    y = np.linspace(-1, 1, 5, dtype=np.float32)
    p = generate_project(tmp_path / "p", board=load_board("qemu-netduinoplus2"), name="fake",
                         c_dir=fake_c, test_inputs=[X, np.array([300, -2], np.int16)],
                         expected_outputs=[y], activations_pool=None, weights_pool=None,
                         activations_bytes=64, weights_bytes=64, tool_version="t")
    src = (p / "Core/Src/demo_data.c").read_text()
    assert "0xf8, 0xf9, 0xfa" in src             # -8, -7, -6 as int8
    assert "0x2c, 0x01, 0xfe, 0xff" in src       # 300, -2 as little-endian int16
    assert "{ s_expected_0, 20u, 5u, 2u, 32u }" in src
    assert "#define DEMO_N_INPUTS 2" in (p / "Core/Inc/demo_data.h").read_text()


def test_qemu_command_line(tmp_path):
    cmd = qemu_command(tmp_path / "f.elf", load_board("qemu-netduinoplus2"))
    s = " ".join(cmd)
    assert "-M netduinoplus2" in s and "-semihosting-config enable=on,target=native" in s
    assert "-icount shift=0" in s and "-serial stdio" in s and s.endswith("f.elf")
    with pytest.raises(Stm32aiError, match="not emulated"):
        qemu_command(tmp_path / "f.elf", load_board("disco-f746"))


def test_monitor_reads_until_done():
    lines = b"boot noise\r\nmodel: fake\r\nresult: match\r\ncycles: 30\r\ndone: 1\r\n"
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve():
        conn, _ = srv.accept()
        threading.Event().wait(0.3)   # pyserial's socket:// open flushes what is already there
        conn.sendall(lines)
        threading.Event().wait(0.5)
        conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    from io import StringIO

    from rich.console import Console

    buf = StringIO()
    assert monitor(f"socket://127.0.0.1:{port}", timeout_s=10, out=Console(file=buf, width=100)) == 0
    assert "match" in buf.getvalue() and "boot noise" in buf.getvalue()
    srv.close()
    assert parse_line("max_err: 1.5e-07") == ("max_err", "1.5e-07") and parse_line("no colon") is None


# ---------------------------------------------------------------------------------------------
# Builds (every board, zero warnings) and emulated runs
# ---------------------------------------------------------------------------------------------
def _make(p: Path) -> str:
    r = subprocess.run(["make", "-C", str(p), "-j2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


@pytest.mark.slow
@needs_tools
def test_every_board_builds_without_warnings(tmp_path, fake_c):
    boards = [b.id for b in list_boards()]
    projects = [gen(tmp_path / b, b, fake_c) for b in boards]
    with ThreadPoolExecutor(max_workers=2) as ex:
        logs = list(ex.map(_make, projects))
    for b, p, log in zip(boards, projects, logs, strict=True):
        assert not re.search(r"warning", log, re.I), f"{b}:\n{log}"
        for ext in ("elf", "bin", "hex", "map"):
            assert (p / "build" / f"firmware.{ext}").is_file(), (b, ext)
        assert "text" in log and "firmware.elf" in log       # arm-none-eabi-size summary


def _gen_build_run(out: Path, board: str, c_dir: Path, **kw) -> tuple[int, str]:
    """Generate for `board`, build, run on QEMU: (exit code, output)."""
    build_project(gen(out, board, c_dir, **kw))
    return run_qemu(out, load_board(board), timeout_s=60)


@pytest.fixture(scope="module")
def netduino(tmp_path_factory, fake_c) -> tuple[Path, Path]:
    """The fake model's netduinoplus2 project, built once for the tests that run it: (project, elf)."""
    p = gen(tmp_path_factory.mktemp("nd") / "p", "qemu-netduinoplus2", fake_c)
    return p, build_project(p)


@pytest.mark.slow
@needs_qemu
def test_netduinoplus2_prints_match(netduino):
    p, elf = netduino
    seen: list[str] = []
    code, text = run_qemu(p, load_board("qemu-netduinoplus2"), timeout_s=60, stream=seen.append)
    assert code == 0, text
    kv = dict(parse_line(ln) for ln in text.splitlines() if parse_line(ln))
    assert kv["result"] == "match" and kv["max_err"] == "0" and kv["done"] == "1"
    assert kv["model"] == "fake" and kv["board"] == "qemu-netduinoplus2"
    assert kv["sysclk_hz"] == "168000000" and kv["cycle_counter"] == "systick"
    assert kv["activations_bytes"] == "64" and kv["weights_bytes"] == "64"
    # QEMU -icount: the count is instructions, never "cycles", and no (virtual) milliseconds
    assert int(kv["instructions"]) > 0 and "cycles" not in kv and "ms" not in kv
    assert 0 < int(kv["stack_used"]) < int(kv["stack_size"])
    assert kv["clock"].startswith("fixed 168000000")
    assert seen[-1] == "done: 1" and elf.name == "firmware.elf"


@pytest.mark.slow
@needs_qemu
def test_console_over_a_tcp_socket(netduino):
    # QEMU's console on a TCP server socket, as `stm32ai monitor --port socket://...` reads it.
    p = netduino[0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(rc=run_qemu(
        p, load_board("qemu-netduinoplus2"), timeout_s=60,
        serial=f"tcp:127.0.0.1:{port},server=on,wait=on")[0]))
    t.start()
    data = b""
    for _ in range(200):   # QEMU needs a moment to listen
        try:
            conn = socket.create_connection(("127.0.0.1", port), timeout=10)
            break
        except OSError:
            threading.Event().wait(0.05)
    with conn:
        while b"done: 1" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    t.join(60)
    assert b"result: match" in data and result["rc"] == 0


@pytest.mark.slow
@needs_qemu
def test_mismatch_exits_1(tmp_path, fake_c):
    code, text = _gen_build_run(tmp_path / "p", "qemu-netduinoplus2", fake_c, expected=X + 2)
    assert code == 1 and "result: mismatch" in text and "max_err: 1" in text


@pytest.mark.slow
@needs_qemu
def test_mps2_with_weights_copied_to_ram(tmp_path, fake_c):
    # weights placed in PSRAM: loaded from the code region by the startup copy table
    code, text = _gen_build_run(tmp_path / "p", "qemu-mps2-an386", fake_c, weights_pool=["psram"],
                                activations_pool=["psram"])
    assert "(copied from code at reset)" in (tmp_path / "p" / "qemu-mps2-an386.ld").read_text()
    assert code == 0 and "result: match" in text and "sysclk_hz: 25000000" in text


@pytest.mark.slow
@needs_qemu
def test_clock_bring_up_falls_back_and_never_hangs(tmp_path, fake_c):
    # The NUCLEO-F401RE firmware on QEMU's F405 model: QEMU's RCC reads as 0, so HSIRDY never
    # rises; the bounded wait gives up, the reset clock is kept and the fallback is reported.
    # USART2 (0x40004400) is QEMU's second serial port.
    p = gen(tmp_path / "p", "nucleo-f401re", fake_c)
    elf = build_project(p)
    code, text = run_qemu(elf, load_board("nucleo-f401re"), timeout_s=60, machine="netduinoplus2",
                          serial_index=1, stop_on_done=True)
    assert code == 0, text
    assert "clock: fallback hsi 16000000 (HSI not ready)" in text
    assert "sysclk_hz: 16000000" in text and "result: match" in text
    # Without semihosting exit (a hardware board) the demo then sleeps: the hard timeout ends it.
    code, _ = run_qemu(elf, load_board("nucleo-f401re"), timeout_s=3, machine="netduinoplus2",
                       serial_index=1)
    assert code == TIMEOUT_EXIT_CODE


@pytest.mark.slow
@needs_tools
def test_build_error_reports_the_first_compiler_error(tmp_path, fake_c):
    p = gen(tmp_path / "p", "qemu-netduinoplus2", fake_c)
    with (p / "Model" / "fake.c").open("a") as f:
        f.write("\nint broken(void) { return undefined_symbol; }\n")
    with pytest.raises(Stm32aiError, match=r"build of .* failed: .*fake\.c.*error: 'undefined_symbol'"):
        build_project(p)


@pytest.mark.slow
@needs_tools
@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("ninja") is None,
                    reason="cmake/ninja not installed")
@pytest.mark.parametrize("board", ["nucleo-h743zi", "nucleo-u575zi-q"])
def test_cmake_preset_builds(tmp_path, fake_c, board):
    p = gen(tmp_path / "p", board, fake_c)
    for cmd in (["cmake", "--preset", "Release"], ["cmake", "--build", "--preset", "Release"]):
        r = subprocess.run(cmd, cwd=p, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "warning" not in (r.stdout + r.stderr).lower()
    assert (p / "build/Release/firmware.elf").is_file()
    assert (p / "build/Release/firmware.hex").is_file()


# ---------------------------------------------------------------------------------------------
# Real models: compiler + emitter + TFLite Micro reference, run on the emulated STM32
# ---------------------------------------------------------------------------------------------
def _real_project(tmp_path: Path, model: Path, board: str, in_pool: bool = True) -> Path:
    from stm32ai.emitter import emit_c
    from stm32ai.pipeline import compile_model
    from stm32ai.report import build_report
    from stm32ai.validate.reference import random_inputs, run_tflm

    c = compile_model(model, "network", inputs_in_pool=in_pool, outputs_in_pool=in_pool)
    emit_c(c.doc, c.params, "network", tmp_path / "c")
    r = build_report(c)
    x = random_inputs(model, 1, 0)
    y = run_tflm(model, x)
    return generate_project(tmp_path / board, board=load_board(board), name="network",
                            c_dir=tmp_path / "c", test_inputs=list(x), expected_outputs=list(y),
                            activations_pool=None, weights_pool=None,
                            activations_bytes=r.activations_bytes, weights_bytes=r.weights_bytes,
                            tool_version="test", reference="TFLite Micro")


def _run_real(tmp_path: Path, model: Path, board: str = "qemu-netduinoplus2",
              in_pool: bool = True) -> dict[str, str]:
    pytest.importorskip("tflite_micro")
    p = _real_project(tmp_path, model, board, in_pool)
    build_project(p)
    code, text = run_qemu(p, load_board(board), timeout_s=300)
    assert code == 0, text
    return dict(parse_line(ln) for ln in text.splitlines() if parse_line(ln))


@pytest.mark.slow
@needs_qemu
@pytest.mark.parametrize("in_pool", [True, False], ids=["io-in-pool", "no-io-allocation"])
def test_real_fixture_model_matches(tmp_path, in_pool):
    # no-io-allocation: the demo binds its own buffers to the application-owned I/O tensors
    kv = _run_real(tmp_path, FIXTURES / "classifier_softmax_int8.tflite", in_pool=in_pool)
    assert kv["result"] == "match" and kv["max_err"] == "0"


@pytest.mark.slow
@needs_qemu
@pytest.mark.parametrize("rel", ["mlperf_tiny/pretrainedResnet_quant.tflite",
                                 "mlperf_tiny/kws_ref_model.tflite"])
def test_real_mlperf_tiny_matches_on_netduinoplus2(tmp_path, rel):
    model = SHARED_MODELS / rel
    if not model.exists():
        pytest.skip(f"{rel} not present in ../shared/models")
    kv = _run_real(tmp_path, model)
    assert kv["result"] == "match" and kv["max_err"] == "0"
    assert int(kv["instructions"]) > 100_000


@pytest.mark.slow
@needs_tools
@pytest.mark.parametrize("board", ["nucleo-h743zi", "nucleo-u575zi-q"])
def test_real_model_builds_without_warnings(tmp_path, board):
    # The whole runtime and kernel library under the Cortex-M7 (FPv5-D16) and Cortex-M33 (DSP,
    # FPv5-SP) flags (the Cortex-M4 build is covered by the netduinoplus2 runs).
    pytest.importorskip("tflite_micro")
    p = _real_project(tmp_path, FIXTURES / "classifier_softmax_int8.tflite", board)
    log = _make(p)
    assert "warning" not in log.lower(), log
