"""Grading per SPEC §2-§4: explicit checks, rubrics, verdict, failure categories, clean-looking flag."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tb_engine.diff import diff_kinds
from tb_engine.interfaces import Judge
from tb_engine.results import CheckResult, DiffItem, RubricResult, Verdict
from tb_engine.signatures import check_target
from tb_engine.snapshot import Snapshot, TableState, normalise_value
from tb_engine.spec import CheckSpec
from tb_engine.transcript import ToolCall, Usage

CLEAN_TERMINATIONS = ("agent_done", "user_done")


def _matches(table: TableState, row: dict[str, Any], where: dict[str, Any]) -> bool:
    columns = table.spec.columns
    return all(row.get(c) == normalise_value(columns[c], v) for c, v in where.items())


def _matching_keys(table: TableState, where: dict[str, Any]) -> list[str]:
    return [key for key, row in table.rows.items() if _matches(table, row, where)]


def _describe(check: CheckSpec) -> str:
    if check.description:
        return check.description
    params = ", ".join(f"{k}={v}" for k, v in sorted(check.params.items()))
    return f"{check.kind}({params})"


def _row_equals(check: CheckSpec, initial: Snapshot, result: Snapshot) -> tuple[bool, str]:
    table = result.tables[check.params["table"]]
    keys = _matching_keys(table, check.params["key"])
    if not keys:
        return False, f"no {table.spec.name} row matches {check.params['key']}"
    wrong = []
    for key in keys:
        row = table.rows[key]
        for column, expected in check.params["fields"].items():
            if row.get(column) != normalise_value(table.spec.columns[column], expected):
                wrong.append(
                    f"{table.spec.name}[{key}].{column} = {row.get(column)!r}, expected {expected!r}"
                )
    return not wrong, "; ".join(wrong)


def _row_count(check: CheckSpec, initial: Snapshot, result: Snapshot) -> tuple[bool, str]:
    table = result.tables[check.params["table"]]
    found = len(_matching_keys(table, check.params.get("where") or {}))
    expected = check.params["count"]
    return found == expected, f"{found} matching {table.spec.name} row(s), expected {expected}"


def _no_new_rows(check: CheckSpec, initial: Snapshot, result: Snapshot) -> tuple[bool, str]:
    name = check.params["table"]
    new = sorted(result.tables[name].rows.keys() - initial.tables[name].rows.keys())
    return not new, (f"new {name} row(s): {', '.join(new)}" if new else "")


def _unchanged(check: CheckSpec, initial: Snapshot, result: Snapshot) -> tuple[bool, str]:
    name = check.params["table"]
    before, after = initial.tables[name], result.tables[name]
    exceptions = check.params.get("except") or []

    def excused(table: TableState, key: str) -> bool:
        row = table.rows.get(key)
        return row is not None and any(_matches(table, row, where) for where in exceptions)

    changed = []
    for key in sorted(before.stable.keys() | after.stable.keys()):
        if before.stable.get(key) == after.stable.get(key) or excused(before, key) or excused(after, key):
            continue
        changed.append(key)
    return not changed, (f"{name} row(s) changed: {', '.join(changed)}" if changed else "")


def _custom_unsupported(check: CheckSpec, initial: Snapshot, result: Snapshot) -> tuple[bool, str]:
    detail = check.params.get("detail") or "this check cannot be evaluated by the engine"
    return False, f"unsupported custom check (always fails): {detail}"


CHECKS = {
    "row_equals": _row_equals,
    "row_count": _row_count,
    "no_new_rows": _no_new_rows,
    "unchanged": _unchanged,
    "custom_unsupported": _custom_unsupported,
}


def evaluate_checks(checks: Iterable[CheckSpec], initial: Snapshot, result: Snapshot) -> list[CheckResult]:
    """Evaluate explicit checks on SR (with S0 for the forbidden-effect kinds)."""
    results = []
    for check in checks:
        evaluate = CHECKS.get(check.kind)
        if evaluate is None:
            passed, detail = False, f"unknown check kind {check.kind!r}"
        else:
            try:
                passed, detail = evaluate(check, initial, result)
            except KeyError as exc:
                passed, detail = False, f"check refers to something the state lacks: {exc}"
        target = check_target(check.kind, check.params, check.description)
        results.append(CheckResult(check.kind, _describe(check), passed, detail, check.forbidden, target))
    return results


def judge_rubrics(
    rubrics: Iterable[str], final_reply: str, judge: Judge | None
) -> tuple[list[RubricResult], Usage]:
    """Ask the judge each yes/no rubric; with no judge every answer is None (unjudged, never a failure)."""
    results, usage = [], Usage()
    for question in rubrics:
        if judge is None:
            results.append(RubricResult(question, None, "unjudged: no judge configured"))
            continue
        verdict = judge.judge(question, final_reply)
        usage = usage + verdict.usage
        answer = None if verdict.answer is None else bool(verdict.answer)
        results.append(RubricResult(question, answer, verdict.explanation))
    return results, usage


@dataclass(frozen=True)
class Grade:
    verdict: Verdict
    categories: list[str]
    clean_looking: bool


def is_clean_looking(verdict: str, termination: str | None, tool_calls: list[ToolCall]) -> bool:
    """SPEC §4: failed, ended cleanly, called a state-changing tool, and the last call had no error."""
    if verdict != "fail" or termination not in CLEAN_TERMINATIONS or not tool_calls:
        return False
    called_state_changing = any(not call.read_only for call in tool_calls)
    return called_state_changing and tool_calls[-1].error is None


def grade(
    *,
    diff: list[DiffItem],
    checks: list[CheckResult],
    rubrics: list[RubricResult],
    termination: str | None,
    tool_calls: list[ToolCall],
) -> Grade:
    """Verdict, categories and clean-looking flag (SPEC §2-§4).

    pass iff no diff item, every check holds and every rubric is answered yes; fail when any of
    them fails; otherwise, when a rubric could not be answered (None), ``unjudged`` — excluded
    from success metrics like an infra error, never counted as the agent's failure.
    """
    categories = set(diff_kinds(diff))
    if any(not c.passed for c in checks):
        categories.add("check_failed")
    if any(r.answer is False for r in rubrics):
        categories.add("rubric_failed")
    verdict: Verdict
    if categories:
        verdict = "fail"
    elif any(r.answer is None for r in rubrics):
        verdict = "unjudged"
    else:
        verdict = "pass"
    return Grade(verdict, sorted(categories), is_clean_looking(verdict, termination, tool_calls))
