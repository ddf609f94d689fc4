"""Per-(campaign, task) counts as the figures read them: what changed, and the counts themselves.

The figures never scan attempts (SPEC §5 figures come from TaskSummary rows, one per campaign x
task); these are the two reads they make, each one query whatever the number of attempts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Max, Sum

from apps.attempts.models import TaskSummary

SUMMARY_TOKEN_COLUMNS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "eval_tokens",
)
# The counted columns whose sums go into a campaign's change stamp (with max(updated_at) and the
# row count): summary_refresh writes with bulk_update, which leaves auto_now fields alone, so
# updated_at alone would miss a re-graded attempt.
STAMPED_COLUMNS = (
    "n_done",
    "n_pass",
    "n_infra_error",
    "n_unjudged",
    "n_clean_looking",
    "input_tokens",
    "output_tokens",
    "agent_cost",
    "eval_cost",
)
# The order of the values summary_counts returns per (campaign, task).
COUNT_COLUMNS = (
    "n_done",
    "n_pass",
    "n_infra_error",
    "n_unjudged",
    "n_clean_looking",
    "agent_cost",
    "eval_cost",
    "unpriced_attempts",
    *SUMMARY_TOKEN_COLUMNS,
)


def summary_changes(*, campaign_ids: Iterable[int]) -> list[dict[str, Any]]:
    """Per campaign that has summaries: latest (max updated_at), rows, and sum_<column> of every
    STAMPED_COLUMNS column — what tells one state of its counts from the next (one query)."""
    sums = {f"sum_{name}": Sum(name) for name in STAMPED_COLUMNS}
    rows = (
        TaskSummary.objects.filter(campaign_id__in=list(campaign_ids))
        .order_by()
        .values("campaign_id")
        .annotate(latest=Max("updated_at"), rows=Count("id"), **sums)
    )
    # Plain dicts: the plugin types the rows without the sums' keys, passed as **sums.
    return [dict(row) for row in rows]


def summary_counts(*, campaign_ids: Iterable[int]) -> dict[tuple[int, int], tuple]:
    """(campaign pk, task pk) -> its summary's values in COUNT_COLUMNS order, for the pairs that
    have a summary (one query)."""
    rows = TaskSummary.objects.filter(campaign_id__in=list(campaign_ids)).values_list(
        "campaign_id", "task_id", *COUNT_COLUMNS
    )
    return {(row[0], row[1]): row[2:] for row in rows}
