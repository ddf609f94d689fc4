"""Failure clusters (SPEC §8): the queue's attempts grouped by failure signature, described and linked.

A cluster is the set of attempts (of the queue's scope: the user's visible campaigns and filters)
that share one signature; two clusters whose signatures differ by exactly one element are
*related* and shown side by side, never merged. Signatures are stored beside the attempts when
they are recorded (apps.attempts' AttemptSignature, narrow rows pointing at shared
SignatureVariant forms) and counted per (campaign, task, signature, termination) in
SignatureCount, kept with the task summaries: grouping reads those narrow tables whenever the
filters allow (campaign, domain, task, scope), and aggregates the attempts otherwise. The queries
themselves are apps.attempts.selectors.clusters; this module chooses the source, caches and links.

The expensive part — one GROUP BY over every failure in scope and the elements of one example per
cluster — is cached under a stamp of the scope's task summaries (which change whenever an attempt
finishes) and, when the filters read reviews (label, assignee, status), of the audit trail (which
grows with every review change). Per-page details (dominant termination, tasks and models spanned)
are cached the same way; review progress is always read fresh.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import overload

from django.core.cache import cache
from django.db.models import Count, Max, Q, QuerySet

from apps.attempts.models import Attempt, AttemptSignature, SignatureCount
from apps.attempts.selectors import clusters as cluster_reads
from apps.attempts.selectors.summary_stamps import campaigns_revision_stamp
from apps.campaigns.selectors import campaigns_visible_to
from apps.core.memory import collector_paused
from apps.figures.selectors import cached_figure
from apps.triage.models import AttemptReview, AuditEntry
from apps.triage.queue import QueueFilters, queue_queryset
from apps.triage.value_pairs import (
    ValuePairs,
    signature_form_counts,
    value_pairs,
    value_pairs_of_forms,
    value_pairs_of_rows,
)
from tb_engine.signatures import SIGNATURE_VERSION, Element, Signature, describe

PER_PAGE = 50
CACHE_SECONDS = 6 * 3600
CACHE_VERSION = 2
_REVIEW_FILTERS = ("label", "assignee", "status")


@dataclass(frozen=True)
class Cluster:
    """One signature's attempts in scope: counts, spread, two examples, its elements and relatives."""

    signature: str
    size: int  # attempts in scope with this signature
    clean: int  # of them, clean-looking failures (SPEC §4)
    tasks: int
    campaigns: int
    models: int  # distinct agent configurations
    examples: tuple[int, ...]  # first and last attempt id (one when the cluster has one attempt)
    items: tuple[tuple[str, ...], ...]  # the first example's stored signature items
    related: tuple[str, ...] = ()
    # Distinct stored phrase sets among its attempts (1: every attempt shares the example's values);
    # None until counted for a page.
    variants: int | None = None

    @property
    def unsigned(self) -> bool:
        """Attempts stored before signatures existed (manage.py backfill_signatures signs them)."""
        return self.signature == ""

    @cached_property
    def signature_object(self) -> Signature:
        return Signature.from_items(self.items)

    @property
    def elements(self) -> tuple[Element, ...]:
        return self.signature_object.elements

    @cached_property
    def description(self) -> str:
        """Plain words: with the example's values when every attempt shares them, else without values."""
        if self.unsigned:
            return "not signed yet: these attempts were stored before failure signatures (run backfill_signatures)"
        return self.example_description if self.variants == 1 else self.generic_description

    @cached_property
    def generic_description(self) -> str:
        return describe(self.signature_object.generic)

    @cached_property
    def example_description(self) -> str:
        """The first example's own values (shown when the cluster's attempts differ in them)."""
        return describe(self.signature_object.phrases)

    @cached_property
    def categories(self) -> list[str]:
        return sorted({element.category for element in self.elements})


# A cluster in the cached index, as plain values (fast to (un)pickle for thousands of clusters):
# (signature, size, clean, tasks, campaigns, models, first id, last id, items as JSON text, related).
_Row = tuple[str, int, int, int, int, int, int, int, str, tuple[str, ...]]


def _cluster(row: _Row) -> Cluster:
    signature, size, clean, tasks, campaigns, models, first, last, items, related = row
    return Cluster(
        signature=signature,
        size=size,
        clean=clean,
        tasks=tasks,
        campaigns=campaigns,
        models=models,
        examples=(first,) if first == last else (first, last),
        items=tuple(tuple(item) for item in json.loads(items or "[]")),
        related=related,
    )


@dataclass(frozen=True)
class ClusterIndex:
    """Every cluster of one scope, largest first, with the scope's totals.

    Holds the clusters as plain rows and builds Cluster objects only for what is read (a page, one
    cluster), so a warm page unpickles a few small tuples per cluster, not thousands of objects.
    Behaves as a sequence of clusters (len, slices), so it can be paged directly.
    """

    rows: tuple[_Row, ...]
    attempts: int  # attempts in scope
    clean: int  # clean-looking failures in scope
    stamp: str

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, key: int) -> Cluster: ...
    @overload
    def __getitem__(self, key: slice) -> list[Cluster]: ...
    def __getitem__(self, key: int | slice) -> Cluster | list[Cluster]:
        if isinstance(key, slice):
            return [_cluster(row) for row in self.rows[key]]
        return _cluster(self.rows[key])

    def __iter__(self) -> Iterator[Cluster]:
        return (_cluster(row) for row in self.rows)

    def count(self) -> int:
        return len(self.rows)

    @property
    def clusters(self) -> list[Cluster]:
        """Every cluster as an object, largest first (builds all of them: for exports and tests, not pages)."""
        return self[:]

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {row[0]: position for position, row in enumerate(self.rows)}

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_positions", None)  # derived; rebuilt on first lookup
        return state

    def get(self, signature: str) -> Cluster | None:
        position = self._positions.get(signature)
        return None if position is None else _cluster(self.rows[position])

    def largest(self, signatures: Iterable[str], count: int) -> list[Cluster]:
        """The ``count`` largest of these clusters (size, then signature), building only those: the rows
        are already in that order, so their positions are."""
        positions = sorted(p for p in (self._positions.get(s) for s in signatures) if p is not None)
        return [_cluster(self.rows[position]) for position in positions[:count]]

    def share(self, cluster: Cluster) -> float | None:
        """The cluster's share of the scope's clean-looking failures."""
        return cluster.clean / self.clean if self.clean else None

    @property
    def ratio(self) -> float | None:
        """Attempts per cluster row: how much shorter the grouped view is than the flat one."""
        return self.attempts / len(self.rows) if self.rows else None


@dataclass(frozen=True)
class ClusterRow:
    """A cluster as a row of the grouped queue: the cluster plus what the page shows about it."""

    cluster: Cluster
    share: float | None
    termination: str
    termination_share: float
    top_tasks: tuple[tuple[str, int], ...]
    top_models: tuple[tuple[str, int], ...]
    queue: str  # the queue filters narrowed to this cluster (j/k in the drilldown walk its attempts)
    reviewed: int = 0
    labelled: int = 0
    related: tuple[Cluster, ...] = field(default=())  # the largest related clusters (at most RELATED_SHOWN)

    # Joined here, not by template loops: three loops per row were a sixth of the grouped page's render.
    @property
    def tasks_title(self) -> str:
        """The most frequent tasks with their counts ("t1 (4), t2 (2)")."""
        return ", ".join(f"{name} ({n})" for name, n in self.top_tasks)

    @property
    def models_title(self) -> str:
        return ", ".join(f"{name} ({n})" for name, n in self.top_models)

    @property
    def tasks_text(self) -> str:
        """The most frequent tasks' names, with an ellipsis when the cluster spans more."""
        names = ", ".join(name for name, _ in self.top_tasks)
        return names + " …" if self.cluster.tasks > len(self.top_tasks) else names


RELATED_SHOWN = 3


def _stamp(campaign_ids: list[int], filters: QueueFilters) -> str:
    """Changes whenever an attempt of the scope is recorded, re-graded, cancelled or re-signed, or its
    suite revised (and, with review filters, whenever a review changes): the campaigns' summary
    revisions, one row per campaign kept by database triggers, not an aggregate over their summaries."""
    parts = [campaigns_revision_stamp(campaign_ids)]
    if any(getattr(filters, name) for name in _REVIEW_FILTERS):
        parts.append(str(AuditEntry.objects.aggregate(last=Max("pk"))["last"] or 0))
    return "-".join(parts)


def _key(kind: str, campaign_ids: list[int], filters: QueueFilters, stamp: str, *parts) -> str:
    raw = "|".join(
        str(p)
        for p in (
            SIGNATURE_VERSION,
            kind,
            ",".join(map(str, campaign_ids)),
            filters.querystring(),
            stamp,
            *parts,
        )
    )
    return f"triage:clusters:v{CACHE_VERSION}:{kind}:" + hashlib.sha1(raw.encode()).hexdigest()


def _scope(user, filters: QueueFilters) -> tuple[list[int], QueueFilters]:
    visible = campaigns_visible_to(user)
    if filters.campaigns:
        visible = visible.filter(pk__in=filters.campaigns)
    return sorted(visible.values_list("pk", flat=True)), filters.without_signature()


def cluster_index(*, user, filters: QueueFilters) -> ClusterIndex:
    """Every cluster of the user's queue with these filters (the signature filter ignored), cached.

    Scopes the count table answers (``_stored_scope``) are stored for every process (StoredFigure,
    through apps.figures, at the scope's stamp): a fresh server process reads the index in one
    query instead of grouping every count row, and ``cluster_indexes_store`` stores the teams'
    default scopes when their signatures or counts change. Other scopes are cached in the shared cache.
    """
    campaign_ids, filters = _scope(user, filters)
    stamp = _stamp(campaign_ids, filters)
    if _stored_scope(filters):
        return stored_cluster_index(campaign_ids=campaign_ids, filters=filters, stamp=stamp)
    key = _key("index", campaign_ids, filters, stamp)
    token = cache.get(key + ":token")
    if token is not None:
        with _LOCAL_LOCK:
            held = _LOCAL.get(key)
        if held is not None and held[0] == token:
            return held[1]
        found = cache.get(key)
        if found is not None:
            _remember(key, token, found)
            return found
    counts = _counts(campaign_ids, filters)
    with collector_paused():  # thousands of rows of tuples: no collection pauses while they are built
        if counts is not None:
            found = _build_index_from_counts(counts, filters, stamp)
        else:
            found = _build_index(queue_queryset(user=user, filters=filters), stamp)
    token = uuid.uuid4().hex
    cache.set_many({key: found, key + ":token": token}, CACHE_SECONDS)
    _remember(key, token, found)
    return found


def _stored_scope(filters: QueueFilters) -> bool:
    """Whether the scope's index and page details are stored rows: the count table answers its filters
    and they are not free text (a bounded number of slots per campaign set: scope x domain)."""
    return _from_counts(filters) and not filters.task


def _stored_parts(campaign_ids: list[int], filters: QueueFilters) -> tuple:
    """What names a stored scope's slot (its version is the scope's stamp)."""
    return (SIGNATURE_VERSION, CACHE_VERSION, tuple(campaign_ids), filters.querystring())


def stored_cluster_index(*, campaign_ids: list[int], filters: QueueFilters, stamp: str) -> ClusterIndex:
    """The index of a stored scope: this process's copy, else its stored row at ``stamp``, else built
    from the count and signature tables (one aggregate, one read of example items) and stored."""

    def build() -> ClusterIndex:
        counts = _counts(campaign_ids, filters)
        assert counts is not None  # a stored scope is one the count table answers
        with collector_paused():
            return _build_index_from_counts(counts, filters, stamp)

    return cached_figure("triage-index", stamp, build, *_stored_parts(campaign_ids, filters))


# The last few indexes this process read, as live objects: unpickling an index of thousands of
# clusters from the shared cache costs more than the rest of a warm page. An entry is used only
# while the shared cache still holds the token it was stored under (the key carries the scope's
# stamp), so it is exactly as fresh as the shared cache and disappears with cache.clear().
_LOCAL: OrderedDict[str, tuple[str, ClusterIndex]] = OrderedDict()
_LOCAL_LOCK = threading.Lock()
_LOCAL_SIZE = 8


def _remember(key: str, token: str, index: ClusterIndex) -> None:
    with _LOCAL_LOCK:
        _LOCAL[key] = (token, index)
        _LOCAL.move_to_end(key)
        while len(_LOCAL) > _LOCAL_SIZE:
            _LOCAL.popitem(last=False)


def _clean_only(filters: QueueFilters) -> bool:
    return filters.scope == "clean"


def _from_counts(filters: QueueFilters) -> bool:
    """Campaign, domain, task and scope filters are answered by the count table; category, text,
    fault and review filters need the attempts."""
    return not (
        filters.category
        or filters.text
        or filters.fault
        or any(getattr(filters, name) for name in _REVIEW_FILTERS)
    )


def _counts(campaign_ids: list[int], filters: QueueFilters) -> QuerySet[SignatureCount] | None:
    """The scope's SignatureCount rows, when the filters can be answered from them (None: read attempts)."""
    if not _from_counts(filters):
        return None
    return cluster_reads.signature_counts(
        campaign_ids=campaign_ids, clean_only=_clean_only(filters), domain=filters.domain, task=filters.task
    )


def _signature_rows(campaign_ids: list[int], filters: QueueFilters) -> QuerySet[AttemptSignature]:
    """The scope's signature rows, for filters _counts can answer (the same conditions, one row per attempt)."""
    return cluster_reads.signature_rows(
        campaign_ids=campaign_ids, clean_only=_clean_only(filters), domain=filters.domain, task=filters.task
    )


def _build_index_from_counts(
    counts: QuerySet[SignatureCount], filters: QueueFilters, stamp: str
) -> ClusterIndex:
    """The index from the count table: one aggregate over narrow rows, no read of the attempt heap."""
    found = cluster_reads.cluster_groups_from_counts(counts, clean_only=_clean_only(filters))
    return _index_from_groups(found, stamp)


def _build_index(queryset: QuerySet[Attempt], stamp: str) -> ClusterIndex:
    """One aggregate over the failed attempts in scope and one read of example items, whatever their number."""
    return _index_from_groups(cluster_reads.cluster_groups(queryset), stamp)


def _index_from_groups(found: list[tuple], stamp: str) -> ClusterIndex:
    """Rows of (signature, size, clean, tasks, campaigns, models, first id, last id) -> the index."""
    items = cluster_reads.example_items([int(row[6]) for row in found])
    # Each distinct element as a small int (an Element is a NamedTuple, equal to the tuple of its
    # fields): sets of ints hash and subtract faster than sets of tuples, for thousands of clusters.
    numbers: dict[tuple, int] = {}
    elements = {
        signature: frozenset(
            numbers.setdefault(tuple(item[:4]), len(numbers))
            for item in json.loads(items.get(int(first)) or "[]")
        )
        for signature, *_, first, _last in found
        if signature
    }
    related = _related(elements)
    rows: list[_Row] = [
        (
            signature,
            int(size),
            int(clean),
            int(tasks),
            int(campaigns),
            int(models),
            int(first),
            int(last),
            items.get(int(first)) or "[]",
            tuple(sorted(related.get(signature, ()))),
        )
        for signature, size, clean, tasks, campaigns, models, first, last in found
    ]
    rows.sort(key=lambda row: (-row[1], row[0]))
    return ClusterIndex(
        rows=tuple(rows),
        attempts=sum(row[1] for row in rows),
        clean=sum(row[2] for row in rows),
        stamp=stamp,
    )


def _related(elements: dict[str, frozenset[int]]) -> dict[str, set[str]]:
    """SPEC §8: signatures one element apart, found through each signature's one-smaller neighbours.

    A digest names its set of elements (tb_engine.signatures.digest_of), so the neighbours are
    looked up by the element sets themselves: no digest is recomputed. Only sets with a set one
    element smaller in the index can have such a neighbour.
    """
    by_elements = {own: signature for signature, own in elements.items()}
    sizes = {len(own) for own in by_elements}
    links: dict[str, set[str]] = defaultdict(set)
    for signature, own in elements.items():
        if len(own) - 1 not in sizes:
            continue
        for element in own:
            smaller = by_elements.get(own - {element})
            if smaller is not None:
                links[signature].add(smaller)
                links[smaller].add(signature)
    return links


def cluster_rows(
    *, user, filters: QueueFilters, index: ClusterIndex, page: Iterable[Cluster]
) -> list[ClusterRow]:
    """The grouped queue's rows for one page of clusters: details cached with the index, reviews fresh."""
    page = list(page)
    campaign_ids, filters = _scope(user, filters)
    signatures = [c.signature for c in page]
    base = queue_queryset(user=user, filters=filters, ordered=False)
    if _stored_scope(filters):
        details = stored_page_details(
            campaign_ids=campaign_ids, filters=filters, stamp=index.stamp, signatures=signatures
        )
    else:
        key = _key("rows", campaign_ids, filters, index.stamp, *signatures)
        details = cache.get(key)
        if details is None:
            counts = _counts(campaign_ids, filters)
            signature_rows = _signature_rows(campaign_ids, filters) if counts is not None else None
            details = _page_details(base, signatures, counts, signature_rows, filters)
            cache.set(key, details, CACHE_SECONDS)
    reviewed, labelled = _review_progress(base, signatures)
    rows = []
    for cluster in page:
        termination, share, tasks, models, variants = details.get(cluster.signature, ("", 0.0, (), (), None))
        # A large cluster has dozens of relatives at 100 campaigns; the row shows the largest few.
        relatives = index.largest(cluster.related, RELATED_SHOWN)
        rows.append(
            ClusterRow(
                cluster=replace(cluster, variants=variants),
                share=index.share(cluster),
                termination=termination,
                termination_share=share,
                top_tasks=tasks,
                top_models=models,
                queue=filters.with_signature(cluster.signature).querystring(),
                reviewed=reviewed[cluster.signature],
                labelled=labelled[cluster.signature],
                related=tuple(relatives),
            )
        )
    return rows


def stored_page_details(
    *, campaign_ids: list[int], filters: QueueFilters, stamp: str, signatures: list[str]
) -> dict[str, tuple]:
    """A page's details (termination, spread, phrase variants) of a stored scope (see stored_page)."""
    return stored_page(campaign_ids=campaign_ids, filters=filters, stamp=stamp, signatures=signatures)[0]


def stored_value_pairs(
    *, campaign_ids: list[int], filters: QueueFilters, stamp: str, signatures: list[str]
) -> dict[str, ValuePairs]:
    """A page's value-pair sub-groups of a stored scope (see stored_page)."""
    return stored_page(campaign_ids=campaign_ids, filters=filters, stamp=stamp, signatures=signatures)[1]


def stored_page(
    *, campaign_ids: list[int], filters: QueueFilters, stamp: str, signatures: list[str]
) -> tuple[dict[str, tuple], dict[str, ValuePairs]]:
    """A page of a stored scope: its details and its value pairs, stored with the index's stamp for
    every process. The signature rows of the page's clusters are grouped once, by (signature, form):
    that grouping is both the value pairs' input and each cluster's number of phrase variants."""

    def compute() -> tuple[dict[str, tuple], dict[str, ValuePairs]]:
        forms = signature_form_counts(_signature_rows(campaign_ids, filters), signatures=signatures)
        details = cluster_reads.cluster_page_details(
            attempts=None,
            signatures=signatures,
            counts=_counts(campaign_ids, filters),
            rows=None,
            clean_only=_clean_only(filters),
            variants={signature: len(found) for signature, found in forms.items()},
        )
        return details, value_pairs_of_forms(forms)

    return cached_figure(
        "triage-page", stamp, compute, *_stored_parts(campaign_ids, filters), tuple(signatures)
    )


def cluster_value_pairs(
    *, user, filters: QueueFilters, index: ClusterIndex, signatures: list[str]
) -> dict[str, ValuePairs]:
    """The value-pair sub-groups of one page of clusters, cached with the index like the page's details.

    They change only when a signature or the scope's attempts do, which the index's stamp follows
    (new attempts, a signature backfill, review changes under review filters): a returning viewer
    does not group the page's largest clusters' signature rows again.
    """
    if not signatures:
        return {}
    campaign_ids, scoped = _scope(user, filters)
    if _stored_scope(scoped):
        return stored_value_pairs(
            campaign_ids=campaign_ids, filters=scoped, stamp=index.stamp, signatures=signatures
        )
    key = _key("pairs", campaign_ids, scoped, index.stamp, *signatures)
    found = cache.get(key)
    if found is None:
        if _counts(campaign_ids, scoped) is not None:  # the signature rows answer these filters
            found = value_pairs_of_rows(_signature_rows(campaign_ids, scoped), signatures=signatures)
        else:
            found = value_pairs(
                queue_queryset(user=user, filters=scoped, ordered=False), signatures=signatures
            )
        cache.set(key, found, CACHE_SECONDS)
    return found


def _page_details(
    base: QuerySet[Attempt],
    signatures: list[str],
    counts: QuerySet[SignatureCount] | None,
    rows: QuerySet[AttemptSignature] | None,
    filters: QueueFilters,
) -> dict[str, tuple]:
    """Per signature: dominant termination and its share, the most frequent tasks and models, phrase variants.

    From the count table and the signature rows when the filters allow it (``counts``, ``rows``),
    else from the attempts.
    """
    return cluster_reads.cluster_page_details(
        attempts=base, signatures=signatures, counts=counts, rows=rows, clean_only=_clean_only(filters)
    )


def _review_progress(base: QuerySet[Attempt], signatures: list[str]) -> tuple[Counter, Counter]:
    """Per signature: attempts marked reviewed, and attempts carrying at least one label (one query)."""
    reviews = AttemptReview.objects.filter(
        attempt__in=cluster_reads.in_clusters(base, signatures=signatures)
    ).values("attempt__failure_signature__digest")
    reviewed: Counter = Counter()
    labelled: Counter = Counter()
    for row in reviews.annotate(
        reviewed=Count("id", filter=Q(status=AttemptReview.Status.REVIEWED), distinct=True),
        labelled=Count("id", filter=Q(labels__isnull=False), distinct=True),
    ):
        reviewed[row["attempt__failure_signature__digest"]] = row["reviewed"]
        labelled[row["attempt__failure_signature__digest"]] = row["labelled"]
    return reviewed, labelled


@dataclass(frozen=True)
class CampaignShare:
    campaign_id: int
    name: str
    attempts: int  # of the cluster, in this campaign
    failures: int  # failures of this campaign in scope


def cluster_campaigns(*, user, filters: QueueFilters, signature: str) -> list[CampaignShare]:
    """The cluster's distribution over the scope's campaigns (every campaign in scope, zero included).

    The scope's failures per campaign are cached with the index's stamp; the cluster's own counts are
    one query over the signature index.
    """
    campaign_ids, filters = _scope(user, filters)
    # The count table answers both when the filters allow it, without reading attempts.
    attempts = queue_queryset(user=user, filters=filters, ordered=False)
    counts, clean_only = _counts(campaign_ids, filters), _clean_only(filters)
    stamp = _stamp(campaign_ids, filters)
    if _stored_scope(filters):
        failures = stored_failures_by_campaign(campaign_ids=campaign_ids, filters=filters, stamp=stamp)
    else:
        key = _key("campaigns", campaign_ids, filters, stamp)
        failures = cache.get(key)
        if failures is None:
            failures = cluster_reads.failures_by_campaign(
                attempts=attempts, counts=counts, clean_only=clean_only
            )
            cache.set(key, failures, CACHE_SECONDS)
    mine = cluster_reads.cluster_size_by_campaign(
        attempts=attempts, counts=counts, clean_only=clean_only, signature=signature
    )
    return sorted(
        (CampaignShare(pk, name, mine.get(pk, 0), total) for pk, (name, total) in failures.items()),
        key=lambda share: (share.name, share.campaign_id),
    )


def stored_failures_by_campaign(
    *, campaign_ids: list[int], filters: QueueFilters, stamp: str
) -> dict[int, tuple[str, int]]:
    """Campaign id -> (name, failures in scope) of a stored scope, from the count table, stored with its stamp."""

    def compute() -> dict[int, tuple[str, int]]:
        return cluster_reads.failures_by_campaign(
            attempts=None,
            counts=_counts(campaign_ids, filters),
            clean_only=_clean_only(filters),
        )

    return cached_figure("triage-campaigns", stamp, compute, *_stored_parts(campaign_ids, filters))


def store_scope(*, campaign_ids: list[int], filters: QueueFilters) -> ClusterIndex:
    """Store what a stored scope's first grouped page and its cluster pages read: the index, the
    first page's details and value pairs, the failures per campaign (each skipped when stored at the
    scope's current stamp). Returns the index."""
    campaign_ids, filters = sorted(campaign_ids), filters.without_signature()
    if not _stored_scope(filters):
        raise ValueError(f"the scope {filters.querystring()!r} is not stored (its filters need the attempts)")
    stamp = _stamp(campaign_ids, filters)
    index = stored_cluster_index(campaign_ids=campaign_ids, filters=filters, stamp=stamp)
    first_page = [cluster.signature for cluster in index[:PER_PAGE]]
    stored_page(campaign_ids=campaign_ids, filters=filters, stamp=stamp, signatures=first_page)
    stored_failures_by_campaign(campaign_ids=campaign_ids, filters=filters, stamp=stamp)
    return index


def others_like(*, user, attempt: Attempt) -> int:
    """How many other failed attempts of the user's campaigns share this attempt's signature (one query)."""
    if not attempt.signature:
        return 0
    return cluster_reads.signature_others(
        digest=attempt.signature, attempt_id=attempt.pk, campaigns=campaigns_visible_to(user)
    )
