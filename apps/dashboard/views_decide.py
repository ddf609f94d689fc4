"""The decision aid page: a dependability target and a budget in, a recommendation with reasons out."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.core.access import require_role
from apps.core.roles import Role
from apps.dashboard.decide import DEFAULT_BUDGET, DEFAULT_TARGET_PERCENT, decide
from apps.figures import selectors as figures


def _number(raw: str | None, default: float, *, low: float, high: float) -> tuple[float, str]:
    """The field's value, or the default and a message when it is not a number in [low, high]."""
    if raw in (None, ""):
        return default, ""
    try:
        value = float(raw)
    except ValueError:
        return default, f"“{raw}” is not a number"
    if not low <= value <= high:
        return default, f"{raw} is outside {low:g} to {high:g}"
    return value, ""


@require_GET
@require_role(Role.VIEWER)
def decide_page(request):
    target, target_error = _number(request.GET.get("target"), DEFAULT_TARGET_PERCENT, low=0, high=100)
    budget, budget_error = _number(request.GET.get("budget"), DEFAULT_BUDGET, low=0, high=10**9)
    campaigns = [
        c for c in figures.figure_campaigns(request.user, with_price_sheets=False) if not c.is_harness_check
    ]
    decision = decide(campaigns, min_share=target / 100, budget=budget) if "target" in request.GET else None
    context = {
        "target": target,
        "budget": budget,
        "errors": [e for e in (target_error, budget_error) if e],
        "decision": decision,
    }
    return render(request, "dashboard/decide.html", context)
