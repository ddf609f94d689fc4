"""Shared machinery for real model endpoints: config, retries, concurrency caps, usage, budgets."""

from tb_engine.llm.budget import TokenBudget, TokenLimitExceeded
from tb_engine.llm.client import ChatClient, ChatResult, ProviderIdentity, RawToolCall, usage_from_completion
from tb_engine.llm.config import EndpointConfig, LLMConfigError, RetryPolicy
from tb_engine.llm.gate import EndpointGate, endpoint_gate, endpoint_key, set_endpoint_gate
from tb_engine.llm.limiter import EndpointLimiter, limiter_for
from tb_engine.llm.retry import backoff_delay, parse_retry_after
from tb_engine.llm.text import strip_marker, truncate_text

__all__ = [
    "ChatClient",
    "ChatResult",
    "EndpointConfig",
    "EndpointGate",
    "EndpointLimiter",
    "LLMConfigError",
    "ProviderIdentity",
    "RawToolCall",
    "RetryPolicy",
    "TokenBudget",
    "TokenLimitExceeded",
    "backoff_delay",
    "endpoint_gate",
    "endpoint_key",
    "limiter_for",
    "parse_retry_after",
    "set_endpoint_gate",
    "strip_marker",
    "truncate_text",
    "usage_from_completion",
]
