"""The installed wheel is what users run: build the sdist and the wheel from this checkout, install
the wheel into a fresh virtual environment (no checkout on the path, no LiteRT: it is an extra) and
run the commands from that install on a real MLPerf Tiny model. Catches missing package data,
missing dependencies and imports that only work from the source tree (docs/references.md).

One test on purpose: the build and the environment (~20 s) are shared by every check, and a single
test keeps pytest-xdist from building them once per worker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, SHARED_MODELS

from stm32ai import __version__
from stm32ai.validate.reference import TFLM_REQUIREMENT

KWS = SHARED_MODELS / "mlperf_tiny" / "kws_ref_model.tflite"
MODEL = KWS if KWS.is_file() else FIXTURES / "classifier_softmax_int8.tflite"
HYBRID = FIXTURES / "hybrid_fc_odd_relu_hybrid.tflite"
LITERT_INSTALL = "pip install 'stm32ai[litert]'"
SDIST_DATA = ("boards/nucleo-f401re.yaml", "boards/soc/stm32f401xe.yaml", "linker_scripts/stm32ai.ld.j2",
              "demo/main.c.j2",
              "demo/ai_validation.c", "project_templates/cookiecutter.json",
              "stm32ai/runtime/include/ai_runtime.h", "stm32ai/validate/host_main.c", "pyproject.toml")
WHEEL_DATA = ("stm32ai/_data/boards/nucleo-f401re.yaml", "stm32ai/_data/boards/soc/stm32f401xe.yaml",
              "stm32ai/_data/linker_scripts/stm32ai.ld.j2",
              "stm32ai/_data/demo/main.c.j2", "stm32ai/_data/project_templates/cookiecutter.json",
              "stm32ai/runtime/include/ai_runtime.h", "stm32ai/validate/host_main.c")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _sh(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout)


def _ok(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 0, f"{' '.join(map(str, p.args))} -> {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def _build(dist: Path) -> tuple[Path, Path]:
    """sdist, then the wheel from the sdist (python -m build's default): a file missing from the
    sdist breaks the wheel. No isolation: hatchling comes from the test extra, no download."""
    pytest.importorskip("build", reason="the test extra's `build` is not installed (pip install -e '.[test]')")
    pytest.importorskip("hatchling", reason="the test extra's `hatchling` is not installed")
    _ok(_sh([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)], dist))
    (sdist,), (wheel,) = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    return sdist, wheel


def _check_archives(sdist: Path, wheel: Path) -> None:
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert not [f for f in SDIST_DATA if f not in names], names
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = zf.read(f"stm32ai-{__version__}.dist-info/METADATA").decode()
    assert not [f for f in WHEEL_DATA if f not in names]
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    req = TFLM_REQUIREMENT.split(">", 1)[0]
    assert f"Requires-Dist: {req}" in meta and "Provides-Extra: litert" in meta
    assert "Requires-Dist: ai-edge-litert" in meta and "extra == 'litert'" in meta


def _venv(where: Path, wheel: Path) -> Path:
    try:
        import ensurepip  # noqa: F401
    except ImportError:
        pytest.fail("python's venv module lacks ensurepip: install python3-venv (scripts/setup.sh does)")
    _ok(_sh([sys.executable, "-m", "venv", str(where)], where.parent))
    py = where / "bin" / "python"
    _ok(_sh([str(py), "-m", "pip", "install", "-q", str(wheel)], where.parent, timeout=600))
    return where / "bin"


def _kv(text: str) -> dict[str, str]:
    return dict(ln.split(": ", 1) for ln in text.splitlines() if ": " in ln and " " not in ln.split(": ", 1)[0])


@pytest.mark.slow
def test_installed_wheel(tmp_path_factory):
    if not (shutil.which("arm-none-eabi-gcc") and shutil.which("make") and shutil.which("qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc, make and qemu-system-arm are needed")
    base = tmp_path_factory.mktemp("wheel")
    dist, work = base / "dist", base / "work"
    dist.mkdir()
    work.mkdir()
    sdist, wheel = _build(dist)
    _check_archives(sdist, wheel)
    bindir = _venv(base / "venv", wheel)
    tool = str(bindir / "stm32ai")

    def st(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return _sh([tool, *args], work, timeout)

    # Imported from the environment, not the checkout; the references as installed.
    where = _ok(_sh([str(bindir / "python"), "-c", "import stm32ai; print(stm32ai.__file__)"], work))
    assert where.startswith(str(base / "venv")), where
    out = _ok(st("--version")).splitlines()
    assert out[0] == f"stm32ai {__version__}" and out[1].startswith("tflite-micro: 0.dev")
    assert out[2].startswith(f"ai-edge-litert: not installed ({LITERT_INSTALL})")

    # Firmware for a real board, built with its Makefile; C only.
    _ok(st("generate", str(MODEL), "--board", "nucleo-f401re", "-o", "f401"))
    _ok(_sh(["make", "-C", "f401", "-j2"], work))
    assert (work / "f401" / "build" / "firmware.elf").is_file()
    _ok(st("generate", str(MODEL), "--c-only", "-o", "conly"))
    assert {"network.c", "network.h", "network_data.c", "network_data.h", "graph.json", "params.npz"} <= {
        p.name for p in (work / "conly").iterdir()}

    # The emulated board: built and run, must match TFLite Micro's expected output.
    _ok(st("generate", str(MODEL), "--board", "qemu-netduinoplus2", "-o", "qemu"))
    kv = _kv(_ok(st("run", "qemu", "--timeout", "240")))
    assert kv["result"] == "match" and kv["max_err"] == "0" and int(kv["instructions"]) > 0

    out = _ok(st("validate", str(MODEL), "--mode", "host", "-n", "2"))
    assert "result: match" in out and f"not installed: {LITERT_INSTALL}" in out
    assert "fits nucleo-f401re: yes" in _ok(st("analyze", str(MODEL), "--board", "nucleo-f401re"))
    assert "nucleo-f401re" in _ok(st("boards")) and "CONV_2D" in _ok(st("supported-ops"))

    # A hybrid model needs LiteRT, which this environment lacks: one line, the install command, exit 2.
    p = st("generate", str(HYBRID), "--board", "qemu-netduinoplus2", "-o", "hybrid")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert LITERT_INSTALL in p.stderr and not (work / "hybrid").exists()
    p = st("validate", str(HYBRID), "-n", "1")
    assert p.returncode == 2 and p.stderr.strip().endswith(LITERT_INSTALL) and "MISMATCH" not in p.stdout
    # ... and a project without expected output can still be generated.
    _ok(st("generate", str(HYBRID), "--board", "qemu-netduinoplus2", "-o", "hybrid", "--no-test-vector"))
    assert "#define DEMO_HAS_EXPECTED 0" in (work / "hybrid" / "Core" / "Inc" / "demo_data.h").read_text()
