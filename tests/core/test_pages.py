"""The dashboard shell, navigation, htmx fragments and the base template."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.core import navigation
from apps.core.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db

NAV_LABELS = [
    "Leaderboard",
    "Gap",
    "Cost",
    "Domains",
    "Tasks",
    "Compare",
    "Triage",
    "Campaigns",
    "Training",
    "Calibration",
    "Suites",
    "Drift",
]


def test_home_sends_users_with_a_role_to_the_leaderboard(client, alice):
    client.force_login(alice)
    response = client.get("/")
    assert (response.status_code, response.url) == (302, "/leaderboard/")


def test_home_without_role_explains_what_to_do(client, charlie):
    client.force_login(charlie)
    response = client.get("/")
    assert response.status_code == 200
    assert b"Your account has no role yet" in response.content


def test_navigation_lists_all_sections_in_order_with_leaderboard_first(client, bob):
    client.force_login(bob)
    response = client.get("/leaderboard/")
    entries = response.context["nav_entries"]
    assert [entry["label"] for entry in entries] == NAV_LABELS
    assert entries[0] == {
        "key": "leaderboard",
        "label": "Leaderboard",
        "url": "/leaderboard/",
        "active": True,
    }
    assert [entry["active"] for entry in entries[1:]] == [False] * (len(NAV_LABELS) - 1)


def test_register_nav_item_points_entry_at_existing_url(monkeypatch):
    monkeypatch.setattr(navigation, "_ITEMS", dict(navigation._ITEMS))
    navigation.register_nav_item("campaigns", url_name="core:workers")
    entries = {entry["key"]: entry for entry in navigation.resolve_nav("core:workers")}
    assert entries["campaigns"] == {
        "key": "campaigns",
        "label": "Campaigns",
        "url": "/system/workers/",
        "active": True,
    }
    assert [item.key for item in navigation.nav_items()][-1] == "drift"


def test_register_nav_item_new_key_goes_last(monkeypatch):
    monkeypatch.setattr(navigation, "_ITEMS", dict(navigation._ITEMS))
    navigation.register_nav_item("exports", url_name="core:home", label="Exports")
    assert navigation.nav_items()[-1] == navigation.NavItem("exports", "Exports", ("core:home",))


def test_base_template_loads_vendored_htmx_and_sends_csrf_header(client, bob):
    client.force_login(bob)
    content = client.get("/", follow=True).content.decode()
    assert '<script src="/static/vendor/htmx/htmx.min.js" defer></script>' in content
    assert 'hx-headers=\'{"X-CSRFToken": "' in content
    assert '<link rel="stylesheet" href="/static/css/app.css">' in content
    assert 'action="/accounts/logout/"' in content


def test_workers_htmx_request_returns_only_rows_fragment(client, bob):
    WorkerHeartbeat.objects.create(hostname="celery@box-1", beats=3)
    client.force_login(bob)
    response = client.get(reverse("core:workers"), HTTP_HX_REQUEST="true")
    content = response.content.decode().strip()
    assert response.status_code == 200
    assert content.startswith('<tbody id="heartbeat-rows"')
    assert content.endswith("</tbody>")
    assert "celery@box-1" in content
    assert "<html" not in content


@pytest.mark.parametrize("rows", [1, 3])
def test_workers_page_query_count_does_not_grow_with_rows(client, bob, django_assert_num_queries, rows):
    for index in range(rows):
        WorkerHeartbeat.objects.create(hostname=f"celery@box-{index}")
    client.force_login(bob)
    # session + user + role lookup (view) + role lookup (nav) + role lookup (can_ping) + heartbeats
    with django_assert_num_queries(4):
        response = client.get(reverse("core:workers"))
    assert len(response.context["heartbeats"]) == rows


def test_login_page_renders_and_logs_in(client, bob):
    assert client.get(reverse("login")).status_code == 200
    response = client.post(reverse("login"), {"username": "bob", "password": "bob-pw"})
    assert response.status_code == 302
    assert response["Location"] == "/"


def test_logout_by_post_ends_session(client, bob):
    client.force_login(bob)
    response = client.post(reverse("logout"))
    assert response.status_code == 302
    assert client.get("/").status_code == 302


def test_workers_page_marks_recent_worker_alive_and_old_one_not(client, bob):
    from datetime import timedelta

    from django.utils import timezone

    WorkerHeartbeat.objects.create(hostname="celery@fresh", last_seen=timezone.now())
    WorkerHeartbeat.objects.create(hostname="celery@gone", last_seen=timezone.now() - timedelta(hours=2))
    client.force_login(bob)
    response = client.get(reverse("core:workers"))
    assert {beat.hostname: beat.is_alive for beat in response.context["heartbeats"]} == {
        "celery@fresh": True,
        "celery@gone": False,
    }
