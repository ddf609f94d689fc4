"""The queue's filters and query: failed attempts of the visible campaigns, clean-looking ones by default.

Lives apart from the selectors so the cluster reads (clusters.py) and the selectors that re-export
both can import it without a cycle; other apps use it through apps.triage.selectors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from django.db.models import Q, QuerySet

from apps.attempts.models import Attempt
from apps.attempts.selectors.failure_queue import (
    failed_attempts,
    failure_text_matches,
    fault_injected,
    in_signature_forms,
)
from apps.attempts.selectors.process_risk import passed_with_process_risk
from apps.campaigns.selectors import campaigns_visible_to
from apps.triage.models import AttemptReview
from tb_engine.faults import FAULT_KINDS
from tb_engine.process import FINDING_KINDS

CATEGORIES = ("wrong_value", "missing_effect", "extra_effect", "rubric_failed", "check_failed")
SCOPES = {
    "clean": "Clean-looking failures",
    "failed": "All failures",
    # Passing attempts with process findings (docs/process_risk.md): the verdict stands, the process is queried.
    "process": "Passed with process risk",
}
PROCESS_KINDS = FINDING_KINDS
_SIGNATURE = re.compile(r"^[0-9a-f]{32}$")
QUEUE_PER_PAGE = 50
MAX_SEARCH = 200  # characters of a text search
MAX_VARIANTS = 200  # signature forms in one value-pair sub-group link
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
    fault: str = ""  # a fault kind (tb_engine.faults): attempts into which the campaign's plan injected one
    label: int | None = None
    assignee: str = ""  # a user id, "none" (unassigned) or "" (anyone)
    status: str = ""
    scope: str = "clean"
    signature: str = ""  # one failure cluster (SPEC §8): its attempts only
    sort: str = ""
    text: str = ""  # ?q=: words in what went wrong (diff values, messages, final reply) or the task id/title
    # ?v=: stored signature forms (SignatureVariant pks), one value-pair sub-group of the cluster
    variants: tuple[int, ...] = ()  # a QUEUE_SORTS key, "-" first for descending; "" is the default order
    # ?process=: passing attempts with process risk ("any" or one finding kind); implies that scope
    process: str = ""

    @classmethod
    def from_query(cls, query) -> QueueFilters:
        """From request.GET (or a QueryDict); unknown values fall back to the defaults."""
        category = query.get("category", "")
        fault = query.get("fault", "")
        status = query.get("status", "")
        assignee = query.get("assignee", "")
        scope = query.get("scope", "clean")
        signature = query.get("signature", "").strip().lower()
        sort = query.get("sort", "")
        process = query.get("process", "")
        process = process if process == "any" or process in PROCESS_KINDS else ""
        if scope == "process" and not process:
            process = "any"
        return cls(
            campaigns=tuple(sorted({int(v) for v in query.getlist("c") if v.isdigit()})),
            domain=query.get("domain", "").strip(),
            task=query.get("task", "").strip(),
            category=category if category in CATEGORIES else "",
            fault=fault if fault in FAULT_KINDS else "",
            label=_int(query.get("label", "")),
            assignee=assignee if assignee == "none" or assignee.isdigit() else "",
            status=status if status in AttemptReview.Status.values else "",
            scope="process" if process else (scope if scope in SCOPES else "clean"),
            process=process,
            signature=signature if _SIGNATURE.match(signature) else "",
            sort=sort if sort.removeprefix("-") in QUEUE_SORTS else "",
            text=" ".join(query.get("q", "").split())[:MAX_SEARCH],
            variants=tuple(sorted({int(v) for v in query.getlist("v") if v.isdigit()}))[:MAX_VARIANTS]
            if signature
            else (),
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
        for name in ("domain", "task", "category", "fault", "label", "assignee", "status", "sort", "process"):
            value = getattr(self, name)
            if value not in ("", None):
                pairs.append((name, value))
        if self.scope not in ("clean", "process"):  # the process scope is said by ?process=
            pairs.append(("scope", self.scope))
        if self.signature:
            pairs.append(("signature", self.signature))
            pairs.extend(("v", pk) for pk in self.variants)
        if self.text:
            pairs.append(("q", self.text))
        return urlencode(pairs)

    def without_signature(self) -> QueueFilters:
        """The same scope over every cluster (what a cluster's size and share are measured against)."""
        return replace(self, signature="", variants=())

    def with_signature(self, signature: str) -> QueueFilters:
        """The same scope narrowed to one cluster."""
        return replace(self, signature=signature)

    def with_variants(self, variants: tuple[int, ...]) -> QueueFilters:
        """The same cluster narrowed to one value-pair sub-group (its stored signature forms)."""
        return replace(self, variants=tuple(sorted(variants)))


def _attempt_conditions(filters: QueueFilters) -> list[Q]:
    """The label, assignee and status filters (conditions on the attempt's review, this app's table), the
    value-pair sub-group, the text search and the injected fault kind."""
    conditions = []
    if filters.label:
        conditions.append(Q(review__labels=filters.label))
    if filters.assignee == "none":
        conditions.append(Q(review__isnull=True) | Q(review__assignee__isnull=True))
    elif filters.assignee:
        conditions.append(Q(review__assignee_id=int(filters.assignee)))
    if filters.status == AttemptReview.Status.OPEN:
        conditions.append(Q(review__isnull=True) | Q(review__status=AttemptReview.Status.OPEN))
    elif filters.status:
        conditions.append(Q(review__status=filters.status))
    if filters.variants:
        conditions.append(in_signature_forms(filters.variants))
    if filters.text:
        conditions.append(failure_text_matches(filters.text))
    if filters.fault:
        conditions.append(fault_injected(filters.fault))
    return conditions


def queue_queryset(*, user, filters: QueueFilters, ordered: bool = True) -> QuerySet[Attempt]:
    """Failed attempts of the user's visible campaigns matching the filters, in queue order (unordered if not ``ordered``)."""
    visible = campaigns_visible_to(user)
    if filters.campaigns:
        visible = visible.filter(pk__in=filters.campaigns)
    if filters.process:
        return passed_with_process_risk(
            campaigns=visible,
            kind="" if filters.process == "any" else filters.process,
            domain=filters.domain,
            task=filters.task,
            conditions=_attempt_conditions(filters),
            ordering=filters.ordering() if ordered else (),
        )
    return failed_attempts(
        campaigns=visible,
        clean_only=filters.scope == "clean",
        signature=filters.signature,
        domain=filters.domain,
        task=filters.task,
        category=filters.category,
        conditions=_attempt_conditions(filters),
        ordering=filters.ordering() if ordered else (),
    )
