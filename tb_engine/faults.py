"""Commit-point fault injection: a seeded fault plan applied to an attempt's tool calls.

A ``FaultPlan`` says which faults to inject (kinds), how often (a rate, or fixed ordinals among
the calls it applies to) and on which tools (state-changing, reads, named). ``FaultyBackend``
wraps any ``Backend`` (a SQLite sandbox or a ThinkingBox MCP session) and applies the plan in
the one place every tool call passes through, so the runner, the grader and the stored attempt
do not change meaning: the verdict is still the diff of the state, and a retry that writes twice
shows up as an extra effect attributed to both calls.

Determinism: whether call #i of an attempt is faulted, and how, is a hash of
(plan seed, task id, attempt index, call index) — not of time or of what other attempts did —
so the same seed gives the same faults call for call across campaigns compared on it.

Every injected fault is recorded (call index, kind, tool, whether the call's effect was committed);
a planned ordinal the attempt never reached is recorded as not fired, with the reason. The record
goes into ``AttemptResult.extra["faults"]`` through the backend's ``result_extra`` (see runner).
docs/faults.md explains each kind and the incident it models.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tb_engine.backend import Backend, WriteMap
from tb_engine.interfaces import ToolSchema
from tb_engine.results import DiffItem
from tb_engine.snapshot import Snapshot
from tb_engine.spec import TableSpec, ToolSpec
from tb_engine.transcript import ToolCall, ToolCallRequest, Transcript

ERROR_BEFORE_COMMIT = "error_before_commit"
ERROR_AFTER_COMMIT = "error_after_commit"
TIMEOUT_AFTER_COMMIT = "timeout_after_commit"
DUPLICATE_DELIVERY = "duplicate_delivery"
SLOW_REPLY = "slow_reply"
READ_FAILURE = "read_failure"

FAULT_KINDS = (
    ERROR_BEFORE_COMMIT,
    ERROR_AFTER_COMMIT,
    TIMEOUT_AFTER_COMMIT,
    DUPLICATE_DELIVERY,
    SLOW_REPLY,
    READ_FAILURE,
)
# Kinds whose call is executed and whose effect is kept although the agent may not learn of it:
# the faults after which a blind retry writes twice.
COMMIT_POINT_KINDS = (ERROR_AFTER_COMMIT, TIMEOUT_AFTER_COMMIT, DUPLICATE_DELIVERY)
# Kinds that only make sense on one side: a commit point needs a write, a read failure a read.
_WRITES_ONLY = frozenset(COMMIT_POINT_KINDS)
_READS_ONLY = frozenset({READ_FAILURE})

TOOL_SELECTIONS = ("writes", "reads", "all", "named")

# What the agent is told. None of them says whether the call took effect: neither does a real
# backend that lost its reply.
MESSAGES = {
    ERROR_BEFORE_COMMIT: "service temporarily unavailable (503); please retry later",
    ERROR_AFTER_COMMIT: "internal server error (500) while sending the reply",
    TIMEOUT_AFTER_COMMIT: "the request timed out after {timeout_s:g} s waiting for the reply",
    READ_FAILURE: "read failed: the data store is temporarily unavailable (503)",
}


class FaultPlanError(ValueError):
    """A fault plan configuration that cannot be used (the message names the field)."""


@dataclass(frozen=True)
class FaultPlan:
    """Which faults an attempt gets. Exactly one of ``rate`` (> 0) or ``at_calls`` chooses the calls.

    ``at_calls`` are 0-based ordinals among the calls the plan applies to (``tools``): ``(0,)`` is
    "the first state-changing call" with the default selection. ``rate`` is the chance each such
    call is faulted; a rate of 0 keeps the plan (and its record) with no fault, which is what the
    overhead bench compares with no plan at all. With several kinds, each faulted call draws one
    of the kinds that apply to it (commit-point kinds need a state-changing call, read failure a
    read-only one).
    """

    kinds: tuple[str, ...]
    rate: float = 0.0
    at_calls: tuple[int, ...] = ()
    tools: str = "writes"
    tool_names: tuple[str, ...] = ()
    seed: int = 0
    slow_ms: float = 200.0  # slow reply: extra delay before the answer
    timeout_s: float = 30.0  # timeout after commit: the wait the agent is told about (not slept)

    def __post_init__(self) -> None:
        if not self.kinds:
            raise FaultPlanError("kinds: name at least one fault kind")
        unknown = [kind for kind in self.kinds if kind not in FAULT_KINDS]
        if unknown:
            raise FaultPlanError(f"kinds: unknown {', '.join(unknown)} (known: {', '.join(FAULT_KINDS)})")
        if not 0.0 <= self.rate <= 1.0:
            raise FaultPlanError(f"rate: must be between 0 and 1, got {self.rate}")
        if self.rate and self.at_calls:
            raise FaultPlanError("rate and at_calls: give one of them, not both")
        if any(ordinal < 0 for ordinal in self.at_calls):
            raise FaultPlanError("at_calls: ordinals are 0-based and not negative")
        if self.tools not in TOOL_SELECTIONS:
            raise FaultPlanError(f"tools: must be one of {', '.join(TOOL_SELECTIONS)}, got {self.tools!r}")
        if self.tools == "named" and not self.tool_names:
            raise FaultPlanError("tool_names: name the tools when tools is 'named'")
        if self.slow_ms < 0 or self.timeout_s <= 0:
            raise FaultPlanError("slow_ms and timeout_s: must be positive")
        # Derived once, not per call: hashing the frozen plan for a cache lookup on every call cost
        # a measurable share of a built-in attempt (bench/fault_injection.py).
        object.__setattr__(self, "_read_kinds", tuple(k for k in self.kinds if k not in _WRITES_ONLY))
        object.__setattr__(self, "_write_kinds", tuple(k for k in self.kinds if k not in _READS_ONLY))
        # (tool, read_only) -> the kinds that can happen to its calls: shared by every attempt of the
        # plan, as classifying each tool again per attempt was the larger part of a 0%-rate plan's
        # cost on the built-in suite. Not a field: plans still compare and hash by their settings.
        object.__setattr__(self, "_tool_kinds", {})

    @property
    def can_fire(self) -> bool:
        """Whether the plan can fault any call: not a 0% rate without ordinals (the overhead bench's
        plan, a paired campaign's "faults on, none drawn")."""
        return bool(self.at_calls) or self.rate > 0.0

    def to_dict(self) -> dict[str, Any]:
        # Built once per plan and copied: every attempt stores it, and dataclasses.asdict costs tens
        # of microseconds, a measurable share of a built-in attempt (bench/fault_injection.py).
        data = dict(_plan_dict(self))
        for name in ("kinds", "at_calls", "tool_names"):
            data[name] = list(data[name])
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultPlan:
        """A plan from its stored (JSON) form; raises FaultPlanError naming a bad field."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise FaultPlanError(f"unknown field(s): {', '.join(unknown)}")
        try:
            kinds = data.get("kinds") or ()
            return cls(
                kinds=(kinds,) if isinstance(kinds, str) else tuple(str(k) for k in kinds),
                rate=float(data.get("rate", 0.0)),
                at_calls=tuple(int(n) for n in data.get("at_calls") or ()),
                tools=str(data.get("tools", "writes")),
                tool_names=tuple(str(n) for n in data.get("tool_names") or ()),
                seed=int(data.get("seed", 0)),
                slow_ms=float(data.get("slow_ms", 200.0)),
                timeout_s=float(data.get("timeout_s", 30.0)),
            )
        except (TypeError, ValueError) as exc:
            if isinstance(exc, FaultPlanError):
                raise
            raise FaultPlanError(f"not a fault plan: {exc}") from exc

    def applies_to(self, tool: str, read_only: bool) -> bool:
        """Whether calls of ``tool`` are among those the plan may fault."""
        if self.tools == "writes":
            return not read_only
        if self.tools == "reads":
            return read_only
        if self.tools == "named":
            return tool in self.tool_names
        return True

    def kinds_for(self, read_only: bool) -> tuple[str, ...]:
        """The plan's kinds that can happen to a call of this side (see the class docstring)."""
        kinds: tuple[str, ...] = getattr(self, "_read_kinds" if read_only else "_write_kinds")
        return kinds

    def kinds_for_tool(self, tool: str, read_only: bool) -> tuple[str, ...]:
        """The kinds that can happen to a call of ``tool``; () when the plan does not apply to it."""
        cache: dict[tuple[str, bool], tuple[str, ...]] = self.__dict__["_tool_kinds"]  # set in __post_init__
        kinds = cache.get((tool, read_only))
        if kinds is None:
            kinds = self.kinds_for(read_only) if self.applies_to(tool, read_only) else ()
            cache[(tool, read_only)] = kinds
        return kinds


@functools.lru_cache(maxsize=64)
def _plan_dict(plan: FaultPlan) -> dict[str, Any]:
    return {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)}


def unit_draw(*parts: object) -> float:
    """A number in [0, 1) that depends only on ``parts`` (stable across processes and Python versions)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


@dataclass
class FaultRecord:
    """What happened to one faulted call (stored with the attempt)."""

    call: int  # the call's index in the transcript
    ordinal: int  # its ordinal among the calls the plan applies to
    kind: str
    tool: str
    committed: bool  # the call's effect is in the state (observed, not assumed)
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class FaultLog:
    """The attempt's fault record: the plan, the faults that fired, the planned ones that could not."""

    plan: FaultPlan
    fired: list[FaultRecord] = field(default_factory=list)
    eligible_calls: int = 0  # calls the plan applied to

    def unfired(self) -> list[dict[str, Any]]:
        """Planned ordinals the attempt never reached: the agent made too few such calls."""
        fired = {record.ordinal for record in self.fired}
        return [
            {
                "ordinal": ordinal,
                "reason": f"the attempt made {self.eligible_calls} call(s) the plan applies to",
            }
            for ordinal in self.plan.at_calls
            if ordinal not in fired and ordinal >= self.eligible_calls
        ]

    def to_dict(self) -> dict[str, Any]:
        unfired = self.unfired()
        return {
            "plan": self.plan.to_dict(),
            "fired": [record.to_dict() for record in self.fired],
            "unfired": unfired,
            "eligible_calls": self.eligible_calls,
            # The attempt is counted apart when nothing the plan asked for happened to it.
            "none_fired": not self.fired,
        }


class FaultyBackend:
    """A Backend that applies a fault plan to ``inner``'s tool calls; everything else is delegated.

    ``attempt`` is the attempt's index within its (task, campaign): with the plan's seed and the
    task id it decides every call's fault. ``sleep`` is injectable so tests of slow replies need
    not wait. ``tool_specs`` (a sandbox domain's ``DomainSpec.tools``: name -> ToolSpec) answers which
    side a call is on without reading the backend's schemas; tools it does not name are looked up
    in ``inner.tool_schemas()``.
    """

    def __init__(
        self,
        inner: Backend,
        plan: FaultPlan,
        *,
        task_id: str,
        attempt: int,
        sleep: Callable[[float], None] = time.sleep,
        tool_specs: Mapping[str, ToolSpec] | None = None,
    ) -> None:
        self.inner = inner
        self.plan = plan
        self.task_id = task_id
        self.attempt = attempt
        self._log = FaultLog(plan)
        self._sleep = sleep
        # Per tool called, decided on its first call: an attempt calls a few of the backend's tools,
        # and reading every schema up front cost a measurable share of a built-in attempt.
        self._read_only: dict[str, bool] = {}
        self._specs = tool_specs or {}

    def __getattr__(self, name: str) -> Any:
        # Optional Backend methods (system_prompt, state_verdict_of_record, initial_snapshot_deferred…),
        # kept once found: the runner asks for several on every attempt.
        value = getattr(self.inner, name)
        self.__dict__[name] = value
        return value

    @property
    def log(self) -> FaultLog:
        """The attempt's fault record so far (eligible calls counted up to the last call made)."""
        return self._log

    # ---- the fault decision ------------------------------------------------------------
    def _kinds_of(self, tool: str) -> tuple[str, ...]:
        """The plan's kinds that can happen to a call of ``tool``; () when the plan does not apply."""
        return self.plan.kinds_for_tool(tool, self.read_only(tool))

    def planned_fault(self, index: int, tool: str) -> tuple[int, str] | None:
        """(ordinal, kind) when call #``index`` of ``tool`` is to be faulted; counts eligible calls."""
        kinds = self._kinds_of(tool)
        if not kinds:
            return None
        log = self._log
        ordinal = log.eligible_calls
        log.eligible_calls += 1
        plan = self.plan
        if plan.at_calls:
            if ordinal not in plan.at_calls:
                return None
        key = (plan.seed, self.task_id, self.attempt, index)
        if not plan.at_calls and unit_draw("fault-fire", *key) >= plan.rate:
            return None
        kind = kinds[int(unit_draw("fault-kind", *key) * len(kinds))]
        return ordinal, kind

    def read_only(self, tool: str) -> bool:
        """Whether the backend declares ``tool`` read-only; unknown tools count as state-changing (SPEC §1)."""
        spec = self._specs.get(tool)
        if spec is not None:
            return spec.read_only
        if tool not in self._read_only:
            schema = next((s for s in self.inner.tool_schemas() if s.name == tool), None)
            self._read_only[tool] = schema is not None and schema.read_only
        return self._read_only[tool]

    # ---- Backend ------------------------------------------------------------------------
    def tool_schemas(self) -> list[ToolSchema]:
        return self.inner.tool_schemas()

    def call_tool(self, request: ToolCallRequest, *, index: int, turn: int) -> ToolCall:
        planned = self.planned_fault(index, request.name)
        if planned is None:
            return self.inner.call_tool(request, index=index, turn=turn)
        ordinal, kind = planned
        if kind in (ERROR_BEFORE_COMMIT, READ_FAILURE):
            call = self._not_executed(request, index=index, turn=turn, message=MESSAGES[kind])
            self._record(call, ordinal, kind, committed=False)
            return call
        # A backend that learns a call's effect only by reading the state (a ThinkingBox MCP session
        # attributing writes on failure) observes this call's: its record must say if it committed.
        execute = getattr(self.inner, "call_tool_observed", None) or self.inner.call_tool
        call = execute(request, index=index, turn=turn)
        detail = ""
        if kind == DUPLICATE_DELIVERY:
            # At-least-once delivery: the backend runs the request again under the same call index
            # (its effects are the same call's); the agent sees the first delivery's reply.
            again = execute(request, index=index, turn=turn)
            detail = "second delivery: " + (f"error: {again.error}" if again.error else "ok")
            call = dataclasses.replace(
                call,
                changed_state=call.changed_state or again.changed_state,
                duration_ms=call.duration_ms + again.duration_ms,
            )
        elif kind == SLOW_REPLY:
            self._sleep(self.plan.slow_ms / 1000.0)
            call = dataclasses.replace(call, duration_ms=call.duration_ms + self.plan.slow_ms)
        elif call.error is None:  # error or timeout after commit: the effect stays, the reply is lost
            detail = "reply withheld"
            message = MESSAGES[kind].format(timeout_s=self.plan.timeout_s)
            call = dataclasses.replace(call, result=None, error=message)
        else:
            # The call failed on its own: nothing was committed and the agent sees the real error.
            detail = "the call failed by itself; its own error was shown"
        self._record(call, ordinal, kind, committed=call.changed_state, detail=detail)
        return call

    def _not_executed(self, request: ToolCallRequest, *, index: int, turn: int, message: str) -> ToolCall:
        return ToolCall(
            index=index,
            id=request.id,
            name=request.name,
            arguments=request.arguments,
            error=message,
            read_only=self.read_only(request.name),
            changed_state=False,
            turn=turn,
        )

    def _record(self, call: ToolCall, ordinal: int, kind: str, *, committed: bool, detail: str = "") -> None:
        self._log.fired.append(FaultRecord(call.index, ordinal, kind, call.name, committed, detail))

    def initial_snapshot(self) -> Snapshot:
        return self.inner.initial_snapshot()

    def result_snapshot(self) -> Snapshot:
        return self.inner.result_snapshot()

    def golden_snapshot(self) -> Snapshot:
        return self.inner.golden_snapshot()

    def writes(self) -> WriteMap:
        return self.inner.writes()

    def table_specs(self) -> dict[str, TableSpec]:
        return self.inner.table_specs()

    def close(self) -> None:
        self.inner.close()

    def result_extra(self) -> dict[str, Any]:
        """The inner backend's evidence plus the fault record (runner: ``_backend_evidence``)."""
        inner_extra = getattr(self.inner, "result_extra", None)
        extra = dict(inner_extra() or {}) if callable(inner_extra) else {}
        extra["faults"] = self.log.to_dict()
        return extra


def unfireable_record(plan: FaultPlan, transcript: Transcript) -> dict[str, Any]:
    """The fault record of an attempt run under a plan that can fire nothing (``not plan.can_fire``).

    Such a plan changes no call, so the attempt runs on its own backend, with no FaultyBackend in the
    way (measured: the wrapper cost a 0%-rate plan ~5% of a built-in attempt's thread CPU time,
    bench/fault_injection.py), and its record — the same as FaultyBackend would have written: no
    fault, the calls the plan applies to — is made from the transcript afterwards. Each call's
    ``read_only`` is the backend's own answer, as FaultyBackend.read_only reads it.
    """
    log = FaultLog(plan)
    log.eligible_calls = sum(
        1 for call in transcript.tool_calls if plan.kinds_for_tool(call.name, call.read_only)
    )
    record = log.to_dict()
    record["duplicate_effects"] = []
    return record


def faults_of(extra: Mapping[str, Any]) -> dict[str, Any] | None:
    """An attempt's stored fault record (``AttemptResult.extra["faults"]``), or None without a plan."""
    record = extra.get("faults") if isinstance(extra, Mapping) else None
    return record if isinstance(record, dict) else None


def duplicate_effects(
    record: Mapping[str, Any], transcript: Transcript, diff: list[DiffItem]
) -> list[dict[str, Any]]:
    """Extra effects the diff attributes to a committed commit-point fault or to a repeat of its call.

    A repeat is a later call of the same tool with the same arguments (the agent's retry). Each
    entry names the faulted call and its repeats together, so a second refund is laid at the door
    of both the call whose reply was lost and the retry that wrote again; a duplicate delivery's
    extra row is written under the faulted call's own index.
    """
    calls = transcript.tool_calls
    found = []
    for fault in record.get("fired") or ():
        if fault.get("kind") not in COMMIT_POINT_KINDS or not fault.get("committed"):
            continue
        index = int(fault["call"])
        if not 0 <= index < len(calls):
            continue
        original = calls[index]
        repeats = [
            later.index
            for later in calls[index + 1 :]
            if later.name == original.name and later.arguments == original.arguments
        ]
        involved = {index, *repeats}
        for item in diff:
            if item.kind == "extra_effect" and involved & set(item.written_by):
                found.append(
                    {
                        "call": index,
                        "kind": fault["kind"],
                        "tool": original.name,
                        "repeats": repeats,
                        "table": item.table,
                        "key": item.key,
                        "field": item.field,
                        "written_by": list(item.written_by),
                    }
                )
    return found


def annotate_duplicates(extra: dict[str, Any], transcript: Transcript, diff: list[DiffItem]) -> None:
    """Add ``duplicate_effects`` to an attempt's fault record in place (no-op without a plan)."""
    record = faults_of(extra)
    if record is not None:
        record["duplicate_effects"] = duplicate_effects(record, transcript, diff)
