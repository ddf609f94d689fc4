"""Dashboard pages. Each view starts with the viewer-role check and only reads visible campaigns.

One view serves the full page and, for htmx requests, only the named partial (its DOM id).
"""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.campaigns.selectors import campaigns_visible_to
from apps.core.access import require_role, user_has_role
from apps.core.roles import Role
from apps.dashboard import charts, reports
from apps.dashboard.forms import ExternalScoreForm, WhatIfPriceForm
from apps.dashboard.health import health_scope
from apps.dashboard.models import ExternalScore
from apps.dashboard.selectors import attempt_strip, dashboard_campaigns, filter_options
from apps.suites.models import Task
from tb_engine.metrics import spearman

TASKS_PER_PAGE = 50


def _render(request, template: str, partial: str, context: dict):
    return render(request, f"{template}#{partial}" if request.htmx else template, context)


def _selected_ids(request) -> list[int] | None:
    ids = [value for value in request.GET.getlist("c") if value.isdigit()]
    return [int(value) for value in ids] or None


def _chart(figure: dict) -> dict:
    return {"figure": figure, "config": charts.CONFIG}


@require_GET
@require_role(Role.VIEWER)
def leaderboard(request):
    """Campaign leaderboard over a task slice: pass@k, pass^k, all-N, gap, cost, coverage."""
    campaigns = dashboard_campaigns(request.user)
    domain, tag = request.GET.get("domain", ""), request.GET.get("tag", "")
    sort = request.GET.get("sort", "pass1")
    sort = sort if sort in reports.LEADERBOARD_SORTS else "pass1"
    descending = request.GET.get("dir", "desc" if sort != "name" else "asc") == "desc"
    # Triage: tasks with open health issues (grader bug, ambiguous) can be left out of every figure.
    health = health_scope(request.GET, campaigns)
    healthy = health.context()["healthy"]
    rows = reports.sort_rows(
        reports.leaderboard_rows(campaigns, domain=domain, tag=tag, exclude=health.exclude),
        key=sort,
        descending=descending,
    )
    benchmarks, correlations = _external_scores(rows)
    domains, tags = filter_options(campaigns)
    filter_query = urlencode(
        {key: value for key, value in (("domain", domain), ("tag", tag), ("healthy", healthy)) if value}
    )
    context = {
        "rows": rows,
        "domain": domain,
        "tag": tag,
        "sort": sort,
        "descending": descending,
        **health.context(),
        "export_query": f"{filter_query}&sort={sort}&dir={'desc' if descending else 'asc'}".lstrip("&"),
        "base_query": filter_query,
        "domains": domains,
        "tags": tags,
        "benchmarks": benchmarks,
        "correlations": correlations,
        "score_form": ExternalScoreForm(campaigns=campaigns),
        "can_edit": user_has_role(request.user, Role.OPERATOR),
    }
    return _render(request, "dashboard/leaderboard.html", "leaderboard-table", context)


def _external_scores(rows: list[dict]) -> tuple[list[str], dict[str, float | None]]:
    scores = ExternalScore.objects.filter(campaign__in=[row["campaign"].pk for row in rows])
    by_campaign: dict[int, dict[str, float]] = {}
    for score in scores:
        by_campaign.setdefault(score.campaign_id, {})[score.benchmark] = score.score
    benchmarks = sorted({name for entry in by_campaign.values() for name in entry})
    correlations = {}
    for row in rows:
        row["external"] = by_campaign.get(row["campaign"].pk, {})
    for name in benchmarks:
        pairs = [(row["m"]["pass_at_1"]["value"], row["external"].get(name)) for row in rows]
        correlations[name] = spearman([p[0] for p in pairs], [p[1] for p in pairs])
    return benchmarks, correlations


@require_POST
@require_role(Role.OPERATOR)
def external_score_add(request):
    """Store (or replace) a published benchmark score for a visible campaign."""
    form = ExternalScoreForm(request.POST, campaigns=list(campaigns_visible_to(request.user)))
    if form.is_valid():
        ExternalScore.objects.update_or_create(
            campaign=form.cleaned_data["campaign"],
            benchmark=form.cleaned_data["benchmark"],
            defaults={"score": form.cleaned_data["score"], "entered_by": request.user},
        )
    return redirect("dashboard:leaderboard")


@require_GET
@require_role(Role.VIEWER)
def gap(request):
    """pass@N against all-N per campaign, and pass^k curves for k = 1..N overall and per domain."""
    campaigns = dashboard_campaigns(request.user, ids=_selected_ids(request))
    health = health_scope(request.GET, campaigns)
    frames, stamps = reports.load_frames(campaigns, exclude=health.exclude)
    points, curves = [], {}
    for campaign in campaigns:
        figures = reports.campaign_figures(campaign, frames[campaign.pk], stamps[campaign.pk])
        points.append(
            {
                "name": campaign.name,
                "pass_at_n": figures["pass_at_n_observed"]["value"],
                "all_n": figures["all_n"]["value"],
                "gap": figures["gap_pp"]["value"],
                "campaign": campaign,
            }
        )
        curves[campaign] = reports.pass_hat_curves(campaign, frames[campaign.pk], stamps[campaign.pk])
    scatter = charts.gap_scatter(pd.DataFrame(points, columns=["name", "pass_at_n", "all_n"]))
    overall = [
        {"series": campaign.name, "k": k, "value": value}
        for campaign, by in curves.items()
        for k, value in enumerate(by["all"], start=1)
    ]
    domain_names = sorted({name for by in curves.values() for name in by if name != "all"})
    per_domain = []
    for position, name in enumerate(domain_names):
        rows = [
            {"series": campaign.name, "k": k, "value": value}
            for campaign, by in curves.items()
            for k, value in enumerate(by.get(name, []), start=1)
        ]
        per_domain.append(
            {
                "domain": name,
                "id": f"chart-passk-{position}",
                "chart": _chart(
                    charts.pass_hat_k_figure(
                        pd.DataFrame(rows, columns=["series", "k", "value"]), title=f"pass^k · {name}"
                    )
                ),
            }
        )
    context = {
        "points": points,
        "scatter": _chart(scatter),
        "overall": _chart(charts.pass_hat_k_figure(pd.DataFrame(overall, columns=["series", "k", "value"]))),
        "per_domain": per_domain,
        "all_campaigns": dashboard_campaigns(request.user),
        "selected": {c.pk for c in campaigns},
        **health.context(),
    }
    return _render(request, "dashboard/gap.html", "gap-body", context)


@require_http_methods(["GET", "POST"])
@require_role(Role.VIEWER)
def cost(request):
    """Cost per attempt, success and dependable task; tokens; overhead; price sheets; what-if prices.

    The what-if POST recomputes from stored token sums and renders a fragment; it never writes.
    """
    campaigns = dashboard_campaigns(request.user)
    health = health_scope(request.GET, campaigns)
    frames, stamps = reports.load_frames(campaigns, exclude=health.exclude)
    rows = []
    for campaign in campaigns:
        figures = reports.campaign_figures(campaign, frames[campaign.pk], stamps[campaign.pk])
        rows.append({"campaign": campaign, "m": figures, "tokens": figures["cost"]["tokens"]})
    if request.method == "POST":
        return _whatif(request, campaigns, frames, rows)
    table = pd.DataFrame(
        [
            {
                "name": r["campaign"].name,
                "agent_cost": r["m"]["cost"]["agent_cost"],
                "eval_cost": r["m"]["cost"]["eval_cost"],
                **{
                    k: r["tokens"].get(k, 0)
                    for k in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
                },
            }
            for r in rows
        ],
        columns=[
            "name",
            "agent_cost",
            "eval_cost",
            "input_tokens",
            "cached_input_tokens",
            "output_tokens",
            "reasoning_tokens",
        ],
    )
    sheets = {campaign.price_sheet_id: campaign.price_sheet for campaign in campaigns if campaign.price_sheet}
    context = {
        "rows": rows,
        "cost_chart": _chart(charts.cost_bars(table)),
        "token_chart": _chart(charts.token_bars(table)),
        "sheets": list(sheets.values()),
        "whatif_form": WhatIfPriceForm(campaigns=campaigns),
        **health.context(),
    }
    return render(request, "dashboard/cost.html", context)


def _whatif(request, campaigns, frames, rows):
    form = WhatIfPriceForm(request.POST, campaigns=campaigns)
    result = None
    if form.is_valid():
        campaign = form.cleaned_data["campaign"]
        row = next(r for r in rows if r["campaign"].pk == campaign.pk)
        result = reports.whatif_cost(
            frames[campaign.pk],
            form.prices(),
            all_n_count=row["m"]["all_n"]["count"],
            successes=row["m"]["cost"]["successes"],
            billed=row["m"]["cost"]["billed_attempts"],
        )
        result["campaign"], result["stored"] = campaign, row["m"]["cost"]
    return render(request, "dashboard/cost.html#whatif-result", {"whatif_form": form, "whatif": result})


@require_GET
@require_role(Role.VIEWER)
def domains(request):
    """Campaigns x domains heatmaps of pass@1, pass@N and all-N; per-domain deltas between two campaigns."""
    campaigns = dashboard_campaigns(request.user)
    health = health_scope(request.GET, campaigns)
    frames, stamps = reports.load_frames(campaigns, exclude=health.exclude)
    tables = {
        c.pk: reports.domain_table(c, frames[c.pk], stamps[c.pk]).set_index("domain") for c in campaigns
    }
    heatmaps = []
    for column, title in (
        ("pass_at_1", "pass@1"),
        ("pass_at_n", "pass@N observed"),
        ("all_n", "observed all-N"),
    ):
        grid = (
            pd.DataFrame({c.name: tables[c.pk][column] for c in campaigns}).T if campaigns else pd.DataFrame()
        )
        heatmaps.append(
            {
                "title": title,
                "id": f"chart-heat-{column}",
                "chart": _chart(charts.heatmap(grid, title=f"{title} by domain")),
            }
        )
    by_id = {c.pk: c for c in campaigns}
    a, b = _pair(request, by_id)
    deltas = []
    if a and b:
        joined = tables[a.pk].merge(tables[b.pk], left_index=True, right_index=True, suffixes=("_a", "_b"))
        for domain_name, row in joined.iterrows():
            deltas.append(
                {
                    "domain": domain_name,
                    **{m: (row[f"{m}_a"] - row[f"{m}_b"]) * 100 for m in ("pass_at_1", "pass_at_n", "all_n")},
                }
            )
    context = {
        "heatmaps": heatmaps,
        "campaigns": campaigns,
        "a": a,
        "b": b,
        "deltas": deltas,
        **health.context(),
    }
    return _render(request, "dashboard/domains.html", "domain-deltas", context)


def _pair(request, by_id: dict):
    """Campaigns ?a= and ?b= among the visible ones (None when absent or not visible)."""

    def pick(name):
        value = request.GET.get(name, "")
        return by_id.get(int(value)) if value.isdigit() else None

    return pick("a"), pick("b")


TASK_FILTERS = {
    "": "All tasks",
    "unreliable": "Solved at least once, not reliably",
    "never": "Never solved",
    "flaky": "Flaky between campaigns",
}


def _task_matches(cells: list[dict | None], kind: str) -> bool:
    present = [cell for cell in cells if cell is not None]
    if kind == "unreliable":
        return any(cell["c"] >= 1 for cell in present) and not any(cell["dependable"] for cell in present)
    if kind == "never":
        return all(cell["c"] == 0 for cell in present)
    if kind == "flaky":
        # Dependable in one campaign but not in another that ran the same task.
        return any(cell["dependable"] for cell in present) and not all(cell["dependable"] for cell in present)
    return True


@require_GET
@require_role(Role.VIEWER)
def tasks(request):
    """Tasks x campaigns grid of c/N, filterable and paged; rows link to the task page."""
    campaigns = dashboard_campaigns(request.user, ids=_selected_ids(request))
    frames, _ = reports.load_frames(campaigns)
    kind = request.GET.get("filter", "")
    kind = kind if kind in TASK_FILTERS else ""
    domain = request.GET.get("domain", "")
    grid: dict[str, dict] = {}
    for position, campaign in enumerate(campaigns):
        frame = reports.filter_frame(frames[campaign.pk], domain=domain)
        for task_pk, task_id, task_domain, n, c in zip(
            frame["task_pk"], frame["task_id"], frame["domain"], frame["n"], frame["c"]
        ):
            entry = grid.setdefault(
                task_id,
                {
                    "task_pk": int(task_pk),
                    "task_id": task_id,
                    "domain": task_domain,
                    "cells": [None] * len(campaigns),
                },
            )
            entry["cells"][position] = {
                "c": int(c),
                "n": int(n),
                "N": campaign.n_attempts,
                "rate": (c / n) if n else None,
                "dependable": bool(c == n == campaign.n_attempts),
            }
    rows = [grid[key] for key in sorted(grid) if _task_matches(grid[key]["cells"], kind)]
    page = Paginator(rows, TASKS_PER_PAGE).get_page(request.GET.get("page"))
    domains_list, _ = filter_options(campaigns)
    context = {
        "campaigns": campaigns,
        "page": page,
        "filter": kind,
        "filters": TASK_FILTERS,
        "domain": domain,
        "domains": domains_list,
        "total": len(rows),
        "selected_ids": _selected_ids(request) or [],
        "page_query": urlencode(
            [("c", pk) for pk in _selected_ids(request) or []] + [("filter", kind), ("domain", domain)]
        ),
    }
    return _render(request, "dashboard/tasks.html", "task-grid", context)


@require_GET
@require_role(Role.VIEWER)
def task_detail(request, pk: int):
    """One task: policy, initial-state patch, golden trajectory, validation, every attempt as a strip."""
    visible = campaigns_visible_to(request.user)
    task = (
        Task.objects.select_related("domain", "suite").filter(pk=pk, campaigns__in=visible).distinct().first()
    )
    if task is None:
        raise Http404("no such task in your campaigns")
    campaigns = dashboard_campaigns(request.user, ids=visible.filter(tasks=task).values_list("pk", flat=True))
    strips = attempt_strip(task=task, campaigns=campaigns)
    context = {"task": task, "spec": task.spec, "strips": [(c, strips[c.pk]) for c in campaigns]}
    return render(request, "dashboard/task.html", context)


@require_GET
@require_role(Role.VIEWER)
def compare(request):
    """Paired comparison of two campaigns: deltas with intervals, gained/lost tasks, P(A > B) per task."""
    campaigns = dashboard_campaigns(request.user)
    by_id = {c.pk: c for c in campaigns}
    a, b = _pair(request, by_id)
    result, error = None, ""
    health = health_scope(request.GET, [c for c in (a, b) if c])
    if a and b:
        frames, stamps = reports.load_frames([a, b] if a.pk != b.pk else [a], exclude=health.exclude)
        try:
            result = reports.comparison(a, b, frames, stamps)
        except ValueError as exc:
            error = str(exc)
    context = {"campaigns": campaigns, "a": a, "b": b, "result": result, "error": error, **health.context()}
    return _render(request, "dashboard/compare.html", "compare-body", context)


def get_visible_or_404(queryset, user, **lookup):
    """The object among rows whose campaign the user may see, else 404 (outsiders learn nothing)."""
    return get_object_or_404(queryset.filter(campaign__in=campaigns_visible_to(user)), **lookup)
