"""import_tb_results: tb infer rows -> a finished campaign; our figures beside tb agg's."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.models import Campaign
from apps.suites.models import Suite
from tests.thinkingbox.conftest import SHARED, table_counts

APPEND_R6 = SHARED / "tb_infer/append_r6.jsonl"
SINGLE = SHARED / "tb_infer/single_append_full.yaml"


def _import(path, *extra) -> str:
    out = StringIO()
    call_command("import_tb_results", str(path), *extra, stdout=out)
    return out.getvalue()


def _rows() -> list[dict]:
    return [json.loads(line) for line in APPEND_R6.read_text().splitlines() if line.strip()]


def _write(tmp_path, rows, name="rows.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return str(path)


@pytest.mark.django_db
def test_import_tb_results_makes_a_done_campaign_with_one_attempt_per_row(alice, team_a):
    _import(APPEND_R6, "--campaign", "r6", "--team", team_a.slug)
    campaign = Campaign.objects.get(name="r6")
    assert (campaign.status, campaign.n_attempts, campaign.owner, campaign.team) == ("done", 6, alice, team_a)
    assert (campaign.agent.name, campaign.agent.kind, campaign.agent.is_simulation) == (
        "tb:think",
        "openai",
        False,
    )
    assert campaign.agent.parameters["imported"] == "thinkingbox"
    attempts = list(Attempt.objects.filter(campaign=campaign).order_by("index"))
    assert [a.index for a in attempts] == [0, 1, 2, 3, 4, 5]
    assert [a.verdict for a in attempts] == ["pass", "pass", "fail", "pass", "fail", "pass"]
    assert {a.status for a in attempts} == {"done"}
    assert attempts[0].output_tokens > 0
    assert attempts[0].result["transcript"]["messages"][0]["role"] == "system"
    assert attempts[0].task_hash == attempts[0].task.content_hash
    summary = TaskSummary.objects.get(campaign=campaign)
    assert (summary.n_done, summary.n_pass, summary.n_infra_error) == (6, 4, 0)


@pytest.mark.django_db
def test_import_tb_results_creates_a_minimal_suite_when_none_matches(alice, team_a):
    _import(APPEND_R6, "--campaign", "r6", "--team", team_a.slug)
    suite = Campaign.objects.get(name="r6").suite
    assert (suite.name, suite.source, suite.evaluation_only, suite.team) == (
        "tb-results-team-a-r6",
        Suite.Source.THINKINGBOX,
        True,
        team_a,
    )
    assert list(suite.tasks.values_list("task_id", flat=True)) == [
        "cloud_drive.py:test_append_some_more_text"
    ]
    assert suite.tasks.get().validation_detail.startswith("created from tb infer rows")


@pytest.mark.django_db
def test_import_tb_results_prints_tb_agg_block_and_matching_figures(alice, team_a):
    output = _import(APPEND_R6, "--campaign", "r6", "--team", team_a.slug)
    expected = SHARED.joinpath("tb_infer/agg_append_r6.txt").read_text().splitlines()
    block = expected[expected.index("Number of tests: 1") :]
    assert [line for line in output.splitlines() if line in block] == block
    columns = {
        cells[0]: cells[1:3] for cells in (re.split(r"\s{2,}", line.strip()) for line in output.splitlines())
    }
    assert columns["mean pass / pass@1"] == ["0.67", "0.67"]
    assert columns["pass@1"] == ["0.67", "0.67"]
    assert columns["pass@5"] == ["1.00", "1.00"]
    assert columns["pass^5 plug-in (c/n)^k"] == ["0.13", "0.13"]
    assert columns["pass^5 unbiased C(c,k)/C(n,k)"] == ["—", "0.00"]


@pytest.mark.django_db
def test_import_tb_results_single_yaml_keeps_effects_and_our_diff(alice, team_a):
    _import(SINGLE, "--campaign", "single", "--team", team_a.slug)
    attempt = Attempt.objects.get(campaign__name="single")
    evidence = attempt.result["extra"]["thinkingbox"]
    assert attempt.status == "done"
    assert set(evidence) >= {"effects", "raw_effects", "repetition", "finish_reason"}


@pytest.mark.django_db
def test_import_tb_results_system_error_row_is_infra_error(alice, team_a, tmp_path):
    rows = _rows()
    rows[1]["is_system_error"] = True
    rows[1]["metadata"]["error"] = {"type": "TimeoutError", "message": "LLM endpoint timed out"}
    output = _import(_write(tmp_path, rows), "--campaign", "err", "--team", team_a.slug)
    attempt = Attempt.objects.get(campaign__name="err", index=1)
    assert (attempt.status, attempt.verdict) == ("infra_error", "")
    assert attempt.error_detail == "tb infer system error: TimeoutError: LLM endpoint timed out"
    summary = TaskSummary.objects.get(campaign__name="err")
    assert (summary.n_done, summary.n_pass, summary.n_infra_error) == (5, 3, 1)
    cells = [re.split(r"\s{2,}", line) for line in output.splitlines()]
    runs = next(row for row in cells if row[0] == "runs")
    assert runs[1:3] == ["6", "5 done + 1 infra errors"]


@pytest.mark.django_db
def test_import_tb_results_matches_an_imported_suite(alice, team_a, shop_dataset, tmp_path):
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(shop_dataset),
        "--suite-name",
        "shop",
        "--no-launch",
        stdout=StringIO(),
    )
    rows = _rows()[:2]
    for row in rows:
        row["uid"] = "shop.py:test_open_and_close"
    _import(_write(tmp_path, rows), "--campaign", "shop-run", "--team", team_a.slug)
    campaign = Campaign.objects.get(name="shop-run")
    assert campaign.suite.name == "shop"
    assert table_counts()["Suite"] == 1


@pytest.mark.parametrize(
    "mangle, message",
    [
        (
            lambda rows: rows[:2] + [json.dumps(rows[2])[:500]] + rows[3:],
            "rows.jsonl:3: invalid or truncated JSON",
        ),
        (
            lambda rows: rows[:3] + [{**rows[3], "messages": "hello"}] + rows[4:],
            "rows.jsonl:4: test cloud_drive.py:test_append_some_more_text: field messages must be list, got str",
        ),
        (
            lambda rows: rows[:4] + [{**rows[4], "messages": [{"T": "Hologram", "content": "x"}]}] + rows[5:],
            "rows.jsonl:5: test cloud_drive.py:test_append_some_more_text: messages[0]: unknown message kind T='Hologram'",
        ),
        (
            lambda rows: rows + [rows[0]],
            "rows.jsonl:7: duplicate attempt: cloud_drive.py:test_append_some_more_text repetition 0 (also on line 1)",
        ),
    ],
    ids=["truncated", "wrong-type", "unknown-kind", "duplicate"],
)
@pytest.mark.django_db
def test_import_tb_results_bad_rows_name_file_and_line_and_write_nothing(
    alice, team_a, tmp_path, mangle, message
):
    _import(APPEND_R6, "--campaign", "kept", "--team", team_a.slug)
    before = table_counts()
    path = _write(tmp_path, mangle(_rows()))
    with pytest.raises(CommandError) as raised:
        _import(path, "--campaign", "bad", "--team", team_a.slug)
    assert str(raised.value).startswith(
        str(tmp_path / message.split(":")[0]) + ":" + message.split(":", 1)[1]
    )
    assert table_counts() == before


@pytest.mark.django_db
def test_import_tb_results_existing_campaign_name_is_refused(alice, team_a):
    _import(APPEND_R6, "--campaign", "r6", "--team", team_a.slug)
    before = table_counts()
    with pytest.raises(CommandError) as raised:
        _import(APPEND_R6, "--campaign", "r6", "--team", team_a.slug)
    assert str(raised.value) == f"{APPEND_R6}: campaign 'r6' already exists in team {team_a.slug}"
    assert table_counts() == before


@pytest.mark.django_db
def test_import_tb_results_unknown_suite_is_an_error(alice, team_a):
    with pytest.raises(CommandError) as raised:
        _import(APPEND_R6, "--campaign", "r6", "--team", team_a.slug, "--suite", "nope")
    assert str(raised.value) == f"{APPEND_R6}: suite 'nope' does not exist; import the dataset first"


@pytest.mark.django_db
def test_import_tb_results_unequal_run_counts_print_tb_aggs_block_and_always_our_pass_at_k(
    alice, team_a, tmp_path
):
    rows = _rows()
    other = json.loads(json.dumps(rows[0]))
    other["uid"] = "cloud_drive.py:test_other"
    output = _import(_write(tmp_path, rows + [other]), "--campaign", "uneven", "--team", team_a.slug)
    lines = output.splitlines()
    block = lines[lines.index("What tb agg prints (error rows counted as failures):") + 1 :][:5]
    assert block == [
        "Number of tests: 2",
        "Runs per test: 6",
        "Total runs: 7",
        "Mean per-sample accuracy: 0.71 (95% CI: 0.35-0.94)",
        "",
    ]
    table = {
        cells[0]: cells[1:]
        for cells in (re.split(r"\s{2,}", line.strip()) for line in lines[lines.index("Side by side:") + 1 :])
    }
    assert table["runs per test"] == [
        "6",
        "1–6 (differ)",
        "counts differ (1–6 per test): tb agg prints the first test's count and leaves pass@k / pass^k out",
    ]
    assert table["pass@1"] == [
        "—",
        "0.83",
        "ours over 2 of 2 task(s) with ≥ 1 done attempts; not printed by tb agg: run counts differ",
    ]
    assert table["pass@5"] == [
        "—",
        "1.00",
        "ours over 1 of 2 task(s) with ≥ 5 done attempts; not printed by tb agg: run counts differ",
    ]
    assert table["pass^5 plug-in (c/n)^k"][:2] == ["—", "0.13"]
    assert table["pass^5 unbiased C(c,k)/C(n,k)"][:2] == ["—", "0.00"]
    assert table["coverage"][:2] == ["—", "0.58"]


@pytest.mark.django_db
def test_minimal_suite_belongs_to_the_importing_team_and_never_leaks(
    alice, bob, erin, team_a, team_b, client
):
    from rest_framework.test import APIClient

    _import(APPEND_R6, "--campaign", "r6", "--team", team_a.slug)
    suite = Campaign.objects.get(name="r6").suite
    task = suite.tasks.get()
    first_user_message = task.spec["query"]
    assert first_user_message  # the rows' first user message is what must not leak
    outsider, member = APIClient(), APIClient()
    outsider.force_authenticate(erin)
    member.force_authenticate(bob)

    assert [row["name"] for row in outsider.get("/api/suites/").json()["results"]] == []
    assert (
        outsider.get(f"/api/suites/{suite.pk}/").status_code,
        outsider.get(f"/api/suites/{suite.pk}/tasks/").status_code,
        outsider.get(f"/api/tasks/{task.pk}/").status_code,
    ) == (404, 404, 404)
    assert first_user_message not in outsider.get(f"/api/tasks/{task.pk}/").content.decode()
    assert [row["name"] for row in member.get("/api/suites/").json()["results"]] == ["tb-results-team-a-r6"]
    assert member.get(f"/api/tasks/{task.pk}/").status_code == 200

    # Team B importing the same rows under the same campaign name gets its own suite.
    _import(APPEND_R6, "--campaign", "r6", "--team", team_b.slug, "--owner", "erin")
    other = Campaign.objects.get(name="r6", team=team_b).suite
    assert (other.team, other.pk != suite.pk, Suite.objects.get(pk=suite.pk).team) == (team_b, True, team_a)
