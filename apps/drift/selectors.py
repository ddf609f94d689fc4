"""Reads of the drift app: watches a user may see, open alerts, a watch's run history (typed)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count, Prefetch, Q, QuerySet

from apps.core.access import team_condition_sql, teams_for
from apps.drift.models import Watch, WatchRun

__all__ = [
    "Compared",
    "DeltaView",
    "RunView",
    "WatchView",
    "open_alert_count",
    "run_view",
    "watch_runs",
    "watch_views",
    "watches_visible_to",
]


def watches_visible_to(user) -> QuerySet[Watch]:
    """Watches of the user's teams (all for superusers), with agent, suite, team and baseline."""
    queryset = Watch.objects.select_related("agent", "suite", "team", "owner", "baseline")
    if user.is_superuser:
        return queryset
    return queryset.filter(team__in=teams_for(user))


def open_alert_count(*, user) -> int:
    """Alerts of the user's teams' watches nobody acknowledged yet (one query).

    Written as SQL: every leaderboard request counts them, and compiling the ORM's join and team
    subquery cost more Python than the count cost PostgreSQL.
    """
    run, watch = WatchRun._meta, Watch._meta
    conditions, params = ['"r"."alert"', '"r"."acknowledged_at" IS NULL'], []
    team_condition = None if user.is_superuser else team_condition_sql(user, '"w"."team_id"')
    if team_condition is not None:
        conditions.append(team_condition[0])
        params += team_condition[1]
    sql = (
        f'SELECT COUNT(*) FROM "{run.db_table}" "r" JOIN "{watch.db_table}" "w" '
        f'ON "w"."id" = "r"."{run.get_field("watch").column}" WHERE {" AND ".join(conditions)}'
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.fetchone()[0])


@dataclass(frozen=True)
class DeltaView:
    """A watched figure of a run minus the other campaign's, with 95% interval and noise floor."""

    value: float | None
    lo: float | None
    hi: float | None
    mdd: float | None
    clears: bool | None


@dataclass(frozen=True)
class Compared:
    """A run against its baseline or its previous run."""

    campaign_id: int
    campaign: str
    tasks: int
    pass_at_1: DeltaView
    all_n: DeltaView
    levels: dict[str, dict[str, float | None]]  # metric -> {"run", "other"} on the shared tasks
    became_dependable: tuple[str, ...]
    stopped_being_dependable: tuple[str, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Compared | None:
        if not data:
            return None

        def delta(raw: dict[str, Any]) -> DeltaView:
            return DeltaView(raw["value"], raw["lo"], raw["hi"], raw["mdd"], raw["clears"])

        return cls(
            campaign_id=data["campaign_id"],
            campaign=data["campaign"],
            tasks=data["tasks"],
            pass_at_1=delta(data["pass_at_1"]),
            all_n=delta(data["all_n"]),
            levels=data.get("levels") or {},
            became_dependable=tuple(data.get("became_dependable") or ()),
            stopped_being_dependable=tuple(data.get("stopped_being_dependable") or ()),
        )


@dataclass(frozen=True)
class RunView:
    """One run as the pages, exports and API show it."""

    run: WatchRun
    figures: dict[str, Any]  # pass_at_1 / all_n: {value, lo, hi}; tasks, done_attempts, infra_errors
    vs_baseline: Compared | None
    vs_previous: Compared | None
    notes: tuple[str, ...]

    @property
    def provider_text(self) -> str:
        """The endpoint identities in a few words ("—" for agents that report none)."""
        parts = []
        for identity in self.run.provider:
            words = [identity.get("model") or "?"]
            if identity.get("system_fingerprint"):
                words.append(identity["system_fingerprint"])
            words += [f"{k}={v}" for k, v in sorted((identity.get("headers") or {}).items())]
            parts.append(" · ".join(words) + f" ({identity.get('attempts', 0)} attempts)")
        return "; ".join(parts) or "—"


def run_view(run: WatchRun) -> RunView:
    result = run.result or {}
    return RunView(
        run=run,
        figures=result.get("figures") or {},
        vs_baseline=Compared.from_json(result.get("vs_baseline")),
        vs_previous=Compared.from_json(result.get("vs_previous")),
        notes=tuple(result.get("notes") or ()),
    )


def watch_runs(watch: Watch) -> list[RunView]:
    """The watch's runs in order, with their campaigns (one query)."""
    return [
        run_view(run) for run in watch.runs.select_related("campaign", "acknowledged_by").order_by("number")
    ]


@dataclass(frozen=True)
class WatchView:
    """A row of the Drift page: the watch, its runs in order, its open alerts."""

    watch: Watch
    runs: tuple[RunView, ...]
    open_alerts: int

    @property
    def last(self) -> RunView | None:
        return self.runs[-1] if self.runs else None

    @property
    def last_evaluated(self) -> RunView | None:
        return next((r for r in reversed(self.runs) if r.run.status == WatchRun.Status.DONE), None)

    @property
    def next_run_at(self) -> datetime | None:
        return self.watch.next_run_at


def watch_views(watches: QuerySet[Watch]) -> list[WatchView]:
    """Each watch with its runs and open-alert count (three queries however many watches)."""
    runs = WatchRun.objects.select_related("campaign").order_by("number")
    rows = watches.annotate(
        open_alerts=Count("runs", filter=Q(runs__alert=True, runs__acknowledged_at__isnull=True))
    ).prefetch_related(Prefetch("runs", queryset=runs))
    return [
        WatchView(
            watch=watch, runs=tuple(run_view(run) for run in watch.runs.all()), open_alerts=watch.open_alerts
        )
        for watch in rows
    ]
