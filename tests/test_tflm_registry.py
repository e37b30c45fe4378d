"""Coverage against TFLite Micro's kernel registry: every operator the installed tflite-micro
wheel registers (a `tflite::micro[::tflm_signal]::Register_<OP>()` function in its
`_runtime*.so`) is listed by `stm32ai supported-ops`, outside a short reasoned exclusion list.

The names come from the shared object's symbol table (pyelftools, the Itanium-mangled names
decoded here: no `nm` needed), not from a list kept in this repository, so a new TFLM release
that adds an operator fails this test until stm32ai lists it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stm32ai.passes.supported import supported_ops

ROOT = Path(__file__).resolve().parents[1]

# Registered by TFLM, deliberately not stm32ai operators (each with the reason).
EXCLUDED = {
    "ETHOSU": "Arm Ethos-U NPU offload (a custom op wrapping a command stream): no STM32 has an Ethos-U",
    "DECODE": "TFLM's own plumbing for its compressed tensors (custom 'TFLM_DECODE', inserted by TFLM's "
              "compression tool, not by a TensorFlow converter); stm32ai packs weights itself",
    "BASIC_CLASSIFIER": "a custom op of TFLM's (kernels/basic_classifier.cc, custom name 'BasicClassifier'), "
                        "not a TFLite builtin and not emitted by any TensorFlow converter",
    "L2NORM_REF": "per-type/implementation alias: the reference registration of L2_NORMALIZATION",
}
# Per-type registrations of one operator (TFLM links the type-specialised kernel alone to save
# code): the operator counts once, under its base name; op_types.md covers the types.
ALIAS_SUFFIXES = ("_FLOAT", "_INT8", "_INT16", "_INT32", "_INT8X16", "_REF")

# TFLM's signal library ops are TFLite custom ops named "Signal" + CamelCase of the kernel name;
# the one spelling that is not plain CamelCase:
SIGNAL_NAMES = {"PCAN": "SignalPCAN"}
# TFLM kernels registered for a TFLite custom op of another name (TFLite's own custom-op code)
CUSTOM_NAMES = {"DETECTION_POSTPROCESS": "TFLite_Detection_PostProcess"}


def _runtime_so() -> Path:
    tflm = pytest.importorskip("tflite_micro")
    found = sorted(Path(tflm.__file__).resolve().parent.rglob("_runtime*.so"))
    if not found:
        pytest.skip("tflite-micro wheel without _runtime*.so")
    return found[0]


_MANGLED = re.compile(r"_ZN6tflite5micro(?:11tflm_signal)?(\d+)(Register_\w+)")


def registered_kernels(so: Path) -> dict[str, bool]:
    """{OP: is a signal-library op} from the `Register_<OP>()` functions the library exports."""
    from elftools.elf.elffile import ELFFile

    out: dict[str, bool] = {}
    with so.open("rb") as f:
        elf = ELFFile(f)
        for sec_name in (".dynsym", ".symtab"):
            sec = elf.get_section_by_name(sec_name)
            if sec is None:
                continue
            for sym in sec.iter_symbols():
                m = _MANGLED.match(sym.name)
                if not m:
                    continue
                n = int(m.group(1))  # Itanium mangling: <length><identifier>
                ident = m.group(2)[:n]
                if len(ident) == n and ident.startswith("Register_"):
                    out[ident.removeprefix("Register_")] = "11tflm_signal" in sym.name[:30]
    return out


def stm32ai_names(op: str, signal: bool) -> set[str]:
    """The names supported-ops may list TFLM's operator under (builtin or custom op)."""
    names = {op, f"CUSTOM:{op}"}
    if op in CUSTOM_NAMES:
        names.add(f"CUSTOM:{CUSTOM_NAMES[op]}")
    if signal:
        camel = SIGNAL_NAMES.get(op, "Signal" + "".join(w.capitalize() for w in op.split("_")))
        names |= {camel, f"CUSTOM:{camel}"}
    return names


def operators(kernels: dict[str, bool]) -> dict[str, bool]:
    """TFLM's operators: per-type aliases folded into their base, exclusions removed."""
    ops = {}
    for k, sig in kernels.items():
        if k in EXCLUDED:
            continue
        base = next((k.removesuffix(s) for s in ALIAS_SUFFIXES if k.endswith(s) and k.removesuffix(s) in kernels),
                    k)
        ops[base] = ops.get(base, sig) or sig
    return ops


def test_symbol_decoding_reads_the_registry():
    """Independent of stm32ai: the decoded set has TFLM's well-known kernels, both namespaces,
    and the aliases fold into their base."""
    kernels = registered_kernels(_runtime_so())
    for k in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "SOFTMAX", "ETHOSU"):
        assert kernels.get(k) is False, k
    for k in ("RFFT", "RFFT_INT16", "WINDOW", "PCAN"):
        assert kernels.get(k) is True, k
    ops = operators(kernels)
    assert "RFFT" in ops and "RFFT_INT16" not in ops and "ETHOSU" not in ops
    assert stm32ai_names("FFT_AUTO_SCALE", True) >= {"CUSTOM:SignalFftAutoScale"}
    assert "CUSTOM:SignalPCAN" in stm32ai_names("PCAN", True)
    # every exclusion names a kernel this wheel really registers (no stale entries)
    assert set(EXCLUDED) <= set(kernels), sorted(set(EXCLUDED) - set(kernels))


def test_supported_ops_cli_prints_the_listing():
    out = subprocess.run([sys.executable, "-m", "stm32ai", "supported-ops", "--json"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    # the same listing as the compiler's tables (variant texts may come in another order when a
    # test imported a variant module before the registry loaded the others)
    here = supported_ops()
    assert listed.keys() == here.keys()
    assert all(sorted(listed[k].split("; ")) == sorted(here[k].split("; ")) for k in here)
    # folded and aliased op types are listed with how (from the compiler's own tables)
    assert "RESHAPE" in listed["SQUEEZE"] and "RESHAPE" in listed["EXPAND_DIMS"]
    assert "static shape" in listed["SHAPE"]
    assert "dilated convolution" in listed["SPACE_TO_BATCH_ND"]


def test_every_tflm_operator_is_supported():
    ops = operators(registered_kernels(_runtime_so()))
    listed = set(supported_ops())
    missing = sorted(op for op, sig in ops.items() if not stm32ai_names(op, sig) & listed)
    covered = len(ops) - len(missing)
    assert not missing, (f"TFLite Micro registers {len(ops)} operators (exclusions: {sorted(EXCLUDED)}); "
                         f"stm32ai supported-ops lists {covered}; missing {len(missing)}: {', '.join(missing)}")
