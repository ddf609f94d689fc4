"""Reads worth a name for campaigns."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from apps.campaigns.models import Attempt, Campaign, TaskSummary
from apps.core.access import teams_for


def campaign_name_taken(*, team, name: str) -> bool:
    """Whether the team already has a campaign of that name."""
    return Campaign.objects.filter(team=team, name=name).exists()


def campaigns_visible_to(user) -> QuerySet[Campaign]:
    """Campaigns of the user's teams (all of them for superusers)."""
    queryset = Campaign.objects.select_related("agent", "suite", "team", "owner")
    if user.is_superuser:
        return queryset
    return queryset.filter(team__in=teams_for(user))


@dataclass(frozen=True)
class CampaignProgress:
    total: int
    queued: int
    running: int
    done: int
    infra_error: int
    cancelled: int
    passed: int
    throughput_per_min: float  # attempts finished over the last minute
    eta_seconds: float | None

    @property
    def finished(self) -> int:
        return self.done + self.infra_error + self.cancelled

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.done if self.done else None

    @property
    def percent(self) -> float:
        return 100.0 * self.finished / self.total if self.total else 0.0


def campaign_progress(*, campaign: Campaign) -> CampaignProgress:
    """Counts by status, pass rate so far, recent throughput and ETA — two queries."""
    counts = Attempt.objects.filter(campaign=campaign).aggregate(
        total=Count("id"),
        queued=Count("id", filter=Q(status=Attempt.Status.QUEUED)),
        running=Count("id", filter=Q(status=Attempt.Status.RUNNING)),
        done=Count("id", filter=Q(status=Attempt.Status.DONE)),
        infra_error=Count("id", filter=Q(status=Attempt.Status.INFRA_ERROR)),
        cancelled=Count("id", filter=Q(status=Attempt.Status.CANCELLED)),
        passed=Count("id", filter=Q(status=Attempt.Status.DONE, verdict=Attempt.Verdict.PASS)),
    )
    window = timedelta(seconds=60)
    recent = Attempt.objects.filter(campaign=campaign, finished_at__gte=timezone.now() - window).count()
    remaining = counts["queued"] + counts["running"]
    rate = recent / window.total_seconds()
    eta = remaining / rate if rate > 0 and campaign.is_active else None
    return CampaignProgress(throughput_per_min=recent * 1.0, eta_seconds=eta, **counts)


def campaign_recent_errors(*, campaign: Campaign, limit: int = 5) -> list[Attempt]:
    return list(
        Attempt.objects.filter(campaign=campaign)
        .exclude(error_detail="")
        .select_related("task")
        .only("id", "index", "status", "error_detail", "retries", "task__task_id", "finished_at")
        .order_by("-finished_at")[:limit]
    )


def suite_task_counts(*, campaign_ids: list[int]) -> list[tuple[int, str, str, int, int]]:
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
