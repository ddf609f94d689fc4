"""Drift watch services: schedule, runs as campaigns, evaluation against baseline and previous run,
alerts when a change clears the noise floor, the webhook, and provider-change early runs."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from apps.agents.models import AgentConfig
from apps.drift.models import Watch, WatchRun
from apps.drift.schedule import ScheduleError, next_cron_time, parse_cron
from apps.drift.selectors import open_alert_count
from apps.drift.services import (
    WatchBusy,
    WatchInputError,
    drift_tick,
    run_acknowledge,
    run_make_baseline,
    watch_run_now,
    watch_update,
)
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = pytest.mark.django_db


def switching_agent(*, switch_at: str) -> AgentConfig:
    """A simulated persona that turns from cautious (pass@1 ~75%) into steady (~40%) at `switch_at`:
    a silent provider-side change, nothing in the configuration or the answers gives it away."""
    return AgentConfig.objects.create(
        name="cautious, until it is not (simulation)",
        kind=AgentConfig.Kind.SIMULATED,
        persona="cautious",
        model="sim-cautious",
        parameters={"switch_at": switch_at, "switch_to": "steady"},
    )


def test_first_tick_starts_a_run_as_a_campaign_and_schedules_the_next(make_watch, tick):
    watch = make_watch(interval_minutes=30)
    now = timezone.now()

    report = tick(now=now)

    run = WatchRun.objects.get(watch=watch)
    watch.refresh_from_db()
    assert (report.started, run.number, run.trigger) == (1, 1, "schedule")
    assert run.campaign.n_attempts == 4
    assert run.campaign.tasks.count() == 8
    assert watch.next_run_at == now + timedelta(minutes=30)


def test_runs_never_overlap_and_a_finished_run_is_evaluated_on_the_next_tick(make_watch):
    from apps.drift.services import drift_tick

    watch = make_watch(interval_minutes=1)
    start = timezone.now()
    drift_tick(now=start)
    # The next run is due, but run 1's attempts are still queued: nothing new starts.
    assert drift_tick(now=start + timedelta(minutes=2)).started == 0
    run = WatchRun.objects.get(watch=watch)
    assert run.status == "running"


def test_first_evaluated_run_becomes_the_baseline_and_an_unchanged_rerun_raises_no_alert(make_watch, tick):
    watch = make_watch(interval_minutes=1)
    start = timezone.now()
    tick(now=start)
    tick(now=start + timedelta(minutes=1))  # evaluates run 1 and starts run 2
    tick(now=start + timedelta(minutes=2))  # evaluates run 2

    watch.refresh_from_db()
    first, second = WatchRun.objects.filter(watch=watch).order_by("number")[:2]
    assert watch.baseline_id == first.campaign_id
    assert (first.status, first.result["vs_baseline"], first.result["vs_previous"]) == ("done", None, None)
    assert second.result["vs_baseline"]["campaign_id"] == first.campaign_id
    assert second.result["vs_previous"]["campaign_id"] == first.campaign_id
    assert (second.alert, second.alert_reasons) == (False, [])
    assert second.result["vs_baseline"]["all_n"]["clears"] is False


def test_watch_detects_a_seeded_change_raises_the_alert_and_calls_the_webhook(
    alice, team_a, starter_suite, no_dispatch, tick, settings, webhook_server
):
    from apps.drift.services import watch_create

    settings.DRIFT_WEBHOOK_URL = webhook_server.url
    settings.DRIFT_WEBHOOK_SECRET = "s3cret"
    agent = switching_agent(switch_at="2999-01-01T00:00:00+00:00")
    watch = watch_create(
        name="silent change",
        team=team_a,
        owner=alice,
        agent=agent,
        suite=starter_suite,
        n_attempts=4,
        interval_minutes=1,
    )
    start = timezone.now()
    tick(now=start)  # run 1: cautious
    # The provider swaps the model behind the same name: the configuration does not change.
    AgentConfig.objects.filter(pk=agent.pk).update(
        parameters={"switch_at": "2000-01-01T00:00:00+00:00", "switch_to": "steady"}
    )
    tick(now=start + timedelta(minutes=1))  # evaluates run 1, starts run 2: steady
    tick(now=start + timedelta(minutes=2))  # evaluates run 2

    second = WatchRun.objects.get(watch=watch, number=2)
    vs_baseline = second.result["vs_baseline"]
    assert second.alert is True
    assert vs_baseline["pass_at_1"]["clears"] is True
    assert vs_baseline["pass_at_1"]["value"] < -vs_baseline["pass_at_1"]["mdd"] < 0
    assert vs_baseline["pass_at_1"]["hi"] < 0  # the whole 95% interval is a drop
    assert second.result["vs_previous"]["pass_at_1"] == vs_baseline["pass_at_1"]  # run 1 is the baseline
    assert vs_baseline["stopped_being_dependable"] != []
    assert second.alert_reasons[0].startswith("pass@1 -")
    assert "vs baseline (silent change · run 1)" in second.alert_reasons[0]
    assert open_alert_count(user=alice) == 1
    # The webhook got one signed POST naming the watch, the run and why.
    assert len(webhook_server.received) == 1
    delivery = webhook_server.received[0]
    assert delivery["body"]["event"] == "drift.alert"
    assert (delivery["body"]["watch"]["id"], delivery["body"]["run"]["number"]) == (watch.pk, 2)
    assert delivery["body"]["reasons"] == second.alert_reasons
    body = json.dumps(delivery["body"], sort_keys=True, default=str).encode()
    expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert delivery["headers"]["X-Thinkingbox-Signature"] == expected
    second.refresh_from_db()
    assert second.webhook_status == "sent, HTTP 200"


def test_failed_webhook_delivery_is_recorded(make_watch, settings, webhook_server):
    from apps.drift.services import webhook_deliver

    settings.DRIFT_WEBHOOK_URL = webhook_server.url
    webhook_server.status = 500
    watch = make_watch()
    drift_tick()
    run = WatchRun.objects.get(watch=watch)
    delivery = webhook_deliver(run_id=run.pk)
    run.refresh_from_db()
    assert (delivery.ok, run.webhook_status, run.webhook_sent_at) == (False, "failed, HTTP 500", None)


def test_acknowledging_clears_the_open_alert_and_a_run_can_become_the_baseline(
    make_watch, tick, alice, trish
):
    watch = make_watch()
    tick()
    run = WatchRun.objects.get(watch=watch)
    WatchRun.objects.filter(pk=run.pk).update(alert=True, alert_reasons=["x"])
    assert open_alert_count(user=trish) == 1

    run_acknowledge(run=run, user=trish)

    assert (open_alert_count(user=alice), run.acknowledged_by) == (0, trish)
    watch.baseline = None
    watch.save(update_fields=["baseline"])
    assert run_make_baseline(run=run).baseline_id == run.campaign_id


@pytest.fixture
def endpoint():
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=1)).start()
    server.system_fingerprint = "fp_1"
    yield server
    server.stop()


def endpoint_agent(server) -> AgentConfig:
    return AgentConfig.objects.create(
        name="endpoint agent",
        kind=AgentConfig.Kind.OPENAI,
        model="watched-model",
        base_url=server.base_url,
        parameters={"retry": {"max_retries": 1, "base_delay_s": 0.01, "max_delay_s": 0.02}},
    )


def test_probe_sees_a_changed_fingerprint_between_runs_and_starts_the_next_run_early(
    make_watch, tick, endpoint
):
    watch = make_watch(
        endpoint_agent(endpoint), name="endpoint watch", n=1, interval_minutes=24 * 60, probe_minutes=5
    )
    start = timezone.now()
    tick(now=start)  # run 1 (fp_1)
    tick(now=start + timedelta(minutes=1))  # evaluates run 1; probes (same fingerprint): nothing due
    assert WatchRun.objects.filter(watch=watch).count() == 1
    first = WatchRun.objects.get(watch=watch, number=1)
    assert first.provider == [
        {"model": "watched-model", "system_fingerprint": "fp_1", "headers": {}, "attempts": 8}
    ]

    endpoint.system_fingerprint = "fp_2"  # the provider changes the model behind the name
    report = tick(now=start + timedelta(minutes=7))  # a day before the schedule

    second = WatchRun.objects.get(watch=watch, number=2)
    assert (report.probed, report.started, second.trigger) == (1, 1, "provider_change")
    tick(now=start + timedelta(minutes=8))
    second.refresh_from_db()
    assert second.provider_changed is True
    assert second.provider[0]["system_fingerprint"] == "fp_2"
    watch.refresh_from_db()
    assert watch.pending_trigger == ""  # confirmed by an early run; no further early run


def test_a_run_that_saw_another_model_makes_the_next_run_due_at_once(make_watch, tick, endpoint):
    from tests.campaigns.conftest import drain

    watch = make_watch(
        endpoint_agent(endpoint), name="no probe", n=1, interval_minutes=24 * 60, probe_minutes=0
    )
    start = timezone.now()
    tick(now=start)
    tick(now=start + timedelta(minutes=1))
    endpoint.system_fingerprint = "fp_2"
    manual = watch_run_now(watch=watch)
    with pytest.raises(WatchBusy):
        watch_run_now(watch=watch)
    drain(manual.campaign)

    tick(
        now=start + timedelta(minutes=2)
    )  # evaluates the manual run (the identity changed), runs again at once

    manual.refresh_from_db()
    assert (manual.trigger, manual.provider_changed) == ("manual", True)
    confirming = WatchRun.objects.get(watch=watch, number=3)
    assert (confirming.trigger, confirming.started_at) == ("provider_change", start + timedelta(minutes=2))
    watch.refresh_from_db()
    assert watch.pending_trigger == ""


def test_watch_input_is_checked(make_watch, run_campaign):
    with pytest.raises(ScheduleError, match="either interval_minutes"):
        make_watch(interval_minutes=None)
    with pytest.raises(ScheduleError, match="five fields"):
        make_watch(interval_minutes=None, cron="0 6 * *")
    baseline = run_campaign("sim:steady", tasks=2, n=2)
    with pytest.raises(WatchInputError, match="baseline: has N = 2"):
        make_watch(n=4, baseline=baseline)
    make_watch(name="once")
    with pytest.raises(WatchInputError, match="already has a watch"):
        make_watch(name="once")


def test_baseline_campaign_lends_its_user_simulator_judge_and_prices(make_watch, run_campaign):
    from apps.agents.services import price_sheet_default

    baseline = run_campaign("sim:steady", tasks=2, n=4, price_sheet=price_sheet_default())
    watch = make_watch(baseline=baseline)
    assert (watch.user_simulator, watch.judge, watch.price_sheet_id) == (
        baseline.user_simulator,
        baseline.judge,
        baseline.price_sheet_id,
    )


def test_pausing_clears_the_next_run_and_a_new_schedule_counts_from_the_last_run(make_watch, tick):
    watch = make_watch(interval_minutes=60)
    tick()
    watch_update(watch=watch, changes={"enabled": False})
    assert watch.next_run_at is None
    watch_update(watch=watch, changes={"enabled": True, "cron": "30 6 * * *"})
    run = WatchRun.objects.get(watch=watch)
    assert (watch.interval_minutes, watch.cron) == (None, "30 6 * * *")
    assert watch.next_run_at >= timezone.now() - timedelta(seconds=5)
    assert watch.next_run_at.minute == 30 or watch.next_run_at <= run.started_at + timedelta(days=1)
    with pytest.raises(WatchInputError, match="cannot change"):
        watch_update(watch=watch, changes={"n_attempts": 3})


def test_cron_next_time_matches_every_field():
    weekdays = parse_cron("0 6 * * mon-fri")
    friday_evening = datetime(2026, 3, 6, 18, 0, tzinfo=UTC)  # a Friday
    assert next_cron_time(weekdays, after=friday_evening) == datetime(2026, 3, 9, 6, 0, tzinfo=UTC)
    quarter = parse_cron("*/15 * * * *")
    assert next_cron_time(quarter, after=datetime(2026, 3, 6, 18, 7, 30, tzinfo=UTC)) == datetime(
        2026, 3, 6, 18, 15, tzinfo=UTC
    )
    yearly = parse_cron("0 0 1 1 *")
    assert next_cron_time(yearly, after=datetime(2026, 3, 6, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)
    with pytest.raises(ScheduleError, match="never occurs"):
        parse_cron("0 0 30 2 *")
    with pytest.raises(ScheduleError):
        parse_cron("61 * * * *")


def test_watch_schedule_text():
    assert [Watch(interval_minutes=m).schedule_text for m in (1, 5, 60, 120, 1440, 2880)] == [
        "every minute",
        "every 5 minutes",
        "every hour",
        "every 2 hours",
        "every day",
        "every 2 days",
    ]
    assert Watch(cron="0 6 * * *").schedule_text == "cron 0 6 * * *"
