"""What `stm32ai supported-ops` lists: every op type the compiler accepts, and how.

Read from the tables the compiler itself runs (no second list): the lowering registry (a C
kernel), fold_constants' folders (evaluated at generate time), canonicalize's aliases
(SQUEEZE/EXPAND_DIMS -> a zero-copy RESHAPE), the dilated-convolution fusion and the legacy
uint8 shift (legacy_u8). An op type in several tables gets each way on its line, the kernel's
constraints first.
"""

from __future__ import annotations

from stm32ai.passes.canonicalize import aliased_op_types
from stm32ai.passes.dilated_conv import fused_op_types
from stm32ai.passes.fold_constants import folded_op_types
from stm32ai.passes.legacy_u8 import uint8_op_types
from stm32ai.passes.lower import registry

__all__ = ["supported_ops"]


def supported_ops() -> dict[str, str]:
    """{op type: one line of constraints}, sorted by op type."""
    kernels = registry()
    lines: dict[str, list[str]] = {k: [v.constraints] for k, v in kernels.items()}
    for table in (aliased_op_types(), fused_op_types(), folded_op_types()):
        for k, how in table.items():
            lines.setdefault(k, []).append(how)
    for k, how in uint8_op_types().items():  # a kernel's extra input type: only where one exists
        if k in kernels and "legacy uint8" not in kernels[k].constraints:
            lines[k].append(how)
    # without a kernel, an instance none of these ways handles is refused
    only = {k: "(no kernel) " for k in lines if k not in kernels}
    return {k: only.get(k, "") + "; ".join(v) for k, v in sorted(lines.items())}
