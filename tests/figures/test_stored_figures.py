"""Stored figures equal figures recomputed from the attempts after every kind of change, and a change
to one campaign rewrites that campaign's stored rows only.

Each test stores every figure (figures_refresh, as at the end of a campaign), changes the record the
way the product does (new attempts, a cancel, a re-run, a label, a suite revision), then reads the
figures as a fresh server process would (process cache emptied: only the stored rows) and compares
them with figures recomputed from scratch (no stored row, the summaries recounted from the attempts).
"""

from __future__ import annotations

import dataclasses

import pytest

from apps.attempts.models import Attempt
from apps.attempts.summaries import summary_refresh
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_cancel, campaign_resume, campaign_start
from apps.figures import selectors as figures
from apps.figures.models import StoredFigure
from apps.figures.services import figures_refresh
from apps.figures.tables import forget_process_figures
from apps.suites.services import suite_store
from apps.worker.attempts import attempt_execute
from tb_engine.loader import load_builtin_suite
from tests.campaigns.conftest import drain
from tests.triage.conftest import T1, T2, _seeded_labels, attempts_campaign, flagged  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def page_figures(campaigns: list[Campaign], *, exclude: frozenset[int] = frozenset(), tag: str = "") -> dict:
    """Everything the dashboard pages read per campaign, through the selectors the pages call."""
    campaigns = [Campaign.objects.select_related("price_sheet").get(pk=c.pk) for c in campaigns]
    tables = figures.per_task_tables(campaigns, exclude=exclude)
    shown = {}
    for campaign in campaigns:
        shown[campaign.pk] = {
            "figures": figures.campaign_figures(tables, campaign),
            "tag": figures.campaign_figures(tables, campaign, tag=tag) if tag else None,
            "curves": figures.pass_hat_curves(tables, campaign),
            "domains": figures.domain_figures(tables, campaign),
            "noise": [
                dataclasses.asdict(m)
                for scope in figures.campaign_noise(tables, campaign).scopes.values()
                for m in scope
            ],
            "frame": tables.frame(campaign).to_dict("list"),
        }
    rows = figures.leaderboard_rows(campaigns, exclude=exclude)
    shown["leaderboard"] = [
        (row.campaign.pk, row.figures, row.band, row.se, row.reversed_with) for row in rows
    ]
    return shown


def as_a_fresh_process_reads(campaigns, **kwargs) -> dict:
    forget_process_figures()
    return page_figures(campaigns, **kwargs)


def recomputed(campaigns, **kwargs) -> dict:
    """Figures computed from scratch: no stored row, no cached value, summaries recounted from the attempts."""
    for campaign in campaigns:
        summary_refresh(campaign_id=campaign.pk)
    shown = as_a_fresh_process_reads(campaigns, **kwargs)  # computed (nothing stored at these stamps)…
    StoredFigure.objects.all().delete()
    forget_process_figures()
    again = page_figures(campaigns, **kwargs)  # …and computed again with nothing stored at all
    assert again == shown
    return again


def stored_rows(campaign: Campaign) -> dict[str, tuple[str, object]]:
    return {
        row.slot: (row.version, row.computed_at)
        for row in StoredFigure.objects.filter(campaign_id=campaign.pk)
    }


@pytest.fixture
def two_campaigns(make_campaign):
    """A (sim:steady, half of its attempts run) and B (finished), both on the same three tasks, N = 4."""
    a, b = make_campaign("sim:steady", tasks=3, n=4), make_campaign("sim:careless", tasks=3, n=4)
    Campaign.objects.filter(pk=b.pk).update(name="careless")
    for campaign in (a, b):
        campaign_start(campaign=campaign)
    for attempt_id in Attempt.objects.filter(campaign=a, index__lt=2).values_list("id", flat=True):
        attempt_execute(attempt_id=attempt_id, worker="test-worker:1")
    drain(b)
    figures_refresh(campaign_ids=[a.pk, b.pk])
    return a, b


def test_new_attempts_change_the_stored_figures_of_their_campaign_only(two_campaigns):
    a, b = two_campaigns
    before = as_a_fresh_process_reads([a, b])
    b_rows = stored_rows(b)

    drain(a)  # the other half of A's attempts are recorded

    after = as_a_fresh_process_reads([a, b])
    assert (
        after[a.pk]["figures"].coverage.done_attempts == 12 != before[a.pk]["figures"].coverage.done_attempts
    )
    assert after[b.pk] == before[b.pk]
    assert {
        slot: row for slot, row in stored_rows(b).items() if slot in b_rows
    } == b_rows  # B's rows untouched
    assert after == recomputed([a, b])


def test_cancel_then_re_run_stored_figures_equal_recomputed(two_campaigns):
    a, b = two_campaigns

    campaign_cancel(campaign=a)
    cancelled = as_a_fresh_process_reads([a, b])
    assert cancelled == recomputed([a, b])

    figures_refresh(campaign_ids=[a.pk])
    campaign_resume(campaign=Campaign.objects.get(pk=a.pk))  # the cancelled attempts run again
    drain(a)
    rerun = as_a_fresh_process_reads([a, b])
    assert rerun[a.pk]["figures"].coverage.done_attempts == 12
    assert rerun == recomputed([a, b])


def test_a_label_that_flags_a_task_changes_the_figures_without_it_and_nothing_stored(flagged):
    a, b = flagged
    t1 = a.tasks.get(task_id=T1).pk
    figures_refresh(campaign_ids=[a.pk, b.pk])
    rows = {c.pk: stored_rows(c) for c in (a, b)}

    with_t1 = as_a_fresh_process_reads([a, b])
    without_t1 = as_a_fresh_process_reads([a, b], exclude=frozenset({t1}))

    assert {slot: stored_rows(a)[slot] for slot in rows[a.pk]} == rows[a.pk]  # the full-set rows stay
    assert (with_t1[a.pk]["figures"].pass_at_1.value, without_t1[a.pk]["figures"].pass_at_1.value) == (
        0.5,
        1.0,
    )
    assert with_t1 == recomputed([a, b])
    assert without_t1 == recomputed([a, b], exclude=frozenset({t1}))


def test_a_suite_revision_that_retags_a_task_changes_the_stored_tag_slice(two_campaigns):
    a, b = two_campaigns
    drain(a)
    figures_refresh(campaign_ids=[a.pk, b.pk])
    task = a.tasks.order_by("task_id").first()
    before = as_a_fresh_process_reads([a, b], tag="i31-retagged")
    assert before[a.pk]["tag"].coverage.tasks == 0

    spec = load_builtin_suite("starter")
    retagged = spec.tasks[task.task_id]
    spec.tasks[task.task_id] = dataclasses.replace(retagged, tags=(*retagged.tags, "i31-retagged"))
    suite_store(spec=spec)

    after = as_a_fresh_process_reads([a, b], tag="i31-retagged")
    assert after[a.pk]["tag"].coverage.tasks == 1
    assert after == recomputed([a, b], tag="i31-retagged")


def test_a_regrade_apply_rewrites_the_stored_figures_of_the_campaigns_it_changes(
    two_campaigns, make_campaign, team_a, alice
):
    from apps.figures.tables import cache_key, stored_values
    from apps.regrade.services import regrade_apply, regrade_preview
    from apps.suites.models import Task
    from tb_engine.spec_json import task_from_dict

    a, b = two_campaigns
    drain(a)
    other = make_campaign("sim:steady", tasks=3, n=2)  # not re-graded: its stored rows must stay
    campaign_start(campaign=other)
    drain(other)
    figures_refresh(campaign_ids=[a.pk, b.pk, other.pk])
    before = as_a_fresh_process_reads([a, b])
    other_rows = stored_rows(other)

    # A new golden end state for every task (each loses its last golden write): the attempts that
    # made that write now leave an extra effect, so verdicts flip without re-running anything.
    for task in Task.objects.filter(pk__in=a.tasks.values("pk")):
        spec = task.spec
        spec["golden"] = spec["golden"][:-1]
        task.spec, task.content_hash = spec, task_from_dict(spec).content_hash()
        task.save(update_fields=["spec", "content_hash"])
    run = regrade_preview(campaign_ids=[a.pk, b.pk], team_id=team_a.pk, user=alice)
    assert run.report["changed"] > 0, "the new golden end state must change some grading"
    regrade_apply(run=run, user=alice)

    # The apply stored the new figures itself: a fresh process finds them at the new version.
    forget_process_figures()
    for campaign in (a, b):
        campaign = Campaign.objects.get(pk=campaign.pk)
        tables = figures.per_task_tables([campaign])
        key = cache_key(
            "figures", campaign.pk, f"{tables.stamp(campaign)}|{campaign.n_attempts}", "", "", tables.scope
        )
        assert list(stored_values([key])) == [key]
    after = as_a_fresh_process_reads([a, b])
    assert after != before
    assert after[a.pk]["figures"].pass_at_1.value < before[a.pk]["figures"].pass_at_1.value
    assert {slot: row for slot, row in stored_rows(other).items() if slot in other_rows} == other_rows
    assert after == recomputed([a, b])
