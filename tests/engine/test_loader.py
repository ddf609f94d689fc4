"""Loading specs: the retail domain loads; bad files give errors naming file, task and field."""

from __future__ import annotations

import pytest

from tb_engine.loader import SpecError, load_domain, load_suite, load_tasks
from tests.engine.engine_support import RETAIL_DIR, write_domain

DOMAIN = """
name: shop
title: Shop
policy: Be nice.
tables:
  tickets:
    primary_key: [id]
    columns: {id: text, status: text, updated_at: text}
    unstable: [updated_at]
tools:
  - name: set_status
    description: Set a ticket status.
    parameters:
      type: object
      properties: {ticket_id: {type: string}, status: {type: string, enum: [open, solved]}}
      required: [ticket_id, status]
      additionalProperties: false
data:
  tickets:
    - {id: "1", status: open, updated_at: x}
"""
TOOLS = """
def set_status(db, ticket_id, status):
    db.execute("UPDATE tickets SET status = ? WHERE id = ?", (status, ticket_id))
    return {"ok": True}
"""


def _task(body: str) -> str:
    return "tasks:\n  - id: t1\n    query: q\n    user_context: c\n" + body


def test_load_retail_domain_has_all_tasks(retail_domain, retail_tasks):
    assert retail_domain.name == "retail"
    assert len(retail_tasks) == 12
    assert retail_tasks["retail/ticket_hold_carrier_exception"].golden[-1].arguments["status"] == "hold"


def test_load_tasks_golden_unknown_tool_names_file_task_and_field(tmp_path):
    folder = write_domain(
        tmp_path,
        DOMAIN,
        TOOLS,
        _task("    golden:\n      - tool: delete_everything\n        arguments: {}\n"),
    )
    domain = load_domain(folder)
    with pytest.raises(SpecError) as caught:
        load_tasks(folder, domain)
    assert caught.value.errors == [
        f"{folder / 'tasks.yaml'}: task shop/t1: golden[0].tool: unknown tool 'delete_everything'"
    ]


def test_load_tasks_golden_arguments_failing_schema_name_the_argument(tmp_path):
    body = "    golden:\n      - tool: set_status\n        arguments: {ticket_id: '1', status: closed}\n"
    folder = write_domain(tmp_path, DOMAIN, TOOLS, _task(body))
    with pytest.raises(SpecError) as caught:
        load_tasks(folder, load_domain(folder))
    assert caught.value.errors == [
        f"{folder / 'tasks.yaml'}: task shop/t1: golden[0].arguments.status: 'closed' is not one of ['open', 'solved']"
    ]


def test_load_tasks_patch_unknown_column_and_check_unknown_table_are_both_reported(tmp_path):
    body = (
        "    data_patch:\n      tickets:\n        - {id: '2', colour: red}\n"
        "    golden: []\n"
        "    checks:\n      - kind: no_new_rows\n        table: refunds\n"
    )
    folder = write_domain(tmp_path, DOMAIN, TOOLS, _task(body))
    with pytest.raises(SpecError) as caught:
        load_tasks(folder, load_domain(folder))
    path = folder / "tasks.yaml"
    assert caught.value.errors == [
        f"{path}: task shop/t1: data_patch.tickets[0].colour: unknown column of table tickets",
        f"{path}: task shop/t1: checks[0].table: unknown table 'refunds'",
    ]


def test_load_tasks_duplicate_id_is_reported(tmp_path):
    tasks = _task("    golden: []\n") + "  - id: t1\n    query: q\n    user_context: c\n    golden: []\n"
    folder = write_domain(tmp_path, DOMAIN, TOOLS, tasks)
    with pytest.raises(SpecError) as caught:
        load_tasks(folder, load_domain(folder))
    assert caught.value.errors == [f"{folder / 'tasks.yaml'}: task shop/t1: id: duplicate task id"]


def test_load_domain_missing_tool_function_names_tools_py(tmp_path):
    folder = write_domain(tmp_path, DOMAIN, "def other(db):\n    return 1\n")
    with pytest.raises(SpecError) as caught:
        load_domain(folder)
    assert caught.value.errors == [
        f"{folder / 'domain.yaml'}: tools[0](set_status).name: no function set_status() in {folder / 'tools.py'}"
    ]


def test_load_domain_already_broken_never_imports_its_tools_py(tmp_path):
    bad = DOMAIN.replace("status: text,", "status: varchar,")
    marker = tmp_path / "tools-ran"
    folder = write_domain(tmp_path, bad, f"open({str(marker)!r}, 'w').write('ran')\n" + TOOLS)
    with pytest.raises(SpecError) as caught:
        load_domain(folder)
    path = folder / "domain.yaml"
    assert caught.value.errors == [
        f"{path}: tables.tickets.columns.status: unknown type 'varchar' (use one of text, integer, real, boolean, json)",
    ]
    assert marker.exists() is False


def test_load_suite_skipping_a_broken_domain_never_imports_its_tools_py(tmp_path):
    marker = tmp_path / "tools-ran"
    write_domain(
        tmp_path, DOMAIN.replace("policy: Be nice.", "policy: ''"), f"open({str(marker)!r}, 'w')\n" + TOOLS
    )
    (tmp_path / "suite.yaml").write_text("name: mini\nversion: 1\n")
    suite = load_suite(tmp_path, skip_broken_domains=True)
    assert (sorted(suite.domains), marker.exists()) == ([], False)


def test_load_domain_base_data_wrong_type_names_row_and_column(tmp_path):
    bad = DOMAIN.replace('- {id: "1", status: open', "- {id: 1, status: open")
    folder = write_domain(tmp_path, bad, TOOLS)
    with pytest.raises(SpecError) as caught:
        load_domain(folder)
    assert caught.value.errors == [f"{folder / 'domain.yaml'}: data.tickets[0].id: expected text, got 1"]


def test_load_suite_discovers_domain_folders(tmp_path):
    write_domain(
        tmp_path,
        DOMAIN,
        TOOLS,
        _task("    golden:\n      - tool: set_status\n        arguments: {ticket_id: '1', status: solved}\n"),
    )
    (tmp_path / "suite.yaml").write_text("name: mini\nversion: 1\n")
    suite = load_suite(tmp_path)
    assert (suite.name, suite.version, sorted(suite.domains), sorted(suite.tasks)) == (
        "mini",
        "1",
        ["shop"],
        ["shop/t1"],
    )


def test_load_suite_listed_missing_domain_is_an_error(tmp_path):
    (tmp_path / "suite.yaml").write_text("name: mini\nversion: 1\ndomains: [nowhere]\n")
    with pytest.raises(SpecError) as caught:
        load_suite(tmp_path)
    assert caught.value.errors == [
        f"{tmp_path / 'suite.yaml'}: domains: no {tmp_path / 'nowhere' / 'domain.yaml'}"
    ]


def test_task_content_hash_changes_with_golden(retail_tasks):
    hashes = {task.content_hash() for task in retail_tasks.values()}
    assert len(hashes) == len(retail_tasks)
    assert RETAIL_DIR.is_dir()
