"""Reads of the attempt record worth a name (what other apps ask of a campaign's attempts)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Max, Q, Sum

from apps.attempts.models import IN_FLIGHT, Attempt


def attempts_in_window(*, campaign_id: int) -> int:
    """Attempts of the campaign at the broker or running: what its dispatch window holds (one query)."""
    return (
        Attempt.objects.filter(campaign_id=campaign_id)
        .filter(
            Q(status=Attempt.Status.RUNNING) | Q(status=Attempt.Status.QUEUED, dispatched_at__isnull=False)
        )
        .count()
    )


def attempts_in_flight(*, campaign_id: int) -> bool:
    """Whether any attempt of the campaign is still queued or running (one query)."""
    return Attempt.objects.filter(campaign_id=campaign_id, status__in=IN_FLIGHT).exists()


@dataclass(frozen=True)
class TaskAttemptCounts:
    """A campaign's attempts of one task so far."""

    done: int
    passes: int
    pending: int  # queued or running
    agent_cost: float  # over done attempts
    last_index: int


def attempt_counts_by_task(*, campaign_id: int) -> dict[int, TaskAttemptCounts]:
    """Task primary key -> its attempt counts, for the tasks the campaign has attempts of (one query)."""
    rows = (
        Attempt.objects.filter(campaign_id=campaign_id)
        .values("task_id")
        .annotate(
            done=Count("id", filter=Q(status=Attempt.Status.DONE)),
            passes=Count("id", filter=Q(status=Attempt.Status.DONE, verdict=Attempt.Verdict.PASS)),
            pending=Count("id", filter=Q(status__in=IN_FLIGHT)),
            cost=Sum("agent_cost", filter=Q(status=Attempt.Status.DONE)),
            last=Max("index"),
        )
    )
    return {
        row["task_id"]: TaskAttemptCounts(
            done=row["done"],
            passes=row["passes"],
            pending=row["pending"],
            agent_cost=float(row["cost"] or 0),
            last_index=row["last"],
        )
        for row in rows
    }
