"""Leave-one-campaign-out validation of calibration + adaptive campaign + estimate.

For each stored campaign: calibrate on the others, run the campaign adaptively from its own
stored attempts (``adaptive.replay``: its k-th attempt of a task is the k-th done attempt in index
order — no model calls), estimate its full figures, and compare with what the full campaign
observed on the same tasks (SPEC §5 pass@1 and all-N share). The summary is the mean absolute
error of each figure, the share of the full campaign's attempts the adaptive runs used, and how
often the 95% intervals held the observed figure.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tb_engine.irt.adaptive import AdaptiveConfig, replay
from tb_engine.irt.calibration import MIN_CAMPAIGNS, Calibration, CalibrationError, calibrate
from tb_engine.irt.estimate import estimate_figures


@dataclass(frozen=True)
class CampaignOutcomes:
    """One stored campaign: per task its attempts' verdicts in index order (1 pass, 0 fail, NaN not done)."""

    name: str
    task_ids: tuple[str, ...]
    domains: tuple[str, ...]
    outcomes: np.ndarray  # (tasks, N)
    n_attempts: int

    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(done, passes) per task."""
        done = (~np.isnan(self.outcomes)).sum(axis=1)
        passes = np.nansum(self.outcomes, axis=1)
        return done.astype(np.int64), passes.astype(np.int64)

    def cells(self) -> pd.DataFrame:
        done, passes = self.counts()
        return pd.DataFrame(
            {"campaign": self.name, "task_id": self.task_ids, "domain": self.domains, "n": done, "c": passes}
        )


def observed_figures(done: np.ndarray, passes: np.ndarray, n_attempts: int) -> tuple[float, float]:
    """SPEC §5 pass@1 (tasks with a done attempt) and all-N share (c = n = N) over the given tasks."""
    seen = done > 0
    pass_at_1 = float((passes[seen] / done[seen]).mean()) if seen.any() else float("nan")
    all_n = float(((passes == done) & (done == n_attempts)).mean()) if done.size else float("nan")
    return pass_at_1, all_n


@dataclass(frozen=True)
class Validation:
    rows: list[dict[str, Any]]
    pass_at_1_mae_pp: float
    all_n_mae_pp: float
    attempts_share: float
    coverage: float  # share of (campaign, figure) intervals holding the observed figure
    coverage_pass_at_1: float
    coverage_all_n: float
    calibrate_seconds: list[float]
    config: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "pass_at_1_mae_pp": self.pass_at_1_mae_pp,
            "all_n_mae_pp": self.all_n_mae_pp,
            "attempts_share": self.attempts_share,
            "coverage": self.coverage,
            "coverage_pass_at_1": self.coverage_pass_at_1,
            "coverage_all_n": self.coverage_all_n,
            "calibrate_seconds": self.calibrate_seconds,
            "config": self.config,
        }


def _replay_one(
    cal: Calibration, held: CampaignOutcomes, config: AdaptiveConfig, seed: int, draws: int
) -> dict[str, Any]:
    index = {task_id: i for i, task_id in enumerate(held.task_ids)}
    rows = [index.get(task_id) for task_id in cal.task_ids]
    stored: list[np.ndarray] = []
    for row in rows:
        if row is None:
            stored.append(np.zeros(0))
        else:
            values = held.outcomes[row]
            stored.append(values[~np.isnan(values)])
    available = np.asarray([len(v) for v in stored], dtype=np.int64)
    run = replay(cal, lambda task, k: bool(stored[task][k]), available, config)
    estimate = estimate_figures(
        cal, run.done, run.passes, n_attempts=config.n_attempts, draws=draws, seed=seed
    )
    full_done = available
    full_passes = np.asarray([int(v.sum()) for v in stored], dtype=np.int64)
    pass_at_1, all_n = observed_figures(full_done, full_passes, config.n_attempts)
    # Share of the attempts the full campaign had on these tasks (infra errors excluded).
    share = float(run.done.sum() / max(full_done.sum(), 1))
    est1, est_all = estimate["pass_at_1"], estimate["all_n"]
    return {
        "campaign": held.name,
        "tasks": int((available > 0).sum()),
        "observed_pass_at_1": pass_at_1,
        "estimated_pass_at_1": est1["value"],
        "pass_at_1_lo": est1["lo"],
        "pass_at_1_hi": est1["hi"],
        "observed_all_n": all_n,
        "estimated_all_n": est_all["value"],
        "all_n_lo": est_all["lo"],
        "all_n_hi": est_all["hi"],
        "attempts_share": share,
        "stop": run.stop,
        "pass_at_1_covered": bool(est1["lo"] <= pass_at_1 <= est1["hi"]),
        "all_n_covered": bool(est_all["lo"] <= all_n <= est_all["hi"]),
        "settled": {
            category: int((run.categories == category).sum())
            for category in ("dependable", "learning_zone", "hopeless")
        },
    }


def leave_one_out(
    campaigns: Sequence[CampaignOutcomes],
    *,
    config: AdaptiveConfig | None = None,
    dimensions: str = "auto",
    draws: int = 1000,
    seed: int = 0,
) -> Validation:
    """Calibrate without each campaign, replay it adaptively, compare with its full figures."""
    if len(campaigns) < MIN_CAMPAIGNS + 1:
        raise CalibrationError(
            f"leave-one-campaign-out needs at least {MIN_CAMPAIGNS + 1} campaigns, got {len(campaigns)}"
        )
    base = config or AdaptiveConfig()
    rows, seconds = [], []
    for held in campaigns:
        others = pd.concat([c.cells() for c in campaigns if c is not held], ignore_index=True)
        started = time.perf_counter()
        cal = calibrate(others, dimensions=dimensions)
        seconds.append(time.perf_counter() - started)
        held_config = AdaptiveConfig.from_dict(
            {
                **base.to_dict(),
                "n_attempts": held.n_attempts,
                "min_attempts": max(1, min(base.min_attempts, held.n_attempts)),
            }
        )
        rows.append(_replay_one(cal, held, held_config, seed, draws))
    err1 = [abs(r["estimated_pass_at_1"] - r["observed_pass_at_1"]) for r in rows]
    err_all = [abs(r["estimated_all_n"] - r["observed_all_n"]) for r in rows]
    cov1 = [r["pass_at_1_covered"] for r in rows]
    cov_all = [r["all_n_covered"] for r in rows]
    return Validation(
        rows=rows,
        pass_at_1_mae_pp=100.0 * float(np.mean(err1)),
        all_n_mae_pp=100.0 * float(np.mean(err_all)),
        attempts_share=float(np.mean([r["attempts_share"] for r in rows])),
        coverage=float(np.mean(cov1 + cov_all)),
        coverage_pass_at_1=float(np.mean(cov1)),
        coverage_all_n=float(np.mean(cov_all)),
        calibrate_seconds=seconds,
        config=base.to_dict(),
    )
