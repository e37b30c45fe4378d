"""The runtime and the generated C at every optimisation level a user's project may use (issue 27,
item 6): CubeMX's Debug preset is -O0 -g3, its Release -Os; CubeIDE's Debug -O0, others -Og.

- On the host: the model built at -O0 ... -Os runs bit-exact against TFLite Micro.
- For Cortex-M (arm-none-eabi-gcc): the runtime and a generated model compile with -Wall -Wextra
  -Werror at every level, with and without -ffunction-sections/-fdata-sections/-fstack-usage,
  for a DSP core (the inline assembly paths: ai_fc.c's block loop needs 13 registers and takes
  its C loop at -O0) and a core without DSP.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import FIXTURES, RUNTIME

from stm32ai.emitter import emit_c
from stm32ai.pipeline import compile_model
from stm32ai.validate.host import run_compiled
from stm32ai.validate.run import validate_model

LEVELS = ["-O0", "-Og", "-O1", "-O2", "-O3", "-Os"]
# conv + maxpool + FULLY_CONNECTED (ai_fc.c) + softmax; depthwise conv
MODELS = [FIXTURES / "classifier_softmax_int8.tflite", FIXTURES / "dwconv_dm1_same_int8.tflite"]
CORES = {"m7": ["-mcpu=cortex-m7", "-mfpu=fpv5-d16", "-mfloat-abi=hard"], "m0plus": ["-mcpu=cortex-m0plus"]}


@pytest.mark.slow
@pytest.mark.parametrize("opt", LEVELS)
@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_host_bit_exact_at_every_level(model, opt):
    res = validate_model(model, n=2, seed=5, runner=lambda c, s: run_compiled(c, s, opt=opt))
    v = next(c for c in res.comparisons if c.verdict)
    assert v.reference == "tflm"
    for j, m in enumerate(v.outputs):
        assert m.max_lsb == 0, f"{model.name} {opt} output {j}: {m.max_lsb} LSB from TFLite Micro"


@pytest.fixture(scope="module")
def model_c(tmp_path_factory):
    d = tmp_path_factory.mktemp("c")
    c = compile_model(MODELS[0], "network")
    emit_c(c.doc, c.params, "network", d, with_runtime=False)
    return d


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")
@pytest.mark.parametrize("extra", [[], ["-ffunction-sections", "-fdata-sections", "-fstack-usage", "-g3"]],
                         ids=["plain", "sections-stack-usage"])
@pytest.mark.parametrize("opt", LEVELS)
def test_cortex_m_compiles_warning_free_at_every_level(opt, extra, model_c, tmp_path):
    sources = sorted((RUNTIME / "src").glob("*.c")) + sorted(model_c.glob("*.c"))
    for core, flags in CORES.items():
        if extra and core != "m7":  # the no-DSP core once per level is enough
            continue
        out = tmp_path / core
        out.mkdir()
        r = subprocess.run(["arm-none-eabi-gcc", *flags, "-mthumb", opt, *extra, "-std=gnu11", "-Wall", "-Wextra",
                            "-Werror", f"-I{RUNTIME / 'include'}", f"-I{model_c}", "-c", *map(str, sources)],
                           cwd=out, capture_output=True, text=True)
        assert r.returncode == 0, f"{core} {opt} {extra}: {r.stderr[:3000]}"
        assert len(list(out.glob("*.o"))) == len(sources)
