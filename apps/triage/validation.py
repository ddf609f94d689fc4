"""Validating any stored suite (built-in or imported) on its tasks' own backends, stored as task health.

Each task runs golden twice and do-nothing on a fresh backend per run — a SQLite sandbox or the
imported suite's real MCP server (tb_engine.validation.validate_task) — and the outcome is kept in
triage's task-health tables (TaskValidation, with every run's verdicts and both diffs) and on
the task row campaigns select by (invalid tasks are not selected; non-discriminating ones are, and are
flagged, unless a campaign excludes them explicitly). A stored
task's engine objects come from the worker's front door (apps.worker.selectors), so a validation
runs the task exactly as an attempt would; the suite page's button runs it as a Celery task
(apps.triage.tasks) in a worker.
Rubrics are judged by the offline keyword judge; those it cannot answer leave the task validated
on its state part only, and the stored result says so. Servers installed without their seed data
(tb_engine.thinkingbox.seed_data) fail the run before any task is touched.
"""

from __future__ import annotations

from collections.abc import Callable

from apps.suites.models import Suite, Task
from apps.suites.services import task_validation_set
from apps.triage.models import SuiteValidation
from apps.triage.services import (
    suite_validation_claim,
    suite_validation_finish,
    suite_validation_start,
    task_validation_record,
)
from apps.worker.selectors import task_domain, task_spec_of
from tb_engine.thinkingbox.mcp_pool import close_pools
from tb_engine.thinkingbox.seed_data import seed_data_problem, served_package
from tb_engine.validation import validate_task


def suite_seed_data_problems(*, suite: Suite) -> list[str]:
    """What is wrong with the seed data of the servers the suite's imported domains launch ([] when
    nothing is, or the suite runs on our own sandbox): one sentence per server package."""
    problems: dict[str, str] = {}
    for spec in suite.domains.order_by("name").values_list("spec", flat=True):
        mcp = spec.get("mcp") if isinstance(spec, dict) else None  # None for a built-in (SQLite) domain
        launch = mcp.get("launch") if isinstance(mcp, dict) else None
        if not isinstance(launch, dict) or not launch.get("command"):
            continue
        args = [str(a) for a in launch.get("args") or ()]
        key = f"{launch['command']} {served_package(args)}"
        if key not in problems:
            problems[key] = seed_data_problem(
                command=str(launch["command"]),
                args=args,
                env={str(k): str(v) for k, v in (launch.get("env") or {}).items()},
                cwd=launch.get("cwd") or None,
            )
    return [problem for problem in problems.values() if problem]


def _validate_tasks(
    run: SuiteValidation, *, actor=None, progress: Callable[[str], None] | None = None
) -> SuiteValidation:
    # Servers without their seed data would fail every golden run: validating on them would mark every
    # task invalid (and campaigns would drop them), so the run fails instead and no task is touched.
    seed_problems = suite_seed_data_problems(suite=run.suite)
    if seed_problems:
        return suite_validation_finish(run=run, error="; ".join(seed_problems))
    tasks = Task.objects.filter(suite=run.suite).select_related("suite", "domain").order_by("task_id")
    try:
        for task in tasks:
            result = validate_task(task_domain(task), task_spec_of(task))
            task_validation_record(run=run, task=task, validation=result.to_dict(), actor=actor)
            task_validation_set(task=task, status=result.status, detail="\n".join(result.problems))
            if progress is not None:
                note = f" ({result.rubrics_note})" if result.rubrics_note else ""
                progress(f"{task.task_id}: {result.status.replace('_', '-')}{note}")
                for problem in result.problems:
                    progress(f"  - {problem}")
    except Exception as exc:  # recorded on the run, then raised: the caller reports it
        suite_validation_finish(run=run, error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        close_pools()  # one validation's servers are not kept for the next
    run.refresh_from_db()
    return suite_validation_finish(run=run)


def suite_validate(
    *, suite: Suite, actor=None, progress: Callable[[str], None] | None = None
) -> SuiteValidation:
    """Validate every task of ``suite`` now. Side effects: a SuiteValidation, one TaskValidation per task,
    task-health issues, Task.validation."""
    return _validate_tasks(suite_validation_start(suite=suite, actor=actor), actor=actor, progress=progress)


def suite_validation_run(*, run_id: int) -> str:
    """Run a requested validation (the suite page's button); a no-op when another worker has it."""
    run = suite_validation_claim(run_id=run_id)
    if run is None:
        return "not-claimed"
    _validate_tasks(run, actor=run.requested_by)
    return "done"
