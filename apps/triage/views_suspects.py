"""The suspect-task queue (exclude / dismiss), the judge page, and human verdicts on rubric answers.

Reads need the viewer role and only see the user's teams; writes need the triager role (here and
again in the services).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.attempts.selectors.process_risk import suspect_rules_of_golden_runs
from apps.core.access import require_role, user_has_role
from apps.core.roles import Role
from apps.figures.selectors import figure_campaigns
from apps.triage import selectors, services
from apps.triage.views import _attempt_for_edit, _panel_response


def _suspect_filters(query) -> tuple[str, str]:
    status = query.get("status", "open")
    kind = query.get("kind", "")
    return (
        status if status in selectors.SUSPECT_STATUSES else "open",
        kind if kind in selectors.SUSPECT_KINDS else "",
    )


@require_GET
@require_role(Role.VIEWER)
def suspects(request):
    """Tasks that are probably wrong (not the agents), each with its evidence; triagers exclude or dismiss them."""
    status, kind = _suspect_filters(request.GET)
    visible = figure_campaigns(request.user)
    rows = selectors.suspect_tasks(campaigns=visible, status=status, kind=kind)
    context = {
        "rows": rows,
        # Process rules a golden run broke (docs/process_risk.md): the rule or the golden trajectory is wrong.
        "suspect_rules": suspect_rules_of_golden_runs(
            campaign_ids=[c.pk for c in visible if c.is_harness_check]
        ),
        "status": status,
        "kind": kind,
        "statuses": selectors.SUSPECT_STATUSES,
        "kinds": selectors.SUSPECT_KINDS,
        "can_edit": user_has_role(request.user, Role.TRIAGER),
        "query": request.GET.urlencode(),
    }
    return render(request, "triage/suspects.html", context)


@require_POST
@require_role(Role.TRIAGER)
def suspect_decide(request, pk: int):
    """Exclude the task from the figures (a task-health issue) or dismiss it, on the evidence shown now."""
    found = [
        row
        for row in selectors.suspect_tasks(campaigns=figure_campaigns(request.user), status="all")
        if row.task.pk == pk
    ]
    if not found:
        raise Http404("no such suspect task in your campaigns")
    row, action, note = found[0], request.POST.get("action", ""), request.POST.get("note", "")
    if action == "exclude":
        services.suspect_exclude(
            task=row.task, actor=request.user, evidence=[e.as_dict() for e in row.evidence], note=note
        )
    elif action == "dismiss":
        services.suspect_dismiss(task=row.task, actor=request.user, kinds=row.kinds, note=note)
    else:
        return HttpResponseBadRequest("action: choose exclude or dismiss")
    status, kind = _suspect_filters(request.POST)
    query = f"status={status}" + (f"&kind={kind}" if kind else "")
    return redirect(f"{reverse('triage:suspects')}?{query}")


@require_GET
@require_role(Role.VIEWER)
def judges(request):
    """Every judge version of the visible campaigns with its agreement with human labels."""
    rows = selectors.judge_rows(campaigns=figure_campaigns(request.user))
    return render(request, "triage/judges.html", {"rows": rows, "min_labels": selectors.MIN_JUDGE_LABELS})


@require_POST
@require_role(Role.TRIAGER)
def rubric_verdict(request, pk: int, position: int):
    """Record the triager's own yes/no on one rubric answer of the attempt (answer=yes|no|clear)."""
    attempt = _attempt_for_edit(request, pk)
    answers = {"yes": True, "no": False, "clear": None}
    answer = request.POST.get("answer", "")
    if answer not in answers:
        return HttpResponseBadRequest("answer: choose yes, no or clear")
    try:
        services.rubric_verdict_set(
            attempt=attempt, position=position, human_answer=answers[answer], actor=request.user
        )
    except ValidationError as error:
        return HttpResponseBadRequest("; ".join(error.messages))
    return _panel_response(request, attempt)
