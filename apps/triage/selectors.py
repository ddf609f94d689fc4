"""Reads of triage: the queue (clean-looking failures by default), neighbours, audit, task health, summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import connection
from django.db.models import Max, OuterRef, Prefetch, Q, QuerySet

from apps.attempts.models import Attempt
from apps.attempts.selectors import failure_queue, task_evidence
from apps.attempts.selectors.reviewed_attempts import attempt_in_campaigns
from apps.campaigns.models import Campaign
from apps.core.roles import ROLE_ORDER, Role

# Public from here: failure clusters (SPEC §8), the suspect-task queue, judge calibration, and the
# queue's filters and query (queue.py, which clusters.py reads too).
from apps.triage import suspects
from apps.triage.calibration import JudgeNote as JudgeNote
from apps.triage.calibration import JudgeRow as JudgeRow
from apps.triage.calibration import judge_note_rows as judge_note_rows
from apps.triage.calibration import judge_notes as judge_notes
from apps.triage.calibration import judge_rows as judge_rows
from apps.triage.clusters import Cluster as Cluster
from apps.triage.clusters import ClusterIndex as ClusterIndex
from apps.triage.clusters import ClusterRow as ClusterRow
from apps.triage.clusters import cluster_campaigns as cluster_campaigns
from apps.triage.clusters import cluster_index as cluster_index
from apps.triage.clusters import cluster_rows as cluster_rows
from apps.triage.clusters import cluster_value_pairs as cluster_value_pairs
from apps.triage.clusters import others_like as others_like
from apps.triage.models import (
    AttemptReview,
    AuditEntry,
    Label,
    SuiteValidation,
    TaskHealthIssue,
    TaskValidation,
)
from apps.triage.queue import CATEGORIES as CATEGORIES
from apps.triage.queue import QUEUE_PER_PAGE as QUEUE_PER_PAGE
from apps.triage.queue import QUEUE_SORTS as QUEUE_SORTS
from apps.triage.queue import SCOPES as SCOPES
from apps.triage.queue import QueueFilters as QueueFilters
from apps.triage.queue import queue_queryset as queue_queryset
from apps.triage.suspects import Evidence as Evidence
from apps.triage.suspects import SuspectTask as SuspectTask
from apps.triage.suspects import suspect_tasks as suspect_tasks
from tb_engine.metrics.agreement import MIN_LABELS

SUSPECT_KINDS = suspects.KINDS
MIN_JUDGE_LABELS = MIN_LABELS
SUSPECT_STATUSES = suspects.STATUSES


def queue_rows(queryset: QuerySet[Attempt]) -> QuerySet[Attempt]:
    """The queue rows for display: no result JSON but its first diff item (`first_diff`, the
    headline of what went wrong); review, assignee and labels in two extra queries."""
    reviews = AttemptReview.objects.select_related("assignee").prefetch_related("labels")
    return failure_queue.queue_display_rows(queryset, prefetch=[Prefetch("review", queryset=reviews)])


def queue_neighbours(*, user, filters: QueueFilters, attempt_id: int) -> dict:
    """Previous/next attempt ids around `attempt_id` in the queue order, its position and the total (one query)."""
    ids = failure_queue.queue_ids(queue_queryset(user=user, filters=filters))
    if attempt_id not in ids:
        return {"previous": None, "next": None, "position": None, "total": len(ids), "page": None}
    at = ids.index(attempt_id)
    return {
        "previous": ids[at - 1] if at > 0 else None,
        "next": ids[at + 1] if at + 1 < len(ids) else None,
        "position": at + 1,
        "total": len(ids),
        "page": at // QUEUE_PER_PAGE + 1,  # the queue page that lists it (the panel links back there)
    }


def labels() -> list[Label]:
    return list(Label.objects.all())


def review_of(attempt: Attempt) -> AttemptReview | None:
    """The attempt's review with assignee and labels, or None if nobody touched it yet."""
    return (
        AttemptReview.objects.filter(attempt=attempt)
        .select_related("assignee")
        .prefetch_related("labels")
        .first()
    )


def audit_trail(*, attempt: Attempt, limit: int = 50) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(attempt=attempt).select_related("actor")[:limit])


def triagers_of(campaign: Campaign) -> list:
    """Users who may be assigned an attempt of the campaign: triagers (or above) in its team (one query)."""
    names = [role.value for role in ROLE_ORDER if role.rank >= Role.TRIAGER.rank]
    members = campaign.team.members.filter(is_active=True).filter(
        Q(is_superuser=True) | Q(groups__name__in=names)
    )
    return list(members.distinct().order_by("username"))


def open_health_issues(*, task_pks=None, campaigns: list[Campaign] | None = None) -> list[TaskHealthIssue]:
    """Open task-health issues (optionally of some tasks) with task and label, newest first.

    With ``campaigns`` (the viewer's), each issue's ``source_visible`` says whether the attempt it
    was opened from belongs to one of them: a health issue belongs to a task that several teams
    run, so who opened it and from which attempt is shown only to the attempt's team.
    """
    queryset = TaskHealthIssue.objects.filter(resolved_at__isnull=True).select_related(
        "task__domain", "label", "opened_by"
    )
    if task_pks is not None:
        queryset = queryset.filter(task_id__in=list(task_pks))
    if campaigns is not None:
        queryset = queryset.annotate(
            source_visible=attempt_in_campaigns(
                attempt_id=OuterRef("attempt_id"), campaign_ids=[c.pk for c in campaigns]
            )
        )
    return list(queryset)


def unhealthy_task_pks(*, campaigns: list[Campaign]) -> frozenset[int]:
    """Tasks of the campaigns with at least one open health issue (one query)."""
    ids = [c.pk for c in campaigns]
    if not ids:
        return frozenset()
    # Written as SQL: every figure page asks, and compiling the ORM's join cost more Python than
    # the read cost PostgreSQL. The campaigns' tasks are Campaign.tasks' link table.
    issues = TaskHealthIssue._meta
    links = Campaign.tasks.through._meta
    task_column = issues.get_field("task").column
    sql = (
        f'SELECT DISTINCT "i"."{task_column}" FROM "{issues.db_table}" "i" '
        f'JOIN "{links.db_table}" "l" ON "l"."{links.get_field("task").column}" = "i"."{task_column}" '
        f'WHERE "i"."resolved_at" IS NULL '
        f'AND "l"."{links.get_field("campaign").column}" IN ({", ".join(["%s"] * len(ids))})'
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, ids)
        return frozenset(task_id for (task_id,) in cursor.fetchall())


# The query value of the health toggle on every metric page, its exports and the API.
EXCLUDE_UNHEALTHY = "exclude"


@dataclass(frozen=True)
class TaskHealthScope:
    """Which tasks a metric request leaves out: those with open health issues, when the viewer asks.

    Tasks a triager flagged (grader bug, task ambiguous) stay in the figures unless the viewer asks
    for ``?healthy=exclude``; either way the page says how many such tasks there are, so a figure is
    never silently computed on a different task set than the reader assumes.
    """

    unhealthy: frozenset[int]
    excluding: bool

    @property
    def exclude(self) -> frozenset[int]:
        """Task pks to leave out of the figures (empty unless the toggle is on)."""
        return self.unhealthy if self.excluding else frozenset()

    def context(self) -> dict:
        """Template variables of the toggle and its banner (core/_task_health_*.html)."""
        return {
            "healthy": EXCLUDE_UNHEALTHY if self.excluding else "",
            "unhealthy_count": len(self.unhealthy),
            "excluded_count": len(self.exclude),
        }


def task_health_scope(query: Mapping[str, str], campaigns: list[Campaign]) -> TaskHealthScope:
    """The scope a request asks for (``healthy=exclude``): open health issues among the campaigns' tasks (one query)."""
    return TaskHealthScope(
        unhealthy=unhealthy_task_pks(campaigns=campaigns), excluding=query.get("healthy") == EXCLUDE_UNHEALTHY
    )


def campaign_triage_summary(*, campaigns: list[Campaign]) -> list[dict]:
    """Per campaign, among clean-looking failures: count, share per failure category, label counts.

    Shares overlap (an attempt can have a wrong value and an extra effect) and need not sum to 100%.
    Two queries for any number of campaigns.
    """
    ids = [c.pk for c in campaigns]
    totals, categories = failure_queue.categories_per_campaign(campaign_ids=ids)
    label_counts = Counter(
        AttemptReview.labels.through.objects.filter(
            attemptreview__attempt__campaign_id__in=ids, attemptreview__attempt__clean_looking=True
        ).values_list("attemptreview__attempt__campaign_id", "label__name")
    )
    summary = []
    for campaign in campaigns:
        total = totals[campaign.pk]
        shares = {name: (categories[(campaign.pk, name)] / total if total else None) for name in CATEGORIES}
        counts = {name: categories[(campaign.pk, name)] for name in CATEGORIES}
        by_label = sorted(
            ((name, n) for (pk, name), n in label_counts.items() if pk == campaign.pk),
            key=lambda item: (-item[1], item[0]),
        )
        summary.append(
            {
                "campaign": campaign,
                "clean_failures": total,
                "shares": shares,
                "counts": counts,
                "labels": by_label,
            }
        )
    return summary


# --- Validation results (task health) ---------------------------------------------------------


def _latest_ids(queryset) -> list[int]:
    return list(
        queryset.order_by().values("task_id").annotate(latest=Max("pk")).values_list("latest", flat=True)
    )


def latest_task_validations(*, task_pks) -> dict[int, TaskValidation]:
    """The most recent validation of each of the tasks (two queries)."""
    ids = _latest_ids(TaskValidation.objects.filter(task_id__in=list(task_pks)))
    return {v.task_id: v for v in TaskValidation.objects.filter(pk__in=ids)}


def validation_findings(*, limit: int = 200) -> list[TaskValidation]:
    """Tasks whose latest validation flags them (invalid, non-discriminating) or saw our verdict and the
    server's hash disagree, newest first, with their task and suite (two queries)."""
    ids = _latest_ids(TaskValidation.objects.all())
    flagged = TaskValidation.objects.filter(pk__in=ids).filter(
        Q(status__in=[TaskValidation.Status.INVALID, TaskValidation.Status.NON_DISCRIMINATING])
        | Q(disagreements__gt=0)
    )
    return list(
        flagged.select_related("task__suite", "task__domain").order_by("-validated_at", "-pk")[:limit]
    )


def suite_validation_runs(*, suite, limit: int = 5) -> list[SuiteValidation]:
    """The suite's most recent validation requests, newest first."""
    return list(SuiteValidation.objects.filter(suite=suite).select_related("requested_by")[:limit])


def verdict_disagreements(*, campaigns: list[Campaign], limit: int = 50) -> list[Attempt]:
    """Attempts of the campaigns where our verdict and the server's hash verdict differ (the hash decided)."""
    return task_evidence.verdict_disagreements(campaign_ids=[c.pk for c in campaigns], limit=limit)
