"""Typed results of the figures app: what a page, an export or the API reads, never a nested dict.

The engine (`tb_engine.metrics`) returns plain dicts, JSON-ready; these frozen dataclasses are built
from them once (`from_metrics`), so a reader writes `figures.all_n.count` instead of
`row["m"]["all_n"]["count"]`, and a misspelt field fails at once instead of giving None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apps.campaigns.models import Campaign


def number_or_none(value: Any) -> float | None:
    """A figure as a plain float (numpy scalars too), or None when absent (None or NaN)."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


@dataclass(frozen=True)
class Estimate:
    """A share (0..1) averaged over tasks, with its 95% task-bootstrap interval (fixed seed)."""

    value: float | None
    lo: float | None
    hi: float | None
    tasks: int  # tasks the estimate averages over
    excluded: tuple[str, ...]  # tasks without enough done attempts

    @classmethod
    def from_metrics(cls, raw: Mapping[str, Any]) -> Estimate:
        return cls(
            value=raw["value"],
            lo=raw["lo"],
            hi=raw["hi"],
            tasks=raw["tasks"],
            excluded=tuple(raw["excluded"]),
        )


# What a page shows for a k that cannot be estimated (k > N): every part absent.
NO_ESTIMATE = Estimate(value=None, lo=None, hi=None, tasks=0, excluded=())


@dataclass(frozen=True)
class AllN(Estimate):
    """Share of tasks solved in every one of N attempts, and how many tasks that is."""

    count: int

    @classmethod
    def from_metrics(cls, raw: Mapping[str, Any]) -> AllN:
        base = Estimate.from_metrics(raw)
        return cls(base.value, base.lo, base.hi, base.tasks, base.excluded, count=raw["count"])


@dataclass(frozen=True)
class Interval:
    """A difference with its 95% interval (gap in points, comparison deltas as shares)."""

    value: float | None
    lo: float | None
    hi: float | None

    @classmethod
    def from_metrics(cls, raw: Mapping[str, Any]) -> Interval:
        return cls(value=raw["value"], lo=raw["lo"], hi=raw["hi"])


@dataclass(frozen=True)
class Coverage:
    tasks: int
    complete_tasks: int
    incomplete_tasks: tuple[str, ...]
    done_attempts: int
    planned_attempts: int
    missing_attempts: int
    infra_errors: int
    unjudged: int = 0  # done, a rubric the judge could not answer: excluded like an infra error

    @classmethod
    def from_metrics(cls, raw: Mapping[str, Any]) -> Coverage:
        return cls(**{**raw, "incomplete_tasks": tuple(raw["incomplete_tasks"])})


@dataclass(frozen=True)
class Bounds:
    """A figure if every missing attempt had failed (lo) or passed (hi); None without tasks."""

    lo: float | None
    hi: float | None


@dataclass(frozen=True)
class CoverageBounds:
    """pass@1, all-N and pass^k bounded over the attempts with no verdict (infra error, unjudged,
    never run): tb_engine.metrics.coverage_bounds. With none missing, lo == hi == the figure."""

    missing_attempts: int
    pass_at_1: Bounds
    all_n: Bounds
    pass_hat_k: Mapping[int, Bounds]

    @classmethod
    def from_metrics(cls, raw: Mapping[str, Any]) -> CoverageBounds:
        return cls(
            missing_attempts=raw["missing_attempts"],
            pass_at_1=Bounds(**raw["pass_at_1"]),
            all_n=Bounds(**raw["all_n"]),
            pass_hat_k={k: Bounds(**b) for k, b in raw["pass_hat_k"].items()},
        )

    def pass_hat(self, k: int) -> Bounds:
        return self.pass_hat_k.get(k, Bounds(None, None))


@dataclass(frozen=True)
class Cost:
    """Agent cost and evaluation overhead (USD) kept apart; None where the ratio is undefined."""

    agent_cost: float | None
    eval_cost: float | None
    billed_attempts: int
    successes: int
    cost_per_attempt: float | None
    cost_per_success: float | None
    cost_per_dependable_task: float | None
    eval_cost_per_attempt: float | None
    tokens: Mapping[str, int]  # input_tokens, cached_input_tokens, output_tokens, reasoning_tokens

    @classmethod
    def from_metrics(cls, raw: Mapping[str, Any]) -> Cost:
        return cls(**{**raw, "tokens": dict(raw["tokens"])})


@dataclass(frozen=True)
class CampaignFigures:
    """Every SPEC §5 figure of one campaign over a task slice (tb_engine.metrics.campaign_metrics)."""

    n_attempts: int
    ks: tuple[int, ...]
    seed: int
    coverage: Coverage
    pass_at_1: Estimate
    pass_at_k: Mapping[int, Estimate]  # unbiased pass@k for k in ks
    pass_hat_k: Mapping[int, Estimate]  # unbiased pass^k for k in ks
    pass_hat_k_plugin: Mapping[int, float | None]  # plug-in (c/n)^k, as tb agg prints it
    pass_at_n_observed: Estimate
    all_n: AllN
    gap_pp: Interval  # pass@N observed - all-N share, percentage points
    cost: Cost
    mean_tokens: float | None  # agent input + output tokens per billed attempt
    unpriced: int  # attempts on a model the price sheet does not list
    eval_tokens: int  # tokens of the user simulator and judge
    coverage_bounds: CoverageBounds  # the figures if every missing attempt had failed / passed

    @classmethod
    def from_metrics(
        cls, raw: Mapping[str, Any], *, mean_tokens: float | None, unpriced: int, eval_tokens: int
    ) -> CampaignFigures:
        return cls(
            n_attempts=raw["n_attempts"],
            ks=tuple(raw["ks"]),
            seed=raw["seed"],
            coverage=Coverage.from_metrics(raw["coverage"]),
            pass_at_1=Estimate.from_metrics(raw["pass_at_1"]),
            pass_at_k={k: Estimate.from_metrics(e) for k, e in raw["pass_at_k"].items()},
            pass_hat_k={k: Estimate.from_metrics(e) for k, e in raw["pass_hat_k"].items()},
            pass_hat_k_plugin=dict(raw["pass_hat_k_plugin"]),
            pass_at_n_observed=Estimate.from_metrics(raw["pass_at_n_observed"]),
            all_n=AllN.from_metrics(raw["all_n"]),
            gap_pp=Interval.from_metrics(raw["gap_pp"]),
            cost=Cost.from_metrics(raw["cost"]),
            mean_tokens=mean_tokens,
            unpriced=unpriced,
            eval_tokens=eval_tokens,
            coverage_bounds=CoverageBounds.from_metrics(raw["coverage_bounds"]),
        )

    def pass_at(self, k: int) -> Estimate:
        """Unbiased pass@k (NO_ESTIMATE when k > N)."""
        return self.pass_at_k.get(k, NO_ESTIMATE)

    def pass_hat(self, k: int) -> Estimate:
        """Unbiased pass^k (NO_ESTIMATE when k > N)."""
        return self.pass_hat_k.get(k, NO_ESTIMATE)

    # The leaderboard's columns, named so templates and exports read them without a lookup.
    @property
    def pass_at_5(self) -> Estimate:
        return self.pass_at(5)

    @property
    def pass_at_10(self) -> Estimate:
        return self.pass_at(10)

    @property
    def pass_at_n(self) -> Estimate:
        return self.pass_at(self.n_attempts)

    @property
    def pass_hat_5(self) -> Estimate:
        return self.pass_hat(5)

    @property
    def pass_hat_n(self) -> Estimate:
        return self.pass_hat(self.n_attempts)

    @property
    def pass_hat_n_bounds(self) -> Bounds:
        return self.coverage_bounds.pass_hat(self.n_attempts)

    @property
    def pass_hat_5_bounds(self) -> Bounds:
        return self.coverage_bounds.pass_hat(5)

    @property
    def pass_hat_5_plugin(self) -> float | None:
        return self.pass_hat_k_plugin.get(5)

    @property
    def pass_hat_n_plugin(self) -> float | None:
        return self.pass_hat_k_plugin.get(self.n_attempts)


@dataclass(frozen=True)
class CampaignRow:
    """One campaign and its figures (a row of the gap, cost and leaderboard tables)."""

    campaign: Campaign
    figures: CampaignFigures


@dataclass(frozen=True)
class Band:
    """Where a campaign stands once differences below the noise floor (SPEC §9) count as ties.

    Bands are numbered from the best; `rank` is the league rank of the band (1 + the campaigns in
    better bands), shown as "=rank" when `shared`. `leader` opened the band; `delta_to_leader` and
    `mdd_to_leader` are this row's paired difference to it and their minimum detectable difference.
    """

    metric: str  # the figure the bands rank by: pass_at_1 | pass_hat_5 | pass_hat_n | all_n
    number: int
    rank: int
    shared: bool
    size: int
    leader: str
    delta_to_leader: float | None  # share; None for the leader itself
    mdd_to_leader: float | None

    @property
    def label(self) -> str:
        return f"={self.rank}" if self.shared else str(self.rank)


@dataclass(frozen=True)
class LeaderboardRow(CampaignRow):
    """A leaderboard row: reversal partners, tied band and standard errors of the noise metrics."""

    reversed_with: tuple[str, ...] = ()
    band: Band | None = None  # None: the campaign has no value of the ranking figure
    se: Mapping[str, float | None] = field(default_factory=dict)  # noise metric -> SE over the slice
    # The data version the figures were computed from (summary stamps, slice, ranking): equal
    # versions mean equal figures, so a page fragment can be keyed by it (apps.dashboard.fragments).
    version: str = field(default="", compare=False)


@dataclass(frozen=True)
class DomainFigures:
    """Point estimates over one domain's tasks; None where no task of it has a done attempt."""

    domain: str
    tasks: int
    pass_at_1: float | None
    pass_at_n: float | None  # pass@N observed: share of tasks solved at least once
    all_n: float | None  # share of tasks solved in all N attempts

    def share(self, metric: str) -> float | None:
        """One of pass_at_1, pass_at_n, all_n by name."""
        if metric not in DOMAIN_METRICS:
            raise KeyError(f"domain figure {metric!r}: choose one of {', '.join(DOMAIN_METRICS)}")
        return getattr(self, metric)


DOMAIN_METRICS = ("pass_at_1", "pass_at_n", "all_n")


@dataclass(frozen=True)
class Pair:
    a: float | None
    b: float | None


@dataclass(frozen=True)
class TaskComparison:
    task_id: str
    n_a: int
    c_a: int
    n_b: int
    c_b: int
    delta_pass_at_1: float | None
    dependable_a: bool
    dependable_b: bool
    p_a_better: float  # P(p_A > p_B) under Beta(1 + c, 1 + n - c) posteriors


@dataclass(frozen=True)
class Delta(Interval):
    """A paired difference (A - B, share) with its 95% interval, SE(Δ) and noise floor MDD (SPEC §9)."""

    se: float | None = None
    mdd: float | None = None  # (1.96 + 0.84) x SE(Δ) of the paired task bootstrap

    @classmethod
    def from_metrics(cls, raw: Mapping[str, Any]) -> Delta:
        return cls(value=raw["value"], lo=raw["lo"], hi=raw["hi"], se=raw.get("se"), mdd=raw.get("mdd"))

    @property
    def clears(self) -> bool | None:
        """Whether |Δ| reaches the floor (a zero difference never does); None when either is unknown."""
        if self.value is None or self.mdd is None:
            return None
        return abs(self.value) > 0 and abs(self.value) >= self.mdd


@dataclass(frozen=True)
class Comparison:
    """Campaign A minus campaign B on their shared tasks (tb_engine.metrics.paired_comparison)."""

    tasks: int
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    delta_pass_at_1: Delta
    delta_all_n: Delta
    pass_at_1: Pair
    pass_at_n_observed: Pair
    gained: tuple[str, ...]  # dependable in A only
    lost: tuple[str, ...]  # dependable in B only
    sharpening: bool  # pass@1 up while pass@N observed down
    per_task: tuple[TaskComparison, ...]

    @classmethod
    def from_metrics(cls, raw: Mapping[str, Any]) -> Comparison:
        return cls(
            tasks=raw["tasks"],
            only_in_a=tuple(raw["only_in_a"]),
            only_in_b=tuple(raw["only_in_b"]),
            delta_pass_at_1=Delta.from_metrics(raw["delta_pass_at_1"]),
            delta_all_n=Delta.from_metrics(raw["delta_all_n"]),
            pass_at_1=Pair(**raw["pass_at_1"]),
            pass_at_n_observed=Pair(**raw["pass_at_n_observed"]),
            gained=tuple(raw["gained"]),
            lost=tuple(raw["lost"]),
            sharpening=raw["sharpening"],
            per_task=tuple(TaskComparison(**row) for row in raw["per_task"]),
        )


@dataclass(frozen=True)
class WhatIfCost:
    """Agent cost recomputed at edited prices, beside the stored (price-sheet) cost it replaces."""

    agent_cost: float
    cost_per_attempt: float | None
    cost_per_success: float | None
    cost_per_dependable_task: float | None
    stored: Cost


@dataclass(frozen=True)
class TaskCell:
    """One campaign's counts on one task: c passes among n done attempts, N planned."""

    c: int
    n: int
    N: int

    @property
    def rate(self) -> float | None:
        return self.c / self.n if self.n else None

    @property
    def dependable(self) -> bool:
        return self.c == self.n == self.N


@dataclass(frozen=True)
class TaskGridRow:
    """A row of the tasks x campaigns grid: one cell per campaign, None where it did not run the task."""

    task_pk: int
    task_id: str
    domain: str
    cells: tuple[TaskCell | None, ...]


@dataclass(frozen=True)
class TaskCounts:
    """One task's row of a campaign's per-task table (the procurement workbook's Per task sheet)."""

    task_pk: int
    task_id: str
    domain: str
    n: int
    c: int
    infra_errors: int
    agent_cost: float
    n_attempts: int

    @property
    def pass_rate(self) -> float | None:
        return self.c / self.n if self.n else None

    @property
    def dependable(self) -> bool:
        return self.c == self.n == self.n_attempts


@dataclass(frozen=True)
class MetricNoise:
    """One figure's noise over a task slice: SE of the campaign's value and its rerun floor (SPEC §9)."""

    metric: str
    label: str
    value: float | None
    se: float | None  # sd of the task-bootstrap replicates (fixed seed, 2000 replicates)
    rerun_se: float | None  # SE of the difference to a rerun of the same configuration
    rerun_mdd: float | None  # (1.96 + 0.84) x rerun_se: smaller changes are run-to-run noise
    tasks: int


@dataclass(frozen=True)
class CampaignNoise:
    """A campaign's noise floor per scope ("" = every task, else a domain) and metric."""

    campaign: Campaign
    scopes: Mapping[str, tuple[MetricNoise, ...]]

    def scope(self, name: str) -> tuple[MetricNoise, ...]:
        return self.scopes.get(name, ())

    def metric(self, name: str, scope: str = "") -> MetricNoise | None:
        return next((m for m in self.scope(scope) if m.metric == name), None)


@dataclass(frozen=True)
class ReplicateSpread:
    """One figure across a replicate set: what was observed beside what the floor predicts."""

    metric: str
    label: str
    values: tuple[float | None, ...]  # per member, in the set's order
    sd: float | None  # observed sd across the replicates (ddof 1)
    range: float | None
    max_abs_delta: float | None
    pairs: int
    pairs_below_floor: int  # pairs whose |Δ| stays below their paired MDD
    median_pair_mdd: float | None
    rerun_mdd: float | None  # the rerun floor, averaged over the members
    expected_sd: float | None  # the sd of one replicate's value the rerun floor implies


@dataclass(frozen=True)
class ReplicateSet:
    """A campaign and its replicates (same configuration, new seeds), with the spread per figure."""

    root: Campaign
    members: tuple[Campaign, ...]
    spreads: tuple[ReplicateSpread, ...]
    complete: bool  # every member finished (a running replicate's figures are partial)


@dataclass(frozen=True)
class DomainRanking:
    """Campaigns ranked within one domain, ties by the noise floor shown as shared ranks."""

    domain: str
    metric: str
    rows: tuple[tuple[Campaign, float | None, Band | None], ...]  # best first


@dataclass(frozen=True)
class PlanInputs:
    """What an attempts plan was computed from."""

    target: float  # the difference to detect (share)
    mode: str  # drift | ab
    attempt_var: float | None
    task_var: float | None
    campaigns: int
    pairs: int
    tasks_available: int
    cost_per_attempt: float | None  # agent + evaluation cost per billed attempt at the campaign's prices
    price_source: str  # the price sheet's name and date ("" when unpriced)
    pilot_tasks: int
    pilot_attempts: int
    pilot_mdd: float | None  # MDD at the pilot's own design


@dataclass(frozen=True)
class Plan:
    """An attempts plan: per N, the tasks that detect the target difference and what a campaign costs."""

    inputs: PlanInputs
    rows: tuple[Any, ...]  # tb_engine.metrics.planner.PlanRow
    cheapest: Any | None
    problem: str  # why no plan could be made ("" when rows are there)
