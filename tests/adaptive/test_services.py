"""Calibrations and the adaptive dispatcher over real (simulated) campaigns on the starter suite."""

from __future__ import annotations

import pytest

from tests.adaptive.conftest import FAMILY, TASKS, N


def test_calibration_stores_the_model_versioned_by_its_campaigns(calibration, family_campaigns):
    from apps.adaptive.services import engine_calibration

    cal = engine_calibration(calibration)
    assert calibration.version == 1
    assert sorted(c.pk for c in calibration.campaigns.all()) == sorted(c.pk for c in family_campaigns)
    assert calibration.n_campaigns == len(FAMILY)
    assert calibration.n_tasks == TASKS
    assert cal.n_tasks == TASKS
    assert calibration.dimensions == ["all tasks"]  # 15 tasks over five domains: too few per domain
    assert cal.dimension_note.startswith("one ability (one per domain is not supported")


def test_calibration_of_the_same_campaigns_is_the_same_version(calibration, starter_suite, team_a):
    from apps.adaptive.models import Calibration
    from apps.adaptive.services import calibration_create

    again = calibration_create(suite=starter_suite, team=team_a)
    assert calibration.validation is None
    assert again.pk == calibration.pk
    assert Calibration.objects.count() == 1


def test_a_new_campaign_makes_a_new_version(calibration, run_campaign, starter_suite, team_a):
    from apps.adaptive.services import calibration_create

    extra = run_campaign("sim:family-solid", tasks=TASKS, n=N, name="solid full")
    second = calibration_create(suite=starter_suite, team=team_a)
    assert second.version == 2
    assert extra.pk in set(second.campaigns.values_list("pk", flat=True))


def test_calibration_runs_leave_one_campaign_out(validated_calibration):
    calibration = validated_calibration
    validation = calibration.validation
    assert [row["campaign"] for row in validation["rows"]] == sorted(
        str(pk) for pk in calibration.campaigns.values_list("pk", flat=True)
    )
    for row in validation["rows"]:
        assert row["pass_at_1_lo"] <= row["estimated_pass_at_1"] <= row["pass_at_1_hi"]
        assert 0 < row["attempts_share"] <= 0.3 + 1e-9
    errors = [abs(r["estimated_pass_at_1"] - r["observed_pass_at_1"]) for r in validation["rows"]]
    assert validation["pass_at_1_mae_pp"] == pytest.approx(100 * sum(errors) / len(errors))


def test_calibration_needs_three_campaigns(run_campaign, starter_suite, team_a):
    from apps.adaptive.services import calibration_create
    from tb_engine.irt import CalibrationError

    run_campaign("sim:family-ace", tasks=4, n=2)
    run_campaign("sim:family-novice", tasks=4, n=2)
    with pytest.raises(
        CalibrationError, match="2 campaign\\(s\\) with done attempts; calibration needs at least 3"
    ):
        calibration_create(suite=starter_suite, team=team_a)


def test_adaptive_campaign_runs_within_budget_and_stores_an_estimate(calibration, run_adaptive):
    from apps.adaptive.models import AdaptiveState
    from apps.attempts.models import Attempt
    from apps.campaigns.models import Campaign

    campaign, outcome = run_adaptive("sim:family-solid", adaptive={"calibration": calibration.pk})
    state = AdaptiveState.objects.get(campaign=campaign)
    attempts = Attempt.objects.filter(campaign=campaign)
    budget = 27  # 30% of N x tasks = 0.3 x 6 x 15
    assert campaign.status == Campaign.Status.DONE
    assert outcome == f"finished: {state.stop_reason}"
    assert state.calibration_id == calibration.pk
    assert state.budget == budget
    assert attempts.count() == state.attempts_used <= budget
    assert attempts.filter(status=Attempt.Status.DONE).count() == attempts.count()
    # Indexes per task are 0..k-1: nothing was added twice.
    for task_id in set(attempts.values_list("task_id", flat=True)):
        indexes = sorted(attempts.filter(task_id=task_id).values_list("index", flat=True))
        assert indexes == list(range(len(indexes)))
    estimate = state.estimate
    assert estimate["estimated"] is True
    assert estimate["attempts_run"] == attempts.count()
    assert estimate["attempts_share"] == attempts.count() / (N * TASKS)
    assert estimate["pass_at_1"]["lo"] <= estimate["pass_at_1"]["value"] <= estimate["pass_at_1"]["hi"]
    assert state.estimate_attempts == attempts.count()


def test_adaptive_dispatch_twice_adds_nothing_the_second_time(calibration, make_campaign, monkeypatch):
    from apps.adaptive.services import adaptive_dispatch
    from apps.attempts.models import Attempt
    from apps.campaigns import services
    from apps.campaigns.services import campaign_start

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)
    campaign = make_campaign("sim:family-ace", tasks=TASKS, n=N, adaptive={})
    campaign_start(campaign=campaign)
    first = adaptive_dispatch(campaign_id=campaign.pk)
    count = Attempt.objects.filter(campaign=campaign).count()
    second = adaptive_dispatch(campaign_id=campaign.pk)
    assert first == "added 8"  # batch_tasks new tasks, one attempt each
    assert count == 8
    assert second == "added 0"
    assert Attempt.objects.filter(campaign=campaign).count() == count


def test_adaptive_campaign_without_calibration_is_cancelled_with_the_reason(make_campaign, starter_suite):
    from apps.adaptive.models import AdaptiveState
    from apps.adaptive.services import adaptive_dispatch
    from apps.campaigns.models import Campaign
    from apps.campaigns.services import campaign_start

    campaign = make_campaign("sim:family-ace", tasks=3, n=4, adaptive={})
    campaign_start(campaign=campaign)
    assert adaptive_dispatch(campaign_id=campaign.pk) == "cancelled: no calibration"
    campaign.refresh_from_db()
    state = AdaptiveState.objects.get(campaign=campaign)
    assert campaign.status == Campaign.Status.CANCELLED
    assert state.stop_reason == "no_calibration"
    assert state.detail == "no calibration of suite starter for this team: calibrate it first"


def test_an_adaptive_campaign_with_nothing_in_flight_is_not_finished_by_the_campaigns_app(make_campaign):
    from apps.campaigns.models import Campaign
    from apps.campaigns.services import campaign_finish_if_complete, campaign_start

    campaign = make_campaign("sim:family-ace", tasks=3, n=4, adaptive={})
    campaign_start(campaign=campaign)
    assert campaign_finish_if_complete(campaign_id=campaign.pk) is False
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.RUNNING


def test_adaptive_options_are_validated_when_the_campaign_is_created(make_campaign):
    with pytest.raises(ValueError, match="budget_share: must be in \\(0, 1\\]"):
        make_campaign("sim:family-ace", tasks=3, n=4, adaptive={"budget_share": 2.0})
    with pytest.raises(ValueError, match="adaptive: unknown option\\(s\\) speed"):
        make_campaign("sim:family-ace", tasks=3, n=4, adaptive={"speed": 3})
    campaign = make_campaign("sim:family-ace", tasks=3, n=4, adaptive={"target_se": 0.02})
    assert campaign.adaptive is True
    assert campaign.adaptive_options["target_se"] == 0.02
    assert campaign.adaptive_options["n_attempts"] == 4
    assert campaign.adaptive_options["calibration"] is None
