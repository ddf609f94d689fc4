"""The procurement workbook: summary; when each campaign ran; the leaderboard's ranking; the chosen
campaign against the runner-up; cost per 1,000 tasks at the reviewer's dependability target;
per-domain, per-task and methodology & provenance sheets (the reviewer's sheets: apps.exports.review).

Figures come from apps.figures.selectors (the leaderboard's selectors), so the workbook and the
dashboard always agree. The content hash covers every data cell (not the generation time), so two
exports of unchanged data carry the same hash.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import asdict
from datetime import UTC, datetime

from django.db.models import Count
from openpyxl import Workbook
from openpyxl.styles import Font

from apps.attempts.selectors.campaign_counts import attempt_status_counts
from apps.campaigns.models import Campaign
from apps.exports import review
from apps.exports.formulas import sheet_title
from apps.exports.review import ReviewerAsks
from apps.exports.tables import Column, Table
from apps.exports.writers import append_caption, first_sheet, write_sheet
from apps.figures import selectors as figures
from apps.regrade.selectors import figure_versions

SUMMARY_COLUMNS = [
    Column("campaign_id", "campaign id", "int"),
    Column("campaign", "campaign"),
    Column("agent", "agent"),
    Column("simulation", "simulation (not a model)", "bool"),
    Column("n_attempts", "N", "int"),
    Column("tasks", "tasks", "int"),
    Column("pass_at_1", "pass@1", "share"),
    Column("pass_at_1_lo", "pass@1 95% lo", "share"),
    Column("pass_at_1_hi", "pass@1 95% hi", "share"),
    Column("pass_at_n", "pass@N (unbiased)", "share"),
    Column("pass_at_n_observed", "pass@N observed", "share"),
    Column("all_n_count", "all-N tasks", "int"),
    Column("all_n", "all-N share", "share"),
    Column("gap_pp", "gap (pp)", "points"),
    Column("agent_cost", "agent cost $", "money"),
    Column("eval_cost", "evaluation cost $", "money"),
    Column("cost_per_success", "$ per success", "money"),
    Column("cost_per_dependable_task", "$ per dependable task", "money"),
    Column("all_n_lo", "all-N share 95% lo", "share"),
    Column("all_n_hi", "all-N share 95% hi", "share"),
]
DOMAIN_COLUMNS = [
    Column("campaign", "campaign"),
    Column("domain", "domain"),
    Column("tasks", "tasks", "int"),
    Column("pass_at_1", "pass@1", "share"),
    Column("pass_at_n", "pass@N observed", "share"),
    Column("all_n", "all-N share", "share"),
]
TASK_COLUMNS = [
    Column("campaign", "campaign"),
    Column("task_id", "task"),
    Column("domain", "domain"),
    Column("n", "done attempts", "int"),
    Column("c", "passes", "int"),
    Column("infra_errors", "infra errors", "int"),
    Column("pass_rate", "c/n", "share"),
    Column("dependable", "all-N (dependable)", "bool"),
    Column("agent_cost", "agent cost $", "money"),
]
# Plain definitions (the glossary's, so the workbook and the dashboard say the same thing), then
# how a verdict and an infrastructure error are treated.
METHODOLOGY = [(term.name, term.definition) for term in figures.GLOSSARY] + [
    (
        "infrastructure errors",
        "Excluded from every success figure and reported as missing coverage; they are billed.",
    ),
    (
        "verdict",
        "An attempt passes only when every check holds: the database it leaves matches the golden run's, "
        "the task's explicit checks hold and every yes/no rubric is answered yes. There is no partial credit.",
    ),
    (
        "cost",
        "Tokens priced with the campaign's price sheet (input, cached input, output and reasoning priced "
        "separately); agent cost and evaluation cost (user simulator, judge) are kept apart.",
    ),
    (
        "95% intervals",
        "From resampling tasks 2,000 times with a fixed seed, so a figure is the same on every export.",
    ),
]


def workbook_data(
    campaigns: list[Campaign], asks: ReviewerAsks | None = None, ranking: Table | None = None
) -> dict[str, list[dict]]:
    """Rows of every data sheet (the dashboard's figures, nothing recomputed); `ranking` is the
    leaderboard's table of the campaigns when the caller already has it."""
    asks = asks or ReviewerAsks()
    tables = figures.per_task_tables(campaigns)
    summary, domains, tasks = [], [], []
    for campaign in campaigns:
        m = figures.campaign_figures(tables, campaign)
        summary.append(
            {
                "campaign_id": campaign.pk,
                "campaign": campaign.name,
                "agent": campaign.agent.name,
                "simulation": campaign.agent.is_simulation,
                "n_attempts": campaign.n_attempts,
                "tasks": m.coverage.tasks,
                "pass_at_1": m.pass_at_1.value,
                "pass_at_1_lo": m.pass_at_1.lo,
                "pass_at_1_hi": m.pass_at_1.hi,
                "pass_at_n": m.pass_at_n.value,
                "pass_at_n_observed": m.pass_at_n_observed.value,
                "all_n_count": m.all_n.count,
                "all_n": m.all_n.value,
                "gap_pp": m.gap_pp.value,
                "agent_cost": m.cost.agent_cost,
                "eval_cost": m.cost.eval_cost,
                "cost_per_success": m.cost.cost_per_success,
                "cost_per_dependable_task": m.cost.cost_per_dependable_task,
                "all_n_lo": m.all_n.lo,
                "all_n_hi": m.all_n.hi,
            }
        )
        for domain in figures.domain_figures(tables, campaign):
            domains.append({"campaign": campaign.name, **asdict(domain)})
        for task in figures.task_counts(tables, campaign):
            tasks.append(
                {
                    "campaign": campaign.name,
                    "task_id": task.task_id,
                    "domain": task.domain,
                    "n": task.n,
                    "c": task.c,
                    "infra_errors": task.infra_errors,
                    "pass_rate": task.pass_rate,
                    "dependable": task.dependable,
                    "agent_cost": task.agent_cost,
                }
            )
    ranking = ranking or review.ranking_table(campaigns)
    decision = review.decision_for(campaigns, asks)
    compared = review.comparison_sheet(decision)
    return {
        "summary": summary,
        "timeline": review.timeline_rows(campaigns),
        "ranking": [{"caption": ranking.rows[0]["compared_on"] if ranking.rows else ranking.title}]
        + ranking.rows,
        "comparison": [
            {
                "chosen": compared.chosen.name if compared.chosen else None,
                "runner_up": compared.runner_up.name if compared.runner_up else None,
                "verdict": compared.verdict,
            }
        ]
        + compared.rows,
        "cost": [
            {
                "target_percent": asks.target_percent,
                "budget": asks.budget,
                "decision": decision.summary,
            }
        ]
        + review.cost_rows(decision),
        "domains": domains,
        "tasks": tasks,
    }


def content_hash(data: dict[str, list[dict]]) -> str:
    """sha256 of the data sheets' rows as canonical JSON."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _provenance(
    campaigns: list[Campaign], digest: str, generated_at: datetime, user=None
) -> list[tuple[str, object]]:
    counts = {row["campaign_id"]: row for row in _attempt_counts(campaigns)}
    versions = figure_versions(campaigns)
    rows: list[tuple[str, object]] = [
        ("generated at (UTC)", generated_at.isoformat(timespec="seconds")),
        ("generated by", user.get_username() if user is not None else "command line"),
        ("filters", "campaigns " + ", ".join(str(c.pk) for c in campaigns) + "; every task of each campaign"),
        ("content hash (sha256 of the data sheets)", digest),
        ("", ""),
    ]
    for campaign in campaigns:
        count = counts.get(campaign.pk, {})
        planned = campaign.n_attempts * count.get("tasks", 0)
        done = count.get("done", 0)
        sheet = campaign.price_sheet
        rows += [
            (f"campaign {campaign.pk}", campaign.name),
            (
                "  agent",
                f"{campaign.agent.name} ({campaign.agent.get_kind_display()}{', model ' + campaign.agent.model if campaign.agent.model else ''})",
            ),
            ("  suite", f"{campaign.suite.name} version {campaign.suite_version}"),
            ("  suite hash", campaign.suite_hash),
            ("  harness version", campaign.harness_version),
            ("  figures from", str(versions[campaign.pk])),
            ("  N attempts per task", campaign.n_attempts),
            ("  non-discriminating tasks", campaign.non_discriminating_note),
            (
                "  attempts planned / done / infra errors / other",
                f"{planned} / {done} / {count.get('infra', 0)} / {count.get('total', 0) - done - count.get('infra', 0)}",
            ),
            ("  coverage (done / planned)", done / planned if planned else None),
            (
                "  price sheet",
                f"{sheet.name} — source: {sheet.source}, effective {sheet.effective_date.isoformat()}"
                if sheet
                else "none (cost not priced)",
            ),
            ("  user simulator", json.dumps(campaign.user_simulator, sort_keys=True)),
            ("  judge", json.dumps(campaign.judge, sort_keys=True)),
        ]
    rows.append(("", ""))
    rows += [(f"how: {name}", text) for name, text in METHODOLOGY]
    return rows


def _attempt_counts(campaigns: list[Campaign]) -> list[dict]:
    ids = [c.pk for c in campaigns]
    # The plugin resolves "n" against the M2M through model's fields, not the annotation above it.
    tasks = dict(
        Campaign.tasks.through.objects.filter(campaign_id__in=ids)
        .values_list("campaign_id")
        .annotate(n=Count("id"))
        .values_list("campaign_id", "n")  # type: ignore[misc]
    )
    rows = attempt_status_counts(campaign_ids=ids)
    seen = {row["campaign_id"] for row in rows}
    rows += [{"campaign_id": pk, "total": 0, "done": 0, "infra": 0} for pk in ids if pk not in seen]
    for row in rows:
        row["tasks"] = tasks.get(row["campaign_id"], 0)
    return rows


SHEETS = [
    "Summary",
    "When they ran",
    "Ranking",
    "Chosen vs runner-up",
    "Cost at your target",
    "Per domain",
    "Per task",
    "Methodology & provenance",
]


def _rows(columns: list[Column], rows: list[dict]) -> list[list]:
    return [[row.get(column.key) for column in columns] for row in rows]


def _captioned(sheet, caption: list[tuple[str, object]], columns: list[Column], rows: list[dict]) -> None:
    """The table, then below it what it answers."""
    write_sheet(sheet, columns, _rows(columns, rows))
    append_caption(sheet, caption)


def build_workbook(
    *,
    campaigns: list[Campaign],
    generated_at: datetime | None = None,
    user=None,
    asks: ReviewerAsks | None = None,
) -> tuple[bytes, str]:
    """The .xlsx bytes and the content hash for the campaigns (in the given order); `asks` is the
    reviewer's dependability target and budget for the cost sheet (the decision aid's by default)."""
    if not campaigns:
        raise ValueError("procurement workbook: choose at least one campaign")
    generated_at = generated_at or datetime.now(UTC)
    asks = asks or ReviewerAsks()
    ranking = review.ranking_table(campaigns)
    data = workbook_data(campaigns, asks, ranking)
    digest = content_hash(data)
    workbook = Workbook()
    summary = first_sheet(workbook)
    summary.title = sheet_title("Summary")
    write_sheet(summary, SUMMARY_COLUMNS, _rows(SUMMARY_COLUMNS, data["summary"]))
    write_sheet(
        workbook.create_sheet("When they ran"),
        review.TIMELINE_COLUMNS,
        _rows(review.TIMELINE_COLUMNS, data["timeline"]),
    )
    _captioned(
        workbook.create_sheet("Ranking"),
        [
            ("what is ranked", data["ranking"][0]["caption"]),
            ("rank", "“=” marks campaigns tied within the noise floor"),
        ],
        ranking.columns,
        data["ranking"][1:],
    )
    head = data["comparison"][0]
    _captioned(
        workbook.create_sheet("Chosen vs runner-up"),
        [("chosen", head["chosen"]), ("runner-up", head["runner_up"]), ("verdict", head["verdict"])],
        review.COMPARISON_COLUMNS,
        data["comparison"][1:],
    )
    asked = data["cost"][0]
    _captioned(
        workbook.create_sheet("Cost at your target"),
        [
            ("dependable on at least (% of tasks)", asked["target_percent"]),
            ("budget ($ per 1,000 tasks)", asked["budget"]),
            ("decision", asked["decision"]),
        ],
        review.COST_COLUMNS,
        data["cost"][1:],
    )
    for title, columns, key in (
        ("Per domain", DOMAIN_COLUMNS, "domains"),
        ("Per task", TASK_COLUMNS, "tasks"),
    ):
        write_sheet(workbook.create_sheet(sheet_title(title)), columns, _rows(columns, data[key]))
    methodology = workbook.create_sheet("Methodology & provenance")
    write_sheet(
        methodology,
        [Column("item", "item"), Column("value", "value")],
        _provenance(campaigns, digest, generated_at, user),
    )
    for row in methodology.iter_rows(min_row=2):
        if row[0].value and not str(row[0].value).startswith(("  ", "how:")):
            row[0].font = Font(bold=True)
        if row[0].value == "  coverage (done / planned)":
            row[1].number_format = "0.0%"
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue(), digest
