"""Re-grade pages: the list of re-grades with a form to start one, and a re-grade's impact report.

Viewers read; an operator starts a re-grade (a preview) and applies it.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.campaigns.models import Campaign
from apps.core.access import get_visible_or_404, require_role, teams_for, user_has_role
from apps.core.roles import Role
from apps.regrade.models import RegradeRun
from apps.regrade.selectors import campaign_rows, figure_versions, impact_report, impact_workbook, runs_of
from apps.regrade.services import RegradeError, regrade_apply, regrade_preview

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@require_GET
@require_role(Role.VIEWER)
def regrade_list(request):
    teams = list(teams_for(request.user))
    context = {
        "runs": runs_of(team_ids=[t.pk for t in teams]),
        "teams": teams,
        "campaigns": list(
            Campaign.objects.filter(team__in=teams).select_related("team").order_by("team", "name")
        ),
        "can_operate": user_has_role(request.user, Role.OPERATOR),
    }
    return render(request, "regrade/list.html", context)


@require_POST
@require_role(Role.OPERATOR)
def regrade_start(request):
    ids = [int(v) for v in request.POST.getlist("campaign") if v.isdigit()]
    campaigns = list(Campaign.objects.filter(pk__in=ids, team__in=teams_for(request.user)))
    teams = {c.team_id for c in campaigns}
    if not campaigns or len(campaigns) != len(set(ids)) or len(teams) != 1:
        messages.error(request, "Choose one or more campaigns of one team.")
        return redirect("regrade:list")
    run = regrade_preview(campaign_ids=[c.pk for c in campaigns], team_id=teams.pop(), user=request.user)
    return redirect("regrade:detail", pk=run.pk)


def _visible_run(request, pk: int) -> RegradeRun:
    return get_visible_or_404(RegradeRun.objects.all(), request.user, team_path="team", pk=pk)


@require_GET
@require_role(Role.VIEWER)
def regrade_detail(request, pk: int):
    run = _visible_run(request, pk)
    report = impact_report(run)
    context = {
        "report": report,
        "run": run,
        "rows": campaign_rows(report),
        "flips": report["flips"][:500],
        "can_apply": user_has_role(request.user, Role.OPERATOR) and run.status == RegradeRun.Status.PREVIEW,
    }
    return render(request, "regrade/detail.html", context)


@require_POST
@require_role(Role.OPERATOR)
def regrade_apply_view(request, pk: int):
    run = _visible_run(request, pk)
    try:
        regrade_apply(run=run, user=request.user)
        messages.success(request, f"Re-grade #{run.pk} applied: the figures now use its verdicts.")
    except RegradeError as exc:
        messages.error(request, str(exc))
    return redirect("regrade:detail", pk=run.pk)


@require_GET
@require_role(Role.VIEWER)
def regrade_xlsx(request, pk: int):
    run = _visible_run(request, pk)
    response = HttpResponse(impact_workbook(impact_report(run)), content_type=XLSX)
    response["Content-Disposition"] = f'attachment; filename="regrade-{run.pk}.xlsx"'
    return response


@require_GET
@require_role(Role.VIEWER)
def campaign_versions(request, pk: int):
    """The campaign page's "figures from" line (htmx): its task and grader versions, re-grades included."""
    campaign = get_visible_or_404(Campaign.objects.all(), request.user, team_path="team", pk=pk)
    versions = figure_versions([campaign])[campaign.pk]
    return render(request, "regrade/_versions.html", {"versions": versions, "campaign": campaign})
