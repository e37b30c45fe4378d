"""Regenerating a firmware project without losing the user's edits (`generate ... -o DIR --update`).

Every generated project records the sha256 of each file stm32ai wrote (`FILES`, beside the
`.stm32ai-generated` marker). `--update` generates the new project in a staging folder, then per
file (docs/project.md, "Regenerating"):

- a file as stm32ai wrote it: `update` (or `unchanged` when the new one is the same);
- a file the user edited: `kept` when stm32ai's version did not change, else `conflict`: the
  user's file stays and the new version is written beside it as `<file>.stm32ai-new`;
- a file the user deleted: `skipped` (stays deleted); a new file: `create`;
- a file stm32ai wrote that the new project no longer has: `remove` if unedited, else `kept`;
- files stm32ai never wrote (the user's own): untouched, not listed.

A project of an older stm32ai version has no record: every file that differs from the new
version is then a `conflict` (nothing can be told unedited), identical ones are `unchanged`,
missing ones `create`; nothing is removed. The record written afterwards makes the next update
a normal one.

Nothing is deleted that the user changed; every write goes through a temp file and a rename.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stm32ai.errors import Stm32aiError
from stm32ai.outputs import MARKER

__all__ = ["FILES", "NEW_SUFFIX", "Action", "apply_update", "edited_files", "has_record", "plan_update",
           "record_files"]

FILES = ".stm32ai-files.json"
NEW_SUFFIX = ".stm32ai-new"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): _sha(p) for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name not in (FILES, MARKER)}


def record_files(project: Path) -> None:
    """Write the record of what stm32ai generated (call on the complete staged project)."""
    (project / FILES).write_text(json.dumps({"files": _files(project)}, indent=1, sort_keys=True) + "\n")


@dataclass(frozen=True)
class Action:
    path: str
    what: str   # create, update, unchanged, kept, conflict, skipped, remove

    def line(self) -> str:
        note = {"kept": " (your edit; stm32ai's version did not change)",
                "conflict": f" (your edit kept; stm32ai's new version: {self.path}{NEW_SUFFIX})",
                "skipped": " (you deleted it)",
                }.get(self.what, "")
        return f"{self.what:9s} {self.path}{note}"


def has_record(out: Path) -> bool:
    """Projects of stm32ai versions before the record (FILES) have none."""
    return (out / FILES).is_file()


def _record(out: Path) -> dict[str, str]:
    """The hashes stm32ai recorded; {} for a project without a record (an older version's): then
    no file can be told unedited, so every file that differs from the new version is a conflict."""
    if not has_record(out):
        return {}
    try:
        return dict(json.loads((out / FILES).read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise Stm32aiError(f"'{out}': {FILES} (stm32ai's record of the files it generated) is unreadable; "
                           "restore it, or move your edits away and use --force") from None


def edited_files(out: Path) -> list[str]:
    """Files stm32ai wrote in `out` that the user changed or deleted since ([] without a record)."""
    if not has_record(out):
        return []
    return [rel for rel, h in _record(out).items()
            if not (out / rel).is_file() or (out / rel).is_symlink() or _sha(out / rel) != h]


def plan_update(stage: Path, out: Path) -> list[Action]:
    old = _record(out)
    new = _files(stage)
    actions = []
    for rel, h_new in new.items():
        dst = out / rel
        if dst.is_symlink() or (dst.exists() and not dst.is_file()):
            actions.append(Action(rel, "conflict"))
            continue
        if not dst.exists():
            actions.append(Action(rel, "skipped" if rel in old else "create"))
            continue
        h_cur = _sha(dst)
        if h_cur == h_new:
            actions.append(Action(rel, "unchanged"))
        elif rel in old and h_cur == old[rel]:
            actions.append(Action(rel, "update"))
        elif rel in old and old[rel] == h_new:
            actions.append(Action(rel, "kept"))
        else:
            actions.append(Action(rel, "conflict"))
    for rel, h_old in old.items():
        if rel not in new:
            p = out / rel
            if p.is_file() and not p.is_symlink():
                actions.append(Action(rel, "remove" if _sha(p) == h_old else "kept"))
    return actions


def _write(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    try:
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def apply_update(stage: Path, out: Path, actions: list[Action]) -> None:
    try:
        for a in actions:
            if a.what in ("create", "update"):
                _write(stage / a.path, out / a.path)
            elif a.what == "conflict":
                _write(stage / a.path, out / (a.path + NEW_SUFFIX))
            elif a.what == "remove":
                (out / a.path).unlink()
        _write(stage / FILES, out / FILES)  # the new generated versions: later edits are measured from them
    except OSError as e:
        raise Stm32aiError(f"cannot update '{out}': {e.strerror or e}") from None
