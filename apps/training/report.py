"""Before/after a training run: two campaigns on the same tasks, read through the dashboard's reports.

The figures are the dashboard's (campaign_metrics via reports.campaign_figures, paired_comparison
via reports.comparison, per-domain shares via reports.domain_table); this module only arranges
them as the source article's table, per-domain deltas and the tasks that moved.
"""

from __future__ import annotations

from typing import Any

from apps.campaigns.models import Campaign
from apps.dashboard import reports


def _headline(figures: dict) -> dict[str, Any]:
    return {
        "pass_at_1": figures["pass_at_1"]["value"],
        "pass_at_n": figures["pass_at_n_observed"]["value"],
        "all_n_count": figures["all_n"]["count"],
        "all_n_share": figures["all_n"]["value"],
        "cost_per_dependable": figures["cost"]["cost_per_dependable_task"],
        "agent_cost": figures["cost"]["agent_cost"],
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
    frames, stamps = reports.load_frames([base, trained])
    comparison = reports.comparison(trained, base, frames, stamps)  # A = trained, B = base
    if comparison["only_in_a"] or comparison["only_in_b"]:
        raise ValueError(
            f"the campaigns ran different tasks ({len(comparison['only_in_a'])} only in {trained.name}, "
            f"{len(comparison['only_in_b'])} only in {base.name}); a before/after report needs the same tasks"
        )
    before = _headline(reports.campaign_figures(base, frames[base.pk], stamps[base.pk]))
    after = _headline(reports.campaign_figures(trained, frames[trained.pk], stamps[trained.pk]))
    domains_before = reports.domain_table(base, frames[base.pk], stamps[base.pk]).set_index("domain")
    domains_after = reports.domain_table(trained, frames[trained.pk], stamps[trained.pk]).set_index("domain")
    domains = []
    for name in sorted(set(domains_before.index) | set(domains_after.index)):
        cells = []
        for metric in ("pass_at_1", "pass_at_n", "all_n"):
            b, a = domains_before[metric].get(name), domains_after[metric].get(name)
            cells.append(
                {
                    "metric": metric,
                    "before": b,
                    "after": a,
                    "delta_pp": None if a is None or b is None else (a - b) * 100,
                }
            )
        domains.append({"domain": name, "cells": cells})
    task_pks = dict(zip(frames[base.pk]["task_id"], frames[base.pk]["task_pk"]))
    moved = [
        {**task, "task_pk": int(task_pks[task["task_id"]])}
        for task in comparison["per_task"]
        if task["task_id"] in comparison["gained"] or task["task_id"] in comparison["lost"]
    ]
    return {
        "before": before,
        "after": after,
        "delta": {
            key: (None if before[key] is None or after[key] is None else after[key] - before[key])
            for key in ("pass_at_1", "pass_at_n", "all_n_count", "all_n_share")
        },
        "n_attempts": base.n_attempts,
        "tasks": comparison["tasks"],
        "delta_pass_at_1": comparison["delta_pass_at_1"],
        "delta_all_n": comparison["delta_all_n"],
        "gained": [t for t in moved if t["task_id"] in comparison["gained"]],
        "lost": [t for t in moved if t["task_id"] in comparison["lost"]],
        # Solved at least once before, never after: the coverage side of sharpening.
        "coverage_lost": [
            {**t, "task_pk": int(task_pks[t["task_id"]])}
            for t in comparison["per_task"]
            if t["c_b"] >= 1 and t["c_a"] == 0
        ],
        "sharpening": comparison["sharpening"],
        "domains": domains,
        "per_task": [{**t, "task_pk": int(task_pks[t["task_id"]])} for t in comparison["per_task"]],
    }
