"""import_thinkingbox: a ThinkingBox dataset folder -> an evaluation-only suite, transactionally."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.suites.models import Domain, Suite, Task
from tests.thinkingbox.conftest import MCP_COMMAND, SHARED, table_counts, tb_test_source, write_dataset


def _import(dataset, *extra, **options):
    call_command(
        "import_thinkingbox", "--dataset", str(dataset), *extra, stdout=options.pop("stdout", None), **options
    )


@pytest.mark.django_db
def test_import_thinkingbox_stores_tasks_domain_and_launch(shop_dataset):
    _import(
        shop_dataset,
        "--suite-name",
        "shop",
        "--mcp-command",
        MCP_COMMAND,
        "--mcp-env",
        "TB_TEST_SERVER_NAME=tb_test_shop",
    )
    suite = Suite.objects.get(name="shop")
    assert (suite.source, suite.evaluation_only) == (Suite.Source.THINKINGBOX, True)
    domain = Domain.objects.get(suite=suite)
    mcp = domain.spec["mcp"]
    assert (domain.name, domain.backend, domain.policy) == (
        "tb_test_shop",
        "mcp",
        "You are a support agent for the test shop.",
    )
    assert mcp["policy_sources"] == ["Ticket policy.md"]
    assert mcp["launch"]["args"] == ["-m", "tests.support.tb_mcp_server"]
    assert mcp["launch"]["env"] == {"TB_TEST_SERVER_NAME": "tb_test_shop"}
    assert sorted(t["name"] for t in domain.spec["tools"]) == ["create_ticket", "get_ticket", "update_ticket"]
    task = Task.objects.get(suite=suite, task_id="shop.py:test_open_and_close")
    assert task.spec["query"] == "Please open a ticket about my late order and close it."
    assert task.spec["user_context"] == "You are Alex Kim."
    assert [c["tool"] for c in task.spec["golden"]] == ["create_ticket", "update_ticket"]
    assert task.spec["extra"]["init"]["golden_test_case"]["tool_interactions"][1]["parameters"] == {
        "ticket_id": "2",
        "status": "solved",
    }
    assert task.validation == Task.Validation.UNKNOWN


@pytest.mark.django_db
def test_import_thinkingbox_custom_body_is_invalid_not_graded(shop_dataset):
    _import(shop_dataset)
    task = Task.objects.get(task_id="shop.py:test_custom_body")
    assert (task.validation, task.validation_detail, task.is_gradable) == (
        "invalid",
        "custom check — not supported",
        False,
    )


@pytest.mark.django_db
def test_import_thinkingbox_reimport_updates_in_place_by_content_hash(tmp_path):
    dataset = write_dataset(tmp_path / "d", [tb_test_source("test_open_and_close")])
    _import(dataset)
    first = Task.objects.get(task_id="shop.py:test_open_and_close")
    _import(dataset)
    assert table_counts()["Task"] == 1
    assert Task.objects.get(pk=first.pk).content_hash == first.content_hash
    write_dataset(tmp_path / "d", [tb_test_source("test_open_and_close", query="Close my ticket please.")])
    _import(dataset)
    changed = Task.objects.get(pk=first.pk)
    assert (table_counts()["Task"], changed.spec["query"]) == (1, "Close my ticket please.")
    assert changed.content_hash != first.content_hash


@pytest.mark.django_db
def test_import_thinkingbox_malformed_yaml_names_file_line_and_test_and_writes_nothing(
    tmp_path, shop_dataset
):
    _import(shop_dataset)
    before = table_counts()
    broken = write_dataset(
        tmp_path / "broken", [tb_test_source("test_ok"), tb_test_source("test_broken", query="[unclosed")]
    )
    with pytest.raises(CommandError) as raised:
        _import(broken)
    assert "shop.py:" in str(raised.value)
    assert "test test_broken: malformed YAML" in str(raised.value)
    assert table_counts() == before


@pytest.mark.django_db
def test_import_thinkingbox_unknown_scenario_is_an_error(tmp_path):
    dataset = write_dataset(tmp_path / "d", [tb_test_source("test_open_and_close")])
    shop = dataset / "test_case" / "tb_test_shop" / "shop.py"
    shop.write_text(shop.read_text().replace("scenario: tb_test_shop", "scenario: nowhere"))
    with pytest.raises(CommandError) as raised:
        _import(dataset)
    assert str(raised.value) == f"{shop}:3: unknown scenario 'nowhere'"
    assert table_counts()["Suite"] == 0


@pytest.mark.django_db
def test_import_thinkingbox_duplicate_test_ids_are_an_error(tmp_path):
    dataset = write_dataset(tmp_path / "d", [tb_test_source("test_twice"), tb_test_source("test_twice")])
    with pytest.raises(CommandError) as raised:
        _import(dataset)
    assert "test test_twice: duplicate test id (first defined on line" in str(raised.value)
    assert table_counts()["Task"] == 0


@pytest.mark.django_db
def test_import_thinkingbox_bad_mcp_env_names_the_option(shop_dataset):
    with pytest.raises(CommandError) as raised:
        _import(shop_dataset, "--mcp-env", "NOEQUALS")
    assert str(raised.value) == "--mcp-env 'NOEQUALS': expected KEY=VALUE"


@pytest.mark.django_db
def test_import_thinkingbox_url_launch_fills_in_the_server(shop_dataset):
    _import(shop_dataset, "--mcp-url", "http://127.0.0.1:9/{server}/mcp")
    assert Domain.objects.get().spec["mcp"]["launch"] == {
        "env": {},
        "url": "http://127.0.0.1:9/tb_test_shop/mcp",
    }


@pytest.mark.django_db
def test_import_thinkingbox_real_release_with_test_list():
    from io import StringIO

    from tb_engine.thinkingbox import read_test_list

    listed = read_test_list(SHARED / "releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml")
    out = StringIO()
    _import(
        SHARED / "dataset",
        "--test-list",
        str(SHARED / "releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml"),
        stdout=out,
    )
    suite = Suite.objects.get(name="thinkingbox-bench")
    stored = set(suite.tasks.values_list("task_id", flat=True))
    assert stored <= set(listed)
    assert len(stored) == 98 + 89 + 15
    assert suite.tasks.filter(validation=Task.Validation.INVALID).count() == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "Suite thinkingbox-bench v1.0 (evaluation only): 202 new, 0 changed, 0 unchanged task(s); "
        "0 invalid (custom check — not supported)."
    )
    assert lines[1] == (
        "Skipped 55 test(s) not in the test list (airline_tau_bench.py 21, banking.py 12, banking_email.py 1, "
        "email_system_org.py 3, external_booking_v1_group1.py 15, mcs_defaults.py 3)."
    )
    assert sum(1 for line in lines if "listed test's file is not in the dataset" in line) == 507 - 202
    assert dict(Domain.objects.filter(suite=suite).values_list("name", "spec__mcp__server")) == {
        "external_booking_v1": "external_booking_v1",
        "sandbox_external_retail": "sandbox_external_retail",
    }


@pytest.mark.django_db
def test_import_thinkingbox_whole_folder_as_shipped_stores_scenarios_by_server():
    from io import StringIO

    out = StringIO()
    _import(SHARED / "dataset", stdout=out)
    suite = Suite.objects.get(name="thinkingbox-bench")
    servers = dict(Domain.objects.filter(suite=suite).values_list("name", "spec__mcp__server"))
    assert servers == {
        "airline_tau_bench_full": "airline_tau_bench",
        "email_system_org": "email_system",
        "external_booking_v1": "external_booking_v1",
        "mcs_defaults": "ms_store",
        "retail_banking": "online_banking",
        "sandbox_external_retail": "sandbox_external_retail",
    }
    assert suite.tasks.count() == 256
    assert suite.tasks.filter(validation=Task.Validation.INVALID).count() == 39
    assert not suite.tasks.filter(task_id__startswith="banking_email.py:").exists()
    problem = next(line for line in out.getvalue().splitlines() if "retail_banking_email" in line)
    assert problem.endswith(
        "scenario retail_banking_email: world_state names 2 servers (online_banking, email_system); "
        "an attempt talks to exactly one MCP server; its 1 test(s) are not imported"
    )
