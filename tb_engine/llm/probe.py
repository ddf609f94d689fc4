"""Ask an endpoint which model answers, without running an attempt (drift watch between runs).

One tiny chat completion ("Reply with OK.", at most a few output tokens); what matters is the
response's ``model``, ``system_fingerprint`` and chosen headers (``ProviderIdentity``), not the text.
Errors surface as ``InfraError`` like any other call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tb_engine.llm.client import ChatClient, ProviderIdentity
from tb_engine.llm.config import EndpointConfig, RetryPolicy

PROBE_MESSAGES = [{"role": "user", "content": "Reply with OK."}]
PROBE_MAX_TOKENS = 16


def probe_identity(endpoint: EndpointConfig | Mapping[str, Any]) -> ProviderIdentity:
    """The identity the endpoint reports for one minimal request (few retries, short timeout)."""
    config = endpoint if isinstance(endpoint, EndpointConfig) else EndpointConfig.from_dict(dict(endpoint))
    config = dataclasses.replace(
        config,
        max_tokens=PROBE_MAX_TOKENS,
        label="provider probe",
        retry=RetryPolicy(
            max_retries=min(config.retry.max_retries, 2),
            max_rate_limit_retries=min(config.retry.max_rate_limit_retries, 2),
            base_delay_s=config.retry.base_delay_s,
            max_delay_s=min(config.retry.max_delay_s, 5.0),
            max_retry_after_s=min(config.retry.max_retry_after_s, 10.0),
            timeout_s=min(config.retry.timeout_s, 30.0),
        ),
    )
    result = ChatClient(config).complete(list(PROBE_MESSAGES))
    return result.provider or ProviderIdentity(model=None, system_fingerprint=None)
