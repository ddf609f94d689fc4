"""Attempts planner: variance components, MDD(T, N), tasks needed and cost."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tb_engine.metrics.noise import rerun_floor
from tb_engine.metrics.planner import (
    attempt_variance,
    cheapest,
    mdd,
    plan,
    task_difference_variance,
    tasks_needed,
    variance_components,
)


def frame(counts, n):
    return pd.DataFrame({"task_id": [f"t{i}" for i in range(len(counts))], "n": n, "c": counts})


def test_attempt_variance_is_the_mean_posterior_bernoulli_variance():
    # Beta(3, 1), Beta(2, 2), Beta(1, 3): E[p(1-p)] = 3/20, 4/20, 3/20
    assert attempt_variance(frame([2, 1, 0], 2)) == pytest.approx(10 / 60)


def test_mdd_at_the_pilots_design_in_drift_mode_equals_its_rerun_floor():
    counts = np.array([5, 3, 0, 5, 1, 4, 2, 5])
    pilot = frame(counts, 5)
    floor = rerun_floor(np.full(8, 5), counts, metric="pass_at_1", n_attempts=5)
    assert mdd(8, 5, attempt_var=attempt_variance(pilot), task_var=0.0) == pytest.approx(floor.mdd)


def test_tasks_needed_is_the_smallest_t_reaching_the_target():
    needed = tasks_needed(0.05, 10, attempt_var=0.2, task_var=0.01)
    assert needed == math.ceil(2.8**2 * (0.01 + 2 * 0.2 / 10) / 0.05**2)
    assert mdd(needed, 10, attempt_var=0.2, task_var=0.01) <= 0.05
    assert mdd(needed - 1, 10, attempt_var=0.2, task_var=0.01) > 0.05
    with pytest.raises(ValueError, match="positive"):
        tasks_needed(0.0, 10, attempt_var=0.2, task_var=0.0)


def test_task_difference_variance_removes_attempt_noise_and_is_never_negative():
    same = frame([3, 3, 3, 3], 6)
    assert task_difference_variance(same, same) == 0.0
    a, b = frame([6, 0, 6, 0], 6), frame([0, 6, 0, 6], 6)
    # d = +1, -1, +1, -1: var (ddof 1) = 4/3, minus the attempt noise of 0/6 and 6/6 rates
    noise = 2 * (1 * 7 / (8 * 9)) / 6
    assert task_difference_variance(a, b) == pytest.approx(4 / 3 - noise)


def test_variance_components_average_campaigns_and_pairs():
    tables = [frame([2, 1, 0], 2), frame([2, 2, 0], 2), frame([1, 1, 1], 2)]
    components = variance_components(tables)
    assert (components.campaigns, components.pairs) == (3, 3)
    assert components.attempt == pytest.approx(np.mean([attempt_variance(t) for t in tables]))
    assert variance_components(tables[:1]).task is None


def test_plan_rows_cost_and_cheapest_feasible_design():
    rows = plan(
        0.10,
        attempt_var=0.2,
        task_var=0.0,
        tasks_available=100,
        cost_per_attempt=0.01,
        attempt_options=(1, 5, 20),
    )
    assert [row.attempts for row in rows] == [1, 5, 20]
    one, five, twenty = rows
    assert one.tasks_needed == math.ceil(2.8**2 * 0.4 / 0.01)  # 314 > 100 tasks: not feasible
    assert (one.feasible, one.tasks_used) == (False, 100)
    assert five.tasks_needed == math.ceil(2.8**2 * 0.08 / 0.01) == 63
    assert five.attempts_per_campaign == 63 * 5
    assert five.cost_per_campaign == pytest.approx(63 * 5 * 0.01)
    assert twenty.tasks_needed == math.ceil(2.8**2 * 0.02 / 0.01) == 16  # 320 attempts
    assert cheapest(rows) == five  # 315 attempts per campaign is the least
    assert (
        plan(0.1, attempt_var=0.2, task_var=0.0, tasks_available=10, cost_per_attempt=None)[
            0
        ].cost_per_campaign
        is None
    )
