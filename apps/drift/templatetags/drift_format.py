"""Drift's template filter: one watched figure's delta out of a comparison (drift/_delta.html)."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def delta_of(compared, metric: str):
    """A drift comparison's delta of one watched figure (pass_at_1 or all_n)."""
    return getattr(compared, metric, None) if compared is not None else None
