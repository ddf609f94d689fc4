"""The attempt rows an attempt-level export streams: which attempts, which columns, in what order.

apps.exports.stream reads these querysets through a raw cursor in chunks (its speed comes from
skipping the ORM's per-row work, not from a different query), so this module only builds them.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import QuerySet

from apps.attempts.models import Attempt

# (output name, ORM path) in column order.
EXPORT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("attempt_id", "id"),
    ("campaign_id", "campaign_id"),
    ("task_id", "task__task_id"),
    ("domain", "task__domain__name"),
    ("index", "index"),
    ("status", "status"),
    ("termination", "termination"),
    ("verdict", "verdict"),
    ("categories", "categories"),
    ("clean_looking", "clean_looking"),
    ("input_tokens", "input_tokens"),
    ("cached_input_tokens", "cached_input_tokens"),
    ("output_tokens", "output_tokens"),
    ("reasoning_tokens", "reasoning_tokens"),
    ("eval_tokens", "eval_tokens"),
    ("agent_cost", "agent_cost"),
    ("eval_cost", "eval_cost"),
    ("tool_calls", "tool_calls"),
    ("diff_items", "diff_items"),
    ("duration_ms", "duration_ms"),
    ("retries", "retries"),
    ("task_hash", "task_hash"),
    # What the endpoint said about the model that answered (drift tracking); [] for simulated agents.
    ("provider", "provider"),
    ("started_at", "started_at"),
    ("finished_at", "finished_at"),
)
# The whole stored result, last, only when an export asks for it (whole transcripts: megabytes a row).
RESULT_COLUMN = ("result", "result")


def campaign_attempts(*, campaign_ids: Iterable[int]) -> QuerySet[Attempt]:
    """Every attempt of the campaigns, unevaluated (an export narrows and orders it with export_rows)."""
    return Attempt.objects.filter(campaign_id__in=list(campaign_ids))


def export_rows(attempts: QuerySet[Attempt], *, with_result: bool) -> tuple[list[str], QuerySet]:
    """The column names and the attempts' rows (tuples in that order), by campaign, task and index.

    Nothing is queried: the caller reads the rows (apps.exports.stream through a raw cursor).
    """
    columns = [*EXPORT_COLUMNS, RESULT_COLUMN] if with_result else list(EXPORT_COLUMNS)
    names = [name for name, _ in columns]
    rows = attempts.order_by("campaign_id", "task_id", "index").values_list(*(path for _, path in columns))
    return names, rows
