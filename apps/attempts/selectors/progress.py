"""How far a campaign's attempts have got: counts by status, recent throughput, workers, errors.

What the campaign pages, the API's progress endpoint and the run command show while a campaign runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Model, Q, QuerySet

from apps.attempts.models import Attempt

ENDED = (Attempt.Status.DONE, Attempt.Status.INFRA_ERROR)
CampaignModel = TypeVar("CampaignModel", bound=Model)


@dataclass(frozen=True)
class StatusCounts:
    """A campaign's attempts by status; passed and unjudged are among the done ones."""

    total: int
    queued: int
    running: int
    done: int
    infra_error: int
    cancelled: int
    passed: int
    unjudged: int


def _by_status(prefix: str = "") -> dict[str, Count]:
    """The Count aggregates of StatusCounts, over ``prefix``-related attempts ("" for an attempt queryset)."""
    status, verdict, counted = f"{prefix}status", f"{prefix}verdict", prefix.removesuffix("__") or "id"
    done = {status: Attempt.Status.DONE}
    return {
        "total": Count(counted),
        "queued": Count(counted, filter=Q(**{status: Attempt.Status.QUEUED})),
        "running": Count(counted, filter=Q(**{status: Attempt.Status.RUNNING})),
        "done": Count(counted, filter=Q(**done)),
        "infra_error": Count(counted, filter=Q(**{status: Attempt.Status.INFRA_ERROR})),
        "cancelled": Count(counted, filter=Q(**{status: Attempt.Status.CANCELLED})),
        "passed": Count(counted, filter=Q(**done, **{verdict: Attempt.Verdict.PASS})),
        "unjudged": Count(counted, filter=Q(**done, **{verdict: Attempt.Verdict.UNJUDGED})),
    }


def status_counts(*, campaign_id: int) -> StatusCounts:
    """The campaign's attempts counted by status (one query)."""
    return StatusCounts(**Attempt.objects.filter(campaign_id=campaign_id).aggregate(**_by_status()))


def attempts_ended_since(*, campaign_id: int, since: datetime) -> int:
    """Attempts of the campaign that ran to an end (done or infra error) since ``since`` (one query).

    Cancelled attempts are not counted: cancelling a queue is no work done.
    """
    return Attempt.objects.filter(campaign_id=campaign_id, finished_at__gte=since, status__in=ENDED).count()


@dataclass(frozen=True)
class AttemptPace:
    """How fast a campaign's attempts end: how many ended recently, and how long one runs."""

    ended_recently: int  # done or infra error since the ``since`` asked for
    mean_seconds: float | None  # mean run time (claimed to recorded) of its ended attempts


def attempt_pace(*, campaign_id: int, since: datetime) -> AttemptPace:
    """The campaign's attempts ended since ``since`` and the mean run time of all it has ended (one query)."""
    run_time = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    row = Attempt.objects.filter(
        campaign_id=campaign_id, status__in=ENDED, started_at__isnull=False, finished_at__isnull=False
    ).aggregate(recent=Count("id", filter=Q(finished_at__gte=since)), mean=Avg(run_time))
    mean = row["mean"]
    return AttemptPace(
        ended_recently=row["recent"], mean_seconds=None if mean is None else mean.total_seconds()
    )


def campaigns_with_status_counts(
    campaigns: QuerySet[CampaignModel], *, ended_since: datetime, limit: int
) -> list[tuple[CampaignModel, StatusCounts, int]]:
    """(campaign, its status counts, attempts ended since ``ended_since``) for the first ``limit``
    campaigns of the queryset, in its order (one query)."""
    counts = {f"n_{name}": aggregate for name, aggregate in _by_status("attempts__").items()}
    ended = Q(attempts__status__in=ENDED, attempts__finished_at__gte=ended_since)
    ended_recently = "n_ended_recently"
    annotated = campaigns.annotate(**counts, **{ended_recently: Count("attempts", filter=ended)})[:limit]
    return [
        (
            campaign,
            StatusCounts(
                **{name: getattr(campaign, f"n_{name}") for name in StatusCounts.__dataclass_fields__}
            ),
            getattr(campaign, ended_recently),  # annotations, which the model's type does not know
        )
        for campaign in annotated
    ]


def worker_activity(*, campaign_id: int) -> list[Mapping[str, Any]]:
    """Per worker, {worker, running, finished}: the campaign's attempts it runs now and has ended (one query)."""
    return list(
        Attempt.objects.filter(campaign_id=campaign_id)
        .exclude(worker="")
        .order_by()
        .values("worker")
        .annotate(
            running=Count("id", filter=Q(status=Attempt.Status.RUNNING)),
            finished=Count("id", filter=Q(status__in=ENDED)),
        )
        .order_by("worker")
    )


def recent_errors(*, campaign_id: int, limit: int = 5) -> list[Attempt]:
    """The campaign's latest attempts with an error detail, newest first, with their task (one query)."""
    return list(
        Attempt.objects.filter(campaign_id=campaign_id)
        .exclude(error_detail="")
        .select_related("task")
        .only(
            "id",
            "index",
            "status",
            "error_detail",
            "retries",
            "task__task_id",
            "task__validation",
            "finished_at",
        )
        .order_by("-finished_at")[:limit]
    )
