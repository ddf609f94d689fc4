"""get_visible_or_404: rows of a team's campaigns are found for its members and admins, 404 for everyone else."""

from __future__ import annotations

import pytest
from django.http import Http404

from apps.attempts.models import TaskSummary
from apps.campaigns.models import Campaign
from apps.core.access import get_visible_or_404
from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def summary(make_campaign):
    """A row that belongs to a team-A campaign through its `campaign` foreign key."""
    campaign = make_campaign("golden", tasks=1, n=1)
    return TaskSummary.objects.create(campaign=campaign, task=campaign.tasks.get())


@pytest.mark.parametrize("persona", ["alice", "bob", "trish", "admin_user_persona"])
def test_members_and_admins_get_the_row(request, summary, persona):
    user = request.getfixturevalue(persona)

    assert get_visible_or_404(TaskSummary.objects.all(), user, pk=summary.pk) == summary


def test_superuser_without_team_gets_the_row(django_user_model, summary):
    root = django_user_model.objects.create_superuser("root", password="root-pw")

    assert get_visible_or_404(TaskSummary.objects.all(), root, pk=summary.pk) == summary


@pytest.mark.parametrize("persona", ["erin", "charlie"])
def test_outsiders_get_the_same_404_as_for_a_missing_row(request, summary, persona):
    user = request.getfixturevalue(persona)

    with pytest.raises(Http404):
        get_visible_or_404(TaskSummary.objects.all(), user, pk=summary.pk)
    with pytest.raises(Http404):
        get_visible_or_404(TaskSummary.objects.all(), request.getfixturevalue("bob"), pk=summary.pk + 1000)


def test_team_path_reaches_rows_that_own_the_team_directly(summary, bob, erin):
    campaign = summary.campaign

    assert get_visible_or_404(Campaign.objects.all(), bob, team_path="team", pk=campaign.pk) == campaign
    with pytest.raises(Http404):
        get_visible_or_404(Campaign.objects.all(), erin, team_path="team", pk=campaign.pk)
