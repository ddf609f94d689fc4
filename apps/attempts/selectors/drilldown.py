"""The attempt drilldown's reads: the attempt with what its page shows beside it, its neighbours,
and the stored result for the raw download. Visibility is the caller's (core.access filters these)."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.attempts.models import Attempt


def drilldown_attempts() -> QuerySet[Attempt]:
    """Attempts with their campaign's agent, their task's domain and their process-risk row joined
    (the page names all three and marks the findings: selectors.process_risk.process_findings_of).

    The task's and domain's specs and the domain's policy are left out: the page shows names, ids and
    the validation, and a domain's spec holds its tables and every tool schema (tens of KB on an
    imported suite), decoded for nothing on every drilldown.
    """
    return Attempt.objects.select_related("campaign__agent", "task__domain", "process_risk").defer(
        "task__spec", "task__validation_detail", "task__domain__spec", "task__domain__policy"
    )


def raw_result_attempts() -> QuerySet[Attempt]:
    """Attempts with only what the raw-result download needs: the id, the campaign and the stored result."""
    return Attempt.objects.only("id", "campaign_id", "result")


def attempt_neighbours(*, attempt: Attempt) -> tuple[int | None, int | None]:
    """Ids of the previous and next attempt (by index) of the same campaign and task (one query)."""
    siblings = list(
        Attempt.objects.filter(campaign_id=attempt.campaign_id, task_id=attempt.task_id)
        .order_by("index")
        .values_list("id", "index")
    )
    before = [pk for pk, index in siblings if index < attempt.index]
    after = [pk for pk, index in siblings if index > attempt.index]
    return (before[-1] if before else None, after[0] if after else None)
