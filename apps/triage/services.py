"""Writes of triage. Every change to a review writes an AuditEntry (who, when, before -> after).

Services take keyword-only arguments and check the actor's role themselves, so the web views
and the REST API share one gate: labels, notes, assignment and status need the triager role.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.attempts.models import Attempt
from apps.attempts.selectors.reviewed_attempts import stored_rubrics
from apps.campaigns.models import Campaign
from apps.campaigns.services import CLUSTERS_STORE_TASK as CLUSTERS_STORE_TASK
from apps.core.access import user_has_role
from apps.core.batches import in_slices
from apps.core.roles import Role
from apps.suites.models import Suite, Task
from apps.triage.clusters import store_scope
from apps.triage.models import (
    AttemptReview,
    AuditEntry,
    Label,
    RubricVerdict,
    SuiteValidation,
    SuspectDecision,
    TaskHealthIssue,
    TaskValidation,
)
from apps.triage.queue import QueueFilters
from tb_engine.judges import judge_identity
from thinkingbox_web.celery import app as celery_app

# Celery task that runs a requested suite validation (registered by apps.triage.tasks; the name
# keeps the prefix it had when the worker app held it, so messages already queued still run).
VALIDATE_SUITE_TASK = "worker.validate_suite"
# Health labels validation opens itself (never from a triager's label on an attempt).
INVALID_TASK = "invalid task"
NON_DISCRIMINATING = "non-discriminating"
VERDICT_DISAGREEMENT = "verdict disagreement"
VALIDATION_LABELS = {
    INVALID_TASK: "Validation: the golden trajectory fails, errors or is not deterministic",
    NON_DISCRIMINATING: "Validation: a do-nothing attempt passes",
    VERDICT_DISAGREEMENT: "Validation: our verdict and the server's hash verdict differ (the hash decides)",
}


def _ensure_triager(actor) -> None:
    if not user_has_role(actor, Role.TRIAGER):
        raise PermissionDenied("triage changes need the triager role")


def _review(attempt: Attempt) -> AttemptReview:
    """The attempt's review, created if missing and row-locked until the caller's transaction ends.

    Two triage requests on one attempt (a label key and `r` in one burst) must not interleave
    their read-modify-write: the lock makes the second wait for the first (PostgreSQL; SQLite
    takes its write lock at BEGIN already).
    """
    AttemptReview.objects.get_or_create(attempt=attempt)
    return AttemptReview.objects.select_for_update().get(attempt=attempt)


def _audit(*, attempt: Attempt | None, actor, field: str, before, after, task=None) -> AuditEntry:
    return AuditEntry.objects.create(
        attempt=attempt,
        task=task if task is not None else (attempt.task if attempt else None),
        actor=actor,
        field=field,
        before=before,
        after=after,
    )


def _label_names(review: AttemptReview) -> list[str]:
    return sorted(review.labels.values_list("name", flat=True))


@transaction.atomic
def attempt_set_labels(*, attempt: Attempt, labels: Iterable[Label], actor) -> AttemptReview:
    """Replace the attempt's labels. Side effects: audit entry when they change; task-health sync."""
    _ensure_triager(actor)
    review = _review(attempt)
    before = _label_names(review)
    wanted = list(labels)
    after = sorted(label.name for label in wanted)
    if before == after:
        return review
    review.labels.set(wanted)
    review.save(update_fields=["updated_at"])
    _audit(attempt=attempt, actor=actor, field="labels", before=before, after=after)
    _sync_task_health(attempt=attempt, actor=actor)
    return review


@transaction.atomic
def attempt_toggle_label(*, attempt: Attempt, label: Label, actor) -> AttemptReview:
    """Add the label if absent, else remove it (the digit keys of the drilldown)."""
    review = _review(attempt)
    current = list(review.labels.all())
    wanted = [item for item in current if item.pk != label.pk] if label in current else [*current, label]
    return attempt_set_labels(attempt=attempt, labels=wanted, actor=actor)


# Attempts per batch of the bulk writes (a cluster can hold thousands; IN lists stay small).
_BATCH = 1000


def _reviews_for(attempts: Sequence[Attempt]) -> dict[int, AttemptReview]:
    """Each attempt's review, creating the missing ones in one statement."""
    ids = [a.pk for a in attempts]
    found = {r.attempt_id: r for r in AttemptReview.objects.filter(attempt_id__in=ids)}
    missing = [AttemptReview(attempt_id=pk) for pk in ids if pk not in found]
    if missing:
        AttemptReview.objects.bulk_create(missing, ignore_conflicts=True)
        found.update(
            (r.attempt_id, r)
            for r in AttemptReview.objects.filter(attempt_id__in=[m.attempt_id for m in missing])
        )
    return found


@transaction.atomic
def attempts_bulk_label(*, attempts: Iterable[Attempt], label: Label, actor, add: bool = True) -> int:
    """Add (or remove) one label on many attempts (a ticked list or a whole cluster). Returns how many changed.

    Side effects: one audit entry per attempt changed (labels before -> after, as a single change
    writes); task-health issues synced once per task when the label flags task health. A few
    statements per thousand attempts.
    """
    _ensure_triager(actor)
    names = dict(Label.objects.values_list("pk", "name"))
    through = AttemptReview.labels.through
    changed_tasks: dict[int, Attempt] = {}
    changed = 0
    for batch in in_slices(list(attempts), _BATCH):
        reviews = _reviews_for(batch)
        current: dict[int, set[int]] = {review.pk: set() for review in reviews.values()}
        for review_id, label_id in through.objects.filter(attemptreview_id__in=list(current)).values_list(
            "attemptreview_id", "label_id"
        ):
            current[review_id].add(label_id)
        targets = [a for a in batch if (label.pk in current[reviews[a.pk].pk]) != add]
        if not targets:
            continue
        review_ids = [reviews[a.pk].pk for a in targets]
        if add:
            through.objects.bulk_create(
                [through(attemptreview_id=pk, label_id=label.pk) for pk in review_ids], ignore_conflicts=True
            )
        else:
            through.objects.filter(attemptreview_id__in=review_ids, label_id=label.pk).delete()
        AttemptReview.objects.filter(pk__in=review_ids).update(updated_at=timezone.now())
        entries = []
        for attempt in targets:
            before = current[reviews[attempt.pk].pk]
            after = before | {label.pk} if add else before - {label.pk}
            entries.append(
                AuditEntry(
                    attempt_id=attempt.pk,
                    task_id=attempt.task_id,
                    actor=actor,
                    field="labels",
                    before=sorted(names[pk] for pk in before),
                    after=sorted(names[pk] for pk in after),
                )
            )
            changed_tasks.setdefault(attempt.task_id, attempt)
        AuditEntry.objects.bulk_create(entries)
        changed += len(targets)
    if label.flags_task_health:
        for attempt in changed_tasks.values():
            _sync_task_health(attempt=attempt, actor=actor)
    return changed


@transaction.atomic
def attempts_bulk_assign(*, attempts: Iterable[Attempt], assignee, actor) -> int:
    """Set (or clear) the assignee of many attempts; the assignee must be a triager. Returns how many changed.

    Side effect: one audit entry per attempt changed.
    """
    _ensure_triager(actor)
    if assignee is not None and not user_has_role(assignee, Role.TRIAGER):
        raise ValidationError({"assignee": f"{assignee.get_username()} does not have the triager role"})
    usernames: dict[int, str] = {}
    target_id = assignee.pk if assignee else None
    changed = 0
    for batch in in_slices(list(attempts), _BATCH):
        reviews = _reviews_for(batch)
        targets = [a for a in batch if reviews[a.pk].assignee_id != target_id]
        if not targets:
            continue
        before_ids = {
            review.assignee_id
            for review in (reviews[a.pk] for a in targets)
            if review.assignee_id is not None
        }
        usernames.update(_usernames(before_ids - set(usernames)))
        AttemptReview.objects.filter(pk__in=[reviews[a.pk].pk for a in targets]).update(
            assignee=assignee, updated_at=timezone.now()
        )
        AuditEntry.objects.bulk_create(
            AuditEntry(
                attempt_id=a.pk,
                task_id=a.task_id,
                actor=actor,
                field="assignee",
                before=usernames.get(before_id)
                if (before_id := reviews[a.pk].assignee_id) is not None
                else None,
                after=assignee.get_username() if assignee else None,
            )
            for a in targets
        )
        changed += len(targets)
    return changed


def _usernames(ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    model = get_user_model()
    return dict(model.objects.filter(pk__in=ids).values_list("pk", model.USERNAME_FIELD))


@transaction.atomic
def attempts_bulk_status(*, attempts: Iterable[Attempt], status: str, actor) -> int:
    """Mark many attempts open or reviewed. Returns how many changed. Side effect: one audit entry per change."""
    _ensure_triager(actor)
    if status not in AttemptReview.Status.values:
        raise ValidationError(
            {"status": f"unknown status {status!r}: expected one of {', '.join(AttemptReview.Status.values)}"}
        )
    changed = 0
    for batch in in_slices(list(attempts), _BATCH):
        reviews = _reviews_for(batch)
        targets = [a for a in batch if reviews[a.pk].status != status]
        if not targets:
            continue
        AttemptReview.objects.filter(pk__in=[reviews[a.pk].pk for a in targets]).update(
            status=status, updated_at=timezone.now()
        )
        AuditEntry.objects.bulk_create(
            AuditEntry(
                attempt_id=a.pk,
                task_id=a.task_id,
                actor=actor,
                field="status",
                before=reviews[a.pk].status,
                after=status,
            )
            for a in targets
        )
        changed += len(targets)
    return changed


@transaction.atomic
def attempt_set_note(*, attempt: Attempt, note: str, actor) -> AttemptReview:
    """Replace the free-text note. Side effect: audit entry when it changes."""
    _ensure_triager(actor)
    review = _review(attempt)
    note = note.strip()
    if review.note != note:
        before, review.note = review.note, note
        review.save(update_fields=["note", "updated_at"])
        _audit(attempt=attempt, actor=actor, field="note", before=before, after=note)
    return review


@transaction.atomic
def attempt_assign(*, attempt: Attempt, assignee, actor) -> AttemptReview:
    """Set (or clear, with None) who reviews the attempt; the assignee must be a triager too."""
    _ensure_triager(actor)
    if assignee is not None and not user_has_role(assignee, Role.TRIAGER):
        raise ValidationError({"assignee": f"{assignee.get_username()} does not have the triager role"})
    review = _review(attempt)
    if review.assignee_id != (assignee.pk if assignee else None):
        before = review.assignee.get_username() if review.assignee else None
        review.assignee = assignee
        review.save(update_fields=["assignee", "updated_at"])
        _audit(
            attempt=attempt,
            actor=actor,
            field="assignee",
            before=before,
            after=assignee.get_username() if assignee else None,
        )
    return review


@transaction.atomic
def attempt_set_status(*, attempt: Attempt, status: str, actor) -> AttemptReview:
    """Mark the attempt open or reviewed. Side effect: audit entry when it changes."""
    _ensure_triager(actor)
    if status not in AttemptReview.Status.values:
        raise ValidationError(
            {"status": f"unknown status {status!r}: expected one of {', '.join(AttemptReview.Status.values)}"}
        )
    review = _review(attempt)
    if review.status != status:
        before, review.status = review.status, status
        review.save(update_fields=["status", "updated_at"])
        _audit(attempt=attempt, actor=actor, field="status", before=before, after=status)
    return review


def _sync_task_health(*, attempt: Attempt, actor) -> None:
    """Open an issue per health label now on one of the task's attempts; close issues no attempt backs."""
    task = attempt.task
    used = set(
        Label.objects.filter(flags_task_health=True, reviews__attempt__task=task).values_list("pk", flat=True)
    )
    # Only issues opened by labels on attempts follow the labels; an exclusion from the suspect queue
    # and the issues validation opens itself stay.
    open_issues = {
        issue.label_id: issue
        for issue in TaskHealthIssue.objects.filter(
            task=task, resolved_at__isnull=True, source=TaskHealthIssue.Source.LABEL
        ).exclude(label__name__in=list(VALIDATION_LABELS))
    }
    for label_pk in used - set(open_issues):
        issue = TaskHealthIssue.objects.create(task=task, label_id=label_pk, attempt=attempt, opened_by=actor)
        _audit(
            attempt=attempt,
            actor=actor,
            field="task_health",
            before=None,
            after=f"opened: {issue.title}",
        )
    for unused_pk in set(open_issues) - used:
        stale = open_issues[unused_pk]
        _close(stale, actor=actor, resolution="label removed from every attempt")
        _audit(
            attempt=attempt,
            actor=actor,
            field="task_health",
            before=f"open: {stale.title}",
            after="closed",
        )


def _close(issue: TaskHealthIssue, *, actor, resolution: str) -> None:
    issue.resolved_at, issue.resolved_by, issue.resolution = timezone.now(), actor, resolution
    issue.save(update_fields=["resolved_at", "resolved_by", "resolution"])


@transaction.atomic
def health_issue_resolve(*, issue: TaskHealthIssue, actor, resolution: str = "") -> TaskHealthIssue:
    """Close an open task-health issue (e.g. the grader was fixed). Side effect: audit entry on the task."""
    _ensure_triager(actor)
    if not issue.is_open:
        return issue
    _close(issue, actor=actor, resolution=resolution.strip() or "resolved")
    _audit(
        attempt=None,
        task=issue.task,
        actor=actor,
        field="task_health",
        before=f"open: {issue.title}",
        after=f"resolved: {issue.resolution}",
    )
    return issue


@transaction.atomic
def label_save(
    *,
    actor,
    name: str,
    label: Label | None = None,
    description: str = "",
    shortcut: int | None = None,
    flags_task_health: bool = False,
    position: int | None = None,
) -> Label:
    """Create or edit a taxonomy label. Side effect: an audit entry (field 'taxonomy') with before/after."""
    _ensure_triager(actor)
    name = name.strip()
    if not name:
        raise ValidationError({"name": "a label needs a name"})
    if shortcut is not None and not 1 <= shortcut <= 9:
        raise ValidationError({"shortcut": f"shortcut must be a digit 1-9, got {shortcut}"})
    others = Label.objects.exclude(pk=label.pk) if label is not None else Label.objects.all()
    clash = others.filter(shortcut=shortcut).first() if shortcut else None
    if clash is not None:
        raise ValidationError({"shortcut": f"digit {shortcut} already toggles {clash.name!r}"})
    before = _label_state(label) if label else None
    label = label or Label()
    label.name, label.description, label.shortcut, label.flags_task_health = (
        name,
        description.strip(),
        shortcut,
        flags_task_health,
    )
    if position is not None:
        label.position = position
    elif label.pk is None:
        label.position = (
            Label.objects.order_by("-position").values_list("position", flat=True).first() or 0
        ) + 1
    label.save()
    _audit(attempt=None, actor=actor, field="taxonomy", before=before, after=_label_state(label))
    return label


def _label_state(label: Label) -> dict:
    return {"name": label.name, "shortcut": label.shortcut, "flags_task_health": label.flags_task_health}


# --- Suspect-task queue ---------------------------------------------------------------------------


def _open_exclusion(task) -> TaskHealthIssue | None:
    return TaskHealthIssue.objects.filter(
        task=task, source=TaskHealthIssue.Source.SUSPECT, resolved_at__isnull=True
    ).first()


@transaction.atomic
def suspect_exclude(*, task, actor, evidence: list[dict], note: str = "") -> SuspectDecision:
    """Exclude a suspect task from the figures on the evidence shown (``[{"kind", "detail", …}]``).

    Side effects: a task-health issue of source *suspect* carrying the evidence (so the health
    toggle of every metric page, its exports and the API leave the task out), a SuspectDecision,
    audit entries on the task. Excluding an excluded task only records the new decision.
    """
    _ensure_triager(actor)
    kinds = sorted({str(item.get("kind", "")) for item in evidence} - {""})
    issue = _open_exclusion(task)
    if issue is None:
        issue = TaskHealthIssue.objects.create(
            task=task, source=TaskHealthIssue.Source.SUSPECT, evidence=evidence, opened_by=actor
        )
        _audit(
            attempt=None,
            task=task,
            actor=actor,
            field="task_health",
            before=None,
            after="opened: suspect task",
        )
    decision = SuspectDecision.objects.create(
        task=task,
        decision=SuspectDecision.Decision.EXCLUDED,
        kinds=kinds,
        note=note.strip()[:300],
        issue=issue,
        decided_by=actor,
    )
    _audit(attempt=None, task=task, actor=actor, field="suspect", before=None, after={"excluded": kinds})
    return decision


@transaction.atomic
def suspect_dismiss(*, task, actor, kinds: Iterable[str], note: str = "") -> SuspectDecision:
    """The task is fine: it leaves the suspect queue until evidence of another kind appears.

    Side effects: a SuspectDecision; an open exclusion of the task is resolved (the task counts in
    the figures again); audit entries on the task.
    """
    _ensure_triager(actor)
    kinds = sorted(set(kinds) - {""})
    issue = _open_exclusion(task)
    if issue is not None:
        _close(issue, actor=actor, resolution=note.strip()[:300] or "dismissed in the suspect-task queue")
        _audit(
            attempt=None,
            task=task,
            actor=actor,
            field="task_health",
            before="open: suspect task",
            after="resolved",
        )
    decision = SuspectDecision.objects.create(
        task=task,
        decision=SuspectDecision.Decision.DISMISSED,
        kinds=kinds,
        note=note.strip()[:300],
        decided_by=actor,
    )
    _audit(attempt=None, task=task, actor=actor, field="suspect", before=None, after={"dismissed": kinds})
    return decision


# --- Human verdicts on rubric answers (judge calibration) -----------------------------------------


def _yes_no(value: bool | None) -> str | None:
    return None if value is None else ("yes" if value else "no")


@transaction.atomic
def rubric_verdict_set(
    *, attempt: Attempt, position: int, human_answer: bool | None, actor
) -> RubricVerdict | None:
    """Record a human yes/no on the attempt's rubric answer at ``position`` (None clears it).

    The verdict keeps the question, the judge's answer and the judge version (content hash of the
    campaign's judge configuration), so calibration never mixes judge versions. Side effects: the
    RubricVerdict row; an audit entry when the human answer changes.
    """
    _ensure_triager(actor)
    rubrics = stored_rubrics(attempt_id=attempt.pk)
    if not 0 <= position < len(rubrics):
        raise ValidationError({"position": f"attempt {attempt.pk} has no rubric answer #{position + 1}"})
    question, answer = rubrics[position].question, rubrics[position].answer
    existing = RubricVerdict.objects.filter(attempt=attempt, position=position).first()
    before = existing.human_answer if existing else None
    if human_answer is None:
        if existing is not None:
            existing.delete()
    else:
        identity = judge_identity(attempt.campaign.judge)
        values = {
            "question": question,
            "judge_key": identity.key,
            "judge_answer": answer,
            "human_answer": bool(human_answer),
            "labelled_by": actor,
            "labelled_at": timezone.now(),
        }
        if existing is None:
            existing = RubricVerdict.objects.create(attempt=attempt, position=position, **values)
        elif existing.human_answer != human_answer:
            for name, value in values.items():
                setattr(existing, name, value)
            existing.save()
    if before != human_answer:
        _audit(
            attempt=attempt,
            actor=actor,
            field="rubric_verdict",
            # A plain string, not a dict: PostgreSQL's jsonb does not keep key order, so a dict
            # would read "human=yes, rubric=1" there and "rubric=1, human=yes" on SQLite.
            before=f"rubric {position + 1}: human {_yes_no(before)}" if before is not None else None,
            after=f"rubric {position + 1}: human {_yes_no(human_answer)}"
            if human_answer is not None
            else None,
        )
    return existing if human_answer is not None else None


# --- Suite validation: requests, per-task results (task health), issues it opens and closes ---


def _validation_label(name: str) -> Label:
    label, _ = Label.objects.get_or_create(
        name=name,
        defaults={"description": VALIDATION_LABELS[name], "flags_task_health": True, "position": 100},
    )
    return label


def suite_validation_request(*, suite: Suite, actor) -> SuiteValidation:
    """Queue a validation of every task of ``suite`` (operators only).

    Side effects: one SuiteValidation row (queued) and, after commit, a VALIDATE_SUITE_TASK message
    (run inline in Celery's eager mode). An already queued or running validation of the suite is
    returned instead of starting a second one.
    """
    if not user_has_role(actor, Role.OPERATOR):
        raise PermissionDenied("validating a suite needs the operator role")
    with transaction.atomic():
        Suite.objects.select_for_update().filter(pk=suite.pk).first()
        pending = SuiteValidation.objects.filter(
            suite=suite, status__in=[SuiteValidation.Status.QUEUED, SuiteValidation.Status.RUNNING]
        ).first()
        if pending is not None:
            return pending
        run = SuiteValidation.objects.create(suite=suite, requested_by=actor, total=suite.tasks.count())
        transaction.on_commit(lambda: celery_app.signature(VALIDATE_SUITE_TASK, args=(run.pk,)).apply_async())
    return run


def suite_validation_claim(*, run_id: int) -> SuiteValidation | None:
    """Move a queued validation to running (None when another worker has it, or it is over).

    Side effects: the row's status and start time.
    """
    claimed = SuiteValidation.objects.filter(pk=run_id, status=SuiteValidation.Status.QUEUED).update(
        status=SuiteValidation.Status.RUNNING, started_at=timezone.now()
    )
    return SuiteValidation.objects.select_related("suite").get(pk=run_id) if claimed else None


def suite_validation_start(*, suite: Suite, actor=None) -> SuiteValidation:
    """A validation run started right away (``validate_suite`` in the foreground). Side effects: one row."""
    return SuiteValidation.objects.create(
        suite=suite,
        requested_by=actor,
        status=SuiteValidation.Status.RUNNING,
        started_at=timezone.now(),
        total=suite.tasks.count(),
    )


@transaction.atomic
def task_validation_record(
    *, run: SuiteValidation | None, task: Task, validation: dict, actor=None
) -> TaskValidation:
    """Store one task's validation (tb_engine.validation.TaskValidation.to_dict()) as task health.

    Side effects: one TaskValidation row; the run's counts; task-health issues opened for an invalid
    or non-discriminating task or a verdict disagreement, and the ones validation opened before
    resolved when this validation no longer finds them.
    """
    runs = list(validation.get("runs") or [])
    disagreements = sum(1 for r in runs if r.get("disagree"))
    record = TaskValidation.objects.create(
        task=task,
        run=run,
        task_hash=task.content_hash,
        status=validation["status"],
        problems=list(validation.get("problems") or []),
        rubrics_note=validation.get("rubrics_note") or "",
        runs=runs,
        disagreements=disagreements,
        validated_by=actor,
    )
    found = set()
    if record.status == TaskValidation.Status.INVALID:
        found.add(INVALID_TASK)
    if record.status == TaskValidation.Status.NON_DISCRIMINATING:
        found.add(NON_DISCRIMINATING)
    if disagreements:
        found.add(VERDICT_DISAGREEMENT)
    if record.status != TaskValidation.Status.UNKNOWN:  # an infra error tells nothing about the task
        open_issues = {
            issue.title: issue
            for issue in TaskHealthIssue.objects.filter(
                task=task, resolved_at__isnull=True, label__name__in=list(VALIDATION_LABELS)
            ).select_related("label")
        }
        for name in found - set(open_issues):
            TaskHealthIssue.objects.create(task=task, label=_validation_label(name), opened_by=actor)
        for name in set(open_issues) - found:
            _close(open_issues[name], actor=actor, resolution=f"validation {record.pk} no longer finds it")
    if run is not None:
        locked = SuiteValidation.objects.select_for_update().get(pk=run.pk)
        counts = dict(locked.counts)
        counts[record.status] = counts.get(record.status, 0) + 1
        locked.counts = counts
        locked.disagreements += disagreements
        locked.save(update_fields=["counts", "disagreements"])
    return record


def suite_validation_finish(*, run: SuiteValidation, error: str = "") -> SuiteValidation:
    """Mark a validation done (or failed with ``error``). Side effects: the row's status and end time."""
    run.status = SuiteValidation.Status.FAILED if error else SuiteValidation.Status.DONE
    run.error = error
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])
    return run


def cluster_indexes_store(*, campaign_ids: Iterable[int]) -> int:
    """Store the default grouped queue (clean-looking failures, no filter) of each team of these campaigns.

    A team member sees the team's campaigns; that scope's cluster index, first page and campaign
    distribution are computed from the signature and count tables and stored (StoredFigure) at the
    scope's current stamp, so a fresh server process reads them in a bounded number of queries.
    Side effects: StoredFigure rows (nothing where they are current). Returns the number of scopes.
    """
    teams = set(Campaign.objects.filter(pk__in=list(campaign_ids)).values_list("team_id", flat=True))
    for team_id in sorted(teams):
        scope = list(Campaign.objects.filter(team_id=team_id).values_list("pk", flat=True))
        store_scope(campaign_ids=scope, filters=QueueFilters())
    return len(teams)
