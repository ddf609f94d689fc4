"""API fixtures: token clients for the personas, and finished campaigns from the figure fixtures."""

from __future__ import annotations

import pytest

from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.figures.conftest import _fresh_cache, run_campaign, summaries_campaign  # noqa: F401 (fixtures)


@pytest.fixture
def api_for():
    """api_for(user) -> a DRF APIClient sending that user's token; api_for(None) sends nothing."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    def make(user):
        client = APIClient()
        if user is not None:
            token, _ = Token.objects.get_or_create(user=user)
            client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client

    return make


def error_of(response) -> dict:
    """The error object of an API error response, after checking the shared shape."""
    body = response.json()
    assert list(body) == ["error"]
    assert sorted(body["error"]) == ["code", "details", "message"]
    return body["error"]
