"""The stopping rule (SPEC §6 posterior), the planner, the estimator and replay on hand-checkable cases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import betainc

from tb_engine.irt import AdaptiveConfig, calibrate, estimate_figures, plan, replay, settle
from tb_engine.irt.estimate import ability_posterior, clustered_dispersion, misfit_dispersion, task_linear
from tb_engine.irt.model import sigmoid
from tests.engine.irt.test_calibration import seeded_cells


def test_with_the_uniform_prior_a_task_at_20_of_20_is_not_yet_dependable():
    # P(p > 15/16 | 20 of 20, uniform prior) = 1 - (15/16)^21 = 0.742 < 0.95: keep going.
    assert 1 - betainc(21, 1, 15 / 16) == pytest.approx(1 - (15 / 16) ** 21)
    assert settle(20, 20)[()] == ""
    # It takes 46 clean passes: 1 - (15/16)^47 = 0.952, while 1 - (15/16)^46 = 0.949.
    assert settle(45, 45)[()] == ""
    assert settle(46, 46)[()] == "dependable"
    assert settle(46, 0)[()] == "hopeless"


def test_a_clean_task_stops_early_only_when_the_model_prior_justifies_it():
    # A calibration that expects the task to pass (prior Beta(30, 0.5), mean 0.98).
    alpha, beta = 30.0, 0.5
    needed = next(k for k in range(0, 50) if 1 - betainc(alpha + k, beta, 15 / 16) >= 0.95)
    assert settle(needed, needed, prior_alpha=alpha, prior_beta=beta)[()] == "dependable"
    assert settle(needed - 1, needed - 1, prior_alpha=alpha, prior_beta=beta)[()] == ""
    assert needed < 20
    # One failure among them and the same prior no longer justifies stopping as dependable.
    assert settle(needed, needed - 1, prior_alpha=alpha, prior_beta=beta)[()] != "dependable"
    # A prior that expects a coin flip does not make a clean start dependable either.
    assert settle(needed, needed, prior_alpha=2.0, prior_beta=2.0)[()] != "dependable"


def test_mixed_results_settle_in_the_learning_zone():
    # Beta(2, 2): P(1/16 < p < 15/16) = 1 - 2 * (3 (1/16)^2 - 2 (1/16)^3) = 0.977.
    assert settle(2, 1)[()] == "learning_zone"
    assert settle(1, 1)[()] == ""


def small_calibration():
    cells, _, _, _ = seeded_cells(campaigns=8, tasks=30, n=10, seed=11)
    return calibrate(cells)


def test_plan_is_a_pure_function_of_the_counts_and_respects_pending_and_budget():
    cal = small_calibration()
    T = cal.n_tasks
    config = AdaptiveConfig(n_attempts=10, budget_share=0.1, batch_tasks=4, target_se=0.0)
    zeros = np.zeros(T, dtype=np.int64)
    first = plan(cal, zeros, zeros, zeros, config)
    again = plan(cal, zeros, zeros, zeros, config)
    assert first.queue == again.queue
    assert sorted(first.queue.values()) == [1, 1, 1, 1]
    pending = zeros.copy()
    for task in first.queue:
        pending[task] = 1
    busy = plan(cal, zeros, zeros, pending, config)
    assert busy.queue == {}  # the batch is in flight: nothing more until results come in
    assert busy.stop is None
    used = np.full(T, 1, dtype=np.int64)  # 30 attempts done = the whole budget (0.1 x 10 x 30)
    spent = plan(cal, used, used, zeros, config)
    assert spent.stop == "budget"
    assert spent.queue == {}


def test_estimate_of_a_fully_observed_campaign_is_its_observed_figures():
    cal = small_calibration()
    rng = np.random.default_rng(0)
    done = np.full(cal.n_tasks, 10)
    passes = rng.integers(0, 11, cal.n_tasks)
    result = estimate_figures(cal, done, passes, n_attempts=10, draws=200)
    assert result["estimated"] is True
    assert result["attempts_share"] == 1.0
    observed = passes.sum() / (10 * cal.n_tasks)
    assert result["pass_at_1"]["value"] == pytest.approx(observed, abs=1e-12)
    assert result["pass_at_1"]["lo"] == pytest.approx(observed, abs=1e-12)
    assert result["pass_at_1"]["hi"] == pytest.approx(observed, abs=1e-12)
    assert result["all_n"]["value"] == pytest.approx(float((passes == 10).mean()), abs=1e-12)


def test_replay_stays_within_budget_and_uses_only_stored_attempts():
    cells, _, _, _ = seeded_cells(campaigns=9, tasks=30, n=10, seed=2)
    held = "c04"
    cal = calibrate(cells[cells["campaign"] != held])
    rng = np.random.default_rng(4)
    counts = cells[cells["campaign"] == held].set_index("task_id").loc[list(cal.task_ids)]
    stored = [rng.permutation([1] * c + [0] * (10 - c)) for c in counts["c"]]
    reads = []

    def outcome(task, k):
        reads.append((task, k))
        return bool(stored[task][k])

    config = AdaptiveConfig(n_attempts=10, budget_share=0.3, target_se=0.0)
    run = replay(cal, outcome, np.full(cal.n_tasks, 10), config)
    assert run.stop == "budget"
    assert int(run.done.sum()) == math.floor(0.3 * 10 * 30 + 1e-9) == len(reads)
    assert len(set(reads)) == len(reads)  # each stored attempt read once, in index order per task
    for task in range(cal.n_tasks):
        assert sorted(k for t, k in reads if t == task) == list(range(int(run.done[task])))
    assert run.passes.tolist() == [int(sum(stored[t][: run.done[t]])) for t in range(cal.n_tasks)]


def test_adaptive_config_round_trips_and_names_bad_options():
    config = AdaptiveConfig(n_attempts=12, budget_share=0.25)
    assert AdaptiveConfig.from_dict(config.to_dict()) == config
    for bad, message in (
        ({"budget_share": 0}, "budget_share: must be in (0, 1]"),
        ({"min_attempts": 30}, "min_attempts: must be between 1 and n_attempts"),
        ({"batch_tasks": 0}, "batch_tasks: must be at least 1"),
    ):
        try:
            AdaptiveConfig.from_dict({**config.to_dict(), **bad})
        except ValueError as exc:
            assert str(exc) == message
        else:
            raise AssertionError(f"{bad} accepted")


def test_cells_frame_builds_the_calibration_input():
    from tb_engine.irt.calibration import cells_frame

    frame = cells_frame([("c1", "t1", "d", 4, 2)])
    assert frame.to_dict("records") == [{"campaign": "c1", "task_id": "t1", "domain": "d", "n": 4, "c": 2}]
    assert isinstance(frame, pd.DataFrame)


def test_adaptive_config_caps_the_default_min_attempts_at_n():
    assert AdaptiveConfig.from_dict({"n_attempts": 1}).min_attempts == 1
    assert AdaptiveConfig.from_dict({"n_attempts": 20}).min_attempts == 3


def test_leave_one_out_runs_on_campaigns_with_a_single_attempt_per_task():
    from tb_engine.irt import CampaignOutcomes, leave_one_out

    rng = np.random.default_rng(9)
    campaigns = [
        CampaignOutcomes(
            name=f"c{j}",
            task_ids=tuple(f"t{t:02d}" for t in range(10)),
            domains=("d",) * 10,
            outcomes=(rng.random((10, 1)) < 0.2 + 0.15 * j) * 1.0,
            n_attempts=1,
        )
        for j in range(4)
    ]
    result = leave_one_out(campaigns, draws=50)
    assert [row["campaign"] for row in result.rows] == ["c0", "c1", "c2", "c3"]
    assert result.config["min_attempts"] == 3


def test_clustered_dispersion_by_hand():
    # Clusters {0, 1} and {2, 3}: sums 2 + 1 = 3 and -3 + 0 = -3; (9 + 9) / (1 + 1 + 1 + 1) = 4.5.
    measured = clustered_dispersion(
        np.array([2.0, 1.0, -3.0, 0.0]), np.array([1.0, 1.0, 1.0, 1.0]), np.array([0, 0, 1, 1])
    )
    assert measured.dispersion == pytest.approx(4.5)
    assert measured.clusters == 2
    assert measured.inflation == pytest.approx(math.sqrt(4.5))
    # Residuals that cancel within their cluster: no misfit, and the spread is never narrowed.
    even = clustered_dispersion(np.array([1.0, -1.0]), np.array([1.0, 1.0]), np.array([0, 0]))
    assert even.dispersion == 0.0
    assert even.inflation == 1.0


def test_misfit_widens_the_intervals_by_the_measured_design_effect():
    cal = small_calibration()
    T, N = cal.n_tasks, 10
    ability = ability_posterior(cal, np.zeros(T), np.zeros(T))
    eta = task_linear(cal, ability.mean)
    done = np.full(T, 4)
    # Against the model: the tasks it finds easiest all fail, the hardest all pass.
    easy = eta >= np.median(eta)
    contrary = np.where(easy, 0, 4)
    # With the model: each task passes its rounded predicted share of its 4 attempts.
    agreeing = np.rint(4 * sigmoid(eta)).astype(np.int64)
    for passes, misfit_expected in ((contrary, True), (agreeing, False)):
        measured = misfit_dispersion(cal, done, passes)
        widened = estimate_figures(cal, done, passes, n_attempts=N, draws=400)
        plain = estimate_figures(cal, done, passes, n_attempts=N, draws=400, misfit=False)
        assert widened["misfit"]["dispersion"] == pytest.approx(measured.dispersion)
        assert widened["pass_at_1"]["value"] == plain["pass_at_1"]["value"]  # the point stays
        assert plain["misfit"]["inflation"] == 1.0
        # pass@1's spread about its point scales exactly; all-N's too, short of its clip at 0 and 1.
        width = widened["pass_at_1"]["hi"] - widened["pass_at_1"]["lo"]
        plain_width = plain["pass_at_1"]["hi"] - plain["pass_at_1"]["lo"]
        assert width == pytest.approx(measured.inflation * plain_width, rel=1e-9)
        assert (widened["all_n"]["hi"] - widened["all_n"]["lo"]) >= (
            plain["all_n"]["hi"] - plain["all_n"]["lo"]
        )
        assert (measured.dispersion > 4.0) == misfit_expected
        assert (measured.inflation == 1.0) == (not misfit_expected)
