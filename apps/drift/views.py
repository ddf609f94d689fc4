"""Drift pages: every watch with the history of its watched figures; one watch's runs; set-up and actions."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.campaigns.selectors import campaigns_visible_to
from apps.core.access import require_role, teams_for, user_has_role
from apps.core.charts import chart
from apps.core.roles import Role
from apps.drift import charts, services
from apps.drift.forms import WatchForm
from apps.drift.models import Watch, WatchRun
from apps.drift.selectors import watch_runs, watch_views, watches_visible_to


def _get_watch_for_user(request, pk: int) -> Watch:
    """The watch if the user's teams may see it; 404 otherwise (outsiders learn nothing)."""
    watch = watches_visible_to(request.user).filter(pk=pk).first()
    if watch is None:
        raise Http404("no such watch")
    return watch


def _get_run_for_user(request, pk: int) -> WatchRun:
    run = (
        WatchRun.objects.select_related("watch", "campaign")
        .filter(pk=pk, watch__in=watches_visible_to(request.user))
        .first()
    )
    if run is None:
        raise Http404("no such run")
    return run


def _history_charts(key: str, runs) -> list[dict]:
    return [
        {
            "id": f"chart-{key}-{metric}",
            "chart": chart(charts.history_figure(runs, metric=metric, title=title)),
        }
        for metric, title in charts.METRICS
    ]


@require_GET
@require_role(Role.VIEWER)
def watch_list(request):
    """Every watch of the user's teams: schedule, baseline, last run, open alerts, history charts."""
    rows = watch_views(watches_visible_to(request.user))
    context = {
        "rows": [(row, _history_charts(f"watch-{row.watch.pk}", row.runs)) for row in rows],
        "can_operate": user_has_role(request.user, Role.OPERATOR),
    }
    return render(request, "drift/list.html", context)


@require_GET
@require_role(Role.VIEWER)
def watch_detail(request, pk: int):
    """One watch: history charts per watched figure, every run with Δ, flips, provider and alert."""
    watch = _get_watch_for_user(request, pk)
    runs = watch_runs(watch)
    context = {
        "watch": watch,
        "runs": list(reversed(runs)),
        "charts": _history_charts("history", runs),
        "can_operate": user_has_role(request.user, Role.OPERATOR),
        "can_acknowledge": user_has_role(request.user, Role.TRIAGER),
    }
    return render(request, "drift/detail.html", context)


@require_http_methods(["GET", "POST"])
@require_role(Role.OPERATOR)
def watch_create(request):
    """Set up a watch; its first run starts on the next tick of the beat schedule."""
    form = WatchForm(
        request.POST or None,
        teams=teams_for(request.user),
        campaigns=list(campaigns_visible_to(request.user).filter(status="done")),
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            watch = services.watch_create(
                name=data["name"],
                team=data["team"],
                owner=request.user,
                agent=data["agent"],
                suite=data["suite"],
                tasks=form.selected_tasks(),
                n_attempts=data["n_attempts"],
                interval_minutes=data["interval_minutes"],
                cron=data["cron"] or "",
                baseline=data["baseline"],
                probe_minutes=data["probe_minutes"],
                webhook=data["webhook"],
            )
        except (services.WatchInputError, services.ScheduleError) as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Watch {watch.name} created; its first run starts within a minute.")
            return HttpResponseRedirect(reverse("drift:detail", args=[watch.pk]))
    return render(request, "drift/create.html", {"form": form})


@require_POST
@require_role(Role.OPERATOR)
def watch_run_now(request, pk: int):
    watch = _get_watch_for_user(request, pk)
    try:
        run = services.watch_run_now(watch=watch)
    except services.WatchBusy as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run {run.number} started.")
    return HttpResponseRedirect(reverse("drift:detail", args=[pk]))


@require_POST
@require_role(Role.OPERATOR)
def watch_toggle(request, pk: int):
    watch = _get_watch_for_user(request, pk)
    services.watch_update(watch=watch, changes={"enabled": not watch.enabled})
    return HttpResponseRedirect(reverse("drift:detail", args=[pk]))


@require_POST
@require_role(Role.OPERATOR)
def watch_delete(request, pk: int):
    watch = _get_watch_for_user(request, pk)
    services.watch_delete(watch=watch)
    messages.success(request, f"Watch {watch.name} deleted; its runs' campaigns are kept.")
    return HttpResponseRedirect(reverse("drift:list"))


@require_POST
@require_role(Role.TRIAGER)
def run_acknowledge(request, pk: int):
    run = _get_run_for_user(request, pk)
    services.run_acknowledge(run=run, user=request.user)
    return HttpResponseRedirect(reverse("drift:detail", args=[run.watch_id]) + f"#run-{run.number}")


@require_POST
@require_role(Role.OPERATOR)
def run_baseline(request, pk: int):
    run = _get_run_for_user(request, pk)
    services.run_make_baseline(run=run)
    messages.success(request, f"Later runs are compared with run {run.number} ({run.campaign.name}).")
    return HttpResponseRedirect(reverse("drift:detail", args=[run.watch_id]))
