"""The attempt page of an attempt imported from tb infer: ThinkingBox's own failure, never "no difference"."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.attempts.models import Attempt
from tests.support.browser import signed_in_page
from tests.thinkingbox.conftest import SHARED

APPEND_R6 = SHARED / "tb_infer/append_r6.jsonl"


def _import(path, team) -> None:
    call_command("import_tb_results", str(path), "--campaign", "r6", "--team", team.slug, stdout=StringIO())


def _failed_attempt() -> Attempt:
    return Attempt.objects.get(campaign__name="r6", index=2)


@pytest.mark.django_db
def test_failed_imported_attempt_shows_thinkingbox_failure_not_no_difference(client, alice, bob, team_a):
    _import(APPEND_R6, team_a)
    client.force_login(bob)
    html = client.get(reverse("dashboard:attempt", args=[_failed_attempt().pk])).content.decode()
    assert "No difference from the golden end state" not in html
    assert (
        "No state diff: the imported row carries no effects (tb infer ran without --dump); "
        "ThinkingBox&#x27;s own check below decided the failure." in html
    )
    assert "line 19: <code>text == expected_text</code>" in html
    assert (
        "AssertionError: File content, expected: &#x27;some text\\nsome more text&#x27;, "
        "found &#x27;some text some more text&#x27;" in html
    )
    passed = Attempt.objects.get(campaign__name="r6", index=0)
    html = client.get(reverse("dashboard:attempt", args=[passed.pk])).content.decode()
    # Passed, but nothing was compared: the page says the row has no effects, never "no difference".
    assert "No difference from the golden end state" not in html
    assert (
        "No state diff: the imported row carries no effects (tb infer ran without --dump); "
        "ThinkingBox&#x27;s own check below decided the pass." in html
    )
    assert "AssertionError" not in html


@pytest.mark.django_db
def test_imported_failure_text_is_escaped(client, alice, bob, team_a, tmp_path):
    rows = [json.loads(line) for line in APPEND_R6.read_text().splitlines() if line.strip()]
    rows[2]["test_result"]["tb"] += "\nAssertionError: <img src=x onerror=alert(1)>"
    rows[2]["test_result"]["line_content"] = "<script>alert(2)</script>"
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    _import(path, team_a)
    client.force_login(bob)
    html = client.get(reverse("dashboard:attempt", args=[_failed_attempt().pk])).content.decode()
    assert "<img src=x" not in html and "<script>alert(2)" not in html
    assert "AssertionError: &lt;img src=x onerror=alert(1)&gt;" in html
    assert "<code>&lt;script&gt;alert(2)&lt;/script&gt;</code>" in html


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("persona", ["bob", "trish", "alice", "admin_user_persona"])
def test_failed_imported_attempt_page_in_chromium_for_every_role(
    request, live_server, client, alice, team_a, persona
):
    _import(APPEND_R6, team_a)
    user = request.getfixturevalue(persona)
    url = live_server.url + reverse("dashboard:attempt", args=[_failed_attempt().pk])
    with signed_in_page(live_server, client, user) as page:
        response = page.goto(url)
        assert response.status == 200
        check = page.locator("#thinkingbox-check")
        assert check.locator(".badge").inner_text() == "failed"
        assert "line 19: text == expected_text" in check.inner_text()
        assert check.locator("pre.err").inner_text() == (
            "AssertionError: File content, expected: 'some text\\nsome more text', "
            "found 'some text some more text'"
        )
        assert (
            page.locator("#empty-diff")
            .inner_text()
            .startswith("No state diff: the imported row carries no effects")
        )
        assert page.get_by_text("No difference from the golden end state").count() == 0
        page.locator("#thinkingbox-check summary").click()
        assert "check_file_content" in check.locator("details pre").inner_text()
        page.wait_for_load_state("networkidle")
        assert page.errors == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("persona, status", [("erin", 404), ("charlie", 403)])
def test_failed_imported_attempt_page_in_chromium_for_outsiders(
    request, live_server, client, alice, team_a, persona, status
):
    _import(APPEND_R6, team_a)
    url = live_server.url + reverse("dashboard:attempt", args=[_failed_attempt().pk])
    with signed_in_page(live_server, client, request.getfixturevalue(persona)) as page:
        response = page.goto(url)
        assert response.status == status
        assert "AssertionError" not in page.content()
