"""Command-line interface (README.md, "Use"). Exit codes: 0 ok, 1 checks failed, 2 bad input."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stm32ai import __version__
from stm32ai.errors import CheckFailed, Stm32aiError
from stm32ai.sanitize import one_line


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


def _compile(args: argparse.Namespace, name: str, prune: bool | None = None, model: str | None = None,
             n_models: int = 1, auto_weights: bool = True):
    """n_models: models in the firmware; with separate pools each may stage weights in its share
    of the board's activation RAM (docs/flash_staging.md). auto_weights: one model's weights may
    be placed in RAM (pipeline.compile_for_board); off where the user's linker script places them
    (--into, --c-only)."""
    from stm32ai.emitter import check_name
    from stm32ai.pipeline import compile_for_board
    from stm32ai.project.build import pool_list

    check_name(name)
    board = getattr(args, "board", None)
    shared = getattr(args, "shared_activations", False)
    c = compile_for_board(_model_path(model or args.model), name, board,
                          weights_pool=pool_list(getattr(args, "weights_pool", None)),
                          activations_pool=pool_list(getattr(args, "activations_pool", None)),
                          ram_room_div=n_models if n_models > 1 and not shared else 1,
                          auto_weights=auto_weights and n_models == 1,
                          inputs_in_pool=not getattr(args, "no_inputs_allocation", False),
                          outputs_in_pool=not getattr(args, "no_outputs_allocation", False),
                          prune=not getattr(args, "no_prune", False) if prune is None else prune,
                          optimization=getattr(args, "optimization", "balanced"),
                          winograd=getattr(args, "winograd", None), tuning=_tuning_choices(args),
                          stripes=False if getattr(args, "no_stripes", False) else None,
                          stripes_max_cost=_stripes_max_cost(args),
                          input_rows=getattr(args, "input_rows", False))
    if c.weights_pool and hasattr(args, "weights_pool"):
        # the automatic choice is the --weights-pool every later step of this command uses
        # (placement, project, a recompile without pruning)
        args.weights_pool = ",".join(c.weights_pool)
    return c


def _stripes_max_cost(args: argparse.Namespace) -> float | None:
    """--stripes-max-cost PCT as a fraction (None: no bound)."""
    pct = getattr(args, "stripes_max_cost", None)
    if pct is None:
        return None
    if not 0 <= pct <= 1000:
        raise Stm32aiError(f"--stripes-max-cost {pct}: give a percentage between 0 and 1000")
    return pct / 100


def _tuning_choices(args: argparse.Namespace) -> dict[str, str] | None:
    """--tuning FILE (or --autotune: the tuner runs first): the table's per-layer variants."""
    table = _tuning_table(args)
    return None if table is None else table.choices()


def _tuning_table(args: argparse.Namespace) -> Any:
    if getattr(args, "_tuning_table", None) is not None:
        return args._tuning_table
    autotune, path = getattr(args, "autotune", False), getattr(args, "tuning", None)
    if not autotune and not path:
        return None
    board = getattr(args, "board", None)
    if not board:
        raise Stm32aiError(f"{'--autotune' if autotune else '--tuning'} needs --board B (tables are per board)")
    if autotune and path:
        raise Stm32aiError("--autotune and --tuning: give one (--autotune makes the table)")
    if autotune:
        if len(getattr(args, "models", [])) != 1:
            raise Stm32aiError("--autotune takes one model")
        from stm32ai.tune import tune

        table = tune(_model_path(args.models[0]), board, optimization=args.optimization,
                     progress=lambda s: print(s, file=sys.stderr)).table
    else:
        from stm32ai.tuning import load_table

        table = load_table(path, board)
    args._tuning_table = table
    return table


def cmd_tune(args: argparse.Namespace) -> int:
    """`stm32ai tune MODEL --board B [-o table.json]`: the tuner stage (stm32ai/tune.py)."""
    from stm32ai.outputs import check_output_file
    from stm32ai.tune import render_choices, tune

    path = _model_path(args.model)
    out = Path(args.output or f"{path.stem}_{args.board}.tuning.json")
    check_output_file(str(out), "-o")
    res = tune(path, args.board, optimization=args.optimization,
               cache=Path(args.cache_dir) / "tune" if args.cache_dir else None,
               progress=lambda s: print(s, file=sys.stderr, flush=True))
    res.table.dump(out)
    for cand in res.candidates:
        what = cand.skipped or f"{cand.cycles:,} estimated cycles, {cand.instructions:,} instructions in all"
        print(f"candidate {cand.variant} ({cand.layers} layers): {what}")
    print("\n".join(render_choices(res.table)))
    print(f"tuning table: {out}" + (" (all measurements cached)" if res.cached else ""))
    return 0


def model_names(names: str | None, models: list[str]) -> list[str]:
    """The C prefix of each model: --name's comma-separated list, or (several models) each file
    name made a C identifier (sanitize.c_identifier), `_2`, `_3`... added to repeats; one model
    without --name is `network`. Each is checked as --name is; a repeat in --name is refused."""
    from stm32ai.emitter import NAME_MAX, check_name
    from stm32ai.sanitize import c_identifier, quote

    if names is not None:
        out = names.split(",")
        if len(out) != len(models):
            raise Stm32aiError(f"--name gives {len(out)} name(s) for {len(models)} model(s): give one per "
                               "model, comma-separated, in the models' order")
        dup = next((n for i, n in enumerate(out) if n in out[:i]), None)
        if dup is not None:
            raise Stm32aiError(f"--name {quote(dup)} is given twice: each model needs its own prefix")
    elif len(models) == 1:
        out = ["network"]
    else:
        out = []
        for m in models:
            base = c_identifier(Path(m).stem, NAME_MAX - 3)
            try:
                check_name(base)
            except Stm32aiError:  # reserved, a keyword or a clashing file name: prefix it
                base = c_identifier("m_" + base, NAME_MAX - 3)
            n, k = base, 2
            while n in out:
                n, k = f"{base}_{k}", k + 1
            out.append(n)
    for n in out:
        check_name(n)
    return out


def _pools(args: argparse.Namespace) -> Any:
    from stm32ai.project.build import pool_list
    from stm32ai.project.spec import Pools

    return Pools(pool_list(args.activations_pool), pool_list(args.weights_pool),
                 bool(getattr(args, "shared_activations", False)))


def cmd_generate(args: argparse.Namespace) -> int:
    from stm32ai.graphjson import write_artifact
    from stm32ai.outputs import check_output_dir, mark_generated, publish_dir, staging_dir

    if args.into is not None:
        return _generate_into(args)
    if args.dry_run and not args.update:
        raise Stm32aiError("--dry-run goes with --into or --update (it shows what they would change)")
    if args.update and (args.c_only or args.force or not args.output):
        raise Stm32aiError("--update regenerates an existing firmware project: give it with -o DIR (not with "
                           "--c-only or --force)")
    if args.named_sections and not args.c_only:
        raise Stm32aiError("--named-sections goes with --into or --c-only (a firmware project's own linker script "
                           "always places .nn_weights / .nn_activations)")
    norm = _normalization(args)
    if norm is not None and len(args.models) != 1:
        raise Stm32aiError("--input-normalization goes with one model")
    paths = [_model_path(m) for m in args.models]
    names = model_names(args.name, args.models)
    base = names[0] if len(names) == 1 else "_".join(names)
    out = Path(args.output or (f"{base}_c" if args.c_only else f"{base}_{args.board or 'project'}"))
    if args.update:
        from stm32ai.outputs import is_generated

        if not (out.is_dir() and is_generated(out)) or out.is_symlink():
            raise Stm32aiError(f"--update: '{out}' is not a project stm32ai generated")
        check_output_dir(out, True, inputs=paths)
    else:
        check_output_dir(out, args.force, inputs=paths)
        if args.force and not args.c_only:
            _refuse_losing_edits(out)
    if not args.c_only and not args.board:
        raise Stm32aiError("--board is required to generate a firmware project (or use --c-only)")
    with _progress() as prog:
        task = prog.add_task("compiling model" + ("s" if len(paths) > 1 else ""), total=None)
        cs = [_compile(args, n, model=str(p), n_models=len(paths), auto_weights=not args.c_only)
              for n, p in zip(names, paths, strict=True)]
        with staging_dir(out) as tmp:
            stage = tmp / "out"
            if args.c_only and len(cs) > 1:
                prog.update(task, description="emitting C")
                _emit_several(args, names, cs, stage)
            elif args.c_only:
                from stm32ai.emitter import emit_c

                prog.update(task, description="emitting C")
                c = cs[0]
                if args.board:  # the board's regions: a pool no single region holds is split
                    from stm32ai.boards import load_board
                    from stm32ai.project.build import place_model, pool_list

                    place_model(load_board(args.board), c, pool_list(args.activations_pool),
                                pool_list(args.weights_pool))
                write_artifact(stage, c.doc, c.params)
                emit_c(c.doc, c.params, names[0], stage, input_normalization=norm, sections=_sections(args))
            else:
                from stm32ai.project.regen import record_files

                prog.update(task, description="generating project")
                _generate_project(args, paths, names, cs, stage)
                record_files(stage)
            mark_generated(stage)
            if args.update:
                prog.stop()
                return _update_project(stage, out, args.dry_run)
            publish_dir(stage, out)
    print(_generated_line(out, names, cs, getattr(args, "shared_activations", False)))
    return 0


def _refuse_losing_edits(out: Path) -> None:
    """--force replaces a project: not when the user edited files stm32ai recorded (regen.FILES)."""
    from stm32ai.project.regen import edited_files

    edited = edited_files(out)  # [] for projects of older versions (no record): replaced as before
    if edited:
        raise Stm32aiError(f"'{out}' has files you edited ({', '.join(edited[:5])}"
                           f"{', ...' if len(edited) > 5 else ''}): --force would discard them; use --update "
                           "(keeps your edits) or move them away")


def _update_project(stage: Path, out: Path, dry_run: bool) -> int:
    from stm32ai.project.regen import apply_update, has_record, plan_update

    if not has_record(out):
        print(f"  '{out}' has no record of the files stm32ai generated (an older version's project): every file "
              "that differs is kept as yours, the new version written beside it")
    actions = plan_update(stage, out)
    shown = [a for a in actions if a.what != "unchanged"]
    for a in shown:
        print(f"  {a.line()}")
    conflicts = sum(a.what == "conflict" for a in actions)
    if dry_run:
        print(f"dry run: nothing written ({len(shown)} change(s), {conflicts} conflict(s))")
        return 0
    apply_update(stage, out, actions)
    print(f"updated {out}: {sum(a.what in ('create', 'update', 'remove') for a in actions)} file(s) changed, "
          f"{sum(a.what == 'kept' for a in actions)} kept with your edits, {conflicts} conflict(s)"
          + (" (merge each <file>.stm32ai-new into <file>, then delete it)" if conflicts else ""))
    return 0


def _sections(args: argparse.Namespace) -> tuple[str, str]:
    """--c-only and --into: the C goes into the user's project, whose linker script is a stock one
    unless --named-sections says it places .nn_weights / .nn_activations itself (docs/into.md)."""
    from stm32ai.emitter import NAMED_SECTIONS, STOCK_SECTIONS

    return NAMED_SECTIONS if args.named_sections else STOCK_SECTIONS


def _normalization(args: argparse.Namespace) -> Any:
    from stm32ai.emitter.io_helpers import parse_normalization

    return parse_normalization(args.input_normalization) if args.input_normalization else None


def _generate_into(args: argparse.Namespace) -> int:
    """`generate MODEL... --into PROJECT`: the model(s) as one component of the user's project
    (stm32ai.project.into, docs/into.md)."""
    import hashlib

    from stm32ai.emitter import emit_c
    from stm32ai.graphjson import activation_pools as pools_of
    from stm32ai.project import into
    from stm32ai.project.build import activations_total

    for opt, val in (("--c-only", args.c_only), ("-o", args.output), ("--force", args.force),
                     ("--validation", args.validation), ("--update", args.update)):
        if val:
            raise Stm32aiError(f"{opt} does not go with --into (the component goes to PROJECT/{into.COMPONENT}/)")
    paths = [_model_path(m) for m in args.models]
    names = model_names(args.name, args.models)
    norm = _normalization(args)
    if norm is not None and len(paths) > 1:
        raise Stm32aiError("--input-normalization goes with one model")
    lib = names[0] if len(names) == 1 else "models"   # the library: stm32ai::<name>, stm32ai::models
    project = into.detect_project(Path(args.into))
    if args.board:
        from stm32ai.boards import load_board
        from stm32ai.project.build import place_models

        board = load_board(args.board)
        target = f"board {args.board} ({board.mcu})"
    else:
        mcu = into.detect_mcu(project.root)
        target = mcu.describe()
    with _progress() as prog:
        prog.add_task("compiling model" + ("s" if len(paths) > 1 else ""), total=None)
        cs = [_compile(args, n, model=str(p), auto_weights=False) for n, p in zip(names, paths, strict=True)]
    rs = [_report(c) for c in cs]
    shared = bool(args.shared_activations) and len(cs) > 1
    act = activations_total([r.activations_bytes for r in rs], shared)
    wts = sum(r.weights_bytes for r in rs)
    if args.board:
        place_models(board, cs, _pools(args))
        if any(len(pools_of(c.doc)) > 1 for c in cs):
            raise Stm32aiError(f"the activations fit no single memory region of {args.board}: --into places "
                               "one pool per model; reduce the model or choose a larger MCU")
    else:
        _fits_mcu(mcu, wts, act)
    sections = _sections(args)
    inputs = {"models": [{"name": n, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                         for n, p in zip(names, paths, strict=True)],
              "input_normalization": norm, "shared_activations": shared,
              "tool_version": __version__, "sections": list(sections), "target": target,
              "options": {k: getattr(args, k, None) for k in ("optimization", "no_prune", "no_inputs_allocation",
                                                              "no_outputs_allocation", "activations_pool",
                                                              "weights_pool")}}
    plan = into.plan_into(project, lib, inputs)
    print(f"project: {project.root} ({_KIND_NAMES[project.kind]}, {project.build_file.name}); target: {target}")
    for line in plan.describe():
        print(f"  {line}")
    if args.dry_run:
        print("dry run: nothing written")
        return 0
    if not plan.changed:
        print("up to date: nothing changed")
        return 0

    def emit(stage: Path) -> None:
        for n, c in zip(names, cs, strict=True):
            emit_c(c.doc, c.params, n, stage, builtin_pool=not shared, sections=sections, input_normalization=norm,
                   with_runtime=n == names[0])
        if len(cs) > 1:  # the descriptor table ai_models.c/.h (and the shared pool), as --c-only writes it
            from stm32ai.project.generator import write_model_table

            write_model_table(stage, names, shared, act, __version__, sections[1])
        into.component_files(stage, lib, inputs)

    into.apply_plan(plan, emit)
    for n, r in zip(names, rs, strict=True):
        print(f"added model '{n}' to {project.root}: {len(r.layers)} layers, weights {r.weights_bytes:,} B "
              f"(section {sections[0]}), activations {r.activations_bytes:,} B (section {sections[1]})")
    if len(cs) > 1:
        print(f"library stm32ai::{lib}; activation RAM {act:,} B ({'one shared pool' if shared else 'one pool each'})")
    return 0


_KIND_NAMES = {"cmake": "CMake", "cubeide": "STM32CubeIDE", "make": "Makefile"}


def _report(c: Any) -> Any:
    from stm32ai.report import build_report

    return build_report(c)


def _fits_mcu(mcu: Any, weights: int, activations: int) -> None:
    """--into without --board: the budget of the project's linker script (generator's reserves)."""
    from stm32ai.placement import CODE_RESERVE, DATA_RESERVE

    if mcu.flash_bytes is not None and weights > mcu.flash_bytes - CODE_RESERVE:
        raise Stm32aiError(f"weights ({weights:,} B) do not fit the flash of {mcu.describe()} with "
                           f"{CODE_RESERVE // 1024} KiB kept for code: reduce the model or choose a larger MCU")
    if mcu.ram_bytes is not None and activations > mcu.ram_bytes - DATA_RESERVE:
        raise Stm32aiError(f"activations ({activations:,} B) do not fit the RAM of {mcu.describe()} with "
                           f"{DATA_RESERVE // 1024} KiB kept for data: reduce the model or choose a larger MCU")


def _emit_several(args: argparse.Namespace, names: list[str], cs: list[Any], stage: Path) -> None:
    """`--c-only` with several models: each model's C files (without built-in pools when shared),
    the runtime once, `ai_models.c/.h` (the descriptor table) and `artifact/<name>/`."""
    from stm32ai import __version__
    from stm32ai.emitter import emit_c
    from stm32ai.graphjson import write_artifact
    from stm32ai.project.build import activations_total, place_models
    from stm32ai.project.generator import write_model_table
    from stm32ai.report import build_report

    pools = _pools(args)
    if args.board:  # the fits check of the whole set (max or sum)
        from stm32ai.boards import load_board

        place_models(load_board(args.board), cs, pools)
    sections = _sections(args)
    for n, c in zip(names, cs, strict=True):
        emit_c(c.doc, c.params, n, stage, builtin_pool=not pools.shared, sections=sections)
        write_artifact(stage / "artifact" / n, c.doc, c.params)
    act = activations_total([build_report(c).activations_bytes for c in cs], pools.shared)
    write_model_table(stage, names, pools.shared, act, __version__, sections[1])


def _generate_project(args: argparse.Namespace, paths: list[Path], names: list[str], cs: list[Any],
                      stage: Path) -> None:
    """The CLI's part of a firmware project: fit check, test vectors from the references
    (stm32ai.validate), then stm32ai.project with typed arguments."""
    from stm32ai.boards import load_board
    from stm32ai.project.build import generate_firmware_project, place_models
    from stm32ai.project.spec import ProjectModel
    from stm32ai.validate.vectors import test_vector

    board = load_board(args.board)
    pools = _pools(args)
    place_models(board, cs, pools)  # refuse early, before running references (may split one model)
    models = [ProjectModel(n, c, test_vector(p, c, expected=not args.no_test_vector), p.name, _normalization(args))
              for n, p, c in zip(names, paths, cs, strict=True)]
    generate_firmware_project(stage, board, models, pools, validation=args.validation, profile=args.profile)


def _generated_line(out: Path, names: list[str], cs: list[Any], shared: bool) -> str:
    from stm32ai.project.build import activations_total
    from stm32ai.report import build_report

    parts = []
    for n, c in zip(names, cs, strict=True):
        r = build_report(c)
        pruned = ""
        if c.pruned is not None and c.pruned.layers:
            pruned = (f" ({c.pruned.removed_channels:,} dead channels removed, "
                      f"-{c.pruned.macc_saved:,} MACC; --no-prune keeps them)")
        parts.append((n, f"{len(r.layers)} layers, MACC {r.macc:,}{pruned}, weights {r.weights_bytes:,} B, "
                      f"activations {r.activations_bytes:,} B", r.activations_bytes))
    if len(parts) == 1:
        return f"generated {out}: {parts[0][1]}"
    total = activations_total([a for _, _, a in parts], shared)
    how = "one shared pool, the largest" if shared else "separate pools, the sum"
    return (f"generated {out}: {len(parts)} models; " + "; ".join(f"{n}: {t}" for n, t, _ in parts)
            + f"; activation RAM {total:,} B ({how})")


def cmd_check_map(args: argparse.Namespace) -> int:
    from stm32ai.project.mapcheck import check_placement, read_map

    map_path = Path(args.map)
    if not map_path.is_file():
        raise Stm32aiError(f"map file '{args.map}' not found (link with -Wl,-Map=FILE)")
    elf = Path(args.elf) if args.elf else map_path.with_suffix(".elf")
    if args.elf and not elf.is_file():
        raise Stm32aiError(f"ELF '{args.elf}' not found")
    found = read_map(map_path, elf if elf.is_file() else None)
    for p in found:
        print(p.line())
    problems = check_placement(found, args.weights_in_ram)
    if problems:
        raise CheckFailed("placement check failed: " + "; ".join(problems))
    print("placement: ok")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from stm32ai.outputs import check_output_file, write_text_atomic
    from stm32ai.report import add_pruning, build_report, render_html, render_pruning, render_table

    for opt, path in (("--json", args.json), ("--html", args.html)):
        if path:
            check_output_file(path, opt)
    if len(args.models) > 1:
        if getattr(args, "estimate", False):
            raise Stm32aiError("--estimate takes one model")
        return _analyze_several(args)
    args.model = args.models[0]
    c = _compile(args, "network")
    fits = None
    if args.board:  # first: a model no single region holds is split across regions here
        from stm32ai.boards import load_board
        from stm32ai.project.build import fits_report

        fits = fits_report(load_board(args.board), [c], _pools(args))
    r = build_report(c)
    r.fits = fits
    if fits is not None and fits["ok"] and r.memory and len(fits.get("activation_pools", [])) == 1:
        r.memory["pools"][0]["region"] = fits["activation_pools"][0]["region"]
    if c.pruned is not None and c.pruned.layers:
        add_pruning(r, c, _compile(args, "network", prune=False))
    est = None
    if getattr(args, "estimate", False):
        if not args.board:
            raise Stm32aiError("--estimate needs --board B (the board whose core and memories are modelled)")
        if fits is not None and not fits["ok"]:
            raise Stm32aiError(f"does not fit {args.board}: {fits['summary']}")
        est = _estimate(args, c, r.weights_bytes)
    stripes = _stripes_report(args, c)
    if args.json:
        doc = r.to_json()
        if stripes is not None:
            doc["stripes"] = stripes
        if est is not None:
            doc["estimate"] = est.to_json()
        write_text_atomic(args.json, json.dumps(doc, indent=1) + "\n", "--json")
    if args.html:
        write_text_atomic(args.html, render_html(r), "--html")
    from rich.console import Console

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    console.print(render_table(r))
    pruning = render_pruning(r)
    if pruning is not None:
        console.print(pruning)
    if stripes is not None:
        console.print(f"stripes: pool {stripes['pool']:,} B with, {stripes['pool_without']:,} B without "
                      "(--no-stripes)")
        for k, st in enumerate(stripes["stripes"]):
            rings = ", ".join(f"{x['rows']}x{x['row_bytes']}" for x in st["rings"])
            console.print(f"  stripe {k}: {len(st['members'])} ops, band {st['band']} row(s), {st['calls']} calls, "
                          f"scratch {st['scratch']:,} B, step table {st['table_bytes']:,} B flash; "
                          f"rings (rows x bytes) {rings}")
            console.print(f"    members: {' '.join(st['members'])}")
        for line in _render_stripe_options(stripes):
            console.print(line)
    from stm32ai.project.build import pool_list

    _print_conv_layouts(c, args.optimization, pool_list(getattr(args, "weights_pool", None)))
    _print_winograd(c)
    if getattr(args, "tuning", None):
        from stm32ai.tune import render_choices

        print("\n".join(render_choices(_tuning_table(args), c.graph)))
    from stm32ai.report import render_flash
    from stm32ai.report.memory_map import render_text

    for line in render_flash(r):
        print(line)

    if r.memory:
        print("\n".join(render_text(r.memory)))
    if r.fits is not None:
        if not r.fits["ok"]:  # the model does not fit the board: bad input, one line naming the region
            raise Stm32aiError(f"does not fit {args.board}: {r.fits['summary']}")
        print(f"fits {args.board}: yes ({r.fits['summary']})")
    if est is not None:
        from stm32ai.estimate.estimate import render_text as render_estimate

        print()
        print("\n".join(render_estimate(est)))
    return 0


def _estimate(args: argparse.Namespace, c: Any, weights_bytes: int) -> Any:
    """`analyze --estimate`: the firmware project generated into a temp dir with the usual project
    functions (test vector inputs, no reference run), built, and its measured inference traced
    through the board's core and memory-system model (stm32ai.estimate, docs/estimate.md)."""
    import contextlib
    import io
    import tempfile

    from stm32ai.boards import load_board
    from stm32ai.estimate.estimate import check_estimable, estimate_elf
    from stm32ai.project.build import generate_firmware_project
    from stm32ai.project.run import build_project, check_toolchain
    from stm32ai.project.spec import ProjectModel
    from stm32ai.validate.vectors import test_vector

    board = load_board(args.board)
    check_estimable(board)          # a core or memory system without a model: say so before building
    check_toolchain()
    path = _model_path(args.model)
    with tempfile.TemporaryDirectory(prefix="stm32ai-estimate-") as tmp, _progress() as prog:
        task = prog.add_task("generating the firmware project", total=None)
        proj = Path(tmp) / "project"
        model = ProjectModel("network", c, test_vector(path, c, expected=False), path.name)
        with contextlib.redirect_stderr(io.StringIO()):     # generate's "test vector: ..." note
            generate_firmware_project(proj, board, [model], _pools(args))
        prog.update(task, description="building with arm-none-eabi-gcc")
        elf = build_project(proj)

        def tick(n: int) -> None:
            prog.update(task, description=f"estimating: {n / 1e6:.1f} M instructions traced")

        prog.update(task, description="estimating: running to the measured inference")
        est = estimate_elf(elf, board, proj / "Model" / "network.c", progress=tick)
    est.weights_bytes = weights_bytes
    return est


def _analyze_several(args: argparse.Namespace) -> int:
    """`analyze a.tflite b.tflite [--board B] [--shared-activations]`: each model's table, then the
    activation RAM of the project (the largest pool when shared, else the sum) and the fits check."""
    from rich.console import Console

    from stm32ai.outputs import write_text_atomic
    from stm32ai.project.build import activations_total
    from stm32ai.report import build_report, render_table

    if args.html:
        raise Stm32aiError("--html takes one model (analyze each model with its own --html)")
    names = model_names(None, args.models)
    cs = [_compile(args, n, model=m, n_models=len(args.models)) for n, m in zip(names, args.models, strict=True)]
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    reports = [build_report(c) for c in cs]
    for n, r in zip(names, reports, strict=True):
        console.print(f"model {n}:")
        console.print(render_table(r))
    shared = bool(args.shared_activations)
    total = activations_total([r.activations_bytes for r in reports], shared)
    weights = sum(r.weights_bytes for r in reports)
    print(f"activations: {total:,} B for {len(cs)} models ("
          + ("one shared pool: the largest, " if shared else "separate pools: the sum of ")
          + ", ".join(f"{n} {r.activations_bytes:,} B" for n, r in zip(names, reports, strict=True))
          + f"); weights: {weights:,} B")
    fits = None
    if args.board:
        from stm32ai.boards import load_board
        from stm32ai.project.build import fits_report

        fits = fits_report(load_board(args.board), cs, _pools(args))
    if args.json:
        doc = {"models": [{"name": n, **r.to_json()} for n, r in zip(names, reports, strict=True)],
               "shared_activations": shared, "activations_bytes": total, "weights_bytes": weights, "fits": fits}
        write_text_atomic(args.json, json.dumps(doc, indent=1) + "\n", "--json")
    if fits is not None:
        if not fits["ok"]:
            raise Stm32aiError(f"does not fit {args.board}: {fits['summary']}")
        print(f"fits {args.board}: yes ({fits['summary']})")
    return 0


def _print_conv_layouts(c: Any, optimization: str, weights_pool: list[str] | None) -> None:
    """--optimization's choice per CONV_2D layer: the layout stored with the weights (where they
    live: flash unless a --weights-pool, given or chosen by balanced, puts them in a RAM region),
    what the inner loop reads (a staged RAM copy, docs/flash_staging.md), the extra bytes of int16."""
    from stm32ai.passes.lower.conv import conv_layout_choices

    rows = conv_layout_choices(c.graph)
    if not rows:
        return
    pool = c.weights_pool or weights_pool
    where = f"in {pool[0]}" if pool and pool[0] != "flash" else "in flash"
    if pool and "@" in pool[0]:   # boot copy RUN@LOAD (placement.py): RAM at run time
        run, _, load = pool[0].partition("@")
        where = f"in {'RAM' if run == 'ram' else run} (copied from {load} at boot)"
    wide = [r for r in rows if r["layout"] == "int16"]
    extra = sum(int(r["weights_bytes"]) - int(r["int8_bytes"]) for r in wide)
    staged = [r for r in rows if r["staged"]]
    staged16 = [r for r in staged if r["inner_loop"] == "int16"]
    line = (f"optimization {optimization}: {len(wide)} of {len(rows)} conv layers with int16 weights {where} "
            f"(+{extra:,} B over int8)")
    if staged:
        line += f"; {len(staged)} staged in RAM, {len(staged16)} of them as int16 copies"
    print(line)
    for r in rows:
        tail = f", staged: {r['inner_loop']} copy in RAM" if r["staged"] else ""
        print(f"  layer {r['op']}: {r['layout']} weights {where}, {int(r['weights_bytes']):,} B{tail}")


def _print_winograd(c: Any) -> None:
    """The layers on a Winograd kernel (the default rule, --winograd or a "wino" variant) and their flash cost
    over int8 weights."""
    from stm32ai.passes.lower.conv_wino import winograd_choices

    rows = winograd_choices(c.graph)
    if not rows:
        return
    w, i8 = sum(r["weights_bytes"] for r in rows), sum(r["int8_bytes"] for r in rows)
    tiles = ", ".join(f"{sum(r['tile'] == t for r in rows)} {t}" for t in dict.fromkeys(r["tile"] for r in rows))
    print(f"winograd: {len(rows)} conv layers ({tiles}), {w:,} B of transformed int16 weights in flash "
          f"(+{w - i8:,} B, {w / i8:.2f}x their int8 filters)")
    for r in rows:
        print(f"  layer {r['op']} {r['tile']}: {r['weights_bytes']:,} B ({r['weights_bytes'] / r['int8_bytes']:.2f}x "
              f"{r['int8_bytes']:,} B int8)")


def _render_stripe_options(rep: dict[str, Any]) -> list[str]:
    """The band alternatives: pool and modelled cost per band height (one line each)."""
    opts = rep.get("options")
    if not opts:
        return []
    bound = rep.get("max_cost")
    rule = "smallest pool" if bound is None else f"smallest pool within +{bound:.1%} modelled cycles"
    lines = [f"  band heights weighed ({rule}; modelled cycles: passes/staging.py graph_cycles, "
             f"{rep['cost_model']}; check with --estimate):"]
    for o in opts:
        bands = ", ".join("layer by layer" if b is None else f"band {b}" for b in o["bands"])
        lines.append(f"    {'*' if o['chosen'] else ' '} {bands}: pool {o['pool']:,} B, "
                     f"{o['modelled_cycles']:,} modelled cycles ({o['modelled_cost']:+.1%})")
    return lines


def _stripes_report(args: argparse.Namespace, c: Any) -> dict[str, Any] | None:
    """The stripes of `c` and the pool without them (a second compile), None when it has none."""
    from stm32ai.passes.stripes import summary

    sts = summary(c.graph)
    opts = c.stripe_options
    if not sts and not opts:
        return None
    if opts:
        without = opts[0].pool
    else:
        args.no_stripes, rows = True, getattr(args, "input_rows", False)
        args.input_rows = False
        try:
            without = _compile(args, "network").plan.pool_size
        finally:
            args.no_stripes, args.input_rows = False, rows
    out: dict[str, Any] = {"pool": c.plan.pool_size, "pool_without": without, "stripes": sts}
    if opts:  # the alternatives the band rule weighed (passes/stripe_bands.py)
        base = opts[0].cycles
        out["options"] = [{"bands": list(o.bands), "pool": o.pool, "modelled_cycles": round(o.cycles),
                           "modelled_cost": round(o.cost(base), 4), "chosen": o.chosen} for o in opts]
        out["max_cost"] = _stripes_max_cost(args)
        out["cost_model"] = c.flash.board + " flash model" if c.flash else "zero-wait weights"
    return out


def cmd_validate(args: argparse.Namespace) -> int:
    from stm32ai.outputs import check_output_file
    from stm32ai.validate.run import MAX_SAMPLES, collect, report

    if not 1 <= args.n <= MAX_SAMPLES:
        raise Stm32aiError(f"-n {args.n}: give 1 to {MAX_SAMPLES:,} samples")
    if args.json:
        check_output_file(args.json, "--json")

    if args.mode == "target":
        from stm32ai.validate.target import validate_target

        if args.winograd is not None or args.tuning:
            raise Stm32aiError("--winograd/--no-winograd/--tuning are for --mode host "
                               "(on a board: generate with them, then run)")
        if args.input_rows:  # the validation firmware writes whole inputs (docs/project.md "Not done yet")
            raise Stm32aiError("--input-rows is for --mode host (on a board: generate with it, then `stm32ai run`)")

        return validate_target(_model_path(args.model), port=args.port, board=args.board, inputs=args.inputs,
                               n=args.n, seed=args.seed, as_json=args.json, timeout=args.timeout,
                               profile=args.profile, prune=not args.no_prune, optimization=args.optimization,
                               activations_pool=args.activations_pool, model_sel=args.target_model)
    if args.port or args.profile or args.activations_pool or args.target_model is not None:
        raise Stm32aiError("--port/--profile/--activations-pool/--model are for --mode target")
    with _progress() as prog:  # -n 100000 takes minutes: show what runs
        task = prog.add_task("validating", total=None)
        # --board: the C generated for that board (its weight layouts and staging), run on the host
        res = collect(_model_path(args.model), inputs=args.inputs, n=args.n, seed=args.seed,
                      step=lambda d: prog.update(task, description=d), prune=not args.no_prune,
                      optimization=args.optimization, board=args.board, winograd=args.winograd,
                      tuning=_tuning_choices(args), stripes=False if args.no_stripes else None,
                      stripes_max_cost=_stripes_max_cost(args), input_rows=args.input_rows)
    return report(res, args.json)


def cmd_run(args: argparse.Namespace) -> int:
    from stm32ai.project.run import run_project_cli

    return run_project_cli(Path(args.project), timeout_s=args.timeout)


def cmd_flash(args: argparse.Namespace) -> int:
    from stm32ai.project.flash import flash_project

    return flash_project(Path(args.project), programmer=args.programmer, dry_run=args.dry_run,
                         monitor=args.monitor, port=args.port)


def cmd_monitor(args: argparse.Namespace) -> int:
    from stm32ai.project.monitor import monitor

    return monitor(args.port, baud=args.baud, timeout_s=args.timeout)


def cmd_boards(args: argparse.Namespace) -> int:
    from stm32ai.boards import describe_size, list_boards

    boards = list_boards()
    if args.json:
        print(json.dumps([b.summary() for b in boards], indent=1))
        return 0
    for b in boards:
        s = b.summary()
        # flash: the program region; RAM: the on-chip writable regions (external memories that
        # need bring-up, such as SDRAM, are not counted)
        flash = describe_size(b.region(b.text_region).length)
        ram = describe_size(sum(r.length for r in b.memory if r.writable and not r.needs_init
                                and r.name != b.text_region))
        print(f"{s['id']:<22} {s['mcu']:<14} {s['core']:<13} {s['sysclk_hz'] / 1e6:6.1f} MHz  "
              f"flash {flash:>8}  RAM {ram:>8}  {s['name']}")
    return 0


def cmd_supported_ops(args: argparse.Namespace) -> int:
    from stm32ai.passes.supported import supported_ops

    ops = supported_ops()
    if args.json:
        print(json.dumps(ops, indent=1))
        return 0
    for k, v in ops.items():
        print(f"{k:<24} {v}")
    return 0


def _non_negative_int(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{v}' is not an integer") from None
    if not 0 <= n < 1 << 32:
        raise argparse.ArgumentTypeError(f"{n} is outside 0 to 4294967295")
    return n


def _seconds(zero_ok: bool) -> Callable[[str], float]:
    def parse(v: str) -> float:
        try:
            x = float(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{v}' is not a number of seconds") from None
        if math.isnan(x) or x < 0 or (x == 0 and not zero_ok):
            raise argparse.ArgumentTypeError(f"{v} seconds: give a number > 0"
                                             + (" (or 0 for no limit)" if zero_ok else ""))
        return x

    return parse


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr, exit 2 (README.md, "Use"), with the command to get help."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n")


def _prune_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-prune", action="store_true",
                   help="keep output channels with all-zero weights and the channels they make "
                        "unneeded (dead-channel elimination is exact and on by default)")


def version_text() -> str:
    """`stm32ai --version`: the tool, then each reference it found (docs/references.md)."""
    from stm32ai.validate.reference import REFERENCES, reference_versions

    lines = [f"stm32ai {__version__}"]
    for kind, ver in reference_versions().items():
        ref = REFERENCES[kind]
        state = ver if ver else f"not installed ({ref.install})"
        lines.append(f"{ref.dist}: {state}  [{ref.label}, {ref.role}]")
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    """Like argparse's "version" action, but looks the references up only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the version of stm32ai and of the references it found, then exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version_text())
        parser.exit()


def _optimization_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--optimization", choices=("time", "balanced", "ram"), default="balanced",
                   help="speed/flash trade of the convolution weights: time = int16 weights (fastest, "
                        "twice the flash), ram = int8 and row-streamed stripes where they shrink the "
                        "pool (docs/stripes.md), balanced (default) = int16 where the board's "
                        "flash allows, layers with the most output pixels first")
    p.add_argument("--no-stripes", action="store_true",
                   help="no row-streamed stripes, whatever --optimization (docs/stripes.md)")
    p.add_argument("--stripes-max-cost", type=float, default=None, metavar="PCT",
                   help="with stripes: the smallest pool whose modelled cycles stay within PCT %% of the "
                        "stripe-less firmware's (default: no bound, the smallest pool; analyze lists the "
                        "alternatives; docs/stripes.md)")
    p.add_argument("--input-rows", action="store_true",
                   help="the inputs a stripe reads arrive in rows from a row source the application "
                        "sets (ai_set_row_source: a camera's lines), never whole in the pool; implies "
                        "stripes (docs/stripes.md, docs/project.md)")
    wg = p.add_mutually_exclusive_group()
    wg.add_argument("--winograd", action="store_const", const=True, default=None,
                    help="every int8 3x3 stride-1 convolution by exact integer Winograd F(2x2,3x3) where its "
                         "accumulator bound is proved (fewer multiplies, 3.6x the layer's weight flash); "
                         "default: per layer by the board core's rule (docs/kernels_conv_wino.md)")
    wg.add_argument("--no-winograd", dest="winograd", action="store_const", const=False,
                    help="no Winograd layer (the direct kernels everywhere)")
    p.add_argument("--tuning", metavar="FILE",
                   help="with --board: per-layer kernel variants from a table `stm32ai tune` wrote for that board "
                        "(docs/tuning.md); layers not in it follow --optimization / --winograd")


def _model_options(p: argparse.ArgumentParser) -> None:
    _prune_option(p)
    _optimization_option(p)
    p.add_argument("--no-inputs-allocation", action="store_true",
                   help="inputs are buffers of the application, not part of the activation pool")
    p.add_argument("--no-outputs-allocation", action="store_true",
                   help="outputs are buffers of the application, not part of the activation pool")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="stm32ai", description="TensorFlow Lite models to STM32 firmware.")
    ap.add_argument("--version", action=_VersionAction)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    g = sub.add_parser("generate", help="generate a firmware project (or just the C with --c-only)")
    g.add_argument("models", nargs="+", metavar="model",
                   help="one .tflite file, or several for one firmware running them all")
    g.add_argument("--board", "-b")
    g.add_argument("-o", "--output")
    g.add_argument("--name", "-n", help="C symbol prefix (default: network); several models: one per model, "
                   "comma-separated (default: each file name made a C identifier)")
    g.add_argument("--shared-activations", action="store_true",
                   help="several models: one activation pool sized to the largest (the application runs "
                        "them one after another) instead of one pool each")
    g.add_argument("--c-only", action="store_true", help="emit only the model C files and runtime")
    g.add_argument("--force", action="store_true", help="replace a non-empty output directory")
    g.add_argument("--into", metavar="PROJECT_DIR",
                   help="add the model as a component (PROJECT_DIR/stm32ai/) to your CubeMX CMake, STM32CubeIDE or "
                        "Makefile project, wired in between markers; run again to update it (docs/into.md)")
    g.add_argument("--update", action="store_true",
                   help="regenerate the firmware project -o DIR (e.g. with a new model) keeping your edits: "
                        "files you changed stay, a conflicting new version is written beside as "
                        "<file>.stm32ai-new (docs/project.md, \"Regenerating\")")
    g.add_argument("--dry-run", action="store_true", help="with --into or --update: show what would change, "
                   "write nothing")
    g.add_argument("--input-normalization", metavar="OFFSET:SCALE[,...]",
                   help="one model: <name>_input_from_u8 maps a byte u to the real value "
                        "(u - OFFSET) * SCALE (one pair, or one per channel = the input's last dimension), "
                        "then quantises it as TFLite does; e.g. 127.5:0.0078125 for [-1, 1]")
    g.add_argument("--named-sections", action="store_true",
                   help="with --into or --c-only: weights in .nn_weights, the pool in .nn_activations (your linker "
                        "script places them) instead of .rodata.nn_weights / .bss.nn_activations, which a stock "
                        "linker script puts in flash and zero-initialised RAM")
    g.add_argument("--validation", action="store_true",
                   help="emulated boards: the demo serves the validation protocol after its self-test "
                        "(hardware boards always do)")
    g.add_argument("--profile", action="store_true",
                   help="per-layer profiling: build with -DAI_PROFILE, the demo prints one `layer:` line per "
                        "kernel (cycles on hardware, instructions on emulated boards); with --c-only the hooks "
                        "are always emitted: compile with -DAI_PROFILE and provide ai_profile_clock()")
    g.add_argument("--activations-pool", help="comma-separated board memory regions, fastest first, each "
                   "REGION or REGION:SIZE (a cap); split across them when no single one holds the pool")
    g.add_argument("--weights-pool", help="comma-separated board memory regions, in order of preference; "
                   "RUN@LOAD: weights in external flash LOAD, copied at boot into RAM region RUN")
    g.add_argument("--weights-copy", choices=("ram",), help="ram: the weights' image in the board's external "
                   "flash, copied at boot into the fastest RAM that holds them (docs/external_memory.md)")
    g.add_argument("--no-test-vector", action="store_true",
                   help="embed no expected output (no reference is run): the demo reports timing and "
                        "memory and `result: no-reference`")
    g.add_argument("--autotune", action="store_true",
                   help="run the tuner first (stm32ai tune: every candidate variant built and estimated in cycles "
                        "on the board, cached per layer signature), then generate with its table")
    _model_options(g)
    g.set_defaults(fn=cmd_generate)

    t = sub.add_parser("tune", help="per-layer kernel variants chosen by estimated cycles on a board "
                       "(writes a table for generate --tuning)")
    t.add_argument("model")
    t.add_argument("--board", "-b", required=True)
    t.add_argument("-o", "--output", help="the table file (default: <model>_<board>.tuning.json)")
    t.add_argument("--optimization", choices=("time", "balanced"), default="balanced",
                   help="the flash rule the tuned model keeps (balanced: within the board's flash)")
    t.add_argument("--cache-dir", help="measurement cache root (default: $STM32AI_CACHE_DIR, else "
                   "$XDG_CACHE_HOME/stm32ai, else ~/.cache/stm32ai)")
    t.set_defaults(fn=cmd_tune)

    a = sub.add_parser("analyze", help="per-layer MACC, weights and activations; fits-on-board check")
    a.add_argument("models", nargs="+", metavar="model",
                   help="one .tflite file, or the models of one multi-model firmware")
    a.add_argument("--shared-activations", action="store_true",
                   help="several models: they share one activation pool (the largest) instead of one each")
    a.add_argument("--board", "-b")
    a.add_argument("--json", metavar="F", help="also write the report as JSON to F")
    a.add_argument("--html", metavar="F", help="also write the report as HTML to F")
    a.add_argument("--activations-pool", help="comma-separated board memory regions, fastest first, each "
                   "REGION or REGION:SIZE (a cap); split across them when no single one holds the pool")
    a.add_argument("--weights-pool", help="comma-separated board memory regions, in order of preference; "
                   "RUN@LOAD: weights in external flash LOAD, copied at boot into RAM region RUN")
    a.add_argument("--weights-copy", choices=("ram",), help="ram: the weights' image in the board's external "
                   "flash, copied at boot into the fastest RAM that holds them (docs/external_memory.md)")
    a.add_argument("--estimate", action="store_true",
                   help="with --board: build the firmware and estimate cycles and ms per inference, per "
                        "layer, on the board's core and memory-system model (docs/estimate.md)")
    _model_options(a)
    a.set_defaults(fn=cmd_analyze)

    v = sub.add_parser("validate", help="run the generated C against the references")
    v.add_argument("model")
    v.add_argument("--mode", choices=("host", "target"), default="host")
    _optimization_option(v)
    v.add_argument("--port", help="target mode: pyserial URL of the board's UART (/dev/ttyACM0, socket://HOST:PORT)")
    v.add_argument("--board", "-b", help="target mode without --port: build the validation firmware for this "
                                         "emulated board and run it in QEMU; host mode: compile the model as "
                                         "for this board (weight layouts, flash staging) and run it on the host")
    v.add_argument("--model", dest="target_model", metavar="NAME",
                   help="target mode with --port: the model (name or index) of a multi-model firmware to "
                        "validate (default: its first)")
    v.add_argument("--timeout", type=_seconds(False), default=30.0,
                   help="target mode: seconds to wait for each reply")
    v.add_argument("--profile", action="store_true",
                   help="target mode with --board: build the firmware with per-layer profiling (with --port, "
                        "per-layer counts are reported when the firmware was generated with --profile)")
    v.add_argument("--activations-pool", help="target mode with --board: generate's option (regions, fastest "
                   "first, REGION[:SIZE]; split across them when no single one holds the pool)")
    v.add_argument("--inputs", metavar="F.npz", help="inputs (arrays in input order; leading dim = samples)")
    v.add_argument("-n", type=int, default=3, help="number of random samples (default 3, at most 100,000)")
    v.add_argument("--seed", type=_non_negative_int, default=0, help="random inputs' seed, 0 to 2**32-1")
    v.add_argument("--json", metavar="F", help="also write the metrics as JSON to F")
    _prune_option(v)
    v.set_defaults(fn=cmd_validate)

    r = sub.add_parser("run", help="build a project and run it on its emulated board")
    r.add_argument("project")
    r.add_argument("--timeout", type=_seconds(False), default=300.0)
    r.set_defaults(fn=cmd_run)

    f = sub.add_parser("flash", help="program a project's built image into its board "
                       "(OpenOCD, st-flash or STM32CubeProgrammer)")
    f.add_argument("project")
    f.add_argument("--programmer", choices=("openocd", "st-flash", "cubeprog"),
                   help="use this programmer (default: the first installed, in this order)")
    f.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    f.add_argument("--monitor", action="store_true", help="then read the demo's UART output")
    f.add_argument("--port", default="/dev/ttyACM0", help="the monitor's port (pyserial URL)")
    f.set_defaults(fn=cmd_flash)

    m = sub.add_parser("monitor", help="read and pretty-print the demo's UART output")
    m.add_argument("--port", required=True, help="pyserial URL, e.g. /dev/ttyACM0 or socket://127.0.0.1:4321")
    m.add_argument("--baud", type=int, default=115200)
    m.add_argument("--timeout", type=_seconds(True), default=0.0, help="stop after this many seconds (0: never)")
    m.set_defaults(fn=cmd_monitor)

    k = sub.add_parser("check-map", help="where the model's weights and pools landed in a linked firmware "
                       "(a GNU ld map file); exit 1 if a pool has a load image or weights sit in RAM")
    k.add_argument("map", help="the link's map file (-Wl,-Map=FILE); the ELF beside it is read too when present")
    k.add_argument("--elf", help="the linked ELF (default: the map's name with .elf, if it exists)")
    k.add_argument("--weights-in-ram", action="store_true", help="weights in RAM were asked for: not a failure")
    k.set_defaults(fn=cmd_check_map)

    b = sub.add_parser("boards", help="list the supported boards")
    b.add_argument("--json", action="store_true")
    b.set_defaults(fn=cmd_boards)

    s = sub.add_parser("supported-ops", help="list supported operators and their constraints")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_supported_ops)
    return ap


def _weights_copy(args: argparse.Namespace) -> None:
    """--weights-copy ram becomes the weights pool `ram@LOAD` (placement.py picks the RAM):
    LOAD is --weights-pool's external flash, else the board's first in its weights list."""
    if getattr(args, "weights_copy", None) is None:
        return
    from stm32ai.boards import load_board
    from stm32ai.placement import BOOT_COPY_AUTO

    if not getattr(args, "board", None):
        raise Stm32aiError("--weights-copy needs --board (the copy is from the board's external flash)")
    board = load_board(args.board)
    given = [e.strip() for e in (args.weights_pool or "").split(",") if e.strip()]
    if any("@" in e for e in given):
        raise Stm32aiError("--weights-copy goes with --weights-pool REGION (the external flash), not RUN@LOAD")
    flashes = [rn for rn in (given or board.weights_pool)
               if rn in board.external and not board.region(rn).writable]
    if not flashes:
        raise Stm32aiError(f"--weights-copy: board {board.id} has no external flash stm32ai brings up"
                           + (f" in --weights-pool {args.weights_pool}" if given else ""))
    args.weights_pool = f"{BOOT_COPY_AUTO}@{flashes[0]}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    fn: Callable[[argparse.Namespace], int] = args.fn
    try:
        _weights_copy(args)
        return fn(args)
    except Stm32aiError as e:  # messages may quote model strings: one_line keeps them one line
        print(f"stm32ai: error: {one_line(e)}", file=sys.stderr)
        return e.exit_code
    except CheckFailed as e:
        print(f"stm32ai: {one_line(e)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("stm32ai: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `stm32ai boards | head`: the reader left, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # the file system refused (permissions, full disk, /proc...): bad usage
        print(f"stm32ai: error: {one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # an internal bug: one line, traceback only on request
        if os.environ.get("STM32AI_DEBUG"):
            raise
        print(f"stm32ai: internal error: {type(e).__name__}: {one_line(e)} (set STM32AI_DEBUG=1 for details)",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
