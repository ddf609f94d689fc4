"""Reads of re-grading: the impact report of a re-grade, an attempt's verdict versions, and which
task and grader versions a campaign's figures come from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.campaigns.models import Campaign
from apps.regrade.models import RegradeRun, VerdictVersion
from tb_engine.regrade_impact import flip_kind

__all__ = ["FigureVersions", "figure_versions", "impact_report", "runs_of", "verdict_history"]


def runs_of(*, team_ids: list[int]) -> list[RegradeRun]:
    return list(RegradeRun.objects.filter(team_id__in=team_ids))


@dataclass(frozen=True)
class Flip:
    attempt_id: int
    campaign: str
    task_id: str
    before: str
    after: str
    kind: str


def impact_report(run: RegradeRun) -> dict[str, Any]:
    """The run's impact report: summary, per-campaign figures before/after, ranks, reversals, flips."""
    report = run.report or {}
    campaigns = report.get("campaigns", {})
    names = {int(pk): row["name"] for pk, row in campaigns.items()}
    task_ids = {int(pk): version["task_id"] for pk, version in (run.task_versions or {}).items()}
    flips = [
        Flip(v.attempt_id, names.get(v.campaign_id, str(v.campaign_id)), task_ids.get(task_pk, str(task_pk)),
             v.previous_verdict, v.verdict, flip_kind(v.previous_verdict, v.verdict))
        for v, task_pk in (
            (v, v.attempt.task_id)
            for v in run.versions.filter(kind__in=[VerdictVersion.Kind.PREVIEW, VerdictVersion.Kind.APPLIED])
            .select_related("attempt")
            .only("attempt_id", "campaign_id", "previous_verdict", "verdict", "attempt__task_id")
        )
        if v.previous_verdict != v.verdict
    ]
    return {
        "run": run,
        "campaigns": [{"id": int(pk), **row} for pk, row in campaigns.items()],
        "reversals": [(names.get(x, str(x)), names.get(y, str(y))) for x, y in report.get("reversals", [])],
        "flips": flips,
        "flip_counts": report.get("flips", {}),
        "regraded": report.get("regraded", 0),
        "changed": report.get("changed", 0),
        "not_regradable": report.get("not_regradable", 0),
        "not_regradable_reasons": report.get("not_regradable_reasons", {}),
    }


def verdict_history(*, attempt_id: int) -> list[VerdictVersion]:
    """Every stored verdict of an attempt, oldest first (the original as run, re-grades, previews)."""
    versions = VerdictVersion.objects.filter(attempt_id=attempt_id).order_by("pk")
    # The original is written when a re-grade is first applied, after that re-grade's preview row.
    return sorted(versions, key=lambda v: (v.kind != VerdictVersion.Kind.ORIGINAL, v.pk))


@dataclass(frozen=True)
class FigureVersions:
    """Which task and grader versions a campaign's figures come from."""

    tasks: str
    grader: str

    def __str__(self) -> str:
        return f"tasks: {self.tasks}; grader: {self.grader}"


def figure_versions(campaigns: list[Campaign]) -> dict[int, FigureVersions]:
    """Per campaign: the suite version it ran (or the re-grade applied last) and the grader (one query)."""
    latest: dict[int, RegradeRun] = {}
    runs = (
        RegradeRun.objects.filter(status=RegradeRun.Status.APPLIED, campaigns__in=[c.pk for c in campaigns])
        .order_by("applied_at", "pk")
        .values_list("campaigns", "pk", "applied_at", "grader_version")
    )
    for campaign_id, pk, applied_at, grader in runs:
        latest[campaign_id] = (pk, applied_at, grader)  # type: ignore[assignment]
    found = {}
    for campaign in campaigns:
        base = f"{campaign.suite_version} ({campaign.suite_hash[:12]}) as run"
        applied = latest.get(campaign.pk)
        if applied is None:
            found[campaign.pk] = FigureVersions(base, campaign.harness_version)
        else:
            pk, at, grader = applied  # type: ignore[misc]
            found[campaign.pk] = FigureVersions(
                f"{campaign.suite_version} re-graded {at:%Y-%m-%d %H:%M} UTC against the task definitions of re-grade #{pk}",
                str(grader),
            )
    return found
