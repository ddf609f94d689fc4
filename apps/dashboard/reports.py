"""Page data for the dashboard: SPEC §5 figures from per-task summaries, cached per summary stamp.

Cache keys carry each campaign's summary stamp (max updated_at and row count of its TaskSummary
rows), so a finished attempt changes the stamp and the next page view recomputes; nothing needs
an explicit invalidation hook. Intervals use the metrics package's fixed seed, so a page shows
the same numbers on every load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from django.core.cache import cache

from apps.campaigns.models import Campaign
from apps.dashboard.selectors import per_task_frames, summary_stamps
from tb_engine.metrics import campaign_metrics, paired_comparison, reversals
from tb_engine.metrics.estimators import pass_hat_k

CACHE_SECONDS = 6 * 3600
# Bumped whenever the shape of a cached value changes, so old entries are never misread.
CACHE_VERSION = 1


def _key(kind: str, campaign_id: int, stamp: str, *parts: Any) -> str:
    raw = "|".join(str(part) for part in (kind, campaign_id, stamp, *parts))
    return f"dash:v{CACHE_VERSION}:{kind}:{campaign_id}:" + hashlib.sha1(raw.encode()).hexdigest()


def load_frames(
    campaigns: list[Campaign], *, exclude: frozenset[int] = frozenset()
) -> tuple[dict[int, pd.DataFrame], dict[int, str]]:
    """Per-task tables of the campaigns (cached) and their stamps: one query warm, three cold.

    `exclude` drops tasks by pk (the health toggle) from every frame; the stamps then name the
    dropped tasks too, so each figure cached from these frames is keyed by the task set it used.
    """
    frames, stamps = _stored_frames(campaigns)
    if not exclude:
        return frames, stamps
    marker = "|without:" + ",".join(str(pk) for pk in sorted(exclude))
    return {pk: filter_frame(frame, exclude=exclude) for pk, frame in frames.items()}, {
        pk: stamp + marker for pk, stamp in stamps.items()
    }


def _stored_frames(campaigns: list[Campaign]) -> tuple[dict[int, pd.DataFrame], dict[int, str]]:
    stamps = summary_stamps(c.pk for c in campaigns)
    keys = {c.pk: _key("frame", c.pk, stamps[c.pk]) for c in campaigns}
    found = cache.get_many(list(keys.values()))
    frames = {pk: found[key] for pk, key in keys.items() if key in found}
    missing = [pk for pk in keys if pk not in frames]
    if missing:
        fresh = per_task_frames(missing)
        cache.set_many({keys[pk]: frame for pk, frame in fresh.items()}, CACHE_SECONDS)
        frames.update(fresh)
    return frames, stamps


def filter_frame(
    frame: pd.DataFrame, *, domain: str = "", tag: str = "", exclude: frozenset[int] = frozenset()
) -> pd.DataFrame:
    """Rows of one domain and/or carrying one tag (a slice averages over its tasks, SPEC §5), minus `exclude` task pks."""
    if exclude:
        frame = frame[~frame["task_pk"].isin(list(exclude))]
    if domain:
        frame = frame[frame["domain"] == domain]
    if tag:
        # astype(bool): on an empty frame apply() yields an object Series, which pandas would
        # read as a column selection and drop every column.
        frame = frame[frame["tags"].apply(lambda tags: tag in tags).astype(bool)]
    return frame.reset_index(drop=True)


def _cached(key: str, compute: Callable[[], Any]) -> Any:
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, CACHE_SECONDS)
    return value


def campaign_figures(
    campaign: Campaign,
    frame: pd.DataFrame,
    stamp: str,
    *,
    domain: str = "",
    tag: str = "",
    exclude: frozenset[int] = frozenset(),
) -> dict:
    """campaign_metrics of the (filtered) tasks plus mean tokens and unpriced attempts, cached.

    `exclude` drops tasks by pk (the triage toggle for tasks with open health issues).
    """

    def compute() -> dict:
        table = filter_frame(frame, domain=domain, tag=tag, exclude=exclude)
        figures = campaign_metrics(table, n_attempts=campaign.n_attempts)
        billed = figures["cost"]["billed_attempts"]
        tokens = int(table["input_tokens"].sum() + table["output_tokens"].sum())
        figures["mean_tokens"] = tokens / billed if billed else None
        figures["unpriced"] = int(table["unpriced"].sum())
        figures["tokens_eval"] = int(table["eval_tokens"].sum())
        return figures

    excluded = ",".join(str(pk) for pk in sorted(exclude))
    return _cached(_key("figures", campaign.pk, stamp, campaign.n_attempts, domain, tag, excluded), compute)


def leaderboard_rows(
    campaigns: list[Campaign], *, domain: str = "", tag: str = "", exclude: frozenset[int] = frozenset()
) -> list[dict]:
    """One row per campaign with every leaderboard figure and its reversal partners."""
    frames, stamps = load_frames(campaigns)
    rows = []
    for campaign in campaigns:
        figures = campaign_figures(
            campaign, frames[campaign.pk], stamps[campaign.pk], domain=domain, tag=tag, exclude=exclude
        )
        rows.append({"campaign": campaign, "m": figures, "reversed_with": []})
    _mark_reversals(rows)
    return rows


def _mark_reversals(rows: list[dict]) -> None:
    by_label = {}
    for row in rows:
        m = row["m"]
        if m["pass_at_n_observed"]["value"] is not None and m["all_n"]["value"] is not None:
            by_label[str(row["campaign"].pk)] = (m["pass_at_n_observed"]["value"], m["all_n"]["value"])
    names = {str(row["campaign"].pk): row["campaign"].name for row in rows}
    index = {str(row["campaign"].pk): row for row in rows}
    for x, y in reversals(by_label):
        index[x]["reversed_with"].append(names[y])
        index[y]["reversed_with"].append(names[x])


def _value(estimate: dict | None) -> float | None:
    return None if estimate is None else estimate.get("value")


# Sort keys of the leaderboard: column -> value getter (None sorts last either way).
LEADERBOARD_SORTS: dict[str, Callable[[dict], Any]] = {
    "name": lambda row: row["campaign"].name.lower(),
    "pass1": lambda row: _value(row["m"]["pass_at_1"]),
    "pass5": lambda row: _value(row["m"]["pass_at_k"].get(5)),
    "pass10": lambda row: _value(row["m"]["pass_at_k"].get(10)),
    "passn": lambda row: _value(row["m"]["pass_at_k"].get(row["m"]["n_attempts"])),
    "hat5": lambda row: _value(row["m"]["pass_hat_k"].get(5)),
    "hatn": lambda row: _value(row["m"]["pass_hat_k"].get(row["m"]["n_attempts"])),
    "observed": lambda row: _value(row["m"]["pass_at_n_observed"]),
    "alln": lambda row: _value(row["m"]["all_n"]),
    "gap": lambda row: row["m"]["gap_pp"]["value"],
    "tokens": lambda row: row["m"]["mean_tokens"],
    "cost_attempt": lambda row: row["m"]["cost"]["cost_per_attempt"],
    "cost_success": lambda row: row["m"]["cost"]["cost_per_success"],
    "cost_dependable": lambda row: row["m"]["cost"]["cost_per_dependable_task"],
    "infra": lambda row: row["m"]["coverage"]["infra_errors"],
}


def sort_rows(rows: list[dict], *, key: str, descending: bool) -> list[dict]:
    """Rows sorted by a LEADERBOARD_SORTS column; rows without a value go last in both directions."""
    getter = LEADERBOARD_SORTS[key]
    present = [row for row in rows if getter(row) is not None]
    absent = [row for row in rows if getter(row) is None]
    return sorted(present, key=getter, reverse=descending) + absent


def pass_hat_curves(campaign: Campaign, frame: pd.DataFrame, stamp: str) -> dict[str, list[float | None]]:
    """Unbiased pass^k for k = 1..N, overall ("all") and per domain; mean over tasks with n >= k."""

    def compute() -> dict[str, list[float | None]]:
        curves = {}
        groups = [("all", frame)] + [(str(name), group) for name, group in frame.groupby("domain", sort=True)]
        for name, group in groups:
            n, c = group["n"].to_numpy(), group["c"].to_numpy()
            values = []
            for k in range(1, campaign.n_attempts + 1):
                per_task = pass_hat_k(n, c, k) if len(group) else np.zeros(0)
                kept = per_task[~np.isnan(per_task)]
                values.append(float(kept.mean()) if kept.size else None)
            curves[name] = values
        return curves

    return _cached(_key("curves", campaign.pk, stamp, campaign.n_attempts), compute)


def domain_table(campaign: Campaign, frame: pd.DataFrame, stamp: str) -> pd.DataFrame:
    """Per domain: pass@1, pass@N observed and all-N share (point estimates), cached."""

    def compute() -> pd.DataFrame:
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
        return grouped.reset_index()

    return _cached(_key("domains", campaign.pk, stamp, campaign.n_attempts), compute)


def comparison(a: Campaign, b: Campaign, frames: dict[int, pd.DataFrame], stamps: dict[int, str]) -> dict:
    """paired_comparison of A minus B on shared tasks (same N required), cached per stamp pair."""
    if a.n_attempts != b.n_attempts:
        raise ValueError(
            f"campaigns have different N ({a.n_attempts} vs {b.n_attempts}); all-N is not comparable"
        )

    def compute() -> dict:
        return paired_comparison(frames[a.pk], frames[b.pk], n_attempts=a.n_attempts)

    return _cached(_key("compare", a.pk, stamps[a.pk], b.pk, stamps[b.pk]), compute)


def whatif_cost(
    frame: pd.DataFrame, prices: dict[str, float], *, all_n_count: int, successes: int, billed: int
) -> dict:
    """Agent cost recomputed from stored token sums at edited per-million prices; nothing is written.

    Mirrors tb_engine.pricing.cost_of: cached tokens are part of input, reasoning part of output.
    """
    input_tokens = float(frame["input_tokens"].sum())
    cached = min(float(frame["cached_input_tokens"].sum()), input_tokens)
    output = float(frame["output_tokens"].sum())
    reasoning = min(float(frame["reasoning_tokens"].sum()), output)
    total = (
        (input_tokens - cached) * prices["input"]
        + cached * prices["cached_input"]
        + (output - reasoning) * prices["output"]
        + reasoning * prices["reasoning"]
    ) / 1_000_000

    def per(denominator: int) -> float | None:
        return total / denominator if denominator else None

    return {
        "agent_cost": total,
        "cost_per_attempt": per(billed),
        "cost_per_success": per(successes),
        "cost_per_dependable_task": per(all_n_count),
    }
