"""Heartbeat task and core services."""

from __future__ import annotations

import socket

import pytest

from apps.core.models import Team, WorkerHeartbeat
from apps.core.services import assign_role, record_worker_heartbeat, team_create
from apps.core.tasks import record_heartbeat

pytestmark = pytest.mark.django_db


def test_record_heartbeat_inline_falls_back_to_machine_hostname():
    # Run inline (no worker), the task has no worker node name and records the machine's name.
    result = record_heartbeat.delay()
    assert result.get() == socket.gethostname()
    heartbeat = WorkerHeartbeat.objects.get()
    assert (heartbeat.hostname, heartbeat.beats) == (socket.gethostname(), 1)


def test_record_worker_heartbeat_twice_updates_same_row():
    first = record_worker_heartbeat(hostname="celery@a")
    second = record_worker_heartbeat(hostname="celery@a")
    assert WorkerHeartbeat.objects.count() == 1
    assert second.beats == 2
    assert second.first_seen == first.first_seen
    assert second.last_seen >= first.last_seen


def test_team_create_sets_slug_and_members(make_user):
    member = make_user("mia")
    team = team_create(name="Model Evals EU", members=[member])
    assert (team.slug, list(team.members.all())) == ("model-evals-eu", [member])
    assert list(member.teams.all()) == [team]
    assert Team.objects.count() == 1


def test_assign_role_is_idempotent(make_user):
    user = make_user("rex")
    assign_role(user=user, role="triager")
    assign_role(user=user, role="triager")
    assert list(user.groups.values_list("name", flat=True)) == ["triager"]
