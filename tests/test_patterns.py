"""Converter patterns that once broke the compiler or split the references
(tests/fixtures/make_fixtures_patterns.py): FULLY_CONNECTED on rows flattened from a dynamic
batch, and a dilated convolution over a non-zero zero point, where TFLite Micro is wrong and
LiteRT-ref is the verdict (docs/references.md)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

from stm32ai.pipeline import compile_model
from stm32ai.validate.reference import RefResult, missing_reference_error, tflm_known_wrong
from stm32ai.validate.run import print_result, validate_model

RESHAPE_DENSE = ["pattern_reshape_dense_int8", "pattern_reshape_dense_float32",
                 "pattern_reshape_dense_two_inputs_int8", "pattern_reshape_dense_two_inputs_float32"]
DILATED = FIXTURES / "pattern_dilated_zp_int8.tflite"


@pytest.mark.parametrize("name", RESHAPE_DENSE)
def test_fc_output_has_every_row(name):
    """The converter stores the FC output with one row; the model computes N (24 or 19)."""
    g = compile_model(FIXTURES / f"{name}.tflite").graph
    fc = [op for op in g.ops if op.type == "FULLY_CONNECTED"]
    assert len(fc) == 1
    rows = 19 if "two_inputs" in name else 24
    assert g.tensors[fc[0].outputs[0]].shape[0] == rows
    assert g.tensors[g.outputs[0]].shape == (1, rows, 4 if "two_inputs" in name else 3)


@pytest.mark.slow
@pytest.mark.parametrize("name", RESHAPE_DENSE)
def test_reshape_dense_bit_exact(name):
    res = validate_model(FIXTURES / f"{name}.tflite", n=3, seed=5)
    verdict = [c for c in res.comparisons if c.verdict]
    assert verdict, [c.unavailable for c in res.comparisons]
    assert all(verdict[0].ok), [m.max_abs_err for m in verdict[0].outputs]
    if "int8" in name:
        assert all(m.max_lsb == 0 for m in verdict[0].outputs)


def test_tflm_known_wrong_only_with_a_nonzero_zero_point():
    assert tflm_known_wrong(DILATED) is not None
    assert "SPACE_TO_BATCH_ND" in tflm_known_wrong(DILATED)
    # zero point 0: padding with 0 is padding with the zero point, TFLM is right
    assert tflm_known_wrong(FIXTURES / "conv_space_to_batch_int8.tflite") is None
    assert tflm_known_wrong(FIXTURES / "conv_space_to_batch_float32.tflite") is None


def test_fused_dilated_conv_pads_with_the_zero_point():
    g = compile_model(DILATED).graph
    conv = [op for op in g.ops if op.type == "CONV_2D"]
    assert len(conv) == 1 and conv[0].options["dilation_h_factor"] == 2
    zp = int(g.tensors[conv[0].inputs[0]].quant.zero_point[0])
    assert zp != 0 and conv[0].attrs["pad_value"] == zp


def test_missing_litert_names_why_tflm_is_not_the_verdict():
    refs = [RefResult("tflm", outputs=[np.zeros(1)], overruled="its SPACE_TO_BATCH_ND pads with 0"),
            RefResult("litert-ref", unavailable="not installed", install="pip install 'stm32ai[litert]'")]
    msg = missing_reference_error("m.tflite", refs)
    assert msg is not None and "cannot be the verdict" in msg and "pads with 0" in msg
    assert msg.endswith("pip install 'stm32ai[litert]'")


@pytest.mark.slow
def test_dilated_zp_litert_is_the_verdict_and_validate_says_why(capsys):
    res = validate_model(DILATED, n=3, seed=3)
    by = {c.reference: c for c in res.comparisons}
    assert by["litert-ref"].verdict and not by["tflm"].verdict
    assert all(m.max_lsb == 0 for m in by["litert-ref"].outputs)
    # the fixture does exercise the difference (tens of LSB at the padded borders)
    assert max(m.max_lsb for m in by["tflm"].outputs) > 10
    assert res.outcome == "match"
    print_result(res)
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("note: tflm")]
    assert len(notes) == 1 and "LSB" in notes[0] and "zero point" in notes[0]
    assert res.to_json()["references"][0]["overruled"]


@pytest.mark.slow
def test_demo_expected_output_comes_from_litert_ref():
    from stm32ai.validate.reference import run_litert_ref
    from stm32ai.validate.vectors import test_vector

    c = compile_model(DILATED)
    tv = test_vector(DILATED, c, seed=0)
    inputs, outs = tv.inputs, tv.expected
    assert tv.reference == "LiteRT (reference kernels)"
    want = run_litert_ref(DILATED, inputs)
    np.testing.assert_array_equal(outs[0].reshape(-1), np.asarray(want[0]).reshape(-1))
