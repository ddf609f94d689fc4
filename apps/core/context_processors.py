"""Template context shared by every page."""

from __future__ import annotations

from apps.core.access import roles_of
from apps.core.navigation import resolve_nav


def navigation(request) -> dict:
    """Main navigation and the signed-in user's roles (for the user menu)."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"nav_entries": [], "user_roles": []}
    match = getattr(request, "resolver_match", None)
    return {
        "nav_entries": resolve_nav(match.view_name if match else None),
        "user_roles": [role.value for role in roles_of(request.user)],
    }
