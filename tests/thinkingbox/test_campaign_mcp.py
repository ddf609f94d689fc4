"""Attempts of an imported ThinkingBox suite run through a campaign on an MCP server (tests/support/tb_mcp_server.py)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from apps.agents.services import agent_config_for
from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.services import campaign_create, campaign_start
from apps.suites.models import Suite, Task
from tb_engine.spec_json import task_from_dict
from tests.campaigns.conftest import drain
from tests.thinkingbox.conftest import MCP_COMMAND, ROOT, tb_test_source, write_dataset


@pytest.fixture(autouse=True)
def _close_mcp_pools():
    yield
    from tb_engine.thinkingbox.mcp_pool import close_pools

    close_pools()


@pytest.fixture
def silent_shop_suite(shop_dataset) -> Suite:
    """The shop suite on the test server without its geteffects declarations (like the real servers)."""
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(shop_dataset),
        "--suite-name",
        "silent-shop",
        "--mcp-command",
        MCP_COMMAND,
        "--mcp-cwd",
        str(ROOT),
        "--mcp-env",
        "TB_TEST_SERVER_DECLARE=0",
        "--mcp-pool-size",
        "1",
        stdout=StringIO(),
    )
    return Suite.objects.get(name="silent-shop")


@pytest.fixture
def shop_suite(shop_dataset) -> Suite:
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(shop_dataset),
        "--suite-name",
        "shop",
        "--mcp-command",
        MCP_COMMAND,
        "--mcp-cwd",
        str(ROOT),
        "--mcp-pool-size",
        "1",
        stdout=StringIO(),
    )
    return Suite.objects.get(name="shop")


def _run(suite, alice, team_a, *, n=2, tasks=None):
    campaign = campaign_create(
        name="tb golden",
        team=team_a,
        owner=alice,
        agent=agent_config_for("golden"),
        suite=suite,
        tasks=tasks,
        n_attempts=n,
    )
    campaign_start(campaign=campaign)
    drain(campaign)
    campaign.refresh_from_db()
    return campaign


@pytest.mark.django_db
def test_imported_suite_campaign_golden_agent_passes_with_both_verdicts(shop_suite, alice, team_a):
    campaign = _run(shop_suite, alice, team_a)
    attempts = list(Attempt.objects.filter(campaign=campaign).order_by("index"))
    assert campaign.status == "done"
    assert [(a.task.task_id, a.status, a.verdict) for a in attempts] == [
        ("shop.py:test_open_and_close", "done", "pass"),
        ("shop.py:test_open_and_close", "done", "pass"),
    ]
    evidence = attempts[0].result["extra"]["thinkingbox"]
    assert (evidence["disagree"], evidence["effects"]["tb_test_shop"]["their_hash_pass"]) == (False, True)
    assert evidence["effects"]["tb_test_shop"]["our_state_pass"] is True
    assert attempts[0].task_hash == Task.objects.get(task_id="shop.py:test_open_and_close").content_hash
    summary = TaskSummary.objects.get(campaign=campaign)
    assert (summary.n_done, summary.n_pass) == (2, 2)


@pytest.mark.django_db
def test_imported_suite_campaign_flags_disagreement_between_verdicts(
    silent_shop_suite, alice, team_a, client
):
    # The agent writes other free text in the subject: ThinkingBox's hash ignores subject, our diff
    # (no unstable declaration for this server) does not — the attempt must say they disagree,
    # and the server's hash is the verdict of record (SPEC §2): the attempt passes.
    shop_suite = silent_shop_suite
    task = Task.objects.get(suite=shop_suite, task_id="shop.py:test_open_and_close")
    task.spec["golden"][0]["arguments"]["subject"] = "Different words"
    task.content_hash = task_from_dict(task.spec).content_hash()  # a changed task is a new version
    task.save(update_fields=["spec", "content_hash"])
    campaign = _run(shop_suite, alice, team_a, n=1)
    attempt = Attempt.objects.get(campaign=campaign)
    evidence = attempt.result["extra"]["thinkingbox"]
    assert (attempt.verdict, attempt.categories) == ("pass", [])
    assert [(d["kind"], d["field"]) for d in attempt.result["diff"]] == [("wrong_value", "subject")]
    assert [(c["kind"], c["passed"]) for c in attempt.result["checks"]] == [("server_state_hash", True)]
    assert (evidence["disagree"], evidence["effects"]["tb_test_shop"]["their_hash_pass"]) == (True, True)
    assert evidence["verdict_of_record"] == "server hash"
    client.force_login(alice)
    page = client.get(f"/attempts/{attempt.pk}/").content.decode()
    assert 'id="verdict-disagreement"' in page
    assert "our diff below is kept as diagnostics only" in page


@pytest.mark.django_db
def test_imported_suite_init_error_makes_the_attempt_infra_error(tmp_path, alice, team_a, settings):
    settings.ATTEMPT_MAX_RETRIES = 0
    dataset = write_dataset(
        tmp_path / "bad", [tb_test_source("test_bad_table", patch="{warehouses: [{id: W-1}]}")]
    )
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(dataset),
        "--suite-name",
        "bad-shop",
        "--mcp-command",
        MCP_COMMAND,
        "--mcp-cwd",
        str(ROOT),
        "--mcp-pool-size",
        "1",
        stdout=StringIO(),
    )
    campaign = _run(Suite.objects.get(name="bad-shop"), alice, team_a, n=1)
    attempt = Attempt.objects.get(campaign=campaign)
    assert (attempt.status, attempt.verdict) == ("infra_error", "")
    assert (
        "__reserved__init failed for shop.py:test_bad_table: unknown table warehouses" in attempt.error_detail
    )
    assert TaskSummary.objects.get(campaign=campaign).n_infra_error == 1


@pytest.mark.django_db
def test_imported_suite_without_launch_config_is_infra_error_naming_the_fix(
    shop_dataset, alice, team_a, settings, monkeypatch
):
    settings.ATTEMPT_MAX_RETRIES = 0
    monkeypatch.delenv("TB_MCP_COMMAND", raising=False)
    monkeypatch.delenv("TB_MCP_URL", raising=False)
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(shop_dataset),
        "--suite-name",
        "nolaunch",
        "--no-launch",
        stdout=StringIO(),
    )
    task = Task.objects.get(suite__name="nolaunch", task_id="shop.py:test_open_and_close")
    campaign = _run(Suite.objects.get(name="nolaunch"), alice, team_a, n=1, tasks=[task])
    attempt = Attempt.objects.get(campaign=campaign)
    assert attempt.status == "infra_error"
    assert "has no MCP launch config" in attempt.error_detail


@pytest.mark.django_db
def test_scenario_named_apart_from_its_server_runs_on_that_server(shop_dataset, alice, team_a):
    # As airline_tau_bench_full.yaml -> airline_tau_bench: the file (and domain) name differs
    # from the world_state server name; launch, init and the effects evidence use the server's.
    (shop_dataset / "scenario/tb_test_shop.yaml").rename(shop_dataset / "scenario/shop_full.yaml")
    shop = shop_dataset / "test_case/tb_test_shop/shop.py"
    shop.write_text(shop.read_text().replace("scenario: tb_test_shop", "scenario: shop_full"))
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(shop_dataset),
        "--suite-name",
        "renamed",
        "--mcp-command",
        MCP_COMMAND,
        "--mcp-cwd",
        str(ROOT),
        "--mcp-pool-size",
        "1",
        stdout=StringIO(),
    )
    suite = Suite.objects.get(name="renamed")
    task = Task.objects.get(suite=suite, task_id="shop.py:test_open_and_close")
    assert (task.domain.name, task.domain.spec["mcp"]["server"]) == ("shop_full", "tb_test_shop")
    campaign = _run(suite, alice, team_a, n=1, tasks=[task])
    attempt = Attempt.objects.get(campaign=campaign)
    evidence = attempt.result["extra"]["thinkingbox"]
    assert (attempt.status, attempt.verdict, evidence["server"]) == ("done", "pass", "tb_test_shop")
    assert (evidence["disagree"], sorted(evidence["effects"])) == (False, ["tb_test_shop"])
