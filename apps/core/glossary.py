"""The glossary behind the frame's `term` popovers, registered by the app that serves the glossary page.

The definitions belong to the figures app and the page to the dashboard; both sit above core, so
core's template tags cannot import them. The dashboard registers both when it starts
(`DashboardConfig.ready`), the way apps register their navigation entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString


class GlossaryTerm(Protocol):
    # Read-only members: the figures app's terms are frozen dataclasses.
    @property
    def slug(self) -> str: ...  # the anchor on the glossary page (#slug)

    @property
    def name(self) -> str: ...

    @property
    def definition(self) -> str: ...


_terms: dict[str, GlossaryTerm] = {}
_page_url_name: list[str] = []  # [] until an app registers the glossary page


def register_glossary(*, terms: Mapping[str, GlossaryTerm], page_url_name: str) -> None:
    """Make `terms` (slug -> term) the popovers' definitions and `page_url_name` the page they link to."""
    _terms.clear()
    _terms.update(terms)
    _page_url_name[:] = [page_url_name]


def term_link(slug: str, label: str = "?") -> SafeString:
    """A glossary popover: a focusable link to the glossary entry whose definition shows on hover and
    on keyboard focus (CSS), and is the link's accessible description for screen readers."""
    if not _page_url_name:
        raise LookupError("no glossary registered: the app serving the glossary page calls register_glossary")
    entry = _terms[slug]
    return format_html(
        '<a class="term" href="{}#{}" data-tip="{}" aria-label="{}: {}">{}</a>',
        reverse(_page_url_name[0]),
        entry.slug,
        entry.definition,
        entry.name,
        entry.definition,
        label,
    )
