"""Issue 30: clusters keep the (result, golden) value pairs, and failure text is searchable.

"Set ticket status via update_ticket to a value other than golden's" holds two opposite mistakes:
solved where golden has hold (the ticket closed while the carrier's exception is open) and hold
where golden has solved. They share a signature; they must be sub-groups of their own, with
counts, in the grouped queue's row and on the cluster page, and each sub-group opens exactly its
attempts. A search for "exception" finds the closed-ticket attempts and not the others.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.http import QueryDict

from apps.attempts.models import Attempt
from apps.triage.selectors import QueueFilters, cluster_index, queue_queryset
from apps.triage.value_pairs import value_pairs
from tb_engine.results import DiffItem
from tests.triage.conftest import T1, T3

pytestmark = pytest.mark.django_db

CLOSED = DiffItem("wrong_value", "tickets", "20", "status", "open", "solved", "hold", (1,))
HELD = DiffItem("wrong_value", "tickets", "44", "status", "open", "hold", "solved", (1,))
CLOSED_TEXT = "set ticket status to solved via update_ticket where golden has hold"
HELD_TEXT = "set ticket status to hold via update_ticket where golden has solved"


@pytest.fixture
def opposite(signed_campaign):
    """Three attempts close the ticket golden holds (T1), two hold the ticket golden solves (T3)."""
    campaign = signed_campaign(
        [(T1, i, {"diff": [CLOSED]}) for i in range(3)] + [(T3, i, {"diff": [HELD]}) for i in range(2)],
        name="Careless",
    )
    closed = set(campaign.attempts.filter(task__task_id=T1).values_list("pk", flat=True))
    held = set(campaign.attempts.filter(task__task_id=T3).values_list("pk", flat=True))
    return campaign, closed, held


def test_one_signature_splits_into_its_value_pairs(opposite, bob):
    campaign, closed, held = opposite
    index = cluster_index(user=bob, filters=QueueFilters())
    assert len(index) == 1  # one signature: the values are left out of it
    signature = index[0].signature

    pairs = value_pairs(queue_queryset(user=bob, filters=QueueFilters()), signatures=[signature])[signature]

    assert [(group.size, group.text) for group in pairs.groups] == [(3, CLOSED_TEXT), (2, HELD_TEXT)]
    assert pairs.splits is True
    closed_group = pairs.groups[0]
    members = queue_queryset(
        user=bob, filters=QueueFilters().with_signature(signature).with_variants(closed_group.variants)
    )
    assert set(members.values_list("pk", flat=True)) == closed
    assert closed_group.example == min(closed)


def test_grouped_row_and_cluster_page_show_the_value_pair_distribution(opposite, client, bob):
    campaign, closed, held = opposite
    client.force_login(bob)

    grouped = client.get("/triage/?view=grouped").content.decode()
    row = grouped[grouped.index("<tr data-cluster=") :]
    assert re.search(rf">3</a> {re.escape(CLOSED_TEXT)}</li>", row)
    assert re.search(rf">2</a> {re.escape(HELD_TEXT)}</li>", row)

    signature = Attempt.objects.get(pk=min(closed)).failure_signature.digest
    page = client.get(f"/triage/clusters/{signature}/")
    html = page.content.decode()
    assert "2 value sets, each its own sub-group" in html
    link = re.search(
        r'href="(/triage/clusters/[0-9a-f]{32}/\?[^"]*v=\d+[^"]*)">3 attempts</a>: ' + re.escape(CLOSED_TEXT),
        html,
    )
    assert link is not None
    sub_group = client.get(link.group(1).replace("&amp;", "&"))
    shown = {attempt.pk for attempt in sub_group.context["page"].object_list}
    assert shown == closed
    assert "showing one sub-group" in sub_group.content.decode()


def test_a_returning_viewer_reads_the_pages_value_pairs_from_the_cache(opposite, client, bob, monkeypatch):
    from apps.triage import clusters

    client.force_login(bob)
    first = client.get("/triage/?view=grouped")
    signature = next(iter(first.context["pairs"]))

    def regrouped(*args, **kwargs):
        raise AssertionError("the page's value pairs were grouped again at the same stamp")

    # Read from the signature rows (no join with the attempts), equal to the pairs of the queue's attempts.
    assert first.context["pairs"] == value_pairs(
        queue_queryset(user=bob, filters=QueueFilters()), signatures=[signature]
    )
    with monkeypatch.context() as patched:
        patched.setattr(clusters, "value_pairs", regrouped)
        patched.setattr(clusters, "value_pairs_of_rows", regrouped)
        again = client.get("/triage/?view=grouped")
    assert again.context["pairs"] == first.context["pairs"]
    assert [(g.size, g.text) for g in again.context["pairs"][signature].groups] == [
        (3, CLOSED_TEXT),
        (2, HELD_TEXT),
    ]


def test_search_finds_failures_by_their_text(opposite, client, bob):
    campaign, closed, held = opposite
    client.force_login(bob)

    def found(query: str) -> set[int]:
        filters = QueueFilters.from_query(QueryDict(urlencode({"q": query})))
        return set(queue_queryset(user=bob, filters=filters).values_list("pk", flat=True))

    assert found("exception") == closed  # the task: retail/ticket_hold_carrier_exception
    assert found("solved") == closed | held  # a diff value on both sides
    assert found("solved hold exception") == closed  # every word must appear
    assert found("no-such-words-anywhere") == set()
    listed = client.get("/triage/?view=list&q=exception")
    assert {attempt.pk for attempt in listed.context["page"].object_list} == closed
    grouped = client.get("/triage/?view=grouped&q=exception").content.decode()
    assert CLOSED_TEXT in grouped and HELD_TEXT not in grouped


GENERIC = "set ticket status via update_ticket to a value other than golden's"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_demo_like_clusters_split_by_value_pair_and_search_finds_exception_in_chromium(
    live_server, client, trish, run_campaign
):
    """The demo's simulated personas over every starter task (N = 4), in real Chromium."""
    import json

    from playwright.sync_api import expect

    from tests.support.browser import signed_in_page

    for agent in ("sim:careless", "sim:cautious", "sim:explorer", "sim:steady"):
        run_campaign(agent, tasks=60, n=4, name=agent)
    failed = QueueFilters(scope="failed")
    index = cluster_index(user=trish, filters=failed)
    cluster = next(c for c in index.clusters if c.generic_description == GENERIC)
    groups = value_pairs(queue_queryset(user=trish, filters=failed), signatures=[cluster.signature])[
        cluster.signature
    ].groups
    assert len(groups) > 1 and sum(group.size for group in groups) == cluster.size
    assert len({group.text for group in groups}) == len(groups)  # each value pair once
    # Opposite mistakes stay apart: a status set to hold where golden solves is its own sub-group.
    held = [group for group in groups if "to hold via update_ticket where golden has solved" in group.text]
    assert len(held) == 1 and all(group is held[0] or "to hold" not in group.text for group in groups)
    exception_failures = set(
        Attempt.objects.filter(task__task_id=T1, verdict="fail").values_list("pk", flat=True)
    )
    assert exception_failures  # the careless persona closes the ticket while the exception is open

    with signed_in_page(live_server, client, trish) as page:
        page.goto(f"{live_server.url}/triage/?scope=failed&view=grouped")
        row = page.locator(f'tr[data-cluster="{cluster.signature}"]')
        items = row.locator("ul.value-pairs li").all_inner_texts()
        assert items[: len(groups[:4])] == [f"{group.size} {group.text}" for group in groups[:4]]
        page.goto(
            f"{live_server.url}/triage/clusters/{cluster.signature}/?scope=failed"
            + "".join(f"&v={v}" for v in held[0].variants)
        )
        expect(page.locator("#value-pairs")).to_contain_text("showing one sub-group")
        expect(page.locator("#queue-table tbody tr[data-attempt]")).to_have_count(held[0].size)

        page.goto(f"{live_server.url}/triage/?scope=failed&view=list")
        with page.expect_response(lambda response: "q=exception" in response.url):
            page.fill("#filter-text", "exception")
        page.wait_for_selector("#queue-table tbody tr[data-attempt]")
        shown = {
            int(pk)
            for pk in page.locator("#queue-table tbody tr[data-attempt]").evaluate_all(
                "rows => rows.map(row => row.dataset.attempt)"
            )
        }
        assert page.errors == []
    assert exception_failures <= shown
    for attempt in Attempt.objects.filter(pk__in=shown).select_related("task"):
        text = (
            json.dumps(attempt.result) + attempt.task.task_id + json.dumps(attempt.task.spec.get("title"))
        ).lower()
        assert "exception" in text


def test_bulk_cluster_actions_say_what_they_did_and_rows_show_labels(opposite, client, trish):
    """Issue 30 item 5: the swapped rows carry a message with counts, and the row shows its labels."""
    from apps.triage.models import Label

    campaign, closed, held = opposite
    signature = cluster_index(user=trish, filters=QueueFilters())[0].signature
    label = Label.objects.get(name="premature close")
    client.force_login(trish)
    form = {"query": "", "view": "grouped", "s": [signature], "action": "label", "label": label.pk}

    first = client.post("/triage/clusters/act/", form, HTTP_HX_REQUEST="true").content.decode()
    again = client.post("/triage/clusters/act/", form, HTTP_HX_REQUEST="true").content.decode()

    assert (
        'role="status" id="bulk-feedback">Added label “premature close” to 5 attempts of 5 in 1 cluster.'
        in first
    )
    assert "to 0 attempts of 5 in 1 cluster (5 already so)." in again
    assert ">premature close ×5</span>" in first
    redirected = client.post("/triage/clusters/act/", {**form, "action": "reviewed"}, follow=True)
    assert "Marked reviewed 5 attempts of 5 in 1 cluster." in redirected.content.decode()
