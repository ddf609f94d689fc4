"""The labels a page of failure clusters carries, so the grouped queue shows what a bulk action did (issue 30)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, QuerySet

from apps.attempts.models import Attempt
from apps.attempts.selectors.clusters import in_clusters
from apps.triage.models import AttemptReview


def cluster_labels(
    attempts: QuerySet[Attempt], *, signatures: Iterable[str]
) -> dict[str, list[tuple[str, int]]]:
    """Per signature, (label name, attempts carrying it) among those of `attempts`, most used first (one query)."""
    wanted = list(signatures)
    if not wanted:
        return {}
    rows = (
        AttemptReview.objects.filter(
            attempt__in=in_clusters(attempts, signatures=wanted).values("pk"),
            labels__isnull=False,
        )
        .values("attempt__failure_signature__digest", "labels__name")
        .annotate(n=Count("attempt_id", distinct=True))
    )
    found: dict[str, list[tuple[str, int]]] = {}
    for row in rows:
        found.setdefault(row["attempt__failure_signature__digest"], []).append(
            (row["labels__name"], row["n"])
        )
    return {signature: sorted(pairs, key=lambda p: (-p[1], p[0])) for signature, pairs in found.items()}
