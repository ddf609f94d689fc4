"""The procurement workbook's reviewer sheets (issue 30): when each campaign ran, the leaderboard's
ranking, the chosen campaign against the runner-up, and the cost per 1,000 tasks at the
dependability the reviewer asked for.

Nothing is recomputed here: the ranking is the leaderboard export's (bands under the noise floor,
the common-ground restriction), the comparison is the compare page's (figures.comparison and its
verdict sentence), the cost sheet is the decision aid's (apps.dashboard decide()).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import QueryDict

from apps.attempts.selectors.providers import provider_models
from apps.campaigns.models import Campaign
from apps.dashboard.selectors import DEFAULT_BUDGET, DEFAULT_TARGET_PERCENT, Decision, compare_verdict, decide
from apps.exports.tables import Column, Table, leaderboard_ranking
from apps.figures import selectors as figures


@dataclass(frozen=True)
class ReviewerAsks:
    """What the reviewer asked for: dependable on at least `target_percent` % of tasks, within
    `budget` dollars per 1,000 tasks (the decision aid's defaults until they say otherwise)."""

    target_percent: float = DEFAULT_TARGET_PERCENT
    budget: float = DEFAULT_BUDGET


TIMELINE_COLUMNS = [
    Column("campaign_id", "campaign id", "int"),
    Column("campaign", "campaign"),
    Column("status", "status"),
    Column("started_at", "started (UTC)"),
    Column("finished_at", "finished (UTC)"),
    Column("agent", "agent"),
    Column("agent_kind", "agent kind"),
    Column("model", "model configured"),
    Column("model_answered", "model that answered (as the endpoint reported it)"),
    Column("harness_version", "harness version"),
    Column("suite", "suite and version"),
    Column("price_sheet", "price sheet"),
    Column("price_date", "price sheet effective date"),
]
COMPARISON_COLUMNS = [
    Column("figure", "figure"),
    Column("chosen", "chosen", "share"),
    Column("runner_up", "runner-up", "share"),
    Column("delta", "Δ chosen − runner-up", "share"),
    Column("lo", "Δ 95% lo", "share"),
    Column("hi", "Δ 95% hi", "share"),
    Column("mdd", "noise floor (MDD)", "share"),
    Column("clears", "clears the noise floor", "bool"),
]
COST_COLUMNS = [
    Column("campaign", "campaign"),
    Column("agent", "agent"),
    Column("n_attempts", "N", "int"),
    Column("tasks", "tasks", "int"),
    Column("all_n", "all-N share", "share"),
    Column("all_n_lo", "all-N share 95% lo", "share"),
    Column("all_n_hi", "all-N share 95% hi", "share"),
    Column("meets_target", "dependable enough", "bool"),
    Column("cost_per_1000", "agent cost per 1,000 tasks $", "money"),
    Column("within_budget", "within budget", "bool"),
    Column("qualifies", "qualifies", "bool"),
    Column("reasons", "reasons"),
]


def _iso(moment) -> str:
    return moment.isoformat(timespec="seconds") if moment else ""


def timeline_rows(campaigns: list[Campaign]) -> list[dict[str, Any]]:
    """When each campaign ran, with what agent and model, priced by which sheet (one query)."""
    answered = provider_models(campaign_ids=[c.pk for c in campaigns])
    rows = []
    for campaign in campaigns:
        sheet, agent = campaign.price_sheet, campaign.agent
        rows.append(
            {
                "campaign_id": campaign.pk,
                "campaign": campaign.name,
                "status": campaign.get_status_display(),
                "started_at": _iso(campaign.started_at),
                "finished_at": _iso(campaign.finished_at),
                "agent": agent.name,
                "agent_kind": agent.get_kind_display(),
                "model": agent.model,
                "model_answered": "; ".join(answered.get(campaign.pk, ())) or "—",
                "harness_version": campaign.harness_version,
                "suite": f"{campaign.suite.name} {campaign.suite_version}",
                "price_sheet": sheet.name if sheet else "none (cost not priced)",
                "price_date": sheet.effective_date.isoformat() if sheet else "",
            }
        )
    return rows


def ranking_table(campaigns: list[Campaign]) -> Table:
    """The leaderboard's ranking of these campaigns as the leaderboard export shows it (default sort)."""
    return leaderboard_ranking(campaigns, QueryDict())


def decision_for(campaigns: list[Campaign], asks: ReviewerAsks) -> Decision:
    """The decision aid's answer for the ranked campaigns (the harness check is never a candidate)."""
    ranked = [c for c in campaigns if not c.is_harness_check]
    return decide(ranked, min_share=asks.target_percent / 100, budget=asks.budget)


def chosen_pair(decision: Decision) -> tuple[Campaign | None, Campaign | None]:
    """The decision aid's pick and runner-up; without a pick, the two most dependable candidates."""
    order = [row.campaign for row in decision.candidates]
    chosen = decision.pick.campaign if decision.pick else (order[0] if order else None)
    if decision.runner_up is not None:
        return chosen, decision.runner_up.campaign
    others = [c for c in order if c != chosen]
    return chosen, (others[0] if others else None)


@dataclass(frozen=True)
class ComparisonSheet:
    chosen: Campaign | None
    runner_up: Campaign | None
    rows: list[dict[str, Any]]
    verdict: str  # the compare page's sentence, or why there is no comparison


def comparison_sheet(decision: Decision) -> ComparisonSheet:
    """Chosen minus runner-up as the compare page computes and words it."""
    chosen, runner_up = chosen_pair(decision)
    if chosen is None or runner_up is None:
        return ComparisonSheet(chosen, runner_up, [], "Only one campaign: nothing to compare it with.")
    tables = figures.per_task_tables([chosen, runner_up])
    try:
        result = figures.comparison(tables, chosen, runner_up)
    except ValueError as exc:
        return ComparisonSheet(chosen, runner_up, [], f"{chosen.name} against {runner_up.name}: {exc}.")
    rows = []
    for label, pair, delta in (
        ("pass@1", result.pass_at_1, result.delta_pass_at_1),
        (f"all-{chosen.n_attempts} share", None, result.delta_all_n),
    ):
        if pair is None:
            pair_values = (
                figures.campaign_figures(tables, chosen).all_n.value,
                figures.campaign_figures(tables, runner_up).all_n.value,
            )
        else:
            pair_values = (pair.a, pair.b)
        rows.append(
            {
                "figure": label,
                "chosen": pair_values[0],
                "runner_up": pair_values[1],
                "delta": delta.value,
                "lo": delta.lo,
                "hi": delta.hi,
                "mdd": delta.mdd,
                "clears": delta.clears,
            }
        )
    verdict = compare_verdict(
        result,
        a=chosen.name,
        b=runner_up.name,
        cost_a=figures.campaign_figures(tables, chosen).cost,
        cost_b=figures.campaign_figures(tables, runner_up).cost,
    )
    return ComparisonSheet(chosen, runner_up, rows, verdict)


def cost_rows(decision: Decision) -> list[dict[str, Any]]:
    """Each candidate's dependability against the target and agent cost of 1,000 tasks (the decision aid's)."""
    return [
        {
            "campaign": row.campaign.name,
            "agent": row.campaign.agent.name,
            "n_attempts": row.figures.n_attempts,
            "tasks": row.figures.coverage.tasks,
            "all_n": row.figures.all_n.value,
            "all_n_lo": row.figures.all_n.lo,
            "all_n_hi": row.figures.all_n.hi,
            "meets_target": row.meets_dependability,
            "cost_per_1000": row.cost_per_1000,
            "within_budget": row.within_budget,
            "qualifies": row.qualifies,
            "reasons": "; ".join(row.reasons),
        }
        for row in decision.candidates
    ]
