"""ThinkingBox dataset import, against the real dataset files in ../shared/thinkingbox."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tb_engine.spec import GoldenCall
from tb_engine.thinkingbox.dataset import (
    UnsupportedScenario,
    init_config,
    parse_dataset,
    parse_scenario,
    parse_test_file,
    read_dataset,
)
from tb_engine.thinkingbox.errors import ThinkingBoxFormatError
from tests.support.paths import THINKINGBOX_DIR

REF = THINKINGBOX_DIR
DATASET = REF / "dataset"
RETAIL_FILE = DATASET / "test_case/sandbox_external_retail/sandbox_external_retail_group1.py"
BOOKING_FILE = DATASET / "test_case/external_booking_v1/external_booking_v1_group1_rubrics_yesno.py"
TEST_LIST = REF / "releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml"

pytestmark = pytest.mark.skipif(not REF.exists(), reason="ThinkingBox reference material not present")


@pytest.fixture(scope="module")
def suite_and_problems():
    return parse_dataset(DATASET, TEST_LIST, tools_dir=REF / "tools")


def _copy_dataset(tmp_path: Path) -> Path:
    target = tmp_path / "dataset"
    shutil.copytree(DATASET, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def test_parse_scenario_policy_tools_and_server():
    domain = parse_scenario(
        DATASET / "scenario/sandbox_external_retail.yaml", REF / "tools/tools_sandbox_external_retail.json"
    )
    assert domain.name == "sandbox_external_retail"
    assert domain.backend == "mcp"
    assert domain.mcp["server"] == "sandbox_external_retail"
    assert domain.policy.startswith("# TECHHOME DIRECT SUPPORT AGENT - SYSTEM INSTRUCTIONS")
    assert len(domain.tools) == 33
    assert domain.tools["zendesk_create_item"].parameters["required"] == ["table", "item"]
    assert domain.mcp["policy_sources"][0] == "Customer Segmentation and Tiers.md"
    assert len(domain.mcp["policy_sources"]) == 9


def test_parse_test_file_reads_all_retail_tasks():
    tasks = parse_test_file(RETAIL_FILE)
    assert len(tasks) == 98
    assert len({t.id for t in tasks}) == 98
    assert all(t.checks == () for t in tasks)  # every real body is the standard hash check


def test_parse_test_file_carrier_exception_task_fields():
    task = {t.id: t for t in parse_test_file(RETAIL_FILE)}[
        "sandbox_external_retail_group1.py:test_case_ST003_006"
    ]
    assert task.domain == "sandbox_external_retail"
    assert task.query.startswith("My order was supposed to arrive over two weeks ago")
    assert task.extra["line"] == 984
    assert task.source == f"{RETAIL_FILE}:984"
    assert len(task.golden) == 7
    assert task.rubrics == ()
    assert "zendesk_tickets" in task.data_patch


def test_parse_test_file_first_golden_call_is_ticket_creation():
    task = parse_test_file(RETAIL_FILE)[0]
    assert task.id == "sandbox_external_retail_group1.py:test_case_ST002_001"
    assert task.golden[0].tool == "zendesk_create_item"
    assert task.golden[0].arguments["table"] == "tickets"
    assert task.golden[1] == GoldenCall(
        tool="zendesk_update_item",
        arguments={
            "id": "6",
            "table": "tickets",
            "item": {**dict.fromkeys(task.golden[1].arguments["item"]), "status": "solved"},
        },
    )


def test_parse_test_file_booking_rubrics_are_graded():
    tasks = parse_test_file(BOOKING_FILE)
    assert len(tasks) == 15
    assert all(len(t.rubrics) >= 1 for t in tasks)
    assert tasks[0].rubrics[0].startswith("Policy states")


def test_parse_dataset_with_test_list_selects_present_tasks(suite_and_problems):
    suite, problems = suite_and_problems
    assert len(suite.tasks) == 98 + 89 + 15
    assert suite.evaluation_only is True
    assert sorted(suite.domains) == ["external_booking_v1", "sandbox_external_retail"]
    assert len(problems) == 507 - 202  # the three held-back domains' files are not shipped
    assert (
        problems[0].message
        == "listed test's file is not in the dataset: sandbox_auto_insurance_group1.py:test_bil_001"
    )
    assert problems[0].line == 203
    assert {p.message.split(": ")[1].split(":")[0] for p in problems} == {
        "sandbox_auto_insurance_group1.py",
        "sandbox_consulting_group1.py",
        "sandbox_neobank_support_v1_group1.py",
        "sandbox_neobank_support_v1_group1_rubrics_yesno.py",
    }


def test_parse_dataset_with_test_list_skips_and_counts_unlisted_tests():
    read = read_dataset(DATASET, TEST_LIST)
    # the base definitions of the 15 rubric tasks, and the non-benchmark scenarios' tests
    assert read.skipped == {
        "airline_tau_bench.py": 21,
        "banking.py": 12,
        "banking_email.py": 1,
        "email_system_org.py": 3,
        "external_booking_v1_group1.py": 15,
        "mcs_defaults.py": 3,
    }
    assert read.skipped_count == 55
    assert read.left_out == {}  # retail_banking_email (two servers) is never read: no listed test uses it


def test_parse_dataset_content_hash_is_stable_and_task_specific(suite_and_problems):
    suite, _ = suite_and_problems
    again, _ = parse_dataset(DATASET)
    first = "sandbox_external_retail_group1.py:test_case_ST002_001"
    assert again.tasks[first].content_hash() == suite.tasks[first].content_hash()
    assert len({t.content_hash() for t in suite.tasks.values()}) == 202


def test_init_config_merges_scenario_world_state_with_task_init(suite_and_problems):
    suite, _ = suite_and_problems
    task = suite.tasks["sandbox_external_retail_group1.py:test_case_ST002_001"]
    config = init_config(suite.domains[task.domain], task)
    assert sorted(config) == ["data_patch", "golden_test_case", "rubrics", "sources"]
    assert len(config["sources"]) == 9
    assert config["data_patch"] == task.data_patch
    assert config["golden_test_case"]["tool_interactions"][0]["tool"] == "zendesk_create_item"


def test_parse_test_file_custom_body_is_unsupported_not_graded(tmp_path):
    source = RETAIL_FILE.read_text()
    source = source.replace(
        "    # Validate database hash\n    validate_database(x)\n\n\ndef test_case_ST002_003",
        "    validate_database(x)\n    assert 'refund' in x.response\n\n\ndef test_case_ST002_003",
        1,
    )
    path = tmp_path / "custom.py"
    path.write_text(source)
    tasks = {t.id: t for t in parse_test_file(path)}
    custom = tasks["custom.py:test_case_ST002_001"]
    assert [c.kind for c in custom.checks] == ["custom_unsupported"]
    assert custom.checks[0].params["reason"] == "line 206: statement is not a call to a check helper"
    assert tasks["custom.py:test_case_ST002_003"].checks == ()


def test_parse_test_file_malformed_yaml_names_file_line_and_test(tmp_path):
    source = RETAIL_FILE.read_text().replace(
        "    user_context: |-\n      Rules:", "    user_context: [unclosed\n      Rules:", 1
    )
    path = tmp_path / "broken.py"
    path.write_text(source)
    with pytest.raises(ThinkingBoxFormatError) as caught:
        parse_test_file(path)
    assert caught.value.test == "test_case_ST002_001"
    assert caught.value.file == str(path)
    assert 44 <= caught.value.line <= 60
    assert str(caught.value).startswith(
        f"{path}:{caught.value.line}: test test_case_ST002_001: malformed YAML"
    )


def test_parse_dataset_unknown_scenario_is_an_error(tmp_path):
    dataset = _copy_dataset(tmp_path)
    target = dataset / "test_case/sandbox_external_retail/sandbox_external_retail_group1.py"
    target.write_text(
        target.read_text().replace("scenario: sandbox_external_retail", "scenario: no_such_scenario", 1)
    )
    with pytest.raises(ThinkingBoxFormatError) as caught:
        parse_dataset(dataset)
    assert caught.value.message == "unknown scenario 'no_such_scenario'"
    assert caught.value.line == 8


def test_parse_dataset_duplicate_task_id_is_an_error(tmp_path):
    dataset = _copy_dataset(tmp_path)
    (dataset / "test_case/extra").mkdir()
    shutil.copy(RETAIL_FILE, dataset / "test_case/extra/sandbox_external_retail_group1.py")
    with pytest.raises(ThinkingBoxFormatError) as caught:
        parse_dataset(dataset)
    assert caught.value.test == "test_case_ST002_001"
    assert caught.value.message.startswith(
        "duplicate task id 'sandbox_external_retail_group1.py:test_case_ST002_001'"
    )


def test_parse_test_file_duplicate_function_is_an_error(tmp_path):
    source = RETAIL_FILE.read_text()
    start = source.index("def test_case_ST002_001")
    end = source.index("def test_case_ST002_003")
    path = tmp_path / "dup.py"
    path.write_text(source + "\n\n" + source[start:end])
    with pytest.raises(ThinkingBoxFormatError) as caught:
        parse_test_file(path)
    assert caught.value.message == "duplicate test id (first defined on line 43)"


def test_parse_scenario_server_is_the_world_state_key_not_the_file_name():
    domain = parse_scenario(DATASET / "scenario/airline_tau_bench_full.yaml")
    assert (domain.name, domain.mcp["server"]) == ("airline_tau_bench_full", "airline_tau_bench")
    assert sorted(domain.mcp["world_state"]) == ["flights", "reservations", "users"]
    banking = parse_scenario(DATASET / "scenario/retail_banking.yaml")
    assert (banking.name, banking.mcp["server"]) == ("retail_banking", "online_banking")


def test_parse_scenario_with_two_servers_is_unsupported_naming_them():
    with pytest.raises(UnsupportedScenario) as caught:
        parse_scenario(DATASET / "scenario/retail_banking_email.yaml")
    assert caught.value.servers == ["online_banking", "email_system"]
    assert caught.value.message == (
        "world_state names 2 servers (online_banking, email_system); an attempt talks to exactly one MCP server"
    )


def test_parse_dataset_whole_folder_as_shipped_without_a_test_list():
    read = read_dataset(DATASET)
    assert sorted(read.suite.domains) == [
        "airline_tau_bench_full",
        "email_system_org",
        "external_booking_v1",
        "mcs_defaults",
        "retail_banking",
        "sandbox_external_retail",
    ]
    assert len(read.suite.tasks) == 98 + 104 + 15 + 21 + 12 + 3 + 3
    assert read.skipped == {}
    assert read.left_out == {"retail_banking_email": ["banking_email.py:test_transfer_and_sendemail"]}
    scenario_problems = [str(p) for p in read.problems if "scenario" in p.message]
    assert scenario_problems == [
        f"{DATASET / 'scenario/retail_banking_email.yaml'}: scenario retail_banking_email: world_state names "
        "2 servers (online_banking, email_system); an attempt talks to exactly one MCP server; "
        "its 1 test(s) are not imported"
    ]
    custom = [
        p for p in read.problems if p.message == "custom test body: imported but not graded automatically"
    ]
    assert len(custom) == 21 + 12 + 3 + 3  # every non-benchmark test checks effects its own way


def test_parse_dataset_non_benchmark_test_without_init_starts_from_the_scenario_state():
    suite, _ = parse_dataset(DATASET)
    task = suite.tasks["airline_tau_bench.py:test_000_book_one_way_economy_flight"]
    assert (task.domain, task.data_patch, task.golden, task.extra["init"]) == (
        "airline_tau_bench_full",
        {},
        (),
        {},
    )
    assert [c.kind for c in task.checks] == ["custom_unsupported"]
    config = init_config(suite.domains[task.domain], task)
    assert sorted(config) == ["flights", "reservations", "users"]


def test_parse_dataset_with_test_list_never_reads_unlisted_files_or_scenarios(tmp_path):
    dataset = _copy_dataset(tmp_path)
    (dataset / "scenario/mcs_defaults.yaml").write_text("world_state: [unclosed\n")
    (dataset / "test_case/banking.py").write_text("def test_broken(:\n")
    read = read_dataset(dataset, TEST_LIST)
    assert len(read.suite.tasks) == 202
    assert read.skipped["mcs_defaults.py"] == 3
    assert "banking.py" not in read.skipped
    assert [str(p) for p in read.problems if "Python" in p.message] == [
        f"{dataset / 'test_case/banking.py'}: not in the test list and not valid Python: not counted"
    ]
    with pytest.raises(ThinkingBoxFormatError) as caught:
        read_dataset(dataset)  # without a list every file is read: the broken ones are errors
    assert (caught.value.file, caught.value.message.split(":")[0]) == (
        str(dataset / "test_case/banking.py"),
        "not valid Python",
    )


def test_parse_dataset_listed_test_missing_from_a_present_file_and_listed_twice(tmp_path):
    listing = tmp_path / "list.yaml"
    listing.write_text(
        "- sandbox_external_retail_group1.py:test_case_ST002_001\n"
        "- sandbox_external_retail_group1.py:test_no_such_test\n"
        "- sandbox_external_retail_group1.py:test_case_ST002_001\n"
        "- no_such_file.py:test_x\n"
    )
    read = read_dataset(DATASET, listing)
    assert list(read.suite.tasks) == ["sandbox_external_retail_group1.py:test_case_ST002_001"]
    assert [(p.line, p.message) for p in read.problems] == [
        (2, "listed task not found in the dataset: sandbox_external_retail_group1.py:test_no_such_test"),
        (3, "listed twice: sandbox_external_retail_group1.py:test_case_ST002_001"),
        (4, "listed test's file is not in the dataset: no_such_file.py:test_x"),
    ]
    assert read.skipped["sandbox_external_retail_group1.py"] == 97


def test_parse_dataset_listed_test_of_a_two_server_scenario_is_a_problem_not_a_crash(tmp_path):
    listing = tmp_path / "list.yaml"
    listing.write_text(
        "- banking_email.py:test_transfer_and_sendemail\n"
        "- sandbox_external_retail_group1.py:test_case_ST002_001\n"
    )
    read = read_dataset(DATASET, listing)
    assert list(read.suite.tasks) == ["sandbox_external_retail_group1.py:test_case_ST002_001"]
    assert read.left_out == {"retail_banking_email": ["banking_email.py:test_transfer_and_sendemail"]}
    assert [p.message for p in read.problems] == [
        "scenario retail_banking_email: world_state names 2 servers (online_banking, email_system); "
        "an attempt talks to exactly one MCP server; its 1 test(s) are not imported"
    ]


def test_parse_test_file_alias_bomb_in_a_docstring_is_refused_naming_file_line_and_test(tmp_path):
    levels = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    levels += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 8)]
    bomb = "\n".join(f"    {line}" for line in levels)
    source = RETAIL_FILE.read_text().replace("    user_context: |-\n", f"{bomb}\n    user_context: |-\n", 1)
    path = tmp_path / "bomb.py"
    path.write_text(source)

    with pytest.raises(ThinkingBoxFormatError) as caught:
        parse_test_file(path)

    assert (caught.value.test, caught.value.file) == ("test_case_ST002_001", str(path))
    assert caught.value.message == (
        "malformed YAML: aliases expand to more than 10000 nodes (alias bomb?); anchor here"
    )
    assert source.splitlines()[caught.value.line - 1].strip().startswith("a3: &a3")
