"""The health toggle on every metric page, its exports and the API: flagged tasks leave the figures only on request, and the page says so."""

from __future__ import annotations

import csv
import io

import pytest

from apps.dashboard import reports
from apps.dashboard.health import health_scope
from apps.triage import services
from apps.triage.models import Label
from tests.api.conftest import api_for  # noqa: F401 (fixture)
from tests.triage.conftest import T1, T2, _seeded_labels, attempts_campaign  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

INCLUDED = "1 task on the health list</a> included in these figures"
EXCLUDED = "1 task with open health issues is excluded from these figures"


@pytest.fixture
def flagged(attempts_campaign, trish):
    """Two campaigns on T1 (always fails, flagged grader bug) and T2 (always passes): pass@1 50% with T1, 100% without."""
    rows = [(T1, i, "fail", [], True) for i in range(4)] + [(T2, i, "pass", [], False) for i in range(4)]
    a, b = attempts_campaign(rows, name="Alpha"), attempts_campaign(rows, name="Beta")
    services.attempt_toggle_label(
        attempt=a.attempts.filter(task__task_id=T1).first(),
        label=Label.objects.get(name="grader bug"),
        actor=trish,
    )
    return a, b


def _csv(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_scope_excludes_only_when_asked(flagged):
    a, b = flagged
    t1 = a.tasks.get(task_id=T1).pk

    assert health_scope({}, [a, b]).exclude == frozenset()
    assert health_scope({"healthy": "exclude"}, [a, b]).exclude == frozenset({t1})
    assert health_scope({"healthy": "exclude"}, [a, b]).context() == {
        "healthy": "exclude",
        "unhealthy_count": 1,
        "excluded_count": 1,
    }


def test_excluding_frames_changes_their_stamps_so_cached_figures_never_mix(flagged):
    a, _ = flagged
    t1 = a.tasks.get(task_id=T1).pk

    frames, stamps = reports.load_frames([a])
    kept, kept_stamps = reports.load_frames([a], exclude=frozenset({t1}))

    assert (len(frames[a.pk]), len(kept[a.pk])) == (2, 1)
    assert kept_stamps[a.pk] != stamps[a.pk]
    full = reports.campaign_figures(a, frames[a.pk], stamps[a.pk])
    healthy = reports.campaign_figures(a, kept[a.pk], kept_stamps[a.pk])
    assert (full["pass_at_1"]["value"], healthy["pass_at_1"]["value"]) == (0.5, 1.0)


@pytest.mark.parametrize("page", ["gap", "cost", "domains", "compare"])
def test_every_metric_page_says_whether_flagged_tasks_are_in_its_figures(client, bob, flagged, page):
    a, b = flagged
    client.force_login(bob)
    query = f"a={a.pk}&b={b.pk}"

    included = client.get(f"/{page}/?{query}").content.decode()
    excluded = client.get(f"/{page}/?{query}&healthy=exclude").content.decode()

    assert (INCLUDED in included, EXCLUDED in included) == (True, False)
    assert (INCLUDED in excluded, EXCLUDED in excluded) == (False, True)
    assert 'name="healthy" value="exclude" id="filter-healthy" checked' in excluded


def test_gap_page_figures_follow_the_toggle(client, bob, flagged):
    client.force_login(bob)

    included = client.get("/gap/").context["points"]
    excluded = client.get("/gap/?healthy=exclude").context["points"]

    assert sorted((p["name"], p["all_n"]) for p in included) == [("Alpha", 0.5), ("Beta", 0.5)]
    assert sorted((p["name"], p["all_n"]) for p in excluded) == [("Alpha", 1.0), ("Beta", 1.0)]


def test_compare_and_domains_use_the_same_task_set_as_their_banner(client, bob, flagged):
    a, b = flagged
    client.force_login(bob)

    compared = client.get(f"/compare/?a={a.pk}&b={b.pk}&healthy=exclude").context["result"]
    deltas_form = client.get(f"/domains/?a={a.pk}&b={b.pk}&healthy=exclude").content.decode()

    assert [row["task_id"] for row in compared["per_task"]] == [T2]
    # The htmx delta form must keep the toggle, or the deltas would silently include the flagged task.
    assert '<input type="hidden" name="healthy" value="exclude">' in deltas_form


@pytest.mark.parametrize("table", ["gap", "cost", "domains"])
def test_exports_follow_the_toggle_and_say_how_many_tasks_they_leave_out(client, bob, flagged, table):
    client.force_login(bob)

    kept = _csv(client.get(f"/exports/tables/{table}.csv"))
    dropped = _csv(client.get(f"/exports/tables/{table}.csv?healthy=exclude"))

    assert {row["excluded unhealthy tasks"] for row in kept} == {"0"}
    assert {row["excluded unhealthy tasks"] for row in dropped} == {"1"}
    if table == "gap":
        assert [row["all-N share"] for row in kept] == ["0.5", "0.5"]
        assert [row["all-N share"] for row in dropped] == ["1.0", "1.0"]
    if table == "domains":
        assert sorted(row["domain"] for row in kept) == ["neobank", "neobank", "retail", "retail"]
        assert sorted(row["domain"] for row in dropped) == ["neobank", "neobank"]


def test_api_metrics_take_the_same_toggle(api_for, bob, flagged):
    a, b = flagged
    api = api_for(bob)

    board = {
        row["campaign"]["name"]: row["figures"]["pass_at_1"]["value"]
        for row in api.get("/api/metrics/leaderboard/?healthy=exclude").json()["results"]
    }
    gap = [row["all_n"] for row in api.get("/api/metrics/gap/?healthy=exclude").json()["results"]]
    compared = api.get(f"/api/metrics/compare/?a={a.pk}&b={b.pk}&healthy=exclude").json()
    bad = api.get("/api/metrics/gap/?healthy=maybe")

    assert board == {"Alpha": 1.0, "Beta": 1.0}
    assert gap == [1.0, 1.0]
    assert compared["tasks"] == 1
    assert bad.status_code == 400
