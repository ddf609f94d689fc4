"""Per-(campaign, task) counts as the figures read them.

The figures never scan attempts (SPEC §5 figures come from TaskSummary rows, one per campaign x
task); summary_counts is the read they make, one query whatever the number of attempts; what changed is
the campaign's SummaryVersion (selectors.summary_stamps).
"""

from __future__ import annotations

from collections.abc import Iterable

from apps.attempts.models import TaskSummary

SUMMARY_TOKEN_COLUMNS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "eval_tokens",
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


def summary_counts(*, campaign_ids: Iterable[int]) -> dict[tuple[int, int], tuple]:
    """(campaign pk, task pk) -> its summary's values in COUNT_COLUMNS order, for the pairs that
    have a summary (one query)."""
    rows = TaskSummary.objects.filter(campaign_id__in=list(campaign_ids)).values_list(
        "campaign_id", "task_id", *COUNT_COLUMNS
    )
    return {(row[0], row[1]): row[2:] for row in rows}
