"""Writes of an applied re-grade onto the attempt record (issue 29); reached through services.

A re-grade changes what grading decided (verdict, categories, clean-looking flag, diff, checks,
rubric answers, the task version graded against), never what the attempt did. The grading the row
carried before is kept by the caller (apps.regrade's VerdictVersion rows), read with
selectors.regrade.attempt_gradings before this runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.attempts.models import Attempt, AttemptSignature
from apps.attempts.signatures import backfill_signatures
from apps.attempts.summaries import summary_refresh
from apps.core.batches import in_slices


@dataclass(frozen=True)
class GradingChange:
    attempt_id: int
    verdict: str
    categories: list[str]
    clean_looking: bool
    diff: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    rubrics: list[dict[str, Any]]
    task_hash: str


def gradings_apply(
    *,
    changes: Iterable[GradingChange],
    task_hashes: dict[int, str],
    campaign_ids: list[int],
    keep_hash_of: Iterable[int] = (),
) -> None:
    """Write the changed gradings, stamp the re-graded attempts with their task version, recount.

    ``task_hashes`` maps task pk -> the hash re-graded against: every done attempt of those tasks in
    the campaigns gets it, except ``keep_hash_of`` (attempts that were not re-gradable). Side
    effects: Attempt rows (verdict, categories, clean_looking, diff_items, task_hash, result's
    grading keys), the changed attempts' AttemptSignature rows (dropped, then failed ones signed
    again), the campaigns' TaskSummary and SignatureCount rows (recounted).
    """
    changes = list(changes)
    kept = set(keep_hash_of)
    with transaction.atomic():
        for start in range(0, len(changes), 1000):
            batch = {change.attempt_id: change for change in changes[start : start + 1000]}
            rows = list(Attempt.objects.filter(pk__in=list(batch)).only("pk", "result"))
            for row in rows:
                change = batch[row.pk]
                result = dict(row.result or {})
                result.update(
                    verdict=change.verdict,
                    categories=list(change.categories),
                    clean_looking=change.clean_looking,
                    diff=change.diff,
                    checks=change.checks,
                    rubrics=change.rubrics,
                    task_hash=change.task_hash,
                )
                row.result = result
                row.verdict = change.verdict
                row.categories = list(change.categories)
                row.clean_looking = change.clean_looking
                row.diff_items = len(change.diff)
                row.task_hash = change.task_hash
            Attempt.objects.bulk_update(
                rows, ["result", "verdict", "categories", "clean_looking", "diff_items", "task_hash"]
            )
            AttemptSignature.objects.filter(attempt_id__in=list(batch)).delete()
        # Attempts that were not re-gradable keep the task version they were graded against:
        # read before the per-task stamp, put back after it (no IN list of every such attempt).
        kept_hashes: dict[str, list[int]] = defaultdict(list)
        for ids in in_slices(sorted(kept)):
            for pk, task_hash in Attempt.objects.filter(pk__in=ids).values_list("pk", "task_hash"):
                kept_hashes[task_hash].append(pk)
        for task_id, task_hash in task_hashes.items():
            (
                Attempt.objects.filter(
                    campaign_id__in=campaign_ids, task_id=task_id, status=Attempt.Status.DONE
                )
                .exclude(task_hash=task_hash)
                .update(task_hash=task_hash)
            )
        for task_hash, pks in kept_hashes.items():
            for ids in in_slices(pks):
                Attempt.objects.filter(pk__in=ids).update(task_hash=task_hash)
        backfill_signatures(campaign_ids=campaign_ids)
        for campaign_id in campaign_ids:
            summary_refresh(campaign_id=campaign_id)
