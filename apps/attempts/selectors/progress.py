"""How far a campaign's attempts have got: counts by status, recent throughput, workers, errors.

What the campaign pages, the API's progress endpoint and the run command show while a campaign runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Model, Q, QuerySet, Sum

from apps.attempts.models import Attempt, TaskSummary, campaign_model

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
    campaigns of the queryset, in its order (at most three queries).

    A campaign that finished before ``ended_since`` (or at a time not recorded) has nothing in
    flight and nothing ended since:
    its counts are the sums of its task summaries (kept equal to a recount of its attempts), so the
    list never scans a million finished attempts. Only the others' attempts are counted.
    """
    ordered = list(campaigns[:limit])
    done = campaign_model().Status.DONE
    settled = [
        c.pk
        for c in ordered
        # getattr: the campaign model is typed by its base here (this app never imports campaigns).
        if getattr(c, "status") == done  # noqa: B009
        and (getattr(c, "finished_at") is None or getattr(c, "finished_at") < ended_since)  # noqa: B009
    ]
    counts: dict[int, tuple[StatusCounts, int]] = {
        campaign_id: (status, 0) for campaign_id, status in _summary_status_counts(settled).items()
    }
    live = [c.pk for c in ordered if c.pk not in counts]
    if live:
        ended = Count("id", filter=Q(status__in=ENDED, finished_at__gte=ended_since))
        rows = (
            Attempt.objects.filter(campaign_id__in=live)
            .order_by()
            .values("campaign_id")
            .annotate(**_by_status(), ended_recently=ended)
        )
        for row in rows:
            values: dict[str, Any] = dict(
                row
            )  # a plain dict: the plugin types the row without the **_by_status() keys
            status = StatusCounts(**{name: values[name] for name in StatusCounts.__dataclass_fields__})
            counts[values["campaign_id"]] = (status, values["ended_recently"])
    nothing = StatusCounts(**dict.fromkeys(StatusCounts.__dataclass_fields__, 0))
    return [(campaign, *counts.get(campaign.pk, (nothing, 0))) for campaign in ordered]


def _summary_status_counts(campaign_ids: list[int]) -> dict[int, StatusCounts]:
    """StatusCounts of finished campaigns from their task summaries (one query; none in flight)."""
    if not campaign_ids:
        return {}
    rows = (
        TaskSummary.objects.filter(campaign_id__in=campaign_ids)
        .order_by()
        .values("campaign_id")
        .annotate(
            judged=Sum("n_done"),
            passed=Sum("n_pass"),
            unjudged=Sum("n_unjudged"),
            infra_error=Sum("n_infra_error"),
            cancelled=Sum("n_cancelled"),
        )
    )
    counts = {}
    for row in rows:
        done = row["judged"] + row["unjudged"]
        counts[row["campaign_id"]] = StatusCounts(
            total=done + row["infra_error"] + row["cancelled"],
            queued=0,
            running=0,
            done=done,
            infra_error=row["infra_error"],
            cancelled=row["cancelled"],
            passed=row["passed"],
            unjudged=row["unjudged"],
        )
    return counts


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
