"""Roles and team visibility through the access helpers and role-protected views."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.core.access import require_role, roles_of, teams_for, user_has_role
from apps.core.models import WorkerHeartbeat
from apps.core.roles import Role

pytestmark = pytest.mark.django_db


def role_table(user) -> dict[str, bool]:
    return {role.value: user_has_role(user, role) for role in Role}


def test_user_has_role_operator_implies_triager_and_viewer(alice):
    assert role_table(alice) == {"viewer": True, "triager": True, "operator": True, "admin": False}


def test_user_has_role_viewer_has_only_viewer(bob):
    assert role_table(bob) == {"viewer": True, "triager": False, "operator": False, "admin": False}


def test_user_has_role_triager_is_viewer_but_not_operator(trish):
    assert role_table(trish) == {"viewer": True, "triager": True, "operator": False, "admin": False}


def test_user_has_role_without_role_has_nothing(charlie):
    assert role_table(charlie) == {"viewer": False, "triager": False, "operator": False, "admin": False}


def test_user_has_role_admin_group_implies_all(admin_user_persona):
    assert role_table(admin_user_persona) == {
        "viewer": True,
        "triager": True,
        "operator": True,
        "admin": True,
    }


def test_user_has_role_superuser_implies_all_without_groups(django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "root-pw")
    assert role_table(root) == {"viewer": True, "triager": True, "operator": True, "admin": True}


def test_user_has_role_inactive_user_has_nothing(bob):
    bob.is_active = False
    bob.save()
    assert role_table(bob)["viewer"] is False


def test_user_has_role_anonymous_has_nothing():
    from django.contrib.auth.models import AnonymousUser

    assert role_table(AnonymousUser()) == {
        "viewer": False,
        "triager": False,
        "operator": False,
        "admin": False,
    }


def test_user_has_role_unknown_role_raises_naming_valid_roles(bob):
    with pytest.raises(ValueError) as excinfo:
        user_has_role(bob, "owner")
    assert str(excinfo.value) == "unknown role 'owner': expected one of viewer, triager, operator, admin"


def test_require_role_unknown_role_fails_at_decoration():
    with pytest.raises(ValueError):
        require_role("superhero")


def test_roles_of_lists_effective_roles_lowest_first(alice):
    assert roles_of(alice) == [Role.VIEWER, Role.TRIAGER, Role.OPERATOR]


def test_role_groups_created_by_migration(django_user_model):
    from django.contrib.auth.models import Group

    assert sorted(Group.objects.values_list("name", flat=True)) == ["admin", "operator", "triager", "viewer"]


def test_teams_for_member_sees_only_own_team(alice, bob, team_a, team_b):
    assert list(teams_for(alice)) == [team_a]
    assert list(teams_for(bob)) == [team_a]


def test_teams_for_outsider_sees_no_team(charlie, team_a, team_b):
    assert list(teams_for(charlie)) == []


def test_teams_for_other_team_member_does_not_see_team_a(erin, team_a, team_b):
    assert list(teams_for(erin)) == [team_b]


def test_teams_for_admin_sees_every_team(admin_user_persona, team_a, team_b):
    assert list(teams_for(admin_user_persona)) == [team_a, team_b]


def test_workers_page_viewer_can_read(client, bob):
    client.force_login(bob)
    response = client.get(reverse("core:workers"))
    assert response.status_code == 200
    assert response.context["can_ping"] is False
    assert b"Ping workers" not in response.content


def test_workers_page_without_role_is_forbidden(client, charlie):
    client.force_login(charlie)
    response = client.get(reverse("core:workers"))
    assert response.status_code == 403
    assert b"this page needs the viewer role" in response.content


def test_ping_workers_operator_queues_heartbeat(client, alice, django_capture_on_commit_callbacks):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = client.post(reverse("core:ping_workers"))
    assert response.status_code == 302
    assert response["Location"] == reverse("core:workers")
    assert len(callbacks) == 1
    # Tests run tasks inline, so the heartbeat row exists once the commit callbacks ran.
    assert WorkerHeartbeat.objects.count() == 1


@pytest.mark.parametrize("persona", ["bob", "trish", "charlie"])
def test_ping_workers_below_operator_is_forbidden(client, request, persona):
    client.force_login(request.getfixturevalue(persona))
    response = client.post(reverse("core:ping_workers"))
    assert response.status_code == 403
    assert WorkerHeartbeat.objects.count() == 0


def test_ping_workers_rejects_get(client, alice):
    client.force_login(alice)
    response = client.get(reverse("core:ping_workers"))
    assert response.status_code == 405
