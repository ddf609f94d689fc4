"""LLM user simulator: plays the customer from the task's query and private context only.

It sees the ``UserView`` (query, user context, visible user/assistant dialogue) and
nothing else — never golden data, checks or rubrics. Roles are flipped for the
model: the agent's messages are its "user" turns and its own earlier messages
are "assistant" turns. The first message is the task's query verbatim (no model
call), so every attempt opens identically. The conversation ends (``done=True``)
when the reply contains the stop token (stripped from the text) or is empty.
"""

from __future__ import annotations

from typing import Any

from tb_engine.interfaces import UserStep, UserView
from tb_engine.llm.client import ChatClient
from tb_engine.llm.config import EndpointConfig, endpoint_and_options
from tb_engine.llm.text import strip_marker, truncate_text

STOP_TOKEN = "###STOP###"

DEFAULT_INSTRUCTIONS = """You are a customer talking to a support agent. Stay in character as the customer.

Your goal, in your own first message:
{query}

What you know about yourself and your situation (private; share only what the agent asks for or needs):
{user_context}

Rules:
- Answer only from the information above and from what the agent tells you. If asked for something you
  do not know, say you do not know. Never invent order numbers, ids, amounts or personal details.
- Write short, natural customer messages, one at a time. Do not act as the agent or describe tools.
- When your goal has been achieved, or the agent has clearly finished or cannot help further,
  reply with a brief closing message followed by {stop_token}
"""


class LLMUser:
    """A UserSimulator (tb_engine.interfaces) backed by a chat-completions model."""

    def __init__(
        self,
        config: EndpointConfig,
        *,
        stop_token: str = STOP_TOKEN,
        instructions: str = DEFAULT_INSTRUCTIONS,
        max_reply_chars: int | None = 4_000,
    ) -> None:
        for placeholder in ("{query}", "{user_context}", "{stop_token}"):
            if placeholder not in instructions:
                raise ValueError(f"user simulator instructions: missing placeholder {placeholder}")
        self.config = config
        self.stop_token = stop_token
        self.instructions = instructions
        self.max_reply_chars = max_reply_chars
        self._client = ChatClient(config)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMUser:
        """Build from stored settings: ``endpoint`` (EndpointConfig fields) plus the simulator options."""
        allowed = {"stop_token", "instructions", "max_reply_chars"}
        config, options = endpoint_and_options(data, what="user simulator", label="user", allowed=allowed)
        return cls(config, **options)

    def build_messages(self, view: UserView) -> list[dict[str, Any]]:
        """The simulator's request: its instructions plus the visible dialogue with roles flipped."""
        system = self.instructions.format(
            query=view.query, user_context=view.user_context, stop_token=self.stop_token
        )
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        for message in view.messages:
            if message.role not in ("user", "assistant") or not message.content.strip():
                continue  # tool traffic and tool-call-only turns are invisible to the customer
            flipped = "assistant" if message.role == "user" else "user"
            messages.append({"role": flipped, "content": message.content})
        return messages

    def reply(self, view: UserView) -> UserStep:
        """The customer's next message; the opening message is the query itself."""
        if not any(m.role == "user" for m in view.messages):
            return UserStep(text=view.query, done=False)
        result = self._client.complete(self.build_messages(view))
        text, stopped = strip_marker(result.text, self.stop_token)
        text = truncate_text(text, self.max_reply_chars)
        return UserStep(text=text, done=stopped or not text.strip(), usage=result.usage)
