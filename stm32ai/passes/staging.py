"""Weights read from flash once (docs/flash_staging.md).

conv2d_s8 streams its packed weights and `rq` table once per output pixel pair; add_lut_s8 looks
up its two tables once per element. When those constants sit in flash with wait states and
are larger than the flash data cache, every pass pays the wait states again. This pass decides,
per layer and per board, whether the kernel copies them into its scratch first ("staging") and
reads them from SRAM:

* conv2d_s8: `stage_oc` = output channels per staged block (0: not staged). A staged layer keeps
  the int8 layout in flash (half the flash of int16 and half the bytes to copy) and, when `w16`,
  expands it to int16 while copying (SXTB16 once per weight instead of once per pixel pair), so
  the inner loop is the int16 one. When the RAM budget does not hold the whole layer, the output
  channels are staged in blocks; each further block rebuilds the im2col columns (a cost the
  model weighs) and changes the kernel's access order (passes/lower/overlap.py models it).
* add_lut_s8 -> add_lut_staged_s8: the two 0.5-2 KiB tables copied to scratch first.

The choice compares estimated cycles from board data only (flash wait states, flash read width,
flash data cache: the board's `clock.flash_latency` and its SoC's `memsys:`, the cycle
estimator's memory-system schema, docs/estimate.md; pipeline.flash_model_for): stall cycles of
the flash reads saved against the copy and the column rebuilds, within a RAM budget set by
`--optimization` (see `staging_budget`). The compiler never imports stm32ai.estimate: these few
figures are the whole model. `flash_reads` is the analytic count of bytes each kernel loads from
the weights array per inference (the loop structure of the C kernels), which `analyze` reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stm32ai.ir import Graph, Op
from stm32ai.passes.lower.dwconv3x3 import dw3x3_scratch_size
from stm32ai.passes.stripes import moved_rows

__all__ = ["FlashModel", "flash_reads", "conv_stage_bytes", "choose_staging", "unstage", "blocked",
           "modelled_cycles", "pool_limit", "saved_per_byte", "restage_whole",
           "pool_target", "staging_budget", "staging_rows", "BALANCED_SHARE", "STAGING_SHARE",
           "BALANCED_RATE", "STAGED_LUT"]

BALANCED_SHARE = 4  # balanced: weights copied to RAM take at most 1/BALANCED_SHARE of the RAM left free
# balanced: staging may grow the pool by at most 1/STAGING_SHARE of the region's room left (was
# 1/4: on disco-f746 the DTCM room after IC's pool is 23 KB, and 1/4 of it held neither a layer
# whose 18 KB the Pareto rate pays for nor a tile split plus the in-place overlap it loses)
STAGING_SHARE = 2
# balanced: a KiB of pool is worth BALANCED_RATE of the modelled cycles; the pool stops growing
# where one more KiB would save less (docs/flash_staging.md, "balanced: the Pareto choice":
# calibrated with the estimator, 1 % took IC's last 2.5 KB for +5 % of its estimated cycles)
BALANCED_RATE = 0.005
STAGED_LUT = {"add_lut_s8": "add_lut_staged_s8"}
RESIDENT_READS = 4  # constants the data cache holds, read this many times per inference: `_resident`


# Cortex-M7 cycles per modelled instruction of conv2d_s8's MAC loop and of its column rebuilds
# (`_conv_cycles`' units are the Cortex-M4 loops' instructions). Calibrated with the cycle
# estimator on disco-f746 IC (docs/flash_staging.md, "Cortex-M7: tiles of output channels"):
# the MAC loop dual-issues (0.79-0.86 cycles per unit over layers 5, 8, 9 unstaged, data
# stalls removed), the int8 -> int16 column unpack does not (1.20-1.31 per unit: the cycles one
# more block adds on layers 5, 8, 9). Cortex-M4/M33: 1 and 1, the units the model was made in.
M7_LOOP_CPI = 0.82
M7_COLUMN_CPI = 1.27
# the int8 MAC loop (SXTB16 per pair, loads that do not pair): 1.05 per unit (layer 5 staged
# int8: 2,477,966 estimated cycles for 2.36 M units, above its 2,270,205 read from flash)
M7_LOOP8_CPI = 1.05
# Cortex-M7: a D-cache line fill from the flash on AXIM costs the first access (wait states +
# 1 bus cycles, times the core/bus clock ratio) plus the AXI round trip (2 core cycles, the
# estimator's assumption, docs/estimate.md "Cortex-M7 memory system")
M7_AXI_ROUND_TRIP = 2


@dataclass(frozen=True)
class FlashModel:
    """What the staging choice knows of the board's weights memory."""

    board: str
    wait_states: int    # flash wait states at the board's clock (clock.flash_latency)
    line_bytes: int     # bytes one flash read delivers (memsys.flash.read_bytes)
    cache_bytes: int    # data cache in front of the flash (ART D-cache, or the enabled M7 L1
                        # D-cache): a layer whose re-read constants fit it pays once
    ram_room: int       # bytes the activation pool may use in its region (staged pool limit)
    miss_cycles: float = 0.0  # cycles one flash read stalls (0: the wait states; M7: the line fill)
    loop_cpi: float = 1.0     # core cycles per modelled MAC-loop / copy instruction (M7_LOOP_CPI)
    column_cpi: float = 1.0   # core cycles per modelled column-rebuild instruction (M7_COLUMN_CPI)
    loop8_cpi: float = 1.0    # ... per modelled int8 MAC-loop instruction (M7_LOOP8_CPI)
    icache_bytes: int = 0  # instruction cache in front of the flash (ART I-cache, M7 L1 I-cache,
                           # the U5's ICACHE): the stripe cost model's code re-fetch per call
    pxq: bool = False      # Cortex-M4 (AI_CONV_QUAD builds): a stripe's conv2d_s8 calls with int8
                           # weights unstaged run pixel quads (`pxq_applies`)

    def stalls(self, nbytes: float) -> float:
        """Estimated stall cycles of reading nbytes sequentially from flash."""
        return nbytes / self.line_bytes * (self.miss_cycles or self.wait_states)


# ---- analytic flash reads (bytes loaded from the weights array per inference) -----------------

def _nbytes(g: Graph, tid: int) -> int:
    t = g.tensors[tid]
    return int(t.data.nbytes) if t.data is not None else 0


def _consts(op: Op, g: Graph) -> list[int]:
    return [i for i in op.inputs if i >= 0 and g.tensors[i].is_const]


def _pairs(a: dict) -> int:
    return int(a["batches"]) * ((int(a["out_h"]) * int(a["out_w"]) + 1) // 2)


# conv2d_s8's odd last pixel on its own (ai_conv_s8.c conv_pixel: a pixel pair's column build and
# weight reads, half its MACs): its MAC loop and its requantisation as shares of a pixel pair's.
# Estimator, nucleo-l4r5zi, KWS `--optimization ram` (125 one-row 1x1/first-layer calls on 5-pixel
# rows): the odd pixel 11.5 K estimated cycles against a pair's 15.6 K, ~3 K of each the weights'
# flash stalls (docs/kernels_conv.md "The odd last pixel").
ODD_MAC_SHARE = 0.67
ODD_REQ_SHARE = 0.5


def _stall_pairs(a: dict) -> int:
    """Weight passes of an unstaged conv2d_s8 call that stall on flash: one per pixel pair, but
    a 1x1 int8 layer's odd last pixel shares the last pair's pass (conv_triple: its second read
    of a channel pair's rows hits the flash data cache) when there is such a pair and out_c is even."""
    npix = int(a["out_h"]) * int(a["out_w"])
    triple = (int(a["k_h"]) == 1 and int(a["k_w"]) == 1 and int(a["in_c"]) % 4 == 0 and not a.get("w16")
              and int(a["out_c"]) % 2 == 0 and npix % 2 == 1 and npix >= 3 and not a.get("reverse"))
    return _pairs(a) - (int(a["batches"]) if triple else 0)


def _x3_row(a: dict) -> bool:
    """A stripe's one-row conv2d_s8 call (`_member_calls`' row_call) that ai_conv2d_s8_rows runs as
    its pairs then its last three pixels in one weight pass (conv_rows_1x1_w8, conv_triple_x3)."""
    npix = int(a["out_h"]) * int(a["out_w"])
    return bool(a.get("row_call")) and (
        int(a["k_h"]) == 1 and int(a["k_w"]) == 1 and list(a["stride"])[:2] == [1, 1] and int(a["in_c"]) % 4 == 0
        and not a.get("w16") and int(a.get("stage_oc", 0)) <= 0 and not a.get("pad_copy") and a.get("rq_fold")
        and int(a["batches"]) == 1 and int(a["pad"][0]) == 0 and int(a["pad"][1]) == 0
        and int(a["out_h"]) == 1 and npix % 2 == 1 and npix >= 3 and int(a["out_c"]) % 2 == 0
        and not a.get("reverse") and int(a.get("dilation", [1, 1])[1]) == 1)


def _hwc_row5_rows(a: dict) -> int:
    """Output rows of a depthwise_conv2d_3x3_hwc_* call that dwh_row5_asm runs (rows of 5, every
    window row in the image): its two passes read the channel's constants twice."""
    if not (int(a["stride"][0]) == 1 and int(a["out_c"]) == int(a["in_c"]) and int(a["pad"][1]) == 1
            and int(a["out_w"]) == int(a["in_w"]) == 5):
        return 0
    pt, ih = int(a["pad"][0]), int(a["in_h"])
    return sum(1 for oy in range(int(a["out_h"])) if 0 <= oy - pt and oy - pt + 2 < ih)


def _pair_units(a: dict, share: float) -> float:
    """Pixel pairs of a conv2d_s8 call with the odd last pixel counted as `share` of a pair
    (conv_pixel; the staged quad layout still runs it as a pair of itself: share 1 there)."""
    npix = int(a["out_h"]) * int(a["out_w"])
    if int(a.get("stage_oc", 0)) > 0:
        share = 1.0
    return int(a["batches"]) * (npix // 2 + share * (npix & 1))


def _elements(g: Graph, op: Op) -> int:
    return int(np.prod(g.tensors[op.outputs[0]].shape, dtype=np.int64))


def flash_reads(op: Op, g: Graph, elements: int | None = None) -> int:
    """Bytes the op's kernel loads from its constant inputs per inference, from the C loops:

    * conv2d_s8: the weights and rq table once per batch and output pixel pair (a 1x1 int8 layer's
      odd last pixel reads the weights once more, `conv_triple`); once when staged;
    * depthwise_conv2d_3x3_hwc_*: per batch, output row and channel, the channel's 10 words;
    * depthwise_conv2d_3x3_*: per batch, channel and band of output rows, the channel's 10 words
      (copied to the assembly's frame on the stack: the MAC loop reads them there);
    * depthwise_conv2d_s8: per output pixel every weight and bias/multiplier/shift word;
    * add_lut_s8: two table entries per output element; add_lut_staged_s8: the tables once;
    * conv2d_wino_s8 / conv2d_wino1d_s8: the transformed weights once per register block of
      tiles, the rq table once per tile (passes/lower/conv_wino.py wino_weight_passes);
    * stripe: every member call at its band's sub-geometry (`stripe_calls`): a member's
      weights are read once per call, so once per band at least;
    * every other kernel: each constant once (one pass over the weights: FULLY_CONNECTED at
      batch 1, tables of a few hundred bytes).
    elements: output elements of an elementwise op (a stripe member's band), else its tensor's."""
    if op.kernel == "stripe":
        return sum(flash_reads(m, g, el) for m, el in stripe_calls(op, g))
    consts = _consts(op, g)
    once = sum(_nbytes(g, i) for i in consts)
    a = op.attrs
    k = op.kernel or ""
    if k == "conv2d_s8":
        if int(a.get("stage_oc", 0)) > 0:
            return once
        if _x3_row(a):  # a one-row call's last three pixels in one pass (conv_triple_x3)
            return (_pairs(a) - 1) * once
        # conv_triple reads the rq rows once for the last pair and the odd pixel
        return _pairs(a) * once - (_pairs(a) - _stall_pairs(a)) * _nbytes(g, op.inputs[2])
    if k == "conv2d_s8_1col":  # unstaged: every weight once per pixel (int16), per pixel pair (int8)
        return _pairs(_one_col_as_pairs(a)) * once
    if k.startswith("depthwise_conv2d_3x3_hwc"):  # per batch, output row and channel
        return int(a["batches"]) * int(a["out_c"]) * 40 * (int(a["out_h"]) + _hwc_row5_rows(a))
    if k.startswith("depthwise_conv2d_3x3"):
        if a.get("stage"):
            return int(a["batches"]) * once
        return int(a["batches"]) * int(a["out_c"]) * _dw3_bands(a) * 40
    if k == "depthwise_conv2d_s8":
        return int(a["batches"]) * int(a["out_h"]) * int(a["out_w"]) * once
    if k in ("conv2d_wino_s8", "conv2d_wino1d_s8"):
        from stm32ai.passes.lower.conv_wino import wino_weight_passes

        passes, tiles = wino_weight_passes(a)
        return passes * _nbytes(g, op.inputs[1]) + tiles * _nbytes(g, op.inputs[2])
    if k == "add_lut_s8" and len(consts) == 2:
        per = 2 if g.tensors[consts[0]].dtype == "int16" else 4
        return 2 * per * (_elements(g, op) if elements is None else elements)
    return once


def _dw3_bands(a: dict) -> int:
    """Bands of output rows of the 3x3 depthwise kernel (AI_DW3_HB = 8 input rows each)."""
    walk = int(a["out_w"] if a.get("transpose") else a["out_h"])
    rows = (8 - 3) // int(a["stride"][0]) + 1
    return -(-walk // rows)


# ---- conv2d_s8 candidates --------------------------------------------------------------------

def _kp(a: dict) -> int:
    if a.get("krow"):
        return int(a["k_h"]) * ((int(a["k_w"]) * int(a["in_c"]) + 3) // 4 * 4)
    return (int(a["k_h"]) * int(a["k_w"]) * int(a["in_c"]) + 3) // 4 * 4


def _block(a: dict, stage_oc: int) -> int:
    """conv_block in ai_conv_s8.c."""
    oc = int(a["out_c"])
    if stage_oc <= 0 or stage_oc >= oc:
        return oc
    return max(2, stage_oc & ~1)


def conv_stage_bytes(a: dict) -> int:
    """conv_stage_bytes in ai_conv_s8.c: the staging area at the start of the scratch."""
    s = int(a.get("stage_oc", 0))
    return _block(a, s) * (16 + _kp(a) * (2 if a.get("w16") else 1)) if s > 0 else 0


@dataclass(frozen=True)
class _Cand:
    stage_oc: int   # 0: not staged
    w16: int
    ram: int        # staging bytes
    cycles: float   # estimated cycles that depend on the choice
    reads: int      # flash bytes read


def _conv_cycles(a: dict, flash: FlashModel, w16: int, blk: int, staged: bool, wbytes: int, rq: int) -> _Cand:
    """Estimated cycles of the parts of conv2d_s8 the choice changes. Instruction counts from the
    measured loops (docs/kernels_conv.md): 12 (int16) or 16 (int8) per group of 4 K-elements per
    channel pair and pixel pair, the loop entry included; columns 10 per group of a pixel pair
    (+3 per K-element when gathered), staging copy 2 per word (+4 when expanded); each flash line
    read costs the wait states on top (no prefetch on the data side)."""
    oc, kp, pairs = int(a["out_c"]), _kp(a), _pairs(a)
    groups = kp // 4
    npix = int(a["out_h"]) * int(a["out_w"])
    # the odd last pixel on its own (conv_pixel) unless staged (the quads' layout, a pair there)
    mac_pairs = pairs if staged else int(a["batches"]) * (npix // 2 + ODD_MAC_SHARE * (npix & 1))
    loop = mac_pairs * ((oc + 1) // 2) * groups * (12 * flash.loop_cpi if w16 else 16 * flash.loop8_cpi)
    col = groups * 10 + 30 + (3 * kp if int(a["in_c"]) % 4 else 0)
    nblk = -(-oc // blk)
    rebuild = (nblk - 1) * pairs * col * flash.column_cpi
    passed = wbytes + rq
    if staged:
        words = (oc * kp + rq) // 4
        copy = (words * 2 + (oc * kp // 4) * 4 * w16) * flash.loop_cpi
        reads = passed
        return _Cand(blk if nblk > 1 else oc, w16, blk * (16 + kp * (1 + w16)),
                     loop + rebuild + copy + flash.stalls(reads), reads)
    reads = passed if passed <= flash.cache_bytes else pairs * passed
    stalls = flash.stalls(passed if passed <= flash.cache_bytes else _stall_pairs({**a, "w16": w16}) * passed)
    return _Cand(0, w16, 0, loop + stalls, reads)


def _conv_options(op: Op, g: Graph, flash: FlashModel, lost: int) -> list[tuple[int, _Cand]]:
    """Every candidate of the layer with the pool bytes it adds at its step: not staged (the
    layout `choose_conv_layouts` chose, 0 bytes), and staged int16 / int8 in each block count
    (a blocked candidate also pays the input/output overlap it loses, `lost`)."""
    a = op.attrs
    oc, kp = int(a["out_c"]), _kp(a)
    w8 = oc * kp
    rq = _nbytes(g, op.inputs[2])
    flash_w = _nbytes(g, op.inputs[1])
    out = [(0, _conv_cycles(a, flash, int(a.get("w16", 0)), oc, False, flash_w, rq))]
    # a tuning table's int8 / int16 (stm32ai/tuning.py) is the inner loop's layout, staged or not
    for w16 in {"int8": (0,), "int16": (1,)}.get(op.tune_variant or "", (1, 0)):
        per = 16 + kp * (1 + w16)
        for nblk in range(1, (oc + 1) // 2 + 1):
            blk = oc if nblk == 1 else min(oc, 2 * -(-oc // (2 * nblk)))
            if -(-oc // blk) != nblk and nblk > 1:
                continue
            out.append((blk * per + (lost if nblk > 1 else 0), _conv_cycles(a, flash, w16, blk, True, w8, rq)))
    return out


def _fastest(options: list[tuple[int, _Cand]], budget: int) -> _Cand:
    """The candidate with the fewest estimated cycles among those adding at most `budget` bytes
    (not staged always qualifies); ties: the one adding fewer bytes."""
    return min((c for need, c in options if need <= budget), key=lambda c: (c.cycles, c.ram))


# ---- the choice -------------------------------------------------------------------------------
# ---- the choice -------------------------------------------------------------------------------

def _step_live(plan, g: Graph) -> dict[int, int]:
    """Per op index: bytes of the pool alive at its step in `plan` (its scratch included)."""
    align = 8
    live: dict[int, int] = {}
    for step, op_idx in enumerate(plan.order):
        live[op_idx] = sum((b.size + align - 1) // align * align for b in plan.buffers
                           if b.in_pool and b.first <= step <= b.last)
    return live


def _lost_overlap(plan, g: Graph, op: Op) -> int:
    """Bytes the op's input and output may stop sharing when its access order changes (a
    blocked conv2d_s8 re-reads its whole input for every block)."""
    x, y = op.inputs[0], op.outputs[0]
    tb = plan.tensor_buffer
    if x in tb and y in tb and tb[x] == tb[y]:
        return min(g.tensors[x].nbytes, g.tensors[y].nbytes)
    return 0


def staging_budget(mode: str, pool: int, live: int, flash: FlashModel) -> int:
    """Upper bound of the staging bytes a layer may add at its step:
    ram: the pool's bytes already free at that step (the pool does not grow);
    balanced: those plus 1/STAGING_SHARE of the region's room left after the pool (the Pareto
    choice, `pool_target`, may stop below);
    time: whatever the activation region still holds."""
    free = max(pool - live, 0)
    room = max(flash.ram_room - live, 0)
    if mode == "ram":
        return min(free, room)
    if mode == "balanced":
        return min(free + max(flash.ram_room - pool, 0) // STAGING_SHARE, room)
    return room


def pool_limit(mode: str, pool: int, flash: FlashModel) -> int:
    """The largest pool a mode allows after staging (`staging_budget` at a step with no free
    bytes): ram the unstaged pool, balanced that plus its share of the room, time the room."""
    return pool + staging_budget(mode, pool, pool, flash) if mode != "time" else max(flash.ram_room, pool)


def pool_target(options: dict[int, list[tuple[int, _Cand]]], live: dict[int, int], pool: int, limit: int,
                rate: float = BALANCED_RATE) -> int:
    """balanced: the pool size T in [pool, limit] on the Pareto front of (estimated cycles, pool
    bytes) that minimises cycles(T) + rate * cycles(limit) * (T - pool) / 1024, where cycles(T)
    sums over the conv2d_s8 layers the fastest candidate whose bytes fit under T at the layer's
    step (options: per op index, `_conv_options`; live: bytes alive at its step). So a KiB of
    pool is taken only when it saves more than `rate` of the modelled cycles; candidate sizes
    are the steps' levels (live + a candidate's bytes), ties go to the smaller pool."""
    if limit <= pool or not options:
        return max(pool, min(limit, pool))

    def cycles(t: int) -> float:
        return sum(_fastest(o, t - live.get(i, pool)).cycles for i, o in options.items())

    ref = cycles(limit)
    levels = sorted({pool, limit} | {live.get(i, pool) + need for i, o in options.items() for need, _ in o
                                     if pool < live.get(i, pool) + need < limit})
    return min(levels, key=lambda t: (cycles(t) + rate * ref * (t - pool) / 1024, t))


def choose_staging(g: Graph, plan, flash: FlashModel | None, mode: str) -> tuple[list[tuple[Op, dict]], int]:
    """Set conv2d_s8's `stage_oc` (and the staged table kernel) on the layers where staging
    saves estimated cycles on this board within the mode's RAM budget; `plan` is the plan made
    without staging (its free bytes per step). Returns the staged ops, each with what `unstage`
    needs to put it back (empty: nothing changed), and the pool size the choice aimed at (the
    re-plan's limit)."""
    if flash is None or flash.wait_states <= 0:
        return [], plan.pool_size
    live = _step_live(plan, g)
    pool = plan.pool_size
    limit = pool_limit(mode, pool, flash)
    options = {idx: _conv_options(op, g, flash, _lost_overlap(plan, g, op))
               for idx, op in enumerate(g.ops) if op.kernel == "conv2d_s8" and not _wide(g, op)}
    target = pool_target(options, live, pool, limit) if mode == "balanced" else limit
    staged: list[tuple[Op, dict]] = []
    for idx, op in enumerate(g.ops):
        at = live.get(idx, pool)
        # the target binds the conv layers; the depthwise frames (80-160 B) and ADD tables
        # (0.5-2 KiB) keep the mode's budget and their own gain-over-copy test
        budget = staging_budget(mode, pool, at, flash)
        before = {"kernel": op.kernel, "inputs": list(op.inputs), "attrs": dict(op.attrs), "scratch": op.scratch}
        if op.kernel == "conv2d_s8" and idx in options:
            room = max(min(budget, target - at), 0)
            best = _fastest(options[idx], room)
            if best.stage_oc and best.stage_oc < int(op.attrs["out_c"]):
                # the re-plan's fallback when this tile split does not fit (pipeline._plan_staged)
                one = [(need, c) for need, c in options[idx] if c.stage_oc in (0, int(op.attrs["out_c"]))]
                alt = _fastest(one, room) if any(need <= room for need, _ in one) else None
                before["alt"] = alt if alt is not None and alt.stage_oc else None
            if not best.stage_oc and _resident(g, op, flash):
                # constants the data cache holds: staged whole within the mode's budget (`_resident`)
                whole = [c for need, c in options[idx] if c.stage_oc == int(op.attrs["out_c"])
                         and c.w16 == int(op.attrs.get("w16", 0)) and need <= budget]
                best = whole[0] if whole else best
            if best.stage_oc:
                _stage_conv(g, op, best)
                staged.append((op, before))
        elif (op.kernel or "").startswith("depthwise_conv2d_3x3") and "_hwc" not in (op.kernel or ""):
            group = 2 if "_g2" in (op.kernel or "") else 4
            wide = dw3x3_scratch_size(int(op.attrs["plane_w"]), 4) - int(op.scratch or 0)
            if group == 2 and mode != "ram" and wide <= budget:
                # the 4-channel planes where the room allows (lowering took 2 channels for the
                # RAM): half the groups, fills and set-ups; KWS -6.8 % per layer (kernels_conv.md)
                op.kernel = str(op.kernel).replace("3x3_g2_", "3x3_")
                op.scratch = int(op.scratch or 0) + wide
                budget -= wide
                group = 4
            # per channel 40 B once per band; staged: once per group (G * 40 B of scratch)
            bands, consts = _dw3_bands(op.attrs), sum(_nbytes(g, i) for i in _consts(op, g))
            gain = flash.stalls((bands - 1) * consts) if consts > flash.cache_bytes else 0
            cost = consts // 4 * 2 * flash.loop_cpi
            resident = consts <= flash.cache_bytes and bands >= RESIDENT_READS  # read once per band: _resident
            if bands > 1 and group * 40 <= budget and (gain > cost or resident):
                op.attrs["stage"] = 1
                op.scratch = int(op.scratch or 0) + group * 40
            if op.kernel != before["kernel"] or op.attrs.get("stage"):
                staged.append((op, before))
        elif op.kernel in STAGED_LUT:
            tables = sum(_nbytes(g, i) for i in _consts(op, g))
            reads = flash_reads(op, g)
            gain = flash.stalls(reads) if tables > flash.cache_bytes else 0
            cost = tables // 4 * 2 * flash.loop_cpi + flash.stalls(tables)
            resident = tables <= flash.cache_bytes and reads >= RESIDENT_READS * tables
            if tables <= budget and (gain > cost or resident):
                op.kernel = STAGED_LUT[op.kernel]
                op.scratch = tables
                staged.append((op, before))
    return staged, target


def modelled_cycles(g: Graph, flash: FlashModel) -> float:
    """The estimated cycles this module models for the graph as it is: each conv2d_s8 layer's
    MAC loop, columns, copy and stalls (`_conv_cycles` of its current choice) plus the flash
    stalls of every other kernel's constant reads (their own instructions are not modelled: a
    lower bound of the model's cycles, so a rate of it is a cautious price for RAM)."""
    total = 0.0
    for op in g.ops:
        if op.kernel == "conv2d_s8":
            total += _op_cycles(g, op.attrs, op.inputs, flash)
        else:
            total += flash.stalls(flash_reads(op, g))
    return total


def _op_cycles(g: Graph, a: dict, inputs: list[int], flash: FlashModel) -> float:
    s = int(a.get("stage_oc", 0))
    rq, w = _nbytes(g, inputs[2]), _nbytes(g, inputs[1])
    return _conv_cycles(a, flash, int(a.get("w16", 0)), _block(a, s), s > 0, w, rq).cycles


def saved_per_byte(g: Graph, op: Op, before: dict, flash: FlashModel) -> float:
    """Modelled cycles a staged conv2d_s8 saves per byte of its staging area (what the re-plan
    gives back first when the pool passes the mode's limit: the least paid-for bytes)."""
    if op.kernel != "conv2d_s8":
        return float("inf")
    saved = _op_cycles(g, before["attrs"], before["inputs"], flash) - _op_cycles(g, op.attrs, op.inputs, flash)
    return saved / max(conv_stage_bytes(op.attrs), 1)


def _resident(g: Graph, op: Op, flash: FlashModel) -> bool:
    """conv2d_s8 constants the flash data cache holds between pixel pairs (the model charges
    their stalls once) yet re-read from it RESIDENT_READS times or more. The choice stages them
    whole anyway (the layer's own inner loop) when the bytes fit the mode's budget at its step
    (`ram`: bytes already free; balanced: its share, not the Pareto target): the copy costs
    ~0.1 % of the layer (disco-f746 IC: +826 cycles on layer 0's 770 k), the reads leave a cache
    the other flash data shares (the M7's D-cache replacement is pseudo-random, TRM §5), and the
    flash bytes read per inference meet issue 26's 1.5x
    (IC's layer 0 alone read 720 KB of its 1.4 KB per inference from the cache)."""
    passed = _nbytes(g, op.inputs[1]) + _nbytes(g, op.inputs[2])
    return 0 < passed <= flash.cache_bytes and flash_reads(op, g) >= RESIDENT_READS * passed


def unstage(op: Op, before: dict) -> None:
    """Put a staged op back as it was (its constants: the original ones, still in the graph)."""
    op.kernel, op.inputs, op.attrs, op.scratch = (before["kernel"], list(before["inputs"]), dict(before["attrs"]),
                                                  before["scratch"])


def restage_whole(g: Graph, op: Op, before: dict) -> bool:
    """A blocked conv2d_s8 put back, then staged as its best single-block choice (`alt`, recorded
    by choose_staging: no access-order change, so its input and output may still overlap) when
    it had one. Returns whether it is staged."""
    alt = before.get("alt")
    if alt is None:
        unstage(op, before)
        return False
    op.attrs = dict(before["attrs"], w16=alt.w16, stage_oc=alt.stage_oc)  # inputs: the int8 layout already
    op.scratch = int(before["scratch"] or 0) + conv_stage_bytes(op.attrs)
    return True


def blocked(op: Op) -> bool:
    """A conv2d_s8 staged in several blocks (its input and output can no longer overlap)."""
    s = int(op.attrs.get("stage_oc", 0)) if op.kernel == "conv2d_s8" else 0
    return s > 0 and _block(op.attrs, s) < int(op.attrs["out_c"])


def _wide(g: Graph, op: Op) -> bool:
    """int16 weights beyond int8 (legacy uint8 filters re-centred, passes/lower/u8.py): staging
    keeps the int8 layout in flash, which cannot hold them, so such a layer is never staged."""
    t = g.tensors[op.inputs[1]]
    return t.dtype == "int16" and t.data is not None and bool(np.any(np.abs(np.asarray(t.data, np.int32)) > 127))


def _stage_conv(g: Graph, op: Op, c: _Cand) -> None:
    """Stage the layer: int8 layout in flash (undoing an int16 one), w16 = the staged copy's."""
    t = g.tensors[op.inputs[1]]
    assert t.data is not None
    if t.dtype == "int16":  # back to the int8 layout: each group {w0,w2,w1,w3} -> {w0..w3}
        w8 = np.asarray(t.data, np.int16).reshape(-1, 4)[:, [0, 2, 1, 3]].astype(np.int8).reshape(-1)
        op.inputs[1] = g.add_const(t.name.removesuffix("_s16") + "_s8", w8)
    op.attrs["w16"] = c.w16
    op.attrs["stage_oc"] = c.stage_oc
    op.scratch = int(op.scratch or 0) + conv_stage_bytes(op.attrs)


def staging_rows(g: Graph) -> list[dict[str, object]]:
    """Per conv2d_s8 / staged table op, for analyze: staged or not, block, staging bytes, flash
    bytes read per inference."""
    rows: list[dict[str, object]] = []
    for op in g.ops:
        if op.kernel == "stripe":  # members are never staged: their reads summed over their calls
            calls = _member_calls(op)
            for j, (m, _) in enumerate(stripe_calls(op, g, full=True)):
                if not _consts(m, g):
                    continue
                mine = [(c, el) for k, c, el in calls if k == j]
                rows.append({"op": m.index, "kernel": m.kernel, "staged": False, "block": 0, "blocks": 0,
                             "staging_bytes": 0, "inner": "", "stripe_calls": len(mine),
                             "flash_reads": sum(flash_reads(c, g, el) for c, el in mine)})
        elif op.kernel == "conv2d_s8":
            s = int(op.attrs.get("stage_oc", 0))
            rows.append({"op": op.index, "kernel": op.kernel, "staged": s > 0,
                         "block": _block(op.attrs, s) if s else 0,
                         "blocks": -(-int(op.attrs["out_c"]) // _block(op.attrs, s)) if s else 0,
                         "staging_bytes": conv_stage_bytes(op.attrs),
                         "inner": "int16" if op.attrs.get("w16") else "int8",
                         "flash_reads": flash_reads(op, g)})
        elif (op.kernel or "").startswith("depthwise_conv2d_3x3"):
            st = bool(op.attrs.get("stage"))
            rows.append({"op": op.index, "kernel": op.kernel, "staged": st, "block": 0, "blocks": 0,
                         "staging_bytes": (2 if "_g2" in op.kernel else 4) * 40 if st else 0, "inner": "",
                         "flash_reads": flash_reads(op, g)})
        elif op.kernel in STAGED_LUT or op.kernel in STAGED_LUT.values():
            staged = op.kernel in STAGED_LUT.values()
            rows.append({"op": op.index, "kernel": op.kernel, "staged": staged, "block": 0, "blocks": 0,
                         "staging_bytes": int(op.scratch or 0) if staged else 0, "inner": "",
                         "flash_reads": flash_reads(op, g)})
    return rows


# ---- stripes (passes/stripes.py): what running members band by band costs -----------------------
# The cost model of the stripe choice (docs/stripes.md "What a band costs"): modelled cycles of
# the whole graph, in which what a band height changes is explicit (conv2d_s8's pixel pairs per
# call: an odd band width wastes half a pair; weights re-read per call; the 3x3 depthwise's
# per-channel set-up per band; the call itself; the ring drops' memmove). Constants calibrated
# with the estimator (`analyze --estimate`, nucleo-l4r5zi, cortex-m4 + flash 5 WS + ART model):
# the layer-by-layer KWS and IC layers, and the KWS stripe at bands 1 and 2 (docs/stripes.md).
CONV_REQ_INSTR = 49        # conv2d_s8: per output channel and pixel pair, beyond the MAC loop
                           # (requantisation, stores: KWS 1x1 layers, 727,409 instructions)
CPI = 1.14                 # estimated cycles per modelled instruction, stalls apart (same layers)
DW3_BAND_CYCLES = 270.0    # per channel and row band of a 3x3 depthwise: frame set-up, row loops
# the 2-channel (_g2_) kernels' per channel and band: KWS's stripe at band 1 with its four
# depthwise members 2-channel, 10,950,787 est. cycles, 4-channel 9,761,287, over 6,400 channel-bands
# (one-row bands; a layer-by-layer _g2_ layer, balanced's transposed walk, gets the same figure
# here but only the stripe options compare it, all with that layer alike)
DW3_G2_BAND_CYCLES = DW3_BAND_CYCLES + 186.0
MAC_CYCLES = 4.2           # per MAC of the kernels whose loops are not modelled (depthwise, pools...)
# depthwise_conv2d_3x3_hwc_* (stripe members, stripes.py `_narrow_scratch`): per batch, output row
# and channel a set-up (constants, first pair, row end) and each output pair of the row (stride 1:
# then the odd width's last output alone; stride 2: every pair slot, out_w / 2 rounded up); rows the
# Armv7E-M assembly does not take (the window's middle row outside the image, multiplier != 1,
# stride 1 with pad_l != 1 or out_w != in_w, stride 2 other than SAME: pad_l != in_w & 1 or
# out_w != (in_w + 1) / 2) run gcc's loop, HWC_C_FACTOR times the stride-1 figure.
# Calibrated on single layers of the kernel, nucleo-l4r5zi (session 35, docs/kernels_conv.md "3x3
# depthwise on HWC": stride 1 widths 5, 6, 12, 24, 48 -> 276, 300, 510, 932, 1,783 est. cycles per
# channel and row; stride 2 widths 12, 24, 48 -> 355, 626, 1,168; gcc's stride-2 loop at width 24:
# 1,562)
HWC_ROW_CYCLES = 88.0
HWC_PAIR_CYCLES = 71.0
HWC_ODD_CYCLES = 46.0
HWC_S2_ROW_CYCLES = 84.0
HWC_S2_PAIR_CYCLES = 90.0
HWC_C_FACTOR = 3.0
# rows of 5 (stride 1, pad_l 1, out_w == in_w == 5) whose three window rows lie in the image:
# dwh_row5_asm (constants read in place, two passes, no frame copy), per channel and row.
# Estimator, nucleo-l4r5zi, KWS `--optimization ram` (session 37): dwh_row_asm 1,779,776 ->
# 1,366,904 est. cycles over 6,400 channel-rows, 512 of them (the first and last rows) still the
# pair loop's 278: (1,366,904 - 512 * 278) / 5,888 = 208
HWC_ROW5_CYCLES = 208.0
CALL_INSTR = 150           # per kernel call: the step loop, the params copy, the kernel's prologue
CALL_CODE_BYTES = 5120     # per kernel call: the code the calls alternate between; what the
                           # board's I-cache does not hold is re-fetched from flash at every call
MEMMOVE_CYCLES_PER_BYTE = 1.0  # a ring drop moves the live rows to the ring's start (word copy)
ZERO_WAIT = FlashModel("", 0, 8, 0, 0)  # weights read at no cost (no board, RAM, emulated)


def _member_op(op: Op, m: dict, patch: dict[str, int]) -> Op:
    """A stripe member as an Op of its own (its constants: the stripe op's inputs), with the
    params `patch`ed (a band's sub-geometry)."""
    ins = [op.inputs[r["in"]] if r is not None and "in" in r else -1 for r in m["inputs"]]
    return Op(str(m["source_op"]), ins, [], kernel=str(m["kernel"]), attrs={**m["params"], **patch},
              index=int(m["source_index"]), macc=int(m.get("macc", 0)))


def stripe_calls(op: Op, g: Graph, full: bool = False) -> list[tuple[Op, int | None]]:
    """Each kernel call a stripe op makes, as (member op at the call's sub-geometry, output
    elements of an elementwise member), from its step table; full: each member once at its
    whole geometry instead (the layer-by-layer calls it replaced)."""
    st = op.attrs["stripe"]
    out: list[tuple[Op, int | None]] = []
    if full:
        for j, m in enumerate(st["members"]):
            rows = sum(int(s[1]) for s in st["table"] if s[0] == j)
            out.append((_member_op(op, m, {}), None if m["kind"] == "window" else rows * int(m["row_bytes"])))
        return out
    return [(m, el) for _, m, el in _member_calls(op)]


def _member_calls(op: Op) -> list[tuple[int, Op, int | None]]:
    """`stripe_calls` with each call's member index."""
    st = op.attrs["stripe"]
    out: list[tuple[int, Op, int | None]] = []
    for step in st["table"]:
        if step[0] < 0 or step[0] >= len(st["members"]):  # a drop, or a row-source fetch (--input-rows)
            continue
        m = st["members"][step[0]]
        if m["kind"] == "window" and "wide" in m and int(step[6]) >= 1:  # its alternative (stripe_widen.py `widen`)
            w = m["wide"]  # region e[6] - 1's params (several regions: `region_params`)
            wp = w["region_params"][int(step[6]) - 1] if "region_params" in w else w.get("params", m["params"])
            m = {**m, "kernel": w["kernel"], "params": wp}
        if m["kind"] == "window":
            pad = "pad_h" if "pad_h" in m["params"] else "pad"
            pv = [int(step[2]), *list(m["params"][pad])[1:]] if pad == "pad" else int(step[2])
            out.append((int(step[0]), _member_op(op, m, {"out_h": int(step[1]), "in_h": int(step[3]), pad: pv,
                                                         "row_call": 1}), None))
        else:
            out.append((int(step[0]), _member_op(op, m, {}), int(step[1]) * int(m["row_bytes"])))
    return out


def _col_cycles(a: dict) -> int:
    """conv2d_s8's column build per output pixel pair (`_conv_cycles`' rebuild figure)."""
    kp = _kp(a)
    return (kp // 4) * 10 + 30 + (3 * kp if int(a["in_c"]) % 4 else 0)


def pxq_applies(a: dict) -> bool:
    """A stripe call of conv2d_s8 that runs pixel quads on a Cortex-M4 (ai_conv_s8.c conv_pxq, the
    `pxq` test of conv2d_s8_run): int8 weights read in place, in_c % 4 == 0 (or a krow 1x1 layer
    with every window inside the image), any out_c (an odd last channel: pxq_last_channel), any Kp
    (a multiple of 16, or the leftover groups' loop first: conv_pxq_*t), whole quads
    (out_h * out_w % 4 == 0), raster order. One pass over the weights per 4 pixels;
    the same MAC-loop cycles as two int8 pixel pairs (40 per group of 4 K-elements,
    channel pair and 4 pixels, AI_PXQ_GROUP against 2 x AI_W8_GROUP)."""
    npix = int(a["out_h"]) * int(a["out_w"])
    base = (not int(a.get("w16", 0)) and int(a.get("stage_oc", 0)) <= 0 and _pxq_cols(a)
            and _kp(a) >= 4 and npix > 0 and not a.get("reverse"))
    if _rows_1x1(a):
        # conv_rows_1x1_w8 (pw37): its first npix & ~3 pixels as quads when the call's pixels are
        # contiguous runs (one row, or whole rows); a one-row odd width keeps conv_triple_x3
        return (base and npix >= 4 and not _x3_row(a) and int(a.get("dilation", [1, 1])[1]) == 1
                and (int(a["out_h"]) == 1 or int(a["out_w"]) == int(a["in_w"])))
    return base and npix % 4 == 0


def _pxq_cols(a: dict) -> bool:
    """conv_pxq can build the call's int8 columns: in_c % 4 == 0, or krow 1x1 with no window
    outside the image (conv2d_s8_run: `!conv_gathers(p) || (krow && 1x1 && !conv_pads(p))`)."""
    if int(a["in_c"]) % 4 == 0:
        return True
    sy, sx = list(a["stride"])[:2]
    return (bool(int(a.get("krow", 0))) and int(a["k_h"]) == 1 and int(a["k_w"]) == 1
            and int(a["pad"][0]) == 0 and int(a["pad"][1]) == 0
            and (int(a["out_h"]) - 1) * int(sy) < int(a["in_h"]) and (int(a["out_w"]) - 1) * int(sx) < int(a["in_w"]))


def _rows_1x1(a: dict) -> bool:
    """A 1x1 stride-1 call that ai_conv2d_s8_rows sends to conv_rows_1x1_w8 (its entry test)."""
    return (int(a["k_h"]) == 1 and int(a["k_w"]) == 1 and list(a["stride"])[:2] == [1, 1]
            and int(a["in_c"]) % 4 == 0 and not int(a.get("w16", 0)) and int(a.get("stage_oc", 0)) <= 0
            and not a.get("pad_copy") and bool(a.get("rq_fold")) and int(a["batches"]) == 1
            and int(a["pad"][1]) == 0 and int(a["pad"][0]) == 0 and int(a["out_h"]) <= int(a["in_h"])
            and int(a["out_w"]) <= int(a["in_w"]))


def pxq_passes(a: dict) -> int:
    """Passes over a pxq_applies call's weights: one per quad, and conv_rows_1x1_w8's remaining
    npix % 4 pixels as pairs (an odd last pixel: one pass of its own)."""
    npix = int(a["out_h"]) * int(a["out_w"])
    return int(a["batches"]) * (npix // 4 + (npix % 4 + 1) // 2)


def _call_cycles(mop: Op, g: Graph, flash: FlashModel, elements: int | None, rows: bool = False) -> float:
    """Modelled cycles of one kernel call that depend on its geometry: conv2d_s8's MAC loop,
    columns, requantisation and weight stalls (its staging choice included); the 3x3
    depthwise's per-channel band set-up and frame reads; every other kernel's constant reads
    (stalls). Constants that fit the flash data cache stall once per call (a stripe's members
    evict each other between calls). MAC_CYCLES and call_cycles are added by the caller. rows: a
    stripe's call (its conv2d_s8 may run pixel quads, `pxq_applies`, where `flash.pxq`)."""
    a = mop.attrs
    extra = 0.0
    if mop.kernel == "conv2d_s8_1col":
        a = _one_col_as_pairs(a)
        if not int(a.get("w16", 0)):  # int8 columns: the int8 pair loop's passes, ONE_COL8_INSTR more per group
            extra = _pairs(a) * ((int(a["out_c"]) + 1) // 2) * (_kp(a) // 4) * ONE_COL8_INSTR
            a = {**a, "reverse": 1}  # (no conv_triple: an odd last pixel is a pair of itself)
    if mop.kernel in ("conv2d_s8", "conv2d_s8_1col"):
        w, rq = _nbytes(g, mop.inputs[1]), _nbytes(g, mop.inputs[2])
        s = int(a.get("stage_oc", 0))
        c = _conv_cycles(a, flash, int(a.get("w16", 0)), _block(a, s), s > 0, w, rq)
        reads = c.reads if s > 0 or w + rq <= flash.cache_bytes else _stall_pairs(a) * (w + rq)
        instr = (c.cycles - flash.stalls(reads) + _pairs(a) * _col_cycles(a)
                 + _pair_units(a, ODD_REQ_SHARE) * CONV_REQ_INSTR * int(a["out_c"]) + extra)
        if rows and flash.pxq and mop.kernel == "conv2d_s8" and pxq_applies(a) and reads > w + rq:
            reads = pxq_passes(a) * (w + rq)
        return CPI * instr + flash.stalls(reads)
    reads = flash_reads(mop, g, elements)
    consts = sum(_nbytes(g, i) for i in _consts(mop, g))
    stalls = flash.stalls(consts if consts <= flash.cache_bytes else reads)
    if (mop.kernel or "").startswith("depthwise_conv2d_3x3_hwc"):
        return hwc_cycles(a) + stalls
    if (mop.kernel or "").startswith("depthwise_conv2d_3x3"):
        per = DW3_G2_BAND_CYCLES if "_g2" in (mop.kernel or "") else DW3_BAND_CYCLES
        return int(a["batches"]) * int(a["out_c"]) * _dw3_bands(a) * per + stalls
    return stalls


def hwc_cycles(a: dict) -> float:
    """Modelled cycles of one depthwise_conv2d_3x3_hwc_* call (its loops; stalls apart)."""
    s, pt, pl = int(a["stride"][0]), int(a["pad"][0]), int(a["pad"][1])
    oc, ow, iw = int(a["out_c"]), int(a["out_w"]), int(a["in_w"])
    mult1 = oc == int(a["in_c"])
    row_c = HWC_C_FACTOR * (HWC_ROW_CYCLES + HWC_PAIR_CYCLES * (ow // 2) + HWC_ODD_CYCLES * (ow & 1))
    if s == 1 and mult1 and pl == 1 and ow == iw and iw >= 2:
        row = HWC_ROW_CYCLES + HWC_PAIR_CYCLES * (ow // 2) + HWC_ODD_CYCLES * (ow & 1)
    elif s == 2 and mult1 and pl == iw % 2 and ow == (iw + 1) // 2 and iw >= 2:
        row = HWC_S2_ROW_CYCLES + HWC_S2_PAIR_CYCLES * ((ow + 1) // 2)
    else:
        row = row_c
    row5 = HWC_ROW5_CYCLES if s == 1 and mult1 and pl == 1 and ow == iw == 5 else row
    total = 0.0
    for oy in range(int(a["out_h"])):
        iy0 = oy * s - pt
        fast = 0 <= iy0 + 1 < int(a["in_h"])  # the window's middle row in the image
        inside = 0 <= iy0 and iy0 + 2 < int(a["in_h"])  # all three window rows (dwh_row5_asm)
        total += oc * ((row5 if inside else row) if fast else row_c)
    return int(a["batches"]) * total


def _mac_cycles(op: Op) -> float:
    if op.kernel in ("conv2d_s8", "conv2d_s8_1col") or (op.kernel or "").startswith("depthwise_conv2d_3x3_hwc"):
        return 0.0  # priced per call (`_call_cycles`)
    return MAC_CYCLES * op.macc


# conv2d_s8_1col with int8 weights (ai_conv_s8.c conv_1col8_channels): a pixel pair per pass over
# the weights, its two int8 columns sign-extended in the loop (AI_W8_X8_GROUP on Armv7E-M): 20
# instructions per group of 4 K-elements, channel pair and pixel pair against the int16-column
# pair loop's 16
ONE_COL8_INSTR = 4


def _one_col_as_pairs(a: dict) -> dict:
    """conv2d_s8_1col (a stripe member, passes/stripes.py `_narrow_scratch`) priced as conv2d_s8:
    int16 weights with each pixel costing a pixel pair (twice the columns, weight reads and
    MAC-loop passes, each a channel pair against one column): out_w doubled; int8 weights as its
    pixel pairs (one pass over the weights per pair; `_call_cycles` adds ONE_COL8_INSTR). A coarse
    bound of the model; the estimator's figures are in docs/kernels_conv.md "One column"."""
    return a if not int(a.get("w16", 0)) else {**a, "out_w": 2 * int(a["out_w"])}


def call_cycles(flash: FlashModel) -> float:
    """Modelled cycles of one kernel call: CALL_INSTR, and the part of CALL_CODE_BYTES the
    I-cache does not hold re-fetched at the flash's wait states."""
    return CPI * CALL_INSTR + flash.stalls(max(CALL_CODE_BYTES - flash.icache_bytes, 0))


def stripe_cycles(op: Op, g: Graph, flash: FlashModel | None) -> float:
    """Modelled cycles of a stripe op: every call at its band's geometry, call_cycles per
    call, the members' MACs once, and the ring drops' memmove."""
    fm = flash or ZERO_WAIT
    calls = stripe_calls(op, g)
    total = sum(_call_cycles(m, g, fm, el, rows=True) + call_cycles(fm) for m, el in calls)
    total += sum(_mac_cycles(m) for m, _ in stripe_calls(op, g, full=True))
    st = op.attrs["stripe"]
    moved = sum(moved_rows(s) * int(st["rings"][-1 - s[0]]["row_bytes"]) for s in st["table"] if s[0] < 0)
    return total + moved * MEMMOVE_CYCLES_PER_BYTE


def graph_cycles(g: Graph, flash: FlashModel | None) -> float:
    """Modelled cycles of the graph as it is (staging and stripes included), the stripe choice's
    measure (pipeline: `--optimization ram` compares its alternatives with it). A model, not the
    estimator: docs/stripes.md compares the two on the MLPerf models."""
    fm = flash or ZERO_WAIT
    total = 0.0
    for op in g.ops:
        if op.kernel == "stripe":
            total += stripe_cycles(op, g, fm)
        elif op.kernel and op.kernel != "__nop":
            total += _call_cycles(op, g, fm, None) + _mac_cycles(op) + call_cycles(fm)
    return total
