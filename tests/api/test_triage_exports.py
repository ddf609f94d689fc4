"""Triage (labels, notes, assignment, status) and exports over the API."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from apps.attempts.models import Attempt
from apps.exports.tables import BUILDERS
from apps.exports.writers import table_csv
from apps.triage.models import AuditEntry
from tests.api.conftest import error_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_attempt(run_campaign):
    campaign = run_campaign("sim:careless", tasks=4, n=2, name="Careless")
    return Attempt.objects.filter(campaign=campaign, verdict="fail").order_by("pk").first()


def test_labels_list_the_seeded_taxonomy(api_for, bob):
    data = api_for(bob).get("/api/triage/labels/").json()

    assert data["count"] == 8
    assert [label["name"] for label in data["results"]][:2] == ["premature close", "wrong amount"]


def test_triager_labels_notes_assigns_and_closes_with_audit(api_for, trish, failed_attempt):
    body = {
        "labels": ["wrong amount", "grader bug"],
        "note": "refund doubled",
        "assignee": "trish",
        "status": "reviewed",
    }

    response = api_for(trish).patch(f"/api/attempts/{failed_attempt.pk}/review/", body, format="json")

    assert response.status_code == 200
    data = response.json()
    assert (data["labels"], data["note"], data["assignee"], data["status"]) == (
        ["grader bug", "wrong amount"],
        "refund doubled",
        "trish",
        "reviewed",
    )
    fields = sorted(AuditEntry.objects.filter(attempt=failed_attempt).values_list("field", flat=True))
    assert fields == ["assignee", "labels", "note", "status", "task_health"]
    assert {entry["actor"] for entry in data["audit"]} == {"trish"}


def test_viewer_cannot_label(api_for, bob, failed_attempt):
    response = api_for(bob).patch(
        f"/api/attempts/{failed_attempt.pk}/review/", {"labels": ["wrong amount"]}, format="json"
    )

    assert response.status_code == 403
    assert error_of(response)["message"] == "this operation needs the triager role"
    assert AuditEntry.objects.count() == 0


def test_viewer_reads_the_review(api_for, bob, trish, failed_attempt):
    api_for(trish).patch(
        f"/api/attempts/{failed_attempt.pk}/review/", {"note": "look at ticket 20"}, format="json"
    )

    data = api_for(bob).get(f"/api/attempts/{failed_attempt.pk}/review/").json()

    assert (data["note"], data["labels"], data["status"]) == ("look at ticket 20", [], "open")


def test_review_rejects_unknown_labels_and_non_triager_assignees(api_for, trish, bob, failed_attempt):
    client = api_for(trish)

    unknown = client.patch(f"/api/attempts/{failed_attempt.pk}/review/", {"labels": ["vibes"]}, format="json")
    viewer = client.patch(f"/api/attempts/{failed_attempt.pk}/review/", {"assignee": "bob"}, format="json")

    assert error_of(unknown)["details"] == {"labels": ["unknown label(s): vibes"]}
    assert error_of(viewer)["details"] == {"assignee": ["bob is not a triager of this campaign's team"]}


def test_outsiders_cannot_see_or_label_team_a_attempts(api_for, make_user, team_b, failed_attempt):
    triager_b = make_user("tom", role="triager", teams=[team_b])
    client = api_for(triager_b)

    assert client.get(f"/api/attempts/{failed_attempt.pk}/review/").status_code == 404
    assert (
        client.patch(f"/api/attempts/{failed_attempt.pk}/review/", {"note": "x"}, format="json").status_code
        == 404
    )
    assert AuditEntry.objects.count() == 0


def test_table_export_equals_the_exports_app_file(api_for, bob, failed_attempt, rf):
    response = api_for(bob).get("/api/exports/tables/leaderboard/?file=csv", HTTP_ACCEPT="text/csv")

    request = rf.get("/")
    expected = table_csv(BUILDERS["leaderboard"](bob, request.GET))
    assert response.status_code == 200
    assert re.fullmatch(
        r'attachment; filename="leaderboard-\d{8}-\d{4}\.csv"', response["Content-Disposition"]
    )
    body = response.content.decode()
    assert body.startswith("# export: Leaderboard\n")  # the About block, then the table itself
    assert "\n".join(
        line for line in body.splitlines() if not line.startswith("# ")
    ) + "\n" == expected.replace("\r\n", "\n")
    assert list(csv.reader(io.StringIO(expected)))[1][0] == "Careless"


def test_table_export_of_unknown_table_is_404(api_for, bob):
    response = api_for(bob).get("/api/exports/tables/secrets/")

    assert error_of(response)["code"] == "not_found"


def test_attempt_export_streams_visible_attempts_only(api_for, bob, erin, failed_attempt):
    campaign_id = failed_attempt.campaign_id

    mine = api_for(bob).get(f"/api/exports/attempts/?campaign={campaign_id}&result=true")
    theirs = api_for(erin).get(f"/api/exports/attempts/?campaign={campaign_id}")

    lines = [json.loads(line) for line in b"".join(mine.streaming_content).decode().splitlines()]
    assert len(lines) == Attempt.objects.filter(campaign_id=campaign_id).count()
    assert (
        lines[0]["result"]
        == Attempt.objects.order_by("task_id", "index").filter(campaign_id=campaign_id).first().result
    )
    assert theirs.status_code == 404


def test_procurement_workbook_carries_its_hash(api_for, bob, failed_attempt):
    response = api_for(bob).get(f"/api/exports/procurement/?campaign={failed_attempt.campaign_id}")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    assert len(response["X-Content-SHA256"]) == 64
    assert response.content[:2] == b"PK"


def test_label_list_query_count_does_not_grow(api_for, bob):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.triage.models import Label

    client = api_for(bob)
    Label.objects.exclude(name="premature close").delete()
    with CaptureQueriesContext(connection) as one:
        assert client.get("/api/triage/labels/").json()["count"] == 1
    Label.objects.create(name="a"), Label.objects.create(name="b")
    with CaptureQueriesContext(connection) as three:
        assert client.get("/api/triage/labels/").json()["count"] == 3

    assert len(three) == len(one)
