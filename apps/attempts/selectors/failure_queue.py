"""Failed attempts as a review queue: the query behind triage's queue, its display rows and summaries.

Triage owns what the queue means (its filters, the review states, who may see which campaign) and
passes plain values in: the visible campaigns as a queryset, conditions on its own review relation
as ``Q`` objects, an ordering. The attempt columns, the JSON lookup of a row's first diff item and
the category match live here, with the table they read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from django.db import connection
from django.db.models import F, Prefetch, Q, QuerySet

from apps.attempts.models import Attempt

# The attempt columns a queue row shows (the result JSON stays unread but for its first diff item).
QUEUE_ROW_FIELDS = (
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
    "task__validation",  # the non-discriminating flag beside the task id
    "task__domain__name",
    "campaign__name",
)


def _has_category(category: str) -> Q:
    # JSON containment is native (and indexable) on PostgreSQL; SQLite has no JSON contains, so
    # match the quoted element in the serialised list (category names never contain quotes).
    if connection.vendor == "postgresql":
        return Q(categories__contains=[category])
    return Q(categories__icontains=f'"{category}"')


def failed_attempts(
    *,
    campaigns: QuerySet,
    clean_only: bool,
    signature: str = "",
    domain: str = "",
    task: str = "",
    category: str = "",
    conditions: Iterable[Q] = (),
    ordering: Sequence[str] = (),
) -> QuerySet[Attempt]:
    """Done, failed attempts of ``campaigns`` (a Campaign queryset) narrowed by the arguments, in ``ordering``.

    ``clean_only`` keeps clean-looking failures (SPEC §4); ``signature`` one failure cluster; ``domain``
    by name; ``task`` by a substring of its id, as typed; ``category`` a failure category. Each of
    ``conditions`` (the caller's, e.g. on its review relation) is applied as a filter of its own, in
    order. An empty ``ordering`` leaves the rows unordered.
    """
    queryset = Attempt.objects.filter(
        campaign__in=campaigns.values("pk"), status=Attempt.Status.DONE, verdict=Attempt.Verdict.FAIL
    )
    if clean_only:
        queryset = queryset.filter(clean_looking=True)
    if signature:
        queryset = queryset.filter(failure_signature__digest=signature)
    if domain:
        queryset = queryset.filter(task__domain__name=domain)
    if task:
        queryset = queryset.filter(task__task_id__icontains=task)  # substring, as typed
    if category:
        queryset = queryset.filter(_has_category(category))
    for condition in conditions:
        queryset = queryset.filter(condition)
    return queryset.order_by(*ordering)


def queue_display_rows(
    attempts: QuerySet[Attempt], *, prefetch: Sequence[Prefetch] = ()
) -> QuerySet[Attempt]:
    """The attempts as queue rows: QUEUE_ROW_FIELDS with task, domain and campaign, no result JSON but its
    first diff item (``first_diff``, the headline of what went wrong), plus the caller's ``prefetch``."""
    return (
        attempts.select_related("task__domain", "campaign")
        .only(*QUEUE_ROW_FIELDS)
        .annotate(first_diff=F("result__diff__0"))
        .prefetch_related(*prefetch)
    )


def queue_ids(attempts: QuerySet[Attempt]) -> list[int]:
    """The attempts' ids in their order (one query)."""
    return list(attempts.values_list("id", flat=True))


def any_attempts(attempts: QuerySet[Attempt]) -> bool:
    """Whether the queryset holds any attempt (one query)."""
    return attempts.exists()


def chosen_attempts(attempts: QuerySet[Attempt], *, ids: Iterable[int]) -> list[Attempt]:
    """Those of the attempts with these ids, with their task: what a bulk label touches (a forged id matches nothing)."""
    return list(attempts.filter(pk__in=list(ids)).select_related("task"))


def _clean_failure_categories(*, campaign_ids: Sequence[int]) -> Iterator[tuple[int, list[str]]]:
    """(campaign id, failure categories) of each clean-looking failure of the campaigns, streamed in chunks."""
    rows = Attempt.objects.filter(
        campaign_id__in=campaign_ids,
        clean_looking=True,
        status=Attempt.Status.DONE,
        verdict=Attempt.Verdict.FAIL,
    )
    return rows.values_list("campaign_id", "categories").iterator(chunk_size=5000)


def categories_per_campaign(*, campaign_ids: Sequence[int]) -> tuple[Counter[int], Counter[tuple[int, str]]]:
    """Clean-looking failures per campaign, and per (campaign, category) the failures with it (one query)."""
    totals: Counter[int] = Counter()
    categories: Counter[tuple[int, str]] = Counter()
    for campaign_id, attempt_categories in _clean_failure_categories(campaign_ids=campaign_ids):
        totals[campaign_id] += 1
        for category in set(attempt_categories or []):
            categories[(campaign_id, category)] += 1
    return totals, categories


def in_signature_forms(variant_ids: Sequence[int]) -> Q:
    """Attempts whose failure signature has one of these stored forms (a value-pair sub-group, triage's ?v=)."""
    return Q(failure_signature__variant_id__in=variant_ids)


def fault_injected(kind: str) -> Q:
    """Attempts into which a fault of this kind was injected (tb_engine.faults record, triage's ?fault=).

    The record's ``fired`` list is matched as text for the quoted kind, as the failure-text search
    matches the diff: a fault kind is a whole JSON string there and no other field of a fired fault
    holds one, and the same lookup runs on PostgreSQL and SQLite.
    """
    return Q(result__extra__faults__fired__icontains=f'"{kind}"')


def failure_text_matches(text: str) -> Q:
    """Every word somewhere in what went wrong: the diff (headline and values), the messages (the
    final reply among them), the failed checks and rubrics, or the task's id and title."""
    condition = Q()
    for word in text.split():
        condition &= (
            Q(result__diff__icontains=word)
            | Q(result__transcript__messages__icontains=word)
            | Q(result__checks__icontains=word)
            | Q(result__rubrics__icontains=word)
            | Q(task__task_id__icontains=word)
            | Q(task__spec__title__icontains=word)
        )
    return condition
