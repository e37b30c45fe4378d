"""One home per fact: the package's import graph has no cycle, the constants the C runtime
shares with Python agree, and every op family has one name in each layer."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from stm32ai.ir import DTYPE_CODES, MAX_DIMS

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "stm32ai"
RUNTIME = PKG / "runtime"
LOWER = PKG / "passes" / "lower"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """stm32ai modules `path` imports anywhere (function-level imports included: a cycle
    hidden inside a function is still a cycle; typing-only imports excluded)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for stmt in node.body for n in ast.walk(stmt)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:  # `if TYPE_CHECKING:` imports never run
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def import_graph() -> dict[str, set[str]]:
    files = sorted(PKG.rglob("*.py"))
    modules = {_module_name(f) for f in files}
    return {_module_name(f): _imports(f, modules) for f in files}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` (a list of modules, first == last), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (c := visit(n)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycle_in_stm32ai():
    graph = import_graph()
    assert "stm32ai.passes.lower.binary" in graph  # the walk sees the package
    # a package's __init__ importing its submodules is how Python packages work; every other
    # edge counts
    cycle = find_cycle({m: {n for n in deps if not m.startswith(n + ".")} for m, deps in graph.items()})
    assert cycle is None, " -> ".join(cycle)


# the compiler stages: they run before the project exists and never consult a later stage
COMPILER_PACKAGES = ("stm32ai.frontend", "stm32ai.passes", "stm32ai.planner", "stm32ai.emitter",
                     "stm32ai.graphjson", "stm32ai.ir", "stm32ai.pipeline", "stm32ai.report", "stm32ai.project")


def test_estimator_is_a_later_stage():
    """stm32ai.estimate reads a built firmware: no compiler stage (nor the project generator)
    imports it, and it imports no compiler pass."""
    graph = import_graph()
    assert "stm32ai.estimate.trace" in graph
    for m, deps in graph.items():
        if m.startswith(COMPILER_PACKAGES):
            bad = sorted(d for d in deps if d.startswith("stm32ai.estimate"))
            assert not bad, f"{m} imports {bad}"
        if m.startswith("stm32ai.estimate"):
            bad = sorted(d for d in deps if d.startswith(("stm32ai.passes", "stm32ai.frontend", "stm32ai.planner",
                                                          "stm32ai.emitter", "stm32ai.validate")))
            assert not bad, f"{m} imports {bad}"


def test_tuner_is_a_later_stage_and_the_table_module_is_light():
    """The tuner (stm32ai.tune) builds and estimates candidates: no compiler stage, nor the
    project generator or the estimator, imports it. The table module both sides read
    (stm32ai.tuning) imports none of the heavy stages."""
    graph = import_graph()
    assert "stm32ai.tune" in graph and "stm32ai.tuning" in graph
    assert "stm32ai.tuning" in graph["stm32ai.passes.lower.conv"]
    for m, deps in graph.items():
        if m.startswith(COMPILER_PACKAGES + ("stm32ai.estimate", "stm32ai.tuning")):
            assert "stm32ai.tune" not in deps, f"{m} imports the tuner"
    heavy = ("stm32ai.passes", "stm32ai.frontend", "stm32ai.planner", "stm32ai.emitter", "stm32ai.pipeline",
             "stm32ai.project", "stm32ai.estimate", "stm32ai.validate", "stm32ai.tune")
    bad = sorted(d for d in graph["stm32ai.tuning"] if d.startswith(heavy) and d != "stm32ai.tuning")
    assert not bad, f"stm32ai.tuning imports {bad}"


def test_compiler_never_imports_the_project_generator():
    """Data flows forward: the compiler stages (frontend .. pipeline) run before the project
    exists, so none imports stm32ai.project; what both need about a board's memory (the code
    reserve, the pools' placement) lives in stm32ai.placement, below both."""
    graph = import_graph()
    assert "stm32ai.placement" in graph
    for m, deps in graph.items():
        if m.startswith(COMPILER_PACKAGES) and not m.startswith("stm32ai.project"):
            bad = sorted(d for d in deps if d.startswith("stm32ai.project"))
            assert not bad, f"{m} imports {bad} (against the pipeline's direction)"
    assert not {d for d in graph["stm32ai.placement"] if d.startswith("stm32ai.project")}


def _c_define(header: str, name: str) -> int:
    m = re.search(rf"^#define {name} (\d+)", (RUNTIME / "include" / header).read_text(), re.M)
    assert m, f"{name} not in {header}"
    return int(m.group(1))


def test_max_dims_one_value():
    assert _c_define("ai_platform.h", "AI_MAX_DIMS") == MAX_DIMS
    # no kernel header keeps its own copy
    for h in (RUNTIME / "include").glob("*.h"):
        assert not re.search(r"^#define AI_\w*DIMS \d", h.read_text(), re.M) or h.name == "ai_platform.h", h.name
    for f in PKG.rglob("*.py"):
        assert not re.search(r"^MAX_DIMS = ", f.read_text(), re.M) or f.name == "ir.py", f


def test_dtype_codes_match_the_c_enum():
    text = (RUNTIME / "include" / "ai_platform.h").read_text()
    enum = re.search(r"typedef enum \{([^}]*)\} ai_dtype_code;", text)
    assert enum
    c_codes = {k: int(v) for k, v in re.findall(r"AI_DT_(\w+) = (\d+)", enum.group(1))}
    kind = {"int": "INT", "uint": "UINT", "float": "FLOAT", "bool": "BOOL"}
    for dtype, (code, bits) in DTYPE_CODES.items():
        base = re.sub(r"\d+$", "", dtype)
        assert c_codes[kind[base]] == code, dtype
        assert bits == (8 if dtype == "bool" else int(dtype[len(base):])), dtype
    assert set(kind.values()) == set(c_codes)


# Lowering modules that belong to another module's family (their kernels, docs and sources are
# that family's), and kernel headers that serve several families.
SUB_FAMILY = {"dwconv3x3": "conv", "conv_geometry": "conv", "overlap": "conv", "tile": "movement"}
SHARED_HEADERS = {"hybrid": ("conv", "fc")}
# A variant module re-implements several families for one data type (s16.py: int16x8). Its
# kernels keep the family's name with the variant as suffix: ai_kernels_<family>[_<sub>]_s16.h,
# ai_<family>[_<sub>]_s16.c; one docs page, docs/kernels_<variant>.md.
VARIANTS = {"s16", "u8"}


def test_every_op_family_has_one_name_in_each_layer():
    families = sorted(p.stem for p in LOWER.glob("*.py") if p.stem not in ("__init__", "common"))
    headers = {p.stem.removeprefix("ai_kernels_") for p in (RUNTIME / "include").glob("ai_kernels_*.h")}
    docs = {p.stem.removeprefix("kernels_") for p in (ROOT / "docs").glob("kernels_*.md")}
    sources = [p.stem.removeprefix("ai_") for p in (RUNTIME / "src").glob("ai_*.c")]
    for fam in families:
        if fam in SUB_FAMILY:
            assert SUB_FAMILY[fam] in families
            continue
        if fam in VARIANTS:
            assert fam in docs, f"variant module {fam}.py has no docs/kernels_{fam}.md"
            continue
        if fam != "reshape" or "reshape" in headers:
            assert fam in headers, f"lowering module {fam}.py has no ai_kernels_{fam}.h"
        assert fam in docs, f"lowering module {fam}.py has no docs/kernels_{fam}.md"
    def variant_of_family(stem: str) -> bool:
        base, _, variant = stem.rpartition("_")
        return variant in VARIANTS and any(base == f or base.startswith(f + "_") for f in families)

    for h in headers - set(families):
        assert h in SHARED_HEADERS or variant_of_family(h), f"ai_kernels_{h}.h names no lowering module"
    owners = set(families) | set(SHARED_HEADERS) | {"runtime"}
    for s in sources:
        assert any(s == f or s.startswith(f + "_") for f in owners), f"ai_{s}.c belongs to no family"
    for d in docs - set(families) - set(SHARED_HEADERS):
        raise AssertionError(f"docs/kernels_{d}.md names no lowering module")
