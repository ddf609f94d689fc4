"""Writes for the core app: roles, teams, heartbeats. Keyword-only; side effects listed."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.text import slugify

from apps.core.models import Team, WorkerHeartbeat
from apps.core.roles import Role, parse_role


def assign_role(*, user, role: str | Role) -> None:
    """Add the user to the role's group. Side effect: creates the group if the migration has not."""
    group, _ = Group.objects.get_or_create(name=parse_role(role).value)
    user.groups.add(group)


def team_create(*, name: str, members=()) -> Team:
    """Create a team (slug from name) and add members. Side effect: one Team row + memberships."""
    team = Team.objects.create(name=name, slug=slugify(name))
    if members:
        team.members.add(*members)
    return team


def team_default_for(*, user) -> Team:
    """The user's first team; a user in no team joins the demo team (created if missing).

    Side effects: at most the demo Team row and one membership.
    """
    team = Team.objects.filter(members=user).order_by("pk").first()
    if team is None:
        team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": "Demo team"})
        team.members.add(user)
    return team


def record_worker_heartbeat(*, hostname: str) -> WorkerHeartbeat:
    """Note that `hostname` is alive now. Idempotent per call; side effect: upserts one row."""
    now = timezone.now()
    with transaction.atomic():
        heartbeat, created = WorkerHeartbeat.objects.select_for_update().get_or_create(
            hostname=hostname, defaults={"first_seen": now, "last_seen": now, "beats": 1}
        )
        if not created:
            # F() keeps concurrent beats of the same host from losing counts.
            WorkerHeartbeat.objects.filter(pk=heartbeat.pk).update(last_seen=now, beats=F("beats") + 1)
            heartbeat.refresh_from_db()
    return heartbeat


def worker_heartbeat_forget(*, hostname: str) -> int:
    """A worker known to be dead (its supervisor saw it exit) stops counting as alive at once.

    Side effect: deletes its heartbeat row (it is written again when the worker is ready).
    """
    deleted, _ = WorkerHeartbeat.objects.filter(hostname=hostname).delete()
    return deleted
