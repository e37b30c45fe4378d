"""Print AI_W16_M7_GROUP1 / AI_W16_M7_GROUP4 of stm32ai/runtime/src/ai_conv_s8.c: the w16 2x2
MAC group software-pipelined for the Cortex-M7's dual issue (docs/kernels_conv.md, "Cortex-M7
MAC loop").

Schedule, in issue cycles: half-group h (one K-pair of a group: the {x0,x2} words when h is even,
{x1,x3} when odd) runs its 4 SMLADs at cycles 3+4h .. 6+4h in the order
a00 = W*Xa, a01 = W*Xb, a10 = W'*Xa, a11 = W'*Xb (W, W': the two output channels' weight words,
Xa, Xb: the two pixels' column words) and loads Xa, W, Xb, W' at cycles 4h .. 4h+3, so that each
load is >= 2 cycles before its first SMLAD (an M7 MAC operand cannot take a load result a cycle
old) and each cycle from 3 on holds one SMLAD and one LDR (the pair the M7 dual-issues). Data
registers are assigned by interval colouring over six registers (at most five values are live);
a register is reloaded only after its last read. The pointers advance by ADDs in the tail's free
slots, nothing is loaded beyond the group(s) the body computes.

    python3 scripts/gen_m7_w16.py   # paste the output over the two macros
"""

from __future__ import annotations

REGS = ("x0", "x1", "x2", "x3", "wa", "wb")


def schedule(groups: int, loop: bool) -> list[str]:
    """Assembly lines (asm operand names) of `groups` pipelined w16 groups."""
    vals: list[list] = []            # [(pointer, byte offset), load cycle, last use, register]
    smlads: dict[int, tuple[str, tuple[str, int], tuple[str, int]]] = {}
    for h in range(2 * groups):
        g, b = divmod(h, 2)
        s = 3 + 4 * h
        w, wp = ("w", 16 * g + 4 * b), ("w", 16 * g + 8 + 4 * b)
        xa, xb = ("c", 16 * g + 4 * b), ("c", 16 * g + 8 + 4 * b)
        for v, tl, last in ((xa, 4 * h, s + 2), (w, 4 * h + 1, s + 1), (xb, 4 * h + 2, s + 3),
                            (wp, 4 * h + 3, s + 3)):
            vals.append([v, tl, last, None])
        smlads.update({s: ("a00", w, xa), s + 1: ("a01", w, xb), s + 2: ("a10", wp, xa),
                       s + 3: ("a11", wp, xb)})
    free_after = dict.fromkeys(REGS, -1)
    where: dict[tuple[str, int], str] = {}
    for v in sorted(vals, key=lambda v: v[1]):
        r = min((r for r in REGS if free_after[r] < v[1]), key=lambda r: free_after[r])
        free_after[r], v[3] = v[2], r
        where[v[0]] = r
    loads = {v[1]: v for v in vals}
    tmax = max(smlads)
    tail = {tmax - 2: f"add %[c], %[c], #{16 * groups}", tmax - 1: f"add %[w], %[w], #{16 * groups}"}
    if loop:
        tail[tmax] = "subs %[g], %[g], #1"
    out = []
    for t in range(tmax + 1):
        if t in smlads:
            a, wv, xv = smlads[t]
            out.append(f"smlad %[{a}], %[{where[wv]}], %[{where[xv]}], %[{a}]")
        if t in loads:
            (p, off), reg = loads[t][0], loads[t][3]
            out.append(f"ldr %[{reg}], [%[{p}], #{off}]")
        if t in tail:
            out.append(tail[t])
    return out


def macro(name: str, lines: list[str]) -> str:
    rows = [f"#define {name}"] + [f'  "{x}\\n\\t"' for x in lines]
    return "\n".join(r + " " * max(1, 52 - len(r)) + "\\" for r in rows[:-1]) + "\n" + rows[-1] + "\n"


if __name__ == "__main__":
    print(macro("AI_W16_M7_GROUP1", schedule(1, loop=False)))
    print(macro("AI_W16_M7_GROUP4", schedule(4, loop=True)))
