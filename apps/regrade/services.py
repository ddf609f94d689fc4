"""Writes of re-grading: a preview re-grade of campaigns' stored attempts, and applying it (issue 29).

``regrade_preview`` grades every done attempt of the campaigns again from what it stored
(tb_engine.regrade) against the task definitions and grader of now, and records a preview
VerdictVersion for each attempt whose grading would change (or which cannot be re-graded) plus the
impact report; nothing the figures read changes. ``regrade_apply`` writes the previews onto the
attempt record (through apps.attempts.services), keeps the gradings they replace, and refreshes
the stored figures.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, connections, transaction
from django.utils import timezone

from apps.attempts import services as attempts_services
from apps.attempts.selectors.regrade import attempt_gradings, attempts_to_regrade, campaign_agent_costs
from apps.campaigns.models import Campaign
from apps.core.batches import in_slices
from apps.figures.services import figures_refresh
from apps.regrade.models import RegradeRun, VerdictVersion
from apps.suites.models import Task
from apps.worker.selectors import task_domain, task_spec_of
from tb_engine.interfaces import Judge
from tb_engine.regrade import GRADER_VERSION, Regraded, TaskBasis, regrade_stored, task_basis
from tb_engine.regrade_impact import FLIP_KINDS, PairCounts, campaign_impact, flip_kind, rank_changes

__all__ = ["RegradeError", "regrade_apply", "regrade_preview"]

VERSION_BATCH = 2000


class RegradeError(Exception):
    """A re-grade that cannot be made or applied as asked (the message says why)."""


@dataclass
class _Pair:
    n_before: int = 0
    c_before: int = 0
    n_after: int = 0
    c_after: int = 0
    unjudged_before: int = 0
    unjudged_after: int = 0

    def add(self, before: str, after: str) -> None:
        self.n_before += before in ("pass", "fail")
        self.c_before += before == "pass"
        self.unjudged_before += before == "unjudged"
        self.n_after += after in ("pass", "fail")
        self.c_after += after == "pass"
        self.unjudged_after += after == "unjudged"


@dataclass
class _Tally:
    pairs: dict[tuple[int, int], _Pair] = field(default_factory=lambda: defaultdict(_Pair))
    flips: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FLIP_KINDS, 0))
    regraded: int = 0
    changed: int = 0
    not_regradable: int = 0
    reasons: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    task_versions: dict[str, dict[str, str]] = field(default_factory=dict)

    def plain(self) -> _Tally:
        """Without the defaultdicts' factories (lambdas do not pickle): to send from a child process."""
        self.pairs, self.reasons = dict(self.pairs), dict(self.reasons)
        return self

    @classmethod
    def merged(cls, parts: list[_Tally]) -> _Tally:
        """The tallies of disjoint sets of tasks added up."""
        total = cls()
        for part in parts:
            total.pairs.update(part.pairs)
            for kind, count in part.flips.items():
                total.flips[kind] += count
            for reason, count in part.reasons.items():
                total.reasons[reason] += count
            total.regraded += part.regraded
            total.changed += part.changed
            total.not_regradable += part.not_regradable
            total.task_versions.update(part.task_versions)
        total.task_versions = dict(sorted(total.task_versions.items(), key=lambda item: int(item[0])))
        return total


def _grading_changed(stored: dict[str, Any], new: Regraded) -> bool:
    return (
        new.verdict != stored.get("verdict")
        or list(new.categories) != list(stored.get("categories") or [])
        or new.clean_looking != bool(stored.get("clean_looking"))
        or [item.to_dict() for item in new.diff] != (stored.get("diff") or [])
        or [check.to_dict() for check in new.checks] != (stored.get("checks") or [])
        or [rubric.to_dict() for rubric in new.rubrics] != (stored.get("rubrics") or [])
    )


def _bases(task_pks: Iterable[int]) -> dict[int, TaskBasis]:
    """S0 and SG of each task as now defined, computed once per task for all its attempts."""
    bases = {}
    for task in Task.objects.filter(pk__in=list(task_pks)).select_related("suite", "domain"):
        bases[task.pk] = task_basis(task_domain(task), task_spec_of(task))
    return bases


def regrade_preview(
    *,
    campaign_ids: list[int],
    team_id: int,
    user: Any = None,
    judge: Judge | None = None,
    workers: int = 1,
) -> RegradeRun:
    """Re-grade the campaigns' done attempts as a preview; returns the run with its impact report.

    ``workers`` > 1 splits the tasks among that many forked processes (PostgreSQL, outside a
    transaction, without a judge; otherwise one process). Side effects: one RegradeRun (status
    preview) with its impact report, and a VerdictVersion (kind preview, or not_regradable with the
    reason) per attempt whose grading would change or that cannot be re-graded. The attempt record
    and the figures are untouched.
    """
    started = time.perf_counter()
    campaigns = list(Campaign.objects.filter(pk__in=campaign_ids, team_id=team_id).order_by("pk"))
    if len(campaigns) != len(set(campaign_ids)) or not campaigns:
        raise RegradeError("every campaign must exist and belong to the team")
    ids = [c.pk for c in campaigns]
    task_pks = sorted(
        set(Campaign.tasks.through.objects.filter(campaign_id__in=ids).values_list("task_id", flat=True))
    )
    run = RegradeRun.objects.create(team_id=team_id, grader_version=GRADER_VERSION, created_by=user)
    run.campaigns.set(campaigns)
    parallel = (
        workers > 1 and judge is None and connection.vendor == "postgresql" and not connection.in_atomic_block
    )
    if parallel:
        parts = [task_pks[i::workers] for i in range(workers)]
        connections.close_all()  # each forked process opens its own connection
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            tallies = pool.starmap(_regrade_part_in_child, [(run.pk, ids, part) for part in parts])
        tally = _Tally.merged(tallies)
    else:
        tally = _regrade_part(run, ids, task_pks, judge=judge, only_listed=False)
    run.task_versions = tally.task_versions
    run.report = _report(campaigns, tally)
    run.regraded, run.not_regradable = tally.regraded, tally.not_regradable
    run.duration_s = time.perf_counter() - started
    run.save(update_fields=["task_versions", "report", "regraded", "not_regradable", "duration_s"])
    return run


def _regrade_part_in_child(run_id: int, campaign_ids: list[int], task_pks: list[int]) -> _Tally:
    try:
        run = RegradeRun.objects.get(pk=run_id)
        return _regrade_part(run, campaign_ids, task_pks, judge=None, only_listed=True).plain()
    finally:
        connections.close_all()


def _regrade_part(
    run: RegradeRun, campaign_ids: list[int], task_pks: list[int], *, judge: Judge | None, only_listed: bool
) -> _Tally:
    """Re-grade the campaigns' attempts of ``task_pks`` (every task's unless ``only_listed``)."""
    bases = _bases(task_pks)
    tally = _Tally()
    versions: list[VerdictVersion] = []
    stream = attempts_to_regrade(
        campaign_ids=campaign_ids, task_ids=task_pks if only_listed else None, with_messages=judge is not None
    )
    for stored in stream:
        pair = tally.pairs[(stored.campaign_id, stored.task_id)]
        if stored.status != "done":
            continue
        basis = bases.get(stored.task_id)
        if basis is None:  # an attempt of a task no longer in the campaign's task set
            basis = bases[stored.task_id] = _bases([stored.task_id])[stored.task_id]
        new = regrade_stored(basis, stored.result, judge=judge)
        before = stored.verdict
        if not new.regradable:
            tally.not_regradable += 1
            tally.reasons[new.reason] += 1
            pair.add(before, before)
            versions.append(_version(run, stored, VerdictVersion.Kind.NOT_REGRADABLE, new, basis))
        else:
            tally.regraded += 1
            pair.add(before, new.verdict)
            kind = flip_kind(before, new.verdict)
            if kind:
                tally.flips[kind] += 1
            if kind or _grading_changed(stored.result, new):
                tally.changed += 1
                versions.append(_version(run, stored, VerdictVersion.Kind.PREVIEW, new, basis))
        if len(versions) >= VERSION_BATCH:
            VerdictVersion.objects.bulk_create(versions)
            versions.clear()
    VerdictVersion.objects.bulk_create(versions)
    tally.task_versions = {
        str(pk): {"task_id": basis.task.id, "hash": basis.task_hash} for pk, basis in sorted(bases.items())
    }
    return tally


def _version(run: RegradeRun, stored: Any, kind: str, new: Regraded, basis: TaskBasis) -> VerdictVersion:
    return VerdictVersion(
        attempt_id=stored.id,
        run=run,
        campaign_id=stored.campaign_id,
        kind=kind,
        previous_verdict=stored.verdict,
        verdict=new.verdict,
        categories=list(new.categories),
        clean_looking=new.clean_looking,
        diff=[item.to_dict() for item in new.diff],
        checks=[check.to_dict() for check in new.checks],
        rubrics=[rubric.to_dict() for rubric in new.rubrics],
        task_hash=basis.task_hash,
        grader_version=GRADER_VERSION,
        reason=new.reason,
    )


def _report(campaigns: list[Campaign], tally: _Tally) -> dict[str, Any]:
    costs = campaign_agent_costs(campaign_ids=[c.pk for c in campaigns])
    by_campaign: dict[int, dict[str, PairCounts]] = defaultdict(dict)
    for (campaign_id, task_pk), pair in tally.pairs.items():
        by_campaign[campaign_id][str(task_pk)] = PairCounts(**vars(pair))
    impacts = {}
    for campaign in campaigns:
        impacts[str(campaign.pk)] = campaign_impact(
            by_campaign.get(campaign.pk, {}),
            n_attempts=campaign.n_attempts,
            agent_cost=costs.get(campaign.pk),
        )
    ranks = rank_changes(impacts)
    return {
        "campaigns": {
            str(c.pk): {"name": c.name, **impacts[str(c.pk)], "rank": ranks["ranks"][str(c.pk)]}
            for c in campaigns
        },
        "reversals": [[int(x), int(y)] for x, y in ranks["reversals"]],
        "flips": tally.flips,
        "regraded": tally.regraded,
        "changed": tally.changed,
        "not_regradable": tally.not_regradable,
        "not_regradable_reasons": dict(tally.reasons),
    }


def regrade_apply(*, run: RegradeRun, user: Any = None) -> RegradeRun:
    """Apply a preview re-grade: its gradings become the attempts' and the figures', the old ones stay.

    Refused (RegradeError) when the run is not a preview, or when an attempt's grading changed since
    the preview (another re-grade was applied): re-grade again then. Side effects: through
    apps.attempts.services.gradings_apply the attempts' gradings, task versions, signatures and
    task summaries; VerdictVersion rows (an ``original`` for an attempt re-graded for the first
    time, earlier applied versions superseded, the previews applied); the run (applied); stored
    figures of the campaigns and their teams (figures_refresh).
    """
    if run.status != RegradeRun.Status.PREVIEW:
        raise RegradeError(f"re-grade #{run.pk} is {run.status}, not a preview")
    previews = list(run.versions.filter(kind=VerdictVersion.Kind.PREVIEW))
    skipped = list(
        run.versions.filter(kind=VerdictVersion.Kind.NOT_REGRADABLE).values_list("attempt_id", flat=True)
    )
    current = attempt_gradings(attempt_ids=[v.attempt_id for v in previews])
    previews = [v for v in previews if v.attempt_id in current]  # an attempt deleted since: nothing to write
    stale = [v.attempt_id for v in previews if current[v.attempt_id]["verdict"] != v.previous_verdict]
    if stale:
        raise RegradeError(
            f"{len(stale)} attempt(s) changed verdict since this preview (e.g. #{stale[0]}): re-grade again"
        )
    campaign_ids = list(run.campaigns.values_list("pk", flat=True))
    harness = dict(Campaign.objects.filter(pk__in=campaign_ids).values_list("pk", "harness_version"))
    with transaction.atomic():
        has_original: set[int] = set()
        for ids in in_slices(list(current)):
            has_original.update(
                VerdictVersion.objects.filter(
                    attempt_id__in=ids, kind=VerdictVersion.Kind.ORIGINAL
                ).values_list("attempt_id", flat=True)
            )
        originals = [
            VerdictVersion(
                attempt_id=v.attempt_id,
                campaign_id=v.campaign_id,
                kind=VerdictVersion.Kind.ORIGINAL,
                verdict=current[v.attempt_id]["verdict"] or "",
                categories=current[v.attempt_id]["categories"] or [],
                clean_looking=bool(current[v.attempt_id]["clean_looking"]),
                diff=current[v.attempt_id]["diff"] or [],
                checks=current[v.attempt_id]["checks"] or [],
                rubrics=current[v.attempt_id]["rubrics"] or [],
                task_hash=current[v.attempt_id]["task_hash"] or "",
                grader_version=harness.get(v.campaign_id, ""),
            )
            for v in previews
            if v.attempt_id not in has_original
        ]
        VerdictVersion.objects.bulk_create(originals, batch_size=VERSION_BATCH)
        for ids in in_slices(list(current)):
            VerdictVersion.objects.filter(attempt_id__in=ids, kind=VerdictVersion.Kind.APPLIED).update(
                kind=VerdictVersion.Kind.SUPERSEDED
            )
        run.versions.filter(kind=VerdictVersion.Kind.PREVIEW).update(kind=VerdictVersion.Kind.APPLIED)
        attempts_services.gradings_apply(
            changes=[
                attempts_services.GradingChange(
                    attempt_id=v.attempt_id,
                    verdict=v.verdict,
                    categories=list(v.categories),
                    clean_looking=v.clean_looking,
                    diff=v.diff,
                    checks=v.checks,
                    rubrics=v.rubrics,
                    task_hash=v.task_hash,
                )
                for v in previews
            ],
            task_hashes={int(pk): version["hash"] for pk, version in run.task_versions.items()},
            campaign_ids=campaign_ids,
            keep_hash_of=skipped,
        )
        run.status, run.applied_by, run.applied_at = RegradeRun.Status.APPLIED, user, timezone.now()
        run.save(update_fields=["status", "applied_by", "applied_at"])
    figures_refresh(campaign_ids=campaign_ids)
    return run
