"""Authentication and role/team permissions: the same rules as the UI."""

from __future__ import annotations

import pytest

from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from tests.api.conftest import error_of

pytestmark = pytest.mark.django_db

READ_URLS = (
    "/api/suites/",
    "/api/agents/",
    "/api/price-sheets/",
    "/api/campaigns/",
    "/api/attempts/",
    "/api/metrics/leaderboard/",
    "/api/metrics/gap/",
    "/api/metrics/cost/",
    "/api/metrics/domains/",
)


@pytest.mark.parametrize("url", READ_URLS)
def test_read_endpoints_answer_401_without_credentials(api_for, url):
    response = api_for(None).get(url)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert error_of(response)["code"] == "not_authenticated"


def test_bad_token_is_401_with_error_shape(api_for):
    client = api_for(None)
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    response = client.get("/api/campaigns/")

    assert response.status_code == 401
    assert error_of(response)["code"] == "authentication_failed"


@pytest.mark.parametrize("url", READ_URLS)
def test_charlie_without_role_gets_403_everywhere(api_for, charlie, url):
    response = api_for(charlie).get(url)

    assert response.status_code == 403
    assert error_of(response) == {
        "code": "permission_denied",
        "message": "this operation needs the viewer role",
        "details": None,
    }


def test_session_login_works_like_a_token(client, bob, make_campaign):
    campaign = make_campaign("golden", tasks=1, n=1)
    client.force_login(bob)

    response = client.get("/api/campaigns/")

    assert response.status_code == 200
    assert [row["id"] for row in response.json()["results"]] == [campaign.pk]


def test_session_post_without_csrf_token_is_refused(bob, make_campaign):
    from django.test import Client

    campaign = make_campaign("golden", tasks=1, n=1)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(bob)

    response = browser.post(f"/api/campaigns/{campaign.pk}/cancel/")

    assert response.status_code == 403
    assert "CSRF" in error_of(response)["message"]


def test_erin_sees_nothing_of_team_a(api_for, erin, run_campaign):
    campaign = run_campaign("golden", tasks=2, n=1, name="Team A secret")
    attempt = Attempt.objects.filter(campaign=campaign).first()
    client = api_for(erin)

    assert client.get("/api/campaigns/").json()["count"] == 0
    assert client.get("/api/attempts/").json()["count"] == 0
    assert client.get(f"/api/attempts/?campaign={campaign.pk}").json()["count"] == 0
    assert client.get("/api/metrics/leaderboard/").json()["count"] == 0
    assert client.get(f"/api/metrics/gap/?campaign={campaign.pk}").json()["count"] == 0
    for url in (
        f"/api/campaigns/{campaign.pk}/",
        f"/api/campaigns/{campaign.pk}/progress/",
        f"/api/attempts/{attempt.pk}/",
        f"/api/metrics/compare/?a={campaign.pk}&b={campaign.pk}",
    ):
        response = client.get(url)
        assert response.status_code == 404, url
        assert error_of(response)["code"] == "not_found"


def test_erin_cannot_act_on_team_a_campaign_even_as_operator(api_for, make_user, team_b, make_campaign):
    campaign = make_campaign("golden", tasks=1, n=1)
    operator_b = make_user("olga", role="operator", teams=[team_b])

    response = api_for(operator_b).post(f"/api/campaigns/{campaign.pk}/launch/")

    assert response.status_code == 404
    assert Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DRAFT


@pytest.mark.parametrize("action", ("launch", "cancel", "resume"))
def test_viewer_and_triager_cannot_operate_campaigns(api_for, bob, trish, make_campaign, action):
    campaign = make_campaign("golden", tasks=1, n=1)

    for user in (bob, trish):
        response = api_for(user).post(f"/api/campaigns/{campaign.pk}/{action}/")
        assert response.status_code == 403
        assert error_of(response)["message"] == "this operation needs the operator role"
    assert Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DRAFT


def test_viewer_cannot_create_campaigns_agents_or_price_sheets(api_for, bob, starter_suite, team_a):
    client = api_for(bob)

    responses = [
        client.post(
            "/api/campaigns/",
            {"name": "x", "team": team_a.pk, "agent": 1, "suite": starter_suite.pk},
            format="json",
        ),
        client.post("/api/agents/", {"name": "x", "kind": "golden"}, format="json"),
        client.patch("/api/agents/1/", {"name": "y"}, format="json"),
        client.post("/api/price-sheets/", {"name": "x"}, format="json"),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403, 403]
    assert Campaign.objects.count() == 0


def test_admin_sees_every_team(api_for, admin_user_persona, make_campaign):
    campaign = make_campaign("golden", tasks=1, n=1)

    response = api_for(admin_user_persona).get(f"/api/campaigns/{campaign.pk}/")

    assert response.status_code == 200
    assert response.json()["team_name"] == "Team A"
