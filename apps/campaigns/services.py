"""Writes for campaigns: the campaign lifecycle, the only code that writes the Campaign table.

A campaign is created as a draft, started (its attempts queued through apps.attempts.services),
*dispatched* through a per-campaign sliding window so a small campaign is never starved behind a
huge one, finished once nothing is in flight, cancelled, resumed, replicated, imported or (when
adaptive) extended by its dispatcher. The attempts themselves — claim, record, sweep — are
apps.attempts'; this module asks it for every write on their tables.

Messages are sent by task name (RUN_ATTEMPT_TASK in apps.attempts, ADAPTIVE_DISPATCH_TASK here):
this app never imports the worker or the adaptive app that run them.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.agents.models import AgentConfig, PriceSheet
from apps.attempts.selectors import attempt_counts_by_task, attempts_in_flight, attempts_in_window
from apps.attempts.services import (
    ImportRow,
    Recorded,
    attempts_add,
    attempts_cancel_queued,
    attempts_dispatch,
    attempts_import,
    attempts_import_rows,
    attempts_queue,
    attempts_requeue_unfinished,
    attempts_resend_lost,
    attempts_sweep,
    summary_refresh,
)
from apps.campaigns.evaluators import EvaluatorConfigError, evaluator_configs
from apps.campaigns.models import Campaign
from apps.suites.models import Suite, Task
from tb_engine.faults import FaultPlan, FaultPlanError
from tb_engine.irt.adaptive import AdaptiveConfig
from tb_engine.results import AttemptResult
from tb_engine.version import HARNESS_VERSION
from thinkingbox_web.celery import app as celery_app

__all__ = [
    "SWEEP_TASK",
    "RESEND_LOST_TASK",
    "ADAPTIVE_DISPATCH_TASK",
    "EvaluatorConfigError",
    "NotReplicable",
    "Extension",
    "TaskCounts",
    "evaluator_configs",
    "campaign_after_record",
    "campaign_hand_on",
    "campaign_cancel",
    "campaign_create",
    "campaign_dispatch",
    "campaign_extend",
    "campaign_finish_if_complete",
    "campaign_import",
    "campaign_replicate",
    "campaign_resume",
    "campaign_start",
    "campaign_window",
    "campaigns_resend_lost",
    "campaigns_sweep",
    "campaigns_wait",
    "replicate_root",
]

log = logging.getLogger(__name__)

# Celery task names, registered by apps.worker.tasks (which imports these constants; the attempt's
# own, RUN_ATTEMPT_TASK, is apps.attempts').
SWEEP_TASK = "worker.sweep"
# Sent by the worker each time it (re)connects to the broker (thinkingbox_web.celery).
RESEND_LOST_TASK = "worker.resend_lost"
# Registered by apps.adaptive.tasks: decides an adaptive campaign's next attempts (idempotent).
ADAPTIVE_DISPATCH_TASK = "adaptive.dispatch"
# Registered by apps.figures.tasks: stores a settled campaign's figures before anyone opens a page
# (claimed per campaign, so a duplicate message is harmless).
FIGURES_REFRESH_TASK = "figures.refresh"
# Registered by apps.triage.tasks: the grouped triage scopes of a campaign's teams stored once its
# failure signatures and counts settled (a finish, a cancel, a signature backfill).
CLUSTERS_STORE_TASK = "triage.clusters_store"


def campaign_create(
    *,
    name: str,
    team,
    owner,
    agent: AgentConfig,
    suite: Suite,
    tasks: Iterable[Task] | None = None,
    n_attempts: int = 20,
    seed: int = 0,
    user_simulator: dict | None = None,
    judge: dict | None = None,
    price_sheet: PriceSheet | None = None,
    adaptive: dict | None = None,
    exclude_non_discriminating: bool = False,
    window: int | None = None,
    fault_plan: dict | None = None,
) -> Campaign:
    """Create a draft campaign over ``tasks`` (default: every gradable task of the suite).

    ``user_simulator`` / ``judge`` (default scripted / keyword) are checked and stored in their
    normal form (apps.campaigns.evaluators); a bad one raises EvaluatorConfigError (a ValueError).
    ``adaptive`` (None: a full campaign) makes it an adaptive campaign: options of the engine's
    ``AdaptiveConfig`` (budget_share, target_se, …; its n_attempts is the campaign's N) plus
    ``calibration`` (an id, or None for the suite's latest calibration for the team, pinned when
    the campaign starts). ``window`` (None: TB_CAMPAIGN_DEFAULT_WINDOW) bounds the attempts queued
    or running at once (``campaign_window``). Side effects: one Campaign row and its task
    selection. Invalid tasks are never selected; non-discriminating ones are (flagged wherever
    tasks are listed) unless ``exclude_non_discriminating``, which the campaign records with how
    many it left out. ``fault_plan`` (None or {}: none) is a tb_engine.faults.FaultPlan in its JSON
    form, checked and stored normalised; every attempt's tool calls then run under it. Raises
    ValueError naming a bad option (a bad fault plan: FaultPlanError, whose message starts "fault plan").
    """
    if n_attempts < 1:
        raise ValueError("n_attempts must be at least 1")
    if window is not None and window < 1:
        raise ValueError("window must be at least 1")
    user_simulator, judge = evaluator_configs(user=user_simulator, judge=judge)
    plan = fault_plan_normalised(fault_plan)
    options = _adaptive_options(adaptive, n_attempts) if adaptive is not None else {}
    selected = list(tasks) if tasks is not None else list(suite.tasks.all())
    selected = [t for t in selected if t.is_gradable]
    excluded = [t for t in selected if exclude_non_discriminating and t.is_non_discriminating]
    selected = [t for t in selected if not (exclude_non_discriminating and t.is_non_discriminating)]
    if not selected:
        left_out = f" ({len(excluded)} non-discriminating left out)" if excluded else ""
        raise ValueError(f"no gradable tasks selected from suite {suite.name}{left_out}")
    with transaction.atomic():
        campaign = Campaign.objects.create(
            name=name,
            team=team,
            owner=owner,
            agent=agent,
            suite=suite,
            n_attempts=n_attempts,
            window=window,
            seed=seed,
            user_simulator=user_simulator,
            judge=judge,
            price_sheet=price_sheet,
            harness_version=HARNESS_VERSION,
            suite_version=suite.version,
            suite_hash=suite.content_hash,
            adaptive=adaptive is not None,
            adaptive_options=options,
            exclude_non_discriminating=exclude_non_discriminating,
            non_discriminating_excluded=len(excluded),
            fault_plan=plan,
        )
        campaign.tasks.set(selected)
    return campaign


def fault_plan_normalised(data: dict | None) -> dict:
    """A fault plan's stored form ({} for none); raises FaultPlanError ("fault plan: …") when it is not one."""
    if not data:
        return {}
    try:
        return FaultPlan.from_dict(data).to_dict()
    except FaultPlanError as exc:
        raise FaultPlanError(f"fault plan: {exc}") from None


class NotReplicable(ValueError):
    """The campaign cannot be re-run here (its results were imported from elsewhere)."""


def replicate_root(campaign: Campaign) -> Campaign:
    """The first campaign of the campaign's replicate set (the campaign itself when it starts one)."""
    return campaign.replicate_of or campaign


def campaign_replicate(
    *, campaign: Campaign, owner, seed: int | None = None, name: str = "", start: bool = True
) -> Campaign:
    """Re-run the campaign's configuration as a replicate: same agent, tasks, N, user simulator, judge
    and price sheet, a new seed (default: one above the set's highest).

    Side effects: one Campaign row with the same task selection, ``replicate_of`` the set's first
    campaign; started (attempts queued and dispatched) unless ``start`` is False. Raises
    NotReplicable for imported results and ValueError for a seed the set already used.
    """
    root = replicate_root(campaign)
    if (root.user_simulator or {}).get("kind") == "imported":
        raise NotReplicable(f"campaign {root.name!r} holds imported results; there is nothing here to re-run")
    members = [root, *root.replicates.all()]
    seeds = {member.seed for member in members}
    seed = max(seeds) + 1 if seed is None else seed
    if seed in seeds:
        raise ValueError(f"seed {seed} is already used in the replicate set of {root.name!r}")
    taken = set(Campaign.objects.filter(team=root.team).values_list("name", flat=True))
    if not name:
        number = len(members) + 1
        name = f"{root.name} · replicate {number}"
        while name in taken:
            number += 1
            name = f"{root.name} · replicate {number}"
    replicate = campaign_create(
        name=name,
        team=root.team,
        owner=owner,
        agent=root.agent,
        suite=root.suite,
        tasks=list(root.tasks.all()),
        n_attempts=root.n_attempts,
        seed=seed,
        user_simulator=root.user_simulator,
        judge=root.judge,
        price_sheet=root.price_sheet,
        adaptive=dict(root.adaptive_options) if root.adaptive else None,
        window=root.window,
        fault_plan=root.fault_plan or None,
    )
    # The root's tasks are passed as they are (the same selection even if validation changed since),
    # and so is what the root recorded about non-discriminating tasks.
    replicate.replicate_of = root
    replicate.exclude_non_discriminating = root.exclude_non_discriminating
    replicate.non_discriminating_excluded = root.non_discriminating_excluded
    replicate.save(
        update_fields=["replicate_of", "exclude_non_discriminating", "non_discriminating_excluded"]
    )
    if start:
        campaign_start(campaign=replicate)
    return replicate


def _adaptive_options(adaptive: dict, n_attempts: int) -> dict:
    """Validated adaptive options (the engine's AdaptiveConfig fields plus the calibration id)."""
    calibration = adaptive.get("calibration")
    if calibration is not None and (isinstance(calibration, bool) or not isinstance(calibration, int)):
        raise ValueError("adaptive.calibration: must be a calibration id or None (the latest)")
    unknown = sorted(set(adaptive) - set(AdaptiveConfig.__dataclass_fields__) - {"calibration"})
    if unknown:
        raise ValueError(f"adaptive: unknown option(s) {', '.join(unknown)}")
    config = AdaptiveConfig.from_dict({**adaptive, "n_attempts": n_attempts})
    return {**config.to_dict(), "calibration": calibration}


@transaction.atomic
def campaign_import(
    *,
    name: str,
    team,
    owner,
    agent: AgentConfig,
    suite: Suite,
    attempts: Iterable[tuple[Task, int, AttemptResult]] = (),
    source: str,
    harness: str,
    finished_at: datetime | None = None,
    tasks: Sequence[Task] | None = None,
    n_attempts: int | None = None,
    rows: Iterable[ImportRow] | None = None,
) -> Campaign:
    """Store results run elsewhere (e.g. ``tb infer`` rows) as a finished campaign.

    ``attempts`` are (task, index, engine result) triples; ``source`` (a file name) becomes the
    campaign's user-simulator and judge description, ``harness`` what ran them. Given ``tasks``
    and ``n_attempts`` (known from a first pass over a big file), ``attempts`` may be a generator:
    it is read once, a batch at a time. Or, with ``tasks`` and ``n_attempts``, ``rows`` already
    made ready to store (``attempts.services.attempt_import_row``, maybe in other processes). Side effects, in one transaction: a Campaign (status done)
    over the attempts' tasks, one Attempt per triple (unpriced) and the campaign's TaskSummary rows.
    """
    finished_at = finished_at or timezone.now()
    if tasks is None or n_attempts is None:
        attempts = list(attempts)
        by_pk = {task.pk: task for task, _, _ in attempts}
        repeats = max(index for _, index, _ in attempts) + 1
        per_task = Counter(task.pk for task, _, _ in attempts)
        tasks, n_attempts = list(by_pk.values()), max(repeats, max(per_task.values()))
    campaign = Campaign.objects.create(
        name=name,
        team=team,
        owner=owner,
        agent=agent,
        suite=suite,
        n_attempts=n_attempts,
        user_simulator={"kind": "imported", "source": source},
        judge={"kind": "imported", "source": source},
        harness_version=f"{harness} (imported by {HARNESS_VERSION})",
        suite_version=suite.version,
        suite_hash=suite.content_hash,
        status=Campaign.Status.DONE,
        started_at=finished_at,
        finished_at=finished_at,
    )
    campaign.tasks.set(tasks)
    if rows is not None:
        attempts_import_rows(campaign_id=campaign.pk, rows=rows, finished_at=finished_at)
    else:
        attempts_import(campaign_id=campaign.pk, attempts=attempts, finished_at=finished_at)
    _figures_refresh_after_commit(campaign.pk)
    return campaign


def campaign_start(*, campaign: Campaign) -> int:
    """Create the N attempts per task (missing ones only) and dispatch the first window.

    Side effects: Attempt rows (queued), campaign status running, Celery messages after commit.
    Returns the number of attempts created. Safe to call twice.
    """
    with transaction.atomic():
        locked = Campaign.objects.select_for_update().get(pk=campaign.pk)
        task_ids = list(locked.tasks.values_list("id", flat=True))
        # An adaptive campaign's attempts are created as results come in, by its dispatcher.
        created = attempts_queue(
            campaign_id=locked.pk, task_ids=task_ids, n_attempts=0 if locked.adaptive else locked.n_attempts
        )
        locked.status = Campaign.Status.RUNNING
        locked.started_at = locked.started_at or timezone.now()
        locked.finished_at = None
        locked.save(update_fields=["status", "started_at", "finished_at"])
        if locked.adaptive:
            # Its attempts are created as results come in, by the adaptive dispatcher.
            transaction.on_commit(lambda: _send_adaptive_dispatch(campaign.pk))
    campaign.refresh_from_db()
    campaign_dispatch(campaign=campaign)
    return created


def campaign_window(campaign: Campaign) -> int:
    """How many of a campaign's attempts may be queued at the broker or running at once.

    The campaign's own window (default TB_CAMPAIGN_DEFAULT_WINDOW), capped by TB_CAMPAIGN_MAX_WINDOW.
    How many requests reach the agent's endpoint is its max_concurrency, enforced per call by the
    workers' endpoint gate, not here.
    """
    window = campaign.window or settings.CAMPAIGN_DEFAULT_WINDOW
    return max(1, min(window, settings.CAMPAIGN_MAX_WINDOW))


def campaign_dispatch(*, campaign: Campaign, limit: int | None = None) -> int:
    """Send messages for undispatched queued attempts, up to the campaign's free window (or ``limit``).

    Side effects (apps.attempts.services.attempts_dispatch): sets dispatched_at, sends
    RUN_ATTEMPT_TASK messages after commit. Duplicate messages are harmless: the claim is conditional.
    """
    # No savepoint when nested (the record's transaction): an error here fails the whole
    # transaction anyway, and a savepoint costs two more round trips per attempt.
    with transaction.atomic(savepoint=False):
        if limit is None:
            limit = campaign_window(campaign) - attempts_in_window(campaign_id=campaign.pk)
        return attempts_dispatch(campaign_id=campaign.pk, limit=limit)


def _figures_refresh_after_commit(campaign_id: int) -> None:
    """Once the change commits, one FIGURES_REFRESH_TASK message: the campaign's figures are stored
    by a worker, so its first viewer (a fresh server process included) reads them instead of computing."""
    # robust: a broker or refresh failure is logged, never the caller's error (the first viewer
    # then computes the figures, as without the message).
    transaction.on_commit(
        lambda: celery_app.signature(FIGURES_REFRESH_TASK, args=(campaign_id,)).apply_async(), robust=True
    )
    clusters_store_after_commit([campaign_id])


def clusters_store_after_commit(campaign_ids: list[int]) -> None:
    """Once the change commits, one CLUSTERS_STORE_TASK message: the grouped triage queue of the
    campaigns' teams is stored by a worker, so a fresh server process reads it instead of grouping.

    Side effects: the message (robust: a broker failure is logged; the first viewer then groups).
    """
    transaction.on_commit(
        lambda: celery_app.signature(CLUSTERS_STORE_TASK, args=(list(campaign_ids),)).apply_async(),
        robust=True,
    )


def _send_adaptive_dispatch(campaign_id: int) -> None:
    """One ADAPTIVE_DISPATCH_TASK message, by name (inline where the task is registered and eager)."""
    celery_app.signature(ADAPTIVE_DISPATCH_TASK, args=(campaign_id,)).apply_async()


@dataclass(frozen=True)
class TaskCounts:
    """One task of an adaptive campaign so far: done attempts, passes, attempts queued or running."""

    task_id: int  # Task primary key
    done: int
    passes: int
    pending: int
    agent_cost: float  # over done attempts
    next_index: int  # the index a new attempt of the task gets


@dataclass(frozen=True)
class Extension:
    """What the adaptive dispatcher decided: attempts to add per task, or that the campaign is finished."""

    add: dict[int, int] = field(default_factory=dict)  # Task primary key -> new attempts
    finish: bool = False


def campaign_extend(*, campaign_id: int, decide: Callable[[list[TaskCounts]], Extension]) -> Extension | None:
    """Let an adaptive campaign's dispatcher add attempts (or finish it) from its counts so far.

    The running campaign's row is locked first, so concurrent dispatchers run one after the
    other and each sees the attempts the previous one added as pending: a pure ``decide`` then
    never adds the same attempt twice. Side effects: queued Attempt rows with the next indexes,
    dispatch of the campaign's window, or (``finish`` with nothing in flight) status done.
    Returns None when the campaign is not a running adaptive campaign.
    """
    with transaction.atomic():
        campaign = (
            Campaign.objects.select_for_update()
            .select_related("agent")
            .filter(pk=campaign_id, status=Campaign.Status.RUNNING, adaptive=True)
            .first()
        )
        if campaign is None:
            return None
        per_task = attempt_counts_by_task(campaign_id=campaign.pk)
        counts = []
        for task_id in sorted(campaign.tasks.values_list("id", flat=True)):
            row = per_task.get(task_id)
            counts.append(
                TaskCounts(
                    task_id=task_id,
                    done=row.done if row else 0,
                    passes=row.passes if row else 0,
                    pending=row.pending if row else 0,
                    agent_cost=row.agent_cost if row else 0.0,
                    next_index=row.last_index + 1 if row else 0,
                )
            )
        extension = decide(counts)
        if extension.finish:
            if not any(c.pending for c in counts):
                Campaign.objects.filter(pk=campaign.pk).update(
                    status=Campaign.Status.DONE, finished_at=timezone.now()
                )
                _figures_refresh_after_commit(campaign.pk)
            return extension
        by_task = {c.task_id: c for c in counts}
        attempts_add(
            campaign_id=campaign.pk,
            add={task_id: (by_task[task_id].next_index, count) for task_id, count in extension.add.items()},
        )
    campaign_dispatch(campaign=campaign)
    return extension


def campaign_cancel(*, campaign: Campaign) -> int:
    """Cancel a campaign: queued attempts become cancelled now; running ones end as cancelled.

    Side effects: campaign status cancelled; summaries refreshed. After this returns no attempt
    can be claimed (claims require a running campaign). Returns attempts cancelled now.
    """
    with transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk).update(
            status=Campaign.Status.CANCELLED, finished_at=timezone.now()
        )
        count = attempts_cancel_queued(campaign_id=campaign.pk)
    summary_refresh(campaign_id=campaign.pk)
    _figures_refresh_after_commit(campaign.pk)
    campaign.refresh_from_db()
    return count


def campaign_resume(*, campaign: Campaign) -> int:
    """Re-queue every attempt that did not finish (cancelled or infra_error) and start again.

    Side effects: those attempts go back to queued with a fresh retry budget, each run that had
    usage kept as a superseded run (still billed); status running; dispatch. Returns the number
    re-queued.
    """
    with transaction.atomic():
        count = attempts_requeue_unfinished(campaign_id=campaign.pk)
    campaign_start(campaign=campaign)
    summary_refresh(campaign_id=campaign.pk)
    return count


def campaign_finish_if_complete(*, campaign_id: int) -> bool:
    """Mark a running campaign done once nothing is queued or running.

    An adaptive campaign is left alone: between two decisions of its dispatcher nothing may be
    in flight, and only the dispatcher knows whether more attempts follow (campaign_extend).
    """
    if attempts_in_flight(campaign_id=campaign_id):
        return False
    finished = (
        Campaign.objects.filter(pk=campaign_id, status=Campaign.Status.RUNNING, adaptive=False).update(
            status=Campaign.Status.DONE, finished_at=timezone.now()
        )
        == 1
    )
    if finished:  # a first run or a resumed re-run: its attempts are settled, its figures final
        _figures_refresh_after_commit(campaign_id)
    return finished


def campaigns_wait(
    campaign_ids: list[int],
    *,
    timeout: float,
    on_progress: Callable[[], None] | None = None,
    sweep_every: float = 5.0,
    poll_s: float = 0.5,
) -> bool:
    """Block until the campaigns are no longer running, sweeping stale attempts meanwhile.

    Side effects: campaigns_sweep every ``sweep_every`` seconds. Returns False on timeout.
    """
    deadline = time.monotonic() + timeout
    last_sweep = time.monotonic()
    while time.monotonic() < deadline:
        running = Campaign.objects.filter(pk__in=campaign_ids, status=Campaign.Status.RUNNING).count()
        if on_progress:
            on_progress()
        if running == 0:
            return True
        if time.monotonic() - last_sweep > sweep_every:
            campaigns_sweep()
            last_sweep = time.monotonic()
        time.sleep(poll_s)
    return False


def campaign_hand_on(*, campaign: Campaign) -> int:
    """Dispatch the campaign's next attempt into the slot a record just freed; how many were sent.

    Passed to apps.attempts.services.attempt_record as its ``hand_on``: it runs inside the
    record's transaction, so the freed slot and the next dispatch commit together.
    """
    return campaign_dispatch(campaign=campaign, limit=1)


def campaign_after_record(*, campaign: Campaign, recorded: Recorded) -> None:
    """What follows for the campaign once one of its attempts was recorded (apps.attempts.services.attempt_record).

    An adaptive campaign's dispatcher decides what runs next (a message after commit; not for a
    retry, which is still the same attempt). Any other campaign is finished when the record handed
    no next attempt the freed slot: this runs after the record's commit, so of two last attempts
    finishing at once — each seeing the other still running inside its own transaction — the one
    that commits last sees both ended here. Nothing follows a lost lease.
    """
    if recorded.what == "lost-lease":
        return
    if campaign.adaptive:
        if recorded.what != "retry":
            transaction.on_commit(lambda: _send_adaptive_dispatch(campaign.pk))
    elif not recorded.handed_on:
        campaign_finish_if_complete(campaign_id=campaign.pk)


def campaigns_sweep(*, now=None, same_host_dead_only: bool = False) -> int:
    """Re-queue attempts whose worker died (apps.attempts.services.attempts_sweep), then top up windows.

    Side effects: those attempts; every running campaign's window dispatched, its summaries
    refreshed when an attempt ran out of retries, its completion, and a fresh decision message for
    adaptive campaigns. Returns the number of attempts re-queued.
    """
    report = attempts_sweep(now=now, same_host_dead_only=same_host_dead_only)
    _dispatch_running_campaigns(refresh_summaries=bool(report.exhausted))
    return report.requeued


def campaigns_resend_lost(*, sent_before) -> int:
    """Re-send the messages of queued attempts dispatched before ``sent_before``.

    A Redis broker restarted without persistence lost every message it held: an attempt queued
    and dispatched before the broker started again is never delivered. The worker calls this
    with the broker's start time as soon as it is connected again, instead of waiting for the
    sweep's ATTEMPT_REDISPATCH_SECONDS. Side effects: clears those attempts' dispatched_at, then
    tops up every running campaign's window (messages after commit) and sends adaptive campaigns
    a fresh decision message. Duplicate messages are harmless: claims are conditional updates.
    Returns the number of attempts whose messages were lost.
    """
    lost = attempts_resend_lost(sent_before=sent_before)
    _dispatch_running_campaigns(refresh_summaries=False)
    return lost


def _dispatch_running_campaigns(*, refresh_summaries: bool) -> None:
    for campaign in Campaign.objects.filter(status=Campaign.Status.RUNNING).select_related("agent"):
        campaign_dispatch(campaign=campaign)
        if refresh_summaries:
            summary_refresh(campaign_id=campaign.pk)
        campaign_finish_if_complete(campaign_id=campaign.pk)
        if campaign.adaptive:  # a lost decision message must not stall the campaign
            _send_adaptive_dispatch(campaign.pk)
