"""Every model runs bit-exact against its verdict reference with the activation pool's dead
bytes overwritten with garbage before each kernel call (stm32ai/validate/poison.py): a tensor
placed over bytes still needed, or an output written over input its kernel still reads,
cannot go unnoticed. All models link into one host executable (one compiler run)."""

import os
from pathlib import Path

import pytest
from conftest import SHARED_MODELS, fixture_models

from stm32ai.boards import load_board
from stm32ai.errors import Stm32aiError
from stm32ai.pipeline import compile_model, flash_model_for
from stm32ai.validate.poison import PoisonBuild, live_ranges
from stm32ai.validate.run import validate_model

ALL = bool(os.environ.get("STM32AI_POISON_ALL"))
# CI: every shared model that compiles in a few seconds; STM32AI_POISON_ALL=1 adds the large
# detection models (openmv/, tinyengine/: ~1 min of compiling) and every core fixture (all
# pass; ~6 min on a loaded 2-core machine).
SHARED = sorted(p for p in (SHARED_MODELS.glob("*/*.tflite") if SHARED_MODELS.exists() else [])
                if ALL or p.parent.name not in ("openmv", "tinyengine"))
# the compiler core's fixtures (the op families' own are validated by their tests); CI takes
# those whose kernels overlap buffers
CORE_FIXTURES = [p for p in fixture_models() if p.name.startswith(
    ("conv_", "dwconv_", "dense_", "avgpool_", "maxpool_", "add_", "classifier_", "two_in_", "se_") if ALL
    else ("conv_", "dwconv_", "add_", "classifier_", "se_"))]
MLPERF_INT8 = ("pretrainedResnet_quant", "kws_ref_model", "vww_96_int8", "ad01_int8")
# (model, --optimization, board whose flash staging and core are compiled in:
# docs/flash_staging.md; the core brings the default Winograd layers and their overlaps)
CASES = [(p, "balanced", None) for p in SHARED + CORE_FIXTURES] + [
    (p, "ram", None) for p in SHARED if p.stem in MLPERF_INT8] + [
    (p, mode, "nucleo-l4r5zi") for p in SHARED if p.stem in MLPERF_INT8[:3] for mode in ("balanced", "ram")]


def _id(case: tuple[Path, str, str | None]) -> str:
    return f"{case[0].stem}-{case[1]}" + (f"-{case[2]}" if case[2] else "")


@pytest.fixture(scope="session")
def poisoned(tmp_path_factory):
    """Compile every case, build one poisoned host executable holding all that compile."""
    compiled, names = {}, {}
    for i, (path, mode, board) in enumerate(CASES):
        try:
            c = compile_model(path, f"m{i}", optimization=mode, flash=flash_model_for(board),
                              core=load_board(board).core if board else None)
        except Stm32aiError:
            continue  # not supported: nothing to poison
        compiled[f"m{i}"] = c
        names[_id((path, mode, board))] = f"m{i}"
    build = PoisonBuild(compiled, tmp_path_factory.mktemp("poison"))
    return build, compiled, names


def _check(res):
    verdict = [c for c in res.comparisons if c.verdict]
    if not verdict:
        pytest.skip(f"no reference runs {res.model}")
    for j, (m, ok) in enumerate(zip(verdict[0].outputs, verdict[0].ok, strict=True)):
        assert ok, f"{res.model} output {j} vs {verdict[0].reference}: max LSB {m.max_lsb}"


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_poisoned_run_matches_reference(poisoned, case):
    build, compiled, names = poisoned
    name = names.get(_id(case))
    if name is None:
        pytest.skip(f"{case[0].name} does not compile")
    c = compiled[name]
    res = validate_model(case[0], n=1, seed=5, compiled=c,
                         runner=lambda cc, samples: build.run(cc, samples, name))
    _check(res)


def test_live_ranges_from_graph_json():
    """A 3-op chain: before each kernel exactly its live inputs (and nothing it writes)."""
    path = next(p for p in CORE_FIXTURES if p.name.startswith("conv_"))
    c = compile_model(path)
    live = live_ranges(c.doc)
    kernels = [n for n, node in enumerate(c.doc["nodes"]) if node["op"] == "tvm_op"]
    g, plan = c.graph, c.plan
    first = g.ops[plan.order[0]]
    x = first.inputs[0]
    off = plan.tensor_offset(x)
    assert (off, off + g.tensors[x].nbytes) in live[kernels[0]] or any(
        a <= off and off + g.tensors[x].nbytes <= b for a, b in live[kernels[0]])
    y = first.outputs[0]
    yo = plan.tensor_offset(y)
    if y not in g.outputs and not set(range(yo, yo + g.tensors[y].nbytes)) & set(range(off, off + g.tensors[x].nbytes)):
        assert not any(a < yo + g.tensors[y].nbytes and yo < b for a, b in live[kernels[0]])
