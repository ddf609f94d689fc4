"""`manage.py gate`: exit codes, the rule table and JUnit XML for pass, fail by threshold, fail by a
significant drop, and a drop that stays under the noise floor."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ElementTree

import pytest
from django.core.management import CommandError, call_command

from apps.figures import selectors as figures

pytestmark = pytest.mark.django_db


def run_gate(*args: str) -> tuple[int, str]:
    """(exit code, stdout) of the command as a CI job would see them."""
    out = io.StringIO()
    try:
        call_command("gate", *args, stdout=out)
    except SystemExit as exit_:
        return int(exit_.code), out.getvalue()
    except CommandError as error:
        return error.returncode, str(error)
    return 0, out.getvalue()


def junit(path) -> ElementTree.Element:
    return ElementTree.parse(path).getroot()


def test_gate_passes_when_every_rule_holds_and_writes_junit_without_failures(baseline, small_drop, tmp_path):
    report = tmp_path / "gate.xml"
    code, out = run_gate(
        "--campaign", str(baseline.pk), "--min-pass1", "0.6", "--min-all-n", "0.4", "--junit", str(report)
    )
    assert code == 0
    assert "PASS: 2 rules hold" in out
    root = junit(report)
    assert (root.get("tests"), root.get("failures")) == ("2", "0")
    assert [case.get("name") for case in root.iter("testcase")] == ["min-pass1", "min-all-n"]
    assert list(root.iter("failure")) == []


def test_gate_fails_by_threshold_with_exit_code_1_and_a_junit_failure(baseline, tmp_path):
    report = tmp_path / "gate.xml"
    code, out = run_gate("--campaign", str(baseline.pk), "--min-pass1", "0.9", "--junit", str(report))
    pass1 = figures.campaign_figures(figures.per_task_tables([baseline]), baseline).pass_at_1.value
    assert code == 1
    assert "FAIL: 1 of 1 rules failed" in out
    assert f"{pass1 * 100:.1f}% is below 90.0%" in out
    failures = list(junit(report).iter("failure"))
    assert [f.get("message") for f in failures] == [f"{pass1 * 100:.1f}% is below 90.0%"]


def test_gate_fails_on_a_drop_that_clears_the_noise_floor(baseline, large_drop, tmp_path):
    report = tmp_path / "gate.xml"
    code, out = run_gate(
        "--campaign",
        str(large_drop.pk),
        "--baseline",
        str(baseline.pk),
        "--max-drop-pp",
        "2",
        "--junit",
        str(report),
    )
    compared = figures.comparison(figures.per_task_tables([large_drop, baseline]), large_drop, baseline)
    assert compared.delta_pass_at_1.value == pytest.approx(-0.225)
    assert compared.delta_pass_at_1.clears is True
    assert code == 1
    assert "drop +22.5 pp exceeds 2.0 pp and clears the noise floor" in out
    failed = [case.get("name") for case in junit(report).iter("testcase") if case.find("failure") is not None]
    assert failed[0] == "max-drop-pp pass@1"


def test_gate_passes_a_drop_beyond_the_allowance_that_stays_under_the_noise_floor(
    baseline, small_drop, tmp_path
):
    report = tmp_path / "gate.xml"
    code, out = run_gate(
        "--campaign",
        str(small_drop.pk),
        "--baseline",
        str(baseline.pk),
        "--max-drop-pp",
        "1",
        "--junit",
        str(report),
    )
    compared = figures.comparison(figures.per_task_tables([small_drop, baseline]), small_drop, baseline)
    floor = compared.delta_pass_at_1.mdd * 100
    assert compared.delta_pass_at_1.value == pytest.approx(-0.025)
    assert floor > 2.5
    assert code == 0
    assert (
        f"drop +2.5 pp exceeds 1.0 pp but is below the noise floor ({floor:.1f} pp): not significant" in out
    )
    assert junit(report).get("failures") == "0"


def test_gate_table_names_rule_value_threshold_interval_floor_verdict_and_what_decides(baseline, small_drop):
    code, out = run_gate(
        "--campaign", str(small_drop.pk), "--baseline", str(baseline.pk), "--max-drop-pp", "1"
    )
    header = out.splitlines()[2].split()
    assert header == ["rule", "value", "threshold", "interval", "floor", "verdict", "uses"]
    assert "drop > allowed and drop >= MDD (paired task bootstrap, 1.96 + 0.84 SE)" in out
    assert code == 0


def test_gate_cannot_run_exit_code_2(baseline, finished_campaign, make_campaign):
    running = make_campaign("golden", tasks=2, n=4)
    running.status = "running"
    running.save(update_fields=["status"])
    assert run_gate("--campaign", "999999", "--min-pass1", "0.5")[0] == 2
    assert run_gate("--campaign", str(running.pk), "--min-pass1", "0.5") == (
        2,
        f"campaign: campaign {running.pk} ({running.name}) is running; gate a finished campaign",
    )
    assert run_gate("--campaign", str(baseline.pk), "--min-pass1", "60")[0] == 2
    assert run_gate("--campaign", str(baseline.pk), "--max-drop-pp", "1")[1] == (
        "max-drop-pp: needs a baseline campaign to measure the drop from"
    )
    other_n = finished_campaign([2, 2], name="N = 2", n=2)
    assert (
        run_gate("--campaign", str(baseline.pk), "--baseline", str(other_n.pk), "--max-drop-pp", "1")[0] == 2
    )


def test_gate_domain_restricts_every_rule_to_that_domains_tasks(baseline):
    tables = figures.per_task_tables([baseline])
    domain = sorted(set(tables.frame(baseline)["domain"]))[0]
    value = figures.campaign_figures(tables, baseline, domain=domain).pass_at_1.value
    code, out = run_gate("--campaign", str(baseline.pk), "--min-pass1", "0.0", "--domain", domain)
    assert code == 0
    assert f"min-pass1  {value * 100:.1f}%" in out
    assert f"tasks of domain {domain}" in out
