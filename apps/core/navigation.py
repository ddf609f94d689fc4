"""The main navigation, defined once. Apps point an entry at their page with register_nav_item."""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse


@dataclass(frozen=True)
class NavItem:
    key: str
    label: str
    # URL names tried in order; the first that resolves is the link. None resolving = "coming soon".
    url_names: tuple[str, ...]


_ITEMS: dict[str, NavItem] = {
    item.key: item
    for item in (
        NavItem("leaderboard", "Leaderboard", ("dashboard:leaderboard", "core:home")),
        NavItem("gap", "Gap", ("dashboard:gap",)),
        NavItem("cost", "Cost", ("dashboard:cost",)),
        NavItem("domains", "Domains", ("dashboard:domains",)),
        NavItem("tasks", "Tasks", ("dashboard:tasks",)),
        NavItem("compare", "Compare", ("dashboard:compare",)),
        NavItem("triage", "Triage", ("triage:queue",)),
        NavItem("campaigns", "Campaigns", ("campaigns:list",)),
        NavItem("training", "Training", ("training:pools",)),
    )
}


def register_nav_item(key: str, *, url_name: str, label: str | None = None) -> None:
    """Point nav entry `key` at `url_name` (an existing key keeps its place; a new key goes last)."""
    current = _ITEMS.get(key)
    if current is None:
        _ITEMS[key] = NavItem(key, label or key.title(), (url_name,))
    else:
        _ITEMS[key] = replace(current, label=label or current.label, url_names=(url_name, *current.url_names))


def nav_items() -> list[NavItem]:
    """The registered entries in display order."""
    return list(_ITEMS.values())


# Reversed nav URLs by (URL name, script prefix, URLconf): the same on every page of a process, and
# reversing a dozen names was a twentieth of a warm leaderboard's Python. None: the name does not resolve.
_reversed: dict[tuple[str, str, object], str | None] = {}


def _reverse_or_none(name: str) -> str | None:
    key = (name, get_script_prefix(), get_urlconf())
    if key not in _reversed:
        try:
            _reversed[key] = reverse(name)
        except NoReverseMatch:
            _reversed[key] = None
    return _reversed[key]


def resolve_nav(current_view_name: str | None) -> list[dict]:
    """Entries as dicts {key, label, url (None = not built yet), active} for the template."""
    entries = []
    for item in _ITEMS.values():
        url, matched_name = None, None
        for name in item.url_names:
            url = _reverse_or_none(name)
            if url is not None:
                matched_name = name
                break
        entries.append(
            {"key": item.key, "label": item.label, "url": url, "active": matched_name == current_view_name}
        )
    return entries
