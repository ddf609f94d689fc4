"""Validation of any stored suite, stored as task health: validate_suite, the suite pages and their button.

Built-in tasks run on SQLite here; an imported suite on a real MCP server is covered in
tests/thinkingbox/test_validate_imported_suite.py.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.suites.models import Suite, Task
from apps.triage.models import SuiteValidation, TaskHealthIssue, TaskValidation
from apps.triage.services import NON_DISCRIMINATING, task_validation_record
from tb_engine.spec_json import task_from_dict

HOLD = "retail/address_change_before_shipment"


def _make_idle(task: Task) -> Task:
    """Golden trajectory cut to its reads, checks dropped: a task a do-nothing attempt passes."""
    spec = dict(task.spec)
    spec["golden"] = spec["golden"][:2]
    spec["checks"] = []
    task.spec = spec
    task.content_hash = task_from_dict(spec).content_hash()
    task.save(update_fields=["spec", "content_hash"])
    return task


@pytest.mark.django_db
def test_validate_suite_command_validates_every_task_and_stores_task_health(starter_suite):
    out = StringIO()
    call_command("validate_suite", "--suite", "starter", stdout=out)
    total = starter_suite.tasks.count()
    assert out.getvalue().splitlines() == [f"{total} tasks: {total} valid, 0 invalid, 0 non-discriminating"]
    assert TaskValidation.objects.count() == total
    assert set(starter_suite.tasks.values_list("validation", flat=True)) == {"valid"}
    run = SuiteValidation.objects.get()
    assert (run.status, run.total, run.counts, run.disagreements) == ("done", total, {"valid": total}, 0)
    kinds = [r["kind"] for r in TaskValidation.objects.first().runs]
    assert kinds == ["golden", "golden (again)", "do-nothing"]


@pytest.mark.django_db
def test_a_do_nothing_pass_flags_the_task_non_discriminating_until_it_is_fixed(starter_suite):
    task = starter_suite.tasks.get(task_id=HOLD)
    original = dict(task.spec), task.content_hash
    _make_idle(task)

    out = StringIO()
    call_command("validate_suite", "--suite", "starter", stdout=out)
    issue = TaskHealthIssue.objects.get(task=task, resolved_at__isnull=True)
    task.refresh_from_db()
    assert (issue.label.name, task.validation) == (NON_DISCRIMINATING, "non_discriminating")
    total = starter_suite.tasks.count()
    # The findings first, the summary line last.
    assert out.getvalue().splitlines() == [
        f"{HOLD}: non-discriminating",
        "  - a do-nothing attempt passes",
        f"{total} tasks: {total - 1} valid, 0 invalid, 1 non-discriminating",
    ]
    # Campaigns keep it by default (flagged); only an explicit option leaves it out.
    assert (task.is_gradable, task.is_non_discriminating) == (True, True)

    task.spec, task.content_hash = original
    task.save(update_fields=["spec", "content_hash"])
    call_command("validate_suite", "--suite", "starter", stdout=StringIO())
    issue.refresh_from_db()
    task.refresh_from_db()
    assert (issue.is_open, task.validation) == (False, "valid")
    assert issue.resolution.startswith("validation ")


@pytest.mark.django_db(transaction=True)  # the validation is queued on commit
def test_suite_page_button_is_for_operators_and_runs_the_validation(client, starter_suite, alice, bob):
    url = reverse("dashboard:suite", args=[starter_suite.pk])
    client.force_login(bob)
    viewer_page = client.get(url).content.decode()
    refused = client.post(reverse("dashboard:suite_validate", args=[starter_suite.pk]))
    client.force_login(alice)
    operator_page = client.get(url).content.decode()
    done = client.post(reverse("dashboard:suite_validate", args=[starter_suite.pk]))  # eager: runs inline

    assert 'id="validate-form"' not in viewer_page
    assert refused.status_code == 403
    assert 'id="validate-form"' in operator_page
    assert done.status_code == 302
    run = SuiteValidation.objects.get()
    total = starter_suite.tasks.count()
    assert (run.status, run.requested_by, run.counts) == ("done", alice, {"valid": total})
    after = client.get(url).content.decode()
    assert f"{total} / {total} tasks · valid {total}" in after


@pytest.mark.django_db
def test_suite_pages_refuse_users_without_role(client, charlie, starter_suite):
    client.force_login(charlie)
    assert client.get(reverse("dashboard:suites")).status_code == 403
    assert client.get(reverse("dashboard:suite", args=[starter_suite.pk])).status_code == 403
    assert client.post(reverse("dashboard:suite_validate", args=[starter_suite.pk])).status_code == 403


def _suites(count: int) -> list[Suite]:
    return [
        Suite.objects.create(name=f"suite-{i}", version="1", content_hash="0" * 64, source="thinkingbox")
        for i in range(count)
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("count", [1, 3])
def test_suite_list_query_count_is_constant(client, bob, django_assert_num_queries, count):
    _suites(count)
    client.force_login(bob)
    with django_assert_num_queries(
        5
    ):  # session, user, role groups (once per request), suites, validation counts
        response = client.get(reverse("dashboard:suites"))
    assert response.content.decode().count('data-suite="suite-') == count


@pytest.mark.django_db
@pytest.mark.parametrize("count", [1, 3])
def test_suite_detail_query_count_is_constant(client, bob, starter_suite, django_assert_num_queries, count):
    suite = _suites(1)[0]
    domain = starter_suite.domains.first()
    from apps.suites.models import Domain

    mine = Domain.objects.create(suite=suite, name=domain.name, title=domain.title, spec=domain.spec)
    source = starter_suite.tasks.filter(domain=domain).first()
    for i in range(count):
        task = Task.objects.create(
            suite=suite, domain=mine, task_id=f"t{i}", content_hash=source.content_hash, spec=source.spec
        )
        task_validation_record(run=None, task=task, validation={"status": "valid", "runs": []})
    client.force_login(bob)
    with django_assert_num_queries(10):  # the same for 1 and 3 tasks
        response = client.get(reverse("dashboard:suite", args=[suite.pk]))
    assert response.content.decode().count('<tr data-task="t') == count


@pytest.mark.django_db
def test_health_page_shows_validation_findings_with_both_diffs(client, bob, starter_suite):
    task = starter_suite.tasks.get(task_id=HOLD)
    run = {
        "kind": "golden",
        "status": "done",
        "verdict": "pass",
        "state_pass": True,
        "our_state_pass": False,
        "their_hash_pass": True,
        "disagree": True,
        "tool_errors": [],
        "error": "",
        "diff": [
            {
                "kind": "wrong_value",
                "table": "tickets",
                "key": "6",
                "field": "subject",
                "initial": None,
                "result": "<b>Other words</b>",
                "golden": "Late order",
                "written_by": [0],
            }
        ],
        "positional_diff": [
            {"path": "tickets[5].status", "type": "value mismatch", "result": "open", "golden": "solved"}
        ],
        "result_hash": "ab",
    }
    task_validation_record(run=None, task=task, validation={"status": "valid", "runs": [run], "problems": []})
    client.force_login(bob)
    html = client.get(reverse("triage:health")).content.decode()
    assert f'<tr data-task="{HOLD}">' in html
    assert "1 verdict disagreement" in html
    assert "Our classified diff</strong> (1)" in html and "The server's diff</strong> (1)" in html
    assert "<code>tickets[5].status</code> value mismatch" in html
    assert "&lt;b&gt;Other words&lt;/b&gt;" in html  # stored text is always escaped
    assert TaskHealthIssue.objects.get(task=task).label.name == "verdict disagreement"
