"""Attempt drilldown and task page: transcript, diff, escaping, navigation, access."""

from __future__ import annotations

import json

import pytest

from apps.attempts.models import Attempt

pytestmark = pytest.mark.django_db

HOLD_TASK = "retail/ticket_hold_carrier_exception"


@pytest.fixture
def careless_hold(run_campaign):
    """sim:careless on the carrier-exception task: attempt #9 closes ticket 20 instead of holding it."""
    return run_campaign("sim:careless", n=10, task_ids=[HOLD_TASK], name="Careless persona")


def test_drilldown_closed_ticket_reads_at_a_glance(client, bob, careless_hold):
    attempt = Attempt.objects.get(campaign=careless_hold, index=9)
    client.force_login(bob)

    html = client.get(f"/attempts/{attempt.pk}/").content.decode()

    assert '<p class="headline">ticket 20 · status: solved (golden: hold)</p>' in html
    assert 'id="verdict">fail<' in html
    assert "simulation, not a model" in html


def test_drilldown_links_diff_items_and_tool_calls_both_ways(client, bob, careless_hold):
    attempt = Attempt.objects.get(campaign=careless_hold, index=9)
    writer = attempt.result["diff"][0]["written_by"][0]
    client.force_login(bob)

    html = client.get(f"/attempts/{attempt.pk}/").content.decode()

    assert f'id="diff-0" data-calls="{writer}"' in html
    assert f'id="call-{writer}" data-diff-items="0"' in html


def test_drilldown_previous_next_and_raw_json(client, bob, careless_hold):
    attempts = {a.index: a for a in Attempt.objects.filter(campaign=careless_hold)}
    client.force_login(bob)

    html = client.get(f"/attempts/{attempts[5].pk}/").content.decode()
    raw = client.get(f"/attempts/{attempts[5].pk}/raw.json")

    assert f'href="/attempts/{attempts[4].pk}/" rel="prev"' in html
    assert f'href="/attempts/{attempts[6].pk}/" rel="next"' in html
    assert json.loads(raw.content) == attempts[5].result
    assert raw["Content-Disposition"] == f'attachment; filename="attempt-{attempts[5].pk}.json"'


def test_drilldown_escapes_model_and_tool_text(client, bob, run_campaign):
    campaign = run_campaign("golden", tasks=1, n=1)
    attempt = Attempt.objects.get(campaign=campaign)
    result = attempt.result
    result["transcript"]["messages"].append({"role": "assistant", "content": "<script>alert('x')</script>"})
    result["transcript"]["tool_calls"][0]["result"] = '<img src=x onerror="alert(1)">'
    attempt.result = result
    attempt.save(update_fields=["result"])
    client.force_login(bob)

    html = client.get(f"/attempts/{attempt.pk}/").content.decode()

    assert "<script>alert(" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html


def test_drilldown_is_404_for_other_teams_and_403_without_role(client, erin, charlie, careless_hold):
    attempt = Attempt.objects.filter(campaign=careless_hold).first()

    client.force_login(erin)
    hidden = [
        client.get(url)
        for url in (
            f"/attempts/{attempt.pk}/",
            f"/attempts/{attempt.pk}/raw.json",
            f"/tasks/{attempt.task_id}/",
        )
    ]
    client.force_login(charlie)
    refused = client.get(f"/attempts/{attempt.pk}/")

    assert [response.status_code for response in hidden] == [404, 404, 404]
    # The same page as for an address that does not exist: nothing of the attempt leaks.
    assert all(attempt.task.task_id not in response.content.decode() for response in hidden)
    assert all(careless_hold.name not in response.content.decode() for response in hidden)
    assert refused.status_code == 403


def test_task_page_shows_spec_and_one_strip_cell_per_attempt(client, bob, careless_hold):
    task = careless_hold.tasks.get()
    client.force_login(bob)

    html = client.get(f"/tasks/{task.pk}/").content.decode()

    strip = html[html.index('class="strip"') :]
    strip = strip[: strip.index("</div>")]
    assert strip.count('href="/attempts/') == 10
    assert strip.count('class="pass') + strip.count('class="fail') == 10
    assert "update_ticket" in html  # golden trajectory
    assert "SHP-20" in html  # data patch
    assert "must be put on hold" in html  # domain policy


@pytest.mark.parametrize("campaign_count", [1, 3])
def test_task_page_query_count_is_constant(
    client, bob, run_campaign, django_assert_num_queries, campaign_count
):
    campaigns = [run_campaign("golden", n=2, task_ids=[HOLD_TASK]) for _ in range(campaign_count)]
    task = campaigns[0].tasks.get()
    client.force_login(bob)

    with django_assert_num_queries(7):
        response = client.get(f"/tasks/{task.pk}/")

    assert response.content.decode().count('href="/attempts/') == 2 * campaign_count


@pytest.mark.parametrize("diff_size", [1, 3])
def test_drilldown_query_count_is_constant(client, bob, run_campaign, django_assert_num_queries, diff_size):
    campaign = run_campaign("golden", tasks=1, n=1)
    attempt = Attempt.objects.get(campaign=campaign)
    attempt.result["diff"] = [
        {
            "kind": "extra_effect",
            "table": "tickets",
            "key": str(i),
            "field": "status",
            "initial": "open",
            "result": "solved",
            "golden": "open",
            "written_by": [0],
        }
        for i in range(diff_size)
    ]
    attempt.save(update_fields=["result"])
    client.force_login(bob)

    # The sixth: the attempt's verdict versions (issue 29), one query whatever the diff's size.
    with django_assert_num_queries(6):
        html = client.get(f"/attempts/{attempt.pk}/").content.decode()

    assert html.count('class="diff-item extra_effect"') == diff_size


def test_drilldown_says_the_golden_run_took_a_step_when_no_attempt_call_wrote_a_diff_item(
    client, bob, run_campaign
):
    campaign = run_campaign("golden", tasks=1, n=1)
    attempt = Attempt.objects.get(campaign=campaign)
    missing = {"kind": "missing_effect", "table": "refunds", "key": "9", "field": None, "initial": None}
    attempt.result["diff"] = [{**missing, "result": None, "golden": {"amount": 10}, "written_by": []}]
    attempt.save(update_fields=["result"])
    client.force_login(bob)

    html = client.get(f"/attempts/{attempt.pk}/").content.decode()
    item = html.split('id="diff-0"')[1].split('<div class="diff-item')[0]

    assert 'data-calls=""' in item
    assert "the golden run had a step the attempt never took" in item
    assert "written by tool call" not in item


def test_drilldown_names_a_stored_result_it_cannot_read(client, bob, careless_hold):
    attempt = Attempt.objects.get(campaign=careless_hold, index=9)
    Attempt.objects.filter(pk=attempt.pk).update(result={**attempt.result, "format_version": 99})
    client.force_login(bob)

    response = client.get(f"/attempts/{attempt.pk}/")

    assert response.status_code == 200
    assert (
        f'<p class="message error" role="alert" id="result-error">The stored result cannot be shown: '
        f"attempt {attempt.pk}: stored result: field format_version is 99, a format this engine does not "
        "read (it reads version 1). The raw JSON download has it as stored.</p>"
    ) in response.content.decode()
