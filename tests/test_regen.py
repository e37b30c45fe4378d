"""Regenerating a firmware project keeps the user's edits (`generate ... -o DIR --update`,
stm32ai/project/regen.py, docs/project.md "Regenerating"): every file stm32ai writes is edited,
the project is regenerated with another model, and each edit is found intact; a file whose new
version differs is a reported conflict with the new version beside it, never an overwrite;
`--force` refuses to discard edits."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, assert_one_line_error, stm32ai_cli

from stm32ai.project.regen import FILES, NEW_SUFFIX

BOARD = "qemu-netduinoplus2"
MODEL_A = FIXTURES / "classifier_softmax_int8.tflite"
MODEL_B = FIXTURES / "conv_stride2_same_int8.tflite"


def gen(out: Path, model: Path, *extra: str):
    return stm32ai_cli("generate", str(model), "--board", BOARD, "-o", str(out), "--no-test-vector", *extra, cwd=ROOT)


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def same_but_time(a: Path, b: Path) -> bool:
    """Equal except the generation time stamps (the emitter's `datetime`)."""
    stamp = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    return stamp.sub(b"T", a.read_bytes()) == stamp.sub(b"T", b.read_bytes())


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Project A and project B generated fresh (the files stm32ai writes for each model)."""
    d = tmp_path_factory.mktemp("regen")
    for name, model in (("a", MODEL_A), ("b", MODEL_B)):
        r = gen(d / name, model)
        assert r.returncode == 0, r.stderr
    return d


def test_every_user_edit_survives_a_model_update(generated, tmp_path):
    import shutil

    out = tmp_path / "p"
    shutil.copytree(generated / "a", out)
    recorded = json.loads((out / FILES).read_text())["files"]
    fresh_b = generated / "b"
    # the user edits every file stm32ai wrote, deletes one, and adds their own
    edits = {}
    for rel in recorded:
        p = out / rel
        if p.suffix in (".c", ".h", ".ld", ".md", ".txt", "") or p.name in ("Makefile", ".project", ".cproject"):
            p.write_bytes(p.read_bytes() + b"\n/* user edit */\n")
            edits[rel] = sha(p)
    deleted = "Core/Src/cycles.c"
    (out / deleted).unlink()
    edits.pop(deleted, None)
    (out / "Core" / "Src" / "mine.c").write_text("int mine;\n")
    assert len(edits) > 20

    r = gen(out, MODEL_B, "--update")
    assert r.returncode == 0, r.stderr
    for rel, h in edits.items():  # every edit intact
        assert sha(out / rel) == h, rel
        new = fresh_b / rel
        if not new.is_file():
            continue
        side = out / (rel + NEW_SUFFIX)
        if sha(new) != recorded[rel]:  # stm32ai's version changed: a conflict, the new one beside it
            assert same_but_time(side, new), rel
            assert f"conflict  {rel} (your edit kept" in r.stdout
        else:
            assert not side.exists(), rel
            assert f"kept      {rel}" in r.stdout
    assert not (out / deleted).exists() and f"skipped   {deleted}" in r.stdout
    assert (out / "Core" / "Src" / "mine.c").read_text() == "int mine;\n"
    # main.c names no model file: a model of the same name leaves it unchanged, the edit is simply kept
    assert "kept      Core/Src/main.c" in r.stdout
    # binary files stm32ai owns (not edited here) were updated to model B's
    assert (out / "Model/artifact/params.npz").read_bytes() == (fresh_b / "Model/artifact/params.npz").read_bytes()


def test_unedited_project_updates_to_the_new_model_exactly(generated, tmp_path):
    import shutil

    out = tmp_path / "p"
    shutil.copytree(generated / "a", out)
    r = gen(out, MODEL_B, "--update", "--dry-run")
    assert r.returncode == 0 and "dry run: nothing written" in r.stdout
    assert sha(out / "Model/network_data.c") == sha(generated / "a" / "Model/network_data.c")
    r = gen(out, MODEL_B, "--update")
    assert r.returncode == 0, r.stderr
    assert "0 conflict(s)" in r.stdout
    for p in (generated / "b").rglob("*"):
        rel = p.relative_to(generated / "b")
        if p.is_file() and p.name != FILES:  # the record holds hashes of time-stamped files
            assert same_but_time(out / rel, p), rel
    assert not list(out.rglob("*" + NEW_SUFFIX))


def test_force_refuses_to_discard_edits_and_update_needs_a_project(generated, tmp_path):
    import shutil

    out = tmp_path / "p"
    shutil.copytree(generated / "a", out)
    main = out / "Core/Src/main.c"
    main.write_text(main.read_text() + "/* mine */\n")
    assert_one_line_error(gen(out, MODEL_B, "--force"), "Core/Src/main.c", "--update")
    assert main.read_text().endswith("/* mine */\n")
    other = tmp_path / "plain"
    other.mkdir()
    (other / "x.c").write_text("int x;\n")
    assert_one_line_error(gen(other, MODEL_B, "--update"), "not a project stm32ai generated")


def test_project_of_an_older_version_updates_without_losing_anything(generated, tmp_path):
    """No record (stm32ai before FILES): nothing can be told unedited, so every file that differs
    is a conflict with the new version beside it; identical files stay; the record written then
    makes the next update a normal one."""
    import shutil

    out = tmp_path / "p"
    shutil.copytree(generated / "a", out)
    (out / FILES).unlink()
    main = out / "Core/Src/main.c"
    main.write_text(main.read_text() + "/* mine */\n")
    before = {p.relative_to(out): sha(p) for p in out.rglob("*") if p.is_file()}
    r = gen(out, MODEL_B, "--update")
    assert r.returncode == 0, r.stderr
    assert "no record of the files stm32ai generated" in r.stdout
    for rel, h in before.items():                      # not one byte of the old project changed
        assert sha(out / rel) == h, rel
    assert "conflict  Core/Src/main.c" in r.stdout
    assert same_but_time(out / ("Model/network_data.c" + NEW_SUFFIX), generated / "b" / "Model/network_data.c")
    assert (out / FILES).is_file()
    # the user takes stm32ai's versions of everything but main.c: the next update is a normal one
    for side in out.rglob("*" + NEW_SUFFIX):
        target = side.with_name(side.name[: -len(NEW_SUFFIX)])
        if target != main:
            side.replace(target)
        else:
            side.unlink()
    r = gen(out, MODEL_A, "--update")
    assert r.returncode == 0, r.stderr
    assert "no record" not in r.stdout and "0 conflict(s)" in r.stdout
    assert main.read_text().endswith("/* mine */\n")
