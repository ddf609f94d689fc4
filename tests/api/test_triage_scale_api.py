"""/api/clusters/, /api/suspect-tasks/, /api/judges/: the pages' numbers, team visibility, roles, the schema."""

from __future__ import annotations

import pytest

from apps.triage.selectors import QueueFilters, cluster_index
from tb_engine.results import DiffItem
from tests.api.conftest import error_of
from tests.triage.conftest import T1, T3, signed_campaign  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

LEFT_OPEN = DiffItem("missing_effect", "tickets", "20", "status", "open", "open", "hold")
WRONG = DiffItem("wrong_value", "tickets", "20", "status", "open", "solved", "hold", (1,))
URLS = ("/api/clusters/", "/api/suspect-tasks/", "/api/judges/")


def test_clusters_api_lists_the_grouped_queue_of_one_campaign(signed_campaign, api_for, bob):
    a = signed_campaign(
        [(T1, 0, {"diff": [LEFT_OPEN]}), (T3, 0, {"diff": [LEFT_OPEN]}), (T1, 1, {"diff": [WRONG]})]
    )
    signed_campaign([(T1, 0, {"diff": [WRONG]})], name="Other", model="model-b")

    body = api_for(bob).get(f"/api/clusters/?campaign={a.pk}").json()

    index = cluster_index(user=bob, filters=QueueFilters(campaigns=(a.pk,)))
    assert body["count"] == 2
    assert [row["signature"] for row in body["results"]] == [c.signature for c in index.clusters]
    first = body["results"][0]
    assert (first["attempts"], first["clean_looking"], first["share"], first["tasks"]) == (2, 2, 2 / 3, 2)
    assert first["description"] == "left ticket status open where golden has hold"
    assert first["elements"] == [
        {
            "kind": "missing_effect",
            "table": "tickets",
            "target": "status",
            "tool": "-",
            "phrase": "left ticket status open where golden has hold",
        }
    ]
    assert first["top_tasks"] == [{"name": T1, "attempts": 1}, {"name": T3, "attempts": 1}]
    assert first["termination"] == "agent_done" and first["reviewed"] == 0
    everything = api_for(bob).get("/api/clusters/").json()
    assert sorted(row["attempts"] for row in everything["results"]) == [2, 2]  # WRONG in both campaigns


def test_clusters_api_sees_only_the_users_teams(signed_campaign, api_for, erin, bob, charlie, team_b):
    a = signed_campaign([(T1, 0, {"diff": [LEFT_OPEN]})])
    assert api_for(erin).get(f"/api/clusters/?campaign={a.pk}").json()["count"] == 0
    assert api_for(bob).get("/api/clusters/?campaign=0").status_code == 400
    assert api_for(bob).get("/api/clusters/?scope=sideways").status_code == 400
    for url in URLS:
        assert api_for(None).get(url).status_code == 401
        response = api_for(charlie).get(url)
        assert (response.status_code, error_of(response)["code"]) == (403, "permission_denied")


def test_schema_documents_the_three_endpoints(api_for, bob):
    schema = api_for(bob).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for url in URLS:
        assert "get" in schema["paths"][url]
    parameters = {p["name"] for p in schema["paths"]["/api/clusters/"]["get"]["parameters"]}
    assert {"campaign", "scope", "domain", "task", "category", "page", "page_size"} <= parameters
    assert "ClusterOutput" in schema["components"]["schemas"] or "Cluster" in str(
        schema["components"]["schemas"]
    )


def _queries(client, url: str) -> tuple[int, dict]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        body = client.get(url).json()
    return len(captured), body


def test_clusters_api_query_count_is_the_same_for_one_and_three_clusters(signed_campaign, api_for, bob):
    extra = DiffItem("extra_effect", "refunds", "7", None, None, {"amount": 5}, None, (2,))
    one = signed_campaign([(T1, 0, {"diff": [LEFT_OPEN]})], name="One")
    three = signed_campaign(
        [(T1, 0, {"diff": [LEFT_OPEN]}), (T1, 1, {"diff": [WRONG]}), (T3, 0, {"diff": [LEFT_OPEN, extra]})],
        name="Three",
        model="model-b",
    )
    client = api_for(bob)
    for campaign in (one, three):  # warm the token lookup and each scope's cached cluster index
        client.get(f"/api/clusters/?campaign={campaign.pk}")

    (n_one, body_one), (n_three, body_three) = (
        _queries(client, f"/api/clusters/?campaign={campaign.pk}") for campaign in (one, three)
    )

    assert (body_one["count"], body_three["count"]) == (1, 3)
    assert n_one == n_three


def test_suspect_tasks_api_query_count_is_the_same_for_one_and_three_tasks(signed_campaign, api_for, bob):
    from django.core.cache import cache

    from tests.triage.conftest import T2

    client = api_for(bob)
    signed_campaign([(T1, 0, {"tools": ()})], name="one", model="m1")  # a do-nothing run that passes
    client.get("/api/suspect-tasks/")
    n_one, body_one = _queries(client, "/api/suspect-tasks/")
    cache.clear()
    signed_campaign([(T2, 0, {"tools": ()}), (T3, 0, {"tools": ()})], name="two", model="m2")
    client.get("/api/suspect-tasks/")
    n_three, body_three = _queries(client, "/api/suspect-tasks/")

    assert (body_one["count"], body_three["count"]) == (1, 3)
    assert n_one == n_three


def test_judges_api_query_count_is_the_same_for_one_and_three_judges(signed_campaign, api_for, bob):
    from tests.triage.test_calibration import JUDGE, _rubric_campaign

    client = api_for(bob)
    _rubric_campaign(signed_campaign, [True], name="j1", model="m1")
    client.get("/api/judges/")
    n_one, body_one = _queries(client, "/api/judges/")
    _rubric_campaign(signed_campaign, [True], name="j2", model="m2", judge={**JUDGE, "model": "judge-m2"})
    _rubric_campaign(signed_campaign, [True], name="j3", model="m3", judge={"kind": "keyword"})
    client.get("/api/judges/")
    n_three, body_three = _queries(client, "/api/judges/")

    assert (body_one["count"], body_three["count"]) == (1, 3)
    assert n_one == n_three
