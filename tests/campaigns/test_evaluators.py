"""Judges and user simulators chosen per campaign: launch page, API and run_campaign; unjudged rubrics.

An LLM judge is served by the scripted OpenAI-compatible server on 127.0.0.1. A rubric the judge
cannot answer is unjudged (SPEC §2): never a failure, left out of n_t like an infra error, and
counted as coverage.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.agents.services import agent_config_for
from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import campaign_progress
from apps.campaigns.services import EvaluatorConfigError, campaign_create, evaluator_configs
from tb_engine.llm_judge import JUDGE_INSTRUCTIONS
from tests.campaigns.conftest import drain
from tests.support.scripted_openai_server import scripted_server_fixture

scripted_server = pytest.fixture(scripted_server_fixture, name="scripted_server")
HOLD = "retail/ticket_hold_carrier_exception"  # a starter task with rubrics


def _llm(server, model: str, **extra) -> dict:
    return {"kind": "llm", "model": model, "base_url": server.base_url, "api_key_env": "", **extra}


def test_evaluator_configs_store_normal_forms_and_force_temperature_zero(scripted_server):
    user, judge = evaluator_configs(user=None, judge=_llm(scripted_server, "judge-model"))
    assert user == {"kind": "scripted"}
    assert judge == {
        "kind": "llm",
        "model": "judge-model",
        "base_url": scripted_server.base_url,
        "api_key_env": "",
        "temperature": 0.0,
        "prompt": JUDGE_INSTRUCTIONS,
    }


@pytest.mark.parametrize(
    ("user", "judge", "message"),
    [
        (
            {"kind": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1", "prompt": "no placeholders"},
            None,
            "user simulator: prompt: must contain {query}",
        ),
        (
            None,
            {"kind": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1", "temperature": 0.7},
            "judge: temperature: an LLM judge runs at temperature 0, got 0.7",
        ),
        (
            None,
            {"kind": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-123"},
            "judge: api_key: send no credentials; name the environment variable in api_key_env",
        ),
        (
            None,
            {"kind": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "sk-123 456"},
            "judge: api_key_env: must be an environment variable name like OPENAI_API_KEY, not a key",
        ),
        (None, {"kind": "oracle"}, "judge: kind: must be 'keyword' or 'llm', got 'oracle'"),
    ],
)
def test_evaluator_configs_reject_bad_configurations_naming_the_field(user, judge, message):
    with pytest.raises(EvaluatorConfigError) as caught:
        evaluator_configs(user=user, judge=judge)
    assert str(caught.value).startswith(message)


@pytest.mark.django_db
def test_llm_judge_campaign_passes_and_unreadable_answers_are_unjudged_not_failed(
    scripted_server, starter_suite, alice, team_a
):
    task = starter_suite.tasks.get(task_id=HOLD)
    scripted_server.script("good-judge", [{"text": "yes\nThe reply says so.", "repeat": 10}])
    scripted_server.script("vague-judge", [{"text": "Probably, yes.", "repeat": 30}])
    campaigns = {}
    for model in ("good-judge", "vague-judge"):
        campaigns[model] = campaign_create(
            name=model,
            team=team_a,
            owner=alice,
            agent=agent_config_for("golden"),
            suite=starter_suite,
            tasks=[task],
            n_attempts=2,
            judge=_llm(scripted_server, model),
        )
        from apps.campaigns.services import campaign_start

        campaign_start(campaign=campaigns[model])
        drain(campaigns[model])

    good = list(Attempt.objects.filter(campaign=campaigns["good-judge"]).values_list("verdict", flat=True))
    vague = Attempt.objects.filter(campaign=campaigns["vague-judge"])
    assert good == ["pass", "pass"]
    assert [(a.status, a.verdict, a.categories) for a in vague] == [("done", "unjudged", [])] * 2
    summary = TaskSummary.objects.get(campaign=campaigns["vague-judge"])
    assert (summary.n_done, summary.n_pass, summary.n_unjudged, summary.n_infra_error) == (0, 0, 2, 0)
    progress = campaign_progress(campaign=campaigns["vague-judge"])
    assert (progress.done, progress.unjudged, progress.pass_rate) == (2, 2, None)
    rubric = vague.first().result["rubrics"][0]
    assert rubric["answer"] is None
    assert rubric["explanation"].startswith("unjudged: judge endpoint")
    sent = [r.body for r in scripted_server.requests_for("good-judge")]
    assert {body["temperature"] for body in sent} == {0.0}


@pytest.mark.django_db
def test_api_creates_a_campaign_with_an_llm_judge_and_rejects_a_key(
    scripted_server, starter_suite, alice, team_a, client
):
    client.force_login(alice)
    body = {
        "name": "api judged",
        "team": team_a.pk,
        "agent_spec": "check:do-nothing",
        "suite": starter_suite.pk,
        "task_ids": [HOLD],
        "n_attempts": 1,
        "judge": _llm(scripted_server, "judge-model"),
        "user_simulator": {"kind": "scripted"},
    }
    created = client.post("/api/campaigns/", body, content_type="application/json")
    rejected = client.post(
        "/api/campaigns/",
        {**body, "name": "with key", "judge": {**body["judge"], "api_key": "sk-live"}},
        content_type="application/json",
    )
    assert created.status_code == 201
    data = created.json()
    assert (
        data["agent_name"],
        data["is_harness_check"],
        data["judge"]["kind"],
        data["judge"]["temperature"],
    ) == (
        "do-nothing (harness check, not a model)",
        True,
        "llm",
        0.0,
    )
    assert rejected.status_code == 400
    assert rejected.json()["error"]["details"] == {
        "judge": ["judge: api_key: send no credentials; name the environment variable in api_key_env"]
    }


@pytest.mark.django_db
def test_launch_page_offers_harness_checks_and_stores_the_chosen_judge(
    scripted_server, starter_suite, alice, team_a, client
):
    client.force_login(alice)
    page = client.get(reverse("campaigns:launch"))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Harness checks (not models, not simulations)" in html
    assert "skip-last-write (harness check, not a model)" in html
    response = client.post(
        reverse("campaigns:launch"),
        {
            "name": "launched with judge",
            "team": team_a.pk,
            "agent": "spec:check:skip-last-write",
            "suite": starter_suite.pk,
            "domains": "retail",
            "n_attempts": 1,
            "seed": 0,
            "user_kind": "scripted",
            "judge_kind": "llm",
            "judge_model": "judge-model",
            "judge_base_url": scripted_server.base_url,
            "judge_api_key_env": "",
            "judge_prompt": "Answer yes or no on the first line.",
        },
    )
    campaign = Campaign.objects.get(name="launched with judge")
    assert response.status_code == 302
    assert (campaign.agent.engine_spec, campaign.agent.badge_text) == (
        "check:skip-last-write",
        "harness check, not a model",
    )
    assert campaign.judge == {
        "kind": "llm",
        "model": "judge-model",
        "base_url": scripted_server.base_url,
        "api_key_env": "",
        "temperature": 0.0,
        "prompt": "Answer yes or no on the first line.",
    }
    detail = client.get(reverse("campaigns:detail", args=[campaign.pk])).content.decode()
    assert f"judge: LLM judge-model at {scripted_server.base_url}" in detail


@pytest.mark.django_db(transaction=True)  # the campaign is dispatched on commit
def test_run_campaign_takes_the_judge_and_counts_unjudged(scripted_server, starter_suite, alice):
    alice.is_superuser = True
    alice.save()
    scripted_server.script("cli-judge", [{"text": "not sure", "repeat": 30}])
    out = StringIO()
    call_command(
        "run_campaign",
        "--suite",
        "starter",
        "--agent",
        "golden",
        "--repeat",
        "1",
        "--tasks",
        HOLD,
        "--judge",
        "llm",
        "--judge-model",
        "cli-judge",
        "--judge-base-url",
        scripted_server.base_url,
        "--wait",
        "--owner",
        "alice",
        stdout=out,
    )
    campaign = Campaign.objects.get()
    assert (campaign.judge["kind"], campaign.judge["model"]) == ("llm", "cli-judge")
    assert out.getvalue().splitlines()[-1] == (
        f"campaign {campaign.pk}: 1 done, 0 passed (—), 1 unjudged, 0 infra errors, 0 cancelled"
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("role", "variable", "problem"),
    [
        (
            "judge",
            "SECRET_KEY",
            "'SECRET_KEY' is one of the worker's own settings and is never sent to an endpoint",
        ),
        (
            "user_simulator",
            "OPENAI_API_KEY",
            "'OPENAI_API_KEY' is not an allowed key variable; allowed: TB_KEY_* (TB_API_KEY_ENV_ALLOWED)",
        ),
    ],
)
def test_api_refuses_an_evaluator_key_variable_the_allow_list_refuses(
    scripted_server, starter_suite, alice, team_a, client, settings, role, variable, problem
):
    settings.API_KEY_ENV_ALLOWED = ["TB_KEY_*"]
    client.force_login(alice)
    evaluator = {**_llm(scripted_server, "judge-model"), "api_key_env": variable}
    if role == "user_simulator":
        evaluator["prompt"] = "Play the customer: {query} {user_context}; say {stop_token} when done."
    body = {
        "name": "evaluator key",
        "team": team_a.pk,
        "agent_spec": "golden",
        "suite": starter_suite.pk,
        "task_ids": [HOLD],
        "n_attempts": 1,
        role: evaluator,
    }

    response = client.post("/api/campaigns/", body, content_type="application/json")

    what = "judge" if role == "judge" else "user simulator"
    assert response.status_code == 400
    assert response.json()["error"]["details"] == {role: [f"{what}: api_key_env: {problem}"]}
    assert Campaign.objects.filter(name="evaluator key").count() == 0


@pytest.mark.django_db
def test_launch_page_puts_a_refused_judge_key_variable_on_its_field(
    scripted_server, starter_suite, alice, team_a, client, settings
):
    settings.API_KEY_ENV_ALLOWED = ["TB_KEY_*"]
    client.force_login(alice)
    response = client.post(
        reverse("campaigns:launch"),
        {
            "name": "launched with a worker setting",
            "team": team_a.pk,
            "agent": "spec:golden",
            "suite": starter_suite.pk,
            "domains": "retail",
            "n_attempts": 1,
            "seed": 0,
            "user_kind": "scripted",
            "judge_kind": "llm",
            "judge_model": "judge-model",
            "judge_base_url": scripted_server.base_url,
            "judge_api_key_env": "DATABASE_URL",
            "judge_prompt": "Answer yes or no on the first line.",
        },
    )

    assert response.status_code == 200
    assert response.context["form"].errors["judge_api_key_env"] == [
        "judge: api_key_env: 'DATABASE_URL' is one of the worker's own settings and is never sent to an endpoint"
    ]
    assert Campaign.objects.filter(name="launched with a worker setting").count() == 0
