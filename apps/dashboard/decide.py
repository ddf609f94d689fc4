"""The decision aid (issue 30, item 9): "dependable on at least X% of tasks, for at most $Y per
1,000 tasks" -> which campaign's agent to pick, with the noise floor and the reasons.

Everything comes from the stored campaign figures (apps.figures selectors): all-N share with its
95% interval and coverage bounds, cost per attempt (one production task is one attempt), and the
paired all-N comparison with its noise floor between the pick and the runner-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.campaigns.models import Campaign
from apps.figures import selectors as figures

TASKS_PER_BUDGET = 1000
# What the page (and the procurement workbook) assume until the reviewer says otherwise.
DEFAULT_TARGET_PERCENT = 80.0
DEFAULT_BUDGET = 50.0


@dataclass(frozen=True)
class Candidate:
    campaign: Campaign
    figures: figures.CampaignFigures
    cost_per_1000: float | None  # agent cost of 1,000 tasks, one attempt each; None if unpriced
    meets_dependability: bool
    within_budget: bool
    reasons: tuple[str, ...]  # why it qualifies or not, one clause each

    @property
    def qualifies(self) -> bool:
        return self.meets_dependability and self.within_budget


@dataclass(frozen=True)
class Decision:
    candidates: tuple[Candidate, ...]  # qualifying first (most dependable first), then the others
    pick: Candidate | None
    runner_up: Candidate | None
    noise_floor: float | None  # minimum detectable all-N difference between pick and runner-up
    tied: bool  # the pick's lead over the runner-up is below the noise floor
    summary: str


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def candidate(
    campaign: Campaign, figs: figures.CampaignFigures, *, min_share: float, budget: float
) -> Candidate:
    all_n, bounds = figs.all_n, figs.coverage_bounds
    reasons = []
    share = all_n.value
    meets = share is not None and share >= min_share
    reasons.append(
        f"all-{figs.n_attempts} {_pct(share)} of {figs.coverage.tasks} tasks "
        f"(95% interval {_pct(all_n.lo)} to {_pct(all_n.hi)}) "
        + ("meets" if meets else "falls short of")
        + f" {_pct(min_share)}"
    )
    if bounds.missing_attempts and bounds.all_n.lo is not None and bounds.all_n.lo < min_share:
        # Some attempts have no verdict: if they had failed, the target might be missed.
        meets = False
        reasons.append(
            f"{bounds.missing_attempts} attempts have no verdict: all-{figs.n_attempts} could be as low as "
            f"{_pct(bounds.all_n.lo)}"
        )
    elif meets and all_n.lo is not None and all_n.lo < min_share:
        reasons.append(f"but its interval reaches down to {_pct(all_n.lo)}: more attempts would settle it")
    per_attempt = None if figs.unpriced else figs.cost.cost_per_attempt
    cost = None if per_attempt is None else per_attempt * TASKS_PER_BUDGET
    within = cost is not None and cost <= budget
    if cost is None:
        reasons.append("no price: some attempts used a model the price sheet does not list")
    else:
        reasons.append(
            f"${cost:,.2f} per 1,000 tasks " + ("within" if within else "over") + f" ${budget:,.2f}"
        )
    return Candidate(campaign, figs, cost, meets, within, tuple(reasons))


def decide(campaigns: list[Campaign], *, min_share: float, budget: float) -> Decision:
    """Rank the campaigns against the target and budget; pick the most dependable qualifying one,
    or among those tied with it under the noise floor, the cheapest."""
    tables = figures.per_task_tables(campaigns)
    rows = [
        candidate(c, f, min_share=min_share, budget=budget)
        for c in campaigns
        for f in [figures.campaign_figures(tables, c)]
        if f.coverage.done_attempts
    ]

    def dependability(row: Candidate) -> float:
        return row.figures.all_n.value or 0.0

    qualifying = sorted((r for r in rows if r.qualifies), key=dependability, reverse=True)
    others = sorted((r for r in rows if not r.qualifies), key=dependability, reverse=True)
    pick = runner_up = None
    noise_floor, tied = None, False
    if qualifying:
        pick = qualifying[0]
        if len(qualifying) > 1:
            runner_up = qualifying[1]
            try:
                delta = figures.comparison(tables, pick.campaign, runner_up.campaign).delta_all_n
            except ValueError:
                delta = None
            if delta is not None:
                noise_floor = delta.mdd
                tied = delta.clears is False
                if tied and (runner_up.cost_per_1000 or 0) < (pick.cost_per_1000 or 0):
                    pick, runner_up = runner_up, pick  # tied on dependability: the cheaper one
    summary = _summary(pick, runner_up, noise_floor, tied, min_share=min_share, budget=budget, seen=len(rows))
    ordered = ([pick] if pick else []) + [r for r in qualifying if r is not pick] + others
    return Decision(tuple(ordered), pick, runner_up, noise_floor, tied, summary)


def _summary(pick, runner_up, noise_floor, tied, *, min_share: float, budget: float, seen: int) -> str:
    if pick is None:
        return (
            f"None of the {seen} campaigns is dependable on at least {_pct(min_share)} of tasks for at most "
            f"${budget:,.2f} per 1,000 tasks: loosen the target or the budget, or run more attempts."
        )
    head = f"Choose {pick.campaign.agent.name} (campaign {pick.campaign.name})"
    if runner_up is None:
        return head + ": the only campaign that meets both the dependability target and the budget."
    floor = _pct(noise_floor) if noise_floor is not None else "unknown"
    if tied:
        return (
            f"{head}: as dependable as {runner_up.campaign.name} within the noise floor ({floor} points of "
            f"all-N), and cheaper."
        )
    if noise_floor is None:
        return f"{head}: most dependable of those that qualify; they ran different tasks, so no paired noise floor."
    return f"{head}: more dependable than the runner-up {runner_up.campaign.name} beyond the noise floor ({floor} points of all-N)."
