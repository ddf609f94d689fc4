"""Command-line entry points as plain functions (Django management commands wrap them).

python3 -m tb_engine.cli validate [--suite starter]
python3 -m tb_engine.cli run retail/ticket_hold_carrier_exception [--agent golden] [--repeat 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys

from tb_engine.attempt_setup import AttemptSetup
from tb_engine.diff import describe_item
from tb_engine.loader import SpecError, load_builtin_suite
from tb_engine.results import AttemptResult
from tb_engine.validation import validate_suite


def validate_suite_report(suite_name: str = "starter") -> tuple[str, int]:
    """Validate a built-in suite; returns the report text and an exit code (0 all valid, 1 not, 2 load error)."""
    try:
        suite = load_builtin_suite(suite_name)
    except SpecError as exc:
        return "suite failed to load:\n" + "\n".join(exc.errors), 2
    results = validate_suite(suite)
    counts = {
        status: sum(r.status == status for r in results)
        for status in ("valid", "invalid", "non_discriminating", "unknown")
    }
    lines = [
        f"{len(results)} tasks: {counts['valid']} valid, {counts['invalid']} invalid, "
        f"{counts['non_discriminating']} non-discriminating"
        + (f", {counts['unknown']} not validated (infrastructure error)" if counts["unknown"] else "")
    ]
    for result in results:
        if result.status != "valid":
            lines.append(f"{result.task_id}: {result.status.replace('_', '-')}")
            lines.extend(f"  - {problem}" for problem in result.problems)
    return "\n".join(lines), 0 if counts["valid"] == len(results) else 1


def describe_attempt(result: AttemptResult, number: int = 0) -> list[str]:
    """Readable lines for one attempt: outcome, categories, classified diff, failed checks and rubrics."""
    if result.status != "done":
        return [f"attempt {number}: {result.status} — {result.error}"]
    head = f"attempt {number}: {result.verdict} ({result.termination}, {len(result.transcript.tool_calls)} tool calls"
    head += f", {result.duration_ms:.1f} ms)"
    lines = [head]
    if result.categories:
        lines.append(
            "  categories: "
            + ", ".join(result.categories)
            + ("  [clean-looking]" if result.clean_looking else "")
        )
    lines.extend(f"  {describe_item(item)}" for item in result.diff)
    for check in result.checks:
        if not check.passed:
            kind = "forbidden effect" if check.forbidden else "check"
            lines.append(f"  {kind} failed: {check.description} — {check.detail}")
    for rubric in result.rubrics:
        if rubric.answer is not True:
            lines.append(f"  rubric not met: {rubric.question} ({rubric.explanation})")
    return lines


def run_task_report(
    task_id: str, agent: str = "golden", repeat: int = 1, seed: int = 0, suite_name: str = "starter"
) -> str:
    """Run a built-in task ``repeat`` times with the given agent and describe every attempt."""
    suite = load_builtin_suite(suite_name)
    task = suite.tasks.get(task_id)
    if task is None:
        raise KeyError(f"unknown task {task_id!r} in suite {suite_name!r}")
    domain = suite.domains[task.domain]
    lines = [f"{task.id} — {task.title} (agent {agent}, {repeat} attempt{'s' if repeat != 1 else ''})"]
    passed = 0
    for number in range(repeat):
        result = AttemptSetup.from_config(domain, task, agent=agent, seed=seed + number).run()
        passed += result.verdict == "pass"
        lines.extend(describe_attempt(result, number))
    lines.append(f"{passed}/{repeat} passed")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python3 -m tb_engine.cli``."""
    parser = argparse.ArgumentParser(
        prog="python3 -m tb_engine.cli", description="ThinkingBox Web engine commands"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="validate every task of a built-in suite")
    validate.add_argument("--suite", default="starter")
    rules = commands.add_parser(
        "process-rules", help="run every golden trajectory and list suspect process rules"
    )
    rules.add_argument("--suite", default="starter")
    run = commands.add_parser("run", help="run one built-in task and print the graded attempts")
    run.add_argument("task_id")
    run.add_argument("--agent", default="golden")
    run.add_argument("--repeat", type=int, default=1)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--suite", default="starter")
    args = parser.parse_args(argv)
    if args.command == "validate":
        text, code = validate_suite_report(args.suite)
        print(text)
        return code
    if args.command == "process-rules":
        from tb_engine.process_check import process_rules_report  # noqa: PLC0415 — only this command runs golden suites

        text, code = process_rules_report(load_builtin_suite(args.suite))
        print(text)
        return code
    try:
        print(run_task_report(args.task_id, args.agent, args.repeat, args.seed, args.suite))
    except (KeyError, ValueError, SpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
