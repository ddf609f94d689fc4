"""Failure signatures of stored attempts (SPEC §8): the backfill behind ``manage.py backfill_signatures``.

New attempts get their signature when they are recorded (AttemptOutcome.from_result, on every
record path). Attempts stored before signatures existed — or all of them, after the signature
definition changed (tb_engine.signatures.SIGNATURE_VERSION) — get it here.

On PostgreSQL the backfill reads only the parts of each result a signature needs (diff, checks,
rubrics, categories and the tool names, extracted by the server with ``jsonb_path_query_array`` so
transcript text never travels), streams them through a server-side cursor, COPYs the signatures
into a temporary table and sets them with one ``UPDATE … FROM``: bench/clusters.py measures it.
Elsewhere the same computation runs through the ORM in batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from psycopg.types.json import Jsonb, JsonbLoader

from apps.campaigns.models import Attempt, TaskSummary
from apps.campaigns.summaries import signature_counts_refresh
from apps.suites.models import Task
from tb_engine.signatures import check_target, signature_from_parts

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
        if not missing:
            return
        for pk, checks in Task.objects.filter(pk__in=missing).values_list("pk", "spec__checks"):
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
            condition &= Q(signature="")
        if self.campaign_ids is not None:
            condition &= Q(campaign_id__in=self.campaign_ids)
        return condition

    def sql(self) -> tuple[str, list]:
        where = ["a.status = %s", "a.verdict = %s"]
        params: list = [Attempt.Status.DONE, Attempt.Verdict.FAIL]
        if not self.recompute:
            where.append("a.signature = ''")
        if self.campaign_ids is not None:
            where.append("a.campaign_id = ANY(%s)")
            params.append(list(self.campaign_ids))
        return " AND ".join(where), params


def _sign(rows: list[tuple], targets: _CheckTargets) -> Iterator[tuple[int, int, str, list, str, list]]:
    """(id, campaign, new digest, new items, old digest, old items) per row of (id, campaign, task, parts…)."""
    targets.load(row[2] for row in rows)
    for pk, campaign_id, task_id, diff, checks, rubrics, categories, tools, old, old_items in rows:
        signature = signature_from_parts(
            diff=diff or (),
            checks=checks or (),
            rubrics=rubrics or (),
            categories=categories or (),
            tools=[str(name) for name in tools or ()],
            check_targets=targets.of(task_id),
        )
        yield pk, campaign_id, signature.digest, signature.items(), old, old_items


def backfill_signatures(*, campaign_ids: list[int] | None = None, recompute: bool = False) -> BackfillReport:
    """Compute and store the signature of every failed attempt that lacks one (all of them with ``recompute``).

    Side effects: Attempt.signature and signature_items; the touched campaigns' SignatureCount rows
    are recounted and their TaskSummary rows get a new updated_at, so pages cached by summary stamp
    (clusters, figures) are recomputed.
    """
    run = _backfill_postgres if connection.vendor == "postgresql" else _backfill_orm
    with transaction.atomic():
        scanned, changed, campaigns = run(_Selection(campaign_ids, recompute))
        if campaigns:
            signature_counts_refresh(campaign_ids=sorted(campaigns))
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
            "result__diff",
            "result__checks",
            "result__rubrics",
            "result__categories",
            "result__transcript__tool_calls",
            "signature",
            "signature_items",
        )
    )
    batch: list[tuple] = []

    def flush() -> None:
        nonlocal scanned, changed
        updates = []
        for pk, campaign_id, digest, items, old, old_items in _sign(batch, targets):
            scanned += 1
            if (digest, items) != (old, old_items):
                updates.append(Attempt(pk=pk, signature=digest, signature_items=items))
                campaigns.add(campaign_id)
        Attempt.objects.bulk_update(updates, ["signature", "signature_items"], batch_size=500)
        changed += len(updates)
        batch.clear()

    for pk, campaign_id, task_id, diff, checks, rubrics, categories, calls, old, old_items in rows.iterator(
        chunk_size=BATCH
    ):
        tools = [call.get("name", "") for call in calls or () if isinstance(call, dict)]
        batch.append((pk, campaign_id, task_id, diff, checks, rubrics, categories, tools, old, old_items))
        if len(batch) >= BATCH:
            flush()
    if batch:
        flush()
    return scanned, changed, campaigns


def _backfill_postgres(selection: _Selection) -> tuple[int, int, set[int]]:
    where, params = selection.sql()
    table = connection.ops.quote_name(Attempt._meta.db_table)
    # The jsonb parts travel as one array per row: one JSON parse per attempt instead of six. The
    # result is taken apart once (jsonb_to_record): each result->'…' would decompress it again.
    select = (
        "SELECT a.id, a.campaign_id, a.task_id, a.signature, jsonb_build_array(r.diff, r.checks, "
        "r.rubrics, r.categories, jsonb_path_query_array(r.transcript->'tool_calls', '$[*].name'), "
        f"a.signature_items) FROM {table} a, jsonb_to_record(a.result) AS r(diff jsonb, checks jsonb, "
        f"rubrics jsonb, categories jsonb, transcript jsonb) WHERE {where} ORDER BY a.id"
    )
    targets = _CheckTargets()
    scanned, changed, campaigns = 0, 0, set()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE TEMPORARY TABLE tb_signature_backfill (id bigint PRIMARY KEY, signature varchar(32), "
                "items jsonb) ON COMMIT DROP"
            )
        raw = connection.connection  # the psycopg connection: a named (server-side) cursor streams rows
        with raw.cursor(name="tb_signature_backfill_read") as reader, raw.cursor() as writer:
            # Django loads jsonb as text (JSONField parses it); this cursor wants the values.
            reader.adapters.register_loader("jsonb", JsonbLoader)
            reader.itersize = BATCH
            reader.execute(select, params)
            # One COPY per batch: the connection cannot fetch from the reading cursor while a COPY is open.
            while fetched := reader.fetchmany(BATCH):
                rows = [
                    (pk, campaign, task, *parts[:5], old, parts[5])
                    for pk, campaign, task, old, parts in fetched
                ]
                signed = []
                for pk, campaign_id, digest, items, old, old_items in _sign(rows, targets):
                    scanned += 1
                    if (digest, items) != (old, old_items):
                        signed.append((pk, digest, Jsonb(items)))
                        campaigns.add(campaign_id)
                if signed:
                    with writer.copy("COPY tb_signature_backfill (id, signature, items) FROM STDIN") as copy:
                        for row in signed:
                            copy.write_row(row)
                    changed += len(signed)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} a SET signature = t.signature, signature_items = t.items "
                "FROM tb_signature_backfill t WHERE a.id = t.id"
            )
            # ON COMMIT DROP alone leaves it to a later backfill in the same (outer) transaction.
            cursor.execute("DROP TABLE tb_signature_backfill")
    return scanned, changed, campaigns
