"""Per-campaign figures under a fault plan, from each attempt's verdict and stored fault record.

* pass@1 under faults: mean over tasks of the task's share of passing graded attempts;
* all-N under faults: share of tasks whose every graded attempt passed;
* recovery rate per fault kind: among graded attempts in which that kind fired, the share that
  still pass;
* duplicate-effect rate: among graded attempts in which a commit-point fault fired on a call
  whose effect was committed, the share whose diff holds an extra effect attributed to that call
  or to a repeat of it (tb_engine.faults.duplicate_effects).

Attempts whose plan never fired (the agent made no call the plan applies to, or fewer than a
planned ordinal) are counted apart and are in no kind's denominator. Unjudged and infra-error
attempts are not graded (SPEC §2) and count nowhere. Rates carry a 95% Wilson interval: they
are shares of attempts, not of tasks, so the interval is about the attempts this campaign ran.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_engine.faults import COMMIT_POINT_KINDS, FAULT_KINDS
from tb_engine.metrics import noise

Z_95 = 1.959963984540054


def wilson(successes: int, trials: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval of a binomial share; None without trials."""
    if trials <= 0:
        return None
    share = successes / trials
    denominator = 1 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class FaultedAttempt:
    """What the figures read of one attempt: its task, verdict and fault record (None: no plan)."""

    task_id: str
    verdict: str
    faults: Mapping[str, Any] | None


def _rate(successes: int, trials: int) -> dict[str, Any]:
    interval = wilson(successes, trials)
    return {
        "count": successes,
        "of": trials,
        "rate": successes / trials if trials else None,
        "lo": interval[0] if interval else None,
        "hi": interval[1] if interval else None,
    }


def _record(attempt: FaultedAttempt) -> Mapping[str, Any]:
    return attempt.faults or {}


def _fired(attempt: FaultedAttempt) -> list[Mapping[str, Any]]:
    return list(_record(attempt).get("fired") or ())


def fault_figures(attempts: Iterable[FaultedAttempt]) -> dict[str, Any]:
    """The campaign's robustness figures (module docstring); ``planned`` False when no attempt had a plan."""
    graded = [a for a in attempts if a.verdict in ("pass", "fail") and a.faults is not None]
    by_task: dict[str, list[bool]] = {}
    for attempt in graded:
        by_task.setdefault(attempt.task_id, []).append(attempt.verdict == "pass")
    per_kind = {}
    for kind in FAULT_KINDS:
        hit = [a for a in graded if any(f.get("kind") == kind for f in _fired(a))]
        duplicated = [
            a for a in hit if any(d.get("kind") == kind for d in _record(a).get("duplicate_effects") or ())
        ]
        per_kind[kind] = {
            "fired": len(hit),
            "recovered": _rate(sum(a.verdict == "pass" for a in hit), len(hit)),
            "duplicate_effects": len(duplicated),
        }
    commit_point = [
        a
        for a in graded
        if any(f.get("kind") in COMMIT_POINT_KINDS and f.get("committed") for f in _fired(a))
    ]
    duplicate_effect = sum(bool(_record(a).get("duplicate_effects")) for a in commit_point)
    return {
        "planned": bool(graded),
        "graded": len(graded),
        "tasks": len(by_task),
        "pass_at_1": sum(sum(v) / len(v) for v in by_task.values()) / len(by_task) if by_task else None,
        "all_n": sum(all(v) for v in by_task.values()) / len(by_task) if by_task else None,
        "none_fired": sum(bool(_record(a).get("none_fired")) for a in graded),
        "unfired_ordinals": sum(len(_record(a).get("unfired") or ()) for a in graded),
        "kinds": per_kind,
        "duplicate_effect": _rate(duplicate_effect, len(commit_point)),
    }


def paired_delta(
    faulted: Mapping[str, tuple[int, int]],
    clean: Mapping[str, tuple[int, int]],
    *,
    n_attempts: int,
) -> dict[str, Any]:
    """Δpass@1 and Δall-N (faulted minus clean) on the tasks both campaigns graded, with the noise floor.

    ``faulted`` and ``clean`` map task id -> (graded attempts, passes). The floor is the paired task
    bootstrap's MDD (tb_engine.metrics.noise, SPEC §9): the same resampled tasks for both campaigns,
    so a difference below it is what a rerun could show without any fault. ``clears`` is None when
    too few shared tasks leave the floor unknown.
    """
    shared = sorted(set(faulted) & set(clean))
    out: dict[str, Any] = {"tasks": len(shared)}
    n = np.array([[faulted[t][0], clean[t][0]] for t in shared], dtype=np.int64).reshape(len(shared), 2)
    c = np.array([[faulted[t][1], clean[t][1]] for t in shared], dtype=np.int64).reshape(len(shared), 2)
    for metric in ("pass_at_1", "all_n"):
        values = noise.per_task_values(n, c, metric=metric, n_attempts=n_attempts)
        floors = noise.pairwise_floors(values)
        delta = float(floors.delta[0, 1]) if shared else math.nan
        mdd = float(floors.mdd[0, 1]) if shared else math.nan
        out[metric] = {
            "faulted": float(floors.point[0]) if shared else None,
            "clean": float(floors.point[1]) if shared else None,
            "delta": None if math.isnan(delta) else delta,
            "mdd": None if math.isnan(mdd) else mdd,
            "clears": noise.clears(delta, mdd),
        }
    return out
