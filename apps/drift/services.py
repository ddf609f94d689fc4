"""Writes of the drift app: watches, their runs, evaluation, provider probes, alerts and the webhook.

The beat schedule sends ``drift.tick`` (TICK_TASK) every TB_DRIFT_TICK_SECONDS; ``drift_tick``
then, in order: evaluates runs whose campaign finished (comparisons, flips, alert, webhook),
probes the endpoints of watches between runs (a changed model identity makes the next run due at
once), and starts the runs that are due. Every step claims its row with a conditional update, so
two ticks at once (or a tick run twice) never start or evaluate anything twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.agents.models import AgentConfig
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_create, campaign_start
from apps.drift import evaluation, webhook
from apps.drift.models import Watch, WatchRun
from apps.drift.schedule import ScheduleError, check_schedule, next_run_after
from tb_engine.attempt_setup import agent_endpoint
from tb_engine.llm.probe import probe_identity
from thinkingbox_web.celery import app as celery_app

__all__ = [
    "TICK_TASK",
    "WEBHOOK_TASK",
    "ScheduleError",
    "TickReport",
    "WatchBusy",
    "WatchInputError",
    "drift_tick",
    "run_acknowledge",
    "run_make_baseline",
    "watch_create",
    "watch_delete",
    "watch_run_now",
    "watch_update",
    "webhook_deliver",
]

log = logging.getLogger(__name__)

TICK_TASK = "drift.tick"
WEBHOOK_TASK = "drift.send_webhook"
IN_PROGRESS = (WatchRun.Status.RUNNING, WatchRun.Status.EVALUATING)


class WatchInputError(ValueError):
    """A watch that cannot be set up as asked (the message names the field)."""


class WatchBusy(Exception):
    """The watch already has a run in progress."""


def _check_baseline(*, baseline: Campaign | None, suite, n_attempts: int) -> None:
    if baseline is None:
        return
    if baseline.suite_id != suite.pk:
        raise WatchInputError("baseline: must be a campaign on the watch's suite")
    if baseline.n_attempts != n_attempts:
        raise WatchInputError(
            f"baseline: has N = {baseline.n_attempts}, the watch runs N = {n_attempts}; all-N is only comparable at equal N"
        )


def watch_create(
    *,
    name: str,
    team,
    owner,
    agent: AgentConfig,
    suite,
    tasks=None,
    n_attempts: int = 5,
    interval_minutes: int | None = None,
    cron: str = "",
    baseline: Campaign | None = None,
    probe_minutes: int = 60,
    webhook: bool = True,
    enabled: bool = True,
) -> Watch:
    """Create a watch; its first run is due at once (the next tick starts it).

    Side effects: one Watch row with its task selection (empty: the whole suite). The user
    simulator, judge and price sheet are the baseline's, so runs and baseline are graded alike
    (scripted user, keyword judge and no prices without a baseline). Raises WatchInputError or
    ScheduleError. Without a baseline the first run becomes it.
    """
    if n_attempts < 1:
        raise WatchInputError("n_attempts: must be at least 1")
    check_schedule(interval_minutes=interval_minutes, cron=cron)
    _check_baseline(baseline=baseline, suite=suite, n_attempts=n_attempts)
    selected = list(tasks or [])
    if any(task.suite_id != suite.pk for task in selected):
        raise WatchInputError("tasks: every task must belong to the watch's suite")
    if Watch.objects.filter(team=team, name=name).exists():
        raise WatchInputError(f"name: the team already has a watch called {name!r}")
    with transaction.atomic():
        watch = Watch.objects.create(
            name=name,
            team=team,
            owner=owner,
            agent=agent,
            suite=suite,
            n_attempts=n_attempts,
            interval_minutes=interval_minutes or None,
            cron=cron.strip(),
            baseline=baseline,
            user_simulator=(baseline.user_simulator if baseline else None) or {"kind": "scripted"},
            judge=(baseline.judge if baseline else None) or {"kind": "keyword"},
            price_sheet=baseline.price_sheet if baseline else None,
            probe_minutes=probe_minutes,
            webhook=webhook,
            enabled=enabled,
            next_run_at=timezone.now() if enabled else None,
        )
        watch.tasks.set(selected)
    return watch


EDITABLE = ("name", "interval_minutes", "cron", "baseline", "probe_minutes", "webhook", "enabled")


def watch_update(*, watch: Watch, changes: dict[str, Any]) -> Watch:
    """Change a watch's schedule, baseline, probe, webhook, name or enabled flag.

    Side effects: the Watch row; a new schedule (or re-enabling) sets the next run from now.
    Agent, tasks and N do not change (earlier runs must stay comparable): make a new watch.
    """
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise WatchInputError(f"{', '.join(unknown)}: cannot change on a watch; create a new watch instead")
    interval = changes.get("interval_minutes", watch.interval_minutes)
    cron = changes.get("cron", watch.cron) or ""
    if "interval_minutes" in changes and "cron" not in changes and interval:
        cron = ""
    if "cron" in changes and "interval_minutes" not in changes and cron:
        interval = None
    check_schedule(interval_minutes=interval, cron=cron)
    if "baseline" in changes:
        _check_baseline(baseline=changes["baseline"], suite=watch.suite, n_attempts=watch.n_attempts)
    if (
        "name" in changes
        and Watch.objects.filter(team=watch.team, name=changes["name"]).exclude(pk=watch.pk).exists()
    ):
        raise WatchInputError(f"name: the team already has a watch called {changes['name']!r}")
    rescheduled = (interval, cron) != (watch.interval_minutes, watch.cron)
    for field, value in changes.items():
        setattr(watch, field, value)
    watch.interval_minutes, watch.cron = interval or None, cron.strip()
    now = timezone.now()
    if not watch.enabled:
        watch.next_run_at = None
    elif rescheduled or watch.next_run_at is None:
        last = watch.runs.order_by("-number").first()
        watch.next_run_at = (
            now
            if last is None
            else max(
                now,
                next_run_after(
                    interval_minutes=watch.interval_minutes, cron=watch.cron, after=last.started_at
                ),
            )
        )
    watch.save()
    return watch


def watch_delete(*, watch: Watch) -> None:
    """Delete a watch and its run records. Side effects: the Watch and WatchRun rows; the runs' campaigns stay."""
    watch.delete()


def watch_run_now(*, watch: Watch) -> WatchRun:
    """Start a run now (trigger "manual"). Side effects: a campaign and its WatchRun; raises WatchBusy."""
    run = _start_run(watch.pk, trigger=Watch.Trigger.MANUAL, now=timezone.now(), force=True)
    if run is None:
        raise WatchBusy(f"watch {watch.name!r} has a run in progress")
    return run


def run_acknowledge(*, run: WatchRun, user) -> WatchRun:
    """Mark the run's alert as seen. Side effects: acknowledged_at/by on the WatchRun (first time only)."""
    WatchRun.objects.filter(pk=run.pk, acknowledged_at__isnull=True).update(
        acknowledged_at=timezone.now(), acknowledged_by=user
    )
    run.refresh_from_db()
    return run


def run_make_baseline(*, run: WatchRun) -> Watch:
    """Compare later runs with this run's campaign. Side effects: the watch's baseline."""
    watch = run.watch
    watch.baseline = run.campaign
    watch.save(update_fields=["baseline"])
    return watch


# --- The tick -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TickReport:
    evaluated: int
    probed: int
    started: int


def drift_tick(*, now: datetime | None = None) -> TickReport:
    """Evaluate finished runs, probe endpoints, start due runs (in that order). Safe to run twice at once."""
    now = now or timezone.now()
    evaluated = _evaluate_finished(now)
    probed = _probe_providers(now)
    started = 0
    for watch_id, trigger in Watch.objects.filter(enabled=True, next_run_at__lte=now).values_list(
        "pk", "pending_trigger"
    ):
        if _start_run(watch_id, trigger=trigger or Watch.Trigger.SCHEDULE, now=now) is not None:
            started += 1
    return TickReport(evaluated=evaluated, probed=probed, started=started)


def _start_run(watch_id: int, *, trigger: str, now: datetime, force: bool = False) -> WatchRun | None:
    with transaction.atomic():
        watch = Watch.objects.select_for_update().filter(pk=watch_id).first()
        if watch is None or (
            not force and (not watch.enabled or watch.next_run_at is None or watch.next_run_at > now)
        ):
            return None
        if watch.runs.filter(status__in=IN_PROGRESS).exists():
            return None  # never overlapping: the due run starts once this one is evaluated
        number = (watch.runs.aggregate(top=Max("number"))["top"] or 0) + 1
        campaign = campaign_create(
            name=f"{watch.name} · run {number}",
            team=watch.team,
            owner=watch.owner,
            agent=watch.agent,
            suite=watch.suite,
            tasks=list(watch.tasks.all()) or None,
            n_attempts=watch.n_attempts,
            seed=number,
            user_simulator=watch.user_simulator,
            judge=watch.judge,
            price_sheet=watch.price_sheet,
        )
        run = WatchRun.objects.create(
            watch=watch, campaign=campaign, number=number, trigger=trigger, started_at=now
        )
        watch.next_run_at = (
            next_run_after(interval_minutes=watch.interval_minutes, cron=watch.cron, after=now)
            if watch.enabled
            else None
        )
        watch.pending_trigger = ""
        watch.save(update_fields=["next_run_at", "pending_trigger"])
        campaign_start(campaign=campaign)
    log.info("drift: watch %s run %s started (%s), campaign %s", watch.pk, number, trigger, campaign.pk)
    return run


def _evaluate_finished(now: datetime) -> int:
    finished = (Campaign.Status.DONE, Campaign.Status.CANCELLED)
    ids = list(
        WatchRun.objects.filter(status=WatchRun.Status.RUNNING, campaign__status__in=finished)
        .order_by("watch_id", "number")
        .values_list("pk", flat=True)
    )
    count = 0
    for run_id in ids:
        if WatchRun.objects.filter(pk=run_id, status=WatchRun.Status.RUNNING).update(
            status=WatchRun.Status.EVALUATING
        ):
            try:
                _evaluate(WatchRun.objects.select_related("watch", "campaign").get(pk=run_id), now)
            except Exception:
                WatchRun.objects.filter(pk=run_id).update(status=WatchRun.Status.RUNNING)
                raise
            count += 1
    return count


def _evaluate(run: WatchRun, now: datetime) -> None:
    watch, campaign = run.watch, run.campaign
    previous = (
        WatchRun.objects.filter(watch=watch, number__lt=run.number, status=WatchRun.Status.DONE)
        .select_related("campaign")
        .order_by("-number")
        .first()
    )
    identities = evaluation.provider_identities(campaign)
    changed = bool(
        previous
        and previous.provider
        and identities
        and evaluation.identity_keys(previous.provider) != evaluation.identity_keys(identities)
    )
    with transaction.atomic():
        watch = Watch.objects.select_for_update().get(pk=watch.pk)
        if campaign.status != Campaign.Status.DONE:
            run.status, run.result = (
                WatchRun.Status.FAILED,
                {"notes": [f"campaign {campaign.get_status_display().lower()}"]},
            )
        else:
            if watch.baseline_id is None:
                watch.baseline = campaign  # the first finished run becomes the baseline
                watch.save(update_fields=["baseline"])
            baseline = watch.baseline if watch.baseline_id != campaign.pk else None
            result = evaluation.evaluate(
                campaign, baseline=baseline, previous=previous.campaign if previous else None
            )
            run.result = result
            run.alert_reasons = evaluation.alert_reasons(result)
            run.alert = bool(run.alert_reasons)
            run.status = WatchRun.Status.DONE
        run.provider, run.provider_changed, run.evaluated_at = identities, changed, now
        run.save()
        if changed and run.trigger != Watch.Trigger.PROVIDER_CHANGE and watch.enabled:
            # The endpoint answered with another model than last time: confirm with a run now.
            watch.pending_trigger, watch.next_run_at = Watch.Trigger.PROVIDER_CHANGE, now
            watch.save(update_fields=["pending_trigger", "next_run_at"])
        if run.alert and watch.webhook and settings.DRIFT_WEBHOOK_URL:
            transaction.on_commit(lambda: celery_app.signature(WEBHOOK_TASK, args=(run.pk,)).apply_async())
    log.info("drift: watch %s run %s evaluated, alert=%s", watch.pk, run.number, run.alert)


def _agent_config(agent: AgentConfig) -> dict[str, Any]:
    return {
        "spec": agent.engine_spec,
        "name": agent.name,
        "model": agent.model,
        "base_url": agent.base_url,
        "api_key_env": agent.api_key_env,
        "parameters": agent.parameters,
        "max_concurrency": agent.max_concurrency,
        "provider_headers": list(settings.PROVIDER_HEADERS),
    }


def _probe_providers(now: datetime) -> int:
    """Between runs, ask each endpoint watch's model identity; a new one makes the next run due now."""
    candidates = (
        Watch.objects.filter(
            enabled=True, agent__kind=AgentConfig.Kind.OPENAI, probe_minutes__gt=0, pending_trigger=""
        )
        .exclude(runs__status__in=IN_PROGRESS)
        .select_related("agent")
        .distinct()
    )
    probed = 0
    for watch in candidates:
        if watch.last_probe_at and (now - watch.last_probe_at).total_seconds() < watch.probe_minutes * 60:
            continue
        last = (
            WatchRun.objects.filter(watch=watch, status=WatchRun.Status.DONE)
            .exclude(provider=[])
            .order_by("-number")
            .first()
        )
        try:
            identity = probe_identity(agent_endpoint(_agent_config(watch.agent))).to_dict()
        except Exception as exc:  # an endpoint that is down is the next run's infra error, not a change
            Watch.objects.filter(pk=watch.pk).update(last_probe_at=now, last_probe={"error": str(exc)[:500]})
            probed += 1
            continue
        changed = last is not None and not (
            evaluation.identity_keys([identity]) <= evaluation.identity_keys(last.provider)
        )
        updates: dict[str, Any] = {"last_probe_at": now, "last_probe": {**identity, "changed": changed}}
        if changed:
            updates.update(pending_trigger=Watch.Trigger.PROVIDER_CHANGE, next_run_at=now)
            log.info("drift: watch %s endpoint identity changed: %s", watch.pk, identity)
        Watch.objects.filter(pk=watch.pk, pending_trigger="").update(**updates)
        probed += 1
    return probed


# --- Webhook -----------------------------------------------------------------------------------


def webhook_payload(run: WatchRun) -> dict[str, Any]:
    """What the webhook receives for a run's alert."""
    watch = run.watch
    base = settings.PUBLIC_URL.rstrip("/")
    return {
        "event": "drift.alert",
        "watch": {"id": watch.pk, "name": watch.name, "url": f"{base}/drift/{watch.pk}/"},
        "run": {
            "id": run.pk,
            "number": run.number,
            "trigger": run.trigger,
            "campaign_id": run.campaign_id,
            "campaign": run.campaign.name,
            "started_at": run.started_at.isoformat(),
            "evaluated_at": run.evaluated_at.isoformat() if run.evaluated_at else None,
            "provider": run.provider,
            "provider_changed": run.provider_changed,
        },
        "reasons": run.alert_reasons,
        "figures": run.result.get("figures"),
        "vs_baseline": run.result.get("vs_baseline"),
        "vs_previous": run.result.get("vs_previous"),
    }


def webhook_deliver(*, run_id: int) -> webhook.Delivery:
    """POST the run's alert to the webhook URL of the settings. Side effects: the run's webhook status."""
    run = WatchRun.objects.select_related("watch", "campaign").get(pk=run_id)
    url = settings.DRIFT_WEBHOOK_URL
    if not url:
        delivery = webhook.Delivery(ok=False, status="no webhook URL configured")
    else:
        delivery = webhook.post(
            url,
            webhook_payload(run),
            secret=settings.DRIFT_WEBHOOK_SECRET,
            timeout=settings.DRIFT_WEBHOOK_TIMEOUT_SECONDS,
        )
    WatchRun.objects.filter(pk=run_id).update(
        webhook_status=("sent, " if delivery.ok else "failed, ") + delivery.status,
        webhook_sent_at=timezone.now() if delivery.ok else None,
    )
    return delivery
