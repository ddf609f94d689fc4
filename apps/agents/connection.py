"""Test an agent's connection with one real call, and which key variables a worker may send.

The test is one tiny chat completion to the configured endpoint ("Reply with OK.", a few output
tokens, two retries at most): it answers whether the URL, the model name and the key variable work
together before a campaign spends thousands of attempts finding out. Nothing is stored; the key
variable's value is read from this process's environment by the engine and never shown.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import time
from dataclasses import dataclass

from django.conf import settings

from apps.agents.models import AgentConfig
from apps.agents.services import (
    NEVER_KEY_PREFIXES,
    NEVER_KEY_VARIABLES,
    api_key_env_refusal,
    base_url_refusal,
)
from tb_engine.attempt_setup import agent_endpoint
from tb_engine.interfaces import InfraError
from tb_engine.llm.client import ChatClient
from tb_engine.llm.config import EndpointConfig, LLMConfigError, RetryPolicy
from tb_engine.llm.probe import PROBE_MAX_TOKENS, PROBE_MESSAGES


@dataclass(frozen=True)
class ConnectionResult:
    ok: bool
    summary: str  # one sentence for the page
    model: str | None = None  # the model the endpoint says answered
    reply: str = ""
    seconds: float = 0.0


def connection_test(agent: AgentConfig) -> ConnectionResult:
    """One real chat completion to the agent's endpoint, as a worker would send it (never raises)."""
    if agent.kind != AgentConfig.Kind.OPENAI:
        return ConnectionResult(False, f"{agent.get_kind_display()} agents make no calls: nothing to test.")
    refusal = base_url_refusal(agent.base_url) or api_key_env_refusal(agent.api_key_env)
    if refusal:
        return ConnectionResult(False, f"Not sent: {refusal}.")
    if agent.api_key_env and agent.api_key_env not in os.environ:
        return ConnectionResult(
            False, f"Not sent: the key variable {agent.api_key_env} is not set in this server's environment."
        )
    started = time.monotonic()
    try:
        config = EndpointConfig.from_dict(
            agent_endpoint(
                {
                    "model": agent.model,
                    "base_url": agent.base_url,
                    "api_key_env": agent.api_key_env,
                    "parameters": agent.parameters,
                }
            ),
            label="connection test",
        )
        config = dataclasses.replace(
            config,
            max_tokens=PROBE_MAX_TOKENS,
            retry=RetryPolicy(
                max_retries=min(config.retry.max_retries, 2),
                max_rate_limit_retries=1,
                base_delay_s=min(config.retry.base_delay_s, 0.5),
                max_delay_s=2.0,
                max_retry_after_s=5.0,
                timeout_s=min(config.retry.timeout_s, 20.0),
            ),
        )
        result = ChatClient(config).complete(list(PROBE_MESSAGES))
    except (InfraError, LLMConfigError, ValueError) as exc:
        return ConnectionResult(False, f"The call failed: {exc}", seconds=time.monotonic() - started)
    seconds = time.monotonic() - started
    answered = result.provider.model if result.provider else None
    return ConnectionResult(
        True,
        f"Connected: {answered or agent.model} answered in {seconds:.1f} s.",
        model=answered,
        reply=(result.text or "")[:200],
        seconds=seconds,
    )


@dataclass(frozen=True)
class KeyVariables:
    patterns: tuple[str, ...]  # the administrator's allow-list (TB_API_KEY_ENV_ALLOWED)
    present: tuple[str, ...]  # names set in this server's environment that the list allows
    outbound: tuple[str, ...]  # hosts the workers may call (TB_OUTBOUND_ALLOWED_HOSTS)


def key_variables() -> KeyVariables:
    """Which key variables may be named (patterns) and which allowed ones are set here (names only)."""
    patterns = tuple(settings.API_KEY_ENV_ALLOWED)
    present = tuple(
        sorted(
            name
            for name in os.environ
            if name not in NEVER_KEY_VARIABLES
            and not name.startswith(NEVER_KEY_PREFIXES)
            and any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
        )
    )
    return KeyVariables(patterns, present, tuple(settings.OUTBOUND_ALLOWED_HOSTS))
