"""A gate report and how it is shown: a plain-text table (the command) and JUnit XML (what CI systems read)."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from tb_engine.metrics.gate import RuleResult

if TYPE_CHECKING:
    from apps.campaigns.models import Campaign

SUITE_NAME = "thinkingbox-gate"


@dataclass(frozen=True)
class GateReport:
    campaign: Campaign
    baseline: Campaign | None
    domain: str
    tasks: int  # tasks of the campaign in the slice
    shared_tasks: int | None  # tasks both campaigns ran (with a baseline)
    rules: tuple[RuleResult, ...]
    seconds: float  # time spent evaluating

    @property
    def passed(self) -> bool:
        return all(rule.passed for rule in self.rules)

    @property
    def failures(self) -> int:
        return sum(1 for rule in self.rules if not rule.passed)


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _pp(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.1f} pp" if signed else f"{value:.1f} pp"


def cells(rule: RuleResult) -> dict[str, str]:
    """A rule's row as text: value, threshold, interval and floor in the rule's unit."""
    drop = rule.rule.startswith("max-drop")
    if drop:
        value, threshold = _pp(rule.value, signed=True), f"<= {rule.threshold:.1f} pp"
        interval = f"[{_pp(rule.lo, signed=True)}, {_pp(rule.hi, signed=True)}]"
    else:
        value, threshold = _share(rule.value), f">= {_share(rule.threshold)}"
        interval = f"[{_share(rule.lo)}, {_share(rule.hi)}]"
    return {
        "rule": rule.rule,
        "value": value,
        "threshold": threshold,
        "interval": interval,
        "floor": _pp(rule.mdd) if drop else "—",
        "verdict": rule.verdict.upper(),
        "uses": rule.uses,
    }


COLUMNS = ("rule", "value", "threshold", "interval", "floor", "verdict", "uses")


def describe(report: GateReport) -> str:
    """One line naming what was gated."""
    line = f"gate: campaign {report.campaign.pk} ({report.campaign.name}), N = {report.campaign.n_attempts}"
    if report.baseline is not None:
        line += (
            f", baseline {report.baseline.pk} ({report.baseline.name}), {report.shared_tasks} shared tasks"
        )
    line += f", {report.tasks} tasks" + (f" of domain {report.domain}" if report.domain else "")
    return line


def text_table(report: GateReport) -> str:
    """The rule table, each rule's reason under it, and the overall verdict (the command's output)."""
    rows = [dict(zip(COLUMNS, COLUMNS))] + [cells(rule) for rule in report.rules]
    widths = {column: max(len(row[column]) for row in rows) for column in COLUMNS}
    lines = [describe(report), ""]
    for position, row in enumerate(rows):
        lines.append("  ".join(row[column].ljust(widths[column]) for column in COLUMNS).rstrip())
        if position:
            lines.append(f"    {report.rules[position - 1].detail}")
    verdict = (
        f"PASS: {len(report.rules)} rule{'s' if len(report.rules) != 1 else ''} hold"
        if report.passed
        else f"FAIL: {report.failures} of {len(report.rules)} rules failed"
    )
    lines += ["", verdict]
    return "\n".join(lines) + "\n"


def junit_xml(report: GateReport, *, timestamp: datetime | None = None) -> str:
    """JUnit XML: one testsuite, one testcase per rule, a <failure> for each rule that failed."""
    stamp = (timestamp or datetime.now(UTC)).replace(microsecond=0).isoformat()
    counts = {
        "tests": str(len(report.rules)),
        "failures": str(report.failures),
        "errors": "0",
        "skipped": "0",
    }
    root = ElementTree.Element("testsuites", {"name": SUITE_NAME, "time": f"{report.seconds:.3f}", **counts})
    suite = ElementTree.SubElement(
        root,
        "testsuite",
        {"name": describe(report), "timestamp": stamp, "time": f"{report.seconds:.3f}", **counts},
    )
    properties = ElementTree.SubElement(suite, "properties")
    for name, value in (
        ("campaign", report.campaign.pk),
        ("baseline", report.baseline.pk if report.baseline else ""),
        ("domain", report.domain),
        ("tasks", report.tasks),
    ):
        ElementTree.SubElement(properties, "property", name=name, value=str(value))
    for rule in report.rules:
        row = cells(rule)
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=f"{SUITE_NAME}.campaign-{report.campaign.pk}",
            name=rule.rule,
            time="0",
        )
        summary = ", ".join(f"{column} {row[column]}" for column in COLUMNS[1:5])
        if not rule.passed:
            failure = ElementTree.SubElement(case, "failure", message=rule.detail, type="GateRuleFailed")
            failure.text = f"{summary}; uses: {rule.uses}"
        ElementTree.SubElement(case, "system-out").text = f"{summary}; {rule.detail}; uses: {rule.uses}"
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
