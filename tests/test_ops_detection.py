"""TFLite_Detection_PostProcess (detection.py, ai_detection.c) against TFLite Micro.

The converter does not write this custom op from a TensorFlow graph (the TF Object Detection
API's export adds it); the models are built by hand (tests/builders.py) with the flexbuffer
options TFLM's kernel reads, run through stm32ai and through TFLite Micro on the same inputs:

* fast NMS and regular NMS, with and without a background class, box encodings wider than 4,
  several hundred boxes (TFLM's merge sort, not only its insertion sort below 20), clustered
  anchors (many suppressions), scores drawn from a few values (ties everywhere: the sort must
  be as stable as TFLM's), fewer detections than max_detections, a score threshold nothing
  passes;
* num_detections and the classes and scores of every detection are identical; boxes within
  1e-5 relative; entries past the detections are zero (TFLM zeroes them in regular NMS; in
  fast NMS it leaves them unwritten);
* options TFLM rejects or would overflow on are refused at generate time with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from builders import TfliteBuilder, schema

from stm32ai.errors import UnsupportedModelError
from stm32ai.passes.lower import registry
from stm32ai.pipeline import compile_model
from stm32ai.validate.host import run_compiled

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
flexbuffers = pytest.importorskip("flatbuffers.flexbuffers")

OP = "TFLite_Detection_PostProcess"


def _model(n: int, nc: int, bg: int, md: int, regular: bool, *, dpc: int = 100, thr: float = 0.3,
           iou: float = 0.5, stride: int = 4, clustered: bool = False, seed: int = 0,
           extra: dict | None = None, out_md: int | None = None) -> bytes:
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    box = b.tensor((1, n, stride), "float32")
    cls = b.tensor((1, n, nc + bg), "float32")
    if clustered:  # 4 centres: heavy overlap, many suppressions
        yx = rng.choice([0.25, 0.75], (n, 2)) + rng.normal(0, 0.01, (n, 2))
        hw = rng.uniform(0.2, 0.3, (n, 2))
    else:
        yx, hw = rng.uniform(0.1, 0.9, (n, 2)), rng.uniform(0.05, 0.4, (n, 2))
    anc = b.tensor((n, 4), "float32", data=np.concatenate([yx, hw], 1).astype(np.float32))
    k = md if out_md is None else out_md
    outs = [b.tensor((1, k, 4), "float32"), b.tensor((1, k), "float32"), b.tensor((1, k), "float32"),
            b.tensor((1,), "float32")]
    o = b.op(OP, [box, cls, anc], outs)
    opts = {"max_detections": md, "max_classes_per_detection": 1, "detections_per_class": dpc,
            "use_regular_nms": regular, "nms_score_threshold": thr, "nms_iou_threshold": iou,
            "num_classes": nc, "y_scale": 10.0, "x_scale": 10.0, "h_scale": 5.0, "w_scale": 5.0}
    opts.update(extra or {})
    o.customOptions = list(flexbuffers.Dumps(opts))
    o.customOptionsFormat = schema.CustomOptionsFormat.FLEXBUFFERS
    b.inputs, b.outputs = [box, cls], outs
    return b.build()


def _inputs(rng: np.random.Generator, n: int, ncb: int, stride: int, ties: bool) -> list[np.ndarray]:
    enc = rng.normal(0, 1, (1, n, stride)).astype(np.float32)
    if ties:  # as after a dequantised int8 sigmoid: few distinct scores
        sc = rng.integers(0, 8, (1, n, ncb)).astype(np.float32) / 8
    else:
        sc = rng.uniform(0, 1, (1, n, ncb)).astype(np.float32)
    return [enc, sc]


def _check(data: bytes, tmp_path, samples: list[list[np.ndarray]]) -> list[int]:
    path = tmp_path / "dp.tflite"
    path.write_bytes(data)
    c = compile_model(path)
    assert [op.kernel for op in c.graph.ops] == ["detection_postprocess_f32"]
    found = []
    for s, got in zip(samples, run_compiled(c, samples), strict=True):
        it = tflm_runtime.Interpreter.from_bytes(data, arena_size=8 << 20)
        for i, x in enumerate(s):
            it.set_input(x, i)
        it.invoke()
        ref = [it.get_output(j) for j in range(4)]
        assert got[3].tolist() == ref[3].tolist()
        k = int(ref[3][0])
        assert np.array_equal(got[1][0, :k], ref[1][0, :k]), (got[1][0, :k], ref[1][0, :k])
        assert np.array_equal(got[2][0, :k], ref[2][0, :k])
        np.testing.assert_allclose(got[0][0, :k], ref[0][0, :k], rtol=1e-5, atol=1e-7)
        for t in got[:3]:
            assert not np.any(t[0, k:]), "entries past the detections must be zero"
        found.append(k)
    return found


@pytest.mark.parametrize("regular", [False, True], ids=["fast", "regular"])
@pytest.mark.parametrize("bg", [0, 1], ids=["no_background", "background"])
def test_against_tflm(tmp_path, regular, bg):
    rng = np.random.default_rng(10 * regular + bg)
    n, nc, md = 60, 4, 10
    data = _model(n, nc, bg, md, regular, dpc=4, stride=4 + 2 * bg, seed=bg)
    found = _check(data, tmp_path, [_inputs(rng, n, nc + bg, 4 + 2 * bg, t) for t in (False, True)])
    assert found == [md, md]


@pytest.mark.parametrize("regular", [False, True], ids=["fast", "regular"])
def test_many_boxes_clustered_ties(tmp_path, regular):
    """400 boxes around 4 centres, scores with ties: long sorts, many suppressions, and fewer
    detections than max_detections."""
    rng = np.random.default_rng(3)
    n, nc, md = 400, 6, 25
    data = _model(n, nc, 1, md, regular, dpc=3, iou=0.3, clustered=True, thr=0.5, seed=4)
    samples = [_inputs(rng, n, nc + 1, 4, True) for _ in range(3)]
    found = _check(data, tmp_path, samples)
    assert all(0 < k < md for k in found), found


def test_nothing_passes_the_threshold(tmp_path):
    rng = np.random.default_rng(5)
    data = _model(30, 3, 1, 5, True, thr=0.99)
    s = _inputs(rng, 30, 4, 4, False)
    s[1] = s[1] * 0.5
    assert _check(data, tmp_path, [s]) == [0]


def test_larger_outputs_are_zero_filled(tmp_path):
    rng = np.random.default_rng(6)
    data = _model(40, 3, 1, 6, False, out_md=9)
    assert _check(data, tmp_path, [_inputs(rng, 40, 4, 4, False)]) == [6]


@pytest.mark.parametrize("extra,out_md,reason", [
    ({"nms_iou_threshold": 0.0}, None, "nms_iou_threshold"),
    ({"max_classes_per_detection": 2}, None, "classes per detection"),
    ({"max_detections": 12}, 8, "cannot hold 12 detections"),
    ({"num_classes": 7}, None, "class scores"),
    ({"h_scale": 0.0}, None, "zero"),
])
def test_refusals(tmp_path, extra, out_md, reason):
    path = tmp_path / "bad.tflite"
    path.write_bytes(_model(20, 3, 1, extra.get("max_detections", 5), False, extra=extra, out_md=out_md))
    with pytest.raises(UnsupportedModelError) as e:
        compile_model(path)
    assert OP in str(e.value) and reason in str(e.value), str(e.value)


def test_registry_lists_it():
    assert "NMS" in registry()[f"CUSTOM:{OP}"].constraints


@pytest.mark.slow
def test_on_the_emulated_board(tmp_path):
    """Regular NMS over 60 boxes in the demo firmware on qemu-netduinoplus2 (Cortex-M4F: libm's
    exp in double, the float IoU without fused multiply-add): result: match against the TFLM
    output embedded at generate time."""
    import shutil

    if not all(shutil.which(t) for t in ("arm-none-eabi-gcc", "make", "qemu-system-arm")):
        pytest.skip("arm-none-eabi-gcc/make/qemu-system-arm not installed")
    from stm32ai.boards import load_board
    from stm32ai.cli import main
    from stm32ai.project.demo_output import parse_demo_output
    from stm32ai.project.run import build_project, run_qemu

    model = tmp_path / "dp.tflite"
    model.write_bytes(_model(60, 4, 1, 10, True, dpc=4))
    out = tmp_path / "proj"
    board = load_board("qemu-netduinoplus2")
    assert main(["generate", str(model), "--board", board.id, "-o", str(out)]) == 0
    code, text = run_qemu(build_project(out), board, timeout_s=300)
    demo = parse_demo_output(text)
    assert code == 0 and demo.result == "match", text
