"""Before/after a training run: two campaigns on the same tasks, read through the figures app.

The figures are the figures app's (campaign_figures = campaign_metrics, comparison =
paired_comparison, domain_figures); this module only arranges them as the source article's table,
per-domain deltas and the tasks that moved.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from apps.campaigns.models import Campaign
from apps.figures.selectors import (
    DOMAIN_METRICS,
    CampaignFigures,
    campaign_figures,
    comparison,
    domain_figures,
    per_task_tables,
)


def _headline(figures: CampaignFigures) -> dict[str, Any]:
    return {
        "pass_at_1": figures.pass_at_1.value,
        "pass_at_n": figures.pass_at_n_observed.value,
        "all_n_count": figures.all_n.count,
        "all_n_share": figures.all_n.value,
        "cost_per_dependable": figures.cost.cost_per_dependable_task,
        "agent_cost": figures.cost.agent_cost,
    }


def strip_rows(strips: dict[int, list], campaigns: list[Campaign]) -> list[dict[str, Any]]:
    """Per campaign its attempt strip and how many done attempts left a forbidden side effect (extra_effect)."""
    rows = []
    for campaign in campaigns:
        attempts = strips[campaign.pk]
        done = [a for a in attempts if a.status == "done"]
        violations = sum(1 for a in done if "extra_effect" in (a.categories or []))
        rows.append(
            {
                "campaign": campaign,
                "attempts": attempts,
                "done": len(done),
                "violations": violations,
                "passes": sum(1 for a in done if a.verdict == "pass"),
            }
        )
    return rows


def before_after(*, base: Campaign, trained: Campaign) -> dict[str, Any]:
    """Headline rows for both, deltas, per-domain deltas, tasks gained/lost and the sharpening flag."""
    if base.pk == trained.pk:
        raise ValueError("pick two different campaigns (base and trained)")
    tables = per_task_tables([base, trained])
    compared = comparison(tables, trained, base)  # A = trained, B = base
    if compared.only_in_a or compared.only_in_b:
        raise ValueError(
            f"the campaigns ran different tasks ({len(compared.only_in_a)} only in {trained.name}, "
            f"{len(compared.only_in_b)} only in {base.name}); a before/after report needs the same tasks"
        )
    before = _headline(campaign_figures(tables, base))
    after = _headline(campaign_figures(tables, trained))
    domains_before = {d.domain: d for d in domain_figures(tables, base)}
    domains_after = {d.domain: d for d in domain_figures(tables, trained)}
    domains = []
    for name in sorted(set(domains_before) | set(domains_after)):
        cells = []
        for metric in DOMAIN_METRICS:
            b = domains_before[name].share(metric) if name in domains_before else None
            a = domains_after[name].share(metric) if name in domains_after else None
            cells.append(
                {
                    "metric": metric,
                    "before": b,
                    "after": a,
                    "delta_pp": None if a is None or b is None else (a - b) * 100,
                }
            )
        domains.append({"domain": name, "cells": cells})
    task_pks = dict(zip(tables.frame(base)["task_id"], tables.frame(base)["task_pk"]))
    per_task = [{**asdict(task), "task_pk": int(task_pks[task.task_id])} for task in compared.per_task]
    return {
        "before": before,
        "after": after,
        "delta": {
            key: (None if before[key] is None or after[key] is None else after[key] - before[key])
            for key in ("pass_at_1", "pass_at_n", "all_n_count", "all_n_share")
        },
        "n_attempts": base.n_attempts,
        "tasks": compared.tasks,
        "delta_pass_at_1": compared.delta_pass_at_1,
        "delta_all_n": compared.delta_all_n,
        "gained": [t for t in per_task if t["task_id"] in compared.gained],
        "lost": [t for t in per_task if t["task_id"] in compared.lost],
        # Solved at least once before, never after: the coverage side of sharpening.
        "coverage_lost": [t for t in per_task if t["c_b"] >= 1 and t["c_a"] == 0],
        "sharpening": compared.sharpening,
        "domains": domains,
        "per_task": per_task,
    }
