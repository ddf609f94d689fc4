"""The noise floor page (SPEC §9 per campaign, domain and figure; replicate sets) and the attempts planner."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.core.access import require_role
from apps.core.charts import chart
from apps.core.roles import Role
from apps.dashboard import charts
from apps.dashboard.forms import PlannerForm
from apps.figures import selectors as figures
from apps.triage.selectors import judge_note_rows, task_health_scope


def _render(request, template: str, partial: str, context: dict):
    return render(request, f"{template}#{partial}" if request.htmx else template, context)


@require_GET
@require_role(Role.VIEWER)
def noise(request):
    """Per campaign and figure: value, standard error and rerun floor over every task or one domain;
    replicate sets with their observed spread beside the floor."""
    campaigns = figures.figure_campaigns(request.user)
    health = task_health_scope(request.GET, campaigns)
    tables = figures.per_task_tables(campaigns, exclude=health.exclude)
    domains, _ = figures.filter_options(campaigns)
    scope = request.GET.get("domain", "")
    scope = scope if scope in domains else ""
    figures.preload_campaign_figures(tables, campaigns, "noise")
    rows = [(campaign, figures.campaign_noise(tables, campaign).scope(scope)) for campaign in campaigns]
    sets = figures.replicate_sets(campaigns, tables)
    context = {
        "rows": rows,
        "metrics": [(m, figures.METRIC_LABELS[m]) for m in figures.NOISE_METRICS],
        "domains": domains,
        "domain": scope,
        "sets": [
            {
                "set": s,
                "id": f"chart-replicates-{s.root.pk}",
                "chart": chart(charts.replicate_spread_figure(s)),
            }
            for s in sets
        ],
        "judge_note_rows": judge_note_rows(campaigns=campaigns),
        **health.context(),
    }
    return _render(request, "dashboard/noise.html", "noise-table", context)


@require_GET
@require_role(Role.VIEWER)
def planner(request):
    """How many tasks x attempts detect a target pass@1 difference, and what a campaign costs."""
    campaigns = figures.figure_campaigns(request.user)
    by_id = {c.pk: c for c in campaigns}
    form = PlannerForm(request.GET or None, campaigns=campaigns)
    plan, chosen = None, []
    if request.GET and form.is_valid():
        chosen = [by_id[pk] for pk in form.chosen_ids(request.GET.getlist("campaigns"))]
        tables = figures.per_task_tables(chosen)
        plan = figures.attempts_plan(
            chosen,
            tables,
            target=form.cleaned_data["target_pp"] / 100.0,
            mode=form.cleaned_data["mode"],
            tasks_available=figures.gradable_task_count(suite_id=chosen[0].suite_id),
        )
    context = {"form": form, "plan": plan, "chosen": chosen, "query": request.GET.urlencode()}
    return _render(request, "dashboard/planner.html", "plan-result", context)
