"""Harness-check agents: the golden trajectory changed on purpose, to check the grader itself.

They are neither models nor simulated personas: each replays a known variant of a task's golden
trajectory whose right verdict is known in advance, so a campaign of them measures the harness
(a grader that passes a do-nothing run, or misses a skipped write, is broken, or the task is).

| kind                 | plan                                                        | a sound grader says |
|----------------------|-------------------------------------------------------------|---------------------|
| ``do-nothing``       | no call, no reply                                           | fail (else the task is non-discriminating) |
| ``skip-last-write``  | every golden call but the last one that changed state       | fail                |
| ``changed-argument`` | golden, one argument of the last state-changing call changed | fail               |
| ``duplicate-create`` | golden, the first call that created a row issued twice      | fail                |
| ``unstable-text-edit`` | golden, free text written into an unstable field reworded | pass                |

The first three are offered for campaigns (``CHECKS``); the last two are run kinds of the
verdict-agreement tests and of validation. Which golden calls wrote what comes from one golden
replay on a real backend (``GoldenWrites``, built by ``tb_engine.attempt_setup.golden_writes``):
tool servers rarely declare which tools are read-only, so the replay's own effect record decides.
Like the golden agent, the plan is fixed at construction and never read from the view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tb_engine.agents.golden import DEFAULT_REPLY
from tb_engine.interfaces import AgentStep, AgentView
from tb_engine.spec import GoldenCall, TaskSpec
from tb_engine.transcript import ToolCallRequest

CHECKS = ("do-nothing", "skip-last-write", "changed-argument")
RUN_KINDS = ("golden", *CHECKS, "duplicate-create", "unstable-text-edit")
LABELS = {
    "do-nothing": "do-nothing (harness check, not a model)",
    "skip-last-write": "skip-last-write (harness check, not a model)",
    "changed-argument": "changed-argument (harness check, not a model)",
    "duplicate-create": "duplicate-create (harness check, not a model)",
    "unstable-text-edit": "unstable-text-edit (harness check, not a model)",
}
_KEY_LIKE_SUFFIXES = ("_id", "_ids", "_reference", "_ref", "_number", "_code", "_key")
_KEY_LIKE = {"id", "ids", "table", "tool", "action", "reference", "filter", "operation", "method"}


@dataclass(frozen=True)
class GoldenWrites:
    """What each golden call did on one replay: which changed state, which created rows, which
    (table, field) cells it wrote (field None for a whole row), and each table's unstable fields."""

    writes: tuple[int, ...] = ()
    creates: tuple[int, ...] = ()
    written: dict[int, tuple[tuple[str, str | None], ...]] = field(default_factory=dict)
    unstable: dict[str, frozenset[str]] = field(default_factory=dict)
    errors: tuple[str, ...] = ()  # tool errors of the golden replay itself (an invalid task)
    schemas: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # tool -> JSON schema, as the agent sees it
    # The replay's value log, (call, table, key, column, op, old, new) per write, when the backend keeps one.
    value_log: tuple[tuple[Any, ...], ...] = ()


@dataclass(frozen=True)
class Plan:
    """The calls a harness check makes, and whether its kind applies to the task at all."""

    calls: tuple[GoldenCall, ...]
    applicable: bool = True
    note: str = ""  # what was changed, or why the kind does not apply


class PlanAgent:
    """Issues its plan's calls in its first step, then replies and declares done (``name`` = the kind)."""

    def __init__(self, name: str, plan: Plan, reply: str = DEFAULT_REPLY):
        self.name = name
        self.plan = plan
        self._reply = reply
        self._issued = False

    def step(self, view: AgentView) -> AgentStep:
        if not self._issued and self.plan.calls:
            self._issued = True
            calls = [
                ToolCallRequest(f"{self.name}-{i}", call.tool, dict(call.arguments))
                for i, call in enumerate(self.plan.calls)
            ]
            return AgentStep(tool_calls=calls)
        return AgentStep(text=self._reply, done=True)


class DoNothingAgent:
    """Says nothing and calls nothing: the baseline every discriminating task must fail."""

    name = "do-nothing"
    plan = Plan(())

    def step(self, view: AgentView) -> AgentStep:
        return AgentStep(text="", done=True)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """(path, value) of every scalar inside an arguments mapping, depth first, in order."""
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    if isinstance(value, list):
        return [leaf for index, item in enumerate(value) for leaf in _leaves(item, (*path, index))]
    return [(path, value)]


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {key: (_replaced(item, rest, new) if key == head else item) for key, item in value.items()}
    return [(_replaced(item, rest, new) if index == head else item) for index, item in enumerate(value)]


def _name(path: tuple[Any, ...]) -> str:
    """The nearest mapping key of a leaf (its field name), '' for a bare list element."""
    return next((str(p) for p in reversed(path) if isinstance(p, str)), "")


def _key_like(name: str) -> bool:
    lowered = name.lower()
    return lowered in _KEY_LIKE or lowered.endswith(_KEY_LIKE_SUFFIXES)


def _where(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path)


def enum_values(schema: Any, name: str) -> list[Any]:
    """Every ``enum`` value the JSON schema allows for a property called ``name``, at any depth."""
    found: list[Any] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict) and name in value:
                found += _enums_below(value[name])
            found += enum_values(value, name)
    elif isinstance(schema, list):
        for item in schema:
            found += enum_values(item, name)
    return list(dict.fromkeys(found))


def _enums_below(schema: Any) -> list[Any]:
    if isinstance(schema, dict):
        own = list(schema.get("enum") or [])
        return own + [v for key, child in schema.items() if key != "enum" for v in _enums_below(child)]
    if isinstance(schema, list):
        return [v for child in schema for v in _enums_below(child)]
    return []


def _changed_text(value: str, allowed: list[Any]) -> str:
    """Another allowed value of an enumerated field, else the text visibly changed."""
    others = [v for v in allowed if isinstance(v, str) and v != value]
    return others[0] if others else f"{value} (changed)"


def changed_argument(
    call: GoldenCall, written_fields: set[str], unstable: set[str], schema: dict[str, Any] | None = None
) -> tuple[GoldenCall, str] | None:
    """``call`` with one argument changed so the state it writes differs (None: nothing to change).

    Preference: a number, boolean or text the call writes into a hashed field; then any other
    such value that is not a key or selector (ids, table names, filters). Numbers +1, booleans
    flipped, enumerated text (per the tool's schema) set to another allowed value, other text
    marked changed — so the call still succeeds and writes a wrong value.
    """
    candidates = [
        (path, value)
        for path, value in _leaves(call.arguments)
        if value is not None and not _key_like(_name(path)) and _name(path) not in unstable
    ]

    def rank(leaf: tuple[tuple[Any, ...], Any]) -> tuple[int, int]:
        path, value = leaf
        kind = (
            0
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            else 1
            if isinstance(value, bool)
            else 2
        )
        return (0 if _name(path) in written_fields else 1, kind)

    if not candidates:
        return None
    path, value = min(candidates, key=rank)
    if isinstance(value, bool):
        new: Any = not value
    elif isinstance(value, (int, float)):
        new = value + 1
    else:
        new = _changed_text(str(value), enum_values(schema or {}, _name(path)))
    return GoldenCall(
        call.tool, _replaced(call.arguments, path, new)
    ), f"{call.tool} {_where(path)}: {value!r} -> {new!r}"


def plan_for(kind: str, task: TaskSpec, writes: GoldenWrites) -> Plan:
    """The calls a run kind makes on ``task`` (see the module docstring)."""
    golden = tuple(task.golden)
    if kind == "golden":
        return Plan(golden)
    if kind == "do-nothing":
        return Plan(())
    if kind in ("skip-last-write", "changed-argument") and not writes.writes:
        return Plan(golden, applicable=False, note="the golden trajectory changes no state")
    if kind == "skip-last-write":
        last = writes.writes[-1]
        return Plan(golden[:last] + golden[last + 1 :], note=f"skipped call {last} ({golden[last].tool})")
    if kind == "changed-argument":
        for index in reversed(writes.writes):
            written_fields = {f for _, f in writes.written.get(index, ()) if f}
            unstable = set().union(
                *(writes.unstable.get(t, frozenset()) for t, _ in writes.written.get(index, ()))
            )
            schema = writes.schemas.get(golden[index].tool)
            changed = changed_argument(golden[index], written_fields, unstable, schema)
            if changed is not None:
                call, note = changed
                return Plan(golden[:index] + (call,) + golden[index + 1 :], note=f"call {index}: {note}")
        return Plan(golden, applicable=False, note="no state-changing call has an argument to change")
    if kind == "duplicate-create":
        if not writes.creates:
            return Plan(golden, applicable=False, note="the golden trajectory creates no row")
        first = writes.creates[0]
        return Plan(
            golden[: first + 1] + golden[first:], note=f"call {first} ({golden[first].tool}) issued twice"
        )
    if kind == "unstable-text-edit":
        for index in writes.writes:
            tables = {t for t, _ in writes.written.get(index, ())}
            unstable = set().union(*(writes.unstable.get(t, frozenset()) for t in tables))
            for path, value in _leaves(golden[index].arguments):
                if isinstance(value, str) and value and _name(path) in unstable:
                    edited = GoldenCall(
                        golden[index].tool, _replaced(golden[index].arguments, path, f"{value} (reworded)")
                    )
                    note = f"call {index}: {golden[index].tool} {_where(path)} reworded"
                    return Plan(golden[:index] + (edited,) + golden[index + 1 :], note=note)
        return Plan(golden, applicable=False, note="no golden call writes text into an unstable field")
    raise ValueError(f"unknown harness check {kind!r} (known: {', '.join(RUN_KINDS)})")


def make_harness_check_agent(
    kind: str, task: TaskSpec, writes: GoldenWrites | None = None
) -> PlanAgent | DoNothingAgent:
    """The agent of one run kind for ``task``; all but do-nothing need the golden replay's ``writes``."""
    if kind == "do-nothing":
        return DoNothingAgent()
    if kind not in RUN_KINDS:
        raise ValueError(f"unknown harness check {kind!r} (known: {', '.join(RUN_KINDS)})")
    reply = task.extra.get("golden_reply") or DEFAULT_REPLY
    return PlanAgent(kind, plan_for(kind, task, writes or GoldenWrites()), reply)
