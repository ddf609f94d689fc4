"""The triage panel inside the attempt drilldown: queue position (j/k), labels (digits), note, assignee, status,
the attempt's failure cluster, human verdicts on its rubric answers (y/n), audit."""

from __future__ import annotations

from django.http import QueryDict

from apps.attempts.models import Attempt
from apps.attempts.selectors.reviewed_attempts import stored_rubrics
from apps.core.access import user_has_role
from apps.core.roles import Role
from apps.triage import selectors
from apps.triage.models import RubricVerdict
from apps.triage.selectors import QueueFilters


def queue_filters_for(*, queue: str, attempt: Attempt) -> QueueFilters:
    """The queue the reader came from (?queue=...), else the attempt's campaign's clean-looking failures."""
    if queue:
        return QueueFilters.from_query(QueryDict(queue))
    return QueueFilters(campaigns=(attempt.campaign_id,))


def rubric_answers(*, attempt: Attempt) -> list[dict]:
    """The attempt's rubric answers with any human verdict; the first unlabelled one is *current* (y/n keys)."""
    rubrics = stored_rubrics(attempt_id=attempt.pk)
    if not rubrics:
        return []
    verdicts = {v.position: v for v in RubricVerdict.objects.filter(attempt_id=attempt.pk)}
    answers, current = [], None
    for position, rubric in enumerate(rubrics):
        verdict = verdicts.get(position)
        if verdict is None and current is None:
            current = position
        answers.append(
            {
                "position": position,
                "question": rubric.question,
                "judge": rubric.answer,
                "human": verdict.human_answer if verdict else None,
                "current": False,
            }
        )
    if current is not None:
        answers[current]["current"] = True
    return answers


def panel_context(*, request, attempt: Attempt) -> dict:
    """Template context of triage/_panel.html for `attempt` (a constant number of queries)."""
    queue = request.GET.get("queue", "") or request.POST.get("queue", "")
    filters = queue_filters_for(queue=queue, attempt=attempt)
    review = selectors.review_of(attempt)
    applied = {label.pk for label in review.labels.all()} if review else set()
    answers = rubric_answers(attempt=attempt)
    cluster = None
    if attempt.signature:
        cluster = {
            "signature": attempt.signature,
            "others": selectors.others_like(user=request.user, attempt=attempt),
        }
    return {
        "triage": {
            "attempt": attempt,
            "review": review,
            "labels": selectors.labels(),
            "applied": applied,
            "queue": filters.querystring(),
            "neighbours": selectors.queue_neighbours(
                user=request.user, filters=filters, attempt_id=attempt.pk
            ),
            "audit": selectors.audit_trail(attempt=attempt),
            "can_edit": user_has_role(request.user, Role.TRIAGER),
            "triagers": selectors.triagers_of(attempt.campaign),
            "statuses": selectors.AttemptReview.Status.choices,
            "cluster": cluster,
            "rubrics": answers,
            "judge_note": (
                selectors.judge_notes(campaigns=[attempt.campaign]).get(attempt.campaign_id)
                if answers
                else None
            ),
        }
    }
