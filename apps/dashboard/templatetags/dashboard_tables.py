"""The dashboard's own table helpers: the leaderboard's sortable headers, the task grid's colour
buckets and the noise table's lookup. Site-wide formatting is core's (`core_format`)."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from apps.core.glossary import term_link

register = template.Library()


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
        term_link(glossary) if glossary else "",
    )


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


@register.simple_tag
def grid_cells(cells) -> str:
    """A task-grid row's cells as HTML, built in one pass.

    The same markup as a `{% for %}` over the cells with `rate_class`, but a 50-row page of a
    100-campaign grid is 5,000 cells: through template nodes they cost most of a cold tasks page.
    Every value is an int or a fixed class name, so nothing needs escaping.
    """
    parts = []
    for cell in cells:
        if cell is None:
            parts.append('<td class="num"><span class="cell none">—</span></td>')
        else:
            parts.append(
                f'<td class="num"><span class="cell {rate_class(cell)}" title="{int(cell.c)} passes in '
                f'{int(cell.n)} done of N = {int(cell.N)}">{int(cell.c)}/{int(cell.N)}</span></td>'
            )
    return mark_safe("".join(parts))  # ints and fixed class names only: nothing to escape
