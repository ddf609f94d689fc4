"""Reads worth a name for campaigns."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Aggregate, Avg, Count, Q, QuerySet
from django.utils import timezone

from apps.agents.models import PriceSheet
from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.models import Campaign
from apps.core.access import teams_for
from apps.core.models import WorkerHeartbeat
from tb_engine.pricing import cost_of
from tb_engine.transcript import Usage


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
    unjudged: int  # done, but a rubric could not be judged: excluded from the pass rate (SPEC §2)
    throughput_per_min: float  # attempts finished over the last minute
    eta_seconds: float | None

    @property
    def judged(self) -> int:
        return self.done - self.unjudged

    @property
    def finished(self) -> int:
        """Attempts that ran to an end (graded or infra error); cancelled attempts never ran."""
        return self.done + self.infra_error

    @property
    def planned(self) -> int:
        """Attempts the campaign still means to run: every attempt but the cancelled ones."""
        return self.total - self.cancelled

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.judged if self.judged else None

    @property
    def percent(self) -> float:
        return 100.0 * self.finished / self.planned if self.planned else 0.0


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
        unjudged=Count("id", filter=Q(status=Attempt.Status.DONE, verdict=Attempt.Verdict.UNJUDGED)),
    )
    window = timedelta(seconds=60)
    # Throughput counts attempts that ran to an end; cancelling a queue is no work done.
    recent = Attempt.objects.filter(
        campaign=campaign,
        finished_at__gte=timezone.now() - window,
        status__in=(Attempt.Status.DONE, Attempt.Status.INFRA_ERROR),
    ).count()
    remaining = counts["queued"] + counts["running"]
    rate = recent / window.total_seconds()
    eta = remaining / rate if rate > 0 and campaign.is_active else None
    return CampaignProgress(throughput_per_min=recent * 1.0, eta_seconds=eta, **counts)


@dataclass(frozen=True)
class CampaignListRow:
    """A campaign with its progress, for the operations view of the campaign list."""

    campaign: Campaign
    progress: CampaignProgress


def campaign_list_rows(*, user, limit: int = 200) -> list[CampaignListRow]:
    """The user's campaigns, newest first, each with counts by status, throughput and ETA (one query)."""
    since = timezone.now() - timedelta(seconds=60)
    ended = Q(attempts__status__in=(Attempt.Status.DONE, Attempt.Status.INFRA_ERROR))
    campaigns = campaigns_visible_to(user).annotate(
        n_total=Count("attempts"),
        n_queued=Count("attempts", filter=Q(attempts__status=Attempt.Status.QUEUED)),
        n_running=Count("attempts", filter=Q(attempts__status=Attempt.Status.RUNNING)),
        n_done=Count("attempts", filter=Q(attempts__status=Attempt.Status.DONE)),
        n_infra=Count("attempts", filter=Q(attempts__status=Attempt.Status.INFRA_ERROR)),
        n_cancelled=Count("attempts", filter=Q(attempts__status=Attempt.Status.CANCELLED)),
        n_passed=Count(
            "attempts",
            filter=Q(attempts__status=Attempt.Status.DONE, attempts__verdict=Attempt.Verdict.PASS),
        ),
        n_unjudged=Count(
            "attempts",
            filter=Q(attempts__status=Attempt.Status.DONE, attempts__verdict=Attempt.Verdict.UNJUDGED),
        ),
        n_recent=Count("attempts", filter=ended & Q(attempts__finished_at__gte=since)),
    )[:limit]
    rows = []
    for campaign in campaigns:
        remaining = campaign.n_queued + campaign.n_running
        rate = campaign.n_recent / 60.0
        progress = CampaignProgress(
            total=campaign.n_total,
            queued=campaign.n_queued,
            running=campaign.n_running,
            done=campaign.n_done,
            infra_error=campaign.n_infra,
            cancelled=campaign.n_cancelled,
            passed=campaign.n_passed,
            unjudged=campaign.n_unjudged,
            throughput_per_min=float(campaign.n_recent),
            eta_seconds=remaining / rate if rate > 0 and campaign.is_active else None,
        )
        rows.append(CampaignListRow(campaign=campaign, progress=progress))
    return rows


def campaign_worker_activity(*, campaign: Campaign) -> list[Mapping[str, Any]]:
    """Per worker: attempts of this campaign it is running now and has finished (one query)."""
    return list(
        Attempt.objects.filter(campaign=campaign)
        .exclude(worker="")
        .order_by()
        .values("worker")
        .annotate(
            running=Count("id", filter=Q(status=Attempt.Status.RUNNING)),
            finished=Count("id", filter=Q(status__in=(Attempt.Status.DONE, Attempt.Status.INFRA_ERROR))),
        )
        .order_by("worker")
    )


def workers_alive() -> int:
    """Celery workers that beat recently: with none, queued attempts wait (one query)."""
    return WorkerHeartbeat.alive_count()


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


# One-line headlines of stored diff items: the attempt page, the triage queue's "what went wrong".
def singular(table: str) -> str:
    """'tickets' -> 'ticket', 'policies' -> 'policy' (for one-line diff headlines)."""
    if table.endswith("ies"):
        return table[:-3] + "y"
    if table.endswith("s") and not table.endswith("ss"):
        return table[:-1]
    return table


def _short(value) -> str:
    if value is None:
        return "absent"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def diff_headline(item: dict) -> str:
    """One line a reader takes in at a glance, e.g. 'ticket 20 · status: solved (golden: hold)'."""
    subject = f"{singular(item['table'])} {item['key']}"
    if item.get("field"):
        return f"{subject} · {item['field']}: {_short(item['result'])} (golden: {_short(item['golden'])})"
    result = "row present" if item["result"] is not None else "row absent"
    golden = "present" if item["golden"] is not None else "absent"
    return f"{subject} · {result} (golden: {golden})"


@dataclass(frozen=True)
class LaunchEstimate:
    """What a launch would run and roughly cost, before it runs: tasks × N attempts at a price sheet.

    The per-attempt tokens are the averages of stored finished attempts: the agent's own on this
    suite when it has any, else every agent's on the suite (`basis` says which, with how many).
    """

    tasks: int
    n_attempts: int
    attempts: int
    simulated: bool
    sheet: str
    basis: str
    sample: int
    per_attempt: Decimal | None
    unpriced_model: str

    @property
    def total(self) -> Decimal | None:
        return None if self.per_attempt is None else self.per_attempt * self.attempts


def launch_estimate(*, agent, suite, tasks, n_attempts: int, price_sheet=None) -> LaunchEstimate:
    """The launch form's estimate (two queries: the price sheet and one token average)."""
    tasks, attempts = len(tasks), len(tasks) * n_attempts
    sheet = price_sheet or PriceSheet.objects.order_by("-effective_date", "-pk").first()
    base = {
        "tasks": tasks,
        "n_attempts": n_attempts,
        "attempts": attempts,
        "sheet": str(sheet) if sheet else "",
    }
    if agent.is_simulation:
        return LaunchEstimate(
            **base, simulated=True, basis="", sample=0, per_attempt=Decimal(0), unpriced_model=""
        )
    done = Attempt.objects.filter(campaign__suite=suite, status=Attempt.Status.DONE)
    averages: dict[str, Aggregate] = {"input": Avg("input_tokens"), "cached": Avg("cached_input_tokens")}
    averages |= {"output": Avg("output_tokens"), "reasoning": Avg("reasoning_tokens"), "n": Count("id")}
    own = done.filter(campaign__agent=agent).aggregate(**averages)
    row, basis = (own, "this agent's") if own["n"] else (done.aggregate(**averages), "every agent's")
    if not row["n"] or sheet is None:
        return LaunchEstimate(
            **base, simulated=False, basis=basis, sample=row["n"], per_attempt=None, unpriced_model=""
        )
    usage = Usage(
        input_tokens=round(row["input"]),
        cached_input_tokens=round(row["cached"]),
        output_tokens=round(row["output"]),
        reasoning_tokens=round(row["reasoning"]),
    )
    cost = cost_of(usage, agent.model, sheet.as_price_list())
    return LaunchEstimate(
        **base,
        simulated=False,
        basis=basis,
        sample=row["n"],
        per_attempt=cost,
        unpriced_model=agent.model if cost is None else "",
    )
