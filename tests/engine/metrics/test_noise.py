"""Noise floor (SPEC §9): hand computations on small tables, calibration on seeded simulated replicates."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
import pytest

from tb_engine.metrics import paired_comparison
from tb_engine.metrics.noise import (
    MDD_FACTOR,
    PairwiseFloors,
    clears,
    competition_ranks,
    noise_report,
    pairwise_floors,
    per_task_values,
    replicate_spread,
    rerun_floor,
    rerun_variance,
    standard_errors,
    tied_bands,
    union_values,
)


def beta_moment(a: float, b: float, power: int) -> float:
    """E[p^power] for Beta(a, b), by hand: prod_{i < power} (a + i) / (a + b + i)."""
    return math.prod((a + i) / (a + b + i) for i in range(power))


def hand_bootstrap_means(values: np.ndarray, *, replicates: int = 2000, seed: int = 0) -> np.ndarray:
    """The task bootstrap written out: draw T task indices per replicate, average the drawn values."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(values), size=(replicates, len(values)), dtype=np.int32)
    return values[draws].mean(axis=1)


def test_mdd_factor_is_two_sided_five_percent_at_eighty_percent_power():
    assert MDD_FACTOR == 1.96 + 0.84


def test_rerun_floor_of_pass_at_1_equals_hand_computation_on_three_tasks():
    # (n, c) = (2, 2), (2, 1), (2, 0): posteriors Beta(3, 1), Beta(2, 2), Beta(1, 3).
    # E[p(1-p)] = ab / ((a+b)(a+b+1)) = 3/20, 4/20, 3/20; per-task rerun variance / n = 0.075, 0.1, 0.075.
    # SE(rerun Δ) = sqrt(2 * 0.25) / 3; MDD = 2.8 * SE.
    floor = rerun_floor(np.array([2, 2, 2]), np.array([2, 1, 0]), metric="pass_at_1", n_attempts=2)
    assert floor.tasks == 3
    assert floor.se == pytest.approx(math.sqrt(0.5) / 3, rel=1e-12)
    assert floor.mdd == pytest.approx(2.8 * math.sqrt(0.5) / 3, rel=1e-12)


def test_rerun_variance_of_all_n_is_posterior_p_to_the_n_minus_p_to_the_2n():
    n, c = np.array([4, 4, 4, 3]), np.array([4, 3, 0, 3])
    variance = rerun_variance(n, c, metric="all_n", n_attempts=4)
    expected = [beta_moment(1 + ci, 1 + 4 - ci, 4) - beta_moment(1 + ci, 1 + 4 - ci, 8) for ci in (4, 3, 0)]
    assert variance[:3] == pytest.approx(expected, rel=1e-10)
    assert variance[3] == 0.0  # incomplete: 0 in every rerun of the same coverage


def test_rerun_variance_matches_simulated_reruns():
    rng = np.random.default_rng(7)
    for n, c, metric in ((10, 7, "pass_at_1"), (10, 7, "pass_hat_5"), (20, 19, "all_n")):
        p = rng.beta(1 + c, 1 + n - c, size=200_000)
        first, second = rng.binomial(n, p), rng.binomial(n, p)
        ns = np.full(p.shape, n)
        f1 = per_task_values(ns, first, metric=metric, n_attempts=n)
        f2 = per_task_values(ns, second, metric=metric, n_attempts=n)
        simulated = float(np.var(f1 - f2)) / 2
        computed = float(rerun_variance(np.array([n]), np.array([c]), metric=metric, n_attempts=n)[0])
        assert computed == pytest.approx(simulated, rel=0.03)


def test_standard_error_is_the_sd_of_the_task_bootstrap_written_out_by_hand():
    values = np.array([1.0, 0.5, 0.0, 0.25, 0.75])
    by_hand = float(np.std(hand_bootstrap_means(values), ddof=1))
    assert float(standard_errors(values)[0]) == pytest.approx(by_hand, rel=1e-12)
    # and it approaches the exact bootstrap SE, population sd / sqrt(T)
    assert float(standard_errors(values)[0]) == pytest.approx(float(np.std(values)) / math.sqrt(5), rel=0.05)


def test_pairwise_mdd_is_the_paired_bootstrap_of_the_difference_written_out_by_hand():
    a = np.array([1.0, 0.5, 0.0, 1.0, 0.25, 0.75])
    b = np.array([0.5, 0.5, 0.0, 1.0, 0.0, 0.25])
    rng = np.random.default_rng(0)
    draws = rng.integers(0, 6, size=(2000, 6), dtype=np.int32)
    deltas = a[draws].mean(axis=1) - b[draws].mean(axis=1)  # the same drawn tasks for both
    floors = pairwise_floors(np.column_stack([a, b]))
    assert floors.delta[0, 1] == pytest.approx(a.mean() - b.mean())
    assert floors.se_delta[0, 1] == pytest.approx(float(np.std(deltas, ddof=1)), rel=1e-9)
    assert floors.mdd[0, 1] == pytest.approx(2.8 * float(np.std(deltas, ddof=1)), rel=1e-9)
    assert floors.mdd[1, 0] == pytest.approx(floors.mdd[0, 1])
    assert floors.se[0] == pytest.approx(float(np.std(a[draws].mean(axis=1), ddof=1)), rel=1e-9)


def test_pairwise_floor_equals_the_compare_pages_paired_bootstrap_on_the_same_tasks():
    ids = [f"t{i}" for i in range(8)]
    frame_a = pd.DataFrame({"task_id": ids, "n": 4, "c": [4, 3, 0, 4, 1, 2, 4, 0]})
    frame_b = pd.DataFrame({"task_id": ids, "n": 4, "c": [2, 3, 0, 4, 0, 2, 1, 0]})
    compared = paired_comparison(frame_a, frame_b, n_attempts=4)
    tables = [
        (np.array(ids, dtype=object), f["n"].to_numpy(), f["c"].to_numpy(), 4) for f in (frame_a, frame_b)
    ]
    for metric, key in (("pass_at_1", "delta_pass_at_1"), ("all_n", "delta_all_n")):
        _, values = union_values(tables, metric=metric)
        floors = pairwise_floors(values)
        assert floors.delta[0, 1] == pytest.approx(compared[key]["value"])
        assert floors.mdd[0, 1] == pytest.approx(compared[key]["mdd"], rel=1e-9)
        assert compared[key]["mdd"] == pytest.approx(2.8 * compared[key]["se"])


def test_union_of_different_task_sets_pairs_shared_tasks_and_blanks_missing_ones():
    tables = [
        (np.array(["a", "b"], dtype=object), np.array([2, 2]), np.array([2, 0]), 2),
        (np.array(["b", "c"], dtype=object), np.array([2, 2]), np.array([1, 1]), 2),
    ]
    union, values = union_values(tables, metric="pass_at_1")
    assert list(union) == ["a", "b", "c"]
    assert np.array_equal(values, np.array([[1.0, np.nan], [0.0, 0.5], [np.nan, 0.5]]), equal_nan=True)


def test_clears_needs_a_nonzero_difference_at_or_above_the_floor():
    assert (clears(0.05, 0.04), clears(-0.05, 0.05), clears(0.03, 0.04)) == (True, True, False)
    assert (clears(0.0, 0.0), clears(None, 0.1), clears(0.1, None)) == (False, None, None)


def test_tied_bands_group_rows_within_the_leaders_floor_and_rank_them_like_a_league():
    # Leader A = 0.60; B (0.58) is tied with A; C (0.50) clears A's floor and opens band 2; D ties C.
    point = np.array([0.60, 0.58, 0.50, 0.49])
    mdd = np.full((4, 4), 0.05)
    floors = PairwiseFloors(
        point=point, se=np.full(4, 0.01), delta=np.subtract.outer(point, point), se_delta=mdd / 2.8, mdd=mdd
    )
    order = [0, 1, 2, 3]
    bands = tied_bands(order, floors)
    assert bands == {0: 1, 1: 1, 2: 2, 3: 2}
    assert competition_ranks(order, bands) == {0: (1, True), 1: (1, True), 2: (3, True), 3: (3, True)}


def test_noise_report_gives_value_se_and_rerun_floor_per_scope_and_metric():
    frame = pd.DataFrame(
        {
            "task_id": ["r1", "r2", "h1"],
            "domain": ["retail", "retail", "hr"],
            "n": [2, 2, 2],
            "c": [2, 1, 0],
        }
    )
    report = noise_report(frame, n_attempts=2)
    assert sorted(report) == ["", "hr", "retail"]
    assert sorted(report[""]) == ["all_n", "pass_at_1", "pass_hat_n"]  # pass^5 needs N >= 5
    overall = report[""]["pass_at_1"]
    assert overall["value"] == pytest.approx(0.5)
    assert overall["rerun_mdd"] == pytest.approx(2.8 * math.sqrt(0.5) / 3)
    assert overall["tasks"] == 3
    assert report["hr"]["pass_at_1"]["se"] == 0.0  # one task: every replicate draws it, no spread
    assert report["hr"]["pass_at_1"]["rerun_mdd"] > 0  # while a rerun of it would still vary


def _seeded_replicate(suite, tasks, persona: str, *, trial: int, replicate: int, n: int) -> np.ndarray:
    """Passes per task of one replicate campaign of a seeded simulated persona (campaign seed per replicate)."""
    from tb_engine.agents.simulated import make_simulated_agent

    counts = []
    for task in tasks:
        passed = 0
        for index in range(n):
            digest = hashlib.sha256(f"{trial}:{replicate}:{task.id}:{index}".encode()).digest()
            agent = make_simulated_agent(
                persona, task=task, domain=suite.domains[task.domain], seed=int.from_bytes(digest[:8], "big")
            )
            passed += agent.intends_success
        counts.append(passed)
    return np.array(counts)


def test_two_replicates_of_a_seeded_simulated_agent_differ_by_less_than_the_floor_in_95_percent_of_40_trials():
    from tb_engine.loader import load_builtin_suite

    suite = load_builtin_suite("starter")
    tasks = sorted(suite.tasks.values() if isinstance(suite.tasks, dict) else suite.tasks, key=lambda t: t.id)
    n = 5
    ids = np.array([t.id for t in tasks], dtype=object)
    ns = np.full(len(tasks), n)
    below = {"rerun pass@1": 0, "rerun all-N": 0, "paired pass@1": 0, "paired all-N": 0}
    for trial in range(40):
        first = _seeded_replicate(suite, tasks, "explorer", trial=trial, replicate=0, n=n)
        second = _seeded_replicate(suite, tasks, "explorer", trial=trial, replicate=1, n=n)
        for metric, label in (("pass_at_1", "pass@1"), ("all_n", "all-N")):
            delta = (
                per_task_values(ns, first, metric=metric, n_attempts=n).mean()
                - per_task_values(ns, second, metric=metric, n_attempts=n).mean()
            )
            floor = rerun_floor(ns, first, metric=metric, n_attempts=n)  # from the first replicate alone
            below[f"rerun {label}"] += clears(float(delta), floor.mdd) is False
            _, values = union_values([(ids, ns, first, n), (ids, ns, second, n)], metric=metric)
            below[f"paired {label}"] += pairwise_floors(values).tied(0, 1)
    assert {key: count >= 38 for key, count in below.items()} == dict.fromkeys(below, True), below


def test_replicate_spread_reports_observed_sd_beside_the_expected_one():
    rng = np.random.default_rng(3)
    p = rng.uniform(0.1, 0.9, size=200)
    ids = np.array([f"t{i}" for i in range(200)], dtype=object)
    tables = [(ids, np.full(200, 10), rng.binomial(10, p), 10) for _ in range(4)]
    spread = replicate_spread(tables)
    pass1 = spread["pass_at_1"]
    assert pass1["pairs"] == 6
    assert pass1["pairs_below_floor"] == 6
    assert len(pass1["values"]) == 4
    assert pass1["sd"] == pytest.approx(float(np.std(pass1["values"], ddof=1)))
    # what the floor predicts for one replicate's sd is the right size: sqrt(mean p(1-p) / (N T))
    assert pass1["expected_sd"] == pytest.approx(math.sqrt(float(np.mean(p * (1 - p))) / 10 / 200), rel=0.15)
