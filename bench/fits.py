"""Which shared model fits which board (`make fits`, `python -m bench.fits`): for every model in
../shared/models and every board, `int` when the weights and activations fit the internal
memories, `ext` when they fit only with the external memories stm32ai brings up (SDRAM, QSPI
flash: docs/external_memory.md), else `no` with about how many bytes are missing.

Each model is compiled once (default options, no board: the weights size of the portable int8
layouts); placement is stm32ai's own (`place_model`: first region with room, activations split
across regions when no single one holds them). Not part of `make test`."""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

from stm32ai.boards import Board, list_boards
from stm32ai.errors import Stm32aiError
from stm32ai.pipeline import compile_model
from stm32ai.project.build import _sizes, place_model

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "models"


def _fits(board: Board, c, pools: tuple[list[str], list[str]] | None) -> bool:
    try:
        place_model(board, copy.deepcopy(c), *(pools or (None, None)))
        return True
    except Stm32aiError:
        return False


def _internal(board: Board) -> tuple[list[str], list[str]]:
    return ([r for r in board.activations_pool if r not in board.external],
            [r for r in board.weights_pool if r not in board.external])


def _over(board: Board, act: int, wts: int) -> int:
    """Bytes missing, roughly: the weights beyond the largest region of their list, the
    activations beyond all RAM of theirs (reserves for code, data and stack not counted)."""
    w_room = max((board.region(r).length for r in board.weights_pool if board.ready(r)), default=0)
    a_room = sum(board.region(r).length for r in board.activations_pool if board.ready(r))
    return max(wts - w_room, 0) + max(act - a_room, 0)


def cell(board: Board, c) -> str:
    if _fits(board, c, _internal(board)):
        return "int"
    if board.external and _fits(board, c, None):
        return "ext"
    act, wts = _sizes(c)
    over = _over(board, act, wts)
    return f"no (+{over:,} B)" if over else "no"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fits", description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path, help="model files (default: ../shared/models)")
    ap.add_argument("--boards", help="comma-separated board ids (default: all hardware boards)")
    args = ap.parse_args(argv)
    models = args.models or sorted(SHARED.rglob("*.tflite"))
    boards = [b for b in list_boards() if not b.is_emulated]
    if args.boards:
        boards = [b for b in boards if b.id in args.boards.split(",")]
    print("| model | weights B | activations B | " + " | ".join(b.id for b in boards) + " |")
    print("|---|---:|---:|" + "---|" * len(boards))
    for m in models:
        try:
            c = compile_model(m, "network")
        except Stm32aiError as e:
            print(f"| {m.stem} | refused: {e} |", file=sys.stderr)
            continue
        act, wts = _sizes(c)
        print(f"| {m.stem} | {wts:,} | {act:,} | " + " | ".join(cell(b, c) for b in boards) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
