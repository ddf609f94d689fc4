"""Choosing a model: compare verdict, differences-only, cost delta, task links; glossary; colours."""

from __future__ import annotations

import pytest

from apps.core.charts import PALETTE, campaign_colour

pytestmark = pytest.mark.django_db

T1, T2, T3 = (
    "retail/ticket_hold_carrier_exception",
    "neobank/freeze_misplaced_card",
    "travel/cancel_flexible_full_refund",
)


def test_compare_differences_only_hides_tasks_both_did_equally(client, bob, summaries_campaign):
    a = summaries_campaign({T1: (4, 4), T2: (4, 2), T3: (4, 0)}, name="A", n=4)
    b = summaries_campaign({T1: (4, 4), T2: (4, 1), T3: (4, 0)}, name="B", n=4)
    client.force_login(bob)

    every = client.get(f"/compare/?a={a.pk}&b={b.pk}").context["per_task"]
    differing = client.get(f"/compare/?a={a.pk}&b={b.pk}&diff=1").context["per_task"]

    assert sorted(t.task_id for t in every) == sorted([T1, T2, T3])
    assert [t.task_id for t in differing] == [T2]


def test_compare_links_task_names_and_shows_cost_delta_and_verdict(client, bob, summaries_campaign):
    from apps.suites.models import Task

    a = summaries_campaign({T1: (4, 4), T2: (4, 4), T3: (4, 4)}, name="Always", n=4)
    b = summaries_campaign({T1: (4, 0), T2: (4, 0), T3: (4, 0)}, name="Never", n=4)
    client.force_login(bob)

    response = client.get(f"/compare/?a={a.pk}&b={b.pk}")
    html = response.content.decode()

    task = Task.objects.get(suite=a.suite, task_id=T1)
    assert f'<a href="/tasks/{task.pk}/">{T1}</a>' in html
    assert 'id="cost-delta"' in html
    assert response.context["verdict"].startswith("Too few shared tasks (3)") or response.context[
        "verdict"
    ].startswith("Always is more dependable than Never")
    assert 'id="verdict"' in html


def test_compare_verdict_names_the_more_dependable_campaign_when_it_clears_the_floor(
    client, bob, summaries_campaign, starter_suite
):
    tasks = list(starter_suite.tasks.order_by("task_id").values_list("task_id", flat=True)[:24])
    a = summaries_campaign(dict.fromkeys(tasks, (4, 4)), name="Always", n=4)
    b = summaries_campaign(dict.fromkeys(tasks, (4, 0)), name="Never", n=4)
    client.force_login(bob)

    verdict = client.get(f"/compare/?a={a.pk}&b={b.pk}").context["verdict"]

    assert verdict.startswith(
        "Always is more dependable than Never: 100.0 points more tasks solved every time (24 gained, 0 lost), "
        "beyond the noise floor"
    )


def test_compare_verdict_says_tied_below_the_noise_floor(client, bob, summaries_campaign, starter_suite):
    tasks = list(starter_suite.tasks.order_by("task_id").values_list("task_id", flat=True)[:24])
    a = summaries_campaign({t: (4, 4 if i % 2 == 0 else 2) for i, t in enumerate(tasks)}, name="A", n=4)
    b = summaries_campaign(
        {t: (4, (4 if i % 2 == 0 else 2) - (i == 0)) for i, t in enumerate(tasks)}, name="B", n=4
    )
    client.force_login(bob)

    verdict = client.get(f"/compare/?a={a.pk}&b={b.pk}").context["verdict"]

    assert verdict.startswith(
        "No real difference in dependability between A and B: the all-N difference (+4.2 points)"
    )


def test_glossary_defines_every_metric_header_of_the_leaderboard(client, bob, summaries_campaign):
    from apps.figures.glossary import BY_SLUG

    summaries_campaign({T1: (4, 3)}, name="Some", n=4)
    client.force_login(bob)

    glossary = client.get("/glossary/").content.decode()
    leaderboard = client.get("/leaderboard/?preset=all").content.decode()

    for slug in BY_SLUG:
        assert f'<dt id="{slug}">' in glossary
    for slug in ("pass1", "passk", "hatk", "alln", "gap", "cost_dependable", "coverage", "rank"):
        assert f'href="/glossary/#{slug}"' in leaderboard
        assert f'data-tip="{BY_SLUG[slug].definition}"'.replace("'", "&#x27;") in leaderboard


@pytest.mark.parametrize("url", ["/leaderboard/", "/compare/", "/triage/", "/glossary/"])
def test_pages_carry_no_insider_text(client, alice, summaries_campaign, url):
    summaries_campaign({T1: (4, 3)}, name="Some", n=4)
    client.force_login(alice)

    html = client.get(url).content.decode()

    for insider in ("SPEC §", "tb agg", "(1.96 + 0.84)", "Beta(1 + c"):
        assert insider not in html


def test_campaign_colour_is_fixed_by_id_from_the_okabe_ito_palette(summaries_campaign):
    one = summaries_campaign({T1: (4, 3)}, name="One", n=4)

    assert PALETTE[:3] == ("#0072B2", "#E69F00", "#009E73")
    assert one.colour == campaign_colour(one.pk) == PALETTE[one.pk % len(PALETTE)]
