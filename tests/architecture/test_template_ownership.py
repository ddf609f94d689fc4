"""Each app's templates live under its own name and use only their own app's templates and tags, or core's.

The page frame (base layout, heads, partials more than one app shows, the formatting tags) is
core's; a page app that includes, extends or loads another page app's templates or tag library
would tie the two apps' pages together behind the import contracts' back. A static check over
every template directory of ours and every template name a module of ours spells out.
"""

from __future__ import annotations

import re
from pathlib import Path

from django.apps import apps as django_apps
from django.conf import settings
from django.template import engines

REPO = Path(__file__).resolve().parents[2]
CORE = "core"
# Django's auth views look their templates up under registration/; login is core's.
CONVENTIONAL_OWNERS = {"registration": CORE}

LITERAL_INCLUDE = re.compile(r"""\{%\s*(include|extends)\s+(["'])(?P<name>[^"']+)\2""")
ANY_INCLUDE = re.compile(r"\{%\s*(include|extends)\s")
LOAD = re.compile(r"\{%\s*load\s+(?P<names>[^%]+?)\s*%\}")
# A quoted template name in Python, with an optional "#partial" of django-template-partials.
TEMPLATE_NAME_IN_PYTHON = re.compile(r"""["'](?P<name>[\w./-]+\.html)(?:#[\w-]+)?["']""")


def our_apps() -> set[str]:
    return {config.label for config in django_apps.get_app_configs() if config.name.startswith("apps.")}


def template_roots() -> list[Path]:
    """The project's templates/ and every app's own templates/ directory."""
    roots = [Path(directory) for directory in settings.TEMPLATES[0]["DIRS"]]
    roots += sorted(path for path in (REPO / "apps").glob("*/templates") if path.is_dir())
    return roots


def our_templates() -> dict[str, Path]:
    """Template name ("dashboard/leaderboard.html") -> file, over every root."""
    return {
        path.relative_to(root).as_posix(): path
        for root in template_roots()
        for path in sorted(root.rglob("*.html"))
    }


def owner_of_template(name: str) -> str | None:
    """The app a template name belongs to: its first directory (None at the root)."""
    if "/" not in name:
        return None
    first = name.split("/", 1)[0]
    return CONVENTIONAL_OWNERS.get(first, first)


def owner_of_library(library: str) -> str | None:
    """The app whose templatetags define `library`; None for Django's and third-party libraries."""
    module = engines["django"].engine.libraries.get(library, "")
    parts = module.split(".")
    return parts[1] if parts[0] == "apps" and len(parts) > 2 else None


def loaded_libraries(source: str) -> list[str]:
    """Library names of every {% load %}: "a b" loads a and b; "x y from lib" loads from lib."""
    names = []
    for match in LOAD.finditer(source):
        words = match["names"].split()
        names += [words[-1]] if "from" in words else words
    return names


def crossings(template: str, source: str) -> list[str]:
    """What `template` includes, extends or loads that is neither its own app's nor core's."""
    own = owner_of_template(template)
    found = []
    for match in LITERAL_INCLUDE.finditer(source):
        if owner_of_template(match["name"]) not in {own, CORE}:
            verb = "includes" if match[1] == "include" else "extends"
            found.append(f"{template} {verb} {match['name']}")
    if len(ANY_INCLUDE.findall(source)) != len(LITERAL_INCLUDE.findall(source)):
        found.append(f"{template} includes or extends a name this check cannot read (not a literal)")
    for library in loaded_libraries(source):
        if owner_of_library(library) not in {None, own, CORE}:
            found.append(f"{template} loads {library} of apps.{owner_of_library(library)}")
    return found


def test_every_template_lives_under_its_apps_name():
    names = our_templates()
    assert names  # the walk found the templates
    misplaced = [name for name in names if owner_of_template(name) not in our_apps()]
    assert misplaced == []


def test_templates_include_extend_and_load_only_their_own_app_or_core():
    found = [
        crossing
        for name, path in our_templates().items()
        for crossing in crossings(name, path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_apps_name_only_their_own_or_cores_templates_in_python():
    found = []
    for path in sorted((REPO / "apps").rglob("*.py")):
        app = path.relative_to(REPO / "apps").parts[0]
        for match in TEMPLATE_NAME_IN_PYTHON.finditer(path.read_text(encoding="utf-8")):
            if owner_of_template(match["name"]) not in {app, CORE}:
                found.append(f"{path.relative_to(REPO)} names {match['name']}")
    assert found == []


def test_the_check_sees_a_crossing_of_each_kind():
    source = '{% extends "dashboard/page.html" %}{% load static core_format dashboard_tables %}'
    source += '{% include "core/_charts_head.html" %}{% include "triage/_x.html" %}{% include name %}'

    assert crossings("drift/page.html", source) == [
        "drift/page.html extends dashboard/page.html",
        "drift/page.html includes triage/_x.html",
        "drift/page.html includes or extends a name this check cannot read (not a literal)",
        "drift/page.html loads dashboard_tables of apps.dashboard",
    ]
    assert crossings("dashboard/page.html", '{% extends "core/base.html" %}{% load dashboard_tables %}') == []
    assert loaded_libraries("{% load partials core_format %}{% load term from glossary %}") == [
        "partials",
        "core_format",
        "glossary",
    ]
