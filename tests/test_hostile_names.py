"""A model's strings are untrusted input (docs/security.md): hostile names must not inject code,
break the build or change what the model computes.

Each payload goes into every place a model carries a string: every tensor (inputs, outputs,
LSTM state tensors, intermediates, constants), the subgraph name, the model description,
signature keys and their tensor maps, metadata names, and, for the error-text cases, a custom
op's name. The hostile models are rewritten from fixtures with LiteRT's flatbuffer object API.
For each one the generated C must
- compile under `-std=c99 -Wall -Wextra -Werror -Wtrigraphs` (and parse under `-trigraphs`),
- hold only printable ASCII, with no code outside comments and string literals that differs
  from the plain-named model's (so no payload escaped a neutralised literal or comment),
- compute exactly the plain-named model's outputs on the host, and
- carry each tensor's name in `ai_tensor.name` byte for byte (up to the length cap).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES

from stm32ai.emitter import emit_c
from stm32ai.frontend.tflite_reader import load_tflite
from stm32ai.pipeline import compile_model
from stm32ai.resources import runtime_dir
from stm32ai.sanitize import MAX_CHARS, c_comment, c_string, one_line
from stm32ai.validate.host import CFLAGS, harness_source
from stm32ai.validate.reference import random_inputs
from stm32ai.validate.run import per_sample

schema = pytest.importorskip("ai_edge_litert.schema_py_generated")
flatbuffers = pytest.importorskip("flatbuffers")

PAYLOADS: dict[str, bytes] = {
    "close_comment": b"x*/ int injected_a = 1; /*",
    "line_comment": b"y// \n int injected_b = 2;\n",
    "carriage_return": b"cr\rname\r",
    "nul": b"nul\x00int injected_c;",
    "bidi": "bidi\u202e } int injected_d; {\u2066".encode(),
    "trigraph": b"tri??/\nint injected_e; ??= ??( ??) ??'",
    "backslash_end": b"back\\",
    "quotes": b"quo\"te's \"); int injected_f; (\"",
    "format": b"%s%n%x%p%%",
    "not_utf8": b"\xff\xfe\x80bad\xc3",
    "make_cmake": b"${injected_g}$(shell touch injected_h) `id` $$(x) #",
    "xml": b"]]><injected_i/><!-- & &amp; <",
    "params_key": b"p0",  # also the key of the first constant in params.npz
    "hex_escape": b"\\x41\\101\\u0041",
    "long": b"L" * 100_000,
    "empty": b"",
}
FIXTURE_MODELS = ("two_in_two_out_int8.tflite", "lstm_stacked_int8.tflite")
CHECK_FLAGS = [*CFLAGS, "-Wtrigraphs"]
INJECTED = re.compile(rb"injected|pwned")


# ---- hostile models ----------------------------------------------------------------------------
def _pack(m) -> bytes:
    b = flatbuffers.Builder(1 << 16)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def rename(src: Path, dst: Path, payload: bytes, custom_op: bytes | None = None,
           tensor_name=None) -> Path:
    """`src` with every string set to `payload` (tensor i: `tensor_name(i)` if given);
    `custom_op` turns op 0 into that custom op."""
    m = schema.ModelT.InitFromPackedBuf(bytearray(src.read_bytes()), 0)
    m.description = payload
    for sg in m.subgraphs:
        sg.name = payload
        for i, t in enumerate(sg.tensors):
            t.name = payload if tensor_name is None else tensor_name(i)
    sg = m.subgraphs[0]

    def tmap(idx: int):
        tm = schema.TensorMapT()
        tm.name, tm.tensorIndex = payload, int(idx)
        return tm

    sig = schema.SignatureDefT()
    sig.signatureKey, sig.subgraphIndex = payload, 0
    sig.inputs = [tmap(i) for i in sg.inputs]
    sig.outputs = [tmap(i) for i in sg.outputs]
    m.signatureDefs = [sig]
    meta = schema.MetadataT()
    meta.name, meta.buffer = payload, 0
    m.metadata = [*(m.metadata or []), meta]
    if custom_op is not None:
        oc = schema.OperatorCodeT()
        oc.builtinCode = oc.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
        oc.customCode, oc.version = custom_op, 1
        m.operatorCodes.append(oc)
        sg.operators[0].opcodeIndex = len(m.operatorCodes) - 1
    dst.write_bytes(_pack(m))
    return dst


# ---- host build: the runtime once per session, then three small files per model ------------------
@pytest.fixture(scope="session")
def runtime_objects(tmp_path_factory) -> list[Path]:
    if shutil.which("cc") is None:
        pytest.skip("no host C compiler")
    out = tmp_path_factory.mktemp("runtime")
    objs = []
    for src in sorted((runtime_dir() / "src").glob("*.c")):
        obj = out / (src.stem + ".o")
        subprocess.run(["cc", *CHECK_FLAGS, f"-I{runtime_dir() / 'include'}", "-c", str(src), "-o", str(obj)],
                       check=True)
        objs.append(obj)
    return objs


_DUMP_FN = """static void dump_name(const char *tag, int i, const char *s) {
  fprintf(stderr, "%s %d ", tag, i);
  for (; *s != '\\0'; s++) {
    fprintf(stderr, "%02x", (unsigned)(unsigned char)*s);
  }
  fputc('\\n', stderr);
}

"""
_NAMES_DUMP = """  for (int i = 0; i < ai_get_input_size(h); i++) {
    dump_name("in", i, ai_get_input(h, i)->name);
  }
  for (int i = 0; i < ai_get_output_size(h); i++) {
    dump_name("out", i, ai_get_output(h, i)->name);
  }
"""


def _harness(d: Path) -> Path:
    """The validate harness, printing each I/O tensor's name (hex) to stderr first."""
    text = harness_source({"network": "network.h"})
    anchor, main = "  for (int sample = 0;; sample++) {", "int main(int argc, char **argv) {"
    assert anchor in text and main in text
    text = text.replace(main, _DUMP_FN + main, 1)
    p = d / "harness.c"
    p.write_text(text.replace(anchor, _NAMES_DUMP + anchor, 1))
    return p


def build_and_run(c_dir: Path, objs: list[Path], samples: list[list[np.ndarray]]) -> tuple[bytes, bytes]:
    inc = [f"-I{c_dir}", f"-I{runtime_dir() / 'include'}"]
    for f in ("network.c", "network_data.c"):  # trigraphs on: nothing in the output may form one
        r = subprocess.run(["cc", *CHECK_FLAGS, "-trigraphs", "-fsyntax-only", *inc, str(c_dir / f)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
    exe = c_dir / "model"
    r = subprocess.run(["cc", *CHECK_FLAGS, *inc, str(c_dir / "network.c"), str(c_dir / "network_data.c"),
                        str(_harness(c_dir)), *map(str, objs), "-o", str(exe), "-lm"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    stdin = b"".join(np.ascontiguousarray(x).tobytes() for s in samples for x in s)
    run = subprocess.run([str(exe)], input=stdin, capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, run.stderr


# ---- what the generated text may contain ---------------------------------------------------------
_TOKEN = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_only(text: str) -> str:
    """The C text with comments and string/char literals blanked (no trigraphs in our output)."""
    return _TOKEN.sub(lambda m: "/**/" if m.group().startswith("/") else '""', text)


def assert_clean_c(text: str, what: str) -> None:
    bad = sorted({c for c in text if not (c == "\n" or " " <= c <= "~")})
    assert not bad, f"{what}: characters outside printable ASCII: {bad[:10]}"
    assert "??" not in text, f"{what}: possible trigraph"
    for m in _TOKEN.finditer(text):  # no comment nests another, no literal ends early
        body = m.group()
        if body.startswith("/*"):
            assert "/*" not in body[2:-2] and "*/" not in body[2:-2], f"{what}: {body[:120]}"


@pytest.fixture(scope="module")
def plain(tmp_path_factory, runtime_objects):
    """Per fixture: the plain-named model's code skeleton, inputs and host outputs."""
    out = {}
    for fx in FIXTURE_MODELS:
        d = tmp_path_factory.mktemp("plain")
        c = compile_model(FIXTURES / fx, "network")
        emit_c(c.doc, c.params, "network", d, with_runtime=False)
        samples = per_sample(c, random_inputs(FIXTURES / fx, 2, 7))
        stdout, _ = build_and_run(d, runtime_objects, samples)
        skel = {f: code_only((d / f).read_text()) for f in ("network.c", "network.h", "network_data.c",
                                                            "network_data.h")}
        out[fx] = (skel, samples, stdout)
    return out


def _expected_name(payload: bytes) -> bytes:
    """What `ai_tensor.name` holds: the frontend's decoding of the bytes (U+FFFD for bad UTF-8),
    capped by the sanitiser, up to the first NUL."""
    text = payload.decode("utf-8", errors="replace")
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS - 3] + "..."
    return text.encode().split(b"\0")[0]


@pytest.mark.parametrize("fixture", FIXTURE_MODELS)
@pytest.mark.parametrize("kind", list(PAYLOADS))
def test_hostile_names_in_generated_c(tmp_path, fixture, kind, plain, runtime_objects):
    payload = PAYLOADS[kind]
    model = rename(FIXTURES / fixture, tmp_path / f"m_{kind}.tflite", payload)
    if payload:  # every tensor of the model carries the payload
        assert {t.name for t in load_tflite(model).tensors} == {payload.decode("utf-8", errors="replace")}
    c = compile_model(model, "network")
    d = tmp_path / "c"
    emit_c(c.doc, c.params, "network", d, with_runtime=False)
    skel, samples, expected = plain[fixture]
    for f, code in skel.items():
        text = (d / f).read_text()
        assert_clean_c(text, f)
        assert code_only(text) == code, f"{f}: code outside comments and literals differs from the plain model"
        assert not INJECTED.search(code_only(text).encode())
    if "lstm" in fixture:
        assert (d / "network.c").read_text().count("memset(st + ") == 4  # the four state tensors, in the state area
    stdout, stderr = build_and_run(d, runtime_objects, samples)
    assert stdout == expected  # bit for bit the plain-named model's outputs
    names = [bytes.fromhex(ln.split(b" ", 2)[2].decode()) for ln in stderr.splitlines()
             if ln.startswith((b"in ", b"out "))]
    assert len(names) == len(c.graph.inputs) + len(c.graph.outputs)
    if payload:  # (an empty name becomes tensor_<index>)
        assert all(n == _expected_name(payload) for n in names), names[:2]


def test_input_named_like_a_params_key():
    """An input named like a constant's key in params.npz ("p0") must not pull that constant's
    data into the weights array at the input's own (activation pool) offset."""
    from stm32ai.emitter import _weights_blob

    doc = {"stm32ai": {"pools": [{"name": "weights", "size": 8}, {"name": "activations", "size": 64}],
                       "storage": [{"pool": "activations", "offset": 32, "size": 4},
                                   {"pool": "weights", "offset": 0, "size": 4}]},
           "attrs": {"storage_id": ["list_int", [0, 1]]}, "node_row_ptr": [0, 1, 2], "arg_nodes": [0, 1],
           "nodes": [{"op": "null", "name": "p0", "inputs": [], "attrs": {"graph_input": 0}},
                     {"op": "null", "name": "p0", "inputs": [], "attrs": {"tensor": "w"}}]}
    assert _weights_blob(doc, {"p0": np.arange(1, 5, dtype=np.int8)}) == bytes([1, 2, 3, 4, 0, 0, 0, 0])


# ---- the helpers themselves ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(PAYLOADS))
def test_sanitiser_alphabets(kind):
    s = PAYLOADS[kind].decode("utf-8", errors="surrogateescape")
    lit = c_string(s)
    # printable ASCII without " ' ? \, or a three-digit octal escape
    assert re.fullmatch(r"(?:[\x20\x21\x23-\x26\x28-\x3e\x40-\x5b\x5d-\x7e]|\\[0-7]{3})*", lit), lit[:200]
    com = c_comment(s)
    assert "*" not in com and "??" not in com and not com.endswith(("\\", "/")) and not com.startswith("/")
    assert all(" " <= ch <= "~" for ch in com)
    line = one_line(s)
    assert "\n" not in line and "\r" not in line and "\u202e" not in line and len(line) <= 2000


def test_c_string_round_trips_bytes():
    """The C compiler turns the literal back into the very bytes (checked by compiling it)."""
    raw = bytes(range(1, 256)) + b"?\\?\"?'?" + "\u202e".encode() + b"\0after the NUL"
    lit = c_string(raw.decode("utf-8", errors="surrogateescape"), limit=10_000)
    expect = raw.split(b"\0")[0]
    src = f'#include <stdio.h>\nint main(void) {{ fputs("{lit}", stdout); return 0; }}\n'
    assert _run_c(src, ["-trigraphs"]) == expect


def _run_c(src: str, flags: list[str]) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "t.c").write_text(src)
        subprocess.run(["cc", *CHECK_FLAGS, *flags, str(Path(d) / "t.c"), "-o", str(Path(d) / "t")], check=True)
        return subprocess.run([str(Path(d) / "t")], capture_output=True, check=True).stdout


def test_templates_filter_every_model_string():
    """Every template renders model strings only through a sanitiser filter: the environments
    refuse an unfiltered `Untrusted`, and a scan of the template sources finds no unfiltered use
    of the context keys that hold model strings."""
    import jinja2
    from jinja2 import nodes

    from stm32ai.resources import data_dir
    from stm32ai.sanitize import FILTERS, UnsafeTemplateUse, Untrusted, configure

    untrusted_keys = {"tensor_name", "source", "source_op", "source_index", "model_file"}
    roots = [Path(__file__).resolve().parents[1] / "stm32ai" / "emitter" / "templates", data_dir("demo"),
             data_dir("linker_scripts"), data_dir("project_templates")]
    env = configure(jinja2.Environment())
    scanned = 0
    for root in roots:
        for f in sorted(p for p in root.rglob("*") if p.is_file() and "{{" in p.read_text(errors="replace")):
            tree = env.parse(f.read_text())
            scanned += 1
            for out in tree.find_all(nodes.Output):
                for expr in out.nodes:
                    _check_expr(expr, untrusted_keys, set(FILTERS), f"{f.name}")
    assert scanned >= 15
    with pytest.raises(UnsafeTemplateUse):
        env.from_string("{{ x }}").render(x=Untrusted("a*/b"))
    assert env.from_string("{{ x|c_comment }}").render(x=Untrusted("a*/b")) == "a\\x2a/b"


def _check_expr(node, keys: set[str], filters: set[str], where: str, filtered: bool = False) -> None:
    from jinja2 import nodes

    if isinstance(node, nodes.Filter) and node.name in filters:
        filtered = True
    name = node.attr if isinstance(node, nodes.Getattr) else node.name if isinstance(node, nodes.Name) else None
    if name in keys:
        assert filtered, f"{where}: '{name}' rendered without a sanitiser filter"
    for child in node.iter_child_nodes():
        _check_expr(child, keys, filters, where, filtered)


# ---- error text ----------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.run([sys.executable, "-m", "stm32ai", *args], capture_output=True, timeout=300, env=env)


@pytest.mark.parametrize("kind", ["line_comment", "carriage_return", "bidi", "long", "not_utf8"])
def test_unsupported_custom_op_error_is_one_line(tmp_path, kind):
    payload = PAYLOADS[kind]
    model = rename(FIXTURES / "two_in_two_out_int8.tflite", tmp_path / "m.tflite", payload, custom_op=payload)
    r = _cli("generate", str(model), "--c-only", "-o", str(tmp_path / "out"))
    assert r.returncode == 2, r.stderr
    err = r.stderr.decode("utf-8")  # valid UTF-8 even for non-UTF-8 names
    assert err.endswith("\n") and err.count("\n") == 1 and "\r" not in err, err[:500]
    assert "unsupported" in err and "CUSTOM" in err and len(err) < 4000
    assert not any(ch in err for ch in "\u202e\u2066\x00")
    assert not (tmp_path / "out").exists()


# ---- a whole firmware project ----------------------------------------------------------------------
HOSTILE_FILE = "m$(shell touch pwned)${X}`id`*??\\x\r\u202e]]><'\"#;%.tflite"


@pytest.fixture(scope="module")
def hostile_project(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("proj")
    payload = PAYLOADS["close_comment"] + PAYLOADS["make_cmake"] + PAYLOADS["xml"] + PAYLOADS["trigraph"]
    model = rename(FIXTURES / "two_in_two_out_int8.tflite", d / HOSTILE_FILE, payload)
    plain_model = d / "plain.tflite"
    shutil.copy(FIXTURES / "two_in_two_out_int8.tflite", plain_model)
    out = {}
    for tag, m in (("hostile", model), ("plain", plain_model)):
        r = _cli("generate", str(m), "--board", "qemu-netduinoplus2", "-o", str(d / tag))
        assert r.returncode == 0, r.stderr
        out[tag] = d / tag
    return out["hostile"], out["plain"]


def test_firmware_project_files_are_clean(hostile_project):
    proj, plain_proj = hostile_project
    assert not (proj / "pwned").exists() and not Path("pwned").exists()
    for f in ("Makefile", "CMakeLists.txt", "cmake/stm32cubemx/CMakeLists.txt", "cmake/gcc-arm-none-eabi.cmake",
              "README.md", ".project", ".cproject", "stm32ai_project.json", "qemu-netduinoplus2.ld",
              "Core/Src/main.c", "Core/Src/demo_data.c", "Core/Inc/demo_data.h",
              "Model/network.c", "Model/network.h"):
        text, plain_text = (proj / f).read_text(), (plain_proj / f).read_text()

        def odd(t: str) -> list[str]:  # (the templates' own text has a '§' or two)
            return [ch for ch in t if not (ch in "\n\t" or " " <= ch <= "~")]

        assert odd(text) == odd(plain_text), f
        if f.endswith((".c", ".h")):  # payload text may stand in comments, not in code
            assert_clean_c(text.replace("\u00a7", "S"), f)
            assert code_only(text) == code_only(plain_text), f
            continue
        for seq in ("$(", "${", "`", "]]>", "<injected", "*/", "??", "\\", "#", ";", "'", '"', "&"):
            assert text.count(seq) == plain_text.count(seq), (f, seq)
    assert "m%24%28shell touch pwned%29" in (proj / "README.md").read_text()
    for f in (".project", ".cproject"):
        ET.parse(proj / f)
    assert ET.parse(proj / ".project").getroot().find("comment").text.startswith("network (m%24%28shell")
    if shutil.which("make"):
        r = subprocess.run(["make", "-n"], cwd=proj, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "injected" not in r.stdout and not (proj / "pwned").exists()


@pytest.mark.slow
def test_firmware_project_builds_with_hostile_names(hostile_project):
    proj, _ = hostile_project
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    r = subprocess.run(["make", "-j2"], cwd=proj, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (proj / "build" / "firmware.elf").is_file() and not (proj / "pwned").exists()


# ---- validate and analyze on a hostile model ----------------------------------------------------
def test_validate_and_analyze_a_hostile_model(tmp_path):
    """End to end: `validate --mode host` compiles and runs the hostile model's C and matches the
    references; rich markup in the file name and names is shown, not interpreted."""
    payload = PAYLOADS["close_comment"] + PAYLOADS["bidi"] + PAYLOADS["not_utf8"] + b"[/bold][red]"
    model = rename(FIXTURES / "two_in_two_out_int8.tflite", tmp_path / "m[red]x[bold]y.tflite", payload)
    r = _cli("validate", str(model), "-n", "2", "--json", str(tmp_path / "v.json"))
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "m[red]x[bold]y.tflite" in out and "result: match" in out
    r = _cli("analyze", str(model), "--html", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    assert "m[red]x[bold]y: 6 layers" in r.stdout.decode()
    assert "<title>m[red]x[bold]y</title>" in (tmp_path / "r.html").read_text()
