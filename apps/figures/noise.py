"""Noise floors of stored campaigns (SPEC §9): leaderboard bands, per-campaign floors, replicate sets, plans.

Everything is computed by tb_engine.metrics.noise / .planner from the same per-task tables every
figure uses, and cached under the tables' summary stamps, so a finished attempt changes the key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from apps.campaigns.models import Campaign
from apps.figures.results import (
    Band,
    CampaignNoise,
    DomainRanking,
    MetricNoise,
    Plan,
    PlanInputs,
    ReplicateSet,
    ReplicateSpread,
)
from apps.figures.tables import PerTaskTables, cache_key, cached, filter_frame
from tb_engine.metrics import noise, planner

NOISE_METRICS = noise.NOISE_METRICS
METRIC_LABELS = noise.METRIC_LABELS
# The leaderboard's sort keys that rank by a figure with a noise floor.
SORT_METRICS = {"pass1": "pass_at_1", "hat5": "pass_hat_5", "hatn": "pass_hat_n", "alln": "all_n"}


def _group_key(kind: str, campaigns: Sequence[Campaign], tables: PerTaskTables, *parts) -> str:
    # The slot: the kind, the set of campaigns and the parameters; the version: their stamps, N and
    # names and statuses (bands name their leader; a replicate set says whether it is complete).
    stamps = "|".join(f"{c.pk}:{tables.stamp(c)}:{c.n_attempts}:{c.name}:{c.status}" for c in campaigns)
    digest = hashlib.sha1(stamps.encode()).hexdigest()
    return cache_key(kind, 0, digest, sorted(c.pk for c in campaigns), tables.scope, *parts)


def _arrays(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        frame["task_id"].to_numpy(dtype=object),
        frame["n"].to_numpy(dtype=np.int64),
        frame["c"].to_numpy(dtype=np.int64),
    )


def slice_floors(
    campaigns: Sequence[Campaign], frames: Sequence[pd.DataFrame]
) -> dict[str, noise.PairwiseFloors]:
    """Per noise metric, the paired floors of every pair of the campaigns over their (sliced) tables."""
    tables = [(*_arrays(frame), campaign.n_attempts) for campaign, frame in zip(campaigns, frames)]
    floors = {}
    for metric in NOISE_METRICS:
        _, values = noise.union_values(tables, metric=metric)
        comparable = noise.comparable_pairs([c.n_attempts for c in campaigns], metric=metric)
        floors[metric] = noise.pairwise_floors(values, comparable=comparable)
    return floors


def bands_for(campaigns: Sequence[Campaign], floors: noise.PairwiseFloors, *, metric: str) -> dict[int, Band]:
    """Band per campaign pk, ranking by the metric's point values (best first, ties in name order)."""
    positions = [i for i in range(len(campaigns)) if not np.isnan(floors.point[i])]
    order = sorted(positions, key=lambda i: (-floors.point[i], campaigns[i].name.lower(), campaigns[i].pk))
    numbers = noise.tied_bands(order, floors)
    ranks = noise.competition_ranks(order, numbers)
    leaders: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for index in order:
        leaders.setdefault(numbers[index], index)
        sizes[numbers[index]] = sizes.get(numbers[index], 0) + 1
    bands = {}
    for index in order:
        number = numbers[index]
        leader = leaders[number]
        rank, shared = ranks[index]
        is_leader = leader == index
        bands[campaigns[index].pk] = Band(
            metric=metric,
            number=number,
            rank=rank,
            shared=shared,
            size=sizes[number],
            leader=campaigns[leader].name,
            delta_to_leader=None if is_leader else float(floors.delta[index, leader]),
            mdd_to_leader=None
            if is_leader or np.isnan(floors.mdd[index, leader])
            else float(floors.mdd[index, leader]),
        )
    return bands


def leaderboard_noise(
    campaigns: Sequence[Campaign], tables: PerTaskTables, *, domain: str, tag: str, metric: str
) -> tuple[dict[int, Band], dict[int, dict[str, float | None]]]:
    """Bands by `metric` and each campaign's SE per noise metric over the slice (cached per stamps)."""

    def compute():
        frames = [filter_frame(tables.frame(c), domain=domain, tag=tag) for c in campaigns]
        floors = slice_floors(campaigns, frames)
        ses = {
            c.pk: {m: (None if np.isnan(floors[m].se[i]) else float(floors[m].se[i])) for m in NOISE_METRICS}
            for i, c in enumerate(campaigns)
        }
        return bands_for(campaigns, floors[metric], metric=metric), ses

    return cached(_group_key("bands", campaigns, tables, domain, tag, metric), compute)


def domain_rankings(
    campaigns: Sequence[Campaign], tables: PerTaskTables, *, metric: str = "pass_at_1"
) -> list[DomainRanking]:
    """Per domain (by name), the campaigns ranked by `metric` with tied bands (cached per stamps)."""

    def compute():
        domains = sorted({str(d) for c in campaigns for d in tables.frame(c)["domain"]})
        rankings = []
        for name in domains:
            present = [c for c in campaigns if (tables.frame(c)["domain"] == name).any()]
            frames = [filter_frame(tables.frame(c), domain=name) for c in present]
            floors = slice_floors(present, frames)[metric]
            bands = bands_for(present, floors, metric=metric)
            ordered = sorted(
                range(len(present)),
                key=lambda i: (
                    bands[present[i].pk].number if present[i].pk in bands else 10**9,
                    -(floors.point[i] if not np.isnan(floors.point[i]) else -1),
                    present[i].name.lower(),
                ),
            )
            rankings.append(
                DomainRanking(
                    domain=name,
                    metric=metric,
                    rows=tuple(
                        (
                            present[i],
                            None if np.isnan(floors.point[i]) else float(floors.point[i]),
                            bands.get(present[i].pk),
                        )
                        for i in ordered
                    ),
                )
            )
        return rankings

    return cached(_group_key("domain-bands", campaigns, tables, metric), compute)


def campaign_noise(tables: PerTaskTables, campaign: Campaign) -> CampaignNoise:
    """SE and rerun floor per scope (every task, then each domain) and metric, cached per stamp."""

    def compute() -> CampaignNoise:
        report = noise.noise_report(tables.frame(campaign), n_attempts=campaign.n_attempts)
        return CampaignNoise(
            campaign=campaign,
            scopes={
                scope: tuple(
                    MetricNoise(metric=metric, label=METRIC_LABELS[metric], **entry)
                    for metric, entry in metrics.items()
                )
                for scope, metrics in report.items()
            },
        )

    return cached(noise_key(tables, campaign), compute)


def noise_key(tables: PerTaskTables, campaign: Campaign) -> str:
    """The key of the campaign's noise report (its name and status show in it)."""
    return cache_key(
        "noise",
        campaign.pk,
        f"{tables.stamp(campaign)}|{campaign.n_attempts}|{campaign.name}|{campaign.status}",
        tables.scope,
    )


def replicate_set(root: Campaign, members: Sequence[Campaign], tables: PerTaskTables) -> ReplicateSet:
    """The set's spread per figure (members in the given order), cached per their stamps."""

    def compute() -> ReplicateSet:
        spread = noise.replicate_spread(
            [(*_arrays(tables.frame(member)), member.n_attempts) for member in members]
        )
        return ReplicateSet(
            root=root,
            members=tuple(members),
            spreads=tuple(
                ReplicateSpread(
                    metric=metric,
                    label=METRIC_LABELS[metric],
                    **{**entry, "values": tuple(entry["values"])},
                )
                for metric, entry in spread.items()
            ),
            complete=all(member.status == Campaign.Status.DONE for member in members),
        )

    return cached(_group_key("replicates", members, tables, root.pk), compute)


def attempts_plan(
    campaigns: Sequence[Campaign],
    tables: PerTaskTables,
    *,
    target: float,
    mode: str,
    cost_figures,
    tasks_available: int,
    attempt_options: Sequence[int] = planner.ATTEMPT_OPTIONS,
) -> Plan:
    """The plan for detecting `target` (share) from the campaigns' observed variances.

    `mode` is "drift" (one configuration re-run: σ²_task = 0) or "ab" (two configurations: σ²_task
    from the campaigns' pairs, so at least two campaigns on shared tasks are needed). The first
    campaign is the pilot: its design, its cost per attempt (`cost_figures`, its CampaignFigures).
    """
    if mode not in planner.MODES:
        raise ValueError(f"mode: choose one of {', '.join(planner.MODES)}")
    frames = [tables.frame(c) for c in campaigns]
    components = planner.variance_components(frames)
    pilot, pilot_frame = campaigns[0], frames[0]
    cost = cost_figures.cost
    priced = cost.agent_cost is not None and not cost_figures.unpriced and cost.billed_attempts
    per_attempt = (cost.agent_cost + (cost.eval_cost or 0.0)) / cost.billed_attempts if priced else None
    sheet = pilot.price_sheet
    task_var = 0.0 if mode == "drift" else components.task
    pilot_tasks = int((pilot_frame["n"] > 0).sum())
    inputs = PlanInputs(
        target=target,
        mode=mode,
        attempt_var=components.attempt,
        task_var=task_var,
        campaigns=components.campaigns,
        pairs=components.pairs,
        tasks_available=tasks_available,
        cost_per_attempt=per_attempt,
        price_source=f"{sheet.name} ({sheet.effective_date})" if sheet and per_attempt is not None else "",
        pilot_tasks=pilot_tasks,
        pilot_attempts=pilot.n_attempts,
        pilot_mdd=None
        if components.attempt is None or task_var is None or pilot_tasks == 0
        else planner.mdd(pilot_tasks, pilot.n_attempts, attempt_var=components.attempt, task_var=task_var),
    )
    if components.attempt is None:
        return Plan(inputs, (), None, "the pilot campaign has no finished attempt yet")
    if task_var is None:
        return Plan(
            inputs,
            (),
            None,
            "an A/B plan needs two campaigns that ran the same tasks, to see how much per-task "
            "differences vary; pick a second campaign (or plan a drift check)",
        )
    rows = planner.plan(
        target,
        attempt_var=components.attempt,
        task_var=task_var,
        tasks_available=tasks_available,
        cost_per_attempt=per_attempt,
        attempt_options=sorted({*attempt_options, pilot.n_attempts}),
    )
    return Plan(inputs, tuple(rows), planner.cheapest(rows), "")
