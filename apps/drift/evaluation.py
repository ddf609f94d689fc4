"""What a finished watch run shows: its figures, Δ against the baseline and the previous run with the
noise floor, per-task flips, the endpoint identities, and the alert reasons (plain JSON for the row)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from apps.attempts.selectors.providers import provider_identity_lists
from apps.campaigns.models import Campaign
from apps.figures import selectors as figures

# The figures a watch follows; each compared run checks both against the floor.
WATCHED = (("pass_at_1", "pass@1", "delta_pass_at_1"), ("all_n", "all-N share", "delta_all_n"))


def provider_identities(campaign: Campaign) -> list[dict[str, Any]]:
    """Distinct endpoint identities over the campaign's attempts, most attempts first (one query)."""
    counts: Counter[tuple] = Counter()
    examples: dict[tuple, dict[str, Any]] = {}
    for identities in provider_identity_lists(campaign_id=campaign.pk):
        for identity in identities or []:
            key = (
                identity.get("model"),
                identity.get("system_fingerprint"),
                tuple(sorted((identity.get("headers") or {}).items())),
            )
            counts[key] += 1
            examples[key] = identity
    return [
        {
            "model": key[0],
            "system_fingerprint": key[1],
            "headers": dict(key[2]),
            "attempts": count,
        }
        for key, count in sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))
    ]


def identity_keys(identities: list[dict[str, Any]]) -> set[tuple]:
    """Comparable keys of stored identities (model, fingerprint, headers)."""
    return {
        (i.get("model"), i.get("system_fingerprint"), tuple(sorted((i.get("headers") or {}).items())))
        for i in identities
    }


def _delta(comparison: figures.Comparison, key: str) -> dict[str, Any]:
    delta = getattr(comparison, key)
    return {
        "value": delta.value,
        "lo": delta.lo,
        "hi": delta.hi,
        "se": delta.se,
        "mdd": delta.mdd,
        "clears": delta.clears,
    }


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _compared(comparison: figures.Comparison, other: Campaign) -> dict[str, Any]:
    per_task = comparison.per_task
    return {
        "campaign_id": other.pk,
        "campaign": other.name,
        "tasks": comparison.tasks,
        # Both sides' figures on the shared tasks (the other side is the chart's reference level).
        "levels": {
            "pass_at_1": {"run": comparison.pass_at_1.a, "other": comparison.pass_at_1.b},
            "all_n": {
                "run": _share([t.dependable_a for t in per_task]),
                "other": _share([t.dependable_b for t in per_task]),
            },
        },
        **{metric: _delta(comparison, key) for metric, _, key in WATCHED},
        # Flips of dependability (solved in every attempt) between the two runs, by task id.
        "became_dependable": list(comparison.gained),
        "stopped_being_dependable": list(comparison.lost),
    }


def evaluate(campaign: Campaign, *, baseline: Campaign | None, previous: Campaign | None) -> dict[str, Any]:
    """The run's figures and its comparisons (None where there is nothing to compare with)."""
    others = [c for c in (baseline, previous) if c is not None and c.pk != campaign.pk]
    tables = figures.per_task_tables([campaign, *others])
    own = figures.campaign_figures(tables, campaign)
    result: dict[str, Any] = {
        "figures": {
            "pass_at_1": {"value": own.pass_at_1.value, "lo": own.pass_at_1.lo, "hi": own.pass_at_1.hi},
            "all_n": {"value": own.all_n.value, "lo": own.all_n.lo, "hi": own.all_n.hi},
            "tasks": own.coverage.tasks,
            "done_attempts": own.coverage.done_attempts,
            "infra_errors": own.coverage.infra_errors,
        },
        "vs_baseline": None,
        "vs_previous": None,
        "notes": [],
    }
    for label, other in (("vs_baseline", baseline), ("vs_previous", previous)):
        if other is None or other.pk == campaign.pk:
            continue
        try:
            result[label] = _compared(figures.comparison(tables, campaign, other), other)
        except ValueError as exc:  # different N
            result["notes"].append(f"{label.replace('_', ' ')}: {exc}")
    return result


def alert_reasons(result: dict[str, Any]) -> list[str]:
    """One line per watched figure whose change against the baseline or the previous run clears the floor."""
    reasons = []
    for label, name in (("vs_baseline", "baseline"), ("vs_previous", "previous run")):
        compared = result.get(label)
        if not compared:
            continue
        for metric, title, _ in WATCHED:
            delta = compared[metric]
            if delta["clears"]:
                reasons.append(
                    f"{title} {delta['value'] * 100:+.1f} pp vs {name} ({compared['campaign']}), "
                    f"95% interval {delta['lo'] * 100:+.1f} to {delta['hi'] * 100:+.1f}, "
                    f"noise floor {delta['mdd'] * 100:.1f} pp"
                )
    return reasons
