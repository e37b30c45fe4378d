"""The host build's runtime cache (stm32ai/validate/host.py): the runtime is compiled once per
(compiler, flags, runtime sources), every model links against those objects, a change to any
of them builds a new entry, concurrent builders share one entry, and the results stay those
of the reference."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES

from stm32ai.emitter import copy_runtime
from stm32ai.errors import Stm32aiError
from stm32ai.pipeline import compile_model
from stm32ai.resources import runtime_dir
from stm32ai.validate.host import CFLAGS, _runtime_key, runtime_objects
from stm32ai.validate.run import validate_model

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")
MODELS = [FIXTURES / "conv_stride2_same_int8.tflite", FIXTURES / "add_residual_int8.tflite"]
N_SOURCES = len(list((runtime_dir() / "src").glob("*.c")))


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "host-runtime").iterdir() if p.is_dir())


def _check_matches_reference(model: Path) -> None:
    res = validate_model(model, n=2, seed=3, compiled=compile_model(model))
    verdict = [c for c in res.comparisons if c.verdict]
    if not verdict:
        pytest.skip(f"no reference runs {model.name}")
    assert all(verdict[0].ok), f"{model.name} vs {verdict[0].reference}"


def test_runtime_compiled_once_per_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("STM32AI_CACHE_DIR", str(tmp_path))
    _check_matches_reference(MODELS[0])
    (entry,) = _entries(tmp_path)
    objs = sorted(entry.glob("*.o"))
    assert len(objs) == N_SOURCES
    stamps = [p.stat().st_mtime_ns for p in objs]
    _check_matches_reference(MODELS[1])
    assert _entries(tmp_path) == [entry]
    assert [p.stat().st_mtime_ns for p in objs] == stamps  # reused, not rebuilt
    # another define is another configuration: its own entry, the first one kept
    copy_runtime(tmp_path / "c")
    other = runtime_objects(tmp_path / "c" / "runtime", "cc", [*CFLAGS, "-DAI_MAX_INSTANCES=3"], tmp_path)
    assert len(other) == N_SOURCES and other[0].parent != entry
    assert runtime_objects(tmp_path / "c" / "runtime", "cc", CFLAGS, tmp_path) == objs
    assert len(_entries(tmp_path)) == 2


def test_any_source_or_header_change_changes_the_key(tmp_path):
    copy_runtime(tmp_path)
    rt = tmp_path / "runtime"
    key = _runtime_key("cc", CFLAGS, rt)
    assert _runtime_key("cc", [*CFLAGS, "-DAI_POISON"], rt) != key
    for f in (rt / "include" / "ai_platform.h", rt / "src" / "ai_pool.c"):
        text = f.read_text()
        f.write_text(text + "\n")
        assert _runtime_key("cc", CFLAGS, rt) != key, f.name
        f.write_text(text)
    assert _runtime_key("cc", CFLAGS, rt) == key


def test_broken_runtime_is_one_error_and_no_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("STM32AI_CACHE_DIR", str(tmp_path / "cache"))
    copy_runtime(tmp_path)
    h = tmp_path / "runtime" / "include" / "ai_platform.h"
    h.write_text(h.read_text() + "\nint broken(void) { return undeclared_name; }\n")  # every source fails
    with pytest.raises(Stm32aiError, match="host build of the generated C failed: .*error"):
        runtime_objects(tmp_path / "runtime", "cc", CFLAGS, tmp_path)
    assert list((tmp_path / "cache" / "host-runtime").iterdir()) == [] or all(
        p.suffix == ".lock" for p in (tmp_path / "cache" / "host-runtime").iterdir())


def test_cache_off_builds_per_call(tmp_path, monkeypatch):
    monkeypatch.setenv("STM32AI_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    _check_matches_reference(MODELS[0])
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


def test_concurrent_builders_share_one_entry(tmp_path):
    """Two processes racing on an empty cache: both link and run, one complete entry remains."""
    code = ("import sys, numpy as np\n"
            "from stm32ai.pipeline import compile_model\n"
            "from stm32ai.validate.host import run_compiled\n"
            "c = compile_model(sys.argv[1])\n"
            "x = [np.arange(int(np.prod(c.graph.tensors[t].shape)), dtype=np.int64).astype(np.int8)"
            ".reshape(c.graph.tensors[t].shape) for t in c.graph.inputs]\n"
            "sys.stdout.buffer.write(run_compiled(c, [x])[0][0].tobytes())\n")
    env = {**os.environ, "STM32AI_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(MODELS[0])], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e.decode()[-500:] for _, e in outs]
    assert outs[0][0] == outs[1][0] and outs[0][0]
    (entry,) = _entries(tmp_path)
    assert len(list(entry.glob("*.o"))) == N_SOURCES
    assert not [p for p in (tmp_path / "host-runtime").iterdir() if p.name.startswith(".")]  # no temp left

