"""The figures app's public reads: SPEC §5 figures of campaigns, typed, cached per summary stamp.

Every page, export and API answer that shows a figure calls these, with the same parameters the
page reads, so all of them show the same numbers. A request loads its per-task tables once
(`per_task_tables`) and passes them to each figure it needs. Intervals use the metrics package's
fixed seed, so a figure is the same on every load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from apps.attempts.models import Attempt
from apps.attempts.selectors.task_attempts import task_attempts
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import figure_campaign_rows
from apps.figures import noise as _noise
from apps.figures.glossary import BY_SLUG as GLOSSARY_BY_SLUG
from apps.figures.glossary import TERMS as GLOSSARY
from apps.figures.results import (
    DOMAIN_METRICS,
    NO_ESTIMATE,
    AllN,
    Band,
    CampaignFigures,
    CampaignNoise,
    CampaignRow,
    Comparison,
    Cost,
    Coverage,
    Delta,
    DomainFigures,
    DomainRanking,
    Estimate,
    Interval,
    LeaderboardRow,
    MetricNoise,
    Pair,
    Plan,
    PlanInputs,
    ReplicateSet,
    ReplicateSpread,
    TaskComparison,
    TaskCounts,
    TaskGridRow,
    WhatIfCost,
    number_or_none,
)
from apps.figures.tables import (
    PerTaskTables,
    cache_key,
    cached,
    filter_frame,
    load_tables,
    per_task_frames,
    preload,
)
from apps.figures.task_grid import TASK_FILTERS, task_grid_rows
from apps.suites.models import Task
from tb_engine.metrics import campaign_metrics, paired_comparison, reversals
from tb_engine.metrics.estimators import pass_hat_k

__all__ = [
    "BAND_SORTS",
    "DOMAIN_METRICS",
    "GLOSSARY",
    "GLOSSARY_BY_SLUG",
    "LEADERBOARD_SORTS",
    "METRIC_LABELS",
    "NOISE_METRICS",
    "NO_ESTIMATE",
    "TASK_FILTERS",
    "AllN",
    "Band",
    "CampaignFigures",
    "CampaignNoise",
    "CampaignRow",
    "Comparison",
    "Cost",
    "Coverage",
    "Delta",
    "DomainFigures",
    "DomainRanking",
    "Estimate",
    "Interval",
    "LeaderboardRow",
    "MetricNoise",
    "Pair",
    "Plan",
    "PlanInputs",
    "ReplicateSet",
    "ReplicateSpread",
    "PerTaskTables",
    "TaskComparison",
    "TaskCounts",
    "TaskGridRow",
    "WhatIfCost",
    "attempt_strip",
    "attempts_plan",
    "campaign_figures",
    "campaign_noise",
    "campaign_rows",
    "cached_figure",
    "campaigns_with_tasks_in",
    "comparison",
    "domain_comparisons",
    "domain_figures",
    "domain_rankings",
    "figure_campaigns",
    "filter_options",
    "gradable_task_count",
    "leaderboard_rows",
    "pass_hat_curves",
    "per_task_table",
    "per_task_tables",
    "preload_campaign_figures",
    "rank_metric",
    "replicate_sets",
    "sort_rows",
    "task_counts",
    "task_grid",
    "task_grid_versioned",
    "whatif_cost",
]


NOISE_METRICS = _noise.NOISE_METRICS
METRIC_LABELS = _noise.METRIC_LABELS
# Leaderboard sort key -> the noise metric it ranks by (rows are grouped into tied bands then).
BAND_SORTS = dict(_noise.SORT_METRICS)


def figure_campaigns(
    user, *, ids: Iterable[int] | None = None, with_price_sheets: bool = True, with_people: bool = True
) -> list[Campaign]:
    """Campaigns the user may see (optionally only `ids`), with agent and price sheet, newest first.

    `with_price_sheets=False` for pages that never show a sheet (the leaderboard, gap, domains,
    tasks, compare): decoding every sheet's prices was a sixth of a warm leaderboard's CPU, and the
    shared-fragment digest walked them too. `with_people=False` leaves out the team and owner (the
    leaderboard names neither): two fewer model rows per campaign to build and digest.
    """
    related = ("agent", "suite", *(("team", "owner") if with_people else ()))
    return figure_campaign_rows(
        user, related=(*related, *(("price_sheet",) if with_price_sheets else ())), ids=ids
    )


def filter_options(campaigns: list[Campaign]) -> tuple[list[str], list[str]]:
    """Domains and tags present in the campaigns' suites, sorted (one query, once per suite revision).

    The distinct (domain, tag list) pairs, not a row per task: a 507-task suite has a few dozen, and
    decoding every task's tags was a sixth of a warm leaderboard request's CPU
    (bench/dashboard_concurrency.py, py-spy --gil).
    """
    suites = {campaign.suite_id: campaign.suite.updated_at for campaign in campaigns}

    def compute() -> tuple[list[str], list[str]]:
        domains: set[str] = set()
        tags: set[str] = set()
        pairs = Task.objects.filter(suite_id__in=list(suites)).values_list("domain__name", "tags").distinct()
        for domain, task_tags in pairs.order_by():
            domains.add(domain)
            tags.update(task_tags or [])
        return sorted(domains), sorted(tags)

    # A suite revision rewrites its tasks' domains and tags and saves the suite (suites.services.
    # suite_store): its updated_at is the version, so a warm page reads no task row at all.
    version = repr(sorted((pk, updated_at.timestamp()) for pk, updated_at in suites.items()))
    domains, tags = cached(cache_key("filter-options", 0, version, sorted(suites)), compute)
    return list(domains), list(tags)  # copies: the cached lists are shared by every request


def per_task_tables(campaigns: list[Campaign], *, exclude: frozenset[int] = frozenset()) -> PerTaskTables:
    """The campaigns' per-task tables (cached), minus the `exclude` task pks: one query warm, three cold."""
    return load_tables(campaigns, exclude=exclude)


def cached_figure(kind: str, version: str, compute: Callable[[], Any], *parts: Any) -> Any:
    """A figure over a set of campaigns computed by another app (the dashboard's common ground), kept and
    stored like this app's own: in the slot `kind` + `parts`, valid while `version` (the stamps of the
    tables it read, and whatever else it depends on) is unchanged. The value must be plain data."""
    return cached(cache_key(kind, 0, version, *parts), compute)


def per_task_table(campaign: Campaign) -> pd.DataFrame:
    """One campaign's per-task table read fresh, not cached (two queries): the engine's input format."""
    return per_task_frames([campaign.pk])[campaign.pk]


def campaigns_with_tasks_in(
    campaigns: list[Campaign], tables: PerTaskTables, *, domain: str, tag: str
) -> list[Campaign]:
    """The campaigns that ran at least one task of the slice (a campaign without one has nothing to rank)."""

    def has_tasks(frame: pd.DataFrame) -> bool:
        if domain:
            frame = frame[frame["domain"] == domain]
        return any(tag in tags for tags in frame["tags"]) if tag else len(frame) > 0

    return [campaign for campaign in campaigns if has_tasks(tables.frame(campaign))]


def campaign_figures(
    tables: PerTaskTables, campaign: Campaign, *, domain: str = "", tag: str = ""
) -> CampaignFigures:
    """Every SPEC §5 figure of the campaign's tasks (or one domain/tag slice of them), cached."""

    def compute() -> CampaignFigures:
        table = filter_frame(tables.frame(campaign), domain=domain, tag=tag)
        raw = campaign_metrics(table, n_attempts=campaign.n_attempts)
        billed = raw["cost"]["billed_attempts"]
        tokens = int(table["input_tokens"].sum() + table["output_tokens"].sum())
        return CampaignFigures.from_metrics(
            raw,
            mean_tokens=tokens / billed if billed else None,
            unpriced=int(table["unpriced"].sum()),
            eval_tokens=int(table["eval_tokens"].sum()),
        )

    if not domain and not tag:
        _preloaded(tables, "figures")
    return cached(_figures_key(tables, campaign, domain=domain, tag=tag), compute)


def _figures_key(tables: PerTaskTables, campaign: Campaign, *, domain: str = "", tag: str = "") -> str:
    return cache_key(
        "figures", campaign.pk, f"{tables.stamp(campaign)}|{campaign.n_attempts}", domain, tag, tables.scope
    )


def campaign_rows(campaigns: list[Campaign], tables: PerTaskTables) -> list[CampaignRow]:
    """Each campaign with its figures over every task of its table, in the given order (stored
    figures read in one query)."""
    preload(_figures_key(tables, c) for c in campaigns)
    return [CampaignRow(campaign=c, figures=campaign_figures(tables, c)) for c in campaigns]


def rank_metric(sort: str) -> str:
    """The noise metric a leaderboard sort key ranks by (pass@1 for sorts without a floor: name, cost…)."""
    return _noise.SORT_METRICS.get(sort, "pass_at_1")


def leaderboard_rows(
    campaigns: list[Campaign],
    *,
    domain: str = "",
    tag: str = "",
    exclude: frozenset[int] = frozenset(),
    rank_by: str = "pass_at_1",
    tables: PerTaskTables | None = None,
) -> list[LeaderboardRow]:
    """One row per campaign (in the given order): figures over the slice, reversal partners, the tied
    band by `rank_by` (SPEC §9: differences below the paired-bootstrap MDD are ties) and the SE of
    every noise metric. `tables`: the campaigns' tables without `exclude`'s tasks when the caller
    loaded them already (the leaderboard shares them with its common ground)."""
    if rank_by not in NOISE_METRICS:
        raise KeyError(f"rank_by {rank_by!r}: choose one of {', '.join(NOISE_METRICS)}")

    if tables is None:
        tables = per_task_tables(campaigns, exclude=exclude)

    def compute() -> dict[int, tuple[CampaignFigures, tuple[str, ...], Any, dict[str, float | None]]]:
        preload(_figures_key(tables, c, domain=domain, tag=tag) for c in campaigns)
        figures = {c.pk: campaign_figures(tables, c, domain=domain, tag=tag) for c in campaigns}
        partners = _reversal_partners(campaigns, figures)
        bands, ses = _noise.leaderboard_noise(campaigns, tables, domain=domain, tag=tag, metric=rank_by)
        return {c.pk: (figures[c.pk], tuple(partners[c.pk]), bands.get(c.pk), ses[c.pk]) for c in campaigns}

    # Every viewer of the same campaigns and slice shares these rows. Keyed by the data version (the
    # summary stamps: a recorded attempt changes its campaign's stamp) and by what the rows show of
    # the campaigns themselves (names in reversal partners, N), so they are never stale; a warm
    # page then reads one small entry instead of every campaign's per-task table.
    version = sorted((c.pk, tables.stamp(c), c.n_attempts, c.name) for c in campaigns)  # any order: same rows
    digest = hashlib.sha1(repr((version, domain, tag, rank_by)).encode()).hexdigest()
    members = sorted(c.pk for c in campaigns)
    parts = cached(
        cache_key("leaderboard", 0, digest, members, sorted(exclude), domain, tag, rank_by), compute
    )
    return [
        LeaderboardRow(campaign=c, figures=figures, reversed_with=partners, band=band, se=se, version=digest)
        for c in campaigns
        for figures, partners, band, se in (parts[c.pk],)
    ]


def _reversal_partners(
    campaigns: list[Campaign], figures: dict[int, CampaignFigures]
) -> dict[int, list[str]]:
    by_label = {}
    for campaign in campaigns:
        found, dependable = figures[campaign.pk].pass_at_n_observed.value, figures[campaign.pk].all_n.value
        if found is not None and dependable is not None:
            by_label[str(campaign.pk)] = (found, dependable)
    names = {str(c.pk): c.name for c in campaigns}
    partners: dict[int, list[str]] = {c.pk: [] for c in campaigns}
    for x, y in reversals(by_label):
        partners[int(x)].append(names[y])
        partners[int(y)].append(names[x])
    return partners


# Sort keys of the leaderboard: column -> value getter (None sorts last either way).
LEADERBOARD_SORTS: dict[str, Callable[[LeaderboardRow], Any]] = {
    "name": lambda row: row.campaign.name.lower(),
    "pass1": lambda row: row.figures.pass_at_1.value,
    "pass5": lambda row: row.figures.pass_at_5.value,
    "pass10": lambda row: row.figures.pass_at_10.value,
    "passn": lambda row: row.figures.pass_at_n.value,
    "hat5": lambda row: row.figures.pass_hat_5.value,
    "hatn": lambda row: row.figures.pass_hat_n.value,
    "observed": lambda row: row.figures.pass_at_n_observed.value,
    "alln": lambda row: row.figures.all_n.value,
    "gap": lambda row: row.figures.gap_pp.value,
    "tokens": lambda row: row.figures.mean_tokens,
    "cost_attempt": lambda row: row.figures.cost.cost_per_attempt,
    "cost_success": lambda row: row.figures.cost.cost_per_success,
    "cost_dependable": lambda row: row.figures.cost.cost_per_dependable_task,
    "infra": lambda row: row.figures.coverage.infra_errors,
}


def sort_rows(rows: list[LeaderboardRow], *, key: str, descending: bool) -> list[LeaderboardRow]:
    """Rows sorted by a LEADERBOARD_SORTS column; rows without a value go last in both directions."""
    getter = LEADERBOARD_SORTS[key]
    present = [row for row in rows if getter(row) is not None]
    absent = [row for row in rows if getter(row) is None]
    return sorted(present, key=getter, reverse=descending) + absent


def pass_hat_curves(tables: PerTaskTables, campaign: Campaign) -> dict[str, list[float | None]]:
    """Unbiased pass^k for k = 1..K: "all" tasks, then each domain by name; mean over tasks with n >= k.

    K = min(N, the most done attempts of any task): pass^k is undefined beyond a task's attempts
    (None in a curve), so larger k are not listed. A stored N may far exceed what ran (an import
    once set N = 100,000 for two attempts a task); the work follows the attempts, not N.
    """

    def compute() -> dict[str, list[float | None]]:
        frame = tables.frame(campaign)
        curves = {}
        longest = min(campaign.n_attempts, int(frame["n"].max()) if len(frame) else 0)
        groups = [("all", frame)] + [(str(name), group) for name, group in frame.groupby("domain", sort=True)]
        for name, group in groups:
            n, c = group["n"].to_numpy(), group["c"].to_numpy()
            values = []
            for k in range(1, longest + 1):
                per_task = pass_hat_k(n, c, k) if len(group) else np.zeros(0)
                kept = per_task[~np.isnan(per_task)]
                values.append(float(kept.mean()) if kept.size else None)
            curves[name] = values
        return curves

    _preloaded(tables, "curves")
    return cached(_curves_key(tables, campaign), compute)


def _curves_key(tables: PerTaskTables, campaign: Campaign) -> str:
    return cache_key("curves", campaign.pk, f"{tables.stamp(campaign)}|{campaign.n_attempts}", tables.scope)


def _domains_key(tables: PerTaskTables, campaign: Campaign) -> str:
    return cache_key("domains", campaign.pk, f"{tables.stamp(campaign)}|{campaign.n_attempts}", tables.scope)


def preload_campaign_figures(tables: PerTaskTables, campaigns: list[Campaign], *kinds: str) -> None:
    """Read the stored figures of these kinds ("figures", "curves", "domains", "noise") for every campaign in one
    query, before a page asks for them one campaign at a time."""
    makers = {
        "figures": _figures_key,
        "curves": _curves_key,
        "domains": _domains_key,
        "noise": _noise.noise_key,
    }
    preload(makers[kind](tables, c) for kind in kinds for c in campaigns)
    if {c.pk for c in campaigns} >= {c.pk for c in tables.campaigns}:
        tables.preloaded.update(kinds)


def _preloaded(tables: PerTaskTables, kind: str) -> None:
    """Every campaign's stored `kind` read in one query, the first time one campaign's is asked for."""
    if kind not in tables.preloaded:
        preload_campaign_figures(tables, tables.campaigns, kind)


def domain_figures(tables: PerTaskTables, campaign: Campaign) -> list[DomainFigures]:
    """Per domain (sorted by name): pass@1, pass@N observed and all-N share as point estimates, cached."""

    def compute() -> list[DomainFigures]:
        frame = tables.frame(campaign)
        table = frame.assign(
            rate=np.where(frame["n"] > 0, frame["c"] / frame["n"].where(frame["n"] > 0, 1), np.nan),
            found=(frame["c"] >= 1).astype(float),
            dependable=((frame["c"] == frame["n"]) & (frame["n"] == campaign.n_attempts)).astype(float),
        )
        grouped = table.groupby("domain", sort=True).agg(
            pass_at_1=("rate", "mean"),
            pass_at_n=("found", "mean"),
            all_n=("dependable", "mean"),
            tasks=("task_id", "count"),
        )
        return [
            DomainFigures(
                domain=str(domain),
                tasks=int(row.tasks),
                pass_at_1=number_or_none(row.pass_at_1),
                pass_at_n=number_or_none(row.pass_at_n),
                all_n=number_or_none(row.all_n),
            )
            for domain, row in grouped.iterrows()
        ]

    _preloaded(tables, "domains")
    return cached(_domains_key(tables, campaign), compute)


def comparison(tables: PerTaskTables, a: Campaign, b: Campaign, *, domain: str = "") -> Comparison:
    """Campaign A minus B on shared tasks (of one domain, or all) with a paired task bootstrap, its
    noise floor (SE(Δ), MDD) per delta, cached per stamp pair. Same N required.

    Raises ValueError when the campaigns have different N (all-N is then not comparable).
    """
    if a.n_attempts != b.n_attempts:
        raise ValueError(
            f"campaigns have different N ({a.n_attempts} vs {b.n_attempts}); all-N is not comparable"
        )

    def compute() -> Comparison:
        raw = paired_comparison(
            filter_frame(tables.frame(a), domain=domain),
            filter_frame(tables.frame(b), domain=domain),
            n_attempts=a.n_attempts,
        )
        return Comparison.from_metrics(raw)

    return cached(
        cache_key(
            "compare", a.pk, f"{tables.stamp(a)}|{tables.stamp(b)}|{a.n_attempts}", b.pk, domain, tables.scope
        ),
        compute,
    )


def domain_comparisons(
    tables: PerTaskTables, a: Campaign, b: Campaign, *, domains: list[str] | None = None
) -> dict[str, Comparison]:
    """A minus B per domain both ran (by name), each with its own paired floor. Same N required.

    ``domains``: the domains both ran when the caller knows them (from their stored domain figures),
    so stored comparisons are read without loading the tables.
    """
    if domains is None:
        domains = sorted(set(tables.frame(a)["domain"]) & set(tables.frame(b)["domain"]))
    shared = domains
    return {str(name): comparison(tables, a, b, domain=str(name)) for name in shared}


def campaign_noise(tables: PerTaskTables, campaign: Campaign) -> CampaignNoise:
    """SE and rerun floor of pass@1, pass^5, pass^N and all-N, over every task and per domain."""
    _preloaded(tables, "noise")
    return _noise.campaign_noise(tables, campaign)


def domain_rankings(
    campaigns: list[Campaign], tables: PerTaskTables, *, metric: str = "pass_at_1"
) -> list[DomainRanking]:
    """Per domain, the campaigns ranked by `metric` with tied bands (ranks only where separable)."""
    return _noise.domain_rankings(campaigns, tables, metric=metric)


def replicate_sets(campaigns: list[Campaign], tables: PerTaskTables | None = None) -> list[ReplicateSet]:
    """Every replicate set with two or more of the given campaigns (oldest member first), with its spread.

    A set is a campaign and the campaigns whose `replicate_of` it is; members outside `campaigns`
    (another team's) are not shown.
    """
    groups: dict[int, list[Campaign]] = {}
    for campaign in campaigns:
        groups.setdefault(campaign.replicate_of_id or campaign.pk, []).append(campaign)
    sets = [members for members in groups.values() if len(members) > 1]
    if not sets:
        return []
    members_all = [member for members in sets for member in members]
    tables = tables if tables is not None else per_task_tables(members_all)
    result = []
    for members in sorted(sets, key=lambda m: min(c.created_at for c in m)):
        ordered = sorted(members, key=lambda c: (c.created_at, c.pk))
        root = next((c for c in ordered if c.replicate_of_id is None), ordered[0])
        result.append(_noise.replicate_set(root, ordered, tables))
    return result


def gradable_task_count(*, suite_id: int) -> int:
    """Tasks of the suite a campaign selects by default (every task but an invalid one, non-discriminating
    ones included): what a plan can draw on."""
    return Task.objects.filter(suite_id=suite_id).exclude(validation=Task.Validation.INVALID).count()


def attempts_plan(
    campaigns: list[Campaign],
    tables: PerTaskTables,
    *,
    target: float,
    mode: str,
    tasks_available: int,
) -> Plan:
    """How many tasks x attempts detect a `target` (share) difference in pass@1 and what a campaign
    costs, from the campaigns' observed variances (the first is the pilot: its design and prices)."""
    if not campaigns:
        raise ValueError("choose at least one campaign to read the variances from")
    return _noise.attempts_plan(
        campaigns,
        tables,
        target=target,
        mode=mode,
        cost_figures=campaign_figures(tables, campaigns[0]),
        tasks_available=tasks_available,
    )


def whatif_cost(figures: CampaignFigures, prices: dict[str, float]) -> WhatIfCost:
    """Agent cost recomputed from the figures' token sums at edited per-million prices; nothing is written.

    Mirrors tb_engine.pricing.cost_of: cached tokens are part of input, reasoning part of output.
    """
    tokens = figures.cost.tokens
    input_tokens = float(tokens.get("input_tokens", 0))
    cached_input = min(float(tokens.get("cached_input_tokens", 0)), input_tokens)
    output = float(tokens.get("output_tokens", 0))
    reasoning = min(float(tokens.get("reasoning_tokens", 0)), output)
    total = (
        (input_tokens - cached_input) * prices["input"]
        + cached_input * prices["cached_input"]
        + (output - reasoning) * prices["output"]
        + reasoning * prices["reasoning"]
    ) / 1_000_000

    def per(denominator: int) -> float | None:
        return total / denominator if denominator else None

    return WhatIfCost(
        agent_cost=total,
        cost_per_attempt=per(figures.cost.billed_attempts),
        cost_per_success=per(figures.cost.successes),
        cost_per_dependable_task=per(figures.all_n.count),
        stored=figures.cost,
    )


def task_counts(tables: PerTaskTables, campaign: Campaign) -> list[TaskCounts]:
    """The campaign's per-task counts in task-id order (n done, c passes, infra errors, agent cost)."""
    return [
        TaskCounts(
            task_pk=int(record["task_pk"]),
            task_id=record["task_id"],
            domain=record["domain"],
            n=int(record["n"]),
            c=int(record["c"]),
            infra_errors=int(record["infra_errors"]),
            agent_cost=float(record["agent_cost"]),
            n_attempts=campaign.n_attempts,
        )
        for record in tables.frame(campaign).to_dict("records")
    ]


def task_grid(campaigns: list[Campaign], *, domain: str = "", kind: str = "") -> list[TaskGridRow]:
    """The tasks x campaigns grid of c/N (one domain, or all), in task-id order, matching a TASK_FILTERS kind.

    One implementation for the tasks page and its export. Unknown kinds show every task.
    """
    return task_grid_versioned(campaigns, domain=domain, kind=kind)[0]


def task_grid_versioned(
    campaigns: list[Campaign], *, domain: str = "", kind: str = ""
) -> tuple[list[TaskGridRow], str]:
    """task_grid's rows (stored like every figure: a warm or fresh process does not rebuild 507 x 100
    cells) and their data version: equal versions, equal rows (the page's rendered grid is shared by it)."""
    kind = kind if kind in TASK_FILTERS else ""
    tables = per_task_tables(campaigns)
    version = hashlib.sha1(
        repr([(c.pk, tables.stamp(c), c.n_attempts) for c in campaigns]).encode()
    ).hexdigest()

    def compute() -> list[TaskGridRow]:
        frames = [filter_frame(tables.frame(campaign), domain=domain) for campaign in campaigns]
        return task_grid_rows(campaigns, frames, kind=kind)

    members = [c.pk for c in campaigns]  # in column order: the cells follow it
    rows = cached(cache_key("task-grid", 0, version, members, domain, kind), compute)
    return rows, f"{version}:{domain}:{kind}"


def attempt_strip(*, task: Task, campaigns: list[Campaign]) -> dict[int, list[Attempt]]:
    """Every attempt behind one task's c/n in the campaigns, by campaign, without the result JSON (one query)."""
    strips: dict[int, list[Attempt]] = {campaign.pk: [] for campaign in campaigns}
    for attempt in task_attempts(task_id=task.pk, campaign_ids=strips):
        strips[attempt.campaign_id].append(attempt)
    return strips
