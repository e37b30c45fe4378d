"""Does a model fit a board: the memory placement of its two pools, decided from board data alone.

The first region of each ordered list that has room (after the code, data, stack and heap the
board reserves there) is used; when none has room the model is refused with the numbers
(Stm32aiError, exit 2). A module of its own, below both the compiler pipeline (the weights
budget of --optimization balanced, the RAM room of the staging choice, the fits check) and the
project generator (the linker script's regions), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from stm32ai.boards import Board, describe_size, list_boards, parse_size
from stm32ai.errors import Stm32aiError

__all__ = ["ActivationsDoNotFit", "BOOT_COPY_AUTO", "CODE_RESERVE", "DATA_RESERVE", "Placement",
           "activation_budgets", "boot_copy_targets", "code_reserve", "plan_placement", "round8"]

# Room kept for what is not the model when checking that its pools fit (the linker script
# checks the exact figures at build time):
CODE_RESERVE = 48 * 1024   # startup, bring-up, demo, runtime and kernels, libc/libgcc pieces
DATA_RESERVE = 8 * 1024    # .data + .bss of the runtime (instance table) and the demo
_ALIGN = 8



def round8(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


@dataclass
class Placement:
    activations_region: str
    weights_region: str
    weights_copied: bool          # weights live in RAM, loaded from the text region at reset
    free: dict[str, int]          # bytes left per region after everything is placed (estimate)
    # one {"region", "bytes"} per activation pool (several when split across regions)
    activation_pools: list[dict[str, Any]] = field(default_factory=list)
    # boot copy (`--weights-copy ram`, pool entry RUN@LOAD): the external flash region holding the
    # weights' load image, copied to weights_region by extmem_init() once the memories are up
    weights_load: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def code_reserve(board: Board) -> int:
    """The code kept in the text region: CODE_RESERVE, but at most 13/16 of a small flash (the
    32 KiB NUCLEO-C031C6: 26 KiB; a one-convolution demo firmware for Cortex-M0+ is 25.3 KiB of
    text, measured). The linker script checks the real figure."""
    text = board.region(board.text_region).length
    return min(CODE_RESERVE, text * 13 // 16 // _ALIGN * _ALIGN)


def data_reserve(board: Board) -> int:
    """The .data/.bss kept in the data region: DATA_RESERVE, but at most an eighth of a small
    region (16 KiB qemu-microbit, 12 KiB NUCLEO-C031C6), where the demo's own .data/.bss is
    ~1.3 KiB (measured: docs/boards.md, Armv6-M). The linker script checks the real figure."""
    return min(DATA_RESERVE, round8(board.region(board.data_region).length // 8))


def _reserved(board: Board, vectors_bytes: int) -> dict[str, int]:
    res = {r.name: 0 for r in board.memory}
    res[board.text_region] += code_reserve(board) + round8(vectors_bytes)
    res[board.data_region] += data_reserve(board) + board.heap_size
    res[board.stack_region] += board.stack_size
    return res


def _why_reserved(board: Board, rn: str, vectors_bytes: int) -> str:
    parts = []
    if rn == board.text_region:
        parts.append(f"{describe_size(code_reserve(board))} code + {vectors_bytes:,} B test vectors")
    if rn == board.data_region:
        parts.append(f"{describe_size(data_reserve(board))} data/bss"
                     + (f" + {board.heap_size:,} B heap" if board.heap_size else ""))
    if rn == board.stack_region:
        parts.append(f"{describe_size(board.stack_size)} stack")
    return " - ".join(parts)


class ActivationsDoNotFit(Stm32aiError):
    """The activation pool fits no single region of its list (a split may still fit)."""


def _check_pool_names(board: Board, names: list[str], what: str) -> None:
    known = [r.name for r in board.memory]
    if not names:
        raise Stm32aiError(f"--{what}-pool is empty: give one or more of {', '.join(known)}")
    for n in names:
        if n not in known:
            raise Stm32aiError(f"--{what}-pool: board {board.id} has no memory region '{n}' "
                               f"(regions: {', '.join(known)})")
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise Stm32aiError(f"--{what}-pool lists region '{dup}' twice")


def _split_caps(entries: list[str], what: str) -> tuple[list[str], dict[str, int]]:
    """`REGION` or `REGION:SIZE` entries: SIZE caps the bytes the pool may use there
    (e.g. `sram:16K`), to leave room for the application or to plan for a smaller part."""
    names, caps = [], {}
    for e in entries:
        name, sep, size = e.partition(":")
        names.append(name.strip())
        if sep:
            try:
                caps[name.strip()] = parse_size(size.strip(), f"--{what}-pool {name.strip()}")
            except ValueError as err:
                raise Stm32aiError(str(err)) from None
    return names, caps


def plan_placement(board: Board, *, activations_bytes: int, weights_bytes: int,
                   activations_pool: list[str] | None = None, weights_pool: list[str] | None = None,
                   vectors_bytes: int = 0, split: list[tuple[str, int]] | None = None) -> Placement:
    """Choose the region of each pool: the first of its ordered list with room for it.

    `split` is a plan already spread across regions (planner/regions.py): one (region, bytes)
    per activation pool, each checked against its own region. Raises Stm32aiError (exit 2) with
    needed vs available bytes per region and a suggestion when a pool does not fit
    (ActivationsDoNotFit when the single activation pool fits none of its regions).
    """
    a_pool, a_caps, (res, w_region, copied, load) = _pools(board, activations_pool, weights_pool, weights_bytes,
                                                           vectors_bytes)
    need_w = round8(weights_bytes)

    def free(rn: str) -> int:
        return min(board.region(rn).length - res[rn], a_caps.get(rn, 1 << 62))

    def why_full(rn: str) -> str:
        reg = board.region(rn)
        why = _why_reserved(board, rn, vectors_bytes)
        if rn == w_region:
            why = (why + " - " if why else "") + f"{need_w:,} B weights"
        if rn in a_caps:
            why = (why + "; " if why else "") + f"capped at {a_caps[rn]:,} B by --activations-pool"
        return f"{rn} has {max(free(rn), 0):,} B free ({describe_size(reg.length)}" + (f" - {why}" if why else "") + ")"

    if split:
        pools = []
        for k, (rn, size) in enumerate(split):
            if rn not in a_pool:
                raise Stm32aiError(f"activation pool {k} was planned for region {rn}, which is not in "
                                   f"--activations-pool {','.join(a_pool)}")
            if round8(size) > free(rn):
                raise Stm32aiError(f"activation pool {k} ({size:,} B) overflows region {rn} on {board.id}: "
                                   + why_full(rn))
            res[rn] += round8(size)
            pools.append({"region": rn, "bytes": size})
        return Placement(split[0][0], w_region, copied, {r.name: r.length - res[r.name] for r in board.memory},
                         pools, load)

    need_a = round8(activations_bytes)
    a_region, notes = None, []
    for rn in a_pool:
        reg = board.region(rn)
        if not board.ready(rn):
            notes.append(f"{rn} needs {reg.needs_init} bring-up, which stm32ai does not generate for {board.id}")
            continue
        if not reg.writable:
            notes.append(f"{rn} is not writable")
            continue
        if free(rn) >= need_a:
            a_region = rn
            break
        notes.append(why_full(rn))
    if a_region is None:
        raise ActivationsDoNotFit(
            f"activations ({activations_bytes:,} B) do not fit on {board.id}: " + "; ".join(notes)
            + "; " + _suggest(board, need_a, a_pool, "activations", res))
    res[a_region] += need_a
    return Placement(a_region, w_region, copied, {r.name: r.length - res[r.name] for r in board.memory},
                     [{"region": a_region, "bytes": activations_bytes}], load)


BOOT_COPY_AUTO = "ram"   # RUN of a RUN@LOAD weights entry: stm32ai picks the RAM (boot_copy_targets)


def boot_copy_targets(board: Board) -> list[str]:
    """The RAM regions `--weights-copy ram` tries, in order: the internal RAMs of the board's
    activation list from last to first (the first, fastest, stays for the activations, as for
    the automatic weights-in-RAM choice), then its external RAMs. The estimator has no model of
    the external memories (estimate/cache.py prices them as on-chip SRAM), so the order is a
    rule (docs/external_memory.md, "Boot copy"): on-chip SRAM beats the FMC SDRAM (row
    activation + CAS latency per burst), which beats the QUADSPI flash read in place (command,
    address and dummy clocks per cache-line refill, 4 data bits per clock)."""
    ram = [rn for rn in board.activations_pool if board.region(rn).writable and board.ready(rn)]
    return ([rn for rn in reversed(ram) if rn not in board.external]
            + [rn for rn in ram if rn in board.external])


def _boot_copy(board: Board, entry: str, res: dict[str, int], need_w: int) -> tuple[str | None, str, str]:
    """(run region or None, load region, why not) of a RUN@LOAD weights entry."""
    run, _, load = (x.strip() for x in entry.partition("@"))
    lreg = board.region(load)
    if load not in board.external or lreg.writable:
        return None, load, f"{load} is not an external flash (the copy's source)"
    if not board.ready(load):
        return None, load, f"{load} needs {lreg.needs_init} bring-up, which stm32ai does not generate for {board.id}"
    if lreg.length - res[load] < need_w:
        return None, load, f"{load} has {lreg.length - res[load]:,} B free"
    targets = boot_copy_targets(board) if run == BOOT_COPY_AUTO else [run]
    why = []
    for rn in targets:
        reg = board.region(rn)
        if not reg.writable or not board.ready(rn):
            why.append(f"{rn} is not a RAM stm32ai brings up")
        elif reg.length - res[rn] < need_w:
            why.append(f"{rn} has {max(reg.length - res[rn], 0):,} B free")
        else:
            return rn, load, ""
    return None, load, "copy from " + load + ": " + ("; ".join(why) or "no RAM region")


def _place_weights(board: Board, weights_bytes: int, w_pool: list[str], vectors_bytes: int
                   ) -> tuple[dict[str, int], str, bool, str]:
    """(bytes reserved per region incl. the weights, weights region, copied to RAM at reset,
    external flash they are copied from at boot or "")."""
    res = _reserved(board, vectors_bytes)
    need_w = round8(weights_bytes)
    text = board.region(board.text_region)

    def free(rn: str) -> int:
        return board.region(rn).length - res[rn]

    for entry in w_pool:
        if "@" not in entry:
            continue
        run, load, why = _boot_copy(board, entry, res, need_w)
        if run is None:
            raise Stm32aiError(f"weights ({weights_bytes:,} B) cannot be copied at boot on {board.id}: {why}")
        res[run] += need_w
        res[load] += need_w
        return res, run, False, load

    w_region, copied, notes = None, False, []
    for rn in w_pool:
        reg = board.region(rn)
        if not board.ready(rn):
            notes.append(f"{rn} needs {reg.needs_init} bring-up, which stm32ai does not generate for {board.id}")
            continue
        external = rn in board.external
        if external and reg.writable:
            # the reset copy runs before SystemInit brings the memory up (startup.c)
            notes.append(f"{rn} is external RAM, brought up after the reset-time copy: it holds activations, "
                         "not weights")
            continue
        cp = rn != board.text_region and not external   # external flash: read in place, its own image
        if cp and not reg.writable:
            notes.append(f"{rn} is read-only and is not the program region")
            continue
        if free(rn) >= need_w and (not cp or free(board.text_region) >= need_w):
            w_region, copied = rn, cp
            break
        extra = f" (+ the same in {text.name} to load it from)" if cp else ""
        notes.append(f"{rn} has {max(free(rn), 0):,} B free{extra} ({describe_size(reg.length)}"
                     + (f" - {_why_reserved(board, rn, vectors_bytes)}" if res[rn] else "") + ")")
    if w_region is None:
        raise Stm32aiError(
            f"weights ({weights_bytes:,} B) do not fit on {board.id}: " + "; ".join(notes)
            + "; " + _suggest(board, need_w, w_pool, "weights", res))
    res[w_region] += need_w
    if copied:
        res[board.text_region] += need_w
    return res, w_region, copied, ""


def _pools(board: Board, activations_pool: list[str] | None, weights_pool: list[str] | None,
           weights_bytes: int, vectors_bytes: int
           ) -> tuple[list[str], dict[str, int], tuple[dict[str, int], str, bool, str]]:
    """The activation region list (the board's default unless given) and its caps, checked, and
    the weights placed in theirs: (regions, caps, _place_weights' result)."""
    a_pool, caps = _split_caps(list(activations_pool) if activations_pool else list(board.activations_pool),
                               "activations")
    w_pool = list(weights_pool) if weights_pool else list(board.weights_pool)
    _check_pool_names(board, a_pool, "activations")
    _check_pool_names(board, [n for e in w_pool for n in e.split("@") if n.strip() != BOOT_COPY_AUTO], "weights")
    if any("@" in e for e in w_pool) and (len(w_pool) != 1 or w_pool[0].count("@") != 1):
        raise Stm32aiError("--weights-pool RUN@LOAD (a boot copy from external flash) must be the only entry")
    return a_pool, caps, _place_weights(board, weights_bytes, w_pool, vectors_bytes)


def activation_budgets(board: Board, *, weights_bytes: int, activations_pool: list[str] | None = None,
                       weights_pool: list[str] | None = None, vectors_bytes: int = 0) -> list[tuple[str, int]]:
    """(region, bytes the activations may use there) for each usable region of the activation
    list, in its order (fastest first), after code, data, stack, heap, weights and caps."""
    a_pool, caps, (res, _, _, _) = _pools(board, activations_pool, weights_pool, weights_bytes, vectors_bytes)
    out = []
    for rn in a_pool:
        reg = board.region(rn)
        if not board.ready(rn) or not reg.writable:
            continue
        room = min(reg.length - res[rn], caps.get(rn, 1 << 62)) // _ALIGN * _ALIGN
        if room > 0:
            out.append((rn, room))
    return out


def _suggest(board: Board, need: int, tried: list[str], what: str, res: dict[str, int]) -> str:
    # internal memories first (faster), then the most free bytes
    for r in sorted(board.memory, key=lambda r: (r.name in board.external, -(r.length - res[r.name]))):
        ok_kind = r.writable or (what == "weights" and r.name == board.text_region)
        if r.name not in tried and board.ready(r.name) and ok_kind and r.length - res[r.name] >= need:
            return f"try --{what}-pool {r.name} (it has {r.length - res[r.name]:,} B free)"
    bigger = []
    try:
        others = [b for b in list_boards() if b.id != board.id]
    except Stm32aiError:
        others = []
    # boards of the same kind first (emulated for an emulated board), then by size
    others.sort(key=lambda b: (b.is_emulated != board.is_emulated,
                               -max((r.length for r in b.memory if r.writable), default=0)))
    for b in others:
        if any(r.writable and b.ready(r.name) and r.length >= need + 16 * 1024 for r in b.memory):
            bigger.append(b.id)
    hint = f"choose a board with more memory (e.g. {', '.join(bigger[:3])})" if bigger else \
        "reduce the model"
    return hint + " or reduce the model" if bigger else hint
