"""Writing failure signatures (SPEC §8) beside their attempts: AttemptSignature rows and their variants.

Every record path stores a failed attempt's signature here, in the same transaction as its result:
the ORM path (``signatures_store``), the worker's one-query path (``signature_store_sql``, statements
that only take effect when that worker's record went through) and imports. The backfill
(apps.attempts.signatures) writes the same rows in bulk.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from apps.attempts.models import AttemptSignature, SignatureVariant
from apps.core.batches import in_slices


@dataclass(frozen=True)
class SignatureRow:
    """What an attempt's AttemptSignature row says, before it has a variant id."""

    attempt_id: int
    campaign_id: int
    task_id: int
    digest: str
    items: list[list[str]]
    termination: str
    clean_looking: bool


def items_text(items: Iterable[Iterable[str]]) -> str:
    """The canonical JSON of a signature's items (what items_hash hashes)."""
    return json.dumps([list(item) for item in items], separators=(",", ":"), ensure_ascii=False)


def items_hash(text: str) -> str:
    """The variant's name: SHA-256 of its canonical items JSON."""
    return hashlib.sha256(text.encode()).hexdigest()


def variant_ids(forms: dict[str, tuple[str, str]]) -> dict[str, int]:
    """Variant id per items hash, creating the missing ones. ``forms``: hash -> (digest, items JSON text)."""
    found: dict[str, int] = {}
    for chunk in in_slices(list(forms)):
        found.update(SignatureVariant.objects.filter(items_hash__in=chunk).values_list("items_hash", "id"))
    missing = [h for h in forms if h not in found]
    if missing:
        SignatureVariant.objects.bulk_create(
            [
                SignatureVariant(digest=forms[h][0], items=json.loads(forms[h][1]), items_hash=h)
                for h in missing
            ],
            batch_size=1000,
            ignore_conflicts=True,  # a concurrent writer may have created the same variant
        )
        for chunk in in_slices(missing):
            found.update(
                SignatureVariant.objects.filter(items_hash__in=chunk).values_list("items_hash", "id")
            )
    return found


def signatures_store(
    rows: list[SignatureRow], *, attempt_ids: Iterable[int] = (), fresh: bool = False
) -> None:
    """Replace the signature rows of ``attempt_ids`` and of every row's attempt with ``rows``.

    An attempt listed in ``attempt_ids`` without a row (it did not fail) ends with none. ``fresh``:
    the attempts were just inserted, so there is nothing to replace (an import skips the deletes).
    """
    stale = [] if fresh else list({*attempt_ids, *(row.attempt_id for row in rows)})
    with transaction.atomic(savepoint=False):
        for chunk in in_slices(stale):
            AttemptSignature.objects.filter(attempt_id__in=chunk).delete()
        if not rows:
            return
        texts = [items_text(row.items) for row in rows]
        names = [items_hash(text) for text in texts]
        variants = variant_ids(
            {name: (row.digest, text) for row, text, name in zip(rows, texts, names, strict=True)}
        )
        AttemptSignature.objects.bulk_create(
            [
                AttemptSignature(
                    attempt_id=row.attempt_id,
                    campaign_id=row.campaign_id,
                    task_id=row.task_id,
                    digest=row.digest,
                    variant_id=variants[name],
                    termination=row.termination,
                    clean_looking=row.clean_looking,
                )
                for row, name in zip(rows, names, strict=True)
            ],
            batch_size=1000,
        )


def signature_store_sql(
    row: SignatureRow | None, *, attempt_id: int, guard: tuple[str, list[Any]]
) -> list[tuple[str, list[Any]]]:
    """PostgreSQL statements (with params) that store ``row`` as the attempt's signature (None: none).

    ``guard`` is a condition (`` AND EXISTS …``) and its params that hold only when the caller's
    record of the attempt went through: the delete and insert are no-ops otherwise (the variant,
    an immutable form any attempt may share, is inserted either way). Run them after the record
    statement and before the SignatureCount recount.
    """
    condition, condition_params = guard
    q = connection.ops.quote_name
    table, variants = q(AttemptSignature._meta.db_table), q(SignatureVariant._meta.db_table)
    statements: list[tuple[str, list[Any]]] = [
        (f"DELETE FROM {table} WHERE attempt_id = %s{condition}", [attempt_id, *condition_params])
    ]
    if row is None:
        return statements
    text = items_text(row.items)
    name = items_hash(text)
    statements.append(
        (
            f"INSERT INTO {variants} (digest, items, items_hash) VALUES (%s, %s::jsonb, %s) "
            "ON CONFLICT (items_hash) DO NOTHING",
            [row.digest, text, name],
        )
    )
    statements.append(
        (
            f"INSERT INTO {table} (attempt_id, campaign_id, task_id, digest, variant_id, termination, clean_looking) "
            f"SELECT %s, %s, %s, %s, v.id, %s, %s FROM {variants} v WHERE v.items_hash = %s{condition}",
            [
                row.attempt_id,
                row.campaign_id,
                row.task_id,
                row.digest,
                row.termination,
                row.clean_looking,
                name,
                *condition_params,
            ],
        )
    )
    return statements
