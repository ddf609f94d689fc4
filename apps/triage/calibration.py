"""Judge calibration: human yes/no labels on rubric answers against the judge's answers, per judge version.

A judge version is the content hash of its kind, model and prompt (tb_engine.judges.judge_identity
of a campaign's ``judge`` configuration); every human label stores the version that gave the answer
it labels. Figures that depend on rubric tasks carry a note with the judge's κ and interval, or say
that the judge has fewer than 30 human labels. Only labels on the reader's visible campaigns count.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.core.cache import cache

from apps.campaigns.models import Campaign
from apps.suites.models import Task
from apps.triage.models import RubricVerdict
from tb_engine.judges import JudgeIdentity, judge_identity
from tb_engine.metrics.agreement import MIN_LABELS, Calibration, calibration


@dataclass(frozen=True)
class JudgeRow:
    """One judge version: the visible campaigns that use it and its agreement with human labels."""

    identity: JudgeIdentity
    campaigns: tuple[Campaign, ...]
    labels: int  # human labels, unjudged answers included
    unjudged: int  # of them, on answers the judge could not give
    calibration: Calibration  # over the labels with a judge answer

    @property
    def key(self) -> str:
        return self.identity.key

    @property
    def note(self) -> str:
        return judge_note_text(self.identity, self.calibration)


def judge_note_text(identity: JudgeIdentity, result: Calibration) -> str:
    """The line shown beside a rubric-dependent figure."""
    name = f"judge {identity.label}"
    if result.n == 0:
        return f"{name}: no human labels yet, so its agreement with people is unknown"
    if not result.enough:
        return f"{name}: only {result.n} human label{'s' if result.n != 1 else ''} (fewer than {MIN_LABELS}), not calibrated"
    if result.kappa is None:
        return f"{name}: κ undefined on {result.n} human labels (a single class)"
    interval = ""
    if result.kappa_lo is not None and result.kappa_hi is not None:
        interval = f" [{result.kappa_lo:.2f}, {result.kappa_hi:.2f}]"
    return f"{name}: κ = {result.kappa:.2f}{interval} on {result.n} human labels"


def _labels_by_judge(campaign_ids: list[int]) -> dict[str, list[tuple[bool | None, bool]]]:
    by_key: dict[str, list[tuple[bool | None, bool]]] = defaultdict(list)
    for key, judge, human in RubricVerdict.objects.filter(attempt__campaign_id__in=campaign_ids).values_list(
        "judge_key", "judge_answer", "human_answer"
    ):
        by_key[key].append((judge, human))
    return by_key


def judge_rows(*, campaigns: list[Campaign]) -> list[JudgeRow]:
    """Every judge version the campaigns used, with its calibration (one query), most labelled first."""
    identities: dict[str, JudgeIdentity] = {}
    users: dict[str, list[Campaign]] = defaultdict(list)
    for campaign in campaigns:
        identity = judge_identity(campaign.judge)
        identities[identity.key] = identity
        users[identity.key].append(campaign)
    labels = _labels_by_judge([c.pk for c in campaigns])
    rows = []
    for key, identity in identities.items():
        pairs = labels.get(key, [])
        judged = [(judge, human) for judge, human in pairs if judge is not None]
        rows.append(
            JudgeRow(
                identity=identity,
                campaigns=tuple(users[key]),
                labels=len(pairs),
                unjudged=len(pairs) - len(judged),
                calibration=calibration(judged),
            )
        )
    rows.sort(key=lambda row: (-row.labels, row.identity.label))
    return rows


@dataclass(frozen=True)
class JudgeNote:
    key: str
    text: str
    enough: bool


def _rubric_tasks(campaigns: list[Campaign]) -> set[int]:
    """Pks of the campaigns' suites' tasks that have rubrics (cached per suite version)."""
    found: set[int] = set()
    for suite in {c.suite_id: c.suite for c in campaigns}.values():
        key = f"triage:rubric-tasks:{suite.pk}:{suite.content_hash}"
        pks = cache.get(key)
        if pks is None:
            pks = frozenset(
                pk
                for pk, rubrics in Task.objects.filter(suite_id=suite.pk).values_list("pk", "spec__rubrics")
                if rubrics
            )
            cache.set(key, pks, 6 * 3600)
        found |= pks
    return found


def judge_notes(*, campaigns: list[Campaign]) -> dict[int, JudgeNote]:
    """Per campaign that ran rubric tasks, the note on its judge's calibration (two queries warm)."""
    ids = [c.pk for c in campaigns]
    rubric_tasks = _rubric_tasks(campaigns)
    if not rubric_tasks:
        return {}
    with_rubrics = set(
        Campaign.tasks.through.objects.filter(campaign_id__in=ids, task_id__in=sorted(rubric_tasks))
        .values_list("campaign_id", flat=True)
        .distinct()
    )
    if not with_rubrics:
        return {}
    rows = {row.key: row for row in judge_rows(campaigns=[c for c in campaigns if c.pk in with_rubrics])}
    notes = {}
    for campaign in campaigns:
        if campaign.pk in with_rubrics:
            row = rows[judge_identity(campaign.judge).key]
            notes[campaign.pk] = JudgeNote(row.key, row.note, row.calibration.enough)
    return notes


def judge_note_rows(*, campaigns: list[Campaign]) -> list[tuple[Campaign, JudgeNote]]:
    """(campaign, note) for each campaign whose figures depend on rubric tasks, in the given order."""
    notes = judge_notes(campaigns=campaigns)
    return [(campaign, notes[campaign.pk]) for campaign in campaigns if campaign.pk in notes]
