"""Process risk stored per attempt (AttemptProcessRisk): written when the attempt is recorded, rebuilt by
the backfill, counted per campaign ("passed with process risk", per kind), and shown on the attempt
page, the leaderboard preset, the triage queue, the exports and the API. Counts are hand computed."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.management import call_command

from apps.attempts.models import Attempt, AttemptProcessRisk
from apps.attempts.selectors.process_risk import campaign_process_risk
from apps.campaigns.services import campaign_start
from tests.api.conftest import api_for  # noqa: F401 (fixture)
from tests.campaigns.conftest import drain, sent  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

REVERT_TASKS = ["retail/address_change_before_shipment", "retail/ticket_hold_carrier_exception"]
SKIP_TASKS = [
    "retail/missing_item_partial_refund",
    "retail/return_unwanted_item_pending",
    "retail/ticket_hold_carrier_exception",
]


@pytest.fixture
def run(starter_suite, alice, team_a):
    from apps.agents.services import agent_config_for
    from apps.campaigns.services import campaign_create

    def make(agent: str, task_ids: list[str], n: int):
        campaign = campaign_create(
            name=f"{agent} process",
            team=team_a,
            owner=alice,
            agent=agent_config_for(agent),
            suite=starter_suite,
            tasks=list(starter_suite.tasks.filter(task_id__in=task_ids).order_by("task_id")),
            n_attempts=n,
        )
        campaign_start(campaign=campaign)
        drain(campaign)
        return campaign

    return make


@pytest.fixture
def reverting(run):
    # write-revert: ticket_hold's update_ticket is made, set back to status open, made again (one
    # reverted write per attempt); address_change's only write sets no column its arguments name
    # (the persona follows the golden plan): 6 passes, 3 with process risk.
    return run("sim:write-revert", REVERT_TASKS, 3)


@pytest.fixture
def skipping(run):
    # skip-read: missing_item loses get_order (1 finding: order-read-before-refund at call #1);
    # return_unwanted loses the identification (2 findings: both writes); ticket_hold loses
    # track_shipment, which no rule requires. 6 passes, 4 with process risk, 6 findings.
    return run("sim:skip-read", SKIP_TASKS, 2)


def _rows(campaign) -> dict[str, list[tuple[int, int, int, bool]]]:
    found: dict[str, list[tuple[int, int, int, bool]]] = {}
    for row in (
        AttemptProcessRisk.objects.filter(campaign=campaign).select_related("task").order_by("attempt_id")
    ):
        found.setdefault(row.task.task_id, []).append(
            (row.write_reverted, row.outside_footprint, row.write_before_required_step, row.passed)
        )
    return found


def test_recorded_attempts_get_exactly_the_hand_counted_findings(reverting, skipping):
    assert set(
        Attempt.objects.filter(campaign__in=[reverting, skipping]).values_list("verdict", flat=True)
    ) == {"pass"}
    assert _rows(reverting) == {"retail/ticket_hold_carrier_exception": [(1, 0, 0, True)] * 3}
    assert _rows(skipping) == {
        "retail/missing_item_partial_refund": [(0, 0, 1, True)] * 2,
        "retail/return_unwanted_item_pending": [(0, 0, 2, True)] * 2,
    }
    row = AttemptProcessRisk.objects.filter(campaign=reverting).first()
    assert [(f["kind"], f["calls"], f["table"], f["key"], f["field"]) for f in row.findings] == [
        ("write_reverted", [5, 4], "tickets", "20", "status")
    ]


def test_campaign_figures_count_passed_with_process_risk_per_kind(reverting, skipping):
    figures = campaign_process_risk(campaign_ids=[reverting.pk, skipping.pk])
    assert (figures[reverting.pk].passed, figures[reverting.pk].with_risk, figures[reverting.pk].share) == (
        6,
        3,
        0.5,
    )
    assert figures[reverting.pk].by_kind == {
        "write_reverted": 3,
        "outside_footprint": 0,
        "write_before_required_step": 0,
    }
    assert (figures[skipping.pk].passed, figures[skipping.pk].with_risk) == (6, 4)
    assert figures[skipping.pk].share == pytest.approx(4 / 6)
    assert figures[skipping.pk].kinds["write_before_required_step"] == {
        "count": 4,
        "share": pytest.approx(4 / 6),
    }


def test_the_backfill_rebuilds_the_rows_from_what_each_attempt_stored(reverting, skipping):
    recorded = (_rows(reverting), _rows(skipping))
    AttemptProcessRisk.objects.all().delete()
    out = io.StringIO()
    call_command("backfill_process_risk", stdout=out)
    assert out.getvalue().startswith(
        "12 done attempts read, 0 analysed now, 7 with process findings, 0 not analysable"
    )
    assert (_rows(reverting), _rows(skipping)) == recorded
    # Recomputed from the stored value log, the transcript and a golden replay: the same rows.
    out = io.StringIO()
    call_command("backfill_process_risk", "--recompute", stdout=out)
    assert out.getvalue().startswith("12 done attempts read, 12 analysed now, 7 with process findings")
    assert (_rows(reverting), _rows(skipping)) == recorded


def test_an_attempt_stored_before_write_logs_is_analysed_on_its_net_effects_only(reverting, skipping):
    for attempt in Attempt.objects.filter(campaign__in=[reverting, skipping]):
        extra = attempt.result["extra"]
        extra.pop("process"), extra.pop("write_log")
        Attempt.objects.filter(pk=attempt.pk).update(result=attempt.result)
    AttemptProcessRisk.objects.all().delete()
    call_command("backfill_process_risk", stdout=io.StringIO())
    # A revert leaves no net effect, so it cannot be seen; the rules still can (net effects name their calls).
    assert _rows(reverting) == {}
    assert _rows(skipping) == {
        "retail/missing_item_partial_refund": [(0, 0, 1, True)] * 2,
        "retail/return_unwanted_item_pending": [(0, 0, 2, True)] * 2,
    }
    assert set(AttemptProcessRisk.objects.values_list("coverage", flat=True)) == {"net_effects"}


def test_the_attempt_page_marks_the_finding_on_its_step_and_beside_the_diff(client, alice, reverting):
    client.force_login(alice)
    attempt = AttemptProcessRisk.objects.filter(campaign=reverting).first().attempt
    html = client.get(f"/attempts/{attempt.pk}/").content.decode()
    assert 'id="process-risk-badge"' in html
    assert html.count('class="process-finding" data-kind="write_reverted"') == 3  # steps #5 and #4, the list
    step = html.split('id="call-5"')[1].split('id="call-6"')[0]
    assert "process: write reverted" in step
    assert 'href="#call-4">call 4</a>' in html.split('id="process-risk"')[1]


def test_the_leaderboard_preset_the_triage_queue_and_the_exports_show_it(client, alice, reverting, skipping):
    client.force_login(alice)
    html = client.get("/leaderboard/?preset=process").content.decode()
    assert "passed w/ process risk" in html
    assert 'process=any">3</a>' in html and 'process=any">4</a>' in html
    queue = client.get(
        f"/triage/?c={skipping.pk}&process=write_before_required_step&view=list"
    ).content.decode()
    listed = {a.pk for a in Attempt.objects.filter(campaign=skipping)}
    risky = set(AttemptProcessRisk.objects.filter(campaign=skipping).values_list("attempt_id", flat=True))
    assert len(risky) == 4
    assert all(f"/attempts/{pk}/" in queue for pk in risky)
    assert not any(f"/attempts/{pk}/" in queue for pk in listed - risky)
    export = client.get("/exports/tables/leaderboard.csv?preset=process").content.decode()
    table = list(csv.DictReader(line for line in export.splitlines() if not line.startswith("#") and line))
    by_name = {row["campaign"]: row for row in table}
    assert by_name[reverting.name]["passed with process risk"] == "3"
    assert by_name[skipping.name]["passed with write before required step"] == "4"
    queue_csv = client.get(f"/exports/tables/triage-queue.csv?c={skipping.pk}&process=any").content.decode()
    rows = list(csv.DictReader(line for line in queue_csv.splitlines() if not line.startswith("#") and line))
    assert sorted(int(row["process: write before required step"]) for row in rows) == [1, 1, 2, 2]


def test_the_api_gives_campaign_figures_attempt_findings_and_a_filter(api_for, alice, skipping):
    client = api_for(alice)
    risk = client.get(f"/api/campaigns/{skipping.pk}/").json()["process_risk"]
    assert (risk["passed"], risk["with_risk"], risk["kinds"]["write_before_required_step"]["count"]) == (
        6,
        4,
        4,
    )
    listed = client.get(f"/api/attempts/?campaign={skipping.pk}&process=any").json()
    assert listed["count"] == 4
    detail = client.get(f"/api/attempts/{listed['results'][0]['id']}/").json()
    assert {f["kind"] for f in detail["process"]} == {"write_before_required_step"}
    assert client.get(f"/api/attempts/?campaign={skipping.pk}&process=write_reverted").json()["count"] == 0


def test_a_rule_a_stored_golden_run_breaks_is_listed_with_the_suspect_tasks(client, alice, run, monkeypatch):
    from tb_engine import runner
    from tb_engine.process import parse_rules

    bad = parse_rules(
        {
            "rules": [
                {
                    "id": "order-read-before-return",
                    "before": {"tools": ["create_return"]},
                    "require": {"tools": ["get_order"], "same_argument": "order_id"},
                }
            ]
        }
    )
    monkeypatch.setattr(runner, "domain_rules", lambda domain: bad)
    # return_unwanted_item_pending creates its return (call #1) without reading ORD-80; wrong_item reads ORD-110.
    golden = run(
        "golden", ["retail/return_unwanted_item_pending", "retail/wrong_item_return_and_replacement"], 2
    )
    assert set(Attempt.objects.filter(campaign=golden).values_list("verdict", flat=True)) == {"pass"}
    client.force_login(alice)
    html = client.get("/triage/suspects/").content.decode()
    table = html.split('id="suspect-rules"')[1]
    assert table.count("<tr data-rule=") == 1
    row = table.split('<tr data-rule="order-read-before-return">')[1].split("</tr>")[0]
    assert "<td>retail</td><td>retail/return_unwanted_item_pending</td>" in row
    assert row.count("attempt #") == 2


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_one_query_record_path_writes_the_process_rows(starter_suite, alice, team_a, sent):
    from apps.agents.services import agent_config_for
    from apps.campaigns.services import campaign_create
    from apps.worker.attempts import attempt_execute

    campaign = campaign_create(
        name="skip-read one query",
        team=team_a,
        owner=alice,
        agent=agent_config_for("sim:skip-read"),
        suite=starter_suite,
        tasks=list(starter_suite.tasks.filter(task_id__in=SKIP_TASKS).order_by("task_id")),
        n_attempts=2,
    )
    campaign_start(campaign=campaign)
    for attempt_id in Attempt.objects.filter(campaign=campaign).values_list("id", flat=True):
        assert attempt_execute(attempt_id=attempt_id, worker="w:1") == "done"
    assert _rows(campaign) == {
        "retail/missing_item_partial_refund": [(0, 0, 1, True)] * 2,
        "retail/return_unwanted_item_pending": [(0, 0, 2, True)] * 2,
    }
