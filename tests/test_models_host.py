"""Every model in the supported operator set runs bit-exact (int8) or within 1e-5
relative error (float32) against TFLite Micro, the verdict reference (docs/references.md),
when compiled to C and run on the host."""

import pytest
from conftest import fixture_models, shared_model

from stm32ai.validate.run import validate_model

# ../shared/models that use only the compiler core's operators (issue 2)
CORE_MODELS = [
    "tflite_micro/hello_world_int8.tflite",
    "tflite_micro/hello_world_float.tflite",
    "tflite_micro/micro_speech_quantized.tflite",
    "tflite_micro/person_detect.tflite",
    "mlperf_tiny/ad01_int8.tflite",
    "mlperf_tiny/ad01_fp32.tflite",
    "mlperf_tiny/pretrainedResnet_quant.tflite",
    "mlperf_tiny/pretrainedResnet.tflite",
    "mlperf_tiny/kws_ref_model.tflite",
    "mlperf_tiny/vww_96_int8.tflite",
    "mlperf_tiny/vww_96_float.tflite",
    "mlperf_tiny/str_ww_ref_model.tflite",
]


def _check(res):
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict, f"no reference ran {res.model}: {[c.unavailable for c in res.comparisons]}"
    v = verdict[0]
    assert v.reference == "tflm" or all(c.unavailable or c.overruled for c in res.comparisons if c.reference == "tflm")
    for j, (m, ok) in enumerate(zip(v.outputs, v.ok, strict=True)):
        assert ok, f"{res.model} output {j} vs {v.reference}: max LSB {m.max_lsb}, max rel err {m.max_rel_err:.3g}"


# Fixtures of the operator families (act_, move_, reduce_, ...) are validated by their own
# tests/test_ops_*.py; these are the compiler core's.
CORE_FIXTURES = [p for p in fixture_models() if p.name.startswith(
    ("conv_", "dwconv_", "dense_", "avgpool_", "maxpool_", "add_", "classifier_", "two_in_"))]


@pytest.mark.parametrize("model", CORE_FIXTURES, ids=lambda p: p.stem)
def test_fixture_matches_reference(model):
    _check(validate_model(model, n=2, seed=7))


@pytest.mark.parametrize("rel", CORE_MODELS)
def test_shared_model_matches_reference(rel):
    _check(validate_model(shared_model(rel), n=2, seed=11))
