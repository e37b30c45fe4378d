"""`stm32ai generate MODEL --into PROJECT`: the model as a component of the user's own project.

The component is one folder, `PROJECT/stm32ai/`, that stm32ai owns entirely: the model's C files,
the runtime, `CMakeLists.txt` (library `stm32ai_<name>`, alias `stm32ai::<name>`), `stm32ai.mk`
(a Makefile fragment) and `stm32ai_component.json` (what it was generated from). The project's
build files get a few lines between markers (`WIRING`), nothing else; everything outside the
markers is kept byte for byte. Running it twice changes nothing; a new model replaces only the
folder. docs/into.md has the workflow.

This module only plans and applies file changes; the CLI compiles the model and emits the C.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stm32ai.errors import Stm32aiError
from stm32ai.outputs import MARKER, is_generated, publish_dir, staging_dir
from stm32ai.sanitize import quote

__all__ = ["COMPONENT", "Change", "Mcu", "Plan", "Project", "apply_plan", "component_files", "detect_mcu",
           "detect_project", "plan_into", "wire_cmake", "wire_cproject", "wire_makefile"]

COMPONENT = "stm32ai"                       # the folder stm32ai owns inside the project
MANIFEST = "stm32ai_component.json"
# No "--" in them: they are XML comments in a .cproject.
BEGIN = ">>> stm32ai: model component wiring (stm32ai generate MODEL into PROJECT); edit outside these markers only >>>"
END = "<<< stm32ai <<<"


# ---- the project --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Project:
    root: Path
    kind: str                # "cmake" (CubeMX CMake layout or plain CMake), "cubeide", "make"
    build_file: Path         # the file we wire: CMakeLists.txt, .cproject or Makefile


def detect_project(root: Path) -> Project:
    """CubeMX CMake first (CMakeLists.txt; CubeMX projects also carry a .cproject only when
    generated for CubeIDE), then STM32CubeIDE (.cproject), then a Makefile."""
    if not root.is_dir():
        raise Stm32aiError(f"--into {root}: not a directory (give the root folder of your project)")
    for name, kind in (("CMakeLists.txt", "cmake"), (".cproject", "cubeide"), ("Makefile", "make")):
        p = root / name
        if p.is_file() and not p.is_symlink():
            return Project(root, kind, p)
    raise Stm32aiError(f"--into {root}: no CMakeLists.txt, .cproject or Makefile found: give the root folder "
                       "of a CubeMX CMake, STM32CubeIDE or Makefile project")


# ---- the MCU ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mcu:
    name: str                 # e.g. STM32F746ZGTx ("" when only the linker script was found)
    core: str                 # cortex-m7, ... ("" when unknown)
    flash_bytes: int | None   # the largest executable region of the linker script
    ram_bytes: int | None     # the largest writable region
    source: str               # where the name / sizes came from

    def describe(self) -> str:
        parts = [self.name or "MCU unknown"]
        if self.core:
            parts.append(self.core)
        if self.flash_bytes:
            parts.append(f"flash {self.flash_bytes // 1024} KiB")
        if self.ram_bytes:
            parts.append(f"RAM {self.ram_bytes // 1024} KiB")
        return ", ".join(parts) + f" (from {self.source})"


# STM32 series -> core (RM0385 etc.: the series' reference manuals name the core). The digits
# after "STM32" and the series letter decide.
_CORES = [(r"STM32F0", "cortex-m0"), (r"STM32(G0|C0|L0)", "cortex-m0plus"),
          (r"STM32(F1|F2|L1)", "cortex-m3"), (r"STM32(F3|F4|G4|L4|WB|WL)", "cortex-m4"),
          (r"STM32(F7|H7)", "cortex-m7"), (r"STM32(L5|U5|H5|U3|WBA)", "cortex-m33"), (r"STM32N6", "cortex-m55")]
_MEM_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(([a-zA-Z!]*)\)\s*:\s*ORIGIN\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*,"
                       r"\s*LENGTH\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*([KM]?)\s*$", re.M)


def core_of(mcu: str) -> str:
    up = mcu.upper()
    return next((c for pat, c in _CORES if re.match(pat, up)), "")


def _linker_regions(text: str) -> list[tuple[str, str, int]]:
    """(name, attributes, bytes) of each MEMORY line of a GNU ld script."""
    m = re.search(r"MEMORY\s*\{(.*?)\}", re.sub(r"/\*.*?\*/", "", text, flags=re.S), re.S)
    if m is None:
        return []
    out = []
    for name, attrs, _origin, length, unit in _MEM_LINE.findall(m.group(1)):
        n = int(length, 0) * {"": 1, "K": 1024, "M": 1024 * 1024}[unit.upper()]
        out.append((name, attrs.lower(), n))
    return out


def _linker_scripts(root: Path) -> list[Path]:
    skip = {COMPONENT, "build", ".git", "Debug", "Release"}
    found = []
    for p in sorted(root.rglob("*.ld")):
        rel = p.relative_to(root).parts
        if not skip.intersection(rel[:-1]) and len(rel) <= 3:
            found.append(p)
    return [p for p in found if not p.name.upper().endswith("_RAM.LD")] or found  # CubeIDE's *_RAM.ld: runs from RAM


def detect_mcu(root: Path) -> Mcu:
    """The MCU from CubeMX's .ioc, the .cproject or nothing; sizes from the linker script's MEMORY."""
    name, src = "", []
    for ioc in sorted(root.glob("*.ioc")):
        m = re.search(r"^Mcu\.UserName=(STM32\w+)\s*$", ioc.read_text(errors="replace"), re.M)
        if m:
            name = m.group(1)
            src.append(ioc.name)
            break
    cp = root / ".cproject"
    if not name and cp.is_file():
        m = re.search(r'option\.target_mcu[^>]*value="(STM32\w+)"', cp.read_text(errors="replace"))
        if m:
            name = m.group(1)
            src.append(".cproject")
    flash = ram = None
    for ld in _linker_scripts(root):
        regions = _linker_regions(ld.read_text(errors="replace"))
        if regions:
            xs = [n for _, a, n in regions if "x" in a and "w" not in a]
            ws = [n for _, a, n in regions if "w" in a]
            flash, ram = (max(xs) if xs else None), (max(ws) if ws else None)
            src.append(str(ld.relative_to(root)))
            break
    if not name and flash is None:
        raise Stm32aiError(f"--into {root}: cannot tell the MCU (no .ioc, no target MCU in .cproject, no linker "
                           "script with a MEMORY block): give --board")
    return Mcu(name, core_of(name), flash, ram, ", ".join(src))


# ---- the component ------------------------------------------------------------------------------
def _cmake_text(name: str, sources: list[str]) -> str:
    lib = f"stm32ai_{name}"
    srcs = "\n".join(f"  ${{CMAKE_CURRENT_LIST_DIR}}/{s}" for s in sources)
    return f"""# Model `{name}` as a library, generated by stm32ai (`stm32ai generate --into`): do not edit,
# it is replaced when the model changes. Link it with target_link_libraries(<app> stm32ai::{name}).
# It compiles with the project's own flags (toolchain file, build type): no core flags here.
add_library({lib} STATIC
{srcs})
add_library(stm32ai::{name} ALIAS {lib})
target_include_directories({lib} PUBLIC ${{CMAKE_CURRENT_LIST_DIR}} ${{CMAKE_CURRENT_LIST_DIR}}/runtime/include)
set_target_properties({lib} PROPERTIES C_STANDARD 11 C_EXTENSIONS ON)
target_compile_options({lib} PRIVATE -Wall -Wextra)
"""


def _make_text(name: str, sources: list[str]) -> str:
    srcs = " \\\n  ".join(f"$(STM32AI_DIR)/{s}" for s in sources)
    return f"""# Model `{name}` for a Makefile project, generated by stm32ai (`stm32ai generate --into`): do not
# edit, it is replaced when the model changes. The project's Makefile includes it after its
# C_SOURCES / C_INCLUDES (CubeMX's names); other Makefiles can use the STM32AI_ variables.
STM32AI_DIR ?= {COMPONENT}
STM32AI_C_SOURCES := \\
  {srcs}
STM32AI_C_INCLUDES := -I$(STM32AI_DIR) -I$(STM32AI_DIR)/runtime/include
C_SOURCES += $(STM32AI_C_SOURCES)
C_INCLUDES += $(STM32AI_C_INCLUDES)
"""


def component_files(stage: Path, name: str, inputs: dict[str, object]) -> None:
    """Complete the emitted C in `stage` (model files + runtime/) into the component: build files,
    manifest (the inputs and a hash of every file), marker."""
    sources = sorted(str(p.relative_to(stage)) for p in stage.rglob("*.c"))
    for s in sources:
        if not re.fullmatch(r"[A-Za-z0-9_./-]+", s):  # names are generated; checked anyway
            raise Stm32aiError(f"internal: unexpected component file name {quote(s)}")
    (stage / "CMakeLists.txt").write_text(_cmake_text(name, sources))
    (stage / "stm32ai.mk").write_text(_make_text(name, sources))
    files = {str(p.relative_to(stage)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(stage.rglob("*")) if p.is_file()}
    (stage / MANIFEST).write_text(json.dumps({"inputs": inputs, "files": files}, indent=1, sort_keys=True) + "\n")
    (stage / MARKER).write_text("generated by stm32ai (generate --into): replaced as a whole when the model "
                                "changes; do not put your files here\n")


def component_state(folder: Path) -> dict | None:
    """The manifest of an existing, unmodified component, or None (missing, edited, foreign)."""
    try:
        doc = json.loads((folder / MANIFEST).read_text())
        files = doc["files"]
        on_disk = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} - {MANIFEST, MARKER}
        if on_disk != set(files):
            return None
        for rel, h in files.items():
            if hashlib.sha256((folder / rel).read_bytes()).hexdigest() != h:
                return None
        return doc
    except (OSError, ValueError, KeyError, TypeError):
        return None


# ---- wiring: text edits between markers ---------------------------------------------------------
def _strip(text: str, open_: str, close: str) -> str:
    """`text` without our marker blocks (the marker lines and what is between them)."""
    return _strip_at(text, open_, close)[0]


def _strip_at(text: str, open_: str, close: str) -> tuple[str, int | None]:
    """`text` without our marker blocks, and the line index (in the result) of the first block."""
    out, inside, at = [], False, None
    for line in text.splitlines(keepends=True):
        s = line.strip()
        if not inside and s == open_:
            inside = True
            at = len(out) if at is None else at
        elif inside and s == close:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise Stm32aiError(f"an stm32ai block has a begin marker and no end marker ({close!r}): fix the file by "
                           "hand (delete the block), then run again")
    return "".join(out), at


def _put_block(base: str, at: int, block: list[str], nl: str) -> str:
    """`block` lines inserted before line `at` of `base` (at == number of lines: appended)."""
    lines = base.splitlines(keepends=True)
    if at > 0 and not lines[at - 1].endswith(("\n", "\r\n")):
        lines[at - 1] += nl
    return "".join(lines[:at] + [b + nl for b in block] + lines[at:])


def _eol(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def wire_cmake(text: str, name: str) -> str:
    """The user-owned CMakeLists.txt: one add_subdirectory + target_link_libraries, appended (after
    the executable exists), in the keyword style the file already uses for that target."""
    hash_b, hash_e = f"# {BEGIN}", f"# {END}"
    base, at = _strip_at(text, hash_b, hash_e)
    code = re.sub(r"#[^\n]*", "", base)
    m = re.search(r"\badd_executable\s*\(\s*([^\s)]+)", code)
    if m is None:
        raise Stm32aiError("CMakeLists.txt has no add_executable(...): wire the component yourself: "
                           f"add_subdirectory({COMPONENT}) and target_link_libraries(<your target> stm32ai::{name})")
    target = m.group(1)
    calls = re.findall(r"\btarget_link_libraries\s*\(\s*" + re.escape(target) + r"\s+(\w+)", code)
    keyword = any(c in ("PRIVATE", "PUBLIC", "INTERFACE") for c in calls)
    nl = _eol(text)
    block = [hash_b, f"add_subdirectory({COMPONENT})",
             f"target_link_libraries({target} {'PRIVATE ' if keyword else ''}stm32ai::{name})", hash_e]
    # where the block already is (the user may have moved it, or added lines after it), else the end
    return _put_block(base, len(base.splitlines()) if at is None else at, block, nl)


_MAKE_VAR = re.compile(r"^(C_SOURCES|C_INCLUDES)\s*(\+|:|::|\?)?=")


def wire_makefile(text: str) -> str:
    """One `include stm32ai/stm32ai.mk` after the last C_SOURCES / C_INCLUDES assignment (CubeMX's
    Makefile expands them in rules read later, so the include must come before those)."""
    hash_b, hash_e = f"# {BEGIN}", f"# {END}"
    base, at = _strip_at(text, hash_b, hash_e)
    lines = base.splitlines(keepends=True)
    last = -1
    i = 0
    while i < len(lines):
        start = i
        while lines[i].rstrip("\r\n").endswith("\\") and i + 1 < len(lines):
            i += 1
        if _MAKE_VAR.match(lines[start]):
            last = i
        i += 1
    if last < 0:
        raise Stm32aiError("the Makefile has no C_SOURCES / C_INCLUDES (CubeMX's variables): add "
                           f"`include {COMPONENT}/stm32ai.mk` yourself and use $(STM32AI_C_SOURCES), "
                           "$(STM32AI_C_INCLUDES)")
    block = [hash_b, f"include {COMPONENT}/stm32ai.mk", hash_e]
    return _put_block(base, last + 1 if at is None else at, block, _eol(text))


_INCLUDE_OPT = re.compile(r'(<option\b[^>]*superClass="com\.st\.stm32cube\.ide\.mcu\.gnu\.managedbuild\.tool\.c\.'
                          r'compiler\.option\.includepaths"[^>]*?)(/?)>')
_SOURCE_ENTRIES = re.compile(r"<sourceEntries>")


def wire_cproject(text: str) -> str:
    """STM32CubeIDE's .cproject: the component as a source folder and its two include paths, in
    every configuration (each <cconfiguration>), between XML comment markers."""
    xml_b, xml_e = f"<!-- {BEGIN} -->", f"<!-- {END} -->"
    base = _strip(text, xml_b, xml_e)
    nl = _eol(text)
    if not _SOURCE_ENTRIES.search(base) or "<cconfiguration" not in base:
        raise Stm32aiError(".cproject has no configuration with <sourceEntries>: open the project once in "
                           "STM32CubeIDE (it writes them), then run again")

    entry = f'<entry flags="VALUE_WORKSPACE_PATH|RESOLVED" kind="sourcePath" name="{COMPONENT}"/>'
    src_block = f"{nl}{xml_b}{nl}{entry}{nl}{xml_e}"
    out = []
    for chunk in re.split(r"(?=<cconfiguration\b)", base):
        if chunk.startswith("<cconfiguration"):
            if not _INCLUDE_OPT.search(chunk):
                raise Stm32aiError(".cproject: a configuration has no C compiler include-path option: add any "
                                   "include path in STM32CubeIDE once, then run again")
            # STM32CubeIDE drops XML comments when it saves the project: entries it kept without
            # our markers are not added twice
            missing = [v for v in (f"../{COMPONENT}", f"../{COMPONENT}/runtime/include")
                       if f'value="{v}"' not in chunk]
            if missing:
                chunk = _INCLUDE_OPT.sub(lambda m, vs=missing: _include_block(m, vs, nl, xml_b, xml_e), chunk)
            if f'kind="sourcePath" name="{COMPONENT}"' not in chunk:
                chunk = _SOURCE_ENTRIES.sub(lambda m: m.group(0) + src_block, chunk)
        out.append(chunk)
    return "".join(out)


def _include_block(m: re.Match, values: list[str], nl: str, xml_b: str, xml_e: str) -> str:
    if m.group(2) == "/":
        raise Stm32aiError(".cproject: a configuration's include-path option is empty (<option .../>): add "
                           "any include path in STM32CubeIDE once, then run again")
    vals = "".join(f'{nl}<listOptionValue builtIn="false" value="{v}"/>' for v in values)
    return f"{m.group(1)}>{nl}{xml_b}{vals}{nl}{xml_e}"  # the option's own line break follows


# ---- the plan -----------------------------------------------------------------------------------
@dataclass
class Change:
    path: Path
    what: str                        # "create", "replace", "edit", "unchanged"
    new_text: str | None = None      # for an edited build file
    note: str = ""


@dataclass
class Plan:
    project: Project
    component: Path
    changes: list[Change] = field(default_factory=list)
    component_changed: bool = True

    def describe(self) -> list[str]:
        return [f"{c.what:9s} {c.path.relative_to(self.project.root)}" + (f" ({c.note})" if c.note else "")
                for c in self.changes]

    @property
    def changed(self) -> bool:
        return any(c.what != "unchanged" for c in self.changes)


def plan_into(project: Project, name: str, inputs: dict[str, object]) -> Plan:
    """What `--into` changes: the component folder (created, replaced or unchanged: same inputs
    and no file touched since) and the wiring of the project's build file."""
    comp = project.root / COMPONENT
    if comp.is_symlink() or (comp.exists() and not comp.is_dir()):
        raise Stm32aiError(f"{comp} exists and is not a folder: move it away (stm32ai writes its component there)")
    if comp.is_dir() and any(comp.iterdir()) and not is_generated(comp):
        raise Stm32aiError(f"{comp} exists and was not written by stm32ai (no {MARKER}): move it away or rename it")
    plan = Plan(project, comp)
    state = component_state(comp) if comp.is_dir() else None
    if state is not None and state.get("inputs") == json.loads(json.dumps(inputs)):  # as stored (tuples: lists)
        plan.component_changed = False
        plan.changes.append(Change(comp, "unchanged"))
    elif comp.exists() and (comp / MANIFEST).is_file() and state is None:
        plan.changes.append(Change(comp, "replace", note="files in it were edited: stm32ai owns this folder, "
                                                       "the edits are replaced"))
    else:
        plan.changes.append(Change(comp, "replace" if comp.exists() else "create"))
    text = project.build_file.read_text(encoding="utf-8", errors="surrogateescape")
    if project.kind == "cmake":
        new = wire_cmake(text, name)
    elif project.kind == "make":
        new = wire_makefile(text)
    else:
        new = wire_cproject(text)
    plan.changes.append(Change(project.build_file, "unchanged" if new == text else "edit", new))
    return plan


def apply_plan(plan: Plan, emit: Callable[[Path], None]) -> None:
    """Write the component (emitted into a staging folder by `emit`, moved into place) then the
    build-file edits (each through a temp file and a rename, bytes the file had kept as they were)."""
    if plan.component_changed:
        with staging_dir(plan.component) as tmp:
            stage = tmp / COMPONENT
            stage.mkdir()
            emit(stage)
            publish_dir(stage, plan.component)
    for c in plan.changes:
        if c.what == "edit" and c.new_text is not None:
            _write_atomic(c.path, c.new_text.encode("utf-8", errors="surrogateescape"))


def _write_atomic(path: Path, data: bytes) -> None:
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise Stm32aiError(f"cannot write {path}: {e.strerror or e}") from None
