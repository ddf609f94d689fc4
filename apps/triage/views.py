"""Triage pages: the queue (htmx filters, paging, bulk labels), panel actions, summary, health, taxonomy.

Reads need the viewer role and only ever touch the user's teams' campaigns (404 otherwise);
writes need the triager role, enforced here and again in the services.
"""

from __future__ import annotations

from dataclasses import replace

from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponseBadRequest, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.attempts.models import Attempt
from apps.attempts.selectors.failure_queue import chosen_attempts
from apps.attempts.selectors.reviewed_attempts import attempts_for_panel, attempts_for_review
from apps.campaigns.selectors import campaigns_visible_to, diff_headline
from apps.core.access import get_visible_or_404, require_role, teams_for, user_has_role
from apps.core.redirects import safe_next
from apps.core.roles import Role
from apps.figures.selectors import figure_campaigns, filter_options
from apps.suites.models import Task
from apps.triage import selectors, services
from apps.triage.cluster_labels import cluster_labels
from apps.triage.forms import LabelForm
from apps.triage.models import AttemptReview, Label, TaskHealthIssue
from apps.triage.panel import panel_context
from apps.triage.selectors import CATEGORIES, SCOPES, QueueFilters
from tb_engine.faults import FAULT_KINDS
from tb_engine.process import FINDING_LABELS

PER_PAGE = selectors.QUEUE_PER_PAGE  # one list page; queue_neighbours pages the same way
# The queue's two views: one row per failure cluster, or one row per attempt. Without ?view= the
# queue is grouped when its attempts do not fit on one page (a screenful).
VIEWS = ("grouped", "list")


# The session key of a bulk action's feedback and undo, shown once by the page the action returns to.
BULK_FEEDBACK_KEY = "triage_bulk_feedback"


def bulk_feedback(request) -> dict:
    """The last bulk action's feedback and undo token for this page (once), as template context."""
    shown = request.session.pop(BULK_FEEDBACK_KEY, None) or {}
    return {"bulk_feedback": shown.get("text", ""), "bulk_undo": shown.get("undo")}


def _queue_context(
    request,
    filters: QueueFilters,
    view: str = "",
    page_number: str | None = None,
    campaigns: list | None = None,
) -> dict:
    """The rows part of the queue's context. ``campaigns``: the user's campaigns when the caller read
    them already (the full page shows them as filter options; reading 100 campaigns twice was a
    tenth of a warm grouped request's CPU)."""
    can_edit = user_has_role(request.user, Role.TRIAGER)
    context = {
        **bulk_feedback(request),
        "filters": filters,
        "query": filters.querystring(),
        "labels": selectors.labels(),
        "can_edit": can_edit,
        "rows_url": reverse("triage:queue"),
        "view_param": view if view in VIEWS else "",
    }
    index = None
    if filters.process:  # passing attempts have no failure cluster: always one row per attempt
        view = "list"
    if view not in VIEWS:
        view = "list"
        if not filters.signature:
            index = selectors.cluster_index(user=request.user, filters=filters)
            view = "grouped" if index.attempts > PER_PAGE else "list"
    page_number = page_number or request.GET.get("page")
    if view == "grouped":
        index = index or selectors.cluster_index(user=request.user, filters=filters)
        page = Paginator(index, PER_PAGE).get_page(page_number)
        scope = selectors.queue_queryset(user=request.user, filters=filters, ordered=False)
        signatures = [c.signature for c in page.object_list if c.signature]
        context.update(
            grouped=True,
            index=index,
            **url_prefixes(),
            page=page,
            rows=selectors.cluster_rows(
                user=request.user, filters=filters, index=index, page=page.object_list
            ),
            # The (result, golden) value pairs each cluster holds: opposite mistakes kept apart.
            pairs=selectors.cluster_value_pairs(
                user=request.user, filters=filters, index=index, signatures=signatures
            ),
            # The labels its attempts carry, so a bulk label shows in the row it changed.
            cluster_labels=cluster_labels(scope, signatures=signatures),
        )
        if can_edit:
            context["assignees"] = _assignees(
                campaigns
                if campaigns is not None
                else figure_campaigns(request.user, with_price_sheets=False)
            )
        return context
    rows = selectors.queue_rows(selectors.queue_queryset(user=request.user, filters=filters))
    context.update(grouped=False, **_attempt_page(rows, filters, page_number))
    return context


def _attempt_page(rows, filters: QueueFilters, page_number: str | None) -> dict:
    """One page of attempt rows (the flat queue, a cluster's attempts): the rows with their diff
    headline, the page numbers and the sortable header cells."""
    page = Paginator(rows, PER_PAGE).get_page(page_number)
    for attempt in page.object_list:
        attempt.headline = diff_headline(attempt.first_diff) if attempt.first_diff else ""
    return {
        "page": page,
        "page_range": page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1),
        "columns": _sort_columns(filters),
    }


QUEUE_COLUMNS = (
    ("campaign", "Campaign", ""),
    ("task", "Task", ""),
    ("index", "Run", "num"),  # the attempt's place among the task's N (1-based); "#" is its id
    ("termination", "Termination", ""),
    ("diff", "What went wrong", ""),
    ("", "Categories", ""),
    ("", "Labels", ""),
    ("assignee", "Assignee", ""),
    ("status", "Status", ""),
)


def _sort_columns(filters: QueueFilters) -> list[dict]:
    """Header cells of the queue: each sortable one links to the queue sorted by it (again: reversed)."""
    columns = []
    for key, title, css in QUEUE_COLUMNS:
        if not key:
            columns.append({"title": title, "css": css, "query": None, "aria_sort": None})
            continue
        active = filters.sort.removeprefix("-") == key
        descending = active and filters.sort.startswith("-")
        target = f"-{key}" if active and not descending else key
        columns.append(
            {
                "title": title,
                "css": css,
                "query": replace(filters, sort=target).querystring(),
                "aria_sort": ("descending" if descending else "ascending") if active else "none",
            }
        )
    return columns


@require_GET
@require_role(Role.VIEWER)
def queue(request):
    """Failed attempts of the chosen campaigns (clean-looking ones by default), grouped by failure
    signature or one row per attempt (?view=grouped|list; grouped when more than a page), filtered and paged."""
    filters = QueueFilters.from_query(request.GET)
    if request.htmx:
        return render(
            request,
            "triage/queue.html#triage-rows",
            _queue_context(request, filters, request.GET.get("view", "")),
        )
    # Read once for the filter options and the assignees; no price sheet on this page (decoding 100
    # campaigns' sheets is CPU for nothing).
    campaigns = figure_campaigns(request.user, with_price_sheets=False)
    context = _queue_context(request, filters, request.GET.get("view", ""), campaigns=campaigns)
    domains, _ = filter_options(campaigns)
    context.update(
        {
            "campaigns": campaigns,
            "domains": domains,
            "categories": CATEGORIES,
            "fault_kinds": FAULT_KINDS,
            "scopes": SCOPES,
            "process_kinds": list(FINDING_LABELS.items()),
            "statuses": AttemptReview.Status.choices,
            "assignees": context.get("assignees") or _assignees(campaigns),
            "no_campaigns": not campaigns,
            "teams": teams_for(request.user),
            "can_launch": user_has_role(request.user, Role.OPERATOR),
        }
    )
    return render(request, "triage/queue.html", context)


def url_prefixes() -> dict[str, str]:
    """Link prefixes for rows that would otherwise reverse a URL per link (hundreds per grouped page)."""
    return {
        "cluster_prefix": reverse("triage:cluster", args=["0" * 32]).removesuffix("0" * 32 + "/"),
        "attempt_prefix": reverse("dashboard:attempt", args=[0]).removesuffix("0/"),
    }


def _assignees(campaigns) -> list:
    people = {}
    for campaign in {c.team_id: c for c in campaigns}.values():
        for user in selectors.triagers_of(campaign):
            people[user.pk] = user
    return sorted(people.values(), key=lambda user: user.get_username())


@require_POST
@require_role(Role.TRIAGER)
def bulk_label(request):
    """Add or remove one label on the ticked queue rows; re-renders the rows fragment."""
    filters = QueueFilters.from_query(QueryDict(request.POST.get("query", "")))
    label = get_object_or_404(Label, pk=request.POST.get("label") or 0)
    ids = [int(value) for value in request.POST.getlist("a") if value.isdigit()]
    # Only rows of the user's queue can be labelled: a forged id of another team's attempt is ignored.
    attempts = chosen_attempts(
        selectors.queue_queryset(user=request.user, filters=QueueFilters(scope="failed")), ids=ids
    )
    services.attempts_bulk_label(
        attempts=attempts, label=label, actor=request.user, add=request.POST.get("action") != "remove"
    )
    if request.htmx:
        return render(
            request,
            "triage/queue.html#triage-rows",
            _queue_context(request, filters, request.POST.get("view", "")),
        )
    return redirect(f"{reverse('triage:queue')}?{filters.querystring()}")


def _attempt_for_edit(request, pk: int) -> Attempt:
    return get_visible_or_404(attempts_for_review(), request.user, pk=pk)


def _panel_response(request, attempt: Attempt):
    if request.htmx:
        return render(request, "triage/_panel.html", panel_context(request=request, attempt=attempt))
    queue = request.POST.get("queue", "")
    url = reverse("dashboard:attempt", args=[attempt.pk])
    return redirect(f"{url}?{_queue_param(queue)}" if queue else url)


def _queue_param(queue: str) -> str:
    params = QueryDict(mutable=True)
    params["queue"] = queue
    return params.urlencode()


@require_GET
@require_role(Role.VIEWER)
def attempt_panel(request, pk: int):
    """The drilldown's triage panel for one visible attempt (fetched by htmx after the page loads)."""
    attempt = get_visible_or_404(attempts_for_panel(), request.user, pk=pk)
    return render(request, "triage/_panel.html", panel_context(request=request, attempt=attempt))


@require_GET
@require_role(Role.VIEWER)
def task_health(request, pk: int):
    """Open health issues of one task of the user's campaigns, as the task page's badge fragment."""
    visible_tasks = campaigns_visible_to(request.user).values("tasks")
    issues = (
        selectors.open_health_issues(task_pks=[pk])
        if Task.objects.filter(pk=pk, pk__in=visible_tasks).exists()
        else None
    )
    if issues is None:
        raise Http404("no such task in your campaigns")
    return render(request, "triage/_task_health.html", {"issues": issues})


@require_POST
@require_role(Role.TRIAGER)
def attempt_label(request, pk: int):
    """Toggle one label on the attempt (the digit keys); ?set=1 with label=... replaces all labels."""
    attempt = _attempt_for_edit(request, pk)
    if request.POST.get("replace"):
        chosen = Label.objects.filter(pk__in=[v for v in request.POST.getlist("label") if v.isdigit()])
        services.attempt_set_labels(attempt=attempt, labels=chosen, actor=request.user)
    else:
        label = get_object_or_404(Label, pk=request.POST.get("label") or 0)
        services.attempt_toggle_label(attempt=attempt, label=label, actor=request.user)
    return _panel_response(request, attempt)


@require_POST
@require_role(Role.TRIAGER)
def attempt_note(request, pk: int):
    attempt = _attempt_for_edit(request, pk)
    services.attempt_set_note(attempt=attempt, note=request.POST.get("note", ""), actor=request.user)
    return _panel_response(request, attempt)


@require_POST
@require_role(Role.TRIAGER)
def attempt_assign(request, pk: int):
    attempt = _attempt_for_edit(request, pk)
    value = request.POST.get("assignee", "")
    assignee = None
    if value:
        assignee = next(
            (user for user in selectors.triagers_of(attempt.campaign) if str(user.pk) == value), None
        )
        if assignee is None:
            return HttpResponseBadRequest(
                f"assignee: user {value} is not a triager of team {attempt.campaign.team}"
            )
    services.attempt_assign(attempt=attempt, assignee=assignee, actor=request.user)
    return _panel_response(request, attempt)


@require_POST
@require_role(Role.TRIAGER)
def attempt_status(request, pk: int):
    attempt = _attempt_for_edit(request, pk)
    try:
        services.attempt_set_status(
            attempt=attempt, status=request.POST.get("status", ""), actor=request.user
        )
    except ValidationError as error:
        return HttpResponseBadRequest("; ".join(error.messages))
    return _panel_response(request, attempt)


@require_GET
@require_role(Role.VIEWER)
def summary(request):
    """Per campaign, among clean-looking failures: shares with wrong values, extra and missing effects; labels."""
    ids = [int(v) for v in request.GET.getlist("c") if v.isdigit()] or None
    campaigns = figure_campaigns(request.user, ids=ids)
    context = {
        "rows": selectors.campaign_triage_summary(campaigns=campaigns),
        "categories": CATEGORIES,
        "all_campaigns": figure_campaigns(request.user),
        "selected": {c.pk for c in campaigns},
    }
    return render(request, "triage/summary.html", context)


@require_GET
@require_role(Role.VIEWER)
def health(request):
    """Tasks with open health issues in the user's campaigns, validation findings (invalid, non-discriminating,
    verdict disagreements, with every run's verdicts and both diffs), and attempts whose verdicts disagree."""
    campaigns = figure_campaigns(request.user)
    task_pks = selectors.unhealthy_task_pks(campaigns=campaigns)
    context = {
        "issues": selectors.open_health_issues(task_pks=task_pks, campaigns=campaigns),
        "findings": selectors.validation_findings(),
        "disagreements": selectors.verdict_disagreements(campaigns=campaigns),
        "can_edit": user_has_role(request.user, Role.TRIAGER),
    }
    return render(request, "triage/health.html", context)


@require_POST
@require_role(Role.TRIAGER)
def health_resolve(request, pk: int):
    visible_tasks = campaigns_visible_to(request.user).values("tasks")
    issue = get_object_or_404(
        TaskHealthIssue.objects.select_related("task", "label"), pk=pk, task__in=visible_tasks
    )
    services.health_issue_resolve(
        issue=issue, actor=request.user, resolution=request.POST.get("resolution", "")
    )
    return redirect(safe_next(request, reverse("triage:health")))


@require_http_methods(["GET", "POST"])
@require_role(Role.VIEWER)
def taxonomy(request):
    """The label taxonomy; triagers add labels or edit one (?edit=<pk>)."""
    editing = Label.objects.filter(pk=request.GET.get("edit") or request.POST.get("pk") or 0).first()
    can_edit = user_has_role(request.user, Role.TRIAGER)
    form = LabelForm(instance=editing)
    if request.method == "POST":
        if not can_edit:
            return render(request, "core/403.html", status=403)
        form = LabelForm(request.POST, instance=editing)
        if form.is_valid():
            try:
                services.label_save(actor=request.user, label=editing, **form.service_arguments())
                return redirect("triage:taxonomy")
            except ValidationError as error:
                for name, messages in error.message_dict.items():
                    form.add_error(name if name in form.fields else None, messages)
    context = {"labels": selectors.labels(), "form": form, "editing": editing, "can_edit": can_edit}
    return render(request, "triage/taxonomy.html", context)
