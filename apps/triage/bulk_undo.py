"""Undo of a bulk cluster action (issue 30, item 5): what exactly changed, and putting it back.

Before a bulk action the view reads the review state of the attempts it will touch; after it, the
attempts whose labels / assignee / status differ are exactly the ones the action changed. Their
previous values travel in a signed token (the user's id inside, valid for an hour), so the undo
restores precisely those attempts — through the same bulk services, so every restoring change is in
the audit trail too — and an attempt the action left alone is never touched by its undo.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core import signing
from django.core.exceptions import ValidationError

from apps.attempts.models import Attempt
from apps.triage import services
from apps.triage.models import AttemptReview, Label

_SALT = "triage.cluster-undo"
UNDO_MAX_AGE_S = 3600
FIELD_OF_ACTION = {
    "label": "labels",
    "unlabel": "labels",
    "assign": "assignee",
    "reviewed": "status",
    "open": "status",
}


@dataclass(frozen=True)
class ReviewState:
    labels: frozenset[int]
    assignee_id: int | None
    status: str

    def value(self, field: str, label_id: int | None):
        """The part of the state a bulk action of this field changes (for labels: carries the label)."""
        if field == "labels":
            return label_id in self.labels
        return self.assignee_id if field == "assignee" else self.status


# An attempt without a review row is open, unassigned and unlabelled.
_NO_REVIEW = ReviewState(frozenset(), None, AttemptReview.Status.OPEN)


def review_states(attempt_ids: Sequence[int]) -> dict[int, ReviewState]:
    """Each attempt's labels, assignee and status (two queries)."""
    reviews = AttemptReview.objects.filter(attempt_id__in=list(attempt_ids)).values_list(
        "pk", "attempt_id", "assignee_id", "status"
    )
    by_review = {pk: (attempt_id, assignee, status) for pk, attempt_id, assignee, status in reviews}
    labels: dict[int, set[int]] = defaultdict(set)
    for review_id, label_id in AttemptReview.labels.through.objects.filter(
        attemptreview_id__in=list(by_review)
    ).values_list("attemptreview_id", "label_id"):
        labels[review_id].add(label_id)
    states = dict.fromkeys(attempt_ids, _NO_REVIEW)
    for review_id, (attempt_id, assignee, status) in by_review.items():
        states[attempt_id] = ReviewState(frozenset(labels[review_id]), assignee, status)
    return states


def undo_token(
    *, user, action: str, label_id: int | None, before: dict[int, ReviewState], after: dict[int, ReviewState]
) -> str | None:
    """A signed token naming each attempt the action changed with its previous value; None if none changed."""
    field = FIELD_OF_ACTION[action]
    previous: dict[bool | int | str | None, list[int]] = defaultdict(list)
    for pk, old in before.items():
        new = after.get(pk, old)
        if old.value(field, label_id) != new.value(field, label_id):
            previous[old.value(field, label_id)].append(pk)
    if not previous:
        return None
    # (value, ids) pairs: JSON object keys would turn the values into strings.
    pairs = [[value, ids] for value, ids in previous.items()]
    payload = {"user": user.pk, "action": action, "label": label_id, "previous": pairs}
    return signing.dumps(payload, salt=_SALT, compress=True)


@dataclass(frozen=True)
class UndoPlan:
    action: str
    label_id: int | None
    previous: dict  # previous value -> attempt ids that had it

    @property
    def attempt_ids(self) -> list[int]:
        return sorted(pk for ids in self.previous.values() for pk in ids)


def read_undo_token(token: str, *, user) -> UndoPlan:
    """The plan in the token; ValidationError when it is forged, expired or someone else's."""
    try:
        payload = signing.loads(token, salt=_SALT, max_age=UNDO_MAX_AGE_S)
    except signing.SignatureExpired as error:
        raise ValidationError("this undo has expired (an hour after the action)") from error
    except signing.BadSignature as error:
        raise ValidationError("not an undo of yours") from error
    if payload.get("user") != user.pk or payload.get("action") not in FIELD_OF_ACTION:
        raise ValidationError("not an undo of yours")
    previous = {value: [int(pk) for pk in ids] for value, ids in payload["previous"]}
    return UndoPlan(payload["action"], payload.get("label"), previous)


def undo(plan: UndoPlan, *, attempts: list[Attempt], actor) -> int:
    """Put back the previous value of each attempt of the plan among `attempts` (the caller has
    limited them to the user's campaigns). Returns how many changed back. Side effects: the bulk
    services' (one audit entry per attempt changed, task-health sync for flagging labels)."""
    by_pk = {a.pk: a for a in attempts}
    changed = 0
    field = FIELD_OF_ACTION[plan.action]
    if field == "labels":
        label = Label.objects.filter(pk=plan.label_id or 0).first()
        if label is None:
            raise ValidationError("the label of this action no longer exists")
        for had_label, ids in plan.previous.items():
            group = [by_pk[pk] for pk in ids if pk in by_pk]
            changed += services.attempts_bulk_label(
                attempts=group, label=label, actor=actor, add=bool(had_label)
            )
        return changed
    if field == "status":
        for status, ids in plan.previous.items():
            group = [by_pk[pk] for pk in ids if pk in by_pk]
            changed += services.attempts_bulk_status(attempts=group, status=status, actor=actor)
        return changed
    people = get_user_model().objects.in_bulk([pk for pk in plan.previous if pk is not None])
    for assignee_id, ids in plan.previous.items():
        group = [by_pk[pk] for pk in ids if pk in by_pk]
        assignee = people.get(assignee_id) if assignee_id is not None else None
        if assignee_id is not None and assignee is None:
            raise ValidationError(f"the previous assignee (user {assignee_id}) no longer exists")
        changed += services.attempts_bulk_assign(attempts=group, assignee=assignee, actor=actor)
    return changed
