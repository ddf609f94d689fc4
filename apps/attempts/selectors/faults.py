"""A campaign's robustness figures under its fault plan, from the fault record each attempt stores.

The record is the engine's (tb_engine.faults): ``result.extra.faults`` of the attempt's stored
AttemptResult. Only the keys the figures read are fetched (one query), never the transcript.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q

from apps.attempts.models import Attempt
from tb_engine.metrics.faults import FaultedAttempt, fault_figures

EXPORT_COLUMNS = (
    "kind",
    "fired",
    "recovered",
    "recovery_rate",
    "recovery_lo",
    "recovery_hi",
    "duplicate_effects",
)


def campaign_fault_figures(*, campaign_id: int) -> dict[str, Any]:
    """tb_engine.metrics.faults.fault_figures over the campaign's done attempts (one query)."""
    rows = (
        Attempt.objects.filter(campaign_id=campaign_id, status=Attempt.Status.DONE)
        .values_list("task__task_id", "verdict", "result__extra__faults")
        .order_by()
    )
    return fault_figures(FaultedAttempt(task_id, verdict, faults) for task_id, verdict, faults in rows)


def fault_figure_rows(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per fault kind that fired, plus the campaign-wide duplicate-effect row (CSV / tables)."""
    rows = []
    for kind, figure in figures["kinds"].items():
        if not figure["fired"]:
            continue
        recovered = figure["recovered"]
        rows.append(
            {
                "kind": kind,
                "fired": figure["fired"],
                "recovered": recovered["count"],
                "recovery_rate": recovered["rate"],
                "recovery_lo": recovered["lo"],
                "recovery_hi": recovered["hi"],
                "duplicate_effects": figure["duplicate_effects"],
            }
        )
    return rows


def campaign_task_counts(*, campaign_id: int) -> dict[str, tuple[int, int]]:
    """task id -> (graded attempts, passes) of the campaign's done attempts (one query): the input of
    tb_engine.metrics.faults.paired_delta."""
    rows = (
        Attempt.objects.filter(
            campaign_id=campaign_id,
            status=Attempt.Status.DONE,
            verdict__in=(Attempt.Verdict.PASS, Attempt.Verdict.FAIL),
        )
        .values("task__task_id")
        .annotate(n=Count("pk"), c=Count("pk", filter=Q(verdict=Attempt.Verdict.PASS)))
        .order_by()
    )
    return {row["task__task_id"]: (row["n"], row["c"]) for row in rows}


def fault_figures_by_campaign(*, campaign_ids: list[int]) -> dict[int, dict[str, Any]]:
    """campaign id -> tb_engine.metrics.faults.fault_figures, for many campaigns in one query (the
    leaderboard's robustness columns); campaigns not given, or without done attempts, are left out."""
    if not campaign_ids:
        return {}
    rows = (
        Attempt.objects.filter(campaign_id__in=campaign_ids, status=Attempt.Status.DONE)
        .values_list("campaign_id", "task__task_id", "verdict", "result__extra__faults")
        .order_by()
    )
    grouped: dict[int, list[FaultedAttempt]] = {}
    for campaign_id, task_id, verdict, faults in rows:
        grouped.setdefault(campaign_id, []).append(FaultedAttempt(task_id, verdict, faults))
    return {campaign_id: fault_figures(attempts) for campaign_id, attempts in grouped.items()}
