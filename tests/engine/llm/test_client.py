"""The shared LLM client against a real scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import random
import threading
import time
from email.utils import formatdate

import pytest

from tb_engine.interfaces import InfraError
from tb_engine.llm import (
    ChatClient,
    EndpointConfig,
    LLMConfigError,
    RetryPolicy,
    backoff_delay,
    endpoint_gate,
    endpoint_key,
    parse_retry_after,
    set_endpoint_gate,
)
from tb_engine.transcript import Usage
from tests.support.scripted_openai_server import ScriptedOpenAIServer, scripted_server_fixture

scripted_server = pytest.fixture(scripted_server_fixture, name="scripted_server")

FAST = RetryPolicy(max_retries=3, max_rate_limit_retries=10, base_delay_s=0.01, max_delay_s=0.02, timeout_s=5)
HELLO = [{"role": "user", "content": "hello"}]


def client_for(server: ScriptedOpenAIServer, model: str = "m", **overrides) -> ChatClient:
    settings = {"retry": FAST, "api_key_env": None, **overrides}
    return ChatClient(EndpointConfig(model=model, base_url=server.base_url, **settings))


def test_chat_client_429_storm_honours_retry_after_then_succeeds(scripted_server):
    scripted_server.script("m", [{"status": 429, "retry_after": "0.1", "repeat": 4}, {"text": "finally"}])
    started = time.monotonic()
    result = client_for(scripted_server).complete(HELLO)
    elapsed = time.monotonic() - started
    assert result.text == "finally"
    assert result.rate_limited == 4
    assert len(scripted_server.requests_for("m")) == 5
    assert elapsed >= 0.4  # four waits of the 0.1 s the server asked for, not the 0.02 s backoff cap


def test_chat_client_rate_limits_beyond_their_budget_raise_infra_error(scripted_server):
    scripted_server.script("m", [{"status": 429, "retry_after": "0", "repeat": 4}, {"text": "too late"}])
    policy = RetryPolicy(max_rate_limit_retries=2, base_delay_s=0.01, max_delay_s=0.02)
    with pytest.raises(InfraError) as caught:
        client_for(scripted_server, retry=policy).complete(HELLO)
    assert "HTTP 429" in str(caught.value)
    assert len(scripted_server.requests_for("m")) == 3


def test_chat_client_500_burst_beyond_budget_raises_infra_error(scripted_server):
    scripted_server.script("m", [{"status": 500, "repeat": 6}, {"text": "never reached"}])
    with pytest.raises(InfraError) as caught:
        client_for(scripted_server).complete(HELLO)
    assert "HTTP 500 after 3 retries" in str(caught.value)
    assert len(scripted_server.requests_for("m")) == 4
    assert scripted_server.remaining("m") == 3


def test_chat_client_500s_within_budget_are_retried(scripted_server):
    scripted_server.script("m", [{"status": 503, "repeat": 2}, {"text": "recovered"}])
    result = client_for(scripted_server).complete(HELLO)
    assert (result.text, result.retries) == ("recovered", 2)


def test_chat_client_dropped_connections_are_retried(scripted_server):
    scripted_server.script("m", [{"drop": True}, {"drop": True}, {"text": "back"}])
    result = client_for(scripted_server).complete(HELLO)
    assert (result.text, result.retries) == ("back", 2)
    assert len(scripted_server.requests_for("m")) == 3


def test_chat_client_timeouts_are_retried(scripted_server):
    scripted_server.script("m", [{"delay_ms": 1500, "text": "slow"}, {"text": "fast"}])
    policy = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.02, timeout_s=0.5)
    result = client_for(scripted_server, retry=policy).complete(HELLO)
    assert (result.text, result.retries) == ("fast", 1)


def test_chat_client_unauthorised_is_not_retried(scripted_server):
    scripted_server.script("m", [{"status": 401, "error": "bad key"}, {"text": "unused"}])
    with pytest.raises(InfraError) as caught:
        client_for(scripted_server).complete(HELLO)
    assert "HTTP 401" in str(caught.value)
    assert len(scripted_server.requests_for("m")) == 1


def test_chat_client_usage_counts_cached_and_reasoning_tokens(scripted_server):
    usage = {"prompt_tokens": 1200, "cached_tokens": 1024, "completion_tokens": 300, "reasoning_tokens": 256}
    scripted_server.script("m", [{"text": "ok", "usage": usage}])
    result = client_for(scripted_server).complete(HELLO)
    assert result.usage == Usage(
        input_tokens=1200, cached_input_tokens=1024, output_tokens=300, reasoning_tokens=256, calls=1
    )


def test_chat_client_sends_settings_headers_and_extra_body(scripted_server):
    scripted_server.script("m", [{"text": "ok"}])
    client = client_for(
        scripted_server,
        temperature=0.2,
        max_tokens=512,
        reasoning_effort="low",
        seed=7,
        extra_headers={"X-Title": "thinkingbox"},
        extra_body={"top_k": 5},
    )
    client.complete(HELLO)
    request = scripted_server.requests_for("m")[0]
    assert request.body == {
        "model": "m",
        "messages": HELLO,
        "temperature": 0.2,
        "max_completion_tokens": 512,
        "reasoning_effort": "low",
        "seed": 7,
        "top_k": 5,
    }
    assert request.headers["x-title"] == "thinkingbox"


def test_chat_client_reads_api_key_from_named_env_var(scripted_server, monkeypatch):
    monkeypatch.setenv("TB_TEST_LLM_KEY", "sk-test-secret")
    scripted_server.script("m", [{"text": "ok"}])
    client = client_for(scripted_server, api_key_env="TB_TEST_LLM_KEY")
    assert client.complete(HELLO).text == "ok"
    assert "sk-test-secret" not in repr(client.config) and "sk-test-secret" not in str(
        client.config.to_dict()
    )


def test_endpoint_config_missing_api_key_env_raises_clear_error(monkeypatch):
    monkeypatch.delenv("TB_TEST_MISSING_KEY", raising=False)
    config = EndpointConfig(model="gpt-4o", api_key_env="TB_TEST_MISSING_KEY", label="agent")
    with pytest.raises(LLMConfigError) as caught:
        ChatClient(config)
    assert str(caught.value) == (
        "agent endpoint config: api_key_env: environment variable 'TB_TEST_MISSING_KEY' is not set "
        "(model 'gpt-4o' at https://api.openai.com/v1)"
    )


def test_endpoint_config_from_dict_names_bad_fields():
    with pytest.raises(LLMConfigError) as unknown:
        EndpointConfig.from_dict({"model": "m", "temprature": 0.1}, label="judge")
    with pytest.raises(LLMConfigError) as raw_key:
        EndpointConfig.from_dict({"model": "m", "api_key": "sk-x"}, label="user")
    with pytest.raises(LLMConfigError) as azure:
        EndpointConfig.from_dict(
            {"model": "dep", "provider": "azure", "base_url": "https://x.openai.azure.com"}
        )
    assert str(unknown.value) == "judge endpoint config: unknown field(s): temprature"
    assert (
        str(raw_key.value)
        == "user endpoint config: api_key: name an environment variable in api_key_env instead"
    )
    assert str(azure.value) == "endpoint endpoint config: api_version: required when provider is 'azure'"


def test_chat_client_azure_provider_posts_to_deployment_path(scripted_server):
    scripted_server.script("my-deployment", [{"text": "from azure"}])
    config = EndpointConfig(
        model="my-deployment",
        base_url=scripted_server.root_url,
        provider="azure",
        api_version="2024-10-21",
        api_key_env=None,
        retry=FAST,
    )
    assert ChatClient(config).complete(HELLO).text == "from azure"
    assert (
        scripted_server.requests_for("my-deployment")[0].path
        == "/openai/deployments/my-deployment/chat/completions"
    )


def test_chat_client_concurrency_cap_respected_at_server(scripted_server):
    scripted_server.script("m", [{"delay_ms": 100, "text": "ok", "repeat": 12}])
    client = client_for(scripted_server, max_concurrency=3)
    threads = [threading.Thread(target=client.complete, args=(HELLO,)) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(scripted_server.requests_for("m")) == 12
    assert scripted_server.peak_in_flight == 3
    assert client.limiter.peak == 3


def test_chat_client_uncapped_requests_run_in_parallel(scripted_server):
    scripted_server.script("m", [{"delay_ms": 300, "text": "ok", "repeat": 16}])
    client = client_for(scripted_server)
    threads = [threading.Thread(target=client.complete, args=(HELLO,)) for _ in range(16)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    assert scripted_server.peak_in_flight == 16
    assert elapsed < 1.2  # serialised it would take 4.8 s


def test_parse_retry_after_reads_seconds_millis_and_http_date():
    now = 1_700_000_000.0
    assert parse_retry_after({"Retry-After": "3"}, now=now) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}, now=now) == 0.25
    assert parse_retry_after({"Retry-After": formatdate(now + 7, usegmt=True)}, now=now) == 7.0
    assert parse_retry_after({"Retry-After": formatdate(now - 60, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}, now=now) is None
    assert parse_retry_after({}, now=now) is None


def test_backoff_delay_full_jitter_stays_under_capped_exponential():
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    rng = random.Random(1)
    delays = [[backoff_delay(policy, index, rng) for _ in range(200)] for index in range(6)]
    ceilings = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert [all(0.0 <= d <= c for d in ds) for ds, c in zip(delays, ceilings)] == [True] * 6
    assert [max(ds) > c * 0.8 for ds, c in zip(delays, ceilings)] == [True] * 6  # jitter spans the range


def test_probe_reports_the_identity_of_the_model_that_answers():
    from tb_engine.llm.config import EndpointConfig
    from tb_engine.llm.probe import probe_identity
    from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

    with ScriptedOpenAIServer(generic=GenericMode()) as server:
        server.system_fingerprint = "fp_1"
        server.reported_models["m"] = "m-2025-06"
        server.response_headers = {"OpenAI-Version": "2020-10-01"}
        config = EndpointConfig(
            model="m", base_url=server.base_url, api_key_env=None, provider_headers=("openai-version",)
        )
        first = probe_identity(config)
        server.system_fingerprint = "fp_2"
        second = probe_identity(config.to_dict())
        body = server.requests[0].body
    assert first.to_dict() == {
        "model": "m-2025-06",
        "system_fingerprint": "fp_1",
        "headers": {"openai-version": "2020-10-01"},
    }
    assert second.system_fingerprint == "fp_2"
    assert (body["messages"], body["max_tokens"]) == ([{"role": "user", "content": "Reply with OK."}], 16)


class RecordingGate:
    """An in-test EndpointGate: records every enter and leave, admits at once."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.lock = threading.Lock()

    def enter(self, endpoint, limit):
        with self.lock:
            self.calls.append(("enter", endpoint, limit))

    def leave(self, endpoint, *, seconds, outcome, retry_after_s):
        with self.lock:
            self.calls.append(("leave", endpoint, outcome, retry_after_s))
            self.last_seconds = seconds


@pytest.fixture
def recording_gate():
    gate = RecordingGate()
    set_endpoint_gate(gate)
    yield gate
    set_endpoint_gate(None)


def test_chat_client_passes_each_request_through_the_installed_gate(scripted_server, recording_gate):
    scripted_server.script("m", [{"status": 503}, {"delay_ms": 50, "text": "ok"}])
    client = client_for(scripted_server, max_concurrency=5)
    result = client.complete(HELLO)
    endpoint = scripted_server.base_url.rstrip("/")
    assert result.text == "ok"
    assert recording_gate.calls == [
        ("enter", endpoint, 5),
        ("leave", endpoint, "error", None),
        ("enter", endpoint, 5),
        ("leave", endpoint, "ok", None),
    ]
    assert recording_gate.last_seconds >= 0.05  # the request's own time: the latency the page shows


def test_chat_client_reports_a_429s_retry_after_to_the_gate(scripted_server, recording_gate):
    scripted_server.script("m", [{"status": 429, "retry_after": "0.2"}, {"text": "after the pause"}])
    result = client_for(scripted_server).complete(HELLO)
    endpoint = scripted_server.base_url.rstrip("/")
    assert (result.text, result.rate_limited) == ("after the pause", 1)
    assert recording_gate.calls == [
        ("enter", endpoint, None),
        ("leave", endpoint, "rate_limited", 0.2),
        ("enter", endpoint, None),
        ("leave", endpoint, "ok", None),
    ]


def test_chat_client_leaves_the_gate_before_sleeping_out_a_backoff(scripted_server):
    class TimedGate(RecordingGate):
        def __init__(self) -> None:
            super().__init__()
            self.moments: list[tuple[str, float]] = []

        def enter(self, endpoint, limit):
            self.moments.append(("enter", time.monotonic()))

        def leave(self, endpoint, **report):
            self.moments.append(("leave", time.monotonic()))

    gate = TimedGate()
    set_endpoint_gate(gate)
    try:
        scripted_server.script("m", [{"status": 429, "retry_after": "0.3"}, {"text": "ok"}])
        client_for(scripted_server).complete(HELLO)
    finally:
        set_endpoint_gate(None)
    events = [event for event, _ in gate.moments]
    first_leave, second_enter = gate.moments[1][1], gate.moments[2][1]
    assert events == ["enter", "leave", "enter", "leave"]
    # The 0.3 s Retry-After was slept between leaving and entering again, outside the gate.
    assert second_enter - first_leave >= 0.3


def test_chat_client_without_a_gate_uses_only_the_in_process_limiter(scripted_server):
    assert endpoint_gate() is None
    scripted_server.script("m", [{"text": "ok"}])
    assert client_for(scripted_server).complete(HELLO).text == "ok"


def test_endpoint_key_is_the_normalised_base_url_without_credentials():
    assert (
        endpoint_key("HTTPS://User:sk-secret@API.Example.com:8443/v1/?x=1")
        == "https://api.example.com:8443/v1"
    )
    assert endpoint_key("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"
    assert endpoint_key("https://api.openai.com/v1") == "https://api.openai.com/v1"
