"""The shared ThinkingBox tasks (retail + booking) on the real servers through every worker we ship:
a real ``celery -A thinkingbox_web worker`` (prefork and threads pools) on PostgreSQL + Redis, and
the embedded worker ``run_campaign --wait`` starts. Every attempt runs in a fresh forked server
process whose stderr is a real pipe (the worker's sys.stderr is a LoggingProxy without one).

A subset of the shared tasks per run keeps CI short; bench/thinkingbox_servers.py runs golden over
all of them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.agents.models import AgentConfig
from apps.agents.services import UnknownAgent, agent_config_for
from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_create, campaign_start
from apps.suites.models import Suite
from tests.conftest import PROJECT_ROOT, CeleryWorkerProcess
from tests.support.paths import THINKINGBOX_DIR
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SHARED = THINKINGBOX_DIR / "dataset"
DOMAINS = ("sandbox_external_retail", "external_booking_v1")
TASKS_PER_DOMAIN = 3  # per run; the bench sweeps every shared task
CAMPAIGN_TIMEOUT_S = 300


def shared_dataset(folder: Path) -> Path:
    """The shared retail and booking scenarios and test files, as a dataset folder of their own."""
    (folder / "scenario").mkdir(parents=True)
    for domain in DOMAINS:
        shutil.copy(SHARED / "scenario" / f"{domain}.yaml", folder / "scenario")
        shutil.copytree(SHARED / "test_case" / domain, folder / "test_case" / domain)
    return folder


def subset_list(dataset: Path, per_domain: int = TASKS_PER_DOMAIN) -> Path:
    """A test list of the first tasks of each domain that carry no rubrics (their verdict is the state alone)."""
    from tb_engine.thinkingbox.dataset import parse_scenario, parse_test_file

    chosen = []
    for domain in DOMAINS:
        scenario = parse_scenario(dataset / "scenario" / f"{domain}.yaml")
        tasks = [
            task
            for path in sorted((dataset / "test_case" / domain).glob("*.py"))
            for task in parse_test_file(path, {scenario.name: scenario})
        ]
        chosen += [task.id for task in tasks if not task.rubrics][:per_domain]
    listing = dataset / "subset.yaml"
    listing.write_text("".join(f"- {task_id}\n" for task_id in chosen))
    return listing


def servers_command(python) -> list[str]:
    return [
        "--mcp-command",
        f"{python} -m tb_business_ops_servers_202606.mcp_{{server}}",
        "--mcp-env",
        "TYPESENSE_API_KEY=Fake",
    ]


@pytest.fixture
def shared_suite(tmp_path, servers_python) -> Suite:
    dataset = shared_dataset(tmp_path / "dataset")
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(dataset),
        "--test-list",
        str(subset_list(dataset)),
        "--suite-name",
        "shared-tb",
        *servers_command(servers_python),
        stdout=StringIO(),
    )
    return Suite.objects.get(name="shared-tb")


def subset(suite: Suite) -> list:
    return list(suite.tasks.order_by("task_id"))


def do_nothing_agent(endpoint: ScriptedOpenAIServer) -> AgentConfig:
    """The harness's do-nothing agent where it exists (the harness-check agents of issue 17), else a
    real OpenAI-compatible agent whose scripted model answers at once and calls no tool."""
    try:
        return agent_config_for("do-nothing")
    except UnknownAgent:
        return AgentConfig.objects.create(
            name="scripted do-nothing",
            kind=AgentConfig.Kind.OPENAI,
            model="does-nothing",
            base_url=endpoint.base_url,
            max_concurrency=8,
        )


@pytest.fixture
def endpoint():
    server = ScriptedOpenAIServer(
        generic=GenericMode(tool_calls=0, final_text="I cannot help with that.")
    ).start()
    yield server
    server.stop()


def run(suite, tasks, agent, alice, team_a) -> list[Attempt]:
    campaign = campaign_create(
        name=f"{agent.name} on shared tasks",
        team=team_a,
        owner=alice,
        agent=agent,
        suite=suite,
        tasks=tasks,
        n_attempts=1,
    )
    campaign_start(campaign=campaign)
    deadline = time.monotonic() + CAMPAIGN_TIMEOUT_S
    while time.monotonic() < deadline:
        if Campaign.objects.filter(pk=campaign.pk, status="done").exists():
            return list(
                Attempt.objects.filter(campaign=campaign).select_related("task").order_by("task__task_id")
            )
        time.sleep(0.5)
    raise AssertionError(f"campaign did not finish within {CAMPAIGN_TIMEOUT_S} s")


def outcomes(attempts) -> list[tuple]:
    return [(a.task.task_id, a.status, a.verdict, a.error_detail) for a in attempts]


def test_golden_and_do_nothing_through_a_prefork_celery_worker(
    shared_suite, celery_worker_process, alice, team_a, endpoint
):
    tasks = subset(shared_suite)
    golden = run(shared_suite, tasks, agent_config_for("golden"), alice, team_a)
    nothing = run(shared_suite, tasks, do_nothing_agent(endpoint), alice, team_a)

    assert outcomes(golden) == [
        (t.task_id, "done", "pass", "") for t in sorted(tasks, key=lambda t: t.task_id)
    ]
    assert {a.result["extra"]["backend"]["start"] for a in golden} == {"fork"}
    assert {a.result["extra"]["backend"]["knowledge_base_search"]["available"] for a in golden} == {False}
    # Do-nothing: every attempt runs (no infra error) and its verdict is the servers' own hash verdict.
    hash_verdicts = [
        "pass"
        if a.result["extra"]["thinkingbox"]["effects"][a.task.domain.name]["their_hash_pass"]
        else "fail"
        for a in nothing
    ]
    assert [(a.status, a.verdict) for a in nothing] == [("done", v) for v in hash_verdicts]
    assert hash_verdicts.count("fail") >= 1


def test_golden_through_a_threads_celery_worker(shared_suite, celery_worker_process, alice, team_a, tmp_path):
    celery_worker_process.stop()  # the threads worker alone consumes the queue (the fixture restarts prefork)
    threads = CeleryWorkerProcess(
        env=celery_worker_process.env,
        queue=celery_worker_process.queue,
        log_path=tmp_path / "threads-worker.log",
        pool="threads",
        concurrency=4,
    )
    threads.start()
    assert celery_worker_process.alive is False
    try:
        tasks = subset(shared_suite)
        golden = run(shared_suite, tasks, agent_config_for("golden"), alice, team_a)
    finally:
        threads.stop()
    assert outcomes(golden) == [
        (t.task_id, "done", "pass", "") for t in sorted(tasks, key=lambda t: t.task_id)
    ]
    log = threads.log_path.read_text()
    assert log.count("Task worker.run_attempt[") >= 2 * len(tasks)  # received and succeeded, each


def test_golden_through_the_embedded_worker(tmp_path, servers_python):
    """``run_campaign --wait`` with no broker configured: the embedded worker on the filesystem broker."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_TASK_DEFAULT_QUEUE")
    }
    env.update(TB_DATA_DIR=str(tmp_path / "data"), DEBUG="1", DJANGO_SUPERUSER_PASSWORD="op-pw-123456")
    dataset = shared_dataset(tmp_path / "dataset")

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=PROJECT_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    manage("migrate", "--noinput")
    manage("createsuperuser", "--noinput", "--username", "op", "--email", "op@example.com")
    manage(
        "import_thinkingbox",
        "--dataset",
        str(dataset),
        "--test-list",
        str(subset_list(dataset, per_domain=1)),
        "--suite-name",
        "shared-tb",
        *servers_command(servers_python),
    )
    printed = manage(
        "run_campaign",
        "--suite",
        "shared-tb",
        "--agent",
        "golden",
        "--repeat",
        "1",
        "--wait",
        "--timeout",
        "300",
    )
    assert (
        printed.splitlines()[-1].split(": ", 1)[1]
        == "2 done, 2 passed (100.0%), 0 unjudged, 0 infra errors, 0 cancelled"
    )
