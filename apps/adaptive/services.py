"""Writes of the adaptive app: calibrations and the dispatcher of adaptive campaigns.

The statistics are the engine's (``tb_engine.irt``); this module turns stored rows into its
inputs and its decisions into rows. Attempts are campaigns' rows: they are added only through
``apps.campaigns.services.campaign_extend``, which locks the campaign so two dispatchers run one
after the other and a plan (a pure function of the counts) never adds an attempt twice.
"""

from __future__ import annotations

import hashlib
import logging
from functools import lru_cache

import numpy as np
import pandas as pd
from django.db import IntegrityError, transaction
from django.db.models import Max

from apps.adaptive.models import AdaptiveState, Calibration
from apps.attempts.selectors.task_outcomes import done_verdicts, task_counts
from apps.campaigns.models import Campaign
from apps.campaigns.services import Extension, TaskCounts, campaign_cancel, campaign_extend
from tb_engine.irt import AdaptiveConfig, CalibrationError, CampaignOutcomes, calibrate, leave_one_out, plan
from tb_engine.irt.calibration import Calibration as EngineCalibration
from tb_engine.irt.estimate import estimate_figures

log = logging.getLogger(__name__)

# Re-estimate a running campaign's figures every this many decisions (and always at the end).
ESTIMATE_EVERY = 25


def calibration_campaigns(*, suite, team) -> list[Campaign]:
    """Finished full (not adaptive) campaigns of the suite and team: what a calibration may use."""
    return list(
        Campaign.objects.filter(suite=suite, team=team, status=Campaign.Status.DONE, adaptive=False).order_by(
            "pk"
        )
    )


def _cells(campaigns: list[Campaign]) -> pd.DataFrame:
    rows = task_counts(campaign_ids=[c.pk for c in campaigns])
    return pd.DataFrame(rows, columns=["campaign", "task_id", "domain", "n", "c"])


def _campaigns_key(cells: pd.DataFrame) -> str:
    per_campaign = cells.groupby("campaign")[["n", "c"]].sum().sort_index()
    blob = ";".join(f"{campaign}:{row.n}:{row.c}" for campaign, row in per_campaign.iterrows())
    return hashlib.sha256(blob.encode()).hexdigest()


def _outcomes(campaigns: list[Campaign], cells: pd.DataFrame) -> list[CampaignOutcomes]:
    """Each campaign's done verdicts per task, in index order (what leave-one-out replays)."""
    by_campaign: dict[int, dict[str, list[float]]] = {c.pk: {} for c in campaigns}
    for campaign_id, task_id, _index, passed in done_verdicts(campaign_ids=list(by_campaign)):
        by_campaign[campaign_id].setdefault(task_id, []).append(1.0 if passed else 0.0)
    domains = dict(zip(cells["task_id"], cells["domain"]))
    result = []
    for campaign in campaigns:
        tasks = by_campaign[campaign.pk]
        ids = tuple(sorted(tasks))
        width = max([campaign.n_attempts, *(len(v) for v in tasks.values())])
        matrix = np.full((len(ids), width), np.nan)
        for row, task_id in enumerate(ids):
            matrix[row, : len(tasks[task_id])] = tasks[task_id]
        result.append(
            CampaignOutcomes(
                name=str(campaign.pk),
                task_ids=ids,
                domains=tuple(domains.get(t, "") for t in ids),
                outcomes=matrix,
                n_attempts=campaign.n_attempts,
            )
        )
    return result


def calibration_create(
    *, suite, team, user=None, campaigns: list[Campaign] | None = None, validate: bool = True
) -> Calibration:
    """Calibrate the item response model on the team's stored campaigns of the suite.

    ``campaigns`` defaults to every finished full campaign of the suite and team. The same
    campaigns with the same attempts give the same calibration back (no new version). With
    ``validate`` and at least four campaigns, the leave-one-campaign-out replay runs too
    (one more fit per campaign). Side effects: one Calibration row (next version) and its
    campaign links. Raises CalibrationError when the data cannot be calibrated.
    """
    chosen = campaigns if campaigns is not None else calibration_campaigns(suite=suite, team=team)
    chosen = [c for c in chosen if c.suite_id == suite.pk and c.team_id == team.pk and not c.adaptive]
    cells = _cells(chosen)
    cells = cells[cells["n"] > 0]
    if cells.empty:
        raise CalibrationError(f"no finished full campaign of suite {suite.name} with done attempts")
    key = _campaigns_key(cells)
    existing = Calibration.objects.filter(suite=suite, team=team, campaigns_key=key).first()
    if existing is not None:
        return existing
    fitted = calibrate(cells)
    validation = None
    used = [c for c in chosen if str(c.pk) in set(fitted.campaigns)]
    if validate and len(used) >= 4:
        validation = leave_one_out(_outcomes(used, cells)).to_dict()
    for _ in range(3):  # two calibrations of one suite at once: the loser takes the next version
        try:
            with transaction.atomic():
                version = (
                    Calibration.objects.filter(suite=suite, team=team).aggregate(v=Max("version"))["v"] or 0
                ) + 1
                row = Calibration.objects.create(
                    suite=suite,
                    team=team,
                    version=version,
                    campaigns_key=key,
                    dimensions=list(fitted.dimensions),
                    n_tasks=fitted.n_tasks,
                    n_campaigns=len(fitted.campaigns),
                    model=fitted.to_dict(),
                    validation=validation,
                    seconds=fitted.seconds,
                    created_by=user,
                )
                row.campaigns.set(used)
            return row
        except IntegrityError:
            existing = Calibration.objects.filter(suite=suite, team=team, campaigns_key=key).first()
            if existing is not None:
                return existing
    raise CalibrationError("could not store the calibration (concurrent versions)")


@lru_cache(maxsize=32)
def _engine_calibration(pk: int, created_at: str) -> EngineCalibration:
    """Calibration rows never change: parse each once per process (keyed by id and creation time,
    so a reused id — a test database rolled back — is never served the old row)."""
    return EngineCalibration.from_dict(Calibration.objects.values_list("model", flat=True).get(pk=pk))


def engine_calibration(calibration: Calibration) -> EngineCalibration:
    """The engine object of a stored calibration."""
    return _engine_calibration(calibration.pk, calibration.created_at.isoformat())


def _resolve_calibration(campaign: Campaign) -> Calibration | None:
    wanted = campaign.adaptive_options.get("calibration")
    calibrations = Calibration.objects.filter(suite_id=campaign.suite_id, team_id=campaign.team_id)
    if wanted is not None:
        return calibrations.filter(pk=wanted).first()
    return calibrations.order_by("-version").first()


def adaptive_dispatch(*, campaign_id: int) -> str:
    """Decide an adaptive campaign's next attempts after results came in; safe to run twice.

    Side effects: the campaign's AdaptiveState (calibration pinned on the first run, stop reason,
    SEs, estimate), new queued attempts through campaigns.services.campaign_extend, the campaign
    finished when the plan stops, or cancelled when there is no calibration to plan with.
    Returns what happened ("added N", "finished: reason", "waiting", "not adaptive", …).
    """
    campaign = Campaign.objects.filter(pk=campaign_id).select_related("suite").first()
    if campaign is None or not campaign.adaptive:
        return "not adaptive"
    if campaign.status != Campaign.Status.RUNNING:
        return "not running"
    state, _ = AdaptiveState.objects.get_or_create(campaign=campaign)
    if state.calibration_id is None:
        chosen = _resolve_calibration(campaign)
        if chosen is None:
            state.stop_reason = "no_calibration"
            state.detail = f"no calibration of suite {campaign.suite.name} for this team: calibrate it first"
            state.save(update_fields=["stop_reason", "detail", "updated_at"])
            campaign_cancel(campaign=campaign)
            return "cancelled: no calibration"
        # Pinned once, conditionally, so a concurrent first run cannot pin another one.
        AdaptiveState.objects.filter(pk=state.pk, calibration__isnull=True).update(calibration=chosen)
        state.refresh_from_db()
    pinned = state.calibration
    assert pinned is not None, "pinned above, by this run or a concurrent one"
    cal = engine_calibration(pinned)
    config = AdaptiveConfig.from_dict({**campaign.adaptive_options, "n_attempts": campaign.n_attempts})
    index = cal.task_index()
    task_ids = dict(campaign.tasks.values_list("id", "task_id"))
    decided: dict = {}

    def decide(counts: list[TaskCounts]) -> Extension:
        T = cal.n_tasks
        done, passes, pending = np.zeros(T, np.int64), np.zeros(T, np.int64), np.zeros(T, np.int64)
        limit = np.zeros(T, np.int64)  # calibrated tasks outside this campaign are never run
        cost = np.full(T, np.nan)
        pk_of: dict[int, int] = {}
        for row in counts:
            position = index.get(task_ids.get(row.task_id, ""))
            if position is None:
                continue  # a task the calibration does not know cannot be planned or estimated
            pk_of[position] = row.task_id
            done[position], passes[position], pending[position] = row.done, row.passes, row.pending
            limit[position] = config.n_attempts
            if row.done:
                cost[position] = row.agent_cost / row.done
        step = plan(cal, done, passes, pending, config, limit=limit)
        decided.update(step=step, done=done, passes=passes, cost=cost, pending=int(pending.sum()))
        if step.stop is not None:
            return Extension(finish=True)
        return Extension(add={pk_of[t]: k for t, k in step.queue.items()})

    extension = campaign_extend(campaign_id=campaign.pk, decide=decide)
    if extension is None or "step" not in decided:
        return "not running"
    step = decided["step"]
    finished = extension.finish and decided["pending"] == 0
    fields = {
        "stop_reason": step.stop or "",
        "attempts_used": step.used,
        "budget": step.budget,
        "se_pass_at_1": step.se_pass_at_1,
        "se_all_n": step.se_all_n,
        "decisions": state.decisions + 1,
    }
    done = decided["done"]
    if finished or (state.decisions + 1) % ESTIMATE_EVERY == 0:
        fields["estimate"] = estimate_figures(
            cal,
            done,
            decided["passes"],
            n_attempts=config.n_attempts,
            cost_per_attempt=decided["cost"],
            ability=step.ability,
        )
        fields["estimate_attempts"] = int(done.sum())
    AdaptiveState.objects.filter(pk=state.pk).update(**fields)
    if extension.finish:
        return f"finished: {step.stop}" if finished else "waiting"
    return f"added {sum(extension.add.values())}"
