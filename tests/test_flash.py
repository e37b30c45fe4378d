"""`stm32ai flash PROJECT` and the generated Makefile's flash targets, with fake programmer
executables on PATH that record their command line (no board, no real programmer needed)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stm32ai.cli import main
from tests.conftest import FIXTURES

MODEL = FIXTURES / "act_chain_int8.tflite"
EXES = {"openocd": "openocd", "st-flash": "st-flash", "cubeprog": "STM32_Programmer_CLI"}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A disco-l475-iot01 project whose image is 'built' (placeholder files: nothing is compiled)."""
    out = tmp_path_factory.mktemp("flash") / "proj"
    assert main(["generate", str(MODEL), "--board", "disco-l475-iot01", "-o", str(out)]) == 0
    (out / "build").mkdir()
    (out / "build" / "firmware.elf").write_bytes(b"\x7fELF")
    (out / "build" / "firmware.bin").write_bytes(b"\x00" * 8)
    return out


def _fake(bin_dir: Path, exe: str, log: Path, output: str = "", code: int = 0) -> None:
    bin_dir.mkdir(exist_ok=True)
    f = bin_dir / exe
    f.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {log}\n'
                 f"printf '%s\\n' '{output}'\nexit {code}\n")
    f.chmod(0o755)


@pytest.fixture
def path_only(monkeypatch, tmp_path):
    """PATH = a directory of fake programmers + the system's (which has none of them)."""
    for exe in EXES.values():
        if shutil.which(exe):
            pytest.skip(f"a real {exe} is installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return bin_dir


def _expected(project: Path) -> dict[str, list[str]]:
    elf, bin_ = str(project / "build" / "firmware.elf"), str(project / "build" / "firmware.bin")
    return {
        "openocd": ["-f", "board/st_b-l475e-iot01a.cfg", "-c", f"program {elf} verify reset exit"],
        "st-flash": ["--reset", "write", bin_, "0x08000000"],          # RM0351 §2.2.2: flash at 0x08000000
        "cubeprog": ["-c", "port=SWD", "-w", elf, "-v", "-rst"],
    }


@pytest.mark.parametrize("name", sorted(EXES))
def test_each_programmer_exact_command(project, path_only, tmp_path, name, capsys):
    log = tmp_path / "argv"
    _fake(path_only, EXES[name], log)
    assert main(["flash", str(project), "--programmer", name]) == 0
    assert log.read_text().splitlines() == _expected(project)[name]
    assert "flashed" in capsys.readouterr().err


def test_first_installed_wins(project, path_only, tmp_path):
    log_o, log_s = tmp_path / "o", tmp_path / "s"
    _fake(path_only, "st-flash", log_s)
    _fake(path_only, "STM32_Programmer_CLI", tmp_path / "c")
    assert main(["flash", str(project)]) == 0
    assert log_s.is_file() and not (tmp_path / "c").exists()     # st-flash before CubeProgrammer
    _fake(path_only, "openocd", log_o)
    assert main(["flash", str(project)]) == 0
    assert log_o.read_text().splitlines()[:2] == ["-f", "board/st_b-l475e-iot01a.cfg"]


def test_dry_run_prints_and_runs_nothing(project, path_only, tmp_path, capsys):
    log = tmp_path / "argv"
    _fake(path_only, "st-flash", log)
    assert main(["flash", str(project), "--dry-run", "--monitor"]) == 0
    out = capsys.readouterr().out.splitlines()
    elf_dir = project / "build"
    assert out == [f"st-flash --reset write {elf_dir / 'firmware.bin'} 0x08000000",
                   "then: stm32ai monitor --port /dev/ttyACM0"]
    assert not log.exists()


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_no_programmer(project, path_only, capsys):
    assert main(["flash", str(project)]) == 2
    line = _one_line_error(capsys)
    assert line.startswith("stm32ai: error: no programmer found")
    assert "openocd" in line and "stlink-tools" in line and "STM32CubeProgrammer" in line


def test_asked_programmer_missing(project, path_only, capsys):
    assert main(["flash", str(project), "--programmer", "cubeprog"]) == 2
    assert "STM32_Programmer_CLI not found: install STM32CubeProgrammer" in _one_line_error(capsys)


@pytest.mark.parametrize("name,output", [
    ("st-flash", "Found 0 stlink programmers"),
    ("openocd", "Error: open failed"),
    ("cubeprog", "Error: No debug probe detected."),
])
def test_no_board_attached(project, path_only, tmp_path, name, output, capsys):
    _fake(path_only, EXES[name], tmp_path / "argv", output=output, code=1)
    assert main(["flash", str(project), "--programmer", name]) == 2
    line = _one_line_error(capsys)
    assert "no board attached" in line and output in line and "B-L475E-IOT01A" in line


def test_programmer_failure_is_one_line(project, path_only, tmp_path, capsys):
    _fake(path_only, "st-flash", tmp_path / "argv", output="Flash write failed at 0x08000000", code=255)
    assert main(["flash", str(project)]) == 2
    assert "st-flash failed (exit 255): Flash write failed" in _one_line_error(capsys)


def test_emulated_board_and_not_a_project(tmp_path, capsys):
    out = tmp_path / "nd"
    assert main(["generate", str(MODEL), "--board", "qemu-netduinoplus2", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["flash", str(out)]) == 2
    assert "is emulated: there is nothing to flash" in _one_line_error(capsys)
    assert main(["flash", str(tmp_path)]) == 2
    assert "not an stm32ai project" in _one_line_error(capsys)


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_makefile_flash_runs_the_same_commands(project, path_only, tmp_path):
    env = dict(os.environ)
    keep = ["-o", "build/firmware.elf", "-o", "build/firmware.bin"]    # the placeholder image is "built"

    def make(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "-s", "-C", str(project), *keep, *args], env=env,
                              capture_output=True, text=True)

    p = make("flash")
    assert p.returncode == 2 and "no programmer found" in p.stderr and "stlink-tools" in p.stderr
    rel = {k: [a.replace(str(project) + "/", "") for a in v] for k, v in _expected(project).items()}
    for name, target in (("openocd", "flash-openocd"), ("st-flash", "flash-stlink"),
                         ("cubeprog", "flash-cubeprog")):
        log = tmp_path / f"{name}.argv"
        _fake(path_only, EXES[name], log)
        assert make(target).returncode == 0
        assert log.read_text().splitlines() == rel[name]
    log = tmp_path / "openocd.argv"
    log.unlink()
    assert make("flash").returncode == 0 and log.read_text().splitlines() == rel["openocd"]


def test_board_without_openocd_config(tmp_path, path_only, capsys):
    import yaml

    from stm32ai.boards import boards_dir

    data = yaml.safe_load((boards_dir() / "nucleo-f401re.yaml").read_text())
    del data["openocd"]
    data["id"] = "my-f401"
    board = tmp_path / "my-f401.yaml"
    board.write_text(yaml.safe_dump(data))
    out = tmp_path / "proj"
    assert main(["generate", str(MODEL), "--board", str(board), "-o", str(out), "--no-test-vector"]) == 0
    assert "openocd" not in (out / "Makefile").read_text().split("flash:", 1)[1].split("monitor:")[0]
    (out / "build").mkdir()
    (out / "build" / "firmware.elf").write_bytes(b"\x7fELF")
    (out / "build" / "firmware.bin").write_bytes(b"\x00")
    _fake(path_only, "openocd", tmp_path / "o")
    _fake(path_only, "st-flash", tmp_path / "s")
    capsys.readouterr()
    assert main(["flash", str(out)]) == 0 and (tmp_path / "s").is_file() and not (tmp_path / "o").exists()
    capsys.readouterr()
    assert main(["flash", str(out), "--programmer", "openocd"]) == 2
    assert "names no OpenOCD config" in _one_line_error(capsys)


def test_programmer_commands_of_the_new_boards():
    """issue 22: OpenOCD config files (several for the parts OpenOCD 0.12 has no board file for),
    st-flash at each part's flash origin (RM0456 / RM0481 / RM0455 / RM0399: 0x08000000)."""
    from stm32ai.boards import load_board
    from stm32ai.project.flash import flash_commands

    for bid, cfgs in (("nucleo-u575zi-q", ["interface/stlink.cfg", "target/stm32u5x.cfg"]),
                      ("b-u585i-iot02a", ["interface/stlink.cfg", "target/stm32u5x.cfg"]),
                      ("nucleo-h563zi", ["interface/stlink.cfg", "target/stm32h5x.cfg"]),
                      ("nucleo-h7a3zi-q", ["interface/stlink.cfg", "target/stm32h7x.cfg"]),
                      ("disco-h747i", ["board/stm32h747i-disco.cfg"])):
        c = flash_commands(load_board(bid), "f.elf", "f.bin")
        args = [x for f in cfgs for x in ("-f", f)]
        assert c["openocd"] == ["openocd", *args, "-c", "program f.elf verify reset exit"]
        assert c["st-flash"] == ["st-flash", "--reset", "write", "f.bin", "0x08000000"]
        assert c["cubeprog"][-4:] == ["-w", "f.elf", "-v", "-rst"]
