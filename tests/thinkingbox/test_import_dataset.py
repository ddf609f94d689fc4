"""import_thinkingbox: a ThinkingBox dataset folder -> an evaluation-only suite, transactionally."""

from __future__ import annotations

import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.suites.models import Domain, Suite, Task
from tests.thinkingbox.conftest import MCP_COMMAND, SHARED, table_counts, tb_test_source, write_dataset

SERVERS_YAML = SHARED / "servers/servers.yaml"
TEST_LIST = SHARED / "releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml"
LAUNCH_OPTIONS = {"--servers", "--mcp-command", "--mcp-url", "--no-launch"}


@pytest.fixture(autouse=True)
def _no_launch_defaults_from_the_environment(monkeypatch):
    for name in ("TB_MCP_COMMAND", "TB_MCP_URL", "TB_SERVERS_PYTHON"):
        monkeypatch.delenv(name, raising=False)


def _import(dataset, *extra, stdout=None, default_launch=True):
    """Run import_thinkingbox; the test MCP server is the launch config unless the test gives one."""
    launch = ("--mcp-command", MCP_COMMAND) if default_launch and not LAUNCH_OPTIONS & set(extra) else ()
    call_command(
        "import_thinkingbox", "--dataset", str(dataset), *launch, *extra, stdout=stdout or StringIO()
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
    from tb_engine.thinkingbox import read_test_list

    listed = read_test_list(SHARED / "releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml")
    out = StringIO()
    _import(
        SHARED / "dataset",
        "--test-list",
        str(TEST_LIST),
        "--servers",
        str(SERVERS_YAML),
        "--python",
        sys.executable,
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
    assert [line for line in lines if "is not in the dataset" in line] == [
        f"  problem: {TEST_LIST}:{span}: {name} is not in the dataset: its {count} listed test(s) are not imported"
        for span, name, count in (
            ("203-302", "sandbox_auto_insurance_group1.py", 100),
            ("303-391", "sandbox_neobank_support_v1_group1.py", 89),
            ("392-406", "sandbox_neobank_support_v1_group1_rubrics_yesno.py", 15),
            ("407-507", "sandbox_consulting_group1.py", 101),
        )
    ]
    assert dict(Domain.objects.filter(suite=suite).values_list("name", "spec__mcp__server")) == {
        "external_booking_v1": "external_booking_v1",
        "sandbox_external_retail": "sandbox_external_retail",
    }


@pytest.mark.django_db
def test_import_thinkingbox_whole_folder_as_shipped_stores_scenarios_by_server():
    out = StringIO()
    _import(SHARED / "dataset", "--servers", str(SERVERS_YAML), "--python", sys.executable, stdout=out)
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


@pytest.mark.django_db
def test_import_thinkingbox_servers_yaml_is_the_launch_config_with_python_filled_in():
    _import(
        SHARED / "dataset",
        "--test-list",
        str(TEST_LIST),
        "--servers",
        str(SERVERS_YAML),
        "--python",
        sys.executable,
        "--mcp-env",
        "TYPESENSE_URL=http://127.0.0.1:9",
    )
    launches = dict(Domain.objects.values_list("name", "spec__mcp__launch"))
    assert launches == {
        "sandbox_external_retail": {
            "command": sys.executable,
            "args": ["-m", "tb_business_ops_servers_202606.mcp_sandbox_external_retail"],
            "env": {"TYPESENSE_API_KEY": "Fake", "TYPESENSE_URL": "http://127.0.0.1:9"},
        },
        "external_booking_v1": {
            "command": sys.executable,
            "args": ["-m", "tb_business_ops_servers_202606.mcp_external_booking_v1"],
            "env": {"TYPESENSE_API_KEY": "Fake", "TYPESENSE_URL": "http://127.0.0.1:9"},
        },
    }


@pytest.mark.django_db
def test_import_thinkingbox_servers_yaml_entry_is_found_by_server_not_scenario_name():
    _import(SHARED / "dataset", "--servers", str(SERVERS_YAML), "--python", sys.executable)
    airline = Domain.objects.get(name="airline_tau_bench_full").spec["mcp"]["launch"]
    assert (airline["command"], airline["args"], airline["env"]) == (
        sys.executable,
        ["-m", "thinkingbox_tools.mcp_airline_tau_bench"],
        {},
    )


@pytest.mark.django_db
def test_import_thinkingbox_python_from_env_when_no_option(monkeypatch, shop_dataset, tmp_path):
    servers = tmp_path / "servers.yaml"
    servers.write_text(
        'servers:\n  tb_test_shop:\n    command: ["{python}", "-m", "tests.support.tb_mcp_server"]\n'
    )
    monkeypatch.setenv("TB_SERVERS_PYTHON", sys.executable)
    _import(shop_dataset, "--servers", str(servers))
    assert Domain.objects.get().spec["mcp"]["launch"]["command"] == sys.executable


@pytest.mark.django_db
def test_import_thinkingbox_scenario_without_launch_config_is_a_problem_and_not_imported(tmp_path):
    servers = tmp_path / "servers.yaml"
    servers.write_text(
        "servers:\n"
        "  sandbox_external_retail:\n"
        "    type: mcp-process\n"
        '    command: ["{python}", "-m", "tb_business_ops_servers_202606.mcp_sandbox_external_retail"]\n'
    )
    out = StringIO()
    _import(
        SHARED / "dataset",
        "--test-list",
        str(TEST_LIST),
        "--servers",
        str(servers),
        "--python",
        sys.executable,
        stdout=out,
    )
    assert list(Domain.objects.values_list("name", flat=True)) == ["sandbox_external_retail"]
    assert Task.objects.count() == 98
    assert not Task.objects.filter(task_id__startswith="external_booking_v1").exists()
    lines = out.getvalue().splitlines()
    booking = SHARED / "dataset/scenario/external_booking_v1.yaml"
    assert [line for line in lines if "no launch config" in line] == [
        f"  problem: {booking}: scenario external_booking_v1: no launch config for its server "
        f"'external_booking_v1' (--servers {servers} has no entry for it); its 104 test(s) are not imported"
    ]
    assert lines[-1] == (
        "1 scenario(s) without a launch config, not imported (external_booking_v1; 104 test(s)): "
        "see the problems above."
    )


@pytest.mark.django_db
def test_import_thinkingbox_without_any_launch_config_imports_nothing_and_names_the_fix(shop_dataset):
    with pytest.raises(CommandError) as raised:
        _import(shop_dataset, default_launch=False)
    scenario = shop_dataset / "scenario/tb_test_shop.yaml"
    assert str(raised.value) == (
        f"nothing to import: {scenario}: scenario tb_test_shop: no launch config for its server "
        "'tb_test_shop' (give --servers servers.yaml, --mcp-command or --mcp-url); its 2 test(s) are not imported"
    )
    assert table_counts() == dict.fromkeys(table_counts(), 0)


@pytest.mark.django_db
def test_import_thinkingbox_no_launch_option_stores_tasks_that_cannot_run(shop_dataset):
    out = StringIO()
    _import(shop_dataset, "--no-launch", stdout=out)
    assert "launch" not in Domain.objects.get().spec["mcp"]
    assert Task.objects.count() == 2
    assert out.getvalue().splitlines()[-1] == (
        "Imported with --no-launch: tasks cannot be run until re-imported with --servers, "
        "--mcp-command or --mcp-url."
    )


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--servers", "{servers}"],
            "{servers}: server 'tb_test_shop': command uses {{python}}: name the servers' interpreter (--python)",
        ),
        (
            ["--servers", "{servers}", "--python", "/no/such/python"],
            "--python '/no/such/python': not an executable file",
        ),
        (
            ["--servers", "{servers}", "--mcp-command", "python -m x"],
            "give --servers or --mcp-command / --mcp-url, not both",
        ),
        (
            ["--no-launch", "--mcp-url", "http://127.0.0.1:9/mcp"],
            "--no-launch cannot be combined with --servers, --mcp-command or --mcp-url",
        ),
        (
            ["--mcp-command", "{{python}} -m tests.support.tb_mcp_server"],
            "--mcp-command uses {{python}}: name the servers' interpreter (--python)",
        ),
    ],
)
@pytest.mark.django_db
def test_import_thinkingbox_bad_launch_options_name_the_option_and_write_nothing(
    shop_dataset, tmp_path, options, message
):
    servers = tmp_path / "servers.yaml"
    servers.write_text(
        'servers:\n  tb_test_shop:\n    command: ["{python}", "-m", "tests.support.tb_mcp_server"]\n'
    )
    with pytest.raises(CommandError) as raised:
        _import(shop_dataset, *[o.format(servers=servers) for o in options])
    assert str(raised.value) == message.format(servers=servers)
    assert table_counts()["Task"] == 0


@pytest.mark.django_db
def test_import_thinkingbox_bad_servers_yaml_entry_fails_only_when_used(shop_dataset, tmp_path):
    servers = tmp_path / "servers.yaml"
    servers.write_text(
        "servers:\n"
        '  tb_test_shop: {command: ["{python}", "-m", "tests.support.tb_mcp_server"]}\n'
        "  unused_server: {type: carrier-pigeon}\n"
    )
    _import(shop_dataset, "--servers", str(servers), "--python", sys.executable)
    assert Task.objects.count() == 2
    servers.write_text("servers:\n  tb_test_shop: {type: carrier-pigeon}\n")
    with pytest.raises(CommandError) as raised:
        _import(shop_dataset, "--servers", str(servers), "--python", sys.executable, "--suite-name", "other")
    assert str(raised.value) == (
        f"{servers}: server 'tb_test_shop': type 'carrier-pigeon' is not supported "
        "(use mcp-process with a command, or give a url)"
    )
    servers.write_text("servers: [not, a, mapping]\n")
    with pytest.raises(CommandError) as raised:
        _import(shop_dataset, "--servers", str(servers), "--suite-name", "other")
    assert (
        str(raised.value) == f"{servers}: servers config needs a 'servers:' mapping of server name -> entry"
    )
    assert not Suite.objects.filter(name="other").exists()
