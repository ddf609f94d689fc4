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
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from apps.campaigns.models import Attempt, AttemptSignature, TaskSummary
from apps.campaigns.signature_rows import SignatureRow, items_hash, items_text, signatures_store, variant_ids
from apps.campaigns.summaries import signature_counts_refresh
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
        for start in range(0, len(missing), 2000):
            chunk = missing[start : start + 2000]
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
    diff, checks, rubrics, categories, tools = parts
    return signature_from_parts(
        diff=diff or (),
        checks=checks or (),
        rubrics=rubrics or (),
        categories=categories or (),
        tools=[str(name) for name in tools or ()],
        check_targets=check_targets,
    )


def backfill_signatures(*, campaign_ids: list[int] | None = None, recompute: bool = False) -> BackfillReport:
    """Compute and store the signature of every failed attempt that lacks one (all of them with ``recompute``).

    Side effects: AttemptSignature rows (and new SignatureVariant rows); the touched campaigns'
    SignatureCount rows are recounted and their TaskSummary rows get a new updated_at, so pages
    cached by summary stamp (clusters, figures) are recomputed.
    """
    run = _backfill_postgres if connection.vendor == "postgresql" else _backfill_orm
    selection = _Selection(campaign_ids, recompute)
    with transaction.atomic():
        scanned, changed, campaigns = run(selection)
        if campaigns:
            # Every failed attempt of a touched campaign was just signed, unless the selection
            # skipped signed ones (they have rows) — none is left unsigned either way.
            signature_counts_refresh(campaign_ids=sorted(campaigns), with_unsigned=False)
            TaskSummary.objects.filter(campaign_id__in=sorted(campaigns)).update(updated_at=timezone.now())
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
        for pk, campaign_id, task_id, termination, clean, diff, checks, rubrics, categories, calls in batch:
            tools = [call.get("name", "") for call in calls or () if isinstance(call, dict)]
            signature = _signature([diff, checks, rubrics, categories, tools], targets.of(task_id))
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


def _backfill_postgres(selection: _Selection) -> tuple[int, int, set[int]]:
    q = connection.ops.quote_name
    attempts, signatures = q(Attempt._meta.db_table), q(AttemptSignature._meta.db_table)
    where, params = selection.sql(signatures)
    # The parts a signature reads, as one JSON text per attempt: the key the attempts are grouped
    # by and what Python parses once per group. The result is taken apart once (jsonb_to_record:
    # each result->'…' would decompress it again). A task's checks join the key only when a
    # stored check result lacks its target (the signature then names it from the task's spec).
    parts = (
        "jsonb_build_array("
        "(SELECT COALESCE(jsonb_agg(item ORDER BY item), '[]'::jsonb) FROM (SELECT CASE WHEN jsonb_typeof(item) = "
        "'object' THEN item - 'key' ELSE item END AS item "
        "FROM jsonb_array_elements(CASE WHEN jsonb_typeof(r.diff) = 'array' THEN r.diff ELSE '[]'::jsonb END) item) "
        "items), "
        "r.checks, r.rubrics, r.categories, "
        "jsonb_path_query_array(r.transcript->'tool_calls', '$[*].name'))::text"
    )
    needs_task = "r.checks @? '$[*] ? (!exists(@.target) || @.target == null || @.target == \"\")'"
    select = (
        f"SELECT parts, task_key, array_agg(id), array_agg(campaign_id), array_agg(task_id), "
        f"array_agg(termination), array_agg(clean_looking), array_agg(variant_id) FROM ("
        f"SELECT a.id, a.campaign_id, a.task_id, a.termination, a.clean_looking, s.variant_id, "
        f"{parts} AS parts, CASE WHEN {needs_task} THEN a.task_id END AS task_key "
        f"FROM {attempts} a LEFT JOIN {signatures} s ON s.attempt_id = a.id, "
        f"jsonb_to_record(a.result) AS r(diff jsonb, checks jsonb, rubrics jsonb, categories jsonb, transcript jsonb) "
        f"WHERE {where}) p GROUP BY parts, task_key"
    )
    with connection.cursor() as cursor:
        cursor.execute(select, params)
        groups = cursor.fetchall()
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
    variants = variant_ids(forms)
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
