"""Every dashboard table as a plain Table (typed columns + rows), built from the figures app's selectors.

Exported numbers must equal the page's, so each builder calls the same selectors the page view
calls with the same query parameters; nothing here recomputes a metric.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from django.http import QueryDict

from apps.attempts.selectors.process_risk import campaign_process_risk, process_counts_of_attempts
from apps.campaigns.selectors import campaign_robustness, campaigns_visible_to, robustness_export_rows
from apps.core.batches import in_slices
from apps.dashboard.selectors import common_ground, ranked_order
from apps.drift import selectors as drift
from apps.figures import selectors as figures
from apps.figures.selectors import figure_campaigns
from apps.gates import selectors as gates
from apps.triage.selectors import (
    CATEGORIES,
    SUSPECT_KINDS,
    SUSPECT_STATUSES,
    QueueFilters,
    campaign_triage_summary,
    cluster_index,
    cluster_rows,
    judge_rows,
    queue_queryset,
    queue_rows,
    suspect_tasks,
    task_health_scope,
)
from tb_engine.process import FINDING_LABELS

# Column kinds decide the spreadsheet number format: share = 0..1 shown as percent.
KINDS = ("text", "int", "float", "share", "points", "money", "bool")


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    kind: str = "text"


@dataclass
class Table:
    name: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]

    def values(self) -> list[list[Any]]:
        """Rows as lists in column order."""
        return [[row.get(column.key) for column in self.columns] for row in self.rows]


# Exports say how many flagged tasks the figures leave out, as the pages' banner does.
EXCLUDED_COLUMN = Column("excluded_unhealthy_tasks", "excluded unhealthy tasks", "int")


def _ids(query: QueryDict) -> list[int] | None:
    return [int(v) for v in query.getlist("c") if v.isdigit()] or None


def leaderboard_table(user, query: QueryDict) -> Table:
    """The leaderboard rows with the page's domain/tag/health filters and sort."""
    return leaderboard_ranking(figure_campaigns(user), query)


def leaderboard_ranking(campaigns: list, query: QueryDict) -> Table:
    """The leaderboard's rows, bands and common-ground ranking for these campaigns (the page's
    query parameters: domain, tag, health scope, sort); the procurement workbook's ranking sheet."""
    domain, tag = query.get("domain", ""), query.get("tag", "")
    exclude = task_health_scope(query, campaigns).exclude
    # The page's default: dependability (all-N) first.
    sort = query.get("sort", "alln")
    sort = sort if sort in figures.LEADERBOARD_SORTS else "alln"
    descending = query.get("dir", "desc" if sort != "name" else "asc") == "desc"
    rank_by = figures.rank_metric(sort)
    rows = figures.sort_rows(
        figures.leaderboard_rows(campaigns, domain=domain, tag=tag, exclude=exclude, rank_by=rank_by),
        key=sort,
        descending=descending,
    )
    # As on the page: campaigns that ran different tasks or N are ranked on their common ground only.
    ranked = [row.campaign for row in rows if not row.campaign.is_harness_check]
    ground = common_ground(ranked, domain=domain, tag=tag, exclude=exclude)
    if not ground.comparable and sort in figures.BAND_SORTS:
        rows = ranked_order(ground, rows)
    compared = (
        ground.summary
        or "The same tasks and the same N for every ranked campaign: ranked on their own figures."
    )
    columns = [
        Column("campaign", "campaign"),
        Column("simulation", "simulation", "bool"),
        Column("n_attempts", "N", "int"),
        Column("tasks", "tasks", "int"),
        Column("pass_at_1", "pass@1", "share"),
        Column("pass_at_1_lo", "pass@1 lo", "share"),
        Column("pass_at_1_hi", "pass@1 hi", "share"),
        Column("pass_at_5", "pass@5", "share"),
        Column("pass_at_10", "pass@10", "share"),
        Column("pass_at_n", "pass@N", "share"),
        Column("pass_hat_5", "pass^5", "share"),
        Column("pass_hat_n", "pass^N", "share"),
        Column("pass_at_n_observed", "pass@N observed", "share"),
        Column("all_n_count", "all-N tasks", "int"),
        Column("all_n", "all-N share", "share"),
        Column("gap_pp", "gap (pp)", "points"),
        Column("mean_tokens", "tokens per attempt", "float"),
        Column("cost_per_attempt", "$ per attempt", "money"),
        Column("cost_per_success", "$ per success", "money"),
        Column("cost_per_dependable_task", "$ per dependable task", "money"),
        Column("infra_errors", "infra errors", "int"),
        Column("incomplete_tasks", "incomplete tasks", "int"),
        EXCLUDED_COLUMN,
        # The noise floor, last so existing column positions stay where they were.
        Column("rank", f"rank by {figures.METRIC_LABELS[rank_by]} (= tied within the noise floor)"),
        Column("band", "band", "int"),
        Column("delta_to_band_leader", "Δ to band leader", "share"),
        Column("mdd_to_band_leader", "noise floor to band leader (MDD)", "share"),
        Column("pass_at_1_se", "pass@1 SE", "share"),
        Column("all_n_se", "all-N SE", "share"),
        Column("all_n_lo", "all-N share 95% lo", "share"),
        Column("all_n_hi", "all-N share 95% hi", "share"),
        # What is compared (issue 30): the common ground when the campaigns ran different tests.
        Column("compared_on", "what is compared"),
        Column("common_rank", "rank on common ground"),
        Column("common_tasks", "common tasks", "int"),
        Column("common_k", "common k", "int"),
        Column("common_pass_hat_k", "pass^k on common ground", "share"),
        Column("common_pass_at_1", "pass@1 on common ground", "share"),
        # Process risk (docs/process_risk.md), whole campaign: passing attempts with process findings.
        Column("passed_with_process_risk", "passed with process risk", "int"),
        Column("process_risk_share", "passed with process risk / passed", "share"),
        *(
            Column(f"passed_with_{kind}", f"passed with {label}", "int")
            for kind, label in FINDING_LABELS.items()
        ),
    ]
    risk = campaign_process_risk(campaign_ids=[row.campaign.pk for row in rows])
    out = []
    for row in rows:
        m, campaign, band = row.figures, row.campaign, row.band
        out.append(
            {
                "rank": band.label if band else None,
                "band": band.number if band else None,
                "delta_to_band_leader": band.delta_to_leader if band else None,
                "mdd_to_band_leader": band.mdd_to_leader if band else None,
                "pass_at_1_se": row.se.get("pass_at_1"),
                "all_n_se": row.se.get("all_n"),
                "all_n_lo": m.all_n.lo,
                "all_n_hi": m.all_n.hi,
                "campaign": campaign.name,
                "simulation": campaign.agent.is_simulation,
                "n_attempts": campaign.n_attempts,
                "tasks": m.coverage.tasks,
                "pass_at_1": m.pass_at_1.value,
                "pass_at_1_lo": m.pass_at_1.lo,
                "pass_at_1_hi": m.pass_at_1.hi,
                "pass_at_5": m.pass_at_5.value,
                "pass_at_10": m.pass_at_10.value,
                "pass_at_n": m.pass_at_n.value,
                "pass_hat_5": m.pass_hat_5.value,
                "pass_hat_n": m.pass_hat_n.value,
                "pass_at_n_observed": m.pass_at_n_observed.value,
                "all_n_count": m.all_n.count,
                "all_n": m.all_n.value,
                "gap_pp": m.gap_pp.value,
                "mean_tokens": m.mean_tokens,
                "cost_per_attempt": None if m.unpriced else m.cost.cost_per_attempt,
                "cost_per_success": None if m.unpriced else m.cost.cost_per_success,
                "cost_per_dependable_task": None if m.unpriced else m.cost.cost_per_dependable_task,
                "infra_errors": m.coverage.infra_errors,
                "incomplete_tasks": len(m.coverage.incomplete_tasks),
                "excluded_unhealthy_tasks": len(exclude),
                "compared_on": compared,
                **_common_ground_cells(ground, campaign.pk),
                "passed_with_process_risk": risk[campaign.pk].with_risk,
                "process_risk_share": risk[campaign.pk].share,
                **{f"passed_with_{kind}": risk[campaign.pk].by_kind[kind] for kind in FINDING_LABELS},
            }
        )
    title = "Leaderboard" if ground.comparable else f"Leaderboard. {ground.summary}"
    return Table("leaderboard", title, columns, out)


def _common_ground_cells(ground, campaign_pk: int) -> dict[str, Any]:
    row = ground.rows.get(campaign_pk)
    if ground.comparable or row is None:
        return {}
    return {
        "common_rank": row.rank,
        "common_tasks": len(ground.tasks),
        "common_k": ground.k,
        "common_pass_hat_k": row.pass_hat_k.value,
        "common_pass_at_1": row.pass_at_1.value,
    }


def gap_table(user, query: QueryDict) -> Table:
    campaigns = figure_campaigns(user, ids=_ids(query))
    exclude = task_health_scope(query, campaigns).exclude
    rows = []
    for row in figures.campaign_rows(campaigns, figures.per_task_tables(campaigns, exclude=exclude)):
        m = row.figures
        rows.append(
            {
                "campaign": row.campaign.name,
                "pass_at_n_observed": m.pass_at_n_observed.value,
                "all_n": m.all_n.value,
                "gap_pp": m.gap_pp.value,
                "gap_lo": m.gap_pp.lo,
                "gap_hi": m.gap_pp.hi,
                "excluded_unhealthy_tasks": len(exclude),
            }
        )
    columns = [
        Column("campaign", "campaign"),
        Column("pass_at_n_observed", "pass@N observed", "share"),
        Column("all_n", "all-N share", "share"),
        Column("gap_pp", "gap (pp)", "points"),
        Column("gap_lo", "gap lo (pp)", "points"),
        Column("gap_hi", "gap hi (pp)", "points"),
        EXCLUDED_COLUMN,
    ]
    return Table("gap", "Discovery–reliability gap", columns, rows)


def cost_table(user, query: QueryDict) -> Table:
    campaigns = figure_campaigns(user)
    exclude = task_health_scope(query, campaigns).exclude
    rows = []
    for row in figures.campaign_rows(campaigns, figures.per_task_tables(campaigns, exclude=exclude)):
        cost, sheet = row.figures.cost, row.campaign.price_sheet
        rows.append(
            {
                "campaign": row.campaign.name,
                "agent_cost": cost.agent_cost,
                "eval_cost": cost.eval_cost,
                "cost_per_attempt": cost.cost_per_attempt,
                "cost_per_success": cost.cost_per_success,
                "cost_per_dependable_task": cost.cost_per_dependable_task,
                "billed_attempts": cost.billed_attempts,
                **{
                    key: cost.tokens.get(key, 0)
                    for key in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
                },
                "unpriced": row.figures.unpriced,
                "price_sheet": sheet.name if sheet else "",
                "price_source": sheet.source if sheet else "",
                "price_date": sheet.effective_date.isoformat() if sheet else "",
                "excluded_unhealthy_tasks": len(exclude),
            }
        )
    columns = [
        Column("campaign", "campaign"),
        Column("agent_cost", "agent cost $", "money"),
        Column("eval_cost", "evaluation cost $", "money"),
        Column("cost_per_attempt", "$ per attempt", "money"),
        Column("cost_per_success", "$ per success", "money"),
        Column("cost_per_dependable_task", "$ per dependable task", "money"),
        Column("billed_attempts", "billed attempts", "int"),
        Column("input_tokens", "input tokens", "int"),
        Column("cached_input_tokens", "cached input tokens", "int"),
        Column("output_tokens", "output tokens", "int"),
        Column("reasoning_tokens", "reasoning tokens", "int"),
        Column("unpriced", "unpriced attempts", "int"),
        Column("price_sheet", "price sheet"),
        Column("price_source", "price source"),
        Column("price_date", "price date"),
        EXCLUDED_COLUMN,
    ]
    return Table("cost", "Cost", columns, rows)


def domains_table(user, query: QueryDict) -> Table:
    campaigns = figure_campaigns(user)
    exclude = task_health_scope(query, campaigns).exclude
    tables = figures.per_task_tables(campaigns, exclude=exclude)
    rows = []
    for campaign in campaigns:
        for domain in figures.domain_figures(tables, campaign):
            rows.append(
                {"campaign": campaign.name, **asdict(domain), "excluded_unhealthy_tasks": len(exclude)}
            )
    columns = [
        Column("campaign", "campaign"),
        Column("domain", "domain"),
        Column("tasks", "tasks", "int"),
        Column("pass_at_1", "pass@1", "share"),
        Column("pass_at_n", "pass@N observed", "share"),
        Column("all_n", "all-N share", "share"),
        EXCLUDED_COLUMN,
    ]
    return Table("domains", "Domains", columns, rows)


def tasks_table(user, query: QueryDict) -> Table:
    """The tasks x campaigns grid with the page's filters, as c and n per campaign (not paged)."""
    campaigns = figure_campaigns(user, ids=_ids(query))
    grid = figures.task_grid(campaigns, domain=query.get("domain", ""), kind=query.get("filter", ""))
    columns = [Column("task_id", "task"), Column("domain", "domain")]
    for position, campaign in enumerate(campaigns):
        columns += [
            Column(f"c{position}", f"{campaign.name} · passes", "int"),
            Column(f"n{position}", f"{campaign.name} · done", "int"),
        ]
    rows = []
    for entry in grid:
        row: dict[str, Any] = {"task_id": entry.task_id, "domain": entry.domain}
        for position, cell in enumerate(entry.cells):
            row[f"c{position}"], row[f"n{position}"] = (cell.c, cell.n) if cell else (None, None)
        rows.append(row)
    return Table("tasks", "Tasks", columns, rows)


def compare_table(user, query: QueryDict) -> Table:
    """Per-task rows of the paired comparison ?a=&b= (empty when either is missing or not visible)."""
    by_id = {c.pk: c for c in figure_campaigns(user)}
    a_id, b_id = query.get("a", ""), query.get("b", "")
    a = by_id.get(int(a_id)) if a_id.isdigit() else None
    b = by_id.get(int(b_id)) if b_id.isdigit() else None
    columns = [
        Column("task_id", "task"),
        Column("c_a", "A passes", "int"),
        Column("n_a", "A done", "int"),
        Column("c_b", "B passes", "int"),
        Column("n_b", "B done", "int"),
        Column("delta_pass_at_1", "Δ pass@1", "share"),
        Column("dependable_a", "dependable in A", "bool"),
        Column("dependable_b", "dependable in B", "bool"),
        Column("p_a_better", "P(A better)", "share"),
    ]
    rows = []
    if a and b and a.n_attempts == b.n_attempts:
        tables = figures.per_task_tables(
            [a, b] if a.pk != b.pk else [a], exclude=task_health_scope(query, [a, b]).exclude
        )
        rows = [asdict(task) for task in figures.comparison(tables, a, b).per_task]
    return Table("compare", "Compare", columns, rows)


def robustness_table(user, query: QueryDict) -> Table:
    """Per fault kind of each chosen (?c=, default every visible) campaign run under a fault plan:
    fired, recovered with its interval, duplicate effects; the campaign's duplicate-effect rate,
    planned-but-not-fired count and Δ against its paired clean campaign (docs/faults.md)."""
    columns = [
        Column("campaign_id", "campaign id", "int"),
        Column("campaign", "campaign"),
        Column("kind", "fault kind"),
        Column("fired", "fired in (attempts)", "int"),
        Column("recovered", "recovered", "int"),
        Column("recovery_rate", "recovery rate", "share"),
        Column("recovery_lo", "recovery 95% low", "share"),
        Column("recovery_hi", "recovery 95% high", "share"),
        Column("duplicate_effects", "with duplicate effects", "int"),
        Column("graded", "graded attempts", "int"),
        Column("planned_not_fired", "planned, not fired", "int"),
        Column("unfired_ordinals", "unreached ordinals", "int"),
        Column("pass_at_1_under_faults", "pass@1 under faults", "share"),
        Column("all_n_under_faults", "all-N under faults", "share"),
        Column("duplicate_effect_count", "duplicate-effect attempts", "int"),
        Column("duplicate_effect_of", "of committed commit-point faults", "int"),
        Column("duplicate_effect_rate", "duplicate-effect rate", "share"),
        Column("duplicate_effect_lo", "duplicate-effect 95% low", "share"),
        Column("duplicate_effect_hi", "duplicate-effect 95% high", "share"),
        Column("clean_campaign_id", "paired clean campaign id", "int"),
        Column("delta_pass_at_1", "Δ pass@1 vs clean", "share"),
        Column("mdd_pass_at_1", "noise floor pass@1", "share"),
        Column("delta_all_n", "Δ all-N vs clean", "share"),
        Column("mdd_all_n", "noise floor all-N", "share"),
    ]
    chosen = _ids(query)
    visible = campaigns_visible_to(user).exclude(fault_plan={}).order_by("pk")
    if chosen is not None:
        visible = visible.filter(pk__in=chosen)
    rows = []
    for campaign in visible:
        robustness = campaign_robustness(campaign=campaign, user=user)
        if robustness is not None:
            rows.extend(robustness_export_rows(campaign=campaign, robustness=robustness))
    return Table("robustness", "Robustness under faults", columns, rows)


def triage_queue_table(user, query: QueryDict) -> Table:
    attempts = list(queue_rows(queue_queryset(user=user, filters=QueueFilters.from_query(query))))
    process = process_counts_of_attempts(attempt_ids=[a.pk for a in attempts])
    rows = [
        {
            "attempt": a.pk,
            "campaign": a.campaign.name,
            "task_id": a.task.task_id,
            "domain": a.task.domain.name,
            "index": a.index,
            "termination": a.termination,
            "categories": ", ".join(a.categories or []),
            "labels": ", ".join(label.name for label in a.review.labels.all())
            if hasattr(a, "review")
            else "",
            "assignee": a.review.assignee.get_username()
            if hasattr(a, "review") and a.review.assignee
            else "",
            "status": a.review.status if hasattr(a, "review") else "open",
            **{kind: (process.get(a.pk) or {}).get(kind, 0) for kind in FINDING_LABELS},
        }
        for a in attempts
    ]
    columns = [
        Column("attempt", "attempt id", "int"),
        Column("campaign", "campaign"),
        Column("task_id", "task"),
        Column("domain", "domain"),
        Column("index", "index", "int"),
        Column("termination", "termination"),
        Column("categories", "categories"),
        Column("labels", "labels"),
        Column("assignee", "assignee"),
        Column("status", "status"),
        *(Column(kind, f"process: {label}", "int") for kind, label in FINDING_LABELS.items()),
    ]
    return Table("triage-queue", "Triage queue", columns, rows)


def triage_summary_table(user, query: QueryDict) -> Table:
    summary = campaign_triage_summary(campaigns=figure_campaigns(user, ids=_ids(query)))
    rows = [
        {
            "campaign": r["campaign"].name,
            "clean_failures": r["clean_failures"],
            **{f"share_{k}": v for k, v in r["shares"].items()},
            "labels": "; ".join(f"{name}: {count}" for name, count in r["labels"]),
        }
        for r in summary
    ]
    columns = [Column("campaign", "campaign"), Column("clean_failures", "clean-looking failures", "int")]
    columns += [Column(f"share_{name}", f"share with {name}", "share") for name in CATEGORIES]
    columns.append(Column("labels", "labels"))
    return Table("triage-summary", "Clean-looking failures", columns, rows)


def clusters_table(user, query: QueryDict) -> Table:
    """Every failure cluster of the triage queue with its filters (the grouped view, not paged)."""
    filters = QueueFilters.from_query(query).without_signature()
    index = cluster_index(user=user, filters=filters)
    rows = []
    for row in (
        r
        for chunk in in_slices(index, 500)
        for r in cluster_rows(user=user, filters=filters, index=index, page=chunk)
    ):
        c = row.cluster
        rows.append(
            {
                "signature": c.signature,
                "attempts": c.size,
                "clean_looking": c.clean,
                "share": row.share,
                "description": c.description,
                "categories": ", ".join(c.categories),
                "elements": "; ".join(" ".join(item[:4]) for item in c.items),
                "tasks": c.tasks,
                "top_tasks": ", ".join(name for name, _ in row.top_tasks),
                "campaigns": c.campaigns,
                "models": c.models,
                "top_models": ", ".join(name for name, _ in row.top_models),
                "termination": row.termination,
                "termination_share": row.termination_share,
                "examples": ", ".join(str(pk) for pk in c.examples),
                "related": ", ".join(c.related),
                "reviewed": row.reviewed,
                "labelled": row.labelled,
            }
        )
    columns = [
        Column("signature", "signature"),
        Column("attempts", "attempts", "int"),
        Column("clean_looking", "clean-looking failures", "int"),
        Column("share", "share of clean-looking failures", "share"),
        Column("description", "what the attempts did"),
        Column("categories", "categories"),
        Column("elements", "signature elements (class table target tool)"),
        Column("tasks", "tasks", "int"),
        Column("top_tasks", "most frequent tasks"),
        Column("campaigns", "campaigns", "int"),
        Column("models", "models", "int"),
        Column("top_models", "most frequent models"),
        Column("termination", "dominant termination"),
        Column("termination_share", "its share", "share"),
        Column("examples", "example attempt ids"),
        Column("related", "related signatures"),
        Column("reviewed", "reviewed", "int"),
        Column("labelled", "labelled", "int"),
    ]
    return Table("clusters", "Failure clusters", columns, rows)


def suspect_tasks_table(user, query: QueryDict) -> Table:
    """The suspect-task queue with its status/evidence filters: one row per (task, evidence)."""
    status = query.get("status", "open")
    kind = query.get("kind", "")
    found = suspect_tasks(
        campaigns=figure_campaigns(user),
        status=status if status in SUSPECT_STATUSES else "open",
        kind=kind if kind in SUSPECT_KINDS else "",
    )
    rows = [
        {
            "task_id": row.task.task_id,
            "domain": row.task.domain.name,
            "status": row.status,
            "kind": evidence.kind,
            "evidence": evidence.detail,
            "value": evidence.value,
            "attempt": evidence.attempt_id,
        }
        for row in found
        for evidence in row.evidence
    ]
    columns = [
        Column("task_id", "task"),
        Column("domain", "domain"),
        Column("status", "status"),
        Column("kind", "evidence kind"),
        Column("evidence", "evidence"),
        Column("value", "value", "float"),
        Column("attempt", "example attempt id", "int"),
    ]
    return Table("suspect-tasks", "Suspect tasks", columns, rows)


def judges_table(user, query: QueryDict) -> Table:
    """Each judge version's agreement with human labels."""
    rows = []
    for row in judge_rows(campaigns=figure_campaigns(user)):
        c, m = row.calibration, row.calibration.confusion
        rows.append(
            {
                "judge": row.identity.label,
                "version": row.key,
                "kind": row.identity.kind,
                "model": row.identity.model,
                "campaigns": ", ".join(campaign.name for campaign in row.campaigns),
                "labels": row.labels,
                "unjudged": row.unjudged,
                "agreements": m.agreements,
                "tp": m.tp,
                "fp": m.fp,
                "fn": m.fn,
                "tn": m.tn,
                "tpr": m.tpr,
                "tnr": m.tnr,
                "kappa": c.kappa,
                "kappa_lo": c.kappa_lo,
                "kappa_hi": c.kappa_hi,
                "calibrated": c.enough,
            }
        )
    columns = [
        Column("judge", "judge"),
        Column("version", "version (content hash)"),
        Column("kind", "kind"),
        Column("model", "model"),
        Column("campaigns", "campaigns"),
        Column("labels", "human labels", "int"),
        Column("unjudged", "labels on unjudged answers", "int"),
        Column("agreements", "agreements", "int"),
        Column("tp", "judge yes, human yes", "int"),
        Column("fp", "judge yes, human no", "int"),
        Column("fn", "judge no, human yes", "int"),
        Column("tn", "judge no, human no", "int"),
        Column("tpr", "TPR", "share"),
        Column("tnr", "TNR", "share"),
        Column("kappa", "Cohen's kappa", "float"),
        Column("kappa_lo", "kappa lo", "float"),
        Column("kappa_hi", "kappa hi", "float"),
        Column("calibrated", "30 or more labels", "bool"),
    ]
    return Table("judges", "Rubric judges", columns, rows)


def noise_table(user, query: QueryDict) -> Table:
    """Per campaign, scope (every task, then each domain) and figure: value, SE and rerun floor."""
    campaigns = figure_campaigns(user, ids=_ids(query))
    exclude = task_health_scope(query, campaigns).exclude
    tables = figures.per_task_tables(campaigns, exclude=exclude)
    rows = []
    for campaign in campaigns:
        noise = figures.campaign_noise(tables, campaign)
        for scope, metrics in noise.scopes.items():
            for metric in metrics:
                rows.append(
                    {
                        "campaign": campaign.name,
                        "n_attempts": campaign.n_attempts,
                        "scope": scope or "all tasks",
                        "figure": metric.label,
                        "tasks": metric.tasks,
                        "value": metric.value,
                        "se": metric.se,
                        "rerun_se": metric.rerun_se,
                        "rerun_mdd": metric.rerun_mdd,
                        "excluded_unhealthy_tasks": len(exclude),
                    }
                )
    columns = [
        Column("campaign", "campaign"),
        Column("n_attempts", "N", "int"),
        Column("scope", "tasks"),
        Column("figure", "figure"),
        Column("tasks", "tasks counted", "int"),
        Column("value", "value", "share"),
        Column("se", "standard error (task bootstrap)", "share"),
        Column("rerun_se", "SE of a rerun difference", "share"),
        Column("rerun_mdd", "rerun floor (MDD, α 0.05, power 0.8)", "share"),
        EXCLUDED_COLUMN,
    ]
    return Table("noise", "Noise floor", columns, rows)


def replicates_table(user, query: QueryDict) -> Table:
    """Each replicate set's figures: every member's value, observed spread, predicted floors."""
    rows = []
    for replicate_set in figures.replicate_sets(figure_campaigns(user)):
        for spread in replicate_set.spreads:
            rows.append(
                {
                    "set": replicate_set.root.name,
                    "members": "; ".join(
                        f"{member.name} (seed {member.seed}): {'' if value is None else f'{value * 100:.2f}%'}"
                        for member, value in zip(replicate_set.members, spread.values)
                    ),
                    "replicates": len(replicate_set.members),
                    "complete": replicate_set.complete,
                    "figure": spread.label,
                    "sd": spread.sd,
                    "expected_sd": spread.expected_sd,
                    "range": spread.range,
                    "max_abs_delta": spread.max_abs_delta,
                    "median_pair_mdd": spread.median_pair_mdd,
                    "rerun_mdd": spread.rerun_mdd,
                    "pairs": spread.pairs,
                    "pairs_below_floor": spread.pairs_below_floor,
                }
            )
    columns = [
        Column("set", "replicate set"),
        Column("members", "members and values"),
        Column("replicates", "replicates", "int"),
        Column("complete", "all finished", "bool"),
        Column("figure", "figure"),
        Column("sd", "observed sd", "share"),
        Column("expected_sd", "expected sd (from the rerun floor)", "share"),
        Column("range", "range", "share"),
        Column("max_abs_delta", "largest |Δ|", "share"),
        Column("median_pair_mdd", "paired floor (median MDD)", "share"),
        Column("rerun_mdd", "rerun floor (MDD)", "share"),
        Column("pairs", "pairs", "int"),
        Column("pairs_below_floor", "pairs below their floor", "int"),
    ]
    return Table("replicates", "Replicate sets", columns, rows)


def planner_table(user, query: QueryDict) -> Table:
    """The attempts plan of the planner page's query (?campaigns=…&mode=…&target_pp=…); empty when incomplete."""
    columns = [
        Column("attempts", "attempts per task (N)", "int"),
        Column("tasks_needed", "tasks needed", "int"),
        Column("feasible", "suite has them", "bool"),
        Column("mdd_with_all_tasks", "MDD with every task", "share"),
        Column("attempts_per_campaign", "attempts per campaign", "int"),
        Column("cost_per_campaign", "cost per campaign", "money"),
        Column("cheapest", "cheapest design", "bool"),
    ]
    by_id = {c.pk: c for c in figure_campaigns(user)}
    chosen = [
        by_id[int(v)] for v in dict.fromkeys(query.getlist("campaigns")) if v.isdigit() and int(v) in by_id
    ]
    try:
        target = float(query.get("target_pp", ""))
    except ValueError:
        target = 0.0
    mode = query.get("mode", "drift")
    if not chosen or not 0 < target <= 100 or mode not in ("drift", "ab"):
        return Table("planner", "Attempts plan", columns, [])
    plan = figures.attempts_plan(
        chosen,
        figures.per_task_tables(chosen),
        target=target / 100.0,
        mode=mode,
        tasks_available=figures.gradable_task_count(suite_id=chosen[0].suite_id),
    )
    rows = [{**asdict(row), "cheapest": row == plan.cheapest} for row in plan.rows]
    return Table("planner", "Attempts plan", columns, rows)


def drift_table(user, query: QueryDict) -> Table:
    """Every run of the user's watches (or ?watch=ID's): figures, Δ with interval and floor, flips, provider, alert."""
    watches = drift.watches_visible_to(user)
    watch_id = query.get("watch", "")
    if watch_id.isdigit():
        watches = watches.filter(pk=int(watch_id))
    rows = []
    for view in drift.watch_views(watches):
        for run in view.runs:
            row: dict[str, Any] = {
                "watch": view.watch.name,
                "run": run.run.number,
                "campaign": run.run.campaign.name,
                "started_at": run.run.started_at.isoformat(),
                "trigger": run.run.get_trigger_display(),
                "status": run.run.get_status_display(),
                "provider": run.provider_text,
                "provider_changed": run.run.provider_changed,
                "pass_at_1": (run.figures.get("pass_at_1") or {}).get("value"),
                "all_n": (run.figures.get("all_n") or {}).get("value"),
                "alert": run.run.alert,
                "reasons": "; ".join(run.run.alert_reasons),
                "acknowledged": run.run.acknowledged_at is not None,
                "webhook": run.run.webhook_status,
            }
            for label, compared in (("baseline", run.vs_baseline), ("previous", run.vs_previous)):
                for metric in ("pass_at_1", "all_n"):
                    delta = getattr(compared, metric) if compared else None
                    for part in ("value", "lo", "hi", "mdd", "clears"):
                        row[f"{metric}_{label}_{part}"] = getattr(delta, part) if delta else None
                row[f"lost_vs_{label}"] = ", ".join(compared.stopped_being_dependable) if compared else None
                row[f"gained_vs_{label}"] = ", ".join(compared.became_dependable) if compared else None
            rows.append(row)
    columns = [
        Column("watch", "watch"),
        Column("run", "run", "int"),
        Column("campaign", "campaign"),
        Column("started_at", "started"),
        Column("trigger", "trigger"),
        Column("status", "status"),
        Column("provider", "model that answered"),
        Column("provider_changed", "provider changed", "bool"),
        Column("pass_at_1", "pass@1", "share"),
        Column("all_n", "all-N share", "share"),
    ]
    for label in ("baseline", "previous"):
        for metric, title in (("pass_at_1", "pass@1"), ("all_n", "all-N")):
            columns += [
                Column(f"{metric}_{label}_value", f"Δ {title} vs {label}", "share"),
                Column(f"{metric}_{label}_lo", f"Δ {title} vs {label} lo", "share"),
                Column(f"{metric}_{label}_hi", f"Δ {title} vs {label} hi", "share"),
                Column(f"{metric}_{label}_mdd", f"noise floor {title} vs {label}", "share"),
                Column(f"{metric}_{label}_clears", f"{title} vs {label} clears the floor", "bool"),
            ]
        columns += [
            Column(f"lost_vs_{label}", f"dependable → not vs {label}"),
            Column(f"gained_vs_{label}", f"not → dependable vs {label}"),
        ]
    columns += [
        Column("alert", "alert", "bool"),
        Column("reasons", "alert reasons"),
        Column("acknowledged", "acknowledged", "bool"),
        Column("webhook", "webhook"),
    ]
    return Table("drift", "Drift watch runs", columns, rows)


def gate_table(user, query: QueryDict) -> Table:
    """The release gate's rules for ?campaign=&baseline=&min_pass1=&min_all_n=&max_drop_pp=&domain= (empty when it cannot run)."""
    columns = [
        Column("rule", "rule"),
        Column("value", "value (share, or drop in pp)", "float"),
        Column("threshold", "threshold", "float"),
        Column("lo", "interval lo", "float"),
        Column("hi", "interval hi", "float"),
        Column("mdd", "noise floor (pp)", "float"),
        Column("verdict", "verdict"),
        Column("uses", "decided by"),
        Column("detail", "detail"),
    ]
    by_id = {c.pk: c for c in figure_campaigns(user)}

    def pick(name: str):
        value = query.get(name, "")
        return by_id.get(int(value)) if value.isdigit() else None

    def number(name: str) -> float | None:
        try:
            value = query.get(name, "")
            return float(value) if value != "" else None
        except ValueError:
            return None

    campaign = pick("campaign")
    if campaign is None:
        return Table("gate", "Release gate", columns, [])
    try:
        report = gates.gate_report(
            campaign=campaign,
            baseline=pick("baseline"),
            min_pass1=number("min_pass1"),
            min_all_n=number("min_all_n"),
            max_drop_pp=number("max_drop_pp"),
            domain=query.get("domain", ""),
        )
    except gates.GateInputError:
        return Table("gate", "Release gate", columns, [])
    return Table("gate", "Release gate", columns, [asdict(rule) for rule in report.rules])


BUILDERS: dict[str, Callable[[Any, QueryDict], Table]] = {
    "leaderboard": leaderboard_table,
    "gap": gap_table,
    "cost": cost_table,
    "domains": domains_table,
    "tasks": tasks_table,
    "compare": compare_table,
    "robustness": robustness_table,
    "noise": noise_table,
    "replicates": replicates_table,
    "planner": planner_table,
    "drift": drift_table,
    "gate": gate_table,
    "triage-queue": triage_queue_table,
    "triage-summary": triage_summary_table,
    "clusters": clusters_table,
    "suspect-tasks": suspect_tasks_table,
    "judges": judges_table,
}
