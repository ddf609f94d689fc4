"""Per-task estimators of SPEC §5: pass@k, pass^k (unbiased and plug-in).

All functions accept scalars or numpy arrays of attempt counts ``n`` (attempts
with status done) and pass counts ``c``. Binomial-coefficient ratios are
evaluated as running products, never as factorials, so n in the thousands is
exact to float precision and never overflows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias, overload

import numpy as np
from numpy.typing import ArrayLike

# Scalar counts give a float; arrays (one entry per task) give an array of the same shape.
Counts: TypeAlias = np.ndarray | Sequence[int]


def _as_counts(n: ArrayLike, c: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    n_arr = np.asarray(n, dtype=np.int64)
    c_arr = np.asarray(c, dtype=np.int64)
    if np.any(n_arr < 0) or np.any(c_arr < 0):
        raise ValueError("attempt and pass counts must be >= 0")
    if np.any(c_arr > n_arr):
        raise ValueError("pass count c exceeds attempt count n")
    return n_arr, c_arr


def _check_k(k: int) -> int:
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _ratio_comb(top: np.ndarray, n: np.ndarray, k: int) -> np.ndarray:
    """C(top, k) / C(n, k) = prod_{i<k} (top - i) / (n - i), 0 when top < k."""
    top_f = top.astype(np.float64)[..., None]
    n_f = n.astype(np.float64)[..., None]
    steps = np.arange(k, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        factors = (top_f - steps) / (n_f - steps)
    factors = np.where(factors > 0, factors, 0.0)
    return np.prod(factors, axis=-1)


def _where_defined(n_arr: np.ndarray, k: int, estimate: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``estimate(mask)`` on the tasks with n >= k, NaN elsewhere.

    The running products cost k steps per task, so only tasks that have k attempts pay them: a
    k far beyond every task's attempts (a stored N of 100,000 with two attempts run) costs nothing.
    """
    flat = np.atleast_1d(n_arr)
    value = np.full(flat.shape, np.nan)
    defined = flat >= k
    if defined.any():
        value[defined] = estimate(defined)
    return value.reshape(n_arr.shape)


@overload
def pass_at_k(n: int, c: int, k: int) -> float: ...


@overload
def pass_at_k(n: Counts, c: Counts, k: int) -> np.ndarray: ...


def pass_at_k(n: ArrayLike, c: ArrayLike, k: int) -> float | np.ndarray:
    """Unbiased pass@k per task: 1 - C(n-c, k)/C(n, k); NaN where n < k."""
    k = _check_k(k)
    n_arr, c_arr = _as_counts(n, c)
    n1, c1 = np.atleast_1d(n_arr), np.atleast_1d(c_arr)
    value = _where_defined(n_arr, k, lambda m: 1.0 - _ratio_comb(n1[m] - c1[m], n1[m], k))
    return float(value) if value.ndim == 0 else value


@overload
def pass_hat_k(n: int, c: int, k: int) -> float: ...


@overload
def pass_hat_k(n: Counts, c: Counts, k: int) -> np.ndarray: ...


def pass_hat_k(n: ArrayLike, c: ArrayLike, k: int) -> float | np.ndarray:
    """Unbiased pass^k per task (tau-bench): C(c, k)/C(n, k); NaN where n < k."""
    k = _check_k(k)
    n_arr, c_arr = _as_counts(n, c)
    n1, c1 = np.atleast_1d(n_arr), np.atleast_1d(c_arr)
    value = _where_defined(n_arr, k, lambda m: _ratio_comb(c1[m], n1[m], k))
    return float(value) if value.ndim == 0 else value


@overload
def pass_hat_k_plugin(n: int, c: int, k: int) -> float: ...


@overload
def pass_hat_k_plugin(n: Counts, c: Counts, k: int) -> np.ndarray: ...


def pass_hat_k_plugin(n: ArrayLike, c: ArrayLike, k: int) -> float | np.ndarray:
    """Plug-in pass^k per task, (c/n)^k, as ThinkingBox's ``tb agg`` prints it; NaN where n == 0."""
    k = _check_k(k)
    n_arr, c_arr = _as_counts(n, c)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(n_arr > 0, (c_arr / np.where(n_arr > 0, n_arr, 1)) ** k, np.nan)
    return float(value) if value.ndim == 0 else value


@overload
def success_rate(n: int, c: int) -> float: ...


@overload
def success_rate(n: Counts, c: Counts) -> np.ndarray: ...


def success_rate(n: ArrayLike, c: ArrayLike) -> float | np.ndarray:
    """Per-task c/n; NaN where n == 0 (no usable attempt)."""
    n_arr, c_arr = _as_counts(n, c)
    value = np.where(n_arr > 0, c_arr / np.where(n_arr > 0, n_arr, 1), np.nan)
    return float(value) if value.ndim == 0 else value
