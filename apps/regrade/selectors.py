"""Reads of re-grading: the impact report of a re-grade, an attempt's verdict versions, and which
task and grader versions a campaign's figures come from."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from io import BytesIO
from typing import Any

from django.db import connection
from openpyxl import Workbook

from apps.campaigns.models import Campaign
from apps.core.joined_rows import JoinedRows, column_reader
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
        Flip(
            v.attempt_id,
            names.get(v.campaign_id, str(v.campaign_id)),
            task_ids.get(task_pk, str(task_pk)),
            v.previous_verdict,
            v.verdict,
            flip_kind(v.previous_verdict, v.verdict),
        )
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


# Read on every attempt drilldown: SQL built once per process (apps.core.joined_rows), not compiled per request.
_VERDICT_VERSIONS = JoinedRows(VerdictVersion, ())


def verdict_history(*, attempt_id: int) -> list[VerdictVersion]:
    """Every stored verdict of an attempt, oldest first (the original as run, re-grades, previews)."""
    versions = _VERDICT_VERSIONS.fetch('"b"."attempt_id" = %s', [int(attempt_id)], order_by='"b"."id"')
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
    latest: dict[int, tuple[int, datetime | None, str]] = {}
    ids = [c.pk for c in campaigns]
    if ids:
        # Written as SQL: read on every leaderboard request, where compiling the ORM's join cost
        # more Python than PostgreSQL spent on it. Applied runs oldest first: the last one wins.
        runs, links = RegradeRun._meta, RegradeRun.campaigns.through._meta
        applied_at = column_reader(RegradeRun, "applied_at", "r")
        sql = (
            f'SELECT "l"."{links.get_field("campaign").column}", "r"."id", "r"."applied_at", "r"."grader_version" '
            f'FROM "{runs.db_table}" "r" JOIN "{links.db_table}" "l" '
            f'ON "l"."{links.get_field("regraderun").column}" = "r"."id" '
            f'WHERE "r"."status" = %s AND "l"."{links.get_field("campaign").column}" IN ({", ".join(["%s"] * len(ids))}) '
            'ORDER BY "r"."applied_at", "r"."id"'
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [RegradeRun.Status.APPLIED.value, *ids])
            for campaign_id, pk, applied, grader in cursor.fetchall():
                latest[campaign_id] = (pk, applied_at(applied), grader)
    found = {}
    for campaign in campaigns:
        base = f"{campaign.suite_version} ({campaign.suite_hash[:12]}) as run"
        applied = latest.get(campaign.pk)
        if applied is None:
            found[campaign.pk] = FigureVersions(base, campaign.harness_version)
        else:
            pk, at, grader = applied
            found[campaign.pk] = FigureVersions(
                f"{campaign.suite_version} re-graded {at:%Y-%m-%d %H:%M} UTC against the task definitions of re-grade #{pk}",
                str(grader),
            )
    return found


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _points(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f} pp"


def _money(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}"


def campaign_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's per-campaign table, as shown (page, CLI, XLSX): before, after and Δ of each figure."""
    rows = []
    for row in report["campaigns"]:
        before, after, delta = row["before"], row["after"], row["delta"]
        rows.append(
            {
                "campaign": row["name"],
                "pass_at_1_before": before["pass_at_1"],
                "pass_at_1_after": after["pass_at_1"],
                "pass_at_1_delta": delta["pass_at_1"],
                "all_n_before": before["all_n"],
                "all_n_after": after["all_n"],
                "all_n_delta": delta["all_n"],
                "cost_per_dependable_task_before": before["cost_per_dependable_task"],
                "cost_per_dependable_task_after": after["cost_per_dependable_task"],
                "cost_per_dependable_task_delta": delta["cost_per_dependable_task"],
                "rank_before": row["rank"]["before"],
                "rank_after": row["rank"]["after"],
            }
        )
    return rows


def impact_text(report: dict[str, Any]) -> str:
    """The impact report as plain text (manage.py regrade)."""
    run = report["run"]
    lines = [
        f"re-grade #{run.pk} ({run.status}), grader {run.grader_version}: {report['regraded']} attempts re-graded, "
        f"{report['changed']} gradings change, {len(report['flips'])} verdicts flip, "
        f"{report['not_regradable']} not re-gradable",
        "flips: " + ", ".join(f"{kind} {count}" for kind, count in report["flip_counts"].items()),
    ]
    for reason, count in report["not_regradable_reasons"].items():
        lines.append(f"not re-gradable ({count}): {reason}")
    lines.append(
        "campaign | pass@1 before → after (Δ) | all-N before → after (Δ) | cost/dependable task Δ | rank"
    )
    for row in campaign_rows(report):
        lines.append(
            f"{row['campaign']} | {_percent(row['pass_at_1_before'])} → {_percent(row['pass_at_1_after'])} "
            f"({_points(row['pass_at_1_delta'])}) | {_percent(row['all_n_before'])} → {_percent(row['all_n_after'])} "
            f"({_points(row['all_n_delta'])}) | {_money(row['cost_per_dependable_task_before'])} → "
            f"{_money(row['cost_per_dependable_task_after'])} | {row['rank_before']} → {row['rank_after']}"
        )
    for above, below in report["reversals"]:
        lines.append(f"reversal: {above} was ranked above {below}, now below it")
    for flip in report["flips"][:50]:
        lines.append(
            f"flip: attempt #{flip.attempt_id} {flip.campaign} {flip.task_id}: {flip.before} → {flip.after}"
        )
    if len(report["flips"]) > 50:
        lines.append(f"… and {len(report['flips']) - 50} more flips (the XLSX lists them all)")
    return "\n".join(lines)


def impact_workbook(report: dict[str, Any]) -> bytes:
    """The impact report as an XLSX workbook: summary, campaigns, flips, reversals, versions."""
    run = report["run"]
    book = Workbook()
    summary = book.create_sheet("Summary")
    book.remove(book.worksheets[0])
    for line in (
        ("Re-grade", f"#{run.pk}"),
        ("Status", run.status),
        ("Grader version", run.grader_version),
        ("Created", run.created_at.isoformat() if run.created_at else ""),
        ("Applied", run.applied_at.isoformat() if run.applied_at else ""),
        ("Attempts re-graded", report["regraded"]),
        ("Gradings that change", report["changed"]),
        ("Verdict flips", len(report["flips"])),
        ("Not re-gradable", report["not_regradable"]),
        *((f"Flips {kind}", count) for kind, count in report["flip_counts"].items()),
        *(
            (f"Not re-gradable: {reason}", count)
            for reason, count in report["not_regradable_reasons"].items()
        ),
    ):
        summary.append([_cell(value) for value in line])
    sheet = book.create_sheet("Campaigns")
    rows = campaign_rows(report)
    header = list(rows[0]) if rows else ["campaign"]
    sheet.append(header)
    for row in rows:
        sheet.append([_cell(row[key]) for key in header])
    flips = book.create_sheet("Flips")
    flips.append(["attempt", "campaign", "task", "before", "after", "kind"])
    for flip in report["flips"]:
        flips.append(
            [flip.attempt_id, _cell(flip.campaign), _cell(flip.task_id), flip.before, flip.after, flip.kind]
        )
    reversals = book.create_sheet("Reversals")
    reversals.append(["was above", "now below"])
    for above, below in report["reversals"]:
        reversals.append([_cell(above), _cell(below)])
    versions = book.create_sheet("Task versions")
    versions.append(["task", "definition hash re-graded against"])
    task_versions: list[dict[str, Any]] = list((run.task_versions or {}).values())
    for task_version in sorted(task_versions, key=lambda v: v["task_id"]):
        versions.append([_cell(task_version["task_id"]), task_version["hash"]])
    out = BytesIO()
    book.save(out)
    return out.getvalue()


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    """Names come from operators and imported files: text a spreadsheet would run as a formula gets
    a leading apostrophe (the exports' rule, docs/exports.md)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
