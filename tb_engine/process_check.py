"""Harness check of the process rules: golden runs must have no process finding.

A golden trajectory that breaks a process rule makes the rule *suspect* — the rule, or the golden
trajectory, is wrong — and it is listed like a suspect task, with the task and the call as evidence.
A golden run with a reverted write or a write outside its own footprint is a broken analysis (the
golden footprint is the golden run's own S0 -> SG), reported as such.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tb_engine.attempt_setup import run_task
from tb_engine.diff import effects
from tb_engine.golden import golden_snapshot
from tb_engine.process import (
    Finding,
    ProcessReport,
    analyse,
    decode_value_log,
    domain_rules,
    golden_footprint,
    suspect_rules,
)
from tb_engine.results import AttemptResult
from tb_engine.sandbox import domain_runtime
from tb_engine.spec import DomainSpec, SuiteSpec, TaskSpec


@dataclass(frozen=True)
class SuspectRule:
    """A process rule some golden run breaks, with (task id, finding) evidence."""

    domain: str
    rule: str
    evidence: tuple[tuple[str, Finding], ...]


def golden_process_reports(
    suite: SuiteSpec, task_ids: Iterable[str] | None = None
) -> dict[str, ProcessReport]:
    """Each task's golden run's process report (task id -> report)."""
    reports = {}
    for task_id in sorted(task_ids if task_ids is not None else suite.tasks):
        task = suite.tasks[task_id]
        result = run_task(suite.domains[task.domain], task, agent="golden")
        reports[task_id] = ProcessReport.from_dict(result.extra.get("process") or {})
    return reports


def suspect_process_rules(suite: SuiteSpec, task_ids: Iterable[str] | None = None) -> list[SuspectRule]:
    """The suite's suspect process rules (sorted by domain and rule id)."""
    reports = golden_process_reports(suite, task_ids)
    found = []
    for rule, evidence in suspect_rules(reports).items():
        domains = sorted({suite.tasks[task_id].domain for task_id, _ in evidence})
        for domain in domains:
            mine = tuple((t, f) for t, f in evidence if suite.tasks[t].domain == domain)
            found.append(SuspectRule(domain, rule, mine))
    return sorted(found, key=lambda s: (s.domain, s.rule))


def process_rules_report(suite: SuiteSpec) -> tuple[str, int]:
    """``python3 -m tb_engine.cli process-rules``: the suspect rules and golden findings; exit 1 if any."""
    reports = golden_process_reports(suite)
    lines = []
    other = 0
    for task_id, report in reports.items():
        for finding in report.findings:
            if finding.kind != "write_before_required_step":
                other += 1
                lines.append(f"{task_id}: golden run has a {finding.kind} finding: {finding.detail}")
    suspects = suspect_rules(reports)
    for rule, evidence in suspects.items():
        tasks = ", ".join(sorted({t for t, _ in evidence}))
        lines.append(f"suspect rule {rule}: broken by the golden run of {tasks}")
    lines.append(f"{len(reports)} golden runs: {len(suspects)} suspect rule(s), {other} other finding(s)")
    return "\n".join(lines), 1 if suspects or other else 0


def analyse_stored(result: AttemptResult, domain: DomainSpec, task: TaskSpec) -> ProcessReport:
    """The process analysis of a stored result (the backfill), with what the record kept.

    The write log is the stored value log when there is one, else the net effects' attribution (no
    revert can be seen: ``coverage`` says so). The golden footprint comes from a golden replay on the
    task's own SQLite sandbox; an imported (MCP) domain's is unknown here, so not checked.
    """
    footprint = None
    if domain.backend != "mcp":
        initial = domain_runtime(domain).task_template(task).initial
        golden = golden_snapshot(domain, task)
        generated = [name for name, table in golden.tables.items() if table.spec.generated_key]
        footprint = golden_footprint(effects(initial, golden), generated)
    return analyse(
        calls=result.transcript.tool_calls,
        effects=result.effects,
        footprint=footprint,
        rules=domain_rules(domain),
        value_log=decode_value_log(result.extra.get("write_log")),
    )
