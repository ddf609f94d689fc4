"""Training pages: the pool explorer (posteriors, zone, threshold controls) and the before/after report.

Each view starts with the viewer-role check and reads only campaigns the user may see; for htmx
requests it renders only the named partial (its DOM id).
"""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.core.access import require_role
from apps.core.charts import chart
from apps.core.roles import Role
from apps.figures.selectors import attempt_strip, figure_campaigns
from apps.suites.models import Task
from apps.training import charts
from apps.training.report import before_after, strip_rows
from apps.training.selectors import (
    BAND_HI,
    BAND_LO,
    SELECT_BAND,
    SELECT_ZONE,
    Selection,
    Thresholds,
    pool_sizes_by_q,
    selection_table,
)
from tb_engine.metrics import MetricsInputError

Q_GRID = [round(0.5 + 0.05 * i, 2) for i in range(10)] + [0.99]


def _render(request, template: str, partial: str, context: dict):
    return render(request, f"{template}#{partial}" if request.htmx else template, context)


def _pick(request, name: str, by_id: dict):
    value = request.GET.get(name, "")
    return by_id.get(int(value)) if value.isdigit() else None


def _float(request, name: str, default: float) -> tuple[float, str]:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return default, ""
    try:
        return float(raw), ""
    except ValueError:
        return default, f"{name}: {raw!r} is not a number; using {default:g}"


@require_GET
@require_role(Role.VIEWER)
def pools(request):
    """Per-task posteriors of a base campaign, zone or band membership, the optional reference campaign's
    solves, and the pool as thresholds move."""
    campaigns = figure_campaigns(request.user)
    campaign = _pick(request, "campaign", {c.pk: c for c in campaigns})
    errors = []
    values = {}
    for name, default in (("lo", Thresholds.lo), ("hi", Thresholds.hi), ("q", Thresholds.q)):
        values[name], problem = _float(request, name, default)
        errors += [problem] if problem else []
    thresholds = Thresholds(**values)
    band = {}
    for name, default in (("band_lo", BAND_LO), ("band_hi", BAND_HI)):
        band[name], problem = _float(request, name, default)
        errors += [problem] if problem else []
    method = SELECT_BAND if request.GET.get("select") == SELECT_BAND else SELECT_ZONE
    reference = _pick(request, "reference", {c.pk: c for c in campaigns})
    context = {
        "campaigns": campaigns,
        "campaign": campaign,
        "thresholds": thresholds,
        "method": method,
        "band": band,
        "reference": reference,
        "errors": errors,
        "rows": None,
    }
    if campaign is not None:
        try:
            selection = Selection(method, band["band_lo"], band["band_hi"], reference)
            table = selection_table(campaign, thresholds, selection)
        except MetricsInputError as exc:
            context["errors"] = errors + [str(exc)]
        else:
            context.update(
                rows=table.to_dict("records"),
                pool_size=int(table["selected"].sum()),
                unsolved_by_reference=int((~table["ref_solved"]).sum()),
                zone_chart=chart(charts.zone_probability_figure(table, q=thresholds.q)),
                size_chart=chart(charts.pool_size_figure(Q_GRID, pool_sizes_by_q(table, Q_GRID))),
                evaluation_only=campaign.suite.evaluation_only,
            )
    return _render(request, "training/pools.html", "pool-body", context)


@require_GET
@require_role(Role.VIEWER)
def report(request):
    """Before/after training: the article's table for both, per-domain deltas, tasks gained/lost, attempt strips."""
    campaigns = figure_campaigns(request.user)
    by_id = {c.pk: c for c in campaigns}
    base, trained = _pick(request, "base", by_id), _pick(request, "trained", by_id)
    context = {
        "campaigns": campaigns,
        "base": base,
        "trained": trained,
        "result": None,
        "error": "",
        "strip_task": None,
    }
    if base and trained:
        try:
            context["result"] = before_after(base=base, trained=trained)
        except ValueError as exc:
            context["error"] = str(exc)
        task_pk = request.GET.get("task", "")
        if context["result"] and task_pk.isdigit():
            task = Task.objects.filter(pk=int(task_pk), campaigns=base).filter(campaigns=trained).first()
            if task is not None:
                strips = attempt_strip(task=task, campaigns=[base, trained])
                context.update(strip_task=task, strips=strip_rows(strips, [base, trained]))
    return _render(request, "training/report.html", "report-body", context)
