"""The suspect-task queue: tasks (not agents) that are probably wrong, each with its evidence.

Evidence kinds, all read from what is stored:

* ``failed_everywhere`` — no campaign passed the task once, over at least three non-simulated campaigns
  (per-task summaries);
* ``golden`` — the golden replay fails or is not deterministic: the task's stored validation says
  *invalid*, or a golden-agent campaign failed it;
* ``do_nothing`` — a do-nothing run passes: the stored validation says *non-discriminating*, or an
  attempt passed without a single tool call (whatever agent made it, e.g. a do-nothing harness check);
* ``verdict_disagreement`` — our verdict and a ThinkingBox server's hash verdict disagree on an attempt
  (``extra.thinkingbox``: a ``disagree`` flag, at its top or in a server's effects);
* ``negative_discrimination`` — the campaigns that are better overall fail it more: item–rest
  correlation < 0 across at least three campaigns (golden self-checks left out), and not by chance:
  a one-sided permutation p ≤ 0.10 (with four campaigns about half of all tasks have r < 0 by chance);
* ``health_label`` — a triager labelled one of its attempts with a task-health label (grader bug…).

A triager *excludes* a suspect task (a task-health issue of source suspect: the health toggle on every
metric page leaves it out) or *dismisses* it (it is fine; it comes back only with evidence of a kind
not yet dismissed). The evidence is cached under a stamp of the summaries, the tasks' validations and
the audit trail; decisions are read fresh.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import asdict, dataclass

import pandas as pd
from django.core.cache import cache
from django.db.models import Count, Max

from apps.agents.models import AgentConfig
from apps.attempts.selectors.summary_stamps import campaigns_revision_stamp
from apps.attempts.selectors.task_evidence import disputed_attempts, idle_passes
from apps.campaigns.models import Campaign
from apps.figures.selectors import per_task_tables
from apps.suites.models import Suite, Task
from apps.triage.models import AuditEntry, SuspectDecision, TaskHealthIssue
from tb_engine.metrics.discrimination import MIN_CAMPAIGNS, failed_everywhere, item_rest_correlations

KINDS = {
    "failed_everywhere": "every campaign fails it",
    "golden": "golden replay fails or is not deterministic",
    "do_nothing": "a do-nothing run passes",
    "verdict_disagreement": "our verdict and the server's disagree",
    "negative_discrimination": "better campaigns fail it more",
    "health_label": "labelled by a triager",
}
STATUSES = {"open": "Open", "excluded": "Excluded", "dismissed": "Dismissed", "all": "All"}
CACHE_SECONDS = 6 * 3600
CACHE_VERSION = 2
# Negative discrimination is flagged when r < 0 and its one-sided permutation p-value is at most this.
MAX_P = 0.10


@dataclass(frozen=True)
class Evidence:
    kind: str
    detail: str  # plain words
    attempt_id: int | None = None  # an example attempt to open
    value: float | None = None  # e.g. the item-rest correlation

    @property
    def title(self) -> str:
        return KINDS.get(self.kind, self.kind)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SuspectTask:
    task: Task
    evidence: tuple[Evidence, ...]
    status: str  # open | excluded | dismissed
    decision: SuspectDecision | None  # the latest one

    @property
    def kinds(self) -> list[str]:
        return sorted({e.kind for e in self.evidence})


def _stamp(campaign_ids: list[int], suite_ids: list[int]) -> str:
    """What the cached evidence was computed from: the campaigns' summaries (a trigger-kept revision
    per campaign, so one row per campaign is read, not every summary row), their suites' tasks
    (validation flags) and the audit log (health labels)."""
    tasks = Task.objects.filter(suite_id__in=suite_ids).aggregate(latest=Max("updated_at"), rows=Count("id"))
    audit = AuditEntry.objects.aggregate(last=Max("pk"))["last"] or 0
    parts = [campaigns_revision_stamp(campaign_ids), tasks["latest"], tasks["rows"], audit]
    return "|".join(str(p) for p in parts)


def _evidence(campaigns: list[Campaign]) -> dict[int, list[Evidence]]:
    """Task pk -> evidence, over the campaigns (and their suites' validations)."""
    found: dict[int, list[Evidence]] = defaultdict(list)
    names = {c.pk: c.name for c in campaigns}
    tables = per_task_tables(campaigns)
    rows = []
    for campaign in campaigns:
        frame = tables.frame(campaign)
        rows.append(
            pd.DataFrame(
                {"campaign": campaign.pk, "task": frame["task_pk"], "n": frame["n"], "c": frame["c"]}
            )
        )
    long = (
        pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["campaign", "task", "n", "c"])
    )
    kind_of = {c.pk: c.agent.kind for c in campaigns}
    simulated = {c.pk for c in campaigns if c.agent.is_simulation}
    golden = {c.pk for c in campaigns if kind_of[c.pk] == AgentConfig.Kind.GOLDEN}

    real = long[~long["campaign"].isin(list(simulated))]
    for task, count in failed_everywhere(real).items():
        ran = real[(real["task"] == int(task)) & (real["n"] > 0)]
        attempts = int(ran["n"].sum())
        who = ", ".join(sorted(names[pk] for pk in ran["campaign"]))
        found[int(task)].append(
            Evidence(
                "failed_everywhere",
                f"0 of {attempts} attempts passed in {count} non-simulated campaigns ({who})",
            )
        )
    for _, row in long[
        long["campaign"].isin(list(golden)) & (long["n"] > 0) & (long["c"] < long["n"])
    ].iterrows():
        found[int(row["task"])].append(
            Evidence(
                "golden",
                f"the golden agent passed {int(row['c'])} of {int(row['n'])} attempts in {names[int(row['campaign'])]}",
            )
        )
    # Harness checks (the golden replay and its deliberate variants) test the grader, not a model.
    harness = {c.pk for c in campaigns if c.agent.is_harness_check}
    contenders = long[~long["campaign"].isin(list(harness))]
    for item in item_rest_correlations(contenders):
        if item.r is not None and item.r < 0 and item.p_value is not None and item.p_value <= MAX_P:
            found[int(item.task)].append(
                Evidence(
                    "negative_discrimination",
                    f"item–rest r = {item.r:+.2f} over {item.campaigns} campaigns (one-sided permutation "
                    f"p = {item.p_value:.2f}): the campaigns that do better on the other tasks pass this one "
                    f"less (mean success {item.rate:.0%})",
                    value=item.r,
                )
            )
    _validation_evidence(campaigns, found)
    _idle_passes(campaigns, found)
    _disagreements(campaigns, found)
    _health_labels(campaigns, found)
    return found


def _validation_evidence(campaigns: list[Campaign], found: dict[int, list[Evidence]]) -> None:
    suites = {c.suite_id for c in campaigns}
    invalid = Task.objects.filter(
        suite_id__in=suites, validation__in=[Task.Validation.INVALID, Task.Validation.NON_DISCRIMINATING]
    ).values_list("pk", "validation", "validation_detail")
    for pk, validation, detail in invalid:
        kind = "golden" if validation == Task.Validation.INVALID else "do_nothing"
        text = " ".join((detail or "").split())[:300] or validation.replace("_", "-")
        found[pk].append(Evidence(kind, f"task validation: {text}"))


def _idle_passes(campaigns: list[Campaign], found: dict[int, list[Evidence]]) -> None:
    for idle in idle_passes(campaign_ids=[c.pk for c in campaigns]):
        found[idle.task_id].append(
            Evidence(
                "do_nothing",
                f"{idle.count} attempt{'s' if idle.count != 1 else ''} passed without a single tool call",
                attempt_id=idle.example,
            )
        )


def _disagreements(campaigns: list[Campaign], found: dict[int, list[Evidence]]) -> None:
    ids = [c.pk for c in campaigns if c.suite.source == Suite.Source.THINKINGBOX]
    if not ids:
        return
    for task_id, pks in disputed_attempts(campaign_ids=ids).items():
        found[task_id].append(
            Evidence(
                "verdict_disagreement",
                f"our verdict and the server's hash verdict disagree on {len(pks)} attempt{'s' if len(pks) != 1 else ''}",
                attempt_id=pks[0],
            )
        )


def _health_labels(campaigns: list[Campaign], found: dict[int, list[Evidence]]) -> None:
    issues = (
        TaskHealthIssue.objects.filter(
            resolved_at__isnull=True,
            source=TaskHealthIssue.Source.LABEL,
            task__campaigns__in=[c.pk for c in campaigns],
        )
        .values_list("task_id", "label__name", "attempt_id")
        .distinct()
    )
    for task_id, label, attempt_id in issues:
        found[task_id].append(
            Evidence("health_label", f"an attempt is labelled {label}", attempt_id=attempt_id)
        )


def suspect_tasks(*, campaigns: list[Campaign], status: str = "open", kind: str = "") -> list[SuspectTask]:
    """Suspect tasks of the campaigns with their evidence, most evidence first (a constant number of queries)."""
    campaign_ids = sorted(c.pk for c in campaigns)
    suite_ids = sorted({c.suite_id for c in campaigns})
    raw = "|".join([",".join(map(str, campaign_ids)), _stamp(campaign_ids, suite_ids)])
    key = f"triage:suspects:v{CACHE_VERSION}:" + hashlib.sha1(raw.encode()).hexdigest()
    evidence = cache.get(key)
    if evidence is None:
        evidence = {pk: tuple(items) for pk, items in _evidence(campaigns).items()} if campaigns else {}
        cache.set(key, evidence, CACHE_SECONDS)
    if kind:
        evidence = {pk: items for pk, items in evidence.items() if any(e.kind == kind for e in items)}
    tasks = Task.objects.select_related("domain", "suite").in_bulk(list(evidence))
    latest: dict[int, SuspectDecision] = {}
    for decision in SuspectDecision.objects.filter(task_id__in=list(evidence)).select_related("decided_by"):
        latest.setdefault(decision.task_id, decision)  # ordered newest first
    excluded = set(
        TaskHealthIssue.objects.filter(
            task_id__in=list(evidence), source=TaskHealthIssue.Source.SUSPECT, resolved_at__isnull=True
        ).values_list("task_id", flat=True)
    )
    out = []
    for pk, items in evidence.items():
        if pk not in tasks:
            continue
        last_decision = latest.get(pk)
        kinds = {e.kind for e in items}
        if pk in excluded:
            state = "excluded"
        elif (
            last_decision
            and last_decision.decision == SuspectDecision.Decision.DISMISSED
            and kinds <= set(last_decision.kinds)
        ):
            state = "dismissed"
        else:
            state = "open"
        if status in ("", "all") or status == state:
            out.append(SuspectTask(task=tasks[pk], evidence=items, status=state, decision=last_decision))
    out.sort(key=lambda s: (-len(s.kinds), s.task.task_id, s.task.pk))
    return out


__all__ = ["KINDS", "MIN_CAMPAIGNS", "STATUSES", "Evidence", "SuspectTask", "suspect_tasks"]
