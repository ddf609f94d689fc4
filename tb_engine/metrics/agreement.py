"""Judge calibration: a rubric judge's yes/no answers against human labels of the same answers.

A pair is (judge answer, human answer); "yes" is the positive class and the human label is the
reference, so TPR = judge yes among human yes and TNR = judge no among human no. Cohen's κ
compares the observed agreement with the agreement two raters with these marginals would reach by
chance. Its 95% interval is a percentile bootstrap over the labelled answers (fixed seed, so a
page shows the same interval on every load); replicates whose κ is undefined (one class only) are
left out of the interval.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tb_engine.metrics.bootstrap import (
    DEFAULT_LEVEL,
    DEFAULT_REPLICATES,
    percentile_interval,
    resample_counts,
)

# Below this many human labels a judge's κ is shown with a warning instead of as a calibration.
MIN_LABELS = 30


@dataclass(frozen=True)
class Confusion:
    """Counts of (judge, human) answers: tp = both yes, fp = judge yes / human no, fn = judge no / human yes, tn = both no."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def agreements(self) -> int:
        return self.tp + self.tn

    @property
    def agreement(self) -> float | None:
        return self.agreements / self.n if self.n else None

    @property
    def tpr(self) -> float | None:
        """Judge yes among human yes (sensitivity); None without a human yes."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def tnr(self) -> float | None:
        """Judge no among human no (specificity); None without a human no."""
        return self.tn / (self.tn + self.fp) if self.tn + self.fp else None

    @property
    def kappa(self) -> float | None:
        """Cohen's κ; None when chance agreement is 1 (both raters used one and the same class only)."""
        value = _kappa(np.array([[self.tp, self.fp, self.fn, self.tn]], dtype=np.float64))[0]
        return None if np.isnan(value) else float(value)


def confusion(pairs: Iterable[tuple[bool, bool]]) -> Confusion:
    """The confusion matrix of (judge answer, human answer) pairs."""
    counts = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for judge, human in pairs:
        counts[(bool(judge), bool(human))] += 1
    return Confusion(
        tp=counts[(True, True)], fp=counts[(True, False)], fn=counts[(False, True)], tn=counts[(False, False)]
    )


def _kappa(cells: np.ndarray) -> np.ndarray:
    """κ per row of (tp, fp, fn, tn) counts; NaN where undefined."""
    tp, fp, fn, tn = cells.T
    n = tp + fp + fn + tn
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = (tp + tn) / n
        judge_yes, human_yes = (tp + fp) / n, (tp + fn) / n
        chance = judge_yes * human_yes + (1 - judge_yes) * (1 - human_yes)
        kappa = (observed - chance) / (1 - chance)
    return np.where((n > 0) & (chance < 1), kappa, np.nan)


@dataclass(frozen=True)
class Calibration:
    """A judge's agreement with human labels: the confusion matrix, κ and its bootstrap interval."""

    confusion: Confusion
    kappa: float | None
    kappa_lo: float | None
    kappa_hi: float | None

    @property
    def n(self) -> int:
        return self.confusion.n

    @property
    def enough(self) -> bool:
        """Whether there are at least MIN_LABELS human labels (below that the figure says so)."""
        return self.n >= MIN_LABELS


def calibration(
    pairs: Iterable[tuple[bool, bool]],
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> Calibration:
    """Confusion, κ and a percentile-bootstrap interval for κ (resampling the labelled answers)."""
    pairs = [(bool(judge), bool(human)) for judge, human in pairs]
    table = confusion(pairs)
    if not pairs:
        return Calibration(table, None, None, None)
    # One indicator column per confusion cell, so each replicate's cells are one matrix product.
    cell_of = {(True, True): 0, (True, False): 1, (False, True): 2, (False, False): 3}
    indicators = np.zeros((len(pairs), 4))
    indicators[np.arange(len(pairs)), [cell_of[pair] for pair in pairs]] = 1.0
    counts = resample_counts(len(pairs), replicates=replicates, seed=seed)
    kappas = _kappa(counts @ indicators)
    lo, hi = percentile_interval(kappas[:, None], level=level)
    return Calibration(
        table,
        table.kappa,
        None if np.isnan(lo[0]) else float(lo[0]),
        None if np.isnan(hi[0]) else float(hi[0]),
    )
