"""The pages this issue adds or changes, in real headless Chromium, as every role.

Suites list and suite page (operators see the validate button), the task-health page with a
validation finding (both diffs), the attempt page of a ThinkingBox attempt whose verdicts disagree
(both verdicts, the server's diff), and the launch page with harness checks, judge and user
simulator. Outsiders (no role) get the 403 page; nobody gets a console error.
"""

from __future__ import annotations

import pytest

from apps.attempts.models import Attempt
from apps.triage.services import task_validation_record
from tests.support.browser import signed_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOLD = "retail/ticket_hold_carrier_exception"
RUN = {
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
            "key": "20",
            "field": "subject",
            "initial": "a",
            "result": "<script>alert(1)</script>",
            "golden": "b",
            "written_by": [0],
        }
    ],
    "positional_diff": [
        {"path": "tickets[3].subject", "type": "value mismatch", "result": "x", "golden": "y"}
    ],
    "result_hash": "ab",
}


@pytest.fixture
def pages(run_campaign, starter_suite):
    """A finished golden campaign whose first attempt carries a ThinkingBox disagreement, and a
    validation finding on one task."""
    campaign = run_campaign("golden", n=1, task_ids=[HOLD], name="Golden self-check")
    attempt = Attempt.objects.get(campaign=campaign)
    result = dict(attempt.result)
    result["extra"] = {
        "thinkingbox": {
            "server": "retail",
            "disagree": True,
            "verdict_of_record": "server hash",
            "effects": {
                "retail": {
                    "our_state_pass": False,
                    "their_hash_pass": True,
                    "disagree": True,
                    "diff_items": 1,
                    "declarations": "declarations of pkg.mcp_retail (UnstableField / unstable_extra_fields)",
                    "declarations_verified": True,
                    "positional_diff": RUN["positional_diff"],
                }
            },
        }
    }
    attempt.result = result
    attempt.save(update_fields=["result"])
    task = starter_suite.tasks.get(task_id=HOLD)
    task_validation_record(run=None, task=task, validation={"status": "valid", "runs": [RUN], "problems": []})
    return {"suite": starter_suite, "attempt": attempt}


ROLES = ["bob", "trish", "alice", "admin_user_persona"]


@pytest.mark.parametrize("persona", ROLES)
def test_verdict_pages_render_for_every_role_without_console_errors(
    request, live_server, client, pages, persona
):
    user = request.getfixturevalue(persona)
    attempt = pages["attempt"]
    with signed_in_page(live_server, client, user) as page:
        page.goto(f"{live_server.url}/suites/")
        assert page.locator('tr[data-suite="starter"]').count() == 1
        page.click('tr[data-suite="starter"] a')
        page.wait_for_selector("#suite-tasks")
        operator = persona in ("alice", "admin_user_persona")
        assert page.locator("#validate-form").count() == (1 if operator else 0)

        page.goto(f"{live_server.url}/triage/health/")
        finding = page.locator(f'#validation-table tr[data-task="{HOLD}"]')
        assert finding.count() == 1
        assert "1 verdict disagreement" in finding.inner_text()
        assert page.locator("#validation-table .diff-theirs code").first.inner_text() == "tickets[3].subject"
        assert page.locator("#disagreement-list a").count() == 1

        page.goto(f"{live_server.url}/attempts/{attempt.pk}/")
        verdicts = page.locator("#state-verdicts-1")
        assert verdicts.locator('[data-verdict="hash"]').inner_text() == "equal to golden"
        assert page.locator("#verdict-disagreement").count() == 1
        assert page.locator(".positional-diff code").first.inner_text() == "tickets[3].subject"

        assert page.errors == []
        response = page.goto(f"{live_server.url}/campaigns/new/")
        if operator:
            assert page.locator('#launch-form option[value="spec:check:do-nothing"]').count() == 1
            assert page.locator("#judge select[name=judge_kind]").count() == 1
            assert page.locator("#user-simulator select[name=user_kind]").count() == 1
            assert page.errors == []
        else:  # the launch page is for operators: refused, so the browser logs the 403
            assert (response.status, page.locator("#launch-form").count()) == (403, 0)
            assert page.errors == [
                "Failed to load resource: the server responded with a status of 403 (Forbidden)"
            ]


def test_verdict_pages_refuse_outsiders(live_server, client, pages, charlie):
    suite, attempt = pages["suite"], pages["attempt"]
    with signed_in_page(live_server, client, charlie) as page:
        for url in (
            "/suites/",
            f"/suites/{suite.pk}/",
            "/triage/health/",
            f"/attempts/{attempt.pk}/",
            "/campaigns/new/",
        ):
            response = page.goto(f"{live_server.url}{url}")
            assert (url, response.status) in ((url, 403), (url, 404))
        assert [e for e in page.errors if "403" not in e and "404" not in e] == []


def test_operator_validates_the_suite_from_its_page(live_server, client, pages, alice):
    suite = pages["suite"]
    with signed_in_page(live_server, client, alice) as page:
        page.goto(f"{live_server.url}/suites/{suite.pk}/")
        page.click("#validate-form button")  # eager Celery in tests: runs before the redirect
        page.wait_for_selector("#validation-runs li[data-run]")
        text = page.locator("#validation-runs li[data-run]").first.inner_text()
        total = suite.tasks.count()
        assert text.startswith("Done requested")
        assert f"{total} / {total} tasks" in text
        assert page.errors == []
