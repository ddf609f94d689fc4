"""The suspect-task queue: a seeded broken task and a task better campaigns fail more are flagged with their
evidence; exclude feeds the health toggle, dismiss takes the task off the queue; query-count guards."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.models import Campaign
from apps.suites.models import Suite, Task
from apps.triage.models import SuspectDecision, TaskHealthIssue
from apps.triage.selectors import suspect_tasks, task_health_scope
from tb_engine.results import DiffItem
from tb_engine.spec_json import task_from_dict
from tb_engine.validation import validate_task
from tests.api.conftest import api_for  # noqa: F401 (fixture)
from tests.triage.conftest import T1, T2, T3

pytestmark = pytest.mark.django_db

WRONG = DiffItem("wrong_value", "tickets", "20", "status", "open", "solved", "hold", (1,))


def _break_golden(task: Task) -> Task:
    """Add a check no trajectory can meet: the task's golden end state is unreachable."""
    spec = dict(task.spec)
    spec["checks"] = [
        *spec.get("checks", []),
        {
            "kind": "row_count",
            "params": {"table": "tickets", "where": {"status": "no-such-status"}, "count": 1},
            "description": "a ticket in a status that does not exist",
            "forbidden": False,
        },
    ]
    task.spec = spec
    task.content_hash = task_from_dict(spec).content_hash()
    task.save(update_fields=["spec", "content_hash"])
    return task


def _suspects(user_campaigns, **kwargs) -> dict[str, list]:
    return {row.task.task_id: row for row in suspect_tasks(campaigns=user_campaigns, **kwargs)}


def _visible(user) -> list[Campaign]:
    from apps.figures.selectors import figure_campaigns

    return figure_campaigns(user)


def test_a_seeded_broken_task_appears_with_its_evidence(run_campaign, signed_campaign, starter_suite, bob):
    task = _break_golden(starter_suite.tasks.get(task_id=T1))
    # What the suite's validation stores for it (the engine's own verdict on the broken spec).
    report = validate_task(starter_suite_spec_domain(starter_suite, task), task_from_dict(task.spec))
    assert report.status == "invalid"
    Task.objects.filter(pk=task.pk).update(validation="invalid", validation_detail="\n".join(report.problems))
    golden = run_campaign("golden", task_ids=[T1], tasks=1, n=2, name="Golden self-check")
    for model in ("model-a", "model-b", "model-c"):
        signed_campaign(
            [(T1, i, {"diff": [WRONG]}) for i in range(3)] + [(T2, 0, {})], name=model, model=model
        )

    rows = _suspects(_visible(bob))

    assert golden.attempts.filter(verdict="fail").count() == 2
    row = rows[T1]
    assert row.kinds == ["failed_everywhere", "golden"]
    details = {e.kind: [] for e in row.evidence}
    for e in row.evidence:
        details[e.kind].append(e.detail)
    assert details["failed_everywhere"] == [
        "0 of 9 attempts passed in 3 non-simulated campaigns (model-a, model-b, model-c)"
    ]
    assert "the golden agent passed 0 of 2 attempts in Golden self-check" in details["golden"]
    [validation] = [text for text in details["golden"] if text.startswith("task validation: ")]
    assert validation.startswith("task validation: golden agent fails: ")
    assert "a ticket in a status that does not exist" in validation
    assert T2 not in rows and row.status == "open"


def starter_suite_spec_domain(suite: Suite, task: Task):
    """The runnable built-in domain of the task (tool implementations included)."""
    from tb_engine.loader import load_builtin_suite

    return load_builtin_suite("starter").domains[task.domain.name]


def _skill_campaigns(signed_campaign, tasks: list[str], inverted: str) -> list[Campaign]:
    """Four campaigns passing k of 4 attempts (k = 1..4) on every task but one, which they pass 4 - k times."""
    made = []
    for k in range(1, 5):
        rows = []
        for task_id in tasks:
            passes = 4 - k if task_id == inverted else k
            rows += [(task_id, i, {} if i < passes else {"diff": [WRONG]}) for i in range(4)]
        made.append(signed_campaign(rows, name=f"skill {k}", model=f"model-{k}"))
    return made


def test_a_task_better_campaigns_fail_more_is_flagged_for_negative_discrimination(
    signed_campaign, starter_suite, bob
):
    tasks = list(starter_suite.tasks.order_by("task_id").values_list("task_id", flat=True)[:6])
    _skill_campaigns(signed_campaign, tasks, inverted=tasks[2])

    rows = _suspects(_visible(bob))

    flagged = {task_id for task_id, row in rows.items() if "negative_discrimination" in row.kinds}
    assert flagged == {tasks[2]}
    [evidence] = [e for e in rows[tasks[2]].evidence if e.kind == "negative_discrimination"]
    assert evidence.value == pytest.approx(-1.0)
    assert evidence.detail.startswith("item–rest r = -1.00 over 4 campaigns (one-sided permutation p = 0.04)")


def test_harness_check_campaigns_do_not_count_in_the_item_rest_correlation(
    signed_campaign, starter_suite, bob
):
    tasks = list(starter_suite.tasks.order_by("task_id").values_list("task_id", flat=True)[:6])
    _skill_campaigns(signed_campaign, tasks, inverted=tasks[2])
    # A do-nothing harness check passes the inverted task only: it tests the grader, not a model.
    rows = []
    for task_id in tasks:
        rows += [(task_id, i, {} if task_id == tasks[2] else {"diff": [WRONG]}) for i in range(4)]
    signed_campaign(rows, name="do-nothing check", model="check-do-nothing", kind="check")

    [evidence] = [
        e for e in _suspects(_visible(bob))[tasks[2]].evidence if e.kind == "negative_discrimination"
    ]

    assert evidence.value == pytest.approx(-1.0)
    assert evidence.detail.startswith("item–rest r = -1.00 over 4 campaigns")


def test_do_nothing_passes_and_validation_flags_are_evidence(signed_campaign, starter_suite, bob):
    signed_campaign([(T1, 0, {"tools": ()}), (T1, 1, {"tools": ()}), (T2, 0, {})])
    Task.objects.filter(suite=starter_suite, task_id=T3).update(
        validation="non_discriminating", validation_detail="a do-nothing attempt passes"
    )

    rows = _suspects(_visible(bob))

    assert [(e.kind, e.detail) for e in rows[T1].evidence] == [
        ("do_nothing", "2 attempts passed without a single tool call")
    ]
    assert rows[T1].evidence[0].attempt_id == Attempt.objects.get(task__task_id=T1, index=0).pk
    assert [(e.kind, e.detail) for e in rows[T3].evidence] == [
        ("do_nothing", "task validation: a do-nothing attempt passes")
    ]
    assert T2 not in rows


def test_our_versus_server_verdict_disagreements_are_evidence(signed_campaign, starter_suite, bob):
    campaign = signed_campaign([(T1, 0, {}), (T1, 1, {}), (T2, 0, {})])
    Suite.objects.filter(pk=starter_suite.pk).update(source=Suite.Source.THINKINGBOX)
    first = campaign.attempts.get(task__task_id=T1, index=0)
    result = first.result
    result["extra"] = {"thinkingbox": {"effects": {"retail": {"our_state_pass": True, "disagree": True}}}}
    Attempt.objects.filter(pk=first.pk).update(result=result)
    other = campaign.attempts.get(task__task_id=T2)
    result = other.result
    result["extra"] = {"thinkingbox": {"effects": {"retail": {"our_state_pass": True, "disagree": False}}}}
    Attempt.objects.filter(pk=other.pk).update(result=result)

    rows = _suspects(_visible(bob))

    assert [(e.kind, e.detail, e.attempt_id) for e in rows[T1].evidence] == [
        ("verdict_disagreement", "our verdict and the server's hash verdict disagree on 1 attempt", first.pk)
    ]
    assert T2 not in rows


def test_exclude_feeds_the_health_toggle_and_dismiss_takes_the_task_off(signed_campaign, client, bob, trish):
    campaigns = [
        signed_campaign([(T1, i, {"diff": [WRONG]}) for i in range(2)] + [(T2, 0, {})], name=m, model=m)
        for m in ("model-a", "model-b", "model-c")
    ]
    task = Task.objects.get(task_id=T1)
    client.force_login(trish)

    response = client.post(
        f"/triage/suspects/{task.pk}/decide/", {"action": "exclude", "note": "golden is wrong"}
    )

    assert response.status_code == 302
    issue = TaskHealthIssue.objects.get(task=task, resolved_at__isnull=True)
    assert (issue.source, issue.label_id, issue.title) == ("suspect", None, "suspect task")
    assert [e["kind"] for e in issue.evidence] == ["failed_everywhere"]
    assert task_health_scope({"healthy": "exclude"}, campaigns).exclude == frozenset({task.pk})
    assert _suspects(_visible(bob), status="excluded")[T1].status == "excluded"
    assert T1 not in _suspects(_visible(bob))  # the open queue
    leaderboard = client.get("/leaderboard/?healthy=exclude").content.decode()
    assert "1 task with open health issues is excluded from these figures" in leaderboard
    # Labelling attempts of the task does not close an exclusion (only label issues follow labels).
    from apps.triage import services
    from apps.triage.models import Label

    services.attempt_toggle_label(
        attempt=campaigns[0].attempts.filter(task=task).first(),
        label=Label.objects.get(name="wrong amount"),
        actor=trish,
    )
    assert TaskHealthIssue.objects.filter(task=task, source="suspect", resolved_at__isnull=True).exists()

    client.post(f"/triage/suspects/{task.pk}/decide/", {"action": "dismiss", "note": "fixed the golden"})

    issue.refresh_from_db()
    assert issue.resolved_at is not None and issue.resolution == "fixed the golden"
    assert task_health_scope({"healthy": "exclude"}, campaigns).exclude == frozenset()
    assert T1 not in _suspects(_visible(bob))
    assert (
        _suspects(_visible(bob), status="dismissed")[T1].decision.decision
        == SuspectDecision.Decision.DISMISSED
    )
    # Evidence of a new kind brings it back (and the idle pass ends "every campaign fails it").
    signed_campaign([(T1, 0, {"tools": ()})], name="idle", model="idle")
    back = _suspects(_visible(bob))[T1]
    assert (back.kinds, back.status) == (["do_nothing"], "open")


def test_decisions_need_the_triager_role_and_a_visible_suspect(signed_campaign, client, bob, trish, erin):
    for m in ("model-a", "model-b", "model-c"):
        signed_campaign([(T1, 0, {"diff": [WRONG]})], name=m, model=m)
    task = Task.objects.get(task_id=T1)
    client.force_login(bob)
    assert client.post(f"/triage/suspects/{task.pk}/decide/", {"action": "exclude"}).status_code == 403
    client.force_login(trish)
    assert client.post(f"/triage/suspects/{task.pk}/decide/", {"action": "maybe"}).status_code == 400
    other = Task.objects.get(task_id=T2)
    assert client.post(f"/triage/suspects/{other.pk}/decide/", {"action": "exclude"}).status_code == 404


def test_suspect_page_and_api_list_the_same_tasks(signed_campaign, client, bob, api_for):
    for m in ("model-a", "model-b", "model-c"):
        signed_campaign([(T1, 0, {"diff": [WRONG]}), (T2, 0, {})], name=m, model=m)
    client.force_login(bob)

    html = client.get("/triage/suspects/").content.decode()
    api = api_for(bob).get("/api/suspect-tasks/").json()

    assert html.count('<tr data-task="') == 1 and f'<tr data-task="{T1}">' in html
    assert [row["task_id"] for row in api["results"]] == [T1]
    assert api["results"][0]["evidence"][0]["kind"] == "failed_everywhere"
    assert api["results"][0]["status"] == "open"


def _suspect_queries(client) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as captured:
        html = client.get("/triage/suspects/").content.decode()
    return len(captured), html


def test_suspect_page_query_count_is_the_same_for_one_and_three_tasks(signed_campaign, client, bob):
    from django.core.cache import cache

    client.force_login(bob)
    first = [signed_campaign([(T1, 0, {"tools": ()})], name="one", model="m1")]
    one, html = _suspect_queries(client)
    assert html.count('<tr data-task="') == 1
    cache.clear()
    first.append(signed_campaign([(T2, 0, {"tools": ()}), (T3, 0, {"tools": ()})], name="two", model="m2"))
    three, html = _suspect_queries(client)
    assert html.count('<tr data-task="') == 3
    assert one == three


def test_the_cached_queue_follows_a_new_attempt_and_reads_one_stamp_row_per_campaign(
    signed_campaign, starter_suite, bob
):
    from datetime import UTC, datetime

    from apps.attempts.services import attempts_import
    from tests.triage.conftest import stored_result

    campaign = signed_campaign([(T1, 0, {}), (T2, 0, {})])
    assert _suspects(_visible(bob)) == {}  # computed and cached

    t1 = starter_suite.tasks.get(task_id=T1)
    attempts_import(
        campaign_id=campaign.pk,
        attempts=[(t1, 1, stored_result(t1, tools=()))],
        finished_at=datetime.now(UTC),
    )
    rows = _suspects(_visible(bob))
    with CaptureQueriesContext(connection) as captured:
        again = _suspects(_visible(bob))  # from the cache: the stamp reads the campaigns' revision rows

    assert [(e.kind, e.detail) for e in rows[T1].evidence] == [
        ("do_nothing", "1 attempt passed without a single tool call")
    ]
    assert again.keys() == rows.keys()
    summaries = TaskSummary._meta.db_table
    assert [q["sql"] for q in captured if summaries in q["sql"]] == []
