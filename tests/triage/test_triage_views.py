"""Triage pages: queue filters, htmx fragments, query counts, permissions, panel, health, summary."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.triage import services
from apps.triage.models import AuditEntry, Label
from tests.triage.conftest import T1, T2, T3

pytestmark = pytest.mark.django_db


def _rows(html: str) -> list[str]:
    return [part.split('"')[0] for part in html.split('data-attempt="')[1:]]


def _ids(campaign, **lookup) -> list[str]:
    return [
        str(pk)
        for pk in campaign.attempts.filter(**lookup)
        .order_by("task__task_id", "index")
        .values_list("pk", flat=True)
    ]


@pytest.fixture
def mixed(attempts_campaign):
    """T1: two clean-looking failures and a pass; T2: a failure that is not clean-looking; T3: a clean failure."""
    return attempts_campaign(
        [
            (T1, 0, "fail", ["wrong_value"], True),
            (T1, 1, "fail", ["extra_effect", "wrong_value"], True),
            (T1, 2, "pass", [], False),
            (T2, 0, "fail", ["missing_effect"], False),
            (T3, 0, "fail", ["missing_effect"], True),
        ]
    )


def test_queue_lists_only_clean_looking_failures_by_default(client, bob, mixed):
    client.force_login(bob)

    html = client.get("/triage/").content.decode()

    assert _rows(html) == _ids(mixed, clean_looking=True)


def test_queue_scope_failed_adds_failures_that_are_not_clean_looking(client, bob, mixed):
    client.force_login(bob)

    html = client.get("/triage/?scope=failed").content.decode()

    assert _rows(html) == _ids(mixed, verdict="fail")


@pytest.mark.parametrize(
    "query, lookup",
    [
        ("category=extra_effect", {"index": 1, "task__task_id": T1}),
        ("domain=travel", {"task__task_id": T3}),
        (f"task={T1}", {"task__task_id": T1, "verdict": "fail"}),
    ],
)
def test_queue_filters_by_category_domain_and_task(client, bob, mixed, query, lookup):
    client.force_login(bob)

    html = client.get(f"/triage/?{query}").content.decode()

    assert _rows(html) == _ids(mixed, **lookup)


def test_queue_filters_by_label_assignee_and_status(client, bob, trish, mixed):
    first, second, third = mixed.attempts.filter(clean_looking=True).order_by("task__task_id", "index")
    services.attempt_toggle_label(attempt=first, label=Label.objects.get(name="grader bug"), actor=trish)
    services.attempt_assign(attempt=second, assignee=trish, actor=trish)
    services.attempt_set_status(attempt=third, status="reviewed", actor=trish)
    label = Label.objects.get(name="grader bug").pk
    client.force_login(bob)

    by_label = _rows(client.get(f"/triage/?label={label}").content.decode())
    by_assignee = _rows(client.get(f"/triage/?assignee={trish.pk}").content.decode())
    unassigned = _rows(client.get("/triage/?assignee=none").content.decode())
    reviewed = _rows(client.get("/triage/?status=reviewed").content.decode())
    still_open = _rows(client.get("/triage/?status=open").content.decode())

    assert (by_label, by_assignee, reviewed) == ([str(first.pk)], [str(second.pk)], [str(third.pk)])
    assert unassigned == [str(first.pk), str(third.pk)]
    assert still_open == [str(first.pk), str(second.pk)]


def test_queue_htmx_request_returns_only_the_rows_fragment(client, bob, mixed):
    client.force_login(bob)

    html = client.get("/triage/?domain=retail", HTTP_HX_REQUEST="true").content.decode()

    assert html.lstrip().startswith('<div id="triage-rows">')
    assert "<html" not in html
    assert _rows(html) == _ids(mixed, task__task_id=T1, clean_looking=True)


def test_queue_pages_fifty_rows_and_links_the_next_page_for_htmx(client, bob, attempts_campaign):
    attempts_campaign([(T1, i, "fail", [], True) for i in range(53)], n=60)
    client.force_login(bob)

    first = client.get("/triage/?view=list").content.decode()
    second = client.get("/triage/?view=list&page=2", HTTP_HX_REQUEST="true").content.decode()

    assert (len(_rows(first)), len(_rows(second))) == (50, 3)
    assert 'hx-get="/triage/?&amp;view=list&amp;page=2"' in first


@pytest.mark.parametrize("persona", ["bob", "trish"])
def test_queue_query_count_is_the_same_for_one_and_three_items(client, persona, request, attempts_campaign):
    user = request.getfixturevalue(persona)
    trish = request.getfixturevalue("trish")
    one = attempts_campaign([(T1, 0, "fail", [], True)], name="one")
    three = attempts_campaign([(T1, i, "fail", [], True) for i in range(3)], name="three")
    for attempt in [*one.attempts.all(), *three.attempts.all()]:
        services.attempt_toggle_label(
            attempt=attempt, label=Label.objects.get(name="wrong amount"), actor=trish
        )
        services.attempt_assign(attempt=attempt, assignee=trish, actor=trish)
    client.force_login(user)
    for campaign in (one, three):  # warm the session, content types and each scope's cached cluster index
        client.get(f"/triage/?c={campaign.pk}")

    counts = []
    for campaign in (one, three):
        with CaptureQueriesContext(connection) as captured:
            html = client.get(f"/triage/?c={campaign.pk}").content.decode()
        counts.append(len(captured))
        assert len(_rows(html)) == campaign.attempts.count()
    assert counts[0] == counts[1]


def test_queue_refuses_users_without_role(client, charlie):
    client.force_login(charlie)

    assert client.get("/triage/").status_code == 403


def test_queue_hides_other_teams_attempts(client, erin, mixed):
    client.force_login(erin)

    html = client.get("/triage/?scope=failed").content.decode()

    assert _rows(html) == []
    assert "Careless" not in html


def test_viewer_posting_a_label_gets_403_and_nothing_changes(client, bob, mixed):
    attempt = mixed.attempts.filter(clean_looking=True).first()
    client.force_login(bob)

    response = client.post(
        f"/triage/attempts/{attempt.pk}/label/", {"label": Label.objects.get(name="grader bug").pk}
    )

    assert response.status_code == 403
    assert AuditEntry.objects.count() == 0


def test_triager_of_another_team_gets_404_on_panel_actions(client, make_user, team_b, mixed):
    outsider = make_user("tess", role="triager", teams=[team_b])
    attempt = mixed.attempts.filter(clean_looking=True).first()
    client.force_login(outsider)

    responses = [
        client.post(f"/triage/attempts/{attempt.pk}/label/", {"label": Label.objects.first().pk}).status_code,
        client.post(f"/triage/attempts/{attempt.pk}/note/", {"note": "x"}).status_code,
        client.post(f"/triage/attempts/{attempt.pk}/status/", {"status": "reviewed"}).status_code,
        client.get(f"/attempts/{attempt.pk}/").status_code,
        client.get(f"/triage/attempts/{attempt.pk}/panel/").status_code,
        client.get(f"/triage/tasks/{attempt.task_id}/health/").status_code,
    ]

    assert responses == [404, 404, 404, 404, 404, 404]
    assert AuditEntry.objects.count() == 0


def test_bulk_label_from_the_list_labels_ticked_rows_and_ignores_foreign_ids(
    client, trish, mixed, attempts_campaign, team_b
):
    foreign = attempts_campaign(
        [(T1, 0, "fail", [], True)], name="Team B campaign", team=team_b
    ).attempts.get()
    ticked = list(mixed.attempts.filter(clean_looking=True).order_by("pk")[:2])
    label = Label.objects.get(name="unrequested action")
    client.force_login(trish)

    html = client.post(
        "/triage/bulk/",
        {
            "a": [a.pk for a in ticked] + [foreign.pk],
            "label": label.pk,
            "action": "add",
            "query": "domain=retail",
        },
        HTTP_HX_REQUEST="true",
    ).content.decode()

    labelled = sorted(label.reviews.values_list("attempt_id", flat=True))
    assert labelled == sorted(a.pk for a in ticked)
    assert html.lstrip().startswith('<div id="triage-rows">')
    assert html.count("unrequested action</span>") == 2


def test_drilldown_panel_walks_the_queue_order_it_came_from(client, bob, mixed):
    ids = _ids(mixed, clean_looking=True)
    client.force_login(bob)

    page = client.get(f"/attempts/{ids[1]}/?queue={quote('domain=&scope=clean')}").content.decode()
    html = client.get(
        f"/triage/attempts/{ids[1]}/panel/?queue={quote('domain=&scope=clean')}"
    ).content.decode()

    assert f'data-next="/attempts/{ids[2]}/?queue=' in html
    assert f'data-prev="/attempts/{ids[0]}/?queue=' in html
    assert "2 of 3 in the" in html
    assert f'hx-get="/triage/attempts/{ids[1]}/panel/?queue=domain%3D%26scope%3Dclean"' in page


def test_drilldown_shows_labels_read_only_to_viewers_and_as_buttons_to_triagers(client, bob, trish, mixed):
    attempt = mixed.attempts.filter(clean_looking=True).first()
    services.attempt_toggle_label(attempt=attempt, label=Label.objects.get(name="wrong amount"), actor=trish)

    client.force_login(bob)
    as_viewer = client.get(f"/triage/attempts/{attempt.pk}/panel/").content.decode()
    client.force_login(trish)
    as_triager = client.get(f"/triage/attempts/{attempt.pk}/panel/").content.decode()

    assert 'class="label-toggle' not in as_viewer
    assert '<span class="badge label on">wrong amount</span>' in as_viewer
    assert "labels: — → wrong amount" in as_viewer
    assert as_triager.count('class="label-toggle') == 8
    assert 'data-shortcut="2" aria-pressed="true"' in as_triager


def test_panel_post_via_htmx_returns_the_panel_with_the_new_audit_entry(client, trish, mixed):
    attempt = mixed.attempts.filter(clean_looking=True).first()
    client.force_login(trish)

    html = client.post(
        f"/triage/attempts/{attempt.pk}/note/",
        {"note": "premature close after refund"},
        HTTP_HX_REQUEST="true",
    ).content.decode()

    assert html.lstrip().startswith('<section class="card triage-panel" id="triage-panel"')
    assert "note: — → premature close after refund" in html


def test_panel_query_count_does_not_grow_with_audit_entries(client, trish, mixed):
    first, second = mixed.attempts.filter(task__task_id=T1, clean_looking=True).order_by("index")
    services.attempt_set_note(attempt=first, note="one", actor=trish)
    for text in ("a", "b", "c"):
        services.attempt_set_note(attempt=second, note=text, actor=trish)
    client.force_login(trish)
    client.get(f"/triage/attempts/{first.pk}/panel/")
    counts = []
    for attempt in (first, second):
        with CaptureQueriesContext(connection) as captured:
            client.get(f"/triage/attempts/{attempt.pk}/panel/")
        counts.append(len(captured))

    assert counts[0] == counts[1]


def test_health_label_shows_on_task_page_and_leaderboard_and_can_be_excluded(
    client, bob, trish, summaries_campaign, attempts_campaign
):
    campaign = attempts_campaign(
        [(T1, i, "fail", [], True) for i in range(4)] + [(T2, i, "pass", [], False) for i in range(4)], n=4
    )
    services.attempt_toggle_label(
        attempt=campaign.attempts.filter(task__task_id=T1).first(),
        label=Label.objects.get(name="grader bug"),
        actor=trish,
    )
    task = campaign.tasks.get(task_id=T1)
    client.force_login(bob)

    task_page = client.get(f"/tasks/{task.pk}/").content.decode()
    badge = client.get(f"/triage/tasks/{task.pk}/health/").content.decode()
    included = client.get("/leaderboard/").content.decode()
    excluded = client.get("/leaderboard/?healthy=exclude").content.decode()

    assert f'hx-get="/triage/tasks/{task.pk}/health/"' in task_page
    assert '<span class="badge reversal task-health"' in badge and "grader bug</span>" in badge
    assert "1 task on the health list" in included
    assert "1 task with open health issues is excluded from these figures" in excluded
    # pass@1 over both tasks is 50%; without the grader-bug task only T2 (4/4) remains.
    row_in, row_ex = (html[html.index(f'data-campaign="{campaign.pk}"') :] for html in (included, excluded))
    assert row_in.split('<td class="num pass1"')[1].split(">", 1)[1].startswith("50.0%")
    assert row_ex.split('<td class="num pass1"')[1].split(">", 1)[1].startswith("100.0%")


def test_summary_gives_overlapping_category_shares_among_clean_failures_and_labels(client, bob, trish, mixed):
    first = mixed.attempts.filter(clean_looking=True).order_by("task__task_id", "index").first()
    services.attempt_toggle_label(attempt=first, label=Label.objects.get(name="wrong amount"), actor=trish)
    client.force_login(bob)

    from apps.triage.selectors import campaign_triage_summary

    (row,) = campaign_triage_summary(campaigns=[mixed])
    html = client.get("/triage/summary/").content.decode()

    assert row["clean_failures"] == 3
    assert row["counts"] == {
        "wrong_value": 2,
        "missing_effect": 1,
        "extra_effect": 1,
        "rubric_failed": 0,
        "check_failed": 0,
    }
    assert row["shares"]["wrong_value"] == pytest.approx(2 / 3)
    assert row["labels"] == [("wrong amount", 1)]
    assert "66.7%" in html and "wrong amount 1" in html


def test_taxonomy_page_lets_triagers_add_labels_and_refuses_viewers(client, bob, trish):
    client.force_login(bob)
    refused = client.post("/triage/labels/", {"name": "looped", "shortcut": 9}).status_code
    client.force_login(trish)
    response = client.post(
        "/triage/labels/", {"name": "looped", "shortcut": 9, "description": "repeated the same call"}
    )

    assert refused == 403
    assert response.status_code == 302
    assert Label.objects.get(name="looped").shortcut == 9


def _diff(table: str, key, field: str, result, golden) -> dict:
    return {
        "kind": "wrong_value",
        "table": table,
        "key": key,
        "field": field,
        "initial": golden,
        "result": result,
        "golden": golden,
        "written_by": [1],
    }


def test_queue_sorts_by_a_column_both_ways_and_the_drilldown_walks_that_order(client, bob, mixed):
    client.force_login(bob)
    by_default = _ids(mixed, clean_looking=True)  # T1#0, T1#1, T3#0
    mixed.attempts.filter(task__task_id=T3).update(termination="max_turns")

    ascending = client.get("/triage/?sort=termination").content.decode()
    descending = client.get("/triage/?sort=-termination").content.decode()
    panel = client.get(f"/triage/attempts/{by_default[2]}/panel/?queue={quote('sort=-termination')}")

    assert _rows(ascending) == by_default[:2] + [by_default[2]]
    assert _rows(descending) == [by_default[2], *by_default[:2]]
    assert 'aria-sort="descending"' in descending
    assert 'href="/triage/?sort=termination&amp;view=list"' in descending  # sorting keeps the flat list
    assert "1 of 3 in the" in panel.content.decode()
    assert f'data-next="/attempts/{by_default[0]}/?queue=sort%3D-termination"' in panel.content.decode()


def test_queue_ignores_an_unknown_sort_column(client, bob, mixed):
    client.force_login(bob)

    html = client.get("/triage/?sort=result").content.decode()

    assert _rows(html) == _ids(mixed, clean_looking=True)


def test_queue_shows_page_numbers_and_the_panel_links_back_to_the_attempts_page(
    client, bob, attempts_campaign
):
    campaign = attempts_campaign([(T1, i, "fail", [], True) for i in range(120)], n=130)
    ids = [str(pk) for pk in campaign.attempts.order_by("index").values_list("pk", flat=True)]
    client.force_login(bob)

    second = client.get("/triage/?view=list&page=2").content.decode()
    panel = client.get(f"/triage/attempts/{ids[104]}/panel/").content.decode()

    assert '<strong aria-current="page">2</strong>' in second
    assert 'aria-label="page 1">1</a>' in second and 'aria-label="page 3">3</a>' in second
    assert "105 of 120 in the" in panel
    # The flat list, not the grouped view this many alike failures would get by default.
    assert f'href="/triage/?c={campaign.pk}&amp;view=list&amp;page=3#attempt-{ids[104]}"' in panel
    back = client.get(f"/triage/?c={campaign.pk}&view=list&page=3").content.decode()
    assert f'id="attempt-{ids[104]}"' in back


def test_queue_position_uses_thousands_separators(client, bob, attempts_campaign):
    campaign = attempts_campaign([(T1, i, "fail", [], True) for i in range(1235)], n=1300)
    first = campaign.attempts.order_by("index").first()
    client.force_login(bob)

    html = client.get(f"/triage/attempts/{first.pk}/panel/").content.decode()

    assert "1 of 1,235 in the" in html


def test_queue_says_what_went_wrong_from_the_first_diff_item(client, bob, mixed):
    first, second, third = (mixed.attempts.get(pk=pk) for pk in _ids(mixed, clean_looking=True))
    first.result = {
        "diff": [_diff("tickets", 20, "status", "solved", "hold"), _diff("tickets", 21, "x", 1, 2)]
    }
    first.diff_items = 2
    first.save(update_fields=["result", "diff_items"])
    second.result = {"diff": [_diff("refunds", 7, "amount", "<b>9</b>", 10)]}
    second.diff_items = 1
    second.save(update_fields=["result", "diff_items"])
    client.force_login(bob)

    html = client.get("/triage/").content.decode()
    cells = [part.split("</td>")[0] for part in html.split('<td class="headline">')[1:]]

    assert cells == [
        'ticket 20 · status: solved (golden: hold) <span class="muted">+1 more</span>',
        "refund 7 · amount: &lt;b&gt;9&lt;/b&gt; (golden: 10)",
        '<span class="muted">no state difference (a check or rubric failed)</span>',
    ]
