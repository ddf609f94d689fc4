"""Writes of triage. Every change to a review writes an AuditEntry (who, when, before -> after).

Services take keyword-only arguments and check the actor's role themselves, so the web views
and the REST API share one gate: labels, notes, assignment and status need the triager role.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.campaigns.models import Attempt
from apps.core.access import user_has_role
from apps.core.roles import Role
from apps.triage.models import AttemptReview, AuditEntry, Label, TaskHealthIssue


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


@transaction.atomic
def attempts_bulk_label(*, attempts: Iterable[Attempt], label: Label, actor, add: bool = True) -> int:
    """Add (or remove) one label on many attempts; one audit entry per attempt changed. Returns that count."""
    _ensure_triager(actor)
    changed = 0
    for attempt in attempts:
        review = _review(attempt)
        current = list(review.labels.all())
        has = any(item.pk == label.pk for item in current)
        if has == add:
            continue
        wanted = [*current, label] if add else [item for item in current if item.pk != label.pk]
        attempt_set_labels(attempt=attempt, labels=wanted, actor=actor)
        changed += 1
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
    open_issues = {
        issue.label_id: issue for issue in TaskHealthIssue.objects.filter(task=task, resolved_at__isnull=True)
    }
    for label_pk in used - set(open_issues):
        issue = TaskHealthIssue.objects.create(task=task, label_id=label_pk, attempt=attempt, opened_by=actor)
        _audit(
            attempt=attempt,
            actor=actor,
            field="task_health",
            before=None,
            after=f"opened: {issue.label.name}",
        )
    for label_pk in set(open_issues) - used:
        issue = open_issues[label_pk]
        _close(issue, actor=actor, resolution="label removed from every attempt")
        _audit(
            attempt=attempt,
            actor=actor,
            field="task_health",
            before=f"open: {issue.label.name}",
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
        before=f"open: {issue.label.name}",
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
    clash = (
        Label.objects.filter(shortcut=shortcut).exclude(pk=label.pk if label else None).first()
        if shortcut
        else None
    )
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
