"""The noise floor's tables as CSV/XLSX: the same numbers the pages show."""

from __future__ import annotations

import csv
import io

import pytest
from openpyxl import load_workbook

from apps.campaigns.services import campaign_replicate
from apps.exports.formulas import csv_text
from apps.figures import selectors as figures
from tests.campaigns.conftest import drain
from tests.triage.conftest import T1, T2, T3

pytestmark = pytest.mark.django_db


def _csv(response) -> list[dict]:
    assert response.status_code == 200
    # The About block comes first as "# key: value" comment lines.
    lines = [line for line in response.content.decode().splitlines() if not line.startswith("# ")]
    return list(csv.DictReader(lines))


@pytest.fixture
def pair(summaries_campaign):
    a = summaries_campaign({T1: (4, 4), T2: (4, 1), T3: (4, 0)}, name="Alpha", n=4)
    b = summaries_campaign({T1: (4, 4), T2: (4, 4), T3: (4, 1)}, name="Beta", n=4)
    for campaign in (a, b):
        campaign.status = "done"
        campaign.save(update_fields=["status"])
    return a, b


def test_leaderboard_export_carries_rank_band_and_standard_errors(client, bob, pair):
    client.force_login(bob)
    rows = {r.campaign.name: r for r in figures.leaderboard_rows(list(pair))}
    exported = {
        row["campaign"]: row for row in _csv(client.get("/exports/tables/leaderboard.csv?sort=pass1"))
    }
    for name, row in rows.items():
        # "=1" (tied) would be a formula in a spreadsheet: the CSV writes it as text
        assert exported[name]["rank by pass@1 (= tied within the noise floor)"] == csv_text(row.band.label)
        assert float(exported[name]["pass@1 SE"]) == pytest.approx(row.se["pass_at_1"])


def test_noise_export_has_every_scope_and_figure(client, bob, pair):
    a, _ = pair
    client.force_login(bob)
    rows = _csv(client.get(f"/exports/tables/noise.csv?c={a.pk}"))
    noise = figures.campaign_noise(figures.per_task_tables([a]), a)
    expected = [(scope or "all tasks", m.label) for scope, metrics in noise.scopes.items() for m in metrics]
    assert [(row["tasks"], row["figure"]) for row in rows] == expected
    overall = noise.metric("pass_at_1")
    first = rows[0]
    assert float(first["rerun floor (MDD, α 0.05, power 0.8)"]) == pytest.approx(overall.rerun_mdd)
    assert float(first["standard error (task bootstrap)"]) == pytest.approx(overall.se)


def test_replicates_export_lists_each_sets_spread(client, alice, bob, run_campaign):
    original = run_campaign("sim:explorer", tasks=4, n=2, name="Explorer")
    drain(campaign_replicate(campaign=original, owner=alice))
    client.force_login(bob)
    rows = _csv(client.get("/exports/tables/replicates.csv"))
    assert {row["figure"] for row in rows} == {"pass@1", "pass^N", "all-N share"}
    assert {row["replicate set"] for row in rows} == {"Explorer"}
    assert all(row["replicates"] == "2" for row in rows)


def test_planner_export_is_the_pages_plan(client, bob, run_campaign):
    pilot = run_campaign("sim:explorer", tasks=6, n=4, name="Pilot")
    client.force_login(bob)
    rows = _csv(client.get(f"/exports/tables/planner.csv?campaigns={pilot.pk}&mode=drift&target_pp=10"))
    plan = figures.attempts_plan(
        [pilot], figures.per_task_tables([pilot]), target=0.1, mode="drift", tasks_available=56
    )
    assert [int(row["tasks needed"]) for row in rows] == [row.tasks_needed for row in plan.rows]
    assert _csv(client.get("/exports/tables/planner.csv")) == []


def test_gate_export_lists_the_rules(client, bob, pair):
    a, b = pair
    client.force_login(bob)
    rows = _csv(
        client.get(f"/exports/tables/gate.csv?campaign={a.pk}&baseline={b.pk}&min_pass1=0.9&max_drop_pp=1")
    )
    assert [(row["rule"], row["verdict"]) for row in rows][0] == ("min-pass1", "fail")
    assert len(rows) == 3


def test_drift_export_has_a_row_per_run_with_deltas_and_floors(
    client, bob, alice, team_a, starter_suite, monkeypatch
):
    from apps.agents.services import agent_config_for
    from apps.campaigns import services
    from apps.drift.services import drift_tick, watch_create

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)
    watch = watch_create(
        name="export watch",
        team=team_a,
        owner=alice,
        agent=agent_config_for("sim:steady"),
        suite=starter_suite,
        tasks=list(starter_suite.tasks.order_by("task_id")[:3]),
        n_attempts=2,
        interval_minutes=1,
    )
    drift_tick()
    drain(watch.runs.get().campaign)
    drift_tick()
    client.force_login(bob)
    response = client.get(f"/exports/tables/drift.xlsx?watch={watch.pk}")
    sheet = load_workbook(io.BytesIO(response.content)).active
    header = [cell.value for cell in sheet[1]]
    assert header[:3] == ["watch", "run", "campaign"]
    assert "noise floor pass@1 vs baseline" in header
    assert sheet.max_row == 2  # one run so far
