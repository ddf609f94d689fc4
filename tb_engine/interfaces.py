"""The interfaces the runner talks to: the agent, user-simulator and judge protocols, the views and
steps they exchange, and the two errors (infrastructure failure vs unusable agent output).

Trust boundary (SPEC §7): the runner builds ``AgentView`` from the policy, the
dialogue, the tool schemas and tool results only. Golden state, the golden
trajectory, checks and rubrics never enter it. Simulated personas are harness
constructs that receive the golden plan at construction time from their factory
(they are labelled simulations everywhere); the view they are *driven* with is
the same untrusted view a real model gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from tb_engine.transcript import Message, ToolCallRequest, Usage


class InfraError(Exception):
    """The infrastructure failed (endpoint down, 5xx/429 after retries, sandbox crash).

    Never an agent failure: the runner marks the attempt ``infra_error``. ``evidence`` (JSON-able,
    e.g. ``{"backend": {"stderr_tail": …}}``) is kept in the attempt's ``AttemptResult.extra``.
    """

    def __init__(self, *args: object, evidence: dict[str, Any] | None = None):
        super().__init__(*args)
        self.evidence: dict[str, Any] = dict(evidence or {})


class AgentOutputError(Exception):
    """The agent's output could not be used (e.g. invalid tool-call JSON).

    The runner feeds it back to the agent as an error and counts a repair; past
    the repair limit the attempt ends with termination ``agent_error``.
    """


@dataclass(frozen=True)
class ToolSchema:
    """What the agent sees of a tool."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema (type: object)
    read_only: bool = False

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass
class AgentView:
    """Everything an agent may see when asked for its next step."""

    system_prompt: str  # the domain policy / instructions
    tools: list[ToolSchema]
    messages: list[Message]  # user, assistant and tool messages so far (no system message)
    turn: int = 0


@dataclass
class AgentStep:
    """One agent response: optional text, optional tool calls, and whether it declares itself done."""

    text: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    done: bool = False  # the agent ends the conversation (termination agent_done)
    usage: Usage = field(default_factory=Usage)


class Agent(Protocol):
    name: str

    def step(self, view: AgentView) -> AgentStep: ...


@dataclass
class UserView:
    """Everything a user simulator may see: its goal and the visible dialogue (never golden data)."""

    query: str
    user_context: str
    messages: list[Message]  # user and assistant messages only


@dataclass
class UserStep:
    text: str = ""
    done: bool = False  # the user ends the conversation (termination user_done)
    usage: Usage = field(default_factory=Usage)


class UserSimulator(Protocol):
    def reply(self, view: UserView) -> UserStep: ...


class Judge(Protocol):
    """Answers one yes/no rubric question about the agent's final reply."""

    def judge(self, question: str, final_reply: str) -> JudgeVerdict: ...


@dataclass
class JudgeVerdict:
    answer: bool | None  # None: the judge could not answer (the rubric is *unjudged*, SPEC §2)
    explanation: str = ""
    usage: Usage = field(default_factory=Usage)
