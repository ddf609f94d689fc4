"""Run one attempt in named phases: prepare -> dialogue -> snapshot -> golden replay -> diff -> grade -> record.

Each phase is a plain function so it can be tested alone; ``run_attempt`` chains them and turns
any InfraError (or a crash of the harness itself) into status ``infra_error``, never a verdict.

The dialogue and the attempt also exist as step generators (``dialogue_steps``, ``attempt_steps``)
that yield each ``AgentView`` and receive the agent's ``AgentStep``: ``run_dialogue`` and
``run_attempt`` drive them with an in-process agent (``drive``), the training environment server
with steps that arrive over HTTP. One code path, so both follow the same dialogue rules and grading.

The runner takes built objects (agent, user simulator, judge, backend); ``attempt_setup`` builds
them from configuration.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from tb_engine.backend import Backend
from tb_engine.diff import diff_states, effects
from tb_engine.faults import annotate_duplicates
from tb_engine.golden import GoldenReplayError
from tb_engine.grading import Grade, evaluate_checks, grade, judge_rubrics
from tb_engine.interfaces import (
    Agent,
    AgentOutputError,
    AgentStep,
    AgentView,
    InfraError,
    Judge,
    ToolSchema,
    UserSimulator,
    UserView,
)
from tb_engine.process import (
    Footprint,
    ProcessRulesError,
    WriteEntry,
    analyse,
    domain_rules,
    encode_value_log,
    golden_footprint,
)
from tb_engine.results import AttemptResult, CheckResult, DiffItem, Effect, RubricResult, Termination
from tb_engine.sandbox import task_hash_of
from tb_engine.snapshot import Snapshot, snapshot_digest
from tb_engine.spec import TaskSpec
from tb_engine.transcript import Message, ToolCall, Transcript, Usage


@dataclass(frozen=True)
class Limits:
    """Per-attempt budgets. Running out of turns or tool calls ends the attempt with ``max_turns``."""

    max_turns: int = 30  # agent steps (model calls)
    max_tool_calls: int = 60
    timeout_s: float = 600.0  # wall time, checked between steps
    max_repairs: int = 2  # AgentOutputErrors fed back before the attempt ends with agent_error


class Clock(Protocol):
    """Milliseconds since the attempt started (message times, the attempt's duration)."""

    def ms(self) -> float: ...


class _Clock:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000.0


@dataclass
class Prepared:
    system_prompt: str
    tools: list[ToolSchema]
    initial: Snapshot | None  # None: the backend hands S0 over with its end state (read after the dialogue)


@dataclass
class Dialogue:
    transcript: Transcript
    termination: Termination
    error: str = ""


@dataclass
class Graded:
    diff: list[DiffItem]
    effects: list[Effect]
    checks: list[CheckResult]
    rubrics: list[RubricResult]
    grade: Grade
    extra: dict[str, Any] = field(default_factory=dict)


def prepare(task: TaskSpec, backend: Backend, *, policy: str | None = None) -> Prepared:
    """Phase 1: what the agent will be shown, and S0.

    A backend with ``initial_snapshot_deferred = True`` (an MCP server, whose effects answer at
    the end carries the state right after init too) gives S0 after the dialogue instead: the
    same state, one round trip fewer.
    """
    if policy is None:
        system_prompt = getattr(backend, "system_prompt", None)
        policy = system_prompt() if callable(system_prompt) else str(task.extra.get("policy", ""))
    deferred = bool(getattr(backend, "initial_snapshot_deferred", False))
    return Prepared(policy, list(backend.tool_schemas()), None if deferred else backend.initial_snapshot())


def _tool_message(call: ToolCall, at_ms: float) -> Message:
    if call.error is not None:
        content = f"Error: {call.error}"
    else:
        content = json.dumps(call.result, default=str, sort_keys=True)
    return Message(
        "tool",
        content,
        tool_call_id=call.id,
        name=call.name,
        turn=call.turn,
        at_ms=at_ms,
        is_error=call.error is not None,
    )


def _user_view(task: TaskSpec, messages: list[Message]) -> UserView:
    visible = [m for m in messages if m.role in ("user", "assistant") and not m.is_error]
    return UserView(task.query, task.user_context, visible)


Result = TypeVar("Result")
Steps = Generator[AgentView, AgentStep, Result]  # yields the agent's view, receives its step, returns Result


def drive(steps: Steps[Result], agent: Agent) -> Result:
    """Answer every view ``steps`` yields with ``agent.step``; an exception the agent raises is thrown
    into the generator at that point, exactly as if the generator had called the agent itself."""
    try:
        view = next(steps)
        while True:
            try:
                step = agent.step(view)
            except Exception as exc:
                view = steps.throw(exc)
            else:
                view = steps.send(step)
    except StopIteration as finished:
        return finished.value


def run_dialogue(
    task: TaskSpec,
    backend: Backend,
    prepared: Prepared,
    *,
    agent: Agent,
    user: UserSimulator,
    limits: Limits,
    clock: Clock | None = None,
) -> Dialogue:
    """Phase 2: alternate user, agent and tool calls until a termination condition (SPEC §2)."""
    return drive(dialogue_steps(task, backend, prepared, user=user, limits=limits, clock=clock), agent)


def dialogue_steps(
    task: TaskSpec,
    backend: Backend,
    prepared: Prepared,
    *,
    user: UserSimulator,
    limits: Limits,
    clock: Clock | None = None,
    transcript: Transcript | None = None,
) -> Steps[Dialogue]:
    """Phase 2 as a step generator (see module docstring): the agent's step is whatever is sent in.

    ``transcript`` (filled in place) lets the caller keep the messages and usage so far when the
    dialogue ends in an exception (an infra error is billed too, SPEC §5).
    """
    clock = clock or _Clock()
    transcript = Transcript() if transcript is None else transcript
    messages = transcript.messages
    unbilled = (
        Usage()
    )  # usage of unusable outputs since the last usable step (the agent bills it with the next)
    opening = user.reply(_user_view(task, messages))
    transcript.user_usage = transcript.user_usage + opening.usage
    messages.append(Message("user", opening.text or task.query, turn=0, at_ms=clock.ms()))
    repairs = 0
    turn = 0
    while True:
        if turn >= limits.max_turns:
            return Dialogue(transcript, "max_turns")
        if clock.ms() > limits.timeout_s * 1000.0:
            return Dialogue(transcript, "timeout")
        view = AgentView(prepared.system_prompt, prepared.tools, list(messages), turn)
        try:
            step = yield view
        except AgentOutputError as exc:
            repairs += 1
            unbilled = unbilled + (getattr(exc, "usage", None) or Usage())
            if repairs > limits.max_repairs:
                # No usable step follows: the unusable calls' tokens are billed here.
                transcript.agent_usage = transcript.agent_usage + unbilled
                return Dialogue(
                    transcript,
                    "agent_error",
                    f"agent output unusable after {limits.max_repairs} repairs: {exc}",
                )
            messages.append(
                Message(
                    "user",
                    f"Your last output could not be used: {exc}. Please try again.",
                    turn=turn,
                    at_ms=clock.ms(),
                    is_error=True,
                )
            )
            turn += 1
            continue
        except BaseException:
            # An infra error (or cancellation) ends the attempt: what unusable calls cost is billed.
            transcript.agent_usage = transcript.agent_usage + unbilled
            raise
        transcript.agent_usage = transcript.agent_usage + step.usage
        unbilled = Usage()  # included in step.usage
        messages.append(
            Message(
                "assistant",
                step.text,
                tool_calls=list(step.tool_calls),
                turn=turn,
                at_ms=clock.ms(),
                usage=step.usage,
            )
        )
        for request in step.tool_calls:
            if len(transcript.tool_calls) >= limits.max_tool_calls:
                return Dialogue(transcript, "max_turns", f"tool-call limit {limits.max_tool_calls} reached")
            call = backend.call_tool(request, index=len(transcript.tool_calls), turn=turn)
            transcript.tool_calls.append(call)
            messages.append(_tool_message(call, clock.ms()))
        turn += 1
        if step.done:
            return Dialogue(transcript, "agent_done")
        if step.tool_calls:
            continue
        answer = user.reply(_user_view(task, messages))
        transcript.user_usage = transcript.user_usage + answer.usage
        if answer.done:
            return Dialogue(transcript, "user_done")
        messages.append(Message("user", answer.text, turn=turn, at_ms=clock.ms()))


def take_result_snapshot(backend: Backend) -> tuple[Snapshot, dict]:
    """Phase 3: SR and which calls wrote what."""
    return backend.result_snapshot(), backend.writes()


def take_golden_snapshot(backend: Backend) -> Snapshot:
    """Phase 4: SG (a fresh golden replay, cached per task hash by the backend)."""
    return backend.golden_snapshot()


def compute_diff(
    initial: Snapshot, result: Snapshot, golden: Snapshot, writes: dict
) -> tuple[list[DiffItem], list[Effect]]:
    """Phase 5: the classified SR-vs-SG diff and the S0 -> SR effects."""
    return diff_states(initial, result, golden, writes), effects(initial, result, writes)


SERVER_HASH_CHECK = "server_state_hash"


def state_of_record_check(diff: list[DiffItem], state_of_record: bool | None) -> CheckResult | None:
    """When the backend's own state verdict (a ThinkingBox server's hash) disagrees with our diff, the
    check that records it: it is the verdict of record (SPEC §2), our diff stays as diagnostics."""
    if state_of_record is None or state_of_record != bool(diff):
        return None  # no verdict of its own, or the two agree
    if state_of_record:
        detail = (
            f"our classified diff finds {len(diff)} item(s), kept as diagnostics: the server's hash decides"
        )
    else:
        detail = (
            "the result hash differs from the golden hash although our classified diff finds no difference"
        )
    return CheckResult(
        SERVER_HASH_CHECK,
        "server state hash equals the golden state hash (verdict of record)",
        state_of_record,
        detail,
    )


def grade_attempt(
    task: TaskSpec,
    dialogue: Dialogue,
    *,
    initial: Snapshot,
    result: Snapshot,
    diff: list[DiffItem],
    effect_list: list[Effect],
    judge: Judge | None,
    state_of_record: bool | None = None,
) -> Graded:
    """Phase 6: checks, rubrics, verdict, categories and the clean-looking flag.

    ``state_of_record`` is the backend's own state verdict when it has one (a ThinkingBox
    server's hash equality); where it disagrees with our diff it decides the state part.
    """
    rubrics, usage = judge_rubrics(task.rubrics, dialogue.transcript.final_reply(), judge)
    dialogue.transcript.judge_usage = dialogue.transcript.judge_usage + usage
    checks, outcome = grade_states(
        task,
        initial=initial,
        result=result,
        diff=diff,
        rubrics=rubrics,
        termination=dialogue.termination,
        tool_calls=dialogue.transcript.tool_calls,
        state_of_record=state_of_record,
    )
    return Graded(diff, effect_list, checks, rubrics, outcome)


def grade_states(
    task: TaskSpec,
    *,
    initial: Snapshot,
    result: Snapshot,
    diff: list[DiffItem],
    rubrics: list[RubricResult],
    termination: str | None,
    tool_calls: list[ToolCall],
    state_of_record: bool | None = None,
) -> tuple[list[CheckResult], Grade]:
    """The task's checks on SR and the verdict from the diff, checks and answered rubrics.

    The one grading rule shared by a run (``grade_attempt``) and a re-grade from stored effects
    (``tb_engine.regrade``), so a re-grade decides exactly as a run would.
    """
    checks = evaluate_checks(task.checks, initial, result)
    record_check = state_of_record_check(diff, state_of_record)
    if record_check is not None:
        checks.append(record_check)
    graded_diff = [] if record_check is not None and record_check.passed else diff
    outcome = grade(
        diff=graded_diff,
        checks=checks,
        rubrics=rubrics,
        termination=termination,
        tool_calls=tool_calls,
    )
    return checks, outcome


def record(
    task: TaskSpec,
    task_hash: str,
    dialogue: Dialogue,
    graded: Graded,
    phase_ms: dict[str, float],
    clock: Clock,
) -> AttemptResult:
    """Phase 7: the AttemptResult the Django shell stores."""
    return AttemptResult(
        task_id=task.id,
        task_hash=task_hash,
        status="done",
        termination=dialogue.termination,
        verdict=graded.grade.verdict,
        transcript=dialogue.transcript,
        effects=graded.effects,
        diff=graded.diff,
        checks=graded.checks,
        rubrics=graded.rubrics,
        categories=graded.grade.categories,
        clean_looking=graded.grade.clean_looking,
        error=dialogue.error,
        phase_ms=phase_ms,
        duration_ms=clock.ms(),
    )


def run_attempt(
    task: TaskSpec,
    backend: Backend,
    *,
    agent: Agent,
    user: UserSimulator,
    judge: Judge | None = None,
    limits: Limits = Limits(),
    policy: str | None = None,
) -> AttemptResult:
    """Run and grade one attempt of ``task`` on ``backend`` (which the caller owns and closes)."""
    return drive(attempt_steps(task, backend, user=user, judge=judge, limits=limits, policy=policy), agent)


def attempt_steps(
    task: TaskSpec,
    backend: Backend,
    *,
    user: UserSimulator,
    judge: Judge | None = None,
    limits: Limits = Limits(),
    policy: str | None = None,
) -> Steps[AttemptResult]:
    """``run_attempt`` as a step generator: yields each AgentView, returns the graded AttemptResult."""
    clock = _Clock()
    task_hash = task_hash_of(task)
    phase_ms: dict[str, float] = {}
    transcript = Transcript()
    phase = "prepare"

    def timed(name: str, started: float) -> None:
        phase_ms[name] = (time.perf_counter() - started) * 1000.0

    try:
        started = time.perf_counter()
        prepared = prepare(task, backend, policy=policy)
        timed("prepare", started)
        phase, started = "dialogue", time.perf_counter()
        dialogue = yield from dialogue_steps(
            task, backend, prepared, user=user, limits=limits, clock=clock, transcript=transcript
        )
        transcript = dialogue.transcript
        timed("dialogue", started)
        phase, started = "snapshot", time.perf_counter()
        result, writes = take_result_snapshot(backend)
        initial = prepared.initial if prepared.initial is not None else backend.initial_snapshot()
        timed("snapshot", started)
        phase, started = "golden", time.perf_counter()
        golden = take_golden_snapshot(backend)
        timed("golden", started)
        phase, started = "diff", time.perf_counter()
        diff, effect_list = compute_diff(initial, result, golden, writes)
        timed("diff", started)
        phase, started = "grade", time.perf_counter()
        graded = grade_attempt(
            task,
            dialogue,
            initial=initial,
            result=result,
            diff=diff,
            effect_list=effect_list,
            judge=judge,
            state_of_record=_state_verdict_of_record(backend),
        )
        timed("grade", started)
        started = time.perf_counter()
        attempt = record(task, task_hash, dialogue, graded, phase_ms, clock)
        attempt.extra.update(_backend_evidence(backend))
        annotate_duplicates(attempt.extra, attempt.transcript, attempt.diff)
        attempt.extra.update(_process_evidence_or_error(backend, attempt, initial, golden, writes))
        attempt.extra["initial_digest"] = _initial_digest(initial)
        timed("record", started)
        return attempt
    except GoldenReplayError as exc:
        return _infra_result(
            task, task_hash, transcript, f"invalid task: {exc}", phase_ms, clock, invalid_task=True
        )
    except InfraError as exc:
        return _infra_result(
            task,
            task_hash,
            transcript,
            f"infra error during {phase}: {exc}",
            phase_ms,
            clock,
            evidence=exc.evidence,
        )
    except Exception as exc:  # a harness crash is infrastructure, never the agent's failure
        return _infra_result(
            task, task_hash, transcript, f"crash during {phase}: {type(exc).__name__}: {exc}", phase_ms, clock
        )


def process_evidence(
    backend: Backend, attempt: AttemptResult, *, initial: Snapshot, golden: Snapshot, writes: dict
) -> dict[str, Any]:
    """The attempt's process analysis (``process``) and value log (``write_log``) for its ``extra``.

    Never changes the verdict (tb_engine.process). The value log comes from the optional Backend
    method ``value_log()`` (which may answer None for an attempt without one); without it the writes
    map stands in (reverts by net effect). Rules come
    from the backend's domain (its ``domain`` attribute); a broken rules file is reported, not raised.
    """
    value_log_of = getattr(backend, "value_log", None)
    logged = value_log_of() if callable(value_log_of) else None  # None: this attempt has no value log
    entries = [WriteEntry(*row) for row in logged] if logged is not None else None
    domain = getattr(backend, "domain", None)
    evidence: dict[str, Any] = {}
    try:
        rules = domain_rules(domain) if domain is not None else ()
    except (ProcessRulesError, OSError) as exc:
        rules, evidence["process_rules_error"] = (), str(exc)
    report = analyse(
        calls=attempt.transcript.tool_calls,
        effects=attempt.effects,
        footprint=_footprint(initial, golden),
        rules=rules,
        value_log=entries,
        writes=writes,
    )
    evidence["process"] = report.to_dict()
    if entries is not None:
        evidence["write_log"] = encode_value_log(entries)
    return evidence


_FOOTPRINTS_KEPT = 1024
# (id(S0), id(SG)) -> (S0, SG, footprint): both snapshots are cached per task version by the backend,
# so the golden footprint is computed once per task, not per attempt; the snapshots are held so
# their ids stay theirs.
_footprints: OrderedDict[tuple[int, int], tuple[Snapshot, Snapshot, Footprint]] = OrderedDict()
_footprints_lock = threading.Lock()


def _footprint(initial: Snapshot, golden: Snapshot) -> Footprint:
    key = (id(initial), id(golden))
    with _footprints_lock:
        found = _footprints.get(key)
        if found is not None and found[0] is initial and found[1] is golden:
            _footprints.move_to_end(key)
            return found[2]
    generated = [name for name, table in golden.tables.items() if table.spec.generated_key]
    footprint = golden_footprint(effects(initial, golden), generated)
    with _footprints_lock:
        _footprints[key] = (initial, golden, footprint)
        while len(_footprints) > _FOOTPRINTS_KEPT:
            _footprints.popitem(last=False)
    return footprint


# id(S0) -> (S0, its digest): S0 is cached per task version by the backend, so it is digested once
# per task, not per attempt; the snapshot is held so its id stays its own.
_digests: OrderedDict[int, tuple[Snapshot, str]] = OrderedDict()


def _initial_digest(initial: Snapshot) -> str:
    """``snapshot_digest(initial)``, once per S0 object (the re-grade's check that S0 is unchanged)."""
    key = id(initial)
    with _footprints_lock:
        found = _digests.get(key)
        if found is not None and found[0] is initial:
            _digests.move_to_end(key)
            return found[1]
    digest = snapshot_digest(initial)
    with _footprints_lock:
        _digests[key] = (initial, digest)
        while len(_digests) > _FOOTPRINTS_KEPT:
            _digests.popitem(last=False)
    return digest


def _process_evidence_or_error(
    backend: Backend, attempt: AttemptResult, initial: Snapshot, golden: Snapshot, writes: dict
) -> dict[str, Any]:
    """``process_evidence``, or the reason it could not be made: process analysis never changes a
    verdict, so it never turns a graded attempt into an infrastructure error either."""
    try:
        return process_evidence(backend, attempt, initial=initial, golden=golden, writes=writes)
    except Exception as exc:  # any analysis failure is reported beside the verdict
        return {"process_error": f"{type(exc).__name__}: {exc}"}


def _state_verdict_of_record(backend: Backend) -> bool | None:
    """Optional Backend method ``state_verdict_of_record()``: the backend's own state verdict, if any."""
    verdict = getattr(backend, "state_verdict_of_record", None)
    return verdict() if callable(verdict) else None


def _backend_evidence(backend: Backend) -> dict[str, Any]:
    """Optional Backend method ``result_extra()``: adapter evidence kept in AttemptResult.extra."""
    result_extra = getattr(backend, "result_extra", None)
    return dict(result_extra() or {}) if callable(result_extra) else {}


def _infra_result(
    task: TaskSpec,
    task_hash: str,
    transcript: Transcript,
    error: str,
    phase_ms: dict[str, float],
    clock: Clock,
    *,
    invalid_task: bool = False,
    evidence: dict[str, Any] | None = None,
) -> AttemptResult:
    extra = dict(evidence or {})
    if invalid_task:
        extra["invalid_task"] = True
    return AttemptResult(
        task_id=task.id,
        task_hash=task_hash,
        status="infra_error",
        transcript=transcript,
        error=error,
        phase_ms=phase_ms,
        duration_ms=clock.ms(),
        extra=extra,
    )


def backend_failed_result(task: TaskSpec, error: InfraError, *, duration_ms: float = 0.0) -> AttemptResult:
    """The infra_error result of an attempt whose backend could not be opened (the server did not start)."""
    return AttemptResult(
        task_id=task.id,
        task_hash=task_hash_of(task),
        status="infra_error",
        transcript=Transcript(),
        error=f"infra error during start: {error}",
        duration_ms=duration_ms,
        extra=dict(error.evidence),
    )
