"""The page frame's formatting: shares, intervals, points, money and counts ("—" when undefined), the
non-model badge, the non-discriminating task flag and the glossary popover. Loaded as `core_format` by
every app's templates."""

from __future__ import annotations

import json
import math

from django import template
from django.utils.html import format_html

from apps.core.glossary import term_link

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
def task_flag(validation):
    """The flag a non-discriminating task carries wherever a campaign's tasks are listed (given the task's
    ``validation``): campaigns run it unless told not to, so its passes need this caveat beside them."""
    if validation == "non_discriminating":
        return format_html(
            '<span class="badge task-flag" title="{}">non-discriminating</span>',
            "Suite validation: a do-nothing attempt passes this task, so a pass shows little",
        )
    return ""


@register.simple_tag
def term(slug: str, label: str = "?"):
    """A glossary popover (see apps.core.glossary.term_link)."""
    return term_link(slug, label)


@register.filter
def short_name(name: str, limit: int = 26) -> str:
    """A display name that fits a compact row: the full name is the element's title (hover)."""
    name = str(name)
    return name if len(name) <= int(limit) else name[: int(limit) - 1].rstrip() + "…"


@register.filter
def minus(value, other):
    """value − other for two numbers (None when either is missing)."""
    return None if _missing(value) or _missing(other) else float(value) - float(other)
