"""Estimated cycles per kernel call context and per function (a measuring tool, not the CLI).

`python3 -m stm32ai.estimate.profile PROJECT --board B` builds a generated project (`stm32ai
generate M --board B -o PROJECT`), traces the demo's measured inference exactly as `--estimate`
does (same core model, memory system and figures) and attributes every instruction's estimated
cycles, fetch and data stalls to (context, function): the context of a call of an `ai_*` kernel
entry is the data symbol its first argument points into (the call's params struct: a node's
`k<i>`, a stripe member's `k<i>_m<j>` / `k<i>_m<j>w`), so a stripe's cycles split by member
although members share kernel functions; code outside any kernel call is context "-".
"""

from __future__ import annotations

import argparse
import bisect
from collections.abc import Callable
from pathlib import Path

from unicorn import Uc
from unicorn import arm_const as C

from stm32ai.boards import load_board
from stm32ai.estimate.estimate import core_model
from stm32ai.estimate.memsys import build_memory_system
from stm32ai.estimate.trace import Profile, Trace, board_regions


def _objects(elf: Path) -> list[tuple[int, int, str]]:
    from elftools.elf.elffile import ELFFile

    out = []
    with open(elf, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        for s in symtab.iter_symbols() if symtab is not None else ():
            if s.name and s["st_info"]["type"] == "STT_OBJECT" and s["st_size"]:
                out.append((int(s["st_value"]), int(s["st_size"]), s.name))
    return sorted(out)


def _functions(elf: Path) -> list[tuple[int, str]]:
    from elftools.elf.elffile import ELFFile

    out = {}
    with open(elf, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        for s in symtab.iter_symbols() if symtab is not None else ():
            if s.name and s["st_info"]["type"] == "STT_FUNC":
                out.setdefault(int(s["st_value"]) & ~1, s.name)
    return sorted(out.items())


def kernel_profile(elf: Path, skip: str = "ai_run") -> Profile:
    """A Profile whose contexts are the calls of the ELF's `ai_*` functions (but `skip`), each
    named after the data object its r0 points into (the params struct), else the function."""
    objs = _objects(elf)
    starts = [o[0] for o in objs]
    funcs = _functions(elf)

    def obj(addr: int) -> tuple[str, int] | None:
        i = bisect.bisect_right(starts, addr) - 1
        return (objs[i][2], addr - objs[i][0]) if i >= 0 and addr < objs[i][0] + objs[i][1] else None

    def context(fname: str) -> Callable[[Uc], str | None]:
        def name(uc: Uc) -> str | None:
            o = obj(int(uc.reg_read(C.UC_ARM_REG_R0)))
            if o is not None:
                return o[0]
            # params copied to the stack (a stripe's HWC members): named by the first of r1-r3
            # that points into a constant object in flash (the member's weights: its offset in
            # the blob; activations move from call to call)
            for reg in (C.UC_ARM_REG_R1, C.UC_ARM_REG_R2, C.UC_ARM_REG_R3):
                a = int(uc.reg_read(reg))
                o = obj(a) if a < 0x20000000 else None
                if o is not None:
                    return f"{fname}({o[0]}+{o[1]})"
            return fname
        return name

    return Profile(functions=funcs, entries={a: context(n) for a, n in funcs if n.startswith("ai_") and n != skip})


def profile_elf(elf: Path, board_id: str, entry: str = "ai_run", occurrence: int = 2) -> tuple[Profile, int]:
    """The measured inference's Profile and its total estimated cycles."""
    board = load_board(board_id)
    tr = Trace(elf, board_regions(board), core=board.core)
    prof = kernel_profile(elf, skip=entry)
    tr.run_to(tr.symbol(entry), occurrence)
    r = tr.measure(core_model(board), build_memory_system(board), profile=prof)
    return prof, r.cycles


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("project", type=Path, help="a generated project (stm32ai generate ... -o DIR) or an ELF")
    ap.add_argument("--board", required=True)
    ap.add_argument("--top", type=int, default=4, help="functions shown per context")
    a = ap.parse_args(argv)
    if a.project.suffix == ".elf":
        elf = a.project
    else:
        from stm32ai.project.run import build_project

        elf = build_project(a.project)
    prof, total = profile_elf(elf, a.board)
    ctx: dict[str, list[int]] = {}
    for (c, _f), row in prof.table.items():
        t = ctx.setdefault(c, [0, 0, 0, 0])
        for i in range(4):
            t[i] += row[i]
    print(f"estimated cycles {total:,} ({a.board}); per context: est. cycles, instructions, fetch / data stalls")
    for c, t in sorted(ctx.items(), key=lambda kv: -kv[1][0]):
        print(f"{c:24s} {t[0]:>11,} {100 * t[0] / total:5.1f}% {t[1]:>11,} {t[2]:>9,} {t[3]:>9,}")
        rows = sorted(((f, r) for (cc, f), r in prof.table.items() if cc == c), key=lambda fr: -fr[1][0])
        for f, r in rows[:a.top]:
            print(f"    {f:36s} {r[0]:>11,} {r[1]:>11,} {r[2]:>9,} {r[3]:>9,}")


if __name__ == "__main__":
    main()
