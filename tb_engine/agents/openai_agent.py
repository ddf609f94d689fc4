"""Agent adapter for OpenAI-compatible chat-completions endpoints with tool calling.

Works with OpenAI, Azure OpenAI, vLLM, OpenRouter and Ollama through the shared
client in ``tb_engine.llm`` (retries, Retry-After, per-endpoint caps).

The *done* rule (docs/llm-agents.md):
* a response with tool calls is never done — the runner executes the calls;
* a response without tool calls is a reply to the user (``done=False``: the user
  simulator decides whether the conversation goes on) ...
* ... unless its text contains the configured ``end_marker`` (e.g. ``###DONE###``,
  announced in the policy by whoever sets up the campaign): then ``done=True``
  and the marker is stripped from the text. ``finish_reason`` is not used for
  this: every endpoint says "stop" for an ordinary reply.

Unusable output raises ``ModelOutputError`` (an ``AgentOutputError``): tool-call
arguments that are not a JSON object, a call to a tool the view does not offer,
or an empty response. The runner feeds it back and counts a repair. Arguments of
the wrong *type* are passed through: the backend validates them against the tool
schema and the model sees the tool error next to its call.
"""

from __future__ import annotations

import json
from typing import Any

from tb_engine.agents.openai_parameters import AGENT_OPTIONS
from tb_engine.interfaces import AgentOutputError, AgentStep, AgentView, ToolSchema
from tb_engine.llm.budget import TokenBudget
from tb_engine.llm.client import (
    ChatClient,
    ChatResult,
    EncodedMessages,
    ProviderIdentity,
    RawToolCall,
    json_bytes,
)
from tb_engine.llm.config import EndpointConfig, endpoint_and_options
from tb_engine.llm.text import strip_marker, truncate_text
from tb_engine.transcript import Message, ToolCallRequest, Usage


class ModelOutputError(AgentOutputError):
    """The model answered, but its output cannot be used.

    ``usage`` is that call's usage. The agent also adds it to its next successful
    step, so a runner that continues after a repair loses nothing; a runner that
    ends the attempt on this error should add ``usage`` to the agent's total.
    """

    def __init__(
        self, message: str, *, usage: Usage, text: str = "", raw_tool_calls: list[RawToolCall] | None = None
    ):
        super().__init__(message)
        self.usage = usage
        self.text = text
        self.raw_tool_calls = list(raw_tool_calls or [])


class OpenAIAgent:
    """An Agent (tb_engine.interfaces) backed by a chat-completions model. Make one per attempt."""

    def __init__(
        self,
        config: EndpointConfig,
        *,
        end_marker: str | None = None,
        max_reply_chars: int | None = 20_000,
        max_tool_result_chars: int | None = 20_000,
        max_attempt_tokens: int | None = None,
        name: str | None = None,
    ) -> None:
        self.config = config
        self.name = name or f"openai:{config.model}"
        self.end_marker = end_marker
        self.max_reply_chars = max_reply_chars
        self.max_tool_result_chars = max_tool_result_chars
        self.budget = TokenBudget(max_attempt_tokens)
        self._client = ChatClient(config)
        self._unreported = Usage()  # usage of calls whose output was unusable, billed with the next step
        self._identities: dict[ProviderIdentity, int] = {}  # what answered, and how many calls
        # Each message and the tool list encoded once per attempt (the dialogue only grows).
        self._encoded: list[tuple[Message, bytes]] = []
        self._encoded_system: tuple[str, bytes] | None = None
        self._encoded_tools: tuple[list[ToolSchema], bytes] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OpenAIAgent:
        """Build from stored agent settings: ``endpoint`` (EndpointConfig fields) plus the agent options."""
        allowed = {*AGENT_OPTIONS, "name"}
        config, options = endpoint_and_options(data, what="agent", label="agent", allowed=allowed)
        return cls(config, **options)

    def build_request(self, view: AgentView) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The chat messages and tool schemas sent for ``view`` — nothing else enters the request."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": view.system_prompt}]
        messages.extend(self._to_openai_message(m) for m in view.messages)
        return messages, [tool.to_openai() for tool in view.tools]

    def encode_request(self, view: AgentView) -> EncodedMessages:
        """``build_request`` encoded as JSON, each message and the tool list encoded once per attempt.

        The view's messages are the transcript's own objects, so a message seen on an earlier
        turn is found at the same position; anything else is encoded afresh.
        """
        if self._encoded_system is None or self._encoded_system[0] != view.system_prompt:
            system = {"role": "system", "content": view.system_prompt}
            self._encoded_system = (view.system_prompt, json_bytes(system))
        parts = [self._encoded_system[1]]
        for position, message in enumerate(view.messages):
            if position < len(self._encoded) and self._encoded[position][0] is message:
                parts.append(self._encoded[position][1])
                continue
            del self._encoded[position:]
            encoded = json_bytes(self._to_openai_message(message))
            self._encoded.append((message, encoded))
            parts.append(encoded)
        tools = None
        if view.tools:
            if self._encoded_tools is None or self._encoded_tools[0] is not view.tools:
                self._encoded_tools = (view.tools, json_bytes([tool.to_openai() for tool in view.tools]))
            tools = self._encoded_tools[1]
        return EncodedMessages(b"[" + b",".join(parts) + b"]", tools)

    def _to_openai_message(self, message: Message) -> dict[str, Any]:
        if message.role == "tool":
            return {
                "role": "tool",
                "tool_call_id": message.tool_call_id or "",
                "content": truncate_text(message.content, self.max_tool_result_chars),
            }
        if message.role == "assistant":
            converted: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                converted["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": call.arguments
                            if isinstance(call.arguments, str)
                            else json.dumps(call.arguments),
                        },
                    }
                    for call in message.tool_calls
                ]
            return converted
        return {"role": message.role, "content": message.content}

    def step(self, view: AgentView) -> AgentStep:
        """Ask the model for its next step; raise ModelOutputError on unusable output, InfraError on endpoint failure."""
        self.budget.ensure_available(f"agent {self.name}")
        result = self._client.complete(self.encode_request(view))
        if result.provider is not None:
            self._identities[result.provider] = self._identities.get(result.provider, 0) + 1
        self.budget.charge(result.usage)
        try:
            step = self._interpret(result, view)
        except ModelOutputError:
            self._unreported = self._unreported + result.usage
            raise
        step.usage = self._unreported + result.usage
        self._unreported = Usage()
        return step

    def provider_report(self) -> list[dict[str, Any]]:
        """Each distinct identity the endpoint reported over this attempt's calls, with its call count."""
        return [{**identity.to_dict(), "calls": calls} for identity, calls in self._identities.items()]

    def _interpret(self, result: ChatResult, view: AgentView) -> AgentStep:
        text = truncate_text(result.text, self.max_reply_chars)
        known_tools = {tool.name for tool in view.tools}
        tool_calls = self._parse_tool_calls(result.tool_calls, known_tools, view.turn, result.usage, text)
        if tool_calls:
            text, _ = strip_marker(text, self.end_marker)  # done is only honoured on a tool-free reply
            return AgentStep(text=text, tool_calls=tool_calls, done=False)
        text, done = strip_marker(text, self.end_marker)
        if not text.strip() and not done:
            raise ModelOutputError(
                f"agent {self.name}: empty response (finish_reason={result.finish_reason!r})",
                usage=result.usage,
            )
        return AgentStep(text=text, tool_calls=[], done=done)

    def _parse_tool_calls(
        self, raw_calls: list[RawToolCall], known_tools: set[str], turn: int, usage: Usage, text: str
    ) -> list[ToolCallRequest]:
        problems: list[str] = []
        parsed: list[ToolCallRequest] = []
        seen_ids: set[str] = set()
        for position, raw in enumerate(raw_calls):
            call_id = raw.id if raw.id and raw.id not in seen_ids else f"call_t{turn}_{position}"
            seen_ids.add(call_id)
            if raw.name not in known_tools:
                problems.append(f"tool call {position} ({call_id}): unknown tool {raw.name!r}")
                continue
            try:
                arguments = json.loads(raw.arguments) if raw.arguments.strip() else {}
            except json.JSONDecodeError as exc:
                problems.append(
                    f"tool call {position} ({raw.name}): arguments are not valid JSON ({exc.msg} at char {exc.pos})"
                )
                continue
            if not isinstance(arguments, dict):
                problems.append(
                    f"tool call {position} ({raw.name}): arguments must be a JSON object, got {type(arguments).__name__}"
                )
                continue
            parsed.append(ToolCallRequest(id=call_id, name=raw.name, arguments=arguments))
        if problems:
            raise ModelOutputError("; ".join(problems), usage=usage, text=text, raw_tool_calls=raw_calls)
        return parsed
