"""Structured transcript of one attempt: messages, tool calls, token usage.

These types are the contract between the runner, agents, user simulators, the
Django shell and the ThinkingBox importers. Everything serialises to plain JSON
with ``to_dict`` / ``from_dict`` so a stored attempt can be regraded later.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from tb_engine import result_format as read

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = get_args(Role)


def shallow_fields(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as a dict without dataclasses.asdict's deep copy.

    The values here are JSON data that is serialised right away; asdict's recursive copying was
    a measurable share of an attempt's cost.
    """
    return {name: getattr(obj, name) for name in _field_names(type(obj))}


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    # dataclasses.fields() rebuilds its tuple on every call: a million-row import called it 10 million times.
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


@dataclass
class Usage:
    """Token counts of one or more LLM calls (all zero for agents that use no model)."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.calls + other.calls,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        return shallow_fields(self)

    @classmethod
    def from_dict(cls, data: Any) -> Usage:
        """Read a stored usage; raises ResultFormatError naming the field when it is not one."""
        data = read.json_object(data, known=cls.__dataclass_fields__)
        return cls(**{name: read.integer(data, name, 0) for name in cls.__dataclass_fields__})


@dataclass
class ToolCallRequest:
    """A tool call as the agent asked for it (arguments may be unparsed/invalid JSON)."""

    id: str
    name: str
    arguments: Any  # dict when valid; the raw string when the agent produced bad JSON

    def to_dict(self) -> dict[str, Any]:
        return shallow_fields(self)

    @classmethod
    def from_dict(cls, data: Any) -> ToolCallRequest:
        """Read a stored tool call request; raises ResultFormatError naming the field when it is not one."""
        data = read.json_object(data, known=cls.__dataclass_fields__)
        return cls(
            id=read.text(data, "id"), name=read.text(data, "name"), arguments=read.anything(data, "arguments")
        )


@dataclass
class ToolCall:
    """One executed tool call with its outcome and the effects it wrote."""

    index: int  # 0-based position among the attempt's tool calls
    id: str
    name: str
    arguments: Any
    result: Any = None
    error: str | None = None
    read_only: bool = False  # declared read-only by the tool schema
    changed_state: bool = False  # observed: this call wrote at least one row
    turn: int = 0
    started_ms: float = 0.0  # offset from attempt start
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return shallow_fields(self)

    @classmethod
    def from_dict(cls, data: Any) -> ToolCall:
        """Read a stored tool call; raises ResultFormatError naming the field when it is not one."""
        data = read.json_object(data, known=cls.__dataclass_fields__)
        return cls(
            index=read.integer(data, "index"),
            id=read.text(data, "id"),
            name=read.text(data, "name"),
            arguments=read.anything(data, "arguments"),
            result=read.anything(data, "result", None),
            error=read.optional_text(data, "error"),
            read_only=read.boolean(data, "read_only", False),
            changed_state=read.boolean(data, "changed_state", False),
            turn=read.integer(data, "turn", 0),
            started_ms=read.number(data, "started_ms", 0.0),
            duration_ms=read.number(data, "duration_ms", 0.0),
        )


@dataclass
class Message:
    """One dialogue message. ``tool_calls`` only on assistant messages; ``tool_call_id`` only on tool messages."""

    role: Role
    content: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None  # tool name on tool messages
    turn: int = 0
    at_ms: float = 0.0
    usage: Usage | None = None
    is_error: bool = False  # tool message carrying an error

    def to_dict(self) -> dict[str, Any]:
        data = shallow_fields(self)
        data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        data["usage"] = None if self.usage is None else self.usage.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Message:
        """Read a stored message; raises ResultFormatError naming the field when it is not one."""
        data = read.json_object(data, known=cls.__dataclass_fields__)
        return cls(
            role=read.choice(data, "role", ROLES),
            content=read.text(data, "content", ""),
            tool_calls=read.nested_list(data, "tool_calls", ToolCallRequest.from_dict),
            tool_call_id=read.optional_text(data, "tool_call_id"),
            name=read.optional_text(data, "name"),
            turn=read.integer(data, "turn", 0),
            at_ms=read.number(data, "at_ms", 0.0),
            usage=None if data.get("usage") is None else read.nested(data, "usage", Usage.from_dict),
            is_error=read.boolean(data, "is_error", False),
        )


@dataclass
class Transcript:
    """Everything that was said and done in one attempt."""

    messages: list[Message] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    agent_usage: Usage = field(default_factory=Usage)
    user_usage: Usage = field(default_factory=Usage)  # evaluation overhead
    judge_usage: Usage = field(default_factory=Usage)  # evaluation overhead

    def final_reply(self) -> str:
        """The agent's last assistant text (what rubric judges read)."""
        for message in reversed(self.messages):
            if message.role == "assistant" and message.content:
                return message.content
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": [m.to_dict() for m in self.messages],
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "agent_usage": self.agent_usage.to_dict(),
            "user_usage": self.user_usage.to_dict(),
            "judge_usage": self.judge_usage.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Transcript:
        """Read a stored transcript; raises ResultFormatError naming the field when it is not one."""
        data = read.json_object(data, known=cls.__dataclass_fields__)
        return cls(
            messages=read.nested_list(data, "messages", Message.from_dict),
            tool_calls=read.nested_list(data, "tool_calls", ToolCall.from_dict),
            agent_usage=read.nested(data, "agent_usage", Usage.from_dict, Usage),
            user_usage=read.nested(data, "user_usage", Usage.from_dict, Usage),
            judge_usage=read.nested(data, "judge_usage", Usage.from_dict, Usage),
        )
