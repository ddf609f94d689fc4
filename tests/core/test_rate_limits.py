"""Guessing passwords and API tokens is slowed per account and per address (issue 27 item 6).

After too many failures in the window, the next try is refused *whatever it carries* — the right
password or a valid token included — until the window passes, so a guess never learns anything.
"""

from __future__ import annotations

import time

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

WINDOW_S = 60  # long enough for any run; the tests that wait for the window's end shorten it
SHORT_WINDOW_S = 4
LOGIN = "/accounts/login/"


@pytest.fixture
def short_window(settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT = 5
    settings.LOGIN_FAILURES_PER_ADDRESS = 8
    settings.TOKEN_FAILURES_PER_ADDRESS = 5
    settings.RATE_LIMIT_WINDOW_SECONDS = WINDOW_S
    return settings


def _sign_in(client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_wrong_passwords_lock_the_account_and_the_right_one_waits_for_the_window(client, bob, short_window):
    short_window.RATE_LIMIT_WINDOW_SECONDS = SHORT_WINDOW_S
    started = time.monotonic()
    wrong = [_sign_in(client, "bob", f"guess-{i}").status_code for i in range(5)]

    refused = _sign_in(client, "bob", "bob-pw")
    signed_in_before = client.get("/").status_code
    time.sleep(max(0.0, started + SHORT_WINDOW_S + 1.5 - time.monotonic()))
    accepted = _sign_in(client, "bob", "bob-pw")

    assert wrong == [200] * 5  # the form again, with its error
    assert refused.status_code == 200
    (message,) = refused.context["form"].errors["__all__"]
    assert message.startswith("Too many failed sign-ins for this account or address; try again in ")
    assert message.endswith((" seconds.", " second."))  # how many: a slow machine takes longer
    assert "Too many failed sign-ins" in refused.content.decode()
    assert signed_in_before == 302  # still not signed in: the right password did not get through
    assert (accepted.status_code, accepted["Location"]) == (302, "/")


def test_an_account_is_locked_from_every_address(client, bob, short_window):
    for i in range(5):
        _sign_in(client, "bob", f"guess-{i}", address=f"10.0.1.{i}")

    refused = _sign_in(client, "bob", "bob-pw", address="10.0.2.1")

    assert refused.status_code == 200
    assert "Too many failed sign-ins" in refused.content.decode()


def test_one_address_guessing_many_accounts_is_locked(client, bob, short_window):
    for i in range(8):
        _sign_in(client, f"user-{i}", "guess", address="10.0.3.1")

    refused = _sign_in(client, "bob", "bob-pw", address="10.0.3.1")
    elsewhere = _sign_in(client, "bob", "bob-pw", address="10.0.3.2")

    assert refused.status_code == 200
    assert "Too many failed sign-ins" in refused.content.decode()
    assert elsewhere.status_code == 302


def test_the_admin_login_counts_and_refuses_too(client, bob, short_window):
    for i in range(5):
        client.post("/admin/login/", {"username": "bob", "password": f"guess-{i}"}, REMOTE_ADDR="10.0.4.1")

    refused = _sign_in(client, "bob", "bob-pw", address="10.0.4.2")

    assert "Too many failed sign-ins" in refused.content.decode()


def test_unknown_tokens_from_one_address_are_throttled_and_then_a_valid_one_waits(bob, short_window):
    client = APIClient(REMOTE_ADDR="10.0.5.1")
    token = Token.objects.create(user=bob)

    def call(key: str):
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return client.get("/api/campaigns/")

    short_window.RATE_LIMIT_WINDOW_SECONDS = SHORT_WINDOW_S
    started = time.monotonic()
    guesses = [call(f"{i:040x}").status_code for i in range(5)]
    refused = call(token.key)
    time.sleep(max(0.0, started + SHORT_WINDOW_S + 1.5 - time.monotonic()))
    accepted = call(token.key)

    assert guesses == [401] * 5
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= SHORT_WINDOW_S
    assert refused.json()["error"]["code"] == "throttled"
    assert accepted.status_code == 200


from tests.api.conftest import api_for  # noqa: E402, F401 (fixture)


def test_api_requests_are_limited_per_account(api_for, bob, settings):
    settings.API_RATE_PER_ACCOUNT = "3/minute"
    client = api_for(bob)

    statuses = [client.get("/api/campaigns/").status_code for _ in range(4)]

    assert statuses == [200, 200, 200, 429]


def test_anonymous_api_requests_are_limited_per_address(settings):
    settings.API_RATE_PER_ADDRESS = "2/minute"
    client = APIClient(REMOTE_ADDR="10.0.6.1")

    statuses = [client.get("/api/campaigns/").status_code for _ in range(3)]

    assert statuses == [401, 401, 429]
