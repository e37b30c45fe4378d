"""Command-line interface (DESIGN §2). Exit codes: 0 ok, 1 checks failed, 2 bad input."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stm32ai import __version__
from stm32ai.errors import CheckFailed, Stm32aiError


def _console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _progress():
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                    console=_console(), transient=True, disable=not sys.stderr.isatty())


def _model_path(p: str) -> Path:
    path = Path(p)
    if not path.exists():
        raise Stm32aiError(f"model file '{p}' not found")
    if not path.is_file():
        raise Stm32aiError(f"'{p}' is not a file")
    return path


def _compile(args: argparse.Namespace, name: str):
    from stm32ai.emitter import check_name
    from stm32ai.pipeline import compile_model, weights_budget_for

    check_name(name)
    return compile_model(_model_path(args.model), name,
                         inputs_in_pool=not getattr(args, "no_inputs_allocation", False),
                         outputs_in_pool=not getattr(args, "no_outputs_allocation", False),
                         optimization=getattr(args, "optimization", "balanced"),
                         weights_budget=weights_budget_for(getattr(args, "board", None)))


def _prepare_output_dir(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise Stm32aiError(f"output path '{out}' exists and is not a directory")
    if out.exists() and any(out.iterdir()) and not force:
        raise Stm32aiError(f"output directory '{out}' exists and is not empty (use --force to replace it)")
    parent = out.resolve().parent
    if not parent.exists():
        raise Stm32aiError(f"parent directory '{parent}' does not exist")
    if not os.access(parent, os.W_OK):
        raise Stm32aiError(f"cannot write to '{parent}'")


def _publish(tmp: Path, out: Path) -> None:
    """Move a fully written temp dir into place: never a half-written output."""
    if out.exists():
        shutil.rmtree(out)
    shutil.move(str(tmp), str(out))


def cmd_generate(args: argparse.Namespace) -> int:
    from stm32ai.emitter import emit_c
    from stm32ai.graphjson import write_artifact

    name = args.name
    out = Path(args.output or (f"{name}_c" if args.c_only else f"{name}_{args.board or 'project'}"))
    _prepare_output_dir(out, args.force)
    if not args.c_only and not args.board:
        raise Stm32aiError("--board is required to generate a firmware project (or use --c-only)")
    with _progress() as prog:
        task = prog.add_task("compiling model", total=None)
        c = _compile(args, name)
        with tempfile.TemporaryDirectory(prefix=".stm32ai-", dir=out.resolve().parent) as tmp:
            stage = Path(tmp) / "out"
            if args.c_only:
                prog.update(task, description="emitting C")
                write_artifact(stage, c.doc, c.params)
                emit_c(c.doc, c.params, name, stage)
            else:
                from stm32ai.project.build import generate_firmware_project

                prog.update(task, description="generating project")
                generate_firmware_project(args, c, stage)
            _publish(stage, out)
    from stm32ai.report import build_report

    r = build_report(c)
    print(f"generated {out}: {len(r.layers)} layers, MACC {r.macc:,}, weights {r.weights_bytes:,} B, "
          f"activations {r.activations_bytes:,} B")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from stm32ai.report import build_report, render_html, render_table

    c = _compile(args, "network")
    r = build_report(c)
    if args.board:
        from stm32ai.project.build import fits_report

        r.fits = fits_report(args, c)
    if args.json:
        Path(args.json).write_text(json.dumps(r.to_json(), indent=1) + "\n")
    if args.html:
        Path(args.html).write_text(render_html(r))
    from rich.console import Console

    Console(highlight=False, width=None if sys.stdout.isatty() else 160).print(render_table(r))
    _print_conv_layouts(c, args.optimization)
    if r.fits is not None:
        print(f"fits {args.board}: {'yes' if r.fits['ok'] else 'NO'} ({r.fits['summary']})")
        if not r.fits["ok"]:
            return 1
    return 0


def _print_conv_layouts(c: Any, optimization: str) -> None:
    """--optimization's choice per CONV_2D layer and its flash cost."""
    from stm32ai.passes.lower.conv import conv_layout_choices

    rows = conv_layout_choices(c.graph)
    if not rows:
        return
    wide = [r for r in rows if r["layout"] == "int16"]
    extra = sum(int(r["weights_bytes"]) - int(r["int8_bytes"]) for r in wide)
    print(f"optimization {optimization}: {len(wide)} of {len(rows)} conv layers with int16 weights "
          f"(+{extra:,} B flash over int8)")
    for r in rows:
        print(f"  layer {r['op']}: {r['layout']} weights, {int(r['weights_bytes']):,} B")


def cmd_validate(args: argparse.Namespace) -> int:
    from stm32ai.validate.run import validate

    if args.mode == "target":
        from stm32ai.validate.target import validate_target

        return validate_target(_model_path(args.model), port=args.port, board=args.board, inputs=args.inputs,
                               n=args.n, seed=args.seed, as_json=args.json, timeout=args.timeout,
                               optimization=args.optimization)
    if args.port or args.board:
        raise Stm32aiError("--port/--board are for --mode target")
    return validate(_model_path(args.model), inputs=args.inputs, n=args.n, seed=args.seed,
                    as_json=args.json, optimization=args.optimization)


def cmd_run(args: argparse.Namespace) -> int:
    from stm32ai.project.run import run_project_cli

    return run_project_cli(Path(args.project), timeout_s=args.timeout)


def cmd_monitor(args: argparse.Namespace) -> int:
    from stm32ai.project.monitor import monitor

    return monitor(args.port, baud=args.baud, timeout_s=args.timeout)


def cmd_boards(args: argparse.Namespace) -> int:
    from stm32ai.boards import list_boards

    boards = list_boards()
    if args.json:
        print(json.dumps([b.summary() for b in boards], indent=1))
        return 0
    for b in boards:
        s = b.summary()
        print(f"{s['id']:<22} {s['mcu']:<14} {s['core']:<11} {s['sysclk_hz'] / 1e6:6.1f} MHz  {s['name']}")
    return 0


def cmd_supported_ops(args: argparse.Namespace) -> int:
    from stm32ai.passes.lower import registry

    reg = registry()
    if args.json:
        print(json.dumps({k: v.constraints for k, v in sorted(reg.items())}, indent=1))
        return 0
    for k, v in sorted(reg.items()):
        print(f"{k:<24} {v.constraints}")
    return 0


def _optimization_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--optimization", choices=("time", "balanced", "ram"), default="balanced",
                   help="speed/flash trade of the convolution weights: time = int16 weights (fastest, "
                        "twice the flash), ram = int8, balanced (default) = int16 where the board's "
                        "flash allows, layers with the most output pixels first")


def _model_options(p: argparse.ArgumentParser) -> None:
    _optimization_option(p)
    p.add_argument("--no-inputs-allocation", action="store_true",
                   help="inputs are buffers of the application, not part of the activation pool")
    p.add_argument("--no-outputs-allocation", action="store_true",
                   help="outputs are buffers of the application, not part of the activation pool")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="stm32ai", description="TensorFlow Lite models to STM32 firmware.")
    ap.add_argument("--version", action="version", version=f"stm32ai {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    g = sub.add_parser("generate", help="generate a firmware project (or just the C with --c-only)")
    g.add_argument("model")
    g.add_argument("--board", "-b")
    g.add_argument("-o", "--output")
    g.add_argument("--name", "-n", default="network", help="C symbol prefix (default: network)")
    g.add_argument("--c-only", action="store_true", help="emit only the model C files and runtime")
    g.add_argument("--force", action="store_true", help="replace a non-empty output directory")
    g.add_argument("--validation", action="store_true",
                   help="emulated boards: the demo serves the validation protocol after its self-test "
                        "(hardware boards always do)")
    g.add_argument("--activations-pool", help="comma-separated board memory regions, in order of preference")
    g.add_argument("--weights-pool", help="comma-separated board memory regions, in order of preference")
    _model_options(g)
    g.set_defaults(fn=cmd_generate)

    a = sub.add_parser("analyze", help="per-layer MACC, weights and activations; fits-on-board check")
    a.add_argument("model")
    a.add_argument("--board", "-b")
    a.add_argument("--json", metavar="F", help="also write the report as JSON to F")
    a.add_argument("--html", metavar="F", help="also write the report as HTML to F")
    a.add_argument("--activations-pool")
    a.add_argument("--weights-pool")
    _model_options(a)
    a.set_defaults(fn=cmd_analyze)

    v = sub.add_parser("validate", help="run the generated C against the references")
    v.add_argument("model")
    v.add_argument("--mode", choices=("host", "target"), default="host")
    _optimization_option(v)
    v.add_argument("--port", help="target mode: pyserial URL of the board's UART (/dev/ttyACM0, socket://HOST:PORT)")
    v.add_argument("--board", "-b", help="target mode without --port: build the validation firmware for this "
                                         "emulated board and run it in QEMU")
    v.add_argument("--timeout", type=float, default=30.0, help="target mode: seconds to wait for each reply")
    v.add_argument("--inputs", metavar="F.npz", help="inputs (arrays in input order; leading dim = samples)")
    v.add_argument("-n", type=int, default=3, help="number of random samples (default 3)")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--json", metavar="F", help="also write the metrics as JSON to F")
    v.set_defaults(fn=cmd_validate)

    r = sub.add_parser("run", help="build a project and run it on its emulated board")
    r.add_argument("project")
    r.add_argument("--timeout", type=float, default=300.0)
    r.set_defaults(fn=cmd_run)

    m = sub.add_parser("monitor", help="read and pretty-print the demo's UART output")
    m.add_argument("--port", required=True, help="pyserial URL, e.g. /dev/ttyACM0 or socket://127.0.0.1:4321")
    m.add_argument("--baud", type=int, default=115200)
    m.add_argument("--timeout", type=float, default=0.0, help="stop after this many seconds (0: never)")
    m.set_defaults(fn=cmd_monitor)

    b = sub.add_parser("boards", help="list the supported boards")
    b.add_argument("--json", action="store_true")
    b.set_defaults(fn=cmd_boards)

    s = sub.add_parser("supported-ops", help="list supported operators and their constraints")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_supported_ops)
    return ap


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    fn: Callable[[argparse.Namespace], int] = args.fn
    try:
        return fn(args)
    except Stm32aiError as e:
        print(f"stm32ai: error: {e}", file=sys.stderr)
        return e.exit_code
    except CheckFailed as e:
        print(f"stm32ai: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("stm32ai: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # an internal bug: one line, traceback only on request
        if os.environ.get("STM32AI_DEBUG"):
            raise
        print(f"stm32ai: internal error: {type(e).__name__}: {e} (set STM32AI_DEBUG=1 for details)",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
