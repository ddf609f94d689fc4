"""Per-task tables (one row per campaign x task) from TaskSummary rows, and the cache they live in.

Pages never scan attempts for figures: every figure comes from TaskSummary rows (one per
campaign x task, kept current by the attempts app), loaded in a constant number of queries.

Cache keys carry each campaign's summary stamp (max updated_at, row count and the sums of the
counted columns of its TaskSummary rows), so a finished attempt changes the stamp and the next
page view recomputes; nothing needs an explicit invalidation hook.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import pandas as pd
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from apps.attempts.selectors.summary_stamps import campaign_summary_stamps
from apps.attempts.selectors.task_summaries import (
    SUMMARY_TOKEN_COLUMNS,
    summary_counts,
)
from apps.campaigns.models import Campaign
from apps.figures.models import StoredFigure

logger = logging.getLogger(__name__)

# Bumped whenever the shape of a cached value changes, so old entries are never misread
# (2: typed results instead of dicts; 3: comparisons carry their noise floor; 4: unjudged
# attempts in the frames and coverage; 5: slot#version keys, stored in StoredFigure rows;
# 6: campaign figures carry their coverage bounds).
CACHE_VERSION = 6

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
    """`slot#version`: the slot names the figure (kind, campaign, parameters), the version the data it reads.

    `stamp` is everything the value depends on that can change (summary stamps, N, names); `parts`
    what tells one figure of the campaign from another (a slice, a second campaign). A new stamp
    keeps the slot, so storing the new value replaces the old row (apps.figures.models).
    """
    params = hashlib.sha1(repr(parts).encode()).hexdigest()[:24]
    version = hashlib.sha1(str(stamp).encode()).hexdigest()
    return f"v{CACHE_VERSION}:{kind}:{campaign_id}:{params}#{version}"


def _split(key: str) -> tuple[str, str, int]:
    """(slot, version, campaign id) of a cache_key; a plain key is its own slot at version ""."""
    slot, _, version = key.partition("#")
    fields = slot.split(":")
    campaign_id = int(fields[2]) if len(fields) > 3 and fields[2].isdigit() else 0
    return slot, version, campaign_id


class ProcessFigures:
    """This process's figures by key, least recently used dropped first; values kept as objects.

    Not Django's cache: LocMemCache pickles every value on set and unpickles it on every get (a
    sixth of a warm leaderboard request's CPU in bench/dashboard_concurrency.py) and holds 300
    entries, fewer than 100 campaigns' tables and figures. Keys carry the exact data version, so an
    entry is never stale; values are frozen dataclasses and tables nobody mutates (filter_frame
    copies). What other processes computed comes from the stored rows (StoredFigure).
    """

    def __init__(self, entries: int) -> None:
        self._entries = entries
        self._values: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        with self._lock:
            found = {key: self._values[key] for key in keys if key in self._values}
            for key in found:
                self._values.move_to_end(key)
            return found

    def set_many(self, values: Mapping[str, Any]) -> None:
        with self._lock:
            self._values.update(values)
            for key in values:
                self._values.move_to_end(key)
            while len(self._values) > self._entries:
                self._values.popitem(last=False)

    def set(self, key: str, value: Any) -> None:
        self.set_many({key: value})

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


# 100 campaigns x (table, figures, curves, domains, noise, a few slices) fit many times over; a
# table of 507 tasks is about 100 kB, a figures value a few kB.
process_figures = ProcessFigures(entries=int(getattr(settings, "FIGURES_PROCESS_ENTRIES", 4000)))


def forget_process_figures() -> None:
    """Empty this process's figures (what a fresh server process starts with; tests use it)."""
    process_figures.clear()


def stored_values(keys: Iterable[str]) -> dict[str, Any]:
    """The stored values of these keys whose rows hold the keys' versions (one query)."""
    wanted = {_split(key)[0]: key for key in keys}
    if not wanted:
        return {}
    rows = StoredFigure.objects.filter(slot__in=list(wanted)).values_list("slot", "version", "value")
    found = {}
    for slot, version, value in rows:
        key = wanted[slot]
        if _split(key)[1] == version:
            found[key] = pickle.loads(value)  # written by store_values below, never from a user's input
    return found


def store_values(values: Mapping[str, Any]) -> None:
    """Store each value in its slot with its version, replacing what the slot held (one statement).

    A failure to write (a read-only replica, a lock timeout) leaves the page its computed value:
    the next reader computes again. Inside a savepoint, so the request's transaction survives it.
    """
    if not values:
        return
    now = timezone.now()
    rows = []
    for key in sorted(values):  # one order for every writer: concurrent upserts cannot deadlock
        slot, version, campaign_id = _split(key)
        rows.append(
            StoredFigure(
                slot=slot,
                campaign_id=campaign_id,
                version=version,
                value=pickle.dumps(values[key], protocol=pickle.HIGHEST_PROTOCOL),
                computed_at=now,
            )
        )
    try:
        with transaction.atomic():
            StoredFigure.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["slot"],
                update_fields=["campaign_id", "version", "value", "computed_at"],
            )
    except DatabaseError:
        logger.warning("stored figures not written (%d slots)", len(rows), exc_info=True)


def preload(keys: Iterable[str]) -> None:
    """Bring the stored values of `keys` missing from this process's cache into it (one query).

    Called before a loop that asks `cached` for many keys, so a cold process reads them in one
    query instead of one per key.
    """
    wanted = list(dict.fromkeys(keys))
    present = process_figures.get_many(wanted)
    missing = [key for key in wanted if key not in present]
    found = stored_values(missing)
    if found:
        process_figures.set_many(found)


# One lock per key being computed: a threaded web process (gunicorn gthread) that meets a cold key
# with many requests at once computes it once while the others wait, instead of each thread
# computing the same bootstrap under one GIL (the cold burst of bench/dashboard_concurrency.py).
_computing: dict[str, threading.Lock] = {}
_computing_guard = threading.Lock()


def cached(key: str, compute: Callable[[], T]) -> T:
    """The value of `key`: from this process's cache, else its stored row at the key's version, else
    compute() — stored for every process and kept here. Concurrent callers of a process compute it once."""
    value = process_figures.get(key)
    if value is not None:
        return value
    with _computing_guard:
        lock = _computing.setdefault(key, threading.Lock())
    with lock:
        value = process_figures.get(key)  # another thread may have stored it while this one waited
        if value is None:
            value = stored_values([key]).get(key)
            if value is None:
                value = compute()
                store_values({key: value})
            process_figures.set(key, value)
    with _computing_guard:
        if _computing.get(key) is lock and not lock.locked():
            del _computing[key]
    return value


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


class PerTaskTables:
    """The per-task tables of some campaigns for one request, and their cache stamps.

    Every figure selector takes one of these, so a page loads its tables once whatever it shows —
    and only when a figure is not stored at the current stamps: the tables are read on the first
    `frame()` (every campaign's at once, from this process's cache, the stored rows, or the
    summaries). A stamp names the task set its table holds (the health toggle's exclusions
    included), so each figure cached from a table is keyed by exactly the tasks it used.
    """

    def __init__(
        self, campaigns: list[Campaign], stamps: Mapping[int, str], *, exclude: frozenset[int] = frozenset()
    ) -> None:
        self._campaigns = list(campaigns)
        self._exclude = exclude
        self._frames: dict[int, pd.DataFrame] | None = None
        marker = "|without:" + ",".join(str(pk) for pk in sorted(exclude)) if exclude else ""
        self.stamps: Mapping[int, str] = {pk: stamp + marker for pk, stamp in stamps.items()}
        # The task set in a figure's slot too: the full set's stored rows and those without the
        # excluded tasks live side by side instead of replacing each other.
        self.scope = marker
        # Kinds of stored figure already read for every campaign of these tables (see
        # selectors.preload_campaign_figures): a page asking one campaign at a time still reads
        # them in one query.
        self.preloaded: set[str] = set()
        self._plain_stamps = dict(stamps)

    @property
    def campaigns(self) -> list[Campaign]:
        return self._campaigns

    @property
    def frames(self) -> Mapping[int, pd.DataFrame]:
        if self._frames is None:
            frames = _stored_frames(self._campaigns, self._plain_stamps)
            if self._exclude:
                frames = {pk: filter_frame(frame, exclude=self._exclude) for pk, frame in frames.items()}
            self._frames = frames
        return self._frames

    def frame(self, campaign: Campaign) -> pd.DataFrame:
        """The campaign's per-task table: the engine's input (task_id, domain, tags, n, c, costs, tokens)."""
        return self.frames[campaign.pk]

    def stamp(self, campaign: Campaign) -> str:
        return self.stamps[campaign.pk]


def load_tables(campaigns: list[Campaign], *, exclude: frozenset[int] = frozenset()) -> PerTaskTables:
    """Per-task tables of the campaigns: one query (their stamps) now, the tables when first read.

    `exclude` drops tasks by pk (the health toggle) from every table; the stamps then name the
    dropped tasks too, so each figure cached from these tables is keyed by the task set it used.
    """
    return PerTaskTables(campaigns, campaign_summary_stamps(c.pk for c in campaigns), exclude=exclude)


def _stored_frames(campaigns: list[Campaign], stamps: Mapping[int, str]) -> dict[int, pd.DataFrame]:
    """Each campaign's table from this process's cache, else its stored row, else the summaries (then stored)."""
    keys = {c.pk: cache_key("frame", c.pk, stamps[c.pk]) for c in campaigns}
    found = process_figures.get_many(keys.values())
    frames = {pk: found[key] for pk, key in keys.items() if key in found}
    stored = stored_values(key for pk, key in keys.items() if pk not in frames)
    frames.update({pk: stored[key] for pk, key in keys.items() if key in stored})
    missing = [pk for pk in keys if pk not in frames]
    fresh = per_task_frames(missing) if missing else {}
    store_values({keys[pk]: frame for pk, frame in fresh.items()})
    frames.update(fresh)
    process_figures.set_many({keys[pk]: frame for pk, frame in frames.items() if keys[pk] not in found})
    return frames
