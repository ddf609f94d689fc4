"""Writes for campaigns and attempts: the only code that writes the campaigns_* tables.

Life of an attempt: created ``queued`` by campaign_start; *dispatched* (a Celery message sent)
through a per-campaign sliding window so a small campaign is never starved behind a huge one;
*claimed* by a worker with a conditional UPDATE (attempt_claim, so re-delivered messages are
no-ops); executed by the engine (apps.worker); recorded with a second conditional UPDATE that
only the claiming worker can win (attempt_record). Infrastructure errors go back to ``queued``
with backoff until the retry budget is spent, then stay ``infra_error`` — never a failure.

Messages are sent by task name (RUN_ATTEMPT_TASK): this app never imports the worker that
runs them, so the worker depends on campaigns and nothing circles back.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Max, Q, Sum
from django.utils import timezone

from apps.agents.models import AgentConfig, PriceSheet
from apps.campaigns import attempt_sql
from apps.campaigns.evaluators import EvaluatorConfigError, evaluator_configs
from apps.campaigns.models import Attempt, Campaign
from apps.campaigns.outcomes import USAGE_FIELDS, AttemptOutcome, billed_fields, last_run, superseded_run
from apps.campaigns.signature_rows import signatures_store
from apps.campaigns.signatures import BackfillReport, backfill_signatures
from apps.campaigns.summaries import summaries_create, summary_refresh
from apps.suites.models import Suite, Task
from tb_engine.irt.adaptive import AdaptiveConfig
from tb_engine.results import AttemptResult
from thinkingbox_web.celery import app as celery_app
from thinkingbox_web.embedded import tasks_run_inline

__all__ = [
    "HARNESS_VERSION",
    "RUN_ATTEMPT_TASK",
    "SWEEP_TASK",
    "RESEND_LOST_TASK",
    "ADAPTIVE_DISPATCH_TASK",
    "AttemptOutcome",
    "BackfillReport",
    "EvaluatorConfigError",
    "NotReplicable",
    "Extension",
    "TaskCounts",
    "evaluator_configs",
    "attempt_claim",
    "attempt_claim_prepare",
    "attempt_heartbeat",
    "attempt_record",
    "attempts_backfill_signatures",
    "attempts_resend_lost",
    "attempts_sweep",
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
    "campaigns_wait",
    "replicate_root",
    "worker_identity",
]

log = logging.getLogger(__name__)

HARNESS_VERSION = "tbw-1.0"
IN_FLIGHT = (Attempt.Status.QUEUED, Attempt.Status.RUNNING)
# Celery task names, registered by apps.worker.tasks (which imports these constants).
RUN_ATTEMPT_TASK = "worker.run_attempt"
SWEEP_TASK = "worker.sweep"
# Sent by the worker each time it (re)connects to the broker (thinkingbox_web.celery).
RESEND_LOST_TASK = "worker.resend_lost"
# Registered by apps.adaptive.tasks: decides an adaptive campaign's next attempts (idempotent).
ADAPTIVE_DISPATCH_TASK = "adaptive.dispatch"


def worker_identity() -> str:
    """hostname:pid — lets a restarted worker on the same host recognise its dead predecessors."""
    return f"{socket.gethostname()}:{os.getpid()}"


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
) -> Campaign:
    """Create a draft campaign over ``tasks`` (default: every gradable task of the suite).

    ``user_simulator`` / ``judge`` (default scripted / keyword) are checked and stored in their
    normal form (apps.campaigns.evaluators); a bad one raises EvaluatorConfigError (a ValueError).
    ``adaptive`` (None: a full campaign) makes it an adaptive campaign: options of the engine's
    ``AdaptiveConfig`` (budget_share, target_se, …; its n_attempts is the campaign's N) plus
    ``calibration`` (an id, or None for the suite's latest calibration for the team, pinned when
    the campaign starts). Side effects: one Campaign row and its task selection. Invalid tasks are
    never selected. Raises ValueError naming a bad option.
    """
    if n_attempts < 1:
        raise ValueError("n_attempts must be at least 1")
    user_simulator, judge = evaluator_configs(user=user_simulator, judge=judge)
    options = _adaptive_options(adaptive, n_attempts) if adaptive is not None else {}
    selected = list(tasks) if tasks is not None else list(suite.tasks.all())
    selected = [t for t in selected if t.is_gradable]
    if not selected:
        raise ValueError(f"no gradable tasks selected from suite {suite.name}")
    with transaction.atomic():
        campaign = Campaign.objects.create(
            name=name,
            team=team,
            owner=owner,
            agent=agent,
            suite=suite,
            n_attempts=n_attempts,
            seed=seed,
            user_simulator=user_simulator,
            judge=judge,
            price_sheet=price_sheet,
            harness_version=HARNESS_VERSION,
            suite_version=suite.version,
            suite_hash=suite.content_hash,
            adaptive=adaptive is not None,
            adaptive_options=options,
        )
        campaign.tasks.set(selected)
    return campaign


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
    )
    replicate.replicate_of = root
    replicate.save(update_fields=["replicate_of"])
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
    attempts: Sequence[tuple[Task, int, AttemptResult]],
    source: str,
    harness: str,
    finished_at: datetime | None = None,
) -> Campaign:
    """Store results run elsewhere (e.g. ``tb infer`` rows) as a finished campaign.

    ``attempts`` are (task, index, engine result) triples; ``source`` (a file name) becomes the
    campaign's user-simulator and judge description, ``harness`` what ran them. Side effects,
    in one transaction: a Campaign (status done) over the attempts' tasks, one Attempt per
    triple (unpriced) and the campaign's TaskSummary rows.
    """
    finished_at = finished_at or timezone.now()
    tasks = {task.pk: task for task, _, _ in attempts}
    repeats = max(index for _, index, _ in attempts) + 1
    per_task = max(sum(1 for task, _, _ in attempts if task.pk == pk) for pk in tasks)
    campaign = Campaign.objects.create(
        name=name,
        team=team,
        owner=owner,
        agent=agent,
        suite=suite,
        n_attempts=max(repeats, per_task),
        user_simulator={"kind": "imported", "source": source},
        judge={"kind": "imported", "source": source},
        harness_version=f"{harness} (imported by {HARNESS_VERSION})",
        suite_version=suite.version,
        suite_hash=suite.content_hash,
        status=Campaign.Status.DONE,
        started_at=finished_at,
        finished_at=finished_at,
    )
    campaign.tasks.set(tasks.values())
    outcomes = [
        AttemptOutcome.from_result(result, agent_cost=None, eval_cost=None) for _, _, result in attempts
    ]
    rows = [
        Attempt(campaign=campaign, task=task, index=index, finished_at=finished_at, **outcome.as_fields())
        for (task, index, _), outcome in zip(attempts, outcomes, strict=True)
    ]
    Attempt.objects.bulk_create(rows, batch_size=500)
    signatures_store(
        [
            found
            for row, outcome in zip(rows, outcomes, strict=True)
            if (
                found := outcome.signature_row(
                    attempt_id=row.pk, campaign_id=campaign.pk, task_id=row.task_id
                )
            )
        ]
    )
    summary_refresh(campaign_id=campaign.pk)
    return campaign


def campaign_start(*, campaign: Campaign) -> int:
    """Create the N attempts per task (missing ones only) and dispatch the first window.

    Side effects: Attempt rows (queued), campaign status running, Celery messages after commit.
    Returns the number of attempts created. Safe to call twice.
    """
    with transaction.atomic():
        locked = Campaign.objects.select_for_update().get(pk=campaign.pk)
        existing = set(Attempt.objects.filter(campaign=locked).values_list("task_id", "index"))
        task_ids = list(locked.tasks.values_list("id", flat=True))
        new = [
            Attempt(campaign=locked, task_id=task_id, index=index)
            for index in range(locked.n_attempts)
            for task_id in task_ids
            if (task_id, index) not in existing and not locked.adaptive
        ]
        Attempt.objects.bulk_create(new, batch_size=2000)
        summaries_create(campaign_id=locked.pk, task_ids=task_ids)
        locked.status = Campaign.Status.RUNNING
        locked.started_at = locked.started_at or timezone.now()
        locked.finished_at = None
        locked.save(update_fields=["status", "started_at", "finished_at"])
        if locked.adaptive:
            # Its attempts are created as results come in, by the adaptive dispatcher.
            transaction.on_commit(lambda: _send_adaptive_dispatch(campaign.pk))
    campaign.refresh_from_db()
    campaign_dispatch(campaign=campaign)
    return len(new)


def campaign_window(campaign: Campaign) -> int:
    """How many of a campaign's attempts may be queued at the broker or running at once."""
    return max(1, min(campaign.agent.max_concurrency, settings.CAMPAIGN_MAX_WINDOW))


def campaign_dispatch(*, campaign: Campaign, limit: int | None = None) -> int:
    """Send messages for undispatched queued attempts, up to the campaign's free window.

    Side effects: sets dispatched_at, sends RUN_ATTEMPT_TASK messages after commit. Duplicate
    messages are harmless: the claim is conditional.
    """
    # No savepoint when nested (attempt_record's transaction): an error here fails the whole
    # transaction anyway, and a savepoint costs two more round trips per attempt.
    with transaction.atomic(savepoint=False):
        if limit is None:
            busy = (
                Attempt.objects.filter(campaign=campaign)
                .filter(
                    Q(status=Attempt.Status.RUNNING)
                    | Q(status=Attempt.Status.QUEUED, dispatched_at__isnull=False)
                )
                .count()
            )
            limit = campaign_window(campaign) - busy
        if limit <= 0:
            return 0
        ids = attempt_sql.mark_dispatched(campaign_id=campaign.pk, limit=limit, now=timezone.now())
        if ids is None:  # not PostgreSQL: the same selection in two statements
            ids = list(
                Attempt.objects.select_for_update(skip_locked=True)
                .filter(campaign=campaign, status=Attempt.Status.QUEUED, dispatched_at__isnull=True)
                .order_by("index", "task_id")
                .values_list("id", flat=True)[:limit]
            )
            if ids:
                Attempt.objects.filter(id__in=ids).update(dispatched_at=timezone.now())
        if not ids:
            return 0
        transaction.on_commit(lambda: _send_run_attempt(ids))
    return len(ids)


def _send_run_attempt(attempt_ids: Iterable[int], *, countdown: float | None = None) -> None:
    """One RUN_ATTEMPT_TASK message per attempt, by name.

    A signature by name runs through the registered task when this process has it (apps.worker
    registers it at start-up, so Celery's eager mode in tests and ``run_task`` still runs inline)
    and is a plain send otherwise.
    """
    for attempt_id in attempt_ids:
        celery_app.signature(RUN_ATTEMPT_TASK, args=(attempt_id,)).apply_async(countdown=countdown)


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
        per_task = {
            row["task_id"]: row
            for row in Attempt.objects.filter(campaign=campaign)
            .values("task_id")
            .annotate(
                done=Count("id", filter=Q(status=Attempt.Status.DONE)),
                passes=Count("id", filter=Q(status=Attempt.Status.DONE, verdict=Attempt.Verdict.PASS)),
                pending=Count("id", filter=Q(status__in=IN_FLIGHT)),
                cost=Sum("agent_cost", filter=Q(status=Attempt.Status.DONE)),
                last=Max("index"),
            )
        }
        counts = []
        for task_id in sorted(campaign.tasks.values_list("id", flat=True)):
            row = per_task.get(task_id)
            counts.append(
                TaskCounts(
                    task_id=task_id,
                    done=row["done"] if row else 0,
                    passes=row["passes"] if row else 0,
                    pending=row["pending"] if row else 0,
                    agent_cost=float(row["cost"] or 0) if row else 0.0,
                    next_index=row["last"] + 1 if row else 0,
                )
            )
        extension = decide(counts)
        if extension.finish:
            if not any(c.pending for c in counts):
                Campaign.objects.filter(pk=campaign.pk).update(
                    status=Campaign.Status.DONE, finished_at=timezone.now()
                )
            return extension
        by_task = {c.task_id: c for c in counts}
        Attempt.objects.bulk_create(
            [
                Attempt(campaign=campaign, task_id=task_id, index=by_task[task_id].next_index + k)
                for task_id, count in sorted(extension.add.items())
                for k in range(count)
            ]
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
        count = Attempt.objects.filter(campaign=campaign, status=Attempt.Status.QUEUED).update(
            status=Attempt.Status.CANCELLED, finished_at=timezone.now()
        )
    summary_refresh(campaign_id=campaign.pk)
    campaign.refresh_from_db()
    return count


def campaign_resume(*, campaign: Campaign) -> int:
    """Re-queue every attempt that did not finish (cancelled or infra_error) and start again.

    Side effects: those attempts go back to queued with a fresh retry budget, each run that had
    usage kept as a superseded run (still billed); status running; dispatch. Returns the number
    re-queued.
    """
    with transaction.atomic():
        unfinished = Attempt.objects.filter(
            campaign=campaign, status__in=[Attempt.Status.CANCELLED, Attempt.Status.INFRA_ERROR]
        )
        _supersede_last_runs(unfinished)
        count = unfinished.update(
            status=Attempt.Status.QUEUED, dispatched_at=None, worker="", lease_expires_at=None, retries=0
        )
    campaign_start(campaign=campaign)
    summary_refresh(campaign_id=campaign.pk)
    return count


def _supersede_last_runs(attempts) -> None:
    """Keep each attempt's run of record as a superseded run before it is re-run (its usage columns stay)."""
    billed = [*USAGE_FIELDS, "agent_cost", "eval_cost"]
    changed = []
    # Attempts that never billed a token (most cancelled ones) are not even loaded.
    billed_some = attempts.exclude(input_tokens=0, output_tokens=0, eval_tokens=0)
    for attempt in billed_some.only(
        "id", "status", "error_detail", "finished_at", "superseded_runs", *billed
    ):
        values = {name: getattr(attempt, name) for name in billed}
        own = last_run(values, attempt.superseded_runs)
        if not any(own[name] for name in USAGE_FIELDS):
            continue  # nothing was billed for it (e.g. cancelled before it ran)
        at = (attempt.finished_at or timezone.now()).isoformat()
        reason = f"resume of {attempt.status}"
        attempt.superseded_runs = [
            *attempt.superseded_runs,
            superseded_run(own, error=attempt.error_detail, at=at, reason=reason),
        ]
        changed.append(attempt)
    Attempt.objects.bulk_update(changed, ["superseded_runs"], batch_size=500)


def campaign_finish_if_complete(*, campaign_id: int) -> bool:
    """Mark a running campaign done once nothing is queued or running.

    An adaptive campaign is left alone: between two decisions of its dispatcher nothing may be
    in flight, and only the dispatcher knows whether more attempts follow (campaign_extend).
    """
    if Attempt.objects.filter(campaign_id=campaign_id, status__in=IN_FLIGHT).exists():
        return False
    return (
        Campaign.objects.filter(pk=campaign_id, status=Campaign.Status.RUNNING, adaptive=False).update(
            status=Campaign.Status.DONE, finished_at=timezone.now()
        )
        == 1
    )


def campaigns_wait(
    campaign_ids: list[int],
    *,
    timeout: float,
    on_progress: Callable[[], None] | None = None,
    sweep_every: float = 5.0,
    poll_s: float = 0.5,
) -> bool:
    """Block until the campaigns are no longer running, sweeping stale attempts meanwhile.

    Side effects: attempts_sweep every ``sweep_every`` seconds. Returns False on timeout.
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
            attempts_sweep()
            last_sweep = time.monotonic()
        time.sleep(poll_s)
    return False


# --- One attempt on a worker: claim, heartbeat, record --------------------------------------------


def attempt_claim(*, attempt_id: int, worker: str) -> Attempt | None:
    """Atomically move a queued attempt of a running campaign to running for this worker.

    Returns the claimed attempt with its campaign (agent, price sheet) and task (suite, domain)
    loaded — one statement on PostgreSQL — or None when it was not claimable.
    """
    now = timezone.now()
    lease = timedelta(seconds=settings.ATTEMPT_LEASE_SECONDS)
    return attempt_sql.claim_and_load(
        attempt_id=attempt_id, worker=worker, now=now, lease_expires_at=now + lease
    )


def attempt_claim_prepare() -> None:
    """Open this thread's database connection and prepare the claim statement, as the first claim would."""
    attempt_sql.warm_connection()


def attempt_heartbeat(*, attempt_id: int, worker: str) -> bool:
    """Extend the lease; False when the attempt is no longer ours or its campaign was cancelled."""
    lease = timedelta(seconds=settings.ATTEMPT_LEASE_SECONDS)
    return attempt_sql.update_owned(
        attempt_id=attempt_id,
        worker=worker,
        values={"lease_expires_at": timezone.now() + lease},
        require_running_campaign=True,
    )


def attempt_record(*, attempt: Attempt, worker: str, outcome: AttemptOutcome | None) -> str:
    """Record how a claimed attempt ended (None: it was cancelled); returns what happened.

    Side effects: the attempt row (status, result, usage, cost), its task summary, dispatch of
    the campaign's next attempt, the campaign's completion. Only the claiming worker of a still
    running campaign records a result: otherwise "lost-lease" (another worker's result wins) or
    "cancelled". An infrastructure error within the retry budget re-queues the attempt ("retry").
    """
    if outcome is not None and not _retries_infra_error(attempt, outcome) and not tasks_run_inline():
        # The common case in one round trip (PostgreSQL); anything unusual takes the path below,
        # and so does inline (eager) Celery, where campaign_dispatch stays the one dispatch point.
        fast = attempt_sql.record_in_one_query(
            attempt=attempt,
            worker=worker,
            values=_outcome_fields(outcome, attempt),
            now=timezone.now(),
            signature=outcome.signature_row(
                attempt_id=attempt.id, campaign_id=attempt.campaign_id, task_id=attempt.task_id
            ),
        )
        if fast is not None and fast.recorded:
            if not fast.summary_found:
                summary_refresh(campaign_id=attempt.campaign_id, task_id=attempt.task_id)
            _send_run_attempt(fast.dispatched)
            if attempt.campaign.adaptive:
                _send_adaptive_dispatch(attempt.campaign_id)
            elif not fast.dispatched:
                campaign_finish_if_complete(campaign_id=attempt.campaign_id)
            return outcome.status
    # Record, summarise and hand the slot to the campaign's next attempt in one transaction.
    with transaction.atomic():
        what, recorded = _record(attempt=attempt, worker=worker, outcome=outcome)
        if not recorded:
            return "lost-lease"
        summary_refresh(campaign_id=attempt.campaign_id, task_id=attempt.task_id)
        nothing_dispatched = what == "retry" or campaign_dispatch(campaign=attempt.campaign, limit=1) == 0
        if attempt.campaign.adaptive and what != "retry":
            # Results came in: the adaptive dispatcher decides what runs next (after commit).
            transaction.on_commit(lambda: _send_adaptive_dispatch(attempt.campaign_id))
    if nothing_dispatched:
        # After commit: two last attempts finishing at once each see the other still running
        # inside their transactions, but whichever commits last sees both ended here.
        campaign_finish_if_complete(campaign_id=attempt.campaign_id)
    return what


def _retries_infra_error(attempt: Attempt, outcome: AttemptOutcome) -> bool:
    return outcome.status == Attempt.Status.INFRA_ERROR and attempt.retries < settings.ATTEMPT_MAX_RETRIES


def _outcome_fields(outcome: AttemptOutcome, attempt: Attempt) -> dict:
    """The row's columns for ``outcome``; usage and cost billed with the attempt's superseded runs.

    The superseded runs were loaded with the claim: only the owning worker changes them (a
    re-queue after an infra error), so they cannot change between claim and record.
    """
    fields = outcome.as_fields()
    if attempt.superseded_runs:
        fields.update(billed_fields(fields, attempt.superseded_runs))
    fields.update(finished_at=timezone.now(), lease_expires_at=None)
    return fields


def _record(*, attempt: Attempt, worker: str, outcome: AttemptOutcome | None) -> tuple[str, bool]:
    """Write the attempt's end state; (what happened, whether this worker still owned it)."""
    if outcome is None:
        return "cancelled", _record_cancelled(attempt_id=attempt.id, worker=worker)
    if _retries_infra_error(attempt, outcome):
        return "retry", _requeue_after_infra_error(attempt=attempt, worker=worker, outcome=outcome)
    if _record_outcome(attempt=attempt, worker=worker, outcome=outcome):
        return outcome.status, True
    # Not recorded: the campaign was cancelled meanwhile (the attempt ends cancelled) or the
    # lease passed to another worker (its result wins).
    if _campaign_cancelled(attempt.campaign_id):
        return "cancelled", _record_cancelled(attempt_id=attempt.id, worker=worker)
    return "lost-lease", False


def _campaign_cancelled(campaign_id: int) -> bool:
    return Campaign.objects.filter(pk=campaign_id, status=Campaign.Status.CANCELLED).exists()


def _record_outcome(*, attempt: Attempt, worker: str, outcome: AttemptOutcome) -> bool:
    """Only the owning worker of a still-running campaign may record a result (and its signature)."""
    recorded = attempt_sql.update_owned(
        attempt_id=attempt.id,
        worker=worker,
        values=_outcome_fields(outcome, attempt),
        require_running_campaign=True,
    )
    if recorded:
        row = outcome.signature_row(
            attempt_id=attempt.id, campaign_id=attempt.campaign_id, task_id=attempt.task_id
        )
        signatures_store([row] if row else [], attempt_ids=[attempt.id])
    return recorded


def _record_cancelled(*, attempt_id: int, worker: str) -> bool:
    return (
        Attempt.objects.filter(id=attempt_id, status=Attempt.Status.RUNNING, worker=worker).update(
            status=Attempt.Status.CANCELLED, finished_at=timezone.now(), lease_expires_at=None
        )
        == 1
    )


def _requeue_after_infra_error(*, attempt: Attempt, worker: str, outcome: AttemptOutcome) -> bool:
    """Back to queued with capped exponential backoff; the retry is a new message.

    The failed run's usage stays billed: it becomes one of the attempt's superseded runs and its
    usage columns hold what all of them cost until the retry records its own run on top.
    """
    retries = attempt.retries + 1
    now = timezone.now()
    fields = outcome.as_fields()
    runs = [
        *attempt.superseded_runs,
        superseded_run(fields, error=fields["error_detail"], at=now.isoformat(), reason="retry"),
    ]
    updated = Attempt.objects.filter(id=attempt.id, status=Attempt.Status.RUNNING, worker=worker).update(
        status=Attempt.Status.QUEUED,
        retries=retries,
        superseded_runs=runs,
        **billed_fields(None, runs),
        error_detail=fields["error_detail"],
        worker="",
        lease_expires_at=None,
        dispatched_at=now,
    )
    if updated:
        base = settings.ATTEMPT_RETRY_BACKOFF_SECONDS
        countdown = min(base * (2 ** (retries - 1)), settings.ATTEMPT_RETRY_BACKOFF_MAX_SECONDS)
        transaction.on_commit(lambda: _send_run_attempt([attempt.id], countdown=countdown))
    return updated == 1


def attempts_sweep(*, now=None, same_host_dead_only: bool = False) -> int:
    """Re-queue attempts whose worker died; re-send lost messages; top up windows.

    A running attempt is stale when its lease expired, or at once when its worker ran on this
    host and that process no longer exists. Each re-queue spends one retry; past the budget the
    attempt is infra_error (worker lost). Returns the number of attempts re-queued.
    """
    now = now or timezone.now()
    host = socket.gethostname()
    stale_ids, exhausted_ids = [], []
    running = Attempt.objects.filter(status=Attempt.Status.RUNNING).values_list(
        "id", "worker", "lease_expires_at", "retries"
    )
    for attempt_id, worker, lease, retries in running:
        dead_here = _dead_on_this_host(worker, host)
        expired = lease is not None and lease < now and not same_host_dead_only
        if dead_here or expired:
            (stale_ids if retries < settings.ATTEMPT_MAX_RETRIES else exhausted_ids).append(attempt_id)
    with transaction.atomic():
        if stale_ids:
            Attempt.objects.filter(id__in=stale_ids, status=Attempt.Status.RUNNING).update(
                status=Attempt.Status.QUEUED,
                worker="",
                lease_expires_at=None,
                dispatched_at=None,
                retries=F("retries") + 1,
            )
        if exhausted_ids:
            Attempt.objects.filter(id__in=exhausted_ids, status=Attempt.Status.RUNNING).update(
                status=Attempt.Status.INFRA_ERROR,
                error_detail="worker lost",
                finished_at=now,
                lease_expires_at=None,
            )
        # Messages lost with a dead worker's prefetch: queued, dispatched long ago, never claimed.
        lost_after = timedelta(seconds=settings.ATTEMPT_REDISPATCH_SECONDS)
        Attempt.objects.filter(status=Attempt.Status.QUEUED, dispatched_at__lt=now - lost_after).update(
            dispatched_at=None
        )
    _dispatch_running_campaigns(refresh_summaries=bool(exhausted_ids))
    return len(stale_ids)


def attempts_resend_lost(*, sent_before) -> int:
    """Re-send the messages of queued attempts dispatched before ``sent_before``.

    A Redis broker restarted without persistence lost every message it held: an attempt queued
    and dispatched before the broker started again is never delivered. The worker calls this
    with the broker's start time as soon as it is connected again, instead of waiting for the
    sweep's ATTEMPT_REDISPATCH_SECONDS. Side effects: clears those attempts' dispatched_at, then
    tops up every running campaign's window (messages after commit) and sends adaptive campaigns
    a fresh decision message. Duplicate messages are harmless: claims are conditional updates.
    Returns the number of attempts whose messages were lost.
    """
    lost = Attempt.objects.filter(status=Attempt.Status.QUEUED, dispatched_at__lt=sent_before).update(
        dispatched_at=None
    )
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


def attempts_backfill_signatures(
    *, campaign_ids: list[int] | None = None, recompute: bool = False
) -> BackfillReport:
    """Give every stored failed attempt its SPEC §8 signature (all of them again with ``recompute``).

    Side effects: Attempt.signature / signature_items of the attempts whose signature changed;
    the touched campaigns' TaskSummary.updated_at (pages cached by summary stamp recompute).
    """
    return backfill_signatures(campaign_ids=campaign_ids, recompute=recompute)


def _dead_on_this_host(worker: str, host: str) -> bool:
    name, _, pid = worker.rpartition(":")
    if name != host or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
