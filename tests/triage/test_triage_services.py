"""Triage services: audit trail, role gate, task health, bulk labels, taxonomy."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.triage import services
from apps.triage.models import AttemptReview, AuditEntry, Label, TaskHealthIssue
from tests.triage.conftest import T1, T2

pytestmark = pytest.mark.django_db

SEEDED = [
    "premature close",
    "wrong amount",
    "policy violation",
    "unrequested action",
    "missing documentation",
    "task ambiguous",
    "grader bug",
    "user-simulator error",
]


def _label(name: str) -> Label:
    return Label.objects.get(name=name)


def test_taxonomy_seed_has_eight_labels_on_digits_one_to_eight(db):
    labels = list(Label.objects.values_list("name", "shortcut", "flags_task_health"))

    assert [name for name, _, _ in labels] == SEEDED
    assert [shortcut for _, shortcut, _ in labels] == list(range(1, 9))
    assert sorted(name for name, _, flags in labels if flags) == ["grader bug", "task ambiguous"]


def test_toggle_label_writes_audit_entry_with_who_and_before_after(attempts_campaign, trish):
    campaign = attempts_campaign([(T1, 0, "fail", ["wrong_value"], True)])
    attempt = campaign.attempts.get()

    services.attempt_toggle_label(attempt=attempt, label=_label("wrong amount"), actor=trish)
    services.attempt_toggle_label(attempt=attempt, label=_label("premature close"), actor=trish)
    services.attempt_toggle_label(attempt=attempt, label=_label("wrong amount"), actor=trish)

    entries = list(
        AuditEntry.objects.filter(attempt=attempt)
        .order_by("pk")
        .values_list("actor__username", "field", "before", "after")
    )
    assert entries == [
        ("trish", "labels", [], ["wrong amount"]),
        ("trish", "labels", ["wrong amount"], ["premature close", "wrong amount"]),
        ("trish", "labels", ["premature close", "wrong amount"], ["premature close"]),
    ]


def test_unchanged_values_write_no_audit_entry(attempts_campaign, trish):
    attempt = attempts_campaign([(T1, 0, "fail", [], True)]).attempts.get()

    services.attempt_set_note(attempt=attempt, note="closed too early", actor=trish)
    services.attempt_set_note(attempt=attempt, note="  closed too early ", actor=trish)
    services.attempt_set_status(attempt=attempt, status="open", actor=trish)

    assert list(AuditEntry.objects.filter(attempt=attempt).values_list("field", "before", "after")) == [
        ("note", "", "closed too early")
    ]


def test_note_assignee_and_status_changes_are_audited(attempts_campaign, trish, alice):
    attempt = attempts_campaign([(T1, 0, "fail", [], True)]).attempts.get()

    services.attempt_set_note(attempt=attempt, note="agent refunded twice", actor=trish)
    services.attempt_assign(attempt=attempt, assignee=alice, actor=trish)
    services.attempt_set_status(attempt=attempt, status="reviewed", actor=alice)

    review = AttemptReview.objects.get(attempt=attempt)
    assert (review.note, review.assignee, review.status) == ("agent refunded twice", alice, "reviewed")
    trail = list(
        AuditEntry.objects.filter(attempt=attempt)
        .order_by("pk")
        .values_list("actor__username", "field", "before", "after")
    )
    assert trail == [
        ("trish", "note", "", "agent refunded twice"),
        ("trish", "assignee", None, "alice"),
        ("alice", "status", "open", "reviewed"),
    ]


@pytest.mark.parametrize("persona", ["bob", "charlie"])
def test_viewer_and_outsider_cannot_label_note_or_assign(attempts_campaign, persona, request):
    user = request.getfixturevalue(persona)
    attempt = attempts_campaign([(T1, 0, "fail", [], True)]).attempts.get()

    with pytest.raises(PermissionDenied):
        services.attempt_toggle_label(attempt=attempt, label=_label("grader bug"), actor=user)
    with pytest.raises(PermissionDenied):
        services.attempt_set_note(attempt=attempt, note="x", actor=user)
    with pytest.raises(PermissionDenied):
        services.attempt_set_status(attempt=attempt, status="reviewed", actor=user)

    assert AuditEntry.objects.count() == 0


def test_assignee_must_hold_triager_role(attempts_campaign, trish, bob):
    attempt = attempts_campaign([(T1, 0, "fail", [], True)]).attempts.get()

    with pytest.raises(ValidationError) as error:
        services.attempt_assign(attempt=attempt, assignee=bob, actor=trish)

    assert error.value.message_dict == {"assignee": ["bob does not have the triager role"]}


def test_unknown_status_is_refused_with_its_name(attempts_campaign, trish):
    attempt = attempts_campaign([(T1, 0, "fail", [], True)]).attempts.get()

    with pytest.raises(ValidationError) as error:
        services.attempt_set_status(attempt=attempt, status="done", actor=trish)

    assert error.value.message_dict == {"status": ["unknown status 'done': expected one of open, reviewed"]}


def test_grader_bug_label_opens_one_health_issue_and_removal_everywhere_closes_it(attempts_campaign, trish):
    campaign = attempts_campaign(
        [(T1, 0, "fail", [], True), (T1, 1, "fail", [], True), (T2, 0, "fail", [], True)]
    )
    first, second = campaign.attempts.filter(task__task_id=T1).order_by("index")
    bug = _label("grader bug")

    services.attempt_toggle_label(attempt=first, label=bug, actor=trish)
    services.attempt_toggle_label(attempt=second, label=bug, actor=trish)
    open_after_two = list(
        TaskHealthIssue.objects.filter(resolved_at__isnull=True).values_list("task__task_id", "label__name")
    )
    services.attempt_toggle_label(attempt=first, label=bug, actor=trish)
    still_open = TaskHealthIssue.objects.filter(resolved_at__isnull=True).count()
    services.attempt_toggle_label(attempt=second, label=bug, actor=trish)

    assert open_after_two == [(T1, "grader bug")]
    assert still_open == 1
    assert TaskHealthIssue.objects.filter(resolved_at__isnull=True).count() == 0
    assert TaskHealthIssue.objects.get().resolution == "label removed from every attempt"


def test_resolving_a_health_issue_is_audited_on_the_task(attempts_campaign, trish):
    attempt = attempts_campaign([(T1, 0, "fail", [], True)]).attempts.get()
    services.attempt_toggle_label(attempt=attempt, label=_label("task ambiguous"), actor=trish)
    issue = TaskHealthIssue.objects.get()

    services.health_issue_resolve(issue=issue, actor=trish, resolution="query reworded in v1.1")

    issue.refresh_from_db()
    assert (issue.is_open, issue.resolved_by, issue.resolution) == (False, trish, "query reworded in v1.1")
    entry = AuditEntry.objects.filter(attempt=None, field="task_health").get()
    assert (entry.task_id, entry.before, entry.after) == (
        attempt.task_id,
        "open: task ambiguous",
        "resolved: query reworded in v1.1",
    )


def test_bulk_label_changes_only_attempts_without_it_and_audits_each(attempts_campaign, trish):
    campaign = attempts_campaign([(T1, i, "fail", [], True) for i in range(3)])
    attempts = list(campaign.attempts.order_by("index"))
    label = _label("policy violation")
    services.attempt_toggle_label(attempt=attempts[0], label=label, actor=trish)

    changed = services.attempts_bulk_label(attempts=attempts, label=label, actor=trish)

    assert changed == 2
    assert AuditEntry.objects.filter(field="labels").count() == 3
    assert [
        sorted(a.review.labels.values_list("name", flat=True)) for a in campaign.attempts.order_by("index")
    ] == [["policy violation"]] * 3


def test_label_save_refuses_a_taken_digit_and_audits_new_labels(db, trish):
    with pytest.raises(ValidationError) as error:
        services.label_save(actor=trish, name="hallucinated id", shortcut=1)
    label = services.label_save(
        actor=trish, name="hallucinated id", shortcut=9, description="made up a record id"
    )

    assert error.value.message_dict == {"shortcut": ["digit 1 already toggles 'premature close'"]}
    assert (label.name, label.shortcut, label.position) == ("hallucinated id", 9, 9)
    entry = AuditEntry.objects.get(field="taxonomy")
    assert (entry.before, entry.after) == (
        None,
        {"name": "hallucinated id", "shortcut": 9, "flags_task_health": False},
    )
