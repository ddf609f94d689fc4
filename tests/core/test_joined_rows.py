"""Reads written as SQL once per process (apps.core.joined_rows) give what the ORM queries they replace
give: the same rows, in the same order, with the same field values and the same loaded relations, and
the same visibility (members and admins see a team's rows, outsiders nothing)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.attempts.models import Attempt, AttemptProcessRisk
from apps.attempts.selectors.drilldown import visible_drilldown_attempt
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import campaigns_visible_to
from apps.core.access import get_visible_or_404
from apps.figures.selectors import figure_campaigns
from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.figures.conftest import run_campaign  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def _stored(row, path: tuple = ()) -> tuple:
    """A model row's loaded fields and its loaded relations' (recursively), as plain data; a relation
    back to a row already on the path (process_risk.attempt) is written as its model's name."""
    if row is None:
        return (None,)
    if any(row is seen for seen in path):
        return ("back to", type(row).__name__)
    fields = tuple(
        getattr(row, field.attname) for field in row._meta.concrete_fields if field.attname in row.__dict__
    )
    related = tuple(
        (name, _stored(other, (*path, row))) for name, other in sorted(row._state.fields_cache.items())
    )
    return (type(row).__name__, fields, related)


@pytest.fixture
def campaigns(make_campaign):
    """Two campaigns of team A, the second with a JSON field set (decoded by the SQL read too)."""
    first = make_campaign("golden", tasks=2, n=2)
    second = make_campaign("golden", tasks=1, n=1)
    Campaign.objects.filter(pk=second.pk).update(adaptive_options={"batch": 3, "names": ["a", "b"]})
    second.refresh_from_db()
    return [first, second]


@pytest.mark.parametrize("persona", ["alice", "bob", "trish", "admin_user_persona", "erin", "charlie"])
@pytest.mark.parametrize(
    ("with_price_sheets", "with_people"), [(True, True), (False, False), (True, False), (False, True)]
)
def test_figure_campaigns_equal_the_orm_read(request, campaigns, persona, with_price_sheets, with_people):
    user = request.getfixturevalue(persona)
    expected = campaigns_visible_to(user).order_by("-created_at", "-pk")
    if not with_people:
        expected = expected.select_related(None).select_related("agent", "suite")
    if with_price_sheets:
        expected = expected.select_related("price_sheet")

    read = figure_campaigns(user, with_price_sheets=with_price_sheets, with_people=with_people)

    assert [_stored(c) for c in read] == [_stored(c) for c in expected]
    with CaptureQueriesContext(connection) as queries:
        for campaign in read:
            campaign.agent, campaign.suite  # noqa: B018 (loaded with the row: no query)
    assert len(queries) == 0


def test_figure_campaigns_by_ids_and_for_a_superuser(django_user_model, campaigns, alice):
    root = django_user_model.objects.create_superuser("root", password="root-pw")
    first, second = campaigns

    assert [c.pk for c in figure_campaigns(root)] == [second.pk, first.pk]
    assert [c.pk for c in figure_campaigns(alice, ids=[first.pk, 10**9])] == [first.pk]
    assert figure_campaigns(alice, ids=[]) == []
    assert figure_campaigns(root, ids=iter([second.pk]))[0].adaptive_options == {
        "batch": 3,
        "names": ["a", "b"],
    }


@pytest.fixture
def finished(run_campaign):
    """A finished campaign of team A: two attempts with stored results."""
    return run_campaign("golden", tasks=1, n=2)


@pytest.mark.parametrize("persona", ["alice", "bob", "trish", "admin_user_persona"])
def test_drilldown_attempt_equals_the_orm_read(request, finished, persona):
    user = request.getfixturevalue(persona)
    attempt = Attempt.objects.filter(campaign=finished).order_by("pk").first()
    AttemptProcessRisk.objects.create(
        attempt=attempt,
        campaign=attempt.campaign,
        task=attempt.task,
        passed=False,
        findings=[],
        coverage="full",
    )
    orm = get_visible_or_404(
        Attempt.objects.select_related("campaign__agent", "task__domain", "process_risk").defer(
            "task__spec", "task__validation_detail", "task__domain__spec", "task__domain__policy"
        ),
        user,
        pk=attempt.pk,
    )

    read = visible_drilldown_attempt(user=user, pk=attempt.pk)

    assert _stored(read) == _stored(orm)
    assert read.task.get_deferred_fields() == orm.task.get_deferred_fields() == {"spec", "validation_detail"}
    assert read.process_risk.attempt is read


def test_drilldown_attempt_without_process_row_and_for_outsiders(finished, alice, erin, charlie):
    attempt = Attempt.objects.filter(campaign=finished).order_by("pk").last()

    read = visible_drilldown_attempt(user=alice, pk=attempt.pk)

    assert read.pk == attempt.pk
    with pytest.raises(AttemptProcessRisk.DoesNotExist):
        read.process_risk  # noqa: B018 (joined, absent: raises as after select_related)
    assert visible_drilldown_attempt(user=erin, pk=attempt.pk) is None
    assert visible_drilldown_attempt(user=charlie, pk=attempt.pk) is None
    assert visible_drilldown_attempt(user=alice, pk=attempt.pk + 10**6) is None


def test_campaign_rows_unknown_relation_is_refused(alice):
    from apps.campaigns.selectors import figure_campaign_rows

    with pytest.raises(ValueError, match="related must be among"):
        figure_campaign_rows(alice, related=("tasks",))
    assert Campaign.objects.count() == 0
