"""One error shape for every failure; the OpenAPI schema is valid, public and complete."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.api.conftest import error_of

pytestmark = pytest.mark.django_db


def test_unknown_api_path_is_a_json_404_for_signed_in_users(api_for, bob):
    response = api_for(bob).get("/api/no/such/thing/")

    assert response.status_code == 404
    assert error_of(response) == {
        "code": "not_found",
        "message": "no API endpoint at /api/no/such/thing/",
        "details": None,
    }


def test_unknown_api_path_is_401_without_credentials(api_for):
    assert api_for(None).get("/api/no/such/thing/").status_code == 401


def test_wrong_method_is_405_in_error_shape(api_for, bob):
    response = api_for(bob).delete("/api/campaigns/")

    assert response.status_code == 405
    assert error_of(response) == {
        "code": "method_not_allowed",
        "message": 'Method "DELETE" not allowed.',
        "details": None,
    }


def test_malformed_json_is_400_in_error_shape(api_for, alice):
    response = api_for(alice).post("/api/campaigns/", data="{not json", content_type="application/json")

    assert response.status_code == 400
    assert error_of(response)["code"] == "parse_error"


def test_unexpected_error_is_500_in_error_shape_without_internals(api_for, bob, monkeypatch):
    from apps.api import views_campaigns

    def broken(user):
        raise RuntimeError("database password is hunter2")

    monkeypatch.setattr(views_campaigns, "visible_campaigns", broken)

    response = api_for(bob).get("/api/campaigns/")

    assert response.status_code == 500
    assert error_of(response) == {
        "code": "server_error",
        "message": "unexpected server error; it has been logged",
        "details": None,
    }
    assert "hunter2" not in response.content.decode()


def test_schema_needs_login(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 401


def test_schema_is_openapi_3_and_lists_every_endpoint(client, bob):
    client.force_login(bob)
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert sorted(schema["paths"]) == [
        "/api/agents/",
        "/api/agents/{id}/",
        "/api/attempts/",
        "/api/attempts/{id}/",
        "/api/attempts/{id}/review/",
        "/api/campaigns/",
        "/api/campaigns/{id}/",
        "/api/campaigns/{id}/cancel/",
        "/api/campaigns/{id}/launch/",
        "/api/campaigns/{id}/progress/",
        "/api/campaigns/{id}/replicate/",
        "/api/campaigns/{id}/resume/",
        "/api/campaigns/{id}/robustness/",
        "/api/clusters/",
        "/api/exports/attempts/",
        "/api/exports/procurement/",
        "/api/exports/tables/{name}/",
        "/api/gates/",
        "/api/judges/",
        "/api/metrics/compare/",
        "/api/metrics/cost/",
        "/api/metrics/domains/",
        "/api/metrics/gap/",
        "/api/metrics/leaderboard/",
        "/api/metrics/noise/",
        "/api/metrics/replicates/",
        "/api/planner/",
        "/api/price-sheets/",
        "/api/price-sheets/{id}/",
        "/api/regrades/",
        "/api/regrades/{id}/",
        "/api/regrades/{id}/apply/",
        "/api/suites/",
        "/api/suites/{id}/",
        "/api/suites/{id}/tasks/",
        "/api/suspect-tasks/",
        "/api/tasks/{id}/",
        "/api/training/pool/",
        "/api/triage/labels/",
        "/api/watch-runs/{id}/acknowledge/",
        "/api/watch-runs/{id}/baseline/",
        "/api/watches/",
        "/api/watches/{id}/",
        "/api/watches/{id}/run/",
        "/api/watches/{id}/runs/",
    ]
    assert sorted(schema["components"]["securitySchemes"]) == ["cookieAuth", "tokenAuth"]


def test_schema_documents_the_error_shape_on_every_operation(client, bob):
    client.force_login(bob)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert "401" in operation["responses"], (method, path)
            error = operation["responses"]["401"]["content"]["application/json"]["schema"]
            assert error == {"$ref": "#/components/schemas/Error"}, (method, path)


def test_schema_generation_has_no_warnings():
    # Raises SchemaGenerationError (and the test fails) on any warning or OpenAPI validation error.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


def test_docs_page_is_served(client, bob):
    client.force_login(bob)
    response = client.get("/api/docs/")

    assert response.status_code == 200
    assert "/api/schema/" in response.content.decode()


def test_docs_page_loads_swagger_ui_from_this_site_not_a_cdn(client, bob):
    """Offline (or behind a strict proxy) a CDN-hosted Swagger UI is a blank page."""
    import re

    client.force_login(bob)
    page = client.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', page)

    assert [url for url in assets if "//" in url] == []
    assert sorted(url.rsplit("/", 1)[1] for url in assets) == [
        "favicon-32x32.png",
        "swagger-ui-bundle.js",
        "swagger-ui-standalone-preset.js",
        "swagger-ui.css",
    ]
    from django.contrib.staticfiles import finders

    bundle = next(url for url in assets if url.endswith("swagger-ui-bundle.js"))
    assert finders.find(bundle.removeprefix("/static/")) is not None  # collectstatic ships it


def test_favicon_points_at_the_static_icon_for_everyone(client):
    response = client.get("/favicon.ico")

    assert (response.status_code, response["Location"]) == (301, "/static/favicon.svg")


def test_concurrent_schema_requests_all_succeed(bob):
    """A threaded server generates the schema for several requests at once (drf-spectacular#1123)."""
    from concurrent.futures import ThreadPoolExecutor

    from rest_framework.test import APIRequestFactory, force_authenticate

    from apps.api.views_meta import SchemaView

    view = SchemaView.as_view()
    factory = APIRequestFactory()

    def fetch(_: int) -> int:
        request = factory.get("/api/schema/", HTTP_ACCEPT="application/json")
        force_authenticate(request, user=bob)
        response = view(request)
        response.render()
        return response.status_code

    with ThreadPoolExecutor(max_workers=6) as pool:
        statuses = list(pool.map(fetch, range(18)))

    assert statuses == [200] * 18
