"""Failure signatures of stored attempts (SPEC §8): the backfill behind ``manage.py backfill_signatures``.

New attempts get their signature when they are recorded (AttemptOutcome.signature_row, on every
record path). Attempts stored before signatures existed — or all of them, after the signature
definition changed (tb_engine.signatures.SIGNATURE_VERSION) — get it here.

On PostgreSQL the database does the reading and the grouping: it extracts the parts of each
result a signature reads (diff items without their row key, checks, rubrics, categories, tool
names — never transcript text) and groups the attempts by them, so Python signs each distinct
set of parts once (bench/clusters.py: ~95k failed attempts, ~17-23k distinct part sets, ~15k
distinct signature forms). Signatures never read a diff item's key (tb_engine.signatures), so
dropping it only makes more attempts share one computation. The rows are COPYed into the narrow
AttemptSignature table: no wide attempt row is rewritten. Elsewhere the same computation runs
per attempt through the ORM in batches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import psycopg
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from apps.attempts.models import Attempt, AttemptSignature, SignatureVariant, TaskSummary
from apps.attempts.signature_rows import SignatureRow, items_hash, items_text, signatures_store
from apps.attempts.summaries import signature_counts_refresh
from apps.core.batches import in_slices
from apps.core.memory import collector_paused
from apps.suites.models import Task
from tb_engine.signatures import Signature, check_target, signature_from_parts

BATCH = 5000


@dataclass(frozen=True)
class BackfillReport:
    scanned: int  # failed attempts read
    changed: int  # of them, attempts whose stored signature changed
    campaigns: int  # campaigns with at least one changed attempt


class _CheckTargets:
    """The task's checks named by position (for stored check results that predate their target)."""

    def __init__(self) -> None:
        self._by_task: dict[int, list[str]] = {}

    def load(self, task_ids: Iterable[int]) -> None:
        missing = sorted(set(task_ids) - self._by_task.keys())
        for chunk in in_slices(missing):
            for pk, checks in Task.objects.filter(pk__in=chunk).values_list("pk", "spec__checks"):
                self._by_task[pk] = [
                    check_target(c.get("kind", ""), c.get("params") or {}, c.get("description", ""))
                    for c in checks or []
                    if isinstance(c, dict)
                ]

    def of(self, task_id: int) -> list[str]:
        return self._by_task.get(task_id, [])


@dataclass(frozen=True)
class _Selection:
    """Which attempts to sign: failed ones, lacking a signature unless recomputing, of some campaigns."""

    campaign_ids: list[int] | None
    recompute: bool

    def q(self) -> Q:
        condition = Q(status=Attempt.Status.DONE, verdict=Attempt.Verdict.FAIL)
        if not self.recompute:
            condition &= ~Q(Exists(AttemptSignature.objects.filter(attempt_id=OuterRef("pk"))))
        if self.campaign_ids is not None:
            condition &= Q(campaign_id__in=self.campaign_ids)
        return condition

    def sql(self, signatures: str) -> tuple[str, list]:
        where = ["a.status = %s", "a.verdict = %s"]
        params: list = [Attempt.Status.DONE, Attempt.Verdict.FAIL]
        if not self.recompute:
            where.append(f"NOT EXISTS (SELECT 1 FROM {signatures} s WHERE s.attempt_id = a.id)")
        if self.campaign_ids is not None:
            where.append("a.campaign_id = ANY(%s)")
            params.append(list(self.campaign_ids))
        return " AND ".join(where), params


def _signature(parts: list, check_targets: list[str]) -> Signature:
    diff, checks, rubrics, categories, tools, faults = parts
    return signature_from_parts(
        diff=diff or (),
        checks=checks or (),
        rubrics=rubrics or (),
        categories=categories or (),
        tools=[str(name) for name in tools or ()],
        check_targets=check_targets,
        faults=[fault for fault in faults or () if isinstance(fault, (dict, list))],
    )


def backfill_signatures(*, campaign_ids: list[int] | None = None, recompute: bool = False) -> BackfillReport:
    """Compute and store the signature of every failed attempt that lacks one (all of them with ``recompute``).

    Side effects: AttemptSignature rows (and new SignatureVariant rows); the touched campaigns'
    SignatureCount rows are recounted and their TaskSummary rows get a new signatures_at, so pages
    cached by summary stamp (clusters, suspects) are recomputed; stored figures (which read the
    counts only) stay valid.
    """
    selection = _Selection(campaign_ids, recompute)
    # Called outside a transaction, every connection sees what this one sees: the PostgreSQL
    # read may then be split over two connections (two server processes).
    outside_transaction = not connection.in_atomic_block
    with transaction.atomic(), collector_paused():  # ~100k short-lived rows, no cycles
        if connection.vendor == "postgresql":
            scanned, changed, campaigns = _backfill_postgres(selection, outside_transaction)
        else:
            scanned, changed, campaigns = _backfill_orm(selection)
        if campaigns:
            # Every failed attempt of a touched campaign was just signed, unless the selection
            # skipped signed ones (they have rows) — none is left unsigned either way.
            signature_counts_refresh(campaign_ids=sorted(campaigns), with_unsigned=False)
            # Signatures are not figures: the summaries' counts and updated_at (what stored figures are
            # versioned by) stay; signatures_at tells the cluster and suspect caches to recompute.
            TaskSummary.objects.filter(campaign_id__in=sorted(campaigns)).update(signatures_at=timezone.now())
    return BackfillReport(scanned=scanned, changed=changed, campaigns=len(campaigns))


def _backfill_orm(selection: _Selection) -> tuple[int, int, set[int]]:
    targets = _CheckTargets()
    scanned, changed, campaigns = 0, 0, set()
    rows = (
        Attempt.objects.filter(selection.q())
        .order_by("pk")
        .values_list(
            "pk",
            "campaign_id",
            "task_id",
            "termination",
            "clean_looking",
            "result__diff",
            "result__checks",
            "result__rubrics",
            "result__categories",
            "result__transcript__tool_calls",
            "result__extra__faults__fired",
        )
    )
    batch: list[tuple] = []

    def flush() -> None:
        nonlocal scanned, changed
        targets.load(row[2] for row in batch)
        stored = {
            pk: (digest, items_text(items))
            for pk, digest, items in AttemptSignature.objects.filter(
                attempt_id__in=[row[0] for row in batch]
            ).values_list("attempt_id", "digest", "variant__items")
        }
        updates = []
        for (
            pk,
            campaign_id,
            task_id,
            termination,
            clean,
            diff,
            checks,
            rubrics,
            categories,
            calls,
            faults,
        ) in batch:
            tools = [call.get("name", "") for call in calls or () if isinstance(call, dict)]
            signature = _signature([diff, checks, rubrics, categories, tools, faults], targets.of(task_id))
            scanned += 1
            items = signature.items()
            if stored.get(pk) != (signature.digest, items_text(items)):
                updates.append(
                    SignatureRow(pk, campaign_id, task_id, signature.digest, items, termination, clean)
                )
                campaigns.add(campaign_id)
        signatures_store(updates)
        changed += len(updates)
        batch.clear()

    for row in rows.iterator(chunk_size=BATCH):
        batch.append(row)
        if len(batch) >= BATCH:
            flush()
    if batch:
        flush()
    return scanned, changed, campaigns


def _backfill_postgres(selection: _Selection, outside_transaction: bool) -> tuple[int, int, set[int]]:
    q = connection.ops.quote_name
    attempts, signatures = q(Attempt._meta.db_table), q(AttemptSignature._meta.db_table)
    where, params = selection.sql(signatures)
    # The parts a signature reads, as one JSON text per attempt: the key the attempts are grouped
    # by and what Python parses once per group. The result is taken apart once (jsonb_to_record:
    # each result->'…' would decompress it again). A task's checks join the key only when a
    # stored check result lacks its target (the signature then names it from the task's spec).
    parts = (
        "jsonb_build_array(d.items, r.checks, r.rubrics, r.categories, "
        "jsonb_path_query_array(r.transcript->'tool_calls', '$[*].name'), ff.fired)::text"
    )
    # The injected faults that fired (a fault plan's record), as [kind, committed, tool] in a stable
    # order: the call index is left out, so attempts faulted at different calls share one group.
    fired = (
        "LEFT JOIN LATERAL (SELECT COALESCE(jsonb_agg(jsonb_build_array(f->'kind', f->'committed', f->'tool') "
        "ORDER BY f->>'kind', f->>'tool', f->>'committed'), '[]'::jsonb) AS fired FROM jsonb_array_elements("
        "CASE WHEN jsonb_typeof(r.extra->'faults'->'fired') = 'array' THEN r.extra->'faults'->'fired' "
        "ELSE '[]'::jsonb END) f) ff ON true"
    )
    # Diff items without their key (signatures never read it), in a stable order: attempts that
    # made the same mistakes on other rows, or listed them in another order, share one group.
    keyless = (
        "LEFT JOIN LATERAL (SELECT COALESCE(jsonb_agg(item ORDER BY item), '[]'::jsonb) AS items FROM ("
        "SELECT CASE WHEN jsonb_typeof(e) = 'object' THEN e - 'key' ELSE e END AS item FROM jsonb_array_elements("
        "CASE WHEN jsonb_typeof(r.diff) = 'array' THEN r.diff ELSE '[]'::jsonb END) e) x) d ON true"
    )
    needs_task = "r.checks @? '$[*] ? (!exists(@.target) || @.target == null || @.target == \"\")'"

    def select(extra: str = "") -> str:
        return (
            f"SELECT parts, task_key, array_agg(id), array_agg(campaign_id), array_agg(task_id), "
            f"array_agg(termination), array_agg(clean_looking), array_agg(variant_id) FROM ("
            f"SELECT a.id, a.campaign_id, a.task_id, a.termination, a.clean_looking, s.variant_id, "
            f"{parts} AS parts, CASE WHEN {needs_task} THEN a.task_id END AS task_key "
            f"FROM {attempts} a LEFT JOIN {signatures} s ON s.attempt_id = a.id "
            f"CROSS JOIN LATERAL jsonb_to_record(a.result) AS r(diff jsonb, checks jsonb, rubrics jsonb, "
            f"categories jsonb, transcript jsonb, extra jsonb) {keyless} {fired} "
            f"WHERE {extra}{where}) p GROUP BY parts, task_key"
        )

    groups = _read_groups(select, params, parallel=outside_transaction)
    targets = _CheckTargets()
    targets.load(task_key for _, task_key, *_ in groups if task_key is not None)
    # Sign each group once; name its form (the variant).
    forms: dict[str, tuple[str, str]] = {}
    signed: list[tuple[str, str]] = []  # per group: (digest, items hash)
    for text, task_key, *_ in groups:
        signature = _signature(json.loads(text), targets.of(task_key) if task_key is not None else [])
        form = items_text(signature.items())
        name = items_hash(form)
        forms.setdefault(name, (signature.digest, form))
        signed.append((signature.digest, name))
    variants = _variant_ids(forms)
    scanned, campaigns = 0, set()
    rows: list[tuple] = []
    for (digest, name), (_, _, ids, campaign_ids, task_ids, terminations, cleans, old) in zip(
        signed, groups, strict=True
    ):
        variant = variants[name]
        scanned += len(ids)
        for pk, campaign_id, task_id, termination, clean, previous in zip(
            ids, campaign_ids, task_ids, terminations, cleans, old, strict=True
        ):
            if previous != variant:  # a variant names its items, hence its digest
                rows.append((pk, campaign_id, task_id, digest, variant, termination, clean))
                campaigns.add(campaign_id)
    with connection.cursor() as cursor:
        if selection.recompute and rows:
            cursor.execute(f"DELETE FROM {signatures} WHERE attempt_id = ANY(%s)", [[row[0] for row in rows]])
        columns = "attempt_id, campaign_id, task_id, digest, variant_id, termination, clean_looking"
        with cursor.cursor.copy(f"COPY {signatures} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    return scanned, len(rows), campaigns


_SPLIT = 2  # connections reading at once (one server process each: the machine has two cores)


def _read_groups(select: Callable[[str], str], params: list, *, parallel: bool) -> list[tuple]:
    """The grouped read (``select(extra condition)``), merged; with ``parallel``, its halves (by heap
    block range) on two connections.

    PostgreSQL computes the parts in its leader process whatever the plan (they feed the grouping;
    forcing a parallel plan left them above the Gather), so one statement keeps one core busy; two
    statements over disjoint block ranges (TID range scans) keep two: 1.85 s -> ~1.2 s for 95k
    attempts. Groups of the two halves with the same key are merged. Each reading connection gets
    enough work_mem to group in memory.
    """
    if not parallel:
        with connection.cursor() as cursor:
            cursor.execute(select(""), params)
            return cursor.fetchall()
    # Halves of the heap by physical block (a TID range scan reads only its own pages).
    halved = select("a.ctid >= %s::tid AND a.ctid < %s::tid AND ")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_relation_size(%s) / current_setting('block_size')::int", [Attempt._meta.db_table]
        )
        blocks = int(cursor.fetchone()[0])
    edges = [blocks * part // _SPLIT for part in range(_SPLIT)] + [2**32 - 1]  # the last range is open
    settings = connection.get_connection_params()

    def read(part: int) -> list[tuple]:
        with psycopg.connect(**settings) as own, own.cursor() as cursor:
            cursor.execute("SET work_mem = '128MB'")
            cursor.execute(halved, [f"({edges[part]},0)", f"({edges[part + 1]},0)", *params])
            return cursor.fetchall()

    with ThreadPoolExecutor(max_workers=_SPLIT) as pool:
        halves = list(pool.map(read, range(_SPLIT)))
    merged: dict[tuple, tuple] = {}
    for rows in halves:
        for row in rows:
            key = (row[0], row[1])
            found = merged.get(key)
            merged[key] = (
                row if found is None else (*key, *(a + b for a, b in zip(found[2:], row[2:], strict=True)))
            )
    return list(merged.values())


def _variant_ids(forms: dict[str, tuple[str, str]]) -> dict[str, int]:
    """variant_ids through COPY: the missing forms inserted from a temporary table, then every id read."""
    q = connection.ops.quote_name
    table = q(SignatureVariant._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE tb_signature_forms (items_hash text PRIMARY KEY, digest text, items text) "
            "ON COMMIT DROP"
        )
        with cursor.cursor.copy("COPY tb_signature_forms (items_hash, digest, items) FROM STDIN") as copy:
            for name, (digest, items) in forms.items():
                copy.write_row((name, digest, items))
        cursor.execute(
            f"INSERT INTO {table} (items_hash, digest, items) SELECT items_hash, digest, items::jsonb "
            "FROM tb_signature_forms ON CONFLICT (items_hash) DO NOTHING"
        )
        cursor.execute(
            f"SELECT v.items_hash, v.id FROM {table} v JOIN tb_signature_forms f USING (items_hash)"
        )
        found = dict(cursor.fetchall())
        # ON COMMIT DROP alone leaves it to a later backfill in the same (outer) transaction.
        cursor.execute("DROP TABLE tb_signature_forms")
    return found
