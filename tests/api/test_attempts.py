"""Attempt list filters, pagination, detail (transcript + diff) and query counts."""

from __future__ import annotations

import pytest

from apps.attempts.models import Attempt
from tests.api.conftest import error_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def careless(run_campaign):
    """A finished simulated campaign with passes and failures of several categories (4 tasks x 2)."""
    return run_campaign("sim:careless", tasks=4, n=2, name="Careless")


def _ids(client, query: str) -> list[int]:
    response = client.get(f"/api/attempts/?page_size=200&{query}")
    assert response.status_code == 200, response.json()
    return [row["id"] for row in response.json()["results"]]


def _expected(campaign, keep) -> list[int]:
    """Ids of the campaign's attempts for which keep(attempt) holds, in the API's order."""
    attempts = (
        Attempt.objects.filter(campaign=campaign).select_related("task").order_by("task__task_id", "index")
    )
    return [a.pk for a in attempts if keep(a)]


@pytest.mark.parametrize(
    ("query", "keep"),
    [
        ("verdict=fail", lambda a: a.verdict == "fail"),
        ("verdict=pass", lambda a: a.verdict == "pass"),
        ("category=wrong_value", lambda a: "wrong_value" in a.categories),
        ("category=extra_effect", lambda a: "extra_effect" in a.categories),
        ("category=check_failed", lambda a: "check_failed" in a.categories),
        ("clean_looking=true", lambda a: a.clean_looking),
        ("clean_looking=false", lambda a: not a.clean_looking),
        ("verdict=fail&clean_looking=false", lambda a: a.verdict == "fail" and not a.clean_looking),
    ],
)
def test_attempt_filters_match_the_stored_attempts(api_for, bob, careless, query, keep):
    expected = _expected(careless, keep)

    assert _ids(api_for(bob), f"campaign={careless.pk}&{query}") == expected
    assert 0 < len(expected) < 8  # the fixture has both kinds, so the filter really filters


def test_attempt_filter_by_task_id_and_task_pk(api_for, bob, careless):
    task = careless.tasks.order_by("task_id").first()
    expected = _expected(careless, lambda a: a.task_id == task.pk)
    client = api_for(bob)

    assert _ids(client, f"task={task.task_id}") == expected
    assert _ids(client, f"task={task.pk}") == expected
    assert len(expected) == 2


def test_attempt_filter_by_campaign_separates_campaigns(api_for, bob, careless, run_campaign):
    golden = run_campaign("golden", tasks=1, n=2)
    client = api_for(bob)

    assert _ids(client, f"campaign={golden.pk}") == _expected(golden, lambda a: True)
    assert _ids(client, f"campaign={golden.pk}&verdict=fail") == []


def test_attempt_filter_rejects_unknown_category(api_for, bob):
    response = api_for(bob).get("/api/attempts/?category=everything")

    assert response.status_code == 400
    assert list(error_of(response)["details"]) == ["category"]


def test_attempt_pages_link_to_each_other(api_for, bob, careless):
    client = api_for(bob)

    first = client.get(f"/api/attempts/?campaign={careless.pk}&page_size=3").json()
    last = client.get(f"/api/attempts/?campaign={careless.pk}&page_size=3&page=3").json()

    assert (first["count"], len(first["results"]), first["previous"]) == (8, 3, None)
    assert first["next"] == f"http://testserver/api/attempts/?campaign={careless.pk}&page=2&page_size=3"
    assert (len(last["results"]), last["next"]) == (2, None)
    everything = _ids(client, f"campaign={careless.pk}")
    assert [row["id"] for row in first["results"]] == everything[:3]


def test_attempt_page_past_the_end_is_a_404_in_error_shape(api_for, bob, careless):
    response = api_for(bob).get(f"/api/attempts/?campaign={careless.pk}&page=99")

    assert response.status_code == 404
    assert error_of(response) == {"code": "not_found", "message": "Invalid page.", "details": None}


def test_attempt_list_leaves_out_the_result_json(api_for, bob, careless):
    row = api_for(bob).get("/api/attempts/").json()["results"][0]

    assert "transcript" not in row and "diff" not in row
    assert row["domain"] == "insurance"


def test_attempt_detail_has_transcript_diff_and_checks(api_for, bob, careless):
    attempt = Attempt.objects.filter(campaign=careless, verdict="fail").exclude(diff_items=0).first()

    data = api_for(bob).get(f"/api/attempts/{attempt.pk}/").json()

    assert data["diff"] == attempt.result["diff"]
    assert data["transcript"] == attempt.result["transcript"]
    assert data["checks"] == attempt.result["checks"]
    assert data["effects"] == attempt.result["effects"]
    assert (data["verdict"], data["categories"], data["diff_items"]) == (
        "fail",
        attempt.categories,
        len(attempt.result["diff"]),
    )
    assert len(data["transcript"]["tool_calls"]) == attempt.tool_calls


def test_attempt_list_query_count_is_the_same_for_one_and_three_attempts(api_for, bob, run_campaign):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = api_for(bob)
    run_campaign("golden", tasks=1, n=1)
    with CaptureQueriesContext(connection) as one:
        assert client.get("/api/attempts/").json()["count"] == 1
    run_campaign("sim:careless", tasks=2, n=1)
    with CaptureQueriesContext(connection) as three:
        assert client.get("/api/attempts/").json()["count"] == 3

    assert len(three) == len(one)


def test_attempt_detail_names_a_stored_result_it_cannot_read(api_for, bob, careless):
    attempt = Attempt.objects.filter(campaign=careless).first()
    Attempt.objects.filter(pk=attempt.pk).update(result={**attempt.result, "format_version": 99})

    response = api_for(bob).get(f"/api/attempts/{attempt.pk}/")

    assert response.status_code == 500
    assert error_of(response) == {
        "code": "unreadable_result",
        "message": f"attempt {attempt.pk}: stored result: field format_version is 99, a format this "
        "engine does not read (it reads version 1)",
        "details": None,
    }
