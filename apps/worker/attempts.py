"""One attempt on a worker: claim it, run it through the engine, record how it ended."""

from __future__ import annotations

import logging
from functools import partial

from django.conf import settings

from apps.attempts.services import (
    AttemptOutcome,
    attempt_claim,
    attempt_record,
    attempts_heartbeat,
    worker_identity,
)
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_after_record, campaign_hand_on
from apps.worker.connections import connection_release_while_waiting
from apps.worker.execution import AttemptCancelled, run_engine_attempt
from apps.worker.leases import process_leases

log = logging.getLogger(__name__)


def attempt_execute(*, attempt_id: int, worker: str | None = None) -> str:
    """Claim, run and record one attempt. Returns what happened (for logs and tests).

    Side effects: the attempt row (status, result, usage, cost), its signature and task summary,
    dispatch of the campaign's next attempt (apps.attempts.services.attempt_record), then the
    campaign's completion or adaptive decision (apps.campaigns.services.campaign_after_record).
    Safe to call twice: a second call finds the attempt claimed or finished and does nothing.
    """
    worker = worker or worker_identity()
    # Big JSON stays in the database: specs are parsed once per process (execution caches them).
    attempt = attempt_claim(attempt_id=attempt_id, worker=worker)
    if attempt is None:
        return "not-claimed"
    outcome: AttemptOutcome | None
    # Its lease is extended with those of all this process's attempts in flight (one UPDATE per beat).
    lease = process_leases(_extend_leases).hold(
        attempt_id, worker, every_s=settings.ATTEMPT_HEARTBEAT_SECONDS
    )
    try:
        outcome = run_engine_attempt(attempt, heartbeat=lease.still_ours)
    except AttemptCancelled:
        outcome = None
    except Exception as exc:  # a crash of the harness is an infrastructure error, not an agent failure
        log.exception("attempt %s crashed", attempt_id)
        outcome = AttemptOutcome.infra_error(f"harness error: {type(exc).__name__}: {exc}")
    finally:
        lease.release()
    campaign: Campaign = attempt.campaign
    hand_on = partial(campaign_hand_on, campaign=campaign)

    # Recorded here, not in a helper: with inline (eager) Celery each record runs the next attempt
    # inside itself, so every frame per attempt counts against the recursion limit.
    try:
        recorded = attempt_record(attempt=attempt, worker=worker, outcome=outcome, hand_on=hand_on)
        campaign_after_record(campaign=campaign, recorded=recorded)
    except Exception as exc:
        # The result itself could not be stored (a value the database refuses, a lost connection):
        # the attempt must not stay running forever. Record an infra error without the result.
        if outcome is None:
            raise
        log.exception("attempt %s: its result could not be stored", attempt_id)
        failed = AttemptOutcome.infra_error(
            f"harness error: the result could not be stored: {type(exc).__name__}: {exc}"[:2000]
        )
        failed.agent_usage, failed.eval_usage = outcome.agent_usage, outcome.eval_usage
        failed.agent_cost, failed.eval_cost = outcome.agent_cost, outcome.eval_cost
        recorded = attempt_record(attempt=attempt, worker=worker, outcome=failed, hand_on=hand_on)
        campaign_after_record(campaign=campaign, recorded=recorded)
    connection_release_while_waiting()
    return recorded.what


def _extend_leases(attempt_ids: list[int], worker: str) -> set[int]:
    """One beat for all of this process's attempts in flight, on the beating attempt's thread (which
    gives its connection back again: it goes on waiting on its model)."""
    try:
        return attempts_heartbeat(attempt_ids=attempt_ids, worker=worker)
    finally:
        connection_release_while_waiting()
