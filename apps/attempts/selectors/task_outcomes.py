"""Campaigns' outcomes task by task: the stored (n, c) per task and every done attempt's verdict.

What a calibration is fitted on (apps.adaptive): the counts come from TaskSummary, kept current as
attempts finish; the verdicts in index order are what a leave-one-out replay walks.
"""

from __future__ import annotations

from apps.attempts.models import Attempt, TaskSummary


def task_counts(*, campaign_ids: list[int]) -> list[tuple[int, str, str, int, int]]:
    """(campaign id, task id, domain name, done attempts, passes) per stored task summary (one query)."""
    return list(
        TaskSummary.objects.filter(campaign_id__in=campaign_ids)
        .order_by("campaign_id", "task__task_id")
        .values_list("campaign_id", "task__task_id", "task__domain__name", "n_done", "n_pass")
    )


def done_verdicts(*, campaign_ids: list[int]) -> list[tuple[int, str, int, bool]]:
    """(campaign id, task id, attempt index, passed) of every done attempt, in index order (one query)."""
    rows = (
        Attempt.objects.filter(campaign_id__in=campaign_ids, status=Attempt.Status.DONE)
        .order_by("campaign_id", "task__task_id", "index")
        .values_list("campaign_id", "task__task_id", "index", "verdict")
    )
    return [
        (campaign_id, task_id, index, verdict == Attempt.Verdict.PASS)
        for campaign_id, task_id, index, verdict in rows
    ]
