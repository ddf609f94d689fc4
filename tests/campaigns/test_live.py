"""A running campaign's live figures: attempts in flight, its model endpoints' load, the ETA; on
the page's polled fragment and in the API. Without Redis (the embedded broker of the unit run)
the endpoints are listed with a clear no-figures state; the integration run reads a real Redis."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.agents.models import AgentConfig
from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import campaign_live, campaign_progress
from apps.campaigns.services import campaign_start

MODEL_URL = "http://llm.example:8000/v1/"
JUDGE_URL = "https://judge.example/v1"


@pytest.fixture
def model_campaign(make_campaign):
    """A started campaign of an LLM agent whose user simulator shares its endpoint; 3 tasks x 4, all queued."""

    def make(*, base_url: str = MODEL_URL, judge_url: str = JUDGE_URL, start: bool = True, **kwargs):
        agent = AgentConfig.objects.create(
            name=f"model at {base_url}", kind="openai", model="m", base_url=base_url, max_concurrency=40
        )
        campaign = make_campaign(
            agent,
            tasks=3,
            n=4,
            user_simulator={"kind": "llm", "model": "u", "base_url": base_url, "max_concurrency": 8},
            judge={"kind": "llm", "model": "j", "base_url": judge_url},
            **kwargs,
        )
        if start:
            campaign_start(campaign=campaign)  # the unit run dispatches on commit, never: all stay queued
        else:  # running, but with no message a live worker could take (integration runs have one)
            Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.RUNNING)
        campaign.refresh_from_db()
        return campaign

    return make


def run_some(campaign, *, running: int = 0, ended_ago: list[float] = (), run_s: float = 30.0) -> None:
    """Mark attempts running, and others done ``ended_ago`` seconds ago after ``run_s`` seconds of running."""
    now = timezone.now()
    attempts = list(Attempt.objects.filter(campaign=campaign).order_by("pk"))
    for attempt in attempts[:running]:
        attempt.status, attempt.started_at = Attempt.Status.RUNNING, now
        attempt.save(update_fields=["status", "started_at"])
    for attempt, ago in zip(attempts[running:], ended_ago, strict=False):
        finished = now - timedelta(seconds=ago)
        attempt.status, attempt.finished_at = Attempt.Status.DONE, finished
        attempt.started_at = finished - timedelta(seconds=run_s)
        attempt.save(update_fields=["status", "started_at", "finished_at"])


def live_of(campaign):
    return campaign_live(campaign=campaign, progress=campaign_progress(campaign=campaign))


@pytest.mark.django_db
def test_live_lists_each_endpoint_once_with_its_roles_and_smallest_cap(model_campaign):
    live = live_of(model_campaign())

    assert [(e.endpoint, e.roles, e.cap) for e in live.endpoints] == [
        ("http://llm.example:8000/v1", ("agent", "user simulator"), 8),
        ("https://judge.example/v1", ("judge",), None),
    ]
    assert (live.endpoint_figures, [e.load for e in live.endpoints]) == ("embedded", [None, None])


@pytest.mark.django_db
def test_live_eta_uses_recent_completions_when_there_are_enough(model_campaign):
    campaign = model_campaign()
    campaign.started_at = timezone.now() - timedelta(minutes=20)
    campaign.save(update_fields=["started_at"])
    run_some(campaign, running=2, ended_ago=[10, 20, 30, 40, 50, 60])  # 6 ended over the last 5 minutes

    live = live_of(campaign)

    assert (live.in_flight, live.remaining, live.ended_recently) == (2, 6, 6)
    assert (live.eta_seconds, live.eta_basis) == (6 * 300 / 6, "recent completions")


@pytest.mark.django_db
def test_live_eta_falls_back_to_in_flight_over_mean_duration(model_campaign):
    campaign = model_campaign()
    run_some(campaign, running=4, ended_ago=[10, 900], run_s=60)  # one recent completion only

    live = live_of(campaign)

    assert (live.ended_recently, live.mean_attempt_s) == (1, 60.0)
    # 10 left, 4 in flight, 60 s each: 4 finish a minute.
    assert (live.eta_seconds, live.eta_basis) == (10 * 60 / 4, "in flight / mean attempt duration")


@pytest.mark.django_db
def test_live_has_no_eta_before_any_attempt_ended(model_campaign):
    live = live_of(model_campaign())
    assert (live.eta_seconds, live.eta_basis) == (None, "")


@pytest.mark.django_db
def test_a_golden_campaign_calls_no_endpoint(make_campaign):
    campaign = make_campaign(tasks=1, n=1)
    campaign_start(campaign=campaign)
    campaign.refresh_from_db()
    live = live_of(campaign)
    assert (live.endpoint_figures, live.endpoints) == ("none", ())


@pytest.mark.django_db
def test_progress_fragment_shows_live_figures_and_the_embedded_state_escaped(client, bob, model_campaign):
    campaign = model_campaign(base_url="http://llm.example/v1/<script>alert(1)</script>")
    run_some(campaign, running=3)
    client.force_login(bob)

    response = client.get(f"/campaigns/{campaign.pk}/?poll=1", HTTP_HX_REQUEST="true")

    body = response.content.decode()
    assert response.status_code == 200
    assert '<dd id="live-in-flight">3</dd>' in body
    assert "No live endpoint figures (embedded broker)" in body
    assert "<script>alert(1)</script>" not in body
    assert "<code>http://llm.example/v1/&lt;script&gt;alert(1)&lt;/script&gt;</code>" in body
    assert "<td>agent, user simulator</td>" in body


@pytest.mark.django_db
def test_finished_campaign_page_has_no_live_figures(client, bob, model_campaign):
    campaign = model_campaign()
    Attempt.objects.filter(campaign=campaign).update(status=Attempt.Status.CANCELLED)
    campaign.status = campaign.Status.CANCELLED
    campaign.save(update_fields=["status"])
    client.force_login(bob)

    response = client.get(f"/campaigns/{campaign.pk}/")

    assert response.context["live"] is None
    assert 'id="live-endpoints"' not in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("running", [1, 3])
def test_progress_fragment_query_count_does_not_grow_with_attempts_in_flight(
    client, bob, model_campaign, django_assert_num_queries, running
):
    campaign = model_campaign()
    run_some(campaign, running=running, ended_ago=[5] * running)
    client.force_login(bob)

    with django_assert_num_queries(QUERIES_OF_THE_PROGRESS_FRAGMENT):
        response = client.get(f"/campaigns/{campaign.pk}/?poll=1", HTTP_HX_REQUEST="true")

    assert response.status_code == 200


# Session, user, role groups (once per request), teams, campaign, progress (2), errors, workers, worker
# activity…; the live figures add one.
QUERIES_OF_THE_PROGRESS_FRAGMENT = 11


@pytest.mark.django_db
def test_api_campaign_detail_carries_the_live_object_while_running(client, bob, model_campaign):
    campaign = model_campaign()
    run_some(campaign, running=2)
    client.force_login(bob)

    live = client.get(f"/api/campaigns/{campaign.pk}/").json()["live"]

    assert (live["in_flight"], live["remaining"], live["endpoint_figures"]) == (2, 12, "embedded")
    assert [(e["endpoint"], e["roles"], e["cap"]) for e in live["endpoints"]] == [
        ("http://llm.example:8000/v1", ["agent", "user simulator"], 8),
        ("https://judge.example/v1", ["judge"], None),
    ]
    assert live["endpoints"][0]["waiting"] is None and live["endpoints"][0]["latency_p95_ms"] is None


@pytest.mark.django_db
def test_api_campaign_detail_of_a_draft_has_no_live_object(client, bob, make_campaign):
    campaign = make_campaign(tasks=1, n=1)
    client.force_login(bob)
    data = client.get(f"/api/campaigns/{campaign.pk}/").json()
    assert (data["live"], data["window"]) == (None, None)


@pytest.mark.django_db
def test_api_campaign_detail_of_another_teams_campaign_is_404(client, erin, model_campaign):
    campaign = model_campaign()
    client.force_login(erin)
    assert client.get(f"/api/campaigns/{campaign.pk}/").status_code == 404


# --- with the integration run's Redis: the figures the workers' gate records ------------------


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_live_reads_each_endpoints_load_from_redis(client, bob, model_campaign):
    from apps.core.endpoint_load import endpoint_load_redis
    from apps.worker.endpoint_gate import RedisEndpointGate

    unique = f"http://live-{timezone.now().timestamp():.0f}-{id(client)}.invalid/v1"
    campaign = model_campaign(base_url=unique, judge_url=unique + "/judge", start=False)
    gate = RedisEndpointGate(endpoint_load_redis())
    endpoint = unique
    for seconds, outcome in [(0.3, "ok"), (0.3, "ok"), (0.02, "rate_limited"), (0.02, "error")]:
        gate.enter(endpoint, 8)
        gate.leave(endpoint, seconds=seconds, outcome=outcome, retry_after_s=0.0)
    gate.enter(endpoint, 8)  # one in flight now

    live = live_of(campaign)
    client.force_login(bob)
    body = client.get(f"/campaigns/{campaign.pk}/?poll=1", HTTP_HX_REQUEST="true").content.decode()
    api = client.get(f"/api/campaigns/{campaign.pk}/").json()["live"]

    model = live.endpoints[0].load
    assert live.endpoint_figures == "live"
    assert (model.in_flight, model.calls, model.errors, model.rate_limited) == (1, 4, 1, 1)
    assert (model.latency_p50_ms, live.endpoints[1].load.calls) == (375.0, 0)
    assert '<td class="num">375 ms</td>' in body and "25% of 4" in body
    assert (api["endpoint_figures"], api["endpoints"][0]["calls"], api["endpoints"][0]["error_rate"]) == (
        "live",
        4,
        0.25,
    )
