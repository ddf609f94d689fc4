"""Every page the noise floor and the drift watch add or change, in real headless Chromium, as every
role: viewer, triager, operator, admin, an outsider without a role and a viewer of another team.
No server errors, no script errors, every chart drawn, nothing of team A shown to team B."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.agents.models import AgentConfig
from apps.campaigns.services import campaign_replicate
from apps.drift.models import WatchRun
from apps.drift.services import watch_create, watch_run_now
from tests.campaigns.conftest import drain
from tests.support.browser import signed_in_page
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROLES = ("bob", "trish", "alice", "ada", "charlie", "erin")


@pytest.fixture
def seeded(run_campaign, alice, team_a, starter_suite, no_dispatch, tick):
    """Campaigns, a replicate set, a watch with an alert after a seeded change and an endpoint watch
    whose second run saw another model: every figure the pages show comes from these attempts."""
    careless = run_campaign("sim:careless", tasks=10, n=4, name="Careless <b>persona</b>")
    explorer = run_campaign("sim:explorer", tasks=10, n=4, name="Explorer persona")
    drain(campaign_replicate(campaign=explorer, owner=alice))
    changing = AgentConfig.objects.create(
        name="cautious, then steady (simulation)",
        kind=AgentConfig.Kind.SIMULATED,
        persona="cautious",
        model="sim-cautious",
        parameters={"switch_at": "2999-01-01T00:00:00+00:00", "switch_to": "steady"},
    )
    watch = watch_create(
        name="Nightly <script>alert(1)</script>",
        team=team_a,
        owner=alice,
        agent=changing,
        suite=starter_suite,
        n_attempts=3,
        interval_minutes=1,
    )
    start = timezone.now()
    tick(now=start)
    AgentConfig.objects.filter(pk=changing.pk).update(
        parameters={"switch_at": "2000-01-01T00:00:00+00:00", "switch_to": "steady"}
    )
    tick(now=start + timedelta(minutes=1))
    tick(now=start + timedelta(minutes=2))
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=1)).start()
    try:
        server.system_fingerprint = "fp_1"
        endpoint = AgentConfig.objects.create(
            name="endpoint agent",
            kind=AgentConfig.Kind.OPENAI,
            model="watched-model",
            base_url=server.base_url,
            parameters={"retry": {"max_retries": 1, "base_delay_s": 0.01, "max_delay_s": 0.02}},
        )
        endpoint_watch = watch_create(
            name="Endpoint watch",
            team=team_a,
            owner=alice,
            agent=endpoint,
            suite=starter_suite,
            tasks=list(starter_suite.tasks.order_by("task_id")[:2]),
            n_attempts=1,
            interval_minutes=60,
            probe_minutes=0,
        )
        later = timezone.now()
        tick(now=later)  # run 1
        tick(now=later + timedelta(minutes=1))  # evaluated
        server.system_fingerprint = "fp_2"
        drain(watch_run_now(watch=endpoint_watch).campaign)
        tick(now=later + timedelta(minutes=2))  # run 2 saw another model
    finally:
        server.stop()
    assert WatchRun.objects.filter(watch=watch, alert=True).exists()
    assert WatchRun.objects.filter(watch=endpoint_watch, provider_changed=True).exists()
    return {"careless": careless, "explorer": explorer, "watch": watch}


def _pages(seeded) -> list[tuple[str, str]]:
    careless, explorer, watch = seeded["careless"], seeded["explorer"], seeded["watch"]
    return [
        ("list", "/leaderboard/?sort=pass1"),
        ("list", "/leaderboard/?sort=alln&dir=desc"),
        ("list", f"/compare/?a={careless.pk}&b={explorer.pk}"),
        ("list", f"/domains/?a={careless.pk}&b={explorer.pk}"),
        ("list", "/noise/"),
        ("list", f"/planner/?campaigns={explorer.pk}&mode=drift&target_pp=5"),
        ("list", "/drift/"),
        ("detail", f"/drift/{watch.pk}/"),
        ("operator", "/drift/new/"),
        ("campaign", f"/campaigns/{explorer.pk}/"),
    ]


def _expected_status(username: str, kind: str) -> int:
    """What each persona gets: charlie (no role) 403 on role pages and 404 for a campaign (no team),
    erin (team B) 404 on team A's pages, viewers and triagers 403 on the operator's form."""
    if kind == "campaign":
        return 404 if username in ("charlie", "erin") else 200
    if username == "charlie":
        return 403
    if kind == "operator":
        return 200 if username in ("alice", "ada") else 403
    if kind == "detail" and username == "erin":
        return 404
    return 200


@pytest.mark.parametrize("username", ROLES)
def test_noise_and_drift_pages_render_for_every_role(
    username,
    seeded,
    live_server,
    client,
    django_user_model,
    bob,
    trish,
    alice,
    admin_user_persona,
    charlie,
    erin,
):
    user = django_user_model.objects.get(username=username)
    failures = []
    with signed_in_page(live_server, client, user) as page:
        for kind, url in _pages(seeded):
            page.errors.clear()
            response = page.goto(f"{live_server.url}{url}")
            expected = _expected_status(username, kind)
            if response.status != expected:
                failures.append((url, response.status, expected))
                continue
            if expected == 200:
                page.wait_for_load_state("networkidle")
                charts = page.locator(".chart").count()
                if charts:
                    page.wait_for_selector(".chart[data-rendered='1'] .main-svg")
                    assert page.locator(".chart[data-rendered='1']").count() == charts, url
                html = page.content()
                assert "<script>alert(1)</script>" not in html, url  # watch names are escaped
                assert "<b>persona</b>" not in html, url
                if username == "erin":
                    assert "Careless" not in html and "Nightly" not in html, url
            # A refused page logs its own status as a failed load; nothing else may appear.
            errors = [e for e in page.errors if f"status of {expected}" not in e]
            if errors:
                failures.append((url, "console", errors))
    assert failures == []
