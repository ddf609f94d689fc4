"""Core pages: dashboard shell, worker status, health endpoint."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.db import transaction
from django.http import HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views import defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from apps.core.access import require_role, roles_of, teams_for, user_has_role
from apps.core.health import run_checks
from apps.core.models import WORKER_ALIVE_SECONDS, WorkerHeartbeat
from apps.core.roles import Role
from apps.core.tasks import record_heartbeat

# A worker is shown as alive if it beat within this window (beat runs the task every minute).


@require_GET
@never_cache
@login_not_required
def healthz(request):
    """JSON health for load balancers: 200 when every check passes, else 503."""
    checks = run_checks()
    healthy = all(check["ok"] for check in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "error", "checks": checks}, status=200 if healthy else 503
    )


@require_GET
@login_not_required
def favicon(request):
    """Browsers ask for /favicon.ico on pages that name no icon (the admin's): point them at ours."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


@require_GET
def home(request):
    """The landing page (later the leaderboard): who you are, your teams, what is coming.

    Any signed-in user may open it (users without a role are told to ask an admin); data shown
    is limited to the user's teams. Users with a role land on the dashboard's leaderboard.
    """
    if user_has_role(request.user, Role.VIEWER):
        try:
            return redirect(reverse("dashboard:leaderboard"))
        except NoReverseMatch:  # the dashboard app is not installed
            pass
    return render(
        request,
        "core/home.html",
        {"teams": teams_for(request.user).prefetch_related("members"), "roles": roles_of(request.user)},
    )


@require_GET
@require_role(Role.VIEWER)
def workers(request):
    """Celery worker heartbeats; htmx polls the table fragment."""
    now = timezone.now()
    heartbeats = list(WorkerHeartbeat.objects.all())
    for heartbeat in heartbeats:
        heartbeat.is_alive = heartbeat.age_seconds(now) <= WORKER_ALIVE_SECONDS
    context = {
        "heartbeats": heartbeats,
        "alive_seconds": WORKER_ALIVE_SECONDS,
        "can_ping": user_has_role(request.user, Role.OPERATOR),
    }
    template = "core/workers.html#heartbeat-rows" if request.htmx else "core/workers.html"
    return render(request, template, context)


@require_POST
@require_role(Role.OPERATOR)
def ping_workers(request):
    """Queue one heartbeat task; whichever worker takes it shows up in the table."""
    transaction.on_commit(record_heartbeat.delay)
    messages.success(request, "Heartbeat task queued; a live worker will appear below within seconds.")
    return redirect("core:workers")


# The error pages are core's frame (core/403.html, core/404.html); Django's own handlers look for
# 403.html and 404.html at the template root, so the root URLconf points at these two instead.
def permission_denied(request, exception):
    """403 for a role that does not allow the page (PermissionDenied anywhere)."""
    return defaults.permission_denied(request, exception, template_name="core/403.html")


def page_not_found(request, exception):
    """404 for an address that does not exist or belongs to another team (shown when DEBUG is off)."""
    return defaults.page_not_found(request, exception, template_name="core/404.html")
