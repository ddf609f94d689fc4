"""Reads worth a name for campaigns."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

import redis
from django.db.models import QuerySet
from django.utils import timezone

from apps.agents.models import PriceSheet
from apps.attempts.selectors.faults import campaign_fault_figures, campaign_task_counts, fault_figure_rows
from apps.attempts.selectors.progress import (
    StatusCounts,
    attempt_pace,
    attempts_ended_since,
    campaigns_with_status_counts,
    status_counts,
)
from apps.attempts.selectors.token_averages import done_attempt_token_averages
from apps.campaigns.models import Campaign
from apps.core.access import team_condition_sql, teams_for
from apps.core.endpoint_load import EndpointLoad, endpoint_loads
from apps.core.joined_rows import JoinedRows
from apps.core.models import WorkerHeartbeat
from apps.suites.models import Task
from tb_engine.llm.config import EndpointConfig
from tb_engine.llm.gate import endpoint_key
from tb_engine.metrics.faults import paired_delta
from tb_engine.pricing import cost_of
from tb_engine.results import DiffItem
from tb_engine.transcript import Usage

# Campaign foreign keys figure_campaign_rows can load with each campaign (select_related's choice).
CAMPAIGN_RELATED = ("agent", "suite", "team", "owner", "price_sheet")
_campaign_reads: dict[tuple[str, ...], JoinedRows[Campaign]] = {}


def figure_campaign_rows(
    user, *, related: tuple[str, ...], ids: Iterable[int] | None = None
) -> list[Campaign]:
    """`campaigns_visible_to(user).select_related(*related)` (optionally only `ids`), newest first
    (created_at, then pk, descending): the same rows and loaded relations, read by SQL built once per
    process (apps.core.joined_rows). Every figure page starts here, and compiling the ORM query (up to
    six joined tables and the team subquery) was ~a tenth of a warm leaderboard request's Python.
    """
    if any(name not in CAMPAIGN_RELATED for name in related):
        raise ValueError(f"related must be among {CAMPAIGN_RELATED}, got {related}")
    wanted = None if ids is None else sorted({int(pk) for pk in ids})
    if wanted == []:
        return []
    conditions, params = [], []
    team_condition = None if user.is_superuser else team_condition_sql(user, '"b"."team_id"')
    if team_condition is not None:
        conditions.append(team_condition[0])
        params += team_condition[1]
    if wanted is not None:
        conditions.append(f'"b"."id" IN ({", ".join(["%s"] * len(wanted))})')
        params += wanted
    reads = _campaign_reads.get(related)
    if reads is None:
        reads = _campaign_reads.setdefault(related, JoinedRows(Campaign, related))
    return reads.fetch(" AND ".join(conditions), params, order_by='"b"."created_at" DESC, "b"."id" DESC')


def campaign_name_taken(*, team, name: str) -> bool:
    """Whether the team already has a campaign of that name."""
    return Campaign.objects.filter(team=team, name=name).exists()


def campaign_non_discriminating_tasks(*, campaign: Campaign) -> list[Task]:
    """The campaign's tasks whose validation says non-discriminating (run, and flagged on its page)."""
    return list(
        campaign.tasks.filter(validation=Task.Validation.NON_DISCRIMINATING)
        .select_related("domain")
        .order_by("task_id")
    )


def campaigns_visible_to(user) -> QuerySet[Campaign]:
    """Campaigns of the user's teams (all of them for superusers)."""
    queryset = Campaign.objects.select_related("agent", "suite", "team", "owner")
    if user.is_superuser:
        return queryset
    return queryset.filter(team__in=teams_for(user))


@dataclass(frozen=True)
class CampaignProgress:
    total: int
    queued: int
    running: int
    done: int
    infra_error: int
    cancelled: int
    passed: int
    unjudged: int  # done, but a rubric could not be judged: excluded from the pass rate (SPEC §2)
    throughput_per_min: float  # attempts finished over the last minute
    eta_seconds: float | None

    @property
    def judged(self) -> int:
        return self.done - self.unjudged

    @property
    def finished(self) -> int:
        """Attempts that ran to an end (graded or infra error); cancelled attempts never ran."""
        return self.done + self.infra_error

    @property
    def planned(self) -> int:
        """Attempts the campaign still means to run: every attempt but the cancelled ones."""
        return self.total - self.cancelled

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.judged if self.judged else None

    @property
    def percent(self) -> float:
        return 100.0 * self.finished / self.planned if self.planned else 0.0

    @classmethod
    def of(cls, campaign: Campaign, counts: StatusCounts, *, ended_last_minute: int) -> CampaignProgress:
        """The progress of counts taken now, with attempts that ended over the last minute as throughput.

        A run younger than the window is measured over its own age: 3 attempts in a run's first 5 s
        are 36 a minute, not 3 (issue 30: an early ETA ten times too long).
        """
        remaining = counts.queued + counts.running
        window = THROUGHPUT_WINDOW.total_seconds()
        if campaign.started_at is not None:
            age = (timezone.now() - campaign.started_at).total_seconds()
            window = max(1.0, min(window, age))
        rate = ended_last_minute / window
        return cls(
            total=counts.total,
            queued=counts.queued,
            running=counts.running,
            done=counts.done,
            infra_error=counts.infra_error,
            cancelled=counts.cancelled,
            passed=counts.passed,
            unjudged=counts.unjudged,
            throughput_per_min=rate * 60.0,
            eta_seconds=remaining / rate if rate > 0 and campaign.is_active else None,
        )


# Throughput is measured over the last minute (CampaignProgress.throughput_per_min).
THROUGHPUT_WINDOW = timedelta(seconds=60)


def campaign_progress(*, campaign: Campaign) -> CampaignProgress:
    """Counts by status, pass rate so far, recent throughput and ETA — two queries."""
    counts = status_counts(campaign_id=campaign.pk)
    recent = attempts_ended_since(campaign_id=campaign.pk, since=timezone.now() - THROUGHPUT_WINDOW)
    return CampaignProgress.of(campaign, counts, ended_last_minute=recent)


# The live figures' ETA: completions over the last few minutes, when there are enough of them.
PACE_WINDOW = timedelta(minutes=5)
MIN_RECENT_COMPLETIONS = 5


@dataclass(frozen=True)
class LiveEndpoint:
    """A model endpoint the campaign calls, the roles that call it, its cap and its load now."""

    endpoint: str
    roles: tuple[str, ...]  # "agent", "user simulator", "judge"
    cap: int | None  # requests in flight across all workers (None: no cap)
    load: EndpointLoad | None  # None: no figures (embedded broker, or Redis did not answer)

    def to_dict(self) -> dict[str, Any]:
        """The endpoint with its load's figures (each None when there are no figures)."""
        load = self.load.to_dict() if self.load else dict.fromkeys(LOAD_FIGURES)
        return {**load, "endpoint": self.endpoint, "roles": list(self.roles), "cap": self.cap}


LOAD_FIGURES = (
    "in_flight",
    "waiting",
    "paused_s",
    "calls",
    "errors",
    "rate_limited",
    "error_rate",
    "rate_limited_rate",
    "latency_p50_ms",
    "latency_p95_ms",
    "minutes",
)


@dataclass(frozen=True)
class CampaignLive:
    """What a running campaign is doing now: attempts in flight, its endpoints' load, an ETA."""

    in_flight: int  # attempts running now
    remaining: int  # queued or running
    # "live"; "embedded" (no Redis: the embedded broker); "unavailable" (Redis did not answer);
    # "none" (the campaign calls no model endpoint: golden, simulated, scripted, keyword).
    endpoint_figures: str
    ended_recently: int  # over PACE_WINDOW
    mean_attempt_s: float | None
    eta_seconds: float | None
    eta_basis: str  # "recent completions", "in flight / mean attempt duration" or ""
    endpoints: tuple[LiveEndpoint, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "in_flight": self.in_flight,
            "remaining": self.remaining,
            "endpoint_figures": self.endpoint_figures,
            "ended_recently": self.ended_recently,
            "pace_window_s": PACE_WINDOW.total_seconds(),
            "mean_attempt_s": self.mean_attempt_s,
            "eta_seconds": self.eta_seconds,
            "eta_basis": self.eta_basis,
            "endpoints": [endpoint.to_dict() for endpoint in self.endpoints],
        }


def campaign_endpoints(campaign: Campaign) -> list[tuple[str, str, int | None]]:
    """(endpoint, role, cap) of each model endpoint the campaign calls, as the engine names them."""
    found = []
    agent = campaign.agent
    if agent.kind == agent.Kind.OPENAI:
        parameters = agent.parameters or {}
        base_url = agent.base_url or parameters.get("base_url") or EndpointConfig.base_url
        found.append((base_url, "agent", parameters.get("max_concurrency") or agent.max_concurrency))
    for role, config in (("user simulator", campaign.user_simulator), ("judge", campaign.judge)):
        if (config or {}).get("kind") == "llm" and config.get("base_url"):
            found.append((config["base_url"], role, config.get("max_concurrency")))
    return [(endpoint_key(base_url), role, cap) for base_url, role, cap in found]


def campaign_live(*, campaign: Campaign, progress: CampaignProgress) -> CampaignLive:
    """The running campaign's live figures (one query, and two Redis round trips when the broker is Redis).

    ETA: the attempts left over the completion rate of the last PACE_WINDOW; with fewer than
    MIN_RECENT_COMPLETIONS completions in it, over in flight / mean attempt duration instead.
    """
    now = timezone.now()
    pace = attempt_pace(campaign_id=campaign.pk, since=now - PACE_WINDOW)
    remaining = progress.queued + progress.running
    eta, basis = None, ""
    if campaign.is_active and remaining:
        elapsed = min(PACE_WINDOW, now - (campaign.started_at or now - PACE_WINDOW)).total_seconds()
        if pace.ended_recently >= MIN_RECENT_COMPLETIONS and elapsed > 0:
            eta, basis = remaining * elapsed / pace.ended_recently, "recent completions"
        elif progress.running and pace.mean_seconds:
            eta, basis = remaining * pace.mean_seconds / progress.running, "in flight / mean attempt duration"

    roles: dict[str, list[str]] = {}
    caps: dict[str, int | None] = {}
    for endpoint, role, cap in campaign_endpoints(campaign):
        roles.setdefault(endpoint, []).append(role)
        known = caps.get(endpoint)
        caps[endpoint] = cap if known is None else min(known, cap or known)  # the smaller cap wins
    loads: dict[str, EndpointLoad] | None = None
    figures = "none"
    if roles:
        try:
            loads = endpoint_loads(list(roles))
            figures = "embedded" if loads is None else "live"
        except redis.RedisError:
            figures = "unavailable"
    return CampaignLive(
        in_flight=progress.running,
        remaining=remaining,
        endpoint_figures=figures,
        ended_recently=pace.ended_recently,
        mean_attempt_s=pace.mean_seconds,
        eta_seconds=eta,
        eta_basis=basis,
        endpoints=tuple(
            LiveEndpoint(
                endpoint=endpoint,
                roles=tuple(names),
                cap=caps[endpoint],
                load=None if loads is None else loads[endpoint],
            )
            for endpoint, names in roles.items()
        ),
    )


@dataclass(frozen=True)
class CampaignListRow:
    """A campaign with its progress, for the operations view of the campaign list."""

    campaign: Campaign
    progress: CampaignProgress


def campaign_list_rows(*, user, limit: int = 200) -> list[CampaignListRow]:
    """The user's campaigns, newest first, each with counts by status, throughput and ETA (one query)."""
    rows = campaigns_with_status_counts(
        campaigns_visible_to(user), ended_since=timezone.now() - THROUGHPUT_WINDOW, limit=limit
    )
    return [
        CampaignListRow(
            campaign=campaign, progress=CampaignProgress.of(campaign, counts, ended_last_minute=recent)
        )
        for campaign, counts, recent in rows
    ]


def workers_alive() -> int:
    """Celery workers that beat recently: with none, queued attempts wait (one query)."""
    return WorkerHeartbeat.alive_count()


# One-line headlines of stored diff items: the attempt page, the triage queue's "what went wrong".
def singular(table: str) -> str:
    """'tickets' -> 'ticket', 'policies' -> 'policy' (for one-line diff headlines)."""
    if table.endswith("ies"):
        return table[:-3] + "y"
    if table.endswith("s") and not table.endswith("ss"):
        return table[:-1]
    return table


def _short(value) -> str:
    if value is None:
        return "absent"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def diff_headline(item: DiffItem | Mapping[str, Any]) -> str:
    """One line a reader takes in at a glance, e.g. 'ticket 20 · status: solved (golden: hold)'.

    ``item`` is a diff item, or one as stored in a result (``DiffItem.to_dict()``, e.g. the first
    one a page's query took from the JSON column). That one is built into a DiffItem, not checked
    with ``from_dict``: a headline is shown for whatever the stored item holds.
    """
    if not isinstance(item, DiffItem):
        item = DiffItem(**item)
    subject = f"{singular(item.table)} {item.key}"
    if item.field:
        return f"{subject} · {item.field}: {_short(item.result)} (golden: {_short(item.golden)})"
    result = "row present" if item.result is not None else "row absent"
    golden = "present" if item.golden is not None else "absent"
    return f"{subject} · {result} (golden: {golden})"


@dataclass(frozen=True)
class LaunchEstimate:
    """What a launch would run and roughly cost, before it runs: tasks × N attempts at a price sheet.

    The per-attempt tokens are the averages of stored finished attempts: the agent's own on this
    suite when it has any, else every agent's on the suite (`basis` says which, with how many).
    """

    tasks: int
    n_attempts: int
    attempts: int
    simulated: bool
    sheet: str
    basis: str
    sample: int
    per_attempt: Decimal | None
    unpriced_model: str

    @property
    def total(self) -> Decimal | None:
        return None if self.per_attempt is None else self.per_attempt * self.attempts


def launch_estimate(*, agent, suite, tasks, n_attempts: int, price_sheet=None) -> LaunchEstimate:
    """The launch form's estimate (two queries: the price sheet and one token average)."""
    tasks, attempts = len(tasks), len(tasks) * n_attempts
    sheet = price_sheet or PriceSheet.objects.order_by("-effective_date", "-pk").first()
    base = {
        "tasks": tasks,
        "n_attempts": n_attempts,
        "attempts": attempts,
        "sheet": str(sheet) if sheet else "",
    }
    if agent.is_simulation:
        return LaunchEstimate(
            **base, simulated=True, basis="", sample=0, per_attempt=Decimal(0), unpriced_model=""
        )
    own = done_attempt_token_averages(suite_id=suite.pk, agent_id=agent.pk)
    row, basis = (
        (own, "this agent's")
        if own.sample
        else (done_attempt_token_averages(suite_id=suite.pk), "every agent's")
    )
    if not row.sample or sheet is None:
        return LaunchEstimate(
            **base, simulated=False, basis=basis, sample=row.sample, per_attempt=None, unpriced_model=""
        )
    usage = Usage(
        input_tokens=round(row.input_tokens or 0),
        cached_input_tokens=round(row.cached_input_tokens or 0),
        output_tokens=round(row.output_tokens or 0),
        reasoning_tokens=round(row.reasoning_tokens or 0),
    )
    cost = cost_of(usage, agent.model, sheet.as_price_list())
    return LaunchEstimate(
        **base,
        simulated=False,
        basis=basis,
        sample=row.sample,
        per_attempt=cost,
        unpriced_model=agent.model if cost is None else "",
    )


@dataclass(frozen=True)
class CampaignRobustness:
    """A fault-plan campaign's robustness section: its per-kind figures from the stored fault records
    and, against its paired clean campaign, Δpass@1 and Δall-N with the noise floor (docs/faults.md)."""

    plan: dict[str, Any]
    figures: dict[str, Any]  # tb_engine.metrics.faults.fault_figures
    rows: list[dict[str, Any]]  # one per kind that fired (apps.attempts.selectors.faults.fault_figure_rows)
    clean: Campaign | None  # the paired clean campaign (same agent, suite, tasks, seed and N; no plan)
    delta: dict[str, Any] | None  # tb_engine.metrics.faults.paired_delta, faulted minus clean


def is_paired_clean(*, faulted: Campaign, clean: Campaign) -> bool:
    """Whether ``clean`` runs ``faulted``'s configuration without a plan: same agent, suite, seed, N and
    tasks, so the attempts meet the same tasks in the same order and only the faults differ."""
    same_setup = (clean.agent_id, clean.suite_id, clean.seed, clean.n_attempts) == (
        faulted.agent_id,
        faulted.suite_id,
        faulted.seed,
        faulted.n_attempts,
    )
    if not same_setup or clean.fault_plan or clean.pk == faulted.pk:
        return False
    memberships = Campaign.tasks.through.objects.filter(campaign_id__in=(faulted.pk, clean.pk))
    tasks: dict[int, set[int]] = {faulted.pk: set(), clean.pk: set()}
    for campaign_id, task_id in memberships.values_list("campaign_id", "task_id"):
        tasks[campaign_id].add(task_id)
    return tasks[faulted.pk] == tasks[clean.pk]


def paired_clean_campaign(*, campaign: Campaign, user) -> Campaign | None:
    """The newest finished campaign the user may see that is ``campaign`` without its fault plan."""
    candidates = (
        campaigns_visible_to(user)
        .filter(
            agent_id=campaign.agent_id,
            suite_id=campaign.suite_id,
            seed=campaign.seed,
            n_attempts=campaign.n_attempts,
            fault_plan={},
            status=Campaign.Status.DONE,
        )
        .exclude(pk=campaign.pk)
        .order_by("-finished_at", "-pk")[:10]
    )
    return next((c for c in candidates if is_paired_clean(faulted=campaign, clean=c)), None)


def campaign_robustness(
    *, campaign: Campaign, user, clean: Campaign | None = None
) -> CampaignRobustness | None:
    """The robustness section of a fault-plan campaign (None without a plan). ``clean``, when it is a
    paired clean campaign, is the one compared with; otherwise the newest paired one is looked up."""
    if not campaign.fault_plan:
        return None
    figures = campaign_fault_figures(campaign_id=campaign.pk)
    if clean is None or not is_paired_clean(faulted=campaign, clean=clean):
        clean = paired_clean_campaign(campaign=campaign, user=user)
    delta = None
    if clean is not None:
        delta = paired_delta(
            campaign_task_counts(campaign_id=campaign.pk),
            campaign_task_counts(campaign_id=clean.pk),
            n_attempts=campaign.n_attempts,
        )
    return CampaignRobustness(
        plan=campaign.fault_plan, figures=figures, rows=fault_figure_rows(figures), clean=clean, delta=delta
    )


def robustness_export_rows(*, campaign: Campaign, robustness: CampaignRobustness) -> list[dict[str, Any]]:
    """The robustness section as flat rows (CSV/XLSX and API): one per fault kind that fired, each
    carrying the campaign's duplicate-effect rate, its planned-but-not-fired count and its Δ against
    the paired clean campaign; a campaign where nothing fired yet still has one row (kind "")."""
    figures, delta = robustness.figures, robustness.delta or {}
    duplicate = figures["duplicate_effect"]
    shared = {
        "campaign_id": campaign.pk,
        "campaign": campaign.name,
        "graded": figures["graded"],
        "planned_not_fired": figures["none_fired"],
        "unfired_ordinals": figures["unfired_ordinals"],
        "pass_at_1_under_faults": figures["pass_at_1"],
        "all_n_under_faults": figures["all_n"],
        "duplicate_effect_count": duplicate["count"],
        "duplicate_effect_of": duplicate["of"],
        "duplicate_effect_rate": duplicate["rate"],
        "duplicate_effect_lo": duplicate["lo"],
        "duplicate_effect_hi": duplicate["hi"],
        "clean_campaign_id": robustness.clean.pk if robustness.clean else None,
        "delta_pass_at_1": (delta.get("pass_at_1") or {}).get("delta"),
        "mdd_pass_at_1": (delta.get("pass_at_1") or {}).get("mdd"),
        "delta_all_n": (delta.get("all_n") or {}).get("delta"),
        "mdd_all_n": (delta.get("all_n") or {}).get("mdd"),
    }
    empty_kind = dict.fromkeys(
        ("fired", "recovered", "recovery_rate", "recovery_lo", "recovery_hi", "duplicate_effects")
    )
    kinds = robustness.rows or [{"kind": "", **empty_kind}]
    return [{**shared, **row} for row in kinds]
