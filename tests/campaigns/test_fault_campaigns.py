"""Campaigns under a fault plan: stored plan, per-attempt fault records, robustness figures."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.agents.services import agent_config_for
from apps.attempts.models import Attempt
from apps.attempts.selectors.faults import campaign_fault_figures, fault_figure_rows
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_create, campaign_replicate, campaign_start
from tb_engine.faults import FaultPlanError
from tests.campaigns.conftest import drain

AFTER_COMMIT = {"kinds": ["error_after_commit"], "at_calls": [0], "seed": 4}
REFUND_TASKS = ["travel/duplicate_charge_refund_once", "retail/missing_item_partial_refund"]


def _campaign(starter_suite, alice, team_a, agent, plan=AFTER_COMMIT, n=2):
    campaign = campaign_create(
        name=f"{agent} under faults",
        team=team_a,
        owner=alice,
        agent=agent_config_for(agent),
        suite=starter_suite,
        tasks=list(starter_suite.tasks.filter(task_id__in=REFUND_TASKS)),
        n_attempts=n,
        fault_plan=plan,
    )
    campaign_start(campaign=campaign)
    drain(campaign)
    return campaign


def test_plan_is_stored_normalised_and_bad_plans_refused(make_campaign):
    campaign = make_campaign("golden", fault_plan={"kinds": "slow_reply", "rate": 0.5})
    assert campaign.fault_plan["kinds"] == ["slow_reply"]
    assert campaign.fault_plan["tools"] == "writes"
    assert make_campaign("golden").fault_plan == {}
    with pytest.raises(FaultPlanError) as raised:
        make_campaign("golden", fault_plan={"kinds": ["gremlins"]})
    assert str(raised.value).startswith("fault plan: kinds: unknown gremlins")


def test_naive_and_careful_campaigns_figures(starter_suite, alice, team_a):
    naive = _campaign(starter_suite, alice, team_a, "sim:naive-retry")
    careful = _campaign(starter_suite, alice, team_a, "sim:careful-retry")
    golden = _campaign(starter_suite, alice, team_a, "golden")

    stored = Attempt.objects.filter(campaign=naive).values_list("result__extra__faults__fired", flat=True)
    assert [[f["kind"] for f in fired] for fired in stored] == [["error_after_commit"]] * 4

    figures = {
        c.agent.persona or "golden": campaign_fault_figures(campaign_id=c.pk)
        for c in (naive, careful, golden)
    }
    assert figures["naive-retry"]["pass_at_1"] == 0.0
    assert figures["careful-retry"]["pass_at_1"] == 1.0
    assert figures["golden"]["pass_at_1"] == 1.0
    assert figures["naive-retry"]["duplicate_effect"]["count"] == 4
    assert figures["careful-retry"]["duplicate_effect"]["count"] == 0
    assert fault_figure_rows(figures["careful-retry"]) == [
        {
            "kind": "error_after_commit",
            "fired": 4,
            "recovered": 4,
            "recovery_rate": 1.0,
            "recovery_lo": pytest.approx(0.5101, abs=1e-4),
            "recovery_hi": 1.0,
            "duplicate_effects": 0,
        }
    ]


def test_same_plan_seed_same_faults_across_campaigns(starter_suite, alice, team_a):
    plan = {"kinds": ["error_after_commit", "error_before_commit"], "rate": 0.5, "seed": 9}
    first = _campaign(starter_suite, alice, team_a, "sim:naive-retry", plan=plan, n=3)
    second = _campaign(starter_suite, alice, team_a, "sim:naive-retry", plan=plan, n=3)

    def faults(campaign):
        rows = Attempt.objects.filter(campaign=campaign).order_by("task__task_id", "index")
        return list(rows.values_list("task__task_id", "index", "result__extra__faults__fired"))

    assert faults(first) == faults(second)


def test_replicate_keeps_the_plan(make_campaign, alice):
    campaign = make_campaign("golden", fault_plan=AFTER_COMMIT)
    replicate = campaign_replicate(campaign=campaign, owner=alice, start=False)
    assert replicate.fault_plan == campaign.fault_plan


def test_run_campaign_stores_the_fault_plan(starter_suite, alice):
    alice.is_superuser = True
    alice.save()
    call_command(
        "run_campaign",
        "--agent",
        "sim:naive-retry",
        "--repeat",
        "1",
        "--owner",
        "alice",
        "--tasks",
        *REFUND_TASKS,
        "--fault-plan",
        '{"kinds": ["error_after_commit"], "at_calls": [0]}',
        stdout=io.StringIO(),
    )
    campaign = Campaign.objects.get()
    assert (campaign.fault_plan["kinds"], campaign.fault_plan["at_calls"]) == (["error_after_commit"], [0])


def test_run_campaign_refuses_a_bad_plan(starter_suite, alice):
    with pytest.raises(CommandError, match="--fault-plan: not JSON"):
        call_command("run_campaign", "--agent", "golden", "--owner", "alice", "--fault-plan", "{nope")


def _launch_form(team_a, starter_suite, **fault_fields):
    from apps.campaigns.forms import CampaignLaunchForm
    from apps.core.models import Team
    from tests.campaigns.test_operations import _launch_data

    return CampaignLaunchForm(
        _launch_data(team_a, agent_config_for("golden"), starter_suite, **fault_fields),
        teams=Team.objects.filter(pk=team_a.pk),
    )


def test_launch_page_stores_the_chosen_fault_plan(client, alice, team_a, starter_suite, monkeypatch):
    from apps.campaigns import services
    from tests.campaigns.test_operations import _launch_data

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)
    client.force_login(alice)
    page = client.get("/campaigns/new/").content.decode()
    assert page.count('name="fault_kinds"') == 6
    assert '<fieldset id="fault-plan">' in page

    response = client.post(
        "/campaigns/new/",
        _launch_data(
            team_a,
            agent_config_for("golden"),
            starter_suite,
            fault_kinds=["error_after_commit", "duplicate_delivery"],
            fault_at_calls="0, 2",
            fault_tools="named",
            fault_tool_names="refund_payment, cancel_order",
            fault_seed="11",
        ),
    )

    assert response.status_code == 302
    assert Campaign.objects.get(name="launched").fault_plan == {
        "kinds": ["error_after_commit", "duplicate_delivery"],
        "rate": 0.0,
        "at_calls": [0, 2],
        "tools": "named",
        "tool_names": ["refund_payment", "cancel_order"],
        "seed": 11,
        "slow_ms": 200.0,
        "timeout_s": 30.0,
    }


def test_launch_form_without_kinds_has_no_plan_and_bad_plans_name_their_field(team_a, starter_suite):
    plain = _launch_form(team_a, starter_suite, fault_rate="0.5")
    assert plain.is_valid() is True
    assert plain.cleaned_data["fault_plan"] is None

    both = _launch_form(
        team_a, starter_suite, fault_kinds=["slow_reply"], fault_rate="0.5", fault_at_calls="1"
    )
    assert both.is_valid() is False
    assert both.errors["fault_rate"] == ["rate and at_calls: give one of them, not both"]

    unnamed = _launch_form(team_a, starter_suite, fault_kinds=["slow_reply"], fault_tools="named")
    assert unnamed.is_valid() is False
    assert unnamed.errors["fault_tool_names"] == ["tool_names: name the tools when tools is 'named'"]

    garbled = _launch_form(team_a, starter_suite, fault_kinds=["slow_reply"], fault_at_calls="first")
    assert garbled.is_valid() is False
    assert garbled.errors["fault_at_calls"] == ["whole numbers separated by commas, e.g. 0, 2"]

    negative = _launch_form(team_a, starter_suite, fault_kinds=["slow_reply"], fault_at_calls="-1")
    assert negative.is_valid() is False
    assert negative.errors["fault_at_calls"] == ["at_calls: ordinals are 0-based and not negative"]


def test_campaign_page_robustness_section_with_the_paired_clean_campaign(
    client, starter_suite, alice, team_a
):
    faulted = _campaign(starter_suite, alice, team_a, "sim:naive-retry")
    clean = _campaign(starter_suite, alice, team_a, "sim:naive-retry", plan=None)
    other_seed = _campaign(starter_suite, alice, team_a, "sim:careful-retry", plan=None)
    assert Campaign.objects.get(pk=clean.pk).status == Campaign.Status.DONE
    client.force_login(alice)

    response = client.get(f"/campaigns/{faulted.pk}/")

    robustness = response.context["robustness"]
    assert robustness.clean == clean and robustness.clean != other_seed
    assert robustness.rows == [
        {
            "kind": "error_after_commit",
            "fired": 4,
            "recovered": 0,
            "recovery_rate": 0.0,
            "recovery_lo": 0.0,
            "recovery_hi": pytest.approx(0.4899, abs=1e-4),
            "duplicate_effects": 4,
        }
    ]
    assert robustness.delta["tasks"] == 2
    assert robustness.delta["pass_at_1"] | {"mdd": None} == {
        "faulted": 0.0,
        "clean": 1.0,
        "delta": -1.0,
        "mdd": None,
        "clears": True,
    }
    assert robustness.delta["all_n"]["delta"] == -1.0
    html = response.content.decode()
    assert f'id="robustness-{faulted.pk}"' in html
    assert '<tr data-kind="error_after_commit"><td>error_after_commit</td><td class="num">4</td>' in html
    assert (
        '<tr data-metric="pass_at_1"><td>pass@1</td><td class="num">0.0%</td><td class="num">100.0%</td><td class="num">-100.0 pp</td>'
        in html
    )
    assert f'id="none-fired-{faulted.pk}">0 of 4</dd>' in html

    assert client.get(f"/campaigns/{clean.pk}/").context["robustness"] is None


def test_a_plan_that_could_not_fire_is_counted_apart_on_the_page(client, starter_suite, alice, team_a):
    late = {"kinds": ["error_after_commit"], "at_calls": [7]}
    campaign = _campaign(starter_suite, alice, team_a, "golden", plan=late, n=1)
    client.force_login(alice)

    response = client.get(f"/campaigns/{campaign.pk}/")

    figures = response.context["robustness"].figures
    assert (figures["none_fired"], figures["graded"], figures["unfired_ordinals"]) == (2, 2, 2)
    assert response.context["robustness"].rows == []
    html = response.content.decode()
    assert f'id="none-fired-{campaign.pk}">2 of 2</dd>' in html
    assert "2 planned call ordinals never reached" in html
    assert f'id="no-clean-pair-{campaign.pk}"' in html


def test_compare_page_shows_the_robustness_of_the_faulted_campaign_against_the_clean_one(
    client, starter_suite, alice, team_a
):
    faulted = _campaign(starter_suite, alice, team_a, "sim:careful-retry")
    clean = _campaign(starter_suite, alice, team_a, "sim:careful-retry", plan=None)
    client.force_login(alice)

    response = client.get(f"/compare/?a={faulted.pk}&b={clean.pk}")

    [(campaign, robustness)] = response.context["robustness_sections"]
    assert (campaign, robustness.clean) == (faulted, clean)
    assert [(row["kind"], row["fired"], row["recovered"]) for row in robustness.rows] == [
        ("error_after_commit", 4, 4)
    ]
    assert (robustness.delta["pass_at_1"]["delta"], robustness.delta["pass_at_1"]["clears"]) == (0.0, False)
    html = response.content.decode()
    assert f"<h2>Robustness under faults: {faulted.name}</h2>" in html
    assert "no: within run-to-run noise" in html

    reversed_pair = client.get(f"/compare/?a={clean.pk}&b={faulted.pk}").context["robustness_sections"]
    assert [c for c, _ in reversed_pair] == [faulted]


def test_attempt_page_marks_the_faulted_call_and_its_retry_and_raw_json_holds_the_record(
    client, starter_suite, alice, team_a
):
    import json

    campaign = _campaign(starter_suite, alice, team_a, "sim:naive-retry", n=1)
    attempt = Attempt.objects.filter(campaign=campaign, task__task_id=REFUND_TASKS[0]).get()
    stored = attempt.result["extra"]["faults"]
    [fired] = stored["fired"]
    [effect, *_] = stored["duplicate_effects"]
    client.force_login(alice)

    response = client.get(f"/attempts/{attempt.pk}/")

    steps = {s["call"].index: s for s in response.context["steps"] if s["kind"] == "call"}
    assert steps[fired["call"]]["fault"] == {
        "kind": "error_after_commit",
        "label": "error after commit",
        "committed": True,
        "detail": "reply withheld",
        "duplicate": True,
    }
    assert effect["repeats"] and steps[effect["repeats"][0]]["fault"] == {
        "repeat_of": fired["call"],
        "duplicate": True,
    }
    html = response.content.decode()
    assert (
        '<p class="fault-marker badge fail" data-fault-kind="error_after_commit" data-committed="true">'
        "injected fault: error after commit · the call's effect was committed · reply withheld"
        " · left a duplicate effect</p>"
    ) in html
    assert f'data-repeat-of="{fired["call"]}"' in html

    raw = json.loads(client.get(f"/attempts/{attempt.pk}/raw.json").content)
    assert raw["extra"]["faults"]["fired"] == stored["fired"]

    # A stored record is data, never markup.
    stored["fired"][0]["detail"] = "<script>alert(1)</script>"
    Attempt.objects.filter(pk=attempt.pk).update(
        result={**attempt.result, "extra": {**attempt.result["extra"], "faults": stored}}
    )
    html = client.get(f"/attempts/{attempt.pk}/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html


def test_leaderboard_robustness_preset_reads_the_stored_fault_records(client, starter_suite, alice, team_a):
    naive = _campaign(starter_suite, alice, team_a, "sim:naive-retry")
    careful = _campaign(starter_suite, alice, team_a, "sim:careful-retry")
    clean = _campaign(starter_suite, alice, team_a, "sim:naive-retry", plan=None)
    client.force_login(alice)

    response = client.get("/leaderboard/?preset=robustness")

    robustness = response.context["robustness"]
    assert sorted(robustness) == sorted([naive.pk, careful.pk])  # the clean campaign has no record to read
    assert robustness[naive.pk] == campaign_fault_figures(campaign_id=naive.pk)
    assert robustness[careful.pk]["kinds"]["error_after_commit"]["recovered"]["count"] == 4
    html = response.content.decode()
    assert '<div data-kind="error_after_commit">error_after_commit: 0/4' in html
    assert '<div data-kind="error_after_commit">error_after_commit: 4/4' in html
    assert html.count('<td class="fault-plan"><span class="muted">none</span></td>') == 1
    assert ">planned, not fired<" in html
    assert ">planned, not fired<" not in client.get("/leaderboard/").content.decode()
    assert clean.pk not in robustness


def test_injected_fault_is_a_signature_element_and_the_backfill_agrees(starter_suite, alice, team_a):
    from apps.attempts.models import AttemptSignature
    from apps.attempts.signatures import backfill_signatures

    campaign = _campaign(starter_suite, alice, team_a, "sim:naive-retry", n=1)
    rows = AttemptSignature.objects.filter(attempt__campaign=campaign).values_list("digest", "variant__items")
    recorded = dict(rows)
    assert len(recorded) == 2
    for items in recorded.values():
        faults = [item[:4] for item in items if item[0] == "fault_injected"]
        assert [f[:3] for f in faults] == [["fault_injected", "error_after_commit", "committed"]]

    report = backfill_signatures(campaign_ids=[campaign.pk], recompute=True)

    assert (report.scanned, report.changed) == (2, 0)  # the backfill signs the fault the same way
    assert dict(rows) == recorded


def test_triage_filters_by_injected_fault_kind(client, starter_suite, alice, team_a):
    naive = _campaign(starter_suite, alice, team_a, "sim:naive-retry", n=1)
    before = _campaign(
        starter_suite,
        alice,
        team_a,
        "sim:naive-retry",
        plan={"kinds": ["error_before_commit"], "at_calls": [0]},
        n=1,
    )
    client.force_login(alice)

    def queued(fault):
        response = client.get(f"/triage/?scope=failed&fault={fault}")
        return sorted(a.pk for a in response.context["page"].object_list)

    after_commit = sorted(Attempt.objects.filter(campaign=naive, verdict="fail").values_list("pk", flat=True))
    assert after_commit and queued("error_after_commit") == after_commit
    failed_before = sorted(
        Attempt.objects.filter(campaign=before, verdict="fail").values_list("pk", flat=True)
    )
    assert queued("error_before_commit") == failed_before
    assert queued("slow_reply") == []
    page = client.get("/triage/?scope=failed&fault=error_after_commit").content.decode()
    assert '<option value="error_after_commit" selected>' in page


def test_robustness_exports_as_csv_xlsx_and_api_from_the_stored_records(client, starter_suite, alice, team_a):
    import csv
    import io as _io

    from openpyxl import load_workbook
    from rest_framework.authtoken.models import Token

    naive = _campaign(starter_suite, alice, team_a, "sim:naive-retry")
    clean = _campaign(starter_suite, alice, team_a, "sim:naive-retry", plan=None)
    client.force_login(alice)

    response = client.get(f"/exports/tables/robustness.csv?c={naive.pk}&c={clean.pk}")

    lines = [line for line in response.content.decode().splitlines() if not line.startswith("#")]
    rows = list(csv.reader(lines))
    header, body = rows[0], rows[1:]
    assert header[:9] == [
        "campaign id",
        "campaign",
        "fault kind",
        "fired in (attempts)",
        "recovered",
        "recovery rate",
        "recovery 95% low",
        "recovery 95% high",
        "with duplicate effects",
    ]
    assert len(body) == 1  # the clean campaign has no plan: no row
    row = dict(zip(header, body[0], strict=True))
    assert (row["campaign id"], row["fault kind"], row["fired in (attempts)"], row["recovered"]) == (
        str(naive.pk),
        "error_after_commit",
        "4",
        "0",
    )
    assert (row["duplicate-effect attempts"], row["of committed commit-point faults"]) == ("4", "4")
    assert (row["paired clean campaign id"], row["Δ pass@1 vs clean"], row["Δ all-N vs clean"]) == (
        str(clean.pk),
        "-1.0",
        "-1.0",
    )

    xlsx = client.get(f"/exports/tables/robustness.xlsx?c={naive.pk}")
    sheet = load_workbook(_io.BytesIO(xlsx.content)).worksheets[0]
    values = [[cell.value for cell in line] for line in sheet.iter_rows()]
    start = next(i for i, line in enumerate(values) if "fault kind" in line)
    kind_column = values[start].index("fault kind")
    assert [line[kind_column] for line in values[start + 1 :] if line[0] == naive.pk] == [
        "error_after_commit"
    ]

    token, _ = Token.objects.get_or_create(user=alice)
    api = client.get(f"/api/campaigns/{naive.pk}/robustness/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert api.status_code == 200
    data = api.json()
    assert data["kinds"] == [
        {
            "kind": "error_after_commit",
            "fired": 4,
            "recovered": 0,
            "recovery_rate": 0.0,
            "recovery_lo": 0.0,
            "recovery_hi": pytest.approx(0.4899, abs=1e-4),
            "duplicate_effects": 4,
        }
    ]
    assert data["figures"] == campaign_fault_figures(campaign_id=naive.pk)
    assert (data["clean_campaign"], data["delta"]["all_n"]["delta"]) == (clean.pk, -1.0)
    no_plan = client.get(f"/api/campaigns/{clean.pk}/robustness/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert no_plan.status_code == 404


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_postgresql_backfill_signs_injected_faults_as_the_recording_path_does(starter_suite, alice, team_a):
    from apps.attempts.models import AttemptSignature
    from apps.attempts.signatures import backfill_signatures

    campaign = _campaign(starter_suite, alice, team_a, "sim:naive-retry", n=1)
    rows = AttemptSignature.objects.filter(attempt__campaign=campaign)
    recorded = dict(rows.values_list("attempt_id", "variant__items"))
    assert all(any(item[0] == "fault_injected" for item in items) for items in recorded.values())
    rows.delete()

    report = backfill_signatures(campaign_ids=[campaign.pk])

    assert (report.scanned, report.changed) == (2, 2)
    assert dict(rows.values_list("attempt_id", "variant__items")) == recorded
