"""Imported ThinkingBox suites on the real servers, in-process (Celery eager): validation stored as task
health, and campaigns with a chosen judge (LLM judge on the scripted server at 127.0.0.1, or keyword).

The dataset is a temporary folder holding one scenario of the shared dataset (its policy ``sources``
left out: no search service here) and ThinkingBox-format test files: our own tasks, the shared rubric
tasks, and one read-only task written here that a do-nothing attempt passes.
"""

from __future__ import annotations

import shutil
from io import StringIO

import pytest
import yaml
from django.core.management import call_command

from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.models import Campaign
from apps.suites.models import Suite
from apps.triage.models import TaskHealthIssue, TaskValidation
from tb_engine.thinkingbox.mcp_pool import close_pools
from tests.support.real_servers import DATASET, OWN_TEST_CASES, SERVER_ENV, server_module, servers_python
from tests.support.scripted_openai_server import scripted_server_fixture

scripted_server = pytest.fixture(scripted_server_fixture, name="scripted_server")

READ_ONLY_TASK = '''
from thinkingbox.common import Judge, TestContext

"""!
scenario: sandbox_auto_insurance
"""


def check_state_hash(x: TestContext):
    result_db_hash = x.effects["sandbox_auto_insurance"]["result_db_hash"]
    golden_db_hash = x.effects["sandbox_auto_insurance"]["golden_db_hash"]
    if result_db_hash != golden_db_hash:
        assert False, "state hash differs"


def test_lookup_only(x: TestContext, judge: Judge):
    """!
    query: What is the status of policy POL-0012345678?
    user_context: You are Robert Chen.
    init:
      sandbox_auto_insurance:
        data_patch: {}
        golden_test_case:
          tool_interactions:
            - tool: policy_get_policy_details
              parameters:
                policy_id: POL-0012345678
    """

    check_state_hash(x)
'''


@pytest.fixture(autouse=True)
def _close_pools():
    yield
    close_pools()


def _dataset(root, scenario: str, files: dict) -> str:
    (root / "scenario").mkdir(parents=True)
    data = yaml.safe_load((DATASET / "scenario" / f"{scenario}.yaml").read_text())
    data["world_state"][scenario].pop("sources", None)
    (root / "scenario" / f"{scenario}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    folder = root / "test_case" / scenario
    folder.mkdir(parents=True)
    for name, source in files.items():
        if isinstance(source, str):
            (folder / name).write_text(source)
        else:
            shutil.copy(source, folder / name)
    return str(root)


def _import(dataset: str, suite: str, python: str) -> Suite:
    env = [f"--mcp-env={key}={value}" for key, value in SERVER_ENV.items()]
    module = server_module("{server}")
    call_command(
        "import_thinkingbox",
        "--dataset",
        dataset,
        "--suite-name",
        suite,
        "--mcp-command",
        f"{python} -m {module}",
        *env,
        "--mcp-pool-size",
        "1",
        stdout=StringIO(),
    )
    return Suite.objects.get(name=suite)


@pytest.mark.django_db
def test_validate_suite_on_an_imported_suite_uses_the_real_server_and_flags_the_idle_task(tmp_path):
    python = servers_python()
    own = OWN_TEST_CASES / "sandbox_auto_insurance" / "sandbox_auto_insurance_tbw.py"
    dataset = _dataset(tmp_path, "sandbox_auto_insurance", {"own.py": own, "idle.py": READ_ONLY_TASK})
    suite = _import(dataset, "own-insurance", python)

    out = StringIO()
    call_command("validate_suite", "--suite", "own-insurance", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[-1] == "5 tasks: 4 valid, 0 invalid, 1 non-discriminating"  # the summary comes last
    assert "idle.py:test_lookup_only: non-discriminating" in lines
    statuses = dict(suite.tasks.values_list("task_id", "validation"))
    assert statuses["idle.py:test_lookup_only"] == "non_discriminating"
    assert sorted(v for k, v in statuses.items() if k.startswith("own.py")) == ["valid"] * 4
    idle = TaskValidation.objects.get(task__task_id="idle.py:test_lookup_only")
    do_nothing = idle.runs[-1]
    # Do-nothing passes exactly where the server's own hash passes it too.
    assert (do_nothing["kind"], do_nothing["our_state_pass"], do_nothing["their_hash_pass"]) == (
        "do-nothing",
        True,
        True,
    )
    assert TaskHealthIssue.objects.get(task=idle.task).label.name == "non-discriminating"
    for validation in TaskValidation.objects.filter(task__task_id__startswith="own.py"):
        assert [(r["kind"], r["their_hash_pass"], r["disagree"]) for r in validation.runs] == [
            ("golden", True, False),
            ("golden (again)", True, False),
            ("do-nothing", False, False),
        ]


@pytest.mark.django_db(transaction=True)  # the campaign is dispatched on commit
def test_rubric_tasks_campaign_passes_with_llm_judge_and_is_unjudged_with_keyword_judge(
    tmp_path, scripted_server, alice
):
    python = servers_python()
    alice.is_superuser = True
    alice.save()
    rubrics = DATASET / "test_case" / "external_booking_v1" / "external_booking_v1_group1_rubrics_yesno.py"
    dataset = _dataset(tmp_path, "external_booking_v1", {rubrics.name: rubrics})
    suite = _import(dataset, "booking-rubrics", python)
    task_ids = sorted(suite.tasks.values_list("task_id", flat=True))[:3]
    scripted_server.script("rubric-judge", [{"text": "yes\nThe reply meets the rubric.", "repeat": 100}])

    for judge in (
        ["--judge", "llm", "--judge-model", "rubric-judge", "--judge-base-url", scripted_server.base_url],
        ["--judge", "keyword"],
    ):
        call_command(
            "run_campaign",
            "--suite",
            "booking-rubrics",
            "--agent",
            "golden",
            "--repeat",
            "1",
            "--tasks",
            *task_ids,
            *judge,
            "--owner",
            "alice",
            "--wait",
            stdout=StringIO(),
        )
    llm, keyword = Campaign.objects.order_by("pk")
    assert [
        (a.task.task_id, a.verdict) for a in Attempt.objects.filter(campaign=llm).order_by("task__task_id")
    ] == [(task_id, "pass") for task_id in task_ids]
    assert (
        list(Attempt.objects.filter(campaign=keyword).values_list("status", "verdict", "categories"))
        == [("done", "unjudged", [])] * 3
    )
    summaries = TaskSummary.objects.filter(campaign=keyword)
    assert {(s.n_done, s.n_pass, s.n_unjudged) for s in summaries} == {(0, 0, 1)}
