"""The queue's filters and query: failed attempts of the visible campaigns, clean-looking ones by default.

Lives apart from the selectors so the cluster reads (clusters.py) and the selectors that re-export
both can import it without a cycle; other apps use it through apps.triage.selectors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from django.db import connection
from django.db.models import Q, QuerySet

from apps.attempts.models import Attempt
from apps.campaigns.selectors import campaigns_visible_to
from apps.triage.models import AttemptReview

CATEGORIES = ("wrong_value", "missing_effect", "extra_effect", "rubric_failed", "check_failed")
SCOPES = {"clean": "Clean-looking failures", "failed": "All failures"}
_SIGNATURE = re.compile(r"^[0-9a-f]{32}$")
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
    signature: str = ""  # one failure cluster (SPEC §8): its attempts only
    sort: str = ""  # a QUEUE_SORTS key, "-" first for descending; "" is the default order

    @classmethod
    def from_query(cls, query) -> QueueFilters:
        """From request.GET (or a QueryDict); unknown values fall back to the defaults."""
        category = query.get("category", "")
        status = query.get("status", "")
        assignee = query.get("assignee", "")
        scope = query.get("scope", "clean")
        signature = query.get("signature", "").strip().lower()
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
            signature=signature if _SIGNATURE.match(signature) else "",
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
        if self.signature:
            pairs.append(("signature", self.signature))
        return urlencode(pairs)

    def without_signature(self) -> QueueFilters:
        """The same scope over every cluster (what a cluster's size and share are measured against)."""
        return replace(self, signature="")

    def with_signature(self, signature: str) -> QueueFilters:
        """The same scope narrowed to one cluster."""
        return replace(self, signature=signature)


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
    if filters.signature:
        queryset = queryset.filter(failure_signature__digest=filters.signature)
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
