"""campaign_metrics / slice_metrics: coverage, all-N, gap, costs, bootstrap intervals."""

import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tb_engine.metrics import (
    MetricsInputError,
    bootstrap_means,
    campaign_metrics,
    coverage_bounds,
    slice_metrics,
    validate_per_task,
)


def table(rows, **extra):
    frame = pd.DataFrame(rows, columns=["task_id", "domain", "n", "c"])
    for name, values in extra.items():
        frame[name] = values
    return frame


def test_campaign_metrics_counts_incomplete_tasks_as_not_dependable_and_reports_coverage():
    per_task = table(
        [("t1", "retail", 5, 5), ("t2", "retail", 3, 3), ("t3", "hr", 0, 0), ("t4", "hr", 5, 2)],
        infra_errors=[0, 2, 5, 0],
        agent_cost=[1.0, 0.6, 0.5, 1.0],
        eval_cost=[0.1, 0.1, 0.0, 0.1],
    )
    result = campaign_metrics(per_task, n_attempts=5)
    assert result["all_n"]["count"] == 1
    assert result["all_n"]["value"] == 0.25  # t2 (3/3 done) is incomplete: not dependable, not dropped
    assert result["coverage"] == {
        "tasks": 4,
        "complete_tasks": 2,
        "incomplete_tasks": ["t2", "t3"],
        "done_attempts": 13,
        "planned_attempts": 20,
        "missing_attempts": 7,
        "infra_errors": 7,
        "unjudged": 0,
    }
    assert result["pass_at_1"]["value"] == pytest.approx((1 + 1 + 0.4) / 3)
    assert result["pass_at_1"]["excluded"] == ["t3"]
    assert result["pass_at_n_observed"]["value"] == 0.75
    assert result["gap_pp"]["value"] == pytest.approx(50.0)


def test_campaign_metrics_pass_at_k_excludes_and_lists_tasks_with_fewer_attempts():
    per_task = table([("t1", "d", 10, 4), ("t2", "d", 4, 4), ("t3", "d", 10, 0)])
    result = campaign_metrics(per_task, n_attempts=10, ks=(1, 5))
    assert result["pass_at_k"][5]["excluded"] == ["t2"]
    assert result["pass_at_k"][5]["tasks"] == 2
    expected = ((1 - 6 * 5 * 4 * 3 * 2 / (10 * 9 * 8 * 7 * 6)) + 0.0) / 2
    assert result["pass_at_k"][5]["value"] == pytest.approx(expected)
    assert result["pass_hat_k"][5]["value"] == pytest.approx(0.0)
    assert result["pass_at_k"][1]["excluded"] == []


def test_campaign_metrics_costs_per_attempt_success_and_dependable_task():
    per_task = table(
        [("t1", "d", 4, 4), ("t2", "d", 4, 1)],
        infra_errors=[0, 1],
        agent_cost=[2.0, 3.0],
        eval_cost=[0.5, 0.5],
        input_tokens=[100, 200],
        output_tokens=[10, 20],
    )
    cost = campaign_metrics(per_task, n_attempts=4)["cost"]
    assert cost == {
        "agent_cost": 5.0,
        "eval_cost": 1.0,
        "billed_attempts": 9,
        "successes": 5,
        "cost_per_attempt": 5.0 / 9,
        "cost_per_success": 1.0,
        "cost_per_dependable_task": 5.0,
        "eval_cost_per_attempt": 1.0 / 9,
        "tokens": {"input_tokens": 300, "output_tokens": 30},
    }


def test_campaign_metrics_cost_per_dependable_task_is_none_without_dependable_tasks():
    per_task = table([("t1", "d", 4, 0), ("t2", "d", 4, 3)], agent_cost=[1.0, 1.0])
    cost = campaign_metrics(per_task, n_attempts=4)["cost"]
    assert cost["cost_per_dependable_task"] is None
    assert cost["cost_per_success"] == pytest.approx(2.0 / 3)


def test_campaign_metrics_without_cost_columns_reports_none():
    cost = campaign_metrics(table([("t1", "d", 2, 0)]), n_attempts=2)["cost"]
    assert (cost["agent_cost"], cost["cost_per_success"], cost["cost_per_attempt"]) == (None, None, None)


def test_campaign_metrics_default_ks_are_1_5_10_and_n():
    result = campaign_metrics(table([("t1", "d", 20, 10)]), n_attempts=20)
    assert result["ks"] == [1, 5, 10, 20]
    assert list(result["pass_hat_k_plugin"]) == [1, 5, 10, 20]
    assert campaign_metrics(table([("t1", "d", 3, 1)]), n_attempts=3)["ks"] == [1, 3]


def test_campaign_metrics_pass_at_n_equals_observed_when_all_complete():
    per_task = table([("t1", "d", 6, 0), ("t2", "d", 6, 1), ("t3", "d", 6, 6)])
    result = campaign_metrics(per_task, n_attempts=6)
    assert result["pass_at_k"][6]["value"] == pytest.approx(result["pass_at_n_observed"]["value"])
    assert result["pass_hat_k"][6]["value"] == pytest.approx(result["all_n"]["value"])


def test_campaign_metrics_error_names_row_task_and_field():
    with pytest.raises(MetricsInputError) as error:
        campaign_metrics(table([("t1", "d", 3, 1), ("retail/x", "d", 2, 3)]), n_attempts=3)
    assert str(error.value) == "per_task row 1 (task_id 'retail/x'): c: 3 passes exceed n = 2 done attempts"


def test_campaign_metrics_rejects_more_attempts_than_n():
    with pytest.raises(MetricsInputError, match=r"row 0 \(task_id 't1'\): n: 7 done attempts exceed N = 5"):
        campaign_metrics(table([("t1", "d", 7, 1)]), n_attempts=5)


def test_campaign_metrics_rejects_duplicate_task_ids_and_missing_columns():
    with pytest.raises(MetricsInputError, match="row 1 .*duplicate"):
        campaign_metrics(table([("t1", "d", 1, 1), ("t1", "d", 1, 0)]), n_attempts=1)
    with pytest.raises(MetricsInputError, match="missing column"):
        campaign_metrics(pd.DataFrame({"task_id": ["t1"], "n": [1]}), n_attempts=1)


def test_campaign_metrics_empty_table_gives_none_figures():
    result = campaign_metrics(table([]), n_attempts=3)
    assert result["pass_at_1"]["value"] is None
    assert result["all_n"]["count"] == 0
    assert result["coverage"]["tasks"] == 0


def test_slice_metrics_by_domain_and_by_tags():
    per_task = table([("t1", "retail", 2, 2), ("t2", "retail", 2, 0), ("t3", "hr", 2, 1)])
    per_task["tags"] = [["refund", "easy"], ["refund"], []]
    by_domain = slice_metrics(per_task, by="domain", n_attempts=2)
    assert sorted(by_domain) == ["hr", "retail"]
    assert by_domain["retail"]["pass_at_1"]["value"] == 0.5
    assert by_domain["hr"]["pass_at_1"]["value"] == 0.5
    by_tag = slice_metrics(per_task, by="tags", n_attempts=2)
    assert sorted(by_tag) == ["easy", "refund"]
    assert by_tag["easy"]["all_n"]["count"] == 1
    assert by_tag["refund"]["coverage"]["tasks"] == 2


def test_slice_metrics_unknown_column_names_it():
    with pytest.raises(MetricsInputError, match="no column 'team'"):
        slice_metrics(table([("t1", "d", 1, 1)]), by="team", n_attempts=1)


task_counts = st.lists(
    st.integers(min_value=0, max_value=8).flatmap(lambda c: st.tuples(st.just(8), st.just(c))),
    min_size=1,
    max_size=40,
)


def frame_from(counts):
    return table([(f"t{i}", "d", n, c) for i, (n, c) in enumerate(counts)])


@settings(max_examples=40, deadline=None)
@given(task_counts)
def test_campaign_metrics_pass_at_1_is_mean_rate_and_pass_hat_1_equal(counts):
    result = campaign_metrics(frame_from(counts), n_attempts=8, ks=(1, 4, 8), replicates=200)
    assert result["pass_at_1"]["value"] == pytest.approx(np.mean([c / n for n, c in counts]))
    assert result["pass_hat_k"][1]["value"] == pytest.approx(result["pass_at_1"]["value"])
    assert result["pass_at_k"][1]["value"] == pytest.approx(result["pass_at_1"]["value"])
    assert result["pass_at_k"][4]["value"] <= result["pass_at_k"][8]["value"] + 1e-12
    assert result["pass_hat_k"][4]["value"] <= result["pass_at_k"][4]["value"] + 1e-12


@settings(max_examples=25, deadline=None)
@given(task_counts, st.integers(min_value=0, max_value=2**31))
def test_campaign_metrics_bootstrap_is_deterministic_under_seed(counts, seed):
    first = campaign_metrics(frame_from(counts), n_attempts=8, seed=seed, replicates=300)
    second = campaign_metrics(frame_from(counts), n_attempts=8, seed=seed, replicates=300)
    assert first == second


@settings(max_examples=40, deadline=None)
@given(task_counts)
def test_campaign_metrics_intervals_contain_point_estimates(counts):
    assume(len({c for _, c in counts}) >= 2)
    result = campaign_metrics(frame_from(counts), n_attempts=8, ks=(1, 3), replicates=500)
    figures = [result["pass_at_1"], result["all_n"], result["pass_at_k"][3], result["pass_hat_k"][3]]
    for figure in figures:
        assert figure["lo"] <= figure["value"] + 1e-12
        assert figure["value"] <= figure["hi"] + 1e-12


def test_campaign_metrics_different_seeds_give_different_intervals():
    counts = [(8, c) for c in [0, 1, 2, 3, 4, 5, 6, 7, 8] * 3]
    first = campaign_metrics(frame_from(counts), n_attempts=8, seed=0)["pass_at_1"]
    second = campaign_metrics(frame_from(counts), n_attempts=8, seed=1)["pass_at_1"]
    assert (first["lo"], first["hi"]) != (second["lo"], second["hi"])
    assert first["value"] == second["value"]


def test_bootstrap_means_of_constant_column_is_degenerate():
    lo, hi = bootstrap_means(np.full((50, 1), 0.3))
    assert (lo[0], hi[0]) == pytest.approx((0.3, 0.3))


def test_bootstrap_means_interval_width_shrinks_with_more_tasks():
    rng = np.random.default_rng(5)
    small = rng.random(25)
    large = np.tile(small, 16)
    lo_s, hi_s = bootstrap_means(small)
    lo_l, hi_l = bootstrap_means(large)
    assert (hi_l[0] - lo_l[0]) < (hi_s[0] - lo_s[0]) / 2


def test_bootstrap_means_2000_replicates_of_500_tasks_is_fast():
    values = np.random.default_rng(0).random((500, 8))
    bootstrap_means(values)  # warm-up
    start = time.perf_counter()
    bootstrap_means(values, replicates=2000)
    elapsed = time.perf_counter() - start
    # Measured ~15 ms on a shared 2-core box; the bound only guards against a Python loop.
    assert elapsed < 0.25


def test_campaign_metrics_plugin_pass_hat_k_averages_over_the_same_tasks_as_the_unbiased_one():
    # t2 has 2 of 4 attempts done: no pass^4 estimate, so neither the unbiased nor the plug-in uses it.
    per_task = table([("t1", "d", 4, 2), ("t2", "d", 2, 2)])
    result = campaign_metrics(per_task, n_attempts=4, ks=(1, 4))
    assert result["pass_hat_k"][4]["excluded"] == ["t2"]
    assert result["pass_hat_k"][4]["value"] == pytest.approx(0.0)  # C(2,4)/C(4,4)
    assert result["pass_hat_k_plugin"][4] == pytest.approx((2 / 4) ** 4)  # t1 alone, not ((1/2)^4 + 1) / 2
    assert result["pass_hat_k_plugin"][1] == pytest.approx((0.5 + 1.0) / 2)


def test_one_good_attempt_and_nineteen_infra_errors_is_bounded_never_dependable():
    per_task = pd.DataFrame([{"task_id": "t1", "domain": "d", "n": 1, "c": 1, "infra_errors": 19}])

    result = campaign_metrics(per_task, n_attempts=20, ks=[1, 20], replicates=50)

    # What was observed alone looks perfect on the one attempt it has...
    assert result["pass_hat_k"][1]["value"] == 1.0
    assert result["pass_hat_k"][20]["value"] is None  # n = 1 < 20: excluded
    # ...the bounds say it could be anything from never to always.
    assert result["coverage_bounds"] == {
        "missing_attempts": 19,
        "pass_at_1": {"lo": 0.05, "hi": 1.0},
        "all_n": {"lo": 0.0, "hi": 1.0},
        "pass_hat_k": {1: {"lo": 0.05, "hi": 1.0}, 20: {"lo": 0.0, "hi": 1.0}},
    }


def test_coverage_bounds_mix_complete_and_incomplete_tasks_and_collapse_without_missing():
    per_task = pd.DataFrame(
        [
            {"task_id": "complete", "n": 4, "c": 4, "unjudged": 0, "infra_errors": 0},
            {"task_id": "two missing", "n": 2, "c": 1, "unjudged": 1, "infra_errors": 1},
            {"task_id": "never ran", "n": 0, "c": 0, "unjudged": 0, "infra_errors": 0},
        ]
    )

    bounds = coverage_bounds(validate_per_task(per_task, n_attempts=4), n_attempts=4, ks=[2])

    assert bounds["missing_attempts"] == 6
    assert bounds["all_n"] == {"lo": 1 / 3, "hi": 2 / 3}
    assert bounds["pass_at_1"] == {"lo": (1.0 + 0.25 + 0.0) / 3, "hi": (1.0 + 0.75 + 1.0) / 3}
    # pass^2 per task with 4 attempts: C(c, 2) / C(4, 2) = C(c, 2) / 6.
    assert bounds["pass_hat_k"][2] == {"lo": (1.0 + 0.0 + 0.0) / 3, "hi": (1.0 + 3 / 6 + 1.0) / 3}
    complete = campaign_metrics(per_task.iloc[:1], n_attempts=4, ks=[2], replicates=50)
    assert complete["coverage_bounds"] == {
        "missing_attempts": 0,
        "pass_at_1": {"lo": 1.0, "hi": 1.0},
        "all_n": {"lo": 1.0, "hi": 1.0},
        "pass_hat_k": {2: {"lo": 1.0, "hi": 1.0}},
    }
