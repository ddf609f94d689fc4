"""Number formatting for the dashboard: shares, intervals, points and money ("—" when undefined)."""

from __future__ import annotations

import json
import math

from django import template
from django.urls import reverse
from django.utils.html import format_html

from apps.figures.selectors import GLOSSARY_BY_SLUG

register = template.Library()
DASH = "—"


def _missing(value) -> bool:
    # "" is what a template hands over for a key that is not there (e.g. a run not evaluated yet).
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


@register.filter
def pct(value, digits: int = 1) -> str:
    """0.523 -> '52.3%'."""
    return DASH if _missing(value) else f"{float(value) * 100:.{int(digits)}f}%"


@register.filter
def interval(estimate) -> str:
    """An Estimate (value, lo, hi as shares) -> '[41.0, 63.2]' in percent; '' without an interval."""
    if estimate is None or _missing(estimate.lo) or _missing(estimate.hi):
        return ""
    return f"[{estimate.lo * 100:.1f}, {estimate.hi * 100:.1f}]"


@register.filter
def points(value) -> str:
    """A difference already in points -> '+12.5 pp'."""
    return DASH if _missing(value) else f"{float(value):+.1f} pp"


@register.filter
def share_points(value) -> str:
    """A difference of shares (0..1) -> '+12.5 pp'."""
    return DASH if _missing(value) else f"{float(value) * 100:+.1f} pp"


@register.filter
def share_pp(value) -> str:
    """A size (not a signed change) of shares in points -> '4.2 pp' (noise floors, standard errors)."""
    return DASH if _missing(value) else f"{float(value) * 100:.1f} pp"


@register.filter
def money(value) -> str:
    """USD with enough digits for per-attempt cents; '—' for undefined (e.g. no dependable task)."""
    if _missing(value):
        return DASH
    value = float(value)
    return f"${value:,.2f}" if abs(value) >= 100 else f"${value:.4f}"


@register.filter
def tokens(value) -> str:
    return DASH if _missing(value) else f"{float(value):,.0f}"


@register.filter
def thousands(value) -> str:
    """1235 -> '1,235' (queue positions, counts)."""
    return DASH if _missing(value) else f"{int(value):,}"


@register.filter
def get(mapping, key):
    """mapping[key] in templates (None when absent)."""
    if mapping is None:
        return None
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def pretty_json(value) -> str:
    """Indented JSON for arguments and results (autoescaped by the template like any text)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.simple_tag
def sim_badge(agent):
    """The label every agent that is not a model carries wherever it appears (harness check or simulation)."""
    if agent is not None and agent.badge_text:
        return format_html(
            '<span class="badge sim" title="{}">{}</span>', agent.get_kind_display(), agent.badge_text
        )
    return ""


@register.simple_tag
def term(slug: str, label: str = "?"):
    """A glossary popover: a focusable link to the glossary entry whose definition shows on hover and
    on keyboard focus (CSS), and is the link's accessible description for screen readers."""
    entry = GLOSSARY_BY_SLUG[slug]
    return format_html(
        '<a class="term" href="{}#{}" data-tip="{}" aria-label="{}: {}">{}</a>',
        reverse("dashboard:glossary"),
        entry.slug,
        entry.definition,
        entry.name,
        entry.definition,
        label,
    )


@register.simple_tag
def sort_th(
    label: str, key: str, current: str, descending: bool, base_query: str, glossary: str = "", title: str = ""
):
    """A sortable column header: htmx swaps only the table; clicking the sorted column flips direction.
    `glossary` names the term whose plain definition the header's popover shows."""
    direction = "asc" if key == current and descending else "desc"
    arrow = (" ↓" if descending else " ↑") if key == current else ""
    href = f"?{base_query}&sort={key}&dir={direction}" if base_query else f"?sort={key}&dir={direction}"
    sorted_state = ("descending" if descending else "ascending") if key == current else "none"
    return format_html(
        '<th class="num" scope="col" aria-sort="{}"{}><a href="{}" hx-get="{}" hx-target="#leaderboard-table" '
        'hx-swap="outerHTML" hx-push-url="true" class="{}">{}{}</a>{}</th>',
        sorted_state,
        format_html(' title="{}"', title) if title else "",
        href,
        href,
        "sorted" if key == current else "",
        label,
        arrow,
        term(glossary) if glossary else "",
    )


@register.filter
def short_name(name: str, limit: int = 26) -> str:
    """A display name that fits a compact row: the full name is the element's title (hover)."""
    name = str(name)
    return name if len(name) <= int(limit) else name[: int(limit) - 1].rstrip() + "…"


@register.filter
def rate_class(cell) -> str:
    """Colour bucket of a task-grid cell (c/n): r0 (never) .. r4 (dependable)."""
    if cell is None or cell.rate is None:
        return "none"
    if cell.dependable:
        return "r4"
    rate = cell.rate
    return "r0" if rate == 0 else ("r1" if rate < 0.34 else ("r2" if rate < 0.67 else "r3"))


@register.filter
def metric_noise(scope_metrics, key: str):
    """The MetricNoise of `key` among a scope's metrics (None when the figure cannot be estimated)."""
    return next((m for m in scope_metrics or () if m.metric == key), None)


@register.filter
def delta_of(compared, metric: str):
    """A drift comparison's delta of one watched figure (pass_at_1 or all_n)."""
    return getattr(compared, metric, None) if compared is not None else None


@register.filter
def minus(value, other):
    """value − other for two numbers (None when either is missing)."""
    return None if _missing(value) or _missing(other) else float(value) - float(other)
