"""Demo-like data for the every-page smoke test: what `manage.py demo` builds, smaller, plus one of everything.

The demo's five campaigns (golden + four simulated personas) over two tasks of every domain, a
campaign still running, a cancelled one, a draft, one whose endpoint is down (infra errors), an
imported `tb infer` campaign, Team B's own campaign, triage labels/notes/assignments with a
task-health issue, an external score, a worker heartbeat and an API token: every page then has
real rows to show, and every URL parameter has a real object to point at.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from tests.campaigns.conftest import drain
from tests.support.paths import THINKINGBOX_DIR

DEMO_AGENTS = (
    ("golden", "Demo · golden replay"),
    ("sim:steady", "Demo · steady persona"),
    ("sim:explorer", "Demo · explorer persona"),
    ("sim:careless", "Demo · careless persona"),
    ("sim:cautious", "Demo · cautious persona"),
)
TB_RESULTS = THINKINGBOX_DIR / "tb_infer/append_r6.jsonl"


@dataclass
class DemoData:
    """The objects the smoke test's URLs point at (pks), by what they are."""

    campaigns: dict[str, object] = field(default_factory=dict)
    task: object = None
    attempt: object = None
    failed_attempt: object = None
    issue: object = None
    label: object = None
    agent: object = None
    price_sheet: object = None
    suite: object = None
    watch: object = None
    watch_run: object = None
    calibration: object = None
    regrade: object = None


def _two_tasks_per_domain(suite) -> list[str]:
    chosen: dict[str, list[str]] = {}
    for task_id, domain in suite.tasks.order_by("task_id").values_list("task_id", "domain__name"):
        if len(chosen.setdefault(domain, [])) < 2:
            chosen[domain].append(task_id)
    return [task_id for ids in chosen.values() for task_id in ids]


def _dead_endpoint_agent():
    from apps.agents.models import AgentConfig

    with socket.socket() as sock:  # a port nobody listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return AgentConfig.objects.create(
        name="Endpoint down",
        kind=AgentConfig.Kind.OPENAI,
        model="gpt-4o-mini",
        base_url=f"http://127.0.0.1:{port}/v1",
        parameters={"retry": {"max_retries": 0, "base_delay_s": 0.0, "max_delay_s": 0.0, "timeout_s": 2.0}},
    )


def build_demo_data(*, run_campaign, make_campaign, starter_suite, team_a, team_b, alice, trish, erin):
    """Create the smoke test's data set (a few hundred attempts, run in this process) and return its handles."""
    from django.conf import settings
    from rest_framework.authtoken.models import Token

    from apps.agents.services import agent_config_for, price_sheet_load_starter
    from apps.attempts.models import Attempt
    from apps.campaigns.services import campaign_cancel, campaign_create, campaign_start
    from apps.core.services import record_worker_heartbeat
    from apps.dashboard.services import external_score_save
    from apps.thinkingbox.services import tb_results_import
    from apps.triage import services as triage
    from apps.triage.models import Label
    from apps.triage.taxonomy import seed_labels

    seed_labels(Label)  # transactional tests flush the migration's seed rows
    data = DemoData(suite=starter_suite, price_sheet=price_sheet_load_starter())
    task_ids = _two_tasks_per_domain(starter_suite)
    for agent, name in DEMO_AGENTS:
        data.campaigns[agent] = run_campaign(
            agent, tasks=60, n=3, name=name, task_ids=task_ids, price_sheet=data.price_sheet
        )
    running = make_campaign("sim:steady", tasks=2, n=2)
    running.name = "Still running"
    running.save(update_fields=["name"])
    campaign_start(campaign=running)  # dispatch is switched off by run_campaign: attempts stay queued
    data.campaigns["running"] = running
    cancelled = make_campaign("sim:explorer", tasks=2, n=2)
    campaign_start(campaign=cancelled)
    campaign_cancel(campaign=cancelled)
    data.campaigns["cancelled"] = cancelled
    data.campaigns["draft"] = make_campaign("golden", tasks=1, n=1)

    saved_retries = settings.ATTEMPT_MAX_RETRIES
    settings.ATTEMPT_MAX_RETRIES = 0
    try:
        down = make_campaign(_dead_endpoint_agent(), tasks=1, n=2)
        campaign_start(campaign=down)
        drain(down)
    finally:
        settings.ATTEMPT_MAX_RETRIES = saved_retries
    data.campaigns["down"] = down

    data.campaigns["tb"] = tb_results_import(
        path=TB_RESULTS, campaign_name="tb infer r6", team=team_a
    ).campaign
    team_b_campaign = campaign_create(
        name="Team B steady",
        team=team_b,
        owner=erin,
        agent=agent_config_for("sim:steady"),
        suite=starter_suite,
        tasks=list(starter_suite.tasks.filter(task_id__in=task_ids[:2])),
        n_attempts=2,
    )
    campaign_start(campaign=team_b_campaign)
    drain(team_b_campaign)
    data.campaigns["team_b"] = team_b_campaign
    # Run under a fault plan (docs/faults.md): its robustness section, markers, filter and exports.
    faulted = make_campaign(
        "sim:naive-retry", tasks=2, n=2, fault_plan={"kinds": ["error_after_commit"], "at_calls": [0]}
    )
    campaign_start(campaign=faulted)
    drain(faulted)
    data.campaigns["faulted"] = faulted

    careless = data.campaigns["sim:careless"]
    failed = (
        Attempt.objects.filter(campaign=careless, verdict="fail", clean_looking=True).order_by("pk").first()
        or Attempt.objects.filter(campaign=careless, verdict="fail").order_by("pk").first()
    )
    data.failed_attempt = failed
    data.attempt = Attempt.objects.filter(campaign=data.campaigns["golden"]).order_by("pk").first()
    data.task = failed.task
    data.label = Label.objects.get(name="grader bug")
    triage.attempt_toggle_label(attempt=failed, label=data.label, actor=trish)
    triage.attempt_toggle_label(attempt=failed, label=Label.objects.get(name="wrong amount"), actor=trish)
    triage.attempt_set_note(attempt=failed, note="Refund <b>twice</b> the fare — see call 3", actor=trish)
    triage.attempt_assign(attempt=failed, assignee=trish, actor=trish)
    data.issue = failed.task.health_issues.get()
    external_score_save(campaign=careless, benchmark="tau-bench retail", score=0.42, actor=alice)
    record_worker_heartbeat(hostname="smoke-worker@localhost")
    Token.objects.get_or_create(user=alice)
    data.agent = careless.agent
    from apps.thinkingbox.search import search_service_set

    search_service_set(suite=data.campaigns["tb"].suite, url="http://127.0.0.1:8108")
    from apps.triage.validation import suite_validate

    suite_validate(suite=data.suite)  # task health from a real validation run of the starter suite
    _add_noise_drift_and_adaptive(data, make_campaign=make_campaign, team_a=team_a, alice=alice)
    _add_validation(data, alice=alice)
    _add_judgements(data, trish=trish)
    from apps.regrade.services import regrade_preview

    _change_one_golden_end_state(data.campaigns["sim:careless"])
    data.regrade = regrade_preview(
        campaign_ids=[data.campaigns["sim:careless"].pk, data.campaigns["sim:steady"].pk], team_id=team_a.pk
    )
    return data


def _change_one_golden_end_state(campaign) -> None:
    """Drop the last golden write of one task the campaign ran, so a re-grade preview has verdicts to
    flip (its page, report and VerdictVersion rows have data)."""
    from tb_engine.spec_json import task_from_dict

    task = campaign.tasks.order_by("pk").first()
    spec = task.spec
    spec["golden"] = spec["golden"][:-1]
    task.spec = spec
    task.content_hash = task_from_dict(spec).content_hash()
    task.save(update_fields=["spec", "content_hash"])


def _add_judgements(data, *, trish) -> None:
    """A human verdict on a rubric answer and a suspect-task decision (their pages and admin rows)."""
    from apps.attempts.models import Attempt
    from apps.triage import services as triage

    with_rubric = (
        Attempt.objects.filter(
            campaign__team=data.failed_attempt.campaign.team, result__rubrics__0__isnull=False
        )
        .order_by("pk")
        .first()
    )
    assert with_rubric is not None, "the smoke data needs an attempt with a rubric answer"
    triage.rubric_verdict_set(attempt=with_rubric, position=0, human_answer=False, actor=trish)
    triage.suspect_dismiss(task=data.task, actor=trish, kinds=["failed_everywhere"], note="checked by hand")


def _add_validation(data, *, alice) -> None:
    """A finished validation of one task (the engine's own report), for the task-health page and the admin."""
    from apps.triage import services as triage
    from tb_engine.loader import load_builtin_suite
    from tb_engine.spec_json import task_from_dict
    from tb_engine.validation import validate_task

    task = data.task
    run = triage.suite_validation_start(suite=task.suite, actor=alice)
    report = validate_task(load_builtin_suite("starter").domains[task.domain.name], task_from_dict(task.spec))
    triage.task_validation_record(run=run, task=task, validation=report.to_dict(), actor=alice)
    triage.suite_validation_finish(run=run)


def _add_noise_drift_and_adaptive(data, *, make_campaign, team_a, alice):
    """A replicate of the steady campaign, a drift watch with one evaluated run, a calibration on the
    demo campaigns and an adaptive campaign run to its end on it — real rows for those pages."""
    from django.utils import timezone

    from apps.adaptive.services import adaptive_dispatch, calibration_create
    from apps.campaigns.services import campaign_replicate, campaign_start
    from apps.drift.models import WatchRun
    from apps.drift.services import drift_tick, watch_create

    steady = data.campaigns["sim:steady"]
    replicate = campaign_replicate(campaign=steady, owner=alice)
    drain(replicate)
    data.campaigns["replicate"] = replicate

    data.watch = watch_create(
        name="Nightly <script>alert(1)</script>",
        team=team_a,
        owner=alice,
        agent=steady.agent,
        suite=data.suite,
        tasks=list(steady.tasks.all()[:2]),
        n_attempts=2,
        interval_minutes=60,
        webhook=False,
    )
    now = timezone.now()
    drift_tick(now=now)
    data.watch_run = WatchRun.objects.filter(watch=data.watch).order_by("pk").first()
    drain(data.watch_run.campaign)
    drift_tick(now=now)  # evaluates the finished run

    data.calibration = calibration_create(suite=data.suite, team=team_a, user=alice, validate=False)
    adaptive = make_campaign("sim:explorer", tasks=len(data.suite.tasks.all()), n=3, adaptive={})
    adaptive.name = "Adaptive explorer"
    adaptive.save(update_fields=["name"])
    campaign_start(campaign=adaptive)
    for _ in range(200):
        adaptive_dispatch(campaign_id=adaptive.pk)
        drain(adaptive)
        adaptive.refresh_from_db()
        if not adaptive.is_active:
            break
    data.campaigns["adaptive"] = adaptive
