"""Per-(campaign, task) summaries, recomputed from attempts so they always equal a recount."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from apps.campaigns.models import Attempt, TaskSummary

_DONE = Q(status=Attempt.Status.DONE)


def _aggregates():
    # Tokens and cost cover every billed attempt (infra errors included, SPEC §5), not only done ones.
    return {
        "n_done": Count("id", filter=_DONE),
        "n_pass": Count("id", filter=_DONE & Q(verdict=Attempt.Verdict.PASS)),
        "n_infra_error": Count("id", filter=Q(status=Attempt.Status.INFRA_ERROR)),
        "n_cancelled": Count("id", filter=Q(status=Attempt.Status.CANCELLED)),
        "n_clean_looking": Count("id", filter=_DONE & Q(clean_looking=True)),
        "input_tokens": Sum("input_tokens"),
        "cached_input_tokens": Sum("cached_input_tokens"),
        "output_tokens": Sum("output_tokens"),
        "reasoning_tokens": Sum("reasoning_tokens"),
        "eval_tokens": Sum("eval_tokens"),
        "agent_cost": Sum("agent_cost"),
        "eval_cost": Sum("eval_cost"),
        "unpriced_attempts": Count(
            "id", filter=Q(agent_cost__isnull=True) & (Q(input_tokens__gt=0) | Q(output_tokens__gt=0))
        ),
    }


def summary_refresh(*, campaign_id: int, task_id: int | None = None) -> None:
    """Recompute the summaries of a campaign (or of one of its tasks) from its attempts.

    Side effects: upserts TaskSummary rows. The row lock serialises concurrent refreshes of the
    same pair, and each refresh runs after its own attempt committed, so the last one to take
    the lock sees every finished attempt.
    """
    attempts = Attempt.objects.filter(campaign_id=campaign_id)
    if task_id is not None:
        attempts = attempts.filter(task_id=task_id)
    with transaction.atomic():
        if task_id is not None:
            TaskSummary.objects.get_or_create(campaign_id=campaign_id, task_id=task_id)
            list(TaskSummary.objects.select_for_update().filter(campaign_id=campaign_id, task_id=task_id))
        # Annotations get a prefix: an aggregate may not share its name with a model field.
        rows = attempts.order_by().values("task_id").annotate(**{f"agg_{k}": v for k, v in _aggregates().items()})
        existing = {s.task_id: s for s in TaskSummary.objects.filter(campaign_id=campaign_id, **({"task_id": task_id} if task_id else {}))}
        to_create, to_update = [], []
        for row in rows:
            values = {
                k.removeprefix("agg_"): (v if v is not None else (Decimal(0) if k.endswith("cost") else 0))
                for k, v in row.items()
                if k != "task_id"
            }
            values["updated_at"] = timezone.now()  # bulk_update skips auto_now; caches key on it
            summary = existing.get(row["task_id"])
            if summary is None:
                to_create.append(TaskSummary(campaign_id=campaign_id, task_id=row["task_id"], **values))
            else:
                for key, value in values.items():
                    setattr(summary, key, value)
                to_update.append(summary)
        TaskSummary.objects.bulk_create(to_create)
        if to_update:
            TaskSummary.objects.bulk_update(to_update, [*_aggregates(), "updated_at"])
