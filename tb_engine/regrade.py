"""Re-grade a stored attempt from what it stored, without re-running the agent (issue 29).

A task's definition (golden trajectory, checks, rubrics, the domain's unstable fields) or the
grader may change after attempts ran. The attempt's own behaviour is in its stored record: the
S0 -> SR effects (every changed cell and every inserted or deleted row, all columns) and the
transcript. So:

* S0 comes from the task (its template, cached per task hash), and must be the S0 the attempt ran
  against (``extra["initial_digest"]``, where the attempt stored one);
* SR = S0 + the stored effects, verified: every effect's ``before`` must be what S0 holds, the
  effects recomputed from the rebuilt SR must equal the stored ones exactly, and every stored diff
  item's SR value must be what the rebuilt SR holds. Anything else is *not re-gradable* (with the
  reason), never a guess;
* SG is recomputed from the new definition (golden replay, cached per task hash);
* then the diff, the checks and the verdict exactly as a run grades (``runner.grade_states``).

Rubrics the new definition keeps (same question) keep their stored answers; a new question is put
to the judge given, or stays unanswered (the attempt becomes unjudged, SPEC §2).

ThinkingBox (MCP server) domains: S0 and the new SG come from the server's golden replay in a fresh
server process, and SR from the attempt's raw state record (``tb_engine.thinkingbox.regrade_mcp``);
an attempt stored before that record was kept is not re-gradable, with that reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tb_engine.diff import diff_states, effects
from tb_engine.golden import GoldenReplayError, golden_snapshot
from tb_engine.grading import judge_rubrics
from tb_engine.interfaces import Judge
from tb_engine.result_format import ResultFormatError
from tb_engine.results import CheckResult, DiffItem, Effect, RubricResult
from tb_engine.runner import grade_states
from tb_engine.sandbox import domain_runtime, task_hash_of
from tb_engine.snapshot import Snapshot, TableState, normalise_value, snapshot_digest, stable_columns
from tb_engine.spec import DomainSpec, TaskSpec
from tb_engine.transcript import ToolCall, Transcript
from tb_engine.version import HARNESS_VERSION

# The grader a re-grade applies: the harness label campaigns store (tb_engine.version).
GRADER_VERSION = HARNESS_VERSION


S0_CHANGED = (
    "S0 of the task as now defined differs from the S0 the attempt ran against (its initial data changed): "
    "the stored effects would apply to another state"
)


class StateNotReproduced(Exception):
    """The stored effects do not rebuild an SR that agrees with the attempt's own record."""


@dataclass(frozen=True)
class TaskBasis:
    """What is the same for every attempt of one task version: S0, SG (or why there is none)."""

    task: TaskSpec
    task_hash: str
    initial: Snapshot | None
    golden: Snapshot | None
    not_regradable: str = ""  # why no attempt of this task can be re-graded ("" when they can)
    initial_digest: str = ""  # snapshot_digest(initial): an attempt that ran on another S0 is not re-gradable
    # A ThinkingBox task: the fresh server's raw S0 and SG and their hashing (regrade_mcp.ServerBasis).
    server: Any = None


@dataclass(frozen=True)
class Regraded:
    """One attempt graded again against a task version; ``reason`` set means not re-gradable."""

    verdict: str = ""
    categories: tuple[str, ...] = ()
    clean_looking: bool = False
    diff: list[DiffItem] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    rubrics: list[RubricResult] = field(default_factory=list)
    reason: str = ""

    @property
    def regradable(self) -> bool:
        return not self.reason


def task_basis(domain: DomainSpec, task: TaskSpec) -> TaskBasis:
    """S0 and SG of the task as now defined; compute once per task and re-grade all its attempts."""
    task_hash = task_hash_of(task)
    if domain.backend == "mcp":
        from tb_engine.thinkingbox.regrade_mcp import server_basis  # noqa: PLC0415 — heavy (pandas, scipy); only MCP domains need it

        server = server_basis(domain, task)
        if isinstance(server, str):
            return TaskBasis(task, task_hash, None, None, server)
        return TaskBasis(task, task_hash, server.initial, server.golden, server=server)
    if domain.backend != "sqlite":
        return TaskBasis(task, task_hash, None, None, f"backend {domain.backend!r} cannot be re-graded")
    initial = domain_runtime(domain).task_template(task).initial
    try:
        golden = golden_snapshot(domain, task)
    except GoldenReplayError as exc:
        return TaskBasis(task, task_hash, initial, None, f"the new definition is invalid: {exc}")
    return TaskBasis(task, task_hash, initial, golden, initial_digest=snapshot_digest(initial))


def regrade_stored(basis: TaskBasis, stored: Mapping[str, Any], *, judge: Judge | None = None) -> Regraded:
    """Re-grade one stored attempt result (``AttemptResult.to_dict()`` JSON) against ``basis``."""
    if basis.not_regradable:
        return Regraded(reason=basis.not_regradable)
    if stored.get("status") != "done":
        return Regraded(reason=f"the attempt is {stored.get('status') or 'not done'}: nothing was graded")
    assert basis.initial is not None and basis.golden is not None
    try:
        stored_effects = [Effect.from_dict(item) for item in stored.get("effects") or ()]
        stored_diff = [DiffItem.from_dict(item) for item in stored.get("diff") or ()]
    except ResultFormatError as exc:
        return Regraded(reason=f"the stored record is unreadable: {exc}")
    if basis.server is not None:
        from tb_engine.thinkingbox.regrade_mcp import server_states  # noqa: PLC0415 — see task_basis

        states = server_states(basis.server, stored)
        if isinstance(states, str):
            return Regraded(reason=states)
        initial, result, golden, state_of_record = states
    else:
        ran_on = (stored.get("extra") or {}).get("initial_digest")
        if ran_on is not None and ran_on != basis.initial_digest:
            return Regraded(reason=S0_CHANGED)
        try:
            result = result_state(basis.initial, stored_effects, stored_diff)
        except StateNotReproduced as exc:
            return Regraded(reason=f"SR cannot be rebuilt from the stored effects: {exc}")
        initial, golden, state_of_record = basis.initial, basis.golden, None
    return graded_again(
        basis.task,
        stored,
        initial=initial,
        result=result,
        golden=golden,
        stored_effects=stored_effects,
        state_of_record=state_of_record,
        judge=judge,
    )


def graded_again(
    task: TaskSpec,
    stored: Mapping[str, Any],
    *,
    initial: Snapshot,
    result: Snapshot,
    golden: Snapshot,
    stored_effects: list[Effect],
    state_of_record: bool | None,
    judge: Judge | None,
) -> Regraded:
    """The diff, checks and verdict of a rebuilt SR against SG, exactly as a run grades them.

    ``state_of_record``: the server's hash verdict on the rebuilt SR (ThinkingBox tasks), else None.
    """
    try:
        stored_rubrics = [RubricResult.from_dict(item) for item in stored.get("rubrics") or ()]
        stored_transcript = stored.get("transcript") or {}
        tool_calls = _verdict_tool_calls(stored_transcript.get("tool_calls") or ())
    except ResultFormatError as exc:
        return Regraded(reason=f"the stored record is unreadable: {exc}")
    writes = writes_of(stored_effects)
    diff = diff_states(initial, result, golden, writes)
    rubrics = rubric_answers(task.rubrics, stored_rubrics, stored_transcript, judge)
    checks, outcome = grade_states(
        task,
        initial=initial,
        result=result,
        diff=diff,
        rubrics=rubrics,
        termination=stored.get("termination"),
        tool_calls=tool_calls,
        state_of_record=state_of_record,
    )
    return Regraded(
        verdict=outcome.verdict,
        categories=tuple(outcome.categories),
        clean_looking=outcome.clean_looking,
        diff=diff,
        checks=checks,
        rubrics=rubrics,
    )


def _verdict_tool_calls(stored: Any) -> list[ToolCall]:
    """The stored tool calls as far as the verdict reads them (position, name, read-only, error).

    The clean-looking flag reads no more (grading.is_clean_looking); arguments and results, most of
    a transcript's bytes, are left unread.
    """
    if not isinstance(stored, list):
        raise ResultFormatError("must be a list", path="transcript.tool_calls")
    calls = []
    for index, call in enumerate(stored):
        if not isinstance(call, Mapping):
            raise ResultFormatError("must be an object", path=f"transcript.tool_calls[{index}]")
        error, read_only = call.get("error"), call.get("read_only", False)
        if not (error is None or isinstance(error, str)) or not isinstance(read_only, bool):
            raise ResultFormatError(
                "error or read_only of the wrong type", path=f"transcript.tool_calls[{index}]"
            )
        calls.append(ToolCall(index, "", str(call.get("name") or ""), None, error=error, read_only=read_only))
    return calls


def rubric_answers(
    questions: tuple[str, ...], stored: list[RubricResult], transcript: Mapping[str, Any], judge: Judge | None
) -> list[RubricResult]:
    """Stored answers to the questions kept; a new question asked of ``judge`` (None: unanswered).

    The stored transcript's messages are read only when a question is new (the final reply).
    """
    answered = {rubric.question: rubric for rubric in stored}
    results = []
    for question in questions:
        kept = answered.get(question)
        if kept is None:
            final_reply = Transcript.from_dict(transcript).final_reply()
            (kept,), _usage = judge_rubrics((question,), final_reply, judge)
        results.append(kept)
    return results


def writes_of(stored_effects: list[Effect]) -> dict[tuple[str, str, str | None], tuple[int, ...]]:
    """The attempt's write attribution as the diff reads it, from the effects' ``written_by``.

    Exact for every changed cell and row; a cell written and then restored to its S0 value left no
    effect, so a missing-effect item on it is attributed to no call (a run would name the calls).
    """
    return {(e.table, e.key, e.field): e.written_by for e in stored_effects if e.written_by}


def result_state(initial: Snapshot, stored_effects: list[Effect], stored_diff: list[DiffItem]) -> Snapshot:
    """SR = S0 + the stored effects; raises StateNotReproduced when the record disagrees with it."""
    by_table: dict[str, list[Effect]] = {}
    for effect in stored_effects:
        if effect.table not in initial.tables:
            raise StateNotReproduced(f"effect on table {effect.table!r}, which S0 does not have")
        by_table.setdefault(effect.table, []).append(effect)
    tables = dict(initial.tables)
    for name, table_effects in by_table.items():
        tables[name] = _applied(initial.tables[name], table_effects)
    result = Snapshot(tables)
    # Exactness: the effects of the rebuilt SR are the stored effects, item for item.
    rebuilt = [_effect_key(e) for e in effects(initial, result)]
    if rebuilt != [_effect_key(e) for e in stored_effects]:
        raise StateNotReproduced("the effects of the rebuilt SR differ from the stored effects")
    for item in stored_diff:
        problem = _disagreement(result, item)
        if problem:
            raise StateNotReproduced(problem)
    return result


def _effect_key(effect: Effect) -> tuple[Any, ...]:
    return (effect.op, effect.table, effect.key, effect.field, effect.before, effect.after)


def _normalised_row(table: TableState, row: Any, where: str) -> dict[str, Any]:
    columns = table.spec.columns
    if not isinstance(row, Mapping) or set(row) != set(columns):
        raise StateNotReproduced(f"{where}: the stored row's columns are not the table's columns now")
    return {name: normalise_value(kind, row[name]) for name, kind in columns.items()}


def _applied(table: TableState, table_effects: list[Effect]) -> TableState:
    """One table of S0 with the attempt's effects applied (rows copied only where they change)."""
    name = table.spec.name
    rows = dict(table.rows)
    changed_keys: set[str] = set()
    keys_changed = False
    for effect in table_effects:
        where = f"{name}[{effect.key}]"
        before_row = table.rows.get(effect.key)
        if effect.op == "insert":
            if before_row is not None:
                raise StateNotReproduced(f"{where}: inserted, but S0 already has that row")
            rows[effect.key] = _normalised_row(table, effect.after, where)
            keys_changed = True
        elif effect.op == "delete":
            if before_row is None or before_row != _normalised_row(table, effect.before, where):
                raise StateNotReproduced(f"{where}: deleted, but S0's row is not the one the attempt deleted")
            del rows[effect.key]
            keys_changed = True
        else:
            column = effect.field or ""
            kind = table.spec.columns.get(column)
            if before_row is None or kind is None:
                raise StateNotReproduced(f"{where}.{column}: updated, but S0 has no such cell")
            if before_row[column] != normalise_value(kind, effect.before):
                raise StateNotReproduced(
                    f"{where}.{column}: S0 holds {before_row[column]!r}, the attempt changed {effect.before!r}"
                )
            if effect.key not in changed_keys:
                rows[effect.key] = dict(rows[effect.key])
            rows[effect.key][column] = normalise_value(kind, effect.after)
        changed_keys.add(effect.key)
    if keys_changed:
        rows = {key: rows[key] for key in sorted(rows)}
    columns = stable_columns(table.spec)
    stable = dict(table.stable)
    for key in changed_keys:
        row = rows.get(key)
        if row is None:
            stable.pop(key, None)
        else:
            stable[key] = tuple(row[c] for c in columns)
    if keys_changed:
        stable = {key: stable[key] for key in rows}
    return TableState(spec=table.spec, rows=rows, stable=stable)


def _disagreement(result: Snapshot, item: DiffItem) -> str:
    """Why a stored diff item's SR side is not what the rebuilt SR holds ("" when it is)."""
    table = result.tables.get(item.table)
    if table is None:
        return f"the stored diff names table {item.table!r}, which SR does not have"
    row = table.rows.get(item.key)
    where = f"{item.table}[{item.key}]"
    if item.field is None:
        if item.result is None:
            # The row is absent from SR under the key shown; generated keys are matched by content,
            # so the shown key may be SG's and belong to another SR row.
            if row is not None and not table.spec.generated_key:
                return f"{where}: the stored diff has no SR row, the rebuilt SR has one"
            return ""
        if row is None or row != _normalised_row(table, item.result, where):
            return f"{where}: the stored diff's SR row differs from the rebuilt SR's"
        return ""
    if row is None or item.field not in row:
        return f"{where}.{item.field}: the stored diff has an SR value, the rebuilt SR has no such cell"
    kind = table.spec.columns[item.field]
    if row[item.field] != normalise_value(kind, item.result):
        return f"{where}.{item.field}: the stored diff's SR value differs from the rebuilt SR's"
    return ""
