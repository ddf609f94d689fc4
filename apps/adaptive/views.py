"""Calibration pages (per suite) and the estimate page of an adaptive campaign."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from apps.adaptive import charts
from apps.adaptive.selectors import adaptive_states, calibrations_visible_to
from apps.adaptive.services import engine_calibration
from apps.adaptive.tasks import CALIBRATE_TASK
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import campaign_progress, campaigns_visible_to
from apps.core.access import require_role, teams_for, user_has_role
from apps.core.charts import chart
from apps.core.roles import Role
from apps.suites.models import Suite
from apps.suites.selectors import suites_visible_to
from tb_engine.irt.calibration import CalibrationError
from thinkingbox_web.celery import app as celery_app


@require_GET
@require_role(Role.VIEWER)
def suite_list(request):
    """Every suite with the newest calibration of each of the user's teams."""
    suites = list(suites_visible_to(request.user).annotate(task_count=Count("tasks")).order_by("name"))
    latest: dict[int, list] = {}
    seen = set()
    for calibration in calibrations_visible_to(request.user):
        if (calibration.suite_id, calibration.team_id) not in seen:
            seen.add((calibration.suite_id, calibration.team_id))
            latest.setdefault(calibration.suite_id, []).append(calibration)
    rows = [{"suite": suite, "calibrations": latest.get(suite.pk, [])} for suite in suites]
    return render(request, "adaptive/suites.html", {"rows": rows})


def _flagged(cal) -> list[dict]:
    return [
        {
            "task_id": cal.task_ids[k],
            "domain": cal.task_domains[k],
            "discrimination": float(cal.discrimination[k]),
            "difficulty": float(cal.difficulty[k]),
        }
        for k in range(cal.n_tasks)
        if cal.discrimination[k] < 0
    ]


@require_role(Role.VIEWER)
def suite_calibration(request, pk: int):
    """A suite's calibrations (versions), the chosen one's scatter, flagged tasks and validation."""
    suite = get_object_or_404(suites_visible_to(request.user), pk=pk)
    if request.method == "POST":
        return _calibrate(request, suite)
    versions = list(calibrations_visible_to(request.user, suite=suite).prefetch_related("campaigns"))
    chosen = None
    wanted = request.GET.get("calibration")
    if wanted and wanted.isdigit():
        chosen = next((c for c in versions if c.pk == int(wanted)), None)
        if chosen is None:
            raise Http404("no such calibration")
    chosen = chosen or (versions[0] if versions else None)
    context = {
        "suite": suite,
        "versions": versions,
        "calibration": chosen,
        "can_calibrate": user_has_role(request.user, Role.OPERATOR),
        "teams": list(teams_for(request.user)),
    }
    if chosen is not None:
        cal = engine_calibration(chosen)
        campaigns = sorted(chosen.campaigns.all(), key=lambda c: c.pk)
        names = {str(c.pk): c for c in campaigns}
        validation = chosen.validation or None
        if validation:
            validation = {
                **validation,
                "rows": [{**row, "campaign_obj": names.get(row["campaign"])} for row in validation["rows"]],
            }
        context.update(
            model=cal,
            used_campaigns=campaigns,
            abilities=[
                {
                    "campaign": names.get(name),
                    "name": name,
                    "theta": list(cal.abilities[j]),
                    "consistency": float(cal.consistency[j]),
                }
                for j, name in enumerate(cal.campaigns)
            ],
            flagged=_flagged(cal),
            scatter=chart(charts.item_scatter_figure(cal)),
            validation=validation,
        )
    adaptive = list(
        campaigns_visible_to(request.user).filter(suite=suite, adaptive=True).order_by("-created_at")[:50]
    )
    states = adaptive_states(adaptive)
    context["adaptive"] = [{"campaign": c, "state": states.get(c.pk)} for c in adaptive]
    return render(request, "adaptive/suite.html", context)


def _calibrate(request, suite: Suite):
    if not user_has_role(request.user, Role.OPERATOR):
        raise PermissionDenied("calibrating needs the operator role")
    team = teams_for(request.user).filter(pk=request.POST.get("team") or 0).first()
    if team is None:
        messages.error(request, "Pick one of your teams to calibrate for.")
    else:
        try:
            # By name (the worker runs it; inline in eager mode), so a big suite never blocks a request.
            celery_app.signature(CALIBRATE_TASK, args=(suite.pk, team.pk, request.user.pk)).apply_async()
        except CalibrationError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Calibration of {suite.name} for {team.name} started.")
    return HttpResponseRedirect(reverse("adaptive:suite", args=[suite.pk]))


@require_GET
@require_role(Role.VIEWER)
def campaign_estimate(request, pk: int):
    """An adaptive campaign's estimated full-suite figures, never mixed with observed ones."""
    try:
        campaign = campaigns_visible_to(request.user).get(pk=pk)
    except Campaign.DoesNotExist:
        raise Http404("no such campaign") from None
    if not campaign.adaptive:
        raise Http404("not an adaptive campaign")
    state = adaptive_states([campaign]).get(campaign.pk)
    estimate = state.estimate if state is not None else None
    return render(
        request,
        "adaptive/campaign.html",
        {
            "campaign": campaign,
            "state": state,
            "estimate": estimate,
            "progress": campaign_progress(campaign=campaign),
            "options": campaign.adaptive_options,
        },
    )
