"""Band height per stripe, chosen by pool and modelled cycles (issue 24, docs/stripes.md).

`form_stripes` picks the cut points with one-row bands (the smallest rings). A taller band
means fewer kernel calls (fewer weight re-reads, fewer per-call set-ups, no half-empty pixel
pair per row) but taller rings. Here every stripe gets the alternatives: each band height of
BANDS that simulates, or its members back layer by layer. Each combination is evaluated by the
caller (`evaluate(g) -> (pool bytes, modelled cycles)`: the pipeline plans it and applies the
weight staging the board gets, then prices it with passes/staging.py `graph_cycles`), and the
rule of `--optimization ram` picks one: the smallest pool whose modelled cycles stay within
`max_cost` of the stripe-less graph's (None: no bound), ties to the fewer cycles.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from stm32ai.ir import Graph, Op
from stm32ai.passes.stripes import Stripe, StripeError, simulate_best, stripe_op

BANDS = (1, 2, 3, 4, 6, 8)
MAX_COMBOS = 64  # beyond: each stripe's band chosen with the others at their current one
# cores whose builds run the HWC depthwise's row assembly (Armv7E-M; None: no board named),
# the geometry `staging.hwc_cycles` prices; elsewhere its C loop would run, so no ":hwc" option
HWC_CORES = (None, "cortex-m4", "cortex-m7")


@dataclass
class Option:
    # per stripe (in op order): band height, None = layer by layer, "<band>:dw4" = that band
    # with its 3x3 depthwise members kept 4-channel, "<band>:hwc" = with them on the HWC kernel
    # where its assembly applies, "<band>:hwc-all" = every one the HWC kernel takes (no planes
    # at all; stripes.py `_narrow_scratch`)
    bands: tuple[int | str | None, ...]
    pool: int
    cycles: float
    chosen: bool = False

    def cost(self, base: float) -> float:
        """Modelled cycles over those of the stripe-less graph (`base`), as a fraction."""
        return self.cycles / base - 1.0 if base > 0 else 0.0


def _variants(g: Graph, op: Op, st: Stripe) -> dict[int | str | None, list[Op]]:
    """The ops standing for one stripe at each band height that simulates (and, where a 3x3
    depthwise member would run 2-channel, the same band with it 4-channel: less scratch against
    more set-up per call; where one can run on HWC, the same band with it there: no scratch and
    no frame per call against the planar kernel's faster rows), and None: its members as they
    were (layer by layer)."""
    out: dict[int | str | None, list[Op]] = {None: [m.op for m in st.members], st.band: [op]}
    tallest = max(int(g.tensors[m.out].shape[1]) for m in st.members)
    for band in BANDS:
        if band > tallest:
            continue
        # "hwc-all" only for a stripe fed in rows (--input-rows), where the planes set the pool
        # (VWW); elsewhere it ties the pool and its C rows' price (HWC_C_FACTOR) is not checked
        # against the estimator (VWW ram would take 3:hwc-all on the model's word)
        extra: tuple[str, ...] = ("hwc-all",) if st.fed else ()
        narrows: tuple[bool | str, ...] = ((True, False, "hwc") if getattr(g, "core", None) in HWC_CORES
                                           else (True, False)) + extra
        for narrow in narrows:
            key: int | str = band if narrow is True else (f"{band}:dw4" if narrow is False else f"{band}:{narrow}")
            if key in out:
                continue
            try:
                sto = stripe_op(g, simulate_best(g, st.members, band, set(st.outputs), narrow=narrow,
                                                    row_fed=set(st.fed)))
            except StripeError:
                continue
            kernels = [m["kernel"] for m in sto.attrs["stripe"]["members"]]
            if any(k in out and [m["kernel"] for m in out[k][0].attrs["stripe"]["members"]] == kernels
                   for k in out if k is not None and (k == band or str(k).startswith(f"{band}:"))):
                continue  # no member changes kernel from an option already listed: the same stripe
            out[key] = [sto]
    return out


def choose_bands(g: Graph, chosen: list[Stripe], evaluate: Callable[[Graph], tuple[int, float]],
                 max_cost: float | None = None) -> list[Option]:
    """Set each stripe of g (formed by `form_stripes` from `chosen`) to the band height the rule
    picks, or back to layer by layer; returns every option evaluated (the stripe-less graph
    first), the picked one marked."""
    pos = [i for i, op in enumerate(g.ops) if op.kernel == "stripe"]
    by_out = {tuple(st.outputs): st for st in chosen}  # a tensor has one producer: outputs name the stripe
    stripes = [by_out[tuple(g.ops[i].outputs)] for i in pos]
    variants = [_variants(g, g.ops[i], st) for i, st in zip(pos, stripes, strict=True)]
    ops = list(g.ops)
    seen: dict[tuple[int | str | None, ...], Option] = {}

    def run(combo: tuple[int | str | None, ...]) -> Option:
        if combo not in seen:
            new: list[Op] = []
            for i, op in enumerate(ops):
                new.extend(variants[pos.index(i)][combo[pos.index(i)]] if i in pos else [op])
            g.ops = new
            try:
                pool, cycles = evaluate(g)
            finally:
                g.ops = ops
            seen[combo] = Option(combo, pool, cycles)
        return seen[combo]

    base = run(tuple(None for _ in pos))
    keys = [list(v) for v in variants]
    n = 1
    for k in keys:
        n *= len(k)
    if n <= MAX_COMBOS:
        for combo in itertools.product(*keys):
            run(combo)
    else:  # one stripe at a time, the others at their band
        cur = [st.band for st in stripes]
        for s, k in enumerate(keys):
            for b in k:
                run(tuple(cur[:s] + [b] + cur[s + 1:]))
    ok = [o for o in seen.values() if max_cost is None or o.cycles <= base.cycles * (1 + max_cost)]
    pick = min(ok, key=lambda o: (o.pool, o.cycles))
    pick.chosen = True
    new = []
    for i, op in enumerate(ops):
        new.extend(variants[pos.index(i)][pick.bands[pos.index(i)]] if i in pos else [op])
    g.ops = new
    return [base, *(o for o in seen.values() if o is not base)]
