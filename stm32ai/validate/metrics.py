"""Per-output comparison metrics, named as X-CUBE-AI's ``validate`` names them.

``c`` is the C model's output, ``r`` the reference's. Float metrics are computed on dequantised
values when quantisation parameters are given (so they read in the model's real units, as
X-CUBE-AI reports them); integer outputs also get the raw worst-case error in LSB, which is what
the bit-exactness bar of docs/references.md is judged on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["FLOAT_RTOL", "OutputMetrics", "compute_metrics", "dequantize", "passes"]

# docs/references.md, the pass rule: float32 outputs within 1e-5 relative error of the reference.
FLOAT_RTOL = 1e-5
# Floor of the relative-error denominator, so an all-zero reference does not divide by zero.
_TINY = float(np.finfo(np.float32).tiny)


@dataclass
class OutputMetrics:
    """Metrics of one output tensor (over all samples of the batch)."""

    dtype: str                  # raw dtype of the compared arrays
    acc: float | None           # top-1 agreement (classification-like outputs only)
    rmse: float                 # sqrt(mean((c - r)^2))
    mae: float                  # mean |c - r|
    l2r: float                  # ||c - r|| / ||r||
    cos: float                  # cosine similarity of c and r
    max_abs_err: float          # max |c - r|
    max_rel_err: float          # max |c - r| / max(max |r|, tiny): the float32 bar
    max_lsb: int | None = None  # max |c - r| in raw integer units (integer outputs only)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def dequantize(q: ArrayLike, scale: ArrayLike | None = None, zero_point: ArrayLike | None = None,
               axis: int | None = None) -> np.ndarray:
    """``(q - zero_point) * scale`` in float64; per-axis when ``scale`` has several entries.

    ``axis`` indexes the given array (negative counts from the end) and is only needed for
    per-axis parameters.
    """
    x = np.asarray(q, dtype=np.float64)
    if scale is None:
        return x
    s = np.atleast_1d(np.asarray(scale, np.float64))
    z = np.atleast_1d(np.asarray(0 if zero_point is None else zero_point, np.float64))
    if s.size > 1 or z.size > 1:
        if axis is None:
            raise ValueError("per-axis quantisation needs the axis")
        shape = [1] * x.ndim
        shape[axis] = -1
        s = s.reshape(shape) if s.size > 1 else s
        z = z.reshape(shape) if z.size > 1 else z
    return (x - z) * s


def _top1_agreement(c: np.ndarray, r: np.ndarray) -> float | None:
    # Classification-like: a vector of scores or a batch of them (rank <= 2, > 1 class).
    if c.ndim == 0 or c.ndim > 2 or c.shape[-1] <= 1:
        return None
    c2 = c.reshape(-1, c.shape[-1])
    r2 = r.reshape(-1, r.shape[-1])
    return float(np.mean(np.argmax(c2, axis=1) == np.argmax(r2, axis=1)))


def compute_metrics(c: ArrayLike, r: ArrayLike, scale: ArrayLike | None = None,
                    zero_point: ArrayLike | None = None, axis: int | None = None) -> OutputMetrics:
    """Compare the C output ``c`` with the reference ``r`` (same shape and dtype)."""
    c_raw, r_raw = np.asarray(c), np.asarray(r)
    if c_raw.shape != r_raw.shape:
        raise ValueError(f"shape mismatch: C {list(c_raw.shape)} vs reference {list(r_raw.shape)}")
    is_int = c_raw.dtype.kind in "iu" and r_raw.dtype.kind in "iu"
    max_lsb = None
    if is_int:
        lsb = np.abs(c_raw.astype(np.int64) - r_raw.astype(np.int64))
        max_lsb = int(lsb.max()) if lsb.size else 0
    cf = dequantize(c_raw, scale, zero_point, axis)
    rf = dequantize(r_raw, scale, zero_point, axis)
    d = cf - rf
    if d.size == 0:
        return OutputMetrics(str(r_raw.dtype), None, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, max_lsb)
    # NaN in either side must fail, not vanish inside max(): compare as inf.
    d = np.where(np.isnan(d), np.inf, d)
    norm_d = float(np.sqrt(np.sum(d * d)))
    norm_r = float(np.sqrt(np.sum(rf * rf)))
    norm_c = float(np.sqrt(np.sum(cf * cf)))
    if norm_r == 0.0:
        l2r = 0.0 if norm_d == 0.0 else float("inf")
    else:
        l2r = norm_d / norm_r
    if norm_c == 0.0 and norm_r == 0.0:
        cos = 1.0  # both all-zero: identical directions for our purposes
    elif norm_c == 0.0 or norm_r == 0.0:
        cos = 0.0
    else:
        cos = float(np.sum(cf * rf) / (norm_c * norm_r))
    max_abs = float(np.max(np.abs(d)))
    max_ref = float(np.max(np.abs(rf))) if np.all(np.isfinite(rf)) else float("inf")
    return OutputMetrics(
        dtype=str(r_raw.dtype),
        acc=_top1_agreement(cf, rf),
        rmse=float(np.sqrt(np.mean(d * d))),
        mae=float(np.mean(np.abs(d))),
        l2r=l2r,
        cos=cos,
        max_abs_err=max_abs,
        max_rel_err=max_abs / max(max_ref, _TINY),
        max_lsb=max_lsb,
    )


def passes(metrics: OutputMetrics, dtype: Any | None = None, allowance_lsb: int = 0,
           rtol: float = FLOAT_RTOL) -> bool:
    """The pass rule of docs/references.md for one output.

    Integer outputs must be bit-exact (``max_lsb == 0``) unless an allowance in LSB is given
    (a documented table approximation); float outputs need max relative error <= ``rtol``.
    ``dtype`` defaults to the one the metrics were computed on.
    """
    dt = np.dtype(dtype if dtype is not None else metrics.dtype)
    if dt.kind in "iu":
        if metrics.max_lsb is None:
            raise ValueError("integer output compared without raw values (max_lsb missing)")
        return metrics.max_lsb <= allowance_lsb
    if dt.kind == "f":
        return bool(metrics.max_rel_err <= rtol)
    return metrics.max_abs_err == 0.0  # bool and anything else: exact
