"""Noise floor, replicates, planner, release gate and drift watches over the API."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import asdict

import pytest

from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.figures import selectors as figures
from tests.api.conftest import error_of
from tests.campaigns.conftest import drain

pytestmark = pytest.mark.django_db

T1, T2, T3 = (
    "retail/ticket_hold_carrier_exception",
    "neobank/freeze_misplaced_card",
    "travel/cancel_flexible_full_refund",
)


@pytest.fixture
def pair(summaries_campaign):
    a = summaries_campaign({T1: (4, 4), T2: (4, 1), T3: (4, 0)}, name="A", n=4)
    b = summaries_campaign({T1: (4, 3), T2: (4, 2), T3: (4, 1)}, name="B", n=4)
    for campaign in (a, b):
        campaign.status = "done"
        campaign.save(update_fields=["status"])
    return a, b


def test_leaderboard_rows_carry_their_tied_band_and_standard_errors(api_for, bob, pair):
    rows = api_for(bob).get("/api/metrics/leaderboard/?sort=pass1").json()["results"]
    expected = {r.campaign.pk: r for r in figures.leaderboard_rows(figures.figure_campaigns(bob))}
    for row in rows:
        want = expected[row["campaign"]["id"]]
        assert row["band"] == asdict(want.band)
        assert row["se"] == dict(want.se)
    assert [(row["band"]["rank"], row["band"]["shared"]) for row in rows] == [
        (1, True),
        (1, True),
    ]  # 3 tasks: tied


def test_compare_reports_each_deltas_noise_floor(api_for, bob, pair):
    a, b = pair
    data = api_for(bob).get(f"/api/metrics/compare/?a={a.pk}&b={b.pk}").json()
    expected = figures.comparison(figures.per_task_tables([a, b]), a, b)
    assert data["delta_pass_at_1"] == {
        "value": expected.delta_pass_at_1.value,
        "lo": expected.delta_pass_at_1.lo,
        "hi": expected.delta_pass_at_1.hi,
        "se": expected.delta_pass_at_1.se,
        "mdd": expected.delta_pass_at_1.mdd,
        "clears": False,
    }


def test_noise_endpoint_gives_the_pages_floors_per_scope(api_for, bob, pair):
    a, _ = pair
    data = api_for(bob).get(f"/api/metrics/noise/?campaign={a.pk}").json()
    (row,) = data["results"]
    expected = figures.campaign_noise(figures.per_task_tables([a]), a)
    assert sorted(row["scopes"]) == sorted(expected.scopes)
    assert row["scopes"][""] == [asdict(m) for m in expected.scope("")]


def test_replicates_endpoint_lists_sets_with_their_spread(api_for, alice, bob, run_campaign):
    original = run_campaign("sim:explorer", tasks=4, n=2, name="Explorer")
    response = api_for(alice).post(f"/api/campaigns/{original.pk}/replicate/", {"seed": 7}, format="json")
    assert response.status_code == 201
    replicate = Campaign.objects.get(pk=response.json()["id"])
    assert (response.json()["replicate_of"], replicate.seed) == (original.pk, 7)
    drain(replicate)

    data = api_for(bob).get("/api/metrics/replicates/").json()

    (entry,) = data["results"]
    assert [m["id"] for m in entry["members"]] == [original.pk, replicate.pk]
    assert {s["metric"] for s in entry["spreads"]} == {"pass_at_1", "pass_hat_n", "all_n"}
    again = api_for(alice).post(f"/api/campaigns/{original.pk}/replicate/", {"seed": 7}, format="json")
    assert (again.status_code, error_of(again)["details"]["seed"][0]) == (
        400,
        "seed 7 is already used in the replicate set of 'Explorer'",
    )
    assert api_for(bob).post(f"/api/campaigns/{original.pk}/replicate/", {}, format="json").status_code == 403


def test_planner_endpoint_matches_the_page(api_for, bob, run_campaign):
    pilot = run_campaign("sim:explorer", tasks=6, n=4, name="Pilot")
    data = api_for(bob).get(f"/api/planner/?campaign={pilot.pk}&target_pp=10&mode=drift").json()
    plan = figures.attempts_plan(
        [pilot], figures.per_task_tables([pilot]), target=0.10, mode="drift", tasks_available=56
    )
    assert [row["tasks_needed"] for row in data["rows"]] == [row.tasks_needed for row in plan.rows]
    assert data["inputs"]["attempt_var"] == pytest.approx(plan.inputs.attempt_var)
    assert api_for(bob).get("/api/planner/?campaign=999999&target_pp=10").status_code == 404
    assert api_for(bob).get(f"/api/planner/?campaign={pilot.pk}&target_pp=0").status_code == 400


def test_gate_endpoint_answers_verdicts_as_json_or_junit(api_for, bob, pair):
    a, b = pair
    body = {"campaign": a.pk, "baseline": b.pk, "min_pass1": 0.3, "max_drop_pp": 1}
    data = api_for(bob).post("/api/gates/", body, format="json").json()
    assert (data["passed"], [r["rule"] for r in data["rules"]]) == (
        True,
        ["min-pass1", "max-drop-pp pass@1", "max-drop-pp all-N"],
    )
    failing = api_for(bob).post("/api/gates/", {**body, "min_pass1": 0.9}, format="json").json()
    assert (failing["passed"], failing["failures"]) == (False, 1)
    junit = api_for(bob).post("/api/gates/", {**body, "min_pass1": 0.9, "format": "junit"}, format="json")
    assert junit["Content-Type"] == "application/xml; charset=utf-8"
    root = ElementTree.fromstring(junit.content)
    assert (root.tag, root.get("failures")) == ("testsuites", "1")


def test_gate_endpoint_refuses_what_it_cannot_evaluate(api_for, bob, erin, pair, make_campaign):
    a, _ = pair
    no_rule = api_for(bob).post("/api/gates/", {"campaign": a.pk}, format="json")
    assert (no_rule.status_code, error_of(no_rule)["message"]) == (
        400,
        "non_field_errors: no rule chosen: give --min-pass1, --min-all-n and/or --max-drop-pp",
    )
    assert (
        api_for(erin).post("/api/gates/", {"campaign": a.pk, "min_pass1": 0.1}, format="json").status_code
        == 404
    )
    assert api_for(None).post("/api/gates/", {"campaign": a.pk}, format="json").status_code == 401


def test_attempt_detail_carries_the_provider_identity(api_for, bob, run_campaign):
    campaign = run_campaign("golden", tasks=1, n=1)
    attempt = Attempt.objects.get(campaign=campaign)
    Attempt.objects.filter(pk=attempt.pk).update(
        provider=[
            {"model": "m-1", "system_fingerprint": "fp", "headers": {"openai-version": "1"}, "calls": 3}
        ]
    )
    data = api_for(bob).get(f"/api/attempts/{attempt.pk}/").json()
    assert data["provider"] == [
        {"model": "m-1", "system_fingerprint": "fp", "headers": {"openai-version": "1"}, "calls": 3}
    ]


@pytest.fixture
def no_dispatch(monkeypatch):
    from apps.campaigns import services

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)


def test_watch_lifecycle_over_the_api(api_for, alice, bob, trish, erin, starter_suite, team_a, no_dispatch):
    from apps.agents.services import agent_config_for
    from apps.drift.models import WatchRun

    agent = agent_config_for("sim:steady")
    body = {
        "name": "api watch",
        "team": team_a.pk,
        "agent": agent.pk,
        "suite": starter_suite.pk,
        "task_ids": [T1, T2],
        "n_attempts": 2,
        "interval_minutes": 15,
    }
    assert api_for(bob).post("/api/watches/", body, format="json").status_code == 403
    created = api_for(alice).post("/api/watches/", body, format="json")
    assert created.status_code == 201
    watch = created.json()
    assert (watch["task_ids"], watch["schedule"], watch["enabled"]) == (
        sorted([T1, T2]),
        "every 15 minutes",
        True,
    )
    bad = api_for(alice).post("/api/watches/", {**body, "name": "x", "cron": "0 6 * * *"}, format="json")
    assert error_of(bad)["message"].startswith("non_field_errors: give either interval_minutes")

    run = api_for(alice).post(f"/api/watches/{watch['id']}/run/").json()
    assert (run["number"], run["trigger"], run["status"]) == (1, "manual", "running")
    assert api_for(alice).post(f"/api/watches/{watch['id']}/run/").status_code == 409
    runs = api_for(bob).get(f"/api/watches/{watch['id']}/runs/").json()
    assert [r["number"] for r in runs["results"]] == [1]

    WatchRun.objects.filter(pk=run["id"]).update(status="done", alert=True, alert_reasons=["x"])
    assert api_for(bob).post(f"/api/watch-runs/{run['id']}/acknowledge/").status_code == 403
    acknowledged = api_for(trish).post(f"/api/watch-runs/{run['id']}/acknowledge/").json()
    assert acknowledged["acknowledged_at"] is not None
    baseline = api_for(alice).post(f"/api/watch-runs/{run['id']}/baseline/").json()
    assert baseline["baseline"] == run["campaign"]

    patched = (
        api_for(alice).patch(f"/api/watches/{watch['id']}/", {"cron": "0 6 * * *"}, format="json").json()
    )
    assert (patched["cron"], patched["interval_minutes"], patched["schedule"]) == (
        "0 6 * * *",
        None,
        "cron 0 6 * * *",
    )
    assert api_for(erin).get(f"/api/watches/{watch['id']}/").status_code == 404
    assert api_for(alice).delete(f"/api/watches/{watch['id']}/").status_code == 204
    assert api_for(alice).get(f"/api/watches/{watch['id']}/").status_code == 404
