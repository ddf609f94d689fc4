"""Issue 17's acceptance on the real servers through a real ``celery worker``: the dataset folder as
shipped with ThinkingBox's own servers.yaml imports (exit 0); golden over every shared task passes
every state check with no infra error, its rubric tasks passing with an LLM judge (a scripted
OpenAI-compatible server on 127.0.0.1) and unjudged — never failed — with the keyword judge;
do-nothing passes exactly the tasks whose server hash passes, and the suite's validation (the
suite page's button, run by the worker) flags exactly those non-discriminating.
"""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.core.management import call_command

from apps.agents.services import agent_config_for
from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_create, campaign_start
from apps.suites.models import Suite
from apps.triage.models import SuiteValidation, TaskValidation
from apps.triage.services import suite_validation_request
from tests.support.paths import THINKINGBOX_DIR
from tests.support.scripted_openai_server import ScriptedOpenAIServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DATASET = THINKINGBOX_DIR / "dataset"
TEST_LIST = THINKINGBOX_DIR / "releases" / "thinkingbox_bench_v1" / "testlist_thinkingbox_bench_v1.yaml"
SERVERS_YAML = THINKINGBOX_DIR / "servers" / "servers.yaml"
SHARED_TASKS = 202  # the retail and travel tasks of the v1.0 list whose test files are shipped
RUBRIC_TASKS = 15
TIMEOUT_S = 600


@pytest.fixture
def bench_suite(servers_python) -> Suite:
    out = StringIO()
    # call_command raises CommandError where the command would exit 1.
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(DATASET),
        "--test-list",
        str(TEST_LIST),
        "--servers",
        str(SERVERS_YAML),
        "--python",
        str(servers_python),
        stdout=out,
    )
    suite = Suite.objects.get(name="thinkingbox-bench")
    assert suite.tasks.count() == SHARED_TASKS
    return suite


def _wait(predicate, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} did not finish within {TIMEOUT_S} s")


def _campaign(suite, tasks, spec, alice, team_a, judge=None) -> list[Attempt]:
    campaign = campaign_create(
        name=f"{spec} on the shipped folder",
        team=team_a,
        owner=alice,
        agent=agent_config_for(spec),
        suite=suite,
        tasks=tasks,
        n_attempts=1,
        judge=judge,
    )
    campaign_start(campaign=campaign)
    _wait(lambda: Campaign.objects.filter(pk=campaign.pk, status="done").exists(), f"campaign {spec}")
    return list(Attempt.objects.filter(campaign=campaign).select_related("task", "task__domain"))


def _effects(attempt: Attempt) -> dict:
    extra = attempt.result["extra"]["thinkingbox"]
    return extra["effects"][extra["server"]]


def test_shipped_folder_golden_do_nothing_judges_and_validation_through_a_celery_worker(
    bench_suite, celery_worker_process, alice, team_a
):
    tasks = list(bench_suite.tasks.order_by("task_id"))
    rubric_tasks = [t for t in tasks if t.spec.get("rubrics")]
    questions = sum(len(t.spec["rubrics"]) for t in rubric_tasks)
    assert len(rubric_tasks) == RUBRIC_TASKS

    with ScriptedOpenAIServer() as judge_server:
        judge_server.script("judge-model", [{"text": "yes", "repeat": questions}])
        llm_judge = {
            "kind": "llm",
            "model": "judge-model",
            "base_url": judge_server.base_url,
            "api_key_env": "",
        }
        golden = _campaign(bench_suite, tasks, "golden", alice, team_a, judge=llm_judge)
        judge_requests = judge_server.requests_for("judge-model")

    # Golden, LLM judge: every attempt done and passed, every state check and the server's hash.
    assert sorted((a.status, a.verdict) for a in golden) == [("done", "pass")] * SHARED_TASKS
    assert [a.task.task_id for a in golden if not all(c["passed"] for c in a.result["checks"])] == []
    assert [a.task.task_id for a in golden if a.result["diff"]] == []
    assert [a.task.task_id for a in golden if not _effects(a)["their_hash_pass"]] == []
    rubric_answers = [r["answer"] for a in golden for r in a.result["rubrics"]]
    assert (len(rubric_answers), set(rubric_answers)) == (questions, {True})
    assert (len(judge_requests), {r.body.get("temperature") for r in judge_requests}) == (questions, {0.0})

    # Golden, keyword judge, on the rubric tasks: unjudged (the state passed), never failed.
    keyword = _campaign(bench_suite, rubric_tasks, "golden", alice, team_a, judge={"kind": "keyword"})
    assert (
        sorted((a.status, a.verdict, tuple(a.categories)) for a in keyword)
        == [("done", "unjudged", ())] * RUBRIC_TASKS
    )
    assert {_effects(a)["their_hash_pass"] for a in keyword} == {True}

    # Do-nothing: its verdict is the server's hash verdict on every task, and no run disagrees.
    nothing = _campaign(bench_suite, tasks, "check:do-nothing", alice, team_a, judge={"kind": "keyword"})
    assert [a.task.task_id for a in nothing if a.status != "done"] == []
    hash_passes = sorted(a.task.task_id for a in nothing if _effects(a)["their_hash_pass"])
    assert sorted(a.task.task_id for a in nothing if a.verdict != "fail") == hash_passes
    assert [a.task.task_id for a in nothing if _effects(a)["disagree"]] == []

    # The suite's validation, requested as the suite page's button does and run by the worker.
    run = suite_validation_request(suite=bench_suite, actor=alice)
    _wait(
        lambda: SuiteValidation.objects.filter(pk=run.pk, status__in=["done", "failed"]).exists(),
        "suite validation",
    )
    run.refresh_from_db()
    assert (run.status, run.total, run.disagreements) == ("done", SHARED_TASKS, 0)
    flagged = TaskValidation.objects.filter(run=run, status="non_discriminating")
    assert sorted(flagged.values_list("task__task_id", flat=True)) == hash_passes
    assert (
        TaskValidation.objects.filter(run=run).exclude(status__in=["valid", "non_discriminating"]).count()
        == 0
    )
