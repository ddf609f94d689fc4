"""The shared chat-completions client: retries, Retry-After, backoff, concurrency caps.

Built on the official ``openai`` SDK with its own retries switched off, so that one
policy (``RetryPolicy``) governs every endpoint:

* 429: wait what ``Retry-After`` / ``retry-after-ms`` asks (clamped), else backoff;
  counted against ``max_rate_limit_retries``, apart from other errors.
* 408, 409, 5xx, timeouts, dropped connections: capped exponential backoff with
  full jitter, counted against ``max_retries``.
* other 4xx (bad key, unknown model, bad request): not retried.
Whatever ends the attempt here is raised as ``InfraError`` — never an agent failure.

SDK clients are cached per thread and (provider, base URL, API version, key,
timeout); each request holds one slot of the base URL's
``EndpointLimiter`` and, inside it, passes the process-wide ``EndpointGate`` when one is
installed (``tb_engine.llm.gate``: a cap shared by all workers, 429 pauses); both are
released before any backoff sleep.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx2
import openai

from tb_engine.interfaces import InfraError
from tb_engine.llm.config import EndpointConfig
from tb_engine.llm.gate import Outcome, endpoint_gate, endpoint_key
from tb_engine.llm.limiter import EndpointLimiter, limiter_for
from tb_engine.llm.outbound import OutboundRefused, current_policy, guarded_http_client, refused_cause
from tb_engine.llm.retry import backoff_delay, parse_retry_after
from tb_engine.transcript import Usage

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 409})


@dataclass(frozen=True)
class RawToolCall:
    """A tool call exactly as the endpoint returned it (arguments unparsed)."""

    id: str
    name: str
    arguments: str


@dataclass
class ChatResult:
    """One successful chat completion, reduced to what the engine uses."""

    text: str
    tool_calls: list[RawToolCall]
    finish_reason: str | None
    usage: Usage
    retries: int = 0  # non-429 retries spent on this call
    rate_limited: int = 0  # 429s waited out on this call
    waited_s: float = 0.0
    # What the endpoint said about the model that answered (for drift tracking, see ProviderIdentity).
    provider: ProviderIdentity | None = None


@dataclass(frozen=True)
class ProviderIdentity:
    """The response's ``model`` field, its ``system_fingerprint`` and the response headers chosen by name.

    Providers change weights, safety training and API versions without notice; these are the few
    signs an endpoint gives of it. Header names are matched case-insensitively and stored lower-case.
    """

    model: str | None
    system_fingerprint: str | None
    headers: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "system_fingerprint": self.system_fingerprint,
            "headers": dict(self.headers),
        }

    @classmethod
    def of_response(
        cls, completion: dict[str, Any], headers: Any, names: tuple[str, ...] = ()
    ) -> ProviderIdentity:
        model = completion.get("model")
        fingerprint = completion.get("system_fingerprint")
        chosen = []
        for name in sorted({name.lower() for name in names}):
            value = headers.get(name) if headers is not None else None
            if value is not None:
                chosen.append((name, str(value)))
        return cls(
            model=None if model is None else str(model),
            system_fingerprint=None if fingerprint is None else str(fingerprint),
            headers=tuple(chosen),
        )


@dataclass(frozen=True)
class EncodedMessages:
    """A request's messages and tools already encoded as JSON arrays (UTF-8).

    An agent re-sends its whole conversation and tool list on every call; encoding them anew each
    time was most of an LLM attempt's own CPU with ThinkingBox's tool lists (tens of KB). The
    agent encodes each message once (tb_engine.agents.openai_agent) and the client splices them in.
    """

    messages: bytes
    tools: bytes | None = None


def json_bytes(value: Any) -> bytes:
    """JSON as the SDK itself sends it (UTF-8, compact): what ``EncodedMessages`` carries."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _request_content(body: dict[str, Any], encoded: EncodedMessages) -> bytes:
    rest = json_bytes(body)  # model, options, extra body: everything but messages and tools
    parts = [b'{"messages":', encoded.messages]
    if encoded.tools is not None:
        parts += [b',"tools":', encoded.tools]
    parts.append(b"," + rest[1:] if len(rest) > 2 else b"}")
    return b"".join(parts)


def usage_from_completion(usage: dict[str, Any] | None) -> Usage:
    """Token counts of one completion's usage block; input includes cached input, output includes reasoning."""
    if not isinstance(usage, dict):
        return Usage(calls=1)
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        cached_input_tokens=int(prompt_details.get("cached_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
        calls=1,
    )


# One SDK client (and so one HTTP connection pool) per thread and endpoint: a worker thread runs one
# attempt at a time, and a pool shared by a hundred threads costs each request its lock and its
# scan of the shared connections (2.08 against 1.77 ms of CPU per call at 128 threads in flight).
_thread_clients = threading.local()


def _sdk_client_for(config: EndpointConfig) -> openai.OpenAI:
    api_key = config.api_key()
    # The key enters the cache key only as a digest, so rotating it makes a new client.
    key_digest = hashlib.sha256(api_key.encode()).hexdigest()
    policy = current_policy()
    cache_key = (
        config.provider,
        config.base_url.rstrip("/"),
        config.api_version or "",
        key_digest,
        repr(config.retry.timeout_s),
        repr(policy),  # a new allow-list makes new clients (and connections)
    )
    clients: dict[tuple[str, ...], openai.OpenAI] | None = getattr(_thread_clients, "by_key", None)
    if clients is None:
        clients = _thread_clients.by_key = {}
    client = clients.get(cache_key)
    if client is None:
        # Every connection, redirects included, passes the outbound policy (tb_engine.llm.outbound).
        http_client = guarded_http_client(policy, timeout=config.retry.timeout_s)
        if config.provider == "azure":
            client = openai.AzureOpenAI(
                azure_endpoint=config.base_url,
                api_version=config.api_version,
                api_key=api_key,
                max_retries=0,
                timeout=config.retry.timeout_s,
                http_client=http_client,
            )
        else:
            client = openai.OpenAI(
                base_url=config.base_url,
                api_key=api_key,
                max_retries=0,
                timeout=config.retry.timeout_s,
                http_client=http_client,
            )
        clients[cache_key] = client
    return client


class ChatClient:
    """Thread-safe chat-completions caller for one EndpointConfig."""

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self._sdk = _sdk_client_for(config)
        self.limiter: EndpointLimiter = limiter_for(config.base_url, config.max_concurrency)
        self.endpoint = endpoint_key(config.base_url)  # the gate's name for it: never the key

    def _describe(self) -> str:
        return f"{self.config.label} endpoint {self.config.base_url} (model {self.config.model!r})"

    def complete(
        self,
        messages: list[dict[str, Any]] | EncodedMessages,
        *,
        tools: list[dict[str, Any]] | None = None,
    ) -> ChatResult:
        """Send one chat-completions request, retrying per the policy; raise InfraError when the budget is spent.

        ``messages`` may come encoded (``EncodedMessages``, tools included): the body is then sent
        as those bytes plus the endpoint's own fields, through the SDK's ``content`` parameter.
        """
        policy = self.config.retry
        encoded = messages if isinstance(messages, EncodedMessages) else None
        body: dict[str, Any] = {"model": self.config.model}
        if encoded is None:
            body["messages"] = messages
        body.update(self.config.request_options())
        if tools and encoded is None:
            body["tools"] = tools
        if (tools or (encoded is not None and encoded.tools is not None)) and (
            self.config.parallel_tool_calls is not None
        ):
            body["parallel_tool_calls"] = self.config.parallel_tool_calls
        body.update(self.config.extra_body)
        headers = dict(self.config.extra_headers)
        content = None
        if encoded is not None:
            content = _request_content(body, encoded)
            headers["Content-Type"] = "application/json"
        options: openai.RequestOptions = {"headers": headers} if headers else {}
        errors = rate_limits = 0
        waited = 0.0
        while True:
            try:
                with self.limiter.slot():
                    response = self._post(body, content, options)
                completion = _decode(response)
            except openai.RateLimitError as exc:
                rate_limits += 1
                if rate_limits > policy.max_rate_limit_retries:
                    raise InfraError(
                        f"{self._describe()}: still rate limited (HTTP 429) after {rate_limits - 1} retries"
                    ) from exc
                delay = parse_retry_after(exc.response.headers)
                if delay is None:
                    delay = backoff_delay(policy, rate_limits - 1)
                delay = min(delay, policy.max_retry_after_s)
                reason = "HTTP 429"
            except openai.APIStatusError as exc:
                if exc.status_code not in RETRYABLE_STATUSES and exc.status_code < 500:
                    raise InfraError(
                        f"{self._describe()}: HTTP {exc.status_code}: {endpoint_error_text(exc)}"
                    ) from exc
                errors += 1
                if errors > policy.max_retries:
                    raise InfraError(
                        f"{self._describe()}: HTTP {exc.status_code} after {errors - 1} retries: "
                        f"{endpoint_error_text(exc)}"
                    ) from exc
                asked = parse_retry_after(exc.response.headers)
                delay = (
                    min(asked, policy.max_retry_after_s)
                    if asked is not None
                    else backoff_delay(policy, errors - 1)
                )
                reason = f"HTTP {exc.status_code}"
            except OutboundRefused as exc:  # raised by the guarded connection, not wrapped by the SDK
                raise InfraError(f"{self._describe()}: outbound policy: {exc}") from exc
            except (openai.APIConnectionError, _MalformedCompletion) as exc:
                refused = refused_cause(exc)
                if refused is not None:  # the policy will not change its mind: no retry
                    raise InfraError(f"{self._describe()}: outbound policy: {refused}") from exc
                errors += 1
                if errors > policy.max_retries:
                    raise InfraError(
                        f"{self._describe()}: {_short(str(exc))} after {errors - 1} retries"
                    ) from exc
                delay = backoff_delay(policy, errors - 1)
                reason = type(exc).__name__
            else:
                result = _to_result(completion, retries=errors, rate_limited=rate_limits, waited_s=waited)
                result.provider = ProviderIdentity.of_response(
                    completion, response.headers, self.config.provider_headers
                )
                return result
            log.info("%s: %s, retrying in %.3fs", self._describe(), reason, delay)
            time.sleep(delay)
            waited += delay

    def _post(
        self, body: dict[str, Any], content: bytes | None, options: openai.RequestOptions
    ) -> httpx2.Response:
        """One HTTP request, admitted by the endpoint gate (if one is installed) and reported to it."""
        gate = endpoint_gate()
        if gate is None:
            return self._post_raw(body, content, options)
        gate.enter(self.endpoint, self.config.max_concurrency)
        started = time.monotonic()
        outcome: Outcome = "error"
        retry_after: float | None = None
        try:
            response = self._post_raw(body, content, options)
            outcome = "ok"
            return response
        except openai.RateLimitError as exc:
            outcome = "rate_limited"
            asked = parse_retry_after(exc.response.headers)
            retry_after = None if asked is None else min(asked, self.config.retry.max_retry_after_s)
            raise
        finally:
            # Before any backoff sleep: the caller sleeps only after this returns.
            gate.leave(
                self.endpoint, seconds=time.monotonic() - started, outcome=outcome, retry_after_s=retry_after
            )

    def _post_raw(
        self, body: dict[str, Any], content: bytes | None, options: openai.RequestOptions
    ) -> httpx2.Response:
        # The SDK's documented raw-request path: same auth, errors and connection
        # pool as chat.completions.create, without its per-call type transform of
        # the whole conversation (8 ms vs 2 ms of CPU on a 10-message dialogue,
        # which decides throughput with 64 attempts sharing one GIL). Pre-encoded
        # messages go as the body's bytes (the SDK's ``content`` parameter).
        if content is None:
            return self._sdk.post("/chat/completions", body=body, cast_to=httpx2.Response, options=options)
        return self._sdk.post("/chat/completions", content=content, cast_to=httpx2.Response, options=options)


class _MalformedCompletion(Exception):
    """A 2xx answer that is not a usable chat completion (retried like a 5xx)."""


def _decode(response: httpx2.Response) -> dict[str, Any]:
    # What an endpoint sent is never quoted whole: a base URL pointing inside a network would
    # otherwise read its pages back into the attempt's error (shown to the team). Its size, type
    # and at most a short error message are enough to tell a misconfigured endpoint.
    try:
        data = json.loads(response.content)
    except ValueError as exc:
        raise _MalformedCompletion(
            f"response body is not JSON ({len(response.content)} bytes, "
            f"content-type {_short(response.headers.get('content-type', 'none'), 60)})"
        ) from exc
    if not isinstance(data, dict) or not data.get("choices"):
        shape = (
            f"keys {', '.join(sorted(map(str, data))[:8])}" if isinstance(data, dict) else type(data).__name__
        )
        raise _MalformedCompletion(f"response has no choices ({_short(shape, 120)})")
    return data


def endpoint_error_text(exc: openai.APIStatusError) -> str:
    """What an HTTP error from an endpoint says, for the attempt's error: a JSON error message,
    one line of at most 200 characters, else only the body's size — never the raw body."""
    body = exc.body
    message: Any = None
    if isinstance(body, dict):
        inner = body.get("error")
        message = (
            inner.get("message") if isinstance(inner, dict) else inner if isinstance(inner, str) else None
        )
        message = message if message is not None else body.get("message")
    if isinstance(message, str) and message.strip():
        return _short(" ".join(message.split()), 200)
    size = len(exc.response.content) if exc.response is not None else 0
    return f"no JSON error message ({size} bytes, content-type {_short(exc.response.headers.get('content-type', 'none'), 60)})"


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _content_text(content: Any) -> str:
    # Some servers return content as a list of parts ([{"type": "text", "text": ...}]).
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def _to_result(completion: dict[str, Any], *, retries: int, rate_limited: int, waited_s: float) -> ChatResult:
    choice = completion["choices"][0] or {}
    message = choice.get("message") or {}
    calls: list[RawToolCall] = []
    for position, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):  # custom (non-function) tool calls are not part of our protocol
            continue
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):  # Ollama may send the arguments as an object
            arguments = json.dumps(arguments)
        calls.append(
            RawToolCall(
                id=str(call.get("id") or f"call_{position}"),
                name=str(function.get("name") or ""),
                arguments=arguments,
            )
        )
    return ChatResult(
        text=_content_text(message.get("content")),
        tool_calls=calls,
        finish_reason=choice.get("finish_reason"),
        usage=usage_from_completion(completion.get("usage")),
        retries=retries,
        rate_limited=rate_limited,
        waited_s=waited_s,
    )
