"""Figures selectors: typed results carry exactly the engine's figures, cached per stamp; one task grid."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from apps.figures import selectors as figures
from apps.figures.results import NO_ESTIMATE, TaskCell
from apps.figures.task_grid import task_matches
from tb_engine.metrics import campaign_metrics, paired_comparison

pytestmark = pytest.mark.django_db

T1, T2, T3 = (
    "retail/ticket_hold_carrier_exception",
    "neobank/freeze_misplaced_card",
    "travel/cancel_flexible_full_refund",
)


def _json(value):
    return json.loads(json.dumps(value))


@pytest.fixture
def demo_like(run_campaign):
    """Two simulated personas on the same six tasks, N = 4: real attempts, tokens, failures, infra-free."""
    careless = run_campaign("sim:careless", tasks=6, n=4, name="Careless")
    explorer = run_campaign("sim:explorer", tasks=6, n=4, name="Explorer")
    return careless, explorer


def test_campaign_figures_carry_every_engine_figure_on_demo_like_data(demo_like):
    for campaign in demo_like:
        tables = figures.per_task_tables([campaign])
        frame = tables.frame(campaign)
        # What the dashboard's reports returned before figures were typed: the engine's dict plus three extras.
        expected = campaign_metrics(frame, n_attempts=campaign.n_attempts)
        billed = expected["cost"]["billed_attempts"]
        expected["mean_tokens"] = int(frame["input_tokens"].sum() + frame["output_tokens"].sum()) / billed
        expected["unpriced"] = int(frame["unpriced"].sum())
        expected["eval_tokens"] = int(frame["eval_tokens"].sum())

        typed = figures.campaign_figures(tables, campaign)

        assert _json(asdict(typed)) == _json(expected)
        assert typed.pass_at_n == typed.pass_at_k[4]
        assert typed.pass_hat_n == typed.pass_hat_k[4]
        assert (typed.pass_at_5, typed.pass_at_10, typed.pass_hat_5) == (NO_ESTIMATE,) * 3
        assert typed.pass_hat_5_plugin is None
        assert typed.pass_hat_n_plugin == expected["pass_hat_k_plugin"][4]


def test_campaign_figures_of_a_domain_slice_average_over_its_tasks_only(summaries_campaign):
    campaign = summaries_campaign({T1: (4, 4), T2: (4, 0), T3: (4, 2)}, name="Mixed", n=4)
    tables = figures.per_task_tables([campaign])

    retail = figures.campaign_figures(tables, campaign, domain="retail")
    everything = figures.campaign_figures(tables, campaign)

    assert (retail.coverage.tasks, retail.pass_at_1.value, retail.all_n.count) == (1, 1.0, 1)
    assert (everything.coverage.tasks, everything.pass_at_1.value) == (3, pytest.approx(0.5))
    assert everything.gap_pp.value == pytest.approx(100 * (2 / 3 - 1 / 3))


def test_comparison_carries_the_engine_paired_comparison(demo_like):
    careless, explorer = demo_like
    tables = figures.per_task_tables([careless, explorer])

    typed = figures.comparison(tables, careless, explorer)

    expected = paired_comparison(tables.frame(careless), tables.frame(explorer), n_attempts=4)
    assert _json(asdict(typed)) == _json(expected)
    assert [t.task_id for t in typed.per_task] == sorted(tables.frame(careless)["task_id"])


def test_comparison_refuses_different_n(summaries_campaign):
    a = summaries_campaign({T1: (4, 4)}, name="N4", n=4)
    b = summaries_campaign({T1: (2, 2)}, name="N2", n=2)

    with pytest.raises(ValueError) as refused:
        figures.comparison(figures.per_task_tables([a, b]), a, b)

    assert str(refused.value) == "campaigns have different N (4 vs 2); all-N is not comparable"


def test_domain_figures_are_point_estimates_with_none_where_nothing_ran(summaries_campaign):
    campaign = summaries_campaign({T1: (2, 1), T2: (0, 0), T3: (2, 2)}, name="Partial", n=2)

    rows = figures.domain_figures(figures.per_task_tables([campaign]), campaign)

    assert [asdict(row) for row in rows] == [
        {"domain": "neobank", "tasks": 1, "pass_at_1": None, "pass_at_n": 0.0, "all_n": 0.0},
        {"domain": "retail", "tasks": 1, "pass_at_1": 0.5, "pass_at_n": 1.0, "all_n": 0.0},
        {"domain": "travel", "tasks": 1, "pass_at_1": 1.0, "pass_at_n": 1.0, "all_n": 1.0},
    ]
    assert rows[1].share("pass_at_n") == 1.0
    with pytest.raises(KeyError):
        rows[1].share("pass_at_7")


def test_leaderboard_rows_mark_reversals_and_sort_absent_values_last(summaries_campaign):
    broad = summaries_campaign({T1: (4, 2), T2: (4, 1), T3: (4, 3)}, name="Broad", n=4)
    narrow = summaries_campaign({T1: (4, 4), T2: (4, 0), T3: (4, 0)}, name="Narrow", n=4)
    empty = summaries_campaign({T1: (0, 0)}, name="Nothing ran", n=4)

    rows = figures.leaderboard_rows([broad, narrow, empty])

    assert [(row.campaign.name, row.reversed_with) for row in rows] == [
        ("Broad", ("Narrow",)),
        ("Narrow", ("Broad",)),
        ("Nothing ran", ()),
    ]
    up = figures.sort_rows(rows, key="pass1", descending=False)
    down = figures.sort_rows(rows, key="pass1", descending=True)
    assert [row.campaign.name for row in up] == ["Narrow", "Broad", "Nothing ran"]
    assert [row.campaign.name for row in down] == ["Broad", "Narrow", "Nothing ran"]


def test_figures_are_cached_per_stamp_and_recomputed_when_a_summary_changes(summaries_campaign, monkeypatch):
    from apps.attempts.models import TaskSummary

    computed = []
    engine = figures.campaign_metrics
    monkeypatch.setattr(figures, "campaign_metrics", lambda *a, **k: computed.append(1) or engine(*a, **k))
    campaign = summaries_campaign({T1: (4, 1)}, name="Changing", n=4)

    first = figures.campaign_figures(figures.per_task_tables([campaign]), campaign)
    again = figures.campaign_figures(figures.per_task_tables([campaign]), campaign)
    # summary_refresh-style bulk_update leaves updated_at alone: the stamp's sums must notice.
    summary = TaskSummary.objects.get(campaign=campaign)
    summary.n_pass = 3
    TaskSummary.objects.bulk_update([summary], ["n_pass"])
    changed = figures.campaign_figures(figures.per_task_tables([campaign]), campaign)

    assert again == first
    assert (first.pass_at_1.value, changed.pass_at_1.value) == (0.25, 0.75)
    assert len(computed) == 2  # the second read was a cache hit


def test_whatif_cost_reprices_the_stored_token_sums(summaries_campaign):
    from apps.attempts.models import TaskSummary

    campaign = summaries_campaign({T1: (2, 2), T2: (2, 0)}, name="Priced", n=2)
    TaskSummary.objects.filter(campaign=campaign).update(
        input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=200_000, reasoning_tokens=50_000
    )
    stored = figures.campaign_figures(figures.per_task_tables([campaign]), campaign)

    result = figures.whatif_cost(
        stored, {"input": 2.0, "cached_input": 1.0, "output": 10.0, "reasoning": 20.0}
    )

    # uncached 1.2M * 2 + cached 0.8M * 1 + visible output 0.3M * 10 + reasoning 0.1M * 20 = 8.2 USD
    assert (result.agent_cost, result.cost_per_attempt, result.cost_per_success) == (
        pytest.approx(8.2),
        pytest.approx(8.2 / 4),
        pytest.approx(8.2 / 2),
    )
    assert result.cost_per_dependable_task == pytest.approx(8.2)
    assert result.stored == stored.cost


def test_task_grid_leaves_a_gap_where_a_campaign_did_not_run_the_task(summaries_campaign):
    one = summaries_campaign({T1: (2, 2), T2: (2, 0)}, name="One", n=2)
    two = summaries_campaign({T1: (2, 1), T3: (2, 1)}, name="Two", n=2)

    grid = figures.task_grid([one, two])
    retail = figures.task_grid([one, two], domain="retail")

    assert [(row.task_id, row.domain, row.cells) for row in grid] == [
        (T2, "neobank", (TaskCell(c=0, n=2, N=2), None)),
        (T1, "retail", (TaskCell(c=2, n=2, N=2), TaskCell(c=1, n=2, N=2))),
        (T3, "travel", (None, TaskCell(c=1, n=2, N=2))),
    ]
    assert [row.task_id for row in retail] == [T1]
    assert [row.task_id for row in figures.task_grid([one, two], kind="flaky")] == [T1]
    assert [row.task_id for row in figures.task_grid([one, two], kind="no-such-filter")] == [T2, T1, T3]


@pytest.mark.parametrize(
    ("cells", "kind", "matches"),
    [
        ((TaskCell(0, 2, 2), None), "never", True),
        ((TaskCell(1, 2, 2), TaskCell(0, 2, 2)), "unreliable", True),
        ((TaskCell(2, 2, 2), TaskCell(0, 2, 2)), "unreliable", False),
        ((TaskCell(2, 2, 2), TaskCell(1, 2, 2)), "flaky", True),
        ((TaskCell(2, 2, 2), TaskCell(2, 2, 2)), "flaky", False),
        ((TaskCell(1, 1, 2),), "flaky", False),  # c = n but fewer than N done: not dependable
        ((TaskCell(1, 1, 2),), "", True),
    ],
)
def test_task_matches_each_filter(cells, kind, matches):
    assert task_matches(cells, kind) is matches


def test_task_cell_rate_and_dependable():
    assert (TaskCell(c=1, n=4, N=4).rate, TaskCell(c=0, n=0, N=4).rate) == (0.25, None)
    assert (TaskCell(c=4, n=4, N=4).dependable, TaskCell(c=3, n=3, N=4).dependable) == (True, False)


def test_figure_campaigns_are_newest_first_and_only_visible(summaries_campaign, bob, erin):
    older = summaries_campaign({T1: (1, 1)}, name="Older", n=1)
    newer = summaries_campaign({T1: (1, 1)}, name="Newer", n=1)

    assert [c.name for c in figures.figure_campaigns(bob)] == ["Newer", "Older"]
    assert [c.name for c in figures.figure_campaigns(bob, ids=[older.pk])] == ["Older"]
    assert figures.figure_campaigns(erin, ids=[newer.pk]) == []
