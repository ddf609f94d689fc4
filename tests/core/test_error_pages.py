"""The 403 and 404 pages are core's frame (core/403.html, core/404.html), not templates at the root."""

from __future__ import annotations

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db


def rendered(response) -> list[str]:
    """Template names the response rendered, in order, without repeats."""
    return list(dict.fromkeys(template.name for template in response.templates))


@override_settings(DEBUG=False)
def test_an_unknown_address_answers_with_cores_not_found_page(client, bob):
    client.force_login(bob)

    response = client.get("/no/such/page/")

    assert (response.status_code, rendered(response)) == (404, ["core/404.html", "core/base.html"])
    assert response.content.decode().count("<h1>Not found</h1>") == 1


def test_a_role_that_does_not_allow_the_page_gets_cores_not_allowed_page(client, bob):
    client.force_login(bob)  # a viewer; launching needs the operator role

    response = client.get("/campaigns/new/")

    assert (response.status_code, rendered(response)) == (403, ["core/403.html", "core/base.html"])
    assert response.content.decode().count("this page needs the operator role") == 1
