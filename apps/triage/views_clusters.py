"""Failure clusters (SPEC §8): the cluster page and the one action that labels, assigns or closes whole clusters.

Reads need the viewer role and only see the user's teams; the action needs the triager role (here
and again in the services) and only ever touches attempts of the user's queue.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponseBadRequest, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from apps.attempts.selectors.clusters import cluster_members
from apps.attempts.selectors.failure_queue import any_attempts
from apps.core.access import require_role, user_has_role
from apps.core.batches import in_slices
from apps.core.charts import chart
from apps.core.roles import Role
from apps.figures.selectors import figure_campaigns
from apps.triage import bulk_undo, charts, selectors, services
from apps.triage.models import AttemptReview, Label
from apps.triage.queue import MAX_VARIANTS
from apps.triage.selectors import Cluster, QueueFilters
from apps.triage.views import BULK_FEEDBACK_KEY, _assignees, _attempt_page, _queue_context, bulk_feedback

_SIGNATURE = re.compile(r"^[0-9a-f]{32}$")


def _related(cluster: Cluster, index) -> list[dict]:
    """Each related cluster with the one element that tells them apart, in plain words."""
    mine = dict(zip(cluster.elements, (item[5] if len(item) > 5 else "" for item in cluster.items)))
    out = []
    for signature in cluster.related:
        other = index.get(signature)
        if other is None:
            continue
        theirs = dict(zip(other.elements, (item[5] if len(item) > 5 else "" for item in other.items)))
        added = [theirs[e] for e in theirs.keys() - mine.keys()]
        removed = [mine[e] for e in mine.keys() - theirs.keys()]
        out.append({"cluster": other, "added": added, "removed": removed})
    return sorted(out, key=lambda r: (-r["cluster"].size, r["cluster"].signature))


@require_GET
@require_role(Role.VIEWER)
def cluster(request, signature: str):
    """One cluster: what its attempts did, where they come from (campaign distribution), relatives, its attempts."""
    if not _SIGNATURE.match(signature):
        raise Http404("no such failure cluster")
    filters = QueueFilters.from_query(request.GET).without_signature()
    # ?v= narrows the cluster to one value-pair sub-group (its stored signature forms).
    variants = tuple(int(v) for v in request.GET.getlist("v") if v.isdigit())[:MAX_VARIANTS]
    scoped = filters.with_signature(signature).with_variants(variants)
    attempts = selectors.queue_queryset(user=request.user, filters=scoped)
    rows = selectors.queue_rows(attempts)
    can_edit = user_has_role(request.user, Role.TRIAGER)
    context = {
        "filters": scoped,
        "query": scoped.querystring(),
        "labels": selectors.labels(),
        "can_edit": can_edit,
        "rows_url": reverse("triage:cluster", args=[signature]),
        **_attempt_page(rows, scoped, request.GET.get("page")),
    }
    if request.htmx:
        return render(request, "triage/cluster.html#triage-rows", context)
    index = selectors.cluster_index(user=request.user, filters=filters)
    found = index.get(signature)
    if found is None and not any_attempts(
        selectors.queue_queryset(user=request.user, filters=QueueFilters(scope="failed", signature=signature))
    ):
        raise Http404("no such failure cluster in your campaigns")
    shares = selectors.cluster_campaigns(user=request.user, filters=filters, signature=signature)
    row = (
        selectors.cluster_rows(user=request.user, filters=filters, index=index, page=[found])[0]
        if found
        else None
    )
    context.update(
        {
            "cluster": row.cluster if row else None,
            "row": row,
            "signature": signature,
            "index": index,
            "share": index.share(found) if found else None,
            "related": _related(found, index) if found else [],
            # From the signature rows (stored with the index's stamp) when the filters allow it.
            "pairs": selectors.cluster_value_pairs(
                user=request.user, filters=filters, index=index, signatures=[signature]
            ).get(signature),
            "variants": variants,
            "distribution": chart(charts.cluster_campaign_bars(shares)),
            "shares": shares,
            "scope_query": filters.querystring(),
            "broader": QueueFilters(scope="failed").querystring(),
            "assignees": _assignees(figure_campaigns(request.user)) if can_edit else [],
            **bulk_feedback(request),
        }
    )
    return render(request, "triage/cluster.html", context)


def _safe_next(request) -> str:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return ""


@require_POST
@require_role(Role.TRIAGER)
def cluster_act(request):
    """Label / unlabel, assign, mark reviewed or reopen every attempt of the ticked clusters (in the view's filters)."""
    filters = QueueFilters.from_query(QueryDict(request.POST.get("query", ""))).without_signature()
    signatures = [s for s in request.POST.getlist("s") if _SIGNATURE.match(s)]
    action = request.POST.get("action", "")
    # Only attempts of the user's queue with these filters: forged signatures of other teams match nothing.
    attempts = cluster_members(
        selectors.queue_queryset(user=request.user, filters=filters), signatures=signatures
    )
    label_id = None
    before = bulk_undo.review_states([a.pk for a in attempts])
    try:
        if action in ("label", "unlabel"):
            label = get_object_or_404(Label, pk=request.POST.get("label") or 0)
            label_id = label.pk
            changed = services.attempts_bulk_label(
                attempts=attempts, label=label, actor=request.user, add=action == "label"
            )
            done = f"{'Added' if action == 'label' else 'Removed'} label “{label.name}” {'to' if action == 'label' else 'from'}"
        elif action == "assign":
            assignee = _assignee_for(request, attempts)
            changed = services.attempts_bulk_assign(attempts=attempts, assignee=assignee, actor=request.user)
            done = f"Assigned {assignee.get_username() if assignee else 'nobody'} to"
        elif action in ("reviewed", "open"):
            status = AttemptReview.Status.REVIEWED if action == "reviewed" else AttemptReview.Status.OPEN
            changed = services.attempts_bulk_status(attempts=attempts, status=status, actor=request.user)
            done = "Marked reviewed" if action == "reviewed" else "Reopened"
        else:
            return HttpResponseBadRequest("action: choose label, unlabel, assign, reviewed or open")
    except ValidationError as error:
        return HttpResponseBadRequest("; ".join(error.messages))
    # Say what happened, with counts: the rows are swapped in place (htmx) or the page comes back.
    clusters = len(set(signatures))
    feedback = (
        f"{done} {changed} attempt{'s' if changed != 1 else ''} of {len(attempts)} in {clusters} "
        f"cluster{'s' if clusters != 1 else ''}"
        + (f" ({len(attempts) - changed} already so)" if changed < len(attempts) else "")
        + ". Every change is in each attempt's audit trail."
    )
    token = bulk_undo.undo_token(
        user=request.user,
        action=action,
        label_id=label_id,
        before=before,
        after=bulk_undo.review_states(list(before)),
    )
    return _after_bulk(request, filters, feedback, token)


def _after_bulk(request, filters: QueueFilters, feedback: str, undo: str | None):
    """The queue's rows swapped in place with the feedback (htmx), or back to the page the action
    came from, scrolled to the feedback (its anchor) instead of the top."""
    target = _safe_next(request)
    if request.htmx and not target:
        context = _queue_context(request, filters, "grouped", page_number=request.POST.get("page"))
        context.update(bulk_feedback=feedback, bulk_undo=undo)
        return render(request, "triage/queue.html#triage-rows", context)
    request.session[BULK_FEEDBACK_KEY] = {"text": feedback, "undo": undo}
    return redirect((target or f"{reverse('triage:queue')}?{filters.querystring()}") + "#bulk-feedback")


@require_POST
@require_role(Role.TRIAGER)
def cluster_undo(request):
    """Undo a bulk cluster action: the attempts it changed get their previous labels / assignee /
    status back (only attempts of the user's campaigns; the token is the user's own, for an hour)."""
    filters = QueueFilters.from_query(QueryDict(request.POST.get("query", ""))).without_signature()
    try:
        plan = bulk_undo.read_undo_token(request.POST.get("undo", ""), user=request.user)
        visible = selectors.queue_queryset(
            user=request.user, filters=QueueFilters(scope="failed"), ordered=False
        )
        attempts = [
            attempt
            for ids in in_slices(plan.attempt_ids, 1000)
            for attempt in visible.filter(pk__in=ids).only("id", "task_id", "campaign_id")
        ]
        restored = bulk_undo.undo(plan, attempts=attempts, actor=request.user)
    except ValidationError as error:
        return HttpResponseBadRequest("; ".join(error.messages))
    feedback = (
        f"Undone: {restored} attempt{'s' if restored != 1 else ''} have their previous "
        f"{bulk_undo.FIELD_OF_ACTION[plan.action]} back. The undo is in each attempt's audit trail too."
    )
    return _after_bulk(request, filters, feedback, None)


def _assignee_for(request, attempts):
    """The chosen assignee (None clears), who must be a triager of every team whose attempts are touched."""
    value = request.POST.get("assignee", "")
    if not value:
        return None
    teams = {a.campaign.team_id: a.campaign for a in attempts}
    for campaign in teams.values():
        if not any(str(user.pk) == value for user in selectors.triagers_of(campaign)):
            raise ValidationError(f"assignee: user {value} is not a triager of team {campaign.team}")
    people = {str(u.pk): u for c in teams.values() for u in selectors.triagers_of(c)}
    if value not in people:
        raise ValidationError(f"assignee: user {value} is not a triager of these attempts' teams")
    return people[value]
