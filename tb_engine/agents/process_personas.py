"""Two simulated personas whose *process* is wrong while their end state is right (tb_engine.process).

Harness constructs, not models (their names say so). Both follow the task's golden plan and end in
the golden state, so a state grader passes them; the process analysis must not:

* ``write-revert`` — at the first golden write that sets a column named by one of its arguments
  (``status``, ``deductible`` …) on a row that exists in S0, it makes the write, then the same call
  with that argument set back to the row's S0 value (a write reverted), then the write again, and
  goes on with the plan. A plan with no such write is followed as is.
* ``skip-read`` — leaves out the last read-only golden call before the first state-changing one
  (the read a process rule usually requires: the order before the refund, the claim before the
  payout). A plan without such a read is followed as is.

Like the golden agent the plan is fixed at construction from the task and the domain (S0 values come
from the domain's base data with the task's patch; on an MCP server, whose S0 is the server's, from
the value log of the golden trajectory replayed on a fresh server), never read from the view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tb_engine.agents.golden import DEFAULT_REPLY
from tb_engine.agents.harness_checks import GoldenWrites
from tb_engine.interfaces import AgentStep, AgentView
from tb_engine.spec import DomainSpec, GoldenCall, TaskSpec
from tb_engine.transcript import ToolCallRequest


@dataclass(frozen=True)
class ProcessPersona:
    name: str
    description: str

    @property
    def agent_name(self) -> str:
        return f"sim:{self.name} (simulated persona, not a model)"


PROCESS_PERSONAS: dict[str, ProcessPersona] = {
    "write-revert": ProcessPersona(
        "write-revert",
        "Follows the golden plan, but at its first column-setting write sets the column back to its "
        "initial value and then writes it again: right end state, a write reverted.",
    ),
    "skip-read": ProcessPersona(
        "skip-read",
        "Follows the golden plan without the last read before its first write: right end state, a "
        "required read skipped.",
    ),
}


def _is_write(domain: DomainSpec, tool: str) -> bool:
    spec = domain.tools.get(tool)
    return spec is None or not spec.read_only


def _initial_rows(domain: DomainSpec, task: TaskSpec, table: str) -> list[dict[str, Any]]:
    """S0's rows of ``table``: the base data with the task's patch upserted by primary key."""
    key_columns = domain.tables[table].primary_key
    rows = {tuple(r.get(c) for c in key_columns): dict(r) for r in domain.base_data.get(table, [])}
    for patch in task.data_patch.get(table, []):
        key = tuple(patch.get(c) for c in key_columns)
        rows[key] = {**rows.get(key, {}), **patch}
    return list(rows.values())


def revert_call(domain: DomainSpec, task: TaskSpec, call: GoldenCall) -> GoldenCall | None:
    """``call`` with one column-named argument set back to the S0 value of the row the call names, or None."""
    for table_name, table in domain.tables.items():
        settable = [a for a in call.arguments if a in table.columns and a not in table.primary_key]
        if not settable or len(table.primary_key) != 1:
            continue
        names = set(call.arguments.values()) - {call.arguments[a] for a in settable}
        for row in _initial_rows(domain, task, table_name):
            if row.get(table.primary_key[0]) not in names:
                continue
            for argument in settable:
                initial = row.get(argument)
                if initial is not None and initial != call.arguments[argument]:
                    return GoldenCall(call.tool, {**call.arguments, argument: initial})
    return None


def _with_value(arguments: Any, column: str, new: Any, old: Any) -> tuple[Any, bool]:
    """``arguments`` with the first argument named ``column`` that holds ``new`` (at any depth of
    nested objects, e.g. an ``item`` mapping) set to ``old``; and whether one was found."""
    if not isinstance(arguments, dict):
        return arguments, False
    if column in arguments and arguments[column] == new:
        return {**arguments, column: old}, True
    for name, value in arguments.items():
        replaced, found = _with_value(value, column, new, old)
        if found:
            return {**arguments, name: replaced}, True
    return arguments, False


def revert_call_from_log(
    call: GoldenCall, index: int, value_log: tuple[tuple[Any, ...], ...]
) -> GoldenCall | None:
    """``call`` (golden call ``index``) with one argument set back to the value the cell it changed held
    before, read from the golden replay's value log (a server's S0 is the server's, not the domain's)."""
    for logged, _table, _key, column, op, old, new in value_log:
        if logged != index or op != "update" or column is None or old is None:
            continue
        arguments, found = _with_value(dict(call.arguments), column, new, old)
        if found:
            return GoldenCall(call.tool, arguments)
    return None


def write_revert_plan(
    domain: DomainSpec, task: TaskSpec, golden: GoldenWrites | None = None
) -> tuple[GoldenCall, ...]:
    """The golden plan with its first revertible write made, set back and made again. ``golden``: the
    golden replay's record (MCP domains: S0 values come from its value log, not domain tables)."""
    plan = list(task.golden)
    for index, call in enumerate(plan):
        if golden is not None:
            if index not in golden.writes:
                continue
            back = revert_call_from_log(call, index, golden.value_log)
        elif not _is_write(domain, call.tool):
            continue
        else:
            back = revert_call(domain, task, call)
        if back is not None:
            return tuple(plan[: index + 1] + [back, call] + plan[index + 1 :])
    return tuple(plan)


def skip_read_plan(
    domain: DomainSpec, task: TaskSpec, golden: GoldenWrites | None = None
) -> tuple[GoldenCall, ...]:
    plan = list(task.golden)

    def is_write(index: int) -> bool:  # an MCP golden replay says which calls changed state
        return index in golden.writes if golden is not None else _is_write(domain, plan[index].tool)

    first_write = next((i for i in range(len(plan)) if is_write(i)), None)
    if first_write is None:
        return tuple(plan)
    reads = [i for i in range(first_write) if not is_write(i)]
    if not reads:
        return tuple(plan)
    return tuple(c for i, c in enumerate(plan) if i != reads[-1])


class PlanAgent:
    """Issues its fixed plan one call per step, then the task's golden reply."""

    def __init__(self, persona: ProcessPersona, plan: tuple[GoldenCall, ...], reply: str):
        self.name = persona.agent_name
        self.description = persona.description
        self.plan = plan
        self._reply = reply or DEFAULT_REPLY
        self._next = 0

    def step(self, view: AgentView) -> AgentStep:
        if self._next >= len(self.plan):
            return AgentStep(text=self._reply, done=True)
        call = self.plan[self._next]
        self._next += 1
        return AgentStep(
            tool_calls=[ToolCallRequest(f"process-{self._next}", call.tool, dict(call.arguments))]
        )


def make_process_persona_agent(
    persona: str, *, task: TaskSpec, domain: DomainSpec, golden: GoldenWrites | None = None
) -> PlanAgent:
    """A process persona for one attempt of ``task``; raises KeyError naming unknown personas.

    ``golden``: the golden replay's record on the task's server (MCP domains, whose tables and S0
    the domain does not declare): which calls write, and the values they change."""
    if persona not in PROCESS_PERSONAS:
        raise KeyError(
            f"process persona {persona!r} is unknown; known: {', '.join(sorted(PROCESS_PERSONAS))}"
        )
    plan = (
        write_revert_plan(domain, task, golden)
        if persona == "write-revert"
        else skip_read_plan(domain, task, golden)
    )
    return PlanAgent(PROCESS_PERSONAS[persona], plan, task.extra.get("golden_reply") or DEFAULT_REPLY)
