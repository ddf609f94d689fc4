"""Item–rest correlation and failed-everywhere tasks across campaigns: hand computations and properties."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_engine.metrics.discrimination import failed_everywhere, item_rest_correlations


def _table(rates: dict[str, dict[str, tuple[int, int]]]) -> pd.DataFrame:
    """{campaign: {task: (n, c)}} as the long table."""
    rows = [
        {"campaign": campaign, "task": task, "n": n, "c": c}
        for campaign, tasks in rates.items()
        for task, (n, c) in tasks.items()
    ]
    return pd.DataFrame(rows, columns=["campaign", "task", "n", "c"])


def test_item_rest_equals_a_hand_computation():
    # Rates (n = 10): A: t1 .2 t2 .4 t3 .9 | B: t1 .5 t2 .6 t3 .5 | C: t1 .8 t2 .9 t3 .1
    table = _table(
        {
            "A": {"t1": (10, 2), "t2": (10, 4), "t3": (10, 9)},
            "B": {"t1": (10, 5), "t2": (10, 6), "t3": (10, 5)},
            "C": {"t1": (10, 8), "t2": (10, 9), "t3": (10, 1)},
        }
    )
    by_task = {row.task: row for row in item_rest_correlations(table)}
    # t3: rates (.9, .5, .1), rest scores A (.2+.4)/2=.3, B .55, C .85: strongly negative
    expected_t3 = float(np.corrcoef([0.9, 0.5, 0.1], [0.3, 0.55, 0.85])[0, 1])
    assert expected_t3 < -0.99
    assert abs(by_task["t3"].r - expected_t3) < 1e-12
    # t1: rates (.2, .5, .8), rest A (.4+.9)/2=.65, B .55, C .5
    x, y = np.array([0.2, 0.5, 0.8]), np.array([0.65, 0.55, 0.5])
    expected = float(np.corrcoef(x, y)[0, 1])
    assert abs(by_task["t1"].r - expected) < 1e-12
    assert by_task["t1"].campaigns == 3 and abs(by_task["t1"].rate - 0.5) < 1e-12


def test_better_campaigns_failing_a_task_more_is_negative():
    skills = [0.2, 0.4, 0.6, 0.8]
    rates = {}
    for position, skill in enumerate(skills):
        tasks = {f"good{i}": (20, round(20 * skill)) for i in range(5)}
        tasks["inverted"] = (20, round(20 * (1 - skill)))
        rates[f"c{position}"] = tasks
    rows = {row.task: row for row in item_rest_correlations(_table(rates))}
    assert rows["inverted"].r < 0
    assert all(rows[f"good{i}"].r > 0 for i in range(5))
    # Four campaigns in exactly the opposite order: one of the 4! = 24 pairings is that extreme.
    assert rows["inverted"].p_value == pytest.approx(1 / 24)
    assert rows["good0"].p_value == 1.0


def test_permutation_p_value_is_a_hand_count_and_drawn_beyond_seven_campaigns():
    # Rates (.9, .5, .1) against rest (.3, .55, .85): of the 6 pairings only the observed one has r <= r_obs.
    table = _table(
        {
            "A": {"t1": (10, 2), "t2": (10, 4), "t3": (10, 9)},
            "B": {"t1": (10, 5), "t2": (10, 6), "t3": (10, 5)},
            "C": {"t1": (10, 8), "t2": (10, 9), "t3": (10, 1)},
        }
    )
    by_task = {row.task: row for row in item_rest_correlations(table)}
    assert by_task["t3"].p_value == pytest.approx(1 / 6)
    many = {f"c{k}": {"t": (10, 10 - k), "u": (10, k), "v": (10, k)} for k in range(10)}
    rows = {row.task: row for row in item_rest_correlations(_table(many))}
    assert rows["t"].r < -0.99 and rows["t"].p_value < 0.01  # 2,000 drawn permutations, fixed seed
    assert item_rest_correlations(_table(many))[0].p_value == rows["t"].p_value


def test_too_few_campaigns_or_constant_rates_give_no_correlation():
    two = _table({"A": {"t": (5, 1), "u": (5, 2)}, "B": {"t": (5, 3), "u": (5, 4)}})
    assert [row.r for row in item_rest_correlations(two)] == [None, None]
    flat = _table({c: {"t": (4, 2), "u": (4, i)} for i, c in enumerate("ABC")})
    assert {row.task: row.r for row in item_rest_correlations(flat)}["t"] is None
    assert item_rest_correlations(_table({})) == []
    # n = 0 rows are no evidence
    idle = _table({c: {"t": (0, 0), "u": (4, i)} for i, c in enumerate("ABC")})
    assert {row.task: row.campaigns for row in item_rest_correlations(idle)} == {"u": 3}


def test_failed_everywhere_needs_three_campaigns_that_all_fail():
    table = _table(
        {
            "A": {"broken": (5, 0), "fine": (5, 3), "new": (5, 0)},
            "B": {"broken": (5, 0), "fine": (5, 0), "new": (5, 0)},
            "C": {"broken": (5, 0), "fine": (5, 1), "new": (0, 0)},
        }
    )
    assert failed_everywhere(table) == {"broken": 3}


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 10), min_size=4, max_size=4), min_size=3, max_size=7),
    st.randoms(use_true_random=False),
)
def test_correlations_are_bounded_and_do_not_depend_on_campaign_order(passes, rnd):
    rates = {f"c{i}": {f"t{j}": (10, c) for j, c in enumerate(row)} for i, row in enumerate(passes)}
    table = _table(rates)
    shuffled = table.sample(frac=1.0, random_state=rnd.randint(0, 1000)).reset_index(drop=True)
    one, two = item_rest_correlations(table), item_rest_correlations(shuffled)
    assert [row.task for row in one] == [row.task for row in two]
    for a, b in zip(one, two):
        assert (a.r is None) == (b.r is None)
        if a.r is not None:
            assert -1 - 1e-9 <= a.r <= 1 + 1e-9 and abs(a.r - b.r) < 1e-9
