"""Two simulated personas that react to tool errors, so fault-injection figures can be tested.

Harness constructs, not models (their names say so), like the personas of ``simulated.py``: both
follow the task's golden plan one call per step and differ only in what they do when a call
comes back with an error — which is what a fault plan (tb_engine.faults) provokes.

* ``naive-retry`` re-sends every failed call as is (up to ``MAX_RETRIES`` times). After an error
  *after* commit its retry writes a second time: a second refund, a second note.
* ``careful-retry`` never re-sends a failed write blind: before each write it reads the records
  the write names (every read-only tool whose required parameters the write's arguments supply),
  and after a failed write it reads them again. Changed: the write took effect and only its reply
  was lost, so it moves on. Unchanged: it retries. Failed reads are retried as is (reads are safe).

Like the golden agent their plan comes from the factory (the task), never from the view; the
view only tells them whether the last call failed.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from tb_engine.agents.golden import DEFAULT_REPLY
from tb_engine.interfaces import AgentStep, AgentView
from tb_engine.spec import DomainSpec, GoldenCall, TaskSpec
from tb_engine.transcript import Message, ToolCallRequest

MAX_RETRIES = 2  # re-sends of one failed call before moving on


@dataclass(frozen=True)
class RetryPersona:
    name: str
    description: str
    careful: bool

    @property
    def agent_name(self) -> str:
        return f"sim:{self.name} (simulated persona, not a model)"


RETRY_PERSONAS: dict[str, RetryPersona] = {
    "naive-retry": RetryPersona(
        "naive-retry", "Follows the golden plan; re-sends every failed call as is.", careful=False
    ),
    "careful-retry": RetryPersona(
        "careful-retry",
        "Follows the golden plan; reads the records a write names before it and, after a failed "
        "write, again: retries only when nothing changed.",
        careful=True,
    ),
}

# What the script yields (a call to make) and is sent back (the tool message answering it).
Script = Generator[ToolCallRequest, Message, None]


class RetryAgent:
    """One attempt of a retry persona: a script of calls driven by the replies in the view."""

    def __init__(self, persona: RetryPersona, *, task: TaskSpec, domain: DomainSpec):
        self.persona = persona
        self.name = persona.agent_name
        self.description = persona.description
        self.task = task
        self.domain = domain
        self.retries: list[int] = []  # plan indexes of re-sent calls (test evidence, not in the transcript)
        self.seen_committed: list[int] = []  # plan indexes of failed writes found to have taken effect
        self._reply = task.extra.get("golden_reply") or DEFAULT_REPLY
        self._script: Script = self._run()
        self._pending: ToolCallRequest | None = None
        self._issued = 0
        self._finished = False

    # ---- the script ---------------------------------------------------------------------------
    def _is_write(self, tool: str) -> bool:
        spec = self.domain.tools.get(tool)
        return spec is None or not spec.read_only  # unknown tools count as state-changing (SPEC §1)

    def _request(self, tool: str, arguments: dict[str, Any]) -> ToolCallRequest:
        self._issued += 1
        return ToolCallRequest(f"{self.persona.name}-{self._issued}", tool, dict(arguments))

    def witness_reads(self, call: GoldenCall) -> list[tuple[str, dict[str, Any]]]:
        """The read-only calls that show the records ``call`` names: every read tool whose required
        parameters the write's arguments supply (``account_id`` also from ``from_account_id``),
        then the golden plan's own reads (how the task itself looks at the state), each once."""
        found: list[tuple[str, dict[str, Any]]] = []
        for name, spec in sorted(self.domain.tools.items()):
            if not spec.read_only:
                continue
            required = list(spec.parameters.get("required") or [])
            for arguments in _supplied(required, call.arguments):
                found.append((name, arguments))
        for planned in self.task.golden:
            if not self._is_write(planned.tool):
                found.append((planned.tool, dict(planned.arguments)))
        unique: list[tuple[str, dict[str, Any]]] = []
        for read in found:
            if read not in unique:
                unique.append(read)
        return unique

    def _read_all(
        self, reads: list[tuple[str, dict[str, Any]]]
    ) -> Generator[ToolCallRequest, Message, list[str]]:
        seen = []
        for tool, arguments in reads:
            reply = yield self._request(tool, arguments)
            seen.append(reply.content)
        return seen

    def _run(self) -> Script:
        for index, call in enumerate(self.task.golden):
            careful_write = self.persona.careful and self._is_write(call.tool)
            reads = self.witness_reads(call) if careful_write else []
            before = (yield from self._read_all(reads)) if reads else None
            reply = yield self._request(call.tool, dict(call.arguments))
            for _ in range(MAX_RETRIES):
                if not reply.is_error:
                    break
                if before is not None:
                    after = yield from self._read_all(reads)
                    if after != before:
                        self.seen_committed.append(index)
                        break
                self.retries.append(index)
                reply = yield self._request(call.tool, dict(call.arguments))

    # ---- Agent --------------------------------------------------------------------------------
    def step(self, view: AgentView) -> AgentStep:
        if self._finished:
            return AgentStep(text=self._reply, done=True)
        try:
            if self._pending is None:
                request = next(self._script)
            else:
                request = self._script.send(self._answer_to(self._pending, view))
        except StopIteration:
            self._finished = True
            return AgentStep(text=self._reply, done=True)
        self._pending = request
        return AgentStep(tool_calls=[request])

    @staticmethod
    def _answer_to(request: ToolCallRequest, view: AgentView) -> Message:
        for message in reversed(view.messages):
            if message.role == "tool" and message.tool_call_id == request.id:
                return message
        raise RuntimeError(f"no reply to tool call {request.id} in the view")


def _supplied(required: list[str], arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """Argument sets for a read needing ``required`` taken from a write's ``arguments``: by exact
    name, or, for a single parameter, from every argument whose name ends with it."""
    if not required:
        return []
    if all(parameter in arguments for parameter in required):
        return [{parameter: arguments[parameter] for parameter in required}]
    if len(required) == 1:
        (parameter,) = required
        return [{parameter: value} for name, value in arguments.items() if name.endswith("_" + parameter)]
    return []


def make_retry_agent(persona: str, *, task: TaskSpec, domain: DomainSpec) -> RetryAgent:
    """A retry persona for one attempt of ``task``; raises KeyError naming unknown personas."""
    if persona not in RETRY_PERSONAS:
        raise KeyError(f"retry persona {persona!r} is unknown; known: {', '.join(sorted(RETRY_PERSONAS))}")
    return RetryAgent(RETRY_PERSONAS[persona], task=task, domain=domain)
