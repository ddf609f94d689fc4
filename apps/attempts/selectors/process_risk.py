"""Process risk (tb_engine.process; docs/process_risk.md): "passed with process risk" per campaign and
per finding kind, an attempt's findings, and the triage queue's attempts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum

from apps.attempts.models import Attempt, AttemptProcessRisk, TaskSummary
from tb_engine.process import FINDING_KINDS, FINDING_LABELS


@dataclass(frozen=True)
class CampaignProcessRisk:
    """A campaign's passing attempts and those of them with process findings (overall and per kind)."""

    passed: int
    with_risk: int
    by_kind: dict[str, int]  # finding kind -> passing attempts with at least one finding of it

    @property
    def share(self) -> float | None:
        """Passed with process risk / passed (None without a pass)."""
        return self.with_risk / self.passed if self.passed else None

    def kind_share(self, kind: str) -> float | None:
        return self.by_kind.get(kind, 0) / self.passed if self.passed else None

    @property
    def kinds(self) -> dict[str, dict[str, Any]]:
        """Finding kind -> {"count", "share"} (for templates and exports)."""
        return {
            kind: {"count": self.by_kind.get(kind, 0), "share": self.kind_share(kind)}
            for kind in FINDING_KINDS
        }


def campaign_process_risk(*, campaign_ids: Iterable[int]) -> dict[int, CampaignProcessRisk]:
    """Campaign id -> its process-risk figures, for every campaign asked (two queries)."""
    ids = list(campaign_ids)
    passed = dict(
        TaskSummary.objects.filter(campaign_id__in=ids)
        .values("campaign_id")
        .annotate(n=Sum("n_pass"))
        .values_list("campaign_id", "n")
    )
    risky = {
        row["campaign_id"]: row
        for row in AttemptProcessRisk.objects.filter(campaign_id__in=ids, passed=True)
        .values("campaign_id")
        .annotate(
            total=Count("attempt_id"),
            **{kind: Count("attempt_id", filter=Q(**{f"{kind}__gt": 0})) for kind in FINDING_KINDS},
        )
    }
    figures = {}
    for campaign_id in ids:
        row: dict[str, Any] = dict(risky.get(campaign_id) or {})
        figures[campaign_id] = CampaignProcessRisk(
            passed=int(passed.get(campaign_id) or 0),
            with_risk=int(row.get("total") or 0),
            by_kind={kind: int(row.get(kind) or 0) for kind in FINDING_KINDS},
        )
    return figures


@dataclass(frozen=True)
class AttemptProcessFindings:
    """One attempt's findings, indexed for the transcript (by call) and the diff (by table and row)."""

    findings: list[dict[str, Any]]
    coverage: str
    by_call: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    by_row: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # "table[key]" -> findings

    @property
    def kinds(self) -> list[str]:
        return sorted({f["kind"] for f in self.findings})


def attempt_process_findings(*, attempt_id: int) -> AttemptProcessFindings | None:
    """The attempt's process findings (None when it has none), labelled for display (one query)."""
    row = AttemptProcessRisk.objects.filter(attempt_id=attempt_id).values("findings", "coverage").first()
    return None if row is None else _indexed(row["findings"], row["coverage"])


def process_findings_of(attempt: Attempt) -> AttemptProcessFindings | None:
    """The findings of an attempt loaded with its process-risk row joined (drilldown.visible_drilldown_attempt): no query."""
    try:
        row = attempt.process_risk
    except AttemptProcessRisk.DoesNotExist:
        return None
    return _indexed(row.findings, row.coverage)


def _indexed(stored: list[dict[str, Any]], coverage: str) -> AttemptProcessFindings:
    """The findings labelled, and indexed by the calls they mark and the rows they name."""
    findings = [{**f, "label": FINDING_LABELS.get(f.get("kind", ""), f.get("kind", ""))} for f in stored]
    by_call: dict[int, list[dict[str, Any]]] = defaultdict(list)
    by_row: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for finding in findings:
        for index in finding.get("calls") or ():
            by_call[int(index)].append(finding)
        if finding.get("table"):
            by_row[f"{finding['table']}[{finding.get('key') or ''}]"].append(finding)
    return AttemptProcessFindings(findings, coverage, dict(by_call), dict(by_row))


def process_counts_of_attempts(*, attempt_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Attempt id -> finding count per kind, for attempts with findings (one query; exports and API)."""
    rows = AttemptProcessRisk.objects.filter(attempt_id__in=list(attempt_ids)).values_list(
        "attempt_id", *FINDING_KINDS
    )
    return {row[0]: dict(zip(FINDING_KINDS, row[1:])) for row in rows}


def passed_with_process_risk_ids(*, campaign_ids: Iterable[int] | QuerySet, kind: str = "") -> Any:
    """A queryset of the attempt ids that passed with process risk (of ``kind`` if given): the
    triage filter and queue narrow their attempt lists with it (a subquery, no extra round trip)."""
    ids = campaign_ids if isinstance(campaign_ids, QuerySet) else list(campaign_ids)
    rows = AttemptProcessRisk.objects.filter(campaign_id__in=ids, passed=True)
    if kind in FINDING_KINDS:
        rows = rows.filter(**{f"{kind}__gt": 0})
    return rows.values("attempt_id")


def passed_with_process_risk(
    *,
    campaigns: Any,
    kind: str = "",
    domain: str = "",
    task: str = "",
    conditions: Iterable[Any] = (),
    ordering: Sequence[str] = (),
) -> Any:
    """Done, *passing* attempts of ``campaigns`` (a Campaign queryset) with process findings (of ``kind``
    when given), narrowed like the failure queue (``domain``, ``task`` substring, caller ``conditions``)."""
    risky = AttemptProcessRisk.objects.filter(passed=True)
    if kind in FINDING_KINDS:
        risky = risky.filter(**{f"{kind}__gt": 0})
    queryset = Attempt.objects.filter(
        campaign__in=campaigns.values("pk"),
        status=Attempt.Status.DONE,
        verdict=Attempt.Verdict.PASS,
        pk__in=risky.values("attempt_id"),
    )
    if domain:
        queryset = queryset.filter(task__domain__name=domain)
    if task:
        queryset = queryset.filter(task__task_id__icontains=task)
    for condition in conditions:
        queryset = queryset.filter(condition)
    return queryset.order_by(*ordering)


@dataclass(frozen=True)
class SuspectRuleRow:
    """A process rule a stored golden run broke: the rule (or the golden trajectory) is suspect."""

    rule: str
    domain: str
    tasks: tuple[str, ...]  # task ids whose golden run broke it
    attempt_ids: tuple[int, ...]  # the golden attempts, as evidence
    detail: str  # one finding's sentence


def suspect_rules_of_golden_runs(*, campaign_ids: Iterable[int]) -> list[SuspectRuleRow]:
    """Rules broken by the golden attempts of ``campaign_ids`` (the caller passes its harness-check,
    i.e. golden, campaigns), listed like suspect tasks (one query)."""
    rows = (
        AttemptProcessRisk.objects.filter(
            campaign_id__in=list(campaign_ids), write_before_required_step__gt=0
        )
        .select_related("task__domain")
        .order_by("attempt_id")
    )
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        for finding in row.findings:
            if finding.get("kind") != "write_before_required_step":
                continue
            entry = found.setdefault(
                (row.task.domain.name, finding.get("rule", "")),
                {"tasks": [], "attempts": [], "detail": finding.get("detail", "")},
            )
            if row.task.task_id not in entry["tasks"]:
                entry["tasks"].append(row.task.task_id)
            if row.attempt_id not in entry["attempts"]:
                entry["attempts"].append(row.attempt_id)
    return [
        SuspectRuleRow(rule, domain, tuple(entry["tasks"]), tuple(entry["attempts"]), entry["detail"])
        for (domain, rule), entry in sorted(found.items())
    ]
