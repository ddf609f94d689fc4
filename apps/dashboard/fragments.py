"""Rendered page fragments every viewer shares, cached under a digest of everything they show.

A leaderboard table is the same HTML for every viewer who sees the same campaigns, figures, scores
and filters, and rendering it (20 campaigns × a dozen columns) costs more than computing its cached
figures. The key is a digest of the fragment's whole context — model rows by every stored field and
the related rows loaded with them, figures dataclasses field by field or, when they carry one, by their data version — so whatever changes what the
fragment shows (a recorded attempt, a rename, a new external score, another filter) changes the key:
the cache can be missing, never stale.
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
import threading
from collections.abc import Callable, Iterable
from typing import Any

from django.core.cache import cache
from django.db.models import Model, QuerySet
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

CACHE_SECONDS = 3600
VERSION = 1


# Types whose repr is their fingerprint: most of a context's leaves, answered before any other test.
_PLAIN = frozenset({str, int, float, bool, type(None)})
_STR = frozenset({str})


def _row_reader(model: type[Model]) -> Callable[[Model], tuple]:
    """Every stored field of a `model` row, read by one C call (operator.attrgetter) per row.

    A generator over `_meta.concrete_fields` per row was a tenth of a warm leaderboard's Python:
    20 campaigns with their agent and suite are ~1,000 attribute reads per request.
    """
    reader = _row_readers.get(model)
    if reader is None:
        names = [field.attname for field in model._meta.concrete_fields]
        getter = operator.attrgetter(*names)
        reader = (lambda row: (getter(row),)) if len(names) == 1 else getter  # a tuple either way
        _row_readers[model] = reader
    return reader


def _field_names(kind: type) -> tuple[str, ...]:
    """A dataclass type's field names (dataclasses.fields builds a fresh tuple on every call)."""
    names = _dataclass_fields.get(kind)
    if names is None:
        names = _dataclass_fields[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return names


_row_readers: dict[type, Callable[[Model], tuple]] = {}
_dataclass_fields: dict[type, tuple[str, ...]] = {}


def _fingerprint(value: Any, seen: dict[int, int]) -> Any:
    """`value` as nested plain data; `seen` numbers the model rows already read in this digest.

    The same row object met again (a campaign sits in the rows, the bands, the common ground and the
    judge notes) is written as a reference to its first reading instead of its fields once more.
    """
    kind = type(value)
    if kind in _PLAIN:
        return repr(value)
    if isinstance(value, Model):
        if id(value) in seen:
            return ("seen", seen[id(value)])
        seen[id(value)] = len(seen)
        fields = _row_reader(kind)(value)
        related = tuple(
            (name, _fingerprint(other, seen)) for name, other in sorted(value._state.fields_cache.items())
        )
        return (value._meta.label, fields, related)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _field_names(kind)
        version = str(getattr(value, "version", None) or "")
        if version:
            # A dataclass that names its data version (figures.LeaderboardRow): the version stands for
            # its figures; the model rows it carries (the campaign) are still read field by field.
            members = [getattr(value, name) for name in names]
            rows = tuple(_fingerprint(item, seen) for item in members if isinstance(item, Model))
            return (kind.__name__, version, rows)
        return (kind.__name__, tuple(_fingerprint(getattr(value, name), seen) for name in names))
    if isinstance(value, QuerySet):
        return ("queryset", tuple(_fingerprint(item, seen) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((repr(key), _fingerprint(item, seen)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        if set(map(type, value)) <= _STR:
            # Task ids and names (a common ground's 507 task ids): their repr is their fingerprint; one
            # call for the lot instead of a call per id on every leaderboard request (and the check
            # itself in C: a generator over 507 ids was a twentieth of the digest).
            return (type(value).__name__, repr(value))
        return (type(value).__name__, tuple(_fingerprint(item, seen) for item in value))
    if isinstance(value, (set, frozenset)):
        # A set's order is arbitrary: its members are read in full (own `seen`), so numbering stays stable.
        return ("set", tuple(sorted(repr(_fingerprint(item, {})) for item in value)))
    return repr(value)


def context_digest(context: dict[str, Any], *, leave_out: Iterable[str] = ()) -> str:
    """A digest of `context` (minus `leave_out`): equal digests render equal fragments."""
    skipped = set(leave_out)
    shown = {name: value for name, value in context.items() if name not in skipped}
    text = repr(_fingerprint(dict(sorted(shown.items())), {}))
    return hashlib.sha256(text.encode()).hexdigest()


def shared_fragment(
    request, template: str, partial: str, context: dict[str, Any], *, leave_out=()
) -> SafeString:
    """`template#partial` rendered with `context`, from the cache when another viewer saw the same.

    `leave_out` names context entries the fragment does not read (forms with a CSRF token, say);
    everything else enters the key. The fragment must not read the request itself.
    """
    key = f"fragment:v{VERSION}:{template}#{partial}:{context_digest(context, leave_out=leave_out)}"
    html = cache.get(key)
    if html is not None:
        return mark_safe(html)  # rendered by the template engine, autoescaped there
    # A cold process meeting a burst renders each fragment once: the other threads wait for it
    # (bench/dashboard_concurrency.py's cold burst rendered the same table in every thread).
    with _rendering_guard:
        lock = _rendering.setdefault(key, threading.Lock())
    with lock:
        html = cache.get(key)
        if html is None:
            html = str(render_to_string(f"{template}#{partial}", context, request))
            cache.set(key, html, CACHE_SECONDS)
    with _rendering_guard:
        if _rendering.get(key) is lock and not lock.locked():
            del _rendering[key]
    return mark_safe(html)  # rendered by the template engine, autoescaped there


_rendering: dict[str, threading.Lock] = {}
_rendering_guard = threading.Lock()
