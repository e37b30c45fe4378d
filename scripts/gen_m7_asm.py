"""Print the Cortex-M7 (AI_CORE_CM7) inner-loop macros: AI_W16_M7_GROUP1 / _GROUP4 of
stm32ai/runtime/src/ai_conv_s8.c (the w16 2x2 MAC group software-pipelined for the M7's dual
issue; docs/kernels_conv.md, "Cortex-M7 MAC loop") and AI_FC_M7_G1 / _G2 / _G4 of
stm32ai/runtime/src/ai_fc.c (docs/kernels_fc.md, "Cortex-M7").

Schedule, in issue cycles: half-group h (one K-pair of a group: the {x0,x2} words when h is even,
{x1,x3} when odd) runs its 4 SMLADs at cycles 3+4h .. 6+4h in the order
a00 = W*Xa, a01 = W*Xb, a10 = W'*Xa, a11 = W'*Xb (W, W': the two output channels' weight words,
Xa, Xb: the two pixels' column words) and loads Xa, W, Xb, W' at cycles 4h .. 4h+3, so that each
load is >= 2 cycles before its first SMLAD (an M7 MAC operand cannot take a load result a cycle
old) and each cycle from 3 on holds one SMLAD and one LDR (the pair the M7 dual-issues). Data
registers are assigned by interval colouring over six registers (at most five values are live);
a register is reloaded only after its last read. The pointers advance by ADDs in the tail's free
slots, nothing is loaded beyond the group(s) the body computes.

FC (4 rows as two pairs, int8 input, per group 5 LDR + 6 SXTB16 + 8 SMLAD): the raw-weight
SMLADs first, each followed by the SXTB16 of a weight word already used raw (SXTB16 issues only
as the older of a pair, so each one pairs with the next SMLAD), and the next group's loads and
input unpacking placed right after the last read of the register they overwrite, where they
pair with the tail's SMLADs.

    python3 scripts/gen_m7_asm.py   # paste the output over the macros
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


def fc_group(i: int) -> list[str]:
    """One FC column group at offset i (x: 4 bytes, w: 16 bytes per group), in issue order."""
    ox, ow = 4 * i, 16 * i
    return [f"ldr %[xa], [%[xp], #{ox}]", f"ldr %[w0], [%[wp], #{ow}]", f"ldr %[w1], [%[wp], #{ow + 4}]",
            f"ldr %[w2], [%[wp], #{ow + 8}]", "sxtb16 %[xb], %[xa], ror #8",
            f"ldr %[w3], [%[wp], #{ow + 12}]", "sxtb16 %[xa], %[xa]",
            "smlad %[ab0], %[w0], %[xa], %[ab0]",
            "sxtb16 %[w0], %[w0]", "smlad %[ab0], %[w1], %[xb], %[ab0]",
            "sxtb16 %[w1], %[w1]", "smlad %[ab1], %[w2], %[xa], %[ab1]",
            "sxtb16 %[w2], %[w2]", "smlad %[ab1], %[w3], %[xb], %[ab1]",
            "sxtb16 %[w3], %[w3]", "smlad %[b0], %[w0], %[xa], %[b0]",
            "smlad %[b0], %[w1], %[xb], %[b0]",
            "smlad %[b1], %[w2], %[xa], %[b1]",
            "smlad %[b1], %[w3], %[xb], %[b1]"]


def fc_schedule(groups: int) -> list[str]:
    """`groups` FC column groups, the next group's loads hoisted into the current tail."""
    out = fc_group(0)[:7]
    for i in range(groups):
        g = fc_group(i)[7:]
        if i + 1 < groups:
            n = fc_group(i + 1)[:7]
            # after: g[8] last reads w0, g[9] w1, g[10] xa and w2, g[11] xb and w3
            g = g[:9] + [n[1], g[9], n[2], g[10], n[0], n[3], g[11], n[4], n[5], n[6]]
        out += g
    return out + [f"add %[xp], %[xp], #{4 * groups}", f"add %[wp], %[wp], #{16 * groups}"]


def macro(name: str, lines: list[str]) -> str:
    rows = [f"#define {name}"] + [f'  "{x}\\n\\t"' for x in lines]
    return "\n".join(r + " " * max(1, 52 - len(r)) + "\\" for r in rows[:-1]) + "\n" + rows[-1] + "\n"


if __name__ == "__main__":
    print(macro("AI_W16_M7_GROUP1", schedule(1, loop=False)))
    print(macro("AI_W16_M7_GROUP4", schedule(4, loop=True)))
    for n in (1, 2, 4):
        print(macro(f"AI_FC_M7_G{n}", fc_schedule(n)))
