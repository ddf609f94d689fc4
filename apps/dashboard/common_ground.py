"""Common ground for ranking campaigns that did not run the same tasks or the same N (issue 30).

All-N over 12 tasks with N = 3 is easier than all-N over 56 tasks with N = 20: ranking such
campaigns on their own figures would rank the easier test, not the better agent. When the ranked
campaigns differ in task set or N, this module restricts every one of them to the tasks all of
them ran and to the smallest N among them (the common k), and recomputes from the stored per-task
counts with the engine's metric function: pass@1 and pass^k (the unbiased chance that k attempts
in a row all pass, SPEC §5) over the common tasks. It never changes how figures are stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from django.db.models import Count

from apps.campaigns.models import Campaign
from apps.figures import selectors as figures
from tb_engine.metrics import campaign_metrics


@dataclass(frozen=True)
class GroundFigure:
    value: float | None
    lo: float | None
    hi: float | None


@dataclass(frozen=True)
class GroundRow:
    """One campaign's figures on the common ground, and its place in the common-ground ranking."""

    campaign: Campaign
    own_tasks: int
    pass_at_1: GroundFigure
    pass_hat_k: GroundFigure
    rank: str  # "1", "2", "=2" (equal figures share a rank), "—" without a figure


@dataclass(frozen=True)
class CommonGround:
    """Whether the campaigns are comparable as they stand and, where not, what they are ranked on."""

    comparable: bool
    tasks: tuple[str, ...]  # task ids every campaign ran (in the slice)
    k: int  # the smallest N among the campaigns
    kinds: tuple[tuple[int, int, tuple[str, ...]], ...]  # (N, tasks, campaign names) per distinct test
    rows: dict[int, GroundRow]

    @property
    def summary(self) -> str:
        """One sentence saying what is compared (the page's notice, the exports' caption)."""
        if self.comparable:
            return ""
        tests = "; ".join(
            f"{', '.join(names)}: {tasks} task{'s' if tasks != 1 else ''}, N = {n}"
            for n, tasks, names in self.kinds
        )
        if not self.tasks:
            return (
                f"These campaigns ran different tests ({tests}) and share no task, so they are not ranked "
                "against each other."
            )
        return (
            f"These campaigns ran different tests ({tests}). They are ranked on common ground: the "
            f"{len(self.tasks)} task{'s' if len(self.tasks) != 1 else ''} all of them ran and k = {self.k} "
            f"attempts (the smallest N), by pass^{self.k} (all {self.k} attempts pass), then pass@1, over those tasks."
        )


def _slice(frame: pd.DataFrame, *, domain: str, tag: str) -> pd.DataFrame:
    if domain:
        frame = frame[frame["domain"] == domain]
    if tag:
        frame = frame[frame["tags"].apply(lambda tags: tag in (tags or []))]
    return frame


def _figure(raw: dict) -> GroundFigure:
    return GroundFigure(raw.get("value"), raw.get("lo"), raw.get("hi"))


def common_ground(
    campaigns: Sequence[Campaign],
    *,
    domain: str = "",
    tag: str = "",
    exclude: frozenset[int] = frozenset(),
    tables: figures.PerTaskTables | None = None,
) -> CommonGround:
    """The ranked campaigns' common ground over the slice; `comparable` when they ran one test already.

    Campaigns without any task in the slice are left out (they have nothing to rank). Whether they
    ran one test is decided from their task memberships and N (two queries over the memberships, once
    per data version — their stamps, the campaigns' N and names — then stored with the figures), so
    the usual leaderboard — one suite, one N — never loads a per-task table here; otherwise the
    ranking is computed from the tables once per data version and stored the same way.
    """
    campaigns = list(campaigns)
    if tables is None:  # else the caller's (the leaderboard's rows read the same campaigns' tables)
        tables = figures.per_task_tables(campaigns, exclude=exclude)
    # The stamps name each campaign's counts and suite revision; its task memberships are fixed when
    # it is created (a suite revision that drops a task changes the suite's stamp). N and names are
    # in the kinds the notice lists.
    version = "|".join(f"{c.pk}:{tables.stamp(c)}:{c.n_attempts}:{c.name}" for c in campaigns)
    parts = (tuple(c.pk for c in campaigns), domain, tag, tables.scope)
    # In a 1-tuple: a stored None would read as "not stored" and cost the membership scan every time.
    (same,) = figures.cached_figure(
        "one-test", version, lambda: (_one_test(campaigns, domain=domain, tag=tag, exclude=exclude),), *parts
    )
    if same is not None:
        return _bound(same, campaigns)
    stored = figures.cached_figure(
        "ground", version, lambda: _computed(campaigns, tables, domain=domain, tag=tag), *parts
    )
    return _bound(stored, campaigns)


def _one_test(
    campaigns: list[Campaign], *, domain: str, tag: str, exclude: frozenset[int]
) -> _StoredGround | None:
    """The comparable common ground (stored form) when every campaign with a task in the slice ran the same tasks at the
    same N, else None (then only the tables tell). Two queries, no table.

    Exact without comparing sets: when each campaign's count of tasks in the slice equals the number
    of distinct tasks all of them ran there, every campaign ran all of those tasks.
    """
    membership = Campaign.tasks.through.objects.filter(campaign_id__in=[c.pk for c in campaigns])
    if exclude:
        membership = membership.exclude(task_id__in=list(exclude))
    if domain:
        membership = membership.filter(task__domain__name=domain)
    # The tags are read only when a tag is asked: otherwise a JSON decode per task on every leaderboard.
    tag_column = ("task__tags",) if tag else ()
    tasks = {
        row[0]: str(row[1])
        for row in membership.order_by().values_list("task_id", "task__task_id", *tag_column).distinct()
        if not tag or tag in (row[2] or [])
    }
    counts = {
        row["campaign_id"]: row["count"]
        for row in (membership.filter(task_id__in=list(tasks)) if tag else membership)
        .order_by()
        .values("campaign_id")
        .annotate(count=Count("id"))
    }
    present = [c for c in campaigns if counts.get(c.pk)]
    if not present:
        return _StoredGround(True, (), 0, (), ())
    if len({c.n_attempts for c in present}) > 1 or any(counts[c.pk] != len(tasks) for c in present):
        return None
    kind = (present[0].n_attempts, len(tasks), tuple(c.name for c in present))
    return _StoredGround(True, tuple(sorted(tasks.values())), 0, (kind,), ())


@dataclass(frozen=True)
class _StoredGround:
    """A CommonGround as stored (plain data: campaigns by pk), bound to the request's campaigns on reading."""

    comparable: bool
    tasks: tuple[str, ...]
    k: int
    kinds: tuple[tuple[int, int, tuple[str, ...]], ...]
    rows: tuple[
        tuple[int, int, GroundFigure, GroundFigure, str], ...
    ]  # (pk, own tasks, pass@1, pass^k, rank)


def _bound(stored: _StoredGround, campaigns: list[Campaign]) -> CommonGround:
    by_pk = {c.pk: c for c in campaigns}
    rows = {pk: GroundRow(by_pk[pk], own, p1, hat, rank) for pk, own, p1, hat, rank in stored.rows}
    return CommonGround(stored.comparable, stored.tasks, stored.k, stored.kinds, rows)


def _computed(campaigns: list[Campaign], tables, *, domain: str, tag: str) -> _StoredGround:
    frames = {c.pk: _slice(tables.frame(c), domain=domain, tag=tag) for c in campaigns}
    present = [c for c in campaigns if len(frames[c.pk])]
    task_sets = {c.pk: frozenset(str(t) for t in frames[c.pk]["task_id"]) for c in present}
    kinds: dict[tuple[int, frozenset[str]], list[str]] = {}
    for campaign in present:
        kinds.setdefault((campaign.n_attempts, task_sets[campaign.pk]), []).append(campaign.name)
    described = tuple(
        sorted(((n, len(ids), tuple(names)) for (n, ids), names in kinds.items()), reverse=True)
    )
    if len(kinds) <= 1:
        return _StoredGround(True, tuple(sorted(next(iter(kinds))[1])) if kinds else (), 0, described, ())
    shared = frozenset.intersection(*task_sets.values())
    k = min(c.n_attempts for c in present)
    computed: dict[int, tuple[GroundFigure, GroundFigure]] = {}
    nothing = GroundFigure(None, None, None)
    for campaign in present:
        if not shared:  # no task in common: nothing to compute, nobody ranked
            computed[campaign.pk] = (nothing, nothing)
            continue
        frame = frames[campaign.pk]
        table = frame[frame["task_id"].astype(str).isin(shared)].reset_index(drop=True)
        raw = campaign_metrics(table, n_attempts=campaign.n_attempts, ks=(1, k))
        computed[campaign.pk] = (_figure(raw["pass_at_1"]), _figure(raw["pass_hat_k"].get(k, {})))

    def order(campaign: Campaign) -> tuple[float, float]:
        p1, hat = computed[campaign.pk]
        return (
            -(hat.value if hat.value is not None else -1.0),
            -(p1.value if p1.value is not None else -1.0),
        )

    ranked = sorted(present, key=lambda c: (order(c), c.name.lower())) if shared else list(present)
    ranks: dict[int, str] = {}
    previous: tuple[float, float] | None = None
    place = 0
    for position, campaign in enumerate(ranked, start=1):
        hat = computed[campaign.pk][1]
        if not shared or hat.value is None:
            label = "—"
        elif previous == order(campaign):
            label = f"={place}"
        else:
            place, previous, label = position, order(campaign), str(position)
        ranks[campaign.pk] = label
    shared_places = {rank[1:] for rank in ranks.values() if rank.startswith("=")}
    rows = tuple(  # the first of equal campaigns shares the "=" too
        (
            c.pk,
            len(task_sets[c.pk]),
            *computed[c.pk],
            f"={ranks[c.pk]}" if ranks[c.pk] in shared_places else ranks[c.pk],
        )
        for c in ranked
    )
    return _StoredGround(False, tuple(sorted(shared)), k, described, rows)


def ranked_order(ground: CommonGround, rows: list) -> list:
    """Leaderboard rows in common-ground order (rows without a common-ground figure last, as they were)."""
    if ground.comparable:
        return rows
    position = {pk: i for i, pk in enumerate(ground.rows)}
    return sorted(rows, key=lambda row: position.get(row.campaign.pk, len(position)))
