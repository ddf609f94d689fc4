"""The Redis endpoint gate against a real Redis (the integration run's broker): one cap shared by
every gate, leases that expire, 429 pauses per endpoint, and the figures the campaign page reads."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import redis
from django.conf import settings

from apps.core.endpoint_load import endpoint_loads
from apps.worker.endpoint_gate import RedisEndpointGate, install_endpoint_gate
from tb_engine.llm import ChatClient, EndpointConfig, RetryPolicy, endpoint_gate, set_endpoint_gate
from tests.support.scripted_openai_server import ScriptedOpenAIServer, scripted_server_fixture

pytestmark = pytest.mark.integration

scripted_server = pytest.fixture(scripted_server_fixture, name="scripted_server")


def a_gate(**options) -> RedisEndpointGate:
    """A gate with its own connection, as each worker process has."""
    return RedisEndpointGate(redis.Redis.from_url(settings.CELERY_BROKER_URL), **options)


def an_endpoint() -> str:
    """An endpoint no other test touches (the integration Redis may be shared)."""
    return f"http://gate-test-{uuid.uuid4().hex[:10]}.invalid/v1"


def test_two_gates_sharing_one_cap_never_exceed_it():
    endpoint, gates = an_endpoint(), [a_gate(poll_s=0.01), a_gate(poll_s=0.01)]
    in_flight, peak, lock = 0, 0, threading.Lock()

    def call(gate: RedisEndpointGate) -> None:
        nonlocal in_flight, peak
        for _ in range(3):
            gate.enter(endpoint, 3)
            with lock:
                in_flight += 1
                peak = max(peak, in_flight)
            time.sleep(0.03)
            with lock:
                in_flight -= 1
            gate.leave(endpoint, seconds=0.03, outcome="ok", retry_after_s=None)

    threads = [threading.Thread(target=call, args=(gates[i % 2],)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    load = endpoint_loads([endpoint])[endpoint]
    assert peak == 3
    assert (load.in_flight, load.waiting, load.calls) == (0, 0, 30)


def test_an_expired_lease_frees_its_slot():
    endpoint = an_endpoint()
    killed = a_gate(lease_s=0.4)
    killed.enter(endpoint, 1)  # and never leaves: its worker was killed
    started = time.monotonic()

    a_gate(poll_s=0.01).enter(endpoint, 1)

    assert 0.3 <= time.monotonic() - started < 2.0


def test_a_429_pause_delays_that_endpoint_only():
    limited, other = an_endpoint(), an_endpoint()
    first, second = a_gate(poll_s=0.01), a_gate(poll_s=0.01)
    first.enter(limited, None)
    first.leave(limited, seconds=0.01, outcome="rate_limited", retry_after_s=0.6)

    started = time.monotonic()
    second.enter(other, None)
    other_waited = time.monotonic() - started
    second.enter(limited, None)
    limited_waited = time.monotonic() - started

    assert other_waited < 0.2
    assert limited_waited >= 0.5


def test_waiting_calls_and_a_pause_are_counted_per_endpoint():
    endpoint, holder, waiter = an_endpoint(), a_gate(), a_gate(poll_s=0.01)
    holder.enter(endpoint, 1)
    waiting = threading.Thread(target=waiter.enter, args=(endpoint, 1))
    waiting.start()
    time.sleep(0.2)

    during = endpoint_loads([endpoint])[endpoint]
    holder.leave(endpoint, seconds=0.2, outcome="ok", retry_after_s=None)
    waiting.join(timeout=5)
    after = endpoint_loads([endpoint])[endpoint]

    assert (during.in_flight, during.waiting) == (1, 1)
    assert (after.in_flight, after.waiting) == (1, 0)  # the waiter holds the slot now


def test_leaving_records_calls_errors_429s_and_latency_percentiles():
    endpoint, gate = an_endpoint(), a_gate()
    for seconds, outcome in [(0.3, "ok"), (0.3, "ok"), (0.05, "error"), (0.01, "rate_limited")]:
        gate.enter(endpoint, None)
        gate.leave(endpoint, seconds=seconds, outcome=outcome, retry_after_s=0.0)

    load = endpoint_loads([endpoint])[endpoint]

    assert (load.calls, load.errors, load.rate_limited) == (4, 1, 1)
    assert (load.error_rate, load.rate_limited_rate) == (0.25, 0.25)
    # Both successful calls fall in the 250–500 ms bucket: interpolated inside it.
    assert (load.latency_p50_ms, load.latency_p95_ms) == (375.0, 487.5)


def test_the_chat_client_through_the_installed_redis_gate(scripted_server: ScriptedOpenAIServer):
    scripted_server.script("m", [{"status": 429, "retry_after": "0.2"}, {"text": "ok"}])
    gate = install_endpoint_gate()
    try:
        client = ChatClient(
            EndpointConfig(
                model="m",
                base_url=scripted_server.base_url,
                api_key_env=None,
                max_concurrency=2,
                retry=RetryPolicy(base_delay_s=0.01, max_delay_s=0.02),
            )
        )
        assert endpoint_gate() is gate
        result = client.complete([{"role": "user", "content": "hello"}])
    finally:
        set_endpoint_gate(None)

    load = endpoint_loads([client.endpoint])[client.endpoint]
    assert (result.text, result.rate_limited) == ("ok", 1)
    assert (load.in_flight, load.calls, load.rate_limited, load.errors) == (0, 2, 1, 0)
