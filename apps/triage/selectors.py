"""Reads of triage: the queue (clean-looking failures by default), neighbours, audit, task health, summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from django.db import connection
from django.db.models import F, Prefetch, Q, QuerySet

from apps.campaigns.models import Attempt, Campaign
from apps.campaigns.selectors import campaigns_visible_to
from apps.triage.models import AttemptReview, AuditEntry, Label, TaskHealthIssue

CATEGORIES = ("wrong_value", "missing_effect", "extra_effect", "rubric_failed", "check_failed")
SCOPES = {"clean": "Clean-looking failures", "failed": "All failures"}
QUEUE_PER_PAGE = 50
# Sortable queue columns: the ?sort= value (a leading "-" reverses) -> the ORM ordering it means.
# The queue order always ends with the default order, so equal keys keep a stable, shared order
# for the list and for j/k in the drilldown.
QUEUE_SORTS = {
    "campaign": ("campaign__name",),
    "task": ("task__task_id",),
    "index": ("index",),
    "termination": ("termination",),
    "calls": ("tool_calls",),
    "diff": ("diff_items",),
    "assignee": ("review__assignee__username",),
    "status": ("review__status",),
}
DEFAULT_QUEUE_ORDER = ("campaign_id", "task__task_id", "index", "pk")
QUEUE_FIELDS = (
    "id",
    "campaign_id",
    "task_id",
    "index",
    "verdict",
    "termination",
    "categories",
    "clean_looking",
    "tool_calls",
    "diff_items",
    "task__task_id",
    "task__domain__name",
    "campaign__name",
)


def _int(value: str) -> int | None:
    return int(value) if value and value.isdigit() else None


@dataclass(frozen=True)
class QueueFilters:
    """What the queue shows; parsed from a query string so the drilldown can rebuild the same order."""

    campaigns: tuple[int, ...] = ()
    domain: str = ""
    task: str = ""
    category: str = ""
    label: int | None = None
    assignee: str = ""  # a user id, "none" (unassigned) or "" (anyone)
    status: str = ""
    scope: str = "clean"
    sort: str = ""

    @classmethod
    def from_query(cls, query) -> QueueFilters:
        """From request.GET (or a QueryDict); unknown values fall back to the defaults."""
        category = query.get("category", "")
        status = query.get("status", "")
        assignee = query.get("assignee", "")
        scope = query.get("scope", "clean")
        sort = query.get("sort", "")
        return cls(
            campaigns=tuple(sorted({int(v) for v in query.getlist("c") if v.isdigit()})),
            domain=query.get("domain", "").strip(),
            task=query.get("task", "").strip(),
            category=category if category in CATEGORIES else "",
            label=_int(query.get("label", "")),
            assignee=assignee if assignee == "none" or assignee.isdigit() else "",
            status=status if status in AttemptReview.Status.values else "",
            scope=scope if scope in SCOPES else "clean",
            sort=sort if sort.removeprefix("-") in QUEUE_SORTS else "",
        )

    def ordering(self) -> tuple[str, ...]:
        """The ORM order of the queue: the chosen column (if any), then the default order."""
        if not self.sort:
            return DEFAULT_QUEUE_ORDER
        descending = self.sort.startswith("-")
        keys = QUEUE_SORTS[self.sort.removeprefix("-")]
        return (*(f"-{key}" if descending else key for key in keys), *DEFAULT_QUEUE_ORDER)

    def querystring(self) -> str:
        """The filters as a query string (defaults left out), the inverse of from_query."""
        pairs: list[tuple[str, str | int]] = [("c", pk) for pk in self.campaigns]
        for name in ("domain", "task", "category", "label", "assignee", "status", "sort"):
            value = getattr(self, name)
            if value not in ("", None):
                pairs.append((name, value))
        if self.scope != "clean":
            pairs.append(("scope", self.scope))
        return urlencode(pairs)


def _has_category(category: str) -> Q:
    # JSON containment is native (and indexable) on PostgreSQL; SQLite has no JSON contains, so
    # match the quoted element in the serialised list (category names never contain quotes).
    if connection.vendor == "postgresql":
        return Q(categories__contains=[category])
    return Q(categories__icontains=f'"{category}"')


def queue_queryset(*, user, filters: QueueFilters) -> QuerySet[Attempt]:
    """Failed attempts of the user's visible campaigns matching the filters, in queue order."""
    visible = campaigns_visible_to(user)
    if filters.campaigns:
        visible = visible.filter(pk__in=filters.campaigns)
    queryset = Attempt.objects.filter(
        campaign__in=visible.values("pk"), status=Attempt.Status.DONE, verdict=Attempt.Verdict.FAIL
    )
    if filters.scope == "clean":
        queryset = queryset.filter(clean_looking=True)
    if filters.domain:
        queryset = queryset.filter(task__domain__name=filters.domain)
    if filters.task:
        queryset = queryset.filter(task__task_id__icontains=filters.task)  # substring, as typed
    if filters.category:
        queryset = queryset.filter(_has_category(filters.category))
    if filters.label:
        queryset = queryset.filter(review__labels=filters.label)
    if filters.assignee == "none":
        queryset = queryset.filter(Q(review__isnull=True) | Q(review__assignee__isnull=True))
    elif filters.assignee:
        queryset = queryset.filter(review__assignee_id=int(filters.assignee))
    if filters.status == AttemptReview.Status.OPEN:
        queryset = queryset.filter(Q(review__isnull=True) | Q(review__status=AttemptReview.Status.OPEN))
    elif filters.status:
        queryset = queryset.filter(review__status=filters.status)
    return queryset.order_by(*filters.ordering())


def queue_rows(queryset: QuerySet[Attempt]) -> QuerySet[Attempt]:
    """The queue rows for display: no result JSON but its first diff item (`first_diff`, the
    headline of what went wrong); review, assignee and labels in two extra queries."""
    return (
        queryset.select_related("task__domain", "campaign")
        .only(*QUEUE_FIELDS)
        .annotate(first_diff=F("result__diff__0"))
        .prefetch_related(
            Prefetch(
                "review", queryset=AttemptReview.objects.select_related("assignee").prefetch_related("labels")
            )
        )
    )


def queue_neighbours(*, user, filters: QueueFilters, attempt_id: int) -> dict:
    """Previous/next attempt ids around `attempt_id` in the queue order, its position and the total (one query)."""
    ids = list(queue_queryset(user=user, filters=filters).values_list("id", flat=True))
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
    from apps.core.roles import ROLE_ORDER, Role

    names = [role.value for role in ROLE_ORDER if role.rank >= Role.TRIAGER.rank]
    members = campaign.team.members.filter(is_active=True).filter(
        Q(is_superuser=True) | Q(groups__name__in=names)
    )
    return list(members.distinct().order_by("username"))


def open_health_issues(*, task_pks=None) -> list[TaskHealthIssue]:
    """Open task-health issues (optionally of some tasks) with task and label, newest first."""
    queryset = TaskHealthIssue.objects.filter(resolved_at__isnull=True).select_related(
        "task__domain", "label", "opened_by"
    )
    if task_pks is not None:
        queryset = queryset.filter(task_id__in=list(task_pks))
    return list(queryset)


def unhealthy_task_pks(*, campaigns: list[Campaign]) -> frozenset[int]:
    """Tasks of the campaigns with at least one open health issue (one query)."""
    return frozenset(
        TaskHealthIssue.objects.filter(
            resolved_at__isnull=True, task__campaigns__in=[c.pk for c in campaigns]
        )
        .values_list("task_id", flat=True)
        .distinct()
    )


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
        """Template variables of the toggle and its banner (dashboard/_task_health_*.html)."""
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
    categories: Counter[tuple[int, str]] = Counter()
    totals: Counter[int] = Counter()
    rows = Attempt.objects.filter(
        campaign_id__in=ids, clean_looking=True, status=Attempt.Status.DONE, verdict=Attempt.Verdict.FAIL
    )
    for campaign_id, attempt_categories in rows.values_list("campaign_id", "categories").iterator(
        chunk_size=5000
    ):
        totals[campaign_id] += 1
        for category in set(attempt_categories or []):
            categories[(campaign_id, category)] += 1
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
