"""AttemptSetup: configurations -> agent, user simulator, judge, backend; running and pricing an attempt."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tb_engine.agents.golden import GoldenAgent
from tb_engine.agents.openai_agent import OpenAIAgent
from tb_engine.agents.simulated import SimulatedAgent
from tb_engine.attempt_setup import AttemptSetup, build_agent, make_agent, run_task
from tb_engine.backend import SqliteBackend
from tb_engine.judges import KeywordJudge
from tb_engine.llm_judge import LLMJudge
from tb_engine.loader import load_builtin_suite
from tb_engine.pricing import PriceList
from tb_engine.results import AttemptResult
from tb_engine.transcript import Transcript, Usage
from tb_engine.users.llm_user import LLMUser
from tb_engine.users.scripted import ScriptedUser

SUITE = load_builtin_suite()
WITH_RUBRICS = SUITE.tasks["insurance/glass_claim_no_deductible"]
WITHOUT_RUBRICS = SUITE.tasks["insurance/add_glass_cover_not_spouse"]
DOMAIN = SUITE.domains["insurance"]
ENDPOINT = {"model": "m-1", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}
PRICES = PriceList.from_dict(
    {
        "name": "test",
        "source": "hand-written for tests",
        "effective_date": "2025-01-01",
        "models": {"m-1": {"input": 2, "output": 8}, "sim:steady": {"input": 1, "output": 1}},
    }
)


def test_from_config_defaults_are_golden_agent_scripted_user_and_keyword_judge():
    setup = AttemptSetup.from_config(DOMAIN, WITH_RUBRICS)
    assert (type(setup.agent), type(setup.user), type(setup.judge)) == (
        GoldenAgent,
        ScriptedUser,
        KeywordJudge,
    )
    assert setup.judge.keywords == KeywordJudge.for_task(WITH_RUBRICS).keywords


def test_from_config_gives_no_judge_without_rubrics_or_when_none_is_configured():
    assert AttemptSetup.from_config(DOMAIN, WITHOUT_RUBRICS).judge is None
    assert AttemptSetup.from_config(DOMAIN, WITH_RUBRICS, judge=None).judge is None


def test_from_config_empty_stored_configs_mean_scripted_user_and_keyword_judge():
    setup = AttemptSetup.from_config(DOMAIN, WITH_RUBRICS, user={}, judge={})
    assert (type(setup.user), type(setup.judge)) == (ScriptedUser, KeywordJudge)


def test_from_config_llm_user_and_judge_get_their_endpoints_and_labels():
    setup = AttemptSetup.from_config(
        DOMAIN,
        WITH_RUBRICS,
        user={"kind": "llm", **ENDPOINT},
        judge={"kind": "llm", **ENDPOINT, "model": "j-1"},
    )
    assert isinstance(setup.user, LLMUser) and isinstance(setup.judge, LLMJudge)
    assert (setup.user.config.model, setup.user.config.label) == ("m-1", "user simulator")
    assert (setup.judge.config.model, setup.judge.config.label) == ("j-1", "judge")
    assert (setup.user_model, setup.judge_model) == ("m-1", "j-1")


def test_build_agent_openai_config_splits_agent_options_from_endpoint_fields():
    config = {
        "spec": "openai",
        "name": "my agent",
        "model": "m-1",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "",
        "parameters": {
            "temperature": 0.5,
            "end_marker": "<<DONE>>",
            "max_attempt_tokens": 5000,
            "max_reply_chars": 900,
        },
        "max_concurrency": 3,
    }
    agent = build_agent(config, task=WITH_RUBRICS, domain=DOMAIN)
    assert isinstance(agent, OpenAIAgent)
    assert (agent.name, agent.end_marker, agent.budget.limit, agent.max_reply_chars) == (
        "my agent",
        "<<DONE>>",
        5000,
        900,
    )
    endpoint = agent.config
    assert (endpoint.model, endpoint.base_url, endpoint.api_key_env, endpoint.temperature) == (
        "m-1",
        "http://127.0.0.1:9/v1",
        None,
        0.5,
    )
    assert (endpoint.max_concurrency, endpoint.label) == (3, "agent")


def test_build_agent_spec_strings_and_mappings_resolve_alike():
    by_string = build_agent("sim:steady", task=WITH_RUBRICS, domain=DOMAIN, seed=4)
    by_mapping = build_agent({"spec": "sim:steady"}, task=WITH_RUBRICS, domain=DOMAIN, seed=4)
    assert (type(by_string), by_string.name) == (SimulatedAgent, by_mapping.name)
    golden = GoldenAgent(WITH_RUBRICS)
    assert build_agent(golden, task=WITH_RUBRICS, domain=DOMAIN) is golden


def test_make_agent_unknown_spec_and_persona_without_domain_are_errors():
    with pytest.raises(ValueError) as unknown:
        make_agent("gpt", task=WITH_RUBRICS)
    with pytest.raises(ValueError) as no_domain:
        make_agent("sim:steady", task=WITH_RUBRICS)
    assert str(unknown.value) == "unknown agent spec 'gpt' (use 'golden', 'sim:<persona>' or 'check:<kind>')"
    assert str(no_domain.value) == "agent spec 'sim:steady': simulated personas need the task's domain"


def test_open_backend_is_a_private_sqlite_sandbox_for_our_domains():
    setup = AttemptSetup.from_config(DOMAIN, WITH_RUBRICS)
    backend = setup.open_backend()
    try:
        assert (type(backend), backend.task.id) == (SqliteBackend, WITH_RUBRICS.id)
    finally:
        backend.close()


def test_run_grades_like_run_task_and_on_a_given_backend():
    setup = AttemptSetup.from_config(DOMAIN, WITH_RUBRICS)
    backend = setup.open_backend()
    try:
        on_given = setup.run(backend)
    finally:
        backend.close()
    fresh = AttemptSetup.from_config(DOMAIN, WITH_RUBRICS).run()  # one setup per attempt: agents keep state
    reference = run_task(DOMAIN, WITH_RUBRICS)
    assert [
        (r.verdict, r.categories, [c.name for c in r.transcript.tool_calls]) for r in (on_given, fresh)
    ] == [(reference.verdict, reference.categories, [c.name for c in reference.transcript.tool_calls])] * 2
    assert reference.verdict == "pass"


def test_run_without_an_agent_is_an_error():
    with pytest.raises(ValueError) as caught:
        AttemptSetup.from_config(DOMAIN, WITH_RUBRICS, agent=None).run()
    assert str(caught.value) == f"task {WITH_RUBRICS.id}: this setup has no agent; drive steps() instead"


NO_TOKENS = Usage()


def _result(agent: Usage, user: Usage = NO_TOKENS, judge: Usage = NO_TOKENS) -> AttemptResult:
    transcript = Transcript(agent_usage=agent, user_usage=user, judge_usage=judge)
    return AttemptResult(task_id=WITH_RUBRICS.id, task_hash="h", status="done", transcript=transcript)


def test_cost_prices_each_role_by_its_model_and_zero_tokens_cost_zero():
    setup = AttemptSetup.from_config(
        DOMAIN, WITH_RUBRICS, agent="sim:steady", user={"kind": "llm", **ENDPOINT}, prices=PRICES
    )
    cost = setup.cost(
        _result(
            Usage(input_tokens=1_000_000, output_tokens=1_000_000, calls=1),
            Usage(input_tokens=500_000, calls=1),
        )
    )
    assert (cost.agent, cost.user, cost.judge, cost.overhead) == (
        Decimal(2),
        Decimal(1),
        Decimal(0),
        Decimal(1),
    )


def test_cost_is_unpriced_without_prices_or_for_an_unlisted_model():
    used = Usage(input_tokens=10, calls=1)
    unpriced = AttemptSetup.from_config(DOMAIN, WITH_RUBRICS, agent="sim:careless", prices=PRICES)
    no_sheet = AttemptSetup.from_config(DOMAIN, WITH_RUBRICS, agent="sim:steady")
    assert (unpriced.cost(_result(used)).agent, no_sheet.cost(_result(used)).agent) == (None, None)
    assert no_sheet.cost(_result(Usage())).agent == Decimal(0)


def test_simulated_persona_switches_silently_at_the_configured_moment(retail_domain, retail_task):
    from datetime import UTC, datetime

    from tb_engine.attempt_setup import build_agent, scheduled_persona

    parameters = {"switch_at": "2026-03-01T12:00:00+00:00", "switch_to": "careless"}
    before, after = datetime(2026, 3, 1, 11, 59, tzinfo=UTC), datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert scheduled_persona("sim:steady", parameters, now=before) == "sim:steady"
    assert scheduled_persona("sim:steady", parameters, now=after) == "sim:careless"
    assert scheduled_persona("sim:steady", {}, now=after) == "sim:steady"
    assert scheduled_persona("golden", parameters, now=after) == "golden"
    task = retail_task("ticket_hold_carrier_exception")
    config = {
        "spec": "sim:steady",
        "parameters": {"switch_at": "2000-01-01T00:00:00", "switch_to": "careless"},
    }
    agent = build_agent(config, task=task, domain=retail_domain, seed=1)
    assert agent.persona.name == "careless"  # naive times are read as UTC; 2000 has passed
