"""The triage panel inside the attempt drilldown: queue position (j/k), labels (digits), note, assignee, status, audit."""

from __future__ import annotations

from django.http import QueryDict

from apps.campaigns.models import Attempt
from apps.core.access import user_has_role
from apps.core.roles import Role
from apps.triage import selectors
from apps.triage.selectors import QueueFilters


def queue_filters_for(*, queue: str, attempt: Attempt) -> QueueFilters:
    """The queue the reader came from (?queue=...), else the attempt's campaign's clean-looking failures."""
    if queue:
        return QueueFilters.from_query(QueryDict(queue))
    return QueueFilters(campaigns=(attempt.campaign_id,))


def panel_context(*, request, attempt: Attempt) -> dict:
    """Template context of triage/_panel.html for `attempt` (a constant number of queries)."""
    queue = request.GET.get("queue", "") or request.POST.get("queue", "")
    filters = queue_filters_for(queue=queue, attempt=attempt)
    review = selectors.review_of(attempt)
    applied = {label.pk for label in review.labels.all()} if review else set()
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
        }
    }
