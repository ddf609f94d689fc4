"""The frame's glossary popovers (core's `term` tag) use the definitions the dashboard registers at start-up."""

from __future__ import annotations

from django.template import Context, Template
from django.urls import reverse

from apps.figures.selectors import GLOSSARY_BY_SLUG


def test_the_term_tag_links_to_the_dashboards_glossary_entry_with_its_definition():
    entry = GLOSSARY_BY_SLUG["alln"]

    html = Template('{% load core_format %}{% term "alln" "?" %}').render(Context())

    assert html == (
        f'<a class="term" href="{reverse("dashboard:glossary")}#alln" data-tip="{entry.definition}" '
        f'aria-label="{entry.name}: {entry.definition}">?</a>'
    )
