"""Reads behind the dashboard: visible campaigns, per-task summary tables and their cache stamps.

Pages never scan attempts for figures: every figure comes from TaskSummary rows (one per
campaign x task, kept current by the campaigns app), loaded in a constant number of queries.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
from django.db.models import Count, Max, Sum

from apps.campaigns.models import Attempt, Campaign, TaskSummary
from apps.campaigns.selectors import campaigns_visible_to
from apps.suites.models import Task

TOKEN_COLUMNS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "eval_tokens")
STAMP_SUMS = (
    "n_done",
    "n_pass",
    "n_infra_error",
    "n_clean_looking",
    "input_tokens",
    "output_tokens",
    "agent_cost",
    "eval_cost",
)
FRAME_COLUMNS = (
    "task_pk",
    "task_id",
    "domain",
    "tags",
    "n",
    "c",
    "infra_errors",
    "clean_looking",
    "agent_cost",
    "eval_cost",
    "unpriced",
    *TOKEN_COLUMNS,
)


def dashboard_campaigns(user, *, ids: Iterable[int] | None = None) -> list[Campaign]:
    """Campaigns the user may see (optionally only `ids`), with agent and price sheet, newest first."""
    queryset = campaigns_visible_to(user).select_related("price_sheet").order_by("-created_at", "-pk")
    if ids is not None:
        queryset = queryset.filter(pk__in=list(ids))
    return list(queryset)


def summary_stamps(campaign_ids: Iterable[int]) -> dict[int, str]:
    """Per campaign a token that changes whenever one of its summaries changes (one query).

    Besides max(updated_at) and the row count it folds in the sums of the counted columns:
    summary_refresh updates rows with bulk_update, which does not touch auto_now fields, so
    updated_at alone would miss a re-graded attempt.
    """
    ids = list(campaign_ids)
    sums = {f"sum_{name}": Sum(name) for name in STAMP_SUMS}
    rows = (
        TaskSummary.objects.filter(campaign_id__in=ids)
        .order_by()
        .values("campaign_id")
        .annotate(latest=Max("updated_at"), rows=Count("id"), **sums)
    )
    stamps = dict.fromkeys(ids, "empty")
    for row in rows:
        parts = [f"{row['latest'].timestamp():.6f}", str(row["rows"])] + [str(row[key]) for key in sums]
        stamps[row["campaign_id"]] = "-".join(parts)
    return stamps


def per_task_frames(campaign_ids: Iterable[int]) -> dict[int, pd.DataFrame]:
    """One per-task table per campaign (every selected task, n = c = 0 when nothing ran yet); two queries."""
    ids = list(campaign_ids)
    membership = Campaign.tasks.through.objects.filter(campaign_id__in=ids).values_list(
        "campaign_id", "task_id", "task__task_id", "task__domain__name", "task__tags"
    )
    summaries = TaskSummary.objects.filter(campaign_id__in=ids).values_list(
        "campaign_id",
        "task_id",
        "n_done",
        "n_pass",
        "n_infra_error",
        "n_clean_looking",
        "agent_cost",
        "eval_cost",
        "unpriced_attempts",
        *TOKEN_COLUMNS,
    )
    counts = {(row[0], row[1]): row[2:] for row in summaries}
    empty = (0, 0, 0, 0, 0.0, 0.0, 0, *([0] * len(TOKEN_COLUMNS)))
    rows: dict[int, list[tuple]] = {campaign_id: [] for campaign_id in ids}
    for (
        campaign_id,
        task_pk,
        task_id,
        domain,
        tags,
    ) in membership:
        values = counts.get((campaign_id, task_pk), empty)
        rows[campaign_id].append((task_pk, task_id, domain, list(tags or []), *values))
    frames = {}
    for campaign_id, records in rows.items():
        frame = pd.DataFrame.from_records(records, columns=FRAME_COLUMNS)
        frame[["agent_cost", "eval_cost"]] = frame[["agent_cost", "eval_cost"]].astype(float)
        frames[campaign_id] = frame.sort_values("task_id", kind="stable").reset_index(drop=True)
    return frames


def filter_options(campaigns: list[Campaign]) -> tuple[list[str], list[str]]:
    """Domains and tags present in the campaigns' suites, sorted (one query)."""
    suite_ids = {campaign.suite_id for campaign in campaigns}
    domains, tags = set(), set()
    for domain, task_tags in Task.objects.filter(suite_id__in=suite_ids).values_list("domain__name", "tags"):
        domains.add(domain)
        tags.update(task_tags or [])
    return sorted(domains), sorted(tags)


def attempt_strip(*, task: Task, campaigns: list[Campaign]) -> dict[int, list[Attempt]]:
    """Every attempt of `task` in the campaigns, by campaign, without the big result JSON (one query)."""
    strips: dict[int, list[Attempt]] = {campaign.pk: [] for campaign in campaigns}
    attempts = (
        Attempt.objects.filter(task=task, campaign_id__in=list(strips))
        .only("id", "campaign_id", "index", "status", "verdict", "termination", "categories", "clean_looking")
        .order_by("campaign_id", "index")
    )
    for attempt in attempts:
        strips[attempt.campaign_id].append(attempt)
    return strips


def attempt_neighbours(attempt: Attempt) -> tuple[int | None, int | None]:
    """Ids of the previous and next attempt (by index) of the same campaign and task (one query)."""
    siblings = list(
        Attempt.objects.filter(campaign_id=attempt.campaign_id, task_id=attempt.task_id)
        .order_by("index")
        .values_list("id", "index")
    )
    before = [pk for pk, index in siblings if index < attempt.index]
    after = [pk for pk, index in siblings if index > attempt.index]
    return (before[-1] if before else None, after[0] if after else None)
