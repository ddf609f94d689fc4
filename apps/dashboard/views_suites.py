"""Suite pages: every stored suite, one suite's tasks with their validation, and the operators' validate button.

Validation itself runs in a worker (apps.triage.validation, queued by apps.triage.services); the page
shows the latest request's progress and each task's latest result, linking to the task-health page
for the runs and both diffs.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.core.access import require_role, user_has_role
from apps.core.roles import Role
from apps.suites.models import Suite, Task
from apps.triage.selectors import latest_task_validations, suite_validation_runs
from apps.triage.services import suite_validation_request

TASKS_PER_PAGE = 100


@require_GET
@require_role(Role.VIEWER)
def suite_list(request):
    """Every stored suite with its task count and its tasks' validation counts (two queries)."""
    suites = list(Suite.objects.annotate(task_count=Count("tasks")).order_by("name"))
    counts: dict[int, dict[str, int]] = {}
    for row in Task.objects.order_by().values("suite_id", "validation").annotate(n=Count("id")):
        counts.setdefault(row["suite_id"], {})[row["validation"]] = row["n"]
    rows = [{"suite": suite, "counts": counts.get(suite.pk, {})} for suite in suites]
    return render(request, "dashboard/suites.html", {"rows": rows})


@require_GET
@require_role(Role.VIEWER)
def suite_detail(request, pk: int):
    """One suite: its tasks (paged) with validation status and latest validation result; validation runs."""
    suite = get_object_or_404(Suite, pk=pk)
    tasks = Task.objects.filter(suite=suite).select_related("domain").order_by("task_id")
    page = Paginator(tasks, TASKS_PER_PAGE).get_page(request.GET.get("page"))
    latest = latest_task_validations(task_pks=[task.pk for task in page.object_list])
    rows = [{"task": task, "latest": latest.get(task.pk)} for task in page.object_list]
    counts = dict(tasks.order_by().values_list("validation").annotate(n=Count("id")))
    runs = suite_validation_runs(suite=suite)
    context = {
        "suite": suite,
        "page": page,
        "rows": rows,
        "counts": counts,
        "runs": runs,
        "pending": next((r for r in runs if r.status in ("queued", "running")), None),
        "can_validate": user_has_role(request.user, Role.OPERATOR),
    }
    if request.htmx and request.GET.get("poll"):
        return render(request, "dashboard/suite.html#validation-runs", context)
    return render(request, "dashboard/suite.html", context)


@require_POST
@require_role(Role.OPERATOR)
def suite_validate(request, pk: int):
    """Queue a validation of every task of the suite (golden twice and do-nothing, on the real backend)."""
    suite = get_object_or_404(Suite, pk=pk)
    try:
        suite_validation_request(suite=suite, actor=request.user)
    except PermissionDenied:
        raise
    return redirect(reverse("dashboard:suite", args=[suite.pk]))
