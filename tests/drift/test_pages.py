"""Drift pages: the list with history charts, a watch's runs, set-up and actions, by role and team."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.core.charts import PALETTE
from apps.drift.models import Watch, WatchRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def watched(make_watch, tick):
    """A watch with two evaluated runs (the second flagged as an alert)."""
    from datetime import timedelta

    from django.utils import timezone

    watch = make_watch(interval_minutes=1)
    start = timezone.now()
    for minutes in (0, 1, 2):
        tick(now=start + timedelta(minutes=minutes))
    WatchRun.objects.filter(watch=watch, number=2).update(
        alert=True, alert_reasons=["pass@1 -9.0 pp vs baseline"]
    )
    return watch


def test_drift_list_shows_each_watch_with_last_run_alerts_and_history_charts(client, bob, watched):
    client.force_login(bob)
    response = client.get("/drift/")
    html = response.content.decode()
    assert response.status_code == 200
    assert f'data-watch="{watched.pk}"' in html
    assert "1 open</a>" in html
    row, charts = response.context["rows"][0]
    assert [c["id"] for c in charts] == [
        f"chart-watch-{watched.pk}-pass_at_1",
        f"chart-watch-{watched.pk}-all_n",
    ]
    figure = charts[0]["chart"]["figure"]
    assert figure["data"][0]["x"] == [1, 2]  # the evaluated runs
    assert figure["data"][0]["marker"]["color"] == [PALETTE[0], PALETTE[3]]  # the alert run stands out


def test_watch_detail_lists_runs_with_deltas_floors_and_alert_reasons(client, bob, watched):
    client.force_login(bob)
    html = client.get(f"/drift/{watched.pk}/").content.decode()
    assert 'id="run-2"' in html
    assert "pass@1 -9.0 pp vs baseline" in html
    assert "floor" in html
    assert "acknowledge" not in html  # bob is a viewer


def test_triager_acknowledges_an_alert_and_the_badge_goes(client, trish, watched):
    run = WatchRun.objects.get(watch=watched, number=2)
    client.force_login(trish)
    assert 'id="drift-badge"' in client.get("/leaderboard/").content.decode()

    response = client.post(f"/drift/runs/{run.pk}/acknowledge/")

    run.refresh_from_db()
    assert (response.status_code, run.acknowledged_by) == (302, trish)
    assert 'id="drift-badge"' not in client.get("/leaderboard/").content.decode()


def test_viewer_cannot_act_on_a_watch(client, bob, watched):
    client.force_login(bob)
    run = WatchRun.objects.get(watch=watched, number=2)
    assert client.post(f"/drift/{watched.pk}/run/").status_code == 403
    assert client.post(f"/drift/runs/{run.pk}/acknowledge/").status_code == 403
    assert client.get("/drift/new/").status_code == 403


def test_other_teams_get_404_for_a_watch_and_see_none_in_the_list(client, erin, watched):
    client.force_login(erin)
    assert client.get(f"/drift/{watched.pk}/").status_code == 404
    assert "steady watch" not in client.get("/drift/").content.decode()
    run = WatchRun.objects.get(watch=watched, number=1)
    assert client.post(f"/drift/runs/{run.pk}/acknowledge/").status_code == 403  # viewer: role first


def test_operator_creates_a_watch_from_the_form(client, alice, starter_suite, team_a, no_dispatch):
    from apps.agents.services import agent_config_for

    agent = agent_config_for("sim:steady")
    client.force_login(alice)
    response = client.post(
        "/drift/new/",
        {
            "name": "nightly steady",
            "team": team_a.pk,
            "agent": agent.pk,
            "suite": starter_suite.pk,
            "domains": "retail",
            "task_ids": "",
            "n_attempts": 3,
            "interval_minutes": "",
            "cron": "0 2 * * *",
            "probe_minutes": 0,
            "webhook": "on",
        },
    )
    watch = Watch.objects.get(name="nightly steady")
    assert response.status_code == 302
    assert response["Location"] == f"/drift/{watch.pk}/"
    assert (watch.cron, watch.interval_minutes, watch.n_attempts) == ("0 2 * * *", None, 3)
    assert set(watch.tasks.values_list("domain__name", flat=True)) == {"retail"}
    bad = client.post(
        "/drift/new/",
        {
            "name": "x",
            "team": team_a.pk,
            "agent": agent.pk,
            "suite": starter_suite.pk,
            "n_attempts": 3,
            "probe_minutes": 0,
        },
    )
    assert "give either interval_minutes" in bad.content.decode()


def test_operator_runs_now_pauses_and_deletes(client, alice, make_watch):
    watch = make_watch()
    client.force_login(alice)
    client.post(f"/drift/{watch.pk}/run/")
    assert WatchRun.objects.get(watch=watch).trigger == "manual"
    client.post(f"/drift/{watch.pk}/toggle/")
    watch.refresh_from_db()
    assert (watch.enabled, watch.next_run_at) == (False, None)
    client.post(f"/drift/{watch.pk}/delete/")
    assert not Watch.objects.filter(pk=watch.pk).exists()


@pytest.mark.parametrize("watches", [1, 3])
def test_drift_list_query_count_does_not_grow_with_watches(client, bob, make_watch, tick, watches):
    for index in range(watches):
        make_watch(name=f"watch {index}")
    tick()
    client.force_login(bob)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/drift/").status_code == 200
    # session, user, role (read once per request), watches (teams as a subquery), runs
    assert len(queries.captured_queries) == 5


@pytest.mark.parametrize("runs", [1, 3])
def test_watch_detail_query_count_does_not_grow_with_runs(client, bob, make_watch, runs):
    from apps.drift.services import watch_run_now

    watch = make_watch()
    for _ in range(runs):
        run = watch_run_now(watch=watch)
        WatchRun.objects.filter(pk=run.pk).update(status="done")
    client.force_login(bob)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/drift/{watch.pk}/").status_code == 200
    assert len(queries.captured_queries) == 6


def test_campaign_page_replicates_a_finished_campaign(client, alice, run_campaign):
    original = run_campaign("sim:steady", tasks=2, n=2, name="Steady")
    client.force_login(alice)
    response = client.post(f"/campaigns/{original.pk}/replicate/")
    from apps.campaigns.models import Campaign

    replicate = Campaign.objects.get(replicate_of=original)
    assert response["Location"] == f"/campaigns/{replicate.pk}/"
    assert (replicate.seed, replicate.name, replicate.n_attempts) == (1, "Steady · replicate 2", 2)
    assert list(replicate.tasks.all()) == list(original.tasks.all())
    html = client.get(f"/campaigns/{original.pk}/").content.decode()
    assert "Steady · replicate 2" in html
