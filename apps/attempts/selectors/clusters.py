"""Failure clusters (SPEC §8) read from the attempt record: the grouping queries behind triage's queue.

Triage decides which source answers a scope (the narrow count and signature tables when its filters
allow, the failed attempts otherwise) and caches what these return; the queries themselves — one
GROUP BY over every failure in scope, the example items, a page's spread and phrase variants, the
campaign distribution — live here beside the tables they read. They are performance-critical
(bench/clusters.py: grouped_p95_ms, grouped_first_ms), so each keeps the shape it was tuned in.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from django.db import connection
from django.db.models import Count, Max, Min, Q, QuerySet, Sum, TextField, Value
from django.db.models.functions import Cast, Coalesce

from apps.attempts.models import Attempt, AttemptSignature, SignatureCount, SignatureVariant, campaign_model
from apps.core.batches import in_slices

# The most frequent tasks and models a cluster row names.
TOP = 3

# One cluster's aggregate: (signature, size, clean, tasks, campaigns, models, first id, last id).
ClusterGroup = tuple[str, int, int, int, int, int, int, int]


def _task_filtered(queryset: QuerySet, *, domain: str, task: str) -> QuerySet:
    """The domain and task filters on a table with a task, as the failure queue applies them to attempts."""
    if domain:
        queryset = queryset.filter(task__domain__name=domain)
    if task:
        queryset = queryset.filter(task__task_id__icontains=task)
    return queryset


def signature_counts(
    *, campaign_ids: Sequence[int], clean_only: bool, domain: str = "", task: str = ""
) -> QuerySet[SignatureCount]:
    """The scope's SignatureCount rows (failed attempts per campaign, task, signature, termination)."""
    counts = SignatureCount.objects.filter(campaign_id__in=campaign_ids)
    if clean_only:
        counts = counts.filter(clean__gt=0)
    return _task_filtered(counts, domain=domain, task=task).order_by()


def signature_rows(
    *, campaign_ids: Sequence[int], clean_only: bool, domain: str = "", task: str = ""
) -> QuerySet[AttemptSignature]:
    """The scope's signature rows: the same conditions as ``signature_counts``, one row per attempt."""
    rows = AttemptSignature.objects.filter(campaign_id__in=campaign_ids)
    if clean_only:
        rows = rows.filter(clean_looking=True)
    return _task_filtered(rows, domain=domain, task=task)


def size_columns(*, clean_only: bool) -> tuple[str, str, str]:
    """The SignatureCount columns holding the scope's attempts: count, first and last id."""
    if clean_only:
        return "clean", "first_clean_id", "last_clean_id"
    return "failures", "first_id", "last_id"


def cluster_groups_from_counts(counts: QuerySet[SignatureCount], *, clean_only: bool) -> list[ClusterGroup]:
    """Every signature of the scope with its totals: one aggregate over narrow rows, no read of the attempt heap."""
    size, first, last = size_columns(clean_only=clean_only)
    return [
        tuple(row)
        for row in counts.values("signature")
        .annotate(
            size=Sum(size),
            clean_n=Sum("clean"),
            tasks=Count("task_id", distinct=True),
            campaigns=Count("campaign_id", distinct=True),
            models=Count("campaign__agent_id", distinct=True),
            first=Min(first),
            last=Max(last),
        )
        .values_list("signature", "size", "clean_n", "tasks", "campaigns", "models", "first", "last")
    ]


def cluster_groups(attempts: QuerySet[Attempt]) -> list[ClusterGroup]:
    """Every signature of these attempts with its totals ("" for attempts not signed yet), in one statement.

    Distinct tasks, campaigns and models are counted over (signature, campaign, task) groups rather
    than over attempts: the same answer from a table a fraction of the size.
    """
    groups = (
        attempts.order_by()
        .annotate(digest=Coalesce("failure_signature__digest", Value("")))  # "": not signed yet
        .values("digest", "campaign_id", "task_id")
        # The plugin checks `clean` against Attempt's attributes (Model.clean) although rows are
        # dicts after .values(); Django only refuses names of fields.
        .annotate(  # type: ignore[no-redef]
            n=Count("id"), clean=Count("id", filter=Q(clean_looking=True)), first=Min("id"), last=Max("id")
        )
    )
    sql, params = groups.query.sql_with_params()
    q = connection.ops.quote_name
    campaigns = campaign_model()._meta.db_table
    outer = (
        f"SELECT g.{q('digest')}, SUM(g.{q('n')}), SUM(g.{q('clean')}), COUNT(DISTINCT g.{q('task_id')}), "
        f"COUNT(DISTINCT g.{q('campaign_id')}), COUNT(DISTINCT c.{q('agent_id')}), MIN(g.{q('first')}), "
        f"MAX(g.{q('last')}) FROM ({sql}) g JOIN {q(campaigns)} c ON c.{q('id')} = g.{q('campaign_id')} "
        f"GROUP BY g.{q('digest')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(outer, params)
        return cursor.fetchall()


def example_items(attempt_ids: list[int]) -> dict[int, str]:
    """The stored signature items (JSON text) of these attempts, by attempt id.

    On PostgreSQL one statement joining the ids as an array (a hash join over the narrow tables,
    not thousands of index probes, and no per-id parameter for Django to resolve); IN lists in
    chunks elsewhere.
    """
    if connection.vendor == "postgresql":
        q = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT s.attempt_id, v.items::text FROM unnest(%s::bigint[]) AS f(id) "
                f"JOIN {q(AttemptSignature._meta.db_table)} s ON s.attempt_id = f.id "
                f"JOIN {q(SignatureVariant._meta.db_table)} v ON v.id = s.variant_id",
                [attempt_ids],
            )
            return dict(cursor.fetchall())
    items: dict[int, str] = {}
    for chunk in in_slices(attempt_ids):
        items.update(
            AttemptSignature.objects.filter(attempt_id__in=chunk)
            .annotate(items_text=Cast("variant__items", TextField()))
            .values_list("attempt_id", "items_text")
        )
    return items


def in_clusters(attempts: QuerySet[Attempt], *, signatures: Sequence[str]) -> QuerySet[Attempt]:
    """Those of the attempts whose failure signature is one of ``signatures``."""
    return attempts.filter(failure_signature__digest__in=signatures)


def cluster_members(attempts: QuerySet[Attempt], *, signatures: Sequence[str]) -> list[Attempt]:
    """The attempts of these clusters with what a bulk review action needs (id, task, campaign's team)."""
    return list(
        in_clusters(attempts, signatures=signatures)
        .select_related("campaign__team")
        .only("id", "task_id", "campaign_id", "campaign__team_id")
    )


def cluster_page_details(
    *,
    attempts: QuerySet[Attempt] | None,
    signatures: list[str],
    counts: QuerySet[SignatureCount] | None,
    rows: QuerySet[AttemptSignature] | None,
    clean_only: bool,
    variants: dict[str, int] | None = None,
) -> dict[str, tuple]:
    """Per signature: dominant termination and its share, the most frequent tasks and models, phrase variants (two queries).

    From the count table and the signature rows when given (``counts``, ``rows``: the scope's filters
    allow it), else from ``attempts`` (the scope's failed attempts, unordered; None when the counts
    answer). ``variants``: the phrase variants per signature when the caller counted them already
    (then one query).
    """
    scoped = in_clusters(Attempt.objects.none() if attempts is None else attempts, signatures=signatures)
    terminations: dict[str, Counter] = defaultdict(Counter)
    tasks: dict[str, Counter] = defaultdict(Counter)
    models: dict[str, Counter] = defaultdict(Counter)
    spread = ("termination", "task__task_id", "campaign__agent__name")
    if counts is not None:
        grouping = ("signature", *spread)
        groups = (
            counts.filter(signature__in=signatures)
            .values(*grouping)
            .annotate(n=Sum(size_columns(clean_only=clean_only)[0]))
        )
    else:
        grouping = ("failure_signature__digest", *spread)
        groups = scoped.values(*grouping).annotate(n=Count("id"))
    # One pass over the page's groups, by everything the three counts need.
    for signature, termination, task, model, n in groups.values_list(*grouping, "n"):
        terminations[signature][termination] += n
        tasks[signature][task] += n
        models[signature][model] += n
    if variants is None:
        if rows is None:
            rows = AttemptSignature.objects.filter(attempt__in=scoped.values("pk"))
        variants = dict(
            rows.filter(digest__in=signatures)
            .order_by()
            .values("digest")
            .annotate(v=Count("variant_id", distinct=True))
            .values_list("digest", "v")
        )
    details = {}
    for signature in signatures:
        by_termination = terminations[signature]
        total = sum(by_termination.values())
        name, n = (
            min(by_termination.items(), key=lambda item: (-item[1], item[0])) if by_termination else ("", 0)
        )
        details[signature] = (
            name,
            n / total if total else 0.0,
            _top(tasks[signature]),
            _top(models[signature]),
            variants.get(signature),
        )
    return details


def _top(counts: Counter) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:TOP])


def _by_campaign(
    attempts: QuerySet[Attempt] | None, counts: QuerySet[SignatureCount] | None, clean_only: bool
):
    """The source of a campaign distribution: the count table when given, else the attempts."""
    if counts is not None:  # the count table answers, without reading attempts
        return counts, Sum(size_columns(clean_only=clean_only)[0]), "signature"
    return Attempt.objects.none() if attempts is None else attempts, Count("id"), "failure_signature__digest"


def failures_by_campaign(
    *, attempts: QuerySet[Attempt] | None, counts: QuerySet[SignatureCount] | None, clean_only: bool
) -> dict[int, tuple[str, int]]:
    """Campaign id -> (name, failures in scope), from ``counts`` when given, else from ``attempts`` (one query)."""
    source, n, _ = _by_campaign(attempts, counts, clean_only)
    return {
        row["campaign_id"]: (row["campaign__name"], row["n"])
        for row in source.values("campaign_id", "campaign__name").annotate(n=n)
    }


def cluster_size_by_campaign(
    *,
    attempts: QuerySet[Attempt],
    counts: QuerySet[SignatureCount] | None,
    clean_only: bool,
    signature: str,
) -> dict[int, int]:
    """Campaign id -> the cluster's attempts there (campaigns without any left out; one query)."""
    source, n, own = _by_campaign(attempts, counts, clean_only)
    return dict(
        source.filter(**{own: signature}).values("campaign_id").annotate(n=n).values_list("campaign_id", "n")
    )


def signature_others(*, digest: str, attempt_id: int, campaigns: QuerySet) -> int:
    """How many other signed failures of these campaigns share the signature ``digest`` (one query)."""
    return (
        AttemptSignature.objects.filter(digest=digest, campaign__in=campaigns.values("pk"))
        .exclude(attempt_id=attempt_id)
        .count()
    )


def signature_rows_of(attempts: QuerySet[Attempt]) -> QuerySet[AttemptSignature]:
    """The signature rows of the attempts (for value-pair sub-groups)."""
    return AttemptSignature.objects.filter(attempt__in=attempts.values("pk"))


def signature_forms(variant_ids: Sequence[int]) -> dict[int, list]:
    """Each stored signature form's items (its elements' phrases with one attempt's values), by pk (one query)."""
    return dict(SignatureVariant.objects.filter(pk__in=list(variant_ids)).values_list("pk", "items"))
