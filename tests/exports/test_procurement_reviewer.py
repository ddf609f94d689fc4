"""The procurement workbook answers a reviewer's questions (issue 30): when each campaign ran, the
leaderboard's ranking (ties under the noise floor, common ground), the chosen campaign against the
runner-up as the compare page words it, and the cost per 1,000 tasks at the asked dependability."""

from __future__ import annotations

import html
import io
from datetime import UTC, date, datetime

import pytest
from openpyxl import load_workbook

from apps.agents.models import PriceSheet
from apps.dashboard.selectors import DEFAULT_BUDGET, DEFAULT_TARGET_PERCENT, decide
from apps.exports.procurement import build_workbook
from apps.exports.review import ReviewerAsks
from apps.figures import selectors as figures
from tests.api.conftest import api_for  # noqa: F401 (fixture)
from tests.triage.conftest import T1, T2, T3

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewed(summaries_campaign):
    """Alpha and Beta ran three tasks at N = 4; Small ran one of them at N = 2 (a different test)."""
    sheet = PriceSheet.objects.create(
        name="Reviewer prices", source="vendor page", effective_date=date(2026, 11, 2), prices={}
    )
    alpha = summaries_campaign({T1: (4, 4), T2: (4, 4), T3: (4, 1)}, name="Alpha", n=4)
    beta = summaries_campaign({T1: (4, 4), T2: (4, 1), T3: (4, 0)}, name="Beta", n=4, agent="sim:careless")
    small = summaries_campaign({T1: (2, 2)}, name="Small", n=2, agent="sim:cautious")
    for campaign, day in ((alpha, 3), (beta, 4), (small, 5)):
        campaign.started_at = datetime(2026, 11, day, 9, 30, tzinfo=UTC)
        campaign.finished_at = datetime(2026, 11, day, 10, 15, tzinfo=UTC)
        campaign.price_sheet = sheet
        campaign.save(update_fields=["started_at", "finished_at", "price_sheet"])
    return alpha, beta, small


def _table(sheet) -> list[dict]:
    """The sheet's table (header row, then rows up to the first empty row) as dicts by title."""
    rows = list(sheet.iter_rows(values_only=True))
    header, out = rows[0], []
    for row in rows[1:]:
        if all(value is None for value in row):
            break
        out.append(dict(zip(header, row)))
    return out


def _caption(sheet) -> dict:
    """The "item, value" rows below the sheet's table."""
    rows = list(sheet.iter_rows(values_only=True))
    gap = next(i for i, row in enumerate(rows) if i and all(value is None for value in row))
    return {row[0]: row[1] for row in rows[gap + 1 :]}


def _book(campaigns, **asks):
    content, _ = build_workbook(campaigns=list(campaigns), asks=ReviewerAsks(**asks) if asks else None)
    return load_workbook(io.BytesIO(content))


def test_when_they_ran_sheet_holds_each_campaigns_dates_agent_and_price_sheet(reviewed):
    alpha, beta, small = reviewed

    rows = _table(_book(reviewed)["When they ran"])

    assert [(r["campaign"], r["started (UTC)"], r["finished (UTC)"]) for r in rows] == [
        ("Alpha", "2026-11-03T09:30:00+00:00", "2026-11-03T10:15:00+00:00"),
        ("Beta", "2026-11-04T09:30:00+00:00", "2026-11-04T10:15:00+00:00"),
        ("Small", "2026-11-05T09:30:00+00:00", "2026-11-05T10:15:00+00:00"),
    ]
    assert [r["agent"] for r in rows] == [alpha.agent.name, beta.agent.name, small.agent.name]
    assert [r["harness version"] for r in rows] == [c.harness_version for c in reviewed]
    assert {(r["price sheet"], r["price sheet effective date"]) for r in rows} == {
        ("Reviewer prices", "2026-11-02")
    }
    # Simulated personas report no endpoint identity.
    assert {r["model that answered (as the endpoint reported it)"] for r in rows} == {"—"}


def test_ranking_sheet_is_the_leaderboard_export_with_its_common_ground(client, bob, reviewed):
    client.force_login(bob)
    exported = _table(
        load_workbook(io.BytesIO(client.get("/exports/tables/leaderboard.xlsx").content)).worksheets[0]
    )

    sheet = _book(reviewed)["Ranking"]
    rows = _table(sheet)

    rank_title = next(title for title in rows[0] if title.startswith("rank by"))
    keys = (
        "campaign",
        rank_title,
        "rank on common ground",
        "common tasks",
        "common k",
        "what is compared",
    )
    assert [tuple(r[k] for k in keys) for r in rows] == [tuple(e[k] for k in keys) for e in exported]
    assert [r["rank on common ground"] for r in rows] == ["=1", "=1", "=1"]
    # The N = 2 one-task campaign is not ranked on its own figures: on the one common task, k = 2.
    assert {(r["common tasks"], r["common k"]) for r in rows} == {(1, 2)}
    assert _caption(sheet)["what is ranked"] == rows[0]["what is compared"]
    assert rows[0]["what is compared"].startswith("These campaigns ran different tests")


def test_comparison_sheet_is_the_compare_pages_figures_and_verdict(client, bob, reviewed):
    alpha, beta, _ = reviewed
    tables = figures.per_task_tables([alpha, beta])
    expected = figures.comparison(tables, alpha, beta)
    client.force_login(bob)
    page = client.get(f"/compare/?a={alpha.pk}&b={beta.pk}").content.decode()
    # Neither is dependable on 80% of tasks (all-4: 2/3 and 1/3): the two most dependable are compared.
    sheet = _book([alpha, beta])["Chosen vs runner-up"]

    caption = _caption(sheet)
    assert (caption["chosen"], caption["runner-up"]) == ("Alpha", "Beta")
    assert f'<p class="verdict" id="verdict">{html.escape(caption["verdict"])}</p>' in page
    rows = {r["figure"]: r for r in _table(sheet)}
    assert rows["pass@1"] == {
        "figure": "pass@1",
        "chosen": expected.pass_at_1.a,
        "runner-up": expected.pass_at_1.b,
        "Δ chosen − runner-up": expected.delta_pass_at_1.value,
        "Δ 95% lo": expected.delta_pass_at_1.lo,
        "Δ 95% hi": expected.delta_pass_at_1.hi,
        "noise floor (MDD)": expected.delta_pass_at_1.mdd,
        "clears the noise floor": expected.delta_pass_at_1.clears,
    }
    all_n = rows["all-4 share"]
    assert (all_n["chosen"], all_n["runner-up"]) == (pytest.approx(2 / 3), pytest.approx(1 / 3))
    assert (all_n["Δ chosen − runner-up"], all_n["Δ 95% lo"], all_n["Δ 95% hi"]) == (
        expected.delta_all_n.value,
        expected.delta_all_n.lo,
        expected.delta_all_n.hi,
    )
    assert all_n["noise floor (MDD)"] == expected.delta_all_n.mdd


def test_comparison_sheet_says_why_campaigns_of_different_n_are_not_compared(reviewed):
    # Small (all-2 on its one task) is the decision aid's pick at 80%; Alpha (N = 4) is next.
    sheet = _book(reviewed)["Chosen vs runner-up"]

    assert _table(sheet) == []
    assert _caption(sheet) == {
        "chosen": "Small",
        "runner-up": "Alpha",
        "verdict": "Small against Alpha: campaigns have different N (2 vs 4); all-N is not comparable.",
    }


def test_cost_sheet_is_the_decision_aids_answer_at_the_asked_dependability(reviewed):
    alpha, beta, small = reviewed
    decision = decide([alpha, beta, small], min_share=0.6, budget=DEFAULT_BUDGET)

    sheet = _book(reviewed, target_percent=60.0)["Cost at your target"]

    rows = _table(sheet)
    assert [r["campaign"] for r in rows] == [c.campaign.name for c in decision.candidates]
    assert [
        (r["all-N share"], r["dependable enough"], r["agent cost per 1,000 tasks $"], r["qualifies"])
        for r in rows
    ] == [
        (c.figures.all_n.value, c.meets_dependability, c.cost_per_1000, c.qualifies)
        for c in decision.candidates
    ]
    assert [r["reasons"] for r in rows] == ["; ".join(c.reasons) for c in decision.candidates]
    caption = _caption(sheet)
    assert caption["dependable on at least (% of tasks)"] == 60
    assert caption["budget ($ per 1,000 tasks)"] == DEFAULT_BUDGET
    assert caption["decision"] == decision.summary
    # Alpha (2/3) and Small (1/1) are dependable on 60% of tasks; Beta (1/3) is not.
    assert {r["campaign"]: r["dependable enough"] for r in rows} == {
        "Alpha": True,
        "Small": True,
        "Beta": False,
    }


def test_cost_sheet_defaults_to_the_decision_aids_target(reviewed):
    caption = _caption(_book(reviewed)["Cost at your target"])

    assert caption["dependable on at least (% of tasks)"] == DEFAULT_TARGET_PERCENT


def test_workbook_download_takes_the_reviewers_target_from_the_query(client, bob, reviewed):
    alpha, beta, _ = reviewed
    client.force_login(bob)

    response = client.get(f"/exports/procurement/?c={alpha.pk}&c={beta.pk}&download=1&target=55&budget=12.5")

    caption = _caption(load_workbook(io.BytesIO(response.content))["Cost at your target"])
    assert (caption["dependable on at least (% of tasks)"], caption["budget ($ per 1,000 tasks)"]) == (
        55,
        12.5,
    )


def test_workbook_over_the_api_takes_the_reviewers_target(api_for, bob, reviewed):
    alpha, _, _ = reviewed

    response = api_for(bob).get(f"/api/exports/procurement/?campaign={alpha.pk}&target=42")

    assert response.status_code == 200
    caption = _caption(load_workbook(io.BytesIO(response.content))["Cost at your target"])
    assert caption["dependable on at least (% of tasks)"] == 42
