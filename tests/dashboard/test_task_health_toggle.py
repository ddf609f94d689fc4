"""The task-health toggle on every metric page: flagged tasks leave the figures only on request, and the page says so."""

from __future__ import annotations

import pytest

from tests.triage.conftest import T2, _seeded_labels, attempts_campaign, flagged  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

INCLUDED = "1 task on the health list</a> included in these figures"
EXCLUDED = "1 task with open health issues is excluded from these figures"


@pytest.mark.parametrize("page", ["gap", "cost", "domains", "compare"])
def test_every_metric_page_says_whether_flagged_tasks_are_in_its_figures(client, bob, flagged, page):
    a, b = flagged
    client.force_login(bob)
    query = f"a={a.pk}&b={b.pk}"

    included = client.get(f"/{page}/?{query}").content.decode()
    excluded = client.get(f"/{page}/?{query}&healthy=exclude").content.decode()

    assert (INCLUDED in included, EXCLUDED in included) == (True, False)
    assert (INCLUDED in excluded, EXCLUDED in excluded) == (False, True)
    assert 'name="healthy" value="exclude" id="filter-healthy" checked' in excluded


def test_gap_page_figures_follow_the_toggle(client, bob, flagged):
    client.force_login(bob)

    included = client.get("/gap/").context["points"]
    excluded = client.get("/gap/?healthy=exclude").context["points"]

    assert sorted((p["name"], p["all_n"]) for p in included) == [("Alpha", 0.5), ("Beta", 0.5)]
    assert sorted((p["name"], p["all_n"]) for p in excluded) == [("Alpha", 1.0), ("Beta", 1.0)]


def test_compare_and_domains_use_the_same_task_set_as_their_banner(client, bob, flagged):
    a, b = flagged
    client.force_login(bob)

    compared = client.get(f"/compare/?a={a.pk}&b={b.pk}&healthy=exclude").context["result"]
    deltas_form = client.get(f"/domains/?a={a.pk}&b={b.pk}&healthy=exclude").content.decode()

    assert [row.task_id for row in compared.per_task] == [T2]
    # The htmx delta form must keep the toggle, or the deltas would silently include the flagged task.
    assert '<input type="hidden" name="healthy" value="exclude">' in deltas_form
