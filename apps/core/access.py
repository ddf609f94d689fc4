"""Access helpers every view starts with: roles (hierarchical) and team visibility."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Protocol, TypeVar, cast

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.shortcuts import get_object_or_404

from apps.core.models import Team
from apps.core.roles import ROLE_ORDER, Role, parse_role

ROLE_RANK_ATTRIBUTE = "_tb_role_rank"


def role_rank(user) -> int:
    """Highest role rank the user holds (0 = no role); superusers rank as admin."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return 0
    if user.is_superuser:
        return Role.ADMIN.rank
    # Asked several times per page (the view's role, the navigation, the page's buttons): read once
    # per user object. A request loads its user afresh; changing groups through the user object
    # forgets it (apps.core.apps, m2m_changed).
    known = user.__dict__.get(ROLE_RANK_ATTRIBUTE)
    if known is not None:
        return known
    names = set(user.groups.values_list("name", flat=True))
    rank = max((role.rank for role in ROLE_ORDER if role.value in names), default=0)
    user.__dict__[ROLE_RANK_ATTRIBUTE] = rank
    return rank


def user_has_role(user, role: str | Role) -> bool:
    """True if the user holds `role` or a higher one (admin > operator > triager > viewer)."""
    return role_rank(user) >= parse_role(role).rank


def roles_of(user) -> list[Role]:
    """Every role the user effectively has, lowest first (for display)."""
    rank = role_rank(user)
    return [role for role in ROLE_ORDER if role.rank <= rank]


class RoleRequiredView(Protocol):
    """A view wrapped by require_role, which records the role it needs on it."""

    required_role: Role

    def __call__(self, request: Any, *args: Any, **kwargs: Any) -> Any: ...


def require_role(role: str | Role) -> Callable:
    """View decorator: anonymous users go to login, users without `role` get 403."""
    required = parse_role(role)

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not user_has_role(request.user, required):
                raise PermissionDenied(f"this page needs the {required.value} role")
            return view(request, *args, **kwargs)

        guarded = cast(RoleRequiredView, wrapper)
        guarded.required_role = required
        return guarded

    return decorator


def teams_for(user) -> QuerySet[Team]:
    """Teams whose campaigns the user may see: their own, or every team for admins."""
    if role_rank(user) >= Role.ADMIN.rank:
        return Team.objects.all()
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return Team.objects.none()
    return Team.objects.filter(members=user)


def team_condition_sql(user, column: str) -> tuple[str, list[Any]] | None:
    """`teams_for(user)` as an SQL condition on `column` (a team id column) with its parameters, for
    reads written as SQL (apps.campaigns.selectors.figure_campaign_rows); None: every team.

    The same three cases as teams_for, in the same order: keep the two together.
    """
    if role_rank(user) >= Role.ADMIN.rank:
        return None
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return "FALSE", []
    through = Team.members.through._meta
    return (
        f"{column} IN (SELECT {through.get_field('team').column} FROM {through.db_table} "
        f"WHERE {through.get_field('user').column} = %s)",
        [user.pk],
    )


ModelT = TypeVar("ModelT", bound=Model)


def get_visible_or_404(
    queryset: QuerySet[ModelT], user, *, team_path: str = "campaign__team", **lookup
) -> ModelT:
    """The object among the queryset's rows whose team (reached by `team_path`) the user may see, else 404.

    Outsiders get the same 404 as for a missing row, so they learn nothing; the default path fits
    every row that belongs to a campaign (attempts, reviews).
    """
    return get_object_or_404(queryset.filter(**{f"{team_path}__in": teams_for(user)}), **lookup)
