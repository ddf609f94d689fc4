"""Per-task tables (one row per campaign x task) from TaskSummary rows, and the cache they live in.

Pages never scan attempts for figures: every figure comes from TaskSummary rows (one per
campaign x task, kept current by the attempts app), loaded in a constant number of queries.

Cache keys carry each campaign's summary stamp (max updated_at, row count and the sums of the
counted columns of its TaskSummary rows), so a finished attempt changes the stamp and the next
page view recomputes; nothing needs an explicit invalidation hook.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd
from django.core.cache import cache

from apps.attempts.selectors.task_summaries import (
    STAMPED_COLUMNS,
    SUMMARY_TOKEN_COLUMNS,
    summary_changes,
    summary_counts,
)
from apps.campaigns.models import Campaign

CACHE_SECONDS = 6 * 3600
# Bumped whenever the shape of a cached value changes, so old entries are never misread
# (2: typed results instead of dicts; 3: comparisons carry their noise floor; 4: unjudged
# attempts in the frames and coverage).
CACHE_VERSION = 4

TOKEN_COLUMNS = SUMMARY_TOKEN_COLUMNS
FRAME_COLUMNS = (
    "task_pk",
    "task_id",
    "domain",
    "tags",
    "n",
    "c",
    "infra_errors",
    "unjudged",
    "clean_looking",
    "agent_cost",
    "eval_cost",
    "unpriced",
    *TOKEN_COLUMNS,
)

T = TypeVar("T")


def cache_key(kind: str, campaign_id: int, stamp: str, *parts: Any) -> str:
    raw = "|".join(str(part) for part in (kind, campaign_id, stamp, *parts))
    return f"figures:v{CACHE_VERSION}:{kind}:{campaign_id}:" + hashlib.sha1(raw.encode()).hexdigest()


# One lock per key being computed: a threaded web process (gunicorn gthread) that meets a cold key
# with many requests at once computes it once while the others wait, instead of each thread
# computing the same bootstrap under one GIL (the cold burst of bench/dashboard_concurrency.py).
_computing: dict[str, threading.Lock] = {}
_computing_guard = threading.Lock()


def cached(key: str, compute: Callable[[], T]) -> T:
    """The cached value of `key`, else compute() stored under it; concurrent callers compute it once."""
    value = cache.get(key)
    if value is not None:
        return value
    with _computing_guard:
        lock = _computing.setdefault(key, threading.Lock())
    with lock:
        value = cache.get(key)  # another thread may have stored it while this one waited
        if value is None:
            value = compute()
            cache.set(key, value, CACHE_SECONDS)
    with _computing_guard:
        if _computing.get(key) is lock and not lock.locked():
            del _computing[key]
    return value


def summary_stamps(campaign_ids: Iterable[int]) -> dict[int, str]:
    """Per campaign a token that changes whenever one of its summaries changes (one query).

    Besides max(updated_at) and the row count it folds in the sums of the counted columns:
    summary_refresh updates rows with bulk_update, which does not touch auto_now fields, so
    updated_at alone would miss a re-graded attempt.
    """
    ids = list(campaign_ids)
    stamps = dict.fromkeys(ids, "empty")
    for row in summary_changes(campaign_ids=ids):
        parts = [f"{row['latest'].timestamp():.6f}", str(row["rows"])]
        parts += [str(row[f"sum_{name}"]) for name in STAMPED_COLUMNS]
        stamps[row["campaign_id"]] = "-".join(parts)
    return stamps


def per_task_frames(campaign_ids: Iterable[int]) -> dict[int, pd.DataFrame]:
    """One per-task table per campaign (every selected task, n = c = 0 when nothing ran yet); two queries."""
    ids = list(campaign_ids)
    membership = Campaign.tasks.through.objects.filter(campaign_id__in=ids).values_list(
        "campaign_id", "task_id", "task__task_id", "task__domain__name", "task__tags"
    )
    counts = summary_counts(campaign_ids=ids)
    empty = (0, 0, 0, 0, 0, 0.0, 0.0, 0, *([0] * len(TOKEN_COLUMNS)))
    rows: dict[int, list[tuple]] = {campaign_id: [] for campaign_id in ids}
    for campaign_id, task_pk, task_id, domain, tags in membership:
        values = counts.get((campaign_id, task_pk), empty)
        rows[campaign_id].append((task_pk, task_id, domain, list(tags or []), *values))
    frames = {}
    for campaign_id, records in rows.items():
        frame = pd.DataFrame.from_records(records, columns=FRAME_COLUMNS)
        frame[["agent_cost", "eval_cost"]] = frame[["agent_cost", "eval_cost"]].astype(float)
        frames[campaign_id] = frame.sort_values("task_id", kind="stable").reset_index(drop=True)
    return frames


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


@dataclass(frozen=True)
class PerTaskTables:
    """The per-task tables of some campaigns, loaded once per request, and their cache stamps.

    Every figure selector takes one of these, so a page loads its tables once whatever it shows.
    A stamp names the task set its table holds (the health toggle's exclusions included), so each
    figure cached from a table is keyed by exactly the tasks it used.
    """

    frames: Mapping[int, pd.DataFrame]
    stamps: Mapping[int, str]

    def frame(self, campaign: Campaign) -> pd.DataFrame:
        """The campaign's per-task table: the engine's input (task_id, domain, tags, n, c, costs, tokens)."""
        return self.frames[campaign.pk]

    def stamp(self, campaign: Campaign) -> str:
        return self.stamps[campaign.pk]


def load_tables(campaigns: list[Campaign], *, exclude: frozenset[int] = frozenset()) -> PerTaskTables:
    """Per-task tables of the campaigns (cached): one query warm, three cold.

    `exclude` drops tasks by pk (the health toggle) from every table; the stamps then name the
    dropped tasks too, so each figure cached from these tables is keyed by the task set it used.
    """
    frames, stamps = _stored_frames(campaigns)
    if not exclude:
        return PerTaskTables(frames=frames, stamps=stamps)
    marker = "|without:" + ",".join(str(pk) for pk in sorted(exclude))
    return PerTaskTables(
        frames={pk: filter_frame(frame, exclude=exclude) for pk, frame in frames.items()},
        stamps={pk: stamp + marker for pk, stamp in stamps.items()},
    )


def _stored_frames(campaigns: list[Campaign]) -> tuple[dict[int, pd.DataFrame], dict[int, str]]:
    stamps = summary_stamps(c.pk for c in campaigns)
    keys = {c.pk: cache_key("frame", c.pk, stamps[c.pk]) for c in campaigns}
    found = cache.get_many(list(keys.values()))
    frames = {pk: found[key] for pk, key in keys.items() if key in found}
    missing = [pk for pk in keys if pk not in frames]
    if missing:
        fresh = per_task_frames(missing)
        cache.set_many({keys[pk]: frame for pk, frame in fresh.items()}, CACHE_SECONDS)
        frames.update(fresh)
    return frames, stamps
