"""Endpoint configuration for OpenAI-compatible chat-completions services.

One ``EndpointConfig`` describes where a model lives and how to call it: base URL,
model, sampling and reasoning settings, extra headers, the *name* of the
environment variable holding the API key (the key itself is never stored,
logged or serialised), the per-endpoint concurrency cap and the retry policy.
Agent, user simulator and judge each get their own config.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

Provider = Literal["openai", "azure"]

# Sent as the bearer token to local servers (vLLM, Ollama) that need no key;
# the SDK refuses to build a client without one.
NO_KEY_PLACEHOLDER = "no-key"


class LLMConfigError(ValueError):
    """An endpoint configuration is unusable (bad field, missing API key variable)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard the shared client tries before raising InfraError."""

    max_retries: int = 6  # 5xx, timeouts, dropped connections
    max_rate_limit_retries: int = 30  # 429s: counted apart so rate limits alone rarely spend the budget
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0  # cap of the exponential backoff before jitter
    max_retry_after_s: float = 120.0  # longest Retry-After we honour; longer values are clamped
    timeout_s: float = 120.0  # per HTTP request

    def __post_init__(self) -> None:
        for name in ("max_retries", "max_rate_limit_retries"):
            if getattr(self, name) < 0:
                raise LLMConfigError(f"retry.{name}: must be >= 0, got {getattr(self, name)!r}")
        for name in ("base_delay_s", "max_delay_s", "max_retry_after_s", "timeout_s"):
            if getattr(self, name) < 0:
                raise LLMConfigError(f"retry.{name}: must be >= 0, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class EndpointConfig:
    """Where and how to call one chat-completions model."""

    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str | None = "OPENAI_API_KEY"  # None: a local endpoint that needs no key
    provider: Provider = "openai"
    api_version: str | None = None  # Azure OpenAI only
    temperature: float | None = None  # None: the endpoint's default (reasoning models reject it)
    max_tokens: int | None = None
    # Which request field carries max_tokens; None picks max_completion_tokens when
    # reasoning_effort is set (o-series reject max_tokens) and max_tokens otherwise.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    reasoning_effort: str | None = None  # e.g. "low" | "medium" | "high"
    seed: int | None = None
    parallel_tool_calls: bool | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)  # provider-specific request fields
    max_concurrency: int | None = None  # process-wide cap of in-flight requests per base URL
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Response headers recorded with the response's model and system_fingerprint (drift tracking).
    provider_headers: tuple[str, ...] = ()
    label: str = "endpoint"  # names this config in error messages, e.g. "agent", "judge"

    def __post_init__(self) -> None:
        where = f"{self.label} endpoint config"
        if not isinstance(self.model, str) or not self.model.strip():
            raise LLMConfigError(f"{where}: model: must be a non-empty string")
        if not isinstance(self.base_url, str) or not self.base_url.startswith(("http://", "https://")):
            raise LLMConfigError(
                f"{where}: base_url: must start with http:// or https://, got {self.base_url!r}"
            )
        if self.provider not in ("openai", "azure"):
            raise LLMConfigError(f"{where}: provider: must be 'openai' or 'azure', got {self.provider!r}")
        if self.provider == "azure" and not self.api_version:
            raise LLMConfigError(f"{where}: api_version: required when provider is 'azure'")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise LLMConfigError(f"{where}: max_concurrency: must be >= 1, got {self.max_concurrency!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise LLMConfigError(f"{where}: max_tokens: must be >= 1, got {self.max_tokens!r}")
        if self.max_tokens_field not in (None, "max_tokens", "max_completion_tokens"):
            raise LLMConfigError(f"{where}: max_tokens_field: must be max_tokens or max_completion_tokens")

    def api_key(self) -> str:
        """Read the API key from the named environment variable (never cached on the config)."""
        if self.api_key_env is None:
            return NO_KEY_PLACEHOLDER
        value = os.environ.get(self.api_key_env)
        if not value:
            raise LLMConfigError(
                f"{self.label} endpoint config: api_key_env: environment variable "
                f"{self.api_key_env!r} is not set (model {self.model!r} at {self.base_url})"
            )
        return value

    def request_options(self) -> dict[str, Any]:
        """The sampling/reasoning fields sent with every request (None values omitted)."""
        options: dict[str, Any] = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.max_tokens is not None:
            token_field = self.max_tokens_field or (
                "max_completion_tokens" if self.reasoning_effort else "max_tokens"
            )
            options[token_field] = self.max_tokens
        if self.reasoning_effort is not None:
            options["reasoning_effort"] = self.reasoning_effort
        if self.seed is not None:
            options["seed"] = self.seed
        return options

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON for storage; holds the variable's name, never the key."""
        data = asdict(self)
        data["provider_headers"] = list(self.provider_headers)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, label: str | None = None) -> EndpointConfig:
        """Build from a mapping (YAML/JSON/DB), naming the offending field on bad input."""
        if not isinstance(data, dict):
            raise LLMConfigError(
                f"{label or 'endpoint'} endpoint config: must be a mapping, got {type(data).__name__}"
            )
        label = label or str(data.get("label") or "endpoint")
        if "api_key" in data:
            raise LLMConfigError(
                f"{label} endpoint config: api_key: name an environment variable in api_key_env instead"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise LLMConfigError(f"{label} endpoint config: unknown field(s): {', '.join(unknown)}")
        values = dict(data)
        values["label"] = label
        retry = values.get("retry") or {}
        if isinstance(retry, dict):
            retry_known = {f.name for f in fields(RetryPolicy)}
            bad = sorted(set(retry) - retry_known)
            if bad:
                raise LLMConfigError(f"{label} endpoint config: retry: unknown field(s): {', '.join(bad)}")
            values["retry"] = RetryPolicy(**retry)
        headers = values.get("provider_headers")
        if headers is not None:
            if isinstance(headers, str) or not all(isinstance(h, str) for h in headers):
                raise LLMConfigError(
                    f"{label} endpoint config: provider_headers: must be a list of header names"
                )
            values["provider_headers"] = tuple(headers)
        for name in ("extra_headers", "extra_body"):
            if values.get(name) is None:
                values[name] = {}
            elif not isinstance(values[name], dict):
                raise LLMConfigError(f"{label} endpoint config: {name}: must be a mapping")
        return cls(**values)


def endpoint_and_options(
    data: Any, *, what: str, label: str, allowed: set[str]
) -> tuple[EndpointConfig, dict[str, Any]]:
    """Split stored settings ``{"endpoint": {...}, **options}`` into an EndpointConfig and checked options.

    One reading for the agent, the user simulator and the judge, so their errors name the place alike.
    """
    options = dict(data)
    endpoint = options.pop("endpoint", None)
    if not isinstance(endpoint, dict):
        raise ValueError(f"{what} config: endpoint: must be a mapping of endpoint fields")
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(f"{what} config: unknown field(s): {', '.join(unknown)}")
    return EndpointConfig.from_dict(endpoint, label=label), options
