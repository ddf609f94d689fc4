"""Two simulated personas that react to tool errors, so fault-injection figures can be tested.

Harness constructs, not models (their names say so), like the personas of ``simulated.py``: both
follow the task's golden plan one call per step and differ only in what they do when a call
comes back with an error — which is what a fault plan (tb_engine.faults) provokes.

* ``naive-retry`` re-sends every failed call as is (up to ``MAX_RETRIES`` times). After an error
  *after* commit its retry writes a second time: a second refund, a second note.
* ``careful-retry`` never re-sends a failed write blind. Before each write it reads the records
  the write names — its *witness reads*: every read tool whose parameters the write's arguments
  supply, by name and value (``get_booking(booking_id)`` for ``issue_refund(booking_id, …)``,
  ``zendesk_get_items(table)`` for ``zendesk_create_item(table, item)``: the list that will hold
  the created row) — and after a failed write it reads them again. Changed: the write took effect
  and only its reply was lost, so it moves on. Unchanged: it retries. When no read can show the
  write's effect (a dispute no tool lists, a row created in a collection no tool lists) it reads
  what the task itself reads (the golden plan's reads) instead: a change there still tells it the
  write went through, but no change proves nothing, so it does not re-send: it goes on with the
  plan and tells the user, in its final reply, which action it could not confirm. Failed reads are retried as is (reads are safe).

Which tools are reads comes from the tool schemas the agent is shown (``AgentView.tools``), as a
real agent would take it: the backend's read-only declarations when it makes any (SQLite
sandboxes), else the tool's name — its first verb (``get``, ``list``, ``search``, ``check``…
against ``create``, ``update``, ``cancel``…), since the real ThinkingBox servers mark no tool
read-only. A name with neither (``workday_api``) counts as state-changing (SPEC §1).

Like the golden agent their plan comes from the factory (the task), never from the view; the
view only tells them the tools (their schemas) and whether the last call failed.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from tb_engine.agents.golden import DEFAULT_REPLY
from tb_engine.interfaces import AgentStep, AgentView, ToolSchema
from tb_engine.spec import DomainSpec, GoldenCall, TaskSpec
from tb_engine.transcript import Message, ToolCallRequest

MAX_RETRIES = 2  # re-sends of one failed call before moving on

# A tool name's first verb says which side it is on when the backend declares nothing.
READ_VERBS = frozenset(
    "get list search find lookup check verify validate retrieve fetch view show read query track count".split()
)
WRITE_VERBS = frozenset(
    "create update delete remove add set cancel issue process modify send escalate provision allocate "
    "reship charge generate assign revoke grant decide change request reschedule open order file return "
    "submit apply approve deny close reset transfer refund notify post put patch insert upsert".split()
)


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

# What the script yields (the calls of one step: several reads go out together, as a real agent
# sends independent reads in one turn) and is sent back (the tool messages answering them, in order).
Script = Generator[list[ToolCallRequest], list[Message], None]
Read = tuple[str, dict[str, Any]]  # a read call: tool name, arguments


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
        self.unconfirmed: list[int] = []  # plan indexes of failed writes no read could check (reported)
        self._tools: dict[str, ToolSchema] = {}  # the schemas shown to the agent (the first view's)
        self._declares_reads = False
        self._reply = task.extra.get("golden_reply") or DEFAULT_REPLY
        self._script: Script = self._run()
        self._pending: list[ToolCallRequest] | None = None
        self._issued = 0
        self._finished = False

    # ---- the script ---------------------------------------------------------------------------
    def _is_write(self, tool: str) -> bool:
        schema = self._tools.get(tool)
        if schema is None:
            return True  # unknown tools count as state-changing (SPEC §1)
        if self._declares_reads:
            return not schema.read_only
        return not named_as_read(tool)

    def _request(self, tool: str, arguments: dict[str, Any]) -> ToolCallRequest:
        self._issued += 1
        return ToolCallRequest(f"{self.persona.name}-{self._issued}", tool, dict(arguments))

    def witness_reads(self, call: GoldenCall) -> list[Read]:
        """The read calls that can show ``call``'s effect: every read tool whose parameters the
        write's arguments supply — its required ones (``account_id`` also from ``from_account_id``),
        or, for a read requiring none, those of its optional ones the write names. [] when no read
        can show the effect."""
        found: list[Read] = []
        for name, schema in sorted(self._tools.items()):
            if self._is_write(name):
                continue
            required = list(schema.parameters.get("required") or [])
            if required:
                found.extend((name, arguments) for arguments in _supplied(required, call.arguments))
                continue
            properties = schema.parameters.get("properties") or {}
            optional = {p: call.arguments[p] for p in properties if p in call.arguments}
            if optional:
                found.append((name, optional))
        return found

    def _read_all(self, reads: list[Read]) -> Generator[list[ToolCallRequest], list[Message], list[Message]]:
        """The replies to ``reads``, sent in one step; failed ones are sent again (reads are safe)."""
        replies = yield [self._request(tool, arguments) for tool, arguments in reads]
        for _ in range(MAX_RETRIES):
            failed = [position for position, reply in enumerate(replies) if reply.is_error]
            if not failed:
                break
            again = yield [self._request(*reads[position]) for position in failed]
            for position, reply in zip(failed, again, strict=True):
                replies[position] = reply
        return list(replies)

    def context_reads(self) -> list[Read]:
        """The golden plan's own reads (how the task looks at the state), each once: they may show a
        write's effect (a card's status in its account) but, named by nothing the write says, their
        silence proves nothing."""
        unique: list[Read] = []
        for planned in self.task.golden:
            read = (planned.tool, dict(planned.arguments))
            if not self._is_write(planned.tool) and read not in unique:
                unique.append(read)
        return unique

    def _looks(
        self, call: GoldenCall
    ) -> Generator[list[ToolCallRequest], list[Message], tuple[list[Read], list[Read], list[str] | None]]:
        """Before a careful write: (witness reads, the reads it will compare, their replies now).
        A read that fails even when sent again shows nothing (its arguments do not fit): dropped."""
        witnesses = self.witness_reads(call)
        for candidates in (witnesses, self.context_reads()):
            if not candidates:
                continue
            replies = yield from self._read_all(candidates)
            usable = [
                (read, reply.content)
                for read, reply in zip(candidates, replies, strict=True)
                if not reply.is_error
            ]
            if usable:
                reads = [read for read, _ in usable]
                return (reads if candidates is witnesses else []), reads, [content for _, content in usable]
        return [], [], None

    def _run(self) -> Script:
        for index, call in enumerate(self.task.golden):
            careful_write = self.persona.careful and self._is_write(call.tool)
            witnesses, reads, before = (yield from self._looks(call)) if careful_write else ([], [], None)
            (reply,) = yield [self._request(call.tool, dict(call.arguments))]
            for _ in range(MAX_RETRIES):
                if not reply.is_error:
                    break
                if careful_write:
                    after = [r.content for r in (yield from self._read_all(reads))] if reads else None
                    if after != before:
                        self.seen_committed.append(index)
                        break
                    if not witnesses:
                        # No read can show whether the write took effect: re-sending it could do it
                        # twice, so the user is told instead (the effect, if committed, stands).
                        self.unconfirmed.append(index)
                        break
                self.retries.append(index)
                (reply,) = yield [self._request(call.tool, dict(call.arguments))]

    def final_reply(self) -> str:
        """The task's reply, plus a word on every failed write it could neither confirm nor redo."""
        if not self.unconfirmed:
            return self._reply
        tools = ", ".join(dict.fromkeys(self.task.golden[index].tool for index in self.unconfirmed))
        return (
            f"{self._reply} Please note: the service answered {tools} with an error and I could not "
            "check whether it went through, so I did not send it again; please confirm before asking "
            "me to repeat it."
        )

    # ---- Agent --------------------------------------------------------------------------------
    def step(self, view: AgentView) -> AgentStep:
        if not self._tools:
            self._tools = {schema.name: schema for schema in view.tools}
            self._declares_reads = any(schema.read_only for schema in view.tools)
        if self._finished:
            return AgentStep(text=self.final_reply(), done=True)
        try:
            if self._pending is None:
                requests = next(self._script)
            else:
                requests = self._script.send([self._answer_to(request, view) for request in self._pending])
        except StopIteration:
            self._finished = True
            return AgentStep(text=self.final_reply(), done=True)
        self._pending = requests
        return AgentStep(tool_calls=list(requests))

    @staticmethod
    def _answer_to(request: ToolCallRequest, view: AgentView) -> Message:
        for message in reversed(view.messages):
            if message.role == "tool" and message.tool_call_id == request.id:
                return message
        raise RuntimeError(f"no reply to tool call {request.id} in the view")


def named_as_read(tool: str) -> bool:
    """Whether a tool's name says it reads: its first verb (``zendesk_get_items``,
    ``crm_api_check_vip_status``) is a read verb; no verb at all counts as state-changing."""
    for word in tool.lower().split("_"):
        if word in READ_VERBS:
            return True
        if word in WRITE_VERBS:
            return False
    return False


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
