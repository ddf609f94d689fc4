"""Issue 29: the re-grade impact report on every surface (page, CLI, API, XLSX), who may apply it,
the engine's not-re-gradable cases, and pages and exports naming the versions their figures come from."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from django.core.management import call_command
from openpyxl import load_workbook

from apps.attempts.models import Attempt
from apps.regrade.models import RegradeRun, VerdictVersion
from apps.suites.models import Task
from tb_engine.attempt_setup import run_task
from tb_engine.loader import load_builtin_suite
from tb_engine.regrade import S0_CHANGED, regrade_stored, task_basis
from tb_engine.spec_json import task_from_dict

pytestmark = pytest.mark.django_db

TASK = "retail/address_change_before_shipment"


@pytest.fixture
def regraded(run_campaign):
    """Two small campaigns, then the task's last golden call dropped (every attempt that made it fails now)."""
    campaigns = [
        run_campaign(agent, tasks=56, n=2, name=agent, task_ids=(TASK, "retail/missing_item_partial_refund"))
        for agent in ("golden", "sim:cautious")
    ]
    task = Task.objects.get(task_id=TASK, suite=campaigns[0].suite)
    spec = dict(task.spec)
    spec["golden"] = spec["golden"][:-1]
    task.spec, task.content_hash = spec, task_from_dict(spec).content_hash()
    task.save(update_fields=["spec", "content_hash"])
    return campaigns


def test_cli_previews_reports_to_xlsx_and_applies(regraded, tmp_path):
    out = io.StringIO()
    ids = [str(c.pk) for c in regraded]
    call_command(
        "regrade",
        "preview",
        "--campaign",
        ids[0],
        "--campaign",
        ids[1],
        "--xlsx",
        str(tmp_path / "r.xlsx"),
        stdout=out,
    )
    run = RegradeRun.objects.get()
    golden_passes = Attempt.objects.filter(campaign=regraded[0], task__task_id=TASK, verdict="pass").count()
    pass_to_fail = run.versions.filter(kind="preview", previous_verdict="pass", verdict="fail").count()
    assert golden_passes == 2 and run.report["flips"]["pass→fail"] == pass_to_fail >= golden_passes
    assert f"re-grade #{run.pk} (preview)" in out.getvalue()
    assert f"{sum(run.report['flips'].values())} verdicts flip" in out.getvalue()
    book = load_workbook(tmp_path / "r.xlsx")
    assert book.sheetnames == ["Summary", "Campaigns", "Flips", "Reversals", "Task versions"]
    assert book["Flips"].max_row - 1 == sum(run.report["flips"].values())
    assert [c.value for c in book["Campaigns"][2]][0] == "golden"

    call_command("regrade", "apply", str(run.pk), stdout=io.StringIO())
    run.refresh_from_db()
    assert run.status == "applied"
    assert Attempt.objects.filter(campaign=regraded[0], task__task_id=TASK, verdict="pass").count() == 0


def test_page_and_api_show_the_report_and_only_an_operator_applies(regraded, client, alice, bob):
    client.force_login(bob)
    assert client.post("/regrades/start/", {"campaign": [c.pk for c in regraded]}).status_code == 403
    client.force_login(alice)
    response = client.post("/regrades/start/", {"campaign": [c.pk for c in regraded]})
    run = RegradeRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/regrades/{run.pk}/"
    page = client.get(f"/regrades/{run.pk}/").content.decode()
    assert 'id="regrade-apply"' in page and "pass→fail" in page and TASK in page

    client.force_login(bob)
    assert 'id="regrade-apply"' not in client.get(f"/regrades/{run.pk}/").content.decode()
    assert client.post(f"/regrades/{run.pk}/apply/").status_code == 403
    api = client.get(f"/api/regrades/{run.pk}/").json()
    assert (api["status"], api["flip_counts"], len(api["flips"])) == (
        "preview",
        run.report["flips"],
        sum(run.report["flips"].values()),
    )
    assert client.post(f"/api/regrades/{run.pk}/apply/").status_code == 403
    xlsx = client.get(f"/regrades/{run.pk}/report.xlsx")
    assert load_workbook(io.BytesIO(xlsx.content)).sheetnames[0] == "Summary"

    client.force_login(alice)
    applied = client.post(f"/api/regrades/{run.pk}/apply/").json()
    assert applied["status"] == "applied"
    assert client.post(f"/api/regrades/{run.pk}/apply/").status_code == 409


def test_pages_and_exports_name_the_task_and_grader_versions_of_their_figures(regraded, client, alice):
    client.force_login(alice)
    campaign = regraded[0]
    before = client.get(f"/regrades/campaigns/{campaign.pk}/versions/").content.decode()
    assert f"{campaign.suite_hash[:12]}) as run; grader: {campaign.harness_version}" in before
    response = client.post(
        "/api/regrades/",
        data=json.dumps({"campaigns": [c.pk for c in regraded]}),
        content_type="application/json",
    )
    run_id = response.json()["id"]
    client.post(f"/api/regrades/{run_id}/apply/")

    assert (
        f"re-grade #{run_id}" in client.get(f"/regrades/campaigns/{campaign.pk}/versions/").content.decode()
    )
    assert 'hx-get="/regrades/campaigns/' in client.get(f"/campaigns/{campaign.pk}/").content.decode()
    leaderboard = client.get("/").content.decode() + client.get("/leaderboard/").content.decode()
    assert f"re-grade #{run_id}" in leaderboard
    export = client.get(f"/exports/tables/leaderboard.csv?c={campaign.pk}").content.decode()
    assert f"# figures from: tasks: {campaign.suite_version} re-graded" in export
    flipped = VerdictVersion.objects.filter(run_id=run_id, kind="applied").first()
    attempt_page = client.get(f"/attempts/{flipped.attempt_id}/").content.decode()
    assert 'id="verdict-versions"' in attempt_page and "As run" in attempt_page


def test_an_attempt_whose_effects_do_not_rebuild_sr_is_not_regradable():
    suite = load_builtin_suite("starter")
    task = suite.tasks[TASK]
    domain = suite.domains[task.domain]
    stored = run_task(domain, task, agent="golden").to_dict()
    basis = task_basis(domain, task)
    assert regrade_stored(basis, stored).verdict == "pass"
    tampered = json.loads(json.dumps(stored))
    tampered["effects"][0]["before"] = "not what S0 holds"
    outcome = regrade_stored(basis, tampered)
    assert (outcome.regradable, outcome.verdict) == (False, "")
    assert outcome.reason.startswith("SR cannot be rebuilt from the stored effects: ")
    # A stored diff whose SR side the effects do not produce: the record disagrees with itself.
    inconsistent = json.loads(json.dumps(stored))
    effect = stored["effects"][0]
    inconsistent["diff"] = [
        {"kind": "wrong_value", "table": effect["table"], "key": effect["key"], "field": effect["field"],
         "initial": effect["before"], "result": "something else", "golden": effect["after"]}
    ]  # fmt: skip
    assert regrade_stored(basis, inconsistent).reason.endswith(
        "the stored diff's SR value differs from the rebuilt SR's"
    )


def test_an_attempt_that_ran_on_another_s0_is_not_regradable():
    """Item 3 of issue 29: the attempt stores which S0 it ran against; a task whose initial data has
    changed since (here: one more row in its data patch, a row the attempt never touches) is not
    re-graded from effects that would apply to another state. An attempt stored without the digest
    is re-graded as before."""
    suite = load_builtin_suite("starter")
    task = suite.tasks[TASK]
    domain = suite.domains[task.domain]
    stored = run_task(domain, task, agent="golden").to_dict()
    basis = task_basis(domain, task)
    assert stored["extra"]["initial_digest"] == basis.initial_digest != ""
    assert regrade_stored(basis, stored).verdict == "pass"

    table = next(iter(task.data_patch)) if task.data_patch else None
    assert table is not None, "the task must patch its data for this check"
    rows = [dict(row) for row in task.data_patch[table]]
    spec = domain.tables[table]
    extra_row = dict(rows[0])
    key = spec.primary_key[0]
    extra_row[key] = f"{extra_row[key]}-added" if isinstance(extra_row[key], str) else extra_row[key] + 100000
    changed = dataclasses.replace(task, data_patch={**task.data_patch, table: [*rows, extra_row]})
    moved = task_basis(domain, changed)
    assert moved.initial_digest != basis.initial_digest
    assert regrade_stored(moved, stored).reason == S0_CHANGED

    older = json.loads(json.dumps(stored))
    del older["extra"]["initial_digest"]
    assert regrade_stored(basis, older).verdict == "pass"
